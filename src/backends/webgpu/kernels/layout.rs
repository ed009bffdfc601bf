//! Data movement as strided word copies (`copy.wgsl`): `Permute`, `Slice` and `Concat` (one
//! dispatch per input), and the word copies that fill shadows (see `alias.rs`). `Reshape` needs
//! no kernel: its output aliases its input's storage (see `plan.rs`).

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms,
    Wgsl, coalesce, to_u32, words_per_element,
};
use crate::error::{Error, Result};
use crate::program::geometry::contiguous_strides;
use crate::program::ops::{Concat, Permute, Reshape, Slice};
use crate::program::{TensorDecl, TensorId};

const COPY: &str = include_str!("copy.wgsl");

/// The copy's uniform block.
const COPY_PARAMS: [Field; 4] = [
    Field::vec4(
        "head",
        "x: element count, y: rank, z: src offset (words), w: dst offset (words)",
    ),
    Field::dims8("shape", ""),
    Field::dims8("src_strides", ""),
    Field::dims8("dst_strides", ""),
];

/// Strided copy of 32-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CopyKey {
    /// Invocations per workgroup.
    pub wg: u32,
}

impl Kernel for CopyKey {
    fn storage_bindings(&self) -> u32 {
        2
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::f32();
        w.uniforms(&COPY_PARAMS);
        w.storage("src", Elem::U32);
        w.storage("dst", Elem::U32);
        w.element_main(self.wg, "p.head.x", COPY);
        w
    }
}

fn copy_kernel(config: KernelConfig) -> Vec<KernelKey> {
    vec![KernelKey::new(CopyKey {
        wg: config.workgroup_size,
    })]
}

impl GpuOp for Reshape {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        let (x, out) = (self.x, self.out);
        if ctx.dtype(x)? != ctx.dtype(out)? || ctx.numel(x)? != ctx.numel(out)? {
            return Err(Error::invalid_program(format!(
                "reshape of {} {:?} into {} {:?}",
                ctx.dtype(x)?.name(),
                ctx.shape(x)?,
                ctx.dtype(out)?.name(),
                ctx.shape(out)?
            )));
        }
        Ok(Vec::new())
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        _config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        Vec::new()
    }
}

impl GpuOp for Permute {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        permute(ctx, self.x, &self.perm, self.out)
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        copy_kernel(config)
    }
}

impl GpuOp for Slice {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        slice(ctx, self.x, self.axis, self.start, self.end, self.out)
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        copy_kernel(config)
    }
}

impl GpuOp for Concat {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        concat(ctx, &self.inputs, self.axis, self.out)
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        copy_kernel(config)
    }
}

/// One strided copy, in elements of the tensors' dtype.
struct CopySpec {
    shape: Vec<usize>,
    src_strides: Vec<usize>,
    src_offset: usize,
    dst_strides: Vec<usize>,
    dst_offset: usize,
}

fn copy(
    ctx: &PlanContext<'_>,
    src: TensorId,
    dst: TensorId,
    spec: CopySpec,
) -> Result<Option<Dispatch>> {
    let dtype = ctx.dtype(src)?;
    if ctx.dtype(dst)? != dtype {
        return Err(Error::invalid_program(format!(
            "copy from {} to {}: dtypes differ",
            dtype.name(),
            ctx.dtype(dst)?.name()
        )));
    }
    let words = words_per_element(dtype);
    let CopySpec {
        mut shape,
        mut src_strides,
        src_offset,
        mut dst_strides,
        dst_offset,
    } = spec;
    if words > 1 {
        for stride in src_strides.iter_mut().chain(dst_strides.iter_mut()) {
            *stride *= words;
        }
        shape.push(words);
        src_strides.push(1);
        dst_strides.push(1);
    }
    let spec = CopySpec {
        shape,
        src_strides,
        src_offset: src_offset.saturating_mul(words),
        dst_strides,
        dst_offset: dst_offset.saturating_mul(words),
    };
    word_copy(ctx, src, dst, spec)
}

/// A copy of `words` 32-bit words from the start of `src` to the start of `dst`, whatever their
/// dtypes: how the planner fills a shadow (see `alias.rs`), a tensor id past the program's.
///
/// # Errors
/// `InvalidArgument` when the count exceeds what a dispatch can address.
pub(crate) fn copy_words(
    ctx: &PlanContext<'_>,
    src: TensorId,
    dst: TensorId,
    words: usize,
) -> Result<Option<Dispatch>> {
    let spec = CopySpec {
        shape: vec![words],
        src_strides: vec![1],
        src_offset: 0,
        dst_strides: vec![1],
        dst_offset: 0,
    };
    word_copy(ctx, src, dst, spec)
}

/// The dispatch of a strided copy whose shape, strides and offsets count 32-bit words.
fn word_copy(
    ctx: &PlanContext<'_>,
    src: TensorId,
    dst: TensorId,
    spec: CopySpec,
) -> Result<Option<Dispatch>> {
    let CopySpec {
        shape,
        src_strides,
        src_offset,
        dst_strides,
        dst_offset,
    } = spec;
    let n: usize = shape.iter().product();
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(None);
    };
    let (shape, strides) = coalesce(&shape, &[src_strides, dst_strides]);
    let uniforms = Uniforms::new(&COPY_PARAMS)
        .vec4(
            "head",
            [
                to_u32(n, "element count")?,
                to_u32(shape.len(), "rank")?,
                to_u32(src_offset, "source offset")?,
                to_u32(dst_offset, "destination offset")?,
            ],
        )
        .dims8("shape", &shape, "copy shape")
        .dims8("src_strides", &strides[0], "copy strides")
        .dims8("dst_strides", &strides[1], "copy strides")
        .finish()?;
    Ok(Some(Dispatch {
        key: KernelKey::new(CopyKey {
            wg: ctx.config.workgroup_size,
        }),
        uniforms,
        bindings: vec![Binding::Tensor(src), Binding::Tensor(dst)],
        workgroups,
    }))
}

/// `out` dim `i` is `x` dim `perm[i]`.
///
/// # Errors
/// `InvalidProgram` when `perm` is not a permutation of `x`'s dims or `out` has another shape.
fn permute(
    ctx: &PlanContext<'_>,
    x: TensorId,
    perm: &[u32],
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let x_shape = ctx.shape(x)?;
    let rank = x_shape.len();
    let mut seen = vec![false; rank];
    for &p in perm {
        match seen.get_mut(p as usize) {
            Some(slot) if !*slot => *slot = true,
            _ => {
                return Err(Error::invalid_program(format!(
                    "permute: {perm:?} is not a permutation of {rank} dims"
                )));
            }
        }
    }
    if perm.len() != rank {
        return Err(Error::invalid_program(format!(
            "permute: {perm:?} is not a permutation of {rank} dims"
        )));
    }
    let x_strides = contiguous_strides(x_shape);
    let shape: Vec<usize> = perm.iter().map(|&p| x_shape[p as usize]).collect();
    if ctx.shape(out)? != shape.as_slice() {
        return Err(Error::invalid_program(format!(
            "permute: out has shape {:?}, expected {shape:?}",
            ctx.shape(out)?
        )));
    }
    let spec = CopySpec {
        src_strides: perm.iter().map(|&p| x_strides[p as usize]).collect(),
        src_offset: 0,
        dst_strides: contiguous_strides(&shape),
        dst_offset: 0,
        shape,
    };
    Ok(copy(ctx, x, out, spec)?.into_iter().collect())
}

/// Elements `start..end` of `x` along `axis`.
///
/// # Errors
/// `InvalidProgram` for an axis past the rank or an `out` of another shape; `InvalidArgument`
/// when the range does not fit the bound extent.
fn slice(
    ctx: &PlanContext<'_>,
    x: TensorId,
    axis: u32,
    start: u64,
    end: Option<u64>,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let x_shape = ctx.shape(x)?;
    let axis = axis as usize;
    let extent = *x_shape.get(axis).ok_or_else(|| {
        Error::invalid_program(format!(
            "slice: axis {axis} is past the rank {}",
            x_shape.len()
        ))
    })?;
    let end = end.unwrap_or(extent as u64);
    if start > end || end > extent as u64 {
        return Err(Error::invalid_argument(format!(
            "slice: {start}..{end} does not fit dim {axis} of extent {extent}"
        )));
    }
    // Both fit: end <= extent, a usize.
    let (start, end) = (start as usize, end as usize);
    let mut shape = x_shape.to_vec();
    shape[axis] = end - start;
    if ctx.shape(out)? != shape.as_slice() {
        return Err(Error::invalid_program(format!(
            "slice: out has shape {:?}, expected {shape:?}",
            ctx.shape(out)?
        )));
    }
    let x_strides = contiguous_strides(x_shape);
    let spec = CopySpec {
        src_offset: start * x_strides[axis],
        src_strides: x_strides,
        dst_strides: contiguous_strides(&shape),
        dst_offset: 0,
        shape,
    };
    Ok(copy(ctx, x, out, spec)?.into_iter().collect())
}

/// `inputs` concatenated along `axis`, one copy per input.
///
/// # Errors
/// `InvalidProgram` for an empty input list, a bad axis, or shapes that do not line up.
fn concat(
    ctx: &PlanContext<'_>,
    inputs: &[TensorId],
    axis: u32,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let out_shape = ctx.shape(out)?.to_vec();
    let axis = axis as usize;
    if axis >= out_shape.len() || inputs.is_empty() {
        return Err(Error::invalid_program(format!(
            "concat: axis {axis} of rank {} with {} inputs",
            out_shape.len(),
            inputs.len()
        )));
    }
    let out_strides = contiguous_strides(&out_shape);
    let mut offset = 0usize;
    let mut dispatches = Vec::with_capacity(inputs.len());
    for &input in inputs {
        let shape = ctx.shape(input)?.to_vec();
        let lines_up = shape.len() == out_shape.len()
            && shape
                .iter()
                .zip(&out_shape)
                .enumerate()
                .all(|(d, (a, b))| d == axis || a == b);
        if !lines_up {
            return Err(Error::invalid_program(format!(
                "concat: input {input} of shape {shape:?} does not line up with {out_shape:?} along axis {axis}"
            )));
        }
        let spec = CopySpec {
            src_strides: contiguous_strides(&shape),
            src_offset: 0,
            dst_strides: out_strides.clone(),
            dst_offset: offset * out_strides[axis],
            shape: shape.clone(),
        };
        offset += shape[axis];
        dispatches.extend(copy(ctx, input, out, spec)?);
    }
    if offset != out_shape[axis] {
        return Err(Error::invalid_program(format!(
            "concat: inputs add up to {offset} along axis {axis}, out has {}",
            out_shape[axis]
        )));
    }
    Ok(dispatches)
}

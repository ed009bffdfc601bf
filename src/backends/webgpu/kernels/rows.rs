//! Row reductions over the last dim, one workgroup per row: `LayerNorm`, `Softmax` (with an
//! optional broadcast additive mask) and `L2Normalize`, over the shared tree reduction
//! (`reduce.wgsl`, the builder's `row_main`), plus the row helpers other row kernels (`rms_norm.rs`) plan with. Rows of at most 1024 elements get
//! 32-thread workgroups (both sizes are compiled at init), longer rows the configured size.
//!
//! Why 32 up to 1024: every reduction step is a workgroup barrier, and on CPU-emulated adapters
//! (SwiftShader in headless Chromium) barriers across 256 invocations dominate. Measured on
//! all-MiniLM-L6-v2, 1 x 128 tokens: the 6 attention softmaxes (rows of 128) took 2287 ms with
//! 256 threads per row and 255 ms with 32, the 13 layer norms (rows of 384) 428 ms and 36 ms;
//! the whole run 5.5 s -> 3.1 s. On a GPU, 32 threads per row is one warp.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::source::load_f32;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Precision,
    Uniforms, Wgsl, coalesce, grid_1d, to_u32,
};
use crate::error::{Error, Result};
use crate::program::geometry::broadcast_strides;
use crate::program::ops::{L2Normalize, LayerNorm, Softmax};
use crate::program::{DType, TensorDecl, TensorId};

const LAYER_NORM: &str = include_str!("layer_norm.wgsl");
const SOFTMAX: &str = include_str!("softmax.wgsl");
const SOFTMAX_MAIN: &str = include_str!("softmax_main.wgsl");
const L2_NORMALIZE: &str = include_str!("l2_normalize.wgsl");

/// The uniform block of the row kernels with one float parameter (layer norm, L2 norm, RMS
/// norm).
pub(crate) const ROW_PARAMS: [Field; 1] = [Field::vec4("head", "x: rows, y: H, z: eps (f32 bits)")];

/// The softmax's uniform block.
const SOFTMAX_PARAMS: [Field; 3] = [
    Field::vec4(
        "head",
        "x: rows, y: H, z: rank of the mask view (0 = no mask), w: -inf (f32 bits)",
    ),
    Field::dims8("shape", ""),
    Field::dims8("mask_strides", ""),
];

/// Layer norm kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LayerNormKey {
    /// Threads per row.
    pub wg: u32,
    /// Element types.
    pub precision: Precision,
}

impl Kernel for LayerNormKey {
    fn storage_bindings(&self) -> u32 {
        4
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        self.wg * 4
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&ROW_PARAMS);
        w.storage("x", Elem::Act);
        w.storage("gamma", Elem::F32);
        w.storage("beta", Elem::F32);
        w.storage("out", Elem::Act);
        w.reduce(self.wg);
        w.row_main(self.wg, LAYER_NORM);
        w
    }
}

/// Softmax kernel, with an optional additive mask of the given dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SoftmaxKey {
    /// The mask's dtype, if there is a mask.
    pub mask: Option<DType>,
    /// Threads per row.
    pub wg: u32,
    /// Element types.
    pub precision: Precision,
}

impl Kernel for SoftmaxKey {
    fn storage_bindings(&self) -> u32 {
        2 + u32::from(self.mask.is_some())
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        self.wg * 4
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&SOFTMAX_PARAMS);
        w.storage("x", Elem::Act);
        w.storage("out", Elem::Act);
        let add = match self.mask {
            Some(dtype) => {
                w.storage("mask", Elem::Word(dtype));
                format!(" + Acc({})", load_f32(dtype, "mask", "mask_index(i)"))
            }
            None => String::new(),
        };
        w.template(SOFTMAX, &[("MASK_ADD", &add)]);
        w.reduce(self.wg);
        w.row_main(self.wg, SOFTMAX_MAIN);
        w
    }
}

/// L2 normalisation kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct L2NormalizeKey {
    /// Threads per row.
    pub wg: u32,
    /// Element types.
    pub precision: Precision,
}

impl Kernel for L2NormalizeKey {
    fn storage_bindings(&self) -> u32 {
        2
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        self.wg * 4
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&ROW_PARAMS);
        w.storage("x", Elem::Act);
        w.storage("out", Elem::Act);
        w.reduce(self.wg);
        w.row_main(self.wg, L2_NORMALIZE);
        w
    }
}

/// The two workgroup sizes a row kernel is compiled in: the configured one and the short-row
/// one (see [`small_row_workgroup`]).
pub(crate) fn row_workgroups(config: KernelConfig) -> [u32; 2] {
    let wg = config.workgroup_size;
    [wg, small_row_workgroup(wg)]
}

impl GpuOp for LayerNorm {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.gamma, self.beta, self.out])?;
        layer_norm(ctx, self.x, self.gamma, self.beta, self.eps, self.out)
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        row_workgroups(config)
            .map(|wg| {
                KernelKey::new(LayerNormKey {
                    wg,
                    precision: floats.precision(self.x, Precision::F32),
                })
            })
            .to_vec()
    }
}

impl GpuOp for Softmax {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        softmax(ctx, self.x, self.mask, self.out)
    }

    fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let mask = self
            .mask
            .and_then(|id| tensors.get(id as usize))
            .map(|decl| decl.dtype);
        row_workgroups(config)
            .map(|wg| {
                KernelKey::new(SoftmaxKey {
                    mask,
                    wg,
                    precision: floats.precision(self.x, Precision::F32),
                })
            })
            .to_vec()
    }
}

impl GpuOp for L2Normalize {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        l2_normalize(ctx, self.x, self.eps, self.out)
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        row_workgroups(config)
            .map(|wg| {
                KernelKey::new(L2NormalizeKey {
                    wg,
                    precision: floats.precision(self.x, Precision::F32),
                })
            })
            .to_vec()
    }
}

/// Rows of at most this many elements use [`small_row_workgroup`] threads.
pub(crate) const SHORT_ROW: usize = 1024;

/// The workgroup size for short rows (e.g. attention scores over a short sequence): fewer idle
/// threads per row than the configured size.
pub(crate) fn small_row_workgroup(config_wg: u32) -> u32 {
    config_wg.min(32)
}

/// Threads per row for rows of `h` elements.
pub(crate) fn row_workgroup(ctx: &PlanContext<'_>, h: usize) -> u32 {
    if h <= SHORT_ROW {
        small_row_workgroup(ctx.config.workgroup_size)
    } else {
        ctx.config.workgroup_size
    }
}

/// (rows, row length) of `x`, after checking that `out` has as many elements.
pub(crate) fn rows_of(
    ctx: &PlanContext<'_>,
    what: &str,
    x: TensorId,
    out: TensorId,
) -> Result<(usize, usize)> {
    let shape = ctx.shape(x)?;
    let h = shape.last().copied().ok_or_else(|| {
        Error::invalid_program(format!("{what}: input is a scalar; it needs a last dim"))
    })?;
    let n = ctx.numel(x)?;
    if ctx.numel(out)? != n {
        return Err(Error::invalid_program(format!(
            "{what}: input has {n} elements, output {}",
            ctx.numel(out)?
        )));
    }
    Ok((n.checked_div(h).unwrap_or(0), h))
}

pub(crate) fn check_vector(
    ctx: &PlanContext<'_>,
    what: &str,
    id: TensorId,
    h: usize,
) -> Result<()> {
    if ctx.shape(id)? != [h] {
        return Err(Error::invalid_program(format!(
            "{what} has shape {:?}, expected [{h}]",
            ctx.shape(id)?
        )));
    }
    Ok(())
}

/// Layer norm of `x` with `gamma`, `beta` of shape `[H]`.
///
/// # Errors
/// `InvalidProgram` for mismatched shapes; `OutOfResources` for grids too large.
fn layer_norm(
    ctx: &PlanContext<'_>,
    x: TensorId,
    gamma: TensorId,
    beta: TensorId,
    eps: f32,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let (rows, h) = rows_of(ctx, "layer_norm", x, out)?;
    check_vector(ctx, "layer_norm gamma", gamma, h)?;
    check_vector(ctx, "layer_norm beta", beta, h)?;
    let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::new(LayerNormKey {
            wg: row_workgroup(ctx, h),
            precision: ctx.precision(x, Precision::F32),
        }),
        uniforms: Uniforms::new(&ROW_PARAMS)
            .vec4(
                "head",
                [
                    to_u32(rows, "rows")?,
                    to_u32(h, "row length")?,
                    eps.to_bits(),
                    0,
                ],
            )
            .finish()?,
        bindings: vec![
            Binding::Tensor(x),
            Binding::Tensor(gamma),
            Binding::Tensor(beta),
            Binding::Tensor(out),
        ],
        workgroups,
    }])
}

/// Softmax of `x` (+ `mask`, broadcast to `x`) over the last dim.
///
/// # Errors
/// `InvalidProgram` when the mask does not broadcast; `NotSupported` for mask views of more than
/// eight dims after coalescing; `OutOfResources` for grids too large.
fn softmax(
    ctx: &PlanContext<'_>,
    x: TensorId,
    mask: Option<TensorId>,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let (rows, h) = rows_of(ctx, "softmax", x, out)?;
    let x_shape = ctx.shape(x)?;
    let (view_shape, mask_strides, mask_dtype) = match mask {
        Some(mask) => {
            let strides = broadcast_strides(ctx.shape(mask)?, x_shape)
                .map_err(|e| Error::invalid_program(e.message().to_owned()))?;
            let (shape, mut strides) = coalesce(x_shape, &[strides]);
            (
                shape,
                strides.pop().unwrap_or_default(),
                Some(ctx.dtype(mask)?),
            )
        }
        None => (Vec::new(), Vec::new(), None),
    };
    let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
        return Ok(Vec::new());
    };
    let mut bindings = vec![Binding::Tensor(x), Binding::Tensor(out)];
    bindings.extend(mask.map(Binding::Tensor));
    Ok(vec![Dispatch {
        key: KernelKey::new(SoftmaxKey {
            mask: mask_dtype,
            wg: row_workgroup(ctx, h),
            precision: ctx.precision(x, Precision::F32),
        }),
        uniforms: Uniforms::new(&SOFTMAX_PARAMS)
            .vec4(
                "head",
                [
                    to_u32(rows, "rows")?,
                    to_u32(h, "row length")?,
                    to_u32(view_shape.len(), "mask rank")?,
                    f32::NEG_INFINITY.to_bits(),
                ],
            )
            .dims8("shape", &view_shape, "softmax mask view")
            .dims8("mask_strides", &mask_strides, "softmax mask strides")
            .finish()?,
        bindings,
        workgroups,
    }])
}

/// `x / max(||x||, eps)` over the last dim.
///
/// # Errors
/// `InvalidProgram` for mismatched sizes; `OutOfResources` for grids too large.
fn l2_normalize(
    ctx: &PlanContext<'_>,
    x: TensorId,
    eps: f32,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let (rows, h) = rows_of(ctx, "l2_normalize", x, out)?;
    let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::new(L2NormalizeKey {
            wg: row_workgroup(ctx, h),
            precision: ctx.precision(x, Precision::F32),
        }),
        uniforms: Uniforms::new(&ROW_PARAMS)
            .vec4(
                "head",
                [
                    to_u32(rows, "rows")?,
                    to_u32(h, "row length")?,
                    eps.to_bits(),
                    0,
                ],
            )
            .finish()?,
        bindings: vec![Binding::Tensor(x), Binding::Tensor(out)],
        workgroups,
    }])
}

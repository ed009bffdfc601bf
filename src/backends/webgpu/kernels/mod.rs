//! The WGSL kernels and, per op family, the Rust that turns one op with concrete shapes into
//! dispatches: which kernel, which uniform words, which tensors bound in which order, how many
//! workgroups.
//!
//! Conventions every kernel follows:
//! - Binding 0 is a uniform block of `vec4<u32>` fields (floats travel as their bits); bindings
//!   1.. are storage buffers, all `read_write`: WebGPU forbids one buffer (the activation arena)
//!   being bound read-only and writable in the same dispatch. Writable bindings of one dispatch
//!   must not overlap either (browsers check it, native Vulkan does not), so the planner gives a
//!   repeated operand its own copy (see `alias.rs`).
//! - Tensors are arrays of 32-bit words: f32 and i32 one word per element, u8 widened to one
//!   word, i64 two words (its little-endian bytes, low word first). WGSL has neither i64 nor u8.
//! - 1-D kernels index `(wid.y * nwg.x + wid.x) * WG + lid`; grids over
//!   `maxComputeWorkgroupsPerDimension` fold into a second dimension (see [`grid_1d`]).
//! - Every workgroup size fits the device's `maxComputeInvocationsPerWorkgroup`, which the
//!   backend queries (SwiftShader in headless Chromium allows 256).

pub(crate) mod convert;
pub(crate) mod elementwise;
pub(crate) mod gather;
pub(crate) mod layout;
pub(crate) mod matmul;
pub(crate) mod pool;
pub(crate) mod rows;
pub(crate) mod source;

use crate::error::{Error, ErrorCode, Result};
use crate::program::{BinaryOp, DType, TensorDecl, TensorId};

/// Most dims a broadcast, copy or mask view may have after coalescing.
pub(crate) const MAX_DIMS: usize = 8;

/// Which elementwise function a unary kernel applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum UnaryKind {
    /// Exact (erf) GELU.
    Gelu,
    /// Hyperbolic tangent.
    Tanh,
    /// `max(x, 0)`.
    Relu,
    /// `x * scale + bias`.
    Scale,
}

/// The matmul variants: two tilings (chosen by workgroup size) and the naive baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum MatMulKernel {
    /// 64 x 64 output tiles: 16 x 8 threads, 8 x 4 outputs each (128 invocations).
    Tiled64,
    /// 32 x 32 output tiles: 8 x 8 threads, 4 x 4 outputs each (64 invocations).
    Tiled32,
    /// One thread per output, no workgroup memory (8 x 8 threads).
    Naive,
}

/// One compiled kernel: the WGSL template plus everything that specialises it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KernelKey {
    /// Unary f32 function.
    Unary { op: UnaryKind, wg: u32 },
    /// Broadcasting f32 binary op.
    Binary { op: BinaryOp, wg: u32 },
    /// Batched matmul; `f16` stages tiles in f16.
    MatMul {
        kernel: MatMulKernel,
        bias: bool,
        f16: bool,
    },
    /// Layer norm over the last dim.
    LayerNorm { wg: u32 },
    /// Softmax over the last dim, with an optional additive mask of the given dtype.
    Softmax { mask: Option<DType>, wg: u32 },
    /// L2 normalisation over the last dim.
    L2Normalize { wg: u32 },
    /// Embedding gather with ids of the given dtype.
    Gather { ids: DType, wg: u32 },
    /// Strided copy of 32-bit words.
    Copy { wg: u32 },
    /// Dtype conversion.
    Cast { from: DType, to: DType, wg: u32 },
    /// `0..n` in the given dtype.
    Range { to: DType, wg: u32 },
    /// Masked mean pooling with a mask of the given dtype.
    MeanPool { mask: DType, wg: u32 },
    /// Byte merge into one word (unaligned parameter writes).
    Patch,
}

impl KernelKey {
    /// How many storage buffers the kernel binds (bindings 1..=n).
    pub(crate) fn storage_bindings(&self) -> u32 {
        match self {
            Self::Unary { .. }
            | Self::Copy { .. }
            | Self::Cast { .. }
            | Self::L2Normalize { .. } => 2,
            Self::Range { .. } | Self::Patch => 1,
            Self::Binary { .. } | Self::MeanPool { .. } => 3,
            Self::Softmax { mask, .. } => 2 + u32::from(mask.is_some()),
            Self::MatMul { bias, .. } => 3 + u32::from(*bias),
            Self::LayerNorm { .. } | Self::Gather { .. } => 4,
        }
    }

    /// A short label for pipelines and error messages, e.g. `"MatMul { kernel: Tiled64, .. }"`.
    pub(crate) fn label(&self) -> String {
        format!("{self:?}")
    }
}

/// Kernel choices that hold for a whole program (from compile specs and device limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelConfig {
    /// Invocations per workgroup for 1-D and row kernels (a power of two).
    pub workgroup_size: u32,
    /// The matmul kernel.
    pub matmul: MatMulKernel,
    /// Stage matmul tiles in f16 (only when the device has shader-f16).
    pub f16: bool,
}

/// A storage binding of one dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// The whole storage of a tensor.
    Tensor(TensorId),
    /// The plan's status word (gather range errors).
    Status,
}

/// One recorded compute dispatch.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Dispatch {
    /// The kernel.
    pub key: KernelKey,
    /// Uniform block, a multiple of 4 words.
    pub uniforms: Vec<u32>,
    /// Storage bindings 1..=n, in order.
    pub bindings: Vec<Binding>,
    /// Workgroup counts.
    pub workgroups: [u32; 3],
}

/// Concrete shapes and kernel choices an op family plans with.
pub(crate) struct PlanContext<'a> {
    /// The program's tensor declarations.
    pub tensors: &'a [TensorDecl],
    /// The bound shape of every tensor.
    pub shapes: &'a [Vec<usize>],
    /// Kernel choices.
    pub config: KernelConfig,
    /// The device's `maxComputeWorkgroupsPerDimension`.
    pub max_workgroups: u32,
}

impl PlanContext<'_> {
    /// The bound shape of `id`.
    pub(crate) fn shape(&self, id: TensorId) -> Result<&[usize]> {
        self.shapes
            .get(id as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| bad_tensor(id))
    }

    /// The dtype of `id`.
    pub(crate) fn dtype(&self, id: TensorId) -> Result<DType> {
        self.tensors
            .get(id as usize)
            .map(|t| t.dtype)
            .ok_or_else(|| bad_tensor(id))
    }

    /// Element count of `id` (overflow was ruled out when shapes were bound).
    pub(crate) fn numel(&self, id: TensorId) -> Result<usize> {
        Ok(self.shape(id)?.iter().product())
    }

    /// A 1-D grid of `ceil(threads / workgroup_size)` groups, or `None` for no threads.
    pub(crate) fn grid_for_threads(&self, threads: usize) -> Result<Option<[u32; 3]>> {
        let groups = threads.div_ceil(self.config.workgroup_size as usize);
        grid_1d(groups, self.max_workgroups)
    }
}

fn bad_tensor(id: TensorId) -> Error {
    Error::new(
        ErrorCode::InvalidProgram,
        format!("tensor {id} is not declared"),
    )
}

/// Words of one element on the GPU (see the module docs).
pub(crate) const fn words_per_element(dtype: DType) -> usize {
    match dtype {
        DType::I64 => 2,
        DType::F32 | DType::I32 | DType::U8 => 1,
    }
}

/// The WGSL array element type a tensor of `dtype` is bound as.
pub(crate) const fn wgsl_word_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::I32 | DType::I64 | DType::U8 => "u32",
    }
}

/// A grid of `groups` workgroups: `[groups, 1, 1]`, or folded into two dimensions when it
/// exceeds `max_per_dim`; `None` when there is nothing to run.
///
/// # Errors
/// `OutOfResources` when even two dimensions cannot hold it.
pub(crate) fn grid_1d(groups: usize, max_per_dim: u32) -> Result<Option<[u32; 3]>> {
    if groups == 0 {
        return Ok(None);
    }
    let max = max_per_dim.max(1) as usize;
    if groups <= max {
        return Ok(Some([groups as u32, 1, 1]));
    }
    let rows = groups.div_ceil(max);
    if rows > max {
        return Err(Error::new(
            ErrorCode::OutOfResources,
            format!("{groups} workgroups exceed the device's {max} x {max} grid"),
        ));
    }
    Ok(Some([max as u32, rows as u32, 1]))
}

/// `value` as a u32 kernel parameter.
///
/// # Errors
/// `OutOfResources` naming `what` when it does not fit 32 bits (kernels index with u32).
pub(crate) fn to_u32(value: usize, what: &str) -> Result<u32> {
    u32::try_from(value).map_err(|_| {
        Error::new(
            ErrorCode::OutOfResources,
            format!("{what} = {value} exceeds the 32-bit indices of the WebGPU kernels"),
        )
    })
}

/// Builds a uniform block of `vec4<u32>` fields.
#[derive(Default)]
pub(crate) struct Uniforms(Vec<u32>);

impl Uniforms {
    /// An empty block.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Appends one `vec4<u32>`.
    pub(crate) fn vec4(mut self, v: [u32; 4]) -> Self {
        self.0.extend_from_slice(&v);
        self
    }

    /// Appends `array<vec4<u32>, 2>` holding up to [`MAX_DIMS`] values (zero-padded).
    ///
    /// # Errors
    /// `NotSupported` for more than [`MAX_DIMS`] values; `OutOfResources` for a value over u32.
    pub(crate) fn dims8(mut self, values: &[usize], what: &str) -> Result<Self> {
        if values.len() > MAX_DIMS {
            return Err(Error::new(
                ErrorCode::NotSupported,
                format!(
                    "{what} needs {} dims; the WebGPU kernels handle {MAX_DIMS}",
                    values.len()
                ),
            ));
        }
        let mut packed = [0u32; MAX_DIMS];
        for (slot, &value) in packed.iter_mut().zip(values) {
            *slot = to_u32(value, what)?;
        }
        self.0.extend_from_slice(&packed);
        Ok(self)
    }

    /// The words.
    pub(crate) fn finish(self) -> Vec<u32> {
        self.0
    }
}

/// Row-major strides of `shape`, in elements.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// Drops extent-1 dims and merges neighbours that are contiguous in every stride list, so
/// kernels loop over as few dims as possible. Returns the new shape and stride lists.
pub(crate) fn coalesce(shape: &[usize], strides: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_shape: Vec<usize> = Vec::with_capacity(shape.len());
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::with_capacity(shape.len()); strides.len()];
    for (d, &extent) in shape.iter().enumerate() {
        if extent == 1 {
            continue;
        }
        let mergeable = out_shape.last().is_some()
            && strides.iter().zip(&out_strides).all(|(s, o)| {
                let inner = s.get(d).copied().unwrap_or(0);
                o.last().copied() == Some(inner * extent)
            });
        if mergeable {
            if let Some(last) = out_shape.last_mut() {
                *last *= extent;
            }
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                if let Some(last) = o.last_mut() {
                    *last = s.get(d).copied().unwrap_or(0);
                }
            }
        } else {
            out_shape.push(extent);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s.get(d).copied().unwrap_or(0));
            }
        }
    }
    (out_shape, out_strides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_folds_into_two_dimensions() {
        assert_eq!(grid_1d(0, 65535).unwrap(), None);
        assert_eq!(grid_1d(7, 65535).unwrap(), Some([7, 1, 1]));
        assert_eq!(grid_1d(65536, 65535).unwrap(), Some([65535, 2, 1]));
        assert_eq!(grid_1d(10, 4).unwrap(), Some([4, 3, 1]));
        assert_eq!(
            grid_1d(17, 4).unwrap_err().code(),
            ErrorCode::OutOfResources
        );
    }

    #[test]
    fn coalesce_merges_contiguous_dims_and_drops_ones() {
        let shape = [2, 1, 3, 4];
        let s = contiguous_strides(&shape);
        let (cs, cst) = coalesce(&shape, &[s.clone(), s]);
        assert_eq!(cs, vec![24]);
        assert_eq!(cst, vec![vec![1], vec![1]]);

        // b broadcasts over the middle dim: [2, 3, 4] with b strides [4, 0, 1].
        let (cs, cst) = coalesce(&[2, 3, 4], &[vec![12, 4, 1], vec![4, 0, 1]]);
        assert_eq!(cs, vec![2, 3, 4]);
        assert_eq!(cst, vec![vec![12, 4, 1], vec![4, 0, 1]]);

        // A transpose keeps its dims apart.
        let (cs, cst) = coalesce(&[3, 5], &[vec![1, 3], vec![5, 1]]);
        assert_eq!(cs, vec![3, 5]);
        assert_eq!(cst, vec![vec![1, 3], vec![5, 1]]);
    }

    #[test]
    fn coalesce_of_scalar_is_empty() {
        let (cs, cst) = coalesce(&[1, 1], &[vec![1, 1]]);
        assert!(cs.is_empty());
        assert_eq!(cst, vec![Vec::<usize>::new()]);
    }

    #[test]
    fn uniforms_refuse_too_many_dims() {
        let err = Uniforms::new().dims8(&[1; 9], "copy").err().unwrap();
        assert_eq!(err.code(), ErrorCode::NotSupported);
        let words = Uniforms::new()
            .vec4([1, 2, 3, 4])
            .dims8(&[5, 6], "x")
            .unwrap()
            .finish();
        assert_eq!(words, vec![1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0]);
    }
}

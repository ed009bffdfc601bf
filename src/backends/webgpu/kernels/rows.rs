//! Row reductions over the last dim, one workgroup per row: `LayerNorm`, `Softmax` (with an
//! optional broadcast additive mask) and `L2Normalize`, over the shared tree reduction
//! (`reduce.wgsl`), plus the row helpers other row kernels (`rms_norm.rs`) plan with. Rows of at most 1024 elements get
//! 32-thread workgroups (both sizes are compiled at init), longer rows the configured size.
//!
//! Why 32 up to 1024: every reduction step is a workgroup barrier, and on CPU-emulated adapters
//! (SwiftShader in headless Chromium) barriers across 256 invocations dominate. Measured on
//! all-MiniLM-L6-v2, 1 x 128 tokens: the 6 attention softmaxes (rows of 128) took 2287 ms with
//! 256 threads per row and 255 ms with 32, the 13 layer norms (rows of 384) 428 ms and 36 ms;
//! the whole run 5.5 s -> 3.1 s. On a GPU, 32 threads per row is one warp.

use crate::backends::webgpu::kernels::source::{load_f32, with_wg};
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms, coalesce,
    grid_1d, to_u32, wgsl_word_type,
};
use crate::error::{Error, Result};
use crate::program::geometry::broadcast_strides;
use crate::program::ops::{L2Normalize, LayerNorm, Softmax};
use crate::program::{DType, TensorDecl, TensorId};

/// The workgroup tree reduction every row kernel puts before its body.
pub(crate) const REDUCE: &str = include_str!("reduce.wgsl");
const LAYER_NORM: &str = include_str!("layer_norm.wgsl");
const SOFTMAX: &str = include_str!("softmax.wgsl");
const L2_NORMALIZE: &str = include_str!("l2_normalize.wgsl");

/// Declares a row kernel's key (`wg` threads per row) and its [`Kernel`]: the shared tree
/// reduction, then the op's WGSL `$body`, over `$bindings` storage bindings and one f32 of
/// workgroup memory per thread.
macro_rules! row_kernel {
    ($(#[$doc:meta])* $name:ident, $body:expr, $bindings:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) struct $name {
            /// Threads per row.
            pub wg: u32,
        }

        impl $crate::backends::webgpu::kernels::Kernel for $name {
            fn storage_bindings(&self) -> u32 {
                $bindings
            }

            fn invocations(&self) -> u32 {
                self.wg
            }

            fn workgroup_storage_bytes(&self) -> u32 {
                self.wg * 4
            }

            fn body(&self) -> String {
                $crate::backends::webgpu::kernels::source::with_wg(
                    &format!("{}\n{}", $crate::backends::webgpu::kernels::rows::REDUCE, $body),
                    self.wg,
                )
            }
        }
    };
}

row_kernel!(
    /// Layer norm kernel.
    LayerNormKey,
    LAYER_NORM,
    4
);

/// Softmax kernel, with an optional additive mask of the given dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SoftmaxKey {
    /// The mask's dtype, if there is a mask.
    pub mask: Option<DType>,
    /// Threads per row.
    pub wg: u32,
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

    fn body(&self) -> String {
        let (decl, add) = match self.mask {
            Some(dtype) => (
                format!(
                    "@group(0) @binding(3) var<storage, read_write> mask: array<{}>;",
                    wgsl_word_type(dtype)
                ),
                format!(" + {}", load_f32(dtype, "mask", "mask_index(i)")),
            ),
            None => (String::new(), String::new()),
        };
        with_wg(&format!("{REDUCE}\n{SOFTMAX}"), self.wg)
            .replace("{{MASK_DECL}}", &decl)
            .replace("{{MASK_ADD}}", &add)
    }
}

row_kernel!(
    /// L2 normalisation kernel.
    L2NormalizeKey,
    L2_NORMALIZE,
    2
);

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

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        row_workgroups(config)
            .map(|wg| KernelKey::new(LayerNormKey { wg }))
            .to_vec()
    }
}

impl GpuOp for Softmax {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        softmax(ctx, self.x, self.mask, self.out)
    }

    fn kernels(&self, tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        let mask = self
            .mask
            .and_then(|id| tensors.get(id as usize))
            .map(|decl| decl.dtype);
        row_workgroups(config)
            .map(|wg| KernelKey::new(SoftmaxKey { mask, wg }))
            .to_vec()
    }
}

impl GpuOp for L2Normalize {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        l2_normalize(ctx, self.x, self.eps, self.out)
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        row_workgroups(config)
            .map(|wg| KernelKey::new(L2NormalizeKey { wg }))
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
        }),
        uniforms: Uniforms::new()
            .vec4([
                to_u32(rows, "rows")?,
                to_u32(h, "row length")?,
                eps.to_bits(),
                0,
            ])
            .finish(),
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
        }),
        uniforms: Uniforms::new()
            .vec4([
                to_u32(rows, "rows")?,
                to_u32(h, "row length")?,
                to_u32(view_shape.len(), "mask rank")?,
                f32::NEG_INFINITY.to_bits(),
            ])
            .dims8(&view_shape, "softmax mask view")?
            .dims8(&mask_strides, "softmax mask strides")?
            .finish(),
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
        }),
        uniforms: Uniforms::new()
            .vec4([
                to_u32(rows, "rows")?,
                to_u32(h, "row length")?,
                eps.to_bits(),
                0,
            ])
            .finish(),
        bindings: vec![Binding::Tensor(x), Binding::Tensor(out)],
        workgroups,
    }])
}

//! `MeanPool` on the GPU: masked mean pooling over the sequence (`mean_pool.wgsl`).

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::source::nonzero;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms,
    Wgsl, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::MeanPool;
use crate::program::{DType, TensorDecl, TensorId};

const MEAN_POOL: &str = include_str!("mean_pool.wgsl");

/// The kernel's uniform block.
const MEAN_POOL_PARAMS: [Field; 1] = [Field::vec4("head", "x: B, y: S, z: H")];

/// Masked mean pooling kernel with a mask of the given dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MeanPoolKey {
    /// The mask's dtype.
    pub mask: DType,
    /// Invocations per workgroup.
    pub wg: u32,
}

impl Kernel for MeanPoolKey {
    fn storage_bindings(&self) -> u32 {
        3
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::f32();
        w.uniforms(&MEAN_POOL_PARAMS);
        w.storage("x", Elem::Act);
        w.storage("mask", Elem::Word(self.mask));
        w.storage("out", Elem::Act);
        w.push(&format!(
            "fn keep(j: u32) -> bool {{\n    return {};\n}}",
            nonzero(self.mask, "mask", "j")
        ));
        w.element_main(self.wg, "p.head.x * p.head.z", MEAN_POOL);
        w
    }
}

impl GpuOp for MeanPool {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        mean_pool(ctx, self.x, self.mask, self.out)
    }

    fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let wg = config.workgroup_size;
        tensors
            .get(self.mask as usize)
            .map(|mask| {
                KernelKey::new(MeanPoolKey {
                    mask: mask.dtype,
                    wg,
                })
            })
            .into_iter()
            .collect()
    }
}

/// `out[b, h]` = mean of `x[b, s, h]` over the positions `s` where `mask[b, s]` is non-zero.
///
/// # Errors
/// `InvalidProgram` unless `x` is `[B, S, H]`, `mask` `[B, S]` and `out` `[B, H]`;
/// `OutOfResources` for grids too large.
fn mean_pool(
    ctx: &PlanContext<'_>,
    x: TensorId,
    mask: TensorId,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let [b, s, h] = *ctx.shape(x)? else {
        return Err(Error::invalid_program(format!(
            "mean_pool: x has shape {:?}, expected [B, S, H]",
            ctx.shape(x)?
        )));
    };
    if ctx.shape(mask)? != [b, s] || ctx.shape(out)? != [b, h] {
        return Err(Error::invalid_program(format!(
            "mean_pool: mask {:?} / out {:?} do not match x [{b}, {s}, {h}]",
            ctx.shape(mask)?,
            ctx.shape(out)?
        )));
    }
    let Some(workgroups) = ctx.grid_for_threads(b * h)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::new(MeanPoolKey {
            mask: ctx.dtype(mask)?,
            wg: ctx.config.workgroup_size,
        }),
        uniforms: Uniforms::new(&MEAN_POOL_PARAMS)
            .vec4(
                "head",
                [
                    to_u32(b, "batch")?,
                    to_u32(s, "sequence")?,
                    to_u32(h, "hidden")?,
                    0,
                ],
            )
            .finish()?,
        bindings: vec![
            Binding::Tensor(x),
            Binding::Tensor(mask),
            Binding::Tensor(out),
        ],
        workgroups,
    }])
}

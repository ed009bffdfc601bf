//! Element-wise f32 ops on the GPU: `Unary` (GELU, tanh, ReLU, tanh-GELU, SiLU) and `Scale` share one kernel
//! (`unary.wgsl`), the broadcasting `Binary` ops another (`binary.wgsl`).

use crate::backends::webgpu::kernels::source::with_wg;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms, coalesce,
    to_u32,
};
use crate::error::{Error, Result};
use crate::program::geometry::broadcast_strides;
use crate::program::ops::{Binary, Scale, Unary};
use crate::program::{BinaryOp, TensorDecl, TensorId, UnaryOp};

const UNARY: &str = include_str!("unary.wgsl");
const BINARY: &str = include_str!("binary.wgsl");

/// Which elementwise function a unary kernel applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum UnaryKind {
    /// Exact (erf) GELU.
    Gelu,
    /// Hyperbolic tangent.
    Tanh,
    /// `max(x, 0)`.
    Relu,
    /// Tanh-form GELU.
    GeluTanh,
    /// `x * sigmoid(x)`.
    Silu,
    /// `x * scale + bias`.
    Scale,
}

impl UnaryKind {
    fn of(op: UnaryOp) -> Self {
        match op {
            UnaryOp::Gelu => Self::Gelu,
            UnaryOp::Tanh => Self::Tanh,
            UnaryOp::Relu => Self::Relu,
            UnaryOp::GeluTanh => Self::GeluTanh,
            UnaryOp::Silu => Self::Silu,
        }
    }

    fn expr(self) -> &'static str {
        match self {
            Self::Gelu => "gelu(v)",
            Self::Tanh => "tanh_stable(v)",
            Self::Relu => "select(0.0, v, v > 0.0)",
            Self::GeluTanh => "gelu_tanh(v)",
            Self::Silu => "silu(v)",
            Self::Scale => "v * scale + bias",
        }
    }
}

/// Unary f32 function kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct UnaryKey {
    /// The function.
    pub op: UnaryKind,
    /// Invocations per workgroup.
    pub wg: u32,
}

impl Kernel for UnaryKey {
    fn storage_bindings(&self) -> u32 {
        2
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn body(&self) -> String {
        with_wg(UNARY, self.wg).replace("{{EXPR}}", self.op.expr())
    }
}

/// Broadcasting f32 binary kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BinaryKey {
    /// The function.
    pub op: BinaryOp,
    /// Invocations per workgroup.
    pub wg: u32,
}

impl Kernel for BinaryKey {
    fn storage_bindings(&self) -> u32 {
        3
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn body(&self) -> String {
        let expr = match self.op {
            BinaryOp::Add => "va + vb",
            BinaryOp::Sub => "va - vb",
            BinaryOp::Mul => "va * vb",
            BinaryOp::Div => "va / vb",
        };
        with_wg(BINARY, self.wg).replace("{{EXPR}}", expr)
    }
}

impl GpuOp for Unary {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        unary(ctx, UnaryKind::of(self.op), self.x, self.out, 1.0, 0.0)
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        let (op, wg) = (UnaryKind::of(self.op), config.workgroup_size);
        vec![KernelKey::new(UnaryKey { op, wg })]
    }
}

impl GpuOp for Scale {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        unary(
            ctx,
            UnaryKind::Scale,
            self.x,
            self.out,
            self.scale,
            self.bias,
        )
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        let wg = config.workgroup_size;
        vec![KernelKey::new(UnaryKey {
            op: UnaryKind::Scale,
            wg,
        })]
    }
}

impl GpuOp for Binary {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.a, self.b, self.out])?;
        binary(ctx, self.op, self.a, self.b, self.out)
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        let wg = config.workgroup_size;
        vec![KernelKey::new(BinaryKey { op: self.op, wg })]
    }
}

/// `out = f(x)` (with `scale`/`bias` used by [`UnaryKind::Scale`]).
///
/// # Errors
/// `InvalidProgram` when `x` and `out` differ in size; `OutOfResources` for grids too large.
fn unary(
    ctx: &PlanContext<'_>,
    op: UnaryKind,
    x: TensorId,
    out: TensorId,
    scale: f32,
    bias: f32,
) -> Result<Vec<Dispatch>> {
    let n = ctx.numel(out)?;
    if ctx.numel(x)? != n {
        return Err(Error::invalid_program(format!(
            "{op:?}: input has {} elements, output {n}",
            ctx.numel(x)?
        )));
    }
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(Vec::new());
    };
    let uniforms = Uniforms::new()
        .vec4([
            to_u32(n, "element count")?,
            scale.to_bits(),
            bias.to_bits(),
            0,
        ])
        .finish();
    Ok(vec![Dispatch {
        key: KernelKey::new(UnaryKey {
            op,
            wg: ctx.config.workgroup_size,
        }),
        uniforms,
        bindings: vec![Binding::Tensor(x), Binding::Tensor(out)],
        workgroups,
    }])
}

/// `out = a (op) b` with broadcasting.
///
/// # Errors
/// `InvalidProgram` when the shapes do not broadcast to `out`; `NotSupported` when more than
/// eight dims remain after coalescing.
fn binary(
    ctx: &PlanContext<'_>,
    op: BinaryOp,
    a: TensorId,
    b: TensorId,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let out_shape = ctx.shape(out)?;
    let a_strides = broadcast_strides(ctx.shape(a)?, out_shape)?;
    let b_strides = broadcast_strides(ctx.shape(b)?, out_shape)?;
    let n = ctx.numel(out)?;
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(Vec::new());
    };
    let (shape, strides) = coalesce(out_shape, &[a_strides, b_strides]);
    let uniforms = Uniforms::new()
        .vec4([
            to_u32(n, "element count")?,
            to_u32(shape.len(), "rank")?,
            0,
            0,
        ])
        .dims8(&shape, "broadcast shape")?
        .dims8(&strides[0], "broadcast strides")?
        .dims8(&strides[1], "broadcast strides")?
        .finish();
    Ok(vec![Dispatch {
        key: KernelKey::new(BinaryKey {
            op,
            wg: ctx.config.workgroup_size,
        }),
        uniforms,
        bindings: vec![Binding::Tensor(a), Binding::Tensor(b), Binding::Tensor(out)],
        workgroups,
    }])
}

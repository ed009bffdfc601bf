//! Element-wise f32 ops on the GPU: `Unary` (GELU, tanh, ReLU, tanh-GELU, SiLU) and `Scale` share one kernel
//! (`unary.wgsl`), the broadcasting `Binary` ops another (`binary.wgsl`). The unary kernel's
//! gated form, `f(x) * gate` in one pass, runs a unary op together with the product that is
//! its only reader (GeGLU, SwiGLU; the planner decides, see `fusion.rs`).

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::wgsl::Float;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms,
    Wgsl, coalesce, to_u32,
};
use crate::error::{Error, Result};
use crate::program::geometry::broadcast_strides;
use crate::program::ops::{Binary, Scale, Unary};
use crate::program::{BinaryOp, TensorDecl, TensorId, UnaryOp};

const UNARY: &str = include_str!("unary.wgsl");
/// The WGSL activation functions (`gelu`, `tanh_stable`, `gelu_tanh`, `silu`, ...) that
/// [`UnaryKind::expr`] calls: the unary kernel's, and a linear's gated input (`linear.rs`).
pub(crate) const ACTIVATIONS: &str = include_str!("activations.wgsl");
const BINARY: &str = include_str!("binary.wgsl");

/// The unary kernel's uniform block.
const UNARY_PARAMS: [Field; 1] = [Field::vec4(
    "head",
    "x: element count, y: scale (f32 bits), z: bias (f32 bits)",
)];

/// The binary kernel's uniform block.
const BINARY_PARAMS: [Field; 4] = [
    Field::vec4("head", "x: element count, y: rank"),
    Field::dims8("shape", ""),
    Field::dims8("a_strides", ""),
    Field::dims8("b_strides", ""),
];

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
    /// The kind of a program's unary op.
    pub(crate) fn of(op: UnaryOp) -> Self {
        match op {
            UnaryOp::Gelu => Self::Gelu,
            UnaryOp::Tanh => Self::Tanh,
            UnaryOp::Relu => Self::Relu,
            UnaryOp::GeluTanh => Self::GeluTanh,
            UnaryOp::Silu => Self::Silu,
        }
    }

    /// The WGSL expression of the function of `v` (over [`ACTIVATIONS`]; `Scale` also reads the
    /// unary kernel's `scale` and `bias`).
    pub(crate) fn expr(self) -> &'static str {
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
    /// Whether each result is multiplied by a third tensor's element (binding 3).
    pub gated: bool,
    /// The element type of `x` (and `gate`): the function computes in f32 either way.
    pub x: Float,
    /// The element type of `out`.
    pub out: Float,
}

impl Kernel for UnaryKey {
    fn storage_bindings(&self) -> u32 {
        2 + u32::from(self.gated)
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::f32();
        w.uniforms(&UNARY_PARAMS);
        w.alias("XElem", Elem::Float(self.x));
        w.alias("OutElem", Elem::Float(self.out));
        w.storage("x", Elem::Named("XElem"));
        w.storage("out", Elem::Named("OutElem"));
        let gate = if self.gated {
            w.storage("gate", Elem::Named("XElem"));
            " * f32(gate[i])"
        } else {
            ""
        };
        w.push(ACTIVATIONS);
        w.template(UNARY, &[("EXPR", &self.op.expr())]);
        w.element_main(
            self.wg,
            "p.head.x",
            &format!("    out[i] = OutElem(apply(f32(x[i])){gate});"),
        );
        w
    }
}

/// Broadcasting f32 binary kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BinaryKey {
    /// The function.
    pub op: BinaryOp,
    /// Invocations per workgroup.
    pub wg: u32,
    /// The element types of `a`, `b` and `out` (the op computes in f32).
    pub floats: [Float; 3],
}

impl Kernel for BinaryKey {
    fn storage_bindings(&self) -> u32 {
        3
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        let expr = match self.op {
            BinaryOp::Add => "va + vb",
            BinaryOp::Sub => "va - vb",
            BinaryOp::Mul => "va * vb",
            BinaryOp::Div => "va / vb",
        };
        let mut w = Wgsl::f32();
        w.uniforms(&BINARY_PARAMS);
        let [a, b, out] = self.floats;
        w.alias("AElem", Elem::Float(a));
        w.alias("BElem", Elem::Float(b));
        w.alias("OutElem", Elem::Float(out));
        w.storage("a", Elem::Named("AElem"));
        w.storage("b", Elem::Named("BElem"));
        w.storage("out", Elem::Named("OutElem"));
        let body = crate::backends::webgpu::kernels::wgsl::fill(BINARY, &[("EXPR", &expr)]);
        w.element_main(self.wg, "p.head.x", &body);
        w
    }
}

impl GpuOp for Unary {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        unary(
            ctx,
            UnaryKind::of(self.op),
            (self.x, None),
            self.out,
            (1.0, 0.0),
        )
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let (op, wg) = (UnaryKind::of(self.op), config.workgroup_size);
        vec![KernelKey::new(UnaryKey {
            op,
            wg,
            gated: false,
            x: floats.float(self.x),
            out: floats.float(self.out),
        })]
    }
}

/// `out = f(x) * gate` in one pass: `unary` (`f` of its `x`) fused with the product that
/// multiplies its result by `gate` (same shape) into `out`.
///
/// # Errors
/// As the unary op's own dispatch; `InvalidProgram` when `gate` differs from `x` in size.
pub(crate) fn gated_unary(
    ctx: &PlanContext<'_>,
    unary_op: &Unary,
    gate: TensorId,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    ctx.require_f32(&[unary_op.x, gate, out])?;
    unary(
        ctx,
        UnaryKind::of(unary_op.op),
        (unary_op.x, Some(gate)),
        out,
        (1.0, 0.0),
    )
}

/// The kernel of [`gated_unary`] for `unary_op` (writing `out`) under `config`.
pub(crate) fn gated_unary_kernel(
    unary_op: &Unary,
    out: TensorId,
    config: KernelConfig,
    floats: &TensorFloats,
) -> KernelKey {
    KernelKey::new(UnaryKey {
        op: UnaryKind::of(unary_op.op),
        wg: config.workgroup_size,
        gated: true,
        x: floats.float(unary_op.x),
        out: floats.float(out),
    })
}

impl GpuOp for Scale {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        unary(
            ctx,
            UnaryKind::Scale,
            (self.x, None),
            self.out,
            (self.scale, self.bias),
        )
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let wg = config.workgroup_size;
        vec![KernelKey::new(UnaryKey {
            op: UnaryKind::Scale,
            wg,
            gated: false,
            x: floats.float(self.x),
            out: floats.float(self.out),
        })]
    }
}

impl GpuOp for Binary {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.a, self.b, self.out])?;
        binary(ctx, self.op, self.a, self.b, self.out)
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let wg = config.workgroup_size;
        vec![KernelKey::new(BinaryKey {
            op: self.op,
            wg,
            floats: [self.a, self.b, self.out].map(|id| floats.float(id)),
        })]
    }
}

/// `out = f(x)`, times `gate` where given (with `scale`/`bias` used by [`UnaryKind::Scale`]).
///
/// # Errors
/// `InvalidProgram` when `x` (or `gate`) and `out` differ in size; `OutOfResources` for grids
/// too large.
fn unary(
    ctx: &PlanContext<'_>,
    op: UnaryKind,
    (x, gate): (TensorId, Option<TensorId>),
    out: TensorId,
    (scale, bias): (f32, f32),
) -> Result<Vec<Dispatch>> {
    let n = ctx.numel(out)?;
    for input in std::iter::once(x).chain(gate) {
        if ctx.numel(input)? != n {
            return Err(Error::invalid_program(format!(
                "{op:?}: input has {} elements, output {n}",
                ctx.numel(input)?
            )));
        }
    }
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(Vec::new());
    };
    let uniforms = Uniforms::new(&UNARY_PARAMS)
        .vec4(
            "head",
            [
                to_u32(n, "element count")?,
                scale.to_bits(),
                bias.to_bits(),
                0,
            ],
        )
        .finish()?;
    Ok(vec![Dispatch {
        key: KernelKey::new(UnaryKey {
            op,
            wg: ctx.config.workgroup_size,
            gated: gate.is_some(),
            x: ctx.float(x),
            out: ctx.float(out),
        }),
        uniforms,
        bindings: [Some(x), Some(out), gate]
            .into_iter()
            .flatten()
            .map(Binding::Tensor)
            .collect(),
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
    let uniforms = Uniforms::new(&BINARY_PARAMS)
        .vec4(
            "head",
            [
                to_u32(n, "element count")?,
                to_u32(shape.len(), "rank")?,
                0,
                0,
            ],
        )
        .dims8("shape", &shape, "broadcast shape")
        .dims8("a_strides", &strides[0], "broadcast strides")
        .dims8("b_strides", &strides[1], "broadcast strides")
        .finish()?;
    Ok(vec![Dispatch {
        key: KernelKey::new(BinaryKey {
            op,
            wg: ctx.config.workgroup_size,
            floats: [a, b, out].map(|id| ctx.float(id)),
        }),
        uniforms,
        bindings: vec![Binding::Tensor(a), Binding::Tensor(b), Binding::Tensor(out)],
        workgroups,
    }])
}

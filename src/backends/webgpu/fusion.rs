//! Which neighbouring ops the WebGPU backend runs as one dispatch.
//!
//! A decode step is hundreds of small dispatches (Gemma 3 270M: 386), and on a real GPU each
//! costs a launch and a barrier whatever its size. Three patterns of a decoder layer are fused
//! here, each an op followed directly by the one op that reads its result:
//! - **RMSNorm, then `add`** (Gemma's post-attention and post-FFN norms before the residual
//!   add): `out = residual + rms_norm(x)`, in the norm's kernel (`kernels/rms_norm.rs`);
//! - **a unary op, then `mul`** (GeGLU, SwiGLU): `out = f(gate) * up`, in the unary kernel
//!   (`kernels/elementwise.rs`);
//! - **RMSNorm, then `rope`** (QK-norm per head before the rotary embedding: Gemma 3, Qwen 3):
//!   `out = rope(rms_norm(x))`, one workgroup per head row (`kernels/rope.rs`).
//!
//! A pair fuses only when the compile spec `fusion` is on (the default), the first op's result
//! is read by the second op alone (not by any other op, a view, or as a program output), the
//! second op's other operand has exactly the same shape (no broadcasting), and no two tensors
//! the fused dispatch binds share storage. The
//! first op's result is then never written; the fused dispatch runs at the second op's place,
//! so the planner keeps the first op's inputs alive until then. The CPU backend runs the ops
//! as written; results agree within f32 rounding (a GPU compiler may contract the fused
//! multiply and add).

use crate::backends::webgpu::alias::StorageKey;
use crate::backends::webgpu::kernels::{
    Dispatch, KernelConfig, KernelKey, PlanContext, elementwise, rms_norm, rope,
};
use crate::error::Result;
use crate::program::ops::{Binary, BinaryOp, RmsNorm, Rope, Unary};
use crate::program::{Op, Program, TensorId, UnaryOp};

/// How the two ops of a pair combine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Fusion<'a> {
    /// `out = residual + rms_norm(x)`.
    NormAdd {
        /// The norm.
        norm: &'a RmsNorm,
        /// The add's other operand.
        residual: TensorId,
        /// The add's output.
        out: TensorId,
    },
    /// `out = rope(rms_norm(x))`.
    NormRope {
        /// The norm.
        norm: &'a RmsNorm,
        /// The rotary embedding.
        rope: &'a Rope,
    },
    /// `out = f(x) * gate`.
    Gated {
        /// The unary op.
        unary: &'a Unary,
        /// The product's other operand.
        gate: TensorId,
        /// The product's output.
        out: TensorId,
    },
}

/// Two neighbouring ops run as one dispatch: op `first` and op `first + 1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FusedPair<'a> {
    /// Index of the first op (the second is the next one).
    pub first: usize,
    /// What the pair computes.
    pub fusion: Fusion<'a>,
}

impl FusedPair<'_> {
    /// Index of the second op (where the fused dispatch runs).
    pub(crate) fn second(&self) -> usize {
        self.first + 1
    }

    /// The pair's name in profiles.
    pub(crate) fn name(&self) -> &'static str {
        match self.fusion {
            Fusion::NormAdd { .. } => "rms_norm+add",
            Fusion::NormRope { .. } => "rms_norm+rope",
            Fusion::Gated { unary, .. } => match unary.op {
                UnaryOp::Gelu => "gelu+mul",
                UnaryOp::Tanh => "tanh+mul",
                UnaryOp::Relu => "relu+mul",
                UnaryOp::GeluTanh => "gelu_tanh+mul",
                UnaryOp::Silu => "silu+mul",
            },
        }
    }

    /// Tensors of the first op the fused dispatch reads (alive until the second op's step).
    pub(crate) fn first_inputs(&self) -> Vec<TensorId> {
        match self.fusion {
            Fusion::NormAdd { norm, .. } | Fusion::NormRope { norm, .. } => {
                std::iter::once(norm.x).chain(norm.weight).collect()
            }
            Fusion::Gated { unary, .. } => vec![unary.x],
        }
    }

    /// The fused dispatch for the bound shapes.
    ///
    /// # Errors
    /// As the ops' own dispatches.
    pub(crate) fn dispatches(&self, ctx: &PlanContext<'_>) -> Result<Vec<Dispatch>> {
        match self.fusion {
            Fusion::NormAdd {
                norm,
                residual,
                out,
            } => rms_norm::norm_add(ctx, norm, residual, out),
            Fusion::NormRope { norm, rope } => rope::norm_rope(ctx, norm, rope),
            Fusion::Gated { unary, gate, out } => elementwise::gated_unary(ctx, unary, gate, out),
        }
    }

    /// The kernels the fused dispatch may use under `config`.
    pub(crate) fn kernels(&self, config: KernelConfig) -> Vec<KernelKey> {
        match self.fusion {
            Fusion::NormAdd { norm, .. } => rms_norm::norm_add_kernels(norm, config),
            Fusion::NormRope { norm, rope } => rope::norm_rope_kernels(norm, rope, config),
            Fusion::Gated { unary, .. } => vec![elementwise::gated_unary_kernel(unary, config)],
        }
    }
}

/// The pairs of `program` that have the fusable form, whatever the shapes: what `init`
/// compiles kernels for. `keys`: every tensor's storage (`alias::storage_keys`).
pub(crate) fn candidate_pairs<'a>(program: &'a Program, keys: &[StorageKey]) -> Vec<FusedPair<'a>> {
    let readers = reader_counts(program);
    let mut pairs: Vec<FusedPair<'a>> = Vec::new();
    for (first, ops) in program.ops.windows(2).enumerate() {
        // An op is in one pair at most (no pattern's second op is another's first today).
        if pairs.last().is_some_and(|p| p.second() == first) {
            continue;
        }
        let Some(fusion) = fusion_of(&ops[0], &ops[1]) else {
            continue;
        };
        let pair = FusedPair { first, fusion };
        let read_once = readers.get(intermediate(&fusion) as usize) == Some(&1);
        if read_once && distinct_storage(&pair, keys) {
            pairs.push(pair);
        }
    }
    pairs
}

/// The pairs of `program` fused for the bound shapes of `ctx`: the candidates whose second op's
/// other operand (if it has one) has exactly the first op's shape.
///
/// # Errors
/// `InvalidProgram` when a tensor has no bound shape.
pub(crate) fn fused_pairs<'a>(
    program: &'a Program,
    keys: &[StorageKey],
    ctx: &PlanContext<'_>,
) -> Result<Vec<FusedPair<'a>>> {
    let mut pairs = Vec::new();
    for pair in candidate_pairs(program, keys) {
        let same_shape = match pair.fusion {
            Fusion::NormAdd { norm, residual, .. } => {
                ctx.shape(norm.out)? == ctx.shape(residual)?
            }
            Fusion::Gated { unary, gate, .. } => ctx.shape(unary.out)? == ctx.shape(gate)?,
            // The rope reads the norm's result alone.
            Fusion::NormRope { .. } => true,
        };
        if same_shape {
            pairs.push(pair);
        }
    }
    Ok(pairs)
}

/// The fusion of `first` followed by `second`, when they have one of the fused forms.
fn fusion_of<'a>(first: &'a Op, second: &'a Op) -> Option<Fusion<'a>> {
    if let (Op::RmsNorm(norm), Op::Rope(rope)) = (first, second) {
        return (rope.x == norm.out && rope.positions != norm.out)
            .then_some(Fusion::NormRope { norm, rope });
    }
    let Op::Binary(Binary { op, a, b, out }) = second else {
        return None;
    };
    let result = first.output();
    // The product's other operand (the first op's result read once: `add(h, h)` does not fuse).
    let (other, out) = match (*a == result, *b == result) {
        (true, false) => (*b, *out),
        (false, true) => (*a, *out),
        _ => return None,
    };
    match (first, op) {
        (Op::RmsNorm(norm), BinaryOp::Add) => Some(Fusion::NormAdd {
            norm,
            residual: other,
            out,
        }),
        (Op::Unary(unary), BinaryOp::Mul) => Some(Fusion::Gated {
            unary,
            gate: other,
            out,
        }),
        _ => None,
    }
}

/// The first op's result, which the fused dispatch never writes.
fn intermediate(fusion: &Fusion<'_>) -> TensorId {
    match fusion {
        Fusion::NormAdd { norm, .. } | Fusion::NormRope { norm, .. } => norm.out,
        Fusion::Gated { unary, .. } => unary.out,
    }
}

/// How many times each tensor is read: by ops (each operand counted) and as a program output.
fn reader_counts(program: &Program) -> Vec<usize> {
    let mut counts = vec![0usize; program.tensors.len()];
    let reads = program
        .ops
        .iter()
        .flat_map(|op| op.inputs())
        .chain(program.outputs.iter().copied());
    for id in reads {
        if let Some(count) = counts.get_mut(id as usize) {
            *count += 1;
        }
    }
    counts
}

/// Whether the tensors the fused dispatch binds all have storage of their own.
fn distinct_storage(pair: &FusedPair<'_>, keys: &[StorageKey]) -> bool {
    let (other, out) = match pair.fusion {
        Fusion::NormAdd { residual, out, .. } => (residual, out),
        Fusion::NormRope { rope, .. } => (rope.positions, rope.out),
        Fusion::Gated { gate, out, .. } => (gate, out),
    };
    let bound: Vec<Option<&StorageKey>> = pair
        .first_inputs()
        .into_iter()
        .chain([other, out])
        .map(|id| keys.get(id as usize))
        .collect();
    bound
        .iter()
        .enumerate()
        .all(|(i, key)| key.is_some() && !bound[..i].contains(key))
}

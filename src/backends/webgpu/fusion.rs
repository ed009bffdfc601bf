//! Which neighbouring ops the WebGPU backend runs as one dispatch.
//!
//! A decode step is hundreds of small dispatches (Gemma 3 270M: 386 unfused), and on a real GPU
//! each costs a launch and a barrier whatever its size. These patterns of a decoder layer are
//! fused here, each a run of neighbouring ops where every op reads the one before it:
//! - **RMSNorm, then `add`** (Gemma's post-attention and post-FFN norms before the residual
//!   add): `out = residual + rms_norm(x)`, in the norm's kernel (`kernels/rms_norm.rs`);
//! - **RMSNorm, then `add`, then RMSNorm** (Gemma: the post-norm, the residual add, and the
//!   next pre-norm, which reads the new residual stream): `sum = residual + rms_norm(x)` is
//!   written (later layers add to it), and `out = rms_norm'(sum)` in the same pass;
//! - **`add`, then RMSNorm** (Llama, Qwen: the residual add and the next pre-norm):
//!   `sum = residual + x`, written, and `out = rms_norm(sum)`;
//! - **a unary op, then `mul`** (GeGLU, SwiGLU): `out = f(gate) * up`, in the unary kernel
//!   (`kernels/elementwise.rs`);
//! - **a unary op, then `mul`, then `linear`** (GeGLU / SwiGLU and the FFN's down projection):
//!   the linear reads `f(gate) * up` as it loads its activations (`kernels/linear.rs`), so the
//!   product is never written (not with the rows GEMV of CPU-emulated adapters, which would
//!   recompute the activation in every invocation);
//! - **RMSNorm, then `rope`** (QK-norm per head before the rotary embedding: Gemma 3, Qwen 3):
//!   `out = rope(rms_norm(x))`, one workgroup per head row (`kernels/rope.rs`); and two such
//!   pairs in a row (the queries' and the keys'), their rows in one dispatch, when both norms
//!   are weighted and both ropes share style, dims, base, positions and head dim.
//!
//! A run fuses only when the compile spec `fusion` is on (the default), each result the
//! fused dispatch does not write (a norm's or an activation's before the op that consumes it)
//! is read by the next op alone (not by any other op, a view, or as a program output), the
//! `add`'s and `mul`'s operands have exactly the same shape (no broadcasting), and no two
//! tensors the fused dispatch binds share storage. An `add`'s result is always written (the
//! residual stream is read again later). The fused dispatch runs at the last op's place, so the
//! planner keeps the earlier ops' inputs alive until then; the earlier ops plan nothing. An op
//! belongs to one run at most, the longest that fits, taken first to last. The CPU backend runs
//! the ops as written; results agree within f32 rounding (a GPU compiler may contract a fused
//! multiply and add).

use crate::backends::webgpu::alias::StorageKey;
use crate::backends::webgpu::kernels::linear::{self, GatedInput};
use crate::backends::webgpu::kernels::{
    Dispatch, GemvKernel, KernelConfig, KernelKey, PlanContext, TensorFloats, elementwise,
    rms_norm, rope,
};
use crate::error::Result;
use crate::program::ops::{Binary, BinaryOp, Linear, RmsNorm, Rope, Unary};
use crate::program::{Op, Program, TensorDecl, TensorId, UnaryOp};

/// How the ops of a fused run combine.
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
    /// `sum = residual + (rms_norm(x) or x)`, written; `next.out = next(sum)`.
    AddNorm {
        /// The norm before the add (`None`: the add's operand is `x` itself).
        norm: Option<&'a RmsNorm>,
        /// The add's operand that the first norm produces, or that the add reads directly.
        x: TensorId,
        /// The add's other operand.
        residual: TensorId,
        /// The add's output (read by `next` and by later ops).
        sum: TensorId,
        /// The norm of the sum.
        next: &'a RmsNorm,
    },
    /// `out = rope(rms_norm(x))`.
    NormRope {
        /// The norm.
        norm: &'a RmsNorm,
        /// The rotary embedding.
        rope: &'a Rope,
    },
    /// Two [`Fusion::NormRope`] pairs in one dispatch (the queries' and the keys').
    NormRopeTwo {
        /// The first pair's norm and rope.
        first: (&'a RmsNorm, &'a Rope),
        /// The second pair's.
        second: (&'a RmsNorm, &'a Rope),
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
    /// `linear(f(x) * gate)`.
    GatedLinear {
        /// The unary op.
        unary: &'a Unary,
        /// The product's other operand.
        gate: TensorId,
        /// The linear that reads the product.
        linear: &'a Linear,
    },
}

/// Neighbouring ops `first..=last` run as one dispatch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FusedOps<'a> {
    /// Index of the first op.
    pub first: usize,
    /// Index of the last op (where the fused dispatch runs).
    pub last: usize,
    /// What the run computes.
    pub fusion: Fusion<'a>,
}

impl FusedOps<'_> {
    /// The run's name in profiles.
    pub(crate) fn name(&self) -> &'static str {
        match self.fusion {
            Fusion::NormAdd { .. } => "rms_norm+add",
            Fusion::AddNorm { norm: Some(_), .. } => "rms_norm+add+rms_norm",
            Fusion::AddNorm { norm: None, .. } => "add+rms_norm",
            Fusion::NormRope { .. } => "rms_norm+rope",
            Fusion::NormRopeTwo { .. } => "rms_norm+rope+rms_norm+rope",
            Fusion::Gated { unary, .. } => match unary.op {
                UnaryOp::Gelu => "gelu+mul",
                UnaryOp::Tanh => "tanh+mul",
                UnaryOp::Relu => "relu+mul",
                UnaryOp::GeluTanh => "gelu_tanh+mul",
                UnaryOp::Silu => "silu+mul",
            },
            Fusion::GatedLinear { unary, .. } => match unary.op {
                UnaryOp::Gelu => "gelu+mul+linear",
                UnaryOp::Tanh => "tanh+mul+linear",
                UnaryOp::Relu => "relu+mul+linear",
                UnaryOp::GeluTanh => "gelu_tanh+mul+linear",
                UnaryOp::Silu => "silu+mul+linear",
            },
        }
    }

    /// Tensors of the earlier ops the fused dispatch reads (alive until the last op's step).
    pub(crate) fn earlier_inputs(&self) -> Vec<TensorId> {
        match self.fusion {
            Fusion::NormAdd { norm, .. } | Fusion::NormRope { norm, .. } => {
                std::iter::once(norm.x).chain(norm.weight).collect()
            }
            Fusion::AddNorm {
                norm, x, residual, ..
            } => match norm {
                Some(norm) => [norm.x, residual].into_iter().chain(norm.weight).collect(),
                None => vec![x, residual],
            },
            Fusion::Gated { unary, .. } => vec![unary.x],
            Fusion::GatedLinear { unary, gate, .. } => vec![unary.x, gate],
            // The first rope's positions are the second's (`fusion_of`).
            Fusion::NormRopeTwo {
                first: (norm, _),
                second: (norm2, _),
            } => [norm.x, norm2.x]
                .into_iter()
                .chain(norm.weight)
                .chain(norm2.weight)
                .collect(),
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
            Fusion::AddNorm {
                norm,
                x,
                residual,
                sum,
                next,
            } => rms_norm::add_norm(ctx, norm, x, residual, sum, next),
            Fusion::NormRope { norm, rope } => rope::norm_rope(ctx, norm, rope),
            Fusion::NormRopeTwo { first, second } => rope::norm_rope_two(ctx, first, second),
            Fusion::Gated { unary, gate, out } => elementwise::gated_unary(ctx, unary, gate, out),
            Fusion::GatedLinear {
                unary,
                gate,
                linear,
            } => linear::gated_linear(ctx, linear, GatedInput { unary, gate }),
        }
    }

    /// The kernels the fused dispatch may use under `config` (`tensors`: the program's).
    pub(crate) fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        match self.fusion {
            Fusion::NormAdd { norm, .. } => rms_norm::norm_add_kernels(norm, config, floats),
            Fusion::AddNorm { norm, x, next, .. } => {
                rms_norm::add_norm_kernels(norm, next, x, config, floats)
            }
            Fusion::NormRope { norm, rope } => rope::norm_rope_kernels(norm, rope, config, floats),
            Fusion::NormRopeTwo {
                first: (norm, rope),
                second: (norm2, rope2),
            } => {
                // The two pairs' own kernels too: a run whose head dims differ at plan time
                // runs as the two pairs (`fused_runs`).
                let mut keys = rope::norm_rope_two_kernels(norm, rope, config, floats);
                keys.extend(rope::norm_rope_kernels(norm, rope, config, floats));
                keys.extend(rope::norm_rope_kernels(norm2, rope2, config, floats));
                keys
            }
            Fusion::Gated { unary, out, .. } => {
                vec![elementwise::gated_unary_kernel(unary, out, config, floats)]
            }
            Fusion::GatedLinear { unary, linear, .. } => {
                linear::gated_linear_kernels(linear, unary, tensors, config, floats)
            }
        }
    }

    /// The activations the fused kernel binds (or computes in place) with one element type:
    /// a run fuses only where they share it (`candidate_runs`).
    fn activations(&self) -> Vec<TensorId> {
        match self.fusion {
            Fusion::NormAdd {
                norm,
                residual,
                out,
            } => vec![norm.x, norm.out, residual, out],
            Fusion::AddNorm {
                norm,
                x,
                residual,
                sum,
                next,
            } => norm
                .map(|n| n.x)
                .into_iter()
                .chain([x, residual, sum, next.x, next.out])
                .collect(),
            Fusion::NormRope { norm, rope } => vec![norm.x, norm.out, rope.x, rope.out],
            Fusion::NormRopeTwo {
                first: (norm, rope),
                second: (norm2, rope2),
            } => vec![
                norm.x, norm.out, rope.x, rope.out, norm2.x, norm2.out, rope2.x, rope2.out,
            ],
            Fusion::Gated { unary, gate, out } => vec![unary.x, unary.out, gate, out],
            Fusion::GatedLinear {
                unary,
                gate,
                linear,
            } => vec![unary.x, unary.out, gate, linear.x],
        }
    }

    /// The tensors the fused dispatch binds.
    fn bound(&self) -> Vec<TensorId> {
        let written = match self.fusion {
            Fusion::NormAdd { out, .. } | Fusion::Gated { out, .. } => vec![out],
            Fusion::GatedLinear { linear, .. } => std::iter::once(linear.weight)
                .chain(linear.bias)
                .chain([linear.out])
                .collect(),
            Fusion::AddNorm { sum, next, .. } => std::iter::once(sum)
                .chain(next.weight)
                .chain([next.out])
                .collect(),
            Fusion::NormRope { rope, .. } => vec![rope.positions, rope.out],
            Fusion::NormRopeTwo {
                first: (_, rope),
                second: (_, rope2),
            } => vec![rope.positions, rope.out, rope2.out],
        };
        let read = match self.fusion {
            Fusion::NormAdd { residual, .. } => vec![residual],
            Fusion::Gated { gate, .. } => vec![gate],
            Fusion::AddNorm { .. }
            | Fusion::NormRope { .. }
            | Fusion::NormRopeTwo { .. }
            | Fusion::GatedLinear { .. } => Vec::new(),
        };
        self.earlier_inputs()
            .into_iter()
            .chain(read)
            .chain(written)
            .collect()
    }
}

/// The runs of `program` that have a fusable form under `config`, whatever the shapes: what
/// `init` compiles kernels for. `keys`: every tensor's storage (`alias::storage_keys`).
pub(crate) fn candidate_runs<'a>(
    program: &'a Program,
    keys: &[StorageKey],
    config: KernelConfig,
    floats: &TensorFloats,
) -> Vec<FusedOps<'a>> {
    let readers = reader_counts(program);
    let mut runs: Vec<FusedOps<'a>> = Vec::new();
    let mut first = 0;
    while first < program.ops.len() {
        // The longest run that starts here and fits; an op is in one run at most.
        let found = [4, 3, 2].into_iter().find_map(|len| {
            let ops = program.ops.get(first..first + len)?;
            let fusion = fusion_of(ops)?;
            // The rows GEMV (adapters that emulate the GPU on the CPU) reads the activations
            // from storage in every invocation: a gated input would recompute the activation
            // once per 8 output rows. There the product is written once, as unfused.
            if matches!(fusion, Fusion::GatedLinear { .. }) && config.gemv == GemvKernel::Rows {
                return None;
            }
            let run = FusedOps {
                first,
                last: first + len - 1,
                fusion,
            };
            let read_once = unwritten(&fusion)
                .iter()
                .all(|&id| readers.get(id as usize) == Some(&1));
            // One element type for every activation the fused kernel touches.
            let activations = run.activations();
            let uniform = activations
                .iter()
                .all(|&id| floats.float(id) == floats.float(activations[0]));
            (read_once && uniform && distinct_storage(&run, keys)).then_some(run)
        });
        match found {
            Some(run) => {
                first = run.last + 1;
                runs.push(run);
            }
            None => first += 1,
        }
    }
    runs
}

/// The runs of `program` fused for the bound shapes of `ctx`: the candidates whose `add` or
/// `mul` operands have exactly the same shape.
///
/// # Errors
/// `InvalidProgram` when a tensor has no bound shape.
pub(crate) fn fused_runs<'a>(
    program: &'a Program,
    keys: &[StorageKey],
    ctx: &PlanContext<'_>,
) -> Result<Vec<FusedOps<'a>>> {
    let mut runs = Vec::new();
    for run in candidate_runs(program, keys, ctx.config, ctx.floats) {
        if let Fusion::NormRopeTwo { first, second } = run.fusion {
            // One head dim for both, or the two pairs run alone.
            if ctx.shape(first.1.x)?.last() == ctx.shape(second.1.x)?.last() {
                runs.push(run);
            } else {
                runs.extend([(run.first, first), (run.first + 2, second)].map(
                    |(index, (norm, rope))| FusedOps {
                        first: index,
                        last: index + 1,
                        fusion: Fusion::NormRope { norm, rope },
                    },
                ));
            }
            continue;
        }
        let same_shape = match run.fusion {
            Fusion::NormAdd { norm, residual, .. } => {
                ctx.shape(norm.out)? == ctx.shape(residual)?
            }
            Fusion::AddNorm { x, residual, .. } => ctx.shape(x)? == ctx.shape(residual)?,
            Fusion::Gated { unary, gate, .. } | Fusion::GatedLinear { unary, gate, .. } => {
                ctx.shape(unary.out)? == ctx.shape(gate)?
            }
            // The rope reads the norm's result alone.
            Fusion::NormRope { .. } | Fusion::NormRopeTwo { .. } => true,
        };
        if same_shape {
            runs.push(run);
        }
    }
    Ok(runs)
}

/// The fusion of `ops` (two or three neighbouring ops), when they have one of the fused forms.
fn fusion_of(ops: &[Op]) -> Option<Fusion<'_>> {
    match ops {
        [first, second] => pair_fusion(first, second),
        [unary, mul, Op::Linear(linear)] => {
            let Some(Fusion::Gated { unary, gate, out }) = pair_fusion(unary, mul) else {
                return None;
            };
            (linear.x == out).then_some(Fusion::GatedLinear {
                unary,
                gate,
                linear,
            })
        }
        [n1, r1, n2, r2] => {
            let (
                Some(Fusion::NormRope { norm, rope }),
                Some(Fusion::NormRope {
                    norm: norm2,
                    rope: rope2,
                }),
            ) = (pair_fusion(n1, r1), pair_fusion(n2, r2))
            else {
                return None;
            };
            let shared = rope::pairs_share_a_dispatch((norm, rope), (norm2, rope2))
                // The second pair does not read the first's result.
                && norm2.x != rope.out;
            shared.then_some(Fusion::NormRopeTwo {
                first: (norm, rope),
                second: (norm2, rope2),
            })
        }
        [Op::RmsNorm(norm), add, Op::RmsNorm(next)] => {
            let Some(Fusion::NormAdd { residual, out, .. }) = pair_fusion(&ops[0], add) else {
                return None;
            };
            (next.x == out).then_some(Fusion::AddNorm {
                norm: Some(norm),
                x: norm.out,
                residual,
                sum: out,
                next,
            })
        }
        _ => None,
    }
}

/// The fusion of `first` followed by `second`, when they have one of the fused forms.
fn pair_fusion<'a>(first: &'a Op, second: &'a Op) -> Option<Fusion<'a>> {
    match (first, second) {
        (Op::RmsNorm(norm), Op::Rope(rope)) => {
            return (rope.x == norm.out && rope.positions != norm.out)
                .then_some(Fusion::NormRope { norm, rope });
        }
        (
            Op::Binary(Binary {
                op: BinaryOp::Add,
                a,
                b,
                out,
            }),
            Op::RmsNorm(next),
        ) => {
            // `add(h, h)` reads one tensor twice; the norm must read the sum.
            return (a != b && next.x == *out).then_some(Fusion::AddNorm {
                norm: None,
                x: *a,
                residual: *b,
                sum: *out,
                next,
            });
        }
        _ => {}
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

/// The results the fused dispatch never writes (each read only by the op after it).
fn unwritten(fusion: &Fusion<'_>) -> Vec<TensorId> {
    match fusion {
        Fusion::NormAdd { norm, .. } | Fusion::NormRope { norm, .. } => vec![norm.out],
        Fusion::NormRopeTwo {
            first: (norm, _),
            second: (norm2, _),
        } => vec![norm.out, norm2.out],
        Fusion::AddNorm { norm, .. } => norm.iter().map(|norm| norm.out).collect(),
        Fusion::Gated { unary, .. } => vec![unary.out],
        Fusion::GatedLinear { unary, linear, .. } => vec![unary.out, linear.x],
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
fn distinct_storage(run: &FusedOps<'_>, keys: &[StorageKey]) -> bool {
    let bound: Vec<Option<&StorageKey>> = run
        .bound()
        .into_iter()
        .map(|id| keys.get(id as usize))
        .collect();
    bound
        .iter()
        .enumerate()
        .all(|(i, key)| key.is_some() && !bound[..i].contains(key))
}

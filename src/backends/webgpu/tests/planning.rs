//! The GPU-free planner: kernels compiled at init cover every dispatch, reshape aliases its
//! input's storage, the arena reuses memory, and malformed programs or oversized shapes are
//! refused with the right codes (never a panic).

use super::dims;
use crate::backends::webgpu::kernels::layout::CopyKey;
use crate::backends::webgpu::kernels::{self, KernelConfig, MatMulKernel};
use crate::backends::webgpu::plan::{PlanLimits, ShapePlan, Storage, kernel_keys, plan};
use crate::error::{ErrorCode, Result};
use crate::program::ops;
use crate::program::{BinaryOp, DType, Dim, Op, Program, ProgramBuilder, UnaryOp, bind_shapes};

pub(super) const CONFIG: KernelConfig = KernelConfig {
    workgroup_size: 256,
    matmul: MatMulKernel::Auto(kernels::matmul::MatMulTile::T128),
    f16: false,
    kv_f16: false,
    act_f16: false,
    gemv: kernels::GemvKernel::Rows,
    subgroup_min_size: None,
    attention_splits: 1,
    fusion: true,
};

pub(super) const LIMITS: PlanLimits = PlanLimits {
    storage_alignment: 256,
    max_binding: 1 << 27,
    max_buffer: 1 << 30,
    max_workgroups: 65535,
};

/// A small encoder layer touching every op: embeddings, attention, MLP, pooling.
pub(super) fn every_op_program() -> Program {
    let mut b = ProgramBuilder::new();
    let seq = b.symbol("seq");
    let (h, v) = (8, 16);
    let ids = b.input("ids", DType::I64, vec![Dim::Fixed(1), seq]);
    let mask = b.input("mask", DType::I64, vec![Dim::Fixed(1), seq]);
    let table = b.param("table", DType::F32, dims(&[v, h]), "s", "table");
    let w = b.param("w", DType::F32, dims(&[h, h]), "s", "w");
    let bias = b.param("bias", DType::F32, dims(&[h]), "s", "bias");
    let gamma = b.param("gamma", DType::F32, dims(&[h]), "s", "gamma");
    let pos = b.tensor("pos", DType::I64, vec![seq]);
    let emb = b.tensor(
        "emb",
        DType::F32,
        vec![Dim::Fixed(1), seq, Dim::Fixed(h as u64)],
    );
    let pemb = b.tensor("pemb", DType::F32, vec![seq, Dim::Fixed(h as u64)]);
    let sum = b.tensor(
        "sum",
        DType::F32,
        vec![Dim::Fixed(1), seq, Dim::Fixed(h as u64)],
    );
    let norm = b.tensor(
        "norm",
        DType::F32,
        vec![Dim::Fixed(1), seq, Dim::Fixed(h as u64)],
    );
    let proj = b.tensor(
        "proj",
        DType::F32,
        vec![Dim::Fixed(1), seq, Dim::Fixed(h as u64)],
    );
    let heads = b.tensor(
        "heads",
        DType::F32,
        vec![Dim::Fixed(1), seq, Dim::Fixed(2), Dim::Fixed(4)],
    );
    let perm = b.tensor(
        "perm",
        DType::F32,
        vec![Dim::Fixed(1), Dim::Fixed(2), seq, Dim::Fixed(4)],
    );
    let scores = b.tensor(
        "scores",
        DType::F32,
        vec![Dim::Fixed(1), Dim::Fixed(2), seq, seq],
    );
    let fmask = b.tensor("fmask", DType::F32, vec![Dim::Fixed(1), seq]);
    let mask4 = b.tensor(
        "mask4",
        DType::F32,
        vec![Dim::Fixed(1), Dim::Fixed(1), Dim::Fixed(1), seq],
    );
    let probs = b.tensor(
        "probs",
        DType::F32,
        vec![Dim::Fixed(1), Dim::Fixed(2), seq, seq],
    );
    let act = b.tensor(
        "act",
        DType::F32,
        vec![Dim::Fixed(1), seq, Dim::Fixed(h as u64)],
    );
    let scaled = b.tensor(
        "scaled",
        DType::F32,
        vec![Dim::Fixed(1), seq, Dim::Fixed(h as u64)],
    );
    let first = b.tensor(
        "first",
        DType::F32,
        vec![Dim::Fixed(1), Dim::Fixed(1), Dim::Fixed(h as u64)],
    );
    let both = b.tensor(
        "both",
        DType::F32,
        vec![Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(h as u64)],
    );
    let pooled = b.tensor("pooled", DType::F32, dims(&[1, h]));
    let unit = b.tensor("unit", DType::F32, dims(&[1, h]));
    b.op(Op::Range(ops::Range { out: pos }))
        .op(Op::Gather(ops::Gather {
            table,
            ids,
            out: emb,
        }))
        .op(Op::Gather(ops::Gather {
            table,
            ids: pos,
            out: pemb,
        }))
        .op(Op::Binary(ops::Binary {
            op: BinaryOp::Add,
            a: emb,
            b: pemb,
            out: sum,
        }))
        .op(Op::LayerNorm(ops::LayerNorm {
            x: sum,
            gamma,
            beta: bias,
            eps: 1e-12,
            out: norm,
        }))
        .op(Op::MatMul(ops::MatMul {
            a: norm,
            b: w,
            bias: Some(bias),
            transpose_a: false,
            transpose_b: true,
            out: proj,
        }))
        .op(Op::Reshape(ops::Reshape {
            x: proj,
            out: heads,
        }))
        .op(Op::Permute(ops::Permute {
            x: heads,
            perm: vec![0, 2, 1, 3],
            out: perm,
        }))
        .op(Op::MatMul(ops::MatMul {
            a: perm,
            b: perm,
            bias: None,
            transpose_a: false,
            transpose_b: true,
            out: scores,
        }))
        .op(Op::Cast(ops::Cast {
            x: mask,
            out: fmask,
        }))
        .op(Op::Reshape(ops::Reshape {
            x: fmask,
            out: mask4,
        }))
        .op(Op::Softmax(ops::Softmax {
            x: scores,
            mask: Some(mask4),
            out: probs,
        }))
        .op(Op::Unary(ops::Unary {
            op: UnaryOp::Gelu,
            x: proj,
            out: act,
        }))
        .op(Op::Scale(ops::Scale {
            x: act,
            scale: 0.5,
            bias: 0.0,
            out: scaled,
        }))
        .op(Op::Slice(ops::Slice {
            x: scaled,
            axis: 1,
            start: 0,
            end: Some(1),
            out: first,
        }))
        .op(Op::Concat(ops::Concat {
            inputs: vec![first, first],
            axis: 1,
            out: both,
        }))
        .op(Op::MeanPool(ops::MeanPool {
            x: scaled,
            mask,
            out: pooled,
        }))
        .op(Op::L2Normalize(ops::L2Normalize {
            x: pooled,
            eps: 1e-12,
            out: unit,
        }))
        .output(unit)
        .output(probs)
        .output(both);
    b.into_program()
}

pub(super) fn plan_for(program: &Program, inputs: &[&[usize]]) -> Result<ShapePlan> {
    let bound = bind_shapes(program, inputs)?;
    plan(program, bound.shapes, CONFIG, LIMITS)
}

#[test]
fn kernels_compiled_at_init_cover_every_dispatch() {
    let program = every_op_program();
    let keys = kernel_keys(&program, CONFIG);
    for seq in [1usize, 5, 130] {
        let shape = [1, seq];
        let plan = plan_for(&program, &[&shape, &shape]).unwrap();
        for op in &plan.ops {
            for dispatch in &op.dispatches {
                assert!(
                    keys.contains(&dispatch.key),
                    "{:?} missing from {keys:?}",
                    dispatch.key
                );
            }
        }
        assert_eq!(plan.ops.len(), program.ops.len());
    }
}

#[test]
fn reshape_aliases_and_arena_reuses() {
    let program = every_op_program();
    let shape = [1usize, 64];
    let plan = plan_for(&program, &[&shape, &shape]).unwrap();
    let find = |name: &str| program.tensors.iter().position(|t| t.name == name).unwrap() as u32;
    assert_eq!(
        plan.placement(find("heads")).unwrap().storage,
        plan.placement(find("proj")).unwrap().storage
    );
    assert_eq!(
        plan.placement(find("mask4")).unwrap().storage,
        plan.placement(find("fmask")).unwrap().storage
    );
    assert!(matches!(
        plan.placement(find("table")).unwrap().storage,
        Storage::Param(0)
    ));
    assert!(
        plan.arena_bytes < plan.activation_bytes,
        "{} vs {}",
        plan.arena_bytes,
        plan.activation_bytes
    );
    // Reshapes and nothing else dispatch nothing.
    for op in &plan.ops {
        assert_eq!(
            op.dispatches.is_empty(),
            op.name == "reshape",
            "{}",
            op.name
        );
    }
}

fn code(program: &Program, inputs: &[&[usize]]) -> ErrorCode {
    plan_for(program, inputs).unwrap_err().code()
}

#[test]
fn malformed_programs_are_invalid_program() {
    let base = || {
        let mut b = ProgramBuilder::new();
        b.input("x", DType::F32, dims(&[4]));
        b.tensor("y", DType::F32, dims(&[4]));
        b.tensor("z", DType::F32, dims(&[4]));
        b
    };
    let unary = |x, out| {
        Op::Unary(ops::Unary {
            op: UnaryOp::Relu,
            x,
            out,
        })
    };
    // Reads z before anything writes it.
    let mut b = base();
    b.op(unary(2, 1)).output(1);
    assert_eq!(code(&b.into_program(), &[&[4]]), ErrorCode::InvalidProgram);
    // Writes its own input.
    let mut b = base();
    b.op(unary(1, 0));
    assert_eq!(code(&b.into_program(), &[&[4]]), ErrorCode::InvalidProgram);
    // Writes y twice.
    let mut b = base();
    b.op(unary(0, 1)).op(unary(0, 1)).output(1);
    assert_eq!(code(&b.into_program(), &[&[4]]), ErrorCode::InvalidProgram);
    // An output nothing writes.
    let mut b = base();
    b.op(unary(0, 1)).output(2);
    assert_eq!(code(&b.into_program(), &[&[4]]), ErrorCode::InvalidProgram);
    // An op naming an undeclared tensor.
    let mut b = base();
    b.op(unary(0, 99)).output(1);
    assert_eq!(code(&b.into_program(), &[&[4]]), ErrorCode::InvalidProgram);
    // Shapes that do not fit the op.
    let mut b = ProgramBuilder::new();
    b.input("a", DType::F32, dims(&[2, 3]));
    b.input("b", DType::F32, dims(&[4, 5]));
    b.tensor("c", DType::F32, dims(&[2, 5]));
    b.op(Op::MatMul(ops::MatMul {
        a: 0,
        b: 1,
        bias: None,
        transpose_a: false,
        transpose_b: false,
        out: 2,
    }))
    .output(2);
    assert_eq!(
        code(&b.into_program(), &[&[2, 3], &[4, 5]]),
        ErrorCode::InvalidProgram
    );
    // A float op on integers.
    let mut b = ProgramBuilder::new();
    b.input("a", DType::I32, dims(&[2]));
    b.tensor("c", DType::I32, dims(&[2]));
    b.op(unary(0, 1)).output(1);
    assert_eq!(code(&b.into_program(), &[&[2]]), ErrorCode::InvalidProgram);
    // A permutation that is not one.
    let mut b = ProgramBuilder::new();
    b.input("a", DType::F32, dims(&[2, 3]));
    b.tensor("c", DType::F32, dims(&[3, 2]));
    b.op(Op::Permute(ops::Permute {
        x: 0,
        perm: vec![1, 1],
        out: 1,
    }))
    .output(1);
    assert_eq!(
        code(&b.into_program(), &[&[2, 3]]),
        ErrorCode::InvalidProgram
    );
}

#[test]
fn oversized_shapes_are_out_of_resources() {
    let mut b = ProgramBuilder::new();
    let n = b.symbol("n");
    b.input("x", DType::F32, vec![n]);
    b.tensor("y", DType::F32, vec![n]);
    b.op(Op::Unary(ops::Unary {
        op: UnaryOp::Relu,
        x: 0,
        out: 1,
    }))
    .output(1);
    let program = b.into_program();
    // 2^26 floats = 256 MiB: over the 128 MiB binding limit.
    assert_eq!(code(&program, &[&[1 << 26]]), ErrorCode::OutOfResources);
    assert!(plan_for(&program, &[&[1 << 20]]).is_ok());
    // 9 dims that cannot coalesce are beyond the copy kernel.
    let shape = [2usize; 9];
    let mut b = ProgramBuilder::new();
    b.input("x", DType::F32, dims(&shape));
    b.tensor("y", DType::F32, dims(&shape));
    b.op(Op::Permute(ops::Permute {
        x: 0,
        perm: vec![8, 7, 6, 5, 4, 3, 2, 1, 0],
        out: 1,
    }))
    .output(1);
    assert_eq!(code(&b.into_program(), &[&shape]), ErrorCode::NotSupported);
}

/// The storage range a binding covers: the parameter slot or the arena bytes.
pub(super) fn binding_range(plan: &ShapePlan, binding: kernels::Binding) -> Option<(Storage, u64)> {
    let kernels::Binding::Tensor(id) = binding else {
        return None;
    };
    let placement = plan.placement(id).unwrap();
    Some((placement.storage, placement.bytes.max(4)))
}

pub(super) fn overlap(a: (Storage, u64), b: (Storage, u64)) -> bool {
    match (a, b) {
        ((Storage::Param(x), _), (Storage::Param(y), _)) => x == y,
        ((Storage::Arena(x), xn), (Storage::Arena(y), yn)) => x < y + yn && y < x + xn,
        _ => false,
    }
}

#[test]
fn no_dispatch_binds_the_same_bytes_twice() {
    // x * x, x @ x^T, reshape(x) - x and layer_norm(x, g, g): each op reads one storage twice.
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[4, 8]));
    let g = b.param("g", DType::F32, dims(&[8]), "s", "g");
    let square = b.binary(BinaryOp::Mul, x, x).unwrap();
    let gram = b.matmul(square, square, None, false, true).unwrap();
    let view = b.reshape(x, dims(&[4, 8])).unwrap();
    let diff = b.binary(BinaryOp::Sub, view, x).unwrap();
    let norm = b.layer_norm(diff, g, g, 1e-5).unwrap();
    b.output(gram).output(norm);
    let repeated = b.into_program();
    let keys = kernel_keys(&repeated, CONFIG);
    for program in [repeated, every_op_program()] {
        let plan = match program.inputs.len() {
            1 => plan_for(&program, &[&[4, 8]]).unwrap(),
            _ => plan_for(&program, &[&[1, 9], &[1, 9]]).unwrap(),
        };
        for op in &plan.ops {
            for dispatch in &op.dispatches {
                let ranges: Vec<_> = dispatch
                    .bindings
                    .iter()
                    .filter_map(|&b| binding_range(&plan, b))
                    .collect();
                for (i, &a) in ranges.iter().enumerate() {
                    for &b in &ranges[..i] {
                        assert!(!overlap(a, b), "op {} binds {a:?} and {b:?}", op.name);
                    }
                }
            }
        }
    }
    // The shadows' copies use a kernel that init compiles.
    assert!(keys.contains(&kernels::KernelKey::new(CopyKey { wg: 256 })));
}

#[test]
fn shadows_copy_before_the_op_and_live_one_step() {
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[3, 5]));
    let double = b.binary(BinaryOp::Add, x, x).unwrap();
    b.output(double);
    let program = b.into_program();
    let plan = plan_for(&program, &[&[3, 5]]).unwrap();
    let shadow = program.tensors.len() as u32;
    let dispatches = &plan.ops[0].dispatches;
    assert_eq!(dispatches.len(), 2, "a copy, then the add");
    assert_eq!(
        dispatches[0].bindings,
        vec![
            kernels::Binding::Tensor(x),
            kernels::Binding::Tensor(shadow)
        ]
    );
    assert_eq!(
        dispatches[1].bindings,
        vec![
            kernels::Binding::Tensor(x),
            kernels::Binding::Tensor(shadow),
            kernels::Binding::Tensor(double)
        ]
    );
    assert_eq!(plan.placement(shadow).unwrap().bytes, 3 * 5 * 4);
    // Three tensors live at the add's step: x, its shadow and the sum.
    assert_eq!(plan.arena_bytes, 3 * 256);
}

/// An attention over caches that are states; `reshape_cache` adds a view of the key cache read
/// by another op, `cache_output` makes the value cache a program output.
fn attention_program(reshape_cache: bool, cache_output: bool) -> Program {
    let mut b = ProgramBuilder::new();
    let f = |n: u64| Dim::Fixed(n);
    let q = b.input("q", DType::F32, vec![f(1), f(2), f(8)]);
    let k = b.input("k", DType::F32, vec![f(1), f(1), f(8)]);
    let v = b.input("v", DType::F32, vec![f(1), f(1), f(8)]);
    let positions = b.input("positions", DType::I32, vec![f(1)]);
    let k_cache = b.state("k_cache", DType::F32, vec![f(16), f(1), f(8)]);
    let v_cache = b.state("v_cache", DType::F32, vec![f(16), f(1), f(8)]);
    let other = b.state("other", DType::F32, vec![f(4)]);
    let out = b
        .push(|out| ops::Attention {
            q,
            k,
            v,
            k_cache,
            v_cache,
            positions,
            scale: 0.5,
            window: 0,
            softcap: 0.0,
            out,
        })
        .unwrap();
    b.output(out);
    if reshape_cache {
        let view = b.tensor("view", DType::F32, vec![f(128)]);
        b.op(Op::Reshape(ops::Reshape {
            x: k_cache,
            out: view,
        }));
        b.output(view);
    }
    if cache_output {
        b.output(v_cache);
    }
    let _ = other;
    b.into_program()
}

#[test]
fn only_caches_that_attention_alone_touches_may_be_f16() {
    use crate::backends::webgpu::plan::f16_cache_states;
    let program = attention_program(false, false);
    let caches = f16_cache_states(&program).expect("a plain decoder's caches");
    assert_eq!(caches, vec![program.states[0], program.states[1]]);
    assert!(
        !caches.contains(&program.states[2]),
        "a state attention does not use"
    );
    assert_eq!(
        f16_cache_states(&attention_program(true, false)),
        None,
        "a view of a cache"
    );
    assert_eq!(
        f16_cache_states(&attention_program(false, true)),
        None,
        "a cache as an output"
    );
    // No attention at all: nothing to store in f16.
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[4]));
    let y = b
        .push(|out| ops::Unary {
            op: UnaryOp::Relu,
            x,
            out,
        })
        .unwrap();
    b.output(y);
    assert_eq!(f16_cache_states(b.program()), None);
    // One state as both caches.
    let mut program = attention_program(false, false);
    if let Some(Op::Attention(attention)) = program.ops.first_mut() {
        attention.v_cache = attention.k_cache;
    }
    assert_eq!(
        f16_cache_states(&program),
        None,
        "one state as keys and values"
    );
}

/// f16 activations: the arena's float intermediates between f16-ready kernels go f16 (2 bytes
/// per element), program inputs, outputs and weights stay f32, one f32-only reader keeps its
/// operands f32 and so (through the norm's one-type group) the norm's input too; every planned
/// key is one `init` compiles, with f16 in its label exactly where a tensor it binds is f16;
/// and without `act_f16` nothing changes.
#[test]
fn f16_activations_cover_f16_ready_intermediates_only() {
    let f16 = KernelConfig {
        f16: true,
        kv_f16: true,
        act_f16: true,
        ..CONFIG
    };
    let build = |f32_reader: bool| {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, dims(&[4, 8]));
        let w = b.param("w", DType::F32, dims(&[8]), "s", "w");
        let m = b.param("m", DType::F32, dims(&[8, 8]), "s", "m");
        let t0 = b.scale(x, 2.0, 0.0).unwrap();
        let t1 = b
            .push(|out| ops::RmsNorm {
                x: t0,
                weight: Some(w),
                eps: 1e-6,
                out,
            })
            .unwrap();
        let t2 = if f32_reader {
            b.push(|out| ops::MatMul {
                a: t1,
                b: m,
                bias: None,
                transpose_a: false,
                transpose_b: false,
                out,
            })
            .unwrap()
        } else {
            b.unary(UnaryOp::Silu, t1).unwrap()
        };
        let y = b.scale(t2, 1.0, 0.0).unwrap();
        b.output(y);
        (b.into_program(), [x, w, t0, t1, t2, y])
    };
    let (program, [x, w, t0, t1, t2, y]) = build(false);
    let floats = crate::backends::webgpu::plan::f16_activations(&program, true);
    assert!(
        [t0, t1, t2].iter().all(|&id| floats.is_f16(id)),
        "{floats:?}"
    );
    assert!([x, w, y].iter().all(|&id| !floats.is_f16(id)), "{floats:?}");
    assert!(crate::backends::webgpu::plan::tensor_floats(&program, CONFIG).count() == 0);
    let bound = bind_shapes(&program, &[&[4, 8]]).unwrap();
    let half = plan(&program, bound.shapes.clone(), f16, LIMITS).unwrap();
    let full = plan(&program, bound.shapes, CONFIG, LIMITS).unwrap();
    let bytes = |p: &ShapePlan, id| p.placements[id as usize].unwrap().bytes;
    assert_eq!((bytes(&half, t0), bytes(&full, t0)), (64, 128));
    assert_eq!((bytes(&half, y), bytes(&full, y)), (128, 128));
    assert!(half.activation_bytes <= full.activation_bytes);
    let keys = kernel_keys(&program, f16);
    for op in &half.ops {
        for dispatch in &op.dispatches {
            assert!(
                keys.contains(&dispatch.key),
                "{:?} not compiled",
                dispatch.key
            );
            assert!(dispatch.key.label().contains("F16"), "{:?}", dispatch.key);
        }
    }
    for op in &full.ops {
        for dispatch in &op.dispatches {
            assert!(!dispatch.key.label().contains("F16"), "{:?}", dispatch.key);
        }
    }

    let (program, [_, _, t0, t1, t2, _]) = build(true);
    let floats = crate::backends::webgpu::plan::f16_activations(&program, true);
    assert!(
        !floats.any(),
        "the matmul reads t1, the norm's group holds t0: {floats:?}"
    );
    assert!(![t0, t1, t2].iter().any(|&id| floats.is_f16(id)));
    let bound = bind_shapes(&program, &[&[4, 8]]).unwrap();
    plan(&program, bound.shapes, f16, LIMITS).unwrap();
}

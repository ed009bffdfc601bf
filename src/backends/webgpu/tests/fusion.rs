//! The planner's fusion of neighbouring ops (`fusion.rs`): the fused forms as a decoder layer
//! writes them and the variants that must not fuse (GPU-free plans); random residual-stream
//! programs whose fused plans must be as hazard-free as their unfused ones (400, GPU-free), and
//! some of which must compute on the device, fused and unfused, what the CPU backend computes
//! (24, executed). The fused kernels' results are checked against f64 by the op suite
//! (`tests/common/cases/chains.rs`, `linear.rs`).

use super::planning::{CONFIG, LIMITS, binding_range, overlap, plan_for};
use super::{Rng, SCOPE, dims};
use crate::backends::webgpu::kernels::{self, KernelConfig};
use crate::backends::webgpu::plan::{ShapePlan, Storage, kernel_keys};
use crate::program::ops;
use crate::program::{
    BinaryOp, DType, Dim, Op, Program, ProgramBuilder, TensorId, UnaryOp, bind_shapes,
};

/// `rms_norm(x) (* weight)` with eps 1e-6, pushed onto `b`.
fn push_norm(b: &mut ProgramBuilder, x: TensorId, weight: Option<TensorId>) -> TensorId {
    b.push(|out| ops::RmsNorm {
        x,
        weight,
        eps: 1e-6,
        out,
    })
    .unwrap()
}

#[test]
fn fused_pairs_run_as_one_dispatch_and_keep_their_inputs_alive() {
    // t = x * y; a = rms_norm(t); z = x + a (fused: the norm plans nothing, the add runs both,
    // and t, last read by the norm, must not share bytes with z); m = up * silu(z) (fused);
    // then chains that must not fuse as pairs: silu(g2) read twice, the norm's result an
    // output, a broadcast add; each add read by the norm after it fuses with that norm
    // (`add+rms_norm`: the sum is written, the norm's result too).
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[4, 8]));
    let y = b.input("y", DType::F32, dims(&[4, 8]));
    let up = b.input("up", DType::F32, dims(&[4, 8]));
    let w = b.param("w", DType::F32, dims(&[8]), "s", "w");
    let bias = b.param("bias", DType::F32, dims(&[8]), "s", "bias");
    let norm = |b: &mut ProgramBuilder, x| push_norm(b, x, Some(w));
    let t = b.binary(BinaryOp::Mul, x, y).unwrap();
    let a = norm(&mut b, t);
    let z = b.binary(BinaryOp::Add, x, a).unwrap();
    let g = b.unary(UnaryOp::Silu, z).unwrap();
    let m = b.binary(BinaryOp::Mul, up, g).unwrap();
    let g2 = b.unary(UnaryOp::Silu, m).unwrap();
    let m2 = b.binary(BinaryOp::Mul, g2, up).unwrap();
    let twice = b.binary(BinaryOp::Add, g2, m2).unwrap();
    let shown = norm(&mut b, twice);
    let z2 = b.binary(BinaryOp::Add, shown, x).unwrap();
    let a3 = norm(&mut b, z2);
    let broadcast = b.binary(BinaryOp::Add, a3, bias).unwrap();
    b.output(broadcast).output(shown);
    let program = b.into_program();
    let plan = plan_for(&program, &[&[4, 8], &[4, 8], &[4, 8]]).unwrap();
    let shape: Vec<(&str, usize)> = plan
        .ops
        .iter()
        .map(|op| (op.name, op.dispatches.len()))
        .collect();
    assert_eq!(
        shape,
        [
            ("mul", 1),
            ("rms_norm", 0),
            ("rms_norm+add", 1),
            ("silu", 0),
            ("silu+mul", 1),
            ("silu", 1),
            ("mul", 1),
            ("add", 0),
            ("add+rms_norm", 1),
            ("add", 0),
            ("add+rms_norm", 1),
            ("add", 1),
        ]
        .to_vec(),
        "{:#?}",
        plan.ops
    );
    let range = |id| binding_range(&plan, kernels::Binding::Tensor(id)).unwrap();
    assert!(!overlap(range(t), range(z)), "t and z share bytes");
    for (fused, first) in [(2, t), (4, z)] {
        let dispatch = &plan.ops[fused].dispatches[0];
        assert!(dispatch.bindings.contains(&kernels::Binding::Tensor(first)));
        let keys = kernel_keys(&program, CONFIG);
        assert!(keys.contains(&dispatch.key), "{:?}", dispatch.key);
    }
}

#[test]
fn a_post_norm_its_residual_add_and_the_next_norm_run_as_one_dispatch() {
    // Gemma's residual stream: x1 = x + rms_norm(a) (post-norm), h = rms_norm'(x1) (the next
    // pre-norm), x2 = x1 + h * y (x1 read again later: written by the fused dispatch); then
    // the same three ops where the post-norm's result is read twice (post2): only the add
    // and the norm after it fuse (and x2's add with post2's norm before them).
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[3, 8]));
    let a = b.input("a", DType::F32, dims(&[3, 8]));
    let y = b.input("y", DType::F32, dims(&[3, 8]));
    let w1 = b.param("w1", DType::F32, dims(&[8]), "s", "w1");
    let w2 = b.param("w2", DType::F32, dims(&[8]), "s", "w2");
    let norm = push_norm;
    let post = norm(&mut b, a, Some(w1));
    let x1 = b.binary(BinaryOp::Add, x, post).unwrap();
    let h = norm(&mut b, x1, Some(w2));
    let hy = b.binary(BinaryOp::Mul, h, y).unwrap();
    let x2 = b.binary(BinaryOp::Add, x1, hy).unwrap();
    let post2 = norm(&mut b, x2, None);
    let x3 = b.binary(BinaryOp::Add, post2, x2).unwrap();
    let h2 = norm(&mut b, x3, None);
    let twice = b.binary(BinaryOp::Add, h2, post2).unwrap();
    b.output(twice);
    let program = b.into_program();
    let plan = plan_for(&program, &[&[3, 8], &[3, 8], &[3, 8]]).unwrap();
    let shape: Vec<(&str, usize)> = plan
        .ops
        .iter()
        .map(|op| (op.name, op.dispatches.len()))
        .collect();
    assert_eq!(
        shape,
        [
            ("rms_norm", 0),
            ("add", 0),
            ("rms_norm+add+rms_norm", 1),
            ("mul", 1),
            ("add", 0),
            ("add+rms_norm", 1),
            ("add", 0),
            ("add+rms_norm", 1),
            ("add", 1),
        ]
        .to_vec(),
        "{:#?}",
        plan.ops
    );
    let fused = &plan.ops[2].dispatches[0];
    let tensors = |ids: &[TensorId]| -> Vec<kernels::Binding> {
        ids.iter().map(|&id| kernels::Binding::Tensor(id)).collect()
    };
    assert_eq!(fused.bindings, tensors(&[a, x, x1, h, w1, w2]));
    assert_eq!(fused.workgroups, [3, 1, 1], "one workgroup per row");
    assert_eq!(
        plan.ops[7].dispatches[0].bindings,
        tensors(&[post2, x2, x3, h2])
    );
    let keys = kernel_keys(&program, CONFIG);
    for op in [2, 7] {
        assert!(keys.contains(&plan.ops[op].dispatches[0].key));
    }
    // a and x are read at the fused step: nothing written there shares their bytes.
    let range = |id| binding_range(&plan, kernels::Binding::Tensor(id)).unwrap();
    for read in [a, x] {
        for written in [x1, h] {
            assert!(
                !overlap(range(read), range(written)),
                "{read} and {written} share bytes"
            );
        }
    }
}

#[test]
fn a_pair_whose_dispatch_would_bind_one_storage_twice_does_not_fuse() {
    // x + rms_norm(x): the fused dispatch would bind x as the norm's input and as the residual.
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[2, 8]));
    let a = b
        .push(|out| ops::RmsNorm {
            x,
            weight: None,
            eps: 1e-6,
            out,
        })
        .unwrap();
    let z = b.binary(BinaryOp::Add, x, a).unwrap();
    b.output(z);
    let program = b.into_program();
    let plan = plan_for(&program, &[&[2, 8]]).unwrap();
    let names: Vec<_> = plan
        .ops
        .iter()
        .map(|op| (op.name, op.dispatches.len()))
        .collect();
    assert_eq!(names, [("rms_norm", 1), ("add", 1)]);
}

#[test]
fn a_per_head_norm_and_its_rope_run_as_one_dispatch() {
    // Gemma's QK-norm: rms_norm over [seq, heads, head_dim] rows, read only by the rope.
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[2, 4, 16]));
    let positions = b.input("positions", DType::I32, dims(&[2]));
    let w = b.param("w", DType::F32, dims(&[16]), "s", "w");
    let normed = b
        .push(|out| ops::RmsNorm {
            x,
            weight: Some(w),
            eps: 1e-6,
            out,
        })
        .unwrap();
    let rotated = b
        .push(|out| ops::Rope {
            x: normed,
            positions,
            dims: 16,
            base: 10_000.0,
            style: ops::RopeStyle::Neox,
            out,
            scaling: Default::default(),
        })
        .unwrap();
    b.output(rotated);
    let program = b.into_program();
    let plan = plan_for(&program, &[&[2, 4, 16], &[2]]).unwrap();
    let names: Vec<_> = plan
        .ops
        .iter()
        .map(|op| (op.name, op.dispatches.len()))
        .collect();
    assert_eq!(names, [("rms_norm", 0), ("rms_norm+rope", 1)]);
    let dispatch = &plan.ops[1].dispatches[0];
    assert_eq!(dispatch.workgroups, [8, 1, 1], "one workgroup per head row");
    assert!(kernel_keys(&program, CONFIG).contains(&dispatch.key));
    // The compile spec fusion = off: every op dispatches alone.
    let unfused = KernelConfig {
        fusion: false,
        ..CONFIG
    };
    let bound = bind_shapes(&program, &[&[2, 4, 16], &[2]]).unwrap();
    let separate =
        crate::backends::webgpu::plan::plan(&program, bound.shapes, unfused, LIMITS).unwrap();
    let names: Vec<_> = separate
        .ops
        .iter()
        .map(|op| (op.name, op.dispatches.len()))
        .collect();
    assert_eq!(names, [("rms_norm", 1), ("rope", 1)]);
}

#[test]
fn the_queries_and_the_keys_norm_rope_pairs_run_as_one_dispatch() {
    // q [2, 4, 16] and k [2, 1, 16] (Gemma's QK-norm then RoPE): one dispatch over 8 + 2 rows;
    // k with another head dim: the two pairs apart; k's norm without a weight: apart too.
    let build = |k_dim: usize, k_weighted: bool| {
        let mut b = ProgramBuilder::new();
        let q = b.input("q", DType::F32, dims(&[2, 4, 16]));
        let k = b.input("k", DType::F32, dims(&[2, 1, k_dim]));
        let positions = b.input("positions", DType::I32, dims(&[2]));
        let wq = b.param("wq", DType::F32, dims(&[16]), "s", "wq");
        let wk = b.param("wk", DType::F32, dims(&[k_dim]), "s", "wk");
        let pair = |b: &mut ProgramBuilder, x, weight| {
            let normed = push_norm(b, x, weight);
            b.push(|out| ops::Rope {
                x: normed,
                positions,
                dims: 8,
                base: 10_000.0,
                style: ops::RopeStyle::Neox,
                out,
                scaling: Default::default(),
            })
            .unwrap()
        };
        let qo = pair(&mut b, q, Some(wq));
        let ko = pair(&mut b, k, k_weighted.then_some(wk));
        b.output(qo).output(ko);
        (b.into_program(), [q, wq, positions, qo, k, wk, ko])
    };
    let names = |plan: &ShapePlan| -> Vec<(&str, usize)> {
        plan.ops
            .iter()
            .map(|op| (op.name, op.dispatches.len()))
            .collect()
    };
    let (program, bound) = build(16, true);
    let plan = plan_for(&program, &[&[2, 4, 16], &[2, 1, 16], &[2]]).unwrap();
    assert_eq!(
        names(&plan),
        [
            ("rms_norm", 0),
            ("rope", 0),
            ("rms_norm", 0),
            ("rms_norm+rope+rms_norm+rope", 1)
        ]
    );
    let dispatch = &plan.ops[3].dispatches[0];
    assert_eq!(
        dispatch.workgroups,
        [10, 1, 1],
        "one workgroup per head row of both"
    );
    let want: Vec<_> = bound
        .iter()
        .map(|&id| kernels::Binding::Tensor(id))
        .collect();
    assert_eq!(dispatch.bindings, want);
    assert!(kernel_keys(&program, CONFIG).contains(&dispatch.key));
    assert_no_hazard(&program, &plan, "q and k");
    assert_unwritten_results_stay_inside_their_runs(&program, &plan, "q and k");
    for (k_dim, k_weighted) in [(12, true), (16, false)] {
        let (program, _) = build(k_dim, k_weighted);
        let plan = plan_for(&program, &[&[2, 4, 16], &[2, 1, k_dim], &[2]]).unwrap();
        assert_eq!(
            names(&plan),
            [
                ("rms_norm", 0),
                ("rms_norm+rope", 1),
                ("rms_norm", 0),
                ("rms_norm+rope", 1)
            ],
            "k_dim {k_dim}, k weighted {k_weighted}"
        );
        let keys = kernel_keys(&program, CONFIG);
        for op in [1, 3] {
            assert!(keys.contains(&plan.ops[op].dispatches[0].key));
        }
    }
}

/// A value in `0..n` (`n > 0`).
fn below(rng: &mut Rng, n: usize) -> usize {
    rng.range(0, n - 1)
}

/// True with probability `percent / 100`.
fn chance(rng: &mut Rng, percent: u64) -> bool {
    rng.next_u64() % 100 < percent
}

/// A random program over `[rows, 8]` tensors as a decoder's residual stream writes them: norms
/// (weighted or not), adds and products of recent tensors (sometimes one tensor twice, sometimes
/// a broadcast vector), activations, same-shape reshapes (views sharing storage), linears
/// (an 8 x 8 f32 weight, sometimes a bias), explicit post-norm / add / pre-norm runs, gated
/// activations before a linear, and the queries' and keys' QK-norm and RoPE on `[rows, 2, 4]`
/// views (sometimes the second reading the first's result), and random program outputs.
fn random_stream_program(rng: &mut Rng) -> ProgramBuilder {
    let mut b = ProgramBuilder::new();
    let rows = b.symbol("rows");
    let shape = vec![rows, Dim::Fixed(8)];
    let mut pool = vec![
        b.input("x", DType::F32, shape.clone()),
        b.input("a", DType::F32, shape.clone()),
    ];
    let positions = b.input("positions", DType::I32, vec![rows]);
    let head_weights = [0, 1].map(|i| {
        let key = format!("hw{i}");
        b.param(&key, DType::F32, dims(&[4]), SCOPE, &key)
    });
    let weights = [0, 1, 2].map(|i| {
        b.param(
            &format!("w{i}"),
            DType::F32,
            dims(&[8]),
            SCOPE,
            &format!("w{i}"),
        )
    });
    let bias = b.param("bias", DType::F32, dims(&[8]), SCOPE, "bias");
    let matrix = b.param("matrix", DType::F32, dims(&[8, 8]), SCOPE, "matrix");
    let linear = |b: &mut ProgramBuilder, rng: &mut Rng, x| {
        let bias = chance(rng, 30).then_some(bias);
        b.push(|out| ops::Linear {
            x,
            weight: matrix,
            bias,
            out,
        })
        .unwrap()
    };
    // Mostly the newest tensor, so that chains form; sometimes any earlier one.
    let pick = |rng: &mut Rng, pool: &[TensorId]| {
        if chance(rng, 60) {
            pool[pool.len() - 1]
        } else {
            pool[below(rng, pool.len())]
        }
    };
    let weight = |rng: &mut Rng| (!chance(rng, 25)).then(|| weights[below(rng, 3)]);
    for _ in 0..4 + below(rng, 14) {
        let t = match below(rng, 11) {
            0 | 1 => {
                let x = pick(rng, &pool);
                let w = weight(rng);
                push_norm(&mut b, x, w)
            }
            2 => {
                let (x, y) = (pick(rng, &pool), pool[below(rng, pool.len())]);
                let y = if chance(rng, 10) { x } else { y };
                let (x, y) = if chance(rng, 50) { (x, y) } else { (y, x) };
                b.binary(BinaryOp::Add, x, y).unwrap()
            }
            3 => {
                let (x, y) = (pick(rng, &pool), pool[below(rng, pool.len())]);
                b.binary(BinaryOp::Mul, x, y).unwrap()
            }
            4 => {
                let x = pick(rng, &pool);
                let op = [UnaryOp::Silu, UnaryOp::GeluTanh][below(rng, 2)];
                b.unary(op, x).unwrap()
            }
            5 => {
                let x = pick(rng, &pool);
                if chance(rng, 50) {
                    b.binary(BinaryOp::Add, x, bias).unwrap()
                } else {
                    b.reshape(x, shape.clone()).unwrap()
                }
            }
            6 => {
                let x = pick(rng, &pool);
                linear(&mut b, rng, x)
            }
            7 => {
                // A gated activation and the linear that reads it (an FFN's down projection).
                let (x, up) = (pick(rng, &pool), pool[below(rng, pool.len())]);
                let op = [UnaryOp::Silu, UnaryOp::GeluTanh][below(rng, 2)];
                let g = b.unary(op, x).unwrap();
                pool.push(g);
                let product = b.binary(BinaryOp::Mul, g, up).unwrap();
                pool.push(product);
                linear(&mut b, rng, product)
            }
            8 => {
                // The queries' and the keys' QK-norm and RoPE, on [rows, 2, 4] views.
                let (q, k) = (pick(rng, &pool), pool[below(rng, pool.len())]);
                let heads = vec![rows, Dim::Fixed(2), Dim::Fixed(4)];
                let style = [ops::RopeStyle::Neox, ops::RopeStyle::GptJ][below(rng, 2)];
                let pair = |b: &mut ProgramBuilder, rng: &mut Rng, view| {
                    let weight = (!chance(rng, 20)).then(|| head_weights[below(rng, 2)]);
                    let normed = push_norm(b, view, weight);
                    b.push(|out| ops::Rope {
                        x: normed,
                        positions,
                        dims: 4,
                        base: 10_000.0,
                        style,
                        out,
                        scaling: Default::default(),
                    })
                    .unwrap()
                };
                // Both views first (a view between the pairs would keep them apart), unless
                // the keys' pair reads the queries' result (no four-op run then).
                let q_view = b.reshape(q, heads.clone()).unwrap();
                let chained = chance(rng, 20);
                let k_view = (!chained).then(|| b.reshape(k, heads.clone()).unwrap());
                let q_rotated = pair(&mut b, rng, q_view);
                let k_rotated = pair(&mut b, rng, k_view.unwrap_or(q_rotated));
                let rotated = [q_rotated, k_rotated];
                let [qo, ko] = rotated.map(|r| b.reshape(r, shape.clone()).unwrap());
                pool.push(qo);
                ko
            }
            _ => {
                // A post-norm, the residual add and the next pre-norm.
                let (a, residual) = (pick(rng, &pool), pool[below(rng, pool.len())]);
                let w = weight(rng);
                let post = push_norm(&mut b, a, w);
                pool.push(post);
                let sum = b.binary(BinaryOp::Add, residual, post).unwrap();
                pool.push(sum);
                let w = weight(rng);
                push_norm(&mut b, sum, w)
            }
        };
        pool.push(t);
    }
    b.output(pool[pool.len() - 1]);
    for _ in 0..below(rng, 3) {
        b.output(pool[2 + below(rng, pool.len() - 2)]);
    }
    b
}

/// Checks that no dispatch of `plan` can clobber a tensor still to be read: any two tensors in
/// the arena whose storage roots differ (a reshape shares its input's) and whose live spans
/// meet do not share bytes. A tensor's span is taken from the plan's dispatches, not from the
/// planner's own liveness: from the first op whose dispatches bind it (an input: from before
/// the first op) to the last (a program output: to the end).
fn assert_no_hazard(program: &Program, plan: &ShapePlan, what: &str) {
    let count = plan.placements.len();
    let mut root: Vec<usize> = (0..count).collect();
    for op in &program.ops {
        if let Op::Reshape(reshape) = op {
            root[reshape.out as usize] = root[reshape.x as usize];
        }
    }
    let mut span: Vec<Option<(usize, usize)>> = vec![None; count];
    let mut meet = |id: usize, step: usize| {
        let s = span[id].get_or_insert((step, step));
        s.0 = s.0.min(step);
        s.1 = s.1.max(step);
    };
    for &input in &program.inputs {
        meet(input as usize, 0);
    }
    for op in &plan.ops {
        for dispatch in &op.dispatches {
            for binding in &dispatch.bindings {
                if let kernels::Binding::Tensor(id) = binding {
                    meet(*id as usize, op.op_index + 1);
                }
            }
        }
    }
    for &output in &program.outputs {
        meet(output as usize, usize::MAX);
    }
    // (tensor, its span of ops, its storage range)
    type Entry = (usize, (usize, usize), (Storage, u64));
    let arena: Vec<Entry> = (0..count)
        .filter_map(|id| {
            let range = binding_range(plan, kernels::Binding::Tensor(id as TensorId))?;
            matches!(range.0, Storage::Arena(_)).then_some((id, span[id]?, range))
        })
        .collect();
    for (i, &(a, (a0, a1), ra)) in arena.iter().enumerate() {
        for &(b, (b0, b1), rb) in &arena[..i] {
            if root[a] != root[b] && a0 <= b1 && b0 <= a1 {
                assert!(
                    !overlap(ra, rb),
                    "{what}: tensors {a} (ops {a0}..={a1}) and {b} (ops {b0}..={b1}) share bytes\n{program:#?}\n{:#?}",
                    plan.ops
                );
            }
        }
    }
}

/// Checks that every result `plan` leaves unwritten is read only inside its fused run: an op
/// that plans no dispatch (not a view) belongs to the run that dispatches at the next op with
/// dispatches, whose name joins the ops' names with `+`; its result is either bound by that
/// run's dispatch (written there, as the residual sum) or read by no op after the run and not a
/// program output.
fn assert_unwritten_results_stay_inside_their_runs(
    program: &Program,
    plan: &ShapePlan,
    what: &str,
) {
    for (index, op) in program.ops.iter().enumerate() {
        if !plan.ops[index].dispatches.is_empty() || matches!(op, Op::Reshape(_)) {
            continue;
        }
        let last = (index + 1..plan.ops.len())
            .find(|&i| !plan.ops[i].dispatches.is_empty())
            .unwrap_or_else(|| panic!("{what}: op {index} dispatches nowhere"));
        assert!(
            plan.ops[last].name.contains('+'),
            "{what}: op {index} skipped outside a run"
        );
        let result = op.output();
        let written = plan.ops[last]
            .dispatches
            .iter()
            .any(|d| d.bindings.contains(&kernels::Binding::Tensor(result)));
        let read_later = program.ops[last + 1..]
            .iter()
            .any(|later| later.inputs().contains(&result))
            || program.outputs.contains(&result);
        assert!(
            written || !read_later,
            "{what}: op {index}'s result is never written but read after its run"
        );
    }
}

#[test]
fn random_residual_streams_plan_fused_without_hazards() {
    // 400 random programs at 1 and 5 rows, fused and unfused, under the rows GEMV (CPU-emulated
    // adapters: no gated linear) and the workgroup GEMV: both plan, every fused dispatch's
    // kernel is one init compiles and binds no storage twice, fusion never adds a dispatch, and
    // no dispatch can overwrite a tensor still to be read.
    let workgroup = KernelConfig {
        gemv: kernels::GemvKernel::Workgroup,
        ..CONFIG
    };
    let mut rng = Rng::new(89);
    let (mut fused_runs, mut triples, mut gated_linears, mut qk_pairs) = (0, 0, 0, 0);
    for case in 0..400 {
        let builder = random_stream_program(&mut rng);
        let program = builder.program();
        let config = if case % 2 == 0 { CONFIG } else { workgroup };
        let unfused = KernelConfig {
            fusion: false,
            ..config
        };
        let keys = kernel_keys(program, config);
        for rows in [1usize, 5] {
            let inputs: [&[usize]; 3] = [&[rows, 8], &[rows, 8], &[rows]];
            let plan_with = |config| {
                let bound = bind_shapes(program, &inputs).unwrap();
                crate::backends::webgpu::plan::plan(program, bound.shapes, config, LIMITS).unwrap()
            };
            let (fused, separate) = (plan_with(config), plan_with(unfused));
            let what = format!("case {case}, {rows} rows");
            assert_no_hazard(program, &fused, &format!("{what}, fused"));
            assert_unwritten_results_stay_inside_their_runs(program, &fused, &what);
            assert_no_hazard(program, &separate, &format!("{what}, unfused"));
            let dispatches =
                |plan: &ShapePlan| -> usize { plan.ops.iter().map(|op| op.dispatches.len()).sum() };
            assert!(dispatches(&fused) <= dispatches(&separate), "{what}");
            for dispatch in fused.ops.iter().flat_map(|op| &op.dispatches) {
                assert!(keys.contains(&dispatch.key), "{what}: {:?}", dispatch.key);
                // WebGPU refuses a dispatch that binds overlapping writable ranges.
                let ranges: Vec<_> = dispatch
                    .bindings
                    .iter()
                    .filter_map(|&binding| binding_range(&fused, binding))
                    .collect();
                for (i, &a) in ranges.iter().enumerate() {
                    assert!(
                        ranges[..i].iter().all(|&b| !overlap(a, b)),
                        "{what}: {:?} binds one storage twice",
                        dispatch.key
                    );
                }
            }
            fused_runs += fused.ops.iter().filter(|op| op.name.contains('+')).count();
            triples += fused
                .ops
                .iter()
                .filter(|op| op.name == "rms_norm+add+rms_norm")
                .count();
            let gated = fused
                .ops
                .iter()
                .filter(|op| op.name.ends_with("+mul+linear"))
                .count();
            assert!(
                config.gemv != kernels::GemvKernel::Rows || gated == 0,
                "{what}"
            );
            gated_linears += gated;
            qk_pairs += fused
                .ops
                .iter()
                .filter(|op| op.name == "rms_norm+rope+rms_norm+rope")
                .count();
        }
    }
    // The generator must reach the fused forms, or the property says nothing about them.
    assert!(
        fused_runs > 400 && triples > 100 && gated_linears > 100 && qk_pairs > 50,
        "{fused_runs} runs, {triples} norm triples, {gated_linears} gated linears, \
         {qk_pairs} q and k norm-rope runs"
    );
}

#[test]
fn random_residual_streams_compute_what_the_cpu_backend_computes() {
    // 24 of the random programs run on this device (lavapipe natively) under the workgroup
    // GEMV (so every fused form, the gated linear included, is taken) and with fusion off, and
    // on the CPU backend, which runs every op as written: at 1 and 3 rows, random inputs and
    // parameters, every output within 1e-4 + 1e-4 |cpu| of the CPU's. (The norms downstream
    // hide an error that scales a whole row; the op suite's chain cases catch those.)
    use crate::backends::cpu::CpuBackend;
    use crate::evalue::{Tensor, TensorData};
    use crate::registry::CompileSpec;
    let cpu = CpuBackend::new();
    let gpu = super::backend();
    let fused_specs = [CompileSpec::new("gemv_kernel", "workgroup")];
    let unfused_specs = [
        CompileSpec::new("gemv_kernel", "workgroup"),
        CompileSpec::new("fusion", "off"),
    ];
    let mut rng = Rng::new(97);
    let mut fused_forms = 0;
    for case in 0..24 {
        let builder = random_stream_program(&mut rng);
        let mut params: Vec<(&str, Vec<u8>)> = ["w0", "w1", "w2"]
            .map(|key| (key, super::f32_bytes(&rng.f32s(8, 0.5, 1.5))))
            .to_vec();
        params.push(("bias", super::f32_bytes(&rng.f32s(8, -0.5, 0.5))));
        for key in ["hw0", "hw1"] {
            params.push((key, super::f32_bytes(&rng.f32s(4, 0.5, 1.5))));
        }
        params.push(("matrix", super::f32_bytes(&rng.f32s(64, -0.5, 0.5))));
        for rows in [1usize, 3] {
            let inputs = || {
                let mut tensors: Vec<Tensor> = (0..2)
                    .map(|input| {
                        Tensor::from_f32(vec![rows, 8], inputs_of(case, rows, input)).unwrap()
                    })
                    .collect();
                let positions = (0..rows as i32).map(|r| 7 * r + case as i32).collect();
                tensors.push(Tensor::new(vec![rows], TensorData::Int32(positions)).unwrap());
                tensors
            };
            let want = super::run_on(&cpu, &builder, &params, inputs(), &[]).unwrap();
            for specs in [&fused_specs[..], &unfused_specs[..]] {
                let got = super::run_on(gpu, &builder, &params, inputs(), specs).unwrap();
                for (output, (g, w)) in got.iter().zip(&want).enumerate() {
                    let (g, w) = (g.as_f32().unwrap(), w.as_f32().unwrap());
                    assert_eq!(g.len(), w.len());
                    for (i, (a, b)) in g.iter().zip(w).enumerate() {
                        assert!(
                            (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
                            "case {case}, {rows} rows, {specs:?}: output {output}[{i}] = {a}, cpu {b}\n{:#?}",
                            builder.program().ops
                        );
                    }
                }
            }
        }
        let bound = bind_shapes(builder.program(), &[&[1, 8], &[1, 8], &[1]]).unwrap();
        let config = KernelConfig {
            gemv: kernels::GemvKernel::Workgroup,
            ..CONFIG
        };
        let plan =
            crate::backends::webgpu::plan::plan(builder.program(), bound.shapes, config, LIMITS)
                .unwrap();
        fused_forms += plan.ops.iter().filter(|op| op.name.contains('+')).count();
    }
    assert!(
        fused_forms >= 48,
        "only {fused_forms} fused runs in 24 programs"
    );
}

/// Input `input` of a case at `rows` rows: values in [-2, 2), the same for every backend.
fn inputs_of(case: usize, rows: usize, input: usize) -> Vec<f32> {
    Rng::new((case * 16 + rows * 2 + input) as u64).f32s(rows * 8, -2.0, 2.0)
}

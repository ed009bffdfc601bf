use super::*;
use crate::error::ErrorCode;
use crate::program::builder::ProgramBuilder;
use crate::program::ir::{BinaryOp, DType, Dim, Dim::Fixed as F, ParamRef, TensorDecl};

/// `y = gelu(x @ w + b)` over `[batch, 4]` inputs, plus a softmax: a small valid program.
fn valid() -> Program {
    let mut b = ProgramBuilder::new();
    let batch = b.symbol("batch");
    let x = b.input("x", DType::F32, vec![batch, F(4)]);
    let w = b.param("w", DType::F32, vec![F(4), F(3)], "s", "w");
    let bias = b.param("b", DType::F32, vec![F(3)], "s", "b");
    let h = b.matmul(x, w, Some(bias), false, false).unwrap();
    let g = b.gelu(h).unwrap();
    let y = b.softmax(g, None).unwrap();
    b.output(y);
    b.finish().unwrap()
}

fn message(program: &Program) -> String {
    let error = validate(program).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidProgram, "{error}");
    error.message().to_owned()
}

fn assert_mentions(program: &Program, parts: &[&str]) {
    let text = message(program);
    for part in parts {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }
}

#[test]
fn valid_program_passes() {
    validate(&valid()).unwrap();
    validate(&Program::default()).unwrap();
}

#[test]
fn ids_out_of_range_are_named() {
    let mut p = valid();
    p.inputs.push(99);
    assert_mentions(&p, &["input 1", "tensor 99"]);

    let mut p = valid();
    p.outputs.push(42);
    assert_mentions(&p, &["output 1", "tensor 42"]);

    let mut p = valid();
    p.ops[1] = Op::Unary {
        op: UnaryOp::Tanh,
        x: 77,
        out: 4,
    };
    assert_mentions(&p, &["op 1 (tanh)", "tensor 77"]);

    let mut p = valid();
    p.tensors[0].shape[0] = Dim::Symbol(5);
    assert_mentions(&p, &["tensor 0 \"x\"", "symbol 5"]);
}

use crate::program::ir::UnaryOp;

#[test]
fn every_tensor_has_exactly_one_role() {
    let mut p = valid();
    p.inputs.push(1);
    assert_mentions(&p, &["param 0 names tensor 1 \"w\"", "already input 1"]);

    let mut p = valid();
    p.params.push(ParamRef {
        tensor: 0,
        scope: "s".into(),
        key: "x".into(),
    });
    assert_mentions(&p, &["param 2", "already input 0"]);

    let mut p = valid();
    p.ops.push(Op::Unary {
        op: UnaryOp::Relu,
        x: 3,
        out: 4,
    });
    assert_mentions(&p, &["op 3 (relu) output", "already the output of op 1"]);

    let mut p = valid();
    p.tensors.push(TensorDecl {
        name: "orphan".into(),
        dtype: DType::F32,
        shape: vec![],
    });
    assert_mentions(&p, &["tensor 6 \"orphan\" is never defined"]);

    let mut p = valid();
    p.outputs.push(1);
    assert_mentions(&p, &["output 1", "param 0"]);
}

#[test]
fn cycles_and_use_before_definition_are_told_apart() {
    // Self loop.
    let mut p = valid();
    p.ops[1] = Op::Unary {
        op: UnaryOp::Gelu,
        x: 4,
        out: 4,
    };
    assert_mentions(&p, &["cycle", "op 1 (gelu) reads its own output"]);

    // Two ops reading each other's outputs.
    let mut p = valid();
    p.ops[1] = Op::Unary {
        op: UnaryOp::Gelu,
        x: 5,
        out: 4,
    };
    assert_mentions(&p, &["cycle", "op 1 (gelu) reads tensor 5", "op 2"]);

    // Reading a later, independent op's output.
    let mut p = valid();
    p.ops.swap(1, 2);
    // Now op 1 is softmax(tensor 4), op 2 is gelu(tensor 3) -> tensor 4: no cycle.
    assert_mentions(&p, &["use before definition", "op 1 (softmax)", "op 2"]);
}

#[test]
fn dtypes_are_checked_per_op() {
    let mut p = valid();
    p.tensors[0].dtype = DType::I32;
    assert_mentions(
        &p,
        &["op 0 (matmul)", "a (tensor 0 \"x\") is i32, expected f32"],
    );

    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, vec![F(2)]);
    let t = b.param("t", DType::F32, vec![F(4), F(2)], "s", "t");
    let out = b.tensor("e", DType::F32, vec![F(2), F(2)]);
    b.op(Op::Gather {
        table: t,
        ids: x,
        out,
    })
    .output(out);
    assert_mentions(
        &b.into_program(),
        &["op 0 (gather)", "ids", "expected i32 or i64"],
    );
}

#[test]
fn declared_shapes_must_equal_inferred() {
    let mut p = valid();
    p.tensors[3].shape = vec![Dim::Symbol(0), F(4)];
    assert_mentions(
        &p,
        &["op 0 (matmul)", "declared [$0, 4]", "computes [$0, 3]"],
    );

    let mut b = ProgramBuilder::new();
    let s = b.symbol("s");
    let x = b.input("x", DType::F32, vec![s, F(6)]);
    let bad = b.tensor("r", DType::F32, vec![s, F(4)]);
    b.op(Op::Reshape { x, out: bad }).output(bad);
    assert_mentions(
        &b.into_program(),
        &["op 0 (reshape)", "same number of elements"],
    );

    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, vec![F(2), F(3)]);
    let out = b.tensor("p", DType::F32, vec![F(3), F(2)]);
    b.op(Op::Permute {
        x,
        perm: vec![1, 1],
        out,
    });
    assert_mentions(&b.into_program(), &["op 0 (permute)", "not a permutation"]);

    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, vec![F(2), F(3)]);
    let out = b.tensor("s", DType::F32, vec![F(2), F(2)]);
    b.op(Op::Slice {
        x,
        axis: 1,
        start: 2,
        end: Some(4),
        out,
    });
    assert_mentions(&b.into_program(), &["op 0 (slice)", "2..4"]);

    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, vec![F(2), F(3)]);
    let out = b.tensor("c", DType::F32, vec![F(4), F(3)]);
    b.op(Op::Concat {
        inputs: vec![x, x],
        axis: 2,
        out,
    });
    assert_mentions(
        &b.into_program(),
        &["op 0 (concat)", "axis 2 is out of range"],
    );
}

#[test]
fn params_need_fixed_shapes_and_keys() {
    let mut p = valid();
    p.tensors[1].shape = vec![Dim::Symbol(0), F(3)];
    assert_mentions(&p, &["param 0", "fixed shapes"]);

    let mut p = valid();
    p.params[1].key.clear();
    assert_mentions(&p, &["param 1 has an empty key"]);
}

#[test]
fn symbols_must_be_bound_by_inputs() {
    let mut b = ProgramBuilder::new();
    let s = b.symbol("seq");
    let x = b.input("x", DType::F32, vec![F(3)]);
    let _ = s;
    b.output(x);
    assert_mentions(&b.into_program(), &["symbol 0 \"seq\"", "nothing binds it"]);
}

#[test]
fn sizes_and_limits() {
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, vec![F(u64::MAX / 2), F(3)]);
    b.output(x);
    assert_mentions(&b.into_program(), &["tensor 0 \"x\"", "overflows 64 bits"]);

    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, vec![F(1); 9]);
    b.output(x);
    assert_mentions(&b.into_program(), &["rank 9"]);

    let mut p = valid();
    p.symbols = vec![String::new(); Limits::MAX_SYMBOLS + 1];
    assert_mentions(&p, &["symbols", "limit"]);

    #[cfg(target_pointer_width = "32")]
    {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![F(1 << 31)]);
        b.output(x);
        assert_mentions(&b.into_program(), &["more than this platform can address"]);
    }
}

#[test]
fn bad_constants_are_refused() {
    let mut p = valid();
    p.ops.push(Op::Scale {
        x: 5,
        scale: f32::NAN,
        bias: 0.0,
        out: 6,
    });
    p.tensors.push(TensorDecl {
        name: "s".into(),
        dtype: DType::F32,
        shape: vec![Dim::Symbol(0), F(3)],
    });
    assert_mentions(&p, &["op 3 (scale)", "scale is NaN"]);
    if let Some(Op::Scale { scale, .. }) = p.ops.last_mut() {
        *scale = 2.0;
    }
    validate(&p).unwrap();
}

#[test]
fn binary_broadcast_mismatch_names_op() {
    let mut b = ProgramBuilder::new();
    let s = b.symbol("s");
    let x = b.input("x", DType::F32, vec![s, F(4)]);
    let y = b.input("y", DType::F32, vec![F(4), F(4)]);
    let out = b.tensor("z", DType::F32, vec![s, F(4)]);
    b.op(Op::Binary {
        op: BinaryOp::Sub,
        a: x,
        b: y,
        out,
    });
    assert_mentions(&b.into_program(), &["op 0 (sub)", "do not broadcast"]);
}

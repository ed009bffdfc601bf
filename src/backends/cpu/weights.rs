//! Weights prepared once at init: a 2-D f32 parameter that every op reading it uses as the
//! right operand `b` of a matmul (with the same `transpose_b`), or as the weight of a `linear`
//! (a `b` transposed: `[n, k]` rows), is packed into the GEMM's panel order and its raw values
//! are dropped, so executions neither pack it nor keep two copies.

use crate::backends::cpu::gemm::PackedB;
use crate::backends::cpu::values::Values;
use crate::error::Result;
use crate::program::ops;
use crate::program::{DType, Dim, Op, Program, TensorId};

/// The `transpose_b` every reader of `id` uses it with, if every reader is a matmul taking it as
/// `b` (and not also as `a` or bias) or a linear taking it as its weight (transposed).
fn sole_matmul_use(program: &Program, id: TensorId) -> Option<bool> {
    let mut flag = None;
    for op in &program.ops {
        if !op.inputs().contains(&id) {
            continue;
        }
        match op {
            Op::MatMul(ops::MatMul {
                a,
                b,
                bias,
                transpose_b,
                ..
            }) if *b == id && *a != id && *bias != Some(id) => match flag {
                None => flag = Some(*transpose_b),
                Some(previous) if previous == *transpose_b => {}
                Some(_) => return None,
            },
            Op::Linear(ops::Linear {
                x, weight, bias, ..
            }) if *weight == id && *x != id && *bias != Some(id) => match flag {
                None | Some(true) => flag = Some(true),
                Some(false) => return None,
            },
            _ => return None,
        }
    }
    flag
}

/// `values` of parameter `id` packed for matmul, if it qualifies (see the module docs); the
/// caller then drops the raw values.
///
/// # Errors
/// `Internal` when the values disagree with the declaration.
pub fn pack_param(program: &Program, id: TensorId, values: &Values) -> Result<Option<PackedB>> {
    let Some(decl) = program.tensors.get(id as usize) else {
        return Ok(None);
    };
    let shape = match decl.shape.as_slice() {
        [Dim::Fixed(rows), Dim::Fixed(cols)] if decl.dtype == DType::F32 => {
            [*rows as usize, *cols as usize]
        }
        _ => return Ok(None),
    };
    let (Some(transposed), Values::F32(values)) = (sole_matmul_use(program, id), values) else {
        return Ok(None);
    };
    PackedB::pack(values, shape, transposed).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::ProgramBuilder;

    #[test]
    fn only_weights_used_solely_as_matmul_right_operands_are_packed() {
        let mut b = ProgramBuilder::new();
        let f = |n| Dim::Fixed(n);
        let x = b.input("x", DType::F32, vec![f(3), f(3)]);
        let linear = b.param("linear", DType::F32, vec![f(3), f(3)], "s", "linear");
        let shared = b.param("shared", DType::F32, vec![f(3), f(3)], "s", "shared");
        let mixed = b.param("mixed", DType::F32, vec![f(3), f(3)], "s", "mixed");
        let h = b.matmul(x, linear, None, false, true).unwrap();
        let h = b.matmul(h, linear, None, false, true).unwrap();
        let h = b.matmul(h, shared, None, false, false).unwrap();
        let h = b.add(h, shared).unwrap();
        let h = b.matmul(h, mixed, None, false, false).unwrap();
        let h = b.matmul(h, mixed, None, false, true).unwrap();
        b.output(h);
        let program = b.finish().unwrap();
        let values = Values::F32(vec![1.0; 9]);
        let packed = |id| pack_param(&program, id, &values).unwrap();
        assert!(packed(linear).is_some());
        assert!(packed(shared).is_none());
        assert!(packed(mixed).is_none());
    }

    #[test]
    fn linear_weights_pack_as_transposed_right_operands() {
        let mut b = ProgramBuilder::new();
        let f = |n| Dim::Fixed(n);
        let x = b.input("x", DType::F32, vec![f(2), f(3)]);
        let alone = b.param("alone", DType::F32, vec![f(3), f(3)], "s", "alone");
        let with_mm = b.param("with_mm", DType::F32, vec![f(3), f(3)], "s", "with_mm");
        let against = b.param("against", DType::F32, vec![f(3), f(3)], "s", "against");
        let mut linear = |x, weight| {
            b.push(|out| ops::Linear {
                x,
                weight,
                bias: None,
                out,
            })
            .unwrap()
        };
        let h = linear(x, alone);
        let h = linear(h, with_mm);
        let h = linear(h, against);
        let h = b.matmul(h, with_mm, None, false, true).unwrap();
        let h = b.matmul(h, against, None, false, false).unwrap();
        b.output(h);
        let program = b.finish().unwrap();
        let values = Values::F32(vec![1.0; 9]);
        let packed = |id| pack_param(&program, id, &values).unwrap();
        assert!(packed(alone).is_some());
        assert!(
            packed(with_mm).is_some(),
            "linear and a transposed matmul agree"
        );
        assert!(
            packed(against).is_none(),
            "linear and an untransposed matmul disagree"
        );
    }
}

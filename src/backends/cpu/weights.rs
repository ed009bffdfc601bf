//! Weights prepared once at init: a 2-D f32 parameter that every op reading it uses as the
//! right operand `b` of a matmul (with the same `transpose_b`) is packed into the GEMM's panel
//! order and its raw values are dropped, so executions neither pack it nor keep two copies.

use crate::backends::cpu::gemm::PackedB;
use crate::backends::cpu::values::Values;
use crate::error::Result;
use crate::program::ops;
use crate::program::{DType, Dim, Op, Program, TensorId};

/// The `transpose_b` every reader of `id` uses it with, if every reader is a matmul taking it as
/// `b` (and not also as `a` or bias).
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
            _ => return None,
        }
    }
    flag
}

/// Packs every parameter that qualifies (see the module docs), removing its raw values from
/// `params`; returns the packed weights by tensor id.
///
/// # Errors
/// `Internal` when a parameter's values disagree with its declaration.
pub fn pack_weights(
    program: &Program,
    params: &mut [Option<Values>],
) -> Result<Vec<Option<PackedB>>> {
    let mut packed: Vec<Option<PackedB>> = (0..program.tensors.len()).map(|_| None).collect();
    for param in &program.params {
        let id = param.tensor;
        let Some(decl) = program.tensors.get(id as usize) else {
            continue;
        };
        let shape = match decl.shape.as_slice() {
            [Dim::Fixed(rows), Dim::Fixed(cols)] if decl.dtype == DType::F32 => {
                [*rows as usize, *cols as usize]
            }
            _ => continue,
        };
        let Some(transposed) = sole_matmul_use(program, id) else {
            continue;
        };
        let (Some(Some(Values::F32(values))), Some(slot)) =
            (params.get(id as usize), packed.get_mut(id as usize))
        else {
            continue;
        };
        *slot = Some(PackedB::pack(values, shape, transposed)?);
        if let Some(raw) = params.get_mut(id as usize) {
            *raw = None;
        }
    }
    Ok(packed)
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
        let mut params: Vec<Option<Values>> = (0..program.tensors.len()).map(|_| None).collect();
        for id in [linear, shared, mixed] {
            params[id as usize] = Some(Values::F32(vec![1.0; 9]));
        }
        let packed = pack_weights(&program, &mut params).unwrap();
        assert!(packed[linear as usize].is_some() && params[linear as usize].is_none());
        assert!(packed[shared as usize].is_none() && params[shared as usize].is_some());
        assert!(packed[mixed as usize].is_none() && params[mixed as usize].is_some());
    }
}

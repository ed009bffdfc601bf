//! Permute, slice, concat and reshape on every dtype (exact: data movement only), on random
//! shapes and permutations, and reshape chains that alias storage.

use super::{Rng, dims, run};
use crate::evalue::{Tensor, TensorData};
use crate::program::ops;
use crate::program::{DType, Op, ProgramBuilder};

const DTYPES: [DType; 4] = [DType::F32, DType::I32, DType::I64, DType::U8];

/// A tensor of `dtype` whose element i encodes i (distinct values in every dtype).
fn iota(dtype: DType, shape: &[usize], salt: i64) -> Tensor {
    let n: usize = shape.iter().product();
    let value = |i: usize| i as i64 * 7 + salt;
    let data = match dtype {
        DType::F32 => TensorData::Float32((0..n).map(|i| value(i) as f32).collect()),
        DType::I32 => TensorData::Int32((0..n).map(|i| -(value(i) as i32)).collect()),
        DType::I64 => TensorData::Int64((0..n).map(|i| value(i) * (1 << 33) - 5).collect()),
        DType::U8 => TensorData::UInt8((0..n).map(|i| (value(i) % 251) as u8).collect()),
        DType::Block(_) => unreachable!("dense dtypes only"),
    };
    Tensor::new(shape.to_vec(), data).unwrap()
}

/// Element `flat` of `t`, as i128 for comparison.
fn element(t: &Tensor, flat: usize) -> i128 {
    match t.data() {
        TensorData::Float32(v) => v[flat] as i128,
        TensorData::Int32(v) => v[flat].into(),
        TensorData::Int64(v) => v[flat].into(),
        TensorData::UInt8(v) => v[flat].into(),
        _ => unreachable!(),
    }
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

fn coords(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = flat % shape[d];
        flat /= shape[d];
    }
    c
}

#[test]
fn permute_matches_reference_on_every_dtype() {
    let mut rng = Rng::new(30);
    for case in 0..16 {
        let dtype = DTYPES[case % 4];
        let rank = rng.range(1, 5);
        let shape: Vec<usize> = (0..rank).map(|_| rng.range(1, 7)).collect();
        let mut perm: Vec<u32> = (0..rank as u32).collect();
        for i in (1..rank).rev() {
            perm.swap(i, rng.range(0, i));
        }
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p as usize]).collect();
        let mut p = ProgramBuilder::new();
        p.input("x", dtype, dims(&shape));
        p.tensor("y", dtype, dims(&out_shape));
        p.op(Op::Permute(ops::Permute {
            x: 0,
            perm: perm.clone(),
            out: 1,
        }))
        .output(1);
        let x = iota(dtype, &shape, case as i64);
        let out = run(&p, &[], vec![x.clone()], &[]).unwrap();
        assert_eq!(out[0].shape(), out_shape.as_slice());
        let in_strides = strides(&shape);
        for flat in 0..out[0].numel() {
            let c = coords(flat, &out_shape);
            let src: usize = c
                .iter()
                .zip(&perm)
                .map(|(&ci, &p)| ci * in_strides[p as usize])
                .sum();
            assert_eq!(
                element(&out[0], flat),
                element(&x, src),
                "{dtype:?} {shape:?} {perm:?} at {flat}"
            );
        }
    }
}

#[test]
fn slice_matches_reference_on_every_dtype() {
    let mut rng = Rng::new(31);
    for case in 0..16 {
        let dtype = DTYPES[case % 4];
        let rank = rng.range(1, 4);
        let shape: Vec<usize> = (0..rank).map(|_| rng.range(1, 9)).collect();
        let axis = rng.range(0, rank - 1);
        let start = rng.range(0, shape[axis]);
        let end = rng.range(start, shape[axis]);
        let mut out_shape = shape.clone();
        out_shape[axis] = end - start;
        let mut p = ProgramBuilder::new();
        p.input("x", dtype, dims(&shape));
        p.tensor("y", dtype, dims(&out_shape));
        let end_field = if case % 3 == 0 && end == shape[axis] {
            None
        } else {
            Some(end as u64)
        };
        p.op(Op::Slice(ops::Slice {
            x: 0,
            axis: axis as u32,
            start: start as u64,
            end: end_field,
            out: 1,
        }))
        .output(1);
        let x = iota(dtype, &shape, 3);
        let out = run(&p, &[], vec![x.clone()], &[]).unwrap();
        let in_strides = strides(&shape);
        for flat in 0..out[0].numel() {
            let mut c = coords(flat, &out_shape);
            c[axis] += start;
            let src: usize = c.iter().zip(&in_strides).map(|(a, b)| a * b).sum();
            assert_eq!(element(&out[0], flat), element(&x, src));
        }
    }
}

#[test]
fn concat_matches_reference_on_every_dtype() {
    let mut rng = Rng::new(32);
    for case in 0..12 {
        let dtype = DTYPES[case % 4];
        let rank = rng.range(1, 4);
        let base: Vec<usize> = (0..rank).map(|_| rng.range(1, 6)).collect();
        let axis = rng.range(0, rank - 1);
        let parts = rng.range(1, 3);
        let shapes: Vec<Vec<usize>> = (0..parts)
            .map(|_| {
                let mut s = base.clone();
                s[axis] = rng.range(0, 4);
                s
            })
            .collect();
        let mut out_shape = base.clone();
        out_shape[axis] = shapes.iter().map(|s| s[axis]).sum();
        let mut p = ProgramBuilder::new();
        let inputs: Vec<u32> = shapes
            .iter()
            .map(|s| p.input("x", dtype, dims(s)))
            .collect();
        let out = p.tensor("y", dtype, dims(&out_shape));
        p.op(Op::Concat(ops::Concat {
            inputs,
            axis: axis as u32,
            out,
        }))
        .output(out);
        let tensors: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| iota(dtype, s, 100 * i as i64))
            .collect();
        let got = run(&p, &[], tensors.clone(), &[]).unwrap();
        assert_eq!(got[0].shape(), out_shape.as_slice());
        for flat in 0..got[0].numel() {
            let mut c = coords(flat, &out_shape);
            let mut part = 0;
            while c[axis] >= shapes[part][axis] {
                c[axis] -= shapes[part][axis];
                part += 1;
            }
            let src: usize = c
                .iter()
                .zip(strides(&shapes[part]))
                .map(|(a, b)| a * b)
                .sum();
            assert_eq!(
                element(&got[0], flat),
                element(&tensors[part], src),
                "{dtype:?} case {case}"
            );
        }
    }
}

/// Reshape is a view: a chain reshape -> permute -> reshape, with the intermediate also an
/// output, reads the right bytes, and an i64 reshape of an input is returned unchanged.
#[test]
fn reshape_views_share_storage_correctly() {
    for dtype in DTYPES {
        let mut p = ProgramBuilder::new();
        p.input("x", dtype, dims(&[2, 6]));
        p.tensor("r", dtype, dims(&[2, 3, 2]));
        p.tensor("t", dtype, dims(&[2, 2, 3]));
        p.tensor("f", dtype, dims(&[12]));
        p.op(Op::Reshape(ops::Reshape { x: 0, out: 1 }))
            .op(Op::Permute(ops::Permute {
                x: 1,
                perm: vec![0, 2, 1],
                out: 2,
            }))
            .op(Op::Reshape(ops::Reshape { x: 2, out: 3 }))
            .output(3)
            .output(1);
        let x = iota(dtype, &[2, 6], 1);
        let out = run(&p, &[], vec![x.clone()], &[]).unwrap();
        assert_eq!(out[1].shape(), &[2, 3, 2]);
        for flat in 0..12 {
            assert_eq!(element(&out[1], flat), element(&x, flat));
            let c = coords(flat, &[2, 2, 3]);
            let src = c[0] * 6 + c[2] * 2 + c[1];
            assert_eq!(element(&out[0], flat), element(&x, src), "{dtype:?}");
        }
    }
}

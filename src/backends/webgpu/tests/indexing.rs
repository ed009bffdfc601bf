//! Gather (and its two range checks), cast between every dtype pair with edge values, range,
//! and masked mean pooling. Gather, cast and range are exact; mean pooling is within 1e-6
//! relative (an f32 sum of at most 50 terms).

use super::{Rng, assert_close, dims, f32_bytes, floats, run};
use crate::error::ErrorCode;
use crate::evalue::{Tensor, TensorData};
use crate::program::ops;
use crate::program::{DType, Op, ProgramBuilder};

fn gather_program(ids_dtype: DType, ids_shape: &[usize], vocab: usize, h: usize) -> ProgramBuilder {
    let mut p = ProgramBuilder::new();
    p.param(
        "table",
        DType::F32,
        dims(&[vocab, h]),
        super::SCOPE,
        "table",
    );
    p.input("ids", ids_dtype, dims(ids_shape));
    let mut out_shape = ids_shape.to_vec();
    out_shape.push(h);
    p.tensor("out", DType::F32, dims(&out_shape));
    p.op(Op::Gather(ops::Gather {
        table: 0,
        ids: 1,
        out: 2,
    }))
    .output(2);
    p
}

#[test]
fn gather_reads_rows_for_i32_and_i64_ids() {
    let mut rng = Rng::new(40);
    let (vocab, h) = (37, 19);
    let table = rng.f32s(vocab * h, -1.0, 1.0);
    let ids: Vec<i64> = (0..2 * 9).map(|_| rng.range(0, vocab - 1) as i64).collect();
    for dtype in [DType::I32, DType::I64] {
        let p = gather_program(dtype, &[2, 9], vocab, h);
        let data = match dtype {
            DType::I32 => TensorData::Int32(ids.iter().map(|&i| i as i32).collect()),
            _ => TensorData::Int64(ids.clone()),
        };
        let out = run(
            &p,
            &[("table", f32_bytes(&table))],
            vec![Tensor::new(vec![2, 9], data).unwrap()],
            &[],
        )
        .unwrap();
        assert_eq!(out[0].shape(), &[2, 9, h]);
        let want: Vec<f64> = ids
            .iter()
            .flat_map(|&id| {
                table[id as usize * h..(id as usize + 1) * h]
                    .iter()
                    .map(|&v| f64::from(v))
            })
            .collect();
        assert_close("gather", floats(&out[0]), &want, |_| 0.0);
    }
}

#[test]
fn gather_refuses_input_ids_out_of_range_before_running() {
    let table = vec![0.0f32; 10 * 4];
    for (dtype, data) in [
        (DType::I64, TensorData::Int64(vec![1, 10])),
        (DType::I64, TensorData::Int64(vec![-1, 0])),
        (DType::I32, TensorData::Int32(vec![3, i32::MIN])),
    ] {
        let p = gather_program(dtype, &[2], 10, 4);
        let err = run(
            &p,
            &[("table", f32_bytes(&table))],
            vec![Tensor::new(vec![2], data).unwrap()],
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
        assert!(err.message().contains("outside 0..10"), "{err}");
    }
}

/// Ids computed on the GPU (here cast from f32) are checked by the kernel itself: out-of-range
/// rows are never read, and the execution fails with InvalidArgument naming the gather.
#[test]
fn gather_flags_gpu_computed_ids_out_of_range() {
    let (vocab, h) = (8, 4);
    let table: Vec<f32> = (0..vocab * h).map(|i| i as f32).collect();
    let mut p = ProgramBuilder::new();
    p.param(
        "table",
        DType::F32,
        dims(&[vocab, h]),
        super::SCOPE,
        "table",
    );
    p.input("pos", DType::F32, dims(&[3]));
    p.tensor("ids", DType::I64, dims(&[3]));
    p.tensor("out", DType::F32, dims(&[3, h]));
    p.op(Op::Cast(ops::Cast { x: 1, out: 2 }))
        .op(Op::Gather(ops::Gather {
            table: 0,
            ids: 2,
            out: 3,
        }))
        .output(3);
    let params = [("table", f32_bytes(&table))];
    let ok = run(
        &p,
        &params,
        vec![Tensor::from_f32(vec![3], vec![7.0, 0.0, 3.9]).unwrap()],
        &[],
    )
    .unwrap();
    let want: Vec<f64> = [7usize, 0, 3]
        .iter()
        .flat_map(|&r| (0..h).map(move |c| (r * h + c) as f64))
        .collect();
    assert_close("gathered rows", floats(&ok[0]), &want, |_| 0.0);
    for bad in [8.0f32, -1.0, 1e30] {
        let err = run(
            &p,
            &params,
            vec![Tensor::from_f32(vec![3], vec![0.0, bad, 1.0]).unwrap()],
            &[],
        )
        .unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{bad}: {err}");
        assert!(err.message().contains("op 1 (gather)"), "{err}");
    }
}

fn tensor_of(dtype: DType, values: &[f64]) -> Tensor {
    let data = match dtype {
        DType::F32 => TensorData::Float32(values.iter().map(|&v| v as f32).collect()),
        DType::I32 => TensorData::Int32(values.iter().map(|&v| v as i32).collect()),
        DType::I64 => TensorData::Int64(values.iter().map(|&v| v as i64).collect()),
        DType::U8 => TensorData::UInt8(values.iter().map(|&v| v as u8).collect()),
        DType::Block(_) => unreachable!("dense dtypes only"),
    };
    Tensor::new(vec![values.len()], data).unwrap()
}

/// The IR's cast semantics for every pair: float -> int as Rust's saturating `as`; int -> int
/// saturating (clamp, then convert); int -> f32 as Rust's `as`.
fn cast_reference(from: &Tensor, to: DType) -> TensorData {
    macro_rules! from_float {
        ($v:expr) => {
            match to {
                DType::F32 => TensorData::Float32($v.iter().map(|&x| x as f32).collect()),
                DType::I32 => TensorData::Int32($v.iter().map(|&x| x as i32).collect()),
                DType::I64 => TensorData::Int64($v.iter().map(|&x| x as i64).collect()),
                DType::U8 => TensorData::UInt8($v.iter().map(|&x| x as u8).collect()),
                DType::Block(_) => unreachable!("dense dtypes only"),
            }
        };
    }
    let ints: Vec<i64> = match from.data() {
        TensorData::Float32(v) => return from_float!(v),
        TensorData::Int32(v) => v.iter().map(|&x| x.into()).collect(),
        TensorData::Int64(v) => v.clone(),
        TensorData::UInt8(v) => v.iter().map(|&x| x.into()).collect(),
        _ => unreachable!(),
    };
    match to {
        DType::F32 => TensorData::Float32(ints.iter().map(|&x| x as f32).collect()),
        DType::I32 => TensorData::Int32(
            ints.iter()
                .map(|&x| x.clamp(i32::MIN.into(), i32::MAX.into()) as i32)
                .collect(),
        ),
        DType::I64 => TensorData::Int64(ints),
        DType::U8 => TensorData::UInt8(ints.iter().map(|&x| x.clamp(0, 255) as u8).collect()),
        DType::Block(_) => unreachable!("dense dtypes only"),
    }
}

#[test]
fn cast_saturates_for_every_dtype_pair() {
    let dtypes = [DType::F32, DType::I32, DType::I64, DType::U8];
    let float_edges = [
        0.0,
        -0.0,
        1.9,
        -1.9,
        255.5,
        256.0,
        -300.0,
        2147483520.0,
        3e9,
        -3e9,
        1e19,
        -1e19,
        1e30,
        -9.223_372e18,
        16777217.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    for from in dtypes {
        let input = match from {
            DType::F32 => tensor_of(from, &float_edges),
            DType::I64 => Tensor::new(
                vec![12],
                TensorData::Int64(vec![
                    0,
                    -1,
                    255,
                    256,
                    i64::MAX,
                    i64::MIN,
                    1 << 40,
                    -(1 << 35) - 7,
                    (1 << 32) + 5,
                    -(1 << 32) + 3,
                    2_147_483_648,
                    -2_147_483_649,
                ]),
            )
            .unwrap(),
            DType::I32 => Tensor::new(
                vec![6],
                TensorData::Int32(vec![0, -1, 255, 300, i32::MAX, i32::MIN]),
            )
            .unwrap(),
            DType::U8 => Tensor::new(vec![4], TensorData::UInt8(vec![0, 1, 128, 255])).unwrap(),
            DType::Block(_) => unreachable!("dense dtypes only"),
        };
        let n = input.numel();
        for to in dtypes {
            let mut p = ProgramBuilder::new();
            p.input("x", from, dims(&[n]));
            p.tensor("y", to, dims(&[n]));
            p.op(Op::Cast(ops::Cast { x: 0, out: 1 })).output(1);
            let out = run(&p, &[], vec![input.clone()], &[]).unwrap();
            let want = cast_reference(&input, to);
            match (&want, out[0].data()) {
                // int -> f32 of i64 values past 2^24 may differ by one ulp (two roundings).
                (TensorData::Float32(w), TensorData::Float32(g)) => {
                    for (i, (a, b)) in w.iter().zip(g).enumerate() {
                        let ok = a == b
                            || (a.is_nan() && b.is_nan())
                            || (a - b).abs() <= a.abs() * 1.2e-7;
                        assert!(ok, "{from:?} -> {to:?} element {i}: {b} vs {a}");
                    }
                }
                (w, g) => assert_eq!(w, g, "{from:?} -> {to:?}"),
            }
        }
    }
}

#[test]
fn range_counts_in_every_dtype_the_ir_allows() {
    for (dtype, n) in [(DType::F32, 300), (DType::I32, 5), (DType::I64, 129)] {
        let mut p = ProgramBuilder::new();
        // Range needs no input; the program still takes one so it has a caller-visible shape.
        p.input("unused", DType::F32, dims(&[1]));
        p.tensor("r", dtype, dims(&[n]));
        p.op(Op::Range(ops::Range { out: 1 })).output(1);
        let out = run(
            &p,
            &[],
            vec![Tensor::from_f32(vec![1], vec![0.0]).unwrap()],
            &[],
        )
        .unwrap();
        let want = cast_reference(
            &tensor_of(DType::I64, &(0..n).map(|i| i as f64).collect::<Vec<_>>()),
            dtype,
        );
        assert_eq!(out[0].data(), &want, "{dtype:?}");
    }
}

#[test]
fn mean_pool_averages_kept_positions() {
    let mut rng = Rng::new(41);
    let (b, s, h) = (3, 50, 7);
    let x = rng.f32s(b * s * h, -2.0, 2.0);
    // Row 0 keeps a prefix, row 1 scattered positions, row 2 nothing (0 / 1e-9 = 0).
    let keep: Vec<bool> = (0..b * s)
        .map(|i| match i / s {
            0 => i % s < 17,
            1 => i % 3 == 0,
            _ => false,
        })
        .collect();
    for dtype in [DType::I64, DType::I32, DType::U8, DType::F32] {
        let values: Vec<f64> = keep.iter().map(|&k| if k { 1.0 } else { 0.0 }).collect();
        let mut mask = tensor_of(dtype, &values);
        mask = Tensor::new(vec![b, s], mask.into_parts().1).unwrap();
        let mut p = ProgramBuilder::new();
        p.input("x", DType::F32, dims(&[b, s, h]));
        p.input("mask", dtype, dims(&[b, s]));
        p.tensor("pooled", DType::F32, dims(&[b, h]));
        p.op(Op::MeanPool(ops::MeanPool {
            x: 0,
            mask: 1,
            out: 2,
        }))
        .output(2);
        let out = run(
            &p,
            &[],
            vec![Tensor::from_f32(vec![b, s, h], x.clone()).unwrap(), mask],
            &[],
        )
        .unwrap();
        let mut want = Vec::new();
        for bi in 0..b {
            let count = (0..s).filter(|&si| keep[bi * s + si]).count() as f64;
            for hi in 0..h {
                let sum: f64 = (0..s)
                    .filter(|&si| keep[bi * s + si])
                    .map(|si| f64::from(x[(bi * s + si) * h + hi]))
                    .sum();
                want.push(sum / count.max(1e-9));
            }
        }
        assert_close(
            &format!("mean_pool ({dtype:?} mask)"),
            floats(&out[0]),
            &want,
            |i| 1e-6 * want[i].abs() + 1e-6,
        );
    }
}

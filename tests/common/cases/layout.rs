//! Reshape, permute, slice, concat, cast and range.

use crate::common::harness::{
    Model, SuiteConfig, assert_exact, dims, execute, f32_tensor, i32_tensor, i64_tensor,
};
use crate::common::reference::{self, Ref};
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::TensorData;
use webdelegate::program::{DType, Dim};
use webdelegate::registry::SharedBackend;

op_case! {
/// `x = [[0,1,2],[3,4,5]]`: reshape to `[3, 2]`, transpose, columns 1..3, concat with itself
/// along both axes, and a slice of a symbolic dim.
pub async fn reshape_permute_slice_concat_by_hand(backend: SharedBackend, _config: SuiteConfig) {
    let mut m = Model::new();
    let x = m.input("x", &[2, 3]);
    let reshaped = m.b.reshape(x, dims(&[3, 2])).unwrap();
    let transposed = m.b.permute(x, vec![1, 0]).unwrap();
    let columns = m.b.slice(x, 1, 1, Some(3)).unwrap();
    let tail = m.b.slice(x, 1, 2, None).unwrap();
    let stacked = m.b.concat(vec![x, x], 0).unwrap();
    let widened = m.b.concat(vec![columns, x], 1).unwrap();
    for out in [reshaped, transposed, columns, tail, stacked, widened] {
        m.b.output(out);
    }
    let values: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let got = m.run(&backend, vec![f32_tensor(&[2, 3], values)]).await;
    let want = [
        Ref::new(&[3, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
        Ref::new(&[3, 2], &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]),
        Ref::new(&[2, 2], &[1.0, 2.0, 4.0, 5.0]),
        Ref::new(&[2, 1], &[2.0, 5.0]),
        Ref::new(
            &[4, 3],
            &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        ),
        Ref::new(&[2, 5], &[1.0, 2.0, 0.0, 1.0, 2.0, 4.0, 5.0, 3.0, 4.0, 5.0]),
    ];
    for (index, (got, want)) in got.iter().zip(&want).enumerate() {
        assert_exact(&format!("layout output {index}"), got, want);
    }

    // A symbolic sequence: the first token (CLS pooling) and an open slice from 0.
    let mut m = Model::new();
    let seq = m.b.symbol("seq");
    let h = m.b.input("h", DType::F32, vec![seq, Dim::Fixed(2)]);
    let first = m.b.slice(h, 0, 0, Some(1)).unwrap();
    let all = m.b.slice(h, 0, 0, None).unwrap();
    m.b.output(first).output(all);
    let mut delegate = m.init(&backend).await.unwrap();
    let got = execute(
        &mut delegate,
        vec![f32_tensor(&[3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])],
        2,
    )
    .await
    .unwrap();
    assert_exact("cls", &got[0], &Ref::new(&[1, 2], &[1.0, 2.0]));
    assert_exact(
        "open slice",
        &got[1],
        &Ref::new(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    // seq = 0 is shorter than the slice's end 1.
    let result = execute(&mut delegate, vec![f32_tensor(&[0, 2], vec![])], 2).await;
    crate::common::harness::assert_error(
        "slice past a symbolic extent",
        result,
        webdelegate::ErrorCode::InvalidArgument,
        &["slice"],
    );
}
}

op_case! {
/// Casts between every pair of dtypes (truncation toward zero, saturation, NaN -> 0) and
/// ranges of a symbolic length in i32, i64 and f32.
pub async fn cast_and_range_by_hand(backend: SharedBackend, _config: SuiteConfig) {
    let mut m = Model::new();
    let x = m.input("x", &[6]);
    let to_i32 = m.b.cast(x, DType::I32).unwrap();
    let to_i64 = m.b.cast(x, DType::I64).unwrap();
    let to_u8 = m.b.cast(x, DType::U8).unwrap();
    let ints = m.b.input("ints", DType::I64, dims(&[4]));
    let i64_to_u8 = m.b.cast(ints, DType::U8).unwrap();
    let i64_to_i32 = m.b.cast(ints, DType::I32).unwrap();
    let i64_to_f32 = m.b.cast(ints, DType::F32).unwrap();
    let seq = m.b.symbol("seq");
    let tokens = m.b.input("tokens", DType::I32, vec![Dim::Fixed(1), seq]);
    let positions_i64 = m.b.range(seq, DType::I64).unwrap();
    let positions_i32 = m.b.range(seq, DType::I32).unwrap();
    let positions_f32 = m.b.range(seq, DType::F32).unwrap();
    let tokens_f32 = m.b.cast(tokens, DType::F32).unwrap();
    for out in [
        to_i32,
        to_i64,
        to_u8,
        i64_to_u8,
        i64_to_i32,
        i64_to_f32,
        positions_i64,
        positions_i32,
        positions_f32,
        tokens_f32,
    ] {
        m.b.output(out);
    }
    let x_values = vec![1.7, -1.7, 3.0e9, -3.0e9, f32::NAN, 300.5];
    let got = m
        .run(
            &backend,
            vec![
                f32_tensor(&[6], x_values),
                i64_tensor(&[4], vec![300, -5, 1 << 40, 7]),
                i32_tensor(&[1, 5], vec![9, 8, 7, 6, 5]),
            ],
        )
        .await;
    let i32_max = f64::from(i32::MAX);
    let i32_min = f64::from(i32::MIN);
    let want = [
        (
            DType::I32,
            Ref::from_f64(&[6], vec![1.0, -1.0, i32_max, i32_min, 0.0, 300.0]),
        ),
        (
            DType::I64,
            Ref::from_f64(&[6], vec![1.0, -1.0, 3.0e9, -3.0e9, 0.0, 300.0]),
        ),
        (
            DType::U8,
            Ref::from_f64(&[6], vec![1.0, 0.0, 255.0, 0.0, 0.0, 255.0]),
        ),
        (DType::U8, Ref::from_f64(&[4], vec![255.0, 0.0, 255.0, 7.0])),
        (
            DType::I32,
            Ref::from_f64(&[4], vec![300.0, -5.0, i32_max, 7.0]),
        ),
        (
            DType::F32,
            Ref::from_f64(&[4], vec![300.0, -5.0, (1u64 << 40) as f64, 7.0]),
        ),
        (
            DType::I64,
            Ref::from_f64(&[5], vec![0.0, 1.0, 2.0, 3.0, 4.0]),
        ),
        (
            DType::I32,
            Ref::from_f64(&[5], vec![0.0, 1.0, 2.0, 3.0, 4.0]),
        ),
        (
            DType::F32,
            Ref::from_f64(&[5], vec![0.0, 1.0, 2.0, 3.0, 4.0]),
        ),
        (
            DType::F32,
            Ref::from_f64(&[1, 5], vec![9.0, 8.0, 7.0, 6.0, 5.0]),
        ),
    ];
    for (index, (got, (dtype, want))) in got.iter().zip(&want).enumerate() {
        let expected_type = webdelegate::backends::internal::scalar_type(*dtype);
        assert_eq!(got.dtype(), expected_type, "cast output {index}");
        assert_exact(&format!("cast output {index}"), got, want);
    }
}
}

op_case! {
/// Random rank-4 permutations, slices and multi-input concats, in f32 and i64.
pub async fn layout_random(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(41);
    let extents: &[usize] = if config.small {
        &[1, 2, 3]
    } else {
        &[1, 2, 3, 5, 8, 13]
    };
    for trial in 0..(if config.small { 3 } else { 8 }) {
        let shape: Vec<usize> = (0..4).map(|_| rng.pick(extents)).collect();
        let mut perm: Vec<usize> = (0..4).collect();
        for i in (1..4).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        let axis = rng.below(4);
        let start = rng.below(shape[axis] + 1);
        let end = start + rng.below(shape[axis] - start + 1);
        let mut other = shape.clone();
        other[axis] = rng.pick(extents);
        let count: usize = shape.iter().product();
        let other_count: usize = other.iter().product();
        let integer = trial % 2 == 1;
        let dtype = if integer { DType::I64 } else { DType::F32 };
        let values: Vec<i64> = (0..count).map(|_| rng.below(1000) as i64 - 500).collect();
        let other_values: Vec<i64> = (0..other_count).map(|_| rng.below(1000) as i64).collect();

        let mut m = Model::new();
        let x = m.b.input("x", dtype, dims(&shape));
        let y = m.b.input("y", dtype, dims(&other));
        let permuted =
            m.b.permute(x, perm.iter().map(|&p| p as u32).collect())
                .unwrap();
        let sliced =
            m.b.slice(x, axis as u32, start as u64, Some(end as u64))
                .unwrap();
        let joined = m.b.concat(vec![x, y, x], axis as u32).unwrap();
        let flat = m.b.reshape(permuted, dims(&[count])).unwrap();
        for out in [permuted, sliced, joined, flat] {
            m.b.output(out);
        }
        let tensor = |shape: &[usize], values: &[i64]| {
            if integer {
                i64_tensor(shape, values.to_vec())
            } else {
                f32_tensor(shape, values.iter().map(|&v| v as f32 * 0.25).collect())
            }
        };
        let got = m
            .run(
                &backend,
                vec![tensor(&shape, &values), tensor(&other, &other_values)],
            )
            .await;
        let scale = if integer { 1.0 } else { 0.25 };
        let rx = Ref::from_f64(&shape, values.iter().map(|&v| v as f64 * scale).collect());
        let ry = Ref::from_f64(
            &other,
            other_values.iter().map(|&v| v as f64 * scale).collect(),
        );
        let permuted_want = reference::permute(&rx, &perm);
        let wants = [
            permuted_want.clone(),
            reference::slice(&rx, axis, start, end),
            reference::concat(&[&rx, &ry, &rx], axis),
            permuted_want.reshape(&[count]),
        ];
        for (what, (got, want)) in ["permute", "slice", "concat", "reshape"]
            .iter()
            .zip(got.iter().zip(&wants))
        {
            let expected = if integer {
                TensorData::Int64(vec![])
            } else {
                TensorData::Float32(vec![])
            };
            assert_eq!(got.dtype(), expected.dtype(), "{what}");
            assert_exact(
                &format!("trial {trial} {what} of {shape:?} perm {perm:?} axis {axis}"),
                got,
                want,
            );
        }
    }
}
}

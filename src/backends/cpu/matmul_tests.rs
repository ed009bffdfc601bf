use super::*;
use crate::program::samples::fill;

/// Plain triple loop in f64 over the same geometry.
fn naive(a: &[f32], b: &[f32], bias: Option<&[f32]>, g: &MatMulGeometry) -> Vec<f64> {
    let mut out = Vec::new();
    for batch in 0..g.batch_count() {
        let (oa, ob) = g.batch_offsets(batch);
        for i in 0..g.m {
            for j in 0..g.n {
                let mut sum = bias.map_or(0.0, |bias| f64::from(bias[j]));
                for p in 0..g.k {
                    sum += f64::from(a[oa + i * g.a_row_stride + p * g.a_col_stride])
                        * f64::from(b[ob + p * g.b_row_stride + j * g.b_col_stride]);
                }
                out.push(sum);
            }
        }
    }
    out
}

fn check(a_shape: &[usize], b_shape: &[usize], ta: bool, tb: bool, with_bias: bool) {
    let g = MatMulGeometry::new(a_shape, b_shape, ta, tb).unwrap();
    let a = fill(a_shape.iter().product(), 1);
    let b = fill(b_shape.iter().product(), 2);
    let bias = fill(g.n, 3);
    let bias = with_bias.then_some(bias.as_slice());
    let mut out = vec![f32::NAN; g.batch_count() * g.m * g.n];
    let mut scratch = GemmScratch::default();
    matmul(
        &a,
        RightOperand::Values(&b),
        bias,
        &g,
        &mut out,
        &mut scratch,
    )
    .unwrap();
    let want = naive(&a, &b, bias, &g);
    if let [rows, cols] = *b_shape {
        // The same product with `b` packed once up front must give identical bits.
        let packed = PackedB::pack(&b, [rows, cols], tb).unwrap();
        let mut again = vec![f32::NAN; out.len()];
        let right = RightOperand::Packed(&packed);
        matmul(&a, right, bias, &g, &mut again, &mut scratch).unwrap();
        assert_eq!(again, out, "{a_shape:?} x {b_shape:?} packed");
    }
    for (index, (&got, &want)) in out.iter().zip(&want).enumerate() {
        let tolerance = 1e-5 * (g.k as f64).sqrt() * (1.0 + want.abs());
        assert!(
            (f64::from(got) - want).abs() <= tolerance,
            "{a_shape:?} x {b_shape:?} ta={ta} tb={tb}: element {index} is {got}, want {want}"
        );
    }
}

#[test]
fn blocked_product_matches_naive_across_edges() {
    // Sizes straddling MR, NR, MC, KC and NC.
    for &(m, k, n) in &[
        (1, 1, 1),
        (3, 5, 7),
        (MR, 17, NR),
        (MR + 1, 300, NR + 3),
        (MC + 5, KC + 9, 2 * NR + 1),
        (70, 260, NC + 20),
    ] {
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            let a_shape = if ta { [k, m] } else { [m, k] };
            let b_shape = if tb { [n, k] } else { [k, n] };
            check(&a_shape, &b_shape, ta, tb, (m + n) % 2 == 0);
        }
    }
}

#[test]
fn batches_broadcast_and_fold() {
    check(&[2, 3, 5, 4], &[2, 3, 4, 6], false, false, true);
    check(&[2, 5, 4], &[6, 4], false, true, true);
    check(&[5, 4], &[3, 4, 6], false, false, false);
    check(&[2, 1, 4, 5], &[1, 3, 6, 4], true, true, false);
}

#[test]
fn empty_dims_give_bias_or_zeros() {
    let mut scratch = GemmScratch::default();
    let g = MatMulGeometry::new(&[2, 0], &[0, 3], false, false).unwrap();
    let mut out = vec![f32::NAN; 6];
    let none = RightOperand::Values(&[]);
    matmul(
        &[],
        none,
        Some(&[1.0, 2.0, 3.0]),
        &g,
        &mut out,
        &mut scratch,
    )
    .unwrap();
    assert_eq!(out, vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    let g = MatMulGeometry::new(&[0, 4], &[4, 3], false, false).unwrap();
    let b = RightOperand::Values(&[0.0; 12]);
    matmul(&[], b, None, &g, &mut [], &mut scratch).unwrap();
}

#[test]
fn short_operands_are_errors_not_panics() {
    let g = MatMulGeometry::new(&[2, 3], &[3, 2], false, false).unwrap();
    let mut out = vec![0.0; 4];
    let mut scratch = GemmScratch::default();
    let b = RightOperand::Values(&[0.0; 6]);
    let short_b = RightOperand::Values(&[0.0; 5]);
    assert!(matmul(&[0.0; 5], b, None, &g, &mut out, &mut scratch).is_err());
    assert!(matmul(&[0.0; 6], short_b, None, &g, &mut out, &mut scratch).is_err());
    assert!(matmul(&[0.0; 6], b, None, &g, &mut out[..3], &mut scratch).is_err());
    assert!(matmul(&[0.0; 6], b, Some(&[0.0]), &g, &mut out, &mut scratch).is_err());
    // A packed operand of another shape is refused.
    let packed = PackedB::pack(&[0.0; 6], [2, 3], false).unwrap();
    let right = RightOperand::Packed(&packed);
    assert!(matmul(&[0.0; 6], right, None, &g, &mut out, &mut scratch).is_err());
    assert!(PackedB::pack(&[0.0; 5], [2, 3], false).is_err());
}

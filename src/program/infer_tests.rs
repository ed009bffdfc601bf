use super::*;
use crate::program::ir::Dim::{Fixed as F, Symbol as S};

#[test]
fn broadcast_follows_numpy_with_symbols() {
    assert_eq!(broadcast(&[F(2), F(3)], &[F(3)]).unwrap(), vec![F(2), F(3)]);
    assert_eq!(
        broadcast(&[F(1), F(3)], &[F(4), F(1)]).unwrap(),
        vec![F(4), F(3)]
    );
    assert_eq!(
        broadcast(&[S(0), F(1)], &[F(1), S(1)]).unwrap(),
        vec![S(0), S(1)]
    );
    assert_eq!(broadcast(&[S(0)], &[S(0)]).unwrap(), vec![S(0)]);
    assert_eq!(broadcast(&[], &[F(5)]).unwrap(), vec![F(5)]);
    assert_eq!(broadcast(&[], &[]).unwrap(), Vec::<Dim>::new());
    // A symbol never equals a fixed extent other than 1, nor another symbol.
    let error = broadcast(&[S(0)], &[F(128)]).unwrap_err();
    assert!(error.contains("[$0]") && error.contains("[128]"), "{error}");
    assert!(broadcast(&[S(0)], &[S(1)]).is_err());
    assert!(broadcast(&[F(2)], &[F(3)]).is_err());
}

#[test]
fn matmul_handles_transposes_batches_and_bias() {
    let a = [S(0), F(4), F(8)];
    assert_eq!(
        matmul(&a, &[F(8), F(5)], None, false, false).unwrap(),
        vec![S(0), F(4), F(5)]
    );
    assert_eq!(
        matmul(&a, &[F(5), F(8)], Some(&[F(5)]), false, true).unwrap(),
        vec![S(0), F(4), F(5)]
    );
    assert_eq!(
        matmul(&[F(8), F(4)], &[F(8), F(5)], None, true, false).unwrap(),
        vec![F(4), F(5)]
    );
    assert_eq!(
        matmul(&[F(8), F(4)], &[F(5), F(8)], None, true, true).unwrap(),
        vec![F(4), F(5)]
    );
    // Batch dims broadcast.
    assert_eq!(
        matmul(
            &[F(2), F(1), F(3), F(4)],
            &[F(6), F(4), F(7)],
            None,
            false,
            false
        )
        .unwrap(),
        vec![F(2), F(6), F(3), F(7)]
    );
    assert!(matmul(&a, &[F(5), F(8)], None, false, false).is_err());
    assert!(matmul(&[F(8)], &[F(8), F(5)], None, false, false).is_err());
    let error = matmul(&a, &[F(8), F(5)], Some(&[F(4)]), false, false).unwrap_err();
    assert!(error.contains("bias"), "{error}");
    assert!(matmul(&[F(2), F(3), F(4)], &[F(5), F(4), F(6)], None, false, false).is_err());
}

#[test]
fn gather_norms_and_pooling() {
    assert_eq!(
        gather(&[F(100), F(16)], &[S(0), S(1)]).unwrap(),
        vec![S(0), S(1), F(16)]
    );
    assert!(gather(&[F(100)], &[S(0)]).is_err());
    assert!(gather(&[F(10), F(2)], &[F(1); 8]).is_err());
    let x = [S(0), S(1), F(16)];
    assert_eq!(layer_norm(&x, &[F(16)], &[F(16)]).unwrap(), x.to_vec());
    assert!(layer_norm(&x, &[F(16)], &[F(15)]).is_err());
    assert!(layer_norm(&[], &[F(1)], &[F(1)]).is_err());
    let scores = [S(0), F(12), S(1), S(1)];
    assert_eq!(
        softmax(&scores, Some(&[S(0), F(1), F(1), S(1)])).unwrap(),
        scores.to_vec()
    );
    assert_eq!(softmax(&scores, None).unwrap(), scores.to_vec());
    // The mask may not grow the result.
    assert!(softmax(&[F(1), F(4)], Some(&[F(3), F(4)])).is_err());
    assert_eq!(mean_pool(&x, &[S(0), S(1)]).unwrap(), vec![S(0), F(16)]);
    assert!(mean_pool(&x, &[S(1), S(0)]).is_err());
    assert!(mean_pool(&[S(0), F(16)], &[S(0)]).is_err());
    assert_eq!(last_axis(&x).unwrap(), x.to_vec());
}

#[test]
fn reshape_compares_symbolic_products() {
    assert!(reshape(&[S(0), S(1), F(384)], &[S(1), S(0), F(12), F(32)]).is_ok());
    assert!(reshape(&[S(0), F(6)], &[F(2), S(0), F(3)]).is_ok());
    assert!(reshape(&[S(0), F(6)], &[S(1), F(6)]).is_err());
    assert!(reshape(&[S(0), S(0)], &[S(0), F(4)]).is_err());
    assert!(reshape(&[F(0), S(0)], &[F(0)]).is_ok());
    assert!(reshape(&[F(4)], &[F(1); 9]).is_err());
    let product = symbolic_numel(&[S(2), F(3), S(0), F(5), S(2)]).unwrap();
    assert_eq!(product.coefficient, 15);
    assert_eq!(product.symbols, vec![0, 2, 2]);
    assert!(symbolic_numel(&[F(u64::MAX), F(u64::MAX), F(u64::MAX)]).is_err());
}

#[test]
fn permute_slice_concat() {
    let x = [S(0), F(3), F(4)];
    assert_eq!(permute(&x, &[2, 0, 1]).unwrap(), vec![F(4), S(0), F(3)]);
    assert!(permute(&x, &[0, 0, 1]).is_err());
    assert!(permute(&x, &[0, 1]).is_err());
    assert!(permute(&x, &[0, 1, 3]).is_err());

    assert_eq!(slice(&x, 2, 1, Some(3)).unwrap(), vec![S(0), F(3), F(2)]);
    assert_eq!(slice(&x, 2, 1, None).unwrap(), vec![S(0), F(3), F(3)]);
    assert_eq!(slice(&x, 0, 0, Some(1)).unwrap(), vec![F(1), F(3), F(4)]);
    assert_eq!(slice(&x, 0, 0, None).unwrap(), x.to_vec());
    assert!(slice(&x, 0, 1, None).is_err());
    assert!(slice(&x, 2, 3, Some(5)).is_err());
    assert!(slice(&x, 2, 3, Some(2)).is_err());
    assert!(slice(&x, 3, 0, None).is_err());

    let a = [S(0), F(2)];
    let b = [S(0), F(3)];
    assert_eq!(concat(&[&a, &b], 1).unwrap(), vec![S(0), F(5)]);
    assert_eq!(concat(&[&a], 0).unwrap(), a.to_vec());
    assert_eq!(concat(&[&[F(0), F(2)], &a], 0).unwrap(), a.to_vec());
    assert!(concat(&[&a, &a], 0).is_err());
    assert!(concat(&[&a, &[S(1), F(2)]], 1).is_err());
    assert!(concat(&[], 0).is_err());
    assert!(concat(&[&a], 2).is_err());
    assert!(concat(&[&[F(u64::MAX)], &[F(1)]], 0).is_err());
}

#[test]
fn shapes_print_symbols_with_dollars() {
    assert_eq!(shape_text(&[S(0), F(384)]), "[$0, 384]");
    assert_eq!(shape_text(&[]), "[]");
}

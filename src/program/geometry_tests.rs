use super::*;

#[test]
fn strides_and_broadcast() {
    assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
    assert_eq!(contiguous_strides(&[]), Vec::<usize>::new());
    assert_eq!(
        broadcast_strides(&[3, 1], &[2, 3, 4]).unwrap(),
        vec![0, 1, 0]
    );
    assert!(broadcast_strides(&[3, 2], &[2, 3, 4]).is_err());
    assert!(broadcast_strides(&[1, 1, 1, 1], &[2]).is_err());
    assert_eq!(broadcast_shape(&[2, 1, 4], &[3, 1]).unwrap(), vec![2, 3, 4]);
    assert!(broadcast_shape(&[2], &[3]).is_err());
}

#[test]
fn walks_merge_contiguous_dims() {
    // Same shape: one long inner loop.
    let walk = StridedWalk::binary(&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]).unwrap();
    assert_eq!(walk.shape, vec![24]);
    assert_eq!(walk.strides, vec![vec![1], vec![1]]);
    // Row bias: b repeats every 4 elements.
    let walk = StridedWalk::binary(&[2, 3, 4], &[4], &[2, 3, 4]).unwrap();
    assert_eq!(walk.shape, vec![6, 4]);
    assert_eq!(walk.strides, vec![vec![4, 1], vec![0, 1]]);
    // Column broadcast.
    let walk = StridedWalk::binary(&[2, 3, 1], &[2, 3, 4], &[2, 3, 4]).unwrap();
    assert_eq!(walk.shape, vec![6, 4]);
    assert_eq!(walk.strides, vec![vec![1, 0], vec![4, 1]]);
    // Scalars.
    let walk = StridedWalk::binary(&[], &[], &[]).unwrap();
    assert_eq!(walk.shape, vec![1]);
    // Transpose of the last two dims of [2, 3, 4]: out [2, 4, 3].
    let walk = StridedWalk::permute(&[2, 3, 4], &[0, 2, 1]).unwrap();
    assert_eq!(walk.shape, vec![2, 4, 3]);
    assert_eq!(walk.strides, vec![vec![12, 1, 4]]);
    // Identity permutation merges to one dim.
    let walk = StridedWalk::permute(&[2, 3, 4], &[0, 1, 2]).unwrap();
    assert_eq!(walk.shape, vec![24]);
    assert!(StridedWalk::permute(&[2, 3], &[0, 5]).is_err());
}

#[test]
fn matmul_geometry_folds_shared_weights() {
    let g = MatMulGeometry::new(&[2, 5, 8], &[3, 8], false, true).unwrap();
    assert_eq!((g.m, g.k, g.n), (10, 8, 3));
    assert_eq!(g.batch_count(), 1);
    assert_eq!((g.a_row_stride, g.a_col_stride), (8, 1));
    assert_eq!((g.b_row_stride, g.b_col_stride), (1, 8));

    // Attention-style batched product: no folding.
    let g = MatMulGeometry::new(&[2, 3, 5, 4], &[2, 3, 4, 5], false, false).unwrap();
    assert_eq!(g.batch_count(), 6);
    assert_eq!(g.batch_offsets(4), (4 * 20, 4 * 20));

    // Broadcast a over b's batch.
    let g = MatMulGeometry::new(&[5, 4], &[3, 4, 6], false, false).unwrap();
    assert_eq!(g.batch_count(), 3);
    assert_eq!(g.batch_offsets(2), (0, 2 * 24));

    // Transposed a: no folding.
    let g = MatMulGeometry::new(&[2, 4, 5], &[4, 6], true, false).unwrap();
    assert_eq!((g.m, g.k, g.batch_count()), (5, 4, 2));
    assert_eq!((g.a_row_stride, g.a_col_stride), (1, 5));
    assert!(MatMulGeometry::new(&[2, 4], &[5, 6], false, false).is_err());
}

#[test]
fn slice_and_concat_geometry() {
    let s = SliceGeometry::new(&[2, 5, 3], 1, 1, Some(4)).unwrap();
    assert_eq!(
        (s.outer, s.extent, s.inner, s.start, s.len),
        (2, 5, 3, 1, 3)
    );
    assert!(SliceGeometry::new(&[2, 5], 1, 4, Some(6)).is_err());
    assert!(SliceGeometry::new(&[2, 5], 2, 0, None).is_err());
    let c = ConcatGeometry::new(&[&[2, 1, 3], &[2, 4, 3]], 1).unwrap();
    assert_eq!((c.outer, c.inner, c.extents.clone()), (2, 3, vec![1, 4]));
    assert!(ConcatGeometry::new(&[], 0).is_err());
    assert!(ConcatGeometry::new(&[&[2], &[2, 3]], 0).is_err());
}

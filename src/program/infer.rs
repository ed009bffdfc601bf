//! Symbolic shape inference: what each op family's output shape is, computed from its inputs'
//! declared shapes, or why the inputs do not fit together.
//!
//! Shapes here may contain symbols ([`Dim::Symbol`]). Two dims are *equal* only when they are
//! the same fixed extent or the same symbol: `Symbol(0)` and `Fixed(128)` are different even if
//! the symbol is bound to 128 at execute time, because validation must hold for every binding.
//! `Fixed(1)` broadcasts against anything (NumPy rules, right-aligned).
//!
//! Every function returns `Err(message)` with a message that names the offending dims; callers
//! add the op and tensor (validation reports `InvalidProgram`, the builder `InvalidArgument`).
//! Validation, the builder and both backends share these functions, so "the shape the program
//! declares" and "the shape the op computes" cannot drift apart.

use crate::program::tensor::Dim;

/// Why inputs do not fit an op (a message without the op's name).
pub type InferResult<T> = std::result::Result<T, String>;

/// Most dims a tensor may have.
pub const MAX_RANK: usize = 8;

/// `384` for a fixed extent, `$0` for symbol 0.
pub fn dim_text(dim: Dim) -> String {
    match dim {
        Dim::Fixed(extent) => extent.to_string(),
        Dim::Symbol(symbol) => format!("${symbol}"),
    }
}

/// `[$0, 384]`: fixed extents as numbers, symbols as `$index`.
pub fn shape_text(shape: &[Dim]) -> String {
    let mut text = String::from("[");
    for (axis, dim) in shape.iter().enumerate() {
        if axis > 0 {
            text.push_str(", ");
        }
        text.push_str(&dim_text(*dim));
    }
    text.push(']');
    text
}

fn check_rank(what: &str, shape: &[Dim]) -> InferResult<()> {
    if shape.len() > MAX_RANK {
        return Err(format!(
            "{what} has rank {}, more than {MAX_RANK}",
            shape.len()
        ));
    }
    Ok(())
}

/// NumPy broadcasting of two shapes: right-aligned; each pair of dims must be equal or one of
/// them `Fixed(1)`.
///
/// # Errors
/// When a pair of dims is neither equal nor broadcastable.
pub fn broadcast(a: &[Dim], b: &[Dim]) -> InferResult<Vec<Dim>> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for axis in 0..rank {
        // Position from the right.
        let from_right = rank - axis;
        let da = a.len().checked_sub(from_right).map(|i| a[i]);
        let db = b.len().checked_sub(from_right).map(|i| b[i]);
        let dim = match (da, db) {
            (Some(x), None) | (None, Some(x)) => x,
            (Some(x), Some(y)) if x == y => x,
            (Some(Dim::Fixed(1)), Some(y)) => y,
            (Some(x), Some(Dim::Fixed(1))) => x,
            (Some(_), Some(_)) => {
                return Err(format!(
                    "shapes {} and {} do not broadcast (dim {axis} of the result)",
                    shape_text(a),
                    shape_text(b)
                ));
            }
            (None, None) => return Err("broadcast of two empty shapes".into()),
        };
        out.push(dim);
    }
    Ok(out)
}

/// The shape of `a @ b` (optionally transposed, plus an optional `[N]` bias): batch dims
/// broadcast, then `[M, N]`.
///
/// # Errors
/// When either operand has rank < 2, the contracted dims differ, the batch dims do not
/// broadcast, or the bias is not `[N]`.
pub fn matmul(
    a: &[Dim],
    b: &[Dim],
    bias: Option<&[Dim]>,
    transpose_a: bool,
    transpose_b: bool,
) -> InferResult<Vec<Dim>> {
    let (Some(a_split), Some(b_split)) = (a.len().checked_sub(2), b.len().checked_sub(2)) else {
        return Err(format!(
            "operands {} and {} must have rank 2 or more",
            shape_text(a),
            shape_text(b)
        ));
    };
    let (a_batch, a_mat) = a.split_at(a_split);
    let (b_batch, b_mat) = b.split_at(b_split);
    let (m, k_a) = if transpose_a {
        (a_mat[1], a_mat[0])
    } else {
        (a_mat[0], a_mat[1])
    };
    let (k_b, n) = if transpose_b {
        (b_mat[1], b_mat[0])
    } else {
        (b_mat[0], b_mat[1])
    };
    if k_a != k_b {
        return Err(format!(
            "contracted dims differ: a {} (transposed: {transpose_a}) and b {} (transposed: {transpose_b})",
            shape_text(a),
            shape_text(b)
        ));
    }
    let mut out = broadcast(a_batch, b_batch).map_err(|e| format!("batch dims: {e}"))?;
    out.push(m);
    out.push(n);
    if let Some(bias) = bias
        && bias != [n]
    {
        return Err(format!(
            "bias is {}, expected [{}]",
            shape_text(bias),
            dim_text(n)
        ));
    }
    check_rank("the result", &out)?;
    Ok(out)
}

/// The shape of an embedding lookup: `ids` shape plus the table's row width.
///
/// # Errors
/// When the table is not 2-D or the result's rank is too large.
pub fn gather(table: &[Dim], ids: &[Dim]) -> InferResult<Vec<Dim>> {
    let [_, width] = table else {
        return Err(format!("table {} must be [V, H]", shape_text(table)));
    };
    let mut out = ids.to_vec();
    out.push(*width);
    check_rank("the result", &out)?;
    Ok(out)
}

/// Layer norm keeps `x`'s shape; `gamma` and `beta` must be `[H]` for `x`'s last dim `H`.
///
/// # Errors
/// When `x` is a scalar or `gamma`/`beta` are not `[H]`.
pub fn layer_norm(x: &[Dim], gamma: &[Dim], beta: &[Dim]) -> InferResult<Vec<Dim>> {
    let last = last_dim(x)?;
    for (what, shape) in [("gamma", gamma), ("beta", beta)] {
        if shape != [last] {
            return Err(format!(
                "{what} is {}, expected [{}] (x is {})",
                shape_text(shape),
                dim_text(last),
                shape_text(x)
            ));
        }
    }
    Ok(x.to_vec())
}

/// Softmax keeps `x`'s shape; a mask must broadcast *to* `x` (the result of broadcasting it
/// with `x` is `x`'s shape).
///
/// # Errors
/// When `x` is a scalar or the mask does not broadcast to `x`.
pub fn softmax(x: &[Dim], mask: Option<&[Dim]>) -> InferResult<Vec<Dim>> {
    last_dim(x)?;
    if let Some(mask) = mask {
        let joint = broadcast(x, mask).map_err(|e| format!("mask: {e}"))?;
        if joint != x {
            return Err(format!(
                "mask {} does not broadcast to x {}",
                shape_text(mask),
                shape_text(x)
            ));
        }
    }
    Ok(x.to_vec())
}

/// Ops over the last dim that keep the shape (L2 normalisation).
///
/// # Errors
/// When `x` is a scalar.
pub fn last_axis(x: &[Dim]) -> InferResult<Vec<Dim>> {
    last_dim(x)?;
    Ok(x.to_vec())
}

fn last_dim(x: &[Dim]) -> InferResult<Dim> {
    x.last()
        .copied()
        .ok_or_else(|| "x is a scalar; the op works over its last dim".to_owned())
}

/// A product of dims as `coefficient x symbols` (symbols sorted, so equal products compare
/// equal). A zero coefficient means zero, whatever the symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolicProduct {
    /// Product of the fixed dims.
    pub coefficient: u128,
    /// The symbols, sorted, with repetition.
    pub symbols: Vec<u32>,
}

/// The element count of `shape` as a [`SymbolicProduct`].
///
/// # Errors
/// When the fixed part overflows `u128` (no tensor could ever have that many elements).
pub fn symbolic_numel(shape: &[Dim]) -> InferResult<SymbolicProduct> {
    let mut coefficient: u128 = 1;
    let mut symbols = Vec::new();
    for dim in shape {
        match *dim {
            Dim::Fixed(extent) => {
                coefficient = coefficient
                    .checked_mul(u128::from(extent))
                    .ok_or_else(|| format!("element count of {} overflows", shape_text(shape)))?;
            }
            Dim::Symbol(symbol) => symbols.push(symbol),
        }
    }
    if coefficient == 0 {
        symbols.clear();
    }
    symbols.sort_unstable();
    Ok(SymbolicProduct {
        coefficient,
        symbols,
    })
}

/// Checks that a reshape from `x` to `out` keeps the element count for every binding.
///
/// # Errors
/// When the symbolic element counts differ.
pub fn reshape(x: &[Dim], out: &[Dim]) -> InferResult<()> {
    check_rank("the result", out)?;
    if symbolic_numel(x)? != symbolic_numel(out)? {
        return Err(format!(
            "{} and {} do not have the same number of elements",
            shape_text(x),
            shape_text(out)
        ));
    }
    Ok(())
}

/// The shape of `x` with its dims reordered: dim `i` of the result is dim `perm[i]` of `x`.
///
/// # Errors
/// When `perm` is not a permutation of `0..rank`.
pub fn permute(x: &[Dim], perm: &[u32]) -> InferResult<Vec<Dim>> {
    if perm.len() != x.len() {
        return Err(format!(
            "perm {perm:?} has {} entries for x of rank {}",
            perm.len(),
            x.len()
        ));
    }
    let mut seen = [false; MAX_RANK];
    let mut out = Vec::with_capacity(x.len());
    for &axis in perm {
        let index = axis as usize;
        match (x.get(index), seen.get_mut(index)) {
            (Some(dim), Some(flag)) if !*flag => {
                *flag = true;
                out.push(*dim);
            }
            _ => {
                return Err(format!(
                    "perm {perm:?} is not a permutation of 0..{}",
                    x.len()
                ));
            }
        }
    }
    Ok(out)
}

/// The shape of elements `start..end` of `x` along `axis`.
///
/// Along a fixed dim the bounds must lie within it. Along a symbolic dim, an explicit `end`
/// gives a fixed extent `end - start` (execute-time binding checks that the symbol is at least
/// `end`); an open end keeps the symbol and is only allowed from `start` 0.
///
/// # Errors
/// When the axis is out of range, `start > end`, the bounds exceed a fixed extent, or an open
/// slice of a symbolic dim starts past 0.
pub fn slice(x: &[Dim], axis: u32, start: u64, end: Option<u64>) -> InferResult<Vec<Dim>> {
    let index = axis as usize;
    let dim = *x
        .get(index)
        .ok_or_else(|| format!("axis {axis} is out of range for {}", shape_text(x)))?;
    let extent = match (dim, end) {
        (Dim::Fixed(n), end) => {
            let end = end.unwrap_or(n);
            if start > end || end > n {
                return Err(format!(
                    "bounds {start}..{end} do not lie within dim {axis} of {} (extent {n})",
                    shape_text(x)
                ));
            }
            Dim::Fixed(end - start)
        }
        (Dim::Symbol(_), Some(end)) => {
            if start > end {
                return Err(format!("start {start} is past end {end}"));
            }
            Dim::Fixed(end - start)
        }
        (Dim::Symbol(_), None) if start == 0 => dim,
        (Dim::Symbol(symbol), None) => {
            return Err(format!(
                "an open slice of symbolic dim ${symbol} must start at 0, not {start}"
            ));
        }
    };
    let mut out = x.to_vec();
    out[index] = extent;
    Ok(out)
}

/// The shape of the concatenation of `inputs` along `axis`.
///
/// The result's extent along `axis` is the sum of the inputs'; it must be expressible as one
/// dim: all fixed (their sum), or one symbolic input with the others of extent 0.
///
/// # Errors
/// When there are no inputs, ranks differ, the axis is out of range, other dims differ, or the
/// sum is not expressible.
pub fn concat(inputs: &[&[Dim]], axis: u32) -> InferResult<Vec<Dim>> {
    let first = inputs.first().ok_or("concat needs at least one input")?;
    let index = axis as usize;
    if index >= first.len() {
        return Err(format!(
            "axis {axis} is out of range for {}",
            shape_text(first)
        ));
    }
    let mut fixed_sum: u64 = 0;
    let mut symbol: Option<Dim> = None;
    for (position, shape) in inputs.iter().enumerate() {
        let same_elsewhere = shape.len() == first.len()
            && shape
                .iter()
                .zip(first.iter())
                .enumerate()
                .all(|(i, (d, f))| i == index || d == f);
        if !same_elsewhere {
            return Err(format!(
                "input {position} is {}, which differs from input 0 {} outside axis {axis}",
                shape_text(shape),
                shape_text(first)
            ));
        }
        match shape[index] {
            Dim::Fixed(extent) => {
                fixed_sum = fixed_sum
                    .checked_add(extent)
                    .ok_or("the concatenated extent overflows")?;
            }
            dim @ Dim::Symbol(_) if symbol.is_none() => symbol = Some(dim),
            Dim::Symbol(_) => {
                return Err(format!(
                    "axis {axis} is symbolic in more than one input; the sum is not a single dim"
                ));
            }
        }
    }
    let extent = match symbol {
        None => Dim::Fixed(fixed_sum),
        Some(dim) if fixed_sum == 0 => dim,
        Some(_) => {
            return Err(format!(
                "axis {axis} mixes a symbolic extent with fixed extents summing to {fixed_sum}; the sum is not a single dim"
            ));
        }
    };
    let mut out = first.to_vec();
    out[index] = extent;
    Ok(out)
}

/// The shape of a masked mean over the sequence: `x` `[B, S, H]` and `mask` `[B, S]` give
/// `[B, H]`.
///
/// # Errors
/// When `x` is not 3-D or `mask` is not `[B, S]`.
pub fn mean_pool(x: &[Dim], mask: &[Dim]) -> InferResult<Vec<Dim>> {
    let [batch, seq, hidden] = x else {
        return Err(format!("x {} must be [B, S, H]", shape_text(x)));
    };
    if mask != [*batch, *seq] {
        return Err(format!(
            "mask {} must be [B, S] = {} for x {}",
            shape_text(mask),
            shape_text(&[*batch, *seq]),
            shape_text(x)
        ));
    }
    Ok(vec![*batch, *hidden])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::tensor::Dim::{Fixed as F, Symbol as S};

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
}

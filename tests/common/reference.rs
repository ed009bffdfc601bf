//! Straightforward f64 reference implementations of every op, written from the definitions in
//! `program::ir` with plain multi-index loops (no shared code with any backend), for comparing
//! backends on random shapes.

use webdelegate::{Tensor, TensorData};

/// A dense f64 tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Ref {
    /// Shape.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f64>,
}

impl Ref {
    /// A tensor from f32 values.
    pub fn new(shape: &[usize], data: &[f32]) -> Self {
        Self::from_f64(shape, data.iter().map(|&v| f64::from(v)).collect())
    }

    /// A tensor from f64 values.
    pub fn from_f64(shape: &[usize], data: Vec<f64>) -> Self {
        assert_eq!(shape.iter().product::<usize>(), data.len(), "{shape:?}");
        Self {
            shape: shape.to_vec(),
            data,
        }
    }

    /// Any tensor's values as f64.
    pub fn from_tensor(tensor: &Tensor) -> Self {
        let data = match tensor.data() {
            TensorData::Float32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::Float64(v) => v.clone(),
            TensorData::Int32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::Int64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::UInt8(v) | TensorData::Bool(v) => v.iter().map(|&x| f64::from(x)).collect(),
        };
        Self::from_f64(tensor.shape(), data)
    }

    fn at(&self, index: &[usize]) -> f64 {
        self.data[ravel(index, &self.shape)]
    }

    /// Element-wise map.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Self {
        Self::from_f64(&self.shape, self.data.iter().map(|&v| f(v)).collect())
    }

    /// Same data, new shape.
    pub fn reshape(&self, shape: &[usize]) -> Self {
        Self::from_f64(shape, self.data.clone())
    }
}

/// The multi-index of flat `index` in `shape`.
pub fn unravel(mut index: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for axis in (0..shape.len()).rev() {
        out[axis] = index % shape[axis];
        index /= shape[axis];
    }
    out
}

/// The flat index of multi-index `index` in `shape`.
pub fn ravel(index: &[usize], shape: &[usize]) -> usize {
    index.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// NumPy broadcast shape.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|axis| {
            let da = if axis + a.len() >= rank {
                a[axis + a.len() - rank]
            } else {
                1
            };
            let db = if axis + b.len() >= rank {
                b[axis + b.len() - rank]
            } else {
                1
            };
            assert!(da == db || da == 1 || db == 1, "{a:?} vs {b:?}");
            da.max(db)
        })
        .collect()
}

/// The element of `t` that broadcasts to output multi-index `index`.
fn broadcast_at(t: &Ref, index: &[usize]) -> f64 {
    let offset = index.len() - t.shape.len();
    let own: Vec<usize> = t
        .shape
        .iter()
        .enumerate()
        .map(|(axis, &d)| if d == 1 { 0 } else { index[offset + axis] })
        .collect();
    t.at(&own)
}

/// `f(a, b)` with broadcasting.
pub fn binary(a: &Ref, b: &Ref, f: impl Fn(f64, f64) -> f64) -> Ref {
    let shape = broadcast_shape(&a.shape, &b.shape);
    let n = shape.iter().product();
    let data = (0..n)
        .map(|flat| {
            let index = unravel(flat, &shape);
            f(broadcast_at(a, &index), broadcast_at(b, &index))
        })
        .collect();
    Ref::from_f64(&shape, data)
}

/// erf(x) for any x: the power series below |x| = 2.5, else 1 - erfc by a continued fraction.
pub fn erf(x: f64) -> f64 {
    let z = x.abs();
    let value = if z < 2.5 {
        let (mut sum, mut term, mut n) = (0.0, z, 0.0f64);
        loop {
            let t = term / (2.0 * n + 1.0);
            sum += t;
            if t.abs() < 1e-17 {
                break;
            }
            n += 1.0;
            term *= -z * z / n;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let mut fraction = z;
        for k in (1..60).rev() {
            fraction = z + (f64::from(k) / 2.0) / fraction;
        }
        1.0 - (-z * z).exp() / std::f64::consts::PI.sqrt() / fraction
    };
    value.copysign(x)
}

/// GELU, erf form.
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// Batched matmul with optional transposes, broadcast batch dims and bias.
pub fn matmul(a: &Ref, b: &Ref, bias: Option<&Ref>, ta: bool, tb: bool) -> Ref {
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let (m, k) = if ta {
        (a.shape[ra - 1], a.shape[ra - 2])
    } else {
        (a.shape[ra - 2], a.shape[ra - 1])
    };
    let n = if tb { b.shape[rb - 2] } else { b.shape[rb - 1] };
    let batch = broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2]);
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let total = shape.iter().product();
    let mut data = Vec::with_capacity(total);
    for flat in 0..total {
        let index = unravel(flat, &shape);
        let (bi, i, j) = (
            &index[..batch.len()],
            index[batch.len()],
            index[batch.len() + 1],
        );
        let mut sum = bias.map_or(0.0, |bias| bias.data[j]);
        for p in 0..k {
            let a_index = matrix_index(&a.shape, bi, if ta { (p, i) } else { (i, p) });
            let b_index = matrix_index(&b.shape, bi, if tb { (j, p) } else { (p, j) });
            sum += a.at(&a_index) * b.at(&b_index);
        }
        data.push(sum);
    }
    Ref::from_f64(&shape, data)
}

fn matrix_index(shape: &[usize], batch: &[usize], (r, c): (usize, usize)) -> Vec<usize> {
    let own_batch = shape.len() - 2;
    let offset = batch.len() - own_batch;
    let mut index: Vec<usize> = (0..own_batch)
        .map(|axis| {
            if shape[axis] == 1 {
                0
            } else {
                batch[offset + axis]
            }
        })
        .collect();
    index.extend([r, c]);
    index
}

/// Applies `f` to every last-axis row.
fn rows(x: &Ref, f: impl Fn(&[f64]) -> Vec<f64>) -> Ref {
    let width = *x.shape.last().unwrap();
    let data = if width == 0 {
        Vec::new()
    } else {
        x.data.chunks(width).flat_map(f).collect()
    };
    Ref::from_f64(&x.shape, data)
}

/// Layer norm over the last dim (biased variance).
pub fn layer_norm(x: &Ref, gamma: &Ref, beta: &Ref, eps: f64) -> Ref {
    rows(x, |row| {
        let n = row.len() as f64;
        let mean = row.iter().sum::<f64>() / n;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        row.iter()
            .enumerate()
            .map(|(i, v)| (v - mean) / (var + eps).sqrt() * gamma.data[i] + beta.data[i])
            .collect()
    })
}

/// Softmax over the last dim of `x + mask`.
pub fn softmax(x: &Ref, mask: Option<&Ref>) -> Ref {
    let logits = match mask {
        Some(mask) => binary(x, mask, |a, b| a + b),
        None => x.clone(),
    };
    rows(&logits, |row| {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exps: Vec<f64> = row.iter().map(|v| (v - max).exp()).collect();
        let sum: f64 = exps.iter().sum();
        exps.iter().map(|e| e / sum).collect()
    })
}

/// `x / max(||x||, eps)` over the last dim.
pub fn l2_normalize(x: &Ref, eps: f64) -> Ref {
    rows(x, |row| {
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt().max(eps);
        row.iter().map(|v| v / norm).collect()
    })
}

/// Masked mean over the sequence (`m` = 1 where the mask is non-zero).
pub fn mean_pool(x: &Ref, mask: &Ref) -> Ref {
    let (b, s, h) = (x.shape[0], x.shape[1], x.shape[2]);
    let mut data = vec![0.0; b * h];
    for bi in 0..b {
        let count: f64 = (0..s).filter(|&si| mask.at(&[bi, si]) != 0.0).count() as f64;
        for hi in 0..h {
            let sum: f64 = (0..s)
                .filter(|&si| mask.at(&[bi, si]) != 0.0)
                .map(|si| x.at(&[bi, si, hi]))
                .sum();
            data[bi * h + hi] = sum / count.max(1e-9);
        }
    }
    Ref::from_f64(&[b, h], data)
}

/// `out` dim `i` = `x` dim `perm[i]`.
pub fn permute(x: &Ref, perm: &[usize]) -> Ref {
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    let n = shape.iter().product();
    let data = (0..n)
        .map(|flat| {
            let out_index = unravel(flat, &shape);
            let mut in_index = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                in_index[p] = out_index[i];
            }
            x.at(&in_index)
        })
        .collect();
    Ref::from_f64(&shape, data)
}

/// Elements `start..end` along `axis`.
pub fn slice(x: &Ref, axis: usize, start: usize, end: usize) -> Ref {
    let mut shape = x.shape.clone();
    shape[axis] = end - start;
    let n = shape.iter().product();
    let data = (0..n)
        .map(|flat| {
            let mut index = unravel(flat, &shape);
            index[axis] += start;
            x.at(&index)
        })
        .collect();
    Ref::from_f64(&shape, data)
}

/// Concatenation along `axis`.
pub fn concat(parts: &[&Ref], axis: usize) -> Ref {
    let mut shape = parts[0].shape.clone();
    shape[axis] = parts.iter().map(|p| p.shape[axis]).sum();
    let n = shape.iter().product();
    let data = (0..n)
        .map(|flat| {
            let mut index = unravel(flat, &shape);
            for part in parts {
                if index[axis] < part.shape[axis] {
                    return part.at(&index);
                }
                index[axis] -= part.shape[axis];
            }
            unreachable!()
        })
        .collect();
    Ref::from_f64(&shape, data)
}

/// Rows of `table` picked by `ids`.
pub fn gather(table: &Ref, ids: &[i64], ids_shape: &[usize]) -> Ref {
    let width = table.shape[1];
    let mut shape = ids_shape.to_vec();
    shape.push(width);
    let data = ids
        .iter()
        .flat_map(|&id| table.data[id as usize * width..(id as usize + 1) * width].to_vec())
        .collect();
    Ref::from_f64(&shape, data)
}

//! Tensors in and out of the GPU layout (see `kernels`): inputs become little-endian words
//! (u8 widened to one word per element, i64 as its own 8 bytes), output words become tensors of
//! the declared dtype; and the host-side range check of gather ids that are program inputs.

use crate::error::{Error, Result};
use crate::evalue::{Tensor, TensorData};
use crate::program::DType;

/// The tensor's elements in the GPU layout.
pub(crate) fn to_gpu_bytes(tensor: &Tensor) -> Vec<u8> {
    match tensor.data() {
        TensorData::Float32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::Int32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::Int64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::UInt8(v) | TensorData::Bool(v) => {
            v.iter().flat_map(|&x| u32::from(x).to_le_bytes()).collect()
        }
        // Refused by `backends::arguments` before upload.
        TensorData::Float64(v) => v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
    }
}

fn words<const N: usize>(bytes: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    bytes.chunks_exact(N).map(|c| {
        let mut word = [0u8; N];
        word.copy_from_slice(c);
        word
    })
}

/// A tensor of `dtype` and `shape` from GPU-layout `bytes`.
///
/// # Errors
/// `Internal` when the byte count does not match the shape.
pub(crate) fn from_gpu_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Result<Tensor> {
    let data = match dtype {
        DType::F32 => TensorData::Float32(words::<4>(bytes).map(f32::from_le_bytes).collect()),
        DType::I32 => TensorData::Int32(words::<4>(bytes).map(i32::from_le_bytes).collect()),
        DType::I64 => TensorData::Int64(words::<8>(bytes).map(i64::from_le_bytes).collect()),
        DType::U8 => TensorData::UInt8(words::<4>(bytes).map(|w| w[0]).collect()),
        DType::Block(format) => {
            return Err(Error::internal(format!(
                "a {} tensor cannot be read back (only parameters have block formats)",
                format.name()
            )));
        }
    };
    Tensor::new(shape, data).map_err(|e| {
        Error::internal(format!(
            "read-back does not fit its output: {}",
            e.message()
        ))
    })
}

/// The first id of `ids` outside `0..vocab`, with its position.
pub(crate) fn first_bad_id(ids: &TensorData, vocab: usize) -> Option<(usize, i64)> {
    let vocab = i64::try_from(vocab).unwrap_or(i64::MAX);
    let bad = |v: i64| !(0..vocab).contains(&v);
    match ids {
        TensorData::Int32(v) => v
            .iter()
            .position(|&x| bad(x.into()))
            .map(|i| (i, i64::from(v[i]))),
        TensorData::Int64(v) => v.iter().position(|&x| bad(x)).map(|i| (i, v[i])),
        TensorData::UInt8(v) | TensorData::Bool(v) => v
            .iter()
            .position(|&x| bad(x.into()))
            .map(|i| (i, i64::from(v[i]))),
        TensorData::Float32(_) | TensorData::Float64(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_layout_round_trips() {
        let cases = [
            (
                DType::F32,
                TensorData::Float32(vec![1.5, -2.0, f32::INFINITY]),
            ),
            (DType::I32, TensorData::Int32(vec![-7, 0, i32::MAX])),
            (DType::I64, TensorData::Int64(vec![i64::MIN, -1, 1 << 40])),
            (DType::U8, TensorData::UInt8(vec![0, 200, 255])),
        ];
        for (dtype, data) in cases {
            let tensor = Tensor::new(vec![3], data).unwrap();
            let bytes = to_gpu_bytes(&tensor);
            assert_eq!(
                bytes.len(),
                3 * 4 * crate::backends::webgpu::kernels::words_per_element(dtype)
            );
            assert_eq!(from_gpu_bytes(dtype, vec![3], &bytes).unwrap(), tensor);
        }
        assert!(from_gpu_bytes(DType::F32, vec![2], &[0; 4]).is_err());
    }

    #[test]
    fn ids_are_checked_against_the_vocabulary() {
        assert_eq!(
            first_bad_id(&TensorData::Int64(vec![0, 9, 10]), 10),
            Some((2, 10))
        );
        assert_eq!(
            first_bad_id(&TensorData::Int32(vec![3, -1]), 10),
            Some((1, -1))
        );
        assert_eq!(first_bad_id(&TensorData::UInt8(vec![1, 2]), 3), None);
    }
}

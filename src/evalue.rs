//! Values that cross a delegate's `execute`: ExecuTorch's `EValue`, reduced to what a browser
//! runtime needs, and a dense [`Tensor`] type.
//!
//! A tensor owns its elements in a typed vector ([`TensorData`]), so its dtype can never disagree
//! with its storage and typed views need no unsafe casts. The shape is checked against the element
//! count with overflow-safe arithmetic on every construction, so a tensor that exists is
//! consistent.

use crate::error::{Error, Result};
use std::fmt;

/// Element type of a tensor (ExecuTorch's `ScalarType`, the subset this runtime supports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// 8-bit unsigned integer.
    UInt8,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer (token ids).
    Int64,
    /// 32-bit IEEE float.
    Float32,
    /// 64-bit IEEE float.
    Float64,
    /// Boolean, one byte per element (0 or 1).
    Bool,
}

impl ScalarType {
    /// Every supported type.
    pub const ALL: [ScalarType; 6] = [
        Self::UInt8,
        Self::Int32,
        Self::Int64,
        Self::Float32,
        Self::Float64,
        Self::Bool,
    ];

    /// Size of one element in bytes.
    pub const fn element_size(self) -> usize {
        match self {
            Self::UInt8 | Self::Bool => 1,
            Self::Int32 | Self::Float32 => 4,
            Self::Int64 | Self::Float64 => 8,
        }
    }

    /// The name used at the JavaScript edge, e.g. `"float32"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::UInt8 => "uint8",
            Self::Int32 => "int32",
            Self::Int64 => "int64",
            Self::Float32 => "float32",
            Self::Float64 => "float64",
            Self::Bool => "bool",
        }
    }

    /// The type with this JavaScript-edge name.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown name.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|dtype| dtype.name() == name)
            .ok_or_else(|| Error::invalid_argument(format!("unknown dtype {name:?}")))
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The elements of a tensor, in row-major order, typed.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// `uint8` elements.
    UInt8(Vec<u8>),
    /// `int32` elements.
    Int32(Vec<i32>),
    /// `int64` elements.
    Int64(Vec<i64>),
    /// `float32` elements.
    Float32(Vec<f32>),
    /// `float64` elements.
    Float64(Vec<f64>),
    /// `bool` elements, one byte each (0 or 1).
    Bool(Vec<u8>),
}

impl TensorData {
    /// Elements of `dtype` decoded from little-endian `bytes` (a whole number of elements).
    ///
    /// # Errors
    /// `InvalidArgument` when `bytes` is not a whole number of elements, or a `bool` byte is
    /// neither 0 nor 1.
    pub fn from_le_bytes(dtype: ScalarType, bytes: &[u8]) -> Result<Self> {
        let size = dtype.element_size();
        if !bytes.len().is_multiple_of(size) {
            return Err(Error::invalid_argument(format!(
                "{} bytes are not a whole number of {dtype:?} elements",
                bytes.len()
            )));
        }
        fn words<const N: usize, T>(bytes: &[u8], from: fn([u8; N]) -> T) -> Vec<T> {
            bytes
                .chunks_exact(N)
                .map(|chunk| {
                    let mut word = [0; N];
                    word.copy_from_slice(chunk);
                    from(word)
                })
                .collect()
        }
        Ok(match dtype {
            ScalarType::UInt8 => Self::UInt8(bytes.to_vec()),
            ScalarType::Bool => {
                if bytes.iter().any(|&b| b > 1) {
                    return Err(Error::invalid_argument(
                        "a bool tensor holds a byte other than 0 or 1",
                    ));
                }
                Self::Bool(bytes.to_vec())
            }
            ScalarType::Int32 => Self::Int32(words(bytes, i32::from_le_bytes)),
            ScalarType::Int64 => Self::Int64(words(bytes, i64::from_le_bytes)),
            ScalarType::Float32 => Self::Float32(words(bytes, f32::from_le_bytes)),
            ScalarType::Float64 => Self::Float64(words(bytes, f64::from_le_bytes)),
        })
    }

    /// The element type.
    pub fn dtype(&self) -> ScalarType {
        match self {
            Self::UInt8(_) => ScalarType::UInt8,
            Self::Int32(_) => ScalarType::Int32,
            Self::Int64(_) => ScalarType::Int64,
            Self::Float32(_) => ScalarType::Float32,
            Self::Float64(_) => ScalarType::Float64,
            Self::Bool(_) => ScalarType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Self::UInt8(v) | Self::Bool(v) => v.len(),
            Self::Int32(v) => v.len(),
            Self::Int64(v) => v.len(),
            Self::Float32(v) => v.len(),
            Self::Float64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `count` zero elements of `dtype`.
    pub fn zeros(dtype: ScalarType, count: usize) -> Self {
        match dtype {
            ScalarType::UInt8 => Self::UInt8(vec![0; count]),
            ScalarType::Int32 => Self::Int32(vec![0; count]),
            ScalarType::Int64 => Self::Int64(vec![0; count]),
            ScalarType::Float32 => Self::Float32(vec![0.0; count]),
            ScalarType::Float64 => Self::Float64(vec![0.0; count]),
            ScalarType::Bool => Self::Bool(vec![0; count]),
        }
    }
}

/// Number of elements of `shape`, or `InvalidArgument` when the product overflows `usize`.
///
/// # Errors
/// `InvalidArgument` on overflow.
pub fn element_count(shape: &[usize]) -> Result<usize> {
    shape.iter().try_fold(1usize, |acc, &dim| {
        acc.checked_mul(dim)
            .ok_or_else(|| Error::invalid_argument(format!("shape {shape:?} overflows")))
    })
}

/// A dense tensor: a shape and typed row-major data whose length equals the shape's product.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: TensorData,
}

impl Tensor {
    /// A tensor, after checking that `data` has exactly as many elements as `shape` implies.
    ///
    /// # Errors
    /// `InvalidArgument` when the shape overflows or disagrees with the data length.
    pub fn new(shape: Vec<usize>, data: TensorData) -> Result<Self> {
        let expected = element_count(&shape)?;
        if expected != data.len() {
            return Err(Error::invalid_argument(format!(
                "{} tensor of shape {shape:?} needs {expected} elements, got {}",
                data.dtype(),
                data.len()
            )));
        }
        Ok(Self { shape, data })
    }

    /// A zero-filled tensor.
    ///
    /// # Errors
    /// `InvalidArgument` when the shape overflows.
    pub fn zeros(dtype: ScalarType, shape: Vec<usize>) -> Result<Self> {
        let count = element_count(&shape)?;
        Ok(Self {
            shape,
            data: TensorData::zeros(dtype, count),
        })
    }

    /// A `float32` tensor.
    ///
    /// # Errors
    /// `InvalidArgument` when the shape disagrees with the data length.
    pub fn from_f32(shape: Vec<usize>, data: Vec<f32>) -> Result<Self> {
        Self::new(shape, TensorData::Float32(data))
    }

    /// The element type.
    pub fn dtype(&self) -> ScalarType {
        self.data.dtype()
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len()
    }

    /// Size of the data in bytes.
    pub fn nbytes(&self) -> usize {
        // Cannot overflow: the data vector exists in memory.
        self.numel() * self.dtype().element_size()
    }

    /// The typed data.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// The data as `f32`, if this is a `float32` tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::Float32(values) => Some(values),
            _ => None,
        }
    }

    /// Mutable `f32` data, if this is a `float32` tensor.
    pub fn as_f32_mut(&mut self) -> Option<&mut [f32]> {
        match &mut self.data {
            TensorData::Float32(values) => Some(values),
            _ => None,
        }
    }

    /// Splits into shape and data.
    pub fn into_parts(self) -> (Vec<usize>, TensorData) {
        (self.shape, self.data)
    }
}

/// A value passed to or returned from a delegate (ExecuTorch's `EValue`, browser subset).
#[derive(Clone, Debug, PartialEq)]
pub enum EValue {
    /// No value.
    None,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    String(String),
    /// A dense tensor.
    Tensor(Tensor),
}

impl EValue {
    /// The tag name used at the JavaScript edge, e.g. `"Tensor"`.
    pub fn tag(&self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Int(_) => "Int",
            Self::Double(_) => "Double",
            Self::Bool(_) => "Bool",
            Self::String(_) => "String",
            Self::Tensor(_) => "Tensor",
        }
    }

    /// The tensor, if this value is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Self::Tensor(tensor) => Some(tensor),
            _ => None,
        }
    }

    /// The tensor, mutable, if this value is one.
    pub fn as_tensor_mut(&mut self) -> Option<&mut Tensor> {
        match self {
            Self::Tensor(tensor) => Some(tensor),
            _ => None,
        }
    }
}

impl From<Tensor> for EValue {
    fn from(tensor: Tensor) -> Self {
        Self::Tensor(tensor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn shape_must_match_data() {
        let ok = Tensor::from_f32(vec![2, 3], vec![0.0; 6]).unwrap();
        assert_eq!(ok.numel(), 6);
        assert_eq!(ok.nbytes(), 24);
        let short = Tensor::from_f32(vec![2, 3], vec![0.0; 5]).unwrap_err();
        assert_eq!(short.code(), ErrorCode::InvalidArgument);
        let scalar = Tensor::new(vec![], TensorData::Int64(vec![7])).unwrap();
        assert_eq!(scalar.numel(), 1);
        let empty = Tensor::new(vec![0, 4], TensorData::UInt8(vec![])).unwrap();
        assert_eq!(empty.numel(), 0);
    }

    #[test]
    fn overflowing_shape_is_refused() {
        let error = Tensor::zeros(ScalarType::Float32, vec![usize::MAX, 2]).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        assert!(element_count(&[usize::MAX / 2 + 1, 2]).is_err());
    }

    #[test]
    fn dtype_names_round_trip() {
        for dtype in ScalarType::ALL {
            assert_eq!(ScalarType::from_name(dtype.name()).unwrap(), dtype);
            assert_eq!(TensorData::zeros(dtype, 3).dtype(), dtype);
        }
        assert_eq!(
            ScalarType::from_name("float16").unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
    }
}

//! Typed element storage of the CPU backend: owned vectors ([`Values`]) for parameters and
//! intermediates, borrowed slices ([`ValuesRef`]) for reading any of them (and the caller's
//! inputs) without copies.

use crate::error::{Error, ErrorCode, Result};
use crate::evalue::TensorData;
use crate::program::{BlockFormat, DType};

/// Owned elements of one tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// `f32` elements.
    F32(Vec<f32>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `u8` elements.
    U8(Vec<u8>),
    /// A parameter in a ggml block format: the file's bytes, decoded by the kernels that read it
    /// (never converted to f32).
    Blocks(BlockFormat, Vec<u8>),
}

/// Borrowed elements of one tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValuesRef<'a> {
    /// `f32` elements.
    F32(&'a [f32]),
    /// `i32` elements.
    I32(&'a [i32]),
    /// `i64` elements.
    I64(&'a [i64]),
    /// `u8` elements.
    U8(&'a [u8]),
    /// A parameter in a ggml block format, as stored.
    Blocks(BlockFormat, &'a [u8]),
}

impl Values {
    /// Bytes the values hold.
    pub fn byte_len(&self) -> usize {
        match self {
            Self::F32(v) => v.len() * 4,
            Self::I32(v) => v.len() * 4,
            Self::I64(v) => v.len() * 8,
            Self::U8(v) | Self::Blocks(_, v) => v.len(),
        }
    }

    /// A view of the elements.
    pub fn as_ref(&self) -> ValuesRef<'_> {
        match self {
            Self::F32(v) => ValuesRef::F32(v),
            Self::I32(v) => ValuesRef::I32(v),
            Self::I64(v) => ValuesRef::I64(v),
            Self::U8(v) => ValuesRef::U8(v),
            Self::Blocks(format, bytes) => ValuesRef::Blocks(*format, bytes),
        }
    }

    /// Block-format bytes taken as they are (no copy).
    ///
    /// # Errors
    /// `InvalidExternalData` when they are not a whole number of blocks.
    pub fn from_block_bytes(format: BlockFormat, bytes: Vec<u8>) -> Result<Self> {
        check_whole_blocks(format, bytes.len())?;
        Ok(Self::Blocks(format, bytes))
    }

    /// Decodes little-endian `bytes` as `dtype` elements (how parameter providers hold them).
    ///
    /// # Errors
    /// `InvalidExternalData` when the length is not a multiple of the element size.
    pub fn from_le_bytes(dtype: DType, bytes: &[u8]) -> Result<Self> {
        if let DType::Block(format) = dtype {
            check_whole_blocks(format, bytes.len())?;
            return Ok(Self::Blocks(format, bytes.to_vec()));
        }
        let size = dtype.size().unwrap_or(1);
        if !bytes.len().is_multiple_of(size) {
            return Err(Error::new(
                ErrorCode::InvalidExternalData,
                format!(
                    "{} bytes are not a whole number of {} elements",
                    bytes.len(),
                    dtype.name()
                ),
            ));
        }
        Ok(match dtype {
            DType::F32 => Self::F32(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::I32 => Self::I32(
                bytes
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::I64 => Self::I64(
                bytes
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                    .collect(),
            ),
            DType::U8 | DType::Block(_) => Self::U8(bytes.to_vec()),
        })
    }

    /// The elements as an output tensor's data.
    pub fn into_tensor_data(self) -> TensorData {
        match self {
            Self::F32(v) => TensorData::Float32(v),
            Self::I32(v) => TensorData::Int32(v),
            Self::I64(v) => TensorData::Int64(v),
            // Validation keeps block formats to parameters, which are never outputs.
            Self::U8(v) | Self::Blocks(_, v) => TensorData::UInt8(v),
        }
    }
}

impl<'a> ValuesRef<'a> {
    /// The view of a caller's tensor data, if its type is one programs use.
    pub fn from_tensor_data(data: &'a TensorData) -> Option<Self> {
        match data {
            TensorData::Float32(v) => Some(Self::F32(v)),
            TensorData::Int32(v) => Some(Self::I32(v)),
            TensorData::Int64(v) => Some(Self::I64(v)),
            TensorData::UInt8(v) | TensorData::Bool(v) => Some(Self::U8(v)),
            TensorData::Float64(_) => None,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Self::F32(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::U8(v) => v.len(),
            Self::Blocks(format, bytes) => {
                bytes.len() / format.block_bytes() * format.block_elements()
            }
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Self::F32(_) => DType::F32,
            Self::I32(_) => DType::I32,
            Self::I64(_) => DType::I64,
            Self::U8(_) => DType::U8,
            Self::Blocks(format, _) => DType::Block(*format),
        }
    }

    /// An owned copy.
    pub fn to_owned(self) -> Values {
        match self {
            Self::F32(v) => Values::F32(v.to_vec()),
            Self::I32(v) => Values::I32(v.to_vec()),
            Self::I64(v) => Values::I64(v.to_vec()),
            Self::U8(v) => Values::U8(v.to_vec()),
            Self::Blocks(format, bytes) => Values::Blocks(format, bytes.to_vec()),
        }
    }

    /// The `f32` elements, or `Internal` (validation guarantees the dtype).
    ///
    /// # Errors
    /// `Internal` for another dtype.
    pub fn f32(self) -> Result<&'a [f32]> {
        match self {
            Self::F32(v) => Ok(v),
            other => Err(Error::internal(format!(
                "expected f32 elements, found {}",
                other.dtype().name()
            ))),
        }
    }
}

/// `len` copies of `value`, or `MemoryAllocationFailed` instead of aborting when memory runs
/// out (sizes follow the caller's input shapes, so they are untrusted).
///
/// # Errors
/// `MemoryAllocationFailed` when the allocation fails.
pub fn filled<T: Clone>(len: usize, value: T) -> Result<Vec<T>> {
    let mut values = Vec::new();
    values.try_reserve_exact(len).map_err(|_| {
        Error::new(
            ErrorCode::MemoryAllocationFailed,
            format!(
                "cannot allocate {len} elements of {} bytes",
                std::mem::size_of::<T>()
            ),
        )
    })?;
    values.resize(len, value);
    Ok(values)
}

/// Recycles `f32` buffers between ops and executions, so steady-state execution allocates
/// little, without growing: a buffer that a whole execution left unused is dropped when it
/// ends ([`BufferPool::end_execution`]). What the pool keeps is then at most what the last
/// execution used and gave back, never an accumulation over executions (ops that allocate
/// their results themselves recycle a buffer per step; kept forever, those added up to 64
/// buffers, 38 MiB of Gemma's logits rows after 32 decode steps).
#[derive(Debug, Default)]
pub struct BufferPool {
    /// Kept buffers, each with the execution that gave it back.
    free: Vec<(Vec<f32>, u64)>,
    /// The current execution's number.
    execution: u64,
}

impl BufferPool {
    /// Most buffers kept.
    const MAX_KEPT: usize = 64;

    /// Bytes the kept buffers hold.
    pub fn bytes(&self) -> usize {
        self.free.iter().map(|(b, _)| b.capacity() * 4).sum()
    }

    /// A zero-filled buffer of `len` elements (the smallest kept one that fits, or a new one).
    ///
    /// # Errors
    /// `MemoryAllocationFailed` when a new buffer cannot be had.
    pub fn take(&mut self, len: usize) -> Result<Vec<f32>> {
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, (buffer, _))| buffer.capacity() >= len)
            .min_by_key(|(_, (buffer, _))| buffer.capacity())
            .map(|(index, _)| index);
        match best {
            Some(index) => {
                let (mut buffer, _) = self.free.swap_remove(index);
                buffer.clear();
                buffer.resize(len, 0.0);
                Ok(buffer)
            }
            None => filled(len, 0.0),
        }
    }

    /// Keeps `values`' buffer for reuse if it is an `f32` one.
    pub fn recycle(&mut self, values: Values) {
        if let Values::F32(buffer) = values
            && buffer.capacity() > 0
        {
            if self.free.len() >= Self::MAX_KEPT {
                // Drop the smallest, keep the large ones (they are the costly ones).
                if let Some((index, _)) = self
                    .free
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, (buffer, _))| buffer.capacity())
                {
                    self.free.swap_remove(index);
                }
            }
            self.free.push((buffer, self.execution));
        }
    }

    /// Ends an execution: drops the buffers it neither took nor gave back (kept from before
    /// and idle through it).
    pub fn end_execution(&mut self) {
        let current = self.execution;
        self.free.retain(|(_, execution)| *execution == current);
        self.execution = current.wrapping_add(1);
    }
}

/// An element type the kernels are generic over.
pub trait Element: Copy + Default {
    /// The elements of `values` if they are of this type.
    fn slice(values: ValuesRef<'_>) -> Option<&[Self]>;
    /// Wraps a vector of this type.
    fn wrap(values: Vec<Self>) -> Values;
    /// A zero-filled vector of `len` (from `pool` for `f32`).
    ///
    /// # Errors
    /// `MemoryAllocationFailed` when it cannot be had.
    fn zeroed(pool: &mut BufferPool, len: usize) -> Result<Vec<Self>>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            fn slice(values: ValuesRef<'_>) -> Option<&[Self]> {
                match values {
                    ValuesRef::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(values: Vec<Self>) -> Values {
                Values::$variant(values)
            }
            fn zeroed(_pool: &mut BufferPool, len: usize) -> Result<Vec<Self>> {
                filled(len, Self::default())
            }
        }
    };
}

element!(i32, I32);
element!(i64, I64);
element!(u8, U8);

impl Element for f32 {
    fn slice(values: ValuesRef<'_>) -> Option<&[Self]> {
        match values {
            ValuesRef::F32(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(values: Vec<Self>) -> Values {
        Values::F32(values)
    }
    fn zeroed(pool: &mut BufferPool, len: usize) -> Result<Vec<Self>> {
        pool.take(len)
    }
}

/// `InvalidExternalData` unless `len` bytes are whole blocks of `format`.
fn check_whole_blocks(format: BlockFormat, len: usize) -> Result<()> {
    if len.is_multiple_of(format.block_bytes()) {
        return Ok(());
    }
    Err(Error::invalid_external_data(format!(
        "{len} bytes are not a whole number of {} blocks ({} bytes each)",
        format.name(),
        format.block_bytes()
    )))
}

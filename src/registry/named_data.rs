//! ExecuTorch's `NamedDataMap` (`runtime/core/named_data_map.h`) over one scope of a parameter
//! provider: how an ExecuTorch-style backend reads its external weights by name, so a GGUF,
//! safetensors or IRPA file served by the HTTP provider (or a memory provider's scope) is that
//! backend's named data.
//!
//! | upstream | here | errors (upstream's codes) |
//! |---|---|---|
//! | `get_tensor_layout(key)` | [`NamedDataMap::get_tensor_layout`] | `NotFound` unknown key; `NotImplemented` when the file records no dtype or shape (IRPA: opaque bytes, as upstream's `PteDataMap`); `NotSupported` for a dtype with neither an upstream `ScalarType` nor a ggml block format, or a dimension over `i32::MAX`; `InvalidExternalData` when the file's byte length disagrees with its shape and dtype |
//! | `get_data(key)` | [`NamedDataMap::get_data`] (async) | `NotFound` unknown key; provider failures (see below) |
//! | `load_data_into(key, buffer, size)` | [`NamedDataMap::load_data_into`] (async; `size` is the slice's length) | `NotFound` unknown key; `InvalidArgument` when the buffer is smaller than the data; provider failures |
//! | (none) | [`NamedDataMap::load_data_into_buffer`] (async): into a provider buffer at an offset, e.g. a GPU buffer | as `load_data_into` |
//! | `get_num_keys()` | [`NamedDataMap::get_num_keys`] | `NotImplemented` when the provider cannot enumerate the scope |
//! | `get_key(index)` | [`NamedDataMap::get_key`] | `InvalidArgument` for an index `>= get_num_keys()`; `NotImplemented` as above |
//!
//! Where this differs from upstream, on purpose:
//! - `get_data` and `load_data_into` are async: the provider behind them may fetch over HTTP
//!   (as our `init`/`execute` are async; see `BackendInterface`).
//! - `load_data_into` refuses a buffer *smaller* than the data (`InvalidArgument`) and fills the
//!   first `nbytes` of a larger one. Upstream's `FlatTensorDataMap` checks `size <= nbytes`
//!   while its message says "Buffer size is smaller than tensor size", then writes `nbytes`: we
//!   follow the message and the header's contract ("must point to at least `size` bytes").
//! - The keys are listed once, when the map is made ([`NamedDataMap::new`]): `get_key(i)` stays
//!   stable for the map's life even if the provider's scope is replaced meanwhile (lookups by
//!   key always ask the provider). A key a file repeats is listed once (the first entry, which
//!   lookups find); upstream's merged map refuses duplicates instead.
//! - Provider failures (IREE statuses) map to the nearest ExecuTorch code: `NOT_FOUND` ->
//!   `NotFound`; `OUT_OF_RANGE`, `DATA_LOSS`, `INVALID_ARGUMENT` -> `InvalidExternalData`;
//!   `RESOURCE_EXHAUSTED` -> `MemoryAllocationFailed`; transport failures (`UNAVAILABLE`,
//!   `PERMISSION_DENIED`, `CANCELLED`, ...) -> `AccessFailed`; `UNIMPLEMENTED` ->
//!   `NotSupported`; anything else `Internal`. The message keeps the IREE code and message.
//!
//! [`TensorLayout`]: sizes are outermost first and the dim order is `0..rank` (every format we
//! read is dense row-major); a GGUF shape, which the index lists innermost first, is reversed
//! (a GGUF `[640, 262144]` lm_head is `sizes [262144, 640]`). The scalar type is upstream's
//! `ScalarType` ([`LayoutScalarType`], with its numeric codes) for the file dtypes that have
//! one. ggml's block formats (`Q8_0`, `Q4_K`, ...) have none: their layout has
//! `scalar_type() == None`,
//! `block_format()` naming the [`BlockFormat`], the sizes in elements and `nbytes` the packed
//! byte length (per block, as ggml lays it out). `file_dtype()` always gives the file's own name.

use crate::error::{Error, Result};
use crate::params::{
    HostBuffer, ParameterBuffer, ParameterInfo, SharedProvider, Span, SpanRequest,
};
use crate::quant::BlockFormat;
use crate::registry::freeable::FreeableBuffer;

/// Upstream's `executorch::aten::ScalarType` as a `TensorLayout` carries it, with its numeric
/// codes (`scalar_type.fbs`), for the element types a weights file can name. (Named apart from
/// [`crate::ScalarType`], the element types an `EValue` tensor holds.)
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutScalarType {
    /// `uint8_t`.
    Byte = 0,
    /// `int8_t`.
    Char = 1,
    /// `int16_t`.
    Short = 2,
    /// `int32_t`.
    Int = 3,
    /// `int64_t`.
    Long = 4,
    /// IEEE binary16.
    Half = 5,
    /// `float`.
    Float = 6,
    /// `double`.
    Double = 7,
    /// `bool` (one byte).
    Bool = 11,
    /// bfloat16.
    BFloat16 = 15,
    /// 8-bit float, 5 exponent bits.
    Float8E5m2 = 23,
    /// 8-bit float, 4 exponent bits, no infinities.
    Float8E4m3fn = 24,
    /// `uint16_t`.
    UInt16 = 27,
    /// `uint32_t`.
    UInt32 = 28,
    /// `uint64_t`.
    UInt64 = 29,
}

impl LayoutScalarType {
    /// Upstream's name (`c10::toString`), e.g. `"Float"`, `"BFloat16"`, `"Float8_e5m2"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Byte => "Byte",
            Self::Char => "Char",
            Self::Short => "Short",
            Self::Int => "Int",
            Self::Long => "Long",
            Self::Half => "Half",
            Self::Float => "Float",
            Self::Double => "Double",
            Self::Bool => "Bool",
            Self::BFloat16 => "BFloat16",
            Self::Float8E5m2 => "Float8_e5m2",
            Self::Float8E4m3fn => "Float8_e4m3fn",
            Self::UInt16 => "UInt16",
            Self::UInt32 => "UInt32",
            Self::UInt64 => "UInt64",
        }
    }

    /// Upstream's numeric code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// Bytes per element (upstream's `elementSize`).
    pub const fn element_size(self) -> u64 {
        match self {
            Self::Byte | Self::Char | Self::Bool | Self::Float8E5m2 | Self::Float8E4m3fn => 1,
            Self::Short | Self::Half | Self::BFloat16 | Self::UInt16 => 2,
            Self::Int | Self::Float | Self::UInt32 => 4,
            Self::Long | Self::Double | Self::UInt64 => 8,
        }
    }

    /// The scalar type a weights file's dtype name stands for: safetensors' and GGUF's names
    /// (`F32`, `F16`, `BF16`, `F64`, `I8`..`I64`, `U8`..`U64`, `BOOL`, `F8_E5M2`, `F8_E4M3`),
    /// numpy-style names (`float32`, `int64`, ...), any case. `None` for anything else (ggml's
    /// block formats among them).
    pub fn from_file_dtype(name: &str) -> Option<Self> {
        let lower = name.to_ascii_lowercase();
        Some(match lower.as_str() {
            "u8" | "uint8" => Self::Byte,
            "i8" | "int8" => Self::Char,
            "i16" | "int16" => Self::Short,
            "i32" | "int32" => Self::Int,
            "i64" | "int64" => Self::Long,
            "f16" | "float16" | "half" => Self::Half,
            "f32" | "float32" | "float" => Self::Float,
            "f64" | "float64" | "double" => Self::Double,
            "bool" => Self::Bool,
            "bf16" | "bfloat16" => Self::BFloat16,
            "f8_e5m2" | "float8_e5m2" => Self::Float8E5m2,
            "f8_e4m3" | "f8_e4m3fn" | "float8_e4m3fn" => Self::Float8E4m3fn,
            "u16" | "uint16" => Self::UInt16,
            "u32" | "uint32" => Self::UInt32,
            "u64" | "uint64" => Self::UInt64,
            _ => return None,
        })
    }
}

/// Upstream's `TensorLayout` (sizes, dim order, scalar type, byte size) of one named tensor,
/// extended for ggml's block formats (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorLayout {
    sizes: Vec<i32>,
    dim_order: Vec<u8>,
    scalar_type: Option<LayoutScalarType>,
    block_format: Option<BlockFormat>,
    file_dtype: String,
    nbytes: u64,
}

impl TensorLayout {
    /// Sizes, outermost first (upstream's `int32_t` sizes).
    pub fn sizes(&self) -> &[i32] {
        &self.sizes
    }

    /// Dim order (`0..rank`: contiguous, row-major).
    pub fn dim_order(&self) -> &[u8] {
        &self.dim_order
    }

    /// The element type, or `None` for a block format (see [`TensorLayout::block_format`]).
    pub fn scalar_type(&self) -> Option<LayoutScalarType> {
        self.scalar_type
    }

    /// The ggml block format, when the tensor is block-quantized (not in upstream).
    pub fn block_format(&self) -> Option<BlockFormat> {
        self.block_format
    }

    /// The dtype name as the file records it (`"F32"`, `"Q8_0"`, ...; not in upstream).
    pub fn file_dtype(&self) -> &str {
        &self.file_dtype
    }

    /// Size in bytes (for a block format: the packed blocks).
    pub fn nbytes(&self) -> u64 {
        self.nbytes
    }
}

/// ExecuTorch's `NamedDataMap` over one scope of a parameter provider (see the module docs).
#[derive(Clone)]
pub struct NamedDataMap {
    provider: SharedProvider,
    scope: String,
    keys: Option<Vec<String>>,
}

impl std::fmt::Debug for NamedDataMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedDataMap")
            .field("scope", &self.scope)
            .field("keys", &self.keys.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

impl NamedDataMap {
    /// The named data of `scope` in `provider`; its keys are listed now.
    ///
    /// # Errors
    /// `NotFound` when the provider does not serve `scope`.
    pub fn new(provider: SharedProvider, scope: &str) -> Result<Self> {
        if !provider.query_support(scope) {
            return Err(Error::not_found(format!(
                "named data: the parameter provider does not serve scope {scope:?}"
            )));
        }
        Ok(Self {
            keys: provider.list_keys(scope),
            provider,
            scope: scope.to_owned(),
        })
    }

    /// The provider scope this map reads.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    fn what(&self, key: &str) -> String {
        format!("named data {key:?} in scope {:?}", self.scope)
    }

    fn info(&self, key: &str) -> Result<ParameterInfo> {
        self.provider
            .describe(&self.scope, key)
            .ok_or_else(|| Error::not_found(format!("no {}", self.what(key))))
    }

    /// The layout of `key` (upstream's `get_tensor_layout`).
    ///
    /// # Errors
    /// As the module docs' table says.
    pub fn get_tensor_layout(&self, key: &str) -> Result<TensorLayout> {
        let info = self.info(key)?;
        let what = || self.what(key);
        let (Some(dtype), Some(dims)) = (info.dtype.as_deref(), info.row_major_shape()) else {
            return Err(Error::not_implemented(format!(
                "{}: the file records no dtype and shape (opaque bytes); read them with get_data",
                what()
            )));
        };
        let sizes = dims
            .iter()
            .map(|&dim| i32::try_from(dim))
            .collect::<std::result::Result<Vec<i32>, _>>()
            .map_err(|_| {
                Error::not_supported(format!(
                    "{}: shape {dims:?} has a dimension over i32::MAX (TensorLayout sizes are int32)",
                    what()
                ))
            })?;
        let rank = u8::try_from(sizes.len()).map_err(|_| {
            Error::not_supported(format!("{}: rank {} exceeds 255", what(), sizes.len()))
        })?;
        let mismatch = |expected: Option<u64>| {
            Error::invalid_external_data(format!(
                "{}: the file holds {} bytes but shape {dims:?} of {dtype} needs {}",
                what(),
                info.length,
                expected.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string())
            ))
        };
        let numel = dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
        let (scalar_type, block_format) = if let Some(scalar) =
            LayoutScalarType::from_file_dtype(dtype)
        {
            let expected = numel.and_then(|n| n.checked_mul(scalar.element_size()));
            if expected != Some(info.length) {
                return Err(mismatch(expected));
            }
            (Some(scalar), None)
        } else if let Some(format) = BlockFormat::from_name(dtype) {
            let row_len = dims.last().copied().unwrap_or(1);
            if row_len % format.block_elements() as u64 != 0 {
                return Err(Error::invalid_external_data(format!(
                    "{}: rows of {row_len} elements are not whole {} blocks of {}",
                    what(),
                    format.name(),
                    format.block_elements()
                )));
            }
            let rows = numel.map(|n| n.checked_div(row_len).unwrap_or(0));
            let expected = rows.and_then(|rows| format.tensor_bytes(rows, row_len));
            if expected != Some(info.length) {
                return Err(mismatch(expected));
            }
            (None, Some(format))
        } else {
            return Err(Error::not_supported(format!(
                "{}: dtype {dtype:?} is neither an ExecuTorch scalar type nor a supported ggml block format",
                what()
            )));
        };
        Ok(TensorLayout {
            sizes,
            dim_order: (0..rank).collect(),
            scalar_type,
            block_format,
            file_dtype: dtype.to_owned(),
            nbytes: info.length,
        })
    }

    /// Reads all of `key` into host memory.
    async fn read_all(&self, key: &str, length: u64) -> Result<Vec<u8>> {
        let what = self.what(key);
        let target =
            HostBuffer::zeroed(length).map_err(|status| Error::from_status(&status, &what))?;
        self.provider
            .gather(&self.scope, &target, &[SpanRequest::whole(key, length)])
            .await
            .map_err(|status| Error::from_status(&status, &what))?;
        Ok(target.into_bytes())
    }

    /// All bytes of `key`, in a buffer the caller owns (upstream's `get_data`).
    ///
    /// # Errors
    /// `NotFound` for an unknown key; provider failures as the module docs say.
    pub async fn get_data(&self, key: &str) -> Result<FreeableBuffer> {
        let info = self.info(key)?;
        Ok(FreeableBuffer::new(self.read_all(key, info.length).await?))
    }

    /// Loads the bytes of `key` into the first bytes of `buffer` (upstream's `load_data_into`,
    /// `size` being `buffer.len()`).
    ///
    /// # Errors
    /// `NotFound` for an unknown key; `InvalidArgument` when `buffer` is smaller than the data
    /// (nothing is fetched then); provider failures as the module docs say.
    pub async fn load_data_into(&self, key: &str, buffer: &mut [u8]) -> Result<()> {
        let info = self.info(key)?;
        if (buffer.len() as u64) < info.length {
            return Err(Error::invalid_argument(format!(
                "{}: buffer size {} is smaller than the data's {} bytes",
                self.what(key),
                buffer.len(),
                info.length
            )));
        }
        let bytes = self.read_all(key, info.length).await?;
        buffer[..bytes.len()].copy_from_slice(&bytes);
        Ok(())
    }

    /// Loads all of `key` into `target` at `offset` and returns its length (not in upstream:
    /// `load_data_into` for a provider buffer, e.g. a WebGPU backend's GPU buffer, which the
    /// HTTP provider writes fetched chunks into without a host copy).
    ///
    /// # Errors
    /// `NotFound` for an unknown key; `InvalidArgument` when the data does not fit `target`
    /// from `offset` (nothing is fetched then); provider failures as the module docs say.
    pub async fn load_data_into_buffer(
        &self,
        key: &str,
        target: &dyn ParameterBuffer,
        offset: u64,
    ) -> Result<u64> {
        let info = self.info(key)?;
        if offset
            .checked_add(info.length)
            .is_none_or(|end| end > target.size())
        {
            return Err(Error::invalid_argument(format!(
                "{}: {} bytes at offset {offset} do not fit a buffer of {}",
                self.what(key),
                info.length,
                target.size()
            )));
        }
        let request = SpanRequest {
            key: key.to_owned(),
            span: Span {
                parameter_offset: 0,
                buffer_offset: offset,
                length: info.length,
            },
        };
        self.provider
            .gather(&self.scope, target, &[request])
            .await
            .map_err(|status| Error::from_status(&status, &self.what(key)))?;
        Ok(info.length)
    }

    fn keys(&self) -> Result<&[String]> {
        self.keys.as_deref().ok_or_else(|| {
            Error::not_implemented(format!(
                "named data: the parameter provider cannot list the keys of scope {:?}",
                self.scope
            ))
        })
    }

    /// How many keys the scope has (upstream's `get_num_keys`).
    ///
    /// # Errors
    /// `NotImplemented` when the provider cannot enumerate the scope; `NotSupported` past
    /// `u32::MAX` keys.
    pub fn get_num_keys(&self) -> Result<u32> {
        let keys = self.keys()?;
        u32::try_from(keys.len())
            .map_err(|_| Error::not_supported(format!("{} keys exceed u32::MAX", keys.len())))
    }

    /// The key at `index`, in the provider's order (upstream's `get_key`).
    ///
    /// # Errors
    /// `InvalidArgument` when `index >= get_num_keys()`; `NotImplemented` as
    /// [`NamedDataMap::get_num_keys`].
    pub fn get_key(&self, index: u32) -> Result<&str> {
        let keys = self.keys()?;
        keys.get(index as usize).map(String::as_str).ok_or_else(|| {
            Error::invalid_argument(format!(
                "named data: index {index} out of range of size {}",
                keys.len()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::params::{
        BufferAllocator, LoadedSpan, MemoryProvider, ParameterBuffer, ParameterProvider, Signal,
        StatusResult,
    };
    use crate::registry::BackendInitContext;
    use crate::send_sync::LocalBoxFuture;
    use std::sync::Arc;

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// A scope with one tensor of each kind the map tells apart.
    fn provider() -> Arc<MemoryProvider> {
        let provider = MemoryProvider::new();
        let described = |key: &str, bytes: Vec<u8>, dtype: &str, shape: &[u64]| {
            provider.insert_described(
                "model",
                key,
                bytes,
                Some(dtype.to_owned()),
                Some(shape.to_vec()),
            );
        };
        described(
            "w",
            f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            "F32",
            &[2, 3],
        );
        described("ids", vec![7; 16], "I64", &[2]);
        described("q", vec![9; 2 * 34 * 2], "Q8_0", &[2, 64]);
        described("short", vec![0; 15], "F32", &[2, 2]);
        described("q_ragged", vec![0; 34], "Q8_0", &[1, 33]);
        described("q4_1", vec![0; 20], "Q4_1", &[1, 32]);
        described("huge", vec![0; 4], "U8", &[1 << 31]);
        provider.insert("model", "opaque", b"raw bytes".to_vec());
        described("w", vec![0; 4], "F32", &[1]);
        provider.insert("other", "x", vec![1]);
        Arc::new(provider)
    }

    fn map() -> NamedDataMap {
        NamedDataMap::new(provider(), "model").unwrap()
    }

    #[test]
    fn keys_are_listed_once_in_order_and_a_bad_index_is_invalid_argument() {
        let map = map();
        assert_eq!(map.scope(), "model");
        assert_eq!(
            map.get_num_keys().unwrap(),
            8,
            "the repeated \"w\" counts once"
        );
        let keys: Vec<_> = (0..8).map(|i| map.get_key(i).unwrap()).collect();
        assert_eq!(
            keys,
            [
                "w", "ids", "q", "short", "q_ragged", "q4_1", "huge", "opaque"
            ]
        );
        for index in [8, u32::MAX] {
            let error = map.get_key(index).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
        }
    }

    #[test]
    fn an_unserved_scope_is_not_found() {
        let error = NamedDataMap::new(provider(), "nope").unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotFound, "{error}");
    }

    #[test]
    fn layouts_of_scalar_and_block_tensors() {
        let map = map();
        let w = map.get_tensor_layout("w").unwrap();
        assert_eq!(w.sizes(), [2, 3]);
        assert_eq!(w.dim_order(), [0, 1]);
        assert_eq!(w.scalar_type(), Some(LayoutScalarType::Float));
        assert_eq!(w.scalar_type().map(LayoutScalarType::code), Some(6));
        assert_eq!(w.block_format(), None);
        assert_eq!((w.file_dtype(), w.nbytes()), ("F32", 24));
        let ids = map.get_tensor_layout("ids").unwrap();
        assert_eq!(
            (ids.sizes(), ids.scalar_type(), ids.nbytes()),
            (&[2][..], Some(LayoutScalarType::Long), 16)
        );
        // A memory scope lists shapes outermost first, as they are.
        let q = map.get_tensor_layout("q").unwrap();
        assert_eq!(q.sizes(), [2, 64]);
        assert_eq!(q.scalar_type(), None);
        assert_eq!(q.block_format(), Some(BlockFormat::Q8_0));
        assert_eq!((q.file_dtype(), q.nbytes()), ("Q8_0", 136));
    }

    #[test]
    fn every_layout_error_has_its_code() {
        let map = map();
        let code = |key: &str| map.get_tensor_layout(key).unwrap_err().code();
        assert_eq!(code("absent"), ErrorCode::NotFound);
        assert_eq!(code("opaque"), ErrorCode::NotImplemented);
        assert_eq!(code("short"), ErrorCode::InvalidExternalData);
        assert_eq!(code("q_ragged"), ErrorCode::InvalidExternalData);
        assert_eq!(code("q4_1"), ErrorCode::NotSupported);
        assert_eq!(code("huge"), ErrorCode::NotSupported);
    }

    #[test]
    fn data_and_load_into_return_the_bytes() {
        let map = map();
        let data = pollster::block_on(map.get_data("w")).unwrap();
        assert_eq!(data.data(), f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
        // Opaque bytes have no layout but can be read.
        let opaque = pollster::block_on(map.get_data("opaque")).unwrap();
        assert_eq!(opaque.data(), b"raw bytes");
        let error = pollster::block_on(map.get_data("absent")).unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotFound);

        let mut exact = vec![0u8; 16];
        pollster::block_on(map.load_data_into("ids", &mut exact)).unwrap();
        assert_eq!(exact, [7; 16]);
        let mut larger = vec![0xEE_u8; 20];
        pollster::block_on(map.load_data_into("ids", &mut larger)).unwrap();
        assert_eq!(&larger[..16], [7; 16]);
        assert_eq!(
            &larger[16..],
            [0xEE; 4],
            "bytes past the data stay untouched"
        );
        let mut smaller = vec![0u8; 15];
        let error = pollster::block_on(map.load_data_into("ids", &mut smaller)).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
        assert_eq!(smaller, [0; 15]);
        let error = pollster::block_on(map.load_data_into("absent", &mut larger)).unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotFound);

        let target = HostBuffer::from_bytes(vec![0xEE; 20]);
        let length = pollster::block_on(map.load_data_into_buffer("ids", &target, 3)).unwrap();
        assert_eq!(length, 16);
        let bytes = target.to_vec();
        assert_eq!(
            (&bytes[..3], &bytes[3..19], bytes[19]),
            (&[0xEE; 3][..], &[7; 16][..], 0xEE)
        );
        for (key, offset, code) in [
            ("ids", 5, ErrorCode::InvalidArgument),
            ("ids", u64::MAX, ErrorCode::InvalidArgument),
            ("absent", 0, ErrorCode::NotFound),
        ] {
            let error =
                pollster::block_on(map.load_data_into_buffer(key, &target, offset)).unwrap_err();
            assert_eq!(error.code(), code, "{key} at {offset}: {error}");
        }
    }

    /// A provider that cannot enumerate its keys (the trait's default), over a memory one.
    struct NoKeys(Arc<MemoryProvider>);

    impl ParameterProvider for NoKeys {
        fn notify(&self, signal: Signal) -> StatusResult<()> {
            self.0.notify(signal)
        }
        fn query_support(&self, scope: &str) -> bool {
            self.0.query_support(scope)
        }
        fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo> {
            self.0.describe(scope, key)
        }
        fn load<'a>(
            &'a self,
            allocator: &'a dyn BufferAllocator,
            scope: &'a str,
            requests: &'a [SpanRequest],
        ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>> {
            self.0.load(allocator, scope, requests)
        }
        fn gather<'a>(
            &'a self,
            scope: &'a str,
            target: &'a dyn ParameterBuffer,
            requests: &'a [SpanRequest],
        ) -> LocalBoxFuture<'a, StatusResult<()>> {
            self.0.gather(scope, target, requests)
        }
        fn scatter<'a>(
            &'a self,
            source: &'a dyn ParameterBuffer,
            scope: &'a str,
            requests: &'a [SpanRequest],
        ) -> LocalBoxFuture<'a, StatusResult<()>> {
            self.0.scatter(source, scope, requests)
        }
    }

    #[test]
    fn a_provider_that_cannot_list_keys_is_not_implemented_for_keys_only() {
        let map = NamedDataMap::new(Arc::new(NoKeys(provider())), "model").unwrap();
        assert_eq!(
            map.get_num_keys().unwrap_err().code(),
            ErrorCode::NotImplemented
        );
        assert_eq!(
            map.get_key(0).unwrap_err().code(),
            ErrorCode::NotImplemented
        );
        assert_eq!(map.get_tensor_layout("w").unwrap().sizes(), [2, 3]);
    }

    #[test]
    fn the_init_context_opens_the_named_scope() {
        let context = BackendInitContext::new();
        assert!(context.get_named_data_map().unwrap().is_none());
        let error = context
            .clone()
            .with_named_data_scope("model")
            .get_named_data_map()
            .unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotFound, "no provider: {error}");
        let context = context.with_parameters(provider());
        assert!(context.get_named_data_map().unwrap().is_none());
        let error = context.named_data_map("nope").unwrap_err();
        assert_eq!(error.code(), ErrorCode::NotFound);
        let context = context.with_named_data_scope("model");
        assert_eq!(context.named_data_scope(), Some("model"));
        let map = context.get_named_data_map().unwrap().unwrap();
        assert_eq!(map.get_key(1).unwrap(), "ids");
        let other = context.named_data_map("other").unwrap();
        assert_eq!(other.get_num_keys().unwrap(), 1);
    }

    #[test]
    fn file_dtype_names() {
        for (name, scalar) in [
            ("F32", LayoutScalarType::Float),
            ("float32", LayoutScalarType::Float),
            ("f16", LayoutScalarType::Half),
            ("BF16", LayoutScalarType::BFloat16),
            ("I32", LayoutScalarType::Int),
            ("I64", LayoutScalarType::Long),
            ("U8", LayoutScalarType::Byte),
            ("BOOL", LayoutScalarType::Bool),
            ("F8_E4M3", LayoutScalarType::Float8E4m3fn),
        ] {
            assert_eq!(
                LayoutScalarType::from_file_dtype(name),
                Some(scalar),
                "{name}"
            );
        }
        assert_eq!(LayoutScalarType::from_file_dtype("Q8_0"), None);
        assert_eq!(LayoutScalarType::BFloat16.code(), 15);
        assert_eq!(LayoutScalarType::UInt16.name(), "UInt16");
    }
}

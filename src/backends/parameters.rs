//! Resolving a program's parameter references through the init context's provider, with the
//! same checks and error codes in every backend.
//!
//! - No provider in the context (while the program has params) -> `NotFound`.
//! - The provider does not serve the scope, or has no such key -> `NotFound` naming the param.
//! - The provider describes the parameter with a byte length other than `numel x dtype size`,
//!   a dtype other than the declared one, or a shape other than the declared one ->
//!   `InvalidExternalData` (the weights file disagrees with the program).
//! - A provider failure (IREE status) maps to the nearest ExecuTorch code (see
//!   [`status_error`]); the message keeps the IREE code and message.

use crate::error::{Error, Result, Status};
use crate::params::{HostBuffer, ParameterProvider, SharedProvider, Span, SpanRequest};
use crate::program::{BlockFormat, DType, Dim, ParamRef, Program};
use crate::registry::BackendInitContext;

/// Largest batch of parameters fetched with one `gather` into host memory: bounds the host
/// memory a backend holds twice (raw bytes and converted values) while still letting a remote
/// provider coalesce neighbouring parameters into few requests.
pub const HOST_BATCH_BYTES: u64 = 16 << 20;

/// The ExecuTorch error for a provider's IREE status while fetching `what`
/// ([`Error::from_status`]).
pub fn status_error(status: &Status, what: &str) -> Error {
    Error::from_status(status, what)
}

/// `param 3 "encoder.weight" (tensor 7 "w") in scope "model"`.
pub fn describe_param(program: &Program, position: usize, param: &ParamRef) -> String {
    let name = program
        .tensors
        .get(param.tensor as usize)
        .map_or("?", |decl| decl.name.as_str());
    format!(
        "param {position} {:?} (tensor {} {name:?}) in scope {:?}",
        param.key, param.tensor, param.scope
    )
}

/// The provider the program's params come from.
///
/// # Errors
/// `NotFound` when the program has params and the context has no provider.
pub fn provider<'a>(
    context: &'a BackendInitContext,
    program: &Program,
) -> Result<Option<&'a SharedProvider>> {
    match (context.parameters(), program.params.first()) {
        (_, None) => Ok(None),
        (Some(provider), Some(_)) => Ok(Some(provider)),
        (None, Some(first)) => Err(Error::not_found(format!(
            "the program references {} parameters (the first is {}) but the init context has no parameter provider",
            program.params.len(),
            describe_param(program, 0, first)
        ))),
    }
}

/// Whether a weights file's dtype name (`"F32"`, `"float32"`, `"I64"`, ...) is `dtype`.
pub fn file_dtype_matches(name: &str, dtype: DType) -> bool {
    let name = name.to_ascii_lowercase();
    if let DType::Block(format) = dtype {
        // ggml's names (GGUF), safetensors' "F16"/"BF16", IRPA's "float16"/"bfloat16".
        let alias = match format {
            BlockFormat::F16 => "float16",
            BlockFormat::BF16 => "bfloat16",
            _ => "",
        };
        return name == format.lower_name() || (!alias.is_empty() && name == alias);
    }
    let aliases: &[&str] = match dtype {
        DType::F32 => &["f32", "float32", "float"],
        DType::I32 => &["i32", "int32"],
        DType::I64 => &["i64", "int64"],
        DType::U8 => &["u8", "uint8"],
        DType::Block(_) => &[],
    };
    aliases.contains(&name.as_str())
}

/// The byte length the program expects for `param`: its tensor's fixed shape x dtype size, or
/// for a block format rows x bytes per row.
///
/// # Errors
/// `InvalidProgram` when the tensor is missing or not fixed (validation rules both out).
pub fn expected_length(program: &Program, param: &ParamRef) -> Result<u64> {
    let decl = program
        .tensors
        .get(param.tensor as usize)
        .ok_or_else(|| Error::invalid_program("param names a missing tensor"))?;
    let shape = decl
        .shape
        .iter()
        .map(|dim| match *dim {
            Dim::Fixed(extent) => Ok(extent),
            Dim::Symbol(_) => Err(Error::invalid_program("param has a symbolic shape")),
        })
        .collect::<Result<Vec<u64>>>()?;
    decl.dtype.tensor_bytes(&shape).ok_or_else(|| {
        Error::invalid_program(format!(
            "param of {} {:?}: its byte size overflows or its rows are not whole blocks",
            decl.dtype.name(),
            shape
        ))
    })
}

/// Checks what `provider` says about `param` against the program; returns the byte length.
///
/// # Errors
/// `NotFound` or `InvalidExternalData` as described in the module docs.
pub fn check_param(
    provider: &dyn ParameterProvider,
    program: &Program,
    position: usize,
    param: &ParamRef,
) -> Result<u64> {
    let what = || describe_param(program, position, param);
    let length = expected_length(program, param)?;
    if !provider.query_support(&param.scope) {
        return Err(Error::not_found(format!(
            "{}: no parameter provider serves the scope",
            what()
        )));
    }
    let info = provider
        .describe(&param.scope, &param.key)
        .ok_or_else(|| Error::not_found(format!("{}: the provider has no such key", what())))?;
    let external = |message: String| Error::invalid_external_data(format!("{}: {message}", what()));
    if info.length != length {
        return Err(external(format!(
            "the provider holds {} bytes, the program expects {length}",
            info.length
        )));
    }
    let decl = &program.tensors[param.tensor as usize];
    if let Some(name) = &info.dtype
        && !file_dtype_matches(name, decl.dtype)
    {
        return Err(external(format!(
            "the provider's dtype is {name:?}, the program declares {}",
            decl.dtype.name()
        )));
    }
    if let Some(shape) = &info.row_major_shape() {
        let declared: Vec<u64> = decl
            .shape
            .iter()
            .map(|dim| match dim {
                Dim::Fixed(extent) => *extent,
                Dim::Symbol(_) => 0,
            })
            .collect();
        if *shape != declared {
            return Err(external(format!(
                "the provider's shape is {shape:?}, the program declares {declared:?}"
            )));
        }
    }
    Ok(length)
}

/// Fetches every parameter into host memory and hands each one's bytes to `accept` (with the
/// param's position in `program.params`), in batches of at most [`HOST_BATCH_BYTES`] per scope.
///
/// # Errors
/// As [`provider`] and [`check_param`]; provider failures as [`status_error`]; `accept`'s
/// errors unchanged.
pub async fn fetch_to_host(
    context: &BackendInitContext,
    program: &Program,
    mut accept: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    let Some(provider) = provider(context, program)? else {
        return Ok(());
    };
    let mut lengths = Vec::with_capacity(program.params.len());
    for (position, param) in program.params.iter().enumerate() {
        lengths.push(check_param(provider.as_ref(), program, position, param)?);
    }
    let mut start = 0;
    while start < program.params.len() {
        let scope = &program.params[start].scope;
        let mut end = start;
        let mut total: u64 = 0;
        while end < program.params.len()
            && program.params[end].scope == *scope
            && (end == start || total + lengths[end] <= HOST_BATCH_BYTES)
        {
            total += lengths[end];
            end += 1;
        }
        fetch_batch(
            provider.as_ref(),
            program,
            start..end,
            &lengths,
            total,
            &mut accept,
        )
        .await?;
        start = end;
    }
    Ok(())
}

async fn fetch_batch(
    provider: &dyn ParameterProvider,
    program: &Program,
    positions: std::ops::Range<usize>,
    lengths: &[u64],
    total: u64,
    accept: &mut impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    let first = &program.params[positions.start];
    let batch_what = || describe_param(program, positions.start, first);
    let buffer =
        HostBuffer::zeroed(total).map_err(|status| status_error(&status, &batch_what()))?;
    let mut requests = Vec::with_capacity(positions.len());
    let mut offset = 0u64;
    for position in positions.clone() {
        let param = &program.params[position];
        requests.push(SpanRequest {
            key: param.key.clone(),
            span: Span {
                parameter_offset: 0,
                buffer_offset: offset,
                length: lengths[position],
            },
        });
        offset += lengths[position];
    }
    provider
        .gather(&first.scope, &buffer, &requests)
        .await
        .map_err(|status| status_error(&status, &batch_what()))?;
    let bytes = buffer.into_bytes();
    let mut offset = 0usize;
    for position in positions {
        // Lengths sum to `total`, the buffer's size, which fits in memory.
        let length = lengths[position] as usize;
        let chunk = bytes
            .get(offset..offset + length)
            .ok_or_else(|| Error::internal("a parameter batch is shorter than its parameters"))?;
        accept(position, chunk)?;
        offset += length;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ErrorCode, StatusCode};
    use crate::params::MemoryProvider;
    use crate::program::ProgramBuilder;
    use std::sync::Arc;

    #[test]
    fn statuses_map_to_executorch_codes() {
        let cases = [
            (StatusCode::NotFound, ErrorCode::NotFound),
            (StatusCode::OutOfRange, ErrorCode::InvalidExternalData),
            (StatusCode::DataLoss, ErrorCode::InvalidExternalData),
            (
                StatusCode::ResourceExhausted,
                ErrorCode::MemoryAllocationFailed,
            ),
            (StatusCode::Unavailable, ErrorCode::AccessFailed),
            (StatusCode::PermissionDenied, ErrorCode::AccessFailed),
            (StatusCode::Unimplemented, ErrorCode::NotSupported),
            (StatusCode::Internal, ErrorCode::Internal),
        ];
        for (status, code) in cases {
            let error = status_error(&Status::new(status, "why"), "param 0");
            assert_eq!(error.code(), code, "{status}");
            assert!(error.message().contains(status.name()), "{error}");
            assert!(error.message().contains("why"), "{error}");
        }
    }

    #[test]
    fn dtype_names_from_weight_files() {
        assert!(file_dtype_matches("F32", DType::F32));
        assert!(file_dtype_matches("float32", DType::F32));
        assert!(file_dtype_matches("I64", DType::I64));
        assert!(!file_dtype_matches("F16", DType::F32));
        assert!(!file_dtype_matches("BF16", DType::F32));
        assert!(!file_dtype_matches("Q4_K", DType::F32));
        use crate::program::BlockFormat::*;
        assert!(file_dtype_matches("Q4_K", DType::Block(Q4_K)));
        assert!(file_dtype_matches("q8_0", DType::Block(Q8_0)));
        assert!(!file_dtype_matches("Q8_0", DType::Block(Q5_0)));
        assert!(!file_dtype_matches("F32", DType::Block(F16)));
        for (name, format) in [
            ("F16", F16),
            ("float16", F16),
            ("BF16", BF16),
            ("bfloat16", BF16),
        ] {
            assert!(file_dtype_matches(name, DType::Block(format)), "{name}");
        }
    }

    /// A block parameter's expected length is rows x row bytes; a file whose length, dtype or
    /// (row-major) shape disagrees is refused with `InvalidExternalData` naming the parameter.
    #[test]
    fn block_parameters_are_checked_against_the_file() {
        use crate::program::BlockFormat::Q8_0;
        let mut b = ProgramBuilder::new();
        b.param(
            "w",
            DType::Block(Q8_0),
            vec![Dim::Fixed(3), Dim::Fixed(64)],
            "s",
            "w",
        );
        let program = b.into_program();
        assert_eq!(
            expected_length(&program, &program.params[0]).unwrap(),
            3 * 2 * 34
        );
        let check = |bytes: usize, dtype: &str, shape: Vec<u64>| {
            let provider = MemoryProvider::new();
            provider.insert_described("s", "w", vec![0; bytes], Some(dtype.into()), Some(shape));
            check_param(&provider, &program, 0, &program.params[0])
        };
        assert_eq!(check(204, "Q8_0", vec![3, 64]).unwrap(), 204);
        for (bytes, dtype, shape, part) in [
            (200, "Q8_0", vec![3, 64], "200 bytes"),
            (204, "Q5_0", vec![3, 64], "Q5_0"),
            (204, "Q8_0", vec![64, 3], "[64, 3]"),
        ] {
            let error = check(bytes, dtype, shape).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidExternalData, "{error}");
            assert!(error.message().contains(part), "{error}");
            assert!(error.message().contains("param 0"), "{error}");
        }
    }

    #[test]
    fn params_are_fetched_in_bounded_batches_per_scope() {
        let mut b = ProgramBuilder::new();
        let count = 5usize;
        // 6 MiB each: batches of at most 16 MiB hold two, so five need three gathers.
        let big = (6 << 20) / 4;
        for index in 0..count {
            let scope = if index == 2 { "other" } else { "main" };
            b.param(
                &format!("p{index}"),
                DType::F32,
                vec![Dim::Fixed(big as u64)],
                scope,
                &format!("k{index}"),
            );
        }
        let program = b.into_program();
        let provider = MemoryProvider::new();
        for index in 0..count {
            let scope = if index == 2 { "other" } else { "main" };
            provider.insert(scope, &format!("k{index}"), vec![index as u8; big * 4]);
        }
        let context = BackendInitContext::new().with_parameters(Arc::new(provider));
        let mut seen = Vec::new();
        pollster::block_on(fetch_to_host(&context, &program, |position, bytes| {
            assert_eq!(bytes.len(), big * 4);
            assert!(bytes.iter().all(|&b| b == position as u8));
            seen.push(position);
            Ok(())
        }))
        .unwrap();
        assert_eq!(seen, vec![0, 1, 2, 3, 4]);
    }
}

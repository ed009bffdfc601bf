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
use crate::params::{
    HostBuffer, ParameterProvider, SharedBuffer, SharedProvider, Span, SpanRequest,
};
use crate::program::{BlockFormat, DType, Dim, ParamRef, Program};
use crate::registry::BackendInitContext;
use std::sync::Arc;

/// Largest batch of [`Landing::Staged`] parameters fetched with one `gather` into the staging
/// buffer: bounds the host memory a load stages (the staging buffer stays allocated for the
/// load) while still letting a remote provider coalesce neighbouring parameters into few
/// requests.
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

/// Where a parameter lands ([`ParamSink::place`]).
pub enum Landing {
    /// Through a staging batch (small parameters, batched so that a remote provider coalesces
    /// them into few requests): the sink gets the bytes in [`ParamSink::staged`] and copies
    /// what it keeps.
    Staged,
    /// Straight into `buffer` at `offset`, a buffer of the sink's own that is the
    /// parameter's final home (nothing stops in host memory on the way). Parameters that name
    /// the same buffer are gathered with one provider call.
    Direct {
        /// The destination.
        buffer: SharedBuffer,
        /// Where the parameter starts in it.
        offset: u64,
    },
}

/// A backend's side of [`fetch_params`]: it says where each parameter lands, then takes each
/// one as it arrives.
pub trait ParamSink {
    /// One [`Landing`] per parameter of the program, in `program.params` order (`lengths` are
    /// their checked byte lengths).
    ///
    /// # Errors
    /// The sink's own (e.g. `MemoryAllocationFailed` for a destination it cannot make).
    fn place(&mut self, lengths: &[u64]) -> Result<Vec<Landing>>;

    /// Parameter `position`, placed [`Landing::Staged`], arrived: its bytes, valid for this
    /// call only.
    ///
    /// # Errors
    /// The sink's own.
    fn staged(&mut self, position: usize, bytes: &[u8]) -> Result<()>;

    /// Parameter `position`, placed [`Landing::Direct`], is in its buffer (the fetch holds no
    /// reference to that buffer any more).
    ///
    /// # Errors
    /// The sink's own.
    fn landed(&mut self, position: usize) -> Result<()>;
}

/// Fetches every parameter of `program` where `sink` places it: the [`Landing::Direct`] ones
/// with one `gather` per destination buffer and scope, then the [`Landing::Staged`] ones in
/// batches of at most [`HOST_BATCH_BYTES`] per scope through one reused staging buffer (a
/// larger parameter alone, in a batch of its own size: a sink should place those directly).
///
/// Returns the bytes of host staging the fetch allocated (0 when every parameter landed
/// directly).
///
/// # Errors
/// As [`provider`] and [`check_param`]; provider failures as [`status_error`]; the sink's
/// errors unchanged.
pub async fn fetch_params(
    context: &BackendInitContext,
    program: &Program,
    sink: &mut dyn ParamSink,
) -> Result<u64> {
    let Some(provider) = provider(context, program)? else {
        return Ok(0);
    };
    let mut lengths = Vec::with_capacity(program.params.len());
    for (position, param) in program.params.iter().enumerate() {
        lengths.push(check_param(provider.as_ref(), program, position, param)?);
    }
    let landings = sink.place(&lengths)?;
    if landings.len() != program.params.len() {
        return Err(Error::internal(
            "a parameter sink placed the wrong number of parameters",
        ));
    }
    let mut direct: Vec<(usize, SharedBuffer, u64)> = Vec::new();
    let mut staged = Vec::new();
    for (position, landing) in landings.into_iter().enumerate() {
        match landing {
            Landing::Direct { buffer, offset } => direct.push((position, buffer, offset)),
            Landing::Staged => staged.push(position),
        }
    }
    fetch_direct(provider.as_ref(), program, &lengths, direct, sink).await?;
    fetch_staged(provider.as_ref(), program, &lengths, &staged, sink).await
}

/// The [`Landing::Direct`] parameters: one `gather` per run of parameters with the same buffer
/// and scope (in `program.params` order), then [`ParamSink::landed`] for each.
async fn fetch_direct(
    provider: &dyn ParameterProvider,
    program: &Program,
    lengths: &[u64],
    mut direct: Vec<(usize, SharedBuffer, u64)>,
    sink: &mut dyn ParamSink,
) -> Result<()> {
    while !direct.is_empty() {
        let (first, buffer, _) = &direct[0];
        let scope = program.params[*first].scope.clone();
        let buffer = Arc::clone(buffer);
        let (group, rest): (Vec<_>, Vec<_>) = direct.into_iter().partition(|(position, b, _)| {
            Arc::ptr_eq(b, &buffer) && program.params[*position].scope == scope
        });
        direct = rest;
        let what = describe_param(program, group[0].0, &program.params[group[0].0]);
        let requests: Vec<SpanRequest> = group
            .iter()
            .map(|(position, _, offset)| SpanRequest {
                key: program.params[*position].key.clone(),
                span: Span {
                    parameter_offset: 0,
                    buffer_offset: *offset,
                    length: lengths[*position],
                },
            })
            .collect();
        provider
            .gather(&scope, buffer.as_ref(), &requests)
            .await
            .map_err(|status| status_error(&status, &what))?;
        drop(buffer);
        let positions: Vec<usize> = group.into_iter().map(|(position, _, _)| position).collect();
        for position in positions {
            sink.landed(position)?;
        }
    }
    Ok(())
}

/// The [`Landing::Staged`] parameters (`positions`, ascending), in batches through one
/// staging buffer.
async fn fetch_staged(
    provider: &dyn ParameterProvider,
    program: &Program,
    lengths: &[u64],
    positions: &[usize],
    sink: &mut dyn ParamSink,
) -> Result<u64> {
    let mut staging: Vec<u8> = Vec::new();
    let mut most = 0usize;
    let mut start = 0;
    while start < positions.len() {
        let scope = &program.params[positions[start]].scope;
        let mut end = start;
        let mut total: u64 = 0;
        while end < positions.len()
            && program.params[positions[end]].scope == *scope
            && (end == start || total + lengths[positions[end]] <= HOST_BATCH_BYTES)
        {
            total += lengths[positions[end]];
            end += 1;
        }
        let batch = &positions[start..end];
        let first = batch[0];
        let batch_what = || describe_param(program, first, &program.params[first]);
        staging = resized_staging(staging, total)
            .map_err(|status| status_error(&status, &batch_what()))?;
        most = most.max(staging.capacity());
        let buffer = HostBuffer::from_bytes(staging);
        let mut requests = Vec::with_capacity(batch.len());
        let mut offset = 0u64;
        for &position in batch {
            requests.push(SpanRequest {
                key: program.params[position].key.clone(),
                span: Span {
                    parameter_offset: 0,
                    buffer_offset: offset,
                    length: lengths[position],
                },
            });
            offset += lengths[position];
        }
        let fetched = provider.gather(scope, &buffer, &requests).await;
        staging = buffer.into_bytes();
        fetched.map_err(|status| status_error(&status, &batch_what()))?;
        let mut offset = 0usize;
        for &position in batch {
            // Lengths sum to `total`, the staging length, which fits in memory.
            let length = lengths[position] as usize;
            let chunk = staging.get(offset..offset + length).ok_or_else(|| {
                Error::internal("a parameter batch is shorter than its parameters")
            })?;
            sink.staged(position, chunk)?;
            offset += length;
        }
        start = end;
    }
    Ok(most as u64)
}

/// `staging` holding `length` bytes: reused when its capacity allows, else replaced by a
/// fallibly allocated buffer (the old one freed first).
fn resized_staging(mut staging: Vec<u8>, length: u64) -> crate::params::StatusResult<Vec<u8>> {
    match usize::try_from(length) {
        Ok(length) if length <= staging.capacity() => {
            staging.resize(length, 0);
            Ok(staging)
        }
        _ => {
            drop(staging);
            HostBuffer::zeroed(length).map(HostBuffer::into_bytes)
        }
    }
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
        let mut sink = Recorder::staging_all();
        pollster::block_on(fetch_params(&context, &program, &mut sink)).unwrap();
        assert_eq!(sink.staged.len(), count);
        for (position, bytes) in &sink.staged {
            assert_eq!(bytes.len(), big * 4);
            assert!(bytes.iter().all(|&b| b == *position as u8));
        }
        let order: Vec<usize> = sink.staged.iter().map(|(position, _)| *position).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
    }

    /// Records what arrives; places the parameters named in `direct` into one shared host
    /// buffer, one after another, and stages the rest.
    struct Recorder {
        direct: Vec<usize>,
        buffer: Option<Arc<HostBuffer>>,
        offsets: Vec<(usize, u64, u64)>,
        staged: Vec<(usize, Vec<u8>)>,
        landed: Vec<usize>,
    }

    impl Recorder {
        fn staging_all() -> Self {
            Self::direct(Vec::new())
        }

        fn direct(direct: Vec<usize>) -> Self {
            Self {
                direct,
                buffer: None,
                offsets: Vec::new(),
                staged: Vec::new(),
                landed: Vec::new(),
            }
        }
    }

    impl ParamSink for Recorder {
        fn place(&mut self, lengths: &[u64]) -> Result<Vec<Landing>> {
            let total: u64 = self.direct.iter().map(|&p| lengths[p]).sum();
            let buffer = Arc::new(HostBuffer::zeroed(total).unwrap());
            self.buffer = Some(Arc::clone(&buffer));
            let mut offset = 0;
            Ok((0..lengths.len())
                .map(|position| {
                    if self.direct.contains(&position) {
                        self.offsets.push((position, offset, lengths[position]));
                        let landing = Landing::Direct {
                            buffer: Arc::clone(&buffer) as SharedBuffer,
                            offset,
                        };
                        offset += lengths[position];
                        landing
                    } else {
                        Landing::Staged
                    }
                })
                .collect())
        }

        fn staged(&mut self, position: usize, bytes: &[u8]) -> Result<()> {
            self.staged.push((position, bytes.to_vec()));
            Ok(())
        }

        fn landed(&mut self, position: usize) -> Result<()> {
            self.landed.push(position);
            Ok(())
        }
    }

    #[test]
    fn direct_params_land_in_the_sinks_buffer_and_the_rest_is_staged() {
        let mut b = ProgramBuilder::new();
        for index in 0..4 {
            let scope = if index == 3 { "other" } else { "main" };
            b.param(
                &format!("p{index}"),
                DType::F32,
                vec![Dim::Fixed(3 + index as u64)],
                scope,
                &format!("k{index}"),
            );
        }
        let program = b.into_program();
        let provider = MemoryProvider::new();
        for index in 0..4u8 {
            let scope = if index == 3 { "other" } else { "main" };
            let bytes: Vec<u8> = (0..(3 + index) * 4).map(|i| index * 50 + i).collect();
            provider.insert(scope, &format!("k{index}"), bytes);
        }
        let context = BackendInitContext::new().with_parameters(Arc::new(provider));
        // Two direct parameters of different scopes in one buffer: two gathers.
        let mut sink = Recorder::direct(vec![0, 3]);
        pollster::block_on(fetch_params(&context, &program, &mut sink)).unwrap();
        assert_eq!(sink.landed, vec![0, 3]);
        let staged: Vec<usize> = sink.staged.iter().map(|(p, _)| *p).collect();
        assert_eq!(staged, vec![1, 2]);
        let buffer = Arc::try_unwrap(sink.buffer.take().unwrap())
            .expect("the fetch keeps no reference to the sink's buffer")
            .into_bytes();
        for &(position, offset, length) in &sink.offsets {
            let index = position as u8;
            let want: Vec<u8> = (0..length as u8).map(|i| index * 50 + i).collect();
            assert_eq!(
                &buffer[offset as usize..(offset + length) as usize],
                &want[..]
            );
        }
        for (position, bytes) in &sink.staged {
            let index = *position as u8;
            let want: Vec<u8> = (0..bytes.len() as u8).map(|i| index * 50 + i).collect();
            assert_eq!(bytes, &want);
        }
    }
}

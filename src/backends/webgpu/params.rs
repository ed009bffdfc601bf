//! Resolving a program's parameter references to GPU storage through the init context's
//! parameter provider.
//!
//! For each scope (in first-use order) the backend checks that the provider serves it and that
//! every key it can describe has exactly the byte length its tensor's declared shape and dtype
//! imply, then asks for all of the scope's keys in one `load` into the backend's [`GpuAllocator`], so
//! a streaming provider can coalesce its reads and write bytes straight into GPU buffers.
//! A loaded span is bound in place when it is a GPU buffer of this device at an offset the
//! device can bind; otherwise it is copied: on the GPU when word-aligned, through the host
//! when not (or when the provider ignored the allocator). u8 parameters are widened to one
//! word per element (the kernels' layout) through the host; they are masks, never large.

use crate::backends::webgpu::buffers::{GpuAllocator, GpuBuffer};
use crate::backends::webgpu::device::{GpuContext, share};
use crate::error::{Error, ErrorCode, Result, Status, StatusCode};
use crate::params::{LoadedSpan, ParameterProvider, SharedBuffer, SpanRequest};
use crate::program::{DType, Dim, Program};
use std::sync::Arc;

/// A parameter's bytes on the GPU: a buffer of this device and the offset it starts at.
pub(crate) struct ParamStorage {
    /// The buffer (a [`GpuBuffer`], possibly shared with other parameters).
    pub buffer: SharedBuffer,
    /// Byte offset, a multiple of the device's storage offset alignment.
    pub offset: u64,
    /// Bytes on the GPU.
    pub bytes: u64,
}

impl ParamStorage {
    /// The wgpu buffer behind it.
    ///
    /// # Errors
    /// `Internal` if the buffer is not a [`GpuBuffer`] (resolution only keeps ones that are).
    pub(crate) fn gpu(&self) -> Result<&GpuBuffer> {
        self.buffer
            .as_any()
            .downcast_ref::<GpuBuffer>()
            .ok_or_else(|| Error::internal("a parameter is not in a GPU buffer"))
    }
}

/// An ExecuTorch error for a failed parameter operation, keeping the IREE status in the message.
pub(crate) fn status_error(status: &Status, what: &str) -> Error {
    let code = match status.code() {
        StatusCode::NotFound => ErrorCode::NotFound,
        StatusCode::OutOfRange | StatusCode::DataLoss => ErrorCode::InvalidExternalData,
        StatusCode::ResourceExhausted => ErrorCode::DelegateMemoryAllocationFailed,
        StatusCode::InvalidArgument => ErrorCode::InvalidArgument,
        StatusCode::Unimplemented => ErrorCode::NotSupported,
        StatusCode::PermissionDenied
        | StatusCode::Unauthenticated
        | StatusCode::Unavailable
        | StatusCode::Cancelled
        | StatusCode::Aborted
        | StatusCode::DeadlineExceeded => ErrorCode::AccessFailed,
        _ => ErrorCode::Internal,
    };
    Error::new(code, format!("{what}: {status}"))
}

/// File bytes of a parameter tensor (its declared shape must be fixed).
fn declared_bytes(program: &Program, tensor: u32, key: &str) -> Result<(DType, u64)> {
    let decl = program.tensors.get(tensor as usize).ok_or_else(|| {
        Error::new(
            ErrorCode::InvalidProgram,
            format!("parameter {key:?} names undeclared tensor {tensor}"),
        )
    })?;
    let bytes = decl
        .shape
        .iter()
        .try_fold(decl.dtype.size() as u64, |acc, dim| match dim {
            Dim::Fixed(extent) => acc.checked_mul(*extent).ok_or(()),
            Dim::Symbol(_) => Err(()),
        })
        .map_err(|()| {
            Error::new(
                ErrorCode::InvalidProgram,
                format!(
                    "parameter {key:?} ({}) needs a fixed shape that fits 64 bits",
                    decl.name
                ),
            )
        })?;
    Ok((decl.dtype, bytes))
}

/// Loads every parameter of `program`, in `program.params` order.
///
/// # Errors
/// `NotFound` without a provider, for an unserved scope or a missing key;
/// `InvalidExternalData` when a parameter's length differs from its declaration; provider
/// failures mapped by [`status_error`]; `OutOfResources` for parameters the device cannot bind.
pub(crate) async fn resolve_params(
    ctx: &Arc<GpuContext>,
    program: &Program,
    provider: Option<&Arc<dyn ParameterProvider>>,
) -> Result<Vec<ParamStorage>> {
    if program.params.is_empty() {
        return Ok(Vec::new());
    }
    let provider = provider.ok_or_else(|| {
        Error::not_found(format!(
            "the program references {} parameters but the init context has no parameter provider",
            program.params.len()
        ))
    })?;
    let mut scopes: Vec<&str> = Vec::new();
    for param in &program.params {
        if !scopes.contains(&param.scope.as_str()) {
            scopes.push(&param.scope);
        }
    }
    let allocator = GpuAllocator::new(ctx.clone());
    let mut resolved: Vec<Option<ParamStorage>> = (0..program.params.len()).map(|_| None).collect();
    for scope in scopes {
        if !provider.query_support(scope) {
            return Err(Error::not_found(format!(
                "no parameter provider serves scope {scope:?}"
            )));
        }
        let mut members = Vec::new();
        let mut requests = Vec::new();
        for (slot, param) in program
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| p.scope == scope)
        {
            let (dtype, bytes) = declared_bytes(program, param.tensor, &param.key)?;
            // A provider that already knows the key's length (from its index) lets a wrong
            // length fail before any byte moves; otherwise `load` reports missing keys and
            // short parameters.
            if let Some(info) = provider.describe(scope, &param.key)
                && info.length != bytes
            {
                return Err(Error::new(
                    ErrorCode::InvalidExternalData,
                    format!(
                        "parameter {:?} in {scope:?} has {} bytes; its tensor declares {bytes}",
                        param.key, info.length
                    ),
                ));
            }
            members.push((slot, dtype, bytes));
            requests.push(SpanRequest::whole(param.key.clone(), bytes));
        }
        let spans = provider
            .load(&allocator, scope, &requests)
            .await
            .map_err(|s| status_error(&s, &format!("loading parameters of {scope:?}")))?;
        if spans.len() != requests.len() {
            return Err(Error::internal(format!(
                "the provider returned {} spans for {} requests",
                spans.len(),
                requests.len()
            )));
        }
        for ((slot, dtype, bytes), span) in members.into_iter().zip(spans) {
            let key = &program.params[slot].key;
            if span.length != bytes {
                return Err(Error::new(
                    ErrorCode::InvalidExternalData,
                    format!(
                        "parameter {key:?} loaded {} bytes, expected {bytes}",
                        span.length
                    ),
                ));
            }
            resolved[slot] = Some(place(ctx, span, dtype, key).await?);
        }
    }
    resolved
        .into_iter()
        .map(|p| p.ok_or_else(|| Error::internal("a parameter was not resolved")))
        .collect()
}

fn new_param_buffer(ctx: &Arc<GpuContext>, bytes: u64, key: &str) -> Result<GpuBuffer> {
    GpuBuffer::new(
        ctx,
        bytes,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        key,
    )
    .map_err(|s| status_error(&s, &format!("allocating parameter {key:?}")))
}

/// Makes a loaded span bindable (see the module docs).
async fn place(
    ctx: &Arc<GpuContext>,
    span: LoadedSpan,
    dtype: DType,
    key: &str,
) -> Result<ParamStorage> {
    let max_binding = ctx.limits.max_storage_buffer_binding_size;
    let gpu_bytes = if dtype == DType::U8 {
        span.length.saturating_mul(4)
    } else {
        span.length
    };
    if gpu_bytes > max_binding {
        return Err(Error::new(
            ErrorCode::OutOfResources,
            format!(
                "parameter {key:?} needs {gpu_bytes} bytes; this device binds at most {max_binding}"
            ),
        ));
    }
    let ours = span
        .buffer
        .as_any()
        .downcast_ref::<GpuBuffer>()
        .filter(|b| b.same_device(ctx));
    if dtype != DType::U8
        && let Some(gpu) = ours
    {
        if span.offset.is_multiple_of(ctx.storage_alignment()) {
            return Ok(ParamStorage {
                buffer: span.buffer.clone(),
                offset: span.offset,
                bytes: span.length,
            });
        }
        if span.offset.is_multiple_of(4) && span.length.is_multiple_of(4) {
            let copy = new_param_buffer(ctx, span.length, key)?;
            let mut encoder = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("parameter realign"),
                });
            encoder.copy_buffer_to_buffer(gpu.raw(), span.offset, copy.raw(), 0, span.length);
            ctx.queue.submit([encoder.finish()]);
            return Ok(ParamStorage {
                buffer: share(copy),
                offset: 0,
                bytes: span.length,
            });
        }
    }
    let host = span
        .buffer
        .read(span.offset, span.length)
        .await
        .map_err(|s| status_error(&s, &format!("reading parameter {key:?}")))?;
    let words: Vec<u8> = if dtype == DType::U8 {
        host.iter()
            .flat_map(|&b| u32::from(b).to_le_bytes())
            .collect()
    } else {
        host
    };
    let buffer = new_param_buffer(ctx, words.len() as u64, key)?;
    crate::params::ParameterBuffer::write(&buffer, 0, &words)
        .map_err(|s| status_error(&s, &format!("uploading parameter {key:?}")))?;
    Ok(ParamStorage {
        bytes: words.len() as u64,
        buffer: share(buffer),
        offset: 0,
    })
}

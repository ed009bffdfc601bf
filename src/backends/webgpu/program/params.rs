//! Resolving a program's parameter references to GPU storage through the init context's
//! parameter provider.
//!
//! Every parameter is first checked as every backend checks it (`backends::parameters`: the
//! provider serves the scope, describes the key, and agrees on length, dtype and shape); then,
//! per scope in first-use order, all of the scope's keys are asked for in one `load` into the
//! backend's [`GpuAllocator`], so a streaming provider can coalesce its reads and write bytes straight into GPU buffers.
//! A loaded span is bound in place when it is a GPU buffer of this device at an offset the
//! device can bind; otherwise it is copied: on the GPU when word-aligned, through the host
//! when not (or when the provider ignored the allocator). u8 parameters are widened to one
//! word per element (the kernels' layout) through the host; they are masks, never large.

use crate::backends::parameters::{self, status_error};
use crate::backends::webgpu::buffers::{GpuAllocator, GpuBuffer};
use crate::backends::webgpu::device::{GpuContext, share};
use crate::backends::webgpu::plan;
use crate::error::{Error, Result};
use crate::params::{LoadedSpan, SharedBuffer, SharedProvider, SpanRequest};
use crate::program::{DType, Program};
use std::sync::Arc;

/// A parameter's bytes on the GPU: a buffer of this device and the offset it starts at.
pub(crate) struct ParamStorage {
    /// The buffer (a [`GpuBuffer`], possibly shared with other parameters).
    pub buffer: SharedBuffer,
    /// Byte offset, a multiple of the device's storage offset alignment.
    pub offset: u64,
    /// Bytes on the GPU.
    pub bytes: u64,
    /// Whether it is bound in the very buffer the provider loaded it into (no copy).
    pub in_place: bool,
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

/// Loads every parameter of `program` from `provider` (the init context's, checked by
/// `parameters::provider`), in `program.params` order; at init, and again after a `LowMemory`
/// release or a device loss.
///
/// # Errors
/// As `backends::parameters` (shared by every backend): `NotFound` for an unserved scope or a
/// missing key; `InvalidExternalData` when the provider's length, dtype or
/// shape disagrees with the declaration; provider failures by `status_error`. `OutOfResources`
/// for parameters the device cannot bind.
pub(crate) async fn resolve_params(
    ctx: &Arc<GpuContext>,
    program: &Program,
    provider: Option<&SharedProvider>,
) -> Result<Vec<ParamStorage>> {
    let Some(provider) = provider else {
        return Ok(Vec::new());
    };
    let mut lengths = Vec::with_capacity(program.params.len());
    for (position, param) in program.params.iter().enumerate() {
        lengths.push(parameters::check_param(
            provider.as_ref(),
            program,
            position,
            param,
        )?);
    }
    let mut scopes: Vec<&str> = Vec::new();
    for param in &program.params {
        if !scopes.contains(&param.scope.as_str()) {
            scopes.push(&param.scope);
        }
    }
    let allocator = GpuAllocator::new(ctx.clone());
    let mut resolved: Vec<Option<ParamStorage>> = (0..program.params.len()).map(|_| None).collect();
    for scope in scopes {
        let members: Vec<usize> = (0..program.params.len())
            .filter(|&p| program.params[p].scope == scope)
            .collect();
        let requests: Vec<SpanRequest> = members
            .iter()
            .map(|&p| SpanRequest::whole(program.params[p].key.clone(), lengths[p]))
            .collect();
        let what = || parameters::describe_param(program, members[0], &program.params[members[0]]);
        let spans = provider
            .load(&allocator, scope, &requests)
            .await
            .map_err(|s| {
                status_error(
                    &s,
                    &format!(
                        "loading the parameters of scope {scope:?} ({} first)",
                        what()
                    ),
                )
            })?;
        if spans.len() != requests.len() {
            return Err(Error::internal(format!(
                "the provider returned {} spans for {} requests",
                spans.len(),
                requests.len()
            )));
        }
        for (&position, span) in members.iter().zip(spans) {
            let param = &program.params[position];
            let label = parameters::describe_param(program, position, param);
            if span.length != lengths[position] {
                return Err(Error::invalid_external_data(format!(
                    "{label}: loaded {} bytes, expected {}",
                    span.length, lengths[position]
                )));
            }
            let dtype = program
                .tensors
                .get(param.tensor as usize)
                .map(|t| t.dtype)
                .ok_or_else(|| Error::internal("a parameter names no tensor"))?;
            let limit = if plan::bound_by_rows(program, param.tensor) {
                ctx.limits.max_buffer_size
            } else {
                ctx.limits.max_storage_buffer_binding_size
            };
            resolved[position] = Some(place(ctx, span, dtype, limit, &label).await?);
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
    max_binding: u64,
    key: &str,
) -> Result<ParamStorage> {
    let gpu_bytes = if dtype == DType::U8 {
        span.length.saturating_mul(4)
    } else {
        span.length
    };
    if gpu_bytes > max_binding {
        return Err(Error::out_of_resources(format!(
            "parameter {key:?} needs {gpu_bytes} bytes; this device takes at most {max_binding} \
             for it"
        )));
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
                in_place: true,
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
                in_place: false,
            });
        }
    }
    let host = span
        .buffer
        .read(span.offset, span.length)
        .await
        .map_err(|s| status_error(&s, &format!("reading parameter {key:?}")))?;
    let mut words: Vec<u8> = if dtype == DType::U8 {
        host.iter()
            .flat_map(|&b| u32::from(b).to_le_bytes())
            .collect()
    } else {
        host
    };
    // A block format's bytes need not fill whole words (one Q8_0 block is 34 bytes): pad to 4
    // (GPU writes and storage bindings are whole words).
    words.resize(words.len().next_multiple_of(4), 0);
    let buffer = new_param_buffer(ctx, words.len() as u64, key)?;
    crate::params::ParameterBuffer::write(&buffer, 0, &words)
        .map_err(|s| status_error(&s, &format!("uploading parameter {key:?}")))?;
    Ok(ParamStorage {
        bytes: words.len() as u64,
        buffer: share(buffer),
        offset: 0,
        in_place: false,
    })
}

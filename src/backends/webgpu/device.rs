//! Acquiring an adapter and a device, and the per-device state every other part shares
//! ([`GpuContext`]): queue, limits, features, live-buffer count ([`LiveBuffers`]), pipeline
//! cache, activation-arena bytes and live-program count, and the errors and device loss wgpu
//! reports asynchronously. What programs keep on the device (residency) is not here: the
//! backend owns that registry (`program::residency`).
//!
//! In the browser `navigator.gpu` is checked first and the adapter's identity is read from the
//! page (`browser::gpu`; natively its stub).
//!
//! The device is asked for the adapter's own limits (a device gets the WebGPU defaults otherwise,
//! e.g. a 256 MiB maxBufferSize and a 128 MiB maxStorageBufferBindingSize in Chromium where the
//! adapter allows 1 GiB or more; a real Gemma lm_head is 170 MiB), natively (wgpu's
//! `Adapter::limits`) and in the browser (wgpu reads `GPUAdapter.limits`), and for
//! `timestamp-query`, `shader-f16` and subgroups where the adapter has them (in the browser
//! subgroups through `browser::gpu::with_subgroups_requested`, wgpu not mapping that feature).
//! wgpu's default reaction to an uncaptured device error is a panic, which in WebAssembly kills the
//! module; the context installs a handler that records the error instead, and `init`/`execute` turn
//! recorded errors into `Internal`.
//!
//! [`LimitCaps`] force smaller limits (the backend's `max_storage_binding_bytes` /
//! `max_buffer_bytes` options, for tests of what a smaller device must do): the device is
//! requested with the capped value (never below WebGPU's default, which browsers raise such a
//! request to anyway), and [`GpuContext::limits`], which every check and plan reads, holds the
//! capped value itself, so the cap takes effect the same way natively and in the browser.

use crate::backends::webgpu::adapter::AdapterReport;
use crate::backends::webgpu::pipelines::PipelineCache;
use crate::browser::gpu;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Most device errors kept for the next check.
const MAX_RECORDED_ERRORS: usize = 8;

/// Live buffer count and bytes of one device (every [`GpuBuffer`](super::GpuBuffer) counts
/// itself here while alive).
#[derive(Clone, Debug, Default)]
pub(crate) struct LiveBuffers {
    count: Arc<AtomicUsize>,
    bytes: Arc<AtomicU64>,
}

impl LiveBuffers {
    /// Buffers alive now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Bytes in live buffers.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Counts a new buffer of `bytes`.
    pub(crate) fn created(&self, bytes: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Uncounts a destroyed buffer of `bytes`.
    pub(crate) fn destroyed(&self, bytes: u64) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Errors wgpu reported outside an error scope, and device loss.
#[derive(Clone, Default)]
pub(crate) struct DeviceEvents {
    errors: Arc<Mutex<Vec<String>>>,
    lost: Arc<Mutex<Option<String>>>,
}

impl DeviceEvents {
    fn record_error(&self, message: String) {
        let mut errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        if errors.len() < MAX_RECORDED_ERRORS {
            errors.push(message);
        }
    }

    fn record_loss(&self, message: String) {
        *self.lost.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    }

    fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut *self.errors.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Caps on the limits the backend uses (`None`: the adapter's own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LimitCaps {
    /// Cap on `maxStorageBufferBindingSize`, in bytes.
    pub max_storage_binding: Option<u64>,
    /// Cap on `maxBufferSize`, in bytes.
    pub max_buffer: Option<u64>,
}

/// `value` lowered to at most `max(cap, floor)` (unchanged without a cap).
fn capped(value: u64, cap: Option<u64>, floor: u64) -> u64 {
    cap.map_or(value, |cap| value.min(cap.max(floor)))
}

impl LimitCaps {
    /// What to request of an adapter with `adapter` limits: the adapter's, capped, but never
    /// below WebGPU's defaults (a browser raises such a request to the default anyway).
    pub(crate) fn requested(self, mut adapter: wgpu::Limits) -> wgpu::Limits {
        let defaults = wgpu::Limits::default();
        adapter.max_storage_buffer_binding_size = capped(
            adapter.max_storage_buffer_binding_size,
            self.max_storage_binding,
            defaults.max_storage_buffer_binding_size,
        );
        adapter.max_buffer_size = capped(
            adapter.max_buffer_size,
            self.max_buffer,
            defaults.max_buffer_size,
        );
        adapter
    }

    /// The limits the backend uses on a device with `device` limits: each capped field at most
    /// its cap.
    pub(crate) fn effective(self, mut device: wgpu::Limits) -> wgpu::Limits {
        device.max_storage_buffer_binding_size = capped(
            device.max_storage_buffer_binding_size,
            self.max_storage_binding,
            0,
        );
        device.max_buffer_size = capped(device.max_buffer_size, self.max_buffer, 0);
        device
    }
}

/// One device and everything shared by the programs that run on it.
pub(crate) struct GpuContext {
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// The adapter's identity.
    pub adapter: AdapterReport,
    /// The limits every check and plan uses: the device's (the adapter's, as requested),
    /// lowered to the [`LimitCaps`] it was acquired with.
    pub limits: wgpu::Limits,
    /// The adapter's own limits.
    pub adapter_limits: wgpu::Limits,
    /// The caps the device was acquired with.
    pub caps: LimitCaps,
    /// The optional features the device has (`SUBGROUP` included in the browser, where wgpu
    /// does not request or report it: see `browser::gpu`).
    pub features: wgpu::Features,
    /// With subgroup operations (`features` has `SUBGROUP`), the adapter's smallest subgroup
    /// size (1..=128); `None` without them.
    pub subgroup_min_size: Option<u32>,
    /// Live GPU buffers of this device.
    pub live: LiveBuffers,
    /// Compiled pipelines, shared by every program.
    pub pipelines: PipelineCache,
    /// Activation arena bytes held by live programs.
    pub arena_bytes: AtomicU64,
    /// Live programs (successful `init`s not yet destroyed).
    pub programs: AtomicUsize,
    events: DeviceEvents,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("adapter", &self.adapter)
            .finish_non_exhaustive()
    }
}

impl GpuContext {
    /// Requests an adapter with `power` preference and a device with the adapter's limits,
    /// lowered to `caps`.
    ///
    /// # Errors
    /// A message saying why no device could be had (no WebGPU in this browser, no adapter, the
    /// device request refused).
    pub(crate) async fn acquire(
        power: wgpu::PowerPreference,
        caps: LimitCaps,
    ) -> std::result::Result<Self, String> {
        gpu::check_gpu_reachable()?;
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: power,
                force_fallback_adapter: false,
                compatible_surface: None,
                ..Default::default()
            })
            .await
            .map_err(|e| format!("no GPU adapter: {e}"))?;
        let wanted =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP;
        let features = adapter.features() & wanted;
        let adapter_limits = adapter.limits();
        let request = gpu::with_subgroups_requested(|| {
            adapter.request_device(&wgpu::DeviceDescriptor {
                label: Some("webdelegate"),
                required_features: features,
                required_limits: caps.requested(adapter_limits.clone()),
                ..Default::default()
            })
        });
        let (device, queue) = request
            .await
            .map_err(|e| format!("the adapter refused a device: {e}"))?;
        let info = adapter.get_info();
        // In the browser wgpu does not know "subgroups" (see `browser::gpu`): the raw device tells.
        let mut features = device.features();
        if gpu::has_subgroups(&device) == Some(true) {
            features |= wgpu::Features::SUBGROUP;
        }
        let subgroup_min_size = features
            .contains(wgpu::Features::SUBGROUP)
            .then_some(info.subgroup_min_size.clamp(1, 128));
        let report = AdapterReport::of(&info, &device);
        let events = DeviceEvents::default();
        let sink = events.clone();
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            sink.record_error(error.to_string());
        }));
        let sink = events.clone();
        device.set_device_lost_callback(move |reason, message| {
            sink.record_loss(format!("{reason:?}: {message}"));
        });
        Ok(Self {
            limits: caps.effective(device.limits()),
            adapter_limits,
            caps,
            features,
            subgroup_min_size,
            device,
            queue,
            adapter: report,
            live: LiveBuffers::default(),
            pipelines: PipelineCache::default(),
            arena_bytes: AtomicU64::new(0),
            programs: AtomicUsize::new(0),
            events,
        })
    }

    /// Why the device was lost, if it was.
    pub(crate) fn lost(&self) -> Option<String> {
        self.events.lost()
    }

    /// Fails with what wgpu reported outside error scopes since the last check, or with the
    /// device loss.
    ///
    /// # Errors
    /// `Internal` naming `during` and the first recorded errors; `InvalidState` when the device
    /// was lost.
    pub(crate) fn check_events(&self, during: &str) -> Result<()> {
        if let Some(reason) = self.lost() {
            return Err(Error::invalid_state(format!(
                "the WebGPU device was lost ({reason}) {during}"
            )));
        }
        let errors = self.events.take_errors();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::internal(format!(
                "WebGPU reported {} error(s) {during}: {}",
                errors.len(),
                errors.join("; ")
            )))
        }
    }

    /// Alignment of storage binding offsets (at least 4).
    pub(crate) fn storage_alignment(&self) -> u64 {
        u64::from(self.limits.min_storage_buffer_offset_alignment).max(4)
    }

    /// Alignment of uniform binding offsets (at least 16).
    pub(crate) fn uniform_alignment(&self) -> u64 {
        u64::from(self.limits.min_uniform_buffer_offset_alignment).max(16)
    }

    /// Whether the device can write GPU timestamps at pass boundaries.
    pub(crate) fn has_timestamps(&self) -> bool {
        self.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// Counts a new live program holding `arena` bytes.
    pub(crate) fn program_started(&self) {
        self.programs.fetch_add(1, Ordering::Relaxed);
    }

    /// Uncounts a program (its arena is uncounted when released).
    pub(crate) fn program_ended(&self) {
        self.programs.fetch_sub(1, Ordering::Relaxed);
    }

    /// Destroys the device (as a driver reset would lose it): every buffer on it becomes
    /// unusable and the device-lost callback fires. For testing recovery.
    pub(crate) fn destroy_device(&self) {
        self.device.destroy();
    }
}

/// `Arc::new`, for the backend's GPU objects. The registry and parameter interfaces share
/// values through `Arc` on every platform; in the browser wgpu's objects are not `Send`, and
/// need not be: wasm32 without threads has one thread (see `send_sync::MaybeSendSync`; the
/// crate allows `clippy::arc_with_non_send_sync` on the web once, in `lib.rs`).
pub(crate) fn share<T>(value: T) -> Arc<T> {
    Arc::new(value)
}

/// A device error code for a failed request of the device named in `message`.
pub(crate) fn unavailable(message: &str) -> Error {
    Error::invalid_state(format!("the WebGPU backend has no device: {message}"))
}

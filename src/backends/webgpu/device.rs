//! Acquiring an adapter and a device, and the per-device state every other part shares
//! ([`GpuContext`]): queue, limits, features, live-buffer count, pipeline cache, and the errors
//! and device loss wgpu reports asynchronously.
//!
//! The device is asked for the adapter's own limits (a device gets the WebGPU defaults
//! otherwise, e.g. a 256 MiB maxBufferSize in Chromium where the adapter allows 1 GiB) and for
//! `timestamp-query` and `shader-f16` where the adapter has them. wgpu's default reaction to an
//! uncaptured device error is a panic, which in WebAssembly kills the module; the context
//! installs a handler that records the error instead, and `init`/`execute` turn recorded errors
//! into `Internal`.

use crate::backends::webgpu::adapter::AdapterReport;
use crate::backends::webgpu::buffers::LiveBuffers;
use crate::backends::webgpu::pipelines::PipelineCache;
use crate::backends::webgpu::readback::{oneshot, wait_idle};
use crate::backends::webgpu::residency::Residents;
use crate::error::{Error, ErrorCode, Result};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Most device errors kept for the next check.
const MAX_RECORDED_ERRORS: usize = 8;

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

/// One device and everything shared by the programs that run on it.
pub(crate) struct GpuContext {
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// The adapter's identity.
    pub adapter: AdapterReport,
    /// The device's limits (the adapter's, as requested).
    pub limits: wgpu::Limits,
    /// The optional features the device has.
    pub features: wgpu::Features,
    /// Live GPU buffers of this device.
    pub live: LiveBuffers,
    /// Compiled pipelines, shared by every program.
    pub pipelines: PipelineCache,
    /// Activation arena bytes held by live programs.
    pub arena_bytes: AtomicU64,
    /// Live programs (successful `init`s not yet destroyed).
    pub programs: AtomicUsize,
    /// The GPU state of every live program, for lifecycle signals.
    pub(crate) residents: Residents,
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
    /// Requests an adapter with `power` preference and a device with the adapter's limits.
    ///
    /// # Errors
    /// A message saying why no device could be had (no WebGPU in this browser, no adapter, the
    /// device request refused).
    pub(crate) async fn acquire(power: wgpu::PowerPreference) -> std::result::Result<Self, String> {
        #[cfg(web)]
        check_browser_gpu()?;
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
        let wanted = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SHADER_F16;
        let features = adapter.features() & wanted;
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("webdelegate"),
                required_features: features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| format!("the adapter refused a device: {e}"))?;
        let info = adapter.get_info();
        #[cfg(native)]
        let report = AdapterReport::from_info(&info);
        #[cfg(web)]
        let report = AdapterReport::from_device(&info, &device);
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
            limits: device.limits(),
            features: device.features(),
            device,
            queue,
            adapter: report,
            live: LiveBuffers::default(),
            pipelines: PipelineCache::default(),
            arena_bytes: AtomicU64::new(0),
            programs: AtomicUsize::new(0),
            residents: Residents::default(),
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

    /// Resolves once the GPU has finished the work submitted so far (`writeBuffer` calls
    /// included: an empty submit flushes them natively).
    ///
    /// # Errors
    /// `InvalidState` when the device was lost meanwhile; `Internal` when it cannot be polled.
    pub(crate) async fn submitted_work_done(&self) -> Result<()> {
        let (sender, receiver) = oneshot();
        self.queue.on_submitted_work_done(move || sender.send(()));
        self.queue.submit(std::iter::empty());
        wait_idle(self)?;
        match receiver.await {
            Some(()) => Ok(()),
            None => Err(Error::invalid_state(format!(
                "the WebGPU device dropped its work-done callback ({})",
                self.lost().unwrap_or_else(|| "device lost?".to_owned())
            ))),
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
/// need not be: wasm32 without threads has one thread (see `registry::MaybeSendSync`).
#[cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
pub(crate) fn share<T>(value: T) -> Arc<T> {
    Arc::new(value)
}

/// A device error code for a failed request of the device named in `message`.
pub(crate) fn unavailable(message: &str) -> Error {
    Error::new(
        ErrorCode::InvalidState,
        format!("the WebGPU backend has no device: {message}"),
    )
}

/// `navigator.gpu` must exist in a window or dedicated worker before wgpu touches it (wgpu
/// panics elsewhere, e.g. in a service worker or Node).
#[cfg(web)]
fn check_browser_gpu() -> std::result::Result<(), String> {
    use wasm_bindgen::JsValue;
    let global = js_sys::global();
    let has = |object: &JsValue, key: &str| {
        js_sys::Reflect::get(object, &JsValue::from_str(key))
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_null())
    };
    if has(&global, "Window").is_none() && has(&global, "WorkerGlobalScope").is_none() {
        return Err("WebGPU is reachable only from a window or a dedicated worker".to_owned());
    }
    let navigator = has(&global, "navigator").ok_or("this global has no navigator")?;
    has(&navigator, "gpu").ok_or("navigator.gpu is missing: this browser has no WebGPU")?;
    Ok(())
}

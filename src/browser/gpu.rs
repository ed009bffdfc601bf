//! The browser's WebGPU, where wgpu does not reach: the checks and calls the WebGPU backend
//! makes on the raw JavaScript objects behind wgpu's (`as_webgpu()`), behind plain Rust types.
//!
//! What it promises:
//! - [`check_gpu_reachable`]: `navigator.gpu` exists in a window or a dedicated worker (wgpu
//!   panics elsewhere, e.g. in a service worker or Node), or a message saying what is missing.
//! - [`adapter_facts`]: the identity wgpu leaves empty in the browser, from the page's
//!   `GPUDevice.adapterInfo` (vendor, architecture, device, description, isFallbackAdapter);
//!   empty strings for what the browser does not tell.
//! - [`compile_in_background`]: asks the GPU process to compile kernels with
//!   `createComputePipelineAsync` (off its main thread), so compilation overlaps the weight
//!   download instead of holding the device's queue; [`BackgroundCompile::finish`] waits for
//!   them. Purely an optimisation: every failure is ignored (the backend's checked compile that
//!   follows reports it), and the pipelines wgpu creates afterwards from the same WGSL and
//!   layout are found in the browser's pipeline cache.
//! - [`mapped_bytes`]: the bytes of a mapped read-back range, copied out of its `Uint8Array`.
//! - [`with_subgroups_requested`] and [`has_subgroups`]: wgpu's WebGPU backend maps only the
//!   features it knows to `requiredFeatures` (not `"subgroups"`), so the device request it
//!   makes inside the closure gets `"subgroups"` added where the adapter has it, and the raw
//!   device then says whether it has it.
//!
//! Natively the same API is `gpu_stub` (no background compiler, no browser facts).

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// `navigator.gpu` must exist in a window or dedicated worker before wgpu touches it.
///
/// # Errors
/// A message saying what is missing (no window or worker, no navigator, no `navigator.gpu`).
pub(crate) fn check_gpu_reachable() -> Result<(), String> {
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

/// What the browser tells about the adapter behind a device (`GPUDevice.adapterInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AdapterFacts {
    /// `vendor`, empty when not told.
    pub vendor: String,
    /// `architecture`, empty when not told.
    pub architecture: String,
    /// `device`, empty when not told.
    pub device: String,
    /// `description`, empty when not told.
    pub description: String,
    /// `isFallbackAdapter`, when the browser has it.
    pub fallback: Option<bool>,
}

/// The browser's facts about the adapter of `device` (always `Some` in the browser; fields the
/// browser does not tell are empty).
pub(crate) fn adapter_facts(device: &wgpu::Device) -> Option<AdapterFacts> {
    let adapter_info = device
        .as_webgpu()
        .and_then(|d| js_sys::Reflect::get(d.as_ref(), &JsValue::from_str("adapterInfo")).ok())
        .filter(|v| v.is_object());
    let field = |key: &str| {
        adapter_info
            .as_ref()
            .and_then(|o| js_sys::Reflect::get(o, &JsValue::from_str(key)).ok())
    };
    let text = |key: &str| field(key).and_then(|v| v.as_string()).unwrap_or_default();
    Some(AdapterFacts {
        vendor: text("vendor"),
        architecture: text("architecture"),
        device: text("device"),
        description: text("description"),
        fallback: field("isFallbackAdapter").and_then(|v| v.as_bool()),
    })
}

#[wasm_bindgen(inline_js = r#"
export function precompile_kernel(device, code, storage) {
  try {
    const stage = GPUShaderStage.COMPUTE;
    const entries = [{ binding: 0, visibility: stage, buffer: { type: 'uniform' } }];
    for (let i = 1; i <= storage; i++) entries.push({ binding: i, visibility: stage, buffer: { type: 'storage' } });
    const layout = device.createPipelineLayout({ bindGroupLayouts: [device.createBindGroupLayout({ entries })] });
    const module = device.createShaderModule({ code });
    return device.createComputePipelineAsync({ layout, compute: { module, entryPoint: 'main' } }).then(() => true, () => false);
  } catch (e) {
    return Promise.resolve(false);
  }
}
let original = null;
export function request_subgroups(on) {
  const proto = globalThis.GPUAdapter && GPUAdapter.prototype;
  if (!proto) return;
  if (on && original === null) {
    original = proto.requestDevice;
    proto.requestDevice = function (descriptor) {
      const wanted = descriptor ?? {};
      if (this.features.has('subgroups')) {
        wanted.requiredFeatures = [...(wanted.requiredFeatures ?? []), 'subgroups'];
      }
      return original.call(this, wanted);
    };
  } else if (!on && original !== null) {
    proto.requestDevice = original;
    original = null;
  }
}
export function device_has_subgroups(device) {
  return !!(device && device.features && device.features.has('subgroups'));
}
"#)]
extern "C" {
    fn precompile_kernel(device: &JsValue, code: &str, storage: u32) -> Promise;
    fn request_subgroups(on: bool);
    fn device_has_subgroups(device: &JsValue) -> bool;
}

/// Runs `request` (which must call wgpu's `Adapter::request_device`: wgpu calls the browser's
/// `GPUAdapter.requestDevice` synchronously inside it) with `"subgroups"` added to the
/// request's `requiredFeatures` when the adapter has that feature. The browser's
/// `requestDevice` is wrapped only for the duration of the call (JavaScript runs nothing else
/// meanwhile), so no other device request on the page is touched.
pub(crate) fn with_subgroups_requested<R>(request: impl FnOnce() -> R) -> R {
    request_subgroups(true);
    let result = request();
    request_subgroups(false);
    result
}

/// Whether the browser's device behind `device` has the `"subgroups"` feature (`Some` in the
/// browser).
pub(crate) fn has_subgroups(device: &wgpu::Device) -> Option<bool> {
    Some(
        device
            .as_webgpu()
            .is_some_and(|d| device_has_subgroups(d.as_ref())),
    )
}

/// Kernel compiles running in the GPU process's background.
pub(crate) struct BackgroundCompile {
    pending: Vec<Promise>,
}

impl BackgroundCompile {
    /// Waits for every compile to end (their outcome is ignored: see the module docs).
    pub(crate) async fn finish(self) {
        let _ = futures_util::future::join_all(self.pending.into_iter().map(JsFuture::from)).await;
    }
}

/// Starts compiling each `(WGSL source, storage bindings after the uniform block)` of `kernels`
/// on `device` with `createComputePipelineAsync`. Always `Some` in the browser (empty when the
/// device has no raw WebGPU object); `None` natively, where nothing compiles in the background.
pub(crate) fn compile_in_background(
    device: &wgpu::Device,
    kernels: impl IntoIterator<Item = (String, u32)>,
) -> Option<BackgroundCompile> {
    let pending = match device.as_webgpu() {
        Some(device) => {
            let device: &JsValue = device.as_ref();
            kernels
                .into_iter()
                .map(|(code, storage)| precompile_kernel(device, &code, storage))
                .collect()
        }
        None => Vec::new(),
    };
    Some(BackgroundCompile { pending })
}

/// The bytes of a mapped range (copied out of the browser's `Uint8Array` view of it).
pub(crate) fn mapped_bytes(view: &wgpu::BufferView) -> Vec<u8> {
    view.as_uint8array().to_vec()
}

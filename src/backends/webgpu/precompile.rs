//! Browser only: asks the GPU process to compile a program's kernels with
//! `createComputePipelineAsync` (off its main thread), so compilation overlaps the weight
//! download instead of holding the device's queue: with synchronous creation every
//! `writeBuffer` of the weights waits behind the compiles (measured in headless Chromium on
//! SwiftShader: 17 kernels of all-MiniLM-L6-v2, ~100 ms each, all before the first weight
//! byte). wgpu has no asynchronous pipeline creation; the pipelines it creates afterwards, from
//! the same WGSL and layout, are then found in the browser's pipeline cache.
//!
//! Purely an optimisation: anything that fails here is ignored, and the checked compile that
//! follows (`PipelineCache::compile`) reports it.

use crate::backends::webgpu::device::GpuContext;
use crate::backends::webgpu::kernels::KernelKey;
use crate::backends::webgpu::kernels::source::source;
use js_sys::Promise;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

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
"#)]
extern "C" {
    fn precompile_kernel(device: &JsValue, code: &str, storage: u32) -> Promise;
}

/// Starts compiling every kernel of `keys` that is not cached yet; await the result with
/// [`finish`].
pub(crate) fn start(ctx: &GpuContext, keys: &[KernelKey]) -> Vec<Promise> {
    let Some(device) = ctx.device.as_webgpu() else {
        return Vec::new();
    };
    let device: &JsValue = device.as_ref();
    keys.iter()
        .filter(|key| ctx.pipelines.get(key).is_none())
        .map(|key| precompile_kernel(device, &source(key), key.storage_bindings()))
        .collect()
}

/// Waits for the compiles [`start`] began (their outcome is ignored: see the module docs).
pub(crate) async fn finish(pending: Vec<Promise>) {
    let _ = futures_util::future::join_all(pending.into_iter().map(JsFuture::from)).await;
}

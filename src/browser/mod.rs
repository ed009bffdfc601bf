//! The browser platform: the one place outside `web/` that speaks JavaScript.
//!
//! `web/` is the wasm-bindgen surface JavaScript calls into. This module is the other direction:
//! the browser APIs the runtime itself calls — `fetch` and its streams, the Cache API, timers, the
//! raw WebGPU calls wgpu does not offer (`GPUQueue.writeBuffer` from a JS chunk,
//! `createComputePipelineAsync`, adapter facts, the subgroups feature), and the CPU backend's
//! worker pool (`cpu_pool`, over `cpu_threads/pool.js`). Each submodule wraps one browser API
//! behind plain Rust types; callers above never see `js_sys` / `web_sys` / `wasm_bindgen`. Where
//! native builds need the same names, a submodule has a native stub with the same API, so `cfg` is
//! decided here and not inside callers' functions.

#[cfg(web)]
pub mod cache;
pub mod chunk;
pub mod cpu_pool;
#[cfg(web)]
pub mod fetch;
pub mod timer;

#[cfg(web)]
pub(crate) mod gpu;
#[cfg(native)]
pub(crate) mod gpu_stub;
#[cfg(native)]
pub(crate) use gpu_stub as gpu;

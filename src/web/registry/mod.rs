//! The backend registry from JavaScript: [`api`] (the registry's free functions and
//! `Delegate`, one initialised program on one backend), [`js_backend`] (a backend written in
//! JavaScript as a [`crate::registry::BackendInterface`]), [`defaults`] (`"webgpu"` and `"cpu"`
//! registered at start, `ready()`), [`backends`] (extra instances of the built-in backends),
//! [`named_data`] (ExecuTorch's `NamedDataMap`, as JavaScript backends see it) and `introspect` (`programStats()` / `lastProfile()` of WebGPU delegates).

pub mod api;
pub mod backends;
pub mod defaults;
pub(crate) mod introspect;
pub mod js_backend;
pub mod named_data;

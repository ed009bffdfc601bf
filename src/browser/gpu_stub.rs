//! The native stand-in for `gpu` (the browser's WebGPU): the same API, with nothing of the
//! browser behind it. No page to check, no browser adapter facts (wgpu's own `AdapterInfo`
//! is complete natively), no background compiler (kernels compile when asked), and mapped
//! ranges are plain memory.

/// Natively there is no page whose `navigator.gpu` could be missing.
///
/// # Errors
/// Never.
pub(crate) fn check_gpu_reachable() -> Result<(), String> {
    Ok(())
}

/// What a browser would tell about an adapter (never made natively).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AdapterFacts {
    /// `vendor`.
    pub vendor: String,
    /// `architecture`.
    pub architecture: String,
    /// `device`.
    pub device: String,
    /// `description`.
    pub description: String,
    /// `isFallbackAdapter`.
    pub fallback: Option<bool>,
}

/// `None`: natively wgpu's `AdapterInfo` tells everything.
pub(crate) fn adapter_facts(_device: &wgpu::Device) -> Option<AdapterFacts> {
    None
}

/// Background compiles: none exist natively (the type has no values).
pub(crate) enum BackgroundCompile {}

impl BackgroundCompile {
    /// Nothing to wait for.
    pub(crate) async fn finish(self) {
        match self {}
    }
}

/// `None`: natively nothing compiles in the background (`kernels` is not even read).
pub(crate) fn compile_in_background(
    _device: &wgpu::Device,
    _kernels: impl IntoIterator<Item = (String, u32)>,
) -> Option<BackgroundCompile> {
    None
}

/// The bytes of a mapped range.
pub(crate) fn mapped_bytes(view: &wgpu::BufferView) -> Vec<u8> {
    view.to_vec()
}

/// Runs `request`: natively wgpu requests every feature asked of it, subgroups included.
pub(crate) fn with_subgroups_requested<R>(request: impl FnOnce() -> R) -> R {
    request()
}

/// `None`: natively wgpu's `Device::features` tells.
pub(crate) fn has_subgroups(_device: &wgpu::Device) -> Option<bool> {
    None
}

//! The byte-merge kernel: writes a parameter's unaligned edge bytes into one word (used by the
//! parameter allocator, not by any op).

use crate::backends::webgpu::kernels::Kernel;

const PATCH: &str = include_str!("patch.wgsl");

/// Byte merge into one word (unaligned parameter writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PatchKey;

impl Kernel for PatchKey {
    fn storage_bindings(&self) -> u32 {
        1
    }

    fn invocations(&self) -> u32 {
        1
    }

    fn body(&self) -> String {
        PATCH.to_owned()
    }
}

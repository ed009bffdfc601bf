//! The byte-merge kernel: writes a parameter's unaligned edge bytes into one word (used by the
//! parameter allocator, not by any op).

use crate::backends::webgpu::kernels::{Elem, Field, Kernel, Wgsl};

const PATCH: &str = include_str!("patch.wgsl");

/// The kernel's uniform block.
pub(crate) const PATCH_PARAMS: [Field; 1] = [Field::vec4(
    "head",
    "x: word index within the bound window, y: value, z: byte mask",
)];

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

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::f32();
        w.uniforms(&PATCH_PARAMS);
        w.storage("words", Elem::U32);
        w.push(PATCH);
        w
    }
}

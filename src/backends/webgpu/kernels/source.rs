//! The complete WGSL module of a [`KernelKey`]: the kernel's builder (`wgsl.rs`) finished and
//! checked against the key's binding count, plus the dtype-dependent WGSL expressions several
//! kernels share.

use crate::backends::webgpu::kernels::KernelKey;
use crate::error::{Error, Result};
use crate::program::DType;

/// The complete WGSL module for `key`.
///
/// # Errors
/// `Internal` when the kernel's module is malformed (see `Wgsl::finish`) or declares another
/// number of storage bindings than its key says.
pub(crate) fn source(key: &KernelKey) -> Result<String> {
    let module = key.kernel().wgsl();
    let declared = module.storage_count();
    let expected = key.storage_bindings();
    if declared != expected {
        return Err(Error::internal(format!(
            "kernel {}: its module declares {declared} storage bindings, its key {expected}",
            key.label()
        )));
    }
    module
        .finish()
        .map_err(|e| Error::internal(format!("kernel {}: {}", key.label(), e.message())))
}

/// Invocations per workgroup of a kernel (checked against the device at init).
pub(crate) fn invocations(key: &KernelKey) -> u32 {
    key.kernel().invocations()
}

/// Workgroup memory a kernel declares, in bytes (checked against the device at init).
pub(crate) fn workgroup_storage_bytes(key: &KernelKey) -> u32 {
    key.kernel().workgroup_storage_bytes()
}

/// WGSL expression: element `index` of `buffer` (of `dtype`) as f32.
pub(crate) fn load_f32(dtype: DType, buffer: &str, index: &str) -> String {
    match dtype {
        DType::F32 => format!("{buffer}[{index}]"),
        DType::I32 => format!("f32(bitcast<i32>({buffer}[{index}]))"),
        // Block formats never reach a dense load (validation keeps them to the ops that
        // decode them); read as words like u8.
        DType::U8 | DType::Block(_) => format!("f32({buffer}[{index}])"),
        DType::I64 => {
            format!("i64_to_f32({buffer}[2u * ({index})], {buffer}[2u * ({index}) + 1u])")
        }
    }
}

/// WGSL expression: whether element `index` of `buffer` (of `dtype`) is non-zero.
pub(crate) fn nonzero(dtype: DType, buffer: &str, index: &str) -> String {
    match dtype {
        DType::F32 => format!("{buffer}[{index}] != 0.0"),
        DType::I32 | DType::U8 | DType::Block(_) => format!("{buffer}[{index}] != 0u"),
        DType::I64 => format!("({buffer}[2u * ({index})] | {buffer}[2u * ({index}) + 1u]) != 0u"),
    }
}

//! The complete WGSL module of a [`KernelKey`]: the kernel's `enable` directives, the shared
//! helpers (`common.wgsl`), then the kernel's own body. Kernels specialise their templates by
//! plain text substitution of `{{NAME}}` placeholders (portable across every WebGPU
//! implementation, unlike pipeline-overridable constants in `@workgroup_size`); the
//! substitutions every family shares are here.

use crate::backends::webgpu::kernels::KernelKey;
use crate::program::DType;

const COMMON: &str = include_str!("common.wgsl");

/// The complete WGSL module for `key`.
pub(crate) fn source(key: &KernelKey) -> String {
    let kernel = key.kernel();
    format!("{}{COMMON}\n{}", kernel.enable(), kernel.body())
}

/// Invocations per workgroup of a kernel (checked against the device at init).
pub(crate) fn invocations(key: &KernelKey) -> u32 {
    key.kernel().invocations()
}

/// Workgroup memory a kernel declares, in bytes (checked against the device at init).
pub(crate) fn workgroup_storage_bytes(key: &KernelKey) -> u32 {
    key.kernel().workgroup_storage_bytes()
}

/// `template` with `{{WG}}` replaced by the workgroup size.
pub(crate) fn with_wg(template: &str, wg: u32) -> String {
    template.replace("{{WG}}", &wg.to_string())
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

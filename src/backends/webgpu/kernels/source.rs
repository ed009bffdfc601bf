//! WGSL source for a [`KernelKey`]: the template of its family, specialised by plain text
//! substitution of `{{NAME}}` placeholders (portable across every WebGPU implementation, unlike
//! pipeline-overridable constants in `@workgroup_size`), after the shared helpers.

use crate::backends::webgpu::kernels::{KernelKey, MatMulKernel, UnaryKind, wgsl_word_type};
use crate::program::{BinaryOp, DType};

const COMMON: &str = include_str!("common.wgsl");
const UNARY: &str = include_str!("unary.wgsl");
const BINARY: &str = include_str!("binary.wgsl");
const COPY: &str = include_str!("copy.wgsl");
const MATMUL_TILED: &str = include_str!("matmul_tiled.wgsl");
const MATMUL_NAIVE: &str = include_str!("matmul_naive.wgsl");
const REDUCE: &str = include_str!("reduce.wgsl");
const LAYER_NORM: &str = include_str!("layer_norm.wgsl");
const SOFTMAX: &str = include_str!("softmax.wgsl");
const L2_NORMALIZE: &str = include_str!("l2_normalize.wgsl");
const GATHER: &str = include_str!("gather.wgsl");
const CONVERT: &str = include_str!("convert.wgsl");
const MEAN_POOL: &str = include_str!("mean_pool.wgsl");
const PATCH: &str = include_str!("patch.wgsl");

/// Workgroup shape of a matmul kernel: (threads x, threads y, rows per thread, columns per
/// thread, k tile). Tiled kernels keep 4 columns per thread (one `vec4` accumulator per row).
pub(crate) const fn matmul_geometry(kernel: MatMulKernel) -> (u32, u32, u32, u32, u32) {
    match kernel {
        MatMulKernel::Tiled64 => (16, 8, 8, 4, 16),
        MatMulKernel::Tiled32 => (8, 8, 4, 4, 16),
        MatMulKernel::Naive => (8, 8, 1, 1, 0),
    }
}

/// Workgroup memory a kernel declares, in bytes (checked against the device at init).
pub(crate) fn workgroup_storage_bytes(key: &KernelKey) -> u32 {
    match *key {
        KernelKey::MatMul {
            kernel: kernel @ (MatMulKernel::Tiled64 | MatMulKernel::Tiled32),
            f16,
            ..
        } => {
            let (wgx, wgy, rm, rn, tk) = matmul_geometry(kernel);
            let elements = wgy * rm * tk + tk * wgx * rn;
            elements * if f16 { 2 } else { 4 }
        }
        KernelKey::LayerNorm { wg }
        | KernelKey::Softmax { wg, .. }
        | KernelKey::L2Normalize { wg } => wg * 4,
        _ => 0,
    }
}

/// Invocations per workgroup of a kernel (checked against the device at init).
pub(crate) fn invocations(key: &KernelKey) -> u32 {
    match *key {
        KernelKey::MatMul { kernel, .. } => {
            let (wgx, wgy, ..) = matmul_geometry(kernel);
            wgx * wgy
        }
        KernelKey::Patch => 1,
        KernelKey::Unary { wg, .. }
        | KernelKey::Binary { wg, .. }
        | KernelKey::LayerNorm { wg }
        | KernelKey::Softmax { wg, .. }
        | KernelKey::L2Normalize { wg }
        | KernelKey::Gather { wg, .. }
        | KernelKey::Copy { wg }
        | KernelKey::Cast { wg, .. }
        | KernelKey::Range { wg, .. }
        | KernelKey::MeanPool { wg, .. } => wg,
    }
}

/// The complete WGSL module for `key`.
pub(crate) fn source(key: &KernelKey) -> String {
    let (enable, body) = match *key {
        KernelKey::Unary { op, wg } => ("", with_wg(UNARY, wg).replace("{{EXPR}}", unary_expr(op))),
        KernelKey::Binary { op, wg } => {
            ("", with_wg(BINARY, wg).replace("{{EXPR}}", binary_expr(op)))
        }
        KernelKey::MatMul { kernel, bias, f16 } => matmul_source(kernel, bias, f16),
        KernelKey::LayerNorm { wg } => ("", with_wg(&format!("{REDUCE}\n{LAYER_NORM}"), wg)),
        KernelKey::Softmax { mask, wg } => ("", softmax_source(mask, wg)),
        KernelKey::L2Normalize { wg } => ("", with_wg(&format!("{REDUCE}\n{L2_NORMALIZE}"), wg)),
        KernelKey::Gather { ids, wg } => ("", gather_source(ids, wg)),
        KernelKey::Copy { wg } => ("", with_wg(COPY, wg)),
        KernelKey::Cast { from, to, wg } => (
            "",
            convert_source(
                wg,
                &format!(
                    "@group(0) @binding(1) var<storage, read_write> x: array<{}>;\n\
                     @group(0) @binding(2) var<storage, read_write> out: array<{}>;",
                    wgsl_word_type(from),
                    wgsl_word_type(to)
                ),
                &super::convert::cast_body(from, to),
            ),
        ),
        KernelKey::Range { to, wg } => (
            "",
            convert_source(
                wg,
                &format!(
                    "@group(0) @binding(1) var<storage, read_write> out: array<{}>;",
                    wgsl_word_type(to)
                ),
                &super::convert::range_body(to),
            ),
        ),
        KernelKey::MeanPool { mask, wg } => (
            "",
            with_wg(MEAN_POOL, wg)
                .replace("{{MASK_T}}", wgsl_word_type(mask))
                .replace("{{KEEP}}", &nonzero(mask, "mask", "j")),
        ),
        KernelKey::Patch => ("", PATCH.to_owned()),
    };
    format!("{enable}{COMMON}\n{body}")
}

fn with_wg(template: &str, wg: u32) -> String {
    template.replace("{{WG}}", &wg.to_string())
}

fn unary_expr(op: UnaryKind) -> &'static str {
    match op {
        UnaryKind::Gelu => "gelu(v)",
        UnaryKind::Tanh => "tanh_stable(v)",
        UnaryKind::Relu => "select(0.0, v, v > 0.0)",
        UnaryKind::Scale => "v * scale + bias",
    }
}

fn binary_expr(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "va + vb",
        BinaryOp::Sub => "va - vb",
        BinaryOp::Mul => "va * vb",
        BinaryOp::Div => "va / vb",
    }
}

fn matmul_source(kernel: MatMulKernel, bias: bool, f16: bool) -> (&'static str, String) {
    let (wgx, wgy, rm, rn, tk) = matmul_geometry(kernel);
    let template = match kernel {
        MatMulKernel::Naive => MATMUL_NAIVE,
        MatMulKernel::Tiled64 | MatMulKernel::Tiled32 => MATMUL_TILED,
    };
    let staged_f16 = f16 && kernel != MatMulKernel::Naive;
    let (bias_decl, bias_add) = if bias {
        (
            "@group(0) @binding(4) var<storage, read_write> bias: array<f32>;",
            " + bias[gn]",
        )
    } else {
        ("", "")
    };
    let body = template
        .replace("{{BIAS_DECL}}", bias_decl)
        .replace("{{BIAS_ADD}}", bias_add)
        .replace("{{WGX}}", &wgx.to_string())
        .replace("{{WGY}}", &wgy.to_string())
        .replace("{{RM}}", &rm.to_string())
        .replace("{{RN}}", &rn.to_string())
        .replace("{{TK}}", &tk.to_string())
        .replace("{{A_TILE}}", &(wgy * rm * tk).to_string())
        .replace("{{B_TILE4}}", &(tk * wgx * rn / 4).to_string())
        .replace("{{STAGE}}", if staged_f16 { "f16" } else { "f32" });
    (if staged_f16 { "enable f16;\n" } else { "" }, body)
}

fn softmax_source(mask: Option<DType>, wg: u32) -> String {
    let (decl, add) = match mask {
        Some(dtype) => (
            format!(
                "@group(0) @binding(3) var<storage, read_write> mask: array<{}>;",
                wgsl_word_type(dtype)
            ),
            format!(" + {}", load_f32(dtype, "mask", "mask_index(i)")),
        ),
        None => (String::new(), String::new()),
    };
    with_wg(&format!("{REDUCE}\n{SOFTMAX}"), wg)
        .replace("{{MASK_DECL}}", &decl)
        .replace("{{MASK_ADD}}", &add)
}

fn gather_source(ids: DType, wg: u32) -> String {
    let load = match ids {
        DType::I64 => {
            "    let lo = ids[2u * s];\n    let hi = ids[2u * s + 1u];\n    \
             return vec2<u32>(lo, u32(hi == 0u && lo < p.head.z));"
        }
        DType::I32 => {
            "    let w = ids[s];\n    \
             return vec2<u32>(w, u32(bitcast<i32>(w) >= 0 && w < p.head.z));"
        }
        // u8 is widened to one word; f32 ids are refused before planning.
        DType::U8 | DType::F32 => {
            "    let w = ids[s];\n    return vec2<u32>(w, u32(w < p.head.z));"
        }
    };
    with_wg(GATHER, wg)
        .replace("{{IDS}}", ids.name())
        .replace("{{ID_LOAD}}", load)
}

fn convert_source(wg: u32, bindings: &str, body: &str) -> String {
    with_wg(CONVERT, wg)
        .replace("{{BINDINGS}}", bindings)
        .replace("{{BODY}}", body)
}

/// WGSL expression: element `index` of `buffer` (of `dtype`) as f32.
pub(crate) fn load_f32(dtype: DType, buffer: &str, index: &str) -> String {
    match dtype {
        DType::F32 => format!("{buffer}[{index}]"),
        DType::I32 => format!("f32(bitcast<i32>({buffer}[{index}]))"),
        DType::U8 => format!("f32({buffer}[{index}])"),
        DType::I64 => {
            format!("i64_to_f32({buffer}[2u * ({index})], {buffer}[2u * ({index}) + 1u])")
        }
    }
}

/// WGSL expression: whether element `index` of `buffer` (of `dtype`) is non-zero.
pub(crate) fn nonzero(dtype: DType, buffer: &str, index: &str) -> String {
    match dtype {
        DType::F32 => format!("{buffer}[{index}] != 0.0"),
        DType::I32 | DType::U8 => format!("{buffer}[{index}] != 0u"),
        DType::I64 => format!("({buffer}[2u * ({index})] | {buffer}[2u * ({index}) + 1u]) != 0u"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiled_geometries_fit_the_webgpu_minimum_limits() {
        for kernel in [MatMulKernel::Tiled64, MatMulKernel::Tiled32] {
            let (wgx, wgy, _, rn, tk) = matmul_geometry(kernel);
            assert_eq!(rn, 4, "tiled kernels keep one vec4 of columns per thread");
            assert!(wgx * wgy <= 256 && tk > 0);
            let key = KernelKey::MatMul {
                kernel,
                bias: true,
                f16: false,
            };
            assert!(workgroup_storage_bytes(&key) <= 16384);
            assert!(source(&key).contains("var<workgroup> a_tile"));
        }
    }
}

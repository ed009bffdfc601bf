//! Every kernel variant, rendered and validated by naga (wgpu's WGSL front end and validator)
//! with no device: each key type over a grid of its fields (workgroup sizes, flags, dtypes,
//! weight formats, head dims, splits, f32 and f16 precisions), checked to cover every key the
//! planner produces for the sample programs under every kernel configuration. The test prints
//! `wgsl_kernels_validated = N` (the bench key of that name, `bench/suites/wgsl_kernels.mjs`).

use crate::backends::webgpu::kernels::argmax::ArgmaxKey;
use crate::backends::webgpu::kernels::attention::{AttendCombineKey, AttendKey, KvStoreKey};
use crate::backends::webgpu::kernels::convert::{CastKey, RangeKey};
use crate::backends::webgpu::kernels::elementwise::{BinaryKey, UnaryKey, UnaryKind};
use crate::backends::webgpu::kernels::gather::GatherKey;
use crate::backends::webgpu::kernels::layout::CopyKey;
use crate::backends::webgpu::kernels::linear::{LinearKey, LinearPath};
use crate::backends::webgpu::kernels::matmul::{MatMulKey, MatMulTile};
use crate::backends::webgpu::kernels::patch::PatchKey;
use crate::backends::webgpu::kernels::pool::MeanPoolKey;
use crate::backends::webgpu::kernels::rms_norm::{AddNormKey, RmsNormKey};
use crate::backends::webgpu::kernels::rope::{NormRopeKey, RopeKey};
use crate::backends::webgpu::kernels::rows::{L2NormalizeKey, LayerNormKey, SoftmaxKey};
use crate::backends::webgpu::kernels::sample::SampleKey;
use crate::backends::webgpu::kernels::source::source;
use crate::backends::webgpu::kernels::token_mask::TokenMaskKey;
use crate::backends::webgpu::kernels::wgsl::Float;
use crate::backends::webgpu::kernels::{
    GemvKernel, KernelConfig, KernelKey, MatMulKernel, Precision,
};
use crate::backends::webgpu::plan;
use crate::program::ops::RopeStyle;
use crate::program::{BinaryOp, DType, samples};
use crate::quant::BlockFormat;
use std::collections::HashSet;

/// Workgroup sizes of 1-D kernels (the configured sizes) and of row kernels (those and the
/// short-row 32).
const WGS: [u32; 3] = [64, 128, 256];
const ROW_WGS: [u32; 4] = [32, 64, 128, 256];
/// Row-kernel and attention precisions: the reference, an f16 cache, f16 activations.
const PRECISIONS: [Precision; 3] = [Precision::F32, Precision::KV_F16, Precision::F16];
/// Element types of one binding, and of an (input, output) pair.
const FLOATS: [Float; 2] = [Float::F32, Float::F16];
const FLOAT_PAIRS: [(Float, Float); 4] = [
    (Float::F32, Float::F32),
    (Float::F16, Float::F16),
    (Float::F16, Float::F32),
    (Float::F32, Float::F16),
];
/// The matmul kernels a key can hold (every tile, the first tiled kernel, the naive one).
const MATMUL_KERNELS: [MatMulKernel; 5] = [
    MatMulKernel::Tiled(MatMulTile::T32),
    MatMulKernel::Tiled(MatMulTile::T64),
    MatMulKernel::Tiled(MatMulTile::T128),
    MatMulKernel::TiledV1,
    MatMulKernel::Naive,
];
/// The dense dtypes.
const DENSE: [DType; 4] = [DType::F32, DType::I32, DType::I64, DType::U8];

fn formats() -> impl Iterator<Item = Option<BlockFormat>> {
    std::iter::once(None).chain(BlockFormat::ALL.map(Some))
}

/// Every variant of every kernel over the grid.
fn all_keys() -> Vec<KernelKey> {
    let mut keys: Vec<KernelKey> = vec![PatchKey.into()];
    for precision in PRECISIONS {
        for wg in ROW_WGS {
            keys.push(LayerNormKey { wg, precision }.into());
            keys.push(L2NormalizeKey { wg, precision }.into());
            for mask in std::iter::once(None).chain(DENSE.map(Some)) {
                keys.push(
                    SoftmaxKey {
                        mask,
                        wg,
                        precision,
                    }
                    .into(),
                );
            }
            for weighted in [false, true] {
                for residual in [false, true] {
                    keys.push(
                        RmsNormKey {
                            weighted,
                            wg,
                            residual,
                            precision,
                        }
                        .into(),
                    );
                }
                for first in [None, Some(false), Some(true)] {
                    keys.push(
                        AddNormKey {
                            first,
                            next_weighted: weighted,
                            wg,
                            precision,
                        }
                        .into(),
                    );
                }
            }
            for style in [RopeStyle::Neox, RopeStyle::GptJ] {
                for vec4s in [1, 8, 16, 1024] {
                    for (weighted, two) in [(false, false), (true, false), (true, true)] {
                        keys.push(
                            NormRopeKey {
                                style,
                                vec4s,
                                wg,
                                weighted,
                                two,
                                precision,
                            }
                            .into(),
                        );
                    }
                    keys.push(
                        RopeKey {
                            style,
                            vec4s,
                            wg,
                            precision,
                        }
                        .into(),
                    );
                }
            }
            keys.push(KvStoreKey { wg, precision }.into());
        }
        for d in [32, 64, 128, 256] {
            for splits in [1, 8, 32] {
                keys.push(
                    AttendKey {
                        wg: 64,
                        d,
                        dv: d,
                        splits,
                        precision,
                    }
                    .into(),
                );
                if splits > 1 {
                    keys.push(
                        AttendCombineKey {
                            wg: 64,
                            dv: d,
                            splits,
                            precision,
                        }
                        .into(),
                    );
                }
            }
        }
    }
    for wg in ROW_WGS {
        keys.push(ArgmaxKey { wg }.into());
        keys.push(SampleKey { wg }.into());
    }
    for wg in WGS {
        keys.push(CopyKey { wg }.into());
        keys.push(TokenMaskKey { wg }.into());
        for op in [
            UnaryKind::Gelu,
            UnaryKind::Tanh,
            UnaryKind::Relu,
            UnaryKind::GeluTanh,
            UnaryKind::Silu,
            UnaryKind::Scale,
        ] {
            for gated in [false, true] {
                for (x, out) in FLOAT_PAIRS {
                    keys.push(
                        UnaryKey {
                            op,
                            wg,
                            gated,
                            x,
                            out,
                        }
                        .into(),
                    );
                }
            }
        }
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
            for a in FLOATS {
                for (b, out) in FLOAT_PAIRS {
                    keys.push(
                        BinaryKey {
                            op,
                            wg,
                            floats: [a, b, out],
                        }
                        .into(),
                    );
                }
            }
        }
        for from in DENSE {
            keys.push(RangeKey { to: from, wg }.into());
            keys.push(MeanPoolKey { mask: from, wg }.into());
            for to in DENSE {
                keys.push(CastKey { from, to, wg }.into());
            }
            if from != DType::F32 {
                for table in formats() {
                    let dense = if table.is_none() {
                        &FLOATS[..]
                    } else {
                        &FLOATS[..1]
                    };
                    for &dense in dense {
                        for out in FLOATS {
                            keys.push(
                                GatherKey {
                                    ids: from,
                                    wg,
                                    table,
                                    dense,
                                    out,
                                }
                                .into(),
                            );
                        }
                    }
                }
            }
        }
    }
    for kernel in MATMUL_KERNELS {
        for bias in [false, true] {
            for f16 in [false, true] {
                keys.push(MatMulKey { kernel, bias, f16 }.into());
            }
        }
    }
    let staged = [
        BlockFormat::Q8_0,
        BlockFormat::Q5_0,
        BlockFormat::Q4_K,
        BlockFormat::Q6_K,
    ];
    for format in formats() {
        let mut paths = vec![
            LinearPath::Gemv,
            LinearPath::Rows,
            LinearPath::Tiled,
            LinearPath::Subgroup { rows: 8 },
            LinearPath::Subgroup { rows: 32 },
            LinearPath::Subgroup { rows: 64 },
        ];
        if format.is_some_and(|f| staged.contains(&f)) {
            paths.push(LinearPath::Staged);
        }
        for path in paths {
            for bias in [false, true] {
                for gated in [None, Some(UnaryKind::GeluTanh), Some(UnaryKind::Silu)] {
                    for (act, out) in FLOAT_PAIRS {
                        keys.push(
                            LinearKey {
                                path,
                                format,
                                bias,
                                gated,
                                act,
                                out,
                            }
                            .into(),
                        );
                    }
                }
            }
        }
    }
    keys
}

/// Every kernel configuration the backend can choose (compile specs x adapters).
fn configs() -> Vec<KernelConfig> {
    let mut out = Vec::new();
    for workgroup_size in WGS {
        for matmul in [
            MatMulKernel::Auto(MatMulTile::T128),
            MatMulKernel::Auto(MatMulTile::T32),
            MatMulKernel::TiledV1,
            MatMulKernel::Naive,
        ] {
            for gemv in [
                GemvKernel::Rows,
                GemvKernel::Workgroup,
                GemvKernel::Staged,
                GemvKernel::Subgroup,
            ] {
                for (f16, fusion, splits) in [(false, true, 1), (true, false, 32)] {
                    out.push(KernelConfig {
                        workgroup_size,
                        matmul,
                        f16,
                        kv_f16: f16,
                        act_f16: f16,
                        gemv,
                        subgroup_min_size: Some(8),
                        attention_splits: splits,
                        fusion,
                    });
                }
            }
        }
    }
    out
}

/// naga's verdict on `text`.
fn validate(text: &str) -> Result<naga::Module, String> {
    let module = naga::front::wgsl::parse_str(text).map_err(|e| e.emit_to_string(text))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| format!("{e:?}"))?;
    Ok(module)
}

#[test]
fn naga_refuses_what_a_device_would() {
    assert!(validate("fn f() -> f32 { return 1u; }").is_err());
    assert!(
        validate("fn f() -> f16 { return 1.0h; }").is_err(),
        "f16 without enable"
    );
    assert!(validate("enable f16;\nfn f() -> f16 { return 1.0h; }").is_ok());
}

#[test]
fn every_kernel_variant_is_valid_wgsl() {
    let keys = all_keys();
    let labels: HashSet<String> = keys.iter().map(KernelKey::label).collect();
    assert_eq!(labels.len(), keys.len(), "the grid repeats a key");

    // The grid covers every key the planner produces for the sample programs.
    let programs = [
        samples::encoder(samples::EncoderShape {
            layers: 1,
            ..Default::default()
        })
        .unwrap(),
        samples::matmul(8, 16, 32, true).unwrap(),
        samples::matmul(1, 16, 32, false).unwrap(),
    ];
    let mut planned = 0;
    for config in configs() {
        for program in &programs {
            for key in plan::kernel_keys(program, config) {
                planned += 1;
                assert!(
                    labels.contains(&key.label()),
                    "the planner's {key:?} is not in the grid"
                );
            }
        }
    }
    assert!(planned > 0);

    let mut failures = Vec::new();
    let mut f16 = 0;
    for key in &keys {
        let text = match source(key) {
            Ok(text) => text,
            Err(e) => {
                failures.push(format!("{key:?}: {}", e.message()));
                continue;
            }
        };
        f16 += usize::from(text.contains("enable f16;"));
        match validate(&text) {
            Ok(module) => {
                // Bindings are exactly group 0, 0..=n: the layout the pipeline cache builds.
                let mut bindings: Vec<u32> = module
                    .global_variables
                    .iter()
                    .filter_map(|(_, var)| var.binding.as_ref())
                    .inspect(|b| assert_eq!(b.group, 0, "{key:?}"))
                    .map(|b| b.binding)
                    .collect();
                bindings.sort_unstable();
                let expected: Vec<u32> = (0..=key.storage_bindings()).collect();
                if bindings != expected {
                    failures.push(format!("{key:?}: bindings {bindings:?}"));
                }
            }
            Err(e) => failures.push(format!("{key:?}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} variants fail:\n{}",
        failures.len(),
        keys.len(),
        failures.join("\n\n")
    );
    assert!(f16 > 0);
    println!(
        "wgsl_kernels_validated = {} ({f16} with f16; {planned} planner keys covered)",
        keys.len()
    );
}

//! Compile specs (and runtime specs from load options) the WebGPU backend honours, and the
//! [`KernelConfig`] they select on a given device.
//!
//! | key              | values                         | effect                                   |
//! |------------------|--------------------------------|------------------------------------------|
//! | `workgroup_size` | power of two, 1..=1024         | preferred invocations per workgroup for element-wise and row kernels (default 256, clamped to the device); below 256 `matmul_kernel = tiled` keeps to 32 x 32 tiles (64 invocations) |
//! | `precision`      | `auto` (default), `f32`, `f16` | `f16` stores the KV cache in f16 (attention's caches; scores, softmax and sums stay f32), stores the activation arena's float intermediates in f16 where every kernel touching them has an f16 form (`plan::f16_activations`; reductions, norms, softmax and dot products accumulate in f32; program inputs, outputs, weights stay f32) and stages matmul tiles in f16 (accumulation stays f32); `NotSupported` on devices without shader-f16. `auto` is `f16` on a real GPU with shader-f16 and `f32` elsewhere (a fallback, CPU-emulated adapter, or no shader-f16): f32 stays the reference |
//! | `matmul_kernel`  | `tiled` (default), `tiled32`, `tiled64`, `tiled128`, `tiled_v1`, `naive` | `tiled` is the register-tiled GEMM with the output tile picked per product (the largest of 128 x 128, 64 x 64 and 32 x 32 the device and `workgroup_size` allow that still gives >= 256 workgroups, else 32 x 32); `tiled32`/`tiled64`/`tiled128` fix the tile; `tiled_v1` is the first tiled kernel and `naive` one thread per output, the baselines benchmarks compare against |
//! | `fusion`         | `on` (default), `off`          | `on` runs neighbouring ops as one dispatch where `fusion.rs` allows it (an RMSNorm with the add or rope that alone reads it (the queries' and keys' pairs together), a residual add with the RMSNorm that reads its sum, an activation with the product that alone reads it, and that product with the linear that alone reads it); `off` dispatches every op alone (for A/B measurements) |
//! | `attention_splits` | `auto` (default), 1..=64    | attention over few (head, row) pairs (fewer than 64 workgroups: decode) splits each pair's visible positions across this many workgroups and combines them in a second dispatch; `auto` is 32 on a real GPU and 1 (no split) on a fallback (CPU) adapter |
//! | `gemv_kernel`    | `auto` (default), `rows`, `workgroup`, `staged`, `subgroup` | the `linear` GEMV (one activation row): `rows` is barrier-free, 8 output rows per invocation (for adapters that emulate the GPU on the CPU, where workgroup barriers are costly); `workgroup` is the workgroup-reduction kernel (for real GPUs); `subgroup` gives each subgroup whole rows summed by `subgroupAdd` (`NotSupported` on a device without subgroup operations); `staged` is `workgroup` with the weights' blocks staged in workgroup memory by coalesced word loads and dotted whole (Q8_0, Q5_0, Q4_K, Q6_K; the other formats run `workgroup`; not yet measured on a GPU, so never chosen by `auto`); `auto` picks `rows` on a fallback (CPU) adapter, else `subgroup` where the device has subgroups, else `workgroup` |
//!
//! Compile spec values are UTF-8 text; runtime specs may also be integers (`workgroup_size`).
//! Runtime specs override compile specs. Keys are checked as every backend checks them
//! (`backends::compile_specs`): an unknown or repeated key is `InvalidArgument` naming it: a spec
//! nobody reads is a mistake the user should hear about.

use crate::backends::compile_specs::{CompileSpecs, PRECISION, Precision, check_runtime_specs};
use crate::backends::webgpu::device::GpuContext;
use crate::backends::webgpu::kernels::matmul::{MatMulKey, MatMulTile, matmul_workgroup};
use crate::backends::webgpu::kernels::source::workgroup_storage_bytes;
use crate::backends::webgpu::kernels::{GemvKernel, KernelConfig, KernelKey, MatMulKernel};
use crate::error::{Error, Result};
use crate::registry::{BackendOption, CompileSpec, OptionValue};

/// The backend's name in spec error messages.
const BACKEND: &str = "webgpu";

/// Spec key: preferred workgroup size.
pub const SPEC_WORKGROUP_SIZE: &str = "workgroup_size";
/// Spec key: `auto`, `f32` or `f16` (shared with every backend).
pub const SPEC_PRECISION: &str = PRECISION;
/// Spec key: `tiled`, `tiled32`, `tiled64`, `tiled128`, `tiled_v1` or `naive`.
pub const SPEC_MATMUL_KERNEL: &str = "matmul_kernel";
/// Spec key: `auto`, `rows`, `workgroup`, `staged` or `subgroup` (the `linear` GEMV kernel).
pub const SPEC_GEMV_KERNEL: &str = "gemv_kernel";
/// Spec key: `auto` or a count 1..=64 (attention's split of the visible positions).
pub const SPEC_ATTENTION_SPLITS: &str = "attention_splits";
/// Spec key: `on` or `off` (neighbouring ops fused into one dispatch).
pub const SPEC_FUSION: &str = "fusion";

/// Every spec key the backend reads.
pub const SPEC_KEYS: [&str; 6] = [
    SPEC_WORKGROUP_SIZE,
    SPEC_PRECISION,
    SPEC_MATMUL_KERNEL,
    SPEC_GEMV_KERNEL,
    SPEC_ATTENTION_SPLITS,
    SPEC_FUSION,
];

/// Most workgroups one (head, row) pair of attention is split across.
pub const MAX_ATTENTION_SPLITS: u32 = 64;
/// Splits under `attention_splits = auto` on a real GPU.
const AUTO_ATTENTION_SPLITS: u32 = 32;

/// The specs given for one program, parsed but not yet fitted to a device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Specs {
    workgroup_size: Option<u32>,
    /// The precision asked for (`auto` unless given).
    precision: Precision,
    /// The matmul kernel, or `None` for `tiled` (the tile picked per product).
    matmul: Option<MatMulKernel>,
    /// The GEMV kernel, or `None` for the adapter's choice.
    gemv: Option<GemvKernel>,
    /// Attention splits, or `None` for the adapter's choice.
    attention_splits: Option<u32>,
    /// Whether fusion is off (`fusion = off`).
    no_fusion: bool,
}

fn bad_value(key: &str, value: &str, expected: &str) -> Error {
    Error::invalid_argument(format!("spec {key}={value:?}: expected {expected}"))
}

fn apply(specs: &mut Specs, key: &str, text: &str) -> Result<()> {
    let text = text.trim();
    match key {
        SPEC_WORKGROUP_SIZE => {
            let size = text
                .parse::<u32>()
                .ok()
                .filter(|s| s.is_power_of_two() && *s <= 1024)
                .ok_or_else(|| bad_value(key, text, "a power of two from 1 to 1024"))?;
            specs.workgroup_size = Some(size);
        }
        SPEC_PRECISION => specs.precision = Precision::parse(text)?,
        SPEC_MATMUL_KERNEL => {
            specs.matmul = match text {
                "tiled" => None,
                "tiled32" => Some(MatMulKernel::Tiled(MatMulTile::T32)),
                "tiled64" => Some(MatMulKernel::Tiled(MatMulTile::T64)),
                "tiled128" => Some(MatMulKernel::Tiled(MatMulTile::T128)),
                "tiled_v1" => Some(MatMulKernel::TiledV1),
                "naive" => Some(MatMulKernel::Naive),
                _ => {
                    return Err(bad_value(
                        key,
                        text,
                        "tiled, tiled32, tiled64, tiled128, tiled_v1 or naive",
                    ));
                }
            }
        }
        SPEC_GEMV_KERNEL => {
            specs.gemv = match text {
                "auto" => None,
                "rows" => Some(GemvKernel::Rows),
                "workgroup" => Some(GemvKernel::Workgroup),
                "staged" => Some(GemvKernel::Staged),
                "subgroup" => Some(GemvKernel::Subgroup),
                _ => {
                    return Err(bad_value(
                        key,
                        text,
                        "auto, rows, workgroup, staged or subgroup",
                    ));
                }
            }
        }
        SPEC_FUSION => {
            specs.no_fusion = match text {
                "on" => false,
                "off" => true,
                _ => return Err(bad_value(key, text, "on or off")),
            }
        }
        SPEC_ATTENTION_SPLITS => {
            specs.attention_splits = if text == "auto" {
                None
            } else {
                let splits = text
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_ATTENTION_SPLITS).contains(n))
                    .ok_or_else(|| bad_value(key, text, "auto or a count from 1 to 64"))?;
                Some(splits)
            }
        }
        _ => return Err(Error::internal(format!("unhandled spec key {key}"))),
    }
    Ok(())
}

/// Parses compile specs, then runtime specs (which win), with the checks every backend applies
/// (`backends::compile_specs`: unknown or repeated keys are `InvalidArgument` naming them).
///
/// # Errors
/// `InvalidArgument` naming every unknown key, a repeated key, or a value that does not parse.
pub(crate) fn parse_specs(compile: &[CompileSpec], runtime: &[BackendOption]) -> Result<Specs> {
    let checked = CompileSpecs::new(BACKEND, compile, &SPEC_KEYS)?;
    check_runtime_specs(BACKEND, runtime, &SPEC_KEYS)?;
    let mut specs = Specs::default();
    for key in SPEC_KEYS {
        if let Some(text) = checked.text(key)? {
            apply(&mut specs, key, text)?;
        }
    }
    for option in runtime {
        let text = match option.value() {
            OptionValue::String(text) => text.clone(),
            OptionValue::Int(number) => number.to_string(),
            OptionValue::Bool(flag) => flag.to_string(),
        };
        apply(&mut specs, option.key(), &text)?;
    }
    Ok(specs)
}

/// The largest power of two that is at most `limit` (and at least 1).
fn floor_pow2(limit: u32) -> u32 {
    if limit == 0 {
        1
    } else {
        1 << (31 - limit.leading_zeros())
    }
}

fn fits(ctx: &GpuContext, key: &KernelKey, wgx: u32, wgy: u32) -> bool {
    let l = &ctx.limits;
    wgx * wgy <= l.max_compute_invocations_per_workgroup
        && wgx <= l.max_compute_workgroup_size_x
        && wgy <= l.max_compute_workgroup_size_y
        && workgroup_storage_bytes(key) <= l.max_compute_workgroup_storage_size
}

/// Whether `precision` computes in f16 on a device with (`has_f16`) or without shader-f16,
/// that is (`fallback`) or is not a CPU-emulated adapter.
///
/// # Errors
/// `NotSupported` for `f16` without shader-f16.
fn f16_chosen(precision: Precision, has_f16: bool, fallback: bool) -> Result<bool> {
    match precision {
        Precision::F32 => Ok(false),
        Precision::F16 if has_f16 => Ok(true),
        Precision::F16 => Err(Error::not_supported(
            "precision=f16 needs the shader-f16 feature, which this device lacks",
        )),
        // A fallback adapter (lavapipe, SwiftShader) may expose shader-f16, but it emulates f16
        // on a CPU: no bandwidth is saved, and f32 stays the reference there.
        Precision::Auto => Ok(has_f16 && !fallback),
    }
}

/// The matmul kernel of `specs` on the device of `ctx`: a named one where it fits, else for
/// `tiled` the largest tile that fits the device and `workgroup_size`.
///
/// # Errors
/// `NotSupported` when the named kernel, or even the smallest tile, does not fit the device.
fn matmul_kernel(
    specs: &Specs,
    ctx: &GpuContext,
    workgroup_size: u32,
    f16: bool,
) -> Result<MatMulKernel> {
    let fit = |kernel: MatMulKernel| {
        let (wgx, wgy) = matmul_workgroup(kernel);
        let key = KernelKey::new(MatMulKey {
            kernel,
            bias: true,
            f16,
        });
        fits(ctx, &key, wgx, wgy)
    };
    match specs.matmul {
        Some(kernel) if fit(kernel) => Ok(kernel),
        Some(kernel) => Err(Error::not_supported(format!(
            "matmul kernel {kernel:?} exceeds this device's workgroup limits"
        ))),
        None => MatMulTile::LARGEST_FIRST
            .into_iter()
            .find(|&tile| {
                let (wgx, wgy) = matmul_workgroup(MatMulKernel::Tiled(tile));
                (tile == MatMulTile::T32 || wgx * wgy <= workgroup_size)
                    && fit(MatMulKernel::Tiled(tile))
            })
            .map(MatMulKernel::Auto)
            .ok_or_else(|| {
                Error::not_supported(
                    "this device's workgroup limits are below the smallest matmul kernel (8 x 8)",
                )
            }),
    }
}

/// Fits `specs` to the device of `ctx`.
///
/// # Errors
/// `NotSupported` for `precision=f16` on a device without shader-f16 (as [`f16_chosen`]),
/// `gemv_kernel=subgroup` on a device without subgroup operations, or a device too small
/// for even the smallest matmul tiling.
pub(crate) fn kernel_config(specs: &Specs, ctx: &GpuContext) -> Result<KernelConfig> {
    let limits = &ctx.limits;
    let device_max = floor_pow2(
        limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x),
    );
    let workgroup_size = specs.workgroup_size.unwrap_or(256).min(device_max);
    let f16 = f16_chosen(
        specs.precision,
        ctx.features.contains(wgpu::Features::SHADER_F16),
        ctx.adapter.fallback,
    )?;
    let matmul = matmul_kernel(specs, ctx, workgroup_size, f16)?;
    // A fallback adapter emulates the GPU on the CPU (SwiftShader, lavapipe): there a workgroup
    // barrier is a switch between the invocations' fibers, so the GEMV avoids them.
    // A real GPU with subgroup operations sums each output row within one subgroup.
    let subgroups = ctx.subgroup_min_size.is_some();
    let gemv = specs.gemv.unwrap_or(if ctx.adapter.fallback {
        GemvKernel::Rows
    } else if subgroups {
        GemvKernel::Subgroup
    } else {
        GemvKernel::Workgroup
    });
    if gemv == GemvKernel::Subgroup && !subgroups {
        return Err(Error::not_supported(
            "gemv_kernel=subgroup needs subgroup operations, which this device lacks",
        ));
    }
    // A decode step's attention is a few (head, row) pairs, one workgroup each: on a GPU of
    // many compute units most would idle, so their positions are split (see
    // kernels/attention.rs); an emulating adapter has a few CPU cores, which those pairs fill.
    let attention_splits = specs.attention_splits.unwrap_or(if ctx.adapter.fallback {
        1
    } else {
        AUTO_ATTENTION_SPLITS
    });
    Ok(KernelConfig {
        workgroup_size,
        matmul,
        f16,
        kv_f16: f16,
        act_f16: f16,
        gemv,
        subgroup_min_size: ctx.subgroup_min_size,
        attention_splits,
        fusion: !specs.no_fusion,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn unknown_keys_are_all_named() {
        let specs = [
            CompileSpec::new("precision", "f32"),
            CompileSpec::new("tile", "8"),
            CompileSpec::new("fast", "yes"),
        ];
        let err = parse_specs(&specs, &[]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument);
        assert!(err.message().contains("\"tile\"") && err.message().contains("\"fast\""));
        let twice = [
            CompileSpec::new("precision", "f32"),
            CompileSpec::new("precision", "f32"),
        ];
        assert!(
            parse_specs(&twice, &[])
                .unwrap_err()
                .message()
                .contains("more than once")
        );
        let runtime = [BackendOption::new("bogus", true).unwrap()];
        assert!(
            parse_specs(&[], &runtime)
                .unwrap_err()
                .message()
                .contains("bogus")
        );
    }

    #[test]
    fn auto_precision_is_f16_only_on_a_real_gpu_with_shader_f16() {
        assert!(f16_chosen(Precision::Auto, true, false).unwrap());
        assert!(!f16_chosen(Precision::Auto, true, true).unwrap());
        assert!(!f16_chosen(Precision::Auto, false, false).unwrap());
        assert!(!f16_chosen(Precision::F32, true, false).unwrap());
        assert!(f16_chosen(Precision::F16, true, true).unwrap());
        let refused = f16_chosen(Precision::F16, false, false).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::NotSupported);
        let spec = [CompileSpec::new(SPEC_PRECISION, "auto")];
        assert_eq!(parse_specs(&spec, &[]).unwrap().precision, Precision::Auto);
        let spec = [CompileSpec::new(SPEC_PRECISION, "f16")];
        assert_eq!(parse_specs(&spec, &[]).unwrap().precision, Precision::F16);
    }

    #[test]
    fn values_are_checked_and_runtime_wins() {
        for bad in ["0", "100", "2048", "x"] {
            let spec = [CompileSpec::new(SPEC_WORKGROUP_SIZE, bad)];
            assert_eq!(
                parse_specs(&spec, &[]).unwrap_err().code(),
                ErrorCode::InvalidArgument,
                "{bad}"
            );
        }
        let err = parse_specs(&[CompileSpec::new(SPEC_PRECISION, "f8")], &[]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument);
        let not_utf8 = [CompileSpec::new(SPEC_MATMUL_KERNEL, vec![0xff, 0xfe])];
        assert!(parse_specs(&not_utf8, &[]).is_err());
        let specs = parse_specs(
            &[
                CompileSpec::new(SPEC_WORKGROUP_SIZE, "64"),
                CompileSpec::new(SPEC_MATMUL_KERNEL, "naive"),
            ],
            &[BackendOption::new(SPEC_WORKGROUP_SIZE, 128).unwrap()],
        )
        .unwrap();
        assert_eq!(specs.workgroup_size, Some(128));
        assert_eq!(specs.matmul, Some(MatMulKernel::Naive));
        assert_eq!(specs.precision, Precision::Auto);
        for (text, want) in [
            ("tiled", None),
            ("tiled32", Some(MatMulKernel::Tiled(MatMulTile::T32))),
            ("tiled64", Some(MatMulKernel::Tiled(MatMulTile::T64))),
            ("tiled128", Some(MatMulKernel::Tiled(MatMulTile::T128))),
            ("tiled_v1", Some(MatMulKernel::TiledV1)),
        ] {
            let spec = [CompileSpec::new(SPEC_MATMUL_KERNEL, text)];
            assert_eq!(parse_specs(&spec, &[]).unwrap().matmul, want, "{text}");
        }
        let err = parse_specs(&[CompileSpec::new(SPEC_MATMUL_KERNEL, "fast")], &[]).unwrap_err();
        assert!(
            err.message()
                .contains("tiled, tiled32, tiled64, tiled128, tiled_v1 or naive"),
            "{err}"
        );
        assert_eq!(specs.gemv, None);
        for (text, want) in [
            ("rows", Some(GemvKernel::Rows)),
            ("workgroup", Some(GemvKernel::Workgroup)),
            ("staged", Some(GemvKernel::Staged)),
            ("subgroup", Some(GemvKernel::Subgroup)),
            ("auto", None),
        ] {
            let spec = [CompileSpec::new(SPEC_GEMV_KERNEL, text)];
            assert_eq!(parse_specs(&spec, &[]).unwrap().gemv, want, "{text}");
        }
        let spec = [CompileSpec::new(SPEC_GEMV_KERNEL, "warp")];
        let err = parse_specs(&spec, &[]).unwrap_err();
        assert!(
            err.message()
                .contains("auto, rows, workgroup, staged or subgroup"),
            "{err}"
        );
        for (text, want) in [
            ("auto", None),
            ("1", Some(1)),
            ("64", Some(64)),
            ("7", Some(7)),
        ] {
            let spec = [CompileSpec::new(SPEC_ATTENTION_SPLITS, text)];
            let got = parse_specs(&spec, &[]).unwrap().attention_splits;
            assert_eq!(got, want, "{text}");
        }
        for text in ["0", "65", "-1", "many"] {
            let spec = [CompileSpec::new(SPEC_ATTENTION_SPLITS, text)];
            let err = parse_specs(&spec, &[]).unwrap_err();
            assert!(err.message().contains("from 1 to 64"), "{text}: {err}");
        }
        for (text, off) in [("on", false), ("off", true)] {
            let spec = [CompileSpec::new(SPEC_FUSION, text)];
            assert_eq!(parse_specs(&spec, &[]).unwrap().no_fusion, off, "{text}");
        }
        let err = parse_specs(&[CompileSpec::new(SPEC_FUSION, "yes")], &[]).unwrap_err();
        assert!(err.message().contains("on or off"), "{err}");
    }

    #[test]
    fn floor_pow2_rounds_down() {
        assert_eq!(floor_pow2(256), 256);
        assert_eq!(floor_pow2(1000), 512);
        assert_eq!(floor_pow2(1), 1);
        assert_eq!(floor_pow2(0), 1);
    }
}

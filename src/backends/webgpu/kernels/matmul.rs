//! `MatMul` on the GPU: shapes, transposes as strides, batch broadcasting, the grid, and the
//! kernels: the register-tiled GEMM (`matmul_tiled.wgsl`, three output tiles, the default), the
//! first tiled kernel (`matmul_tiled_v1.wgsl`, the benchmarks' baseline) and the naive one
//! (`matmul_naive.wgsl`).
//!
//! The register-tiled kernel (see `docs/decisions/0053-register-tiled-gemm.md`): each invocation
//! accumulates 4 x 4 outputs (8 x 8 in the 128 x 128 tile) in `vec4<f32>` registers from tiles of
//! A and B staged in workgroup memory as `vec4`s, padded rows, with the step over one k unrolled
//! by [`MatMulKey::wgsl`] (the accumulators are named registers, never an indexed array).
//! [`MatMulTile`] gives the three geometries: 32 x 32 outputs over 8 x 8 invocations, 64 x 64
//! over 16 x 16, 128 x 128 over 16 x 16; all fit WebGPU's default limits (256 invocations,
//! 16 KiB of workgroup memory). Under `matmul_kernel = tiled` (the default) each product takes
//! the largest tile the program allows that still gives at least [`AUTO_MIN_WORKGROUPS`]
//! workgroups, else 32 x 32 ([`pick_tile`]): big products get the most reuse per load, small
//! ones still fill the GPU.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::wgsl::{Float, fill};
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, MatMulKernel,
    PlanContext, Uniforms, Wgsl, coalesce, to_u32,
};
use crate::error::{Error, ErrorCode, Result};
use crate::program::TensorDecl;
use crate::program::geometry::broadcast_strides;
use crate::program::ops::MatMul;
use std::fmt::Write as _;

const MATMUL_TILED: &str = include_str!("matmul_tiled.wgsl");
const MATMUL_TILED_V1: &str = include_str!("matmul_tiled_v1.wgsl");
const MATMUL_NAIVE: &str = include_str!("matmul_naive.wgsl");

/// Every matmul kernel's batch prologue: the offsets of one batch's A and B matrices (batch
/// dims, up to 4 after the host coalesced them, broadcast through zero strides).
const BATCH_BASES: &str = "
fn batch_bases(batch: u32) -> vec2<u32> {
    var rem = batch;
    var bases = vec2<u32>(0u);
    for (var d = i32(p.dims.w) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let extent = p.batch_shape[du];
        let c = rem % extent;
        rem = rem / extent;
        bases = bases + c * vec2<u32>(p.a_batch_strides[du], p.b_batch_strides[du]);
    }
    return bases;
}
";

/// Every matmul kernel's uniform block.
const MATMUL_PARAMS: [Field; 5] = [
    Field::vec4("dims", "x: M, y: N, z: K, w: batch rank (<= 4)"),
    Field::vec4("strides", "x: a_sm, y: a_sk, z: b_sk, w: b_sn"),
    Field::vec4("batch_shape", ""),
    Field::vec4("a_batch_strides", ""),
    Field::vec4("b_batch_strides", ""),
];

/// Under `matmul_kernel = tiled`, the fewest workgroups a product's tile must give for a
/// larger tile to be picked over a smaller one.
pub(crate) const AUTO_MIN_WORKGROUPS: usize = 256;

/// The output tiles of the register-tiled kernel, smallest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum MatMulTile {
    /// 32 x 32 outputs: 8 x 8 invocations of 4 x 4 outputs each.
    T32,
    /// 64 x 64 outputs: 16 x 16 invocations of 4 x 4 outputs each.
    T64,
    /// 128 x 128 outputs: 16 x 16 invocations of 8 x 8 outputs each.
    T128,
}

/// One register-tiled geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TileGeometry {
    /// Invocations along n.
    pub wgx: u32,
    /// Invocations along m.
    pub wgy: u32,
    /// Blocks of 4 rows per invocation.
    pub rq: u32,
    /// Blocks of 4 columns per invocation.
    pub cq: u32,
    /// k per staged tile.
    pub tk: u32,
}

impl TileGeometry {
    /// Output rows of a tile.
    pub(crate) const fn tile_m(self) -> u32 {
        4 * self.wgy * self.rq
    }

    /// Output columns of a tile.
    pub(crate) const fn tile_n(self) -> u32 {
        4 * self.wgx * self.cq
    }

    /// `vec4`s of the two staged tiles (their rows padded by one `vec4`).
    const fn staged_vec4s(self) -> (u32, u32) {
        (
            self.tk * (self.wgy * self.rq + 1),
            self.tk * (self.wgx * self.cq + 1),
        )
    }
}

impl MatMulTile {
    /// Every tile, largest first (the order [`pick_tile`] tries them in).
    pub(crate) const LARGEST_FIRST: [MatMulTile; 3] =
        [MatMulTile::T128, MatMulTile::T64, MatMulTile::T32];

    /// The tile's geometry.
    pub(crate) const fn geometry(self) -> TileGeometry {
        match self {
            MatMulTile::T32 => TileGeometry {
                wgx: 8,
                wgy: 8,
                rq: 1,
                cq: 1,
                tk: 16,
            },
            MatMulTile::T64 => TileGeometry {
                wgx: 16,
                wgy: 16,
                rq: 1,
                cq: 1,
                tk: 16,
            },
            MatMulTile::T128 => TileGeometry {
                wgx: 16,
                wgy: 16,
                rq: 2,
                cq: 2,
                tk: 8,
            },
        }
    }
}

/// The first tiled kernel's geometry (`tiled_v1`): (threads x, threads y, rows per thread,
/// columns per thread, k tile).
const V1_GEOMETRY: (u32, u32, u32, u32, u32) = (16, 8, 8, 4, 16);

/// Workgroup shape (x, y) of a matmul kernel.
pub(crate) const fn matmul_workgroup(kernel: MatMulKernel) -> (u32, u32) {
    match kernel {
        MatMulKernel::Auto(tile) | MatMulKernel::Tiled(tile) => {
            let g = tile.geometry();
            (g.wgx, g.wgy)
        }
        MatMulKernel::TiledV1 => (V1_GEOMETRY.0, V1_GEOMETRY.1),
        MatMulKernel::Naive => (8, 8),
    }
}

/// Outputs (rows, columns) one workgroup of `kernel` computes.
const fn outputs_per_workgroup(kernel: MatMulKernel) -> (u32, u32) {
    match kernel {
        MatMulKernel::Auto(tile) | MatMulKernel::Tiled(tile) => {
            let g = tile.geometry();
            (g.tile_m(), g.tile_n())
        }
        MatMulKernel::TiledV1 => {
            let (wgx, wgy, rm, rn, _) = V1_GEOMETRY;
            (wgy * rm, wgx * rn)
        }
        MatMulKernel::Naive => (8, 8),
    }
}

/// Workgroups of `kernel` over a `batch x m x n` output.
fn workgroups_of(kernel: MatMulKernel, batch: usize, m: usize, n: usize) -> [usize; 3] {
    let (tm, tn) = outputs_per_workgroup(kernel);
    [n.div_ceil(tn as usize), m.div_ceil(tm as usize), batch]
}

/// The kernel one `batch x m x n` product runs under `kernel`: `Auto(largest)` resolves to the
/// largest tile up to `largest` that gives at least [`AUTO_MIN_WORKGROUPS`] workgroups, else
/// to 32 x 32; every other choice is itself.
pub(crate) fn pick_tile(kernel: MatMulKernel, batch: usize, m: usize, n: usize) -> MatMulKernel {
    let MatMulKernel::Auto(largest) = kernel else {
        return kernel;
    };
    let tile = MatMulTile::LARGEST_FIRST
        .into_iter()
        .filter(|&t| t <= largest)
        .find(|&t| {
            let [x, y, z] = workgroups_of(MatMulKernel::Tiled(t), batch, m, n);
            x.saturating_mul(y).saturating_mul(z) >= AUTO_MIN_WORKGROUPS
        })
        .unwrap_or(MatMulTile::T32);
    MatMulKernel::Tiled(tile)
}

/// Batched matmul kernel; `f16` stages tiles in f16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MatMulKey {
    /// The variant (never `Auto`: [`pick_tile`] resolves it).
    pub kernel: MatMulKernel,
    /// Whether a bias is bound (binding 4).
    pub bias: bool,
    /// Whether tiles are staged in f16 (tiled variants on devices with shader-f16).
    pub f16: bool,
}

impl MatMulKey {
    /// The key of `kernel` (resolved, see [`pick_tile`]) under `config`, with or without bias.
    pub(crate) fn of(config: KernelConfig, kernel: MatMulKernel, bias: bool) -> Self {
        Self {
            kernel,
            bias,
            f16: config.f16 && kernel != MatMulKernel::Naive,
        }
    }

    /// Every key a matmul can dispatch under `config`: each tile `Auto` may pick, else the one
    /// kernel.
    pub(crate) fn all(config: KernelConfig, bias: bool) -> Vec<Self> {
        match config.matmul {
            MatMulKernel::Auto(largest) => MatMulTile::LARGEST_FIRST
                .into_iter()
                .filter(|&t| t <= largest)
                .map(|t| Self::of(config, MatMulKernel::Tiled(t), bias))
                .collect(),
            kernel => vec![Self::of(config, kernel, bias)],
        }
    }

    fn stage(&self) -> Float {
        if self.f16 && self.kernel != MatMulKernel::Naive {
            Float::F16
        } else {
            Float::F32
        }
    }

    fn stage_bytes(&self) -> u32 {
        match self.stage() {
            Float::F16 => 2,
            Float::F32 => 4,
        }
    }
}

/// The register-tiled kernel's staging of one tile (A's or B's, see `matmul_tiled.wgsl`): `TK`
/// x `V4` `vec4`s, each four loads along m (n) of one invocation, neighbouring invocations
/// along k where `K_CONTIGUOUS`.
const STAGE: &str = "        for (var s = li; s < TK * {{V4}}; s = s + NT) {
            var k = s / {{V4}};
            var q = s % {{V4}};
            if ({{K_CONTIGUOUS}}) {
                k = s % TK;
                q = s / TK;
            }
            let e = {{ORIGIN}} + 4u * q;
            let gk = k0 + k;
            {{TILE}}[k * {{STRIDE}} + q] = vec4<Stage>(vec4<f32>({{LOAD}}({{BASE}}, e, gk),
                {{LOAD}}({{BASE}}, e + 1u, gk), {{LOAD}}({{BASE}}, e + 2u, gk),
                {{LOAD}}({{BASE}}, e + 3u, gk)));
        }
";

/// [`STAGE`] for A (`a`) or B (`b`).
fn stage_code(operand: char) -> String {
    let (v4, origin, stride) = if operand == 'a' {
        ("TM4", "row0", "AS")
    } else {
        ("TN4", "col0", "BS")
    };
    fill(
        STAGE,
        &[
            ("V4", &v4),
            ("K_CONTIGUOUS", &format!("{operand}_k_contiguous")),
            ("ORIGIN", &origin),
            ("TILE", &format!("{operand}_tile")),
            ("STRIDE", &stride),
            ("LOAD", &format!("load_{operand}")),
            ("BASE", &format!("{operand}_base")),
        ],
    )
}

/// The register-tiled kernel's generated code: the accumulator declarations, the `tk` unrolled
/// steps over the staged tiles, and the stores (see `matmul_tiled.wgsl`).
fn register_tile_code(g: TileGeometry) -> (String, String, String) {
    let rows = 4 * g.rq;
    let mut decls = String::new();
    let mut steps = String::new();
    let mut stores = String::new();
    for r in 0..rows {
        for q in 0..g.cq {
            let _ = writeln!(decls, "    var acc_{r}_{q} = vec4<f32>(0.0);");
        }
    }
    for kk in 0..g.tk {
        steps.push_str("        {\n");
        for q in 0..g.rq {
            let _ = writeln!(
                steps,
                "            let a{q} = vec4<f32>(a_tile[{kk}u * AS + {q}u * WGY + ty]);"
            );
        }
        for q in 0..g.cq {
            let _ = writeln!(
                steps,
                "            let b{q} = vec4<f32>(b_tile[{kk}u * BS + {q}u * WGX + tx]);"
            );
        }
        for r in 0..rows {
            let (rq, lane) = (r / 4, ["x", "y", "z", "w"][(r % 4) as usize]);
            for q in 0..g.cq {
                let _ = writeln!(
                    steps,
                    "            acc_{r}_{q} = fma(vec4<f32>(a{rq}.{lane}), b{q}, acc_{r}_{q});"
                );
            }
        }
        steps.push_str("        }\n");
    }
    for r in 0..rows {
        let (rq, lane) = (r / 4, r % 4);
        for q in 0..g.cq {
            let _ = writeln!(
                stores,
                "    store(out_base, row0 + 4u * ({rq}u * WGY + ty) + {lane}u, \
                 col0 + 4u * ({q}u * WGX + tx), acc_{r}_{q});"
            );
        }
    }
    (decls, steps, stores)
}

impl Kernel for MatMulKey {
    fn storage_bindings(&self) -> u32 {
        3 + u32::from(self.bias)
    }

    fn invocations(&self) -> u32 {
        let (wgx, wgy) = matmul_workgroup(self.kernel);
        wgx * wgy
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        match self.kernel {
            MatMulKernel::Auto(tile) | MatMulKernel::Tiled(tile) => {
                let (a, b) = tile.geometry().staged_vec4s();
                (a + b) * 4 * self.stage_bytes()
            }
            MatMulKernel::TiledV1 => {
                let (wgx, wgy, rm, rn, tk) = V1_GEOMETRY;
                (wgy * rm * tk + tk * wgx * rn) * self.stage_bytes()
            }
            MatMulKernel::Naive => 0,
        }
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::f32();
        w.uniforms(&MATMUL_PARAMS);
        w.storage("a", Elem::Act);
        w.storage("b", Elem::Act);
        w.storage("out", Elem::Act);
        let bias_add = if self.bias {
            w.storage("bias", Elem::F32);
            " + bias[gn]"
        } else {
            ""
        };
        w.alias("Stage", Elem::Float(self.stage()));
        w.push(BATCH_BASES);
        match self.kernel {
            MatMulKernel::Auto(tile) | MatMulKernel::Tiled(tile) => {
                let g = tile.geometry();
                let (decls, steps, stores) = register_tile_code(g);
                let (a_tile, b_tile) = g.staged_vec4s();
                w.template(
                    MATMUL_TILED,
                    &[
                        ("BIAS_ADD", &bias_add),
                        ("WGX", &g.wgx),
                        ("WGY", &g.wgy),
                        ("TK", &g.tk),
                        ("TM4", &(g.wgy * g.rq)),
                        ("TN4", &(g.wgx * g.cq)),
                        ("A_TILE", &a_tile),
                        ("B_TILE", &b_tile),
                        ("ACC_DECLS", &decls),
                        ("STAGE_A", &stage_code('a')),
                        ("STAGE_B", &stage_code('b')),
                        ("STEPS", &steps),
                        ("STORES", &stores),
                    ],
                );
            }
            MatMulKernel::TiledV1 => {
                let (wgx, wgy, rm, rn, tk) = V1_GEOMETRY;
                w.template(
                    MATMUL_TILED_V1,
                    &[
                        ("BIAS_ADD", &bias_add),
                        ("WGX", &wgx),
                        ("WGY", &wgy),
                        ("RM", &rm),
                        ("RN", &rn),
                        ("TK", &tk),
                        ("A_TILE", &(wgy * rm * tk)),
                        ("B_TILE4", &(tk * wgx * rn / 4)),
                    ],
                );
            }
            MatMulKernel::Naive => {
                let (wgx, wgy) = matmul_workgroup(self.kernel);
                w.template(
                    MATMUL_NAIVE,
                    &[("BIAS_ADD", &bias_add), ("WGX", &wgx), ("WGY", &wgy)],
                );
            }
        }
        w
    }
}

impl GpuOp for MatMul {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.a, self.b, self.out])?;
        ctx.require_f32(self.bias.as_slice())?;
        matmul(ctx, self)
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        MatMulKey::all(config, self.bias.is_some())
            .into_iter()
            .map(KernelKey::new)
            .collect()
    }
}

/// Most batch dims (after coalescing) the matmul kernels take.
pub(crate) const MAX_BATCH_DIMS: usize = 4;

fn split_matrix(shape: &[usize], what: &str) -> Result<(Vec<usize>, usize, usize)> {
    match shape {
        [batch @ .., rows, cols] => Ok((batch.to_vec(), *rows, *cols)),
        _ => Err(Error::invalid_program(format!(
            "matmul: {what} has rank {}, needs at least 2",
            shape.len()
        ))),
    }
}

fn vec4_of(values: &[usize], pad: u32, what: &str) -> Result<[u32; 4]> {
    let mut packed = [pad; 4];
    for (slot, &value) in packed.iter_mut().zip(values) {
        *slot = to_u32(value, what)?;
    }
    Ok(packed)
}

/// Plans one matmul with the program's matmul kernel.
///
/// # Errors
/// `InvalidProgram` for shapes that do not multiply or do not match `out`; `NotSupported` for
/// more than four batch dims after coalescing; `OutOfResources` for grids over the device limit.
fn matmul(ctx: &PlanContext<'_>, op: &MatMul) -> Result<Vec<Dispatch>> {
    let (a_batch, a_rows, a_cols) = split_matrix(ctx.shape(op.a)?, "a")?;
    let (b_batch, b_rows, b_cols) = split_matrix(ctx.shape(op.b)?, "b")?;
    let (m, k) = if op.transpose_a {
        (a_cols, a_rows)
    } else {
        (a_rows, a_cols)
    };
    let (kb, n) = if op.transpose_b {
        (b_cols, b_rows)
    } else {
        (b_rows, b_cols)
    };
    if k != kb {
        return Err(Error::invalid_program(format!(
            "matmul: inner dims differ ({k} and {kb})"
        )));
    }
    let (out_batch, out_m, out_n) = split_matrix(ctx.shape(op.out)?, "out")?;
    if (out_m, out_n) != (m, n) {
        return Err(Error::invalid_program(format!(
            "matmul: out is [.., {out_m}, {out_n}], the product is [.., {m}, {n}]"
        )));
    }
    if let Some(bias) = op.bias
        && ctx.shape(bias)? != [n]
    {
        return Err(Error::invalid_program(format!(
            "matmul: bias has shape {:?}, expected [{n}]",
            ctx.shape(bias)?
        )));
    }
    // A linear layer ([..., M, K] x [K, N] with one B for every batch): the batches of A are
    // consecutive rows, so fold them into M. One tall product fills the tiles that per-batch
    // products of a few rows each (e.g. 8 sentences x 14 tokens) would leave mostly empty.
    let b_batches: usize = b_batch.iter().product();
    let (out_batch, m) = if !op.transpose_a && b_batches == 1 && !a_batch.is_empty() {
        let rows = a_batch.iter().product::<usize>() * m;
        (Vec::new(), rows)
    } else {
        (out_batch, m)
    };
    let a_batch = if out_batch.is_empty() {
        Vec::new()
    } else {
        a_batch
    };
    let b_batch = if out_batch.is_empty() {
        Vec::new()
    } else {
        b_batch
    };
    let a_matrix = m * k;
    let b_matrix = k * n;
    let a_strides: Vec<usize> = broadcast_strides(&a_batch, &out_batch)
        .map_err(|e| Error::invalid_program(e.message().to_owned()))?
        .into_iter()
        .map(|s| s * a_matrix)
        .collect();
    let b_strides: Vec<usize> = broadcast_strides(&b_batch, &out_batch)
        .map_err(|e| Error::invalid_program(e.message().to_owned()))?
        .into_iter()
        .map(|s| s * b_matrix)
        .collect();
    let (batch_shape, batch_strides) = coalesce(&out_batch, &[a_strides, b_strides]);
    if batch_shape.len() > MAX_BATCH_DIMS {
        return Err(Error::new(
            ErrorCode::NotSupported,
            format!(
                "matmul: {} batch dims after coalescing; the WebGPU kernel takes {MAX_BATCH_DIMS}",
                batch_shape.len()
            ),
        ));
    }
    let batch: usize = out_batch.iter().product();
    if batch == 0 || m == 0 || n == 0 {
        return Ok(Vec::new());
    }
    let kernel = pick_tile(ctx.config.matmul, batch, m, n);
    let groups = workgroups_of(kernel, batch, m, n);
    let mut workgroups = [0u32; 3];
    for (slot, count) in workgroups.iter_mut().zip(groups) {
        *slot = u32::try_from(count)
            .ok()
            .filter(|&c| c <= ctx.max_workgroups)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::OutOfResources,
                    format!(
                        "matmul [{batch} x {m} x {k} x {n}] needs {count} workgroups in one \
                         dimension; the device allows {}",
                        ctx.max_workgroups
                    ),
                )
            })?;
    }
    let (a_sm, a_sk) = if op.transpose_a { (1, m) } else { (k, 1) };
    let (b_sk, b_sn) = if op.transpose_b { (1, k) } else { (n, 1) };
    let uniforms = Uniforms::new(&MATMUL_PARAMS)
        .vec4(
            "dims",
            [
                to_u32(m, "M")?,
                to_u32(n, "N")?,
                to_u32(k, "K")?,
                to_u32(batch_shape.len(), "batch rank")?,
            ],
        )
        .vec4(
            "strides",
            vec4_of(&[a_sm, a_sk, b_sk, b_sn], 0, "matmul stride")?,
        )
        .vec4("batch_shape", vec4_of(&batch_shape, 1, "batch dim")?)
        .vec4(
            "a_batch_strides",
            vec4_of(&batch_strides[0], 0, "batch stride")?,
        )
        .vec4(
            "b_batch_strides",
            vec4_of(&batch_strides[1], 0, "batch stride")?,
        )
        .finish()?;
    let mut bindings = vec![
        Binding::Tensor(op.a),
        Binding::Tensor(op.b),
        Binding::Tensor(op.out),
    ];
    bindings.extend(op.bias.map(Binding::Tensor));
    Ok(vec![Dispatch {
        key: KernelKey::new(MatMulKey::of(ctx.config, kernel, op.bias.is_some())),
        uniforms,
        bindings,
        workgroups,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::webgpu::kernels::source::{source, workgroup_storage_bytes};

    #[test]
    fn tiled_geometries_fit_the_webgpu_minimum_limits() {
        let mut kernels: Vec<MatMulKernel> = MatMulTile::LARGEST_FIRST
            .into_iter()
            .map(MatMulKernel::Tiled)
            .collect();
        kernels.push(MatMulKernel::TiledV1);
        for kernel in kernels {
            for f16 in [false, true] {
                let key = KernelKey::new(MatMulKey {
                    kernel,
                    bias: true,
                    f16,
                });
                let (wgx, wgy) = matmul_workgroup(kernel);
                assert!(wgx * wgy <= 256 && wgx <= 256 && wgy <= 256, "{key:?}");
                assert_eq!(wgx * wgy, key.kernel().invocations());
                assert!(workgroup_storage_bytes(&key) <= 16384, "{key:?}");
                assert!(source(&key).unwrap().contains("var<workgroup> a_tile"));
            }
        }
        for tile in MatMulTile::LARGEST_FIRST {
            let g = tile.geometry();
            // Every invocation stages whole vec4s, the same number each.
            assert_eq!((g.tk * g.wgy * g.rq) % (g.wgx * g.wgy), 0, "{tile:?}");
            assert_eq!((g.tk * g.wgx * g.cq) % (g.wgx * g.wgy), 0, "{tile:?}");
            assert_eq!(g.tile_m(), g.tile_n());
        }
        assert_eq!(MatMulTile::T128.geometry().tile_m(), 128);
        assert_eq!(MatMulTile::T64.geometry().tile_m(), 64);
        assert_eq!(MatMulTile::T32.geometry().tile_m(), 32);
    }

    #[test]
    fn auto_picks_the_largest_tile_that_fills_the_gpu() {
        let auto = MatMulKernel::Auto(MatMulTile::T128);
        let tiled = |t| MatMulKernel::Tiled(t);
        // 2048^2: 256 tiles of 128.
        assert_eq!(pick_tile(auto, 1, 2048, 2048), tiled(MatMulTile::T128));
        // 1024^2: 64 tiles of 128, 256 of 64.
        assert_eq!(pick_tile(auto, 1, 1024, 1024), tiled(MatMulTile::T64));
        // Batches count: 4 x 1024^2 fills 128-tiles.
        assert_eq!(pick_tile(auto, 4, 1024, 1024), tiled(MatMulTile::T128));
        // Too small for any tile to give 256 workgroups: 32 x 32.
        assert_eq!(pick_tile(auto, 1, 384, 384), tiled(MatMulTile::T32));
        assert_eq!(pick_tile(auto, 1, 1, 1), tiled(MatMulTile::T32));
        // The largest the program allows caps the pick.
        let small = MatMulKernel::Auto(MatMulTile::T32);
        assert_eq!(pick_tile(small, 1, 4096, 4096), tiled(MatMulTile::T32));
        // A fixed choice is itself.
        for kernel in [
            tiled(MatMulTile::T64),
            MatMulKernel::TiledV1,
            MatMulKernel::Naive,
        ] {
            assert_eq!(pick_tile(kernel, 1, 4096, 4096), kernel);
        }
    }
}

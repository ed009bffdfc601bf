//! `Linear` on the GPU: f32 or block-format weights decoded inside the kernels
//! (`linear_decode.wgsl`), paths chosen by the number of activation rows `M` and, for `M == 1`,
//! by the program's [`GemvKernel`] (compile spec `gemv_kernel`, else the adapter):
//! - **GEMV, workgroup** (`linear_gemv.wgsl`, `M == 1`, decode on real GPUs without subgroup
//!   operations): memory-bound, so each weight byte is read once: a workgroup of 256 threads
//!   computes 16 output rows, 16 threads per row striding over the row's 8-value units, the
//!   activation row staged in workgroup memory (2048 values per pass), a plain workgroup
//!   reduction.
//! - **GEMV, staged** (`linear_gemv_staged.wgsl`, compile spec only, Q8_0, Q5_0, Q4_K and Q6_K;
//!   the other formats run the workgroup GEMV): a workgroup copies its rows' next blocks into
//!   workgroup memory, neighbouring threads reading neighbouring words, then 8 (32-value
//!   blocks, 32 rows) or 16 (256-value blocks, 16 rows) threads per row dot whole staged blocks
//!   (`linear_block_dot.wgsl`). Written after an H200 showed the workgroup GEMV at 0.24 of the
//!   card's read bandwidth; not yet measured on a GPU, so `auto` never picks it (decision
//!   record `docs/decisions/0028-gemv-kernel-per-adapter.md`).
//! - **GEMV, subgroup** (`linear_gemv_subgroup.wgsl`, `M == 1` on real GPUs with subgroup
//!   operations): as the workgroup GEMV, but each subgroup owns whole output rows, its lanes
//!   striding over a row's 8-value units, and sums a row with `subgroupAdd`: no reduction
//!   through workgroup memory. The kernel numbers subgroups and lanes itself (WGSL does not say
//!   which invocations share a subgroup); a workgroup of 256 computes `256 / s` rows for the
//!   adapter's smallest subgroup size `s` (8 to 64 rows), so even the smallest subgroups each
//!   own a row.
//! - **GEMV, rows** (`linear_rows.wgsl`, `M == 1` on adapters that emulate the GPU on the
//!   CPU): 8 output rows per invocation (`ROWS_R`), no workgroup memory, no barrier (there a
//!   barrier switches between every invocation's fiber, and every storage load is a per-lane
//!   gather); each invocation reads its weight rows block by block as whole words
//!   (`linear_block_dot.wgsl`: a dot per block for Q8_0, Q5_0, Q4_K and Q6_K, the 8-value
//!   decoders for the other formats) and the activation row from storage, each activation
//!   load serving all 8 rows.
//! - **Tiled** (`linear_tiled.wgsl`, `M > 1`, prefill): 32 x 32 output tiles of 8 x 8 threads;
//!   each K step of 32 decodes a 32 x 32 weight tile once into workgroup memory and reuses it for
//!   all 32 activation rows of the tile.
//!
//! The weight is bound as `array<u32>` over its raw bytes (a block format's bytes as the file
//! has them; the buffer is padded to a multiple of 4 bytes). The block dots read weights
//! through `ww(i)` and activations through `xv(i)`, so the rows and staged kernels share them.
//!
//! The op suite runs every GEMV case under all four GEMV kernels (`tests/ops_webgpu.rs`),
//! including rows an odd number of 2-byte-aligned blocks long (every other row starts half a
//! word in); the subgroup GEMV also runs there on SwiftShader (subgroups of 4) and lavapipe (8).
//!
//! Every path reads its activations through `x_at(i)`: `x[i]`, or, in the gated form,
//! `f(x[i]) * gate[i]` (one more binding): the linear fused with the activation and the
//! product that produce its input (GeGLU / SwiGLU before an FFN's down projection; the planner
//! decides, see `fusion.rs`), so that product is never written.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::elementwise::{ACTIVATIONS, UnaryKind};
use crate::backends::webgpu::kernels::wgsl::{Float, Precision};
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GemvKernel, GpuOp, Kernel, KernelConfig, KernelKey,
    PlanContext, Uniforms, Wgsl, grid_1d, row_chunks, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::{Linear, Unary};
use crate::program::{DType, TensorDecl, TensorId};
use crate::quant::BlockFormat;

const DECODE: &str = include_str!("linear_decode.wgsl");
const GEMV: &str = include_str!("linear_gemv.wgsl");
const GEMV_STAGED: &str = include_str!("linear_gemv_staged.wgsl");
const GEMV_SUBGROUP: &str = include_str!("linear_gemv_subgroup.wgsl");

/// Every linear kernel's uniform block.
const LINEAR_PARAMS: [Field; 2] = [
    Field::vec4(
        "dims",
        "x: M, y: N (the output rows of this dispatch), z: K, w: bytes per weight row",
    ),
    Field::vec4(
        "split",
        "x: first output row of this dispatch (a weight larger than one binding is bound and run\n\
         by row ranges), y: the output's full row length",
    ),
];

/// The two GEMVs' activation staging (they declare `xs: array<vec4<f32>, KC / 4>`, `KC` and
/// `NT`): x[xb + k0 ..][.. min(KC, K - k0)], zero-padded to a multiple of 8, into `xs`.
const STAGE_X: &str = "fn stage_x(xb: u32, k0: u32, lid: u32) {
    let k_len = p.dims.z;
    let padded = (min(KC, k_len - k0) + 7u) / 8u * 8u;
    for (var i = lid; i * 4u < padded; i = i + NT) {
        let e = k0 + 4u * i;
        var v = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c = c + 1u) {
            if (e + c < k_len) {
                v[c] = x_at(xb + e + c);
            }
        }
        xs[i] = v;
    }
}";

const ROWS: &str = include_str!("linear_rows.wgsl");
const BLOCK_DOT: &str = include_str!("linear_block_dot.wgsl");
const TILED: &str = include_str!("linear_tiled.wgsl");

/// Invocations per workgroup of the rows GEMV.
const ROWS_WG: u32 = 64;
/// Output rows per invocation of the rows GEMV (each activation load serves them all).
const ROWS_R: u32 = 8;

/// Threads per output row of the GEMV.
const GEMV_TPR: u32 = 16;
/// Output rows per GEMV workgroup.
const GEMV_ROWS: u32 = 16;
/// Activations staged per GEMV pass (a multiple of 256, the largest block).
const GEMV_KC: u32 = 2048;
/// Threads per GEMV workgroup (all three workgroup GEMV kernels).
const GEMV_THREADS: u32 = GEMV_TPR * GEMV_ROWS;
/// Output rows per workgroup of the subgroup GEMV on an adapter whose subgroups have at least
/// `min_size` invocations: one row per subgroup of that size (clamped to 8..=64 rows).
fn subgroup_rows(min_size: u32) -> u32 {
    (GEMV_THREADS / min_size.max(1)).clamp(8, 64)
}

/// Tiled path: threads x, threads y, rows per thread (4 columns per thread).
const TILED_GEOMETRY: (u32, u32, u32) = (8, 8, 4);

/// The shape of the staged GEMV for one block format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StagedGeometry {
    /// Threads per output row.
    threads_per_row: u32,
    /// Output rows per workgroup.
    rows: u32,
    /// Blocks of each row staged per pass.
    blocks: u32,
    /// Words of workgroup memory for the staged rows.
    words: u32,
    /// `vec4`s of workgroup memory for the staged activations.
    x4: u32,
}

impl StagedGeometry {
    /// The geometry for `format`'s block dot (`None` for formats without one): 8 threads per
    /// row for 32-value blocks, 16 for 256-value ones, and the most blocks per pass whose
    /// workgroup memory (staged rows, activations, partial sums) fits 16 KiB, WebGPU's floor.
    fn of(format: WeightFormat) -> Option<Self> {
        let (_, values, bytes) = block_dot(format)?;
        let threads_per_row = if values >= 256 { 16 } else { 8 };
        let rows = GEMV_THREADS / threads_per_row;
        // A row's staged span starts on a 2-byte boundary: one word more than its bytes fill.
        let words = |blocks: u32| rows * (blocks * bytes / 4 + 2);
        let fits = |blocks: u32| 4 * (words(blocks) + blocks * values + GEMV_THREADS) <= 16384;
        let blocks = (1..64).take_while(|&b| fits(b)).last().unwrap_or(1);
        Some(Self {
            threads_per_row,
            rows,
            blocks,
            words: words(blocks),
            x4: blocks * values / 4,
        })
    }

    /// Workgroup memory in bytes.
    fn workgroup_bytes(self) -> u32 {
        4 * (self.words + 4 * self.x4 + GEMV_THREADS)
    }
}

/// How a weight is stored: f32 (`None`) or a block format.
pub(crate) type WeightFormat = Option<BlockFormat>;

/// The weight format of a dtype, or `None` inside `Ok` for f32.
///
/// # Errors
/// `InvalidProgram` for a dtype that is not a weight dtype.
pub(crate) fn weight_format(dtype: DType, what: &str) -> Result<WeightFormat> {
    match dtype {
        DType::F32 => Ok(None),
        DType::Block(format) => Ok(Some(format)),
        other => Err(Error::invalid_program(format!(
            "{what}: weight is {}, expected f32 or a block format",
            other.name()
        ))),
    }
}

/// Bytes of one weight row of `k` values.
///
/// # Errors
/// `InvalidProgram` when `k` is not a whole number of blocks; `OutOfResources` over u32.
pub(crate) fn row_bytes(format: WeightFormat, k: usize, what: &str) -> Result<u32> {
    let bytes = match format {
        None => Some(k as u64 * 4),
        Some(format) => format.row_bytes(k as u64),
    }
    .ok_or_else(|| {
        Error::invalid_program(format!(
            "{what}: rows of {k} values are not whole {} blocks",
            format.map_or("f32", BlockFormat::name)
        ))
    })?;
    to_u32(bytes as usize, "weight row bytes")
}

/// The WGSL name of the decoder of `format`.
pub(crate) const fn decoder(format: WeightFormat) -> &'static str {
    match format {
        None => "decode8_f32",
        Some(BlockFormat::F16) => "decode8_f16",
        Some(BlockFormat::BF16) => "decode8_bf16",
        Some(BlockFormat::Q4_0) => "decode8_q4_0",
        Some(BlockFormat::Q5_0) => "decode8_q5_0",
        Some(BlockFormat::Q8_0) => "decode8_q8_0",
        Some(BlockFormat::Q4_K) => "decode8_q4_k",
        Some(BlockFormat::Q5_K) => "decode8_q5_k",
        Some(BlockFormat::Q6_K) => "decode8_q6_k",
    }
}

/// The decoding helpers every kernel over weights includes (binding `w` and `p.dims.z` = K).
pub(crate) const fn decode_library() -> &'static str {
    DECODE
}

/// The block dot of `linear_block_dot.wgsl` for `format` (its WGSL name, values and bytes per
/// block), where it has one.
fn block_dot(format: WeightFormat) -> Option<(&'static str, u32, u32)> {
    let format = format?;
    let name = match format {
        BlockFormat::Q8_0 => "rows_dot_q8_0",
        BlockFormat::Q5_0 => "rows_dot_q5_0",
        BlockFormat::Q4_K => "rows_dot_q4_k",
        BlockFormat::Q6_K => "rows_dot_q6_k",
        _ => return None,
    };
    Some((
        name,
        format.block_elements() as u32,
        format.block_bytes() as u32,
    ))
}

/// The WGSL `rows_dot(rb, xb)` of the rows GEMV for `format`: the block dot of
/// `linear_block_dot.wgsl` over the whole row where it has one, else the 8-value decoder in a
/// loop.
fn rows_dot(format: WeightFormat) -> String {
    let Some((block, values, _)) = block_dot(format) else {
        return ROWS_DECODED.replace("{{DECODE}}", decoder(format));
    };
    format!(
        "{BLOCK_DOT}\nfn rows_dot(rb: array<u32, R>, xb: u32) -> array<f32, R> {{\n    \
         return {block}(rb, xb, 0u, p.dims.z / {values}u, 1u);\n}}\n"
    )
}

/// The WGSL `block_dot(rb, b0, b1)` of the staged GEMV: one thread's share (blocks b0, b0 +
/// TPR, .. < b1) of the staged row at byte rb, against the staged activations.
fn gemv_block_dot(block: &str) -> String {
    format!(
        "{BLOCK_DOT}\nfn block_dot(rb: u32, b0: u32, b1: u32) -> f32 {{\n    \
         return {block}(array<u32, 1>(rb), 0u, b0, b1, TPR)[0];\n}}\n"
    )
}

/// `rows_dot` over the 8-value decoders (formats without a block dot; dense rows of any K).
const ROWS_DECODED: &str = "fn rows_dot(rb: array<u32, R>, xb: u32) -> array<f32, R> {
    var acc: array<vec4<f32>, R>;
    for (var e = 0u; e < p.dims.z; e = e + 8u) {
        let x0 = x4(xb, e);
        let x1 = x4(xb, e + 4u);
        for (var r = 0u; r < R; r = r + 1u) {
            let d = {{DECODE}}(rb[r], e);
            acc[r] = acc[r] + d.lo * x0 + d.hi * x1;
        }
    }
    var sums: array<f32, R>;
    for (var r = 0u; r < R; r = r + 1u) {
        sums[r] = (acc[r].x + acc[r].y) + (acc[r].z + acc[r].w);
    }
    return sums;
}
";

/// Which of the linear kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum LinearPath {
    /// `M == 1`, many threads per output row and a workgroup reduction ([`GemvKernel::Workgroup`]).
    Gemv,
    /// `M == 1`, the weights' blocks staged in workgroup memory ([`GemvKernel::Staged`], formats
    /// with a block dot).
    Staged,
    /// `M == 1`, whole output rows per subgroup, summed by `subgroupAdd`
    /// ([`GemvKernel::Subgroup`]); `rows` output rows per workgroup.
    Subgroup {
        /// Output rows per workgroup.
        rows: u32,
    },
    /// `M == 1`, [`ROWS_R`] output rows per invocation, no barrier ([`GemvKernel::Rows`]).
    Rows,
    /// Output tiles (`M > 1`).
    Tiled,
}

impl LinearPath {
    /// Output rows per workgroup of the three workgroup GEMVs over `format` weights (the
    /// dispatch grid and the kernels' `ROWS` both come from here; other paths: the workgroup
    /// GEMV's, unused).
    fn gemv_rows(self, format: WeightFormat) -> u32 {
        match self {
            LinearPath::Staged => StagedGeometry::of(format).map_or(GEMV_ROWS, |g| g.rows),
            LinearPath::Subgroup { rows } => rows,
            LinearPath::Gemv | LinearPath::Rows | LinearPath::Tiled => GEMV_ROWS,
        }
    }
}

/// A linear kernel: its path, the weight format it decodes, whether a bias is bound, and
/// whether its input is a gated activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct LinearKey {
    /// GEMV or tiled.
    pub path: LinearPath,
    /// The weight's storage.
    pub format: WeightFormat,
    /// Whether a bias is bound (binding 4).
    pub bias: bool,
    /// The gated form's activation `f`: the activations are `f(x) * gate`, `gate` bound last.
    pub gated: Option<UnaryKind>,
    /// The element type of the activations (`x`, `gate`); every path accumulates in f32.
    pub act: Float,
    /// The element type of `out` (f32 where the output leaves the arena's f16, e.g. logits).
    pub out: Float,
}

impl Kernel for LinearKey {
    fn storage_bindings(&self) -> u32 {
        3 + u32::from(self.bias) + u32::from(self.gated.is_some())
    }

    fn invocations(&self) -> u32 {
        match self.path {
            LinearPath::Gemv | LinearPath::Staged | LinearPath::Subgroup { .. } => GEMV_THREADS,
            LinearPath::Rows => ROWS_WG,
            LinearPath::Tiled => TILED_GEOMETRY.0 * TILED_GEOMETRY.1,
        }
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        match self.path {
            LinearPath::Gemv => 4 * (GEMV_KC + GEMV_THREADS),
            // The staged activations, the ticket counter and the team count.
            LinearPath::Subgroup { .. } => 4 * (GEMV_KC + 2),
            LinearPath::Staged => {
                StagedGeometry::of(self.format).map_or(0, StagedGeometry::workgroup_bytes)
            }
            LinearPath::Rows => 0,
            LinearPath::Tiled => {
                let (wgx, wgy, rm) = TILED_GEOMETRY;
                4 * (wgy * rm * 32 + 32 * wgx * 4)
            }
        }
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(if self.act == Float::F16 {
            Precision::F16
        } else {
            Precision::F32
        });
        // The subgroup GEMV's `enable subgroups;`, which browsers require; naga (natively) does
        // not implement the directive and takes subgroup operations on devices that have them.
        if matches!(self.path, LinearPath::Subgroup { .. }) && cfg!(target_arch = "wasm32") {
            w.enable("subgroups");
        }
        // The interface every path shares: the uniforms, the activations, weight (raw words),
        // output, bias and (in the gated form) gate; and `x_at`, how every path reads an
        // activation.
        w.uniforms(&LINEAR_PARAMS);
        w.alias("OutElem", Elem::Float(self.out));
        w.storage("x", Elem::Act);
        w.storage("w", Elem::U32);
        w.storage("out", Elem::Named("OutElem"));
        let bias_add = if self.bias {
            w.storage("bias", Elem::F32);
            match self.path {
                LinearPath::Gemv
                | LinearPath::Staged
                | LinearPath::Subgroup { .. }
                | LinearPath::Rows => " + bias[p.split.x + row]",
                LinearPath::Tiled => " + bias[p.split.x + gn]",
            }
        } else {
            ""
        };
        let x_at = match self.gated {
            Some(kind) => {
                w.storage("gate", Elem::Act);
                w.push(&format!(
                    "fn activation(v: f32) -> f32 {{\n    return {};\n}}",
                    kind.expr()
                ));
                w.push(ACTIVATIONS);
                "activation(f32(x[i])) * f32(gate[i])"
            }
            None => "f32(x[i])",
        };
        w.push(&format!(
            "// Activation i of the input rows.\nfn x_at(i: u32) -> f32 {{\n    return {x_at};\n}}"
        ));
        let (wgx, wgy, rm) = TILED_GEOMETRY;
        let template = match self.path {
            LinearPath::Gemv => GEMV,
            LinearPath::Staged => GEMV_STAGED,
            LinearPath::Subgroup { .. } => GEMV_SUBGROUP,
            LinearPath::Rows => ROWS,
            LinearPath::Tiled => TILED,
        };
        // The staged GEMV's geometry (formats without a block dot never take that path).
        let (block_name, block_values, block_bytes) = block_dot(self.format).unwrap_or_default();
        let staged = StagedGeometry::of(self.format).filter(|_| self.path == LinearPath::Staged);
        let (tpr, cb, words, x4) = match staged {
            Some(g) => (g.threads_per_row, g.blocks, g.words, g.x4),
            None => (GEMV_TPR, 0, 0, 0),
        };
        // Fragments first (they hold placeholders of their own), then the numbers.
        let text = template
            .replace("{{STAGE_X}}", STAGE_X)
            .replace("{{BLOCK_DOT}}", &gemv_block_dot(block_name))
            .replace("{{ROWS_DOT}}", &rows_dot(self.format))
            .replace("{{DECODE_LIB}}", DECODE);
        w.template(
            &text,
            &[
                ("STAGED_BLOCKS", &cb),
                ("STAGED_WORDS", &words),
                ("STAGED_X4", &x4),
                ("BLOCK_VALUES", &block_values),
                ("BLOCK_BYTES", &block_bytes),
                ("WG", &ROWS_WG),
                ("R", &ROWS_R),
                ("DECODE", &decoder(self.format)),
                ("BIAS_ADD", &bias_add),
                ("TPR", &tpr),
                ("ROWS", &self.path.gemv_rows(self.format)),
                ("NT", &GEMV_THREADS),
                ("KC", &GEMV_KC),
                ("KC4", &(GEMV_KC / 4)),
                ("WGX", &wgx),
                ("WGY", &wgy),
                ("RM", &rm),
                ("X_TILE", &(wgy * rm * 32)),
                ("W_TILE4", &(32 * wgx)),
            ],
        );
        w
    }
}

/// The path of one activation row of a `format` weight under `config`.
fn gemv_path(config: KernelConfig, format: WeightFormat) -> LinearPath {
    match config.gemv {
        GemvKernel::Rows => LinearPath::Rows,
        GemvKernel::Workgroup => LinearPath::Gemv,
        GemvKernel::Staged if block_dot(format).is_some() => LinearPath::Staged,
        GemvKernel::Staged => LinearPath::Gemv,
        // `kernel_config` picks the subgroup GEMV only on devices with subgroups.
        GemvKernel::Subgroup => match config.subgroup_min_size {
            Some(min_size) => LinearPath::Subgroup {
                rows: subgroup_rows(min_size),
            },
            None => LinearPath::Gemv,
        },
    }
}

impl GpuOp for Linear {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        linear(ctx, self, None)
    }

    fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let act = floats.float(self.x);
        linear_kernels(self, tensors, config, None, [act, floats.float(self.out)])
    }
}

/// The linear's input as a gated activation: `unary` (`f` of its `x`), then the product with
/// `gate` (same shape) that the linear reads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GatedInput<'a> {
    /// The activation op.
    pub unary: &'a Unary,
    /// The product's other operand.
    pub gate: TensorId,
}

/// `linear.out = f(unary.x) * gate @ W^T (+ bias)` in the linear's own dispatches: the linear
/// fused with the gated activation that produces its input (that product is never written).
///
/// # Errors
/// As the linear's own dispatches; `InvalidProgram` when the activation's input or `gate`
/// differs from the linear's input in shape.
pub(crate) fn gated_linear(
    ctx: &PlanContext<'_>,
    linear_op: &Linear,
    input: GatedInput<'_>,
) -> Result<Vec<Dispatch>> {
    for id in [input.unary.x, input.gate] {
        if ctx.shape(id)? != ctx.shape(linear_op.x)? {
            return Err(Error::invalid_program(format!(
                "gated activation + linear: tensor {id} has shape {:?}, the linear's input {:?}",
                ctx.shape(id)?,
                ctx.shape(linear_op.x)?
            )));
        }
    }
    linear(ctx, linear_op, Some(input))
}

/// The kernels of [`gated_linear`] under `config`.
pub(crate) fn gated_linear_kernels(
    linear_op: &Linear,
    unary: &Unary,
    tensors: &[TensorDecl],
    config: KernelConfig,
    floats: &TensorFloats,
) -> Vec<KernelKey> {
    let floats = [floats.float(unary.x), floats.float(linear_op.out)];
    linear_kernels(
        linear_op,
        tensors,
        config,
        Some(UnaryKind::of(unary.op)),
        floats,
    )
}

/// The kernels a linear may dispatch under `config` (the GEMV path of its format and the tiled
/// one), in the gated form where `gated` is given.
fn linear_kernels(
    linear_op: &Linear,
    tensors: &[TensorDecl],
    config: KernelConfig,
    gated: Option<UnaryKind>,
    [act, out]: [Float; 2],
) -> Vec<KernelKey> {
    let Some(format) = tensors
        .get(linear_op.weight as usize)
        .and_then(|t| weight_format(t.dtype, "linear").ok())
    else {
        return Vec::new();
    };
    [gemv_path(config, format), LinearPath::Tiled]
        .into_iter()
        .map(|path| {
            KernelKey::new(LinearKey {
                path,
                format,
                bias: linear_op.bias.is_some(),
                gated,
                act,
                out,
            })
        })
        .collect()
}

/// The dispatches of `linear_op`: one, or one per row range of a weight larger than one
/// binding; reading `gated`'s activation and gate in place of the linear's input where given.
fn linear(
    ctx: &PlanContext<'_>,
    linear_op: &Linear,
    gated: Option<GatedInput<'_>>,
) -> Result<Vec<Dispatch>> {
    ctx.require_f32(&[linear_op.x, linear_op.out])?;
    ctx.require_f32(linear_op.bias.as_slice())?;
    if let Some(input) = gated {
        ctx.require_f32(&[input.unary.x, input.gate])?;
    }
    let format = weight_format(ctx.dtype(linear_op.weight)?, "linear")?;
    let x_shape = ctx.shape(linear_op.x)?;
    let &[n, k] = ctx.shape(linear_op.weight)? else {
        return Err(Error::invalid_program(format!(
            "linear: weight has shape {:?}, expected [N, K]",
            ctx.shape(linear_op.weight)?
        )));
    };
    if x_shape.last() != Some(&k) {
        return Err(Error::invalid_program(format!(
            "linear: x has shape {x_shape:?}, weight rows are {k} long"
        )));
    }
    let m: usize = x_shape[..x_shape.len() - 1].iter().product();
    let mut expected = x_shape[..x_shape.len() - 1].to_vec();
    expected.push(n);
    if ctx.shape(linear_op.out)? != expected.as_slice() {
        return Err(Error::invalid_program(format!(
            "linear: out has shape {:?}, expected {expected:?}",
            ctx.shape(linear_op.out)?
        )));
    }
    if let Some(bias) = linear_op.bias
        && ctx.shape(bias)? != [n]
    {
        return Err(Error::invalid_program(format!(
            "linear: bias has shape {:?}, expected [{n}]",
            ctx.shape(bias)?
        )));
    }
    let row_bytes = row_bytes(format, k, "linear")?;
    if m == 0 || n == 0 {
        return Ok(Vec::new());
    }
    let path = if m == 1 {
        gemv_path(ctx.config, format)
    } else {
        LinearPath::Tiled
    };
    // A weight larger than one storage binding runs by row ranges, each bound alone.
    let chunks = row_chunks(
        n,
        u64::from(row_bytes),
        ctx.max_binding,
        ctx.storage_alignment,
    )?;
    let split = chunks.len() > 1;
    let mut dispatches = Vec::with_capacity(chunks.len());
    for (first, rows) in chunks {
        // Byte offsets within one binding must fit the kernels' u32 arithmetic.
        to_u32(rows.saturating_mul(row_bytes as usize), "weight bytes")?;
        let workgroups = match path {
            LinearPath::Gemv | LinearPath::Staged | LinearPath::Subgroup { .. } => {
                let per_group = path.gemv_rows(format);
                let Some(mut grid) =
                    grid_1d(rows.div_ceil(per_group as usize), ctx.max_workgroups)?
                else {
                    continue;
                };
                grid[2] = to_u32(m, "activation rows")?;
                grid
            }
            LinearPath::Rows => {
                let Some(mut grid) = grid_1d(
                    rows.div_ceil((ROWS_WG * ROWS_R) as usize),
                    ctx.max_workgroups,
                )?
                else {
                    continue;
                };
                grid[2] = to_u32(m, "activation rows")?;
                grid
            }
            LinearPath::Tiled => {
                let (wgx, wgy, rm) = TILED_GEOMETRY;
                let groups = [
                    rows.div_ceil((wgx * 4) as usize),
                    m.div_ceil((wgy * rm) as usize),
                ];
                let mut grid = [1u32; 3];
                for (slot, count) in grid.iter_mut().zip(groups) {
                    *slot = u32::try_from(count)
                        .ok()
                        .filter(|&c| c <= ctx.max_workgroups)
                        .ok_or_else(|| {
                            Error::out_of_resources(format!(
                                "linear [{m} x {k} x {n}] needs {count} workgroups in one \
                                     dimension; the device allows {}",
                                ctx.max_workgroups
                            ))
                        })?;
                }
                grid
            }
        };
        let uniforms = Uniforms::new(&LINEAR_PARAMS)
            .vec4(
                "dims",
                [
                    to_u32(m, "M")?,
                    to_u32(rows, "N")?,
                    to_u32(k, "K")?,
                    row_bytes,
                ],
            )
            .vec4(
                "split",
                [to_u32(first, "first row")?, to_u32(n, "N")?, 0, 0],
            )
            .finish()?;
        let weight = if split {
            Binding::Slice {
                tensor: linear_op.weight,
                offset: first as u64 * u64::from(row_bytes),
                bytes: rows as u64 * u64::from(row_bytes),
            }
        } else {
            Binding::Tensor(linear_op.weight)
        };
        // The gated form reads the activation's input in the linear's input's place, and
        // the gate last.
        let x = gated.map_or(linear_op.x, |input| input.unary.x);
        let mut bindings = vec![Binding::Tensor(x), weight, Binding::Tensor(linear_op.out)];
        bindings.extend(linear_op.bias.map(Binding::Tensor));
        bindings.extend(gated.map(|input| Binding::Tensor(input.gate)));
        dispatches.push(Dispatch {
            key: KernelKey::new(LinearKey {
                path,
                format,
                bias: linear_op.bias.is_some(),
                gated: gated.map(|input| UnaryKind::of(input.unary.op)),
                act: ctx.float(x),
                out: ctx.float(linear_op.out),
            }),
            uniforms,
            bindings,
            workgroups,
        });
    }
    Ok(dispatches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::webgpu::kernels::source::{source, workgroup_storage_bytes};

    #[test]
    fn subgroup_rows_give_every_smallest_subgroup_a_row() {
        assert_eq!(subgroup_rows(4), 64);
        assert_eq!(subgroup_rows(8), 32);
        assert_eq!(subgroup_rows(32), 8);
        assert_eq!(subgroup_rows(128), 8);
        assert_eq!(subgroup_rows(0), 64);
    }

    #[test]
    fn kernels_fit_the_webgpu_minimum_limits() {
        let formats = std::iter::once(None).chain(BlockFormat::ALL.map(Some));
        for format in formats {
            for path in [
                LinearPath::Gemv,
                LinearPath::Staged,
                LinearPath::Subgroup {
                    rows: subgroup_rows(4),
                },
                LinearPath::Subgroup {
                    rows: subgroup_rows(128),
                },
                LinearPath::Rows,
                LinearPath::Tiled,
            ] {
                if path == LinearPath::Staged && block_dot(format).is_none() {
                    continue;
                }
                for gated in [None, Some(UnaryKind::GeluTanh), Some(UnaryKind::Silu)] {
                    let key = KernelKey::new(LinearKey {
                        path,
                        format,
                        bias: true,
                        gated,
                        act: Float::F32,
                        out: Float::F32,
                    });
                    assert!(key.kernel().invocations() <= 256);
                    assert!(key.kernel().storage_bindings() <= 8);
                    assert!(workgroup_storage_bytes(&key) <= 16384);
                    let text = source(&key).unwrap();
                    assert!(text.contains(decoder(format)));
                    // Every activation is read through x_at (the gated form's prologue): the
                    // binding `x` is indexed there alone (comments aside).
                    let code: String = text
                        .lines()
                        .map(|line| line.split("//").next().unwrap_or(""))
                        .collect::<Vec<_>>()
                        .join("\n");
                    let reads = code
                        .match_indices("x[")
                        .filter(|&(at, _)| {
                            !code[..at]
                                .chars()
                                .next_back()
                                .is_some_and(|c| c.is_alphanumeric() || c == '_')
                        })
                        .count();
                    assert_eq!(reads, 1, "{key:?}: x read outside x_at");
                    assert_eq!(text.contains("* f32(gate[i])"), gated.is_some(), "{key:?}");
                    if path == LinearPath::Rows {
                        assert!(!text.contains("workgroupBarrier"), "{key:?}: a barrier");
                    }
                    if let LinearPath::Subgroup { .. } = path {
                        assert!(text.contains("subgroupAdd(acc)"), "{key:?}");
                    }
                }
            }
        }
    }
}

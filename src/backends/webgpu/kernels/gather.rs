//! Embedding gather. Ids that are program inputs are range-checked on the host before anything
//! is dispatched (see `execute.rs`); ids computed on the GPU are checked by the kernel, which
//! never reads out of bounds and raises the op's tag in the status word instead.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::linear::{
    WeightFormat, decode_library, decoder, row_bytes, weight_format,
};
use crate::backends::webgpu::kernels::wgsl::{Float, Precision};
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms,
    Wgsl, row_chunks, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::Gather;
use crate::program::{DType, TensorDecl, TensorId};

const GATHER: &str = include_str!("gather.wgsl");
const GATHER_BLOCKS: &str = include_str!("gather_blocks.wgsl");

/// The f32 table's uniform block.
const GATHER_PARAMS: [Field; 1] = [Field::vec4(
    "head",
    "x: output element count, y: H, z: V, w: op tag",
)];

/// The block-format table's uniform block.
const GATHER_BLOCKS_PARAMS: [Field; 2] = [
    Field::vec4(
        "head",
        "x: 8-value units in out, y: units per row, z: V, w: op tag",
    ),
    Field::vec4(
        "dims",
        "x: first table row bound (a table larger than one binding is bound and run by row\n\
         ranges), y: rows bound, z: H (the decoder's row length), w: bytes per table row",
    ),
];

/// Embedding gather kernel with ids of the given dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GatherKey {
    /// The ids' dtype.
    pub ids: DType,
    /// Invocations per workgroup.
    pub wg: u32,
    /// The table's block format (`None`: f32, one thread per value; else one thread per 8
    /// values decoded with `linear_decode.wgsl`).
    pub table: WeightFormat,
    /// The element type of a dense table (f32 unless it is an f16 activation).
    pub dense: Float,
    /// The element type of `out` (`Act`).
    pub out: Float,
}

impl Kernel for GatherKey {
    fn storage_bindings(&self) -> u32 {
        4
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        let load = match self.ids {
            DType::I64 => {
                "    let lo = ids[2u * s];\n    let hi = ids[2u * s + 1u];\n    \
                 return vec2<u32>(lo, u32(hi == 0u && lo < p.head.z));"
            }
            DType::I32 => {
                "    let w = ids[s];\n    \
                 return vec2<u32>(w, u32(bitcast<i32>(w) >= 0 && w < p.head.z));"
            }
            // u8 is widened to one word; f32 ids are refused before planning.
            DType::U8 | DType::F32 | DType::Block(_) => {
                "    let w = ids[s];\n    return vec2<u32>(w, u32(w < p.head.z));"
            }
        };
        let mut w = Wgsl::new(if self.out == Float::F16 {
            Precision::F16
        } else {
            Precision::F32
        });
        let body = match self.table {
            None => {
                w.uniforms(&GATHER_PARAMS);
                w.storage("table", Elem::Float(self.dense));
                GATHER
            }
            Some(_) => {
                w.uniforms(&GATHER_BLOCKS_PARAMS);
                w.storage("w", Elem::U32);
                GATHER_BLOCKS
            }
        };
        w.storage("ids", Elem::U32);
        w.storage("out", Elem::Act);
        w.storage("status", Elem::Atomic);
        if self.table.is_some() {
            w.push(decode_library());
        }
        w.push(&format!(
            "// The id at position s and whether it lies in 0..V ({}-typed ids).\n\
             fn lookup(s: u32) -> vec2<u32> {{\n{load}\n}}",
            self.ids.name()
        ));
        let body =
            crate::backends::webgpu::kernels::wgsl::fill(body, &[("DECODE", &decoder(self.table))]);
        w.element_main(self.wg, "p.head.x", &body);
        w
    }
}

impl GpuOp for Gather {
    fn dispatches(&self, ctx: &PlanContext<'_>, index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.out])?;
        gather(ctx, index + 1, self.table, self.ids, self.out)
    }

    fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let wg = config.workgroup_size;
        let table = tensors
            .get(self.table as usize)
            .and_then(|t| weight_format(t.dtype, "gather").ok());
        tensors
            .get(self.ids as usize)
            .zip(table)
            .map(|(ids, table)| {
                KernelKey::new(GatherKey {
                    ids: ids.dtype,
                    wg,
                    table,
                    dense: dense_float(table, floats.float(self.table)),
                    out: floats.float(self.out),
                })
            })
            .into_iter()
            .collect()
    }
}

/// The dense-table element type of a key: `float` for a dense table, f32 (unused) for a block
/// format.
fn dense_float(format: WeightFormat, float: Float) -> Float {
    if format.is_some() { Float::F32 } else { float }
}

/// `out = table[ids]`; `tag` (op index + 1) identifies the op in the status word.
///
/// # Errors
/// `InvalidProgram` for a table that is not `[V, H]`, float ids, or an `out` that is not
/// `ids.shape + [H]`; `OutOfResources` for grids or tags too large.
fn gather(
    ctx: &PlanContext<'_>,
    tag: usize,
    table: TensorId,
    ids: TensorId,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let [vocab, hidden] = *ctx.shape(table)? else {
        return Err(Error::invalid_program(format!(
            "gather: table has shape {:?}, expected [V, H]",
            ctx.shape(table)?
        )));
    };
    let ids_dtype = ctx.dtype(ids)?;
    if ids_dtype == DType::F32 {
        return Err(Error::invalid_program(
            "gather: ids must be integers, got f32",
        ));
    }
    let mut expected = ctx.shape(ids)?.to_vec();
    expected.push(hidden);
    if ctx.shape(out)? != expected.as_slice() {
        return Err(Error::invalid_program(format!(
            "gather: out has shape {:?}, expected {expected:?}",
            ctx.shape(out)?
        )));
    }
    let format = weight_format(ctx.dtype(table)?, "gather")?;
    let n = ctx.numel(out)?;
    let key = KernelKey::new(GatherKey {
        ids: ids_dtype,
        wg: ctx.config.workgroup_size,
        table: format,
        dense: dense_float(format, ctx.float(table)),
        out: ctx.float(out),
    });
    let bindings = |table_binding| {
        vec![
            table_binding,
            Binding::Tensor(ids),
            Binding::Tensor(out),
            Binding::Status,
        ]
    };
    let Some(_) = format else {
        let Some(workgroups) = ctx.grid_for_threads(n)? else {
            return Ok(Vec::new());
        };
        return Ok(vec![Dispatch {
            key,
            uniforms: Uniforms::new(&GATHER_PARAMS)
                .vec4(
                    "head",
                    [
                        to_u32(n, "element count")?,
                        to_u32(hidden, "embedding width")?,
                        to_u32(vocab, "vocabulary size")?,
                        to_u32(tag, "op tag")?,
                    ],
                )
                .finish()?,
            bindings: bindings(Binding::Tensor(table)),
            workgroups,
        }]);
    };
    let row_bytes = row_bytes(format, hidden, "gather")?;
    let per_row = hidden.div_ceil(8);
    let units = ctx.numel(ids)? * per_row;
    let Some(workgroups) = ctx.grid_for_threads(units)? else {
        return Ok(Vec::new());
    };
    // A table larger than one storage binding runs by row ranges, each bound alone: every
    // dispatch reads all ids and writes the rows whose ids fall in its range.
    let chunks = row_chunks(
        vocab,
        u64::from(row_bytes),
        ctx.max_binding,
        ctx.storage_alignment,
    )?;
    let split = chunks.len() > 1;
    let mut dispatches = Vec::with_capacity(chunks.len());
    for (first, rows) in chunks {
        // Table byte offsets within one binding must fit the kernel's u32 arithmetic.
        to_u32(rows.saturating_mul(row_bytes as usize), "table bytes")?;
        let table_binding = if split {
            Binding::Slice {
                tensor: table,
                offset: first as u64 * u64::from(row_bytes),
                bytes: rows as u64 * u64::from(row_bytes),
            }
        } else {
            Binding::Tensor(table)
        };
        dispatches.push(Dispatch {
            key: key.clone(),
            uniforms: Uniforms::new(&GATHER_BLOCKS_PARAMS)
                .vec4(
                    "head",
                    [
                        to_u32(units, "element count")?,
                        to_u32(per_row, "embedding width")?,
                        to_u32(vocab, "vocabulary size")?,
                        to_u32(tag, "op tag")?,
                    ],
                )
                .vec4(
                    "dims",
                    [
                        to_u32(first, "first row")?,
                        to_u32(rows, "rows")?,
                        to_u32(hidden, "embedding width")?,
                        row_bytes,
                    ],
                )
                .finish()?,
            bindings: bindings(table_binding),
            workgroups,
        });
    }
    Ok(dispatches)
}

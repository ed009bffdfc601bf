//! `TokenMask` on the GPU: one thread per logit; the threads of a workgroup share a handful of
//! mask words (one per 32 logits), so the mask costs `V / 8` bytes of reads per row beside the
//! logits' own read and write. Selection only: the result is exactly the CPU's.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms,
    Wgsl, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::TokenMask;
use crate::program::{DType, TensorDecl};

/// The kernel's uniform block.
const TOKEN_MASK_PARAMS: [Field; 2] = [
    Field::vec4(
        "head",
        "x: rows, y: V, z: mask words per row, w: mask rows (1: one mask for every row)",
    ),
    Field::vec4(
        "tail",
        "x: the bits of -inf (a uniform: Tint refuses -inf as a constant expression)",
    ),
];

/// out = logits where the token's mask bit is set, else -inf: the element body (after the
/// builder's element prologue, i < rows * V).
const TOKEN_MASK: &str = r"
    let v = p.head.y;
    let row = i / v;
    let token = i - row * v;
    let mask_row = select(row, 0u, p.head.w == 1u);
    let word = mask[mask_row * p.head.z + token / 32u];
    let allowed = ((word >> (token % 32u)) & 1u) != 0u;
    out[i] = select(bitcast<f32>(p.tail.x), logits[i], allowed);
";

/// Token-mask kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TokenMaskKey {
    /// Threads per workgroup.
    pub wg: u32,
}

impl Kernel for TokenMaskKey {
    fn storage_bindings(&self) -> u32 {
        3
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        0
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::f32();
        w.uniforms(&TOKEN_MASK_PARAMS);
        w.storage("logits", Elem::Act);
        w.storage("mask", Elem::U32);
        w.storage("out", Elem::Act);
        w.element_main(self.wg, "p.head.x * p.head.y", TOKEN_MASK);
        w
    }
}

impl GpuOp for TokenMask {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.logits, self.out])?;
        if ctx.dtype(self.mask)? != DType::I32 {
            return Err(Error::invalid_program("token_mask: mask must be i32"));
        }
        let [rows, v] = *ctx.shape(self.logits)? else {
            return Err(Error::invalid_program("token_mask: logits must be [R, V]"));
        };
        let words = v.div_ceil(32);
        let mask_rows = match *ctx.shape(self.mask)? {
            [m, w] if w == words && (m == 1 || m == rows) => m,
            ref other => {
                return Err(Error::invalid_argument(format!(
                    "token_mask: a mask of shape {other:?} for {rows} rows of {v} logits; \
                     [1 or {rows}, {words}] expected"
                )));
            }
        };
        let wg = ctx.config.workgroup_size;
        let total = rows
            .checked_mul(v)
            .ok_or_else(|| Error::out_of_resources("token_mask: too many logits"))?;
        to_u32(total, "logits")?;
        let Some(workgroups) = ctx.grid_for_threads(total)? else {
            return Ok(Vec::new());
        };
        Ok(vec![Dispatch {
            key: KernelKey::new(TokenMaskKey { wg }),
            uniforms: Uniforms::new(&TOKEN_MASK_PARAMS)
                .vec4(
                    "head",
                    [
                        to_u32(rows, "rows")?,
                        to_u32(v, "row length")?,
                        to_u32(words, "mask words")?,
                        to_u32(mask_rows, "mask rows")?,
                    ],
                )
                .vec4("tail", [f32::NEG_INFINITY.to_bits(), 0, 0, 0])
                .finish()?,
            bindings: vec![
                Binding::Tensor(self.logits),
                Binding::Tensor(self.mask),
                Binding::Tensor(self.out),
            ],
            workgroups,
        }])
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        vec![KernelKey::new(TokenMaskKey {
            wg: config.workgroup_size,
        })]
    }
}

//! `TokenMask` on the GPU: one thread per logit; the threads of a workgroup share a handful of
//! mask words (one per 32 logits), so the mask costs `V / 8` bytes of reads per row beside the
//! logits' own read and write. Selection only: the result is exactly the CPU's.

use crate::backends::webgpu::kernels::source::with_wg;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::TokenMask;
use crate::program::{DType, TensorDecl};

const TOKEN_MASK: &str = r"
// out = logits where the token's mask bit is set, else -inf.
struct Params {
    // x: rows, y: V, z: mask words per row, w: mask rows (1: one mask for every row)
    head: vec4<u32>,
    // x: the bits of -inf (a uniform: Tint refuses -inf as a constant expression)
    tail: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> mask: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * {{WG}}u + lid;
    let v = p.head.y;
    if (i >= p.head.x * v) {
        return;
    }
    let row = i / v;
    let token = i - row * v;
    let mask_row = select(row, 0u, p.head.w == 1u);
    let word = mask[mask_row * p.head.z + token / 32u];
    let allowed = ((word >> (token % 32u)) & 1u) != 0u;
    out[i] = select(bitcast<f32>(p.tail.x), logits[i], allowed);
}
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

    fn body(&self) -> String {
        with_wg(TOKEN_MASK, self.wg)
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
            uniforms: Uniforms::new()
                .vec4([
                    to_u32(rows, "rows")?,
                    to_u32(v, "row length")?,
                    to_u32(words, "mask words")?,
                    to_u32(mask_rows, "mask rows")?,
                ])
                .vec4([f32::NEG_INFINITY.to_bits(), 0, 0, 0])
                .finish(),
            bindings: vec![
                Binding::Tensor(self.logits),
                Binding::Tensor(self.mask),
                Binding::Tensor(self.out),
            ],
            workgroups,
        }])
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        vec![KernelKey::new(TokenMaskKey {
            wg: config.workgroup_size,
        })]
    }
}

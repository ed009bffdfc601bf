//! `Rope` on the GPU: one thread per output element (its pair's angle recomputed by both
//! halves of the pair; the op is memory-bound). The inverse frequencies travel in the
//! dispatch's uniform block, computed on the host by [`Rope::inverse_frequencies`] exactly as
//! the CPU backend uses them, so both form the same f32 angle `f32(p) * inv_freq[i]`; `sin`
//! and `cos` come from the same Cody-Waite reduction and Cephes polynomials as the CPU's
//! `webdelegate_kernels::math::sin_cos` (WGSL's own `sin`/`cos` promise only 2^-11 absolute, and only on
//! `[-pi, pi]`). Positions are only multiplied, never used as an index.
//!
//! Bound: the uniform table holds at most [`MAX_PAIRS`] pairs (`dims <= 8192`, 16 KiB of the
//! 64 KiB uniform binding every device offers); larger `dims` are `NotSupported` here.

use crate::backends::webgpu::kernels::source::with_wg;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms, to_u32,
};
use crate::error::{Error, Result};
use crate::program::TensorDecl;
use crate::program::ops::{Rope, RopeStyle};

/// The most rotated pairs (`dims / 2`) one dispatch's uniform table holds.
pub(crate) const MAX_PAIRS: usize = 4096;

const ROPE: &str = r"
// Rotary embedding over [.., S, H, D] rows, one thread per element.
struct Params {
    // x: elements, y: D, z: H, w: S
    head: vec4<u32>,
    // x: rotated pairs (dims / 2)
    rot: vec4<u32>,
    inv_freq: array<vec4<f32>, {{VEC4S}}>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> positions: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// (sin t, cos t): t - q pi/2 with pi/2 in three parts, Cephes' sinf/cosf polynomials on
// [-pi/4, pi/4], then the quadrant q mod 4 (the CPU's webdelegate_kernels::math::sin_cos).
fn sin_cos(t: f32) -> vec2<f32> {
    let q = floor(t * 0.63661977236758134 + 0.5);
    let r = clamp(((t - q * 1.5703125) - q * 4.837513e-4) - q * 7.54979e-8, -0.8, 0.8);
    let z = r * r;
    let s = r + r * z * (-1.6666655e-1 + z * (8.332161e-3 + z * -1.9515296e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.1666646e-2 + z * (-1.3887316e-3 + z * 2.4433157e-5));
    let quadrant = u32(q - 4.0 * floor(q * 0.25)) & 3u;
    var v = vec2<f32>(s, c);
    if ((quadrant & 1u) == 1u) {
        v = vec2<f32>(c, -s);
    }
    if ((quadrant & 2u) == 2u) {
        v = -v;
    }
    return v;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * {{WG}}u + lid;
    if (i >= p.head.x) {
        return;
    }
    let d = i % p.head.y;
    let row = i / p.head.y;
    let s = (row / p.head.z) % p.head.w;
    let half = p.rot.x;
    if (d >= 2u * half) {
        out[i] = x[i];
        return;
    }
    {{PAIR}}
    let inv = p.inv_freq[pair / 4u][pair % 4u];
    let sc = sin_cos(f32(bitcast<i32>(positions[s])) * inv);
    let x0 = x[a];
    let x1 = x[a + offset];
    if (first) {
        out[i] = x0 * sc.y - x1 * sc.x;
    } else {
        out[i] = x0 * sc.x + x1 * sc.y;
    }
}
";

/// Rotary embedding kernel of one style, with a table of `vec4s` inverse-frequency vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RopeKey {
    /// Which elements pair up.
    pub style: RopeStyle,
    /// `vec4<f32>`s of the uniform frequency table (`ceil(dims / 8)`).
    pub vec4s: u32,
    /// Invocations per workgroup.
    pub wg: u32,
}

impl Kernel for RopeKey {
    fn storage_bindings(&self) -> u32 {
        3
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn body(&self) -> String {
        let pair = match self.style {
            RopeStyle::Neox => {
                "let first = d < half;
    let pair = select(d - half, d, first);
    let a = select(i - half, i, first);
    let offset = half;"
            }
            RopeStyle::GptJ => {
                "let first = (d & 1u) == 0u;
    let pair = d / 2u;
    let a = i - (d & 1u);
    let offset = 1u;"
            }
        };
        with_wg(ROPE, self.wg)
            .replace("{{VEC4S}}", &self.vec4s.to_string())
            .replace("{{PAIR}}", pair)
    }
}

/// The table's `vec4` count for `dims` rotary dims (at least one).
fn vec4s(dims: u32) -> u32 {
    (dims / 2).div_ceil(4).max(1)
}

impl GpuOp for Rope {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        let shape = ctx.shape(self.x)?;
        let rank = shape.len();
        let n = ctx.numel(self.x)?;
        if rank < 3 || ctx.numel(self.out)? != n {
            return Err(Error::invalid_program(
                "rope: x must be [.., S, H, D] and out of its size",
            ));
        }
        let (seq, heads, head_dim) = (shape[rank - 3], shape[rank - 2], shape[rank - 1]);
        if ctx.shape(self.positions)? != [seq] {
            return Err(Error::invalid_program(format!(
                "rope: positions are {:?}, expected [{seq}]",
                ctx.shape(self.positions)?
            )));
        }
        if self.dims as usize / 2 > MAX_PAIRS {
            return Err(Error::not_supported(format!(
                "rope: dims = {} exceeds the WebGPU kernel's {} rotary dims",
                self.dims,
                2 * MAX_PAIRS
            )));
        }
        if self.dims as usize > head_dim {
            return Err(Error::invalid_program("rope: dims exceed the head dim"));
        }
        let inverse = self.inverse_frequencies();
        let Some(workgroups) = ctx.grid_for_threads(n)? else {
            return Ok(Vec::new());
        };
        let vec4s = vec4s(self.dims);
        let mut table = vec![0u32; 4 * vec4s as usize];
        for (slot, f) in table.iter_mut().zip(&inverse) {
            *slot = f.to_bits();
        }
        let mut uniforms = Uniforms::new()
            .vec4([
                to_u32(n, "element count")?,
                to_u32(head_dim, "head dim")?,
                to_u32(heads, "heads")?,
                to_u32(seq, "sequence length")?,
            ])
            .vec4([to_u32(inverse.len(), "rotary pairs")?, 0, 0, 0]);
        for chunk in table.chunks_exact(4) {
            uniforms = uniforms.vec4([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        Ok(vec![Dispatch {
            key: KernelKey::new(RopeKey {
                style: self.style,
                vec4s,
                wg: ctx.config.workgroup_size,
            }),
            uniforms: uniforms.finish(),
            bindings: vec![
                Binding::Tensor(self.x),
                Binding::Tensor(self.positions),
                Binding::Tensor(self.out),
            ],
            workgroups,
        }])
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        if self.dims as usize / 2 > MAX_PAIRS {
            return Vec::new();
        }
        vec![KernelKey::new(RopeKey {
            style: self.style,
            vec4s: vec4s(self.dims),
            wg: config.workgroup_size,
        })]
    }
}

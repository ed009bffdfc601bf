//! `Argmax` on the GPU: one workgroup per row (32 threads up to 1024 elements, the configured
//! size above, see `rows.rs`); each thread strides over the row keeping its best
//! `(order_key, index)`, then a tree reduction in workgroup memory. A single row of 262,144
//! logits is one workgroup of 256 threads reading 1 MiB with coalesced loads (1024 per
//! thread): no second pass and no scratch buffer. Comparisons only, so the result is exactly
//! the CPU's.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::rows::{row_workgroup, row_workgroups};
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms,
    Wgsl, grid_1d, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::Argmax;
use crate::program::{DType, TensorDecl};

/// WGSL `order_key(v)`: the CPU's [`order_key`](crate::program::ops::order_key), on bits (so
/// no compiler's NaN assumptions apply), and `better(ka, ia, kb, ib)`: rank order with ties to
/// the lower index.
pub(crate) const ORDER_KEY: &str = r"
fn order_key(v: f32) -> u32 {
    var b = bitcast<u32>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        b = 0xff800000u;
    }
    if ((b & 0x7fffffffu) == 0u) {
        b = 0u;
    }
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn better(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ka > kb || (ka == kb && ia < ib);
}
";

/// The kernel's uniform block.
const ARGMAX_PARAMS: [Field; 1] = [Field::vec4("head", "x: rows, y: V")];

/// Index of the largest order_key of each row (ties: lowest index; empty rows: -1): the row
/// body (after the builder's row prologue).
const ARGMAX: &str = r"
    let v = h;
    var key = 0u;
    var index = 0xffffffffu;
    for (var j = lid; j < v; j = j + WG) {
        let k = order_key(x[base + j]);
        if (k > key || index == 0xffffffffu) {
            key = k;
            index = j;
        }
    }
    best_key[lid] = key;
    best_index[lid] = index;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            let kb = best_key[lid + s];
            let ib = best_index[lid + s];
            if (ib != 0xffffffffu && (best_index[lid] == 0xffffffffu
                || better(kb, ib, best_key[lid], best_index[lid]))) {
                best_key[lid] = kb;
                best_index[lid] = ib;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        out[row] = best_index[0];
    }
";

/// Row argmax kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ArgmaxKey {
    /// Threads per row.
    pub wg: u32,
}

impl Kernel for ArgmaxKey {
    fn storage_bindings(&self) -> u32 {
        2
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        self.wg * 8
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::f32();
        w.uniforms(&ARGMAX_PARAMS);
        w.storage("x", Elem::Act);
        w.storage("out", Elem::U32);
        w.push(ORDER_KEY);
        w.push(
            "var<workgroup> best_key: array<u32, WG>;\nvar<workgroup> best_index: array<u32, WG>;",
        );
        w.row_main(self.wg, ARGMAX);
        w
    }
}

impl GpuOp for Argmax {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x])?;
        if ctx.dtype(self.out)? != DType::I32 {
            return Err(Error::invalid_program("argmax: out must be i32"));
        }
        let v = ctx.shape(self.x)?.last().copied().unwrap_or(0);
        let rows = ctx.numel(self.out)?;
        if rows * v != ctx.numel(self.x)? {
            return Err(Error::invalid_program(
                "argmax: out must have one element per row of x",
            ));
        }
        let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
            return Ok(Vec::new());
        };
        Ok(vec![Dispatch {
            key: KernelKey::new(ArgmaxKey {
                wg: row_workgroup(ctx, v),
            }),
            uniforms: Uniforms::new(&ARGMAX_PARAMS)
                .vec4(
                    "head",
                    [to_u32(rows, "rows")?, to_u32(v, "row length")?, 0, 0],
                )
                .finish()?,
            bindings: vec![Binding::Tensor(self.x), Binding::Tensor(self.out)],
            workgroups,
        }])
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        _floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        row_workgroups(config)
            .map(|wg| KernelKey::new(ArgmaxKey { wg }))
            .to_vec()
    }
}

//! `MatMul` on the GPU: shapes, transposes as strides, batch broadcasting, the grid, and the
//! three kernels (two tilings, `matmul_tiled.wgsl`, and the naive baseline, `matmul_naive.wgsl`).

use crate::backends::webgpu::kernels::wgsl::Float;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, MatMulKernel,
    PlanContext, Uniforms, Wgsl, coalesce, to_u32,
};
use crate::error::{Error, ErrorCode, Result};
use crate::program::TensorDecl;
use crate::program::geometry::broadcast_strides;
use crate::program::ops::MatMul;

const MATMUL_TILED: &str = include_str!("matmul_tiled.wgsl");
const MATMUL_NAIVE: &str = include_str!("matmul_naive.wgsl");

/// Every matmul kernel's uniform block.
const MATMUL_PARAMS: [Field; 5] = [
    Field::vec4("dims", "x: M, y: N, z: K, w: batch rank (<= 4)"),
    Field::vec4("strides", "x: a_sm, y: a_sk, z: b_sk, w: b_sn"),
    Field::vec4("batch_shape", ""),
    Field::vec4("a_batch_strides", ""),
    Field::vec4("b_batch_strides", ""),
];

/// Workgroup shape of a matmul kernel: (threads x, threads y, rows per thread, columns per
/// thread, k tile). Tiled kernels keep 4 columns per thread (one `vec4` accumulator per row).
pub(crate) const fn matmul_geometry(kernel: MatMulKernel) -> (u32, u32, u32, u32, u32) {
    match kernel {
        MatMulKernel::Tiled64 => (16, 8, 8, 4, 16),
        MatMulKernel::Tiled32 => (8, 8, 4, 4, 16),
        MatMulKernel::Naive => (8, 8, 1, 1, 0),
    }
}

/// Batched matmul kernel; `f16` stages tiles in f16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MatMulKey {
    /// The variant.
    pub kernel: MatMulKernel,
    /// Whether a bias is bound (binding 4).
    pub bias: bool,
    /// Whether tiles are staged in f16 (tiled variants on devices with shader-f16).
    pub f16: bool,
}

impl MatMulKey {
    /// The key `config` gives a matmul with or without bias.
    pub(crate) fn of(config: KernelConfig, bias: bool) -> Self {
        Self {
            kernel: config.matmul,
            bias,
            f16: config.f16 && config.matmul != MatMulKernel::Naive,
        }
    }

    fn staged_f16(&self) -> bool {
        self.f16 && self.kernel != MatMulKernel::Naive
    }
}

impl Kernel for MatMulKey {
    fn storage_bindings(&self) -> u32 {
        3 + u32::from(self.bias)
    }

    fn invocations(&self) -> u32 {
        let (wgx, wgy, ..) = matmul_geometry(self.kernel);
        wgx * wgy
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        match self.kernel {
            MatMulKernel::Tiled64 | MatMulKernel::Tiled32 => {
                let (wgx, wgy, rm, rn, tk) = matmul_geometry(self.kernel);
                let elements = wgy * rm * tk + tk * wgx * rn;
                elements * if self.f16 { 2 } else { 4 }
            }
            MatMulKernel::Naive => 0,
        }
    }

    fn wgsl(&self) -> Wgsl {
        let (wgx, wgy, rm, rn, tk) = matmul_geometry(self.kernel);
        let template = match self.kernel {
            MatMulKernel::Naive => MATMUL_NAIVE,
            MatMulKernel::Tiled64 | MatMulKernel::Tiled32 => MATMUL_TILED,
        };
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
        let stage = if self.staged_f16() {
            Float::F16
        } else {
            Float::F32
        };
        w.alias("Stage", Elem::Float(stage));
        w.template(
            template,
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
        w
    }
}

impl GpuOp for MatMul {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.a, self.b, self.out])?;
        ctx.require_f32(self.bias.as_slice())?;
        matmul(ctx, self)
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        vec![KernelKey::new(MatMulKey::of(config, self.bias.is_some()))]
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
    let (wgx, wgy, rm, rn, _) = matmul_geometry(ctx.config.matmul);
    let groups = [
        n.div_ceil((wgx * rn) as usize),
        m.div_ceil((wgy * rm) as usize),
        batch,
    ];
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
        key: KernelKey::new(MatMulKey::of(ctx.config, op.bias.is_some())),
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
        for kernel in [MatMulKernel::Tiled64, MatMulKernel::Tiled32] {
            let (wgx, wgy, _, rn, tk) = matmul_geometry(kernel);
            assert_eq!(rn, 4, "tiled kernels keep one vec4 of columns per thread");
            assert!(wgx * wgy <= 256 && tk > 0);
            let key = KernelKey::new(MatMulKey {
                kernel,
                bias: true,
                f16: false,
            });
            assert!(workgroup_storage_bytes(&key) <= 16384);
            assert!(source(&key).unwrap().contains("var<workgroup> a_tile"));
        }
    }
}

//! `Sample` on the GPU (`sample.wgsl`): one workgroup per row of `[R, V]` logits. Greedy rows
//! (temperature <= 0 or top-k 1) take the argmax reduction of `argmax.rs` (the same result as
//! the `Argmax` op, bit for bit). Otherwise the k-th best key is found by a radix select (four
//! passes over the row with a 256-bin histogram in workgroup memory, plus index passes only
//! when equal values straddle the boundary, so ties keep the lowest indices), the k candidates
//! are collected and bitonic-sorted in workgroup memory (k <= `Sample::K_MAX` = 1024: 8 KiB),
//! and one thread runs temperature, top-p and the pick in f32, in the CPU's summation order.
//! Reads of the row: 1 (greedy) or 5 to 8; only the chosen id is written.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::argmax::ORDER_KEY;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms,
    Wgsl, grid_1d, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::Sample;
use crate::program::{DType, TensorDecl};

const SAMPLE: &str = include_str!("sample.wgsl");
const SAMPLE_MAIN: &str = include_str!("sample_main.wgsl");

/// The kernel's uniform block.
const SAMPLE_PARAMS: [Field; 1] = [Field::vec4("head", "x: rows, y: V")];

/// Token-selection kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SampleKey {
    /// Threads per row.
    pub wg: u32,
}

impl Kernel for SampleKey {
    fn storage_bindings(&self) -> u32 {
        3
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        // Histogram, candidates (key + index), the counter and the shared vec4.
        (256 + 2 * Sample::K_MAX as u32 + 1 + 4) * 4
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::f32();
        w.uniforms(&SAMPLE_PARAMS);
        w.storage("logits", Elem::Act);
        w.storage("knobs", Elem::F32);
        w.storage("out", Elem::U32);
        w.push(ORDER_KEY);
        w.constant("K_MAX", Sample::K_MAX as u32);
        w.push(SAMPLE);
        w.row_main(self.wg, SAMPLE_MAIN);
        w
    }
}

/// Threads per row: the configured size, at most `K_MAX` (the greedy reduction reuses the
/// candidate arrays, one slot per thread).
fn sample_workgroup(config: KernelConfig) -> u32 {
    config.workgroup_size.min(Sample::K_MAX as u32)
}

impl GpuOp for Sample {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.logits, self.knobs])?;
        if ctx.dtype(self.out)? != DType::I32 {
            return Err(Error::invalid_program("sample: out must be i32"));
        }
        let shape = ctx.shape(self.logits)?;
        let [rows, v] = *shape else {
            return Err(Error::invalid_program("sample: logits must be [R, V]"));
        };
        if ctx.shape(self.knobs)? != [rows, 4] || ctx.numel(self.out)? != rows {
            return Err(Error::invalid_program(
                "sample: knobs must be [R, 4] and out [R]",
            ));
        }
        let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
            return Ok(Vec::new());
        };
        Ok(vec![Dispatch {
            key: KernelKey::new(SampleKey {
                wg: sample_workgroup(ctx.config),
            }),
            uniforms: Uniforms::new(&SAMPLE_PARAMS)
                .vec4(
                    "head",
                    [to_u32(rows, "rows")?, to_u32(v, "row length")?, 0, 0],
                )
                .finish()?,
            bindings: vec![
                Binding::Tensor(self.logits),
                Binding::Tensor(self.knobs),
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
        vec![KernelKey::new(SampleKey {
            wg: sample_workgroup(config),
        })]
    }
}

//! The WGSL kernels and, per op (or op family sharing a kernel), the Rust that turns one op with
//! concrete shapes into dispatches: which kernel, which uniform words, which tensors bound in which order, how many
//! workgroups.
//!
//! Conventions every kernel follows:
//! - Every kernel is written with the module builder (`wgsl.rs`): binding 0 is a uniform block
//!   declared once as a list of `vec4` fields (`uniforms.rs`: floats travel as their bits), which
//!   also packs the dispatch's words; bindings 1.. are storage buffers, numbered by the builder
//!   in declaration order, all `read_write`: WebGPU forbids one buffer (the activation arena)
//!   being bound read-only and writable in the same dispatch. Writable bindings of one dispatch
//!   must not overlap either (browsers check it, native Vulkan does not), so the planner gives a
//!   repeated operand its own copy (see `alias.rs`).
//! - Tensors are arrays of 32-bit words: f32 and i32 one word per element, u8 widened to one
//!   word, i64 two words (its little-endian bytes, low word first). WGSL has neither i64 nor u8.
//!   Float element types are the builder's `Act`, `Kv` and `Acc` (f32 unless the kernel's key
//!   asks for an f16 [`Precision`](wgsl::Precision)). The exceptions to whole words, both 2
//!   bytes per element (`array<f16>`, the buffer or arena slot padded to a word):
//!   - under [`KernelConfig::kv_f16`] attention's cache states, read and written only by the
//!     attention kernels;
//!   - under [`KernelConfig::act_f16`] the arena's float intermediates that
//!     `plan::f16_activations` picks ([`TensorFloats`]: never a program input, output,
//!     parameter or state). A kernel's key holds the element type of every float binding it
//!     has: the row kernels, RoPE and attention one [`Precision`](wgsl::Precision) for all
//!     their activations (`Act`), the element-wise kernels, the gather and the linear one
//!     [`Float`](wgsl::Float) per binding (`f32(x[i])` in, `OutElem(v)` out), so those
//!     convert at the f32 boundaries (an f32 program input read into f16 intermediates, f16
//!     activations into f32 logits). Every kernel reads an f16 element into f32 and
//!     accumulates in f32 (`Acc`); only stores round to f16. Copies of an f16 tensor
//!     (`alias.rs` shadows) move its words (`PlanContext::words`).
//! - 1-D kernels index `(wid.y * nwg.x + wid.x) * WG + lid`; grids over
//!   `maxComputeWorkgroupsPerDimension` fold into a second dimension (see [`grid_1d`]).
//! - Each kernel's key (a [`Kernel`]) sits in its file beside its WGSL and says its bindings,
//!   invocations and workgroup memory; each op's [`GpuOp`] says its dispatches and the kernels
//!   `init` compiles for it.
//! - Every workgroup size fits the device's `maxComputeInvocationsPerWorkgroup`, which the
//!   backend queries (SwiftShader in headless Chromium allows 256).

pub(crate) mod argmax;
pub(crate) mod attention;
pub(crate) mod convert;
pub(crate) mod elementwise;
pub(crate) mod gather;
pub(crate) mod layout;
pub(crate) mod linear;
pub(crate) mod matmul;
pub(crate) mod patch;
pub(crate) mod pool;
pub(crate) mod rms_norm;
pub(crate) mod rope;
pub(crate) mod rows;
pub(crate) mod sample;
pub(crate) mod source;
pub(crate) mod token_mask;
pub(crate) mod uniforms;
#[cfg(all(test, native))]
mod variants;
pub(crate) mod wgsl;

pub(crate) use uniforms::{Field, Uniforms};
pub(crate) use wgsl::{Elem, Precision, Wgsl};

use crate::error::{Error, Result};
use crate::program::{DType, TensorDecl, TensorId};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Most dims a broadcast, copy or mask view may have after coalescing.
pub(crate) const MAX_DIMS: usize = 8;

/// The matmul kernels (compile spec `matmul_kernel`; geometries and the pick: `matmul.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum MatMulKernel {
    /// Register-tiled, the output tile picked per product: the largest up to this one that
    /// still gives enough workgroups to fill the GPU, else 32 x 32 (the default).
    Auto(matmul::MatMulTile),
    /// Register-tiled with this output tile.
    Tiled(matmul::MatMulTile),
    /// The first tiled kernel: 64 x 64 tiles of 16 x 8 threads, 8 x 4 outputs each (the
    /// benchmarks' baseline).
    TiledV1,
    /// One thread per output, no workgroup memory (8 x 8 threads).
    Naive,
}

/// The `linear` GEMV kernels (one activation row), chosen per program (compile spec
/// `gemv_kernel`, else by the adapter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum GemvKernel {
    /// One output row per invocation, no workgroup memory and no barriers (for adapters that
    /// emulate the GPU on the CPU, where a barrier switches between every invocation's fiber).
    Rows,
    /// Many threads per output row, the activation staged in workgroup memory and a workgroup
    /// reduction (for real GPUs without subgroup operations).
    Workgroup,
    /// As `Workgroup`, the weights' blocks first copied into workgroup memory by neighbouring
    /// threads reading neighbouring words, then dotted whole (Q8_0, Q5_0, Q4_K, Q6_K; other
    /// formats run `Workgroup`). Chosen only by compile spec: not yet measured on a GPU.
    Staged,
    /// As `Workgroup`, but each subgroup owns whole output rows and sums them with
    /// `subgroupAdd` (devices with subgroup operations; no workgroup reduction).
    Subgroup,
}

/// One op's WebGPU planning: implemented in the op's kernel file, dispatched from `Op` by
/// `dispatch.rs` (derived from the program's one op list).
pub(crate) trait GpuOp {
    /// The dispatches of the op for the bound shapes in `ctx` (none for views and empty
    /// tensors). `index` is the op's position in the program.
    ///
    /// # Errors
    /// `InvalidProgram` when the op does not fit its shapes or dtypes; `OutOfResources` or
    /// `NotSupported` beyond what the kernels address.
    fn dispatches(&self, ctx: &PlanContext<'_>, index: usize) -> Result<Vec<Dispatch>>;

    /// Every kernel the op can dispatch under `config`, whatever the shapes (what `init`
    /// compiles); `tensors` give the dtypes that specialise them.
    fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey>;
}

/// The element type each tensor is stored in on the GPU: f32 for every float tensor, except
/// those `plan::f16_activations` moved to f16 (arena intermediates only; 2 bytes per element,
/// padded to a word). Empty (everything f32) unless [`KernelConfig::act_f16`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TensorFloats {
    f16: Vec<bool>,
}

impl TensorFloats {
    /// Every float tensor in f32.
    pub(crate) fn f32() -> Self {
        Self::default()
    }

    /// The tensors flagged in `f16` stored in f16.
    pub(crate) fn from_flags(f16: Vec<bool>) -> Self {
        Self { f16 }
    }

    /// Whether tensor `id` is stored in f16.
    pub(crate) fn is_f16(&self, id: TensorId) -> bool {
        self.f16.get(id as usize).copied().unwrap_or(false)
    }

    /// Whether any tensor is stored in f16.
    pub(crate) fn any(&self) -> bool {
        self.f16.iter().any(|&f| f)
    }

    /// How many tensors are stored in f16.
    pub(crate) fn count(&self) -> usize {
        self.f16.iter().filter(|&&f| f).count()
    }

    /// The element type of tensor `id`.
    pub(crate) fn float(&self, id: TensorId) -> wgsl::Float {
        if self.is_f16(id) {
            wgsl::Float::F16
        } else {
            wgsl::Float::F32
        }
    }

    /// The precision of a kernel whose activations are `id`'s element type, its cache
    /// `base.kv` and its accumulators f32: `base` itself where `id` is f32.
    pub(crate) fn precision(&self, id: TensorId, base: Precision) -> Precision {
        if self.is_f16(id) {
            Precision {
                act: wgsl::Float::F16,
                ..base
            }
        } else {
            base
        }
    }
}

/// One WGSL kernel and its specialisation: a plain-data key (e.g. `LayerNormKey { wg: 32 }`)
/// defined next to its WGSL, which says everything `init` checks and compiles.
pub(crate) trait Kernel: fmt::Debug + Send + Sync + 'static {
    /// How many storage buffers the kernel binds (bindings 1..=n).
    fn storage_bindings(&self) -> u32;

    /// Invocations per workgroup (checked against the device at init).
    fn invocations(&self) -> u32;

    /// Workgroup memory the kernel declares, in bytes (checked against the device at init).
    fn workgroup_storage_bytes(&self) -> u32 {
        0
    }

    /// The kernel's WGSL module, specialised (`source::source` finishes and checks it).
    fn wgsl(&self) -> wgsl::Wgsl;
}

/// A compiled kernel's identity: any [`Kernel`], compared and hashed by its `Debug` text (which
/// names the key type and every field), so the pipeline cache needs no list of kernels.
#[derive(Clone)]
pub(crate) struct KernelKey {
    label: Arc<str>,
    kernel: Arc<dyn Kernel>,
}

impl KernelKey {
    /// The key of `kernel`.
    pub(crate) fn new(kernel: impl Kernel) -> Self {
        Self {
            label: format!("{kernel:?}").into(),
            kernel: Arc::new(kernel),
        }
    }

    /// The kernel.
    pub(crate) fn kernel(&self) -> &dyn Kernel {
        &*self.kernel
    }

    /// How many storage buffers the kernel binds (bindings 1..=n).
    pub(crate) fn storage_bindings(&self) -> u32 {
        self.kernel.storage_bindings()
    }

    /// A short label for pipelines and error messages, e.g. `"LayerNormKey { wg: 32 }"`.
    pub(crate) fn label(&self) -> String {
        self.label.to_string()
    }
}

impl<K: Kernel> From<K> for KernelKey {
    fn from(kernel: K) -> Self {
        Self::new(kernel)
    }
}

impl PartialEq for KernelKey {
    fn eq(&self, other: &Self) -> bool {
        self.label == other.label
    }
}

impl Eq for KernelKey {}

impl Hash for KernelKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.label.hash(state);
    }
}

impl fmt::Debug for KernelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

/// Kernel choices that hold for a whole program (from compile specs and device limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelConfig {
    /// Invocations per workgroup for 1-D and row kernels (a power of two).
    pub workgroup_size: u32,
    /// The matmul kernel.
    pub matmul: MatMulKernel,
    /// Stage matmul tiles in f16 (only when the device has shader-f16).
    pub f16: bool,
    /// Store attention's KV caches in f16 (only when the device has shader-f16, and only for a
    /// program whose every cache is a state read and written by attention alone: see
    /// `plan::f16_cache_states`).
    pub kv_f16: bool,
    /// Store activations in f16 (f32 accumulation) where `plan::f16_activations` allows: only
    /// when the device has shader-f16, and only for the arena's float intermediates that f16-ready
    /// kernels alone touch (see [`TensorFloats`]).
    pub act_f16: bool,
    /// The `linear` GEMV kernel.
    pub gemv: GemvKernel,
    /// The adapter's smallest subgroup size, where the device has subgroup operations (the
    /// subgroup GEMV sizes its workgroups' rows by it).
    pub subgroup_min_size: Option<u32>,
    /// Attention with few (head, row) pairs splits each pair's visible positions across this
    /// many workgroups, combined by a second dispatch (1: never split).
    pub attention_splits: u32,
    /// Whether neighbouring ops run as one dispatch where `fusion.rs` allows it.
    pub fusion: bool,
}

/// A storage binding of one dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// The whole storage of a tensor.
    Tensor(TensorId),
    /// Bytes `offset..offset + bytes` of a tensor's storage: a range of rows of a parameter
    /// larger than one storage binding (see [`row_chunks`]); `offset` is a multiple of the
    /// device's storage offset alignment.
    Slice {
        /// The tensor.
        tensor: TensorId,
        /// First byte, from the tensor's start.
        offset: u64,
        /// Bytes bound.
        bytes: u64,
    },
    /// The plan's status word (gather range errors).
    Status,
    /// The plan's scratch buffer, at least `bytes` long: one buffer shared by every dispatch
    /// that binds it (the largest request sets its size), for an op's intermediate results
    /// between its own dispatches; its contents do not outlive the op.
    Scratch {
        /// Bytes the dispatch needs.
        bytes: u64,
    },
}

/// Row ranges `(first, count)` of a `rows x row_bytes` weight, each at most `max_binding`
/// bytes and starting at a multiple of `alignment` bytes: one range when the whole weight fits
/// one binding, else the fewest equal ranges (the last shorter) that do.
///
/// # Errors
/// `OutOfResources` when not even one aligned row group fits a binding.
pub(crate) fn row_chunks(
    rows: usize,
    row_bytes: u64,
    max_binding: u64,
    alignment: u64,
) -> Result<Vec<(usize, usize)>> {
    let total = (rows as u64).saturating_mul(row_bytes);
    if total <= max_binding || rows == 0 {
        return Ok(vec![(0, rows)]);
    }
    let alignment = alignment.max(1);
    // Rows per chunk must keep every chunk's start aligned.
    let step = alignment / gcd(row_bytes.max(1), alignment);
    let fit = max_binding / row_bytes.max(1);
    let per_chunk = fit / step * step;
    if per_chunk == 0 {
        return Err(Error::out_of_resources(format!(
            "a weight of {rows} rows of {row_bytes} bytes exceeds one {max_binding}-byte storage \
             binding, and {step} rows (the smallest aligned row group) do not fit one either"
        )));
    }
    let per_chunk = usize::try_from(per_chunk).unwrap_or(usize::MAX);
    Ok((0..rows)
        .step_by(per_chunk)
        .map(|first| (first, per_chunk.min(rows - first)))
        .collect())
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// One recorded compute dispatch.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Dispatch {
    /// The kernel.
    pub key: KernelKey,
    /// Uniform block, a multiple of 4 words.
    pub uniforms: Vec<u32>,
    /// Storage bindings 1..=n, in order.
    pub bindings: Vec<Binding>,
    /// Workgroup counts.
    pub workgroups: [u32; 3],
}

/// Concrete shapes and kernel choices an op family plans with.
pub(crate) struct PlanContext<'a> {
    /// The program's tensor declarations.
    pub tensors: &'a [TensorDecl],
    /// The bound shape of every tensor.
    pub shapes: &'a [Vec<usize>],
    /// Kernel choices.
    pub config: KernelConfig,
    /// The device's `maxComputeWorkgroupsPerDimension`.
    pub max_workgroups: u32,
    /// The device's `maxStorageBufferBindingSize` (weights beyond it are bound by row ranges).
    pub max_binding: u64,
    /// The device's `minStorageBufferOffsetAlignment`.
    pub storage_alignment: u64,
    /// The element type of every float tensor (f16 activations).
    pub floats: &'a TensorFloats,
}

impl PlanContext<'_> {
    /// The bound shape of `id`.
    pub(crate) fn shape(&self, id: TensorId) -> Result<&[usize]> {
        self.shapes
            .get(id as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| bad_tensor(id))
    }

    /// The dtype of `id`.
    pub(crate) fn dtype(&self, id: TensorId) -> Result<DType> {
        self.tensors
            .get(id as usize)
            .map(|t| t.dtype)
            .ok_or_else(|| bad_tensor(id))
    }

    /// Element count of `id` (overflow was ruled out when shapes were bound).
    pub(crate) fn numel(&self, id: TensorId) -> Result<usize> {
        Ok(self.shape(id)?.iter().product())
    }

    /// The element type `id` is stored in.
    pub(crate) fn float(&self, id: TensorId) -> wgsl::Float {
        self.floats.float(id)
    }

    /// The precision of a kernel over `id`'s activations (see [`TensorFloats::precision`]).
    pub(crate) fn precision(&self, id: TensorId, base: Precision) -> Precision {
        self.floats.precision(id, base)
    }

    /// 32-bit words of `id`'s storage (an f16 tensor: two elements per word, rounded up).
    pub(crate) fn words(&self, id: TensorId) -> Result<usize> {
        let numel = self.numel(id)?;
        Ok(if self.floats.is_f16(id) {
            numel.div_ceil(2)
        } else {
            numel.saturating_mul(words_per_element(self.dtype(id)?))
        })
    }

    /// Checks that every tensor of `ids` is f32.
    ///
    /// # Errors
    /// `InvalidProgram` naming the first that is not.
    pub(crate) fn require_f32(&self, ids: &[TensorId]) -> Result<()> {
        for &id in ids {
            let dtype = self.dtype(id)?;
            if dtype != DType::F32 {
                return Err(Error::invalid_program(format!(
                    "tensor {id} is {}, the op needs f32",
                    dtype.name()
                )));
            }
        }
        Ok(())
    }

    /// A 1-D grid of `ceil(threads / workgroup_size)` groups, or `None` for no threads.
    pub(crate) fn grid_for_threads(&self, threads: usize) -> Result<Option<[u32; 3]>> {
        let groups = threads.div_ceil(self.config.workgroup_size as usize);
        grid_1d(groups, self.max_workgroups)
    }
}

fn bad_tensor(id: TensorId) -> Error {
    Error::invalid_program(format!("tensor {id} is not declared"))
}

/// Words of one element on the GPU (see the module docs).
pub(crate) const fn words_per_element(dtype: DType) -> usize {
    match dtype {
        DType::I64 => 2,
        // A block format is bound as the file's bytes in words; no kernel counts its elements.
        DType::F32 | DType::I32 | DType::U8 | DType::Block(_) => 1,
    }
}

/// A grid of `groups` workgroups: `[groups, 1, 1]`, or folded into two dimensions when it
/// exceeds `max_per_dim`; `None` when there is nothing to run.
///
/// # Errors
/// `OutOfResources` when even two dimensions cannot hold it.
pub(crate) fn grid_1d(groups: usize, max_per_dim: u32) -> Result<Option<[u32; 3]>> {
    if groups == 0 {
        return Ok(None);
    }
    let max = max_per_dim.max(1) as usize;
    if groups <= max {
        return Ok(Some([groups as u32, 1, 1]));
    }
    let rows = groups.div_ceil(max);
    if rows > max {
        return Err(Error::out_of_resources(format!(
            "{groups} workgroups exceed the device's {max} x {max} grid"
        )));
    }
    Ok(Some([max as u32, rows as u32, 1]))
}

/// `value` as a u32 kernel parameter.
///
/// # Errors
/// `OutOfResources` naming `what` when it does not fit 32 bits (kernels index with u32).
pub(crate) fn to_u32(value: usize, what: &str) -> Result<u32> {
    u32::try_from(value).map_err(|_| {
        Error::out_of_resources(format!(
            "{what} = {value} exceeds the 32-bit indices of the WebGPU kernels"
        ))
    })
}

/// Drops extent-1 dims and merges neighbours that are contiguous in every stride list, so
/// kernels loop over as few dims as possible. Returns the new shape and stride lists.
pub(crate) fn coalesce(shape: &[usize], strides: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_shape: Vec<usize> = Vec::with_capacity(shape.len());
    let mut out_strides: Vec<Vec<usize>> = vec![Vec::with_capacity(shape.len()); strides.len()];
    for (d, &extent) in shape.iter().enumerate() {
        if extent == 1 {
            continue;
        }
        let mergeable = out_shape.last().is_some()
            && strides.iter().zip(&out_strides).all(|(s, o)| {
                let inner = s.get(d).copied().unwrap_or(0);
                o.last().copied() == Some(inner * extent)
            });
        if mergeable {
            if let Some(last) = out_shape.last_mut() {
                *last *= extent;
            }
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                if let Some(last) = o.last_mut() {
                    *last = s.get(d).copied().unwrap_or(0);
                }
            }
        } else {
            out_shape.push(extent);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s.get(d).copied().unwrap_or(0));
            }
        }
    }
    (out_shape, out_strides)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::program::geometry::contiguous_strides;

    #[test]
    fn grid_folds_into_two_dimensions() {
        assert_eq!(grid_1d(0, 65535).unwrap(), None);
        assert_eq!(grid_1d(7, 65535).unwrap(), Some([7, 1, 1]));
        assert_eq!(grid_1d(65536, 65535).unwrap(), Some([65535, 2, 1]));
        assert_eq!(grid_1d(10, 4).unwrap(), Some([4, 3, 1]));
        assert_eq!(
            grid_1d(17, 4).unwrap_err().code(),
            ErrorCode::OutOfResources
        );
    }

    #[test]
    fn coalesce_merges_contiguous_dims_and_drops_ones() {
        let shape = [2, 1, 3, 4];
        let s = contiguous_strides(&shape);
        let (cs, cst) = coalesce(&shape, &[s.clone(), s]);
        assert_eq!(cs, vec![24]);
        assert_eq!(cst, vec![vec![1], vec![1]]);

        // b broadcasts over the middle dim: [2, 3, 4] with b strides [4, 0, 1].
        let (cs, cst) = coalesce(&[2, 3, 4], &[vec![12, 4, 1], vec![4, 0, 1]]);
        assert_eq!(cs, vec![2, 3, 4]);
        assert_eq!(cst, vec![vec![12, 4, 1], vec![4, 0, 1]]);

        // A transpose keeps its dims apart.
        let (cs, cst) = coalesce(&[3, 5], &[vec![1, 3], vec![5, 1]]);
        assert_eq!(cs, vec![3, 5]);
        assert_eq!(cst, vec![vec![1, 3], vec![5, 1]]);
    }

    #[test]
    fn coalesce_of_scalar_is_empty() {
        let (cs, cst) = coalesce(&[1, 1], &[vec![1, 1]]);
        assert!(cs.is_empty());
        assert_eq!(cst, vec![Vec::<usize>::new()]);
    }
}

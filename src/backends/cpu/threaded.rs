//! The CPU backend on the worker pool ([`crate::browser::cpu_pool`]): which weights live in
//! the pool's shared memory, and the ops the pool splits across its threads: the products
//! with a weight, the batched products of two activations (attention's), the elementwise
//! activations and the softmax rows.
//!
//! A program initialised while a pool is installed ([`Threaded::for_current_pool`]) places,
//! as each parameter arrives, every weight the threaded kernels read into the shared memory
//! and keeps no host copy of it unless another op reads it too:
//! - an f32 weight used only as a matmul's right operand, packed into the GEMM's panel order
//!   (the same packing the single-thread path uses);
//! - a Q8_0 / Q5_0 / Q4_K / Q6_K weight of a `linear` (a decoder's projections and lm_head),
//!   as its file bytes. A table that a gather also reads (a tied embedding) keeps its host
//!   copy as well.
//!
//! An execute then copies each threaded op's activation rows (and bias) into a per-program
//! shared scratch region, runs the op on every thread, and copies the result rows out; the
//! weights themselves are never copied again. Ops smaller than 16 Ki values (`WORTH_THREADING`),
//! and every other op, run on the calling thread, as without a pool. Each output element is
//! computed in the same order whichever thread computes it (a worker's share is a run of whole
//! output rows, products, or elements), so results equal the single-thread path's bit for bit,
//! except a `linear` over more than one activation row: the pool reads each weight row once and
//! dots it with every activation row in registers, where the single-thread path decodes the row
//! and dots the decoded values (equal within f32 rounding).
//!
//! Natively there is no pool and [`Threaded`] is uninhabited.

#[cfg(web)]
mod platform {
    use crate::backends::cpu::gemm::PackedB;
    use crate::backends::cpu::values::Values;
    use crate::browser::cpu_pool::{CpuPool, PoolDotRows, PoolGemm, PoolGemmBatches, SharedRegion};
    use crate::error::{Error, Result};
    use crate::program::geometry::MatMulGeometry;
    use crate::program::{DType, Op, Program, TensorId, ops};
    use std::rc::Rc;
    use webdelegate_kernels::KernelError;
    use webdelegate_kernels::blocks::RowFormat;
    use webdelegate_kernels::gemm::Strided;
    use webdelegate_kernels::rows::Activation;

    /// Values (outputs, or multiply-adds for a product) below which an op stays on the calling
    /// thread: waking the workers and copying the operands would cost more than the split saves.
    const WORTH_THREADING: usize = 1 << 14;

    /// Whether `id` is read by an op other than as the weight of a `linear`.
    fn read_outside_linear(program: &Program, id: TensorId) -> bool {
        program.ops.iter().any(|op| {
            op.inputs().contains(&id)
                && !matches!(op, Op::Linear(ops::Linear { x, weight, bias, .. })
                    if *weight == id && *x != id && *bias != Some(id))
        })
    }

    /// The kernels' row-dot format of `id` if it is the weight of a `linear` in a block format
    /// the pool has a kernel for (the weights the threaded `linear` reads).
    fn linear_row_format(program: &Program, id: TensorId) -> Option<RowFormat> {
        let DType::Block(format) = program.tensors.get(id as usize)?.dtype else {
            return None;
        };
        program
            .ops
            .iter()
            .any(|op| matches!(op, Op::Linear(ops::Linear { weight, .. }) if *weight == id))
            .then(|| format.row_format())
            .flatten()
    }

    /// A packed right operand in the shared memory.
    #[derive(Debug)]
    struct SharedPacked {
        k: usize,
        n: usize,
        region: SharedRegion,
    }

    /// A block-format weight's bytes in the shared memory.
    #[derive(Debug)]
    struct SharedBlocks {
        format: RowFormat,
        region: SharedRegion,
    }

    /// One program's weights in the pool's shared memory.
    #[derive(Debug)]
    pub struct Threaded {
        pool: Rc<CpuPool>,
        /// The most threads this program's ops use (its `threads` compile spec), if capped.
        cap: Option<usize>,
        packed: Vec<Option<SharedPacked>>,
        blocks: Vec<Option<SharedBlocks>>,
    }

    /// The per-program region threaded ops stage their activations and results in.
    #[derive(Debug, Default)]
    pub struct SharedScratch(Option<SharedRegion>);

    impl SharedScratch {
        fn region(&mut self, pool: &Rc<CpuPool>, bytes: usize) -> Result<&SharedRegion> {
            if self.0.as_ref().is_none_or(|r| r.bytes() < bytes) {
                self.0 = None;
                // Grown by half again, so a growing sequence does not reallocate every step.
                self.0 = Some(pool.alloc(bytes.saturating_add(bytes / 2))?);
            }
            self.0
                .as_ref()
                .ok_or_else(|| Error::internal("shared scratch vanished"))
        }
    }

    impl Threaded {
        /// Placement for `program` in the installed pool's memory, if a pool is installed
        /// (whatever its thread count: the `threads` option may widen it later), its ops on
        /// at most `cap` threads when given.
        pub fn for_current_pool(program: &Program, cap: Option<usize>) -> Option<Self> {
            let pool = CpuPool::current()?;
            Some(Self {
                pool,
                cap,
                packed: (0..program.tensors.len()).map(|_| None).collect(),
                blocks: (0..program.tensors.len()).map(|_| None).collect(),
            })
        }

        /// Moves a packed weight into the shared memory (its host copy is dropped).
        ///
        /// # Errors
        /// `MemoryAllocationFailed` when the shared memory cannot hold it.
        pub fn place_packed(&mut self, id: TensorId, packed: PackedB) -> Result<()> {
            let (k, n) = packed.dims();
            let region = self.pool.upload_f32(packed.values())?;
            if let Some(slot) = self.packed.get_mut(id as usize) {
                *slot = Some(SharedPacked { k, n, region });
            }
            Ok(())
        }

        /// Places parameter `id`'s `values` if the threaded `linear` reads them; returns them
        /// back when the host must keep them too (or they are not placed at all).
        ///
        /// # Errors
        /// `MemoryAllocationFailed` when the shared memory cannot hold them.
        pub fn place_param(
            &mut self,
            program: &Program,
            id: TensorId,
            values: Values,
        ) -> Result<Option<Values>> {
            let (Values::Blocks(_, bytes), Some(format)) =
                (&values, linear_row_format(program, id))
            else {
                return Ok(Some(values));
            };
            let region = self.pool.upload_bytes(bytes)?;
            if let Some(slot) = self.blocks.get_mut(id as usize) {
                *slot = Some(SharedBlocks { format, region });
            }
            Ok(read_outside_linear(program, id).then_some(values))
        }

        /// Whether `id` is a packed weight in the shared memory.
        pub fn has_packed(&self, id: TensorId) -> bool {
            matches!(self.packed.get(id as usize), Some(Some(_)))
        }

        /// Whether `id` is a block-format `linear` weight in the shared memory.
        pub fn has_blocks(&self, id: TensorId) -> bool {
            matches!(self.blocks.get(id as usize), Some(Some(_)))
        }

        /// `out = a @ b (+ bias)` for every batch of `geometry`, `b` the shared packed
        /// weight `id`.
        ///
        /// # Errors
        /// `Internal` when the weight does not fit the product or a worker failed;
        /// `MemoryAllocationFailed` when the scratch cannot grow.
        pub fn matmul(
            &self,
            scratch: &mut SharedScratch,
            id: TensorId,
            a: &[f32],
            bias: Option<&[f32]>,
            geometry: &MatMulGeometry,
            out: &mut [f32],
        ) -> Result<()> {
            let packed = self
                .packed
                .get(id as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| Error::internal("a shared weight is missing"))?;
            let (m, k, n) = (geometry.m, geometry.k, geometry.n);
            if packed.k != k || packed.n != n {
                return Err(Error::internal(
                    "packed matmul operand does not fit the product",
                ));
            }
            if geometry.a_col_stride != 1 || geometry.a_row_stride != k {
                return Err(Error::internal("a threaded matmul needs a row-major a"));
            }
            let batches = geometry.batch_count();
            let (a_bytes, c_bytes, bias_bytes) =
                (m * k * 4, m * n * 4, bias.map_or(0, |b| b.len() * 4));
            let region = scratch.region(&self.pool, a_bytes + c_bytes + bias_bytes)?;
            if let Some(bias) = bias {
                region.write_f32(a_bytes + c_bytes, bias)?;
            }
            for (batch, c) in out
                .chunks_exact_mut((m * n).max(1))
                .enumerate()
                .take(batches)
            {
                let (offset_a, offset_b) = geometry.batch_offsets(batch);
                if offset_b != 0 {
                    return Err(Error::internal("a packed weight has batches"));
                }
                let rows = a
                    .get(offset_a..offset_a + m * k)
                    .ok_or_else(|| Error::internal("matmul operand a is too short"))?;
                region.write_f32(0, rows)?;
                self.pool.gemm(
                    PoolGemm {
                        m,
                        k,
                        n,
                        a: (region.address(0, a_bytes)?, k, 1),
                        b: (packed.region.at(), None),
                        bias: bias
                            .map(|_| region.address(a_bytes + c_bytes, bias_bytes))
                            .transpose()?,
                        c: region.address(a_bytes, c_bytes)?,
                    },
                    self.threads(),
                )?;
                region.read_f32(a_bytes, c)?;
            }
            Ok(())
        }

        /// `out[m, n] = x[m, :] . w[n, :] (+ bias)` for `(m, k, n)`, `w` the shared block-format
        /// weight `id`.
        ///
        /// # Errors
        /// As [`Threaded::matmul`].
        pub fn linear(
            &self,
            scratch: &mut SharedScratch,
            id: TensorId,
            x: &[f32],
            bias: Option<&[f32]>,
            (m, k, n): (usize, usize, usize),
            out: &mut [f32],
        ) -> Result<()> {
            let blocks = self
                .blocks
                .get(id as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| Error::internal("a shared weight is missing"))?;
            if m.checked_mul(k) != Some(x.len()) || m.checked_mul(n) != Some(out.len()) {
                return Err(Error::internal("linear operands have the wrong lengths"));
            }
            let (x_bytes, o_bytes) = (m * k * 4, m * n * 4);
            let bias_bytes = bias.map_or(0, |b| b.len() * 4);
            let region = scratch.region(&self.pool, x_bytes + o_bytes + bias_bytes)?;
            if let Some(bias) = bias {
                region.write_f32(x_bytes + o_bytes, bias)?;
            }
            region.write_f32(0, x)?;
            self.pool.dot_rows(
                PoolDotRows {
                    format: blocks.format,
                    n,
                    k,
                    m,
                    weights: blocks.region.at(),
                    x: region.address(0, x_bytes)?,
                    bias: bias
                        .map(|_| region.address(x_bytes + o_bytes, bias_bytes))
                        .transpose()?,
                    out: region.address(x_bytes, o_bytes)?,
                },
                self.threads(),
            )?;
            region.read_f32(x_bytes, out)
        }

        /// Threads this program's ops run on now: the pool's, at most the program's cap.
        fn threads(&self) -> usize {
            self.pool.threads().min(self.cap.unwrap_or(usize::MAX))
        }

        /// Whether an op of `work` values is worth the pool now (more than one thread).
        pub fn worth(&self, work: usize) -> bool {
            work >= WORTH_THREADING && self.threads() > 1
        }

        /// `out[i] = f(x[i])` on the pool.
        ///
        /// # Errors
        /// `Internal` when the lengths differ or a worker failed; `MemoryAllocationFailed` when
        /// the scratch cannot grow.
        pub fn activation(
            &self,
            scratch: &mut SharedScratch,
            activation: Activation,
            x: &[f32],
            out: &mut [f32],
        ) -> Result<()> {
            if x.len() != out.len() {
                return Err(Error::internal(
                    "activation operands have different lengths",
                ));
            }
            let region = scratch.region(&self.pool, x.len() * 4)?;
            region.write_f32(0, x)?;
            let at = region.address(0, x.len() * 4)?;
            self.pool
                .unary(activation, x.len(), (at, at), self.threads())?;
            region.read_f32(0, out)
        }

        /// Softmax of each `width`-long row of `values`, in place, on the pool.
        ///
        /// # Errors
        /// As [`Threaded::activation`]; `Internal` when `values` is not whole rows.
        pub fn softmax(
            &self,
            scratch: &mut SharedScratch,
            values: &mut [f32],
            width: usize,
        ) -> Result<()> {
            if width == 0 || !values.len().is_multiple_of(width) {
                return Err(Error::internal("softmax values are not whole rows"));
            }
            let region = scratch.region(&self.pool, values.len() * 4)?;
            region.write_f32(0, values)?;
            let at = region.address(0, values.len() * 4)?;
            self.pool
                .softmax(values.len() / width, width, at, self.threads())?;
            region.read_f32(0, values)
        }

        /// `out = a @ b` for every batch of `geometry`, both operands activations (strided as
        /// `geometry` says), whole products per thread.
        ///
        /// # Errors
        /// As [`Threaded::activation`]; `Internal` when an operand is too short for
        /// `geometry` or an offset does not fit 32 bits.
        pub fn batched_matmul(
            &self,
            scratch: &mut SharedScratch,
            a: &[f32],
            b: &[f32],
            geometry: &MatMulGeometry,
            out: &mut [f32],
        ) -> Result<()> {
            let (m, k, n) = (geometry.m, geometry.k, geometry.n);
            let count = geometry.batch_count();
            if count.checked_mul(m * n) != Some(out.len()) {
                return Err(Error::internal(
                    "batched matmul output has the wrong length",
                ));
            }
            let mut offsets = Vec::with_capacity(count * 2);
            for batch in 0..count {
                let (offset_a, offset_b) = geometry.batch_offsets(batch);
                // The kernel trusts these spans: check them here.
                let view = |data, offset, row_stride, col_stride| Strided {
                    data,
                    offset,
                    row_stride,
                    col_stride,
                };
                let too_short = |KernelError(why)| Error::internal(why);
                view(a, offset_a, geometry.a_row_stride, geometry.a_col_stride)
                    .check(m, k, "a batched matmul's a is too short")
                    .map_err(too_short)?;
                view(b, offset_b, geometry.b_row_stride, geometry.b_col_stride)
                    .check(k, n, "a batched matmul's b is too short")
                    .map_err(too_short)?;
                let word = |v: usize| {
                    u32::try_from(v).map_err(|_| Error::internal("a matmul offset overflows"))
                };
                offsets.push(word(offset_a)?);
                offsets.push(word(offset_b)?);
            }
            let (a_bytes, b_bytes, c_bytes) = (a.len() * 4, b.len() * 4, out.len() * 4);
            let o_bytes = offsets.len() * 4;
            let region = scratch.region(&self.pool, a_bytes + b_bytes + c_bytes + o_bytes)?;
            region.write_f32(0, a)?;
            region.write_f32(a_bytes, b)?;
            let c_at = a_bytes + b_bytes;
            region.write_u32(c_at + c_bytes, &offsets)?;
            self.pool.gemm_batches(
                PoolGemmBatches {
                    count,
                    offsets: region.address(c_at + c_bytes, o_bytes)?,
                    mkn: (m, k, n),
                    a: (
                        region.address(0, a_bytes)?,
                        geometry.a_row_stride,
                        geometry.a_col_stride,
                    ),
                    b: (
                        region.address(a_bytes, b_bytes)?,
                        geometry.b_row_stride,
                        geometry.b_col_stride,
                    ),
                    c: region.address(c_at, c_bytes)?,
                },
                self.threads(),
            )?;
            region.read_f32(c_at, out)
        }
    }
}

#[cfg(native)]
mod platform {
    use crate::backends::cpu::gemm::PackedB;
    use crate::backends::cpu::values::Values;
    use crate::error::Result;
    use crate::program::geometry::MatMulGeometry;
    use crate::program::{Program, TensorId};
    use webdelegate_kernels::rows::Activation;

    /// No pool natively (uninhabited).
    #[derive(Debug)]
    pub enum Threaded {}

    /// No shared scratch natively.
    #[derive(Debug, Default)]
    pub struct SharedScratch;

    impl Threaded {
        /// Never natively.
        pub fn for_current_pool(_program: &Program, _cap: Option<usize>) -> Option<Self> {
            None
        }

        /// Unreachable natively.
        pub fn place_packed(&mut self, _id: TensorId, _packed: PackedB) -> Result<()> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn place_param(
            &mut self,
            _program: &Program,
            _id: TensorId,
            _values: Values,
        ) -> Result<Option<Values>> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn has_packed(&self, _id: TensorId) -> bool {
            match *self {}
        }

        /// Unreachable natively.
        pub fn has_blocks(&self, _id: TensorId) -> bool {
            match *self {}
        }

        /// Unreachable natively.
        pub fn matmul(
            &self,
            _scratch: &mut SharedScratch,
            _id: TensorId,
            _a: &[f32],
            _bias: Option<&[f32]>,
            _geometry: &MatMulGeometry,
            _out: &mut [f32],
        ) -> Result<()> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn linear(
            &self,
            _scratch: &mut SharedScratch,
            _id: TensorId,
            _x: &[f32],
            _bias: Option<&[f32]>,
            _dims: (usize, usize, usize),
            _out: &mut [f32],
        ) -> Result<()> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn worth(&self, _work: usize) -> bool {
            match *self {}
        }

        /// Unreachable natively.
        pub fn activation(
            &self,
            _scratch: &mut SharedScratch,
            _activation: Activation,
            _x: &[f32],
            _out: &mut [f32],
        ) -> Result<()> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn softmax(
            &self,
            _scratch: &mut SharedScratch,
            _values: &mut [f32],
            _width: usize,
        ) -> Result<()> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn batched_matmul(
            &self,
            _scratch: &mut SharedScratch,
            _a: &[f32],
            _b: &[f32],
            _geometry: &MatMulGeometry,
            _out: &mut [f32],
        ) -> Result<()> {
            match *self {}
        }
    }
}

pub use platform::{SharedScratch, Threaded};

//! The CPU backend on the worker pool ([`crate::browser::cpu_pool`]): which weights live in
//! the pool's shared memory, where activations live during an execute, and the ops the pool
//! splits across its threads: the products with a weight, the batched products of two
//! activations (attention's), the elementwise activations, same-shape binaries and `scale`,
//! softmax rows (with a mask that repeats over leading and trailing row dims), layer norm and
//! permutes of up to four dims.
//!
//! A program initialised while a pool is installed ([`Threaded::for_current_pool`]) places,
//! as each parameter arrives, every weight the threaded kernels read into the shared memory
//! and keeps no host copy of it unless another op reads it too:
//! - an f32 weight used only as a matmul's right operand, packed into the GEMM's panel order
//!   (the same packing the single-thread path uses);
//! - a Q8_0 / Q5_0 / Q4_K / Q6_K weight of a `linear` (a decoder's projections and lm_head),
//!   as its file bytes, gathered by the provider straight into one shared region for all of
//!   them ([`Threaded::place_direct`]: a response body's chunks are written there from
//!   JavaScript, never stopping in this module's memory). A table that a `gather` also reads
//!   (a tied embedding) is read there too ([`Threaded::read_rows`] copies out the rows a
//!   step picks); a weight any other op reads keeps a host copy as well.
//!
//! During an execute, each threaded op writes its result into a fresh region of the shared
//! memory ([`SharedValues`], the frame's `Slot::Shared`, freed when the plan releases it); the
//! next threaded op reads it there in place ([`F32Operand::Shared`]), and an op on the calling
//! thread reads a host copy made on its first read. Operands on the host (the caller's inputs,
//! biases, results of calling-thread ops) are copied into a per-program staging region for the
//! call. A product with a weight in the shared memory always runs on the pool (its weight has
//! no host copy); every other op smaller than 16 Ki values ([`min_pool_work`], the
//! `pool_min_work` option), and every op the pool has no kernel for, runs on the calling
//! thread, as without a pool.
//!
//! Each output element is computed in the same order whichever thread computes it (a worker's
//! share is a run of whole output rows, products, or elements), so results equal the
//! single-thread path's bit for bit, except a `linear` over more than one activation row: the
//! pool reads each weight row once and dots it with every activation row in registers, where
//! the single-thread path decodes the row and dots the decoded values (equal within f32
//! rounding).
//!
//! Natively there is no pool and [`Threaded`] and [`SharedValues`] are uninhabited.

#[cfg(web)]
mod platform {
    use super::{F32Operand, min_pool_work};
    use crate::backends::cpu::gemm::PackedB;
    use crate::backends::cpu::values::{Values, filled};
    use crate::browser::cpu_pool::{CpuPool, PoolDotRows, PoolGemm, PoolGemmBatches, SharedRegion};
    use crate::error::{Error, Result};
    use crate::params::SharedBuffer;
    use crate::program::geometry::MatMulGeometry;
    use crate::program::{BlockFormat, DType, Op, Program, TensorId, ops};
    use std::cell::OnceCell;
    use std::rc::Rc;
    use std::sync::Arc;
    use webdelegate_kernels::blocks::RowFormat;
    use webdelegate_kernels::gemm::view_fits;
    use webdelegate_kernels::int8_dots::Int8Layout;
    use webdelegate_kernels::layout::Permute4;
    use webdelegate_kernels::rows::{Activation, Binary};

    /// Whether `id` is read by an op other than as the weight of a `linear` or the table of a
    /// `gather` (the two readers a weight in the shared memory serves).
    fn read_outside_shared_readers(program: &Program, id: TensorId) -> bool {
        program.ops.iter().any(|op| {
            op.inputs().contains(&id)
                && !matches!(op, Op::Linear(ops::Linear { x, weight, bias, .. })
                    if *weight == id && *x != id && *bias != Some(id))
                && !matches!(op, Op::Gather(ops::Gather { table, ids, .. })
                    if *table == id && *ids != id)
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

    /// A block-format weight's bytes in the shared memory: `bytes` bytes at `offset` of a
    /// region it may share with the program's other weights.
    #[derive(Debug)]
    struct SharedBlocks {
        format: RowFormat,
        block: BlockFormat,
        region: Arc<SharedRegion>,
        offset: usize,
        bytes: usize,
    }

    impl SharedBlocks {
        /// The weight's first byte in the shared memory.
        fn at(&self) -> Result<u32> {
            self.region.address(self.offset, self.bytes)
        }
    }

    /// Alignment of each weight placed in a shared region of several (the pool's own).
    const WEIGHT_ALIGN: u64 = 64;

    /// One program's weights in the pool's shared memory.
    #[derive(Debug)]
    pub struct Threaded {
        pool: Rc<CpuPool>,
        /// The most threads this program's ops use (its `threads` compile spec), if capped.
        cap: Option<usize>,
        packed: Vec<Option<SharedPacked>>,
        blocks: Vec<Option<SharedBlocks>>,
    }

    /// f32 values in the pool's shared memory: a threaded op's result, read in place by the
    /// next threaded op, and through a host copy (made on the first such read) by an op on the
    /// calling thread. Dropping it frees the region.
    #[derive(Debug)]
    pub struct SharedValues {
        region: SharedRegion,
        len: usize,
        host: OnceCell<Vec<f32>>,
    }

    impl SharedValues {
        /// Element count.
        pub fn len(&self) -> usize {
            self.len
        }

        /// The values on the host, copied out of the shared memory by the first call.
        ///
        /// # Errors
        /// `MemoryAllocationFailed` when the copy cannot be allocated; `Internal` when the
        /// region cannot be read.
        pub fn host(&self) -> Result<&[f32]> {
            if let Some(values) = self.host.get() {
                return Ok(values);
            }
            let mut values = filled(self.len, 0.0)?;
            self.region.read_f32(0, &mut values)?;
            Ok(self.host.get_or_init(|| values))
        }

        /// The values as a host vector (the host copy if one was made), freeing the region.
        ///
        /// # Errors
        /// As [`SharedValues::host`].
        pub fn into_host(self) -> Result<Vec<f32>> {
            self.host()?;
            self.host
                .into_inner()
                .ok_or_else(|| Error::internal("a shared tensor's host copy vanished"))
        }
    }

    /// An f32 operand's address for one pool call: in place when it is shared, else `at` in the
    /// staging region.
    fn place(
        operand: &F32Operand<'_>,
        region: Option<&SharedRegion>,
        at: &mut usize,
    ) -> Result<u32> {
        match (operand, region) {
            (F32Operand::Shared(values), _) => Ok(values.region.at()),
            (F32Operand::Host(values), Some(region)) => {
                let bytes = values.len() * 4;
                region.write_f32(*at, values)?;
                let address = region.address(*at, bytes)?;
                *at += bytes;
                Ok(address)
            }
            (F32Operand::Host(_), None) => {
                Err(Error::internal("a host operand has no staging region"))
            }
        }
    }

    /// The byte address `elements` f32 values past `at`.
    fn past(at: u32, elements: usize) -> Result<u32> {
        elements
            .checked_mul(4)
            .and_then(|bytes| u32::try_from(bytes).ok())
            .and_then(|bytes| at.checked_add(bytes))
            .ok_or_else(|| Error::internal("a shared-memory offset overflows"))
    }

    /// The per-program region threaded ops stage their host operands (activations computed on
    /// the calling thread, biases) in.
    #[derive(Debug, Default)]
    pub struct SharedScratch(Option<SharedRegion>);

    impl SharedScratch {
        /// Bytes its staging region holds in the shared memory.
        pub fn bytes(&self) -> usize {
            self.0.as_ref().map_or(0, SharedRegion::bytes)
        }

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

        /// The addresses of `operands` for one pool call: shared ones in place, host ones
        /// copied into this scratch (valid until the next call).
        fn stage<const N: usize>(
            &mut self,
            pool: &Rc<CpuPool>,
            operands: [&F32Operand<'_>; N],
        ) -> Result<[u32; N]> {
            let (mut bytes, mut any_host) = (0usize, false);
            for operand in &operands {
                if let F32Operand::Host(values) = operand {
                    any_host = true;
                    bytes = values
                        .len()
                        .checked_mul(4)
                        .and_then(|b| bytes.checked_add(b))
                        .ok_or_else(|| Error::internal("staged operands overflow"))?;
                }
            }
            // An empty host operand still gets a real address (never 0, which the kernels
            // would read as a null slice), so any host operand stages at least one word.
            let region = if any_host {
                Some(self.region(pool, bytes.max(4))?)
            } else {
                None
            };
            let mut at = 0usize;
            let mut addresses = [0u32; N];
            for (address, operand) in addresses.iter_mut().zip(operands) {
                *address = place(operand, region, &mut at)?;
            }
            Ok(addresses)
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
            let DType::Block(block) = program.tensors[id as usize].dtype else {
                return Ok(Some(values));
            };
            let region = Arc::new(self.pool.upload_bytes(bytes)?);
            if let Some(slot) = self.blocks.get_mut(id as usize) {
                *slot = Some(SharedBlocks {
                    format,
                    block,
                    region,
                    offset: 0,
                    bytes: bytes.len(),
                });
            }
            Ok(read_outside_shared_readers(program, id).then_some(values))
        }

        /// Where each parameter goes straight into the shared memory, by position in
        /// `program.params` (`lengths` its byte lengths): every block-format weight the
        /// threaded `linear` reads and no op but a `gather` reads besides, all in one region
        /// (one provider call fills them all, with no copy in this module's memory). The
        /// others are `None`: they go through the host.
        ///
        /// # Errors
        /// `MemoryAllocationFailed` when the shared memory cannot hold them.
        pub fn place_direct(
            &mut self,
            program: &Program,
            lengths: &[u64],
        ) -> Result<Vec<Option<(SharedBuffer, u64)>>> {
            let mut offsets = Vec::with_capacity(lengths.len());
            let mut total: u64 = 0;
            for (param, &length) in program.params.iter().zip(lengths) {
                let id = param.tensor;
                let direct = linear_row_format(program, id).is_some()
                    && !read_outside_shared_readers(program, id)
                    && program.params.iter().filter(|p| p.tensor == id).count() == 1;
                if direct {
                    offsets.push(Some(total));
                    total = total
                        .checked_add(length)
                        .and_then(|end| end.checked_next_multiple_of(WEIGHT_ALIGN))
                        .ok_or_else(|| {
                            Error::memory_allocation_failed("shared weights overflow")
                        })?;
                } else {
                    offsets.push(None);
                }
            }
            if total == 0 {
                return Ok(offsets.iter().map(|_| None).collect());
            }
            let size = usize::try_from(total).map_err(|_| {
                Error::memory_allocation_failed(format!(
                    "{total} bytes of weights do not fit in the pool's 32-bit memory"
                ))
            })?;
            let region = Arc::new(self.pool.alloc(size)?);
            let buffer: SharedBuffer = region.clone();
            let mut placed = Vec::with_capacity(offsets.len());
            for ((param, offset), &length) in program.params.iter().zip(offsets).zip(lengths) {
                let id = param.tensor;
                let (Some(offset), Some(format), DType::Block(block)) = (
                    offset,
                    linear_row_format(program, id),
                    program.tensors[id as usize].dtype,
                ) else {
                    placed.push(None);
                    continue;
                };
                if let Some(slot) = self.blocks.get_mut(id as usize) {
                    *slot = Some(SharedBlocks {
                        format,
                        block,
                        region: Arc::clone(&region),
                        offset: offset as usize,
                        bytes: length as usize,
                    });
                }
                placed.push(Some((Arc::clone(&buffer), offset)));
            }
            Ok(placed)
        }

        /// The bytes of rows `rows` (of `width` values each) of the shared block-format table
        /// `id`, one after another, and the table's format: what a `gather` from a weight that
        /// has no host copy decodes.
        ///
        /// # Errors
        /// `Internal` when the table is not in the shared memory, a row is outside it or the
        /// region cannot be read; `MemoryAllocationFailed` for the rows' buffer.
        pub fn read_rows(
            &self,
            id: TensorId,
            rows: &[usize],
            width: usize,
        ) -> Result<(BlockFormat, Vec<u8>)> {
            let blocks = self
                .blocks
                .get(id as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| Error::internal("a shared table is missing"))?;
            let row_bytes = usize::try_from(
                blocks
                    .block
                    .tensor_bytes(1, width as u64)
                    .unwrap_or(u64::MAX),
            )
            .map_err(|_| Error::internal("a shared table's rows overflow"))?;
            let total = rows
                .len()
                .checked_mul(row_bytes)
                .ok_or_else(|| Error::internal("gathered rows overflow"))?;
            let mut bytes = filled(total, 0u8)?;
            for (&index, target) in rows.iter().zip(bytes.chunks_exact_mut(row_bytes.max(1))) {
                let start = index
                    .checked_mul(row_bytes)
                    .filter(|start| {
                        start
                            .checked_add(row_bytes)
                            .is_some_and(|end| end <= blocks.bytes)
                    })
                    .ok_or_else(|| Error::internal("a gathered row is outside its shared table"))?;
                blocks.region.read_bytes(blocks.offset + start, target)?;
            }
            Ok((blocks.block, bytes))
        }

        /// Bytes of weights this program holds in the shared memory.
        pub fn weight_bytes(&self) -> usize {
            let packed: usize = self.packed.iter().flatten().map(|p| p.region.bytes()).sum();
            let blocks: usize = self.blocks.iter().flatten().map(|b| b.bytes).sum();
            packed + blocks
        }

        /// Whether `id` is a packed weight in the shared memory.
        pub fn has_packed(&self, id: TensorId) -> bool {
            matches!(self.packed.get(id as usize), Some(Some(_)))
        }

        /// Whether `id` is a block-format `linear` weight in the shared memory.
        pub fn has_blocks(&self, id: TensorId) -> bool {
            matches!(self.blocks.get(id as usize), Some(Some(_)))
        }

        /// A fresh shared result of `len` values.
        fn output(&self, len: usize) -> Result<SharedValues> {
            let bytes = len
                .checked_mul(4)
                .ok_or_else(|| Error::memory_allocation_failed("a shared result overflows"))?;
            Ok(SharedValues {
                region: self.pool.alloc(bytes)?,
                len,
                host: OnceCell::new(),
            })
        }

        /// `a @ b (+ bias)` for every batch of `geometry` (`out_len` values), `b` the shared
        /// packed weight `id`.
        ///
        /// # Errors
        /// `Internal` when the weight does not fit the product or a worker failed;
        /// `MemoryAllocationFailed` when the result or the scratch cannot be allocated.
        pub fn matmul(
            &self,
            scratch: &mut SharedScratch,
            id: TensorId,
            (a, bias): (F32Operand<'_>, Option<&[f32]>),
            geometry: &MatMulGeometry,
            out_len: usize,
        ) -> Result<SharedValues> {
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
            let batches = geometry.batch_count();
            if batches.checked_mul(m * n) != Some(out_len) {
                return Err(Error::internal("matmul output has the wrong length"));
            }
            let bias = bias.map(F32Operand::Host);
            let none = F32Operand::Host(&[]);
            let [a_at, bias_at] =
                scratch.stage(&self.pool, [&a, bias.as_ref().unwrap_or(&none)])?;
            let out = self.output(out_len)?;
            for batch in 0..batches {
                let (offset_a, offset_b) = geometry.batch_offsets(batch);
                if offset_b != 0 {
                    return Err(Error::internal("a packed weight has batches"));
                }
                let strides_a = (geometry.a_row_stride, geometry.a_col_stride);
                // The kernel trusts this span: check it here.
                if !view_fits(a.len(), offset_a, strides_a, (m, k)) {
                    return Err(Error::internal("matmul operand a is too short"));
                }
                self.pool.gemm(
                    PoolGemm {
                        m,
                        k,
                        n,
                        a: (past(a_at, offset_a)?, strides_a.0, strides_a.1),
                        b: (packed.region.at(), None),
                        bias: bias.map(|_| bias_at),
                        c: past(out.region.at(), batch * m * n)?,
                    },
                    self.threads(),
                )?;
            }
            Ok(out)
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
            (x, bias): (F32Operand<'_>, Option<&[f32]>),
            (m, k, n): (usize, usize, usize),
            int8: bool,
        ) -> Result<SharedValues> {
            let blocks = self
                .blocks
                .get(id as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| Error::internal("a shared weight is missing"))?;
            if m.checked_mul(k) != Some(x.len()) {
                return Err(Error::internal("linear operands have the wrong lengths"));
            }
            let bias = bias.map(F32Operand::Host);
            let none = F32Operand::Host(&[]);
            let [x_at, bias_at] =
                scratch.stage(&self.pool, [&x, bias.as_ref().unwrap_or(&none)])?;
            let out = self.output(m * n)?;
            // int8 activations: quantized once into a region of their own, read by every
            // thread's share of the weight rows.
            let quantized = if int8 {
                let layout = Int8Layout::new(m, k)
                    .ok_or_else(|| Error::internal("int8 activations overflow"))?;
                let region = self.pool.alloc(layout.bytes.max(4))?;
                self.pool
                    .quantize_rows((m, k), (x_at, region.at()), self.threads())?;
                Some(region)
            } else {
                None
            };
            self.pool.dot_rows(
                PoolDotRows {
                    format: blocks.format,
                    n,
                    k,
                    m,
                    weights: blocks.at()?,
                    x: quantized.as_ref().map_or(x_at, SharedRegion::at),
                    int8,
                    bias: bias.map(|_| bias_at),
                    out: out.region.at(),
                },
                self.threads(),
            )?;
            Ok(out)
        }

        /// Threads this program's ops run on now: the pool's, at most the program's cap.
        fn threads(&self) -> usize {
            self.pool.threads().min(self.cap.unwrap_or(usize::MAX))
        }

        /// Whether an op of `work` values goes to the pool: at least [`min_pool_work`] values.
        /// On one thread (a parked pool, or `threads` 1) it still does: the kernel module then
        /// runs it on the calling thread alone, and the activations stay in the shared memory
        /// instead of crossing to the host and back.
        pub fn worth(&self, work: usize) -> bool {
            work >= min_pool_work()
        }

        /// `f(x)` elementwise on the pool.
        ///
        /// # Errors
        /// `Internal` when a worker failed; `MemoryAllocationFailed` when the result or the
        /// scratch cannot be allocated.
        pub fn activation(
            &self,
            scratch: &mut SharedScratch,
            activation: Activation,
            x: F32Operand<'_>,
        ) -> Result<SharedValues> {
            let [x_at] = scratch.stage(&self.pool, [&x])?;
            let out = self.output(x.len())?;
            self.pool
                .unary(activation, x.len(), (x_at, out.region.at()), self.threads())?;
            Ok(out)
        }

        /// `softmax(x + mask)` of each `width`-long row of `x`, on the pool.
        ///
        /// # Errors
        /// As [`Threaded::activation`]; `Internal` when `x` is not whole rows or the mask is
        /// not whole rows of its count.
        pub fn softmax(
            &self,
            scratch: &mut SharedScratch,
            x: F32Operand<'_>,
            mask: Option<(&[f32], usize, usize)>,
            width: usize,
        ) -> Result<SharedValues> {
            if width == 0 || !x.len().is_multiple_of(width) {
                return Err(Error::internal("softmax values are not whole rows"));
            }
            if let Some((values, period, count)) = mask
                && (period == 0 || count == 0 || count.checked_mul(width) != Some(values.len()))
            {
                return Err(Error::internal("a softmax mask is not whole rows"));
            }
            let mask_operand = F32Operand::Host(mask.map_or(&[][..], |(values, _, _)| values));
            let [x_at, mask_at] = scratch.stage(&self.pool, [&x, &mask_operand])?;
            let out = self.output(x.len())?;
            self.pool.softmax(
                (x.len() / width, width),
                x_at,
                mask.map(|(_, period, count)| (mask_at, period, count)),
                out.region.at(),
                self.threads(),
            )?;
            Ok(out)
        }

        /// `a (op) b` elementwise on the pool, both of the same length.
        ///
        /// # Errors
        /// As [`Threaded::activation`]; `Internal` when the lengths differ.
        pub fn binary(
            &self,
            scratch: &mut SharedScratch,
            op: Binary,
            (a, b): (F32Operand<'_>, F32Operand<'_>),
        ) -> Result<SharedValues> {
            if a.len() != b.len() {
                return Err(Error::internal("binary operands have different lengths"));
            }
            let [a_at, b_at] = scratch.stage(&self.pool, [&a, &b])?;
            let out = self.output(a.len())?;
            let addresses = (a_at, b_at, out.region.at());
            self.pool.binary(op, a.len(), addresses, self.threads())?;
            Ok(out)
        }

        /// `x * scale + bias` elementwise on the pool.
        ///
        /// # Errors
        /// As [`Threaded::activation`].
        pub fn scale(
            &self,
            scratch: &mut SharedScratch,
            x: F32Operand<'_>,
            affine: (f32, f32),
        ) -> Result<SharedValues> {
            let [x_at] = scratch.stage(&self.pool, [&x])?;
            let out = self.output(x.len())?;
            let addresses = (x_at, out.region.at());
            self.pool
                .scale(x.len(), addresses, affine, self.threads())?;
            Ok(out)
        }

        /// Layer norm of each `gamma.len()`-long row of `x` on the pool.
        ///
        /// # Errors
        /// As [`Threaded::activation`]; `Internal` when `x` is not whole rows or `beta`'s
        /// length differs.
        pub fn layer_norm(
            &self,
            scratch: &mut SharedScratch,
            x: F32Operand<'_>,
            (gamma, beta): (&[f32], &[f32]),
            eps: f32,
        ) -> Result<SharedValues> {
            let width = gamma.len();
            if width == 0 || beta.len() != width || !x.len().is_multiple_of(width) {
                return Err(Error::internal("layer_norm operands disagree in length"));
            }
            let (gamma, beta) = (F32Operand::Host(gamma), F32Operand::Host(beta));
            let [x_at, gamma_at, beta_at] = scratch.stage(&self.pool, [&x, &gamma, &beta])?;
            let out = self.output(x.len())?;
            let addresses = (x_at, gamma_at, beta_at, out.region.at());
            let rows = (x.len() / width, width);
            self.pool.layer_norm(rows, addresses, eps, self.threads())?;
            Ok(out)
        }

        /// `geometry`'s permuted copy of `x` on the pool.
        ///
        /// # Errors
        /// As [`Threaded::activation`]; `Internal` when the geometry does not cover `x`.
        pub fn permute(
            &self,
            scratch: &mut SharedScratch,
            x: F32Operand<'_>,
            geometry: &Permute4,
        ) -> Result<SharedValues> {
            let len = geometry
                .rows()
                .and_then(|rows| rows.checked_mul(geometry.dims[3]));
            if len != Some(x.len()) {
                return Err(Error::internal(
                    "a permute's geometry does not cover its input",
                ));
            }
            let [x_at] = scratch.stage(&self.pool, [&x])?;
            let out = self.output(x.len())?;
            let addresses = (x_at, x.len(), out.region.at());
            self.pool.permute(geometry, addresses, self.threads())?;
            Ok(out)
        }

        /// `a @ b` for every batch of `geometry`, both operands activations (strided as
        /// `geometry` says), whole products per thread.
        ///
        /// # Errors
        /// As [`Threaded::activation`]; `Internal` when an operand is too short for
        /// `geometry` or an offset does not fit 32 bits.
        pub fn batched_matmul(
            &self,
            scratch: &mut SharedScratch,
            (a, b): (F32Operand<'_>, F32Operand<'_>),
            geometry: &MatMulGeometry,
            out_len: usize,
        ) -> Result<SharedValues> {
            let (m, k, n) = (geometry.m, geometry.k, geometry.n);
            let count = geometry.batch_count();
            if count.checked_mul(m * n) != Some(out_len) {
                return Err(Error::internal(
                    "batched matmul output has the wrong length",
                ));
            }
            let mut offsets = Vec::with_capacity(count * 2);
            let strides_a = (geometry.a_row_stride, geometry.a_col_stride);
            let strides_b = (geometry.b_row_stride, geometry.b_col_stride);
            for batch in 0..count {
                let (offset_a, offset_b) = geometry.batch_offsets(batch);
                // The kernel trusts these spans: check them here.
                if !view_fits(a.len(), offset_a, strides_a, (m, k)) {
                    return Err(Error::internal("a batched matmul's a is too short"));
                }
                if !view_fits(b.len(), offset_b, strides_b, (k, n)) {
                    return Err(Error::internal("a batched matmul's b is too short"));
                }
                let word = |v: usize| {
                    u32::try_from(v).map_err(|_| Error::internal("a matmul offset overflows"))
                };
                offsets.push(word(offset_a)?);
                offsets.push(word(offset_b)?);
            }
            let [a_at, b_at] = scratch.stage(&self.pool, [&a, &b])?;
            let out = self.output(out_len)?;
            // The offsets go in a region of their own: the scratch holds the staged operands.
            let offsets_region = self.pool.alloc(offsets.len() * 4)?;
            offsets_region.write_u32(0, &offsets)?;
            self.pool.gemm_batches(
                PoolGemmBatches {
                    count,
                    offsets: offsets_region.at(),
                    mkn: (m, k, n),
                    a: (a_at, strides_a.0, strides_a.1),
                    b: (b_at, strides_b.0, strides_b.1),
                    c: out.region.at(),
                },
                self.threads(),
            )?;
            Ok(out)
        }
    }
}

#[cfg(native)]
mod platform {
    use super::F32Operand;
    use crate::backends::cpu::gemm::PackedB;
    use crate::backends::cpu::values::Values;
    use crate::error::Result;
    use crate::params::SharedBuffer;
    use crate::program::geometry::MatMulGeometry;
    use crate::program::{BlockFormat, Program, TensorId};
    use webdelegate_kernels::layout::Permute4;
    use webdelegate_kernels::rows::{Activation, Binary};

    /// No pool natively (uninhabited).
    #[derive(Debug)]
    pub enum Threaded {}

    /// No shared values natively (uninhabited).
    #[derive(Debug)]
    pub enum SharedValues {}

    /// No shared scratch natively.
    #[derive(Debug, Default)]
    pub struct SharedScratch;

    impl SharedScratch {
        /// Nothing natively.
        pub fn bytes(&self) -> usize {
            0
        }
    }

    #[allow(dead_code)]
    impl SharedValues {
        /// Unreachable natively.
        pub fn len(&self) -> usize {
            match *self {}
        }

        /// Unreachable natively.
        pub fn host(&self) -> Result<&[f32]> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn into_host(self) -> Result<Vec<f32>> {
            match self {}
        }
    }

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
        pub fn place_direct(
            &mut self,
            _program: &Program,
            _lengths: &[u64],
        ) -> Result<Vec<Option<(SharedBuffer, u64)>>> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn read_rows(
            &self,
            _id: TensorId,
            _rows: &[usize],
            _width: usize,
        ) -> Result<(BlockFormat, Vec<u8>)> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn weight_bytes(&self) -> usize {
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
            _operands: (F32Operand<'_>, Option<&[f32]>),
            _geometry: &MatMulGeometry,
            _out_len: usize,
        ) -> Result<SharedValues> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn linear(
            &self,
            _scratch: &mut SharedScratch,
            _id: TensorId,
            _operands: (F32Operand<'_>, Option<&[f32]>),
            _dims: (usize, usize, usize),
            _int8: bool,
        ) -> Result<SharedValues> {
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
            _x: F32Operand<'_>,
        ) -> Result<SharedValues> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn softmax(
            &self,
            _scratch: &mut SharedScratch,
            _x: F32Operand<'_>,
            _mask: Option<(&[f32], usize, usize)>,
            _width: usize,
        ) -> Result<SharedValues> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn binary(
            &self,
            _scratch: &mut SharedScratch,
            _op: Binary,
            _operands: (F32Operand<'_>, F32Operand<'_>),
        ) -> Result<SharedValues> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn scale(
            &self,
            _scratch: &mut SharedScratch,
            _x: F32Operand<'_>,
            _affine: (f32, f32),
        ) -> Result<SharedValues> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn layer_norm(
            &self,
            _scratch: &mut SharedScratch,
            _x: F32Operand<'_>,
            _params: (&[f32], &[f32]),
            _eps: f32,
        ) -> Result<SharedValues> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn permute(
            &self,
            _scratch: &mut SharedScratch,
            _x: F32Operand<'_>,
            _geometry: &Permute4,
        ) -> Result<SharedValues> {
            match *self {}
        }

        /// Unreachable natively.
        pub fn batched_matmul(
            &self,
            _scratch: &mut SharedScratch,
            _operands: (F32Operand<'_>, F32Operand<'_>),
            _geometry: &MatMulGeometry,
            _out_len: usize,
        ) -> Result<SharedValues> {
            match *self {}
        }
    }
}

/// The default of [`min_pool_work`]: below 16 Ki values, waking the workers costs more than
/// the split saves.
pub const DEFAULT_MIN_POOL_WORK: usize = 1 << 14;

static MIN_POOL_WORK: AtomicUsize = AtomicUsize::new(DEFAULT_MIN_POOL_WORK);

/// Values (outputs, or multiply-adds for a product) below which an op other than a product with
/// a shared weight stays on the calling thread (the CPU backend's `pool_min_work` option).
pub fn min_pool_work() -> usize {
    MIN_POOL_WORK.load(Ordering::Relaxed)
}

/// Sets [`min_pool_work`] for every program (0 sends every op the pool has a kernel for to it,
/// as the threaded op suite does).
pub fn set_min_pool_work(values: usize) {
    MIN_POOL_WORK.store(values, Ordering::Relaxed);
}

/// An f32 operand of a threaded op: on the host (copied into the shared scratch for the
/// call) or already in the shared memory (read in place). Natively only `Host` is ever made,
/// and no threaded op reads it.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(native, allow(dead_code))]
pub enum F32Operand<'f> {
    /// Values in the main module's memory.
    Host(&'f [f32]),
    /// A threaded op's result in the shared memory.
    Shared(&'f SharedValues),
}

#[cfg_attr(native, allow(dead_code))]
impl F32Operand<'_> {
    /// Element count.
    pub fn len(&self) -> usize {
        match self {
            Self::Host(values) => values.len(),
            Self::Shared(values) => values.len(),
        }
    }
}

pub use platform::{SharedScratch, SharedValues, Threaded};
use std::sync::atomic::{AtomicUsize, Ordering};

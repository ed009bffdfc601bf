//! [`CpuPool`]: the CPU backend's worker pool (`cpu_threads/pool.js`, shipped as
//! `cpu-threads/pool.js`) as Rust sees it: regions of its shared `WebAssembly.Memory`
//! ([`SharedRegion`], freed on drop), copies in and out of them, and the kernels the pool
//! splits across its threads (products, block-format row dots, activations, binaries, scale,
//! softmax and layer-norm rows, permutes).
//! The page starts a pool and hands it over with `useCpuThreads(pool)`; [`CpuPool::current`]
//! is then the pool CPU programs initialised from that point use.
//!
//! Natively there is no pool: [`CpuPool`] is uninhabited, with the methods the CPU backend's
//! options call, and [`CpuPool::current`] is always `None`.

#[cfg(web)]
mod platform {
    use crate::browser::chunk::JsChunk;
    use crate::error::{Error, Result, Status};
    use crate::params::{DirectWrite, HostBuffer, ParameterBuffer, StatusResult, check_span};
    use crate::send_sync::LocalBoxFuture;
    use js_sys::{Array, Function, Reflect};
    use std::any::Any;
    use std::cell::RefCell;
    use std::rc::Rc;
    use wasm_bindgen::{JsCast, JsValue};
    use webdelegate_kernels::blocks::RowFormat;
    use webdelegate_kernels::layout::Permute4;
    use webdelegate_kernels::rows::{Activation, Binary};

    /// Block-format rows the pool dots with activation rows: `out[m, n] = x[m, k] . w[n, k]^T
    /// (+ bias)`, addresses in the shared memory.
    #[derive(Clone, Copy, Debug)]
    pub struct PoolDotRows {
        /// The weight's format.
        pub format: RowFormat,
        /// Weight rows (outputs per activation row).
        pub n: usize,
        /// Values per row.
        pub k: usize,
        /// Activation rows.
        pub m: usize,
        /// The weight's bytes.
        pub weights: u32,
        /// `m x k` activations: f32 values, or (with `int8`) their int8 blocks as
        /// [`CpuPool::quantize_rows`] wrote them.
        pub x: u32,
        /// Whether `x` is quantized to int8 blocks.
        pub int8: bool,
        /// `n` bias values, if any.
        pub bias: Option<u32>,
        /// `m x n` outputs.
        pub out: u32,
    }

    /// One product the pool runs: `c[m, n] = a @ b (+ bias)`, addresses in the shared memory.
    #[derive(Clone, Copy, Debug)]
    pub struct PoolGemm {
        /// Rows of `a` and `c`, the reduction, columns of `b` and `c`.
        pub m: usize,
        /// The reduction length.
        pub k: usize,
        /// Columns of `b` and `c`.
        pub n: usize,
        /// `a`'s first element, and its row and column strides (elements).
        pub a: (u32, usize, usize),
        /// `b`'s first element; `None` strides for a matrix packed in the GEMM's panel order.
        pub b: (u32, Option<(usize, usize)>),
        /// `n` bias values, if any.
        pub bias: Option<u32>,
        /// `c`'s first element (contiguous `m x n`).
        pub c: u32,
    }

    /// The products of one batched matmul with a strided right operand (an activation):
    /// product `i` reads `a` and `b` from the element offsets `offsets[2 i]` and
    /// `offsets[2 i + 1]` and writes block `i` of `c`; addresses in the shared memory.
    #[derive(Clone, Copy, Debug)]
    pub struct PoolGemmBatches {
        /// Products.
        pub count: usize,
        /// `2 * count` u32 element offsets.
        pub offsets: u32,
        /// Rows of each `a` and `c` block, the reduction, columns of each `b` and `c` block.
        pub mkn: (usize, usize, usize),
        /// `a`'s base, and its row and column strides (elements).
        pub a: (u32, usize, usize),
        /// `b`'s base, and its row and column strides (elements).
        pub b: (u32, usize, usize),
        /// `c`'s first element (`count` contiguous `m x n` blocks).
        pub c: u32,
    }

    thread_local! {
        static CURRENT: RefCell<Option<Rc<CpuPool>>> = const { RefCell::new(None) };
    }

    /// A started `CpuThreadPool` from `cpu-threads/pool.js`.
    #[derive(Debug)]
    pub struct CpuPool {
        js: JsValue,
        /// The pool's methods this side calls, looked up once (they run for every op).
        methods: Methods,
    }

    /// Bytes of the pool's shared memory this side owns; freed when dropped.
    #[derive(Debug)]
    pub struct SharedRegion {
        pool: Rc<CpuPool>,
        at: u32,
        bytes: usize,
    }

    fn method(target: &JsValue, name: &str) -> Result<Function> {
        Reflect::get(target, &JsValue::from_str(name))
            .ok()
            .and_then(|f| f.dyn_into::<Function>().ok())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "the CPU thread pool has no method {name:?} (start one with cpu-threads/pool.js's CpuThreadPool.start)"
                ))
            })
    }

    /// A pool method and its name (for messages).
    #[derive(Debug)]
    struct Method(&'static str, Function);

    /// The methods of a `CpuThreadPool` this side calls.
    #[derive(Debug)]
    struct Methods {
        alloc: Method,
        free: Method,
        write: Method,
        read: Method,
        gemm: Method,
        dot_rows: Method,
        quantize_rows: Method,
        gemm_batches: Method,
        unary: Method,
        softmax: Method,
        binary: Method,
        scale: Method,
        layer_norm: Method,
        permute: Method,
        set_threads: Method,
        park: Method,
        unpark: Method,
        release: Method,
        restore: Method,
    }

    fn thrown(error: JsValue, what: &str) -> Error {
        let text = Reflect::get(&error, &JsValue::from_str("message"))
            .ok()
            .and_then(|m| m.as_string())
            .or_else(|| error.as_string())
            .unwrap_or_else(|| format!("{error:?}"));
        if Reflect::get(&error, &JsValue::from_str("name"))
            .ok()
            .and_then(|n| n.as_string())
            .as_deref()
            == Some("RangeError")
        {
            return Error::memory_allocation_failed(format!("{what}: {text}"));
        }
        Error::internal(format!("{what}: {text}"))
    }

    impl CpuPool {
        /// Wraps a JavaScript pool after checking that it has the methods this side calls.
        ///
        /// # Errors
        /// `InvalidArgument` for anything that is not a started pool.
        pub fn from_js(js: JsValue) -> Result<Self> {
            let get = |name| method(&js, name).map(|f| Method(name, f));
            let methods = Methods {
                alloc: get("alloc")?,
                free: get("free")?,
                write: get("write")?,
                read: get("read")?,
                gemm: get("gemm")?,
                dot_rows: get("dotRows")?,
                quantize_rows: get("quantizeRows")?,
                gemm_batches: get("gemmBatches")?,
                unary: get("unary")?,
                softmax: get("softmax")?,
                binary: get("binary")?,
                scale: get("scale")?,
                layer_norm: get("layerNorm")?,
                permute: get("permute")?,
                set_threads: get("setThreads")?,
                park: get("park")?,
                unpark: get("unpark")?,
                release: get("release")?,
                restore: get("restore")?,
            };
            Ok(Self { js, methods })
        }

        /// The pool later CPU programs use (`None`: they run on one thread).
        pub fn current() -> Option<Rc<CpuPool>> {
            CURRENT.with(|current| current.borrow().clone())
        }

        /// Makes `pool` the current one (or none).
        pub fn install(pool: Option<Rc<CpuPool>>) {
            CURRENT.with(|current| *current.borrow_mut() = pool);
        }

        fn call(&self, Method(name, f): &Method, args: &[JsValue]) -> Result<JsValue> {
            let list: Array = args.iter().collect();
            f.apply(&self.js, &list)
                .map_err(|error| thrown(error, &format!("the CPU thread pool's {name}")))
        }

        fn number(&self, name: &str) -> Option<f64> {
            Reflect::get(&self.js, &JsValue::from_str(name))
                .ok()
                .and_then(|v| v.as_f64())
        }

        /// Threads an op runs on now (1 once a worker failed or the pool is parked).
        pub fn threads(&self) -> usize {
            self.number("threads").map_or(1, |n| n as usize)
        }

        /// Threads the pool was started with.
        pub fn size(&self) -> usize {
            self.number("size").map_or(1, |n| n as usize)
        }

        /// Why the pool runs on one thread, once a worker failed or it was terminated.
        pub fn broken_reason(&self) -> Option<String> {
            Reflect::get(&self.js, &JsValue::from_str("brokenReason"))
                .ok()
                .and_then(|v| v.as_string())
        }

        /// Uses `count` of the pool's threads.
        ///
        /// # Errors
        /// `InvalidArgument` outside `1..=size`.
        pub fn set_threads(&self, count: usize) -> Result<()> {
            if count == 0 || count > self.size() {
                return Err(Error::invalid_argument(format!(
                    "the CPU thread pool has {} threads; cannot use {count}",
                    self.size()
                )));
            }
            self.call(&self.methods.set_threads, &[JsValue::from(count as u32)])
                .map(|_| ())
        }

        /// Parks the pool (every op on the calling thread) or wakes it.
        pub fn set_parked(&self, parked: bool) {
            let method = if parked {
                &self.methods.park
            } else {
                &self.methods.unpark
            };
            let _ = self.call(method, &[]);
        }

        /// Ends the workers (LowMemory); the shared memory stays. Ops run on the calling thread
        /// until the next op, or [`CpuPool::restore`], starts them again.
        pub fn release(&self) {
            let _ = self.call(&self.methods.release, &[]);
        }

        /// Starts released workers again, in the background (nothing when none were released).
        pub fn restore(&self) {
            let _ = self.call(&self.methods.restore, &[]);
        }

        /// Why ops run on one thread although the pool has more (parked, released, broken).
        pub fn idle_reason(&self) -> Option<String> {
            Reflect::get(&self.js, &JsValue::from_str("idleReason"))
                .ok()
                .and_then(|v| v.as_string())
        }

        /// Bytes of the pool's shared memory now (it grows, never shrinks).
        pub fn memory_bytes(&self) -> usize {
            Reflect::get(&self.js, &JsValue::from_str("memory"))
                .ok()
                .and_then(|memory| Reflect::get(&memory, &JsValue::from_str("buffer")).ok())
                .and_then(|buffer| Reflect::get(&buffer, &JsValue::from_str("byteLength")).ok())
                .and_then(|length| length.as_f64())
                .map_or(0, |length| length as usize)
        }

        /// A region of `bytes` bytes.
        ///
        /// # Errors
        /// `MemoryAllocationFailed` when the shared memory cannot grow to hold it.
        pub fn alloc(self: &Rc<Self>, bytes: usize) -> Result<SharedRegion> {
            let at = self
                .call(&self.methods.alloc, &[JsValue::from(bytes as f64)])?
                .as_f64()
                .ok_or_else(|| {
                    Error::internal("the CPU thread pool's alloc returned no address")
                })?;
            Ok(SharedRegion {
                pool: Rc::clone(self),
                at: at as u32,
                bytes,
            })
        }

        /// A region holding a copy of `values`.
        ///
        /// # Errors
        /// As [`CpuPool::alloc`].
        pub fn upload_f32(self: &Rc<Self>, values: &[f32]) -> Result<SharedRegion> {
            let region = self.alloc(values.len() * 4)?;
            region.write_f32(0, values)?;
            Ok(region)
        }

        /// A region holding a copy of `bytes`.
        ///
        /// # Errors
        /// As [`CpuPool::alloc`].
        pub fn upload_bytes(self: &Rc<Self>, bytes: &[u8]) -> Result<SharedRegion> {
            let region = self.alloc(bytes.len())?;
            // SAFETY: the view lives only for this call, and nothing allocates meanwhile.
            let view = unsafe { js_sys::Uint8Array::view(bytes) };
            self.call(
                &self.methods.write,
                &[JsValue::from(region.at), view.into()],
            )?;
            Ok(region)
        }

        /// Runs one product on the pool's threads (at most `threads` of them).
        ///
        /// # Errors
        /// `Internal` when a kernel refuses its operands or a worker died or hangs (the pool
        /// then runs on one thread).
        pub fn gemm(&self, g: PoolGemm, threads: usize) -> Result<()> {
            let (b_packed, (b_row, b_col)) = match g.b.1 {
                None => (true, (0, 0)),
                Some(strides) => (false, strides),
            };
            let n = |v: usize| JsValue::from(v as f64);
            self.call(
                &self.methods.gemm,
                &[
                    n(g.m),
                    n(g.k),
                    n(g.n),
                    JsValue::from(g.a.0),
                    n(g.a.1),
                    n(g.a.2),
                    JsValue::from(g.b.0),
                    JsValue::from(b_packed),
                    n(b_row),
                    n(b_col),
                    JsValue::from(g.bias.unwrap_or(0)),
                    JsValue::from(g.c),
                    n(threads),
                ],
            )
            .map(|_| ())
        }

        /// `out[i * n + r] = rows[r] . x[i] (+ bias[r])` for `n` weight rows of `k` values
        /// and `m` activation rows, on the pool's threads (at most `threads`).
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn dot_rows(&self, d: PoolDotRows, threads: usize) -> Result<()> {
            let n = |v: usize| JsValue::from(v as f64);
            self.call(
                &self.methods.dot_rows,
                &[
                    JsValue::from(d.format.code()),
                    n(d.n),
                    n(d.k),
                    n(d.m),
                    JsValue::from(d.weights),
                    JsValue::from(d.x),
                    JsValue::from(d.bias.unwrap_or(0)),
                    JsValue::from(d.out),
                    n(d.n),
                    n(threads),
                    JsValue::from(d.int8),
                ],
            )
            .map(|_| ())
        }

        /// Quantizes the `m` activation rows of `k` values at `x` into int8 blocks at `out`
        /// (laid out as `webdelegate_kernels::int8_dots::Int8Layout` says), rows split between the pool's threads (at
        /// most `threads`).
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn quantize_rows(
            &self,
            (m, k): (usize, usize),
            (x, out): (u32, u32),
            threads: usize,
        ) -> Result<()> {
            let n = |v: usize| JsValue::from(v as f64);
            let args = [n(m), n(k), JsValue::from(x), JsValue::from(out), n(threads)];
            self.call(&self.methods.quantize_rows, &args).map(|_| ())
        }

        /// Runs the products of one batched matmul on the pool's threads (at most `threads`),
        /// whole products per thread.
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn gemm_batches(&self, g: PoolGemmBatches, threads: usize) -> Result<()> {
            let n = |v: usize| JsValue::from(v as f64);
            let (m, k, cols) = g.mkn;
            self.call(
                &self.methods.gemm_batches,
                &[
                    n(g.count),
                    JsValue::from(g.offsets),
                    n(m),
                    n(k),
                    n(cols),
                    JsValue::from(g.a.0),
                    n(g.a.1),
                    n(g.a.2),
                    JsValue::from(g.b.0),
                    n(g.b.1),
                    n(g.b.2),
                    JsValue::from(g.c),
                    n(threads),
                ],
            )
            .map(|_| ())
        }

        /// `out[i] = f(x[i])` for `len` values at `x` (`x` may be `out`), on the pool's threads
        /// (at most `threads`).
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn unary(
            &self,
            activation: Activation,
            len: usize,
            (x, out): (u32, u32),
            threads: usize,
        ) -> Result<()> {
            self.call(
                &self.methods.unary,
                &[
                    JsValue::from(activation.code()),
                    JsValue::from(len as f64),
                    JsValue::from(x),
                    JsValue::from(out),
                    JsValue::from(threads as f64),
                ],
            )
            .map(|_| ())
        }

        /// `out = softmax(x + mask)` over `rows` rows of `width` values (`x` and `out` do not
        /// overlap) on the pool's threads (at most `threads`); `mask` is `(address, period,
        /// count)`: row `r` adds mask row `(r / period) % count`.
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn softmax(
            &self,
            (rows, width): (usize, usize),
            x: u32,
            mask: Option<(u32, usize, usize)>,
            out: u32,
            threads: usize,
        ) -> Result<()> {
            let n = |v: usize| JsValue::from(v as f64);
            let (mask, period, count) = mask.unwrap_or((0, 1, 1));
            self.call(
                &self.methods.softmax,
                &[
                    n(rows),
                    n(width),
                    JsValue::from(x),
                    JsValue::from(mask),
                    n(period),
                    n(count),
                    JsValue::from(out),
                    n(threads),
                ],
            )
            .map(|_| ())
        }

        /// `out[i] = a[i] (op) b[i]` for `len` values on the pool's threads (at most
        /// `threads`).
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn binary(
            &self,
            op: Binary,
            len: usize,
            (a, b, out): (u32, u32, u32),
            threads: usize,
        ) -> Result<()> {
            let n = |v: usize| JsValue::from(v as f64);
            let args = [
                JsValue::from(op.code()),
                n(len),
                JsValue::from(a),
                JsValue::from(b),
                JsValue::from(out),
                n(threads),
            ];
            self.call(&self.methods.binary, &args).map(|_| ())
        }

        /// `out[i] = x[i] * scale + bias` for `len` values on the pool's threads (at most
        /// `threads`).
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn scale(
            &self,
            len: usize,
            (x, out): (u32, u32),
            (scale, bias): (f32, f32),
            threads: usize,
        ) -> Result<()> {
            let n = |v: usize| JsValue::from(v as f64);
            let args = [
                n(len),
                JsValue::from(x),
                JsValue::from(out),
                JsValue::from(scale.to_bits()),
                JsValue::from(bias.to_bits()),
                n(threads),
            ];
            self.call(&self.methods.scale, &args).map(|_| ())
        }

        /// Layer norm of `rows` rows of `width` values at `x` into `out` (`gamma`, `beta`:
        /// `width` values each) on the pool's threads (at most `threads`).
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn layer_norm(
            &self,
            (rows, width): (usize, usize),
            (x, gamma, beta, out): (u32, u32, u32, u32),
            eps: f32,
            threads: usize,
        ) -> Result<()> {
            let n = |v: usize| JsValue::from(v as f64);
            let args = [
                n(rows),
                n(width),
                JsValue::from(x),
                JsValue::from(gamma),
                JsValue::from(beta),
                JsValue::from(eps.to_bits()),
                JsValue::from(out),
                n(threads),
            ];
            self.call(&self.methods.layer_norm, &args).map(|_| ())
        }

        /// `geometry`'s permuted copy of the `x_len` values at `x` into `out`, by output rows,
        /// on the pool's threads (at most `threads`).
        ///
        /// # Errors
        /// As [`CpuPool::gemm`].
        pub fn permute(
            &self,
            geometry: &Permute4,
            (x, x_len, out): (u32, usize, u32),
            threads: usize,
        ) -> Result<()> {
            let n = |v: usize| JsValue::from(v as f64);
            let [_, d1, d2, d3] = geometry.dims;
            let [s0, s1, s2, s3] = geometry.strides;
            let rows = geometry
                .rows()
                .ok_or_else(|| Error::internal("a permute's row count overflows"))?;
            let args = [
                n(rows),
                n(d1),
                n(d2),
                n(d3),
                n(s0),
                n(s1),
                n(s2),
                n(s3),
                JsValue::from(x),
                n(x_len),
                JsValue::from(out),
                n(threads),
            ];
            self.call(&self.methods.permute, &args).map(|_| ())
        }
    }

    impl SharedRegion {
        /// The region's first byte in the shared memory.
        pub fn at(&self) -> u32 {
            self.at
        }

        /// The region's size in bytes.
        pub fn bytes(&self) -> usize {
            self.bytes
        }

        /// Byte `offset` of the region, after checking that `len` bytes fit there.
        ///
        /// # Errors
        /// `Internal` when they do not.
        pub fn address(&self, offset: usize, len: usize) -> Result<u32> {
            match offset.checked_add(len) {
                Some(end) if end <= self.bytes => Ok(self.at + offset as u32),
                _ => Err(Error::internal(
                    "a shared-memory access runs past its region",
                )),
            }
        }

        /// Copies `values` to byte `offset` of the region.
        ///
        /// # Errors
        /// `Internal` when they do not fit.
        pub fn write_f32(&self, offset: usize, values: &[f32]) -> Result<()> {
            let at = self.address(offset, values.len() * 4)?;
            // SAFETY: the view lives only for this call, and nothing allocates meanwhile.
            let view = unsafe { js_sys::Float32Array::view(values) };
            self.pool
                .call(&self.pool.methods.write, &[JsValue::from(at), view.into()])?;
            Ok(())
        }

        /// Copies `values` to byte `offset` of the region.
        ///
        /// # Errors
        /// `Internal` when they do not fit.
        pub fn write_u32(&self, offset: usize, values: &[u32]) -> Result<()> {
            let at = self.address(offset, values.len() * 4)?;
            // SAFETY: the view lives only for this call, and nothing allocates meanwhile.
            let view = unsafe { js_sys::Uint32Array::view(values) };
            self.pool
                .call(&self.pool.methods.write, &[JsValue::from(at), view.into()])?;
            Ok(())
        }

        /// Copies `bytes` to byte `offset` of the region.
        ///
        /// # Errors
        /// `Internal` when they do not fit.
        pub fn write_bytes(&self, offset: usize, bytes: &[u8]) -> Result<()> {
            let at = self.address(offset, bytes.len())?;
            // SAFETY: the view lives only for this call, and nothing allocates meanwhile.
            let view = unsafe { js_sys::Uint8Array::view(bytes) };
            self.pool
                .call(&self.pool.methods.write, &[JsValue::from(at), view.into()])?;
            Ok(())
        }

        /// Copies `out.len()` bytes from byte `offset` of the region into `out`.
        ///
        /// # Errors
        /// `Internal` when they do not fit.
        pub fn read_bytes(&self, offset: usize, out: &mut [u8]) -> Result<()> {
            let at = self.address(offset, out.len())?;
            // SAFETY: the view lives only for this call, and nothing allocates meanwhile.
            let view = unsafe { js_sys::Uint8Array::view_mut_raw(out.as_mut_ptr(), out.len()) };
            self.pool
                .call(&self.pool.methods.read, &[JsValue::from(at), view.into()])?;
            Ok(())
        }

        /// Copies `out.len()` floats from byte `offset` of the region into `out`.
        ///
        /// # Errors
        /// `Internal` when they do not fit.
        pub fn read_f32(&self, offset: usize, out: &mut [f32]) -> Result<()> {
            let at = self.address(offset, out.len() * 4)?;
            // SAFETY: the view lives only for this call, and nothing allocates meanwhile.
            let view = unsafe { js_sys::Float32Array::view_mut_raw(out.as_mut_ptr(), out.len()) };
            self.pool
                .call(&self.pool.methods.read, &[JsValue::from(at), view.into()])?;
            Ok(())
        }
    }

    /// A region as a parameter provider's destination: weights are gathered straight into
    /// the shared memory, a response body's chunks written there from JavaScript
    /// ([`ParameterBuffer::direct_write`]) without a stop in this module's memory.
    impl ParameterBuffer for SharedRegion {
        fn size(&self) -> u64 {
            self.bytes as u64
        }

        fn write(&self, offset: u64, bytes: &[u8]) -> StatusResult<()> {
            check_span(
                "shared region write",
                offset,
                bytes.len() as u64,
                self.bytes as u64,
            )?;
            self.write_bytes(offset as usize, bytes)
                .map_err(|error| Status::internal(error.message().to_owned()))
        }

        fn read(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
            Box::pin(async move {
                check_span("shared region read", offset, length, self.bytes as u64)?;
                let mut out = HostBuffer::zeroed(length)?.into_bytes();
                self.read_bytes(offset as usize, &mut out)
                    .map_err(|error| Status::internal(error.message().to_owned()))?;
                Ok(out)
            })
        }

        fn as_any(&self) -> &dyn Any {
            self
        }

        fn direct_write(&self) -> Option<Box<dyn DirectWrite>> {
            Some(Box::new(RegionWriter {
                pool: Rc::clone(&self.pool),
                at: self.at,
                bytes: self.bytes,
            }))
        }
    }

    /// A [`SharedRegion`]'s write path for JavaScript chunks (it does not own the region).
    struct RegionWriter {
        pool: Rc<CpuPool>,
        at: u32,
        bytes: usize,
    }

    impl DirectWrite for RegionWriter {
        fn write_js_chunk(
            &self,
            offset: u64,
            chunk: &JsChunk,
            chunk_offset: usize,
            length: usize,
        ) -> StatusResult<()> {
            check_span(
                "shared region write",
                offset,
                length as u64,
                self.bytes as u64,
            )?;
            if chunk_offset
                .checked_add(length)
                .is_none_or(|end| end > chunk.len())
            {
                return Err(Status::internal("a chunk write runs past its chunk"));
            }
            // In bounds of the region (checked above), which is inside the 32-bit memory.
            let at = self.at + offset as u32;
            self.pool
                .call(
                    &self.pool.methods.write,
                    &[JsValue::from(at), chunk.view(chunk_offset, length).into()],
                )
                .map(|_| ())
                .map_err(|error| Status::internal(error.message().to_owned()))
        }
    }

    impl Drop for SharedRegion {
        fn drop(&mut self) {
            let _ = self
                .pool
                .call(&self.pool.methods.free, &[JsValue::from(self.at)]);
        }
    }
}

#[cfg(native)]
mod platform {
    use crate::error::Result;
    use std::rc::Rc;

    /// No pool natively (uninhabited).
    #[derive(Debug)]
    pub enum CpuPool {}

    impl CpuPool {
        /// Never a pool natively.
        pub fn current() -> Option<Rc<CpuPool>> {
            None
        }

        /// Threads (unreachable natively).
        pub fn threads(&self) -> usize {
            match *self {}
        }

        /// Threads the pool was started with (unreachable natively).
        pub fn size(&self) -> usize {
            match *self {}
        }

        /// Why the pool runs on one thread (unreachable natively).
        pub fn broken_reason(&self) -> Option<String> {
            match *self {}
        }

        /// Uses `count` threads (unreachable natively).
        pub fn set_threads(&self, _count: usize) -> Result<()> {
            match *self {}
        }

        /// Parks or wakes the pool (unreachable natively).
        pub fn set_parked(&self, _parked: bool) {
            match *self {}
        }

        /// Ends the workers (unreachable natively).
        pub fn release(&self) {
            match *self {}
        }

        /// Starts them again (unreachable natively).
        pub fn restore(&self) {
            match *self {}
        }

        /// Why ops run on one thread (unreachable natively).
        pub fn idle_reason(&self) -> Option<String> {
            match *self {}
        }
    }
}

pub use platform::CpuPool;
#[cfg(web)]
pub use platform::{PoolDotRows, PoolGemm, PoolGemmBatches, SharedRegion};

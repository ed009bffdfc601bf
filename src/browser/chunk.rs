//! [`JsChunk`]: bytes JavaScript holds (a response body's `Uint8Array`), handed through Rust
//! without being copied into wasm memory unless something must read them.
//!
//! In the browser a chunk is a `Uint8Array`; it can be copied out ([`JsChunk::copy_to`]) or
//! written straight into a WebGPU buffer with that buffer's `GPUQueue.writeBuffer`
//! ([`JsChunk::write_to_gpu`]). Natively there are no JavaScript chunks: the type is
//! uninhabited, with the same methods, so code that matches on it compiles unchanged on both
//! platforms and its native arms are statically unreachable.
//!
//! A chunk is either *owned* (its array is its own) or *lent*: a view of a body buffer that the
//! reader reuses ([`crate::browser::fetch`]), valid only until that body's next read (or its
//! drop). Code that consumes a chunk at once (copies it, writes it to the GPU) needs no care;
//! code that keeps it past the next read takes [`JsChunk::owned`].

#[cfg(web)]
mod platform {
    /// A `Uint8Array` from JavaScript (a body chunk of a `fetch` response or a cached one).
    #[derive(Clone, Debug)]
    pub struct JsChunk {
        array: js_sys::Uint8Array,
        lent: bool,
    }

    impl From<js_sys::Uint8Array> for JsChunk {
        /// An owned chunk.
        fn from(array: js_sys::Uint8Array) -> Self {
            Self { array, lent: false }
        }
    }

    impl JsChunk {
        /// A lent chunk: `array` views a buffer its reader fills again at the next read.
        pub(crate) fn lent(array: js_sys::Uint8Array) -> Self {
            Self { array, lent: true }
        }

        /// The bytes as an array that stays valid: the array itself when owned, a copy when lent.
        pub(crate) fn owned(&self) -> js_sys::Uint8Array {
            if self.lent {
                self.array.slice(0, self.array.length())
            } else {
                self.array.clone()
            }
        }

        /// Length in bytes.
        pub fn len(&self) -> usize {
            self.array.length() as usize
        }

        /// Whether the chunk is empty.
        pub fn is_empty(&self) -> bool {
            self.array.length() == 0
        }

        /// Copies `target.len()` bytes from `offset` into `target` (the caller keeps the range
        /// within [`JsChunk::len`]).
        pub fn copy_to(&self, offset: usize, target: &mut [u8]) {
            let end = offset.saturating_add(target.len());
            self.array
                .subarray(offset as u32, end as u32)
                .copy_to(target);
        }

        /// A view of `length` bytes from `offset` (valid as long as the chunk is: a lent
        /// chunk's view only until its body's next read). The caller keeps the range within
        /// [`JsChunk::len`].
        pub(crate) fn view(&self, offset: usize, length: usize) -> js_sys::Uint8Array {
            let end = offset.saturating_add(length);
            self.array.subarray(offset as u32, end as u32)
        }

        /// `queue.writeBuffer(buffer, offset, chunk, chunk_offset, length)`: the bytes go from
        /// JavaScript to the GPU without passing through wasm memory. The caller keeps `offset`
        /// and `length` multiples of 4 and the range inside both the chunk and the buffer.
        ///
        /// # Errors
        /// What the browser threw, as text.
        pub fn write_to_gpu(
            &self,
            queue: &wgpu::webgpu::GpuQueue,
            buffer: &wgpu::webgpu::GpuBuffer,
            offset: u64,
            chunk_offset: usize,
            length: usize,
        ) -> Result<(), String> {
            queue
                .write_buffer_with_f64_and_u8_array_and_f64_and_f64(
                    buffer,
                    offset as f64,
                    &self.array,
                    chunk_offset as f64,
                    length as f64,
                )
                .map_err(|error| format!("{error:?}"))
        }
    }
}

#[cfg(native)]
mod platform {
    /// Natively no bytes live in JavaScript: no value of this type exists.
    #[derive(Clone, Debug)]
    pub enum JsChunk {}

    impl JsChunk {
        /// Length in bytes (never called: there is no native chunk).
        pub fn len(&self) -> usize {
            match *self {}
        }

        /// Whether the chunk is empty (never called natively).
        pub fn is_empty(&self) -> bool {
            match *self {}
        }

        /// Copies bytes out (never called natively).
        pub fn copy_to(&self, _offset: usize, _target: &mut [u8]) {
            match *self {}
        }
    }
}

pub use platform::JsChunk;

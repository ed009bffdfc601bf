//! [`JsChunk`]: bytes JavaScript holds (a response body's `Uint8Array`), handed through Rust
//! without being copied into wasm memory unless something must read them.
//!
//! In the browser a chunk is a `Uint8Array`; it can be copied out ([`JsChunk::copy_to`]) or
//! written straight into a WebGPU buffer with that buffer's `GPUQueue.writeBuffer`
//! ([`JsChunk::write_to_gpu`]). Natively there are no JavaScript chunks: the type is
//! uninhabited, with the same methods, so code that matches on it compiles unchanged on both
//! platforms and its native arms are statically unreachable.

#[cfg(web)]
mod platform {
    /// A `Uint8Array` from JavaScript (a body chunk of a `fetch` response or a cached one).
    #[derive(Clone, Debug)]
    pub struct JsChunk(js_sys::Uint8Array);

    impl From<js_sys::Uint8Array> for JsChunk {
        fn from(array: js_sys::Uint8Array) -> Self {
            Self(array)
        }
    }

    impl JsChunk {
        /// The array, for the other browser wrappers.
        pub(crate) fn array(&self) -> &js_sys::Uint8Array {
            &self.0
        }

        /// Length in bytes.
        pub fn len(&self) -> usize {
            self.0.length() as usize
        }

        /// Whether the chunk is empty.
        pub fn is_empty(&self) -> bool {
            self.0.length() == 0
        }

        /// Copies `target.len()` bytes from `offset` into `target` (the caller keeps the range
        /// within [`JsChunk::len`]).
        pub fn copy_to(&self, offset: usize, target: &mut [u8]) {
            let end = offset.saturating_add(target.len());
            self.0.subarray(offset as u32, end as u32).copy_to(target);
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
                    &self.0,
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

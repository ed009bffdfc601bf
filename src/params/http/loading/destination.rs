//! A destination buffer as the streaming code sees it: a [`ParameterBuffer`] plus its
//! [`DirectWrite`] path when it has one (in the browser, a WebGPU buffer's `GPUQueue`), so a
//! JavaScript chunk goes to `queue.writeBuffer` without ever being copied into wasm memory.
//!
//! Every write that reaches a destination is 4-byte aligned in offset and size (WebGPU's
//! `writeBuffer` rule); [`crate::params::http::loading::sink`] makes it so.
//!
//! A destination counts the bytes it wrote each way ([`WriteCounts`]): straight from a
//! JavaScript chunk to the GPU queue, or from host (wasm) memory. Loads report the sums in their
//! [`crate::params::http::LoadStats`], so tests and benchmarks can see that the zero-copy path
//! was taken.

use crate::params::http::transport::BodyChunk;
use crate::params::http::transport::staging::StagingPool;
use crate::params::{DirectWrite, ParameterBuffer, SharedBuffer, StatusResult};
use std::cell::Cell;

/// Bytes a destination wrote, by path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteCounts {
    /// Bytes that went from a JavaScript chunk straight to `GPUQueue.writeBuffer`, never in
    /// wasm memory.
    pub direct: u64,
    /// Bytes written from host memory (native response bodies, staging copies of JavaScript
    /// chunks, words carried across chunk boundaries, unaligned edges, splats).
    pub via_host: u64,
}

/// Where one target's bytes go.
pub struct Destination<'a> {
    buffer: DestinationBuffer<'a>,
    /// Bytes of the buffer from this offset on belong to the load (padding it allocated), so
    /// they may be overwritten with zeros to round a write up to 4 bytes.
    owned_from: Option<u64>,
    counts: Cell<WriteCounts>,
    direct: Option<Box<dyn DirectWrite>>,
}

/// The buffer a destination writes: allocated by the load, or the caller's (`gather`).
enum DestinationBuffer<'a> {
    Shared(SharedBuffer),
    Borrowed(&'a dyn ParameterBuffer),
}

impl<'a> Destination<'a> {
    /// A destination writing `buffer`, owning its bytes from `owned_from` on.
    pub fn shared(buffer: SharedBuffer, owned_from: Option<u64>) -> Self {
        Self {
            direct: buffer.direct_write(),
            buffer: DestinationBuffer::Shared(buffer),
            owned_from,
            counts: Cell::default(),
        }
    }

    /// A destination writing the caller's `buffer`.
    pub fn borrowed(buffer: &'a dyn ParameterBuffer) -> Self {
        Self {
            direct: buffer.direct_write(),
            buffer: DestinationBuffer::Borrowed(buffer),
            owned_from: None,
            counts: Cell::default(),
        }
    }

    /// The buffer.
    pub fn buffer(&self) -> &dyn ParameterBuffer {
        match &self.buffer {
            DestinationBuffer::Shared(buffer) => &**buffer,
            DestinationBuffer::Borrowed(buffer) => *buffer,
        }
    }

    /// The buffer, when the load allocated it.
    pub fn shared_buffer(&self) -> Option<&SharedBuffer> {
        match &self.buffer {
            DestinationBuffer::Shared(buffer) => Some(buffer),
            DestinationBuffer::Borrowed(_) => None,
        }
    }

    /// From which offset the load owns the buffer's bytes, if at all.
    pub fn owned_from(&self) -> Option<u64> {
        self.owned_from
    }

    /// Whether chunks from JavaScript go straight to the GPU queue.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// Bytes written so far, by path.
    pub fn write_counts(&self) -> WriteCounts {
        self.counts.get()
    }

    fn count(&self, update: impl FnOnce(&mut WriteCounts)) {
        let mut counts = self.counts.get();
        update(&mut counts);
        self.counts.set(counts);
    }

    /// Writes host bytes at `offset`.
    ///
    /// # Errors
    /// The buffer's own errors (`OUT_OF_RANGE`, device errors).
    pub fn write_host(&self, offset: u64, bytes: &[u8]) -> StatusResult<()> {
        self.buffer().write(offset, bytes)?;
        let length = bytes.len() as u64;
        self.count(|c| c.via_host = c.via_host.saturating_add(length));
        Ok(())
    }

    /// Writes `length` bytes of `chunk` from `chunk_offset` at buffer `offset`, copying through
    /// a staging buffer from `pool` only when the bytes are not already in host memory and the
    /// destination is not a GPU buffer the chunk can go to directly.
    ///
    /// # Errors
    /// The buffer's own errors; `INTERNAL` when the browser rejects `writeBuffer`.
    pub fn write_chunk(
        &self,
        offset: u64,
        chunk: &BodyChunk,
        chunk_offset: usize,
        length: usize,
        pool: &StagingPool,
    ) -> StatusResult<()> {
        match chunk {
            BodyChunk::Host(bytes) => {
                let end = chunk_offset.saturating_add(length);
                self.write_host(offset, bytes.get(chunk_offset..end).unwrap_or(&[]))
            }
            BodyChunk::Js(js_chunk) => {
                if let Some(direct) = &self.direct {
                    direct.write_js_chunk(offset, js_chunk, chunk_offset, length)?;
                    self.count(|c| c.direct = c.direct.saturating_add(length as u64));
                    return Ok(());
                }
                let mut staging = pool.take();
                let mut done = 0usize;
                while done < length {
                    let step = (length - done).min(staging.capacity());
                    let space = staging.space();
                    let Some(window) = space.get_mut(..step) else {
                        break;
                    };
                    chunk.copy_to(chunk_offset + done, window);
                    self.write_host(offset + done as u64, window)?;
                    done += step;
                }
                Ok(())
            }
        }
    }
}

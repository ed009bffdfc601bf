//! `FreeableBuffer` (upstream's `freeable_buffer.h`): bytes a backend owns and may free early —
//! the processed blob `init` receives, and the data a `NamedDataMap` hands out. A leaf of the
//! registry: the interface and the named data both use it.

/// The processed blob handed to `init` (upstream's `FreeableBuffer`). The backend owns it and may
/// [`free`](FreeableBuffer::free) it once it no longer needs the bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FreeableBuffer {
    data: Option<Vec<u8>>,
}

impl FreeableBuffer {
    /// A buffer holding `data`.
    pub fn new(data: Vec<u8>) -> Self {
        Self { data: Some(data) }
    }

    /// The bytes; empty once freed.
    pub fn data(&self) -> &[u8] {
        self.data.as_deref().unwrap_or(&[])
    }

    /// Size in bytes; 0 once freed.
    pub fn size(&self) -> usize {
        self.data().len()
    }

    /// Releases the bytes.
    pub fn free(&mut self) {
        self.data = None;
    }

    /// Whether [`free`](FreeableBuffer::free) was called.
    pub fn is_freed(&self) -> bool {
        self.data.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeable_buffer_frees() {
        let mut buffer = FreeableBuffer::new(vec![1, 2, 3]);
        assert_eq!(buffer.size(), 3);
        buffer.free();
        assert!(buffer.is_freed());
        assert!(buffer.data().is_empty());
    }
}

//! Reading GPU buffers back (`map_async`, then wait for its callback) and waiting for the
//! queue (`onSubmittedWorkDone`).
//!
//! Natively the callback fires inside `Device::poll`, so the read blocks in `poll(Wait)`. In the
//! browser the callback fires from the promise of `GPUBuffer.mapAsync`, so the read awaits a
//! future that the callback completes and yields to the event loop meanwhile (polling in a loop
//! would never let that promise resolve); the mapped bytes are copied out of the browser's
//! view through `browser::gpu`.

use crate::backends::webgpu::device::GpuContext;
use crate::browser::gpu;
use crate::error::{Error, Result};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    closed: bool,
    waker: Option<Waker>,
}

/// Completes a [`Receiver`] once.
pub(crate) struct Sender<T>(Arc<Mutex<Slot<T>>>);

/// A future of the value a [`Sender`] sends; `None` when the sender was dropped without sending.
pub(crate) struct Receiver<T>(Arc<Mutex<Slot<T>>>);

/// A one-shot channel whose receiver is a future (the sender may live on another thread).
pub(crate) fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        closed: false,
        waker: None,
    }));
    (Sender(slot.clone()), Receiver(slot))
}

fn lock<T>(slot: &Mutex<Slot<T>>) -> std::sync::MutexGuard<'_, Slot<T>> {
    // Every critical section is a few field assignments; a poisoned slot is still consistent.
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<T> Sender<T> {
    /// Stores `value` and wakes the receiver.
    pub(crate) fn send(self, value: T) {
        let waker = {
            let mut slot = lock(&self.0);
            slot.value = Some(value);
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut slot = lock(&self.0);
            slot.closed = true;
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut slot = lock(&self.0);
        if let Some(value) = slot.value.take() {
            return Poll::Ready(Some(value));
        }
        if slot.closed {
            return Poll::Ready(None);
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Waits until the GPU has finished the work submitted so far.
///
/// # Errors
/// `Internal` when the device cannot be polled (e.g. it was lost).
#[cfg(native)]
pub(crate) fn wait_idle(ctx: &GpuContext) -> Result<()> {
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map(|_| ())
        .map_err(|e| Error::internal(format!("waiting for the GPU failed: {e}")))
}

/// In the browser the queue is driven by the event loop and reads wait on their own promises:
/// nothing to wait for here.
///
/// # Errors
/// Never.
#[cfg(web)]
pub(crate) fn wait_idle(_ctx: &GpuContext) -> Result<()> {
    Ok(())
}

/// Resolves once the GPU has finished the work submitted so far (`writeBuffer` calls
/// included: an empty submit flushes them natively).
///
/// # Errors
/// `InvalidState` when the device was lost meanwhile; `Internal` when it cannot be polled.
pub(crate) async fn submitted_work_done(ctx: &GpuContext) -> Result<()> {
    let (sender, receiver) = oneshot();
    ctx.queue.on_submitted_work_done(move || sender.send(()));
    ctx.queue.submit(std::iter::empty());
    wait_idle(ctx)?;
    match receiver.await {
        Some(()) => Ok(()),
        None => Err(Error::invalid_state(format!(
            "the WebGPU device dropped its work-done callback ({})",
            ctx.lost().unwrap_or_else(|| "device lost?".to_owned())
        ))),
    }
}

/// Maps the first `size` bytes of `buffer` (MAP_READ usage, work already submitted) and copies
/// them out, then unmaps it.
///
/// # Errors
/// `AccessFailed` when the mapping fails (e.g. the device was lost); `Internal` for a mapped range
/// wgpu refuses.
pub(crate) async fn read_mapped(
    ctx: &GpuContext,
    buffer: &wgpu::Buffer,
    size: u64,
) -> Result<Vec<u8>> {
    if size == 0 {
        return Ok(Vec::new());
    }
    let (sender, receiver) = oneshot();
    let slice = buffer.slice(0..size);
    slice.map_async(wgpu::MapMode::Read, move |result| sender.send(result));
    wait_idle(ctx)?;
    match receiver.await {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            return Err(Error::access_failed(format!(
                "mapping a GPU buffer for reading failed: {e}"
            )));
        }
        None => {
            return Err(Error::access_failed(
                "mapping a GPU buffer for reading was abandoned (device lost?)",
            ));
        }
    }
    let bytes = {
        let view = slice
            .get_mapped_range()
            .map_err(|e| Error::internal(format!("cannot view a mapped GPU buffer: {e}")))?;
        gpu::mapped_bytes(&view)
    };
    buffer.unmap();
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oneshot_delivers_or_reports_a_dropped_sender() {
        let (sender, receiver) = oneshot();
        sender.send(7u32);
        assert_eq!(pollster::block_on(receiver), Some(7));
        let (sender, receiver) = oneshot::<u32>();
        drop(sender);
        assert_eq!(pollster::block_on(receiver), None);
        let (sender, receiver) = oneshot();
        let thread = std::thread::spawn(move || sender.send("late"));
        assert_eq!(pollster::block_on(receiver), Some("late"));
        thread.join().unwrap();
    }
}

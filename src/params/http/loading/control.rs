//! Load control: [`AbortHandle`] (cancel one load) and [`SuspendGate`] (pause every load of a
//! provider while the host is suspended). Both are a shared flag with wakers, usable from any
//! executor and from JavaScript callbacks; neither spins.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct FlagState {
    set: bool,
    wakers: Vec<Waker>,
}

/// A boolean that futures can wait on.
#[derive(Clone, Default)]
struct Flag {
    state: Arc<Mutex<FlagState>>,
}

impl Flag {
    fn lock(&self) -> std::sync::MutexGuard<'_, FlagState> {
        // A bool and a list of wakers stay consistent even if a holder panicked.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn get(&self) -> bool {
        self.lock().set
    }

    fn put(&self, value: bool) {
        let wakers = {
            let mut state = self.lock();
            state.set = value;
            std::mem::take(&mut state.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Resolves once the flag equals `value`.
    fn wait(&self, value: bool) -> FlagWait {
        FlagWait {
            flag: self.clone(),
            value,
            registered: None,
        }
    }
}

/// Waits for a flag value; unregisters its waker when dropped, so waits that never fire (one
/// per chunk read, one per load) leave nothing behind.
struct FlagWait {
    flag: Flag,
    value: bool,
    registered: Option<Waker>,
}

impl Future for FlagWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.flag.lock();
        if state.set == self.value {
            return Poll::Ready(());
        }
        if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            state.wakers.push(cx.waker().clone());
        }
        drop(state);
        self.registered = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for FlagWait {
    fn drop(&mut self) {
        if let Some(waker) = self.registered.take() {
            self.flag.lock().wakers.retain(|w| !w.will_wake(&waker));
        }
    }
}

/// Cancels a load. Clone it to keep one end; [`AbortHandle::abort`] may be called from anywhere,
/// any number of times.
#[derive(Clone, Default)]
pub struct AbortHandle {
    flag: Flag,
}

impl std::fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortHandle")
            .field("aborted", &self.is_aborted())
            .finish()
    }
}

impl AbortHandle {
    /// A handle that has not been aborted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every load that uses this handle.
    pub fn abort(&self) {
        self.flag.put(true);
    }

    /// Whether [`AbortHandle::abort`] was called.
    pub fn is_aborted(&self) -> bool {
        self.flag.get()
    }

    /// Resolves once the handle is aborted.
    pub fn aborted(&self) -> impl Future<Output = ()> + 'static {
        self.flag.wait(true)
    }

    /// Wakers registered by pending waits (tests check that dropped waits leave none).
    #[cfg(test)]
    pub(crate) fn waiters(&self) -> usize {
        self.flag.lock().wakers.len()
    }
}

/// Open while the host runs, closed while it is suspended: loads wait at the gate before every
/// request they issue, and stop streaming (aborting the request) the moment it closes.
#[derive(Clone, Default)]
pub struct SuspendGate {
    closed: Flag,
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

/// Counts one request in flight (see [`SuspendGate::request`]) until dropped.
pub struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl std::fmt::Debug for SuspendGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuspendGate")
            .field("suspended", &self.is_suspended())
            .finish()
    }
}

impl SuspendGate {
    /// Closes the gate.
    pub fn suspend(&self) {
        self.closed.put(true);
    }

    /// Opens the gate and wakes every waiting load.
    pub fn resume(&self) {
        self.closed.put(false);
    }

    /// Whether the gate is closed.
    pub fn is_suspended(&self) -> bool {
        self.closed.get()
    }

    /// Resolves once the gate is open.
    pub fn opened(&self) -> impl Future<Output = ()> + 'static {
        self.closed.wait(false)
    }

    /// Resolves once the gate is closed.
    pub fn closed(&self) -> impl Future<Output = ()> + 'static {
        self.closed.wait(true)
    }

    /// Counts a request as in flight while the returned guard lives.
    pub fn request(&self) -> InFlight {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(self.in_flight.clone())
    }

    /// Requests in flight (sent, body not finished or dropped).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(std::sync::atomic::Ordering::Relaxed)
    }
}

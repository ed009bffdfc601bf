//! Abort handles, the suspend gate and the retry backoff.

use crate::params::http::loading::control::{AbortHandle, SuspendGate};
use std::time::Duration;

#[test]
fn an_abort_from_another_thread_wakes_the_waiting_future() {
    let handle = AbortHandle::new();
    assert!(!handle.is_aborted());
    let remote = handle.clone();
    let thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        remote.abort();
    });
    pollster::block_on(handle.aborted());
    assert!(handle.is_aborted());
    thread.join().unwrap();
    // Already aborted: resolves at once, any number of times.
    pollster::block_on(handle.aborted());
}

#[test]
fn the_gate_holds_waiters_while_suspended() {
    let gate = SuspendGate::default();
    pollster::block_on(gate.opened());
    gate.suspend();
    assert!(gate.is_suspended());
    let remote = gate.clone();
    let thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        remote.resume();
    });
    pollster::block_on(gate.opened());
    assert!(!gate.is_suspended());
    thread.join().unwrap();
}

#[test]
fn dropped_waits_leave_no_waker_behind() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let handle = AbortHandle::new();
    let mut context = Context::from_waker(Waker::noop());
    for _ in 0..1000 {
        let mut wait = Box::pin(handle.aborted());
        assert_eq!(wait.as_mut().poll(&mut context), Poll::Pending);
        assert_eq!(handle.waiters(), 1);
    }
    assert_eq!(handle.waiters(), 0);
}

//! [`FifoSlot`]: one value (a loaded delegate) lent to one caller at a time, in the order the
//! callers asked.
//!
//! [`FifoSlot::acquire`] takes the caller's place in line *when it is called* (not when its
//! future is first polled), so calls made one after another get the value in that order. The
//! value comes back when the [`Turn`] is dropped and goes straight to the next caller still
//! waiting; callers that gave up (dropped their future) are skipped. [`FifoSlot::close`] ends
//! the slot: every waiting caller gets [`SlotClosed::WhileWaiting`] at once (nobody is left
//! hanging), later calls get [`SlotClosed::Before`], and the value is dropped as soon as no
//! turn holds it. Single-threaded (`Rc`), as the browser's event loop.

use futures_channel::oneshot;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

/// Why [`FifoSlot::acquire`] gave no turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotClosed {
    /// The slot was closed before the call.
    Before,
    /// The slot was closed while the call waited in line.
    WhileWaiting,
}

struct State<T> {
    /// The value when no turn holds it (and the slot is open).
    value: Option<T>,
    /// Whether a turn holds the value.
    lent: bool,
    closed: bool,
    waiters: VecDeque<oneshot::Sender<T>>,
}

/// One value, used by one caller at a time, first come first served. Clones share the slot.
pub struct FifoSlot<T> {
    state: Rc<RefCell<State<T>>>,
}

impl<T> Clone for FifoSlot<T> {
    fn clone(&self) -> Self {
        Self {
            state: Rc::clone(&self.state),
        }
    }
}

enum Claim<T: 'static> {
    /// The value was free: the turn exists already, so a future dropped before it is polled
    /// still hands the value on.
    Now(Turn<T>),
    Later(oneshot::Receiver<T>),
}

impl<T: 'static> FifoSlot<T> {
    /// A slot holding `value`, free.
    pub fn new(value: T) -> Self {
        Self {
            state: Rc::new(RefCell::new(State {
                value: Some(value),
                lent: false,
                closed: false,
                waiters: VecDeque::new(),
            })),
        }
    }

    /// Takes a place in line now; the future resolves to the caller's turn once every caller
    /// before it has finished.
    ///
    /// # Errors
    /// The future resolves to [`SlotClosed`] when the slot was closed before this call or while
    /// it waited.
    pub fn acquire(&self) -> impl Future<Output = Result<Turn<T>, SlotClosed>> + 'static {
        let claim = {
            let mut state = self.state.borrow_mut();
            if state.closed {
                Err(SlotClosed::Before)
            } else if !state.lent
                && let Some(value) = state.value.take()
            {
                state.lent = true;
                Ok(Claim::Now(Turn {
                    value: Some(value),
                    slot: self.clone(),
                }))
            } else {
                let (sender, receiver) = oneshot::channel();
                state.waiters.push_back(sender);
                Ok(Claim::Later(receiver))
            }
        };
        let slot = self.clone();
        async move {
            match claim? {
                Claim::Now(turn) => Ok(turn),
                Claim::Later(receiver) => {
                    // The sender is dropped unanswered only by `close`.
                    let value = receiver.await.map_err(|_| SlotClosed::WhileWaiting)?;
                    Ok(Turn {
                        value: Some(value),
                        slot,
                    })
                }
            }
        }
    }

    /// Closes the slot: waiting callers fail at once, the value is dropped now if free, else
    /// when its turn ends. Closing again does nothing.
    pub fn close(&self) {
        let (value, waiters) = {
            let mut state = self.state.borrow_mut();
            state.closed = true;
            (state.value.take(), std::mem::take(&mut state.waiters))
        };
        // Dropped outside the borrow: a value's or waker's drop may reach this slot again.
        drop(waiters);
        drop(value);
    }

    /// Whether [`close`](Self::close) was called (for tests: callers learn it from
    /// [`acquire`](Self::acquire)'s [`SlotClosed`]).
    #[cfg(test)]
    pub fn is_closed(&self) -> bool {
        self.state.borrow().closed
    }

    /// Callers waiting for a turn.
    pub fn waiting(&self) -> usize {
        self.state.borrow().waiters.len()
    }

    /// Runs `f` on the value when it is free (`None` while a turn holds it or once closed).
    pub fn peek<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        f(self.state.borrow().value.as_ref())
    }

    /// Gives `value` to the next caller still waiting, or keeps it.
    fn hand_back(&self, mut value: T) {
        loop {
            let next = {
                let mut state = self.state.borrow_mut();
                if state.closed {
                    state.lent = false;
                    None
                } else if let Some(sender) = state.waiters.pop_front() {
                    Some(sender)
                } else {
                    state.lent = false;
                    state.value = Some(value);
                    return;
                }
            };
            let Some(sender) = next else {
                drop(value);
                return;
            };
            match sender.send(value) {
                Ok(()) => return,
                // That caller gave up waiting: try the next.
                Err(returned) => value = returned,
            }
        }
    }
}

/// The value, held by one caller; dropping it passes the value on.
pub struct Turn<T: 'static> {
    value: Option<T>,
    slot: FifoSlot<T>,
}

impl<T: 'static> Turn<T> {
    /// Whether the slot was closed while this turn held the value (the value is dropped when
    /// the turn ends; a holder should stop using it).
    #[cfg(web)]
    pub fn slot_closed(&self) -> bool {
        self.slot.state.borrow().closed
    }
}

impl<T: 'static> Deref for Turn<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // `value` is `Some` from construction until `drop`.
        self.value.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl<T: 'static> DerefMut for Turn<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl<T: 'static> Drop for Turn<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            self.slot.hand_back(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use std::pin::pin;
    use std::task::{Context, Poll};

    fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        let waker = futures_util::task::noop_waker();
        future.poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn turns_go_in_call_order() {
        let slot = FifoSlot::new(Vec::<u32>::new());
        let first = slot.acquire();
        let second = slot.acquire();
        let third = slot.acquire();
        let (mut second, mut third) = (pin!(second), pin!(third));
        // The first caller's place was taken at call time, even though it is polled last.
        assert!(poll_once(second.as_mut()).is_pending());
        assert!(poll_once(third.as_mut()).is_pending());
        assert_eq!(slot.waiting(), 2);
        let mut turn = first.now_or_never().expect("free").expect("open");
        turn.push(1);
        assert!(slot.peek(|v| v.is_none()), "not visible while lent");
        drop(turn);
        assert!(
            poll_once(third.as_mut()).is_pending(),
            "third waits for second"
        );
        let Poll::Ready(Ok(mut turn)) = poll_once(second.as_mut()) else {
            panic!("second gets the value");
        };
        turn.push(2);
        drop(turn);
        let Poll::Ready(Ok(mut turn)) = poll_once(third.as_mut()) else {
            panic!("third gets the value");
        };
        turn.push(3);
        drop(turn);
        assert_eq!(slot.peek(|v| v.cloned()), Some(vec![1, 2, 3]));
        assert_eq!(slot.waiting(), 0);
    }

    #[test]
    fn a_caller_that_gave_up_is_skipped() {
        let slot = FifoSlot::new(7u8);
        let turn = slot.acquire().now_or_never().unwrap().unwrap();
        let abandoned = slot.acquire();
        let mut kept = pin!(slot.acquire());
        assert!(poll_once(kept.as_mut()).is_pending());
        drop(abandoned);
        drop(turn);
        assert!(matches!(poll_once(kept.as_mut()), Poll::Ready(Ok(t)) if *t == 7));
    }

    #[test]
    fn a_free_turn_dropped_before_it_is_polled_hands_the_value_on() {
        // A caller that takes the free value and gives up before polling (an early return on
        // a bad argument) must not keep it from the next caller.
        let slot = FifoSlot::new(7u8);
        drop(slot.acquire());
        assert_eq!(slot.peek(|v| v.copied()), Some(7));
        let turn = slot.acquire().now_or_never().unwrap().unwrap();
        assert_eq!(*turn, 7);
    }

    #[test]
    fn close_fails_waiters_at_once_and_drops_the_value_after_the_turn() {
        let value = Rc::new(());
        let slot = FifoSlot::new(Rc::clone(&value));
        let turn = slot.acquire().now_or_never().unwrap().unwrap();
        let mut waiting = pin!(slot.acquire());
        assert!(poll_once(waiting.as_mut()).is_pending());
        slot.close();
        assert!(slot.is_closed());
        assert!(matches!(
            poll_once(waiting.as_mut()),
            Poll::Ready(Err(SlotClosed::WhileWaiting))
        ));
        assert_eq!(Rc::strong_count(&value), 2, "the running turn keeps it");
        drop(turn);
        assert_eq!(Rc::strong_count(&value), 1, "dropped when the turn ended");
        assert!(matches!(
            slot.acquire().now_or_never(),
            Some(Err(SlotClosed::Before))
        ));
        slot.close();
    }

    #[test]
    fn close_while_free_drops_the_value_now() {
        let value = Rc::new(());
        let slot = FifoSlot::new(Rc::clone(&value));
        slot.close();
        assert_eq!(Rc::strong_count(&value), 1);
        assert!(slot.peek(|v| v.is_none()));
    }
}

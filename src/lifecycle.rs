//! Lifecycle signals, platform-independent: why the host is suspended, and what a signal
//! released.
//!
//! The host (a browser page, a worker, a native app) suspends for several independent reasons
//! at once — the page is hidden, frozen, put in the back/forward cache, or the app asked. The
//! runtime is suspended while **any** reason holds and resumes only when the last one clears
//! ([`SuspendReasons`]). That makes signals idempotent and ordered: a second `Suspend` for a
//! reason already held changes nothing, a `Resume` without a matching `Suspend` is a no-op,
//! and a page that is frozen while hidden does not resume when it is unfrozen but still hidden.
//! `LowMemory` is not a state: each one releases what it can, suspended or not.
//!
//! [`Released`] is what one signal freed, summed over the providers and backends it reached.
//! The browser wiring lives in `web::lifecycle`.

/// An event from the hosting program (IREE's `iree_io_parameter_provider_signal_t`); providers
/// (`params::Signal` is this type) and backends receive the same signals.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// The program resumes from a suspended state; pools and caches may be re-created.
    Resume = 0,
    /// The program is being suspended; drop transient memory that can be re-created on resume.
    Suspend = 1,
    /// Memory is low; drop everything possible, even what is expensive to re-create.
    LowMemory = 2,
}

/// Why the host is suspended. Each is set and cleared by its own pair of events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SuspendReason {
    /// The page is hidden (`visibilitychange` to `hidden`; cleared by `visible`).
    Hidden,
    /// The page is frozen (`freeze`; cleared by `resume`).
    Frozen,
    /// The page is being hidden or cached (`pagehide`; cleared by `pageshow`, e.g. a
    /// back/forward-cache restore).
    PageHidden,
    /// The application asked (`notify("suspend")`; cleared by `notify("resume")`).
    App,
}

impl SuspendReason {
    /// Every reason, in a fixed order.
    pub const ALL: [SuspendReason; 4] = [
        SuspendReason::Hidden,
        SuspendReason::Frozen,
        SuspendReason::PageHidden,
        SuspendReason::App,
    ];

    fn bit(self) -> u8 {
        match self {
            SuspendReason::Hidden => 1,
            SuspendReason::Frozen => 2,
            SuspendReason::PageHidden => 4,
            SuspendReason::App => 8,
        }
    }

    /// The reason's name (`"hidden"`, `"frozen"`, `"pagehide"`, `"app"`).
    pub fn name(self) -> &'static str {
        match self {
            SuspendReason::Hidden => "hidden",
            SuspendReason::Frozen => "frozen",
            SuspendReason::PageHidden => "pagehide",
            SuspendReason::App => "app",
        }
    }
}

/// What changed when a reason was set or cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Running -> suspended: send `Suspend`.
    Suspend,
    /// Suspended -> running: send `Resume`.
    Resume,
    /// No state change: send nothing.
    None,
}

/// The set of reasons the host is suspended for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SuspendReasons(u8);

impl SuspendReasons {
    /// Whether any reason holds.
    pub fn is_suspended(self) -> bool {
        self.0 != 0
    }

    /// Whether `reason` holds.
    pub fn has(self, reason: SuspendReason) -> bool {
        self.0 & reason.bit() != 0
    }

    /// Sets `reason`; [`Transition::Suspend`] when it is the first.
    pub fn set(&mut self, reason: SuspendReason) -> Transition {
        let was = self.is_suspended();
        self.0 |= reason.bit();
        if was {
            Transition::None
        } else {
            Transition::Suspend
        }
    }

    /// Clears `reason`; [`Transition::Resume`] when it was the last.
    pub fn clear(&mut self, reason: SuspendReason) -> Transition {
        if !self.has(reason) {
            return Transition::None;
        }
        self.0 &= !reason.bit();
        if self.is_suspended() {
            Transition::None
        } else {
            Transition::Resume
        }
    }

    /// Names of the reasons that hold.
    pub fn names(self) -> Vec<&'static str> {
        SuspendReason::ALL
            .into_iter()
            .filter(|r| self.has(*r))
            .map(SuspendReason::name)
            .collect()
    }
}

/// What a signal released, summed over everything it reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// GPU memory freed (activation arenas, read-back and uniform buffers; parameters on
    /// `LowMemory`).
    pub gpu_bytes: u64,
    /// Host memory freed (staging buffers, partial chunks, cached copies).
    pub host_bytes: u64,
    /// HTTP requests aborted (each resumes from its first byte not committed).
    pub requests_aborted: u64,
}

impl Released {
    /// Adds `other` to this report.
    pub fn add(&mut self, other: Released) {
        self.gpu_bytes = self.gpu_bytes.saturating_add(other.gpu_bytes);
        self.host_bytes = self.host_bytes.saturating_add(other.host_bytes);
        self.requests_aborted = self.requests_aborted.saturating_add(other.requests_aborted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suspend_twice_is_one_suspend_and_resume_without_suspend_is_a_no_op() {
        let mut reasons = SuspendReasons::default();
        assert_eq!(reasons.clear(SuspendReason::Hidden), Transition::None);
        assert_eq!(reasons.set(SuspendReason::Hidden), Transition::Suspend);
        assert_eq!(reasons.set(SuspendReason::Hidden), Transition::None);
        assert_eq!(reasons.clear(SuspendReason::Hidden), Transition::Resume);
        assert_eq!(reasons.clear(SuspendReason::Hidden), Transition::None);
        assert!(!reasons.is_suspended());
    }

    #[test]
    fn resumes_only_when_the_last_reason_clears() {
        let mut reasons = SuspendReasons::default();
        assert_eq!(reasons.set(SuspendReason::Hidden), Transition::Suspend);
        assert_eq!(reasons.set(SuspendReason::Frozen), Transition::None);
        assert_eq!(reasons.names(), ["hidden", "frozen"]);
        // Unfrozen while still hidden: stay suspended.
        assert_eq!(reasons.clear(SuspendReason::Frozen), Transition::None);
        assert!(reasons.is_suspended());
        assert_eq!(reasons.clear(SuspendReason::Hidden), Transition::Resume);
    }

    #[test]
    fn released_adds_up_without_overflow() {
        let mut total = Released {
            gpu_bytes: u64::MAX - 1,
            ..Released::default()
        };
        total.add(Released {
            gpu_bytes: 5,
            host_bytes: 3,
            requests_aborted: 1,
        });
        assert_eq!(total.gpu_bytes, u64::MAX);
        assert_eq!((total.host_bytes, total.requests_aborted), (3, 1));
    }
}

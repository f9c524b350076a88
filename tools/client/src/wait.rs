//! How long an acquisition may wait, and CLOCK_MONOTONIC time.

use std::ops::Add;
use std::time::Duration;

/// A point on CLOCK_MONOTONIC, in nanoseconds: the clock of the kernel's
/// deadlines. In a time namespace it is the namespace's clock, which the
/// kernel converts to its own (as futex and timerfd do).
///
/// ```
/// use std::time::Duration;
/// use tt_arbiter::Monotonic;
/// let t = Monotonic::now();
/// assert!(t + Duration::from_millis(5) > t);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Monotonic(pub u64);

impl Monotonic {
    /// `clock_gettime(CLOCK_MONOTONIC)`.
    pub fn now() -> Self {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
        Monotonic((ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// Nanoseconds since the clock's origin.
    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, 0 if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Monotonic) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Monotonic {
    type Output = Monotonic;
    /// Saturates at `u64::MAX` nanoseconds.
    fn add(self, d: Duration) -> Monotonic {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Monotonic(self.0.saturating_add(d))
    }
}

/// How an acquisition waits for a busy lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Until granted (or a signal handler runs, or the card goes away).
    Block,
    /// Not at all: `Error::Busy` if held or anyone is queued.
    Try,
    /// Until an absolute CLOCK_MONOTONIC time: [`Error::Timeout`] then.
    /// One already past is checked like [`Wait::Try`] but fails with
    /// `Timeout`, not `Busy`.
    ///
    /// [`Error::Timeout`]: crate::Error::Timeout
    Deadline(Monotonic),
    /// For a duration from now (converted to a deadline once, so a restarted
    /// call never waits longer): [`Error::Timeout`](crate::Error::Timeout)
    /// then, at once for a zero duration.
    Timeout(Duration),
}

impl Wait {
    /// The `flags` and `deadline_ns` of the ioctl for this wait, with `now`
    /// the current CLOCK_MONOTONIC time.
    pub fn ioctl_args(self, now: Monotonic) -> (u32, u64) {
        use crate::abi::{LOCK_DEADLINE, LOCK_NONBLOCK};
        match self {
            Wait::Block => (0, 0),
            Wait::Try => (LOCK_NONBLOCK, 0),
            Wait::Deadline(t) => (LOCK_DEADLINE, t.0),
            Wait::Timeout(d) => (LOCK_DEADLINE, (now + d).0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{LOCK_DEADLINE, LOCK_NONBLOCK};

    #[test]
    fn deadline_computation() {
        let now = Monotonic(1_000);
        assert_eq!(Wait::Block.ioctl_args(now), (0, 0));
        assert_eq!(Wait::Try.ioctl_args(now), (LOCK_NONBLOCK, 0));
        assert_eq!(
            Wait::Deadline(Monotonic(5)).ioctl_args(now),
            (LOCK_DEADLINE, 5)
        );
        assert_eq!(
            Wait::Timeout(Duration::from_micros(3)).ioctl_args(now),
            (LOCK_DEADLINE, 4_000)
        );
        assert_eq!(
            Wait::Timeout(Duration::MAX).ioctl_args(now),
            (LOCK_DEADLINE, u64::MAX)
        );
    }

    #[test]
    fn monotonic_clock() {
        let a = Monotonic::now();
        let b = Monotonic::now();
        assert!(b >= a);
        assert_eq!(
            a.saturating_duration_since(b + Duration::from_secs(1)),
            Duration::ZERO
        );
        assert_eq!(
            (a + Duration::from_nanos(7)).saturating_duration_since(a),
            Duration::from_nanos(7)
        );
    }
}

// SPDX-License-Identifier: GPL-2.0

//! How a request waits for its grant: never, for ever, or until an absolute
//! `CLOCK_MONOTONIC` deadline; and one sleep of a waiter.
//!
//! Shared by the locks and the TLB windows: a waiter sleeps on its own
//! condition variable and is woken only by the release that grants it, by a
//! signal, by its deadline or by the card going away.

use crate::rust_ext::time::monotonic_ns;
use kernel::{
    sync::{
        lock::{
            Backend,
            Guard, //
        },
        CondVar,
        CondVarTimeoutResult, //
    },
    time::msecs_to_jiffies, //
};

/// How long a request may wait.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Wait {
    /// Never: fail unless granted at once.
    Try,
    /// Until granted, interrupted or the card goes away.
    Forever,
    /// Until the absolute `CLOCK_MONOTONIC` time, in nanoseconds.
    Until(i64),
}

impl Wait {
    /// Whether a request that cannot be granted at once must fail now: a
    /// try, or a deadline already past.
    pub(crate) fn is_over(self, now: i64) -> bool {
        match self {
            Wait::Try => true,
            Wait::Until(deadline) => deadline <= now,
            Wait::Forever => false,
        }
    }
}

/// Why a queued request ended without a grant.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ended {
    /// The card is gone.
    Gone,
    /// A signal is pending.
    Interrupted,
    /// The deadline passed.
    TimedOut,
}

/// Decides whether a queued request is done, given its `grant` (if any),
/// whether the card is `gone`, and whether it woke because of a signal
/// (`interrupted`) or its deadline (`timed_out`). `None`: wait on.
///
/// A grant always wins, even over a signal or a deadline that came at the
/// same time: a granted waiter is no longer queued, so refusing the grant
/// would lose it.
pub(crate) fn settle<G>(
    grant: Option<G>,
    gone: bool,
    interrupted: bool,
    timed_out: bool,
) -> Option<Result<G, Ended>> {
    match grant {
        Some(grant) => Some(Ok(grant)),
        None if gone => Some(Err(Ended::Gone)),
        None if interrupted => Some(Err(Ended::Interrupted)),
        None if timed_out => Some(Err(Ended::TimedOut)),
        None => None,
    }
}

/// Why a sleeping waiter woke.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Woken {
    /// Someone notified it: a grant, or the card going away.
    Notified,
    /// A signal is pending.
    Signal,
    /// The deadline has passed.
    Deadline,
    /// The timer fired a little before the deadline: sleep again.
    Early,
}

/// Sleeps once on `wake`, with `guard`'s lock released meanwhile.
///
/// Jiffies are coarse: the timer is rounded up, and [`Woken::Deadline`] is
/// only returned once the clock has reached the deadline, so a deadline
/// never ends early.
pub(crate) fn sleep<T: ?Sized, B: Backend>(
    wake: &CondVar,
    guard: &mut Guard<'_, T, B>,
    wait: Wait,
) -> Woken {
    match wait {
        Wait::Until(deadline) => {
            let left = deadline - monotonic_ns();
            if left <= 0 {
                return Woken::Deadline;
            }
            let msecs = u32::try_from((left + 999_999) / 1_000_000).unwrap_or(u32::MAX);
            match wake.wait_interruptible_timeout(guard, msecs_to_jiffies(msecs)) {
                CondVarTimeoutResult::Signal { .. } => Woken::Signal,
                CondVarTimeoutResult::Woken { .. } => Woken::Notified,
                CondVarTimeoutResult::Timeout if monotonic_ns() >= deadline => Woken::Deadline,
                CondVarTimeoutResult::Timeout => Woken::Early,
            }
        }
        Wait::Try | Wait::Forever => {
            if wake.wait_interruptible(guard) {
                Woken::Signal
            } else {
                Woken::Notified
            }
        }
    }
}

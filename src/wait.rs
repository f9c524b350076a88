// SPDX-License-Identifier: GPL-2.0

//! How a request waits for its grant: never, for ever, or until an absolute
//! `CLOCK_MONOTONIC` deadline; and one sleep of a waiter.
//!
//! Shared by the locks and the TLB windows: a waiter sleeps on its own
//! condition variable and is woken only by the release that grants it, by a
//! signal, by its deadline or by the card going away.

use crate::rust_ext::time::monotonic_ns;
use core::ops::{
    Deref,
    DerefMut, //
};
use kernel::{
    prelude::*,
    sync::{
        lock::{
            Backend,
            Guard, //
        },
        Arc,
        CondVar,
        CondVarTimeoutResult,
        LockedBy,
        Mutex,
        MutexGuard, //
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
    /// Until the absolute `CLOCK_MONOTONIC` time of the host, in
    /// nanoseconds (a caller's deadline is converted from its time
    /// namespace first: [`crate::rust_ext::time::monotonic_from_caller`]).
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
    /// Neither a notification nor the timer nor a signal: the task was
    /// woken by someone who did not mean this sleep. The kernel allows
    /// that: a mutex or futex may send a wake-up meant for an earlier
    /// sleep of the task (its deferred `wake_q`) after the task went on
    /// and fell asleep here. [`sleep`] cannot tell it from
    /// [`Woken::Notified`]; a waiter that knows whether it was notified
    /// can ([`Sleeper::wake`]).
    Stray,
    /// It did not sleep: wake-ups decided under the mutex had to be sent
    /// first, the mutex released meanwhile ([`WakeGuard::sleep`]). Look
    /// again, then sleep.
    Sent,
}

/// Sleeps once on `wake`, with `guard`'s lock released meanwhile.
///
/// Jiffies are coarse: a sleep of `n` jiffies may end up to one jiffy
/// short of `n` jiffies' time, so the timer is rounded up and one jiffy
/// added, and [`Woken::Deadline`] is only returned once the clock has
/// reached the deadline: a deadline never ends early, and a timer that
/// still fires early ([`Woken::Early`], which counts as a spurious
/// wake-up) is rare. Any other return without a signal is
/// [`Woken::Notified`], a stray wake-up included ([`Woken::Stray`]).
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
            let jiffies = msecs_to_jiffies(msecs).saturating_add(1);
            match wake.wait_interruptible_timeout(guard, jiffies) {
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

/// A waiter that sleeps on its own condition variable.
pub(crate) trait Sleeper {
    fn condvar(&self) -> &CondVar;

    /// Wakes the waiter: every wake-up sent to it goes through here, so a
    /// waiter may note that it was sent one.
    fn wake(&self) {
        self.condvar().notify_one();
    }
}

/// Most wake-ups one operation defers. One release grants at most one
/// waiter per lock it frees, so the locks never need more; past it, a
/// wake-up is sent at once, which is only slower.
const DEFERRED: usize = 64;

/// Wake-ups decided under a lock and sent once it is released.
///
/// A waiter woken while its waker still holds the card's mutex runs, finds
/// the mutex held and sleeps a second time: two context switches per
/// hand-off instead of one. So grants are recorded under the mutex and the
/// wake-ups sent after it ([`WakeGuard`]). A grant is never lost in
/// between: the waiter checks its grant under the mutex before it sleeps
/// and whenever it wakes, for whatever reason.
///
/// Wake-ups cannot be forgotten: dropping a `Wakeups` sends what it holds.
pub(crate) struct Wakeups<W: Sleeper> {
    waiters: [Option<Arc<W>>; DEFERRED],
    len: usize,
}

impl<W: Sleeper> Wakeups<W> {
    pub(crate) const fn new() -> Self {
        Self {
            waiters: [const { None }; DEFERRED],
            len: 0,
        }
    }

    /// Records a wake-up of `waiter`.
    pub(crate) fn push(&mut self, waiter: Arc<W>) {
        match self.waiters.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(waiter);
                self.len += 1;
            }
            None => waiter.wake(),
        }
    }

    /// Takes the wake-ups recorded so far, to send once the lock is
    /// released.
    fn take(&mut self) -> Self {
        core::mem::replace(self, Self::new())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The waiters to wake, in order.
    #[cfg(tt_kunit)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<W>> {
        self.waiters[..self.len].iter().flatten()
    }
}

impl<W: Sleeper> Drop for Wakeups<W> {
    /// Sends the wake-ups, in order.
    fn drop(&mut self) {
        for waiter in self.waiters[..self.len].iter().flatten() {
            waiter.wake();
        }
    }
}

/// State behind a mutex that defers its wake-ups until the mutex is
/// released ([`WakeMutex`]).
pub(crate) trait DefersWakeups {
    type Waiter: Sleeper;
    fn wakeups(&mut self) -> &mut Wakeups<Self::Waiter>;
}

/// A mutex over state that defers its wake-ups: it is only ever held
/// through a [`WakeGuard`], so every path that releases it (a return, a
/// `?`, a sleep) sends the wake-ups decided under it.
#[pin_data]
pub(crate) struct WakeMutex<S> {
    #[pin]
    mutex: Mutex<S>,
}

impl<S: DefersWakeups + Unpin> WakeMutex<S> {
    /// Wraps `mutex` (made with `new_mutex!` by the caller, so that each
    /// state has its own lockdep class and name).
    pub(crate) fn new(mutex: impl PinInit<Mutex<S>>) -> impl PinInit<Self> {
        pin_init!(Self { mutex <- mutex })
    }

    pub(crate) fn lock(&self) -> WakeGuard<'_, S> {
        WakeGuard {
            guard: self.mutex.lock(),
            unsent: None,
        }
    }

    /// Data guarded by this mutex without being part of its state.
    pub(crate) fn locked_by<T>(&self, data: T) -> LockedBy<T, S> {
        LockedBy::new(&self.mutex, data)
    }
}

/// A held [`WakeMutex`]. Dropping it releases the mutex, then sends the
/// wake-ups decided under it, so none waits for the next release on the
/// same state and no waiter is woken only to find the mutex held.
pub(crate) struct WakeGuard<'a, S: DefersWakeups + Unpin> {
    // Fields drop in declaration order: the mutex is released before
    // `unsent` sends.
    guard: MutexGuard<'a, S>,
    /// The wake-ups to send once `guard` is gone; filled in `drop`.
    unsent: Option<Wakeups<S::Waiter>>,
}

impl<'a, S: DefersWakeups + Unpin> WakeGuard<'a, S> {
    /// Whether wake-ups wait to be sent.
    pub(crate) fn has_unsent(&mut self) -> bool {
        !self.guard.wakeups().is_empty()
    }

    /// Releases the mutex, sends the wake-ups decided under it and takes
    /// the mutex again: for a caller that goes on under the mutex but must
    /// not keep others waiting for their wake-up meanwhile. What was seen
    /// under the mutex before may have changed.
    pub(crate) fn send_now(self) -> Self {
        let mutex = self.guard.lock_ref();
        drop(self);
        WakeGuard {
            guard: mutex.lock(),
            unsent: None,
        }
    }

    /// Sleeps once on `wake` ([`sleep`]), the mutex released meanwhile.
    ///
    /// Wake-ups still to send would wait for the end of a sleep that may
    /// last for ever: they are sent first, as a release sends them, and
    /// the call returns [`Woken::Sent`] without sleeping, for the caller
    /// to look again before it sleeps.
    pub(crate) fn sleep(mut self, wake: &CondVar, wait: Wait) -> (Self, Woken) {
        if self.has_unsent() {
            return (self.send_now(), Woken::Sent);
        }
        let woken = sleep(wake, &mut self.guard, wait);
        (self, woken)
    }

    /// Waits until `settle` says a queued request is done, and returns
    /// what it said, with the mutex held. `settle(state, woken)` is asked
    /// first with `None`, before any sleep, then after every return from
    /// [`WakeGuard::sleep`] with why the waiter woke.
    pub(crate) fn wait_until<R>(
        mut self,
        wake: &CondVar,
        wait: Wait,
        mut settle: impl FnMut(&mut S, Option<Woken>) -> Option<R>,
    ) -> (Self, R) {
        let mut woken = None;
        loop {
            if let Some(settled) = settle(&mut self.guard, woken) {
                return (self, settled);
            }
            let (guard, slept) = self.sleep(wake, wait);
            self = guard;
            woken = Some(slept);
        }
    }
}

impl<S: DefersWakeups + Unpin> Deref for WakeGuard<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.guard
    }
}

impl<S: DefersWakeups + Unpin> DerefMut for WakeGuard<'_, S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.guard
    }
}

impl<S: DefersWakeups + Unpin> Drop for WakeGuard<'_, S> {
    fn drop(&mut self) {
        // The common release, with nobody to wake, moves nothing.
        if self.has_unsent() {
            self.unsent = Some(self.guard.wakeups().take());
        }
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/wait_tests.rs"]
mod kunit;

// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the deferred wake-ups: every path that releases a
//! [`WakeMutex`] sends the wake-ups decided under it, after the release.

use super::*;
use core::sync::atomic::{
    AtomicU32,
    Ordering, //
};
use kernel::{
    new_condvar,
    new_mutex, //
};

/// A waiter that counts the wake-ups sent to it, and of those the ones
/// that came while the mutex they were decided under was still held.
#[pin_data]
struct Probe {
    #[pin]
    wake: CondVar,
    mutex: Arc<WakeMutex<Probed>>,
    woken: AtomicU32,
    under_mutex: AtomicU32,
}

impl Sleeper for Probe {
    fn condvar(&self) -> &CondVar {
        &self.wake
    }

    fn wake(&self) {
        // `try_lock` from the task that may hold it: never blocks.
        if self.mutex.mutex.try_lock().is_none() {
            self.under_mutex.fetch_add(1, Ordering::Relaxed);
        }
        self.woken.fetch_add(1, Ordering::Relaxed);
    }
}

struct Probed {
    wakeups: Wakeups<Probe>,
}

impl DefersWakeups for Probed {
    type Waiter = Probe;
    fn wakeups(&mut self) -> &mut Wakeups<Probe> {
        &mut self.wakeups
    }
}

/// A mutex and a waiter of it. The waiter holds the mutex, so a wake-up
/// never sent keeps both alive (kmemleak reports them too).
fn probe() -> Result<(Arc<WakeMutex<Probed>>, Arc<Probe>)> {
    let mutex = Arc::pin_init(
        WakeMutex::new(new_mutex!(Probed {
            wakeups: Wakeups::new(),
        })),
        GFP_KERNEL,
    )?;
    let held = mutex.clone();
    let probe = Arc::pin_init(
        pin_init!(Probe {
            wake <- new_condvar!("wait_tests::Probe"),
            mutex: held,
            woken: AtomicU32::new(0),
            under_mutex: AtomicU32::new(0),
        }),
        GFP_KERNEL,
    )?;
    Ok((mutex, probe))
}

/// Something that fails after a wake-up was decided, as an allocation
/// may after `drop_parked` in `Arbiter::acquire`.
fn fails() -> Result {
    Err(ENOMEM)
}

/// Decides a wake-up of `waiter` under `mutex`, then returns early with
/// `?` before anything else is done: the path that used to leave the
/// wake-up queued until the next release on the same state.
fn decide_then_fail(mutex: &WakeMutex<Probed>, waiter: Arc<Probe>) -> Result {
    let mut state = mutex.lock();
    state.wakeups.push(waiter);
    fails()?;
    Ok(())
}

#[kunit_tests(tenstorrent_wait)]
mod tests {
    use super::*;

    #[test]
    fn an_early_return_still_sends_the_wakeup() -> Result {
        let (mutex, waiter) = probe()?;
        assert_eq!(decide_then_fail(&mutex, waiter.clone()), Err(ENOMEM));
        assert_eq!(waiter.woken.load(Ordering::Relaxed), 1);
        assert_eq!(waiter.under_mutex.load(Ordering::Relaxed), 0);
        // Nothing left queued for a later release to send.
        assert!(mutex.lock().wakeups.is_empty());
        assert_eq!(waiter.woken.load(Ordering::Relaxed), 1);
        Ok(())
    }

    #[test]
    fn a_release_sends_after_the_mutex_is_free() -> Result {
        let (mutex, waiter) = probe()?;
        {
            let mut state = mutex.lock();
            state.wakeups.push(waiter.clone());
            state.wakeups.push(waiter.clone());
            assert_eq!(waiter.woken.load(Ordering::Relaxed), 0);
        }
        assert_eq!(waiter.woken.load(Ordering::Relaxed), 2);
        assert_eq!(waiter.under_mutex.load(Ordering::Relaxed), 0);
        Ok(())
    }

    #[test]
    fn a_sleep_sends_first_and_does_not_sleep() -> Result {
        let (mutex, waiter) = probe()?;
        let other = KBox::pin_init(new_condvar!("wait_tests::other"), GFP_KERNEL)?;
        let mut state = mutex.lock();
        state.wakeups.push(waiter.clone());
        // Without the wake-up sent first this would sleep a second and
        // return `Deadline`.
        let until = Wait::Until(monotonic_ns() + 1_000_000_000);
        let (state, woken) = state.sleep(&other, until);
        assert_eq!(woken, Woken::Sent);
        assert_eq!(waiter.woken.load(Ordering::Relaxed), 1);
        assert_eq!(waiter.under_mutex.load(Ordering::Relaxed), 0);
        // The mutex is held again.
        assert!(mutex.mutex.try_lock().is_none());
        drop(state);
        assert_eq!(waiter.woken.load(Ordering::Relaxed), 1);
        Ok(())
    }
}

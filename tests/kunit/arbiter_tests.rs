// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the arbiter core.
//!
//! The tests drive the card state the way sleeping waiters do: queue a
//! request, release locks, and check who was granted what. Requests are
//! queued without sleeping, so each step is deterministic.

use super::*;
use crate::wait::Wait;

fn new_arbiter() -> Result<Pin<KBox<Arbiter>>> {
    KBox::pin_init(Arbiter::new()?, GFP_KERNEL)
}

fn owner(a: &Arbiter) -> OwnerId {
    a.new_owner()
}

/// Takes `mask` for `who` at once, as a non-blocking request does.
fn take(a: &Arbiter, who: OwnerId, mask: LockMask) -> Result<Acquired, AcquireError> {
    a.acquire(who, mask, Requester::current(), Wait::Try, Reentry::Refuse)
}

/// Queues a request that cannot be granted at once, as a blocking request
/// does before it sleeps.
fn queue(a: &Arbiter, who: OwnerId, mask: LockMask) -> Result<Arc<Waiter>> {
    let waiter = a
        .new_waiter(who, mask, Requester::current())
        .map_err(|_| ENOMEM)?;
    let mut state = a.state.lock();
    if !state.is_blocked(mask) {
        return Err(EINVAL);
    }
    state.enqueue(waiter.clone()).map_err(|_| ENOMEM)?;
    Ok(waiter)
}

fn grant_of(a: &Arbiter, waiter: &Waiter) -> Option<LockMask> {
    let state = a.state.lock();
    waiter.grant.access(&state).map(|g| g.owner_died)
}

fn holder_is(a: &Arbiter, index: usize, who: OwnerId) -> bool {
    let state = a.state.lock();
    state.slots[index]
        .holder
        .as_ref()
        .is_some_and(|h| h.owner == who)
}

fn waiters(a: &Arbiter, index: usize) -> u32 {
    a.state.lock().slots[index].waiters
}

#[kunit_tests(tenstorrent_arbiter)]
mod tests {
    use super::*;

    #[test]
    fn free_lock_is_granted_at_once() -> Result {
        let a = new_arbiter()?;
        let x = owner(&a);
        let got = take(&a, x, bit(3)).map_err(|_| EINVAL)?;
        assert_eq!(got.owner_died, 0);
        assert!(holder_is(&a, 3, x));
        assert_eq!(a.test(x, 3)?, (true, true));
        Ok(())
    }

    #[test]
    fn held_lock_is_busy_and_not_reentrant() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        assert!(take(&a, x, bit(0)).is_ok());
        assert_eq!(take(&a, x, bit(0)), Err(AcquireError::Deadlock));
        let again = a.acquire(x, bit(0), Requester::current(), Wait::Try, Reentry::Wait);
        assert!(matches!(again, Err(AcquireError::Busy { .. })));
        assert!(matches!(
            take(&a, y, bit(0)),
            Err(AcquireError::Busy { .. })
        ));
        assert_eq!(a.test(y, 0)?, (false, true));
        Ok(())
    }

    #[test]
    fn release_hands_off_in_arrival_order() -> Result {
        let a = new_arbiter()?;
        let x = owner(&a);
        take(&a, x, bit(7)).map_err(|_| EINVAL)?;
        let ids = [owner(&a), owner(&a), owner(&a)];
        let w0 = queue(&a, ids[0], bit(7))?;
        let w1 = queue(&a, ids[1], bit(7))?;
        let w2 = queue(&a, ids[2], bit(7))?;
        assert_eq!(waiters(&a, 7), 3);

        a.release(x, bit(7))?;
        assert!(grant_of(&a, &w0).is_some());
        assert!(grant_of(&a, &w1).is_none());
        assert!(grant_of(&a, &w2).is_none());
        assert!(holder_is(&a, 7, ids[0]));
        assert_eq!(waiters(&a, 7), 2);

        a.release(ids[0], bit(7))?;
        assert!(grant_of(&a, &w1).is_some());
        assert!(grant_of(&a, &w2).is_none());
        a.release(ids[1], bit(7))?;
        assert!(grant_of(&a, &w2).is_some());
        assert!(holder_is(&a, 7, ids[2]));
        assert_eq!(waiters(&a, 7), 0);
        Ok(())
    }

    #[test]
    fn no_barging_past_a_queued_waiter() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, x, bit(1)).map_err(|_| EINVAL)?;
        // y wants 0 and 1: 0 is free, but y is queued for it.
        let _w = queue(&a, y, bit(0) | bit(1))?;
        assert!(matches!(
            take(&a, z, bit(0)),
            Err(AcquireError::Busy { holder_pid: 0 })
        ));
        assert!(!holder_is(&a, 0, y));
        Ok(())
    }

    #[test]
    fn waiters_of_other_locks_are_not_granted() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, x, bit(0) | bit(5)).map_err(|_| EINVAL)?;
        let on_zero = queue(&a, y, bit(0))?;
        let on_five = queue(&a, z, bit(5))?;
        a.release(x, bit(0))?;
        assert!(grant_of(&a, &on_zero).is_some());
        assert!(grant_of(&a, &on_five).is_none());
        assert!(holder_is(&a, 5, x));
        Ok(())
    }

    #[test]
    fn a_granted_waiter_keeps_its_grant_when_interrupted() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, x, bit(2)).map_err(|_| EINVAL)?;
        let w = queue(&a, y, bit(2))?;
        a.release(x, bit(2))?;
        // The signal and the deadline arrive together with the grant.
        let state = a.state.lock();
        assert!(matches!(state.settle(&w, true, true), Some(Ok(_))));
        drop(state);
        assert!(holder_is(&a, 2, y));
        Ok(())
    }

    #[test]
    fn a_waiter_that_gives_up_lets_later_ones_through() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, x, bit(1)).map_err(|_| EINVAL)?;
        let first = queue(&a, y, bit(0) | bit(1))?;
        let second = queue(&a, z, bit(0))?;
        let mut state = a.state.lock();
        assert!(matches!(
            state.settle(&first, true, false),
            Some(Err(AcquireError::Interrupted))
        ));
        state.dequeue(&first);
        drop(state);
        assert!(grant_of(&a, &second).is_some());
        assert!(holder_is(&a, 0, z));
        assert!(holder_is(&a, 1, x));
        assert_eq!(waiters(&a, 1), 0);
        Ok(())
    }

    #[test]
    fn a_timed_out_waiter_reports_the_holder() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, x, bit(4)).map_err(|_| EINVAL)?;
        let w = queue(&a, y, bit(4))?;
        let state = a.state.lock();
        let settled = state.settle(&w, false, true);
        let pid = u32::try_from(kernel::current!().group_leader().pid()).unwrap_or(0);
        assert!(matches!(
            settled,
            Some(Err(AcquireError::TimedOut { holder_pid })) if holder_pid == pid
        ));
        Ok(())
    }

    #[test]
    fn close_releases_everything_and_marks_owner_died() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, x, bit(0) | bit(1) | bit(2)).map_err(|_| EINVAL)?;
        let w = queue(&a, y, bit(1))?;
        a.release_all(x);
        // Handed to the waiter, who is told the holder died.
        assert_eq!(grant_of(&a, &w), Some(bit(1)));
        assert!(holder_is(&a, 1, y));
        assert!(a.query(None, 0)?.holder.is_none());
        let info = a.query(None, 0)?;
        assert!(info.owner_died);
        assert_eq!(info.stats.owner_died, 1);
        // The next acquirer is told, and its acquisition clears the mark.
        let got = take(&a, z, bit(0)).map_err(|_| EINVAL)?;
        assert_eq!(got.owner_died, bit(0));
        assert!(!a.query(None, 0)?.owner_died);
        a.release(z, bit(0))?;
        let got = take(&a, z, bit(0)).map_err(|_| EINVAL)?;
        assert_eq!(got.owner_died, 0);
        assert_eq!(a.query(None, 0)?.stats.owner_died, 1);
        Ok(())
    }

    #[test]
    fn release_by_another_owner_is_refused() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, x, bit(9)).map_err(|_| EINVAL)?;
        assert_eq!(a.release(y, bit(9)), Err(EPERM));
        // All or nothing: x holds 9 but not 10.
        assert_eq!(a.release(x, bit(9) | bit(10)), Err(EPERM));
        assert!(holder_is(&a, 9, x));
        a.release(x, bit(9))?;
        assert_eq!(a.release(x, bit(9)), Err(EPERM));
        Ok(())
    }

    #[test]
    fn a_set_is_all_or_nothing() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, x, bit(2)).map_err(|_| EINVAL)?;
        assert!(matches!(
            take(&a, y, bit(1) | bit(2) | bit(3)),
            Err(AcquireError::Busy { .. })
        ));
        assert!(a.query(None, 1)?.holder.is_none());
        assert!(a.query(None, 3)?.holder.is_none());
        // Queued, it takes none of them until it can take all.
        let w = queue(&a, y, bit(1) | bit(2) | bit(3))?;
        assert!(a.query(None, 1)?.holder.is_none());
        a.release(x, bit(2))?;
        assert!(grant_of(&a, &w).is_some());
        assert!(holder_is(&a, 1, y) && holder_is(&a, 2, y) && holder_is(&a, 3, y));
        Ok(())
    }

    #[test]
    fn overlapping_sets_are_granted_in_arrival_order() -> Result {
        let a = new_arbiter()?;
        let (x, p, q, r) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, x, bit(0) | bit(1) | bit(2)).map_err(|_| EINVAL)?;
        let wp = queue(&a, p, bit(0) | bit(1))?;
        let wq = queue(&a, q, bit(1) | bit(2))?;
        let wr = queue(&a, r, bit(2))?;
        // Freeing 2 alone: q is ahead of r for it, and q still waits for 1.
        a.release(x, bit(2))?;
        assert!(grant_of(&a, &wr).is_none());
        assert!(a.query(None, 2)?.holder.is_none());
        // Freeing 0 and 1: p first, then q must wait for p; r still behind q.
        a.release(x, bit(0) | bit(1))?;
        assert!(grant_of(&a, &wp).is_some());
        assert!(grant_of(&a, &wq).is_none());
        assert!(grant_of(&a, &wr).is_none());
        a.release(p, bit(0) | bit(1))?;
        assert!(grant_of(&a, &wq).is_some());
        assert!(grant_of(&a, &wr).is_none());
        a.release(q, bit(1) | bit(2))?;
        assert!(grant_of(&a, &wr).is_some());
        Ok(())
    }

    #[test]
    fn removal_fails_waiters_and_later_requests() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, x, bit(0)).map_err(|_| EINVAL)?;
        let w = queue(&a, y, bit(0))?;
        a.shut_down();
        assert!(a.is_gone());
        let mut state = a.state.lock();
        assert!(matches!(
            state.settle(&w, false, false),
            Some(Err(AcquireError::Gone))
        ));
        state.dequeue(&w);
        drop(state);
        assert_eq!(take(&a, y, bit(1)), Err(AcquireError::Gone));
        assert_eq!(a.release(x, bit(0)), Err(ENODEV));
        assert_eq!(a.query(None, 0).err(), Some(ENODEV));
        // Closing the holder's file still cleans up.
        a.release_all(x);
        assert_eq!(a.state.lock().held, 0);
        Ok(())
    }

    #[test]
    fn only_driver_wakeups_without_grant_are_spurious() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, x, bit(8)).map_err(|_| EINVAL)?;
        let w = queue(&a, y, bit(8))?;
        let mut state = a.state.lock();
        // A late wake-up the driver did not send: not the driver's fault.
        state.count_spurious(&w);
        assert_eq!(state.slots[8].stats.spurious_wakeups, 0);
        // A wake-up sent without a grant: counted.
        state.wake(w.clone());
        state.count_spurious(&w);
        assert_eq!(state.slots[8].stats.spurious_wakeups, 1);
        state.dequeue(&w);
        drop(state);
        // A granted waiter's wake-up is not spurious.
        let w = queue(&a, y, bit(8))?;
        a.release(x, bit(8))?;
        let mut state = a.state.lock();
        state.count_spurious(&w);
        assert_eq!(state.slots[8].stats.spurious_wakeups, 1);
        Ok(())
    }

    #[test]
    fn counters_follow_grants() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, x, bit(6)).map_err(|_| EINVAL)?;
        let w = queue(&a, y, bit(6))?;
        a.release(x, bit(6))?;
        let mut state = a.state.lock();
        assert!(state.settle(&w, false, false).is_some());
        state.record_wait(bit(6), 1000);
        drop(state);
        let stats = a.query(None, 6)?.stats;
        assert_eq!(stats.acquisitions, 2);
        assert_eq!(stats.contended, 1);
        assert_eq!(stats.total_wait_ns, 1000);
        assert_eq!(stats.max_wait_ns, 1000);
        assert_eq!(stats.spurious_wakeups, 0);
        Ok(())
    }
}

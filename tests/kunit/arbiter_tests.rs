// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the arbiter core.
//!
//! The tests drive the card state the way sleeping waiters do: queue a
//! request, release locks, and check who was granted what. Requests are
//! queued without sleeping, so each step is deterministic.

use super::*;
use crate::rust_ext::time::monotonic_ns;
use crate::wait::{
    Wait,
    Woken, //
};

/// A poll place's lease in these tests: longer than any test runs, so a
/// place expires only when a test says so, however slowly the machine
/// (an emulator under load) runs it.
const TEST_LEASE_NS: i64 = 3_600 * 1_000_000_000;

/// A hand-off bound longer than any test runs: every waiter is under it,
/// however slowly the machine runs the test.
const HUGE_BOUND_NS: i64 = 3_600 * 1_000_000_000;

/// A card whose locks are handed off in strict FIFO order (a bound of 0):
/// the tests of the queue's order, which must not depend on how long
/// their steps take.
fn new_arbiter() -> Result<Pin<KBox<Arbiter>>> {
    new_arbiter_with_bound(0)
}

/// A card with the hand-off bound `handoff_ns`.
fn new_arbiter_with_bound(handoff_ns: i64) -> Result<Pin<KBox<Arbiter>>> {
    KBox::pin_init(Arbiter::new(TEST_LEASE_NS, handoff_ns)?, GFP_KERNEL)
}

fn owner(a: &Arbiter) -> Owner {
    // Allocation failures end the test through a panic: KUnit reports it.
    match a.new_owner() {
        Ok(owner) => owner,
        Err(_) => panic!("no memory for an owner"),
    }
}

/// Takes `mask` for `who` at once, as a non-blocking request does.
fn take(a: &Arbiter, who: &Owner, mask: LockMask) -> Result<Acquired, AcquireError> {
    a.acquire(who, mask, Requester::current(), Wait::Try, Reentry::Refuse)
}

/// Queues a request that cannot be granted at once, as a blocking request
/// does before it sleeps.
fn queue(a: &Arbiter, who: &Owner, mask: LockMask) -> Result<Arc<Waiter>> {
    queue_at(a, who, mask, monotonic_ns())
}

/// Queues a blocking request as [`queue`] does, as if it had queued at
/// `queued_ns` (a test of the bound chooses how long it has waited).
fn queue_at(a: &Arbiter, who: &Owner, mask: LockMask, queued_ns: i64) -> Result<Arc<Waiter>> {
    let waiter = a
        .new_waiter(who, mask, Requester::current(), queued_ns)
        .map_err(|_| ENOMEM)?;
    let mut state = a.state.lock();
    if !state.is_blocked(who, mask, monotonic_ns()) {
        return Err(EINVAL);
    }
    state.enqueue(waiter.clone()).map_err(|_| ENOMEM)?;
    Ok(waiter)
}

/// The poll place a failed try leaves, as if that poller's first failed
/// try had been at `queued_ns`.
fn place_at(a: &Arbiter, who: &Owner, mask: LockMask, queued_ns: i64) -> Result<Arc<Waiter>> {
    let place = a
        .new_waiter(who, mask, Requester::current(), queued_ns)
        .map_err(|_| ENOMEM)?;
    let mut state = a.state.lock();
    let now = monotonic_ns();
    if !state.is_blocked(who, mask, now) {
        return Err(EINVAL);
    }
    state.add_poll_place(place.clone(), now);
    if !state.polls.iter().any(|w| Arc::ptr_eq(w, &place)) {
        return Err(ENOMEM);
    }
    Ok(place)
}

/// The sleeping `waiter` runs after a wake-up sent to it, as its call
/// does when it returns from its sleep: `Some` when it is done (granted),
/// `None` when it sleeps on.
fn runs(a: &Arbiter, waiter: &Waiter) -> Option<Result<Grant, AcquireError>> {
    a.state
        .lock()
        .woke(waiter, Some(Woken::Notified), Wait::Forever)
}

fn holder_of(a: &Arbiter, index: usize) -> Option<OwnerId> {
    a.state.lock().slots[index].holder.as_ref().map(|h| h.owner)
}

fn grant_of(a: &Arbiter, waiter: &Waiter) -> Option<LockMask> {
    let state = a.state.lock();
    waiter.grant.access(&state).map(|g| g.owner_died)
}

fn holder_is(a: &Arbiter, index: usize, who: &Owner) -> bool {
    let state = a.state.lock();
    state.slots[index]
        .holder
        .as_ref()
        .is_some_and(|h| h.owner == who.id())
}

fn waiters(a: &Arbiter, index: usize) -> u32 {
    a.state.lock().slots[index].waiters
}

/// Makes every poll place's lease last, so that a slow test machine does
/// not end it between two steps.
fn spurious(a: &Arbiter, index: usize) -> u64 {
    a.state.lock().slots[index].stats.spurious_wakeups
}

#[kunit_tests(tenstorrent_arbiter)]
mod tests {
    use super::*;

    #[test]
    fn free_lock_is_granted_at_once() -> Result {
        let a = new_arbiter()?;
        let x = owner(&a);
        let got = take(&a, &x, bit(3)).map_err(|_| EINVAL)?;
        assert_eq!(got.owner_died, 0);
        assert!(holder_is(&a, 3, &x));
        assert_eq!(a.test(&x, 3)?, (true, true));
        Ok(())
    }

    #[test]
    fn held_lock_is_busy_and_not_reentrant() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        assert!(take(&a, &x, bit(0)).is_ok());
        assert_eq!(take(&a, &x, bit(0)), Err(AcquireError::Deadlock));
        let again = a.acquire(&x, bit(0), Requester::current(), Wait::Try, Reentry::Wait);
        assert!(matches!(again, Err(AcquireError::Busy { .. })));
        assert!(matches!(
            take(&a, &y, bit(0)),
            Err(AcquireError::Busy { .. })
        ));
        assert_eq!(a.test(&y, 0)?, (false, true));
        Ok(())
    }

    #[test]
    fn release_hands_off_in_arrival_order() -> Result {
        let a = new_arbiter()?;
        let x = owner(&a);
        take(&a, &x, bit(7)).map_err(|_| EINVAL)?;
        let ids = [owner(&a), owner(&a), owner(&a)];
        let w0 = queue(&a, &ids[0], bit(7))?;
        let w1 = queue(&a, &ids[1], bit(7))?;
        let w2 = queue(&a, &ids[2], bit(7))?;
        assert_eq!(waiters(&a, 7), 3);

        a.release(&x, bit(7))?;
        assert!(grant_of(&a, &w0).is_some());
        assert!(grant_of(&a, &w1).is_none());
        assert!(grant_of(&a, &w2).is_none());
        assert!(holder_is(&a, 7, &ids[0]));
        assert_eq!(waiters(&a, 7), 2);

        a.release(&ids[0], bit(7))?;
        assert!(grant_of(&a, &w1).is_some());
        assert!(grant_of(&a, &w2).is_none());
        a.release(&ids[1], bit(7))?;
        assert!(grant_of(&a, &w2).is_some());
        assert!(holder_is(&a, 7, &ids[2]));
        assert_eq!(waiters(&a, 7), 0);
        Ok(())
    }

    #[test]
    fn no_barging_past_a_queued_waiter() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(1)).map_err(|_| EINVAL)?;
        // y wants 0 and 1: 0 is free, but y is queued for it.
        let _w = queue(&a, &y, bit(0) | bit(1))?;
        assert!(matches!(
            take(&a, &z, bit(0)),
            Err(AcquireError::Busy { holder_pid: 0 })
        ));
        assert!(!holder_is(&a, 0, &y));
        Ok(())
    }

    #[test]
    fn waiters_of_other_locks_are_not_granted() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(0) | bit(5)).map_err(|_| EINVAL)?;
        let on_zero = queue(&a, &y, bit(0))?;
        let on_five = queue(&a, &z, bit(5))?;
        a.release(&x, bit(0))?;
        assert!(grant_of(&a, &on_zero).is_some());
        assert!(grant_of(&a, &on_five).is_none());
        assert!(holder_is(&a, 5, &x));
        Ok(())
    }

    #[test]
    fn a_granted_waiter_keeps_its_grant_when_interrupted() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, &x, bit(2)).map_err(|_| EINVAL)?;
        let w = queue(&a, &y, bit(2))?;
        a.release(&x, bit(2))?;
        // The signal and the deadline arrive together with the grant.
        let state = a.state.lock();
        assert!(matches!(state.settle(&w, true, true), Some(Ok(_))));
        drop(state);
        assert!(holder_is(&a, 2, &y));
        Ok(())
    }

    #[test]
    fn a_waiter_that_gives_up_lets_later_ones_through() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(1)).map_err(|_| EINVAL)?;
        let first = queue(&a, &y, bit(0) | bit(1))?;
        let second = queue(&a, &z, bit(0))?;
        let mut state = a.state.lock();
        assert!(matches!(
            state.settle(&first, true, false),
            Some(Err(AcquireError::Interrupted))
        ));
        state.dequeue(&first);
        drop(state);
        assert!(grant_of(&a, &second).is_some());
        assert!(holder_is(&a, 0, &z));
        assert!(holder_is(&a, 1, &x));
        assert_eq!(waiters(&a, 1), 0);
        Ok(())
    }

    #[test]
    fn a_timed_out_waiter_reports_the_holder() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, &x, bit(4)).map_err(|_| EINVAL)?;
        let w = queue(&a, &y, bit(4))?;
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
        take(&a, &x, bit(0) | bit(1) | bit(2)).map_err(|_| EINVAL)?;
        let w = queue(&a, &y, bit(1))?;
        a.release_all(&x);
        // Handed to the waiter, who is told the holder died.
        assert_eq!(grant_of(&a, &w), Some(bit(1)));
        assert!(holder_is(&a, 1, &y));
        assert!(a.query(None, 0)?.holder.is_none());
        let info = a.query(None, 0)?;
        assert!(info.owner_died);
        assert_eq!(info.stats.owner_died, 1);
        // The next acquirer is told, and its acquisition clears the mark.
        let got = take(&a, &z, bit(0)).map_err(|_| EINVAL)?;
        assert_eq!(got.owner_died, bit(0));
        assert!(!a.query(None, 0)?.owner_died);
        a.release(&z, bit(0))?;
        let got = take(&a, &z, bit(0)).map_err(|_| EINVAL)?;
        assert_eq!(got.owner_died, 0);
        assert_eq!(a.query(None, 0)?.stats.owner_died, 1);
        Ok(())
    }

    #[test]
    fn release_by_another_owner_is_refused() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, &x, bit(9)).map_err(|_| EINVAL)?;
        assert_eq!(a.release(&y, bit(9)), Err(EPERM));
        // All or nothing: x holds 9 but not 10.
        assert_eq!(a.release(&x, bit(9) | bit(10)), Err(EPERM));
        assert!(holder_is(&a, 9, &x));
        a.release(&x, bit(9))?;
        assert_eq!(a.release(&x, bit(9)), Err(EPERM));
        Ok(())
    }

    #[test]
    fn a_set_is_all_or_nothing() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, &x, bit(2)).map_err(|_| EINVAL)?;
        assert!(matches!(
            take(&a, &y, bit(1) | bit(2) | bit(3)),
            Err(AcquireError::Busy { .. })
        ));
        assert!(a.query(None, 1)?.holder.is_none());
        assert!(a.query(None, 3)?.holder.is_none());
        // Queued, it takes none of them until it can take all.
        let w = queue(&a, &y, bit(1) | bit(2) | bit(3))?;
        assert!(a.query(None, 1)?.holder.is_none());
        a.release(&x, bit(2))?;
        assert!(grant_of(&a, &w).is_some());
        assert!(holder_is(&a, 1, &y) && holder_is(&a, 2, &y) && holder_is(&a, 3, &y));
        Ok(())
    }

    #[test]
    fn overlapping_sets_are_granted_in_arrival_order() -> Result {
        let a = new_arbiter()?;
        let (x, p, q, r) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(0) | bit(1) | bit(2)).map_err(|_| EINVAL)?;
        let wp = queue(&a, &p, bit(0) | bit(1))?;
        let wq = queue(&a, &q, bit(1) | bit(2))?;
        let wr = queue(&a, &r, bit(2))?;
        // Freeing 2 alone: q is ahead of r for it, and q still waits for 1.
        a.release(&x, bit(2))?;
        assert!(grant_of(&a, &wr).is_none());
        assert!(a.query(None, 2)?.holder.is_none());
        // Freeing 0 and 1: p first, then q must wait for p; r still behind q.
        a.release(&x, bit(0) | bit(1))?;
        assert!(grant_of(&a, &wp).is_some());
        assert!(grant_of(&a, &wq).is_none());
        assert!(grant_of(&a, &wr).is_none());
        a.release(&p, bit(0) | bit(1))?;
        assert!(grant_of(&a, &wq).is_some());
        assert!(grant_of(&a, &wr).is_none());
        a.release(&q, bit(1) | bit(2))?;
        assert!(grant_of(&a, &wr).is_some());
        Ok(())
    }

    /// A grant whose caller could not be told gives back the owner-died
    /// mark it consumed: the next acquirer is told.
    #[test]
    fn an_undone_grant_gives_its_mark_back() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(47)).map_err(|_| EINVAL)?;
        a.release_all(&x);
        let granted = take(&a, &y, bit(47)).map_err(|_| EINVAL)?;
        assert_eq!(granted.owner_died, bit(47));
        a.undo(&y, bit(47), granted.owner_died);
        let granted = take(&a, &z, bit(47)).map_err(|_| EINVAL)?;
        assert_eq!(granted.owner_died, bit(47));
        Ok(())
    }

    /// The check every command makes without the mutex agrees with the
    /// state it mirrors: a reset refuses the files open before it but the
    /// one that reset the card, a second reset by a later file refuses the
    /// first survivor too, and removal refuses everyone.
    #[test]
    fn refusals_follow_resets_and_removal() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        assert!(!a.refuses(x.id()) && !a.refuses(y.id()));
        a.fence_all_but(y.id());
        let z = owner(&a);
        assert!(a.refuses(x.id()));
        assert!(!a.refuses(y.id()) && !a.refuses(z.id()));
        a.fence_all_but(z.id());
        assert!(a.refuses(x.id()) && a.refuses(y.id()));
        assert!(!a.refuses(z.id()));
        for id in [x.id(), y.id(), z.id()] {
            assert_eq!(a.refuses(id), a.state.lock().fence.is_stale(id));
        }
        a.shut_down();
        assert!(a.refuses(z.id()));
        assert_eq!(a.is_gone(), a.state.lock().gone);
        Ok(())
    }

    #[test]
    fn removal_fails_waiters_and_later_requests() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, &x, bit(0)).map_err(|_| EINVAL)?;
        let w = queue(&a, &y, bit(0))?;
        a.shut_down();
        assert!(a.is_gone());
        let mut state = a.state.lock();
        assert!(matches!(
            state.settle(&w, false, false),
            Some(Err(AcquireError::Gone))
        ));
        state.dequeue(&w);
        drop(state);
        assert_eq!(take(&a, &y, bit(1)), Err(AcquireError::Gone));
        assert_eq!(a.release(&x, bit(0)), Err(ENODEV));
        assert_eq!(a.query(None, 0).err(), Some(ENODEV));
        // Closing the holder's file still cleans up.
        a.release_all(&x);
        assert_eq!(a.state.lock().held, 0);
        Ok(())
    }

    #[test]
    fn returns_without_a_grant_are_spurious_but_stray_ones() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, &x, bit(8)).map_err(|_| EINVAL)?;
        let w = queue(&a, &y, bit(8))?;
        let mut state = a.state.lock();
        // Before the first sleep: nothing to count.
        assert!(state.woke(&w, None, Wait::Forever).is_none());
        assert_eq!(state.slots[8].stats.spurious_wakeups, 0);
        // A wake-up sent to it that it finds no grant for: it ran for
        // nothing.
        assert!(state
            .woke(&w, Some(Woken::Notified), Wait::Forever)
            .is_none());
        assert_eq!(state.slots[8].stats.spurious_wakeups, 1);
        // A wake-up not sent to it (a mutex's deferred one, meant for an
        // earlier sleep of the task) is not this lock's doing.
        assert!(state.woke(&w, Some(Woken::Stray), Wait::Forever).is_none());
        assert_eq!(state.slots[8].stats.spurious_wakeups, 1);
        // A timer that fired before the deadline: the same.
        assert!(state.woke(&w, Some(Woken::Early), Wait::Forever).is_none());
        assert_eq!(state.slots[8].stats.spurious_wakeups, 2);
        // A signal or the deadline is something to act on.
        assert!(matches!(
            state.woke(&w, Some(Woken::Signal), Wait::Forever),
            Some(Err(AcquireError::Interrupted))
        ));
        assert!(matches!(
            state.woke(&w, Some(Woken::Deadline), Wait::Until(0)),
            Some(Err(AcquireError::TimedOut { .. }))
        ));
        assert_eq!(state.slots[8].stats.spurious_wakeups, 2);
        drop(state);
        // A granted waiter's wake-up is not spurious. The release sends it
        // one, which the waiter can tell from a stray one.
        assert!(!w.rung.load(Ordering::Relaxed));
        a.release(&x, bit(8))?;
        assert!(w.rung.load(Ordering::Relaxed));
        let mut state = a.state.lock();
        assert!(matches!(
            state.woke(&w, Some(Woken::Notified), Wait::Forever),
            Some(Ok(_))
        ));
        assert_eq!(state.slots[8].stats.spurious_wakeups, 2);
        drop(state);
        assert_eq!(spurious(&a, 8), 2);
        Ok(())
    }

    #[test]
    fn a_hand_off_wakes_only_the_granted_waiter() -> Result {
        let a = new_arbiter()?;
        let (x, y, z, b) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(3) | bit(4)).map_err(|_| EINVAL)?;
        let first = queue(&a, &y, bit(3))?;
        let _second = queue(&a, &z, bit(3))?;
        let _bystander = queue(&a, &b, bit(4))?;
        let mut state = a.state.lock();
        state.release_locks(&x, bit(3), false);
        // The wake-ups to send once the mutex is released: the grant only.
        let woken: KVec<bool> = {
            let mut v = KVec::new();
            for waiter in state.wakeups.iter() {
                v.push(Arc::ptr_eq(waiter, &first), GFP_KERNEL)?;
            }
            v
        };
        assert_eq!(&woken[..], &[true]);
        Ok(())
    }

    #[test]
    fn a_deadline_already_past_times_out() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(10)).map_err(|_| EINVAL)?;
        let pid = u32::try_from(kernel::current!().group_leader().pid()).unwrap_or(0);
        let past = |who: &Owner, mask| {
            a.acquire(
                who,
                mask,
                Requester::current(),
                Wait::Until(0),
                Reentry::Refuse,
            )
        };
        // Held: ETIMEDOUT with the holder, where a try says EBUSY.
        assert_eq!(
            past(&y, bit(10)),
            Err(AcquireError::TimedOut { holder_pid: pid })
        );
        assert_eq!(
            take(&a, &y, bit(10)),
            Err(AcquireError::Busy { holder_pid: pid })
        );
        // Free but wanted by an earlier waiter: the same, holder 0.
        let _w = queue(&a, &y, bit(10) | bit(11))?;
        assert_eq!(
            past(&z, bit(11)),
            Err(AcquireError::TimedOut { holder_pid: 0 })
        );
        assert_eq!(
            take(&a, &z, bit(11)),
            Err(AcquireError::Busy { holder_pid: 0 })
        );
        // Free and wanted by nobody: granted, deadline or not.
        assert!(past(&z, bit(12)).is_ok());
        Ok(())
    }

    #[test]
    fn a_queued_set_does_not_block_a_holder_of_one_of_its_locks() -> Result {
        // J holds CHIP_IN_USE (20); K queues for {20, ARC_MSG (16)}, which
        // marks the free 16 as wanted. K waits for J: J must not wait for
        // K to take 16, whichever command it uses.
        let a = new_arbiter()?;
        let (j, k) = (owner(&a), owner(&a));
        take(&a, &j, bit(20)).map_err(|_| EINVAL)?;
        let set = queue(&a, &k, bit(20) | bit(16))?;
        assert!(take(&a, &j, bit(16)).is_ok());
        assert!(holder_is(&a, 16, &j));
        a.release(&j, bit(16))?;
        // LOCK_CTL's try (re-entry waits) and a blocking request, which
        // must not even queue.
        let ctl = a.acquire(&j, bit(16), Requester::current(), Wait::Try, Reentry::Wait);
        assert!(ctl.is_ok());
        a.release(&j, bit(16))?;
        assert_eq!(queue(&a, &j, bit(16)).err(), Some(EINVAL));
        assert!(!a.state.lock().is_blocked(&j, bit(16), monotonic_ns()));
        // The set still waits for 20 only, and gets both once J is done.
        assert!(grant_of(&a, &set).is_none());
        a.release_all(&j);
        assert!(grant_of(&a, &set).is_some());
        assert!(holder_is(&a, 16, &k) && holder_is(&a, 20, &k));
        Ok(())
    }

    #[test]
    fn a_holder_queued_behind_a_set_gets_its_lock_when_freed() -> Result {
        // As above, but 16 is held by L when J asks: J queues behind the
        // set, and L's release must go to J, not stay unused.
        let a = new_arbiter()?;
        let (j, k, l) = (owner(&a), owner(&a), owner(&a));
        take(&a, &j, bit(20)).map_err(|_| EINVAL)?;
        take(&a, &l, bit(16)).map_err(|_| EINVAL)?;
        let set = queue(&a, &k, bit(20) | bit(16))?;
        let mine = queue(&a, &j, bit(16))?;
        a.release(&l, bit(16))?;
        assert!(grant_of(&a, &mine).is_some());
        assert!(holder_is(&a, 16, &j));
        assert!(grant_of(&a, &set).is_none());
        assert_eq!(waiters(&a, 16), 1);
        a.release(&j, bit(16) | bit(20))?;
        assert!(grant_of(&a, &set).is_some());
        Ok(())
    }

    #[test]
    fn a_chain_of_sets_does_not_block_the_holder_it_waits_for() -> Result {
        // Sets {X, Y} and {Y, Z} queued, J holds X and asks for Z: the
        // second set waits for the first, which waits for J.
        let (x, y, z) = (0, 1, 2);
        let a = new_arbiter()?;
        let (j, p, q) = (owner(&a), owner(&a), owner(&a));
        take(&a, &j, bit(x)).map_err(|_| EINVAL)?;
        let first = queue(&a, &p, bit(x) | bit(y))?;
        let second = queue(&a, &q, bit(y) | bit(z))?;
        assert!(take(&a, &j, bit(z)).is_ok());
        assert!(grant_of(&a, &first).is_none() && grant_of(&a, &second).is_none());
        // J done: the sets in arrival order.
        a.release_all(&j);
        assert!(grant_of(&a, &first).is_some());
        assert!(grant_of(&a, &second).is_none());
        a.release(&p, bit(x) | bit(y))?;
        assert!(grant_of(&a, &second).is_some());
        Ok(())
    }

    #[test]
    fn a_chain_of_sets_hands_its_holder_the_lock_it_waits_for() -> Result {
        // The same chain, with Z held by L when J asks: J queues behind
        // the second set, and L's release goes to J.
        let (x, y, z) = (0, 1, 2);
        let a = new_arbiter()?;
        let (j, p, q, l) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &j, bit(x)).map_err(|_| EINVAL)?;
        take(&a, &l, bit(z)).map_err(|_| EINVAL)?;
        let first = queue(&a, &p, bit(x) | bit(y))?;
        let second = queue(&a, &q, bit(y) | bit(z))?;
        let mine = queue(&a, &j, bit(z))?;
        a.release(&l, bit(z))?;
        assert!(grant_of(&a, &mine).is_some());
        assert!(holder_is(&a, z, &j));
        assert!(grant_of(&a, &first).is_none() && grant_of(&a, &second).is_none());
        a.release_all(&j);
        assert!(grant_of(&a, &first).is_some());
        a.release(&p, bit(x) | bit(y))?;
        assert!(grant_of(&a, &second).is_some());
        Ok(())
    }

    #[test]
    fn a_waiter_stuck_through_another_holder_is_passed() -> Result {
        // A holds X and queues for Q behind E, which wants {Y, Q} and waits
        // for B (holder of Y). Then B asks for X, held by A: now E waits,
        // through B, for A, and A's request must go ahead of E.
        let (x, y, q) = (5, 6, 7);
        let a = new_arbiter()?;
        let (owner_a, owner_b, owner_e) = (owner(&a), owner(&a), owner(&a));
        take(&a, &owner_a, bit(x)).map_err(|_| EINVAL)?;
        take(&a, &owner_b, bit(y)).map_err(|_| EINVAL)?;
        let e = queue(&a, &owner_e, bit(y) | bit(q))?;
        // E does not wait for A yet: A waits behind it, in arrival order.
        let mine = queue(&a, &owner_a, bit(q))?;
        assert!(grant_of(&a, &mine).is_none());
        let theirs = queue(&a, &owner_b, bit(x))?;
        assert!(grant_of(&a, &mine).is_some());
        assert!(holder_is(&a, q, &owner_a));
        assert!(grant_of(&a, &e).is_none() && grant_of(&a, &theirs).is_none());
        // A done: B gets X, then B done: E gets {Y, Q}.
        a.release_all(&owner_a);
        assert!(grant_of(&a, &theirs).is_some());
        a.release_all(&owner_b);
        assert!(grant_of(&a, &e).is_some());
        Ok(())
    }

    #[test]
    fn a_holder_does_not_pass_a_waiter_that_does_not_wait_for_it() -> Result {
        // J holds 20; K waits for 16, held by L, and for nothing of J's:
        // J's request for 16 stays behind K.
        let a = new_arbiter()?;
        let (j, k, l) = (owner(&a), owner(&a), owner(&a));
        take(&a, &j, bit(20)).map_err(|_| EINVAL)?;
        take(&a, &l, bit(16)).map_err(|_| EINVAL)?;
        let first = queue(&a, &k, bit(16))?;
        let mine = queue(&a, &j, bit(16))?;
        a.release(&l, bit(16))?;
        assert!(grant_of(&a, &first).is_some());
        assert!(grant_of(&a, &mine).is_none());
        a.release(&k, bit(16))?;
        assert!(grant_of(&a, &mine).is_some());
        Ok(())
    }

    #[test]
    fn a_stopped_request_keeps_its_place_and_its_grant() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(30)).map_err(|_| EINVAL)?;
        let first = queue(&a, &y, bit(30))?;
        let _second = queue(&a, &z, bit(30))?;
        // y's call is stopped, to be restarted: its request stays first.
        assert!(a.state.lock().park(&first));
        assert_eq!(waiters(&a, 30), 2);
        a.release(&x, bit(30))?;
        assert!(holder_is(&a, 30, &y));
        // The restarted call takes its grant up without sleeping.
        let restarted = a.acquire(
            &y,
            bit(30),
            Requester::current(),
            Wait::Forever,
            Reentry::Refuse,
        );
        assert!(restarted.is_ok());
        a.release(&y, bit(30))?;
        assert!(holder_is(&a, 30, &z));
        a.release_all(&z);
        Ok(())
    }

    #[test]
    fn another_command_or_close_gives_a_stopped_place_up() -> Result {
        let a = new_arbiter()?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(31)).map_err(|_| EINVAL)?;
        let first = queue(&a, &y, bit(31))?;
        let second = queue(&a, &z, bit(31))?;
        assert!(a.state.lock().park(&first));
        // y asks for something else instead of restarting: its place goes.
        assert!(take(&a, &y, bit(32)).is_ok());
        assert_eq!(waiters(&a, 31), 1);
        a.release(&x, bit(31))?;
        assert!(grant_of(&a, &second).is_some());
        // Granted while stopped, then the file closes: the lock goes back,
        // not marked owner-died (nobody was told it held it).
        let third = queue(&a, &y, bit(31))?;
        assert!(a.state.lock().park(&third));
        a.release(&z, bit(31))?;
        assert!(holder_is(&a, 31, &y));
        a.release_all(&y);
        let info = a.query(None, 31)?;
        assert!(info.holder.is_none() && !info.owner_died);
        assert!(a.query(None, 32)?.owner_died);
        Ok(())
    }

    #[test]
    fn a_failed_try_keeps_a_place_that_a_release_reaches() -> Result {
        // x holds 33; y waits for it; p polls it (UMD's LOCK_CTL tries).
        let a = new_arbiter()?;
        let (x, y, p) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(33)).map_err(|_| EINVAL)?;
        let first = queue(&a, &y, bit(33))?;
        assert!(matches!(
            take(&a, &p, bit(33)),
            Err(AcquireError::Busy { .. })
        ));
        // The place is queued behind y, and not shown as a sleeping waiter.
        assert_eq!(waiters(&a, 33), 2);
        assert_eq!(a.query(None, 33)?.waiters, 1);
        assert_eq!(a.state.lock().queue.len(), 2);
        a.release(&x, bit(33))?;
        assert!(grant_of(&a, &first).is_some());
        // y waits again, behind the place; y's release reaches the place:
        // kept for p, whoever else tries or waits.
        let again = queue(&a, &x, bit(33))?;
        let acquisitions = a.query(None, 33)?.stats.acquisitions;
        a.release(&y, bit(33))?;
        assert!(holder_is(&a, 33, &p));
        assert!(grant_of(&a, &again).is_none());
        assert!(matches!(
            take(&a, &y, bit(33)),
            Err(AcquireError::Busy { .. })
        ));
        // Not counted until p takes it, with its next try.
        assert_eq!(a.query(None, 33)?.stats.acquisitions, acquisitions);
        assert!(take(&a, &p, bit(33)).is_ok());
        assert_eq!(a.query(None, 33)?.stats.acquisitions, acquisitions + 1);
        a.release(&p, bit(33))?;
        assert!(grant_of(&a, &again).is_some());
        a.release_all(&x);
        a.release_all(&y);
        a.release_all(&p);
        Ok(())
    }

    #[test]
    fn a_poller_that_stops_delays_nobody_past_its_lease() -> Result {
        let a = new_arbiter()?;
        let (x, y, p, z) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(34)).map_err(|_| EINVAL)?;
        let _first = queue(&a, &y, bit(34))?;
        assert!(take(&a, &p, bit(34)).is_err());
        let behind = queue(&a, &z, bit(34))?;
        a.release(&x, bit(34))?;
        a.release(&y, bit(34))?;
        // Kept for p, and z watches the lease.
        assert!(holder_is(&a, 34, &p));
        let mut state = a.state.lock();
        let end = (*state.polls[0].lease.access(&state)).ok_or(EINVAL)?;
        // (It was woken to sleep again with the watch's timeout: the
        // release sent that wake-up.)
        assert_eq!(*behind.watch.access(&state), Some(end));
        // Waking for the watch is not spurious.
        assert!(state
            .woke(&behind, Some(Woken::Notified), Wait::Forever)
            .is_none());
        assert_eq!(state.slots[34].stats.spurious_wakeups, 0);
        // The lease ends (as if its time had come): z's watch hands the
        // lock on to z itself, and p's next try finds nothing kept.
        let place = state.polls[0].clone();
        *place.lease.access_mut(&mut state) = Some(0);
        *behind.watch.access_mut(&mut state) = Some(0);
        assert!(matches!(
            state.woke(&behind, Some(Woken::Deadline), Wait::Forever),
            Some(Ok(_))
        ));
        assert!(state.polls.is_empty());
        drop(state);
        assert!(holder_is(&a, 34, &z));
        assert!(matches!(
            take(&a, &p, bit(34)),
            Err(AcquireError::Busy { .. })
        ));
        for o in [&x, &y, &z, &p] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn a_stopped_watcher_passes_its_watch_on() -> Result {
        let a = new_arbiter()?;
        let (x, y, p, z, w) = (owner(&a), owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(38)).map_err(|_| EINVAL)?;
        let _first = queue(&a, &y, bit(38))?;
        assert!(take(&a, &p, bit(38)).is_err());
        let watcher = queue(&a, &z, bit(38))?;
        let next = queue(&a, &w, bit(38))?;
        a.release(&x, bit(38))?;
        a.release(&y, bit(38))?;
        assert!(holder_is(&a, 38, &p));
        let mut state = a.state.lock();
        let end = *watcher.watch.access(&state);
        assert!(end.is_some());
        assert_eq!(*next.watch.access(&state), None);
        // The watcher is stopped: it could not hand the lock on in time.
        assert!(state.park(&watcher));
        assert_eq!(*watcher.watch.access(&state), None);
        assert_eq!(*next.watch.access(&state), end);
        drop(state);
        for o in [&x, &y, &p, &z, &w] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn an_expired_place_is_passed_over_and_a_close_gives_places_up() -> Result {
        let a = new_arbiter()?;
        let (x, y, p, q) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(36)).map_err(|_| EINVAL)?;
        let _first = queue(&a, &y, bit(36))?;
        assert!(take(&a, &p, bit(36)).is_err());
        assert!(take(&a, &q, bit(36)).is_err());
        // p stopped polling long ago; q closes its file.
        {
            let mut state = a.state.lock();
            let place = state.polls[0].clone();
            *place.lease.access_mut(&mut state) = Some(0);
        }
        a.release_all(&q);
        assert_eq!(a.state.lock().polls.len(), 1);
        a.release(&x, bit(36))?;
        a.release(&y, bit(36))?;
        // Nobody's place was live: the lock is free, not kept.
        assert!(a.query(None, 36)?.holder.is_none());
        assert!(a.state.lock().polls.is_empty());
        assert_eq!(waiters(&a, 36), 0);
        for o in [&x, &y, &p] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn counters_follow_grants() -> Result {
        let a = new_arbiter()?;
        let (x, y) = (owner(&a), owner(&a));
        take(&a, &x, bit(6)).map_err(|_| EINVAL)?;
        let w = queue(&a, &y, bit(6))?;
        a.release(&x, bit(6))?;
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

    #[test]
    fn holdings_name_held_and_awaited_locks_but_not_poll_places() -> Result {
        // x holds 9 and 5; y waits for the set {40, 5}; z waits for 9; p's
        // failed try of 9 leaves a poll place, which is not a wait.
        let a = new_arbiter()?;
        let (x, y, z, p) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(9) | bit(5)).map_err(|_| EINVAL)?;
        let _set = queue(&a, &y, bit(40) | bit(5))?;
        let _nine = queue(&a, &z, bit(9))?;
        assert!(matches!(
            take(&a, &p, bit(9)),
            Err(AcquireError::Busy { .. })
        ));
        let index = |v: &KVec<(usize, u64)>| -> KVec<usize> {
            let mut out = KVec::new();
            for (i, _) in v.iter() {
                assert!(out.push(*i, GFP_KERNEL).is_ok());
            }
            out
        };
        let hx = a.holdings(&x)?;
        assert_eq!(&index(&hx.held)[..], &[5, 9]);
        assert!(hx.waiting.is_empty());
        let hy = a.holdings(&y)?;
        assert!(hy.held.is_empty());
        assert_eq!(&index(&hy.waiting)[..], &[5, 40]);
        assert_eq!(&index(&a.holdings(&z)?.waiting)[..], &[9]);
        let hp = a.holdings(&p)?;
        assert!(hp.held.is_empty() && hp.waiting.is_empty());
        for o in [&x, &y, &z, &p] {
            a.release_all(o);
        }
        Ok(())
    }

    // ---- the hand-off bound: bounded barging past poll places ----------
    //
    // A failed try leaves a place only while others are queued for the
    // lock, so each test first queues a sleeper `s0` that takes the lock
    // from its first holder.

    #[test]
    fn under_the_bound_a_released_lock_is_free_for_whoever_runs_first() -> Result {
        let a = new_arbiter_with_bound(HUGE_BOUND_NS)?;
        let (x, s0, p, q, z) = (owner(&a), owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(40)).map_err(|_| EINVAL)?;
        let first = queue(&a, &s0, bit(40))?;
        assert!(matches!(
            take(&a, &p, bit(40)),
            Err(AcquireError::Busy { .. })
        ));
        assert!(matches!(
            take(&a, &q, bit(40)),
            Err(AcquireError::Busy { .. })
        ));
        a.release(&x, bit(40))?;
        // Under the bound the sleeper is not handed the lock: woken, it
        // takes it when it runs, nobody having taken it first.
        assert_eq!(holder_of(&a, 40), None);
        assert!(matches!(runs(&a, &first), Some(Ok(_))));
        assert!(grant_of(&a, &first).is_some());
        assert_eq!(waiters(&a, 40), 2);
        // The release keeps nothing for the places (the lock would stand
        // idle until a poller's next try) and wakes nobody.
        {
            let mut state = a.state.lock();
            state.release_locks(&s0, bit(40), false);
            assert!(state.wakeups.is_empty());
            assert!(state.slots[40].holder.is_none());
            assert!(state.polls.iter().all(|w| w.grant.access(&state).is_none()));
        }
        assert_eq!(waiters(&a, 40), 2);
        // A caller that runs takes it ahead of both places, which stay.
        let got = take(&a, &z, bit(40)).map_err(|_| EINVAL)?;
        assert_eq!(got.waited_ns, 0);
        assert!(holder_is(&a, 40, &z));
        assert_eq!(waiters(&a, 40), 2);
        a.release(&z, bit(40))?;
        // The second poller's next try takes it too: the first is under
        // the bound as well.
        assert!(take(&a, &q, bit(40)).is_ok());
        assert!(holder_is(&a, 40, &q));
        assert_eq!(waiters(&a, 40), 1);
        a.release(&q, bit(40))?;
        assert!(take(&a, &p, bit(40)).is_ok());
        assert_eq!(waiters(&a, 40), 0);
        assert!(a.state.lock().polls.is_empty());
        // x, s0, z, q, p; the places' grants count as contended.
        let stats = a.query(None, 40)?.stats;
        assert_eq!((stats.acquisitions, stats.contended), (5, 2));
        for o in [&x, &s0, &p, &q, &z] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn past_the_bound_a_poller_is_passed_only_by_those_ahead() -> Result {
        // y (a sleeper) queued 2 s ago, p's place 1 s ago, w just now; the
        // bound is 1 ms, so y and p are past it: strict order from here.
        let a = new_arbiter_with_bound(1_000_000)?;
        let (x, y, p, w, z) = (owner(&a), owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(41)).map_err(|_| EINVAL)?;
        let now = monotonic_ns();
        let ahead = queue_at(&a, &y, bit(41), now - 2_000_000_000)?;
        let place = place_at(&a, &p, bit(41), now - 1_000_000_000)?;
        let behind = queue(&a, &w, bit(41))?;
        a.release(&x, bit(41))?;
        assert!(grant_of(&a, &ahead).is_some());
        a.release(&y, bit(41))?;
        // Kept for the poller: not for the sleeper behind it, not for a
        // caller that runs.
        assert!(holder_is(&a, 41, &p));
        assert!(place.grant.access(&a.state.lock()).is_some());
        assert!(grant_of(&a, &behind).is_none());
        assert!(matches!(
            take(&a, &z, bit(41)),
            Err(AcquireError::Busy { .. })
        ));
        assert!(take(&a, &p, bit(41)).is_ok());
        a.release(&p, bit(41))?;
        assert!(grant_of(&a, &behind).is_some());
        for o in [&x, &y, &p, &w, &z] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn a_place_that_passes_the_bound_with_its_lock_free_is_served_first() -> Result {
        // Passed over when released (under the bound), then past it while
        // the lock is still free: a caller that runs is refused, and the
        // poller's next try gets it.
        let a = new_arbiter_with_bound(HUGE_BOUND_NS)?;
        let (x, p, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(42)).map_err(|_| EINVAL)?;
        let place = place_at(&a, &p, bit(42), monotonic_ns() - 1_000_000_000)?;
        a.release(&x, bit(42))?;
        assert_eq!(holder_of(&a, 42), None);
        a.state.lock().handoff_ns = 1_000_000;
        assert!(matches!(
            take(&a, &z, bit(42)),
            Err(AcquireError::Busy { .. })
        ));
        // z's failed try queued a place behind p's: the lock is kept for p.
        assert!(holder_is(&a, 42, &p));
        assert!(place.grant.access(&a.state.lock()).is_some());
        assert!(take(&a, &p, bit(42)).is_ok());
        for o in [&x, &p, &z] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn a_bound_of_zero_is_strict_fifo() -> Result {
        let a = new_arbiter_with_bound(0)?;
        let (x, s0, p, z) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(43)).map_err(|_| EINVAL)?;
        queue(&a, &s0, bit(43))?;
        assert!(take(&a, &p, bit(43)).is_err());
        a.release(&x, bit(43))?;
        a.release(&s0, bit(43))?;
        assert!(holder_is(&a, 43, &p));
        assert!(matches!(
            take(&a, &z, bit(43)),
            Err(AcquireError::Busy { .. })
        ));
        assert!(take(&a, &p, bit(43)).is_ok());
        a.release_all(&p);
        // Setting 0 on a card whose lock was left free for a place under
        // the bound keeps it for that place at once.
        a.set_handoff_us(u32::MAX);
        assert_eq!(a.handoff_us(), u64::from(u32::MAX));
        take(&a, &x, bit(43)).map_err(|_| EINVAL)?;
        let first = queue(&a, &s0, bit(43))?;
        assert!(take(&a, &p, bit(43)).is_err());
        a.release(&x, bit(43))?;
        assert!(runs(&a, &first).is_some());
        a.release(&s0, bit(43))?;
        assert_eq!(holder_of(&a, 43), None);
        a.set_handoff_us(0);
        assert_eq!(a.handoff_us(), 0);
        assert!(holder_is(&a, 43, &p));
        assert!(matches!(
            take(&a, &z, bit(43)),
            Err(AcquireError::Busy { .. })
        ));
        for o in [&x, &s0, &p, &z] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn under_the_bound_a_release_wakes_the_first_sleeper_to_a_free_lock() -> Result {
        let a = new_arbiter_with_bound(HUGE_BOUND_NS)?;
        let (x, s0, p, y, z) = (owner(&a), owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(44)).map_err(|_| EINVAL)?;
        let first = queue(&a, &s0, bit(44))?;
        assert!(take(&a, &p, bit(44)).is_err());
        let sleeper = queue(&a, &y, bit(44))?;
        a.release(&x, bit(44))?;
        assert!(runs(&a, &first).is_some());
        let spurious = a.query(None, 44)?.stats.spurious_wakeups;
        let mut state = a.state.lock();
        state.release_locks(&s0, bit(44), false);
        // One wake-up, of the first sleeper (past the poller's place, which
        // nobody sleeps on), and the lock left free.
        let woken: KVec<bool> = {
            let mut v = KVec::new();
            for waiter in state.wakeups.iter() {
                v.push(Arc::ptr_eq(waiter, &sleeper), GFP_KERNEL)?;
            }
            v
        };
        assert_eq!(&woken[..], &[true]);
        assert!(*sleeper.candidate.access(&state));
        drop(state);
        assert_eq!(holder_of(&a, 44), None);
        // A caller that runs first takes it; the sleeper, when it runs,
        // finds it taken and sleeps on in its place, not counted as woken
        // for nothing (it was woken to try).
        assert!(take(&a, &z, bit(44)).is_ok());
        assert!(runs(&a, &sleeper).is_none());
        assert_eq!(a.query(None, 44)?.stats.spurious_wakeups, spurious);
        assert!(!*sleeper.candidate.access(&a.state.lock()));
        assert_eq!(waiters(&a, 44), 2);
        // The next release wakes it again, and this time it gets the lock
        // ahead of the poller, whose next try finds it taken.
        a.release(&z, bit(44))?;
        assert_eq!(holder_of(&a, 44), None);
        assert!(matches!(runs(&a, &sleeper), Some(Ok(_))));
        assert!(holder_is(&a, 44, &y));
        assert!(matches!(
            take(&a, &p, bit(44)),
            Err(AcquireError::Busy { .. })
        ));
        a.release(&y, bit(44))?;
        assert!(take(&a, &p, bit(44)).is_ok());
        for o in [&x, &s0, &p, &y, &z] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn past_the_bound_a_sleeper_is_handed_the_lock() -> Result {
        // y queued 2 s ago, the bound 1 ms: the release grants y and wakes
        // it, and a caller that runs is refused.
        let a = new_arbiter_with_bound(1_000_000)?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(48)).map_err(|_| EINVAL)?;
        let sleeper = queue_at(&a, &y, bit(48), monotonic_ns() - 2_000_000_000)?;
        a.release(&x, bit(48))?;
        assert!(holder_is(&a, 48, &y));
        assert!(grant_of(&a, &sleeper).is_some());
        assert!(!*sleeper.candidate.access(&a.state.lock()));
        assert!(matches!(
            take(&a, &z, bit(48)),
            Err(AcquireError::Busy { .. })
        ));
        for o in [&x, &y, &z] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn a_sleeper_that_passes_the_bound_with_its_lock_free_is_served_first() -> Result {
        // Woken to a free lock under the bound, then past it before it
        // runs: a caller that comes now is refused, and the lock is the
        // sleeper's at once.
        let a = new_arbiter_with_bound(HUGE_BOUND_NS)?;
        let (x, y, z) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(49)).map_err(|_| EINVAL)?;
        let sleeper = queue_at(&a, &y, bit(49), monotonic_ns() - 1_000_000_000)?;
        a.release(&x, bit(49))?;
        assert_eq!(holder_of(&a, 49), None);
        assert!(*sleeper.candidate.access(&a.state.lock()));
        a.state.lock().handoff_ns = 1_000_000;
        assert!(matches!(
            take(&a, &z, bit(49)),
            Err(AcquireError::Busy { .. })
        ));
        // z's failed try queued a place behind the sleeper, which may no
        // longer be passed: the lock is the sleeper's at once.
        assert!(holder_is(&a, 49, &y));
        assert!(matches!(runs(&a, &sleeper), Some(Ok(_))));
        a.release(&y, bit(49))?;
        assert!(take(&a, &z, bit(49)).is_ok());
        for o in [&x, &y, &z] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn a_passed_place_taken_up_by_a_blocking_call_gets_the_free_lock() -> Result {
        let a = new_arbiter_with_bound(HUGE_BOUND_NS)?;
        let (x, s0, p) = (owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(45)).map_err(|_| EINVAL)?;
        let first = queue(&a, &s0, bit(45))?;
        assert!(take(&a, &p, bit(45)).is_err());
        a.release(&x, bit(45))?;
        assert!(runs(&a, &first).is_some());
        a.release(&s0, bit(45))?;
        assert_eq!(holder_of(&a, 45), None);
        // Its blocking call of the same lock must not sleep on a free lock
        // (a deadline, so that a mistake fails instead of hanging).
        let deadline = Wait::Until(monotonic_ns() + 1_000_000_000);
        let got = a.acquire(&p, bit(45), Requester::current(), deadline, Reentry::Wait);
        assert!(got.is_ok());
        assert!(holder_is(&a, 45, &p));
        assert_eq!(waiters(&a, 45), 0);
        for o in [&x, &s0, &p] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn lock_sets_neither_barge_nor_are_barged() -> Result {
        let a = new_arbiter_with_bound(HUGE_BOUND_NS)?;
        let (x, s0, p, q, s, z) = (
            owner(&a),
            owner(&a),
            owner(&a),
            owner(&a),
            owner(&a),
            owner(&a),
        );
        // A set does not pass a poll place under the bound (a single lock
        // would), and once a set waits for its lock the place is strict:
        // the lock is kept for it.
        take(&a, &x, bit(46)).map_err(|_| EINVAL)?;
        let first = queue(&a, &s0, bit(46))?;
        assert!(take(&a, &p, bit(46)).is_err());
        a.release(&x, bit(46))?;
        assert!(runs(&a, &first).is_some());
        a.release(&s0, bit(46))?;
        assert_eq!(holder_of(&a, 46), None);
        assert!(matches!(
            take(&a, &z, bit(46) | bit(47)),
            Err(AcquireError::Busy { .. })
        ));
        assert_eq!(holder_of(&a, 47), None);
        assert!(holder_is(&a, 46, &p));
        a.release_all(&z);
        assert!(take(&a, &p, bit(46)).is_ok());
        a.release_all(&p);
        assert_eq!(waiters(&a, 46), 0);

        // A set queued behind a place: the release keeps the lock for the
        // place, not for the set, not for a caller that runs.
        take(&a, &x, bit(46)).map_err(|_| EINVAL)?;
        queue(&a, &s0, bit(46))?;
        assert!(take(&a, &p, bit(46)).is_err());
        let set = queue(&a, &s, bit(46) | bit(47))?;
        a.release(&x, bit(46))?;
        a.release(&s0, bit(46))?;
        assert!(holder_is(&a, 46, &p));
        assert!(grant_of(&a, &set).is_none());
        assert!(matches!(
            take(&a, &z, bit(46)),
            Err(AcquireError::Busy { .. })
        ));
        a.release_all(&z);
        assert!(take(&a, &p, bit(46)).is_ok());
        a.release(&p, bit(46))?;
        assert!(grant_of(&a, &set).is_some());
        a.release_all(&s);
        a.release_all(&p);

        // A set's own poll place is never passed, even under the bound.
        take(&a, &x, bit(46)).map_err(|_| EINVAL)?;
        queue(&a, &s0, bit(46))?;
        assert!(take(&a, &q, bit(46) | bit(47)).is_err());
        assert!(matches!(
            take(&a, &z, bit(47)),
            Err(AcquireError::Busy { .. })
        ));
        a.release_all(&z);
        a.release(&x, bit(46))?;
        a.release(&s0, bit(46))?;
        assert!(holder_is(&a, 46, &q) && holder_is(&a, 47, &q));
        assert!(take(&a, &q, bit(46) | bit(47)).is_ok());
        for o in [&x, &s0, &p, &q, &s, &z] {
            a.release_all(o);
        }
        Ok(())
    }

    // ---- pollers: runs of failed tries, for the views ------------------

    /// `(pollers, tries of the first shown)` of lock `index` among `owners`.
    fn polled(a: &Arbiter, index: usize, owners: &[Owner]) -> (u32, u64) {
        let (count, shown) = match a.pollers(index, owners, 4) {
            Ok(p) => p,
            Err(_) => panic!("no memory for the pollers"),
        };
        (count, shown.first().map_or(0, |p| p.tries))
    }

    #[test]
    fn a_lone_pollers_tries_are_counted_until_it_gets_the_lock() -> Result {
        // x holds 50; p tries it three times with nobody queued: no poll
        // place, no waiter, but a poller with three tries.
        let a = new_arbiter()?;
        let (x, p) = (owner(&a), owner(&a));
        take(&a, &x, bit(50)).map_err(|_| EINVAL)?;
        for _ in 0..3 {
            assert!(matches!(
                take(&a, &p, bit(50)),
                Err(AcquireError::Busy { .. })
            ));
        }
        assert!(a.state.lock().queue.is_empty());
        assert_eq!(a.query(None, 50)?.waiters, 0);
        let owners = [x.clone(), p.clone()];
        assert_eq!(polled(&a, 50, &owners), (1, 3));
        assert_eq!(polled(&a, 51, &owners), (0, 0));
        let hp = a.holdings(&p)?;
        assert_eq!(hp.polling.len(), 1);
        assert_eq!((hp.polling[0].0, hp.polling[0].2), (50, 3));
        assert!(hp.held.is_empty() && hp.waiting.is_empty());
        assert!(a.holdings(&x)?.polling.is_empty());
        // Its try gets the freed lock: it polls no more.
        a.release(&x, bit(50))?;
        assert!(take(&a, &p, bit(50)).is_ok());
        assert_eq!(polled(&a, 50, &owners), (0, 0));
        assert!(a.holdings(&p)?.polling.is_empty());
        for o in [&x, &p] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn a_run_of_tries_ends_with_its_lease_or_the_close() -> Result {
        let a = new_arbiter()?;
        let (x, p) = (owner(&a), owner(&a));
        take(&a, &x, bit(52)).map_err(|_| EINVAL)?;
        assert!(take(&a, &p, bit(52)).is_err());
        assert!(take(&a, &p, bit(52)).is_err());
        let owners = [p.clone()];
        assert_eq!(polled(&a, 52, &owners), (1, 2));
        // Its lease ends (as if its time had come): not shown, and the
        // next try starts a new run.
        {
            let mut state = a.state.lock();
            let polling = &mut p.record.counts.access_mut(&mut state).polling;
            for entry in polling.iter_mut().filter(|e| e.mask != 0) {
                entry.until_ns = 0;
            }
        }
        assert_eq!(polled(&a, 52, &owners), (0, 0));
        assert!(a.holdings(&p)?.polling.is_empty());
        assert!(take(&a, &p, bit(52)).is_err());
        assert_eq!(polled(&a, 52, &owners), (1, 1));
        // The close ends it.
        a.release_all(&p);
        assert_eq!(polled(&a, 52, &owners), (0, 0));
        a.release_all(&x);
        Ok(())
    }

    #[test]
    fn a_file_remembers_a_bounded_number_of_polled_sets() -> Result {
        // p polls more sets than it has entries: those tried last stay.
        let a = new_arbiter()?;
        let (x, p) = (owner(&a), owner(&a));
        let sets = POLLED_SETS + 2;
        let mut all: LockMask = 0;
        for i in 0..sets {
            all |= bit(i);
        }
        take(&a, &x, all).map_err(|_| EINVAL)?;
        for i in 0..sets {
            assert!(take(&a, &p, bit(i)).is_err());
        }
        let owners = [p.clone()];
        for i in 0..sets {
            let expected = if i < sets - POLLED_SETS { 0 } else { 1 };
            assert_eq!(polled(&a, i, &owners).0, expected);
        }
        assert_eq!(a.holdings(&p)?.polling.len(), POLLED_SETS);
        // Another owner's poller of one lock does not end p's runs of
        // others; a grant of one lock ends only the runs that want it.
        a.release(&x, bit(sets - 1))?;
        assert!(take(&a, &p, bit(sets - 1)).is_ok());
        assert_eq!(polled(&a, sets - 1, &owners).0, 0);
        assert_eq!(polled(&a, sets - 2, &owners).0, 1);
        for o in [&x, &p] {
            a.release_all(o);
        }
        Ok(())
    }

    #[test]
    fn pollers_are_listed_longest_first_within_the_bound() -> Result {
        let a = new_arbiter()?;
        let (x, p, q, r) = (owner(&a), owner(&a), owner(&a), owner(&a));
        take(&a, &x, bit(53)).map_err(|_| EINVAL)?;
        for o in [&p, &q, &r] {
            assert!(take(&a, o, bit(53)).is_err());
        }
        // q has polled longest, then r, then p.
        {
            let mut state = a.state.lock();
            let now = monotonic_ns();
            for (o, ago) in [(&q, 3_000), (&r, 2_000), (&p, 1_000)] {
                let polling = &mut o.record.counts.access_mut(&mut state).polling;
                for entry in polling.iter_mut().filter(|e| e.mask != 0) {
                    entry.since_ns = now - ago * 1_000_000;
                }
            }
        }
        let owners = [p.clone(), q.clone(), r.clone(), x.clone()];
        let (count, shown) = a.pollers(53, &owners, 2)?;
        assert_eq!(count, 3);
        assert_eq!(shown.len(), 2);
        assert!(shown[0].polling_ns >= 3_000_000_000);
        assert!((2_000_000_000..3_000_000_000).contains(&shown[1].polling_ns));
        let (count, shown) = a.pollers(53, &owners, 0)?;
        assert_eq!((count, shown.len()), (3, 0));
        for o in [&x, &p, &q, &r] {
            a.release_all(o);
        }
        Ok(())
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The arbiter core: the locks of one card, owned by open files.
//!
//! A card has [`LOCK_COUNT`] locks. A request names a set of them (a bit
//! mask) and is granted when all of them are free and no earlier waiter on
//! the card wants any of them, so requests are served in arrival order per
//! card and a request never holds some locks while it waits for others.
//!
//! Waiters sit in one queue per card, in arrival order. Each waiter sleeps on
//! its own condition variable: a release picks the waiters that can now be
//! granted, makes them the holders under the card's mutex and, once the
//! mutex is released, wakes exactly those ([`wait::Wakeups`]). A waiter
//! therefore never wakes to find nothing, and waiters of
//! other locks sleep on. `kernel::sync::CondVar` alone could not do this: it
//! re-queues a waiter at the tail on every wake-up and `notify_one` wakes
//! whoever is first in its own queue.
//!
//! The mutex guards short, bounded updates and is never held across a sleep
//! (a waiter's condition variable releases it while sleeping).
//!
//! Invariant kept by every operation: no queued waiter could be granted.
//! Locks only become available when they are released or when a waiter
//! wanting them leaves the queue, and both cases run [`State::hand_off`] over
//! exactly those locks.

use crate::fifo::Fifo;
use crate::rust_ext::{
    task::{
        self as task_ext,
        TASK_COMM_LEN, //
    },
    time::monotonic_ns, //
};
use crate::wait::{
    self,
    unlock,
    DefersWakeups,
    Ended,
    Sleeper,
    Wait,
    Wakeups,
    Woken, //
};
use kernel::{
    new_condvar,
    new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        CondVar,
        LockedBy,
        Mutex, //
    },
    task::Task, //
};

/// Number of locks per card.
pub(crate) const LOCK_COUNT: usize = 64;

/// The lock set of a request: bit `i` stands for lock `i`.
pub(crate) type LockMask = u64;

/// The mask of lock `index` (which must be below [`LOCK_COUNT`]).
pub(crate) fn bit(index: usize) -> LockMask {
    1 << index
}

/// The indices of the locks of `mask`, lowest first.
fn indices(mut mask: LockMask) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        let index = mask.trailing_zeros() as usize;
        (index < LOCK_COUNT).then(|| {
            mask &= mask - 1;
            index
        })
    })
}

/// The owner of locks: one open file description.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct OwnerId(u64);

/// The process that makes a request, recorded as the holder when granted.
#[derive(Clone)]
pub(crate) struct Requester {
    /// The thread-group leader, so that the pid shown is the process's.
    task: ARef<Task>,
    comm: [u8; TASK_COMM_LEN],
}

impl Requester {
    /// The calling process.
    pub(crate) fn current() -> Self {
        let current = kernel::current!();
        let leader = current.group_leader();
        Self {
            task: leader.into(),
            comm: task_ext::comm(current),
        }
    }

    /// The process's comm when it made the request.
    pub(crate) fn comm(&self) -> [u8; TASK_COMM_LEN] {
        self.comm
    }

    /// The process's pid in the caller's pid namespace; 0 when it is not
    /// visible there or has exited.
    pub(crate) fn pid_for_caller(&self) -> u32 {
        let current = kernel::current!();
        let pid = self.task.tgid_nr_ns(current.active_pid_ns());
        u32::try_from(pid).unwrap_or(0)
    }
}

/// What a request does when its file already holds one of its locks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Reentry {
    /// Fail with [`AcquireError::Deadlock`].
    Refuse,
    /// Treat the lock as held by anyone else: wait for the file to release
    /// it (the compatible LOCK_CTL's behaviour).
    Wait,
}

/// A granted request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Acquired {
    /// The locks whose previous holder's file closed while holding them.
    pub(crate) owner_died: LockMask,
    /// Time spent waiting, in nanoseconds.
    pub(crate) waited_ns: u64,
}

/// Why a request was not granted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AcquireError {
    /// Not granted at once (held, or an earlier waiter wants it). The pid
    /// is the holder of the lowest held lock, 0 if none is held.
    Busy { holder_pid: u32 },
    /// The deadline passed.
    TimedOut { holder_pid: u32 },
    /// The file already holds one of the locks.
    Deadlock,
    /// A signal is pending.
    Interrupted,
    /// The card is gone.
    Gone,
    /// Out of memory while queueing.
    NoMemory,
}

/// Counters of one lock, since the card was bound.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct LockStats {
    /// Grants.
    pub(crate) acquisitions: u64,
    /// Grants that had to wait.
    pub(crate) contended: u64,
    /// Releases because the holder's file was closed.
    pub(crate) owner_died: u64,
    /// Wake-ups by the driver of a waiter that then found no grant and the
    /// card still there: a waiter woken for nothing. FIFO hand-off wakes
    /// only the waiter it grants, so this stays 0. Wake-ups the driver did
    /// not send (the scheduler may deliver a late wake-up meant for an
    /// earlier sleep of the same task) are not counted.
    pub(crate) spurious_wakeups: u64,
    /// Sum and maximum of the waits of contended grants, in nanoseconds.
    pub(crate) total_wait_ns: u64,
    pub(crate) max_wait_ns: u64,
    /// Longest time the lock was held, in nanoseconds.
    pub(crate) max_hold_ns: u64,
}

/// The state of one lock as seen by a reader.
#[derive(Clone, Debug)]
pub(crate) struct LockInfo {
    /// The holder's pid in the reader's pid namespace (0 if not visible)
    /// and comm, if held.
    pub(crate) holder: Option<(u32, [u8; TASK_COMM_LEN])>,
    /// Whether the reader's file holds it.
    pub(crate) held_by_caller: bool,
    /// Held for, in nanoseconds.
    pub(crate) held_ns: u64,
    /// The owner-died mark is set and not yet consumed by an acquisition.
    pub(crate) owner_died: bool,
    /// Number of queued waiters wanting this lock.
    pub(crate) waiters: u32,
    pub(crate) stats: LockStats,
}

struct Holder {
    owner: OwnerId,
    who: Requester,
    since_ns: i64,
}

#[derive(Default)]
struct Slot {
    holder: Option<Holder>,
    owner_died: bool,
    waiters: u32,
    stats: LockStats,
}

/// What a granted waiter learns from its grant.
#[derive(Clone, Copy)]
struct Grant {
    owner_died: LockMask,
}

/// A queued request.
#[pin_data]
struct Waiter {
    #[pin]
    wake: CondVar,
    owner: OwnerId,
    mask: LockMask,
    who: Requester,
    /// Set, under the card's mutex, by the release that grants the request.
    grant: LockedBy<Option<Grant>, State>,
    /// Whether the driver has woken this waiter ([`State::wake`]).
    notified: LockedBy<bool, State>,
}

impl Sleeper for Waiter {
    fn condvar(&self) -> &CondVar {
        &self.wake
    }
}

struct State {
    gone: bool,
    /// Locks with a holder.
    held: LockMask,
    /// Locks that at least one queued waiter wants.
    wanted: LockMask,
    /// Waiters in arrival order.
    queue: Fifo<Arc<Waiter>>,
    /// One per lock, by index ([`LOCK_COUNT`]).
    slots: KVec<Slot>,
    next_owner: u64,
    /// Wake-ups to send when the mutex is released ([`unlock`]).
    wakeups: Wakeups<Waiter>,
}

impl DefersWakeups for State {
    type Waiter = Waiter;
    fn wakeups(&mut self) -> &mut Wakeups<Waiter> {
        &mut self.wakeups
    }
}

/// The locks of one card.
#[pin_data]
pub(crate) struct Arbiter {
    #[pin]
    state: Mutex<State>,
}

impl Arbiter {
    /// A card's locks, all free.
    pub(crate) fn new() -> Result<impl PinInit<Self>> {
        // On the heap: 64 slots would take several KiB of the probing
        // task's stack while the initialiser is built.
        let mut slots = KVec::with_capacity(LOCK_COUNT, GFP_KERNEL)?;
        for _ in 0..LOCK_COUNT {
            slots.push(Slot::default(), GFP_KERNEL)?;
        }
        Ok(pin_init!(Self {
            state <- new_mutex!(State {
                gone: false,
                held: 0,
                wanted: 0,
                queue: Fifo::new(),
                slots,
                next_owner: 1,
                wakeups: Wakeups::new(),
            }),
        }))
    }

    /// A new owner identity, for a newly opened file.
    pub(crate) fn new_owner(&self) -> OwnerId {
        let mut state = self.state.lock();
        let owner = OwnerId(state.next_owner);
        state.next_owner += 1;
        owner
    }

    /// Whether the card is gone.
    pub(crate) fn is_gone(&self) -> bool {
        self.state.lock().gone
    }

    /// Requests every lock of `mask` for `owner`.
    pub(crate) fn acquire(
        &self,
        owner: OwnerId,
        mask: LockMask,
        who: Requester,
        wait: Wait,
        reentry: Reentry,
    ) -> Result<Acquired, AcquireError> {
        let mut state = self.state.lock();
        if state.gone {
            return Err(AcquireError::Gone);
        }
        if reentry == Reentry::Refuse && state.held_by(owner) & mask != 0 {
            return Err(AcquireError::Deadlock);
        }
        if !state.is_blocked(mask) {
            let owner_died = state.grant(owner, mask, &who);
            return Ok(Acquired {
                owner_died,
                waited_ns: 0,
            });
        }
        let now = monotonic_ns();
        if wait.is_over(now) {
            return Err(AcquireError::Busy {
                holder_pid: state.holder_pid(mask),
            });
        }

        let waiter = self.new_waiter(owner, mask, who)?;
        state.enqueue(waiter.clone())?;

        let result = wait::wait_until(&waiter.wake, &mut state, wait, |state, woken| {
            if woken == Some(Woken::Notified) {
                state.count_spurious(&waiter);
            }
            state.settle(
                &waiter,
                woken == Some(Woken::Signal),
                woken == Some(Woken::Deadline),
            )
        });

        let waited_ns = u64::try_from(monotonic_ns() - now).unwrap_or(0);
        let result = match result {
            Ok(grant) if !state.gone => {
                state.record_wait(mask, waited_ns);
                Ok(Acquired {
                    owner_died: grant.owner_died,
                    waited_ns,
                })
            }
            Ok(_) => {
                // Granted just before the card went away: give the locks
                // back so the teardown sees them free.
                state.release_locks(mask, false);
                Err(AcquireError::Gone)
            }
            Err(e) => {
                state.dequeue(&waiter);
                Err(e)
            }
        };
        unlock(state);
        result
    }

    fn new_waiter(
        &self,
        owner: OwnerId,
        mask: LockMask,
        who: Requester,
    ) -> Result<Arc<Waiter>, AcquireError> {
        Arc::pin_init(
            pin_init!(Waiter {
                wake <- new_condvar!("tenstorrent_lock_waiter"),
                owner,
                mask,
                who,
                grant: LockedBy::new(&self.state, None),
                notified: LockedBy::new(&self.state, false),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| AcquireError::NoMemory)
    }

    /// Releases every lock of `mask`, all or nothing. `EPERM` unless
    /// `owner` holds all of them.
    pub(crate) fn release(&self, owner: OwnerId, mask: LockMask) -> Result {
        let mut state = self.state.lock();
        if state.gone {
            return Err(ENODEV);
        }
        if state.held_by(owner) & mask != mask {
            return Err(EPERM);
        }
        state.release_locks(mask, false);
        unlock(state);
        Ok(())
    }

    /// Undoes a grant of `mask` to `owner` whose caller could not be told:
    /// the locks are released, and the owner-died marks the grant consumed
    /// (`owner_died`) are put back for the next acquirer.
    pub(crate) fn undo(&self, owner: OwnerId, mask: LockMask, owner_died: LockMask) {
        let mut state = self.state.lock();
        if state.held_by(owner) & mask != mask {
            return;
        }
        for i in indices(owner_died & mask) {
            state.slots[i].owner_died = true;
        }
        state.release_locks(mask, false);
        unlock(state);
    }

    /// Releases every lock `owner` holds because its file is closing: the
    /// locks are marked "owner died" for their next acquirer.
    pub(crate) fn release_all(&self, owner: OwnerId) {
        let mut state = self.state.lock();
        let mask = state.held_by(owner);
        if mask != 0 {
            state.release_locks(mask, true);
        }
        unlock(state);
    }

    /// Whether `owner` holds lock `index`, and whether anyone does.
    pub(crate) fn test(&self, owner: OwnerId, index: usize) -> Result<(bool, bool)> {
        let state = self.state.lock();
        if state.gone {
            return Err(ENODEV);
        }
        let holder = state.slots[index].holder.as_ref();
        Ok((holder.is_some_and(|h| h.owner == owner), holder.is_some()))
    }

    /// The state of lock `index`, as seen by `owner` (if any).
    pub(crate) fn query(&self, owner: Option<OwnerId>, index: usize) -> Result<LockInfo> {
        let state = self.state.lock();
        if state.gone {
            return Err(ENODEV);
        }
        let slot = &state.slots[index];
        let now = monotonic_ns();
        Ok(LockInfo {
            holder: slot
                .holder
                .as_ref()
                .map(|h| (h.who.pid_for_caller(), h.who.comm)),
            held_by_caller: slot.holder.as_ref().is_some_and(|h| Some(h.owner) == owner),
            held_ns: slot
                .holder
                .as_ref()
                .map_or(0, |h| u64::try_from(now - h.since_ns).unwrap_or(0)),
            owner_died: slot.owner_died,
            waiters: slot.waiters,
            stats: slot.stats,
        })
    }

    /// The queued requests in arrival order: the requester's pid in the
    /// caller's pid namespace (0 if not visible) and the locks it wants.
    pub(crate) fn queue(&self) -> Result<KVec<(u32, LockMask)>> {
        let state = self.state.lock();
        let mut queue = KVec::with_capacity(state.queue.len(), GFP_KERNEL)?;
        for waiter in state.queue.iter() {
            queue.push((waiter.who.pid_for_caller(), waiter.mask), GFP_KERNEL)?;
        }
        Ok(queue)
    }

    /// The card is going away: every waiter wakes with
    /// [`AcquireError::Gone`] and every later request fails with it.
    pub(crate) fn shut_down(&self) {
        let mut state = self.state.lock();
        state.gone = true;
        for position in 0..state.queue.len() {
            let Some(waiter) = state.queue.get(position).cloned() else {
                break;
            };
            state.wake(waiter);
        }
        unlock(state);
    }
}

impl State {
    fn held_by(&self, owner: OwnerId) -> LockMask {
        indices(self.held)
            .filter(|&i| {
                self.slots[i]
                    .holder
                    .as_ref()
                    .is_some_and(|h| h.owner == owner)
            })
            .fold(0, |mask, i| mask | bit(i))
    }

    fn is_blocked(&self, mask: LockMask) -> bool {
        (self.held | self.wanted) & mask != 0
    }

    fn holder_pid(&self, mask: LockMask) -> u32 {
        indices(mask & self.held)
            .find_map(|i| self.slots[i].holder.as_ref())
            .map_or(0, |h| h.who.pid_for_caller())
    }

    /// Makes `owner` the holder of every lock of `mask` and consumes their
    /// owner-died marks, which it returns.
    fn grant(&mut self, owner: OwnerId, mask: LockMask, who: &Requester) -> LockMask {
        let now = monotonic_ns();
        let mut owner_died = 0;
        for i in indices(mask) {
            let slot = &mut self.slots[i];
            if slot.owner_died {
                owner_died |= bit(i);
                slot.owner_died = false;
            }
            slot.holder = Some(Holder {
                owner,
                who: who.clone(),
                since_ns: now,
            });
            slot.stats.acquisitions += 1;
        }
        self.held |= mask;
        owner_died
    }

    fn enqueue(&mut self, waiter: Arc<Waiter>) -> Result<(), AcquireError> {
        let mask = waiter.mask;
        self.queue
            .push_back(waiter, GFP_KERNEL)
            .map_err(|_| AcquireError::NoMemory)?;
        for i in indices(mask) {
            self.slots[i].waiters += 1;
        }
        self.wanted |= mask;
        Ok(())
    }

    fn forget_waiter_at(&mut self, position: usize) -> Option<Arc<Waiter>> {
        let waiter = self.queue.remove(position)?;
        for i in indices(waiter.mask) {
            let slot = &mut self.slots[i];
            slot.waiters -= 1;
            if slot.waiters == 0 {
                self.wanted &= !bit(i);
            }
        }
        Some(waiter)
    }

    /// Takes a waiter that gives up out of the queue, and lets the waiters
    /// it was blocking have their turn.
    fn dequeue(&mut self, waiter: &Arc<Waiter>) {
        let position = self.queue.iter().position(|w| Arc::ptr_eq(w, waiter));
        if let Some(position) = position {
            self.forget_waiter_at(position);
            self.hand_off(waiter.mask);
        }
    }

    fn release_locks(&mut self, mask: LockMask, owner_died: bool) {
        let now = monotonic_ns();
        for i in indices(mask) {
            let slot = &mut self.slots[i];
            if let Some(holder) = slot.holder.take() {
                let held = u64::try_from(now - holder.since_ns).unwrap_or(0);
                slot.stats.max_hold_ns = slot.stats.max_hold_ns.max(held);
            }
            if owner_died {
                slot.owner_died = true;
                slot.stats.owner_died += 1;
            }
        }
        self.held &= !mask;
        self.hand_off(mask);
    }

    /// Grants, in arrival order, the waiters that the locks of `freed` (just
    /// released, or no longer wanted by a waiter that left) let through.
    ///
    /// Only locks of `freed` can have become available, so the scan stops as
    /// soon as each of them is held again or wanted by a waiter that is still
    /// queued ahead of the rest.
    fn hand_off(&mut self, freed: LockMask) {
        if self.gone {
            return;
        }
        let mut blocked: LockMask = 0;
        let mut position = 0;
        while freed & !(self.held | blocked) != 0 {
            let Some(mask) = self.queue.get(position).map(|w| w.mask) else {
                break;
            };
            if mask & (self.held | blocked) != 0 {
                blocked |= mask;
                position += 1;
                continue;
            }
            let Some(waiter) = self.forget_waiter_at(position) else {
                return;
            };
            let owner_died = self.grant(waiter.owner, mask, &waiter.who);
            *waiter.grant.access_mut(self) = Some(Grant { owner_died });
            self.wake(waiter);
        }
    }

    /// Wakes `waiter`, which must have been granted or the card be gone,
    /// once the mutex is released: every wake-up the driver sends goes
    /// through here.
    fn wake(&mut self, waiter: Arc<Waiter>) {
        *waiter.notified.access_mut(self) = true;
        self.wakeups.push(waiter);
    }

    /// Decides whether a queued waiter is done (see [`wait::settle`]).
    fn settle(
        &self,
        waiter: &Waiter,
        interrupted: bool,
        timed_out: bool,
    ) -> Option<Result<Grant, AcquireError>> {
        let settled = wait::settle(
            *waiter.grant.access(self),
            self.gone,
            interrupted,
            timed_out,
        )?;
        Some(settled.map_err(|ended| match ended {
            Ended::Gone => AcquireError::Gone,
            Ended::Interrupted => AcquireError::Interrupted,
            Ended::TimedOut => AcquireError::TimedOut {
                holder_pid: self.holder_pid(waiter.mask),
            },
        }))
    }

    fn record_wait(&mut self, mask: LockMask, waited_ns: u64) {
        for i in indices(mask) {
            let stats = &mut self.slots[i].stats;
            stats.contended += 1;
            stats.total_wait_ns = stats.total_wait_ns.saturating_add(waited_ns);
            stats.max_wait_ns = stats.max_wait_ns.max(waited_ns);
        }
    }

    /// Counts a wake-up that the driver sent to `waiter` without a grant.
    fn count_spurious(&mut self, waiter: &Waiter) {
        let woken_by_driver = *waiter.notified.access(self);
        if woken_by_driver && waiter.grant.access(self).is_none() && !self.gone {
            for i in indices(waiter.mask) {
                self.slots[i].stats.spurious_wakeups += 1;
            }
        }
    }
}

#[cfg(CONFIG_KUNIT)]
#[path = "../tests/kunit/arbiter_tests.rs"]
mod kunit;

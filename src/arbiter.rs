// SPDX-License-Identifier: GPL-2.0

//! The arbiter core: the locks of one card, owned by open files.
//!
//! A card has [`LOCK_COUNT`] locks. A request names a set of them (a bit
//! mask) and is granted when all of them are free and no earlier waiter on
//! the card wants any of them, so requests are served in arrival order per
//! card and a request never holds some locks while it waits for others.
//!
//! Arrival order must never create a deadlock: a request does not wait
//! behind an earlier waiter that itself waits, directly or through other
//! waiters and their owners' locks, for a lock the requester's file holds.
//! Such a waiter cannot be granted before the requester releases, so
//! passing it costs it nothing ([`State::may_pass`]).
//!
//! Waiters sit in one queue per card, in arrival order. Each waiter sleeps on
//! its own condition variable: a release picks the waiters that can now be
//! granted, makes them the holders under the card's mutex and, once the
//! mutex is released, wakes exactly those ([`wait::Wakeups`]), or, under
//! the hand-off bound (below), the one sleeper that may take a lock left
//! free. A waiter therefore wakes for a grant or a chance at one, and
//! waiters of other locks sleep on. `kernel::sync::CondVar` alone could not do this: it
//! re-queues a waiter at the tail on every wake-up and `notify_one` wakes
//! whoever is first in its own queue.
//!
//! The mutex guards short, bounded updates and is never held across a sleep
//! (a waiter's condition variable releases it while sleeping).
//!
//! A waiter that a stop, a freezer or ptrace takes out of its sleep (no
//! handler runs: the call is restarted) keeps its place: its request stays
//! queued, parked with its file, and the restarted call takes it up again,
//! granted meanwhile or not. Any other lock command of the file, or its
//! close, gives the parked place up ([`State::drop_parked`]).
//!
//! Pollers (UMD tries `LOCK_CTL` every millisecond and never blocks) are
//! not starved by blocking waiters that take turns: a try that fails while
//! others are queued for its locks leaves a poll place in the queue, kept
//! for [`POLL_LEASE_NS`] and renewed by the file's next try of the same
//! locks (any other lock command of the file gives it up: that poller has
//! moved on). A release that reaches a live place keeps the locks for the
//! poller (its next try gets them) until the lease ends; an expired place
//! is passed over, and a kept lock whose lease ends goes to the next
//! waiter, which sleeps no longer than the lease to see to it (its watch,
//! [`State::assign_watches`]). So a poller that stops polling delays
//! nobody by more than the lease.
//!
//! Every failed try is also noted in its file, whether or not it leaves
//! a poll place: a run of failed tries of one lock set, from its first
//! try while each next one comes within the lease, counted ([`Polling`],
//! at most [`POLLED_SETS`] per file, inline). The views show it (a lone
//! poller, with nobody queued, would be invisible otherwise); the grant
//! policy never reads it.
//!
//! Bounded barging (the kernel mutex's answer to the same tension): a lock
//! handed to the next waiter stands idle until that waiter runs (a
//! sleeper's wake-up and context switch) or tries again (a poller), while
//! the releaser, already running, could have used it. So while a
//! single-lock request has waited less than the card's hand-off bound `B`
//! ([`State::handoff_ns`], the module parameter `handoff_us`, per card in
//! debugfs) it reserves nothing ([`State::passable`]): a release leaves the
//! lock free and whoever runs first takes it, the releaser included. The
//! first sleeper of the lock is woken by that release to be one of those
//! who run ([`Waiter::candidate`]; one wake-up per release, as ever), and
//! takes the lock if it is still free when it runs, or sleeps on, its
//! place kept ([`State::take_if_free`]); a poller's next try takes it the
//! same way. Once the oldest waiter of the lock has waited `B`, it is
//! served strictly in arrival order: releases hand the lock to it (kept
//! for a poller) and nobody passes it. `B` = 0 is strict FIFO for
//! everyone. Lock sets stay strict: a request for several locks never
//! passes anyone, and nobody passes a waiter of a lock that a queued set
//! wants.
//!
//! Worst-case wait, among waiters that are neither stopped nor run a
//! signal handler. Let `n` be the number of requests queued ahead of the
//! waiter on the card when it queued, `H` the longest a lock is held once
//! its holder has it (a file holding one lock while it waits for another
//! holds it that long too), `D` the longest a granted lock waits for its
//! grantee to take it (a sleeper's wake-up; for a poller its next try,
//! never more than the lease `L` = [`POLL_LEASE_NS`]) and `p < L` the period
//! of a poller's tries. A waiter is passed by anyone until it has waited
//! `B`, then by nobody but the requests ahead of it, after the holder of
//! that moment (or, if the lock is free then, after it runs). So a
//! blocking waiter waits `W <= B + (n+1)(H+D)`, and a poller
//! `W <= B + (n+1)(H+D) + p`: the lock is then kept for it until its next
//! try. With `B` = 0 a blocking waiter waits `W <= (n+1)(H+D)`.
//!
//! Invariant kept by every operation: no queued waiter could be granted,
//! except waiters that were under the bound when their locks were freed
//! (the locks were left free for whoever runs first, and the first
//! sleeper among them was woken to be one of them). Locks only
//! become available when they are released or when a waiter wanting them
//! leaves the queue, and both cases run [`State::hand_off`] over exactly
//! those locks. A waiter may also become able to pass earlier ones when its
//! file gains a lock or when another holder queues; both run
//! [`State::let_holders_pass`]. A poll place that passes the bound while
//! its lock is free gets it at its next try, a sleeper when it runs; a
//! request refused because of it (a waiter that queues, a set that makes
//! it strict) hands the lock to it at once (kept for a poller, so that
//! the sleeper behind it has a lease to watch).

use crate::fifo::Fifo;
use crate::rust_ext::{
    task::{
        self as task_ext,
        signal_restarts_without_handler,
        TASK_COMM_LEN, //
    },
    time::monotonic_ns, //
};
use crate::wait::{
    self,
    DefersWakeups,
    Ended,
    Sleeper,
    Wait,
    WakeMutex,
    Wakeups,
    Woken, //
};
use core::sync::atomic::{
    AtomicBool,
    AtomicU64,
    Ordering, //
};
use kernel::{
    new_condvar,
    new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        CondVar,
        LockedBy, //
    },
    task::Task, //
};

/// Number of locks per card.
pub(crate) const LOCK_COUNT: usize = 64;

/// How long a failed try keeps its poll place, renewed by each try: well
/// above UMD's 1 ms polling period, even when a loaded machine (or an
/// emulator) stretches that period several times.
pub(crate) const POLL_LEASE_NS: i64 = 20_000_000;

/// The hand-off bound `B` a card starts with, from the module parameter
/// `handoff_us` (microseconds; 0 is strict FIFO).
pub(crate) fn handoff_ns_of_us(us: u32) -> i64 {
    i64::from(us) * 1000
}

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

/// The identity of a lock owner: one open file description.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct OwnerId(u64);

impl OwnerId {
    /// The number of the owner, unique on its card (ids only grow), as the
    /// file's fdinfo shows it.
    pub(crate) fn number(self) -> u64 {
        self.0
    }
}

/// Which owners a reset of the card fenced (RESET_DEVICE, src/reset.rs):
/// every owner that existed when the last reset began, but the one that
/// reset it. Owner ids only grow, so this is two numbers, and a later reset
/// by an owner created after this one fences this one's survivor too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fence {
    /// Owners with a lower id existed before the last reset.
    floor: u64,
    /// The owner that reset the card, still valid.
    survivor: u64,
}

impl Fence {
    /// Whether the file `id` was fenced: every command on it is `ENODEV`.
    pub(crate) fn is_stale(&self, id: OwnerId) -> bool {
        id.0 < self.floor && id.0 != self.survivor
    }
}

/// Whether the card is gone and the last reset's [`Fence`], readable
/// without the card's mutex (every command checks them first, and page
/// faults check the fence). Written under the mutex by the two operations
/// that change them, after the state they mirror.
///
/// A reader racing with a reset may see the fence before or after it, as
/// it would by taking the mutex just before or just after the reset did;
/// what the reset takes away is revoked after the fence is set, whatever
/// the racing command saw. The survivor is stored before the floor and
/// read after it, so a reader that sees a new floor sees its survivor too:
/// the file that reset the card is never refused by its own fence.
struct Refusals {
    gone: AtomicBool,
    floor: AtomicU64,
    survivor: AtomicU64,
}

impl Refusals {
    fn new() -> Self {
        let fence = Fence::default();
        Self {
            gone: AtomicBool::new(false),
            floor: AtomicU64::new(fence.floor),
            survivor: AtomicU64::new(fence.survivor),
        }
    }

    fn set_fence(&self, fence: Fence) {
        self.survivor.store(fence.survivor, Ordering::Release);
        self.floor.store(fence.floor, Ordering::Release);
    }

    fn set_gone(&self) {
        self.gone.store(true, Ordering::Release);
    }

    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    fn fence(&self) -> Fence {
        let floor = self.floor.load(Ordering::Acquire);
        let survivor = self.survivor.load(Ordering::Acquire);
        Fence { floor, survivor }
    }
}

/// A lock owner (one open file description) and what it holds and waits
/// for on its card.
#[derive(Clone)]
pub(crate) struct Owner {
    id: OwnerId,
    record: Arc<OwnerRecord>,
}

impl Owner {
    /// The owner's identity, which the TLB windows and the openers' list
    /// record.
    pub(crate) fn id(&self) -> OwnerId {
        self.id
    }
}

/// What an owner holds and how many of its requests are queued, so that
/// neither needs a scan of the card; and its parked requests.
struct OwnerRecord {
    counts: LockedBy<OwnerCounts, State>,
}

#[derive(Default)]
struct OwnerCounts {
    held: LockMask,
    queued: u32,
    /// Requests whose call was stopped and will be restarted: still
    /// queued (or granted meanwhile), to be taken up by the restarted call.
    /// Emptied at the latest when the file closes, which breaks the cycle
    /// of references between a parked waiter and its owner.
    parked: KVec<Arc<Waiter>>,
    /// The file's runs of failed tries, for the views only: what a poller
    /// waits for is otherwise invisible when nobody else is queued (its
    /// failed try then leaves no poll place). Inline, so that a try never
    /// allocates for it, and bounded: [`POLLED_SETS`] entries.
    polling: [Polling; POLLED_SETS],
}

/// How many lock sets one file's failed tries are remembered for
/// ([`Polling`]). A file usually polls one lock at a time (UMD's `lock()`
/// tries `LOCK_CTL` every millisecond in the thread that waits); one whose
/// threads poll more sets at once shows those it tried last.
pub(crate) const POLLED_SETS: usize = 4;

/// A file's run of failed tries of one lock set: since its first failed
/// try, as long as each next try comes within the card's poll lease. Ended
/// by a grant of one of its locks to the file (the poller got it), by the
/// file's close, or by a lease without a try (the poller gave up). Only
/// the views read it: the grant policy never does.
#[derive(Default)]
struct Polling {
    /// The locks tried; 0 for an entry never used.
    mask: LockMask,
    /// Who tried last.
    who: Option<Requester>,
    /// The first failed try of the run.
    since_ns: i64,
    /// When the run ends without another try: the last try plus the poll
    /// lease it was made under.
    until_ns: i64,
    /// Failed tries in the run.
    tries: u64,
}

impl Polling {
    /// Whether the run goes on at `now` and is one of lock `mask`'s.
    fn is_live_for(&self, mask: LockMask, now: i64) -> bool {
        self.mask & mask != 0 && self.until_ns > now
    }
}

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
    /// Returns of a waiter from its sleep that found nothing to act on (no
    /// grant, signal or deadline, the card still there) after a wake-up
    /// sent to it or its timer fired early: a waiter woken for nothing.
    /// A release wakes only the waiter it grants to, or under the hand-off
    /// bound the first sleeper of a lock it leaves free, which is not
    /// counted when a caller that passed it took the lock first: it was
    /// woken to try, and tried. So this stays 0.
    /// Wake-ups that were not sent to the waiter are not counted
    /// ([`Woken::Stray`]: a mutex's deferred wake-up meant for an earlier
    /// sleep of the same task).
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

/// The locks of one owner ([`Arbiter::holdings`]): `(index, nanoseconds)`
/// pairs, lowest index first.
pub(crate) struct OwnerLocks {
    /// Held, and for how long.
    pub(crate) held: KVec<(usize, u64)>,
    /// Wanted by a queued request, and for how long it has waited.
    pub(crate) waiting: KVec<(usize, u64)>,
    /// Tried and not got, the tries going on ([`Polling`]): `(index,
    /// nanoseconds since the run's first try, failed tries)`.
    pub(crate) polling: KVec<(usize, u64, u64)>,
}

/// A file that polls a lock ([`Arbiter::pollers`]): its run of failed
/// tries goes on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Poller {
    /// The pid of the process that tried last, in the reader's pid
    /// namespace (0 if not visible there, or exited).
    pub(crate) pid: u32,
    /// Its comm when it tried.
    pub(crate) comm: [u8; TASK_COMM_LEN],
    /// Since the run's first failed try, in nanoseconds.
    pub(crate) polling_ns: u64,
    /// Failed tries in the run.
    pub(crate) tries: u64,
}

/// The holder of a lock. Its file's [`Owner`] is not kept: whatever
/// releases the lock has it at hand.
struct Holder {
    owner: OwnerId,
    who: Requester,
    since_ns: i64,
}

#[derive(Default)]
struct Slot {
    holder: Option<Holder>,
    owner_died: bool,
    /// Queued requests wanting this lock, poll places included.
    waiters: u32,
    /// Of those, poll places: not sleeping waiters, so not shown as such.
    polls: u32,
    /// Of those, requests for several locks: while there is one, the poll
    /// places of this lock are not passed over (sets stay strict).
    sets: u32,
    stats: LockStats,
}

impl Slot {
    /// Makes `owner` the holder from `now` on; whether the lock had an
    /// owner-died mark, which this consumes.
    fn hold(&mut self, owner: OwnerId, who: Requester, now: i64) -> bool {
        self.holder = Some(Holder {
            owner,
            who,
            since_ns: now,
        });
        core::mem::take(&mut self.owner_died)
    }
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
    owner: Owner,
    mask: LockMask,
    who: Requester,
    /// When the request queued, which a restarted call keeps.
    queued_ns: i64,
    /// Set, under the card's mutex, by the release that grants the request.
    grant: LockedBy<Option<Grant>, State>,
    /// For a poll place (a failed try, nobody sleeping on it): when its
    /// lease ends.
    lease: LockedBy<Option<i64>, State>,
    /// For a sleeping waiter that watches a lock kept for a poller: when
    /// that lease ends, by which it wakes to hand the lock on.
    watch: LockedBy<Option<i64>, State>,
    /// For a sleeping waiter under the bound: a release left its locks
    /// free and woke it to take them ([`State::hand_off`]); it does when
    /// it runs, unless a caller that passed it took them first
    /// ([`State::take_if_free`]).
    candidate: LockedBy<bool, State>,
    /// Set by every wake-up sent to this waiter ([`Sleeper::wake`]), taken
    /// when it returns from a sleep: a return without it was not a
    /// wake-up sent to it ([`Woken::Stray`]). Not under the card's mutex:
    /// wake-ups are sent after it is released.
    rung: AtomicBool,
}

impl Sleeper for Waiter {
    fn condvar(&self) -> &CondVar {
        &self.wake
    }

    fn wake(&self) {
        // Before the notification: the waiter reads it once woken.
        self.rung.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

struct State {
    gone: bool,
    /// The owners the last reset fenced.
    fence: Fence,
    /// Locks with a holder.
    held: LockMask,
    /// Locks that at least one queued waiter wants.
    wanted: LockMask,
    /// Waiters in arrival order.
    queue: Fifo<Arc<Waiter>>,
    /// One per lock, by index ([`LOCK_COUNT`]).
    slots: KVec<Slot>,
    next_owner: u64,
    /// Queued requests whose file holds at least one lock: the only ones
    /// that may pass earlier waiters ([`State::may_pass`]).
    waiting_holders: u32,
    /// Every poll place, queued or granted (its locks kept for its poller).
    polls: KVec<Arc<Waiter>>,
    /// Wake-ups to send when the mutex is released ([`wait::WakeGuard`]).
    wakeups: Wakeups<Waiter>,
    /// How long a failed try keeps its poll place ([`POLL_LEASE_NS`] on a
    /// card; tests that must not depend on the speed of the machine they
    /// run on choose one longer than themselves).
    poll_lease_ns: i64,
    /// The hand-off bound `B`, in nanoseconds: a poll place that has waited
    /// less is passed over ([`State::passable`]); 0 is strict FIFO.
    handoff_ns: i64,
}

impl Drop for State {
    /// The card's last reference is gone, so every file has closed and
    /// given its places up; should one not have (a test's owners), its
    /// places go with the card: they would keep their owner alive
    /// otherwise, through the owner's list of them.
    fn drop(&mut self) {
        let mut owners = KVec::new();
        let queued = Iterator::chain(self.queue.iter(), self.polls.iter()).map(|w| &w.owner);
        for owner in queued {
            if owners.push(owner.clone(), GFP_KERNEL).is_err() {
                break;
            }
        }
        for owner in owners.iter() {
            owner.record.counts.access_mut(self).parked.clear();
        }
    }
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
    state: WakeMutex<State>,
    /// `state`'s gone and fence, for the check every command makes.
    refusals: Refusals,
}

impl Arbiter {
    /// A card's locks, all free, whose poll places last `poll_lease_ns`
    /// and are passed over until they have waited `handoff_ns`.
    pub(crate) fn new(poll_lease_ns: i64, handoff_ns: i64) -> Result<impl PinInit<Self>> {
        // On the heap: 64 slots would take several KiB of the probing
        // task's stack while the initialiser is built.
        let mut slots = KVec::with_capacity(LOCK_COUNT, GFP_KERNEL)?;
        for _ in 0..LOCK_COUNT {
            slots.push(Slot::default(), GFP_KERNEL)?;
        }
        Ok(pin_init!(Self {
            state <- WakeMutex::new(new_mutex!(State {
                gone: false,
                fence: Fence::default(),
                held: 0,
                wanted: 0,
                queue: Fifo::new(),
                slots,
                next_owner: 1,
                waiting_holders: 0,
                polls: KVec::new(),
                wakeups: Wakeups::new(),
                poll_lease_ns,
                handoff_ns: handoff_ns.max(0),
            })),
            refusals: Refusals::new(),
        }))
    }

    /// A new owner, for a newly opened file.
    pub(crate) fn new_owner(&self) -> Result<Owner> {
        let record = Arc::new(
            OwnerRecord {
                counts: self.state.locked_by(OwnerCounts::default()),
            },
            GFP_KERNEL,
        )?;
        let mut state = self.state.lock();
        let id = OwnerId(state.next_owner);
        state.next_owner += 1;
        Ok(Owner { id, record })
    }

    /// Whether the card is gone.
    pub(crate) fn is_gone(&self) -> bool {
        self.refusals.is_gone()
    }

    /// How long a failed try keeps its poll place on the card, in
    /// milliseconds.
    pub(crate) fn poll_lease_ms(&self) -> u64 {
        u64::try_from(self.state.lock().poll_lease_ns / 1_000_000).unwrap_or(0)
    }

    /// Sets how long a failed try keeps its poll place (from the next try
    /// on; at least 1 ms).
    pub(crate) fn set_poll_lease_ms(&self, ms: u32) {
        self.state.lock().poll_lease_ns = i64::from(ms.max(1)) * 1_000_000;
    }

    /// The hand-off bound `B` of the card, in microseconds.
    pub(crate) fn handoff_us(&self) -> u64 {
        u64::try_from(self.state.lock().handoff_ns / 1000).unwrap_or(0)
    }

    /// Sets the hand-off bound `B` of the card (0: strict FIFO). A lower
    /// bound takes effect at once: the free locks of poll places that are
    /// now past it are kept for them.
    pub(crate) fn set_handoff_us(&self, us: u32) {
        let mut state = self.state.lock();
        state.handoff_ns = handoff_ns_of_us(us);
        let free = state.wanted & !state.held;
        if free != 0 {
            state.hand_off(free);
        }
    }

    /// Requests every lock of `mask` for `owner`.
    pub(crate) fn acquire(
        &self,
        owner: &Owner,
        mask: LockMask,
        who: Requester,
        wait: Wait,
        reentry: Reentry,
    ) -> Result<Acquired, AcquireError> {
        let mut state = self.state.lock();
        if state.gone || state.fence.is_stale(owner.id) {
            return Err(AcquireError::Gone);
        }
        let now = monotonic_ns();
        state.expire_polls(now);
        // A call restarted after a stop, or a poller's next try, takes up
        // its place, granted meanwhile or not; any other request of the
        // file gives its places up.
        let waiter = match state.take_parked(owner, mask) {
            Some(waiter) if wait == Wait::Try => {
                let result = state.try_place(&waiter, now);
                if matches!(result, Err(AcquireError::Busy { .. })) {
                    state.note_failed_try(owner, mask, &who, now);
                }
                return result;
            }
            Some(waiter) => {
                state.claim_place(&waiter);
                waiter
            }
            None => {
                state.drop_parked(owner);
                if reentry == Reentry::Refuse && state.held_by(owner) & mask != 0 {
                    return Err(AcquireError::Deadlock);
                }
                if !state.is_blocked(owner, mask, now) {
                    let owner_died = state.grant(owner, mask, who, now);
                    // Its file holds more now: its other queued requests,
                    // and those of files waiting on it, may pass more.
                    state.let_holders_pass();
                    return Ok(Acquired {
                        owner_died,
                        waited_ns: 0,
                    });
                }
                if wait.is_over(now) {
                    let holder_pid = state.holder_pid(mask);
                    if wait == Wait::Try {
                        // Shown whether or not others are queued.
                        state.note_failed_try(owner, mask, &who, now);
                    }
                    if wait == Wait::Try
                        && state.wanted & mask != 0
                        && state.held_by(owner) & mask == 0
                    {
                        // Others are queued for it: without a place this
                        // poller could fail for ever. Best effort: with no
                        // memory, it just fails this time.
                        if let Ok(place) = self.new_waiter(owner, mask, who, now) {
                            state.add_poll_place(place, now);
                        }
                    }
                    return Err(match wait {
                        Wait::Until(_) => AcquireError::TimedOut { holder_pid },
                        Wait::Try | Wait::Forever => AcquireError::Busy { holder_pid },
                    });
                }
                let waiter = self.new_waiter(owner, mask, who, now)?;
                state.enqueue(waiter.clone())?;
                waiter
            }
        };
        if state.has_unsent() {
            // Queueing let other waiters through (they no longer wait for
            // this file), or a parked place was given up: wake them before
            // this one sleeps.
            state = state.send_now();
        }

        let mut woken = None;
        let result = loop {
            if let Some(settled) = state.woke(&waiter, woken, wait) {
                break settled;
            }
            // A watcher wakes when the lease it watches ends, at the latest.
            let sleep = match (*waiter.watch.access(&state), wait) {
                (Some(end), Wait::Until(deadline)) => Wait::Until(end.min(deadline)),
                (Some(end), _) => Wait::Until(end),
                (None, wait) => wait,
            };
            // A wake-up sent before this point was for what the check above
            // just saw (a wake-up is decided under the mutex).
            waiter.rung.store(false, Ordering::Relaxed);
            // Wake-ups that looking decided (a lease that ended handed its
            // lock on) are sent first, with the mutex released: then look
            // again ([`Woken::Sent`]).
            let (relocked, slept) = state.sleep(&waiter.wake, sleep);
            state = relocked;
            // Woken, but not by a wake-up sent to this waiter: a deferred
            // wake-up of the card's mutex (or a futex) meant for an earlier
            // sleep of this task, or a stop signal taken back.
            let rung = waiter.rung.swap(false, Ordering::Acquire);
            woken = Some(match slept {
                Woken::Notified if !rung => Woken::Stray,
                slept => slept,
            });
        };

        let waited_ns = u64::try_from(monotonic_ns() - waiter.queued_ns).unwrap_or(0);
        match result {
            Ok(grant) if !state.gone && !state.fence.is_stale(owner.id) => {
                state.record_wait(mask, waited_ns);
                Ok(Acquired {
                    owner_died: grant.owner_died,
                    waited_ns,
                })
            }
            Ok(_) => {
                // Granted just before the card went away or its file was
                // fenced: give the locks back, to the next waiter.
                state.release_locks(owner, mask, false);
                Err(AcquireError::Gone)
            }
            // Stopped, frozen or trapped by ptrace: the call will be
            // restarted, and finds its place again.
            Err(AcquireError::Interrupted)
                if signal_restarts_without_handler() && state.park(&waiter) =>
            {
                Err(AcquireError::Interrupted)
            }
            Err(e) => {
                state.dequeue(&waiter);
                Err(e)
            }
        }
    }

    fn new_waiter(
        &self,
        owner: &Owner,
        mask: LockMask,
        who: Requester,
        queued_ns: i64,
    ) -> Result<Arc<Waiter>, AcquireError> {
        Arc::pin_init(
            pin_init!(Waiter {
                wake <- new_condvar!("tenstorrent_lock_waiter"),
                owner: owner.clone(),
                mask,
                who,
                queued_ns,
                grant: self.state.locked_by(None),
                lease: self.state.locked_by(None),
                watch: self.state.locked_by(None),
                candidate: self.state.locked_by(false),
                rung: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| AcquireError::NoMemory)
    }

    /// Releases every lock of `mask`, all or nothing. `EPERM` unless
    /// `owner` holds all of them.
    pub(crate) fn release(&self, owner: &Owner, mask: LockMask) -> Result {
        let mut state = self.state.lock();
        if state.gone {
            return Err(ENODEV);
        }
        state.drop_parked(owner);
        if state.held_by(owner) & mask != mask {
            return Err(EPERM);
        }
        state.release_locks(owner, mask, false);
        Ok(())
    }

    /// Undoes a grant of `mask` to `owner` whose caller could not be told:
    /// the locks are released, and the owner-died marks the grant consumed
    /// (`owner_died`) are put back for the next acquirer.
    pub(crate) fn undo(&self, owner: &Owner, mask: LockMask, owner_died: LockMask) {
        let mut state = self.state.lock();
        if state.held_by(owner) & mask != mask {
            return;
        }
        for i in indices(owner_died & mask) {
            state.slots[i].owner_died = true;
        }
        state.release_locks(owner, mask, false);
    }

    /// Releases every lock `owner` holds because its file is closing: the
    /// locks are marked "owner died" for their next acquirer.
    pub(crate) fn release_all(&self, owner: &Owner) {
        let mut state = self.state.lock();
        state.drop_parked(owner);
        state.end_polling(owner, LockMask::MAX);
        let mask = state.held_by(owner);
        if mask != 0 {
            state.release_locks(owner, mask, true);
        }
    }

    /// Whether `owner` holds lock `index`, and whether anyone does.
    pub(crate) fn test(&self, owner: &Owner, index: usize) -> Result<(bool, bool)> {
        let state = self.state.lock();
        if state.gone {
            return Err(ENODEV);
        }
        let holder = state.slots[index].holder.as_ref();
        Ok((
            holder.is_some_and(|h| h.owner == owner.id),
            holder.is_some(),
        ))
    }

    /// The state of lock `index`, as seen by `owner` (if any).
    pub(crate) fn query(&self, owner: Option<&Owner>, index: usize) -> Result<LockInfo> {
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
            held_by_caller: slot
                .holder
                .as_ref()
                .zip(owner)
                .is_some_and(|(h, owner)| h.owner == owner.id),
            held_ns: slot
                .holder
                .as_ref()
                .map_or(0, |h| u64::try_from(now - h.since_ns).unwrap_or(0)),
            owner_died: slot.owner_died,
            waiters: slot.waiters - slot.polls,
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

    /// What `owner` holds and waits for, for its file's fdinfo
    /// (src/views/fdinfo.rs): each lock it holds with how long, and each lock its
    /// queued requests want with how long the oldest of them has waited,
    /// lowest index first. As sysfs counts waiters, a poller's place (a
    /// failed try) is not a wait; a stopped call's place is.
    pub(crate) fn holdings(&self, owner: &Owner) -> Result<OwnerLocks> {
        let state = self.state.lock();
        let now = monotonic_ns();
        let mut locks = OwnerLocks {
            held: KVec::new(),
            waiting: KVec::new(),
            polling: KVec::new(),
        };
        for i in indices(state.held_by(owner)) {
            let since = state.slots[i].holder.as_ref().map_or(now, |h| h.since_ns);
            let ns = u64::try_from(now - since).unwrap_or(0);
            locks.held.push((i, ns), GFP_KERNEL)?;
        }
        // One pass, the queue being in arrival order: the first request of
        // the file found for a lock has waited longest for it.
        let mut seen: LockMask = 0;
        let mut found = KVec::new();
        let mine = state
            .queue
            .iter()
            .filter(|w| w.owner.id == owner.id && w.lease.access(&state).is_none());
        for w in mine {
            let ns = u64::try_from(now - w.queued_ns).unwrap_or(0);
            for i in indices(w.mask & !seen) {
                found.push((i, ns), GFP_KERNEL)?;
            }
            seen |= w.mask;
        }
        // Each lock of a run of tries that goes on; of two runs that want
        // one lock (sets tried by two threads), the older.
        let polling = &owner.record.counts.access(&state).polling;
        let mut polled: LockMask = 0;
        for p in polling.iter().filter(|p| p.until_ns > now) {
            polled |= p.mask;
        }
        for i in indices(polled) {
            let oldest = polling
                .iter()
                .filter(|p| p.is_live_for(bit(i), now))
                .min_by_key(|p| p.since_ns);
            if let Some(p) = oldest {
                let ns = u64::try_from(now - p.since_ns).unwrap_or(0);
                locks.polling.push((i, ns, p.tries), GFP_KERNEL)?;
            }
        }
        drop(state);
        // Lowest index first (at most 64 of them).
        for i in indices(seen) {
            if let Some(&entry) = found.iter().find(|(j, _)| *j == i) {
                locks.waiting.push(entry, GFP_KERNEL)?;
            }
        }
        Ok(locks)
    }

    /// The files among `owners` (the card's open files) that poll lock
    /// `index`: their run of failed tries of a set with that lock goes on
    /// ([`Polling`]; of a file's two runs with it, the older counts). How
    /// many, and the `max` that have polled longest, longest first. The
    /// pids are in the caller's pid namespace. Nothing of it allocates
    /// under the card's mutex.
    pub(crate) fn pollers(
        &self,
        index: usize,
        owners: &[Owner],
        max: usize,
    ) -> Result<(u32, KVec<Poller>)> {
        let mut shown: KVec<Poller> = KVec::with_capacity(max, GFP_KERNEL)?;
        let mut count = 0u32;
        let mask = bit(index);
        let state = self.state.lock();
        let now = monotonic_ns();
        for owner in owners {
            let polling = &owner.record.counts.access(&state).polling;
            let oldest = polling
                .iter()
                .filter(|p| p.is_live_for(mask, now))
                .min_by_key(|p| p.since_ns);
            let Some(p) = oldest else {
                continue;
            };
            count += 1;
            let poller = Poller {
                pid: p.who.as_ref().map_or(0, Requester::pid_for_caller),
                comm: p.who.as_ref().map_or([0; TASK_COMM_LEN], Requester::comm),
                polling_ns: u64::try_from(now - p.since_ns).unwrap_or(0),
                tries: p.tries,
            };
            // Longest first; within the capacity taken before the mutex,
            // a poller that has polled longer than the last shown takes
            // its place.
            let at = shown
                .iter()
                .position(|s| s.polling_ns < poller.polling_ns)
                .unwrap_or(shown.len());
            if at >= max {
                continue;
            }
            if shown.len() == max {
                shown.pop();
            }
            shown
                .insert_within_capacity(at, poller)
                .map_err(|_| ENOMEM)?;
        }
        Ok((count, shown))
    }

    /// The card is being reset by file `survivor`: every other file now
    /// open is fenced. Their queued requests leave the queue (those asleep
    /// wake with [`AcquireError::Gone`], a stopped call's or a poller's
    /// place is given up) and later requests fail with it; the locks they
    /// hold stay theirs until their files close (tt-kmd 2.10's rule: a
    /// reset frees no lock, so nobody is handed a lock whose holder may
    /// still be using the chip). Returns the fence, for the card's other
    /// resources.
    pub(crate) fn fence_all_but(&self, survivor: OwnerId) -> Fence {
        let mut state = self.state.lock();
        let fence = Fence {
            floor: state.next_owner,
            survivor: survivor.0,
        };
        state.fence = fence;
        self.refusals.set_fence(fence);
        let mut stale_places = KVec::new();
        for position in 0..state.queue.len() {
            let Some(waiter) = state.queue.get(position).cloned() else {
                break;
            };
            if !fence.is_stale(waiter.owner.id) {
                continue;
            }
            let parked = waiter
                .owner
                .record
                .counts
                .access(&state)
                .parked
                .iter()
                .any(|w| Arc::ptr_eq(w, &waiter));
            if parked {
                // Nobody sleeps on it; without memory it stays queued,
                // and is given up when its file's next call or close comes.
                let _ = stale_places.push(waiter, GFP_KERNEL);
            } else {
                state.wakeups.push(waiter);
            }
        }
        for place in stale_places.iter() {
            state.give_up_place(place);
        }
        fence
    }

    /// Whether file `id` was fenced by a reset.
    pub(crate) fn is_stale(&self, id: OwnerId) -> bool {
        self.refusals.fence().is_stale(id)
    }

    /// Whether the commands of file `id` are refused: the card is gone or
    /// a reset fenced the file. Every command asks first, so this takes no
    /// lock ([`Refusals`]).
    pub(crate) fn refuses(&self, id: OwnerId) -> bool {
        self.is_gone() || self.is_stale(id)
    }

    /// The card is going away: every waiter wakes with
    /// [`AcquireError::Gone`] and every later request fails with it.
    pub(crate) fn shut_down(&self) {
        let mut state = self.state.lock();
        state.gone = true;
        self.refusals.set_gone();
        for position in 0..state.queue.len() {
            let Some(waiter) = state.queue.get(position).cloned() else {
                break;
            };
            state.wakeups.push(waiter);
        }
    }
}

impl State {
    fn held_by(&self, owner: &Owner) -> LockMask {
        owner.record.counts.access(self).held
    }

    /// Whether a new request of `owner` for `mask` must wait: a lock of it
    /// is held, or an earlier waiter wants one and may not be passed.
    fn is_blocked(&self, owner: &Owner, mask: LockMask, now: i64) -> bool {
        if self.held & mask != 0 {
            return true;
        }
        let end = self.queue.len();
        self.wanted & mask != 0
            && !self.may_barge(mask, end, now)
            && !self.may_pass(owner, mask, end, now)
    }

    /// Whether `waiter`, queued, may be passed by a request for its lock
    /// that comes later: a request for a single lock (a poll place or a
    /// sleeper) that has waited less than the bound, of a lock no queued
    /// set wants. It is served strictly once it has waited the bound.
    ///
    /// Every waiter of a lock that no set wants asks for that lock alone,
    /// and the queue is in the order of `queued_ns`: if the first of them
    /// is passable, so are the others.
    fn passable(&self, waiter: &Waiter, now: i64) -> bool {
        self.handoff_ns > 0
            && waiter.mask.is_power_of_two()
            && self.slots[waiter.mask.trailing_zeros() as usize].sets == 0
            && now - waiter.queued_ns < self.handoff_ns
    }

    /// Whether a request for the single free lock `mask`, placed at
    /// `position` in the queue, may take it ahead of every waiter queued
    /// for it before that position: all of them are passable
    /// ([`Self::passable`]), which the first of them tells (they are in
    /// arrival order, so the first is the oldest).
    fn may_barge(&self, mask: LockMask, position: usize, now: i64) -> bool {
        if self.handoff_ns == 0 || !mask.is_power_of_two() {
            return false;
        }
        if self.slots[mask.trailing_zeros() as usize].sets != 0 {
            return false;
        }
        self.queue
            .iter()
            .take(position)
            .find(|w| w.mask & mask != 0)
            .is_none_or(|first| self.passable(first, now))
    }

    /// Whether a request of `owner` for `mask`, placed at `position` in the
    /// queue, may pass every earlier waiter that wants one of its locks:
    /// those waiters cannot be granted before `owner` releases.
    ///
    /// A waiter cannot be granted before `owner` releases when it wants a
    /// lock `owner` holds, or a lock an earlier such waiter wants (it is
    /// behind that one), or a lock held by the file of such a waiter, queued
    /// anywhere (that file is itself stuck, so it cannot be relied on to
    /// release). The scan repeats while that last rule finds new locks: at
    /// most once per lock. It may count a waiter as stuck that could in
    /// fact pass the stuck one ahead of it; the requester then passes it
    /// too, which never makes anyone wait for ever: the requester only
    /// passes waiters that wait for it.
    ///
    /// A request for a single lock also passes the waiters it may barge
    /// past ([`Self::passable`]).
    fn may_pass(&self, owner: &Owner, mask: LockMask, position: usize, now: i64) -> bool {
        let single = mask.is_power_of_two();
        let mut waits_for_owner = self.held_by(owner);
        loop {
            let mut stuck: LockMask = 0;
            let mut ahead: LockMask = 0;
            let mut grew = false;
            for (at, waiter) in self.queue.iter().enumerate() {
                if at == position {
                    continue;
                }
                if waiter.mask & (waits_for_owner | stuck) != 0 {
                    stuck |= waiter.mask;
                    let theirs = self.held_by(&waiter.owner) & !waits_for_owner;
                    if theirs != 0 {
                        waits_for_owner |= theirs;
                        grew = true;
                    }
                } else if at < position && !(single && self.passable(waiter, now)) {
                    ahead |= waiter.mask;
                }
            }
            if !grew {
                return ahead & mask == 0;
            }
        }
    }

    /// Records a failed try of `mask` by `who` in `owner`'s file, for the
    /// views: its run of tries of that set goes on (counted, its lease
    /// renewed) or a new one starts, in the entry tried least recently
    /// when the set has none (an unused or ended entry first). Never
    /// allocates; the grant policy never reads it.
    fn note_failed_try(&mut self, owner: &Owner, mask: LockMask, who: &Requester, now: i64) {
        let until_ns = now + self.poll_lease_ns;
        let polling = &mut owner.record.counts.access_mut(self).polling;
        let position = polling.iter().position(|p| p.mask == mask).or_else(|| {
            let oldest = polling.iter().enumerate().min_by_key(|(_, p)| p.until_ns);
            oldest.map(|(i, _)| i)
        });
        let Some(entry) = position.and_then(|i| polling.get_mut(i)) else {
            return;
        };
        if entry.mask != mask || entry.until_ns <= now {
            entry.mask = mask;
            entry.since_ns = now;
            entry.tries = 0;
        }
        entry.tries = entry.tries.saturating_add(1);
        entry.until_ns = until_ns;
        entry.who = Some(who.clone());
    }

    /// Ends `owner`'s runs of failed tries of any lock of `mask`.
    fn end_polling(&mut self, owner: &Owner, mask: LockMask) {
        let polling = &mut owner.record.counts.access_mut(self).polling;
        for entry in polling.iter_mut().filter(|p| p.mask & mask != 0) {
            *entry = Polling::default();
        }
    }

    fn holder_pid(&self, mask: LockMask) -> u32 {
        indices(mask & self.held)
            .find_map(|i| self.slots[i].holder.as_ref())
            .map_or(0, |h| h.who.pid_for_caller())
    }

    /// Makes `owner` the holder of every lock of `mask` from `now` on and
    /// consumes their owner-died marks, which it returns; counted as a
    /// grant.
    fn grant(&mut self, owner: &Owner, mask: LockMask, who: Requester, now: i64) -> LockMask {
        let owner_died = self.keep(owner, mask, who, now);
        self.count_grant(mask);
        owner_died
    }

    fn count_grant(&mut self, mask: LockMask) {
        for i in indices(mask) {
            self.slots[i].stats.acquisitions += 1;
        }
    }

    /// [`Self::grant`] without counting it: for locks kept for a poller,
    /// counted once it takes them ([`Self::claim_place`]).
    fn keep(&mut self, owner: &Owner, mask: LockMask, who: Requester, now: i64) -> LockMask {
        // Each lock's holder record refers to the requester's task: the
        // highest lock takes `who` itself, the others a reference more.
        let Some(last) = indices(mask).last() else {
            return 0;
        };
        let mut owner_died = 0;
        for i in indices(mask & !bit(last)) {
            if self.slots[i].hold(owner.id, who.clone(), now) {
                owner_died |= bit(i);
            }
        }
        if self.slots[last].hold(owner.id, who, now) {
            owner_died |= bit(last);
        }
        self.held |= mask;
        // Whoever polled these locks in this file has them now (or will,
        // with its next try, for locks kept for its place).
        self.end_polling(owner, mask);
        let counts = owner.record.counts.access_mut(self);
        let was_holding = counts.held != 0;
        counts.held |= mask;
        let queued = counts.queued;
        if !was_holding {
            self.waiting_holders += queued;
        }
        owner_died
    }

    /// Adds `waiter` at the back of the queue. Other waiters may now pass
    /// earlier ones that wait for this waiter's file ([`Self::may_pass`]):
    /// they are granted, to be woken when the mutex is released.
    ///
    /// A free lock of the waiter that poll places want was left free for
    /// them (or one of them is past the bound and its poller has not tried
    /// yet): now that someone waits behind them, or a set makes them
    /// strict, the first that may no longer be passed gets it, kept for its
    /// poller, so that a sleeper behind it has a lease to watch.
    fn enqueue(&mut self, waiter: Arc<Waiter>) -> Result<(), AcquireError> {
        let mask = waiter.mask;
        let set = !mask.is_power_of_two();
        let owner = waiter.owner.clone();
        self.queue
            .push_back(waiter, GFP_KERNEL)
            .map_err(|_| AcquireError::NoMemory)?;
        for i in indices(mask) {
            let slot = &mut self.slots[i];
            slot.waiters += 1;
            if set {
                slot.sets += 1;
            }
        }
        self.wanted |= mask;
        let counts = owner.record.counts.access_mut(self);
        counts.queued += 1;
        if counts.held != 0 {
            self.waiting_holders += 1;
            self.let_holders_pass();
        }
        // Queued although a lock of it is free: a waiter ahead wants it
        // that may not be passed, or no longer (it passed the bound since
        // its lock was left free): it gets it now.
        let free = mask & !self.held;
        if free != 0 {
            self.hand_off(free);
        }
        if !self.polls.is_empty() {
            self.assign_watches();
        }
        Ok(())
    }

    fn forget_waiter_at(&mut self, position: usize) -> Option<Arc<Waiter>> {
        let waiter = self.queue.remove(position)?;
        let poll = waiter.lease.access(self).is_some();
        let set = !waiter.mask.is_power_of_two();
        for i in indices(waiter.mask) {
            let slot = &mut self.slots[i];
            slot.waiters -= 1;
            if poll {
                slot.polls -= 1;
            }
            if set {
                slot.sets -= 1;
            }
            if slot.waiters == 0 {
                self.wanted &= !bit(i);
            }
        }
        let counts = waiter.owner.record.counts.access_mut(self);
        counts.queued -= 1;
        if counts.held != 0 {
            self.waiting_holders -= 1;
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
        // A watcher that leaves passes its watch on.
        if waiter.watch.access_mut(self).take().is_some() {
            self.assign_watches();
        }
    }

    /// Releases the locks of `mask`, which `owner` holds.
    fn release_locks(&mut self, owner: &Owner, mask: LockMask, owner_died: bool) {
        let now = monotonic_ns();
        for i in indices(mask) {
            if let Some(holder) = self.slots[i].holder.take() {
                let held = u64::try_from(now - holder.since_ns).unwrap_or(0);
                let stats = &mut self.slots[i].stats;
                stats.max_hold_ns = stats.max_hold_ns.max(held);
            }
            if owner_died {
                let slot = &mut self.slots[i];
                slot.owner_died = true;
                slot.stats.owner_died += 1;
            }
        }
        self.held &= !mask;
        let counts = owner.record.counts.access_mut(self);
        let was_holding = counts.held != 0;
        counts.held &= !mask;
        if was_holding && counts.held == 0 {
            let queued = counts.queued;
            self.waiting_holders -= queued;
        }
        self.hand_off(mask);
    }

    /// Grants, in arrival order, the waiters that the locks of `freed` (just
    /// released, or no longer wanted by a waiter that left) let through.
    ///
    /// Only locks of `freed` can have become available, so the scan stops as
    /// soon as each of them is held again or wanted by a waiter that is still
    /// queued ahead of the rest. Waiters whose files hold locks may also
    /// pass earlier ones ([`Self::let_holders_pass`]).
    ///
    /// A waiter under the bound is passed over ([`Self::passable`]): it
    /// stays queued and blocks nobody. A poll place's lock goes to the next
    /// waiter; the first sleeper under the bound is woken and its lock
    /// stays free for whoever runs first, itself included. When only poll
    /// places want a lock, the scan stops for it at the first (the others
    /// are younger), so a release costs the same with a thousand pollers.
    fn hand_off(&mut self, freed: LockMask) {
        if self.gone {
            return;
        }
        if freed & self.wanted == 0 {
            // Nobody waits for them (the usual release): no clock read,
            // no scan of the queue.
            self.let_holders_pass();
            return;
        }
        let now = monotonic_ns();
        let mut blocked: LockMask = 0;
        // Locks left free for the poll places that want them.
        let mut left: LockMask = 0;
        let mut position = 0;
        while freed & !(self.held | blocked | left) != 0 {
            let Some(waiter) = self.queue.get(position) else {
                break;
            };
            let mask = waiter.mask;
            if mask & (self.held | blocked) != 0 {
                blocked |= mask;
                position += 1;
                continue;
            }
            if self.passable(waiter, now) {
                if waiter.lease.access(self).is_none() {
                    // A sleeper under the bound: the lock stays free for
                    // whoever runs first, and the sleeper is woken to be
                    // one of them (its wake-up is this release's).
                    if mask & left == 0 {
                        left |= mask;
                        let waiter = waiter.clone();
                        if !core::mem::replace(waiter.candidate.access_mut(self), true) {
                            self.wakeups.push(waiter);
                        }
                    }
                    position += 1;
                    continue;
                }
                let slot = &self.slots[mask.trailing_zeros() as usize];
                if slot.waiters == slot.polls {
                    left |= mask;
                }
                position += 1;
                continue;
            }
            let Some(waiter) = self.forget_waiter_at(position) else {
                return;
            };
            self.grant_waiter(waiter);
        }
        self.let_holders_pass();
    }

    /// Grants every queued request of a file that holds locks whose locks
    /// are free and that may pass the waiters ahead of it
    /// ([`Self::may_pass`]). Such a grant gives its file more locks, which
    /// may let others pass in turn, so the scan starts again after each.
    ///
    /// Only files that hold a lock can pass anyone: with none of them
    /// queued ([`State::waiting_holders`]) this costs nothing.
    fn let_holders_pass(&mut self) {
        if self.gone {
            return;
        }
        if self.waiting_holders == 0 {
            return;
        }
        let now = monotonic_ns();
        let mut position = 0;
        while self.waiting_holders > 0 {
            let Some(waiter) = self.queue.get(position) else {
                break;
            };
            let passes = waiter.mask & self.held == 0
                && self.held_by(&waiter.owner) != 0
                && self.may_pass(&waiter.owner, waiter.mask, position, now);
            if !passes {
                position += 1;
                continue;
            }
            let Some(waiter) = self.forget_waiter_at(position) else {
                return;
            };
            self.grant_waiter(waiter);
            position = 0;
        }
    }

    /// Keeps `waiter`, whose call was stopped and will be restarted, in
    /// its place for the restarted call ([`Self::take_parked`]). `false`
    /// when there is no memory to remember it: it then leaves the queue as
    /// an interrupted waiter does.
    fn park(&mut self, waiter: &Arc<Waiter>) -> bool {
        let counts = waiter.owner.record.counts.access_mut(self);
        if counts.parked.push(waiter.clone(), GFP_KERNEL).is_err() {
            return false;
        }
        // A stopped watcher would not wake to hand a kept lock on: another
        // waiter watches instead.
        if waiter.watch.access_mut(self).take().is_some() {
            self.assign_watches();
        }
        true
    }

    /// The place of `owner` for exactly `mask` (a stopped call's or a
    /// poller's), no longer parked.
    fn take_parked(&mut self, owner: &Owner, mask: LockMask) -> Option<Arc<Waiter>> {
        let parked = &mut owner.record.counts.access_mut(self).parked;
        let position = parked.iter().position(|w| w.mask == mask)?;
        parked.remove(position).ok()
    }

    /// Gives up the places of `owner` (of its stopped calls and its poll
    /// places): its file does something else than restarting or retrying
    /// them, or closes. A poller that moves on polls no more.
    fn drop_parked(&mut self, owner: &Owner) {
        loop {
            let place = owner.record.counts.access(self).parked.first().cloned();
            let Some(place) = place else {
                return;
            };
            self.give_up_place(&place);
        }
    }

    /// Takes `place` out of its owner's parked places and out of the poll
    /// places.
    fn forget_place(&mut self, place: &Arc<Waiter>) {
        let parked = &mut place.owner.record.counts.access_mut(self).parked;
        if let Some(position) = parked.iter().position(|w| Arc::ptr_eq(w, place)) {
            let _ = parked.remove(position);
        }
        if let Some(position) = self.polls.iter().position(|w| Arc::ptr_eq(w, place)) {
            let _ = self.polls.remove(position);
        }
    }

    /// Gives up a stopped call's place or a poll place. One still queued
    /// leaves the queue; one granted meanwhile gives its locks back (its
    /// caller was never told), with the owner-died marks it consumed.
    fn give_up_place(&mut self, place: &Arc<Waiter>) {
        self.forget_place(place);
        match *place.grant.access(self) {
            Some(grant) if self.held_by(&place.owner) & place.mask == place.mask => {
                for i in indices(grant.owner_died) {
                    self.slots[i].owner_died = true;
                }
                self.release_locks(&place.owner, place.mask, false);
            }
            Some(_) => {}
            None => self.dequeue(place),
        }
    }

    /// Adds a poll place for a try that just failed (`place`, a new
    /// waiter nobody sleeps on). Best effort: without memory there is none.
    fn add_poll_place(&mut self, place: Arc<Waiter>, now: i64) {
        let lease_end = now + self.poll_lease_ns;
        *place.lease.access_mut(self) = Some(lease_end);
        for i in indices(place.mask) {
            self.slots[i].polls += 1;
        }
        if self.enqueue(place.clone()).is_err() {
            for i in indices(place.mask) {
                self.slots[i].polls -= 1;
            }
            return;
        }
        if self.polls.push(place.clone(), GFP_KERNEL).is_err() || !self.park(&place) {
            self.give_up_place(&place);
        }
    }

    /// A try of the file that has `place` (for the same locks, taken out of
    /// its parked places): the locks if they were granted to the place
    /// meanwhile, or if they are free and nobody ahead of it that it may
    /// not pass wants them (a place passed over under the bound left them
    /// free), else `Busy`, the place staying with a new lease (a stopped
    /// call's place becomes a poll place).
    fn try_place(&mut self, place: &Arc<Waiter>, now: i64) -> Result<Acquired, AcquireError> {
        if place.grant.access(self).is_none() && place.mask & self.held == 0 {
            let position = self.queue.iter().position(|w| Arc::ptr_eq(w, place));
            if let Some(position) = position {
                let first = self
                    .queue
                    .iter()
                    .take(position)
                    .all(|w| w.mask & place.mask == 0);
                if first || self.may_barge(place.mask, position, now) {
                    return Ok(self.take_place(place, position, now));
                }
                // Its free locks are for waiters ahead that it may not
                // pass: they get them now.
                self.hand_off(place.mask & !self.held);
            }
        }
        if let Some(grant) = *place.grant.access(self) {
            self.claim_place(place);
            let waited_ns = u64::try_from(now - place.queued_ns).unwrap_or(0);
            self.record_wait(place.mask, waited_ns);
            return Ok(Acquired {
                owner_died: grant.owner_died,
                waited_ns,
            });
        }
        let holder_pid = self.holder_pid(place.mask);
        let lease_end = now + self.poll_lease_ns;
        let was_poll = place.lease.access_mut(self).replace(lease_end).is_some();
        if !was_poll {
            for i in indices(place.mask) {
                self.slots[i].polls += 1;
            }
            if self.polls.push(place.clone(), GFP_KERNEL).is_err() {
                self.give_up_place(place);
                return Err(AcquireError::Busy { holder_pid });
            }
        }
        if !self.park(place) {
            self.give_up_place(place);
        }
        Err(AcquireError::Busy { holder_pid })
    }

    /// The try of the file that has `place`, queued at `position` and
    /// free to take its locks, takes them.
    fn take_place(&mut self, place: &Arc<Waiter>, position: usize, now: i64) -> Acquired {
        let _ = self.forget_waiter_at(position);
        self.forget_place(place);
        *place.lease.access_mut(self) = None;
        let owner_died = self.grant(&place.owner, place.mask, place.who.clone(), now);
        // Its file holds more now: its other queued requests, and those of
        // files waiting on it, may pass more.
        self.let_holders_pass();
        let waited_ns = u64::try_from(now - place.queued_ns).unwrap_or(0);
        self.record_wait(place.mask, waited_ns);
        Acquired {
            owner_died,
            waited_ns,
        }
    }

    /// A blocking call takes up `place` (taken out of its file's parked
    /// places): a poll place becomes an ordinary waiter, and locks kept
    /// for it become a grant, counted now. One that was passed over may
    /// find its locks free: it takes them before it sleeps
    /// ([`Self::take_if_free`]) unless a waiter ahead that it may not pass
    /// wants them, which then gets them.
    fn claim_place(&mut self, place: &Arc<Waiter>) {
        if place.lease.access_mut(self).take().is_none() {
            return;
        }
        if let Some(position) = self.polls.iter().position(|w| Arc::ptr_eq(w, place)) {
            let _ = self.polls.remove(position);
        }
        if place.grant.access(self).is_some() {
            self.count_grant(place.mask);
        } else {
            for i in indices(place.mask) {
                self.slots[i].polls -= 1;
            }
        }
    }

    /// Gives up the poll places whose lease has ended: one still queued
    /// leaves the queue, locks kept for one go to the next waiters.
    fn expire_polls(&mut self, now: i64) {
        let mut position = 0;
        while let Some(place) = self.polls.get(position).cloned() {
            if place.lease.access(self).is_some_and(|end| end > now) {
                position += 1;
                continue;
            }
            self.give_up_place(&place);
        }
    }

    /// Gives each lock kept for a poller a watch: the first sleeping waiter
    /// queued for one of its locks wakes when the lease ends, at the
    /// latest, to hand it on ([`Self::expire_polls`] in [`Self::woke`]).
    fn assign_watches(&mut self) {
        let mut position = 0;
        while let Some(place) = self.polls.get(position).cloned() {
            position += 1;
            let (Some(_), Some(end)) = (*place.grant.access(self), *place.lease.access(self))
            else {
                continue;
            };
            let watcher = self
                .queue
                .iter()
                .find(|w| {
                    w.mask & place.mask != 0
                        && w.lease.access(self).is_none()
                        && !w
                            .owner
                            .record
                            .counts
                            .access(self)
                            .parked
                            .iter()
                            .any(|p| Arc::ptr_eq(p, w))
                })
                .cloned();
            let Some(watcher) = watcher else {
                continue;
            };
            let watch = watcher.watch.access_mut(self);
            if watch.is_none_or(|t| t > end) {
                *watch = Some(end);
                // To sleep again, with the watch's timeout.
                self.wakeups.push(watcher);
            }
        }
    }

    /// Grants a waiter just taken out of the queue, and wakes it once the
    /// mutex is released: every wake-up of a waiter of a card that is still
    /// there goes through here.
    ///
    /// A poll place is not woken (nobody sleeps on it): its locks are kept
    /// for its poller while its lease lasts; an expired one is passed over.
    fn grant_waiter(&mut self, waiter: Arc<Waiter>) {
        let now = monotonic_ns();
        if let Some(end) = *waiter.lease.access(self) {
            if end <= now {
                self.forget_place(&waiter);
                return;
            }
            let owner_died = self.keep(&waiter.owner, waiter.mask, waiter.who.clone(), now);
            *waiter.grant.access_mut(self) = Some(Grant { owner_died });
            self.assign_watches();
            return;
        }
        let owner_died = self.grant(&waiter.owner, waiter.mask, waiter.who.clone(), now);
        *waiter.grant.access_mut(self) = Some(Grant { owner_died });
        self.wakeups.push(waiter);
    }

    /// What a queued waiter makes of a return from its sleep (`woken`;
    /// `None` before its first sleep), waiting as `wait` says: done
    /// ([`Self::settle`]), or on it waits. A watcher whose watch is due
    /// hands on the locks kept for a poller whose lease ended, maybe to
    /// itself. A return that found nothing to act on, after a wake-up sent
    /// to the waiter or a timer that fired early, is counted as spurious
    /// ([`Self::count_spurious`]); a stray one ([`Woken::Stray`]) is not.
    fn woke(
        &mut self,
        waiter: &Waiter,
        woken: Option<Woken>,
        wait: Wait,
    ) -> Option<Result<Grant, AcquireError>> {
        let now = monotonic_ns();
        let watch = *waiter.watch.access(self);
        if watch.is_some_and(|end| end <= now) {
            *waiter.watch.access_mut(self) = None;
            self.expire_polls(now);
        }
        // A release that left the lock free woke it to take it; a waiter
        // that finds its locks free for any other reason takes them too.
        let candidate = core::mem::take(waiter.candidate.access_mut(self));
        self.take_if_free(waiter, now);
        // The sleep may have ended at the watch's time, not the deadline.
        let timed_out = woken == Some(Woken::Deadline) && wait.is_over(now);
        let settled = self.settle(waiter, woken == Some(Woken::Signal), timed_out);
        // A candidate that finds its lock taken by a caller that passed it
        // under the bound was woken to try, and tried.
        let sent = matches!(woken, Some(Woken::Notified | Woken::Early));
        if settled.is_none() && sent && watch.is_none() && !candidate {
            self.count_spurious(waiter);
        }
        settled
    }

    /// Grants the queued `waiter` its locks if they are free and nobody
    /// ahead of it that it may not pass wants them: a sleeper under the
    /// bound that a release woke with its lock left free
    /// ([`Self::hand_off`]), or a restarted call whose place was passed
    /// over meanwhile. Free locks that a waiter ahead may not be passed for
    /// go to that waiter instead.
    fn take_if_free(&mut self, waiter: &Waiter, now: i64) {
        if self.gone
            || self.fence.is_stale(waiter.owner.id)
            || waiter.grant.access(self).is_some()
            || waiter.mask & self.held != 0
        {
            return;
        }
        let Some(position) = self.queue.iter().position(|w| core::ptr::eq(&**w, waiter)) else {
            return;
        };
        let first = self
            .queue
            .iter()
            .take(position)
            .all(|w| w.mask & waiter.mask == 0);
        if !first && !self.may_barge(waiter.mask, position, now) {
            self.hand_off(waiter.mask);
            return;
        }
        let Some(waiter) = self.forget_waiter_at(position) else {
            return;
        };
        let owner_died = self.grant(&waiter.owner, waiter.mask, waiter.who.clone(), now);
        *waiter.grant.access_mut(self) = Some(Grant { owner_died });
        // Its file holds more now: its other queued requests, and those of
        // files waiting on it, may pass more.
        self.let_holders_pass();
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
            self.gone || self.fence.is_stale(waiter.owner.id),
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

    /// Counts a return of `waiter` from its sleep that found nothing to
    /// act on: no grant, no signal, no deadline, and the card still there,
    /// after a wake-up sent to it ([`Sleeper::wake`], whatever sent it) or
    /// a timer that fired early: the waiter ran for nothing. A stray
    /// wake-up ([`Woken::Stray`]) is the kernel's, not this lock's: a
    /// mutex's deferred wake-up may reach a task after it went on and fell
    /// asleep here (`include/linux/sched/wake_q.h`), which a busy card
    /// mutex makes common on a loaded machine.
    fn count_spurious(&mut self, waiter: &Waiter) {
        for i in indices(waiter.mask) {
            self.slots[i].stats.spurious_wakeups += 1;
        }
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/arbiter_tests.rs"]
mod kunit;

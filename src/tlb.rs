// SPDX-License-Identifier: GPL-2.0

//! TLB windows: the card's BAR windows, handed out like locks.
//!
//! A card has a fixed set of windows in a few size classes. Windows of one
//! class are interchangeable: a request names a size and gets the lowest
//! free window of that size. Windows are owned by open files and freed on
//! the last close, like locks; a request that waits is served in arrival
//! order within its class, and a free window goes straight to the longest
//! waiter of its class, which alone is woken. Waiting uses the same sleep
//! as the locks ([`crate::wait`]), so grants are never lost and deadlines
//! never end early.
//!
//! Invariant: a class has waiters only while none of its windows is free.

use crate::{
    arbiter::{
        Fence,
        OwnerId,
        Requester, //
    },
    chip::{
        layout::MAX_CLASSES,
        Layout,
        SizeClass, //
    },
    fifo::Fifo,
    rust_ext::{
        task::TASK_COMM_LEN,
        time::monotonic_ns, //
    },
    wait::{
        self,
        DefersWakeups,
        Ended,
        Sleeper,
        Wait,
        WakeMutex,
        Wakeups,
        Woken, //
    },
};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{
        Arc,
        CondVar,
        LockedBy, //
    },
};

/// Window ids are below this; FREE_TLB of a larger id is `EINVAL`.
pub(crate) const MAX_WINDOWS: u32 = 256;

/// The mmap offset spaces of a window: uncached and write-combined, each
/// followed by the window's offset in BAR0 (BAR4 windows come after BAR0's
/// size).
const MMAP_OFFSET_UC: u64 = 6 << 36;
const MMAP_OFFSET_WC: u64 = 7 << 36;

/// The window `id` of `layout` as ALLOCATE_TLB reports it.
fn window(layout: &Layout, id: usize) -> Option<Window> {
    let (class, position) = layout.locate(id)?;
    let c = &layout.classes()[class];
    let offset = c.base + position as u64 * c.size;
    Some(Window {
        id: id as u32,
        mmap_offset_uc: MMAP_OFFSET_UC + offset,
        mmap_offset_wc: MMAP_OFFSET_WC + offset,
        waited_ns: 0,
    })
}

/// An allocated window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) id: u32,
    pub(crate) mmap_offset_uc: u64,
    pub(crate) mmap_offset_wc: u64,
    /// Time spent waiting, in nanoseconds.
    pub(crate) waited_ns: u64,
}

/// Why a window was not allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlbError {
    /// No window class of that size.
    NoSuchSize,
    /// None free at once (or earlier waiters of the class are queued), and
    /// the request does not wait.
    Busy,
    /// None granted by the deadline, including one already past.
    TimedOut,
    Interrupted,
    Gone,
    NoMemory,
}

/// A class as sysfs shows it.
pub(crate) struct ClassInfo {
    pub(crate) class: SizeClass,
    pub(crate) free: u32,
    /// Windows a dma-buf exports (held or not).
    pub(crate) exported: u32,
    pub(crate) waiters: u32,
    /// Each holding process: pid in the reader's namespace, comm, windows.
    pub(crate) holders: KVec<(u32, [u8; TASK_COMM_LEN], u32)>,
}

struct Holder {
    owner: OwnerId,
    who: Requester,
}

#[pin_data]
struct Waiter {
    #[pin]
    wake: CondVar,
    owner: OwnerId,
    class: usize,
    who: Requester,
    /// The window granted, set under the pool's mutex.
    grant: LockedBy<Option<usize>, State>,
}

impl Sleeper for Waiter {
    fn condvar(&self) -> &CondVar {
        &self.wake
    }
}

struct State {
    gone: bool,
    /// The files the last reset fenced: they get no window.
    fence: Fence,
    /// The holder of each window, by id.
    holders: KVec<Option<Holder>>,
    /// Windows freed whose mappings are being revoked: neither held nor
    /// free, so nobody gets them before every mapping of them is gone.
    revoking: KVec<bool>,
    /// dma-bufs exporting each window: one still exported stays out of
    /// the pool when its holder frees it, until the last export goes.
    exports: KVec<u32>,
    /// The waiters of each class, in arrival order.
    queues: [Fifo<Arc<Waiter>>; MAX_CLASSES],
    /// Wake-ups to send when the mutex is released ([`wait::WakeGuard`]).
    wakeups: Wakeups<Waiter>,
}

impl DefersWakeups for State {
    type Waiter = Waiter;
    fn wakeups(&mut self) -> &mut Wakeups<Waiter> {
        &mut self.wakeups
    }
}

/// The TLB windows of one card.
#[pin_data]
pub(crate) struct TlbPool {
    layout: Layout,
    #[pin]
    state: WakeMutex<State>,
}

impl TlbPool {
    /// A pool of `layout`'s windows, all free.
    pub(crate) fn new(layout: Layout) -> Result<impl PinInit<Self>> {
        let mut holders = KVec::with_capacity(layout.total(), GFP_KERNEL)?;
        let mut revoking = KVec::with_capacity(layout.total(), GFP_KERNEL)?;
        let mut exports = KVec::with_capacity(layout.total(), GFP_KERNEL)?;
        for _ in 0..layout.total() {
            holders.push(None, GFP_KERNEL)?;
            revoking.push(false, GFP_KERNEL)?;
            exports.push(0, GFP_KERNEL)?;
        }
        Ok(pin_init!(Self {
            layout,
            state <- WakeMutex::new(new_mutex!(State {
                gone: false,
                fence: Fence::default(),
                holders,
                revoking,
                exports,
                queues: [Fifo::new(), Fifo::new(), Fifo::new()],
                wakeups: Wakeups::new(),
            })),
        }))
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Allocates the lowest free window of `size` bytes for `owner`.
    pub(crate) fn allocate(
        &self,
        owner: OwnerId,
        size: u64,
        who: Requester,
        wait: Wait,
    ) -> Result<Window, TlbError> {
        let class = self
            .layout
            .class_of_size(size)
            .ok_or(TlbError::NoSuchSize)?;
        let mut state = self.state.lock();
        if state.gone || state.fence.is_stale(owner) {
            return Err(TlbError::Gone);
        }
        if state.queues[class].is_empty() {
            if let Some(id) = state.lowest_free(&self.layout, class) {
                state.holders[id] = Some(Holder { owner, who });
                return window(&self.layout, id).ok_or(TlbError::Gone);
            }
        }
        let start = monotonic_ns();
        if wait.is_over(start) {
            return Err(match wait {
                Wait::Until(_) => TlbError::TimedOut,
                Wait::Try | Wait::Forever => TlbError::Busy,
            });
        }
        let waiter = Arc::pin_init(
            pin_init!(Waiter {
                wake <- new_condvar!("tenstorrent_tlb_waiter"),
                owner,
                class,
                who,
                grant: self.state.locked_by(None),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| TlbError::NoMemory)?;
        state.queues[class]
            .push_back(waiter.clone(), GFP_KERNEL)
            .map_err(|_| TlbError::NoMemory)?;

        let (mut state, result) = state.wait_until(&waiter.wake, wait, |state, woken| {
            state.settle(
                &waiter,
                woken == Some(Woken::Signal),
                woken == Some(Woken::Deadline),
            )
        });
        match result {
            Ok(id) if !state.gone && !state.fence.is_stale(owner) => {
                let mut window = window(&self.layout, id).ok_or(TlbError::Gone)?;
                window.waited_ns = u64::try_from(monotonic_ns() - start).unwrap_or(0);
                Ok(window)
            }
            Ok(id) => {
                // Granted as the card went or the file was fenced: the
                // caller never had it, nothing of it is mapped.
                state.holders[id] = None;
                state.hand_off(&self.layout, id);
                Err(TlbError::Gone)
            }
            Err(e) => {
                let queue = &mut state.queues[class];
                let position = queue.iter().position(|w| Arc::ptr_eq(w, &waiter));
                if let Some(position) = position {
                    // Nothing to hand on: the class has no free window,
                    // or this waiter would not have been waiting.
                    let _ = queue.remove(position);
                }
                Err(e)
            }
        }
    }

    /// Frees window `id` held by `owner`: `EINVAL` for an id no card has,
    /// `EPERM` when `owner` does not hold it. Without revocation: for the
    /// suites (the driver frees through [`TlbPool::free_revoking`]).
    #[cfg(tt_kunit)]
    pub(crate) fn free(&self, owner: OwnerId, id: u32) -> Result {
        self.free_revoking(owner, id, &|_| false, &|_| {})
    }

    /// Frees window `id` held by `owner` as [`TlbPool::free`] does, calling
    /// `revoke(id)` after the window stops being held (so no fault can map
    /// it any more, see [`TlbPool::with_held`]) and before anyone else can
    /// get it. `revoke` runs without the pool's mutex held. `EBUSY`, the
    /// window kept, while `mapped(id)` says it is mapped (asked with the
    /// pool's mutex held, under which windows are mapped).
    pub(crate) fn free_revoking(
        &self,
        owner: OwnerId,
        id: u32,
        mapped: &dyn Fn(usize) -> bool,
        revoke: &dyn Fn(usize),
    ) -> Result {
        if id >= MAX_WINDOWS {
            return Err(EINVAL);
        }
        let mut state = self.state.lock();
        if state.gone {
            return Err(ENODEV);
        }
        let id = id as usize;
        match state.holders.get(id) {
            Some(Some(holder)) if holder.owner == owner => {
                if mapped(id) {
                    return Err(EBUSY);
                }
                state.holders[id] = None;
                state.revoking[id] = true;
            }
            _ => return Err(EPERM),
        }
        drop(state);
        revoke(id);
        let mut state = self.state.lock();
        state.revoking[id] = false;
        state.hand_off(&self.layout, id);
        Ok(())
    }

    /// Frees every window of `owner`, whose file is closing. Without
    /// revocation: for the suites.
    #[cfg(tt_kunit)]
    pub(crate) fn free_all(&self, owner: OwnerId) {
        self.free_all_revoking(owner, &|_| {})
    }

    /// Frees every window of `owner` as [`TlbPool::free_revoking`] does.
    pub(crate) fn free_all_revoking(&self, owner: OwnerId, revoke: &dyn Fn(usize)) {
        self.free_held_revoking(&|holder| holder == owner, revoke);
    }

    /// The card is being reset (see [`crate::arbiter::Arbiter::fence_all_but`]):
    /// the fenced files' waiters leave the queues and wake with
    /// [`TlbError::Gone`], their windows are freed as
    /// [`TlbPool::free_revoking`] does, and they get no window again (tt-kmd
    /// 2.10 reclaims them too; the resetter keeps its own).
    pub(crate) fn fence(&self, fence: Fence, revoke: &dyn Fn(usize)) {
        let mut state = self.state.lock();
        state.fence = fence;
        for class in 0..MAX_CLASSES {
            let mut position = 0;
            while let Some(waiter) = state.queues[class].get(position).cloned() {
                if fence.is_stale(waiter.owner) {
                    let _ = state.queues[class].remove(position);
                    state.wakeups.push(waiter);
                } else {
                    position += 1;
                }
            }
        }
        drop(state);
        self.free_held_revoking(&|holder| fence.is_stale(holder), revoke);
    }

    /// Frees every window whose holder `freed_holder` picks, as
    /// [`TlbPool::free_revoking`] does.
    fn free_held_revoking(&self, freed_holder: &dyn Fn(OwnerId) -> bool, revoke: &dyn Fn(usize)) {
        let mut freed = [0u64; MAX_WINDOWS as usize / 64];
        let mut state = self.state.lock();
        for id in 0..state.holders.len() {
            let Some(word) = freed.get_mut(id / 64) else {
                // No layout has more windows than ids go.
                break;
            };
            if state.holders[id]
                .as_ref()
                .is_some_and(|h| freed_holder(h.owner))
            {
                state.holders[id] = None;
                state.revoking[id] = true;
                *word |= 1 << (id % 64);
            }
        }
        drop(state);
        let is_freed = |id: usize| {
            freed
                .get(id / 64)
                .is_some_and(|w| w & (1 << (id % 64)) != 0)
        };
        let count = self.layout.total();
        for id in (0..count).filter(|&id| is_freed(id)) {
            revoke(id);
        }
        let mut state = self.state.lock();
        for id in (0..count).filter(|&id| is_freed(id)) {
            state.revoking[id] = false;
            state.hand_off(&self.layout, id);
        }
    }

    /// Runs `f` under the pool's mutex if window `id` is held by `owner`
    /// and the card is not gone; `None` otherwise. While `f` runs, the
    /// window cannot be freed: what `f` maps or configures is revoked by
    /// the [`TlbPool::free_revoking`] that frees it.
    pub(crate) fn with_held<R>(
        &self,
        owner: OwnerId,
        id: usize,
        f: impl FnOnce() -> R,
    ) -> Option<R> {
        let state = self.state.lock();
        if state.gone {
            return None;
        }
        match state.holders.get(id) {
            Some(Some(holder)) if holder.owner == owner => Some(f()),
            _ => None,
        }
    }

    /// Counts a dma-buf export of window `id`, held by `owner` (`EPERM`
    /// otherwise): the window stays out of the pool until
    /// [`TlbPool::export_put`] for it, also once freed.
    pub(crate) fn export_get(&self, owner: OwnerId, id: usize) -> Result {
        let mut state = self.state.lock();
        match state.holders.get(id) {
            Some(Some(holder)) if holder.owner == owner && !state.gone => {}
            _ => return Err(EPERM),
        }
        let count = state.exports.get_mut(id).ok_or(EPERM)?;
        *count = count.checked_add(1).ok_or(EBUSY)?;
        Ok(())
    }

    /// An export of window `id` went: the last one gives a window its
    /// holder freed back to the pool, to the longest waiter first.
    pub(crate) fn export_put(&self, id: usize) {
        let mut state = self.state.lock();
        let Some(count) = state.exports.get_mut(id) else {
            return;
        };
        *count = count.saturating_sub(1);
        if *count == 0 && state.holders[id].is_none() && !state.revoking[id] {
            state.hand_off(&self.layout, id);
        }
    }

    /// Whether file `owner` holds window `id` (and the card is there).
    pub(crate) fn holds(&self, owner: OwnerId, id: usize) -> bool {
        self.with_held(owner, id, || ()).is_some()
    }

    /// Every window held, by id, with its holder.
    pub(crate) fn held_windows(&self) -> Result<KVec<(usize, OwnerId)>> {
        let state = self.state.lock();
        let mut out = KVec::new();
        for (id, holder) in state.holders.iter().enumerate() {
            if let Some(holder) = holder {
                out.push((id, holder.owner), GFP_KERNEL)?;
            }
        }
        Ok(out)
    }

    /// Whether anyone holds window `id`.
    pub(crate) fn is_held(&self, id: usize) -> bool {
        self.state
            .lock()
            .holders
            .get(id)
            .is_some_and(Option::is_some)
    }

    /// Whether a dma-buf exports window `id`.
    pub(crate) fn is_exported(&self, id: usize) -> bool {
        self.state.lock().exports.get(id).is_some_and(|c| *c > 0)
    }

    /// The holder of window `id` (pid in the caller's pid namespace and
    /// comm), if any.
    pub(crate) fn holder_of(&self, id: usize) -> Option<(u32, [u8; TASK_COMM_LEN])> {
        let state = self.state.lock();
        let holder = state.holders.get(id)?.as_ref()?;
        Some((holder.who.pid_for_caller(), holder.who.comm()))
    }

    /// The card is going away: every waiter wakes with [`TlbError::Gone`].
    pub(crate) fn shut_down(&self) {
        let mut state = self.state.lock();
        state.gone = true;
        for class in 0..MAX_CLASSES {
            for position in 0..state.queues[class].len() {
                let Some(waiter) = state.queues[class].get(position).cloned() else {
                    break;
                };
                state.wakeups.push(waiter);
            }
        }
    }

    /// The state of class `class`, with holder pids in the caller's pid
    /// namespace.
    pub(crate) fn class_info(&self, class: usize) -> Result<ClassInfo> {
        let c = *self.layout.classes().get(class).ok_or(EINVAL)?;
        let state = self.state.lock();
        let mut holders: KVec<(u32, [u8; TASK_COMM_LEN], u32)> = KVec::new();
        let mut free = 0;
        let mut exported = 0;
        for id in self.layout.ids(class) {
            if state.exports[id] > 0 {
                exported += 1;
            }
            let Some(holder) = &state.holders[id] else {
                // A window freed while exported is not free until its
                // exports go.
                if state.exports[id] == 0 && !state.revoking[id] {
                    free += 1;
                }
                continue;
            };
            let pid = holder.who.pid_for_caller();
            let comm = holder.who.comm();
            match holders.iter_mut().find(|(p, c, _)| *p == pid && *c == comm) {
                Some(entry) => entry.2 += 1,
                None => holders.push((pid, comm, 1), GFP_KERNEL)?,
            }
        }
        Ok(ClassInfo {
            class: c,
            free,
            exported,
            waiters: state.queues[class].len() as u32,
            holders,
        })
    }
}

impl State {
    fn lowest_free(&self, layout: &Layout, class: usize) -> Option<usize> {
        layout
            .ids(class)
            .find(|&id| self.holders[id].is_none() && !self.revoking[id] && self.exports[id] == 0)
    }

    /// Gives the class of window `id`, just freed, its lowest free window
    /// (this one, by the invariant) to the longest waiter of the class, if
    /// any.
    fn hand_off(&mut self, layout: &Layout, id: usize) {
        if self.gone {
            return;
        }
        let Some((class, _)) = layout.locate(id) else {
            return;
        };
        if self.queues[class].is_empty() {
            return;
        }
        let Some(waiter) = self.queues[class].remove(0) else {
            return;
        };
        let Some(granted) = self.lowest_free(layout, class) else {
            return;
        };
        self.holders[granted] = Some(Holder {
            owner: waiter.owner,
            who: waiter.who.clone(),
        });
        *waiter.grant.access_mut(self) = Some(granted);
        self.wakeups.push(waiter);
    }

    /// Decides whether a queued waiter is done (see [`wait::settle`]).
    fn settle(
        &self,
        waiter: &Waiter,
        interrupted: bool,
        timed_out: bool,
    ) -> Option<Result<usize, TlbError>> {
        let settled = wait::settle(
            *waiter.grant.access(self),
            self.gone || self.fence.is_stale(waiter.owner),
            interrupted,
            timed_out,
        )?;
        Some(settled.map_err(|ended| match ended {
            Ended::Gone => TlbError::Gone,
            Ended::Interrupted => TlbError::Interrupted,
            Ended::TimedOut => TlbError::TimedOut,
        }))
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/tlb_tests.rs"]
mod kunit;

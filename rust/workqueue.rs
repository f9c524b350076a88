// SPDX-License-Identifier: GPL-2.0

//! A delayed work item that its owner can take back.
//!
//! A module that queues delayed work must be able to cancel it before the
//! data it runs on, or the module's code, goes away (C drivers call
//! `cancel_delayed_work_sync()` in their remove path). Linux 7.3's
//! `kernel::workqueue::DelayedWork` can be queued but not cancelled, and
//! which reference to an `Arc` work item the queue holds is private to the
//! `kernel` crate. [`DelayedWork`] therefore owns its C `struct
//! delayed_work` and the reference the queue holds, and is initialised,
//! queued and cancelled through the C API (rust/workqueue_glue.c).
//!
//! Upstream change that removes this file: a `cancel_sync()` for `Arc`
//! items in `kernel::workqueue` (on `DelayedWork<T, ID>` with `T:
//! HasDelayedWork<T, ID>`), calling `cancel_delayed_work_sync()` and
//! releasing the reference the queue took in `enqueue_delayed` when the
//! work was still queued.

use core::{
    marker::PhantomData,
    ptr,
    sync::atomic::{
        AtomicPtr,
        Ordering, //
    },
};
use kernel::{
    bindings,
    prelude::*,
    sync::{
        Arc,
        LockClassKey, //
    },
    time::Jiffies,
    types::Opaque, //
};

/// A type with a [`DelayedWork`] of its own, run with a reference to the
/// value that holds it. `ID` tells several work items of one type apart.
pub(crate) trait DelayedWorkItem<const ID: u64 = 0>: Send + Sync + Sized {
    /// The work item, a field of `self`.
    fn delayed_work(&self) -> &DelayedWork<Self, ID>;

    /// Runs the work, given the reference the queue held.
    fn run(this: Arc<Self>);
}

/// A C `struct delayed_work` that runs [`DelayedWorkItem::run`] of the `T`
/// holding it, on the system workqueue.
///
/// # Invariants
///
/// `dwork` was initialised by `tt_delayed_work_init` with [`Self::run_raw`]
/// as its function. While it is queued, the queue holds a reference to the
/// `T` that contains this value, made by `Arc::into_raw` and stored in
/// `owner` before it was queued; that reference is taken back once, by the
/// run of the work or by [`cancel_delayed_work_sync`].
#[pin_data]
pub(crate) struct DelayedWork<T, const ID: u64 = 0> {
    #[pin]
    dwork: Opaque<bindings::delayed_work>,
    owner: AtomicPtr<T>,
    _owner: PhantomData<fn(Arc<T>)>,
}

// SAFETY: the C work item may be queued, cancelled and run from any thread;
// the workqueue core serialises that. `owner` is atomic, and only functions
// that require `T: DelayedWorkItem`, which is `Send + Sync`, make an
// `Arc<T>` of it.
unsafe impl<T, const ID: u64> Send for DelayedWork<T, ID> {}
// SAFETY: as above; `&DelayedWork` only queues and cancels, which the
// workqueue core allows concurrently.
unsafe impl<T, const ID: u64> Sync for DelayedWork<T, ID> {}

extern "C" {
    fn tt_delayed_work_init(
        dwork: *mut bindings::delayed_work,
        func: bindings::work_func_t,
        name: *const c_char,
        key: *mut bindings::lock_class_key,
        timer_name: *const c_char,
        timer_key: *mut bindings::lock_class_key,
    );
    fn tt_delayed_work_queue(dwork: *mut bindings::delayed_work, delay: Jiffies) -> bool;
}

impl<T: DelayedWorkItem<ID>, const ID: u64> DelayedWork<T, ID> {
    /// A work item not queued yet, whose work and timer belong to the
    /// lockdep classes given (see [`new_delayed_work`]).
    pub(crate) fn new(
        name: &'static CStr,
        key: Pin<&'static LockClassKey>,
        timer_name: &'static CStr,
        timer_key: Pin<&'static LockClassKey>,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            // INVARIANT: initialised with `run_raw`.
            dwork <- Opaque::ffi_init(|slot: *mut bindings::delayed_work| {
                // SAFETY: `slot` is valid for writes and pinned; the names
                // and keys are static; `run_raw` may be the function of
                // this work item (see there).
                unsafe {
                    tt_delayed_work_init(
                        slot,
                        Some(Self::run_raw),
                        name.as_char_ptr(),
                        key.as_ptr(),
                        timer_name.as_char_ptr(),
                        timer_key.as_ptr(),
                    )
                }
            }),
            owner: AtomicPtr::new(ptr::null_mut()),
            _owner: PhantomData,
        })
    }

    /// Whether `this` is within the memory of `owner`.
    fn is_field_of(&self, owner: &T) -> bool {
        let start = ptr::from_ref(owner).addr();
        let end = start + core::mem::size_of::<T>();
        let this = ptr::from_ref(self).addr();
        start <= this && this + core::mem::size_of::<Self>() <= end
    }

    /// The work function of every `DelayedWork<T, ID>`.
    ///
    /// # Safety
    ///
    /// `work` is the `work` of the `dwork` of a queued `DelayedWork<T, ID>`,
    /// which the workqueue core calls once per queueing.
    unsafe extern "C" fn run_raw(work: *mut bindings::work_struct) {
        // SAFETY: by the safety requirements `work` is the `work` field of
        // a `struct delayed_work`, the `dwork` field of a `Self`.
        let this = unsafe {
            let dwork = kernel::container_of!(work, bindings::delayed_work, work);
            &*kernel::container_of!(Opaque::cast_from(dwork), Self, dwork)
        };
        let owner = this.owner.load(Ordering::Relaxed);
        // SAFETY: by the type invariants the queue held a reference to the
        // owner, made by `Arc::into_raw` of `owner`; running the work takes
        // it back (a run is not cancelled any more).
        T::run(unsafe { Arc::from_raw(owner) });
    }
}

/// Queues the work item `ID` of `this` to run after `delay` jiffies on the
/// system workqueue (`schedule_delayed_work()`), holding a reference to
/// `this` until it runs or is cancelled. Nothing happens if it is queued
/// already (its delay stays as it was), nor if `T` returns a work item that
/// is not its own field.
pub(crate) fn enqueue_delayed<T: DelayedWorkItem<ID>, const ID: u64>(
    this: &Arc<T>,
    delay: Jiffies,
) {
    let work = this.delayed_work();
    // The queue's reference must keep the work item itself alive.
    if !work.is_field_of(this) {
        return;
    }
    let owner = Arc::into_raw(this.clone()).cast_mut();
    // Always the same value: the work item is a field of its owner. Queueing
    // orders this store before the run that reads it.
    work.owner.store(owner, Ordering::Relaxed);
    // SAFETY: `dwork` is initialised and pinned (type invariants); it is a
    // field of `this`, which the reference just made keeps alive while it
    // is queued.
    if !unsafe { tt_delayed_work_queue(work.dwork.get(), delay) } {
        // SAFETY: queued already, with a reference of its own: this one is
        // not the queue's, and `owner` came from `Arc::into_raw` above.
        drop(unsafe { Arc::from_raw(owner) });
    }
}

/// Cancels the work item `ID` of `this` and waits for a run of it in
/// progress to finish: when this returns, it is neither queued nor running
/// (also if it queued itself again while it ran). Returns whether it was
/// queued; the reference to `this` the queue held is then released. May
/// sleep.
pub(crate) fn cancel_delayed_work_sync<T: DelayedWorkItem<ID>, const ID: u64>(
    this: &Arc<T>,
) -> bool {
    let work = this.delayed_work();
    // SAFETY: `dwork` is initialised (type invariants); the call may sleep,
    // which its callers (remove paths) allow.
    let was_queued = unsafe { bindings::cancel_delayed_work_sync(work.dwork.get()) };
    if was_queued {
        // SAFETY: by the type invariants the queue held a reference made by
        // `Arc::into_raw` of `owner`; the work will not run now, so that
        // reference is ours to release, once.
        drop(unsafe { Arc::from_raw(work.owner.load(Ordering::Relaxed)) });
    }
    was_queued
}

/// A [`DelayedWork`] initialiser with lockdep classes of its own, named
/// `$name` (and `$name` `_timer` for its timer).
macro_rules! new_delayed_work {
    ($name:literal) => {
        $crate::rust_ext::workqueue::DelayedWork::new(
            ::kernel::c_str!($name),
            ::kernel::static_lock_class!(),
            ::kernel::c_str!(::core::concat!($name, "_timer")),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_delayed_work;

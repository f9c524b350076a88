// SPDX-License-Identifier: GPL-2.0

//! Cancelling a delayed work item, which `kernel::workqueue` cannot yet.
//!
//! A module that queues delayed work must be able to take it back before
//! the data it runs on, or the module's code, goes away (C drivers call
//! `cancel_delayed_work_sync()` in their remove path).

use kernel::{
    bindings,
    sync::Arc,
    workqueue::{
        HasDelayedWork,
        HasWork,
        Work,
        WorkItem, //
    },
};

/// Cancels the delayed work `ID` of `this` and waits for a run of it in
/// progress to finish: when this returns, it is neither queued nor running
/// (also if it queues itself again while it runs). Returns whether it was
/// queued; the reference to `this` the queue held is then released.
pub(crate) fn cancel_delayed_work_sync<T, const ID: u64>(this: &Arc<T>) -> bool
where
    T: WorkItem<ID, Pointer = Arc<T>> + HasDelayedWork<T, ID>,
{
    let ptr = Arc::as_ptr(this).cast_mut();
    // SAFETY: `ptr` points to a live `T`: `this` holds a reference to it.
    let work: *mut Work<T, ID> = unsafe { <T as HasWork<T, ID>>::raw_get_work(ptr) };
    // SAFETY: `work` points to the initialised `Work` of a live `T`.
    let work = unsafe { Work::raw_get(work) };
    // SAFETY: `HasDelayedWork` promises that this `work_struct` is the
    // `work` field of a `delayed_work`, which lives as long as the `T`.
    let delayed = unsafe { kernel::container_of!(work, bindings::delayed_work, work) };
    // SAFETY: `delayed` is a valid, initialised `delayed_work`; the call may
    // sleep, which its callers (remove paths) allow.
    let was_queued = unsafe { bindings::cancel_delayed_work_sync(delayed) };
    if was_queued {
        // SAFETY: an `Arc<T>` work item is queued with `Arc::into_raw` of a
        // reference, which `WorkItemPointer::run` would have taken back;
        // the work was queued and will not run now, so that reference is
        // ours to release, once.
        drop(unsafe { Arc::from_raw(ptr) });
    }
    was_queued
}

// SPDX-License-Identifier: GPL-2.0

//! dma-buf export of device memory.
//!
//! C header: [`include/linux/dma-buf.h`](srctree/include/linux/dma-buf.h).
//!
//! A range of a BAR (device memory without `struct page`) exported as a
//! dma-buf, for peer-to-peer importers (an RDMA NIC reading a card's
//! window). The export's owner, a [`DmaBufOwner`], lives as long as the
//! dma-buf and learns when its last reference goes. The exporter keeps its
//! live dma-bufs in a [`LiveDmaBufs`], which revokes them all when the
//! device goes: a dma-buf is taken off it by its release, here, before it
//! is freed, so the list never names a freed one. `dmabuf_glue.c` holds
//! the exporter's callbacks.
//!
//! Linux 7.3 has no dma-buf exporter in Rust; one in `kernel::dma_buf`
//! (an exporter trait over `dma_buf_ops` with a revoke) would remove this
//! file.

use core::ptr::NonNull;
use kernel::{
    error::{
        from_err_ptr,
        to_result, //
    },
    ffi::{
        c_int,
        c_void, //
    },
    new_mutex,
    prelude::*,
    sync::Mutex,
};

/// What an export's owner does when the dma-buf's last reference goes.
pub(crate) trait DmaBufOwner: Send + Sized + 'static {
    /// The list the dma-buf is on while it lives (see [`LiveDmaBufs`]).
    fn live(&self) -> &LiveDmaBufs;

    fn released(self);
}

/// An exporter's live dma-bufs.
///
/// # Invariants
///
/// Every dma-buf listed is alive: it is listed by
/// [`PendingExport::list_in`] while the export holds its reference, and its
/// release takes it off (under the mutex) before the dma-buf is freed.
#[pin_data]
pub(crate) struct LiveDmaBufs {
    #[pin]
    live: Mutex<KVec<DmaBufRef>>,
}

impl LiveDmaBufs {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            live <- new_mutex!(KVec::new()),
        })
    }

    /// Whether any dma-buf is live.
    pub(crate) fn any(&self) -> bool {
        !self.live.lock().is_empty()
    }

    /// Invalidates every live dma-buf's importers' mappings and refuses
    /// new ones: the memory goes away (the device is unbound).
    pub(crate) fn revoke_all(&self) {
        let live = self.live.lock();
        for dmabuf in live.iter() {
            // SAFETY: by the invariants the dma-buf is alive while listed,
            // and it stays listed while the mutex is held.
            unsafe { tt_dmabuf_revoke(dmabuf.0.as_ptr()) };
        }
    }

    /// Takes `dmabuf` off the list: it is being released.
    fn remove(&self, dmabuf: NonNull<c_void>) {
        let mut live = self.live.lock();
        if let Some(position) = live.iter().position(|d| d.0 == dmabuf) {
            let _ = live.remove(position);
        }
    }
}

extern "C" {
    fn tt_dmabuf_export(
        phys: u64,
        size: usize,
        owner: *mut c_void,
        release: unsafe extern "C" fn(*mut c_void, *mut c_void),
    ) -> *mut c_void;
    fn tt_dmabuf_reserve_fd() -> c_int;
    fn tt_dmabuf_install(fd: c_int, dmabuf: *mut c_void);
    fn tt_dmabuf_abandon(fd: c_int, dmabuf: *mut c_void);
    fn tt_dmabuf_abandon_fd(fd: c_int);
    fn tt_dmabuf_revoke(dmabuf: *mut c_void);
}

/// # Safety
///
/// `owner` comes from `KBox::into_raw` of a `KBox<T>` in [`export`], and
/// this is its one call (the release of the dma-buf `dmabuf`, which is
/// freed after it returns).
unsafe extern "C" fn release<T: DmaBufOwner>(owner: *mut c_void, dmabuf: *mut c_void) {
    // SAFETY: the caller's guarantee: the box is ours, once.
    let owner = unsafe { KBox::from_raw(owner.cast::<T>()) };
    if let Some(dmabuf) = NonNull::new(dmabuf) {
        // INVARIANT: off the list before the dma-buf is freed.
        owner.live().remove(dmabuf);
    }
    KBox::into_inner(owner).released();
}

/// A listed dma-buf (see [`LiveDmaBufs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DmaBufRef(NonNull<c_void>);

// SAFETY: a dma-buf may be revoked from any thread; the pointer is only
// used while the dma-buf lives (the invariants of `LiveDmaBufs`).
unsafe impl Send for DmaBufRef {}

/// An export with a descriptor reserved for it, not yet installed.
///
/// # Invariants
///
/// `dmabuf` holds the export's one reference, `fd` an unused descriptor.
pub(crate) struct PendingExport {
    dmabuf: NonNull<c_void>,
    fd: c_int,
}

impl PendingExport {
    /// The descriptor the caller gets with [`PendingExport::install`].
    pub(crate) fn fd(&self) -> i32 {
        self.fd
    }

    /// Lists the export's dma-buf in `live`, unless `gone()` (asked under
    /// the list's mutex) says the exporter is going: its revocation of the
    /// listed ones may have run already. `ENODEV` then.
    pub(crate) fn list_in(&self, live: &LiveDmaBufs, gone: impl FnOnce() -> bool) -> Result {
        let mut list = live.live.lock();
        if gone() {
            return Err(ENODEV);
        }
        // INVARIANT: the export holds its reference: the dma-buf lives, and
        // its release takes it off.
        list.push(DmaBufRef(self.dmabuf), GFP_KERNEL)?;
        Ok(())
    }

    /// Gives the dma-buf to the calling process as [`PendingExport::fd`].
    pub(crate) fn install(self) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: by the invariants: the reference goes to the descriptor.
        unsafe { tt_dmabuf_install(this.fd, this.dmabuf.as_ptr()) };
    }
}

impl Drop for PendingExport {
    /// Not installed: the descriptor goes back and the dma-buf is released.
    fn drop(&mut self) {
        // SAFETY: by the invariants; its owner is released now.
        unsafe { tt_dmabuf_abandon(self.fd, self.dmabuf.as_ptr()) };
    }
}

/// Exports `size` bytes of device memory at physical address `phys`,
/// owned by `owner` until the last reference goes, and reserves a
/// descriptor (close-on-exec) for it. On error `owner` has been released.
pub(crate) fn export<T: DmaBufOwner>(phys: u64, size: u64, owner: T) -> Result<PendingExport> {
    // Everything that can fail before the C side owns `owner` happens
    // first, and each failure gives `owner` back with `released()`: a
    // `WindowExport` dropped otherwise would keep its window out of the
    // pool for good.
    let (size, slot) = match (usize::try_from(size), KBox::<T>::new_uninit(GFP_KERNEL)) {
        (Ok(size), Ok(slot)) => (size, slot),
        (Err(_), _) => {
            owner.released();
            return Err(EINVAL);
        }
        (_, Err(e)) => {
            owner.released();
            return Err(e.into());
        }
    };
    let fd = {
        // SAFETY: reserving a descriptor of the calling process.
        let fd = unsafe { tt_dmabuf_reserve_fd() };
        to_result(fd.min(0)).map(|()| fd)
    };
    let fd = match fd {
        Ok(fd) => fd,
        Err(e) => {
            owner.released();
            return Err(e);
        }
    };
    let owner = KBox::into_raw(KBox::write(slot, owner));
    // SAFETY: `owner` is a boxed `T` that `release::<T>` takes back once;
    // the range is the caller's device memory.
    let dmabuf = unsafe { tt_dmabuf_export(phys, size, owner.cast(), release::<T>) };
    match from_err_ptr(dmabuf).and_then(|dmabuf| NonNull::new(dmabuf).ok_or(ENOMEM)) {
        // INVARIANT: the export's reference and the reserved descriptor.
        Ok(dmabuf) => Ok(PendingExport { dmabuf, fd }),
        Err(e) => {
            // SAFETY: the export failed (`tt_dmabuf_export` returns an
            // error pointer, never NULL, when it does not take `owner`), so
            // the box is still ours.
            let owner = unsafe { KBox::from_raw(owner) };
            KBox::into_inner(owner).released();
            // SAFETY: `fd` is reserved and not installed.
            unsafe { tt_dmabuf_abandon_fd(fd) };
            Err(e)
        }
    }
}

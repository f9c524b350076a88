// SPDX-License-Identifier: GPL-2.0

//! dma-buf export of device memory.
//!
//! C header: [`include/linux/dma-buf.h`](srctree/include/linux/dma-buf.h).
//!
//! A range of a BAR (device memory without `struct page`) exported as a
//! dma-buf, for peer-to-peer importers (an RDMA NIC reading a card's
//! window). The export's owner, a [`DmaBufOwner`], lives as long as the
//! dma-buf and learns when its last reference goes. `dmabuf_glue.c` holds
//! the exporter's callbacks.

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
    prelude::*,
};

/// What an export's owner does when the dma-buf's last reference goes.
pub(crate) trait DmaBufOwner: Send + Sized + 'static {
    fn released(self);
}

extern "C" {
    fn tt_dmabuf_export(
        phys: u64,
        size: usize,
        owner: *mut c_void,
        release: unsafe extern "C" fn(*mut c_void),
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
/// this is its one call (the dma-buf's release).
unsafe extern "C" fn release<T: DmaBufOwner>(owner: *mut c_void) {
    // SAFETY: the caller's guarantee: the box is ours, once.
    let owner = unsafe { KBox::from_raw(owner.cast::<T>()) };
    KBox::into_inner(owner).released();
}

/// A dma-buf, by the exporter: valid until its owner is released, so the
/// owner must forget it then (see [`export`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DmaBufRef(NonNull<c_void>);

// SAFETY: a dma-buf may be revoked from any thread; the pointer is only
// used while the dma-buf lives (the type's contract).
unsafe impl Send for DmaBufRef {}

impl DmaBufRef {
    /// Invalidates the importers' mappings and refuses new ones: the memory
    /// goes away (the device is unbound).
    ///
    /// # Safety
    ///
    /// The dma-buf's owner has not been released yet.
    pub(crate) unsafe fn revoke(self) {
        // SAFETY: the dma-buf is alive (the caller's guarantee).
        unsafe { tt_dmabuf_revoke(self.0.as_ptr()) }
    }
}

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

    pub(crate) fn dmabuf(&self) -> DmaBufRef {
        DmaBufRef(self.dmabuf)
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

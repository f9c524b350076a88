// SPDX-License-Identifier: GPL-2.0

//! DMA from file operations: page-backed DMA buffers userspace can map,
//! and user pages pinned and mapped for a device (given the
//! `&Device<Bound>` of a [`super::bound::WhileBound`]).
//!
//! [`DmaPages`] is a physically contiguous block from `dma_alloc_pages()`:
//! struct pages a fault handler can insert into a user mapping one by one
//! (coherent memory from `dma_alloc_coherent()` may be remapped and has no
//! such pages). [`PinnedRange`] is `pin_user_pages_fast(FOLL_LONGTERM)`
//! charged to `RLIMIT_MEMLOCK`, optionally DMA-mapped: to the pinner's mm
//! as VFIO charges (its `VmLck`) and to its user as io_uring and iommufd
//! charge (pins outlive the process: the user's limit holds for all its
//! processes together).
//!
//! Macros and static inlines are in `rust/dma_glue.c`.

use super::{
    device::device_ptr,
    mm::IoRange, //
};
use core::{
    ffi::c_void,
    ptr::NonNull, //
};
use kernel::{
    bindings,
    device::{
        Bound,
        Core,
        Device, //
    },
    dma::{
        Device as _,
        DmaMask, //
    },
    error::{
        from_err_ptr,
        to_result, //
    },
    ffi::{
        c_int,
        c_long,
        c_ulong, //
    },
    mm::Mm,
    page::PAGE_SHIFT,
    pci,
    prelude::*,
    sync::aref::ARef, //
};

// The C side's `struct page *` and `struct device *`, passed as untyped
// pointers: bindgen's layouts of both hold types Rust does not consider
// FFI-safe, and nothing here reads them through these pointers.
extern "C" {
    fn tt_page_to_pfn(page: *mut c_void) -> c_ulong;
    fn tt_dma_is_translated(dev: *mut c_void) -> bool;
    fn tt_dma_set_limits(dev: *mut c_void);
    fn tt_pin_user_pages(
        start: c_ulong,
        count: c_ulong,
        writable: bool,
        pages: *mut *mut c_void,
    ) -> c_long;
    fn tt_unpin_user_pages(pages: *mut *mut c_void, count: c_ulong, dirty: bool);
    fn tt_user_charge_locked_vm(count: c_ulong) -> *mut c_void;
    fn tt_user_uncharge_locked_vm(user: *mut c_void, count: c_ulong);
    fn tt_dma_map_pages(
        dev: *mut c_void,
        pages: *mut *mut c_void,
        count: c_ulong,
        to_device_only: bool,
    ) -> *mut c_void;
    fn tt_dma_unmap_pages(dev: *mut c_void, sgt: *mut c_void, to_device_only: bool);
    fn tt_dma_contiguous(sgt: *mut c_void, len: u64, start: *mut u64) -> bool;
    fn tt_dma_map_resource(dev: *mut c_void, phys: u64, len: u64, addr: *mut u64) -> c_int;
    fn tt_dma_unmap_resource(dev: *mut c_void, addr: u64, len: u64);
}

/// Sets up `pdev`'s DMA at probe: addresses of `bits` bits (streaming and
/// coherent), and no segment limits, so that a scattered range can be
/// mapped as one IOVA range.
pub(crate) fn set_dma_mask(pdev: &pci::Device<Core<'_>>, bits: u32) -> Result {
    let mask = DmaMask::try_new(bits)?;
    // SAFETY: probe runs before anything of this device allocates or maps
    // memory for DMA: nothing runs concurrently with this call.
    unsafe { pdev.dma_set_mask_and_coherent(mask)? };
    let dev: &Device<Core<'_>> = pdev.as_ref();
    // SAFETY: as above; `dev` is a valid device.
    unsafe { tt_dma_set_limits(device_ptr(dev).cast()) };
    Ok(())
}

/// Whether `dev`'s DMA is translated by an IOMMU (a DMA address is then an
/// IOVA, and a read-only mapping is enforced).
pub(crate) fn is_translated(dev: &Device<Bound>) -> bool {
    // SAFETY: `dev` is a valid, bound device.
    unsafe { tt_dma_is_translated(device_ptr(dev).cast()) }
}

/// A zeroed, physically contiguous block of pages allocated for a device's
/// DMA (`dma_alloc_pages()`, bidirectional), at an address the device can
/// reach (its DMA mask, or an IOVA).
///
/// # Invariants
///
/// `page` is the first of `len / PAGE_SIZE` pages returned by
/// `dma_alloc_pages(dev, len, &dma_address, DMA_BIDIRECTIONAL)`, freed only
/// in [`Drop`].
pub(crate) struct DmaPages {
    dev: ARef<Device>,
    page: NonNull<bindings::page>,
    len: usize,
    dma_address: u64,
}

// SAFETY: The pages are owned by this object and may be freed from any
// thread; nothing here is tied to the allocating thread.
unsafe impl Send for DmaPages {}
// SAFETY: Shared references only read the addresses.
unsafe impl Sync for DmaPages {}

/// The memory [`DmaPages::alloc`] of `len` bytes takes: `dma_alloc_pages()`
/// allocates a whole power-of-two block of pages (`get_order()`) unless a
/// CMA area serves it, so a 3-page buffer takes 4. Limits count this, not
/// what was asked for.
pub(crate) fn footprint(len: usize) -> usize {
    let pages = len.div_ceil(1 << PAGE_SHIFT);
    pages
        .checked_next_power_of_two()
        .unwrap_or(usize::MAX >> PAGE_SHIFT)
        << PAGE_SHIFT
}

impl DmaPages {
    /// Allocates `len` bytes (a multiple of the page size) for `dev`.
    /// `ENOMEM` when no such block is available.
    pub(crate) fn alloc(dev: &Device<Bound>, len: usize) -> Result<Self> {
        if len == 0 || len & ((1 << PAGE_SHIFT) - 1) != 0 {
            return Err(EINVAL);
        }
        let mut dma_address: bindings::dma_addr_t = 0;
        // SAFETY: `dev` is bound; the flags ask for no special zone (the
        // mask decides) and allow sleeping. `GFP_KERNEL_ACCOUNT` charges the
        // pages to the caller's memory cgroup (a CMA area, if one serves
        // the allocation, is not charged): a container's buffers count
        // against its memory limit, as its own pages do.
        let page = unsafe {
            bindings::dma_alloc_pages(
                device_ptr(dev),
                len,
                &mut dma_address,
                bindings::dma_data_direction::DMA_BIDIRECTIONAL,
                bindings::GFP_KERNEL_ACCOUNT | bindings::__GFP_NOWARN,
            )
        };
        let page = NonNull::new(page).ok_or(ENOMEM)?;
        // INVARIANT: allocated above.
        Ok(Self {
            dev: dev.into(),
            page,
            len,
            dma_address,
        })
    }

    /// The address the device reaches the first byte at.
    pub(crate) fn dma_address(&self) -> u64 {
        self.dma_address
    }

    /// The length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The memory the pages take: [`footprint`] of their length.
    pub(crate) fn footprint(&self) -> usize {
        footprint(self.len)
    }

    /// The page frame of the page at `offset` bytes, `None` past the end.
    pub(crate) fn pfn(&self, offset: usize) -> Option<usize> {
        if offset >= self.len {
            return None;
        }
        // SAFETY: by the type invariants `page` is a live page.
        let first = unsafe { tt_page_to_pfn(self.page.as_ptr().cast()) };
        Some(first as usize + (offset >> PAGE_SHIFT))
    }
}

impl Drop for DmaPages {
    fn drop(&mut self) {
        // SAFETY: by the type invariants these are the arguments of the
        // allocation, freed once.
        unsafe {
            bindings::dma_free_pages(
                device_ptr(&*self.dev),
                self.len,
                self.page.as_ptr(),
                self.dma_address,
                bindings::dma_data_direction::DMA_BIDIRECTIONAL,
            )
        };
    }
}

/// The DMA mapping of a [`PinnedRange`].
struct DmaMapping {
    dev: ARef<Device>,
    sgt: NonNull<c_void>,
}

/// Pages charged to the `locked_vm` of the user (`struct user_struct`) of
/// the task that charged them, the count io_uring and iommufd charge too,
/// with a reference on that user.
///
/// # Invariants
///
/// `user` is the reference `tt_user_charge_locked_vm(count)` returned, with
/// `count` pages charged to its `locked_vm`; both are given back only in
/// [`Drop`].
struct UserCharge {
    /// A `struct user_struct *`.
    user: NonNull<c_void>,
    count: c_ulong,
}

// SAFETY: The user reference and its charge may be given back from any
// thread (an atomic subtraction and `free_uid()`).
unsafe impl Send for UserCharge {}
// SAFETY: Shared references give access to nothing.
unsafe impl Sync for UserCharge {}

impl UserCharge {
    /// Charges `count` pages to the current task's user, within the task's
    /// `RLIMIT_MEMLOCK` unless it has `CAP_IPC_LOCK`; `ENOMEM` past it.
    fn new(count: c_ulong) -> Result<Self> {
        // SAFETY: No preconditions; the charge and reference it returns
        // are given back in [`Drop`].
        let user = from_err_ptr(unsafe { tt_user_charge_locked_vm(count) })?;
        // The glue returns `get_uid()`'s non-NULL pointer or an error.
        let user = NonNull::new(user).ok_or(EINVAL)?;
        // INVARIANT: charged above.
        Ok(Self { user, count })
    }
}

impl Drop for UserCharge {
    fn drop(&mut self) {
        // SAFETY: by the type invariants `count` pages are charged to this
        // referenced user; both are given back once.
        unsafe { tt_user_uncharge_locked_vm(self.user.as_ptr(), self.count) };
    }
}

/// User pages pinned for long-term DMA, charged to the pinning process's
/// `RLIMIT_MEMLOCK` (its mm's `locked_vm` and its user's), and maybe
/// mapped for a device.
///
/// # Invariants
///
/// `pages` holds the `count` pages `tt_pin_user_pages()` pinned (writable
/// unless `read_only`), each unpinned only in [`Drop`]; `count` pages are
/// charged to `mm`'s `locked_vm` and by `user`. `mapping`, if any, maps
/// these pages for its device, to the device only when `read_only`.
pub(crate) struct PinnedRange {
    /// `struct page *`s.
    pages: KVVec<*mut c_void>,
    read_only: bool,
    mm: ARef<Mm>,
    /// Dropped after [`Drop::drop`] has unpinned the pages: the user's
    /// charge never falls below what it keeps pinned.
    _user: UserCharge,
    mapping: Option<DmaMapping>,
}

// SAFETY: Pinned pages, the mm reference and the mapping may be released
// from any thread.
unsafe impl Send for PinnedRange {}
// SAFETY: Shared references only read the page frames and addresses.
unsafe impl Sync for PinnedRange {}

impl PinnedRange {
    /// Pins the `count` pages of the calling process from `start` (page
    /// aligned), writable unless `read_only`. `ENOMEM` past the caller's
    /// `RLIMIT_MEMLOCK` (unless it has `CAP_IPC_LOCK`), for its process or
    /// for its user's pins in all, `EFAULT` (or what GUP answers) when a
    /// page of the range cannot be pinned (nothing stays pinned then).
    pub(crate) fn pin(start: usize, count: usize, read_only: bool) -> Result<Self> {
        let current = kernel::current!();
        let mm: ARef<Mm> = ARef::from(&**current.mm().ok_or(EFAULT)?);
        let c_count = c_ulong::try_from(count)?;
        // Given back by its drop on every error below.
        let user = UserCharge::new(c_count)?;
        // SAFETY: `mm` is live (referenced above); charging takes its lock.
        to_result(unsafe { bindings::account_locked_vm(mm.as_raw(), c_count, true) })?;
        let uncharge = |mm: &Mm| {
            // SAFETY: `count` pages were charged to `mm` above.
            unsafe { bindings::account_locked_vm(mm.as_raw(), c_count, false) };
        };
        let mut pages: KVVec<*mut c_void> = match KVVec::with_capacity(count, GFP_KERNEL) {
            Ok(pages) => pages,
            Err(e) => {
                uncharge(&mm);
                return Err(e.into());
            }
        };
        // GUP pins fewer pages than asked when it meets a page it cannot
        // pin (unmapped, PROT_NONE, a PFN mapping) after pinning some: ask
        // again from there, which pins nothing and answers why (`EFAULT`
        // for a hole), so the caller learns the reason rather than an
        // `EINVAL` it cannot act on (tt-kmd answers `EINVAL`).
        while pages.len() < count {
            let done = pages.len();
            let at = start + (done << PAGE_SHIFT);
            let rest = count - done;
            // SAFETY: `pages` has room for `count` pointers, `done` of them
            // written: the call writes at most `rest` more after them. The
            // pages pinned are the current process's.
            let pinned = unsafe {
                tt_pin_user_pages(
                    at as c_ulong,
                    rest as c_ulong,
                    !read_only,
                    pages.as_mut_ptr().add(done),
                )
            };
            let error = match usize::try_from(pinned) {
                // GUP pins at least one page or answers an error; zero is
                // not expected, and is not progress.
                Ok(0) => EFAULT,
                Ok(pinned) => {
                    // SAFETY: the call wrote `pinned` entries after the
                    // first `done`, never more than the `rest` it was
                    // asked for.
                    unsafe { pages.inc_len(pinned.min(rest)) };
                    continue;
                }
                Err(_) => Error::from_errno(pinned as i32),
            };
            // SAFETY: these pages were pinned above and are unpinned once.
            unsafe { tt_unpin_user_pages(pages.as_mut_ptr(), done as c_ulong, false) };
            uncharge(&mm);
            return Err(error);
        }
        // INVARIANT: pinned and charged above.
        Ok(Self {
            pages,
            read_only,
            mm,
            _user: user,
            mapping: None,
        })
    }

    /// The number of pages.
    pub(crate) fn count(&self) -> usize {
        self.pages.len()
    }

    /// The physical address of the first page if the pages are physically
    /// contiguous.
    pub(crate) fn contiguous_physical(&self) -> Option<u64> {
        let mut pfns = self.pages.iter().map(|&page| {
            // SAFETY: by the type invariants each page is pinned.
            unsafe { tt_page_to_pfn(page) }
        });
        let first = pfns.next()?;
        let mut expected = first;
        for pfn in pfns {
            expected += 1;
            if pfn != expected {
                return None;
            }
        }
        Some((first as u64) << PAGE_SHIFT)
    }

    /// Maps the pages for `dev`'s DMA (once); returns the first DMA
    /// address if the mapping is one contiguous range, `EINVAL` otherwise.
    pub(crate) fn map_contiguous(&mut self, dev: &Device<Bound>) -> Result<u64> {
        if self.mapping.is_none() {
            // SAFETY: `pages` holds `count` pinned pages, kept pinned until
            // the mapping is gone ([`Drop`] unmaps first).
            let sgt = unsafe {
                tt_dma_map_pages(
                    device_ptr(dev).cast(),
                    self.pages.as_mut_ptr(),
                    self.pages.len() as c_ulong,
                    self.read_only,
                )
            };
            let sgt = from_err_ptr(sgt)?;
            // INVARIANT: mapped above, for `dev`, in the pins' direction.
            self.mapping = Some(DmaMapping {
                dev: dev.into(),
                sgt: NonNull::new(sgt).ok_or(ENOMEM)?,
            });
        }
        let mapping = self.mapping.as_ref().ok_or(EINVAL)?;
        let len = (self.pages.len() as u64) << PAGE_SHIFT;
        let mut start = 0u64;
        // SAFETY: `sgt` is a mapped table of ours.
        if unsafe { tt_dma_contiguous(mapping.sgt.as_ptr(), len, &mut start) } {
            Ok(start)
        } else {
            Err(EINVAL)
        }
    }

    /// Removes the DMA mapping, if any, while the caller keeps the device
    /// bound (dropping the range does it too, but unpinning must not run
    /// where the caller's locks are held: it takes the pinner's
    /// `mmap_lock`).
    pub(crate) fn unmap(&mut self) {
        if let Some(mapping) = self.mapping.take() {
            // SAFETY: by the type invariants the table maps these pages for
            // `mapping.dev` in this direction; unmapped once.
            unsafe {
                tt_dma_unmap_pages(
                    device_ptr(&*mapping.dev).cast(),
                    mapping.sgt.as_ptr(),
                    self.read_only,
                )
            };
        }
    }
}

impl Drop for PinnedRange {
    fn drop(&mut self) {
        self.unmap();
        let count = self.pages.len();
        // SAFETY: by the type invariants the pages are pinned and charged,
        // and no DMA mapping of them is left.
        unsafe {
            tt_unpin_user_pages(self.pages.as_mut_ptr(), count as c_ulong, !self.read_only);
            bindings::account_locked_vm(self.mm.as_raw(), count as c_ulong, false);
        }
    }
}

/// Part of another device's BAR mapped for a device's DMA
/// (`dma_map_resource()`): peer-to-peer over PCIe.
///
/// # Invariants
///
/// `addr` is the bus address `dma_map_resource()` gave `dev` for `len`
/// bytes of a BAR, unmapped only in [`Drop`].
pub(crate) struct PeerMapping {
    dev: ARef<Device>,
    addr: u64,
    len: u64,
}

impl PeerMapping {
    /// Maps `len` bytes of `range` (a BAR of a bound device) from `offset`
    /// for `dev`; `EINVAL` outside the range, `ENOMEM` if it cannot be.
    pub(crate) fn map(dev: &Device<Bound>, range: &IoRange, offset: u64, len: u64) -> Result<Self> {
        if len == 0 || offset >= range.len() || len > range.len() - offset {
            return Err(EINVAL);
        }
        let mut addr = 0u64;
        // SAFETY: `dev` is bound; the range is MMIO of a BAR (`IoRange`).
        to_result(unsafe {
            tt_dma_map_resource(
                device_ptr(dev).cast(),
                range.start() + offset,
                len,
                &mut addr,
            )
        })?;
        // INVARIANT: mapped above.
        Ok(Self {
            dev: dev.into(),
            addr,
            len,
        })
    }

    /// The bus address the device reaches the first byte at.
    pub(crate) fn dma_address(&self) -> u64 {
        self.addr
    }
}

impl Drop for PeerMapping {
    fn drop(&mut self) {
        // SAFETY: by the type invariants this is the mapping made for `dev`,
        // unmapped once.
        unsafe { tt_dma_unmap_resource(device_ptr(&*self.dev).cast(), self.addr, self.len) };
    }
}

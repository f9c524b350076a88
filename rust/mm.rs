// SPDX-License-Identifier: GPL-2.0

//! Mappings of device memory inserted at fault time, and revoked.
//!
//! Linux 7.3's `kernel::mm::virt` can set up a new VMA ([`VmaNew`]) but has
//! no page fault handler, no way to insert a PFN with a VMA's protection,
//! no write-combined or device protection, and no `address_space` to revoke
//! mappings with `unmap_mapping_range()`. This file adds them:
//!
//! - [`set_io_pfnmap`] makes a new VMA a PFN mapping of device memory,
//!   uncached or write-combined, or of a device's DMA buffer, cached;
//! - [`VmFault`] is a page fault in such a VMA, and [`VmFault::insert`]
//!   inserts one page of an [`IoRange`] (a BAR's physical range, which only
//!   a bound PCI device can give), [`VmFault::insert_dma_page`] one page of
//!   a DMA buffer whose mappings are zapped before it is freed
//!   ([`MappableDmaPages`]): no fault handler can map any other RAM;
//! - [`SharedMapping`] is an inode of a pseudo filesystem whose
//!   `address_space` every open file of one device shares (as VFIO does):
//!   [`SharedMapping::unmap`] zaps the mappings of a range of offsets in
//!   every process, whichever device node (a second one made with `mknod`
//!   included) the file was opened through.
//!
//! The static inlines and the pseudo filesystem are in `rust/mm_glue.c`.

use super::dma::DmaPages;
use core::{
    ffi::c_void,
    ptr::NonNull, //
};
use kernel::{
    bindings,
    device::Bound,
    error::from_err_ptr,
    ffi::{
        c_int,
        c_ulong, //
    },
    mm::virt::{
        flags,
        VmaNew,
        VmaRef, //
    },
    page::PAGE_SHIFT,
    pci,
    prelude::*,
    sync::Arc, //
};

// The C side's `struct vm_area_struct *` and `struct inode *`, passed as
// untyped pointers: bindgen's layouts of both hold types Rust does not
// consider FFI-safe, and nothing here reads them through these pointers.
extern "C" {
    fn tt_vma_set_io_pfnmap(vma: *mut c_void, caching: c_int);
    fn tt_io_reserve_memtype_wc(start: u64, size: u64) -> c_int;
    fn tt_io_free_memtype_wc(start: u64, size: u64);
    fn tt_mapping_inode_new() -> *mut c_void;
    fn tt_mapping_inode_put(inode: *mut c_void);
}

/// How the CPU caches a mapping of device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caching {
    /// Uncached, strongly ordered (`pgprot_device`).
    Uncached,
    /// Write-combined (`pgprot_writecombine`).
    WriteCombined,
    /// Cached, for RAM a device reaches coherently ([`DmaPages`]).
    Cached,
}

/// Makes `vma` a mapping of device memory whose pages the fault handler
/// inserts: `VM_IO | VM_PFNMAP | VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP`
/// (not copied into a child on fork, never grown by `mremap`, never in a
/// core dump) with the page protection of `caching`, never executable.
///
/// Refuses, before changing anything:
/// - a private mapping (`EINVAL`, as vfio-pci answers): a private
///   `VM_PFNMAP` VMA that may be written is copy-on-write, and inserting a
///   PFN into one is a `BUG()` in `vmf_insert_pfn_prot()`. A shared mapping
///   of a file opened read-only has `VM_MAYSHARE` without `VM_SHARED` and
///   cannot be made writable: it is not copy-on-write and is allowed;
/// - an executable one (`EPERM`, as for a `noexec` mount): an instruction
///   fetch from card memory, even a speculative one through a
///   write-combined mapping, is a read with side effects on the card.
///   `VM_MAYEXEC` is cleared, so `mprotect(PROT_EXEC)` fails with `EACCES`.
pub(crate) fn set_io_pfnmap(vma: &VmaNew, caching: Caching) -> Result {
    if vma.flags() & flags::MAYSHARE == 0 {
        return Err(EINVAL);
    }
    if vma.executable() {
        return Err(EPERM);
    }
    vma.try_clear_mayexec()?;
    // The values of `enum tt_caching` in rust/mm_glue.c.
    let caching = match caching {
        Caching::Uncached => 0,
        Caching::WriteCombined => 1,
        Caching::Cached => 2,
    };
    // SAFETY: `vma` is a VMA being set up by an `mmap` callback, whose flags
    // and protection may be changed (that is what `VmaNew` stands for).
    unsafe { tt_vma_set_io_pfnmap(vma.as_ptr().cast(), caching) };
    Ok(())
}

/// Tags a VMA made by [`set_io_pfnmap`] with a number its faults can read
/// back ([`VmFault::tag`]), kept in `vm_private_data` as a plain value
/// (never a pointer: nothing is owned through it).
pub(crate) fn set_tag(vma: &VmaNew, tag: usize) {
    // SAFETY: `vma` is being set up by an `mmap` callback, which owns its
    // `vm_private_data`; the value is never dereferenced.
    unsafe { (*vma.as_ptr()).vm_private_data = tag as *mut c_void };
}

/// The physical range of a PCI BAR of memory.
///
/// # Invariants
///
/// `start..start + len` was, when this was made, the resource of a BAR of
/// a bound PCI device, with `start` page aligned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IoRange {
    start: u64,
    len: u64,
}

impl IoRange {
    /// BAR `bar` of `pdev`; `None` when it has no resource or is not page
    /// aligned.
    pub(crate) fn of_bar(pdev: &pci::Device<Bound>, bar: u32) -> Option<Self> {
        let start = pdev.resource_start(bar).ok()?;
        let len = pdev.resource_len(bar).ok()?;
        let page_mask = (1u64 << PAGE_SHIFT) - 1;
        if len == 0 || start & page_mask != 0 {
            return None;
        }
        // INVARIANT: checked above.
        Some(Self { start, len })
    }

    /// The length of the range in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The physical address of its first byte.
    pub(crate) fn start(&self) -> u64 {
        self.start
    }
}

/// The write-combining memory type, reserved for a part of an [`IoRange`]
/// for as long as this lives (`arch_io_reserve_memtype_wc()`).
///
/// On x86 with PAT every mapping of a physical range gets the memory type
/// reserved for it, whatever its VMA asked for, and a range nobody
/// reserved is mapped uncached: a write-combined VMA of device memory is
/// write-combined only while its range is reserved so. The reservation
/// takes the type of any overlapping one (a kernel mapping's, uncached),
/// so the range must be one the kernel does not map itself. Without PAT
/// this reserves nothing, and write-combined VMAs are what they ask for.
///
/// # Invariants
///
/// `start..start + len` is reserved by `arch_io_reserve_memtype_wc()` for
/// this value alone, until it is dropped.
pub(crate) struct WriteCombining {
    start: u64,
    len: u64,
}

impl WriteCombining {
    /// Reserves `len` bytes of `range` from `offset` on. `EINVAL` outside
    /// the range, `EBUSY` if the range's memory type cannot be set (a
    /// conflicting reservation).
    pub(crate) fn reserve(range: &IoRange, offset: u64, len: u64) -> Result<Self> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || end > range.len {
            return Err(EINVAL);
        }
        let start = range.start + offset;
        // SAFETY: `start..start + len` is part of a BAR's physical range
        // (the type invariant of `IoRange`); reserving its memory type
        // touches no memory.
        kernel::error::to_result(unsafe { tt_io_reserve_memtype_wc(start, len) })?;
        // INVARIANT: reserved just now, freed only by `drop`.
        Ok(Self { start, len })
    }
}

impl Drop for WriteCombining {
    fn drop(&mut self) {
        // SAFETY: by the type invariants this range was reserved by this
        // value alone and is not freed yet.
        unsafe { tt_io_free_memtype_wc(self.start, self.len) };
    }
}

/// What a fault handler answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FaultResult(bindings::vm_fault_t);

impl FaultResult {
    /// The access is not allowed: the process gets `SIGBUS`.
    pub(crate) const SIGBUS: Self =
        Self(bindings::vm_fault_reason_VM_FAULT_SIGBUS as bindings::vm_fault_t);

    /// The raw `vm_fault_t`.
    pub(crate) fn as_raw(self) -> bindings::vm_fault_t {
        self.0
    }
}

/// A page fault in a VMA made by [`set_io_pfnmap`].
///
/// # Invariants
///
/// `vmf` is the fault being handled by the current `vm_operations_struct`
/// `fault` callback of a VMA set up by [`set_io_pfnmap`], for the duration
/// of that call.
pub(crate) struct VmFault {
    vmf: NonNull<bindings::vm_fault>,
}

impl VmFault {
    /// # Safety
    ///
    /// `vmf` must be the fault passed to a `fault` callback of a VMA set up
    /// by [`set_io_pfnmap`], and the result must not outlive that call.
    pub(crate) unsafe fn from_raw(vmf: NonNull<bindings::vm_fault>) -> Self {
        // INVARIANT: by the safety requirements.
        Self { vmf }
    }

    /// The tag [`set_tag`] gave the VMA (0 if none).
    pub(crate) fn tag(&self) -> usize {
        // SAFETY: by the type invariants `vmf` and its VMA are valid.
        unsafe { (*self.vmf.as_ref().__bindgen_anon_1.vma).vm_private_data as usize }
    }

    /// The offset in the file of the faulting page, in bytes.
    pub(crate) fn offset(&self) -> u64 {
        // SAFETY: by the type invariants `vmf` is valid.
        let pgoff = unsafe { self.vmf.as_ref().__bindgen_anon_1.pgoff };
        (pgoff as u64) << PAGE_SHIFT
    }

    /// Inserts the page at `offset` bytes into `range` for the faulting
    /// address, with the VMA's protection. `SIGBUS` if `offset` is outside
    /// the range.
    pub(crate) fn insert(&self, range: &IoRange, offset: u64) -> FaultResult {
        if offset >= range.len {
            return FaultResult::SIGBUS;
        }
        let Ok(pfn) = c_ulong::try_from((range.start + offset) >> PAGE_SHIFT) else {
            return FaultResult::SIGBUS;
        };
        self.insert_pfn(pfn)
    }

    /// Inserts the page of `pages` that the faulting file offset falls on,
    /// with the VMA's protection. `SIGBUS` unless the fault is at their
    /// offsets in their [`SharedMapping`].
    pub(crate) fn insert_dma_page(&self, pages: &MappableDmaPages) -> FaultResult {
        // SAFETY: by the type invariants `vmf`, its VMA and the VMA's file
        // (which the VMA holds a reference on) are valid.
        let mapping = unsafe { (*(*self.vmf.as_ref().__bindgen_anon_1.vma).vm_file).f_mapping };
        if mapping != pages.shared.as_raw_mapping() {
            return FaultResult::SIGBUS;
        }
        let pfn = self
            .offset()
            .checked_sub(pages.offset)
            .and_then(|offset| usize::try_from(offset).ok())
            .and_then(|offset| pages.pages.pfn(offset));
        match pfn.and_then(|pfn| c_ulong::try_from(pfn).ok()) {
            Some(pfn) => self.insert_pfn(pfn),
            None => FaultResult::SIGBUS,
        }
    }

    fn insert_pfn(&self, pfn: c_ulong) -> FaultResult {
        // SAFETY: by the type invariants `vmf` and its VMA are valid, and
        // the fault handler may insert into its VMA, a VM_PFNMAP one that
        // is not copy-on-write (`set_io_pfnmap` refuses private VMAs, and
        // no later change of the VMA can make a shared one private).
        let ret = unsafe {
            let fault = &self.vmf.as_ref().__bindgen_anon_1;
            let vma = fault.vma;
            bindings::vmf_insert_pfn_prot(
                vma,
                fault.address & !((1 << PAGE_SHIFT) - 1),
                pfn,
                (*vma).vm_page_prot,
            )
        };
        FaultResult(ret)
    }
}

/// An `address_space` shared by every open file of one device.
///
/// # Invariants
///
/// `inode` was returned by `tt_mapping_inode_new()` and is put only in
/// [`Drop`].
pub(crate) struct SharedMapping {
    inode: NonNull<bindings::inode>,
}

// SAFETY: The inode is reference counted by the VFS and may be used and put
// from any thread.
unsafe impl Send for SharedMapping {}
// SAFETY: `unmap_mapping_range` takes the locks it needs.
unsafe impl Sync for SharedMapping {}

impl SharedMapping {
    /// A new inode of the module's pseudo filesystem.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: No preconditions.
        let inode = from_err_ptr(unsafe { tt_mapping_inode_new() })?.cast::<bindings::inode>();
        // INVARIANT: made above.
        Ok(Self {
            inode: NonNull::new(inode).ok_or(ENOMEM)?,
        })
    }

    /// The `address_space` to make a file's `f_mapping`.
    pub(super) fn as_raw_mapping(&self) -> *mut bindings::address_space {
        // SAFETY: by the type invariants the inode is live.
        unsafe { (*self.inode.as_ptr()).i_mapping }
    }

    /// Zaps, in every process, the pages mapped from file offsets
    /// `offset..offset + len` (`len` 0: to the end). The next access faults.
    pub(crate) fn unmap(&self, offset: u64, len: u64) {
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: the mapping is live; `unmap_mapping_range` takes the
        // mapping's `i_mmap_rwsem` and the page table locks, not `mmap_lock`.
        unsafe { bindings::unmap_mapping_range(self.as_raw_mapping(), offset, len, 1) };
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: by the type invariants the inode is ours to put. No file
        // uses it any more: each holds a reference on the device data that
        // owns this object.
        unsafe { tt_mapping_inode_put(self.inode.as_ptr().cast()) };
    }
}

/// [`DmaPages`] that userspace maps through a [`SharedMapping`], at file
/// offsets `offset..offset + len`: dropping them zaps those offsets in
/// every process before the pages are freed.
///
/// # Invariants
///
/// Pages are inserted only by [`VmFault::insert_dma_page`], given a shared
/// reference (so before [`Drop`] begins), and only at file offsets of this
/// range in VMAs of `shared`, which [`Drop`] zaps.
pub(crate) struct MappableDmaPages {
    pages: DmaPages,
    shared: Arc<SharedMapping>,
    offset: u64,
}

impl MappableDmaPages {
    /// `pages`, to be mapped at file offset `offset` of `shared`.
    pub(crate) fn new(pages: DmaPages, shared: Arc<SharedMapping>, offset: u64) -> Self {
        Self {
            pages,
            shared,
            offset,
        }
    }

    /// The pages.
    pub(crate) fn pages(&self) -> &DmaPages {
        &self.pages
    }
}

impl Drop for MappableDmaPages {
    fn drop(&mut self) {
        // The pages are freed after this, when `pages` drops.
        self.shared.unmap(self.offset, self.pages.len() as u64);
    }
}

/// The file offset, in bytes, that the first page of `vma` maps.
pub(crate) fn vma_offset(vma: &VmaRef) -> u64 {
    // SAFETY: `VmaRef` guarantees the VMA is valid for reading, and
    // `vm_pgoff` does not change while the caller holds it (under the
    // mmap or VMA lock).
    let pgoff = unsafe { (*vma.as_ptr()).vm_pgoff };
    (pgoff as u64) << PAGE_SHIFT
}

// SPDX-License-Identifier: GPL-2.0

//! PCI helpers missing from `kernel::pci`.
//!
//! Each calls the C PCI API on the `struct pci_dev` of a `kernel::pci::Device`
//! (`pci_dev_ptr`), which Linux 7.3's `kernel::pci` does not hand out.

use core::ops::Range;
use kernel::{
    bindings,
    device::{
        self,
        Bound, //
    },
    ffi::{
        c_int,
        c_void, //
    },
    io::{
        Mmio,
        MmioRaw,
        Region, //
    },
    pci,
    prelude::*,
    sync::aref::ARef, //
};

/// The C `struct pci_dev` of `pdev`: the one its `struct device`
/// ([`super::device::device_ptr`]) is embedded in, as the C `to_pci_dev()` finds it
/// (the offset is bindgen's, of the C struct).
///
/// Upstream change that removes it: `kernel::pci::Device::as_raw()` made
/// `pub` (it is private to `kernel::pci` in Linux 7.3).
fn pci_dev_ptr<Ctx: device::DeviceContext>(pdev: &pci::Device<Ctx>) -> *mut bindings::pci_dev {
    let dev: &device::Device<Ctx> = pdev.as_ref();
    let dev = super::device::device_ptr(dev);
    // SAFETY: the `struct device` of a `pci::Device` is the `dev` field of
    // its `struct pci_dev`, so the containing struct is that `pci_dev`.
    unsafe { kernel::container_of!(dev, bindings::pci_dev, dev) }
}

/// A PCI function enabled for memory access and bus mastering by its
/// driver's probe, disabled again (`pci_disable_device()`, which also
/// clears Bus Master Enable) when this is dropped: at unbind, after the
/// driver quiesced the device and before devres frees the memory it could
/// reach, or at once if probe fails later on.
///
/// Linux 7.3's `kernel::pci::Device` has `enable_device_mem` and
/// `set_master` but nothing that undoes them (no `clear_master`, no
/// `disable_device`, no managed `pcim_enable_device`); a managed enable in
/// the `kernel` crate would remove this type.
///
/// # Invariants
///
/// `pdev` was enabled by [`EnabledDevice::new`] and is disabled only by
/// [`Drop`], once.
pub(crate) struct EnabledDevice<'a> {
    pdev: &'a pci::Device<Bound>,
}

impl<'a> EnabledDevice<'a> {
    /// Enables `pdev`'s memory resources and bus mastering.
    pub(crate) fn new(pdev: &'a pci::Device<device::Core<'_>>) -> Result<Self> {
        pdev.enable_device_mem()?;
        pdev.set_master();
        // INVARIANT: enabled just now.
        Ok(Self { pdev })
    }
}

impl Drop for EnabledDevice<'_> {
    fn drop(&mut self) {
        // SAFETY: by the type invariants `pdev` is a bound function this
        // value enabled and has not disabled: the enable count stays
        // balanced. The driver core holds the device lock across unbind,
        // as it does for probe.
        unsafe { bindings::pci_disable_device(pci_dev_ptr(self.pdev)) };
    }
}

/// Stops `pdev` from mastering the bus (`pci_clear_master()`): no DMA of
/// the function reaches host memory after this, until a probe sets it
/// again. For shutdown, where the function stays enabled; unbind disables
/// it whole ([`EnabledDevice`]). `kernel::pci::Device` has `set_master`
/// but not its inverse.
pub(crate) fn clear_master(pdev: &pci::Device<Bound>) {
    // SAFETY: `pdev` is a valid, bound PCI function; clearing Bus Master
    // Enable is a configuration write its driver may make at any time.
    unsafe { bindings::pci_clear_master(pci_dev_ptr(pdev)) };
}

/// Saves `pdev`'s configuration space (`pci_save_state()`), to be put back
/// with [`restore_state`] after the function went through a reset.
pub(crate) fn save_state(pdev: &pci::Device<Bound>) {
    // SAFETY: `pdev` is a valid, bound PCI function; saving its state takes
    // no lock the caller may hold.
    unsafe { bindings::pci_save_state(pci_dev_ptr(pdev)) };
}

/// A copy of a function's saved configuration space
/// (`pci_store_saved_state()`), kept by its driver.
///
/// The PCI core's own resets (sysfs `reset`, `pci_reset_function()`) save
/// the state before and restore it after, which uses it up: a copy lets
/// [`restore_state`] put it back after those too.
///
/// # Invariants
///
/// `state` came from `pci_store_saved_state()` and is owned by this value.
pub(crate) struct SavedState {
    state: core::ptr::NonNull<bindings::pci_saved_state>,
}

// SAFETY: the copy is plain allocated memory, used by one thread at a time
// through `&mut` or read through `&`, with no tie to the thread that made it.
unsafe impl Send for SavedState {}
// SAFETY: as above; `&SavedState` only lets the PCI core read the copy.
unsafe impl Sync for SavedState {}

impl SavedState {
    /// A copy of what `pdev` saved last; `ENODATA` if it saved nothing,
    /// `ENOMEM` without memory for the copy.
    pub(crate) fn store(pdev: &pci::Device<Bound>) -> Result<Self> {
        let raw = pci_dev_ptr(pdev);
        // SAFETY: `raw` is a valid, bound PCI function; `state_saved` is a
        // plain bitfield of it.
        if unsafe { (*raw).state_saved() } == 0 {
            return Err(ENODATA);
        }
        // SAFETY: as above; a saved state exists to copy.
        let state = unsafe { bindings::pci_store_saved_state(raw) };
        // INVARIANT: a non-null result is a copy this value now owns.
        core::ptr::NonNull::new(state)
            .map(|state| Self { state })
            .ok_or(ENOMEM)
    }
}

impl Drop for SavedState {
    fn drop(&mut self) {
        // SAFETY: by the type invariants the copy came from
        // `pci_store_saved_state()`, which allocates it with `kmalloc`, and
        // nothing else frees it.
        unsafe { bindings::kfree(self.state.as_ptr().cast()) };
    }
}

/// Puts back the configuration space saved last (`pci_restore_state()`)
/// and saves it again, as a reset of the function lost it. If a reset of
/// the PCI core used the saved state up, `copy` is loaded first; `false`
/// if that fails.
pub(crate) fn restore_state(pdev: &pci::Device<Bound>, copy: &SavedState) -> bool {
    let raw = pci_dev_ptr(pdev);
    // SAFETY: `raw` is a valid, bound PCI function; `state_saved` is a
    // plain bitfield of it.
    if unsafe { (*raw).state_saved() } == 0 {
        // SAFETY: `raw` as above; `copy` is a valid saved state by its
        // invariants, which loading only reads.
        if unsafe { bindings::pci_load_saved_state(raw, copy.state.as_ptr()) } != 0 {
            return false;
        }
    }
    // SAFETY: as above; a saved state exists.
    unsafe {
        bindings::pci_restore_state(raw);
        bindings::pci_save_state(raw);
    }
    true
}

/// Resets `pdev` through its slot or the bus it is on (`pci_reset_bus()`):
/// a hot reset of the link, the configuration space of every function
/// there saved before and restored after. `EAGAIN` when another reset or
/// a probe of a function there holds it, `ENOTTY` when neither the slot
/// nor the bus can be reset.
pub(crate) fn reset_bus(pdev: &pci::Device<Bound>) -> kernel::error::Result {
    // SAFETY: `pdev` is a valid, bound PCI function; `pci_reset_bus()` only
    // try-locks the functions it resets, so it cannot wait on a lock the
    // caller (an ioctl of a file of `pdev`) holds.
    let ret = unsafe { bindings::pci_reset_bus(pci_dev_ptr(pdev)) };
    kernel::error::to_result(ret)
}

/// A BAR of a bound PCI function, requested for the driver
/// (`pci_request_region()`), with only the part of it that the driver
/// itself accesses mapped into the kernel (`pci_iomap_range()`).
///
/// `kernel::pci::Bar` maps a whole BAR. On x86 a kernel mapping reserves
/// its memory type (uncached) for the physical range it covers, and every
/// later mapping of that range, userspace's included, gets the reserved
/// type whatever it asked for (PAT). A BAR that is mostly memory userspace
/// maps write-combined must therefore not be mapped whole by the kernel:
/// this maps the registers the driver needs and leaves the rest alone.
///
/// # Invariants
///
/// BAR `num` of `pdev` is requested for as long as this exists. When `io`
/// is `Some`, it is the mapping that `pci_iomap_range()` made of the BAR's
/// bytes from `offset` on, of the size it records.
pub(crate) struct BarPart {
    pdev: ARef<pci::Device>,
    num: c_int,
    offset: usize,
    io: Option<MmioRaw<Region>>,
}

impl BarPart {
    /// Requests BAR `bar` of `pdev` under `name` and maps the bytes of
    /// `part` that the BAR has (none if it has none of them). `EBUSY` if
    /// another driver holds the BAR, `ENOMEM` if it cannot be mapped,
    /// `EINVAL` if `pdev` has no such BAR.
    pub(crate) fn new(
        pdev: &pci::Device<Bound>,
        bar: u32,
        part: Range<usize>,
        name: &'static CStr,
    ) -> Result<Self> {
        let bar_len = usize::try_from(pdev.resource_len(bar)?)?;
        if bar_len == 0 {
            return Err(EINVAL);
        }
        let num = c_int::try_from(bar)?;
        let raw = pci_dev_ptr(pdev);
        // SAFETY: `raw` is a valid, bound PCI function and `num` one of its
        // BARs (its length was read above); `name` lives forever.
        if unsafe { bindings::pci_request_region(raw, num, name.as_char_ptr()) } != 0 {
            return Err(EBUSY);
        }
        // INVARIANT: the BAR is requested; `io` is set below only to the
        // mapping just made of `offset..offset + len`.
        let mut this = Self {
            pdev: pdev.into(),
            num,
            offset: part.start,
            io: None,
        };
        let end = part.end.min(bar_len);
        if part.start < end {
            let len = end - part.start;
            // SAFETY: as above; `offset..offset + len` lies within the BAR.
            let addr = unsafe { bindings::pci_iomap_range(raw, num, part.start, len) } as usize;
            if addr == 0 {
                return Err(ENOMEM);
            }
            match MmioRaw::new_region(addr, len) {
                Ok(io) => this.io = Some(io),
                Err(e) => {
                    // SAFETY: `addr` is the mapping just made of this BAR.
                    unsafe { bindings::pci_iounmap(raw, addr as *mut c_void) };
                    return Err(e);
                }
            }
        }
        Ok(this)
    }

    /// The BAR offset of the first mapped byte.
    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    /// The mapped part, `None` if the BAR has none of it.
    pub(crate) fn io(&self) -> Option<Mmio<'_, Region>> {
        // SAFETY: by the type invariants `io` is mapped for as long as
        // `self` exists, which outlives the returned view.
        self.io.map(|io| unsafe { Mmio::from_raw(io) })
    }
}

impl Drop for BarPart {
    fn drop(&mut self) {
        let raw = pci_dev_ptr(&self.pdev);
        if let Some(io) = self.io {
            // SAFETY: by the type invariants `io` is this BAR's mapping,
            // made by `pci_iomap_range()` and not unmapped before.
            unsafe { bindings::pci_iounmap(raw, io.addr() as *mut c_void) };
        }
        // SAFETY: by the type invariants the BAR is requested, and `pdev`,
        // held by `ARef`, is a valid PCI function.
        unsafe { bindings::pci_release_region(raw, self.num) };
    }
}

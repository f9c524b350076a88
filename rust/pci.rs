// SPDX-License-Identifier: GPL-2.0

//! PCI helpers missing from `kernel::pci`.

use kernel::{
    bindings,
    device::{
        self,
        Bound, //
    },
    pci, //
};

/// The [`pci::Vendor`] of a raw vendor id.
///
/// `kernel::pci::Vendor` only has constants for the vendors listed in
/// `pci_ids.h`, which does not list every vendor a driver may bind.
pub(crate) const fn vendor(id: u16) -> pci::Vendor {
    // SAFETY: `pci::Vendor` is `#[repr(transparent)]` over `u16`, and every
    // 16-bit value is a vendor id as far as the PCI core is concerned.
    unsafe { core::mem::transmute::<u16, pci::Vendor>(id) }
}

/// The C `struct pci_dev` of `pdev` (`pci::Device::as_raw` is private to
/// the `kernel` crate).
fn pci_dev_ptr(pdev: &pci::Device<Bound>) -> *mut bindings::pci_dev {
    let dev: &device::Device<Bound> = pdev.as_ref();
    let dev = super::device_ptr(dev);
    // SAFETY: the `struct device` of a `pci::Device` is the `dev` field of
    // its `struct pci_dev`, so the containing struct is that `pci_dev`.
    unsafe { kernel::container_of!(dev, bindings::pci_dev, dev) }
}

/// Saves `pdev`'s configuration space (`pci_save_state()`), to be put back
/// with [`restore_state`] after the function went through a reset.
pub(crate) fn save_state(pdev: &pci::Device<Bound>) {
    // SAFETY: `pdev` is a valid, bound PCI function; saving its state takes
    // no lock the caller may hold.
    unsafe { bindings::pci_save_state(pci_dev_ptr(pdev)) };
}

/// Puts back the configuration space saved last (`pci_restore_state()`)
/// and saves it again, as a reset of the function lost it; `false` if none
/// was saved.
pub(crate) fn restore_state(pdev: &pci::Device<Bound>) -> bool {
    let raw = pci_dev_ptr(pdev);
    // SAFETY: `raw` is a valid, bound PCI function; `state_saved` is a
    // plain bitfield of it.
    if unsafe { (*raw).state_saved() } == 0 {
        return false;
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

// SPDX-License-Identifier: GPL-2.0

//! PCI helpers missing from `kernel::pci`.

use kernel::pci;

/// The [`pci::Vendor`] of a raw vendor id.
///
/// `kernel::pci::Vendor` only has constants for the vendors listed in
/// `pci_ids.h`, which does not list every vendor a driver may bind.
pub(crate) const fn vendor(id: u16) -> pci::Vendor {
    // SAFETY: `pci::Vendor` is `#[repr(transparent)]` over `u16`, and every
    // 16-bit value is a vendor id as far as the PCI core is concerned.
    unsafe { core::mem::transmute::<u16, pci::Vendor>(id) }
}

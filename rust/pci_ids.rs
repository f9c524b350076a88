// SPDX-License-Identifier: GPL-2.0

//! The PCI id table of the driver, built in C (rust/pci_ids_glue.c).
//!
//! Linux 7.3's `kernel::pci::DeviceId::from_id` takes a `kernel::pci::Vendor`,
//! which can only be one of the constants of the vendors that
//! `kernel::pci::Vendor` lists (Tenstorrent is not one): its constructor
//! from a raw id, `Vendor::from_raw`, is `pub(super)`. The table is
//! therefore the C `struct pci_device_id` array with `MODULE_DEVICE_TABLE`
//! (which also gives the module its aliases), handed to the PCI driver
//! through the public `kernel::device_id::IdTable` trait.
//!
//! Upstream change that removes this file: `kernel::pci::Vendor::from_raw`
//! made `pub const` (or a `Vendor::TENSTORRENT` constant, with
//! `PCI_VENDOR_ID_TENSTORRENT` in `include/linux/pci_ids.h`); the table is
//! then `kernel::pci_device_table!` with `pci::DeviceId::from_id`.

use kernel::{
    bindings,
    device_id::IdTable,
    pci, //
};

extern "C" {
    /// Zero-terminated; entries without driver data.
    static tt_pci_ids: [bindings::pci_device_id; 0];
}

/// The ids the driver binds, for `kernel::pci::Driver::ID_TABLE`, without
/// per-entry data (`IdInfo = ()`): every probe is given `None`.
pub(crate) struct PciIds;

/// The driver's table.
pub(crate) static PCI_IDS: PciIds = PciIds;

impl IdTable<pci::DeviceId, ()> for PciIds {
    fn as_ptr(&self) -> *const bindings::pci_device_id {
        // Only the address of the C array is taken, never a reference.
        core::ptr::addr_of!(tt_pci_ids).cast()
    }
}

#[cfg(tt_kunit)]
impl PciIds {
    /// The entries of the table, without its terminator.
    pub(crate) fn entries(&self) -> &'static [bindings::pci_device_id] {
        let first = self.as_ptr();
        let mut len = 0;
        // SAFETY: the C array ends with an entry of zeroes (vendor 0, which
        // no entry before it has), so every entry read here is in it.
        while unsafe { (*first.add(len)).vendor } != 0 {
            len += 1;
        }
        // SAFETY: the first `len` entries are in the array, which is static
        // and never written.
        unsafe { core::slice::from_raw_parts(first, len) }
    }
}

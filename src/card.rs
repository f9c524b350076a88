// SPDX-License-Identifier: GPL-2.0

//! A bound card: what the ioctls report about it and its locks.

use crate::arbiter::Arbiter;
use kernel::prelude::*;

/// The PCI identity of a card, as GET_DEVICE_INFO reports it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PciIdentity {
    pub(crate) vendor_id: u16,
    pub(crate) device_id: u16,
    pub(crate) subsystem_vendor_id: u16,
    pub(crate) subsystem_id: u16,
    /// Function in bits 0-2, device in 3-7, bus in 8-15.
    pub(crate) bus_dev_fn: u16,
    pub(crate) domain: u16,
}

/// The state of one bound card shared by its open files.
///
/// It outlives the binding: files opened before an unbind keep it, and see
/// [`Card::is_gone`] (every command then fails with `ENODEV`).
#[pin_data]
pub(crate) struct Card {
    /// N of `/dev/tenstorrent/N`.
    pub(crate) ordinal: u32,
    pub(crate) pci: PciIdentity,
    #[pin]
    pub(crate) arbiter: Arbiter,
}

impl Card {
    pub(crate) fn new(ordinal: u32, pci: PciIdentity) -> impl PinInit<Self> {
        pin_init!(Self {
            ordinal,
            pci,
            arbiter <- Arbiter::new(),
        })
    }

    /// Whether the card has been unbound.
    pub(crate) fn is_gone(&self) -> bool {
        self.arbiter.is_gone()
    }
}

// SPDX-License-Identifier: GPL-2.0
//! tt-emu: an emulated Tenstorrent card (Wormhole n150 or Blackhole p150)
//! served over vfio-user to QEMU's `vfio-user-pci` device.
//!
//! The crate is split the way the card is seen from the host:
//! - the PCIe function: [`config_space`] (what `lspci` and QEMU see),
//!   [`server`] (the vfio-user protocol: regions, interrupts, resets,
//!   guest memory), [`host_memory`] (the guest memory QEMU shares, which the
//!   card reaches through its PCIe tile), [`control`] (faults on request);
//! - the chip behind the BARs: [`card`] (what each BAR offset is, the DMA
//!   engines, resets), [`tlb`] (the TLB window registers of each arch and
//!   their decoding), [`noc`] (the grid of tiles, their sparse memory and
//!   NIUs, the PCIe controller's iATU and DBI), [`arc`] (the ARC firmware:
//!   boot state, message interfaces, chip resets it starts),
//!   [`telemetry`] (the tables it publishes and the default boards) and
//!   [`erisc`] (what the Ethernet cores' firmware keeps in their L1).
//!
//! README.md says what is modelled, what is not, and the control protocol.

pub mod arc;
pub mod card;
pub mod config_space;
pub mod control;
pub mod erisc;
pub mod host_memory;
pub mod noc;
pub mod server;
pub mod telemetry;
pub mod tlb;

/// Which chip a card is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Wormhole B0 (n150-like board), PCI device 1e52:401e.
    Wormhole,
    /// Blackhole (p150-like board), PCI device 1e52:b140.
    Blackhole,
}

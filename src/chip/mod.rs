// SPDX-License-Identifier: GPL-2.0

//! The chip layer: what differs between the card families and how their
//! registers are laid out.
//!
//! - `mod.rs`: the chip's identity, [`Family`], and what the driver needs
//!   to know of each chip, [`Chip`]; the PCI ids the driver binds (its
//!   id table is C, rust/pci_ids_glue.c, which the KUnit suite checks
//!   against these).
//! - [`wormhole`], [`blackhole`]: each chip's [`Chip`] table.
//! - [`layout`]: the TLB windows a chip has, by size class ([`Layout`]).
//! - [`regs`]: registers typed with the kernel's `register!` macro, each
//!   with where its layout comes from.
//! - [`iatu_regs`]: each chip's writes of an outbound iATU region.
//! - [`tlb_regs`]: the TLB windows' configuration registers, encoded and
//!   decoded.

mod blackhole;
pub(crate) mod iatu_regs;
pub(crate) mod layout;
pub(crate) mod regs;
pub(crate) mod tlb_regs;
mod wormhole;

use kernel::prelude::*;

pub(crate) use layout::{
    Layout,
    SizeClass, //
};

/// The card families, each with its window layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    Wormhole,
    Blackhole,
}

/// Tenstorrent's PCI vendor id.
pub(crate) const VENDOR_TENSTORRENT: u16 = 0x1e52;

/// Grayskull's PCI device id: end of life, matched only to say clearly why
/// it is not bound.
pub(crate) const GRAYSKULL_DEVICE_ID: u16 = 0xfaca;

/// The ARC's CSM, as ARC addresses: 512 KiB from `ARC_CSM_BASE` (tt-kmd
/// 2.10 `telemetry.c`), on both chips.
pub(crate) const ARC_CSM_BASE: u32 = 0x1000_0000;
pub(crate) const ARC_CSM_SIZE: u32 = 512 << 10;

/// The ARC's APB peripherals span 1 MiB from the tile's [`ArcTile::apb`],
/// on both chips, the reset unit at +0x3_0000 and Blackhole's MSI catcher
/// at +0xB_0000 (tools/emu/src/arc.rs's memory map: tt-umd
/// `ARC_APB_NOC_XBAR_OFFSET_START`, tt-kmd `RESET_SCRATCH(n)`,
/// `ARC_MSI_FIFO`).
pub(crate) const ARC_APB_SIZE: u64 = 1 << 20;

impl Family {
    /// Every chip the driver binds.
    pub(crate) const ALL: [Family; 2] = [Family::Wormhole, Family::Blackhole];

    /// The chip of the PCI device `vendor_id:device_id`, if it is one the
    /// driver binds (not for Grayskull, nor devices bound through
    /// `new_id`).
    pub(crate) fn of_pci_device(vendor_id: u16, device_id: u16) -> Option<Self> {
        if vendor_id != VENDOR_TENSTORRENT {
            return None;
        }
        Self::ALL
            .into_iter()
            .find(|family| family.chip().pci_device_id == device_id)
    }

    /// What the driver needs to know of this chip.
    pub(crate) const fn chip(self) -> &'static Chip {
        match self {
            Self::Wormhole => &wormhole::CHIP,
            Self::Blackhole => &blackhole::CHIP,
        }
    }
}

/// What differs between the chips, beyond their window layout
/// ([`Layout`]) and their registers ([`regs`]): one per chip, in
/// `wormhole.rs` and `blackhole.rs`.
pub(crate) struct Chip {
    /// The chip's name, as tt-kmd names its hwmon device.
    pub(crate) name: &'static CStr,
    /// The chip's PCI device id, of vendor [`VENDOR_TENSTORRENT`].
    pub(crate) pci_device_id: u16,
    /// The TLB windows of a card of this chip whose BAR4 is this many
    /// bytes.
    pub(crate) tlb_layout: fn(u64) -> Layout,
    /// Address bits the chip reaches host memory with when no outbound
    /// iATU region translates (the DMA mask).
    pub(crate) dma_bits: u32,
    /// The NOC address of the PCIe tile's outbound window's first byte.
    pub(crate) iatu_noc_base: u64,
    /// The part of the outbound window iATU regions may cover, `0..=max`.
    pub(crate) iatu_window_max: u64,
    /// The register writes that set an outbound iATU region.
    pub(crate) iatu_writes: iatu_regs::EncodeRegion,
    /// The ARC firmware message type of a power vote
    /// (`ARC_MSG_TYPE_POWER_SETTING`).
    pub(crate) power_message: u32,
    /// Whether the last close waits the module's grace period before the
    /// card powers down (otherwise it does at once).
    pub(crate) power_grace: bool,
    /// Where the ARC tile is.
    pub(crate) arc: ArcTile,
    /// How RESET_DEVICE's `ASIC_RESET` (4) has the chip reset.
    pub(crate) asic_reset: ChipReset,
    /// How its `ASIC_DMC_RESET` (5) does, the board management controller
    /// with the chip.
    pub(crate) asic_dmc_reset: ChipReset,
    /// What of the firmware's telemetry the chip shows, and how.
    pub(crate) telemetry: TelemetryView,
    /// The PCIe tile's traffic counters tt-kmd shows as
    /// `pcie_perf_counters`, on the chips that have them.
    pub(crate) pcie_counters: Option<PcieCounters>,
}

/// The PCIe tile's NIU traffic counters of each NOC, as tt-kmd shows them.
pub(crate) struct PcieCounters {
    /// The counters shown, by index among the NIU's status registers, in
    /// tt-kmd's order (each NOC's the same).
    pub(crate) ids: [usize; 6],
    /// The BAR0 offset of NOC `noc`'s (0 or 1) counter `id`.
    pub(crate) offset: fn(usize, usize) -> usize,
}

/// The telemetry a chip shows as tt-kmd 2.10 shows it (its `wormhole.c` /
/// `blackhole.c` attribute lists, hwmon channels and labels), beyond the
/// attributes every chip has (src/telemetry.rs).
pub(crate) struct TelemetryView {
    /// Whether the versions of the firmware of the chip's other parts are
    /// attributes: `tt_ttflash_ver`, `tt_m3bl_fw_ver`, `tt_arc_fw_ver`,
    /// `tt_eth_fw_ver`.
    pub(crate) component_versions: bool,
    /// Whether `tt_therm_trip_count` is an attribute.
    pub(crate) therm_trip_count: bool,
    /// The hwmon labels of the channels every chip has.
    pub(crate) hwmon_labels: HwmonLabels,
    /// Whether hwmon has a fan channel.
    pub(crate) hwmon_fan: bool,
}

/// The hwmon labels of the ASIC's temperature, core voltage, current and
/// power channels.
pub(crate) struct HwmonLabels {
    pub(crate) asic_temp: &'static CStr,
    pub(crate) vcore: &'static CStr,
    pub(crate) current: &'static CStr,
    pub(crate) power: &'static CStr,
}

/// How the driver has a chip reset itself (tt-kmd 2.10 `wormhole_reset`,
/// `blackhole_reset`), the reset marker set first (src/reset.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChipReset {
    /// Through the ARC's scratch-register mailbox: a NOP the ARC must
    /// answer, then TRIGGER_RESET (argument 3 with the board management
    /// controller).
    ArcMailbox,
    /// The PCIe controller's interface timer fired: the chip resets itself.
    InterfaceTimer,
    /// Through the ARC message queue: a TEST the firmware must answer (the
    /// NOC carries messages), then TRIGGER_RESET (as [`ChipReset::ArcMailbox`]).
    ArcQueue,
}

/// Where the ARC tile's registers are, as NOC addresses of that tile.
#[derive(Clone, Copy)]
pub(crate) struct ArcTile {
    /// NOC0 coordinates of the ARC tile (tt-umd `ARC_CORES_NOC0`).
    pub(crate) x: u16,
    pub(crate) y: u16,
    /// The ARC's APB peripherals: the reset unit (home of the scratch
    /// registers) at +0x3_0000, Blackhole's MSI catcher at +0xB_0000.
    pub(crate) apb: u64,
    /// The NOC address of ARC address [`ARC_CSM_BASE`].
    pub(crate) csm: u64,
    /// Where BAR0 shows the APB block and CSM, if it does (Wormhole).
    pub(crate) bar0: Option<(usize, usize)>,
    /// The reset unit registers where the firmware publishes the ARC
    /// address of its message queue's control block, of its telemetry tag
    /// table and of its telemetry values, as offsets in the reset unit.
    pub(crate) msg_qcb_ptr: u64,
    pub(crate) telemetry_ptr: u64,
    pub(crate) telemetry_data: u64,
    /// What says the firmware takes messages.
    pub(crate) message_ready: MessageReady,
    /// What the queue's control block holds as the queue's place.
    pub(crate) queue_address: QueueAddress,
    /// How the host rings the firmware after a queue message.
    pub(crate) doorbell: Doorbell,
    /// Whether the ARC also takes messages through the scratch-register
    /// mailbox (Wormhole's), which resets use.
    pub(crate) scratch_mailbox: bool,
}

/// The reset unit register whose value says that the firmware booted far
/// enough to take messages, and the test of that value (all ones, a card
/// that is gone, is told apart before it).
#[derive(Clone, Copy)]
pub(crate) struct MessageReady {
    /// Its offset in the reset unit.
    pub(crate) register: u64,
    pub(crate) is_ready: fn(u32) -> bool,
}

/// What the first word of the message queue's control block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueAddress {
    /// An offset into CSM, from [`ARC_CSM_BASE`].
    CsmOffset,
    /// The queue's ARC address.
    ArcAddress,
}

/// How the host rings the firmware: it then looks at its queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Doorbell {
    /// `ARC_MISC_CNTL`'s IRQ0 bit set, the register read and written back
    /// ([`regs::WH_ARC_MISC_CNTL_REG`]).
    MiscControlIrq0,
    /// A 0 written into the MSI catcher's FIFO, `apb_offset` into the APB
    /// block.
    MsiFifo { apb_offset: u64 },
}

impl ArcTile {
    /// The NOC address of the ARC's reset unit.
    pub(crate) fn reset_unit(&self) -> u64 {
        self.apb + 0x3_0000
    }
}

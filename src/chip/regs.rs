// SPDX-License-Identifier: GPL-2.0

//! The chip's registers, typed with the kernel's [`register!`] macro: each
//! register is a type with its offset and named fields, so no user shifts or
//! masks by hand. Names are those of the hardware as tt-kmd names them; each
//! register says where its layout comes from.
//!
//! Registers the driver reaches through a BAR or the configuration space are
//! used through `Io` or as (offset, value) writes; the ARC tile's reset unit
//! is reached over the NOC through the kernel's window, which is no `Io`:
//! its registers' offsets count from the reset unit's start, and
//! [`reset_unit_offset`] gives them. The TLB windows' configuration registers are wider than 64
//! bits on Blackhole (96) and their field positions move with the window's
//! size, which a fixed `hi:lo` layout cannot say: they stay a typed struct
//! ([`super::tlb_regs::NocTlbConfig`]) with their own encoding.

use kernel::io::{
    register,
    register::{
        FixedRegister,
        Register,
        RegisterBase,
        RelativeRegisterArray, //
    },
    IoLoc,
    Region, //
};

/// Outbound regions of the PCIe controller's iATU (tt-kmd 2.10
/// `IATU_OUTBOUND_REGIONS`, both chips).
pub(crate) const IATU_OUTBOUND_REGIONS: usize = 16;

/// The base of the iATU's registers in BAR2: each chip has its own
/// ([`WormholeIatu`], [`BlackholeIatu`]).
pub(crate) struct IatuBase;

/// Wormhole's iATU registers start at BAR2 + 0x1200 (tt-kmd 2.10
/// `wormhole.c`, `IATU_BASE`).
pub(crate) struct WormholeIatu;
impl RegisterBase<IatuBase> for WormholeIatu {
    const BASE: usize = 0x1200;
}

/// Blackhole's iATU registers start at BAR2 + 0x1000 (tt-kmd 2.10
/// `blackhole.c`, `IATU_BASE`).
pub(crate) struct BlackholeIatu;
impl RegisterBase<IatuBase> for BlackholeIatu {
    const BASE: usize = 0x1000;
}

// The outbound region registers: region `r`'s are at `2r * 0x100` from the
// base (tt-kmd 2.10 `write_iatu_reg`: `(2 * region + direction) *
// IATU_REGION_STRIDE`, outbound is direction 0), hence a stride of 0x200.
// Offsets and fields: tt-kmd 2.10 `wormhole.c` and `blackhole.c`,
// `IATU_*_OUTBOUND` and the fields under them.
register! {
    /// Region control 1: the region's type (0, memory) and, on Blackhole,
    /// whether the limit's upper half is used.
    pub(crate) IATU_REGION_CTRL_1_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x00 {
        /// Blackhole: the limit's upper 32 bits come from
        /// `IATU_UPPER_LIMIT_ADDR_OUTBOUND` (`INCREASE_REGION_SIZE`).
        13:13 increase_region_size => bool;
    }

    /// Region control 2: enable, and on Wormhole the fields the controller
    /// passes through from the request.
    pub(crate) IATU_REGION_CTRL_2_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x04 {
        /// The region translates (`REGION_EN`).
        31:31 region_en => bool;
        /// Wormhole: DMA requests are not translated (`DMA_BYPASS`).
        27:27 dma_bypass => bool;
        /// Wormhole: TLP fields pass through (`TLP_BYPASS`).
        21:21 tlp_bypass => bool;
        /// Wormhole: the function number passes through (`FUNC_BYPASS`).
        19:19 func_bypass => bool;
    }

    /// Low 32 bits of the region's first address in the outbound window.
    pub(crate) IATU_LOWER_BASE_ADDR_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x08 {
        31:0 value;
    }

    /// High 32 bits of the region's first address.
    pub(crate) IATU_UPPER_BASE_ADDR_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x0C {
        31:0 value;
    }

    /// Low 32 bits of the region's last address (Wormhole's
    /// `IATU_LIMIT_ADDR_OUTBOUND`, Blackhole's `IATU_LOWER_LIMIT_ADDR_OUTBOUND`).
    pub(crate) IATU_LOWER_LIMIT_ADDR_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x10 {
        31:0 value;
    }

    /// Low 32 bits of the host address the region's first byte reaches.
    pub(crate) IATU_LOWER_TARGET_ADDR_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x14 {
        31:0 value;
    }

    /// High 32 bits of that host address.
    pub(crate) IATU_UPPER_TARGET_ADDR_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x18 {
        31:0 value;
    }

    /// Region control 3 (Blackhole only; written 0).
    pub(crate) IATU_REGION_CTRL_3_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x1C {
        31:0 value;
    }

    /// High 32 bits of the region's last address (Blackhole only, with
    /// `increase_region_size`).
    pub(crate) IATU_UPPER_LIMIT_ADDR_OUTBOUND(u32)[IATU_OUTBOUND_REGIONS, stride = 0x200]
        @ IatuBase + 0x20 {
        31:0 value;
    }
}

/// A 32-bit register write as the BAR I/O takes it: register `value` of
/// array entry `index` from base `B`, as (offset in the BAR, raw value);
/// `None` for an index past the array.
pub(crate) fn located<T, B>(index: usize, value: T) -> Option<(usize, u32)>
where
    T: RelativeRegisterArray + Register<Storage = u32>,
    B: RegisterBase<T::BaseFamily>,
    u32: From<T>,
{
    let location = T::of::<B>().try_at(index)?;
    Some((IoLoc::<Region, T>::offset(location), value.into()))
}

// The configuration space registers the reset uses, reached through
// `pci::Device::config_space()`, whose offsets count from 0 as these do.
register! {
    /// Vendor ID (PCI spec; `PCI_VENDOR_ID` in include/uapi/linux/pci_regs.h).
    pub(crate) PCI_VENDOR_ID(u16) @ 0x00 {
        15:0 vendor_id;
    }

    /// Command (PCI spec; `PCI_COMMAND` in include/uapi/linux/pci_regs.h).
    pub(crate) PCI_COMMAND(u16) @ 0x04 {
        /// Parity Error Response (`PCI_COMMAND_PARITY`): tt-kmd 2.10 sets it
        /// as a reset marker, which the chip's reset clears (`pcie.c`).
        6:6 parity => bool;
    }

    /// The PCIe controller's interface timer control, in the vendor part of
    /// the configuration space (tt-kmd 2.10 `pcie.c`,
    /// `INTERFACE_TIMER_CONTROL_OFF`).
    pub(crate) INTERFACE_TIMER_CONTROL(u32) @ 0x930 {
        /// `INTERFACE_FORCE_PENDING`: fire now.
        4:4 force_pending => bool;
        /// `INTERFACE_TIMER_EN`.
        0:0 en => bool;
    }

    /// The interface timer's target (tt-kmd 2.10 `pcie.c`,
    /// `INTERFACE_TIMER_TARGET_OFF`; tt-kmd writes 1).
    pub(crate) INTERFACE_TIMER_TARGET(u32) @ 0x934 {
        31:0 value;
    }
}

// The ARC tile's reset unit, as offsets from its start (tt-kmd 2.10
// `wormhole.c`: `reset_unit_regs + ...`; `blackhole.c`: `RESET_SCRATCH(N)`
// at `0x80030400 + 4 * N`, the reset unit being at ARC address 0x80030000).
register! {
    /// Wormhole scratch registers (`SCRATCH_REG(n)`: `0x60 + 4 * n`).
    pub(crate) WH_SCRATCH_REG(u32)[8] @ 0x60 {
        31:0 value;
    }

    /// Wormhole `POST_CODE_REG` (`SCRATCH_REG(0)`): the ARC's post code.
    pub(crate) WH_POST_CODE_REG(u32) => WH_SCRATCH_REG[0] {
        /// `POST_CODE_ARC_L2` (0xC0DE) once the ARC's L2 runs and can take
        /// messages (`POST_CODE_ARC_L2_MASK`: the upper half).
        31:16 stage;
    }

    /// Wormhole mailbox arguments (`SCRATCH_REG(3)`, `args_reg`).
    pub(crate) WH_MAILBOX_ARGS_REG(u32) => WH_SCRATCH_REG[3] {
        31:16 arg1 => u16;
        15:0 arg0 => u16;
    }

    /// Wormhole mailbox message (`SCRATCH_REG(5)`, `message_reg`): the host
    /// writes `WH_FW_MESSAGE_PRESENT | id`, the firmware answers with `id`
    /// and its exit code, or all ones for an id it does not know.
    pub(crate) WH_MAILBOX_MESSAGE_REG(u32) => WH_SCRATCH_REG[5] {
        31:16 exit_code => u16;
        15:0 message => u16;
    }

    /// Wormhole `ARC_MISC_CNTL_REG`.
    pub(crate) WH_ARC_MISC_CNTL_REG(u32) @ 0x100 {
        /// `ARC_MISC_CNTL_IRQ0_MASK`: rings the firmware.
        16:16 irq0 => bool;
    }

    /// Wormhole `ARC_TELEMETRY_PTR` (`RESET_UNIT_START + 0x1D0`): the ARC
    /// address of the telemetry tag table.
    pub(crate) WH_ARC_TELEMETRY_PTR(u32) @ 0x1D0 {
        31:0 value;
    }

    /// Wormhole `ARC_TELEMETRY_DATA` (`RESET_UNIT_START + 0x1D4`): the ARC
    /// address of the telemetry values.
    pub(crate) WH_ARC_TELEMETRY_DATA(u32) @ 0x1D4 {
        31:0 value;
    }

    /// Wormhole `ARC_MSG_QCB_PTR` (`RESET_UNIT_START + 0x1D8`): the message
    /// queue control block, as an offset into CSM; 0 on firmware without
    /// the queue.
    pub(crate) WH_ARC_MSG_QCB_PTR(u32) @ 0x1D8 {
        31:0 value;
    }

    /// Blackhole scratch registers (`RESET_SCRATCH(N)`).
    pub(crate) BH_RESET_SCRATCH(u32)[16] @ 0x400 {
        31:0 value;
    }

    /// Blackhole `ARC_BOOT_STATUS` (`RESET_SCRATCH(2)`).
    pub(crate) BH_ARC_BOOT_STATUS(u32) => BH_RESET_SCRATCH[2] {
        /// `ARC_BOOT_STATUS_READY_FOR_MSG`: the message queues are ready.
        0:0 ready_for_msg => bool;
    }

    /// Blackhole `ARC_MSG_QCB_PTR` (`RESET_SCRATCH(11)`): the ARC address
    /// of the message queue control block.
    pub(crate) BH_ARC_MSG_QCB_PTR(u32) => BH_RESET_SCRATCH[11] {
        31:0 value;
    }

    /// Blackhole `ARC_TELEMETRY_DATA` (`RESET_SCRATCH(12)`).
    pub(crate) BH_ARC_TELEMETRY_DATA(u32) => BH_RESET_SCRATCH[12] {
        31:0 value;
    }

    /// Blackhole `ARC_TELEMETRY_PTR` (`RESET_SCRATCH(13)`).
    pub(crate) BH_ARC_TELEMETRY_PTR(u32) => BH_RESET_SCRATCH[13] {
        31:0 value;
    }
}

/// Wormhole post code stage once the ARC's L2 runs and can take messages
/// (tt-kmd 2.10 `wormhole.c` `POST_CODE_ARC_L2`, [`WH_POST_CODE_REG`]'s
/// upper half).
pub(crate) const WH_POST_CODE_ARC_L2: u32 = 0xC0DE;

/// Wormhole mailbox: a message id is written as `0xAA00 | id` in
/// [`WH_MAILBOX_MESSAGE_REG`] (tt-kmd 2.10 `wormhole.c`
/// `wormhole_send_arc_fw_message_with_args`).
pub(crate) const WH_FW_MESSAGE_PRESENT: u16 = 0xAA00;

/// Blackhole's MSI catcher FIFO, as an offset into the ARC's APB block:
/// a 0 written there makes the firmware look at its message queues
/// (tt-kmd 2.10 `blackhole.c` `ARC_MSI_FIFO`, ARC address 0x800B_0000, the
/// APB block being at 0x8000_0000).
pub(crate) const BH_ARC_MSI_FIFO: u64 = 0xB_0000;

/// The ARC message queue in CSM, a firmware structure (tt-kmd 2.10
/// `msgqueue.h`): a header of four pointers, then the request slots and as
/// many response slots, each one message of eight words.
pub(crate) mod arc_queue {
    /// The host's request write pointer (`ARC_MSG_QUEUE_REQ_WPTR`).
    pub(crate) const REQUEST_WPTR: u32 = 0x00;
    /// The host's response read pointer (`ARC_MSG_QUEUE_RES_RPTR`).
    pub(crate) const RESPONSE_RPTR: u32 = 0x04;
    /// The firmware's request read pointer (`ARC_MSG_QUEUE_REQ_RPTR`).
    pub(crate) const REQUEST_RPTR: u32 = 0x10;
    /// The firmware's response write pointer (`ARC_MSG_QUEUE_RES_WPTR`).
    pub(crate) const RESPONSE_WPTR: u32 = 0x14;
    /// The header's size; the slots follow (`ARC_MSG_QUEUE_HEADER_SIZE`).
    pub(crate) const HEADER_BYTES: u32 = 32;
    /// One slot (`sizeof(struct arc_msg)`).
    pub(crate) const SLOT_BYTES: u32 = 32;
    /// The control block the firmware publishes the queue through holds
    /// the queue's place, then at this offset its entry count in the low
    /// byte (tt-kmd 2.10 `blackhole.c` `send_arc_message`: `queue_info`).
    pub(crate) const CONTROL_BLOCK_INFO: u32 = 4;
}

/// The firmware's telemetry tag table in CSM, a firmware structure (tt-kmd
/// 2.10 `wormhole.c` / `blackhole.c` `*_populate_telemetry_cache`): a
/// version word, an entry count, then one word per entry.
pub(crate) mod telemetry_table {
    /// The entry count.
    pub(crate) const ENTRY_COUNT: u32 = 4;
    /// The first entry.
    pub(crate) const ENTRIES: u32 = 8;
}

/// The offset of reset unit register `T` from the reset unit's start.
pub(crate) const fn reset_unit_offset<T: FixedRegister>() -> u64 {
    T::OFFSET as u64
}

// SPDX-License-Identifier: GPL-2.0

//! Blackhole: what the driver needs to know of this chip, in one table.

use super::{
    iatu_regs,
    regs::{
        reset_unit_offset,
        BH_ARC_BOOT_STATUS,
        BH_ARC_MSG_QCB_PTR,
        BH_ARC_MSI_FIFO,
        BH_ARC_TELEMETRY_DATA,
        BH_ARC_TELEMETRY_PTR, //
    },
    ArcTile,
    Chip,
    ChipReset,
    Doorbell,
    HwmonLabels,
    Layout,
    MessageReady,
    PcieCounters,
    QueueAddress,
    TelemetryView,
    ARC_CSM_BASE, //
};

/// Blackhole (tt-kmd 2.10 `blackhole.c` unless said otherwise).
pub(super) const CHIP: Chip = Chip {
    name: c"blackhole",
    pci_device_id: 0xb140,
    // Its 4 GiB windows are as many as BAR4 holds.
    tlb_layout: Layout::blackhole_in_bar4,
    // The chip reaches host memory through 58-bit addresses without an
    // outbound iATU region.
    dma_bits: 58,
    // The outbound window starts at NOC address 1 << 60 and spans 2^58
    // bytes.
    iatu_noc_base: 1 << 60,
    iatu_window_max: (1 << 58) - 1,
    iatu_writes: iatu_regs::blackhole,
    // `ARC_MSG_TYPE_POWER_SETTING`.
    power_message: 0x21,
    // The last close powers down at once, as in tt-kmd.
    power_grace: false,
    arc: ArcTile {
        // tt-kmd `ARC_X`, `ARC_Y`.
        x: 8,
        y: 0,
        apb: 0x8000_0000,
        // The NOC shows the CSM at the ARC's own address for it.
        csm: ARC_CSM_BASE as u64,
        bar0: None,
        msg_qcb_ptr: reset_unit_offset::<BH_ARC_MSG_QCB_PTR>(),
        telemetry_ptr: reset_unit_offset::<BH_ARC_TELEMETRY_PTR>(),
        telemetry_data: reset_unit_offset::<BH_ARC_TELEMETRY_DATA>(),
        // `send_arc_message`: the boot status says the queues are ready.
        message_ready: MessageReady {
            register: reset_unit_offset::<BH_ARC_BOOT_STATUS>(),
            is_ready: ready_for_messages,
        },
        queue_address: QueueAddress::ArcAddress,
        doorbell: Doorbell::MsiFifo {
            apb_offset: BH_ARC_MSI_FIFO,
        },
        // Messages go through the queue only.
        scratch_mailbox: false,
    },
    // `blackhole_reset`: the interface timer; with the board management
    // controller, TEST then TRIGGER_RESET through the message queue.
    asic_reset: ChipReset::InterfaceTimer,
    asic_dmc_reset: ChipReset::ArcQueue,
    telemetry: TelemetryView {
        component_versions: false,
        therm_trip_count: true,
        hwmon_labels: HwmonLabels {
            asic_temp: c"asic_temp",
            vcore: c"vcore",
            current: c"current",
            power: c"power",
        },
        hwmon_fan: true,
    },
    pcie_counters: Some(PcieCounters {
        ids: PCIE_COUNTER_IDS,
        offset: pcie_counter_offset,
    }),
};

/// Whether the boot status says the message queues are ready.
fn ready_for_messages(boot_status: u32) -> bool {
    BH_ARC_BOOT_STATUS::from(boot_status).ready_for_msg()
}

/// The PCIe tile's NOC2AXI configuration block in BAR0, and in it the NIU
/// status counters of NOC0, NOC1's block that far after it (tt-kmd
/// blackhole.c `NOC2AXI_CFG_START`, `NOC_STATUS_OFFSET`,
/// `NOC1_NOC2AXI_OFFSET`).
const NOC2AXI_CFG_START: usize = 0x1FD0_0000;
const NOC_STATUS_OFFSET: usize = 0x4200;
const NOC1_NOC2AXI_OFFSET: usize = 0x1_0000;

/// The NIU status counters tt-kmd shows as `pcie_perf_counters`, by index
/// among the NIU's status registers, in its order (blackhole.c:
/// `SLV_POSTED_WR_DATA_WORD_RECEIVED` 0x39 ... `MST_RD_DATA_WORD_RECEIVED`
/// 0x3). Each counts 32-byte data words.
const PCIE_COUNTER_IDS: [usize; 6] = [0x39, 0x38, 0x33, 0x9, 0x8, 0x3];

/// The BAR0 offset of the PCIe tile's NIU status counter `id` of NOC
/// `noc` (0 or 1).
const fn pcie_counter_offset(noc: usize, id: usize) -> usize {
    NOC2AXI_CFG_START + NOC_STATUS_OFFSET + 4 * id + noc * NOC1_NOC2AXI_OFFSET
}

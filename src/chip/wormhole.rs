// SPDX-License-Identifier: GPL-2.0

//! Wormhole: what the driver needs to know of this chip, in one table.

use super::{
    iatu_regs,
    regs::{
        reset_unit_offset,
        WH_ARC_MSG_QCB_PTR,
        WH_ARC_TELEMETRY_DATA,
        WH_ARC_TELEMETRY_PTR,
        WH_POST_CODE_ARC_L2,
        WH_POST_CODE_REG, //
    },
    ArcTile,
    Chip,
    ChipReset,
    Doorbell,
    HwmonLabels,
    Layout,
    MessageReady,
    QueueAddress,
    TelemetryView, //
};

/// Wormhole (tt-kmd 2.10 `wormhole.c` unless said otherwise).
pub(super) const CHIP: Chip = Chip {
    name: c"wormhole",
    pci_device_id: 0x401e,
    // Whatever BAR4 is: the windows are in BAR0.
    tlb_layout: |_bar4_len| Layout::wormhole(),
    // The chip reaches host memory through 32-bit addresses without an
    // outbound iATU region.
    dma_bits: 32,
    // The outbound window starts at NOC address 0x8_0000_0000; its last
    // 128 KiB are kept out of reach, as tt-kmd keeps them.
    iatu_noc_base: 0x8_0000_0000,
    iatu_window_max: 0xFFFE_0000 - 1,
    iatu_writes: iatu_regs::wormhole,
    // `ARC_MSG_TYPE_POWER_SETTING`.
    power_message: 0xC0,
    // The last close powers down after the module's grace period.
    power_grace: true,
    arc: ArcTile {
        // tt-umd `ARC_CORES_NOC0`.
        x: 0,
        y: 10,
        apb: 0x8_8000_0000,
        csm: 0x8_1000_0000,
        bar0: Some((0x1FF0_0000, 0x1FE8_0000)),
        msg_qcb_ptr: reset_unit_offset::<WH_ARC_MSG_QCB_PTR>(),
        telemetry_ptr: reset_unit_offset::<WH_ARC_TELEMETRY_PTR>(),
        telemetry_data: reset_unit_offset::<WH_ARC_TELEMETRY_DATA>(),
        // `send_arc_message`: the post code says the ARC's L2 runs.
        message_ready: MessageReady {
            register: reset_unit_offset::<WH_POST_CODE_REG>(),
            is_ready: arc_l2_runs,
        },
        // `ARC_MSG_QCB_PTR` holds an offset into CSM.
        queue_address: QueueAddress::CsmOffset,
        doorbell: Doorbell::MiscControlIrq0,
        scratch_mailbox: true,
    },
    // `wormhole_reset`: both through the mailbox, NOP first.
    asic_reset: ChipReset::ArcMailbox,
    asic_dmc_reset: ChipReset::ArcMailbox,
    telemetry: TelemetryView {
        component_versions: true,
        therm_trip_count: false,
        hwmon_labels: HwmonLabels {
            asic_temp: c"asic1_temp",
            vcore: c"vcore1",
            current: c"current1",
            power: c"power1",
        },
        hwmon_fan: false,
    },
    // tt-kmd shows no `pcie_perf_counters` for Wormhole.
    pcie_counters: None,
};

/// Whether the post code says the ARC's L2 runs and takes messages.
fn arc_l2_runs(post_code: u32) -> bool {
    WH_POST_CODE_REG::from(post_code).stage().get() == WH_POST_CODE_ARC_L2
}

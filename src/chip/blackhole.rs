// SPDX-License-Identifier: GPL-2.0

//! Blackhole: what the driver needs to know of this chip, in one table.

use super::{
    regs::{
        reset_unit_offset,
        BH_ARC_MSG_QCB_PTR,
        BH_ARC_TELEMETRY_DATA,
        BH_ARC_TELEMETRY_PTR, //
    },
    ArcTile,
    Chip,
    ARC_CSM_BASE, //
};

/// Blackhole (tt-kmd 2.10 `blackhole.c` unless said otherwise).
pub(super) const CHIP: Chip = Chip {
    name: c"blackhole",
    // The chip reaches host memory through 58-bit addresses without an
    // outbound iATU region.
    dma_bits: 58,
    // The outbound window starts at NOC address 1 << 60 and spans 2^58
    // bytes.
    iatu_noc_base: 1 << 60,
    iatu_window_max: (1 << 58) - 1,
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
    },
};

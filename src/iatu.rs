// SPDX-License-Identifier: GPL-2.0

//! The PCIe tile's outbound address translation (iATU): how the chip's
//! NOC reaches host memory at an address the driver hands out.
//!
//! A NOC address in the PCIe tile's outbound window (Wormhole
//! `0x8_0000_0000 + base`, Blackhole `1 << 60 + base`) leaves the chip at
//! `target + (base - region base)` when one of the controller's 16
//! outbound regions covers `base`. The regions are the card's, shared by
//! every file: a DMA buffer or pinned range asked for with NOC DMA gets
//! one, placed in a free gap of the window (top-down for buffers, and for
//! pins that ask for it; bottom-up otherwise), as tt-kmd 2.10 places them
//! (`memory.c`), and gives it back when freed. The region registers are
//! typed in [`crate::chip::regs`] and each chip's writes are
//! [`crate::chip::iatu_regs`]'s, named by the chip's table.

pub(crate) use crate::chip::iatu_regs::{
    Region,
    Writes, //
};
use crate::chip::{
    regs::IATU_OUTBOUND_REGIONS,
    Family, //
};

/// Outbound regions of the controller.
pub(crate) const REGIONS: usize = IATU_OUTBOUND_REGIONS;

/// The part of the outbound window regions may cover, `0..=max`.
pub(crate) fn window_max(family: Family) -> u64 {
    family.chip().iatu_window_max
}

/// The NOC address of window offset `base`.
pub(crate) fn noc_address(family: Family, base: u64) -> u64 {
    family.chip().iatu_noc_base + base
}

/// Where a new region of `size` bytes goes among `used` (first fit from
/// the top or the bottom of `0..=max`); `None` if no gap holds it.
pub(crate) fn place(used: &[Region], max: u64, size: u64, top_down: bool) -> Option<u64> {
    if size == 0 || size - 1 > max {
        return None;
    }
    let overlaps = |base: u64| {
        let limit = base + (size - 1);
        used.iter().any(|r| base <= r.limit && r.base <= limit)
    };
    // Candidates: the window's ends and the edges of every region in use.
    // The first that fits, from the chosen end, is the first-fit answer.
    let mut best: Option<u64> = None;
    let mut consider = |base: Option<u64>| {
        let Some(base) = base else { return };
        if base.checked_add(size - 1).is_none_or(|limit| limit > max) || overlaps(base) {
            return;
        }
        best = Some(match best {
            Some(b) if top_down => b.max(base),
            Some(b) => b.min(base),
            None => base,
        });
    };
    consider(Some(0));
    consider(Some(max - (size - 1)));
    for r in used {
        consider(r.limit.checked_add(1));
        consider(r.base.checked_sub(size));
    }
    best
}

/// The writes that make outbound region `region` map `r` (or, with `None`,
/// disable it); `None` back when the family cannot map `r`.
pub(crate) fn encode(family: Family, region: usize, r: Option<Region>) -> Option<(Writes, usize)> {
    (family.chip().iatu_writes)(region, r)
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/iatu_tests.rs"]
mod kunit;

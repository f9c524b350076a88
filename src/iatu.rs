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
//! (`memory.c`), and gives it back when freed. Register layout and values:
//! tt-kmd 2.10 `wormhole.c` / `blackhole.c` `configure_outbound_atu`.

use crate::chip::Family;

/// Outbound regions of the controller.
pub(crate) const REGIONS: usize = 16;

/// Where the iATU registers are in BAR2, per family; region `r` outbound
/// at `+ 2r * 0x100`.
fn base(family: Family) -> usize {
    match family {
        Family::Wormhole => 0x1200,
        Family::Blackhole => 0x1000,
    }
}
const REGION_STRIDE: usize = 0x200;
const REGION_CTRL_1: usize = 0x00;
const REGION_CTRL_2: usize = 0x04;
const LOWER_BASE: usize = 0x08;
const UPPER_BASE: usize = 0x0C;
const LOWER_LIMIT: usize = 0x10;
const LOWER_TARGET: usize = 0x14;
const UPPER_TARGET: usize = 0x18;
const REGION_CTRL_3: usize = 0x1C;
const UPPER_LIMIT: usize = 0x20;

const REGION_EN: u32 = 1 << 31;
/// Wormhole: the controller passes DMA, TLP and function fields through.
const WH_BYPASS: u32 = 1 << 27 | 1 << 21 | 1 << 19;
/// Blackhole: the limit's upper half comes from UPPER_LIMIT.
const BH_INCREASE_REGION_SIZE: u32 = 1 << 13;
/// Blackhole regions are at most this large.
const BH_MAX_REGION: u64 = 1 << 40;

/// The part of the outbound window regions may cover, `0..=max`.
pub(crate) fn window_max(family: Family) -> u64 {
    match family {
        // Below the last 128 KiB, which tt-kmd keeps out of reach.
        Family::Wormhole => 0xFFFE_0000 - 1,
        Family::Blackhole => (1 << 58) - 1,
    }
}

/// The NOC address of window offset `base`.
pub(crate) fn noc_address(family: Family, base: u64) -> u64 {
    match family {
        Family::Wormhole => 0x8_0000_0000 + base,
        Family::Blackhole => (1 << 60) + base,
    }
}

/// A region in use: window offsets `base..=limit` reach `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    pub(crate) base: u64,
    pub(crate) limit: u64,
    pub(crate) target: u64,
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

/// The 32-bit register writes, in order, as (BAR2 offset, value).
pub(crate) type Writes = [(usize, u32); 9];

/// The writes that make outbound region `region` map `r` (or, with `None`,
/// disable it); `None` back when the family cannot map `r`.
pub(crate) fn encode(family: Family, region: usize, r: Option<Region>) -> Option<(Writes, usize)> {
    if region >= REGIONS {
        return None;
    }
    let at = base(family) + region * REGION_STRIDE;
    let Region {
        base: b,
        limit,
        target,
    } = r.unwrap_or(Region {
        base: 0,
        limit: 0,
        target: 0,
    });
    let enable = r.is_some();
    let lo = |v: u64| v as u32;
    let hi = |v: u64| (v >> 32) as u32;
    // The region's registers, from their offsets in it.
    let at_region = |list: &[(usize, u32)]| {
        let mut writes = ([(0usize, 0u32); 9], list.len());
        for (slot, &(offset, value)) in writes.0.iter_mut().zip(list) {
            *slot = (at + offset, value);
        }
        writes
    };
    let writes = match family {
        Family::Wormhole => {
            if limit > u64::from(u32::MAX) {
                return None;
            }
            let ctrl2 = if enable { REGION_EN | WH_BYPASS } else { 0 };
            let w = [
                (LOWER_BASE, lo(b)),
                (UPPER_BASE, hi(b)),
                (LOWER_TARGET, lo(target)),
                (UPPER_TARGET, hi(target)),
                (LOWER_LIMIT, lo(limit)),
                (REGION_CTRL_1, 0),
                (REGION_CTRL_2, ctrl2),
            ];
            at_region(&w)
        }
        Family::Blackhole => {
            if enable && limit - b >= BH_MAX_REGION {
                return None;
            }
            let ctrl2 = if enable { REGION_EN } else { 0 };
            let w = [
                (LOWER_BASE, lo(b)),
                (UPPER_BASE, hi(b)),
                (LOWER_TARGET, lo(target)),
                (UPPER_TARGET, hi(target)),
                (LOWER_LIMIT, lo(limit)),
                (UPPER_LIMIT, hi(limit)),
                (REGION_CTRL_1, BH_INCREASE_REGION_SIZE),
                (REGION_CTRL_2, ctrl2),
                (REGION_CTRL_3, 0),
            ];
            at_region(&w)
        }
    };
    Some(writes)
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/iatu_tests.rs"]
mod kunit;

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
//! typed in [`crate::chip::regs`]; the values written are those of tt-kmd
//! 2.10 `wormhole.c` / `blackhole.c` `configure_outbound_atu`.

use crate::chip::{
    regs::{
        located,
        BlackholeIatu,
        IatuBase,
        WormholeIatu,
        IATU_LOWER_BASE_ADDR_OUTBOUND,
        IATU_LOWER_LIMIT_ADDR_OUTBOUND,
        IATU_LOWER_TARGET_ADDR_OUTBOUND,
        IATU_OUTBOUND_REGIONS,
        IATU_REGION_CTRL_1_OUTBOUND,
        IATU_REGION_CTRL_2_OUTBOUND,
        IATU_REGION_CTRL_3_OUTBOUND,
        IATU_UPPER_BASE_ADDR_OUTBOUND,
        IATU_UPPER_LIMIT_ADDR_OUTBOUND,
        IATU_UPPER_TARGET_ADDR_OUTBOUND, //
    },
    Family,
};
use kernel::{
    io::register::RegisterBase,
    prelude::Zeroable, //
};

/// Outbound regions of the controller.
pub(crate) const REGIONS: usize = IATU_OUTBOUND_REGIONS;

/// Blackhole regions are at most this large (tt-kmd 2.10 `blackhole.c`:
/// "iATU has a max region size of 1T").
const BH_MAX_REGION: u64 = 1 << 40;

/// The part of the outbound window regions may cover, `0..=max`.
pub(crate) fn window_max(family: Family) -> u64 {
    family.chip().iatu_window_max
}

/// The NOC address of window offset `base`.
pub(crate) fn noc_address(family: Family, base: u64) -> u64 {
    family.chip().iatu_noc_base + base
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
    match family {
        Family::Wormhole => encode_wormhole(region, r),
        Family::Blackhole => encode_blackhole(region, r),
    }
}

/// Wormhole (tt-kmd 2.10 `wormhole_configure_outbound_atu`): a 32-bit
/// limit, and the controller passes the request's DMA, TLP and function
/// fields through.
fn encode_wormhole(region: usize, r: Option<Region>) -> Option<(Writes, usize)> {
    type B = WormholeIatu;
    let (
        Region {
            base,
            limit,
            target,
        },
        enable,
    ) = fields(r);
    if limit > u64::from(u32::MAX) {
        return None;
    }
    let [b0, b1, t0, t1, l0] = addresses::<B>(region, base, target, limit);
    in_order(&[
        b0,
        b1,
        t0,
        t1,
        l0,
        located::<_, B>(region, IATU_REGION_CTRL_1_OUTBOUND::zeroed()),
        located::<_, B>(
            region,
            IATU_REGION_CTRL_2_OUTBOUND::zeroed()
                .with_region_en(enable)
                .with_dma_bypass(enable)
                .with_tlp_bypass(enable)
                .with_func_bypass(enable),
        ),
    ])
}

/// Blackhole (tt-kmd 2.10 `blackhole_configure_outbound_atu`): a 64-bit
/// limit (its upper half used through `increase_region_size`), regions of
/// at most 1 TiB.
fn encode_blackhole(region: usize, r: Option<Region>) -> Option<(Writes, usize)> {
    type B = BlackholeIatu;
    let (
        Region {
            base,
            limit,
            target,
        },
        enable,
    ) = fields(r);
    if enable && limit - base >= BH_MAX_REGION {
        return None;
    }
    let [b0, b1, t0, t1, l0] = addresses::<B>(region, base, target, limit);
    in_order(&[
        b0,
        b1,
        t0,
        t1,
        l0,
        located::<_, B>(
            region,
            IATU_UPPER_LIMIT_ADDR_OUTBOUND::zeroed().with_value(hi(limit)),
        ),
        located::<_, B>(
            region,
            IATU_REGION_CTRL_1_OUTBOUND::zeroed().with_increase_region_size(true),
        ),
        located::<_, B>(
            region,
            IATU_REGION_CTRL_2_OUTBOUND::zeroed().with_region_en(enable),
        ),
        located::<_, B>(region, IATU_REGION_CTRL_3_OUTBOUND::zeroed()),
    ])
}

/// The writes of region `region`'s addresses, the same on both chips from
/// their own base `B`, in the order tt-kmd writes them: the base, the
/// target, the limit's low half.
fn addresses<B: RegisterBase<IatuBase>>(
    region: usize,
    base: u64,
    target: u64,
    limit: u64,
) -> [Option<(usize, u32)>; 5] {
    [
        located::<_, B>(
            region,
            IATU_LOWER_BASE_ADDR_OUTBOUND::zeroed().with_value(lo(base)),
        ),
        located::<_, B>(
            region,
            IATU_UPPER_BASE_ADDR_OUTBOUND::zeroed().with_value(hi(base)),
        ),
        located::<_, B>(
            region,
            IATU_LOWER_TARGET_ADDR_OUTBOUND::zeroed().with_value(lo(target)),
        ),
        located::<_, B>(
            region,
            IATU_UPPER_TARGET_ADDR_OUTBOUND::zeroed().with_value(hi(target)),
        ),
        located::<_, B>(
            region,
            IATU_LOWER_LIMIT_ADDR_OUTBOUND::zeroed().with_value(lo(limit)),
        ),
    ]
}

/// `r`'s addresses (all 0 to disable) and whether the region is enabled.
fn fields(r: Option<Region>) -> (Region, bool) {
    let zero = Region {
        base: 0,
        limit: 0,
        target: 0,
    };
    (r.unwrap_or(zero), r.is_some())
}

/// The low half of a 64-bit address, as the registers take it.
fn lo(v: u64) -> u32 {
    v as u32
}

/// The high half of a 64-bit address.
fn hi(v: u64) -> u32 {
    (v >> 32) as u32
}

/// `list` as [`Writes`] and their count; `None` if any is (a region the
/// controller does not have).
fn in_order(list: &[Option<(usize, u32)>]) -> Option<(Writes, usize)> {
    let mut writes = [(0usize, 0u32); 9];
    for (slot, write) in writes.iter_mut().zip(list) {
        *slot = (*write)?;
    }
    Some((writes, list.len()))
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/iatu_tests.rs"]
mod kunit;

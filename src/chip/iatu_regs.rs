// SPDX-License-Identifier: GPL-2.0

//! The register writes that set an outbound region of the PCIe
//! controller's iATU, each chip's own: the values are those of tt-kmd 2.10
//! `wormhole.c` / `blackhole.c` `configure_outbound_atu`, the registers
//! [`super::regs`]'s. Each chip's table ([`super::Chip::iatu_writes`])
//! names its encoder; where regions go is [`crate::iatu`]'s.

use super::regs::{
    located,
    BlackholeIatu,
    IatuBase,
    WormholeIatu,
    IATU_LOWER_BASE_ADDR_OUTBOUND,
    IATU_LOWER_LIMIT_ADDR_OUTBOUND,
    IATU_LOWER_TARGET_ADDR_OUTBOUND,
    IATU_REGION_CTRL_1_OUTBOUND,
    IATU_REGION_CTRL_2_OUTBOUND,
    IATU_REGION_CTRL_3_OUTBOUND,
    IATU_UPPER_BASE_ADDR_OUTBOUND,
    IATU_UPPER_LIMIT_ADDR_OUTBOUND,
    IATU_UPPER_TARGET_ADDR_OUTBOUND, //
};
use kernel::{
    io::register::RegisterBase,
    prelude::Zeroable, //
};

/// Blackhole regions are at most this large (tt-kmd 2.10 `blackhole.c`:
/// "iATU has a max region size of 1T").
const BH_MAX_REGION: u64 = 1 << 40;

/// A region in use: window offsets `base..=limit` reach `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    pub(crate) base: u64,
    pub(crate) limit: u64,
    pub(crate) target: u64,
}

/// The 32-bit register writes, in order, as (BAR2 offset, value).
pub(crate) type Writes = [(usize, u32); 9];

/// A chip's encoder: the writes that make outbound region `region` map `r`
/// (or, with `None`, disable it); `None` when the chip cannot map `r`.
pub(crate) type EncodeRegion = fn(usize, Option<Region>) -> Option<(Writes, usize)>;

/// Wormhole (tt-kmd 2.10 `wormhole_configure_outbound_atu`): a 32-bit
/// limit, and the controller passes the request's DMA, TLP and function
/// fields through.
pub(crate) fn wormhole(region: usize, r: Option<Region>) -> Option<(Writes, usize)> {
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
pub(crate) fn blackhole(region: usize, r: Option<Region>) -> Option<(Writes, usize)> {
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

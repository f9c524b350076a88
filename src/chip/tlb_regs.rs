// SPDX-License-Identifier: GPL-2.0

//! The TLB windows' configuration registers: what CONFIGURE_TLB writes, and
//! what a register read back says about where its window points.
//!
//! Each window has a register in BAR0 from 0x1FC00000 that names the NOC
//! address its first byte reaches (shifted right by the window's size: the
//! low bits come from the offset in the window) and the tile, or rectangle
//! of tiles, the access goes to. The layouts are those tt-kmd 2.10 writes:
//!
//! - Wormhole (`wormhole.c`, `construct_tlb_config`): 64 bits at
//!   `0x1FC00000 + 8 * id`, two 32-bit writes, low word first. A
//!   `36 - shift`-bit address (NOC addresses are 36 bits), then `x_end`,
//!   `y_end`, `x_start`, `y_start` (6 bits each), `noc` (1), `mcast` (1),
//!   `ordering` (2), `linked` (1). `static_vc` is not written.
//! - Blackhole 2 MiB (`struct TLB_2M_REG`): 96 bits at `0x1FC00000 +
//!   12 * id`, three 32-bit writes. A 43-bit address, the coordinates (6
//!   bits each), `noc` (2), `mcast`, `ordering` (2), `linked`,
//!   `use_static_vc` (from the config's `static_vc`). The first 32 windows
//!   also have a strided-multicast register after the 210 window registers,
//!   which is cleared.
//! - Blackhole 4 GiB (`struct TLB_4G_REG`): the same after a 32-bit
//!   address, at `0x1FC00000 + 12 * id` (ids 202..209).
//!
//! tt-kmd checks only the address (aligned to the window, and below 2^36
//! on Wormhole) and silently truncates the other fields to their widths,
//! which aims a window at a tile nobody asked for; here a field that does
//! not fit is `EINVAL`. Reserved fields are not checked, as in tt-kmd.

use super::{
    Family,
    Layout, //
};
use kernel::prelude::*;

/// Where the window registers start in BAR0, on both chips.
pub(crate) const TLB_REGS_BASE: usize = 0x1FC0_0000;

/// Wormhole's NOC addresses are 36 bits wide.
const WH_NOC_BITS: u32 = 36;
/// Blackhole's window registers, 2 MiB and 4 GiB, and its strided ones.
const BH_WINDOW_REGISTERS: usize = 210;
const BH_STRIDED_COUNT: usize = 32;

/// `struct tenstorrent_noc_tlb_config`, as far as the registers use it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NocTlbConfig {
    pub(crate) addr: u64,
    pub(crate) x_end: u16,
    pub(crate) y_end: u16,
    pub(crate) x_start: u16,
    pub(crate) y_start: u16,
    pub(crate) noc: u8,
    pub(crate) mcast: u8,
    pub(crate) ordering: u8,
    pub(crate) linked: u8,
    pub(crate) static_vc: u8,
}

/// The register writes that configure one window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegisterWrites {
    /// BAR0 offset of the window's register.
    pub(crate) offset: usize,
    /// Its 32-bit words, written in order.
    pub(crate) words: [u32; 3],
    /// How many of `words` the register has (2 or 3).
    pub(crate) count: usize,
    /// BAR0 offset of a strided register to clear after, if any.
    pub(crate) strided: Option<usize>,
}

/// Whether `value` fits in `bits` bits.
fn fits(value: u64, bits: u32) -> bool {
    value >> bits == 0
}

/// Size in bytes of window `id` of `layout`, or `None` if it has none.
pub(crate) fn window_size(layout: &Layout, id: usize) -> Option<u64> {
    let mut first = 0usize;
    for class in layout.classes() {
        let total = class.total as usize;
        if id < first + total {
            return Some(class.size);
        }
        first += total;
    }
    None
}

/// The writes that aim window `id` of `layout` at `config`: `EINVAL` for a
/// window the layout does not have, an address not aligned to the window
/// (or beyond Wormhole's 36 bits), or a field wider than its register field.
pub(crate) fn encode(layout: &Layout, id: usize, config: &NocTlbConfig) -> Result<RegisterWrites> {
    let size = window_size(layout, id).ok_or(EINVAL)?;
    let (offset, count) = register_of(layout, id).ok_or(EINVAL)?;
    if !size.is_power_of_two() || config.addr & (size - 1) != 0 {
        return Err(EINVAL);
    }
    let shift = size.trailing_zeros();
    let noc_bits = match layout.family {
        Family::Wormhole => 1,
        Family::Blackhole => 2,
    };
    let coordinates = [config.x_end, config.y_end, config.x_start, config.y_start];
    if coordinates.iter().any(|&c| !fits(c.into(), 6))
        || !fits(config.noc.into(), noc_bits)
        || !fits(config.mcast.into(), 1)
        || !fits(config.ordering.into(), 2)
        || !fits(config.linked.into(), 1)
    {
        return Err(EINVAL);
    }
    // The fields after the address, from bit 0.
    let mut fields = u128::from(config.x_end)
        | u128::from(config.y_end) << 6
        | u128::from(config.x_start) << 12
        | u128::from(config.y_start) << 18
        | u128::from(config.noc) << 24;
    let after_noc = 24 + noc_bits;
    fields |= u128::from(config.mcast) << after_noc
        | u128::from(config.ordering) << (after_noc + 1)
        | u128::from(config.linked) << (after_noc + 3);
    match layout.family {
        Family::Wormhole => {
            if !fits(config.addr, WH_NOC_BITS) {
                return Err(EINVAL);
            }
            let value = u128::from(config.addr >> shift) | fields << (WH_NOC_BITS - shift);
            Ok(RegisterWrites {
                offset,
                words: [value as u32, (value >> 32) as u32, 0],
                count,
                strided: None,
            })
        }
        Family::Blackhole => {
            if !fits(config.static_vc.into(), 1) {
                return Err(EINVAL);
            }
            fields |= u128::from(config.static_vc) << (after_noc + 4);
            let value = u128::from(config.addr >> shift) | fields << (64 - shift);
            let strided =
                (id < BH_STRIDED_COUNT).then(|| TLB_REGS_BASE + 12 * BH_WINDOW_REGISTERS + 4 * id);
            Ok(RegisterWrites {
                offset,
                words: [value as u32, (value >> 32) as u32, (value >> 64) as u32],
                count,
                strided,
            })
        }
    }
}

/// Where window `id` of `layout` points, from its register's words as read
/// back (`words[..count]` of [`RegisterWrites`]): the inverse of
/// [`encode`], whoever wrote the register (CONFIGURE_TLB, or a holder
/// through the mapped register page, as UMD does). `None` for a window the
/// layout does not have. Wormhole's register has no static VC bit (0).
pub(crate) fn decode(layout: &Layout, id: usize, words: [u32; 3]) -> Option<NocTlbConfig> {
    let shift = window_size(layout, id)?.trailing_zeros();
    let value = u128::from(words[0]) | u128::from(words[1]) << 32 | u128::from(words[2]) << 64;
    let (address_bits, noc_bits, value) = match layout.family {
        // Two words only: the third is not this window's.
        Family::Wormhole => (WH_NOC_BITS - shift, 1, value & u128::from(u64::MAX)),
        Family::Blackhole => (64 - shift, 2, value),
    };
    let field = |from: u32, bits: u32| (value >> (address_bits + from)) & ((1 << bits) - 1);
    let after_noc = 24 + noc_bits;
    Some(NocTlbConfig {
        addr: ((value & ((1 << address_bits) - 1)) as u64) << shift,
        x_end: field(0, 6) as u16,
        y_end: field(6, 6) as u16,
        x_start: field(12, 6) as u16,
        y_start: field(18, 6) as u16,
        noc: field(24, noc_bits) as u8,
        mcast: field(after_noc, 1) as u8,
        ordering: field(after_noc + 1, 2) as u8,
        linked: field(after_noc + 3, 1) as u8,
        static_vc: match layout.family {
            Family::Wormhole => 0,
            Family::Blackhole => field(after_noc + 4, 1) as u8,
        },
    })
}

/// The BAR0 offset of window `id`'s register and how many 32-bit words it
/// has, or `None` for a window the layout does not have.
pub(crate) fn register_of(layout: &Layout, id: usize) -> Option<(usize, usize)> {
    window_size(layout, id)?;
    Some(match layout.family {
        Family::Wormhole => (TLB_REGS_BASE + 8 * id, 2),
        Family::Blackhole => (TLB_REGS_BASE + 12 * id, 3),
    })
}

/// The writes that return window `id` to its reset state (every field 0):
/// a window that changes hands keeps nothing of its previous target.
pub(crate) fn reset(layout: &Layout, id: usize) -> Result<RegisterWrites> {
    encode(layout, id, &NocTlbConfig::default())
}

#[cfg(tt_kunit)]
#[path = "../../tests/kunit/tlb_regs_tests.rs"]
mod kunit;

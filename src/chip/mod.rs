// SPDX-License-Identifier: GPL-2.0

//! The chip layer: what differs between the card families and how their
//! registers are laid out.
//!
//! - `mod.rs`: the chip's identity, [`Family`].
//! - [`layout`]: the TLB windows a chip has, by size class ([`Layout`]).
//! - [`regs`]: registers typed with the kernel's `register!` macro, each
//!   with where its layout comes from.
//! - [`tlb_regs`]: the TLB windows' configuration registers, encoded and
//!   decoded.

pub(crate) mod layout;
pub(crate) mod regs;
pub(crate) mod tlb_regs;

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

// SPDX-License-Identifier: GPL-2.0

//! NOC_READ and NOC_WRITE (tt-kmd 2.11): one 1, 2, 4 or 8-byte access to a
//! NOC address of a tile, made by the kernel through its own TLB window.
//!
//! They are for tools that watch or poke a card while something else runs
//! on it (telemetry, a mailbox, a register): slower than a window the
//! caller maps, but nothing is mapped, so a reset can never leave the
//! caller with a mapping that raises `SIGBUS`:
//!
//! - every access aims the kernel's window again under the window's mutex
//!   ([`CardMemory::kernel_noc_read`]), which the driver's own users (ARC
//!   messages, NOC cleanup writes) take too: no access finds the window
//!   where another user, or a reset of the chip, left it;
//! - an access holds the card's reset mutex, so it never runs while a reset
//!   does: it waits for the reset to end, then answers `ENODEV` if that
//!   reset fenced its file or left the card waiting for POST_RESET, as every
//!   other command of the file would.
//!
//! The checks are tt-kmd 2.11's, all `EINVAL`: `flags` and `reserved0` not
//! zero, `noc` above 1, a width other than 1, 2, 4 or 8, an address not
//! aligned to the width, and what the window's register cannot hold:
//! coordinates above 63, or on Wormhole an address of 2^36 and up.
//!
//! [`CardMemory::kernel_noc_read`]: crate::mapping::CardMemory::kernel_noc_read

use crate::{
    arbiter::OwnerId,
    bars::Width,
    card::Card,
    uapi::NocIo, //
};
use kernel::prelude::*;

/// One checked NOC_READ or NOC_WRITE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NocAccess {
    pub(crate) x: u16,
    pub(crate) y: u16,
    pub(crate) noc: u8,
    pub(crate) width: Width,
    pub(crate) addr: u64,
}

impl NocAccess {
    /// Checks the argument of NOC_READ or NOC_WRITE (`argsz` was checked
    /// when it was read). Coordinates and addresses are checked against the
    /// window's register when the window is aimed.
    pub(crate) fn decode(r: &NocIo) -> Result<Self> {
        if r.flags != 0 || r.reserved0 != [0; 2] || r.noc > 1 {
            return Err(EINVAL);
        }
        let width = Width::from_bytes(r.width).ok_or(EINVAL)?;
        if r.addr & (width.bytes() - 1) != 0 {
            return Err(EINVAL);
        }
        Ok(Self {
            x: r.x,
            y: r.y,
            noc: r.noc,
            width,
            addr: r.addr,
        })
    }
}

impl Card {
    /// Runs `f`, an access through the kernel's window for the file
    /// `owner`, when no reset of the card runs: `ENODEV` if a reset fenced
    /// the file or the card waits for POST_RESET (also if that happened
    /// while this waited for the reset to end).
    fn between_resets<R>(&self, owner: OwnerId, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let _no_reset = self.resetting.lock();
        if self.refuses(owner) || self.function.needs_post_reset() {
            return Err(ENODEV);
        }
        f()
    }

    /// NOC_READ of `access` for the file `owner`: the value, zero-extended.
    pub(crate) fn noc_read(&self, owner: OwnerId, access: &NocAccess) -> Result<u64> {
        let tile = (access.x, access.y, access.noc);
        self.between_resets(owner, || {
            self.memory
                .kernel_noc_read(self.tlb.layout(), tile, access.addr, access.width)
        })
    }

    /// NOC_WRITE of the low bytes of `value` for the file `owner`; it has
    /// reached the card when this returns.
    pub(crate) fn noc_write(&self, owner: OwnerId, access: &NocAccess, value: u64) -> Result {
        let tile = (access.x, access.y, access.noc);
        self.between_resets(owner, || {
            self.memory
                .kernel_noc_write(self.tlb.layout(), tile, access.addr, access.width, value)
        })
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/noc_io_tests.rs"]
mod kunit;

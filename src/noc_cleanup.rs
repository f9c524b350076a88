// SPDX-License-Identifier: GPL-2.0

//! NOC cleanup (SET_NOC_CLEANUP): one 32-bit write a file asks the driver
//! to make to a tile when the file is released.
//!
//! A process that dies in the middle of device-side work (a kernel running
//! on a core, a mailbox it was writing) leaves the chip in a state only it
//! knew how to undo; the registered write (for example a flag the device
//! firmware polls) is what undoes it. As in tt-kmd 2.10 it is made through
//! the kernel's own TLB window, with strict ordering, first thing at
//! release: before the file's DMA, locks and windows go, so the next holder
//! of its locks finds the chip cleaned up, also after `kill -9`. Unlike
//! tt-kmd, the write is read back (posted writes would otherwise reach the
//! chip after the next holder got the locks), and a tile or address the
//! window cannot reach is refused at the ioctl (`EINVAL`) instead of being
//! written elsewhere at close. `argsz` is negotiated as for every command
//! that has one (tt-kmd 2.11; src/file/args.rs `read_extensible`).

use crate::{
    arbiter::OwnerId,
    uapi::SetNocCleanup, //
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::Mutex, //
};

/// A registered cleanup write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NocCleanup {
    pub(crate) x: u16,
    pub(crate) y: u16,
    pub(crate) noc: u8,
    pub(crate) addr: u64,
    pub(crate) data: u32,
}

/// Checks SET_NOC_CLEANUP's argument: `Some` cleanup to register, `None`
/// to clear it. `EINVAL` for flags or `reserved0` not 0 (tt-kmd 2.11 checks
/// `reserved0`, 2.10 did not), `enabled` not 0 or 1, `noc` not 0 or 1,
/// coordinates past 63 (tt-kmd takes 64 and writes to tile 0), an address
/// not 4-byte aligned. Only the low 32 bits of `data` count, as in tt-kmd.
pub(crate) fn decode(r: &SetNocCleanup) -> Result<Option<NocCleanup>> {
    if r.flags != 0
        || r.reserved0 != 0
        || r.enabled > 1
        || r.addr & 3 != 0
        || r.noc > 1
        || r.x > 63
        || r.y > 63
    {
        return Err(EINVAL);
    }
    Ok((r.enabled == 1).then_some(NocCleanup {
        x: r.x.into(),
        y: r.y.into(),
        noc: r.noc,
        addr: r.addr,
        data: r.data as u32,
    }))
}

/// The cleanup writes registered by a card's open files.
#[pin_data]
pub(crate) struct NocCleanups {
    #[pin]
    entries: Mutex<KVec<(OwnerId, NocCleanup)>>,
}

impl NocCleanups {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            entries <- new_mutex!(KVec::new()),
        })
    }

    /// Registers (or with `None`, clears) the cleanup of file `owner`.
    pub(crate) fn set(&self, owner: OwnerId, cleanup: Option<NocCleanup>) -> Result {
        let mut entries = self.entries.lock();
        let position = entries.iter().position(|(o, _)| *o == owner);
        match (position, cleanup) {
            (Some(p), Some(c)) => entries[p].1 = c,
            (Some(p), None) => {
                let _ = entries.remove(p);
            }
            (None, Some(c)) => entries.push((owner, c), GFP_KERNEL)?,
            (None, None) => {}
        }
        Ok(())
    }

    /// The cleanup file `owner` registered, if any.
    pub(crate) fn of(&self, owner: OwnerId) -> Option<NocCleanup> {
        let entries = self.entries.lock();
        entries.iter().find(|(o, _)| *o == owner).map(|(_, c)| *c)
    }

    /// Takes the cleanup of file `owner`, which is being released.
    pub(crate) fn take(&self, owner: OwnerId) -> Option<NocCleanup> {
        let mut entries = self.entries.lock();
        let position = entries.iter().position(|(o, _)| *o == owner)?;
        entries.remove(position).ok().map(|(_, c)| c)
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The NOC through the kernel's own window: NOC_READ and NOC_WRITE
//! (src/noc_io.rs), and SET_NOC_CLEANUP (src/noc_cleanup.rs).

use super::{
    args::{
        read_extensible,
        write_back, //
    },
    OpenFile,
};
use crate::{
    mapping::CardMemory,
    noc_cleanup,
    noc_io::NocAccess,
    uapi::{
        NocIo,
        SetNocCleanup, //
    },
};
use kernel::prelude::*;

impl OpenFile {
    /// SET_NOC_CLEANUP, as tt-kmd 2.11 (src/noc_cleanup.rs): `argsz`
    /// negotiated, writes nothing back.
    pub(super) fn set_noc_cleanup(&self, arg: usize) -> Result {
        let request: SetNocCleanup = read_extensible(arg)?;
        let cleanup = noc_cleanup::decode(&request)?;
        if let Some(c) = cleanup {
            if !CardMemory::kernel_can_reach(self.card.tlb.layout(), c.x, c.y, c.noc, c.addr) {
                return Err(EINVAL);
            }
        }
        self.card.noc_cleanups.set(self.owner.id(), cleanup)
    }

    /// NOC_READ, as tt-kmd 2.11 (src/noc_io.rs): writes the struct back
    /// with `value`, the value read zero-extended.
    pub(super) fn noc_read(&self, arg: usize) -> Result {
        let mut request: NocIo = read_extensible(arg)?;
        let access = NocAccess::decode(&request)?;
        request.value = self.card.noc_read(self.owner.id(), &access)?;
        write_back(arg, &request)
    }

    /// NOC_WRITE, as tt-kmd 2.11 (src/noc_io.rs): writes the low `width`
    /// bytes of `value`, nothing back.
    pub(super) fn noc_write(&self, arg: usize) -> Result {
        let request: NocIo = read_extensible(arg)?;
        let access = NocAccess::decode(&request)?;
        self.card.noc_write(self.owner.id(), &access, request.value)
    }
}

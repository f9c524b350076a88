// SPDX-License-Identifier: GPL-2.0

//! EXPORT_TLB_DMABUF (tt-kmd 2.10): part of a TLB window exported as a
//! dma-buf, so that another device (an RDMA NIC) reaches the tile memory
//! the window is aimed at, peer to peer.
//!
//! The export holds the window: it survives FREE_TLB and the close of the
//! file that allocated it, and the window goes back to the pool when the
//! last export of it is released (the register reset then). It holds the
//! card too, so a dma-buf outliving an unbind is safe: unbind revokes
//! every export (importers' mappings invalidated, new ones refused), and a
//! reset of the chip is refused (`EBUSY`) while one is live, as in tt-kmd.
//!
//! This file keeps the card's live exports; the command itself, which
//! takes the window and the card, is `Card::export_window` (src/card.rs).
//!
//! Facts from tt-kmd 2.10 `memory.c` `ioctl_export_tlb_dmabuf` (checks and
//! their order, the exported range) and `ioctl.h`.

use crate::rust_ext::dmabuf::DmaBufRef;
use kernel::{
    new_mutex,
    prelude::*,
    sync::Mutex, //
};

/// The live exports of a card's windows.
#[pin_data]
pub(crate) struct CardExports {
    /// Each export by serial, while its dma-buf lives.
    #[pin]
    live: Mutex<KVec<(u64, DmaBufRef)>>,
    #[pin]
    next_serial: Mutex<u64>,
}

impl CardExports {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            live <- new_mutex!(KVec::new()),
            next_serial <- new_mutex!(0),
        })
    }

    /// Whether any dma-buf exports a window of the card.
    pub(crate) fn any(&self) -> bool {
        !self.live.lock().is_empty()
    }

    /// The serial of a new export.
    pub(crate) fn next_serial(&self) -> u64 {
        let mut next = self.next_serial.lock();
        *next += 1;
        *next
    }

    /// Lists export `serial`, whose dma-buf is `dmabuf`, unless the card
    /// is gone (`card_gone`, asked under the list's mutex): unbind marks
    /// the card gone before it revokes the listed exports under that
    /// mutex, so an export listed after that would never be revoked.
    pub(crate) fn add(
        &self,
        serial: u64,
        dmabuf: DmaBufRef,
        card_gone: impl FnOnce() -> bool,
    ) -> Result {
        let mut live = self.live.lock();
        if card_gone() {
            return Err(ENODEV);
        }
        live.push((serial, dmabuf), GFP_KERNEL)?;
        Ok(())
    }

    /// Takes export `serial` off the list: its dma-buf is being released.
    pub(crate) fn remove(&self, serial: u64) {
        let mut live = self.live.lock();
        if let Some(position) = live.iter().position(|(s, _)| *s == serial) {
            let _ = live.remove(position);
        }
    }

    /// The card is unbound: every export's importers lose their mappings.
    pub(crate) fn revoke_all(&self) {
        let live = self.live.lock();
        for (_, dmabuf) in live.iter() {
            // SAFETY: the dma-buf is alive while it is listed: its release
            // takes it off the list (with this mutex, which is held) first.
            unsafe { dmabuf.revoke() };
        }
    }
}

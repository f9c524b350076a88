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
//! This file keeps the card's live exports (rust/dmabuf.rs lists each
//! dma-buf until its release); the command itself, which takes the window
//! and the card, is `Card::export_window` (src/card.rs).
//!
//! Facts from tt-kmd 2.10 `memory.c` `ioctl_export_tlb_dmabuf` (checks and
//! their order, the exported range) and `ioctl.h`.

use crate::rust_ext::dmabuf::{
    LiveDmaBufs,
    PendingExport, //
};
use kernel::prelude::*;

/// The live exports of a card's windows.
#[pin_data]
pub(crate) struct CardExports {
    #[pin]
    live: LiveDmaBufs,
}

impl CardExports {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            live <- LiveDmaBufs::new(),
        })
    }

    /// Whether any dma-buf exports a window of the card.
    pub(crate) fn any(&self) -> bool {
        self.live.any()
    }

    /// The list an export's dma-buf is on while it lives.
    pub(crate) fn live(&self) -> &LiveDmaBufs {
        &self.live
    }

    /// Lists `export` unless the card is gone (`card_gone`, asked under
    /// the list's mutex): unbind marks the card gone before it revokes the
    /// listed exports under that mutex, so an export listed after that
    /// would never be revoked.
    pub(crate) fn add(&self, export: &PendingExport, card_gone: impl FnOnce() -> bool) -> Result {
        export.list_in(&self.live, card_gone)
    }

    /// The card is unbound: every export's importers lose their mappings.
    pub(crate) fn revoke_all(&self) {
        self.live.revoke_all();
    }
}

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
//! Facts from tt-kmd 2.10 `memory.c` `ioctl_export_tlb_dmabuf` (checks and
//! their order, the exported range) and `ioctl.h`.

use crate::{
    arbiter::OwnerId,
    card::Card,
    mapping::window_place,
    rust_ext::dmabuf::{
        export,
        DmaBufOwner,
        DmaBufRef,
        PendingExport, //
    },
    tlb::MAX_WINDOWS,
    uapi::ExportTlbDmabuf,
};
use kernel::{
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
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

/// One export: what its dma-buf's release gives back.
struct WindowExport {
    card: Arc<Card>,
    window: usize,
    serial: u64,
}

impl DmaBufOwner for WindowExport {
    fn released(self) {
        let card = &self.card;
        {
            let mut live = card.exports.live.lock();
            if let Some(position) = live.iter().position(|(s, _)| *s == self.serial) {
                let _ = live.remove(position);
            }
        }
        let layout = card.tlb.layout();
        if !card.tlb.is_held(self.window) && !card.is_gone() {
            // Its holder freed it while exported: the register kept its
            // target for the importers until now.
            card.memory.reset_window_register(layout, self.window);
        }
        card.tlb.export_put(self.window);
    }
}

impl Card {
    /// EXPORT_TLB_DMABUF of `request` for the file `owner`: the export,
    /// with the descriptor it will have (`argsz` was checked when it was
    /// read). `EINVAL` for flags, an id past 255 or of no window, an offset or size not
    /// page-aligned or past the window; `EPERM` for a window the file does
    /// not hold.
    pub(crate) fn export_window(
        self: &Arc<Self>,
        owner: OwnerId,
        request: &ExportTlbDmabuf,
    ) -> Result<PendingExport> {
        let page = PAGE_SIZE as u64;
        if request.flags != 0
            || request.tlb_id >= MAX_WINDOWS
            || request.offset % page != 0
            || request.size % page != 0
        {
            return Err(EINVAL);
        }
        let id = request.tlb_id as usize;
        let layout = self.tlb.layout();
        let place = window_place(layout, id).ok_or(EINVAL)?;
        // Resets are refused while an export lives (src/reset.rs) and check
        // that under this mutex: an export waits for a reset in progress
        // instead of slipping in under it, then sees the reset's fence.
        let _no_reset = self.resetting.lock();
        if self.refuses(owner) {
            return Err(ENODEV);
        }
        if !self.tlb.holds(owner, id) {
            return Err(EPERM);
        }
        if request.offset >= place.size || request.size > place.size {
            return Err(EINVAL);
        }
        let size = if request.size == 0 {
            place.size - request.offset
        } else {
            request.size
        };
        if request.offset + size > place.size {
            return Err(EINVAL);
        }
        let range = self.memory.bar_range(place.resource).ok_or(EINVAL)?;
        let start = place.bar_offset + request.offset;
        if start + size > range.len() {
            return Err(EINVAL);
        }
        let serial = {
            let mut next = self.exports.next_serial.lock();
            *next += 1;
            *next
        };
        // Held from here; the export's release gives it back, also when
        // the export fails below.
        self.tlb.export_get(owner, id)?;
        let pending = export(
            range.start() + start,
            size,
            WindowExport {
                card: self.clone(),
                window: id,
                serial,
            },
        )?;
        // Unbind marks the card gone before it revokes the listed exports
        // under this mutex: an export listed after that would never be
        // revoked, so it fails instead.
        let listed = {
            let mut live = self.exports.live.lock();
            if self.is_gone() {
                Err(ENODEV)
            } else {
                live.push((serial, pending.dmabuf()), GFP_KERNEL)
                    .map_err(Error::from)
            }
        };
        // On failure `pending` gives the window back as it drops, after the
        // mutex is released: its release takes it.
        listed?;
        Ok(pending)
    }
}

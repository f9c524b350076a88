// SPDX-License-Identifier: GPL-2.0

//! Memory the card reaches by DMA (src/dma.rs): ALLOCATE_DMA_BUF,
//! PIN_PAGES, UNPIN_PAGES, and MAP_PEER_BAR for another card's BAR.

use super::{
    args::{
        read_plain,
        write_back,
        write_sized_output, //
    },
    OpenFile,
};
use crate::{
    card::Card,
    dma::{
        self,
        ALLOCATE_DMA_BUF_NOC_DMA, //
    },
    rust_ext::chrdev::CharDevice,
    uapi::{
        AllocateDmaBufIn,
        AllocateDmaBufOut,
        MapPeerBarIn,
        MapPeerBarOut,
        PinPagesIn,
        PinPagesOutExtended,
        UnpinPagesIn, //
    },
};
use kernel::{
    fs::File,
    prelude::*,
    sync::Arc,
    transmute::AsBytes,
    uaccess::{
        UserPtr,
        UserSlice, //
    }, //
};

impl OpenFile {
    /// ALLOCATE_DMA_BUF, as tt-kmd 2.10 (src/dma.rs): reads only `in`,
    /// writes only `out`; its reserved fields are not checked (tt-kmd does
    /// not check them), unknown flags are `EINVAL`.
    pub(super) fn allocate_dma_buf(&self, arg: usize) -> Result {
        let r: AllocateDmaBufIn = read_plain(arg)?;
        if r.flags & !ALLOCATE_DMA_BUF_NOC_DMA != 0 {
            return Err(EINVAL);
        }
        let noc = r.flags & ALLOCATE_DMA_BUF_NOC_DMA != 0;
        let (memory, owner) = (&self.card.memory, self.owner.id());
        let given = self
            .card
            .dma
            .allocate(memory, owner, r.buf_index, r.requested_size, noc)?;
        let answer = AllocateDmaBufOut {
            physical_address: given.dma_address,
            mapping_offset: dma::buffer_offset(r.buf_index),
            size: r.requested_size,
            reserved0: 0,
            noc_address: given.noc_address,
            reserved1: 0,
        };
        let written = write_back(arg.wrapping_add(size_of::<AllocateDmaBufIn>()), &answer);
        if written.is_err() {
            // The caller cannot know it has the buffer: it must not stay.
            self.card.dma.free_buffer(memory, owner, r.buf_index);
        }
        written
    }

    /// PIN_PAGES, as tt-kmd 2.10: the caller's `output_size_bytes` bytes of
    /// `out` are cleared first (even when the call then fails), then get
    /// `physical_address` and, from 16 bytes, `noc_address`.
    pub(super) fn pin_pages(&self, arg: usize) -> Result {
        let r: PinPagesIn = read_plain(arg)?;
        let out = arg.wrapping_add(size_of::<PinPagesIn>());
        write_sized_output(out, r.output_size_bytes, &[])?;
        let (memory, owner) = (&self.card.memory, self.owner.id());
        let given = self
            .card
            .dma
            .pin(memory, owner, r.virtual_address, r.size, r.flags)?;
        let answer = PinPagesOutExtended {
            physical_address: given.dma_address,
            noc_address: given.noc_address,
        };
        let wanted = usize::try_from(r.output_size_bytes)?.min(size_of::<PinPagesOutExtended>());
        // Only the bytes asked for: the caller's struct may be the 8-byte
        // `tenstorrent_pin_pages_out`.
        let written = UserSlice::new(UserPtr::from_addr(out), wanted)
            .writer()
            .write_slice(&answer.as_bytes()[..wanted]);
        if written.is_err() {
            let _ = self
                .card
                .dma
                .unpin(memory, owner, r.virtual_address, r.size);
        }
        written
    }

    /// UNPIN_PAGES, as tt-kmd 2.10: `size` is cut to whole pages, and must
    /// be the size of the newest pin at `virtual_address`.
    pub(super) fn unpin_pages(&self, arg: usize) -> Result {
        let r: UnpinPagesIn = read_plain(arg)?;
        if r.reserved != 0 {
            return Err(EINVAL);
        }
        self.card.dma.unpin(
            &self.card.memory,
            self.owner.id(),
            r.virtual_address,
            r.size,
        )
    }

    /// MAP_PEER_BAR, as tt-kmd 2.10: maps part of a BAR of another card
    /// (of the same chip, open in this process as `peer_fd`) for this
    /// card's DMA. Reads only `in`. `EINVAL` for flags, a resource index
    /// past the PCI resources or of no BAR, a zero length or a range past
    /// the BAR, a descriptor that is not a card's file, the same card, a
    /// card of another chip; `EBADF` for a descriptor not open.
    pub(super) fn map_peer_bar(&self, file: &File, arg: usize) -> Result {
        /// `PCI_NUM_RESOURCES` (with SR-IOV): tt-kmd's bound.
        const PCI_NUM_RESOURCES: u32 = 17;
        let r: MapPeerBarIn = read_plain(arg)?;
        if r.flags != 0 || r.peer_bar_index >= PCI_NUM_RESOURCES || r.peer_bar_length == 0 {
            return Err(EINVAL);
        }
        let peer = CharDevice::<Card>::with_peer(file, r.peer_fd, |peer| {
            peer.map(|p: &OpenFile| p.card.clone()).ok_or(EINVAL)
        })??;
        if Arc::ptr_eq(&peer, &self.card)
            || peer.tlb.layout().family != self.card.tlb.layout().family
        {
            return Err(EINVAL);
        }
        if peer.is_gone() {
            return Err(ENODEV);
        }
        // PCI resources 0, 2 and 4 are the BARs a card has (RESOURCE0-2);
        // the others have no length.
        let resource = match r.peer_bar_index {
            0 => 0,
            2 => 1,
            4 => 2,
            _ => return Err(EINVAL),
        };
        let range = peer.memory.bar_range(resource).ok_or(EINVAL)?;
        let owner = self.owner.id();
        // The peer's unbind revokes this card's mappings of its BARs. It
        // marks the peer gone first: a mapping listed after the revocation
        // sees that below and is undone.
        peer.add_peer_user(&self.card)?;
        let address = self.card.dma.map_peer(
            owner,
            peer.peer_id(),
            &range,
            r.peer_bar_offset.into(),
            r.peer_bar_length.into(),
        )?;
        if peer.is_gone() {
            self.card.dma.unmap_peer(owner, address);
            return Err(ENODEV);
        }
        let answer = MapPeerBarOut {
            dma_address: address,
            reserved: 0,
        };
        let written = write_back(arg.wrapping_add(size_of::<MapPeerBarIn>()), &answer);
        if written.is_err() {
            self.card.dma.unmap_peer(owner, address);
        }
        written
    }
}

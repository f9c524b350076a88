// SPDX-License-Identifier: GPL-2.0

//! Open files of `/dev/tenstorrent/N` and their ioctls.
//!
//! An open file description is a lock owner: locks are released when the
//! last reference to it goes away (close, exit, a crash, SIGKILL), before
//! that last `close()` returns.
//!
//! This file holds the open file itself, the dispatch of its ioctls, its
//! mmap and faults; each family of commands has a file of its own: locks
//! (`locks.rs`), TLB windows and mappings (`windows.rs`), memory the card
//! reaches by DMA (`dma_memory.rs`), the card as a whole (`device.rs`:
//! information, reset, power), the NOC (`noc.rs`) and firmware messages
//! (`messages.rs`), with the argument rules they share in `args.rs`.

use crate::{
    arbiter::Owner,
    card::Card,
    dma,
    mapping::{
        self,
        Target, //
    },
    rust_ext::{
        chrdev::{
            poll_events,
            FileOperations,
            PollTable, //
        },
        mm::{
            vma_offset,
            FaultResult,
            SharedMapping,
            VmFault, //
        },
    },
    uapi::{
        self,
        LockAcquire,
        LockAcquireSet,
        LockQuery,
        LockRelease,
        SmcWait,
        TlbAllocate, //
    },
};
use kernel::{
    fs::{
        file::flags,
        File, //
    },
    ioctl::{
        _IOC_DIR,
        _IOC_NR,
        _IOC_SIZE,
        _IOC_TYPE, //
    },
    mm::virt::VmaNew,
    prelude::*,
    seq_file::SeqFile,
    sync::Arc,
    uapi::{
        _IOC_READ,
        _IOC_WRITE, //
    },
};

mod args;
mod device;
mod dma_memory;
mod locks;
mod messages;
mod noc;
mod windows;

/// The private data of an open file.
pub(crate) struct OpenFile {
    card: Arc<Card>,
    owner: Owner,
    /// Opened with `O_EXCL`: the card's only open file.
    exclusive: bool,
}

impl FileOperations for Card {
    type Ptr = KBox<OpenFile>;

    fn open(card: &Arc<Card>, file: &File) -> Result<KBox<OpenFile>> {
        if card.is_gone() {
            return Err(ENODEV);
        }
        let exclusive = file.flags() & flags::O_EXCL != 0;
        let nonblock = file.flags() & flags::O_NONBLOCK != 0;
        let append = file.flags() & flags::O_APPEND != 0;
        card.gate.enter(exclusive, nonblock)?;
        let admitted = (|| {
            let owner = card.arbiter.new_owner()?;
            let id = owner.id();
            let open = KBox::new(
                OpenFile {
                    card: card.clone(),
                    owner,
                    exclusive,
                },
                GFP_KERNEL,
            )?;
            card.add_opener(&open.owner)?;
            if let Err(e) = card
                .power
                .open(id, append, &card.firmware(), &|| card.kick_smc())
            {
                card.remove_opener(id);
                return Err(e);
            }
            Ok(open)
        })();
        if admitted.is_err() {
            card.gate.leave(exclusive);
        }
        admitted
    }

    fn release(open: KBox<OpenFile>, _file: &File) {
        let card = &open.card;
        // Its firmware message, if any, is nobody's any more.
        card.smc.abandon(open.owner.id());
        // First, before anything of the file goes (tt-kmd 2.10's order):
        // the next holder of its locks finds the chip cleaned up.
        if let Some(c) = card.noc_cleanups.take(open.owner.id()) {
            let tile = (c.x, c.y, c.noc);
            // Nothing to do once the card is gone (ENODEV).
            let _ = card
                .memory
                .kernel_noc_write32(card.tlb.layout(), tile, c.addr, c.data);
        }
        card.dma.release(&card.memory, open.owner.id());
        card.arbiter.release_all(&open.owner);
        open.card
            .tlb
            .free_all_revoking(open.owner.id(), &|id| open.card.revoke_freed_window(id));
        open.card.remove_opener(open.owner.id());
        card.power.release(
            open.owner.id(),
            &card.firmware(),
            &|| card.kick_smc(),
            |grace| card.schedule_powerdown(grace),
        );
        // Last: an opener waiting for the card finds it as closed as it is.
        open.card.gate.leave(open.exclusive);
    }

    fn ioctl(open: &OpenFile, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let command = Command::decode(cmd).ok_or(ENOTTY)?;
        if open.card.refuses(open.owner.id()) {
            return Err(ENODEV);
        }
        // After a reset of the chip, until POST_RESET, the card only says
        // what it is and takes resets (tt-kmd 2.10).
        let answers_before_post_reset = matches!(
            command,
            Command::GetDeviceInfo | Command::GetDriverInfo | Command::ResetDevice
        );
        if open.card.function.needs_post_reset() && !answers_before_post_reset {
            return Err(ENODEV);
        }
        match command {
            Command::GetDeviceInfo => open.get_device_info(arg),
            Command::GetDriverInfo => open.get_driver_info(arg),
            Command::LockCtl => open.lock_ctl(arg),
            Command::Acquire => open.acquire(arg),
            Command::AcquireSet => open.acquire_set(arg),
            Command::Release => open.release(arg),
            Command::Query => open.query(arg),
            Command::AllocateTlb => open.allocate_tlb(arg),
            Command::FreeTlb => open.free_tlb(arg),
            Command::TlbAllocate => open.tlb_allocate(arg),
            Command::QueryMappings => open.query_mappings(arg),
            Command::ConfigureTlb => open.configure_tlb(arg),
            Command::AllocateDmaBuf => open.allocate_dma_buf(arg),
            // Buffers live until close, as in tt-kmd 2.10, whose command
            // takes no argument saying which buffer.
            Command::FreeDmaBuf => Err(EINVAL),
            Command::PinPages => open.pin_pages(arg),
            Command::UnpinPages => open.unpin_pages(arg),
            Command::SetNocCleanup => open.set_noc_cleanup(arg),
            Command::SetPowerState => open.set_power_state(arg),
            Command::ExportTlbDmabuf => open.export_tlb_dmabuf(arg),
            // tt-kmd 2.10 answers EINVAL to it, whatever the card.
            Command::GetHarvesting => Err(EINVAL),
            Command::ResetDevice => open.reset_device(arg),
            Command::MapPeerBar => open.map_peer_bar(file, arg),
            Command::NocRead => open.noc_read(arg),
            Command::NocWrite => open.noc_write(arg),
            Command::SmcMsg => open.smc_msg(arg),
            Command::SmcWait => open.smc_wait(arg),
        }?;
        Ok(0)
    }

    /// Readable when the file's firmware message is done, writable when
    /// it may post one; a card that is gone hangs up.
    fn poll(open: &OpenFile, file: &File, table: &PollTable<'_>) -> u32 {
        let queue = &open.card.smc;
        table.register_wait(file, queue.ready());
        let (done, may_post, gone) = queue.readiness(open.owner.id());
        let mut events = 0;
        if done {
            events |= poll_events::EPOLLIN | poll_events::EPOLLRDNORM;
        }
        if may_post {
            events |= poll_events::EPOLLOUT | poll_events::EPOLLWRNORM;
        }
        if gone || open.card.refuses(open.owner.id()) {
            events |= poll_events::EPOLLHUP | poll_events::EPOLLERR;
        }
        events
    }

    /// What the file holds (src/views/fdinfo.rs).
    fn show_fdinfo(open: &OpenFile, m: &SeqFile, _file: &File) {
        crate::views::fdinfo::show(m, &open.card, &open.owner, open.exclusive);
    }

    fn shared_mapping(card: &Arc<Card>) -> Option<&SharedMapping> {
        Some(card.memory.shared_mapping())
    }

    fn mmap(open: &OpenFile, _file: &File, vma: &VmaNew) -> Result {
        open.mmap(vma)
    }

    /// A window mapping is one piece, as in tt-kmd 2.10 (its test program
    /// checks that a partial munmap of a window fails); BAR mappings split.
    fn may_split(_open: &OpenFile, offset: u64) -> Result {
        // (DMA buffer mappings split, like BAR mappings.)
        if mapping::is_window_offset(offset) {
            Err(EINVAL)
        } else {
            Ok(())
        }
    }

    fn vma_open(open: &OpenFile, offset: u64, tag: usize) {
        open.vma_changed(offset, tag, true);
    }

    fn vma_close(open: &OpenFile, offset: u64, tag: usize) {
        open.vma_changed(offset, tag, false);
    }

    fn fault(open: &OpenFile, fault: &VmFault) -> FaultResult {
        if dma::buffer_at(fault.offset()).is_some() {
            return open.card.dma.fault(open.owner.id(), fault);
        }
        // A reset zapped the mappings of the files it fenced: theirs stay
        // gone (DMA buffers stay theirs until close, as in tt-kmd). The
        // check is made where the page is inserted, ordered with the fence.
        let owner = open.owner.id();
        open.card
            .memory
            .fault(&open.card.tlb, owner, fault, || open.card.is_fenced(owner))
    }
}

/// The commands the driver knows.
enum Command {
    GetDeviceInfo,
    GetDriverInfo,
    LockCtl,
    Acquire,
    AcquireSet,
    Release,
    Query,
    AllocateTlb,
    FreeTlb,
    TlbAllocate,
    QueryMappings,
    ConfigureTlb,
    AllocateDmaBuf,
    FreeDmaBuf,
    PinPages,
    UnpinPages,
    SetNocCleanup,
    SetPowerState,
    ExportTlbDmabuf,
    GetHarvesting,
    ResetDevice,
    MapPeerBar,
    NocRead,
    NocWrite,
    SmcMsg,
    SmcWait,
}

impl Command {
    fn decode(cmd: u32) -> Option<Self> {
        match cmd {
            uapi::GET_DEVICE_INFO => return Some(Self::GetDeviceInfo),
            uapi::GET_DRIVER_INFO => return Some(Self::GetDriverInfo),
            uapi::LOCK_CTL => return Some(Self::LockCtl),
            uapi::ALLOCATE_TLB => return Some(Self::AllocateTlb),
            uapi::FREE_TLB => return Some(Self::FreeTlb),
            uapi::QUERY_MAPPINGS => return Some(Self::QueryMappings),
            uapi::CONFIGURE_TLB => return Some(Self::ConfigureTlb),
            uapi::ALLOCATE_DMA_BUF => return Some(Self::AllocateDmaBuf),
            uapi::FREE_DMA_BUF => return Some(Self::FreeDmaBuf),
            uapi::PIN_PAGES => return Some(Self::PinPages),
            uapi::UNPIN_PAGES => return Some(Self::UnpinPages),
            uapi::SET_NOC_CLEANUP => return Some(Self::SetNocCleanup),
            uapi::SET_POWER_STATE => return Some(Self::SetPowerState),
            uapi::EXPORT_TLB_DMABUF => return Some(Self::ExportTlbDmabuf),
            uapi::GET_HARVESTING => return Some(Self::GetHarvesting),
            uapi::RESET_DEVICE => return Some(Self::ResetDevice),
            uapi::MAP_PEER_BAR => return Some(Self::MapPeerBar),
            uapi::NOC_READ => return Some(Self::NocRead),
            uapi::NOC_WRITE => return Some(Self::NocWrite),
            uapi::SMC_MSG => return Some(Self::SmcMsg),
            _ => {}
        }
        // Our commands carry their struct's size, which grows with new
        // versions: any size from the first version's up is the command.
        if _IOC_TYPE(cmd) != uapi::IOCTL_MAGIC || _IOC_DIR(cmd) != _IOC_READ | _IOC_WRITE {
            return None;
        }
        let (command, first_size) = match _IOC_NR(cmd) {
            uapi::LOCK_ACQUIRE_NR => (Self::Acquire, size_of::<LockAcquire>()),
            uapi::LOCK_ACQUIRE_SET_NR => (Self::AcquireSet, size_of::<LockAcquireSet>()),
            uapi::LOCK_RELEASE_NR => (Self::Release, size_of::<LockRelease>()),
            uapi::LOCK_QUERY_NR => (Self::Query, size_of::<LockQuery>()),
            uapi::TLB_ALLOCATE_NR => (Self::TlbAllocate, size_of::<TlbAllocate>()),
            uapi::SMC_WAIT_NR => (Self::SmcWait, size_of::<SmcWait>()),
            _ => return None,
        };
        (_IOC_SIZE(cmd) >= first_size).then_some(command)
    }
}

impl OpenFile {
    /// `e`, or `ENODEV` if a reset fenced this file or the card is gone: a
    /// reset frees a fenced file's windows after fencing it, so a command
    /// that finds its window gone in between was refused by the reset, and
    /// must say so as every later command does, not `EPERM`.
    fn or_fenced(&self, e: Error) -> Error {
        if e == EPERM && self.card.refuses(self.owner.id()) {
            ENODEV
        } else {
            e
        }
    }

    /// A mapping of this file at `offset` was `mapped` (a VMA opened: a
    /// fork, a split) or unmapped (closed), for the card's revocation
    /// bookkeeping (src/mapping.rs).
    fn vma_changed(&self, offset: u64, tag: usize, mapped: bool) {
        let layout = self.card.tlb.layout();
        self.card
            .memory
            .vma_changed(layout, self.owner.id(), offset, tag, mapped);
    }

    /// mmap of a BAR or a window (see src/mapping.rs): `EINVAL` outside a
    /// mapping, `EPERM` for a window this file does not hold.
    fn mmap(&self, vma: &VmaNew) -> Result {
        if self.card.refuses(self.owner.id()) {
            return Err(ENODEV);
        }
        let len = u64::try_from(vma.end() - vma.start())?;
        let offset = vma_offset(vma);
        if dma::buffer_at(offset).is_some() {
            return self.card.dma.mmap(self.owner.id(), offset, len, vma);
        }
        let layout = self.card.tlb.layout();
        let (target, caching) = mapping::decode_mmap(layout, self.card.memory.lens(), offset, len)?;
        match target {
            Target::Bar { .. } => {
                self.card.memory.mmap(vma, caching)?;
                self.card
                    .memory
                    .vma_changed(layout, self.owner.id(), offset, 0, true);
                Ok(())
            }
            Target::Window(window) => self
                .card
                .tlb
                .with_held(self.owner.id(), window.id, || {
                    self.card.memory.mmap_window(vma, caching, window)
                })
                .unwrap_or(Err(EPERM))
                .map_err(|e| self.or_fenced(e)),
        }
    }
}

// SPDX-License-Identifier: GPL-2.0

//! TLB windows (src/tlb.rs, src/mapping.rs): ALLOCATE_TLB, FREE_TLB,
//! TLB_ALLOCATE, QUERY_MAPPINGS and CONFIGURE_TLB, and EXPORT_TLB_DMABUF
//! (src/card.rs).

use super::{
    args::{
        read_exact_argsz,
        read_extensible,
        read_plain,
        wait_from_flags,
        write_back, //
    },
    OpenFile,
};
use crate::{
    arbiter::Requester,
    chip::tlb_regs::NocTlbConfig,
    mapping,
    tlb::{
        TlbError,
        MAX_WINDOWS, //
    },
    uapi::{
        AllocateTlbIn,
        AllocateTlbOut,
        ConfigureTlbIn,
        ExportTlbDmabuf,
        FreeTlbIn,
        Mapping,
        QueryMappingsIn,
        TlbAllocate, //
    },
    wait::Wait,
};
use kernel::{
    prelude::*,
    uaccess::{
        UserPtr,
        UserSlice, //
    }, //
};

impl TlbError {
    /// The errno of the new command; ALLOCATE_TLB says `ENOMEM` for
    /// [`TlbError::Busy`], as the C driver does.
    fn errno(self) -> Error {
        match self {
            Self::NoSuchSize => EINVAL,
            Self::Busy => EBUSY,
            Self::TimedOut => ETIMEDOUT,
            Self::Interrupted => ERESTARTNOHAND,
            Self::Gone => ENODEV,
            Self::NoMemory => ENOMEM,
        }
    }
}

impl OpenFile {
    /// The C driver's ALLOCATE_TLB: never waits (`ENOMEM` when no window of
    /// the size is free, or earlier waiters of the size are queued), always
    /// writes its 32 output bytes, and frees the window if that write fails.
    /// Its reserved input is not checked, as in the C driver.
    pub(super) fn allocate_tlb(&self, arg: usize) -> Result {
        let request: AllocateTlbIn = read_plain(arg)?;
        let window = self
            .card
            .tlb
            .allocate(
                self.owner.id(),
                request.size,
                Requester::current(),
                Wait::Try,
            )
            .map_err(|e| match e {
                TlbError::Busy => ENOMEM,
                e => e.errno(),
            })?;
        let answer = AllocateTlbOut {
            id: window.id,
            reserved0: 0,
            mmap_offset_uc: window.mmap_offset_uc,
            mmap_offset_wc: window.mmap_offset_wc,
            reserved1: 0,
        };
        let written = write_back(arg.wrapping_add(size_of::<AllocateTlbIn>()), &answer);
        if written.is_err() {
            // The caller cannot know the id: the window must not leak.
            self.free_window(window.id)?;
        }
        written
    }

    pub(super) fn free_tlb(&self, arg: usize) -> Result {
        let request: FreeTlbIn = read_plain(arg)?;
        self.free_window(request.id)
    }

    pub(super) fn tlb_allocate(&self, arg: usize) -> Result {
        let mut request: TlbAllocate = read_extensible(arg)?;
        if request.reserved0 != 0 {
            return Err(EINVAL);
        }
        let wait = wait_from_flags(request.flags, request.deadline_ns)?;
        let window = self
            .card
            .tlb
            .allocate(self.owner.id(), request.size, Requester::current(), wait)
            .map_err(TlbError::errno)?;
        request.id = window.id;
        request.mmap_offset_uc = window.mmap_offset_uc;
        request.mmap_offset_wc = window.mmap_offset_wc;
        request.waited_ns = window.waited_ns;
        let written = write_back(arg, &request);
        if written.is_err() {
            self.free_window(window.id)?;
        }
        written
    }

    /// Frees window `id` of this file, revoking its mappings first.
    /// FREE_TLB: `EBUSY` while the window is mapped, as tt-kmd 2.10.
    fn free_window(&self, id: u32) -> Result {
        let memory = &self.card.memory;
        self.card
            .tlb
            .free_revoking(self.owner.id(), id, &|id| memory.window_mapped(id), &|id| {
                self.card.revoke_freed_window(id)
            })
            .map_err(|e| self.or_fenced(e))
    }

    /// QUERY_MAPPINGS, as tt-kmd 2.10: reads only `in`; writes
    /// `min(output_mapping_count, n)` mappings after it and zeros the rest
    /// of the `output_mapping_count` entries.
    pub(super) fn query_mappings(&self, arg: usize) -> Result {
        let request: QueryMappingsIn = read_plain(arg)?;
        let (mappings, valid) = mapping::mappings(self.card.memory.lens());
        let wanted = usize::try_from(request.output_mapping_count)?;
        let copied = wanted.min(valid);
        let extra = wanted - copied;
        // tt-kmd's limit: the bytes to clear must fit in a u32.
        if extra > u32::MAX as usize / size_of::<Mapping>() {
            return Err(EFAULT);
        }
        let out = arg.wrapping_add(size_of::<QueryMappingsIn>());
        let mut writer =
            UserSlice::new(UserPtr::from_addr(out), wanted * size_of::<Mapping>()).writer();
        for m in &mappings[..copied] {
            writer.write(m)?;
        }
        const ZEROS: [u8; 240] = [0; 240];
        while !writer.is_empty() {
            let chunk = writer.len().min(ZEROS.len());
            writer.write_slice(&ZEROS[..chunk])?;
        }
        Ok(())
    }

    /// CONFIGURE_TLB, as tt-kmd 2.10: reads only `in` (its reserved fields
    /// unchecked), `EINVAL` for an id >= 256 or a bad config, `EPERM` for a
    /// window this file does not hold.
    pub(super) fn configure_tlb(&self, arg: usize) -> Result {
        let r: ConfigureTlbIn = read_plain(arg)?;
        if r.id >= MAX_WINDOWS {
            return Err(EINVAL);
        }
        let config = NocTlbConfig {
            addr: r.addr,
            x_end: r.x_end,
            y_end: r.y_end,
            x_start: r.x_start,
            y_start: r.y_start,
            noc: r.noc,
            mcast: r.mcast,
            ordering: r.ordering,
            linked: r.linked,
            static_vc: r.static_vc,
        };
        self.card
            .memory
            .configure(&self.card.tlb, self.owner.id(), r.id as usize, &config)
            .map_err(|e| self.or_fenced(e))
    }

    /// EXPORT_TLB_DMABUF, as tt-kmd 2.10 and 2.11 (src/card.rs), `argsz`
    /// exactly 32 as there: writes the kernel's struct back with `fd`; the
    /// descriptor exists only once that write succeeded.
    pub(super) fn export_tlb_dmabuf(&self, arg: usize) -> Result {
        let mut request: ExportTlbDmabuf = read_exact_argsz(arg)?;
        let pending = self.card.export_window(self.owner.id(), &request)?;
        request.fd = pending.fd() as u32;
        // Not written: the export goes with `pending`.
        write_back(arg, &request)?;
        pending.install();
        Ok(())
    }
}

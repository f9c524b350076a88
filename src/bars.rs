// SPDX-License-Identifier: GPL-2.0

//! The card's BARs: the kernel's own mapping of what it accesses in them,
//! and their physical ranges, which userspace maps.
//!
//! BAR0, BAR2 and BAR4 (tt-kmd's RESOURCE0, 1 and 2) are requested at
//! probe as device-managed resources, each with the part the driver itself
//! accesses mapped ([`BarPart`]): revoked when the card is unbound, so a
//! command still running then gets `ENODEV` instead of touching a released
//! BAR. Only that part is mapped, never the TLB windows userspace maps: on
//! x86 a kernel mapping reserves the uncached memory type for what it
//! covers, and userspace's write-combined windows would get it too. A
//! device bound through `new_id` may lack some BARs; those are simply
//! absent.

use crate::rust_ext::{
    mm::IoRange,
    pci::BarPart, //
};
use core::ops::Range;
use kernel::{
    device::Bound,
    devres::Devres,
    io::{
        Io,
        Mmio,
        Region, //
    },
    pci,
    prelude::*, //
};

/// The BARs userspace sees as RESOURCE0, 1 and 2.
pub(crate) const RESOURCE_BARS: [u32; 3] = [0, 2, 4];

/// The width of one MMIO access: a single access of that size on the bus,
/// never split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    U8,
    U16,
    U32,
    U64,
}

impl Width {
    /// The width of `bytes` bytes: `None` unless 1, 2, 4 or 8.
    pub(crate) fn from_bytes(bytes: u8) -> Option<Self> {
        match bytes {
            1 => Some(Self::U8),
            2 => Some(Self::U16),
            4 => Some(Self::U32),
            8 => Some(Self::U64),
            _ => None,
        }
    }

    /// How many bytes an access of this width moves.
    pub(crate) fn bytes(self) -> u64 {
        match self {
            Self::U8 => 1,
            Self::U16 => 2,
            Self::U32 => 4,
            Self::U64 => 8,
        }
    }
}

/// The card's BARs.
pub(crate) struct Bars {
    /// The requested BAR0, 2 and 4, with the part of each that the kernel
    /// accesses mapped; revoked at unbind.
    mapped: [Option<Devres<BarPart>>; 3],
    /// Their physical ranges, for userspace mappings.
    ranges: [Option<IoRange>; 3],
}

impl Bars {
    /// Requests BAR0, 2 and 4 of `pdev`, those it has, and maps the byte
    /// range `parts[n]` of RESOURCE`n` (clipped to the BAR; an empty one
    /// maps nothing). A BAR the function does not have is absent, for the
    /// kernel and for userspace's mmap alike; one it has that cannot be
    /// requested (`EBUSY`: another driver holds it) or mapped (`ENOMEM`)
    /// fails the probe, as tt-kmd's does: a card with part of its
    /// registers missing is no card to hand out.
    pub(crate) fn map(pdev: &pci::Device<Bound>, parts: [Range<usize>; 3]) -> Result<Self> {
        let mut mapped = [None, None, None];
        let mut ranges = [None, None, None];
        let slots = mapped.iter_mut().zip(ranges.iter_mut());
        for ((slot, range), (bar, part)) in slots.zip(RESOURCE_BARS.into_iter().zip(parts)) {
            if pdev.resource_len(bar)? == 0 {
                continue;
            }
            let part = BarPart::new(pdev, bar, part, c"tenstorrent")?;
            *slot = Some(Devres::new(pdev.as_ref(), part)?);
            *range = IoRange::of_bar(pdev, bar);
        }
        Ok(Self { mapped, ranges })
    }

    /// Runs `f` on the kernel's mapping of RESOURCE`resource` and the
    /// offset in it of the BAR's byte `offset`, while the card is bound:
    /// `ENODEV` once it is unbound (or without that BAR), `EINVAL` for a
    /// resource past 2 or an offset before the mapped part.
    fn with_io<R>(
        &self,
        resource: usize,
        offset: usize,
        f: impl FnOnce(Mmio<'_, Region>, usize) -> Result<R>,
    ) -> Result<R> {
        let part = self.mapped.get(resource).ok_or(EINVAL)?;
        let part = part.as_ref().ok_or(ENODEV)?.try_access().ok_or(ENODEV)?;
        let io = part.io().ok_or(EINVAL)?;
        let at = offset.checked_sub(part.offset()).ok_or(EINVAL)?;
        f(io, at)
    }

    /// The physical range of RESOURCE`resource` (0, 1 or 2).
    pub(crate) fn range(&self, resource: usize) -> Option<&IoRange> {
        self.ranges.get(resource)?.as_ref()
    }

    /// The size of RESOURCE`resource`, 0 if it has none.
    pub(crate) fn len(&self, resource: usize) -> u64 {
        self.range(resource).map_or(0, IoRange::len)
    }

    /// Writes `words` to BAR0 from `offset` on, 32 bits at a time in order.
    /// `ENODEV` once the card is unbound (or without BAR0), `EINVAL`
    /// outside the part the kernel maps.
    pub(crate) fn write_bar0(&self, offset: usize, words: &[u32]) -> Result {
        self.with_io(0, offset, |io, at| {
            for (i, &word) in words.iter().enumerate() {
                io.try_write32(word, at + 4 * i)?;
            }
            Ok(())
        })
    }

    /// Writes each `(offset, value)` of `writes` to BAR2 (RESOURCE1), in
    /// order, and reads the last one back: writes are posted, and the chip
    /// may act on these registers on behalf of another requester (its NOC
    /// reaching host memory through the iATU) right after this returns;
    /// the read completes only once the writes have. `ENODEV` once the card
    /// is unbound (or without BAR2), `EINVAL` past its end.
    pub(crate) fn write_bar2(&self, writes: &[(usize, u32)]) -> Result {
        self.with_io(1, 0, |io, at| {
            for &(offset, value) in writes {
                io.try_write32(value, at + offset)?;
            }
            if let Some(&(offset, _)) = writes.last() {
                io.try_read32(at + offset)?;
            }
            Ok(())
        })
    }

    /// Reads the 32 bits at `offset` of RESOURCE`resource`. `ENODEV` once the
    /// card is unbound (or without that BAR), `EINVAL` outside the part the
    /// kernel maps.
    pub(crate) fn read32(&self, resource: usize, offset: usize) -> Result<u32> {
        self.with_io(resource, offset, |io, at| io.try_read32(at))
    }

    /// Writes `value` at `offset` of RESOURCE`resource` (posted: it may
    /// reach the card after this returns).
    pub(crate) fn write32(&self, resource: usize, offset: usize, value: u32) -> Result {
        self.with_io(resource, offset, |io, at| io.try_write32(value, at))
    }

    /// Reads `width` at `offset` of RESOURCE`resource` in one access,
    /// zero-extended. `ENODEV` once the card is unbound (or without that
    /// BAR), `EINVAL` outside the part the kernel maps.
    pub(crate) fn read(&self, resource: usize, offset: usize, width: Width) -> Result<u64> {
        self.with_io(resource, offset, |io, at| match width {
            Width::U8 => io.try_read8(at).map(u64::from),
            Width::U16 => io.try_read16(at).map(u64::from),
            Width::U32 => io.try_read32(at).map(u64::from),
            Width::U64 => io.try_read64(at),
        })
    }

    /// Writes the low `width` of `value` at `offset` of RESOURCE`resource`
    /// in one access (posted: it may reach the card after this returns).
    pub(crate) fn write(&self, resource: usize, offset: usize, width: Width, value: u64) -> Result {
        // Truncation is the point: only the low `width` bytes are written.
        self.with_io(resource, offset, |io, at| match width {
            Width::U8 => io.try_write8(value as u8, at),
            Width::U16 => io.try_write16(value as u16, at),
            Width::U32 => io.try_write32(value as u32, at),
            Width::U64 => io.try_write64(value, at),
        })
    }

    /// Writes `value` at `offset` of RESOURCE`resource`, then reads it back
    /// so that the write has reached the card when this returns. `ENODEV`
    /// once the card is unbound (or without that BAR), `EINVAL` outside the
    /// part the kernel maps.
    pub(crate) fn write32_flushed(&self, resource: usize, offset: usize, value: u32) -> Result {
        self.with_io(resource, offset, |io, at| {
            io.try_write32(value, at)?;
            io.try_read32(at)?;
            Ok(())
        })
    }
}

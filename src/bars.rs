// SPDX-License-Identifier: GPL-2.0

//! The card's BARs: the kernel's own mapping of them and their physical
//! ranges, which userspace maps.
//!
//! BAR0, BAR2 and BAR4 (tt-kmd's RESOURCE0, 1 and 2) are requested and
//! mapped at probe with `pci::Bar` as device-managed resources: the
//! mappings are revoked when the card is unbound, so a command still
//! running then gets `ENODEV` instead of touching a released BAR. A device
//! bound through `new_id` may lack some BARs; those are simply absent.

use crate::rust_ext::mm::IoRange;
use core::ops::Deref;
use kernel::{
    device::Bound,
    io::Io,
    pci::{
        self,
        DevresBar, //
    },
    prelude::*, //
};

/// The BARs userspace sees as RESOURCE0, 1 and 2.
pub(crate) const RESOURCE_BARS: [u32; 3] = [0, 2, 4];

/// The card's BARs.
pub(crate) struct Bars {
    /// The kernel's mappings of BAR0, 2 and 4, revoked at unbind. BAR0
    /// holds the TLB registers.
    mapped: [Option<DevresBar>; 3],
    /// Their physical ranges, for userspace mappings.
    ranges: [Option<IoRange>; 3],
}

impl Bars {
    /// Requests and maps BAR0, 2 and 4 of `pdev`, those it has.
    pub(crate) fn map(pdev: &pci::Device<Bound>) -> Self {
        let map_one = |bar: u32| -> Option<DevresBar> {
            let mapped = pdev.iomap_region(bar, c"tenstorrent").ok()?;
            mapped.into_devres().ok()
        };
        let mapped = RESOURCE_BARS.map(map_one);
        let ranges = RESOURCE_BARS.map(|bar| IoRange::of_bar(pdev, bar));
        Self { mapped, ranges }
    }

    /// The kernel's mapping of RESOURCE`resource`, while the card is bound:
    /// `ENODEV` once it is unbound (or without that BAR), `EINVAL` for a
    /// resource past 2.
    fn access(&self, resource: usize) -> Result<impl Deref<Target = pci::Bar<'_>> + '_> {
        let bar = self.mapped.get(resource).ok_or(EINVAL)?;
        bar.as_ref().ok_or(ENODEV)?.try_access().ok_or(ENODEV)
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
    /// `ENODEV` once the card is unbound (or without BAR0), `EINVAL` past
    /// its end.
    pub(crate) fn write_bar0(&self, offset: usize, words: &[u32]) -> Result {
        let bar = self.access(0)?;
        for (i, &word) in words.iter().enumerate() {
            bar.try_write32(word, offset + 4 * i)?;
        }
        Ok(())
    }

    /// Writes each `(offset, value)` of `writes` to BAR2 (RESOURCE1), in
    /// order, and reads the last one back: writes are posted, and the chip
    /// may act on these registers on behalf of another requester (its NOC
    /// reaching host memory through the iATU) right after this returns;
    /// the read completes only once the writes have. `ENODEV` once the card
    /// is unbound (or without BAR2), `EINVAL` past its end.
    pub(crate) fn write_bar2(&self, writes: &[(usize, u32)]) -> Result {
        let bar = self.access(1)?;
        for &(offset, value) in writes {
            bar.try_write32(value, offset)?;
        }
        if let Some(&(offset, _)) = writes.last() {
            bar.try_read32(offset)?;
        }
        Ok(())
    }

    /// Reads the 32 bits at `offset` of RESOURCE`resource`. `ENODEV` once the
    /// card is unbound (or without that BAR), `EINVAL` past its end.
    pub(crate) fn read32(&self, resource: usize, offset: usize) -> Result<u32> {
        let bar = self.access(resource)?;
        bar.try_read32(offset)
    }

    /// Writes `value` at `offset` of RESOURCE`resource` (posted: it may
    /// reach the card after this returns).
    pub(crate) fn write32(&self, resource: usize, offset: usize, value: u32) -> Result {
        let bar = self.access(resource)?;
        bar.try_write32(value, offset)
    }

    /// Writes `value` at `offset` of RESOURCE`resource`, then reads it back
    /// so that the write has reached the card when this returns. `ENODEV`
    /// once the card is unbound (or without that BAR), `EINVAL` past its
    /// end.
    pub(crate) fn write32_flushed(&self, resource: usize, offset: usize, value: u32) -> Result {
        let bar = self.access(resource)?;
        bar.try_write32(value, offset)?;
        bar.try_read32(offset)?;
        Ok(())
    }
}

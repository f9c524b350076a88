// SPDX-License-Identifier: GPL-2.0

//! The chip's window layout: how many TLB windows of which sizes a card has,
//! in id order, and where each sits in the BARs' mmap offsets.
//!
//! This is a fact of the chip (and, on Blackhole, of BAR4's size); which
//! windows are free or held is the window pool's state ([`crate::tlb`]).

use super::Family;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Most size classes a layout has.
pub(crate) const MAX_CLASSES: usize = 3;

/// Windows of one size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SizeClass {
    pub(crate) size: u64,
    /// Windows of this size, those the kernel keeps included.
    pub(crate) total: u32,
    /// Windows at the end of the class that the kernel keeps for itself.
    pub(crate) kept: u32,
    /// Offset of the first window, as the mmap offsets count it.
    pub(crate) base: u64,
    /// The resource whose BAR shows the windows (0: BAR0, 2: BAR4), and
    /// the offset of the first window in that BAR.
    pub(crate) resource: usize,
    pub(crate) bar_offset: u64,
}

/// The windows of a card, by class, in id order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub(crate) family: Family,
    classes: [SizeClass; MAX_CLASSES],
    count: usize,
}

impl Layout {
    /// Wormhole: 156 x 1 MiB, 10 x 2 MiB, 20 x 16 MiB (the last one kept by
    /// the kernel), packed in that order in BAR0 from its start, where the
    /// mmap offsets put them too.
    pub(crate) const fn wormhole() -> Self {
        Self {
            family: Family::Wormhole,
            classes: [
                SizeClass {
                    size: MIB,
                    total: 156,
                    kept: 0,
                    base: 0,
                    resource: 0,
                    bar_offset: 0,
                },
                SizeClass {
                    size: 2 * MIB,
                    total: 10,
                    kept: 0,
                    base: 156 * MIB,
                    resource: 0,
                    bar_offset: 156 * MIB,
                },
                SizeClass {
                    size: 16 * MIB,
                    total: 20,
                    kept: 1,
                    base: 176 * MIB,
                    resource: 0,
                    bar_offset: 176 * MIB,
                },
            ],
            count: 3,
        }
    }

    /// Blackhole: 202 x 2 MiB in BAR0 (the last one kept by the kernel) and
    /// `windows_4g` x 4 GiB in BAR4 from its start (its size / 4 GiB; 8 on
    /// a full card), whose mmap offsets start after BAR0's 512 MiB.
    pub(crate) const fn blackhole(windows_4g: u32) -> Self {
        let unused = SizeClass {
            size: 0,
            total: 0,
            kept: 0,
            base: 0,
            resource: 0,
            bar_offset: 0,
        };
        Self {
            family: Family::Blackhole,
            classes: [
                SizeClass {
                    size: 2 * MIB,
                    total: 202,
                    kept: 1,
                    base: 0,
                    resource: 0,
                    bar_offset: 0,
                },
                SizeClass {
                    size: 4 * GIB,
                    total: windows_4g,
                    kept: 0,
                    base: 512 * MIB,
                    resource: 2,
                    bar_offset: 0,
                },
                unused,
            ],
            count: 2,
        }
    }

    /// Blackhole with as many 4 GiB windows as a BAR4 of `bar4_len` bytes
    /// holds.
    pub(crate) fn blackhole_in_bar4(bar4_len: u64) -> Self {
        Self::blackhole(u32::try_from(bar4_len / (4 * GIB)).unwrap_or(0))
    }

    /// The size classes, in id order.
    pub(crate) fn classes(&self) -> &[SizeClass] {
        &self.classes[..self.count]
    }

    /// The window the kernel keeps for its own NOC accesses: the last of the
    /// class that keeps one.
    pub(crate) fn kernel_window(&self) -> Option<usize> {
        let mut first = 0usize;
        for c in self.classes() {
            if c.kept > 0 {
                return Some(first + c.total as usize - 1);
            }
            first += c.total as usize;
        }
        None
    }

    /// Windows in all, kept ones included.
    pub(crate) fn total(&self) -> usize {
        self.classes().iter().map(|c| c.total as usize).sum()
    }

    /// The class of windows of exactly `size` bytes.
    pub(crate) fn class_of_size(&self, size: u64) -> Option<usize> {
        self.classes()
            .iter()
            .position(|c| c.size == size && c.total > c.kept)
    }

    /// The ids of class `class`: the windows a file may be given.
    pub(crate) fn ids(&self, class: usize) -> core::ops::Range<usize> {
        let first: usize = self.classes()[..class]
            .iter()
            .map(|c| c.total as usize)
            .sum();
        let c = &self.classes()[class];
        first..first + (c.total - c.kept) as usize
    }

    /// The class and position in it of window `id`.
    pub(crate) fn locate(&self, id: usize) -> Option<(usize, usize)> {
        let mut first = 0;
        for (class, c) in self.classes().iter().enumerate() {
            if id < first + c.total as usize {
                return Some((class, id - first));
            }
            first += c.total as usize;
        }
        None
    }
}

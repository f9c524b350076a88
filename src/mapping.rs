// SPDX-License-Identifier: GPL-2.0

//! What userspace maps: QUERY_MAPPINGS, mmap of the BARs and of TLB
//! windows, CONFIGURE_TLB, and the revocation of mappings.
//!
//! The mmap offsets are tt-kmd 2.10's (`memory.c`): `RESOURCEn_UC` at
//! `2n << 36`, `RESOURCEn_WC` at `(2n + 1) << 36` (RESOURCE0/1/2 are BAR0,
//! BAR2 and BAR4), and the TLB windows at `6 << 36` (UC) and `7 << 36` (WC)
//! plus the window's BAR0 offset (Blackhole's 4 GiB windows in BAR4: after
//! BAR0's 512 MiB). A mapping must lie inside one resource (`EINVAL`
//! otherwise); a window mapping must start at a window and be no larger
//! than it, and only the file that holds the window may map it (`EPERM`,
//! the kernel's own window included).
//!
//! Pages are inserted at fault time, never at mmap: every open file of a
//! card has the card's own `address_space` as its `f_mapping`
//! ([`SharedMapping`]), so the driver revokes mappings with
//! `unmap_mapping_range`, whatever node the file came from. The fault
//! handler checks, under the lock that the revoker takes first, that the
//! mapping is still allowed, and inserts the page before letting go:
//!
//! - a window's fault holds the pool's mutex ([`TlbPool::with_held`]);
//!   freeing a window marks it not held under that mutex, zaps its
//!   mappings with the mutex released, resets its register, and only then
//!   hands it on. No fault can reinstate a revoked window (it finds the
//!   window not held and gets `SIGBUS`), and the mutex is never held while
//!   zapping, so there is no lock cycle with `mmap_lock` (faults take the
//!   mutex under it; the zap takes neither);
//! - a BAR's fault holds [`CardMemory`]'s `live` mutex while it checks
//!   that its file is not fenced and inserts the page; unbind clears
//!   `live`, then zaps every mapping of the card before the BARs are
//!   released, and a fencing reset sets its fence under the same mutex
//!   ([`CardMemory::excluding_faults`]) before it zaps: a fault that
//!   passed the check inserts before the zap, which removes its page.
//!
//! FREE_TLB of a window that is still mapped is `EBUSY`, as tt-kmd 2.10
//! answers; a window freed by a reset or at close has its mappings revoked,
//! and the next access through one gets `SIGBUS`, whatever process made it.
//!
//! Memory types: on x86 a physical page has one memory type at a time
//! (PAT), and a page inserted at fault time gets the type reserved for its
//! range, not the one its VMA asked for; a range nobody reserved is
//! uncached. So the kernel maps only what it accesses itself
//! ([`kernel_bar_parts`]: never a window userspace may map), and a window's
//! first mapping since it was taken fixes its type until it is freed: a
//! write-combined one reserves write-combining for the window
//! ([`WriteCombining`]), and a mapping of the other type meanwhile is
//! `EBUSY` instead of silently getting the first's.

use crate::{
    arbiter::OwnerId,
    bars::{
        Bars,
        Width, //
    },
    chip::{
        tlb_regs::{
            self,
            NocTlbConfig,
            RegisterWrites, //
        },
        Layout, //
    },
    rust_ext::mm::{
        set_io_pfnmap,
        set_tag,
        Caching,
        FaultResult,
        IoRange,
        SharedMapping,
        VmFault,
        WriteCombining, //
    },
    tlb::TlbPool,
    uapi::Mapping,
};
use core::{
    ops::Range,
    sync::atomic::{
        AtomicU64,
        Ordering, //
    },
};
use kernel::{
    mm::virt::VmaNew,
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
};

/// Each resource's offset space is this large.
pub(crate) const MMAP_RESOURCE_SIZE: u64 = 1 << 36;
const MMAP_RESOURCE_COUNT: u64 = 3;
/// The TLB windows' offset spaces.
pub(crate) const MMAP_OFFSET_TLB_UC: u64 = 6 << 36;
pub(crate) const MMAP_OFFSET_TLB_WC: u64 = 7 << 36;

/// QUERY_MAPPINGS's mapping ids: `RESOURCEn_UC` = 2n + 1, `_WC` = 2n + 2.
const MAPPING_RESOURCE0_UC: u32 = 1;

/// The mappings QUERY_MAPPINGS reports for BARs of `lens` bytes
/// (RESOURCE0/1/2), in tt-kmd's order: UC then WC of each resource that
/// has a BAR, packed at the front.
pub(crate) fn mappings(lens: [u64; 3]) -> ([Mapping; 6], usize) {
    let mut out = [Mapping::default(); 6];
    let mut count = 0;
    for (resource, &len) in lens.iter().enumerate() {
        if len == 0 {
            continue;
        }
        for caching in 0..2u32 {
            let kind = 2 * resource as u32 + caching;
            out[count] = Mapping {
                mapping_id: MAPPING_RESOURCE0_UC + kind,
                reserved: 0,
                mapping_base: u64::from(kind) * MMAP_RESOURCE_SIZE,
                mapping_size: len,
            };
            count += 1;
        }
    }
    (out, count)
}

/// A TLB window as the mmap offsets see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowPlace {
    pub(crate) id: usize,
    /// Offset of its first byte in the TLB offset space.
    pub(crate) start: u64,
    pub(crate) size: u64,
    /// The resource (0: BAR0, 2: BAR4) and offset of its first byte there.
    pub(crate) resource: usize,
    pub(crate) bar_offset: u64,
}

/// The window of `layout` whose TLB-space offsets contain `offset`.
pub(crate) fn window_at(layout: &Layout, offset: u64) -> Option<WindowPlace> {
    let mut first = 0usize;
    for c in layout.classes() {
        let end = c.base + u64::from(c.total) * c.size;
        if offset >= c.base && offset < end {
            let position = (offset - c.base) / c.size;
            let start = c.base + position * c.size;
            return Some(WindowPlace {
                id: first + position as usize,
                start,
                size: c.size,
                resource: c.resource,
                bar_offset: c.bar_offset + (start - c.base),
            });
        }
        first += c.total as usize;
    }
    None
}

/// The place of window `id` of `layout`.
pub(crate) fn window_place(layout: &Layout, id: usize) -> Option<WindowPlace> {
    let mut first = 0usize;
    for c in layout.classes() {
        if id < first + c.total as usize {
            return window_at(layout, c.base + (id - first) as u64 * c.size);
        }
        first += c.total as usize;
    }
    None
}

/// The byte ranges of RESOURCE0/1/2 that the kernel accesses itself, and
/// maps ([`Bars::map`]): in BAR0 its own window and what follows it to the
/// BAR's end (the window registers from `tlb_regs::TLB_REGS_BASE` on); BAR2
/// whole (the PCIe controller's registers, its iATU); nothing of BAR4.
/// Every window a file may map lies before the kernel's own: none is
/// mapped by the kernel, so none gets the kernel mapping's memory type.
pub(crate) fn kernel_bar_parts(layout: &Layout) -> [Range<usize>; 3] {
    let bar0 = layout
        .kernel_window()
        .and_then(|id| window_place(layout, id))
        .filter(|place| place.resource == 0)
        .and_then(|place| usize::try_from(place.bar_offset).ok())
        .unwrap_or(tlb_regs::TLB_REGS_BASE);
    [bar0..usize::MAX, 0..usize::MAX, 0..0]
}

/// The kernel's own window, aimed at what a caller asked for, while its
/// mutex is held.
struct AimedWindow<'a> {
    bars: &'a Bars,
    /// The resource (0: BAR0, 2: BAR4) and offset of the asked-for address.
    resource: usize,
    offset: usize,
    /// BAR0 offset of the window's register.
    register: usize,
}

/// The kernel's own window aimed at one window-sized block of a tile's NOC
/// addresses, for a run of accesses inside it, while its mutex is held
/// ([`CardMemory::kernel_noc_run`]).
pub(crate) struct KernelRun<'a> {
    window: &'a AimedWindow<'a>,
    /// The NOC address of the block's first byte, and the block's size.
    base: u64,
    size: u64,
}

impl KernelRun<'_> {
    /// The BAR offset of the word at NOC address `addr`: `EINVAL` outside
    /// the block the window is aimed at.
    fn offset(&self, addr: u64) -> Result<usize> {
        let within = addr
            .checked_sub(self.base)
            .filter(|&o| o <= self.size - 4)
            .ok_or(EINVAL)?;
        self.window
            .offset
            .checked_add(usize::try_from(within)?)
            .ok_or(EINVAL)
    }

    /// Reads the 32 bits at NOC address `addr` of the block.
    pub(crate) fn read32(&self, addr: u64) -> Result<u32> {
        self.window
            .bars
            .read32(self.window.resource, self.offset(addr)?)
    }

    /// Writes `value` at NOC address `addr` of the block (posted: a read
    /// through the window after it returns only once it has landed).
    pub(crate) fn write32(&self, addr: u64, value: u32) -> Result {
        self.window
            .bars
            .write32(self.window.resource, self.offset(addr)?, value)
    }
}

/// The memory type a window is mapped with by its holder, fixed by its
/// first mapping since it was taken (see the module's documentation).
enum WindowCaching {
    Unmapped,
    Uncached,
    /// The reservation is freed (dropped) when the window is revoked.
    WriteCombined {
        _reserved: WriteCombining,
    },
}

/// What an mmap request maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// `resource` from `offset` on.
    Bar { resource: usize, offset: u64 },
    /// A window, from its start.
    Window(WindowPlace),
}

/// Decodes an mmap of `len` bytes at file offset `offset`: `EINVAL` unless
/// it lies within one BAR of `lens` bytes, or starts at a window of
/// `layout` and is no longer than it (and its BAR holds it).
pub(crate) fn decode_mmap(
    layout: &Layout,
    lens: [u64; 3],
    offset: u64,
    len: u64,
) -> Result<(Target, Caching)> {
    let region = offset / MMAP_RESOURCE_SIZE;
    let within = offset % MMAP_RESOURCE_SIZE;
    let caching = if region % 2 == 0 {
        Caching::Uncached
    } else {
        Caching::WriteCombined
    };
    let end = within.checked_add(len).ok_or(EINVAL)?;
    if len == 0 {
        return Err(EINVAL);
    }
    if region < 2 * MMAP_RESOURCE_COUNT {
        let resource = (region / 2) as usize;
        let bar_len = lens[resource];
        if bar_len == 0 || end > bar_len {
            return Err(EINVAL);
        }
        return Ok((
            Target::Bar {
                resource,
                offset: within,
            },
            caching,
        ));
    }
    if region == MMAP_OFFSET_TLB_UC / MMAP_RESOURCE_SIZE
        || region == MMAP_OFFSET_TLB_WC / MMAP_RESOURCE_SIZE
    {
        let window = window_at(layout, within).ok_or(EINVAL)?;
        if window.start != within || len > window.size {
            return Err(EINVAL);
        }
        if window.bar_offset + len > lens[window.resource] {
            return Err(EINVAL);
        }
        return Ok((Target::Window(window), caching));
    }
    Err(EINVAL)
}

/// Whether file offset `offset` is in the TLB windows' offset spaces.
pub(crate) fn is_window_offset(offset: u64) -> bool {
    (MMAP_OFFSET_TLB_UC..MMAP_OFFSET_TLB_WC + MMAP_RESOURCE_SIZE).contains(&offset)
}

/// Where a faulting page at file offset `offset` lies: a BAR page, or a
/// page of a window (by id) and its BAR offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Page {
    Bar {
        resource: usize,
        offset: u64,
    },
    Window {
        id: usize,
        resource: usize,
        offset: u64,
    },
}

/// Decodes a faulting page's offset (the VMA was checked at mmap).
pub(crate) fn decode_page(layout: &Layout, offset: u64) -> Option<Page> {
    let region = offset / MMAP_RESOURCE_SIZE;
    let within = offset % MMAP_RESOURCE_SIZE;
    if region < 2 * MMAP_RESOURCE_COUNT {
        return Some(Page::Bar {
            resource: (region / 2) as usize,
            offset: within,
        });
    }
    if region == 6 || region == 7 {
        let w = window_at(layout, within)?;
        return Some(Page::Window {
            id: w.id,
            resource: w.resource,
            offset: w.bar_offset + (within - w.start),
        });
    }
    None
}

/// A card's mappable memory: its BARs, the `address_space` of its files,
/// and what the fault handler checks.
#[pin_data]
pub(crate) struct CardMemory {
    bars: Bars,
    /// Shared with the DMA buffers, which zap their own mappings.
    shared: Arc<SharedMapping>,
    /// Whether BAR pages may be faulted in: cleared at unbind.
    #[pin]
    live: Mutex<bool>,
    /// Held while the kernel's own window is aimed and used.
    #[pin]
    kernel_window: Mutex<()>,
    /// Per window: how many times it was revoked in the high 32 bits, and
    /// how many VMAs map it since then in the low. A window mapping is
    /// tagged with its window's count at mmap and faults only while it is
    /// the same: a file that frees a window and takes it again does not get
    /// its old, revoked mappings back.
    windows: KVec<AtomicU64>,
    /// BAR VMAs by file, RESOURCE and caching (WC or not), for the debugfs
    /// `mappings` view.
    #[pin]
    bar_vmas: Mutex<KVec<BarVmas>>,
    /// Per window, the memory type of its holder's mappings. Taken under
    /// the pool's mutex at mmap, alone at revocation.
    #[pin]
    window_caching: Mutex<KVec<WindowCaching>>,
}

/// The BAR VMAs of one file of one RESOURCE and caching.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BarVmas {
    pub(crate) owner: OwnerId,
    pub(crate) resource: usize,
    pub(crate) write_combined: bool,
    pub(crate) count: u32,
}

impl CardMemory {
    pub(crate) fn new(bars: Bars, windows: usize) -> Result<impl PinInit<Self>> {
        let shared = Arc::new(SharedMapping::new()?, GFP_KERNEL)?;
        let mut window_states = KVec::with_capacity(windows, GFP_KERNEL)?;
        let mut window_caching = KVec::with_capacity(windows, GFP_KERNEL)?;
        for _ in 0..windows {
            window_states.push(AtomicU64::new(0), GFP_KERNEL)?;
            window_caching.push(WindowCaching::Unmapped, GFP_KERNEL)?;
        }
        Ok(pin_init!(Self {
            bars,
            shared,
            live <- new_mutex!(true),
            kernel_window <- new_mutex!(()),
            windows: window_states,
            bar_vmas <- new_mutex!(KVec::new()),
            window_caching <- new_mutex!(window_caching),
        }))
    }

    pub(crate) fn shared_mapping(&self) -> &SharedMapping {
        &self.shared
    }

    /// The `address_space` of the card's files, to keep.
    pub(crate) fn shared_mapping_ref(&self) -> Arc<SharedMapping> {
        self.shared.clone()
    }

    /// The physical range of RESOURCE`resource` (0, 1, 2: BAR0, 2, 4).
    pub(crate) fn bar_range(&self, resource: usize) -> Option<IoRange> {
        self.bars.range(resource).copied()
    }

    /// The sizes of RESOURCE0/1/2.
    pub(crate) fn lens(&self) -> [u64; 3] {
        [self.bars.len(0), self.bars.len(1), self.bars.len(2)]
    }

    /// The card is being unbound: no BAR page can be faulted in any more,
    /// and every mapping of every file is zapped. Windows are refused by
    /// the pool, which is shut down first.
    pub(crate) fn revoke_all(&self) {
        *self.live.lock() = false;
        self.shared.unmap(0, 0);
        // Nothing maps a window any more: the BARs are about to go.
        for caching in self.window_caching.lock().iter_mut() {
            *caching = WindowCaching::Unmapped;
        }
    }

    /// Zaps every mapping of every file, which the next access faults in
    /// again if its file may still map it (a reset: the fenced files may
    /// not, src/reset.rs).
    pub(crate) fn zap_all(&self) {
        self.shared.unmap(0, 0);
    }

    /// Sets `vma` up for a BAR.
    pub(crate) fn mmap(&self, vma: &VmaNew, caching: Caching) -> Result {
        if !*self.live.lock() {
            return Err(ENODEV);
        }
        set_io_pfnmap(vma, caching)
    }

    /// Sets `vma` up for `window`, whose holder the caller checked and
    /// keeps from changing (see [`TlbPool::with_held`]), and counts it.
    /// `EBUSY` if the window is mapped with the other memory type since it
    /// was taken; the first write-combined mapping reserves that type for
    /// the window.
    pub(crate) fn mmap_window(
        &self,
        vma: &VmaNew,
        caching: Caching,
        window: WindowPlace,
    ) -> Result {
        let id = window.id;
        // First, so that a VMA it refuses (a private one, say) leaves the
        // window's memory type as it was.
        self.mmap(vma, caching)?;
        {
            let mut states = self.window_caching.lock();
            let state = states.get_mut(id).ok_or(EINVAL)?;
            match (&*state, caching) {
                (WindowCaching::Unmapped, Caching::WriteCombined) => {
                    let range = self.bars.range(window.resource).ok_or(ENODEV)?;
                    let reserved = WriteCombining::reserve(range, window.bar_offset, window.size)?;
                    *state = WindowCaching::WriteCombined {
                        _reserved: reserved,
                    };
                }
                (WindowCaching::Unmapped, _) => *state = WindowCaching::Uncached,
                (WindowCaching::WriteCombined { .. }, Caching::WriteCombined) => {}
                (WindowCaching::Uncached, Caching::Uncached) => {}
                _ => return Err(EBUSY),
            }
        }
        set_tag(vma, self.revocation_count(id));
        self.count_vma(id, self.revocation_count(id), true);
        Ok(())
    }

    fn revocation_count(&self, id: usize) -> usize {
        self.windows
            .get(id)
            .map_or(0, |state| (state.load(Ordering::Acquire) >> 32) as usize)
    }

    /// Counts a VMA of window `id` made (`true`) or gone, if it maps the
    /// window since its last revocation (`tag`): the mappings of earlier
    /// holders were revoked and count no more.
    fn count_vma(&self, id: usize, tag: usize, made: bool) {
        let Some(state) = self.windows.get(id) else {
            return;
        };
        let _ = state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
            if (s >> 32) as usize != tag {
                return None;
            }
            let count = s as u32;
            let count = if made {
                count.saturating_add(1)
            } else {
                count.saturating_sub(1)
            };
            Some(s & !0xFFFF_FFFF | u64::from(count))
        });
    }

    /// A VMA of file `owner` at file offset `offset` was made (`made`) or
    /// went away; `tag` is its mapping's (see [`CardMemory::count_vma`]).
    pub(crate) fn vma_changed(
        &self,
        layout: &Layout,
        owner: OwnerId,
        offset: u64,
        tag: usize,
        made: bool,
    ) {
        match decode_page(layout, offset) {
            Some(Page::Window { id, .. }) => self.count_vma(id, tag, made),
            Some(Page::Bar { resource, .. }) => {
                let write_combined = (offset / MMAP_RESOURCE_SIZE) % 2 == 1;
                let mut vmas = self.bar_vmas.lock();
                let found = vmas.iter().position(|v| {
                    v.owner == owner && v.resource == resource && v.write_combined == write_combined
                });
                match (found, made) {
                    (Some(i), true) => vmas[i].count = vmas[i].count.saturating_add(1),
                    (Some(i), false) if vmas[i].count > 1 => vmas[i].count -= 1,
                    (Some(i), false) => {
                        let _ = vmas.remove(i);
                    }
                    (None, true) => {
                        // Best effort: the view misses a mapping without memory.
                        let v = BarVmas {
                            owner,
                            resource,
                            write_combined,
                            count: 1,
                        };
                        let _ = vmas.push(v, GFP_KERNEL);
                    }
                    (None, false) => {}
                }
            }
            None => {}
        }
    }

    /// The BAR VMAs of every file.
    pub(crate) fn bar_vmas(&self) -> Result<KVec<BarVmas>> {
        let vmas = self.bar_vmas.lock();
        let mut out = KVec::with_capacity(vmas.len(), GFP_KERNEL)?;
        for v in vmas.iter() {
            out.push(*v, GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// Whether window `id` is mapped by a VMA made since its last
    /// revocation: FREE_TLB then answers `EBUSY`, as tt-kmd 2.10's.
    pub(crate) fn window_mapped(&self, id: usize) -> bool {
        self.windows
            .get(id)
            .is_some_and(|state| state.load(Ordering::Acquire) as u32 != 0)
    }

    /// Runs `f` (a reset setting its fence) with no BAR fault in progress:
    /// a fault that checked [`CardMemory::fault`]'s `fenced` before `f`
    /// has inserted its page, which the zap after `f` removes.
    pub(crate) fn excluding_faults<R>(&self, f: impl FnOnce() -> R) -> R {
        let _live = self.live.lock();
        f()
    }

    /// Faults in the page at `fault`'s offset for the file `owner`, unless
    /// `fenced` says a reset fenced it (`SIGBUS`).
    pub(crate) fn fault(
        &self,
        tlb: &TlbPool,
        owner: OwnerId,
        fault: &VmFault,
        fenced: impl FnOnce() -> bool,
    ) -> FaultResult {
        match decode_page(tlb.layout(), fault.offset()) {
            Some(Page::Bar { resource, offset }) => {
                let live = self.live.lock();
                match self.bars.range(resource) {
                    Some(range) if *live && !fenced() => fault.insert(range, offset),
                    _ => FaultResult::SIGBUS,
                }
            }
            Some(Page::Window {
                id,
                resource,
                offset,
            }) => {
                let Some(range) = self.bars.range(resource) else {
                    return FaultResult::SIGBUS;
                };
                // The count only changes while the window is not held, and
                // `with_held` holds the pool's mutex: it is stable here. A
                // fenced file holds no window: a reset frees them under
                // that mutex before it zaps.
                tlb.with_held(owner, id, || {
                    if fault.tag() == self.revocation_count(id) {
                        fault.insert(range, offset)
                    } else {
                        FaultResult::SIGBUS
                    }
                })
                .unwrap_or(FaultResult::SIGBUS)
            }
            None => FaultResult::SIGBUS,
        }
    }

    /// Where the kernel's own window must be aimed, and at which BAR offset
    /// written, to reach NOC address `addr` of tile (`x`, `y`) on `noc`
    /// with strict ordering: `EINVAL` if the window cannot reach it.
    fn kernel_target(
        layout: &Layout,
        x: u16,
        y: u16,
        noc: u8,
        addr: u64,
    ) -> Result<(RegisterWrites, usize, usize)> {
        let id = layout.kernel_window().ok_or(EINVAL)?;
        let place = window_place(layout, id).ok_or(EINVAL)?;
        let config = NocTlbConfig {
            addr: addr & !(place.size - 1),
            x_end: x,
            y_end: y,
            noc,
            ordering: 1,
            ..NocTlbConfig::default()
        };
        let writes = tlb_regs::encode(layout, id, &config)?;
        let offset = usize::try_from(place.bar_offset + (addr & (place.size - 1)))?;
        Ok((writes, place.resource, offset))
    }

    /// Whether the kernel's window can reach `addr` of tile (`x`, `y`).
    pub(crate) fn kernel_can_reach(layout: &Layout, x: u16, y: u16, noc: u8, addr: u64) -> bool {
        Self::kernel_target(layout, x, y, noc, addr).is_ok()
    }

    /// Aims the kernel's own window at NOC address `addr` of tile (`x`,
    /// `y`) on `noc` and runs `f` with it, the window held for `f`: every
    /// user aims it again under its mutex, so none finds it where another
    /// left it, nor where a reset of the chip left it.
    fn through_kernel_window<R>(
        &self,
        layout: &Layout,
        (x, y, noc): (u16, u16, u8),
        addr: u64,
        f: impl FnOnce(&AimedWindow<'_>) -> Result<R>,
    ) -> Result<R> {
        let (writes, resource, offset) = Self::kernel_target(layout, x, y, noc, addr)?;
        let _window = self.kernel_window.lock();
        self.write(&writes)?;
        f(&AimedWindow {
            bars: &self.bars,
            resource,
            offset,
            register: writes.offset,
        })
    }

    /// Aims the kernel's own window once at the window-sized block of NOC
    /// addresses that holds `addr` of `tile`, and runs `f` with it for a
    /// run of accesses inside that block, the window held meanwhile: one
    /// aim for the run instead of one per word (each is three register
    /// writes on Blackhole). The invariant is
    /// [`CardMemory::through_kernel_window`]'s: aimed again under its mutex
    /// by every user.
    pub(crate) fn kernel_noc_run<R>(
        &self,
        layout: &Layout,
        tile: (u16, u16, u8),
        addr: u64,
        f: impl FnOnce(&KernelRun<'_>) -> Result<R>,
    ) -> Result<R> {
        let id = layout.kernel_window().ok_or(EINVAL)?;
        let size = window_place(layout, id).ok_or(EINVAL)?.size;
        let base = addr & !(size - 1);
        self.through_kernel_window(layout, tile, base, |window| {
            f(&KernelRun { window, base, size })
        })
    }

    /// Reads the 32 bits at offset `offset` of BAR0 in the part the kernel
    /// maps (Wormhole's ARC registers and CSM, after the windows): `EINVAL`
    /// before that part, `ENODEV` once the card is unbound.
    pub(crate) fn bar0_read32(&self, offset: usize) -> Result<u32> {
        self.bars.read32(0, offset)
    }

    /// Writes `value` at offset `offset` of BAR0 (posted), as
    /// [`CardMemory::bar0_read32`] reads.
    pub(crate) fn bar0_write32(&self, offset: usize, value: u32) -> Result {
        self.bars.write32(0, offset, value)
    }

    /// Writes `value` at NOC address `addr` of `tile` through the kernel's
    /// own window, and reads it back: it has reached the chip when this
    /// returns.
    pub(crate) fn kernel_noc_write32(
        &self,
        layout: &Layout,
        tile: (u16, u16, u8),
        addr: u64,
        value: u32,
    ) -> Result {
        self.through_kernel_window(layout, tile, addr, |w| {
            w.bars.write32_flushed(w.resource, w.offset, value)
        })
    }

    /// Reads `width` at NOC address `addr` of `tile` through the kernel's
    /// own window, in one access, zero-extended (NOC_READ).
    pub(crate) fn kernel_noc_read(
        &self,
        layout: &Layout,
        tile: (u16, u16, u8),
        addr: u64,
        width: Width,
    ) -> Result<u64> {
        self.through_kernel_window(layout, tile, addr, |w| {
            w.bars.read(w.resource, w.offset, width)
        })
    }

    /// Writes the low `width` of `value` at NOC address `addr` of `tile`
    /// through the kernel's own window, in one access (NOC_WRITE). The
    /// write is flushed to the card by reading the window's register
    /// back, not the target: reading an arbitrary NOC address may have an
    /// effect of its own (a FIFO), a register read has none, and PCIe
    /// returns it only after the posted write before it.
    pub(crate) fn kernel_noc_write(
        &self,
        layout: &Layout,
        tile: (u16, u16, u8),
        addr: u64,
        width: Width,
        value: u64,
    ) -> Result {
        self.through_kernel_window(layout, tile, addr, |w| {
            w.bars.write(w.resource, w.offset, width, value)?;
            w.bars.read32(0, w.register)?;
            Ok(())
        })
    }

    /// Writes registers of the PCIe controller in BAR2 (see [`Bars::write_bar2`]).
    pub(crate) fn write_bar2(&self, writes: &[(usize, u32)]) -> Result {
        self.bars.write_bar2(writes)
    }

    fn write(&self, writes: &RegisterWrites) -> Result {
        self.bars
            .write_bar0(writes.offset, &writes.words[..writes.count])?;
        if let Some(strided) = writes.strided {
            self.bars.write_bar0(strided, &[0])?;
        }
        Ok(())
    }

    /// CONFIGURE_TLB of window `id` for `owner`: `EPERM` if it does not
    /// hold it, `EINVAL` for a bad config.
    pub(crate) fn configure(
        &self,
        tlb: &TlbPool,
        owner: OwnerId,
        id: usize,
        config: &NocTlbConfig,
    ) -> Result {
        let writes = tlb_regs::encode(tlb.layout(), id, config);
        tlb.with_held(owner, id, || {
            let writes = writes?;
            self.write(&writes)
        })
        .unwrap_or(Err(EPERM))
    }

    /// Revokes window `id`, no longer held by anyone: zaps both of its
    /// mappings in every process, then resets its register (unless a
    /// dma-buf still exports it, whose importers use its target).
    pub(crate) fn revoke_window(&self, layout: &Layout, id: usize, exported: bool) {
        let Some(place) = window_place(layout, id) else {
            return;
        };
        if let Some(state) = self.windows.get(id) {
            // The next revocation count, no mapping of it yet.
            let _ = state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                Some(((s >> 32) + 1) << 32)
            });
        }
        self.shared
            .unmap(MMAP_OFFSET_TLB_UC + place.start, place.size);
        self.shared
            .unmap(MMAP_OFFSET_TLB_WC + place.start, place.size);
        // No page of it is mapped now: its next holder picks its type.
        if let Some(caching) = self.window_caching.lock().get_mut(id) {
            *caching = WindowCaching::Unmapped;
        }
        if !exported {
            self.reset_window_register(layout, id);
        }
    }

    /// Resets the register of window `id` (to NOC address 0 of tile 0,0).
    pub(crate) fn reset_window_register(&self, layout: &Layout, id: usize) {
        // Nothing to reset once the card is gone (ENODEV).
        if let Ok(writes) = tlb_regs::reset(layout, id) {
            let _ = self.write(&writes);
        }
    }

    /// Where window `id` points now, read back from its register: what
    /// CONFIGURE_TLB or the holder itself (through the register page, as
    /// UMD does) last wrote there. `ENODEV` once the card is gone.
    pub(crate) fn target(&self, layout: &Layout, id: usize) -> Result<NocTlbConfig> {
        let (offset, count) = tlb_regs::register_of(layout, id).ok_or(EINVAL)?;
        let mut words = [0; 3];
        for (i, word) in words.iter_mut().enumerate().take(count) {
            *word = self.bars.read32(0, offset + 4 * i)?;
        }
        tlb_regs::decode(layout, id, words).ok_or(EINVAL)
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/mapping_tests.rs"]
mod kunit;

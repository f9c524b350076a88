// SPDX-License-Identifier: GPL-2.0

//! DMA: buffers the driver allocates (ALLOCATE_DMA_BUF), user pages it pins
//! (PIN_PAGES, UNPIN_PAGES), and the NOC addresses that reach them.
//!
//! Both belong to the file that asked for them, as in tt-kmd 2.10: a
//! buffer lives until its file is closed (FREE_DMA_BUF answers `EINVAL`,
//! as tt-kmd's does; a mapping of the buffer holds the file open), a pinned
//! range until UNPIN_PAGES or close. Unbinding the card frees everything
//! of every file, with the card still bound: the buffers' mappings are
//! zapped first (a later access gets `SIGBUS`), pins are unpinned and
//! unmapped from the IOMMU ([`WhileBound`]).
//!
//! Pinned pages are charged to the pinning process's `RLIMIT_MEMLOCK`, as
//! VFIO charges them (tt-kmd charges nothing), and to its user's, as
//! io_uring and iommufd charge them (a pin outlives its process when a
//! forked child shares the file): past the limit PIN_PAGES fails with
//! `ENOMEM` unless the process has `CAP_IPC_LOCK`.
//!
//! Locking: the card's DMA state is behind one mutex, taken inside
//! `mmap_lock` (mmap and faults of buffers). So nothing that takes
//! `mmap_lock` runs under it: pages are pinned and charged before it is
//! taken, and whatever is freed (unpinning and uncharging take the
//! pinner's `mmap_lock`; a buffer zaps its mappings) is dropped after it
//! is released.

use crate::{
    arbiter::{
        Fence,
        OwnerId, //
    },
    chip::Family,
    iatu::{
        self,
        Region,
        REGIONS, //
    },
    mapping::CardMemory,
    rust_ext::{
        bound::WhileBound,
        dma::{
            footprint,
            DmaPages,
            PeerMapping,
            PinnedRange, //
        },
        mm::{
            set_io_pfnmap,
            Caching,
            FaultResult,
            IoRange,
            MappableDmaPages,
            VmFault, //
        },
    },
};
use kernel::{
    device::{
        Bound,
        Device, //
    },
    mm::virt::VmaNew,
    page::PAGE_SIZE,
    prelude::*,
};

/// GET_DEVICE_INFO's `max_dma_buf_size_log2`: tt-kmd 2.10's limit, 256 MiB.
/// Buffers are physically contiguous, so the largest the kernel can find
/// is usually smaller: a larger request gets `ENOMEM` (callers halve).
pub(crate) const MAX_DMA_BUF_SIZE_LOG2: u16 = 28;
/// Where buffer 0's mmap offsets start, and each buffer's share of them
/// (tt-kmd 2.10 `memory.c`).
pub(crate) const MMAP_OFFSET_DMA_BUF: u64 = (PAGE_SIZE as u64 - 256) << 32;
pub(crate) const MMAP_SIZE_DMA_BUF: u64 = 1 << 32;

/// ALLOCATE_DMA_BUF's flag: give the buffer a NOC address.
pub(crate) const ALLOCATE_DMA_BUF_NOC_DMA: u8 = 2;
/// PIN_PAGES flags.
pub(crate) const PIN_PAGES_CONTIGUOUS: u32 = 1;
pub(crate) const PIN_PAGES_NOC_DMA: u32 = 2;
pub(crate) const PIN_PAGES_NOC_TOP_DOWN: u32 = 4;
pub(crate) const PIN_PAGES_READ_ONLY: u32 = 8;
const PIN_PAGES_FLAGS: u32 =
    PIN_PAGES_CONTIGUOUS | PIN_PAGES_NOC_DMA | PIN_PAGES_NOC_TOP_DOWN | PIN_PAGES_READ_ONLY;

/// The mmap offset of buffer `index`.
pub(crate) fn buffer_offset(index: u8) -> u64 {
    MMAP_OFFSET_DMA_BUF + u64::from(index) * MMAP_SIZE_DMA_BUF
}

/// The buffer index and the offset in it of mmap offset `offset`, if it is
/// in the buffers' offset space.
pub(crate) fn buffer_at(offset: u64) -> Option<(u8, u64)> {
    let from = offset.checked_sub(MMAP_OFFSET_DMA_BUF)?;
    let index = u8::try_from(from / MMAP_SIZE_DMA_BUF).ok()?;
    Some((index, from % MMAP_SIZE_DMA_BUF))
}

/// An outbound region a buffer or pin holds, and the NOC address it gave.
#[derive(Clone, Copy)]
struct NocWindow {
    slot: usize,
    address: u64,
}

struct Buffer {
    owner: OwnerId,
    index: u8,
    memory: MappableDmaPages,
    noc: Option<NocWindow>,
}

struct Pin {
    owner: OwnerId,
    address: usize,
    range: PinnedRange,
    /// Its bus address (an IOVA behind an IOMMU).
    dma_address: u64,
    noc: Option<NocWindow>,
}

struct Peer {
    owner: OwnerId,
    /// The card whose BAR it maps ([`crate::card::Card::peer_id`]).
    peer: usize,
    mapping: PeerMapping,
}

/// A PIN_PAGES request, checked.
struct PinRequest {
    owner: OwnerId,
    address: usize,
    count: usize,
    noc: bool,
    top_down: bool,
}

/// What the card's DMA holds: everything of every file.
struct DmaState {
    buffers: KVec<Buffer>,
    /// In pinning order: UNPIN_PAGES looks from the newest.
    pins: KVec<Pin>,
    /// Other cards' BARs mapped for this card (MAP_PEER_BAR).
    peers: KVec<Peer>,
    regions: [Option<Region>; REGIONS],
    /// The last reset's fence: its files get no new buffer or pin, which a
    /// reset would not disable or give back (see [`CardDma::fence`]).
    fence: Fence,
    /// The card is being unbound: its outbound regions are disabled and no
    /// buffer or pin is added (see [`CardDma::quiesce`]).
    quiesced: bool,
}

/// A buffer (by index) or a pin (by user address).
#[derive(Clone, Copy, Debug)]
pub(crate) enum DmaKind {
    Buffer(u8),
    Pin(usize),
}

/// A buffer or pin as the debugfs `mappings` view shows it.
pub(crate) struct DmaEntry {
    pub(crate) owner: OwnerId,
    pub(crate) what: DmaKind,
    pub(crate) dma_address: u64,
    pub(crate) noc_address: Option<u64>,
    pub(crate) size: usize,
}

/// What was freed under the mutex, dropped after it.
#[derive(Default)]
struct Freed {
    buffers: KVec<Buffer>,
    pins: KVec<Pin>,
}

/// What ALLOCATE_DMA_BUF and PIN_PAGES report.
pub(crate) struct DmaAddresses {
    /// The bus address (an IOVA behind an IOMMU).
    pub(crate) dma_address: u64,
    /// 0 without NOC DMA.
    pub(crate) noc_address: u64,
}

/// How much of the card's DMA is in use.
#[derive(Default)]
pub(crate) struct DmaUsage {
    pub(crate) buffers: usize,
    pub(crate) buffer_bytes: usize,
    pub(crate) pins: usize,
    pub(crate) pinned_pages: usize,
    pub(crate) regions: usize,
    pub(crate) peer_mappings: usize,
}

/// A card's DMA. Absent (every command `EINVAL`, as tt-kmd answers when
/// the DMA mask cannot be set) on a device that cannot do DMA.
pub(crate) struct CardDma {
    family: Family,
    /// Whether an IOMMU translates the card's DMA.
    translated: bool,
    limits: DmaLimits,
    state: Option<WhileBound<DmaState>>,
}

/// What all files of a card may hold together (0: no limit of the card's
/// own; memory, `RLIMIT_MEMLOCK` and each file's 256 buffer indices still
/// limit them). Module parameters `max_dma_buf_mb_per_card` and
/// `max_pinned_mb_per_card`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DmaLimits {
    pub(crate) buffer_bytes: usize,
    pub(crate) pinned_pages: usize,
}

impl CardDma {
    /// The DMA of bound `dev` (whose mask was set: `capable`).
    pub(crate) fn new(
        dev: &Device<Bound>,
        family: Family,
        capable: bool,
        limits: DmaLimits,
    ) -> Result<Self> {
        let state = if capable {
            let state = DmaState {
                buffers: KVec::new(),
                pins: KVec::new(),
                peers: KVec::new(),
                regions: [None; REGIONS],
                fence: Fence::default(),
                quiesced: false,
            };
            Some(WhileBound::new(dev, state)?)
        } else {
            None
        };
        Ok(Self {
            family,
            translated: crate::rust_ext::dma::is_translated(dev),
            limits,
            state,
        })
    }

    /// Whether an IOMMU translates the card's DMA.
    pub(crate) fn is_translated(&self) -> bool {
        self.translated
    }

    /// Whether the card can do DMA at all.
    pub(crate) fn is_capable(&self) -> bool {
        self.state.is_some()
    }

    fn with<R>(&self, f: impl FnOnce(&Device<Bound>, &mut DmaState) -> Result<R>) -> Result<R> {
        self.state.as_ref().ok_or(EINVAL)?.with(f)
    }

    /// Every buffer and pin of every file, for the debugfs `mappings` view.
    pub(crate) fn entries(&self) -> Result<KVec<DmaEntry>> {
        self.with(|_, state| {
            let mut entries = KVec::new();
            for b in state.buffers.iter() {
                let entry = DmaEntry {
                    owner: b.owner,
                    what: DmaKind::Buffer(b.index),
                    dma_address: b.memory.pages().dma_address(),
                    noc_address: b.noc.map(|w| w.address),
                    size: b.memory.pages().len(),
                };
                entries.push(entry, GFP_KERNEL)?;
            }
            for p in state.pins.iter() {
                let entry = DmaEntry {
                    owner: p.owner,
                    what: DmaKind::Pin(p.address),
                    dma_address: p.dma_address,
                    noc_address: p.noc.map(|w| w.address),
                    size: p.range.count() * PAGE_SIZE,
                };
                entries.push(entry, GFP_KERNEL)?;
            }
            Ok(entries)
        })
    }

    /// The card's limits.
    pub(crate) fn limits(&self) -> DmaLimits {
        self.limits
    }

    /// ALLOCATE_DMA_BUF: buffer `index` of `size` bytes for `owner`.
    /// `EINVAL` for a bad size or an index the file already has, `ENOMEM`
    /// without such a block of memory or past the card's limit, and with
    /// `noc`, `ENOSPC` when the card's outbound regions are all in use.
    pub(crate) fn allocate(
        &self,
        memory: &CardMemory,
        owner: OwnerId,
        index: u8,
        size: u32,
        noc: bool,
    ) -> Result<DmaAddresses> {
        let size = usize::try_from(size)?;
        if size == 0 || size % PAGE_SIZE != 0 || size > 1 << MAX_DMA_BUF_SIZE_LOG2 {
            return Err(EINVAL);
        }
        let mut freed = Freed::default();
        let result = self.with(|dev, state| {
            state.admits(owner)?;
            if state.buffer(owner, index).is_some() {
                return Err(EINVAL);
            }
            let held: usize = state
                .buffers
                .iter()
                .map(|b| b.memory.pages().footprint())
                .sum();
            let limit = self.limits.buffer_bytes;
            if limit != 0 && held.saturating_add(footprint(size)) > limit {
                return Err(ENOMEM);
            }
            state.buffers.reserve(1, GFP_KERNEL)?;
            let pages = DmaPages::alloc(dev, size)?;
            let dma_address = pages.dma_address();
            let memory_pages =
                MappableDmaPages::new(pages, memory.shared_mapping_ref(), buffer_offset(index));
            let window = if noc {
                match state.map_noc(self.family, memory, true, size, dma_address) {
                    Ok(window) => Some(window),
                    Err(e) => {
                        drop_later(&mut freed.buffers, owner, index, memory_pages, None);
                        return Err(e);
                    }
                }
            } else {
                None
            };
            state.buffers.push(
                Buffer {
                    owner,
                    index,
                    memory: memory_pages,
                    noc: window,
                },
                GFP_KERNEL,
            )?;
            Ok(DmaAddresses {
                dma_address,
                noc_address: window.map_or(0, |w| w.address),
            })
        });
        drop(freed);
        result
    }

    /// Undoes [`CardDma::allocate`] of buffer `index` (its answer could
    /// not be written).
    pub(crate) fn free_buffer(&self, memory: &CardMemory, owner: OwnerId, index: u8) {
        let mut freed = Freed::default();
        let _ = self.with(|_, state| {
            if let Some(position) = state.buffer(owner, index) {
                let buffer = state.buffers.remove(position)?;
                state.unmap_noc(self.family, memory, buffer.noc);
                freed.buffers.push(buffer, GFP_KERNEL)?;
            }
            Ok(())
        });
        drop(freed);
    }

    /// Checks an mmap of `len` bytes at `offset` (in the buffers' offset
    /// space) for `owner`, and sets `vma` up: `EINVAL` unless it lies in a
    /// buffer the file has.
    pub(crate) fn mmap(&self, owner: OwnerId, offset: u64, len: u64, vma: &VmaNew) -> Result {
        let (index, within) = buffer_at(offset).ok_or(EINVAL)?;
        self.with(|_, state| {
            let position = state.buffer(owner, index).ok_or(EINVAL)?;
            let size = state.buffers[position].memory.pages().len() as u64;
            if len == 0 || within.checked_add(len).is_none_or(|end| end > size) {
                return Err(EINVAL);
            }
            set_io_pfnmap(vma, Caching::Cached)
        })
    }

    /// Faults in a page of one of `owner`'s buffers.
    pub(crate) fn fault(&self, owner: OwnerId, fault: &VmFault) -> FaultResult {
        let Some((index, _)) = buffer_at(fault.offset()) else {
            return FaultResult::SIGBUS;
        };
        self.with(|_, state| {
            let position = state.buffer(owner, index).ok_or(EINVAL)?;
            Ok(fault.insert_dma_page(&state.buffers[position].memory))
        })
        .unwrap_or(FaultResult::SIGBUS)
    }

    /// PIN_PAGES of `size` bytes from user address `address` for `owner`.
    /// `EINVAL` for unknown flags, an unaligned or empty range, or pages
    /// the card cannot reach as one range (physically contiguous without
    /// an IOMMU, one IOVA range with one); `EOPNOTSUPP` for a read-only
    /// pin without an IOMMU to enforce it; `EEXIST` if the file pinned the
    /// same range already; `ENOMEM` past `RLIMIT_MEMLOCK`; with NOC DMA,
    /// `ENOSPC` when the card's outbound regions are all in use.
    pub(crate) fn pin(
        &self,
        memory: &CardMemory,
        owner: OwnerId,
        address: u64,
        size: u64,
        flags: u32,
    ) -> Result<DmaAddresses> {
        if flags & !PIN_PAGES_FLAGS != 0 {
            return Err(EINVAL);
        }
        let page_mask = PAGE_SIZE as u64 - 1;
        if address & page_mask != 0 || size & page_mask != 0 || size == 0 {
            return Err(EINVAL);
        }
        let read_only = flags & PIN_PAGES_READ_ONLY != 0;
        // Without an IOMMU nothing keeps the card from writing.
        if read_only && !self.translated {
            return Err(EOPNOTSUPP);
        }
        let request = PinRequest {
            owner,
            address: usize::try_from(address).map_err(|_| EFAULT)?,
            count: usize::try_from(size / PAGE_SIZE as u64)?,
            noc: flags & (PIN_PAGES_NOC_DMA | PIN_PAGES_NOC_TOP_DOWN) != 0,
            top_down: flags & PIN_PAGES_NOC_TOP_DOWN != 0,
        };
        if self.with(|_, state| Ok(state.has_pin(&request)))? {
            return Err(EEXIST);
        }
        // Outside the mutex: pinning takes `mmap_lock`.
        let mut range = Some(PinnedRange::pin(request.address, request.count, read_only)?);
        let result = self.with(|dev, state| {
            let pinned: usize = state.pins.iter().map(|p| p.range.count()).sum();
            let limit = self.limits.pinned_pages;
            let result = if let Err(e) = state.admits(owner) {
                Err(e)
            } else if limit != 0 && pinned.saturating_add(request.count) > limit {
                Err(ENOMEM)
            } else {
                state.add_pin(dev, self, memory, &request, &mut range)
            };
            if result.is_err() {
                if let Some(pinned) = range.as_mut() {
                    pinned.unmap();
                }
            }
            result
        });
        // A range not taken (the call failed) is unpinned here.
        drop(range);
        result
    }

    /// UNPIN_PAGES: the newest pin of `owner` at `address` must be of
    /// `size` bytes (cut to whole pages); `EINVAL` otherwise.
    pub(crate) fn unpin(
        &self,
        memory: &CardMemory,
        owner: OwnerId,
        address: u64,
        size: u64,
    ) -> Result {
        let count = usize::try_from(size / PAGE_SIZE as u64)?;
        if count == 0 {
            return Err(EINVAL);
        }
        let address = usize::try_from(address).map_err(|_| EINVAL)?;
        let mut freed = Freed::default();
        let result = self.with(|_, state| {
            let position = state
                .pins
                .iter()
                .rposition(|p| p.owner == owner && p.address == address)
                .ok_or(EINVAL)?;
            if state.pins[position].range.count() != count {
                return Err(EINVAL);
            }
            freed.pins.reserve(1, GFP_KERNEL)?;
            let mut pin = state.pins.remove(position)?;
            state.unmap_noc(self.family, memory, pin.noc);
            pin.range.unmap();
            freed.pins.push(pin, GFP_KERNEL)?;
            Ok(())
        });
        drop(freed);
        result
    }

    /// The file `owner` is closed: its buffers, pins and peer mappings go.
    ///
    /// In rounds of a few, taken off under the mutex into arrays on the
    /// stack and dropped after it (unpinning takes `mmap_lock`, which
    /// faults hold around the mutex): nothing is allocated, so a close
    /// under memory pressure still frees everything.
    pub(crate) fn release(&self, memory: &CardMemory, owner: OwnerId) {
        const ROUND: usize = 4;
        loop {
            let mut buffers: [Option<Buffer>; ROUND] = Default::default();
            let mut pins: [Option<Pin>; ROUND] = Default::default();
            let mut peers: [Option<Peer>; ROUND] = Default::default();
            // ENODEV once unbound: unbinding freed everything.
            let more = self.with(|_, state| {
                for slot in buffers.iter_mut() {
                    let Some(position) = state.buffers.iter().position(|b| b.owner == owner) else {
                        break;
                    };
                    let buffer = state.buffers.remove(position)?;
                    state.unmap_noc(self.family, memory, buffer.noc);
                    *slot = Some(buffer);
                }
                for slot in pins.iter_mut() {
                    let Some(position) = state.pins.iter().position(|p| p.owner == owner) else {
                        break;
                    };
                    let mut pin = state.pins.remove(position)?;
                    state.unmap_noc(self.family, memory, pin.noc);
                    pin.range.unmap();
                    *slot = Some(pin);
                }
                for slot in peers.iter_mut() {
                    let Some(position) = state.peers.iter().position(|p| p.owner == owner) else {
                        break;
                    };
                    *slot = Some(state.peers.remove(position)?);
                }
                Ok(state.buffers.iter().any(|b| b.owner == owner)
                    || state.pins.iter().any(|p| p.owner == owner)
                    || state.peers.iter().any(|p| p.owner == owner))
            });
            drop((buffers, pins, peers));
            if !matches!(more, Ok(true)) {
                break;
            }
        }
    }

    /// The card is being reset (src/reset.rs): the outbound regions of the
    /// fenced files' buffers and pins are disabled and go back to the card
    /// (their NOC addresses mean nothing any more). Disabled here, not left
    /// to the reset: a Wormhole's CONFIG_WRITE does not reset the chip, and
    /// a region left enabled would still reach a buffer after its file
    /// closes and frees it (tt-kmd 2.10 leaves it so). The buffers and pins
    /// themselves stay theirs until they close, as in tt-kmd; a command of
    /// a fenced file that passed its check before the fence and completes
    /// after it adds nothing (`ENODEV`).
    pub(crate) fn fence(&self, memory: &CardMemory, fence: Fence) {
        let _ = self.with(|_, state| {
            state.fence = fence;
            for i in 0..state.buffers.len() {
                if fence.is_stale(state.buffers[i].owner) {
                    let window = state.buffers[i].noc.take();
                    state.unmap_noc(self.family, memory, window);
                }
            }
            for i in 0..state.pins.len() {
                if fence.is_stale(state.pins[i].owner) {
                    let window = state.pins[i].noc.take();
                    state.unmap_noc(self.family, memory, window);
                }
            }
            Ok(())
        });
    }

    /// The card is being unbound: every outbound region is disabled in the
    /// chip and no buffer or pin gets one again, so that the card's NOC
    /// reaches no host memory once its function stops mastering the bus
    /// and devres frees the buffers (in that order: src/driver.rs).
    pub(crate) fn quiesce(&self, memory: &CardMemory) {
        let _ = self.with(|_, state| {
            state.quiesced = true;
            for buffer in state.buffers.iter_mut() {
                buffer.noc = None;
            }
            for pin in state.pins.iter_mut() {
                pin.noc = None;
            }
            state.regions = [None; REGIONS];
            disable_every_region(self.family, memory);
            Ok(())
        });
    }

    /// Disables every outbound region in the chip, whoever enabled it (a
    /// driver bound before, tt-kmd or this one): at probe, before a file
    /// can have one, a region is in use only if this binding enabled it.
    pub(crate) fn disable_stale_regions(&self, memory: &CardMemory) {
        if self.is_capable() {
            disable_every_region(self.family, memory);
        }
    }

    /// MAP_PEER_BAR: maps `len` bytes of `range` (a BAR of the card
    /// `peer`) from `offset` for this card's DMA, for `owner`; its bus
    /// address. The mapping lives until the file is closed, this card is
    /// unbound, or the peer is ([`CardDma::revoke_peer`]; there is no
    /// command to unmap it, as in tt-kmd 2.10).
    pub(crate) fn map_peer(
        &self,
        owner: OwnerId,
        peer: usize,
        range: &IoRange,
        offset: u64,
        len: u64,
    ) -> Result<u64> {
        self.with(|dev, state| {
            state.peers.reserve(1, GFP_KERNEL)?;
            let mapping = PeerMapping::map(dev, range, offset, len)?;
            let address = mapping.dma_address();
            state.peers.push(
                Peer {
                    owner,
                    peer,
                    mapping,
                },
                GFP_KERNEL,
            )?;
            Ok(address)
        })
    }

    /// The card `peer` is being unbound: every mapping of its BARs for
    /// this card's DMA goes, so that the card reaches none of them once
    /// they are released (another driver, vfio-pci for a guest, may take
    /// them). tt-kmd 2.10 keeps them until the mapping file closes.
    /// Unmapping takes no lock of the mm: done under the mutex.
    pub(crate) fn revoke_peer(&self, peer: usize) {
        let _ = self.with(|_, state| {
            state.peers.retain(|p| p.peer != peer);
            Ok(())
        });
    }

    /// Undoes [`CardDma::map_peer`] of the mapping at `address` (its answer
    /// could not be written).
    pub(crate) fn unmap_peer(&self, owner: OwnerId, address: u64) {
        let _ = self.with(|_, state| {
            if let Some(position) = state
                .peers
                .iter()
                .rposition(|p| p.owner == owner && p.mapping.dma_address() == address)
            {
                drop(state.peers.remove(position)?);
            }
            Ok(())
        });
    }

    /// What is in use, for all files or for `owner`'s.
    pub(crate) fn usage(&self, owner: Option<OwnerId>) -> DmaUsage {
        let mine = |o: OwnerId| owner.is_none_or(|owner| owner == o);
        self.with(|_, state| {
            let mut usage = DmaUsage::default();
            for b in state.buffers.iter().filter(|b| mine(b.owner)) {
                usage.buffers += 1;
                usage.buffer_bytes += b.memory.pages().footprint();
                usage.regions += usize::from(b.noc.is_some());
            }
            for p in state.pins.iter().filter(|p| mine(p.owner)) {
                usage.pins += 1;
                usage.pinned_pages += p.range.count();
                usage.regions += usize::from(p.noc.is_some());
            }
            usage.peer_mappings = state.peers.iter().filter(|p| mine(p.owner)).count();
            Ok(usage)
        })
        .unwrap_or_default()
    }
}

/// Keeps a buffer made under the mutex to be dropped after it.
fn drop_later(
    freed: &mut KVec<Buffer>,
    owner: OwnerId,
    index: u8,
    memory: MappableDmaPages,
    noc: Option<NocWindow>,
) {
    // Without memory to keep it, it goes now: it was never mapped, so
    // dropping it zaps nothing and takes no lock of the mm.
    let _ = freed.push(
        Buffer {
            owner,
            index,
            memory,
            noc,
        },
        GFP_KERNEL,
    );
}

impl DmaState {
    fn buffer(&self, owner: OwnerId, index: u8) -> Option<usize> {
        self.buffers
            .iter()
            .position(|b| b.owner == owner && b.index == index)
    }

    fn has_pin(&self, r: &PinRequest) -> bool {
        self.pins
            .iter()
            .any(|p| p.owner == r.owner && p.address == r.address && p.range.count() == r.count)
    }

    /// Makes the pinned `range` (taken on success) a pin of `r`.
    /// `ENODEV` if `owner` may not add a buffer or pin: the card is being
    /// unbound, or a reset fenced the file.
    fn admits(&self, owner: OwnerId) -> Result {
        if self.quiesced || self.fence.is_stale(owner) {
            return Err(ENODEV);
        }
        Ok(())
    }

    fn add_pin(
        &mut self,
        dev: &Device<Bound>,
        dma: &CardDma,
        memory: &CardMemory,
        r: &PinRequest,
        range: &mut Option<PinnedRange>,
    ) -> Result<DmaAddresses> {
        if self.has_pin(r) {
            return Err(EEXIST);
        }
        let pinned = range.as_mut().ok_or(EINVAL)?;
        let dma_address = if dma.translated {
            pinned.map_contiguous(dev)?
        } else {
            pinned.contiguous_physical().ok_or(EINVAL)?
        };
        self.pins.reserve(1, GFP_KERNEL)?;
        let window = if r.noc {
            let len = r.count * PAGE_SIZE;
            Some(self.map_noc(dma.family, memory, r.top_down, len, dma_address)?)
        } else {
            None
        };
        let pinned = range.take().ok_or(EINVAL)?;
        self.pins.push(
            Pin {
                owner: r.owner,
                address: r.address,
                range: pinned,
                dma_address,
                noc: window,
            },
            GFP_KERNEL,
        )?;
        Ok(DmaAddresses {
            dma_address,
            noc_address: window.map_or(0, |w| w.address),
        })
    }

    /// Gives `size` bytes at bus address `target` a NOC address: a free
    /// outbound region (`ENOSPC` if none) over a free part of the window
    /// (`ENOMEM` if none is large enough).
    fn map_noc(
        &mut self,
        family: Family,
        memory: &CardMemory,
        top_down: bool,
        size: usize,
        target: u64,
    ) -> Result<NocWindow> {
        let slot = self
            .regions
            .iter()
            .position(Option::is_none)
            .ok_or(ENOSPC)?;
        let mut used = [Region {
            base: 0,
            limit: 0,
            target: 0,
        }; REGIONS];
        let mut count = 0;
        for r in self.regions.iter().flatten() {
            used[count] = *r;
            count += 1;
        }
        let size = u64::try_from(size)?;
        let base =
            iatu::place(&used[..count], iatu::window_max(family), size, top_down).ok_or(ENOMEM)?;
        let region = Region {
            base,
            limit: base + (size - 1),
            target,
        };
        let (writes, n) = iatu::encode(family, slot, Some(region)).ok_or(EINVAL)?;
        memory.write_bar2(&writes[..n])?;
        self.regions[slot] = Some(region);
        Ok(NocWindow {
            slot,
            address: iatu::noc_address(family, base),
        })
    }

    /// Gives a NOC window's region back, disabled.
    fn unmap_noc(&mut self, family: Family, memory: &CardMemory, window: Option<NocWindow>) {
        let Some(window) = window else { return };
        disable_region(family, memory, window.slot);
        self.regions[window.slot] = None;
    }
}

/// Writes "disabled" into outbound region `slot` of the chip. Best effort:
/// nothing is left to disable once the card is gone (`ENODEV`).
fn disable_region(family: Family, memory: &CardMemory, slot: usize) {
    if let Some((writes, n)) = iatu::encode(family, slot, None) {
        let _ = memory.write_bar2(&writes[..n]);
    }
}

/// Writes "disabled" into every outbound region of the chip.
fn disable_every_region(family: Family, memory: &CardMemory) {
    for slot in 0..REGIONS {
        disable_region(family, memory, slot);
    }
}

// SPDX-License-Identifier: GPL-2.0

//! tt-arbiter: the `tenstorrent` module.
//!
//! Binds Tenstorrent PCIe accelerators, exposes `/dev/tenstorrent/N`, and
//! arbitrates the cards' shared resources between the processes that use
//! them: locks owned by open files, so a crashed process never leaves one
//! held; blocking waits with FIFO hand-off and deadlines; and a view of who
//! holds what.
//!
//! # Lock order
//!
//! Every lock of the driver, outermost first: a lock is only taken with
//! none held below it in this list. Apart from the registry's `CARDS`,
//! every lock belongs to one card, and none of one card is taken under
//! another's: MAP_PEER_BAR reads the peer's BAR range under no lock and
//! records its card in the peer's `Card::mapped_by` (alone) before it
//! takes its own DMA state (7); a card's unbind empties its `mapped_by`,
//! then takes each mapping card's DMA state (7) holding none of its own.
//!
//! 1. `mmap_lock` (the kernel's): held around the driver's mmap and fault
//!    handlers, which take 3, 4, 5 and 7 under it. So nothing of the
//!    driver that takes it (pinning and unpinning user pages) runs with a
//!    lock of the driver held (src/dma.rs, src/mapping.rs).
//! 2. `Card::resetting` (src/card.rs): held for a whole RESET_DEVICE, so
//!    that one runs at a time and NOC_READ, NOC_WRITE and
//!    EXPORT_TLB_DMABUF (which take it too) never run during one.
//!    Everything the reset touches nests inside it: 3-12 and the
//!    telemetry's places.
//! 3. `CardMemory::live` (src/mapping.rs): a BAR fault holds it while it
//!    checks its file and inserts the page; a reset sets its fence (6)
//!    under it, so no fault of a fenced file slips past the zap.
//! 4. The window pool's state (src/tlb.rs, a [`wait::WakeMutex`]): held
//!    while a held window is faulted in, mapped or configured, so it
//!    cannot be freed meanwhile; 5 nests inside (a window's first
//!    mapping). Never held while mappings are zapped.
//! 5. `CardMemory::window_caching` (src/mapping.rs): a window's memory
//!    type.
//! 6. The arbiter's state (src/arbiter.rs, a [`wait::WakeMutex`]): the
//!    locks, their queue and the wake-ups decided under it (sent after it
//!    is released, [`wait::WakeGuard`]). Nothing nests inside.
//! 7. The data of a `WhileBound` (rust/bound.rs): the DMA state
//!    (src/dma.rs, under 1 at faults and under 2 at a fence) and the
//!    reset's saved PCI state (src/reset.rs, under 2, held across a bus
//!    reset). One lockdep class for both; they never nest.
//! 8. `LiveDmaBufs::live` (rust/dmabuf.rs, the card's `exports`): the
//!    exports' live dma-bufs; under 2 for the check that no export lives
//!    during a reset. Unbind revokes the dma-bufs under it; a dma-buf's
//!    release takes it alone.
//! 9. `CardPower::votes` (src/power.rs): the files' votes; 11 nests
//!    inside only to post or collect a message, which touches no register.
//! 10. `ArcMessenger::exchange` (src/arc.rs): one Wormhole mailbox
//!     message at a time (only resets send them), through BAR0 directly.
//! 11. The message queue's state (src/smc.rs): one look at the firmware's
//!     queue reads it under this mutex, Blackhole's through 12.
//! 12. `CardMemory::kernel_window` (src/mapping.rs): the kernel's own TLB
//!     window, aimed and used for one run of accesses. Innermost.
//!
//! Taken alone, with nothing nested inside: `Card::openers` (released
//! before the arbiter's state is taken for the files it lists),
//! `Card::mapped_by` (the cards mapping this one's BARs, src/card.rs),
//! `CardMemory::bar_vmas`, `Telemetry::places` (the table is read before
//! it is taken), `NocCleanups::entries`, the open gate's state
//! (src/open_gate.rs) and the registry's `CARDS` (src/registry.rs).
//!
//! Waits on the firmware under a lock that other callers need (documented,
//! not yet designed away):
//!
//! - `Card::resetting`, for the whole reset: a Blackhole reset with the
//!   DMC sends two firmware messages through the queue, each allowed
//!   [`smc::KERNEL_WAIT_MS`] (2 s, a look every 100 µs, the queue's own
//!   mutex released between looks); a Wormhole reset polls the mailbox for
//!   a NOP's answer (1 ms, under `ArcMessenger::exchange` too); RESET_PCIE_LINK
//!   waits for `pci_reset_bus()` under 7 as well. NOC_READ, NOC_WRITE,
//!   EXPORT_TLB_DMABUF and other resets of the card wait meanwhile, up to
//!   about 4 s, uninterruptibly.
//! - Nothing else sleeps or polls under a lock: since power votes stopped
//!   waiting for the firmware (issue 28), `CardPower::votes` only posts
//!   and collects, and SET_POWER_STATE waits for the answer with it
//!   released; a look at the message queue (11, 12) is a few register
//!   reads, and the message queue's work item sleeps between looks with
//!   no lock held.

use kernel::{
    pci,
    prelude::*, //
};

mod arbiter;
mod arc;
mod bars;
mod card;
mod chip;
mod dma;
mod driver;
mod fifo;
mod file;
mod iatu;
mod mapping;
mod noc_cleanup;
mod noc_io;
mod open_gate;
mod power;
mod registry;
mod reset;
#[path = "../rust/mod.rs"]
mod rust_ext;
mod smc;
mod telemetry;
mod tlb;
mod uapi;
mod views;
mod wait;

use crate::driver::TenstorrentDriver;
use crate::registry::Registry;

/// The module's version, as GET_DRIVER_INFO and
/// `/sys/module/tenstorrent/version` report it: the level of tt-kmd's ABI
/// it implements, every command of tt-kmd 2.10 (programs gate features on
/// that version: UMD refuses anything below 2.0.0). The project's own
/// version is [`PROJECT_VERSION`].
pub(crate) const VERSION: Version = {
    let [major, minor, patch] = parse_version(&MODULE_VERSION_TEXT, b"version=".len());
    assert!(major < 256 && minor < 256 && patch < 256);
    Version {
        major: major as u8,
        minor: minor as u8,
        patch: patch as u8,
    }
};

/// tt-arbiter's own version (modinfo `tt_arbiter_version`, and
/// `/sys/class/tenstorrent/tenstorrent!N/tt_arbiter_version`).
pub(crate) const PROJECT_VERSION: &str = "0.4.0";

pub(crate) struct Version {
    pub(crate) major: u8,
    pub(crate) minor: u8,
    pub(crate) patch: u8,
}

/// `MODULE_VERSION`, read by tools from `/sys/module/tenstorrent/version`
/// (the `module!` macro has no version key).
#[cfg(MODULE)]
#[link_section = ".modinfo"]
#[used]
static MODULE_VERSION: [u8; MODULE_VERSION_TEXT.len()] = MODULE_VERSION_TEXT;

/// The project's version in modinfo (`modinfo -F tt_arbiter_version`).
#[cfg(MODULE)]
#[link_section = ".modinfo"]
#[used]
static MODULE_PROJECT_VERSION: [u8; PROJECT_VERSION_TEXT.len()] = PROJECT_VERSION_TEXT;

const MODULE_VERSION_TEXT: [u8; 15] = *b"version=2.11.0\0";
const PROJECT_VERSION_TEXT: [u8; 25] = *b"tt_arbiter_version=0.4.0\0";

/// The numbers of `key=A.B.C\0`.
const fn parse_version(text: &[u8], key_len: usize) -> [u32; 3] {
    let mut parts = [0u32; 3];
    let mut part = 0;
    let mut i = key_len;
    while i < text.len() - 1 {
        let c = text[i];
        if c == b'.' {
            part += 1;
        } else {
            assert!(c.is_ascii_digit());
            parts[part] = parts[part] * 10 + (c - b'0') as u32;
        }
        i += 1;
    }
    assert!(part == 2 && text[text.len() - 1] == 0);
    parts
}

// Keep the project's version string equal in modinfo and sysfs.
const _: () = {
    let key = b"tt_arbiter_version=".len();
    let p = PROJECT_VERSION.as_bytes();
    assert!(PROJECT_VERSION_TEXT.len() == key + p.len() + 1);
    let mut i = 0;
    while i < p.len() {
        assert!(PROJECT_VERSION_TEXT[key + i] == p[i]);
        i += 1;
    }
    let _ = parse_version(&PROJECT_VERSION_TEXT, key);
};

module! {
    type: TenstorrentModule,
    name: "tenstorrent",
    authors: ["tt-arbiter developers"],
    description: "Tenstorrent PCIe accelerators: device nodes and resource arbitration",
    license: "GPL",
    params: {
        power_policy: bool {
            default: true,
            description: "Tell each card's firmware the power state its open files vote for \
                (as tt-kmd); false leaves the card as its firmware runs it",
        },
        idle_power_down_grace_ms: u32 {
            default: 5000,
            description: "How long a Wormhole stays powered up after its last vote goes, in \
                milliseconds (0: at once); Blackhole powers down at once",
        },
        max_dma_buf_mb_per_card: u32 {
            default: 0,
            description: "MiB of DMA buffers (ALLOCATE_DMA_BUF) all files of a card may hold \
                together; 0: no limit of the card's own",
        },
        max_pinned_mb_per_card: u32 {
            default: 0,
            description: "MiB of pinned pages (PIN_PAGES) all files of a card may hold together, \
                besides each process's RLIMIT_MEMLOCK; 0: no limit of the card's own",
        },
        handoff_us: u32 {
            default: 2000,
            description: "Hand-off bound of the locks, in microseconds: a caller may take a free \
                lock ahead of a waiter (sleeping or polling) that has waited less, never ahead \
                of one that waited longer, nor ahead of a lock set; 0 = strict FIFO. Per card \
                in debugfs (tenstorrent/N/handoff_us)",
        },
        emulated_tlb_layout: u32 {
            default: 0,
            description: "TLB window layout of devices that are neither Wormhole nor Blackhole \
                (bound through new_id, e.g. emulated): 0 = Wormhole, 1 = Blackhole",
        },
    },
}

/// Refuses to load with a parameter value that means nothing.
fn check_parameters() -> Result {
    let layout = module_parameters::emulated_tlb_layout.value();
    if layout != driver::EMULATE_WORMHOLE && layout != driver::EMULATE_BLACKHOLE {
        pr_err!("emulated_tlb_layout={layout}: must be 0 (Wormhole) or 1 (Blackhole)\n");
        return Err(EINVAL);
    }
    Ok(())
}

#[pin_data]
struct TenstorrentModule {
    _param: (),
    // Fields drop in order: the registry lets go of the class first (each
    // bound card keeps its own reference), then the driver unbinds the cards.
    _registry: Registry,
    #[pin]
    _driver: kernel::driver::Registration<pci::Adapter<TenstorrentDriver>>,
}

impl kernel::InPlaceModule for TenstorrentModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            _param: check_parameters()?,
            _registry: Registry::new(c"tenstorrent")?,
            _driver <- kernel::driver::Registration::new(c"tenstorrent", module),
        })
    }
}

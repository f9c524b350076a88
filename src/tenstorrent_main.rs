// SPDX-License-Identifier: GPL-2.0

//! tt-arbiter: the `tenstorrent` module.
//!
//! Binds Tenstorrent PCIe accelerators, exposes `/dev/tenstorrent/N`, and
//! arbitrates the cards' shared resources between the processes that use
//! them: locks owned by open files, so a crashed process never leaves one
//! held; blocking waits with FIFO hand-off and deadlines; and a view of who
//! holds what.

use kernel::{
    pci,
    prelude::*, //
};

mod arbiter;
mod arc;
mod bars;
mod card;
mod debugfs;
mod dma;
mod driver;
mod fifo;
mod file;
mod iatu;
mod mapping;
mod noc_cleanup;
mod open_gate;
mod power;
mod procfs;
mod registry;
mod reset;
#[path = "../rust/mod.rs"]
mod rust_ext;
mod sysfs;
mod telemetry;
mod tlb;
mod tlb_regs;
mod tlb_view;
mod uapi;
mod wait;

use crate::driver::TenstorrentDriver;
use crate::registry::Registry;

/// The module's semantic version, as GET_DRIVER_INFO reports it. It starts
/// at 0.x so that programs gating on the C driver's 2.x do not take this
/// module for something it is not yet.
pub(crate) const VERSION: Version = Version {
    major: 0,
    minor: 2,
    patch: 0,
};

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
static MODULE_VERSION: [u8; 14] = MODULE_VERSION_TEXT;

// Keep `MODULE_VERSION` equal to `VERSION`.
const _: () = {
    let v = &MODULE_VERSION_TEXT;
    assert!(v[8] == b'0' + VERSION.major && v[10] == b'0' + VERSION.minor);
    assert!(v[12] == b'0' + VERSION.patch && v.len() == 14);
};
const MODULE_VERSION_TEXT: [u8; 14] = *b"version=0.2.0\0";

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

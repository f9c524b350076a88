// SPDX-License-Identifier: GPL-2.0

//! The device registry: the char device region, the `tenstorrent` class,
//! the ordinals N of `/dev/tenstorrent/N`, and the roots of the procfs and
//! debugfs directories of the cards.

use crate::rust_ext::{
    chrdev::CharDeviceRegion,
    procfs::ProcDir, //
};
use kernel::{
    debugfs,
    prelude::*,
    sync::Arc, //
};

/// Most cards one host can have bound at once.
const MAX_CARDS: u32 = 256;
const WORDS: usize = (MAX_CARDS as usize).div_ceil(64);

struct Cards {
    /// Set while the module is loaded. Each bound card keeps its own
    /// reference, so the class lives until the last card is gone.
    region: Option<Arc<CharDeviceRegion>>,
    /// `/proc/driver/tenstorrent`, likewise kept by each card.
    proc_root: Option<Arc<ProcDir>>,
    /// `/sys/kernel/debug/tenstorrent`.
    debug_root: Option<debugfs::Dir>,
    /// Bit N set: ordinal N is in use.
    used: [u64; WORDS],
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `Registry::new`, called once from the module's
    // initialiser before the PCI driver (the only other user) is registered.
    unsafe(uninit) static CARDS: Mutex<Cards> = Cards {
        region: None,
        proc_root: None,
        debug_root: None,
        used: [0; WORDS],
    };
}

/// The registry's lifetime: from module init to module exit.
pub(crate) struct Registry(());

impl Registry {
    /// Creates the region and the class. Called once, at module init.
    pub(crate) fn new(name: &'static CStr) -> Result<Self> {
        // SAFETY: Called once, from the module initialiser, before any other
        // use of `CARDS` (see its declaration).
        unsafe { CARDS.init() };
        let region = Arc::new(CharDeviceRegion::new(name, MAX_CARDS)?, GFP_KERNEL)?;
        let proc_root = Arc::new(ProcDir::new(c"driver/tenstorrent", None)?, GFP_KERNEL)?;
        let mut cards = CARDS.lock();
        cards.region = Some(region);
        cards.proc_root = Some(proc_root);
        cards.debug_root = Some(debugfs::Dir::new(name));
        Ok(Self(()))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let mut cards = CARDS.lock();
        cards.region = None;
        cards.proc_root = None;
        cards.debug_root = None;
    }
}

/// An ordinal N in use, with the places a card's entries are created in.
/// Dropping it makes N free for the next card: drop it only once the node,
/// its sysfs entries and the card's procfs and debugfs directories are gone,
/// so a quick rebind cannot collide with them.
pub(crate) struct Ordinal {
    number: u32,
    region: Arc<CharDeviceRegion>,
    proc_root: Arc<ProcDir>,
    debug_root: debugfs::Dir,
}

impl Ordinal {
    /// Takes the lowest free ordinal.
    pub(crate) fn take() -> Result<Self> {
        let mut cards = CARDS.lock();
        let region = cards.region.clone().ok_or(ENODEV)?;
        let proc_root = cards.proc_root.clone().ok_or(ENODEV)?;
        let debug_root = cards.debug_root.clone().ok_or(ENODEV)?;
        let number = (0..region.count().min(MAX_CARDS))
            .find(|&n| cards.used[n as usize / 64] & (1 << (n % 64)) == 0)
            .ok_or(ENOSPC)?;
        cards.used[number as usize / 64] |= 1 << (number % 64);
        Ok(Self {
            number,
            region,
            proc_root,
            debug_root,
        })
    }

    pub(crate) fn number(&self) -> u32 {
        self.number
    }

    pub(crate) fn region(&self) -> &CharDeviceRegion {
        &self.region
    }

    /// `/proc/driver/tenstorrent`.
    pub(crate) fn proc_root(&self) -> &ProcDir {
        &self.proc_root
    }

    /// `/sys/kernel/debug/tenstorrent`.
    pub(crate) fn debug_root(&self) -> &debugfs::Dir {
        &self.debug_root
    }
}

impl Drop for Ordinal {
    fn drop(&mut self) {
        let n = self.number;
        CARDS.lock().used[n as usize / 64] &= !(1 << (n % 64));
    }
}

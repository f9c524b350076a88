// SPDX-License-Identifier: GPL-2.0
//! The vfio-user side of the card: what QEMU's `vfio-user-pci` talks to.
//!
//! One blocking loop (the `vfio_user` crate's `Server::run`) serves the
//! connection: config space and BAR accesses, DMA map and unmap messages,
//! interrupt setup and the reset message. Every reply must leave within
//! QEMU's `x-msg-timeout` (5 s by default): a late reply makes QEMU return
//! all ones and then breaks the connection for good. So nothing on this
//! loop waits: the ARC firmware and the DMA engines finish their work
//! inside the register write that starts it, a reset the firmware
//! schedules is carried out by the next access that finds it due (no timer
//! thread), and the only sleep is the `delay` fault, which the control
//! socket keeps below 4 s. Locks are held for one access; the control
//! socket's threads take the same locks for as short.
//!
//! Lock order: the card's lock may be held while the config space's is
//! taken (the PCIe tile's DBI is the config space), never the other way
//! round.
//!
//! State the control socket also touches lives in [`Shared`].

use std::fs::File;
use std::io::Write;
use std::mem::size_of;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use vfio_bindings::bindings::vfio::{
    vfio_region_info, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_INFO_NORESIZE, VFIO_IRQ_SET_ACTION_TRIGGER,
    VFIO_IRQ_SET_ACTION_TYPE_MASK, VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE,
    VFIO_IRQ_SET_DATA_TYPE_MASK, VFIO_PCI_CONFIG_REGION_INDEX, VFIO_PCI_MSI_IRQ_INDEX,
    VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS, VFIO_PCI_REQ_IRQ_INDEX, VFIO_REGION_INFO_FLAG_READ,
    VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, Server, ServerBackend, ServerRegion};

use crate::card::{Card, ResetKind};
use crate::config_space::{bar_size, ConfigEvent, ConfigSpace, CONFIG_SPACE_SIZE};
use crate::host_memory::HostMemory;
use crate::Arch;

/// Number of BARs of a type 0 header.
const NUM_BARS: usize = 6;

/// Locks a mutex even if a thread panicked while holding it: the state is
/// registers, still better served than dropped.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Vectors each IRQ index offers (VFIO_PCI_*_IRQ_INDEX order).
///
/// - INTx: none; the config space has no interrupt pin.
/// - MSI: one vector, as the config space's MSI capability says.
/// - MSI-X: none.
/// - ERR: one, as a PCIe function with AER has under the kernel's vfio-pci;
///   QEMU registers an eventfd for it but stops the VM when it fires, so
///   the emulator never signals it (AER faults only set status bits).
/// - REQ: one; signalling it asks QEMU to unplug the device (the control
///   socket's `unplug`).
const IRQ_COUNTS: [u32; VFIO_PCI_NUM_IRQS as usize] = [0, 1, 0, 1, 1];

/// The interrupt eventfds QEMU handed over with `set_irqs`, per index and
/// vector. Cloning shares them: the card keeps a clone to raise MSI from
/// any thread.
#[derive(Clone, Default)]
pub struct Interrupts {
    fds: Arc<Mutex<Vec<Vec<Option<File>>>>>,
}

impl Interrupts {
    fn new() -> Self {
        let fds = IRQ_COUNTS
            .iter()
            .map(|&n| (0..n).map(|_| None).collect())
            .collect();
        Interrupts {
            fds: Arc::new(Mutex::new(fds)),
        }
    }

    /// Signals vector `vector` of IRQ index `index`; false when the guest
    /// has not enabled it (no eventfd), as a real device's message would
    /// not be sent with MSI disabled.
    pub fn trigger(&self, index: u32, vector: u32) -> bool {
        let fds = lock(&self.fds);
        let Some(Some(fd)) = fds.get(index as usize).and_then(|v| v.get(vector as usize)) else {
            return false;
        };
        // An eventfd counts what is written; QEMU injects one interrupt.
        let mut f: &File = fd;
        f.write_all(&1u64.to_ne_bytes()).is_ok()
    }

    /// Raises MSI vector `vector`.
    pub fn raise_msi(&self, vector: u32) -> bool {
        self.trigger(VFIO_PCI_MSI_IRQ_INDEX, vector)
    }

    /// Asks QEMU to unplug the device (its REQ notifier): QEMU then presses
    /// the slot's attention button and the guest removes the device.
    pub fn request_unplug(&self) -> bool {
        self.trigger(VFIO_PCI_REQ_IRQ_INDEX, 0)
    }

    /// Whether an eventfd is installed for `index`/`vector`.
    pub fn is_enabled(&self, index: u32, vector: u32) -> bool {
        matches!(
            lock(&self.fds)
                .get(index as usize)
                .and_then(|v| v.get(vector as usize)),
            Some(Some(_))
        )
    }
}

/// State shared by the serving loop, the control socket and the card.
pub struct Shared {
    pub arch: Arch,
    pub card: Arc<Mutex<Card>>,
    /// Config space is the server's: the vfio-user config region. Shared so
    /// that the card's PCIe tile (DBI) and fault injection can reach it.
    pub config: Arc<Mutex<ConfigSpace>>,
    pub host: Arc<HostMemory>,
    pub interrupts: Interrupts,
    /// The card is off the bus: reads return all ones, writes are dropped
    /// (config space too, as after a surprise link down).
    pub vanished: AtomicBool,
    /// Extra delay before each BAR access reply, in milliseconds.
    pub delay_ms: AtomicU32,
    /// Whether the ARC firmware answers; the emulator's own record, used
    /// for the resets the firmware carries out.
    pub arc_responding: AtomicBool,
    /// BAR accesses served since the emulator started, per BAR: reads and
    /// writes (config space not counted). Every one is a socket round trip
    /// under TCG, so this is what a driver's path costs, whatever the
    /// host's load (the `accesses` control command).
    pub bar_accesses: BarAccesses,
}

/// Reads and writes per BAR, counted as QEMU sends them: one per access,
/// whatever its width.
#[derive(Default)]
pub struct BarAccesses {
    reads: [AtomicU64; NUM_BARS],
    writes: [AtomicU64; NUM_BARS],
}

impl BarAccesses {
    fn count(&self, bar: usize, write: bool) {
        let counters = if write { &self.writes } else { &self.reads };
        if let Some(c) = counters.get(bar) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads and writes of BAR `bar` so far.
    pub fn of(&self, bar: usize) -> (u64, u64) {
        let get = |c: &[AtomicU64; NUM_BARS]| c.get(bar).map_or(0, |c| c.load(Ordering::Relaxed));
        (get(&self.reads), get(&self.writes))
    }
}

impl Shared {
    /// A freshly powered card of `arch` with nothing connected.
    pub fn new(arch: Arch) -> Arc<Shared> {
        let host = Arc::new(HostMemory::new());
        let config = Arc::new(Mutex::new(ConfigSpace::new(arch)));
        let mut card = Card::new(arch, host.clone());
        // The PCIe tile's DBI is this config space (tt-kmd restores MPS
        // through it), and a chip reset the firmware performs resets it.
        card.connect_config_space(config.clone());
        Arc::new(Shared {
            arch,
            card: Arc::new(Mutex::new(card)),
            config,
            host,
            interrupts: Interrupts::new(),
            vanished: AtomicBool::new(false),
            delay_ms: AtomicU32::new(0),
            arc_responding: AtomicBool::new(true),
            bar_accesses: BarAccesses::default(),
        })
    }

    /// Makes the card vanish from the bus or come back.
    pub fn set_vanished(&self, vanished: bool) {
        self.vanished.store(vanished, Ordering::SeqCst);
        lock(&self.card).set_vanished(vanished);
    }

    /// Carries out a chip reset the ARC firmware has made due, before
    /// anything looks at the card (see [`Card::carry_out_firmware_reset`]):
    /// tt-kmd checks its reset marker with a config read, which must see
    /// the reset the chip did on its own.
    pub fn catch_up(&self) {
        lock(&self.card).carry_out_firmware_reset();
    }

    /// The vfio-user reset message: a conventional reset of the function.
    pub fn secondary_bus_reset(&self) {
        lock(&self.config).reset();
        lock(&self.card).reset(ResetKind::SecondaryBus);
    }

    /// Handles a config write; returns what it did to the card.
    fn config_write(&self, offset: u64, data: &[u8]) -> ConfigEvent {
        // Take the config lock alone, then the card's: never both.
        let event = lock(&self.config).write(offset, data);
        match event {
            ConfigEvent::FunctionLevelReset => {
                lock(&self.card).reset(ResetKind::FunctionLevel);
            }
            ConfigEvent::ChipResetRequest => {
                // The firmware carries this reset out; a hung ARC cannot.
                if self.arc_responding.load(Ordering::SeqCst) {
                    lock(&self.card).reset(ResetKind::Cold);
                    lock(&self.config).fundamental_reset();
                }
            }
            ConfigEvent::None | ConfigEvent::BusMaster(_) => {}
        }
        event
    }
}

/// The vfio-user region table: BAR0-5, ROM, config, VGA. BARs are trapped
/// (no mmap): the TLB windows behind them translate addresses, and a
/// region's mmap areas are fixed when QEMU first queries it.
pub fn regions(arch: Arch) -> Vec<ServerRegion> {
    (0..VFIO_PCI_NUM_REGIONS)
        .map(|index| {
            let size = match index as usize {
                bar @ 0..NUM_BARS => bar_size(arch, bar),
                _ if index == VFIO_PCI_CONFIG_REGION_INDEX => CONFIG_SPACE_SIZE as u64,
                _ => 0,
            };
            let flags = if size > 0 {
                VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE
            } else {
                0
            };
            ServerRegion {
                region_info: vfio_region_info {
                    argsz: size_of::<vfio_region_info>() as u32,
                    flags,
                    index,
                    cap_offset: 0,
                    size,
                    offset: 0,
                },
                sparse_areas: Vec::new(),
                mmap_fd: None,
            }
        })
        .collect()
}

/// The vfio-user IRQ table: the vector counts of `IRQ_COUNTS`.
pub fn irqs() -> Vec<IrqInfo> {
    (0..VFIO_PCI_NUM_IRQS)
        .map(|index| {
            let count = IRQ_COUNTS[index as usize];
            let mut flags = 0;
            if count > 0 {
                flags |= VFIO_IRQ_INFO_EVENTFD;
            }
            if index == VFIO_PCI_MSI_IRQ_INDEX {
                // As the kernel's vfio-pci says of MSI: the vector count
                // cannot change while enabled.
                flags |= VFIO_IRQ_INFO_NORESIZE;
            }
            IrqInfo {
                index,
                flags,
                count,
            }
        })
        .collect()
}

/// The `ServerBackend` QEMU's messages land in.
pub struct Backend {
    shared: Arc<Shared>,
}

fn out_of_range() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "access outside the region",
    )
}

impl Backend {
    /// A backend serving `shared`'s card.
    pub fn new(shared: Arc<Shared>) -> Self {
        Backend { shared }
    }

    /// The BAR an access targets, checked against its size.
    fn bar_access(&self, region: u32, offset: u64, len: usize) -> std::io::Result<usize> {
        let bar = region as usize;
        let size = if bar < NUM_BARS {
            bar_size(self.shared.arch, bar)
        } else {
            0
        };
        match offset.checked_add(len as u64) {
            Some(end) if size > 0 && end <= size => Ok(bar),
            _ => Err(out_of_range()),
        }
    }

    fn delay(&self) {
        let ms = self.shared.delay_ms.load(Ordering::Relaxed);
        if ms > 0 {
            std::thread::sleep(Duration::from_millis(ms.into()));
        }
    }

    fn config_range(offset: u64, len: usize) -> std::io::Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= CONFIG_SPACE_SIZE as u64 => Ok(()),
            _ => Err(out_of_range()),
        }
    }
}

impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> std::io::Result<()> {
        if region == VFIO_PCI_CONFIG_REGION_INDEX {
            Self::config_range(offset, data.len())?;
            self.shared.catch_up();
            if self.shared.vanished.load(Ordering::SeqCst) {
                data.fill(0xff);
            } else {
                lock(&self.shared.config).read(offset, data);
            }
            log::trace!("config read {offset:#x}+{}", data.len());
            return Ok(());
        }
        let bar = self.bar_access(region, offset, data.len())?;
        self.shared.bar_accesses.count(bar, false);
        self.delay();
        lock(&self.shared.card).bar_read(bar, offset, data);
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> std::io::Result<()> {
        if region == VFIO_PCI_CONFIG_REGION_INDEX {
            Self::config_range(offset, data.len())?;
            self.shared.catch_up();
            if !self.shared.vanished.load(Ordering::SeqCst) {
                let event = self.shared.config_write(offset, data);
                log::trace!("config write {offset:#x} {data:02x?}: {event:?}");
                if event != ConfigEvent::None {
                    log::debug!("config write {offset:#x}: {event:?}");
                }
            }
            return Ok(());
        }
        let bar = self.bar_access(region, offset, data.len())?;
        self.shared.bar_accesses.count(bar, true);
        self.delay();
        lock(&self.shared.card).bar_write(bar, offset, data);
        Ok(())
    }

    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> std::io::Result<()> {
        log::debug!(
            "dma_map {address:#x}+{size:#x} flags {flags:?} offset {offset:#x} fd {}",
            if fd.is_some() { "yes" } else { "no" }
        );
        let readable = flags.contains(DmaMapFlags::READ);
        let writable = flags.contains(DmaMapFlags::WRITE);
        let host = &self.shared.host;
        match fd {
            Some(file) => {
                // A failed map must not fail the message: QEMU treats a DMA
                // mapping error as fatal. The range stays known, unreachable.
                if let Err(e) = host.map(address, size, offset, file, readable, writable) {
                    log::warn!("dma_map {address:#x}+{size:#x}: cannot mmap the fd ({e}); DMA there will fail");
                    host.map_without_fd(address, size, readable, writable);
                }
            }
            None => host.map_without_fd(address, size, readable, writable),
        }
        Ok(())
    }

    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> std::io::Result<()> {
        log::debug!("dma_unmap {address:#x}+{size:#x} flags {flags:?}");
        if flags.contains(DmaUnmapFlags::UNMAP_ALL) {
            self.shared.host.unmap_all();
        } else {
            self.shared.host.unmap(address, size);
        }
        Ok(())
    }

    fn reset(&mut self) -> std::io::Result<()> {
        log::debug!("reset message");
        self.shared.secondary_bus_reset();
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> std::io::Result<()> {
        // The ERR eventfd is kept but never signalled: see IRQ_COUNTS.
        log::debug!(
            "set_irqs index {index} flags {flags:#x} start {start} count {count} fds {}",
            fds.len()
        );
        let irq = &self.shared.interrupts;
        let invalid =
            |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string());
        let Some(&declared) = IRQ_COUNTS.get(index as usize) else {
            return Err(invalid("no such IRQ index"));
        };
        // Masking only matters for level-triggered INTx, which the card
        // does not have.
        if flags & VFIO_IRQ_SET_ACTION_TYPE_MASK != VFIO_IRQ_SET_ACTION_TRIGGER {
            return Ok(());
        }
        let data = flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
        if data == VFIO_IRQ_SET_DATA_NONE && count == 0 {
            // Tear down every vector of the index.
            for fd in lock(&irq.fds)[index as usize].iter_mut() {
                *fd = None;
            }
            return Ok(());
        }
        let end = start
            .checked_add(count)
            .filter(|&e| e <= declared)
            .ok_or_else(|| invalid("vector range beyond the declared count"))?;
        match data {
            VFIO_IRQ_SET_DATA_NONE => {
                // Loopback: fire the vectors now.
                for v in start..end {
                    irq.trigger(index, v);
                }
            }
            VFIO_IRQ_SET_DATA_EVENTFD => {
                let mut table = lock(&irq.fds);
                let mut fds = fds.into_iter();
                for v in start..end {
                    table[index as usize][v as usize] = fds.next();
                }
            }
            _ => return Err(invalid("unsupported set_irqs data type")),
        }
        Ok(())
    }
}

/// A bound vfio-user socket with the card behind it.
pub struct CardServer {
    server: Server,
    backend: Backend,
}

impl CardServer {
    /// Binds `socket` (which must not exist) for `shared`'s card. QEMU may
    /// connect as soon as this returns.
    pub fn bind(socket: &Path, shared: Arc<Shared>) -> Result<CardServer, vfio_user::Error> {
        let server = Server::new(socket, true, irqs(), regions(shared.arch))?;
        Ok(CardServer {
            server,
            backend: Backend::new(shared),
        })
    }

    /// Serves one QEMU connection until QEMU disconnects (Ok) or the
    /// connection fails. Dropping the server removes the socket file.
    pub fn run(mut self) -> Result<(), vfio_user::Error> {
        self.server.run(&mut self.backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use vfio_bindings::bindings::vfio::{
        VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_BAR2_REGION_INDEX, VFIO_PCI_BAR4_REGION_INDEX,
        VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_ROM_REGION_INDEX,
        VFIO_PCI_VGA_REGION_INDEX,
    };

    #[test]
    fn bar_accesses_are_counted_per_bar_and_direction_config_not() {
        let shared = Shared::new(Arch::Blackhole);
        let mut backend = Backend::new(shared.clone());
        let mut word = [0u8; 4];
        backend
            .region_read(VFIO_PCI_BAR0_REGION_INDEX, 0, &mut word)
            .unwrap();
        backend
            .region_read(VFIO_PCI_BAR0_REGION_INDEX, 4, &mut word)
            .unwrap();
        backend
            .region_write(VFIO_PCI_BAR0_REGION_INDEX, 0, &word)
            .unwrap();
        backend
            .region_write(VFIO_PCI_BAR2_REGION_INDEX, 0x1000, &word)
            .unwrap();
        backend
            .region_read(VFIO_PCI_CONFIG_REGION_INDEX, 0, &mut word)
            .unwrap();
        // Outside the BAR: refused, not counted.
        assert!(backend
            .region_read(VFIO_PCI_BAR2_REGION_INDEX, 1 << 20, &mut word)
            .is_err());
        assert_eq!(shared.bar_accesses.of(0), (2, 1));
        assert_eq!(shared.bar_accesses.of(2), (0, 1));
        assert_eq!(shared.bar_accesses.of(4), (0, 0));
        assert_eq!(
            crate::control::handle_line("accesses", &shared),
            Some(crate::control::Outcome::Reply(
                "ok bar0-reads=2 bar0-writes=1 bar2-reads=0 bar2-writes=1 bar4-reads=0 bar4-writes=0"
                    .into()
            ))
        );
    }

    #[test]
    fn all_nine_regions_are_declared_and_only_bars_and_config_have_size() {
        for arch in [Arch::Wormhole, Arch::Blackhole] {
            let r = regions(arch);
            assert_eq!(r.len(), 9);
            for (i, region) in r.iter().enumerate() {
                assert_eq!(region.region_info.index as usize, i);
                assert!(region.sparse_areas.is_empty(), "BARs are trapped");
                assert!(region.mmap_fd.is_none());
            }
            let size = |i: u32| r[i as usize].region_info.size;
            assert_eq!(size(VFIO_PCI_BAR0_REGION_INDEX), 512 << 20);
            assert_eq!(size(VFIO_PCI_BAR2_REGION_INDEX), 1 << 20);
            assert!(size(VFIO_PCI_BAR4_REGION_INDEX) > 0);
            assert_eq!(size(1), 0);
            assert_eq!(size(3), 0);
            assert_eq!(size(5), 0);
            assert_eq!(size(VFIO_PCI_ROM_REGION_INDEX), 0);
            assert_eq!(size(VFIO_PCI_CONFIG_REGION_INDEX), 4096);
            assert_eq!(size(VFIO_PCI_VGA_REGION_INDEX), 0);
        }
    }

    #[test]
    fn all_five_irq_indices_are_declared() {
        let i = irqs();
        assert_eq!(i.len(), 5);
        assert_eq!(i[VFIO_PCI_INTX_IRQ_INDEX as usize].count, 0);
        assert_eq!(i[VFIO_PCI_MSI_IRQ_INDEX as usize].count, 1);
        assert_ne!(
            i[VFIO_PCI_MSI_IRQ_INDEX as usize].flags & VFIO_IRQ_INFO_EVENTFD,
            0
        );
        assert_eq!(i[VFIO_PCI_MSIX_IRQ_INDEX as usize].count, 0);
        assert_eq!(i[VFIO_PCI_REQ_IRQ_INDEX as usize].count, 1);
    }

    #[test]
    fn flr_and_reset_messages_reset_and_are_counted() {
        let shared = Shared::new(Arch::Wormhole);
        let mut b = Backend::new(shared.clone());
        let cfg = VFIO_PCI_CONFIG_REGION_INDEX;
        b.region_write(cfg, 0x04, &0x0046u16.to_le_bytes()).unwrap();
        // Initiate FLR: PCIe DevCtl (capability at 0x70, DevCtl at +8) bit 15.
        b.region_write(cfg, 0x78, &0x8000u16.to_le_bytes()).unwrap();
        assert_eq!(lock(&shared.card).resets().function_level, 1);
        let mut cmd = [0u8; 2];
        b.region_read(cfg, 0x04, &mut cmd).unwrap();
        assert_eq!(cmd, [0, 0]);
        b.reset().unwrap();
        b.reset().unwrap();
        assert_eq!(lock(&shared.card).resets().secondary_bus, 2);
        assert_eq!(lock(&shared.card).resets().cold, 0);
    }

    #[test]
    fn blackhole_interface_timer_resets_unless_arc_hangs() {
        let shared = Shared::new(Arch::Blackhole);
        let mut b = Backend::new(shared.clone());
        let cfg = VFIO_PCI_CONFIG_REGION_INDEX;
        // tt-kmd's reset marker, then its pcie_timer_interrupt.
        b.region_write(cfg, 0x04, &0x0046u16.to_le_bytes()).unwrap();
        shared.arc_responding.store(false, Ordering::SeqCst);
        b.region_write(cfg, 0x930, &0x11u32.to_le_bytes()).unwrap();
        assert_eq!(lock(&shared.card).resets().cold, 0);
        shared.arc_responding.store(true, Ordering::SeqCst);
        b.region_write(cfg, 0x930, &0x11u32.to_le_bytes()).unwrap();
        assert_eq!(lock(&shared.card).resets().cold, 1);
        let mut cmd = [0u8; 2];
        b.region_read(cfg, 0x04, &mut cmd).unwrap();
        assert_eq!(u16::from_le_bytes(cmd) & 0x40, 0, "reset marker cleared");
    }

    /// tt-kmd `wormhole_reset` then POST_RESET: the reset marker set, ARC
    /// asked for TRIGGER_RESET through BAR4's reset unit, and after the
    /// firmware's delay a config read alone sees the marker cleared.
    #[test]
    fn a_firmware_reset_is_seen_by_the_next_config_read() {
        let shared = Shared::new(Arch::Wormhole);
        let mut b = Backend::new(shared.clone());
        let cfg = VFIO_PCI_CONFIG_REGION_INDEX;
        b.region_write(cfg, 0x04, &0x0046u16.to_le_bytes()).unwrap();
        // RESET_UNIT_START = 0x1FF30000 - 0x1E000000: SCRATCH[3], SCRATCH[5],
        // ARC_MISC_CNTL.
        let reset_unit = 0x1FF3_0000 - 0x1E00_0000;
        for (off, value) in [(0x6C, 0u32), (0x74, 0xAA56), (0x100, 1 << 16)] {
            b.region_write(4, reset_unit + off, &value.to_le_bytes())
                .unwrap();
        }
        std::thread::sleep(crate::arc::RESET_DELAY + Duration::from_millis(5));
        let mut cmd = [0u8; 2];
        b.region_read(cfg, 0x04, &mut cmd).unwrap();
        assert_eq!(cmd, [0, 0], "reset marker cleared");
        assert_eq!(lock(&shared.card).resets().cold, 1);
    }

    #[test]
    fn a_vanished_card_reads_all_ones_and_drops_writes() {
        let shared = Shared::new(Arch::Wormhole);
        let mut b = Backend::new(shared.clone());
        let cfg = VFIO_PCI_CONFIG_REGION_INDEX;
        shared.set_vanished(true);
        let mut id = [0u8; 4];
        b.region_read(cfg, 0, &mut id).unwrap();
        assert_eq!(id, [0xff; 4]);
        b.region_write(cfg, 0x04, &0x0006u16.to_le_bytes()).unwrap();
        let mut bar = [0u8; 4];
        b.region_read(0, 0, &mut bar).unwrap();
        assert_eq!(bar, [0xff; 4]);
        shared.set_vanished(false);
        b.region_read(cfg, 0, &mut id).unwrap();
        assert_eq!(u32::from_le_bytes(id), 0x401e_1e52);
        let mut cmd = [0u8; 2];
        b.region_read(cfg, 0x04, &mut cmd).unwrap();
        assert_eq!(cmd, [0, 0], "the write while vanished was dropped");
    }

    #[test]
    fn accesses_outside_regions_fail() {
        let shared = Shared::new(Arch::Wormhole);
        let mut b = Backend::new(shared);
        let mut d = [0u8; 4];
        assert!(b
            .region_read(VFIO_PCI_CONFIG_REGION_INDEX, 4094, &mut d)
            .is_err());
        assert!(
            b.region_read(1, 0, &mut d).is_err(),
            "BAR1 is BAR0's upper half"
        );
        assert!(b.region_read(2, (1 << 20) - 2, &mut d).is_err());
        assert!(b.region_read(VFIO_PCI_ROM_REGION_INDEX, 0, &mut d).is_err());
        assert!(b.region_read(2, (1 << 20) - 4, &mut d).is_ok());
    }

    #[test]
    fn dma_map_without_fd_or_with_a_bad_fd_never_fails() {
        let shared = Shared::new(Arch::Blackhole);
        let mut b = Backend::new(shared.clone());
        b.dma_map(DmaMapFlags::READ_WRITE, 0, 0x1000, 0x1000, None)
            .unwrap();
        // /dev/null cannot be mmapped shared: recorded as unreachable.
        let null = File::open("/dev/null").unwrap();
        b.dma_map(DmaMapFlags::READ, 0, 0x8000, 0x1000, Some(null))
            .unwrap();
        assert_eq!(shared.host.mapping_count(), 2);
        let mut d = [0u8; 1];
        assert!(shared.host.read(0x8000, &mut d).is_err());
        b.dma_unmap(DmaUnmapFlags::UNMAP_ALL, 0, 0).unwrap();
        assert_eq!(shared.host.mapping_count(), 0);
    }

    fn eventfd() -> (File, File) {
        // SAFETY: plain eventfd creation; the fd is ours.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
        assert!(fd >= 0);
        // SAFETY: fd is fresh and owned here.
        let f = unsafe { File::from_raw_fd(fd) };
        let g = f.try_clone().unwrap();
        (f, g)
    }

    #[test]
    fn msi_eventfd_is_kept_and_signalled_then_torn_down() {
        let shared = Shared::new(Arch::Wormhole);
        let mut b = Backend::new(shared.clone());
        let irq = &shared.interrupts;
        assert!(!irq.raise_msi(0));
        let (ours, mut theirs) = eventfd();
        let eventfd_trigger = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
        b.set_irqs(VFIO_PCI_MSI_IRQ_INDEX, eventfd_trigger, 0, 1, vec![ours])
            .unwrap();
        assert!(irq.raise_msi(0));
        assert!(irq.raise_msi(0));
        let mut count = [0u8; 8];
        theirs.read_exact(&mut count).unwrap();
        assert_eq!(u64::from_ne_bytes(count), 2);
        // QEMU disables MSI with DATA_NONE | TRIGGER and count 0.
        b.set_irqs(
            VFIO_PCI_MSI_IRQ_INDEX,
            VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER,
            0,
            0,
            vec![],
        )
        .unwrap();
        assert!(!irq.raise_msi(0));
        // More vectors than declared are refused.
        let (f, _g) = eventfd();
        assert!(b
            .set_irqs(VFIO_PCI_MSI_IRQ_INDEX, eventfd_trigger, 0, 2, vec![f])
            .is_err());
    }
}

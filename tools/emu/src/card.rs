// SPDX-License-Identifier: GPL-2.0
//! What each BAR offset of the card is.
//!
//! # Wormhole (tt-kmd 2.10 wormhole.c, tt-umd, luwen)
//! - **BAR0** (512 MiB). 0 to 0x1F000000: the 186 TLB windows. From
//!   0x1F000000: the chip's system registers, at BAR0 offset = AXI address:
//!   the TLB config registers at 0x1FC00000, the PCIe tile's NOC2AXI block
//!   at 0x1FD00000 (its NOC0 NIU at 0x1FD02000, tt-kmd wormhole.c
//!   `NOC2AXI_START` as a BAR0 offset; NOC1's 0x8000 after it,
//!   `NIU_NOC1_OFFSET`), ARC's CSM at 0x1FE80000 and APB peripherals (reset
//!   unit, scratch registers, ARC's NIUs) from 0x1FF00000 (tt-umd
//!   `ARC_CSM_BAR0_XBAR_OFFSET_START`, `ARC_APB_BAR0_XBAR_OFFSET_START`),
//!   which [`crate::arc::bar0_to_arc`] places in the ARC tile.
//! - **BAR2** (1 MiB): the PCIe controller: its DMA engine's registers from
//!   0 (tt-umd `WormholeDmaTransfer`) and the iATU at 0x1200 (tt-kmd
//!   `IATU_BASE`).
//! - **BAR4** (32 MiB): the system registers again, from AXI 0x1E000000
//!   through the iATU's inbound region 1 (tt-kmd
//!   `map_bar4_to_system_registers`): BAR4 offset 0 is the last 16 MiB
//!   window (tt-kmd's own, `KERNEL_TLB_START`), the registers from 0x1000000.
//!   tt-kmd reaches every register through BAR4; tt-umd and luwen use BAR0.
//!
//! # Blackhole (tt-kmd 2.10 blackhole.c, tt-umd, luwen)
//! - **BAR0** (512 MiB): 202 x 2 MiB windows from 0, registers from
//!   0x19400000: TLB config at 0x1FC00000 (12-byte registers, then the
//!   strided ones), the PCIe tile's NOC2AXI block at 0x1FD00000 (its NIUs at
//!   0x1FD04000 and 0x1FD14000: tt-kmd `NOC_ID_OFFSET` 0x4044,
//!   `NOC1_NOC2AXI_OFFSET`; tt-umd `NIU_CFG_NOC0_BAR_PCIE_ADDR`), and
//!   whatever [`crate::arc::bar0_to_arc`] says reaches ARC.
//! - **BAR2** (1 MiB): the PCIe controller, iATU at 0x1000.
//! - **BAR4** (8 GiB here): the 4 GiB windows, `bar4_size / 4 GiB` of them.
//!
//! Offsets of the register space this model gives no meaning are plain
//! storage: what is written reads back, so nothing a driver writes at probe
//! is lost. An access past the end of a BAR reads all ones.
//!
//! # Resets
//! Every kind puts the TLB registers, the register space, the NIUs, the
//! PCIe controller (iATU, DBI) back to reset values and reboots the ARC
//! firmware. A secondary bus reset or FLR keeps tile memory (Tensix and
//! Ethernet L1, DRAM): resets do not clear SRAM or DRAM, though nothing
//! promises their contents. A cold reset (power on) starts from zeros; so
//! do the chip resets the firmware carries out: TRIGGER_RESET (tt-kmd
//! `wormhole_reset`, `blackhole_reset`), which the card performs at the
//! first access after the firmware's delay, and Blackhole's interface-timer
//! reset request ([`crate::config_space::ConfigEvent::ChipResetRequest`]).
//! Injected faults (vanished, ARC hung, reply delay) are the emulator's, not
//! the chip's: they survive every reset.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::arc::bar0_to_arc;
use crate::config_space::{bar_size, ConfigSpace};
use crate::host_memory::HostMemory;
use crate::noc::{self, NiuCounter, Noc, NocError, NocId, SparseMemory};
use crate::tlb::{self, TlbRegisters, TLB_CONFIG_BASE, TLB_CONFIG_LEN};
use crate::Arch;

/// What reset the card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetKind {
    /// Power on: nothing survives.
    Cold,
    /// A hot reset from the root port (QEMU's reset message).
    SecondaryBus,
    /// FLR (PCIe Device Control bit 15).
    FunctionLevel,
}

/// Resets the card has gone through, by kind (the control socket's
/// `resets`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResetCounts {
    /// Chip resets: the ones ARC carries out for TRIGGER_RESET, and those
    /// Blackhole's interface timer requests (tt-kmd's CONFIG_WRITE and
    /// ASIC_RESET).
    pub cold: u64,
    /// vfio-user reset messages: secondary bus resets, and one at every
    /// machine start.
    pub secondary_bus: u64,
    /// FLRs started through PCIe DevCtl.
    pub function_level: u64,
}

/// The PCIe tile's NOC2AXI configuration block in BAR0, 1 MiB (tt-kmd
/// blackhole.c `NOC2AXI_CFG_START`, `NOC2AXI_CFG_LEN`; Wormhole's NIUs fall
/// in the same range). [`noc2axi_niu`] says where its two NIUs are.
const NOC2AXI_CFG_START: u64 = 0x1FD0_0000;
const NOC2AXI_CFG_END: u64 = NOC2AXI_CFG_START + 0x10_0000;

fn noc2axi_niu(arch: Arch) -> [(u64, u64, NocId); 2] {
    match arch {
        // tt-kmd wormhole.c NOC2AXI_START 0x1FD02000, NIU_NOC1_OFFSET 0x8000.
        Arch::Wormhole => [
            (0x1FD0_2000, 0x8000, NocId::Noc0),
            (0x1FD0_A000, 0x8000, NocId::Noc1),
        ],
        // tt-kmd blackhole.c NOC2AXI_CFG_START + 0x4000 (NOC_ID_OFFSET 0x4044
        // is the node id at 0x44), NOC1_NOC2AXI_OFFSET 0x10000.
        Arch::Blackhole => [
            (0x1FD0_4000, 0x1_0000, NocId::Noc0),
            (0x1FD1_4000, 0x1_0000, NocId::Noc1),
        ],
    }
}

/// Where the register space of BAR0 begins.
fn bar0_registers_start(arch: Arch) -> u64 {
    match arch {
        Arch::Wormhole => tlb::WH_WINDOWS_END,
        Arch::Blackhole => tlb::BH_WINDOWS_END,
    }
}

/// The end of the chip's AXI space as the host reaches it: BAR0 offset =
/// AXI address on both chips (tt-umd hands its DMA engine BAR0 offsets as
/// chip addresses), and Wormhole's BAR4 lands in the same space.
const AXI_END: u64 = 0x2000_0000;

#[derive(Clone, Copy, Debug)]
enum Route {
    /// TLB window `index`, at `offset` inside it.
    Window { index: usize, offset: u64 },
    /// The TLB config block, at `offset` from its base.
    TlbConfig { offset: u64 },
    /// A NIU of the PCIe tile, at `offset` in its block.
    Niu { block: NocId, offset: u64 },
    /// The ARC tile, at this NOC address.
    Arc { addr: u64 },
    /// Plain storage of BAR0's register space, at this BAR0 offset.
    Plain { offset: u64 },
    /// The PCIe controller's BAR2 registers.
    Bar2 { offset: u64 },
    /// Nothing decodes this.
    Nothing,
}

enum Data<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Data<'_> {
    fn len(&self) -> usize {
        match self {
            Data::Read(b) => b.len(),
            Data::Write(d) => d.len(),
        }
    }
}

/// The PCIe controller's DMA engines in BAR2, as tt-umd programs them
/// (`WormholeDmaTransfer`, `BlackholeDmaTransfer`; luwen and tt-kmd do not
/// use them). Offsets are tt-umd's names.
mod dma {
    /// Wormhole: a write channel moves chip to host (tt-umd d2h), a read
    /// channel host to chip (h2d). Engine-wide registers:
    pub const WH_WRITE_ENGINE_EN: u64 = 0x0C;
    pub const WH_WRITE_DOORBELL: u64 = 0x10;
    pub const WH_WRITE_INT_MASK: u64 = 0x54;
    pub const WH_WRITE_DONE_IMWR_LOW: u64 = 0x60;
    pub const WH_WRITE_ABORT_IMWR_LOW: u64 = 0x68;
    /// Channel 0's completion data in bits 0-15, channel 1's in 16-31.
    pub const WH_WRITE_CH01_IMWR_DATA: u64 = 0x70;
    pub const WH_READ_ENGINE_EN: u64 = 0x2C;
    pub const WH_READ_DOORBELL: u64 = 0x30;
    pub const WH_READ_INT_MASK: u64 = 0xA8;
    pub const WH_READ_DONE_IMWR_LOW: u64 = 0xCC;
    pub const WH_READ_ABORT_IMWR_LOW: u64 = 0xD4;
    pub const WH_READ_CH01_IMWR_DATA: u64 = 0xDC;
    /// Channel 0's registers: write channel at 0x200, read channel at
    /// 0x300 (tt-umd `DMA_CH_CONTROL1_OFF_WRCH_0`/`_RDCH_0`). Channel n is
    /// taken to follow at n * 0x200, the layout these offsets come from;
    /// tt-umd uses channel 0 only.
    pub const WH_WRITE_CH0: u64 = 0x200;
    pub const WH_READ_CH0: u64 = 0x300;
    pub const WH_CH_STRIDE: u64 = 0x200;
    pub const WH_CH_CONTROL1: u64 = 0x00;
    pub const WH_CH_TRANSFER_SIZE: u64 = 0x08;
    pub const WH_CH_SAR_LOW: u64 = 0x0C;
    pub const WH_CH_DAR_LOW: u64 = 0x14;
    /// CONTROL1 bit tt-umd sets (0x10) so that completion writes the
    /// done-IMWR data to host memory.
    pub const WH_CONTROL1_RIE: u32 = 1 << 4;

    /// Blackhole read channel 0 (host to chip), the only one tt-umd uses.
    pub const BH_READ_CH0_EN: u64 = 0x100;
    pub const BH_READ_CH0_DOORBELL: u64 = 0x104;
    pub const BH_READ_CH0_XFERSIZE: u64 = 0x11C;
    pub const BH_READ_CH0_SAR_LOW: u64 = 0x120;
    pub const BH_READ_CH0_DAR_LOW: u64 = 0x128;
    pub const BH_READ_CH0_INT_SETUP: u64 = 0x188;
    pub const BH_READ_CH0_MSI_STOP_LOW: u64 = 0x190;
    pub const BH_READ_CH0_MSI_ABORT_LOW: u64 = 0x1A0;
    pub const BH_READ_CH0_MSI_MSGD: u64 = 0x1A8;
    /// INT_SETUP bit 5: "remote stop interrupt" (tt-umd), the write of
    /// MSI_MSGD to MSI_STOP when the transfer ends.
    pub const BH_INT_SETUP_REMOTE_STOP: u32 = 1 << 5;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum DmaDirection {
    ChipToHost,
    HostToChip,
}

/// One emulated card: the chip behind its BARs.
pub struct Card {
    arch: Arch,
    noc: Noc,
    tlb: TlbRegisters,
    /// BAR0 register space offsets without a meaning of their own, as
    /// written (indexed by BAR0 offset).
    plain: SparseMemory,
    vanished: bool,
    bar_sizes: [u64; 6],
    resets: ResetCounts,
}

impl Card {
    pub fn new(arch: Arch, host: Arc<HostMemory>) -> Card {
        Card {
            arch,
            noc: Noc::new(arch, host),
            tlb: TlbRegisters::new(arch),
            plain: SparseMemory::new(bar_size(arch, 0)),
            vanished: false,
            bar_sizes: std::array::from_fn(|bar| bar_size(arch, bar)),
            resets: ResetCounts::default(),
        }
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The chip behind the BARs.
    pub fn noc(&self) -> &Noc {
        &self.noc
    }

    pub fn noc_mut(&mut self) -> &mut Noc {
        &mut self.noc
    }

    pub fn tlb_registers(&self) -> &TlbRegisters {
        &self.tlb
    }

    /// Lets the PCIe tile's DBI reach the function's config space (see
    /// [`noc::PcieController`]). The card's lock is then held while the
    /// config space's is taken: never take them the other way round.
    pub fn connect_config_space(&mut self, config: Arc<Mutex<ConfigSpace>>) {
        self.noc.pcie_mut().connect_config_space(config);
    }

    /// Reads `data.len()` bytes at `offset` of BAR `bar`. Any length and
    /// alignment; an access that spans windows or registers is split.
    pub fn bar_read(&mut self, bar: usize, offset: u64, data: &mut [u8]) {
        if self.vanished {
            data.fill(0xFF);
            return;
        }
        self.bar_access(bar, offset, Data::Read(data));
    }

    /// Writes `data` at `offset` of BAR `bar`.
    pub fn bar_write(&mut self, bar: usize, offset: u64, data: &[u8]) {
        if self.vanished {
            return;
        }
        self.bar_access(bar, offset, Data::Write(data));
    }

    fn bar_access(&mut self, bar: usize, offset: u64, mut data: Data) {
        self.carry_out_firmware_reset();
        let total = data.len();
        let mut done = 0usize;
        while done < total {
            let (route, len) = self.route(bar, offset.saturating_add(done as u64));
            let n = (total - done)
                .min(usize::try_from(len).unwrap_or(usize::MAX))
                .max(1);
            let piece = match &mut data {
                Data::Read(b) => Data::Read(&mut b[done..done + n]),
                Data::Write(d) => Data::Write(&d[done..done + n]),
            };
            self.perform(route, piece);
            done += n;
        }
    }

    /// Resets the card (see the module documentation for what survives).
    pub fn reset(&mut self, kind: ResetKind) {
        let count = match kind {
            ResetKind::Cold => &mut self.resets.cold,
            ResetKind::SecondaryBus => &mut self.resets.secondary_bus,
            ResetKind::FunctionLevel => &mut self.resets.function_level,
        };
        *count += 1;
        self.tlb.reset();
        self.plain.clear();
        self.noc.reset_registers();
        if kind == ResetKind::Cold {
            self.noc.clear_memory();
        }
    }

    /// How many resets of each kind the card has gone through.
    pub fn resets(&self) -> ResetCounts {
        self.resets
    }

    /// Carries out a chip reset the ARC firmware started (TRIGGER_RESET,
    /// see [`crate::arc::ResetRequest`]) once it is due. There is no timer
    /// thread: every BAR, config and control access checks first, so
    /// nothing the host can observe comes before the reset. The whole chip
    /// restarts, PCIe controller included: a [`ResetKind::Cold`] reset, and
    /// the config space's fundamental reset if one is connected. The
    /// caller must not hold the config space's lock.
    pub fn carry_out_firmware_reset(&mut self) {
        let Some(request) = self.noc.arc().pending_reset() else {
            return;
        };
        if Instant::now() < request.due {
            return;
        }
        self.reset(ResetKind::Cold);
        if let Some(config) = self.noc.pcie().config_space().cloned() {
            config
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .fundamental_reset();
        }
    }

    /// A card that fell off the bus: every read returns all ones, every
    /// write is dropped, until this is cleared.
    pub fn set_vanished(&mut self, vanished: bool) {
        self.vanished = vanished;
    }

    pub fn set_arc_responding(&mut self, on: bool) {
        self.noc.arc_mut().set_responding(on);
    }

    /// How long the ARC firmware takes to get to its message queues.
    pub fn set_arc_queue_latency(&mut self, latency: std::time::Duration) {
        self.noc.arc_mut().set_queue_latency(latency);
    }

    /// The ARC firmware moves its message queues (see
    /// [`crate::arc::ArcFirmware::move_queues`]): their new ARC address.
    pub fn move_arc_queues(&mut self) -> u32 {
        self.carry_out_firmware_reset();
        self.noc.arc_mut().move_queues()
    }

    /// Reads tile memory as NOC0 sees it, without a window (for tests and
    /// the emulator itself). All ones where nothing answers.
    pub fn noc_read(&mut self, x: u8, y: u8, addr: u64, buf: &mut [u8]) {
        self.carry_out_firmware_reset();
        let _ = self.noc.read(NocId::Noc0, x, y, addr, buf);
    }

    pub fn noc_write(&mut self, x: u8, y: u8, addr: u64, data: &[u8]) {
        self.carry_out_firmware_reset();
        let _ = self.noc.write(NocId::Noc0, x, y, addr, data);
    }

    /// What BAR `bar` offset `offset` is, and for how many bytes from there.
    fn route(&self, bar: usize, offset: u64) -> (Route, u64) {
        let size = self.bar_sizes.get(bar).copied().unwrap_or(0);
        if offset >= size {
            return (Route::Nothing, u64::MAX);
        }
        let left = size - offset;
        let (route, len) = match (self.arch, bar) {
            (_, 2) => (Route::Bar2 { offset }, left),
            (Arch::Wormhole, 4) => {
                let axi = self.noc.pcie().bar4_target().wrapping_add(offset);
                if axi < AXI_END {
                    self.route_bar0(axi)
                } else {
                    (Route::Nothing, u64::MAX)
                }
            }
            (_, 0) => self.route_bar0(offset),
            (Arch::Blackhole, 4) => match tlb::window_at(self.arch, bar, offset) {
                Some((w, in_window)) => (
                    Route::Window {
                        index: w.index,
                        offset: in_window,
                    },
                    w.size() - in_window,
                ),
                None => (Route::Nothing, u64::MAX),
            },
            _ => (Route::Nothing, u64::MAX),
        };
        (route, len.min(left))
    }

    /// BAR0 offsets, which are also the chip's AXI addresses (BAR4 on
    /// Wormhole and the DMA engines arrive here too).
    fn route_bar0(&self, offset: u64) -> (Route, u64) {
        if let Some((w, in_window)) = tlb::window_at(self.arch, 0, offset) {
            return (
                Route::Window {
                    index: w.index,
                    offset: in_window,
                },
                w.size() - in_window,
            );
        }
        if offset < bar0_registers_start(self.arch) || offset >= AXI_END {
            return (Route::Nothing, u64::MAX);
        }
        if (TLB_CONFIG_BASE..TLB_CONFIG_BASE + TLB_CONFIG_LEN).contains(&offset) {
            return (
                Route::TlbConfig {
                    offset: offset - TLB_CONFIG_BASE,
                },
                TLB_CONFIG_BASE + TLB_CONFIG_LEN - offset,
            );
        }
        if (NOC2AXI_CFG_START..NOC2AXI_CFG_END).contains(&offset) {
            let mut next = NOC2AXI_CFG_END;
            for (base, len, block) in noc2axi_niu(self.arch) {
                if (base..base + len).contains(&offset) {
                    let route = Route::Niu {
                        block,
                        offset: offset - base,
                    };
                    return (route, base + len - offset);
                }
                if base > offset {
                    next = next.min(base);
                }
            }
            return (Route::Plain { offset }, next - offset);
        }
        // Word by word: only arc.rs knows which offsets reach ARC.
        let word = offset & !3;
        let len = 4 - (offset - word);
        match bar0_to_arc(self.arch, word) {
            Some(addr) => (
                Route::Arc {
                    addr: addr + (offset - word),
                },
                len,
            ),
            None => (Route::Plain { offset }, len),
        }
    }

    fn perform(&mut self, route: Route, data: Data) {
        match route {
            Route::Window { index, offset } => self.window_access(index, offset, data),
            Route::TlbConfig { offset } => match data {
                Data::Read(b) => self.tlb.read(offset, b),
                Data::Write(d) => self.tlb.write(offset, d),
            },
            Route::Niu { block, offset } => {
                let tile = noc::pcie_tile(self.arch);
                match data {
                    Data::Read(b) => self.noc.niu_local_read(tile, block, offset, b),
                    Data::Write(d) => self.noc.niu_local_write(tile, block, offset, d),
                }
            }
            Route::Arc { addr } => {
                let _ = match data {
                    Data::Read(b) => self.noc.arc_local_read(addr, b),
                    Data::Write(d) => self.noc.arc_local_write(addr, d),
                };
            }
            Route::Plain { offset } => match data {
                Data::Read(b) => self.plain.read(offset, b),
                Data::Write(d) => self.plain.write(offset, d),
            },
            Route::Bar2 { offset } => match data {
                Data::Read(b) => self.noc.pcie().bar2_read(offset, b),
                Data::Write(d) => {
                    self.noc.pcie_mut().bar2_write(offset, d);
                    self.dma_doorbells(offset, d.len() as u64);
                }
            },
            Route::Nothing => {
                if let Data::Read(b) = data {
                    b.fill(0xFF);
                }
            }
        }
    }

    fn bar2_reg(&self, offset: u64) -> u32 {
        let mut b = [0; 4];
        self.noc.pcie().bar2_read(offset, &mut b);
        u32::from_le_bytes(b)
    }

    fn bar2_reg64(&self, low: u64) -> u64 {
        u64::from(self.bar2_reg(low)) | u64::from(self.bar2_reg(low + 4)) << 32
    }

    fn set_bar2_reg(&mut self, offset: u64, value: u32) {
        self.noc.pcie_mut().bar2_write(offset, &value.to_le_bytes());
    }

    /// Starts the DMA transfer whose doorbell a BAR2 write rang. The
    /// transfer is done when the write returns: the guest sees it complete
    /// on its first poll. It runs on the serving loop, which must answer
    /// QEMU within its 5 s timeout: fine for what tt-umd moves (at most one
    /// TLB window per transfer, `PcieProtocol::dma_transfer`), not for a
    /// transfer size register of gigabytes.
    fn dma_doorbells(&mut self, offset: u64, len: u64) {
        let rang = |reg: u64| offset <= reg && reg < offset + len;
        match self.arch {
            Arch::Wormhole => {
                for (doorbell, direction) in [
                    (dma::WH_WRITE_DOORBELL, DmaDirection::ChipToHost),
                    (dma::WH_READ_DOORBELL, DmaDirection::HostToChip),
                ] {
                    if rang(doorbell) {
                        let channel = u64::from(self.bar2_reg(doorbell) & 7);
                        self.wh_dma(direction, channel);
                    }
                }
            }
            Arch::Blackhole => {
                if rang(dma::BH_READ_CH0_DOORBELL)
                    && self.bar2_reg(dma::BH_READ_CH0_DOORBELL) & 1 != 0
                {
                    self.bh_dma_read_channel0();
                }
            }
        }
    }

    fn wh_dma(&mut self, direction: DmaDirection, channel: u64) {
        let (enable, mask, done, abort, data, ch0) = match direction {
            DmaDirection::ChipToHost => (
                dma::WH_WRITE_ENGINE_EN,
                dma::WH_WRITE_INT_MASK,
                dma::WH_WRITE_DONE_IMWR_LOW,
                dma::WH_WRITE_ABORT_IMWR_LOW,
                dma::WH_WRITE_CH01_IMWR_DATA,
                dma::WH_WRITE_CH0,
            ),
            DmaDirection::HostToChip => (
                dma::WH_READ_ENGINE_EN,
                dma::WH_READ_INT_MASK,
                dma::WH_READ_DONE_IMWR_LOW,
                dma::WH_READ_ABORT_IMWR_LOW,
                dma::WH_READ_CH01_IMWR_DATA,
                dma::WH_READ_CH0,
            ),
        };
        if self.bar2_reg(enable) & 1 == 0 {
            return;
        }
        let ch = ch0 + channel * dma::WH_CH_STRIDE;
        let size = u64::from(self.bar2_reg(ch + dma::WH_CH_TRANSFER_SIZE));
        let sar = self.bar2_reg64(ch + dma::WH_CH_SAR_LOW);
        let dar = self.bar2_reg64(ch + dma::WH_CH_DAR_LOW);
        let ok = self.dma_copy(direction, sar, dar, size);
        self.set_bar2_reg(ch + dma::WH_CH_TRANSFER_SIZE, 0);
        let notify = self.bar2_reg(ch + dma::WH_CH_CONTROL1) & dma::WH_CONTROL1_RIE != 0
            && self.bar2_reg(mask) & (1 << channel) == 0;
        if notify {
            let word = self.bar2_reg(data + 4 * (channel / 2)) >> (16 * (channel % 2)) & 0xFFFF;
            let to = self.bar2_reg64(if ok { done } else { abort });
            if to != 0 {
                let _ = self.noc.host().write(to, &word.to_le_bytes());
            }
        }
    }

    fn bh_dma_read_channel0(&mut self) {
        if self.bar2_reg(dma::BH_READ_CH0_EN) & 1 == 0 {
            return;
        }
        let size = u64::from(self.bar2_reg(dma::BH_READ_CH0_XFERSIZE));
        let sar = self.bar2_reg64(dma::BH_READ_CH0_SAR_LOW);
        let dar = self.bar2_reg64(dma::BH_READ_CH0_DAR_LOW);
        let ok = self.dma_copy(DmaDirection::HostToChip, sar, dar, size);
        // tt-umd polls XFERSIZE until it reads 0.
        self.set_bar2_reg(dma::BH_READ_CH0_XFERSIZE, 0);
        if self.bar2_reg(dma::BH_READ_CH0_INT_SETUP) & dma::BH_INT_SETUP_REMOTE_STOP != 0 {
            let word = self.bar2_reg(dma::BH_READ_CH0_MSI_MSGD);
            let to = self.bar2_reg64(if ok {
                dma::BH_READ_CH0_MSI_STOP_LOW
            } else {
                dma::BH_READ_CH0_MSI_ABORT_LOW
            });
            if to != 0 {
                let _ = self.noc.host().write(to, &word.to_le_bytes());
            }
        }
    }

    /// Moves `size` bytes between host memory and the chip's AXI space,
    /// which on both chips is BAR0's layout (tt-umd hands the engine a
    /// window's BAR0 offset, `tlb_offset`, as the chip address). False if
    /// host memory did not answer.
    fn dma_copy(&mut self, direction: DmaDirection, sar: u64, dar: u64, size: u64) -> bool {
        const CHUNK: u64 = 64 * 1024;
        let mut buf = vec![0u8; CHUNK.min(size) as usize];
        let mut done = 0;
        while done < size {
            let n = CHUNK.min(size - done) as usize;
            let piece = &mut buf[..n];
            match direction {
                DmaDirection::ChipToHost => {
                    self.bar_access(0, sar + done, Data::Read(piece));
                    if self.noc.host().write(dar + done, piece).is_err() {
                        return false;
                    }
                }
                DmaDirection::HostToChip => {
                    if self.noc.host().read(sar + done, piece).is_err() {
                        return false;
                    }
                    self.bar_access(0, dar + done, Data::Write(piece));
                }
            }
            done += n as u64;
        }
        true
    }

    /// An access through window `index`: a unicast to (x_end, y_end), or for
    /// a multicast window, a write to every Tensix of the rectangle. A read
    /// through a multicast window is answered by (x_end, y_end); none of the
    /// sources say what the chip does.
    fn window_access(&mut self, index: usize, offset: u64, data: Data) {
        let cfg = self.tlb.config(index);
        let addr = cfg.addr.wrapping_add(offset);
        let Some(noc) = NocId::from_field(cfg.noc) else {
            if let Data::Read(b) = data {
                b.fill(0xFF);
            }
            return;
        };
        // The PCIe tile masters the request onto `noc`: its NIU counts the
        // data words (non-posted unless the window posts its writes).
        let (counter, len) = match &data {
            Data::Read(b) => (NiuCounter::MstRdDataWordReceived, b.len()),
            Data::Write(d)
                if matches!(
                    cfg.ordering,
                    tlb::Ordering::Posted | tlb::Ordering::PostedStrict
                ) =>
            {
                (NiuCounter::MstPostedWrDataWordSent, d.len())
            }
            Data::Write(d) => (NiuCounter::MstNonpostedWrDataWordSent, d.len()),
        };
        self.noc.count_pcie_words(noc, counter, len);
        let result: Result<(), NocError> = match data {
            Data::Read(b) => self.noc.read(noc, cfg.x_end, cfg.y_end, addr, b),
            Data::Write(d) if cfg.multicast => {
                let start = (cfg.x_start, cfg.y_start);
                let end = (cfg.x_end, cfg.y_end);
                self.noc.multicast_write(noc, start, end, addr, d);
                Ok(())
            }
            Data::Write(d) => self.noc.write(noc, cfg.x_end, cfg.y_end, addr, d),
        };
        // A request nobody answers is the chip's problem, not the host's: the
        // read already holds all ones.
        let _ = result;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noc::WH_BAR4_SOC_TARGET;
    use crate::tlb::{encode, Ordering, TlbConfig, WindowKind};

    fn card(arch: Arch) -> Card {
        Card::new(arch, Arc::new(HostMemory::new()))
    }

    fn read32(c: &mut Card, bar: usize, offset: u64) -> u32 {
        let mut b = [0; 4];
        c.bar_read(bar, offset, &mut b);
        u32::from_le_bytes(b)
    }

    fn write32(c: &mut Card, bar: usize, offset: u64, value: u32) {
        c.bar_write(bar, offset, &value.to_le_bytes());
    }

    /// Programs window `index` the way tt-kmd's configure_tlb does: word by
    /// word into BAR0 0x1FC00000 + index * register size.
    fn configure(c: &mut Card, index: usize, cfg: &TlbConfig) {
        let w = tlb::window(c.arch(), index).unwrap();
        for (i, word) in encode(w.kind, cfg).into_iter().enumerate() {
            write32(
                c,
                0,
                TLB_CONFIG_BASE + w.config_offset() + 4 * i as u64,
                word,
            );
        }
    }

    fn unicast(x: u8, y: u8, addr: u64) -> TlbConfig {
        TlbConfig {
            addr,
            x_end: x,
            y_end: y,
            ordering: Ordering::Strict,
            ..Default::default()
        }
    }

    /// tt-kmd test/tlbs.cpp VerifyManyWindowsWormhole in small: one 16 MiB
    /// window writes DRAM (0, 0), windows of every size read it back, and
    /// so does the NOC directly.
    #[test]
    fn wormhole_windows_of_every_size_see_the_same_memory() {
        let mut c = card(Arch::Wormhole);
        let addr = 0x1234_5678 & !3;
        configure(&mut c, 170, &unicast(0, 0, addr & !0xFF_FFFF));
        configure(&mut c, 3, &unicast(0, 0, addr & !0xF_FFFF));
        configure(&mut c, 160, &unicast(0, 0, addr & !0x1F_FFFF));
        let w170 = 0xB00_0000 + 4 * 0x100_0000;
        write32(&mut c, 0, w170 + (addr & 0xFF_FFFF), 0xCAFE_F00D);
        assert_eq!(
            read32(&mut c, 0, 3 * 0x10_0000 + (addr & 0xF_FFFF)),
            0xCAFE_F00D
        );
        let w160 = 0x9C0_0000 + 4 * 0x20_0000;
        assert_eq!(read32(&mut c, 0, w160 + (addr & 0x1F_FFFF)), 0xCAFE_F00D);
        let mut b = [0; 4];
        c.noc_read(0, 0, addr, &mut b);
        assert_eq!(u32::from_le_bytes(b), 0xCAFE_F00D);
        // And through port (0, 11) of the same bank.
        configure(&mut c, 4, &unicast(0, 11, addr & !0xF_FFFF));
        assert_eq!(
            read32(&mut c, 0, 4 * 0x10_0000 + (addr & 0xF_FFFF)),
            0xCAFE_F00D
        );
    }

    /// tt-kmd VerifyTlbAccessWormhole: ARC (0, 10)'s node id at 0xFFFB2002C
    /// through a 1 MiB window aimed at 0xFFFB00000.
    #[test]
    fn wormhole_node_id_through_a_window() {
        let mut c = card(Arch::Wormhole);
        configure(&mut c, 0, &unicast(0, 10, 0xF_FFB0_0000));
        assert_eq!(read32(&mut c, 0, 0x2_002C) & 0xFFF, 10 << 6);
        configure(&mut c, 1, &unicast(0, 11, 0x1_0000_0000));
        assert_eq!(read32(&mut c, 0, 0x10_0000 + 0x9_002C) & 0xFFF, 11 << 6);
    }

    /// tt-kmd reaches the registers through BAR4 = AXI 0x1E000000 + offset:
    /// its own window (BAR4 0) is configured through TLB_REGS_START =
    /// 0x1FC00000 - 0x1E000000, and the registers read back through BAR0.
    #[test]
    fn wormhole_bar4_is_the_system_registers() {
        let mut c = card(Arch::Wormhole);
        let cfg = unicast(3, 3, 0x0);
        let words = encode(WindowKind::Wormhole16M, &cfg);
        let reg = 0x1FC0_0000 - 0x1E00_0000 + 185 * 8;
        write32(&mut c, 4, reg, words[0]);
        write32(&mut c, 4, reg + 4, words[1]);
        assert_eq!(read32(&mut c, 0, 0x1FC0_0000 + 185 * 8), words[0]);
        assert_eq!(c.tlb_registers().config(185), cfg);
        // BAR4 offset 0 is window 185, which is BAR0 0x1E000000.
        write32(&mut c, 4, 0x10, 0x600D_600D);
        assert_eq!(read32(&mut c, 0, 0x1E00_0010), 0x600D_600D);
        let mut b = [0; 4];
        c.noc_read(3, 3, 0x10, &mut b);
        assert_eq!(u32::from_le_bytes(b), 0x600D_600D);
        // The PCIe tile's NIU at BAR4 NOC2AXI_START + 0x2C = BAR0 0x1FD0202C.
        assert_eq!(read32(&mut c, 4, 0x1FD0_202C - 0x1E00_0000) & 0xFFF, 3 << 6);
        // ... and NOC1's at + 0x8000: (9, 8) in NOC1 coordinates.
        assert_eq!(read32(&mut c, 0, 0x1FD0_A02C) & 0xFFF, 9 | (8 << 6));
        // Past BAR4's 32 MiB: nothing.
        assert_eq!(read32(&mut c, 4, 0x200_0000), u32::MAX);
    }

    /// Inbound iATU region 1 as tt-kmd's map_bar4_to_system_registers
    /// programs it (BAR2 0x1200 + 3 * 0x100), but aimed elsewhere: BAR4
    /// follows the target.
    #[test]
    fn wormhole_bar4_follows_the_inbound_iatu() {
        let mut c = card(Arch::Wormhole);
        let region1_inbound = 0x1200 + 3 * 0x100;
        write32(&mut c, 2, region1_inbound + 0x14, 0x1F00_0000);
        write32(&mut c, 2, region1_inbound + 0x18, 0);
        write32(&mut c, 2, region1_inbound, 0);
        write32(
            &mut c,
            2,
            region1_inbound + 4,
            (1 << 31) | (1 << 30) | (1 << 27) | (4 << 8),
        );
        assert_eq!(read32(&mut c, 2, region1_inbound + 0x14), 0x1F00_0000);
        write32(&mut c, 0, 0x1FC0_0000, 0x1234);
        assert_eq!(read32(&mut c, 4, 0xC0_0000), 0x1234);
        c.reset(ResetKind::SecondaryBus);
        // Reset clears the iATU; BAR4 is back on 0x1E000000.
        assert_eq!(read32(&mut c, 2, region1_inbound + 4), 0);
        write32(&mut c, 0, 0x1FC0_0000, 0x1234);
        assert_eq!(read32(&mut c, 4, 0x1FC0_0000 - WH_BAR4_SOC_TARGET), 0x1234);
    }

    /// tt-kmd wormhole_save_reset_state, through BAR4 as tt-kmd does it:
    /// DBI_ENABLE into scratch 6 and 7 of the reset unit (BAR4
    /// RESET_UNIT_START + 0x78/0x7C), then a read of DevCtl at
    /// PCIE_DBI_ADDR + 0x78 from (0, 3) through its own window.
    #[test]
    fn wormhole_dbi_as_tt_kmd_reads_it() {
        let mut c = card(Arch::Wormhole);
        let reset_unit = 0x1FF3_0000 - 0x1E00_0000;
        write32(&mut c, 4, reset_unit + 0x78, 0x0020_0000);
        write32(&mut c, 4, reset_unit + 0x7C, 0x0020_0000);
        let cfg = unicast(0, 3, 0x8_0000_0000);
        let words = encode(WindowKind::Wormhole16M, &cfg);
        let reg = 0x1FC0_0000 - 0x1E00_0000 + 185 * 8;
        write32(&mut c, 4, reg, words[0]);
        write32(&mut c, 4, reg + 4, words[1]);
        assert_eq!(read32(&mut c, 4, 0x78), 0x2810);
        write32(&mut c, 4, reset_unit + 0x78, 0);
        write32(&mut c, 4, reset_unit + 0x7C, 0);
        // With DBI closed the same address goes to the host: nothing mapped.
        assert_eq!(read32(&mut c, 4, 0x78), u32::MAX);
    }

    /// tt-kmd blackhole_restore_reset_state: DevCtl read and written at
    /// PCIE_DBI_ADDR + 0x78 from the PCIe tile (2, 0), through its window;
    /// with the config space connected the write lands in Device Control.
    #[test]
    fn blackhole_dbi_is_the_config_space() {
        let mut c = card(Arch::Blackhole);
        let config = Arc::new(Mutex::new(ConfigSpace::new(Arch::Blackhole)));
        c.connect_config_space(config.clone());
        configure(&mut c, 201, &unicast(2, 0, 0xF800_0000_0000_0000));
        let devctl = read32(&mut c, 0, 0x1920_0000 + 0x78);
        assert_eq!(
            devctl & 0xFFFF,
            u32::from(config.lock().unwrap().read_u16(0x78))
        );
        // MPS 256 (PCI_EXP_DEVCTL_PAYLOAD, bits 5-7 = 1).
        write32(&mut c, 0, 0x1920_0000 + 0x78, (devctl & !0xE0) | 0x20);
        assert_eq!(config.lock().unwrap().read_u16(0x78) & 0xE0, 0x20);
    }

    /// tt-kmd blackhole_detect_pcie_noc_x and the NOC translation check of
    /// test/tlbs.cpp.
    #[test]
    fn blackhole_noc2axi_block() {
        let mut c = card(Arch::Blackhole);
        assert_eq!(read32(&mut c, 0, 0x1FD0_4044) & 0x3F, 2);
        assert_eq!((read32(&mut c, 0, 0x1FD0_4100) >> 14) & 1, 0);
        // NOC1's NIU: (14, 11) in NOC1 coordinates.
        assert_eq!(read32(&mut c, 0, 0x1FD1_4044) & 0xFFF, 14 | (11 << 6));
        // The perf counters tt-kmd shows in sysfs (NOC_STATUS_OFFSET 0x4200)
        // read as zero.
        assert_eq!(read32(&mut c, 0, 0x1FD0_4200 + 4 * 0x39), 0);
        // Elsewhere in the block: plain storage.
        write32(&mut c, 0, 0x1FD0_0010, 77);
        assert_eq!(read32(&mut c, 0, 0x1FD0_0010), 77);
    }

    /// tt-kmd's own window on Blackhole (201, BAR0 0x19200000) reading ARC's
    /// NIU at 0x80050044 (VerifyTlbAccessBlackhole), and a 4 GiB window
    /// (BAR4 4 GiB: window 203) writing what a 2 MiB window reads.
    #[test]
    fn blackhole_windows() {
        let mut c = card(Arch::Blackhole);
        configure(&mut c, 201, &unicast(8, 0, 0x8000_0000));
        assert_eq!(read32(&mut c, 0, 0x1920_0000 + 0x5_0044) & 0xFFF, 8);
        configure(&mut c, 203, &unicast(0, 0, 1 << 32));
        // DRAM is 4 GiB: 1 << 32 is past it.
        assert_eq!(read32(&mut c, 4, (1 << 32) + 0x100), u32::MAX);
        configure(&mut c, 203, &unicast(0, 0, 0));
        write32(&mut c, 4, (1 << 32) + 0x3FE0_0100, 0xB1AC_401E);
        configure(&mut c, 10, &unicast(0, 1, 0x3FE0_0000));
        assert_eq!(read32(&mut c, 0, 10 * 0x20_0000 + 0x100), 0xB1AC_401E);
        // BAR4 is 8 GiB: two windows, nothing after.
        assert_eq!(read32(&mut c, 4, 2 << 32), u32::MAX);
        // A 2-bit noc field of 2 selects no NOC.
        let mut cfg = unicast(0, 1, 0x3FE0_0000);
        cfg.noc = 2;
        configure(&mut c, 10, &cfg);
        assert_eq!(read32(&mut c, 0, 10 * 0x20_0000 + 0x100), u32::MAX);
    }

    #[test]
    fn multicast_window_writes_a_rectangle() {
        let mut c = card(Arch::Blackhole);
        let cfg = TlbConfig {
            addr: 0,
            x_start: 6,
            y_start: 2,
            x_end: 10,
            y_end: 3,
            multicast: true,
            ..Default::default()
        };
        configure(&mut c, 20, &cfg);
        write32(&mut c, 0, 20 * 0x20_0000 + 0x80, 0x4D43_4153);
        // x 6, 7, 10 are Tensix; 8 (ARC column) and 9 (DRAM) are not.
        for (x, y, want) in [
            (6, 2, 0x4D43_4153),
            (7, 3, 0x4D43_4153),
            (10, 2, 0x4D43_4153),
            (9, 2, 0),
            (5, 2, 0),
            (6, 4, 0),
        ] {
            let mut b = [0; 4];
            c.noc_read(x, y, 0x80, &mut b);
            assert_eq!(u32::from_le_bytes(b), want, "({x}, {y})");
        }
        // A read through the multicast window comes from (x_end, y_end).
        assert_eq!(read32(&mut c, 0, 20 * 0x20_0000 + 0x80), 0x4D43_4153);
    }

    #[test]
    fn odd_sizes_and_window_boundaries() {
        let mut c = card(Arch::Wormhole);
        configure(&mut c, 0, &unicast(1, 1, 0));
        configure(&mut c, 1, &unicast(2, 1, 0));
        // 8 bytes across the boundary of windows 0 and 1.
        c.bar_write(0, 0xF_FFFC, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut b = [0; 4];
        c.noc_read(1, 1, 0xF_FFFC, &mut b);
        assert_eq!(b, [1, 2, 3, 4]);
        c.noc_read(2, 1, 0, &mut b);
        assert_eq!(b, [5, 6, 7, 8]);
        let mut b = [0; 3];
        c.bar_read(0, 0xF_FFFE, &mut b);
        assert_eq!(b, [3, 4, 5]);
        c.bar_write(0, 0x11, &[0xEE]);
        let mut b = [0; 2];
        c.noc_read(1, 1, 0x10, &mut b);
        assert_eq!(b, [0, 0xEE]);
        // 64-bit write of a whole TLB register.
        let words = encode(WindowKind::Wormhole1M, &unicast(3, 2, 0x20_0000));
        let value = u64::from(words[0]) | u64::from(words[1]) << 32;
        c.bar_write(0, TLB_CONFIG_BASE + 8 * 9, &value.to_le_bytes());
        assert_eq!(c.tlb_registers().config(9), unicast(3, 2, 0x20_0000));
        // A page-sized read.
        let mut page = vec![0xAA; 4096];
        c.bar_read(0, 0, &mut page);
        assert_eq!(page[0x11], 0xEE);
        assert_eq!(page[0x12], 0);
    }

    #[test]
    fn bar_edges() {
        let mut c = card(Arch::Wormhole);
        assert_eq!(read32(&mut c, 2, 1 << 20), u32::MAX);
        assert_eq!(read32(&mut c, 1, 0), u32::MAX);
        assert_eq!(read32(&mut c, 0, 512 << 20), u32::MAX);
        let mut b = [0; 4];
        c.bar_read(2, (1 << 20) - 2, &mut b);
        assert_eq!(b, [0, 0, 0xFF, 0xFF]);
        write32(&mut c, 1, 0, 5);
        // A window aimed at no tile.
        configure(&mut c, 2, &unicast(10, 0, 0));
        assert_eq!(read32(&mut c, 0, 2 << 20), u32::MAX);
        // Plain register space.
        write32(&mut c, 0, 0x1F00_0100, 0x5151);
        assert_eq!(read32(&mut c, 0, 0x1F00_0100), 0x5151);
        assert_eq!(read32(&mut c, 4, 0x100_0100), 0x5151);
    }

    /// The PCIe tile's NIU counters (BAR0 0x1FD04200 + 4 * id on
    /// Blackhole, NOC1's 0x10000 further) count a host read through a
    /// window as data words the tile's NIU received as master, 32 bytes a
    /// word.
    #[test]
    fn pcie_niu_counters_count_window_traffic() {
        let mut c = card(Arch::Blackhole);
        let counter =
            |c: &mut Card, noc: u64, id: u64| read32(c, 0, 0x1FD0_4200 + noc * 0x1_0000 + 4 * id);
        let (rd0, rd1) = (counter(&mut c, 0, 0x3), counter(&mut c, 1, 0x3));
        let mut b = [0u8; 64];
        // Window 0 out of reset: NOC0.
        c.bar_read(0, 0, &mut b);
        assert_eq!(counter(&mut c, 0, 0x3), rd0 + 2);
        assert_eq!(counter(&mut c, 1, 0x3), rd1);
        c.bar_read(0, 0, &mut b[..4]);
        assert_eq!(counter(&mut c, 0, 0x3), rd0 + 3);
    }

    #[test]
    fn resets() {
        let mut c = card(Arch::Wormhole);
        configure(&mut c, 0, &unicast(1, 1, 0));
        write32(&mut c, 0, 0x40, 0x1111);
        write32(&mut c, 0, 0x1F00_0100, 0x2222);
        c.noc_write(0, 0, 0x40, &[0x33]);
        for kind in [ResetKind::SecondaryBus, ResetKind::FunctionLevel] {
            c.reset(kind);
            // TLB registers and register space back to zero ...
            assert_eq!(read32(&mut c, 0, TLB_CONFIG_BASE), 0);
            assert_eq!(c.tlb_registers().config(0), TlbConfig::default());
            assert_eq!(read32(&mut c, 0, 0x1F00_0100), 0);
            // ... tile memory kept.
            let mut b = [0; 4];
            c.noc_read(1, 1, 0x40, &mut b);
            assert_eq!(u32::from_le_bytes(b), 0x1111);
            c.noc_read(0, 0, 0x40, &mut b);
            assert_eq!(b[0], 0x33);
        }
        c.reset(ResetKind::Cold);
        let mut b = [0; 4];
        c.noc_read(1, 1, 0x40, &mut b);
        assert_eq!(b, [0; 4]);
        c.noc_read(0, 0, 0x40, &mut b);
        assert_eq!(b, [0; 4]);
    }

    #[test]
    fn vanished_card() {
        let mut c = card(Arch::Blackhole);
        configure(&mut c, 0, &unicast(1, 2, 0));
        write32(&mut c, 0, 0, 1);
        c.set_vanished(true);
        assert_eq!(read32(&mut c, 0, 0), u32::MAX);
        assert_eq!(read32(&mut c, 0, 0x1FD0_4044), u32::MAX);
        write32(&mut c, 0, 0, 2);
        write32(&mut c, 0, TLB_CONFIG_BASE, 0);
        c.set_vanished(false);
        assert_eq!(read32(&mut c, 0, 0), 1);
    }

    #[test]
    fn arc_not_responding() {
        let mut c = card(Arch::Wormhole);
        // Wormhole's CSM through BAR0 (tt-umd ARC_CSM_BAR0_XBAR_OFFSET_START).
        write32(&mut c, 0, 0x1FE8_0000 + 0x4_0000, 0xA5A5);
        assert_eq!(read32(&mut c, 0, 0x1FE8_0000 + 0x4_0000), 0xA5A5);
        c.set_arc_responding(false);
        assert!(!c.noc().arc().responding());
        // ARC's NIU is hardware: it still answers (tt-umd's read-checking
        // register, BAR0 0x1FF5002C).
        assert_eq!(read32(&mut c, 0, 0x1FF5_002C) & 0xFFF, 10 << 6);
        c.set_arc_responding(true);
        assert!(c.noc().arc().responding());
    }

    fn card_with_host(arch: Arch) -> (Card, Arc<HostMemory>) {
        use std::os::fd::FromRawFd;
        // SAFETY: memfd_create with a valid C string; the fd is new and ours.
        let fd = unsafe { libc::memfd_create(c"card-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: fd is a fresh descriptor nothing else owns.
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.set_len(0x10_0000).unwrap();
        let host = Arc::new(HostMemory::new());
        host.map(0x4000_0000, 0x10_0000, 0, file, true, true)
            .unwrap();
        (Card::new(arch, host.clone()), host)
    }

    /// tt-umd WormholeDmaTransfer::d2h_transfer's register writes, in its
    /// order, reading a 2 MiB window (index 157, BAR0 0x9E00000) into host
    /// memory; completion 0xfaca lands at the done-IMWR address.
    #[test]
    fn wormhole_dma_chip_to_host() {
        let (mut c, host) = card_with_host(Arch::Wormhole);
        configure(&mut c, 157, &unicast(2, 2, 0));
        c.noc_write(
            2,
            2,
            0x100,
            &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88],
        );
        host.write(0x4000_8000, &[0xEE; 4]).unwrap();
        let (buf, completion) = (0x4000_0000u64, 0x4000_8000u64);
        for (reg, value) in [
            (0x0C, 1),
            (0x54, 0),
            (0x200, 0x10),
            (0x60, completion as u32),
            (0x64, 0),
            (0x70, 0xfaca),
            (0x68, 0),
            (0x6c, 0),
            (0x208, 8),
            (0x20c, 0x9E0_0100),
            (0x210, 0),
            (0x214, buf as u32),
            (0x218, 0),
        ] {
            write32(&mut c, 2, reg, value);
        }
        let mut b = [0; 4];
        host.read(completion, &mut b).unwrap();
        assert_eq!(b, [0xEE; 4], "nothing happens before the doorbell");
        write32(&mut c, 2, 0x10, 0);
        host.read(completion, &mut b).unwrap();
        assert_eq!(u32::from_le_bytes(b), 0xfaca);
        let mut data = [0; 8];
        host.read(buf, &mut data).unwrap();
        assert_eq!(data, [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
    }

    /// tt-umd WormholeDmaTransfer::h2d_transfer: host memory into the
    /// chip through window 157.
    #[test]
    fn wormhole_dma_host_to_chip() {
        let (mut c, host) = card_with_host(Arch::Wormhole);
        configure(&mut c, 157, &unicast(2, 2, 0));
        host.write(0x4000_0000, b"from the host").unwrap();
        for (reg, value) in [
            (0x2c, 1),
            (0xa8, 0),
            (0x300, 0x10),
            (0xcc, 0x4000_8000),
            (0xd0, 0),
            (0xdc, 0xfaca),
            (0x308, 13),
            (0x30c, 0x4000_0000),
            (0x310, 0),
            (0x314, 0x9E0_0040),
            (0x318, 0),
            (0x30, 0),
        ] {
            write32(&mut c, 2, reg, value);
        }
        let mut b = [0; 13];
        c.noc_read(2, 2, 0x40, &mut b);
        assert_eq!(&b, b"from the host");
        let mut done = [0; 4];
        host.read(0x4000_8000, &mut done).unwrap();
        assert_eq!(u32::from_le_bytes(done), 0xfaca);
    }

    /// tt-umd BlackholeDmaTransfer::h2d_transfer: XFERSIZE reads 0 when
    /// done; with INT_SETUP bit 5, MSI_MSGD lands at MSI_STOP.
    #[test]
    fn blackhole_dma_host_to_chip() {
        let (mut c, host) = card_with_host(Arch::Blackhole);
        configure(&mut c, 5, &unicast(3, 3, 0));
        host.write(0x4000_0010, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        host.write(0x4000_8000, &[0xEE; 4]).unwrap();
        for (reg, value) in [
            (0x188, 0x28),
            (0x190, 0x4000_8000),
            (0x194, 0),
            (0x1A0, 0x4000_8004),
            (0x1A4, 0),
            (0x1A8, 0),
            (0x100, 1),
            (0x120, 0x4000_0010),
            (0x124, 0),
            (0x128, 5 * 0x20_0000 + 0x80),
            (0x12C, 0),
            (0x11C, 8),
        ] {
            write32(&mut c, 2, reg, value);
        }
        assert_eq!(read32(&mut c, 2, 0x11C), 8);
        write32(&mut c, 2, 0x104, 1);
        assert_eq!(read32(&mut c, 2, 0x11C), 0);
        let mut b = [0; 8];
        c.noc_read(3, 3, 0x80, &mut b);
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        let mut done = [0xAA; 4];
        host.read(0x4000_8000, &mut done).unwrap();
        assert_eq!(done, [0; 4]);
    }

    /// tt-kmd wormhole_reset: TRIGGER_RESET (0x56) through the scratch
    /// mailbox of BAR4's reset unit (SCRATCH[3] args, SCRATCH[5] 0xAA00 |
    /// code, ARC_MISC_CNTL bit 16). The chip restarts shortly after: TLB
    /// registers and tile memory are gone, the config space is reset.
    #[test]
    fn wormhole_firmware_reset() {
        let mut c = card(Arch::Wormhole);
        let config = Arc::new(Mutex::new(ConfigSpace::new(Arch::Wormhole)));
        c.connect_config_space(config.clone());
        let _ = config.lock().unwrap().write(0x04, &[0x06, 0]);
        assert_eq!(config.lock().unwrap().read_u16(0x04), 0x06);
        configure(&mut c, 0, &unicast(1, 1, 0));
        write32(&mut c, 0, 0x40, 0x1111);
        let reset_unit = 0x1FF3_0000 - 0x1E00_0000;
        write32(&mut c, 4, reset_unit + 0x60 + 3 * 4, 3);
        write32(&mut c, 4, reset_unit + 0x60 + 5 * 4, 0xAA56);
        write32(&mut c, 4, reset_unit + 0x100, 1 << 16);
        assert!(c.noc().arc().pending_reset().is_some());
        std::thread::sleep(crate::arc::RESET_DELAY + std::time::Duration::from_millis(5));
        assert_eq!(read32(&mut c, 0, TLB_CONFIG_BASE), 0);
        assert!(c.noc().arc().pending_reset().is_none());
        let mut b = [0; 4];
        c.noc_read(1, 1, 0x40, &mut b);
        assert_eq!(b, [0; 4]);
        assert_eq!(config.lock().unwrap().read_u16(0x04), 0);
    }
}

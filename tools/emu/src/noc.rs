// SPDX-License-Identifier: GPL-2.0
//! The NOC and the tiles behind it.
//!
//! Both chips are a grid of tiles joined by two NOCs (networks on chip).
//! NOC0 and NOC1 reach the same tiles but number them from opposite corners:
//! NOC1's (x, y) is NOC0's (width - 1 - x, height - 1 - y) (tt-umd
//! `NOC0_X_TO_NOC1_X` / `NOC0_Y_TO_NOC1_Y`). Everything here is kept in NOC0
//! coordinates and requests carried by NOC1 are translated on arrival.
//!
//! Each tile answers a NOC address range of its own: a Tensix its L1 SRAM
//! and its registers, a DRAM tile its bank of GDDR, the PCIe tile the host's
//! memory (through the iATU) and the controller's DBI, the ARC tile its
//! firmware's memory and registers ([`crate::arc::ArcFirmware`] answers
//! those). Every tile also has one NOC interface unit (NIU) per NOC whose
//! registers say where the tile is (`NOC_NODE_ID`) and whether coordinate
//! translation is on (`NIU_CFG_0` bit 14).
//!
//! Memory is sparse: a 4 KiB page exists only once something was written to
//! it; a read of a page never written returns zeros.
//!
//! # What a read of nothing returns
//! A request to a coordinate outside the grid, or to an address no block of
//! the tile decodes, gets no answer on the chip: the NOC can hang (tt-kmd
//! issue #87 "This can lead to NOC hangs if userspace supplies invalid
//! coordinates"), and the host's read completes with all ones after a
//! timeout (tt-umd issue #1673: a Tensix address with nothing behind it
//! "will timeout (will return 0xFFFFFF after ~700ms)"; tt-kmd and tt-umd
//! treat 0xFFFFFFFF as the sign of a hung chip and then check a register
//! known to be readable). Here such a read returns all ones at once, a
//! write is dropped, and the NOC stays usable: the delay and the lasting
//! hang are not modelled, so a client's hang check finds the chip alive.
//!
//! # Coordinates as configured here
//! NOC coordinate translation is off (`NIU_CFG_0` bit 14 clear, which tt-umd
//! and tt-kmd's test read to decide) and no Tensix or DRAM is harvested
//! (a p150's two harvested Ethernet channels keep their tiles), so clients
//! address tiles by their physical NOC0/NOC1 coordinates. (tt-kmd PR #72
//! review: "if there's no translation, then there's no harvesting".)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::arc::ArcFirmware;
use crate::config_space::{ConfigSpace, CONFIG_SPACE_SIZE};
use crate::erisc::EriscFirmware;
use crate::host_memory::HostMemory;

use crate::Arch;

/// Granularity of the sparse backing.
pub const PAGE_SIZE: u64 = 4096;

/// Memory that exists only where it was written. Reads of pages never
/// written return zeros.
#[derive(Default)]
pub struct SparseMemory {
    size: u64,
    pages: HashMap<u64, Box<[u8]>>,
}

impl SparseMemory {
    pub fn new(size: u64) -> SparseMemory {
        SparseMemory {
            size,
            pages: HashMap::new(),
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// How many pages hold data.
    pub fn resident_pages(&self) -> usize {
        self.pages.len()
    }

    /// Forgets everything written.
    pub fn clear(&mut self) {
        self.pages.clear();
    }

    /// Reads at `offset`; bytes at or past the end read as zero.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset.saturating_add(done as u64);
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(buf.len() - done);
            let chunk = &mut buf[done..done + n];
            match self.pages.get(&(at / PAGE_SIZE)) {
                Some(page) if at < self.size => chunk.copy_from_slice(&page[in_page..in_page + n]),
                _ => chunk.fill(0),
            }
            done += n;
        }
    }

    /// Writes at `offset`; bytes at or past the end are dropped.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let at = offset.saturating_add(done as u64);
            if at >= self.size {
                return;
            }
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - in_page)
                .min(data.len() - done)
                .min((self.size - at) as usize);
            let page = self
                .pages
                .entry(at / PAGE_SIZE)
                .or_insert_with(|| vec![0u8; PAGE_SIZE as usize].into_boxed_slice());
            page[in_page..in_page + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    pub fn read32(&self, offset: u64) -> u32 {
        let mut b = [0; 4];
        self.read(offset, &mut b);
        u32::from_le_bytes(b)
    }

    pub fn write32(&mut self, offset: u64, value: u32) {
        self.write(offset, &value.to_le_bytes());
    }
}

/// One of the two NOCs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NocId {
    Noc0,
    Noc1,
}

impl NocId {
    /// The NOC a TLB register's `noc` field selects. Blackhole's field is
    /// two bits wide; the sources name only 0 and 1.
    pub fn from_field(value: u8) -> Option<NocId> {
        match value {
            0 => Some(NocId::Noc0),
            1 => Some(NocId::Noc1),
            _ => None,
        }
    }
}

/// What a tile is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileKind {
    Tensix,
    /// One of the three NOC ports of a DRAM bank. The three tiles of a bank
    /// reach the same memory.
    Dram {
        bank: u8,
        port: u8,
    },
    Ethernet {
        channel: u8,
    },
    Arc,
    Pcie,
    /// A NOC router with nothing else behind it.
    Router,
    /// Blackhole only.
    Security,
    /// Blackhole only: the L2CPU (its memory is not modelled).
    L2Cpu,
}

/// The grid's width and height (tt-umd `GRID_SIZE`: 10 x 12, 17 x 12).
pub fn grid_size(arch: Arch) -> (u8, u8) {
    match arch {
        Arch::Wormhole => (10, 12),
        Arch::Blackhole => (17, 12),
    }
}

/// Tensix L1 size: tt-umd `TENSIX_L1_SIZE` (1464 KiB Wormhole, 1536 KiB Blackhole).
pub fn tensix_l1_size(arch: Arch) -> u64 {
    match arch {
        Arch::Wormhole => 1464 * 1024,
        Arch::Blackhole => 1536 * 1024,
    }
}

/// Ethernet core L1 size. Wormhole: tt-umd `ETH_L1_SIZE`, 256 KiB.
/// Blackhole: 512 KiB, since its base firmware keeps `eth_status_t` at
/// 0x7CC00 and the chip info at 0x7CFC0 (tt-umd `blackhole_eth.hpp`,
/// `topology_discovery_blackhole.cpp`); tt-umd's `ETH_L1_SIZE` of 256 KiB
/// there is the part it gives to programs.
pub fn eth_l1_size(arch: Arch) -> u64 {
    match arch {
        Arch::Wormhole => 256 * 1024,
        Arch::Blackhole => 512 * 1024,
    }
}

/// Memory behind one DRAM bank: tt-umd `DRAM_BANK_SIZE`, 2 GiB x 6 banks on
/// Wormhole (n150: 12 GB), 4 GiB x 8 banks on Blackhole (p150: 32 GB).
pub fn dram_bank_size(arch: Arch) -> u64 {
    match arch {
        Arch::Wormhole => 2 << 30,
        Arch::Blackhole => 4 << 30,
    }
}

pub fn dram_bank_count(arch: Arch) -> usize {
    match arch {
        Arch::Wormhole => WH_DRAM_PORTS.len(),
        Arch::Blackhole => BH_DRAM_PORTS.len(),
    }
}

/// Wormhole DRAM banks and their ports, NOC0 coordinates: the banks are
/// tt-umd `DRAM_CORES_NOC0`; which tile is port 0, 1, 2 (and so which NIU
/// register block is its own) is tt-umd tests/api/test_noc.cpp
/// `womrhole_dram_coord_to_noc_port_noc0`.
const WH_DRAM_PORTS: [[(u8, u8); 3]; 6] = [
    [(0, 1), (0, 11), (0, 0)],
    [(0, 7), (0, 5), (0, 6)],
    [(5, 1), (5, 11), (5, 0)],
    [(5, 10), (5, 2), (5, 9)],
    [(5, 4), (5, 8), (5, 3)],
    [(5, 7), (5, 5), (5, 6)],
];

/// Blackhole DRAM banks, tt-umd `DRAM_CORES_NOC0` (one NIU base for all
/// ports on Blackhole, so the order inside a bank does not matter here).
const BH_DRAM_PORTS: [[(u8, u8); 3]; 8] = [
    [(0, 0), (0, 1), (0, 11)],
    [(0, 2), (0, 10), (0, 3)],
    [(0, 9), (0, 4), (0, 8)],
    [(0, 5), (0, 7), (0, 6)],
    [(9, 0), (9, 1), (9, 11)],
    [(9, 2), (9, 10), (9, 3)],
    [(9, 9), (9, 4), (9, 8)],
    [(9, 5), (9, 7), (9, 6)],
];

/// Ethernet channels in tt-umd `ETH_CORES_NOC0` order.
const WH_ETH: [(u8, u8); 16] = [
    (9, 0),
    (1, 0),
    (8, 0),
    (2, 0),
    (7, 0),
    (3, 0),
    (6, 0),
    (4, 0),
    (9, 6),
    (1, 6),
    (8, 6),
    (2, 6),
    (7, 6),
    (3, 6),
    (6, 6),
    (4, 6),
];
const BH_ETH: [(u8, u8); 14] = [
    (1, 1),
    (16, 1),
    (2, 1),
    (15, 1),
    (3, 1),
    (14, 1),
    (4, 1),
    (13, 1),
    (5, 1),
    (12, 1),
    (6, 1),
    (11, 1),
    (7, 1),
    (10, 1),
];

/// The ARC tile (tt-umd `ARC_CORES_NOC0`; tt-kmd blackhole.c `ARC_X`/`ARC_Y`).
pub fn arc_tile(arch: Arch) -> (u8, u8) {
    match arch {
        Arch::Wormhole => (0, 10),
        Arch::Blackhole => (8, 0),
    }
}

/// The PCIe tile the host is attached to. Wormhole: (0, 3) (tt-umd
/// `PCIE_CORES_NOC0`, tt-kmd `PCIE_NOC_X`/`PCIE_NOC_Y`). Blackhole has two
/// PCIe tiles, (2, 0) and (11, 0); tt-kmd reads which one is in use from the
/// NIU's node id and accepts either; a p150 uses (2, 0) (tt-umd
/// `PCI_LOCATIONS`, tt-kmd test/tlbs.cpp "PCI = { 2, 0 }" untranslated).
pub fn pcie_tile(arch: Arch) -> (u8, u8) {
    match arch {
        Arch::Wormhole => (0, 3),
        Arch::Blackhole => (2, 0),
    }
}

/// What is at NOC0 (x, y), or `None` outside the grid.
///
/// Wormhole (tt-umd wormhole_implementation.hpp): Tensix at x 1-4, 6-9 and
/// y 1-5, 7-11; Ethernet on rows 0 and 6 of those columns; columns 0 and 5
/// hold DRAM, ARC (0, 10), PCIe (0, 3) and routers (0, 2), (0, 4), (0, 8),
/// (0, 9).
///
/// Blackhole (tt-umd blackhole_implementation.hpp): Tensix at x 1-7, 10-16
/// and y 2-11; Ethernet on row 1 of those columns; DRAM in columns 0 and 9;
/// row 0 holds PCIe (2, 0), (11, 0) and routers; column 8 holds ARC (8, 0),
/// security (8, 2), L2CPU (8, 3/5/7/9) and routers.
pub fn tile_kind(arch: Arch, x: u8, y: u8) -> Option<TileKind> {
    let (w, h) = grid_size(arch);
    if x >= w || y >= h {
        return None;
    }
    type Banks = &'static [[(u8, u8); 3]];
    let (drams, eths): (Banks, &[(u8, u8)]) = match arch {
        Arch::Wormhole => (&WH_DRAM_PORTS, &WH_ETH),
        Arch::Blackhole => (&BH_DRAM_PORTS, &BH_ETH),
    };
    for (bank, ports) in drams.iter().enumerate() {
        if let Some(port) = ports.iter().position(|&t| t == (x, y)) {
            return Some(TileKind::Dram {
                bank: bank as u8,
                port: port as u8,
            });
        }
    }
    if let Some(channel) = eths.iter().position(|&t| t == (x, y)) {
        return Some(TileKind::Ethernet {
            channel: channel as u8,
        });
    }
    if (x, y) == arc_tile(arch) {
        return Some(TileKind::Arc);
    }
    Some(match arch {
        Arch::Wormhole => match (x, y) {
            (0, 3) => TileKind::Pcie,
            (0, _) => TileKind::Router,
            _ => TileKind::Tensix,
        },
        Arch::Blackhole => match (x, y) {
            (2, 0) | (11, 0) => TileKind::Pcie,
            (_, 0) => TileKind::Router,
            (8, 2) => TileKind::Security,
            (8, 3) | (8, 5) | (8, 7) | (8, 9) => TileKind::L2Cpu,
            (8, _) => TileKind::Router,
            _ => TileKind::Tensix,
        },
    })
}

/// NOC `noc`'s (x, y) in NOC0 coordinates, or `None` outside the grid.
pub fn to_noc0(arch: Arch, noc: NocId, x: u8, y: u8) -> Option<(u8, u8)> {
    let (w, h) = grid_size(arch);
    if x >= w || y >= h {
        return None;
    }
    Some(match noc {
        NocId::Noc0 => (x, y),
        NocId::Noc1 => (w - 1 - x, h - 1 - y),
    })
}

/// NOC0 (x, y) in `noc`'s coordinates (the mirror is its own inverse).
pub fn from_noc0(arch: Arch, noc: NocId, x: u8, y: u8) -> (u8, u8) {
    to_noc0(arch, noc, x, y).unwrap_or((x, y))
}

/// The value of `NOC_NODE_ID` for a tile at (x, y) of some NOC: x in bits
/// 0-5, y in 6-11 (tt-kmd test/tlbs.cpp `VerifyNodeId`), the grid's width
/// in 12-18 and height in 19-25 (tt-metal firmware `risc_init` reads
/// `noc_size_x`/`noc_size_y` from there).
pub fn node_id(arch: Arch, x: u8, y: u8) -> u32 {
    let (w, h) = grid_size(arch);
    u32::from(x) | u32::from(y) << 6 | u32::from(w) << 12 | u32::from(h) << 19
}

/// NIU register offsets (from the start of a NIU block).
/// `NOC_NODE_ID`: tt-umd `NOC_NODE_ID_OFFSET` (0x2C Wormhole, 0x44 Blackhole).
pub fn niu_node_id_offset(arch: Arch) -> u32 {
    match arch {
        Arch::Wormhole => 0x2C,
        Arch::Blackhole => 0x44,
    }
}

/// `NOC_ID_LOGICAL`, the translated coordinates: tt-umd
/// `NOC_ID_TRANSLATED_OFFSET` (0x138, 0x148). With translation off it reads
/// the same as the node id.
pub fn niu_logical_id_offset(arch: Arch) -> u32 {
    match arch {
        Arch::Wormhole => 0x138,
        Arch::Blackhole => 0x148,
    }
}

/// A NIU's traffic counters, status registers at `NIU_STATUS + 4 * id`
/// (tt-kmd blackhole.c reads the PCIe tile's at `NOC_STATUS_OFFSET` 0x4200
/// of its NOC2AXI block, whose NIU starts at 0x4000, and names the six it
/// shows as `pcie_perf_counters`). Each counts 32-byte data words ("in
/// units of 32 byte flits", tt-kmd docs/sysfs-attributes.md); `MST_`
/// counters count requests the NIU's tile made as NOC master, `SLV_` ones
/// requests it served as slave. The emulator keeps the PCIe tile's: a host
/// access through a window is a request the PCIe tile masters onto the
/// NOC, a tile's access to host memory one it serves.
pub const NIU_STATUS: u32 = 0x200;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NiuCounter {
    MstRdDataWordReceived = 0x3,
    MstNonpostedWrDataWordSent = 0x8,
    MstPostedWrDataWordSent = 0x9,
    SlvRdDataWordSent = 0x33,
    SlvNonpostedWrDataWordReceived = 0x38,
}

/// Data words (32 bytes each, a partial one counted whole) of `len` bytes.
fn data_words(len: usize) -> u32 {
    u32::try_from(len.div_ceil(32)).unwrap_or(u32::MAX)
}

/// `NIU_CFG_0`; bit 14 is "coordinate translation enabled" (tt-umd
/// `get_noc_translation_enabled` on both chips; tt-kmd test/tlbs.cpp
/// `is_blackhole_noc_translation_enabled` at BAR0 0x1FD04100).
pub const NIU_CFG_0: u32 = 0x100;

/// Who makes a request: one of the NOCs, or the chip's own AXI side (the
/// host's BAR register space reaching a tile's registers without the NOC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Noc(NocId),
    Local,
}

/// Why a request got no data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NocError {
    /// The coordinates name no tile.
    NoTile,
    /// The tile decodes nothing at this address.
    Unmapped,
    /// The target exists but did not answer: an ARC address the firmware
    /// model decodes nothing at, host memory not mapped, Blackhole's unused
    /// PCIe tile.
    NoResponse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// The tile's L1 (Tensix, Ethernet), at the NOC address.
    L1,
    /// A DRAM bank, at the NOC address.
    Dram(usize),
    /// Registers kept as plain storage, at the offset from the region's
    /// start. `owner` keys the storage: the tile itself, or for a Wormhole
    /// DRAM port its bank's port 0, the bank's registers being one block.
    Regs { owner: (u8, u8) },
    /// A NIU's registers. `owner` is the tile whose NIU it is (a DRAM bank's
    /// register space holds all three ports' NIUs).
    Niu { owner: (u8, u8), block: NocId },
    /// The ARC firmware's address space, at the NOC address.
    Arc,
    /// The PCIe controller's outbound path, at the offset from the region's
    /// start (the controller's AXI address).
    Outbound,
    /// The PCIe controller's DBI, at the offset from the region's start.
    Dbi,
}

#[derive(Clone, Copy, Debug)]
struct Region {
    start: u64,
    end: u64,
    target: Target,
}

/// Address map of one tile, NOC addresses, first match wins.
fn tile_regions(arch: Arch, x: u8, y: u8, kind: TileKind) -> Vec<Region> {
    let r = |start: u64, len: u64, target| Region {
        start,
        end: start + len,
        target,
    };
    let niu_pair = |base: u64, stride: u64, owner| {
        [
            r(
                base,
                stride,
                Target::Niu {
                    owner,
                    block: NocId::Noc0,
                },
            ),
            r(
                base + stride,
                stride,
                Target::Niu {
                    owner,
                    block: NocId::Noc1,
                },
            ),
        ]
    };
    let me = (x, y);
    let mut v = Vec::new();
    match (arch, kind) {
        // Tensix and Ethernet: L1 from 0; the local register space at
        // 0xFF000000 (tt-umd TENSIX_SOFT_RESET_ADDR 0xFFB121B0 and the RISC
        // debug registers at 0xFFB12000 are in it) with the NIUs at
        // 0xFFB20000 (NOC0) and 0xFFB30000 (NOC1) (tt-umd
        // NOC0_/NOC1_CONTROL_REG_ADDR_BASE_MAP).
        (_, TileKind::Tensix) | (_, TileKind::Ethernet { .. }) => {
            v.extend(niu_pair(0xFFB2_0000, 0x1_0000, me));
            let l1 = if kind == TileKind::Tensix {
                tensix_l1_size(arch)
            } else {
                eth_l1_size(arch)
            };
            v.push(r(0, l1, Target::L1));
            v.push(r(0xFF00_0000, 0x100_0000, Target::Regs { owner: me }));
        }
        // Wormhole DRAM: the bank's memory from 0; above 4 GiB the bank's
        // registers, with the NIU of port p at 0x1_0008_0000 + p * 0x10000
        // (NOC0) and + 0x8000 more (NOC1) (tt-umd
        // DRAM_NOC0_/NOC1_CONTROL_REG_ADDR_BASE_MAP; tt-kmd test/tlbs.cpp
        // reads DDR (0, 11)'s node id at 0x10009002C). All three ports'
        // NIUs are visible from each port of the bank.
        (Arch::Wormhole, TileKind::Dram { bank, .. }) => {
            for (port, &owner) in WH_DRAM_PORTS[bank as usize].iter().enumerate() {
                v.extend(niu_pair(
                    0x1_0008_0000 + port as u64 * 0x1_0000,
                    0x8000,
                    owner,
                ));
            }
            v.push(r(0, dram_bank_size(arch), Target::Dram(bank as usize)));
            let owner = WH_DRAM_PORTS[bank as usize][0];
            v.push(r(0x1_0000_0000, 0x100_0000, Target::Regs { owner }));
        }
        // Blackhole DRAM: the bank's 4 GiB from 0, except where the NIUs
        // sit at 0xFFB20000/0xFFB30000 (tt-umd: DRAM uses the Tensix bases).
        (Arch::Blackhole, TileKind::Dram { bank, .. }) => {
            v.extend(niu_pair(0xFFB2_0000, 0x1_0000, me));
            v.push(r(0, dram_bank_size(arch), Target::Dram(bank as usize)));
        }
        // Wormhole ARC: its NIUs at 0xFFFB20000 (tt-umd's ARC entry; tt-kmd
        // test/tlbs.cpp ARC_NOC_NODE_ID 0xFFFB2002C) and as APB peripherals
        // at ARC APB 0x50000 / 0x58000 (tt-umd NIU_CFG_NOC0_/NOC1_BAR_ARC_ADDR),
        // APB being at NOC 0x880000000 (ARC_NOC_ADDRESS_START +
        // ARC_APB_NOC_XBAR_OFFSET_START). The rest is the firmware's.
        (Arch::Wormhole, TileKind::Arc) => {
            v.extend(niu_pair(0xF_FFB2_0000, 0x1_0000, me));
            v.extend(niu_pair(0x8_8005_0000, 0x8000, me));
            v.push(r(0, 1 << 36, Target::Arc));
        }
        // Blackhole ARC: NIUs at 0xFFFFFFFFFF000000 (tt-umd) and as APB
        // peripherals at 0x80050000 / 0x80058000 (tt-umd NIU_CFG_NOC0_ARC_ADDR
        // 0x80050100; tt-kmd test/tlbs.cpp reads node id at 0x80050044).
        (Arch::Blackhole, TileKind::Arc) => {
            v.extend(niu_pair(0xFFFF_FFFF_FF00_0000, 0x1_0000, me));
            v.extend(niu_pair(0x8005_0000, 0x8000, me));
            v.push(r(0, 0xFFFF_FFFF_FF00_0000, Target::Arc));
        }
        // Wormhole PCIe: NIUs at 0xFFFB20000 (tt-umd); from 0x800000000 the
        // outbound window to the host (tt-kmd `noc_pcie_offset`, tt-umd
        // `get_pcie_base_for_arch`), which reaches the DBI instead while
        // ARC's reset-unit scratch registers 6/7 hold DBI_ENABLE (tt-kmd
        // open_dbi: "all outbound traffic are routed to DBI").
        (Arch::Wormhole, TileKind::Pcie) => {
            v.extend(niu_pair(0xF_FFB2_0000, 0x1_0000, me));
            v.push(r(0x8_0000_0000, 0x8_0000_0000, Target::Outbound));
        }
        // Blackhole PCIe: NIUs at 0xFFFFFFFFFF000000 (tt-umd; tt-kmd
        // test/tlbs.cpp PCI_NOC_NODE_ID_LOGICAL 0xFFFFFFFFFF000148); the
        // host from 4 << 58 (tt-kmd `noc_pcie_offset`, 58 address bits); the
        // DBI at 0xF800000000000000 (tt-kmd `PCIE_DBI_ADDR`, "outbound
        // NOC_TLB_62 configured by CMFW").
        (Arch::Blackhole, TileKind::Pcie) => {
            v.extend(niu_pair(0xFFFF_FFFF_FF00_0000, 0x1_0000, me));
            v.push(r(4 << 58, 1 << 58, Target::Outbound));
            v.push(r(0xF800_0000_0000_0000, DBI_SIZE, Target::Dbi));
        }
        (Arch::Wormhole, _) => v.extend(niu_pair(0xFFB2_0000, 0x1_0000, me)),
        // Blackhole routers: tt-umd ROUTER_ONLY base 0xFF000000; security
        // and L2CPU tiles: 0xFFFFFFFFFF000000.
        (Arch::Blackhole, TileKind::Router) => v.extend(niu_pair(0xFF00_0000, 0x1_0000, me)),
        (Arch::Blackhole, _) => v.extend(niu_pair(0xFFFF_FFFF_FF00_0000, 0x1_0000, me)),
    }
    v
}

/// The part of the DBI kept here (the standard 4 KiB configuration space and
/// the controller's port logic registers above it).
pub const DBI_SIZE: u64 = 0x10_0000;
/// tt-kmd pcie.h `DBI_DEVICE_CONTROL_DEVICE_STATUS`: PCIe Device Control
/// (low half) and Device Status, which tt-kmd saves and restores MPS from.
pub const DBI_DEVICE_CONTROL_DEVICE_STATUS: u64 = 0x78;
/// Its value out of reset: the PCIe base specification's Device Control
/// defaults (relaxed ordering and no-snoop enabled, MPS 128, MRRS 512).
const DBI_DEVICE_CONTROL_RESET: u32 = 0x0000_2810;

/// Where the iATU's registers are in BAR2: 0x1200 on Wormhole, 0x1000 on
/// Blackhole (tt-kmd `IATU_BASE`, tt-umd `ATU_OFFSET_IN_BH_BAR2`); region
/// `r` outbound at `+ 2r * 0x100`, inbound at `+ (2r + 1) * 0x100`.
pub fn iatu_base(arch: Arch) -> u64 {
    match arch {
        Arch::Wormhole => 0x1200,
        Arch::Blackhole => 0x1000,
    }
}
pub const IATU_REGIONS: u64 = 16;
const IATU_REGION_STRIDE: u64 = 0x100;
const IATU_CTRL_1: u64 = 0x00;
const IATU_CTRL_2: u64 = 0x04;
const IATU_LOWER_BASE: u64 = 0x08;
const IATU_UPPER_BASE: u64 = 0x0C;
const IATU_LOWER_LIMIT: u64 = 0x10;
const IATU_LOWER_TARGET: u64 = 0x14;
const IATU_UPPER_TARGET: u64 = 0x18;
const IATU_UPPER_LIMIT: u64 = 0x20;
/// CTRL_1: the limit's upper half comes from UPPER_LIMIT (tt-kmd blackhole.c).
const IATU_INCREASE_REGION_SIZE: u32 = 1 << 13;
/// CTRL_2 (tt-kmd wormhole.c / blackhole.c).
const IATU_REGION_EN: u32 = 1 << 31;
const IATU_BAR_MATCH_MODE: u32 = 1 << 30;

/// Wormhole's BAR4 lands on the system registers at this AXI address
/// (tt-kmd `BAR4_SOC_TARGET_ADDRESS`).
pub const WH_BAR4_SOC_TARGET: u64 = 0x1E00_0000;

/// The PCIe controller: its registers in BAR2 (iATU, DMA engine) and its
/// DBI, plus the translation its outbound iATU does.
///
/// The DBI's first 4 KiB is the function's configuration space. Once
/// [`PcieController::connect_config_space`] links the server's config
/// space, DBI accesses there read and write it (so tt-kmd's restore of MPS
/// through the DBI lands in Device Control, as on the chip); without it
/// they use a register file of their own, Device Control at its reset
/// value. DBI writes are not config TLPs and set nothing off in the card:
/// an Initiate FLR bit written through the DBI resets the config space's
/// registers ([`ConfigSpace::write`] does that) but not the chip. tt-kmd
/// never writes that bit there: it writes back the DevCtl value it read.
pub struct PcieController {
    arch: Arch,
    bar2: SparseMemory,
    dbi: SparseMemory,
    config: Option<Arc<Mutex<ConfigSpace>>>,
}

impl PcieController {
    pub fn new(arch: Arch) -> PcieController {
        let mut p = PcieController {
            arch,
            bar2: SparseMemory::new(1 << 20),
            dbi: SparseMemory::new(DBI_SIZE),
            config: None,
        };
        p.reset();
        p
    }

    /// Back to reset values: every iATU region disabled ("reset leaves the
    /// ATU default-clear", tt-kmd memory.c), DBI at its defaults.
    pub fn reset(&mut self) {
        self.bar2.clear();
        self.dbi.clear();
        self.dbi
            .write32(DBI_DEVICE_CONTROL_DEVICE_STATUS, DBI_DEVICE_CONTROL_RESET);
    }

    /// BAR2 as stored bytes.
    pub fn bar2_read(&self, offset: u64, buf: &mut [u8]) {
        self.bar2.read(offset, buf);
    }

    pub fn bar2_write(&mut self, offset: u64, data: &[u8]) {
        self.bar2.write(offset, data);
    }

    /// Makes the DBI's first 4 KiB the server's config space. The caller
    /// holding the card's lock takes this one inside it: nobody may take
    /// the card's lock while holding the config space's.
    pub fn connect_config_space(&mut self, config: Arc<Mutex<ConfigSpace>>) {
        self.config = Some(config);
    }

    /// The config space [`PcieController::connect_config_space`] linked.
    pub fn config_space(&self) -> Option<&Arc<Mutex<ConfigSpace>>> {
        self.config.as_ref()
    }

    /// Whether the function may issue requests to the host: Bus Master
    /// Enable (Command register bit 2; PCIe Base Specification 7.5.1.1.3:
    /// without it the function issues no memory requests). Without a
    /// linked config space (unit tests) it may.
    pub fn bus_master_enabled(&self) -> bool {
        self.config.as_ref().is_none_or(|c| {
            c.lock()
                .unwrap_or_else(|e| e.into_inner())
                .bus_master_enabled()
        })
    }

    fn dbi_config(&self, offset: u64, len: usize) -> Option<MutexGuard<'_, ConfigSpace>> {
        let end = offset.checked_add(len as u64)?;
        if end > CONFIG_SPACE_SIZE as u64 {
            return None;
        }
        let config = self.config.as_ref()?;
        Some(config.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn dbi_read(&self, offset: u64, buf: &mut [u8]) {
        match self.dbi_config(offset, buf.len()) {
            Some(config) => config.read(offset, buf),
            None => self.dbi.read(offset, buf),
        }
    }

    pub fn dbi_write(&mut self, offset: u64, data: &[u8]) {
        if let Some(mut config) = self.dbi_config(offset, data.len()) {
            let _ = config.write(offset, data);
            return;
        }
        self.dbi.write(offset, data);
    }

    fn region_reg(&self, region: u64, inbound: bool, reg: u64) -> u32 {
        let at =
            iatu_base(self.arch) + (2 * region + u64::from(inbound)) * IATU_REGION_STRIDE + reg;
        self.bar2.read32(at)
    }

    /// The host address the outbound iATU turns controller address `axi`
    /// into, and how many bytes from there the same mapping covers.
    ///
    /// An enabled region matches `base <= axi <= limit` and adds
    /// `target - base`; without INCREASE_REGION_SIZE the limit's upper half
    /// is the base's. An address no region matches goes out unchanged: that
    /// is how Wormhole reaches host memory below 4 GiB at NOC 0x800000000 +
    /// physical address without any region (tt-kmd wormhole.c
    /// `dma_address_bits = 32`).
    pub fn outbound(&self, axi: u64) -> (u64, u64) {
        let mut next_base = u64::MAX;
        for region in 0..IATU_REGIONS {
            let ctrl2 = self.region_reg(region, false, IATU_CTRL_2);
            if ctrl2 & IATU_REGION_EN == 0 {
                continue;
            }
            let ctrl1 = self.region_reg(region, false, IATU_CTRL_1);
            let upper_base = u64::from(self.region_reg(region, false, IATU_UPPER_BASE));
            let base =
                upper_base << 32 | u64::from(self.region_reg(region, false, IATU_LOWER_BASE));
            let upper_limit = if ctrl1 & IATU_INCREASE_REGION_SIZE != 0 {
                u64::from(self.region_reg(region, false, IATU_UPPER_LIMIT))
            } else {
                upper_base
            };
            let limit =
                upper_limit << 32 | u64::from(self.region_reg(region, false, IATU_LOWER_LIMIT));
            let target = u64::from(self.region_reg(region, false, IATU_UPPER_TARGET)) << 32
                | u64::from(self.region_reg(region, false, IATU_LOWER_TARGET));
            if base <= axi && axi <= limit {
                let left = (limit - axi).saturating_add(1);
                return (target.wrapping_add(axi - base), left);
            }
            if base > axi {
                next_base = next_base.min(base);
            }
        }
        (axi, next_base - axi)
    }

    /// Wormhole: the AXI address BAR4 offset 0 reaches. tt-kmd programs
    /// inbound region 1 to match BAR4 and target 0x1E000000
    /// (`map_bar4_to_system_registers`); an inbound region in BAR-match
    /// mode for BAR 4 gives the target. With none, BAR4 still lands on
    /// 0x1E000000: tt-kmd goes on using BAR4 after a secondary bus reset
    /// without programming the iATU again (pcie.c
    /// `pcie_hot_reset_and_restore_state`, the RESET_PCIE_LINK path of
    /// chardev.c), so on the card the mapping is there after reset.
    pub fn bar4_target(&self) -> u64 {
        for region in 0..IATU_REGIONS {
            let ctrl2 = self.region_reg(region, true, IATU_CTRL_2);
            let wanted = IATU_REGION_EN | IATU_BAR_MATCH_MODE;
            if ctrl2 & wanted == wanted && (ctrl2 >> 8) & 7 == 4 {
                return u64::from(self.region_reg(region, true, IATU_UPPER_TARGET)) << 32
                    | u64::from(self.region_reg(region, true, IATU_LOWER_TARGET));
            }
        }
        WH_BAR4_SOC_TARGET
    }
}

/// The chip behind the PCIe interface, seen through the NOC.
pub struct Noc {
    arch: Arch,
    host: Arc<HostMemory>,
    arc: ArcFirmware,
    erisc: EriscFirmware,
    pcie: PcieController,
    regions: HashMap<(u8, u8), Vec<Region>>,
    l1: HashMap<(u8, u8), SparseMemory>,
    dram: Vec<SparseMemory>,
    regs: HashMap<(u8, u8), SparseMemory>,
    /// NIU registers written, by (owner tile, block, word offset).
    niu: HashMap<((u8, u8), NocId, u32), u32>,
}

enum Access<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl Access<'_> {
    fn len(&self) -> usize {
        match self {
            Access::Read(b) => b.len(),
            Access::Write(d) => d.len(),
        }
    }
}

impl Noc {
    pub fn new(arch: Arch, host: Arc<HostMemory>) -> Noc {
        let (w, h) = grid_size(arch);
        let mut regions = HashMap::new();
        for x in 0..w {
            for y in 0..h {
                let kind = tile_kind(arch, x, y).expect("inside the grid");
                regions.insert((x, y), tile_regions(arch, x, y, kind));
            }
        }
        Noc {
            arch,
            host,
            arc: ArcFirmware::new(arch),
            erisc: EriscFirmware::new(match arch {
                Arch::Wormhole => WH_ETH.len(),
                Arch::Blackhole => BH_ETH.len(),
            }),
            pcie: PcieController::new(arch),
            regions,
            l1: HashMap::new(),
            dram: (0..dram_bank_count(arch))
                .map(|_| SparseMemory::new(dram_bank_size(arch)))
                .collect(),
            regs: HashMap::new(),
            niu: HashMap::new(),
        }
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    pub fn arc(&self) -> &ArcFirmware {
        &self.arc
    }

    pub fn arc_mut(&mut self) -> &mut ArcFirmware {
        &mut self.arc
    }

    /// The host memory the PCIe tile reaches.
    pub fn host(&self) -> &HostMemory {
        &self.host
    }

    pub fn pcie(&self) -> &PcieController {
        &self.pcie
    }

    pub fn pcie_mut(&mut self) -> &mut PcieController {
        &mut self.pcie
    }

    /// Pages of tile memory (L1 and DRAM) that hold data.
    pub fn resident_pages(&self) -> usize {
        self.l1
            .values()
            .map(SparseMemory::resident_pages)
            .sum::<usize>()
            + self
                .dram
                .iter()
                .map(SparseMemory::resident_pages)
                .sum::<usize>()
    }

    /// Registers back to their reset values: NIUs, the tiles' register
    /// space, the PCIe controller; the ARC firmware reboots. Tile memory
    /// (L1, DRAM) is kept: a reset does not clear SRAM or DRAM, though
    /// nothing on the chip promises what they hold afterwards.
    pub fn reset_registers(&mut self) {
        self.niu.clear();
        self.regs.clear();
        self.pcie.reset();
        self.arc.reset();
        self.erisc.reset();
    }

    /// Forgets all tile memory (L1 and DRAM): a card that lost power.
    pub fn clear_memory(&mut self) {
        self.l1.clear();
        self.dram.iter_mut().for_each(SparseMemory::clear);
    }

    /// A read carried by `noc` to its (x, y). On no answer `buf` is all ones.
    pub fn read(
        &mut self,
        noc: NocId,
        x: u8,
        y: u8,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), NocError> {
        let Some((x0, y0)) = to_noc0(self.arch, noc, x, y) else {
            buf.fill(0xFF);
            return Err(NocError::NoTile);
        };
        self.access(Origin::Noc(noc), x0, y0, addr, Access::Read(buf))
    }

    /// A write carried by `noc` to its (x, y); dropped if nothing answers.
    pub fn write(
        &mut self,
        noc: NocId,
        x: u8,
        y: u8,
        addr: u64,
        data: &[u8],
    ) -> Result<(), NocError> {
        let Some((x0, y0)) = to_noc0(self.arch, noc, x, y) else {
            return Err(NocError::NoTile);
        };
        self.access(Origin::Noc(noc), x0, y0, addr, Access::Write(data))
    }

    /// A multicast write over the rectangle from `start` to `end`
    /// (inclusive, in `noc`'s coordinates; either corner may be the
    /// smaller). Only Tensix tiles take it: tt-umd multicasts over the
    /// grid's whole bounding rectangle and its test expects "from multicast
    /// API to affect only TENSIX cores, and no other cores" (tests/api/
    /// test_device_io.cpp). Returns how many tiles were written. The torus
    /// wrap-around a start beyond the end might mean on the chip is not
    /// modelled.
    pub fn multicast_write(
        &mut self,
        noc: NocId,
        start: (u8, u8),
        end: (u8, u8),
        addr: u64,
        data: &[u8],
    ) -> usize {
        let (xs, xe) = (start.0.min(end.0), start.0.max(end.0));
        let (ys, ye) = (start.1.min(end.1), start.1.max(end.1));
        let mut count = 0;
        for x in xs..=xe {
            for y in ys..=ye {
                let Some((x0, y0)) = to_noc0(self.arch, noc, x, y) else {
                    continue;
                };
                if tile_kind(self.arch, x0, y0) == Some(TileKind::Tensix) {
                    // L1 and plain registers always answer.
                    let _ = self.access(Origin::Noc(noc), x0, y0, addr, Access::Write(data));
                    count += 1;
                }
            }
        }
        count
    }

    /// The ARC tile's address space as its own AXI side reaches it (the
    /// BAR0 ranges tt-kmd and tt-umd use for ARC's CSM and reset unit).
    /// `addr` is the address the NOC would carry to the ARC tile.
    pub fn arc_local_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), NocError> {
        let (x, y) = arc_tile(self.arch);
        self.access(Origin::Local, x, y, addr, Access::Read(buf))
    }

    pub fn arc_local_write(&mut self, addr: u64, data: &[u8]) -> Result<(), NocError> {
        let (x, y) = arc_tile(self.arch);
        self.access(Origin::Local, x, y, addr, Access::Write(data))
    }

    /// One NIU's registers as the tile's own AXI side reaches them (BAR0's
    /// NOC2AXI window on the PCIe tile). `offset` is from the block's start.
    /// Adds `len` bytes' data words to the PCIe tile's `counter` of `noc`'s
    /// NIU (32 bits, wrapping as the hardware's).
    pub fn count_pcie_words(&mut self, noc: NocId, counter: NiuCounter, len: usize) {
        let key = (pcie_tile(self.arch), noc, NIU_STATUS + 4 * counter as u32);
        let value = self.niu.entry(key).or_insert(0);
        *value = value.wrapping_add(data_words(len));
    }

    pub fn niu_local_read(&mut self, tile: (u8, u8), block: NocId, offset: u64, buf: &mut [u8]) {
        self.niu_access(Origin::Local, tile, block, offset, Access::Read(buf));
    }

    pub fn niu_local_write(&mut self, tile: (u8, u8), block: NocId, offset: u64, data: &[u8]) {
        self.niu_access(Origin::Local, tile, block, offset, Access::Write(data));
    }

    fn access(
        &mut self,
        origin: Origin,
        x: u8,
        y: u8,
        addr: u64,
        mut access: Access,
    ) -> Result<(), NocError> {
        let mut result = Ok(());
        let total = access.len();
        let mut done = 0usize;
        while done < total {
            let at = addr.wrapping_add(done as u64);
            let (found, len) = self.decode(x, y, at);
            let n = (total - done)
                .min(usize::try_from(len).unwrap_or(usize::MAX))
                .max(1);
            let piece = match &mut access {
                Access::Read(b) => Access::Read(&mut b[done..done + n]),
                Access::Write(d) => Access::Write(&d[done..done + n]),
            };
            let r = match found {
                Some(region) => self.access_region(origin, (x, y), region, at, piece),
                None => {
                    if let Access::Read(b) = piece {
                        b.fill(0xFF);
                    }
                    Err(NocError::Unmapped)
                }
            };
            if result.is_ok() {
                result = r;
            }
            done += n;
        }
        result
    }

    /// The region of tile (x, y) that `addr` falls in and the bytes left in
    /// it; or no region and the bytes until the next one.
    fn decode(&self, x: u8, y: u8, addr: u64) -> (Option<Region>, u64) {
        let regions = &self.regions[&(x, y)];
        // Regions listed earlier take precedence over later ones they overlap.
        let mut limit = u64::MAX;
        for reg in regions {
            if reg.start <= addr && addr < reg.end {
                return (Some(*reg), (reg.end - addr).min(limit - addr));
            }
            if reg.start > addr {
                limit = limit.min(reg.start);
            }
        }
        (None, limit - addr)
    }

    fn access_region(
        &mut self,
        origin: Origin,
        tile: (u8, u8),
        region: Region,
        addr: u64,
        access: Access,
    ) -> Result<(), NocError> {
        let offset = addr - region.start;
        match region.target {
            Target::L1 => {
                let size = region.end - region.start;
                let mem = self
                    .l1
                    .entry(tile)
                    .or_insert_with(|| SparseMemory::new(size));
                match access {
                    Access::Read(b) => {
                        mem.read(offset, b);
                        if let Some(TileKind::Ethernet { channel }) =
                            tile_kind(self.arch, tile.0, tile.1)
                        {
                            self.erisc_words(channel, offset, b);
                        }
                    }
                    Access::Write(d) => mem.write(offset, d),
                }
                Ok(())
            }
            Target::Dram(bank) => {
                let mem = &mut self.dram[bank];
                match access {
                    Access::Read(b) => mem.read(offset, b),
                    Access::Write(d) => mem.write(offset, d),
                }
                Ok(())
            }
            Target::Regs { owner } => {
                let size = region.end - region.start;
                let mem = self
                    .regs
                    .entry(owner)
                    .or_insert_with(|| SparseMemory::new(size));
                match access {
                    Access::Read(b) => mem.read(offset, b),
                    Access::Write(d) => mem.write(offset, d),
                }
                Ok(())
            }
            Target::Niu { owner, block } => {
                self.niu_access(origin, owner, block, offset, access);
                Ok(())
            }
            Target::Arc => self.arc_access(addr, access),
            Target::Outbound => {
                // Served by the PCIe tile's NIU of the NOC that carried it.
                if let Origin::Noc(noc) = origin {
                    let counter = match access {
                        Access::Read(_) => NiuCounter::SlvRdDataWordSent,
                        Access::Write(_) => NiuCounter::SlvNonpostedWrDataWordReceived,
                    };
                    self.count_pcie_words(noc, counter, access.len());
                }
                self.outbound_access(tile, offset, access)
            }
            Target::Dbi => {
                if tile != pcie_tile(self.arch) {
                    return no_response(access);
                }
                match access {
                    Access::Read(b) => self.pcie.dbi_read(offset, b),
                    Access::Write(d) => self.pcie.dbi_write(offset, d),
                }
                Ok(())
            }
        }
    }

    /// Puts what the Ethernet firmware keeps over a read of its L1 (whole
    /// aligned words inside the read).
    fn erisc_words(&mut self, channel: u8, offset: u64, buf: &mut [u8]) {
        let first = offset.next_multiple_of(4);
        let end = offset + buf.len() as u64;
        for word in (first..end.saturating_sub(3)).step_by(4) {
            if let Some(v) = self.erisc.read_word(self.arc.board(), channel, word) {
                let at = (word - offset) as usize;
                buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }

    /// The ARC firmware answers 32-bit words; narrower or unaligned
    /// accesses are made of whole words (a partial write reads the word
    /// first).
    fn arc_access(&mut self, addr: u64, access: Access) -> Result<(), NocError> {
        let arc = &mut self.arc;
        word_access(addr, access, |word_addr, write| match write {
            None => arc.read32(word_addr).ok_or(NocError::NoResponse),
            Some(value) => {
                if arc.write32(word_addr, value) {
                    Ok(0)
                } else {
                    Err(NocError::NoResponse)
                }
            }
        })
    }

    fn niu_access(
        &mut self,
        origin: Origin,
        owner: (u8, u8),
        block: NocId,
        offset: u64,
        access: Access,
    ) {
        let arch = self.arch;
        // NIU_CFG_0 out of reset holds what the firmware set at boot: its
        // translation bit agrees with the board's NOC_TRANSLATION tag.
        let cfg_0_at_boot = u32::from(self.arc.board().noc_translation) << 14;
        let niu = &mut self.niu;
        let _ = word_access(offset, access, |word_offset, write| {
            let Ok(word_offset) = u32::try_from(word_offset) else {
                return Ok(0);
            };
            if word_offset == niu_node_id_offset(arch) || word_offset == niu_logical_id_offset(arch)
            {
                // Read-only. The coordinates are those of the NOC that
                // carried the request, whichever NOC's NIU block it
                // addresses (tt-umd tests/api/test_noc.cpp: "the returned
                // value depends on which NOC was used to perform the
                // transaction"); a local read gets the block's own NOC's.
                let noc = match origin {
                    Origin::Noc(n) => n,
                    Origin::Local => block,
                };
                let (x, y) = from_noc0(arch, noc, owner.0, owner.1);
                return Ok(node_id(arch, x, y));
            }
            let key = (owner, block, word_offset);
            match write {
                Some(value) => {
                    niu.insert(key, value);
                    Ok(0)
                }
                None => Ok(niu
                    .get(&key)
                    .copied()
                    .unwrap_or(if word_offset == NIU_CFG_0 {
                        cfg_0_at_boot
                    } else {
                        0
                    })),
            }
        });
    }

    fn outbound_access(
        &mut self,
        tile: (u8, u8),
        offset: u64,
        access: Access,
    ) -> Result<(), NocError> {
        if tile != pcie_tile(self.arch) {
            // Blackhole's second PCIe tile has no host behind it.
            return no_response(access);
        }
        if self.arch == Arch::Wormhole {
            let (reads, writes) = self.arc.wh_dbi_enabled();
            let dbi = match access {
                Access::Read(_) => reads,
                Access::Write(_) => writes,
            };
            if dbi {
                match access {
                    Access::Read(b) => self.pcie.dbi_read(offset, b),
                    Access::Write(d) => self.pcie.dbi_write(offset, d),
                }
                return Ok(());
            }
        }
        if !self.pcie.bus_master_enabled() {
            return no_response(access);
        }
        // Split where the iATU's mapping changes.
        let mut access = access;
        let total = access.len();
        let mut done = 0usize;
        let mut result = Ok(());
        while done < total {
            let (host_addr, left) = self.pcie.outbound(offset + done as u64);
            let n = (total - done)
                .min(usize::try_from(left).unwrap_or(usize::MAX))
                .max(1);
            let r = match &mut access {
                Access::Read(b) => {
                    let piece = &mut b[done..done + n];
                    self.host.read(host_addr, piece).map_err(|_| {
                        piece.fill(0xFF);
                        NocError::NoResponse
                    })
                }
                Access::Write(d) => self
                    .host
                    .write(host_addr, &d[done..done + n])
                    .map_err(|_| NocError::NoResponse),
            };
            if result.is_ok() {
                result = r;
            }
            done += n;
        }
        result
    }
}

fn no_response(access: Access) -> Result<(), NocError> {
    if let Access::Read(b) = access {
        b.fill(0xFF);
    }
    Err(NocError::NoResponse)
}

/// Performs a byte access on a 32-bit register interface: `word(addr, None)`
/// reads the aligned word at `addr`, `word(addr, Some(v))` writes it. A read
/// that fails leaves all ones; a partial write that cannot read its word
/// first is dropped.
fn word_access(
    addr: u64,
    access: Access,
    mut word: impl FnMut(u64, Option<u32>) -> Result<u32, NocError>,
) -> Result<(), NocError> {
    let mut result = Ok(());
    let mut note = |r: Result<u32, NocError>| -> Option<u32> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                if result.is_ok() {
                    result = Err(e);
                }
                None
            }
        }
    };
    let total = access.len();
    let mut done = 0usize;
    match access {
        Access::Read(buf) => {
            while done < total {
                let at = addr.wrapping_add(done as u64);
                let base = at & !3;
                let skip = (at - base) as usize;
                let n = (4 - skip).min(total - done);
                let bytes = note(word(base, None)).unwrap_or(u32::MAX).to_le_bytes();
                buf[done..done + n].copy_from_slice(&bytes[skip..skip + n]);
                done += n;
            }
        }
        Access::Write(data) => {
            while done < total {
                let at = addr.wrapping_add(done as u64);
                let base = at & !3;
                let skip = (at - base) as usize;
                let n = (4 - skip).min(total - done);
                let mut bytes = if n == 4 {
                    [0; 4]
                } else {
                    match note(word(base, None)) {
                        Some(v) => v.to_le_bytes(),
                        None => {
                            done += n;
                            continue;
                        }
                    }
                };
                bytes[skip..skip + n].copy_from_slice(&data[done..done + n]);
                note(word(base, Some(u32::from_le_bytes(bytes))));
                done += n;
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::fd::FromRawFd;

    fn count(arch: Arch, f: impl Fn(TileKind) -> bool) -> usize {
        let (w, h) = grid_size(arch);
        (0..w)
            .flat_map(|x| (0..h).map(move |y| (x, y)))
            .filter(|&(x, y)| f(tile_kind(arch, x, y).unwrap()))
            .count()
    }

    /// Tile counts from tt-umd's lists: Wormhole 80 Tensix (TENSIX_GRID_SIZE
    /// 8 x 10), 6 banks x 3 DRAM ports, 16 Ethernet, 4 routers; Blackhole
    /// 140 Tensix (14 x 10), 8 x 3 DRAM, 14 Ethernet, 18 routers, 2 PCIe,
    /// 4 L2CPU.
    #[test]
    fn grids() {
        let wh = Arch::Wormhole;
        assert_eq!(count(wh, |k| k == TileKind::Tensix), 80);
        assert_eq!(count(wh, |k| matches!(k, TileKind::Dram { .. })), 18);
        assert_eq!(count(wh, |k| matches!(k, TileKind::Ethernet { .. })), 16);
        assert_eq!(count(wh, |k| k == TileKind::Router), 4);
        assert_eq!(tile_kind(wh, 0, 10), Some(TileKind::Arc));
        assert_eq!(tile_kind(wh, 0, 3), Some(TileKind::Pcie));
        assert_eq!(
            tile_kind(wh, 5, 6),
            Some(TileKind::Dram { bank: 5, port: 2 })
        );
        assert_eq!(
            tile_kind(wh, 0, 11),
            Some(TileKind::Dram { bank: 0, port: 1 })
        );
        assert_eq!(tile_kind(wh, 1, 0), Some(TileKind::Ethernet { channel: 1 }));
        assert_eq!(
            tile_kind(wh, 5, 5),
            Some(TileKind::Dram { bank: 5, port: 1 })
        );
        assert_eq!(tile_kind(wh, 6, 7), Some(TileKind::Tensix));
        assert_eq!(tile_kind(wh, 10, 0), None);
        assert_eq!(tile_kind(wh, 0, 12), None);

        let bh = Arch::Blackhole;
        assert_eq!(count(bh, |k| k == TileKind::Tensix), 140);
        assert_eq!(count(bh, |k| matches!(k, TileKind::Dram { .. })), 24);
        assert_eq!(count(bh, |k| matches!(k, TileKind::Ethernet { .. })), 14);
        assert_eq!(count(bh, |k| k == TileKind::Router), 18);
        assert_eq!(count(bh, |k| k == TileKind::Pcie), 2);
        assert_eq!(count(bh, |k| k == TileKind::L2Cpu), 4);
        assert_eq!(tile_kind(bh, 8, 0), Some(TileKind::Arc));
        assert_eq!(tile_kind(bh, 8, 2), Some(TileKind::Security));
        assert_eq!(
            tile_kind(bh, 9, 4),
            Some(TileKind::Dram { bank: 6, port: 1 })
        );
        assert_eq!(
            tile_kind(bh, 16, 1),
            Some(TileKind::Ethernet { channel: 1 })
        );
        // tt-kmd test/tlbs.cpp is_tensix: y 2..11, x 1..7 or 10..16.
        assert_eq!(tile_kind(bh, 10, 11), Some(TileKind::Tensix));
        assert_eq!(tile_kind(bh, 17, 0), None);
    }

    /// tt-umd's Wormhole hang detector finds ARC on NOC1 at
    /// (NOC0_X_TO_NOC1_X[0], NOC0_Y_TO_NOC1_Y[10]) = (9, 1).
    #[test]
    fn noc1_mirrors_noc0() {
        assert_eq!(to_noc0(Arch::Wormhole, NocId::Noc1, 9, 1), Some((0, 10)));
        assert_eq!(from_noc0(Arch::Wormhole, NocId::Noc1, 0, 10), (9, 1));
        assert_eq!(to_noc0(Arch::Blackhole, NocId::Noc1, 8, 11), Some((8, 0)));
        assert_eq!(to_noc0(Arch::Blackhole, NocId::Noc1, 16, 11), Some((0, 0)));
        assert_eq!(to_noc0(Arch::Blackhole, NocId::Noc1, 17, 0), None);
    }

    #[test]
    fn sparse_memory() {
        let mut m = SparseMemory::new(3 * PAGE_SIZE);
        let mut b = [0xAA; 16];
        m.read(100, &mut b);
        assert_eq!(b, [0; 16]);
        assert_eq!(m.resident_pages(), 0);
        // Straddles pages 0 and 1.
        m.write(PAGE_SIZE - 2, &[1, 2, 3, 4]);
        assert_eq!(m.resident_pages(), 2);
        let mut b = [0; 6];
        m.read(PAGE_SIZE - 3, &mut b);
        assert_eq!(b, [0, 1, 2, 3, 4, 0]);
        // Past the end: dropped, and reads as zero.
        m.write(3 * PAGE_SIZE - 1, &[9, 9]);
        let mut b = [0xAA; 2];
        m.read(3 * PAGE_SIZE - 1, &mut b);
        assert_eq!(b, [9, 0]);
        assert_eq!(m.resident_pages(), 3);
        m.clear();
        assert_eq!(m.resident_pages(), 0);
    }

    fn noc(arch: Arch) -> Noc {
        Noc::new(arch, Arc::new(HostMemory::new()))
    }

    fn read32(n: &mut Noc, noc: NocId, x: u8, y: u8, addr: u64) -> u32 {
        let mut b = [0; 4];
        let _ = n.read(noc, x, y, addr, &mut b);
        u32::from_le_bytes(b)
    }

    #[test]
    fn tensix_l1_is_one_memory_on_both_nocs() {
        let mut n = noc(Arch::Wormhole);
        assert_eq!(read32(&mut n, NocId::Noc0, 1, 1, 0x100), 0);
        n.write(NocId::Noc0, 1, 1, 0x100, &0xDEAD_BEEFu32.to_le_bytes())
            .unwrap();
        // NOC1 (8, 10) is NOC0 (1, 1).
        assert_eq!(read32(&mut n, NocId::Noc1, 8, 10, 0x100), 0xDEAD_BEEF);
        assert_eq!(read32(&mut n, NocId::Noc0, 2, 1, 0x100), 0);
        assert_eq!(n.resident_pages(), 1);
        // The last word of L1 (1464 KiB = 0x16E000) is memory; the next is not.
        n.write(NocId::Noc0, 1, 1, 0x16_DFFC, &[1, 2, 3, 4])
            .unwrap();
        let mut b = [0; 8];
        assert_eq!(
            n.read(NocId::Noc0, 1, 1, 0x16_DFFC, &mut b),
            Err(NocError::Unmapped)
        );
        assert_eq!(b, [1, 2, 3, 4, 0xFF, 0xFF, 0xFF, 0xFF]);
        // Blackhole's 1536 KiB.
        let mut n = noc(Arch::Blackhole);
        let mut b = [0; 4];
        assert_eq!(n.read(NocId::Noc0, 1, 2, 0x17_FFFC, &mut b), Ok(()));
        assert_eq!(
            n.read(NocId::Noc0, 1, 2, 0x18_0000, &mut b),
            Err(NocError::Unmapped)
        );
        assert_eq!(b, [0xFF; 4]);
    }

    #[test]
    fn dram_ports_of_a_bank_share_memory() {
        let mut n = noc(Arch::Wormhole);
        n.write(NocId::Noc0, 0, 0, 0x3FFF_FFF0, &[7; 8]).unwrap();
        // Bank 0 is (0, 0), (0, 1), (0, 11).
        let mut b = [0; 8];
        n.read(NocId::Noc0, 0, 11, 0x3FFF_FFF0, &mut b).unwrap();
        assert_eq!(b, [7; 8]);
        n.read(NocId::Noc0, 0, 1, 0x3FFF_FFF0, &mut b).unwrap();
        assert_eq!(b, [7; 8]);
        // Bank 1 is another memory.
        n.read(NocId::Noc0, 0, 5, 0x3FFF_FFF0, &mut b).unwrap();
        assert_eq!(b, [0; 8]);
        // 2 GiB per bank on Wormhole: the last byte exists, the next does not.
        assert!(n.read(NocId::Noc0, 0, 0, 0x7FFF_FFFF, &mut b[..1]).is_ok());
        assert_eq!(
            n.read(NocId::Noc0, 0, 0, 0x8000_0000, &mut b[..1]),
            Err(NocError::Unmapped)
        );
        // Blackhole: 4 GiB, bank 7 is (9, 5), (9, 7), (9, 6).
        let mut n = noc(Arch::Blackhole);
        n.write(NocId::Noc0, 9, 5, 0xF000_0000, &[3; 4]).unwrap();
        let mut b = [0; 4];
        n.read(NocId::Noc1, 16 - 9, 11 - 6, 0xF000_0000, &mut b)
            .unwrap();
        assert_eq!(b, [3; 4]);
    }

    #[test]
    fn node_ids_as_tt_kmd_tests_read_them() {
        let grid_wh = (10 << 12) | (12 << 19);
        let mut n = noc(Arch::Wormhole);
        // tt-kmd test/tlbs.cpp VerifyTlbAccessWormhole.
        assert_eq!(
            read32(&mut n, NocId::Noc0, 0, 10, 0xF_FFB2_002C),
            (10 << 6) | grid_wh
        );
        assert_eq!(
            read32(&mut n, NocId::Noc0, 0, 11, 0x1_0009_002C),
            (11 << 6) | grid_wh
        );
        // Port 0 of bank 0 is (0, 1): its NIU reports it from any port.
        assert_eq!(
            read32(&mut n, NocId::Noc0, 0, 11, 0x1_0008_002C) & 0xFFF,
            1 << 6
        );
        // Through NOC1 the NOC1 coordinates: ARC is (9, 1) there, whichever
        // NOC's register block is read.
        assert_eq!(
            read32(&mut n, NocId::Noc1, 9, 1, 0xF_FFB2_002C) & 0xFFF,
            9 | (1 << 6)
        );
        assert_eq!(
            read32(&mut n, NocId::Noc1, 9, 1, 0xF_FFB3_002C) & 0xFFF,
            9 | (1 << 6)
        );
        assert_eq!(
            read32(&mut n, NocId::Noc0, 3, 4, 0xFFB2_002C) & 0xFFF,
            3 | (4 << 6)
        );
        assert_eq!(
            read32(&mut n, NocId::Noc0, 3, 4, 0xFFB2_0138) & 0xFFF,
            3 | (4 << 6)
        );
        // The ARC NIU as an APB peripheral (tt-umd read-checking register
        // 0x1FF5002C = APB 0x5002C).
        assert_eq!(
            read32(&mut n, NocId::Noc0, 0, 10, 0x8_8005_002C) & 0xFFF,
            10 << 6
        );

        let mut n = noc(Arch::Blackhole);
        // VerifyTensixNodeIdsBlackhole, VerifyTlbAccessBlackhole.
        assert_eq!(
            read32(&mut n, NocId::Noc0, 16, 11, 0xFFB2_0148) & 0xFFF,
            16 | (11 << 6)
        );
        assert_eq!(
            read32(&mut n, NocId::Noc0, 2, 0, 0xFFFF_FFFF_FF00_0148) & 0xFFF,
            2
        );
        assert_eq!(read32(&mut n, NocId::Noc0, 8, 0, 0x8005_0044) & 0xFFF, 8);
        assert_eq!(
            read32(&mut n, NocId::Noc0, 8, 0, 0x8005_0044) >> 12,
            17 | (12 << 7)
        );
        // Translation is off.
        assert_eq!(read32(&mut n, NocId::Noc0, 2, 0, 0xFFFF_FFFF_FF00_0100), 0);
        // Node ids are read-only; other NIU registers keep what is written.
        n.write(NocId::Noc0, 5, 5, 0xFFB2_0044, &[0; 4]).unwrap();
        assert_eq!(
            read32(&mut n, NocId::Noc0, 5, 5, 0xFFB2_0044) & 0xFFF,
            5 | (5 << 6)
        );
        n.write(NocId::Noc0, 5, 5, 0xFFB2_0100, &0x1234u32.to_le_bytes())
            .unwrap();
        assert_eq!(read32(&mut n, NocId::Noc0, 5, 5, 0xFFB2_0100), 0x1234);
        assert_eq!(read32(&mut n, NocId::Noc0, 5, 6, 0xFFB2_0100), 0);
    }

    #[test]
    fn nothing_answers_outside_the_grid() {
        let mut n = noc(Arch::Wormhole);
        let mut b = [0; 4];
        assert_eq!(n.read(NocId::Noc0, 10, 0, 0, &mut b), Err(NocError::NoTile));
        assert_eq!(b, [0xFF; 4]);
        assert_eq!(n.write(NocId::Noc0, 0, 12, 0, &b), Err(NocError::NoTile));
        // Translated coordinates (Tensix from 18, 18) name nothing here.
        assert_eq!(
            n.read(NocId::Noc0, 18, 18, 0, &mut b),
            Err(NocError::NoTile)
        );
        // A router has only its NIUs.
        assert_eq!(
            n.read(NocId::Noc0, 0, 2, 0, &mut b),
            Err(NocError::Unmapped)
        );
        assert_eq!(b, [0xFF; 4]);
        // A hole in a Tensix's address space.
        assert_eq!(
            n.read(NocId::Noc0, 1, 1, 0x100_0000, &mut b),
            Err(NocError::Unmapped)
        );
        assert_eq!(n.resident_pages(), 0);
    }

    #[test]
    fn tensix_registers_are_kept() {
        let mut n = noc(Arch::Wormhole);
        // tt-umd TENSIX_SOFT_RESET_ADDR.
        n.write(NocId::Noc0, 1, 1, 0xFFB1_21B0, &0x47800u32.to_le_bytes())
            .unwrap();
        assert_eq!(read32(&mut n, NocId::Noc0, 1, 1, 0xFFB1_21B0), 0x47800);
        n.reset_registers();
        assert_eq!(read32(&mut n, NocId::Noc0, 1, 1, 0xFFB1_21B0), 0);
    }

    #[test]
    fn multicast_reaches_the_tensix_tiles_of_the_rectangle() {
        let mut n = noc(Arch::Wormhole);
        // (1, 1)..(6, 2): x 1-4 and 6 are Tensix, x 5 is DRAM.
        let written = n.multicast_write(NocId::Noc0, (1, 1), (6, 2), 0x40, &[5; 4]);
        assert_eq!(written, 10);
        for x in [1, 2, 3, 4, 6] {
            for y in [1, 2] {
                assert_eq!(
                    read32(&mut n, NocId::Noc0, x, y, 0x40),
                    0x0505_0505,
                    "({x}, {y})"
                );
            }
        }
        assert_eq!(read32(&mut n, NocId::Noc0, 7, 1, 0x40), 0);
        assert_eq!(read32(&mut n, NocId::Noc0, 1, 3, 0x40), 0);
        assert_eq!(read32(&mut n, NocId::Noc0, 5, 1, 0x40), 0);
        // On NOC1, NOC1 coordinates: (8, 10)..(7, 10) is NOC0 (1..2, 1),
        // corners in either order.
        let mut n = noc(Arch::Wormhole);
        assert_eq!(n.multicast_write(NocId::Noc1, (8, 10), (7, 10), 0, &[1]), 2);
        assert_eq!(read32(&mut n, NocId::Noc0, 1, 1, 0) & 0xFF, 1);
        assert_eq!(read32(&mut n, NocId::Noc0, 2, 1, 0) & 0xFF, 1);
        assert_eq!(read32(&mut n, NocId::Noc0, 3, 1, 0) & 0xFF, 0);
    }

    fn shared_memory(len: u64) -> File {
        // SAFETY: memfd_create with a valid C string; the fd is new and ours.
        let fd = unsafe { libc::memfd_create(c"noc-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: fd is a fresh descriptor nothing else owns.
        let f = unsafe { File::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    fn noc_with_host(arch: Arch) -> (Noc, Arc<HostMemory>) {
        let host = Arc::new(HostMemory::new());
        host.map(
            0x10_0000,
            0x10_0000,
            0,
            shared_memory(0x10_0000),
            true,
            true,
        )
        .unwrap();
        (Noc::new(arch, host.clone()), host)
    }

    #[test]
    fn pcie_tile_reaches_host_memory() {
        // Wormhole: NOC 0x800000000 + address, no iATU region needed.
        let (mut n, host) = noc_with_host(Arch::Wormhole);
        n.write(NocId::Noc0, 0, 3, 0x8_0010_0010, &[1, 2, 3, 4])
            .unwrap();
        let mut b = [0; 4];
        host.read(0x10_0010, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        host.write(0x10_0020, &[9, 8]).unwrap();
        let mut b = [0; 2];
        n.read(NocId::Noc1, 9, 8, 0x8_0010_0020, &mut b).unwrap();
        assert_eq!(b, [9, 8]);
        // Unmapped host memory: no answer.
        let mut b = [0; 4];
        assert_eq!(
            n.read(NocId::Noc0, 0, 3, 0x8_0000_0000, &mut b),
            Err(NocError::NoResponse)
        );
        assert_eq!(b, [0xFF; 4]);

        // Blackhole: from 4 << 58, through iATU region 2 as tt-kmd programs
        // it: base 0x1000 .. limit 0x1FFF -> target 0x100800.
        let (mut n, host) = noc_with_host(Arch::Blackhole);
        let region = 0x1000 + 2 * 0x200;
        let p = n.pcie_mut();
        p.bar2_write(region + 0x08, &0x1000u32.to_le_bytes());
        p.bar2_write(region + 0x10, &0x1FFFu32.to_le_bytes());
        p.bar2_write(region + 0x14, &0x10_0800u32.to_le_bytes());
        p.bar2_write(region, &(1u32 << 13).to_le_bytes());
        p.bar2_write(region + 0x04, &(1u32 << 31).to_le_bytes());
        n.write(NocId::Noc0, 2, 0, (4 << 58) + 0x1FFE, &[5, 6, 7, 8])
            .unwrap_err();
        let mut b = [0; 2];
        host.read(0x10_17FE, &mut b).unwrap();
        assert_eq!(b, [5, 6]);
        // The two bytes past the limit went untranslated to 0x2000: unmapped.
        n.write(NocId::Noc0, 2, 0, (4 << 58) + 0x1000, &[1])
            .unwrap();
        host.read(0x10_0800, &mut b[..1]).unwrap();
        assert_eq!(b[0], 1);
        // Untranslated 58-bit addresses pass through.
        n.write(NocId::Noc0, 2, 0, (4 << 58) + 0x10_0000, &[4])
            .unwrap();
        host.read(0x10_0000, &mut b[..1]).unwrap();
        assert_eq!(b[0], 4);
        // The second PCIe tile has no host behind it.
        assert_eq!(
            n.read(NocId::Noc0, 11, 0, (4 << 58) + 0x10_0000, &mut b),
            Err(NocError::NoResponse)
        );
        assert_eq!(b, [0xFF; 2]);
    }

    #[test]
    fn dbi_through_the_pcie_tile() {
        // tt-kmd wormhole_save_reset_state: open_dbi, read DevCtl at
        // PCIE_DBI_ADDR + 0x78 from (0, 3), close_dbi.
        let (mut n, _host) = noc_with_host(Arch::Wormhole);
        assert_eq!(read32(&mut n, NocId::Noc0, 0, 3, 0x8_0000_0078), u32::MAX);
        n.write(
            NocId::Noc0,
            0,
            10,
            0x8_8003_0078,
            &0x0020_0000u32.to_le_bytes(),
        )
        .unwrap();
        n.write(
            NocId::Noc0,
            0,
            10,
            0x8_8003_007C,
            &0x0020_0000u32.to_le_bytes(),
        )
        .unwrap();
        assert_eq!(read32(&mut n, NocId::Noc0, 0, 3, 0x8_0000_0078), 0x2810);
        n.write(NocId::Noc0, 0, 3, 0x8_0000_0078, &0x2830u32.to_le_bytes())
            .unwrap();
        assert_eq!(read32(&mut n, NocId::Noc0, 0, 3, 0x8_0000_0078), 0x2830);
        // Blackhole's DBI is always there.
        let mut n = noc(Arch::Blackhole);
        assert_eq!(
            read32(&mut n, NocId::Noc0, 2, 0, 0xF800_0000_0000_0078),
            0x2810
        );
    }

    #[test]
    fn ethernet_l1_shows_the_firmware_words() {
        let mut wh = noc(Arch::Wormhole);
        // Channel 1 at (1, 0): the heartbeat moves on every read, over what
        // the host wrote there; plain L1 next to it is memory.
        wh.write(NocId::Noc0, 1, 0, 0x1C, &[0; 4]).unwrap();
        let a = read32(&mut wh, NocId::Noc0, 1, 0, 0x1C);
        let b = read32(&mut wh, NocId::Noc0, 1, 0, 0x1C);
        assert_ne!(a, b);
        assert_eq!(a >> 16, 0xABCD);
        // A wider read covering the word gets it too.
        let mut wide = [0; 16];
        wh.read(NocId::Noc0, 1, 0, 0x1100, &mut wide).unwrap();
        assert_eq!(u32::from_le_bytes(wide[4..8].try_into().unwrap()), 2);
        wh.write(NocId::Noc0, 1, 0, 0x2000, &7u32.to_le_bytes())
            .unwrap();
        assert_eq!(read32(&mut wh, NocId::Noc0, 1, 0, 0x2000), 7);
        // A Tensix L1 has no such words.
        assert_eq!(read32(&mut wh, NocId::Noc0, 1, 1, 0x1104), 0);
        let mut bh = noc(Arch::Blackhole);
        assert_eq!(read32(&mut bh, NocId::Noc0, 1, 1, 0x7CC04), 2);
    }

    #[test]
    fn arc_tile_goes_to_the_firmware() {
        let mut n = noc(Arch::Wormhole);
        // ARC's CSM (ARC 0x10040000, a part arc.rs leaves free).
        n.write(NocId::Noc0, 0, 10, 0x8_1004_0000, &[1, 2, 3, 4])
            .unwrap();
        assert_eq!(n.arc_mut().read32(0x8_1004_0000), Some(0x0403_0201));
        // A byte write is a read-modify-write of its word.
        n.write(NocId::Noc0, 0, 10, 0x8_1004_0001, &[0xAA]).unwrap();
        assert_eq!(n.arc_mut().read32(0x8_1004_0000), Some(0x0403_AA01));
        let mut b = [0; 2];
        n.arc_local_read(0x8_1004_0002, &mut b).unwrap();
        assert_eq!(b, [3, 4]);
        // Where the firmware decodes nothing: no answer.
        assert_eq!(
            n.read(NocId::Noc0, 0, 10, 0x8_0000_0000, &mut b),
            Err(NocError::NoResponse)
        );
        assert_eq!(b, [0xFF; 2]);
        // A hung firmware leaves the NIUs answering: they are hardware.
        n.arc_mut().set_responding(false);
        assert_eq!(
            read32(&mut n, NocId::Noc0, 0, 10, 0xF_FFB2_002C) & 0xFFF,
            10 << 6
        );
        // Translation off in the ARC NIU's NIU_CFG_0, which tt-umd reads
        // through the APB (BAR0 0x1FF50100).
        n.arc_local_read(0x8_8005_0100, &mut b).unwrap();
        assert_eq!(u16::from_le_bytes(b) & (1 << 14), 0);
        // Blackhole, from the chip's own AXI side: the NOC1 block gives the
        // NOC1 coordinates, (16 - 8, 11 - 0).
        let mut n = noc(Arch::Blackhole);
        let mut b = [0; 4];
        n.arc_local_read(0x8005_8044, &mut b).unwrap();
        assert_eq!(u32::from_le_bytes(b) & 0xFFF, 8 | (11 << 6));
    }

    #[test]
    fn resets_keep_memory_unless_cold() {
        let mut n = noc(Arch::Blackhole);
        n.write(NocId::Noc0, 1, 2, 0, &[1]).unwrap();
        n.write(NocId::Noc0, 0, 0, 0, &[2]).unwrap();
        n.reset_registers();
        assert_eq!(read32(&mut n, NocId::Noc0, 1, 2, 0) & 0xFF, 1);
        assert_eq!(read32(&mut n, NocId::Noc0, 0, 0, 0) & 0xFF, 2);
        n.clear_memory();
        assert_eq!(read32(&mut n, NocId::Noc0, 1, 2, 0), 0);
        assert_eq!(read32(&mut n, NocId::Noc0, 0, 0, 0), 0);
        assert_eq!(n.resident_pages(), 0);
    }
}

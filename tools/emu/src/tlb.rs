// SPDX-License-Identifier: GPL-2.0
//! TLB windows: how an offset in a BAR becomes a NOC transaction.
//!
//! The host never addresses a tile directly. BAR0 (and, on Blackhole, BAR4)
//! is carved into fixed-size apertures ("TLB windows"); each has a config
//! register that names a NOC address, a destination tile (or a rectangle of
//! tiles for multicast), which of the two NOCs carries the request and how
//! it is ordered. An access at offset `o` of window `n` becomes an access of
//! `window_base_address(n) + o` on the tile(s) the register names.
//!
//! Geometry (all from tt-kmd 2.10 `wormhole.c` / `blackhole.c`, the same
//! numbers as tt-umd `wormhole_implementation.hpp` /
//! `blackhole_implementation.hpp` and luwen `luwen-kmd/src/tlb/*.rs`):
//!
//! | arch      | windows        | where               | config register        |
//! |-----------|----------------|---------------------|------------------------|
//! | Wormhole  | 156 x 1 MiB    | BAR0 0x0            | 8 bytes at 0x1FC00000 + 8n |
//! | Wormhole  | 10 x 2 MiB     | BAR0 0x09C00000     | (same array, n = 156..165) |
//! | Wormhole  | 20 x 16 MiB    | BAR0 0x0B000000     | (same array, n = 166..185) |
//! | Blackhole | 202 x 2 MiB    | BAR0 0x0            | 12 bytes at 0x1FC00000 + 12n |
//! | Blackhole | 8 x 4 GiB      | BAR4 0x0 (as many as BAR4 holds) | (n = 202..209) |
//!
//! Blackhole's first 32 2 MiB windows also have a 4-byte "strided" register
//! (non-rectangular multicast) after the 210 window registers, at
//! 0x1FC00000 + 210 * 12 = 0x1FC009D8 (tt-kmd `TLB_STRIDED_REGS_OFFSET`,
//! luwen `get_tlb`).
//!
//! A config register holds the window's base NOC address shifted right by
//! the window's size (the low bits come from the BAR offset, which is why
//! tt-kmd refuses unaligned addresses), followed by the destination fields.
//! The bit positions per window size are in [`WindowKind::layout`].

use crate::Arch;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Where the TLB config registers sit in BAR0, on both chips
/// (tt-kmd `TLB_REGS_START`, tt-umd `STATIC_TLB_CFG_ADDR`).
pub const TLB_CONFIG_BASE: u64 = 0x1FC0_0000;
/// The length of the register block tt-kmd maps for them
/// (blackhole.c `TLB_REGS_LEN`; Wormhole's 186 x 8 bytes fit in it too).
pub const TLB_CONFIG_LEN: u64 = 0x1000;

/// Wormhole window counts per size (tt-kmd wormhole.c `TLB_*_WINDOW_COUNT`).
pub const WH_1M_COUNT: usize = 156;
pub const WH_2M_COUNT: usize = 10;
pub const WH_16M_COUNT: usize = 20;
pub const WH_WINDOW_COUNT: usize = WH_1M_COUNT + WH_2M_COUNT + WH_16M_COUNT;
/// BAR0 offsets of each Wormhole size class: the classes are packed one after
/// the other from offset 0, so the 2 MiB ones start after 156 MiB and the
/// 16 MiB ones after 156 + 20 MiB (tt-kmd `TLB_2M_WINDOW_BASE`,
/// `TLB_16M_WINDOW_BASE`; tt-umd `TLB_BASE_2M` = 0x9C00000, `TLB_BASE_16M` =
/// 0xB000000).
pub const WH_2M_BASE: u64 = WH_1M_COUNT as u64 * MIB;
pub const WH_16M_BASE: u64 = WH_2M_BASE + WH_2M_COUNT as u64 * 2 * MIB;
/// Where Wormhole's windows end and its register space begins: 0x1F000000,
/// which is where luwen maps "BAR0 beyond the TLB apertures" from.
pub const WH_WINDOWS_END: u64 = WH_16M_BASE + WH_16M_COUNT as u64 * 16 * MIB;

/// Blackhole window counts (tt-kmd blackhole.c). Only `bar4_size / 4 GiB` of
/// the eight 4 GiB windows are reachable; their registers exist regardless.
pub const BH_2M_COUNT: usize = 202;
pub const BH_4G_COUNT: usize = 8;
pub const BH_WINDOW_COUNT: usize = BH_2M_COUNT + BH_4G_COUNT;
/// Where Blackhole's 2 MiB windows end in BAR0 (0x19400000; luwen maps the
/// register space from here).
pub const BH_WINDOWS_END: u64 = BH_2M_COUNT as u64 * 2 * MIB;
/// The windows that have a strided-multicast register, and where those
/// registers start relative to [`TLB_CONFIG_BASE`].
pub const BH_STRIDED_COUNT: usize = 32;
pub const BH_STRIDED_OFFSET: u64 = BH_WINDOW_COUNT as u64 * 12;

/// The window each driver keeps for its own NOC accesses: the last 16 MiB
/// window on Wormhole (index 185, BAR0 0x1E000000), the last 2 MiB one on
/// Blackhole (index 201, BAR0 0x19200000). tt-kmd `KERNEL_TLB_INDEX`.
pub fn kernel_window(arch: Arch) -> usize {
    match arch {
        Arch::Wormhole => WH_WINDOW_COUNT - 1,
        Arch::Blackhole => BH_2M_COUNT - 1,
    }
}

/// The size classes of windows, each with its own register layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowKind {
    Wormhole1M,
    Wormhole2M,
    Wormhole16M,
    Blackhole2M,
    Blackhole4G,
}

/// Bit positions of the fields of one config register, counted from bit 0
/// of its first 32-bit word (the words are little-endian parts of one
/// 64-bit or 96-bit value).
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Width of the address field at bit 0: the NOC address bits above the
    /// window's own offset bits.
    pub addr_bits: u32,
    pub x_end: u32,
    pub y_end: u32,
    pub x_start: u32,
    pub y_start: u32,
    pub noc: u32,
    pub noc_bits: u32,
    pub mcast: u32,
    /// Two bits: 0 relaxed, 1 strict, 2 posted (3: luwen's "PostedStrict").
    pub ordering: u32,
    pub linked: u32,
    /// Wormhole's `static_vc` bit (tt-umd), Blackhole's `use_static_vc`.
    pub use_static_vc: u32,
    /// Blackhole only.
    pub stream_header: Option<u32>,
    /// Blackhole only: the 3-bit virtual channel used when `use_static_vc`.
    pub static_vc: Option<u32>,
    /// Bits the register implements; the rest read as zero.
    pub width: u32,
}

/// Coordinates are 6 bits wide in every layout (tt-kmd's bitfields;
/// tt-umd `NOC_ADDR_NODE_ID_BITS` = 6).
const COORD_BITS: u32 = 6;
/// Wormhole's NOC addresses are 36 bits wide (tt-kmd wormhole.c
/// `WH_NOC_BITS`); Blackhole's are 64.
const WH_NOC_ADDRESS_BITS: u32 = 36;

impl WindowKind {
    /// The window's size in bytes.
    pub fn size(self) -> u64 {
        1 << self.shift()
    }

    /// log2 of the size: how many low NOC address bits come from the BAR offset.
    pub fn shift(self) -> u32 {
        match self {
            WindowKind::Wormhole1M => 20,
            WindowKind::Wormhole2M | WindowKind::Blackhole2M => 21,
            WindowKind::Wormhole16M => 24,
            WindowKind::Blackhole4G => 32,
        }
    }

    /// How many 32-bit words the config register has.
    pub fn reg_words(self) -> usize {
        match self {
            WindowKind::Wormhole1M | WindowKind::Wormhole2M | WindowKind::Wormhole16M => 2,
            WindowKind::Blackhole2M | WindowKind::Blackhole4G => 3,
        }
    }

    /// The register layout of this size class.
    ///
    /// Wormhole: tt-umd `wormhole_implementation.hpp` `TLB_1M_OFFSET`,
    /// `TLB_2M_OFFSET`, `TLB_16M_OFFSET` (from the chip's `tlb.yaml`, quoted
    /// there); tt-kmd's `noc_tlb_non_address_bits` gives the same order after
    /// a `36 - shift`-bit address, and luwen's `Tlb1M`/`Tlb2M`/`Tlb16M` agree. tt-kmd
    /// stops at `linked`; the `static_vc` bit after it is tt-umd's.
    ///
    /// Blackhole: tt-kmd `struct TLB_2M_REG` / `struct TLB_4G_REG` (packed
    /// bitfields over 3 words), tt-umd `blackhole_implementation.hpp`
    /// `TLB_2M_OFFSET` / `TLB_4G_OFFSET`, luwen `Tlb2M` / `Tlb4G`: a
    /// `64 - shift`-bit address, 2-bit `noc`, then `use_static_vc`,
    /// `stream_header` and a 3-bit `static_vc`.
    pub fn layout(self) -> Layout {
        let blackhole = matches!(self, WindowKind::Blackhole2M | WindowKind::Blackhole4G);
        let noc_address_bits = if blackhole { 64 } else { WH_NOC_ADDRESS_BITS };
        // The fields follow one another from bit 0, each as wide as it is.
        let mut next = 0;
        let mut field = |width: u32| {
            next += width;
            next - width
        };
        let addr_bits = noc_address_bits - self.shift();
        field(addr_bits);
        let x_end = field(COORD_BITS);
        let y_end = field(COORD_BITS);
        let x_start = field(COORD_BITS);
        let y_start = field(COORD_BITS);
        let noc_bits = if blackhole { 2 } else { 1 };
        let noc = field(noc_bits);
        let mcast = field(1);
        let ordering = field(2);
        let linked = field(1);
        let use_static_vc = field(1);
        let stream_header = blackhole.then(|| field(1));
        let static_vc = blackhole.then(|| field(3));
        Layout {
            addr_bits,
            x_end,
            y_end,
            x_start,
            y_start,
            noc,
            noc_bits,
            mcast,
            ordering,
            linked,
            use_static_vc,
            stream_header,
            static_vc,
            width: field(0),
        }
    }
}

/// A window: which register it has and where it is in which BAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The window's number, as CONFIGURE_TLB and ALLOCATE_TLB count them.
    pub index: usize,
    pub kind: WindowKind,
    pub bar: usize,
    /// Offset of the window's first byte in its BAR.
    pub bar_offset: u64,
}

impl Window {
    pub fn size(&self) -> u64 {
        self.kind.size()
    }

    /// Offset of the window's config register relative to [`TLB_CONFIG_BASE`].
    pub fn config_offset(&self) -> u64 {
        self.index as u64 * self.kind.reg_words() as u64 * 4
    }
}

/// How many windows (config registers) the chip has.
pub fn window_count(arch: Arch) -> usize {
    match arch {
        Arch::Wormhole => WH_WINDOW_COUNT,
        Arch::Blackhole => BH_WINDOW_COUNT,
    }
}

/// Window number `index`, or `None` if the chip has no such window.
pub fn window(arch: Arch, index: usize) -> Option<Window> {
    let (kind, bar, bar_offset) = match arch {
        Arch::Wormhole => {
            if index < WH_1M_COUNT {
                (WindowKind::Wormhole1M, 0, index as u64 * MIB)
            } else if index < WH_1M_COUNT + WH_2M_COUNT {
                let i = (index - WH_1M_COUNT) as u64;
                (WindowKind::Wormhole2M, 0, WH_2M_BASE + i * 2 * MIB)
            } else if index < WH_WINDOW_COUNT {
                let i = (index - WH_1M_COUNT - WH_2M_COUNT) as u64;
                (WindowKind::Wormhole16M, 0, WH_16M_BASE + i * 16 * MIB)
            } else {
                return None;
            }
        }
        Arch::Blackhole => {
            if index < BH_2M_COUNT {
                (WindowKind::Blackhole2M, 0, index as u64 * 2 * MIB)
            } else if index < BH_WINDOW_COUNT {
                // tt-kmd blackhole_describe_tlb: BAR4, packed from offset 0.
                let i = (index - BH_2M_COUNT) as u64;
                (WindowKind::Blackhole4G, 4, i * 4 * GIB)
            } else {
                return None;
            }
        }
    };
    Some(Window {
        index,
        kind,
        bar,
        bar_offset,
    })
}

/// The window that BAR `bar` offset `offset` falls in, and the offset inside
/// it; `None` for offsets outside every window (Wormhole BAR0 from
/// 0x1F000000, Blackhole BAR0 from 0x19400000: register space; BAR2; and
/// Wormhole's BAR4, which is not a window). BAR sizes are not checked here.
pub fn window_at(arch: Arch, bar: usize, offset: u64) -> Option<(Window, u64)> {
    let index = match (arch, bar) {
        (Arch::Wormhole, 0) => {
            if offset < WH_2M_BASE {
                offset / MIB
            } else if offset < WH_16M_BASE {
                WH_1M_COUNT as u64 + (offset - WH_2M_BASE) / (2 * MIB)
            } else if offset < WH_WINDOWS_END {
                (WH_1M_COUNT + WH_2M_COUNT) as u64 + (offset - WH_16M_BASE) / (16 * MIB)
            } else {
                return None;
            }
        }
        (Arch::Blackhole, 0) if offset < BH_WINDOWS_END => offset / (2 * MIB),
        (Arch::Blackhole, 4) if offset < BH_4G_COUNT as u64 * 4 * GIB => {
            BH_2M_COUNT as u64 + offset / (4 * GIB)
        }
        _ => return None,
    };
    let w = window(arch, index as usize)?;
    Some((w, offset - w.bar_offset))
}

/// The ordering mode of a window's requests. It decides how the chip may
/// reorder them; every access here completes before the next begins, so
/// each mode behaves as strict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Ordering {
    /// 0: no read-after-write protection (tt-umd `tlb_data::Relaxed`).
    #[default]
    Relaxed,
    /// 1: full AXI ordering; what tt-kmd uses for its own window.
    Strict,
    /// 2: posted writes, which may overtake reads.
    Posted,
    /// 3: named "PostedStrict" by luwen; no other source describes it.
    PostedStrict,
}

impl Ordering {
    pub fn from_bits(bits: u8) -> Ordering {
        match bits & 3 {
            0 => Ordering::Relaxed,
            1 => Ordering::Strict,
            2 => Ordering::Posted,
            _ => Ordering::PostedStrict,
        }
    }

    pub fn bits(self) -> u8 {
        match self {
            Ordering::Relaxed => 0,
            Ordering::Strict => 1,
            Ordering::Posted => 2,
            Ordering::PostedStrict => 3,
        }
    }
}

/// A window's configuration, decoded from its register.
///
/// A unicast request goes to (`x_end`, `y_end`); `x_start`/`y_start` matter
/// only for multicast, whose rectangle runs from start to end (tt-kmd's own
/// window sets only `x_end`/`y_end`). Coordinates are in the coordinate
/// system of the NOC named by `noc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TlbConfig {
    /// The NOC address of the window's first byte: the register's address
    /// field shifted left by the window size (so always size-aligned).
    pub addr: u64,
    pub x_end: u8,
    pub y_end: u8,
    pub x_start: u8,
    pub y_start: u8,
    /// 0 = NOC0, 1 = NOC1. Blackhole's field is 2 bits wide; 2 and 3 are
    /// undocumented.
    pub noc: u8,
    pub multicast: bool,
    pub ordering: Ordering,
    pub linked: bool,
    /// Use a fixed virtual channel: what CONFIGURE_TLB's `static_vc` sets
    /// (tt-kmd writes it to Blackhole's `use_static_vc`; tt-umd's Wormhole
    /// layout names this bit `static_vc`).
    pub use_static_vc: bool,
    /// Blackhole only.
    pub stream_header: bool,
    /// Blackhole only: which virtual channel (3 bits).
    pub static_vc: u8,
}

fn get_bits(value: u128, pos: u32, len: u32) -> u128 {
    (value >> pos) & ((1u128 << len) - 1)
}

fn put_bits(value: &mut u128, pos: u32, len: u32, field: u128) {
    let mask = (1u128 << len) - 1;
    *value = (*value & !(mask << pos)) | ((field & mask) << pos);
}

fn words_to_value(words: &[u32]) -> u128 {
    words
        .iter()
        .enumerate()
        .fold(0u128, |v, (i, &w)| v | (u128::from(w) << (32 * i)))
}

/// Decodes a config register (its 2 or 3 words, first word first).
pub fn decode(kind: WindowKind, words: &[u32]) -> TlbConfig {
    let l = kind.layout();
    let v = words_to_value(&words[..kind.reg_words()]);
    let coord = |pos| get_bits(v, pos, COORD_BITS) as u8;
    TlbConfig {
        addr: (get_bits(v, 0, l.addr_bits) as u64) << kind.shift(),
        x_end: coord(l.x_end),
        y_end: coord(l.y_end),
        x_start: coord(l.x_start),
        y_start: coord(l.y_start),
        noc: get_bits(v, l.noc, l.noc_bits) as u8,
        multicast: get_bits(v, l.mcast, 1) != 0,
        ordering: Ordering::from_bits(get_bits(v, l.ordering, 2) as u8),
        linked: get_bits(v, l.linked, 1) != 0,
        use_static_vc: get_bits(v, l.use_static_vc, 1) != 0,
        stream_header: l.stream_header.is_some_and(|p| get_bits(v, p, 1) != 0),
        static_vc: l.static_vc.map_or(0, |p| get_bits(v, p, 3) as u8),
    }
}

/// Encodes a configuration into register words, as a driver would write
/// them. Fields are truncated to their width, as the register would; the
/// address's bits below the window size are dropped.
pub fn encode(kind: WindowKind, config: &TlbConfig) -> Vec<u32> {
    let l = kind.layout();
    let mut v = 0u128;
    put_bits(
        &mut v,
        0,
        l.addr_bits,
        u128::from(config.addr >> kind.shift()),
    );
    put_bits(&mut v, l.x_end, COORD_BITS, config.x_end.into());
    put_bits(&mut v, l.y_end, COORD_BITS, config.y_end.into());
    put_bits(&mut v, l.x_start, COORD_BITS, config.x_start.into());
    put_bits(&mut v, l.y_start, COORD_BITS, config.y_start.into());
    put_bits(&mut v, l.noc, l.noc_bits, config.noc.into());
    put_bits(&mut v, l.mcast, 1, config.multicast.into());
    put_bits(&mut v, l.ordering, 2, config.ordering.bits().into());
    put_bits(&mut v, l.linked, 1, config.linked.into());
    put_bits(&mut v, l.use_static_vc, 1, config.use_static_vc.into());
    if let Some(p) = l.stream_header {
        put_bits(&mut v, p, 1, config.stream_header.into());
    }
    if let Some(p) = l.static_vc {
        put_bits(&mut v, p, 3, config.static_vc.into());
    }
    (0..kind.reg_words())
        .map(|i| (v >> (32 * i)) as u32)
        .collect()
}

/// Blackhole's strided-multicast register of windows 0..31, field names and
/// widths from luwen `Tlb2MStride`. tt-kmd writes 0 to it on every
/// CONFIGURE_TLB ("strided TLB configuration is unsupported by the
/// CONFIGURE_TLB API"). What a non-zero pattern selects is not documented
/// in any of the sources; it is stored and read back, not acted upon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stride {
    pub stride_x: u8,
    pub stride_y: u8,
    pub quad_exclude_x: u8,
    pub quad_exclude_y: u8,
    pub quad_exclude_ctl: u8,
    pub num_destinations: u8,
}

/// The bits of the strided register luwen defines (4+4+5+4+4+8).
const STRIDE_WIDTH: u32 = 29;

impl Stride {
    pub fn decode(word: u32) -> Stride {
        let v = u128::from(word);
        Stride {
            stride_x: get_bits(v, 0, 4) as u8,
            stride_y: get_bits(v, 4, 4) as u8,
            quad_exclude_x: get_bits(v, 8, 5) as u8,
            quad_exclude_y: get_bits(v, 13, 4) as u8,
            quad_exclude_ctl: get_bits(v, 17, 4) as u8,
            num_destinations: get_bits(v, 21, 8) as u8,
        }
    }
}

/// The block of TLB config registers at BAR0 [`TLB_CONFIG_BASE`], as stored
/// bytes. Each register keeps only the bits its layout defines (the rest
/// read back as zero); bytes of the block that belong to no register are
/// kept as written.
pub struct TlbRegisters {
    arch: Arch,
    bytes: Vec<u8>,
}

impl TlbRegisters {
    /// All registers at their reset value, zero: every window aims at
    /// address 0 of tile (0, 0) on NOC0, unicast, relaxed. (None of the
    /// sources give reset values; zero is what an unprogrammed register of
    /// this kind usually holds.)
    pub fn new(arch: Arch) -> TlbRegisters {
        TlbRegisters {
            arch,
            bytes: vec![0; TLB_CONFIG_LEN as usize],
        }
    }

    pub fn reset(&mut self) {
        self.bytes.fill(0);
    }

    /// Reads `buf.len()` bytes at `offset` from [`TLB_CONFIG_BASE`]; bytes
    /// past the block read as zero.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self
                .bytes
                .get((offset as usize).wrapping_add(i))
                .copied()
                .unwrap_or(0);
        }
    }

    /// Writes bytes at `offset` from [`TLB_CONFIG_BASE`], then drops the
    /// bits no register field defines. A register changes as soon as any of
    /// its bytes is written: drivers write the words of one register one at
    /// a time (tt-kmd: low word first), and the window follows each.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            if let Some(slot) = self.bytes.get_mut((offset as usize).wrapping_add(i)) {
                *slot = b;
            }
        }
        self.mask_registers(offset, data.len() as u64);
    }

    fn mask_registers(&mut self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let end = offset.saturating_add(len);
        // Every register of a chip has the same size (8 or 12 bytes).
        let reg_size = window(self.arch, 0).expect("window 0").kind.reg_words() as u64 * 4;
        let first = (offset / reg_size) as usize;
        let last = ((end - 1) / reg_size) as usize;
        for index in first..=last.min(window_count(self.arch) - 1) {
            let w = window(self.arch, index).expect("index below window_count");
            let start = w.config_offset();
            let mut v = words_to_value(&self.raw(index));
            v &= (1u128 << w.kind.layout().width) - 1;
            for i in 0..w.kind.reg_words() {
                self.put_word(start + 4 * i as u64, (v >> (32 * i)) as u32);
            }
        }
        if self.arch == Arch::Blackhole {
            for index in 0..BH_STRIDED_COUNT {
                let at = BH_STRIDED_OFFSET + 4 * index as u64;
                if at < end && offset < at + 4 {
                    let word = self.word(at) & ((1 << STRIDE_WIDTH) - 1);
                    self.put_word(at, word);
                }
            }
        }
    }

    fn word(&self, at: u64) -> u32 {
        let at = at as usize;
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }

    fn put_word(&mut self, at: u64, value: u32) {
        let at = at as usize;
        self.bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }

    /// The raw words of window `index`'s register.
    pub fn raw(&self, index: usize) -> Vec<u32> {
        let w = window(self.arch, index).expect("window index out of range");
        (0..w.kind.reg_words())
            .map(|i| self.word(w.config_offset() + 4 * i as u64))
            .collect()
    }

    /// Window `index`'s decoded configuration.
    pub fn config(&self, index: usize) -> TlbConfig {
        let w = window(self.arch, index).expect("window index out of range");
        decode(w.kind, &self.raw(index))
    }

    /// The raw strided register of a Blackhole window that has one.
    pub fn stride(&self, index: usize) -> Option<u32> {
        (self.arch == Arch::Blackhole && index < BH_STRIDED_COUNT)
            .then(|| self.word(BH_STRIDED_OFFSET + 4 * index as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wormhole_geometry() {
        // 156 x 1 MiB from 0: window 155 is the last MiB before 156 MiB.
        let w = window(Arch::Wormhole, 155).unwrap();
        assert_eq!(
            (w.kind, w.bar, w.bar_offset, w.size()),
            (WindowKind::Wormhole1M, 0, 0x9B0_0000, 0x10_0000)
        );
        // tt-umd: "The 2MB TLB #n corresponds to the 2MB MMIO range starting
        // at (0x9C00000 + N*0x200000)".
        let w = window(Arch::Wormhole, 156).unwrap();
        assert_eq!((w.kind, w.bar_offset), (WindowKind::Wormhole2M, 0x9C0_0000));
        let w = window(Arch::Wormhole, 165).unwrap();
        assert_eq!(w.bar_offset, 0x9C0_0000 + 9 * 0x20_0000);
        // "The 16MB TLB #n corresponds to the 16MB MMIO range starting at
        // (0xB000000 + N*0x1000000)".
        let w = window(Arch::Wormhole, 166).unwrap();
        assert_eq!(
            (w.kind, w.bar_offset, w.size()),
            (WindowKind::Wormhole16M, 0xB00_0000, 0x100_0000)
        );
        // The kernel's window: tt-kmd KERNEL_TLB_START = BAR4 offset 0 =
        // system address 0x1E000000.
        assert_eq!(kernel_window(Arch::Wormhole), 185);
        assert_eq!(window(Arch::Wormhole, 185).unwrap().bar_offset, 0x1E00_0000);
        assert_eq!(window(Arch::Wormhole, 186), None);
        assert_eq!(WH_WINDOWS_END, 0x1F00_0000);
    }

    #[test]
    fn wormhole_window_at() {
        let (w, off) = window_at(Arch::Wormhole, 0, 0x9C0_0000 - 1).unwrap();
        assert_eq!((w.index, off), (155, 0xF_FFFF));
        let (w, off) = window_at(Arch::Wormhole, 0, 0x9C0_0000 + 0x20_0004).unwrap();
        assert_eq!((w.index, off), (157, 4));
        let (w, off) = window_at(Arch::Wormhole, 0, 0x1EFF_FFFC).unwrap();
        assert_eq!((w.index, off), (185, 0xFF_FFFC));
        assert_eq!(window_at(Arch::Wormhole, 0, 0x1F00_0000), None);
        assert_eq!(window_at(Arch::Wormhole, 4, 0), None);
        assert_eq!(window_at(Arch::Wormhole, 2, 0), None);
    }

    #[test]
    fn blackhole_geometry() {
        let w = window(Arch::Blackhole, 201).unwrap();
        assert_eq!(
            (w.kind, w.bar, w.bar_offset, w.size()),
            (WindowKind::Blackhole2M, 0, 0x1920_0000, 0x20_0000)
        );
        assert_eq!(kernel_window(Arch::Blackhole), 201);
        let w = window(Arch::Blackhole, 202).unwrap();
        assert_eq!(
            (w.kind, w.bar, w.bar_offset, w.size()),
            (WindowKind::Blackhole4G, 4, 0, 1 << 32)
        );
        let (w, off) = window_at(Arch::Blackhole, 4, (1 << 32) + 8).unwrap();
        assert_eq!((w.index, off), (203, 8));
        assert_eq!(window_at(Arch::Blackhole, 0, 0x1940_0000), None);
        // Config registers: 12 bytes each, the 4 GiB ones after the 202 2 MiB
        // ones (tt-umd DYNAMIC_TLB_4G_CFG_ADDR = 0x1fc00000 + 202 * 12).
        assert_eq!(
            window(Arch::Blackhole, 202).unwrap().config_offset(),
            202 * 12
        );
        assert_eq!(BH_STRIDED_OFFSET, 0x9D8);
        assert_eq!(
            window(Arch::Wormhole, 166).unwrap().config_offset(),
            166 * 8
        );
    }

    /// tt-kmd wh_configure_kernel_tlb for a read of ARC's reset unit
    /// scratch register 0x880030060 (tt-umd ARC_RESET_SCRATCH_ADDR) from
    /// tile (0, 10): addr = 0x880030060 & ~0xFFFFFF = 0x880000000, x_end 0,
    /// y_end 10, ordering 1, in a 16 MiB window. Computed by hand from
    /// tt-umd's TLB_16M_OFFSET: 0x880000000 >> 24 = 0x880 in bits 0..11;
    /// y_end 10 at bit 18 = 0x280000; ordering 1 at bit 38.
    #[test]
    fn wormhole_16m_kernel_window_encoding() {
        let cfg = TlbConfig {
            addr: 0x8_8000_0000,
            x_end: 0,
            y_end: 10,
            ordering: Ordering::Strict,
            ..Default::default()
        };
        let value: u64 = 0x880 | (10 << 18) | (1 << 38);
        let words = [value as u32, (value >> 32) as u32];
        assert_eq!(encode(WindowKind::Wormhole16M, &cfg), words);
        assert_eq!(decode(WindowKind::Wormhole16M, &words), cfg);
    }

    /// Every field of a 1 MiB register set, each to a distinct value, at the
    /// positions of tt-umd's TLB_1M_OFFSET (local_offset 0..15, x_end 16,
    /// y_end 22, x_start 28, y_start 34, noc_sel 40, mcast 41, ordering 42,
    /// linked 44, static_vc 45).
    #[test]
    fn wormhole_1m_all_fields() {
        let value: u64 = 0xABCD
            | (9 << 16)
            | (11 << 22)
            | (1 << 28)
            | (2 << 34)
            | (1 << 40)
            | (1 << 41)
            | (2 << 42)
            | (1 << 44)
            | (1 << 45);
        let cfg = decode(
            WindowKind::Wormhole1M,
            &[value as u32, (value >> 32) as u32],
        );
        assert_eq!(
            cfg,
            TlbConfig {
                addr: 0xA_BCD0_0000,
                x_end: 9,
                y_end: 11,
                x_start: 1,
                y_start: 2,
                noc: 1,
                multicast: true,
                ordering: Ordering::Posted,
                linked: true,
                use_static_vc: true,
                stream_header: false,
                static_vc: 0,
            }
        );
        assert_eq!(
            encode(WindowKind::Wormhole1M, &cfg),
            [value as u32, (value >> 32) as u32]
        );
    }

    /// tt-umd TLB_2M_OFFSET: local_offset 0..14, x_end 15, y_end 21,
    /// x_start 27, y_start 33, noc_sel 39, mcast 40, ordering 41, linked 43.
    #[test]
    fn wormhole_2m_fields() {
        let value: u64 =
            0x7FFF | (5 << 15) | (3 << 21) | (4 << 27) | (6 << 33) | (1 << 40) | (1 << 41);
        let cfg = decode(
            WindowKind::Wormhole2M,
            &[value as u32, (value >> 32) as u32],
        );
        assert_eq!(cfg.addr, 0x7FFF << 21);
        assert_eq!(
            (cfg.x_end, cfg.y_end, cfg.x_start, cfg.y_start),
            (5, 3, 4, 6)
        );
        assert_eq!(
            (cfg.noc, cfg.multicast, cfg.ordering, cfg.linked),
            (0, true, Ordering::Strict, false)
        );
    }

    /// tt-kmd blackhole_configure_tlb_2M for its own window: noc_read32 of
    /// ARC (8, 0) at RESET_SCRATCH(13) = 0x80030434: addr 0x80000000
    /// (2 MiB aligned), x_end 8, y_end 0, ordering strict. Hand-computed
    /// from struct TLB_2M_REG: address field 0x80000000 >> 21 = 0x400 in
    /// word 0; x_end at bit 43 = bit 11 of word 1 (8 << 11 = 0x4000);
    /// ordering at bit 70 = bit 6 of word 2 (0x40).
    #[test]
    fn blackhole_2m_kernel_window_encoding() {
        let cfg = TlbConfig {
            addr: 0x8000_0000,
            x_end: 8,
            y_end: 0,
            ordering: Ordering::Strict,
            ..Default::default()
        };
        let words = [0x400, 0x4000, 0x40];
        assert_eq!(encode(WindowKind::Blackhole2M, &cfg), words);
        assert_eq!(decode(WindowKind::Blackhole2M, &words), cfg);
    }

    /// Blackhole 2 MiB, every field, at tt-umd TLB_2M_OFFSET (x_end 43,
    /// y_end 49, x_start 55, y_start 61 (straddling words 1 and 2), noc 67,
    /// mcast 69, ordering 70, linked 72, static_vc 73 (use), then tt-kmd's
    /// stream_header 74 and 3-bit static_vc 75).
    #[test]
    fn blackhole_2m_all_fields() {
        let v: u128 = ((1u128 << 43) - 1) // the 43-bit address field, all ones
            | (16u128 << 43)
            | (11u128 << 49)
            | (1u128 << 55)
            | (0x2Bu128 << 61)
            | (1u128 << 67)
            | (1u128 << 69)
            | (2u128 << 70)
            | (1u128 << 72)
            | (1u128 << 73)
            | (1u128 << 74)
            | (5u128 << 75);
        let words = [v as u32, (v >> 32) as u32, (v >> 64) as u32];
        let cfg = decode(WindowKind::Blackhole2M, &words);
        assert_eq!(cfg.addr, 0xFFFF_FFFF_FFE0_0000);
        assert_eq!(
            (cfg.x_end, cfg.y_end, cfg.x_start, cfg.y_start),
            (16, 11, 1, 0x2B)
        );
        assert_eq!(cfg.noc, 1);
        assert!(cfg.multicast && cfg.linked && cfg.use_static_vc && cfg.stream_header);
        assert_eq!((cfg.ordering, cfg.static_vc), (Ordering::Posted, 5));
        assert_eq!(encode(WindowKind::Blackhole2M, &cfg), words);
    }

    /// Blackhole 4 GiB (struct TLB_4G_REG): the whole first word is the
    /// address; x_end at bit 32 = word 1 bit 0; noc at 56 = word 1 bit 24;
    /// mcast 58; ordering 59; linked 61; use_static_vc 62; stream_header
    /// 63; static_vc 64 = word 2 bit 0.
    #[test]
    fn blackhole_4g_fields() {
        let words = [
            0x0000_0001,
            2 | (3 << 6) | (4 << 12) | (5 << 18) | (1 << 24) | (1 << 26) | (1 << 27) | (1 << 30),
            7,
        ];
        let cfg = decode(WindowKind::Blackhole4G, &words);
        assert_eq!(cfg.addr, 1 << 32);
        assert_eq!(
            (cfg.x_end, cfg.y_end, cfg.x_start, cfg.y_start),
            (2, 3, 4, 5)
        );
        assert_eq!(
            (cfg.noc, cfg.multicast, cfg.ordering),
            (1, true, Ordering::Strict)
        );
        assert!(!cfg.linked && cfg.use_static_vc && !cfg.stream_header);
        assert_eq!(cfg.static_vc, 7);
    }

    #[test]
    fn registers_keep_only_defined_bits() {
        let mut regs = TlbRegisters::new(Arch::Wormhole);
        // Window 0's high word: bits 46..63 are beyond static_vc (bit 45).
        regs.write(4, &0xFFFF_FFFFu32.to_le_bytes());
        let mut b = [0; 4];
        regs.read(4, &mut b);
        assert_eq!(u32::from_le_bytes(b), (1 << 14) - 1);
        // A 16 MiB register ends at bit 41.
        let at = window(Arch::Wormhole, 170).unwrap().config_offset();
        regs.write(at, &u64::MAX.to_le_bytes());
        assert_eq!(regs.raw(170), [0xFFFF_FFFF, (1 << 10) - 1]);
        assert_eq!(regs.config(170).addr, 0xFFF << 24);

        let mut regs = TlbRegisters::new(Arch::Blackhole);
        let at = window(Arch::Blackhole, 3).unwrap().config_offset();
        regs.write(at, &[0xFF; 12]);
        assert_eq!(regs.raw(3), [0xFFFF_FFFF, 0xFFFF_FFFF, (1 << 14) - 1]);
        regs.write(BH_STRIDED_OFFSET + 4, &u32::MAX.to_le_bytes());
        assert_eq!(regs.stride(1), Some((1 << 29) - 1));
        assert_eq!(Stride::decode((1 << 29) - 1).num_destinations, 0xFF);
        assert_eq!(regs.stride(32), None);
        regs.reset();
        assert_eq!(regs.raw(3), [0, 0, 0]);
    }

    #[test]
    fn register_follows_each_word() {
        let mut regs = TlbRegisters::new(Arch::Wormhole);
        // y_start (bits 34..39) lives in the second word.
        let cfg = TlbConfig {
            addr: 0x1_0000_0000,
            x_end: 0,
            y_end: 11,
            y_start: 3,
            ..Default::default()
        };
        let words = encode(WindowKind::Wormhole1M, &cfg);
        regs.write(8 * 7, &words[0].to_le_bytes());
        assert_eq!(regs.config(7).addr, 0x1_0000_0000);
        assert_eq!(regs.config(7).y_end, 11);
        assert_eq!(regs.config(7).y_start, 0);
        regs.write(8 * 7 + 4, &words[1].to_le_bytes());
        assert_eq!(regs.config(7), cfg);
    }
}

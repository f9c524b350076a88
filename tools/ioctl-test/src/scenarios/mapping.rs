//! Mappings: QUERY_MAPPINGS, mmap of the BARs (UC and WC) and of TLB
//! windows, CONFIGURE_TLB, the mappings' life (FREE_TLB of a mapped window
//! is EBUSY; revocation by a reset or an unbind), on both emulated cards. The expected values are
//! tt-kmd 2.10's (memory.c: MMAP_OFFSET_*, ioctl_query_mappings,
//! tenstorrent_mmap; wormhole.c and blackhole.c for the registers), checked
//! against the emulator's view of the card (its control port).

use std::io;
use std::os::fd::AsRawFd;

use tt_arbiter::abi;

use crate::card::{hex, Aim, Chip, Control, Mmio};
use crate::util::*;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const PAGE: usize = 4096;
const TLB_REGS: u64 = 0x1FC0_0000;

/// The chip of card `n` (card 0 is the Wormhole, card 1 the Blackhole).
pub(super) fn chip(n: u32) -> Chip {
    if n == 0 {
        Chip::Wormhole
    } else {
        Chip::Blackhole
    }
}

/// The BAR sizes of card `n` (RESOURCE0/1/2 = BAR0/2/4), as tools/emu
/// makes them.
fn bar_sizes(n: u32) -> [u64; 3] {
    match chip(n) {
        Chip::Wormhole => [512 * MIB, MIB, 32 * MIB],
        Chip::Blackhole => [512 * MIB, MIB, 8 * GIB],
    }
}

/// A Tensix tile of the emulated chip.
pub(super) fn tensix(c: Chip) -> (u16, u16) {
    match c {
        Chip::Wormhole => (1, 1),
        Chip::Blackhole => (1, 2),
    }
}

/// The window sizes of card `n`, in id order.
fn window_sizes(n: u32) -> &'static [u64] {
    match chip(n) {
        Chip::Wormhole => &[MIB, 2 * MIB, 16 * MIB],
        Chip::Blackhole => &[2 * MIB, 4 * GIB],
    }
}

/// The kernel's own window.
fn kernel_window(n: u32) -> (u32, u64) {
    match chip(n) {
        // The last 16 MiB window at BAR0 0x1E000000.
        Chip::Wormhole => (185, 0x1E00_0000),
        // The last 2 MiB window at BAR0 0x19200000.
        Chip::Blackhole => (201, 0x1920_0000),
    }
}

/// QUERY_MAPPINGS with room for `count` entries, prefilled with 0xAA
/// bytes (and one more entry past them, which must stay untouched).
fn query_mappings(dev: &impl AsRawFd, count: u32) -> io::Result<(Vec<abi::Mapping>, Vec<u8>)> {
    let entry = std::mem::size_of::<abi::Mapping>();
    let in_size = std::mem::size_of::<abi::QueryMappingsIn>();
    let mut buf = vec![0xAAu8; in_size + (count as usize + 1) * entry];
    buf[..4].copy_from_slice(&count.to_ne_bytes());
    buf[4..8].copy_from_slice(&0u32.to_ne_bytes());
    ioctl_addr(
        dev.as_raw_fd(),
        abi::IOCTL_QUERY_MAPPINGS,
        buf.as_mut_ptr() as usize,
    )?;
    let mappings = (0..count as usize)
        .map(|i| {
            let at = in_size + i * entry;
            let b = &buf[at..at + entry];
            abi::Mapping {
                mapping_id: u32::from_ne_bytes(b[0..4].try_into().unwrap_or_default()),
                reserved: u32::from_ne_bytes(b[4..8].try_into().unwrap_or_default()),
                mapping_base: u64::from_ne_bytes(b[8..16].try_into().unwrap_or_default()),
                mapping_size: u64::from_ne_bytes(b[16..24].try_into().unwrap_or_default()),
            }
        })
        .collect();
    let tail = buf[in_size + count as usize * entry..].to_vec();
    Ok((mappings, tail))
}

pub(super) fn alloc(dev: &impl AsRawFd, size: u64) -> io::Result<abi::AllocateTlbOut> {
    let mut a = abi::AllocateTlb::default();
    a.input.size = size;
    ioctl(dev, abi::IOCTL_ALLOCATE_TLB, &mut a).map(|_| a.output)
}

pub(super) fn free(dev: &impl AsRawFd, id: u32) -> io::Result<i32> {
    let mut f = abi::FreeTlb::default();
    f.input.id = id;
    ioctl(dev, abi::IOCTL_FREE_TLB, &mut f)
}

pub(super) fn configure_with(
    dev: &impl AsRawFd,
    id: u32,
    config: abi::NocTlbConfig,
) -> io::Result<i32> {
    let mut c = abi::ConfigureTlb::default();
    c.input.id = id;
    c.input.config = config;
    // The output is never written.
    c.output.reserved = 0x5a5a_5a5a_5a5a_5a5a;
    let r = ioctl(dev, abi::IOCTL_CONFIGURE_TLB, &mut c);
    assert_eq!(
        c.output.reserved, 0x5a5a_5a5a_5a5a_5a5a,
        "CONFIGURE_TLB wrote out"
    );
    r
}

/// Aims window `id` at `addr` of tile (x, y), unicast on NOC 0.
pub(super) fn configure(
    dev: &impl AsRawFd,
    id: u32,
    (x, y): (u16, u16),
    addr: u64,
) -> io::Result<i32> {
    configure_with(
        dev,
        id,
        abi::NocTlbConfig {
            addr,
            x_end: x,
            y_end: y,
            ..Default::default()
        },
    )
}

/// RESOURCE0_UC mapping of the page holding the TLB registers.
fn registers(dev: &impl AsRawFd) -> Result<Mmio, String> {
    ctx(
        Mmio::new(dev, TLB_REGS, PAGE),
        "mmap RESOURCE0_UC at the TLB registers",
    )
}

/// The register words of window `id` aimed at `addr` of (x, y), unicast,
/// as tt-kmd writes them, and where they are (from tools/ioctl-test's own
/// encoder for the 1M/2M/16M windows; a 4 GiB window has a 32-bit address
/// field, then the coordinates).
fn expected_register(c: Chip, id: u32, (x, y): (u16, u16), addr: u64) -> (usize, Vec<u32>) {
    if c == Chip::Blackhole && id >= 202 {
        let value = u128::from(addr >> 32) | u128::from(x) << 32 | u128::from(y) << 38;
        let words = (0..3).map(|w| (value >> (32 * w)) as u32).collect();
        return ((TLB_REGS + 12 * u64::from(id)) as usize, words);
    }
    c.tlb_register(&Aim {
        window: id as usize,
        x: x.into(),
        y: y.into(),
        addr,
    })
}

fn read_register(regs: &Mmio, at: usize, words: usize) -> Vec<u32> {
    (0..words)
        .map(|i| regs.read32(at - TLB_REGS as usize + 4 * i))
        .collect()
}

/// The emulator's view of `len` bytes of tile (x, y) at `addr`.
pub(super) fn noc_read(
    n: u32,
    (x, y): (u16, u16),
    addr: u64,
    len: usize,
) -> Result<String, String> {
    Control::open(n as usize)?.command(&format!("noc-read {x} {y} {addr:#x} {len}"))
}

/// QUERY_MAPPINGS: ids 1-6 at tt-kmd's offsets with the BARs' sizes; only
/// `output_mapping_count` entries are written, those past the six zeroed;
/// with a count of 0 the kernel reads only `in`, which may end a mapping.
pub fn query_mappings_values() -> TestResult {
    for n in 0..2 {
        let dev = open(n)?;
        let sizes = bar_sizes(n);
        let (m, tail) = ctx(query_mappings(&dev, 8), "QUERY_MAPPINGS count 8")?;
        for (i, got) in m.iter().enumerate().take(6) {
            let want = abi::Mapping {
                mapping_id: i as u32 + 1,
                reserved: 0,
                mapping_base: (i as u64) << 36,
                mapping_size: sizes[i / 2],
            };
            ensure_eq!(*got, want, "card {n}: mapping {i}");
        }
        ensure_eq!(m[6], abi::Mapping::default(), "card {n}: entry 6 zeroed");
        ensure_eq!(m[7], abi::Mapping::default(), "card {n}: entry 7 zeroed");
        ensure!(
            tail.iter().all(|&b| b == 0xAA),
            "card {n}: bytes past the 8 entries written"
        );
        let (m, tail) = ctx(query_mappings(&dev, 3), "QUERY_MAPPINGS count 3")?;
        ensure_eq!(
            m[2].mapping_id,
            abi::MAPPING_RESOURCE1_UC,
            "card {n}: 3rd id"
        );
        ensure!(
            tail.iter().all(|&b| b == 0xAA),
            "card {n}: QUERY_MAPPINGS with count 3 wrote a 4th entry"
        );
        let (_keep, at) = page_before_hole()?;
        let at = at - 8;
        // SAFETY: the last 8 bytes of a writable page.
        unsafe { std::ptr::write_bytes(at as *mut u8, 0, 8) };
        expect_ok(
            ioctl_addr(dev.as_raw_fd(), abi::IOCTL_QUERY_MAPPINGS, at),
            "QUERY_MAPPINGS count 0 with `in` ending a mapping",
        )?;
        // A count whose zeroing would pass U32_MAX bytes: tt-kmd's EFAULT.
        let (_keep2, at) = page_before_hole()?;
        let at = at - 8;
        let huge = u32::MAX / 24 + 7;
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(huge.to_ne_bytes().as_ptr(), at as *mut u8, 4) };
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), abi::IOCTL_QUERY_MAPPINGS, at),
            libc::EFAULT,
            "QUERY_MAPPINGS with a count past U32_MAX bytes",
        )?;
    }
    Ok(())
}

/// Each BAR mapped UC and WC reaches the card: a TLB register written
/// through RESOURCE0_UC reads back through RESOURCE0_WC and through the
/// PCI resource file, Wormhole's BAR4 shows the same register (BAR4 is
/// AXI 0x1E000000 on), and BAR2/BAR4 read the same through both kinds of
/// mapping and the resource files.
pub fn bars_uc_and_wc() -> TestResult {
    for n in 0..2 {
        let dev = open(n)?;
        let bdf = bdf(n as usize)?;
        let uc = ctx(Mmio::new(&dev, 0, 512 << 20), "mmap all of RESOURCE0_UC")?;
        let wc = ctx(
            Mmio::new(&dev, 1 << 36, 512 << 20),
            "mmap all of RESOURCE0_WC",
        )?;
        // Window 7's register: no file holds window 7 in this scenario.
        let at = match chip(n) {
            Chip::Wormhole => TLB_REGS as usize + 8 * 7,
            Chip::Blackhole => TLB_REGS as usize + 12 * 7,
        };
        let value = 0x0123_4000 | n;
        uc.write32(at, value);
        ensure_eq!(
            wc.read32(at),
            value,
            "card {n}: register through RESOURCE0_WC"
        );
        let raw = Mmio::bar(&bdf, 0, 512 << 20)?;
        ensure_eq!(
            raw.read32(at),
            value,
            "card {n}: register through resource0"
        );
        uc.write32(at, 0);
        let bar2_uc = ctx(Mmio::new(&dev, 2 << 36, MIB as usize), "mmap RESOURCE1_UC")?;
        let bar2_wc = ctx(Mmio::new(&dev, 3 << 36, MIB as usize), "mmap RESOURCE1_WC")?;
        let raw2 = Mmio::bar(&bdf, 2, PAGE)?;
        ensure_eq!(
            bar2_uc.read32(0),
            raw2.read32(0),
            "card {n}: BAR2 word 0, UC"
        );
        ensure_eq!(
            bar2_wc.read32(0),
            raw2.read32(0),
            "card {n}: BAR2 word 0, WC"
        );
        let bar4_len = bar_sizes(n)[2] as usize;
        let bar4_uc = ctx(Mmio::new(&dev, 4 << 36, bar4_len), "mmap RESOURCE2_UC")?;
        let bar4_wc = ctx(Mmio::new(&dev, 5 << 36, bar4_len), "mmap RESOURCE2_WC")?;
        if chip(n) == Chip::Wormhole {
            let in_bar4 = at - 0x1E00_0000;
            uc.write32(at, 0x00ab_cd00);
            ensure_eq!(
                bar4_uc.read32(in_bar4),
                0x00ab_cd00,
                "Wormhole register via BAR4 UC"
            );
            ensure_eq!(
                bar4_wc.read32(in_bar4),
                0x00ab_cd00,
                "Wormhole register via BAR4 WC"
            );
            uc.write32(at, 0);
        } else {
            let raw4 = Mmio::bar(&bdf, 4, PAGE)?;
            ensure_eq!(
                bar4_uc.read32(0),
                raw4.read32(0),
                "Blackhole BAR4 word 0, UC"
            );
            ensure_eq!(
                bar4_wc.read32(0),
                raw4.read32(0),
                "Blackhole BAR4 word 0, WC"
            );
        }
        // The last page of each BAR is mappable.
        let last = ctx(
            Mmio::new(&dev, (4 << 36) + bar4_len as u64 - PAGE as u64, PAGE),
            "mmap the last page of RESOURCE2_UC",
        )?;
        let _ = last.read32(0);
    }
    Ok(())
}

/// Windows of every size on both cards: allocated, aimed with
/// CONFIGURE_TLB (the register holds tt-kmd's encoding), mapped, written
/// through; a second window aimed at the same tile reads the pattern back,
/// and so does the emulator.
pub fn windows_every_size() -> TestResult {
    for n in 0..2 {
        let c = chip(n);
        let tile = tensix(c);
        let dev = open(n)?;
        let regs = registers(&dev)?;
        // The reader: a 2 MiB window (both chips have them), mapped WC.
        let reader = ctx(alloc(&dev, 2 * MIB), "allocate the 2 MiB reader")?;
        expect_ok(
            configure(&dev, reader.id, tile, 0),
            "CONFIGURE_TLB the reader",
        )?;
        let rmap = ctx(
            Mmio::new(&dev, reader.mmap_offset_wc, 2 * MIB as usize),
            "mmap the reader WC",
        )?;
        for (k, &size) in window_sizes(n).iter().enumerate() {
            let w = ctx(alloc(&dev, size), &format!("card {n}: allocate {size:#x}"))?;
            expect_ok(
                configure(&dev, w.id, tile, 0),
                &format!("card {n}: CONFIGURE_TLB window {}", w.id),
            )?;
            let (at, words) = expected_register(c, w.id, tile, 0);
            ensure_eq!(
                read_register(&regs, at, words.len()),
                words,
                "card {n}: register of window {}",
                w.id
            );
            let map = ctx(
                Mmio::new(&dev, w.mmap_offset_uc, size as usize),
                &format!("card {n}: mmap window {} UC ({size:#x} bytes)", w.id),
            )?;
            let base = 0x1_0000 + 0x400 * k;
            let pattern: Vec<u32> = (0..16)
                .map(|i| 0x3a00_0000 ^ (n << 20) ^ ((k as u32) << 16) ^ (i * 0x0101))
                .collect();
            for (i, v) in pattern.iter().enumerate() {
                map.write32(base + 4 * i, *v);
            }
            let back: Vec<u32> = (0..16).map(|i| map.read32(base + 4 * i)).collect();
            ensure_eq!(back, pattern, "card {n}: read back through window {}", w.id);
            let other: Vec<u32> = (0..16).map(|i| rmap.read32(base + 4 * i)).collect();
            ensure_eq!(other, pattern, "card {n}: through the reader window");
            let bytes: Vec<u8> = pattern.iter().flat_map(|v| v.to_le_bytes()).collect();
            ensure_eq!(
                noc_read(n, tile, base as u64, 64)?,
                hex(&bytes),
                "card {n}: the tile as the emulator sees it"
            );
            // Re-aim at another address: the window follows.
            let moved = size.max(2 * MIB);
            expect_ok(configure(&dev, w.id, tile, moved), "CONFIGURE_TLB again")?;
            let (at, words) = expected_register(c, w.id, tile, moved);
            ensure_eq!(
                read_register(&regs, at, words.len()),
                words,
                "re-aimed register"
            );
            drop(map);
            expect_ok(free(&dev, w.id), "FREE_TLB")?;
        }
        // The WC offset maps the same window as the UC one.
        let w = ctx(alloc(&dev, 2 * MIB), "allocate")?;
        expect_ok(configure(&dev, w.id, tile, 0), "CONFIGURE_TLB")?;
        let wc = ctx(Mmio::new(&dev, w.mmap_offset_wc, PAGE), "mmap WC")?;
        ensure_eq!(wc.read32(0), rmap.read32(0), "card {n}: WC window word 0");
    }
    Ok(())
}

/// CONFIGURE_TLB: EPERM for a window this file does not hold (free, held
/// by another file, the kernel's own), EINVAL for an id >= 256, an
/// unaligned or too large address and fields wider than the register's.
pub fn configure_refusals() -> TestResult {
    for n in 0..2 {
        let tile = tensix(chip(n));
        let a = open(n)?;
        let b = open(n)?;
        let w = ctx(alloc(&a, 2 * MIB), "allocate")?;
        expect_errno(
            configure(&b, w.id, tile, 0),
            libc::EPERM,
            "window of another file",
        )?;
        expect_errno(configure(&a, w.id + 1, tile, 0), libc::EPERM, "free window")?;
        let (kernel, _) = kernel_window(n);
        expect_errno(
            configure(&a, kernel, tile, 0),
            libc::EPERM,
            "the kernel's window",
        )?;
        expect_errno(configure(&a, 256, tile, 0), libc::EINVAL, "id 256")?;
        expect_errno(
            configure(&a, w.id, tile, MIB),
            libc::EINVAL,
            "1 MiB-aligned address",
        )?;
        let bad = |f: fn(&mut abi::NocTlbConfig)| {
            let mut c = abi::NocTlbConfig::default();
            f(&mut c);
            configure_with(&a, w.id, c)
        };
        expect_errno(bad(|c| c.x_end = 64), libc::EINVAL, "x_end 64")?;
        expect_errno(bad(|c| c.y_start = 64), libc::EINVAL, "y_start 64")?;
        expect_errno(bad(|c| c.ordering = 4), libc::EINVAL, "ordering 4")?;
        expect_errno(bad(|c| c.mcast = 2), libc::EINVAL, "mcast 2")?;
        expect_errno(bad(|c| c.noc = 4), libc::EINVAL, "noc 4")?;
        // Reserved fields are not checked (tt-kmd does not).
        expect_ok(
            bad(|c| {
                c.reserved0 = [1, 2, 3];
                c.reserved1 = [4, 5];
            }),
            "reserved fields set",
        )?;
        if chip(n) == Chip::Wormhole {
            expect_errno(
                configure(&a, w.id, tile, 1 << 36),
                libc::EINVAL,
                "Wormhole address of 37 bits",
            )?;
        } else {
            expect_ok(
                configure(&a, w.id, tile, 1 << 40),
                "Blackhole 64-bit address",
            )?;
        }
        expect_ok(free(&a, w.id), "FREE_TLB")?;
        expect_errno(configure(&a, w.id, tile, 0), libc::EPERM, "after FREE_TLB")?;
    }
    Ok(())
}

/// mmap bounds: EINVAL outside a mapping (past a BAR's end, across two
/// resources, beyond the offset spaces, a window mapping larger than the
/// window or not at its start, the register space in the TLB offsets),
/// EPERM for a window this file does not hold (the kernel's included).
pub fn out_of_range_mmaps() -> TestResult {
    for n in 0..2 {
        let dev = open(n)?;
        let other = open(n)?;
        let sizes = bar_sizes(n);
        let einval = |offset: u64, len: usize, what: &str| {
            expect_errno(Mmio::new(&dev, offset, len).map(|_| ()), libc::EINVAL, what)
        };
        einval(0, sizes[0] as usize + PAGE, "RESOURCE0_UC + 1 page")?;
        einval(sizes[0] - PAGE as u64, 2 * PAGE, "across the end of BAR0")?;
        einval((3 << 36) + sizes[1], PAGE, "past the end of BAR2 (WC)")?;
        einval(
            (1 << 36) - PAGE as u64,
            2 * PAGE,
            "across RESOURCE0_UC and _WC",
        )?;
        einval(8 << 36, PAGE, "offset space 8")?;
        einval(
            (6 << 36) + 0x1F00_0000,
            PAGE,
            "register space through TLB UC",
        )?;
        einval((7 << 36) + TLB_REGS, PAGE, "TLB registers through TLB WC")?;
        let w = ctx(alloc(&dev, 2 * MIB), "allocate")?;
        einval(
            w.mmap_offset_uc,
            2 * MIB as usize + PAGE,
            "larger than the window",
        )?;
        einval(
            w.mmap_offset_uc + PAGE as u64,
            PAGE,
            "not at the window's start",
        )?;
        expect_errno(
            Mmio::new(&other, w.mmap_offset_uc, PAGE).map(|_| ()),
            libc::EPERM,
            "another file's window",
        )?;
        expect_errno(
            Mmio::new(&dev, w.mmap_offset_uc + 2 * MIB, PAGE).map(|_| ()),
            libc::EPERM,
            "a free window",
        )?;
        let (_, at) = kernel_window(n);
        expect_errno(
            Mmio::new(&dev, abi::MMAP_OFFSET_TLB_UC + at, PAGE).map(|_| ()),
            libc::EPERM,
            "the kernel's window",
        )?;
        // A smaller mapping from the window's start is fine.
        let m = ctx(
            Mmio::new(&dev, w.mmap_offset_wc, PAGE),
            "one page of the window",
        )?;
        let _ = m.read32(0);
    }
    Ok(())
}

/// FREE_TLB of a mapped window is EBUSY, as tt-kmd 2.10 answers (its test
/// program checks it): the window stays the file's, aimed and mapped, until
/// the mapping goes; a mapping moved whole by mremap still counts, a
/// partial mremap is EINVAL (windows do not split); the mappings of a window
/// revoked by a reset do not keep its next holder from freeing it.
pub fn mapped_window_cannot_be_freed() -> TestResult {
    for n in 0..2u32 {
        let tile = tensix(chip(n));
        let dev = open(n)?;
        let w = ctx(alloc(&dev, 2 * MIB), "allocate")?;
        expect_ok(configure(&dev, w.id, tile, 0), "CONFIGURE_TLB")?;
        let map = ctx(Mmio::new(&dev, w.mmap_offset_uc, 2 * MIB as usize), "mmap")?;
        map.write32(0x1_0000, 0xfeed_0001);
        expect_errno(free(&dev, w.id), libc::EBUSY, "FREE_TLB of a mapped window")?;
        ensure_eq!(
            map.read32(0x1_0000),
            0xfeed_0001,
            "card {n}: the mapping after EBUSY"
        );
        expect_ok(configure(&dev, w.id, tile, 0), "CONFIGURE_TLB after EBUSY")?;

        // A page moved out of the window: EINVAL (it would split it).
        // SAFETY: a fresh anonymous page to move onto; the call must fail.
        let target = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        ensure!(target != libc::MAP_FAILED, "mmap a target page");
        // SAFETY: moving one page of our own mapping onto our own page.
        let moved = unsafe {
            libc::mremap(
                (map.addr() + PAGE) as *mut libc::c_void,
                PAGE,
                PAGE,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                target,
            )
        };
        let err = io::Error::last_os_error();
        ensure!(
            moved == libc::MAP_FAILED && err.raw_os_error() == Some(libc::EINVAL),
            "card {n}: mremap of one page of a window: {}",
            if moved == libc::MAP_FAILED {
                err.to_string()
            } else {
                "succeeded".into()
            }
        );
        // The whole window moved: still mapped, still EBUSY.
        // SAFETY: moving all of our own mapping to a place the kernel picks.
        let whole = unsafe {
            libc::mremap(
                map.addr() as *mut libc::c_void,
                2 * MIB as usize,
                2 * MIB as usize,
                libc::MREMAP_MAYMOVE,
            )
        };
        ensure!(
            whole != libc::MAP_FAILED,
            "card {n}: mremap of a whole window: {}",
            io::Error::last_os_error()
        );
        std::mem::forget(map);
        expect_errno(free(&dev, w.id), libc::EBUSY, "FREE_TLB of a moved mapping")?;
        // SAFETY: the moved mapping is ours and used no more.
        ensure!(
            unsafe { libc::munmap(whole, 2 * MIB as usize) } == 0,
            "munmap"
        );
        expect_ok(free(&dev, w.id), "FREE_TLB once unmapped")?;
        expect_errno(
            configure(&dev, w.id, tile, 0),
            libc::EPERM,
            "CONFIGURE_TLB after FREE_TLB",
        )?;

        // A mapping a reset revoked counts for nobody: the window's next
        // holder frees it although the fenced file's VMA is still there.
        // (On the Wormhole, where CONFIG_WRITE resets nothing else.)
        if n != 0 {
            continue;
        }
        let stale = open(n)?;
        let w = ctx(alloc(&stale, 2 * MIB), "allocate")?;
        let stale_map = ctx(Mmio::new(&stale, w.mmap_offset_uc, PAGE), "mmap")?;
        let resetter = open(n)?;
        config_write_reset(&resetter)?;
        let again = ctx(alloc(&resetter, 2 * MIB), "allocate the freed window")?;
        ensure_eq!(again.id, w.id, "card {n}: the fenced file's window");
        expect_ok(
            free(&resetter, again.id),
            "FREE_TLB beside a revoked mapping",
        )?;
        drop(stale_map);
    }
    Ok(())
}

/// A window changes hands through close and kill -9 of its holder: a
/// mapping keeps its file (so close with the mapping alive still maps the
/// window, and no other file gets it), the window is freed once the last
/// mapping and descriptor go, and its next holder finds its register reset
/// and sees only what it aims the window at.
pub fn next_holder_sees_only_its_target() -> TestResult {
    for n in 0..2 {
        let c = chip(n);
        let tile = tensix(c);
        let regs_dev = open(n)?;
        let regs = registers(&regs_dev)?;
        // Close with a live mapping: the mapping holds the file.
        let dev = open(n)?;
        let w = ctx(alloc(&dev, 2 * MIB), "allocate")?;
        expect_ok(configure(&dev, w.id, tile, 0), "CONFIGURE_TLB")?;
        let map = ctx(Mmio::new(&dev, w.mmap_offset_uc, 2 * MIB as usize), "mmap")?;
        drop(dev);
        map.write32(0x1_0100, 0xc105_ed00 | n);
        ensure_eq!(
            map.read32(0x1_0100),
            0xc105_ed00 | n,
            "card {n}: after close"
        );
        let probe = open(n)?;
        let taken = ctx(alloc(&probe, 2 * MIB), "allocate beside the closed file")?;
        ensure!(
            taken.id != w.id,
            "card {n}: window {} handed on while mapped",
            w.id
        );
        expect_ok(free(&probe, taken.id), "FREE_TLB")?;
        drop(map);
        // kill -9 of a holder with a mapping.
        let mut holder = spawn("holder", &[], move |link| {
            let dev = open(n)?;
            let w = ctx(alloc(&dev, 2 * MIB), "allocate")?;
            expect_ok(configure(&dev, w.id, tile, 0), "CONFIGURE_TLB")?;
            let map = ctx(Mmio::new(&dev, w.mmap_offset_uc, 2 * MIB as usize), "mmap")?;
            map.write32(0x1_0200, 0xdead_0000 | n);
            link.send(&format!("{}", w.id))?;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        })?;
        let killed_id: u32 = holder.recv()?.parse().map_err(|_| "bad id".to_string())?;
        ensure_eq!(
            killed_id,
            w.id,
            "card {n}: the holder got the closed file's window"
        );
        let status = holder.kill_and_reap()?;
        ensure!(
            died_of(status, libc::SIGKILL),
            "holder: {}",
            describe_status(status)
        );
        // The next holder: the same window, reset, then aimed elsewhere.
        let next = open(n)?;
        let got = ctx(alloc(&next, 2 * MIB), "allocate after the kill")?;
        ensure_eq!(got.id, w.id, "card {n}: the killed holder's window");
        let (at, words) = expected_register(c, got.id, (0, 0), 0);
        ensure_eq!(
            read_register(&regs, at, words.len()),
            vec![0; words.len()],
            "card {n}: register of a window that changed hands"
        );
        let map = ctx(
            Mmio::new(&next, got.mmap_offset_uc, 2 * MIB as usize),
            "mmap",
        )?;
        let elsewhere = (tile.0 + 1, tile.1);
        expect_ok(
            configure(&next, got.id, elsewhere, 0),
            "CONFIGURE_TLB elsewhere",
        )?;
        map.write32(0x1_0200, 0x0e11_0000 | n);
        ensure_eq!(
            noc_read(n, tile, 0x1_0200, 4)?,
            hex(&(0xdead_0000 | n).to_le_bytes()),
            "card {n}: the killed holder's word is untouched"
        );
        ensure_eq!(
            noc_read(n, elsewhere, 0x1_0200, 4)?,
            hex(&(0x0e11_0000 | n).to_le_bytes()),
            "card {n}: the next holder's word is at its own target"
        );
    }
    Ok(())
}

/// Mappings are not copied by fork (VM_DONTCOPY): a child touching the
/// parent's BAR and window addresses faults with SIGSEGV (nothing mapped
/// there), and the parent's mappings still work.
pub fn fork_does_not_copy() -> TestResult {
    let n = 0;
    let dev = open(n)?;
    let bar = ctx(Mmio::new(&dev, 0, 2 * PAGE), "mmap BAR0")?;
    let w = ctx(alloc(&dev, MIB), "allocate")?;
    expect_ok(configure(&dev, w.id, tensix(chip(n)), 0), "CONFIGURE_TLB")?;
    let win = ctx(
        Mmio::new(&dev, w.mmap_offset_uc, MIB as usize),
        "mmap window",
    )?;
    win.write32(0x1_0000, 0x00f0_4c00);
    for (what, addr) in [("BAR", bar.addr()), ("window", win.addr() + 0x1_0000)] {
        let child = spawn("forked", &[], move |_| {
            // SAFETY: an address the parent mapped; the child expects to die.
            let _ = unsafe { std::ptr::read_volatile(addr as *const u32) };
            Ok(())
        })?;
        let status = child.status()?;
        ensure!(
            died_of(status, libc::SIGSEGV),
            "child touching the parent's {what} mapping: {}, expected SIGSEGV",
            describe_status(status)
        );
    }
    ensure_eq!(win.read32(0x1_0000), 0x00f0_4c00, "the parent's window");
    Ok(())
}

/// Unbind zaps every mapping of every file before the BARs go: processes
/// holding a BAR mapping and a window mapping of card 0 die of SIGBUS at
/// their next access after the unbind. The card is bound again after.
pub fn sigbus_after_unbind() -> TestResult {
    let n = 0u32;
    let bdf = bdf(n as usize)?;
    let tile = tensix(chip(n));
    let mut children = Vec::new();
    for kind in ["bar", "window"] {
        let mut child = spawn(kind, &[], move |link| {
            let dev = open(n)?;
            let map = if kind == "bar" {
                ctx(Mmio::new(&dev, 1 << 36, PAGE), "mmap RESOURCE0_WC")?
            } else {
                let w = ctx(alloc(&dev, 16 * MIB), "allocate")?;
                expect_ok(configure(&dev, w.id, tile, 0), "CONFIGURE_TLB")?;
                ctx(Mmio::new(&dev, w.mmap_offset_wc, 16 * MIB as usize), "mmap")?
            };
            let _ = map.read32(0);
            link.send("mapped")?;
            ensure_eq!(link.recv()?, "touch", "command");
            let _ = map.read32(0);
            link.send("survived")?;
            Ok(())
        })?;
        child.expect("mapped")?;
        children.push(child);
    }
    sysfs_write(UNBIND, &bdf)?;
    let mut outcome = Ok(());
    for child in children {
        child.send("touch")?;
        let status = child.status()?;
        if !died_of(status, libc::SIGBUS) && outcome.is_ok() {
            outcome = Err(format!(
                "access after unbind: {}, expected SIGBUS",
                describe_status(status)
            ));
        }
    }
    sysfs_write(BIND, &bdf)?;
    wait_path(&node(n), true)?;
    outcome
}

/// `/proc/driver/tenstorrent/N/tlb` lists each window in use with its
/// holder's pid and comm, its size and where it points, read back from its
/// register: set by CONFIGURE_TLB, or by the holder writing the register
/// itself as UMD does, or the reset value of a window nobody aimed; and
/// drops it once freed.
pub fn proc_tlb_view() -> TestResult {
    for n in 0..2 {
        let path = format!("/proc/driver/tenstorrent/{n}/tlb");
        let dev = open(n)?;
        let tile = tensix(chip(n));
        let a = ctx(alloc(&dev, 2 * MIB), "allocate")?;
        let b = ctx(alloc(&dev, 2 * MIB), "allocate")?;
        let c = ctx(alloc(&dev, 2 * MIB), "allocate")?;
        expect_ok(configure(&dev, a.id, tile, 4 * MIB), "CONFIGURE_TLB")?;
        // c aimed the way UMD does it: its register written directly.
        let regs = registers(&dev)?;
        let (at, words) = expected_register(chip(n), c.id, tile, 6 * MIB);
        for (i, w) in words.iter().enumerate() {
            regs.write32(at - TLB_REGS as usize + 4 * i, *w);
        }
        let text = ctx(std::fs::read_to_string(&path), &path)?;
        let comm = ctx(std::fs::read_to_string("/proc/self/comm"), "comm")?;
        let comm = comm.trim_end();
        let pid = getpid();
        let (x, y) = tile;
        let lines = [
            format!("{} 0x200000 {pid} {comm} {x},{y} 0x400000", a.id),
            format!("{} 0x200000 {pid} {comm} 0,0 0x0", b.id),
            format!("{} 0x200000 {pid} {comm} {x},{y} 0x600000", c.id),
        ];
        ensure!(
            lines.iter().all(|want| text.lines().any(|l| l == want)),
            "card {n}: {path} is {text:?}, expected lines {lines:?}"
        );
        expect_ok(free(&dev, a.id), "FREE_TLB")?;
        let text = ctx(std::fs::read_to_string(&path), &path)?;
        ensure!(
            !text.lines().any(|l| l.starts_with(&format!("{} ", a.id))),
            "card {n}: freed window {} still listed: {text:?}",
            a.id
        );
    }
    Ok(())
}

/// A window mapping is one piece (tt-kmd 2.10's test program checks it):
/// munmap of one of its pages fails with EINVAL and the window stays
/// mapped; a BAR mapping can be unmapped in part.
pub fn window_mappings_do_not_split() -> TestResult {
    for n in 0..2 {
        let dev = open(n)?;
        let w = ctx(alloc(&dev, 2 * MIB), "allocate")?;
        let map = ctx(Mmio::new(&dev, w.mmap_offset_uc, 2 * MIB as usize), "mmap")?;
        for page in [0, 1, 511] {
            // SAFETY: one page of our own mapping; the call must fail.
            let rc = unsafe { libc::munmap((map.addr() + page * PAGE) as *mut libc::c_void, PAGE) };
            let err = io::Error::last_os_error();
            ensure!(
                rc != 0 && err.raw_os_error() == Some(libc::EINVAL),
                "card {n}: munmap of page {page} of a window: {}",
                if rc == 0 {
                    "succeeded".to_string()
                } else {
                    err.to_string()
                }
            );
        }
        let _ = map.read32(PAGE);
        let bar = ctx(Mmio::new(&dev, 0, 4 * PAGE), "mmap BAR0")?;
        // SAFETY: the second page of our own BAR mapping, not used again.
        let rc = unsafe { libc::munmap((bar.addr() + PAGE) as *mut libc::c_void, PAGE) };
        ensure!(
            rc == 0,
            "card {n}: partial munmap of a BAR mapping: {}",
            io::Error::last_os_error()
        );
        let _ = bar.read32(0);
        let _ = bar.read32(2 * PAGE);
    }
    Ok(())
}

/// The x86 PAT memory-type reservations (debugfs, kernels with PAT only).
const PAT_MEMTYPES: &str = "/sys/kernel/debug/x86/pat_memtype_list";

/// One reservation of `PAT_MEMTYPES`: `start..end` and its type.
#[derive(Debug)]
struct MemType {
    start: u64,
    end: u64,
    kind: String,
}

/// Parses `PAT: [mem 0xSTART-0xEND] TYPE` lines (END exclusive).
fn pat_memtypes(text: &str) -> Vec<MemType> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("PAT: [mem ")?;
            let (range, kind) = rest.split_once("] ")?;
            let (start, end) = range.split_once('-')?;
            Some(MemType {
                start: hex(start)?,
                end: hex(end)?,
                kind: kind.trim().to_string(),
            })
        })
        .collect()
}

/// The physical address of BAR `bar` of card `n` (sysfs `resource`).
fn bar_start(n: u32, bar: usize) -> Result<u64, String> {
    let path = format!("/sys/bus/pci/devices/{}/resource", bdf(n as usize)?);
    let text = ctx(std::fs::read_to_string(&path), &path)?;
    let line = text
        .lines()
        .nth(bar)
        .ok_or(format!("{path}: no line {bar}"))?;
    let start = line.split_whitespace().next().unwrap_or("");
    u64::from_str_radix(start.trim_start_matches("0x"), 16)
        .map_err(|e| format!("{path}: {line:?}: {e}"))
}

/// A window's memory type: its first mapping since it was taken fixes it
/// until it is freed (a mapping of the other type meanwhile is `EBUSY`,
/// as x86 gives a page one type and the second would silently get the
/// first's), and the next holder starts afresh. On a kernel with PAT
/// (Debian's, in the stock layer) a window mapped write-combined has
/// write-combining reserved for exactly its range until it is freed, a
/// window mapped uncached has no reservation (uncached is the default),
/// and the kernel's own mappings cover no window userspace may map (the
/// uncached type they reserve would override userspace's WC).
pub fn window_memory_types() -> TestResult {
    let has_pat = std::path::Path::new(PAT_MEMTYPES).exists();
    if !has_pat {
        println!("# no {PAT_MEMTYPES} (kernel without PAT): memory types not read back");
    }
    // The reservations now, on a kernel with PAT.
    let memtypes = || -> Result<Option<Vec<MemType>>, String> {
        if !has_pat {
            return Ok(None);
        }
        let text = ctx(std::fs::read_to_string(PAT_MEMTYPES), PAT_MEMTYPES)?;
        Ok(Some(pat_memtypes(&text)))
    };
    let overlapping = |types: &[MemType], start: u64, len: u64| -> Vec<String> {
        types
            .iter()
            .filter(|t| t.start < start + len && start < t.end)
            .map(|t| format!("{:#x}-{:#x} {}", t.start, t.end, t.kind))
            .collect()
    };
    for n in 0..2u32 {
        let dev = open(n)?;
        let bar0 = bar_start(n, 0)?;
        let phys = |w: &abi::AllocateTlbOut| bar0 + (w.mmap_offset_uc - abi::MMAP_OFFSET_TLB_UC);
        let size = 2 * MIB;

        let a = ctx(alloc(&dev, size), "allocate window a")?;
        let wc = ctx(
            Mmio::new(&dev, a.mmap_offset_wc, size as usize),
            "mmap window a WC",
        )?;
        let _ = wc.read32(0);
        expect_errno(
            Mmio::new(&dev, a.mmap_offset_uc, PAGE).map(|_| ()),
            libc::EBUSY,
            &format!("card {n}: UC mapping of window {} mapped WC", a.id),
        )?;
        let again = ctx(
            Mmio::new(&dev, a.mmap_offset_wc, PAGE),
            "a second WC mapping of window a",
        )?;
        let _ = again.read32(0);

        let b = ctx(alloc(&dev, size), "allocate window b")?;
        let uc = ctx(
            Mmio::new(&dev, b.mmap_offset_uc, size as usize),
            "mmap window b UC",
        )?;
        let _ = uc.read32(0);
        expect_errno(
            Mmio::new(&dev, b.mmap_offset_wc, PAGE).map(|_| ()),
            libc::EBUSY,
            &format!("card {n}: WC mapping of window {} mapped UC", b.id),
        )?;

        if let Some(types) = memtypes()? {
            let on_a = overlapping(&types, phys(&a), size);
            ensure_eq!(
                on_a,
                vec![format!(
                    "{:#x}-{:#x} write-combining",
                    phys(&a),
                    phys(&a) + size
                )],
                "card {n}: reservations over window {} (mapped WC)",
                a.id
            );
            let on_b = overlapping(&types, phys(&b), size);
            ensure!(
                on_b.is_empty(),
                "card {n}: window {} (mapped UC) has reservations {on_b:?}",
                b.id
            );
            // Every window before the kernel's own is userspace's.
            let (_, kernel_at) = kernel_window(n);
            let kernel: Vec<String> = overlapping(&types, bar0, kernel_at)
                .into_iter()
                .filter(|t| !t.ends_with("write-combining"))
                .collect();
            ensure!(
                kernel.is_empty(),
                "card {n}: uncached reservations over userspace's windows: {kernel:?}"
            );
        }

        // Freed: the reservation goes, and the next holder picks anew.
        let a_phys = phys(&a);
        drop(again);
        drop(wc);
        expect_ok(free(&dev, a.id), "FREE_TLB window a")?;
        if let Some(types) = memtypes()? {
            let left = overlapping(&types, a_phys, size);
            ensure!(
                left.is_empty(),
                "card {n}: reservations left over freed window {}: {left:?}",
                a.id
            );
        }
        let mut taken = Vec::new();
        let again = loop {
            let w = ctx(alloc(&dev, size), "allocate until window a comes back")?;
            if w.id == a.id {
                break w;
            }
            ensure!(
                taken.len() < 300,
                "card {n}: window {} never came back",
                a.id
            );
            taken.push(w);
        };
        let m = ctx(
            Mmio::new(&dev, again.mmap_offset_uc, PAGE),
            "mmap the window again, UC, as its next holder",
        )?;
        let _ = m.read32(0);
        drop(uc);
    }
    Ok(())
}

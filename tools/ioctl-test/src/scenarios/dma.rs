//! DMA: ALLOCATE_DMA_BUF, FREE_DMA_BUF, PIN_PAGES and UNPIN_PAGES on both
//! emulated cards. Every address the driver hands out is checked from the
//! card's side: the emulator's DMA (`dma-read`/`dma-write` at the bus
//! address) and its NOC (`noc-read`/`noc-write` from the PCIe tile at the
//! NOC address, through the outbound iATU the driver programmed) must reach
//! the very bytes userspace sees. Expected values are tt-kmd 2.10's
//! (memory.c: MMAP_OFFSET_DMA_BUF, the top-down and bottom-up placement in
//! the outbound window; ioctl.h for the errors).

use std::io;
use std::os::fd::AsRawFd;

use tt_arbiter::{abi, Device};

use crate::card::{hex, Control, Mmio};
use crate::util::*;

const PAGE: usize = 4096;
const MMAP_OFFSET_DMA_BUF: u64 = 0xF00_0000_0000;

/// Card `n`'s PCIe tile, where the NOC meets the host (tt-kmd's
/// PCIE_NOC_X/Y; Blackhole's tile in use in the emulator).
fn pcie_tile(n: u32) -> (u16, u16) {
    if n == 0 {
        (0, 3)
    } else {
        (2, 0)
    }
}

/// The outbound window's NOC base and its size (tt-kmd 2.10:
/// wormhole.c/blackhole.c `noc_pcie_offset` and `noc_dma_limit`).
fn noc_window(n: u32) -> (u64, u64) {
    if n == 0 {
        (0x8_0000_0000, 0xFFFE_0000)
    } else {
        (1 << 60, 1 << 58)
    }
}

fn allocate(
    dev: &impl AsRawFd,
    index: u8,
    size: u32,
    flags: u8,
) -> io::Result<abi::AllocateDmaBufOut> {
    let mut arg = abi::AllocateDmaBuf::default();
    arg.input.requested_size = size;
    arg.input.buf_index = index;
    arg.input.flags = flags;
    ioctl(dev, abi::IOCTL_ALLOCATE_DMA_BUF, &mut arg)?;
    Ok(arg.output)
}

/// PIN_PAGES with room for the extended output: (bus address, NOC address).
fn pin(dev: &impl AsRawFd, addr: usize, size: u64, flags: u32) -> io::Result<(u64, u64)> {
    #[repr(C)]
    #[derive(Default)]
    struct Extended {
        input: abi::PinPagesIn,
        output: abi::PinPagesOutExtended,
    }
    let mut arg = Extended::default();
    arg.input.output_size_bytes = 16;
    arg.input.flags = flags;
    arg.input.virtual_address = addr as u64;
    arg.input.size = size;
    ioctl(dev, abi::IOCTL_PIN_PAGES, &mut arg)?;
    Ok((arg.output.physical_address, arg.output.noc_address))
}

fn unpin(dev: &impl AsRawFd, addr: usize, size: u64) -> io::Result<i32> {
    let mut arg = abi::UnpinPages::default();
    arg.input.virtual_address = addr as u64;
    arg.input.size = size;
    ioctl(dev, abi::IOCTL_UNPIN_PAGES, &mut arg)
}

/// Whether the VM put the cards behind an IOMMU (`tools/vm/run --iommu`).
fn behind_iommu() -> bool {
    std::env::var("TT_IOMMU").is_ok_and(|v| v == "1")
}

/// Card `n`'s `dma/usage` line.
fn usage(n: u32) -> Result<String, String> {
    let path = format!("/sys/class/tenstorrent/tenstorrent!{n}/dma/usage");
    Ok(sysfs(&path)?.trim_end().to_string())
}

fn expect_usage(n: u32, want: &[&str], when: &str) -> TestResult {
    let line = usage(n)?;
    for field in want {
        ensure!(
            line.split(' ').any(|f| f == *field),
            "card {n} {when}: dma/usage is {line:?}, expected {field}"
        );
    }
    Ok(())
}

/// Anonymous memory of `pages` pages, touched so that each page exists.
struct Anon {
    addr: usize,
    len: usize,
}

impl Anon {
    fn new(pages: usize) -> Result<Anon, String> {
        let len = pages * PAGE;
        // SAFETY: a new private anonymous mapping.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        ensure!(
            base != libc::MAP_FAILED,
            "mmap: {}",
            io::Error::last_os_error()
        );
        let anon = Anon {
            addr: base as usize,
            len,
        };
        for p in 0..pages {
            anon.write32(p * PAGE, 0);
        }
        Ok(anon)
    }

    fn page(&self, p: usize) -> usize {
        self.addr + p * PAGE
    }

    fn read32(&self, offset: usize) -> u32 {
        assert!(offset + 4 <= self.len);
        // SAFETY: inside the mapping, aligned.
        unsafe { std::ptr::read_volatile((self.addr + offset) as *const u32) }
    }

    fn write32(&self, offset: usize, value: u32) {
        assert!(offset + 4 <= self.len);
        // SAFETY: inside the mapping, aligned.
        unsafe { std::ptr::write_volatile((self.addr + offset) as *mut u32, value) }
    }
}

impl Drop for Anon {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// The card reads `len` bytes at bus address `addr`.
fn card_reads(ctl: &mut Control, addr: u64, len: usize) -> Result<String, String> {
    ctl.command(&format!("dma-read {addr:#x} {len}"))
}

/// The card writes `value` (little endian) at bus address `addr`.
fn card_writes(ctl: &mut Control, addr: u64, value: u32) -> TestResult {
    ctl.command(&format!(
        "dma-write {addr:#x} {}",
        hex(&value.to_le_bytes())
    ))
    .map(|_| ())
}

/// A buffer is what the card reaches at its bus address, both ways, with
/// the sizes, offsets and errors of tt-kmd 2.10; it lives until close.
pub fn buffers_reach_the_card() -> TestResult {
    for n in 0..2u32 {
        let mut ctl = Control::open(n as usize)?;
        let dev = open(n)?;
        let info = ctx(dev.device_info(), "GET_DEVICE_INFO")?;
        ensure_eq!(
            info.max_dma_buf_size_log2,
            28,
            "card {n}: max_dma_buf_size_log2"
        );
        let size = 16 * PAGE as u32;
        let out = expect_ok(allocate(&dev, 0, size, 0), "ALLOCATE_DMA_BUF")?;
        ensure_eq!(
            out.mapping_offset,
            MMAP_OFFSET_DMA_BUF,
            "card {n}: mapping_offset"
        );
        ensure_eq!(out.size, size, "card {n}: size");
        ensure_eq!(out.noc_address, 0, "card {n}: noc_address without NOC_DMA");
        ensure!(
            out.physical_address != 0 && out.physical_address % PAGE as u64 == 0,
            "card {n}: physical_address {:#x}",
            out.physical_address
        );
        let map = ctx(Mmio::new(&dev, out.mapping_offset, size as usize), "mmap")?;
        ensure_eq!(map.read32(0x3000), 0, "card {n}: a new buffer is zeroed");
        let value = 0x1234_5600 + n;
        map.write32(0x100, value);
        ensure_eq!(
            card_reads(&mut ctl, out.physical_address + 0x100, 4)?,
            hex(&value.to_le_bytes()),
            "card {n}: what the card reads of the buffer"
        );
        card_writes(&mut ctl, out.physical_address + 0x2000, 0xdead_beef)?;
        ensure_eq!(
            map.read32(0x2000),
            0xdead_beef,
            "card {n}: the card's write"
        );
        // Any page of it, from a page inside it.
        let part = ctx(
            Mmio::new(&dev, out.mapping_offset + 0x2000, PAGE),
            "mmap of a page inside the buffer",
        )?;
        ensure_eq!(part.read32(0), 0xdead_beef, "card {n}: the inner mapping");
        expect_usage(n, &["buffers=1", "buffer_bytes=65536"], "with one buffer")?;

        // Errors, state intact.
        expect_errno(allocate(&dev, 0, 4096, 0), libc::EINVAL, "index 0 again")?;
        for bad in [0, 4097, (1 << 28) + 4096] {
            expect_errno(
                allocate(&dev, 1, bad, 0),
                libc::EINVAL,
                &format!("size {bad}"),
            )?;
        }
        expect_errno(allocate(&dev, 1, 4096, 0x1), libc::EINVAL, "unknown flag 1")?;
        expect_errno(
            allocate(&dev, 1, 4096, 0x80),
            libc::EINVAL,
            "unknown flag 0x80",
        )?;
        // 256 MiB in one piece is more than the VM's kernel can find.
        expect_errno(allocate(&dev, 1, 1 << 28, 0), libc::ENOMEM, "256 MiB")?;
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), abi::IOCTL_FREE_DMA_BUF, 0),
            libc::EINVAL,
            "FREE_DMA_BUF",
        )?;
        let too_long = Mmio::new(&dev, out.mapping_offset, size as usize + PAGE);
        expect_errno(too_long, libc::EINVAL, "mmap past the buffer")?;
        let absent = Mmio::new(&dev, out.mapping_offset + (5 << 32), PAGE);
        expect_errno(absent, libc::EINVAL, "mmap of a buffer never allocated")?;
        let other = open(n)?;
        let theirs = Mmio::new(&other, out.mapping_offset, PAGE);
        expect_errno(theirs, libc::EINVAL, "mmap of another file's buffer")?;
        // The other file has an index space of its own.
        let second = expect_ok(allocate(&other, 0, 4096, 0), "index 0 on another file")?;
        ensure!(
            second.physical_address != out.physical_address,
            "card {n}: two files' buffers at the same address"
        );
        drop(other);
        expect_usage(n, &["buffers=1"], "after the other file closed")?;
        ensure_eq!(
            map.read32(0x2000),
            0xdead_beef,
            "card {n}: the buffer after errors"
        );
        drop((map, part));
        drop(dev);
        expect_usage(n, &["buffers=0", "buffer_bytes=0"], "after close")?;
    }
    Ok(())
}

/// A buffer asked for with NOC_DMA gets a NOC address the chip reaches it
/// at (top-down in the outbound window, one region each, 16 per card);
/// close gives the regions back and the chip reaches nothing there.
pub fn noc_dma_buffers() -> TestResult {
    for n in 0..2u32 {
        let mut ctl = Control::open(n as usize)?;
        let (x, y) = pcie_tile(n);
        let (base, size) = noc_window(n);
        let dev = open(n)?;
        let first = expect_ok(allocate(&dev, 0, 2 * PAGE as u32, 2), "NOC_DMA buffer")?;
        ensure_eq!(
            first.noc_address,
            base + size - 2 * PAGE as u64,
            "card {n}: the first NOC address (top of the window)"
        );
        let map = ctx(Mmio::new(&dev, first.mapping_offset, 2 * PAGE), "mmap")?;
        ctl.command(&format!(
            "noc-write {x} {y} {:#x} {}",
            first.noc_address + 0x1010,
            hex(&0x1122_3344u32.to_le_bytes())
        ))?;
        ensure_eq!(
            map.read32(0x1010),
            0x1122_3344,
            "card {n}: the chip's NOC write"
        );
        map.write32(0x20, 0x5566_7788);
        ensure_eq!(
            ctl.command(&format!(
                "noc-read {x} {y} {:#x} 4",
                first.noc_address + 0x20
            ))?,
            hex(&0x5566_7788u32.to_le_bytes()),
            "card {n}: the chip's NOC read"
        );
        let second = expect_ok(allocate(&dev, 1, PAGE as u32, 2), "second NOC_DMA buffer")?;
        ensure_eq!(
            second.noc_address,
            first.noc_address - PAGE as u64,
            "card {n}: the second NOC address (right below the first)"
        );
        expect_usage(n, &["outbound_regions=2/16"], "with two NOC buffers")?;
        for index in 2..16 {
            expect_ok(allocate(&dev, index, PAGE as u32, 2), "NOC_DMA buffer")?;
        }
        expect_errno(
            allocate(&dev, 16, PAGE as u32, 2),
            libc::ENOSPC,
            "a 17th region",
        )?;
        expect_ok(
            allocate(&dev, 16, PAGE as u32, 0),
            "a plain buffer meanwhile",
        )?;
        expect_usage(n, &["outbound_regions=16/16", "buffers=17"], "full")?;
        drop(map);
        drop(dev);
        expect_usage(n, &["outbound_regions=0/16", "buffers=0"], "after close")?;
        ensure_eq!(
            ctl.command(&format!(
                "noc-read {x} {y} {:#x} 4",
                first.noc_address + 0x20
            ))?,
            "ffffffff",
            "card {n}: the freed buffer's NOC address after close"
        );
    }
    Ok(())
}

/// Pinned pages are what the card reaches at the address PIN_PAGES gave,
/// with NOC_DMA from the bottom of the outbound window; the errors and
/// output rules are tt-kmd 2.10's; UNPIN_PAGES and close unpin.
pub fn pinned_pages() -> TestResult {
    for n in 0..2u32 {
        let mut ctl = Control::open(n as usize)?;
        let (x, y) = pcie_tile(n);
        let (base, _) = noc_window(n);
        let dev = open(n)?;
        let iommu = behind_iommu();
        let translated = format!("translated={}", u8::from(iommu));
        expect_usage(n, &[&translated], "(the VM's IOMMU)")?;
        let anon = Anon::new(6)?;
        let (phys, noc) = expect_ok(pin(&dev, anon.page(0), PAGE as u64, 0), "PIN_PAGES")?;
        ensure_eq!(noc, 0, "card {n}: noc_address without NOC_DMA");
        card_writes(&mut ctl, phys + 0x40, 0xcafe_0000 + n)?;
        ensure_eq!(
            anon.read32(0x40),
            0xcafe_0000 + n,
            "card {n}: the card's write"
        );
        anon.write32(0x80, 0x0bad_f00d);
        ensure_eq!(
            card_reads(&mut ctl, phys + 0x80, 4)?,
            hex(&0x0bad_f00du32.to_le_bytes()),
            "card {n}: what the card reads of the pinned page"
        );
        expect_errno(
            pin(&dev, anon.page(0), PAGE as u64, 0),
            libc::EEXIST,
            "the same pin",
        )?;
        let (_, noc) = expect_ok(
            pin(&dev, anon.page(1), PAGE as u64, abi::PIN_PAGES_NOC_DMA),
            "PIN_PAGES with NOC_DMA",
        )?;
        ensure_eq!(
            noc,
            base,
            "card {n}: first NOC address of a pin (bottom-up)"
        );
        ctl.command(&format!(
            "noc-write {x} {y} {:#x} {}",
            noc + 8,
            hex(&0x600d_cafeu32.to_le_bytes())
        ))?;
        ensure_eq!(
            anon.read32(PAGE + 8),
            0x600d_cafe,
            "card {n}: NOC write to a pin"
        );
        expect_usage(
            n,
            &["pins=2", "pinned_pages=2", "outbound_regions=1/16"],
            "two pins",
        )?;

        // Bad input, state intact.
        let page = PAGE as u64;
        expect_errno(
            pin(&dev, anon.page(2), page, 0x10),
            libc::EINVAL,
            "flag 0x10",
        )?;
        expect_errno(
            pin(&dev, anon.page(2) + 8, page, 0),
            libc::EINVAL,
            "unaligned",
        )?;
        expect_errno(pin(&dev, anon.page(2), 0, 0), libc::EINVAL, "size 0")?;
        expect_errno(pin(&dev, anon.page(2), 100, 0), libc::EINVAL, "size 100")?;
        let read_only = pin(&dev, anon.page(4), page, abi::PIN_PAGES_READ_ONLY);
        if iommu {
            // The card may read the page, not write it.
            let (ro, _) = expect_ok(read_only, "READ_ONLY behind an IOMMU")?;
            anon.write32(4 * PAGE, 0x0eee_0000 + n);
            ensure_eq!(
                card_reads(&mut ctl, ro, 4)?,
                hex(&(0x0eee_0000 + n).to_le_bytes()),
                "card {n}: the card reads a READ_ONLY pin"
            );
            ensure!(
                card_writes(&mut ctl, ro, 0xbad).is_err(),
                "card {n}: the card wrote to a READ_ONLY pin"
            );
            ensure_eq!(
                anon.read32(4 * PAGE),
                0x0eee_0000 + n,
                "card {n}: READ_ONLY page"
            );
            expect_ok(
                unpin(&dev, anon.page(4), page),
                "UNPIN_PAGES of the READ_ONLY pin",
            )?;
            // Scattered pages are one IOVA range.
            let (two, _) = expect_ok(pin(&dev, anon.page(4), 2 * page, 0), "two pages")?;
            card_writes(&mut ctl, two + page, 0x2222_0000 + n)?;
            ensure_eq!(
                anon.read32(5 * PAGE),
                0x2222_0000 + n,
                "card {n}: second page"
            );
            expect_ok(
                unpin(&dev, anon.page(4), 2 * page),
                "UNPIN_PAGES of two pages",
            )?;
        } else {
            expect_errno(read_only, libc::EOPNOTSUPP, "READ_ONLY without an IOMMU")?;
        }
        // SAFETY: page 3 of our own mapping.
        unsafe { libc::mprotect(anon.page(3) as *mut libc::c_void, PAGE, libc::PROT_NONE) };
        expect_errno(
            pin(&dev, anon.page(3), page, 0),
            libc::EFAULT,
            "a PROT_NONE page",
        )?;
        // GUP pins page 2 and stops at page 3: the driver asks again for
        // the rest and answers GUP's reason, with page 2 unpinned again
        // (seen failing before: EINVAL, tt-kmd's answer, which does not say
        // what was wrong).
        expect_errno(
            pin(&dev, anon.page(2), 2 * page, 0),
            libc::EFAULT,
            "a mapped page, then a PROT_NONE one",
        )?;
        expect_errno(
            unpin(&dev, anon.page(0), 2 * page),
            libc::EINVAL,
            "unpin, wrong size",
        )?;
        expect_errno(
            unpin(&dev, anon.page(2), page),
            libc::EINVAL,
            "unpin, never pinned",
        )?;
        expect_errno(unpin(&dev, anon.page(0), 0), libc::EINVAL, "unpin, size 0")?;
        expect_usage(n, &["pins=2", "pinned_pages=2"], "after the refusals")?;
        card_writes(&mut ctl, phys + 0x44, 0x7777_0000 + n)?;
        ensure_eq!(
            anon.read32(0x44),
            0x7777_0000 + n,
            "card {n}: the pin after errors"
        );

        // The caller's output is cleared first, even when the call fails.
        let mut buf = vec![0xFFu8; 24 + 64];
        buf[..4].copy_from_slice(&64u32.to_ne_bytes());
        buf[4..8].copy_from_slice(&0x10u32.to_ne_bytes());
        buf[8..16].copy_from_slice(&(anon.page(2) as u64).to_ne_bytes());
        buf[16..24].copy_from_slice(&page.to_ne_bytes());
        let r = ioctl_addr(
            dev.as_raw_fd(),
            abi::IOCTL_PIN_PAGES,
            buf.as_mut_ptr() as usize,
        );
        expect_errno(r, libc::EINVAL, "flag 0x10 with 64 bytes of output")?;
        ensure!(
            buf[24..].iter().all(|&b| b == 0),
            "card {n}: the output after a failed PIN_PAGES is not cleared"
        );

        expect_ok(
            unpin(&dev, anon.page(0), page + 7),
            "UNPIN_PAGES (size cut to pages)",
        )?;
        expect_errno(unpin(&dev, anon.page(0), page), libc::EINVAL, "unpin twice")?;
        expect_usage(n, &["pins=1", "pinned_pages=1"], "after UNPIN_PAGES")?;
        drop(dev);
        expect_usage(
            n,
            &["pins=0", "pinned_pages=0", "outbound_regions=0/16"],
            "after close",
        )?;
    }
    Ok(())
}

/// Pinned pages are charged to the pinner's RLIMIT_MEMLOCK (as VFIO does):
/// past it PIN_PAGES fails with ENOMEM, unpinning makes room, and the
/// charge shows in the process's VmLck.
pub fn pins_charged_to_memlock() -> TestResult {
    let n = 0u32;
    let mut child = spawn("pinner", &[], move |link| {
        let dev = open(n)?;
        let anon = Anon::new(3)?;
        memlock_limit_then_user(2 * PAGE as u64, 65534)?;
        let page = PAGE as u64;
        expect_ok(pin(&dev, anon.page(0), page, 0), "first page")?;
        expect_ok(pin(&dev, anon.page(1), page, 0), "second page")?;
        let status = ctx(std::fs::read_to_string("/proc/self/status"), "status")?;
        ensure!(
            status
                .lines()
                .any(|l| l.split_whitespace().eq(["VmLck:", "8", "kB"])),
            "VmLck after two pins: {:?}",
            status.lines().find(|l| l.starts_with("VmLck"))
        );
        expect_errno(
            pin(&dev, anon.page(2), page, 0),
            libc::ENOMEM,
            "past RLIMIT_MEMLOCK",
        )?;
        expect_ok(unpin(&dev, anon.page(0), page), "UNPIN_PAGES")?;
        expect_ok(
            pin(&dev, anon.page(2), page, 0),
            "third page after the unpin",
        )?;
        link.send("pinned")?;
        ensure_eq!(link.recv()?, "exit", "command");
        Ok(())
    })?;
    child.expect("pinned")?;
    expect_usage(
        n,
        &["pins=2", "pinned_pages=2"],
        "while the child holds two pins",
    )?;
    child.send("exit")?;
    let status = child.status()?;
    ensure!(status == 0, "pinner: {}", describe_status(status));
    expect_usage(n, &["pins=0", "pinned_pages=0"], "after the pinner exited")
}

/// Pins `pages` pages of `anon` from page `first`, one at a time, through
/// `dev` until PIN_PAGES says ENOMEM; returns how many it pinned.
fn pin_until_enomem(
    dev: &impl AsRawFd,
    anon: &Anon,
    first: usize,
    pages: usize,
) -> Result<usize, String> {
    for p in 0..pages {
        match pin(dev, anon.page(first + p), PAGE as u64, 0) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => return Ok(p),
            Err(e) => return Err(format!("PIN_PAGES of page {}: {e}", first + p)),
        }
    }
    Ok(pages)
}

/// RLIMIT_MEMLOCK cannot be escaped by pinning from children that share
/// the file and exit (issue 27 item 5): pins belong to the file, so the
/// charge is the user's (its `locked_vm`, as io_uring and iommufd charge),
/// not only the pinning process's. An unprivileged process with a 4-page
/// limit forks pinners through its file one after the other: the first
/// pins 4 pages, the next ones none, nor the process itself; once the file
/// is closed, the user may pin 4 pages again (through another file).
///
/// Seen failing before the fix (charge to the pinner's mm only): "pages
/// each forked pinner got: [4, 4, 4], expected [4, 0, 0]" (the user kept
/// 12 pages pinned under a 4-page limit).
pub fn memlock_charged_per_user() -> TestResult {
    const LIMIT: usize = 4;
    const PINNERS: usize = 3;
    // A user of its own: no other scenario's pins share its charge.
    const UID: u32 = 62727;
    let n = 0u32;
    let mut owner = spawn("owner", &[], move |link| {
        // Opened as root: the device node needs no permission for `UID`.
        let shared = open(n)?;
        let other = open(n)?;
        memlock_limit_then_user((LIMIT * PAGE) as u64, UID)?;
        // A range of its own for each pinner, then for the owner: the file
        // refuses to pin an address twice (EEXIST). The pinners pin their
        // private copies of these pages (copied on write).
        let span = LIMIT + 1;
        let anon = Anon::new((PINNERS + 1) * span)?;
        let mut got = Vec::new();
        for i in 0..PINNERS {
            let (shared, anon) = (&shared, &anon);
            let mut pinner = spawn(&format!("pinner {i}"), &[shared.as_raw_fd()], |link| {
                let pinned = pin_until_enomem(shared, anon, i * span, span)?;
                // Exits with its pins left to the file.
                link.send(&pinned.to_string())
            })?;
            let line = pinner.recv()?;
            pinner.wait()?;
            got.push(ctx(line.parse::<usize>(), "pinner's count")?);
        }
        let mut want = vec![0; PINNERS];
        want[0] = LIMIT;
        ensure!(
            got == want,
            "pages each forked pinner got: {got:?}, expected {want:?}"
        );
        let own = PINNERS * span;
        expect_errno(
            pin(&shared, anon.page(own), PAGE as u64, 0),
            libc::ENOMEM,
            "the owner's pin with the user at its limit",
        )?;
        link.send("at the limit")?;
        link.expect("close")?;
        // The last reference: the pins of the exited pinners go now.
        drop(shared);
        ensure_eq!(
            pin_until_enomem(&other, &anon, own, span)?,
            LIMIT,
            "pages pinned through another file after the close"
        );
        link.send("pinned again")?;
        link.expect("exit")?;
        Ok(())
    })?;
    owner.expect("at the limit")?;
    let held = [format!("pinned_pages={LIMIT}")];
    let held: Vec<&str> = held.iter().map(String::as_str).collect();
    expect_usage(n, &held, "with the user at its limit")?;
    owner.send("close")?;
    owner.expect("pinned again")?;
    expect_usage(n, &held, "pinned again after the close")?;
    owner.send("exit")?;
    owner.wait()?;
    expect_usage(n, &["pins=0", "pinned_pages=0"], "after the owner exited")
}

/// Unbinding a card frees every file's buffers and pins: a process still
/// mapping a buffer dies of SIGBUS at its next access, the pinner's pages
/// are unpinned (its VmLck back to 0), and the files get ENODEV. The card
/// is bound again after.
pub fn unbind_frees_buffers_and_pins() -> TestResult {
    let n = 0u32;
    let bdf = bdf(n as usize)?;
    let mut mapper = spawn("buffer mapper", &[], move |link| {
        let dev = open(n)?;
        let out = expect_ok(allocate(&dev, 3, PAGE as u32, 2), "NOC_DMA buffer")?;
        let map = ctx(Mmio::new(&dev, out.mapping_offset, PAGE), "mmap")?;
        map.write32(0, 1);
        link.send(&format!("{:#x}", out.noc_address))?;
        ensure_eq!(link.recv()?, "touch", "command");
        let _ = map.read32(0);
        link.send("survived")?;
        Ok(())
    })?;
    let noc_address = mapper.recv()?;
    let mut pinner = spawn("pinner", &[], move |link| {
        let dev = open(n)?;
        let anon = Anon::new(1)?;
        expect_ok(pin(&dev, anon.page(0), PAGE as u64, 0), "PIN_PAGES")?;
        link.send("pinned")?;
        ensure_eq!(link.recv()?, "check", "command");
        let status = ctx(std::fs::read_to_string("/proc/self/status"), "status")?;
        ensure!(
            status
                .lines()
                .any(|l| l.split_whitespace().eq(["VmLck:", "0", "kB"])),
            "VmLck after unbind: {:?}",
            status.lines().find(|l| l.starts_with("VmLck"))
        );
        expect_errno(
            pin(&dev, anon.page(0), PAGE as u64, 0),
            libc::ENODEV,
            "PIN_PAGES",
        )?;
        Ok(())
    })?;
    pinner.expect("pinned")?;
    expect_usage(
        n,
        &["buffers=1", "pins=1", "outbound_regions=1/16"],
        "before unbind",
    )?;
    sysfs_write(UNBIND, &bdf)?;
    // Before anything was freed the card was quiesced: its regions are
    // disabled and it masters the bus no more, so its NOC reaches none of
    // the freed memory (seen failing before unbind did either: the region
    // stayed enabled and the chip read the freed buffer).
    let mut outcome = quiesced_after_unbind(n, &noc_address);
    mapper.send("touch")?;
    let status = mapper.status()?;
    if !died_of(status, libc::SIGBUS) {
        outcome = Err(format!(
            "buffer access after unbind: {}, expected SIGBUS",
            describe_status(status)
        ));
    }
    pinner.send("check")?;
    let status = pinner.status()?;
    if status != 0 && outcome.is_ok() {
        outcome = Err(format!("pinner: {}", describe_status(status)));
    }
    sysfs_write(BIND, &bdf)?;
    wait_path(&node(n), true)?;
    outcome?;
    expect_usage(
        n,
        &["buffers=0", "pins=0", "outbound_regions=0/16"],
        "after rebind",
    )
}

/// Fails unless every outbound iATU region of card `n` is disabled, read
/// from BAR2 through the PCI resource file (the chip's own view; tt-kmd
/// 2.10 `configure_outbound_atu`: region r's REGION_CTRL_2 at BAR2
/// `base + 0x200 r + 0x04`, REGION_EN bit 31).
fn expect_regions_disabled(n: u32, when: &str) -> TestResult {
    let base = if n == 0 { 0x1200 } else { 0x1000 };
    let bar2 = Mmio::bar(&bdf(n as usize)?, 2, 0x4000)?;
    for region in 0..16 {
        let ctrl2 = bar2.read32(base + 0x200 * region + 0x04);
        ensure!(
            ctrl2 & 1 << 31 == 0,
            "card {n} {when}: outbound region {region} enabled (REGION_CTRL_2 {ctrl2:#x})"
        );
    }
    Ok(())
}

/// What `unbind_frees_buffers_and_pins` checks of the unbound card `n`:
/// its function does not master the bus, its outbound regions are
/// disabled, and its NOC's read of `noc_address` (a freed buffer's) fails.
fn quiesced_after_unbind(n: u32, noc_address: &str) -> TestResult {
    let mut ctl = Control::open(n as usize)?;
    let status = ctl.command("status")?;
    ensure!(
        status.split_whitespace().any(|w| w == "bus-master=no"),
        "card {n} after unbind: {status}"
    );
    expect_regions_disabled(n, "after unbind")?;
    let (x, y) = pcie_tile(n);
    ensure_eq!(
        ctl.command(&format!("noc-read {x} {y} {noc_address} 4"))?,
        "ffffffff",
        "card {n} after unbind: the chip's NOC read of a freed buffer"
    );
    Ok(())
}

/// Sets the calling process's RLIMIT_MEMLOCK to `bytes`, then drops root
/// for user and group `id` (setuid from root sets every uid, which clears
/// the capabilities, CAP_IPC_LOCK too).
fn memlock_limit_then_user(bytes: u64, id: u32) -> TestResult {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: plain setrlimit, setgid and setuid of the calling process.
    unsafe {
        ensure!(
            libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) == 0,
            "setrlimit: {}",
            io::Error::last_os_error()
        );
        ensure!(
            libc::setgid(id) == 0 && libc::setuid(id) == 0,
            "setuid: {}",
            io::Error::last_os_error()
        );
    }
    Ok(())
}

/// One worker of the DMA crash storm: allocates buffers (some with NOC
/// DMA) and maps them, pins and unpins pages of its own memory, on both
/// cards, until it is killed. Returns non-zero on an answer no rule
/// allows.
fn storm_worker(seed: u64) -> i32 {
    let (Ok(a), Ok(b)) = (open(0), open(1)) else {
        return 10;
    };
    let devs = [a, b];
    let Ok(anon) = Anon::new(64) else {
        return 11;
    };
    let mut rng = Rng::new(seed);
    let mut maps: Vec<Mmio> = Vec::new();
    loop {
        let dev = &devs[rng.below(2) as usize];
        match rng.below(4) {
            0 => {
                let index = rng.below(256) as u8;
                let size = (1 + rng.below(4) as u32) * PAGE as u32;
                let flags = if rng.below(2) == 0 { 2 } else { 0 };
                match allocate(dev, index, size, flags) {
                    Ok(out) => match Mmio::new(dev, out.mapping_offset, size as usize) {
                        Ok(map) => {
                            map.write32(0, u32::from(index));
                            if maps.len() >= 32 {
                                maps.remove(0);
                            }
                            maps.push(map);
                        }
                        Err(_) => return 12,
                    },
                    // A duplicate index, all regions in use, no memory.
                    Err(e)
                        if [libc::EINVAL, libc::ENOSPC, libc::ENOMEM]
                            .contains(&e.raw_os_error().unwrap_or(0)) => {}
                    Err(_) => return 13,
                }
            }
            1 => {
                let page = anon.page(rng.below(64) as usize);
                let flags = rng.below(8) as u32
                    & (abi::PIN_PAGES_CONTIGUOUS
                        | abi::PIN_PAGES_NOC_DMA
                        | abi::PIN_PAGES_NOC_TOP_DOWN);
                match pin(dev, page, PAGE as u64, flags) {
                    Ok(_) => {}
                    Err(e)
                        if [libc::EEXIST, libc::ENOSPC]
                            .contains(&e.raw_os_error().unwrap_or(0)) => {}
                    Err(_) => return 14,
                }
            }
            2 => {
                let page = anon.page(rng.below(64) as usize);
                match unpin(dev, page, PAGE as u64) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                    Err(_) => return 15,
                }
            }
            _ => {
                if let Some(map) = maps.last() {
                    let _ = map.read32(0);
                }
            }
        }
    }
}

/// Processes killed (SIGKILL) while holding DMA buffers (mapped), pinned
/// pages and NOC regions on both cards leave nothing: after each round
/// both cards' `dma/usage` is back to zero (and the VM's kmemleak scan
/// finds nothing). Each round checks that the workers did hold something
/// when they were killed.
pub fn crash_storm() -> TestResult {
    use super::reliability::{fork_child, reap_until, seed, sized};
    let rounds = sized(3, 10);
    let workers = 6;
    let mut rng = Rng::new(seed("dma crash storm"));
    for round in 0..rounds {
        let mut pids = Vec::new();
        for _ in 0..workers {
            let s = rng.next();
            pids.push(fork_child(&[], move || storm_worker(s))?);
        }
        // Until the workers hold something on both cards (bounded).
        let start = std::time::Instant::now();
        let mut held = [false, false];
        while !(held[0] && held[1]) && start.elapsed() < std::time::Duration::from_secs(20) {
            for (n, h) in held.iter_mut().enumerate() {
                let line = usage(n as u32)?;
                *h |= !line.contains("buffers=0 ") || !line.contains("pins=0 ");
            }
            std::thread::sleep(std::time::Duration::from_millis(5 + rng.below(50)));
        }
        for &pid in &pids {
            // SAFETY: plain kill of our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        for &pid in &pids {
            let status = reap_until(pid, deadline).ok_or("a killed worker did not exit")?;
            ensure!(
                died_of(status, libc::SIGKILL),
                "round {round}: a worker {} before it was killed",
                describe_status(status)
            );
        }
        ensure!(
            held[0] && held[1],
            "round {round}: the workers never held DMA resources on both cards"
        );
        for n in 0..2 {
            expect_usage(
                n,
                &[
                    "buffers=0",
                    "buffer_bytes=0",
                    "pins=0",
                    "pinned_pages=0",
                    "outbound_regions=0/16",
                ],
                &format!("after round {round}"),
            )?;
        }
    }
    Ok(())
}

/// MAP_PEER_BAR (tt-kmd 2.10's checks, in its order): `EINVAL` for flags,
/// a resource index past the PCI resources, a zero length, a descriptor
/// that is not a card's file, the same card (through the same or another
/// file), a card of another chip (the test VM's two cards); `EBADF` for a
/// descriptor that is not open. Only `in` is read: with the 24 bytes at the
/// end of a mapping, the refusal is still `EINVAL`. Nothing is mapped.
pub fn map_peer_bar_refusals() -> TestResult {
    let a = open(0)?;
    let same_card = open(0)?;
    let other_chip = open(1)?;
    let null = ctx(std::fs::File::open("/dev/null"), "open /dev/null")?;
    let call = |fd: i32, index: u32, len: u32, flags: u32| {
        let mut arg = [0u32; 10];
        arg[0] = fd as u32;
        arg[1] = index;
        arg[3] = len;
        arg[4] = flags;
        ioctl_addr(
            a.as_raw_fd(),
            abi::IOCTL_MAP_PEER_BAR,
            arg.as_mut_ptr() as usize,
        )
    };
    let cases = [
        (
            other_chip.as_raw_fd(),
            0,
            PAGE as u32,
            1,
            libc::EINVAL,
            "flags 1",
        ),
        (
            other_chip.as_raw_fd(),
            17,
            PAGE as u32,
            0,
            libc::EINVAL,
            "resource 17",
        ),
        (other_chip.as_raw_fd(), 0, 0, 0, libc::EINVAL, "length 0"),
        (
            9999,
            0,
            PAGE as u32,
            0,
            libc::EBADF,
            "a descriptor not open",
        ),
        (
            null.as_raw_fd(),
            0,
            PAGE as u32,
            0,
            libc::EINVAL,
            "/dev/null",
        ),
        (
            a.as_raw_fd(),
            0,
            PAGE as u32,
            0,
            libc::EINVAL,
            "the same file",
        ),
        (
            same_card.as_raw_fd(),
            0,
            PAGE as u32,
            0,
            libc::EINVAL,
            "the same card",
        ),
    ];
    for (fd, index, len, flags, errno, what) in cases {
        expect_errno(call(fd, index, len, flags), errno, what)?;
    }
    if card_ids(1) != card_ids(0) {
        let r = call(other_chip.as_raw_fd(), 0, PAGE as u32, 0);
        expect_errno(r, libc::EINVAL, "a card of another chip")?;
    }
    // Only `in` is read: its 24 bytes end a mapping, the next page is not.
    let (_hole, end) = page_before_hole()?;
    let at = end - 24;
    let words = [a.as_raw_fd() as u32, 0, 0, PAGE as u32, 0, 0];
    for (i, w) in words.iter().enumerate() {
        // SAFETY: inside the mapped page.
        unsafe { std::ptr::write((at + 4 * i) as *mut u32, *w) };
    }
    expect_errno(
        ioctl_addr(a.as_raw_fd(), abi::IOCTL_MAP_PEER_BAR, at),
        libc::EINVAL,
        "MAP_PEER_BAR with only `in` mapped",
    )?;
    expect_usage(0, &["peer_mappings=0"], "after the refusals")
}

/// MAP_PEER_BAR between two cards of one chip (a `--cards wormhole-pair`
/// boot): each BAR of card 1 mapped for card 0 at the bus address its
/// resource has (no IOMMU: the physical address; a BAR above 4 GiB is
/// then out of a Wormhole's 32-bit reach, ENOMEM), counted in card 0's
/// `dma/usage` until the file closes; a range past the BAR is EINVAL. On
/// the usual Wormhole + Blackhole pair, the cross-chip refusal.
pub fn map_peer_bar_between_cards() -> TestResult {
    let a = open(0)?;
    let b = open(1)?;
    let map = |index: u32, offset: u32, len: u32| -> io::Result<u64> {
        let mut arg = abi::MapPeerBar::default();
        arg.input.peer_fd = b.as_raw_fd() as u32;
        arg.input.peer_bar_index = index;
        arg.input.peer_bar_offset = offset;
        arg.input.peer_bar_length = len;
        ioctl(&a, abi::IOCTL_MAP_PEER_BAR, &mut arg)?;
        Ok(arg.output.dma_address)
    };
    if card_ids(1) != card_ids(0) {
        return expect_errno(
            map(0, 0, PAGE as u32),
            libc::EINVAL,
            "a card of another chip",
        );
    }
    let resources = ctx(
        std::fs::read_to_string(format!("/sys/bus/pci/devices/{}/resource", bdf(1)?)),
        "card 1's resource file",
    )?;
    let start_of = |index: usize| -> Result<(u64, u64), String> {
        let line = resources.lines().nth(index).ok_or("short resource file")?;
        let mut f = line
            .split_whitespace()
            .map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16));
        let (Some(Ok(start)), Some(Ok(end))) = (f.next(), f.next()) else {
            return Err(format!("resource line {index}: {line:?}"));
        };
        Ok((start, end - start + 1))
    };
    let translated = behind_iommu();
    let mut mapped = 0;
    for index in [0u32, 2, 4] {
        let (start, len) = start_of(index as usize)?;
        let offset = 0x1000;
        let what = format!("MAP_PEER_BAR of BAR{index} at {start:#x}");
        let end = start + u64::from(offset) + 0x2000;
        if !translated && end > 1 << 32 {
            // Without an IOMMU a Wormhole reaches 32 bits (its DMA mask, as
            // tt-kmd sets it): a BAR above 4 GiB is out of its reach.
            expect_errno(map(index, offset, 0x2000), libc::ENOMEM, &what)?;
        } else {
            let address = expect_ok(map(index, offset, 0x2000), &what)?;
            if !translated {
                ensure_eq!(
                    address,
                    start + u64::from(offset),
                    "BAR{index}: the bus address"
                );
            }
            mapped += 1;
        }
        expect_usage(0, &[&format!("peer_mappings={mapped}")], "after a mapping")?;
        let past = u32::try_from(len).unwrap_or(u32::MAX);
        expect_errno(
            map(index, past, PAGE as u32),
            libc::EINVAL,
            "an offset past the BAR",
        )?;
        expect_errno(
            map(index, 0, past.saturating_add(1)),
            libc::EINVAL,
            "a length past the BAR",
        )?;
    }
    ensure!(mapped > 0, "no BAR of card 1 could be mapped for card 0");
    expect_usage(1, &["peer_mappings=0"], "card 1 (the peer)")?;
    drop(a);
    expect_usage(0, &["peer_mappings=0"], "after close")
}

/// A peer's unbind takes its BARs away from the other cards' DMA: card 0's
/// mapping of a BAR of card 1 (MAP_PEER_BAR) is unmapped when card 1 is
/// unbound, while card 0's file that made it stays open, so that card 0
/// reaches none of a BAR that another driver (vfio-pci for a guest) may
/// take next; a later MAP_PEER_BAR through the unbound peer's file is
/// ENODEV. tt-kmd 2.10 keeps such mappings until the mapping file closes;
/// seen failing so (peer_mappings=1 after the unbind) before the unbind
/// revoked them. On cards of two chips (the default pair) MAP_PEER_BAR is
/// EINVAL and there is nothing to revoke.
pub fn map_peer_bar_revoked_at_peer_unbind() -> TestResult {
    let a = open(0)?;
    let b = open(1)?;
    let map = |b: &Device, index: u32| -> io::Result<u64> {
        let mut arg = abi::MapPeerBar::default();
        arg.input.peer_fd = b.as_raw_fd() as u32;
        arg.input.peer_bar_index = index;
        arg.input.peer_bar_offset = 0;
        arg.input.peer_bar_length = PAGE as u32;
        ioctl(&a, abi::IOCTL_MAP_PEER_BAR, &mut arg)?;
        Ok(arg.output.dma_address)
    };
    if card_ids(1) != card_ids(0) {
        return expect_errno(map(&b, 0), libc::EINVAL, "a card of another chip");
    }
    // Without an IOMMU a Wormhole reaches 32 bits: a BAR above is ENOMEM.
    let index = [0u32, 2, 4]
        .into_iter()
        .find(|&index| map(&b, index).is_ok())
        .ok_or("no BAR of card 1 could be mapped for card 0")?;
    expect_usage(0, &["peer_mappings=1"], "after MAP_PEER_BAR")?;
    let bdf1 = bdf(1)?;
    sysfs_write(UNBIND, &bdf1)?;
    let outcome = expect_usage(0, &["peer_mappings=0"], "after the peer's unbind").and_then(|()| {
        expect_errno(
            map(&b, index),
            libc::ENODEV,
            "MAP_PEER_BAR through the unbound peer's file",
        )
    });
    sysfs_write(BIND, &bdf1)?;
    wait_path(&node(1), true)?;
    outcome?;
    drop(a);
    expect_usage(0, &["peer_mappings=0"], "after close")
}

/// A reset that fences a file (CONFIG_WRITE, on the Wormhole, where it
/// resets nothing else) gives the outbound regions of its NOC DMA buffer
/// back to the card at once, as tt-kmd 2.10 does, and disables them in the
/// chip, which tt-kmd does not: the chip's NOC no longer reaches the
/// buffer through the region (seen reading the buffer's contents before
/// the driver disabled them). The buffer itself stays the file's (mapped,
/// readable, and within the Wormhole's direct reach below 4 GiB, as with
/// tt-kmd) until it closes. The resetter then gets a region of its own.
pub fn reset_frees_fenced_regions() -> TestResult {
    let n = 0;
    expect_usage(n, &["buffers=0", "outbound_regions=0/16"], "at the start")?;
    let stale = open(n)?;
    let buf = ctx(
        allocate(&stale, 0, 4096, abi::ALLOCATE_DMA_BUF_NOC_DMA as u8),
        "ALLOCATE_DMA_BUF with NOC_DMA",
    )?;
    let map = ctx(
        Mmio::new(&stale, buf.mapping_offset, 4096),
        "mmap the buffer",
    )?;
    map.write32(0, 0x5eed_0001);
    expect_usage(
        n,
        &["buffers=1", "outbound_regions=1/16"],
        "with the buffer",
    )?;
    let resetter = open(n)?;
    config_write_reset(&resetter)?;
    expect_usage(
        n,
        &["buffers=1", "outbound_regions=0/16"],
        "after the reset",
    )?;
    ensure_eq!(map.read32(0), 0x5eed_0001, "the fenced file's buffer");
    let mut ctl = Control::open(n as usize)?;
    let (x, y) = pcie_tile(n);
    // A Wormhole reaches bus addresses below 4 GiB at the window's base
    // plus the address, without a region (tt-kmd `dma_address_bits = 32`):
    // behind an IOMMU, whose IOVAs for the card's 32-bit mask are taken
    // from the top of 4 GiB down, as regions are placed, the region's
    // address can be the buffer's own bus address, which that path
    // reaches whatever the region says. The registers tell then.
    if buf.noc_address - noc_window(n).0 == buf.physical_address {
        println!(
            "# the region's address is the buffer's bus address ({:#x}): the chip's \
             registers, not a NOC read, show the region disabled",
            buf.physical_address
        );
    } else {
        ensure_eq!(
            ctl.command(&format!("noc-read {x} {y} {:#x} 4", buf.noc_address))?,
            "ffffffff",
            "the chip's NOC read of the fenced file's buffer"
        );
    }
    expect_regions_disabled(n, "after the reset")?;
    let own = ctx(
        allocate(&resetter, 0, 4096, abi::ALLOCATE_DMA_BUF_NOC_DMA as u8),
        "the resetter's NOC_DMA buffer",
    )?;
    ensure!(own.noc_address != 0, "no NOC address for the resetter");
    expect_usage(
        n,
        &["buffers=2", "outbound_regions=1/16"],
        "with the resetter's",
    )?;
    drop(map);
    drop(stale);
    drop(resetter);
    expect_usage(n, &["buffers=0", "outbound_regions=0/16"], "at the end")
}

/// The memory cgroup v2 hierarchy, mounted if it is not: `None` when the
/// kernel has no memory controller (the debug kernel), with why.
fn memory_cgroups() -> Result<Option<&'static str>, String> {
    const ROOT: &str = "/sys/fs/cgroup";
    let controllers = format!("{ROOT}/cgroup.controllers");
    if !std::path::Path::new(&controllers).exists() {
        let _ = std::fs::create_dir_all(ROOT);
        let (src, dir, fs) = (c"cgroup2", c"/sys/fs/cgroup", c"cgroup2");
        // SAFETY: mounting a pseudo filesystem on a directory of ours,
        // with NUL-terminated names and no data.
        let rc =
            unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
        if rc != 0 {
            println!("# no cgroup2 filesystem: {}", io::Error::last_os_error());
            return Ok(None);
        }
    }
    let list = ctx(std::fs::read_to_string(&controllers), &controllers)?;
    if !list.split_whitespace().any(|c| c == "memory") {
        println!("# no memory controller in this kernel ({controllers}: {list:?})");
        return Ok(None);
    }
    Ok(Some(ROOT))
}

fn memory_current(group: &str) -> Result<u64, String> {
    let path = format!("{group}/memory.current");
    let text = ctx(std::fs::read_to_string(&path), &path)?;
    text.trim()
        .parse()
        .map_err(|e| format!("{path}: {text:?}: {e}"))
}

/// DMA buffers are charged to the memory cgroup of the process that
/// allocates them, as its own pages are: a 2 MiB buffer raises the group's
/// `memory.current` by at least 2 MiB, a buffer past its `memory.max` is
/// ENOMEM, and closing the file gives the charge back. Seen failing before
/// buffers were charged: `memory.current` did not move. A kernel without
/// the memory controller (the debug kernel) charges nothing and this says
/// so; Debian's kernel (the stock layer) has it.
pub fn buffers_charged_to_memcg() -> TestResult {
    let Some(root) = memory_cgroups()? else {
        return Ok(());
    };
    // Enabling the controller for children may fail if it already is.
    let _ = std::fs::write(format!("{root}/cgroup.subtree_control"), "+memory");
    let group = format!("{root}/tt-dma-memcg");
    let _ = std::fs::remove_dir(&group);
    ctx(std::fs::create_dir(&group), &group)?;
    let result = (|| -> TestResult {
        let group = group.clone();
        let child = spawn("memcg allocator", &[], move |_| {
            let procs = format!("{group}/cgroup.procs");
            ctx(std::fs::write(&procs, getpid().to_string()), &procs)?;
            let dev = open(0)?;
            let before = memory_current(&group)?;
            let out = expect_ok(allocate(&dev, 0, 2 << 20, 0), "a 2 MiB buffer")?;
            ensure!(out.size == 2 << 20, "buffer size {}", out.size);
            let with = memory_current(&group)?;
            ensure!(
                with >= before + (2 << 20),
                "memory.current {before} before the 2 MiB buffer, {with} with it"
            );
            // A limit 1 MiB above what the group has: a 2 MiB buffer is
            // past it.
            let max = format!("{group}/memory.max");
            ctx(std::fs::write(&max, (with + (1 << 20)).to_string()), &max)?;
            expect_errno(
                allocate(&dev, 1, 2 << 20, 0),
                libc::ENOMEM,
                "a 2 MiB buffer past memory.max",
            )?;
            ctx(std::fs::write(&max, "max"), &max)?;
            drop(dev);
            // Less than half the buffer left: the rest of the group's
            // charge moves a little on its own (a page seen).
            let after = memory_current(&group)?;
            ensure!(
                after < before + (1 << 20),
                "memory.current {before} before the buffer, {with} with it, {after} after close"
            );
            Ok(())
        })?;
        child.wait()
    })();
    let _ = std::fs::remove_dir(&group);
    result
}

/// What other scenarios need of DMA (reliability/dma_limits_per_card).
pub(super) mod helpers {
    use super::*;

    /// ALLOCATE_DMA_BUF of `size` bytes at `index`, no flags.
    pub(in crate::scenarios) fn allocate_buffer(
        dev: &impl AsRawFd,
        index: u8,
        size: u32,
    ) -> io::Result<abi::AllocateDmaBufOut> {
        allocate(dev, index, size, 0)
    }

    /// ALLOCATE_DMA_BUF of `size` bytes at `index` with NOC_DMA.
    pub(in crate::scenarios) fn allocate_noc_buffer(
        dev: &impl AsRawFd,
        index: u8,
        size: u32,
    ) -> io::Result<abi::AllocateDmaBufOut> {
        allocate(dev, index, size, abi::ALLOCATE_DMA_BUF_NOC_DMA as u8)
    }

    /// Fails unless the unbound card `n` was quiesced: no bus mastering,
    /// every outbound region disabled, its NOC's read of `noc_address` (a
    /// freed buffer's) failing.
    pub(in crate::scenarios) fn expect_quiesced(n: u32, noc_address: u64) -> TestResult {
        quiesced_after_unbind(n, &format!("{noc_address:#x}"))
    }

    /// PIN_PAGES of `size` bytes at `addr`, no flags.
    pub(in crate::scenarios) fn pin_pages(
        dev: &impl AsRawFd,
        addr: usize,
        size: u64,
    ) -> io::Result<(u64, u64)> {
        pin(dev, addr, size, 0)
    }

    pub(in crate::scenarios) fn unpin_pages(
        dev: &impl AsRawFd,
        addr: usize,
        size: u64,
    ) -> io::Result<i32> {
        unpin(dev, addr, size)
    }
}

/// `/sys/kernel/debug/tenstorrent/N/mappings` (tt-kmd 2.10's diagnostic
/// view) lists what each open file holds, under its pid: the file, a pin,
/// a DMA buffer with its NOC address, a window held and mapped, a BAR
/// mapping; and forgets them when the file closes.
pub fn debugfs_mappings() -> TestResult {
    for n in 0..2u32 {
        let path = format!("/sys/kernel/debug/tenstorrent/{n}/mappings");
        let dev = open(n)?;
        let pages = Shared::new(4096)?;
        ctx(
            pin(&dev, pages.addr(), 4096, abi::PIN_PAGES_CONTIGUOUS),
            "PIN_PAGES",
        )?;
        ctx(
            allocate(&dev, 2, 4096, abi::ALLOCATE_DMA_BUF_NOC_DMA as u8),
            "ALLOCATE_DMA_BUF",
        )?;
        let w = ctx(super::mapping::alloc(&dev, 2 << 20), "ALLOCATE_TLB")?;
        let window = ctx(Mmio::new(&dev, w.mmap_offset_wc, 4096), "mmap the window")?;
        let bar = ctx(Mmio::new(&dev, 0, 4096), "mmap BAR0")?;
        let text = ctx(std::fs::read_to_string(&path), &path)?;
        let pid = getpid().to_string();
        let mine: Vec<&str> = text
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(&pid))
            .collect();
        ensure!(
            text.starts_with("WARNING: This file is for diagnostic purposes only."),
            "card {n}: {path} starts {text:?}"
        );
        for want in [
            "OPEN_FD",
            "PIN_PAGES",
            "DMA_BUF+IATU",
            "ID: 2",
            "TLB-alloc",
            &format!("ID: {:<3} -> BAR0", w.id),
            "BAR0 UC (mappings=1)",
        ] {
            ensure!(
                mine.iter().any(|l| l.contains(want)),
                "card {n}: no {want:?} among this process's lines {mine:?}"
            );
        }
        drop((window, bar));
        drop(dev);
        let text = ctx(std::fs::read_to_string(&path), &path)?;
        ensure!(
            !text
                .lines()
                .any(|l| l.split_whitespace().next() == Some(&pid)),
            "card {n}: lines of a closed file: {text:?}"
        );
    }
    Ok(())
}

//! What a hostile caller can ask of a mapping, on every kind the module
//! makes (a BAR uncached and write-combined, a TLB window uncached and
//! write-combined, a DMA buffer), on both cards: private mappings and
//! executable ones are refused when mapped, and nothing done to a mapping
//! afterwards (mprotect, mremap, madvise, /proc/PID/mem, which is the path
//! ptrace's PEEKDATA takes too) can make it writable where the file is
//! not, executable, copied into a child, larger, or reachable through
//! another process' page tables. After every refusal the mapping still
//! reads what was written through it.
//!
//! Seen failing before the module refused private VMAs: `MAP_PRIVATE`
//! mmaps succeeded (the first access of one was a kernel oops, a `BUG()` in
//! `vmf_insert_pfn_prot()`; these tests never touch a mapping they expected
//! to be refused), and `PROT_EXEC` mappings and `mprotect(PROT_EXEC)`
//! succeeded.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use tt_arbiter::abi;

use super::dma_helpers::allocate_buffer;
use super::mapping::{alloc, chip, configure, tensix};
use crate::card::Mmio;
use crate::util::*;

const PAGE: usize = 4096;
const MIB: u64 = 1 << 20;
/// mmap offsets of BAR0 (tt-kmd's MMAP_OFFSET_RESOURCE0_UC / _WC).
const BAR0_UC: u64 = 0;
const BAR0_WC: u64 = 1 << 36;

/// mmap(2) of `len` bytes of `file` at `offset` with `prot` and `flags`.
fn map(file: &impl AsRawFd, offset: u64, len: usize, prot: i32, flags: i32) -> io::Result<Mmio> {
    Mmio::map(file, offset, len, prot, flags)
}

fn rw_shared(file: &impl AsRawFd, offset: u64, len: usize) -> io::Result<Mmio> {
    map(
        file,
        offset,
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
    )
}

fn check(ret: libc::c_int) -> io::Result<i32> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// One of the kinds of mapping, by its mmap offset: the tests here map one
/// page of it and write its word at [`WORD`]; the mapping fuzzer
/// (reliability/fuzz_mmaps) maps up to `pages` pages of it.
pub(super) struct Kind {
    name: &'static str,
    pub(super) offset: u64,
    pub(super) pages: usize,
}

/// The word the tests write: in a window, Tensix L1 at 0x100.
const WORD: usize = 0x100;

/// Every kind of mapping `dev` can make of card `n`: a window for each
/// memory type (one type per window while it is held) aimed at a Tensix
/// tile, BAR0 where the first of them lies (the same tile memory, UC and
/// WC), and a DMA buffer. The windows and the buffer are held by `dev`.
pub(super) fn kinds(dev: &impl AsRawFd, n: u32) -> Result<Vec<Kind>, String> {
    let size = if n == 0 { MIB } else { 2 * MIB };
    let mut windows = Vec::new();
    for _ in 0..2 {
        let w = ctx(alloc(dev, size), "ALLOCATE_TLB")?;
        expect_ok(configure(dev, w.id, tensix(chip(n)), 0), "CONFIGURE_TLB")?;
        windows.push(w);
    }
    let in_bar0 = windows[0].mmap_offset_uc - abi::MMAP_OFFSET_TLB_UC;
    let window_pages = size as usize / PAGE;
    let buffer_pages = 4;
    let buffer = expect_ok(
        allocate_buffer(dev, 0, (buffer_pages * PAGE) as u32),
        "ALLOCATE_DMA_BUF",
    )?;
    let kind = |name, offset, pages| Kind {
        name,
        offset,
        pages,
    };
    Ok(vec![
        kind("BAR0 UC", BAR0_UC + in_bar0, window_pages),
        kind("BAR0 WC", BAR0_WC + in_bar0, window_pages),
        kind("window UC", windows[0].mmap_offset_uc, window_pages),
        kind("window WC", windows[1].mmap_offset_wc, window_pages),
        kind("DMA buffer", buffer.mapping_offset, buffer_pages),
    ])
}

/// madvise(`advice`) of `mapped` must be EINVAL. A kernel built without
/// madvise (`CONFIG_ADVISE_SYSCALLS=n`: the debug kernel) answers ENOSYS
/// and has nothing to refuse; Debian's kernel, in the stock layer, has it.
fn refused_advice(mapped: &Mmio, advice: i32, what: &str) -> TestResult {
    // SAFETY: advice on our own mapping; expected to fail.
    let ret = unsafe { libc::madvise(mapped.addr() as *mut libc::c_void, PAGE, advice) };
    match check(ret) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => Ok(()),
        r => expect_errno(r, libc::EINVAL, what),
    }
}

fn open_read_only(n: u32) -> Result<File, String> {
    OpenOptions::new()
        .read(true)
        .open(node(n))
        .map_err(|e| format!("open {} read-only: {e}", node(n)))
}

/// MAP_PRIVATE is EINVAL for every kind, writable or not, from a file
/// opened read-write or read-only (a read-only file's private mapping is
/// copy-on-write too: it may be made writable). A shared read-only
/// mapping from a read-only file works and reads.
pub fn private_mappings_refused() -> TestResult {
    for n in 0..2u32 {
        let dev = open(n)?;
        let ro = open_read_only(n)?;
        for kind in kinds(&dev, n)? {
            let what = |how: &str| format!("card {n}: {} {how}", kind.name);
            for prot in [
                libc::PROT_READ,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::PROT_NONE,
            ] {
                expect_errno(
                    map(&dev, kind.offset, PAGE, prot, libc::MAP_PRIVATE).map(|_| ()),
                    libc::EINVAL,
                    &what(&format!("MAP_PRIVATE prot {prot:#x}")),
                )?;
            }
            let shared = ctx(rw_shared(&dev, kind.offset, PAGE), &what("mmap"))?;
            shared.write32(WORD, 0x5eed_0000 + n);
            ensure_eq!(
                shared.read32(WORD),
                0x5eed_0000 + n,
                "{}",
                what("after the refusals")
            );
        }
        // The read-only file may map the BAR shared and read-only, not
        // privately, not writably.
        expect_errno(
            map(&ro, BAR0_UC, PAGE, libc::PROT_READ, libc::MAP_PRIVATE).map(|_| ()),
            libc::EINVAL,
            &format!("card {n}: read-only file, MAP_PRIVATE"),
        )?;
        expect_errno(
            rw_shared(&ro, BAR0_UC, PAGE).map(|_| ()),
            libc::EACCES,
            &format!("card {n}: read-only file, PROT_WRITE"),
        )?;
        let mapped = ctx(
            map(&ro, BAR0_UC, PAGE, libc::PROT_READ, libc::MAP_SHARED),
            "read-only file, shared read-only mapping",
        )?;
        let _ = mapped.read32(0);
        expect_errno(
            check(unsafe {
                // SAFETY: our own mapping; the call must fail.
                libc::mprotect(
                    mapped.addr() as *mut libc::c_void,
                    PAGE,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            }),
            libc::EACCES,
            &format!("card {n}: mprotect(PROT_WRITE) of a read-only file's mapping"),
        )?;
    }
    Ok(())
}

/// Card memory is never executable: PROT_EXEC is EPERM at mmap, and
/// mprotect(PROT_EXEC) of a mapping is EACCES; the mapping keeps working.
pub fn never_executable() -> TestResult {
    for n in 0..2u32 {
        let dev = open(n)?;
        for kind in kinds(&dev, n)? {
            let what = |how: &str| format!("card {n}: {} {how}", kind.name);
            expect_errno(
                map(
                    &dev,
                    kind.offset,
                    PAGE,
                    libc::PROT_READ | libc::PROT_EXEC,
                    libc::MAP_SHARED,
                )
                .map(|_| ()),
                libc::EPERM,
                &what("PROT_EXEC"),
            )?;
            let mapped = ctx(rw_shared(&dev, kind.offset, PAGE), &what("mmap"))?;
            mapped.write32(WORD, 0xe8ec_0000 + n);
            // SAFETY: our own mapping; the call must fail and change nothing.
            let ret = unsafe {
                libc::mprotect(
                    mapped.addr() as *mut libc::c_void,
                    PAGE,
                    libc::PROT_READ | libc::PROT_EXEC,
                )
            };
            expect_errno(check(ret), libc::EACCES, &what("mprotect(PROT_EXEC)"))?;
            ensure_eq!(
                mapped.read32(WORD),
                0xe8ec_0000 + n,
                "{}",
                what("after mprotect")
            );
        }
    }
    Ok(())
}

/// A mapping cannot be grown by mremap (EFAULT), made inheritable by
/// madvise(MADV_DOFORK) (EINVAL: it is VM_IO), nor read or written
/// through /proc/self/mem (EIO: no struct pages, no access method), the
/// path ptrace's PEEKDATA takes too; MADV_DONTNEED, which would drop its
/// pages from under the revocation bookkeeping, is EINVAL for a
/// VM_PFNMAP mapping. The mapping still reads what was written after all
/// of them.
pub fn cannot_grow_leak_or_be_reached() -> TestResult {
    let mem = ctx(
        OpenOptions::new()
            .read(true)
            .write(true)
            .open("/proc/self/mem"),
        "open /proc/self/mem",
    )?;
    for n in 0..2u32 {
        let dev = open(n)?;
        for kind in kinds(&dev, n)? {
            let what = |how: &str| format!("card {n}: {} {how}", kind.name);
            let mapped = ctx(rw_shared(&dev, kind.offset, PAGE), &what("mmap"))?;
            let at = WORD;
            let value = 0x0dd0_0000 + n;
            mapped.write32(at, value);
            // SAFETY: growing our own mapping; must fail.
            let grown = unsafe {
                libc::mremap(
                    mapped.addr() as *mut libc::c_void,
                    PAGE,
                    2 * PAGE,
                    libc::MREMAP_MAYMOVE,
                )
            };
            let grown = if grown == libc::MAP_FAILED {
                Err(io::Error::last_os_error())
            } else {
                Ok(grown as usize)
            };
            expect_errno(grown, libc::EFAULT, &what("mremap to twice its size"))?;
            refused_advice(&mapped, libc::MADV_DOFORK, &what("MADV_DOFORK"))?;
            let mut word = [0u8; 4];
            expect_errno(
                mem.read_at(&mut word, (mapped.addr() + at) as u64),
                libc::EIO,
                &what("read through /proc/self/mem"),
            )?;
            expect_errno(
                mem.write_at(&[0xff; 4], (mapped.addr() + at) as u64),
                libc::EIO,
                &what("write through /proc/self/mem"),
            )?;
            refused_advice(&mapped, libc::MADV_DONTNEED, &what("MADV_DONTNEED"))?;
            ensure_eq!(mapped.read32(at), value, "{}", what("after everything"));
        }
    }
    Ok(())
}

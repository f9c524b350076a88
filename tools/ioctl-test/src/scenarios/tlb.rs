//! TLB windows: the C driver's ALLOCATE_TLB / FREE_TLB, the blocking
//! TLB_ALLOCATE, FIFO hand-off per size class, release on kill and close,
//! unbind with waiters, and the layouts of both card families.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;

use tt_arbiter::{abi, Device};

use crate::util::*;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const UC: u64 = abi::MMAP_OFFSET_TLB_UC;
const WC: u64 = abi::MMAP_OFFSET_TLB_WC;

/// ALLOCATE_TLB (C driver command).
pub(crate) fn alloc_compat(dev: &impl AsRawFd, size: u64) -> io::Result<abi::AllocateTlbOut> {
    let mut a = abi::AllocateTlb::default();
    a.input.size = size;
    ioctl(dev, abi::IOCTL_ALLOCATE_TLB, &mut a).map(|_| a.output)
}

/// FREE_TLB.
pub(crate) fn free_compat(dev: &impl AsRawFd, id: u32) -> io::Result<i32> {
    let mut f = abi::FreeTlb::default();
    f.input.id = id;
    ioctl(dev, abi::IOCTL_FREE_TLB, &mut f)
}

/// TLB_ALLOCATE (ours).
pub(crate) fn tlb_allocate(
    dev: &impl AsRawFd,
    size: u64,
    flags: u32,
    deadline_ns: u64,
) -> (io::Result<i32>, abi::TlbAllocate) {
    let mut a = <abi::TlbAllocate as abi::Extensible>::new();
    a.size = size;
    a.flags = flags;
    a.deadline_ns = deadline_ns;
    let r = ioctl(dev, abi::IOCTL_TLB_ALLOCATE, &mut a);
    (r, a)
}

/// The fields of `/sys/class/tenstorrent/tenstorrent!N/tlb/NAME`.
fn class_field(card: u32, name: &str, field: &str) -> Result<String, String> {
    let path = format!("/sys/class/tenstorrent/tenstorrent!{card}/tlb/{name}");
    let line = sysfs(&path)?;
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(field).and_then(|v| v.strip_prefix('=')))
        .map(str::to_string)
        .ok_or_else(|| format!("{path}: no field {field} in {line:?}"))
}

fn class_num(card: u32, name: &str, field: &str) -> Result<u64, String> {
    let v = class_field(card, name, field)?;
    v.parse()
        .map_err(|_| format!("tlb/{name} {field}={v:?} is not a number"))
}

/// Polls sysfs until class `name` of card `card` has `n` waiters.
fn wait_tlb_waiters(card: u32, name: &str, n: u64) -> TestResult {
    let start = std::time::Instant::now();
    loop {
        let got = class_num(card, name, "waiters")?;
        if got == n {
            return Ok(());
        }
        ensure!(
            start.elapsed() < PATIENCE,
            "tlb/{name} waiters stayed {got}, expected {n}"
        );
        std::thread::yield_now();
    }
}

/// Allocates every free window of `size` on `dev` (ALLOCATE_TLB until
/// ENOMEM); returns the ids in order.
pub(crate) fn exhaust(dev: &Device, size: u64) -> Result<Vec<u32>, String> {
    let mut ids = Vec::new();
    loop {
        match alloc_compat(dev, size) {
            Ok(out) => ids.push(out.id),
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => return Ok(ids),
            Err(e) => return Err(format!("ALLOCATE_TLB {size}: {e}")),
        }
        ensure!(ids.len() <= 256, "more than 256 windows of size {size}");
    }
}

/// A child that opens card 0, waits (blocking TLB_ALLOCATE) for a window of
/// `size`, reports `got ID`, and holds it until told to exit.
fn tlb_waiter(name: &str, size: u64) -> Result<Child, String> {
    let mut c = spawn(name, &[], move |link| {
        let d = open(0)?;
        link.send("ready")?;
        let (r, a) = tlb_allocate(&d, size, 0, 0);
        expect_ok(r, "blocking TLB_ALLOCATE")?;
        link.send(&format!("got {}", a.id))?;
        link.expect("exit")
    })?;
    c.expect("ready")?;
    Ok(c)
}

/// Wormhole (the default for emulated cards): class files, counts, ids and
/// mmap offsets, ENOMEM when exhausted, everything freed on close.
pub fn layout_counts_wormhole() -> TestResult {
    for (name, windows, kernel) in [("1M", 156, 0), ("2M", 10, 0), ("16M", 20, 1)] {
        ensure_eq!(
            class_num(0, name, "windows")?,
            windows,
            "tlb/{name} windows"
        );
        ensure_eq!(class_num(0, name, "kernel")?, kernel, "tlb/{name} kernel");
        ensure_eq!(
            class_num(0, name, "free")?,
            windows - kernel,
            "tlb/{name} free"
        );
    }
    ensure!(
        fs::metadata("/sys/class/tenstorrent/tenstorrent!0/tlb/4G").is_err(),
        "a Wormhole card shows a 4G window class"
    );
    let d = open(0)?;
    for (size, first, count, base) in [
        (MIB, 0u32, 156usize, 0u64),
        (2 * MIB, 156, 10, 156 * MIB),
        (16 * MIB, 166, 19, 176 * MIB),
    ] {
        let out = ctx(alloc_compat(&d, size), "ALLOCATE_TLB")?;
        ensure_eq!(out.id, first, "first window of {size} bytes");
        ensure_eq!(
            (out.mmap_offset_uc, out.mmap_offset_wc),
            (UC + base, WC + base),
            "mmap offsets of window {first}"
        );
        ensure_eq!(
            (out.reserved0, out.reserved1),
            (0, 0),
            "reserved output of window {first}"
        );
        let rest = exhaust(&d, size)?;
        ensure_eq!(rest.len() + 1, count, "windows of {size} bytes");
        let want: Vec<u32> = (first + 1..first + count as u32).collect();
        ensure_eq!(rest, want, "ids of the windows of {size} bytes");
    }
    ensure_eq!(
        class_num(0, "16M", "free")?,
        0,
        "tlb/16M free when all taken"
    );
    let pid = getpid().to_string();
    let holders = class_field(0, "1M", "holders")?;
    ensure!(
        holders.starts_with(&format!("{pid}/")) && holders.ends_with("/156"),
        "tlb/1M holders {holders:?}, expected {pid}/COMM/156"
    );
    drop(d);
    ensure_eq!(class_num(0, "1M", "free")?, 156, "tlb/1M free after close");
    ensure_eq!(class_num(0, "16M", "free")?, 19, "tlb/16M free after close");
    Ok(())
}

/// Bad sizes, ids and flags; FREE_TLB permissions; a window whose output
/// cannot be written is freed.
pub fn errors_and_permissions() -> TestResult {
    let (a, b) = (open(0)?, open(0)?);
    for size in [0, 3 * MIB, 4 * GIB, u64::MAX] {
        expect_errno(
            alloc_compat(&a, size),
            libc::EINVAL,
            &format!("ALLOCATE_TLB {size}"),
        )?;
        expect_errno(
            tlb_allocate(&a, size, 0, 0).0,
            libc::EINVAL,
            &format!("TLB_ALLOCATE {size}"),
        )?;
    }
    let out = ctx(alloc_compat(&a, 2 * MIB), "ALLOCATE_TLB 2M")?;
    expect_errno(
        free_compat(&b, out.id),
        libc::EPERM,
        "FREE_TLB of another file's window",
    )?;
    expect_errno(free_compat(&a, 256), libc::EINVAL, "FREE_TLB 256")?;
    expect_errno(free_compat(&a, u32::MAX), libc::EINVAL, "FREE_TLB u32::MAX")?;
    expect_errno(
        free_compat(&a, 185),
        libc::EPERM,
        "FREE_TLB of the kernel's window",
    )?;
    expect_errno(
        free_compat(&a, 200),
        libc::EPERM,
        "FREE_TLB of an id the card lacks",
    )?;
    ctx(free_compat(&a, out.id), "FREE_TLB")?;
    expect_errno(free_compat(&a, out.id), libc::EPERM, "second FREE_TLB")?;
    for flags in [abi::LOCK_NONBLOCK | abi::LOCK_DEADLINE, 1 << 7] {
        expect_errno(
            tlb_allocate(&a, MIB, flags, 0).0,
            libc::EINVAL,
            &format!("TLB_ALLOCATE flags {flags:#x}"),
        )?;
    }
    let mut t = <abi::TlbAllocate as abi::Extensible>::new();
    t.size = MIB;
    t.reserved0 = 1;
    expect_errno(
        ioctl(&a, abi::IOCTL_TLB_ALLOCATE, &mut t),
        libc::EINVAL,
        "TLB_ALLOCATE reserved0",
    )?;
    // `in` readable at the end of a page, `out` in the inaccessible page
    // after it: EFAULT, and the window must not stay allocated.
    let (_m, end) = page_before_hole()?;
    let at = end - std::mem::size_of::<abi::AllocateTlbIn>();
    // SAFETY: `at` is the start of the last 16 bytes of our own writable page.
    unsafe { (at as *mut u64).write(MIB) };
    expect_errno(
        ioctl_addr(a.as_raw_fd(), abi::IOCTL_ALLOCATE_TLB, at),
        libc::EFAULT,
        "ALLOCATE_TLB with out unwritable",
    )?;
    ensure_eq!(class_num(0, "1M", "free")?, 156, "tlb/1M free after EFAULT");
    ensure_eq!(
        ctx(alloc_compat(&a, MIB), "ALLOCATE_TLB")?.id,
        0,
        "lowest window after EFAULT"
    );
    Ok(())
}

/// ENOMEM (C driver) and EBUSY (NONBLOCK) when none is free; a deadline
/// times out (ETIMEDOUT, at once when already past) and never early; a
/// blocking waiter gets the freed window; no barging.
pub fn enomem_vs_blocking() -> TestResult {
    let holder = open(0)?;
    let ids = exhaust(&holder, 2 * MIB)?;
    ensure_eq!(ids.len(), 10, "2M windows");
    let other = open(0)?;
    expect_errno(
        alloc_compat(&other, 2 * MIB),
        libc::ENOMEM,
        "ALLOCATE_TLB when full",
    )?;
    expect_errno(
        tlb_allocate(&other, 2 * MIB, abi::LOCK_NONBLOCK, 0).0,
        libc::EBUSY,
        "NONBLOCK TLB_ALLOCATE when full",
    )?;
    expect_errno(
        tlb_allocate(&other, 2 * MIB, abi::LOCK_DEADLINE, 1).0,
        libc::ETIMEDOUT,
        "TLB_ALLOCATE with a past deadline",
    )?;
    let deadline = now_ns() + 150_000_000;
    expect_errno(
        tlb_allocate(&other, 2 * MIB, abi::LOCK_DEADLINE, deadline).0,
        libc::ETIMEDOUT,
        "TLB_ALLOCATE until a deadline",
    )?;
    let now = now_ns();
    ensure!(
        now >= deadline,
        "TLB_ALLOCATE timed out {} ns early",
        deadline - now
    );

    let mut w = tlb_waiter("tlb waiter", 2 * MIB)?;
    wait_tlb_waiters(0, "2M", 1)?;
    // Queued waiters come first: no barging, even from the C command.
    ctx(free_compat(&holder, 161), "FREE_TLB 161")?;
    w.expect("got 161")?;
    expect_errno(
        alloc_compat(&other, 2 * MIB),
        libc::ENOMEM,
        "ALLOCATE_TLB after hand-off",
    )?;
    w.send("exit")?;
    w.wait()?;
    ensure_eq!(
        class_num(0, "2M", "free")?,
        1,
        "tlb/2M free after the waiter exited"
    );
    Ok(())
}

/// Waiters are served in arrival order; a killed holder's windows go to
/// them; waiters of other sizes are not served.
pub fn fifo_and_release_on_kill() -> TestResult {
    let holder = spawn("tlb holder", &[], |link| {
        let d = open(0)?;
        let ids = exhaust(&d, 16 * MIB)?;
        ensure_eq!(ids.len(), 19, "16M windows");
        link.send("full")?;
        link.expect("never")
    })?;
    let mut holder = holder;
    holder.expect("full")?;
    let mut waiters = Vec::new();
    for i in 0..4 {
        waiters.push(tlb_waiter(&format!("tlb waiter {i}"), 16 * MIB)?);
        wait_tlb_waiters(0, "16M", i + 1)?;
    }
    let other_size = tlb_waiter_blocked_on_full_2m()?;
    holder.kill_and_reap()?;
    // All 19 windows are free again: the four waiters took the lowest ones,
    // in their order of arrival.
    for (i, w) in waiters.iter_mut().enumerate() {
        w.expect(&format!("got {}", 166 + i))?;
    }
    ensure_eq!(class_num(0, "16M", "waiters")?, 0, "tlb/16M waiters");
    ensure_eq!(class_num(0, "16M", "free")?, 15, "tlb/16M free");
    ensure_eq!(
        class_num(0, "2M", "waiters")?,
        1,
        "tlb/2M waiter still queued"
    );
    let (holder2m, mut w2m) = other_size;
    drop(holder2m);
    w2m.expect("got 156")?;
    for w in waiters {
        w.send("exit")?;
        w.wait()?;
    }
    w2m.send("exit")?;
    w2m.wait()
}

/// Fills the 2M class from this process and queues a waiter for it.
fn tlb_waiter_blocked_on_full_2m() -> Result<(Device, Child), String> {
    let d = open(0)?;
    ensure_eq!(exhaust(&d, 2 * MIB)?.len(), 10, "2M windows");
    let w = tlb_waiter("2M waiter", 2 * MIB)?;
    wait_tlb_waiters(0, "2M", 1)?;
    Ok((d, w))
}

/// Unbinding the card wakes TLB waiters with ENODEV; the rebound card has
/// every window free.
pub fn unbind_wakes_tlb_waiters() -> TestResult {
    let bdf = bdf(0)?;
    let d = open(0)?;
    ensure_eq!(exhaust(&d, 16 * MIB)?.len(), 19, "16M windows");
    let mut w = spawn("tlb waiter (unbind)", &[], |link| {
        let d = open(0)?;
        link.send("ready")?;
        let (r, _) = tlb_allocate(&d, 16 * MIB, 0, 0);
        expect_errno(r, libc::ENODEV, "TLB_ALLOCATE across unbind")?;
        expect_errno(
            alloc_compat(&d, MIB),
            libc::ENODEV,
            "ALLOCATE_TLB after unbind",
        )?;
        expect_errno(free_compat(&d, 0), libc::ENODEV, "FREE_TLB after unbind")?;
        link.send("done")
    })?;
    w.expect("ready")?;
    wait_tlb_waiters(0, "16M", 1)?;
    sysfs_write(UNBIND, &bdf)?;
    let rebind = || sysfs_write(BIND, &bdf);
    let waited = w.expect("done").and_then(|_| w.wait());
    drop(d);
    rebind()?;
    waited?;
    ensure_eq!(
        class_num(0, "16M", "free")?,
        19,
        "tlb/16M free on the rebound card"
    );
    ensure_eq!(
        class_num(0, "16M", "waiters")?,
        0,
        "tlb/16M waiters on the rebound card"
    );
    Ok(())
}

/// Loads the module with `params` and waits for both cards to be bound
/// again.
fn reload_module(params: &str) -> TestResult {
    let name = c"tenstorrent";
    // SAFETY: delete_module with a valid NUL-terminated name.
    let rc = unsafe { libc::syscall(libc::SYS_delete_module, name.as_ptr(), libc::O_NONBLOCK) };
    ensure!(rc == 0, "delete_module: {}", io::Error::last_os_error());
    insert_module(params)?;
    bind_both()
}

fn insert_module(params: &str) -> TestResult {
    let module =
        fs::File::open("/tenstorrent.ko").map_err(|e| format!("open /tenstorrent.ko: {e}"))?;
    let params = std::ffi::CString::new(params).map_err(|e| e.to_string())?;
    // SAFETY: finit_module with an open module file and a NUL-terminated
    // parameter string.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_finit_module,
            module.as_raw_fd(),
            params.as_ptr(),
            0,
        )
    };
    if rc != 0 {
        return Err(format!(
            "finit_module({params:?}): {}",
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The Blackhole layout: 202 x 2 MiB (one kept) and BAR4 size / 4 GiB
/// windows of 4 GiB in BAR4 after BAR0's 512 MiB (the emulated Blackhole,
/// card 1, has a BAR4 of 8 GiB: 2 windows; a legacy device gets 8 with the
/// module parameter `emulated_tlb_layout=1`); a parameter value that means
/// nothing is refused. Restores the default.
pub fn layout_blackhole() -> TestResult {
    let result = blackhole_checks();
    let restored = reload_module("");
    result.and(restored)
}

fn blackhole_checks() -> TestResult {
    let (card, bar4_windows) = if emulated_cards() {
        (1, 2)
    } else {
        reload_module("emulated_tlb_layout=1")?;
        (0, 8)
    };
    for (name, windows, kernel) in [("2M", 202, 1), ("4G", bar4_windows, 0)] {
        ensure_eq!(
            class_num(card, name, "windows")?,
            windows,
            "tlb/{name} windows"
        );
        ensure_eq!(
            class_num(card, name, "kernel")?,
            kernel,
            "tlb/{name} kernel"
        );
    }
    for name in ["1M", "16M"] {
        ensure!(
            fs::metadata(format!(
                "/sys/class/tenstorrent/tenstorrent!{card}/tlb/{name}"
            ))
            .is_err(),
            "a Blackhole card shows a {name} window class"
        );
    }
    let d = open(card)?;
    ensure_eq!(
        exhaust(&d, 2 * MIB)?,
        (0..201).collect::<Vec<u32>>(),
        "2M ids"
    );
    let first = ctx(alloc_compat(&d, 4 * GIB), "ALLOCATE_TLB 4G")?;
    ensure_eq!(
        (first.id, first.mmap_offset_uc, first.mmap_offset_wc),
        (202, UC + 512 * MIB, WC + 512 * MIB),
        "first 4G window"
    );
    let second = ctx(alloc_compat(&d, 4 * GIB), "ALLOCATE_TLB 4G")?;
    ensure_eq!(
        (second.id, second.mmap_offset_uc),
        (203, UC + 512 * MIB + 4 * GIB),
        "second 4G window"
    );
    ensure_eq!(
        exhaust(&d, 4 * GIB)?.len(),
        bar4_windows as usize - 2,
        "remaining 4G windows"
    );
    expect_errno(alloc_compat(&d, MIB), libc::EINVAL, "1M on Blackhole")?;
    drop(d);
    // A value that means nothing: the module refuses to load.
    let name = c"tenstorrent";
    // SAFETY: delete_module with a valid NUL-terminated name.
    let rc = unsafe { libc::syscall(libc::SYS_delete_module, name.as_ptr(), libc::O_NONBLOCK) };
    ensure!(rc == 0, "delete_module: {}", io::Error::last_os_error());
    let refused = insert_module("emulated_tlb_layout=7");
    ensure!(
        refused.is_err(),
        "the module loaded with emulated_tlb_layout=7"
    );
    insert_module("emulated_tlb_layout=1")?;
    Ok(())
}

/// EXPORT_TLB_DMABUF: part of a window as a dma-buf descriptor.
pub(crate) fn export(
    dev: &impl AsRawFd,
    tlb_id: u32,
    offset: u64,
    size: u64,
) -> io::Result<std::fs::File> {
    let mut e = abi::ExportTlbDmabuf {
        argsz: 32,
        tlb_id,
        fd: -1,
        offset,
        size,
        ..abi::ExportTlbDmabuf::default()
    };
    ioctl(dev, abi::IOCTL_EXPORT_TLB_DMABUF, &mut e)?;
    // SAFETY: the kernel made `fd` for us, and nobody else owns it.
    Ok(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(e.fd) })
}

/// A field of a descriptor's `/proc/self/fdinfo` entry.
fn fdinfo(file: &std::fs::File, key: &str) -> Result<String, String> {
    let path = format!("/proc/self/fdinfo/{}", file.as_raw_fd());
    let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        .ok_or_else(|| format!("{path}: no {key} in {text:?}"))
}

/// EXPORT_TLB_DMABUF, as tt-kmd 2.10 (src/export.rs): its refusals, the
/// dma-buf it gives (its size, the exporter's name), and the window it
/// holds: out of the pool after FREE_TLB and after the close of its file,
/// back once the last export is closed; resets of the chip EBUSY while an
/// export lives.
pub fn export_dmabuf() -> TestResult {
    const MIB: u64 = 1 << 20;
    const PAGE: u64 = 4096;
    for n in 0..2u32 {
        let dev = open(n)?;
        let free_at_start = class_num(n, "2M", "free")?;
        let w = ctx(alloc_compat(&dev, 2 * MIB), "ALLOCATE_TLB")?;
        let id = w.id;
        let bad = |e: abi::ExportTlbDmabuf, what: &str| {
            expect_errno(
                ioctl(&dev, abi::IOCTL_EXPORT_TLB_DMABUF, &mut e.clone()),
                libc::EINVAL,
                what,
            )
        };
        let good = abi::ExportTlbDmabuf {
            argsz: 32,
            tlb_id: id,
            ..abi::ExportTlbDmabuf::default()
        };
        bad(abi::ExportTlbDmabuf { argsz: 31, ..good }, "argsz 31")?;
        bad(abi::ExportTlbDmabuf { argsz: 0, ..good }, "argsz 0")?;
        bad(abi::ExportTlbDmabuf { flags: 1, ..good }, "flags 1")?;
        bad(
            abi::ExportTlbDmabuf {
                tlb_id: 256,
                ..good
            },
            "tlb_id 256",
        )?;
        bad(abi::ExportTlbDmabuf { offset: 1, ..good }, "offset 1")?;
        bad(
            abi::ExportTlbDmabuf {
                size: PAGE + 1,
                ..good
            },
            "size not page-aligned",
        )?;
        bad(
            abi::ExportTlbDmabuf {
                offset: 2 * MIB,
                ..good
            },
            "offset at the end",
        )?;
        bad(
            abi::ExportTlbDmabuf {
                size: 4 * MIB,
                ..good
            },
            "size past the window",
        )?;
        bad(
            abi::ExportTlbDmabuf {
                offset: MIB,
                size: 2 * MIB,
                ..good
            },
            "range past the window",
        )?;
        let other = open(n)?;
        expect_errno(
            export(&other, id, 0, 0),
            libc::EPERM,
            "a window another file holds",
        )?;
        expect_errno(
            export(&other, 150, 0, 0),
            libc::EPERM,
            "a window nobody holds",
        )?;

        let whole = ctx(export(&dev, id, 0, 0), "export the whole window")?;
        ensure_eq!(
            fdinfo(&whole, "size:")?,
            (2 * MIB).to_string(),
            "card {n}: dma-buf size"
        );
        ensure_eq!(
            fdinfo(&whole, "exp_name:")?,
            "tenstorrent",
            "card {n}: exporter"
        );
        let part = ctx(
            export(&dev, id, PAGE, 2 * PAGE),
            "export part of the window",
        )?;
        ensure_eq!(
            fdinfo(&part, "size:")?,
            (2 * PAGE).to_string(),
            "card {n}: part's size"
        );

        // No chip reset under an importer; the others are fine.
        let mut r = abi::ResetDevice::default();
        r.input.flags = abi::RESET_DEVICE_CONFIG_WRITE;
        expect_errno(
            ioctl(&dev, abi::IOCTL_RESET_DEVICE, &mut r),
            libc::EBUSY,
            "CONFIG_WRITE while exported",
        )?;
        r.input.flags = abi::RESET_DEVICE_RESTORE_STATE;
        expect_ok(
            ioctl(&dev, abi::IOCTL_RESET_DEVICE, &mut r),
            "RESTORE_STATE while exported",
        )?;

        // The exports hold the window past FREE_TLB.
        expect_ok(free_compat(&dev, id), "FREE_TLB of an exported window")?;
        ensure_eq!(
            class_num(n, "2M", "free")?,
            free_at_start - 1,
            "card {n}: free after FREE_TLB"
        );
        drop(whole);
        ensure_eq!(
            class_num(n, "2M", "free")?,
            free_at_start - 1,
            "card {n}: free with one export left"
        );
        drop(part);
        ensure_eq!(
            class_num(n, "2M", "free")?,
            free_at_start,
            "card {n}: free after the last export"
        );

        // And past the close of the file that allocated it.
        let holder = open(n)?;
        let w = ctx(alloc_compat(&holder, 2 * MIB), "ALLOCATE_TLB")?;
        let kept = ctx(export(&holder, w.id, 0, 0), "export")?;
        drop(holder);
        ensure_eq!(
            class_num(n, "2M", "free")?,
            free_at_start - 1,
            "card {n}: free after the holder closed"
        );
        drop(kept);
        ensure_eq!(
            class_num(n, "2M", "free")?,
            free_at_start,
            "card {n}: free after its export closed"
        );
        expect_ok(
            ioctl(&dev, abi::IOCTL_RESET_DEVICE, &mut r),
            "RESTORE_STATE",
        )?;
    }
    Ok(())
}

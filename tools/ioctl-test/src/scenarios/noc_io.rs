//! NOC_READ and NOC_WRITE (tt-kmd 2.11; src/noc_io.rs): every refusal,
//! each width on both NOCs of both cards checked against a TLB window the
//! test maps onto the same tile and against the emulator's view, the
//! kernel window shared with the driver's own users, and resets: a file
//! doing NOC I/O while another resets the card sees only right values or
//! ENODEV, never SIGBUS, and the kernel window is aimed again afterwards.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use tt_arbiter::abi::{self, Extensible};

use super::info::bytes_of;
use super::mapping::{alloc, chip, configure, noc_read as emu_read, tensix};
use crate::card::{hex, Chip, Control, Mmio};
use crate::util::*;
use crate::worker::wait_all;

const MIB: u64 = 1 << 20;
/// Where in a Tensix tile's L1 the scenarios write.
const BASE: u64 = 0x4_0000;

/// NOC_READ with `arg` as given: the value read.
fn read_with(dev: &impl AsRawFd, mut arg: abi::NocRead) -> io::Result<u64> {
    ioctl(dev, abi::IOCTL_NOC_READ, &mut arg).map(|_| arg.value)
}

fn read_arg(tile: (u16, u16), noc: u8, addr: u64, width: u8) -> abi::NocRead {
    abi::NocRead {
        x: tile.0,
        y: tile.1,
        noc,
        width,
        addr,
        ..abi::NocRead::new()
    }
}

fn write_arg(tile: (u16, u16), noc: u8, addr: u64, width: u8, value: u64) -> abi::NocWrite {
    abi::NocWrite {
        x: tile.0,
        y: tile.1,
        noc,
        width,
        addr,
        value,
        ..abi::NocWrite::new()
    }
}

pub(super) fn noc_read(
    dev: &impl AsRawFd,
    tile: (u16, u16),
    noc: u8,
    addr: u64,
    width: u8,
) -> io::Result<u64> {
    read_with(dev, read_arg(tile, noc, addr, width))
}

pub(super) fn noc_write(
    dev: &impl AsRawFd,
    tile: (u16, u16),
    noc: u8,
    addr: u64,
    width: u8,
    value: u64,
) -> io::Result<i32> {
    ioctl(
        dev,
        abi::IOCTL_NOC_WRITE,
        &mut write_arg(tile, noc, addr, width, value),
    )
}

/// NOC1's coordinates of NOC0's tile `tile`: the emulator mirrors them as
/// the chips do (grid 10 x 12 on Wormhole, 17 x 12 on Blackhole).
fn on_noc1(c: Chip, (x, y): (u16, u16)) -> (u16, u16) {
    let (w, h) = match c {
        Chip::Wormhole => (10, 12),
        Chip::Blackhole => (17, 12),
    };
    (w - 1 - x, h - 1 - y)
}

/// The ARC tile and the NOC address of its NOC_NODE_ID register (tt-kmd
/// test/tlbs.cpp: ARC_NOC_NODE_ID and the Blackhole ARC's node id).
fn arc_node_id(c: Chip) -> ((u16, u16), u64) {
    match c {
        Chip::Wormhole => ((0, 10), 0xF_FFB2_002C),
        Chip::Blackhole => ((8, 0), 0x8005_0044),
    }
}

fn mask(width: u8) -> u64 {
    if width == 8 {
        u64::MAX
    } else {
        (1 << (8 * width)) - 1
    }
}

/// The 16 bytes at `at` through the window mapping `map` (aimed at BAR0
/// address 0 of the tile's L1, so the offset is the address).
fn window_bytes(map: &Mmio, at: u64) -> Vec<u8> {
    (0..4)
        .flat_map(|i| map.read32(at as usize + 4 * i).to_le_bytes())
        .collect()
}

fn fill_window(map: &Mmio, at: u64, byte: u8) {
    for i in 0..4 {
        map.write32(at as usize + 4 * i, u32::from_ne_bytes([byte; 4]));
    }
}

/// Every refusal: EINVAL for a short argsz, flags, reserved0, noc, width,
/// alignment, coordinates past 63 and (Wormhole) addresses of 2^36 and up;
/// E2BIG for a long argsz with a non-zero tail or above 4096; EFAULT for a
/// bad pointer; and a refused NOC_WRITE writes nothing. Against a driver
/// without one of these checks the call succeeds (and writes), which fails
/// here (seen: without the flags check, "NOC_READ flags 1: got success").
/// The alignment refusals are made twice: by the argument check and by the
/// kernel's I/O accessors, which refuse an offset not aligned to the access;
/// without the first the answers here stay right, and the KUnit suite
/// `tenstorrent_noc_io` is what fails.
pub fn refusals() -> TestResult {
    for n in 0..2u32 {
        let c = chip(n);
        let tile = tensix(c);
        let dev = open(n)?;
        let addr = BASE + 0x800;
        let mut ctl = Control::open(n as usize)?;
        let before = hex(&[0x5a; 16]);
        ctl.command(&format!(
            "noc-write {} {} {addr:#x} {before}",
            tile.0, tile.1
        ))?;
        let good_r = read_arg(tile, 0, addr, 4);
        let good_w = write_arg(tile, 0, addr, 4, 0x1234_5678);
        type Patch = fn(&mut abi::NocRead);
        let mut all: Vec<(&str, i32, Patch)> = vec![
            (
                "argsz 0",
                libc::EINVAL,
                (|a: &mut abi::NocRead| a.argsz = 0) as Patch,
            ),
            ("argsz 31", libc::EINVAL, |a| a.argsz = 31),
            ("argsz 4097", libc::E2BIG, |a| a.argsz = 4097),
            ("flags 1", libc::EINVAL, |a| a.flags = 1),
            ("flags 1 << 31", libc::EINVAL, |a| a.flags = 1 << 31),
            ("reserved0[0]", libc::EINVAL, |a| a.reserved0 = [1, 0]),
            ("reserved0[1]", libc::EINVAL, |a| a.reserved0 = [0, 0x80]),
            ("noc 2", libc::EINVAL, |a| a.noc = 2),
            ("noc 255", libc::EINVAL, |a| a.noc = 255),
            ("width 0", libc::EINVAL, |a| a.width = 0),
            ("width 3", libc::EINVAL, |a| a.width = 3),
            ("width 16", libc::EINVAL, |a| a.width = 16),
            ("width 2 at an odd address", libc::EINVAL, |a| {
                a.width = 2;
                a.addr += 1
            }),
            ("width 4 at +2", libc::EINVAL, |a| a.addr += 2),
            ("width 8 at +4", libc::EINVAL, |a| {
                a.width = 8;
                a.addr += 4
            }),
            ("x 64", libc::EINVAL, |a| a.x = 64),
            ("y 64", libc::EINVAL, |a| a.y = 64),
            ("x 0xFFFF", libc::EINVAL, |a| a.x = 0xFFFF),
        ];
        if c == Chip::Wormhole {
            all.push(("address 2^36 (Wormhole)", libc::EINVAL, |a| {
                a.addr = 1 << 36
            }));
        }
        for (what, errno, patch) in &all {
            let mut r = good_r;
            patch(&mut r);
            r.value = 0x7777;
            let mut copy = r;
            expect_errno(
                ioctl(&dev, abi::IOCTL_NOC_READ, &mut copy),
                *errno,
                &format!("card {n}: NOC_READ {what}"),
            )?;
            ensure_eq!(copy, r, "card {n}: NOC_READ {what} wrote its struct");
            // The same refusal for NOC_WRITE, which must write nothing.
            let mut w = good_w;
            w.argsz = r.argsz;
            w.flags = r.flags;
            w.reserved0 = r.reserved0;
            w.noc = r.noc;
            w.width = r.width;
            w.x = r.x;
            w.y = r.y;
            w.addr = r.addr;
            expect_errno(
                ioctl(&dev, abi::IOCTL_NOC_WRITE, &mut w),
                *errno,
                &format!("card {n}: NOC_WRITE {what}"),
            )?;
        }
        // A long argsz: a non-zero byte past the kernel's struct is E2BIG.
        let mut long = [0u8; 48];
        long[..32].copy_from_slice(&bytes_of(&good_w));
        long[..4].copy_from_slice(&48u32.to_ne_bytes());
        long[40] = 1;
        expect_errno(
            ioctl_addr(
                dev.as_raw_fd(),
                abi::IOCTL_NOC_WRITE,
                long.as_mut_ptr() as usize,
            ),
            libc::E2BIG,
            &format!("card {n}: NOC_WRITE argsz 48, non-zero tail"),
        )?;
        ensure_eq!(
            emu_read(n, tile, addr, 16)?,
            before,
            "card {n}: a refused NOC_WRITE wrote"
        );
        // Bad pointers.
        let (_hole, at) = unmapped_addr()?;
        for cmd in [abi::IOCTL_NOC_READ, abi::IOCTL_NOC_WRITE] {
            expect_errno(
                ioctl_addr(dev.as_raw_fd(), cmd, at),
                libc::EFAULT,
                &format!("card {n}: {cmd:#x} at an unmapped address"),
            )?;
        }
        // NOC_READ's answer cannot be written back: EFAULT.
        let page = read_only_struct(&good_r)?;
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), abi::IOCTL_NOC_READ, page.addr()),
            libc::EFAULT,
            &format!("card {n}: NOC_READ in read-only memory"),
        )?;
        // The good ones work (the refusals above were for their fault).
        expect_ok(read_with(&dev, good_r), "NOC_READ")?;
        let mut w = good_w;
        expect_ok(ioctl(&dev, abi::IOCTL_NOC_WRITE, &mut w), "NOC_WRITE")?;
        ensure_eq!(
            emu_read(n, tile, addr, 4)?,
            hex(&0x1234_5678u32.to_le_bytes()),
            "card {n}: NOC_WRITE"
        );
    }
    Ok(())
}

/// A page holding `t` at its start, then made read-only.
fn read_only_struct<T: abi::AbiStruct>(t: &T) -> Result<Shared, String> {
    let m = Shared::new(page_size())?;
    // SAFETY: `t` fits in the fresh page, which nothing else refers to.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (t as *const T).cast::<u8>(),
            m.addr() as *mut u8,
            std::mem::size_of::<T>(),
        )
    };
    // SAFETY: our own mapping, which no Rust reference points into.
    let rc = unsafe { libc::mprotect(m.addr() as *mut libc::c_void, page_size(), libc::PROT_READ) };
    ensure!(rc == 0, "mprotect: {}", io::Error::last_os_error());
    Ok(m)
}

/// 1, 2, 4 and 8-byte NOC_WRITEs and NOC_READs on both NOCs of both cards,
/// checked through a 2 MiB window the test maps onto the same tile (NOC 0)
/// and against the emulator's view: exactly `width` bytes at exactly
/// `addr` change, a read is zero-extended, NOC 1's mirrored coordinates
/// reach the same tile, and the ARC tile's node id reads back the
/// coordinates of the NOC that carried the request. A driver that wrote a
/// wider access, split or misplaced it, or ignored `noc`, fails here (seen:
/// with `noc` ignored, NOC 1's write landed on another tile; with 8-byte
/// reads made as 4-byte ones, the value came back cut).
pub fn widths_against_a_window() -> TestResult {
    for n in 0..2u32 {
        let c = chip(n);
        let tile = tensix(c);
        let dev = open(n)?;
        let w = ctx(alloc(&dev, 2 * MIB), "ALLOCATE_TLB")?;
        expect_ok(configure(&dev, w.id, tile, 0), "CONFIGURE_TLB")?;
        let map = ctx(
            Mmio::new(&dev, w.mmap_offset_uc, 2 * MIB as usize),
            "mmap the window",
        )?;
        for noc in 0..2u8 {
            let at_noc = if noc == 0 { tile } else { on_noc1(c, tile) };
            for (k, width) in [1u8, 2, 4, 8].into_iter().enumerate() {
                let cell = BASE + u64::from(noc) * 0x100 + k as u64 * 0x10;
                let value = (0x8877_6655_4433_2211u64 ^ (u64::from(n) << 60) ^ u64::from(noc))
                    & mask(width);
                // Writes: the cell filled with 0xEE through the window, the
                // value written at an offset of its own width.
                fill_window(&map, cell, 0xEE);
                let addr = cell + u64::from(width);
                let what = format!("card {n} noc {noc} width {width}");
                expect_ok(
                    noc_write(&dev, at_noc, noc, addr, width, value | !mask(width)),
                    &format!("{what}: NOC_WRITE"),
                )?;
                let mut want = vec![0xEE; 16];
                let at = usize::from(width);
                want[at..2 * at].copy_from_slice(&value.to_le_bytes()[..at]);
                ensure_eq!(
                    window_bytes(&map, cell),
                    want,
                    "{what}: the cell through the window"
                );
                ensure_eq!(
                    emu_read(n, tile, cell, 16)?,
                    hex(&want),
                    "{what}: the cell as the emulator sees it"
                );
                // Reads: the value, zero-extended, and the 0xEE before it.
                ensure_eq!(
                    expect_ok(
                        noc_read(&dev, at_noc, noc, addr, width),
                        &format!("{what}: NOC_READ")
                    )?,
                    value,
                    "{what}: NOC_READ of the value"
                );
                ensure_eq!(
                    expect_ok(
                        noc_read(&dev, at_noc, noc, cell, width),
                        &format!("{what}: NOC_READ")
                    )?,
                    0xEEEE_EEEE_EEEE_EEEE & mask(width),
                    "{what}: NOC_READ before the value"
                );
            }
            // What the window writes, each width reads at each offset.
            let cell = BASE + 0x200 + u64::from(noc) * 0x10;
            let word = 0x0123_4567_89AB_CDEFu64 ^ (u64::from(n) << 8) ^ u64::from(noc);
            map.write32(cell as usize, word as u32);
            map.write32(cell as usize + 4, (word >> 32) as u32);
            for width in [1u8, 2, 4, 8] {
                for offset in (0..8).step_by(usize::from(width)) {
                    let got = noc_read(&dev, at_noc, noc, cell + offset as u64, width);
                    ensure_eq!(
                        expect_ok(got, "NOC_READ")?,
                        (word >> (8 * offset)) & mask(width),
                        "card {n} noc {noc}: {width} bytes at +{offset} of what the window wrote"
                    );
                }
            }
            // The ARC tile's NIU answers in the carrying NOC's coordinates.
            let (arc, node_id) = arc_node_id(c);
            let arc_at = if noc == 0 { arc } else { on_noc1(c, arc) };
            let id = expect_ok(noc_read(&dev, arc_at, noc, node_id, 4), "NOC_READ node id")?;
            ensure_eq!(
                (id & 0x3f, (id >> 6) & 0x3f),
                (u64::from(arc_at.0), u64::from(arc_at.1)),
                "card {n} noc {noc}: ARC node id {id:#x}"
            );
        }
        // The client library's calls (tools/client).
        let at = BASE + 0x300;
        fill_window(&map, at, 0xEE);
        ctx(
            dev.noc_write(tile.0, tile.1, 0, at, 2, 0x5_BEEF),
            "Device::noc_write",
        )?;
        ensure_eq!(
            emu_read(n, tile, at, 4)?,
            hex(&[0xEF, 0xBE, 0xEE, 0xEE]),
            "card {n}: Device::noc_write of 2 bytes"
        );
        ensure_eq!(
            ctx(dev.noc_read(tile.0, tile.1, 0, at, 4), "Device::noc_read")?,
            0xEEEE_BEEF,
            "card {n}: Device::noc_read"
        );
        drop(map);
        expect_ok(super::mapping::free(&dev, w.id), "FREE_TLB")?;
    }
    Ok(())
}

/// The kernel's window is shared: two files reading different tiles, one
/// writing a third, and telemetry reads (the driver's own ARC accesses:
/// through the same window on Blackhole; Wormhole's go straight through
/// BAR0), all at once on each card, each see only their own values. A NOC_READ/NOC_WRITE that aimed the window without the
/// mutex its other users take reads another user's tile here (seen: with
/// the mutex left out of NOC_READ, a reader got 0 in round 118).
pub fn shares_the_kernel_window() -> TestResult {
    const ROUNDS: u32 = 150;
    for n in 0..2u32 {
        let c = chip(n);
        let (x, y) = tensix(c);
        let tiles = [(x, y), (x + 1, y), (x, y + 1)];
        let mut ctl = Control::open(n as usize)?;
        for (i, t) in tiles.iter().enumerate() {
            let v = 0x1111_1111u32 * (i as u32 + 1);
            ctl.command(&format!(
                "noc-write {} {} {BASE:#x} {}",
                t.0,
                t.1,
                hex(&v.to_le_bytes())
            ))?;
        }
        let go = Shared::new(page_size())?;
        let mut children = Vec::new();
        for (i, &t) in tiles.iter().enumerate() {
            let go = &go;
            children.push(spawn(&format!("noc-user-{i}"), &[], move |link| {
                let dev = open(n)?;
                let mine = 0x1111_1111u64 * (i as u64 + 1);
                link.send("ready")?;
                while go.u32(0).load(Ordering::Acquire) == 0 {
                    std::hint::spin_loop();
                }
                for round in 0..ROUNDS {
                    if i == 2 {
                        // The writer: a value of its own each round, read back.
                        let v = mine ^ u64::from(round);
                        expect_ok(noc_write(&dev, t, 0, BASE, 4, v), "NOC_WRITE")?;
                        let back = expect_ok(noc_read(&dev, t, 0, BASE, 4), "NOC_READ")?;
                        ensure_eq!(back, v, "round {round}: the writer's tile");
                    } else {
                        let got = expect_ok(noc_read(&dev, t, 0, BASE, 4), "NOC_READ")?;
                        ensure_eq!(got, mine, "round {round}: tile {t:?}");
                    }
                }
                Ok(())
            })?);
        }
        let telemetry = spawn("telemetry-reader", &[], |link| {
            let path = format!("/sys/class/tenstorrent/tenstorrent!{n}/tt_axiclk");
            let first = sysfs(&path)?;
            link.send("ready")?;
            while go.u32(0).load(Ordering::Acquire) == 0 {
                std::hint::spin_loop();
            }
            while go.u32(1).load(Ordering::Acquire) == 0 {
                ensure_eq!(sysfs(&path)?, first, "{path}");
            }
            Ok(())
        })?;
        children.push(telemetry);
        for child in &mut children {
            child.expect("ready")?;
        }
        go.u32(0).store(1, Ordering::Release);
        let telemetry = children
            .pop()
            .ok_or_else(|| "no telemetry reader".to_string())?;
        wait_all(children)?;
        go.u32(1).store(1, Ordering::Release);
        telemetry.wait()?;
    }
    Ok(())
}

/// What a worker doing NOC I/O during a reset counts, in shared memory:
/// successes, then the first error's errno.
const DONE: usize = 0;
const OKS: usize = 1;
const ERRNO: usize = 2;
const STOP: usize = 3;

/// Resets with NOC I/O running. A file fenced by a reset (CONFIG_WRITE,
/// from another file) doing NOC_READ and NOC_WRITE in a loop: every read
/// that succeeds returns the value written before the reset (a read made
/// while the chip reset, or through a window the reset cleared, would see
/// something else: the Blackhole's reset clears its tiles and its window
/// registers), the first error is ENODEV and every later call is ENODEV,
/// and it is never killed by SIGBUS. The resetter's file then writes and
/// reads through the re-aimed window. A hot reset of the link
/// (RESET_PCIE_LINK, which fences nobody) with NOC I/O running: every call
/// succeeds with the right value (seen: with the reset mutex left out of
/// NOC I/O, a read during the link reset on the Wormhole returned 0, the
/// window's register having been reset under it).
pub fn during_resets() -> TestResult {
    for n in 0..2u32 {
        let c = chip(n);
        let tile = tensix(c);
        let mirrored = on_noc1(c, tile);
        let resetter = open(n)?;
        let value = 0x600D_0000 | u64::from(n);
        expect_ok(
            noc_write(&resetter, tile, 0, BASE, 4, value),
            "NOC_WRITE the value",
        )?;
        for flags in [
            abi::RESET_DEVICE_RESET_PCIE_LINK,
            abi::RESET_DEVICE_CONFIG_WRITE,
        ] {
            let fenced = flags == abi::RESET_DEVICE_CONFIG_WRITE;
            let tally = Shared::new(page_size())?;
            let t = &tally;
            let mut worker = spawn("noc-io-worker", &[], move |link| {
                let dev = open(n)?;
                let mut first = true;
                loop {
                    // Read before the call: the call made after the reset
                    // returned is checked too (a worker that did not run
                    // during the reset still meets its fence; seen passing
                    // the fenced check with no error at all otherwise).
                    let stopping = t.u64(STOP).load(Ordering::Acquire) != 0;
                    let r = noc_read(&dev, tile, 0, BASE, 4)
                        .and_then(|v| noc_write(&dev, mirrored, 1, BASE + 8, 4, v).map(|_| v));
                    match r {
                        Ok(v) => {
                            ensure_eq!(v, value, "a NOC_READ around the reset");
                            t.u64(OKS).fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            let errno = e.raw_os_error().unwrap_or(0);
                            t.u64(ERRNO).store(errno as u64, Ordering::Relaxed);
                            ensure_eq!(errno, libc::ENODEV, "the error of NOC I/O: {e}");
                            // Every later call too.
                            expect_errno(
                                noc_read(&dev, tile, 0, BASE, 4),
                                libc::ENODEV,
                                "NOC_READ",
                            )?;
                            expect_errno(
                                noc_write(&dev, tile, 0, BASE, 4, 0),
                                libc::ENODEV,
                                "NOC_WRITE",
                            )?;
                            break;
                        }
                    }
                    if first {
                        link.send("running")?;
                        first = false;
                    }
                    if stopping {
                        break;
                    }
                }
                t.u64(DONE).store(1, Ordering::Release);
                Ok(())
            })?;
            worker.expect("running")?;
            let mut r = abi::ResetDevice::default();
            r.input.output_size_bytes = 8;
            r.input.flags = flags;
            expect_ok(
                ioctl(&resetter, abi::IOCTL_RESET_DEVICE, &mut r),
                &format!("card {n}: RESET_DEVICE {flags}"),
            )?;
            ensure_eq!(r.output.result, 0, "card {n}: RESET_DEVICE {flags} result");
            if fenced {
                // The Blackhole reset itself on it: its configuration
                // space back, as other_files_fenced does.
                r.input.flags = abi::RESET_DEVICE_RESTORE_STATE;
                expect_ok(
                    ioctl(&resetter, abi::IOCTL_RESET_DEVICE, &mut r),
                    "RESTORE_STATE",
                )?;
            }
            tally.u64(STOP).store(1, Ordering::Release);
            // A SIGBUS, or a wrong value or errno, fails here.
            worker
                .wait()
                .map_err(|e| format!("card {n}: around reset {flags}: {e}"))?;
            ensure!(
                tally.u64(DONE).load(Ordering::Acquire) == 1,
                "card {n}: the worker did not finish"
            );
            let errno = tally.u64(ERRNO).load(Ordering::Relaxed);
            if fenced {
                ensure_eq!(
                    errno,
                    libc::ENODEV as u64,
                    "card {n}: the fenced worker's error"
                );
            } else {
                ensure_eq!(errno, 0, "card {n}: an error around the link reset");
            }
            // The resetter's file (and a newer one) go on: the window is
            // aimed again, whatever the reset left in its register.
            let fresh = 0x0A11_0000 | u64::from(flags) << 8 | u64::from(n);
            for dev in [&resetter, &open(n)?] {
                expect_ok(
                    noc_write(dev, tile, 0, BASE + 0x40, 4, fresh),
                    "NOC_WRITE after the reset",
                )?;
                ensure_eq!(
                    expect_ok(noc_read(dev, tile, 0, BASE + 0x40, 4), "NOC_READ")?,
                    fresh,
                    "card {n}: NOC_READ after reset {flags}"
                );
            }
            ensure_eq!(
                emu_read(n, tile, BASE + 0x40, 4)?,
                hex(&(fresh as u32).to_le_bytes()),
                "card {n}: the tile after reset {flags}"
            );
            // The value the next round's worker expects.
            expect_ok(
                noc_write(&resetter, tile, 0, BASE, 4, value),
                "NOC_WRITE the value again",
            )?;
        }
    }
    Ok(())
}

//! NOC cleanup (SET_NOC_CLEANUP, tt-kmd 2.10): the write a file registered
//! is made through the kernel's own window when the file is released,
//! before its locks are, also after `kill -9`; a cleared one is not made;
//! bad arguments are `EINVAL`.

use std::io;
use std::os::fd::AsRawFd;

use tt_arbiter::abi;

use super::mapping::{alloc, chip, configure, noc_read, tensix};
use crate::card::{hex, Control, Mmio};
use crate::util::*;

const MIB: u64 = 1 << 20;
const LOCK: u32 = 30;

fn cleanup(x: u16, y: u16, addr: u64, data: u64) -> abi::SetNocCleanup {
    abi::SetNocCleanup {
        argsz: 32,
        enabled: 1,
        x: x as u8,
        y: y as u8,
        addr,
        data,
        ..abi::SetNocCleanup::default()
    }
}

fn set(dev: &impl AsRawFd, arg: &mut abi::SetNocCleanup) -> io::Result<i32> {
    ioctl(dev, abi::IOCTL_SET_NOC_CLEANUP, arg)
}

/// The write lands after a kill -9 of its file's process, on both cards,
/// and the next holder of that process's lock reads it through a window of
/// its own the moment it is granted. (That the write comes before the
/// release of the locks is the release code's order; this test catches a
/// write that is lost, or made late enough for the next holder to see the
/// old value, but a write made just after the release can slip past it:
/// it was seen to pass with the order reversed.)
pub fn noc_cleanup_after_kill() -> TestResult {
    for n in 0..2u32 {
        let tile = tensix(chip(n));
        let addr = 0x2_0040 + 0x10 * u64::from(n);
        let data = 0xc1ea_0000u32 + n;
        let mut ctl = Control::open(n as usize)?;
        ctl.command(&format!(
            "noc-write {} {} {addr:#x} {}",
            tile.0,
            tile.1,
            hex(&0u32.to_le_bytes())
        ))?;
        let mut dying = spawn("cleaner", &[], move |link| {
            let dev = open(n)?;
            let mut arg = cleanup(tile.0, tile.1, addr, u64::from(data) | 0xffff << 32);
            expect_ok(set(&dev, &mut arg), "SET_NOC_CLEANUP")?;
            expect_ok(acquire(&dev, LOCK, 0, 0).0, "ACQUIRE")?;
            link.send("armed")?;
            let _ = link.recv();
            Ok(())
        })?;
        dying.expect("armed")?;
        let mut next = spawn("next holder", &[], move |link| {
            let dev = open(n)?;
            let w = ctx(alloc(&dev, 2 * MIB), "allocate a window")?;
            expect_ok(configure(&dev, w.id, tile, 0), "CONFIGURE_TLB")?;
            let map = ctx(Mmio::new(&dev, w.mmap_offset_uc, 2 * MIB as usize), "mmap")?;
            link.send("waiting")?;
            expect_ok(acquire(&dev, LOCK, 0, 0).0, "blocking ACQUIRE")?;
            link.send(&format!("{:#x}", map.read32(addr as usize)))?;
            Ok(())
        })?;
        next.expect("waiting")?;
        let dev = open(n)?;
        wait_waiters(&dev, LOCK, 1)?;
        dying.kill(libc::SIGKILL)?;
        let seen = next.recv()?;
        ensure_eq!(
            seen,
            format!("{data:#x}"),
            "card {n}: what the next holder read at its grant"
        );
        ensure_eq!(
            noc_read(n, tile, addr, 4)?,
            hex(&data.to_le_bytes()),
            "card {n}: the tile after the cleanup"
        );
        let status = next.status()?;
        ensure!(status == 0, "next holder: {}", describe_status(status));
        let _ = dying.status();
        ensure_free(&dev, LOCK)?;
    }
    Ok(())
}

/// A cleanup cleared (enabled 0) is not made; a second SET replaces the
/// first; bad arguments are EINVAL and leave the registered one in place.
pub fn noc_cleanup_cleared_and_refusals() -> TestResult {
    for n in 0..2u32 {
        let tile = tensix(chip(n));
        let addr = 0x2_0080;
        let mut ctl = Control::open(n as usize)?;
        let put = |ctl: &mut Control, v: u32| {
            ctl.command(&format!(
                "noc-write {} {} {addr:#x} {}",
                tile.0,
                tile.1,
                hex(&v.to_le_bytes())
            ))
        };
        put(&mut ctl, 0x0ddb_a115)?;
        let dev = open(n)?;
        let mut arg = cleanup(tile.0, tile.1, addr, 0xdead_beef);
        expect_ok(set(&dev, &mut arg), "SET_NOC_CLEANUP")?;
        arg.enabled = 0;
        expect_ok(set(&dev, &mut arg), "SET_NOC_CLEANUP, disabled")?;
        drop(dev);
        ensure_eq!(
            noc_read(n, tile, addr, 4)?,
            hex(&0x0ddb_a115u32.to_le_bytes()),
            "card {n}: a cleared cleanup wrote"
        );

        let dev = open(n)?;
        let mut first = cleanup(tile.0, tile.1, addr, 0x1111_1111);
        expect_ok(set(&dev, &mut first), "SET_NOC_CLEANUP")?;
        let good = cleanup(tile.0, tile.1, addr + 4, 0x2222_2222);
        let mut bad = [good; 9];
        bad[0].argsz = 31;
        // Checked since tt-kmd 2.11.
        bad[1].reserved0 = 1;
        bad[2].flags = 1;
        bad[3].enabled = 2;
        bad[4].addr = addr + 2;
        bad[5].noc = 2;
        bad[6].x = 64;
        bad[7].y = 64;
        // Beyond what Wormhole's windows reach (36 bits); Blackhole's 64-bit
        // addresses go anywhere, so only an unaligned one is bad there.
        bad[8].addr = if n == 0 { 1 << 36 } else { 1 };
        for (i, b) in bad.iter_mut().enumerate() {
            expect_errno(
                set(&dev, b),
                libc::EINVAL,
                &format!("bad SET_NOC_CLEANUP {i}"),
            )?;
        }
        let mut second = good;
        expect_ok(set(&dev, &mut second), "a second SET_NOC_CLEANUP")?;
        put(&mut ctl, 0)?;
        ctl.command(&format!(
            "noc-write {} {} {:#x} {}",
            tile.0,
            tile.1,
            addr + 4,
            hex(&0u32.to_le_bytes())
        ))?;
        drop(dev);
        ensure_eq!(
            noc_read(n, tile, addr, 8)?,
            format!(
                "{}{}",
                hex(&0u32.to_le_bytes()),
                hex(&0x2222_2222u32.to_le_bytes())
            ),
            "card {n}: only the second cleanup is made"
        );
    }
    Ok(())
}

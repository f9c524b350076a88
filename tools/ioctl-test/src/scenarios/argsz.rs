//! argsz negotiation, the same on every command that has an `argsz`:
//! tt-kmd 2.11's (SET_NOC_CLEANUP, SET_POWER_STATE, NOC_READ, NOC_WRITE,
//! SMC_MSG) and this module's own (ACQUIRE, ACQUIRE_SET, RELEASE, QUERY,
//! TLB_ALLOCATE). One table, one set of checks (tt-kmd's
//! test/ioctl_argsz.cpp, plus this module's 4096 cap): argsz 0 and one
//! short EINVAL, also when the bytes past argsz are not readable (nothing
//! past argsz is read); argsz equal accepted, also at the very end of
//! readable memory; a larger argsz with a zero tail accepted (and the tail
//! left alone), with a non-zero byte anywhere in it E2BIG; above 4096
//! E2BIG; an unknown flag EINVAL.
//!
//! EXPORT_TLB_DMABUF is the exception, as in tt-kmd: its `argsz` must be
//! exactly 32 (tt-kmd 2.10 and its argsz change, PR #277, both refuse
//! `argsz != sizeof`, and its test program's dmabuf_export checks that one
//! byte more is EINVAL), so every other `argsz`, a larger one with a zero
//! tail included, is EINVAL.
//!
//! Against the driver before argsz negotiation, SET_NOC_CLEANUP and
//! SET_POWER_STATE answer EINVAL to the larger argsz with a zero tail, and
//! the own commands EFAULT to a short argsz at the end of readable memory
//! (they read their whole struct first): both fail here (seen against the
//! module before this change: "ACQUIRE argsz 0 at the end of readable
//! memory: got EFAULT, expected EINVAL"). Against the module that
//! negotiated EXPORT_TLB_DMABUF's argsz too (2026-12-04): "card 0:
//! EXPORT_TLB_DMABUF argsz 33 with a zero tail: got success, expected
//! EINVAL", the failure of tt-kmd's own test program on it ("Export
//! accepted a bad argsz").

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tt_arbiter::abi::{self, Extensible};
use tt_arbiter::Device;

use super::info::bytes_of;
use super::mapping::{alloc, chip, free, tensix};
use crate::util::*;

const L: u32 = 41;
const MIB: u64 = 1 << 20;
/// Bytes past the struct in the larger-argsz cases.
const EXTRA: usize = 16;

/// One command with an acceptable argument.
struct Case {
    name: &'static str,
    cmd: u32,
    /// The argument, `argsz` its size.
    body: Vec<u8>,
    /// A flag the command does not know.
    unknown_flag: u32,
    /// Run before each call that should succeed.
    before: fn(&Device) -> TestResult,
    /// Undoes a success, given what the kernel wrote back.
    after: fn(&Device, &[u8]) -> TestResult,
    /// `argsz` must be exactly the struct's size (tt-kmd's
    /// EXPORT_TLB_DMABUF): any other is EINVAL, nothing negotiated.
    exact: bool,
}

fn nothing(_: &Device) -> TestResult {
    Ok(())
}

fn nothing_after(_: &Device, _: &[u8]) -> TestResult {
    Ok(())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or_default())
}

fn cases(dev: &Device, n: u32) -> Result<Vec<Case>, String> {
    let tile = tensix(chip(n));
    let mut acquire = abi::LockAcquire::new();
    acquire.index = L;
    acquire.flags = abi::LOCK_NONBLOCK;
    let mut set = abi::LockAcquireSet::new();
    set.mask = bit(L) | bit(L + 1);
    set.flags = abi::LOCK_NONBLOCK;
    let mut release = abi::LockRelease::new();
    release.mask = bit(L);
    let mut tlb = abi::TlbAllocate::new();
    tlb.size = 2 * MIB;
    tlb.flags = abi::LOCK_NONBLOCK;
    let power = abi::PowerState {
        validity: abi::power_validity(15, 0),
        power_flags: 0x7FFF & !abi::POWER_FLAG_MAX_AI_CLK,
        ..abi::PowerState::new()
    };
    // A window of this file's for EXPORT_TLB_DMABUF (freed with the file).
    let window = ctx(alloc(dev, 2 * MIB), "ALLOCATE_TLB for EXPORT_TLB_DMABUF")?;
    let export = abi::ExportTlbDmabuf {
        tlb_id: window.id,
        fd: -1,
        size: 4096,
        ..abi::ExportTlbDmabuf::new()
    };
    let noc_read = abi::NocRead {
        x: tile.0,
        y: tile.1,
        width: 4,
        addr: 0x4_0000,
        ..abi::NocRead::new()
    };
    let noc_write = abi::NocWrite {
        x: tile.0,
        y: tile.1,
        width: 4,
        addr: 0x4_0000,
        value: 0xA5,
        ..abi::NocWrite::new()
    };
    // TEST (0x90) with an argument: the firmware answers it + 1.
    let mut smc_post = abi::SmcMsg {
        flags: abi::SMC_MSG_POST,
        ..abi::SmcMsg::new()
    };
    smc_post.message[0] = 0x90;
    smc_post.message[1] = 1;
    Ok(vec![
        Case {
            name: "ACQUIRE",
            cmd: abi::IOCTL_LOCK_ACQUIRE,
            body: bytes_of(&acquire),
            unknown_flag: 1 << 2,
            before: nothing,
            after: |d, _| ctx(d.release(bit(L)), "RELEASE"),
            exact: false,
        },
        Case {
            name: "ACQUIRE_SET",
            cmd: abi::IOCTL_LOCK_ACQUIRE_SET,
            body: bytes_of(&set),
            unknown_flag: 1 << 2,
            before: nothing,
            after: |d, _| ctx(d.release(bit(L) | bit(L + 1)), "RELEASE"),
            exact: false,
        },
        Case {
            name: "RELEASE",
            cmd: abi::IOCTL_LOCK_RELEASE,
            body: bytes_of(&release),
            unknown_flag: 1,
            before: |d| ctx(d.acquire(L, tt_arbiter::Wait::Try), "ACQUIRE").map(|_| ()),
            after: nothing_after,
            exact: false,
        },
        Case {
            name: "QUERY",
            cmd: abi::IOCTL_LOCK_QUERY,
            body: bytes_of(&new_query(L)),
            unknown_flag: 1,
            before: nothing,
            after: nothing_after,
            exact: false,
        },
        Case {
            name: "TLB_ALLOCATE",
            cmd: abi::IOCTL_TLB_ALLOCATE,
            body: bytes_of(&tlb),
            unknown_flag: 1 << 2,
            before: nothing,
            // `id` at offset 24.
            after: |d, b| expect_ok(free(d, u32_at(b, 24)), "FREE_TLB").map(|_| ()),
            exact: false,
        },
        Case {
            name: "SET_NOC_CLEANUP",
            cmd: abi::IOCTL_SET_NOC_CLEANUP,
            body: bytes_of(&abi::SetNocCleanup::new()),
            unknown_flag: 1,
            before: nothing,
            after: nothing_after,
            exact: false,
        },
        Case {
            name: "SET_POWER_STATE",
            cmd: abi::IOCTL_SET_POWER_STATE,
            body: bytes_of(&power),
            unknown_flag: 1,
            before: nothing,
            after: nothing_after,
            exact: false,
        },
        Case {
            name: "EXPORT_TLB_DMABUF",
            cmd: abi::IOCTL_EXPORT_TLB_DMABUF,
            body: bytes_of(&export),
            unknown_flag: 1,
            before: nothing,
            // `fd` at offset 12: closed, the export goes.
            after: |_, b| {
                let fd = u32_at(b, 12) as i32;
                ensure!(fd >= 0, "EXPORT_TLB_DMABUF gave fd {fd}");
                // SAFETY: the kernel made this descriptor for us.
                drop(unsafe { OwnedFd::from_raw_fd(fd) });
                Ok(())
            },
            exact: true,
        },
        Case {
            name: "NOC_READ",
            cmd: abi::IOCTL_NOC_READ,
            body: bytes_of(&noc_read),
            unknown_flag: 1,
            before: nothing,
            after: nothing_after,
            exact: false,
        },
        Case {
            name: "NOC_WRITE",
            cmd: abi::IOCTL_NOC_WRITE,
            body: bytes_of(&noc_write),
            unknown_flag: 1,
            before: nothing,
            after: nothing_after,
            exact: false,
        },
        Case {
            name: "SMC_MSG",
            cmd: abi::IOCTL_SMC_MSG,
            body: bytes_of(&smc_post),
            // Not one of POST, POLL, ABANDON.
            unknown_flag: 1 << 3,
            before: nothing,
            // The posted TEST is abandoned: the next POST may come.
            after: |d, _| {
                let mut abandon = abi::SmcMsg {
                    flags: abi::SMC_MSG_ABANDON,
                    ..abi::SmcMsg::new()
                };
                expect_ok(
                    ioctl(d, abi::IOCTL_SMC_MSG, &mut abandon),
                    "SMC_MSG ABANDON",
                )
                .map(|_| ())
            },
            exact: false,
        },
    ])
}

/// `bytes` with `argsz` replaced.
fn with_argsz(bytes: &[u8], argsz: u32) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[..4].copy_from_slice(&argsz.to_ne_bytes());
    b
}

/// Calls `cmd` with `bytes` copied to the end of a readable page (nothing
/// readable after it): the result and the bytes as the call left them.
fn call_at_end(
    dev: &Device,
    cmd: u32,
    bytes: &[u8],
) -> Result<(std::io::Result<i32>, Vec<u8>), String> {
    let (_m, end) = page_before_hole()?;
    let at = end - bytes.len();
    // SAFETY: the last bytes of our own writable page.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
    let r = ioctl_addr(dev.as_raw_fd(), cmd, at);
    // SAFETY: as above; the page is still mapped (`_m`).
    let after = unsafe { std::slice::from_raw_parts(at as *const u8, bytes.len()) }.to_vec();
    Ok((r, after))
}

fn check(dev: &Device, n: u32, c: &Case) -> TestResult {
    let size = c.body.len();
    let what = |s: &str| format!("card {n}: {} {s}", c.name);
    // Short: EINVAL, also when nothing past argsz is readable.
    for argsz in [0, 4, size as u32 - 1] {
        let b = with_argsz(&c.body, argsz);
        let mut whole = b.clone();
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), c.cmd, whole.as_mut_ptr() as usize),
            libc::EINVAL,
            &what(&format!("argsz {argsz}")),
        )?;
        let (r, _) = call_at_end(dev, c.cmd, &b[..(argsz as usize).max(4)])?;
        expect_errno(
            r,
            libc::EINVAL,
            &what(&format!("argsz {argsz} at the end of readable memory")),
        )?;
    }
    // Equal, at the very end of readable memory.
    (c.before)(dev)?;
    let (r, back) = call_at_end(dev, c.cmd, &c.body)?;
    expect_ok(r, &what("argsz equal, at the end of readable memory"))?;
    (c.after)(dev, &back)?;
    if c.exact {
        return check_exact(dev, n, c);
    }
    // Larger with a zero tail: accepted, the tail untouched.
    let mut larger = c.body.clone();
    larger.resize(size + EXTRA, 0);
    larger[..4].copy_from_slice(&((size + EXTRA) as u32).to_ne_bytes());
    (c.before)(dev)?;
    let mut buf = larger.clone();
    expect_ok(
        ioctl_addr(dev.as_raw_fd(), c.cmd, buf.as_mut_ptr() as usize),
        &what(&format!("argsz {} with a zero tail", size + EXTRA)),
    )?;
    ensure!(
        buf[size..].iter().all(|&b| b == 0),
        "{}: wrote past its struct: {:02x?}",
        what("argsz larger"),
        &buf[size..]
    );
    (c.after)(dev, &buf)?;
    // Larger with a non-zero byte in the tail, first or last: E2BIG.
    for at in [size, size + EXTRA - 1] {
        let mut buf = larger.clone();
        buf[at] = 0x01;
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), c.cmd, buf.as_mut_ptr() as usize),
            libc::E2BIG,
            &what(&format!("non-zero byte {at} past a {size}-byte struct")),
        )?;
    }
    // Above the cap.
    let mut big = vec![0u8; 4100];
    big[..size].copy_from_slice(&c.body);
    big[..4].copy_from_slice(&4097u32.to_ne_bytes());
    expect_errno(
        ioctl_addr(dev.as_raw_fd(), c.cmd, big.as_mut_ptr() as usize),
        libc::E2BIG,
        &what("argsz 4097"),
    )?;
    unknown_flag_refused(dev, c, &what)?;
    // Nothing of a refused call was kept.
    let q = query(dev, L)?;
    ensure!(!q.held, "{}: lock {L} held at the end: {q:?}", what(""));
    Ok(())
}

/// The rest of [`check`] for a command whose `argsz` must be exactly its
/// struct's size: one byte more (tt-kmd's own check), a larger one with a
/// zero tail or with a non-zero byte, and one above the cap are all
/// EINVAL, and the caller's bytes are left alone; an unknown flag EINVAL.
fn check_exact(dev: &Device, n: u32, c: &Case) -> TestResult {
    let size = c.body.len();
    let what = |s: &str| format!("card {n}: {} {s}", c.name);
    for (argsz, set) in [
        (size + 1, None),
        (size + EXTRA, None),
        (size + EXTRA, Some(size)),
        (4097, None),
    ] {
        let mut buf = c.body.clone();
        buf.resize(argsz.max(size + EXTRA), 0);
        buf[..4].copy_from_slice(&(argsz as u32).to_ne_bytes());
        if let Some(at) = set {
            buf[at] = 0x01;
        }
        let before = buf.clone();
        let tail = if set.is_some() {
            "a non-zero"
        } else {
            "a zero"
        };
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), c.cmd, buf.as_mut_ptr() as usize),
            libc::EINVAL,
            &what(&format!("argsz {argsz} with {tail} tail")),
        )?;
        ensure!(
            buf == before,
            "{}: a refused call changed the caller's bytes",
            what(&format!("argsz {argsz}"))
        );
    }
    unknown_flag_refused(dev, c, &what)
}

/// An unknown flag (`flags` at offset 4, after `argsz`) is EINVAL.
fn unknown_flag_refused(dev: &Device, c: &Case, what: &dyn Fn(&str) -> String) -> TestResult {
    let mut b = c.body.clone();
    b[4..8].copy_from_slice(&c.unknown_flag.to_ne_bytes());
    expect_errno(
        ioctl_addr(dev.as_raw_fd(), c.cmd, b.as_mut_ptr() as usize),
        libc::EINVAL,
        &what(&format!("flags {:#x}", c.unknown_flag)),
    )
}

/// The table above on both cards.
pub fn every_argsz_command() -> TestResult {
    for n in 0..2u32 {
        let dev = open(n)?;
        ensure_free(&dev, L)?;
        ensure_free(&dev, L + 1)?;
        for c in &cases(&dev, n)? {
            check(&dev, n, c)?;
        }
    }
    Ok(())
}

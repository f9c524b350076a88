//! Argument checks of the extensible commands: EINVAL, E2BIG, ENOTTY.

use std::os::fd::AsRawFd;

use tt_arbiter::abi::{self, AbiStruct, Extensible};
use tt_arbiter::Device;

use super::info::bytes_of;
use crate::util::*;

const L: u32 = 40;

/// Calls `cmd` with `arg` patched by `f`; expects `errno` and that lock L
/// (and L+1) stayed free.
fn bad<T: AbiStruct>(
    dev: &Device,
    cmd: u32,
    base: T,
    what: &str,
    errno: i32,
    f: impl FnOnce(&mut T),
) -> TestResult {
    let mut arg = base;
    f(&mut arg);
    expect_errno(ioctl(dev, cmd, &mut arg), errno, what)?;
    for i in [L, L + 1] {
        let q = query(dev, i)?;
        ensure!(!q.held, "{what}: lock {i} taken: {q:?}");
    }
    Ok(())
}

fn acq() -> abi::LockAcquire {
    let mut a = abi::LockAcquire::new();
    a.index = L;
    a.flags = abi::LOCK_NONBLOCK;
    a
}

fn set() -> abi::LockAcquireSet {
    let mut a = abi::LockAcquireSet::new();
    a.mask = bit(L) | bit(L + 1);
    a.flags = abi::LOCK_NONBLOCK;
    a
}

/// EINVAL for each malformed field of ACQUIRE, ACQUIRE_SET, RELEASE, QUERY.
pub fn einval_new_commands() -> TestResult {
    let d = open(0)?;
    ensure_free(&d, L)?;
    ensure_free(&d, L + 1)?;
    let (ac, sc) = (abi::IOCTL_LOCK_ACQUIRE, abi::IOCTL_LOCK_ACQUIRE_SET);
    let (rc, qc) = (abi::IOCTL_LOCK_RELEASE, abi::IOCTL_LOCK_QUERY);
    let e = libc::EINVAL;
    for argsz in [0, 4, 16, 39] {
        bad(&d, ac, acq(), &format!("ACQUIRE argsz {argsz}"), e, |a| {
            a.argsz = argsz
        })?;
    }
    for flags in [4, 8, 0x8000_0000, abi::LOCK_NONBLOCK | abi::LOCK_DEADLINE] {
        bad(
            &d,
            ac,
            acq(),
            &format!("ACQUIRE flags {flags:#x}"),
            e,
            |a| a.flags = flags,
        )?;
    }
    for index in [64, 65, 1000, u32::MAX] {
        bad(&d, ac, acq(), &format!("ACQUIRE index {index}"), e, |a| {
            a.index = index
        })?;
    }
    bad(&d, ac, acq(), "ACQUIRE reserved0 1", e, |a| a.reserved0 = 1)?;
    for argsz in [0, 8, 47] {
        bad(
            &d,
            sc,
            set(),
            &format!("ACQUIRE_SET argsz {argsz}"),
            e,
            |a| a.argsz = argsz,
        )?;
    }
    for flags in [4, 0x8000_0000, abi::LOCK_NONBLOCK | abi::LOCK_DEADLINE] {
        bad(
            &d,
            sc,
            set(),
            &format!("ACQUIRE_SET flags {flags:#x}"),
            e,
            |a| a.flags = flags,
        )?;
    }
    bad(&d, sc, set(), "ACQUIRE_SET empty mask", e, |a| a.mask = 0)?;
    bad(&d, sc, set(), "ACQUIRE_SET reserved0 1", e, |a| {
        a.reserved0 = 1
    })?;
    ctx(d.acquire(L, tt_arbiter::Wait::Try), "ACQUIRE")?;
    let mut rel = abi::LockRelease::new();
    rel.mask = bit(L);
    for (what, f) in [
        (
            "RELEASE argsz 15",
            (|r: &mut abi::LockRelease| r.argsz = 15) as fn(&mut abi::LockRelease),
        ),
        ("RELEASE argsz 0", |r| r.argsz = 0),
        ("RELEASE flags 1", |r| r.flags = 1),
        ("RELEASE empty mask", |r| r.mask = 0),
    ] {
        let mut arg = rel;
        f(&mut arg);
        expect_errno(ioctl(&d, rc, &mut arg), e, what)?;
        ensure!(query(&d, L)?.held_by_caller, "{what} released the lock");
    }
    ctx(d.release(bit(L)), "RELEASE")?;
    let q = new_query(L);
    for (what, f) in [
        (
            "QUERY argsz 79",
            (|q: &mut abi::LockQuery| q.argsz = 79) as fn(&mut abi::LockQuery),
        ),
        ("QUERY argsz 0", |q| q.argsz = 0),
        ("QUERY flags 1", |q| q.flags = 1),
        ("QUERY index 64", |q| q.index = 64),
        ("QUERY index u32::MAX", |q| q.index = u32::MAX),
    ] {
        bad(&d, qc, q, what, e, f)?;
    }
    Ok(())
}

/// argsz larger than the struct: a non-zero tail is E2BIG, a zero tail is
/// accepted and left untouched.
pub fn argsz_larger_than_struct() -> TestResult {
    let d = open(0)?;
    ensure_free(&d, L)?;
    ensure_free(&d, L + 1)?;
    let cases: [(&str, u32, Vec<u8>); 4] = [
        ("ACQUIRE", abi::IOCTL_LOCK_ACQUIRE, bytes_of(&acq())),
        ("ACQUIRE_SET", abi::IOCTL_LOCK_ACQUIRE_SET, bytes_of(&set())),
        ("QUERY", abi::IOCTL_LOCK_QUERY, bytes_of(&new_query(L))),
        ("RELEASE", abi::IOCTL_LOCK_RELEASE, {
            let mut r = abi::LockRelease::new();
            r.mask = bit(L);
            bytes_of(&r)
        }),
    ];
    for (name, cmd, bytes) in &cases {
        let call = |tail: u8| -> (std::io::Result<i32>, Vec<u8>) {
            let mut buf = vec![0u64; (bytes.len() + 16) / 8];
            // SAFETY: `buf` holds len + 16 bytes.
            let raw = unsafe {
                std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), bytes.len() + 16)
            };
            raw[..bytes.len()].copy_from_slice(bytes);
            raw[..4].copy_from_slice(&((bytes.len() + 16) as u32).to_ne_bytes());
            raw[bytes.len() + 9] = tail;
            let r = ioctl_addr(d.as_raw_fd(), *cmd, raw.as_mut_ptr() as usize);
            (r, raw[bytes.len()..].to_vec())
        };
        if *name == "RELEASE" {
            ctx(
                d.acquire(L, tt_arbiter::Wait::Try),
                "ACQUIRE before RELEASE",
            )?;
        }
        let (r, _) = call(0x5a);
        expect_errno(
            r,
            libc::E2BIG,
            &format!("{name} with argsz +16 and a non-zero tail"),
        )?;
        let (r, tail) = call(0);
        expect_ok(r, &format!("{name} with argsz +16 and a zero tail"))?;
        ensure!(
            tail.iter().all(|&b| b == 0),
            "{name} wrote past its struct: {tail:02x?}"
        );
        let q = query(&d, L)?;
        let want_held = matches!(*name, "ACQUIRE" | "ACQUIRE_SET");
        ensure_eq!(q.held_by_caller, want_held, "lock {L} held after {name}");
        if want_held {
            let m = if *name == "ACQUIRE" {
                bit(L)
            } else {
                bit(L) | bit(L + 1)
            };
            ctx(d.release(m), "RELEASE")?;
        }
    }
    ensure_free(&d, L)
}

/// Our command numbers with wrong size or direction bits: ENOTTY.
pub fn wrong_size_bits_enotty() -> TestResult {
    let d = open(0)?;
    ensure_free(&d, L)?;
    let m = abi::IOCTL_MAGIC;
    let cmds = [
        abi::iowr(m, 0x40, 8),
        abi::iowr(m, 0x40, 39),
        abi::ior(m, 0x40, 40),
        abi::iow(m, 0x40, 40),
        abi::io(m, 0x40),
        abi::iowr(m, 0x41, 40),
        abi::iowr(m, 0x42, 8),
        abi::iowr(m, 0x43, 40),
        abi::iowr(m, 0x43, 79),
    ];
    let mut buf = vec![0u8; 256];
    for cmd in cmds {
        let a = bytes_of(&acq());
        buf[..a.len()].copy_from_slice(&a);
        expect_errno(
            ioctl_addr(d.as_raw_fd(), cmd, buf.as_mut_ptr() as usize),
            libc::ENOTTY,
            &format!("ioctl {cmd:#010x}"),
        )?;
        ensure!(!query(&d, L)?.held, "ioctl {cmd:#010x} took lock {L}");
    }
    // A larger size is a later version of the same struct: the command is
    // the same, and `argsz` says how much the caller passed.
    let a = bytes_of(&acq());
    buf[..a.len()].copy_from_slice(&a);
    let cmd = abi::iowr(m, 0x40, 48);
    ioctl_addr(d.as_raw_fd(), cmd, buf.as_mut_ptr() as usize)
        .map_err(|e| format!("ioctl {cmd:#010x} (a later version's size): {e}"))?;
    ensure!(
        query(&d, L)?.held_by_caller,
        "ioctl {cmd:#010x} did not take lock {L}"
    );
    d.release(1 << L).map_err(|e| format!("release: {e}"))?;
    Ok(())
}

/// A page holding `bytes` at its start, then made read-only.
fn read_only_page(bytes: &[u8]) -> Result<Shared, String> {
    let m = Shared::new(page_size())?;
    // SAFETY: `bytes` fits in the fresh page, which nothing else refers to.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), m.addr() as *mut u8, bytes.len()) };
    // SAFETY: changing the protection of our own mapping, which no Rust
    // reference points into.
    let rc = unsafe { libc::mprotect(m.addr() as *mut libc::c_void, page_size(), libc::PROT_READ) };
    ensure!(rc == 0, "mprotect: {}", std::io::Error::last_os_error());
    Ok(m)
}

/// A lock granted to a call whose answer cannot be written back (EFAULT)
/// is released again: the caller cannot know it holds it. Its owner-died
/// mark survives for the next acquirer.
pub fn efault_on_write_back_undoes_the_grant() -> TestResult {
    let d = open(0)?;
    ensure_free(&d, L)?;
    // LOCK_CTL with `in` at the end of a page and `out` in the hole after.
    let (_m, end) = page_before_hole()?;
    for flags in [abi::LOCK_CTL_ACQUIRE, abi::LOCK_CTL_ACQUIRE_BLOCKING] {
        let input = abi::LockCtlIn {
            output_size_bytes: 4,
            flags,
            index: L as u8,
            ..Default::default()
        };
        let bytes = bytes_of(&input);
        let at = end - bytes.len();
        // SAFETY: the last bytes of our own writable page.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
        expect_errno(
            ioctl_addr(d.as_raw_fd(), abi::IOCTL_LOCK_CTL, at),
            libc::EFAULT,
            &format!("LOCK_CTL flags {flags} with out unwritable"),
        )?;
        ensure!(
            !query(&d, L)?.held,
            "LOCK_CTL flags {flags}: the lock stayed taken after EFAULT"
        );
    }
    // ACQUIRE and ACQUIRE_SET in read-only memory.
    let m = read_only_page(&bytes_of(&acq()))?;
    expect_errno(
        ioctl_addr(d.as_raw_fd(), abi::IOCTL_LOCK_ACQUIRE, m.addr()),
        libc::EFAULT,
        "ACQUIRE in read-only memory",
    )?;
    ensure!(
        !query(&d, L)?.held,
        "ACQUIRE: the lock stayed taken after EFAULT"
    );
    let m = read_only_page(&bytes_of(&set()))?;
    expect_errno(
        ioctl_addr(d.as_raw_fd(), abi::IOCTL_LOCK_ACQUIRE_SET, m.addr()),
        libc::EFAULT,
        "ACQUIRE_SET in read-only memory",
    )?;
    ensure!(
        !query(&d, L)?.held && !query(&d, L + 1)?.held,
        "ACQUIRE_SET: the locks stayed taken after EFAULT"
    );
    // An owner-died mark consumed by the undone grant is put back.
    let holder = open(0)?;
    let (r, _) = acquire(&holder, L, 0, 0);
    expect_ok(r, "ACQUIRE")?;
    drop(holder);
    ensure!(
        query(&d, L)?.owner_died,
        "no owner-died mark after the holder's close"
    );
    expect_errno(
        ioctl_addr(
            d.as_raw_fd(),
            abi::IOCTL_LOCK_ACQUIRE,
            read_only_page(&bytes_of(&acq()))?.addr(),
        ),
        libc::EFAULT,
        "ACQUIRE in read-only memory",
    )?;
    ensure!(
        query(&d, L)?.owner_died,
        "the undone grant lost the owner-died mark"
    );
    let (r, a) = acquire(&d, L, 0, 0);
    expect_ok(r, "ACQUIRE")?;
    ensure!(
        a.out_flags & abi::LOCK_OWNER_DIED != 0,
        "the next acquirer was not told the owner died"
    );
    expect_ok(release(&d, bit(L)), "RELEASE")?;
    Ok(())
}

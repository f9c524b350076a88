//! LOCK_CTL, the C driver's lock command: its semantics table.

use std::sync::atomic::{AtomicBool, Ordering};

use tt_arbiter::abi;

use super::info::{bytes_of, call_old_style, check_out, check_output_rule};
use crate::util::*;

const ACQ: u32 = abi::LOCK_CTL_ACQUIRE;
const REL: u32 = abi::LOCK_CTL_RELEASE;
const TEST: u32 = abi::LOCK_CTL_TEST;
const BLOCKING: u32 = abi::LOCK_CTL_ACQUIRE_BLOCKING;

fn ctl(dev: &tt_arbiter::Device, index: u8, flags: u32, want: u8, what: &str) -> TestResult {
    let v = expect_ok(lock_ctl(dev, index, flags), what)?;
    ensure_eq!(v, want, "{what}: value");
    Ok(())
}

/// The table: not re-entrant, exclusive between opens, TEST bits, foreign
/// release refused, release/release again.
pub fn lock_ctl_table() -> TestResult {
    let i = 33;
    let a = open(0)?;
    let b = open(0)?;
    ensure_free(&a, i as u32)?;
    ctl(&a, i, ACQ, 1, "ACQUIRE of a free lock")?;
    ctl(
        &a,
        i,
        ACQ,
        0,
        "ACQUIRE again by the same file (not re-entrant)",
    )?;
    ctl(
        &b,
        i,
        ACQ,
        0,
        "ACQUIRE by another open() of the same process",
    )?;
    ctl(&a, i, TEST, 3, "TEST by the holder")?;
    ctl(&b, i, TEST, 2, "TEST by another file")?;
    let q = query(&b, i as u32)?;
    ensure!(
        q.held && !q.held_by_caller && q.holder_pid == getpid(),
        "QUERY after LOCK_CTL ACQUIRE: {q:?}"
    );
    ctl(&b, i, REL, 0, "RELEASE by another file")?;
    ctl(&a, i, TEST, 3, "TEST by the holder after a foreign RELEASE")?;
    ctl(&b, i, TEST, 2, "TEST by the other file after its RELEASE")?;
    ctl(&a, i, REL, 1, "RELEASE by the holder")?;
    ctl(&a, i, REL, 0, "RELEASE again")?;
    ctl(&a, i, TEST, 0, "TEST by the former holder")?;
    ctl(&b, i, TEST, 0, "TEST by the other file after release")?;
    ctl(&b, i, ACQ, 1, "ACQUIRE by the other file after release")?;
    ctl(&a, i, TEST, 2, "TEST by the first file")?;
    ctl(&b, i, REL, 1, "RELEASE by the second holder")?;
    ensure_free(&a, i as u32)
}

/// All 64 locks can be held at once, then released.
pub fn all_64_locks() -> TestResult {
    let a = open(0)?;
    let b = open(0)?;
    for i in 0..abi::LOCK_COUNT as u8 {
        ensure_free(&a, i as u32)?;
        ctl(&a, i, ACQ, 1, &format!("ACQUIRE lock {i}"))?;
    }
    for i in 0..abi::LOCK_COUNT as u8 {
        ctl(&a, i, TEST, 3, &format!("TEST lock {i} by the holder"))?;
        ctl(&b, i, TEST, 2, &format!("TEST lock {i} by another file"))?;
    }
    for i in 0..abi::LOCK_COUNT as u8 {
        ctl(&a, i, REL, 1, &format!("RELEASE lock {i}"))?;
        ctl(&b, i, TEST, 0, &format!("TEST lock {i} after release"))?;
    }
    Ok(())
}

/// Index >= 64 and unknown flags: EINVAL, nothing taken.
pub fn lock_ctl_einval() -> TestResult {
    let a = open(0)?;
    ensure_free(&a, 0)?;
    for index in [64u8, 65, 128, 255] {
        for flags in [ACQ, REL, TEST, BLOCKING] {
            expect_errno(
                lock_ctl(&a, index, flags),
                libc::EINVAL,
                &format!("LOCK_CTL index {index} flags {flags}"),
            )?;
        }
    }
    for flags in [4u32, 5, 0x100, 0xffff, 0x8000_0000, u32::MAX] {
        expect_errno(
            lock_ctl(&a, 0, flags),
            libc::EINVAL,
            &format!("LOCK_CTL lock 0 flags {flags:#x}"),
        )?;
    }
    ensure_free(&a, 0)
}

/// The output_size_bytes rule for LOCK_CTL (ACQUIRE, TEST, RELEASE).
pub fn lock_ctl_output_size() -> TestResult {
    let i = 36u8;
    let a = open(0)?;
    ensure_free(&a, i as u32)?;
    let input = |flags| {
        bytes_of(&abi::LockCtlIn {
            output_size_bytes: 0,
            flags,
            index: i,
            reserved: [0; 3],
        })
    };
    let cmd = abi::IOCTL_LOCK_CTL;
    // ACQUIRE with 0: acquired, out untouched.
    let out = call_old_style(&a, cmd, &input(ACQ), 0)?;
    check_out(&out, 0, &[1, 0, 0, 0], "ACQUIRE")?;
    ctl(
        &a,
        i,
        TEST,
        3,
        "TEST after ACQUIRE with output_size_bytes 0",
    )?;
    check_output_rule(
        &a,
        cmd,
        &input(TEST),
        &[3, 0, 0, 0],
        "TEST of a lock held by this file",
    )?;
    // RELEASE with 1: only `value`.
    let out = call_old_style(&a, cmd, &input(REL), 1)?;
    check_out(&out, 1, &[1, 0, 0, 0], "RELEASE")?;
    for (k, flags, answer) in [
        (4, ACQ, 1),
        (16, REL, 1),
        (100, ACQ, 1),
        (3, REL, 1),
        (16, REL, 0),
    ] {
        let out = call_old_style(&a, cmd, &input(flags), k)?;
        check_out(
            &out,
            k as usize,
            &[answer, 0, 0, 0],
            &format!("LOCK_CTL flags {flags}"),
        )?;
    }
    check_output_rule(&a, cmd, &input(TEST), &[0, 0, 0, 0], "TEST of a free lock")?;
    ensure_free(&a, i as u32)
}

/// Garbage in `in.reserved` is ignored.
pub fn lock_ctl_reserved_ignored() -> TestResult {
    let i = 37u8;
    let a = open(0)?;
    ensure_free(&a, i as u32)?;
    for (flags, want) in [(ACQ, 1), (TEST, 3), (ACQ, 0), (REL, 1), (TEST, 0), (REL, 0)] {
        let mut arg = abi::LockCtl {
            input: abi::LockCtlIn {
                output_size_bytes: 4,
                flags,
                index: i,
                reserved: [0xde, 0xad, 0xbf],
            },
            ..Default::default()
        };
        expect_ok(
            ioctl(&a, abi::IOCTL_LOCK_CTL, &mut arg),
            &format!("LOCK_CTL flags {flags} with garbage reserved"),
        )?;
        ensure_eq!(
            arg.output.value,
            want,
            "LOCK_CTL flags {flags} with garbage reserved: value"
        );
    }
    ensure_free(&a, i as u32)
}

/// ACQUIRE_BLOCKING on a lock the same file holds waits until another
/// thread releases it through the same file.
pub fn lock_ctl_blocking_same_file() -> TestResult {
    let i = 38u8;
    let a = open(0)?;
    let observer = open(0)?;
    ensure_free(&a, i as u32)?;
    ctl(&a, i, ACQ, 1, "ACQUIRE")?;
    let returned = AtomicBool::new(false);
    std::thread::scope(|s| -> TestResult {
        let waiter = s.spawn(|| {
            let r = lock_ctl(&a, i, BLOCKING);
            returned.store(true, Ordering::SeqCst);
            r
        });
        let q = wait_waiters(&observer, i as u32, 1);
        let early = returned.load(Ordering::SeqCst);
        let released = lock_ctl(&a, i, REL);
        let r = waiter
            .join()
            .map_err(|p| format!("waiter thread panicked: {}", panic_message(&p)))?;
        q?;
        ensure!(
            !early,
            "ACQUIRE_BLOCKING on a lock this file holds returned before the release"
        );
        ensure_eq!(
            expect_ok(released, "RELEASE from the other thread")?,
            1,
            "RELEASE value"
        );
        ensure_eq!(
            expect_ok(r, "ACQUIRE_BLOCKING")?,
            1,
            "ACQUIRE_BLOCKING value"
        );
        Ok(())
    })?;
    ctl(&a, i, TEST, 3, "TEST after the blocked thread got it")?;
    ctl(&a, i, REL, 1, "RELEASE")?;
    ensure_free(&a, i as u32)
}

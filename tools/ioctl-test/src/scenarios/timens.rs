//! Deadlines in time namespaces: a deadline is an absolute CLOCK_MONOTONIC
//! time of the caller's time namespace (containers with time offsets,
//! `unshare --time`), which the driver converts to the host's clock as
//! futex and timerfd do: it neither waits far longer nor returns at once.

use std::fs;
use std::io;
use std::time::{Duration, Instant};

use tt_arbiter::{abi, Error, Wait};

use super::tlb::{exhaust, tlb_allocate};
use crate::util::*;

const MIB: u64 = 1 << 20;
/// Held by the scenario (outside the namespace) while the namespace's
/// process tries them.
const LOCK: u32 = 43;
const OTHER: u32 = 44;

/// Runs `check` in a process of a new time namespace whose CLOCK_MONOTONIC
/// is the host's plus `offset_s` seconds. A check that never returns (a
/// deadline taken on the wrong clock) fails after PATIENCE.
pub(super) fn in_time_namespace(offset_s: i64, check: fn() -> TestResult) -> TestResult {
    let helper = spawn("time namespace", &[], move |_| {
        // SAFETY: unshare(2) with a flag; this process is single-threaded.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWTIME) };
        ensure!(
            rc == 0,
            "unshare(CLONE_NEWTIME): {}",
            io::Error::last_os_error()
        );
        // The offsets must be set before a process enters the namespace:
        // this one stays outside, its children are inside.
        let offsets = format!("monotonic {offset_s} 0\n");
        fs::write("/proc/self/timens_offsets", &offsets)
            .map_err(|e| format!("write {offsets:?} to /proc/self/timens_offsets: {e}"))?;
        let mut inside = spawn("in the time namespace", &[], move |link| {
            check()?;
            link.send("done")
        })?;
        inside
            .expect("done")
            .map_err(|e| format!("monotonic offset {offset_s} s: {e}"))?;
        inside.wait()
    })?;
    helper.wait()
}

/// `Err` unless `r` is ETIMEDOUT, returned at or after `deadline` on this
/// process's (the namespace's) clock.
pub(super) fn timed_out(r: io::Result<i32>, deadline: u64, what: &str) -> TestResult {
    let after = now_ns();
    expect_errno(r, libc::ETIMEDOUT, what)?;
    ensure!(
        after >= deadline,
        "{what}: ETIMEDOUT {} ns before the deadline (on the namespace's clock)",
        deadline - after
    );
    Ok(())
}

/// In the namespace: deadlines 100 ms ahead and 1 ms past on its clock,
/// for ACQUIRE, ACQUIRE_SET, TLB_ALLOCATE and the client library.
fn deadlines_here() -> TestResult {
    let ns = fs::read_link("/proc/self/ns/time").map_err(|e| format!("/proc/self/ns/time: {e}"))?;
    let init = fs::read_link("/proc/1/ns/time").map_err(|e| format!("/proc/1/ns/time: {e}"))?;
    ensure!(ns != init, "not in a time namespace of its own ({ns:?})");
    let a = open(0)?;
    let ahead = now_ns() + 100_000_000;
    timed_out(
        acquire(&a, LOCK, abi::LOCK_DEADLINE, ahead).0,
        ahead,
        "ACQUIRE of a held lock until 100 ms ahead",
    )?;
    let ahead = now_ns() + 100_000_000;
    timed_out(
        acquire_set(&a, bit(LOCK) | bit(OTHER), abi::LOCK_DEADLINE, ahead).0,
        ahead,
        "ACQUIRE_SET with a held lock until 100 ms ahead",
    )?;
    let ahead = now_ns() + 100_000_000;
    timed_out(
        tlb_allocate(&a, 2 * MIB, abi::LOCK_DEADLINE, ahead).0,
        ahead,
        "TLB_ALLOCATE of a size with no free window until 100 ms ahead",
    )?;
    // Already past on the namespace's clock (not on the host's, when the
    // offset is positive): at once.
    let past = now_ns() - 1_000_000;
    timed_out(
        acquire(&a, LOCK, abi::LOCK_DEADLINE, past).0,
        past,
        "ACQUIRE with a deadline 1 ms past",
    )?;
    timed_out(
        tlb_allocate(&a, 2 * MIB, abi::LOCK_DEADLINE, past).0,
        past,
        "TLB_ALLOCATE with a deadline 1 ms past",
    )?;
    let timeout = Duration::from_millis(50);
    let start = Instant::now();
    match a.acquire(LOCK, Wait::Timeout(timeout)) {
        Err(Error::Timeout { .. }) => {}
        other => return Err(format!("client Wait::Timeout(50 ms): {other:?}")),
    }
    ensure!(
        start.elapsed() >= timeout,
        "client Wait::Timeout(50 ms) returned after {:?}",
        start.elapsed()
    );
    ensure!(
        !query(&a, OTHER)?.held,
        "lock {OTHER} taken by a timed-out ACQUIRE_SET"
    );
    Ok(())
}

/// Deadlines of processes in time namespaces offset by a day ahead and by
/// (almost) the host's uptime behind: ETIMEDOUT at their deadline on their
/// own clock, not a day later nor at once.
pub fn deadlines_in_time_namespaces() -> TestResult {
    let a = open(0)?;
    ensure_free(&a, LOCK)?;
    ensure_free(&a, OTHER)?;
    ctx(a.acquire(LOCK, Wait::Try), "ACQUIRE")?;
    let windows = exhaust(&a, 2 * MIB)?;
    ensure!(!windows.is_empty(), "card 0 has no 2 MiB TLB window");
    in_time_namespace(86_400, deadlines_here)?;
    // A namespace's clock cannot go below 0: behind by the uptime less 2 s.
    let uptime_s = (now_ns() / 1_000_000_000) as i64;
    ensure!(
        uptime_s > 3,
        "uptime {uptime_s} s: too short for a negative offset"
    );
    in_time_namespace(-(uptime_s - 2), deadlines_here)?;
    ctx(a.release(bit(LOCK)), "RELEASE")?;
    ensure_free(&a, LOCK)
}

//! ACQUIRE_SET: all or nothing, owner-died mask, arrival order (no barging).

use tt_arbiter::{abi, Wait};

use crate::util::*;
use crate::worker::{finish, ok, ok_reply, worker};

fn mask(locks: &[u32]) -> u64 {
    locks.iter().fold(0, |m, &i| m | bit(i))
}

/// A busy lock in the mask: EBUSY/ETIMEDOUT and none of the others taken;
/// a set waiter holds nothing until all are free.
pub fn all_or_nothing() -> TestResult {
    let locks = [24, 25, 26, 27];
    let m = mask(&locks);
    let a = open(0)?;
    let b = open(0)?;
    for i in locks {
        ensure_free(&a, i)?;
    }
    ctx(b.acquire(26, Wait::Try), "ACQUIRE 26")?;
    let (r, out) = acquire_set(&a, m, abi::LOCK_NONBLOCK, 0);
    expect_errno(r, libc::EBUSY, "NONBLOCK ACQUIRE_SET with one busy lock")?;
    ensure_eq!(out.holder_pid, getpid(), "holder_pid");
    let deadline = now_ns() + 30_000_000;
    let (r, _) = acquire_set(&a, m, abi::LOCK_DEADLINE, deadline);
    let after = now_ns();
    expect_errno(
        r,
        libc::ETIMEDOUT,
        "DEADLINE ACQUIRE_SET with one busy lock",
    )?;
    ensure!(after >= deadline, "ETIMEDOUT {} ns early", deadline - after);
    for i in [24, 25, 27] {
        let q = query(&a, i)?;
        ensure!(
            !q.held && q.waiters == 0,
            "lock {i} after the failed ACQUIRE_SETs: {q:?}"
        );
    }
    // A blocked set waiter holds none of its locks meanwhile.
    let mut w = worker("set waiter", 0)?;
    let cmd = format!("set {:x}", bit(24) | bit(26));
    w.send(&cmd)?;
    wait_waiters(&a, 26, 1)?;
    ensure!(
        !query(&a, 24)?.held,
        "set waiter holds lock 24 while waiting for 26"
    );
    ctx(b.release(bit(26)), "RELEASE 26")?;
    ok_reply(&mut w, &cmd)?;
    for i in [24, 26] {
        ensure_eq!(query(&a, i)?.holder_pid, w.pid as u32, "holder of lock {i}");
    }
    ok(&mut w, &format!("release {:x}", bit(24) | bit(26)))?;
    // The whole set, then its owner-died mask.
    let g = ctx(a.acquire_set(m, Wait::Block), "ACQUIRE_SET")?;
    ensure_eq!(g.owner_died_mask, 0, "owner_died_mask");
    for i in locks {
        ensure!(
            query(&a, i)?.held_by_caller,
            "lock {i} not held after ACQUIRE_SET"
        );
    }
    ctx(a.release(m), "RELEASE of the set")?;
    ok(&mut w, &format!("set {:x}", bit(24) | bit(25)))?;
    finish(w)?;
    let g = ctx(
        a.acquire_set(mask(&[24, 25, 26]), Wait::Try),
        "ACQUIRE_SET after the holder died",
    )?;
    ensure_eq!(g.owner_died_mask, bit(24) | bit(25), "owner_died_mask");
    ctx(a.release(mask(&[24, 25, 26])), "RELEASE")?;
    for i in locks {
        ensure_free(&a, i)?;
    }
    Ok(())
}

/// A holds 29; B queues for {29,30}; then 30 is free but B wants it: nobody
/// may barge in (ACQUIRE, ACQUIRE_SET, LOCK_CTL ACQUIRE), and a later
/// blocking waiter on 30 is served after B.
pub fn arrival_order_no_barging() -> TestResult {
    let (x, y) = (29, 30);
    let a = open(0)?;
    let c = open(0)?;
    ensure_free(&a, x)?;
    ensure_free(&a, y)?;
    ctx(a.acquire(x, Wait::Try), "ACQUIRE")?;
    let mut b = worker("B", 0)?;
    let cmd = format!("set {:x}", bit(x) | bit(y));
    b.send(&cmd)?;
    wait_waiters(&a, x, 1)?;
    let (r, out) = acquire(&c, y, abi::LOCK_NONBLOCK, 0);
    expect_errno(
        r,
        libc::EBUSY,
        "NONBLOCK ACQUIRE of a free lock an earlier waiter wants",
    )?;
    ensure_eq!(out.holder_pid, 0, "holder_pid of a free lock");
    expect_errno(
        acquire(&c, y, abi::LOCK_DEADLINE, 0).0,
        libc::EBUSY,
        "past-deadline ACQUIRE of that lock",
    )?;
    expect_errno(
        acquire_set(&c, bit(y), abi::LOCK_NONBLOCK, 0).0,
        libc::EBUSY,
        "NONBLOCK ACQUIRE_SET {{30}}",
    )?;
    expect_errno(
        acquire_set(&c, bit(y) | bit(31), abi::LOCK_NONBLOCK, 0).0,
        libc::EBUSY,
        "NONBLOCK ACQUIRE_SET {{30,31}}",
    )?;
    ensure_eq!(
        expect_ok(
            lock_ctl(&c, y as u8, abi::LOCK_CTL_ACQUIRE),
            "LOCK_CTL ACQUIRE"
        )?,
        0,
        "LOCK_CTL ACQUIRE of a lock a waiter wants"
    );
    ensure!(
        !query(&a, 31)?.held,
        "lock 31 taken by a failed ACQUIRE_SET"
    );
    // A blocking waiter on 30 arrives after B.
    let base = query(&a, y)?.waiters;
    let mut d = worker("D", 0)?;
    d.send(&format!("acquire {y}"))?;
    wait_waiters(&a, y, base + 1)?;
    ensure!(!query(&a, y)?.held, "a later waiter barged in on lock {y}");
    ctx(a.release(bit(x)), "RELEASE")?;
    ok_reply(&mut b, &cmd)?;
    for i in [x, y] {
        ensure_eq!(
            query(&a, i)?.holder_pid,
            b.pid as u32,
            "holder of lock {i} after A released"
        );
    }
    ok(&mut b, &format!("release {:x}", bit(x) | bit(y)))?;
    ok_reply(&mut d, "acquire")?;
    ensure_eq!(
        query(&a, y)?.holder_pid,
        d.pid as u32,
        "holder of lock {y} after B released"
    );
    ok(&mut d, &format!("release {:x}", bit(y)))?;
    finish(b)?;
    finish(d)?;
    ensure_free(&a, x)
}

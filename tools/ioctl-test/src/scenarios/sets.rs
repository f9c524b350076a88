//! ACQUIRE_SET: all or nothing, owner-died mask, arrival order (no barging),
//! and arrival order never making a holder wait for a set that waits for it.

use std::os::fd::{AsRawFd, RawFd};

use tt_arbiter::{abi, Device, Wait};

use super::locks::{holder_is, sleeper_poller_sleeper, Setting, HUGE_BOUND_US};
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
/// blocking waiter on 30 is served after B. All of it with the hand-off
/// bound huge, where a one-lock request may pass a poller's place: sets
/// stay strict. Then a set does not barge past a poller's place either,
/// where a one-lock request would, and makes that place strict. (Seen
/// failing with the driver letting sets barge, `may_barge` without its
/// one-lock check: the set try took the free lock; and with a queued set
/// not making the places of its locks strict, `passable` without its
/// `sets` check: the failed set try's place was granted lock 31.)
pub fn arrival_order_no_barging() -> TestResult {
    let (x, y) = (29, 30);
    let _lease = Setting::long_lease()?;
    let _bound = Setting::bound(HUGE_BOUND_US)?;
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
        libc::ETIMEDOUT,
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
    ensure_free(&a, x)?;

    // Lock 30 left free for a poller under the bound: a set try of {30, 31}
    // is refused (a one-lock try would get it, locks/barging_under_the_bound),
    // and its place behind the poller's makes that one strict: the lock is
    // kept for the poller.
    expect_errno(
        release(&c, bit(y)),
        libc::EPERM,
        "RELEASE of a lock not held",
    )?;
    ensure_free(&a, y)?;
    let (mut s0, mut p, _) = sleeper_poller_sleeper(&a, y, false)?;
    ctx(a.release(bit(y)), "RELEASE")?;
    ok_reply(&mut s0, "acquire")?;
    ok(&mut s0, &format!("release {:x}", bit(y)))?;
    let q = query(&a, y)?;
    ensure!(
        !q.held,
        "lock {y} left free for the poller under the bound: {q:?}"
    );
    expect_errno(
        acquire_set(&c, bit(y) | bit(31), abi::LOCK_NONBLOCK, 0).0,
        libc::EBUSY,
        "NONBLOCK ACQUIRE_SET {30,31} with a poller queued for 30",
    )?;
    ensure!(
        !query(&a, 31)?.held,
        "lock 31 taken by a failed ACQUIRE_SET"
    );
    holder_is(&a, y, &p, "after a set queued behind the poller's place")?;
    let v = ok(&mut p, &format!("ctl {y} {}", abi::LOCK_CTL_ACQUIRE))?;
    ensure_eq!(v[0], 1, "the poller's next try");
    ok(&mut p, &format!("ctl {y} {}", abi::LOCK_CTL_RELEASE))?;
    // c's failed set try left a place: its next command gives it up.
    expect_errno(
        release(&c, bit(y)),
        libc::EPERM,
        "RELEASE of a lock not held",
    )?;
    finish(s0)?;
    finish(p)?;
    ensure_free(&a, y)?;
    ensure_free(&a, 31)
}

/// Blocking requests of lock `index` on the open file `fd`, from a child
/// that shares it (so the same lock owner): blocking ACQUIRE, then LOCK_CTL
/// ACQUIRE_BLOCKING, each reported ("acquire", "ctl") and released before
/// the next. A request that never returns shows as a child that says
/// nothing within PATIENCE.
fn blocking_requests(fd: RawFd, index: u32) -> Result<Child, String> {
    spawn("same file", &[fd], move |link| {
        let (r, _) = acquire(&fd, index, 0, 0);
        expect_ok(r, "blocking ACQUIRE")?;
        link.send("acquire")?;
        expect_ok(release(&fd, bit(index)), "RELEASE")?;
        let v = expect_ok(
            lock_ctl(&fd, index as u8, abi::LOCK_CTL_ACQUIRE_BLOCKING),
            "LOCK_CTL ACQUIRE_BLOCKING",
        )?;
        ensure_eq!(v, 1, "LOCK_CTL ACQUIRE_BLOCKING value");
        link.send("ctl")?;
        let v = expect_ok(
            lock_ctl(&fd, index as u8, abi::LOCK_CTL_RELEASE),
            "LOCK_CTL RELEASE",
        )?;
        ensure_eq!(v, 1, "LOCK_CTL RELEASE value");
        Ok(())
    })
}

/// Every command of the holder of a set's lock for a free lock `index`
/// that a queued set (waiting for the holder) wants: granted at once.
fn holder_gets_a_free_lock(j: &Device, index: u32, what: &str) -> TestResult {
    let (r, _) = acquire(j, index, abi::LOCK_NONBLOCK, 0);
    expect_ok(r, &format!("NONBLOCK ACQUIRE of {what}"))?;
    ctx(j.release(bit(index)), "RELEASE")?;
    let v = expect_ok(
        lock_ctl(j, index as u8, abi::LOCK_CTL_ACQUIRE),
        "LOCK_CTL ACQUIRE",
    )?;
    ensure_eq!(v, 1, "LOCK_CTL ACQUIRE (try) of {what}");
    ctx(j.release(bit(index)), "RELEASE")?;
    let (r, _) = acquire_set(j, bit(index), abi::LOCK_NONBLOCK, 0);
    expect_ok(r, &format!("NONBLOCK ACQUIRE_SET of {what}"))?;
    ctx(j.release(bit(index)), "RELEASE")?;
    let mut same = blocking_requests(j.as_raw_fd(), index)?;
    same.expect("acquire")
        .map_err(|e| format!("blocking ACQUIRE of {what}: {e}"))?;
    same.expect("ctl")
        .map_err(|e| format!("LOCK_CTL ACQUIRE_BLOCKING of {what}: {e}"))?;
    same.wait()
}

/// File J holds CHIP_IN_USE (UMD holds it for a whole run); another file
/// queues ACQUIRE_SET {CHIP_IN_USE, ARC_MSG}, which marks the free ARC_MSG
/// wanted. The set waits for J, so J must not wait for it: every way J
/// asks for ARC_MSG (try, LOCK_CTL try, blocking, LOCK_CTL blocking) gets it
/// at once, and the set still gets both locks when J is done.
pub fn queued_set_does_not_block_its_holder() -> TestResult {
    let (chip, arc) = (abi::LOCK_CHIP_IN_USE, abi::LOCK_ARC_MSG);
    let j = open(0)?;
    ensure_free(&j, chip)?;
    ensure_free(&j, arc)?;
    ctx(j.acquire(chip, Wait::Try), "ACQUIRE CHIP_IN_USE")?;
    let mut k = worker("set waiter", 0)?;
    let cmd = format!("set {:x}", bit(chip) | bit(arc));
    k.send(&cmd)?;
    wait_waiters(&j, arc, 1)?;
    holder_gets_a_free_lock(&j, arc, "ARC_MSG by the holder of CHIP_IN_USE")?;
    let q = query(&j, arc)?;
    ensure!(
        !q.held && q.waiters == 1,
        "ARC_MSG after J's requests: {q:?}"
    );
    ctx(j.release(bit(chip)), "RELEASE CHIP_IN_USE")?;
    ok_reply(&mut k, &cmd)?;
    for i in [chip, arc] {
        ensure_eq!(query(&j, i)?.holder_pid, k.pid as u32, "holder of lock {i}");
    }
    ok(&mut k, &format!("release {:x}", bit(chip) | bit(arc)))?;
    finish(k)?;
    ensure_free(&j, chip)?;
    ensure_free(&j, arc)
}

/// As above, but ARC_MSG is held by L when J asks: J queues behind the
/// set, and L's release goes to J (before, it went to nobody: the set
/// waited for J, J for the set).
pub fn holder_behind_a_set_gets_the_freed_lock() -> TestResult {
    let (chip, arc) = (abi::LOCK_CHIP_IN_USE, abi::LOCK_ARC_MSG);
    let j = open(0)?;
    ensure_free(&j, chip)?;
    ensure_free(&j, arc)?;
    ctx(j.acquire(chip, Wait::Try), "ACQUIRE CHIP_IN_USE")?;
    let mut l = worker("ARC_MSG holder", 0)?;
    ok(&mut l, &format!("acquire {arc}"))?;
    let mut k = worker("set waiter", 0)?;
    let cmd = format!("set {:x}", bit(chip) | bit(arc));
    k.send(&cmd)?;
    wait_waiters(&j, arc, 1)?;
    let mut same = blocking_requests(j.as_raw_fd(), arc)?;
    wait_waiters(&j, arc, 2)?;
    ok(&mut l, &format!("release {:x}", bit(arc)))?;
    same.expect("acquire")
        .map_err(|e| format!("J's blocking ACQUIRE of ARC_MSG after L released it: {e}"))?;
    same.expect("ctl")
        .map_err(|e| format!("J's LOCK_CTL ACQUIRE_BLOCKING of ARC_MSG: {e}"))?;
    same.wait()?;
    ctx(j.release(bit(chip)), "RELEASE CHIP_IN_USE")?;
    ok_reply(&mut k, &cmd)?;
    ok(&mut k, &format!("release {:x}", bit(chip) | bit(arc)))?;
    finish(k)?;
    finish(l)?;
    ensure_free(&j, chip)?;
    ensure_free(&j, arc)
}

/// Chains: sets {X,Y} and {Y,Z} queued, J holds X and asks for Z. The
/// second set waits for the first, which waits for J: J gets Z at once by
/// every command, and the sets are then served in arrival order.
pub fn chain_of_sets_does_not_block_its_holder() -> TestResult {
    let (x, y, z) = (40, 41, 42);
    let j = open(0)?;
    for i in [x, y, z] {
        ensure_free(&j, i)?;
    }
    ctx(j.acquire(x, Wait::Try), "ACQUIRE X")?;
    let mut p = worker("set {X,Y}", 0)?;
    let cmd_p = format!("set {:x}", bit(x) | bit(y));
    p.send(&cmd_p)?;
    wait_waiters(&j, y, 1)?;
    let mut q = worker("set {Y,Z}", 0)?;
    let cmd_q = format!("set {:x}", bit(y) | bit(z));
    q.send(&cmd_q)?;
    wait_waiters(&j, z, 1)?;
    holder_gets_a_free_lock(&j, z, "Z by the holder of X")?;
    ctx(j.release(bit(x)), "RELEASE X")?;
    ok_reply(&mut p, &cmd_p)?;
    let st = query(&j, z)?;
    ensure!(
        !st.held && st.waiters == 1,
        "{{Y,Z}} must wait for {{X,Y}}: {st:?}"
    );
    ok(&mut p, &format!("release {:x}", bit(x) | bit(y)))?;
    ok_reply(&mut q, &cmd_q)?;
    ok(&mut q, &format!("release {:x}", bit(y) | bit(z)))?;
    finish(p)?;
    finish(q)?;
    for i in [x, y, z] {
        ensure_free(&j, i)?;
    }
    Ok(())
}

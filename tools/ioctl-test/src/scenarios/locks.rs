//! Blocking, FIFO hand-off, owner death, signals, deadlines and the error
//! cases of ACQUIRE/RELEASE on single locks.

use std::time::Duration;

use tt_arbiter::{abi, Error, Wait};

use crate::util::*;
use crate::worker::{
    err_reply, finish, ok, ok_reply, queue_chain, read_grants, wait_all, worker, How,
};

const DIED: u64 = abi::LOCK_OWNER_DIED as u64;

/// A blocked waiter (ACQUIRE and LOCK_CTL ACQUIRE_BLOCKING) is handed the
/// lock by a release, synchronously.
pub fn woken_by_release() -> TestResult {
    let i = 5;
    let a = open(0)?;
    ensure_free(&a, i)?;
    for cmd in [
        format!("acquire {i}"),
        format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE_BLOCKING),
    ] {
        ctx(a.acquire(i, Wait::Try), "ACQUIRE of a free lock")?;
        let mut w = worker("waiter", 0)?;
        w.send(&cmd)?;
        wait_waiters(&a, i, 1)?;
        ctx(a.release(bit(i)), "RELEASE")?;
        let q = query(&a, i)?;
        ensure!(
            q.held && !q.held_by_caller && q.holder_pid == w.pid as u32 && q.waiters == 0,
            "right after RELEASE returned, the lock must belong to the waiter (pid {}): {q:?}",
            w.pid
        );
        let v = ok_reply(&mut w, &cmd)?;
        if cmd.starts_with("acquire") {
            ensure!(v[0] == 0, "{cmd}: out_flags {:#x}", v[0]);
            ensure!(v[1] > 0, "{cmd}: waited_ns is 0 after waiting");
        } else {
            ensure_eq!(v[0], 1, "{cmd}: value");
        }
        ok(&mut w, &format!("release {:x}", bit(i)))?;
        ensure_free(&a, i)?;
        finish(w)?;
    }
    Ok(())
}

/// A holder exiting without releasing wakes the waiter, which is told
/// OWNER_DIED; the acquirer after it is not. Without a waiter the mark stays
/// until any acquisition (LOCK_CTL included) consumes it.
pub fn woken_by_holder_exit() -> TestResult {
    let i = 6;
    let a = open(0)?;
    ensure_free(&a, i)?;
    let died0 = query(&a, i)?.raw.owner_died_count;
    let mut h = worker("holder", 0)?;
    ok(&mut h, &format!("acquire {i}"))?;
    let mut w = worker("waiter", 0)?;
    w.send(&format!("acquire {i}"))?;
    wait_waiters(&a, i, 1)?;
    h.send("exit")?;
    h.wait()?;
    let v = ok_reply(&mut w, "acquire")?;
    ensure!(
        v[0] & DIED != 0,
        "waiter granted after the holder exited: out_flags {:#x} lacks OWNER_DIED",
        v[0]
    );
    let q = query(&a, i)?;
    ensure!(
        q.holder_pid == w.pid as u32 && !q.owner_died,
        "after the grant: {q:?}"
    );
    ensure_eq!(q.raw.owner_died_count, died0 + 1, "owner_died_count");
    ok(&mut w, &format!("release {:x}", bit(i)))?;
    let g = ctx(a.acquire(i, Wait::Try), "ACQUIRE after the waiter released")?;
    ensure_eq!(g.owner_died_mask, 0, "next acquirer's owner-died mask");
    ctx(a.release(bit(i)), "RELEASE")?;

    // No waiter: the mark waits for the next acquisition, LOCK_CTL's too.
    for consumer in ["LOCK_CTL", "ACQUIRE"] {
        let mut h = worker("holder", 0)?;
        ok(&mut h, &format!("acquire {i}"))?;
        h.send("exit")?;
        h.wait()?;
        let q = query(&a, i)?;
        ensure!(!q.held && q.owner_died, "holder exited holding it: {q:?}");
        if consumer == "LOCK_CTL" {
            ensure_eq!(
                expect_ok(
                    lock_ctl(&a, i as u8, abi::LOCK_CTL_ACQUIRE),
                    "LOCK_CTL ACQUIRE"
                )?,
                1,
                "LOCK_CTL ACQUIRE"
            );
        } else {
            let g = ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
            ensure_eq!(
                g.owner_died_mask,
                bit(i),
                "owner-died mask of the first acquirer"
            );
        }
        let q = query(&a, i)?;
        ensure!(!q.owner_died, "mark not cleared by {consumer}: {q:?}");
        ctx(a.release(bit(i)), "RELEASE")?;
        let g = ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
        ensure_eq!(
            g.owner_died_mask,
            0,
            "owner-died mask after {consumer} consumed it"
        );
        ctx(a.release(bit(i)), "RELEASE")?;
    }
    ensure_eq!(
        query(&a, i)?.raw.owner_died_count,
        died0 + 3,
        "owner_died_count"
    );
    finish(w)
}

/// SIGKILL of the holder with 5 queued waiters: grants follow queue order.
pub fn sigkill_holder_fifo() -> TestResult {
    let i = 7;
    let a = open(0)?;
    ensure_free(&a, i)?;
    let mut h = worker("holder", 0)?;
    ok(&mut h, &format!("acquire {i}"))?;
    let how = |n: usize| if n % 2 == 0 { How::Acquire } else { How::Ctl };
    let (children, grants) = queue_chain(&a, 0, i, 5, how)?;
    h.kill_and_reap()?;
    let order = read_grants(&grants, 5)?;
    wait_all(children)?;
    ensure_eq!(order, vec![0, 1, 2, 3, 4], "grant order (queue order 0..4)");
    let q = query(&a, i)?;
    ensure!(
        !q.held && q.waiters == 0 && q.raw.spurious_wakeups == 0,
        "after the chain: {q:?}"
    );
    Ok(())
}

/// A signal handler without SA_RESTART: EINTR, and the waiter left the queue.
pub fn eintr_without_restart() -> TestResult {
    let i = 8;
    let a = open(0)?;
    ensure_free(&a, i)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    for cmd in [
        format!("acquire {i}"),
        format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE_BLOCKING),
    ] {
        let mut w = worker("waiter", 0)?;
        ok(&mut w, "handler norestart")?;
        w.send(&cmd)?;
        wait_waiters(&a, i, 1)?;
        w.kill(libc::SIGUSR1)?;
        w.expect("sig")?;
        err_reply(&mut w, &cmd, libc::EINTR)?;
        // The worker is alive and idle: the count drops only if it left the queue.
        let q = wait_waiters(&a, i, 0)?;
        ensure!(
            q.held_by_caller,
            "lock no longer ours after the waiter's EINTR: {q:?}"
        );
        finish(w)?;
    }
    ctx(a.release(bit(i)), "RELEASE")?;
    ensure_free(&a, i)
}

/// SA_RESTART: LOCK_CTL ACQUIRE_BLOCKING restarts and succeeds later.
pub fn sa_restart_lock_ctl() -> TestResult {
    let i = 9;
    let a = open(0)?;
    ensure_free(&a, i)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let mut w = worker("waiter", 0)?;
    ok(&mut w, "handler restart")?;
    let cmd = format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE_BLOCKING);
    w.send(&cmd)?;
    wait_waiters(&a, i, 1)?;
    w.kill(libc::SIGUSR1)?;
    w.expect("sig")?;
    wait_waiters(&a, i, 1)?;
    ctx(a.release(bit(i)), "RELEASE")?;
    let v = ok_reply(&mut w, &cmd)?;
    ensure_eq!(v[0], 1, "restarted ACQUIRE_BLOCKING value");
    let q = query(&a, i)?;
    ensure!(
        q.holder_pid == w.pid as u32,
        "holder after the restarted call: {q:?}"
    );
    finish(w)?;
    ensure_free(&a, i)
}

/// SIGSTOP/SIGCONT of a waiter in ACQUIRE: it still acquires after release.
pub fn sigstop_sigcont_waiter() -> TestResult {
    let i = 10;
    let a = open(0)?;
    ensure_free(&a, i)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let mut w = worker("waiter", 0)?;
    let cmd = format!("acquire {i}");
    w.send(&cmd)?;
    wait_waiters(&a, i, 1)?;
    w.kill(libc::SIGSTOP)?;
    w.wait_stopped()?;
    w.kill(libc::SIGCONT)?;
    w.wait_continued()?;
    wait_waiters(&a, i, 1)?;
    ctx(a.release(bit(i)), "RELEASE")?;
    ok_reply(&mut w, &cmd)?;
    let q = query(&a, i)?;
    ensure!(q.holder_pid == w.pid as u32, "holder after release: {q:?}");
    finish(w)?;
    ensure_free(&a, i)
}

/// Deadlines: a past one is a try (EBUSY), a future one times out with
/// ETIMEDOUT never before it; NONBLOCK gives EBUSY; holder_pid reported.
pub fn deadlines_and_nonblock() -> TestResult {
    let (i, j) = (11, 12);
    let a = open(0)?;
    ensure_free(&a, i)?;
    ensure_free(&a, j)?;
    let mut h = worker("holder", 0)?;
    ok(&mut h, &format!("acquire {i}"))?;
    let hp = h.pid as u32;
    let now = now_ns();
    for (what, flags, deadline) in [
        ("DEADLINE 0", abi::LOCK_DEADLINE, 0),
        ("DEADLINE now-1ms", abi::LOCK_DEADLINE, now - 1_000_000),
        ("NONBLOCK", abi::LOCK_NONBLOCK, 0),
    ] {
        let (r, out) = acquire(&a, i, flags, deadline);
        expect_errno(r, libc::EBUSY, &format!("ACQUIRE {what} of a held lock"))?;
        ensure_eq!(out.holder_pid, hp, "ACQUIRE {what}: holder_pid");
        let (r, out) = acquire_set(&a, bit(i) | bit(j), flags, deadline);
        expect_errno(
            r,
            libc::EBUSY,
            &format!("ACQUIRE_SET {what} of a held lock"),
        )?;
        ensure_eq!(out.holder_pid, hp, "ACQUIRE_SET {what}: holder_pid");
    }
    ensure_eq!(
        expect_ok(
            lock_ctl(&a, i as u8, abi::LOCK_CTL_ACQUIRE),
            "LOCK_CTL ACQUIRE"
        )?,
        0,
        "LOCK_CTL ACQUIRE of a held lock"
    );
    for (what, mask) in [("ACQUIRE", bit(i)), ("ACQUIRE_SET", bit(i) | bit(j))] {
        let deadline = now_ns() + 50_000_000;
        let (r, holder) = if mask.count_ones() == 1 {
            let (r, out) = acquire(&a, i, abi::LOCK_DEADLINE, deadline);
            (r, out.holder_pid)
        } else {
            let (r, out) = acquire_set(&a, mask, abi::LOCK_DEADLINE, deadline);
            (r, out.holder_pid)
        };
        let after = now_ns();
        expect_errno(
            r,
            libc::ETIMEDOUT,
            &format!("{what} with a deadline 50 ms ahead"),
        )?;
        ensure!(
            after >= deadline,
            "{what} returned ETIMEDOUT {} ns before its deadline",
            deadline - after
        );
        ensure_eq!(holder, hp, "{what} ETIMEDOUT holder_pid");
        let q = query(&a, i)?;
        ensure!(
            q.waiters == 0 && q.holder_pid == hp,
            "after the timeout: {q:?}"
        );
        ensure!(
            !query(&a, j)?.held,
            "lock {j} taken by a timed-out ACQUIRE_SET"
        );
    }
    match a.acquire(i, Wait::Timeout(Duration::from_millis(20))) {
        Err(Error::Timeout { holder_pid }) if holder_pid == hp => {}
        other => {
            return Err(format!(
            "client acquire with Wait::Timeout: {other:?}, expected Timeout {{ holder_pid: {hp} }}"
        ))
        }
    }
    // A free lock: a past deadline behaves as a successful try.
    let (r, _) = acquire(&a, j, abi::LOCK_DEADLINE, 0);
    expect_ok(r, "ACQUIRE with a past deadline of a free lock")?;
    ctx(a.release(bit(j)), "RELEASE")?;
    let (r, _) = acquire(&a, j, abi::LOCK_DEADLINE, now_ns() + 10_000_000_000);
    expect_ok(r, "ACQUIRE with a far deadline of a free lock")?;
    ctx(a.release(bit(j)), "RELEASE")?;
    ok(&mut h, &format!("release {:x}", bit(i)))?;
    finish(h)?;
    ensure_free(&a, i)
}

/// EDEADLK for a lock this file holds; EPERM for releasing what it does not
/// hold, all or nothing.
pub fn edeadlk_and_eperm() -> TestResult {
    let (i, j) = (13, 14);
    let a = open(0)?;
    let b = open(0)?;
    ensure_free(&a, i)?;
    ensure_free(&a, j)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    for (what, flags, deadline) in [
        ("NONBLOCK", abi::LOCK_NONBLOCK, 0),
        ("DEADLINE", abi::LOCK_DEADLINE, now_ns() + 1_000_000_000),
        ("blocking", 0, 0),
    ] {
        expect_errno(
            acquire(&a, i, flags, deadline).0,
            libc::EDEADLK,
            &format!("{what} ACQUIRE of a lock this file holds"),
        )?;
        expect_errno(
            acquire_set(&a, bit(i) | bit(j), flags, deadline).0,
            libc::EDEADLK,
            &format!("{what} ACQUIRE_SET including a lock this file holds"),
        )?;
        ensure!(
            !query(&a, j)?.held,
            "lock {j} taken by a failed ACQUIRE_SET"
        );
    }
    expect_errno(release(&a, bit(j)), libc::EPERM, "RELEASE of a free lock")?;
    expect_errno(
        release(&b, bit(i)),
        libc::EPERM,
        "RELEASE of a lock another file holds",
    )?;
    expect_errno(
        release(&a, bit(i) | bit(j)),
        libc::EPERM,
        "RELEASE of a mask partly held",
    )?;
    let q = query(&a, i)?;
    ensure!(q.held_by_caller, "EPERM RELEASE changed the state: {q:?}");
    ensure!(
        matches!(b.release(bit(i)), Err(Error::NotHeld)),
        "client release maps EPERM to NotHeld"
    );
    ctx(a.release(bit(i)), "RELEASE")?;
    expect_errno(release(&a, bit(i)), libc::EPERM, "RELEASE again")?;
    ensure_free(&a, i)
}

/// Two opens in one process are different owners.
pub fn two_opens_conflict() -> TestResult {
    let i = 15;
    let a = open(0)?;
    let b = open(0)?;
    ensure_free(&a, i)?;
    set_comm("tt-two-opens");
    ctx(a.acquire(i, Wait::Try), "ACQUIRE on the first file")?;
    let (r, out) = acquire(&b, i, abi::LOCK_NONBLOCK, 0);
    expect_errno(r, libc::EBUSY, "NONBLOCK ACQUIRE on the second file")?;
    ensure_eq!(out.holder_pid, getpid(), "holder_pid");
    let qa = query(&a, i)?;
    let qb = query(&b, i)?;
    ensure!(
        qa.held
            && qa.held_by_caller
            && qa.holder_pid == getpid()
            && qa.holder_comm == "tt-two-opens",
        "QUERY by the holder: {qa:?}"
    );
    ensure!(
        qb.held && !qb.held_by_caller && qb.holder_pid == getpid(),
        "QUERY by the other file: {qb:?}"
    );
    ctx(a.release(bit(i)), "RELEASE")?;
    ensure_free(&a, i)
}

/// Each release wakes exactly the next waiter: 8 waiters handed off in
/// turn, counters exact, no spurious wake-up; waiters of another lock stay
/// asleep.
pub fn one_waiter_woken_per_release() -> TestResult {
    let (i, other) = (16, 17);
    let a = open(0)?;
    let c = open(0)?;
    ensure_free(&a, i)?;
    ensure_free(&a, other)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    ctx(c.acquire(other, Wait::Try), "ACQUIRE other")?;
    let mut bystanders = Vec::new();
    for n in 0..2 {
        let w = worker("bystander", 0)?;
        w.send(&format!("acquire {other}"))?;
        wait_waiters(&a, other, n + 1)?;
        bystanders.push(w);
    }
    let before = query(&a, i)?.raw;
    let other_before = query(&a, other)?.raw;
    let (children, grants) = queue_chain(&a, 0, i, 8, |_| How::Acquire)?;
    ctx(a.release(bit(i)), "RELEASE")?;
    let order = read_grants(&grants, 8)?;
    wait_all(children)?;
    ensure_eq!(order, (0..8).collect::<Vec<u8>>(), "grant order");
    let q = query(&a, i)?;
    ensure!(!q.held && q.waiters == 0, "after the hand-offs: {q:?}");
    ensure_eq!(q.raw.acquisitions, before.acquisitions + 8, "acquisitions");
    ensure_eq!(q.raw.contended, before.contended + 8, "contended");
    ensure_eq!(q.raw.spurious_wakeups, 0, "spurious_wakeups of lock {i}");
    let qo = query(&a, other)?;
    ensure!(
        qo.waiters == 2 && !qo.held_by_caller && qo.holder_pid == getpid(),
        "other lock: {qo:?}"
    );
    ensure_eq!(
        qo.raw.spurious_wakeups,
        0,
        "spurious_wakeups of lock {other}"
    );
    ensure_eq!(
        qo.raw.acquisitions,
        other_before.acquisitions,
        "acquisitions of lock {other}"
    );
    ctx(c.release(bit(other)), "RELEASE other")?;
    for mut w in bystanders {
        ok_reply(&mut w, "acquire")?;
        ok(&mut w, &format!("release {:x}", bit(other)))?;
        finish(w)?;
    }
    let qo = query(&a, other)?;
    ensure!(
        !qo.held && qo.raw.spurious_wakeups == 0,
        "other lock at the end: {qo:?}"
    );
    Ok(())
}

/// QUERY reports holder, comm, waiters and moves its counters as documented.
pub fn query_fields() -> TestResult {
    let i = 18;
    let a = open(0)?;
    ensure_free(&a, i)?;
    let c0 = query(&a, i)?.raw;
    let mut w = worker("holder", 0)?;
    ok(&mut w, "comm ttq-holder")?;
    ok(&mut w, &format!("acquire {i}"))?;
    let q1 = query(&a, i)?;
    ensure!(
        q1.held && !q1.held_by_caller && !q1.owner_died,
        "flags: {q1:?}"
    );
    ensure_eq!(q1.holder_pid, w.pid as u32, "holder_pid");
    ensure_eq!(q1.holder_comm.as_str(), "ttq-holder", "holder_comm");
    ensure_eq!(q1.waiters, 0, "waiters");
    ensure_eq!(
        (q1.raw.acquisitions, q1.raw.contended),
        (c0.acquisitions + 1, c0.contended),
        "acquisitions, contended"
    );
    // The clock may advance in coarse steps (jiffies under some VMs): wait,
    // bounded, for held_ns to move past 0, and check it never goes back.
    let mut q2 = query(&a, i)?;
    for _ in 0..5000 {
        if q2.raw.held_ns > 0 {
            break;
        }
        std::thread::yield_now();
        q2 = query(&a, i)?;
    }
    ensure!(
        q2.raw.held_ns >= q1.raw.held_ns && q2.raw.held_ns > 0,
        "held_ns {} then {}",
        q1.raw.held_ns,
        q2.raw.held_ns
    );
    let mut w2 = worker("waiter", 0)?;
    w2.send(&format!("acquire {i}"))?;
    wait_waiters(&a, i, 1)?;
    ok(&mut w, &format!("release {:x}", bit(i)))?;
    ok_reply(&mut w2, "acquire")?;
    let q3 = query(&a, i)?;
    ensure_eq!(q3.holder_pid, w2.pid as u32, "holder_pid after hand-off");
    ensure_eq!(
        (q3.raw.acquisitions, q3.raw.contended),
        (c0.acquisitions + 2, c0.contended + 1),
        "acquisitions, contended after hand-off"
    );
    w2.send("exit")?;
    w2.wait()?;
    let q4 = query(&a, i)?;
    ensure!(!q4.held && q4.owner_died, "after the holder exited: {q4:?}");
    ensure_eq!(
        q4.raw.owner_died_count,
        c0.owner_died_count + 1,
        "owner_died_count"
    );
    set_comm("tt-query-self");
    let g = ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    ensure_eq!(g.owner_died_mask, bit(i), "owner-died mask");
    let q5 = query(&a, i)?;
    ensure!(
        q5.held && q5.held_by_caller && !q5.owner_died && q5.holder_pid == getpid(),
        "own QUERY: {q5:?}"
    );
    ensure_eq!(q5.holder_comm.as_str(), "tt-query-self", "own holder_comm");
    ensure_eq!(q5.raw.acquisitions, c0.acquisitions + 3, "acquisitions");
    ctx(a.release(bit(i)), "RELEASE")?;
    finish(w)?;
    ensure_free(&a, i)
}

/// close() of the last reference releases before it returns (or hands the
/// lock to the waiter).
pub fn close_releases_synchronously() -> TestResult {
    let i = 19;
    let a = open(0)?;
    ensure_free(&a, i)?;
    let x = open(0)?;
    ctx(x.acquire(i, Wait::Try), "ACQUIRE")?;
    drop(x);
    let q = query(&a, i)?;
    ensure!(!q.held, "right after close() the lock is still held: {q:?}");
    let x = open(0)?;
    ctx(x.acquire(i, Wait::Try), "ACQUIRE")?;
    let mut w = worker("waiter", 0)?;
    w.send(&format!("acquire {i}"))?;
    wait_waiters(&a, i, 1)?;
    drop(x);
    let q = query(&a, i)?;
    ensure!(
        q.held && q.holder_pid == w.pid as u32 && q.waiters == 0,
        "right after close() the waiter must hold it: {q:?}"
    );
    let v = ok_reply(&mut w, "acquire")?;
    ensure!(
        v[0] & DIED != 0,
        "a lock freed by close() is an owner-died release: out_flags {:#x}",
        v[0]
    );
    ok(&mut w, "close")?;
    let q = query(&a, i)?;
    ensure!(
        !q.held,
        "right after the waiter's close() the lock is still held: {q:?}"
    );
    finish(w)
}

//! Blocking, FIFO hand-off, owner death, signals, deadlines and the error
//! cases of ACQUIRE/RELEASE on single locks.

use std::fs;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use tt_arbiter::{abi, Error, Wait};

use crate::util::*;
use crate::worker::{
    err_reply, finish, ok, ok_reply, queue_chain, read_grants, wait_all, worker, How,
};

const DIED: u64 = abi::LOCK_OWNER_DIED as u64;

/// A blocked waiter (ACQUIRE and LOCK_CTL ACQUIRE_BLOCKING) is handed the
/// lock by a release, synchronously, with the hand-off bound 0 (strict
/// FIFO; under the bound a young waiter is woken to a free lock instead:
/// `locks/sleepers_passed_under_the_bound`).
pub fn woken_by_release() -> TestResult {
    let i = 5;
    let _strict = Setting::bound(0)?;
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
    let spurious = query(&a, i)?.raw.spurious_wakeups;
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
        !q.held && q.waiters == 0 && q.raw.spurious_wakeups == spurious,
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

/// Deadlines: a past one times out at once (ETIMEDOUT, as a future one
/// does, never before it); NONBLOCK gives EBUSY; holder_pid reported.
pub fn deadlines_and_nonblock() -> TestResult {
    let (i, j) = (11, 12);
    let a = open(0)?;
    ensure_free(&a, i)?;
    ensure_free(&a, j)?;
    let mut h = worker("holder", 0)?;
    ok(&mut h, &format!("acquire {i}"))?;
    let hp = h.pid as u32;
    let now = now_ns();
    for (what, flags, deadline, errno) in [
        ("DEADLINE 0", abi::LOCK_DEADLINE, 0, libc::ETIMEDOUT),
        (
            "DEADLINE now-1ms",
            abi::LOCK_DEADLINE,
            now - 1_000_000,
            libc::ETIMEDOUT,
        ),
        ("NONBLOCK", abi::LOCK_NONBLOCK, 0, libc::EBUSY),
    ] {
        let (r, out) = acquire(&a, i, flags, deadline);
        expect_errno(r, errno, &format!("ACQUIRE {what} of a held lock"))?;
        ensure_eq!(out.holder_pid, hp, "ACQUIRE {what}: holder_pid");
        let (r, out) = acquire_set(&a, bit(i) | bit(j), flags, deadline);
        expect_errno(r, errno, &format!("ACQUIRE_SET {what} of a held lock"))?;
        ensure_eq!(out.holder_pid, hp, "ACQUIRE_SET {what}: holder_pid");
    }
    match a.acquire(i, Wait::Deadline(tt_arbiter::Monotonic(1))) {
        Err(Error::Timeout { holder_pid }) if holder_pid == hp => {}
        other => {
            return Err(format!(
                "client acquire with a past Wait::Deadline: {other:?}, expected Timeout {{ holder_pid: {hp} }}"
            ))
        }
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
/// turn, counters exact, no spurious wake-up (every return of a waiter from
/// its sleep without a grant counts); waiters of another lock stay asleep:
/// their voluntary context switches do not move while the 8 hand-offs
/// happen.
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
    let mut switches = Vec::new();
    for w in &bystanders {
        wait_asleep(w.pid)?;
        switches.push(voluntary_switches(w.pid)?);
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
    for (w, before) in bystanders.iter().zip(&switches) {
        let after = voluntary_switches(w.pid)?;
        ensure_eq!(
            after,
            *before,
            "voluntary context switches of a waiter of lock {other} (pid {}) during 8 hand-offs of lock {i}",
            w.pid
        );
    }
    ensure_eq!(
        q.raw.spurious_wakeups,
        before.spurious_wakeups,
        "spurious_wakeups of lock {i}"
    );
    let qo = query(&a, other)?;
    ensure!(
        qo.waiters == 2 && !qo.held_by_caller && qo.holder_pid == getpid(),
        "other lock: {qo:?}"
    );
    ensure_eq!(
        qo.raw.spurious_wakeups,
        other_before.spurious_wakeups,
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
        !qo.held && qo.raw.spurious_wakeups == other_before.spurious_wakeups,
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
/// lock to the waiter, with the hand-off bound 0).
pub fn close_releases_synchronously() -> TestResult {
    let _strict = Setting::bound(0)?;
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

// ---- what a process is doing, from /proc -------------------------------------------

/// Field 3 of `/proc/PID/stat`: R, S (interruptible sleep), D, T, t, ...
fn proc_state(pid: libc::pid_t) -> Result<char, String> {
    let path = format!("/proc/{pid}/stat");
    let stat = fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    // The comm, in parentheses, may hold spaces: the state follows the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|s| s.chars().next())
        .ok_or_else(|| format!("{path}: no state in {stat:?}"))
}

/// Waits (bounded) until process `pid` sleeps interruptibly: a waiter
/// known to be queued (QUERY) is then asleep in its wait.
pub fn wait_asleep(pid: libc::pid_t) -> TestResult {
    let start = Instant::now();
    loop {
        let state = proc_state(pid)?;
        if state == 'S' {
            return Ok(());
        }
        ensure!(
            start.elapsed() < PATIENCE,
            "pid {pid} not asleep within {PATIENCE:?} (state {state})"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `voluntary_ctxt_switches` of `/proc/PID/status` (its main thread): a
/// sleeping waiter that is woken and sleeps again adds one.
pub fn voluntary_switches(pid: libc::pid_t) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("{path}: no voluntary_ctxt_switches"))
}

// ---- stop, freeze, ptrace: a waiter keeps its place -------------------------------------

/// A DEADLINE waiter whose deadline passes while it is stopped gets
/// ETIMEDOUT when it continues (the restarted call times out at once with
/// the holder's pid), never EBUSY, and leaves the queue.
pub fn deadline_passed_while_stopped() -> TestResult {
    let i = 21;
    let a = open(0)?;
    ensure_free(&a, i)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let mut w = worker("waiter", 0)?;
    // Far enough ahead to stop the waiter first; if it times out before
    // the stop the answer is the same.
    let deadline = now_ns() + 2_000_000_000;
    let cmd = format!("deadline {i} {deadline}");
    w.send(&cmd)?;
    wait_waiters(&a, i, 1)?;
    w.kill(libc::SIGSTOP)?;
    w.wait_stopped()?;
    // The condition is the clock, not another process.
    while now_ns() <= deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    w.kill(libc::SIGCONT)?;
    w.wait_continued()?;
    let holder = err_reply(&mut w, &cmd, libc::ETIMEDOUT)?;
    ensure_eq!(holder, getpid(), "holder_pid of the ETIMEDOUT");
    wait_waiters(&a, i, 0)?;
    ensure!(
        query(&a, i)?.held_by_caller,
        "the lock left its holder: {:?}",
        query(&a, i)?
    );
    finish(w)?;
    ctx(a.release(bit(i)), "RELEASE")?;
    ensure_free(&a, i)
}

/// How a queued waiter is taken out of its sleep without a handler running.
#[derive(Clone, Copy, Debug)]
enum Pause {
    /// SIGSTOP, then SIGCONT.
    Stop,
    /// PTRACE_SEIZE + PTRACE_INTERRUPT (what strace -p and gdb do), then
    /// PTRACE_DETACH.
    Ptrace,
    /// The cgroup v2 freezer (docker pause), then a thaw.
    Freeze,
}

const FREEZER: &str = "/sys/fs/cgroup/tt-ioctl-test";

fn write_file(path: &str, value: &str) -> TestResult {
    fs::write(path, value).map_err(|e| format!("write {value:?} to {path}: {e}"))
}

/// Polls `FREEZER/cgroup.events` until it says `frozen` is `want`.
fn wait_frozen(want: bool) -> TestResult {
    let path = format!("{FREEZER}/cgroup.events");
    let line = if want { "frozen 1" } else { "frozen 0" };
    let start = Instant::now();
    loop {
        let events = fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
        if events.lines().any(|l| l == line) {
            return Ok(());
        }
        ensure!(
            start.elapsed() < PATIENCE,
            "{path} never said {line:?}: {events:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A cgroup v2 directory to freeze in, cgroup2 mounted if need be.
fn freezer_cgroup() -> TestResult {
    if fs::metadata("/sys/fs/cgroup/cgroup.controllers").is_err() {
        let (src, dst, fstype) = (c"none", c"/sys/fs/cgroup", c"cgroup2");
        // SAFETY: mount(2) with NUL-terminated strings and no data.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        ensure!(
            rc == 0,
            "mount cgroup2 on /sys/fs/cgroup: {}",
            std::io::Error::last_os_error()
        );
    }
    match fs::create_dir(FREEZER) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("mkdir {FREEZER}: {e}")),
    }
}

fn ptrace(request: libc::c_uint, pid: libc::pid_t) -> TestResult {
    // SAFETY: ptrace requests without data on our own child.
    let rc = unsafe { libc::ptrace(request, pid, 0usize, 0usize) };
    ensure!(
        rc == 0,
        "ptrace({request:#x}, {pid}): {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}

/// Takes `pid` out of its sleep as `how` says; returns once it is stopped
/// or frozen.
fn pause(w: &crate::util::Child, how: Pause) -> TestResult {
    match how {
        Pause::Stop => {
            w.kill(libc::SIGSTOP)?;
            w.wait_stopped()
        }
        Pause::Ptrace => {
            ptrace(libc::PTRACE_SEIZE, w.pid)?;
            ptrace(libc::PTRACE_INTERRUPT, w.pid)?;
            let status = waitpid(w.pid, libc::__WALL)?;
            ensure!(
                libc::WIFSTOPPED(status),
                "traced waiter not stopped: {}",
                describe_status(status)
            );
            Ok(())
        }
        Pause::Freeze => {
            write_file(&format!("{FREEZER}/cgroup.procs"), &w.pid.to_string())?;
            write_file(&format!("{FREEZER}/cgroup.freeze"), "1")?;
            wait_frozen(true)
        }
    }
}

/// Lets `pid` run on after [`pause`].
fn resume(w: &crate::util::Child, how: Pause) -> TestResult {
    match how {
        Pause::Stop => {
            w.kill(libc::SIGCONT)?;
            w.wait_continued()
        }
        Pause::Ptrace => ptrace(libc::PTRACE_DETACH, w.pid),
        Pause::Freeze => {
            write_file(&format!("{FREEZER}/cgroup.freeze"), "0")?;
            wait_frozen(false)
        }
    }
}

/// A queued waiter that is stopped (SIGSTOP), trapped by ptrace or frozen
/// keeps its place: its request stays queued meanwhile, and once it runs
/// again it is served before a waiter that queued after it, for ACQUIRE
/// and LOCK_CTL ACQUIRE_BLOCKING. With the hand-off bound 0, so that the
/// release hands the lock to it whatever its age.
fn keeps_the_place(i: u32, how: Pause) -> TestResult {
    let _strict = Setting::bound(0)?;
    let a = open(0)?;
    ensure_free(&a, i)?;
    for cmd in [
        format!("acquire {i}"),
        format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE_BLOCKING),
    ] {
        ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
        let mut first = worker("first waiter", 0)?;
        first.send(&cmd)?;
        wait_waiters(&a, i, 1)?;
        let mut second = worker("second waiter", 0)?;
        second.send(&format!("acquire {i}"))?;
        wait_waiters(&a, i, 2)?;
        wait_asleep(first.pid)?;
        pause(&first, how)?;
        let q = query(&a, i)?;
        ensure!(
            q.waiters == 2,
            "{how:?} of the first waiter ({cmd}) took its request out of the queue: {q:?}"
        );
        resume(&first, how)?;
        ctx(a.release(bit(i)), "RELEASE")?;
        let q = query(&a, i)?;
        ensure!(
            q.holder_pid == first.pid as u32 && q.waiters == 1,
            "after {how:?} of the first waiter ({cmd}), RELEASE must hand the lock to it (pid {}), not to the second (pid {}): {q:?}",
            first.pid,
            second.pid
        );
        ok_reply(&mut first, &cmd)?;
        ok(&mut first, &format!("release {:x}", bit(i)))?;
        ok_reply(&mut second, "acquire")?;
        ok(&mut second, &format!("release {:x}", bit(i)))?;
        finish(first)?;
        finish(second)?;
        ensure_free(&a, i)?;
    }
    Ok(())
}

/// SIGSTOP/SIGCONT of a queued waiter keeps its place.
pub fn stop_keeps_the_place() -> TestResult {
    keeps_the_place(22, Pause::Stop)
}

/// A ptrace attach (seize and interrupt, then detach) keeps its place.
pub fn ptrace_keeps_the_place() -> TestResult {
    keeps_the_place(23, Pause::Ptrace)
}

/// The cgroup v2 freezer keeps its place.
pub fn freeze_keeps_the_place() -> TestResult {
    freezer_cgroup()?;
    let result = keeps_the_place(32, Pause::Freeze);
    // The workers have exited: the cgroup is empty again.
    let _ = fs::remove_dir(FREEZER);
    result
}

// ---- pollers and blocking waiters --------------------------------------------------------

/// UMD's pattern (LOCK_CTL ACQUIRE every millisecond, never blocking)
/// against two processes that take turns with blocking ACQUIREs, each
/// holding the lock until the other is queued asleep, so that the lock is
/// never free while both run. The poller must still get the lock: its
/// failed tries hold a place in the queue, and a release reaching it keeps
/// the lock for the poller's next try. (Before, every try failed.)
pub fn poller_gets_its_turn() -> TestResult {
    const ROUNDS: u64 = 20;
    let i = 45;
    let a = open(0)?;
    ensure_free(&a, i)?;
    // Words: 0 poller's grants while both blockers ran; 1 poller's tries;
    // 2+k blocker k's intent (about to block in ACQUIRE); 4+k its pid;
    // 6+k its "done"; 8 a blocker has taken the lock (from then on it is
    // never free while both run, so only a kept place can give it to the
    // poller). The blockers go on past their rounds until the poller has
    // tried MIN_TRIES times while they ran: a poller that starts late must
    // still have had its chances.
    const MIN_TRIES: u64 = 20;
    let shm = Shared::new(4096)?;
    let s = &shm;
    let blocker = |k: usize| {
        spawn(&format!("blocker {k}"), &[], move |link| {
            let d = open(0)?;
            s.u64(4 + k).store(u64::from(std::process::id()), SeqCst);
            link.send("ready")?;
            link.expect("go")?;
            let other = 1 - k;
            let began = Instant::now();
            let mut round = 0;
            while round < ROUNDS || s.u64(1).load(SeqCst) < MIN_TRIES {
                ensure!(
                    began.elapsed() < PATIENCE,
                    "the poller never tried {MIN_TRIES} times"
                );
                round += 1;
                s.u64(2 + k).store(1, SeqCst);
                let (r, _) = acquire(&d, i, 0, 0);
                s.u64(2 + k).store(0, SeqCst);
                expect_ok(r, "blocking ACQUIRE")?;
                s.u64(8).store(1, SeqCst);
                // Hold until the other blocks in its ACQUIRE (or is done).
                let start = Instant::now();
                loop {
                    if s.u64(6 + other).load(SeqCst) == 1 {
                        break;
                    }
                    let pid = s.u64(4 + other).load(SeqCst) as libc::pid_t;
                    if s.u64(2 + other).load(SeqCst) == 1 && proc_state(pid)? == 'S' {
                        break;
                    }
                    ensure!(start.elapsed() < PATIENCE, "the other blocker never queued");
                    std::thread::sleep(Duration::from_millis(1));
                }
                expect_ok(release(&d, bit(i)), "RELEASE")?;
            }
            s.u64(6 + k).store(1, SeqCst);
            Ok(())
        })
    };
    let mut b0 = blocker(0)?;
    let mut b1 = blocker(1)?;
    b0.expect("ready")?;
    b1.expect("ready")?;
    let mut poller = spawn("poller", &[], move |link| {
        let d = open(0)?;
        link.send("ready")?;
        while s.u64(6).load(SeqCst) == 0 || s.u64(7).load(SeqCst) == 0 {
            let counted = s.u64(8).load(SeqCst) == 1;
            if counted {
                s.u64(1).fetch_add(1, SeqCst);
            }
            if expect_ok(
                lock_ctl(&d, i as u8, abi::LOCK_CTL_ACQUIRE),
                "LOCK_CTL ACQUIRE",
            )? == 1
            {
                // Counted only while both blockers run: then the lock is
                // never free, and only a kept place can give it.
                if counted && s.u64(6).load(SeqCst) == 0 && s.u64(7).load(SeqCst) == 0 {
                    s.u64(0).fetch_add(1, SeqCst);
                }
                let v = expect_ok(
                    lock_ctl(&d, i as u8, abi::LOCK_CTL_RELEASE),
                    "LOCK_CTL RELEASE",
                )?;
                ensure_eq!(v, 1, "LOCK_CTL RELEASE value");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    })?;
    poller.expect("ready")?;
    b0.send("go")?;
    b1.send("go")?;
    b0.wait()?;
    b1.wait()?;
    poller.wait()?;
    let got = shm.u64(0).load(SeqCst);
    println!(
        "# figure poller_grants={got} (tries {}, blocking grants at least {})",
        shm.u64(1).load(SeqCst),
        2 * ROUNDS
    );
    ensure!(
        got >= 1,
        "the poller never got the lock in {} tries while two blockers took at least {} turns",
        shm.u64(1).load(SeqCst),
        2 * ROUNDS
    );
    ensure_free(&a, i)
}

// ---- the hand-off bound: bounded barging past pollers -----------------------------------

/// A bound no scenario outlives (71 minutes): every poller is under it.
pub(crate) const HUGE_BOUND_US: u32 = u32::MAX;

const DEBUGFS_CARD0: &str = "/sys/kernel/debug/tenstorrent/0";

/// A setting of card 0 in debugfs, changed for a scenario and put back
/// when dropped.
pub(crate) struct Setting {
    path: String,
    old: String,
}

impl Setting {
    fn set(name: &str, value: u32) -> Result<Setting, String> {
        let path = format!("{DEBUGFS_CARD0}/{name}");
        let old = fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
        let setting = Setting {
            path,
            old: old.trim().to_string(),
        };
        setting.change(value)?;
        Ok(setting)
    }

    /// Card 0's hand-off bound `handoff_us`.
    pub(crate) fn bound(us: u32) -> Result<Setting, String> {
        Setting::set("handoff_us", us)
    }

    /// Card 0's poll lease `poll_lease_ms`: longer than a scenario, so that
    /// a poller's place does not end between two of its steps however
    /// slowly the machine runs them.
    pub(crate) fn long_lease() -> Result<Setting, String> {
        Setting::set("poll_lease_ms", 600_000)
    }

    pub(crate) fn change(&self, value: u32) -> TestResult {
        write_file(&self.path, &value.to_string())?;
        let now = fs::read_to_string(&self.path).map_err(|e| format!("read {}: {e}", self.path))?;
        ensure_eq!(now.trim(), value.to_string(), "{} read back", self.path);
        Ok(())
    }
}

impl Drop for Setting {
    fn drop(&mut self) {
        let _ = fs::write(&self.path, &self.old);
    }
}

/// Queues, on lock `i` that file `a` takes: a sleeper, then a poller whose
/// failed LOCK_CTL try leaves a place behind it (others are queued), then,
/// if `behind`, a sleeper behind that place. Checks the order in debugfs.
pub(crate) fn sleeper_poller_sleeper(
    a: &tt_arbiter::Device,
    i: u32,
    behind: bool,
) -> Result<(Child, Child, Option<Child>), String> {
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let s0 = worker("sleeper ahead", 0)?;
    s0.send(&format!("acquire {i}"))?;
    wait_waiters(a, i, 1)?;
    let mut p = worker("poller", 0)?;
    let v = ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE))?;
    ensure_eq!(v[0], 0, "the poller's LOCK_CTL try of a held lock");
    let mut order = vec![s0.pid as u32, p.pid as u32];
    let s1 = if behind {
        let s1 = worker("sleeper behind", 0)?;
        s1.send(&format!("acquire {i}"))?;
        // QUERY's waiters leave poll places out.
        wait_waiters(a, i, 2)?;
        order.push(s1.pid as u32);
        Some(s1)
    } else {
        None
    };
    let queue = tt_arbiter::sysfs::Waiters::read(0).map_err(|e| format!("debugfs waiters: {e}"))?;
    ensure_eq!(
        queue.of(&i.to_string()).to_vec(),
        order,
        "lock {i}'s queue (sleeper, poller's place, sleeper)"
    );
    Ok((s0, p, s1))
}

/// The holder of lock `i` is `who` (pid), as QUERY shows it.
pub(crate) fn holder_is(a: &tt_arbiter::Device, i: u32, who: &Child, what: &str) -> TestResult {
    let q = query(a, i)?;
    ensure!(
        q.held && q.holder_pid == who.pid as u32,
        "{what}: the lock must be held by pid {}: {q:?}",
        who.pid
    );
    Ok(())
}

/// Under the bound (set huge), a poller's place reserves nothing: the
/// release that reaches it wakes the sleeper behind it, which takes the
/// lock, and when nobody sleeps a released lock stays free, so that a
/// caller that runs takes it ahead of the queued poller (LOCK_CTL try and
/// blocking ACQUIRE alike); the poller's next try then gets it. (Seen
/// failing with the driver's `passable` always false, strict hand-off: the
/// lock went to the poller's place, and the sleeper behind it still
/// waited.)
pub fn barging_under_the_bound() -> TestResult {
    let i = 43;
    let _lease = Setting::long_lease()?;
    let _bound = Setting::bound(HUGE_BOUND_US)?;
    let a = open(0)?;
    let c = open(0)?;
    ensure_free(&a, i)?;
    let (mut s0, mut p, s1) = sleeper_poller_sleeper(&a, i, true)?;
    let mut s1 = s1.ok_or("no sleeper behind")?;
    ctx(a.release(bit(i)), "RELEASE")?;
    ok_reply(&mut s0, "acquire")?;
    holder_is(&a, i, &s0, "after the first release")?;
    ok(&mut s0, &format!("release {:x}", bit(i)))?;
    ok_reply(&mut s1, "acquire")?;
    holder_is(
        &a,
        i,
        &s1,
        "the release reached the poller's place under the bound: the sleeper behind it",
    )?;
    ok(&mut s1, &format!("release {:x}", bit(i)))?;
    let q = query(&a, i)?;
    ensure!(!q.held, "nobody sleeps for it: it must be free: {q:?}");
    let queue = tt_arbiter::sysfs::Waiters::read(0).map_err(|e| format!("debugfs waiters: {e}"))?;
    ensure_eq!(
        queue.of(&i.to_string()).to_vec(),
        vec![p.pid as u32],
        "lock {i}'s queue: the poller's place"
    );
    // A caller that runs takes it ahead of the queued poller, both ways.
    ensure_eq!(
        expect_ok(
            lock_ctl(&c, i as u8, abi::LOCK_CTL_ACQUIRE),
            "LOCK_CTL ACQUIRE"
        )?,
        1,
        "LOCK_CTL try of the free lock with a poller queued under the bound"
    );
    ensure_eq!(
        expect_ok(
            lock_ctl(&c, i as u8, abi::LOCK_CTL_RELEASE),
            "LOCK_CTL RELEASE"
        )?,
        1,
        "LOCK_CTL RELEASE"
    );
    let (r, out) = acquire(&c, i, 0, 0);
    expect_ok(r, "blocking ACQUIRE of the free lock with a poller queued")?;
    ensure_eq!(out.waited_ns, 0, "waited_ns of a barging ACQUIRE");
    ctx(c.release(bit(i)), "RELEASE")?;
    // The poller's next try gets it.
    let v = ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE))?;
    ensure_eq!(v[0], 1, "the poller's next try of the free lock");
    ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_RELEASE))?;
    for w in [s0, p, s1] {
        finish(w)?;
    }
    ensure_free(&a, i)
}

/// Past the bound (1 µs, and the clock well past it), a poller is
/// served in arrival order whatever runs: with two sleepers ahead of its
/// place, one behind, and two processes polling the lock all along, the
/// releases go to the two sleepers, then the lock is kept for the poller
/// (its next try gets it), then to the sleeper behind; the two polling
/// processes get nothing until then. This is the shape of the worst-case
/// wait in src/arbiter.rs (`B + (n+1)(H+D) + p`): past `B`, only the `n`
/// requests ahead pass it. (Seen failing with the driver's `passable`
/// ignoring the age: the lock went to the sleeper behind the poller.)
pub fn handoff_after_bound() -> TestResult {
    let i = 44;
    let _lease = Setting::long_lease()?;
    let _bound = Setting::bound(1)?;
    let a = open(0)?;
    ensure_free(&a, i)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let mut ahead = Vec::new();
    for n in 0..2 {
        let s = worker("sleeper ahead", 0)?;
        s.send(&format!("acquire {i}"))?;
        wait_waiters(&a, i, n + 1)?;
        ahead.push(s);
    }
    let mut p = worker("poller", 0)?;
    let v = ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE))?;
    ensure_eq!(v[0], 0, "the poller's LOCK_CTL try of a held lock");
    let placed = now_ns();
    let mut behind = worker("sleeper behind", 0)?;
    behind.send(&format!("acquire {i}"))?;
    wait_waiters(&a, i, 3)?;
    // The condition is the clock: the place is past the 1 µs bound.
    while now_ns() < placed + 2_000_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Words: 0 stop; 1 grants the polling processes got.
    let shm = Shared::new(4096)?;
    let s = &shm;
    let mut pollers = Vec::new();
    for k in 0..2 {
        pollers.push(spawn(&format!("polling process {k}"), &[], move |link| {
            let d = open(0)?;
            link.send("ready")?;
            while s.u64(0).load(SeqCst) == 0 {
                if expect_ok(
                    lock_ctl(&d, i as u8, abi::LOCK_CTL_ACQUIRE),
                    "LOCK_CTL ACQUIRE",
                )? == 1
                {
                    s.u64(1).fetch_add(1, SeqCst);
                    expect_ok(
                        lock_ctl(&d, i as u8, abi::LOCK_CTL_RELEASE),
                        "LOCK_CTL RELEASE",
                    )?;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })?);
    }
    for w in pollers.iter_mut() {
        w.expect("ready")?;
    }
    ctx(a.release(bit(i)), "RELEASE")?;
    for (n, sleeper) in ahead.iter_mut().enumerate() {
        holder_is(&a, i, sleeper, &format!("sleeper {n} ahead of the poller"))?;
        ok_reply(sleeper, "acquire")?;
        ok(sleeper, &format!("release {:x}", bit(i)))?;
    }
    holder_is(
        &a,
        i,
        &p,
        "the release reached the place past the bound: kept for the poller",
    )?;
    let v = ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE))?;
    ensure_eq!(v[0], 1, "the poller's next try");
    ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_RELEASE))?;
    holder_is(&a, i, &behind, "after the poller: the sleeper behind it")?;
    ensure_eq!(
        shm.u64(1).load(SeqCst),
        0,
        "grants of the polling processes, which came after the poller"
    );
    ok_reply(&mut behind, "acquire")?;
    ok(&mut behind, &format!("release {:x}", bit(i)))?;
    shm.u64(0).store(1, SeqCst);
    crate::worker::wait_all(pollers)?;
    for w in ahead {
        finish(w)?;
    }
    finish(p)?;
    finish(behind)?;
    ensure_free(&a, i)
}

/// `handoff_us` 0 in debugfs is strict FIFO: the release that reaches a
/// fresh poller's place keeps the lock for it, so a caller that runs is
/// refused and the sleeper behind waits. And a lower bound takes effect at
/// once: a lock left free for a poller under the old bound is kept for it
/// when the bound becomes 0. (Seen failing with 0 taken as "no bound":
/// the lock went to the sleeper behind the poller; and with the new bound
/// applied only at the next request: the lock stayed free.)
pub fn strict_handoff_setting() -> TestResult {
    let i = 46;
    let _lease = Setting::long_lease()?;
    let bound = Setting::bound(0)?;
    let a = open(0)?;
    let c = open(0)?;
    ensure_free(&a, i)?;
    let (mut s0, mut p, s1) = sleeper_poller_sleeper(&a, i, true)?;
    let mut s1 = s1.ok_or("no sleeper behind")?;
    ctx(a.release(bit(i)), "RELEASE")?;
    ok_reply(&mut s0, "acquire")?;
    ok(&mut s0, &format!("release {:x}", bit(i)))?;
    holder_is(&a, i, &p, "strict: the release reached the poller's place")?;
    ensure_eq!(
        expect_ok(
            lock_ctl(&c, i as u8, abi::LOCK_CTL_ACQUIRE),
            "LOCK_CTL ACQUIRE"
        )?,
        0,
        "LOCK_CTL try of a lock kept for a poller"
    );
    ensure_eq!(query(&a, i)?.waiters, 1, "the sleeper behind still waits");
    let v = ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE))?;
    ensure_eq!(v[0], 1, "the poller's next try");
    ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_RELEASE))?;
    holder_is(&a, i, &s1, "after the poller")?;
    ok_reply(&mut s1, "acquire")?;
    ok(&mut s1, &format!("release {:x}", bit(i)))?;
    for w in [s0, p, s1] {
        finish(w)?;
    }
    // c's failed try left a place: its next command gives it up.
    expect_errno(
        release(&c, bit(i)),
        libc::EPERM,
        "RELEASE of a lock not held",
    )?;
    ensure_free(&a, i)?;

    // Left free under a huge bound, kept for the poller once it is 0.
    bound.change(HUGE_BOUND_US)?;
    let (mut s0, mut p, _) = sleeper_poller_sleeper(&a, i, false)?;
    ctx(a.release(bit(i)), "RELEASE")?;
    ok_reply(&mut s0, "acquire")?;
    ok(&mut s0, &format!("release {:x}", bit(i)))?;
    let q = query(&a, i)?;
    ensure!(!q.held, "under the bound the lock is left free: {q:?}");
    bound.change(0)?;
    holder_is(&a, i, &p, "right after handoff_us became 0")?;
    ensure_eq!(
        expect_ok(
            lock_ctl(&c, i as u8, abi::LOCK_CTL_ACQUIRE),
            "LOCK_CTL ACQUIRE"
        )?,
        0,
        "LOCK_CTL try of a lock kept for a poller"
    );
    let v = ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE))?;
    ensure_eq!(v[0], 1, "the poller's next try");
    ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_RELEASE))?;
    finish(s0)?;
    finish(p)?;
    expect_errno(
        release(&c, bit(i)),
        libc::EPERM,
        "RELEASE of a lock not held",
    )?;
    ensure_free(&a, i)
}

/// Under the bound (set huge), a sleeping waiter reserves nothing either:
/// a release leaves the lock free and wakes the waiter, and a caller that
/// runs first takes it. The waiter is stopped (SIGSTOP) across the release,
/// so that the caller runs first for certain; when it continues it finds
/// the lock taken and waits on in its place, and the next release is its.
/// (Seen failing on the driver before sleepers were passed: the release
/// handed the lock to the stopped waiter and the caller's try was EBUSY.)
pub fn sleepers_passed_under_the_bound() -> TestResult {
    let i = 47;
    let _bound = Setting::bound(HUGE_BOUND_US)?;
    let a = open(0)?;
    ensure_free(&a, i)?;
    let spurious = query(&a, i)?.raw.spurious_wakeups;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let mut s = worker("sleeper", 0)?;
    s.send(&format!("acquire {i}"))?;
    wait_waiters(&a, i, 1)?;
    wait_asleep(s.pid)?;
    s.kill(libc::SIGSTOP)?;
    s.wait_stopped()?;
    ctx(a.release(bit(i)), "RELEASE")?;
    let q = query(&a, i)?;
    ensure!(
        !q.held && q.waiters == 1,
        "under the bound the release must leave the lock free, the waiter queued: {q:?}"
    );
    ctx(
        a.acquire(i, Wait::Try),
        "a caller's try past the young waiter",
    )?;
    s.kill(libc::SIGCONT)?;
    s.wait_continued()?;
    // Its restarted call finds the lock taken: it sleeps on, queued.
    wait_asleep(s.pid)?;
    let q = query(&a, i)?;
    ensure!(
        q.held_by_caller && q.waiters == 1,
        "the continued waiter must wait on in its place: {q:?}"
    );
    ctx(a.release(bit(i)), "RELEASE")?;
    ok_reply(&mut s, "acquire")?;
    holder_is(&a, i, &s, "after the second release")?;
    ok(&mut s, &format!("release {:x}", bit(i)))?;
    finish(s)?;
    ensure_eq!(
        query(&a, i)?.raw.spurious_wakeups,
        spurious,
        "spurious_wakeups (a waiter woken to try counts only if it finds nothing to try)"
    );
    ensure_free(&a, i)
}

/// Past the bound (1 µs, and the clock well past it), a sleeping waiter
/// is handed the lock by the release, as with strict FIFO: right after
/// RELEASE returns QUERY shows it as the holder and a caller's try is
/// EBUSY. The waiter is stopped (SIGSTOP) across the release, so that a
/// lock left free would certainly still be free for the caller's try; it
/// returns with the lock once continued. (Seen failing with `passable`
/// ignoring the age: right after RELEASE the lock was free, the stopped
/// waiter still queued. Without the stop the mutant passed: the woken
/// waiter ran first and took the lock.)
pub fn sleeper_handoff_after_bound() -> TestResult {
    let i = 59;
    let _bound = Setting::bound(1)?;
    let a = open(0)?;
    let c = open(0)?;
    ensure_free(&a, i)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let mut s = worker("sleeper", 0)?;
    s.send(&format!("acquire {i}"))?;
    wait_waiters(&a, i, 1)?;
    wait_asleep(s.pid)?;
    let queued = now_ns();
    // The condition is the clock: the waiter is past the 1 µs bound.
    while now_ns() < queued + 2_000_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    s.kill(libc::SIGSTOP)?;
    s.wait_stopped()?;
    ctx(a.release(bit(i)), "RELEASE")?;
    holder_is(&a, i, &s, "right after RELEASE, past the bound")?;
    ensure_eq!(
        expect_ok(
            lock_ctl(&c, i as u8, abi::LOCK_CTL_ACQUIRE),
            "LOCK_CTL ACQUIRE"
        )?,
        0,
        "a caller's try of the lock handed to the waiter"
    );
    s.kill(libc::SIGCONT)?;
    s.wait_continued()?;
    ok_reply(&mut s, "acquire")?;
    ok(&mut s, &format!("release {:x}", bit(i)))?;
    finish(s)?;
    // c's failed try left no place (nobody else queued) or one that its
    // next command gives up.
    let _ = release(&c, bit(i));
    ensure_free(&a, i)
}

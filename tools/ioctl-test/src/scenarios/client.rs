//! The client library's RAII guards and typed errors against the driver:
//! what Luwen (or any Rust program) sees through `tt_arbiter::Device`.
//! (DeviceGone is covered by the lifecycle scenarios.)

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use tt_arbiter::{Device, Error};

use crate::util::*;
use crate::worker::{finish, ok, worker};

fn held_by_caller(dev: &Device, i: u32) -> Result<bool, String> {
    Ok(query(dev, i)?.held_by_caller)
}

/// lock, try_lock, lock_timeout and lock_many: the guard holds the lock
/// until it drops (or `unlock()`), and the lock is free again afterwards.
pub fn guard_drop_releases() -> TestResult {
    let (i, j) = (48, 49);
    let dev = open(0)?;
    ensure_free(&dev, i)?;
    ensure_free(&dev, j)?;
    {
        let g = ctx(dev.lock(i), "lock")?;
        ensure!(held_by_caller(&dev, i)?, "not held inside the lock() guard");
        ensure!(!g.owner_died(), "owner_died on a fresh lock");
        ensure_eq!(g.indices(), vec![i], "guard indices");
    }
    ensure_free(&dev, i)?;
    {
        let _g = ctx(dev.try_lock(i), "try_lock")?;
        ensure!(
            held_by_caller(&dev, i)?,
            "not held inside the try_lock() guard"
        );
    }
    ensure_free(&dev, i)?;
    {
        let _g = ctx(dev.lock_timeout(i, Duration::from_secs(5)), "lock_timeout")?;
        ensure!(
            held_by_caller(&dev, i)?,
            "not held inside the lock_timeout() guard"
        );
    }
    ensure_free(&dev, i)?;
    {
        let g = ctx(dev.lock_many(&[j, i]), "lock_many")?;
        ensure_eq!(g.mask(), bit(i) | bit(j), "guard mask");
        ensure!(
            held_by_caller(&dev, i)? && held_by_caller(&dev, j)?,
            "not both held inside the lock_many() guard"
        );
    }
    ensure_free(&dev, i)?;
    ensure_free(&dev, j)?;
    // unlock() releases at once and reports errors.
    let g = ctx(dev.lock(i), "lock")?;
    ctx(g.unlock(), "unlock")?;
    ensure_free(&dev, i)?;
    // Not re-entrant: a second lock of the same file is Deadlock.
    let g = ctx(dev.lock(i), "lock")?;
    match dev.lock(i) {
        Err(Error::Deadlock) => {}
        other => return Err(format!("lock of a lock held by the same file: {other:?}")),
    }
    drop(g);
    // Bad arguments are typed too.
    ensure!(
        matches!(dev.lock(64), Err(Error::Invalid)),
        "lock(64) not Invalid"
    );
    ensure!(
        matches!(dev.lock_many(&[]), Err(Error::Invalid)),
        "lock_many(&[]) not Invalid"
    );
    ensure_free(&dev, i)
}

/// A holder killed with SIGKILL: the next guard says owner_died (with the
/// mask), the one after does not.
pub fn owner_died_on_guard() -> TestResult {
    let (i, j) = (50, 51);
    let dev = open(0)?;
    ensure_free(&dev, i)?;
    ensure_free(&dev, j)?;
    let mut h = worker("holder", 0)?;
    ok(&mut h, &format!("acquire {i}"))?;
    h.kill_and_reap()?;
    {
        let g = ctx(dev.lock(i), "lock after the holder was killed")?;
        ensure!(g.owner_died(), "owner_died not set on the guard");
        ensure_eq!(g.owner_died_mask(), bit(i), "owner_died_mask");
    }
    {
        let g = ctx(dev.lock(i), "second lock")?;
        ensure!(
            !g.owner_died(),
            "owner_died set again after a clean release"
        );
    }
    // Through lock_many: only the lock whose holder died is marked.
    let mut h = worker("holder", 0)?;
    ok(&mut h, &format!("acquire {j}"))?;
    h.kill_and_reap()?;
    {
        let g = ctx(
            dev.lock_many(&[i, j]),
            "lock_many after the holder was killed",
        )?;
        ensure!(g.owner_died(), "owner_died not set on the lock_many guard");
        ensure_eq!(g.owner_died_mask(), bit(j), "owner_died_mask of lock_many");
    }
    ensure_free(&dev, i)?;
    ensure_free(&dev, j)
}

/// try_lock on a held lock: Busy with the holder's pid; lock_timeout:
/// Timeout with the holder's pid, not before the timeout.
pub fn busy_and_timeout() -> TestResult {
    let i = 52;
    let dev = open(0)?;
    ensure_free(&dev, i)?;
    let mut h = worker("holder", 0)?;
    ok(&mut h, &format!("acquire {i}"))?;
    let pid = h.pid as u32;
    match dev.try_lock(i) {
        Err(Error::Busy { holder_pid }) => ensure_eq!(holder_pid, pid, "Busy holder_pid"),
        other => return Err(format!("try_lock of a held lock: {other:?}")),
    }
    let timeout = Duration::from_millis(50);
    let start = Instant::now();
    match dev.lock_timeout(i, timeout) {
        Err(Error::Timeout { holder_pid }) => ensure_eq!(holder_pid, pid, "Timeout holder_pid"),
        other => return Err(format!("lock_timeout of a held lock: {other:?}")),
    }
    let took = start.elapsed();
    ensure!(
        took >= timeout,
        "Timeout after {took:?}, before {timeout:?}"
    );
    let e = dev.try_lock(i).err();
    ensure_eq!(
        e.as_ref().and_then(Error::holder_pid),
        Some(pid),
        "Error::holder_pid()"
    );
    ensure!(
        e.is_some_and(|e| e.to_string().contains(&pid.to_string())),
        "the Busy message does not name the holder"
    );
    // Released by the holder: try_lock succeeds.
    ok(&mut h, &format!("release {:x}", bit(i)))?;
    drop(ctx(dev.try_lock(i), "try_lock after the release")?);
    finish(h)?;
    ensure_free(&dev, i)
}

/// lock_many is all or nothing: with one lock busy it takes none (Busy,
/// Timeout), a blocked lock_many holds none while waiting, and gets all of
/// them once the busy one is released.
pub fn lock_many_all_or_nothing() -> TestResult {
    let set = [53, 54, 55];
    let dev = open(0)?;
    for i in set {
        ensure_free(&dev, i)?;
    }
    let mut h = worker("holder", 0)?;
    ok(&mut h, "acquire 54")?;
    let pid = h.pid as u32;
    match dev.try_lock_many(&set) {
        Err(Error::Busy { holder_pid }) => ensure_eq!(holder_pid, pid, "Busy holder_pid"),
        other => return Err(format!("try_lock_many with one busy lock: {other:?}")),
    }
    match dev.lock_many_timeout(&set, Duration::from_millis(20)) {
        Err(Error::Timeout { holder_pid }) => ensure_eq!(holder_pid, pid, "Timeout holder_pid"),
        other => return Err(format!("lock_many_timeout with one busy lock: {other:?}")),
    }
    for i in [53, 55] {
        ensure_free(&dev, i)?;
    }
    // A blocked lock_many in another process holds nothing meanwhile.
    let mut w = spawn("lock_many waiter", &[], move |link| {
        let d = open(0)?;
        let g = ctx(d.lock_many(&set), "blocking lock_many")?;
        link.send(&format!("got {:x} {}", g.mask(), g.owner_died()))?;
        link.expect("release")?;
        drop(g);
        link.send("released")
    })?;
    wait_waiters(&dev, 54, 1)?;
    for i in [53, 55] {
        let q = query(&dev, i)?;
        ensure!(!q.held, "lock {i} held while lock_many waits for 54: {q:?}");
    }
    ok(&mut h, &format!("release {:x}", bit(54)))?;
    let mask = bit(53) | bit(54) | bit(55);
    w.expect(&format!("got {mask:x} false"))?;
    for i in set {
        ensure_eq!(
            query(&dev, i)?.holder_pid,
            w.pid as u32,
            "holder of lock {i}"
        );
    }
    w.send("release")?;
    w.expect("released")?;
    w.wait()?;
    finish(h)?;
    for i in set {
        ensure_free(&dev, i)?;
    }
    Ok(())
}

static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(_: libc::c_int) {
    SIGNALLED.store(1, Ordering::SeqCst);
}

/// A signal handler during a blocking lock(): Error::Interrupted, and the
/// waiter left the queue.
pub fn interrupted() -> TestResult {
    let i = 56;
    let dev = open(0)?;
    ensure_free(&dev, i)?;
    let g = ctx(dev.lock(i), "lock")?;
    let mut w = spawn("waiter", &[], move |link| {
        install_handler(libc::SIGUSR1, note_signal, true)?;
        let d = open(0)?;
        link.send("ready")?;
        let r = d.lock(i);
        let signalled = SIGNALLED.load(Ordering::SeqCst) == 1;
        link.send(&format!("{:?} {signalled}", r.map(|g| g.mask())))
    })?;
    w.expect("ready")?;
    wait_waiters(&dev, i, 1)?;
    w.kill(libc::SIGUSR1)?;
    // SA_RESTART or not, the new command returns EINTR once a handler ran.
    w.expect("Err(Interrupted) true")?;
    w.wait()?;
    wait_waiters(&dev, i, 0)?;
    ensure!(held_by_caller(&dev, i)?, "lock no longer ours");
    drop(g);
    ensure_free(&dev, i)
}

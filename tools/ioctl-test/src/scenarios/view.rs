//! "Who holds what": the sysfs lock lines, the procfs pids file, the
//! debugfs wait queue and the `tt-locks` tool built on them.
//!
//! `tt-locks` is run from `$TT_LOCKS`, `/tmp/tt-locks` or next to this
//! binary; without it the parts that run it are skipped (said in a TAP
//! comment).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tt_arbiter::fdinfo::FdInfo;
use tt_arbiter::sysfs::{self, LockLine, Waiters};
use tt_arbiter::{abi, Wait};

use crate::util::*;
use crate::worker::{finish, ok, ok_reply, worker};

/// Uid of `nobody`, for the unprivileged runs.
const NOBODY: u32 = 65534;

/// Lock `index` of card `card` as sysfs shows it.
fn sys(card: u32, index: u32) -> Result<LockLine, String> {
    sysfs::read_lock(card, index).map_err(|e| format!("sysfs lock {index:02} of card {card}: {e}"))
}

fn debugfs(card: u32) -> Result<Waiters, String> {
    Waiters::read(card).map_err(|e| format!("debugfs waiters of card {card}: {e}"))
}

fn pids(card: u32) -> Result<Vec<u32>, String> {
    sysfs::read_pids(card).map_err(|e| format!("/proc/driver/tenstorrent/{card}/pids: {e}"))
}

/// The tt-locks binary, if present.
fn tt_locks() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("TT_LOCKS")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push("/tmp/tt-locks".into());
    if let Ok(exe) = std::env::current_exe() {
        candidates.push(exe.with_file_name("tt-locks"));
    }
    candidates.into_iter().find(|p| p.is_file())
}

fn skip_cli(what: &str) {
    println!("# SKIP part: tt-locks not found ($TT_LOCKS, /tmp/tt-locks): {what} not run");
    flush();
}

/// What a tt-locks run gave.
struct Run {
    code: i32,
    out: String,
    err: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit status {}\n--- stdout:\n{}--- stderr:\n{}---",
            self.code, self.out, self.err
        )
    }
}

fn command(bin: &PathBuf, args: &[&str], uid: Option<u32>) -> Command {
    let mut c = Command::new(bin);
    c.args(args).stdin(Stdio::null());
    if let Some(uid) = uid {
        c.uid(uid).gid(uid);
    }
    c
}

/// Runs tt-locks to completion.
fn cli(bin: &PathBuf, args: &[&str], uid: Option<u32>) -> Result<Run, String> {
    let o = command(bin, args, uid)
        .output()
        .map_err(|e| format!("running tt-locks {args:?}: {e}"))?;
    Ok(Run {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
    })
}

/// Runs tt-locks and requires exit status `code`.
fn cli_expect(bin: &PathBuf, args: &[&str], uid: Option<u32>, code: i32) -> Result<Run, String> {
    let r = cli(bin, args, uid)?;
    ensure!(
        r.code == code,
        "tt-locks {} (uid {uid:?}): expected exit status {code}, got {r}",
        args.join(" ")
    );
    Ok(r)
}

/// The row of lock `name` in a status table, split on whitespace.
fn status_row(out: &str, name: &str) -> Option<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|w| w.len() >= 7 && w[1] == name && w[0].parse::<u32>().is_ok())
}

/// The summary line of card `card` in a status table.
fn summary_line(out: &str, card: u32) -> Option<&str> {
    let prefix = format!("/dev/tenstorrent/{card}");
    out.lines()
        .find(|l| l.starts_with(&prefix) && l[prefix.len()..].starts_with([' ', ':']))
}

fn ensure_row(r: &Run, name: &str, pid: &str, comm: &str, waiters: u32) -> TestResult {
    let row = status_row(&r.out, name).ok_or_else(|| format!("no row for {name} in {r}"))?;
    ensure!(
        row[2] == pid && row[3] == comm && row[5] == waiters.to_string(),
        "row of {name}: expected holder {pid} ({comm}) with {waiters} waiters, got {row:?} in {r}"
    );
    Ok(())
}

/// A held lock shows its holder's pid, comm and name, and a growing
/// held_ns, in sysfs and in `tt-locks status` (as root and as nobody);
/// after the holder is SIGKILLed it shows free, owner_died incremented and
/// owner_died_pending set.
pub fn holder_then_owner_died() -> TestResult {
    let i = abi::LOCK_ARC_MSG;
    let a = open(0)?;
    ensure_free(&a, i)?;
    let s0 = sys(0, i)?;
    ensure!(
        s0.name == "ARC_MSG" && !s0.held && s0.pid == 0 && s0.comm.is_empty() && s0.held_ns == 0,
        "free ARC_MSG in sysfs: {s0:?}"
    );
    let mut h = worker("holder", 0)?;
    ok(&mut h, "comm tt-holder")?;
    ok(&mut h, &format!("acquire {i}"))?;
    let s1 = sys(0, i)?;
    ensure!(
        s1.name == "ARC_MSG"
            && s1.held
            && s1.pid == h.pid as u32
            && s1.comm == "tt-holder"
            && s1.waiters == 0
            && !s1.owner_died_pending,
        "ARC_MSG held by the worker (pid {}, comm tt-holder): sysfs says {s1:?}",
        h.pid
    );
    ensure_eq!(s1.acquisitions, s0.acquisitions + 1, "acquisitions");
    let s2 = sys(0, i)?;
    ensure!(
        s2.held_ns > s1.held_ns,
        "held_ns does not grow: {} then {}",
        s1.held_ns,
        s2.held_ns
    );
    // The other card is not affected.
    ensure!(!sys(1, i)?.held, "ARC_MSG of card 1 shows held");

    match tt_locks() {
        Some(bin) => {
            for uid in [None, Some(NOBODY)] {
                let r = cli_expect(&bin, &["status"], uid, 0)?;
                ensure_row(&r, "ARC_MSG", &h.pid.to_string(), "tt-holder", 0)?;
                let s0 = summary_line(&r.out, 0).unwrap_or_default();
                ensure!(s0.contains("1 held"), "summary of card 0: {r}");
                let s1 = summary_line(&r.out, 1).unwrap_or_default();
                ensure!(s1.contains("no locks held"), "summary of card 1: {r}");
            }
            let r = cli_expect(&bin, &["status", "1"], None, 0)?;
            ensure!(
                summary_line(&r.out, 0).is_none() && status_row(&r.out, "ARC_MSG").is_none(),
                "status 1 shows card 0: {r}"
            );
        }
        None => skip_cli("tt-locks status"),
    }

    h.kill_and_reap()?;
    let s3 = sys(0, i)?;
    ensure!(
        !s3.held && s3.pid == 0 && s3.comm.is_empty() && s3.held_ns == 0 && s3.waiters == 0,
        "after SIGKILL of the holder ARC_MSG must be free: {s3:?}"
    );
    ensure_eq!(s3.owner_died, s1.owner_died + 1, "owner_died after SIGKILL");
    ensure!(s3.owner_died_pending, "owner_died_pending not set: {s3:?}");
    if let Some(bin) = tt_locks() {
        let r = cli_expect(&bin, &["status", "0"], Some(NOBODY), 0)?;
        let line = summary_line(&r.out, 0).unwrap_or_default();
        // Earlier scenarios may have left other marks: ARC_MSG among them.
        let died: Vec<&str> = line
            .split_once("holder died holding ")
            .and_then(|(_, rest)| rest.split_once(' '))
            .map(|(names, _)| names.split(',').collect())
            .unwrap_or_default();
        ensure!(
            line.contains("no locks held") && died.contains(&"ARC_MSG"),
            "status after the holder died: {r}"
        );
    }
    // Consume the mark, so the lock is left as found.
    let g = ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    ensure_eq!(
        g.owner_died_mask,
        bit(i),
        "owner-died mask of the next acquirer"
    );
    ctx(a.release(bit(i)), "RELEASE")?;
    let s4 = sys(0, i)?;
    ensure!(
        !s4.owner_died_pending && !s4.held,
        "after re-acquisition: {s4:?}"
    );
    Ok(())
}

/// Several queued waiters, one at a time: sysfs counts them, debugfs lists
/// them in grant order (a set waiter under each of its locks), tt-locks
/// shows the counts; after a hand-off the next one holds it.
pub fn waiters_count_and_order() -> TestResult {
    let (i, j) = (abi::LOCK_REMOTE_ARC_MSG, abi::LOCK_NON_MMIO);
    let a = open(0)?;
    ensure_free(&a, i)?;
    ensure_free(&a, j)?;
    let mut h = worker("holder", 0)?;
    ok(&mut h, &format!("acquire {i}"))?;
    let mut ws = Vec::new();
    for k in 0..4u32 {
        let w = worker(&format!("waiter {k}"), 0)?;
        if k == 3 {
            w.send(&format!("set {:x}", bit(i) | bit(j)))?;
        } else {
            w.send(&format!("acquire {i}"))?;
        }
        wait_waiters(&a, i, k + 1)?;
        ws.push(w);
    }
    let wp: Vec<u32> = ws.iter().map(|w| w.pid as u32).collect();
    let si = sys(0, i)?;
    ensure!(
        si.held && si.pid == h.pid as u32 && si.waiters == 4,
        "REMOTE_ARC_MSG with holder {} and 4 waiters: sysfs says {si:?}",
        h.pid
    );
    let sj = sys(0, j)?;
    ensure!(
        !sj.held && sj.pid == 0 && sj.waiters == 1,
        "NON_MMIO wanted by the set waiter only: sysfs says {sj:?}"
    );
    let d = debugfs(0)?;
    ensure_eq!(
        d.of("REMOTE_ARC_MSG").to_vec(),
        wp.clone(),
        "debugfs REMOTE_ARC_MSG waiters"
    );
    ensure_eq!(
        d.of("NON_MMIO").to_vec(),
        vec![wp[3]],
        "debugfs NON_MMIO waiters"
    );
    let queue: Vec<(u32, u32, Vec<String>)> = d
        .queue
        .iter()
        .map(|q| (q.position, q.pid, q.locks.clone()))
        .collect();
    let one = || vec!["REMOTE_ARC_MSG".to_string()];
    ensure_eq!(
        queue,
        vec![
            (0, wp[0], one()),
            (1, wp[1], one()),
            (2, wp[2], one()),
            (
                3,
                wp[3],
                vec!["REMOTE_ARC_MSG".to_string(), "NON_MMIO".to_string()]
            ),
        ],
        "debugfs queue"
    );
    match tt_locks() {
        Some(bin) => {
            let r = cli_expect(&bin, &["status", "/dev/tenstorrent/0"], None, 0)?;
            let comm = si.comm.clone();
            ensure_row(&r, "REMOTE_ARC_MSG", &h.pid.to_string(), &comm, 4)?;
            ensure_row(&r, "NON_MMIO", "-", "-", 1)?;
        }
        None => skip_cli("tt-locks status"),
    }

    // Hand-off: the first waiter holds it, three remain in order.
    ok(&mut h, &format!("release {:x}", bit(i)))?;
    ok_reply(&mut ws[0], "acquire")?;
    let si = sys(0, i)?;
    ensure!(
        si.held && si.pid == wp[0] && si.waiters == 3,
        "after the hand-off to waiter 0 (pid {}): sysfs says {si:?}",
        wp[0]
    );
    ensure_eq!(
        debugfs(0)?.of("REMOTE_ARC_MSG").to_vec(),
        wp[1..].to_vec(),
        "debugfs waiters after one grant"
    );
    Ok(())
}

/// A reader in another pid namespace sees the holders and pollers of its
/// namespace with their pids there, and 0 for the others; from outside,
/// the holder and the poller inside show their real pids. (Pollers: each
/// side polls the lock the other holds; seen failing on a mutant whose
/// `polled_by` printed the poller's pid in the initial namespace: the
/// poller inside showed pid 88 there, not 1.)
pub fn pid_namespace_translation() -> TestResult {
    let (outer, inner) = (25u32, 26u32);
    // Pollers stay shown for as long as the scenario takes.
    let _lease = super::locks::Setting::long_lease()?;
    let a = open(0)?;
    ensure_free(&a, outer)?;
    ensure_free(&a, inner)?;
    ensure_eq!(
        pids(0)?,
        vec![getpid()],
        "pids of card 0 with one open file"
    );
    let mut h = worker("outside holder", 0)?;
    ok(&mut h, "comm outsider")?;
    ok(&mut h, &format!("acquire {outer}"))?;
    let bin = tt_locks();
    let mut c = spawn("namespace parent", &[], move |link| {
        // SAFETY: plain syscall; only our future children are affected.
        if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
            return Err(format!(
                "unshare(CLONE_NEWPID): {}",
                std::io::Error::last_os_error()
            ));
        }
        flush();
        // SAFETY: fork; the grandchild leaves with _exit.
        let pid = unsafe { libc::fork() };
        ensure!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                inside_namespace(link, outer, inner, bin.as_ref())
            }))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(&p))));
            let code = match r {
                Ok(()) => 0,
                Err(msg) => {
                    let _ = link.send(&format!("fail {}", msg.replace('\n', " | ")));
                    1
                }
            };
            flush();
            // SAFETY: leaving the forked grandchild.
            unsafe { libc::_exit(code) };
        }
        link.send(&format!("grandchild {pid}"))?;
        let status = waitpid(pid, 0)?;
        ensure!(
            status == 0,
            "grandchild (pid 1 of the namespace) {}",
            describe_status(status)
        );
        Ok(())
    })?;
    let line = c.recv()?;
    let g: u32 = line
        .strip_prefix("grandchild ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("namespace parent said {line:?}"))?;
    c.send("go")?;
    let from_inside = |line: String, expected: &str| match line.strip_prefix("fail ") {
        Some(msg) => Err(format!(
            "inside the pid namespace: {}",
            msg.replace(" | ", "\n")
        )),
        None => {
            ensure_eq!(line, expected, "message from the namespace");
            Ok(())
        }
    };
    from_inside(c.recv()?, "polling")?;
    // The outsider polls the lock the insider holds.
    let v = ok(&mut h, &format!("ctl {inner} {}", abi::LOCK_CTL_ACQUIRE))?;
    ensure_eq!(v[0], 0, "the outsider's try of lock {inner}");
    c.send("outsider polls")?;
    from_inside(c.recv()?, "checked")?;
    // From outside: real pids.
    let s = sys(0, inner)?;
    ensure!(
        s.held && s.pid == g && s.comm == "insider",
        "lock {inner} held by the grandchild (pid {g} here): sysfs says {s:?}"
    );
    let s = sys(0, outer)?;
    ensure!(s.pid == h.pid as u32, "lock {outer}: {s:?}");
    ensure_eq!(
        pollers_of(outer)?,
        vec![(g, "insider".to_string())],
        "lock {outer}'s poller (the grandchild) read outside"
    );
    ensure_eq!(
        pollers_of(inner)?,
        vec![(h.pid as u32, "outsider".to_string())],
        "lock {inner}'s poller (the outsider) read outside"
    );
    ensure_eq!(
        pids(0)?,
        vec![getpid(), h.pid as u32, g],
        "pids of card 0 from outside"
    );
    c.send("done")?;
    c.wait()?;
    // The outsider's place in line for the lock the insider held goes with
    // its file.
    finish(h)?;
    ensure_free(&a, outer)?;
    ensure_free(&a, inner)
}

/// Who polls lock `i` of card 0, as its sysfs line says: (pid, comm).
fn pollers_of(i: u32) -> Result<Vec<(u32, String)>, String> {
    Ok(sys(0, i)?
        .polled_by
        .into_iter()
        .map(|p| (p.pid, p.comm))
        .collect())
}

fn inside_namespace(link: &mut Link, outer: u32, inner: u32, bin: Option<&PathBuf>) -> TestResult {
    link.expect("go")?;
    ensure_eq!(getpid(), 1, "pid of the grandchild in its namespace");
    set_comm("insider");
    let d = open(0)?;
    ctx(d.acquire(inner, Wait::Try), "ACQUIRE inside the namespace")?;
    // The insider polls the lock the outsider holds.
    let v = ctx(
        lock_ctl(&d, outer as u8, abi::LOCK_CTL_ACQUIRE),
        "LOCK_CTL try inside the namespace",
    )?;
    ensure_eq!(v, 0, "the insider's try of lock {outer}");
    link.send("polling")?;
    link.expect("outsider polls")?;
    ensure_eq!(
        pollers_of(outer)?,
        vec![(1, "insider".to_string())],
        "lock {outer}'s poller (pid 1 here) read inside"
    );
    ensure_eq!(
        pollers_of(inner)?,
        vec![(0, "outsider".to_string())],
        "lock {inner}'s poller (outside the namespace) read inside"
    );
    let s = sys(0, outer)?;
    ensure!(
        s.held && s.pid == 0 && s.comm == "outsider",
        "lock {outer}, held outside the namespace, read inside: expected pid=0 comm=outsider, got {s:?}"
    );
    let s = sys(0, inner)?;
    ensure!(
        s.held && s.pid == 1 && s.comm == "insider",
        "lock {inner}, held by pid 1 of the namespace, read inside: {s:?}"
    );
    let q = query(&d, outer)?;
    ensure!(
        q.held && q.holder_pid == 0,
        "QUERY of lock {outer} inside: {q:?}"
    );
    ensure_eq!(
        query(&d, inner)?.holder_pid,
        1,
        "QUERY holder_pid of lock {inner} inside"
    );
    // Opened by: the scenario, the outside holder, us (pid 1 here).
    ensure_eq!(
        pids(0)?,
        vec![0, 0, 1],
        "procfs pids of card 0 read inside the namespace"
    );
    if let Some(bin) = bin {
        let r = cli_expect(bin, &["status", "0"], None, 0)?;
        ensure_row(&r, &outer.to_string(), "?", "outsider", 0)?;
        ensure_row(&r, &inner.to_string(), "1", "insider", 0)?;
        ensure!(
            r.out.contains("not visible in this pid namespace"),
            "no note for '?': {r}"
        );
    }
    link.send("checked")?;
    link.expect("done")
}

/// The counters move as documented: acquisitions per grant, contended and
/// wait_total_ns/wait_max_ns for a grant that waited, hold_max_ns after a
/// release, owner_died and owner_died_pending when a holder dies; spurious
/// wake-ups stay 0. sysfs agrees with QUERY.
pub fn counters_move() -> TestResult {
    let i = 27;
    let a = open(0)?;
    ensure_free(&a, i)?;
    let s0 = sys(0, i)?;
    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let held_since = Instant::now();
    let s1 = sys(0, i)?;
    ensure_eq!(
        s1.acquisitions,
        s0.acquisitions + 1,
        "acquisitions after an uncontended grant"
    );
    ensure_eq!(
        s1.contended,
        s0.contended,
        "contended after an uncontended grant"
    );
    ensure_eq!(
        s1.wait_total_ns,
        s0.wait_total_ns,
        "wait_total_ns after an uncontended grant"
    );

    let mut w = worker("waiter", 0)?;
    w.send(&format!("acquire {i}"))?;
    wait_waiters(&a, i, 1)?;
    let held_at_least = held_since.elapsed();
    ctx(a.release(bit(i)), "RELEASE")?;
    let waited = ok_reply(&mut w, "acquire")?[1];
    let s2 = sys(0, i)?;
    ensure!(
        s2.held && s2.pid == w.pid as u32,
        "after the hand-off: {s2:?}"
    );
    ensure_eq!(
        s2.acquisitions,
        s0.acquisitions + 2,
        "acquisitions after a contended grant"
    );
    ensure_eq!(
        s2.contended,
        s0.contended + 1,
        "contended after a contended grant"
    );
    let wait = s2.wait_total_ns - s0.wait_total_ns;
    ensure!(
        wait > 0 && s2.wait_max_ns >= wait && waited > 0,
        "wait counters after a contended grant: wait_total_ns grew by {wait}, wait_max_ns {}, \
         the waiter was told it waited {waited} ns",
        s2.wait_max_ns
    );
    ensure!(
        s2.hold_max_ns >= held_at_least.as_nanos() as u64,
        "hold_max_ns {} after a hold of at least {} ns",
        s2.hold_max_ns,
        held_at_least.as_nanos()
    );
    let q = query(&a, i)?;
    ensure!(
        q.raw.acquisitions == s2.acquisitions
            && q.raw.contended == s2.contended
            && q.raw.owner_died_count == s2.owner_died
            && q.raw.spurious_wakeups == s2.spurious_wakeups
            && q.holder_pid == s2.pid
            && q.holder_comm == s2.comm,
        "sysfs {s2:?} disagrees with QUERY {q:?}"
    );

    // The holder dies: owner_died, the pending mark; no grant counted.
    w.send("exit")?;
    w.wait()?;
    let s3 = sys(0, i)?;
    ensure!(
        !s3.held && s3.owner_died_pending,
        "after the holder exited: {s3:?}"
    );
    ensure_eq!(
        s3.owner_died,
        s0.owner_died + 1,
        "owner_died after the holder exited"
    );
    ensure_eq!(
        s3.acquisitions,
        s2.acquisitions,
        "acquisitions after the holder exited"
    );
    let g = ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    ensure_eq!(g.owner_died_mask, bit(i), "owner-died mask");
    let s4 = sys(0, i)?;
    ensure!(
        !s4.owner_died_pending,
        "mark not cleared by the acquisition: {s4:?}"
    );
    ensure_eq!(s4.acquisitions, s0.acquisitions + 3, "acquisitions");
    ensure_eq!(s4.contended, s0.contended + 1, "contended");
    ctx(a.release(bit(i)), "RELEASE")?;
    for s in [&s0, &s1, &s2, &s3, &s4] {
        ensure_eq!(s.spurious_wakeups, 0, "spurious_wakeups");
    }
    Ok(())
}

const READERS: usize = 4;
const DONE: usize = 0; // u32 word: the stress finished
const ROUNDS: usize = 1; // u64 words 1..: rounds of reader k

/// One round of a reader: all 64 locks of card 0 (the stress's), its
/// procfs and debugfs files. `last` holds each lock's counters as the
/// reader's previous round saw them: counters never go back. (Their
/// values are not this test's: a spurious wake-up, say, is rare but
/// legitimate, such as a futex's deferred wake-up delivered to a task that
/// has since gone to sleep in the driver, and earlier scenarios leave
/// theirs on card 0.)
fn read_round(last: &mut [Option<LockLine>]) -> TestResult {
    for (i, last) in (0..abi::LOCK_COUNT).zip(last.iter_mut()) {
        let l = sys(0, i)?;
        ensure!(
            l.held || (l.pid == 0 && l.comm.is_empty() && l.held_ns == 0),
            "free lock with holder fields: {l:?}"
        );
        ensure!(l.waiters <= 16, "implausible waiter count: {l:?}");
        if let Some(p) = last.as_ref() {
            let counters = |l: &LockLine| {
                [
                    l.acquisitions,
                    l.contended,
                    l.owner_died,
                    l.wait_total_ns,
                    l.wait_max_ns,
                    l.hold_max_ns,
                    l.spurious_wakeups,
                ]
            };
            ensure!(
                counters(p).iter().zip(counters(&l)).all(|(a, b)| *a <= b),
                "lock {i}: a counter went back: {p:?} then {l:?}"
            );
        }
        *last = Some(l);
    }
    pids(0)?;
    let d = debugfs(0)?;
    ensure!(
        d.queue.iter().all(|q| q.pid != 0 && !q.locks.is_empty()),
        "debugfs queue {d:?}"
    );
    Ok(())
}

/// Readers of every view run in loops while the stress workload runs: the
/// stress still sees mutual exclusion and finishes, every reader completes
/// rounds during it and stops when told (no stall; the watchdog and the
/// hung-task detector catch one).
pub fn concurrent_readers_during_stress() -> TestResult {
    let shm = Shared::new(4096)?;
    let mut readers = Vec::new();
    for k in 0..READERS {
        let shm = &shm;
        readers.push(spawn(&format!("reader {k}"), &[], move |_| {
            let mut last = vec![None; abi::LOCK_COUNT as usize];
            // Bounded: a safety net, the stress ends much earlier.
            for _ in 0..100_000 {
                read_round(&mut last)?;
                shm.u64(ROUNDS + k).fetch_add(1, Ordering::SeqCst);
                if shm.u32(DONE).load(Ordering::SeqCst) != 0 {
                    return Ok(());
                }
            }
            Err("still reading after 100000 rounds".into())
        })?);
    }
    let rounds = || -> Vec<u64> {
        (0..READERS)
            .map(|k| shm.u64(ROUNDS + k).load(Ordering::SeqCst))
            .collect()
    };
    // Every reader is reading before the stress starts.
    let start = Instant::now();
    while rounds().contains(&0) {
        if start.elapsed() >= PATIENCE {
            // A reader that failed its first round says why when reaped.
            shm.u32(DONE).store(1, Ordering::SeqCst);
            let why = crate::worker::wait_all(readers).err().unwrap_or_default();
            return Err(format!(
                "readers did not complete a first round in {PATIENCE:?} (rounds {:?}): {why}",
                rounds()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let first_round = start.elapsed();
    let before = rounds();
    // The stress, again (bounded) until every reader has completed whole
    // rounds while it ran: the reads really overlap the workload.
    let stress_start = Instant::now();
    let mut stress = Ok(());
    let mut runs = 0;
    while stress.is_ok() && runs < 20 {
        stress = super::stress::run_stress(6, 48, 8, super::stress::iterations(60), false);
        runs += 1;
        if rounds().iter().zip(&before).all(|(a, b)| *a >= b + 2) {
            break;
        }
    }
    let after = rounds();
    shm.u32(DONE).store(1, Ordering::SeqCst);
    let readers_result = crate::worker::wait_all(readers);
    println!(
        "# first round of the readers: {} ms; {runs} stress run(s) in {} ms; rounds during \
         them: {:?}",
        first_round.as_millis(),
        stress_start.elapsed().as_millis(),
        after
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect::<Vec<_>>()
    );
    flush();
    stress.map_err(|e| format!("stress with concurrent readers: {e}"))?;
    readers_result?;
    ensure!(
        before.iter().zip(&after).all(|(b, a)| *a >= b + 2),
        "a reader completed less than one whole round during the stress: rounds before \
         {before:?}, after {after:?}"
    );
    Ok(())
}

/// Reads a child's pipe to the end.
fn drain(r: Option<impl Read>) -> String {
    let mut s = String::new();
    if let Some(mut r) = r {
        let _ = r.read_to_string(&mut s);
    }
    s
}

/// tt-locks: exit codes and messages of status, hold, acquire, query,
/// release and watch, against a holder with a known pid and comm.
pub fn tt_locks_cli() -> TestResult {
    let Some(bin) = tt_locks() else {
        skip_cli("every tt-locks check");
        return Ok(());
    };
    let bin = &bin;
    let i = abi::LOCK_ARC_MSG;
    let a = open(0)?;
    for l in [i, 3, 4, 5] {
        ensure_free(&a, l)?;
    }
    let r = cli_expect(bin, &["status"], None, 0)?;
    ensure!(
        summary_line(&r.out, 0).is_some_and(|l| l.contains("no locks held")),
        "status with nothing held: {r}"
    );
    ensure!(
        r.out.contains("/dev/tenstorrent/1"),
        "status lacks card 1: {r}"
    );

    let mut h = worker("holder", 0)?;
    ok(&mut h, "comm pyholder")?;
    ok(&mut h, &format!("acquire {i}"))?;
    let busy = format!("held by pid {} (pyholder)", h.pid);

    let r = cli_expect(bin, &["hold", "arc_msg", "--try"], None, 1)?;
    ensure!(
        r.err.contains(&format!("busy: {busy}")),
        "hold --try of a held lock: {r}"
    );
    let t = Instant::now();
    let r = cli_expect(bin, &["acquire", "16", "--timeout", "300ms"], None, 1)?;
    ensure!(
        r.err.contains(&format!("timed out after 300ms: {busy}")),
        "acquire --timeout of a held lock: {r}"
    );
    ensure!(
        t.elapsed() >= Duration::from_millis(300),
        "timed out early: {:?}",
        t.elapsed()
    );
    // The counters are the lock's since the module loaded (earlier
    // scenarios used it too; a timer that fires early counts as a spurious
    // wake-up): the CLI must print what QUERY says, read around it.
    let counters = query(&a, i)?.raw;
    let r = cli_expect(bin, &["query", "ARC_MSG"], None, 0)?;
    let after = query(&a, i)?.raw;
    ensure!(
        (counters.acquisitions, counters.spurious_wakeups)
            == (after.acquisitions, after.spurious_wakeups),
        "the lock's counters moved while tt-locks queried it"
    );
    for want in [
        "name: ARC_MSG".to_string(),
        "held: 1".into(),
        "held_by_caller: 0".into(),
        format!("holder_pid: {}", h.pid),
        "holder_comm: pyholder".into(),
        "waiters: 0".into(),
        format!("acquisitions: {}", after.acquisitions),
        format!("spurious_wakeups: {}", after.spurious_wakeups),
    ] {
        ensure!(
            r.out.lines().any(|l| l == want),
            "query lacks {want:?}: {r}"
        );
    }
    let r = cli_expect(bin, &["release", "ARC_MSG"], None, 2)?;
    ensure!(
        r.err.contains(&format!("held by pid {} (pyholder)", h.pid)),
        "release: {r}"
    );
    ensure!(query(&a, i)?.held, "tt-locks release released the lock");

    // Usage and device errors.
    cli_expect(bin, &["hold", "bogus"], None, 2)?;
    cli_expect(bin, &["frobnicate"], None, 2)?;
    let r = cli_expect(bin, &["hold", "16", "--device", "7", "--try"], None, 3)?;
    ensure!(r.err.contains("no such device"), "hold on card 7: {r}");
    let r = cli_expect(bin, &["status", "7"], None, 3)?;
    ensure!(r.err.contains("no such device"), "status of card 7: {r}");

    // Unprivileged: status works; locking needs access to the node.
    let r = cli_expect(bin, &["status"], Some(NOBODY), 0)?;
    ensure_row(&r, "ARC_MSG", &h.pid.to_string(), "pyholder", 0)?;
    let mode = std::fs::metadata(node(0))
        .map_err(|e| format!("stat {}: {e}", node(0)))?
        .mode();
    if mode & 0o006 == 0o006 {
        let r = cli_expect(bin, &["hold", "16", "--try"], Some(NOBODY), 1)?;
        ensure!(
            r.err.contains(&format!("busy: {busy}")),
            "unprivileged hold --try: {r}"
        );
    } else {
        let r = cli_expect(bin, &["hold", "16", "--try"], Some(NOBODY), 3)?;
        ensure!(
            r.err.contains("permission denied"),
            "unprivileged hold (mode {mode:o}): {r}"
        );
    }

    // hold --for: holds, then releases.
    let r = cli_expect(bin, &["hold", "ETH03", "--for", "200ms"], None, 0)?;
    ensure!(
        r.out.contains("holding ETH03 on /dev/tenstorrent/0 (pid ")
            && r.out.contains("released ETH03"),
        "hold --for: {r}"
    );
    ensure_free(&a, 3)?;

    // A blocking hold waits for the holder, says so, gets the lock at the
    // hand-off and releases it on SIGTERM.
    let mut c = command(bin, &["hold", "arc_msg"], None)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn tt-locks: {e}"))?;
    wait_waiters(&a, i, 1)?;
    ok(&mut h, &format!("release {:x}", bit(i)))?;
    let cpid = c.id();
    poll_query(&a, i, "held by tt-locks", |q| {
        q.held && q.holder_pid == cpid
    })?;
    // SAFETY: signalling our child.
    unsafe { libc::kill(cpid as i32, libc::SIGTERM) };
    let status = c.wait().map_err(|e| format!("wait tt-locks: {e}"))?;
    let r = Run {
        code: status.code().unwrap_or(-1),
        out: drain(c.stdout.take()),
        err: drain(c.stderr.take()),
    };
    ensure!(
        r.code == 0
            && r.out.contains(&format!(
                "waiting for ARC_MSG on /dev/tenstorrent/0: {busy}"
            ))
            && r.out.contains(&format!(
                "holding ARC_MSG on /dev/tenstorrent/0 (pid {cpid})"
            ))
            && r.out.contains("(SIGTERM)"),
        "blocking hold, then SIGTERM: {r}"
    );
    ensure_free(&a, i)?;

    // SIGINT while waiting: "interrupted", exit 4, no longer queued.
    ok(&mut h, &format!("acquire {i}"))?;
    let mut c = command(bin, &["hold", "arc_msg"], None)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn tt-locks: {e}"))?;
    wait_waiters(&a, i, 1)?;
    // SAFETY: signalling our child.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let status = c.wait().map_err(|e| format!("wait tt-locks: {e}"))?;
    let err = drain(c.stderr.take());
    ensure!(
        status.code() == Some(4) && err.contains("interrupted"),
        "SIGINT while waiting: {status:?}, stderr {err:?}"
    );
    wait_waiters(&a, i, 0)?;

    // acquire: held while stdin is open, released at its end.
    let mut c = command(bin, &["acquire", "eth5"], None)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn tt-locks: {e}"))?;
    let cpid = c.id();
    poll_query(&a, 5, "held by tt-locks acquire", |q| {
        q.held && q.holder_pid == cpid
    })?;
    let s = sys(0, 5)?;
    ensure!(
        s.pid == cpid && s.comm == "tt-locks",
        "ETH05 held by tt-locks acquire: {s:?}"
    );
    drop(c.stdin.take());
    let status = c.wait().map_err(|e| format!("wait tt-locks: {e}"))?;
    let out = drain(c.stdout.take());
    ensure!(
        status.code() == Some(0) && out.contains("holding ETH05") && out.contains("(end of input)"),
        "acquire until end of input: {status:?}, stdout {out:?}, stderr {:?}",
        drain(c.stderr.take())
    );
    ensure_free(&a, 5)?;

    // watch: refreshes N times, clearing the screen each time.
    let r = cli_expect(
        bin,
        &["watch", "0", "--interval", "50ms", "--count", "3"],
        None,
        0,
    )?;
    ensure_eq!(
        r.out.matches("\x1b[2J").count(),
        3,
        "screens drawn by watch --count 3"
    );
    ensure!(
        status_row(&r.out, "ARC_MSG").is_some(),
        "watch does not show ARC_MSG: {r}"
    );
    Ok(())
}

/// The value of the series `name` whose labels include `labels`, from a
/// Prometheus text exposition.
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(series, _)| {
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|(_, v)| v.parse().ok())
}

/// `tt-locks metrics` against the live driver: the holder and waiter of a
/// lock, the counters, the open files and a clock, each equal to what
/// sysfs and procfs say at the same moment; the same for an unprivileged
/// reader; `--output` replaces its file whole; after the hand-off the
/// series name the new holder.
pub fn tt_locks_metrics() -> TestResult {
    let Some(bin) = tt_locks() else {
        skip_cli("tt-locks metrics");
        return Ok(());
    };
    let bin = &bin;
    let i = abi::LOCK_ARC_MSG;
    let a = open(0)?;
    ensure_free(&a, i)?;
    let mut h = worker("holder", 0)?;
    ok(&mut h, "comm metricsholder")?;
    ok(&mut h, &format!("acquire {i}"))?;
    let mut w = worker("waiter", 0)?;
    w.send(&format!("acquire {i}"))?;
    wait_waiters(&a, i, 1)?;

    let arc = [("card", "0"), ("lock", "ARC_MSG")];
    for uid in [None, Some(NOBODY)] {
        let r = cli_expect(bin, &["metrics"], uid, 0)?;
        let s = sys(0, i)?;
        let m = |name: &str, labels: &[(&str, &str)]| metric(&r.out, name, labels);
        let holder = h.pid.to_string();
        ensure_eq!(
            m("tenstorrent_cards", &[]),
            Some(sysfs::cards().map_err(|e| e.to_string())?.len() as f64),
            "tenstorrent_cards (uid {uid:?})"
        );
        ensure_eq!(
            m("tenstorrent_lock_held", &arc),
            Some(1.0),
            "ARC_MSG held (uid {uid:?}): {r}"
        );
        ensure_eq!(
            m(
                "tenstorrent_lock_holder",
                &[
                    ("card", "0"),
                    ("lock", "ARC_MSG"),
                    ("pid", &holder),
                    ("comm", "metricsholder")
                ]
            ),
            Some(1.0),
            "ARC_MSG's holder series (uid {uid:?}): {r}"
        );
        ensure_eq!(
            m("tenstorrent_lock_waiters", &arc),
            Some(s.waiters as f64),
            "waiters vs sysfs {s:?}"
        );
        ensure_eq!(m("tenstorrent_lock_waiters", &arc), Some(1.0), "waiters");
        ensure_eq!(
            m("tenstorrent_lock_acquisitions_total", &arc),
            Some(s.acquisitions as f64),
            "acquisitions vs sysfs {s:?}"
        );
        ensure_eq!(
            m("tenstorrent_lock_owner_died_total", &arc),
            Some(s.owner_died as f64),
            "owner_died vs sysfs {s:?}"
        );
        let held = m("tenstorrent_lock_held_seconds", &arc).unwrap_or(-1.0);
        ensure!(
            held > 0.0 && held <= s.held_ns as f64 / 1e9,
            "held {held} s, sysfs read after it says {} ns",
            s.held_ns
        );
        ensure_eq!(
            m(
                "tenstorrent_lock_held",
                &[("card", "1"), ("lock", "ARC_MSG")]
            ),
            Some(f64::from(u8::from(sys(1, i)?.held))),
            "card 1's ARC_MSG"
        );
        ensure_eq!(
            m("tenstorrent_open_files", &[("card", "0")]),
            Some(pids(0)?.len() as f64),
            "open files of card 0"
        );
        if let Ok(clk) = std::fs::read_to_string("/sys/class/tenstorrent/tenstorrent!0/tt_aiclk") {
            let mhz: f64 = clk
                .trim()
                .parse()
                .map_err(|_| format!("tt_aiclk {clk:?}"))?;
            ensure_eq!(
                m(
                    "tenstorrent_clock_hertz",
                    &[("card", "0"), ("clock", "aiclk")]
                ),
                Some(mhz * 1e6),
                "aiclk"
            );
        }
        ensure_eq!(
            m(
                "tenstorrent_view_readable",
                &[("card", "0"), ("view", "locks")]
            ),
            Some(1.0),
            "locks view readable (uid {uid:?})"
        );
    }

    let dir = std::path::Path::new("/tmp/tt-locks-metrics");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let file = dir.join("tenstorrent.prom");
    std::fs::write(&file, "stale\n").map_err(|e| e.to_string())?;
    cli_expect(
        bin,
        &["metrics", "--output", &file.to_string_lossy()],
        None,
        0,
    )?;
    let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
    ensure!(
        !text.contains("stale") && metric(&text, "tenstorrent_lock_held", &arc) == Some(1.0),
        "--output file: {text:?}"
    );
    let left = std::fs::read_dir(dir).map_err(|e| e.to_string())?.count();
    ensure_eq!(left, 1, "files in {} after --output", dir.display());

    ok(&mut h, &format!("release {:x}", bit(i)))?;
    ok_reply(&mut w, "acquire")?;
    let r = cli_expect(bin, &["metrics", "0"], None, 0)?;
    let waiter = w.pid.to_string();
    ensure_eq!(
        metric(
            &r.out,
            "tenstorrent_lock_holder",
            &[("card", "0"), ("lock", "ARC_MSG"), ("pid", &waiter)]
        ),
        Some(1.0),
        "after the hand-off the holder is the waiter: {r}"
    );
    ensure!(
        metric(&r.out, "tenstorrent_lock_held", &[("card", "1")]).is_none(),
        "metrics 0 shows card 1: {r}"
    );
    w.send("exit")?;
    w.wait()?;
    h.send("exit")?;
    h.wait()?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// The fdinfo of descriptor `fd` of this process.
fn fdinfo_fd(fd: std::os::fd::RawFd) -> Result<FdInfo, String> {
    FdInfo::read(getpid(), fd as u32).map_err(|e| format!("/proc/{}/fdinfo/{fd}: {e}", getpid()))
}

/// Every `tt-` line of `f`, for messages.
fn dump(f: &FdInfo) -> String {
    f.keys
        .iter()
        .map(|(k, v)| format!("  {k}: {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Requires each `(key, value)` of `want` in `f`, written exactly so.
fn expect_keys(f: &FdInfo, what: &str, want: &[(&str, &str)]) -> TestResult {
    for (key, value) in want {
        ensure!(
            f.get(key) == Some(value),
            "{what}: {key} is {:?}, expected {value:?}; the file's fdinfo:\n{}",
            f.get(key),
            dump(f)
        );
    }
    Ok(())
}

/// Requires the locks of `list` (held or waiting) to be `names`, and each
/// duration within `lo..=hi` nanoseconds: what the clock allows between
/// the moments around the event and around the read.
fn expect_locks(
    f: &FdInfo,
    what: &str,
    list: &[(String, Duration)],
    names: &[&str],
    (lo, hi): (u64, u64),
) -> TestResult {
    let got: Vec<&str> = list.iter().map(|(n, _)| n.as_str()).collect();
    ensure!(
        got == names,
        "{what}: locks {got:?}, expected {names:?}; the file's fdinfo:\n{}",
        dump(f)
    );
    for (name, d) in list {
        let ns = d.as_nanos() as u64;
        ensure!(
            (lo..=hi).contains(&ns),
            "{what}: {name} for {ns} ns, outside {lo}..={hi} (the clock around it)"
        );
    }
    Ok(())
}

/// `/proc/PID/fdinfo/FD` of an open card says what that open file holds,
/// key by key (Documentation/ABI/testing/procfs-fdinfo-tenstorrent): a lock
/// held and one waited for (with how long, bounded by the clock read
/// around the events), two windows, a DMA buffer (what it takes: a 3-page
/// buffer takes 4), pinned pages, its power vote, a NOC cleanup, a firmware
/// message in flight, and on the other card an exclusive open; a dup shows
/// the same file, another file and another process's file their own.
/// Seen failing on the driver before fdinfo (no tt- lines: "not a
/// tenstorrent file"), and on a mutant that reported pinned pages for
/// bytes (tt-pinned-bytes 1 for one page).
pub fn fdinfo_holdings_key_by_key() -> TestResult {
    use super::mapping::{chip, tensix};
    use super::smc::{poll_done, post, Hung, Timeout};
    use super::tlb::tlb_allocate;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const MIB: u64 = 1 << 20;
    let (arc, mmio) = (abi::LOCK_ARC_MSG, abi::LOCK_NON_MMIO);
    let a = open(0)?;
    ensure_free(&a, arc)?;
    ensure_free(&a, mmio)?;
    let pdev0 = bdf(0)?;

    // A file that holds nothing: every count 0, a plain open's vote.
    let f = fdinfo_fd(a.as_raw_fd())?;
    let idle = [
        ("tt-driver", "tenstorrent"),
        ("tt-pdev", pdev0.as_str()),
        ("tt-card", "0"),
        ("tt-exclusive", "0"),
        ("tt-locks-held", "0"),
        ("tt-locks-waiting", "0"),
        ("tt-tlb-windows", "0"),
        ("tt-tlb-bytes", "0"),
        ("tt-dma-buffers", "0"),
        ("tt-dma-buffer-bytes", "0"),
        ("tt-pinned-ranges", "0"),
        ("tt-pinned-bytes", "0"),
        ("tt-power-validity", "0x0f"),
        ("tt-power-flags", "0x7ffe"),
        ("tt-noc-cleanup", "0"),
        ("tt-smc-msg", "none"),
    ];
    expect_keys(&f, "a new file", &idle)?;
    ensure!(
        f.held.is_empty() && f.waiting.is_empty() && f.get("tt-power-settings").is_none(),
        "a new file shows locks or settings:\n{}",
        dump(&f)
    );
    let id = f.client_id;

    // Another process holds NON_MMIO; this file takes ARC_MSG, then waits
    // for NON_MMIO in a thread of ours (the request is the file's).
    let mut w = worker("holder", 0)?;
    ok(&mut w, &format!("acquire {mmio}"))?;
    let held_from = now_ns();
    expect_ok(acquire(&a, arc, 0, 0).0, "ACQUIRE ARC_MSG")?;
    let held_by = now_ns();
    std::thread::scope(|s| -> TestResult {
        let asked_from = now_ns();
        let mut waiter = Some(s.spawn(|| acquire(&a, mmio, 0, 0).0));
        let checked = (|| -> TestResult {
            wait_waiters(&a, mmio, 1)?;
            let asked_by = now_ns();

            // Windows of two sizes, a 3-page buffer (a 4-page block), a
            // pinned page (one: without an IOMMU a pin must be physically
            // contiguous), a vote with two settings, a NOC cleanup.
            for size in [MIB, 2 * MIB] {
                expect_ok(tlb_allocate(&a, size, 0, 0).0, "TLB_ALLOCATE")?;
            }
            expect_ok(
                super::dma_helpers::allocate_buffer(&a, 0, 3 * 4096),
                "ALLOCATE_DMA_BUF",
            )?;
            let pages = Shared::new(4096)?;
            expect_ok(
                super::dma_helpers::pin_pages(&a, pages.addr(), 4096),
                "PIN_PAGES",
            )?;
            let mut vote = abi::PowerState {
                argsz: 40,
                validity: abi::power_validity(15, 2),
                power_flags: abi::POWER_FLAG_MAX_AI_CLK | abi::POWER_FLAG_TENSIX_ENABLE,
                ..abi::PowerState::default()
            };
            vote.power_settings[..2].copy_from_slice(&[300, 7]);
            expect_ok(
                ioctl(&a, abi::IOCTL_SET_POWER_STATE, &mut vote),
                "SET_POWER_STATE",
            )?;
            let tile = tensix(chip(0));
            let mut cleanup = abi::SetNocCleanup {
                argsz: 32,
                enabled: 1,
                x: tile.0 as u8,
                y: tile.1 as u8,
                addr: 0x2_0080,
                data: 0xfd,
                ..abi::SetNocCleanup::default()
            };
            expect_ok(
                ioctl(&a, abi::IOCTL_SET_NOC_CLEANUP, &mut cleanup),
                "SET_NOC_CLEANUP",
            )?;

            // A firmware message in flight: the firmware hung, the per-message
            // deadline far away (every open and vote above was sent before).
            let _deadline = Timeout::set(0, 600_000)?;
            let hung = Hung::new(0)?;
            let posted_from = now_ns();
            expect_ok(post(&a, 0x90, 41), "SMC_MSG POST")?;
            let posted_by = now_ns();

            let read_from = now_ns();
            let f = fdinfo_fd(a.as_raw_fd())?;
            let read_by = now_ns();
            expect_keys(
                &f,
                "a file that holds everything",
                &[
                    ("tt-driver", "tenstorrent"),
                    ("tt-pdev", pdev0.as_str()),
                    ("tt-card", "0"),
                    ("tt-exclusive", "0"),
                    ("tt-locks-held", "1"),
                    ("tt-locks-waiting", "1"),
                    ("tt-tlb-windows", "2"),
                    ("tt-tlb-bytes", &(3 * MIB).to_string()),
                    ("tt-dma-buffers", "1"),
                    ("tt-dma-buffer-bytes", "16384"),
                    ("tt-pinned-ranges", "1"),
                    ("tt-pinned-bytes", "4096"),
                    ("tt-power-validity", "0x2f"),
                    ("tt-power-flags", "0x0005"),
                    ("tt-power-settings", "300,7"),
                    ("tt-noc-cleanup", "1"),
                    ("tt-smc-msg", "sent"),
                    ("tt-smc-msg-type", "0x90"),
                ],
            )?;
            ensure_eq!(f.client_id, id, "tt-client-id of the same file");
            let since = |from: u64, by: u64| (read_from - by, read_by - from);
            expect_locks(&f, "held", &f.held, &["ARC_MSG"], since(held_from, held_by))?;
            expect_locks(
                &f,
                "waiting",
                &f.waiting,
                &["NON_MMIO"],
                since(asked_from, asked_by),
            )?;
            let age = f
                .get("tt-smc-msg-age")
                .and_then(|v| v.strip_suffix(" ns")?.parse::<u64>().ok())
                .ok_or_else(|| format!("tt-smc-msg-age:\n{}", dump(&f)))?;
            let (lo, hi) = since(posted_from, posted_by);
            ensure!(
                (lo..=hi).contains(&age),
                "tt-smc-msg-age {age} ns outside {lo}..={hi}"
            );

            // A dup of the descriptor is the same open file; another file of
            // the card is another client; the holder's file, read from its
            // process, holds NON_MMIO only.
            // SAFETY: dup of a descriptor we own; the result is owned below.
            let dup = unsafe { OwnedFd::from_raw_fd(libc::dup(a.as_raw_fd())) };
            let d = fdinfo_fd(dup.as_raw_fd())?;
            let held: Vec<&str> = d.held.iter().map(|(n, _)| n.as_str()).collect();
            ensure!(
                d.client_id == id && held == ["ARC_MSG"],
                "the dup's fdinfo:\n{}",
                dump(&d)
            );
            let b = open(0)?;
            let other = fdinfo_fd(b.as_raw_fd())?;
            ensure!(other.client_id != id, "two files share tt-client-id {id}");
            expect_keys(&other, "another file", &idle)?;
            let scan = ctx(tt_arbiter::fdinfo::scan(), "scan of /proc")?;
            let theirs: Vec<&FdInfo> = scan
                .files
                .iter()
                .filter(|f| f.pid == w.pid as u32)
                .collect();
            ensure!(
                theirs.len() == 1,
                "the holder's descriptors of a card: {theirs:?}"
            );
            let t = theirs[0];
            expect_keys(
                t,
                "the holder's file",
                &[
                    ("tt-card", "0"),
                    ("tt-locks-held", "1"),
                    ("tt-locks-waiting", "0"),
                ],
            )?;
            ensure!(
                t.held.len() == 1 && t.held[0].0 == "NON_MMIO" && t.client_id != id,
                "the holder's file:\n{}",
                dump(t)
            );

            // The firmware answers; the message, collected, is gone.
            hung.resume()?;
            let (r, m) = poll_done(&a)?;
            expect_ok(r, "SMC_MSG POLL")?;
            ensure_eq!(m[1], 42, "TEST 41's answer");
            cleanup.enabled = 0;
            expect_ok(
                ioctl(&a, abi::IOCTL_SET_NOC_CLEANUP, &mut cleanup),
                "SET_NOC_CLEANUP clear",
            )?;
            expect_ok(
                super::dma_helpers::unpin_pages(&a, pages.addr(), 4096),
                "UNPIN_PAGES",
            )?;
            // The holder lets go: the waiting thread holds NON_MMIO.
            ok(&mut w, &format!("release {:x}", bit(mmio)))?;
            let granted = waiter
                .take()
                .ok_or("joined twice")?
                .join()
                .map_err(|_| "the waiting thread panicked".to_string())?;
            expect_ok(granted, "blocking ACQUIRE of NON_MMIO")?;
            let f = fdinfo_fd(a.as_raw_fd())?;
            expect_keys(
                &f,
                "after the grant, the unpin, the answer",
                &[
                    ("tt-locks-held", "2"),
                    ("tt-locks-waiting", "0"),
                    ("tt-pinned-ranges", "0"),
                    ("tt-pinned-bytes", "0"),
                    ("tt-noc-cleanup", "0"),
                    ("tt-smc-msg", "none"),
                ],
            )?;
            let names: Vec<&str> = f.held.iter().map(|(n, _)| n.as_str()).collect();
            ensure_eq!(names, vec!["ARC_MSG", "NON_MMIO"], "locks held");
            expect_ok(release(&a, bit(arc) | bit(mmio)), "RELEASE").map(drop)
        })();
        if checked.is_err() {
            // The waiting thread must end for the scope to: the holder's
            // death frees NON_MMIO for it.
            let _ = w.kill(libc::SIGKILL);
        }
        checked
    })?;
    finish(w)?;

    // An exclusive open of the other card.
    let excl = ctx(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_EXCL)
            .open(node(1)),
        "O_EXCL open of card 1",
    )?;
    let e = fdinfo_fd(excl.as_raw_fd())?;
    expect_keys(
        &e,
        "an O_EXCL file of card 1",
        &[
            ("tt-card", "1"),
            ("tt-pdev", bdf(1)?.as_str()),
            ("tt-exclusive", "1"),
            ("tt-locks-held", "0"),
        ],
    )?;
    Ok(())
}

/// Lock `index` of card 0 in sysfs, once its pollers are `n`.
fn wait_pollers(index: u32, n: u32) -> Result<LockLine, String> {
    let start = Instant::now();
    loop {
        let l = sys(0, index)?;
        if l.pollers == n {
            return Ok(l);
        }
        ensure!(
            start.elapsed() < PATIENCE,
            "lock {index} of card 0: {} pollers after {PATIENCE:?}, expected {n}: {l:?}",
            l.pollers
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The fdinfo of process `pid`'s file of card 0 (found by a scan).
fn fdinfo_of(pid: i32) -> Result<FdInfo, String> {
    let scan = tt_arbiter::fdinfo::scan().map_err(|e| format!("fdinfo scan: {e}"))?;
    let mut files = scan
        .files
        .into_iter()
        .filter(|f| f.pid == pid as u32 && f.card == 0);
    let f = files
        .next()
        .ok_or_else(|| format!("no file of card 0 in /proc/{pid}/fdinfo"))?;
    ensure!(files.next().is_none(), "pid {pid} has two files of card 0");
    Ok(f)
}

/// A process that polls a held lock with LOCK_CTL tries, nobody else
/// queued (UMD's `lock()`, which leaves no poll place then), is shown:
/// the lock's sysfs line counts it in `pollers` and names it in
/// `polled_by` (pid, comm, how long, its failed tries), its file's fdinfo
/// says what it polls, `tt-locks status` (root and nobody) lists it under
/// the card and `tt-locks metrics` has its series; a second poller, a
/// thread of this process, shows in its own fdinfo and goes with its
/// file's close. The poller disappears once it stops trying for a lease,
/// a try after that starts a new run, and it disappears at once when its
/// try gets the lock. Seen failing on the driver before pollers were
/// shown (no `pollers` field: 0 of 1 poller after PATIENCE), on a mutant
/// whose grants did not end the run (still 1 poller once it held the
/// lock) and on one whose views ignored the lease (a poller that stopped
/// stayed shown).
pub fn lone_poller_shown() -> TestResult {
    use super::locks::Setting;
    let i = 47u32;
    let name = "47";
    let a = open(0)?;
    ensure_free(&a, i)?;
    let lease = Setting::long_lease()?;
    let mut h = worker("holder", 0)?;
    ok(&mut h, "comm tt-holder")?;
    ok(&mut h, &format!("acquire {i}"))?;
    let mut p = worker("poller", 0)?;
    ok(&mut p, "comm tt-poller")?;
    let try_cmd = format!("ctl {i} {}", abi::LOCK_CTL_ACQUIRE);
    let before = now_ns();
    for _ in 0..3 {
        let v = ok(&mut p, &try_cmd)?;
        ensure_eq!(v[0], 0, "the poller's LOCK_CTL try of a held lock");
    }
    let l = sys(0, i)?;
    let since = now_ns() - before;
    ensure!(
        l.held && l.pid == h.pid as u32 && l.waiters == 0,
        "lock {i}: held by the holder, no waiter: {l:?}"
    );
    ensure!(
        l.pollers == 1 && l.polled_by.len() == 1,
        "lock {i}: one poller expected: {l:?}"
    );
    let seen = &l.polled_by[0];
    ensure!(
        seen.pid == p.pid as u32 && seen.comm == "tt-poller" && seen.tries == 3,
        "lock {i}'s poller: expected pid {} (tt-poller) with 3 tries: {seen:?}",
        p.pid
    );
    ensure!(
        seen.polling_ns <= since,
        "polling for {} ns, more than the {since} ns since before its first try",
        seen.polling_ns
    );
    let again = sys(0, i)?;
    ensure!(
        again.polled_by.first().map(|q| q.polling_ns) > Some(seen.polling_ns),
        "polling time does not grow: {l:?} then {again:?}"
    );

    // Its file's fdinfo; the holder's file polls nothing.
    let f = fdinfo_of(p.pid)?;
    expect_keys(
        &f,
        "the poller's file",
        &[
            ("tt-locks-held", "0"),
            ("tt-locks-waiting", "0"),
            ("tt-locks-polling", "1"),
            (&format!("tt-lock-poll-tries-{name}"), "3"),
        ],
    )?;
    ensure!(
        f.polling.len() == 1 && f.polling[0].0 == name && f.polling[0].2 == 3,
        "the poller's fdinfo polling: {:?}",
        f.polling
    );
    let fh = fdinfo_of(h.pid)?;
    expect_keys(&fh, "the holder's file", &[("tt-locks-polling", "0")])?;

    // A thread of this process polls too, through its own file: both
    // shown, longest first; its close ends its run.
    let b = open(0)?;
    let v = expect_ok(
        std::thread::scope(|s| {
            s.spawn(|| lock_ctl(&b, i as u8, abi::LOCK_CTL_ACQUIRE))
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))
        }),
        "LOCK_CTL try from a thread",
    )?;
    ensure_eq!(v, 0, "the thread's LOCK_CTL try of a held lock");
    let l2 = sys(0, i)?;
    let pids: Vec<u32> = l2.polled_by.iter().map(|q| q.pid).collect();
    ensure!(
        l2.pollers == 2 && pids == [p.pid as u32, getpid()],
        "two pollers, the first one first: {l2:?}"
    );
    let fb = fdinfo_fd(std::os::fd::AsRawFd::as_raw_fd(&b))?;
    expect_keys(
        &fb,
        "this process's polling file",
        &[
            ("tt-locks-polling", "1"),
            (&format!("tt-lock-poll-tries-{name}"), "1"),
        ],
    )?;
    drop(b);
    ensure_eq!(
        sys(0, i)?.pollers,
        1,
        "pollers after the thread's file closed"
    );

    match tt_locks() {
        Some(bin) => {
            for uid in [None, Some(NOBODY)] {
                let r = cli_expect(&bin, &["status", "0"], uid, 0)?;
                let row = status_row(&r.out, name).ok_or_else(|| format!("no row {name}: {r}"))?;
                ensure!(
                    row.get(7).map(String::as_str) == Some("1"),
                    "POLLERS of {name} (uid {uid:?}): {row:?} in {r}"
                );
                let poller_row = r.out.lines().any(|line| {
                    let w: Vec<&str> = line.split_whitespace().collect();
                    w.len() == 5
                        && w[0] == name
                        && w[1] == p.pid.to_string()
                        && w[2] == "tt-poller"
                        && w[4].parse::<u64>().is_ok_and(|t| t >= 3)
                });
                ensure!(
                    poller_row,
                    "no poller row for pid {} (uid {uid:?}): {r}",
                    p.pid
                );
                let summary = summary_line(&r.out, 0).unwrap_or_default();
                ensure!(summary.contains("1 polled"), "summary (uid {uid:?}): {r}");
            }
            let r = cli_expect(&bin, &["metrics"], None, 0)?;
            let labels = [("card", "0"), ("lock", name)];
            ensure_eq!(
                metric(&r.out, "tenstorrent_lock_pollers", &labels),
                Some(1.0),
                "tenstorrent_lock_pollers: {r}"
            );
            let pid = p.pid.to_string();
            let with = [
                ("card", "0"),
                ("lock", name),
                ("pid", &pid),
                ("comm", "tt-poller"),
            ];
            ensure!(
                metric(&r.out, "tenstorrent_lock_poller_seconds", &with).is_some_and(|s| s > 0.0),
                "tenstorrent_lock_poller_seconds of pid {pid}: {r}"
            );
        }
        None => skip_cli("tt-locks status and metrics with a poller"),
    }

    // It stops trying: gone once its lease passes (a short lease, taken
    // by its next try), and its next try starts a new run.
    lease.change(1)?;
    ensure_eq!(ok(&mut p, &try_cmd)?[0], 0, "try under the short lease");
    wait_pollers(i, 0)?;
    let f = fdinfo_of(p.pid)?;
    expect_keys(
        &f,
        "the poller's file past its lease",
        &[("tt-locks-polling", "0")],
    )?;
    lease.change(600_000)?;
    ensure_eq!(ok(&mut p, &try_cmd)?[0], 0, "try after the lease");
    let l = sys(0, i)?;
    ensure!(
        l.pollers == 1 && l.polled_by.first().map(|q| q.tries) == Some(1),
        "a try after the lease starts a new run of 1: {l:?}"
    );

    // It gets the lock: shown as the holder, no longer as a poller.
    ok(&mut h, &format!("release {:x}", bit(i)))?;
    ensure_eq!(
        ok(&mut p, &try_cmd)?[0],
        1,
        "the poller's try of the freed lock"
    );
    let l = sys(0, i)?;
    ensure!(
        l.held && l.pid == p.pid as u32 && l.pollers == 0 && l.polled_by.is_empty(),
        "the poller holds the lock and polls no more: {l:?}"
    );
    let f = fdinfo_of(p.pid)?;
    expect_keys(
        &f,
        "the poller's file holding the lock",
        &[("tt-locks-polling", "0"), ("tt-locks-held", "1")],
    )?;
    ensure_eq!(
        ok(&mut p, &format!("ctl {i} {}", abi::LOCK_CTL_RELEASE))?[0],
        1,
        "LOCK_CTL RELEASE"
    );
    finish(p)?;
    finish(h)?;
    ensure_free(&a, i)
}

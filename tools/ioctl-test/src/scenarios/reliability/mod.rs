//! Reliability suites: crash storms, ioctl fuzzing (and its regression
//! corpus), teardown under load, scale, signal storms.
//!
//! Sized by `TT_RELIABILITY_SCALE`: `check` (default; what `make check`
//! runs, each suite seconds to ~30 s on the TCG VM) or `stress` (what
//! `make stress` runs). Every suite prints its figures as TAP diagnostics,
//! `# figure NAME=VALUE`, which `tools/stress` adds up into its table.
//! Names shared by the suites: `operations`, `kills`, `fuzz_inputs`,
//! `rebinds`, `reloads`, `lost_locks`, `double_holders`.

mod alloc_failures;
mod fuzz;
mod fuzz_mmap;
mod scale;
mod signals;
mod storm;
mod teardown;

use std::io;
use std::os::fd::RawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tt_arbiter::{abi, Device};

use crate::util::*;

pub use alloc_failures::{allocation_failures, probe_allocation_failures};
pub use fuzz::{corpus_replay, fuzz_ioctls};
pub use fuzz_mmap::fuzz_mmaps;
pub use scale::{thousand_waiters_64_locks, thousand_waiters_one_lock, thousands_of_files};
pub use signals::signal_storm;
pub use storm::crash_storm;
pub use teardown::{
    dma_limits_per_card, module_reload, resets_under_load, unbind_rebind_under_load,
};

/// The lines of card `n`'s `smc/queue` that are files' messages (the
/// driver's own, `comm=kernel`, come and go by themselves): with no file
/// of the test open any more, there must be none.
pub fn smc_queue_left(n: u32) -> Result<Vec<String>, String> {
    let queue = sysfs(&format!("/sys/class/tenstorrent/tenstorrent!{n}/smc/queue"))?;
    Ok(queue
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("comm=kernel "))
        .map(|l| format!("card {n}: {l}"))
        .collect())
}

/// Both cards' firmware gets to its message queues `ms` after their
/// doorbell (the emulator's `arc-slow`) until this is dropped. A real
/// firmware takes its time too; with an emulated one that answers inside
/// the doorbell, an abandoned message's answer would always be there
/// before the next message is sent, and the driver's orphan accounting
/// (the answer of a message nobody waits for is dropped, not handed to
/// the next one) would never be needed.
///
/// Meanwhile the driver gives the firmware [`SLOW_FIRMWARE_DEADLINE_MS`]
/// to answer instead of its 1 s: the emulated firmware always answers, so
/// the deadline could only be missed when the emulator's thread is starved
/// on a loaded host (seen once: a crash storm at stress size with a load
/// average of 4.4 on two cores got ETIMEDOUT), a failure of timing, not of
/// the driver. smc/silent_firmware_times_out tests the deadline itself.
pub struct SlowFirmware {
    cards: Vec<crate::card::Control>,
    /// Put back to 1 s as they drop, after [`SlowFirmware`]'s `drop`.
    _deadlines: Vec<super::smc::Timeout>,
}

/// The driver's per-message deadline while [`SlowFirmware`] lives.
const SLOW_FIRMWARE_DEADLINE_MS: u32 = 60_000;

impl SlowFirmware {
    pub fn new(ms: u32) -> Result<SlowFirmware, String> {
        let mut cards = Vec::new();
        let mut deadlines = Vec::new();
        for n in 0..2u32 {
            deadlines.push(super::smc::Timeout::set(n, SLOW_FIRMWARE_DEADLINE_MS)?);
            let mut control = crate::card::Control::open(n as usize)?;
            control.command(&format!("arc-slow {ms}"))?;
            cards.push(control);
        }
        Ok(SlowFirmware {
            cards,
            _deadlines: deadlines,
        })
    }
}

impl Drop for SlowFirmware {
    fn drop(&mut self) {
        for control in &mut self.cards {
            let _ = control.command("arc-slow 0");
        }
    }
}

/// Whether `TT_RELIABILITY_SCALE=stress`.
pub fn stress_scale() -> bool {
    std::env::var("TT_RELIABILITY_SCALE").is_ok_and(|s| s == "stress")
}

/// `check` or `stress`, by the scale in force.
pub fn sized<T>(check: T, stress: T) -> T {
    if stress_scale() {
        stress
    } else {
        check
    }
}

/// Prints `# figure NAME=VALUE` (picked up by tools/stress).
pub fn figure(name: &str, value: impl std::fmt::Display) {
    println!("# figure {name}={value}");
    flush();
}

/// Seed of a suite's PRNG: `TT_FUZZ_SEED` if set (decimal or 0x hex), else
/// the clock. Printed so that a failing run can be repeated.
pub fn seed(what: &str) -> u64 {
    let from_env = std::env::var("TT_FUZZ_SEED").ok().and_then(|s| {
        let s = s.trim();
        match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => s.parse().ok(),
        }
    });
    let seed = from_env.unwrap_or_else(|| {
        now_ns() ^ (std::process::id() as u64).rotate_left(32) ^ 0x5eed_0000_0000_0000
    });
    println!("# {what}: seed {seed:#x} (repeat with TT_FUZZ_SEED={seed:#x})");
    flush();
    seed
}

/// Forks a child that runs `f` and `_exit`s with its return value (1 if it
/// panicked). In the child every descriptor from 3 up is closed except
/// those in `keep`, so no device file of the parent is shared by accident.
pub fn fork_child(keep: &[RawFd], f: impl FnOnce() -> i32) -> Result<libc::pid_t, String> {
    flush();
    // SAFETY: fork; the child only runs `f` and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid > 0 {
        return Ok(pid);
    }
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|&fd| fd >= 3).collect();
    keep.sort_unstable();
    let mut lo = 3u32;
    for fd in keep.into_iter().map(|fd| fd as u32).chain([u32::MAX]) {
        if fd > lo {
            // SAFETY: closing descriptors the child never uses.
            unsafe { libc::syscall(libc::SYS_close_range, lo, fd - 1, 0) };
        }
        lo = fd.saturating_add(1);
    }
    let code = catch_unwind(AssertUnwindSafe(f)).unwrap_or(1);
    flush();
    // SAFETY: leave the child without the parent's destructors.
    unsafe { libc::_exit(code) }
}

/// Non-blocking waitpid: `Some(status)` once `pid` has exited.
pub fn try_reap(pid: libc::pid_t) -> Option<libc::c_int> {
    let mut status = 0;
    // SAFETY: `status` is writable.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (rc == pid).then_some(status)
}

/// Waits for `pid` until `deadline`; `None` if it is still running then.
pub fn reap_until(pid: libc::pid_t, deadline: Instant) -> Option<libc::c_int> {
    loop {
        if let Some(s) = try_reap(pid) {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// SIGKILL and reap.
pub fn kill_reap(pid: libc::pid_t) -> libc::c_int {
    // SAFETY: killing our own, not yet reaped, child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    waitpid(pid, 0).unwrap_or(0)
}

/// State letter of /proc/PID/stat (`None` if the process is gone).
pub fn proc_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Lock problems found by [`check_all_free`].
pub struct Leftovers {
    /// Locks held, or with waiters, when nothing should be.
    pub lost: u64,
    /// Their description.
    pub report: Vec<String>,
}

/// Checks that every lock of each card in `cards` is free with no waiter,
/// through a fresh open (which holds nothing).
pub fn check_all_free(cards: &[u32]) -> Result<Leftovers, String> {
    let mut out = Leftovers {
        lost: 0,
        report: Vec::new(),
    };
    for &card in cards {
        let dev = open(card)?;
        for i in 0..abi::LOCK_COUNT {
            let q = query(&dev, i)?;
            if q.held || q.waiters != 0 || q.held_by_caller {
                out.lost += 1;
                out.report.push(format!(
                    "card {card} lock {i}: held {} by pid {} ({}), {} waiter(s)",
                    q.held, q.holder_pid, q.holder_comm, q.waiters
                ));
            }
        }
    }
    Ok(out)
}

/// The raw QUERY answers of every lock of a card.
pub fn snapshot(dev: &Device) -> Result<Vec<abi::LockQuery>, String> {
    (0..abi::LOCK_COUNT)
        .map(|i| query(dev, i).map(|q| q.raw))
        .collect()
}

/// Sum of `f` over the locks of two snapshots: after - before.
pub fn delta(
    before: &[abi::LockQuery],
    after: &[abi::LockQuery],
    f: fn(&abi::LockQuery) -> u64,
) -> u64 {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| f(a).wrapping_sub(f(b)))
        .sum()
}

/// Owner words in shared memory, one per (card, lock): a holder puts its id
/// there with a compare-and-swap after being granted and takes it out
/// before releasing, so two holders at once show up as a failed CAS.
pub struct Owners {
    shm: Shared,
}

impl Owners {
    /// Words for 2 cards x 64 locks.
    pub fn new() -> Result<Owners, String> {
        Ok(Owners {
            shm: Shared::new(2 * 64 * 4)?,
        })
    }

    fn word(&self, card: u32, lock: u32) -> &AtomicU32 {
        self.shm.u32((card * 64 + lock) as usize)
    }

    /// Claims `lock`: Err(other holder) if the word is not free.
    pub fn claim(&self, card: u32, lock: u32, me: u32) -> Result<(), u32> {
        self.word(card, lock)
            .compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst)
            .map(drop)
    }

    /// Replaces a dead holder's stale claim by ours.
    pub fn take_over(&self, card: u32, lock: u32, dead: u32, me: u32) -> Result<(), u32> {
        self.word(card, lock)
            .compare_exchange(dead, me, Ordering::SeqCst, Ordering::SeqCst)
            .map(drop)
    }

    /// The current holder's id.
    pub fn get(&self, card: u32, lock: u32) -> u32 {
        self.word(card, lock).load(Ordering::SeqCst)
    }

    /// Gives `lock` up: Err(other) if someone else's id is there.
    pub fn unclaim(&self, card: u32, lock: u32, me: u32) -> Result<(), u32> {
        self.word(card, lock)
            .compare_exchange(me, 0, Ordering::SeqCst, Ordering::SeqCst)
            .map(drop)
    }
}

/// A message slot in shared memory: the first problem a child saw.
pub struct FirstError {
    shm: Shared,
}

const MSG_LEN: usize = 4096;

impl FirstError {
    /// An empty slot.
    pub fn new() -> Result<FirstError, String> {
        Ok(FirstError {
            shm: Shared::new(MSG_LEN)?,
        })
    }

    /// Counts a problem and keeps the first message.
    pub fn report(&self, msg: &str) {
        let count = self.shm.u64(0).fetch_add(1, Ordering::SeqCst);
        if count == 0 {
            let bytes = msg.as_bytes();
            let n = bytes.len().min(MSG_LEN - 16);
            // SAFETY: within the mapping, past the two header words; only
            // the first reporter writes here.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), (self.shm.addr() + 16) as *mut u8, n)
            };
            self.shm.u64(1).store(n as u64, Ordering::SeqCst);
        }
    }

    /// Number of problems reported.
    pub fn count(&self) -> u64 {
        self.shm.u64(0).load(Ordering::SeqCst)
    }

    /// The first message (empty if none).
    pub fn first(&self) -> String {
        let n = self.shm.u64(1).load(Ordering::SeqCst) as usize;
        // SAFETY: the reporter wrote `n` bytes after the header.
        let b = unsafe { std::slice::from_raw_parts((self.shm.addr() + 16) as *const u8, n) };
        String::from_utf8_lossy(b).into_owned()
    }
}

/// A counter word in shared memory.
pub struct Counter(Shared);

impl Counter {
    /// A zero counter.
    pub fn new() -> Result<Counter, String> {
        Ok(Counter(Shared::new(64)?))
    }

    /// The word.
    pub fn get(&self) -> &AtomicU64 {
        self.0.u64(0)
    }
}

/// Raises RLIMIT_NOFILE (soft and hard) to at least `n`.
pub fn raise_nofile(n: u64) -> TestResult {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        if r.rlim_cur >= n && r.rlim_max >= n {
            return Ok(());
        }
        r.rlim_cur = r.rlim_cur.max(n);
        r.rlim_max = r.rlim_max.max(n);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
            return Err(format!(
                "setrlimit(RLIMIT_NOFILE, {n}): {}",
                io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Errno of an ioctl result (0 for success).
pub fn errno_of(r: &io::Result<i32>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

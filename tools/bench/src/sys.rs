//! Small system helpers: time, shared memory, processes, /proc.

use std::fs;
use std::io;
use std::ptr;

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds.
pub fn now_ns() -> u64 {
    tt_arbiter::Monotonic::now().as_nanos()
}

/// Sleeps for `ns` nanoseconds (restarted after signals).
pub fn sleep_ns(ns: u64) {
    let mut req = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        let mut rem = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: both timespecs are valid.
        if unsafe { libc::nanosleep(&req, &mut rem) } == 0 {
            return;
        }
        req = rem;
    }
}

/// Gives the CPU to another runnable task, if any.
pub fn yield_now() {
    // SAFETY: no arguments.
    unsafe { libc::sched_yield() };
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::gettid() }
}

/// Voluntary context switches of the calling process so far.
pub fn voluntary_switches() -> u64 {
    // SAFETY: an all-zero rusage is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0, "getrusage");
    ru.ru_nvcsw as u64
}

/// A zeroed `MAP_SHARED` anonymous mapping holding a `T`, shared with the
/// children forked after it was made. Never unmapped (the benchmark makes
/// a few of them).
pub fn shared<T>() -> &'static T {
    let len = std::mem::size_of::<T>().max(1);
    // SAFETY: a fresh anonymous mapping; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert!(
        p != libc::MAP_FAILED,
        "mmap: {}",
        io::Error::last_os_error()
    );
    // SAFETY: the mapping is zero-filled, large enough and aligned to a
    // page; T must be valid when all-zero (atomics and pthread_mutex_t,
    // which the callers initialise before use).
    unsafe { &*(p as *const T) }
}

/// Forks a child that runs `f` and exits with its status, without running
/// the parent's destructors or atexit handlers.
pub fn fork_child(f: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the benchmark forks only from its single-threaded main
    // process; the child runs `f` and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        let status = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
        // SAFETY: ends the child immediately.
        unsafe { libc::_exit(status) };
    }
    pid
}

/// Waits for every child of `pids`; panics if one failed.
pub fn wait_all(pids: &[libc::pid_t]) {
    for &pid in pids {
        let mut status = 0;
        // SAFETY: `status` is valid.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(rc, pid, "waitpid: {}", io::Error::last_os_error());
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child {pid} failed (wait status {status:#x})"
        );
    }
}

/// The scheduler state letter of task `tid` (`S` when asleep), from
/// `/proc/TID/stat`; `?` if it cannot be read.
pub fn task_state(tid: i32) -> u8 {
    let Ok(stat) = fs::read(format!("/proc/{tid}/stat")) else {
        return b'?';
    };
    // "pid (comm) S ...": the comm may contain anything, so take the last ')'.
    match stat.iter().rposition(|&b| b == b')') {
        Some(i) if i + 2 < stat.len() => stat[i + 2],
        _ => b'?',
    }
}

/// Whether every task of `tids` is asleep.
pub fn all_asleep(tids: impl IntoIterator<Item = i32>) -> bool {
    tids.into_iter().all(|t| task_state(t) == b'S')
}

/// Restricts the calling thread to CPU `cpu` (it migrates at once). A
/// failure (fewer CPUs) is ignored: the figures are then less clean, not
/// wrong.
pub fn pin(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is an empty set; sched_setaffinity
    // reads a valid set of the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Raises RLIMIT_NOFILE so that a thousand threads can each open a file.
pub fn raise_nofile(n: u64) {
    let lim = libc::rlimit {
        rlim_cur: n as libc::rlim_t,
        rlim_max: n as libc::rlim_t,
    };
    // SAFETY: `lim` is valid. Failure is tolerated (checked at open).
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
}

/// A pipe used as a start gun: children block reading it; closing the
/// write end wakes them all at once.
pub struct StartGun {
    rd: i32,
    wr: i32,
}

impl StartGun {
    /// A new pipe.
    pub fn new() -> StartGun {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for two descriptors.
        let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
        assert_eq!(rc, 0, "pipe: {}", io::Error::last_os_error());
        StartGun {
            rd: fds[0],
            wr: fds[1],
        }
    }

    /// In a child: waits for the gun.
    pub fn wait(&self) {
        // SAFETY: closing our copy of the write end, then reading into a
        // valid one-byte buffer.
        unsafe {
            libc::close(self.wr);
            let mut b = 0u8;
            while libc::read(self.rd, (&mut b as *mut u8).cast(), 1) < 0 {}
        }
    }

    /// In the parent: fires (and consumes) the gun.
    pub fn fire(self) {
        // SAFETY: our own descriptors.
        unsafe {
            libc::close(self.wr);
            libc::close(self.rd);
        }
    }
}

/// Sorted copy; `q`-quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 1.0), 100.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn own_state_is_running() {
        assert_eq!(task_state(gettid()), b'R');
    }
}

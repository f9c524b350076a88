//! Runs scenarios one by one, each in a forked child (its own process
//! group) with an alarm() watchdog, and prints TAP.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crate::util::{
    self, bdfs, describe_status, flush, is_bound, panic_message, Shared, TestResult,
};

/// One end-to-end scenario.
pub struct Scenario {
    /// `area/name`, what FILTER matches.
    pub name: &'static str,
    /// The test.
    pub run: fn() -> TestResult,
    /// Watchdog in seconds (a safety net for hangs, not a timing check).
    pub timeout_s: u32,
}

const REPORT_LEN: usize = 64 * 1024;

/// Which of the scenarios a run takes: the `index`-th (from 0) of every
/// `count`, so that `count` runs side by side share them, each a mix of
/// every area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: usize,
    count: usize,
}

impl Shard {
    /// Every scenario.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// `K/N`, 1 <= K <= N.
    pub fn parse(text: &str) -> Option<Shard> {
        let (k, n) = text.split_once('/')?;
        let (k, n) = (k.parse::<usize>().ok()?, n.parse::<usize>().ok()?);
        (1..=n).contains(&k).then(|| Shard {
            index: k - 1,
            count: n,
        })
    }

    /// Whether the shard takes the `index`-th (from 0) of the scenarios a
    /// filter selected.
    fn takes(self, index: usize) -> bool {
        index % self.count == self.index
    }
}

/// Runs the scenarios of `shard` whose name contains `filter`; returns
/// whether all passed.
pub fn run(scenarios: &[Scenario], filter: &str, shard: Shard) -> bool {
    let selected: Vec<&Scenario> = scenarios
        .iter()
        .filter(|s| s.name.contains(filter))
        .enumerate()
        .filter(|&(i, _)| shard.takes(i))
        .map(|(_, s)| s)
        .collect();
    println!("1..{}", selected.len());
    if selected.is_empty() {
        println!("# no scenario matches {filter:?}");
        return false;
    }
    let _ = bdfs(); // resolve the BDFs before any scenario unbinds a card
                    // Orphaned helpers of a scenario are re-parented to us, so we can reap them.
                    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut failed = 0;
    for (i, s) in selected.iter().enumerate() {
        let start = Instant::now();
        let result = run_one(s);
        let restored = restore_bindings();
        let n = i + 1;
        match result.and(restored) {
            Ok(()) => println!("ok {n} - {}", s.name),
            Err(msg) => {
                failed += 1;
                println!("not ok {n} - {}", s.name);
                for line in msg.lines() {
                    println!("# {line}");
                }
            }
        }
        let took = start.elapsed();
        if took > Duration::from_secs(2) {
            println!("# {} took {:.1} s", s.name, took.as_secs_f64());
        }
        flush();
    }
    println!("# summary: {} ok, {failed} not ok", selected.len() - failed);
    failed == 0
}

fn run_one(s: &Scenario) -> TestResult {
    let report = Shared::new(REPORT_LEN)?;
    flush();
    // SAFETY: fork; the child runs the scenario and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: plain syscalls in the child.
        unsafe {
            libc::setpgid(0, 0);
            libc::alarm(s.timeout_s);
        }
        let result = catch_unwind(AssertUnwindSafe(s.run))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(&p))));
        let code = match result {
            Ok(()) => 0,
            Err(msg) => {
                let bytes = msg.as_bytes();
                let n = bytes.len().min(REPORT_LEN - 8);
                report
                    .u64(0)
                    .store(n as u64, std::sync::atomic::Ordering::SeqCst);
                // SAFETY: within the mapping, after the length word.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), (report.addr() + 8) as *mut u8, n)
                };
                1
            }
        };
        flush();
        // SAFETY: leave the child without the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let status = util::waitpid(pid, 0);
    let cleanup = kill_leftovers(pid);
    let status = status?;
    let n = report.u64(0).load(std::sync::atomic::Ordering::SeqCst) as usize;
    // SAFETY: the child wrote `n` bytes after the length word.
    let msg = unsafe { std::slice::from_raw_parts((report.addr() + 8) as *const u8, n) };
    let msg = String::from_utf8_lossy(msg).into_owned();
    let result = if status == 0 {
        Ok(())
    } else if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM {
        Err(format!(
            "watchdog: no result within {} s (hang?)",
            s.timeout_s
        ))
    } else if !msg.is_empty() {
        Err(msg)
    } else {
        Err(format!("scenario process {}", describe_status(status)))
    };
    result.and(cleanup)
}

/// Kills and reaps what is left of the scenario's process group, so that
/// no helper still holds a lock when the next scenario starts.
fn kill_leftovers(pgid: libc::pid_t) -> TestResult {
    // SAFETY: signalling the process group we created.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: reaping our (adopted) children.
        let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if rc < 0 {
            return Ok(()); // ECHILD: all reaped
        }
        if rc == 0 {
            if start.elapsed() > Duration::from_secs(20) {
                return Err("helper processes of the scenario did not die after SIGKILL".into());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Rebinds a card a failed scenario left unbound.
fn restore_bindings() -> TestResult {
    let mut problems = Vec::new();
    for bdf in bdfs().iter().flatten() {
        if std::path::Path::new(&format!("/sys/bus/pci/devices/{bdf}")).exists() && !is_bound(bdf) {
            match util::sysfs_write(util::BIND, bdf) {
                Ok(()) => problems.push(format!("card {bdf} was left unbound (rebound it)")),
                Err(e) => problems.push(format!(
                    "card {bdf} was left unbound; rebinding failed: {e}"
                )),
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::Shard;

    #[test]
    fn shard_parses_k_of_n_and_nothing_else() {
        assert_eq!(Shard::parse("1/1"), Some(Shard::ALL));
        assert_eq!(Shard::parse("2/3"), Some(Shard { index: 1, count: 3 }));
        for bad in ["0/2", "3/2", "1/0", "1", "a/2", "1/2/3", "", "-1/2"] {
            assert_eq!(Shard::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn shards_take_every_scenario_once() {
        let n = 3;
        let mut taken = vec![0; 10];
        for k in 1..=n {
            let shard = Shard::parse(&format!("{k}/{n}")).unwrap();
            for (i, t) in taken.iter_mut().enumerate() {
                if shard.takes(i) {
                    *t += 1;
                }
            }
        }
        assert!(taken.iter().all(|&t| t == 1), "{taken:?}");
    }
}

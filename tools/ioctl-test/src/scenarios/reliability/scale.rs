//! Scale: a thousand waiters on one lock and over 64 locks (threads, each
//! with its own open file since ownership is per file), thousands of open
//! files.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tt_arbiter::abi;

use super::*;

/// Waiter threads of a chain: each, once granted, records its rank among
/// the grants of its lock, checks the lock's owner word, and releases.
struct Chain {
    /// Rank of waiter i among the grants of its lock (u32::MAX: none yet).
    rank: Vec<AtomicU32>,
    /// Grants so far, per lock.
    next: Vec<AtomicU32>,
    /// Owner word per lock: waiter index + 1.
    owner: Vec<AtomicU32>,
    granted: AtomicU64,
    errors: Mutex<Vec<String>>,
}

impl Chain {
    fn new(n: usize) -> Arc<Chain> {
        Arc::new(Chain {
            rank: (0..n).map(|_| AtomicU32::new(u32::MAX)).collect(),
            next: (0..64).map(|_| AtomicU32::new(0)).collect(),
            owner: (0..64).map(|_| AtomicU32::new(0)).collect(),
            granted: AtomicU64::new(0),
            errors: Mutex::new(Vec::new()),
        })
    }

    fn error(&self, e: String) {
        self.errors.lock().unwrap().push(e);
    }

    /// Starts waiter `i` on lock `index` of `card`.
    fn start(
        self: &Arc<Self>,
        card: u32,
        index: u32,
        i: usize,
    ) -> Result<std::thread::JoinHandle<()>, String> {
        let c = self.clone();
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                let dev = match open(card) {
                    Ok(d) => d,
                    Err(e) => return c.error(format!("waiter {i}: {e}")),
                };
                let (r, _) = acquire(&dev, index, 0, 0);
                if let Err(e) = r {
                    return c.error(format!(
                        "waiter {i}: blocking ACQUIRE: {}",
                        outcome::<()>(&Err(e))
                    ));
                }
                let me = i as u32 + 1;
                let l = index as usize;
                if let Err(other) =
                    c.owner[l].compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst)
                {
                    c.error(format!(
                        "lock {index}: waiter {i} granted while waiter {} holds it",
                        other - 1
                    ));
                }
                c.rank[i].store(c.next[l].fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
                c.granted.fetch_add(1, Ordering::SeqCst);
                if c.owner[l]
                    .compare_exchange(me, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
                {
                    c.error(format!(
                        "lock {index}: owner word changed while waiter {i} held it"
                    ));
                }
                if let Err(e) = release(&dev, bit(index)) {
                    c.error(format!("waiter {i}: RELEASE: {}", outcome::<()>(&Err(e))));
                }
            })
            .map_err(|e| format!("thread {i}: {e}"))
    }

    /// Waits (bounded) for `n` grants; returns how many there were.
    fn wait_granted(&self, n: u64, patience: Duration) -> u64 {
        let start = Instant::now();
        loop {
            let g = self.granted.load(Ordering::SeqCst);
            if g >= n || start.elapsed() > patience {
                return g;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// `n` waiters on `lock(i)` of `card`, queued one by one behind a holder
/// of `held`; released at once; each lock's waiters must be granted in
/// arrival order, with no spurious wake-up and no lost grant.
fn waiters(card: u32, n: usize, held: u64, lock: impl Fn(usize) -> u32, what: &str) -> TestResult {
    raise_nofile(n as u64 + 512)?;
    let holder = open(card)?;
    let before = snapshot(&holder)?;
    for i in 0..64 {
        if held & bit(i) != 0 {
            let q = &before[i as usize];
            ensure!(
                q.out_flags & abi::LOCK_QUERY_HELD == 0 && q.waiters == 0,
                "lock {i} busy at start: {q:?}"
            );
        }
    }
    expect_ok(
        acquire_set(&holder, held, abi::LOCK_NONBLOCK, 0).0,
        "holder ACQUIRE_SET",
    )?;
    let chain = Chain::new(n);
    let mut per_lock = [0u32; 64];
    let mut handles = Vec::new();
    let start = Instant::now();
    for i in 0..n {
        let l = lock(i);
        handles.push(chain.start(card, l, i)?);
        per_lock[l as usize] += 1;
        if let Err(e) = wait_waiters(&holder, l, per_lock[l as usize]) {
            let errs = chain.errors.lock().unwrap().join("\n");
            return Err(format!("queueing waiter {i}: {e}\n{errs}"));
        }
    }
    let queued_in = start.elapsed();
    let start = Instant::now();
    expect_ok(release(&holder, held), "holder RELEASE")?;
    let granted = chain.wait_granted(n as u64, PATIENCE * 2);
    let drained_in = start.elapsed();
    let lost = n as u64 - granted;
    if lost == 0 {
        for h in handles {
            let _ = h.join();
        }
    }
    let after = snapshot(&holder)?;
    println!(
        "# {what}: {n} waiters queued in {:.1} s, all granted in {:.2} s",
        queued_in.as_secs_f64(),
        drained_in.as_secs_f64()
    );
    let spurious = delta(&before, &after, |q| q.spurious_wakeups);
    figure("operations", 2 * n as u64 + 2);
    figure("lost_locks", lost);
    figure("spurious_wakeups", spurious);
    let mut problems: Vec<String> = chain.errors.lock().unwrap().clone();
    if lost != 0 {
        problems.push(format!(
            "{lost} of {n} waiters never granted within {:?}",
            PATIENCE * 2
        ));
    }
    let mut out_of_order = 0;
    let mut seen = [0u32; 64];
    for i in 0..n {
        let l = lock(i) as usize;
        let rank = chain.rank[i].load(Ordering::SeqCst);
        if rank != seen[l] && out_of_order < 10 {
            problems.push(format!(
                "lock {l}: waiter {i} (arrival {}) granted at rank {rank}",
                seen[l]
            ));
        }
        if rank != seen[l] {
            out_of_order += 1;
        }
        seen[l] += 1;
    }
    figure("fifo_violations", out_of_order);
    ensure!(spurious == 0, "spurious_wakeups +{spurious}");
    for l in 0..64usize {
        if held & bit(l as u32) == 0 {
            continue;
        }
        let (b, a) = (&before[l], &after[l]);
        let want = per_lock[l] as u64 + 1;
        if a.acquisitions - b.acquisitions != want
            || a.contended - b.contended != per_lock[l] as u64
        {
            problems.push(format!(
                "lock {l}: acquisitions +{}, contended +{}; expected +{want}, +{}",
                a.acquisitions - b.acquisitions,
                a.contended - b.contended,
                per_lock[l]
            ));
        }
        if a.out_flags & abi::LOCK_QUERY_HELD != 0 || a.waiters != 0 {
            problems.push(format!("lock {l} not free at the end: {a:?}"));
        }
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// 1000 waiters (250 in check size) on one lock, granted in FIFO order.
pub fn thousand_waiters_one_lock() -> TestResult {
    let n = sized(250, 1000);
    figure("scale_waiters_one_lock", n);
    waiters(0, n, bit(30), |_| 30, "one lock")
}

/// 1000 waiters (256) over all 64 locks, FIFO on each.
pub fn thousand_waiters_64_locks() -> TestResult {
    let n = sized(256, 1000);
    figure("scale_waiters_64_locks", n);
    waiters(1, n, u64::MAX, |i| (i % 64) as u32, "64 locks")
}

fn pids_of(card: u32) -> Result<Vec<u32>, String> {
    let path = format!("/proc/driver/tenstorrent/{card}/pids");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    text.lines()
        .map(|l| l.trim().parse().map_err(|e| format!("{path}: {l:?}: {e}")))
        .collect()
}

/// 5000 open files (1000 in check size) over both cards: procfs lists each;
/// only the first takes a lock; closing them all frees it.
pub fn thousands_of_files() -> TestResult {
    let n = sized(1000usize, 5000);
    raise_nofile(n as u64 + 512)?;
    let l = 7u32;
    let left = check_all_free(&[0, 1])?;
    ensure!(
        left.lost == 0,
        "locks not free at start:\n{}",
        left.report.join("\n")
    );
    let me = getpid();
    let base = [pids_of(0)?, pids_of(1)?].map(|p| p.iter().filter(|&&x| x == me).count());
    let died = [
        query(&open(0)?, l)?.raw.owner_died_count,
        query(&open(1)?, l)?.raw.owner_died_count,
    ];
    let mut files = Vec::with_capacity(n);
    let start = Instant::now();
    for k in 0..n {
        let card = (k % 2) as u32;
        let f = open(card).map_err(|e| format!("file {k}: {e}"))?;
        let (r, a) = acquire(&f, l, abi::LOCK_NONBLOCK, 0);
        if k < 2 {
            expect_ok(r, &format!("file {k}: first ACQUIRE of card {card}"))?;
        } else {
            expect_errno(r, libc::EBUSY, &format!("file {k}: ACQUIRE of a held lock"))?;
            ensure_eq!(a.holder_pid, me, "file {k}: holder_pid");
        }
        files.push(f);
    }
    let opened_in = start.elapsed();
    for card in 0..2u32 {
        let listed = pids_of(card)?.iter().filter(|&&x| x == me).count() - base[card as usize];
        ensure_eq!(
            listed,
            n / 2 + (n % 2) * (1 - card as usize),
            "our lines in /proc/driver/tenstorrent/{card}/pids"
        );
    }
    let start = Instant::now();
    drop(files);
    let closed_in = start.elapsed();
    for card in 0..2u32 {
        let listed = pids_of(card)?.iter().filter(|&&x| x == me).count();
        ensure_eq!(
            listed,
            base[card as usize],
            "our lines in /proc/driver/tenstorrent/{card}/pids after closing"
        );
        let d = open(card)?;
        let q = query(&d, l)?;
        ensure!(
            !q.held && q.waiters == 0,
            "card {card} lock {l} after closing: {q:?}"
        );
        ensure_eq!(
            q.raw.owner_died_count,
            died[card as usize] + 1,
            "card {card} lock {l} owner_died_count"
        );
    }
    println!(
        "# {n} files opened in {:.1} s, closed in {:.1} s",
        opened_in.as_secs_f64(),
        closed_in.as_secs_f64()
    );
    figure("open_files", n);
    figure("operations", 2 * n as u64);
    let left = check_all_free(&[0, 1])?;
    figure("lost_locks", left.lost);
    ensure!(
        left.lost == 0,
        "locks not free at the end:\n{}",
        left.report.join("\n")
    );
    Ok(())
}

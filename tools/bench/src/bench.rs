//! The measurements. Each runs its lock owners in forked children (or, for
//! the release cost, threads of one forked child), so the main process
//! stays single-threaded and owns no lock between measurements.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::thread;

use crate::mech::{self, Locker, Mech};
use crate::stats::{Hist, SharedHist};
use crate::sys::{self, now_ns};

/// Most samples one measurement keeps.
pub const MAX_SAMPLES: usize = 8192;
/// Most processes or threads one measurement uses.
pub const MAX_TASKS: usize = 1024 + 1;

/// State shared by the parent and the children of one measurement
/// (zeroed memory; a fresh one per measurement).
#[repr(C)]
struct Shm {
    stop: AtomicU32,
    ready: AtomicU32,
    in_cs: AtomicU32,
    violations: AtomicU32,
    holder: AtomicI32,
    waiting: [AtomicU32; 2],
    blocked: AtomicU32,
    t0: AtomicU64,
    nsamples: AtomicU64,
    samples: [AtomicU64; MAX_SAMPLES],
    counts: [AtomicU64; MAX_TASKS],
    wakeups: [AtomicU64; MAX_TASKS],
    contended: [AtomicU64; MAX_TASKS],
    tids: [AtomicI32; MAX_TASKS],
    /// Single waits: group 0 (pollers), group 1 (blocking waiters).
    waits: [SharedHist; 2],
}

impl Shm {
    fn new() -> &'static Shm {
        let shm = sys::shared::<Shm>();
        shm.holder.store(-1, SeqCst);
        shm
    }

    /// Mutual-exclusion check: entering the critical section.
    fn enter(&self) {
        if self.in_cs.swap(1, SeqCst) != 0 {
            self.violations.fetch_add(1, SeqCst);
        }
    }

    fn leave(&self) {
        self.in_cs.store(0, SeqCst);
    }

    /// Adds a sample; returns how many there are now.
    fn record(&self, v: u64) -> u64 {
        let n = self.nsamples.fetch_add(1, SeqCst);
        if (n as usize) < MAX_SAMPLES {
            self.samples[n as usize].store(v, SeqCst);
        }
        n + 1
    }

    fn samples(&self) -> Vec<f64> {
        let n = (self.nsamples.load(SeqCst) as usize).min(MAX_SAMPLES);
        let mut v: Vec<f64> = self.samples[..n]
            .iter()
            .map(|s| s.load(SeqCst) as f64)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    fn check(&self, what: &str) {
        let v = self.violations.load(SeqCst);
        assert_eq!(v, 0, "{what}: mutual exclusion violated {v} times");
    }

    fn tids(&self, n: usize) -> impl Iterator<Item = i32> + '_ {
        self.tids[..n].iter().map(|t| t.load(SeqCst))
    }
}

/// Median and 99th percentile, in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    pub median: f64,
    pub p99: f64,
    pub samples: usize,
}

impl Stat {
    fn of(sorted: &[f64]) -> Stat {
        Stat {
            median: sys::quantile(sorted, 0.5),
            p99: sys::quantile(sorted, 0.99),
            samples: sorted.len(),
        }
    }
}

/// Uncontended acquire+release pairs (one ENOTTY ioctl for the null
/// ioctl): `batches` batches of `per_batch` pairs, each batch timed as a
/// whole; median and p99 of the per-pair cost over batches.
pub fn uncontended(m: Mech, batches: usize, per_batch: usize) -> Stat {
    let l = Locker::open(m);
    for _ in 0..per_batch {
        l.lock();
        l.unlock();
    }
    let mut v = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t0 = now_ns();
        for _ in 0..per_batch {
            l.lock();
            l.unlock();
        }
        v.push((now_ns() - t0) as f64 / per_batch as f64);
    }
    v.sort_by(f64::total_cmp);
    Stat::of(&v)
}

/// Hand-off latency: two processes take turns. The holder waits until the
/// other is asleep in its acquire, records the time and releases; the
/// other records the time as soon as its acquire returns. The releaser
/// does not queue again until the other holds the lock (no barging).
///
/// `same_cpu`: both processes on CPU 0 (the waiter runs once the releaser
/// yields), otherwise the releaser and the waiter are on different CPUs.
///
/// Also returns the waiter's voluntary context switches per acquisition
/// (1.0 when it sleeps once; more when it sleeps again after its wake-up).
pub fn handoff(m: Mech, iters: u64, same_cpu: bool) -> (Stat, f64) {
    let shm = Shm::new();
    let pids: Vec<_> = (0..2)
        .map(|me| {
            sys::fork_child(move || {
                sys::pin(if same_cpu { 0 } else { me });
                handoff_child(m, shm, me, iters);
                0
            })
        })
        .collect();
    sys::wait_all(&pids);
    shm.check("hand-off");
    let switches = shm.wakeups[0].load(SeqCst) + shm.wakeups[1].load(SeqCst);
    let samples = shm.samples();
    let per = switches as f64 / shm.nsamples.load(SeqCst).max(1) as f64;
    (Stat::of(&samples), per)
}

fn handoff_child(m: Mech, shm: &Shm, me: usize, iters: u64) {
    let other = 1 - me;
    shm.tids[me].store(sys::gettid(), SeqCst);
    let l = Locker::open(m);
    let mut holding = me == 0;
    if holding {
        l.lock();
        shm.holder.store(0, SeqCst);
    } else {
        while shm.holder.load(SeqCst) != 0 {
            sys::yield_now();
        }
    }
    loop {
        if !holding {
            shm.waiting[me].store(1, SeqCst);
            let v0 = sys::voluntary_switches();
            l.lock();
            let t1 = now_ns();
            shm.wakeups[me].fetch_add(sys::voluntary_switches() - v0, SeqCst);
            shm.waiting[me].store(0, SeqCst);
            shm.enter();
            let n = shm.record(t1 - shm.t0.load(SeqCst));
            shm.holder.store(me as i32, SeqCst);
            if n >= iters || shm.stop.load(SeqCst) != 0 {
                shm.stop.store(1, SeqCst);
                shm.leave();
                l.unlock();
                return;
            }
            shm.leave();
        }
        holding = false;
        // The other must be asleep in its acquire before we release.
        while !(shm.waiting[other].load(SeqCst) == 1
            && sys::task_state(shm.tids[other].load(SeqCst)) == b'S')
        {
            sys::yield_now();
        }
        shm.t0.store(now_ns(), SeqCst);
        l.unlock();
        while shm.holder.load(SeqCst) != other as i32 {
            if shm.stop.load(SeqCst) != 0 {
                return;
            }
            sys::yield_now();
        }
    }
}

/// Acquisitions per second of a group of processes and its fairness:
/// min/max acquisitions per process over the measured second.
#[derive(Clone, Debug)]
pub struct Throughput {
    pub per_sec: f64,
    pub min: u64,
    pub max: u64,
    pub fairness: f64,
}

impl Throughput {
    /// From each process's acquisitions over `ns` nanoseconds.
    pub fn of(counts: &[u64], ns: u64) -> Throughput {
        let total: u64 = counts.iter().sum();
        let min = counts.iter().copied().min().unwrap_or(0);
        let max = counts.iter().copied().max().unwrap_or(0);
        Throughput::new(total as f64 * 1e9 / ns.max(1) as f64, min, max)
    }

    /// `per_sec` overall, the least and the most one process did; fairness
    /// is their ratio (0 when nobody did anything).
    pub fn new(per_sec: f64, min: u64, max: u64) -> Throughput {
        Throughput {
            per_sec,
            min,
            max,
            fairness: if max == 0 {
                0.0
            } else {
                min as f64 / max as f64
            },
        }
    }
}

/// Throughput of `procs` processes hammering one lock for `dur_ns` (no
/// clock read in the loop).
pub fn throughput(m: Mech, procs: usize, dur_ns: u64) -> Throughput {
    let roles = vec![Role::blocking(m); procs];
    let c = contend(&roles, dur_ns, None, "throughput");
    Throughput::of(&c.counts, c.ns)
}

/// How one process of a contention measurement takes the lock.
#[derive(Clone, Copy, Debug)]
pub struct Role {
    pub mech: Mech,
    /// A try every 1 ms until it succeeds (UMD's KmdMutex on LOCK_CTL),
    /// instead of [`Locker::lock`].
    pub polls: bool,
}

impl Role {
    pub fn blocking(mech: Mech) -> Role {
        Role { mech, polls: false }
    }

    pub fn polling(mech: Mech) -> Role {
        Role { mech, polls: true }
    }

    /// Pollers are group 0, blocking waiters group 1 (for [`Mech::Poll`],
    /// whose lock() is itself the polling loop, 0 too).
    fn group(self) -> usize {
        if self.polls || self.mech == Mech::Poll {
            0
        } else {
            1
        }
    }

    fn take(self, l: &Locker) {
        if self.polls {
            while !l.try_lock() {
                sys::sleep_ns(1_000_000);
            }
        } else {
            l.lock();
        }
    }
}

/// One mechanism under contention with a critical section of a given
/// length (empty or 50 µs): throughput, fairness, every single wait (from
/// the call that starts taking the lock to its return with the lock) and
/// the gap from a release to another process's return with the lock.
#[derive(Clone, Debug)]
pub struct Busy {
    pub per_sec: f64,
    pub min: u64,
    pub max: u64,
    pub fairness: f64,
    pub gap: Stat,
    pub wait: Hist,
}

/// `procs` processes taking `m`'s lock in turn, each holding it busy for
/// `cs_ns` (0: an empty critical section, only the clock reads around the
/// acquire), for `dur_ns` after a warm-up.
pub fn busy(m: Mech, procs: usize, dur_ns: u64, cs_ns: u64) -> Busy {
    let roles = vec![Role::blocking(m); procs];
    let c = contend(&roles, dur_ns, Some(cs_ns), "contended");
    let tp = Throughput::of(&c.counts, c.ns);
    let mut wait = c.waits[0].clone();
    wait.merge(&c.waits[1]);
    Busy {
        per_sec: tp.per_sec,
        min: tp.min,
        max: tp.max,
        fairness: tp.fairness,
        gap: c.gap,
        wait,
    }
}

/// Pollers and blocking waiters on one lock ([`mixed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// LOCK_CTL tries every 1 ms and LOCK_CTL ACQUIRE_BLOCKING (both
    /// drivers).
    LockCtl,
    /// LOCK_CTL tries every 1 ms and this driver's LOCK_ACQUIRE.
    Acquire,
    /// flock(LOCK_EX | LOCK_NB) every 1 ms and flock(LOCK_EX).
    Flock,
}

impl Mix {
    pub const ALL: [Mix; 3] = [Mix::LockCtl, Mix::Acquire, Mix::Flock];

    pub fn name(self) -> &'static str {
        match self {
            Mix::LockCtl => "lock_ctl",
            Mix::Acquire => "acquire",
            Mix::Flock => "flock",
        }
    }

    pub fn from_name(n: &str) -> Option<Mix> {
        Mix::ALL.into_iter().find(|m| m.name() == n)
    }

    /// What the pollers and the blocking waiters use.
    pub fn roles(self) -> (Role, Role) {
        match self {
            Mix::LockCtl => (Role::polling(Mech::LockCtl), Role::blocking(Mech::LockCtl)),
            Mix::Acquire => (Role::polling(Mech::LockCtl), Role::blocking(Mech::Acquire)),
            Mix::Flock => (Role::polling(Mech::Flock), Role::blocking(Mech::Flock)),
        }
    }

    pub fn needs_device(self) -> bool {
        self != Mix::Flock
    }

    /// tt-kmd has LOCK_CTL only; flock does not depend on the driver.
    pub fn runs_on_ttkmd(self) -> bool {
        self == Mix::LockCtl
    }
}

/// One group (pollers or blocking waiters) of a [`mixed`] measurement.
#[derive(Clone, Debug)]
pub struct Group {
    pub procs: usize,
    pub tp: Throughput,
    pub wait: Hist,
}

/// Pollers and blocking waiters on one lock: each group's throughput,
/// fairness and waits, and the fairness over every process.
#[derive(Clone, Debug)]
pub struct Mixed {
    pub per_sec: f64,
    pub fairness: f64,
    pub pollers: Group,
    pub blockers: Group,
}

/// `procs` processes on one lock, half of them polling (the first half),
/// half blocking, each holding the lock `cs_ns`.
pub fn mixed(kind: Mix, procs: usize, dur_ns: u64, cs_ns: u64) -> Mixed {
    let (p, b) = kind.roles();
    let npoll = procs / 2;
    let roles: Vec<Role> = (0..procs).map(|i| if i < npoll { p } else { b }).collect();
    let c = contend(&roles, dur_ns, Some(cs_ns), "mixed");
    let all = Throughput::of(&c.counts, c.ns);
    let group = |g: usize, range: std::ops::Range<usize>| Group {
        procs: range.len(),
        tp: Throughput::of(&c.counts[range], c.ns),
        wait: c.waits[g].clone(),
    };
    Mixed {
        per_sec: all.per_sec,
        fairness: all.fairness,
        pollers: group(0, 0..npoll),
        blockers: group(1, npoll..procs),
    }
}

/// What [`contend`] measured.
struct Contention {
    /// Acquisitions per process over the measured interval.
    counts: Vec<u64>,
    /// Its length.
    ns: u64,
    gap: Stat,
    /// Single waits of group 0 (pollers) and 1 (blocking waiters).
    waits: [Hist; 2],
}

/// One process per role taking one lock in turn for `dur_ns` after a
/// warm-up, each holding it busy for `cs_ns` (with a mutual-exclusion
/// check). With `cs_ns` given, every acquisition is timed (the wait, and
/// the gap from a release to another process's return from its acquire);
/// without, no clock is read in the loop.
fn contend(roles: &[Role], dur_ns: u64, cs_ns: Option<u64>, what: &str) -> Contention {
    let procs = roles.len();
    let shm = Shm::new();
    let gun = sys::StartGun::new();
    // t0: when the last holder released (0: nobody yet); holder: which;
    // waiting[0]: set while measuring.
    shm.t0.store(0, SeqCst);
    let pids: Vec<_> = roles
        .iter()
        .enumerate()
        .map(|(i, &role)| {
            let gun = &gun;
            sys::fork_child(move || {
                let l = Locker::open(role.mech);
                let hist = &shm.waits[role.group()];
                shm.ready.fetch_add(1, SeqCst);
                gun.wait();
                loop {
                    let start = if cs_ns.is_some() { now_ns() } else { 0 };
                    role.take(&l);
                    if shm.stop.load(SeqCst) != 0 {
                        l.unlock();
                        break;
                    }
                    shm.enter();
                    if let Some(cs) = cs_ns {
                        let now = now_ns();
                        let released = shm.t0.load(SeqCst);
                        // A hand-off to another process, not a re-take.
                        let releaser = shm.holder.load(SeqCst);
                        let handed = releaser >= 0 && releaser != i as i32;
                        let measuring = shm.waiting[0].load(SeqCst) != 0;
                        if measuring {
                            hist.record(now - start);
                            if released != 0 && handed {
                                shm.record(now - released);
                            }
                        }
                        while now_ns() < now + cs {
                            std::hint::spin_loop();
                        }
                    }
                    shm.counts[i].fetch_add(1, SeqCst);
                    shm.leave();
                    if cs_ns.is_some() {
                        shm.holder.store(i as i32, SeqCst);
                        shm.t0.store(now_ns(), SeqCst);
                    }
                    l.unlock();
                }
                0
            })
        })
        .collect();
    while shm.ready.load(SeqCst) < procs as u32 {
        sys::sleep_ns(1_000_000);
    }
    gun.fire();
    // Counted from a snapshot after a warm-up, so that the first processes
    // to run, alone on a free lock, do not skew the figures.
    let snapshot = || -> Vec<u64> { (0..procs).map(|i| shm.counts[i].load(SeqCst)).collect() };
    sys::sleep_ns(dur_ns / 4);
    shm.waiting[0].store(1, SeqCst);
    let (c0, t0) = (snapshot(), now_ns());
    sys::sleep_ns(dur_ns);
    let (c1, t1) = (snapshot(), now_ns());
    shm.waiting[0].store(0, SeqCst);
    shm.stop.store(1, SeqCst);
    sys::wait_all(&pids);
    shm.check(what);
    let gaps = shm.samples();
    Contention {
        counts: c1.iter().zip(&c0).map(|(a, b)| a - b).collect(),
        ns: t1 - t0,
        gap: Stat::of(&gaps),
        waits: [shm.waits[0].snapshot(), shm.waits[1].snapshot()],
    }
}

/// Thundering herd: `waiters` processes asleep on one lock held by the
/// parent; each takes it `rounds` times (release, queue again).
#[derive(Clone, Debug)]
pub struct Herd {
    /// Wake-ups per release that handed the lock to a sleeper.
    pub per_release: f64,
    /// Sum of the waiters' voluntary context switches in their acquires.
    pub ctx_wakeups: u64,
    /// Acquisitions that slept at least once (= releases that woke a
    /// sleeper), by context switches.
    pub ctx_contended: u64,
    /// The driver's counters over the run: contended grants, spurious
    /// wake-ups (this driver only).
    pub driver: Option<(u64, u64)>,
    pub releases: u64,
}

pub fn herd(m: Mech, waiters: usize, rounds: u64) -> Herd {
    let shm = Shm::new();
    let holder = Locker::open(m);
    holder.lock();
    let before = m.is_driver_queue().then(|| holder.query());
    let pids: Vec<_> = (0..waiters)
        .map(|i| {
            sys::fork_child(move || {
                let l = Locker::open(m);
                shm.tids[i].store(sys::gettid(), SeqCst);
                shm.ready.fetch_add(1, SeqCst);
                for _ in 0..rounds {
                    shm.blocked.fetch_add(1, SeqCst);
                    let v0 = sys::voluntary_switches();
                    l.lock();
                    let v1 = sys::voluntary_switches();
                    shm.blocked.fetch_sub(1, SeqCst);
                    shm.enter();
                    shm.wakeups[i].fetch_add(v1 - v0, SeqCst);
                    if v1 > v0 {
                        shm.contended[i].fetch_add(1, SeqCst);
                    }
                    shm.leave();
                    l.unlock();
                }
                0
            })
        })
        .collect();
    loop {
        let all_in =
            shm.ready.load(SeqCst) == waiters as u32 && shm.blocked.load(SeqCst) == waiters as u32;
        let asleep = all_in
            && match m {
                Mech::LockCtl | Mech::Acquire => holder.query().waiters == waiters as u32,
                Mech::Poll => true,
                _ => sys::all_asleep(shm.tids(waiters)),
            };
        if asleep {
            break;
        }
        sys::sleep_ns(1_000_000);
    }
    if m == Mech::Poll {
        sys::sleep_ns(20_000_000);
    }
    holder.unlock();
    sys::wait_all(&pids);
    shm.check("herd");
    let ctx_wakeups: u64 = (0..waiters).map(|i| shm.wakeups[i].load(SeqCst)).sum();
    let ctx_contended: u64 = (0..waiters).map(|i| shm.contended[i].load(SeqCst)).sum();
    let driver = before.map(|b| {
        let a = holder.query();
        (
            a.contended - b.contended,
            a.spurious_wakeups - b.spurious_wakeups,
        )
    });
    let per_release = match driver {
        Some((contended, spurious)) => (contended + spurious) as f64 / contended as f64,
        None => ctx_wakeups as f64 / ctx_contended as f64,
    };
    Herd {
        per_release,
        ctx_wakeups,
        ctx_contended,
        driver,
        releases: 1 + waiters as u64 * rounds,
    }
}

/// Cost of the release call with `n` waiters asleep on the lock: `n + 1`
/// threads of one process, each with its own owner, take turns; the holder
/// waits until the `n` others are asleep in their acquire, then times its
/// release and queues again.
pub fn release_cost(m: Mech, n: usize, samples: u64) -> Stat {
    let shm = Shm::new();
    let pid = sys::fork_child(move || {
        release_child(m, shm, n, samples);
        0
    });
    sys::wait_all(&[pid]);
    shm.check("release cost");
    Stat::of(&shm.samples())
}

fn release_child(m: Mech, shm: &'static Shm, n: usize, samples: u64) {
    let spawn = |k: usize| {
        thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || release_thread(m, shm, n, samples, k))
            .expect("spawn")
    };
    let mut threads = vec![spawn(0)];
    while shm.holder.load(SeqCst) != 0 {
        sys::yield_now();
    }
    threads.extend((1..=n).map(spawn));
    for t in threads {
        t.join().expect("release-cost thread panicked");
    }
}

fn release_thread(m: Mech, shm: &Shm, n: usize, samples: u64, k: usize) {
    // Sleepers on CPU 1, the releaser on CPU 0: a woken waiter cannot
    // preempt the release being timed, which then measures the call itself
    // (including sending the wake-ups), not the scheduling that follows.
    sys::pin(1);
    let l = Locker::open(m);
    shm.tids[k].store(sys::gettid(), SeqCst);
    let mut holding = k == 0;
    if holding {
        l.lock();
        shm.holder.store(0, SeqCst);
    }
    let me = sys::gettid();
    loop {
        if !holding {
            shm.blocked.fetch_add(1, SeqCst);
            l.lock();
            shm.blocked.fetch_sub(1, SeqCst);
            if shm.stop.load(SeqCst) != 0 {
                l.unlock();
                return;
            }
        }
        holding = false;
        sys::pin(0);
        shm.enter();
        loop {
            if shm.blocked.load(SeqCst) == n as u32
                && match m {
                    Mech::LockCtl | Mech::Acquire => l.query().waiters == n as u32,
                    Mech::Poll => true,
                    _ => sys::all_asleep(shm.tids(n + 1).filter(|&t| t != me)),
                }
            {
                break;
            }
            if shm.blocked.load(SeqCst) == n as u32 {
                sys::sleep_ns(200_000);
            } else {
                sys::yield_now();
            }
        }
        let last = shm.nsamples.load(SeqCst) + 1 >= samples;
        if last {
            shm.stop.store(1, SeqCst);
        }
        shm.leave();
        let t0 = now_ns();
        l.unlock();
        let t1 = now_ns();
        shm.record(t1 - t0);
        if last {
            return;
        }
        sys::pin(1);
    }
}

/// Times `n` calls of `op` one by one, each between `before` and `after`
/// (unmeasured), after a tenth as many unmeasured calls.
fn time_each(
    n: usize,
    mut before: impl FnMut(),
    mut op: impl FnMut(),
    mut after: impl FnMut(),
) -> Stat {
    let mut v = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        before();
        let t0 = now_ns();
        op();
        let t1 = now_ns();
        after();
        if i >= n / 10 {
            v.push((t1 - t0) as f64);
        }
    }
    v.sort_by(f64::total_cmp);
    Stat::of(&v)
}

fn ioctl<T>(fd: i32, cmd: u32, arg: &mut T) -> i32 {
    // SAFETY: `arg` is the struct `cmd` expects (or /dev/null ignores it).
    unsafe { libc::ioctl(fd, cmd as _, arg as *mut T) }
}

/// Cost of single calls, each timed on its own (median/p99 of `n`), to
/// take the uncontended pair apart: what the ioctl entry, the driver's
/// dispatch, the card mutex and the arbiter each add.
pub fn breakdown(n: usize, device: bool) -> Vec<(&'static str, Stat)> {
    let nop = || {};
    let mut out = Vec::new();
    out.push((
        "clock_gettime (timer overhead)",
        time_each(n, nop, nop, nop),
    ));
    let null = Locker::open(Mech::Null);
    out.push((
        "null ioctl (ENOTTY)",
        time_each(n, nop, || null.lock(), nop),
    ));
    if device {
        use tt_arbiter::abi::{self, Extensible};
        let l = Locker::open(Mech::Acquire);
        let fd = l.fd();
        let idx = l.index();
        out.push((
            "GET_DRIVER_INFO",
            time_each(
                n,
                nop,
                || {
                    let mut a = abi::GetDriverInfo::default();
                    a.input.output_size_bytes = size_of::<abi::GetDriverInfoOut>() as u32;
                    assert_eq!(ioctl(fd, abi::IOCTL_GET_DRIVER_INFO, &mut a), 0);
                },
                nop,
            ),
        ));
        out.push((
            "LOCK_CTL TEST",
            time_each(
                n,
                nop,
                || {
                    l.ctl(abi::LOCK_CTL_TEST);
                },
                nop,
            ),
        ));
        out.push((
            "QUERY",
            time_each(
                n,
                nop,
                || {
                    let mut q = abi::LockQuery::new();
                    q.index = idx;
                    assert_eq!(ioctl(fd, abi::IOCTL_LOCK_QUERY, &mut q), 0);
                },
                nop,
            ),
        ));
        let ctl_acq = || assert_eq!(l.ctl(abi::LOCK_CTL_ACQUIRE), 1);
        let ctl_rel = || assert_eq!(l.ctl(abi::LOCK_CTL_RELEASE), 1);
        out.push((
            "LOCK_CTL ACQUIRE (try, free)",
            time_each(n, nop, ctl_acq, ctl_rel),
        ));
        out.push(("LOCK_CTL RELEASE", time_each(n, ctl_acq, ctl_rel, nop)));
        out.push((
            "ACQUIRE (free)",
            time_each(n, nop, || l.lock(), || l.unlock()),
        ));
        out.push(("RELEASE", time_each(n, || l.lock(), || l.unlock(), nop)));
        let other = Locker::open(Mech::Acquire);
        other.lock();
        out.push((
            "ACQUIRE NONBLOCK (held elsewhere: EBUSY)",
            time_each(
                n,
                nop,
                || {
                    let mut a = abi::LockAcquire::new();
                    a.index = idx;
                    a.flags = abi::LOCK_NONBLOCK;
                    assert_eq!(ioctl(fd, abi::IOCTL_LOCK_ACQUIRE, &mut a), -1);
                },
                nop,
            ),
        ));
        other.unlock();
        out.extend(window_calls(n, fd));
    }
    let f = Locker::open(Mech::Flock);
    out.push((
        "flock LOCK_EX (free)",
        time_each(n, nop, || f.lock(), || f.unlock()),
    ));
    out.push((
        "flock LOCK_UN",
        time_each(n, || f.lock(), || f.unlock(), nop),
    ));
    out
}

/// The window path of card `fd` (the bench's Wormhole): CONFIGURE_TLB of a
/// 1 MiB window, and a 4-byte read through its UC mapping (trapped MMIO
/// on the emulator, so a figure of this setup, not of a card).
fn window_calls(n: usize, fd: i32) -> Vec<(&'static str, Stat)> {
    use tt_arbiter::abi;
    let nop = || {};
    let mut a = abi::AllocateTlb::default();
    a.input.size = 1 << 20;
    assert_eq!(
        ioctl(fd, abi::IOCTL_ALLOCATE_TLB, &mut a),
        0,
        "ALLOCATE_TLB"
    );
    let window = a.output;
    let mut c = abi::ConfigureTlb::default();
    c.input.id = window.id;
    // Tensix (1, 2)'s L1 on NOC 0.
    c.input.config.x_end = 1;
    c.input.config.y_end = 2;
    let mut out = vec![(
        "CONFIGURE_TLB (1 MiB window)",
        time_each(
            n,
            nop,
            || assert_eq!(ioctl(fd, abi::IOCTL_CONFIGURE_TLB, &mut c), 0),
            nop,
        ),
    )];
    // SAFETY: a new shared mapping of the window, unmapped below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            window.mmap_offset_uc as libc::off_t,
        )
    };
    assert_ne!(base, libc::MAP_FAILED, "mmap of the window");
    let word = base.cast::<u32>();
    out.push((
        "4-byte read through a window (UC, emulated card)",
        time_each(
            n.min(2000),
            nop,
            || {
                // SAFETY: the first word of the mapped page.
                std::hint::black_box(unsafe { word.read_volatile() });
            },
            nop,
        ),
    ));
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(base, 4096) };
    let mut f = abi::FreeTlb::default();
    f.input.id = window.id;
    assert_eq!(ioctl(fd, abi::IOCTL_FREE_TLB, &mut f), 0, "FREE_TLB");
    out
}

/// Checks that the lock works at all for `m` (and leaves it free; with
/// `query`, as the driver's QUERY of the lock says: tt-kmd has none).
pub fn smoke(m: Mech, query: bool) {
    let l = Locker::open(m);
    l.lock();
    l.unlock();
    if query && m.is_driver_queue() {
        let q = mech::query();
        assert_eq!(q.waiters, 0, "{}: waiters left on the lock", m.name());
    }
}

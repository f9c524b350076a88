//! Results: markdown tables with ratios to flock, the targets, JSON.

use std::fmt::Write as _;
use std::fs;

use crate::bench::{Busy, Group, Herd, Mix, Mixed, Stat, Throughput};
use crate::mech::Mech;
use crate::smc::{Pattern, Smc};
use crate::stats::Hist;
use crate::tables::{busy_entry, mixed_json, smc_json};

/// Lines around the JSON on stdout, for the host to cut it out.
pub const JSON_BEGIN: &str = "---- tt-bench json begin ----";
pub const JSON_END: &str = "---- tt-bench json end ----";

/// Where and how the benchmark ran.
pub struct Setup {
    pairs: Vec<(&'static str, String)>,
}

fn read_trim(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Setup {
    pub fn collect(quick: bool) -> Setup {
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_default();
        // SAFETY: sysconf has no memory effects.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let env = |k: &str| std::env::var(k).unwrap_or_default();
        Setup {
            pairs: vec![
                ("date", env("TT_BENCH_DATE")),
                ("host_cpu", env("TT_BENCH_HOST_CPU")),
                ("host_load_at_start", env("TT_BENCH_HOST_LOAD")),
                ("vm", env("TT_BENCH_VM")),
                ("kernel", read_trim("/proc/sys/kernel/osrelease")),
                ("kernel_version", read_trim("/proc/sys/kernel/version")),
                ("vcpus", cpus.to_string()),
                ("vm_cpu", cpu),
                (
                    "clocksource",
                    read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
                ),
                (
                    "module_version",
                    read_trim("/sys/module/tenstorrent/version"),
                ),
                ("quick", quick.to_string()),
            ],
        }
    }

    /// A setup with only these pairs (tests).
    #[cfg(test)]
    pub fn with(pairs: &[(&'static str, &str)]) -> Setup {
        Setup {
            pairs: pairs.iter().map(|&(k, v)| (k, v.to_string())).collect(),
        }
    }

    pub fn get(&self, k: &str) -> &str {
        self.pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// Everything measured in one run.
pub struct Results {
    pub setup: Setup,
    pub uncontended: Vec<(Mech, Stat)>,
    pub handoff: Vec<(Mech, Stat)>,
    pub handoff_same: Vec<(Mech, Stat)>,
    /// The waiter's voluntary context switches per acquisition.
    pub handoff_switches: Vec<(Mech, f64)>,
    pub handoff_same_switches: Vec<(Mech, f64)>,
    pub throughput: Vec<(Mech, Vec<(usize, Throughput)>)>,
    pub herd: Vec<(Mech, Herd)>,
    pub release: Vec<(Mech, Vec<(usize, Stat)>)>,
    pub breakdown: Vec<(&'static str, Stat)>,
    /// A 50 µs critical section, by process count.
    pub busy: Vec<(Mech, Vec<(usize, Busy)>)>,
    /// An empty critical section, every wait timed, by process count.
    pub empty: Vec<(Mech, Vec<(usize, Busy)>)>,
    /// Pollers and blocking waiters on one lock (50 µs held).
    pub mixed: Vec<(Mix, Vec<(usize, Mixed)>)>,
    /// SMC_MSG round trips, by number of files posting.
    pub smc: Vec<(Pattern, Vec<(usize, Smc)>)>,
    /// Why SMC_MSG was not measured, if it was not; and on which device.
    pub smc_note: Option<String>,
    pub smc_device: String,
    /// The same workloads on tt-kmd, measured in the same boot.
    pub ttkmd: Option<Baseline>,
}

/// What tt-bench measured on tt-kmd (`--baseline-out`), read back by the
/// run on this driver (`--ttkmd`): the workloads tt-kmd's LOCK_CTL can run
/// (a try, polled every 1 ms, as UMD's KmdMutex does, and
/// ACQUIRE_BLOCKING), SMC_MSG when it has it, and flock as the yardstick
/// both runs share. One line per figure (HIST: [`Hist::to_word`]):
/// - `version VERSION` (the module's)
/// - `uncontended|handoff MECH MEDIAN P99 SAMPLES`
/// - `busy|empty MECH PROCS PER_SEC MIN MAX GAP_MEDIAN GAP_P99 GAP_SAMPLES HIST`
/// - `mixed KIND PROCS` then, for the pollers and the blocking waiters,
///   `PROCS PER_SEC MIN MAX HIST`
/// - `smc PATTERN FILES PER_SEC MIN MAX ERRORS HIST`
/// - `smc-note TEXT` (why SMC_MSG was not measured)
#[derive(Default)]
pub struct Baseline {
    pub version: String,
    pub uncontended: Vec<(Mech, Stat)>,
    pub handoff: Vec<(Mech, Stat)>,
    pub busy: Vec<(Mech, Vec<(usize, Busy)>)>,
    pub empty: Vec<(Mech, Vec<(usize, Busy)>)>,
    pub mixed: Vec<(Mix, Vec<(usize, Mixed)>)>,
    pub smc: Vec<(Pattern, Vec<(usize, Smc)>)>,
    pub smc_note: Option<String>,
}

/// Appends `x` to `key`'s list in `v`.
fn push_to<K: PartialEq + Copy, T>(v: &mut Vec<(K, Vec<(usize, T)>)>, key: K, n: usize, x: T) {
    match v.iter_mut().find(|(k, _)| *k == key) {
        Some((_, l)) => l.push((n, x)),
        None => v.push((key, vec![(n, x)])),
    }
}

impl Baseline {
    /// The baseline lines of `r`.
    pub fn text(r: &Results) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "version {}", r.setup.get("module_version"));
        for (kind, v) in [("uncontended", &r.uncontended), ("handoff", &r.handoff)] {
            for (m, st) in v {
                let _ = writeln!(
                    out,
                    "{kind} {} {} {} {}",
                    m.name(),
                    st.median,
                    st.p99,
                    st.samples
                );
            }
        }
        for (kind, v) in [("busy", &r.busy), ("empty", &r.empty)] {
            for (m, v) in v {
                for (p, b) in v {
                    let _ = writeln!(
                        out,
                        "{kind} {} {p} {} {} {} {} {} {} {}",
                        m.name(),
                        b.per_sec,
                        b.min,
                        b.max,
                        b.gap.median,
                        b.gap.p99,
                        b.gap.samples,
                        b.wait.to_word()
                    );
                }
            }
        }
        for (k, v) in &r.mixed {
            for (p, x) in v {
                let g = |g: &Group| {
                    format!(
                        "{} {} {} {} {}",
                        g.procs,
                        g.tp.per_sec,
                        g.tp.min,
                        g.tp.max,
                        g.wait.to_word()
                    )
                };
                let _ = writeln!(
                    out,
                    "mixed {} {p} {} {}",
                    k.name(),
                    g(&x.pollers),
                    g(&x.blockers)
                );
            }
        }
        for (pat, v) in &r.smc {
            for (n, x) in v {
                let _ = writeln!(
                    out,
                    "smc {} {n} {} {} {} {} {}",
                    pat.name(),
                    x.tp.per_sec,
                    x.tp.min,
                    x.tp.max,
                    x.errors,
                    x.rtt.to_word()
                );
            }
        }
        if let Some(note) = &r.smc_note {
            let _ = writeln!(out, "smc-note {note}");
        }
        out
    }

    /// Parses [`Baseline::text`]'s lines.
    pub fn parse(text: &str) -> Result<Baseline, String> {
        let mut b = Baseline::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("baseline line {line:?}");
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).ok_or_else(bad);
            let int = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).ok_or_else(bad);
            let hist = |i: usize| f.get(i).and_then(|w| Hist::from_word(w)).ok_or_else(bad);
            let mech = || f.get(1).and_then(|n| Mech::from_name(n)).ok_or_else(bad);
            match (f[0], f.len()) {
                ("version", _) => b.version = line["version".len()..].trim().to_string(),
                ("smc-note", _) => b.smc_note = Some(line["smc-note".len()..].trim().to_string()),
                ("uncontended" | "handoff", 5) => {
                    let st = Stat {
                        median: num(2)?,
                        p99: num(3)?,
                        samples: int(4)? as usize,
                    };
                    let v = if f[0] == "handoff" {
                        &mut b.handoff
                    } else {
                        &mut b.uncontended
                    };
                    v.push((mech()?, st));
                }
                ("busy" | "empty", 10) => {
                    let tp = Throughput::new(num(3)?, int(4)?, int(5)?);
                    let busy = Busy {
                        per_sec: tp.per_sec,
                        min: tp.min,
                        max: tp.max,
                        fairness: tp.fairness,
                        gap: Stat {
                            median: num(6)?,
                            p99: num(7)?,
                            samples: int(8)? as usize,
                        },
                        wait: hist(9)?,
                    };
                    let v = if f[0] == "busy" {
                        &mut b.busy
                    } else {
                        &mut b.empty
                    };
                    push_to(v, mech()?, int(2)? as usize, busy);
                }
                ("mixed", 13) => {
                    let kind = Mix::from_name(f[1]).ok_or_else(bad)?;
                    let group = |i: usize| -> Result<Group, String> {
                        Ok(Group {
                            procs: int(i)? as usize,
                            tp: Throughput::new(num(i + 1)?, int(i + 2)?, int(i + 3)?),
                            wait: hist(i + 4)?,
                        })
                    };
                    let (pollers, blockers) = (group(3)?, group(8)?);
                    let all = Throughput::new(
                        pollers.tp.per_sec + blockers.tp.per_sec,
                        pollers.tp.min.min(blockers.tp.min),
                        pollers.tp.max.max(blockers.tp.max),
                    );
                    let x = Mixed {
                        per_sec: all.per_sec,
                        fairness: all.fairness,
                        pollers,
                        blockers,
                    };
                    push_to(&mut b.mixed, kind, int(2)? as usize, x);
                }
                ("smc", 8) => {
                    let pat = Pattern::from_name(f[1]).ok_or_else(bad)?;
                    let x = Smc {
                        tp: Throughput::new(num(3)?, int(4)?, int(5)?),
                        errors: int(6)?,
                        rtt: hist(7)?,
                    };
                    push_to(&mut b.smc, pat, int(2)? as usize, x);
                }
                _ => return Err(bad()),
            }
        }
        Ok(b)
    }
}

pub(crate) fn find<T>(v: &[(Mech, T)], m: Mech) -> Option<&T> {
    v.iter().find(|(x, _)| *x == m).map(|(_, t)| t)
}

pub(crate) fn find_n<T>(v: &[(usize, T)], n: usize) -> Option<&T> {
    v.iter().find(|(x, _)| *x == n).map(|(_, t)| t)
}

/// A duration in ns, human-sized.
pub fn fmt_ns(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v < 1e3 {
        format!("{v:.0} ns")
    } else if v < 1e6 {
        format!("{:.2} µs", v / 1e3)
    } else {
        format!("{:.2} ms", v / 1e6)
    }
}

pub(crate) fn fmt_ratio(v: f64, base: Option<f64>) -> String {
    match base {
        Some(b) if b > 0.0 && v.is_finite() => format!("{:.2}x", v / b),
        _ => "-".into(),
    }
}

pub(crate) fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M/s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k/s", v / 1e3)
    } else {
        format!("{v:.0} /s")
    }
}

fn ratio(v: f64, base: Option<f64>) -> Option<f64> {
    base.filter(|b| *b > 0.0 && v.is_finite()).map(|b| v / b)
}

const PROCS: [usize; 5] = [1, 2, 4, 8, 32];
const WAITERS: [usize; 4] = [1, 10, 100, 1000];

/// One target: name, met, the numbers.
pub struct Target {
    pub name: String,
    pub met: bool,
    pub detail: String,
}

impl Results {
    pub fn new(setup: Setup) -> Results {
        Results {
            setup,
            uncontended: Vec::new(),
            handoff: Vec::new(),
            handoff_same: Vec::new(),
            handoff_switches: Vec::new(),
            handoff_same_switches: Vec::new(),
            throughput: Vec::new(),
            herd: Vec::new(),
            release: Vec::new(),
            breakdown: Vec::new(),
            busy: Vec::new(),
            empty: Vec::new(),
            mixed: Vec::new(),
            smc: Vec::new(),
            smc_note: None,
            smc_device: String::new(),
            ttkmd: None,
        }
    }

    fn busy_at(&self, m: Mech, p: usize) -> Option<&Busy> {
        find(&self.busy, m).and_then(|v| find_n(v, p))
    }

    /// The targets of issue 17 (tt-kmd in the same run, ARC-sized critical
    /// sections, the cost of the uncontended path).
    pub fn targets_against_ttkmd(&self) -> Vec<Target> {
        let mut t = Vec::new();
        let k = self.ttkmd.as_ref();
        let ours_try = find(&self.uncontended, Mech::Poll);
        let (met, detail) = match (ours_try, k.and_then(|k| find(&k.uncontended, Mech::Poll))) {
            (Some(o), Some(b)) => (
                o.median <= b.median,
                format!(
                    "{} vs {} ({:.2}x)",
                    fmt_ns(o.median),
                    fmt_ns(b.median),
                    o.median / b.median
                ),
            ),
            _ => (
                false,
                "not measured: no tt-kmd in this run (tools/bench/run --ttkmd-ko)".into(),
            ),
        };
        t.push(Target {
            name: "LOCK_CTL try + release pair <= 1.0x tt-kmd's".into(),
            met,
            detail,
        });
        let info = self
            .breakdown
            .iter()
            .find(|(n, _)| *n == "GET_DRIVER_INFO")
            .map(|(_, s)| s.median);
        if let (Some(a), Some(info)) = (find(&self.uncontended, Mech::Acquire), info) {
            t.push(Target {
                name: "ACQUIRE + RELEASE pair <= 1.2x two GET_DRIVER_INFO".into(),
                met: a.median <= 2.4 * info,
                detail: format!(
                    "{} vs 2 x {} ({:.2}x)",
                    fmt_ns(a.median),
                    fmt_ns(info),
                    a.median / (2.0 * info)
                ),
            });
        }
        for p in [8, 32] {
            if let (Some(a), Some(f)) =
                (self.busy_at(Mech::Acquire, p), self.busy_at(Mech::Flock, p))
            {
                t.push(Target {
                    name: format!("50 µs critical section, {p} processes: ACQUIRE throughput >= 0.95x flock's"),
                    met: a.per_sec >= 0.95 * f.per_sec,
                    detail: format!("{} vs {} ({:.2}x)", fmt_rate(a.per_sec), fmt_rate(f.per_sec), a.per_sec / f.per_sec),
                });
            }
        }
        for p in [2, 8] {
            if let Some(b) = self.busy_at(Mech::Poll, p) {
                let mut detail =
                    format!("p99 {}, median {}", fmt_ns(b.gap.p99), fmt_ns(b.gap.median));
                if let Some(kb) = k
                    .and_then(|k| find(&k.busy, Mech::Poll))
                    .and_then(|v| find_n(v, p))
                {
                    let _ = write!(
                        detail,
                        "; tt-kmd: p99 {}, median {}",
                        fmt_ns(kb.gap.p99),
                        fmt_ns(kb.gap.median)
                    );
                }
                t.push(Target {
                    name: format!("UMD's polled LOCK_CTL, {p} processes, 50 µs held: the lock within 1.1 ms of its release at p99"),
                    met: b.gap.p99 <= 1.1e6,
                    detail,
                });
            }
        }
        t
    }

    fn tp(&self, m: Mech, p: usize) -> Option<&Throughput> {
        find(&self.throughput, m).and_then(|v| find_n(v, p))
    }

    fn rel(&self, m: Mech, n: usize) -> Option<&Stat> {
        find(&self.release, m).and_then(|v| find_n(v, n))
    }

    /// The targets of issue 7, for `m` (ACQUIRE/RELEASE or LOCK_CTL).
    pub fn targets(&self, m: Mech) -> Vec<Target> {
        let mut t = Vec::new();
        let name = m.name();
        let mut add = |name: String, met: Option<bool>, detail: String| {
            if let Some(met) = met {
                t.push(Target { name, met, detail });
            }
        };
        let un = find(&self.uncontended, m).map(|s| s.median);
        let null = find(&self.uncontended, Mech::Null).map(|s| s.median);
        let fl = find(&self.uncontended, Mech::Flock).map(|s| s.median);
        if let (Some(un), Some(null)) = (un, null) {
            add(
                format!("{name}: uncontended pair <= 4x null ioctl"),
                Some(un <= 4.0 * null),
                format!("{} = {:.2}x {}", fmt_ns(un), un / null, fmt_ns(null)),
            );
        }
        if let (Some(un), Some(fl)) = (un, fl) {
            add(
                format!("{name}: uncontended pair <= 0.3x flock pair"),
                Some(un <= 0.3 * fl),
                format!("{} = {:.2}x {}", fmt_ns(un), un / fl, fmt_ns(fl)),
            );
        }
        if let (Some(h), Some(f)) = (find(&self.handoff, m), find(&self.handoff, Mech::Flock)) {
            add(
                format!("{name}: hand-off latency <= flock"),
                Some(h.median <= f.median),
                format!(
                    "median {} vs {} ({:.2}x); p99 {} vs {}",
                    fmt_ns(h.median),
                    fmt_ns(f.median),
                    h.median / f.median,
                    fmt_ns(h.p99),
                    fmt_ns(f.p99)
                ),
            );
        }
        if let (Some(h), Some(f)) = (
            find(&self.handoff_same, m),
            find(&self.handoff_same, Mech::Flock),
        ) {
            add(
                format!("{name}: hand-off latency on one CPU <= flock"),
                Some(h.median <= f.median),
                format!(
                    "median {} vs {} ({:.2}x); p99 {} vs {}",
                    fmt_ns(h.median),
                    fmt_ns(f.median),
                    h.median / f.median,
                    fmt_ns(h.p99),
                    fmt_ns(f.p99)
                ),
            );
        }
        if let Some(h) = find(&self.herd, m) {
            add(
                format!("{name}: wake-ups per release = 1.0"),
                Some(h.per_release == 1.0),
                format!(
                    "{:.3} (driver: {} grants after a wait, {} spurious wake-ups)",
                    h.per_release,
                    h.driver.map_or(0, |d| d.0),
                    h.driver.map_or(0, |d| d.1)
                ),
            );
        }
        if let Some(tp) = self.tp(m, 32) {
            add(
                format!("{name}: fairness min/max at 32 processes >= 0.9"),
                Some(tp.fairness >= 0.9),
                format!("{:.3} (min {}, max {})", tp.fairness, tp.min, tp.max),
            );
            if let Some(f) = self.tp(Mech::Flock, 32) {
                add(
                    format!("{name}: throughput at 32 processes >= flock"),
                    Some(tp.per_sec >= f.per_sec),
                    format!(
                        "{} vs {} ({:.2}x)",
                        fmt_rate(tp.per_sec),
                        fmt_rate(f.per_sec),
                        tp.per_sec / f.per_sec
                    ),
                );
            }
        }
        if let (Some(r1), Some(r1000)) = (self.rel(m, 1), self.rel(m, 1000)) {
            add(
                format!("{name}: release cost with 1000 waiters <= 1.5x with 1"),
                Some(r1000.median <= 1.5 * r1.median),
                format!(
                    "{} vs {} ({:.2}x)",
                    fmt_ns(r1000.median),
                    fmt_ns(r1.median),
                    r1000.median / r1.median
                ),
            );
        }
        t
    }

    fn mechs(&self) -> Vec<Mech> {
        Mech::ALL
            .into_iter()
            .filter(|&m| {
                find(&self.uncontended, m).is_some()
                    || find(&self.handoff, m).is_some()
                    || find(&self.throughput, m).is_some()
                    || find(&self.herd, m).is_some()
                    || find(&self.release, m).is_some()
            })
            .collect()
    }

    /// The tables and targets, as markdown.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let w = &mut s;
        let _ = writeln!(
            w,
            "Run {} on {} ({} vCPUs, kernel {}, clocksource {}, module {}); host CPU: {}; host load average at start: {}{}\n",
            self.setup.get("date"),
            self.setup.get("vm"),
            self.setup.get("vcpus"),
            self.setup.get("kernel"),
            self.setup.get("clocksource"),
            self.setup.get("module_version"),
            self.setup.get("host_cpu"),
            self.setup.get("host_load_at_start"),
            if self.setup.get("quick") == "true" {
                " (QUICK RUN)"
            } else {
                ""
            }
        );
        let mechs = self.mechs();

        let stat_table = |w: &mut String,
                          title: &str,
                          v: &[(Mech, Stat)],
                          note: &str,
                          switches: Option<&[(Mech, f64)]>| {
            let base = find(v, Mech::Flock).copied();
            let _ = writeln!(w, "{title}\n");
            let extra = if switches.is_some() {
                (" waiter's ctx switches per acquisition |", "---:|")
            } else {
                ("", "")
            };
            let _ = writeln!(
                w,
                "| mechanism | median | x flock | p99 | x flock | samples |{}",
                extra.0
            );
            let _ = writeln!(w, "|---|---:|---:|---:|---:|---:|{}", extra.1);
            for &m in &mechs {
                if let Some(st) = find(v, m) {
                    let _ = write!(
                        w,
                        "| {}{} | {} | {} | {} | {} | {} |",
                        m.name(),
                        if m == Mech::Null { note } else { "" },
                        fmt_ns(st.median),
                        fmt_ratio(st.median, base.map(|b| b.median)),
                        fmt_ns(st.p99),
                        fmt_ratio(st.p99, base.map(|b| b.p99)),
                        st.samples
                    );
                    if let Some(sw) = switches {
                        let x = find(sw, m).map_or("-".into(), |x| format!("{x:.2}"));
                        let _ = write!(w, " {x} |");
                    }
                    let _ = writeln!(w);
                }
            }
            let _ = writeln!(w);
        };
        stat_table(
            w,
            "**Uncontended acquire+release pair** (per pair; median/p99 over batches)",
            &self.uncontended,
            " (one call)",
            None,
        );
        stat_table(
            w,
            "**Hand-off latency** (holder's release to the sleeping waiter running with the lock; holder and waiter on different CPUs)",
            &self.handoff,
            "",
            Some(&self.handoff_switches),
        );
        stat_table(
            w,
            "**Hand-off latency on one CPU** (both on CPU 0: the waiter runs when the releaser yields; no idle CPU to wake)",
            &self.handoff_same,
            "",
            Some(&self.handoff_same_switches),
        );

        let _ = writeln!(
            w,
            "**Throughput**, P processes on one lock (acquisitions/s, x flock)\n"
        );
        let _ = writeln!(w, "| mechanism | P=1 | P=2 | P=4 | P=8 | P=32 |");
        let _ = writeln!(w, "|---|---:|---:|---:|---:|---:|");
        for &m in &mechs {
            if find(&self.throughput, m).is_none() {
                continue;
            }
            let _ = write!(w, "| {} |", m.name());
            for p in PROCS {
                if let Some(t) = self.tp(m, p) {
                    let b = self.tp(Mech::Flock, p).map(|b| b.per_sec);
                    let _ = write!(
                        w,
                        " {} ({}) |",
                        fmt_rate(t.per_sec),
                        fmt_ratio(t.per_sec, b)
                    );
                }
            }
            let _ = writeln!(w);
        }
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "**Fairness**: min/max acquisitions per process (x flock)\n"
        );
        let _ = writeln!(w, "| mechanism | P=2 | P=4 | P=8 | P=32 |");
        let _ = writeln!(w, "|---|---:|---:|---:|---:|");
        for &m in &mechs {
            if find(&self.throughput, m).is_none() {
                continue;
            }
            let _ = write!(w, "| {} |", m.name());
            for p in &PROCS[1..] {
                if let Some(t) = self.tp(m, *p) {
                    let b = self.tp(Mech::Flock, *p).map(|b| b.fairness);
                    let _ = write!(w, " {:.3} ({}) |", t.fairness, fmt_ratio(t.fairness, b));
                }
            }
            let _ = writeln!(w);
        }
        let _ = writeln!(w);

        let _ = writeln!(
            w,
            "**Herd**: 64 sleepers on one lock; wake-ups per release that handed the lock to a sleeper\n"
        );
        let _ = writeln!(
            w,
            "| mechanism | wake-ups/release | x flock | how counted |"
        );
        let _ = writeln!(w, "|---|---:|---:|---|");
        let hb = find(&self.herd, Mech::Flock).map(|h| h.per_release);
        for &m in &mechs {
            if let Some(h) = find(&self.herd, m) {
                let how = match h.driver {
                    Some((c, sp)) => format!(
                        "QUERY: ({c} grants after a wait + {sp} spurious) / {c}; ctx switches: {} / {}",
                        h.ctx_wakeups, h.ctx_contended
                    ),
                    None => format!(
                        "voluntary ctx switches in acquire {} / {} acquisitions that slept",
                        h.ctx_wakeups, h.ctx_contended
                    ),
                };
                let _ = writeln!(
                    w,
                    "| {} | {:.3} | {} | {} |",
                    m.name(),
                    h.per_release,
                    fmt_ratio(h.per_release, hb),
                    how
                );
            }
        }
        let _ = writeln!(w);

        let _ = writeln!(
            w,
            "**Release cost** with N sleepers on the lock (median; x flock)\n"
        );
        let _ = writeln!(w, "| mechanism | N=1 | N=10 | N=100 | N=1000 | 1000 / 1 |");
        let _ = writeln!(w, "|---|---:|---:|---:|---:|---:|");
        for &m in &mechs {
            if find(&self.release, m).is_none() {
                continue;
            }
            let _ = write!(w, "| {} |", m.name());
            for n in WAITERS {
                if let Some(st) = self.rel(m, n) {
                    let b = self.rel(Mech::Flock, n).map(|b| b.median);
                    let _ = write!(w, " {} ({}) |", fmt_ns(st.median), fmt_ratio(st.median, b));
                }
            }
            match (self.rel(m, 1), self.rel(m, 1000)) {
                (Some(a), Some(b)) => {
                    let _ = writeln!(w, " {:.2}x |", b.median / a.median);
                }
                _ => {
                    let _ = writeln!(w, " - |");
                }
            }
        }
        let _ = writeln!(w);

        if !self.breakdown.is_empty() {
            let _ = writeln!(
                w,
                "**Single calls**, each timed on its own (includes one clock read)\n"
            );
            let _ = writeln!(w, "| call | median | p99 | x null ioctl |");
            let _ = writeln!(w, "|---|---:|---:|---:|");
            let null = self
                .breakdown
                .iter()
                .find(|(n, _)| n.starts_with("null"))
                .map(|(_, s)| s.median);
            for (name, st) in &self.breakdown {
                let _ = writeln!(
                    w,
                    "| {name} | {} | {} | {} |",
                    fmt_ns(st.median),
                    fmt_ns(st.p99),
                    fmt_ratio(st.median, null)
                );
            }
            let _ = writeln!(w);
        }

        self.contention_markdown(w);
        match &self.ttkmd {
            None => {
                let _ = writeln!(w, "**Against tt-kmd**: not measured in this run (no tt-kmd module given: `tools/bench/run --ttkmd-ko PATH`).\n");
            }
            Some(k) => {
                let _ = writeln!(w, "**Against {}**, measured in the same boot (tt-kmd loaded instead of this module; LOCK_CTL try polled every 1 ms is what UMD's KmdMutex does on it)\n", k.name());
                let _ = writeln!(w, "| workload | this driver | {} | x tt-kmd |", k.name());
                let _ = writeln!(w, "|---|---:|---:|---:|");
                let mut row = |name: String,
                               ours: Option<f64>,
                               theirs: Option<f64>,
                               fmt: &dyn Fn(f64) -> String| {
                    if let (Some(o), Some(t)) = (ours, theirs) {
                        let _ = writeln!(
                            w,
                            "| {name} | {} | {} | {} |",
                            fmt(o),
                            fmt(t),
                            fmt_ratio(o, Some(t))
                        );
                    }
                };
                let med = |v: &[(Mech, Stat)], m| find(v, m).map(|s| s.median);
                let p99 = |v: &[(Mech, Stat)], m| find(v, m).map(|s| s.p99);
                row(
                    "flock pair (the yardstick, same boot)".into(),
                    med(&self.uncontended, Mech::Flock),
                    med(&k.uncontended, Mech::Flock),
                    &fmt_ns,
                );
                row(
                    "LOCK_CTL try + release, uncontended (median)".into(),
                    med(&self.uncontended, Mech::Poll),
                    med(&k.uncontended, Mech::Poll),
                    &fmt_ns,
                );
                row(
                    "LOCK_CTL try + release, uncontended (p99)".into(),
                    p99(&self.uncontended, Mech::Poll),
                    p99(&k.uncontended, Mech::Poll),
                    &fmt_ns,
                );
                row(
                    "hand-off, LOCK_CTL polled every 1 ms (median)".into(),
                    med(&self.handoff, Mech::Poll),
                    med(&k.handoff, Mech::Poll),
                    &fmt_ns,
                );
                row(
                    "hand-off, LOCK_CTL polled every 1 ms (p99)".into(),
                    p99(&self.handoff, Mech::Poll),
                    p99(&k.handoff, Mech::Poll),
                    &fmt_ns,
                );
                row(
                    "hand-off, LOCK_CTL ACQUIRE_BLOCKING (median)".into(),
                    med(&self.handoff, Mech::LockCtl),
                    med(&k.handoff, Mech::LockCtl),
                    &fmt_ns,
                );
                row(
                    "hand-off, LOCK_CTL ACQUIRE_BLOCKING (p99)".into(),
                    p99(&self.handoff, Mech::LockCtl),
                    p99(&k.handoff, Mech::LockCtl),
                    &fmt_ns,
                );
                row(
                    "hand-off: this driver's LOCK_ACQUIRE vs tt-kmd's polled LOCK_CTL (median)"
                        .into(),
                    med(&self.handoff, Mech::Acquire),
                    med(&k.handoff, Mech::Poll),
                    &fmt_ns,
                );
                let kb = |m, p| find(&k.busy, m).and_then(|v| find_n(v, p));
                for (p, _) in find(&self.busy, Mech::Poll).map_or(&[][..], |v| v.as_slice()) {
                    let p = *p;
                    row(
                        format!("50 µs held, {p} processes, polled LOCK_CTL: acquisitions/s"),
                        self.busy_at(Mech::Poll, p).map(|b| b.per_sec),
                        kb(Mech::Poll, p).map(|b| b.per_sec),
                        &fmt_rate,
                    );
                    row(
                        format!("50 µs held, {p} processes, polled LOCK_CTL: gap p99"),
                        self.busy_at(Mech::Poll, p).map(|b| b.gap.p99),
                        kb(Mech::Poll, p).map(|b| b.gap.p99),
                        &fmt_ns,
                    );
                    row(
                        format!("50 µs held, {p} processes, blocking LOCK_CTL: acquisitions/s"),
                        self.busy_at(Mech::LockCtl, p).map(|b| b.per_sec),
                        kb(Mech::LockCtl, p).map(|b| b.per_sec),
                        &fmt_rate,
                    );
                    row(
                        format!("50 µs held, {p} processes, blocking LOCK_CTL: fairness"),
                        self.busy_at(Mech::LockCtl, p).map(|b| b.fairness),
                        kb(Mech::LockCtl, p).map(|b| b.fairness),
                        &|v| format!("{v:.2}"),
                    );
                    row(
                        format!("50 µs held, {p} processes: LOCK_ACQUIRE here vs polled LOCK_CTL on tt-kmd, acquisitions/s"),
                        self.busy_at(Mech::Acquire, p).map(|b| b.per_sec),
                        kb(Mech::Poll, p).map(|b| b.per_sec),
                        &fmt_rate,
                    );
                }
                let _ = writeln!(w);
            }
        }

        let _ = writeln!(w, "**Targets**\n");
        let mut all: Vec<Target> = Vec::new();
        for m in [Mech::Acquire, Mech::LockCtl] {
            all.extend(self.targets(m));
        }
        all.extend(self.targets_against_ttkmd());
        all.extend(self.targets_issue28());
        for t in all {
            let _ = writeln!(
                w,
                "- {} {}: {}",
                if t.met { "met:" } else { "MISSED:" },
                t.name,
                t.detail
            );
        }
        s
    }

    /// Everything, as JSON.
    pub fn json(&self) -> String {
        let flock_un = find(&self.uncontended, Mech::Flock).copied();
        let stat = |st: &Stat, base: Option<Stat>| {
            J::obj(vec![
                ("median", J::Num(st.median)),
                ("p99", J::Num(st.p99)),
                ("samples", J::Int(st.samples as u64)),
                (
                    "median_x_flock",
                    J::opt(ratio(st.median, base.map(|b| b.median))),
                ),
                ("p99_x_flock", J::opt(ratio(st.p99, base.map(|b| b.p99)))),
            ])
        };
        let per_mech = |v: &dyn Fn(Mech) -> Option<J>| {
            J::Obj(
                Mech::ALL
                    .iter()
                    .filter_map(|&m| v(m).map(|j| (m.name().to_string(), j)))
                    .collect(),
            )
        };
        let busy_json = |v: &[(Mech, Vec<(usize, Busy)>)]| {
            per_mech(&|m| {
                find(v, m).map(|v| {
                    J::Obj(
                        v.iter()
                            .map(|(p, b)| (p.to_string(), busy_entry(b, stat(&b.gap, None))))
                            .collect(),
                    )
                })
            })
        };
        let flock_h = find(&self.handoff, Mech::Flock).copied();
        let mut targets = Vec::new();
        let mut all: Vec<Target> = Vec::new();
        for m in [Mech::Acquire, Mech::LockCtl] {
            all.extend(self.targets(m));
        }
        all.extend(self.targets_against_ttkmd());
        all.extend(self.targets_issue28());
        {
            for t in all {
                targets.push(J::obj(vec![
                    ("name", J::Str(t.name)),
                    ("met", J::Bool(t.met)),
                    ("detail", J::Str(t.detail)),
                ]));
            }
        }
        let root = J::obj(vec![
            (
                "setup",
                J::Obj(
                    self.setup
                        .pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), J::Str(v.clone())))
                        .collect(),
                ),
            ),
            (
                "uncontended_pair_ns",
                per_mech(&|m| find(&self.uncontended, m).map(|s| stat(s, flock_un))),
            ),
            (
                "handoff_ns",
                per_mech(&|m| find(&self.handoff, m).map(|s| stat(s, flock_h))),
            ),
            (
                "handoff_waiter_switches_per_acquisition",
                per_mech(&|m| find(&self.handoff_switches, m).map(|&x| J::Num(x))),
            ),
            (
                "handoff_one_cpu_waiter_switches_per_acquisition",
                per_mech(&|m| find(&self.handoff_same_switches, m).map(|&x| J::Num(x))),
            ),
            (
                "handoff_one_cpu_ns",
                per_mech(&|m| {
                    find(&self.handoff_same, m)
                        .map(|s| stat(s, find(&self.handoff_same, Mech::Flock).copied()))
                }),
            ),
            (
                "throughput",
                per_mech(&|m| {
                    find(&self.throughput, m).map(|v| {
                        J::Obj(
                            v.iter()
                                .map(|(p, t)| {
                                    let b = self.tp(Mech::Flock, *p);
                                    (
                                        p.to_string(),
                                        J::obj(vec![
                                            ("per_sec", J::Num(t.per_sec)),
                                            ("min", J::Int(t.min)),
                                            ("max", J::Int(t.max)),
                                            ("fairness", J::Num(t.fairness)),
                                            (
                                                "per_sec_x_flock",
                                                J::opt(ratio(t.per_sec, b.map(|b| b.per_sec))),
                                            ),
                                            (
                                                "fairness_x_flock",
                                                J::opt(ratio(t.fairness, b.map(|b| b.fairness))),
                                            ),
                                        ]),
                                    )
                                })
                                .collect(),
                        )
                    })
                }),
            ),
            (
                "herd_64",
                per_mech(&|m| {
                    find(&self.herd, m).map(|h| {
                        let b = find(&self.herd, Mech::Flock).map(|b| b.per_release);
                        J::obj(vec![
                            ("wakeups_per_release", J::Num(h.per_release)),
                            ("x_flock", J::opt(ratio(h.per_release, b))),
                            ("ctx_switch_wakeups", J::Int(h.ctx_wakeups)),
                            ("acquisitions_that_slept", J::Int(h.ctx_contended)),
                            (
                                "driver_contended_grants",
                                J::opt(h.driver.map(|d| d.0 as f64)),
                            ),
                            (
                                "driver_spurious_wakeups",
                                J::opt(h.driver.map(|d| d.1 as f64)),
                            ),
                            ("releases", J::Int(h.releases)),
                        ])
                    })
                }),
            ),
            (
                "release_cost_ns",
                per_mech(&|m| {
                    find(&self.release, m).map(|v| {
                        J::Obj(
                            v.iter()
                                .map(|(n, st)| {
                                    let b = self.rel(Mech::Flock, *n).copied();
                                    (n.to_string(), stat(st, b))
                                })
                                .collect(),
                        )
                    })
                }),
            ),
            (
                "single_call_ns",
                J::Obj(
                    self.breakdown
                        .iter()
                        .map(|(n, st)| (n.to_string(), stat(st, None)))
                        .collect(),
                ),
            ),
            ("busy_50us", busy_json(&self.busy)),
            ("empty_cs", busy_json(&self.empty)),
            ("mixed_50us", mixed_json(&self.mixed)),
            (
                "smc_msg",
                smc_json(&self.smc, self.smc_note.as_deref(), &self.smc_device),
            ),
            (
                "ttkmd",
                self.ttkmd.as_ref().map_or(J::Null, |k| {
                    J::obj(vec![
                        (
                            "uncontended_pair_ns",
                            per_mech(&|m| find(&k.uncontended, m).map(|s| stat(s, None))),
                        ),
                        (
                            "handoff_ns",
                            per_mech(&|m| find(&k.handoff, m).map(|s| stat(s, None))),
                        ),
                        ("version", J::Str(k.version.clone())),
                        ("busy_50us", busy_json(&k.busy)),
                        ("empty_cs", busy_json(&k.empty)),
                        ("mixed_50us", mixed_json(&k.mixed)),
                        ("smc_msg", smc_json(&k.smc, k.smc_note.as_deref(), "")),
                    ])
                }),
            ),
            ("targets", J::Arr(targets)),
        ]);
        let mut out = String::new();
        root.render(&mut out);
        out
    }
}

/// A minimal JSON value.
pub(crate) enum J {
    Num(f64),
    Int(u64),
    Str(String),
    Bool(bool),
    Null,
    Obj(Vec<(String, J)>),
    Arr(Vec<J>),
}

impl J {
    pub(crate) fn obj(v: Vec<(&str, J)>) -> J {
        J::Obj(v.into_iter().map(|(k, j)| (k.to_string(), j)).collect())
    }

    pub(crate) fn opt(v: Option<f64>) -> J {
        v.map_or(J::Null, J::Num)
    }

    fn render(&self, out: &mut String) {
        match self {
            J::Num(v) if v.is_finite() => {
                let _ = write!(out, "{}", (v * 1000.0).round() / 1000.0);
            }
            J::Num(_) | J::Null => out.push_str("null"),
            J::Int(v) => {
                let _ = write!(out, "{v}");
            }
            J::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            J::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            J::Obj(v) => {
                out.push('{');
                for (i, (k, j)) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    J::Str(k.clone()).render(out);
                    out.push(':');
                    j.render(out);
                }
                out.push('}');
            }
            J::Arr(v) => {
                out.push('[');
                for (i, j) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    j.render(out);
                }
                out.push(']');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_rendering() {
        let mut s = String::new();
        J::obj(vec![
            ("a", J::Num(1.23456)),
            ("b", J::Str("x\"y\n".into())),
            (
                "c",
                J::Arr(vec![J::Int(3), J::Null, J::Bool(true), J::Num(f64::NAN)]),
            ),
        ])
        .render(&mut s);
        assert_eq!(s, r#"{"a":1.235,"b":"x\"y\u000a","c":[3,null,true,null]}"#);
    }

    #[test]
    fn baseline_round_trip() {
        let mut r = crate::tables::tests::sample(1.0);
        r.setup = Setup::with(&[("module_version", "2.10.1-pre")]);
        r.smc_note = Some("nothing here (EINVAL)".into());
        let b = Baseline::parse(&Baseline::text(&r)).unwrap();
        assert_eq!(b.version, "2.10.1-pre");
        assert_eq!(b.name(), "tt-kmd 2.10.1-pre");
        assert_eq!(b.smc_note.as_deref(), Some("nothing here (EINVAL)"));
        assert_eq!(find(&b.uncontended, Mech::Poll).unwrap().median, 1500.0);
        assert_eq!(find(&b.handoff, Mech::Flock).unwrap().p99, 18001.0);
        for (ours, back) in [(&r.busy, &b.busy), (&r.empty, &b.empty)] {
            assert_eq!(ours.len(), back.len());
            for (m, v) in ours {
                let w = find(back, *m).unwrap();
                assert_eq!(v.len(), w.len());
                for (p, x) in v {
                    let y = find_n(w, *p).unwrap();
                    assert_eq!((x.per_sec, x.min, x.max), (y.per_sec, y.min, y.max));
                    assert_eq!(x.fairness, y.fairness);
                    assert_eq!(x.gap.samples, y.gap.samples);
                    assert_eq!(x.wait, y.wait);
                }
            }
        }
        let (k, v) = &b.mixed[0];
        assert_eq!(*k, Mix::LockCtl);
        let x = find_n(v, 8).unwrap();
        let want = find_n(&r.mixed[0].1, 8).unwrap();
        assert_eq!(x.pollers.wait, want.pollers.wait);
        assert_eq!(x.blockers.tp.min, want.blockers.tp.min);
        assert_eq!(x.pollers.procs, 4);
        assert_eq!(x.per_sec, want.per_sec);
        assert_eq!(x.fairness, want.fairness);
        let (pat, v) = &b.smc[0];
        assert_eq!(*pat, Pattern::Poll1ms);
        assert_eq!(
            find_n(v, 32).unwrap().rtt,
            find_n(&r.smc[0].1, 32).unwrap().rtt
        );
        assert_eq!(find_n(v, 32).unwrap().errors, 0);
        for bad in [
            "busy poll_1ms 2 1",
            "uncontended nothing 1 2 3",
            "busy poll_1ms 2 1 2 3 4 5 6 7",
            "busy poll_1ms 2 1 2 3 4 5 6 bad",
            "mixed nothing 2 1 1 1 1 0: 1 1 1 1 0:",
            "smc poll_1ms 1 1 1 1 0",
        ] {
            assert!(Baseline::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_ns(260.4), "260 ns");
        assert_eq!(fmt_ns(3500.0), "3.50 µs");
        assert_eq!(fmt_ns(3.8e6), "3.80 ms");
        assert_eq!(fmt_ratio(1.0, Some(4.0)), "0.25x");
        assert_eq!(fmt_ratio(1.0, None), "-");
        assert_eq!(fmt_rate(123456.0), "123.5 k/s");
    }
}

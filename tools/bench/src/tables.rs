//! The contention workloads (issue 28: empty and 50 µs critical sections
//! with every wait timed, pollers and blocking waiters on one lock) and
//! SMC_MSG round trips (issue 26): their tables, with this driver's and
//! tt-kmd's rows side by side and flock as the yardstick, their JSON, and
//! the issue-28 targets.

use std::fmt::Write as _;

use crate::bench::{Busy, Group, Mix, Mixed};
use crate::mech::Mech;
use crate::report::{find, find_n, fmt_ns, fmt_rate, fmt_ratio, Baseline, Results, Target, J};
use crate::smc::{Pattern, Smc};
use crate::stats::Hist;

/// A distribution as JSON: p50, p99, max, samples, and the histogram as
/// `[smallest value of the bucket, count]` pairs (buckets 1/32 of their
/// value wide).
pub(crate) fn hist_json(h: &Hist) -> J {
    J::obj(vec![
        ("p50", J::Num(h.quantile(0.5))),
        ("p99", J::Num(h.quantile(0.99))),
        ("max", J::Int(h.max)),
        ("samples", J::Int(h.n)),
        (
            "hist",
            J::Arr(
                h.pairs()
                    .map(|(v, c)| J::Arr(vec![J::Int(v), J::Int(c)]))
                    .collect(),
            ),
        ),
    ])
}

/// One contention figure as JSON (`gap`: the gap's statistics).
pub(crate) fn busy_entry(b: &Busy, gap: J) -> J {
    J::obj(vec![
        ("per_sec", J::Num(b.per_sec)),
        ("min", J::Int(b.min)),
        ("max", J::Int(b.max)),
        ("fairness", J::Num(b.fairness)),
        ("gap_ns", gap),
        ("wait_ns", hist_json(&b.wait)),
    ])
}

fn group_json(g: &Group) -> J {
    J::obj(vec![
        ("procs", J::Int(g.procs as u64)),
        ("per_sec", J::Num(g.tp.per_sec)),
        ("min", J::Int(g.tp.min)),
        ("max", J::Int(g.tp.max)),
        ("fairness", J::Num(g.tp.fairness)),
        ("wait_ns", hist_json(&g.wait)),
    ])
}

pub(crate) fn mixed_json(v: &[(Mix, Vec<(usize, Mixed)>)]) -> J {
    J::Obj(
        v.iter()
            .map(|(k, v)| {
                let per_p = v
                    .iter()
                    .map(|(p, x)| {
                        let j = J::obj(vec![
                            ("per_sec", J::Num(x.per_sec)),
                            ("fairness", J::Num(x.fairness)),
                            ("pollers", group_json(&x.pollers)),
                            ("blockers", group_json(&x.blockers)),
                        ]);
                        (p.to_string(), j)
                    })
                    .collect();
                (k.name().to_string(), J::Obj(per_p))
            })
            .collect(),
    )
}

pub(crate) fn smc_json(v: &[(Pattern, Vec<(usize, Smc)>)], note: Option<&str>, device: &str) -> J {
    let patterns = v
        .iter()
        .map(|(pat, v)| {
            let per_n = v
                .iter()
                .map(|(n, x)| {
                    let j = J::obj(vec![
                        ("per_sec", J::Num(x.tp.per_sec)),
                        ("min", J::Int(x.tp.min)),
                        ("max", J::Int(x.tp.max)),
                        ("fairness", J::Num(x.tp.fairness)),
                        ("errors", J::Int(x.errors)),
                        ("round_trip_ns", hist_json(&x.rtt)),
                    ]);
                    (n.to_string(), j)
                })
                .collect();
            (pat.name().to_string(), J::Obj(per_n))
        })
        .collect();
    J::obj(vec![
        ("device", J::Str(device.to_string())),
        ("note", note.map_or(J::Null, |n| J::Str(n.to_string()))),
        ("patterns", J::Obj(patterns)),
    ])
}

/// p50 / p99 / max of `h`.
fn waits(h: &Hist) -> String {
    format!(
        "{} / {} / {}",
        fmt_ns(h.quantile(0.5)),
        fmt_ns(h.quantile(0.99)),
        fmt_ns(h.max as f64)
    )
}

/// The process counts of `v`'s first entry, in order.
fn counts<K, T>(v: &[(K, Vec<(usize, T)>)]) -> Vec<usize> {
    v.first()
        .map_or(Vec::new(), |(_, l)| l.iter().map(|(p, _)| *p).collect())
}

/// A contention section: each mechanism's figures by process count.
type Section = [(Mech, Vec<(usize, Busy)>)];

fn mix_label(k: Mix) -> &'static str {
    match k {
        Mix::LockCtl => "LOCK_CTL tries / LOCK_CTL ACQUIRE_BLOCKING",
        Mix::Acquire => "LOCK_CTL tries / LOCK_ACQUIRE",
        Mix::Flock => "flock LOCK_NB tries / flock LOCK_EX",
    }
}

impl Baseline {
    /// "tt-kmd VERSION".
    pub fn name(&self) -> String {
        if self.version.is_empty() {
            "tt-kmd".into()
        } else {
            format!("tt-kmd {}", self.version)
        }
    }
}

impl Results {
    fn contention_table(
        &self,
        w: &mut String,
        title: &str,
        ours: &Section,
        theirs: Option<&Section>,
    ) {
        if ours.is_empty() {
            return;
        }
        let _ = writeln!(w, "{title}\n");
        let _ = writeln!(w, "| mechanism | processes | acquisitions/s | x flock | fairness | wait p50 / p99 / max | release to next holder p50 / p99 |");
        let _ = writeln!(w, "|---|---:|---:|---:|---:|---:|---:|");
        let k = self.ttkmd.as_ref().map(|k| k.name()).unwrap_or_default();
        for p in counts(ours) {
            let flock = find(ours, Mech::Flock)
                .and_then(|v| find_n(v, p))
                .map(|f| f.per_sec);
            let rows = ours.iter().map(|(m, v)| (m.name().to_string(), v)).chain(
                theirs
                    .unwrap_or(&[])
                    .iter()
                    .filter(|(m, _)| *m != Mech::Flock)
                    .map(|(m, v)| (format!("{k}: {}", m.name()), v)),
            );
            for (label, v) in rows {
                if let Some(b) = find_n(v, p) {
                    let _ = writeln!(
                        w,
                        "| {label} | {p} | {} | {} | {:.2} | {} | {} / {} |",
                        fmt_rate(b.per_sec),
                        fmt_ratio(b.per_sec, flock),
                        b.fairness,
                        waits(&b.wait),
                        fmt_ns(b.gap.median),
                        fmt_ns(b.gap.p99)
                    );
                }
            }
        }
        let _ = writeln!(w);
    }

    /// The contention and SMC_MSG tables, as markdown.
    pub fn contention_markdown(&self, w: &mut String) {
        let k = self.ttkmd.as_ref();
        self.contention_table(
            w,
            "**Contended, an empty critical section**: P processes take one lock in turn for 1 s after a warm-up; acquisitions per second (x flock), fairness (min/max acquisitions per process), every single wait (from the call that starts taking the lock to its return with it; the clock reads around it are the only work), and the gap from a release to another process holding the lock",
            &self.empty,
            k.map(|k| k.empty.as_slice()),
        );
        self.contention_table(
            w,
            "**Contended, a 50 µs critical section** (an ARC message): the same, each holder busy 50 µs",
            &self.busy,
            k.map(|k| k.busy.as_slice()),
        );

        if !self.mixed.is_empty() {
            let _ = writeln!(w, "**Pollers and blocking waiters on one lock** (50 µs held; the first half of the processes try every 1 ms, the others block): acquisitions per second and fairness of all, then of each group with its waits (p50 / p99 / max)\n");
            let _ = writeln!(w, "| pollers / blocking waiters | processes | all: acquisitions/s | all: fairness | pollers: acquisitions/s | pollers: fairness | pollers: wait | blockers: acquisitions/s | blockers: fairness | blockers: wait |");
            let _ = writeln!(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            let kname = k.map(|k| k.name()).unwrap_or_default();
            for p in counts(&self.mixed) {
                let rows = self
                    .mixed
                    .iter()
                    .map(|(m, v)| (mix_label(*m).to_string(), v))
                    .chain(
                        k.map_or(&[][..], |k| k.mixed.as_slice())
                            .iter()
                            .filter(|(m, _)| m.runs_on_ttkmd())
                            .map(|(m, v)| (format!("{kname}: {}", mix_label(*m)), v)),
                    );
                for (label, v) in rows {
                    if let Some(x) = find_n(v, p) {
                        let g = |g: &Group| {
                            format!(
                                "{} | {:.2} | {}",
                                fmt_rate(g.tp.per_sec),
                                g.tp.fairness,
                                waits(&g.wait)
                            )
                        };
                        let _ = writeln!(
                            w,
                            "| {label} | {p} | {} | {:.2} | {} | {} |",
                            fmt_rate(x.per_sec),
                            x.fairness,
                            g(&x.pollers),
                            g(&x.blockers)
                        );
                    }
                }
            }
            let _ = writeln!(w);
        }

        let theirs = k.map_or(&[][..], |k| k.smc.as_slice());
        let their_note = k.and_then(|k| k.smc_note.as_ref());
        if self.smc.is_empty()
            && self.smc_note.is_none()
            && theirs.is_empty()
            && their_note.is_none()
        {
            // Not run (--only).
            return;
        }
        let _ = writeln!(w, "**SMC_MSG round trips** (a TEST message posted and its answer collected in a loop, by 1, 8 and 32 processes each with its own open file, for 1 s after a warm-up; device {}): messages per second, fairness (min/max messages per file), round trip from POST to the answer in hand (p50 / p99 / max), messages that failed or came back wrong\n", if self.smc_device.is_empty() { "-" } else { &self.smc_device });
        if let Some(n) = &self.smc_note {
            let _ = writeln!(w, "This driver: not measured: {n}.\n");
        }
        if let Some(n) = their_note {
            let _ = writeln!(
                w,
                "{}: not measured: {n}.\n",
                k.map(|k| k.name()).unwrap_or_default()
            );
        }
        if k.is_none() {
            let _ = writeln!(
                w,
                "tt-kmd: not measured in this run (no tt-kmd module given).\n"
            );
        }
        if !self.smc.is_empty() || !theirs.is_empty() {
            let _ = writeln!(
                w,
                "| driver: waiting by | files | messages/s | fairness | round trip p50 / p99 / max | errors |"
            );
            let _ = writeln!(w, "|---|---:|---:|---:|---:|---:|");
            let kname = k.map(|k| k.name()).unwrap_or_default();
            let mut files = counts(&self.smc);
            if files.is_empty() {
                files = counts(theirs);
            }
            for n in files {
                let rows = self
                    .smc
                    .iter()
                    .map(|(pat, v)| (format!("this driver: {}", pat.name()), v))
                    .chain(
                        theirs
                            .iter()
                            .map(|(pat, v)| (format!("{kname}: {}", pat.name()), v)),
                    );
                for (label, v) in rows {
                    if let Some(x) = find_n(v, n) {
                        let _ = writeln!(
                            w,
                            "| {label} | {n} | {} | {:.2} | {} | {} |",
                            fmt_rate(x.tp.per_sec),
                            x.tp.fairness,
                            waits(&x.rtt),
                            x.errors
                        );
                    }
                }
            }
            let _ = writeln!(w);
        }
    }

    /// Issue 28's targets: against tt-kmd on every workload it can run,
    /// against flock's throughput with fairness, and the worst single
    /// wait at 32 processes with a 50 µs section.
    pub fn targets_issue28(&self) -> Vec<Target> {
        let mut t = Vec::new();
        let k = self.ttkmd.as_ref();
        let at = |v: &Section, m: Mech, p: usize| -> Option<Busy> {
            find(v, m).and_then(|v| find_n(v, p)).cloned()
        };
        let against = |o: f64, base: f64| o / base;
        let sections: [(&str, &Section, Option<&Section>); 2] = [
            ("empty section", &self.empty, k.map(|k| k.empty.as_slice())),
            ("50 µs section", &self.busy, k.map(|k| k.busy.as_slice())),
        ];
        // >= 1.0x tt-kmd's throughput, <= 1.0x its waits, as it is used.
        for (label, ours, theirs) in sections {
            for m in [Mech::Poll, Mech::LockCtl] {
                for p in [2, 8, 32] {
                    let Some(o) = at(ours, m, p) else { continue };
                    let name = format!(
                        "{label}, {p} processes, {}: >= 1.0x tt-kmd's throughput, <= 1.0x its wait (median, p99)",
                        m.name()
                    );
                    match theirs.and_then(|v| at(v, m, p)) {
                        Some(b) => {
                            let (waits_met, waits) = compare_waits(&o.wait, &b.wait);
                            t.push(Target {
                                name,
                                met: o.per_sec >= b.per_sec && waits_met,
                                detail: format!(
                                    "throughput {:.2}x ({} vs {}), wait {waits}",
                                    against(o.per_sec, b.per_sec),
                                    fmt_rate(o.per_sec),
                                    fmt_rate(b.per_sec),
                                ),
                            });
                        }
                        None => t.push(Target {
                            name,
                            met: false,
                            detail: "not measured: no tt-kmd in this run".into(),
                        }),
                    }
                }
            }
        }
        // Mixed pollers and blocking waiters, LOCK_CTL on both drivers.
        for p in [2, 8, 32] {
            let Some(o) = find_mix(&self.mixed, Mix::LockCtl, p) else {
                continue;
            };
            let name = format!("pollers and blocking LOCK_CTL waiters, {p} processes: >= 1.0x tt-kmd's throughput, <= 1.0x its waits (median, p99) in each group");
            match k.and_then(|k| find_mix(&k.mixed, Mix::LockCtl, p)) {
                Some(b) => {
                    let mut met = o.per_sec >= b.per_sec;
                    let mut detail = format!("throughput {:.2}x", against(o.per_sec, b.per_sec));
                    for (g, og, bg) in [
                        ("pollers", &o.pollers, &b.pollers),
                        ("blockers", &o.blockers, &b.blockers),
                    ] {
                        let (waits_met, waits) = compare_waits(&og.wait, &bg.wait);
                        met &= waits_met;
                        let _ = write!(detail, "; {g}: wait {waits}");
                    }
                    t.push(Target { name, met, detail });
                }
                None => t.push(Target {
                    name,
                    met: false,
                    detail: "not measured: no tt-kmd in this run".into(),
                }),
            }
        }
        // SMC_MSG, polled as on tt-kmd.
        for n in [1, 8, 32] {
            let o = self
                .smc
                .iter()
                .find(|(p, _)| *p == Pattern::Poll1ms)
                .and_then(|(_, v)| find_n(v, n));
            let b = k
                .and_then(|k| k.smc.iter().find(|(p, _)| *p == Pattern::Poll1ms))
                .and_then(|(_, v)| find_n(v, n));
            if let (Some(o), Some(b)) = (o, b) {
                let (rtt_met, rtt) = compare_waits(&o.rtt, &b.rtt);
                t.push(Target {
                    name: format!("SMC_MSG polled every 1 ms, {n} files: >= 1.0x tt-kmd's messages/s, <= 1.0x its round trip (median, p99)"),
                    met: o.tp.per_sec >= b.tp.per_sec && rtt_met,
                    detail: format!(
                        "messages/s {:.2}x, round trip {rtt}",
                        against(o.tp.per_sec, b.tp.per_sec),
                    ),
                });
            }
        }
        // >= 0.9x flock's throughput with fairness >= 0.9.
        for (label, ours, _) in sections {
            for p in [8, 32] {
                let Some(f) = at(ours, Mech::Flock, p) else {
                    continue;
                };
                for m in [Mech::Acquire, Mech::LockCtl, Mech::Poll] {
                    if let Some(o) = at(ours, m, p) {
                        t.push(Target {
                            name: format!("{label}, {p} processes, {}: >= 0.9x flock's throughput with fairness >= 0.9", m.name()),
                            met: o.per_sec >= 0.9 * f.per_sec && o.fairness >= 0.9,
                            detail: format!(
                                "{:.2}x ({} vs {}), fairness {:.2} (flock {:.2})",
                                against(o.per_sec, f.per_sec),
                                fmt_rate(o.per_sec),
                                fmt_rate(f.per_sec),
                                o.fairness,
                                f.fairness
                            ),
                        });
                    }
                }
            }
        }
        // The worst single wait at 32 processes with a 50 µs section.
        let f = at(&self.busy, Mech::Flock, 32);
        for m in [Mech::Acquire, Mech::LockCtl, Mech::Poll] {
            let Some(o) = at(&self.busy, m, 32) else {
                continue;
            };
            // tt-kmd's figure for the same use: LOCK_ACQUIRE has no
            // counterpart there, its blocking LOCK_CTL is the closest.
            let km = if m == Mech::Acquire { Mech::LockCtl } else { m };
            let b = k.and_then(|k| at(&k.busy, km, 32));
            let mut met = true;
            let mut detail = format!("max {}", fmt_ns(o.wait.max as f64));
            if let Some(f) = &f {
                met &= o.wait.max < f.wait.max;
                let _ = write!(detail, "; flock's {}", fmt_ns(f.wait.max as f64));
            }
            match &b {
                Some(b) => {
                    met &= o.wait.max < b.wait.max;
                    let _ = write!(
                        detail,
                        "; tt-kmd's {} {}",
                        km.name(),
                        fmt_ns(b.wait.max as f64)
                    );
                }
                None => {
                    met = false;
                    detail.push_str("; tt-kmd not measured");
                }
            }
            t.push(Target {
                name: format!(
                    "50 µs section, 32 processes, {}: worst single wait below flock's and tt-kmd's",
                    m.name()
                ),
                met,
                detail,
            });
        }
        t
    }
}

/// Whether `ours` waits no longer than `theirs` at the median and at p99,
/// and the two ratios with their values, for a target's detail.
fn compare_waits(ours: &Hist, theirs: &Hist) -> (bool, String) {
    let (om, op) = (ours.quantile(0.5), ours.quantile(0.99));
    let (tm, tp) = (theirs.quantile(0.5), theirs.quantile(0.99));
    let detail = format!(
        "median {:.2}x ({} vs {}), p99 {:.2}x ({} vs {})",
        om / tm,
        fmt_ns(om),
        fmt_ns(tm),
        op / tp,
        fmt_ns(op),
        fmt_ns(tp)
    );
    (om <= tm && op <= tp, detail)
}

fn find_mix(v: &[(Mix, Vec<(usize, Mixed)>)], k: Mix, p: usize) -> Option<&Mixed> {
    v.iter()
        .find(|(x, _)| *x == k)
        .and_then(|(_, v)| find_n(v, p))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bench::Stat;
    use crate::bench::Throughput;
    use crate::report::Setup;

    /// A run whose rates scale with `speed` and whose waits with
    /// 1/`speed`: flock's waits 3x the others', its fairness 0.3 against
    /// 0.95; every wait distribution 200 values.
    pub(crate) fn sample(speed: f64) -> Results {
        let mut r = Results::new(Setup::with(&[]));
        let st = |m| Stat {
            median: m,
            p99: 2.0 * m,
            samples: 7,
        };
        r.uncontended.push((Mech::Poll, st(1500.0)));
        r.handoff.push((Mech::Flock, st(9000.5)));
        let hist = |scale: f64| {
            let mut h = Hist::new();
            for k in 1..=200u64 {
                h.record((k as f64 * 1000.0 * scale) as u64);
            }
            h
        };
        let busy = |m: Mech, p: usize| {
            let (slow, min) = if m == Mech::Flock {
                (3.0, 30)
            } else {
                (1.0, 95)
            };
            let tp = Throughput::new(1000.0 * speed, min, 100);
            Busy {
                per_sec: tp.per_sec,
                min: tp.min,
                max: tp.max,
                fairness: tp.fairness,
                gap: st(5e4 / speed),
                wait: hist(slow * p as f64 / speed),
            }
        };
        for m in [Mech::LockCtl, Mech::Acquire, Mech::Flock, Mech::Poll] {
            let v: Vec<_> = [2, 8, 32].into_iter().map(|p| (p, busy(m, p))).collect();
            r.busy.push((m, v.clone()));
            r.empty.push((m, v));
        }
        for k in [Mix::LockCtl, Mix::Flock] {
            let v = [2, 8, 32]
                .into_iter()
                .map(|p| {
                    let x = Mixed {
                        per_sec: 900.0 * speed,
                        fairness: 0.5,
                        pollers: Group {
                            procs: p / 2,
                            tp: Throughput::new(400.0 * speed, 50, 100),
                            wait: hist(2.0 / speed),
                        },
                        blockers: Group {
                            procs: p - p / 2,
                            tp: Throughput::new(500.0 * speed, 50, 100),
                            wait: hist(1.0 / speed),
                        },
                    };
                    (p, x)
                })
                .collect();
            r.mixed.push((k, v));
        }
        for pat in Pattern::ALL {
            let v = [1, 8, 32]
                .into_iter()
                .map(|n| {
                    let x = Smc {
                        tp: Throughput::new(300.0 * speed, 9, 10),
                        rtt: hist(n as f64 / speed),
                        errors: 0,
                    };
                    (n, x)
                })
                .collect();
            r.smc.push((pat, v));
        }
        r.smc_device = "/dev/tenstorrent/1".into();
        r
    }

    /// `ours` with tt-kmd's figures as a run on it would hand them over.
    pub(crate) fn with_ttkmd(mut ours: Results, theirs: Results) -> Results {
        let mut t = theirs;
        t.setup = Setup::with(&[("module_version", "2.10.1-pre")]);
        // What tt-bench runs on tt-kmd: LOCK_CTL, its polling, flock.
        let keep = |m: &Mech| m.runs_on_ttkmd();
        t.busy.retain(|(m, _)| keep(m));
        t.empty.retain(|(m, _)| keep(m));
        t.mixed.retain(|(k, _)| k.runs_on_ttkmd());
        t.smc.retain(|(p, _)| p.runs_on_ttkmd());
        ours.ttkmd = Some(Baseline::parse(&Baseline::text(&t)).unwrap());
        ours
    }

    #[test]
    fn tables_put_ttkmd_beside_this_driver() {
        let r = with_ttkmd(sample(1.0), sample(0.5));
        let mut md = String::new();
        r.contention_markdown(&mut md);
        for want in [
            "| acquire | 8 | 1.0 k/s | 1.00x | 0.95 |",
            "| tt-kmd 2.10.1-pre: lock_ctl | 8 | 500 /s | 0.50x | 0.95 |",
            "| tt-kmd 2.10.1-pre: poll_1ms | 32 |",
            "| tt-kmd 2.10.1-pre: LOCK_CTL tries / LOCK_CTL ACQUIRE_BLOCKING | 32 | 450 /s | 0.50 |",
            "| flock LOCK_NB tries / flock LOCK_EX | 2 |",
            "| this driver: smc_wait | 8 | 300 /s | 0.90 |",
            "| tt-kmd 2.10.1-pre: poll_1ms | 1 | 150 /s | 0.90 |",
            "device /dev/tenstorrent/1",
        ] {
            assert!(md.contains(want), "{want:?} not in:\n{md}");
        }
        // tt-kmd has no LOCK_ACQUIRE and flock is measured once.
        assert!(!md.contains("tt-kmd 2.10.1-pre: acquire"));
        assert!(!md.contains("tt-kmd 2.10.1-pre: flock |"));
        let mut alone = String::new();
        sample(1.0).contention_markdown(&mut alone);
        assert!(alone.contains("tt-kmd: not measured in this run"));
        // A run without the SMC section (--only) has no SMC table.
        let mut none = sample(1.0);
        none.smc.clear();
        let mut md = String::new();
        none.contention_markdown(&mut md);
        assert!(!md.contains("SMC_MSG"), "{md}");
        none.smc_note = Some("the driver has no SMC_MSG".into());
        md.clear();
        none.contention_markdown(&mut md);
        assert!(md.contains("This driver: not measured: the driver has no SMC_MSG."));
    }

    #[test]
    fn issue28_targets_follow_the_figures() {
        let targets = |r: &Results| -> Vec<(String, bool)> {
            r.targets_issue28()
                .into_iter()
                .map(|t| (t.name, t.met))
                .collect()
        };
        let vs_ttkmd = |t: &[(String, bool)]| -> Vec<bool> {
            t.iter()
                .filter(|(n, _)| n.contains("tt-kmd"))
                .map(|&(_, m)| m)
                .collect()
        };
        // Twice tt-kmd's rate and half its waits: every one met.
        let faster = targets(&with_ttkmd(sample(2.0), sample(1.0)));
        let v = vs_ttkmd(&faster);
        // 2 sections x 2 mechanisms x 3, mixed x 3, SMC x 3, worst wait x 3.
        assert_eq!(v.len(), 12 + 3 + 3 + 3, "{faster:?}");
        assert!(v.iter().all(|&m| m), "{faster:?}");
        // Half its rate and twice its waits: every one missed.
        let slower = targets(&with_ttkmd(sample(1.0), sample(2.0)));
        assert!(vs_ttkmd(&slower).iter().all(|&m| !m), "{slower:?}");
        // tt-kmd's rate and median, but a tail 250x longer: missed, on the
        // p99 alone.
        let mut tailed = sample(1.0);
        for (m, v) in &mut tailed.busy {
            if *m == Mech::Poll {
                let b = &mut v.iter_mut().find(|(p, _)| *p == 8).unwrap().1;
                let mut h = Hist::new();
                for k in 1..=200u64 {
                    h.record(if k > 195 { 50_000_000 } else { k * 8000 });
                }
                b.wait = h;
            }
        }
        let t = with_ttkmd(tailed, sample(1.0)).targets_issue28();
        let one = t
            .iter()
            .find(|t| {
                t.name
                    .starts_with("50 µs section, 8 processes, poll_1ms: >= 1.0x tt-kmd")
            })
            .unwrap();
        assert!(!one.met, "{}", one.detail);
        assert!(one.detail.contains("wait median 1.00x"), "{}", one.detail);
        // Against flock (same run): fairness 0.95 at 1.0x its rate.
        let flock: Vec<_> = faster
            .iter()
            .filter(|(n, _)| n.contains("0.9x flock"))
            .collect();
        assert_eq!(flock.len(), 2 * 2 * 3);
        assert!(flock.iter().all(|(_, m)| *m));
        // Without tt-kmd, its targets are missed, never met by default.
        let alone = sample(1.0).targets_issue28();
        let not = alone.iter().filter(|t| {
            t.detail.contains("not measured") || t.detail.contains("tt-kmd not measured")
        });
        assert_eq!(not.count(), 12 + 3 + 3);
        assert!(alone
            .iter()
            .filter(|t| t.name.contains("tt-kmd"))
            .all(|t| !t.met));
    }

    #[test]
    fn json_carries_the_distributions() {
        let r = with_ttkmd(sample(1.0), sample(0.5));
        let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        let w = &v["busy_50us"]["acquire"]["32"]["wait_ns"];
        assert_eq!(w["samples"], 200);
        assert_eq!(w["max"], 6_400_000);
        let hist = w["hist"].as_array().unwrap();
        let total: u64 = hist.iter().map(|p| p[1].as_u64().unwrap()).sum();
        assert_eq!(total, 200);
        assert_eq!(v["ttkmd"]["version"], "2.10.1-pre");
        assert_eq!(
            v["ttkmd"]["mixed_50us"]["lock_ctl"]["8"]["pollers"]["procs"],
            4
        );
        assert_eq!(
            v["smc_msg"]["patterns"]["smc_wait"]["8"]["round_trip_ns"]["samples"],
            200
        );
        assert!(v["ttkmd"]["smc_msg"]["patterns"]["smc_wait"].is_null());
        assert!(v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"].as_str().unwrap().contains("worst single wait")));
    }
}

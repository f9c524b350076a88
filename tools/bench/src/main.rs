//! tt-bench: the tt-arbiter locks measured side by side with the
//! alternatives, in one run, as ratios to `flock`.
//!
//! Runs inside the test VM (`make bench`, on the non-debug kernel). For each
//! mechanism (null ioctl, LOCK_CTL, ACQUIRE/RELEASE, flock, OFD locks, a
//! robust process-shared pthread mutex, a 1 ms LOCK_CTL polling loop):
//! uncontended pair cost, hand-off latency, throughput and fairness with
//! 1-32 processes, wake-ups per release with 64 sleepers, release cost with
//! 1-1000 sleepers, empty and 50 µs critical sections at 2, 8 and 32
//! processes with every wait timed, pollers and blocking waiters on one
//! lock; and SMC_MSG round trips with 1, 8 and 32 files. Prints markdown
//! tables and the targets, and writes JSON (also printed between marker
//! lines for the host to extract).
//!
//!     tt-bench [--quick] [--no-device] [--device PATH] [--json FILE]
//!     tt-bench plot RUN.json OUTDIR     (on the host: the SVG figures)

mod bench;
mod mech;
mod plot;
mod report;
mod smc;
mod stats;
mod sys;
mod tables;

use std::process::ExitCode;

use mech::Mech;
use report::{Results, Setup};

struct Options {
    quick: bool,
    only: Option<Vec<String>>,
    mechs: Option<Vec<String>>,
    device: Option<String>,
    json: String,
    /// Running on tt-kmd: only what it can run, written to this file.
    baseline_out: Option<String>,
    /// tt-kmd's figures from the same boot, to compare with.
    ttkmd: Option<String>,
    /// Sleepers of the release-cost measurement.
    waiters: Vec<usize>,
    /// The card whose firmware queue SMC_MSG measures.
    smc_device: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        only: None,
        mechs: None,
        device: Some("/dev/tenstorrent/0".into()),
        json: "/tmp/tt-bench.json".into(),
        baseline_out: None,
        ttkmd: None,
        waiters: vec![1, 10, 100, 1000],
        smc_device: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--no-device" => o.device = None,
            "--only" => {
                let v = args.next().ok_or("--only needs a list")?;
                o.only = Some(v.split(',').map(String::from).collect());
            }
            "--mechs" => {
                let v = args.next().ok_or("--mechs needs a list")?;
                o.mechs = Some(v.split(',').map(String::from).collect());
            }
            "--device" => o.device = Some(args.next().ok_or("--device needs a path")?),
            "--json" => o.json = args.next().ok_or("--json needs a file")?,
            "--baseline-out" => {
                o.baseline_out = Some(args.next().ok_or("--baseline-out needs a file")?)
            }
            "--ttkmd" => o.ttkmd = Some(args.next().ok_or("--ttkmd needs a file")?),
            "--waiters" => {
                let v = args.next().ok_or("--waiters needs a list")?;
                o.waiters = v
                    .split(',')
                    .map(|n| n.parse().map_err(|_| format!("--waiters: '{n}'")))
                    .collect::<Result<_, _>>()?;
            }
            "--smc-device" => o.smc_device = Some(args.next().ok_or("--smc-device needs a path")?),
            "-h" | "--help" => {
                return Err(
                    "usage: tt-bench [--quick] [--no-device] [--device PATH] [--json FILE] \
                     [--only uncontended,handoff,throughput,herd,release,calls,busy,empty,mixed,smc] \
                     [--mechs NAME,...] [--waiters 1,10,100,1000] [--smc-device PATH] \
                     [--baseline-out FILE (on tt-kmd)] [--ttkmd FILE]\n       \
                     tt-bench plot RUN.json OUTDIR"
                        .into(),
                )
            }
            _ => return Err(format!("unknown argument '{a}' (--help)")),
        }
    }
    Ok(o)
}

/// SMC_MSG round trips on `o`'s card (the Blackhole, /dev/tenstorrent/1,
/// when there is one, else the lock's device), if its driver and firmware
/// have a queue; otherwise why not.
fn smc_section(o: &Options, r: &mut Results, dur_ns: u64) {
    let Some(lock_dev) = &o.device else {
        r.smc_note = Some("no device (--no-device)".into());
        return;
    };
    let dev = o.smc_device.clone().unwrap_or_else(|| {
        // A driver just loaded may still be binding the second card.
        let bh = "/dev/tenstorrent/1";
        for _ in 0..100 {
            if std::path::Path::new(bh).exists() {
                return bh.into();
            }
            sys::sleep_ns(100_000_000);
        }
        lock_dev.clone()
    });
    r.smc_device = dev.clone();
    if let Err(e) = smc::probe(&dev) {
        eprintln!("tt-bench: SMC_MSG not measured on {dev}: {e}");
        r.smc_note = Some(e);
        return;
    }
    let patterns = smc::Pattern::ALL
        .into_iter()
        .filter(|p| o.baseline_out.is_none() || p.runs_on_ttkmd());
    for pat in patterns {
        eprintln!("tt-bench: SMC_MSG round trips {} on {dev}", pat.name());
        let v: Vec<_> = [1, 8, 32]
            .into_iter()
            .map(|n| (n, smc::round_trips(&dev, pat, n, dur_ns)))
            .collect();
        for (n, x) in &v {
            if x.errors > 0 {
                eprintln!(
                    "tt-bench: SMC_MSG {} with {n} files: {} messages failed",
                    pat.name(),
                    x.errors
                );
            }
        }
        r.smc.push((pat, v));
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("plot") {
        return match &args[1..] {
            [json, dir] => match plot::plot_file(json, dir) {
                Ok(files) => {
                    for f in files {
                        println!("{f}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("tt-bench plot: {e}");
                    ExitCode::FAILURE
                }
            },
            _ => {
                eprintln!("usage: tt-bench plot RUN.json OUTDIR");
                ExitCode::from(2)
            }
        };
    }
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    sys::raise_nofile(4096);
    let dir = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    mech::init(
        o.device.clone().unwrap_or_default(),
        tt_arbiter::locks::ARC_MSG,
        format!("{dir}/tt-bench.lock"),
    );
    let mechs: Vec<Mech> = Mech::ALL
        .into_iter()
        .filter(|m| o.device.is_some() || !m.needs_device())
        .filter(|m| {
            o.mechs
                .as_ref()
                .is_none_or(|v| v.iter().any(|n| n == m.name()) || *m == Mech::Flock)
        })
        .filter(|m| o.baseline_out.is_none() || m.runs_on_ttkmd())
        .collect();
    // On tt-kmd: what the run on this driver compares with.
    let baseline_sections = ["uncontended", "handoff", "busy", "empty", "mixed", "smc"];
    let run = |section: &str| {
        o.only
            .as_ref()
            .is_none_or(|v| v.iter().any(|s| s == section))
            && (o.baseline_out.is_none() || baseline_sections.contains(&section))
    };
    for &m in &mechs {
        bench::smoke(m, o.baseline_out.is_none());
    }

    // Iteration counts: the full run takes a few minutes of TCG time.
    let q = o.quick;
    // Small batches: a batch that the host deschedules (other VMs) is an
    // outlier the median drops, instead of a share of every batch.
    let (batches, per_batch) = if q { (300, 32) } else { (3000, 32) };
    let handoff_iters = |m: Mech| match (q, m) {
        (_, Mech::Poll) => 30,
        (true, _) => 200,
        (false, _) => 1000,
    };
    let procs: &[usize] = &[1, 2, 4, 8, 32];
    let dur_ns = if q { 200_000_000 } else { 1_000_000_000 };
    let herd_rounds = |m: Mech| match (q, m) {
        (_, Mech::Poll) | (true, _) => 1,
        (false, _) => 4,
    };
    let waiters: &[usize] = &o.waiters;
    let release_samples = |m: Mech, n: usize| -> u64 {
        let s = match n {
            1 | 10 => 300,
            100 => 100,
            _ => 30,
        };
        let s = if m == Mech::Poll { s.min(20) } else { s };
        if q {
            (s / 10).max(5)
        } else {
            s
        }
    };

    let mut r = Results::new(Setup::collect(o.quick));
    let step = |what: &str| eprintln!("tt-bench: {what}");
    for &m in mechs.iter().filter(|_| run("uncontended")) {
        step(&format!("uncontended {}", m.name()));
        r.uncontended
            .push((m, bench::uncontended(m, batches, per_batch)));
    }
    for &m in mechs.iter().filter(|m| m.is_lock() && run("handoff")) {
        step(&format!("hand-off {}", m.name()));
        let (st, sw) = bench::handoff(m, handoff_iters(m), false);
        r.handoff.push((m, st));
        r.handoff_switches.push((m, sw));
    }
    for &m in mechs.iter().filter(|m| m.is_lock() && run("handoff")) {
        step(&format!("hand-off on one CPU {}", m.name()));
        let (st, sw) = bench::handoff(m, handoff_iters(m), true);
        r.handoff_same.push((m, st));
        r.handoff_same_switches.push((m, sw));
    }
    for &m in mechs.iter().filter(|m| m.is_lock() && run("throughput")) {
        step(&format!("throughput {}", m.name()));
        let v = procs
            .iter()
            .map(|&p| (p, bench::throughput(m, p, dur_ns)))
            .collect();
        r.throughput.push((m, v));
    }
    for &m in mechs.iter().filter(|m| m.is_lock() && run("herd")) {
        step(&format!("herd {}", m.name()));
        r.herd.push((m, bench::herd(m, 64, herd_rounds(m))));
    }
    for &m in mechs.iter().filter(|m| m.is_lock() && run("release")) {
        step(&format!("release cost {}", m.name()));
        let v = waiters
            .iter()
            .map(|&n| (n, bench::release_cost(m, n, release_samples(m, n))))
            .collect();
        r.release.push((m, v));
    }

    let busy_procs: &[usize] = &[2, 8, 32];
    let busy_ns = if q { 200_000_000 } else { 1_000_000_000 };
    for &m in mechs.iter().filter(|m| m.is_lock() && run("busy")) {
        step(&format!("50 us critical section {}", m.name()));
        let v = busy_procs
            .iter()
            .map(|&p| (p, bench::busy(m, p, busy_ns, 50_000)))
            .collect();
        r.busy.push((m, v));
    }
    for &m in mechs.iter().filter(|m| m.is_lock() && run("empty")) {
        step(&format!("empty critical section, waits timed {}", m.name()));
        let v = busy_procs
            .iter()
            .map(|&p| (p, bench::busy(m, p, busy_ns, 0)))
            .collect();
        r.empty.push((m, v));
    }
    let mixes = bench::Mix::ALL.into_iter().filter(|k| {
        (o.device.is_some() || !k.needs_device())
            && (o.baseline_out.is_none() || k.runs_on_ttkmd())
            && run("mixed")
    });
    for k in mixes {
        step(&format!("pollers and blocking waiters {}", k.name()));
        let v = busy_procs
            .iter()
            .map(|&p| (p, bench::mixed(k, p, busy_ns, 50_000)))
            .collect();
        r.mixed.push((k, v));
    }
    if run("smc") {
        smc_section(&o, &mut r, busy_ns);
    }

    if let Some(path) = &o.baseline_out {
        let text = report::Baseline::text(&r);
        if let Err(e) = std::fs::write(path, &text) {
            eprintln!("tt-bench: writing {path}: {e}");
            return ExitCode::FAILURE;
        }
        print!("{text}");
        return ExitCode::SUCCESS;
    }
    if let Some(path) = &o.ttkmd {
        match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| report::Baseline::parse(&t))
        {
            Ok(b) => r.ttkmd = Some(b),
            Err(e) => eprintln!("tt-bench: tt-kmd's figures from {path}: {e}"),
        }
    }

    if run("calls") {
        step("single calls");
        r.breakdown = bench::breakdown(if q { 2000 } else { 20000 }, o.device.is_some());
    }

    print!("{}", r.markdown());
    let json = r.json();
    if let Err(e) = std::fs::write(&o.json, &json) {
        eprintln!("tt-bench: writing {}: {e}", o.json);
    }
    println!("{}", report::JSON_BEGIN);
    println!("{json}");
    println!("{}", report::JSON_END);
    ExitCode::SUCCESS
}

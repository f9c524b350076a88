//! tt-bench: the tt-arbiter locks measured side by side with the
//! alternatives, in one run, as ratios to `flock`.
//!
//! Runs inside the test VM (`make bench`, on the non-debug kernel). For each
//! mechanism (null ioctl, LOCK_CTL, ACQUIRE/RELEASE, flock, OFD locks, a
//! robust process-shared pthread mutex, a 1 ms LOCK_CTL polling loop):
//! uncontended pair cost, hand-off latency, throughput and fairness with
//! 1-32 processes, wake-ups per release with 64 sleepers, release cost with
//! 1-1000 sleepers. Prints markdown tables and the targets, and writes JSON
//! (also printed between marker lines for the host to extract).
//!
//!     tt-bench [--quick] [--no-device] [--device PATH] [--json FILE]

mod bench;
mod mech;
mod report;
mod sys;

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
            "-h" | "--help" => {
                return Err(
                    "usage: tt-bench [--quick] [--no-device] [--device PATH] [--json FILE] \
                     [--only uncontended,handoff,throughput,herd,release,calls,busy] [--mechs NAME,...] \
                     [--baseline-out FILE (on tt-kmd)] [--ttkmd FILE]"
                        .into(),
                )
            }
            _ => return Err(format!("unknown argument '{a}' (--help)")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
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
    let baseline_sections = ["uncontended", "handoff", "busy"];
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
    let waiters: &[usize] = &[1, 10, 100, 1000];
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

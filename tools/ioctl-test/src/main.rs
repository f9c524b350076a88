//! `ioctl-test`: end-to-end tests of the tt-arbiter kernel module.
//!
//! ```text
//! ioctl-test info [DEV]     driver and device info of DEV (path or index), or of every card
//! ioctl-test list           names of the scenarios, in run order
//! ioctl-test run [FILTER]   runs the scenarios whose name contains FILTER, prints TAP,
//!                           exits 1 if any failed
//! ioctl-test run --shard K/N [FILTER]
//!                           the same, of those only the K-th of every N (1 <= K <= N):
//!                           N boots share the scenarios (`make check` runs two)
//! ioctl-test smc CARD CODE ARG     posts a firmware message, prints its answer
//! ioctl-test control CARD CMD...   one line to card CARD's emulator
//! ```
//!
//! `smc` and `control` are for `make vm`'s demo (tools/vm/demo).
//!
//! Environment (set by the VM harness, tools/vm/init): TT_CARDS (emulated or
//! legacy), TT_CARDn_BDF and TT_CARDn_ID (PCI address and vendor:device of
//! card n, else read from sysfs), TT_CARDn_CONTROL (the serial port of card
//! n's emulator control socket), TT_STRESS_ITERS (iterations per stress
//! process), TT_OPENERS (threads opening a card at once in
//! `power/opens_do_not_wait_for_the_firmware`, default 1000).

mod card;
mod demo;
mod harness;
#[macro_use]
mod util;
mod scenarios;
mod worker;

use std::process::ExitCode;

use tt_arbiter::{abi, Device};

fn usage() -> ExitCode {
    eprintln!(
        "usage: ioctl-test info [DEV] | list | run [--shard K/N] [FILTER] | smc CARD CODE ARG | control CARD CMD... | smc-accesses CARD N"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["list"] => {
            for s in scenarios::ALL {
                println!("{}", s.name);
            }
            ExitCode::SUCCESS
        }
        ["run"] => exit(harness::run(scenarios::ALL, "", harness::Shard::ALL)),
        ["run", filter] => exit(harness::run(scenarios::ALL, filter, harness::Shard::ALL)),
        ["run", "--shard", shard, ref filter @ ..] if filter.len() <= 1 => {
            match harness::Shard::parse(shard) {
                Some(shard) => exit(harness::run(
                    scenarios::ALL,
                    filter.first().copied().unwrap_or(""),
                    shard,
                )),
                None => usage(),
            }
        }
        ["info"] => info(None),
        ["info", dev] => info(Some(dev)),
        ["smc", card, code, arg] => demo::smc(card, code, arg),
        ["control", card, ref words @ ..] if !words.is_empty() => demo::control(card, words),
        ["smc-accesses", card, count] => demo::smc_accesses(card, count),
        _ => usage(),
    }
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn info(dev: Option<&str>) -> ExitCode {
    let paths: Vec<String> = match dev {
        Some(d) if d.parse::<u32>().is_ok() => vec![util::node(d.parse().unwrap())],
        Some(d) => vec![d.to_string()],
        None => match Device::enumerate() {
            Ok(nodes) => nodes.iter().map(|n| n.path.display().to_string()).collect(),
            Err(e) => {
                eprintln!("enumerate: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    if paths.is_empty() {
        eprintln!("no device under {}", tt_arbiter::DEV_DIR);
        return ExitCode::FAILURE;
    }
    let mut ok = true;
    for path in paths {
        if let Err(e) = print_info(&path) {
            eprintln!("{path}: {e}");
            ok = false;
        }
    }
    exit(ok)
}

fn print_info(path: &str) -> std::io::Result<()> {
    let dev = Device::open(path)?;
    let drv = dev.driver_info()?;
    let d = dev.device_info()?;
    println!("{path}:");
    println!(
        "  driver: api version {}, version {}.{}.{}",
        drv.driver_version,
        drv.driver_version_major,
        drv.driver_version_minor,
        drv.driver_version_patch
    );
    println!(
        "  device: {:04x}:{:04x} subsystem {:04x}:{:04x} at {:04x}:{:02x}:{:02x}.{} max_dma_buf_size_log2 {}",
        d.vendor_id,
        d.device_id,
        d.subsystem_vendor_id,
        d.subsystem_id,
        d.pci_domain,
        d.bus_dev_fn >> 8,
        (d.bus_dev_fn >> 3) & 0x1f,
        d.bus_dev_fn & 7,
        d.max_dma_buf_size_log2
    );
    for i in 0..abi::LOCK_COUNT {
        let q = dev.query(i).map_err(std::io::Error::from)?;
        if q.held || q.waiters > 0 {
            println!(
                "  lock {i} {}: held {} by pid {} ({}) for {:?}, {} waiter(s)",
                abi::lock_name(i).unwrap_or(""),
                q.held,
                q.holder_pid,
                q.holder_comm,
                q.held_for,
                q.waiters
            );
        }
    }
    Ok(())
}

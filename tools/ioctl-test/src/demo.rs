//! Small commands for `make vm`'s demo (tools/vm/demo), which is a shell
//! script: a firmware message sent and answered, and a line to a card
//! emulator's control socket.

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;

use tt_arbiter::abi;

use crate::card::Control;
use crate::util::{ioctl, node};

/// `smc CARD CODE ARG`: posts the firmware message CODE (TEST is 0x90) with
/// ARG in its second word, says so, waits for the answer in the kernel
/// (SMC_WAIT) and prints it: `answer: STATUS W1 ... W7` (hexadecimal).
///
/// The file is opened with `O_APPEND`: such a file casts no power vote
/// (src/power.rs), so opening it sends nothing to the firmware, which the
/// demo keeps paused meanwhile.
pub fn smc(card: &str, code: &str, arg: &str) -> ExitCode {
    match smc_inner(card, code, arg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ioctl-test smc: {e}");
            ExitCode::FAILURE
        }
    }
}

fn number(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a number"))
}

fn smc_inner(card: &str, code: &str, arg: &str) -> Result<(), String> {
    let card: u32 = card.parse().map_err(|_| format!("card {card:?}"))?;
    let (code, arg) = (number(code)?, number(arg)?);
    let path = node(card);
    let dev = OpenOptions::new()
        .read(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("open {path}: {e}"))?;
    let mut post = abi::SmcMsg {
        argsz: std::mem::size_of::<abi::SmcMsg>() as u32,
        flags: abi::SMC_MSG_POST,
        message: [code, arg, 0, 0, 0, 0, 0, 0],
        ..Default::default()
    };
    ioctl(&dev, abi::IOCTL_SMC_MSG, &mut post).map_err(|e| format!("SMC_MSG POST: {e}"))?;
    println!("posted {code:#04x} {arg} (pid {})", std::process::id());
    let _ = std::io::stdout().flush();
    let mut wait = abi::SmcWait {
        argsz: std::mem::size_of::<abi::SmcWait>() as u32,
        ..Default::default()
    };
    ioctl(&dev, abi::IOCTL_SMC_WAIT, &mut wait).map_err(|e| format!("SMC_WAIT: {e}"))?;
    let words: Vec<String> = wait.message.iter().map(|w| format!("{w:#x}")).collect();
    println!("answer: {}", words.join(" "));
    Ok(())
}

/// `control CARD COMMAND...`: one command line to card CARD's emulator
/// (`TT_CARDn_CONTROL`); prints what follows `ok` in its reply.
pub fn control(card: &str, words: &[&str]) -> ExitCode {
    let result = card
        .parse()
        .map_err(|_| format!("card {card:?}"))
        .and_then(Control::open)
        .and_then(|mut c| c.command(&words.join(" ")));
    match result {
        Ok(reply) => {
            println!("{reply}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ioctl-test control: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `smc-accesses CARD N`: N SMC_MSG round trips of TEST (POST, then POLL
/// every 1 ms until answered, as tt-kmd's own test does) on one open file
/// of card CARD, each with the BAR accesses card CARD's emulator served
/// meanwhile (its `accesses` command): one line per round trip, then the
/// fewest. Works on any driver with SMC_MSG (tt-kmd's pull/266 too), to
/// compare what a round trip costs on each.
pub fn smc_accesses(card: &str, count: &str) -> ExitCode {
    match smc_accesses_inner(card, count) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ioctl-test smc-accesses: {e}");
            ExitCode::FAILURE
        }
    }
}

fn smc_accesses_inner(card: &str, count: &str) -> Result<(), String> {
    let n: usize = card.parse().map_err(|_| format!("card {card:?}"))?;
    let count: u32 = count.parse().map_err(|_| format!("count {count:?}"))?;
    let mut control = Control::open(n)?;
    let mut accesses = || -> Result<u64, String> {
        let reply = control.command("accesses")?;
        Ok(reply
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(_, v)| v.parse::<u64>().ok())
            .sum())
    };
    let path = node(n as u32);
    let dev = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("open {path}: {e}"))?;
    // Whatever the open made the driver send is over by then.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut fewest = u64::MAX;
    for i in 0..count {
        let before = accesses()?;
        let mut m = abi::SmcMsg {
            argsz: std::mem::size_of::<abi::SmcMsg>() as u32,
            flags: abi::SMC_MSG_POST,
            message: [0x90, i, 0, 0, 0, 0, 0, 0],
            ..Default::default()
        };
        ioctl(&dev, abi::IOCTL_SMC_MSG, &mut m).map_err(|e| format!("POST: {e}"))?;
        let mut polls = 0;
        loop {
            m.flags = abi::SMC_MSG_POLL;
            polls += 1;
            match ioctl(&dev, abi::IOCTL_SMC_MSG, &mut m) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => return Err(format!("POLL: {e}")),
            }
        }
        let used = accesses()? - before;
        if m.message[..2] != [0, i + 1] {
            return Err(format!("TEST {i} answered {:#x?}", &m.message[..2]));
        }
        println!("round trip {i}: {used} BAR accesses, {polls} POLL");
        fewest = fewest.min(used);
    }
    println!("fewest: {fewest}");
    Ok(())
}

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

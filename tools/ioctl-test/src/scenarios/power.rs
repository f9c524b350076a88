//! Power votes (SET_POWER_STATE, tt-kmd 2.10; src/power.rs): the card's
//! firmware hears what the open files' votes add up to, as the emulator
//! received it (its control socket's `power`): a plain open votes for every
//! flag but the maximum AI clock, an `O_APPEND` open for nothing, a killed
//! voter's vote goes, the last close powers down (Wormhole after its grace,
//! which a new open cancels); bad arguments are `EINVAL` and send nothing.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use tt_arbiter::abi;

use crate::card::Control;
use crate::util::*;

/// What the emulated firmware received: how many power settings, and the
/// last one's flags, flag count, setting count and settings.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Received {
    pub(super) count: u64,
    last: Option<(u16, u8, u8, Vec<u16>)>,
}

fn field<'a>(reply: &'a str, key: &str) -> Result<&'a str, String> {
    reply
        .split_whitespace()
        .find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .ok_or_else(|| format!("no {key}= in {reply:?}"))
}

fn number(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("bad number {s:?}: {e}"))
}

pub(super) fn received(ctl: &mut Control) -> Result<Received, String> {
    let reply = ctl.command("power")?;
    let count = number(field(&reply, "received")?)?;
    if count == 0 {
        return Ok(Received { count, last: None });
    }
    let settings = field(&reply, "settings")?
        .split(',')
        .map(|s| number(s).map(|v| v as u16))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Received {
        count,
        last: Some((
            number(field(&reply, "flags")?)? as u16,
            number(field(&reply, "flags-valid")?)? as u8,
            number(field(&reply, "settings-valid")?)? as u8,
            settings,
        )),
    })
}

/// The last setting as (flags, settings-valid, the first two settings).
pub(super) fn last_of(r: &Received) -> Option<(u16, u8, u16, u16)> {
    r.last
        .as_ref()
        .map(|(flags, _, sv, s)| (*flags, *sv, s[0], s[1]))
}

pub(super) fn state(n: u32) -> Result<String, String> {
    sysfs(&format!(
        "/sys/class/tenstorrent/tenstorrent!{n}/power_votes/state"
    ))
}

fn open_append(n: u32) -> Result<File, String> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .open(node(n))
        .map_err(|e| format!("open {} with O_APPEND: {e}", node(n)))
}

fn power_state(validity: u8, flags: u16, settings: &[u16]) -> abi::PowerState {
    let mut p = abi::PowerState {
        argsz: 40,
        validity,
        power_flags: flags,
        ..abi::PowerState::default()
    };
    p.power_settings[..settings.len()].copy_from_slice(settings);
    p
}

fn set(dev: &impl AsRawFd, arg: &mut abi::PowerState) -> io::Result<i32> {
    ioctl(dev, abi::IOCTL_SET_POWER_STATE, arg)
}

/// Waits until no powerdown is pending from an earlier scenario's close,
/// which would otherwise arrive in the middle of this one.
fn settle(n: u32) -> TestResult {
    let start = Instant::now();
    while state(n)?.contains("powerdown_pending=1") {
        ensure!(
            start.elapsed() < PATIENCE,
            "card {n}: a powerdown stays pending: {}",
            state(n)?
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}

/// Waits for the firmware to receive more than `count` settings.
fn wait_for_message(ctl: &mut Control, count: u64) -> Result<Received, String> {
    let start = Instant::now();
    loop {
        let r = received(ctl)?;
        if r.count > count {
            return Ok(r);
        }
        ensure!(
            start.elapsed() < PATIENCE,
            "no power setting arrived after {count}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

pub fn votes_reach_the_firmware() -> TestResult {
    let all_but_max_clock = 0x7FFE;
    for n in 0..2u32 {
        settle(n)?;
        let mut ctl = Control::open(n as usize)?;
        let start = received(&mut ctl)?;
        // The probe told the firmware "idle", or the last close did.
        ensure_eq!(
            last_of(&start).map(|l| l.0),
            Some(0),
            "card {n}: power flags with no file open"
        );

        // An O_APPEND open votes for nothing and sends nothing.
        let watcher = open_append(n)?;
        ensure_eq!(
            received(&mut ctl)?.count,
            start.count,
            "card {n}: O_APPEND open sent"
        );
        ensure!(state(n)?.contains("voters=1"), "card {n}: {}", state(n)?);

        // A plain open: everything but the maximum AI clock.
        let plain = open(n)?;
        let r = received(&mut ctl)?;
        ensure_eq!(
            r.count,
            start.count + 1,
            "card {n}: messages after a plain open"
        );
        ensure_eq!(
            r.last,
            Some((all_but_max_clock, 15, 0, vec![0; 14])),
            "card {n}: a plain open's vote"
        );

        // The O_APPEND file votes for the maximum clock and two settings.
        let mut vote = power_state(
            abi::power_validity(15, 2),
            abi::POWER_FLAG_MAX_AI_CLK | abi::POWER_FLAG_TENSIX_ENABLE,
            &[300, 7],
        );
        expect_ok(set(&watcher, &mut vote), "SET_POWER_STATE")?;
        let r = received(&mut ctl)?;
        ensure_eq!(r.count, start.count + 2, "card {n}: messages");
        ensure_eq!(
            last_of(&r),
            Some((0x7FFF, 2, 300, 7)),
            "card {n}: two votes"
        );

        // A voter asking for a larger first setting, killed: its vote goes
        // with its file.
        let mut voter = spawn("voter", &[], move |link| {
            let dev = open(n)?;
            let mut vote = power_state(abi::power_validity(0, 1), 0, &[900]);
            expect_ok(set(&dev, &mut vote), "SET_POWER_STATE")?;
            link.send("voted")?;
            let _ = link.recv();
            Ok(())
        })?;
        voter.expect("voted")?;
        ensure_eq!(
            last_of(&received(&mut ctl)?),
            Some((0x7FFF, 2, 900, 7)),
            "card {n}: three votes"
        );
        let votes = sysfs(&format!(
            "/sys/class/tenstorrent/tenstorrent!{n}/power_votes/votes"
        ))?;
        ensure_eq!(
            votes.lines().count(),
            3,
            "card {n}: power_votes/votes {votes:?}"
        );
        ensure!(
            votes.contains(&format!("pid={} ", getpid()))
                && votes.contains("validity=0x10 settings=900,0,"),
            "card {n}: power_votes/votes {votes:?}"
        );
        let status = voter.kill_and_reap()?;
        ensure!(
            died_of(status, libc::SIGKILL),
            "voter: {}",
            describe_status(status)
        );
        let r = received(&mut ctl)?;
        ensure_eq!(
            last_of(&r),
            Some((0x7FFF, 2, 300, 7)),
            "card {n}: after kill -9 of a voter"
        );

        // Bad arguments: EINVAL, nothing sent, the vote unchanged.
        let before = r.count;
        for (what, mut bad) in [
            ("argsz 39", abi::PowerState { argsz: 39, ..vote }),
            ("flags 1", abi::PowerState { flags: 1, ..vote }),
            (
                "reserved0 1",
                abi::PowerState {
                    reserved0: 1,
                    ..vote
                },
            ),
            (
                "15 settings",
                abi::PowerState {
                    validity: abi::power_validity(15, 15),
                    ..vote
                },
            ),
        ] {
            expect_errno(set(&watcher, &mut bad), libc::EINVAL, what)?;
        }
        ensure_eq!(
            received(&mut ctl)?.count,
            before,
            "card {n}: sent for a bad argument"
        );

        // The voter with settings closes: the plain open's vote is left.
        drop(watcher);
        let r = received(&mut ctl)?;
        ensure_eq!(r.count, before + 1, "card {n}: messages after a close");
        ensure_eq!(
            last_of(&r),
            Some((all_but_max_clock, 0, 0, 0)),
            "card {n}: one vote left"
        );

        // The last close powers down: Blackhole at once, Wormhole after
        // its grace, which an open in the meantime cancels.
        drop(plain);
        if n == 0 {
            ensure_eq!(
                received(&mut ctl)?.count,
                before + 1,
                "Wormhole: sent at once"
            );
            ensure!(state(0)?.contains("powerdown_pending=1"), "{}", state(0)?);
            let again = open(0)?;
            ensure!(state(0)?.contains("powerdown_pending=0"), "{}", state(0)?);
            ensure_eq!(
                last_of(&received(&mut ctl)?),
                Some((all_but_max_clock, 0, 0, 0)),
                "Wormhole: reopened within the grace"
            );
            let count = received(&mut ctl)?.count;
            drop(again);
            let r = wait_for_message(&mut ctl, count)?;
            ensure_eq!(r.count, count + 1, "Wormhole: messages after the grace");
            ensure_eq!(last_of(&r).map(|l| l.0), Some(0), "Wormhole: powered down");
        } else {
            let r = received(&mut ctl)?;
            ensure_eq!(
                r.count,
                before + 2,
                "Blackhole: messages after the last close"
            );
            ensure_eq!(last_of(&r).map(|l| l.0), Some(0), "Blackhole: powered down");
        }
        ensure!(
            state(n)?.contains("powerdown_pending=0"),
            "card {n}: {}",
            state(n)?
        );

        // An O_APPEND open and close change nothing at all.
        let count = received(&mut ctl)?.count;
        drop(open_append(n)?);
        ensure_eq!(
            received(&mut ctl)?.count,
            count,
            "card {n}: O_APPEND open and close"
        );
        ensure!(
            state(n)?.contains("powerdown_pending=0"),
            "card {n}: {}",
            state(n)?
        );
    }
    Ok(())
}

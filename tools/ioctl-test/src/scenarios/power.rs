//! Power votes (SET_POWER_STATE, tt-kmd 2.10; src/power.rs): the card's
//! firmware hears what the open files' votes add up to, as the emulator
//! received it (its control socket's `power`): a plain open votes for every
//! flag but the maximum AI clock, an `O_APPEND` open for nothing, a killed
//! voter's vote goes, the last close powers down (Wormhole after its grace,
//! which a new open cancels); bad arguments are `EINVAL` and send nothing.
//! The firmware hears only changes of what the votes add up to, and
//! opening a card never waits for it: a power message goes out after the
//! open returned (`sending=1` in `power_votes/state` until it is answered).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use tt_arbiter::{abi, Device};

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

/// Waits until card `n`'s firmware answered the power message the driver
/// posted last, if any (`sending=0`): opens and closes do not wait for it.
/// A driver without the field sent it before the open or close returned.
pub(super) fn power_settled(n: u32) -> TestResult {
    wait_while_state_shows(n, "sending=1", "a power message stays unanswered", 10)
}

/// Waits until no powerdown is pending from an earlier scenario's close,
/// which would otherwise arrive in the middle of this one, and no power
/// message is on its way.
pub(super) fn settle(n: u32) -> TestResult {
    power_settled(n)?;
    wait_while_state_shows(n, "powerdown_pending=1", "a powerdown stays pending", 50)?;
    power_settled(n)
}

/// Waits, looking every `period_ms`, until card `n`'s `power_votes/state`
/// no longer shows `field`; `stuck` says what it means if it always does.
fn wait_while_state_shows(n: u32, field: &str, stuck: &str, period_ms: u64) -> TestResult {
    let start = Instant::now();
    while state(n)?.contains(field) {
        ensure!(
            start.elapsed() < PATIENCE,
            "card {n}: {stuck}: {}",
            state(n)?
        );
        std::thread::sleep(Duration::from_millis(period_ms));
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
        std::thread::sleep(Duration::from_millis(50));
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
        power_settled(n)?;
        ensure_eq!(
            received(&mut ctl)?.count,
            start.count,
            "card {n}: O_APPEND open sent"
        );
        ensure!(state(n)?.contains("voters=1"), "card {n}: {}", state(n)?);

        // A plain open: everything but the maximum AI clock.
        let plain = open(n)?;
        power_settled(n)?;
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
        power_settled(n)?;
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
        power_settled(n)?;
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
        power_settled(n)?;
        if n == 0 {
            ensure_eq!(
                received(&mut ctl)?.count,
                before + 1,
                "Wormhole: sent at once"
            );
            ensure!(state(0)?.contains("powerdown_pending=1"), "{}", state(0)?);
            let again = open(0)?;
            ensure!(state(0)?.contains("powerdown_pending=0"), "{}", state(0)?);
            power_settled(0)?;
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
        power_settled(n)?;
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

/// How many threads open a card at once: 1000, or `TT_OPENERS` (`make
/// check` gives the debug kernel's boots 250: the same paths under lockdep
/// and KASAN, in a quarter of the minute 1000 threads take there; on
/// Debian's kernel it opens from 1000).
fn openers() -> usize {
    std::env::var("TT_OPENERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1000)
}
/// How long the openers may take, all together, to return while the
/// firmware is silent: a guard against a hang, far above what an open
/// costs (it adds up the votes under a short lock), far below what
/// waiting for the firmware costs (a driver that sends each open's vote
/// and waits for the answer, up to its 2 s limit, one open after another,
/// needs 2000 s for 1000 opens).
const OPEN_GUARD: Duration = Duration::from_secs(60);

/// What [`open_from_threads`] got.
struct Opened {
    files: Vec<Device>,
    /// How many opens had not returned within [`OPEN_GUARD`].
    missing: usize,
    slowest: Duration,
    /// From the release of the threads until the last open returned.
    all: Duration,
}

/// Opens card `n` from `count` threads released at once, waiting for them
/// at most [`OPEN_GUARD`].
fn open_from_threads(n: u32, count: usize) -> Result<Opened, String> {
    let start = Arc::new(Barrier::new(count + 1));
    let (tx, rx) = mpsc::channel();
    for i in 0..count {
        let (start, tx) = (start.clone(), tx.clone());
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                start.wait();
                let began = Instant::now();
                let r = open(n);
                let _ = tx.send((i, r, began, Instant::now()));
            })
            .map_err(|e| format!("thread {i}: {e}"))?;
    }
    drop(tx);
    start.wait();
    let began = Instant::now();
    let mut opened = Opened {
        files: Vec::with_capacity(count),
        missing: count,
        slowest: Duration::ZERO,
        all: Duration::ZERO,
    };
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    while opened.missing > 0 {
        let left = OPEN_GUARD.saturating_sub(began.elapsed());
        let Ok((i, r, from, to)) = rx.recv_timeout(left) else {
            break;
        };
        opened
            .files
            .push(r.map_err(|e| format!("opener {i}: {e}"))?);
        opened.missing -= 1;
        opened.slowest = opened.slowest.max(to - from);
        first = Some(first.map_or(from, |f| f.min(from)));
        last = Some(last.map_or(to, |l| l.max(to)));
    }
    if let (Some(first), Some(last)) = (first, last) {
        opened.all = last - first;
    }
    Ok(opened)
}

/// Whether `smc/queue` of card `n` lists a driver message of type `code`
/// not answered yet.
fn kernel_message_waiting(n: u32, code: u8) -> Result<bool, String> {
    let queue = sysfs(&format!("/sys/class/tenstorrent/tenstorrent!{n}/smc/queue"))?;
    Ok(queue.lines().any(|l| {
        l.contains("comm=kernel ")
            && l.contains(&format!(" type=0x{code:02x} "))
            && !l.contains("state=done")
    }))
}

/// Opening a card never waits for its firmware, and only a change of what
/// the votes add up to is sent: with the firmware silent (`arc-hang`, and
/// a message deadline long enough that nothing times out), 1000 threads
/// ([`openers`]) open each card at once and every open returns while the
/// power message the first open caused still waits for the firmware in
/// the card's message queue; once it answers, it has received one message
/// for all the opens. Then, with the firmware answering, 200 more opens and
/// every close but the last send nothing; the last close powers down.
/// The slowest open is printed (a guard of 60 s for all of them catches a
/// hang, not a speed).
///
/// Seen failing: on 0.4.0's driver, which sent every plain open's vote
/// and waited for the answer (up to 2 s) under the votes' mutex, "card 0:
/// 28 of 1000 opens had returned after 60s with the firmware silent" (and
/// without the resume, hung-task reports and a VM that did not finish in
/// 900 s); with opens waiting (without the mutex) for the answer to the
/// message that carries their vote, "0 of 1000 opens had returned"; with
/// every counting open asking for a message though the sum is unchanged,
/// "card 0: messages for 1000 opens: got 3, expected 2"; with that only
/// when no message is in flight, "card 0: opens that change nothing sent
/// messages: got 15, expected 2".
pub fn opens_do_not_wait_for_the_firmware() -> TestResult {
    const MORE: usize = 200;
    let openers = openers();
    super::reliability::raise_nofile((openers + MORE + 256) as u64)?;
    let all_but_max_clock = 0x7FFE;
    for n in 0..2u32 {
        let code = if n == 0 { 0xC0 } else { 0x21 };
        settle(n)?;
        let mut ctl = Control::open(n as usize)?;
        let start = received(&mut ctl)?;
        ensure_eq!(
            last_of(&start).map(|l| l.0),
            Some(0),
            "card {n}: power flags with no file open"
        );

        // The firmware silent; the driver's message waits for it as long
        // as the scenario runs.
        let timeout = super::smc::Timeout::set(n, 600_000)?;
        let hung = super::smc::Hung::new(n as usize)?;
        let opened = open_from_threads(n, openers)?;
        if opened.missing > 0 {
            // The firmware answers before the files opened so far are
            // closed: a close may wait for the opens that wait for it.
            let resumed = hung.resume();
            return Err(format!(
                "card {n}: {} of {openers} opens had returned after {OPEN_GUARD:?} with the \
                 firmware silent (then resumed: {resumed:?})",
                openers - opened.missing
            ));
        }
        println!(
            "# card {n}: {openers} opens at once with the firmware silent: the slowest took \
             {:.1} ms, all returned within {:.1} ms",
            opened.slowest.as_secs_f64() * 1e3,
            opened.all.as_secs_f64() * 1e3
        );
        let files = opened.files;
        ensure!(
            kernel_message_waiting(n, code)?,
            "card {n}: every open returned, but no power message waits for the \
             silent firmware: {}",
            sysfs(&format!("/sys/class/tenstorrent/tenstorrent!{n}/smc/queue"))?
        );
        ensure!(
            state(n)?.contains(&format!("voters={openers} ")),
            "card {n}: {}",
            state(n)?
        );
        hung.resume()?;
        power_settled(n)?;
        drop(timeout);
        let r = received(&mut ctl)?;
        ensure_eq!(
            r.count,
            start.count + 1,
            "card {n}: messages for {openers} opens"
        );
        ensure_eq!(
            last_of(&r).map(|l| l.0),
            Some(all_but_max_clock),
            "card {n}: the opens' vote"
        );

        // What the votes add up to does not change: nothing is sent.
        let more = open_from_threads(n, MORE)?;
        ensure_eq!(more.missing, 0, "card {n}: opens not returned");
        let more = more.files;
        power_settled(n)?;
        ensure_eq!(
            received(&mut ctl)?.count,
            start.count + 1,
            "card {n}: opens that change nothing sent messages"
        );
        drop(more);
        let mut files = files;
        let last = files.pop();
        drop(files);
        power_settled(n)?;
        ensure_eq!(
            received(&mut ctl)?.count,
            start.count + 1,
            "card {n}: closes that change nothing sent messages"
        );
        drop(last);
        let r = wait_for_message(&mut ctl, start.count + 1)?;
        ensure_eq!(
            (r.count, last_of(&r).map(|l| l.0)),
            (start.count + 2, Some(0)),
            "card {n}: the last close powers down"
        );
    }
    Ok(())
}

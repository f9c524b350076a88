//! Helper processes driven by lines: a "worker" owns its own open file of a
//! card and runs lock commands on request, and a "chain" of waiters records
//! its grant order in a pipe.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use tt_arbiter::abi;

use crate::util::{
    self, errname, open, pipe, read_timeout, spawn, wait_waiters, Child, Link, TestResult, PATIENCE,
};

static SIGNAL_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = SIGNAL_FD.load(Ordering::SeqCst);
    // SAFETY: write(2) is async-signal-safe; a short line is written whole.
    unsafe { libc::write(fd, b"sig\n".as_ptr().cast(), 4) };
}

/// Answer of a worker: `Ok(values)` or `Err((errno, holder_pid))`.
pub type Reply = Result<Vec<u64>, (i32, u32)>;

/// Starts a worker on card `card`. Commands (one line each; numbers decimal,
/// masks hex), replies `ok V...` or `err ERRNO HOLDER_PID`:
/// - `acquire I` (blocking ACQUIRE): `ok out_flags waited_ns`
/// - `try I` (NONBLOCK ACQUIRE), `deadline I NS` (absolute DEADLINE)
/// - `set MASK` (blocking ACQUIRE_SET): `ok owner_died_mask waited_ns`
/// - `ctl I FLAGS` (LOCK_CTL): `ok value`
/// - `release MASK`: `ok`
/// - `handler restart|norestart`: SIGUSR1 handler that prints `sig`
/// - `comm NAME`: sets its comm
/// - `close`: closes its device file; `exit`: exits (holding what it holds)
pub fn worker(name: &str, card: u32) -> Result<Child, String> {
    let mut child = spawn(name, &[], move |link| worker_loop(link, card))?;
    child.expect("ready")?;
    Ok(child)
}

fn worker_loop(link: &mut Link, card: u32) -> TestResult {
    let mut dev = Some(open(card)?);
    link.send("ready")?;
    loop {
        let line = link.recv()?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> u64 { words.get(i).and_then(|w| w.parse().ok()).unwrap_or(0) };
        let hex = |i: usize| -> u64 {
            words
                .get(i)
                .and_then(|w| u64::from_str_radix(w, 16).ok())
                .unwrap_or(0)
        };
        let d = dev.as_ref();
        let reply = match (words[0], d) {
            ("exit", _) => return Ok(()),
            ("close", _) => {
                dev = None;
                "ok".to_string()
            }
            ("comm", _) => {
                util::set_comm(words[1]);
                "ok".to_string()
            }
            ("handler", _) => {
                SIGNAL_FD.store(link.raw_tx(), Ordering::SeqCst);
                util::install_handler(libc::SIGUSR1, on_signal, words[1] == "restart")?;
                "ok".to_string()
            }
            (_, None) => return Err(format!("{line}: device already closed")),
            ("acquire" | "try" | "deadline", Some(d)) => {
                let flags = match words[0] {
                    "acquire" => 0,
                    "try" => abi::LOCK_NONBLOCK,
                    _ => abi::LOCK_DEADLINE,
                };
                let (r, a) = util::acquire(d, num(1) as u32, flags, num(2));
                format_reply(
                    r.map(|_| vec![a.out_flags as u64, a.waited_ns]),
                    a.holder_pid,
                )
            }
            ("set", Some(d)) => {
                let (r, a) = util::acquire_set(d, hex(1), 0, 0);
                format_reply(
                    r.map(|_| vec![a.owner_died_mask, a.waited_ns]),
                    a.holder_pid,
                )
            }
            ("ctl", Some(d)) => format_reply(
                util::lock_ctl(d, num(1) as u8, num(2) as u32).map(|v| vec![v as u64]),
                0,
            ),
            ("release", Some(d)) => format_reply(util::release(d, hex(1)).map(|_| vec![]), 0),
            _ => return Err(format!("unknown worker command {line:?}")),
        };
        link.send(&reply)?;
    }
}

fn format_reply(r: std::io::Result<Vec<u64>>, holder: u32) -> String {
    match r {
        Ok(v) => {
            let mut s = "ok".to_string();
            for x in v {
                s += &format!(" {x}");
            }
            s
        }
        Err(e) => format!("err {} {holder}", e.raw_os_error().unwrap_or(0)),
    }
}

/// Reads a worker's reply.
pub fn reply(w: &mut Child) -> Result<Reply, String> {
    let line = w.recv()?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let nums: Vec<u64> = words
        .iter()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    match words.first() {
        Some(&"ok") => Ok(Ok(nums)),
        Some(&"err") if nums.len() == 2 => Ok(Err((nums[0] as i32, nums[1] as u32))),
        _ => Err(format!("unexpected worker line {line:?}")),
    }
}

/// Sends `cmd` and requires success; returns the values.
pub fn ok(w: &mut Child, cmd: &str) -> Result<Vec<u64>, String> {
    w.send(cmd)?;
    ok_reply(w, cmd)
}

/// Reads a reply to `cmd` (already sent) and requires success.
pub fn ok_reply(w: &mut Child, cmd: &str) -> Result<Vec<u64>, String> {
    match reply(w)? {
        Ok(v) => Ok(v),
        Err((errno, holder)) => Err(format!(
            "worker {cmd:?}: {} (holder_pid {holder})",
            errname(errno)
        )),
    }
}

/// Reads a reply to `cmd` (already sent) and requires error `errno`;
/// returns the holder_pid reported.
pub fn err_reply(w: &mut Child, cmd: &str, errno: i32) -> Result<u32, String> {
    match reply(w)? {
        Err((e, holder)) if e == errno => Ok(holder),
        Err((e, _)) => Err(format!(
            "worker {cmd:?}: got {}, expected {}",
            errname(e),
            errname(errno)
        )),
        Ok(v) => Err(format!(
            "worker {cmd:?}: succeeded ({v:?}), expected {}",
            errname(errno)
        )),
    }
}

/// How a chain waiter waits.
#[derive(Clone, Copy, Debug)]
pub enum How {
    /// Blocking ACQUIRE, then RELEASE.
    Acquire,
    /// LOCK_CTL ACQUIRE_BLOCKING, then LOCK_CTL RELEASE.
    Ctl,
}

/// Queues `n` waiters on lock `index` of card `card`, one after the other:
/// each is known to be queued (QUERY's waiter count) before the next starts.
/// When granted, waiter i writes byte i to the returned pipe, releases and
/// exits. `how(i)` chooses its command.
pub fn queue_chain(
    dev: &tt_arbiter::Device,
    card: u32,
    index: u32,
    n: usize,
    how: impl Fn(usize) -> How,
) -> Result<(Vec<Child>, OwnedFd), String> {
    let (rx, tx) = pipe()?;
    let base = util::query(dev, index)?.waiters;
    let mut children = Vec::new();
    for i in 0..n {
        let how = how(i);
        let txfd = tx.as_raw_fd();
        let child = spawn(&format!("waiter {i} ({how:?})"), &[txfd], move |_| {
            let d = open(card)?;
            match how {
                How::Acquire => {
                    let (r, _) = util::acquire(&d, index, 0, 0);
                    util::expect_ok(r, "blocking ACQUIRE")?;
                }
                How::Ctl => {
                    let v = util::expect_ok(
                        util::lock_ctl(&d, index as u8, abi::LOCK_CTL_ACQUIRE_BLOCKING),
                        "ACQUIRE_BLOCKING",
                    )?;
                    ensure_eq!(v, 1, "ACQUIRE_BLOCKING value");
                }
            }
            util::write_all(txfd, &[i as u8]).map_err(|e| format!("write grant: {e}"))?;
            match how {
                How::Acquire => util::expect_ok(util::release(&d, 1 << index), "RELEASE").map(drop),
                How::Ctl => {
                    let v = util::expect_ok(
                        util::lock_ctl(&d, index as u8, abi::LOCK_CTL_RELEASE),
                        "LOCK_CTL RELEASE",
                    )?;
                    ensure_eq!(v, 1, "LOCK_CTL RELEASE value");
                    Ok(())
                }
            }
        })?;
        children.push(child);
        wait_waiters(dev, index, base + i as u32 + 1)?;
    }
    Ok((children, rx))
}

/// Reads `n` grant bytes (bounded wait).
pub fn read_grants(rx: &OwnedFd, n: usize) -> Result<Vec<u8>, String> {
    let mut got = Vec::new();
    while got.len() < n {
        let mut buf = [0u8; 64];
        let k = read_timeout(rx.as_raw_fd(), &mut buf[..n - got.len()], PATIENCE)
            .map_err(|e| format!("after grants {got:?}: {e}"))?;
        if k == 0 {
            return Err(format!("grant pipe closed after {got:?}"));
        }
        got.extend_from_slice(&buf[..k]);
    }
    Ok(got)
}

/// Tells a worker to exit and waits for it.
pub fn finish(w: Child) -> TestResult {
    w.send("exit")?;
    w.wait()
}

/// Waits for every child; the first failure wins.
pub fn wait_all(children: Vec<Child>) -> TestResult {
    let mut result = Ok(());
    for c in children {
        let r = c.wait();
        if result.is_ok() {
            result = r;
        }
    }
    result
}

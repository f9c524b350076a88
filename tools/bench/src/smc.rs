//! SMC_MSG round trips (tt-kmd 2.11's command, nr 17: the driver owns the
//! firmware's message queue and shares it between open files): a TEST
//! message (0x90, answered with its argument + 1) posted and collected in a
//! loop by 1, 8 or 32 processes, each with its own open file.

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

use tt_arbiter::abi::{self, Extensible};

use crate::bench::{Throughput, MAX_TASKS};
use crate::stats::{Hist, SharedHist};
use crate::sys::{self, now_ns};

/// The firmware's TEST message.
const TEST: u32 = 0x90;

/// How a process waits for its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// POLL at once, then every 1 ms until done (tt-kmd's own smc_msg
    /// test; tt-kmd's queue moves only inside a POST or a POLL).
    Poll1ms,
    /// This driver's SMC_WAIT: asleep until the response is in.
    Wait,
}

impl Pattern {
    pub const ALL: [Pattern; 2] = [Pattern::Poll1ms, Pattern::Wait];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Poll1ms => "poll_1ms",
            Pattern::Wait => "smc_wait",
        }
    }

    pub fn from_name(n: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == n)
    }

    /// tt-kmd has POST and POLL only.
    pub fn runs_on_ttkmd(self) -> bool {
        self == Pattern::Poll1ms
    }
}

/// Round trips of one pattern with a number of files: messages per second,
/// fairness between the files, every round trip (from the POST to the
/// response in hand), and the messages that failed or came back wrong.
#[derive(Clone, Debug)]
pub struct Smc {
    pub tp: Throughput,
    pub rtt: Hist,
    pub errors: u64,
}

fn open(path: &str) -> io::Result<i32> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a valid path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

fn ioctl<T>(fd: i32, cmd: u32, arg: &mut T) -> io::Result<()> {
    // SAFETY: `arg` is the struct `cmd` reads and writes.
    if unsafe { libc::ioctl(fd, cmd as _, arg as *mut T) } < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn post(fd: i32, arg: u32) -> io::Result<()> {
    let mut m = abi::SmcMsg::new();
    m.flags = abi::SMC_MSG_POST;
    m.message[0] = TEST;
    m.message[1] = arg;
    ioctl(fd, abi::IOCTL_SMC_MSG, &mut m)
}

fn poll(fd: i32) -> io::Result<[u32; 8]> {
    let mut m = abi::SmcMsg::new();
    m.flags = abi::SMC_MSG_POLL;
    ioctl(fd, abi::IOCTL_SMC_MSG, &mut m).map(|()| m.message)
}

fn wait(fd: i32) -> io::Result<[u32; 8]> {
    let mut w = abi::SmcWait::new();
    ioctl(fd, abi::IOCTL_SMC_WAIT, &mut w)?;
    if w.out_flags & abi::SMC_WAIT_DONE == 0 {
        return Err(io::Error::other("SMC_WAIT returned without SMC_WAIT_DONE"));
    }
    Ok(w.message)
}

/// POST TEST `arg` and waits for its answer as `pattern` does: whether
/// it came back right.
fn round_trip(fd: i32, pattern: Pattern, arg: u32) -> Result<(), String> {
    post(fd, arg).map_err(|e| format!("POST: {e}"))?;
    let m = match pattern {
        Pattern::Wait => wait(fd).map_err(|e| format!("SMC_WAIT: {e}"))?,
        Pattern::Poll1ms => loop {
            match poll(fd) {
                Ok(m) => break m,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => sys::sleep_ns(1_000_000),
                Err(e) => return Err(format!("POLL: {e}")),
            }
        },
    };
    if (m[0], m[1]) == (0, arg.wrapping_add(1)) {
        Ok(())
    } else {
        Err(format!(
            "TEST {arg:#x} answered status {:#x}, {:#x}",
            m[0], m[1]
        ))
    }
}

/// Whether `device` can run the benchmark: its driver has SMC_MSG and its
/// firmware a queue that answers TEST (with 10 s for the answer).
pub fn probe(device: &str) -> Result<(), String> {
    let fd = open(device).map_err(|e| format!("open {device}: {e}"))?;
    let r = (|| {
        match post(fd, 41) {
            Ok(()) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
                return Err(format!(
                    "the driver has no SMC_MSG (nr 17: {e}); tt-kmd has it from its pull request 266 (2.11)"
                ))
            }
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                return Err("the card's firmware publishes no message queue (EOPNOTSUPP)".into())
            }
            Err(e) => return Err(format!("POST TEST: {e}")),
        }
        let deadline = now_ns() + 10_000_000_000;
        loop {
            match poll(fd) {
                Ok(m) if (m[0], m[1]) == (0, 42) => return Ok(()),
                Ok(m) => return Err(format!("TEST 41 answered {:#x}, {:#x}", m[0], m[1])),
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && now_ns() < deadline => {
                    sys::sleep_ns(1_000_000)
                }
                Err(e) => return Err(format!("POLL TEST: {e}")),
            }
        }
    })();
    // SAFETY: our descriptor (closing abandons a message left outstanding).
    unsafe { libc::close(fd) };
    r
}

#[repr(C)]
struct Shm {
    stop: AtomicU32,
    measuring: AtomicU32,
    ready: AtomicU32,
    errors: AtomicU64,
    counts: [AtomicU64; MAX_TASKS],
    rtt: SharedHist,
}

/// `files` processes, each with its own open file of `device`, posting
/// TEST in a loop for `dur_ns` after a warm-up of a quarter of it.
pub fn round_trips(device: &str, pattern: Pattern, files: usize, dur_ns: u64) -> Smc {
    let shm = sys::shared::<Shm>();
    let gun = sys::StartGun::new();
    let pids: Vec<_> = (0..files)
        .map(|i| {
            let gun = &gun;
            sys::fork_child(move || {
                let fd = open(device).unwrap_or_else(|e| panic!("open {device}: {e}"));
                shm.ready.fetch_add(1, SeqCst);
                gun.wait();
                let mut seq = 0u32;
                while shm.stop.load(SeqCst) == 0 {
                    seq = seq.wrapping_add(1);
                    let arg = ((i as u32) << 20) | (seq & 0xf_ffff);
                    let t0 = now_ns();
                    let r = round_trip(fd, pattern, arg);
                    let t1 = now_ns();
                    let measuring = shm.measuring.load(SeqCst) != 0;
                    match r {
                        Ok(()) => {
                            if measuring {
                                shm.rtt.record(t1 - t0);
                            }
                            shm.counts[i].fetch_add(1, SeqCst);
                        }
                        Err(e) => {
                            if shm.errors.fetch_add(1, SeqCst) < 5 {
                                eprintln!("tt-bench: SMC_MSG, file {i}: {e}");
                            }
                        }
                    }
                }
                // SAFETY: our descriptor.
                unsafe { libc::close(fd) };
                0
            })
        })
        .collect();
    while shm.ready.load(SeqCst) < files as u32 {
        sys::sleep_ns(1_000_000);
    }
    gun.fire();
    let snapshot = || -> Vec<u64> { (0..files).map(|i| shm.counts[i].load(SeqCst)).collect() };
    sys::sleep_ns(dur_ns / 4);
    shm.measuring.store(1, SeqCst);
    let (c0, t0) = (snapshot(), now_ns());
    sys::sleep_ns(dur_ns);
    let (c1, t1) = (snapshot(), now_ns());
    shm.measuring.store(0, SeqCst);
    shm.stop.store(1, SeqCst);
    sys::wait_all(&pids);
    let counts: Vec<u64> = c1.iter().zip(&c0).map(|(a, b)| a - b).collect();
    Smc {
        tp: Throughput::of(&counts, t1 - t0),
        rtt: shm.rtt.snapshot(),
        errors: shm.errors.load(SeqCst),
    }
}

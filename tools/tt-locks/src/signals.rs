//! SIGINT, SIGTERM and SIGHUP as events: a handler (without SA_RESTART, so
//! a blocking lock wait returns EINTR) records the signal, and [`Signals::wait`]
//! sleeps until a signal, a time or the end of standard input without
//! missing a signal that arrives just before it sleeps (ppoll's mask).

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Instant;

static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING.store(sig, Ordering::SeqCst);
}

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The handlers, installed.
pub struct Signals(());

/// Why [`Signals::wait`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// The time given passed.
    Elapsed,
    /// Standard input reached its end (or failed).
    Eof,
    /// This signal arrived.
    Signal(libc::c_int),
}

/// "SIGINT", "SIGTERM", ... for messages.
pub fn name(sig: libc::c_int) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        n => format!("signal {n}"),
    }
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> io::Result<Signals> {
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is valid; the handler only stores
            // to an atomic, which is async-signal-safe.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = 0;
                libc::sigemptyset(&mut sa.sa_mask);
                if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(Signals(()))
    }

    /// The signal received, if any.
    pub fn pending(&self) -> Option<libc::c_int> {
        match PENDING.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// Sleeps until `until` (forever if `None`), a signal, or, if
    /// `stdin_eof`, the end of standard input (data read is discarded).
    pub fn wait(&self, until: Option<Instant>, stdin_eof: bool) -> WaitEnd {
        // Block the signals, check, then let ppoll unblock them atomically
        // while it sleeps: a signal cannot slip in between.
        // SAFETY: sigset_t values initialised by sigemptyset/sigprocmask.
        let mut blocked: libc::sigset_t = unsafe { std::mem::zeroed() };
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid sigset pointers.
        unsafe {
            libc::sigemptyset(&mut blocked);
            for sig in SIGNALS {
                libc::sigaddset(&mut blocked, sig);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut old);
        }
        let mut sleep_mask = old;
        // SAFETY: valid sigset pointer.
        unsafe {
            for sig in SIGNALS {
                libc::sigdelset(&mut sleep_mask, sig);
            }
        }
        let end = loop {
            if let Some(sig) = self.pending() {
                break WaitEnd::Signal(sig);
            }
            let ts = match until {
                Some(t) => {
                    let left = t.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break WaitEnd::Elapsed;
                    }
                    Some(libc::timespec {
                        tv_sec: left.as_secs().min(i64::MAX as u64) as libc::time_t,
                        tv_nsec: left.subsec_nanos() as libc::c_long,
                    })
                }
                None => None,
            };
            let mut fds = [libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            }];
            let nfds = if stdin_eof { 1 } else { 0 };
            // SAFETY: `fds` holds `nfds` valid entries; the timespec and
            // the mask outlive the call.
            let rc = unsafe {
                libc::ppoll(
                    fds.as_mut_ptr(),
                    nfds,
                    ts.as_ref().map_or(std::ptr::null(), |t| t as *const _),
                    &sleep_mask,
                )
            };
            if rc < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                break WaitEnd::Eof;
            }
            if rc > 0 && stdin_eof {
                if fds[0].revents & libc::POLLNVAL != 0 {
                    break WaitEnd::Eof;
                }
                let mut buf = [0u8; 4096];
                // SAFETY: reading into a local buffer.
                let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
                if n == 0 {
                    break WaitEnd::Eof;
                }
                if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    break WaitEnd::Eof;
                }
            }
        };
        // SAFETY: restoring the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        end
    }
}

//! Helpers shared by the scenarios: assertions, raw ioctls, child processes
//! with pipes, shared memory, bounded polling of QUERY, sysfs.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tt_arbiter::abi::{self, Extensible};
use tt_arbiter::{Device, LockState, Wait};

/// What a scenario returns: `Err` carries the diagnostics.
pub type TestResult = Result<(), String>;

/// How long a bounded wait for another process may take before it is
/// reported as a failure (a hang detector, never a pass criterion).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// `return Err(format!(...))` unless `cond`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// `return Err(...)` unless `got == want`, naming both.
#[macro_export]
macro_rules! ensure_eq {
    ($got:expr, $want:expr, $($fmt:tt)+) => {{
        let (got, want) = (&$got, &$want);
        if got != want {
            return Err(format!("{}: got {:?}, expected {:?}", format!($($fmt)+), got, want));
        }
    }};
}

// ---- environment -------------------------------------------------------------

/// PCI addresses of the two cards of the test VM, resolved once at start
/// (before any unbind) from TT_CARD0_BDF / TT_CARD1_BDF or sysfs.
pub fn bdfs() -> &'static [Option<String>; 2] {
    static BDFS: OnceLock<[Option<String>; 2]> = OnceLock::new();
    BDFS.get_or_init(|| {
        let get = |n: u32| {
            std::env::var(format!("TT_CARD{n}_BDF"))
                .ok()
                .filter(|s| !s.is_empty())
                .or_else(|| {
                    fs::read_link(format!("/sys/class/tenstorrent/tenstorrent!{n}/device"))
                        .ok()
                        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
                })
        };
        [get(0), get(1)]
    })
}

/// BDF of card `n`.
pub fn bdf(n: usize) -> Result<String, String> {
    bdfs()[n]
        .clone()
        .ok_or_else(|| format!("BDF of card {n} unknown (TT_CARD{n}_BDF unset, no sysfs link)"))
}

/// Whether the VM's cards are the emulated Wormhole and Blackhole (bound by
/// the module's ID table) rather than QEMU's edu and pci-testdev (bound
/// through `new_id`).
pub fn emulated_cards() -> bool {
    std::env::var("TT_CARDS").map_or(true, |c| c != "legacy")
}

/// PCI vendor and device id of card `n` (TT_CARDn_ID, "vvvv:dddd").
pub fn card_ids(n: usize) -> (u16, u16) {
    let default = if emulated_cards() {
        ["1e52:401e", "1e52:b140"][n]
    } else {
        ["1234:11e8", "1b36:0005"][n]
    };
    let id = std::env::var(format!("TT_CARD{n}_ID")).unwrap_or_else(|_| default.into());
    let (v, d) = id.split_once(':').unwrap_or(("0", "0"));
    (
        u16::from_str_radix(v, 16).unwrap_or(0),
        u16::from_str_radix(d, 16).unwrap_or(0),
    )
}

/// Waits (bounded) until `path` exists or not.
pub fn wait_path(path: &str, exists: bool) -> TestResult {
    let start = Instant::now();
    while std::path::Path::new(path).exists() != exists {
        ensure!(
            start.elapsed() < Duration::from_secs(20),
            "{path} {} within 20 s",
            if exists {
                "did not appear"
            } else {
                "did not go away"
            }
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Binds both cards again after the module was (re)loaded: emulated cards
/// bind by the ID table at load; legacy ones through `new_id`, one at a
/// time so that edu is card 0.
pub fn bind_both() -> TestResult {
    if !emulated_cards() {
        for n in 0..2 {
            let (v, d) = card_ids(n);
            sysfs_write(
                "/sys/bus/pci/drivers/tenstorrent/new_id",
                &format!("{v:04x} {d:04x}"),
            )?;
            wait_path(&node(n as u32), true)?;
        }
    }
    for n in 0..2 {
        wait_path(&node(n), true)?;
    }
    Ok(())
}

/// Path of `/dev/tenstorrent/N`.
pub fn node(n: u32) -> String {
    format!("{}/{n}", tt_arbiter::DEV_DIR)
}

/// Opens card `n`.
pub fn open(n: u32) -> Result<Device, String> {
    Device::open_index(n).map_err(|e| format!("open {}: {e}", node(n)))
}

/// Reads a sysfs file, trimmed.
pub fn sysfs(path: &str) -> Result<String, String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("read {path}: {e}"))
}

/// Writes a sysfs file.
pub fn sysfs_write(path: &str, value: &str) -> TestResult {
    fs::write(path, value).map_err(|e| format!("write {value:?} to {path}: {e}"))
}

/// Resets PCI function `bdf` through the PCI core (sysfs `reset`) with
/// `method` (`flr`, `bus`, ...), then gives the kernel back its default
/// choice of method for later scenarios.
pub fn sysfs_reset(bdf: &str, method: &str) -> TestResult {
    sysfs_write(&format!("/sys/bus/pci/devices/{bdf}/reset_method"), method)?;
    let reset = sysfs_write(&format!("/sys/bus/pci/devices/{bdf}/reset"), "1");
    sysfs_write(
        &format!("/sys/bus/pci/devices/{bdf}/reset_method"),
        "default",
    )?;
    reset
}

/// The PCI core's files that bind a card to this driver and unbind it.
pub const BIND: &str = "/sys/bus/pci/drivers/tenstorrent/bind";
pub const UNBIND: &str = "/sys/bus/pci/drivers/tenstorrent/unbind";

/// Whether `bdf` is bound to the `tenstorrent` driver.
pub fn is_bound(bdf: &str) -> bool {
    fs::symlink_metadata(format!("/sys/bus/pci/drivers/tenstorrent/{bdf}")).is_ok()
}

// ---- errors --------------------------------------------------------------------

/// Symbolic errno name, for diagnostics.
pub fn errname(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOTTY => "ENOTTY",
        libc::E2BIG => "E2BIG",
        libc::EDEADLK => "EDEADLK",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ENXIO => "ENXIO",
        libc::ENOSYS => "ENOSYS",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// Describes an ioctl outcome: "ok (N)" or the errno name.
pub fn outcome<T: std::fmt::Debug>(r: &io::Result<T>) -> String {
    match r {
        Ok(v) => format!("success ({v:?})"),
        Err(e) => e
            .raw_os_error()
            .map(errname)
            .unwrap_or_else(|| e.to_string()),
    }
}

/// Fails unless `r` is the error `errno`.
pub fn expect_errno<T: std::fmt::Debug>(r: io::Result<T>, errno: i32, what: &str) -> TestResult {
    match &r {
        Err(e) if e.raw_os_error() == Some(errno) => Ok(()),
        _ => Err(format!(
            "{what}: got {}, expected {}",
            outcome(&r),
            errname(errno)
        )),
    }
}

/// Fails unless `r` is a success.
pub fn expect_ok<T: std::fmt::Debug>(r: io::Result<T>, what: &str) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {}", outcome::<()>(&Err(e))))
}

/// Error of a client call, as a message.
pub fn ctx<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

// ---- raw ioctls ------------------------------------------------------------------

/// `ioctl(fd, cmd, addr)` with an arbitrary address, possibly invalid on
/// purpose (the kernel must answer EFAULT then).
pub fn ioctl_addr(fd: RawFd, cmd: u32, addr: usize) -> io::Result<i32> {
    // SAFETY: the kernel validates `addr`; the scenarios only pass addresses
    // of memory they own (and allow the command to write there), NULL, or
    // unmapped pages.
    let rc = unsafe { libc::ioctl(fd, cmd as _, addr as *mut libc::c_void) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `ioctl(dev, cmd, &mut arg)`.
pub fn ioctl<T>(dev: &impl AsRawFd, cmd: u32, arg: &mut T) -> io::Result<i32> {
    ioctl_addr(dev.as_raw_fd(), cmd, arg as *mut T as usize)
}

/// LOCK_CTL with a full `out`: returns `out.value`.
pub fn lock_ctl(dev: &impl AsRawFd, index: u8, flags: u32) -> io::Result<u8> {
    let mut arg = abi::LockCtl {
        input: abi::LockCtlIn {
            output_size_bytes: 4,
            flags,
            index,
            reserved: [0; 3],
        },
        ..Default::default()
    };
    ioctl(dev, abi::IOCTL_LOCK_CTL, &mut arg).map(|_| arg.output.value)
}

/// LOCK_CTL TEST as (held by this file, held by anyone).
pub fn ctl_test(dev: &impl AsRawFd, index: u8) -> Result<(bool, bool), String> {
    let v = expect_ok(lock_ctl(dev, index, abi::LOCK_CTL_TEST), "LOCK_CTL TEST")?;
    ensure!(
        v & !3 == 0,
        "LOCK_CTL TEST of lock {index}: value {v:#x} has bits beyond 0-1"
    );
    Ok((v & 1 != 0, v & 2 != 0))
}

/// ACQUIRE with explicit flags and deadline; returns the struct on success
/// and on error (holder_pid is written back on EBUSY/ETIMEDOUT).
pub fn acquire(
    dev: &impl AsRawFd,
    index: u32,
    flags: u32,
    deadline_ns: u64,
) -> (io::Result<i32>, abi::LockAcquire) {
    let mut a = abi::LockAcquire::new();
    a.index = index;
    a.flags = flags;
    a.deadline_ns = deadline_ns;
    let r = ioctl(dev, abi::IOCTL_LOCK_ACQUIRE, &mut a);
    (r, a)
}

/// ACQUIRE_SET with explicit flags and deadline.
pub fn acquire_set(
    dev: &impl AsRawFd,
    mask: u64,
    flags: u32,
    deadline_ns: u64,
) -> (io::Result<i32>, abi::LockAcquireSet) {
    let mut a = abi::LockAcquireSet::new();
    a.mask = mask;
    a.flags = flags;
    a.deadline_ns = deadline_ns;
    let r = ioctl(dev, abi::IOCTL_LOCK_ACQUIRE_SET, &mut a);
    (r, a)
}

/// RELEASE of `mask`.
pub fn release(dev: &impl AsRawFd, mask: u64) -> io::Result<i32> {
    let mut r = abi::LockRelease::new();
    r.mask = mask;
    ioctl(dev, abi::IOCTL_LOCK_RELEASE, &mut r)
}

/// QUERY of lock `index`, as a message on error.
pub fn query(dev: &Device, index: u32) -> Result<LockState, String> {
    dev.query(index)
        .map_err(|e| format!("QUERY lock {index}: {e}"))
}

/// Fails unless lock `index` is free with no waiter.
pub fn ensure_free(dev: &Device, index: u32) -> TestResult {
    let q = query(dev, index)?;
    ensure!(
        !q.held && q.waiters == 0,
        "lock {index} not free at start: held {} by pid {} ({}), {} waiters",
        q.held,
        q.holder_pid,
        q.holder_comm,
        q.waiters
    );
    // A mark an earlier scenario's dead holder left would show up in this
    // one's first grant: the first acquisition consumes it.
    if q.owner_died {
        ctx(
            dev.acquire(index, Wait::Try),
            "ACQUIRE to consume an old owner-died mark",
        )?;
        ctx(dev.release(bit(index)), "RELEASE after consuming the mark")?;
    }
    Ok(())
}

/// Polls QUERY (bounded) until `cond` holds for lock `index`.
pub fn poll_query(
    dev: &Device,
    index: u32,
    what: &str,
    cond: impl Fn(&LockState) -> bool,
) -> Result<LockState, String> {
    let start = Instant::now();
    loop {
        let q = query(dev, index)?;
        if cond(&q) {
            return Ok(q);
        }
        if start.elapsed() > PATIENCE {
            return Err(format!(
                "lock {index}: {what} not reached within {PATIENCE:?}; last QUERY: {q:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Polls QUERY until lock `index` has exactly `n` waiters.
pub fn wait_waiters(dev: &Device, index: u32, n: u32) -> Result<LockState, String> {
    poll_query(dev, index, &format!("{n} waiter(s)"), |q| q.waiters == n)
}

/// Monotonic clock in ns.
pub fn now_ns() -> u64 {
    tt_arbiter::Monotonic::now().as_nanos()
}

/// Our pid as the kernel reports it.
pub fn getpid() -> u32 {
    std::process::id()
}

/// Sets the calling thread's comm (what QUERY reports as holder_comm).
pub fn set_comm(name: &str) {
    let c = CString::new(name).unwrap();
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

// ---- pipes and child processes --------------------------------------------------------

/// A pipe as (read end, write end), close-on-exec.
pub fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe2: {}", io::Error::last_os_error()));
    }
    // SAFETY: both were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes all of `buf` to `fd`.
pub fn write_all(fd: RawFd, buf: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the range is within `buf`.
        let n = unsafe { libc::write(fd, buf[done..].as_ptr().cast(), buf.len() - done) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// Reads up to `buf.len()` bytes, waiting at most `timeout` for the first.
/// Returns 0 at end of file.
pub fn read_timeout(fd: RawFd, buf: &mut [u8], timeout: Duration) -> Result<usize, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("poll: {e}"));
        }
        if rc == 0 {
            return Err(format!("nothing to read within {timeout:?}"));
        }
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("read: {e}"));
        }
        return Ok(n as usize);
    }
}

/// Line-oriented end of a pipe pair.
struct Lines {
    rx: OwnedFd,
    tx: OwnedFd,
    buf: Vec<u8>,
}

impl Lines {
    fn send(&self, line: &str) -> TestResult {
        write_all(self.tx.as_raw_fd(), format!("{line}\n").as_bytes())
            .map_err(|e| format!("pipe write: {e}"))
    }

    /// Next line; `None` at end of file.
    fn recv(&mut self, timeout: Duration) -> Result<Option<String>, String> {
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Ok(Some(String::from_utf8_lossy(&line[..pos]).into_owned()));
            }
            let mut chunk = [0u8; 512];
            let n = read_timeout(self.rx.as_raw_fd(), &mut chunk, timeout)?;
            if n == 0 {
                return Ok(None);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The child's side of [`spawn`]: talks to the parent by lines.
pub struct Link(Lines);

impl Link {
    /// Sends a line to the parent.
    pub fn send(&self, line: &str) -> TestResult {
        self.0.send(line)
    }

    /// Waits (bounded) for the next line from the parent.
    pub fn recv(&mut self) -> Result<String, String> {
        self.0
            .recv(PATIENCE)?
            .ok_or_else(|| "parent closed the pipe".to_string())
    }

    /// The raw write end to the parent (for signal handlers).
    pub fn raw_tx(&self) -> RawFd {
        self.0.tx.as_raw_fd()
    }

    /// Waits for the parent to send exactly `want`.
    pub fn expect(&mut self, want: &str) -> TestResult {
        let got = self.recv()?;
        ensure_eq!(got, want, "message from parent");
        Ok(())
    }
}

/// A child process started by [`spawn`]. Killed and reaped on drop unless
/// waited for.
pub struct Child {
    /// Its pid.
    pub pid: libc::pid_t,
    name: String,
    lines: Lines,
    status: Option<libc::c_int>,
}

const ERR_PREFIX: &str = "\u{1}ERR ";

/// Closes every descriptor from 3 up except those in `keep`.
fn close_all_except(keep: &[RawFd]) {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|&fd| fd >= 3).collect();
    keep.sort_unstable();
    let close_range = |lo: u32, hi: u32| {
        // SAFETY: closing descriptors the child does not use; the child
        // never touches them again.
        let rc = unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0) };
        if rc != 0 {
            for fd in lo..=hi.min(4095) {
                // SAFETY: as above.
                unsafe { libc::close(fd as RawFd) };
            }
        }
    };
    let mut lo = 3u32;
    for fd in keep {
        let fd = fd as u32;
        if fd > lo {
            close_range(lo, fd - 1);
        }
        lo = fd + 1;
    }
    close_range(lo, u32::MAX);
}

/// Flushes stdout before a fork so nothing is printed twice.
pub fn flush() {
    use std::io::Write;
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
}

/// Forks a child that runs `f` and exits (0 if it returned Ok). The child
/// keeps only stdin/stdout/stderr, its pipes to the parent and the
/// descriptors in `keep`: every other descriptor (device files of the
/// parent in particular) is closed in the child, so lock ownership is never
/// shared by accident.
pub fn spawn(
    name: &str,
    keep: &[RawFd],
    f: impl FnOnce(&mut Link) -> TestResult,
) -> Result<Child, String> {
    let (down_rx, down_tx) = pipe()?;
    let (up_rx, up_tx) = pipe()?;
    flush();
    // SAFETY: fork; the child only runs `f` and exits with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(down_tx);
        drop(up_rx);
        let mut all = keep.to_vec();
        all.extend([down_rx.as_raw_fd(), up_tx.as_raw_fd()]);
        close_all_except(&all);
        let mut link = Link(Lines {
            rx: down_rx,
            tx: up_tx,
            buf: Vec::new(),
        });
        let result = catch_unwind(AssertUnwindSafe(|| f(&mut link)))
            .unwrap_or_else(|p| Err(format!("panicked: {}", panic_message(&p))));
        let code = match result {
            Ok(()) => 0,
            Err(msg) => {
                let _ = link.send(&format!("{ERR_PREFIX}{}", msg.replace('\n', "\u{2}")));
                1
            }
        };
        flush();
        // SAFETY: leaving the forked child without running the parent's
        // destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    Ok(Child {
        pid,
        name: name.to_string(),
        lines: Lines {
            rx: up_rx,
            tx: down_tx,
            buf: Vec::new(),
        },
        status: None,
    })
}

/// Text of a panic payload.
pub fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// Whether a wait status is death by `sig`.
pub fn died_of(status: libc::c_int, sig: libc::c_int) -> bool {
    libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == sig
}

/// Describes a wait status.
pub fn describe_status(status: libc::c_int) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else if libc::WIFSTOPPED(status) {
        format!("stopped by signal {}", libc::WSTOPSIG(status))
    } else {
        format!("wait status {status:#x}")
    }
}

/// waitpid, retried on EINTR.
pub fn waitpid(pid: libc::pid_t, options: libc::c_int) -> Result<libc::c_int, String> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is writable.
        let rc = unsafe { libc::waitpid(pid, &mut status, options) };
        if rc >= 0 {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(format!("waitpid({pid}): {e}"));
        }
    }
}

impl Child {
    /// Sends a line to the child.
    pub fn send(&self, line: &str) -> TestResult {
        self.lines
            .send(line)
            .map_err(|e| format!("{}: {e}", self.name))
    }

    /// Waits (bounded) for the next line from the child. A child that failed
    /// or exited gives an error with its diagnostics.
    pub fn recv(&mut self) -> Result<String, String> {
        match self.lines.recv(PATIENCE) {
            Ok(Some(line)) => match line.strip_prefix(ERR_PREFIX) {
                Some(msg) => Err(format!(
                    "{} failed: {}",
                    self.name,
                    msg.replace('\u{2}', "\n")
                )),
                None => Ok(line),
            },
            Ok(None) => {
                let status = self.reap()?;
                Err(format!(
                    "{} {} without saying more",
                    self.name,
                    describe_status(status)
                ))
            }
            Err(e) => Err(format!("waiting for {}: {e}", self.name)),
        }
    }

    /// Waits for the child to send exactly `want`.
    pub fn expect(&mut self, want: &str) -> TestResult {
        let got = self.recv()?;
        ensure_eq!(got, want, "message from {}", self.name);
        Ok(())
    }

    /// Sends a signal.
    pub fn kill(&self, sig: libc::c_int) -> TestResult {
        // SAFETY: signalling our own child.
        if unsafe { libc::kill(self.pid, sig) } != 0 {
            return Err(format!(
                "kill({}, {sig}): {}",
                self.name,
                io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    fn reap(&mut self) -> Result<libc::c_int, String> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = waitpid(self.pid, 0)?;
        self.status = Some(status);
        Ok(status)
    }

    /// Waits for the child to exit; Ok if it exited with status 0.
    pub fn wait(mut self) -> TestResult {
        let status = self.reap()?;
        // Its messages are in the pipe already; look for a failure report.
        let mut report = None;
        while let Ok(Some(line)) = self.lines.recv(Duration::ZERO) {
            if let Some(msg) = line.strip_prefix(ERR_PREFIX) {
                report = Some(msg.replace('\u{2}', "\n"));
            }
        }
        match (status, report) {
            (0, _) => Ok(()),
            (_, Some(msg)) => Err(format!("{} failed: {msg}", self.name)),
            (s, None) => Err(format!("{} {}", self.name, describe_status(s))),
        }
    }

    /// Waits until the child has stopped (it must have been sent SIGSTOP).
    pub fn wait_stopped(&self) -> TestResult {
        let status = waitpid(self.pid, libc::WUNTRACED)?;
        ensure!(
            libc::WIFSTOPPED(status),
            "{} not stopped: {}",
            self.name,
            describe_status(status)
        );
        Ok(())
    }

    /// Waits until the child has been continued (after SIGCONT).
    pub fn wait_continued(&self) -> TestResult {
        let status = waitpid(self.pid, libc::WCONTINUED)?;
        ensure!(
            libc::WIFCONTINUED(status),
            "{} not continued: {}",
            self.name,
            describe_status(status)
        );
        Ok(())
    }

    /// Waits for the child to end; returns its wait status.
    pub fn status(mut self) -> Result<libc::c_int, String> {
        self.reap()
    }

    /// Kills with SIGKILL and reaps; returns the status.
    pub fn kill_and_reap(mut self) -> Result<libc::c_int, String> {
        self.kill(libc::SIGKILL)?;
        self.reap()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_none() {
            // SAFETY: killing and reaping our own child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = waitpid(self.pid, 0);
        }
    }
}

// ---- shared memory ------------------------------------------------------------------

/// Anonymous shared memory (MAP_SHARED), inherited across fork.
pub struct Shared {
    ptr: *mut u8,
    len: usize,
}

impl Shared {
    /// Maps `len` zeroed bytes.
    pub fn new(len: usize) -> Result<Shared, String> {
        // SAFETY: anonymous mapping, no file.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        ensure!(
            ptr != libc::MAP_FAILED,
            "mmap shared: {}",
            io::Error::last_os_error()
        );
        Ok(Shared {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The `i`-th 32-bit word.
    pub fn u32(&self, i: usize) -> &AtomicU32 {
        assert!((i + 1) * 4 <= self.len);
        // SAFETY: in bounds, aligned (mmap is page aligned), and only ever
        // accessed atomically.
        unsafe { &*(self.ptr.add(i * 4) as *const AtomicU32) }
    }

    /// The `i`-th 64-bit word.
    pub fn u64(&self, i: usize) -> &AtomicU64 {
        assert!((i + 1) * 8 <= self.len);
        // SAFETY: as for `u32`.
        unsafe { &*(self.ptr.add(i * 8) as *const AtomicU64) }
    }

    /// Start address.
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Makes a mapping inaccessible (PROT_NONE), from `offset` to its end.
fn protect_none(m: &Shared, offset: usize) -> TestResult {
    // SAFETY: changing the protection of part of our own mapping, which no
    // Rust reference points into.
    let rc = unsafe {
        libc::mprotect(
            (m.addr() + offset) as *mut libc::c_void,
            m.len - offset,
            libc::PROT_NONE,
        )
    };
    ensure!(rc == 0, "mprotect: {}", io::Error::last_os_error());
    Ok(())
}

/// Two pages whose second is inaccessible (PROT_NONE): returns the mapping
/// (keep it alive) and the address of the end of the first page.
pub fn page_before_hole() -> Result<(Shared, usize), String> {
    let page = page_size();
    let m = Shared::new(2 * page)?;
    protect_none(&m, page)?;
    let end = m.addr() + page;
    Ok((m, end))
}

/// A page nothing can access (PROT_NONE), and its address; keep the mapping
/// alive while using the address so nothing else gets mapped there.
pub fn unmapped_addr() -> Result<(Shared, usize), String> {
    let m = Shared::new(page_size())?;
    protect_none(&m, 0)?;
    let addr = m.addr();
    Ok((m, addr))
}

// ---- signals -----------------------------------------------------------------------------

/// Installs `handler` for `sig`, with or without SA_RESTART.
pub fn install_handler(
    sig: libc::c_int,
    handler: extern "C" fn(libc::c_int),
    restart: bool,
) -> TestResult {
    // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe
    // (callers only touch atomics and write(2)).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
            return Err(format!("sigaction: {}", io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Bit of lock `i`.
pub const fn bit(i: u32) -> u64 {
    1u64 << i
}

/// Small deterministic PRNG (xorshift64*), seeded per process.
pub struct Rng(u64);

impl Rng {
    /// Seeds from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Lets the scenarios name ACQUIRE/QUERY structs without importing abi.
pub fn new_query(index: u32) -> abi::LockQuery {
    let mut q = abi::LockQuery::new();
    q.index = index;
    q
}

/// RESET_DEVICE CONFIG_WRITE from `dev`: fences the card's other files (on
/// a Wormhole it resets nothing else; a Blackhole resets itself on it).
pub fn config_write_reset(dev: &impl AsRawFd) -> TestResult {
    let mut r = abi::ResetDevice::default();
    r.input.output_size_bytes = 8;
    r.input.flags = abi::RESET_DEVICE_CONFIG_WRITE;
    expect_ok(ioctl(dev, abi::IOCTL_RESET_DEVICE, &mut r), "CONFIG_WRITE")?;
    ensure_eq!(r.output.result, 0, "CONFIG_WRITE result");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// The process plumbing the scenarios rely on, without a device. One
    /// test so that no other test thread runs while it forks.
    #[test]
    fn child_processes_pipes_and_shared_memory() {
        let mut r = Rng::new(1);
        assert!((0..100).all(|_| r.below(8) < 8));
        assert_eq!(errname(libc::ENOTTY), "ENOTTY");
        assert_eq!(errname(9999), "errno 9999");
        let e = expect_errno(Ok(1), libc::EBUSY, "call").unwrap_err();
        assert_eq!(e, "call: got success (1), expected EBUSY");

        // Lines both ways, then a clean exit.
        let mut c = spawn("echo", &[], |link| {
            link.send("ready")?;
            let line = link.recv()?;
            link.send(&format!("echo {line}"))
        })
        .unwrap();
        c.expect("ready").unwrap();
        c.send("hello").unwrap();
        c.expect("echo hello").unwrap();
        c.wait().unwrap();

        // A failing child reports its message, through recv and wait.
        let mut c = spawn("failing", &[], |_| Err("broken\nsecond line".into())).unwrap();
        let e = c.recv().unwrap_err();
        assert!(e.contains("failing failed: broken\nsecond line"), "{e}");
        let c = spawn("failing", &[], |_| Err("broken".into())).unwrap();
        assert_eq!(c.wait().unwrap_err(), "failing failed: broken");

        // A panicking child is a failure, not a second copy of the test.
        let c = spawn("panicking", &[], |_| panic!("boom")).unwrap();
        assert!(c.wait().unwrap_err().contains("panicked: boom"));

        // Descriptors not kept are closed in the child; kept ones stay.
        let (rx, tx) = pipe().unwrap();
        let (kept, closed) = (tx.as_raw_fd(), rx.as_raw_fd());
        let c = spawn("fds", &[kept], move |_| {
            write_all(kept, b"k").map_err(|e| e.to_string())?;
            // SAFETY: fcntl on a descriptor number.
            let r = unsafe { libc::fcntl(closed, libc::F_GETFD) };
            ensure!(r < 0, "descriptor {closed} not closed in the child");
            Ok(())
        })
        .unwrap();
        c.wait().unwrap();
        let mut b = [0u8; 4];
        assert_eq!(read_timeout(rx.as_raw_fd(), &mut b, PATIENCE).unwrap(), 1);

        // Shared memory is shared across fork.
        let shm = Shared::new(4096).unwrap();
        let s = &shm;
        let c = spawn("shm", &[], move |_| {
            s.u32(3).store(7, Ordering::SeqCst);
            s.u64(5).store(9, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        c.wait().unwrap();
        assert_eq!(shm.u32(3).load(Ordering::SeqCst), 7);
        assert_eq!(shm.u64(5).load(Ordering::SeqCst), 9);

        // Killed children are reported as such.
        let c = spawn("sleeper", &[], |link| link.expect("never")).unwrap();
        let status = c.kill_and_reap().unwrap();
        assert_eq!(describe_status(status), "killed by signal 9");

        // SIGSTOP / SIGCONT observation.
        let mut c = spawn("stoppable", &[], |link| {
            link.send("up")?;
            link.expect("bye")
        })
        .unwrap();
        c.expect("up").unwrap();
        c.kill(libc::SIGSTOP).unwrap();
        c.wait_stopped().unwrap();
        c.kill(libc::SIGCONT).unwrap();
        c.wait_continued().unwrap();
        c.send("bye").unwrap();
        c.wait().unwrap();
    }
}

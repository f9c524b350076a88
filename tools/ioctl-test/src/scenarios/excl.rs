//! Exclusive open: `O_EXCL` is the writer and plain opens are the readers
//! of an open-time reader/writer lock (tt-kmd 2.10's `admit_chardev_open`),
//! `O_NONBLOCK` makes either a try (`EAGAIN`), waiting openers go in
//! arrival order (better than tt-kmd: a queued `O_EXCL` opener is not
//! starved by later plain opens), and `open/exclusive` in sysfs shows who
//! holds the card and how many opens wait.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use crate::util::*;

fn open_with(n: u32, flags: i32) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(flags)
        .open(node(n))
}

fn state(n: u32) -> Result<String, String> {
    sysfs(&format!(
        "/sys/class/tenstorrent/tenstorrent!{n}/open/exclusive"
    ))
}

/// Waits (bounded) until card `n`'s `open/exclusive` has `field`.
fn wait_state(n: u32, field: &str) -> Result<String, String> {
    let start = Instant::now();
    loop {
        let line = state(n)?;
        if line.split(' ').any(|f| f == field) {
            return Ok(line);
        }
        ensure!(
            start.elapsed() < Duration::from_secs(20),
            "card {n}: open/exclusive is {line:?}, {field} not reached within 20 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Every combination of plain, `O_EXCL` and `O_NONBLOCK`, with and without
/// a holder, on both cards.
pub fn exclusive_combinations() -> TestResult {
    let (excl, nb) = (libc::O_EXCL, libc::O_NONBLOCK);
    for n in 0..2u32 {
        wait_state(n, "open=0")?;
        let plain = ctx(open_with(n, 0), "plain open")?;
        expect_errno(
            open_with(n, excl | nb),
            libc::EAGAIN,
            "O_EXCL|O_NONBLOCK, one open",
        )?;
        let second = ctx(open_with(n, nb), "plain O_NONBLOCK beside a plain open")?;
        drop((plain, second));
        let held = ctx(open_with(n, excl), "O_EXCL on an idle card")?;
        let line = state(n)?;
        let comm = std::fs::read_to_string("/proc/self/comm").map_err(|e| e.to_string())?;
        let want = format!(
            "held=1 pid={} comm={} open=1 waiting=0",
            getpid(),
            comm.trim_end()
        );
        ensure_eq!(line, want, "card {n}: open/exclusive while held");
        expect_errno(
            open_with(n, nb),
            libc::EAGAIN,
            "plain O_NONBLOCK beside O_EXCL",
        )?;
        expect_errno(
            open_with(n, excl | nb),
            libc::EAGAIN,
            "O_EXCL|O_NONBLOCK beside O_EXCL",
        )?;
        // The holder's file works as any other.
        let dev = tt_arbiter::Device::from_fd(held.into());
        ctx(dev.device_info(), "GET_DEVICE_INFO on the exclusive file")?;
        drop(dev);
        ensure_eq!(
            state(n)?,
            "held=0 pid=0 comm= open=0 waiting=0",
            "card {n}: after close"
        );
        let again = ctx(open_with(n, excl | nb), "O_EXCL|O_NONBLOCK on an idle card")?;
        drop(again);
        ctx(
            open_with(n, nb),
            "plain O_NONBLOCK after the exclusive close",
        )?;
    }
    Ok(())
}

/// A queued `O_EXCL` opener goes before plain opens that came after it,
/// and they go in together once it closes; a wait ends on a signal with a
/// handler (`EINTR`) and on unbind (`ENODEV`).
pub fn exclusive_waits_in_order() -> TestResult {
    let n = 0u32;
    wait_state(n, "open=0")?;
    let plain = ctx(open_with(n, 0), "plain open")?;
    let mut writer = spawn("exclusive opener", &[], move |link| {
        let f = ctx(open_with(n, libc::O_EXCL), "blocking O_EXCL open")?;
        link.send("exclusive")?;
        ensure_eq!(link.recv()?, "close", "command");
        drop(f);
        Ok(())
    })?;
    wait_state(n, "waiting=1")?;
    let mut readers = Vec::new();
    for i in 0..2 {
        let reader = spawn(&format!("plain opener {i}"), &[], move |link| {
            let f = ctx(open_with(n, 0), "blocking plain open")?;
            link.send("open")?;
            ensure_eq!(link.recv()?, "close", "command");
            drop(f);
            Ok(())
        })?;
        wait_state(n, &format!("waiting={}", 2 + i))?;
        readers.push(reader);
        // Not admitted although nobody holds the card exclusively: they came
        // after the O_EXCL opener.
        ensure!(state(n)?.contains("held=0"), "card {n}: {}", state(n)?);
    }
    drop(plain);
    writer.expect("exclusive")?;
    let line = wait_state(n, "held=1")?;
    ensure!(
        line.contains("open=1 waiting=2"),
        "card {n}: while the O_EXCL opener holds it: {line:?}"
    );
    writer.send("close")?;
    for reader in readers.iter_mut() {
        reader.expect("open")?;
    }
    wait_state(n, "open=2")?;
    for reader in readers.iter_mut() {
        reader.send("close")?;
    }
    for reader in readers {
        let status = reader.status()?;
        ensure!(status == 0, "plain opener: {}", describe_status(status));
    }
    let status = writer.status()?;
    ensure!(status == 0, "exclusive opener: {}", describe_status(status));
    wait_state(n, "open=0")?;

    // A signal with a handler ends the wait with EINTR.
    let held = ctx(open_with(n, libc::O_EXCL), "O_EXCL open")?;
    let mut waiter = spawn("interrupted opener", &[], move |link| {
        extern "C" fn nothing(_: libc::c_int) {}
        install_handler(libc::SIGUSR1, nothing, false)?;
        link.send("ready")?;
        // One open(2), not std's, which retries on EINTR.
        let path = std::ffi::CString::new(node(n)).map_err(|e| e.to_string())?;
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR) };
        let r = if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            Ok(fd)
        };
        expect_errno(r, libc::EINTR, "plain open interrupted by a handler")?;
        link.send("interrupted")?;
        Ok(())
    })?;
    waiter.expect("ready")?;
    wait_state(n, "waiting=1")?;
    // To the thread in open(2), the child's first: a signal to the process
    // may go to another of its threads, which the open would not see.
    // SAFETY: signals our own child.
    unsafe { libc::syscall(libc::SYS_tgkill, waiter.pid, waiter.pid, libc::SIGUSR1) };
    waiter.expect("interrupted")?;
    let status = waiter.status()?;
    ensure!(
        status == 0,
        "interrupted opener: {}",
        describe_status(status)
    );
    wait_state(n, "waiting=0")?;

    // Unbind ends the wait with ENODEV.
    let mut waiter = spawn("opener during unbind", &[], move |link| {
        link.send("ready")?;
        expect_errno(
            open_with(n, 0),
            libc::ENODEV,
            "plain open waiting through unbind",
        )?;
        Ok(())
    })?;
    waiter.expect("ready")?;
    wait_state(n, "waiting=1")?;
    let bdf = bdf(n as usize)?;
    sysfs_write(UNBIND, &bdf)?;
    let status = waiter.status()?;
    drop(held);
    sysfs_write(BIND, &bdf)?;
    wait_path(&node(n), true)?;
    ensure!(
        status == 0,
        "opener during unbind: {}",
        describe_status(status)
    );
    Ok(())
}

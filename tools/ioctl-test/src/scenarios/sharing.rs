//! The owner is the open file description: dup, fork and SCM_RIGHTS share it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tt_arbiter::{abi, Device, Wait};

use crate::util::*;

fn dup(fd: RawFd) -> Result<Device, String> {
    // SAFETY: dup of an open descriptor.
    let new = unsafe { libc::dup(fd) };
    ensure!(new >= 0, "dup: {}", io::Error::last_os_error());
    // SAFETY: `new` is ours.
    Ok(Device::from_fd(unsafe { OwnedFd::from_raw_fd(new) }))
}

/// dup'd and inherited descriptors see the lock as theirs; it survives the
/// parent's close while a child keeps the file; the last close frees it.
pub fn fork_and_dup_share_the_owner() -> TestResult {
    let i = 20;
    let observer = open(0)?;
    ensure_free(&observer, i)?;
    let a = open(0)?;
    ensure_eq!(
        expect_ok(
            lock_ctl(&a, i as u8, abi::LOCK_CTL_ACQUIRE),
            "LOCK_CTL ACQUIRE"
        )?,
        1,
        "LOCK_CTL ACQUIRE"
    );
    let d = dup(a.as_raw_fd())?;
    ensure_eq!(ctl_test(&d, i as u8)?, (true, true), "TEST through a dup");
    ensure!(
        query(&d, i)?.held_by_caller,
        "QUERY through a dup: not HELD_BY_CALLER"
    );
    let fd = a.as_raw_fd();
    let child = spawn("forked child", &[fd], move |_| {
        ensure_eq!(
            ctl_test(&fd, i as u8)?,
            (true, true),
            "TEST in the forked child"
        );
        let v = expect_ok(
            lock_ctl(&fd, i as u8, abi::LOCK_CTL_RELEASE),
            "LOCK_CTL RELEASE in the child",
        )?;
        ensure_eq!(v, 1, "LOCK_CTL RELEASE in the child");
        Ok(())
    })?;
    child.wait()?;
    ensure_eq!(
        ctl_test(&a, i as u8)?,
        (false, false),
        "TEST after the child released"
    );

    ctx(a.acquire(i, Wait::Try), "ACQUIRE")?;
    let mut child = spawn("keeper", &[fd], move |link| {
        link.send("ready")?;
        link.expect("close")?;
        // SAFETY: closing the inherited descriptor, used no more.
        ensure!(
            unsafe { libc::close(fd) } == 0,
            "close: {}",
            io::Error::last_os_error()
        );
        link.send("closed")?;
        link.expect("exit")
    })?;
    child.expect("ready")?;
    drop(a);
    drop(d);
    let q = query(&observer, i)?;
    ensure!(
        q.held && q.holder_pid == getpid(),
        "after the parent closed its descriptors while the child keeps the file: {q:?}"
    );
    child.send("close")?;
    child.expect("closed")?;
    let q = query(&observer, i)?;
    ensure!(!q.held, "after the last close(): {q:?}");
    child.send("exit")?;
    child.wait()
}

fn send_fd(sock: RawFd, fd: RawFd) -> TestResult {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; the pointers set below are valid for
    // the call; CMSG_* stay within `cbuf`.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        ensure!(
            libc::sendmsg(sock, &msg, 0) == 1,
            "sendmsg: {}",
            io::Error::last_os_error()
        );
    }
    Ok(())
}

fn recv_fd(sock: RawFd) -> Result<OwnedFd, String> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: as in `send_fd`.
    let space = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    // SAFETY: as in `send_fd`; the received descriptor becomes ours.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
        ensure!(n == 1, "recvmsg: {n}: {}", io::Error::last_os_error());
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        ensure!(
            !cmsg.is_null()
                && (*cmsg).cmsg_level == libc::SOL_SOCKET
                && (*cmsg).cmsg_type == libc::SCM_RIGHTS,
            "no SCM_RIGHTS message received"
        );
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// A lock travels with its file over SCM_RIGHTS and outlives the sender.
pub fn scm_rights_passes_the_owner() -> TestResult {
    let i = 21;
    let observer = open(0)?;
    ensure_free(&observer, i)?;
    let mut sv = [0; 2];
    // SAFETY: `sv` has room for two descriptors.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    };
    ensure!(rc == 0, "socketpair: {}", io::Error::last_os_error());
    // SAFETY: both are ours.
    let (s0, s1) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    let (tx, rx) = (s0.as_raw_fd(), s1.as_raw_fd());
    let mut receiver = spawn("receiver", &[rx], move |link| {
        let dev = Device::from_fd(recv_fd(rx)?);
        let q = query(&dev, i)?;
        link.send(&format!("got {}", q.held_by_caller as u8))?;
        link.expect("release")?;
        ctx(dev.release(bit(i)), "RELEASE through the received file")?;
        link.send("released")?;
        link.expect("exit")
    })?;
    let sender = spawn("sender", &[tx], move |_| {
        let dev = open(0)?;
        ctx(dev.acquire(i, Wait::Try), "ACQUIRE in the sender")?;
        send_fd(tx, dev.as_raw_fd())
    })?;
    let sender_pid = sender.pid as u32;
    sender.wait()?;
    receiver.expect("got 1")?;
    let q = query(&observer, i)?;
    ensure!(
        q.held && !q.held_by_caller,
        "after the sender exited, the received file must still hold it: {q:?}"
    );
    ensure!(
        q.holder_pid == sender_pid || q.holder_pid == 0,
        "holder_pid {} is neither the acquirer {sender_pid} nor 0",
        q.holder_pid
    );
    receiver.send("release")?;
    receiver.expect("released")?;
    ensure!(
        !query(&observer, i)?.held,
        "still held after the receiver released"
    );
    receiver.send("exit")?;
    receiver.wait()
}

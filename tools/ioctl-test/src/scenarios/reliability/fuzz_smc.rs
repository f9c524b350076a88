//! SMC_MSG and SMC_WAIT in the ioctl fuzzer: inputs with hostile fields
//! (flags, queue_index, reserved0, argsz, deadlines), and an oracle that
//! knows, for each fuzzed file, whether it has a firmware message
//! outstanding and what it asked. Every answer is then judged exactly:
//! EBUSY only with a message outstanding, ESRCH only without, a collected
//! response is the answer to this file's own request (TEST: its argument
//! plus one), never to another file's or to an abandoned one's (closes and
//! ABANDONs with a message in flight leave orphans ahead of the collected
//! messages), and a wait ends only as its flags allow.
//!
//! What the kernel reads is taken from the memory the input was laid out
//! in (the read-write arena, the read-only page, nothing elsewhere), so
//! the argsz rules (EINVAL below the struct, E2BIG above 4096 or for a
//! nonzero tail, EFAULT for a tail that runs into an inaccessible page)
//! are predicted for any bytes, random ones included.

use super::*;

/// The only message types fuzzed: TEST answers its argument plus one, 0x02
/// is no type on either chip (a nonzero status). Any other type could
/// change the firmware's state (power, resets) under the other scenarios.
const TEST: u32 = 0x90;
const UNKNOWN: u32 = 0x02;
/// How far past the argument the kernel may read (the largest argsz).
pub(super) const VIEW: usize = 4096;

/// How many collected answers the oracle checked (all threads).
pub(super) static ANSWERS_CHECKED: AtomicU64 = AtomicU64::new(0);

/// What the oracle knows of one file's firmware message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum SmcFile {
    /// Nothing outstanding.
    Idle,
    /// A message outstanding: its first word (the type in its low byte)
    /// and its argument.
    Outstanding { code: u32, arg: u32 },
}

/// Whether `cmd` is SMC_MSG (false) or SMC_WAIT (true), as the driver
/// decodes them (SMC_WAIT: any size from its struct's up).
pub(super) fn command(cmd: u32) -> Option<bool> {
    match known(cmd) {
        Some(Known::Smc { .. }) => Some(cmd != abi::IOCTL_SMC_MSG),
        _ => None,
    }
}

fn word(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// The kernel's read of an extensible argument whose struct is `own`
/// bytes, from what it can read (`view`): the struct, or the errno.
fn extensible(view: &[Option<u8>], own: usize) -> Result<Vec<u8>, i32> {
    let head: Option<Vec<u8>> = view[..4].iter().copied().collect();
    let argsz = word(&head.ok_or(libc::EFAULT)?, 0) as usize;
    if argsz > VIEW {
        return Err(libc::E2BIG);
    }
    if argsz < own {
        return Err(libc::EINVAL);
    }
    let bytes: Option<Vec<u8>> = view[..own].iter().copied().collect();
    let bytes = bytes.ok_or(libc::EFAULT)?;
    // The tail is read 64 bytes at a time: a chunk that cannot be read
    // whole is EFAULT, whatever it holds.
    for chunk in view[own..argsz].chunks(64) {
        if chunk.iter().any(Option::is_none) {
            return Err(libc::EFAULT);
        }
        if chunk.iter().any(|b| *b != Some(0)) {
            return Err(libc::E2BIG);
        }
    }
    Ok(bytes)
}

/// Checks a collected response (`message`, as written back) against the
/// request `code`/`arg` and the errno.
fn answer(code: u32, arg: u32, message: &[u8], errno: i32) -> Option<String> {
    let (status, value) = (word(message, 0), word(message, 4));
    if code & 0xFF == TEST {
        if errno != 0 || status != 0 || value != arg.wrapping_add(1) {
            return Some(format!(
                "TEST {arg:#x} collected as {}, status {status:#x}, value {value:#x}: \
                 not this file's answer (that is {:#x}, status 0)",
                name(errno),
                arg.wrapping_add(1)
            ));
        }
    } else if (errno == 0) != (status == 0) || !matches!(errno, 0 | libc::EREMOTEIO) {
        return Some(format!(
            "type {code:#x} collected as {} with status {status:#x}",
            name(errno)
        ));
    } else if code & 0xFF == UNKNOWN && errno != libc::EREMOTEIO {
        return Some(format!(
            "unknown type {code:#x} collected as {}: the firmware's nonzero status was not reported",
            name(errno)
        ));
    }
    None
}

fn expect(errno: i32, want: i32, what: &str) -> Option<String> {
    (errno != want).then(|| format!("{what}: got {}, expected {}", name(errno), name(want)))
}

/// Judges an SMC_MSG (`wait` false) or SMC_WAIT call on a file the oracle
/// knows as `file`. `view`: what the kernel could read from the argument
/// before the call (None: unreadable); `writable`: whether the struct's
/// bytes can be written; `after`: the struct's bytes after the call (None
/// outside the read-write arena). Returns the problem, if any, and what
/// the file is now.
pub(super) fn judge(
    wait: bool,
    view: &[Option<u8>],
    writable: bool,
    after: Option<&[u8]>,
    file: SmcFile,
    errno: i32,
) -> (Option<String>, SmcFile) {
    let own = if wait { 56 } else { 48 };
    let b = match extensible(view, own) {
        Ok(b) => b,
        Err(e) => return (expect(errno, e, "the argument's argsz and bytes"), file),
    };
    let what = if wait { "SMC_WAIT" } else { "SMC_MSG" };
    let (flags, reserved) = (word(&b, 4), word(&b, if wait { 20 } else { 12 }));
    if reserved != 0 || (!wait && word(&b, 8) != 0) {
        return (
            expect(
                errno,
                libc::EINVAL,
                &format!("{what}: reserved0 or queue_index not zero"),
            ),
            file,
        );
    }
    let valid = if wait {
        matches!(flags, 0 | abi::LOCK_NONBLOCK | abi::LOCK_DEADLINE)
    } else {
        matches!(
            flags,
            abi::SMC_MSG_POST | abi::SMC_MSG_POLL | abi::SMC_MSG_ABANDON
        )
    };
    if !valid {
        return (
            expect(errno, libc::EINVAL, &format!("{what}: flags {flags:#x}")),
            file,
        );
    }
    let state = match file {
        SmcFile::Idle => "nothing outstanding".to_string(),
        SmcFile::Outstanding { code, arg } => format!("type {code:#x} arg {arg:#x} outstanding"),
    };
    let at = |s: &str| format!("{what} {s} with {state}");
    if !wait && flags == abi::SMC_MSG_ABANDON {
        return (expect(errno, 0, &at("ABANDON")), SmcFile::Idle);
    }
    if !wait && flags == abi::SMC_MSG_POST {
        return match file {
            SmcFile::Idle => (
                expect(errno, 0, &at("POST")),
                if errno == 0 {
                    SmcFile::Outstanding {
                        code: word(&b, 16),
                        arg: word(&b, 20),
                    }
                } else {
                    file
                },
            ),
            SmcFile::Outstanding { .. } => (expect(errno, libc::EBUSY, &at("POST")), file),
        };
    }
    // POLL or SMC_WAIT.
    let SmcFile::Outstanding { code, arg } = file else {
        return (expect(errno, libc::ESRCH, &at("collecting")), file);
    };
    let deadline = u64::from_ne_bytes(b[8..16].try_into().unwrap_or_default());
    // Answers that leave the message outstanding.
    let pending = if wait {
        match flags {
            abi::LOCK_NONBLOCK => &[libc::EAGAIN][..],
            // A deadline past i64::MAX ns is as good as none.
            abi::LOCK_DEADLINE if deadline <= i64::MAX as u64 => &[libc::ETIMEDOUT, libc::EINTR],
            _ => &[libc::EINTR],
        }
    } else {
        &[libc::EAGAIN][..]
    };
    let out_flags = after.map(|a| word(a, 16));
    let done_flag = wait && out_flags.is_some_and(|f| f & abi::SMC_WAIT_DONE != 0);
    if pending.contains(&errno) && !done_flag {
        return (None, file);
    }
    // Collected: the file may post again, whatever happened.
    if !writable {
        return (
            expect(
                errno,
                libc::EFAULT,
                &at("collecting into a read-only struct"),
            ),
            SmcFile::Idle,
        );
    }
    let Some(after) = after else {
        return (
            Some(at(&format!(
                "collecting: {} for a struct the test cannot read back",
                name(errno)
            ))),
            SmcFile::Idle,
        );
    };
    if wait && out_flags != Some(abi::SMC_WAIT_DONE) {
        return (
            Some(at(&format!(
                "collecting: {}, out_flags {:#x} (DONE expected)",
                name(errno),
                out_flags.unwrap_or(0)
            ))),
            SmcFile::Idle,
        );
    }
    let message = &after[if wait { 24 } else { 16 }..];
    ANSWERS_CHECKED.fetch_add(1, Ordering::Relaxed);
    (
        answer(code, arg, message, errno).map(|p| at(&p)),
        SmcFile::Idle,
    )
}

/// An SMC_MSG or SMC_WAIT with fields mostly plausible, often hostile.
pub(super) fn gen_smc(rng: &mut Rng) -> (u32, Vec<u8>) {
    let wait = rng.below(3) == 0;
    let own = if wait { 56 } else { 48 };
    let mut b = vec![0u8; own];
    if wait {
        let flags = match rng.below(10) {
            0..=4 => abi::LOCK_NONBLOCK,
            5..=7 => abi::LOCK_DEADLINE,
            8 => 0,
            _ => {
                let (bit, any) = (1 << rng.below(32), rng.next() as u32);
                pick(rng, &[3, 4, bit, any])
            }
        };
        put32(&mut b, 4, flags);
        put64(&mut b, 8, gen_deadline(rng));
        if rng.below(8) == 0 {
            put32(&mut b, 20, 1 + rng.below(u64::from(u32::MAX)) as u32);
        }
        // Garbage in the response words (out_flags stays 0: the oracle
        // reads whether the kernel wrote it).
        if rng.below(4) == 0 {
            for x in &mut b[24..] {
                *x = rng.next() as u8;
            }
        }
    } else {
        let flags = match rng.below(12) {
            0..=4 => abi::SMC_MSG_POST,
            5..=7 => abi::SMC_MSG_POLL,
            8..=9 => abi::SMC_MSG_ABANDON,
            _ => {
                let (bit, any) = (1 << rng.below(32), rng.next() as u32);
                pick(rng, &[0, 3, 5, 6, 7, 8, bit, any])
            }
        };
        put32(&mut b, 4, flags);
        if rng.below(10) == 0 {
            let any = rng.next() as u32 | 1;
            put32(&mut b, 8, pick(rng, &[1, 2, 3, 255, u32::MAX, any]));
        }
        if rng.below(10) == 0 {
            put32(&mut b, 12, 1 + rng.below(u64::from(u32::MAX)) as u32);
        }
        put32(&mut b, 16, if rng.below(4) == 0 { UNKNOWN } else { TEST });
        for off in (20..48).step_by(4) {
            put32(&mut b, off, rng.next() as u32);
        }
    }
    put_argsz(rng, &mut b, own);
    let cmd = if !wait {
        abi::IOCTL_SMC_MSG
    } else if rng.below(8) == 0 {
        // A newer, larger SMC_WAIT is the same command.
        abi::iowr(MAGIC, 0x45, own + 8 * (1 + rng.below(4) as usize))
    } else {
        abi::IOCTL_SMC_WAIT
    };
    (cmd, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(bytes: &[u8], readable: usize) -> Vec<Option<u8>> {
        (0..VIEW)
            .map(|i| (i < readable).then(|| bytes.get(i).copied().unwrap_or(0)))
            .collect()
    }

    fn msg(argsz: u32, flags: u32, code: u32, arg: u32) -> Vec<u8> {
        let mut b = vec![0u8; 48];
        put32(&mut b, 0, argsz);
        put32(&mut b, 4, flags);
        put32(&mut b, 16, code);
        put32(&mut b, 20, arg);
        b
    }

    #[test]
    fn the_oracle_follows_a_file() {
        let idle = SmcFile::Idle;
        let post = msg(48, abi::SMC_MSG_POST, TEST, 7);
        let v = view(&post, VIEW);
        let (p, s) = judge(false, &v, true, Some(&post), idle, 0);
        assert_eq!((p, s), (None, SmcFile::Outstanding { code: TEST, arg: 7 }));
        assert!(
            judge(false, &v, true, Some(&post), s, 0).0.is_some(),
            "POST twice"
        );
        assert!(judge(false, &v, true, Some(&post), s, libc::EBUSY)
            .0
            .is_none());
        let poll = msg(48, abi::SMC_MSG_POLL, 0, 0);
        let v = view(&poll, VIEW);
        assert_eq!(
            judge(false, &v, true, Some(&poll), s, libc::EAGAIN),
            (None, s)
        );
        let mut back = poll.clone();
        put32(&mut back, 20, 8);
        assert_eq!(judge(false, &v, true, Some(&back), s, 0), (None, idle));
        put32(&mut back, 20, 9);
        assert!(
            judge(false, &v, true, Some(&back), s, 0).0.is_some(),
            "another's answer"
        );
        assert!(judge(false, &v, true, Some(&poll), idle, libc::ESRCH)
            .0
            .is_none());
        assert_eq!(judge(false, &v, false, None, s, libc::EFAULT), (None, idle));
        // argsz: short, too long, a nonzero tail, a tail running out.
        let short = msg(47, abi::SMC_MSG_POST, TEST, 1);
        assert!(
            judge(false, &view(&short, VIEW), true, None, idle, libc::EINVAL)
                .0
                .is_none()
        );
        let mut tail = msg(60, abi::SMC_MSG_POST, TEST, 1);
        tail.resize(60, 0);
        assert!(judge(false, &view(&tail, VIEW), true, None, idle, 0)
            .0
            .is_none());
        assert!(
            judge(false, &view(&tail, 56), true, None, idle, libc::EFAULT)
                .0
                .is_none()
        );
        tail[59] = 1;
        assert!(
            judge(false, &view(&tail, VIEW), true, None, idle, libc::E2BIG)
                .0
                .is_none()
        );
        // SMC_WAIT: a deadline that passed leaves it outstanding; DONE
        // without the answer is wrong.
        let mut w = vec![0u8; 56];
        put32(&mut w, 0, 56);
        put32(&mut w, 4, abi::LOCK_DEADLINE);
        let v = view(&w, VIEW);
        assert_eq!(
            judge(true, &v, true, Some(&w), s, libc::ETIMEDOUT),
            (None, s)
        );
        assert!(judge(true, &v, true, Some(&w), s, libc::EAGAIN).0.is_some());
        let mut back = w.clone();
        put32(&mut back, 16, abi::SMC_WAIT_DONE);
        put32(&mut back, 28, 8);
        assert_eq!(judge(true, &v, true, Some(&back), s, 0), (None, idle));
        put32(&mut back, 28, 0x5A);
        assert!(judge(true, &v, true, Some(&back), s, 0).0.is_some());
    }
}

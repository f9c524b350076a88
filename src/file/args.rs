// SPDX-License-Identifier: GPL-2.0

//! How the commands' arguments cross from and to userspace: the rules they
//! share (the C driver's `output_size_bytes`, the extensible `argsz`), and
//! the wait that a command's flags and deadline ask for.

use crate::{
    rust_ext::time::monotonic_from_caller,
    uapi,
    wait::Wait, //
};
use kernel::{
    prelude::*,
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    }, //
};

/// Largest `argsz` accepted: the bytes past the kernel's own struct must be
/// checked for zero, and no struct of ours will grow to a page.
const MAX_ARGSZ: u32 = 4096;

/// Reads the `u32` at `addr`.
pub(super) fn read_u32(addr: usize) -> Result<u32> {
    read_plain(addr)
}

/// Reads the `T` at `addr`: the argument of a command without `argsz`,
/// whose size is fixed by its ABI.
pub(super) fn read_plain<T: FromBytes>(addr: usize) -> Result<T> {
    UserSlice::new(UserPtr::from_addr(addr), size_of::<T>())
        .reader()
        .read()
}

/// Writes `answer` to `out` by the rule of the C driver's commands: the
/// caller's `output_size_bytes` bytes of `out` end up holding the answer,
/// cut to fit, followed by zeros. With `output_size_bytes == 0`, `out` is
/// never touched.
pub(super) fn write_sized_output(out: usize, output_size_bytes: u32, answer: &[u8]) -> Result {
    const ZEROS: [u8; 64] = [0; 64];
    let size = usize::try_from(output_size_bytes)?;
    let mut writer = UserSlice::new(UserPtr::from_addr(out), size).writer();
    writer.write_slice(&answer[..size.min(answer.len())])?;
    while !writer.is_empty() {
        let chunk = writer.len().min(ZEROS.len());
        writer.write_slice(&ZEROS[..chunk])?;
    }
    Ok(())
}

/// Reads an argument in the extensible style (`argsz` first, then
/// `flags`) as `T`, the kernel's struct, whose size is also the struct's
/// first version's: every command that has `argsz`, ours and
/// tt-kmd's (SET_NOC_CLEANUP, SET_POWER_STATE, NOC_READ, NOC_WRITE,
/// SMC_MSG), goes through here, so all negotiate alike (tt-kmd 2.11's
/// `copy_struct_from_user` rule), except EXPORT_TLB_DMABUF
/// ([`read_exact_argsz`]).
///
/// `argsz` is read alone first: below the struct's size it is `EINVAL`
/// without a byte past `argsz` being touched. Past the kernel's size, the
/// caller's extra bytes must be zero (`E2BIG` otherwise) and are ignored:
/// a newer program's struct with nothing set in what it added. An `argsz`
/// above [`MAX_ARGSZ`] is `E2BIG` too. Flags and reserved fields are each
/// command's to check.
pub(super) fn read_extensible<T: FromBytes>(arg: usize) -> Result<T> {
    let argsz = read_u32(arg)?;
    if argsz > MAX_ARGSZ {
        return Err(E2BIG);
    }
    let argsz = usize::try_from(argsz)?;
    if argsz < size_of::<T>() {
        return Err(EINVAL);
    }
    let mut reader = UserSlice::new(UserPtr::from_addr(arg), argsz).reader();
    let value = reader.read()?;
    let mut tail = [0u8; 64];
    while !reader.is_empty() {
        let chunk = reader.len().min(tail.len());
        reader.read_slice(&mut tail[..chunk])?;
        if tail[..chunk].iter().any(|&b| b != 0) {
            return Err(E2BIG);
        }
    }
    Ok(value)
}

/// Reads an argument whose `argsz` must be exactly the size of `T`, the
/// kernel's struct: EXPORT_TLB_DMABUF, which tt-kmd's argsz change (PR
/// #277) left alone. tt-kmd refuses any other `argsz` with `EINVAL`, a
/// larger one whose tail is zero included, and its test program checks
/// that (dmabuf_export: one byte more is `EINVAL`); a program written for
/// tt-kmd never passes anything else. `argsz` is read alone first, as in
/// [`read_extensible`], so nothing past a wrong one is read.
pub(super) fn read_exact_argsz<T: FromBytes>(arg: usize) -> Result<T> {
    if usize::try_from(read_u32(arg)?)? != size_of::<T>() {
        return Err(EINVAL);
    }
    read_plain(arg)
}

/// Writes `answer` whole at `addr`.
pub(super) fn write_back<T: AsBytes>(addr: usize, answer: &T) -> Result {
    UserSlice::new(UserPtr::from_addr(addr), size_of::<T>())
        .writer()
        .write(answer)
}

/// The wait of an ACQUIRE, ACQUIRE_SET or TLB_ALLOCATE from its flags. A
/// deadline is on the caller's `CLOCK_MONOTONIC`, which a time namespace
/// may offset from the host's: converted here, on every call (a restarted
/// call converts it again, with the same result).
pub(super) fn wait_from_flags(flags: u32, deadline_ns: u64) -> Result<Wait> {
    match flags {
        0 => Ok(Wait::Forever),
        uapi::LOCK_NONBLOCK => Ok(Wait::Try),
        // A deadline beyond `i64::MAX` ns (292 years) is as good as none.
        uapi::LOCK_DEADLINE => Ok(
            i64::try_from(deadline_ns).map_or(Wait::Forever, |deadline| {
                Wait::Until(monotonic_from_caller(deadline))
            }),
        ),
        _ => Err(EINVAL),
    }
}

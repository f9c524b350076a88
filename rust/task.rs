// SPDX-License-Identifier: GPL-2.0

//! Task details that `kernel::task::Task` does not expose.

use kernel::{
    bindings,
    task::Task, //
};

/// Length of `task_struct::comm`, including the terminating NUL.
pub(crate) const TASK_COMM_LEN: usize = 16;

/// Returns a copy of `task`'s command name (`comm`), NUL-terminated and
/// padded with NULs.
///
/// The name can change at any time (`prctl(PR_SET_NAME)`), as with the C
/// `get_task_comm()`: the copy is a snapshot, and a concurrent rename may
/// give a mix of the two names, never an unterminated string.
pub(crate) fn comm(task: &Task) -> [u8; TASK_COMM_LEN] {
    let mut name = [0u8; TASK_COMM_LEN];
    let raw = task.as_ptr();
    for (i, byte) in name.iter_mut().enumerate().take(TASK_COMM_LEN - 1) {
        // SAFETY: `raw` points to a valid `task_struct` for as long as `task`
        // is borrowed, and `comm` is an array of `TASK_COMM_LEN` bytes, so
        // every `i` below `TASK_COMM_LEN - 1` is in bounds. The bytes may be
        // written concurrently by a rename; a volatile byte load is the
        // `READ_ONCE()` the C side relies on for the same lockless read.
        let c = unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*raw).comm[i])) };
        if c == 0 {
            break;
        }
        *byte = c as u8;
    }
    name
}

// Keep `TASK_COMM_LEN` in step with the C definition.
const _: () = assert!(TASK_COMM_LEN == bindings::TASK_COMM_LEN as usize);

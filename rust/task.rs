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

extern "C" {
    fn tt_signal_restarts_without_handler() -> bool;
}

/// Whether the current task, woken from an interruptible sleep by a
/// pending signal, will return to its system call without running a
/// handler: a stop (`SIGSTOP`, job control), a freezer or ptrace trap, or
/// an ignored signal, after which the call restarts. `false` when a
/// handler will run (the call gives `EINTR` or restarts after it, under
/// `SA_RESTART`) or the task is being killed.
pub(crate) fn signal_restarts_without_handler() -> bool {
    // SAFETY: `tt_signal_restarts_without_handler` (rust/signal_glue.c)
    // only reads the current task's signal state under its spinlock.
    unsafe { tt_signal_restarts_without_handler() }
}

// SPDX-License-Identifier: GPL-2.0

//! Absolute `CLOCK_MONOTONIC` time, as userspace names deadlines.
//!
//! `kernel::time::Instant` keeps its nanoseconds private, but a deadline that
//! comes from userspace (`clock_gettime(CLOCK_MONOTONIC)`) must be compared
//! with the kernel's clock as a plain number.

use kernel::bindings;

/// Nanoseconds of `CLOCK_MONOTONIC` now, the value `clock_gettime` returns.
pub(crate) fn monotonic_ns() -> i64 {
    // SAFETY: `ktime_get` has no preconditions; it may be called from any
    // context once timekeeping is initialised, which precedes module loading.
    unsafe { bindings::ktime_get() }
}

// SPDX-License-Identifier: GPL-2.0

//! Absolute `CLOCK_MONOTONIC` time, as userspace names deadlines.
//!
//! `kernel::time::Instant` keeps its nanoseconds private, but a deadline that
//! comes from userspace (`clock_gettime(CLOCK_MONOTONIC)`) must be compared
//! with the kernel's clock as a plain number, once converted from the
//! caller's time namespace to the host's clock.

use kernel::bindings;

/// Nanoseconds of the host's `CLOCK_MONOTONIC` now, the value `clock_gettime`
/// returns outside time namespaces.
pub(crate) fn monotonic_ns() -> i64 {
    // SAFETY: `ktime_get` has no preconditions; it may be called from any
    // context once timekeeping is initialised, which precedes module loading.
    unsafe { bindings::ktime_get() }
}

extern "C" {
    fn tt_timens_monotonic_to_host(ns: i64) -> i64;
}

/// The host's `CLOCK_MONOTONIC` time (what [`monotonic_ns`] returns) of an
/// absolute `CLOCK_MONOTONIC` time `ns` of the calling task's time
/// namespace, converted as futex and timerfd convert absolute deadlines:
/// the namespace's offset is taken off, and a time before the offset is 0
/// (already past).
pub(crate) fn monotonic_from_caller(ns: i64) -> i64 {
    // SAFETY: `tt_timens_monotonic_to_host` (rust/time_glue.c) reads the
    // current task's time namespace, which stays valid while the task
    // runs; it takes any value.
    unsafe { tt_timens_monotonic_to_host(ns) }
}

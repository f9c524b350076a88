// SPDX-License-Identifier: GPL-2.0
/*
 * Time namespaces for the Rust side of the tenstorrent module
 * (rust/time.rs): timens_ktime_to_host() is a static inline, which the
 * Rust bindings cannot call.
 */

#include <linux/time_namespace.h>

ktime_t tt_timens_monotonic_to_host(ktime_t tim);

/*
 * An absolute CLOCK_MONOTONIC time of the current task's time namespace,
 * on the host's clock: what futex and timerfd do with absolute deadlines.
 */
ktime_t tt_timens_monotonic_to_host(ktime_t tim)
{
	return timens_ktime_to_host(CLOCK_MONOTONIC, tim);
}

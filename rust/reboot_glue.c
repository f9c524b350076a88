// SPDX-License-Identifier: GPL-2.0
/*
 * Reboot notifiers for the Rust side of the tenstorrent module
 * (rust/reboot.rs): <linux/reboot.h> is not among the headers Linux 7.3's
 * Rust bindings are generated from, and a notifier_block must outlive its
 * registration, so it is allocated here, next to the calls.
 */

#include <linux/notifier.h>
#include <linux/reboot.h>
#include <linux/slab.h>

struct tt_reboot_hook {
	struct notifier_block nb;
	void (*fn)(void *data);
	void *data;
};

struct tt_reboot_hook *tt_reboot_hook_register(void (*fn)(void *data), void *data);
void tt_reboot_hook_unregister(struct tt_reboot_hook *hook);

static int tt_reboot_hook_call(struct notifier_block *nb, unsigned long action, void *unused)
{
	struct tt_reboot_hook *hook = container_of(nb, struct tt_reboot_hook, nb);

	/* SYS_RESTART (kexec's too), SYS_HALT, SYS_POWER_OFF: all leave. */
	hook->fn(hook->data);
	return NOTIFY_DONE;
}

/*
 * Calls fn(data) when the system restarts (kexec included), halts or
 * powers off, before devices are shut down. NULL without memory or if the
 * notifier cannot be registered.
 */
struct tt_reboot_hook *tt_reboot_hook_register(void (*fn)(void *data), void *data)
{
	struct tt_reboot_hook *hook = kzalloc(sizeof(*hook), GFP_KERNEL);

	if (!hook)
		return NULL;
	hook->nb.notifier_call = tt_reboot_hook_call;
	hook->fn = fn;
	hook->data = data;
	if (register_reboot_notifier(&hook->nb)) {
		kfree(hook);
		return NULL;
	}
	return hook;
}

/*
 * Unregisters and frees a hook; a call of its function in progress has
 * returned when this does (the chain's rwsem).
 */
void tt_reboot_hook_unregister(struct tt_reboot_hook *hook)
{
	unregister_reboot_notifier(&hook->nb);
	kfree(hook);
}

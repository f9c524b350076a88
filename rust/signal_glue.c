// SPDX-License-Identifier: GPL-2.0
/*
 * Signals for the Rust side of the tenstorrent module (rust/task.rs): the
 * pending set, the blocked mask and the handlers are behind the signal
 * hand's spinlock and helpers the Rust bindings cannot reach.
 */

#include <linux/sched/signal.h>
#include <linux/signal.h>

bool tt_signal_restarts_without_handler(void);

/*
 * Whether the current task, woken from an interruptible sleep, will come
 * back to its system call without running a handler: what it has pending
 * (unblocked) has no handler installed, so it is a stop, a freezer or
 * ptrace trap, or an ignored signal, after which the call is restarted. A
 * fatal signal answers false: the task is going away.
 */
bool tt_signal_restarts_without_handler(void)
{
	struct task_struct *t = current;
	sigset_t pending;
	bool handler = false;
	int sig;

	if (fatal_signal_pending(t))
		return false;
	spin_lock_irq(&t->sighand->siglock);
	sigorsets(&pending, &t->pending.signal, &t->signal->shared_pending.signal);
	for (sig = 1; sig <= _NSIG && !handler; sig++) {
		__sighandler_t h;

		if (!sigismember(&pending, sig) || sigismember(&t->blocked, sig))
			continue;
		h = t->sighand->action[sig - 1].sa.sa_handler;
		handler = h != SIG_DFL && h != SIG_IGN;
	}
	spin_unlock_irq(&t->sighand->siglock);
	return !handler;
}

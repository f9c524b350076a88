// SPDX-License-Identifier: GPL-2.0
/*
 * Delayed work for the Rust side of the tenstorrent module
 * (rust/workqueue.rs): the work's initialisation is a macro and
 * queue_delayed_work() a static inline, which the Rust bindings cannot
 * call.
 */

#include <linux/timer.h>
#include <linux/workqueue.h>

void tt_delayed_work_init(struct delayed_work *dwork, work_func_t func,
			  const char *name, struct lock_class_key *key,
			  const char *timer_name,
			  struct lock_class_key *timer_key);
bool tt_delayed_work_queue(struct delayed_work *dwork, unsigned long delay);

/*
 * INIT_DELAYED_WORK() with the lockdep classes and names the caller gives
 * (one per work item, as the macro makes one per call site).
 */
void tt_delayed_work_init(struct delayed_work *dwork, work_func_t func,
			  const char *name, struct lock_class_key *key,
			  const char *timer_name,
			  struct lock_class_key *timer_key)
{
	__INIT_WORK_KEY(&dwork->work, func, false, key);
#ifdef CONFIG_LOCKDEP
	lockdep_init_map(&dwork->work.lockdep_map, name, key, 0);
#endif
	timer_init_key(&dwork->timer, delayed_work_timer_fn, TIMER_IRQSAFE,
		       timer_name, timer_key);
}

/*
 * Queues @dwork on the system workqueue to run after @delay jiffies
 * (schedule_delayed_work()); false if it was queued already.
 */
bool tt_delayed_work_queue(struct delayed_work *dwork, unsigned long delay)
{
	return schedule_delayed_work(dwork, delay);
}

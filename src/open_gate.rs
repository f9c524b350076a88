// SPDX-License-Identifier: GPL-2.0

//! Exclusive open: who may open a card at all.
//!
//! As in tt-kmd 2.10, opening is a reader/writer lock taken at `open()`:
//! an `O_EXCL` open is the writer (admitted when no other file of the
//! card is open, and then alone until it is closed), a plain open is a
//! reader (admitted while no `O_EXCL` file is open), and `O_NONBLOCK`
//! turns a wait into `EAGAIN`. Unlike tt-kmd, waiting openers are served
//! in arrival order: a plain open that comes while an `O_EXCL` opener
//! waits queues behind it, so a stream of plain opens cannot starve the
//! exclusive one (tt-flash waiting for the card it must flash); plain
//! opens queued behind nobody exclusive go in together. A wait is
//! interruptible (a signal: `ERESTARTSYS`, restarted when no handler ran)
//! and ends with `ENODEV` when the card is unbound.

use crate::rust_ext::task::{
    comm,
    TASK_COMM_LEN, //
};
use kernel::{
    new_condvar,
    new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        CondVar,
        Mutex, //
    },
    task::Task, //
};

/// The opener holding a card exclusively.
struct Holder {
    /// The thread-group leader of the opener.
    task: ARef<Task>,
    comm: [u8; TASK_COMM_LEN],
}

struct GateState {
    gone: bool,
    /// Files admitted and not yet closed.
    open: usize,
    exclusive: Option<Holder>,
    /// Tickets of waiting openers, in arrival order: `true` for `O_EXCL`.
    queue: KVec<(u64, bool)>,
    next_ticket: u64,
}

impl GateState {
    /// Whether the waiter of `ticket` (or, with `None`, a new opener that
    /// does not queue) may be admitted now.
    fn admissible(&self, ticket: Option<u64>, exclusive: bool) -> bool {
        let ahead = self.queue.iter().take_while(|&&(t, _)| Some(t) != ticket);
        if exclusive {
            self.open == 0 && ahead.count() == 0
        } else {
            self.exclusive.is_none() && !ahead.into_iter().any(|&(_, excl)| excl)
        }
    }

    fn leave_queue(&mut self, ticket: u64) {
        if let Some(position) = self.queue.iter().position(|&(t, _)| t == ticket) {
            let _ = self.queue.remove(position);
        }
    }
}

/// What sysfs shows of the gate.
pub(crate) struct GateInfo {
    pub(crate) open: usize,
    /// The exclusive holder's pid (in the reader's pid namespace, 0 when
    /// not visible there) and comm.
    pub(crate) exclusive: Option<(u32, [u8; TASK_COMM_LEN])>,
    pub(crate) waiting: usize,
}

/// A card's open-time reader/writer lock.
#[pin_data]
pub(crate) struct OpenGate {
    #[pin]
    state: Mutex<GateState>,
    #[pin]
    changed: CondVar,
}

impl OpenGate {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            state <- new_mutex!(GateState {
                gone: false,
                open: 0,
                exclusive: None,
                queue: KVec::new(),
                next_ticket: 0,
            }),
            changed <- new_condvar!(),
        })
    }

    /// Admits an opener: exclusive (`O_EXCL`) or not, waiting unless
    /// `nonblock`. `EAGAIN` for a non-blocking open that would wait,
    /// `ERESTARTSYS` on a signal, `ENODEV` once the card is gone.
    pub(crate) fn enter(&self, exclusive: bool, nonblock: bool) -> Result {
        let mut state = self.state.lock();
        if state.gone {
            return Err(ENODEV);
        }
        if !state.admissible(None, exclusive) {
            if nonblock {
                return Err(EAGAIN);
            }
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            state.queue.push((ticket, exclusive), GFP_KERNEL)?;
            loop {
                if state.gone {
                    state.leave_queue(ticket);
                    return Err(ENODEV);
                }
                if state.admissible(Some(ticket), exclusive) {
                    state.leave_queue(ticket);
                    break;
                }
                if self.changed.wait_interruptible(&mut state) {
                    state.leave_queue(ticket);
                    // Openers behind this one may go now.
                    self.changed.notify_all();
                    return Err(ERESTARTSYS);
                }
            }
        }
        state.open += 1;
        if exclusive {
            let task: ARef<Task> = kernel::current!().group_leader().into();
            let name = comm(&task);
            state.exclusive = Some(Holder { task, comm: name });
        }
        // Plain openers queued behind this one may be admissible too.
        self.changed.notify_all();
        Ok(())
    }

    /// A file admitted by [`OpenGate::enter`] is closed.
    pub(crate) fn leave(&self, exclusive: bool) {
        let holder = {
            let mut state = self.state.lock();
            state.open = state.open.saturating_sub(1);
            let holder = if exclusive {
                state.exclusive.take()
            } else {
                None
            };
            self.changed.notify_all();
            holder
        };
        // The task reference goes after the mutex.
        drop(holder);
    }

    /// The card is gone: waiting openers get `ENODEV`, and so do later ones.
    pub(crate) fn shut_down(&self) {
        self.state.lock().gone = true;
        self.changed.notify_all();
    }

    pub(crate) fn info(&self) -> GateInfo {
        let current = kernel::current!();
        let ns = current.active_pid_ns();
        let state = self.state.lock();
        GateInfo {
            open: state.open,
            exclusive: state.exclusive.as_ref().map(|h| {
                let pid = u32::try_from(h.task.tgid_nr_ns(ns)).unwrap_or(0);
                (pid, h.comm)
            }),
            waiting: state.queue.len(),
        }
    }
}

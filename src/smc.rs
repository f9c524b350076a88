// SPDX-License-Identifier: GPL-2.0

//! The card's ARC firmware message queue, owned by the driver and shared by
//! the open files (SMC_MSG, tt-kmd 2.11) and the driver's own messages
//! (power votes, the Blackhole reset's messages). [`Firmware`] is how the
//! driver reaches the firmware: this queue, and the Wormhole mailbox and
//! CSM through the ARC tile's registers (src/arc.rs).
//!
//! The firmware's queue carries one request at a time for the driver: a
//! message is *queued* (in arrival order, whoever sent it), then *sent*
//! (written into the firmware's queue, the doorbell rung), then *done*:
//! answered, or failed (`ETIMEDOUT` from a silent firmware, `ENODEV` when
//! the card goes or a reset fences its file, `EOPNOTSUPP` for firmware
//! without a queue). A file has at most one message outstanding; a done
//! message waits for its file to collect it (POLL, the blocking wait).
//!
//! What is better than tt-kmd 2.11, whose queue only moves inside some
//! file's POST or POLL:
//!
//! - The queue advances by itself: while a message is outstanding a work
//!   item looks at the queue, first after 50 µs, then backing off to every
//!   millisecond ([`POLL_FIRST_US`], [`POLL_MAX_US`]: hrtimer sleeps, not
//!   jiffies), and collects the response the moment it is there; a look
//!   costs a few reads of the queue's header (its place is kept between
//!   looks), so a file that sleeps in `poll(2)`,
//!   `epoll` or the blocking wait is woken without polling. Neither chip's
//!   firmware raises an interrupt to the host when it answers (tt-kmd,
//!   tt-umd and luwen all poll the response pointer; the Blackhole MSI
//!   catcher is the host-to-ARC doorbell), so a kernel-side poll is the
//!   only way; it runs only while something is outstanding, so an idle card
//!   costs nothing.
//! - Arrival order across files, the driver's own messages included (tt-kmd
//!   lets the driver's jump the queue): with one message per file, a file
//!   posting in a loop delays another file's message by at most one message.
//! - Silent firmware: a message the firmware has not answered within
//!   [`MSG_TIMEOUT_MS`] of being sent (or that could not be sent for that
//!   long: firmware not ready, queue full) fails with `ETIMEDOUT`, and so
//!   does every message queued behind it. The queue is then re-initialised:
//!   the request the firmware still holds is counted as an orphan whose
//!   response, if it ever comes, is dropped rather than given to the next
//!   message, and the queue is looked up again for the next one.
//! - Abandoned messages (ABANDON, close, a killed process) are orphans the
//!   same way: nothing waits for them and nothing wedges.
//! - Unbind completes every outstanding message with `ENODEV`; a reset
//!   that fences files completes theirs with `ENODEV`, and the reset
//!   itself (POST_RESET) forgets what the rebooted firmware dropped.
//!
//! Lock order: [`SmcQueue`]'s mutex, then the kernel window's
//! (src/mapping.rs). The power votes' mutex (src/power.rs) is taken before
//! this one, only to post or collect a message
//! ([`SmcQueue::post_kernel`], [`SmcQueue::collect_kernel`], which touch
//! no register); nothing is taken inside it that could take the votes'.

use crate::{
    arbiter::{
        Fence,
        OwnerId,
        Requester, //
    },
    arc::{
        ArcMessage,
        ArcMessenger,
        Csm,
        Exchange,
        Header,
        Queue, //
    },
    chip::{
        Family,
        Layout, //
    },
    mapping::CardMemory,
    rust_ext::{
        task::TASK_COMM_LEN,
        time::monotonic_ns, //
    },
    wait::{
        DefersWakeups,
        Sleeper,
        Wait,
        WakeMutex,
        Wakeups,
        Woken, //
    },
};
use core::sync::atomic::{
    AtomicBool,
    AtomicU32,
    Ordering, //
};
use kernel::{
    new_condvar, new_mutex, new_poll_condvar,
    prelude::*,
    sync::{
        poll::PollCondVar,
        Arc,
        CondVar, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
};

/// How long the firmware has to answer a message once it is sent, or to
/// take it once it is the next to go (tt-kmd's `ARC_MSG_TIMEOUT_MS`);
/// debugfs `smc_timeout_ms` changes it per card (for tests).
pub(crate) const MSG_TIMEOUT_MS: u32 = 1000;
/// While a message is outstanding the work item looks at the queue, sleeps
/// [`POLL_FIRST_US`], looks again, and doubles the sleep each time up to
/// [`POLL_MAX_US`]; after [`POLL_LOOKS`] looks it queues itself again (at
/// once) rather than keep its worker. The sleeps are `usleep_range`
/// (hrtimers): a jiffy-based delay is never shorter than a jiffy, 4 ms on
/// Debian's HZ=250 kernel, which was the old 1 ms period in practice.
pub(crate) const POLL_FIRST_US: i64 = 50;
pub(crate) const POLL_MAX_US: i64 = 1000;
pub(crate) const POLL_LOOKS: u32 = 64;
/// Longest a driver message waits, queued and sent (one message ahead of
/// it and its own, at the default deadline).
pub(crate) const KERNEL_WAIT_MS: u32 = 2 * MSG_TIMEOUT_MS;
/// How often a driver message's sender looks at the queue itself.
const KERNEL_POLL_INTERVAL: Delta = Delta::from_micros(100);
/// Most responses collected and messages sent in one go.
const MAX_ROUNDS: usize = 64;
/// A response's status word when the queue could not be read or written
/// (tt-kmd's `ARC_MSG_STATUS_HW_ERROR`).
pub(crate) const STATUS_HW_ERROR: u32 = u32::MAX;
/// The response such a message gets.
const HW_ERROR_RESPONSE: ArcMessage = [STATUS_HW_ERROR, 0, 0, 0, 0, 0, 0, 0];

/// Who sent a message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sender {
    /// An open file (SMC_MSG).
    File(OwnerId),
    /// The driver itself, one ticket per message.
    Kernel(u64),
}

/// How a message ended.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Outcome {
    /// The firmware's response; its first word is the status (0: success).
    Answered(ArcMessage),
    /// It got no response.
    Failed(Error),
}

/// Where the threads of a file that wait for its message in SMC_WAIT
/// sleep: one per file message, so that an answer wakes the threads
/// waiting for that message and nobody else's (a card-wide condition
/// variable woke every waiting file at each answer, 31 of 32 for nothing).
#[pin_data]
struct SmcWaiter {
    #[pin]
    wake: CondVar,
    /// Set by every wake-up sent to the message's waiters, taken by a
    /// waiter when it returns from a sleep: a return without it was not a
    /// wake-up sent to it ([`Woken::Stray`]).
    rung: AtomicBool,
}

impl Sleeper for SmcWaiter {
    fn condvar(&self) -> &CondVar {
        &self.wake
    }

    fn wake(&self) {
        // Before the notification: the waiter reads it once woken.
        self.rung.store(true, Ordering::Release);
        // Every thread of the file waiting for it.
        self.wake.notify_all();
    }
}

/// One message, from its post until its sender collects it.
struct Message {
    sender: Sender,
    /// A file's message: where its SMC_WAIT threads sleep.
    waiter: Option<Arc<SmcWaiter>>,
    /// The process that posted it, for sysfs (none for the driver's own).
    requester: Option<Requester>,
    request: ArcMessage,
    posted_ns: i64,
    /// When it went into the firmware's queue.
    sent_ns: Option<i64>,
    outcome: Option<Outcome>,
}

impl Message {
    fn is_queued(&self) -> bool {
        self.sent_ns.is_none() && self.outcome.is_none()
    }

    fn is_in_flight(&self) -> bool {
        self.sent_ns.is_some() && self.outcome.is_none()
    }

    /// `queued`, `sent` or `done` (waiting to be collected), as sysfs and
    /// fdinfo show it.
    fn state(&self) -> &'static str {
        match (self.sent_ns, self.outcome) {
            (_, Some(_)) => "done",
            (Some(_), None) => "sent",
            (None, None) => "queued",
        }
    }
}

/// What sysfs shows of the queue's history.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Counters {
    /// Messages accepted (the driver's own included).
    pub(crate) posted: u64,
    /// Messages the firmware answered, with any status.
    pub(crate) completed: u64,
    /// Of those, answered with a nonzero status.
    pub(crate) firmware_errors: u64,
    /// Messages abandoned before their sender collected them (ABANDON,
    /// close).
    pub(crate) abandoned: u64,
    /// Messages failed with `ETIMEDOUT`.
    pub(crate) timeouts: u64,
    /// Responses dropped because nobody waited for them any more.
    pub(crate) orphans_dropped: u64,
    /// Total and longest time from post to response of the answered ones.
    pub(crate) latency_total_ns: u64,
    pub(crate) latency_max_ns: u64,
    /// Wake-ups sent to an SMC_WAIT thread whose message was not done and
    /// still there: none is meant to happen (each message wakes only its
    /// own waiters, when it is done or gone).
    pub(crate) spurious_wakeups: u64,
}

/// One outstanding message as sysfs shows it.
pub(crate) struct MessageInfo {
    /// The poster's pid in the reader's pid namespace (0: the driver, or
    /// not visible there) and its comm at post time.
    pub(crate) pid: u32,
    pub(crate) comm: [u8; TASK_COMM_LEN],
    /// The message type: the low byte of its first word.
    pub(crate) code: u8,
    pub(crate) age_ns: i64,
    /// `queued`, `sent` or `done` (waiting to be collected).
    pub(crate) state: &'static str,
}

struct State {
    /// Every message from post to collection, in arrival order.
    messages: KVec<Message>,
    /// Requests the firmware holds whose responses nobody waits for: the
    /// next that many responses are dropped.
    orphans: u32,
    /// Since when the next message waits to be sent (firmware not ready,
    /// queue full).
    blocked_since: Option<i64>,
    next_ticket: u64,
    /// The card is unbound: nothing more is sent.
    gone: bool,
    /// The last reset's fence: its files post nothing more (see
    /// [`State::fence`]).
    fence: Fence,
    counters: Counters,
    /// Where the firmware's queue was found, kept while it stays there
    /// (dropped after a reset, a timeout, an error, or when its pointers
    /// are not as the driver left them: then it is looked up again).
    queue: Option<Queue>,
    /// The SMC_WAIT threads to wake once the mutex is released: those of
    /// each message that got done or went away under it.
    wakeups: Wakeups<SmcWaiter>,
}

impl DefersWakeups for State {
    type Waiter = SmcWaiter;
    fn wakeups(&mut self) -> &mut Wakeups<SmcWaiter> {
        &mut self.wakeups
    }
}

impl State {
    fn new() -> Self {
        Self {
            messages: KVec::new(),
            orphans: 0,
            blocked_since: None,
            next_ticket: 0,
            gone: false,
            fence: Fence::default(),
            counters: Counters::default(),
            queue: None,
            wakeups: Wakeups::new(),
        }
    }

    /// Message `i` got done or is about to go: its SMC_WAIT threads are
    /// woken once the mutex is released.
    fn wake_waiters(&mut self, i: usize) {
        if let Some(waiter) = self.messages.get(i).and_then(|m| m.waiter.clone()) {
            self.wakeups.push(waiter);
        }
    }

    /// The message the firmware holds, if any.
    fn in_flight(&self) -> Option<usize> {
        self.messages.iter().position(Message::is_in_flight)
    }

    /// Squares what the driver waits for with what the firmware owes
    /// (`owed`, from the queue's pointers): after it rebooted (a reset the
    /// driver did not see coming) it owes nothing, no orphan's response
    /// will come and the message in flight is lost (`ENODEV`); requests
    /// the driver did not make (left in the queue before it bound) are
    /// orphans, their responses nobody's.
    fn reconcile(&mut self, owed: u32) {
        let in_flight = self.in_flight();
        let ours = u32::from(in_flight.is_some());
        use core::cmp::Ordering::{
            Equal,
            Greater,
            Less, //
        };
        match (self.orphans + ours).cmp(&owed) {
            Greater => {
                self.orphans = owed.saturating_sub(ours);
                if let (Some(i), 0) = (in_flight, owed) {
                    self.fail(i, ENODEV);
                    self.orphans = 0;
                }
            }
            Less => self.orphans = owed - ours,
            Equal => {}
        }
    }

    /// The message in flight could not be sent or collected: it ends with
    /// tt-kmd's hardware-error status. If the firmware `holds` its request,
    /// the response, should it come, is an orphan's.
    fn hw_error_in_flight(&mut self, holds: bool) {
        if let Some(i) = self.in_flight() {
            self.messages[i].outcome = Some(Outcome::Answered(HW_ERROR_RESPONSE));
            self.wake_waiters(i);
            self.counters.firmware_errors += 1;
            if holds {
                self.orphans = self.orphans.saturating_add(1);
            }
        }
    }

    /// Queues `request` of `sender` at the tail, counted as posted, with
    /// the `waiter` of a file's message. `ENODEV` once the card is gone.
    fn enqueue(
        &mut self,
        sender: Sender,
        waiter: Option<Arc<SmcWaiter>>,
        requester: Option<Requester>,
        request: &ArcMessage,
    ) -> Result {
        if self.gone {
            return Err(ENODEV);
        }
        if let Sender::File(owner) = sender {
            if self.fence.is_stale(owner) {
                return Err(ENODEV);
            }
        }
        self.messages.push(
            Message {
                sender,
                waiter,
                requester,
                request: *request,
                posted_ns: monotonic_ns(),
                sent_ns: None,
                outcome: None,
            },
            GFP_KERNEL,
        )?;
        self.counters.posted += 1;
        Ok(())
    }

    fn position(&self, sender: Sender) -> Option<usize> {
        self.messages.iter().position(|m| m.sender == sender)
    }

    /// Forgets message `i`; another thread of its file waiting for it
    /// wakes to find it gone.
    fn remove(&mut self, i: usize) -> Option<Message> {
        self.wake_waiters(i);
        self.messages.remove(i).ok()
    }

    /// Whether a message waits to be sent or answered.
    fn busy(&self) -> bool {
        self.messages.iter().any(|m| m.outcome.is_none())
    }

    /// Ends message `i` without a response: if the firmware holds it, its
    /// response is dropped when it comes.
    fn fail(&mut self, i: usize, error: Error) {
        if let Some(m) = self.messages.get_mut(i) {
            if m.outcome.is_some() {
                return;
            }
            if m.sent_ns.is_some() {
                self.orphans = self.orphans.saturating_add(1);
            }
            m.outcome = Some(Outcome::Failed(error));
            if error == ETIMEDOUT {
                self.counters.timeouts += 1;
            }
            self.wake_waiters(i);
        }
    }

    /// A reset fenced the files of `fence`: their messages fail with
    /// `ENODEV`, and so does a later POST of theirs. A POST checks the
    /// fence when the ioctl begins, without this mutex: one that passed
    /// that check before the reset and queues after this would otherwise
    /// reach the firmware after the reset fenced its file.
    fn fence(&mut self, fence: Fence) {
        self.fence = fence;
        for i in 0..self.messages.len() {
            if let Sender::File(owner) = self.messages[i].sender {
                if fence.is_stale(owner) {
                    self.fail(i, ENODEV);
                }
            }
        }
    }

    /// Fails every message not yet done with `error`.
    fn fail_all(&mut self, error: Error) {
        for i in 0..self.messages.len() {
            self.fail(i, error);
        }
        self.blocked_since = None;
    }

    /// Hands `response` to the message in flight, or drops it if it
    /// belongs to an orphan or to nobody.
    fn deliver(&mut self, response: ArcMessage, now: i64) {
        if self.orphans > 0 {
            self.orphans -= 1;
            self.counters.orphans_dropped += 1;
            return;
        }
        let Some(i) = self.in_flight() else {
            // Nothing of ours was outstanding: stale (from before the
            // driver bound, say).
            self.counters.orphans_dropped += 1;
            return;
        };
        self.wake_waiters(i);
        let m = &mut self.messages[i];
        m.outcome = Some(Outcome::Answered(response));
        let latency = u64::try_from(now - m.posted_ns).unwrap_or(0);
        self.counters.completed += 1;
        if response[0] != 0 {
            self.counters.firmware_errors += 1;
        }
        self.counters.latency_total_ns = self.counters.latency_total_ns.saturating_add(latency);
        self.counters.latency_max_ns = self.counters.latency_max_ns.max(latency);
    }
}

/// The owner of a card's firmware message queue.
#[pin_data]
pub(crate) struct SmcQueue {
    #[pin]
    state: WakeMutex<State>,
    /// Notified whenever a message is done or the card goes: files
    /// sleeping in `poll(2)` look whether theirs is. (The blocking wait
    /// sleeps on its message's own [`SmcWaiter`]; `poll(2)` cannot: epoll
    /// keeps a file's wait queue registered until the file is closed, so it
    /// must live as long as the card.)
    #[pin]
    ready: PollCondVar,
    /// The per-message deadline, in milliseconds.
    timeout_ms: AtomicU32,
}

impl SmcQueue {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            state <- WakeMutex::new(new_mutex!(State::new())),
            ready <- new_poll_condvar!("SmcQueue::ready"),
            timeout_ms: AtomicU32::new(MSG_TIMEOUT_MS),
        })
    }

    /// The per-message deadline, in milliseconds.
    pub(crate) fn timeout_ms(&self) -> u32 {
        self.timeout_ms.load(Ordering::Relaxed)
    }

    /// Sets the per-message deadline (at least 1 ms); it applies from the
    /// next look at the queue.
    pub(crate) fn set_timeout_ms(&self, ms: u32) {
        self.timeout_ms.store(ms.max(1), Ordering::Relaxed);
    }

    /// The condition variable files sleep on in `poll(2)`.
    pub(crate) fn ready(&self) -> &PollCondVar {
        &self.ready
    }

    /// POST from the file `owner`: queues `request` and sends it if the
    /// queue is free. `EBUSY` if the file has a message outstanding,
    /// `EOPNOTSUPP` (nothing posted) when the firmware has no queue,
    /// `ENODEV` once the card is gone or a reset fenced the file. `kick`
    /// is called, under the queue's
    /// lock, when the message is not done yet: it must make sure
    /// [`SmcQueue::advance`] runs again soon.
    pub(crate) fn post(
        &self,
        firmware: &Firmware<'_>,
        owner: OwnerId,
        request: &ArcMessage,
        kick: impl FnOnce(),
    ) -> Result {
        let sender = Sender::File(owner);
        let waiter = Arc::pin_init(
            pin_init!(SmcWaiter {
                wake <- new_condvar!("tenstorrent_smc_waiter"),
                rung: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )?;
        let mut state = self.state.lock();
        if state.gone {
            return Err(ENODEV);
        }
        if state.position(sender).is_some() {
            return Err(EBUSY);
        }
        state.enqueue(sender, Some(waiter), Some(Requester::current()), request)?;
        self.advance_locked(&mut state, firmware);
        if let Some(i) = state.position(sender) {
            if let Some(Outcome::Failed(e)) = state.messages[i].outcome {
                if e == EOPNOTSUPP {
                    // As tt-kmd: not posted at all.
                    state.remove(i);
                    state.counters.posted -= 1;
                    return Err(EOPNOTSUPP);
                }
            }
        }
        if state.busy() {
            kick();
        }
        Ok(())
    }

    /// POLL from the file `owner`: its message's outcome once done (the
    /// file may post again), `EAGAIN` while it is not, `ESRCH` when the
    /// file has none.
    pub(crate) fn poll(&self, firmware: &Firmware<'_>, owner: OwnerId) -> Result<Outcome> {
        let sender = Sender::File(owner);
        let mut state = self.state.lock();
        if state.position(sender).is_none() {
            return Err(ESRCH);
        }
        self.advance_locked(&mut state, firmware);
        Self::take(&mut state, sender).ok_or(EAGAIN)
    }

    fn take(state: &mut State, sender: Sender) -> Option<Outcome> {
        let i = state.position(sender)?;
        let outcome = state.messages[i].outcome?;
        state.remove(i);
        Some(outcome)
    }

    /// The blocking wait of the file `owner`: like [`SmcQueue::poll`],
    /// but sleeps until the message is done (the work item collects it),
    /// a signal comes (`ERESTARTNOHAND`: `EINTR` when a handler ran), or
    /// `wait`'s deadline passes (`ETIMEDOUT`, also when it had passed
    /// already; [`Wait::Try`] is `EAGAIN`).
    pub(crate) fn wait(&self, owner: OwnerId, wait: Wait) -> Result<Outcome> {
        let sender = Sender::File(owner);
        let state = self.state.lock();
        let Some(waiter) = state
            .position(sender)
            .and_then(|i| state.messages[i].waiter.clone())
        else {
            return Err(ESRCH);
        };
        let (_state, outcome) = state.wait_until(&waiter.wake, wait, |state, woken| {
            // Whether a wake-up was sent to this message's waiters since
            // the last look (a return from a sleep without one is stray).
            let rung = woken.is_some() && waiter.rung.swap(false, Ordering::Acquire);
            // A done message always wins over a signal or a deadline that
            // came at the same time.
            if let Some(outcome) = Self::take(state, sender) {
                return Some(Ok(outcome));
            }
            if state.position(sender).is_none() {
                // Abandoned or collected by another thread of the file
                // meanwhile.
                return Some(Err(ESRCH));
            }
            if woken == Some(Woken::Notified) && rung {
                state.counters.spurious_wakeups += 1;
            }
            match woken {
                None if wait == Wait::Try => Some(Err(EAGAIN)),
                None if wait.is_over(monotonic_ns()) => Some(Err(ETIMEDOUT)),
                Some(Woken::Signal) => Some(Err(ERESTARTNOHAND)),
                Some(Woken::Deadline) => Some(Err(ETIMEDOUT)),
                _ => None,
            }
        });
        outcome
    }

    /// ABANDON from the file `owner` (and its close): forgets its message;
    /// a response still to come is dropped when it arrives.
    pub(crate) fn abandon(&self, owner: OwnerId) {
        let mut state = self.state.lock();
        let Some(i) = state.position(Sender::File(owner)) else {
            return;
        };
        if state.messages[i].is_in_flight() {
            state.orphans = state.orphans.saturating_add(1);
        }
        if state.messages[i].outcome.is_none() {
            state.counters.abandoned += 1;
        }
        state.remove(i);
    }

    /// What `poll(2)` reports to the file `owner`: whether its message is
    /// done (readable) and whether it may post (writable). A file of a
    /// card that is gone reads as hung up.
    pub(crate) fn readiness(&self, owner: OwnerId) -> (bool, bool, bool) {
        let state = self.state.lock();
        let mine = state.position(Sender::File(owner));
        let done = mine.is_some_and(|i| state.messages[i].outcome.is_some());
        (done, mine.is_none() && !state.gone, state.gone)
    }

    /// Sends `request` for the driver, in turn with the files' messages, and
    /// returns the firmware's answer: `ETIMEDOUT` when the firmware does not
    /// take or answer it in time, or when it has waited [`KERNEL_WAIT_MS`]
    /// (then it is abandoned), `EOPNOTSUPP` for firmware without a queue,
    /// `ENODEV` once the card is gone or a reset dropped it. Sleeps
    /// uninterruptibly (the driver's messages are not the caller's to give
    /// up), but never longer than
    /// [`KERNEL_WAIT_MS`], whatever debugfs `smc_timeout_ms` says.
    pub(crate) fn send(&self, firmware: &Firmware<'_>, request: &ArcMessage) -> Result<ArcMessage> {
        let give_up = monotonic_ns() + i64::from(KERNEL_WAIT_MS) * 1_000_000;
        let sender = {
            let mut state = self.state.lock();
            let sender = Sender::Kernel(state.next_ticket);
            state.enqueue(sender, None, None, request)?;
            state.next_ticket += 1;
            sender
        };
        loop {
            {
                let mut state = self.state.lock();
                self.advance_locked(&mut state, firmware);
                if let Some(outcome) = Self::take(&mut state, sender) {
                    return match outcome {
                        Outcome::Answered(response) => Ok(response),
                        Outcome::Failed(e) => Err(e),
                    };
                }
                if monotonic_ns() >= give_up {
                    if let Some(i) = state.position(sender) {
                        if state.messages[i].is_in_flight() {
                            state.orphans = state.orphans.saturating_add(1);
                        }
                        state.remove(i);
                        state.counters.timeouts += 1;
                    }
                    return Err(ETIMEDOUT);
                }
            }
            fsleep(KERNEL_POLL_INTERVAL);
        }
    }

    /// Queues `request` for the driver and returns its ticket, for
    /// [`SmcQueue::collect_kernel`]; `ENODEV` once the card is gone. It is
    /// only queued here, not written to the card: `kick` (called under the
    /// queue's lock, as in [`SmcQueue::post`]) must make the work item
    /// send it, so that this may be called under locks that an exchange
    /// with the firmware must not be made under (the power votes').
    pub(crate) fn post_kernel(&self, request: &ArcMessage, kick: impl FnOnce()) -> Result<u64> {
        let mut state = self.state.lock();
        let ticket = state.next_ticket;
        state.enqueue(Sender::Kernel(ticket), None, None, request)?;
        state.next_ticket += 1;
        kick();
        Ok(ticket)
    }

    /// The outcome of the driver's message `ticket` once it is done (it is
    /// then forgotten), `None` while it is not. Touches no register: the
    /// work item collects the firmware's answers.
    pub(crate) fn collect_kernel(&self, ticket: u64) -> Option<Outcome> {
        let mut state = self.state.lock();
        let sender = Sender::Kernel(ticket);
        if state.position(sender).is_none() {
            // Never posted, or collected already: nothing will come.
            return Some(Outcome::Failed(ENODEV));
        }
        Self::take(&mut state, sender)
    }

    /// Moves the queue on (the work item, while messages are outstanding):
    /// whether one still is; `kick` is called under the queue's lock then.
    pub(crate) fn advance(&self, firmware: &Firmware<'_>, kick: impl FnOnce()) -> bool {
        let mut state = self.state.lock();
        self.advance_locked(&mut state, firmware);
        let busy = state.busy() && !state.gone;
        if busy {
            kick();
        }
        busy
    }

    /// Collects what the firmware answered and sends what is next, as far
    /// as the firmware lets it now; fails what it has kept waiting too
    /// long. Wakes the files whose message got done.
    fn advance_locked(&self, state: &mut State, firmware: &Firmware<'_>) {
        if state.gone {
            return;
        }
        let now = monotonic_ns();
        let done_before = state
            .messages
            .iter()
            .filter(|m| m.outcome.is_some())
            .count();
        if state.busy() || state.orphans > 0 {
            Self::exchange(state, firmware, now);
        }
        // A firmware that keeps a message too long is taken as silent:
        // everything waiting fails, and the queue starts over, looked up
        // again.
        let in_flight_since = state.in_flight().and_then(|i| state.messages[i].sent_ns);
        let stuck_since = in_flight_since.or(state.blocked_since);
        let timeout_ns = i64::from(self.timeout_ms()) * 1_000_000;
        if stuck_since.is_some_and(|since| now - since >= timeout_ns) {
            state.fail_all(ETIMEDOUT);
            state.queue = None;
        }
        let done_after = state
            .messages
            .iter()
            .filter(|m| m.outcome.is_some())
            .count();
        if done_after != done_before {
            self.ready.notify_all();
        }
    }

    /// One look at the firmware's queue, where it was last found or, if it
    /// is not known (first use, after a reset, a timeout or an error), where
    /// the firmware publishes it now. When it turns out not to be where it
    /// was found (`ESTALE`: moved, or its pointers not as the driver left
    /// them), it is looked up again at once.
    fn exchange(state: &mut State, firmware: &Firmware<'_>, now: i64) {
        let exchange = firmware.reader();
        for _ in 0..2 {
            let (mut queue, found_now) = match state.queue.take() {
                Some(queue) => (queue, false),
                None => match exchange.locate_queue() {
                    Ok(queue) => (queue, true),
                    Err(e) if e == EOPNOTSUPP => {
                        state.fail_all(EOPNOTSUPP);
                        state.orphans = 0;
                        return;
                    }
                    // Not ready (booting) or not readable: try again
                    // later, within the deadline.
                    Err(_) => {
                        if state.messages.iter().any(Message::is_queued) {
                            state.blocked_since.get_or_insert(now);
                        }
                        return;
                    }
                },
            };
            match Self::exchange_with(state, &exchange, &mut queue, found_now, now) {
                Ok(()) => {
                    state.queue = Some(queue);
                    return;
                }
                Err(e) if e == ESTALE && !found_now => {}
                // Not readable, or inconsistent even as just found: looked
                // up again at the next look, within the deadline.
                Err(_) => return,
            }
        }
    }

    /// Collects responses from `queue` and sends what is next, ringing the
    /// firmware after each request, while it answers at once (up to
    /// [`MAX_ROUNDS`] rounds). Before a request goes where the queue was
    /// found at an earlier look, with no message of ours in flight (whose
    /// response would show the firmware serves the queue there), the
    /// control block is checked to publish it there still. `ESTALE` when
    /// the queue is not as the driver left it, another error when it could
    /// not be read or written (the message concerned then has tt-kmd's
    /// hardware-error status).
    fn exchange_with(
        state: &mut State,
        exchange: &Exchange<'_>,
        queue: &mut Queue,
        found_now: bool,
        now: i64,
    ) -> Result {
        let check = !found_now
            && state.in_flight().is_none()
            && state.messages.iter().any(Message::is_queued);
        if check && !queue.control_block_is(exchange.control_block_pointer()?) {
            return Err(ESTALE);
        }
        let mut header = None;
        for _ in 0..MAX_ROUNDS {
            let pushed =
                exchange.csm(|csm| Self::round(state, queue, csm, &mut header, check, now))?;
            if !pushed {
                return Ok(());
            }
            if let Err(e) = exchange.ring() {
                // The request is in the queue, the firmware not told: its
                // response, should it come, is nobody's.
                state.hw_error_in_flight(true);
                return Err(e);
            }
        }
        Ok(())
    }

    /// One round inside one run of CSM accesses: the header (read whole
    /// the first time, `check`ing the control block before; then only the
    /// firmware's pointers as needed), the responses there, and the next
    /// request if nothing is in flight. Whether a request went in.
    fn round(
        state: &mut State,
        queue: &mut Queue,
        csm: &Csm<'_>,
        header: &mut Option<Header>,
        check: bool,
        now: i64,
    ) -> Result<bool> {
        let first = header.is_none();
        let h = match header {
            Some(h) => {
                queue.refresh_responses(csm, h)?;
                h
            }
            None => {
                if check && !queue.control_block_unchanged(csm)? {
                    return Err(ESTALE);
                }
                let h = header.insert(queue.header(csm)?);
                state.reconcile(queue.owed(h));
                h
            }
        };
        // Responses first: the orphans', then the one in flight.
        while queue.answered(h) > 0 {
            match queue.pop(csm, h) {
                Ok(response) => state.deliver(response, now),
                Err(e) => {
                    // As tt-kmd: the message in flight fails with the
                    // hardware-error status.
                    state.orphans = 0;
                    state.deliver(HW_ERROR_RESPONSE, now);
                    return Err(e);
                }
            }
        }
        if state.in_flight().is_some() {
            return Ok(false);
        }
        let Some(next) = state.messages.iter().position(Message::is_queued) else {
            return Ok(false);
        };
        if !first {
            queue.refresh_requests(csm, h)?;
        }
        if !queue.has_room(h) {
            state.blocked_since.get_or_insert(now);
            return Ok(false);
        }
        let before = h.request_wptr;
        let request = state.messages[next].request;
        state.messages[next].sent_ns = Some(now);
        state.blocked_since = None;
        if let Err(e) = queue.push(csm, h, &request) {
            // Whether or not it went in (the firmware then holds it), it
            // ends here.
            state.hw_error_in_flight(h.request_wptr != before);
            return Err(e);
        }
        Ok(true)
    }

    /// The card is unbound: every outstanding message fails with `ENODEV`,
    /// nothing more is sent.
    pub(crate) fn shut_down(&self) {
        let mut state = self.state.lock();
        state.fail_all(ENODEV);
        state.gone = true;
        drop(state);
        self.ready.notify_all();
    }

    /// A reset fenced the files of `fence`: their messages fail with
    /// `ENODEV`.
    pub(crate) fn fence(&self, fence: Fence) {
        self.state.lock().fence(fence);
        self.ready.notify_all();
    }

    /// The chip was reset and its firmware rebooted with an empty queue:
    /// what it held is lost (a message in flight fails with `ENODEV`), and
    /// no orphan response will come.
    pub(crate) fn chip_reset(&self) {
        let mut state = self.state.lock();
        for i in 0..state.messages.len() {
            if state.messages[i].is_in_flight() {
                state.fail(i, ENODEV);
            }
        }
        state.orphans = 0;
        state.blocked_since = None;
        // The rebooted firmware publishes its queue anew.
        state.queue = None;
        drop(state);
        self.ready.notify_all();
    }

    /// The message of the file `owner`, from its post until it collects
    /// it, for the file's fdinfo: its type (the low byte of its first
    /// word), its state (`queued`, `sent` or `done`) and its age.
    pub(crate) fn message_of(&self, owner: OwnerId) -> Option<(u8, &'static str, i64)> {
        let now = monotonic_ns();
        let state = self.state.lock();
        let m = &state.messages[state.position(Sender::File(owner))?];
        Some((m.request[0] as u8, m.state(), now - m.posted_ns))
    }

    /// The outstanding messages, oldest first, and the counters.
    pub(crate) fn view(&self) -> Result<(KVec<MessageInfo>, Counters, u32)> {
        let now = monotonic_ns();
        let state = self.state.lock();
        let mut out = KVec::with_capacity(state.messages.len(), GFP_KERNEL)?;
        for m in state.messages.iter() {
            let (pid, comm) = m
                .requester
                .as_ref()
                .map_or((0, [0; TASK_COMM_LEN]), |r| (r.pid_for_caller(), r.comm()));
            let mut kernel_comm = [0u8; TASK_COMM_LEN];
            kernel_comm[..6].copy_from_slice(b"kernel");
            out.push(
                MessageInfo {
                    pid,
                    comm: if m.requester.is_some() {
                        comm
                    } else {
                        kernel_comm
                    },
                    code: m.request[0] as u8,
                    age_ns: now - m.posted_ns,
                    state: m.state(),
                },
                GFP_KERNEL,
            )?;
        }
        Ok((out, state.counters, state.orphans))
    }
}

/// A card's ARC firmware, as the driver talks to it: one mailbox message
/// at a time ([`ArcMessenger`]), queue messages in turn ([`SmcQueue`]),
/// through the ARC tile's registers (src/arc.rs).
pub(crate) struct Firmware<'a> {
    pub(crate) messenger: &'a ArcMessenger,
    /// The owner of the message queue, which the driver's own messages
    /// share with the files'.
    pub(crate) queue: &'a SmcQueue,
    pub(crate) memory: &'a CardMemory,
    pub(crate) layout: &'a Layout,
    /// The chip was reset and POST_RESET has not come yet: what the
    /// firmware is up to is not known (src/reset.rs).
    pub(crate) in_reset: bool,
}

impl Firmware<'_> {
    pub(crate) fn family(&self) -> Family {
        self.layout.family
    }

    fn exchange<R>(&self, f: impl FnOnce(&Exchange<'_>) -> Result<R>) -> Result<R> {
        self.messenger.exchange(|| f(&self.reader()))
    }

    /// Sends Wormhole mailbox message `id` (see [`Exchange::mailbox`]): the
    /// exit code, or `None` when `answer_within` is `None`. `EOPNOTSUPP` on
    /// a chip without that mailbox (Blackhole).
    pub(crate) fn wh_mailbox(
        &self,
        id: u8,
        args: (u16, u16),
        answer_within: Option<Delta>,
    ) -> Result<Option<u16>> {
        if !self.family().chip().arc.scratch_mailbox {
            return Err(EOPNOTSUPP);
        }
        self.exchange(|e| e.mailbox(id, args, answer_within))
    }

    /// Reads the word at ARC address `addr` of CSM, where the firmware
    /// publishes its telemetry: a plain memory read, taken by no exchange.
    /// `EIO` outside CSM.
    pub(crate) fn read_csm(&self, addr: u32) -> Result<u32> {
        self.reader().csm_read(addr)
    }

    /// Where the firmware publishes its telemetry: the ARC addresses of its
    /// tag table and of its values (Wormhole: reset unit `+0x1D0`/`+0x1D4`;
    /// Blackhole: `SCRATCH_RAM[13]`/`[12]`; tt-kmd 2.10 `telemetry.c`).
    pub(crate) fn telemetry_pointers(&self) -> Result<(u32, u32)> {
        self.reader().telemetry_pointers()
    }

    /// The ARC tile (see src/arc.rs). The message queue's pointers are
    /// [`SmcQueue`]'s to move.
    pub(crate) fn reader(&self) -> Exchange<'_> {
        Exchange::new(self.memory, self.layout)
    }

    /// Sends `request` through the message queue, in turn with the files'
    /// messages, and returns the firmware's answer (see [`SmcQueue::send`]).
    pub(crate) fn send(&self, request: &ArcMessage) -> Result<ArcMessage> {
        self.queue.send(self, request)
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/smc_tests.rs"]
mod kunit;

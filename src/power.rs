// SPDX-License-Identifier: GPL-2.0

//! Power votes: SET_POWER_STATE and what opening and closing a file asks
//! of the card's power state.
//!
//! Each open file holds a vote. A plain open votes for every power flag but
//! the maximum AI clock; an `O_APPEND` open (UMD's lock-only handles, tools
//! that only look) votes for nothing; SET_POWER_STATE replaces the file's
//! vote. The card runs at what the votes add up to (tt-kmd 2.10's rule:
//! a flag a vote does not cover counts as on, a setting is the largest
//! asked for), sent to the ARC firmware whenever that changes, so a killed
//! process's vote is withdrawn with its file. With no vote left the card is
//! told to power down, on Wormhole after a grace
//! (`idle_power_down_grace_ms`, 5 s) so that a program closing and
//! reopening the card does not cycle its clocks; a new plain open (or a
//! SET_POWER_STATE that counts) within the grace keeps the card up, an
//! `O_APPEND` open, which asks for nothing, leaves the grace running.
//!
//! Opening and closing never wait for the firmware (tt-kmd 2.10 holds its
//! device mutex across a firmware round trip on every open and close, and
//! so did this driver before: a thousand threads opening a card queued
//! behind a thousand round trips). The firmware is told only when what the
//! votes add up to differs from what it was last told; the message is
//! posted to the card's message queue (src/smc.rs) under the votes' mutex,
//! which only queues it, and the queue's work item sends it, collects the
//! answer and, if the votes changed meanwhile, posts the newest state
//! ([`CardPower::collect`]). One power message is in flight at a time; the
//! changes made while it is are sent as one, the newest state.
//! SET_POWER_STATE alone waits
//! for the answer (tt-kmd reports the firmware's failure as `EINVAL`), and
//! without the mutex.
//!
//! Facts from tt-kmd 2.10 `chardev.c` (`ioctl_set_power_state`,
//! `tenstorrent_set_aggregated_power_state_locked`, open and release),
//! `wormhole.c` / `blackhole.c` `*_set_power_state` (message 0xC0 /
//! 0x21: header `type | validity << 8 | flags << 16`, settings as the
//! payload) and `module.c` (`power_policy`, `idle_power_down_grace_ms`).

use crate::{
    arbiter::{
        Fence,
        OwnerId, //
    },
    arc::ArcMessage,
    chip::Family,
    rust_ext::task::{
        comm,
        TASK_COMM_LEN, //
    },
    smc::{
        Firmware,
        Outcome, //
    },
    uapi::SetPowerState,
};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        CondVar,
        Mutex,
        MutexGuard, //
    },
    task::Task,
    time::{
        Delta,
        Instant,
        Monotonic, //
    },
};

/// The settings a vote can carry.
pub(crate) const SETTINGS: usize = 14;
/// Flag bit 0: the AI clock at its maximum.
const FLAG_MAX_AI_CLK: u16 = 1 << 0;
/// The 15 flags a vote can cover (bit 15 is reserved).
const FLAGS_ALL: u16 = 0x7FFF;
/// `validity`: 15 flags, no settings.
const VALIDITY_ALL_FLAGS: u8 = 0x0F;
/// The largest `validity` accepted: 15 flags, 14 settings.
const VALIDITY_MAX: u8 = 0xEF;

/// A file's vote, or what the votes add up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PowerVote {
    /// Bits 0-3: how many of the low flags the vote covers; bits 4-7: how
    /// many settings.
    pub(crate) validity: u8,
    pub(crate) flags: u16,
    pub(crate) settings: [u16; SETTINGS],
}

impl PowerVote {
    /// Nothing asked for: what the card gets when no vote counts.
    pub(crate) const IDLE: Self = Self {
        validity: VALIDITY_ALL_FLAGS,
        flags: 0,
        settings: [0; SETTINGS],
    };

    /// The vote of a newly opened file: everything but the maximum AI clock,
    /// or nothing for an `O_APPEND` open.
    pub(crate) const fn at_open(append: bool) -> Self {
        Self {
            flags: if append {
                0
            } else {
                FLAGS_ALL & !FLAG_MAX_AI_CLK
            },
            ..Self::IDLE
        }
    }

    /// Checks SET_POWER_STATE's argument (`argsz` was checked when it was
    /// read): `EINVAL` for flags or `reserved0` not 0, or 15 settings. Flags and settings are
    /// the firmware's to judge, as in tt-kmd.
    pub(crate) fn decode(r: &SetPowerState) -> Result<Self> {
        if r.flags != 0 || r.reserved0 != 0 || r.validity > VALIDITY_MAX {
            return Err(EINVAL);
        }
        let mut settings = [0u16; SETTINGS];
        for (i, setting) in settings.iter_mut().enumerate() {
            *setting = u16::from_ne_bytes([r.power_settings[2 * i], r.power_settings[2 * i + 1]]);
        }
        Ok(Self {
            validity: r.validity,
            flags: r.power_flags,
            settings,
        })
    }

    fn flag_count(&self) -> u32 {
        u32::from(self.validity & 0xF)
    }

    pub(crate) fn setting_count(&self) -> u8 {
        self.validity >> 4
    }

    /// Whether the vote changes what the votes add up to; tt-kmd's release
    /// test is the same (an untouched `O_APPEND` file).
    pub(crate) fn counts(&self) -> bool {
        !(self.validity == VALIDITY_ALL_FLAGS && self.flags == 0)
    }

    /// The firmware message that asks for this state.
    pub(crate) fn message(&self, family: Family) -> ArcMessage {
        let kind = family.chip().power_message;
        let mut message = [0u32; 8];
        message[0] = kind | u32::from(self.validity) << 8 | u32::from(self.flags) << 16;
        for (i, word) in message[1..].iter_mut().enumerate() {
            *word = u32::from(self.settings[2 * i]) | u32::from(self.settings[2 * i + 1]) << 16;
        }
        message
    }
}

/// What `votes` add up to: a flag is on if any vote has it or does not
/// cover it, each setting is the largest any vote covering it asks for;
/// every flag is covered and as many settings as the widest vote.
pub(crate) fn aggregate<'a>(votes: impl IntoIterator<Item = &'a PowerVote>) -> PowerVote {
    let mut total = PowerVote::IDLE;
    let mut settings = 0;
    for vote in votes {
        let uncovered = !((1u16 << vote.flag_count()) - 1) & FLAGS_ALL;
        total.flags |= vote.flags | uncovered;
        settings = settings.max(vote.setting_count());
        let covered = usize::from(vote.setting_count()).min(SETTINGS);
        for (t, v) in total.settings.iter_mut().zip(&vote.settings[..covered]) {
            *t = (*t).max(*v);
        }
    }
    total.validity = VALIDITY_ALL_FLAGS | settings << 4;
    total
}

/// What the firmware is to be sent next, if anything: `wanted` (what
/// the votes add up to; `None` while a powerdown waits for its grace, when
/// the card keeps what it has) unless it is what the firmware was last
/// `told`, or a message is `in_flight` (its answer comes first; then the
/// newest state is decided on). `resend` asks for `wanted` even though it
/// was told already (the firmware refused it, and SET_POWER_STATE asks
/// again).
pub(crate) fn to_send(
    wanted: Option<&PowerVote>,
    told: Option<&PowerVote>,
    in_flight: bool,
    resend: bool,
) -> Option<PowerVote> {
    let wanted = wanted?;
    if in_flight || (told == Some(wanted) && !resend) {
        return None;
    }
    Some(*wanted)
}

/// The vote of one open file.
struct Voter {
    owner: OwnerId,
    /// The opener's thread-group leader and its comm at open, for sysfs.
    task: ARef<Task>,
    comm: [u8; TASK_COMM_LEN],
    vote: PowerVote,
}

/// A power message posted to the firmware's queue and not collected yet.
#[derive(Clone, Copy)]
struct InFlight {
    state: PowerVote,
    /// Its ticket in the card's message queue (src/smc.rs).
    ticket: u64,
    /// [`Votes::changes`] when it was posted: it carries every vote
    /// changed up to then.
    covers: u64,
}

/// The votes of a card and what the firmware was told.
struct Votes {
    voters: KVec<Voter>,
    /// The state last posted to the firmware, whatever it answered: the
    /// next is posted when the votes add up to something else. `None`
    /// before the first, and after the chip rebooted.
    told: Option<PowerVote>,
    /// The message posted and not answered yet.
    in_flight: Option<InFlight>,
    /// A SET_POWER_STATE asks for the state to be sent though it was told
    /// already: the firmware refused it.
    resend: bool,
    /// SET_POWER_STATE calls (and the probe) so far; each waits for the
    /// answer to a message that covers it.
    changes: u64,
    /// `covers` of the last message answered, and whether it was taken.
    answered: Option<(u64, bool)>,
    /// The last state answered, whether the firmware accepted it, and
    /// counts (sysfs).
    sent: Option<(PowerVote, bool)>,
    messages: u64,
    failures: u64,
    /// When the card powers down, if it waits to.
    powerdown_at: Option<Instant<Monotonic>>,
    /// The card is unbound: nothing more is sent.
    gone: bool,
    /// The files the last reset fenced: their votes no longer count.
    fence: Fence,
}

impl Votes {
    fn new() -> Self {
        Self {
            voters: KVec::new(),
            told: None,
            in_flight: None,
            resend: false,
            changes: 0,
            answered: None,
            sent: None,
            messages: 0,
            failures: 0,
            powerdown_at: None,
            gone: false,
            fence: Fence::default(),
        }
    }

    /// What the votes that count add up to; `None` while a powerdown waits
    /// for its grace (the card keeps what it was told until then).
    fn wanted(&self) -> Option<PowerVote> {
        if self.powerdown_at.is_some() {
            return None;
        }
        let fence = self.fence;
        let counted = self.voters.iter().filter(|v| !fence.is_stale(v.owner));
        Some(aggregate(counted.map(|v| &v.vote)))
    }

    /// Whether the firmware refused the last state it answered.
    fn refused(&self) -> bool {
        matches!(self.sent, Some((_, false)))
    }

    /// What is to be posted now, if anything ([`to_send`]).
    fn due(&self) -> Option<PowerVote> {
        to_send(
            self.wanted().as_ref(),
            self.told.as_ref(),
            self.in_flight.is_some(),
            self.resend,
        )
    }

    /// The firmware answered the message that asked for `state` (or it
    /// could not be posted): `accepted` when it took it.
    fn answer(&mut self, state: PowerVote, covers: u64, accepted: bool) {
        self.messages += 1;
        if !accepted {
            self.failures += 1;
        }
        self.sent = Some((state, accepted));
        self.answered = Some((covers, accepted));
    }
}

/// A voter as sysfs shows it: pid in the reader's namespace, comm, vote.
pub(crate) type VoterInfo = (u32, [u8; TASK_COMM_LEN], PowerVote);

/// What sysfs shows of the card's power.
pub(crate) struct PowerInfo {
    pub(crate) sent: Option<(PowerVote, bool)>,
    pub(crate) messages: u64,
    pub(crate) failures: u64,
    pub(crate) voters: usize,
    pub(crate) powerdown_pending: bool,
    /// A power message is posted and not answered yet.
    pub(crate) sending: bool,
}

/// The power votes of a card's files.
///
/// Lock order: the votes' mutex, then the message queue's (src/smc.rs),
/// only to post a message or collect its answer, neither of which touches
/// the card: no exchange with the firmware is ever made under the votes'
/// mutex. Opens, closes, SET_POWER_STATE and the powerdown work hold it
/// only to change the votes, add them up and post; the message queue's
/// work item (src/card.rs) collects the answer and posts the newest state
/// if the votes changed meanwhile ([`CardPower::collect`]).
#[pin_data]
pub(crate) struct CardPower {
    #[pin]
    votes: Mutex<Votes>,
    /// Notified when a power message is answered or the card goes: what
    /// SET_POWER_STATE and the probe wait for.
    #[pin]
    answered: CondVar,

    /// Whether the driver tells the firmware at all (`power_policy`).
    policy: bool,
    /// How long the last close waits before powering down; zero for at
    /// once (Blackhole always, as in tt-kmd).
    grace: Delta,
}

impl CardPower {
    pub(crate) fn new(family: Family, policy: bool, grace_ms: u32) -> impl PinInit<Self> {
        let grace = if family.chip().power_grace {
            Delta::from_millis(grace_ms.into())
        } else {
            Delta::ZERO
        };
        pin_init!(Self {
            votes <- new_mutex!(Votes::new()),
            answered <- new_condvar!("CardPower::answered"),

            policy,
            grace,
        })
    }

    /// Posts what the votes add up to if the firmware has not been told
    /// it and no message is in flight; `kick` makes the message queue's
    /// work item send it. With `votes` locked, so that what was posted
    /// last is what [`Votes::told`] says; only queues the message.
    fn update_locked(&self, votes: &mut Votes, firmware: &Firmware<'_>, kick: &dyn Fn()) {
        // As tt-kmd: a chip being reset is not told (POST_RESET does not
        // tell it either; the next vote that changes does).
        if !self.policy || votes.gone || firmware.in_reset {
            return;
        }
        let Some(state) = votes.due() else {
            return;
        };
        let covers = votes.changes;
        votes.told = Some(state);
        votes.resend = false;
        match firmware
            .queue
            .post_kernel(&state.message(firmware.family()), kick)
        {
            Ok(ticket) => {
                votes.in_flight = Some(InFlight {
                    state,
                    ticket,
                    covers,
                });
            }
            Err(e) => {
                pr_warn!("power state not posted: {:?}\n", e);
                votes.answer(state, covers, false);
                self.answered.notify_all();
            }
        }
    }

    /// The message queue's work item, after it moved the queue: collects
    /// the answer to the power message in flight, if it came, and posts
    /// the newest state if the votes changed meanwhile.
    pub(crate) fn collect(&self, firmware: &Firmware<'_>, kick: &dyn Fn()) {
        let mut votes = self.votes.lock();
        let Some(in_flight) = votes.in_flight else {
            return;
        };
        let Some(outcome) = firmware.queue.collect_kernel(in_flight.ticket) else {
            return;
        };
        votes.in_flight = None;
        let accepted = matches!(outcome, Outcome::Answered(answer) if answer[0] == 0);
        if !accepted {
            // As tt-kmd warns; counted in sysfs too.
            pr_warn!("power state not taken by the firmware: {:?}\n", outcome);
        }
        votes.answer(in_flight.state, in_flight.covers, accepted);
        self.answered.notify_all();
        self.update_locked(&mut votes, firmware, kick);
    }

    /// Waits, with `votes` locked, until the firmware answered a message
    /// that covers change `mine` or nothing is left to send (the firmware
    /// already has what the votes add up to): `EINVAL` when it did not
    /// take the state (as tt-kmd), `ENODEV` when the card goes,
    /// `ERESTARTSYS` for a signal (only if `interruptible`).
    fn wait_answered(
        &self,
        votes: &mut MutexGuard<'_, Votes>,
        mine: u64,
        interruptible: bool,
    ) -> Result {
        loop {
            if votes.gone {
                return Err(ENODEV);
            }
            match votes.answered {
                Some((covers, accepted)) if covers >= mine => {
                    return if accepted { Ok(()) } else { Err(EINVAL) };
                }
                _ => {}
            }
            if votes.in_flight.is_none() {
                // Nothing was posted for this change: what the votes add
                // up to is what the firmware took last (or is held: a
                // powerdown's grace, a reset).
                return if votes.refused() { Err(EINVAL) } else { Ok(()) };
            }
            if interruptible {
                if self.answered.wait_interruptible(votes) {
                    return Err(ERESTARTSYS);
                }
            } else {
                self.answered.wait(votes);
            }
        }
    }

    /// At probe: no vote yet, the card idles until a file asks for more.
    /// Waits for the firmware's answer (bounded by the message queue's
    /// deadline), so that the card is bound in a known state.
    pub(crate) fn probe(&self, firmware: &Firmware<'_>, kick: &dyn Fn()) -> Result {
        if !self.policy {
            return Ok(());
        }
        let mut votes = self.votes.lock();
        votes.changes += 1;
        let mine = votes.changes;
        self.update_locked(&mut votes, firmware, kick);
        self.wait_answered(&mut votes, mine, false)
    }

    /// A file is opened: its vote counts from now on, and if it counts, a
    /// pending powerdown is off. The firmware is told only if the votes
    /// now add up to something else; the open does not wait for it (a
    /// failure is counted in sysfs, as tt-kmd only warns).
    pub(crate) fn open(
        &self,
        owner: OwnerId,
        append: bool,
        firmware: &Firmware<'_>,
        kick: &dyn Fn(),
    ) -> Result {
        let task: ARef<Task> = kernel::current!().group_leader().into();
        let name = comm(&task);
        let vote = PowerVote::at_open(append);
        let mut votes = self.votes.lock();
        votes.voters.push(
            Voter {
                owner,
                task,
                comm: name,
                vote,
            },
            GFP_KERNEL,
        )?;
        if vote.counts() {
            votes.powerdown_at = None;
            self.update_locked(&mut votes, firmware, kick);
        }
        Ok(())
    }

    /// SET_POWER_STATE: the file's vote is `vote` from now on (also if the
    /// firmware could not be told: `EINVAL`, as tt-kmd says). Returns once
    /// the firmware answered a message carrying it, or at once when the
    /// votes add up to what the firmware took already; waits without the
    /// votes' mutex, interruptibly.
    pub(crate) fn set(
        &self,
        owner: OwnerId,
        vote: PowerVote,
        firmware: &Firmware<'_>,
        kick: &dyn Fn(),
    ) -> Result {
        let mut votes = self.votes.lock();
        let voter = votes.voters.iter_mut().find(|v| v.owner == owner);
        voter.ok_or(EINVAL)?.vote = vote;
        if !self.policy {
            return Ok(());
        }
        if vote.counts() {
            votes.powerdown_at = None;
        }
        // Asked for again if the firmware refused it, as tt-kmd would.
        votes.resend = votes.refused();
        votes.changes += 1;
        let mine = votes.changes;
        self.update_locked(&mut votes, firmware, kick);
        self.wait_answered(&mut votes, mine, true)
    }

    /// A file is released: its vote goes. When the card is to power down
    /// later, `schedule` is called with the grace, for a call of
    /// [`CardPower::powerdown`] then; it is called with the votes locked,
    /// so that nothing is scheduled after [`CardPower::shut_down`].
    pub(crate) fn release(
        &self,
        owner: OwnerId,
        firmware: &Firmware<'_>,
        kick: &dyn Fn(),
        schedule: impl FnOnce(Delta),
    ) {
        let mut votes = self.votes.lock();
        let Some(position) = votes.voters.iter().position(|v| v.owner == owner) else {
            return;
        };
        let Ok(voter) = votes.voters.remove(position) else {
            return;
        };
        if !self.policy || !voter.vote.counts() || votes.gone {
            // Nothing changes.
        } else if votes.voters.is_empty() && self.grace > Delta::ZERO {
            votes.powerdown_at = Some(Instant::now() + self.grace);
            schedule(self.grace);
        } else {
            self.update_locked(&mut votes, firmware, kick);
        }
        drop(votes);
        // The opener's task reference goes after the mutex.
        drop(voter);
    }

    /// The grace after the last close has run, or part of it (the work that
    /// calls this was already queued when a later close asked for its
    /// grace): powers down if the grace is over and no open came meanwhile,
    /// or calls `schedule` with what is left of it, as
    /// [`CardPower::release`] does.
    pub(crate) fn powerdown(
        &self,
        firmware: &Firmware<'_>,
        kick: &dyn Fn(),
        schedule: impl FnOnce(Delta),
    ) {
        let mut votes = self.votes.lock();
        let Some(at) = votes.powerdown_at else {
            return;
        };
        if votes.gone {
            return;
        }
        let left = at - Instant::now();
        if left > Delta::ZERO {
            schedule(left);
            return;
        }
        votes.powerdown_at = None;
        // Posted as the votes are now: none, or an open raced with this.
        self.update_locked(&mut votes, firmware, kick);
    }

    /// The card is being reset: the fenced files' votes no longer count
    /// (nothing is sent now; tt-kmd 2.10 does not either).
    pub(crate) fn fence(&self, fence: Fence) {
        self.votes.lock().fence = fence;
    }

    /// A pending powerdown does not come (a reset began).
    pub(crate) fn cancel_powerdown(&self) {
        self.votes.lock().powerdown_at = None;
    }

    /// The chip was reset and its firmware rebooted: it no longer has what
    /// it was told, so the next vote that counts tells it again, changed
    /// or not.
    pub(crate) fn chip_reset(&self) {
        self.votes.lock().told = None;
    }

    /// The card is unbound: nothing more is sent, and SET_POWER_STATE
    /// calls waiting for an answer return `ENODEV`.
    pub(crate) fn shut_down(&self) {
        let mut votes = self.votes.lock();
        votes.gone = true;
        votes.powerdown_at = None;
        drop(votes);
        self.answered.notify_all();
    }

    pub(crate) fn info(&self) -> PowerInfo {
        let votes = self.votes.lock();
        PowerInfo {
            sent: votes.sent,
            messages: votes.messages,
            failures: votes.failures,
            voters: votes.voters.len(),
            powerdown_pending: votes.powerdown_at.is_some(),
            sending: votes.in_flight.is_some(),
        }
    }

    /// The vote of the file `owner`, for its fdinfo; `None` once it is
    /// released.
    pub(crate) fn vote_of(&self, owner: OwnerId) -> Option<PowerVote> {
        let votes = self.votes.lock();
        votes
            .voters
            .iter()
            .find(|v| v.owner == owner)
            .map(|v| v.vote)
    }

    /// The votes of up to `max` files, in opening order, with pids in the
    /// caller's namespace (0 if not visible there).
    pub(crate) fn voters(&self, max: usize) -> Result<KVec<VoterInfo>> {
        let current = kernel::current!();
        let ns = current.active_pid_ns();
        let votes = self.votes.lock();
        let mut out = KVec::with_capacity(votes.voters.len().min(max), GFP_KERNEL)?;
        for v in votes.voters.iter().take(max) {
            let pid = u32::try_from(v.task.tgid_nr_ns(ns)).unwrap_or(0);
            out.push((pid, v.comm, v.vote), GFP_KERNEL)?;
        }
        Ok(out)
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/power_tests.rs"]
mod kunit;

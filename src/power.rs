// SPDX-License-Identifier: GPL-2.0

//! Power votes: SET_POWER_STATE and what opening and closing a file asks
//! of the card's power state.
//!
//! Each open file holds a vote. A plain open votes for every power flag but
//! the maximum AI clock; an `O_APPEND` open (UMD's lock-only handles, tools
//! that only look) votes for nothing; SET_POWER_STATE replaces the file's
//! vote. The card runs at what the votes add up to (tt-kmd 2.10's rule:
//! a flag a vote does not cover counts as on, a setting is the largest
//! asked for), sent to the ARC firmware whenever a vote that counts comes
//! or goes, so a killed process's vote is withdrawn with its file. With no
//! vote left the card is told to power down, on Wormhole after a grace
//! (`idle_power_down_grace_ms`, 5 s) so that a program closing and
//! reopening the card does not cycle its clocks; a new open within the
//! grace keeps the card up.
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
    arc::{
        ArcMessage,
        Firmware, //
    },
    rust_ext::task::{
        comm,
        TASK_COMM_LEN, //
    },
    tlb::Family,
    uapi::SetPowerState,
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        Mutex, //
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
        let kind = match family {
            Family::Wormhole => 0xC0,
            Family::Blackhole => 0x21,
        };
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

/// The vote of one open file.
struct Voter {
    owner: OwnerId,
    /// The opener's thread-group leader and its comm at open, for sysfs.
    task: ARef<Task>,
    comm: [u8; TASK_COMM_LEN],
    vote: PowerVote,
}

/// The votes of a card and what was sent.
struct Votes {
    voters: KVec<Voter>,
    /// The last state sent, whether the firmware accepted it, and counts.
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

/// A voter as sysfs shows it: pid in the reader's namespace, comm, vote.
pub(crate) type VoterInfo = (u32, [u8; TASK_COMM_LEN], PowerVote);

/// What sysfs shows of the card's power.
pub(crate) struct PowerInfo {
    pub(crate) sent: Option<(PowerVote, bool)>,
    pub(crate) messages: u64,
    pub(crate) failures: u64,
    pub(crate) voters: usize,
    pub(crate) powerdown_pending: bool,
}

/// The power votes of a card's files.
#[pin_data]
pub(crate) struct CardPower {
    #[pin]
    votes: Mutex<Votes>,

    /// Whether the driver tells the firmware at all (`power_policy`).
    policy: bool,
    /// How long the last close waits before powering down; zero for at
    /// once (Blackhole always, as in tt-kmd).
    grace: Delta,
}

impl CardPower {
    pub(crate) fn new(family: Family, policy: bool, grace_ms: u32) -> impl PinInit<Self> {
        let grace = match family {
            Family::Wormhole => Delta::from_millis(grace_ms.into()),
            Family::Blackhole => Delta::ZERO,
        };
        pin_init!(Self {
            votes <- new_mutex!(Votes {
                voters: KVec::new(),
                sent: None,
                messages: 0,
                failures: 0,
                powerdown_at: None,
                gone: false,
                fence: Fence::default(),
            }),

            policy,
            grace,
        })
    }

    /// Sends what the votes add up to, with `votes` locked (so that what
    /// the firmware last heard is what the votes are).
    fn send_locked(&self, votes: &mut Votes, firmware: &Firmware<'_>) -> Result {
        // As tt-kmd: a chip being reset is not told (POST_RESET does not
        // tell it either; the next vote that changes does).
        if firmware.in_reset {
            return Err(EAGAIN);
        }
        let fence = votes.fence;
        let counted = votes.voters.iter().filter(|v| !fence.is_stale(v.owner));
        let state = aggregate(counted.map(|v| &v.vote));
        let sent = firmware.send(&state.message(firmware.family()));
        let accepted = matches!(sent, Ok(answer) if answer[0] == 0);
        votes.messages += 1;
        if !accepted {
            votes.failures += 1;
        }
        votes.sent = Some((state, accepted));
        match sent {
            Ok(_) if accepted => Ok(()),
            Ok(_) => Err(EIO),
            Err(e) => Err(e),
        }
    }

    /// At probe: no vote yet, the card idles until a file asks for more.
    pub(crate) fn probe(&self, firmware: &Firmware<'_>) -> Result {
        if !self.policy {
            return Ok(());
        }
        self.send_locked(&mut self.votes.lock(), firmware)
    }

    /// A file is opened: its vote counts from now on, and a pending
    /// powerdown is off. A failure to tell the firmware does not fail the
    /// open (tt-kmd warns too); it is counted in sysfs.
    pub(crate) fn open(&self, owner: OwnerId, append: bool, firmware: &Firmware<'_>) -> Result {
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
        votes.powerdown_at = None;
        if self.policy && vote.counts() && !votes.gone {
            match self.send_locked(&mut votes, firmware) {
                // In reset: the state is sent with the next vote.
                Ok(()) | Err(EAGAIN) => {}
                Err(e) => pr_warn!("power state not sent at open: {:?}\n", e),
            }
        }
        Ok(())
    }

    /// SET_POWER_STATE: the file's vote is `vote` from now on (also if the
    /// firmware could not be told: `EINVAL`, as tt-kmd says).
    pub(crate) fn set(&self, owner: OwnerId, vote: PowerVote, firmware: &Firmware<'_>) -> Result {
        let mut votes = self.votes.lock();
        let voter = votes.voters.iter_mut().find(|v| v.owner == owner);
        voter.ok_or(EINVAL)?.vote = vote;
        if !self.policy {
            return Ok(());
        }
        self.send_locked(&mut votes, firmware).map_err(|_| EINVAL)
    }

    /// A file is released: its vote goes. When the card is to power down
    /// later, `schedule` is called with the grace, for a call of
    /// [`CardPower::powerdown`] then; it is called with the votes locked,
    /// so that nothing is scheduled after [`CardPower::shut_down`].
    pub(crate) fn release(
        &self,
        owner: OwnerId,
        firmware: &Firmware<'_>,
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
            // Nothing to do about a failure: the file is gone either way.
            let _ = self.send_locked(&mut votes, firmware);
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
    pub(crate) fn powerdown(&self, firmware: &Firmware<'_>, schedule: impl FnOnce(Delta)) {
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
        // Sent as the votes are now: none, or an open raced with this.
        let _ = self.send_locked(&mut votes, firmware);
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

    /// The card is unbound: nothing more is sent.
    pub(crate) fn shut_down(&self) {
        let mut votes = self.votes.lock();
        votes.gone = true;
        votes.powerdown_at = None;
    }

    pub(crate) fn info(&self) -> PowerInfo {
        let votes = self.votes.lock();
        PowerInfo {
            sent: votes.sent,
            messages: votes.messages,
            failures: votes.failures,
            voters: votes.voters.len(),
            powerdown_pending: votes.powerdown_at.is_some(),
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

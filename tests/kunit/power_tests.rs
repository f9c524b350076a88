// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of power votes: what votes add up to and the firmware
//! message that asks for it. Expected values were worked out by hand from
//! tt-kmd 2.10's `tenstorrent_set_aggregated_power_state_locked` and the
//! examples of its `*_set_power_state` (idle header 0x00000FC0, one plain
//! open 0x7FFE0FC0 on Wormhole; 0x21 on Blackhole). And when the firmware
//! is told: only when what the votes add up to changes, one message in
//! flight at a time.

use super::*;
use crate::arbiter::{
    Arbiter,
    POLL_LEASE_NS, //
};

/// A voter of the calling (KUnit) task with `vote`.
fn voter(owner: OwnerId, vote: PowerVote) -> Voter {
    let task: ARef<Task> = kernel::current!().group_leader().into();
    let comm = comm(&task);
    Voter {
        owner,
        task,
        comm,
        vote,
    }
}

/// Posts what is due, as [`CardPower::update_locked`] does: the state
/// posted, if any.
fn post(votes: &mut Votes) -> Option<PowerVote> {
    let state = votes.due()?;
    votes.told = Some(state);
    votes.resend = false;
    votes.in_flight = Some(InFlight {
        state,
        ticket: 0,
        covers: votes.changes,
    });
    Some(state)
}

/// The message in flight is answered, as [`CardPower::collect`] sees it.
fn answer(votes: &mut Votes, accepted: bool) {
    if let Some(f) = votes.in_flight.take() {
        votes.answer(f.state, f.covers, accepted);
    }
}

#[kunit_tests(tenstorrent_power)]
mod tests {
    use super::*;

    fn vote(validity: u8, flags: u16, settings: &[u16]) -> PowerVote {
        let mut v = PowerVote {
            validity,
            flags,
            settings: [0; SETTINGS],
        };
        v.settings[..settings.len()].copy_from_slice(settings);
        v
    }

    #[test]
    fn no_vote_is_idle_and_one_open_is_everything_but_max_clock() -> Result {
        assert_eq!(aggregate([]), PowerVote::IDLE);
        assert_eq!(PowerVote::IDLE.message(Family::Wormhole)[0], 0x0000_0FC0);
        assert_eq!(PowerVote::IDLE.message(Family::Blackhole)[0], 0x0000_0F21);
        let plain = PowerVote::at_open(false);
        assert_eq!(
            aggregate([&plain]).message(Family::Wormhole)[0],
            0x7FFE_0FC0
        );
        assert_eq!(
            aggregate([&plain]).message(Family::Blackhole)[0],
            0x7FFE_0F21
        );
        let append = PowerVote::at_open(true);
        assert_eq!(aggregate([&append]), PowerVote::IDLE);
        assert!(plain.counts());
        assert!(!append.counts());
        Ok(())
    }

    #[test]
    fn uncovered_flags_count_as_on_and_flags_add_up() -> Result {
        // A vote covering one flag (max AI clock on) leaves the other 14
        // on, whatever its own bits say about them.
        let one = vote(0x01, 0x0001, &[]);
        assert_eq!(aggregate([&one]).flags, 0x7FFF);
        let off = vote(0x01, 0x0000, &[]);
        assert_eq!(aggregate([&off]).flags, 0x7FFE);
        // Covering all 15 flags: exactly its bits; with another vote, the
        // union.
        let tensix_only = vote(0x0F, 0x0004, &[]);
        let l2cpu_only = vote(0x0F, 0x0008, &[]);
        assert_eq!(aggregate([&tensix_only]).flags, 0x0004);
        assert_eq!(aggregate([&tensix_only, &l2cpu_only]).flags, 0x000C);
        // Bit 15 of a vote's own flags passes through, as in tt-kmd.
        assert_eq!(aggregate([&vote(0x0F, 0x8000, &[])]).flags, 0x8000);
        // A vote covering no flag turns every flag on.
        assert_eq!(aggregate([&vote(0x00, 0, &[])]).flags, 0x7FFF);
        Ok(())
    }

    #[test]
    fn settings_take_the_largest_of_the_votes_covering_them() -> Result {
        let a = vote(0x2F, 0, &[10, 1, 99]);
        let b = vote(0x3F, 0, &[5, 7, 3]);
        let total = aggregate([&a, &b]);
        // The widest vote covers 3 settings; a's third is not covered.
        assert_eq!(total.validity, 0x3F);
        assert_eq!(&total.settings[..4], &[10, 7, 3, 0]);
        let m = total.message(Family::Wormhole);
        assert_eq!(m[0], 0xC0 | 0x3F << 8);
        assert_eq!(m[1], 10 | 7 << 16);
        assert_eq!(m[2], 3);
        let widest = vote(0xEF, 0, &[1; SETTINGS]);
        assert_eq!(
            aggregate([&widest]).message(Family::Blackhole)[7],
            1 | 1 << 16
        );
        Ok(())
    }

    #[test]
    fn set_power_state_checks_its_argument() -> Result {
        let good = SetPowerState {
            argsz: 40,
            validity: 0x2F,
            power_flags: 0x0005,
            power_settings: {
                let mut s = [0u8; 28];
                s[..4].copy_from_slice(&[1, 0, 2, 0]);
                s
            },
            ..SetPowerState::default()
        };
        assert_eq!(size_of::<SetPowerState>(), 40);
        let v = PowerVote::decode(&good)?;
        assert_eq!(
            (v.validity, v.flags, &v.settings[..3]),
            (0x2F, 5, &[1, 2, 0][..])
        );
        // `argsz` is the ioctl layer's (src/file/args.rs `read_extensible`).
        for bad in [
            SetPowerState { flags: 1, ..good },
            SetPowerState {
                reserved0: 1,
                ..good
            },
            // 15 settings.
            SetPowerState {
                validity: 0xF0,
                ..good
            },
        ] {
            assert_eq!(PowerVote::decode(&bad), Err(EINVAL));
        }
        assert!(PowerVote::decode(&SetPowerState {
            validity: 0xEF,
            ..good
        })
        .is_ok());
        Ok(())
    }
    #[test]
    fn the_firmware_is_told_only_when_the_sum_changes() -> Result {
        let idle = PowerVote::IDLE;
        let plain = aggregate([&PowerVote::at_open(false)]);
        // Nothing told yet (the probe, or after the chip rebooted).
        assert_eq!(to_send(Some(&idle), None, false, false), Some(idle));
        assert_eq!(to_send(Some(&plain), None, false, false), Some(plain));
        // What it was told: nothing to send; anything else: that.
        assert_eq!(to_send(Some(&plain), Some(&plain), false, false), None);
        assert_eq!(to_send(Some(&idle), Some(&idle), false, false), None);
        assert_eq!(
            to_send(Some(&plain), Some(&idle), false, false),
            Some(plain)
        );
        // A message in flight: its answer comes first, whatever changed.
        assert_eq!(to_send(Some(&plain), Some(&idle), true, false), None);
        assert_eq!(to_send(Some(&plain), None, true, true), None);
        // A powerdown waiting for its grace: the card keeps what it has.
        assert_eq!(to_send(None, Some(&plain), false, false), None);
        assert_eq!(to_send(None, None, false, true), None);
        // Asked again (the firmware refused it): sent though unchanged.
        assert_eq!(
            to_send(Some(&plain), Some(&plain), false, true),
            Some(plain)
        );
        Ok(())
    }

    #[test]
    fn a_thousand_opens_and_closes_are_one_message_each_way() -> Result {
        let owners = KBox::pin_init(Arbiter::new(POLL_LEASE_NS, 0)?, GFP_KERNEL)?;
        let mut votes = Votes::new();
        let plain = aggregate([&PowerVote::at_open(false)]);
        let mut ids = KVec::new();
        let mut posted = KVec::new();
        // The first open's message is in flight while the others come.
        for i in 0..1000 {
            let id = owners.new_owner()?.id();
            ids.push(id, GFP_KERNEL)?;
            votes
                .voters
                .push(voter(id, PowerVote::at_open(i % 2 == 1)), GFP_KERNEL)?;
            if let Some(state) = post(&mut votes) {
                posted.push(state, GFP_KERNEL)?;
            }
            if i == 500 {
                answer(&mut votes, true);
                // Answered: the votes still add up to what it was told.
                assert_eq!(votes.due(), None);
            }
        }
        assert_eq!(&posted[..], &[plain]);
        assert_eq!(votes.messages, 1);
        answer(&mut votes, true);
        // A vote that changes the sum is posted; setting it back too.
        let max_clock = PowerVote {
            flags: FLAGS_ALL,
            ..PowerVote::IDLE
        };
        votes.voters[0].vote = max_clock;
        let raised = post(&mut votes).ok_or(EINVAL)?;
        assert_eq!(raised.flags, 0x7FFF);
        // Changed back before the answer: nothing until it comes, then
        // the newest.
        votes.voters[0].vote = PowerVote::at_open(false);
        assert_eq!(post(&mut votes), None);
        answer(&mut votes, true);
        assert_eq!(post(&mut votes), Some(plain));
        answer(&mut votes, true);
        // Every file but the last closes: nothing to send.
        while votes.voters.len() > 1 {
            votes.voters.pop();
            assert_eq!(post(&mut votes), None);
        }
        // The last closes with a grace: nothing until it is over.
        votes.voters.pop();
        votes.powerdown_at = Some(Instant::now());
        assert_eq!(post(&mut votes), None);
        votes.powerdown_at = None;
        assert_eq!(post(&mut votes), Some(PowerVote::IDLE));
        assert_eq!(ids.len(), 1000);
        Ok(())
    }

    #[test]
    fn a_refused_state_is_asked_again_only_when_set() -> Result {
        let owners = KBox::pin_init(Arbiter::new(POLL_LEASE_NS, 0)?, GFP_KERNEL)?;
        let mut votes = Votes::new();
        let id = owners.new_owner()?.id();
        votes
            .voters
            .push(voter(id, PowerVote::at_open(false)), GFP_KERNEL)?;
        let plain = post(&mut votes).ok_or(EINVAL)?;
        answer(&mut votes, false);
        assert!(votes.refused());
        assert_eq!((votes.messages, votes.failures), (1, 1));
        // Opens with the same sum do not ask again...
        let other = owners.new_owner()?.id();
        votes
            .voters
            .push(voter(other, PowerVote::at_open(false)), GFP_KERNEL)?;
        assert_eq!(post(&mut votes), None);
        // ...SET_POWER_STATE does (CardPower::set sets `resend`).
        votes.resend = votes.refused();
        assert_eq!(post(&mut votes), Some(plain));
        answer(&mut votes, true);
        assert!(!votes.refused());
        assert_eq!(post(&mut votes), None);
        Ok(())
    }
}

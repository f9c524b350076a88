// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the firmware message queue's bookkeeping (src/smc.rs):
//! which response goes to whom once messages were abandoned or timed out,
//! and what a reset's fence does to the files it fenced.

use super::*;
use crate::arbiter::{
    Arbiter,
    POLL_LEASE_NS, //
};

#[kunit_tests(tenstorrent_smc)]
mod tests {
    use super::*;

    fn state() -> State {
        State::new()
    }

    fn message(ticket: u64, sent: bool) -> Message {
        Message {
            sender: Sender::Kernel(ticket),
            waiter: None,
            requester: None,
            request: [0x90, ticket as u32, 0, 0, 0, 0, 0, 0],
            posted_ns: 0,
            sent_ns: sent.then_some(1),
            outcome: None,
        }
    }

    fn answered(state: &State, ticket: u64) -> Option<u32> {
        let i = state.position(Sender::Kernel(ticket))?;
        match state.messages[i].outcome {
            Some(Outcome::Answered(r)) => Some(r[1]),
            _ => None,
        }
    }

    #[test]
    fn a_response_goes_to_the_message_in_flight() -> Result {
        let mut s = state();
        s.messages.push(message(0, true), GFP_KERNEL)?;
        s.messages.push(message(1, false), GFP_KERNEL)?;
        assert!(s.busy());
        s.deliver([0, 7, 0, 0, 0, 0, 0, 0], 10);
        assert_eq!(answered(&s, 0), Some(7));
        assert_eq!(answered(&s, 1), None);
        assert_eq!(s.counters.completed, 1);
        // Nothing in flight any more: a further response is nobody's.
        s.deliver([0, 8, 0, 0, 0, 0, 0, 0], 10);
        assert_eq!(answered(&s, 1), None);
        assert_eq!(s.counters.orphans_dropped, 1);
        Ok(())
    }

    #[test]
    fn orphans_responses_are_dropped_first() -> Result {
        let mut s = state();
        s.messages.push(message(0, true), GFP_KERNEL)?;
        // The message in flight times out: its response, if it comes, is
        // an orphan's; the one queued behind it fails too.
        s.messages.push(message(1, false), GFP_KERNEL)?;
        s.fail_all(ETIMEDOUT);
        assert_eq!(s.orphans, 1);
        assert_eq!(s.counters.timeouts, 2);
        assert!(!s.busy());
        // A new message goes in behind the orphan.
        s.messages.push(message(2, true), GFP_KERNEL)?;
        s.deliver([0, 1, 0, 0, 0, 0, 0, 0], 10);
        assert_eq!(answered(&s, 2), None);
        assert_eq!(s.orphans, 0);
        s.deliver([0, 3, 0, 0, 0, 0, 0, 0], 10);
        assert_eq!(answered(&s, 2), Some(3));
        Ok(())
    }

    #[test]
    fn only_a_message_the_firmware_holds_leaves_an_orphan() -> Result {
        let mut s = state();
        s.messages.push(message(0, false), GFP_KERNEL)?;
        s.fail(0, ENODEV);
        assert_eq!(s.orphans, 0);
        assert_eq!(s.counters.timeouts, 0);
        // Failing a done message changes nothing.
        s.fail(0, ETIMEDOUT);
        assert_eq!(s.counters.timeouts, 0);
        s.messages.push(message(1, true), GFP_KERNEL)?;
        s.fail(1, ENODEV);
        assert_eq!(s.orphans, 1);
        Ok(())
    }

    #[test]
    fn what_the_firmware_owes_sets_the_orphans() -> Result {
        let mut s = state();
        // Requests left in the queue before the driver bound: their
        // responses are nobody's.
        s.reconcile(2);
        assert_eq!(s.orphans, 2);
        // One of ours in flight besides.
        s.messages.push(message(0, true), GFP_KERNEL)?;
        s.reconcile(3);
        assert_eq!(s.orphans, 2);
        // The firmware rebooted: it owes nothing, ours is lost.
        s.reconcile(0);
        assert_eq!(s.orphans, 0);
        assert!(matches!(
            s.messages[0].outcome,
            Some(Outcome::Failed(e)) if e == ENODEV
        ));
        Ok(())
    }

    /// A fenced file's message fails, and so does a POST of it that
    /// checked the fence before the reset and queues after it (seen
    /// queued, to be sent to the firmware after the reset, with the fence
    /// kept out of the queue's state); the survivor and the driver post.
    #[test]
    fn a_fenced_file_posts_nothing_after_the_fence() -> Result {
        let owners = KBox::pin_init(Arbiter::new(POLL_LEASE_NS, 0)?, GFP_KERNEL)?;
        let fenced = owners.new_owner()?;
        let late = owners.new_owner()?;
        let survivor = owners.new_owner()?;
        let request = [0x90, 1, 0, 0, 0, 0, 0, 0];
        let mut s = state();
        s.enqueue(Sender::File(fenced.id()), None, None, &request)?;
        let fence = owners.fence_all_but(survivor.id());
        s.fence(fence);
        let i = s.position(Sender::File(fenced.id())).ok_or(EINVAL)?;
        assert!(matches!(
            s.messages[i].outcome,
            Some(Outcome::Failed(e)) if e == ENODEV
        ));
        assert_eq!(
            s.enqueue(Sender::File(late.id()), None, None, &request),
            Err(ENODEV)
        );
        assert!(s.position(Sender::File(late.id())).is_none());
        s.enqueue(Sender::File(survivor.id()), None, None, &request)?;
        s.enqueue(Sender::Kernel(0), None, None, &request)?;
        assert_eq!(s.messages.len(), 3);
        Ok(())
    }

    #[test]
    fn a_request_that_went_in_and_failed_leaves_an_orphan() -> Result {
        let mut s = state();
        s.messages.push(message(0, true), GFP_KERNEL)?;
        s.hw_error_in_flight(true);
        assert_eq!(answered(&s, 0), Some(0));
        assert_eq!(s.orphans, 1);
        assert_eq!(s.counters.firmware_errors, 1);
        let mut s = state();
        s.messages.push(message(0, true), GFP_KERNEL)?;
        s.hw_error_in_flight(false);
        assert_eq!(s.orphans, 0);
        Ok(())
    }
}

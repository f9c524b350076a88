// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the message queue's pointer checks (src/arc.rs): when a
//! queue the driver found earlier is taken as no longer as it left it, and
//! must be looked up again.

use super::*;

#[kunit_tests(tenstorrent_arc)]
mod tests {
    use super::*;

    /// A Blackhole-like queue of 4 entries (pointers wrap at 8), found at
    /// 0x1000_1100 through a control block at 0x1000_1000.
    fn queue() -> Result<Queue> {
        Queue::new(Family::Blackhole, 0x1000_1000, [0x1000_1100, 4 | 4 << 8])
    }

    fn header(
        request_wptr: u32,
        response_rptr: u32,
        request_rptr: u32,
        response_wptr: u32,
    ) -> Header {
        Header {
            request_wptr,
            response_rptr,
            request_rptr,
            response_wptr,
        }
    }

    #[test]
    fn a_queue_must_fit_in_csm_and_have_entries() -> Result {
        assert!(queue().is_ok());
        assert_eq!(
            Queue::new(Family::Blackhole, 0x1000_1000, [0x1000_1100, 0]).err(),
            Some(EOPNOTSUPP)
        );
        // The last slot past CSM's end, a base below CSM.
        assert_eq!(
            Queue::new(Family::Blackhole, 0x1000_1000, [0x1007_FF00, 4]).err(),
            Some(EIO)
        );
        assert_eq!(
            Queue::new(Family::Blackhole, 0x1000_1000, [0x0FFF_FF00, 4]).err(),
            Some(EIO)
        );
        // Wormhole publishes an offset into CSM.
        let wh = Queue::new(Family::Wormhole, 0x1007_6F00, [0x7_6000, 4])?;
        assert_eq!(wh.base, 0x1007_6000);
        Ok(())
    }

    #[test]
    fn pointers_the_firmware_could_have_written_are_consistent() -> Result {
        let q = queue()?;
        // Empty; one request not taken; taken, not answered; answered.
        assert!(q.is_consistent(&header(3, 3, 3, 3)));
        assert!(q.is_consistent(&header(4, 3, 3, 3)));
        assert!(q.is_consistent(&header(4, 3, 4, 3)));
        assert!(q.is_consistent(&header(4, 3, 4, 4)));
        // Across the wrap, and a full queue.
        assert!(q.is_consistent(&header(1, 7, 0, 0)));
        assert!(q.is_consistent(&header(3, 7, 7, 7)));
        Ok(())
    }

    #[test]
    fn pointers_no_firmware_writes_are_not() -> Result {
        let q = queue()?;
        // Out of range (the wrap is 8), more than the entries owed, the
        // firmware past the host, an answer to a request not taken.
        assert!(!q.is_consistent(&header(8, 0, 0, 0)));
        assert!(!q.is_consistent(&header(0, 0, 0, u32::MAX - 1)));
        assert!(!q.is_consistent(&header(5, 0, 0, 0)));
        assert!(!q.is_consistent(&header(3, 3, 4, 3)));
        assert!(!q.is_consistent(&header(4, 3, 3, 4)));
        Ok(())
    }

    #[test]
    fn host_pointers_must_be_as_the_driver_left_them() -> Result {
        let mut q = queue()?;
        // Adopted as first read.
        q.host = Some((4, 3));
        assert!(q.is_consistent(&header(4, 3, 4, 4)));
        // A firmware that rebooted: CSM cleared.
        assert!(!q.is_consistent(&header(0, 0, 0, 0)));
        assert!(!q.is_consistent(&header(4, 0, 0, 0)));
        // Unless the driver had left them so: writing there is then right.
        q.host = Some((0, 0));
        assert!(q.is_consistent(&header(0, 0, 0, 0)));
        Ok(())
    }

    #[test]
    fn counts_are_right_for_any_entry_count() -> Result {
        // Three entries: pointers wrap at 6, which does not divide 2^32.
        let q = Queue::new(Family::Blackhole, 0x1000_1000, [0x1000_1100, 3])?;
        assert_eq!(q.owed(&header(0, 5, 5, 5)), 1);
        assert_eq!(q.owed(&header(2, 5, 5, 5)), 3);
        assert!(q.has_room(&header(1, 5, 5, 5)));
        assert!(!q.has_room(&header(2, 5, 5, 5)));
        assert_eq!(q.answered(&header(2, 5, 5, 0)), 1);
        assert_eq!(q.advance(5), 0);
        Ok(())
    }

    #[test]
    fn a_fresh_response_pointer_with_an_older_request_pointer() -> Result {
        let q = queue()?;
        // The firmware took and answered the request since the request
        // read pointer was read: only "no more answers than owed" holds.
        let h = header(4, 3, 3, 4);
        assert!(!q.is_consistent(&h));
        assert!(q.consistent(&h, true));
        assert!(!q.consistent(&header(4, 3, 3, 5), true));
        Ok(())
    }
}

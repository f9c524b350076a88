// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the TLB window pool.
//!
//! As for the locks, waiters are queued the way a blocking request queues
//! itself before it sleeps, so each step is deterministic.

use super::*;
use crate::arbiter::{
    Arbiter,
    POLL_LEASE_NS, //
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const UC: u64 = 6 << 36;
const WC: u64 = 7 << 36;

fn pool(layout: Layout) -> Result<Pin<KBox<TlbPool>>> {
    KBox::pin_init(TlbPool::new(layout)?, GFP_KERNEL)
}

fn owners() -> Result<Pin<KBox<Arbiter>>> {
    KBox::pin_init(Arbiter::new(POLL_LEASE_NS, 0)?, GFP_KERNEL)
}

fn take(p: &TlbPool, owner: OwnerId, size: u64) -> Result<Window, TlbError> {
    p.allocate(owner, size, Requester::current(), Wait::Try)
}

fn id_of(p: &TlbPool, owner: OwnerId, size: u64) -> Result<u32> {
    take(p, owner, size).map(|w| w.id).map_err(|_| ENOSPC)
}

/// Queues a request for a window of `size`, as a blocking request does.
fn queue(p: &TlbPool, owner: OwnerId, size: u64) -> Result<Arc<Waiter>> {
    let class = p.layout.class_of_size(size).ok_or(EINVAL)?;
    let waiter = Arc::pin_init(
        pin_init!(Waiter {
            wake <- new_condvar!("tenstorrent_tlb_test_waiter"),
            owner,
            class,
            who: Requester::current(),
            grant: p.state.locked_by(None),
        }),
        GFP_KERNEL,
    )?;
    let mut state = p.state.lock();
    if state.lowest_free(&p.layout, class).is_some() {
        return Err(EINVAL);
    }
    state.queues[class].push_back(waiter.clone(), GFP_KERNEL)?;
    Ok(waiter)
}

fn grant_of(p: &TlbPool, waiter: &Waiter) -> Option<usize> {
    *waiter.grant.access(&p.state.lock())
}

#[kunit_tests(tenstorrent_tlb)]
mod tests {
    use super::*;

    #[test]
    fn wormhole_ids_and_offsets() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let x = o.new_owner()?.id();
        let w = take(&p, x, MIB).map_err(|_| ENOSPC)?;
        assert_eq!((w.id, w.mmap_offset_uc, w.mmap_offset_wc), (0, UC, WC));
        let w = take(&p, x, 2 * MIB).map_err(|_| ENOSPC)?;
        assert_eq!((w.id, w.mmap_offset_uc), (156, UC + 156 * MIB));
        let w = take(&p, x, 16 * MIB).map_err(|_| ENOSPC)?;
        assert_eq!((w.id, w.mmap_offset_wc), (166, WC + 176 * MIB));
        assert_eq!(take(&p, x, 3 * MIB), Err(TlbError::NoSuchSize));
        assert_eq!(take(&p, x, 4 * GIB), Err(TlbError::NoSuchSize));
        Ok(())
    }

    #[test]
    fn wormhole_counts_keep_the_kernels_window() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let x = o.new_owner()?.id();
        for (size, first, count) in [(MIB, 0, 156), (2 * MIB, 156, 10), (16 * MIB, 166, 19)] {
            for n in 0..count {
                assert_eq!(id_of(&p, x, size)?, first + n);
            }
            assert_eq!(take(&p, x, size), Err(TlbError::Busy));
        }
        // Window 185, the last 16 MiB one, is the kernel's.
        assert_eq!(p.free(x, 185), Err(EPERM));
        Ok(())
    }

    #[test]
    fn blackhole_ids_and_offsets() -> Result {
        let (p, o) = (pool(Layout::blackhole(8))?, owners()?);
        let x = o.new_owner()?.id();
        for n in 0..201 {
            assert_eq!(id_of(&p, x, 2 * MIB)?, n);
        }
        assert_eq!(take(&p, x, 2 * MIB), Err(TlbError::Busy));
        let w = take(&p, x, 4 * GIB).map_err(|_| ENOSPC)?;
        assert_eq!((w.id, w.mmap_offset_uc), (202, UC + 512 * MIB));
        let w = take(&p, x, 4 * GIB).map_err(|_| ENOSPC)?;
        assert_eq!((w.id, w.mmap_offset_wc), (203, WC + 512 * MIB + 4 * GIB));
        for _ in 2..8 {
            assert!(take(&p, x, 4 * GIB).is_ok());
        }
        assert_eq!(take(&p, x, 4 * GIB), Err(TlbError::Busy));
        assert_eq!(take(&p, x, MIB), Err(TlbError::NoSuchSize));
        Ok(())
    }

    #[test]
    fn a_freed_window_is_the_next_one_given() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let x = o.new_owner()?.id();
        for _ in 0..10 {
            id_of(&p, x, 2 * MIB)?;
        }
        p.free(x, 160)?;
        assert_eq!(id_of(&p, x, 2 * MIB)?, 160);
        Ok(())
    }

    #[test]
    fn only_the_holder_frees() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let (x, y) = (o.new_owner()?.id(), o.new_owner()?.id());
        let id = id_of(&p, x, MIB)?;
        assert_eq!(p.free(y, id), Err(EPERM));
        assert_eq!(p.free(x, 256), Err(EINVAL));
        assert_eq!(p.free(x, 250), Err(EPERM));
        p.free(x, id)?;
        assert_eq!(p.free(x, id), Err(EPERM));
        Ok(())
    }

    #[test]
    fn waiters_are_served_in_arrival_order() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let x = o.new_owner()?.id();
        for _ in 0..10 {
            id_of(&p, x, 2 * MIB)?;
        }
        let (a, b) = (o.new_owner()?.id(), o.new_owner()?.id());
        let first = queue(&p, a, 2 * MIB)?;
        let second = queue(&p, b, 2 * MIB)?;
        // No barging: a try fails while the class has waiters.
        assert_eq!(take(&p, o.new_owner()?.id(), 2 * MIB), Err(TlbError::Busy));
        p.free(x, 163)?;
        assert_eq!(grant_of(&p, &first), Some(163));
        assert_eq!(grant_of(&p, &second), None);
        // Waiters of another class are not served by this class's windows.
        p.free(x, 157)?;
        assert_eq!(grant_of(&p, &second), Some(157));
        assert_eq!(p.free(a, 163), Ok(()));
        Ok(())
    }

    #[test]
    fn a_granted_waiter_keeps_its_window_when_interrupted() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let x = o.new_owner()?.id();
        for _ in 0..19 {
            id_of(&p, x, 16 * MIB)?;
        }
        let y = o.new_owner()?.id();
        let w = queue(&p, y, 16 * MIB)?;
        p.free(x, 170)?;
        assert!(matches!(
            p.state.lock().settle(&w, true, true),
            Some(Ok(170))
        ));
        assert_eq!(p.free(y, 170), Ok(()));
        Ok(())
    }

    #[test]
    fn close_frees_everything_and_hands_off() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let x = o.new_owner()?.id();
        for _ in 0..10 {
            id_of(&p, x, 2 * MIB)?;
        }
        let y = o.new_owner()?.id();
        let w = queue(&p, y, 2 * MIB)?;
        p.free_all(x);
        assert_eq!(grant_of(&p, &w), Some(156));
        let info = p.class_info(1)?;
        assert_eq!((info.free, info.waiters), (9, 0));
        Ok(())
    }

    #[test]
    fn removal_fails_waiters_and_later_requests() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let x = o.new_owner()?.id();
        for _ in 0..10 {
            id_of(&p, x, 2 * MIB)?;
        }
        let w = queue(&p, o.new_owner()?.id(), 2 * MIB)?;
        p.shut_down();
        assert!(matches!(
            p.state.lock().settle(&w, false, false),
            Some(Err(TlbError::Gone))
        ));
        assert_eq!(take(&p, x, MIB), Err(TlbError::Gone));
        assert_eq!(p.free(x, 156), Err(ENODEV));
        Ok(())
    }

    #[test]
    fn a_deadline_already_past_times_out() -> Result {
        let (p, o) = (pool(Layout::wormhole())?, owners()?);
        let x = o.new_owner()?.id();
        for _ in 0..10 {
            id_of(&p, x, 2 * MIB)?;
        }
        let y = o.new_owner()?.id();
        let past = p.allocate(y, 2 * MIB, Requester::current(), Wait::Until(0));
        assert_eq!(past, Err(TlbError::TimedOut));
        assert_eq!(take(&p, y, 2 * MIB), Err(TlbError::Busy));
        Ok(())
    }
}

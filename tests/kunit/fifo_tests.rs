// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the waiter queue.

use super::*;

fn contents(q: &Fifo<u32>) -> Result<KVec<u32>> {
    let mut v = KVec::new();
    for x in q.iter() {
        v.push(*x, GFP_KERNEL)?;
    }
    Ok(v)
}

#[kunit_tests(tenstorrent_fifo)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_across_growth_and_wraparound() -> Result {
        let mut q = Fifo::new();
        let mut next = 0u32;
        let mut expect_front = 0u32;
        // Push more than the capacity while taking from the front, so the
        // ring wraps around and grows while wrapped.
        for round in 0..40 {
            for _ in 0..3 {
                q.push_back(next, GFP_KERNEL)?;
                next += 1;
            }
            if round % 2 == 0 {
                assert_eq!(q.remove(0), Some(expect_front));
                expect_front += 1;
            }
        }
        assert_eq!(q.len() as u32, next - expect_front);
        let v = contents(&q)?;
        for (i, x) in v.iter().enumerate() {
            assert_eq!(*x, expect_front + i as u32);
        }
        assert_eq!(q.get(q.len()), None);
        Ok(())
    }

    #[test]
    fn removes_from_the_middle() -> Result {
        let mut q = Fifo::new();
        for x in 0..10u32 {
            q.push_back(x, GFP_KERNEL)?;
        }
        assert_eq!(q.remove(0), Some(0));
        assert_eq!(q.remove(3), Some(4));
        assert_eq!(q.remove(7), Some(9));
        assert_eq!(q.remove(7), None);
        assert_eq!(&contents(&q)?[..], &[1, 2, 3, 5, 6, 7, 8]);
        while q.remove(0).is_some() {}
        assert!(q.is_empty());
        q.push_back(42, GFP_KERNEL)?;
        assert_eq!(q.get(0), Some(&42));
        Ok(())
    }
}

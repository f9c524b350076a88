// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the outbound iATU: placement of regions in the NOC
//! window and their register values. Expected values were worked out by
//! hand from tt-kmd 2.10's `memory.c` placement and `configure_outbound_atu`.

use super::*;
use kernel::prelude::*;

#[kunit_tests(tenstorrent_iatu)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn region(base: u64, size: u64) -> Region {
        Region {
            base,
            limit: base + size - 1,
            target: 0,
        }
    }

    #[test]
    fn first_regions_go_to_the_ends() -> Result {
        let max = window_max(Family::Wormhole);
        assert_eq!(place(&[], max, PAGE, true), Some(0xFFFE_0000 - PAGE));
        assert_eq!(place(&[], max, PAGE, false), Some(0));
        assert_eq!(
            noc_address(Family::Wormhole, 0xFFFE_0000 - PAGE),
            0x8_FFFD_F000
        );
        assert_eq!(noc_address(Family::Blackhole, 0), 1 << 60);
        Ok(())
    }

    #[test]
    fn later_regions_take_the_first_gap_from_their_end() -> Result {
        let max = window_max(Family::Wormhole);
        let top = region(max + 1 - PAGE, PAGE);
        let bottom = region(0, 2 * PAGE);
        let used = [top, bottom];
        assert_eq!(place(&used, max, PAGE, true), Some(max + 1 - 2 * PAGE));
        assert_eq!(place(&used, max, PAGE, false), Some(2 * PAGE));
        // A hole of one page between two regions is found from either end
        // only when nothing fits earlier.
        let hole = [region(0, PAGE), region(2 * PAGE, max + 1 - 2 * PAGE)];
        assert_eq!(place(&hole, max, PAGE, true), Some(PAGE));
        assert_eq!(place(&hole, max, PAGE, false), Some(PAGE));
        assert_eq!(place(&hole, max, 2 * PAGE, true), None);
        Ok(())
    }

    #[test]
    fn sizes_the_window_cannot_hold_are_refused() -> Result {
        let max = window_max(Family::Wormhole);
        assert_eq!(place(&[], max, 0, true), None);
        assert_eq!(place(&[], max, max + 2, true), None);
        assert_eq!(place(&[], max, max + 1, false), Some(0));
        Ok(())
    }

    #[test]
    fn wormhole_registers() -> Result {
        let r = Region {
            base: 0xFFFD_F000,
            limit: 0xFFFD_FFFF,
            target: 0x1_2345_6000,
        };
        let (writes, count) = encode(Family::Wormhole, 2, Some(r)).ok_or(EINVAL)?;
        // Region 2 outbound: 0x1200 + 2 * 0x200.
        let expected = [
            (0x1608, 0xFFFD_F000),
            (0x160C, 0),
            (0x1614, 0x2345_6000),
            (0x1618, 1),
            (0x1610, 0xFFFD_FFFF),
            (0x1600, 0),
            (0x1604, 0x8828_0000),
        ];
        assert_eq!(count, expected.len());
        assert_eq!(&writes[..count], &expected[..]);
        let (off, count) = encode(Family::Wormhole, 2, None).ok_or(EINVAL)?;
        assert!(off[..count].iter().all(|&(_, value)| value == 0));
        assert!(encode(Family::Wormhole, REGIONS, Some(r)).is_none());
        Ok(())
    }

    #[test]
    fn blackhole_registers() -> Result {
        let r = Region {
            base: 0x3FF_FFFF_FFFF_F000,
            limit: 0x3FF_FFFF_FFFF_FFFF,
            target: 0x8000_0000,
        };
        let (writes, count) = encode(Family::Blackhole, 0, Some(r)).ok_or(EINVAL)?;
        let expected = [
            (0x1008, 0xFFFF_F000),
            (0x100C, 0x03FF_FFFF),
            (0x1014, 0x8000_0000),
            (0x1018, 0),
            (0x1010, 0xFFFF_FFFF),
            (0x1020, 0x03FF_FFFF),
            (0x1000, 0x2000),
            (0x1004, 0x8000_0000),
            (0x101C, 0),
        ];
        assert_eq!(count, expected.len());
        assert_eq!(&writes[..count], &expected[..]);
        // Disabled, the region keeps INCREASE_REGION_SIZE, as tt-kmd leaves it.
        let (off, count) = encode(Family::Blackhole, 0, None).ok_or(EINVAL)?;
        assert_eq!(off[6], (0x1000, 0x2000));
        assert_eq!(off[7], (0x1004, 0));
        assert_eq!(count, 9);
        // At most 1 TiB per region.
        let huge = Region {
            base: 0,
            limit: 1 << 40,
            target: 0,
        };
        assert!(encode(Family::Blackhole, 0, Some(huge)).is_none());
        Ok(())
    }
}

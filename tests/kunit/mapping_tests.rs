// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the mmap offsets: QUERY_MAPPINGS's answer, the decoding
//! and bounds of mmap requests and of faulting pages (tt-kmd 2.10's
//! `MMAP_OFFSET_*` and `vma_target_range`).

use super::*;

#[kunit_tests(tenstorrent_mapping)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const WH: [u64; 3] = [512 * MIB, MIB, 32 * MIB];
    const BH: [u64; 3] = [512 * MIB, MIB, 8 * GIB];

    #[test]
    fn query_mappings_values() {
        let (m, n) = mappings(WH);
        assert_eq!(n, 6);
        let ids: [u32; 6] = [1, 2, 3, 4, 5, 6];
        for i in 0..6 {
            assert_eq!(m[i].mapping_id, ids[i]);
            assert_eq!(m[i].mapping_base, (i as u64) << 36);
            assert_eq!(m[i].mapping_size, WH[i / 2]);
        }
        // A device without BAR2: its two entries are left out, not zeroed
        // in place.
        let (m, n) = mappings([4096, 0, 8192]);
        assert_eq!(n, 4);
        assert_eq!(
            (m[2].mapping_id, m[2].mapping_base, m[2].mapping_size),
            (5, 4 << 36, 8192)
        );
        assert_eq!(m[4], Mapping::default());
    }

    #[test]
    fn bar_bounds() {
        let wh = Layout::wormhole();
        let d = |offset, len| decode_mmap(&wh, WH, offset, len);
        assert_eq!(
            d(0, 512 * MIB),
            Ok((
                Target::Bar {
                    resource: 0,
                    offset: 0
                },
                Caching::Uncached
            ))
        );
        assert_eq!(
            d((1 << 36) + 0x1FC0_0000, 4096),
            Ok((
                Target::Bar {
                    resource: 0,
                    offset: 0x1FC0_0000
                },
                Caching::WriteCombined
            ))
        );
        assert_eq!(d(0, 512 * MIB + 4096), Err(EINVAL));
        assert_eq!(d(512 * MIB - 4096, 8192), Err(EINVAL));
        assert_eq!(d((2 << 36) + MIB, 4096), Err(EINVAL));
        assert_eq!(
            d((5 << 36) + 32 * MIB - 4096, 4096),
            Ok((
                Target::Bar {
                    resource: 2,
                    offset: 32 * MIB - 4096
                },
                Caching::WriteCombined
            ))
        );
        assert_eq!(d(8 << 36, 4096), Err(EINVAL));
        assert_eq!(d(u64::MAX - 4095, 4096), Err(EINVAL));
        // No BAR2 on this device: RESOURCE1 is not mappable at all.
        assert_eq!(
            decode_mmap(&wh, [4096, 0, 4096], 2 << 36, 4096),
            Err(EINVAL)
        );
    }

    #[test]
    fn window_bounds() {
        let wh = Layout::wormhole();
        let d = |offset, len| decode_mmap(&wh, WH, offset, len);
        let first_16m = 156 * MIB + 20 * MIB;
        match d((6 << 36) + first_16m, 16 * MIB) {
            Ok((Target::Window(w), Caching::Uncached)) => {
                assert_eq!(
                    (w.id, w.size, w.resource, w.bar_offset),
                    (166, 16 * MIB, 0, first_16m)
                );
            }
            other => panic!("{:?}", other),
        }
        // Larger than the window, not at its start, beyond the windows.
        assert_eq!(d((6 << 36) + first_16m, 16 * MIB + 4096), Err(EINVAL));
        assert_eq!(d((6 << 36) + first_16m + 4096, 4096), Err(EINVAL));
        assert_eq!(d((7 << 36) + 0x1F00_0000, 4096), Err(EINVAL));
        assert_eq!(d((7 << 36) + 0x1FC0_0000, 4096), Err(EINVAL));
        // The kernel's window decodes (the holder check refuses it).
        match d((7 << 36) + 0x1E00_0000, 4096) {
            Ok((Target::Window(w), Caching::WriteCombined)) => assert_eq!(w.id, 185),
            other => panic!("{:?}", other),
        }
    }

    #[test]
    fn blackhole_windows() {
        let bh = Layout::blackhole(2);
        let d = |offset, len| decode_mmap(&bh, BH, offset, len);
        match d((6 << 36) + 512 * MIB + 4 * GIB, 4 * GIB) {
            Ok((Target::Window(w), _)) => {
                assert_eq!((w.id, w.resource, w.bar_offset), (203, 2, 4 * GIB));
            }
            other => panic!("{:?}", other),
        }
        // Only two 4 GiB windows on this card; 2 MiB ones end at 404 MiB.
        assert_eq!(d((6 << 36) + 512 * MIB + 8 * GIB, 4096), Err(EINVAL));
        assert_eq!(d((6 << 36) + 404 * MIB, 4096), Err(EINVAL));
        match d((6 << 36) + 402 * MIB, 2 * MIB) {
            Ok((Target::Window(w), _)) => assert_eq!(w.id, 201),
            other => panic!("{:?}", other),
        }
        assert_eq!(
            decode_page(&bh, (7 << 36) + 512 * MIB + 4 * GIB + 0x3000),
            Some(Page::Window {
                id: 203,
                resource: 2,
                offset: 4 * GIB + 0x3000
            })
        );
        assert_eq!(
            decode_page(&bh, (3 << 36) + 0x5000),
            Some(Page::Bar {
                resource: 1,
                offset: 0x5000
            })
        );
        assert_eq!(decode_page(&bh, 8 << 36), None);
        assert_eq!(window_place(&bh, 202).map(|w| w.bar_offset), Some(0));
        assert_eq!(window_place(&bh, 204), None);
    }

    #[test]
    fn window_offsets() {
        assert!(!is_window_offset((6 << 36) - 4096));
        assert!(is_window_offset(6 << 36));
        assert!(is_window_offset((8 << 36) - 4096));
        assert!(!is_window_offset(8 << 36));
        assert!(!is_window_offset(0));
    }

    #[test]
    fn kernel_maps_no_user_window() {
        for layout in [Layout::wormhole(), Layout::blackhole(8)] {
            let parts = kernel_bar_parts(&layout);
            let kernel = layout.kernel_window();
            assert!(kernel.is_some());
            for id in 0..layout.total() {
                let place = window_place(&layout, id);
                assert!(place.is_some());
                let Some(place) = place else { continue };
                let start = place.bar_offset as usize;
                let end = start + place.size as usize;
                let part = &parts[place.resource];
                let inside = start >= part.start && end <= part.end;
                let outside = end <= part.start || start >= part.end;
                if Some(id) == kernel {
                    // The kernel's own window is what it maps.
                    assert!(inside);
                } else {
                    assert!(outside);
                }
            }
            // The window registers are mapped; BAR2 whole, BAR4 not at all.
            assert!(parts[0].contains(&tlb_regs::TLB_REGS_BASE));
            assert_eq!(parts[1].start, 0);
            assert!(parts[2].is_empty());
        }
    }
}

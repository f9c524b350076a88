// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of the TLB register encodings.
//!
//! The expected words were computed by hand (outside this code) from the
//! bit positions of tt-kmd 2.10's layouts: Wormhole's
//! `noc_tlb_non_address_bits` after a `36 - shift`-bit address, Blackhole's
//! packed `struct TLB_2M_REG` and `struct TLB_4G_REG`.

use super::*;

#[kunit_tests(tenstorrent_tlb_regs)]
mod tests {
    use super::*;

    fn config(addr: u64) -> NocTlbConfig {
        NocTlbConfig {
            addr,
            ..NocTlbConfig::default()
        }
    }

    #[test]
    fn wormhole_1m() -> Result {
        let c = NocTlbConfig {
            x_end: 1,
            y_end: 2,
            noc: 1,
            ordering: 1,
            ..config(0x1230_0000)
        };
        let w = encode(&Layout::wormhole(), 0, &c)?;
        assert_eq!(w.offset, 0x1FC0_0000);
        assert_eq!(w.count, 2);
        assert_eq!(&w.words[..2], &[0x0081_0123, 0x500]);
        assert_eq!(w.strided, None);
        Ok(())
    }

    #[test]
    fn wormhole_16m() -> Result {
        let c = NocTlbConfig {
            x_end: 63,
            y_end: 63,
            mcast: 1,
            linked: 1,
            // Wormhole has no static VC bit: tt-kmd ignores the field.
            static_vc: 7,
            ..config(0x3_0000_0000)
        };
        let w = encode(&Layout::wormhole(), 166, &c)?;
        assert_eq!(w.offset, 0x1FC0_0530);
        assert_eq!(&w.words[..2], &[0x00FF_F300, 0x120]);
        Ok(())
    }

    #[test]
    fn wormhole_refusals() {
        let wh = Layout::wormhole();
        // 2 MiB window 156: 1 MiB alignment is not enough.
        assert_eq!(encode(&wh, 156, &config(0x10_0000)), Err(EINVAL));
        assert!(encode(&wh, 156, &config(0x20_0000)).is_ok());
        // NOC addresses are 36 bits.
        assert_eq!(encode(&wh, 0, &config(1 << 36)), Err(EINVAL));
        let wide = |c: NocTlbConfig| encode(&wh, 0, &c);
        assert_eq!(
            wide(NocTlbConfig {
                x_end: 64,
                ..config(0)
            }),
            Err(EINVAL)
        );
        assert_eq!(
            wide(NocTlbConfig {
                y_start: 64,
                ..config(0)
            }),
            Err(EINVAL)
        );
        assert_eq!(
            wide(NocTlbConfig {
                noc: 2,
                ..config(0)
            }),
            Err(EINVAL)
        );
        assert_eq!(
            wide(NocTlbConfig {
                mcast: 2,
                ..config(0)
            }),
            Err(EINVAL)
        );
        assert_eq!(
            wide(NocTlbConfig {
                ordering: 4,
                ..config(0)
            }),
            Err(EINVAL)
        );
        assert_eq!(
            wide(NocTlbConfig {
                linked: 2,
                ..config(0)
            }),
            Err(EINVAL)
        );
        // Window 186 does not exist.
        assert_eq!(encode(&wh, 186, &config(0)), Err(EINVAL));
    }

    #[test]
    fn blackhole_2m() -> Result {
        let c = NocTlbConfig {
            x_end: 2,
            y_end: 3,
            noc: 1,
            ordering: 1,
            static_vc: 1,
            ..config(1 << 32)
        };
        let w = encode(&Layout::blackhole(8), 5, &c)?;
        assert_eq!(w.offset, 0x1FC0_003C);
        assert_eq!(w.count, 3);
        assert_eq!(w.words, [0x800, 0x0006_1000, 0x248]);
        assert_eq!(w.strided, Some(0x1FC0_09EC));
        // Window 32 and after have no strided register.
        assert_eq!(encode(&Layout::blackhole(8), 32, &config(0))?.strided, None);
        Ok(())
    }

    #[test]
    fn blackhole_4g() -> Result {
        let c = NocTlbConfig {
            x_end: 1,
            y_end: 1,
            x_start: 4,
            y_start: 5,
            noc: 1,
            mcast: 1,
            ordering: 2,
            linked: 1,
            ..config(3 << 32)
        };
        let w = encode(&Layout::blackhole(8), 203, &c)?;
        assert_eq!(w.offset, 0x1FC0_0984);
        assert_eq!(w.words, [0x3, 0x3514_4041, 0]);
        assert_eq!(w.strided, None);
        Ok(())
    }

    #[test]
    fn blackhole_refusals() {
        let bh = Layout::blackhole(8);
        assert_eq!(encode(&bh, 0, &config(0x10_0000)), Err(EINVAL));
        assert_eq!(encode(&bh, 202, &config(1 << 31)), Err(EINVAL));
        // Blackhole addresses are 64 bits: no upper bound.
        assert!(encode(&bh, 0, &config(0xFFFF_FFFF_FFE0_0000)).is_ok());
        assert_eq!(
            encode(
                &bh,
                0,
                &NocTlbConfig {
                    noc: 4,
                    ..config(0)
                }
            ),
            Err(EINVAL)
        );
        assert!(encode(
            &bh,
            0,
            &NocTlbConfig {
                noc: 3,
                ..config(0)
            }
        )
        .is_ok());
        assert_eq!(
            encode(
                &bh,
                0,
                &NocTlbConfig {
                    static_vc: 2,
                    ..config(0)
                }
            ),
            Err(EINVAL)
        );
        assert_eq!(encode(&bh, 210, &config(0)), Err(EINVAL));
        // A card with two 4 GiB windows has no window 204.
        assert_eq!(encode(&Layout::blackhole(2), 204, &config(0)), Err(EINVAL));
    }

    #[test]
    fn decode_reads_back_what_encode_wrote() -> Result {
        let wide = NocTlbConfig {
            x_end: 63,
            y_end: 62,
            x_start: 61,
            y_start: 60,
            noc: 1,
            mcast: 1,
            ordering: 3,
            linked: 1,
            ..config(0)
        };
        let cases = [
            (Layout::wormhole(), 0, 0xF_FFF0_0000),
            (Layout::wormhole(), 160, 0x8_0020_0000),
            (Layout::wormhole(), 185, 0xF_FF00_0000),
            (Layout::blackhole(8), 201, 0x7FF_FFFF_FFE0_0000),
            (Layout::blackhole(8), 209, 0xFFFF_FFFF_0000_0000),
        ];
        for (layout, id, addr) in cases {
            let mut c = NocTlbConfig { addr, ..wide };
            if layout.family == Family::Blackhole {
                c.noc = 3;
                c.static_vc = 1;
            }
            let w = encode(&layout, id, &c)?;
            assert_eq!(register_of(&layout, id), Some((w.offset, w.count)));
            assert_eq!(decode(&layout, id, w.words), Some(c));
        }
        // A Wormhole register is two words: a third read is not its own.
        let c = NocTlbConfig {
            x_end: 1,
            y_end: 2,
            ..config(0x1230_0000)
        };
        let w = encode(&Layout::wormhole(), 0, &c)?;
        assert_eq!(
            decode(&Layout::wormhole(), 0, [w.words[0], w.words[1], !0]),
            Some(c)
        );
        assert_eq!(decode(&Layout::blackhole(8), 0, [0; 3]), Some(config(0)));
        assert_eq!(decode(&Layout::wormhole(), 186, [0; 3]), None);
        assert_eq!(register_of(&Layout::blackhole(2), 204), None);
        Ok(())
    }

    #[test]
    fn reset_is_all_zero() -> Result {
        let w = reset(&Layout::blackhole(8), 7)?;
        assert_eq!(w.words, [0, 0, 0]);
        assert_eq!(reset(&Layout::wormhole(), 185)?.offset, 0x1FC0_05C8);
        Ok(())
    }
}

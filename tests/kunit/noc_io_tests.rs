// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of NOC_READ/NOC_WRITE's argument checks (tt-kmd 2.11's).

use super::*;

#[kunit_tests(tenstorrent_noc_io)]
mod tests {
    use super::*;

    fn good() -> NocIo {
        NocIo {
            argsz: 32,
            x: 1,
            y: 2,
            noc: 1,
            width: 8,
            addr: 0x1000,
            ..NocIo::default()
        }
    }

    #[test]
    fn accepts_each_width_aligned() -> Result {
        for (bytes, width) in [
            (1, Width::U8),
            (2, Width::U16),
            (4, Width::U32),
            (8, Width::U64),
        ] {
            let a = NocAccess::decode(&NocIo {
                width: bytes,
                addr: 0x1008 - u64::from(bytes),
                ..good()
            })?;
            assert_eq!(a.width, width);
            assert_eq!(a.addr, 0x1008 - u64::from(bytes));
            assert_eq!((a.x, a.y, a.noc), (1, 2, 1));
        }
        Ok(())
    }

    #[test]
    fn refuses_what_tt_kmd_refuses() {
        let bad = [
            NocIo { flags: 1, ..good() },
            NocIo {
                reserved0: [0, 1],
                ..good()
            },
            NocIo { noc: 2, ..good() },
            NocIo { width: 0, ..good() },
            NocIo { width: 3, ..good() },
            NocIo {
                width: 16,
                ..good()
            },
            NocIo {
                width: 2,
                addr: 1,
                ..good()
            },
            NocIo {
                width: 4,
                addr: 2,
                ..good()
            },
            NocIo {
                width: 8,
                addr: 4,
                ..good()
            },
        ];
        for r in &bad {
            assert_eq!(NocAccess::decode(r), Err(EINVAL));
        }
    }
}

// SPDX-License-Identifier: GPL-2.0

//! KUnit suite of telemetry: how tags show in sysfs and hwmon. Expected
//! values were worked out by hand from tt-kmd 2.10's `telemetry.c` formats
//! and conversions.

use super::*;

/// A page-sized buffer to format into.
struct Text {
    buf: [u8; 64],
    len: usize,
}

impl Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

fn shown(tag: u16, format: Format, value: u32, low: u32) -> Text {
    let mut t = Text {
        buf: [0; 64],
        len: 0,
    };
    let _ = write_value(&mut t, tag, format, value, low);
    t
}

#[kunit_tests(tenstorrent_telemetry)]
mod tests {
    use super::*;

    fn is(t: &Text, want: &str) -> bool {
        &t.buf[..t.len] == want.as_bytes()
    }

    #[test]
    fn sysfs_formats_are_tt_kmds() -> Result {
        assert!(is(&shown(tag::AICLK, Format::Decimal, 1000, 0), "1000\n"));
        assert!(is(
            &shown(tag::ASIC_ID, Format::Hex64, 0x0100_0186, 0x1172_10ab),
            "01000186117210AB\n"
        ));
        assert!(is(
            &shown(tag::FLASH_BUNDLE_VERSION, Format::Version, 0x1203_0100, 0),
            "18.3.1.0\n"
        ));
        assert!(is(
            &shown(tag::ETH_FW_VERSION, Format::Version, 0x0006_7012, 0),
            "6.7.18\n"
        ));
        assert!(is(
            &shown(tag::BOARD_ID, Format::CardType, 0x0000_0180, 0),
            "n150\n"
        ));
        assert!(is(
            &shown(tag::BOARD_ID, Format::CardType, 0x0000_0400, 0),
            "p150a\n"
        ));
        assert!(is(
            &shown(tag::BOARD_ID, Format::CardType, 0xFFFF_FFFF, 0),
            "unknown\n"
        ));
        Ok(())
    }

    #[test]
    fn hwmon_units_are_tt_kmds() -> Result {
        // 45.5 °C in 16.16 is 45500 m°C; the throttle limit in °C.
        assert_eq!(
            hwmon_value(Sensor::Temp, Attribute::Input, 45 << 16 | 0x8000),
            45_500
        );
        assert_eq!(hwmon_value(Sensor::Temp, Attribute::Max, 90), 90_000);
        // The highest Vdd is the upper half of VDD_LIMITS.
        assert_eq!(
            hwmon_value(Sensor::In, Attribute::Max, 950 << 16 | 700),
            950
        );
        assert_eq!(hwmon_value(Sensor::In, Attribute::Input, 750), 750);
        assert_eq!(hwmon_value(Sensor::Curr, Attribute::Input, 30), 30_000);
        assert_eq!(hwmon_value(Sensor::Power, Attribute::Max, 150), 150_000_000);
        // 32-bit arithmetic wraps, as tt-kmd's.
        assert_eq!(hwmon_value(Sensor::Power, Attribute::Input, 4295), 32_704);
        assert_eq!(hwmon_value(Sensor::Fan, Attribute::Input, 2000), 2000);
        assert_eq!(hwmon_tag(Sensor::Fan, Attribute::Max), None);
        assert_eq!(hwmon_label(Family::Wormhole, Sensor::Temp), c"asic1_temp");
        assert_eq!(hwmon_label(Family::Blackhole, Sensor::Fan), c"fan_rpm");
        Ok(())
    }
}

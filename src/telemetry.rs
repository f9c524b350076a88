// SPDX-License-Identifier: GPL-2.0

//! The card's telemetry: what its ARC firmware publishes in CSM (clocks,
//! temperature, voltage, current, power, firmware versions, board and ASIC
//! ids), shown as tt-kmd 2.10 shows it in sysfs and hwmon.
//!
//! The firmware publishes a table of tags and where each value is: a
//! version word, an entry count, then entries `tag | word offset << 16`
//! into a value array. The driver looks the table up once (at bind, and
//! again after POST_RESET) and keeps where each tag it shows is; every read
//! then reads the value itself, so it is never stale. Nothing here sends a
//! firmware message or waits for the firmware: a read is one or two memory
//! reads through the kernel's window, never on the path of an ioctl.
//!
//! Facts from tt-kmd 2.10 `telemetry.c` / `telemetry.h` (table layout, tag
//! numbers, formats, hwmon conversions); which attributes, channels and
//! labels each chip has is its table's ([`TelemetryView`]). The hwmon
//! device that shows them is src/views/hwmon.rs.

use crate::{
    chip::{
        regs::telemetry_table,
        Family,
        TelemetryView,
        ARC_CSM_BASE,
        ARC_CSM_SIZE, //
    },
    rust_ext::{
        hwmon::{
            Attribute,
            Channel,
            Sensor, //
        },
        sysfs::Page,
    },
    smc::Firmware,
};
use core::fmt::{
    self,
    Write, //
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::Mutex, //
};

/// Telemetry tags (tt-kmd `telemetry.h`).
pub(crate) mod tag {
    /// Board id, high word (the low word is tag 2).
    pub(crate) const BOARD_ID: u16 = 1;
    pub(crate) const VCORE: u16 = 6;
    pub(crate) const POWER: u16 = 7;
    pub(crate) const CURRENT: u16 = 8;
    /// The upper 16 bits are the highest Vdd, in mV.
    pub(crate) const VDD_LIMITS: u16 = 9;
    /// 16.16 fixed point, °C.
    pub(crate) const ASIC_TEMP: u16 = 11;
    pub(crate) const AICLK: u16 = 14;
    pub(crate) const AXICLK: u16 = 15;
    pub(crate) const ARCCLK: u16 = 16;
    pub(crate) const ETH_FW_VERSION: u16 = 24;
    pub(crate) const BM_APP_FW_VERSION: u16 = 26;
    pub(crate) const BM_BL_FW_VERSION: u16 = 27;
    pub(crate) const FLASH_BUNDLE_VERSION: u16 = 28;
    pub(crate) const CM_FW_VERSION: u16 = 29;
    pub(crate) const TIMER_HEARTBEAT: u16 = 32;
    pub(crate) const FAN_RPM: u16 = 41;
    pub(crate) const TDC_LIMIT_MAX: u16 = 55;
    pub(crate) const THM_LIMIT_THROTTLE: u16 = 56;
    pub(crate) const TT_FLASH_VERSION: u16 = 58;
    pub(crate) const THERM_TRIP_COUNT: u16 = 60;
    /// ASIC id, high word (the low word is tag 62).
    pub(crate) const ASIC_ID: u16 = 61;
    pub(crate) const TDP_LIMIT_MAX: u16 = 64;
}

/// The end of the ARC's CSM, where the table and the values must be.
const CSM_END: u32 = ARC_CSM_BASE + ARC_CSM_SIZE;
/// Table versions up to 1.x are understood.
const MAX_MAJOR_VERSION: u32 = 1;
/// More entries than any firmware publishes; a table claiming more is cut.
const MAX_ENTRIES: u32 = 1024;

fn in_csm(addr: u32) -> bool {
    (ARC_CSM_BASE..=CSM_END - 4).contains(&addr)
}

/// How an attribute shows its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// `%u`.
    Decimal,
    /// The tag and the next as one 64-bit value, 16 uppercase hex digits.
    Hex64,
    /// `a.b.c.d` of the four bytes; the Ethernet firmware's `a.b.c` of
    /// bits 16-23, 12-15 and 0-11.
    Version,
    /// The board's name, from its board id.
    CardType,
}

/// Which chips show an attribute: all, or those whose table says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShownOn {
    EveryChip,
    /// The versions of the firmware of the chip's other parts
    /// ([`TelemetryView::component_versions`]).
    Components,
    /// [`TelemetryView::therm_trip_count`].
    ThermTrips,
}

impl ShownOn {
    /// Whether a chip whose table says `view` shows the attribute.
    fn by(self, view: &TelemetryView) -> bool {
        match self {
            Self::EveryChip => true,
            Self::Components => view.component_versions,
            Self::ThermTrips => view.therm_trip_count,
        }
    }
}

/// A telemetry attribute of the class device (`tt_*`, named in
/// src/views/sysfs.rs in the order of [`ATTRIBUTES`]), and the chips that have it.
pub(crate) struct TelemetryAttribute {
    pub(crate) tag: u16,
    pub(crate) format: Format,
    pub(crate) shown_on: ShownOn,
}

const fn attribute(tag: u16, format: Format, shown_on: ShownOn) -> TelemetryAttribute {
    TelemetryAttribute {
        tag,
        format,
        shown_on,
    }
}

use ShownOn::{
    Components,
    EveryChip,
    ThermTrips, //
};

/// tt-kmd 2.10's attributes, in its order (Wormhole's list, then what only
/// Blackhole has).
pub(crate) const ATTRIBUTES: [TelemetryAttribute; 14] = [
    /* tt_aiclk */ attribute(tag::AICLK, Format::Decimal, EveryChip),
    /* tt_axiclk */ attribute(tag::AXICLK, Format::Decimal, EveryChip),
    /* tt_arcclk */ attribute(tag::ARCCLK, Format::Decimal, EveryChip),
    /* tt_serial */ attribute(tag::BOARD_ID, Format::Hex64, EveryChip),
    /* tt_card_type */ attribute(tag::BOARD_ID, Format::CardType, EveryChip),
    /* tt_fw_bundle_ver */ attribute(tag::FLASH_BUNDLE_VERSION, Format::Version, EveryChip),
    /* tt_m3app_fw_ver */ attribute(tag::BM_APP_FW_VERSION, Format::Version, EveryChip),
    /* tt_ttflash_ver */ attribute(tag::TT_FLASH_VERSION, Format::Version, Components),
    /* tt_m3bl_fw_ver */ attribute(tag::BM_BL_FW_VERSION, Format::Version, Components),
    /* tt_arc_fw_ver */ attribute(tag::CM_FW_VERSION, Format::Version, Components),
    /* tt_eth_fw_ver */ attribute(tag::ETH_FW_VERSION, Format::Version, Components),
    /* tt_asic_id */ attribute(tag::ASIC_ID, Format::Hex64, EveryChip),
    /* tt_heartbeat */ attribute(tag::TIMER_HEARTBEAT, Format::Decimal, EveryChip),
    /* tt_therm_trip_count */ attribute(tag::THERM_TRIP_COUNT, Format::Decimal, ThermTrips),
];

/// The board names of board ids (bits 4-19 of the high word).
const CARD_TYPES: [(u32, &str); 12] = [
    (0x14, "n300"),
    (0x18, "n150"),
    (0x35, "galaxy-wormhole"),
    (0x36, "p100"),
    (0x40, "p150a"),
    (0x41, "p150b"),
    (0x42, "p150c"),
    (0x43, "p100a"),
    (0x44, "p300b"),
    (0x45, "p300a"),
    (0x46, "p300c"),
    (0x47, "galaxy-blackhole"),
];

/// Writes `value` of `tag` as `format` shows it; `low` is the next tag's
/// value for [`Format::Hex64`].
pub(crate) fn write_value(
    out: &mut impl Write,
    tag: u16,
    format: Format,
    value: u32,
    low: u32,
) -> fmt::Result {
    match format {
        Format::Decimal => writeln!(out, "{value}"),
        Format::Hex64 => writeln!(out, "{value:08X}{low:08X}"),
        Format::Version if tag == tag::ETH_FW_VERSION => writeln!(
            out,
            "{}.{}.{}",
            (value >> 16) & 0xFF,
            (value >> 12) & 0xF,
            value & 0xFFF
        ),
        Format::Version => writeln!(
            out,
            "{}.{}.{}.{}",
            value >> 24,
            (value >> 16) & 0xFF,
            (value >> 8) & 0xFF,
            value & 0xFF
        ),
        Format::CardType => {
            let id = (value >> 4) & 0xFFFF;
            let name = CARD_TYPES
                .iter()
                .find(|(known, _)| *known == id)
                .map_or("unknown", |(_, name)| name);
            writeln!(out, "{name}")
        }
    }
}

/// The hwmon channels: tt-kmd 2.10's, with a fan on the chips whose table
/// says so ([`TelemetryView::hwmon_fan`]).
const INPUT_LABEL_MAX: &[Attribute] = &[Attribute::Input, Attribute::Label, Attribute::Max];
const INPUT_LABEL: &[Attribute] = &[Attribute::Input, Attribute::Label];
pub(crate) const CHANNELS: [Channel; 4] = [
    channel(Sensor::Temp, INPUT_LABEL_MAX),
    channel(Sensor::In, INPUT_LABEL_MAX),
    channel(Sensor::Curr, INPUT_LABEL_MAX),
    channel(Sensor::Power, INPUT_LABEL_MAX),
];
pub(crate) const CHANNELS_WITH_FAN: [Channel; 5] = [
    channel(Sensor::Temp, INPUT_LABEL_MAX),
    channel(Sensor::In, INPUT_LABEL_MAX),
    channel(Sensor::Curr, INPUT_LABEL_MAX),
    channel(Sensor::Power, INPUT_LABEL_MAX),
    channel(Sensor::Fan, INPUT_LABEL),
];

const fn channel(sensor: Sensor, attributes: &'static [Attribute]) -> Channel {
    Channel { sensor, attributes }
}

/// The tag of a hwmon value.
pub(crate) fn hwmon_tag(sensor: Sensor, attribute: Attribute) -> Option<u16> {
    Some(match (sensor, attribute) {
        (Sensor::Temp, Attribute::Input) => tag::ASIC_TEMP,
        (Sensor::Temp, Attribute::Max) => tag::THM_LIMIT_THROTTLE,
        (Sensor::In, Attribute::Input) => tag::VCORE,
        (Sensor::In, Attribute::Max) => tag::VDD_LIMITS,
        (Sensor::Curr, Attribute::Input) => tag::CURRENT,
        (Sensor::Curr, Attribute::Max) => tag::TDC_LIMIT_MAX,
        (Sensor::Power, Attribute::Input) => tag::POWER,
        (Sensor::Power, Attribute::Max) => tag::TDP_LIMIT_MAX,
        (Sensor::Fan, Attribute::Input) => tag::FAN_RPM,
        _ => return None,
    })
}

/// A hwmon value in hwmon units (m°C, mV, mA, µW, RPM) from its tag's
/// value. tt-kmd computes in 32 bits, wrapping; so does this.
pub(crate) fn hwmon_value(sensor: Sensor, attribute: Attribute, raw: u32) -> i64 {
    let value = match (sensor, attribute) {
        (Sensor::Temp, Attribute::Input) => {
            (raw >> 16).wrapping_mul(1000) + (raw & 0xFFFF) * 1000 / 0x10000
        }
        (Sensor::In, Attribute::Max) => raw >> 16,
        (Sensor::Temp | Sensor::Curr, _) => raw.wrapping_mul(1000),
        (Sensor::Power, _) => raw.wrapping_mul(1_000_000),
        _ => raw,
    };
    i64::from(value)
}

/// The hwmon label of a channel, as the chip's table names it.
pub(crate) fn hwmon_label(family: Family, sensor: Sensor) -> &'static CStr {
    let labels = &family.chip().telemetry.hwmon_labels;
    match sensor {
        Sensor::Temp => labels.asic_temp,
        Sensor::In => labels.vcore,
        Sensor::Curr => labels.current,
        Sensor::Power => labels.power,
        Sensor::Fan => c"fan_rpm",
    }
}

/// Where the values of the tags the driver shows are, as ARC addresses.
#[pin_data]
pub(crate) struct Telemetry {
    #[pin]
    places: Mutex<KVec<(u16, u32)>>,
}

impl Telemetry {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            places <- new_mutex!(KVec::new()),
        })
    }

    /// Looks the firmware's table up again. A table that cannot be read or
    /// makes no sense leaves no tag (tt-kmd does the same): reads are then
    /// `ENODATA`. `ENODEV` once the card is unbound.
    pub(crate) fn probe(&self, firmware: &Firmware<'_>) -> Result {
        let found = Self::read_table(firmware);
        let mut places = self.places.lock();
        places.clear();
        match found {
            Ok(found) => {
                *places = found;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn read_table(firmware: &Firmware<'_>) -> Result<KVec<(u16, u32)>> {
        let (table, values) = firmware.telemetry_pointers()?;
        if !in_csm(table) || !in_csm(values) {
            return Err(ENODATA);
        }
        let version = firmware.read_csm(table)?;
        if (version >> 16) & 0xFF > MAX_MAJOR_VERSION {
            return Err(EOPNOTSUPP);
        }
        let count = firmware
            .read_csm(table + telemetry_table::ENTRY_COUNT)?
            .min(MAX_ENTRIES);
        let mut places = KVec::new();
        for i in 0..count {
            let Some(entry_addr) = table
                .checked_add(telemetry_table::ENTRIES + 4 * i)
                .filter(|a| in_csm(*a))
            else {
                break;
            };
            let entry = firmware.read_csm(entry_addr)?;
            let tag = entry as u16;
            let wanted = ATTRIBUTES.iter().any(|a| a.tag == tag || a.tag + 1 == tag)
                || [
                    Sensor::Temp,
                    Sensor::In,
                    Sensor::Curr,
                    Sensor::Power,
                    Sensor::Fan,
                ]
                .into_iter()
                .any(|s| {
                    [Attribute::Input, Attribute::Max]
                        .into_iter()
                        .any(|a| hwmon_tag(s, a) == Some(tag))
                });
            let Some(addr) = values.checked_add(4 * (entry >> 16)).filter(|a| in_csm(*a)) else {
                continue;
            };
            if !wanted {
                continue;
            }
            // A tag listed twice: the last one counts, as in tt-kmd.
            match places.iter_mut().find(|(t, _)| *t == tag) {
                Some(place) => place.1 = addr,
                None => places.push((tag, addr), GFP_KERNEL)?,
            }
        }
        Ok(places)
    }

    /// Whether the firmware publishes `tag`.
    pub(crate) fn has(&self, tag: u16) -> bool {
        self.places.lock().iter().any(|(t, _)| *t == tag)
    }

    /// The value of `tag` now: `ENODATA` if the firmware does not publish
    /// it (or the chip is being reset), `ENODEV` once the card is unbound.
    pub(crate) fn read(&self, firmware: &Firmware<'_>, tag: u16) -> Result<u32> {
        if firmware.in_reset {
            return Err(ENODATA);
        }
        let addr = {
            let places = self.places.lock();
            let place = places.iter().find(|(t, _)| *t == tag);
            place.map(|(_, addr)| *addr).ok_or(ENODATA)?
        };
        firmware.read_csm(addr)
    }

    /// Shows telemetry attribute `index` of [`ATTRIBUTES`], read through
    /// `firmware`; a value that cannot be read fails the read with its
    /// error.
    pub(crate) fn show_attribute(
        &self,
        firmware: &Firmware<'_>,
        index: usize,
        out: &mut Page<'_>,
    ) -> fmt::Result {
        let Some(attribute) = ATTRIBUTES.get(index) else {
            return Ok(());
        };
        let values = self.read(firmware, attribute.tag).and_then(|value| {
            let low = match attribute.format {
                Format::Hex64 => self.read(firmware, attribute.tag + 1)?,
                _ => 0,
            };
            Ok((value, low))
        });
        match values {
            Ok((value, low)) => write_value(out, attribute.tag, attribute.format, value, low),
            Err(e) => {
                out.fail(e);
                Ok(())
            }
        }
    }

    /// Whether a card of chip `family` has telemetry attribute `index`: its
    /// chip does, and its firmware published the tag when the card was
    /// bound.
    pub(crate) fn has_attribute(&self, family: Family, index: usize) -> bool {
        let Some(attribute) = ATTRIBUTES.get(index) else {
            return false;
        };
        attribute.shown_on.by(&family.chip().telemetry) && self.has(attribute.tag)
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/telemetry_tests.rs"]
mod kunit;

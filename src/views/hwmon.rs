// SPDX-License-Identifier: GPL-2.0

//! The hwmon view of a card: its telemetry (src/telemetry.rs) as hwmon
//! sensors, with the channels and labels of its chip, under a device named
//! as tt-kmd names it ("wormhole" or "blackhole").

use crate::{
    card::Card,
    rust_ext::hwmon::{
        hwmon_callbacks,
        Attribute,
        Channel,
        Registration,
        Sensor,
        Sensors, //
    },
    telemetry::{
        hwmon_label,
        hwmon_tag,
        hwmon_value,
        CHANNELS,
        CHANNELS_WITH_FAN, //
    },
};
use kernel::{
    device::{
        Bound,
        Device, //
    },
    prelude::*,
    sync::Arc, //
};

impl Sensors for Card {
    fn is_visible(&self, sensor: Sensor, attribute: Attribute) -> bool {
        match hwmon_tag(sensor, attribute) {
            Some(tag) => self.telemetry.has(tag),
            // Labels are always there, as in tt-kmd.
            None => attribute == Attribute::Label,
        }
    }

    fn read(&self, sensor: Sensor, attribute: Attribute) -> Result<i64> {
        let tag = hwmon_tag(sensor, attribute).ok_or(EOPNOTSUPP)?;
        let raw = self.telemetry.read(&self.firmware(), tag)?;
        Ok(hwmon_value(sensor, attribute, raw))
    }

    fn label(&self, sensor: Sensor) -> Result<&'static CStr> {
        Ok(hwmon_label(self.tlb.layout().family, sensor))
    }
}

hwmon_callbacks!(Card);

/// Registers the hwmon device of `card` under `pdev`.
pub(crate) fn register(card: &Arc<Card>, pdev: &Device<Bound>) -> Result<Registration<Card>> {
    let chip = card.tlb.layout().family.chip();
    let channels: &[Channel] = if chip.telemetry.hwmon_fan {
        &CHANNELS_WITH_FAN
    } else {
        &CHANNELS
    };
    Registration::new(pdev, chip.name, channels, card.clone())
}

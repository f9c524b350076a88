//! Telemetry as tt-kmd 2.10 shows it (src/telemetry.rs): the `tt_*`
//! attributes of the class device and the hwmon device under the PCI
//! device, against the emulated boards (tools/emu `Board::n150` and
//! `Board::p150a`): ids, firmware versions, clocks, sensors and their
//! limits, each chip's own set of files and labels.

use std::fs;
use std::time::{Duration, Instant};

use crate::util::*;

fn attribute(n: u32, name: &str) -> Result<String, String> {
    sysfs(&format!("/sys/class/tenstorrent/tenstorrent!{n}/{name}"))
}

fn exists(n: u32, name: &str) -> bool {
    fs::metadata(format!("/sys/class/tenstorrent/tenstorrent!{n}/{name}")).is_ok()
}

/// The hwmon directory of card `n`, and its `name`.
fn hwmon_dir(n: u32) -> Result<(String, String), String> {
    let base = format!("/sys/bus/pci/devices/{}/hwmon", bdf(n as usize)?);
    let entries = fs::read_dir(&base).map_err(|e| format!("{base}: {e}"))?;
    let dirs: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path().display().to_string())
        .collect();
    ensure_eq!(dirs.len(), 1, "card {n}: hwmon devices in {base}");
    let name = sysfs(&format!("{}/name", dirs[0]))?;
    Ok((dirs[0].clone(), name))
}

fn number(path: &str) -> Result<i64, String> {
    let text = sysfs(path)?;
    text.parse().map_err(|e| format!("{path}: {text:?}: {e}"))
}

pub fn attributes_and_hwmon() -> TestResult {
    let boards = [
        (
            "n150",
            "0100018611721043",
            "000001C48A3D5E17",
            &[
                ("tt_fw_bundle_ver", "18.12.0.0"),
                ("tt_arc_fw_ver", "2.33.0.0"),
                ("tt_eth_fw_ver", "7.0.0"),
                ("tt_m3app_fw_ver", "5.13.0.0"),
                ("tt_m3bl_fw_ver", "5.0.0.4"),
                ("tt_ttflash_ver", "3.3.5.0"),
                ("tt_axiclk", "900"),
                ("tt_arcclk", "540"),
            ][..],
            &["tt_therm_trip_count"][..],
            "wormhole",
            ["asic1_temp", "vcore1", "current1", "power1"],
        ),
        (
            "p150a",
            "01000401125070A3",
            "00000A713C59E204",
            &[
                ("tt_fw_bundle_ver", "18.12.0.0"),
                ("tt_m3app_fw_ver", "0.13.0.0"),
                ("tt_axiclk", "1000"),
                ("tt_arcclk", "800"),
                ("tt_therm_trip_count", "0"),
            ][..],
            &[
                "tt_arc_fw_ver",
                "tt_eth_fw_ver",
                "tt_m3bl_fw_ver",
                "tt_ttflash_ver",
            ][..],
            "blackhole",
            ["asic_temp", "vcore", "current", "power"],
        ),
    ];
    for (n, (card_type, serial, asic_id, values, absent, chip, labels)) in
        boards.into_iter().enumerate()
    {
        let n = n as u32;
        ensure_eq!(
            attribute(n, "tt_card_type")?,
            card_type,
            "card {n}: tt_card_type"
        );
        ensure_eq!(attribute(n, "tt_serial")?, serial, "card {n}: tt_serial");
        ensure_eq!(attribute(n, "tt_asic_id")?, asic_id, "card {n}: tt_asic_id");
        for (name, want) in values {
            ensure_eq!(attribute(n, name)?, *want, "card {n}: {name}");
        }
        for name in absent {
            ensure!(!exists(n, name), "card {n}: {name} exists on a {chip}");
        }
        // The heartbeat is read live: it moves (the firmware counts its
        // telemetry refreshes).
        let first = attribute(n, "tt_heartbeat")?;
        let start = Instant::now();
        while attribute(n, "tt_heartbeat")? == first {
            ensure!(
                start.elapsed() < PATIENCE,
                "card {n}: tt_heartbeat stays {first}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }

        let (dir, name) = hwmon_dir(n)?;
        ensure_eq!(name, chip, "card {n}: hwmon name");
        for (sensor, label) in ["temp1", "in0", "curr1", "power1"].iter().zip(labels) {
            ensure_eq!(
                sysfs(&format!("{dir}/{sensor}_label"))?,
                label,
                "card {n}: {sensor}_label"
            );
            let input = number(&format!("{dir}/{sensor}_input"))?;
            let max = number(&format!("{dir}/{sensor}_max"))?;
            ensure!(
                0 < input && input < max,
                "card {n}: {sensor}_input {input}, {sensor}_max {max}"
            );
        }
        // What the boards' idle operating point and limits are, in hwmon
        // units.
        let idle = if n == 0 {
            [
                ("in0_input", 750),
                ("in0_max", 950),
                ("curr1_max", 160_000),
                ("power1_max", 100_000_000),
            ]
        } else {
            [
                ("in0_input", 720),
                ("in0_max", 900),
                ("curr1_max", 400_000),
                ("power1_max", 300_000_000),
            ]
        };
        for (file, want) in idle {
            ensure_eq!(number(&format!("{dir}/{file}"))?, want, "card {n}: {file}");
        }
        let fan = fs::metadata(format!("{dir}/fan1_input")).is_ok();
        ensure_eq!(fan, n == 1, "card {n}: fan1_input exists");
        if fan {
            ensure_eq!(
                sysfs(&format!("{dir}/fan1_label"))?,
                "fan_rpm",
                "fan1_label"
            );
        }
    }
    Ok(())
}

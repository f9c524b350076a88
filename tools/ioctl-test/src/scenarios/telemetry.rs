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

/// tt-kmd's `pcie_perf_counters` (Blackhole only, as in tt-kmd; what nvtop
/// reads for a card's PCIe traffic): the twelve files of the PCIe tile's
/// NIU counters, NOC0's and NOC1's, in 32-byte data words. Reads through a
/// window aimed over NOC0 move `mst_rd_data_word_received0` by at least
/// one word each; writes through a window over NOC1 move
/// `mst_nonposted_wr_data_word_sent1` the same way, and nothing of the
/// other NOC's host traffic counters (the driver's own window is NOC0's).
/// The Wormhole has no such directory. Seen failing on the driver before
/// (no directory), and on a scenario that did not wait for the open's
/// power message ("mst_nonposted_wr_data_word_sent0 moved without such
/// traffic: got 11").
pub fn pcie_perf_counters() -> TestResult {
    use super::mapping::{alloc, configure_with, tensix};
    use crate::card::{Chip, Mmio};
    use tt_arbiter::abi;
    const NAMES: [&str; 6] = [
        "slv_posted_wr_data_word_received",
        "slv_nonposted_wr_data_word_received",
        "slv_rd_data_word_sent",
        "mst_posted_wr_data_word_sent",
        "mst_nonposted_wr_data_word_sent",
        "mst_rd_data_word_received",
    ];
    ensure!(
        !exists(0, "pcie_perf_counters"),
        "card 0 (Wormhole) has pcie_perf_counters, as tt-kmd does not"
    );
    let n = 1;
    let counters = || -> Result<std::collections::BTreeMap<String, u32>, String> {
        let mut all = std::collections::BTreeMap::new();
        for noc in 0..2 {
            for name in NAMES {
                let file = format!("{name}{noc}");
                let text = attribute(n, &format!("pcie_perf_counters/{file}"))?;
                let value = text
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| format!("pcie_perf_counters/{file}: {text:?}"))?;
                all.insert(file, value);
            }
        }
        Ok(all)
    };
    let dev = open(n)?;
    let (x, y) = tensix(Chip::Blackhole);
    let mut windows = Vec::new();
    for noc in 0..2u8 {
        let w = ctx(alloc(&dev, 2 << 20), "a 2M window")?;
        let config = abi::NocTlbConfig {
            addr: 0,
            x_end: x,
            y_end: y,
            noc,
            ..Default::default()
        };
        expect_ok(configure_with(&dev, w.id, config), "CONFIGURE_TLB")?;
        windows.push(ctx(Mmio::new(&dev, w.mmap_offset_uc, 4096), "mmap")?);
    }
    const ACCESSES: u32 = 16;
    // The open's power vote goes to the firmware after the open returns,
    // through the driver's window over NOC0: its queue writes must not
    // land between the two readings.
    super::power::settle(n)?;
    let before = counters()?;
    for i in 0..ACCESSES as usize {
        std::hint::black_box(windows[0].read32(4 * i));
    }
    for i in 0..ACCESSES as usize {
        windows[1].write32(4 * i, i as u32);
    }
    // A read through NOC1's window after the writes: they have landed.
    std::hint::black_box(windows[1].read32(0));
    let after = counters()?;
    let moved = |file: &str| after[file].wrapping_sub(before[file]);
    ensure!(
        moved("mst_rd_data_word_received0") >= ACCESSES,
        "mst_rd_data_word_received0 moved by {} for {ACCESSES} reads over NOC0",
        moved("mst_rd_data_word_received0")
    );
    ensure!(
        moved("mst_nonposted_wr_data_word_sent1") >= ACCESSES,
        "mst_nonposted_wr_data_word_sent1 moved by {} for {ACCESSES} writes over NOC1",
        moved("mst_nonposted_wr_data_word_sent1")
    );
    for file in [
        "mst_nonposted_wr_data_word_sent0",
        "mst_posted_wr_data_word_sent1",
    ] {
        ensure_eq!(moved(file), 0, "{file} moved without such traffic");
    }
    Ok(())
}

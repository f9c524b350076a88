// SPDX-License-Identifier: GPL-2.0
//! The telemetry the ARC firmware keeps, laid out where each client reads it.
//!
//! Two layouts live in ARC CSM (the ARC's SRAM, ARC address `0x1000_0000`,
//! 512 KiB; tt-kmd 2.10 `telemetry.h` `ARC_CSM_BASE`/`ARC_CSM_SIZE`):
//!
//! - **Wormhole's SMBUS telemetry struct**: 50 words at a fixed place,
//!   ARC address `0x1007_8D60`. luwen (`chip/wormhole.rs`, `get_telemetry`)
//!   finds it with the `GET_SMBUS_TELEMETRY_ADDR` message and reads word `i`
//!   at `ARC_CSM.DATA[0] + (addr - 0x1000_0000) + 4 * i`; tt-umd's
//!   `SmBusArcTelemetryReader` reads it at the hard-coded NOC address
//!   `0x8_2007_8D60` (before that commit, "Hardcode SMBus telemetry address",
//!   it added `0x8_1000_0000` to the message's answer, which gives the same
//!   number). Word order: tt-umd `types/wormhole_telemetry.hpp`
//!   (`LegacyTelemetryTag`), the same order luwen reads.
//! - **The tagged table** (Blackhole always; Wormhole from bundle 18.4 on,
//!   tt-umd `arc_telemetry_reader.cpp` `FW_NEW_TELEMETRY`): `{u32 version;
//!   u32 entry_count; {u16 tag; u16 offset}[entry_count]}`, then the data
//!   words; a tag's value is `data[offset]`. Its address and the data's are
//!   published in reset-unit registers (see `arc.rs`). Layout and tag ids:
//!   tt-zephyr-platforms `lib/tenstorrent/bh_arc/telemetry.{c,h}`, read the
//!   same way by tt-kmd 2.10 `*_populate_telemetry_cache`, tt-umd
//!   `ArcTelemetryReader::initialize_telemetry` and tt-flash
//!   `__read_telemetry_table`. luwen's Blackhole `get_telemetry` does not use
//!   the data pointer: it reads the data right after the tag entries
//!   (`table + 8 + 4 * entry_count`), as the real firmware's struct has it,
//!   so the data array is placed there.
//!
//! The firmware refreshes the dynamic values itself (every 100 ms on
//! Blackhole, `telem_update_interval`), so values are computed when read:
//! what a host writes over them is lost, as it would be on the chip a
//! moment later.

use crate::Arch;

/// Telemetry tag ids of the tagged table.
///
/// Numbers from tt-zephyr-platforms `bh_arc/telemetry.h`, the same in tt-kmd
/// 2.10 `telemetry.h` (`enum tt_telemetry_tags`, which calls a few of them by
/// other names: `POWER` = TDP, `CURRENT` = TDC, `ASIC_ID` = ASIC_ID_HIGH) and
/// tt-umd `types/telemetry.hpp` (`TelemetryTag`).
pub mod tag {
    pub const BOARD_ID_HIGH: u16 = 1;
    pub const BOARD_ID_LOW: u16 = 2;
    pub const HARVESTING_STATE: u16 = 4;
    pub const UPDATE_TELEM_SPEED: u16 = 5;
    pub const VCORE: u16 = 6;
    pub const TDP: u16 = 7;
    pub const TDC: u16 = 8;
    pub const VDD_LIMITS: u16 = 9;
    pub const THM_LIMIT_SHUTDOWN: u16 = 10;
    pub const ASIC_TEMPERATURE: u16 = 11;
    pub const VREG_TEMPERATURE: u16 = 12;
    pub const BOARD_TEMPERATURE: u16 = 13;
    pub const AICLK: u16 = 14;
    pub const AXICLK: u16 = 15;
    pub const ARCCLK: u16 = 16;
    pub const L2CPUCLK0: u16 = 17;
    pub const L2CPUCLK1: u16 = 18;
    pub const L2CPUCLK2: u16 = 19;
    pub const L2CPUCLK3: u16 = 20;
    pub const ETH_LIVE_STATUS: u16 = 21;
    pub const GDDR_STATUS: u16 = 22;
    pub const GDDR_SPEED: u16 = 23;
    pub const ETH_FW_VERSION: u16 = 24;
    pub const GDDR_FW_VERSION: u16 = 25;
    pub const DM_APP_FW_VERSION: u16 = 26;
    pub const DM_BL_FW_VERSION: u16 = 27;
    pub const FLASH_BUNDLE_VERSION: u16 = 28;
    pub const CM_FW_VERSION: u16 = 29;
    pub const L2CPU_FW_VERSION: u16 = 30;
    pub const FAN_SPEED: u16 = 31;
    pub const TIMER_HEARTBEAT: u16 = 32;
    pub const TELEM_ENUM_COUNT: u16 = 33;
    pub const ENABLED_TENSIX_COL: u16 = 34;
    pub const ENABLED_ETH: u16 = 35;
    pub const ENABLED_GDDR: u16 = 36;
    pub const ENABLED_L2CPU: u16 = 37;
    pub const PCIE_USAGE: u16 = 38;
    pub const NOC_TRANSLATION: u16 = 40;
    pub const FAN_RPM: u16 = 41;
    pub const GDDR_0_1_TEMP: u16 = 42;
    pub const GDDR_2_3_TEMP: u16 = 43;
    pub const GDDR_4_5_TEMP: u16 = 44;
    pub const GDDR_6_7_TEMP: u16 = 45;
    pub const GDDR_0_1_CORR_ERRS: u16 = 46;
    pub const GDDR_2_3_CORR_ERRS: u16 = 47;
    pub const GDDR_4_5_CORR_ERRS: u16 = 48;
    pub const GDDR_6_7_CORR_ERRS: u16 = 49;
    pub const GDDR_UNCORR_ERRS: u16 = 50;
    pub const MAX_GDDR_TEMP: u16 = 51;
    pub const ASIC_LOCATION: u16 = 52;
    pub const BOARD_POWER_LIMIT: u16 = 53;
    pub const INPUT_POWER: u16 = 54;
    pub const TDC_LIMIT_MAX: u16 = 55;
    pub const THM_LIMIT_THROTTLE: u16 = 56;
    pub const TT_FLASH_VERSION: u16 = 58;
    pub const THERM_TRIP_COUNT: u16 = 60;
    pub const ASIC_ID_HIGH: u16 = 61;
    pub const ASIC_ID_LOW: u16 = 62;
    pub const AICLK_LIMIT_MAX: u16 = 63;
    pub const TDP_LIMIT_MAX: u16 = 64;
}

/// Word indices of Wormhole's SMBUS telemetry struct (tt-umd
/// `wormhole_telemetry.hpp` `LegacyTelemetryTag`; luwen reads word `i` at
/// `base + i * 4` in the same order).
pub mod smbus {
    pub const ENUM_VERSION: usize = 0;
    pub const DEVICE_ID: usize = 1;
    pub const ASIC_RO: usize = 2;
    pub const ASIC_IDD: usize = 3;
    pub const BOARD_ID_HIGH: usize = 4;
    pub const BOARD_ID_LOW: usize = 5;
    pub const ARC0_FW_VERSION: usize = 6;
    pub const ARC1_FW_VERSION: usize = 7;
    pub const ARC2_FW_VERSION: usize = 8;
    pub const ARC3_FW_VERSION: usize = 9;
    pub const SPIBOOTROM_FW_VERSION: usize = 10;
    pub const ETH_FW_VERSION: usize = 11;
    pub const M3_BL_FW_VERSION: usize = 12;
    pub const M3_APP_FW_VERSION: usize = 13;
    pub const DDR_STATUS: usize = 14;
    pub const ETH_STATUS0: usize = 15;
    pub const ETH_STATUS1: usize = 16;
    pub const PCIE_STATUS: usize = 17;
    pub const FAULTS: usize = 18;
    pub const ARC0_HEALTH: usize = 19;
    pub const ARC1_HEALTH: usize = 20;
    pub const ARC2_HEALTH: usize = 21;
    pub const ARC3_HEALTH: usize = 22;
    pub const FAN_SPEED: usize = 23;
    pub const AICLK: usize = 24;
    pub const AXICLK: usize = 25;
    pub const ARCCLK: usize = 26;
    pub const THROTTLER: usize = 27;
    pub const VCORE: usize = 28;
    pub const ASIC_TEMPERATURE: usize = 29;
    pub const VREG_TEMPERATURE: usize = 30;
    pub const BOARD_TEMPERATURE: usize = 31;
    pub const TDP: usize = 32;
    pub const TDC: usize = 33;
    pub const VDD_LIMITS: usize = 34;
    pub const THM_LIMITS: usize = 35;
    pub const WH_FW_DATE: usize = 36;
    pub const ASIC_TMON0: usize = 37;
    pub const ASIC_TMON1: usize = 38;
    pub const MVDDQ_POWER: usize = 39;
    pub const GDDR_TRAIN_TEMP0: usize = 40;
    pub const GDDR_TRAIN_TEMP1: usize = 41;
    pub const BOOT_DATE: usize = 42;
    pub const RT_SECONDS: usize = 43;
    pub const ETH_DEBUG_STATUS0: usize = 44;
    pub const ETH_DEBUG_STATUS1: usize = 45;
    pub const TT_FLASH_VERSION: usize = 46;
    pub const ETH_LOOPBACK_STATUS: usize = 47;
    pub const ETH_LIVE_STATUS: usize = 48;
    pub const FW_BUNDLE_VERSION: usize = 49;
    /// tt-umd `NUMBER_OF_TAGS`: the struct's length in words.
    pub const WORDS: usize = 50;
}

/// ARC address of ARC CSM (tt-kmd 2.10 `telemetry.h` `ARC_CSM_BASE`).
pub const CSM_BASE: u32 = 0x1000_0000;
/// Size of ARC CSM (`ARC_CSM_SIZE`, 512 KiB; tt-umd's Wormhole CSM window
/// `0x1FE8_0000..=0x1FEF_FFFF` in BAR0 is the same size).
pub const CSM_SIZE: u32 = 1 << 19;

/// ARC address of the SMBUS struct: tt-umd's hard-coded NOC address
/// `0x8_2007_8D60` less the `0x8_1000_0000` it used to add to the
/// `GET_SMBUS_TELEMETRY_ADDR` answer.
pub const WH_SMBUS_TELEMETRY_ADDR: u32 = 0x1007_8D60;

/// Where this firmware keeps the tagged table. The real firmware's place is
/// wherever its linker put a static struct; clients only follow the
/// published pointers. Chosen clear of the fixed CSM locations the tools
/// know (Wormhole: `SCRATCH_REG_EXT` at 0x1007_5C00, the mailbox at
/// 0x1007_83C4, the DMA request at 0x1007_84C8, the SMBUS struct).
pub const WH_TELEMETRY_TABLE_ADDR: u32 = 0x1007_7000;
/// See [`WH_TELEMETRY_TABLE_ADDR`].
pub const BH_TELEMETRY_TABLE_ADDR: u32 = 0x1000_2000;

/// Telemetry table version, `TELEMETRY_VERSION` of the Blackhole firmware
/// (v0.1.0 as `major << 16 | minor << 8 | patch`); tt-kmd refuses a major
/// above 1.
pub const TELEMETRY_VERSION: u32 = 0x0000_0100;

/// How often the firmware refreshes telemetry, in ms (Blackhole
/// `telem_update_interval`); the heartbeat counts these refreshes.
pub const UPDATE_INTERVAL_MS: u64 = 100;

/// The emulated board: what its firmware tables and sensors say.
///
/// The defaults ([`Board::n150`], [`Board::p150a`]) are what a person
/// reading `tt-smi -s` should find ordinary for such a card; where no client
/// decodes a field, it is 0. Tests check them, so changing a default is a
/// visible decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Board {
    pub arch: Arch,
    /// Board type name as tt-smi's `get_board_type` prints it.
    pub name: &'static str,
    /// Board id (the serial): `AA-BBBBB-C-D-EE-FF-XXX`, its 20-bit UPI
    /// (`BBBBB`, bits 36..56) names the board type (tt-smi `utils.py`
    /// `get_board_type`; tt-kmd reads it as `(BOARD_ID_HIGH >> 4) & 0xFFFF`).
    pub board_id: u64,
    /// Chip id from efuses (tt-kmd `tt_asic_id`, tags 61/62).
    pub asic_id: u64,
    /// Firmware bundle, `major << 24 | minor << 16 | patch << 8 | build`
    /// (tt-flash reads it as `(fwId, releaseId, patch, debug)`).
    pub fw_bundle_version: u32,
    /// ARC ("CM") firmware, same packing. On Wormhole this is the SMBUS
    /// `ARC0_FW_VERSION` luwen compares with 2.25.0.0 before reading the
    /// bundle word and tt-flash with 2.23.0.0 before asking for the bundle.
    pub cm_fw_version: u32,
    /// Ethernet firmware. Wormhole packing `major << 16 | minor << 12 |
    /// patch` (tt-smi `hex_to_semver_eth_wh`, tt-kmd's ETH special case);
    /// Blackhole `major << 16 | minor << 8 | patch` (`hex_to_semver_eth`).
    pub eth_fw_version: u32,
    /// Board management ("M3"/"DM") application and bootloader firmware.
    pub dm_app_fw_version: u32,
    pub dm_bl_fw_version: u32,
    /// tt-flash version that wrote the flash (Wormhole only).
    pub tt_flash_version: u32,
    /// GDDR (MRISC) firmware, `major << 16 | minor` (Blackhole only).
    pub gddr_fw_version: u32,
    /// SPI boot ROM firmware (Wormhole SMBUS word 10).
    pub spibootrom_fw_version: u32,
    /// Firmware date, `0xYMDDHHMM` with Y = year - 2020 (tt-smi
    /// `hex_to_date`; Wormhole SMBUS `WH_FW_DATE`).
    pub fw_date: u32,
    /// AICLK when idle and when busy (= its limit), MHz. tt-umd waits for
    /// exactly these after GO_LONG_IDLE / GO_BUSY (`wait_for_aiclk_value`
    /// with `get_min_clock_freq`, and `AICLK_LIMIT_MAX` for busy).
    pub aiclk_idle_mhz: u32,
    pub aiclk_busy_mhz: u32,
    pub axiclk_mhz: u32,
    pub arcclk_mhz: u32,
    /// Blackhole's four L2CPU clocks (tags 17..20).
    pub l2cpuclk_mhz: u32,
    pub vcore_idle_mv: u32,
    pub vcore_busy_mv: u32,
    pub vdd_min_mv: u32,
    pub vdd_max_mv: u32,
    /// ASIC (VCORE rail) power and current, and their limits.
    pub power_idle_w: u32,
    pub power_busy_w: u32,
    pub tdp_limit_w: u32,
    pub current_idle_a: u32,
    pub current_busy_a: u32,
    pub tdc_limit_a: u32,
    /// Whole-board input power and its limit (tags 54/53).
    pub input_power_idle_w: u32,
    pub input_power_busy_w: u32,
    pub board_power_limit_w: u32,
    /// Temperatures in milli-degrees Celsius.
    pub asic_temp_idle_mc: i32,
    pub asic_temp_busy_mc: i32,
    pub board_temp_mc: i32,
    pub vreg_temp_mc: i32,
    /// Throttle and shutdown junction temperatures, degrees Celsius.
    pub thm_limit_throttle_c: u32,
    pub thm_limit_shutdown_c: u32,
    /// Fan: target speed in percent, and measured RPM.
    pub fan_speed_percent: u32,
    pub fan_rpm: u32,
    /// GDDR data rate, Mbps (tt-smi prints 16000 as "16G").
    pub gddr_speed_mbps: u32,
    /// GDDR training status word, in the arch's own encoding (Wormhole:
    /// `speed_code << 24` and a nibble per channel, 2 = trained; Blackhole
    /// before 19.7: two bits per channel, `0x5555` = all eight trained; both
    /// from tt-smi `get_dram_training_status`).
    pub gddr_status: u32,
    /// Wormhole: the Tensix harvesting mask `GET_HARVESTING` returns
    /// (physical rows). The NOC model must agree.
    pub tensix_harvesting: u32,
    /// Blackhole: enabled Tensix columns / ETH tiles / GDDR channels / L2CPU
    /// clusters (tt-umd derives its harvesting masks from their
    /// complements). The NOC model must agree.
    pub enabled_tensix_cols: u32,
    pub enabled_eth: u32,
    pub enabled_gddr: u32,
    pub enabled_l2cpu: u32,
    /// Blackhole `PCIE_USAGE`: 2 bits per PCIe instance, 1 = endpoint
    /// (tt-umd `get_chip_info`). Must name the instance the NOC model puts
    /// the host on.
    pub pcie_usage: u32,
    /// Whether the firmware enabled NOC coordinate translation: tag 40, and
    /// bit 14 of every NIU's `NIU_CFG_0` out of reset (what tt-umd and
    /// tt-kmd's test read). The NOC model never translates coordinates, so
    /// a board that says it does would lie to them.
    pub noc_translation: bool,
    pub asic_location: u32,
}

impl Board {
    /// A Wormhole n150. Values:
    /// - board id `0x0100018611721043`: UPI 0x18 = n150 (tt-smi
    ///   `get_board_type`, tt-kmd `tt_sysfs_show_card_type`);
    /// - bundle 18.12.0.0: an 18.x bundle past 18.8, so tt-umd reads the new
    ///   telemetry with `AICLK_LIMIT_MAX` as the busy clock; ARC firmware
    ///   2.33.0.0 (above luwen's 2.25 and tt-flash's 2.23 thresholds);
    ///   ETH 7.0.0; M3 bootloader 5.0.0.4, app 5.13.0.0; tt-flash 3.3.5.0;
    /// - AICLK 500 MHz idle / 1000 MHz busy: tt-umd `wormhole::AICLK_IDLE_VAL`
    ///   and `AICLK_BUSY_VAL`; AXICLK 900, ARCCLK 540;
    /// - VCORE 750 / 850 mV within 700..950 mV; 14 / 25 W of 100 W TDP;
    ///   18 / 29 A of 160 A TDC; board input 35 / 55 W of 160 W;
    /// - ASIC 45.0 / 52.5 C, board 38 C, VREG 50 C; throttle at 75 C,
    ///   shutdown at 85 C; fan 40 %;
    /// - GDDR6 at 12 Gbps, all six channels trained (`0x02222222`);
    /// - nothing harvested, no NOC translation.
    pub fn n150() -> Self {
        Board {
            arch: Arch::Wormhole,
            name: "n150",
            board_id: 0x0100_0186_1172_1043,
            asic_id: 0x0000_01C4_8A3D_5E17,
            fw_bundle_version: 0x120C_0000,
            cm_fw_version: 0x0221_0000,
            eth_fw_version: 0x07_0000,
            dm_app_fw_version: 0x050D_0000,
            dm_bl_fw_version: 0x0500_0004,
            tt_flash_version: 0x0303_0500,
            gddr_fw_version: 0,
            spibootrom_fw_version: 0x0302_0000,
            fw_date: 0x530E_0C1E,
            aiclk_idle_mhz: 500,
            aiclk_busy_mhz: 1000,
            axiclk_mhz: 900,
            arcclk_mhz: 540,
            l2cpuclk_mhz: 0,
            vcore_idle_mv: 750,
            vcore_busy_mv: 850,
            vdd_min_mv: 700,
            vdd_max_mv: 950,
            power_idle_w: 14,
            power_busy_w: 25,
            tdp_limit_w: 100,
            current_idle_a: 18,
            current_busy_a: 29,
            tdc_limit_a: 160,
            input_power_idle_w: 35,
            input_power_busy_w: 55,
            board_power_limit_w: 160,
            asic_temp_idle_mc: 45_000,
            asic_temp_busy_mc: 52_500,
            board_temp_mc: 38_000,
            vreg_temp_mc: 50_000,
            thm_limit_throttle_c: 75,
            thm_limit_shutdown_c: 85,
            fan_speed_percent: 40,
            fan_rpm: 0,
            gddr_speed_mbps: 12_000,
            // Speed code 2 is "12G" in tt-smi `get_dram_speed`.
            gddr_status: 0x0222_2222,
            tensix_harvesting: 0,
            enabled_tensix_cols: 0,
            enabled_eth: 0,
            enabled_gddr: 0,
            enabled_l2cpu: 0,
            pcie_usage: 0,
            noc_translation: false,
            asic_location: 0,
        }
    }

    /// A Blackhole p150a. Values:
    /// - board id `0x01000401125070A3`: UPI 0x40 = p150a;
    /// - bundle 18.12.0.0 (so tt-smi decodes `DDR_STATUS` the pre-19.7 way);
    ///   CM firmware 0.17.0.0; ETH 1.4.1; DM app 0.13.0.0, bootloader
    ///   0.2.0.0; GDDR firmware 2.15;
    /// - AICLK 800 MHz idle / 1350 MHz busy: tt-umd `blackhole::AICLK_IDLE_VAL`
    ///   and `AICLK_BUSY_VAL`; AXICLK 1000, ARCCLK 800, L2CPU 1750;
    /// - VCORE 720 / 800 mV within 700..900 mV; 35 / 65 W of 300 W TDP;
    ///   48 / 81 A of 400 A TDC; board input 60 / 95 W of 300 W;
    /// - ASIC 45.0 / 52.5 C; throttle at 90 C, shutdown at 110 C; fan
    ///   35 %, 1800 RPM;
    /// - GDDR6 at 16 Gbps, all eight channels trained (`0x5555`), GDDR dies
    ///   at 42..44 C;
    /// - all 14 Tensix columns, 8 GDDR, 4 L2CPU enabled, 12 of the 14 ETH
    ///   (a p150's die always has two ETH harvested: tt-umd 0.9.12's
    ///   `BlackholeCoordinateManager` refuses a full Blackhole with other
    ///   than 2 or 14 harvested; which two varies by chip, here channels 0
    ///   and 1); the host on PCIe instance 0 (`PCIE_USAGE` = 1); no NOC
    ///   translation.
    pub fn p150a() -> Self {
        Board {
            arch: Arch::Blackhole,
            name: "p150a",
            board_id: 0x0100_0401_1250_70A3,
            asic_id: 0x0000_0A71_3C59_E204,
            fw_bundle_version: 0x120C_0000,
            cm_fw_version: 0x0011_0000,
            eth_fw_version: 0x01_0401,
            dm_app_fw_version: 0x000D_0000,
            dm_bl_fw_version: 0x0002_0000,
            tt_flash_version: 0,
            gddr_fw_version: 0x0002_000F,
            spibootrom_fw_version: 0,
            fw_date: 0,
            aiclk_idle_mhz: 800,
            aiclk_busy_mhz: 1350,
            axiclk_mhz: 1000,
            arcclk_mhz: 800,
            l2cpuclk_mhz: 1750,
            vcore_idle_mv: 720,
            vcore_busy_mv: 800,
            vdd_min_mv: 700,
            vdd_max_mv: 900,
            power_idle_w: 35,
            power_busy_w: 65,
            tdp_limit_w: 300,
            current_idle_a: 48,
            current_busy_a: 81,
            tdc_limit_a: 400,
            input_power_idle_w: 60,
            input_power_busy_w: 95,
            board_power_limit_w: 300,
            asic_temp_idle_mc: 45_000,
            asic_temp_busy_mc: 52_500,
            board_temp_mc: 0,
            vreg_temp_mc: 0,
            thm_limit_throttle_c: 90,
            thm_limit_shutdown_c: 110,
            fan_speed_percent: 35,
            fan_rpm: 1800,
            gddr_speed_mbps: 16_000,
            gddr_status: 0x5555,
            tensix_harvesting: 0,
            enabled_tensix_cols: 0x3FFF,
            enabled_eth: 0x3FFC,
            enabled_gddr: 0xFF,
            enabled_l2cpu: 0xF,
            pcie_usage: 0x1,
            noc_translation: false,
            asic_location: 0,
        }
    }

    /// The default board of an arch: n150 for Wormhole, p150a for Blackhole.
    pub fn for_arch(arch: Arch) -> Self {
        match arch {
            Arch::Wormhole => Self::n150(),
            Arch::Blackhole => Self::p150a(),
        }
    }

    /// The board type field of the board id (tt-smi `get_board_type`).
    pub fn upi(&self) -> u32 {
        ((self.board_id >> 36) & 0xF_FFFF) as u32
    }
}

/// What the firmware's sensors read now; the firmware derives it from its
/// power state and its uptime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Live {
    /// Whether AICLK runs at its busy frequency (power and temperature
    /// follow it).
    pub busy: bool,
    /// The AICLK frequency, MHz.
    pub aiclk_mhz: u32,
    /// Time the firmware has been running its telemetry loop, ms.
    pub uptime_ms: u64,
}

impl Live {
    fn heartbeat(&self) -> u32 {
        (self.uptime_ms / UPDATE_INTERVAL_MS) as u32
    }
}

/// Signed 16.16 fixed point, as the Blackhole firmware's
/// `ConvertFloatToTelemetry` encodes temperatures.
pub fn milli_to_16_16(milli: i32) -> u32 {
    ((i64::from(milli) << 16) / 1000) as i32 as u32
}

/// The telemetry one firmware publishes: the tag list and where it sits.
#[derive(Clone, Debug)]
pub struct Telemetry {
    board: Board,
    tags: Vec<u16>,
}

impl Telemetry {
    pub fn new(board: Board) -> Self {
        let tags = tags_of(board.arch);
        Telemetry { board, tags }
    }

    pub fn board(&self) -> &Board {
        &self.board
    }

    /// The tags in table order; a tag's offset is its index here.
    pub fn tags(&self) -> &[u16] {
        &self.tags
    }

    /// ARC address of the tagged table (published in the reset unit).
    pub fn table_addr(&self) -> u32 {
        match self.board.arch {
            Arch::Wormhole => WH_TELEMETRY_TABLE_ADDR,
            Arch::Blackhole => BH_TELEMETRY_TABLE_ADDR,
        }
    }

    pub fn entry_count(&self) -> u32 {
        self.tags.len() as u32
    }

    /// ARC address of the data words: right after the tag entries.
    pub fn data_addr(&self) -> u32 {
        self.table_addr() + 8 + 4 * self.entry_count()
    }

    /// The SMBUS struct's ARC address (Wormhole only).
    pub fn smbus_addr(&self) -> Option<u32> {
        match self.board.arch {
            Arch::Wormhole => Some(WH_SMBUS_TELEMETRY_ADDR),
            Arch::Blackhole => None,
        }
    }

    /// The word at an ARC address inside one of the published structures,
    /// or None if the address is not part of them.
    pub fn read(&self, arc_addr: u32, live: &Live) -> Option<u32> {
        let table = self.table_addr();
        let count = self.entry_count();
        if arc_addr >= table && arc_addr < self.data_addr() + 4 * count {
            let word = (arc_addr - table) / 4;
            return Some(match word {
                0 => TELEMETRY_VERSION,
                1 => count,
                w if w < 2 + count => {
                    let i = (w - 2) as usize;
                    (u32::from(i as u16) << 16) | u32::from(self.tags[i])
                }
                w => {
                    let i = (w - 2 - count) as usize;
                    self.tag_value(self.tags[i], live).unwrap_or(0)
                }
            });
        }
        if let Some(base) = self.smbus_addr() {
            if arc_addr >= base && arc_addr < base + 4 * smbus::WORDS as u32 {
                return self.smbus_word(((arc_addr - base) / 4) as usize, live);
            }
        }
        None
    }

    /// Whether an ARC address lies in a structure the firmware rewrites.
    pub fn covers(&self, arc_addr: u32) -> bool {
        let live = Live {
            busy: false,
            aiclk_mhz: 0,
            uptime_ms: 0,
        };
        self.read(arc_addr, &live).is_some()
    }

    /// A tag's value, if this firmware publishes the tag.
    pub fn tag_value(&self, t: u16, live: &Live) -> Option<u32> {
        if !self.tags.contains(&t) {
            return None;
        }
        let b = &self.board;
        let pick = |idle: u32, busy: u32| if live.busy { busy } else { idle };
        let temp = if live.busy {
            b.asic_temp_busy_mc
        } else {
            b.asic_temp_idle_mc
        };
        let gddr_temp = |lo: u32, hi: u32| {
            // Per pair: x bottom, x top, y bottom, y top (bh_arc/telemetry.c
            // `UpdateGddrTelemetry`).
            lo | (hi << 8) | (lo << 16) | (hi << 24)
        };
        Some(match t {
            tag::BOARD_ID_HIGH => (b.board_id >> 32) as u32,
            tag::BOARD_ID_LOW => b.board_id as u32,
            tag::HARVESTING_STATE => 0,
            tag::UPDATE_TELEM_SPEED => UPDATE_INTERVAL_MS as u32,
            tag::VCORE => pick(b.vcore_idle_mv, b.vcore_busy_mv),
            tag::TDP => pick(b.power_idle_w, b.power_busy_w),
            tag::TDC => pick(b.current_idle_a, b.current_busy_a),
            // Max in the upper half: tt-kmd's `in_max` takes `raw >> 16`.
            tag::VDD_LIMITS => (b.vdd_max_mv << 16) | (b.vdd_min_mv & 0xFFFF),
            tag::THM_LIMIT_SHUTDOWN => b.thm_limit_shutdown_c,
            tag::ASIC_TEMPERATURE => milli_to_16_16(temp),
            tag::VREG_TEMPERATURE => milli_to_16_16(b.vreg_temp_mc),
            tag::BOARD_TEMPERATURE => milli_to_16_16(b.board_temp_mc),
            tag::AICLK => live.aiclk_mhz,
            tag::AXICLK => b.axiclk_mhz,
            tag::ARCCLK => b.arcclk_mhz,
            tag::L2CPUCLK0 | tag::L2CPUCLK1 | tag::L2CPUCLK2 | tag::L2CPUCLK3 => b.l2cpuclk_mhz,
            tag::ETH_LIVE_STATUS => 0,
            tag::GDDR_STATUS => b.gddr_status,
            tag::GDDR_SPEED => b.gddr_speed_mbps,
            tag::ETH_FW_VERSION => b.eth_fw_version,
            tag::GDDR_FW_VERSION => b.gddr_fw_version,
            tag::DM_APP_FW_VERSION => b.dm_app_fw_version,
            tag::DM_BL_FW_VERSION => b.dm_bl_fw_version,
            tag::FLASH_BUNDLE_VERSION => b.fw_bundle_version,
            tag::CM_FW_VERSION => b.cm_fw_version,
            tag::L2CPU_FW_VERSION => 0,
            tag::FAN_SPEED => b.fan_speed_percent,
            tag::TIMER_HEARTBEAT => live.heartbeat(),
            // One past the highest tag this firmware defines, as the real
            // one publishes its `TAG_COUNT`.
            tag::TELEM_ENUM_COUNT => u32::from(tag::TDP_LIMIT_MAX) + 1,
            tag::ENABLED_TENSIX_COL => b.enabled_tensix_cols,
            tag::ENABLED_ETH => b.enabled_eth,
            tag::ENABLED_GDDR => b.enabled_gddr,
            tag::ENABLED_L2CPU => b.enabled_l2cpu,
            tag::PCIE_USAGE => b.pcie_usage,
            tag::NOC_TRANSLATION => u32::from(b.noc_translation),
            tag::FAN_RPM => b.fan_rpm,
            tag::GDDR_0_1_TEMP => gddr_temp(42, 43),
            tag::GDDR_2_3_TEMP => gddr_temp(42, 44),
            tag::GDDR_4_5_TEMP => gddr_temp(43, 44),
            tag::GDDR_6_7_TEMP => gddr_temp(42, 43),
            tag::GDDR_0_1_CORR_ERRS
            | tag::GDDR_2_3_CORR_ERRS
            | tag::GDDR_4_5_CORR_ERRS
            | tag::GDDR_6_7_CORR_ERRS
            | tag::GDDR_UNCORR_ERRS => 0,
            tag::MAX_GDDR_TEMP => 44,
            tag::ASIC_LOCATION => b.asic_location,
            tag::BOARD_POWER_LIMIT => b.board_power_limit_w,
            tag::INPUT_POWER => pick(b.input_power_idle_w, b.input_power_busy_w),
            tag::TDC_LIMIT_MAX => b.tdc_limit_a,
            tag::THM_LIMIT_THROTTLE => b.thm_limit_throttle_c,
            tag::TT_FLASH_VERSION => b.tt_flash_version,
            tag::THERM_TRIP_COUNT => 0,
            tag::ASIC_ID_HIGH => (b.asic_id >> 32) as u32,
            tag::ASIC_ID_LOW => b.asic_id as u32,
            tag::AICLK_LIMIT_MAX => b.aiclk_busy_mhz,
            tag::TDP_LIMIT_MAX => b.tdp_limit_w,
            _ => return None,
        })
    }

    /// Word `index` of Wormhole's SMBUS struct, or None past its end or on
    /// Blackhole.
    pub fn smbus_word(&self, index: usize, live: &Live) -> Option<u32> {
        if self.board.arch != Arch::Wormhole || index >= smbus::WORDS {
            return None;
        }
        let b = &self.board;
        let pick = |idle: u32, busy: u32| if live.busy { busy } else { idle };
        let temp = if live.busy {
            b.asic_temp_busy_mc
        } else {
            b.asic_temp_idle_mc
        };
        Some(match index {
            // No client decodes these; the PCI ids are a guess at what the
            // firmware means by a device id.
            smbus::ENUM_VERSION => 0,
            smbus::DEVICE_ID => 0x401E_1E52,
            smbus::BOARD_ID_HIGH => (b.board_id >> 32) as u32,
            smbus::BOARD_ID_LOW => b.board_id as u32,
            // tt-flash's `smbus_fw_version` reads ARC1; one firmware image
            // runs on the ARC, so ARC0 and ARC1 say the same.
            smbus::ARC0_FW_VERSION | smbus::ARC1_FW_VERSION => b.cm_fw_version,
            smbus::SPIBOOTROM_FW_VERSION => b.spibootrom_fw_version,
            smbus::ETH_FW_VERSION => b.eth_fw_version,
            smbus::M3_BL_FW_VERSION => b.dm_bl_fw_version,
            smbus::M3_APP_FW_VERSION => b.dm_app_fw_version,
            smbus::DDR_STATUS => b.gddr_status,
            // Heartbeats: tt-umd 18.3 reads ARC0_HEALTH, tt-smi ARC3_HEALTH
            // (divided by 5 to get about 2 per second).
            smbus::ARC0_HEALTH | smbus::ARC3_HEALTH => live.heartbeat(),
            smbus::FAN_SPEED => b.fan_speed_percent,
            // Limit in the upper half, current value in the lower (tt-smi
            // `get_wh_chip_limits` / `get_wh_chip_telemetry`).
            smbus::AICLK => (b.aiclk_busy_mhz << 16) | (live.aiclk_mhz & 0xFFFF),
            smbus::AXICLK => b.axiclk_mhz,
            smbus::ARCCLK => b.arcclk_mhz,
            smbus::VCORE => pick(b.vcore_idle_mv, b.vcore_busy_mv),
            // 1/16 degree in the low half (tt-smi divides `& 0xFFFF` by 16;
            // tt-umd's 18.3 map the same).
            smbus::ASIC_TEMPERATURE => ((temp * 16 / 1000) as u32) & 0xFFFF,
            smbus::VREG_TEMPERATURE => (b.vreg_temp_mc / 1000) as u32,
            // 16.16, as tt-umd's 18.3 map decodes BOARD_TEMPERATURE.
            smbus::BOARD_TEMPERATURE => milli_to_16_16(b.board_temp_mc),
            smbus::TDP => (b.tdp_limit_w << 16) | pick(b.power_idle_w, b.power_busy_w),
            smbus::TDC => (b.tdc_limit_a << 16) | pick(b.current_idle_a, b.current_busy_a),
            smbus::VDD_LIMITS => (b.vdd_max_mv << 16) | (b.vdd_min_mv & 0xFFFF),
            // tt-smi shows `>> 16` as the thermal-trip (throttle) limit and
            // the low half as the chip limit, the two it takes from
            // THM_LIMIT_THROTTLE and THM_LIMIT_SHUTDOWN on Blackhole.
            smbus::THM_LIMITS => (b.thm_limit_throttle_c << 16) | (b.thm_limit_shutdown_c & 0xFFFF),
            smbus::WH_FW_DATE => b.fw_date,
            smbus::RT_SECONDS => (live.uptime_ms / 1000) as u32,
            smbus::TT_FLASH_VERSION => b.tt_flash_version,
            smbus::FW_BUNDLE_VERSION => b.fw_bundle_version,
            _ => 0,
        })
    }
}

/// Which chips' firmware publishes a tag.
#[derive(Clone, Copy, PartialEq, Eq)]
enum On {
    Both,
    Wormhole,
    Blackhole,
}

/// The tags of the tagged table, in table order: that of the Blackhole
/// firmware's `telemetry_table` initializer (bh_arc/telemetry.c), without
/// its AICLK arbiter tags (65 and up, which no client here reads).
///
/// Blackhole publishes the tags marked `Both` or `Blackhole`. Wormhole
/// (bundle 18.x) publishes what tt-kmd 2.10 reads on Wormhole (the hwmon and
/// sysfs tables in `wormhole.c`) and the tags tt-umd's 18.8 feature map
/// uses: the `Both` ones and `TT_FLASH_VERSION`, none of the Blackhole-only
/// L2CPU, per-GDDR and enable-mask tags. Clients find a tag by its entry,
/// never by its position, so the order is the firmware's business.
const TAGS: &[(u16, On)] = &[
    (tag::BOARD_ID_HIGH, On::Both),
    (tag::BOARD_ID_LOW, On::Both),
    (tag::HARVESTING_STATE, On::Both),
    (tag::UPDATE_TELEM_SPEED, On::Both),
    (tag::VCORE, On::Both),
    (tag::TDP, On::Both),
    (tag::TDC, On::Both),
    (tag::VDD_LIMITS, On::Both),
    (tag::THM_LIMIT_SHUTDOWN, On::Both),
    (tag::ASIC_TEMPERATURE, On::Both),
    (tag::VREG_TEMPERATURE, On::Both),
    (tag::BOARD_TEMPERATURE, On::Both),
    (tag::AICLK, On::Both),
    (tag::AXICLK, On::Both),
    (tag::ARCCLK, On::Both),
    (tag::L2CPUCLK0, On::Blackhole),
    (tag::L2CPUCLK1, On::Blackhole),
    (tag::L2CPUCLK2, On::Blackhole),
    (tag::L2CPUCLK3, On::Blackhole),
    (tag::ETH_LIVE_STATUS, On::Both),
    (tag::GDDR_STATUS, On::Both),
    (tag::GDDR_SPEED, On::Both),
    (tag::ETH_FW_VERSION, On::Both),
    (tag::GDDR_FW_VERSION, On::Blackhole),
    (tag::DM_APP_FW_VERSION, On::Both),
    (tag::DM_BL_FW_VERSION, On::Both),
    (tag::FLASH_BUNDLE_VERSION, On::Both),
    (tag::CM_FW_VERSION, On::Both),
    (tag::L2CPU_FW_VERSION, On::Blackhole),
    (tag::FAN_SPEED, On::Both),
    (tag::TIMER_HEARTBEAT, On::Both),
    (tag::ENABLED_TENSIX_COL, On::Blackhole),
    (tag::ENABLED_ETH, On::Blackhole),
    (tag::ENABLED_GDDR, On::Blackhole),
    (tag::ENABLED_L2CPU, On::Blackhole),
    (tag::PCIE_USAGE, On::Blackhole),
    (tag::NOC_TRANSLATION, On::Both),
    (tag::FAN_RPM, On::Blackhole),
    (tag::GDDR_0_1_TEMP, On::Blackhole),
    (tag::GDDR_2_3_TEMP, On::Blackhole),
    (tag::GDDR_4_5_TEMP, On::Blackhole),
    (tag::GDDR_6_7_TEMP, On::Blackhole),
    (tag::GDDR_0_1_CORR_ERRS, On::Blackhole),
    (tag::GDDR_2_3_CORR_ERRS, On::Blackhole),
    (tag::GDDR_4_5_CORR_ERRS, On::Blackhole),
    (tag::GDDR_6_7_CORR_ERRS, On::Blackhole),
    (tag::GDDR_UNCORR_ERRS, On::Blackhole),
    (tag::MAX_GDDR_TEMP, On::Blackhole),
    (tag::ASIC_LOCATION, On::Both),
    (tag::BOARD_POWER_LIMIT, On::Both),
    (tag::INPUT_POWER, On::Both),
    (tag::ASIC_ID_HIGH, On::Both),
    (tag::ASIC_ID_LOW, On::Both),
    (tag::THERM_TRIP_COUNT, On::Both),
    (tag::TELEM_ENUM_COUNT, On::Both),
    (tag::AICLK_LIMIT_MAX, On::Both),
    (tag::TDC_LIMIT_MAX, On::Both),
    (tag::THM_LIMIT_THROTTLE, On::Both),
    (tag::TT_FLASH_VERSION, On::Wormhole),
    (tag::TDP_LIMIT_MAX, On::Both),
];

/// The tags `arch`'s firmware publishes, in table order.
fn tags_of(arch: Arch) -> Vec<u16> {
    let only = match arch {
        Arch::Wormhole => On::Wormhole,
        Arch::Blackhole => On::Blackhole,
    };
    TAGS.iter()
        .filter(|&&(_, on)| on == On::Both || on == only)
        .map(|&(t, _)| t)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tt-smi `utils.py` `get_board_type` for the UPIs of interest.
    fn tt_smi_board_type(board_id: u64) -> &'static str {
        match (board_id >> 36) & 0xF_FFFF {
            0x14 => "n300",
            0x18 => "n150",
            0x40 => "p150a",
            0x41 => "p150b",
            0x43 => "p100a",
            _ => "N/A",
        }
    }

    fn idle(b: &Board) -> Live {
        Live {
            busy: false,
            aiclk_mhz: b.aiclk_idle_mhz,
            uptime_ms: 12_345,
        }
    }

    #[test]
    fn tag_ids_are_tt_kmd_and_tt_umd_numbers() {
        // tt-kmd 2.10 telemetry.h enum tt_telemetry_tags.
        let kmd = [
            (tag::BOARD_ID_HIGH, 1),
            (tag::VCORE, 6),
            (tag::TDP, 7),
            (tag::TDC, 8),
            (tag::VDD_LIMITS, 9),
            (tag::THM_LIMIT_SHUTDOWN, 10),
            (tag::ASIC_TEMPERATURE, 11),
            (tag::AICLK, 14),
            (tag::AXICLK, 15),
            (tag::ARCCLK, 16),
            (tag::ETH_FW_VERSION, 24),
            (tag::DM_APP_FW_VERSION, 26),
            (tag::DM_BL_FW_VERSION, 27),
            (tag::FLASH_BUNDLE_VERSION, 28),
            (tag::CM_FW_VERSION, 29),
            (tag::FAN_SPEED, 31),
            (tag::TIMER_HEARTBEAT, 32),
            (tag::FAN_RPM, 41),
            (tag::TDC_LIMIT_MAX, 55),
            (tag::THM_LIMIT_THROTTLE, 56),
            (tag::TT_FLASH_VERSION, 58),
            (tag::THERM_TRIP_COUNT, 60),
            (tag::ASIC_ID_HIGH, 61),
            (tag::AICLK_LIMIT_MAX, 63),
            (tag::TDP_LIMIT_MAX, 64),
        ];
        for (ours, theirs) in kmd {
            assert_eq!(ours, theirs);
        }
        // tt-umd TelemetryTag (the ones tt-kmd does not name).
        assert_eq!(tag::BOARD_ID_LOW, 2);
        assert_eq!(tag::GDDR_STATUS, 22);
        assert_eq!(tag::GDDR_SPEED, 23);
        assert_eq!(tag::ENABLED_TENSIX_COL, 34);
        assert_eq!(tag::ENABLED_GDDR, 36);
        assert_eq!(tag::PCIE_USAGE, 38);
        assert_eq!(tag::NOC_TRANSLATION, 40);
        assert_eq!(tag::INPUT_POWER, 54);
        assert_eq!(tag::ASIC_ID_LOW, 62);
    }

    #[test]
    fn smbus_indices_are_luwens_offsets() {
        // luwen chip/wormhole.rs get_telemetry: telemetry_struct_offset +
        // (n * 4) for each field.
        let luwen = [
            (smbus::BOARD_ID_HIGH, 4),
            (smbus::BOARD_ID_LOW, 5),
            (smbus::ARC0_FW_VERSION, 6),
            (smbus::ETH_FW_VERSION, 11),
            (smbus::M3_BL_FW_VERSION, 12),
            (smbus::M3_APP_FW_VERSION, 13),
            (smbus::DDR_STATUS, 14),
            (smbus::ARC3_HEALTH, 22),
            (smbus::FAN_SPEED, 23),
            (smbus::AICLK, 24),
            (smbus::VCORE, 28),
            (smbus::ASIC_TEMPERATURE, 29),
            (smbus::TDP, 32),
            (smbus::TDC, 33),
            (smbus::VDD_LIMITS, 34),
            (smbus::THM_LIMITS, 35),
            (smbus::WH_FW_DATE, 36),
            (smbus::TT_FLASH_VERSION, 46),
            (smbus::FW_BUNDLE_VERSION, 49),
        ];
        for (ours, theirs) in luwen {
            assert_eq!(ours, theirs);
        }
        assert_eq!(smbus::WORDS, 50);
    }

    #[test]
    fn default_boards_are_what_the_tools_call_them() {
        let n150 = Board::n150();
        let p150 = Board::p150a();
        assert_eq!(tt_smi_board_type(n150.board_id), "n150");
        assert_eq!(tt_smi_board_type(p150.board_id), "p150a");
        assert_eq!((n150.upi(), p150.upi()), (0x18, 0x40));
        assert_eq!(Board::for_arch(Arch::Wormhole), n150);
        assert_eq!(Board::for_arch(Arch::Blackhole), p150);
        // Bundles 18.x, as tt-flash's tuple.
        for b in [&n150, &p150] {
            let v = b.fw_bundle_version;
            assert_eq!((v >> 24, (v >> 16) & 0xFF), (18, 12));
        }
        // tt-umd's AICLK idle/busy values.
        assert_eq!((n150.aiclk_idle_mhz, n150.aiclk_busy_mhz), (500, 1000));
        assert_eq!((p150.aiclk_idle_mhz, p150.aiclk_busy_mhz), (800, 1350));
        // What tt-smi -s would print for the n150 when idle.
        let t = Telemetry::new(n150.clone());
        let live = idle(&n150);
        let w = |i| t.smbus_word(i, &live).unwrap();
        assert_eq!(f64::from(w(smbus::VCORE)) / 1000.0, 0.75);
        assert_eq!(w(smbus::TDP) & 0xFFFF, 14);
        assert_eq!(w(smbus::TDC) & 0xFFFF, 18);
        assert_eq!(f64::from(w(smbus::ASIC_TEMPERATURE) & 0xFFFF) / 16.0, 45.0);
        assert_eq!(w(smbus::AICLK) & 0xFFFF, 500);
        assert_eq!(w(smbus::THM_LIMITS) >> 16, 75);
        assert_eq!(w(smbus::THM_LIMITS) & 0xFFFF, 85);
        // hex_to_date: 2025-03-14 12:30.
        let d = w(smbus::WH_FW_DATE);
        assert_eq!(
            (
                (d >> 28) + 2020,
                (d >> 24) & 0xF,
                (d >> 16) & 0xFF,
                (d >> 8) & 0xFF,
                d & 0xFF
            ),
            (2025, 3, 14, 12, 30)
        );
        // The heartbeat tt-smi divides by 5.
        assert_eq!(w(smbus::ARC3_HEALTH), 123);
        assert_eq!(w(smbus::RT_SECONDS), 12);
    }

    #[test]
    fn tagged_table_layout() {
        for board in [Board::n150(), Board::p150a()] {
            let t = Telemetry::new(board.clone());
            let live = idle(&board);
            let base = t.table_addr();
            assert!(base >= CSM_BASE && t.data_addr() + 4 * t.entry_count() <= CSM_BASE + CSM_SIZE);
            // tt-kmd: major version ((v >> 16) & 0xFF) must be <= 1.
            let version = t.read(base, &live).unwrap();
            assert!((version >> 16) & 0xFF <= 1);
            assert_eq!(version, TELEMETRY_VERSION);
            let n = t.read(base + 4, &live).unwrap();
            assert_eq!(n as usize, t.tags().len());
            // luwen reads the data at table + 8 + 4 * entry_count.
            assert_eq!(t.data_addr(), base + 8 + 4 * n);
            let mut seen = Vec::new();
            for i in 0..n {
                let e = t.read(base + 8 + 4 * i, &live).unwrap();
                let (tag_id, offset) = (e as u16, e >> 16);
                assert!(offset < n);
                assert!(!seen.contains(&tag_id), "tag {tag_id} twice");
                seen.push(tag_id);
                let v = t.read(t.data_addr() + 4 * offset, &live).unwrap();
                assert_eq!(Some(v), t.tag_value(tag_id, &live));
            }
            // Past the data: not the table's.
            assert_eq!(t.read(t.data_addr() + 4 * n, &live), None);
            // Everything tt-kmd's hwmon and sysfs tables name for this arch.
            let kmd: &[u16] = match board.arch {
                Arch::Wormhole => &[
                    11, 56, 6, 9, 8, 55, 7, 64, 14, 15, 16, 1, 2, 28, 26, 58, 27, 29, 24, 61, 62,
                    32,
                ],
                Arch::Blackhole => &[
                    11, 56, 6, 9, 8, 55, 7, 64, 41, 14, 15, 16, 1, 2, 28, 26, 61, 62, 32, 60,
                ],
            };
            for k in kmd {
                assert!(seen.contains(k), "{:?} lacks tag {k}", board.arch);
            }
        }
    }

    #[test]
    fn busy_values_follow_the_power_state() {
        let b = Board::p150a();
        let t = Telemetry::new(b.clone());
        let busy = Live {
            busy: true,
            aiclk_mhz: 1350,
            uptime_ms: 0,
        };
        assert_eq!(t.tag_value(tag::AICLK, &busy), Some(1350));
        assert_eq!(t.tag_value(tag::TDP, &busy), Some(65));
        assert_eq!(
            t.tag_value(tag::ASIC_TEMPERATURE, &busy),
            Some((52 << 16) | 0x8000)
        );
        assert_eq!(t.tag_value(tag::TDP, &idle(&b)), Some(35));
        // tt-smi's convert_signed_16_16_to_float.
        let v = t.tag_value(tag::ASIC_TEMPERATURE, &idle(&b)).unwrap() as i32;
        assert_eq!(f64::from(v) / 65536.0, 45.0);
        assert_eq!(milli_to_16_16(-1500) as i32, -(3 << 15));
        // No SMBUS struct on Blackhole.
        assert_eq!(t.smbus_word(0, &busy), None);
        assert_eq!(t.smbus_addr(), None);
    }
}

// SPDX-License-Identifier: GPL-2.0
//! The ARC firmware as the host sees it: registers of the ARC tile, its CSM
//! memory, the message interfaces, and the telemetry it publishes.
//!
//! Addresses are what the NOC carries to the ARC tile (Wormhole (0, 10),
//! Blackhole (8, 0) on NOC0; tt-umd `ARC_CORES_NOC0`):
//!
//! | arch | range | what | source |
//! |------|-------|------|--------|
//! | WH | `0x8_1000_0000` + 512 KiB | CSM (ARC `0x1000_0000`) | tt-umd `ARC_CSM_OFFSET_NOC`; luwen `wormhole-axi-noc.bin` `ARC_CSM.DATA[0]` |
//! | WH | `0x8_2000_0000` + 512 KiB | CSM again | tt-umd's SMBUS reader reads `0x8_2007_8D60` |
//! | WH | `0x8_8000_0000` + 1 MiB | ARC APB: the reset unit at `+0x3_0000` | tt-umd `ARC_APB_NOC_XBAR_OFFSET_START`, `ARC_RESET_UNIT_OFFSET` |
//! | BH | `0x1000_0000` + 512 KiB | CSM | tt-kmd 2.10 `blackhole.c` `csm_read32` (NOC to (8, 0)) |
//! | BH | `0x8000_0000` + 1 MiB | ARC APB: reset unit `+0x3_0000`, MSI catcher `+0xB_0000` | tt-kmd `RESET_SCRATCH(n)`, `ARC_MSI_FIFO` |
//!
//! The ARC tile's NOC interface units (NIUs) are hardware, not firmware:
//! they sit in the APB window at `+0x5_0000` / `+0x5_8000` and again at the
//! tile's NIU base, and [`crate::noc`] answers them before a request gets
//! here (so they keep answering while the firmware hangs).
//!
//! Message interfaces:
//! - Wormhole scratch mailbox (tt-kmd `wormhole_send_arc_fw_message_with_args`,
//!   tt-umd `WormholeArcMessenger`, luwen `arc_msg.rs`): the host puts the
//!   arguments `arg0 | arg1 << 16` in `SCRATCH[3]`, `0xAA00 | code` in
//!   `SCRATCH[5]` and sets bit 16 (IRQ0) of `ARC_MISC_CNTL`. The firmware
//!   clears the bit, writes return values in `SCRATCH[3]` (and `SCRATCH[4]`)
//!   and `code | exit_code << 16` in `SCRATCH[5]`, or `0xFFFFFFFF` for a code
//!   it does not know. luwen's second mailbox is the same with `SCRATCH[2]`
//!   and `SCRATCH[4]`.
//! - Message queues (Blackhole: tt-zephyr-platforms `bh_arc/msgqueue.c`, used
//!   by tt-kmd 2.10 `msgqueue.c`, tt-umd `BlackholeArcMessageQueue`, luwen
//!   `blackhole/message.rs`; Wormhole: the one queue tt-kmd 2.10 uses for
//!   power settings): a control block `{u32 queues; u32 entries | count << 8}`
//!   and per queue a 32-byte header (host writes request wptr at +0 and
//!   response rptr at +4, firmware writes request rptr at +0x10, response
//!   wptr at +0x14, last serial at +0x18), `entries` 32-byte requests, then
//!   `entries` responses. Pointers wrap at twice the entry count. Doorbell:
//!   `ARC_MISC_CNTL` IRQ0, or on Blackhole a 0 pushed into the MSI catcher
//!   FIFO. A response's first word has the exit code in its low byte
//!   (`0xFF`: unknown message).
//!
//! Everything happens inside the doorbell write: the serving loop never waits
//! on the firmware.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::telemetry::{Board, Live, Telemetry, CSM_BASE, CSM_SIZE, WH_SMBUS_TELEMETRY_ADDR};
use crate::Arch;

/// Offsets inside the ARC APB window.
mod apb {
    /// The reset unit (tt-umd `ARC_RESET_UNIT_OFFSET`, both archs).
    pub const RESET_UNIT: u32 = 0x3_0000;
    /// `SCRATCH_0..7` (tt-kmd `SCRATCH_REG(n)` = 0x60 + 4n; luwen
    /// `ARC_RESET.SCRATCH[n]`; Blackhole `RESET_UNIT_SCRATCH_REG_ADDR`).
    pub const fn scratch(n: u32) -> u32 {
        RESET_UNIT + 0x60 + 4 * n
    }
    /// The reference clock counter (tt-umd `ARC_RESET_REFCLK_LOW_OFFSET`,
    /// `_HIGH_`).
    pub const REFCLK_LOW: u32 = RESET_UNIT + 0xE0;
    pub const REFCLK_HIGH: u32 = RESET_UNIT + 0xE4;
    /// `ARC_MISC_CNTL`; bit 16 (Blackhole: bits 16..19, `irq0_trig`) rings
    /// the firmware (tt-kmd `ARC_MISC_CNTL_IRQ0_MASK`; zephyr msgqueue.c).
    pub const ARC_MISC_CNTL: u32 = RESET_UNIT + 0x100;
    /// Wormhole firmware reuses NIU node-id registers of the reset unit to
    /// publish pointers (tt-kmd `ARC_TELEMETRY_PTR`/`_DATA`, `ARC_MSG_QCB_PTR`;
    /// tt-umd `NOC_NODEID_X_0`/`Y_0`).
    pub const WH_TELEMETRY_PTR: u32 = RESET_UNIT + 0x1D0;
    pub const WH_TELEMETRY_DATA: u32 = RESET_UNIT + 0x1D4;
    pub const WH_MSG_QCB_PTR: u32 = RESET_UNIT + 0x1D8;
    /// Blackhole `SCRATCH_RAM[0..63]` (zephyr `status_reg.h`).
    pub const fn scratch_ram(n: u32) -> u32 {
        RESET_UNIT + 0x400 + 4 * n
    }
    /// Blackhole boot-time GPIO strap state (zephyr `telemetry.c`
    /// `RESET_UNIT_STRAP_REGISTERS_L_REG_ADDR`; tt-flash reads bit 6).
    pub const BH_STRAP_L: u32 = RESET_UNIT + 0xD20;
    /// Blackhole MSI catcher: FIFO, flush and status (zephyr msgqueue.c
    /// `MSI_CATCHER_BASE` = APB + 0xB0000).
    pub const BH_MSI_FIFO: u32 = 0xB_0000;
    pub const BH_MSI_FLUSH: u32 = 0xB_0004;
    pub const BH_MSI_STATUS: u32 = 0xB_0008;
}

/// Post codes in `SCRATCH[0]` (luwen `check_arc_msg_safe`, tt-umd
/// `wait_arc_core_start`; tt-kmd only looks for the `0xC0DE` prefix).
const POST_CODE_INIT_DONE: u32 = 0xC0DE_0001;
const POST_CODE_ARC_MSG_HANDLE_DONE: u32 = 0xC0DE_003F;
/// Blackhole writes `0xC0DE << 16 | fw_id << 14 | code`; between messages it
/// mostly sits at the end of a telemetry refresh (zephyr `post_code.h`
/// `POST_CODE_TELEMETRY_END`).
const BH_POST_CODE_TELEMETRY_END: u32 = 0xC0DE_0041;
/// Wormhole `SCRATCH[5]` once booted: "boot complete (new FW only)" for
/// luwen, `STATUS_INIT_DONE_1` for tt-umd.
const WH_STATUS_BOOT_DONE: u32 = 0x0000_0001;
/// Wormhole message codes arrive as `0xAA00 | code` (tt-kmd
/// `WH_FW_MESSAGE_PRESENT`, tt-umd `ARC_MSG_COMMON_PREFIX`).
const WH_MESSAGE_PRESENT: u32 = 0xAA00;
/// Blackhole `BOOT_STATUS0`: `msg_queue_ready` (bit 0) and
/// `hw_init_status` = 2, done (bits 1..2); tt-umd waits for `& 7 == 5`,
/// tt-kmd for bit 0, luwen for both.
const BH_BOOT_STATUS_READY: u32 = 0x5;
/// Queue geometry of the Blackhole firmware (zephyr `msgqueue.h`
/// `NUM_MSG_QUEUES`, `MSG_QUEUE_SIZE`); the Wormhole queue is given the same
/// entry count.
const BH_NUM_QUEUES: u32 = 4;
const QUEUE_ENTRIES: u32 = 4;
const QUEUE_HEADER_BYTES: u32 = 32;
const QUEUE_ENTRY_BYTES: u32 = 32;
const QUEUE_BYTES: u32 = QUEUE_HEADER_BYTES + 2 * QUEUE_ENTRIES * QUEUE_ENTRY_BYTES;
/// Where this firmware keeps its queue control block and queues (clients
/// follow the published pointer). Wormhole publishes the queue base as an
/// offset from the CSM base (tt-kmd adds `ARC_CSM_BASE`); Blackhole as an
/// address (tt-kmd, tt-umd and luwen use it as is).
const WH_QCB_ADDR: u32 = 0x1007_6F00;
const WH_QUEUE_ADDR: u32 = 0x1007_6000;
const BH_QCB_ADDR: u32 = 0x1000_1000;
const BH_QUEUES_ADDR: u32 = 0x1000_1100;
/// Where [`ArcFirmware::move_queues`] puts the queues instead (and back):
/// free CSM after the default place, before the control block and the
/// telemetry.
const QUEUES_MOVED_BY: u32 = 0x800;
/// Response status for an unknown message (zephyr `MSG_ERROR_REPLY`).
const QUEUE_STATUS_UNKNOWN: u32 = 0xFF;
/// The firmware's answer to `REPORT_SCRATCH_ONLY`
/// (`MESSAGE_QUEUE_STATUS_SCRATCH_ONLY`).
const QUEUE_STATUS_SCRATCH_ONLY: u32 = 0xFE;
/// Reference clock rates: Wormhole 27 MHz, Blackhole 50 MHz (the boards'
/// crystals; only differences and restarts are observed by clients).
const WH_REFCLK_HZ: u64 = 27_000_000;
const BH_REFCLK_HZ: u64 = 50_000_000;
/// Messages kept in the log before the oldest half is dropped.
const LOG_LIMIT: usize = 4096;

/// Message codes the firmware acts on.
pub mod msg {
    // Wormhole, scratch mailbox (tt-umd `wormhole::arc_message_type`; luwen
    // `TypedArcMsg::msg_code`; tt-kmd 2.10 `wormhole.c` `WH_FW_MSG_*`).
    pub const NOP: u8 = 0x11;
    pub const GET_SMBUS_TELEMETRY_ADDR: u8 = 0x2C;
    pub const GET_AICLK: u8 = 0x34;
    pub const TRIGGER_SPI_COPY_LTOR: u8 = 0x50;
    pub const PCIE_INDEX: u8 = 0x51;
    pub const GO_BUSY: u8 = 0x52;
    pub const GO_SHORT_IDLE: u8 = 0x53;
    pub const GO_LONG_IDLE: u8 = 0x54;
    pub const GO_TO_SLEEP: u8 = 0x55;
    pub const TRIGGER_RESET: u8 = 0x56;
    pub const GET_HARVESTING: u8 = 0x57;
    pub const SET_ETH_DRAM_TRAINED_STATUS: u8 = 0x58;
    pub const TEST: u8 = 0x90;
    pub const SETUP_IATU_FOR_PEER_TO_PEER: u8 = 0x97;
    pub const ASTATE0: u8 = 0xA0;
    pub const ASTATE1: u8 = 0xA1;
    pub const ASTATE3: u8 = 0xA3;
    pub const ASTATE5: u8 = 0xA5;
    pub const TOGGLE_TENSIX_RESET: u8 = 0xAF;
    /// Wormhole: retrain the PCIe link to the speed in arg0 (tt-kmd 2.10
    /// pcie.c `FW_MSG_PCIE_RETRAIN`, sent at probe by
    /// `wormhole_complete_pcie_init`, which takes exit code 0 as success).
    pub const PCIE_RETRAIN: u8 = 0xB6;
    pub const CURR_DATE: u8 = 0xB7;
    pub const FW_VERSION: u8 = 0xB9;
    pub const DEASSERT_RISCV_RESET: u8 = 0xBA;
    pub const RESET_SAFE_CLKS: u8 = 0xBB;
    pub const UPDATE_M3_AUTO_RESET_TIMEOUT: u8 = 0xBC;
    /// Wormhole queue: power setting (tt-kmd 2.10 `wormhole.c`
    /// `ARC_MSG_TYPE_POWER_SETTING`).
    pub const WH_POWER_SETTING: u8 = 0xC0;
    // Blackhole queue (zephyr `smc_msg.h` `TT_SMC_MSG_*`).
    pub const REPORT_SCRATCH_ONLY: u8 = 0x16;
    pub const REINIT_TENSIX: u8 = 0x20;
    pub const BH_POWER_SETTING: u8 = 0x21;
    pub const FORCE_AICLK: u8 = 0x33;
    pub const SET_LAST_SERIAL: u8 = 0xBE;
    pub const PING_DM: u8 = 0xC0;
    pub const SET_WDT_TIMEOUT: u8 = 0xC1;
    pub const FLASH_UNLOCK: u8 = 0xC2;
    pub const FLASH_LOCK: u8 = 0xC3;
    pub const CONFIRM_FLASHED_SPI: u8 = 0xC4;
}

/// How long after a `TRIGGER_RESET` the chip resets: the Blackhole firmware
/// answers first and resets from a 5 ms timer (zephyr `cm2dm_msg.c`
/// `reset_dm_handler`). The same is assumed for Wormhole, whose callers
/// (tt-umd's legacy warm reset) also wait for the answer.
pub const RESET_DELAY: Duration = Duration::from_millis(5);

/// Which reset `TRIGGER_RESET` asked for: level 3 also resets the board
/// management controller (tt-kmd 2.10 `reset_arg` 3 for
/// `ASIC_DMC_RESET`; zephyr `trigger_reset_rqst`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetLevel {
    Asic,
    AsicAndDmc,
}

/// A chip reset the firmware has set in motion. The card performs it (PCIe
/// link, config space, TLBs, then [`ArcFirmware::reset`]) once `due` has
/// passed; check on every access rather than sleeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResetRequest {
    pub level: ResetLevel,
    pub due: Instant,
}

/// How a message reached the firmware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Channel {
    /// Wormhole mailbox: the `SCRATCH` register that held the code (5, or 2
    /// for luwen's second mailbox).
    Scratch { mailbox: u8 },
    /// A message queue: Blackhole 0..3 (tt-kmd uses 0, luwen 2, tt-umd 3),
    /// Wormhole's single queue 0.
    Queue { index: u8 },
}

impl std::fmt::Display for Channel {
    /// `queueN` or `mailboxN` (N: the queue's index, the mailbox's
    /// message register), as the control socket names them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Channel::Queue { index } => write!(f, "queue{index}"),
            Channel::Scratch { mailbox } => write!(f, "mailbox{mailbox}"),
        }
    }
}

/// One message the firmware processed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArcMessage {
    pub channel: Channel,
    /// The message id (without Wormhole's `0xAA00`).
    pub code: u8,
    /// Scratch: `[SCRATCH[msg], SCRATCH[arg], 0, ..]` as the host left them;
    /// queue: the request entry.
    pub request: [u32; 8],
    /// Scratch: `[SCRATCH[msg], SCRATCH[arg], SCRATCH[4], 0, ..]` as the
    /// firmware left them; queue: the response entry.
    pub response: [u32; 8],
}

impl ArcMessage {
    /// The two 16-bit arguments of a mailbox message.
    pub fn args(&self) -> (u16, u16) {
        (self.request[1] as u16, (self.request[1] >> 16) as u16)
    }

    /// Whether the sender would call it a success: mailbox status
    /// `code | 0 << 16`; queue response word 0 equal to 0 (tt-kmd's test).
    pub fn succeeded(&self) -> bool {
        match self.channel {
            Channel::Scratch { .. } => self.response[0] == u32::from(self.code),
            Channel::Queue { .. } => self.response[0] == 0,
        }
    }

    /// The power setting a power-setting message carried (Wormhole queue
    /// 0xC0, Blackhole 0x21).
    pub fn power_setting(&self) -> Option<PowerSetting> {
        match (self.channel, self.code) {
            (Channel::Queue { .. }, msg::WH_POWER_SETTING | msg::BH_POWER_SETTING) => {
                Some(PowerSetting::decode(&self.request))
            }
            _ => None,
        }
    }
}

/// A power-setting request: header `code | validity << 8 | flags << 16`
/// and 14 settings in the next 7 words (tt-kmd 2.10
/// `*_set_power_state`; zephyr `power_setting_rqst`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PowerSetting {
    /// How many of the low flag bits are meant (validity bits 0..3).
    pub flags_valid: u8,
    /// How many settings are meant (validity bits 4..7).
    pub settings_valid: u8,
    /// Bit 0 max AICLK, 1 MRISC PHY awake, 2 Tensix enabled, 3 L2CPU
    /// enabled (tt-kmd `TT_POWER_FLAG_*`).
    pub flags: u16,
    pub settings: [u16; 14],
}

impl PowerSetting {
    pub const MAX_AI_CLK: u16 = 1 << 0;
    pub const MRISC_PHY_WAKEUP: u16 = 1 << 1;
    pub const TENSIX_ENABLE: u16 = 1 << 2;
    pub const L2CPU_ENABLE: u16 = 1 << 3;

    pub fn decode(words: &[u32; 8]) -> Self {
        let mut settings = [0u16; 14];
        for (i, s) in settings.iter_mut().enumerate() {
            let w = words[1 + i / 2];
            *s = if i % 2 == 0 {
                w as u16
            } else {
                (w >> 16) as u16
            };
        }
        PowerSetting {
            flags_valid: ((words[0] >> 8) & 0xF) as u8,
            settings_valid: ((words[0] >> 12) & 0xF) as u8,
            flags: (words[0] >> 16) as u16,
            settings,
        }
    }
}

/// The firmware's power state, as the messages left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerState {
    /// The last of GO_BUSY (true) and GO_*_IDLE (false).
    pub go_busy: bool,
    /// Power flags as applied by power settings (only the valid bits of
    /// each change).
    pub flags: u16,
    pub settings: [u16; 14],
    /// ASIC state from `ASTATEn` (0 after boot).
    pub asic_state: u8,
    /// Frequency forced with FORCE_AICLK (Blackhole), 0 when not forced.
    pub forced_aiclk_mhz: u32,
}

impl PowerState {
    fn boot() -> Self {
        PowerState {
            go_busy: false,
            flags: 0,
            settings: [0; 14],
            asic_state: 0,
            forced_aiclk_mhz: 0,
        }
    }

    /// AICLK runs at its maximum when either a GO_BUSY or the power flag
    /// asks for it (zephyr `aiclk_update_busy`).
    pub fn aiclk_busy(&self) -> bool {
        self.go_busy || self.flags & PowerSetting::MAX_AI_CLK != 0
    }
}

/// What a mailbox handler answers.
struct Reply {
    exit: u16,
    ret: Option<u32>,
    ret1: Option<u32>,
}

impl Reply {
    fn ok() -> Self {
        Reply {
            exit: 0,
            ret: None,
            ret1: None,
        }
    }

    fn value(v: u32) -> Self {
        Reply {
            exit: 0,
            ret: Some(v),
            ret1: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Region {
    Csm(u32),
    Apb(u32),
}

/// The emulated ARC firmware of one chip.
pub struct ArcFirmware {
    arch: Arch,
    telemetry: Telemetry,
    /// CSM, one word per 4 bytes (the telemetry structures overlay it).
    csm: Vec<u32>,
    /// APB registers as last written (or as the firmware set them).
    apb: BTreeMap<u32, u32>,
    booted: Instant,
    /// Time spent hung since boot, and since when it is hung now.
    hung_total: Duration,
    hung_since: Option<Instant>,
    asleep: bool,
    power: PowerState,
    /// Entries in the Blackhole MSI catcher FIFO, and whether one was 0
    /// (the message-queue doorbell).
    msi_entries: u32,
    msi_doorbell: bool,
    msi_overflow: bool,
    pending_reset: Option<ResetRequest>,
    log: Vec<ArcMessage>,
    /// Power-setting messages received since the emulator started, and the
    /// last one: what a host's power policy sent, kept across chip resets
    /// so a test can tell a reset from a missing message.
    power_settings_received: u64,
    last_power_setting: Option<PowerSetting>,
    /// TEST messages answered per channel since the emulator started
    /// (kept across chip resets and never trimmed, unlike the log): which
    /// channel each client really uses, for the coexistence tests.
    tests_answered: BTreeMap<Channel, u64>,
    /// How long after its doorbell the firmware gets to the message
    /// queues (`arc-slow`), and when it will: a slow firmware answers on
    /// the first access after that time (nothing here sleeps).
    queue_latency: Duration,
    queue_due: Option<Instant>,
    /// The ARC address of the (first) message queue, which the control
    /// block publishes: the default place, or elsewhere after
    /// [`ArcFirmware::move_queues`].
    queues_addr: u32,
}

impl ArcFirmware {
    /// A booted firmware on the arch's default board ([`Board::for_arch`]).
    pub fn new(arch: Arch) -> Self {
        Self::with_board(Board::for_arch(arch))
    }

    /// A booted firmware on a given board.
    pub fn with_board(board: Board) -> Self {
        let arch = board.arch;
        let mut fw = ArcFirmware {
            arch,
            telemetry: Telemetry::new(board),
            csm: vec![0; (CSM_SIZE / 4) as usize],
            apb: BTreeMap::new(),
            booted: Instant::now(),
            hung_total: Duration::ZERO,
            hung_since: None,
            asleep: false,
            power: PowerState::boot(),
            msi_entries: 0,
            msi_doorbell: false,
            msi_overflow: false,
            pending_reset: None,
            log: Vec::new(),
            power_settings_received: 0,
            last_power_setting: None,
            tests_answered: BTreeMap::new(),
            queue_latency: Duration::ZERO,
            queue_due: None,
            queues_addr: 0,
        };
        fw.boot();
        fw
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    pub fn board(&self) -> &Board {
        self.telemetry.board()
    }

    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    pub fn power_state(&self) -> PowerState {
        self.power
    }

    /// The AICLK frequency the firmware runs now, MHz.
    pub fn aiclk_mhz(&self) -> u32 {
        let b = self.board();
        if self.power.forced_aiclk_mhz != 0 {
            self.power.forced_aiclk_mhz
        } else if self.power.aiclk_busy() {
            b.aiclk_busy_mhz
        } else {
            b.aiclk_idle_mhz
        }
    }

    /// What the sensors read now (frozen while the firmware is hung).
    pub fn live(&self) -> Live {
        let now = Instant::now();
        let mut hung = self.hung_total;
        if let Some(since) = self.hung_since {
            hung += now.saturating_duration_since(since);
        }
        let up = now
            .saturating_duration_since(self.booted)
            .saturating_sub(hung);
        Live {
            busy: self.power.aiclk_busy()
                || self.power.forced_aiclk_mhz > self.board().aiclk_idle_mhz,
            aiclk_mhz: self.aiclk_mhz(),
            uptime_ms: up.as_millis() as u64,
        }
    }

    pub fn responding(&self) -> bool {
        self.hung_since.is_none()
    }

    /// Fault: the firmware gets to its message queues `latency` after
    /// their doorbell rings (zero: at once, the default). Mailbox messages
    /// are still answered at once. Survives resets, as a hang does.
    pub fn set_queue_latency(&mut self, latency: Duration) {
        self.queue_latency = latency;
        // Anything waiting for a slow firmware is served now.
        if latency.is_zero() && self.queue_due.take().is_some() && self.responding() {
            self.process_queues();
        }
    }

    pub fn queue_latency(&self) -> Duration {
        self.queue_latency
    }

    /// Serves the message queues if a slow firmware's time for it has come.
    fn tick(&mut self) {
        match self.queue_due {
            Some(due) if Instant::now() >= due && self.responding() => {
                self.queue_due = None;
                self.process_queues();
            }
            _ => {}
        }
    }

    /// Read a word of the ARC tile; `addr` as the NOC carries it (low two
    /// bits ignored). None: nothing of the ARC tile answers there.
    pub fn read32(&mut self, addr: u64) -> Option<u32> {
        self.tick();
        match decode(self.arch, addr & !3)? {
            Region::Csm(off) => Some(self.csm_read(CSM_BASE + off)),
            Region::Apb(off) => Some(self.apb_read(off)),
        }
    }

    /// Write a word of the ARC tile. Returns false if nothing is there.
    pub fn write32(&mut self, addr: u64, value: u32) -> bool {
        self.tick();
        match decode(self.arch, addr & !3) {
            Some(Region::Csm(off)) => {
                self.csm_write(CSM_BASE + off, value);
                true
            }
            Some(Region::Apb(off)) => {
                self.apb_write(off, value);
                true
            }
            None => false,
        }
    }

    /// Chip reset: the firmware reboots. What the boot leaves:
    /// - CSM cleared, then the telemetry structures, the queue control block
    ///   and empty queues (all pointers 0) in place;
    /// - Wormhole: `SCRATCH[0]` = 0xC0DE0001 (init done), `SCRATCH[5]` = 1,
    ///   the other scratch registers 0; telemetry table / data / queue
    ///   control block pointers at reset unit +0x1D0 / +0x1D4 / +0x1D8;
    /// - Blackhole: `SCRATCH[0]` = 0xC0DE0041, `SCRATCH_RAM[0]` = the CM
    ///   firmware version, `[2]` (boot status) = 5, `[11]` = queue control
    ///   block, `[12]` = telemetry data, `[13]` = telemetry table;
    /// - `ARC_MISC_CNTL` 0, power state idle (AICLK at its idle
    ///   frequency), ASIC state 0, the reference clock and the telemetry
    ///   heartbeat restarted from 0, no reset pending.
    ///
    /// What survives: the message log (the emulator's, not the chip's) and
    /// a hang set with [`ArcFirmware::set_responding`]: that is a fault
    /// injected into the card, which only `set_responding(true)` lifts, so
    /// a reset of a card with a dead ARC stays unanswered as on hardware.
    pub fn reset(&mut self) {
        self.boot();
    }

    /// Fault: `false` makes the firmware stop answering. Doorbells stay
    /// rung and requests stay queued (Wormhole `SCRATCH[5]` keeps
    /// `0xAA00 | code`, `ARC_MISC_CNTL` bit 16 stays set), and telemetry
    /// stops updating; registers and CSM still read and write (the ARC's
    /// CPU is stuck, not its bus). The state survives [`ArcFirmware::reset`].
    /// `true` resumes; anything rung meanwhile is then processed.
    pub fn set_responding(&mut self, on: bool) {
        let now = Instant::now();
        match (on, self.hung_since) {
            (false, None) => self.hung_since = Some(now),
            (true, Some(since)) => {
                self.hung_total += now.saturating_duration_since(since);
                self.hung_since = None;
                let misc = self.apb_get(apb::ARC_MISC_CNTL);
                if misc & self.irq0_mask() != 0 || self.msi_doorbell {
                    self.doorbell();
                }
            }
            _ => {}
        }
    }

    /// The messages processed so far (the newest 4096 at most).
    pub fn messages(&self) -> &[ArcMessage] {
        &self.log
    }

    /// How many TEST messages the firmware answered on each of its
    /// channels since the emulator started, every channel of the arch
    /// listed (Wormhole: its queue and both mailboxes; Blackhole: its four
    /// queues), in that order.
    pub fn tests_answered(&self) -> Vec<(Channel, u64)> {
        let channels: &[Channel] = match self.arch {
            Arch::Wormhole => &[
                Channel::Queue { index: 0 },
                Channel::Scratch { mailbox: 5 },
                Channel::Scratch { mailbox: 2 },
            ],
            Arch::Blackhole => &[
                Channel::Queue { index: 0 },
                Channel::Queue { index: 1 },
                Channel::Queue { index: 2 },
                Channel::Queue { index: 3 },
            ],
        };
        channels
            .iter()
            .map(|c| (*c, self.tests_answered.get(c).copied().unwrap_or(0)))
            .collect()
    }

    /// How many power-setting messages arrived, and the last of them.
    pub fn power_settings(&self) -> (u64, Option<PowerSetting>) {
        (self.power_settings_received, self.last_power_setting)
    }

    /// A reset the firmware has started and the card has yet to carry out.
    pub fn pending_reset(&self) -> Option<ResetRequest> {
        self.pending_reset
    }

    /// Wormhole: whether tt-kmd has routed the PCIe tile's outbound reads
    /// and writes to its DBI (config) space, by writing `DBI_ENABLE`
    /// (bit 21) into `SCRATCH[6]`/`[7]` (`PCIE_ARMISC_INFO_REG`,
    /// `PCIE_AWMISC_INFO_REG`; tt-kmd 2.10 `open_dbi`). The NOC model needs it
    /// to send NOC accesses at 0x8_0000_0000 of the PCIe tile to the DBI.
    pub fn wh_dbi_enabled(&self) -> (bool, bool) {
        const DBI_ENABLE: u32 = 0x0020_0000;
        (
            self.apb_get(apb::scratch(6)) & DBI_ENABLE != 0,
            self.apb_get(apb::scratch(7)) & DBI_ENABLE != 0,
        )
    }

    /// Fault: the firmware's message queues move elsewhere in CSM, as they
    /// may after a reboot into another firmware build that the host did
    /// not see: the control block (at the same address) then publishes
    /// empty queues at another address, and the old queues are cleared,
    /// with whatever they held. Moving again puts them back at their
    /// default place. Returns the new ARC address of the first queue.
    pub fn move_queues(&mut self) -> u32 {
        let default = self.default_queues_addr();
        let (count, qcb) = match self.arch {
            Arch::Wormhole => (1, WH_QCB_ADDR),
            Arch::Blackhole => (BH_NUM_QUEUES, BH_QCB_ADDR),
        };
        let old = self.queues_addr;
        let new = if old == default {
            default + QUEUES_MOVED_BY
        } else {
            default
        };
        for addr in (old..old + count * QUEUE_BYTES).step_by(4) {
            self.csm_set(addr, 0);
        }
        for addr in (new..new + count * QUEUE_BYTES).step_by(4) {
            self.csm_set(addr, 0);
        }
        self.queues_addr = new;
        let published = match self.arch {
            Arch::Wormhole => new - CSM_BASE,
            Arch::Blackhole => new,
        };
        self.csm_set(qcb, published);
        new
    }

    fn default_queues_addr(&self) -> u32 {
        match self.arch {
            Arch::Wormhole => WH_QUEUE_ADDR,
            Arch::Blackhole => BH_QUEUES_ADDR,
        }
    }

    fn boot(&mut self) {
        self.csm.iter_mut().for_each(|w| *w = 0);
        self.queue_due = None;
        self.queues_addr = self.default_queues_addr();
        self.apb.clear();
        self.booted = Instant::now();
        self.hung_total = Duration::ZERO;
        self.hung_since = self.hung_since.map(|_| self.booted);
        self.asleep = false;
        self.power = PowerState::boot();
        self.msi_entries = 0;
        self.msi_doorbell = false;
        self.msi_overflow = false;
        self.pending_reset = None;
        let table = self.telemetry.table_addr();
        let data = self.telemetry.data_addr();
        match self.arch {
            Arch::Wormhole => {
                self.apb.insert(apb::scratch(0), POST_CODE_INIT_DONE);
                self.apb.insert(apb::scratch(5), WH_STATUS_BOOT_DONE);
                self.apb.insert(apb::WH_TELEMETRY_PTR, table);
                self.apb.insert(apb::WH_TELEMETRY_DATA, data);
                self.apb.insert(apb::WH_MSG_QCB_PTR, WH_QCB_ADDR);
                self.csm_set(WH_QCB_ADDR, WH_QUEUE_ADDR - CSM_BASE);
                self.csm_set(WH_QCB_ADDR + 4, QUEUE_ENTRIES | (1 << 8));
            }
            Arch::Blackhole => {
                let cm = self.board().cm_fw_version;
                self.apb.insert(apb::scratch(0), BH_POST_CODE_TELEMETRY_END);
                self.apb.insert(apb::scratch_ram(0), cm);
                self.apb.insert(apb::scratch_ram(2), BH_BOOT_STATUS_READY);
                self.apb.insert(apb::scratch_ram(11), BH_QCB_ADDR);
                self.apb.insert(apb::scratch_ram(12), data);
                self.apb.insert(apb::scratch_ram(13), table);
                self.apb.insert(apb::BH_STRAP_L, 0);
                self.csm_set(BH_QCB_ADDR, BH_QUEUES_ADDR);
                self.csm_set(BH_QCB_ADDR + 4, QUEUE_ENTRIES | (BH_NUM_QUEUES << 8));
            }
        }
    }

    fn irq0_mask(&self) -> u32 {
        match self.arch {
            Arch::Wormhole => 1 << 16,
            Arch::Blackhole => 0xF << 16,
        }
    }

    fn apb_get(&self, off: u32) -> u32 {
        self.apb.get(&off).copied().unwrap_or(0)
    }

    fn apb_read(&mut self, off: u32) -> u32 {
        match off {
            apb::REFCLK_LOW => self.refclk() as u32,
            apb::REFCLK_HIGH => (self.refclk() >> 32) as u32,
            apb::BH_MSI_STATUS if self.arch == Arch::Blackhole => {
                // msi_ready (can accept a push), msi_intr (non-empty),
                // msi_ovfl.
                u32::from(self.msi_entries < 64)
                    | (u32::from(self.msi_entries > 0) << 8)
                    | (u32::from(self.msi_overflow) << 9)
            }
            apb::BH_MSI_FIFO | apb::BH_MSI_FLUSH if self.arch == Arch::Blackhole => {
                // Popping is the firmware's business; a host read empties
                // nothing it could see.
                0
            }
            _ => self.apb_get(off),
        }
    }

    fn apb_write(&mut self, off: u32, value: u32) {
        match off {
            apb::REFCLK_LOW | apb::REFCLK_HIGH => {}
            apb::ARC_MISC_CNTL => {
                self.apb.insert(off, value);
                if value & self.irq0_mask() != 0 {
                    self.doorbell();
                }
            }
            apb::BH_MSI_FIFO if self.arch == Arch::Blackhole => {
                if self.msi_entries >= 64 {
                    self.msi_overflow = true;
                } else {
                    self.msi_entries += 1;
                    self.msi_doorbell |= value == 0;
                }
                // The firmware drains the FIFO; only a 0 means "look at the
                // message queues" (`msgqueue_msi_interrupt_handler`).
                if self.msi_doorbell {
                    self.doorbell();
                } else if self.responding() {
                    self.msi_entries = 0;
                }
            }
            apb::BH_MSI_FLUSH | apb::BH_MSI_STATUS if self.arch == Arch::Blackhole => {}
            _ => {
                self.apb.insert(off, value);
            }
        }
    }

    fn refclk(&self) -> u64 {
        let hz = match self.arch {
            Arch::Wormhole => WH_REFCLK_HZ,
            Arch::Blackhole => BH_REFCLK_HZ,
        };
        let ns = Instant::now()
            .saturating_duration_since(self.booted)
            .as_nanos() as u64;
        ((u128::from(ns) * u128::from(hz)) / 1_000_000_000) as u64
    }

    fn csm_get(&self, arc_addr: u32) -> u32 {
        let i = (arc_addr.wrapping_sub(CSM_BASE) / 4) as usize;
        self.csm.get(i).copied().unwrap_or(0)
    }

    fn csm_set(&mut self, arc_addr: u32, value: u32) {
        let i = (arc_addr.wrapping_sub(CSM_BASE) / 4) as usize;
        if let Some(w) = self.csm.get_mut(i) {
            *w = value;
        }
    }

    fn csm_read(&self, arc_addr: u32) -> u32 {
        let live = self.live();
        self.telemetry
            .read(arc_addr, &live)
            .unwrap_or_else(|| self.csm_get(arc_addr))
    }

    fn csm_write(&mut self, arc_addr: u32, value: u32) {
        // The firmware rewrites its telemetry every refresh.
        if !self.telemetry.covers(arc_addr) {
            self.csm_set(arc_addr, value);
        }
    }

    /// The firmware's interrupt: take every message waiting.
    fn doorbell(&mut self) {
        if !self.responding() || self.asleep {
            return;
        }
        if self.arch == Arch::Wormhole {
            self.wh_mailbox(5, 3);
            self.wh_mailbox(2, 4);
        }
        if self.queue_latency.is_zero() {
            self.process_queues();
        } else if self.queue_due.is_none() {
            self.queue_due = Some(Instant::now() + self.queue_latency);
        }
        if self.arch == Arch::Blackhole {
            self.msi_entries = 0;
            self.msi_doorbell = false;
        }
        let misc = self.apb_get(apb::ARC_MISC_CNTL) & !self.irq0_mask();
        self.apb.insert(apb::ARC_MISC_CNTL, misc);
    }

    fn process_queues(&mut self) {
        if self.asleep {
            return;
        }
        match self.arch {
            Arch::Wormhole => self.process_queue(self.queues_addr, 0),
            Arch::Blackhole => {
                for q in 0..BH_NUM_QUEUES {
                    self.process_queue(self.queues_addr + q * QUEUE_BYTES, q as u8);
                }
            }
        }
    }

    fn wh_mailbox(&mut self, msg_reg: u32, arg_reg: u32) {
        let code_word = self.apb_get(apb::scratch(msg_reg));
        if code_word & 0xFFFF_FF00 != WH_MESSAGE_PRESENT {
            return;
        }
        let code = code_word as u8;
        let arg = self.apb_get(apb::scratch(arg_reg));
        let status = match self.wh_handle(code, arg as u16, (arg >> 16) as u16) {
            Some(reply) => {
                if let Some(v) = reply.ret {
                    self.apb.insert(apb::scratch(arg_reg), v);
                }
                if let (Some(v), 5) = (reply.ret1, msg_reg) {
                    self.apb.insert(apb::scratch(4), v);
                }
                u32::from(code) | (u32::from(reply.exit) << 16)
            }
            None => 0xFFFF_FFFF,
        };
        self.apb.insert(apb::scratch(msg_reg), status);
        self.apb
            .insert(apb::scratch(0), POST_CODE_ARC_MSG_HANDLE_DONE);
        let mut request = [0u32; 8];
        request[0] = code_word;
        request[1] = arg;
        let mut response = [0u32; 8];
        response[0] = status;
        response[1] = self.apb_get(apb::scratch(arg_reg));
        response[2] = self.apb_get(apb::scratch(4));
        self.record(ArcMessage {
            channel: Channel::Scratch {
                mailbox: msg_reg as u8,
            },
            code,
            request,
            response,
        });
    }

    /// Wormhole mailbox messages. Answers follow the callers' expectations:
    /// tt-umd `WormholeTTDevice` (`GET_AICLK` returns MHz in RES0,
    /// `GET_HARVESTING` the mask), luwen (`GET_SMBUS_TELEMETRY_ADDR` an ARC
    /// address in CSM), tt-flash `get_bundle_version_v1` (`FW_VERSION` with
    /// arg 0 the ARC firmware, 1 the running bundle, 2 the one in SPI).
    /// None: not a message this firmware knows.
    fn wh_handle(&mut self, code: u8, arg0: u16, arg1: u16) -> Option<Reply> {
        let board = self.board().clone();
        Some(match code {
            msg::NOP => Reply::ok(),
            // No client checks the answer; the Blackhole firmware's
            // `handle_test` returns the argument plus one, so does this.
            msg::TEST => Reply::value((u32::from(arg0) | (u32::from(arg1) << 16)).wrapping_add(1)),
            msg::GET_SMBUS_TELEMETRY_ADDR => Reply::value(WH_SMBUS_TELEMETRY_ADDR),
            msg::GET_AICLK => Reply::value(self.aiclk_mhz()),
            msg::GO_BUSY => {
                self.power.go_busy = true;
                Reply::ok()
            }
            msg::GO_SHORT_IDLE | msg::GO_LONG_IDLE => {
                self.power.go_busy = false;
                Reply::ok()
            }
            msg::GO_TO_SLEEP => {
                // luwen reads `SCRATCH[5] == 0x55` as "ARC is asleep"; it stays
                // so until the chip is reset.
                self.asleep = true;
                Reply::ok()
            }
            msg::TRIGGER_RESET => {
                let level = if arg0 == 3 {
                    ResetLevel::AsicAndDmc
                } else {
                    ResetLevel::Asic
                };
                self.schedule_reset(level);
                Reply::ok()
            }
            msg::GET_HARVESTING => Reply::value(board.tensix_harvesting),
            msg::FW_VERSION => Reply::value(match arg0 {
                0 | 0xFFFF => board.cm_fw_version,
                1 | 2 => board.fw_bundle_version,
                _ => 0xFFFF_FFFF,
            }),
            msg::ASTATE0 | msg::ASTATE1 | msg::ASTATE3 | msg::ASTATE5 => {
                self.power.asic_state = code - msg::ASTATE0;
                Reply::ok()
            }
            // The emulated link is always up at the speed the config space
            // reports: nothing to retrain, success.
            msg::PCIE_RETRAIN => Reply::ok(),
            // Accepted without a visible effect here: the PCIe index, the
            // date, the M3 watchdog timeout, ETH/DRAM status, SPI copy,
            // peer-to-peer iATU setup (the PCIe tile is not modelled to that
            // depth), RISC-V and Tensix resets (no cores run).
            msg::PCIE_INDEX
            | msg::CURR_DATE
            | msg::UPDATE_M3_AUTO_RESET_TIMEOUT
            | msg::SET_ETH_DRAM_TRAINED_STATUS
            | msg::TRIGGER_SPI_COPY_LTOR
            | msg::SETUP_IATU_FOR_PEER_TO_PEER
            | msg::DEASSERT_RISCV_RESET
            | msg::RESET_SAFE_CLKS
            | msg::TOGGLE_TENSIX_RESET => Reply::ok(),
            _ => return None,
        })
    }

    fn schedule_reset(&mut self, level: ResetLevel) {
        if self.pending_reset.is_none() {
            self.pending_reset = Some(ResetRequest {
                level,
                due: Instant::now() + RESET_DELAY,
            });
        }
    }

    /// Serve one queue the way the Blackhole firmware does
    /// (`process_message_queue`): while a request waits and a response slot
    /// is free, pop, handle, push.
    fn process_queue(&mut self, base: u32, index: u8) {
        let wrap = 2 * QUEUE_ENTRIES;
        let requests = base + QUEUE_HEADER_BYTES;
        let responses = requests + QUEUE_ENTRIES * QUEUE_ENTRY_BYTES;
        loop {
            let req_wptr = self.csm_get(base);
            let res_rptr = self.csm_get(base + 0x4);
            let req_rptr = self.csm_get(base + 0x10);
            let res_wptr = self.csm_get(base + 0x14);
            if req_wptr == req_rptr {
                return;
            }
            if res_wptr.wrapping_sub(res_rptr) % wrap == QUEUE_ENTRIES {
                return;
            }
            // The firmware refuses to act on pointers out of range rather
            // than guess.
            if req_wptr >= wrap || req_rptr >= wrap || res_wptr >= wrap {
                return;
            }
            let slot = requests + (req_rptr % QUEUE_ENTRIES) * QUEUE_ENTRY_BYTES;
            let mut request = [0u32; 8];
            for (i, w) in request.iter_mut().enumerate() {
                *w = self.csm_get(slot + 4 * i as u32);
            }
            self.csm_set(base + 0x10, (req_rptr + 1) % wrap);
            let code = request[0] as u8;
            let serial = self.csm_get(base + 0x18);
            let response = match self.arch {
                Arch::Wormhole => self.wh_queue_handle(&request),
                Arch::Blackhole => self.bh_handle(&request, serial),
            };
            let slot = responses + (res_wptr % QUEUE_ENTRIES) * QUEUE_ENTRY_BYTES;
            for (i, w) in response.iter().enumerate() {
                self.csm_set(slot + 4 * i as u32, *w);
            }
            self.csm_set(base + 0x14, (res_wptr + 1) % wrap);
            // Every message advances the serial except the one that sets
            // it (`advance_serial`, `handle_set_last_serial`).
            let serial = if self.arch == Arch::Blackhole && code == msg::SET_LAST_SERIAL {
                request[1]
            } else {
                serial.wrapping_add(1)
            };
            self.csm_set(base + 0x18, serial);
            self.record(ArcMessage {
                channel: Channel::Queue { index },
                code,
                request,
                response,
            });
        }
    }

    /// Wormhole's queue carries what tt-kmd sends through it: power
    /// settings (2.10) and, from SMC_MSG's test program (2.11
    /// `test/smc_msg.cpp`: "TEST is handled by both WH and BH queue
    /// firmware"), TEST, answered with its argument plus one. Its other
    /// codes are not known from any source.
    fn wh_queue_handle(&mut self, request: &[u32; 8]) -> [u32; 8] {
        let mut response = [0u32; 8];
        match request[0] as u8 {
            msg::WH_POWER_SETTING => self.apply_power(request),
            msg::TEST => response[1] = request[1].wrapping_add(1),
            _ => response[0] = QUEUE_STATUS_UNKNOWN,
        }
        response
    }

    /// Blackhole messages, as the firmware's handlers answer them (zephyr
    /// `msgqueue.c` `process_queued_message` and the `REGISTER_MESSAGE`
    /// handlers): word 0 of the response is the handler's exit code,
    /// `0xFF` for a code without a handler.
    fn bh_handle(&mut self, request: &[u32; 8], serial: u32) -> [u32; 8] {
        let mut r = [0u32; 8];
        let arg = request[1];
        match request[0] as u8 {
            msg::TEST => {
                r[1] = arg.wrapping_add(1);
                r[2] = serial.wrapping_add(1);
            }
            msg::REPORT_SCRATCH_ONLY => r[0] = QUEUE_STATUS_SCRATCH_ONLY,
            // The serial itself is the queue's; `process_queue` sets it.
            msg::SET_LAST_SERIAL => {}
            msg::ASTATE0 | msg::ASTATE3 => {
                self.power.asic_state = request[0] as u8 - msg::ASTATE0;
            }
            msg::BH_POWER_SETTING => self.apply_power(request),
            msg::GO_BUSY => self.power.go_busy = true,
            msg::GO_LONG_IDLE => self.power.go_busy = false,
            msg::GET_AICLK => {
                r[1] = self.aiclk_mhz();
                // CLOCK_MODE_PPM_FORCED / _UNFORCED (aiclk_ppm.c).
                r[2] = if self.power.forced_aiclk_mhz != 0 {
                    2
                } else {
                    3
                };
            }
            msg::FORCE_AICLK => self.power.forced_aiclk_mhz = arg,
            msg::TRIGGER_RESET => match arg {
                0 => self.schedule_reset(ResetLevel::Asic),
                3 => self.schedule_reset(ResetLevel::AsicAndDmc),
                // `reset_dm_handler` returns an unknown level as the exit
                // code.
                level => r[0] = level & 0xFF,
            },
            // 1 = the board management controller answered.
            msg::PING_DM => r[1] = 1,
            // `response[1]` of an unlock is the set of board variables the
            // firmware still wants declared (tt-flash `flash_unlock`): none.
            msg::SET_WDT_TIMEOUT
            | msg::FLASH_UNLOCK
            | msg::FLASH_LOCK
            | msg::CONFIRM_FLASHED_SPI
            | msg::REINIT_TENSIX
            | msg::TOGGLE_TENSIX_RESET => {}
            _ => r[0] = QUEUE_STATUS_UNKNOWN,
        }
        r
    }

    /// Apply a power setting: each of the first `flags_valid` flag bits
    /// takes the requested value, the rest keep theirs (zephyr
    /// `apply_power_settings`).
    fn apply_power(&mut self, request: &[u32; 8]) {
        let p = PowerSetting::decode(request);
        self.power_settings_received += 1;
        self.last_power_setting = Some(p);
        let valid = if p.flags_valid >= 16 {
            0xFFFF
        } else {
            (1u16 << p.flags_valid) - 1
        };
        self.power.flags = (self.power.flags & !valid) | (p.flags & valid);
        for i in 0..usize::from(p.settings_valid).min(14) {
            self.power.settings[i] = p.settings[i];
        }
    }

    fn record(&mut self, m: ArcMessage) {
        if m.code == msg::TEST {
            *self.tests_answered.entry(m.channel).or_insert(0) += 1;
        }
        if self.log.len() >= LOG_LIMIT {
            self.log.drain(..LOG_LIMIT / 2);
        }
        self.log.push(m);
    }
}

fn decode(arch: Arch, addr: u64) -> Option<Region> {
    let csm = u64::from(CSM_SIZE);
    let apb = 0x10_0000u64;
    let within = |base: u64, len: u64| addr.checked_sub(base).filter(|o| *o < len);
    let (csm_bases, apb_base): (&[u64], u64) = match arch {
        Arch::Wormhole => (&[0x8_1000_0000, 0x8_2000_0000], 0x8_8000_0000),
        Arch::Blackhole => (&[0x1000_0000], 0x8000_0000),
    };
    for base in csm_bases {
        if let Some(o) = within(*base, csm) {
            return Some(Region::Csm(o as u32));
        }
    }
    within(apb_base, apb).map(|o| Region::Apb(o as u32))
}

/// Where a BAR0 offset reaches the ARC tile, as a NOC address of that tile.
///
/// - Wormhole: CSM at `0x1FE8_0000..0x1FF0_0000` and the ARC APB at
///   `0x1FF0_0000..0x2000_0000` (tt-umd `ARC_CSM_BAR0_XBAR_OFFSET_START`,
///   `ARC_APB_BAR0_XBAR_OFFSET_START`; luwen `wormhole-axi-pci.bin` puts
///   `ARC_RESET.SCRATCH[0]` at 0x1FF3_0060 and `ARC_CSM.DATA[0]` at
///   0x1FE8_0000).
/// - Blackhole: the ARC APB at `0x1FF0_0000..0x2000_0000`. tt-umd reads it
///   there when the PCIe tile in use is at x = 11
///   (`is_arc_available_over_axi`); with the host on x = 2 it goes through
///   the NOC instead, so the mapping is harmless either way. CSM is not in
///   Blackhole's BAR0 (tt-umd: "no longer valid for Blackhole").
pub fn bar0_to_arc(arch: Arch, bar0_offset: u64) -> Option<u64> {
    let o = bar0_offset;
    match arch {
        Arch::Wormhole => match o {
            0x1FE8_0000..=0x1FEF_FFFF => Some(0x8_1000_0000 + (o - 0x1FE8_0000)),
            0x1FF0_0000..=0x1FFF_FFFF => Some(0x8_8000_0000 + (o - 0x1FF0_0000)),
            _ => None,
        },
        Arch::Blackhole => match o {
            0x1FF0_0000..=0x1FFF_FFFF => Some(0x8000_0000 + (o - 0x1FF0_0000)),
            _ => None,
        },
    }
}

/// Where a Wormhole BAR4 offset reaches the ARC tile: once tt-kmd has
/// programmed inbound iATU region 1 (`map_bar4_to_system_registers`), BAR4
/// is the SoC's `0x1E00_0000..0x2000_0000`, the same addresses BAR0 shows
/// at the same offsets (tt-kmd `RESET_UNIT_START` = 0x1FF3_0000 -
/// `BAR4_SOC_TARGET_ADDRESS`). Blackhole's BAR4 holds only 4 GiB windows.
pub fn bar4_to_arc(arch: Arch, bar4_offset: u64) -> Option<u64> {
    const BAR4_SOC_TARGET_ADDRESS: u64 = 0x1E00_0000;
    match arch {
        Arch::Wormhole if bar4_offset < 0x200_0000 => {
            bar0_to_arc(arch, BAR4_SOC_TARGET_ADDRESS + bar4_offset)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    //! Each client's way of driving the firmware, written out from its
    //! source, with the checks that client makes.

    use super::*;
    use crate::telemetry::{smbus, tag};

    const WH: Arch = Arch::Wormhole;
    const BH: Arch = Arch::Blackhole;

    // ---- tt-kmd 2.10 (wormhole.c, blackhole.c, msgqueue.c) ----

    /// tt-kmd reaches Wormhole's reset unit through BAR4:
    /// `RESET_UNIT_START` = 0x1FF30000 - `BAR4_SOC_TARGET_ADDRESS`.
    fn kmd_wh_reg(off: u64) -> u64 {
        bar4_to_arc(WH, 0x1FF3_0000 - 0x1E00_0000 + off).unwrap()
    }

    /// tt-kmd `csm_read32`: BAR4 + `ARC_CSM_START` + (addr - ARC_CSM_BASE) on
    /// Wormhole; a NOC read of (8, 0) at `addr` on Blackhole.
    fn kmd_csm(arch: Arch, addr: u32) -> u64 {
        match arch {
            WH => bar4_to_arc(
                WH,
                0x1FE8_0000 - 0x1E00_0000 + u64::from(addr - 0x1000_0000),
            )
            .unwrap(),
            BH => u64::from(addr),
        }
    }

    /// `wormhole_send_arc_fw_message_with_args` followed by one poll of
    /// `arc_msg_poll_completion` (the firmware answers at once): Ok(exit
    /// code), or the poll's -1 (timeout), -2 (unrecognized), -10 (FW not
    /// running).
    fn kmd_wh_send(fw: &mut ArcFirmware, id: u8, arg0: u16, arg1: u16) -> Result<u16, i32> {
        let post = fw.read32(kmd_wh_reg(0x60)).unwrap();
        if post & 0xFFFF_0000 != 0xC0DE_0000 {
            return Err(-10);
        }
        assert!(fw.write32(
            kmd_wh_reg(0x60 + 3 * 4),
            u32::from(arg0) | (u32::from(arg1) << 16)
        ));
        assert!(fw.write32(kmd_wh_reg(0x60 + 5 * 4), 0xAA00 | u32::from(id)));
        let misc = fw.read32(kmd_wh_reg(0x100)).unwrap();
        fw.write32(kmd_wh_reg(0x100), misc | (1 << 16));
        let v = fw.read32(kmd_wh_reg(0x60 + 5 * 4)).unwrap();
        if v & 0xFFFF == u32::from(id) {
            Ok((v >> 16) as u16)
        } else if v == 0xFFFF_FFFF {
            Err(-2)
        } else {
            Err(-1)
        }
    }

    /// tt-kmd `send_arc_message` (both archs) with `arc_msg_push` and
    /// `arc_msg_pop`, each poll loop run once. Returns the response, or None
    /// where tt-kmd returns false before reading one.
    fn kmd_queue_send(fw: &mut ArcFirmware, msg: [u32; 8]) -> Option<[u32; 8]> {
        let arch = fw.arch();
        let (queue_base, n) = match arch {
            WH => {
                let qcb = fw.read32(kmd_wh_reg(0x1D8))?;
                if !(0x1000_0000..=0x1008_0000 - 4).contains(&qcb) {
                    return None;
                }
                let base = fw.read32(kmd_csm(WH, qcb))? + 0x1000_0000;
                (base, fw.read32(kmd_csm(WH, qcb + 4))? & 0xFF)
            }
            BH => {
                let boot = fw.read32(0x8003_0400 + 2 * 4)?;
                if boot & 1 == 0 {
                    return None;
                }
                let qcb = fw.read32(0x8003_0400 + 11 * 4)?;
                let base = fw.read32(u64::from(qcb))?;
                (base, fw.read32(u64::from(qcb) + 4)? & 0xFF)
            }
        };
        // arc_msg_push
        let mut wptr = fw.read32(kmd_csm(arch, queue_base))?;
        let rptr = fw.read32(kmd_csm(arch, queue_base + 0x10))?;
        if wptr.wrapping_sub(rptr) % (2 * n) >= n {
            return None;
        }
        let slot = queue_base + 32 + (wptr % n) * 32;
        for (i, w) in msg.iter().enumerate() {
            fw.write32(kmd_csm(arch, slot + 4 * i as u32), *w);
        }
        wptr = (wptr + 1) % (2 * n);
        fw.write32(kmd_csm(arch, queue_base), wptr);
        // The doorbell.
        match arch {
            WH => {
                let misc = fw.read32(kmd_wh_reg(0x100))?;
                fw.write32(kmd_wh_reg(0x100), misc | (1 << 16));
            }
            BH => {
                fw.write32(0x800B_0000, 0);
            }
        }
        // arc_msg_pop
        let response_base = queue_base + 32 + n * 32;
        let mut rptr = fw.read32(kmd_csm(arch, queue_base + 4))?;
        let wptr = fw.read32(kmd_csm(arch, queue_base + 0x14))?;
        if wptr.wrapping_sub(rptr) % (2 * n) == 0 {
            return None;
        }
        let slot = response_base + (rptr % n) * 32;
        let mut out = [0u32; 8];
        for (i, w) in out.iter_mut().enumerate() {
            *w = fw.read32(kmd_csm(arch, slot + 4 * i as u32))?;
        }
        rptr = (rptr + 1) % (2 * n);
        fw.write32(kmd_csm(arch, queue_base + 4), rptr);
        Some(out)
    }

    /// `*_populate_telemetry_cache` then `tt_telemetry_read32`: tag ->
    /// value, as tt-kmd would read each tag.
    fn kmd_telemetry(fw: &mut ArcFirmware) -> Vec<(u16, u32)> {
        let arch = fw.arch();
        let (base, data) = match arch {
            WH => (
                fw.read32(kmd_wh_reg(0x1D0)).unwrap(),
                fw.read32(kmd_wh_reg(0x1D4)).unwrap(),
            ),
            BH => (
                fw.read32(0x8003_0400 + 13 * 4).unwrap(),
                fw.read32(0x8003_0400 + 12 * 4).unwrap(),
            ),
        };
        let in_csm = |a: u32| (0x1000_0000..=0x1008_0000 - 4).contains(&a);
        assert!(in_csm(base) && in_csm(data), "is_fw_ready_for_telemetry");
        let version = fw.read32(kmd_csm(arch, base)).unwrap();
        assert!((version >> 16) & 0xFF <= 1, "Unsupported telemetry version");
        let n = fw.read32(kmd_csm(arch, base + 4)).unwrap();
        let mut out = Vec::new();
        for i in 0..n {
            let entry = fw.read32(kmd_csm(arch, base + 8 + 4 * i)).unwrap();
            let addr = data + 4 * (entry >> 16);
            assert!(in_csm(addr));
            out.push((entry as u16, fw.read32(kmd_csm(arch, addr)).unwrap()));
        }
        out
    }

    fn get(t: &[(u16, u32)], tag: u16) -> u32 {
        t.iter()
            .find(|(k, _)| *k == tag)
            .unwrap_or_else(|| panic!("tag {tag} missing"))
            .1
    }

    /// tt-kmd `tt_sysfs_show_u32_ver`.
    fn kmd_ver(tag_id: u16, v: u32) -> String {
        if tag_id == 24 {
            format!("{}.{}.{}", (v >> 16) & 0xFF, (v >> 12) & 0xF, v & 0xFFF)
        } else {
            format!(
                "{}.{}.{}.{}",
                v >> 24,
                (v >> 16) & 0xFF,
                (v >> 8) & 0xFF,
                v & 0xFF
            )
        }
    }

    /// tt-kmd `tt_sysfs_show_card_type`.
    fn kmd_card_type(board_id_high: u32) -> &'static str {
        match (board_id_high >> 4) & 0xFFFF {
            0x14 => "n300",
            0x18 => "n150",
            0x40 => "p150a",
            0x43 => "p100a",
            _ => "unknown",
        }
    }

    /// tt-kmd's hwmon inputs and maxes (`tt_hwmon_read`), in hwmon units.
    fn kmd_hwmon(t: &[(u16, u32)]) -> [(i64, i64); 4] {
        let temp = get(t, 11);
        let temp_input = i64::from(temp >> 16) * 1000 + i64::from(temp & 0xFFFF) * 1000 / 0x10000;
        [
            (temp_input, i64::from(get(t, 56)) * 1000),
            (i64::from(get(t, 6)), i64::from(get(t, 9) >> 16)),
            (i64::from(get(t, 8)) * 1000, i64::from(get(t, 55)) * 1000),
            (
                i64::from(get(t, 7)) * 1_000_000,
                i64::from(get(t, 64)) * 1_000_000,
            ),
        ]
    }

    // ---- tt-umd (wormhole_arc_messenger.cpp, blackhole_arc_message_queue.cpp) ----

    /// Wormhole `read_from_arc_apb`: BAR0 `ARC_APB_BAR0_XBAR_OFFSET_START` +
    /// offset.
    fn umd_apb(arch: Arch, off: u64) -> u64 {
        bar0_to_arc(arch, 0x1FF0_0000 + off).unwrap()
    }

    /// `WormholeArcMessenger::send_message`: (exit code, RES0, RES1).
    fn umd_wh_send(fw: &mut ArcFirmware, msg_code: u32, args: &[u32]) -> (u32, u32, u32) {
        assert_eq!(msg_code & 0xFF00, 0xAA00);
        let arg0 = args.first().copied().unwrap_or(0xFFFF);
        let arg1 = args.get(1).copied().unwrap_or(0xFFFF);
        fw.write32(umd_apb(WH, 0x3006C), arg0 | (arg1 << 16));
        fw.write32(umd_apb(WH, 0x30074), msg_code);
        let misc = fw.read32(umd_apb(WH, 0x30100)).unwrap();
        assert_eq!(
            misc & (1 << 16),
            0,
            "UMD would wait for ARC to clear the trigger"
        );
        fw.write32(umd_apb(WH, 0x30100), misc | (1 << 16));
        let status = fw.read32(umd_apb(WH, 0x30074)).unwrap();
        assert_eq!(status & 0xFFFF, msg_code & 0xFF, "UMD would time out");
        let res0 = fw.read32(umd_apb(WH, 0x3006C)).unwrap();
        let res1 = fw.read32(umd_apb(WH, 0x30070)).unwrap();
        ((status & 0xFFFF_0000) >> 16, res0, res1)
    }

    /// `BlackholeArcMessageQueue::send_message` on queue `index` through the
    /// NOC (`read_from_device` at ARC addresses) with `trigger_fw_int`
    /// writing 65536 to `ARC_FW_INT_ADDR`: Ok((exit code, return values)),
    /// Err(status) where tt-umd throws.
    fn umd_bh_send(
        fw: &mut ArcFirmware,
        index: u32,
        code: u8,
        args: &[u32],
    ) -> Result<(u32, [u32; 7]), u32> {
        let qcb = u64::from(fw.read32(0x8000_0000 + 0x3042C).unwrap());
        let word =
            u64::from(fw.read32(qcb).unwrap()) | (u64::from(fw.read32(qcb + 4).unwrap()) << 32);
        let base = word as u32;
        let size = ((word >> 32) & 0xFF) as u32;
        let queue = u64::from(base + index * (2 * size * 32 + 32));
        let rd = |fw: &mut ArcFirmware, w: u64| fw.read32(queue + 4 * w).unwrap();
        let mut request = [u32::from(code), 0, 0, 0, 0, 0, 0, 0];
        request[1..=args.len()].copy_from_slice(args);
        let wptr = rd(fw, 0);
        let rptr = rd(fw, 4);
        assert_ne!(
            (rptr as i32 - wptr as i32).unsigned_abs() % (2 * size),
            size,
            "queue full"
        );
        let at = 8 + u64::from(wptr % size) * 8;
        for (i, w) in request.iter().enumerate() {
            fw.write32(queue + 4 * (at + i as u64), *w);
        }
        fw.write32(queue, (wptr + 1) % (2 * size));
        fw.write32(0x8000_0000 + 0x30100, 65536);
        let rptr = rd(fw, 1);
        assert_ne!(rptr, rd(fw, 5), "UMD would time out");
        let at = 8 + u64::from(size + rptr % size) * 8;
        let mut response = [0u32; 8];
        for (i, w) in response.iter_mut().enumerate() {
            *w = rd(fw, at + i as u64);
        }
        fw.write32(queue + 4, (rptr + 1) % (2 * size));
        let status = response[0] & 0xFF;
        if status < 240 {
            Ok((response[0] >> 16, response[1..].try_into().unwrap()))
        } else {
            Err(status)
        }
    }

    /// tt-umd `ArcTelemetryReader::initialize_telemetry` (tag -> value) from
    /// the published table and data addresses, as ARC addresses.
    fn umd_telemetry(fw: &mut ArcFirmware, table: u64, values: u64) -> Vec<(u16, u32)> {
        let n = fw.read32(table + 4).unwrap();
        (0..u64::from(n))
            .map(|i| {
                let e = fw.read32(table + 8 + 4 * i).unwrap();
                (
                    e as u16,
                    fw.read32(values + 4 * u64::from(e >> 16)).unwrap(),
                )
            })
            .collect()
    }

    // ---- luwen (arc_msg.rs, chip/wormhole.rs, chip/blackhole.rs) ----

    /// luwen's Wormhole addresses are BAR0 offsets from
    /// `wormhole-axi-pci.bin`.
    fn luwen_wh(fw: &mut ArcFirmware, bar0: u64) -> u32 {
        fw.read32(bar0_to_arc(WH, bar0).unwrap()).unwrap()
    }

    /// `Wormhole::check_arc_msg_safe(5, 3)`: Ok, or the error luwen names.
    fn luwen_wh_msg_safe(fw: &mut ArcFirmware) -> Result<(), &'static str> {
        let s5 = luwen_wh(fw, 0x1FF3_0074);
        let pc = luwen_wh(fw, 0x1FF3_0060);
        let dma = luwen_wh(fw, 0x1FEF_84D4) >> 31;
        if pc == 0xFFFF_FFFF {
            return Err("NoAccess");
        }
        if s5 == 0xDEAD_C0DE {
            return Err("WatchdogTriggered");
        }
        if s5 == 0x60 || pc == 0x1111_0000 {
            return Err("BootIncomplete");
        }
        if s5 == 0xAA00 || s5 == 0x55 {
            return Err("Asleep");
        }
        if dma != 0 {
            return Err("OutstandingPcieDMA");
        }
        if s5 & 0xFFFF_FF00 == 0xAA00 {
            return Err("MessageQueued");
        }
        if s5 & 0xFF00_FFFF == 0xAA00_0000 {
            return Err("HandlingMessage");
        }
        if matches!(s5, 1 | 0xFFFF_FFFF | 0xFFFF_DEAD) || s5 & 0xFFFF > 1 {
            return Ok(());
        }
        if s5 == 0 && (pc == 0xC0DE_0001 || (0xC0DE_003F..=0xC0DE_007F).contains(&pc)) {
            return Ok(());
        }
        Err("OldPostCode")
    }

    /// luwen `arc_msg` (wait_for_done) on the mailbox (msg_reg, return_reg):
    /// Ok((rc, arg)) or luwen's error.
    fn luwen_wh_msg(
        fw: &mut ArcFirmware,
        code: u16,
        arg0: u16,
        arg1: u16,
        msg_reg: u64,
        ret_reg: u64,
    ) -> Result<(u32, u32), &'static str> {
        let scratch = |r: u64| 0x1FF3_0060 + 4 * r;
        let code = 0xAA00 | code;
        if luwen_wh(fw, scratch(msg_reg)) & 0xFFFF == 0x55 {
            return Err("ArcAsleep");
        }
        fw.write32(
            bar0_to_arc(WH, scratch(ret_reg)).unwrap(),
            u32::from(arg0) | (u32::from(arg1) << 16),
        );
        fw.write32(bar0_to_arc(WH, scratch(msg_reg)).unwrap(), u32::from(code));
        let misc = luwen_wh(fw, 0x1FF3_0100);
        if misc & (1 << 16) != 0 {
            return Err("FwIntFailed");
        }
        fw.write32(bar0_to_arc(WH, 0x1FF3_0100).unwrap(), misc | (1 << 16));
        let status = luwen_wh(fw, scratch(msg_reg));
        if status & 0xFFFF == u32::from(code & 0xFF) {
            Ok(((status >> 16) & 0xFFFF, luwen_wh(fw, scratch(ret_reg))))
        } else if status == 0xFFFF_FFFF {
            Err("MsgNotRecognized")
        } else {
            Err("Timeout")
        }
    }

    // ---- Wormhole ----

    #[test]
    fn wh_boot_state_is_what_each_client_waits_for() {
        let mut fw = ArcFirmware::new(WH);
        // tt-kmd arc_l2_is_running, is_hardware_hung.
        assert_eq!(
            fw.read32(kmd_wh_reg(0x60)).unwrap() & 0xFFFF_0000,
            0xC0DE_0000
        );
        assert_ne!(fw.read32(kmd_wh_reg(0x60 + 6 * 4)), Some(0xFFFF_FFFF));
        // tt-umd wait_arc_core_start: STATUS_INIT_DONE_1 in SCRATCH[5],
        // and no PCIe DMA request.
        assert_eq!(fw.read32(umd_apb(WH, 0x30074)), Some(0x0000_0001));
        assert_eq!(fw.read32(0x8_1000_0000 + 0x784D4), Some(0));
        // luwen.
        assert_eq!(luwen_wh_msg_safe(&mut fw), Ok(()));
        // tt-umd wait_for_telemetry_initialized: table pointer published.
        assert_ne!(fw.read32(0x8_8003_01D0), Some(0));
    }

    #[test]
    fn wh_kmd_probe_messages_complete() {
        let mut fw = ArcFirmware::new(WH);
        // wormhole_init_hardware: CURR_DATE, ASTATE0, PCIE_INDEX
        // (ordinal | 0x80), PCIE_RETRAIN, UPDATE_M3_AUTO_RESET_TIMEOUT.
        assert_eq!(kmd_wh_send(&mut fw, 0xB7, 0x0C1E, 0x530E), Ok(0));
        assert_eq!(kmd_wh_send(&mut fw, 0xA0, 0, 0), Ok(0));
        assert_eq!(kmd_wh_send(&mut fw, 0x51, 0x80, 0), Ok(0));
        // wormhole_complete_pcie_init: FW_MSG_PCIE_RETRAIN with the root
        // port's target link speed and subsystem vendor id; exit code 0 is
        // "pcie init passed".
        assert_eq!(kmd_wh_send(&mut fw, 0xB6, 4, 0x1B36), Ok(0));
        assert_eq!(kmd_wh_send(&mut fw, 0xBC, 10, 0), Ok(0));
        // wormhole_reset's responsiveness check.
        assert_eq!(kmd_wh_send(&mut fw, 0x11, 0, 0), Ok(0));
        let codes: Vec<u8> = fw.messages().iter().map(|m| m.code).collect();
        assert_eq!(codes, [0xB7, 0xA0, 0x51, 0xB6, 0xBC, 0x11]);
        let date = &fw.messages()[0];
        assert_eq!(date.channel, Channel::Scratch { mailbox: 5 });
        assert_eq!(date.args(), (0x0C1E, 0x530E));
        assert!(date.succeeded());
        // Completion left the misc-control trigger clear.
        assert_eq!(fw.read32(kmd_wh_reg(0x100)).unwrap() & (1 << 16), 0);
        // luwen still finds it safe to send.
        assert_eq!(luwen_wh_msg_safe(&mut fw), Ok(()));
    }

    #[test]
    fn wh_umd_aiclk_follows_busy_and_idle() {
        let mut fw = ArcFirmware::new(WH);
        // get_clock: GET_AICLK with {0xFFFF, 0xFFFF}.
        let (exit, aiclk, _) = umd_wh_send(&mut fw, 0xAA34, &[0xFFFF, 0xFFFF]);
        assert_eq!((exit, aiclk), (0, 500), "wormhole::AICLK_IDLE_VAL");
        // set_clock_state(BUSY): ARC_GO_BUSY with {0, 0}, then AICLK must
        // reach get_max_clock_freq, AICLK_LIMIT_MAX from 18.8 on.
        assert_eq!(umd_wh_send(&mut fw, 0xAA52, &[0, 0]).0, 0);
        let (_, aiclk, _) = umd_wh_send(&mut fw, 0xAA34, &[]);
        assert_eq!(aiclk, 1000);
        let t = kmd_telemetry(&mut fw);
        assert_eq!(get(&t, 63), 1000);
        assert_eq!(get(&t, 14), 1000);
        assert_eq!(umd_wh_send(&mut fw, 0xAA54, &[0, 0]).0, 0);
        assert_eq!(umd_wh_send(&mut fw, 0xAA34, &[]).1, 500);
        // get_chip_info: ARC_GET_HARVESTING must succeed.
        assert_eq!(umd_wh_send(&mut fw, 0xAA57, &[0, 0]).0, 0);
    }

    #[test]
    fn wh_luwen_finds_smbus_telemetry_through_the_message() {
        let mut fw = ArcFirmware::new(WH);
        let (rc, offset) = luwen_wh_msg(&mut fw, 0x2C, 0, 0, 5, 3).unwrap();
        assert_eq!(rc, 0);
        // telemetry_struct_offset = ARC_CSM.DATA[0] + (offset - 0x10000000)
        let base = 0x1FE8_0000 + u64::from(offset - 0x1000_0000);
        let w = |fw: &mut ArcFirmware, i: u64| luwen_wh(fw, base + 4 * i);
        let board_id = (u64::from(w(&mut fw, 4)) << 32) | u64::from(w(&mut fw, 5));
        assert_eq!(board_id, 0x0100_0186_1172_1043);
        // luwen: board_upi = (board_id >> 36) & 0xFFFFF; tt-smi: 0x18 = n150.
        assert_eq!((board_id >> 36) & 0xF_FFFF, 0x18);
        let arc0 = w(&mut fw, 6);
        assert!(
            arc0 >= 0x0219_0000,
            "luwen reads the bundle only from ARC fw 2.25"
        );
        assert_eq!(w(&mut fw, 49), 0x120C_0000);
        // tt-smi get_wh_chip_telemetry / get_wh_chip_limits.
        let aiclk = w(&mut fw, 24);
        assert_eq!((aiclk & 0xFFFF, aiclk >> 16), (500, 1000));
        assert_eq!(w(&mut fw, 28), 750);
        assert_eq!(f64::from(w(&mut fw, 29) & 0xFFFF) / 16.0, 45.0);
        let tdp = w(&mut fw, 32);
        assert_eq!((tdp & 0xFFFF, tdp >> 16), (14, 100));
        let tdc = w(&mut fw, 33);
        assert_eq!((tdc & 0xFFFF, tdc >> 16), (18, 160));
        let vdd = w(&mut fw, 34);
        assert_eq!((vdd & 0xFFFF, vdd >> 16), (700, 950));
        // tt-smi DRAM: speed code 2 = "12G", six channels trained.
        let ddr = w(&mut fw, 14);
        assert_eq!((ddr >> 24, ddr & 0xFF_FFFF), (2, 0x22_2222));
        // tt-smi eth_fw (hex_to_semver_eth_wh) and tt-flash's smbus version.
        let eth = w(&mut fw, 11);
        assert_eq!(
            ((eth >> 16) & 0xFF, (eth >> 12) & 0xF, eth & 0xFFF),
            (7, 0, 0)
        );
        assert_eq!(w(&mut fw, 7), arc0);
    }

    #[test]
    fn wh_umd_reads_smbus_telemetry_at_its_fixed_address() {
        let mut fw = ArcFirmware::new(WH);
        // SmBusArcTelemetryReader: SMBUS_TELEMETRY_NOC_ADDR + tag * 4, tag
        // FW_BUNDLE_VERSION = 49; from 18.4.0 on tt-umd switches to the
        // tagged reader.
        let bundle = fw.read32(0x8_2007_8D60 + 49 * 4).unwrap();
        assert_eq!(bundle, 0x120C_0000);
        assert!(bundle >> 16 >= 0x1204);
        assert_eq!(fw.read32(0x8_2007_8D60 + 4 * 4), Some(0x0100_0186));
        // The same words through the CSM window tt-umd uses elsewhere.
        assert_eq!(fw.read32(0x8_1007_8D60 + 49 * 4), Some(bundle));
    }

    #[test]
    fn wh_unknown_message_reads_all_ones() {
        let mut fw = ArcFirmware::new(WH);
        assert_eq!(kmd_wh_send(&mut fw, 0xFE, 0, 0), Err(-2));
        assert_eq!(
            luwen_wh_msg(&mut fw, 0xFE, 0, 0, 5, 3),
            Err("MsgNotRecognized")
        );
        assert!(fw.messages().iter().all(|m| !m.succeeded()));
    }

    #[test]
    fn wh_luwen_second_mailbox() {
        let mut fw = ArcFirmware::new(WH);
        // use_second_mailbox: message in SCRATCH[2], argument in SCRATCH[4].
        let (rc, arg) = luwen_wh_msg(&mut fw, 0x90, 101, 0, 2, 4).unwrap();
        assert_eq!((rc, arg), (0, 102));
        assert_eq!(fw.messages()[0].channel, Channel::Scratch { mailbox: 2 });
        // The first mailbox is untouched.
        assert_eq!(luwen_wh(&mut fw, 0x1FF3_0074), 1);
    }

    #[test]
    fn wh_tt_flash_bundle_version() {
        let mut fw = ArcFirmware::new(WH);
        // get_bundle_version_v1: MSG_TYPE_FW_VERSION 0xB9, arg0 0, 1, 2.
        let (_, fw_version) = luwen_wh_msg(&mut fw, 0xB9, 0, 0, 5, 3).unwrap();
        assert!(fw_version >= 0x217_0000, "WhChip.min_fw_version");
        let (_, running) = luwen_wh_msg(&mut fw, 0xB9, 1, 0, 5, 3).unwrap();
        let (_, spi) = luwen_wh_msg(&mut fw, 0xB9, 2, 0, 5, 3).unwrap();
        let tuple = |t: u32| (t >> 24, (t >> 16) & 0xFF, (t >> 8) & 0xFF, t & 0xFF);
        assert_eq!(tuple(running), (18, 12, 0, 0));
        assert_eq!(tuple(spi), (18, 12, 0, 0));
        assert_ne!(fw_version, running);
    }

    #[test]
    fn wh_kmd_telemetry_sysfs_and_hwmon() {
        let mut fw = ArcFirmware::new(WH);
        let t = kmd_telemetry(&mut fw);
        // tt_card_type, tt_serial (tags 1, 2), tt_asic_id (61, 62).
        assert_eq!(kmd_card_type(get(&t, 1)), "n150");
        assert_eq!(
            format!("{:08X}{:08X}", get(&t, 1), get(&t, 2)),
            "0100018611721043"
        );
        assert_ne!(get(&t, 61) | get(&t, 62), 0);
        assert_eq!(kmd_ver(28, get(&t, 28)), "18.12.0.0");
        assert_eq!(kmd_ver(29, get(&t, 29)), "2.33.0.0");
        assert_eq!(kmd_ver(24, get(&t, 24)), "7.0.0");
        assert_eq!(kmd_ver(58, get(&t, 58)), "3.3.5.0");
        for tag_id in [14, 15, 16, 26, 27, 32] {
            get(&t, tag_id);
        }
        // tt-kmd test/hwmon.cpp VerifyInputsAreUnderMaxes, idle and busy.
        for busy in [false, true] {
            if busy {
                kmd_wh_send(&mut fw, 0x52, 0, 0).unwrap();
            }
            let t = kmd_telemetry(&mut fw);
            for (input, max) in kmd_hwmon(&t) {
                assert!(input < max, "{input} >= {max} (busy {busy})");
            }
        }
        assert_eq!(kmd_hwmon(&kmd_telemetry(&mut fw))[0].0, 52_500);
    }

    #[test]
    fn wh_umd_tagged_telemetry_through_the_noc() {
        let mut fw = ArcFirmware::new(WH);
        // WormholeArcTelemetryReader: the reset unit's NOC_NODEID_X_0 /
        // Y_0, plus ARC_NOC_ADDRESS_START.
        let table = u64::from(fw.read32(0x8_8003_0000 + 0x1D0).unwrap()) + 0x8_0000_0000;
        let values = u64::from(fw.read32(0x8_8003_0000 + 0x1D4).unwrap()) + 0x8_0000_0000;
        let t = umd_telemetry(&mut fw, table, values);
        assert_eq!(get(&t, 28), 0x120C_0000);
        assert_eq!(get(&t, 14), 500);
        // ASIC_TEMPERATURE is signed 16.16 in the 18.4+ map.
        assert_eq!(get(&t, 11), 45 << 16);
        assert_eq!(get(&t, 2), 0x1172_1043);
    }

    #[test]
    fn wh_kmd_power_votes_through_the_queue() {
        let mut fw = ArcFirmware::new(WH);
        // wormhole_set_power_state: ARC_MSG_TYPE_POWER_SETTING | validity
        // << 8 | power_flags << 16, settings as the payload. The aggregate
        // of one plain open: all 15 flags on, validity (15, 0).
        let header = 0xC0 | (0x0F << 8) | (0x7FFF << 16);
        let r = kmd_queue_send(&mut fw, [header, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(r[0], 0, "tt-kmd: msg->header == 0");
        assert_eq!(fw.aiclk_mhz(), 1000);
        // The last close: everything off.
        let r = kmd_queue_send(&mut fw, [0xC0 | (0x0F << 8), 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(r[0], 0);
        assert_eq!(fw.aiclk_mhz(), 500);
        let votes: Vec<u16> = fw
            .messages()
            .iter()
            .filter_map(|m| m.power_setting())
            .map(|p| p.flags)
            .collect();
        assert_eq!(votes, [0x7FFF, 0]);
        let m = &fw.messages()[0];
        assert_eq!(m.channel, Channel::Queue { index: 0 });
        assert_eq!(m.power_setting().unwrap().flags_valid, 15);
        // Settings: validity (15, 2) carries two u16 settings in word 1.
        kmd_queue_send(&mut fw, [0xC0 | (0x2F << 8), 0x0002_0001, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(fw.power_state().settings[..3], [1, 2, 0]);
        for _ in 0..10 {
            assert_eq!(
                kmd_queue_send(&mut fw, [header, 0, 0, 0, 0, 0, 0, 0]).unwrap()[0],
                0
            );
        }
        // What the control socket's `power` reports, across a chip reset.
        fw.reset();
        let (received, last) = fw.power_settings();
        assert_eq!(received, 13);
        assert_eq!(last.map(|p| (p.flags, p.flags_valid)), Some((0x7FFF, 15)));
    }

    #[test]
    fn wh_trigger_reset_then_reboot() {
        let mut fw = ArcFirmware::new(WH);
        // tt-umd's refclk before, as warm_reset_wormhole_legacy takes it.
        let refclk = |fw: &mut ArcFirmware| {
            let hi = fw.read32(umd_apb(WH, 0x300E4)).unwrap();
            let lo = fw.read32(umd_apb(WH, 0x300E0)).unwrap();
            (u64::from(hi) << 32) | u64::from(lo)
        };
        kmd_wh_send(&mut fw, 0x52, 0, 0).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let before = refclk(&mut fw);
        assert!(before > 0);
        // wormhole_reset: NOP answered, then TRIGGER_RESET with reset_arg 3
        // for ASIC_DMC_RESET (tt-umd waits for the answer too).
        assert_eq!(kmd_wh_send(&mut fw, 0x11, 0, 0), Ok(0));
        assert_eq!(kmd_wh_send(&mut fw, 0x56, 3, 0), Ok(0));
        let pending = fw.pending_reset().unwrap();
        assert_eq!(pending.level, ResetLevel::AsicAndDmc);
        assert!(pending.due > Instant::now() - Duration::from_millis(1));
        fw.reset();
        assert_eq!(fw.pending_reset(), None);
        assert!(refclk(&mut fw) < before, "tt-umd: refclk must restart");
        assert_eq!(fw.read32(umd_apb(WH, 0x30074)), Some(1));
        assert_eq!(fw.aiclk_mhz(), 500);
        assert_eq!(luwen_wh_msg_safe(&mut fw), Ok(()));
        // The log is the emulator's, not the chip's.
        assert_eq!(fw.messages().len(), 3);
        // TRIGGER_RESET with no argument (0xFFFF) is an ASIC reset.
        let mut fw = ArcFirmware::new(WH);
        umd_wh_send(&mut fw, 0xAA56, &[]);
        assert_eq!(fw.pending_reset().unwrap().level, ResetLevel::Asic);
    }

    #[test]
    fn wh_hung_firmware_leaves_messages_pending() {
        let mut fw = ArcFirmware::new(WH);
        fw.set_responding(false);
        assert!(!fw.responding());
        assert_eq!(kmd_wh_send(&mut fw, 0x11, 0, 0), Err(-1));
        assert_eq!(fw.read32(kmd_wh_reg(0x74)), Some(0xAA11));
        // tt-umd would wait for the trigger to clear; luwen refuses.
        assert_ne!(fw.read32(kmd_wh_reg(0x100)).unwrap() & (1 << 16), 0);
        assert_eq!(luwen_wh_msg_safe(&mut fw), Err("MessageQueued"));
        assert!(fw.messages().is_empty());
        // Registers still read: the ARC CPU hangs, not its bus.
        assert!(fw.read32(0x8_1007_8D60).is_some());
        fw.set_responding(true);
        assert_eq!(fw.read32(kmd_wh_reg(0x74)), Some(0x11));
        assert_eq!(fw.read32(kmd_wh_reg(0x100)).unwrap() & (1 << 16), 0);
        assert_eq!(fw.messages().len(), 1);
        // An injected hang outlasts a chip reset.
        fw.set_responding(false);
        fw.reset();
        assert_eq!(kmd_wh_send(&mut fw, 0x11, 0, 0), Err(-1));
        fw.set_responding(true);
        assert_eq!(fw.read32(kmd_wh_reg(0x74)), Some(0x11));
    }

    #[test]
    fn wh_asleep_after_go_to_sleep() {
        let mut fw = ArcFirmware::new(WH);
        assert_eq!(luwen_wh_msg(&mut fw, 0x55, 0, 0, 5, 3), Ok((0, 0)));
        assert_eq!(luwen_wh_msg_safe(&mut fw), Err("Asleep"));
        assert_eq!(luwen_wh_msg(&mut fw, 0x11, 0, 0, 5, 3), Err("ArcAsleep"));
        fw.reset();
        assert_eq!(luwen_wh_msg(&mut fw, 0x11, 0, 0, 5, 3), Ok((0, 0)));
    }

    // ---- Blackhole ----

    #[test]
    fn bh_boot_state_is_what_each_client_waits_for() {
        let mut fw = ArcFirmware::new(BH);
        let boot = fw.read32(0x8003_0408).unwrap();
        assert_eq!(boot & 0x7, 0x5, "tt-umd wait_arc_core_start");
        assert_eq!(boot & 1, 1, "tt-kmd ARC_BOOT_STATUS_READY_FOR_MSG");
        assert_eq!((boot >> 1) & 3, 2, "luwen ArcFwInitStatus::Done");
        // Telemetry pointers in CSM (luwen, tt-flash CSM_RANGE).
        let table = fw.read32(0x8003_0434).unwrap();
        let data = fw.read32(0x8003_0430).unwrap();
        assert!((0x1000_0000..=0x1007_FFFF).contains(&table));
        assert!((0x1000_0000..0x1008_0000).contains(&data));
        // luwen's comms check reads SCRATCH_0.
        assert_eq!(fw.read32(0x8003_0060).unwrap() >> 16, 0xC0DE);
        // tt-kmd's queue pointer check is a CSM range check.
        let qcb = fw.read32(0x8003_042C).unwrap();
        assert!((0x1000_0000..0x1008_0000).contains(&qcb));
    }

    #[test]
    fn bh_kmd_probe_and_reset_messages() {
        let mut fw = ArcFirmware::new(BH);
        // blackhole_init_hardware: ASIC_STATE0, then SET_WDT_TIMEOUT with
        // 1000 * auto_reset_timeout.
        assert_eq!(
            kmd_queue_send(&mut fw, [0xA0, 0, 0, 0, 0, 0, 0, 0]).unwrap()[0],
            0
        );
        assert_eq!(
            kmd_queue_send(&mut fw, [0xC1, 10_000, 0, 0, 0, 0, 0, 0]).unwrap()[0],
            0
        );
        // blackhole_reset(ASIC_DMC_RESET): TEST, then TRIGGER_RESET level 3.
        let r = kmd_queue_send(&mut fw, [0x90, 41, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!((r[0], r[1]), (0, 42));
        let r = kmd_queue_send(&mut fw, [0x56, 3, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(r[0], 0);
        assert_eq!(fw.pending_reset().unwrap().level, ResetLevel::AsicAndDmc);
        let codes: Vec<u8> = fw.messages().iter().map(|m| m.code).collect();
        assert_eq!(codes, [0xA0, 0xC1, 0x90, 0x56]);
        assert!(fw
            .messages()
            .iter()
            .all(|m| m.channel == Channel::Queue { index: 0 }));
        // blackhole_cleanup_hardware: ASIC_STATE3.
        assert_eq!(
            kmd_queue_send(&mut fw, [0xA3, 0, 0, 0, 0, 0, 0, 0]).unwrap()[0],
            0
        );
        assert_eq!(fw.power_state().asic_state, 3);
        // The chip reset: queues empty, state back to boot.
        fw.reset();
        assert_eq!(fw.read32(0x8003_0408).unwrap() & 7, 5);
        let qcb = u64::from(fw.read32(0x8003_042C).unwrap());
        let base = u64::from(fw.read32(qcb).unwrap());
        for off in [0, 4, 0x10, 0x14, 0x18] {
            assert_eq!(fw.read32(base + off), Some(0));
        }
        assert_eq!(
            kmd_queue_send(&mut fw, [0x90, 1, 0, 0, 0, 0, 0, 0]).unwrap()[1],
            2
        );
    }

    #[test]
    fn bh_umd_queue_three_aiclk() {
        let mut fw = ArcFirmware::new(BH);
        let aiclk = |fw: &mut ArcFirmware| {
            let table = u64::from(fw.read32(0x8003_0434).unwrap());
            let data = u64::from(fw.read32(0x8003_0430).unwrap());
            get(&umd_telemetry(fw, table, data), 14)
        };
        assert_eq!(aiclk(&mut fw), 800, "blackhole::AICLK_IDLE_VAL");
        // set_clock_state: AICLK_GO_BUSY on the APPLICATION queue (3), exit
        // code 0, then AICLK must reach AICLK_LIMIT_MAX.
        assert_eq!(umd_bh_send(&mut fw, 3, 0x52, &[]).unwrap().0, 0);
        assert_eq!(aiclk(&mut fw), 1350);
        assert_eq!(umd_bh_send(&mut fw, 3, 0x54, &[]).unwrap().0, 0);
        assert_eq!(aiclk(&mut fw), 800);
        assert_eq!(fw.messages()[0].channel, Channel::Queue { index: 3 });
        // The doorbell bit is the firmware's to clear.
        assert_eq!(fw.read32(0x8003_0100).unwrap() & (0xF << 16), 0);
        // GET_AICLK answers in data[1].
        assert_eq!(umd_bh_send(&mut fw, 3, 0x34, &[]).unwrap().1[0], 800);
    }

    #[test]
    fn bh_unknown_message_is_not_recognized() {
        let mut fw = ArcFirmware::new(BH);
        // RESERVED_01 (tt-umd blackhole_arc.hpp) has no handler.
        assert_eq!(umd_bh_send(&mut fw, 3, 0x01, &[]), Err(0xFF));
        assert_eq!(
            kmd_queue_send(&mut fw, [0x01, 0, 0, 0, 0, 0, 0, 0]).unwrap()[0],
            0xFF
        );
        // Wormhole's NOP is not a Blackhole message either (no handler in
        // the firmware).
        assert_eq!(umd_bh_send(&mut fw, 3, 0x11, &[]), Err(0xFF));
    }

    #[test]
    fn bh_luwen_queue_two_with_its_doorbell() {
        let mut fw = ArcFirmware::new(BH);
        // luwen bh_arc_msg: SCRATCH_RAM[11] -> {queue_base, size | count <<
        // 8}; queue 2; trigger_int reads irq0_trig and refuses if bit 0 is
        // set.
        let info = u64::from(fw.read32(0x8003_042C).unwrap());
        let queue_base = fw.read32(info).unwrap();
        let sizing = fw.read32(info + 4).unwrap();
        let (size, count) = (sizing & 0xFF, (sizing >> 8) & 0xFF);
        assert_eq!((size, count), (4, 4));
        let base = u64::from(queue_base + 2 * (2 * size * 32 + 32));
        let wptr = fw.read32(base).unwrap();
        let entry = base + 4 * u64::from(8 + (wptr % size) * 8);
        let request = [0x90, 0x1234, 0, 0, 0, 0, 0, 0];
        for (i, w) in request.iter().enumerate() {
            fw.write32(entry + 4 * i as u64, *w);
        }
        fw.write32(base, (wptr + 1) % (2 * size));
        let misc = fw.read32(0x8003_0100).unwrap();
        assert_eq!((misc >> 16) & 1, 0);
        fw.write32(0x8003_0100, misc | (1 << 16));
        let rptr = fw.read32(base + 4).unwrap();
        assert_ne!(fw.read32(base + 20).unwrap(), rptr);
        let resp = base + 4 * u64::from(8 + (size + rptr % size) * 8);
        let status = fw.read32(resp).unwrap();
        assert!(status & 0xFF < 240);
        assert_eq!(fw.read32(resp + 4), Some(0x1235));
        // TEST also reports the queue's serial (zephyr handle_test).
        assert_eq!(fw.read32(resp + 8), Some(1));
    }

    #[test]
    fn bh_serial_counts_messages_and_can_be_set() {
        let mut fw = ArcFirmware::new(BH);
        umd_bh_send(&mut fw, 3, 0x90, &[0]).unwrap();
        umd_bh_send(&mut fw, 3, 0x90, &[0]).unwrap();
        assert_eq!(umd_bh_send(&mut fw, 3, 0x90, &[0]).unwrap().1[1], 3);
        umd_bh_send(&mut fw, 3, 0xBE, &[100]).unwrap();
        assert_eq!(umd_bh_send(&mut fw, 3, 0x90, &[0]).unwrap().1[1], 101);
        // Pointers wrap at twice the queue size, on every client's side.
        for i in 0..10u32 {
            assert_eq!(umd_bh_send(&mut fw, 3, 0x90, &[i]).unwrap().1[0], i + 1);
        }
        for i in 0..10u32 {
            let r = kmd_queue_send(&mut fw, [0x90, i, 0, 0, 0, 0, 0, 0]).unwrap();
            assert_eq!(r[1], i + 1);
        }
        // Queues count separately.
        assert_eq!(umd_bh_send(&mut fw, 1, 0x90, &[0]).unwrap().1[1], 1);
    }

    #[test]
    fn bh_luwen_telemetry_block_follows_the_tags() {
        let mut fw = ArcFirmware::new(BH);
        // luwen get_telemetry: SCRATCH_RAM[13]; data at table + 8 + 4n.
        let table = fw.read32(0x8003_0434).unwrap();
        let n = fw.read32(u64::from(table) + 4).unwrap();
        let data = table + 8 + 4 * n;
        // tt-kmd, tt-umd and tt-flash use SCRATCH_RAM[12] instead.
        assert_eq!(fw.read32(0x8003_0430), Some(data));
        let t: Vec<(u16, u32)> = (0..n)
            .map(|i| {
                let e = fw.read32(u64::from(table + 8 + 4 * i)).unwrap();
                (
                    e as u16,
                    fw.read32(u64::from(data + 4 * (e >> 16))).unwrap(),
                )
            })
            .collect();
        let board_id = (u64::from(get(&t, 1)) << 32) | u64::from(get(&t, 2));
        assert_eq!((board_id >> 36) & 0xF_FFFF, 0x40, "p150a");
        assert_eq!(get(&t, 28), 0x120C_0000);
        assert_eq!(get(&t, 14), 800);
        // tt-smi: DDR speed 16000 -> "16G"; pre-19.7 status 0x5555.
        assert_eq!(get(&t, 23), 16_000);
        assert_eq!(get(&t, 22), 0x5555);
        // tt-umd harvesting masks are the complements: none harvested.
        assert_eq!(!get(&t, 34) & 0x3FFF, 0);
        assert_eq!(!get(&t, 36) & 0xFF, 0);
        assert_eq!(get(&t, 38) & 3, 1, "PCIe instance 0 is the endpoint");
        // tt-smi requires TIMER_HEARTBEAT.
        get(&t, 32);
    }

    #[test]
    fn bh_kmd_telemetry_sysfs_and_hwmon() {
        let mut fw = ArcFirmware::new(BH);
        let t = kmd_telemetry(&mut fw);
        assert_eq!(kmd_card_type(get(&t, 1)), "p150a");
        assert_eq!(kmd_ver(28, get(&t, 28)), "18.12.0.0");
        for tag_id in [14, 15, 16, 26, 32, 41, 60, 61, 62] {
            get(&t, tag_id);
        }
        for (input, max) in kmd_hwmon(&t) {
            assert!(input < max);
        }
        assert_eq!(get(&t, 41), 1800);
    }

    #[test]
    fn bh_power_votes() {
        let mut fw = ArcFirmware::new(BH);
        // blackhole_set_power_state: 0x21 | validity << 8 | flags << 16.
        let on = 0x21 | (0x0F << 8) | (0x000F << 16);
        assert_eq!(
            kmd_queue_send(&mut fw, [on, 0, 0, 0, 0, 0, 0, 0]).unwrap()[0],
            0
        );
        assert_eq!(fw.aiclk_mhz(), 1350);
        let p = fw.power_state();
        assert_eq!(p.flags & 0xF, 0xF);
        // Only the valid flags change: validity 1 turns AICLK down alone.
        let aiclk_off = 0x21 | (0x01 << 8);
        kmd_queue_send(&mut fw, [aiclk_off, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(fw.aiclk_mhz(), 800);
        assert_eq!(fw.power_state().flags & 0xE, 0xE);
        // A GO_BUSY vote keeps AICLK up whatever the flags say.
        umd_bh_send(&mut fw, 3, 0x52, &[]).unwrap();
        assert_eq!(fw.aiclk_mhz(), 1350);
        let votes: Vec<PowerSetting> = fw
            .messages()
            .iter()
            .filter_map(|m| m.power_setting())
            .collect();
        assert_eq!(votes.len(), 2);
        assert_eq!((votes[0].flags_valid, votes[0].flags), (15, 0xF));
        assert_eq!((votes[1].flags_valid, votes[1].flags), (1, 0));
    }

    #[test]
    fn bh_trigger_reset_levels() {
        let mut fw = ArcFirmware::new(BH);
        assert_eq!(umd_bh_send(&mut fw, 3, 0x56, &[0]).unwrap().0, 0);
        assert_eq!(fw.pending_reset().unwrap().level, ResetLevel::Asic);
        // An unknown level is refused with the level as exit code in the
        // low byte: tt-umd still calls it a success (status < 240), tt-kmd
        // does not (header != 0).
        let mut fw = ArcFirmware::new(BH);
        assert!(umd_bh_send(&mut fw, 3, 0x56, &[7]).is_ok());
        assert_eq!(fw.messages()[0].response[0], 7);
        assert!(!fw.messages()[0].succeeded());
        assert_eq!(fw.pending_reset(), None);
    }

    #[test]
    fn bh_hung_firmware_leaves_requests_queued() {
        let mut fw = ArcFirmware::new(BH);
        fw.set_responding(false);
        assert_eq!(kmd_queue_send(&mut fw, [0x90, 5, 0, 0, 0, 0, 0, 0]), None);
        let qcb = u64::from(fw.read32(0x8003_042C).unwrap());
        let base = u64::from(fw.read32(qcb).unwrap());
        assert_eq!(fw.read32(base), Some(1), "request written");
        assert_eq!(fw.read32(base + 0x10), Some(0), "not taken");
        // Still readable: the ARC's bus answers.
        assert_eq!(fw.read32(0x8003_0408).unwrap() & 7, 5);
        fw.set_responding(true);
        assert_eq!(fw.read32(base + 0x10), Some(1));
        assert_eq!(fw.read32(base + 0x14), Some(1));
        assert_eq!(fw.messages()[0].response[1], 6);
    }

    /// tt-kmd 2.11 `test/smc_msg.cpp`: TEST answers its argument plus one
    /// with status 0 on both chips' queues; 0x02 is no message type on
    /// either and answers a nonzero status.
    #[test]
    fn queue_test_and_unknown_on_both_chips() {
        for arch in [WH, BH] {
            let mut fw = ArcFirmware::new(arch);
            let r = kmd_queue_send(&mut fw, [0x90, 42, 0, 0, 0, 0, 0, 0]).unwrap();
            assert_eq!((r[0], r[1]), (0, 43), "{arch:?} TEST");
            let r = kmd_queue_send(&mut fw, [0x02, 0, 0, 0, 0, 0, 0, 0]).unwrap();
            assert_ne!(r[0], 0, "{arch:?} unknown type");
        }
    }

    /// `arc-move-queues`: the control block publishes the queues' new
    /// place, a client that looks the queue up (tt-kmd, every message) is
    /// answered there, and one that writes to the old place is not (it is
    /// cleared). Moving again, or a reboot, puts them back.
    #[test]
    fn moved_queues_are_published_and_served_there() {
        for arch in [WH, BH] {
            let (old, qcb) = match arch {
                WH => (WH_QUEUE_ADDR, WH_QCB_ADDR),
                _ => (BH_QUEUES_ADDR, BH_QCB_ADDR),
            };
            // Wormhole publishes an offset into CSM.
            let published = |a: u32| if arch == WH { a - CSM_BASE } else { a };
            let csm = |a: u32| match arch {
                WH => kmd_csm(WH, a),
                _ => u64::from(a),
            };
            let mut fw = ArcFirmware::new(arch);
            kmd_queue_send(&mut fw, [0x90, 1, 0, 0, 0, 0, 0, 0]).unwrap();
            assert_eq!(fw.read32(csm(old)), Some(1), "{arch:?}: request wptr");
            let new = fw.move_queues();
            assert_ne!(new, old);
            assert_eq!(fw.read32(csm(qcb)), Some(published(new)), "{arch:?}");
            assert_eq!(fw.read32(csm(old)), Some(0), "{arch:?}: old place cleared");
            // A request written at the old place is not served (the
            // doorbell of the next send rings for it too).
            fw.write32(csm(old + 32), 0x90);
            fw.write32(csm(old), 1);
            let r = kmd_queue_send(&mut fw, [0x90, 7, 0, 0, 0, 0, 0, 0]).unwrap();
            assert_eq!((r[0], r[1]), (0, 8), "{arch:?}: served at the new place");
            assert_eq!(fw.read32(csm(old + 0x10)), Some(0), "{arch:?}: not taken");
            assert_eq!(
                fw.read32(csm(old + 0x14)),
                Some(0),
                "{arch:?}: not answered"
            );
            assert_eq!(fw.move_queues(), old, "{arch:?}: moved back");
            fw.move_queues();
            fw.reset();
            assert_eq!(
                fw.read32(csm(qcb)),
                Some(published(old)),
                "{arch:?}: reboot"
            );
        }
    }

    /// TEST messages are counted per channel they came through, across a
    /// chip reset: tt-kmd's queue 0, tt-umd's Blackhole queue 3 and
    /// Wormhole mailbox (SCRATCH[5]); unknown types and other codes are
    /// not counted.
    #[test]
    fn tests_are_counted_per_channel() {
        let mut fw = ArcFirmware::new(WH);
        kmd_queue_send(&mut fw, [0x90, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(umd_wh_send(&mut fw, 0xAA90, &[5, 0]), (0, 6, 0));
        assert_eq!(umd_wh_send(&mut fw, 0xAA90, &[7, 1]).1, 0x1_0008);
        kmd_queue_send(&mut fw, [0x02, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(kmd_wh_send(&mut fw, msg::NOP, 0, 0), Ok(0));
        fw.reset();
        kmd_queue_send(&mut fw, [0x90, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        let names: Vec<String> = fw
            .tests_answered()
            .iter()
            .map(|(c, n)| format!("{c}={n}"))
            .collect();
        assert_eq!(names, ["queue0=2", "mailbox5=2", "mailbox2=0"]);

        let mut fw = ArcFirmware::new(BH);
        kmd_queue_send(&mut fw, [0x90, 1, 0, 0, 0, 0, 0, 0]).unwrap();
        for i in 0..3 {
            assert_eq!(
                umd_bh_send(&mut fw, 3, 0x90, &[10 + i]).unwrap().1[0],
                11 + i
            );
        }
        assert!(umd_bh_send(&mut fw, 2, 0x02, &[]).is_err());
        let names: Vec<String> = fw
            .tests_answered()
            .iter()
            .map(|(c, n)| format!("{c}={n}"))
            .collect();
        assert_eq!(names, ["queue0=1", "queue1=0", "queue2=0", "queue3=3"]);
    }

    /// `arc-slow`: the queue is served on the first access after the
    /// latency, not inside the doorbell; mailboxes stay immediate.
    #[test]
    fn slow_firmware_answers_the_queue_late() {
        for arch in [WH, BH] {
            let mut fw = ArcFirmware::new(arch);
            fw.set_queue_latency(Duration::from_secs(3600));
            assert_eq!(kmd_queue_send(&mut fw, [0x90, 1, 0, 0, 0, 0, 0, 0]), None);
            if arch == WH {
                assert_eq!(kmd_wh_send(&mut fw, msg::NOP, 0, 0), Ok(0), "mailbox");
            }
            assert!(fw
                .messages()
                .iter()
                .all(|m| m.channel != Channel::Queue { index: 0 }));
            // Back to normal: what waited is served at once.
            fw.set_queue_latency(Duration::ZERO);
            let m = fw.messages().last().unwrap().clone();
            assert_eq!((m.channel, m.response[1]), (Channel::Queue { index: 0 }, 2));

            // A short latency passes by itself (with a generous bound: the
            // host may be slow).
            fw.set_queue_latency(Duration::from_millis(1));
            // (What it pops is TEST 1's response, left in the queue above.)
            kmd_queue_send(&mut fw, [0x90, 7, 0, 0, 0, 0, 0, 0]);
            let start = Instant::now();
            while fw.messages().last().unwrap().response[1] != 8 {
                assert!(start.elapsed() < Duration::from_secs(10));
                fw.read32(0x8_8003_0060).or(fw.read32(0x8003_0060));
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    #[test]
    fn bh_msi_fifo_only_a_zero_rings() {
        let mut fw = ArcFirmware::new(BH);
        let info = u64::from(fw.read32(0x8003_042C).unwrap());
        let base = u64::from(fw.read32(info).unwrap());
        fw.write32(base + 32, 0x90);
        fw.write32(base, 1);
        fw.write32(0x800B_0000, 5);
        assert_eq!(fw.read32(base + 0x10), Some(0));
        fw.write32(0x800B_0000, 0);
        assert_eq!(fw.read32(base + 0x10), Some(1));
    }

    // ---- BAR windows and address decoding ----

    #[test]
    fn bar_windows_reach_the_arc_tile() {
        // luwen wormhole-axi-pci.bin against wormhole-axi-noc.bin.
        for (pci, noc) in [
            (0x1FF3_0060u64, 0x8_8003_0060u64),
            (0x1FF3_0074, 0x8_8003_0074),
            (0x1FF3_0100, 0x8_8003_0100),
            (0x1FE8_0000, 0x8_1000_0000),
            (0x1FEF_84D4, 0x8_1007_84D4),
        ] {
            assert_eq!(bar0_to_arc(WH, pci), Some(noc));
        }
        assert_eq!(bar0_to_arc(WH, 0x1FE7_FFFC), None);
        assert_eq!(bar0_to_arc(WH, 0), None);
        // tt-kmd wormhole.c: RESET_UNIT_START, ARC_CSM_START in BAR4.
        assert_eq!(bar4_to_arc(WH, 0x1F3_0000), Some(0x8_8003_0000));
        assert_eq!(bar4_to_arc(WH, 0x1E8_0000), Some(0x8_1000_0000));
        assert_eq!(bar4_to_arc(BH, 0x1F3_0000), None);
        // tt-umd Blackhole read_from_arc_apb over AXI.
        assert_eq!(bar0_to_arc(BH, 0x1FF3_042C), Some(0x8003_042C));
        assert_eq!(bar0_to_arc(BH, 0x1FE8_0000), None);
    }

    #[test]
    fn nothing_outside_the_arc_address_map() {
        let mut wh = ArcFirmware::new(WH);
        assert_eq!(wh.read32(0), None);
        assert_eq!(wh.read32(0x8_0000_0000), None);
        assert!(!wh.write32(0x8_3000_0000, 1));
        let mut bh = ArcFirmware::new(BH);
        assert_eq!(bh.read32(0x2000_0000), None);
        assert_eq!(bh.read32(0x8010_0000), None);
        // The NIU's own base is the NOC model's, not the firmware's.
        assert_eq!(wh.read32(0xF_FFB2_002C), None);
        assert_eq!(bh.read32(0xFFFF_FFFF_FF00_0044), None);
    }

    #[test]
    fn host_writes_to_telemetry_do_not_stick() {
        let mut fw = ArcFirmware::new(WH);
        let addr = 0x8_1007_8D60 + 49 * 4;
        fw.write32(addr, 0);
        assert_eq!(fw.read32(addr), Some(0x120C_0000));
        // Elsewhere CSM is memory.
        fw.write32(0x8_1000_0100, 0xDEAD_BEEF);
        assert_eq!(fw.read32(0x8_1000_0100), Some(0xDEAD_BEEF));
        assert_eq!(fw.read32(0x8_2000_0100), Some(0xDEAD_BEEF));
        fw.reset();
        assert_eq!(fw.read32(0x8_1000_0100), Some(0));
    }

    #[test]
    fn wh_dbi_switch_follows_scratch_6_and_7() {
        let mut fw = ArcFirmware::new(WH);
        assert_eq!(fw.wh_dbi_enabled(), (false, false));
        // tt-kmd open_dbi / close_dbi.
        fw.write32(kmd_wh_reg(0x60 + 6 * 4), 0x0020_0000);
        fw.write32(kmd_wh_reg(0x60 + 7 * 4), 0x0020_0000);
        assert_eq!(fw.wh_dbi_enabled(), (true, true));
        fw.write32(kmd_wh_reg(0x60 + 6 * 4), 0);
        assert_eq!(fw.wh_dbi_enabled(), (false, true));
    }

    #[test]
    fn smbus_and_tag_index_constants_are_the_clients() {
        // Spot checks against literals of luwen's get_telemetry and tt-kmd
        // telemetry.h, so renumbering here cannot go unnoticed.
        assert_eq!(smbus::AICLK, 24);
        assert_eq!(smbus::FW_BUNDLE_VERSION, 49);
        assert_eq!(tag::TDP_LIMIT_MAX, 64);
    }
}

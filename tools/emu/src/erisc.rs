// SPDX-License-Identifier: GPL-2.0
//! The Ethernet cores' base firmware, as far as the host reads it.
//!
//! Each Ethernet tile runs firmware on its ERISC cores that trains the link
//! and keeps a few words in the tile's L1 that the host tools poll: a
//! heartbeat, the link's training status, the firmware's version and the
//! boot parameters it was started with. tt-umd waits on them before it
//! uses a chip (`wait_eth_cores_training`, then topology discovery) and
//! luwen before it calls a Wormhole initialised (its ETH check).
//!
//! An emulated card has no cable on any port: every link is trained and
//! found not connected, and the firmware goes on running (heartbeat
//! ticking), the state of a lone n150 or p150 on a bench. The words below
//! are served over whatever the host wrote to the same L1 addresses; the
//! rest of the L1 is plain memory ([`crate::noc`]).
//!
//! The heartbeat advances by one on every read here; the real one counts
//! on its own, which the readers cannot tell apart (they only look for a
//! change).

use crate::telemetry::Board;
use crate::Arch;

/// Wormhole base firmware (ETH firmware 6.0 and later).
mod wormhole {
    /// tt-umd `wormhole::ETH_HEARTBEAT_ADDR`; luwen `EthAddresses`
    /// `heartbeat` for firmware 6.0 and later.
    pub const HEARTBEAT: u64 = 0x1C;
    /// tt-umd `erisc_firmware::BASE_FW_HEARTBEAT_SIGNATURE`: the upper 16
    /// bits of a running base firmware's heartbeat.
    pub const HEARTBEAT_SIGNATURE: u32 = 0xABCD;
    /// tt-umd `wormhole::ETH_FW_VERSION_ADDR`; luwen `EthAddresses`
    /// `version`.
    pub const FW_VERSION: u64 = 0x210;
    /// `boot_params_t` is at 0x1000 (luwen `boot_params`); its word 2 is
    /// `port_disable_mask`, bit N disabling port N (tt-umd
    /// `ETH_BOOT_PARAMS_PORT_DISABLE_ADDR`). No port is disabled here.
    pub const PORT_DISABLE_MASK: u64 = 0x1008;
    /// `node_info` is at 0x1100 (luwen, firmware 5.0 and later); its word 1
    /// is the training status (tt-umd `ETH_TRAIN_STATUS_ADDR`: 0 in
    /// progress, 1 success, 2 fail), word 2 this chip's rack and shelf
    /// coordinates (luwen `get_local_chip_coord`: all 0 for a lone chip).
    pub const TRAIN_STATUS: u64 = 0x1104;
    pub const LOCAL_CHIP_COORD: u64 = 0x1108;
    /// Training of a port with nothing plugged in fails with
    /// `LINK_INACTIVE_TIMEOUT_SIGDET` (11) in the link error status (tt-umd
    /// `ETH_LINK_ERR_STATUS_ADDR`; 11 and up mean "not connected" to it).
    pub const TRAIN_FAILED: u32 = 2;
    pub const LINK_ERR_STATUS: u64 = 0x1440;
    pub const LINK_INACTIVE_TIMEOUT_SIGDET: u32 = 11;
    /// Set to 1 while a retrain runs (tt-umd `ETH_RETRAIN_ADDR`).
    pub const RETRAIN: u64 = 0x1EFC;
}

/// Blackhole base firmware (`eth_status_t` and the chip info block).
mod blackhole {
    /// tt-umd `blackhole::BOOT_RESULTS_ADDR`: `eth_status_t`, whose word 1
    /// is `port_status` (`PORT_UNKNOWN` 0 while training, `PORT_UP` 1,
    /// `PORT_DOWN` 2, `PORT_UNUSED` 3).
    pub const PORT_STATUS: u64 = 0x7CC04;
    pub const PORT_DOWN: u32 = 2;
    /// This board's id, high and low words (tt-umd
    /// `topology_discovery_blackhole.cpp` reads them as the local board id).
    pub const LOCAL_BOARD_ID_HIGH: u64 = 0x7CFC4;
    pub const LOCAL_BOARD_ID_LOW: u64 = 0x7CFC8;
}

/// The firmware of all Ethernet cores of one chip; what it reports of the
/// board (ids, versions) is read from the ARC firmware's [`Board`].
pub struct EriscFirmware {
    /// Per channel; see the module's note on the heartbeat.
    heartbeats: Vec<u32>,
}

impl EriscFirmware {
    pub fn new(channels: usize) -> Self {
        EriscFirmware {
            heartbeats: vec![0; channels],
        }
    }

    /// The firmware starts again (a chip reset): heartbeats from 0.
    pub fn reset(&mut self) {
        self.heartbeats.iter_mut().for_each(|h| *h = 0);
    }

    /// The 32-bit word at `addr` of channel `channel`'s L1 on `board` if
    /// the firmware keeps it, else `None` (plain memory).
    pub fn read_word(&mut self, board: &Board, channel: u8, addr: u64) -> Option<u32> {
        match board.arch {
            Arch::Wormhole => match addr {
                wormhole::HEARTBEAT => {
                    let beat = self.heartbeats.get_mut(usize::from(channel))?;
                    *beat = beat.wrapping_add(1);
                    Some(wormhole::HEARTBEAT_SIGNATURE << 16 | (*beat & 0xFFFF))
                }
                wormhole::FW_VERSION => Some(board.eth_fw_version),
                wormhole::PORT_DISABLE_MASK => Some(0),
                wormhole::TRAIN_STATUS => Some(wormhole::TRAIN_FAILED),
                wormhole::LOCAL_CHIP_COORD => Some(0),
                wormhole::LINK_ERR_STATUS => Some(wormhole::LINK_INACTIVE_TIMEOUT_SIGDET),
                wormhole::RETRAIN => Some(0),
                _ => None,
            },
            Arch::Blackhole => match addr {
                blackhole::PORT_STATUS => Some(blackhole::PORT_DOWN),
                blackhole::LOCAL_BOARD_ID_HIGH => Some((board.board_id >> 32) as u32),
                blackhole::LOCAL_BOARD_ID_LOW => Some(board.board_id as u32),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wormhole_link_not_connected_heartbeat_running() {
        let n150 = Board::n150();
        let mut fw = EriscFirmware::new(16);
        // tt-umd: not in retrain, training failed with a "not connected"
        // error, so the port is skipped, not waited for.
        assert_eq!(fw.read_word(&n150, 3, 0x1EFC), Some(0));
        assert_eq!(fw.read_word(&n150, 3, 0x1104), Some(2));
        assert!(fw.read_word(&n150, 3, 0x1440).unwrap() >= 11);
        assert_eq!(fw.read_word(&n150, 3, 0x1008).map(|m| m & 1 << 3), Some(0));
        // luwen and tt-umd: the heartbeat changes between two reads and
        // carries the base firmware's signature.
        let a = fw.read_word(&n150, 3, 0x1C).unwrap();
        let b = fw.read_word(&n150, 3, 0x1C).unwrap();
        assert_ne!(a, b);
        assert_eq!((a >> 16, b >> 16), (0xABCD, 0xABCD));
        assert_ne!(a, 0);
        // luwen compares the low 24 bits with the telemetry's version.
        assert_eq!(fw.read_word(&n150, 0, 0x210), Some(n150.eth_fw_version));
        assert_eq!(fw.read_word(&n150, 0, 0x2000), None);
        fw.reset();
        assert_eq!(fw.read_word(&n150, 3, 0x1C), Some(0xABCD_0001));
    }

    #[test]
    fn blackhole_port_down_and_board_id() {
        let board = Board::p150a();
        let mut fw = EriscFirmware::new(14);
        // tt-umd waits while the port status is PORT_UNKNOWN (0).
        assert_eq!(fw.read_word(&board, 5, 0x7CC04), Some(2));
        let hi = u64::from(fw.read_word(&board, 5, 0x7CFC4).unwrap());
        let lo = u64::from(fw.read_word(&board, 5, 0x7CFC8).unwrap());
        assert_eq!(hi << 32 | lo, board.board_id);
        assert_eq!(fw.read_word(&board, 5, 0x1C), None);
    }
}

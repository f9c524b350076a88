// SPDX-License-Identifier: GPL-2.0

//! RESET_DEVICE (tt-kmd 2.10's command, flags and results).
//!
//! - `RESTORE_STATE` (0): puts back the configuration space saved at probe
//!   (after a reset the card went through by other means) and saves it
//!   again; fails (`result` 1) if the function does not answer as a
//!   Tenstorrent card. A reset the PCI core ran (sysfs `reset`) uses the
//!   saved state up; the driver's copy of it ([`SavedState`]) is put back
//!   then, where tt-kmd 2.10 fails.
//! - `RESET_PCIE_LINK` (1): every mapping of the card is zapped (faulted in
//!   again by the next access), then the link is hot-reset through the
//!   slot or bus (`pci_reset_bus()`, which saves and restores the
//!   configuration space around it). No file is fenced, as in tt-kmd.
//! - `CONFIG_WRITE` (2), `USER_RESET` (3), `ASIC_RESET` (4),
//!   `ASIC_DMC_RESET` (5): the card's other files are fenced first
//!   (`Card::fence_all_but`, src/card.rs), then: 2 fires the PCIe
//!   interface timer (which makes a Blackhole reset itself); 3 only sets
//!   the reset marker, userspace resets the chip; 4 and 5 set the marker
//!   and ask the ARC firmware to reset the chip (Wormhole: NOP then
//!   TRIGGER_RESET through the mailbox, argument 3 for 5; Blackhole 4: the
//!   interface timer, 5: TEST then TRIGGER_RESET with 3 through the
//!   message queue). After 3-5 the card needs POST_RESET: until then
//!   every file may only ask for device and driver info or reset (other
//!   commands `ENODEV`), even if the reset failed, as in tt-kmd.
//! - `POST_RESET` (6): succeeds when the reset marker (Parity Error
//!   Response in the Command register, which a chip reset clears) is clear;
//!   after 3-5 it also restores the configuration space and ends the wait.
//!
//! The reset marker and the interface timer are tt-kmd 2.10's `pcie.c`
//! (`set_reset_marker`, `pcie_timer_interrupt`: config 0x934 = 1, then
//! 0x930 = 0x11); the firmware messages its `wormhole_reset` and
//! `blackhole_reset`. Unlike tt-kmd, a Wormhole whose ARC does not answer
//! the NOP is not hot-reset in a loop (its `auto_reset_timeout`): the reset
//! fails at once (`result` 1).
//!
//! Resets 1-5 are refused (`EBUSY`) while a window is exported as a
//! dma-buf (src/card.rs): importers reach the chip through it.
//!
//! What the command does to the rest of the card (fences, the firmware's
//! state after a reset) is `Card::reset_device` (src/card.rs); this file
//! holds what it does to the PCI function and the chip.
//!
//! The command reads only `in` and, as tt-kmd's, clears the caller's
//! `output_size_bytes` bytes of `out` before writing `output_size_bytes` 8
//! and `result` (0 success, 1 failure) into them. Resets of a card are one
//! at a time; a reset takes no lock a waiter may hold: waiters are woken
//! and leave, they are not waited for.

use crate::{
    chip::{
        regs::{
            INTERFACE_TIMER_CONTROL,
            INTERFACE_TIMER_TARGET,
            PCI_COMMAND,
            PCI_VENDOR_ID, //
        },
        ChipReset,
        VENDOR_TENSTORRENT, //
    },
    rust_ext::{
        bound::WhileBound,
        pci::{
            reset_bus,
            restore_state,
            save_state,
            SavedState, //
        },
    },
    smc::Firmware,
};
use core::sync::atomic::{
    AtomicBool,
    Ordering, //
};
use kernel::{
    device::{
        Bound,
        Device, //
    },
    io::Io,
    pci,
    prelude::*,
    time::Delta, //
};

pub(crate) const RESET_RESTORE_STATE: u32 = 0;
pub(crate) const RESET_PCIE_LINK: u32 = 1;
pub(crate) const RESET_CONFIG_WRITE: u32 = 2;
pub(crate) const RESET_USER: u32 = 3;
pub(crate) const RESET_ASIC: u32 = 4;
pub(crate) const RESET_ASIC_DMC: u32 = 5;
pub(crate) const RESET_POST_RESET: u32 = 6;

/// ARC firmware messages of a reset: Wormhole mailbox NOP and both chips'
/// TRIGGER_RESET, Blackhole's queue TEST; TRIGGER_RESET's argument 3 also
/// resets the board management controller.
const MSG_NOP: u8 = 0x11;
const MSG_TRIGGER_RESET: u8 = 0x56;
const MSG_TEST: u8 = 0x90;
const TRIGGER_RESET_WITH_DMC: u16 = 3;
/// How long Wormhole's ARC may take to answer the NOP (tt-kmd: 1000 µs).
const NOP_TIMEOUT: Delta = Delta::from_millis(1);

/// A card's PCI function, for the commands that reach its configuration
/// space; gone when the card is unbound.
pub(crate) struct CardFunction {
    /// The configuration space as saved at probe, which RESTORE_STATE and
    /// POST_RESET put back.
    bound: WhileBound<SavedState>,
    /// A reset of the chip (3-5) was asked for and no POST_RESET followed:
    /// the card is not usable until one does.
    needs_post_reset: AtomicBool,
}

impl CardFunction {
    /// The function of bound `pdev`, its configuration space saved.
    pub(crate) fn new(pdev: &pci::Device<Bound>) -> Result<Self> {
        save_state(pdev);
        let saved = SavedState::store(pdev)?;
        let dev: &Device<Bound> = pdev.as_ref();
        Ok(Self {
            bound: WhileBound::new(dev, saved)?,
            needs_post_reset: AtomicBool::new(false),
        })
    }

    fn with<R>(&self, f: impl FnOnce(&pci::Device<Bound>) -> Result<R>) -> Result<R> {
        self.with_saved(|pdev, _| f(pdev))
    }

    fn with_saved<R>(
        &self,
        f: impl FnOnce(&pci::Device<Bound>, &SavedState) -> Result<R>,
    ) -> Result<R> {
        self.bound.with(|dev, saved| {
            let pdev: &pci::Device<Bound> = dev.try_into()?;
            f(pdev, saved)
        })
    }

    /// Whether the card waits for POST_RESET after a reset of its chip.
    pub(crate) fn needs_post_reset(&self) -> bool {
        self.needs_post_reset.load(Ordering::Acquire)
    }

    /// RESTORE_STATE: puts back the configuration space saved at probe, if
    /// the function answers as a Tenstorrent card.
    pub(crate) fn restore_state(&self) -> Result<bool> {
        self.with_saved(|pdev, saved| {
            let vendor = pdev.config_space().try_read(PCI_VENDOR_ID)?.vendor_id();
            Ok(vendor == VENDOR_TENSTORRENT && restore_state(pdev, saved))
        })
    }

    fn marker_clear(&self) -> Result<bool> {
        self.with(|pdev| Ok(!pdev.config_space().try_read(PCI_COMMAND)?.parity()))
    }

    /// Sets the reset marker, which the chip's reset clears.
    fn set_marker(&self) -> Result {
        self.with(|pdev| {
            pdev.config_space()
                .try_update(PCI_COMMAND, |command| command.with_parity(true))
        })
    }

    /// Fires the PCIe interface timer: a Blackhole resets itself.
    pub(crate) fn fire_interface_timer(&self) -> Result {
        self.with(|pdev| {
            let config = pdev.config_space();
            config.try_write_reg(INTERFACE_TIMER_TARGET::zeroed().with_value(1u32))?;
            config.try_write_reg(
                INTERFACE_TIMER_CONTROL::zeroed()
                    .with_en(true)
                    .with_force_pending(true),
            )
        })
    }

    /// The hot reset puts the configuration space back itself (and uses up
    /// the state saved at probe): it is saved again for RESTORE_STATE.
    pub(crate) fn reset_link(&self) -> Result<bool> {
        self.with(|pdev| {
            reset_bus(pdev)?;
            let vendor = pdev.config_space().try_read(PCI_VENDOR_ID)?.vendor_id();
            save_state(pdev);
            Ok(vendor == VENDOR_TENSTORRENT)
        })
    }

    /// Resets the chip (flags 3-5): sets the reset marker (3), or has the
    /// firmware reset the chip (4, 5), `firmware`'s: whether that went
    /// out. From here the card waits for POST_RESET, also when the reset
    /// fails: the chip's state is unknown.
    pub(crate) fn reset_chip(&self, flags: u32, firmware: &Firmware<'_>) -> Result<bool> {
        self.needs_post_reset.store(true, Ordering::Release);
        match flags {
            RESET_USER => self.set_marker().map(|()| true),
            _ => reset_chip(self, firmware, flags == RESET_ASIC_DMC),
        }
    }

    /// POST_RESET: whether the reset marker is clear and, after a reset of
    /// the chip, the configuration space is back.
    pub(crate) fn post_reset(&self) -> Result<PostReset> {
        if !self.needs_post_reset() {
            return Ok(if self.marker_clear()? {
                PostReset::Clear
            } else {
                PostReset::Failed
            });
        }
        self.needs_post_reset.store(false, Ordering::Release);
        Ok(if self.marker_clear()? && self.restore_state()? {
            PostReset::ChipRebooted
        } else {
            PostReset::Failed
        })
    }
}

/// What POST_RESET found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PostReset {
    /// The reset marker is still set, or the configuration space could not
    /// be put back: the command fails.
    Failed,
    /// The marker is clear; no reset of the chip was waited for.
    Clear,
    /// A reset of the chip is over and the configuration space is back:
    /// the firmware rebooted.
    ChipRebooted,
}

/// Asks the firmware to reset the chip (flags 4 and 5), the reset marker
/// set first, the way the chip's table says: whether the request went out.
fn reset_chip(function: &CardFunction, firmware: &Firmware<'_>, with_dmc: bool) -> Result<bool> {
    let chip = firmware.family().chip();
    let (how, level) = if with_dmc {
        (chip.asic_dmc_reset, TRIGGER_RESET_WITH_DMC)
    } else {
        (chip.asic_reset, 0)
    };
    match how {
        ChipReset::ArcMailbox => {
            if firmware
                .wh_mailbox(MSG_NOP, (0, 0), Some(NOP_TIMEOUT))
                .is_err()
            {
                return Ok(false);
            }
            function.set_marker()?;
            // The chip resets instead of answering.
            Ok(firmware
                .wh_mailbox(MSG_TRIGGER_RESET, (level, 0), None)
                .is_ok())
        }
        ChipReset::InterfaceTimer => {
            function.set_marker()?;
            function.fire_interface_timer()?;
            Ok(true)
        }
        ChipReset::ArcQueue => {
            // A NOC that does not carry this will not carry the reset.
            let mut test = [0u32; 8];
            test[0] = MSG_TEST.into();
            match firmware.send(&test) {
                Ok(answer) if answer[0] & 0xFF == 0 => {}
                _ => return Ok(false),
            }
            function.set_marker()?;
            let mut trigger = [0u32; 8];
            trigger[0] = MSG_TRIGGER_RESET.into();
            trigger[1] = level.into();
            // Its answer may not come: the chip is resetting.
            let _ = firmware.send(&trigger);
            Ok(true)
        }
    }
}

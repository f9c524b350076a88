// SPDX-License-Identifier: GPL-2.0

//! RESET_DEVICE (tt-kmd 2.10's command and flags), as far as this driver
//! goes today.
//!
//! - `RESTORE_STATE` (0): puts back the configuration space saved at probe
//!   (after a reset the card went through by other means) and saves it
//!   again; fails (`result` 1) if the function does not answer as a
//!   Tenstorrent card or nothing was saved. tt-kmd also re-initialises its
//!   hardware state here; this driver keeps none that a reset loses.
//! - `POST_RESET` (6): succeeds when the reset marker (Parity Error
//!   Response in the Command register, which the resetting tools set and a
//!   reset clears) is clear.
//! - The resets themselves (1-5: PCIe link, config write, user, ASIC, ASIC
//!   and board controller) answer `EOPNOTSUPP`: they need the other files
//!   of the card fenced first (every later command on them `ENODEV`, their
//!   windows and mappings revoked), which is not done yet.
//!
//! The command reads only `in` and, as tt-kmd's, clears the caller's
//! `output_size_bytes` bytes of `out` before writing `output_size_bytes` 8
//! and `result` (0 success, 1 failure) into them.

use crate::rust_ext::{
    bound::WhileBound,
    pci::{
        restore_state,
        save_state, //
    },
};
use kernel::{
    device::{
        Bound,
        Device, //
    },
    io::Io,
    pci,
    prelude::*,
};

pub(crate) const RESET_RESTORE_STATE: u32 = 0;
pub(crate) const RESET_POST_RESET: u32 = 6;
/// The flags of the resets themselves (tt-kmd 2.10 ioctl.h).
const RESET_FIRST: u32 = 1;
const RESET_LAST: u32 = 5;

const VENDOR_TENSTORRENT: u16 = 0x1e52;
const PCI_COMMAND: usize = 0x04;
/// The Command register's Parity Error Response bit: tt-kmd's reset marker.
const PCI_COMMAND_PARITY: u16 = 1 << 6;

/// A card's PCI function, for the commands that reach its configuration
/// space; gone when the card is unbound.
pub(crate) struct CardFunction {
    bound: WhileBound<()>,
}

impl CardFunction {
    /// The function of bound `pdev`, its configuration space saved.
    pub(crate) fn new(pdev: &pci::Device<Bound>) -> Result<Self> {
        save_state(pdev);
        let dev: &Device<Bound> = pdev.as_ref();
        Ok(Self {
            bound: WhileBound::new(dev, ())?,
        })
    }

    fn with<R>(&self, f: impl FnOnce(&pci::Device<Bound>) -> Result<R>) -> Result<R> {
        self.bound.with(|dev, ()| {
            let pdev: &pci::Device<Bound> = dev.try_into()?;
            f(pdev)
        })
    }

    /// RESET_DEVICE with `flags`: whether it succeeded (the command's
    /// `result` is its negation). `EINVAL` for an unknown flag, `EOPNOTSUPP`
    /// for the resets not done yet, `ENODEV` once the card is unbound.
    pub(crate) fn reset(&self, flags: u32) -> Result<bool> {
        match flags {
            RESET_RESTORE_STATE => self.with(|pdev| {
                let vendor = pdev.config_space().try_read16(0)?;
                Ok(vendor == VENDOR_TENSTORRENT && restore_state(pdev))
            }),
            RESET_POST_RESET => self.with(|pdev| {
                let command = pdev.config_space().try_read16(PCI_COMMAND)?;
                Ok(command & PCI_COMMAND_PARITY == 0)
            }),
            RESET_FIRST..=RESET_LAST => Err(EOPNOTSUPP),
            _ => Err(EINVAL),
        }
    }
}

// SPDX-License-Identifier: GPL-2.0

//! What anyone may read of a card, to see who holds what: sysfs (the
//! locks, windows, DMA, power votes, firmware messages, telemetry, the
//! `tenstorrent` class's files), hwmon (the telemetry's sensors), procfs (`/proc/driver/tenstorrent/N/`:
//! the openers' pids, the windows in use), debugfs (the waiters, the
//! tuning knobs tests use) and each open file's fdinfo. None of them
//! changes anything: they read the card's state under its own locks and
//! never hold one across a copy to the reader.

pub(crate) mod debugfs;
pub(crate) mod fdinfo;
pub(crate) mod hwmon;
pub(crate) mod procfs;
pub(crate) mod sysfs;
pub(crate) mod tlb;

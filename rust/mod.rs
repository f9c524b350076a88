// SPDX-License-Identifier: GPL-2.0

//! Kernel abstractions the driver needs that Linux 7.3 does not have yet.
//!
//! Each one is a small safe wrapper over the C API, written so that it could
//! move into `rust/kernel/` as it is. The driver in `src/` uses only these
//! and the `kernel` crate; every `unsafe` block of the module lives here.

pub(crate) mod abi;
pub(crate) mod bound;
pub(crate) mod chrdev;
pub(crate) mod device;
pub(crate) mod dma;
pub(crate) mod dmabuf;
pub(crate) mod hwmon;
pub(crate) mod mm;
pub(crate) mod pci;
pub(crate) mod pci_ids;
pub(crate) mod procfs;
pub(crate) mod reboot;
pub(crate) mod sysfs;
pub(crate) mod task;
pub(crate) mod time;
pub(crate) mod workqueue;

// SPDX-License-Identifier: GPL-2.0

//! Kernel abstractions the driver needs that Linux 7.3 does not have yet.
//!
//! Each one is a small safe wrapper over the C API, written so that it could
//! move into `rust/kernel/` as it is. The driver in `src/` uses only these
//! and the `kernel` crate; every `unsafe` block of the module lives here.

pub(crate) mod abi;
pub(crate) mod bound;
pub(crate) mod chrdev;
pub(crate) mod dma;
pub(crate) mod dmabuf;
pub(crate) mod hwmon;
pub(crate) mod mm;
pub(crate) mod pci;
pub(crate) mod procfs;
pub(crate) mod reboot;
pub(crate) mod sysfs;
pub(crate) mod task;
pub(crate) mod time;
pub(crate) mod workqueue;

use kernel::{
    bindings,
    device::{
        Device,
        DeviceContext, //
    },
};

/// The C `struct device` of `dev` (`Device::as_raw` is private to the
/// `kernel` crate).
pub(crate) fn device_ptr<Ctx: DeviceContext>(dev: &Device<Ctx>) -> *mut bindings::device {
    // `device::Device` is `#[repr(transparent)]` over `Opaque<bindings::device>`
    // (and a zero-sized marker), which has the layout of `bindings::device`.
    core::ptr::from_ref(dev)
        .cast::<bindings::device>()
        .cast_mut()
}

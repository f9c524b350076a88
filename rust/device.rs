// SPDX-License-Identifier: GPL-2.0

//! The C `struct device` of a `kernel::device::Device`, for the C API that
//! Linux 7.3's `kernel` crate does not wrap (DMA streaming mappings, a
//! parent for the driver's own devices, hwmon, the PCI helpers of
//! rust/pci.rs).
//!
//! `Device::as_raw()` is `pub(crate)` in 7.3, and no public function of the
//! `kernel` crate hands out the pointer, nor can C find it from what the
//! public API gives (a lookup by name on the bus fails once a removal has
//! taken the device off the bus, while its driver is still unbinding). So
//! this one function relies on the layout of `Device`: a
//! `#[repr(transparent)]` wrapper of `Opaque<bindings::device>` (and a
//! zero-sized marker), which `Device::from_raw`, public, casts the other
//! way. The assertion below stops the build if its size or alignment ever
//! differs from `struct device`'s.
//!
//! Upstream change that removes this file: `kernel::device::Device::as_raw()`
//! made `pub`, as `as_raw()` already is on other wrappers of C structs
//! (`kernel::mm::Mm`, `kernel::fs::File::as_ptr`).

use core::mem::{
    align_of,
    size_of, //
};
use kernel::{
    bindings,
    device::{
        Device,
        DeviceContext, //
    },
};

const _: () = assert!(
    size_of::<Device>() == size_of::<bindings::device>()
        && align_of::<Device>() == align_of::<bindings::device>()
);

/// The C `struct device` of `dev`.
pub(crate) fn device_ptr<Ctx: DeviceContext>(dev: &Device<Ctx>) -> *mut bindings::device {
    // `dev` is the `struct device` itself: `Device::from_raw` makes a
    // `&Device` of a `struct device *` by a cast, which this undoes.
    core::ptr::from_ref(dev)
        .cast::<bindings::device>()
        .cast_mut()
}

/// Whether [`device_ptr`] of `dev` is the `struct device` that the public
/// API of `dev` reads (its name is the same string).
#[cfg(tt_kunit)]
pub(crate) fn device_ptr_is_the_device<Ctx: DeviceContext>(dev: &Device<Ctx>) -> bool {
    use kernel::str::CStrExt;
    // SAFETY: `device_ptr` of a live `dev` points to a valid `struct
    // device` (the test checks exactly that); `dev_name` only reads it.
    let name = unsafe { bindings::dev_name(device_ptr(dev)) };
    core::ptr::eq(name, dev.name().as_char_ptr())
}

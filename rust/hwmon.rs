// SPDX-License-Identifier: GPL-2.0

//! Hardware monitoring (hwmon) devices.
//!
//! C header: [`include/linux/hwmon.h`](srctree/include/linux/hwmon.h).
//!
//! A [`Registration`] is a hwmon device under a parent device, whose
//! sensors [`Sensors`] reads. It has one channel per sensor type (what
//! devices with one temperature, one voltage, ... need); the hwmon core
//! names the files (`temp1_input`, `in0_label`, ...). The C side
//! (`hwmon_glue.c`) builds the chip description and forwards callbacks.

use core::ptr::NonNull;
use kernel::{
    device::{
        Bound,
        Device, //
    },
    error::from_err_ptr,
    ffi::{
        c_char,
        c_int,
        c_long,
        c_void, //
    },
    prelude::*,
    sync::Arc,
};

/// Sensor types, as `enum hwmon_sensor_types` numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Sensor {
    Temp = 1,
    In = 2,
    Curr = 3,
    Power = 4,
    Fan = 8,
}

impl Sensor {
    fn from_raw(raw: u32) -> Option<Self> {
        [Self::Temp, Self::In, Self::Curr, Self::Power, Self::Fan]
            .into_iter()
            .find(|s| *s as u32 == raw)
    }
}

/// The attributes of a channel this module knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attribute {
    Input,
    Max,
    Label,
}

impl Attribute {
    /// Its number for sensor type `sensor` (`enum hwmon_*_attributes`;
    /// `hwmon_glue.c` checks them at build time).
    const fn number(self, sensor: Sensor) -> u32 {
        match (sensor, self) {
            (_, Self::Input) if !matches!(sensor, Sensor::Power) => 1,
            (Sensor::Power, Self::Input) => 9,
            (Sensor::Temp, Self::Max) => 7,
            (Sensor::In | Sensor::Curr, Self::Max) => 3,
            (Sensor::Power, Self::Max) => 19,
            (Sensor::Fan, Self::Max) => 4,
            (Sensor::Temp, Self::Label) => 21,
            (Sensor::In | Sensor::Curr, Self::Label) => 10,
            (Sensor::Power, Self::Label) => 22,
            (Sensor::Fan, Self::Label) => 2,
            _ => u32::MAX,
        }
    }

    fn from_raw(sensor: Sensor, raw: u32) -> Option<Self> {
        [Self::Input, Self::Max, Self::Label]
            .into_iter()
            .find(|a| a.number(sensor) == raw)
    }
}

/// One channel: a sensor type and the attributes it has.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Channel {
    pub(crate) sensor: Sensor,
    pub(crate) attributes: &'static [Attribute],
}

impl Channel {
    fn mask(&self) -> u32 {
        self.attributes
            .iter()
            .fold(0, |mask, a| mask | 1 << a.number(self.sensor))
    }
}

/// What a hwmon device reads. Every call may sleep.
pub(crate) trait Sensors: Send + Sync + 'static {
    /// Whether `attribute` of the channel of `sensor` exists; asked once
    /// per attribute, when the device is registered.
    fn is_visible(&self, sensor: Sensor, attribute: Attribute) -> bool;
    /// The value of an `Input` or `Max` attribute, in hwmon units.
    fn read(&self, sensor: Sensor, attribute: Attribute) -> Result<i64>;
    /// The label of the channel of `sensor`.
    fn label(&self, sensor: Sensor) -> Result<&'static CStr>;
}

extern "C" {
    fn tt_hwmon_register(
        parent: *mut c_void,
        name: *const c_char,
        data: *const c_void,
        types: *const u32,
        attributes: *const u32,
        count: u32,
    ) -> *mut c_void;
    fn tt_hwmon_unregister(hwmon: *mut c_void);
}

/// A registered hwmon device, unregistered when dropped.
///
/// # Invariants
///
/// `raw` is a registration made by `tt_hwmon_register` whose data is the
/// `T` of `data`, which outlives it.
pub(crate) struct Registration<T: Sensors> {
    raw: NonNull<c_void>,
    _data: Arc<T>,
}

// SAFETY: The registration is only unregistered (in `drop`), which any
// thread may do; `T` is `Send + Sync`.
unsafe impl<T: Sensors> Send for Registration<T> {}
// SAFETY: As above: a shared `Registration` gives access to nothing.
unsafe impl<T: Sensors> Sync for Registration<T> {}

impl<T: Sensors> Registration<T> {
    /// Registers a hwmon device named `name` under `parent`, with
    /// `channels` (at most 8, one per sensor type), read by `data`.
    pub(crate) fn new(
        parent: &Device<Bound>,
        name: &'static CStr,
        channels: &[Channel],
        data: Arc<T>,
    ) -> Result<Self> {
        let mut types = [0u32; 8];
        let mut masks = [0u32; 8];
        if channels.len() > types.len() {
            return Err(EINVAL);
        }
        for (i, channel) in channels.iter().enumerate() {
            types[i] = channel.sensor as u32;
            masks[i] = channel.mask();
        }
        let count = u32::try_from(channels.len())?;
        let parent = super::device::device_ptr(parent).cast::<c_void>();
        // SAFETY: `parent` is a bound device; `name` is a static string; the
        // arrays hold `count` entries and are copied before this returns;
        // `data` stays alive until the device is unregistered (the type
        // invariant), and the callbacks below only read it as a `T`.
        let raw = unsafe {
            tt_hwmon_register(
                parent,
                name.as_char_ptr(),
                Arc::as_ptr(&data).cast(),
                types.as_ptr(),
                masks.as_ptr(),
                count,
            )
        };
        let raw = from_err_ptr(raw)?;
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: registered with `data`'s `T`, which `Self` keeps.
        Ok(Self { raw, _data: data })
    }
}

impl<T: Sensors> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: `raw` is a live registration (the type invariant); after
        // this no callback runs, so the data may go with `self`.
        unsafe { tt_hwmon_unregister(self.raw.as_ptr()) };
    }
}

/// The registration's data, as the C side hands it to the callbacks.
///
/// # Safety
///
/// `data` must be the data of a live [`Registration<T>`].
unsafe fn sensors<'a, T: Sensors>(data: *const c_void) -> &'a T {
    // SAFETY: the caller guarantees `data` points to the `T` of a live
    // registration.
    unsafe { &*data.cast::<T>() }
}

/// The callbacks of `hwmon_glue.c`, for the one `Sensors` type of this
/// module.
///
/// # Safety
///
/// Called by `hwmon_glue.c` only, with the data of a live registration.
macro_rules! hwmon_callbacks {
    ($ty:ty) => {
        /// # Safety
        ///
        /// Called by `hwmon_glue.c` only, with the data of a live registration.
        #[no_mangle]
        unsafe extern "C" fn tt_hwmon_rust_is_visible(
            data: *const ::kernel::ffi::c_void,
            sensor: u32,
            attribute: u32,
            _channel: ::kernel::ffi::c_int,
        ) -> u16 {
            // SAFETY: `hwmon_glue.c` passes the data of a live registration.
            unsafe { $crate::rust_ext::hwmon::is_visible::<$ty>(data, sensor, attribute) }
        }

        /// # Safety
        ///
        /// Called by `hwmon_glue.c` only, with the data of a live registration.
        #[no_mangle]
        unsafe extern "C" fn tt_hwmon_rust_read(
            data: *const ::kernel::ffi::c_void,
            sensor: u32,
            attribute: u32,
            _channel: ::kernel::ffi::c_int,
            value: *mut ::kernel::ffi::c_long,
        ) -> ::kernel::ffi::c_int {
            // SAFETY: as above; `value` is a valid `long` to write.
            unsafe { $crate::rust_ext::hwmon::read::<$ty>(data, sensor, attribute, value) }
        }

        /// # Safety
        ///
        /// Called by `hwmon_glue.c` only, with the data of a live registration.
        #[no_mangle]
        unsafe extern "C" fn tt_hwmon_rust_read_string(
            data: *const ::kernel::ffi::c_void,
            sensor: u32,
            _attribute: u32,
            _channel: ::kernel::ffi::c_int,
            label: *mut *const ::kernel::ffi::c_char,
        ) -> ::kernel::ffi::c_int {
            // SAFETY: as above; `label` is a valid pointer to write.
            unsafe { $crate::rust_ext::hwmon::read_string::<$ty>(data, sensor, label) }
        }
    };
}
pub(crate) use hwmon_callbacks;

/// # Safety
///
/// `data` must be the data of a live [`Registration<T>`].
pub(crate) unsafe fn is_visible<T: Sensors>(
    data: *const c_void,
    sensor: u32,
    attribute: u32,
) -> u16 {
    let Some(sensor) = Sensor::from_raw(sensor) else {
        return 0;
    };
    let Some(attribute) = Attribute::from_raw(sensor, attribute) else {
        return 0;
    };
    // SAFETY: the caller's guarantee.
    if unsafe { sensors::<T>(data) }.is_visible(sensor, attribute) {
        0o444
    } else {
        0
    }
}

/// # Safety
///
/// `data` must be the data of a live [`Registration<T>`], `value` valid
/// for a write.
pub(crate) unsafe fn read<T: Sensors>(
    data: *const c_void,
    sensor: u32,
    attribute: u32,
    value: *mut c_long,
) -> c_int {
    let read = || {
        let sensor = Sensor::from_raw(sensor).ok_or(EOPNOTSUPP)?;
        let attribute = Attribute::from_raw(sensor, attribute).ok_or(EOPNOTSUPP)?;
        // SAFETY: the caller's guarantee.
        let v = unsafe { sensors::<T>(data) }.read(sensor, attribute)?;
        c_long::try_from(v).map_err(|_| ERANGE)
    };
    match read() {
        Ok(v) => {
            // SAFETY: the caller's guarantee.
            unsafe { *value = v };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// `data` must be the data of a live [`Registration<T>`], `label` valid
/// for a write.
pub(crate) unsafe fn read_string<T: Sensors>(
    data: *const c_void,
    sensor: u32,
    label: *mut *const c_char,
) -> c_int {
    let Some(sensor) = Sensor::from_raw(sensor) else {
        return EOPNOTSUPP.to_errno();
    };
    // SAFETY: the caller's guarantee.
    match unsafe { sensors::<T>(data) }.label(sensor) {
        Ok(text) => {
            // SAFETY: the caller's guarantee; the string is static.
            unsafe { *label = text.as_char_ptr() };
            0
        }
        Err(e) => e.to_errno(),
    }
}

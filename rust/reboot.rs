// SPDX-License-Identifier: GPL-2.0

//! Work to do before the system restarts, halts or powers off.
//!
//! A PCI driver's `.shutdown` callback is where this belongs, but Linux
//! 7.3's `kernel::pci::Driver` has none (only `probe` and `unbind`). A
//! reboot notifier runs at the same moments, `kernel_restart_prepare()`
//! (kexec included) and the halt and power-off paths, just before
//! `device_shutdown()`: [`ShutdownHook`] registers one. A `shutdown`
//! method in `kernel::pci::Driver` would remove this file.

use core::{
    ffi::c_void,
    ptr::NonNull, //
};
use kernel::{
    alloc::KBox,
    prelude::*, //
};

extern "C" {
    fn tt_reboot_hook_register(
        func: unsafe extern "C" fn(data: *mut c_void),
        data: *mut c_void,
    ) -> *mut c_void;
    fn tt_reboot_hook_unregister(hook: *mut c_void);
}

/// What a [`ShutdownHook`] runs.
pub(crate) trait OnShutdown: Send + Sync {
    /// Called once per restart, halt or power-off, in process context.
    fn on_shutdown(&self);
}

/// Runs `T::on_shutdown` before the system restarts, halts or powers off,
/// for as long as it is registered (until dropped).
///
/// # Invariants
///
/// `hook` is the registration `tt_reboot_hook_register` returned for
/// `data`, a `KBox<T>` turned into a raw pointer, both released only in
/// [`Drop`] (the hook first).
pub(crate) struct ShutdownHook<T: OnShutdown> {
    hook: NonNull<c_void>,
    data: NonNull<T>,
}

// SAFETY: The hook is a plain registration that may be dropped from any
// thread; `T` is `Send + Sync` and only shared through `&T`.
unsafe impl<T: OnShutdown> Send for ShutdownHook<T> {}
// SAFETY: `&ShutdownHook` gives access to nothing.
unsafe impl<T: OnShutdown> Sync for ShutdownHook<T> {}

impl<T: OnShutdown> ShutdownHook<T> {
    /// Registers `data`'s `on_shutdown`. `ENOMEM` if it cannot be.
    pub(crate) fn new(data: T) -> Result<Self> {
        let data = NonNull::new(KBox::into_raw(KBox::new(data, GFP_KERNEL)?)).ok_or(ENOMEM)?;
        // SAFETY: `call::<T>` takes `data` as a `T`, which it is, and it
        // stays valid until the hook is unregistered (see `Drop`).
        let hook = unsafe { tt_reboot_hook_register(call::<T>, data.as_ptr().cast()) };
        let Some(hook) = NonNull::new(hook) else {
            // SAFETY: not registered: the box is ours again.
            drop(unsafe { KBox::from_raw(data.as_ptr()) });
            return Err(ENOMEM);
        };
        // INVARIANT: registered above for `data`.
        Ok(Self { hook, data })
    }
}

impl<T: OnShutdown> Drop for ShutdownHook<T> {
    fn drop(&mut self) {
        // SAFETY: by the type invariants the hook is registered; once this
        // returns no call of it runs or will run.
        unsafe { tt_reboot_hook_unregister(self.hook.as_ptr()) };
        // SAFETY: by the type invariants `data` is the box's, unused now.
        drop(unsafe { KBox::from_raw(self.data.as_ptr()) });
    }
}

/// # Safety
///
/// `data` must be the `T` a registered [`ShutdownHook`] holds.
unsafe extern "C" fn call<T: OnShutdown>(data: *mut c_void) {
    // SAFETY: by the safety requirements `data` is a live `T`, which the
    // hook only shares.
    let data = unsafe { &*data.cast::<T>() };
    data.on_shutdown();
}

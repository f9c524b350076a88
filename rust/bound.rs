// SPDX-License-Identifier: GPL-2.0

//! A device's state that lives only while the device is bound.
//!
//! Linux 7.3's `kernel::dma` and `kernel::pci` give DMA and configuration
//! space access for a `&Device<Bound>`, which only a driver callback
//! holds. A character device's file operations have none; [`WhileBound`]
//! gives them one for as long as the binding lasts, and ends by itself
//! when the device is unbound (a device-managed action), so nothing can
//! use the device after that, whether the driver remembered or not.

use kernel::{
    device::{
        Bound,
        Device, //
    },
    devres,
    new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        Mutex, //
    }, //
};

/// The state behind a [`WhileBound`].
#[pin_data]
struct Binding<T> {
    dev: ARef<Device>,
    /// `None` once the device is unbound.
    #[pin]
    data: Mutex<Option<T>>,
}

/// Data usable with its device as bound, for as long as the device stays
/// bound: at unbind the data is dropped (with the device still bound) and
/// [`WhileBound::with`] answers `ENODEV` from then on.
///
/// # Invariants
///
/// While `binding.data` holds `Some`, `binding.dev` is bound: the data is
/// taken out, under the mutex, by a device-managed action of `dev`, which
/// runs before the device is unbound.
pub(crate) struct WhileBound<T: Send + Unpin + 'static> {
    binding: Arc<Binding<T>>,
}

/// The device-managed action that ends a [`WhileBound`].
struct EndAtUnbind<T: Send + Unpin + 'static>(Arc<Binding<T>>);

impl<T: Send + Unpin + 'static> Drop for EndAtUnbind<T> {
    fn drop(&mut self) {
        let data = self.0.data.lock().take();
        // Dropped after the mutex, with the device still bound.
        drop(data);
    }
}

impl<T: Send + Unpin + 'static> WhileBound<T> {
    /// Keeps `data` for bound `dev`.
    pub(crate) fn new(dev: &Device<Bound>, data: T) -> Result<Self> {
        let binding = Arc::pin_init(
            pin_init!(Binding {
                dev: dev.into(),
                data <- new_mutex!(Some(data)),
            }),
            GFP_KERNEL,
        )?;
        devres::register(dev, EndAtUnbind(binding.clone()), GFP_KERNEL)?;
        // INVARIANT: the action that takes the data out is registered.
        Ok(Self { binding })
    }

    /// Runs `f` with the device and the data, the device kept bound until
    /// `f` returns; `ENODEV` once it is unbound.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Device<Bound>, &mut T) -> Result<R>) -> Result<R> {
        let mut guard = self.binding.data.lock();
        let data = Option::as_mut(&mut *guard).ok_or(ENODEV)?;
        // SAFETY: by the type invariants the device is bound while the data
        // is there, and the mutex keeps the unbind action from taking it
        // until `f` returns.
        let dev = unsafe { self.binding.dev.as_bound() };
        f(dev, data)
    }
}

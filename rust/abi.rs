// SPDX-License-Identifier: GPL-2.0

//! ABI structures that are [`FromBytes`] and [`AsBytes`] by construction.
//!
//! A structure shared with userspace is read with
//! `UserSliceReader::read::<T>()` and written with
//! `UserSliceWriter::write(&T)`, which need `T: FromBytes` and
//! `T: AsBytes`. Both traits are `unsafe` to implement, and Linux 7.3
//! has no derive for them: [`abi_struct!`] declares a `#[repr(C)]`
//! structure and implements both, accepting only field types for which
//! the implementation is sound ([`Field`]) and failing the build if the
//! structure has padding. A `#[derive(FromBytes, AsBytes)]` in the kernel
//! crate (checks of the zerocopy kind, made by the compiler) would
//! replace this file.
//!
//! [`FromBytes`]: kernel::transmute::FromBytes
//! [`AsBytes`]: kernel::transmute::AsBytes

use kernel::transmute::{
    AsBytes,
    FromBytes, //
};

mod private {
    /// Seals [`super::Field`]: only this file names the field types.
    pub(crate) trait Sealed {}
}

/// A type an [`abi_struct!`] field may have: a fixed-width unsigned
/// integer or an array of them. Every bit pattern of such a type is a
/// valid value, all of its bytes are initialised (an array has no
/// padding between its elements, whose size is a multiple of their
/// alignment), and it has no interior mutability. Sealed: no other type
/// can be given these properties from outside this file.
pub(crate) trait Field: private::Sealed + FromBytes + AsBytes + Copy {}

macro_rules! int_fields {
    ($($ty:ty),*) => {$(
        impl private::Sealed for $ty {}
        impl Field for $ty {}
    )*};
}
int_fields!(u8, u16, u32, u64);

impl<T: Field, const N: usize> private::Sealed for [T; N] {}
impl<T: Field, const N: usize> Field for [T; N] {}

/// Declares a `#[repr(C)]` ABI structure whose fields are [`Field`]s, with
/// `Clone, Copy, Default, Debug, PartialEq, Eq` and the kernel's
/// [`FromBytes`](kernel::transmute::FromBytes) and
/// [`AsBytes`](kernel::transmute::AsBytes).
///
/// The build fails if a field's type is not a [`Field`], or if the
/// structure's size is not the sum of its fields' sizes (padding, which
/// [`AsBytes`](kernel::transmute::AsBytes) forbids: it would copy
/// uninitialised kernel bytes to userspace).
macro_rules! abi_struct {
    ($(#[$meta:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
        pub(crate) struct $name
        where
            $($ty: $crate::rust_ext::abi::Field,)*
        {
            $(pub(crate) $field: $ty,)*
        }

        // No padding: every byte of the structure belongs to a field.
        const _: () = assert!(
            core::mem::size_of::<$name>() == 0 $(+ core::mem::size_of::<$ty>())*,
            concat!(stringify!($name), " has padding"),
        );

        // SAFETY: `$name` is `#[repr(C)]` and every field is a `Field`
        // (its `where` clause fails the build otherwise): an unsigned
        // integer or an array of them, for which every bit pattern is
        // valid and which has no interior mutability. A `#[repr(C)]`
        // structure's bytes are its fields' bytes and its padding; the
        // assertion above proves there is no padding, so every bit
        // pattern of the structure is a valid value of it.
        unsafe impl kernel::transmute::FromBytes for $name {}

        // SAFETY: as for `FromBytes` above: every byte of `$name` is a
        // byte of a field (no padding, asserted above), each field's bytes
        // are all initialised (an integer, or an array of integers), and
        // nothing in it has interior mutability.
        unsafe impl kernel::transmute::AsBytes for $name {}
    };
}
pub(crate) use abi_struct;

// SPDX-License-Identifier: GPL-2.0

//! Read-only sysfs attributes of a [`CharDevice`]'s class device.
//!
//! C header: [`include/linux/sysfs.h`](srctree/include/linux/sysfs.h).
//!
//! An attribute group is a directory (or the device's own directory) of
//! files that all show through one callback, told which file by an index.
//! The groups are `static`, as sysfs and lockdep expect of attributes that
//! are not initialised at run time; [`indexed_attribute_group!`] declares
//! them.
//!
//! [`CharDevice`]: super::chrdev::CharDevice

use super::chrdev::{
    self,
    FileOperations, //
};
use core::{
    fmt,
    marker::PhantomData,
    ptr, //
};
use kernel::{
    bindings,
    ffi::{
        c_char,
        c_int, //
    },
    page::PAGE_SIZE,
    str::{
        as_char_ptr_in_const_context,
        CStr, //
    },
};

/// Device data that can show indexed sysfs attributes.
pub(crate) trait ShowAttribute: FileOperations {
    /// Writes the contents of attribute `index` of group `group` of the
    /// device whose data is `self`. Output past one page is cut.
    fn show(&self, group: u32, index: usize, out: &mut Page<'_>) -> fmt::Result;

    /// Whether attribute `index` of group `group` exists for this device;
    /// asked once, when the device is added.
    fn is_visible(&self, _group: u32, _index: usize) -> bool {
        true
    }

    /// Whether the directory of the named group `group` exists for this
    /// device at all (a group of one chip's files); asked once, when the
    /// device is added. Without it, a group whose files are all invisible
    /// is an empty directory.
    fn is_group_visible(&self, _group: u32) -> bool {
        true
    }
}

/// The page a sysfs `show` callback fills.
pub(crate) struct Page<'a> {
    buf: &'a mut [u8],
    len: usize,
    error: Option<kernel::error::Error>,
}

impl Page<'_> {
    /// Makes the read of the attribute fail with `error` instead of
    /// returning what was written.
    pub(crate) fn fail(&mut self, error: kernel::error::Error) {
        self.error = Some(error);
    }
}

impl fmt::Write for Page<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// A read-only attribute that knows its group and its index.
#[repr(C)]
pub(crate) struct IndexedAttribute<T> {
    attr: bindings::device_attribute,
    group: u32,
    index: usize,
    _p: PhantomData<T>,
}

// SAFETY: The attribute is immutable once built and only read by sysfs.
unsafe impl<T> Sync for IndexedAttribute<T> {}

impl<T: ShowAttribute> IndexedAttribute<T> {
    /// A file named `name`, readable by everyone, shown by
    /// `T::show(group, index)`.
    pub(crate) const fn new(name: &'static CStr, group: u32, index: usize) -> Self {
        // SAFETY: All-zero is a valid `device_attribute`: a null name (set
        // below), no callbacks, no lockdep key (static attributes use their
        // own `skey`).
        let mut attr: bindings::device_attribute = unsafe { core::mem::zeroed() };
        attr.attr.name = as_char_ptr_in_const_context(name);
        attr.attr.mode = 0o444;
        attr.__bindgen_anon_1.show = Some(Self::show);
        Self {
            attr,
            group,
            index,
            _p: PhantomData,
        }
    }

    /// # Safety
    ///
    /// Called by sysfs for an attribute of a group declared with
    /// [`indexed_attribute_group!`] for `T`, on the class device of a
    /// `CharDevice<T>`, with a page-sized `buf`.
    unsafe extern "C" fn show(
        dev: *mut bindings::device,
        attr: *mut bindings::device_attribute,
        buf: *mut c_char,
    ) -> isize {
        // SAFETY: `attr` is the `attr` field of an `IndexedAttribute<T>`,
        // as only `new` makes attributes with this callback.
        let this = unsafe { &*kernel::container_of!(attr, IndexedAttribute<T>, attr) };
        // SAFETY: `dev` is the class device of a `CharDevice<T>`; sysfs
        // calls `show` only while the attribute exists, that is between
        // `device_add` and `device_del`, when the data is alive.
        let data = unsafe { chrdev::device_data::<T>(dev) };
        // SAFETY: sysfs passes a buffer of `PAGE_SIZE` bytes, ours for the
        // duration of the call.
        let buf = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE_SIZE) };
        let mut page = Page {
            buf,
            len: 0,
            error: None,
        };
        // A cut line is still worth showing: ignore the error that says so.
        let _ = data.show(this.group, this.index, &mut page);
        match page.error {
            Some(e) => e.to_errno() as isize,
            None => page.len as isize,
        }
    }

    /// # Safety
    ///
    /// Called by sysfs while adding a group declared with
    /// [`indexed_attribute_group!`] for `T` to the class device of a
    /// `CharDevice<T>`, whose data is set.
    unsafe extern "C" fn is_visible(
        kobj: *mut bindings::kobject,
        attr: *mut bindings::attribute,
        _n: c_int,
    ) -> bindings::umode_t {
        // SAFETY: Every attribute of such a group is the `attr.attr` field of
        // an `IndexedAttribute<T>`.
        let this = unsafe { &*kernel::container_of!(attr, IndexedAttribute<T>, attr.attr) };
        // SAFETY: The groups are those of a device: `kobj` is its `kobj`.
        let dev = unsafe { kernel::container_of!(kobj, bindings::device, kobj) };
        // SAFETY: `dev` is the class device of a `CharDevice<T>` being added.
        let data = unsafe { chrdev::device_data::<T>(dev) };
        // Asked with the group's first attribute first: the answer for the
        // whole directory of a named group (include/linux/sysfs.h,
        // `SYSFS_GROUP_INVISIBLE`; ignored for an unnamed one).
        if this.index == 0 && !data.is_group_visible(this.group) {
            // The constant (020000) fits a `umode_t`.
            return bindings::SYSFS_GROUP_INVISIBLE as bindings::umode_t;
        }
        if data.is_visible(this.group, this.index) {
            this.attr.attr.mode
        } else {
            0
        }
    }
}

/// The NULL-terminated array of attribute pointers of a group.
#[repr(C)]
pub(crate) struct AttributeList<const N: usize> {
    attrs: [*mut bindings::attribute; N],
    end: *mut bindings::attribute,
}

// SAFETY: The list is immutable once built and only read by sysfs.
unsafe impl<const N: usize> Sync for AttributeList<N> {}

impl<const N: usize> AttributeList<N> {
    /// The list of the attributes of `attrs`.
    pub(crate) const fn new<T: ShowAttribute>(attrs: &'static [IndexedAttribute<T>; N]) -> Self {
        let mut list = [ptr::null_mut(); N];
        let mut i = 0;
        while i < N {
            list[i] = ptr::addr_of!(attrs[i].attr.attr).cast_mut();
            i += 1;
        }
        Self {
            attrs: list,
            end: ptr::null_mut(),
        }
    }
}

/// An attribute group: the attributes of a list, in a directory `name`
/// of a device or, without a name, in the device's own directory.
#[repr(transparent)]
pub(crate) struct AttributeGroup(bindings::attribute_group);

// SAFETY: The group is immutable once built and only read by sysfs.
unsafe impl Sync for AttributeGroup {}

impl AttributeGroup {
    pub(crate) const fn new<T: ShowAttribute, const N: usize>(
        name: Option<&'static CStr>,
        list: &'static AttributeList<N>,
    ) -> Self {
        // SAFETY: All-zero is a valid `attribute_group`: no name, no
        // callbacks, no binary attributes.
        let mut group: bindings::attribute_group = unsafe { core::mem::zeroed() };
        if let Some(name) = name {
            group.name = as_char_ptr_in_const_context(name);
        }
        group.__bindgen_anon_1.is_visible = Some(IndexedAttribute::<T>::is_visible);
        group.__bindgen_anon_2.attrs = ptr::addr_of!(list.attrs)
            .cast::<*mut bindings::attribute>()
            .cast_mut();
        Self(group)
    }
}

/// The NULL-terminated list of a device's attribute groups.
#[repr(C)]
pub(crate) struct AttributeGroups<const N: usize> {
    groups: [*const bindings::attribute_group; N],
    end: *const bindings::attribute_group,
}

// SAFETY: The list is immutable once built and only read by sysfs.
unsafe impl<const N: usize> Sync for AttributeGroups<N> {}

impl<const N: usize> AttributeGroups<N> {
    pub(crate) const fn new(groups: [&'static AttributeGroup; N]) -> Self {
        let mut list = [ptr::null(); N];
        let mut i = 0;
        while i < N {
            list[i] = ptr::addr_of!(groups[i].0);
            i += 1;
        }
        Self {
            groups: list,
            end: ptr::null(),
        }
    }

    /// The C array, as `struct device::groups` takes it.
    pub(crate) fn as_raw(&'static self) -> *const *const bindings::attribute_group {
        ptr::addr_of!(self.groups).cast()
    }
}

/// Declares a `static` group of read-only attributes shown by
/// [`ShowAttribute::show`] of `$data`, one per name, each told the group's
/// key and its position in the list.
///
/// ```ignore
/// indexed_attribute_group!(LOCKS: Card, 0, c"locks", [c"00", c"01"]);
/// ```
macro_rules! indexed_attribute_group {
    ($vis:vis $name:ident: $data:ty, $key:expr, $dir:expr, [$($file:expr),+ $(,)?]) => {
        $vis static $name: $crate::rust_ext::sysfs::AttributeGroup = {
            const NAMES: &[&::kernel::str::CStr] = &[$($file),+];
            const COUNT: usize = NAMES.len();
            static ATTRS: [$crate::rust_ext::sysfs::IndexedAttribute<$data>; COUNT] = {
                let mut attrs = [const {
                    $crate::rust_ext::sysfs::IndexedAttribute::<$data>::new(c"", $key, 0)
                }; COUNT];
                let mut i = 0;
                while i < COUNT {
                    attrs[i] = $crate::rust_ext::sysfs::IndexedAttribute::new(NAMES[i], $key, i);
                    i += 1;
                }
                attrs
            };
            static LIST: $crate::rust_ext::sysfs::AttributeList<COUNT> =
                $crate::rust_ext::sysfs::AttributeList::new(&ATTRS);
            $crate::rust_ext::sysfs::AttributeGroup::new::<$data, COUNT>($dir, &LIST)
        };
    };
}
pub(crate) use indexed_attribute_group;

// SPDX-License-Identifier: GPL-2.0

//! Character devices with a class and a parent device.
//!
//! C headers: [`include/linux/cdev.h`](srctree/include/linux/cdev.h),
//! [`include/linux/device.h`](srctree/include/linux/device.h).
//!
//! `kernel::miscdevice` gives class `misc`, no parent and a single node per
//! registration. A driver whose nodes must appear under its own class and
//! under the PCI device they belong to (`/sys/class/NAME/NAME!N`,
//! `/sys/bus/pci/devices/BDF/NAME/NAME!N`) needs the classic pairing of a
//! `struct cdev` with a `struct device`, which this module wraps.
//!
//! Lifetime: a [`CharDevice`] owns one reference to its `struct device`.
//! Dropping it removes the node and the sysfs entries at once, but every
//! open file keeps the `struct cdev`, and through it the `struct device`
//! and the driver data, alive until its last close. So a device can be
//! unbound while files are open and those files stay valid.

use super::{
    device::device_ptr,
    mm::{
        FaultResult,
        SharedMapping,
        VmFault, //
    },
    sysfs::AttributeGroups, //
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};
use kernel::{
    bindings,
    device,
    error::{
        from_err_ptr,
        to_result, //
    },
    ffi::{
        c_int,
        c_long,
        c_uint,
        c_ulong, //
    },
    fs::File,
    mm::virt::VmaNew,
    module::this_module,
    prelude::*,
    seq_file::SeqFile,
    sync::Arc,
    types::{
        ForeignOwnable,
        Opaque, //
    }, //
};

pub(crate) use kernel::sync::poll::PollTable;

/// The events `poll` returns (`include/uapi/linux/eventpoll.h`; bindgen
/// does not see them through their `__force __poll_t` casts).
pub(crate) mod poll_events {
    pub(crate) const EPOLLIN: u32 = 0x0001;
    pub(crate) const EPOLLOUT: u32 = 0x0004;
    pub(crate) const EPOLLERR: u32 = 0x0008;
    pub(crate) const EPOLLHUP: u32 = 0x0010;
    pub(crate) const EPOLLRDNORM: u32 = 0x0040;
    pub(crate) const EPOLLWRNORM: u32 = 0x0100;
    /// What the VFS reports for a file without `poll` (`DEFAULT_POLLMASK`).
    pub(crate) const DEFAULT: u32 = EPOLLIN | EPOLLOUT | EPOLLRDNORM | EPOLLWRNORM;
}

/// The file operations of the devices of a [`CharDevice`].
///
/// `Self` is the data shared by every file opened on one device.
pub(crate) trait FileOperations: Send + Sync + Sized + 'static {
    /// The private data of an open file.
    type Ptr: ForeignOwnable + Send + Sync;

    /// Called when the device is opened; the returned value becomes the
    /// file's private data.
    fn open(device: &Arc<Self>, file: &File) -> Result<Self::Ptr>;

    /// Called when the last reference to an open file is dropped.
    fn release(data: Self::Ptr, _file: &File) {
        drop(data);
    }

    /// Handles `poll(2)`, `select(2)` and `epoll`: registers the file's wait
    /// queues with `table` and returns the [`poll_events`] ready now.
    /// Unless implemented, a file is always readable and writable, as the
    /// VFS reports a file without `poll`.
    fn poll(
        _data: <Self::Ptr as ForeignOwnable>::Borrowed<'_>,
        _file: &File,
        _table: &PollTable<'_>,
    ) -> u32 {
        poll_events::DEFAULT
    }

    /// Writes what the file holds to `/proc/PID/fdinfo/FD`, after the
    /// lines the VFS writes for every file, as `key:\tvalue` lines (the
    /// style of DRM's fdinfo). Runs in the reader's context, with a
    /// reference on the file. Nothing unless implemented.
    fn show_fdinfo(_data: <Self::Ptr as ForeignOwnable>::Borrowed<'_>, _m: &SeqFile, _file: &File) {
    }

    /// Handles `ioctl(2)`. 32-bit callers reach it too, through
    /// `compat_ptr_ioctl`: the commands must have the same layout for both.
    fn ioctl(
        data: <Self::Ptr as ForeignOwnable>::Borrowed<'_>,
        file: &File,
        cmd: u32,
        arg: usize,
    ) -> Result<isize>;

    /// The `address_space` every open file of the device shares (set as
    /// each file's `f_mapping` at open), through which the device's
    /// mappings are revoked whatever node a file was opened through.
    fn shared_mapping(_device: &Arc<Self>) -> Option<&SharedMapping> {
        None
    }

    /// Handles `mmap(2)`: checks the request and sets `vma` up (for
    /// instance with [`super::mm::set_io_pfnmap`]); pages are inserted by
    /// [`FileOperations::fault`]. `ENODEV` unless implemented.
    fn mmap(
        _data: <Self::Ptr as ForeignOwnable>::Borrowed<'_>,
        _file: &File,
        _vma: &VmaNew,
    ) -> Result {
        Err(ENODEV)
    }

    /// Handles a page fault in a VMA that [`FileOperations::mmap`] set up,
    /// with the `mmap_lock` (or the VMA's lock) held for reading.
    fn fault(_data: <Self::Ptr as ForeignOwnable>::Borrowed<'_>, _fault: &VmFault) -> FaultResult {
        FaultResult::SIGBUS
    }

    /// Whether a VMA that [`FileOperations::mmap`] set up, mapping the file
    /// from byte `offset`, may be split (partial `munmap`, `mprotect`,
    /// `mremap`); an error refuses it. Allowed unless implemented.
    fn may_split(_data: <Self::Ptr as ForeignOwnable>::Borrowed<'_>, _offset: u64) -> Result {
        Ok(())
    }

    /// A VMA that [`FileOperations::mmap`] set up was copied into a new one
    /// (a split, or `mremap` moving it), which maps the file from byte
    /// `offset`; `tag` is what [`crate::rust_ext::mm::set_tag`] left.
    fn vma_open(_data: <Self::Ptr as ForeignOwnable>::Borrowed<'_>, _offset: u64, _tag: usize) {}

    /// A VMA that [`FileOperations::mmap`] set up, or a copy of one, goes
    /// away (`munmap`, exit, the end of an `mremap` move).
    fn vma_close(_data: <Self::Ptr as ForeignOwnable>::Borrowed<'_>, _offset: u64, _tag: usize) {}
}

/// A region of character device numbers and the device class of the nodes
/// created in it.
///
/// # Invariants
///
/// - `class` was returned by a successful `class_create()` and is destroyed
///   only in [`Drop`].
/// - `base..base + count` was allocated by `alloc_chrdev_region()` and is
///   released only in [`Drop`].
pub(crate) struct CharDeviceRegion {
    class: NonNull<bindings::class>,
    base: bindings::dev_t,
    count: u32,
}

// SAFETY: The region and the class are plain kernel objects; creating devices
// in them and destroying them may happen on any thread.
unsafe impl Send for CharDeviceRegion {}
// SAFETY: `&CharDeviceRegion` only reads `base`, `count` and `class`, which
// never change.
unsafe impl Sync for CharDeviceRegion {}

impl CharDeviceRegion {
    /// Allocates `count` device numbers and creates the class `name`.
    pub(crate) fn new(name: &'static CStr, count: u32) -> Result<Self> {
        let mut base: bindings::dev_t = 0;
        // SAFETY: `base` is valid for writes and `name` is a NUL-terminated
        // string that outlives the region (it is `'static`).
        to_result(unsafe {
            bindings::alloc_chrdev_region(&mut base, 0, count, name.as_char_ptr())
        })?;
        // SAFETY: `name` is `'static`, as `class_create` keeps the pointer.
        let class = match from_err_ptr(unsafe { bindings::class_create(name.as_char_ptr()) }) {
            Ok(class) => class,
            Err(e) => {
                // SAFETY: The region was allocated above and nothing uses it.
                unsafe { bindings::unregister_chrdev_region(base, count) };
                return Err(e);
            }
        };
        // INVARIANT: Both were created above.
        Ok(Self {
            class: NonNull::new(class).ok_or(EINVAL)?,
            base,
            count,
        })
    }

    /// The number of device numbers in the region.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }
}

impl Drop for CharDeviceRegion {
    fn drop(&mut self) {
        // SAFETY: By the type invariants both are live. The devices created
        // in the class are gone: each holds a reference on the module while
        // it has open files, and the driver drops its `CharDevice`s before
        // the module can be unloaded.
        unsafe {
            bindings::class_destroy(self.class.as_ptr());
            bindings::unregister_chrdev_region(self.base, self.count);
        }
    }
}

/// The memory shared by a `struct device` and its `struct cdev`.
///
/// It is freed by [`CharDevice::<T>::release_device`] when the device's
/// reference count drops to zero.
#[repr(C)]
struct RawCharDevice<T> {
    dev: Opaque<bindings::device>,
    cdev: Opaque<bindings::cdev>,
    data: Arc<T>,
}

/// The data of the class device `dev` of a [`CharDevice<T>`].
///
/// # Safety
///
/// `dev` must be the class device of a live `CharDevice<T>` (between its
/// creation and the last drop of its device reference), and the returned
/// reference must not outlive that.
pub(super) unsafe fn device_data<'a, T: FileOperations>(dev: *mut bindings::device) -> &'a Arc<T> {
    let dev = Opaque::cast_from(dev).cast_mut();
    // SAFETY: By the safety requirements `dev` is the `dev` field of a live
    // `RawCharDevice<T>`.
    unsafe { &(*kernel::container_of!(dev, RawCharDevice<T>, dev)).data }
}

/// A character device node in a [`CharDeviceRegion`], with a parent device.
///
/// # Invariants
///
/// `raw` points to a `RawCharDevice<T>` whose `dev` and `cdev` were added
/// with `cdev_device_add()` and on whose `dev` this object owns one
/// reference, dropped (after `cdev_device_del()`) only in [`Drop`].
pub(crate) struct CharDevice<T: FileOperations> {
    raw: NonNull<RawCharDevice<T>>,
    _p: PhantomData<T>,
}

// SAFETY: `cdev_device_del()` and `put_device()` may be called on any thread,
// and `T` itself is `Send + Sync`.
unsafe impl<T: FileOperations> Send for CharDevice<T> {}
// SAFETY: A shared `CharDevice` exposes nothing but `data()`, which is `Sync`.
unsafe impl<T: FileOperations> Sync for CharDevice<T> {}

impl<T: FileOperations> CharDevice<T> {
    /// Creates the node `/dev/{name}` with number `minor` of `region`, child
    /// of `parent`, with the sysfs attribute `groups`, and hands `data` to
    /// every open of it.
    ///
    /// A `/` in `name` makes a directory under `/dev` and shows as `!` in
    /// sysfs, as for every class device.
    pub(crate) fn new<const G: usize>(
        region: &CharDeviceRegion,
        minor: u32,
        parent: &device::Device,
        name: &CStr,
        groups: &'static AttributeGroups<G>,
        data: Arc<T>,
    ) -> Result<Self> {
        if minor >= region.count {
            return Err(EINVAL);
        }
        let raw = KBox::new(
            RawCharDevice {
                dev: Opaque::zeroed(),
                cdev: Opaque::zeroed(),
                data,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(raw);
        // SAFETY: `raw` is a valid, exclusively owned allocation.
        let (dev, cdev) = unsafe { ((*raw).dev.get(), (*raw).cdev.get()) };

        // SAFETY: `dev` is zeroed memory, as `device_initialize` expects.
        // From here on the allocation belongs to the device's reference
        // count: `put_device` frees it through `release_device`.
        unsafe { bindings::device_initialize(dev) };
        // SAFETY: `dev` is initialised and not yet visible to anyone else.
        // The class outlives every device in it (see `CharDeviceRegion`'s
        // `Drop`), and `device_add` takes its own reference on `parent`.
        unsafe {
            (*dev).devt = region.base + minor;
            (*dev).class = region.class.as_ptr();
            (*dev).parent = device_ptr(parent);
            (*dev).release = Some(Self::release_device);
            (*dev).groups = groups.as_raw().cast_mut();
        }
        // SAFETY: `dev` is initialised, and the format consumes exactly one
        // NUL-terminated string argument.
        let ret = unsafe { bindings::dev_set_name(dev, c"%s".as_char_ptr(), name.as_char_ptr()) };
        if ret != 0 {
            // SAFETY: Drops the reference taken by `device_initialize`.
            unsafe { bindings::put_device(dev) };
            return Err(Error::from_errno(ret));
        }
        // SAFETY: `cdev` is valid memory; `VTABLE` is `'static`.
        unsafe {
            bindings::cdev_init(cdev, &Self::VTABLE);
            (*cdev).owner = this_module::<crate::LocalModule>().as_ptr();
        }
        // SAFETY: Both are initialised. On success the cdev holds a
        // reference on `dev` for as long as any file has it open.
        let ret = unsafe { bindings::cdev_device_add(cdev, dev) };
        if ret != 0 {
            // SAFETY: Drops the reference taken by `device_initialize`.
            unsafe { bindings::put_device(dev) };
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: Added above; the initial reference is now ours.
        Ok(Self {
            // SAFETY: `KBox::into_raw` never returns null.
            raw: unsafe { NonNull::new_unchecked(raw) },
            _p: PhantomData,
        })
    }

    /// Runs `f` with the open-file data of descriptor `fd` of the calling
    /// process when it is a file of this kind, as `file` is (opened
    /// through a node made here: both have this type's file operations),
    /// or with `None` for any other file. `EBADF` if `fd` is not open.
    pub(crate) fn with_peer<R>(
        file: &File,
        fd: u32,
        f: impl FnOnce(Option<<T::Ptr as ForeignOwnable>::Borrowed<'_>>) -> R,
    ) -> Result<R> {
        let peer = kernel::fs::file::LocalFile::fget(fd).map_err(|_| EBADF)?;
        // SAFETY: both files are valid (the caller's is in an ioctl call,
        // `peer` is referenced); `f_op` is set at open and never changes.
        let ours = unsafe { (*peer.as_ptr()).f_op == (*file.as_ptr()).f_op };
        if !ours {
            return Ok(f(None));
        }
        // SAFETY: a file with this type's operations was opened by
        // `Self::open`, which set its private data with `into_foreign`
        // (a descriptor only refers to a file whose open succeeded), and it
        // is not released while `peer` holds its reference.
        let data = unsafe { T::Ptr::borrow((*peer.as_ptr()).private_data.cast()) };
        Ok(f(Some(data)))
    }

    /// The data handed to every open of the node.
    pub(crate) fn data(&self) -> &Arc<T> {
        // SAFETY: By the type invariants `raw` is valid while `self` lives.
        unsafe { &(*self.raw.as_ptr()).data }
    }

    /// # Safety
    ///
    /// `dev` must be the `dev` field of a `RawCharDevice<T>` made by
    /// [`CharDevice::new`], whose last reference has just been dropped.
    ///
    /// [`CharDevice::new`]: CharDevice::new
    unsafe extern "C" fn release_device(dev: *mut bindings::device) {
        let dev = Opaque::cast_from(dev).cast_mut();
        // SAFETY: By the safety requirements `dev` is the `dev` field of a
        // `RawCharDevice<T>`.
        let raw = unsafe { kernel::container_of!(dev, RawCharDevice<T>, dev) };
        // SAFETY: `raw` came from `KBox::into_raw` in `new`, and this is the
        // last user of the allocation.
        drop(unsafe { KBox::from_raw(raw) });
    }

    /// # Safety
    ///
    /// Called by the VFS for a file being opened on a node of this type.
    unsafe extern "C" fn open(inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
        // SAFETY: The VFS passes a valid inode; for a character device node
        // `chrdev_open` has set `i_cdev` to our `cdev` and holds a reference
        // on it (hence on the whole `RawCharDevice<T>`) during this call.
        let cdev = Opaque::cast_from(unsafe { (*inode).__bindgen_anon_5.i_cdev }).cast_mut();
        // SAFETY: `cdev` is the `cdev` field of a `RawCharDevice<T>`.
        let raw = unsafe { kernel::container_of!(cdev, RawCharDevice<T>, cdev) };
        // SAFETY: `raw` is valid for the duration of this call (see above).
        let data = unsafe { &(*raw).data };
        // SAFETY: The file is valid for the duration of this call and has no
        // active `fdget_pos` region.
        let rust_file = unsafe { File::from_raw_file(file) };
        match T::open(data, rust_file) {
            Ok(ptr) => {
                if let Some(mapping) = T::shared_mapping(data) {
                    // SAFETY: The file is being opened and nobody else uses
                    // it yet; the mapping outlives the file, which holds a
                    // reference on `data`, its owner (as VFIO's devices do
                    // with their pseudo-filesystem inode).
                    unsafe { (*file).f_mapping = mapping.as_raw_mapping() };
                }
                // SAFETY: The open callback owns the file's private data.
                unsafe { (*file).private_data = ptr.into_foreign().cast() };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the VFS for a file of this type whose last reference is
    /// gone; `open` has set its private data.
    unsafe extern "C" fn release_file(
        _inode: *mut bindings::inode,
        file: *mut bindings::file,
    ) -> c_int {
        // SAFETY: The release callback owns the private data, which `open`
        // made with `into_foreign`; nothing else uses it any more.
        let ptr = unsafe { T::Ptr::from_foreign((*file).private_data.cast()) };
        // SAFETY: The file is valid for the duration of this call and has no
        // active `fdget_pos` region.
        T::release(ptr, unsafe { File::from_raw_file(file) });
        0
    }

    /// # Safety
    ///
    /// Called by the VFS for an open file of this type.
    unsafe extern "C" fn ioctl(file: *mut bindings::file, cmd: c_uint, arg: c_ulong) -> c_long {
        // SAFETY: Between `open` and `release` the private data is the value
        // `open` made with `into_foreign`, and an ioctl runs in between.
        let data = unsafe { T::Ptr::borrow((*file).private_data.cast()) };
        // SAFETY: The file is valid for the duration of this call and has no
        // active `fdget_pos` region.
        let rust_file = unsafe { File::from_raw_file(file) };
        match T::ioctl(data, rust_file, cmd, arg) {
            Ok(ret) => ret,
            Err(e) => e.to_errno() as c_long,
        }
    }

    /// # Safety
    ///
    /// Called by the VFS for an open file of this type, with a poll table
    /// (possibly null) valid for the duration of the call.
    ///
    /// (`kernel::miscdevice::MiscDevice` has no `poll` either; once it
    /// gains one, and a class and parent, this wrapper can go.)
    unsafe extern "C" fn poll(
        file: *mut bindings::file,
        table: *mut bindings::poll_table,
    ) -> bindings::__poll_t {
        // SAFETY: Between `open` and `release` the private data is the value
        // `open` made with `into_foreign`, and poll runs in between.
        let data = unsafe { T::Ptr::borrow((*file).private_data.cast()) };
        // SAFETY: The file is valid for the duration of this call and has no
        // active `fdget_pos` region.
        let rust_file = unsafe { File::from_raw_file(file) };
        // SAFETY: The VFS passes a poll table that is null or valid for the
        // duration of this call, which outlasts the `PollTable`.
        let table = unsafe { PollTable::from_raw(table) };
        T::poll(data, rust_file, &table)
    }

    /// # Safety
    ///
    /// Called by procfs for an open file of this type (`seq_show` in
    /// `fs/proc/fd.c`), with a reference on the file and a `seq_file` that
    /// only this call writes to for its duration.
    ///
    /// (`kernel::miscdevice::MiscDevice` has `show_fdinfo`; once misc
    /// devices can have a class, a parent and attribute groups, or the
    /// `kernel` crate has a character device with file operations, this
    /// wrapper can go.)
    unsafe extern "C" fn show_fdinfo(m: *mut bindings::seq_file, file: *mut bindings::file) {
        // SAFETY: Between `open` and `release` the private data is the value
        // `open` made with `into_foreign`; the reference procfs holds on
        // the file keeps `release` from running during this call.
        let data = unsafe { T::Ptr::borrow((*file).private_data.cast()) };
        // SAFETY: The file is valid for the duration of this call and has no
        // active `fdget_pos` region on this thread (procfs took a plain
        // reference with `get_file`).
        let rust_file = unsafe { File::from_raw_file(file) };
        // SAFETY: procfs passes the reader's `seq_file`, valid and written
        // by nobody else until this call returns.
        let m = unsafe { SeqFile::from_raw(m) };
        T::show_fdinfo(data, m, rust_file);
    }

    /// # Safety
    ///
    /// Called by the VFS for an open file of this type and a VMA being set
    /// up by `mmap(2)` on it.
    unsafe extern "C" fn mmap(
        file: *mut bindings::file,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: Between `open` and `release` the private data is the value
        // `open` made with `into_foreign`, and mmap runs in between.
        let data = unsafe { T::Ptr::borrow((*file).private_data.cast()) };
        // SAFETY: The VFS passes a VMA undergoing its initial set-up.
        let area = unsafe { VmaNew::from_raw(vma) };
        // SAFETY: The file is valid for the duration of this call and has no
        // active `fdget_pos` region.
        let rust_file = unsafe { File::from_raw_file(file) };
        match T::mmap(data, rust_file, area) {
            Ok(()) => {
                // SAFETY: The VMA is being set up and `VM_OPS` is `'static`.
                unsafe { (*vma).vm_ops = &Self::VM_OPS };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the MM for a fault in a VMA whose `vm_ops` are `VM_OPS`,
    /// which only [`Self::mmap`] sets.
    unsafe extern "C" fn fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
        let Some(vmf) = NonNull::new(vmf) else {
            return FaultResult::SIGBUS.as_raw();
        };
        // SAFETY: `vmf` is the fault being handled; its VMA is live and its
        // `vm_file` is the file mmap was called on (`VM_OPS` is only set by
        // `Self::mmap`), which the VMA holds a reference on: `release` has
        // not run, so the private data is `open`'s.
        let data = unsafe {
            let vma = vmf.as_ref().__bindgen_anon_1.vma;
            T::Ptr::borrow((*(*vma).vm_file).private_data.cast())
        };
        // SAFETY: `vmf` is the fault of a VMA set up by `T::mmap`, which sets
        // VMAs up with `set_io_pfnmap`, and does not outlive this call.
        let fault = unsafe { VmFault::from_raw(vmf) };
        T::fault(data, &fault).as_raw()
    }

    /// # Safety
    ///
    /// Called by the MM before splitting a VMA whose `vm_ops` are `VM_OPS`,
    /// with its `mmap_lock` held for writing.
    unsafe extern "C" fn may_split(vma: *mut bindings::vm_area_struct, _addr: c_ulong) -> c_int {
        // SAFETY: As in `Self::fault`: the VMA is live and holds a reference
        // on its `vm_file`, whose private data is `open`'s.
        let (data, pgoff) = unsafe {
            (
                T::Ptr::borrow((*(*vma).vm_file).private_data.cast()),
                (*vma).vm_pgoff,
            )
        };
        match T::may_split(data, (pgoff as u64) << kernel::page::PAGE_SHIFT) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// The file's private data, the VMA's offset in the file and its tag.
    ///
    /// # Safety
    ///
    /// `vma` is a live VMA whose `vm_ops` are `VM_OPS`, and whose `vm_file`
    /// it holds a reference on.
    unsafe fn vma_parts<'a>(
        vma: *mut bindings::vm_area_struct,
    ) -> (<T::Ptr as ForeignOwnable>::Borrowed<'a>, u64, usize) {
        // SAFETY: As in `Self::fault`: the VMA is live and holds a reference
        // on its `vm_file`, whose private data is `open`'s (`release` runs
        // only once no VMA holds the file).
        unsafe {
            (
                T::Ptr::borrow((*(*vma).vm_file).private_data.cast()),
                ((*vma).vm_pgoff as u64) << kernel::page::PAGE_SHIFT,
                (*vma).vm_private_data as usize,
            )
        }
    }

    /// # Safety
    ///
    /// Called by the MM for a new copy of a VMA whose `vm_ops` are `VM_OPS`.
    unsafe extern "C" fn vma_open(vma: *mut bindings::vm_area_struct) {
        // SAFETY: the copy is live and holds a reference on the file.
        let (data, offset, tag) = unsafe { Self::vma_parts(vma) };
        T::vma_open(data, offset, tag);
    }

    /// # Safety
    ///
    /// Called by the MM before a VMA whose `vm_ops` are `VM_OPS` is freed.
    unsafe extern "C" fn vma_close(vma: *mut bindings::vm_area_struct) {
        // SAFETY: the VMA is still live and still holds its file reference.
        let (data, offset, tag) = unsafe { Self::vma_parts(vma) };
        T::vma_close(data, offset, tag);
    }

    const VM_OPS: bindings::vm_operations_struct = bindings::vm_operations_struct {
        open: Some(Self::vma_open),
        close: Some(Self::vma_close),
        fault: Some(Self::fault),
        may_split: Some(Self::may_split),
        // SAFETY: All-zero is a valid `vm_operations_struct`: every field is
        // an optional function pointer or a plain pointer.
        ..unsafe { core::mem::zeroed() }
    };

    const VTABLE: bindings::file_operations = bindings::file_operations {
        owner: this_module::<crate::LocalModule>().as_ptr(),
        open: Some(Self::open),
        release: Some(Self::release_file),
        unlocked_ioctl: Some(Self::ioctl),
        poll: Some(Self::poll),
        mmap: Some(Self::mmap),
        show_fdinfo: Some(Self::show_fdinfo),
        // The commands have one layout for 32 and 64-bit callers, so only
        // the pointer needs converting.
        #[cfg(CONFIG_COMPAT)]
        compat_ioctl: bindings::compat_ptr_ioctl,
        // SAFETY: All-zero is a valid `file_operations`: every field is an
        // optional function pointer or a plain pointer.
        ..unsafe { core::mem::zeroed() }
    };
}

impl<T: FileOperations> Drop for CharDevice<T> {
    fn drop(&mut self) {
        let raw = self.raw.as_ptr();
        // SAFETY: By the type invariants both were added and we own a
        // reference on `dev`. After `cdev_device_del` no new open can
        // start; files already open keep the memory alive through their
        // cdev reference, and `put_device` drops only ours.
        unsafe {
            bindings::cdev_device_del((*raw).cdev.get(), (*raw).dev.get());
            bindings::put_device((*raw).dev.get());
        }
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Read-only procfs files.
//!
//! C header: [`include/linux/proc_fs.h`](srctree/include/linux/proc_fs.h),
//! reached through `rust/procfs_glue.c` since the Rust bindings of Linux
//! 7.3 do not include it.

use core::{
    marker::PhantomData,
    ptr::NonNull, //
};
use kernel::{
    bindings,
    ffi::{
        c_char,
        c_int, //
    },
    prelude::*,
    seq_file::SeqFile, //
};

/// `struct proc_dir_entry`, opaque to Rust.
#[repr(C)]
struct ProcDirEntry {
    _private: [u8; 0],
}

extern "C" {
    fn tt_procfs_mkdir(name: *const c_char, parent: *mut ProcDirEntry) -> *mut ProcDirEntry;
    fn tt_procfs_create(
        name: *const c_char,
        parent: *mut ProcDirEntry,
        entry: *mut c_void,
    ) -> *mut ProcDirEntry;
    fn tt_procfs_remove(pde: *mut ProcDirEntry);
}

/// The contents of a procfs file.
pub(crate) trait ProcShow: Send + Sync + 'static {
    /// Writes the file's contents. Runs in the reader's context.
    fn show(&self, m: &SeqFile);
}

/// A procfs directory, removed with everything in it when dropped.
///
/// # Invariants
///
/// `pde` is a live directory made by `proc_mkdir`, removed only in [`Drop`].
pub(crate) struct ProcDir {
    pde: NonNull<ProcDirEntry>,
}

// SAFETY: procfs entries may be created and removed from any thread.
unsafe impl Send for ProcDir {}
// SAFETY: `&ProcDir` only hands out its pointer to procfs calls that are
// safe to make concurrently.
unsafe impl Sync for ProcDir {}

impl ProcDir {
    /// Creates `/proc/{path}`, or `{path}` in `parent`. `path` may have
    /// several components whose parents exist (e.g. `driver/NAME`).
    pub(crate) fn new(path: &CStr, parent: Option<&ProcDir>) -> Result<Self> {
        let parent = parent.map_or(core::ptr::null_mut(), |p| p.pde.as_ptr());
        // SAFETY: `path` is NUL-terminated and copied by procfs; `parent`
        // is null (the root) or live by `ProcDir`'s invariants.
        let pde = unsafe { tt_procfs_mkdir(path.as_char_ptr(), parent) };
        // INVARIANT: Made by `proc_mkdir` above.
        Ok(Self {
            pde: NonNull::new(pde).ok_or(ENOMEM)?,
        })
    }
}

impl Drop for ProcDir {
    fn drop(&mut self) {
        // SAFETY: By the type invariants `pde` is live; nothing uses it after.
        unsafe { tt_procfs_remove(self.pde.as_ptr()) };
    }
}

/// The data of a procfs file: the show callback must come first, where the
/// C side finds it (`struct tt_procfs_entry`).
#[repr(C)]
struct Entry<T> {
    show: unsafe extern "C" fn(*mut bindings::seq_file, *mut Entry<T>) -> c_int,
    data: T,
}

/// A read-only procfs file showing `T`, removed when dropped.
///
/// # Invariants
///
/// `pde` is a live file made by `proc_create_data` whose data is `entry`;
/// `entry` is a `KBox` allocation freed only in [`Drop`], after the file.
pub(crate) struct ProcFile<T: ProcShow> {
    pde: NonNull<ProcDirEntry>,
    entry: NonNull<Entry<T>>,
    _p: PhantomData<T>,
}

// SAFETY: `T` is `Send + Sync`, and procfs entries may be removed from any
// thread.
unsafe impl<T: ProcShow> Send for ProcFile<T> {}
// SAFETY: A shared `ProcFile` gives access to nothing.
unsafe impl<T: ProcShow> Sync for ProcFile<T> {}

impl<T: ProcShow> ProcFile<T> {
    /// Creates the file `name` in `dir`, readable by everyone.
    pub(crate) fn new(name: &CStr, dir: &ProcDir, data: T) -> Result<Self> {
        let entry = KBox::new(
            Entry {
                show: Self::show,
                data,
            },
            GFP_KERNEL,
        )?;
        let entry = KBox::into_raw(entry);
        // SAFETY: `name` is NUL-terminated and copied by procfs; `dir` is
        // live; `entry` starts with the callback the C side expects and
        // stays valid until after the file is removed (see `Drop`).
        let pde = unsafe { tt_procfs_create(name.as_char_ptr(), dir.pde.as_ptr(), entry.cast()) };
        // SAFETY: `KBox::into_raw` never returns null.
        let entry = unsafe { NonNull::new_unchecked(entry) };
        match NonNull::new(pde) {
            // INVARIANT: Created above with `entry` as its data.
            Some(pde) => Ok(Self {
                pde,
                entry,
                _p: PhantomData,
            }),
            None => {
                // SAFETY: No file refers to `entry`; it came from `KBox`.
                drop(unsafe { KBox::from_raw(entry.as_ptr()) });
                Err(ENOMEM)
            }
        }
    }

    /// # Safety
    ///
    /// Called by `rust/procfs_glue.c` with a live `seq_file` and the entry of
    /// a file made by [`ProcFile::new`], which procfs keeps alive during the
    /// call.
    unsafe extern "C" fn show(m: *mut bindings::seq_file, entry: *mut Entry<T>) -> c_int {
        // SAFETY: See the function's safety requirements.
        let (m, entry) = unsafe { (SeqFile::from_raw(m), &*entry) };
        entry.data.show(m);
        0
    }
}

impl<T: ProcShow> Drop for ProcFile<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariants `pde` is live. `proc_remove`
        // returns once no callback runs, so `entry` is unused after it.
        unsafe {
            tt_procfs_remove(self.pde.as_ptr());
            drop(KBox::from_raw(self.entry.as_ptr()));
        }
    }
}

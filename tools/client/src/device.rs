//! An open `/dev/tenstorrent/N` and its commands.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::abi::{self, Extensible};
use crate::error::{Error, Result};
use crate::wait::{Monotonic, Wait};

/// Directory of the device nodes.
pub const DEV_DIR: &str = "/dev/tenstorrent";
/// Directory of the class devices (`tenstorrent!N`).
pub const CLASS_DIR: &str = "/sys/class/tenstorrent";

/// An open tt-arbiter device file: the owner of the locks it acquires.
///
/// Locks belong to the open file description, like `flock`: `dup` and `fork`
/// share them, and they are released when the last reference closes.
///
/// ```no_run
/// use tt_arbiter::{abi, Device};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dev = Device::open_index(0)?;
/// let info = dev.device_info()?;
/// println!("vendor {:04x}", info.vendor_id);
/// {
///     let guard = dev.lock(abi::LOCK_ARC_MSG)?;
///     if guard.owner_died() {
///         println!("previous holder died, re-initialise the mailbox");
///     }
///     // ... talk to the ARC ...
/// } // released here
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
}

/// A device found by [`Device::enumerate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceNode {
    /// N of `/dev/tenstorrent/N`.
    pub index: u32,
    /// `/dev/tenstorrent/N`.
    pub path: PathBuf,
    /// Major and minor number of the node, equal to sysfs' `dev`.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// PCI address (`DDDD:BB:DD.F`) of the card, from sysfs.
    pub bdf: Option<String>,
}

/// Operation of the C driver's LOCK_CTL command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum LockCtlOp {
    /// Non-blocking try: 1 acquired, 0 held by anyone or someone queued.
    Acquire = abi::LOCK_CTL_ACQUIRE,
    /// 1 released, 0 not held by this file.
    Release = abi::LOCK_CTL_RELEASE,
    /// Bit 0 held by this file, bit 1 held by anyone.
    Test = abi::LOCK_CTL_TEST,
    /// Sleeps until acquired: 1.
    AcquireBlocking = abi::LOCK_CTL_ACQUIRE_BLOCKING,
}

/// Result of a successful acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acquired {
    /// Locks (bit i = lock i) whose previous holder's file closed holding
    /// them: the state they protect may be half-updated.
    pub owner_died_mask: u64,
    /// Time spent waiting.
    pub waited: Duration,
}

/// State of one lock, from QUERY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockState {
    /// Lock index.
    pub index: u32,
    /// Held by anyone.
    pub held: bool,
    /// Held by the file that asked.
    pub held_by_caller: bool,
    /// The owner-died mark is set (not yet consumed by an acquisition).
    pub owner_died: bool,
    /// Pid of the process that acquired it (0 if not visible).
    pub holder_pid: u32,
    /// Its comm at acquisition.
    pub holder_comm: String,
    /// How long it has been held.
    pub held_for: Duration,
    /// Queued waiters.
    pub waiters: u32,
    /// The raw answer, counters included.
    pub raw: abi::LockQuery,
}

impl Device {
    /// Opens a device node read-write, close-on-exec.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Device> {
        let path = CString::new(path.as_ref().as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: `path` is a valid NUL-terminated string.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        Ok(Device {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Opens `/dev/tenstorrent/N`.
    pub fn open_index(n: u32) -> io::Result<Device> {
        Device::open(format!("{DEV_DIR}/{n}"))
    }

    /// Wraps an already open device file (e.g. one received over a socket).
    pub fn from_fd(fd: OwnedFd) -> Device {
        Device { fd }
    }

    /// Lists the devices the way the ecosystem does: every numeric entry of
    /// `/dev/tenstorrent/` that is a character device whose number equals
    /// `/sys/class/tenstorrent/tenstorrent!N/dev`. Sorted by N; an empty
    /// list when there is no device directory.
    pub fn enumerate() -> io::Result<Vec<DeviceNode>> {
        let entries = match fs::read_dir(DEV_DIR) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut nodes = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Some(index) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(meta) = fs::metadata(entry.path()) else {
                continue;
            };
            if !meta.file_type().is_char_device() {
                continue;
            }
            let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
            let class = Path::new(CLASS_DIR).join(format!("tenstorrent!{index}"));
            let Ok(dev) = fs::read_to_string(class.join("dev")) else {
                continue;
            };
            if dev.trim() != format!("{major}:{minor}") {
                continue;
            }
            let bdf = fs::read_link(class.join("device"))
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
            nodes.push(DeviceNode {
                index,
                path: entry.path(),
                major,
                minor,
                bdf,
            });
        }
        nodes.sort_by_key(|n| n.index);
        Ok(nodes)
    }

    /// Issues `ioctl(fd, cmd, arg)`, returning its non-negative result.
    ///
    /// # Safety
    /// `arg` must be valid for what the kernel reads and writes for `cmd`
    /// (or deliberately invalid, to test the kernel's checks).
    pub unsafe fn ioctl_raw(&self, cmd: u32, arg: *mut libc::c_void) -> io::Result<i32> {
        // SAFETY: the caller vouches for `arg`; the fd is open.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), cmd as _, arg) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    /// `ioctl` with a struct of the ABI, in and out.
    fn ioctl<T: abi::AbiStruct>(&self, cmd: u32, arg: &mut T) -> io::Result<i32> {
        // SAFETY: every command used with this helper reads and writes at
        // most `size_of::<T>()` bytes of `arg`.
        unsafe { self.ioctl_raw(cmd, (arg as *mut T).cast()) }
    }

    /// GET_DRIVER_INFO.
    pub fn driver_info(&self) -> io::Result<abi::GetDriverInfoOut> {
        let mut arg = abi::GetDriverInfo::default();
        arg.input.output_size_bytes = size_of::<abi::GetDriverInfoOut>() as u32;
        self.ioctl(abi::IOCTL_GET_DRIVER_INFO, &mut arg)?;
        Ok(arg.output)
    }

    /// GET_DEVICE_INFO.
    pub fn device_info(&self) -> io::Result<abi::GetDeviceInfoOut> {
        let mut arg = abi::GetDeviceInfo::default();
        arg.input.output_size_bytes = size_of::<abi::GetDeviceInfoOut>() as u32;
        self.ioctl(abi::IOCTL_GET_DEVICE_INFO, &mut arg)?;
        Ok(arg.output)
    }

    /// LOCK_CTL, the C driver's lock command: returns `out.value`.
    pub fn lock_ctl(&self, index: u8, op: LockCtlOp) -> io::Result<u8> {
        let mut arg = abi::LockCtl::default();
        arg.input.output_size_bytes = size_of::<abi::LockCtlOut>() as u32;
        arg.input.flags = op as u32;
        arg.input.index = index;
        self.ioctl(abi::IOCTL_LOCK_CTL, &mut arg)?;
        Ok(arg.output.value)
    }

    /// NOC_READ: `width` bytes (1, 2, 4 or 8; `addr` aligned to it) at NOC
    /// address `addr` of tile (`x`, `y`) on NOC `noc`, read by the kernel
    /// through its own window, zero-extended. Nothing is mapped, so a reset
    /// of the card is an `ENODEV` error here, never a `SIGBUS`.
    ///
    /// ```no_run
    /// use tt_arbiter::Device;
    /// # fn main() -> std::io::Result<()> {
    /// let dev = Device::open_index(0)?;
    /// // NOC_NODE_ID of Wormhole's ARC tile.
    /// let id = dev.noc_read(0, 10, 0, 0xFFFB_2002C, 4)?;
    /// println!("x {} y {}", id & 0x3f, (id >> 6) & 0x3f);
    /// # Ok(()) }
    /// ```
    pub fn noc_read(&self, x: u16, y: u16, noc: u8, addr: u64, width: u8) -> io::Result<u64> {
        let mut arg = abi::NocRead {
            x,
            y,
            noc,
            width,
            addr,
            ..abi::NocRead::new()
        };
        self.ioctl(abi::IOCTL_NOC_READ, &mut arg)?;
        Ok(arg.value)
    }

    /// NOC_WRITE: the low `width` bytes (1, 2, 4 or 8; `addr` aligned to
    /// it) of `value` at NOC address `addr` of tile (`x`, `y`) on NOC
    /// `noc`, written by the kernel through its own window; it has reached
    /// the card when this returns.
    pub fn noc_write(
        &self,
        x: u16,
        y: u16,
        noc: u8,
        addr: u64,
        width: u8,
        value: u64,
    ) -> io::Result<()> {
        let mut arg = abi::NocWrite {
            x,
            y,
            noc,
            width,
            addr,
            value,
            ..abi::NocWrite::new()
        };
        self.ioctl(abi::IOCTL_NOC_WRITE, &mut arg)?;
        Ok(())
    }

    /// ACQUIRE: takes lock `index`, waiting as `wait` says.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tt_arbiter::{Device, Error, Wait};
    /// # fn main() -> std::io::Result<()> {
    /// let dev = Device::open_index(0)?;
    /// match dev.acquire(16, Wait::Timeout(Duration::from_millis(100))) {
    ///     Ok(_) => dev.release(1 << 16).unwrap(),
    ///     Err(Error::Timeout { holder_pid }) => println!("held by {holder_pid}"),
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn acquire(&self, index: u32, wait: Wait) -> Result<Acquired> {
        let mut arg = abi::LockAcquire::new();
        arg.index = index;
        (arg.flags, arg.deadline_ns) = wait.ioctl_args(Monotonic::now());
        match self.ioctl(abi::IOCTL_LOCK_ACQUIRE, &mut arg) {
            Ok(_) => Ok(Acquired {
                owner_died_mask: if arg.out_flags & abi::LOCK_OWNER_DIED != 0 {
                    1u64.checked_shl(index).unwrap_or(0)
                } else {
                    0
                },
                waited: Duration::from_nanos(arg.waited_ns),
            }),
            Err(e) => Err(Error::from_errno(
                e.raw_os_error().unwrap_or(0),
                arg.holder_pid,
            )),
        }
    }

    /// ACQUIRE_SET: takes every lock of `mask` at once, all or nothing.
    pub fn acquire_set(&self, mask: u64, wait: Wait) -> Result<Acquired> {
        let mut arg = abi::LockAcquireSet::new();
        arg.mask = mask;
        (arg.flags, arg.deadline_ns) = wait.ioctl_args(Monotonic::now());
        match self.ioctl(abi::IOCTL_LOCK_ACQUIRE_SET, &mut arg) {
            Ok(_) => Ok(Acquired {
                owner_died_mask: arg.owner_died_mask,
                waited: Duration::from_nanos(arg.waited_ns),
            }),
            Err(e) => Err(Error::from_errno(
                e.raw_os_error().unwrap_or(0),
                arg.holder_pid,
            )),
        }
    }

    /// RELEASE: releases every lock of `mask`, all or nothing
    /// ([`Error::NotHeld`] if this file does not hold them all).
    pub fn release(&self, mask: u64) -> Result<()> {
        let mut arg = abi::LockRelease::new();
        arg.mask = mask;
        self.ioctl(abi::IOCTL_LOCK_RELEASE, &mut arg)?;
        Ok(())
    }

    /// QUERY: the state of lock `index`.
    pub fn query(&self, index: u32) -> Result<LockState> {
        let mut q = abi::LockQuery::new();
        q.index = index;
        self.ioctl(abi::IOCTL_LOCK_QUERY, &mut q)?;
        let comm_len = q.holder_comm.iter().position(|&b| b == 0).unwrap_or(16);
        Ok(LockState {
            index,
            held: q.out_flags & abi::LOCK_QUERY_HELD != 0,
            held_by_caller: q.out_flags & abi::LOCK_QUERY_HELD_BY_CALLER != 0,
            owner_died: q.out_flags & abi::LOCK_QUERY_OWNER_DIED != 0,
            holder_pid: q.holder_pid,
            holder_comm: String::from_utf8_lossy(&q.holder_comm[..comm_len]).into_owned(),
            held_for: Duration::from_nanos(q.held_ns),
            waiters: q.waiters,
            raw: q,
        })
    }

    /// Takes lock `index`, blocking; released when the guard drops.
    ///
    /// Blocks until the lock is granted (FIFO among waiters), a signal
    /// handler runs ([`Error::Interrupted`]) or the card goes away
    /// ([`Error::DeviceGone`]). Not re-entrant: [`Error::Deadlock`] if this
    /// file already holds it.
    ///
    /// ```no_run
    /// use tt_arbiter::{locks, Device};
    /// # fn main() -> Result<(), tt_arbiter::Error> {
    /// let dev = Device::open_index(0)?;
    /// let guard = dev.lock(locks::ARC_MSG)?;
    /// if guard.owner_died() {
    ///     // the previous holder died holding it: reset what it protects
    /// }
    /// drop(guard); // released
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, index: u32) -> Result<LockGuard<'_>> {
        self.lock_mask(bit(index)?, Wait::Block)
    }

    /// Takes lock `index` if it is free and nobody is queued, else
    /// [`Error::Busy`] with the holder's pid. A try that fails while others
    /// are queued holds a place in the queue for a short lease, renewed by
    /// the next try: a caller that polls (as UMD does) is served in its
    /// turn.
    ///
    /// ```no_run
    /// use tt_arbiter::{locks, Device, Error};
    /// # fn main() -> Result<(), tt_arbiter::Error> {
    /// let dev = Device::open_index(0)?;
    /// match dev.try_lock(locks::CHIP_IN_USE) {
    ///     Ok(_guard) => println!("ours until the end of this block"),
    ///     Err(Error::Busy { holder_pid }) => println!("in use by pid {holder_pid}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock(&self, index: u32) -> Result<LockGuard<'_>> {
        self.lock_mask(bit(index)?, Wait::Try)
    }

    /// Takes lock `index`, waiting at most `timeout` ([`Error::Timeout`]
    /// with the holder's pid then; never before `timeout` has passed).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tt_arbiter::{locks, Device, Error};
    /// # fn main() -> Result<(), tt_arbiter::Error> {
    /// let dev = Device::open_index(0)?;
    /// match dev.lock_timeout(locks::NON_MMIO, Duration::from_secs(2)) {
    ///     Ok(_guard) => { /* ... */ }
    ///     Err(Error::Timeout { holder_pid }) => eprintln!("pid {holder_pid} holds it"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_timeout(&self, index: u32, timeout: Duration) -> Result<LockGuard<'_>> {
        self.lock_mask(bit(index)?, Wait::Timeout(timeout))
    }

    /// Takes every lock of `indices` at once, blocking: all or nothing, and
    /// never holding some while waiting for the others, so two callers
    /// asking for overlapping sets cannot deadlock. One guard releases them
    /// all. An empty list is [`Error::Invalid`].
    ///
    /// ```no_run
    /// use tt_arbiter::{locks, Device};
    /// # fn main() -> Result<(), tt_arbiter::Error> {
    /// let dev = Device::open_index(0)?;
    /// let guard = dev.lock_many(&[locks::ARC_MSG, locks::NON_MMIO])?;
    /// assert_eq!(guard.indices(), vec![locks::ARC_MSG, locks::NON_MMIO]);
    /// # Ok(()) }
    /// ```
    pub fn lock_many(&self, indices: &[u32]) -> Result<LockGuard<'_>> {
        self.lock_mask(mask_of(indices)?, Wait::Block)
    }

    /// [`lock_many`](Self::lock_many) without waiting ([`Error::Busy`]).
    pub fn try_lock_many(&self, indices: &[u32]) -> Result<LockGuard<'_>> {
        self.lock_mask(mask_of(indices)?, Wait::Try)
    }

    /// [`lock_many`](Self::lock_many) waiting at most `timeout`.
    pub fn lock_many_timeout(&self, indices: &[u32], timeout: Duration) -> Result<LockGuard<'_>> {
        self.lock_mask(mask_of(indices)?, Wait::Timeout(timeout))
    }

    /// Takes every lock of `mask` (bit i = lock i) at once, waiting as
    /// `wait` says: ACQUIRE for one lock, ACQUIRE_SET for several.
    ///
    /// ```no_run
    /// use tt_arbiter::{locks, Device, Wait};
    /// # fn main() -> Result<(), tt_arbiter::Error> {
    /// let dev = Device::open_index(0)?;
    /// let mask = 1 << locks::ARC_MSG | 1 << locks::NON_MMIO;
    /// let guard = dev.lock_mask(mask, Wait::Block)?;
    /// assert_eq!(guard.mask(), mask);
    /// guard.unlock()?;
    /// # Ok(()) }
    /// ```
    pub fn lock_mask(&self, mask: u64, wait: Wait) -> Result<LockGuard<'_>> {
        if mask == 0 {
            return Err(Error::Invalid);
        }
        let acquired = if mask.count_ones() == 1 {
            self.acquire(mask.trailing_zeros(), wait)?
        } else {
            self.acquire_set(mask, wait)?
        };
        Ok(LockGuard {
            dev: self,
            mask,
            acquired,
            armed: true,
        })
    }
}

/// The mask (bit i = lock i) of `indices`: [`Error::Invalid`] if it is
/// empty or an index is not below [`abi::LOCK_COUNT`].
///
/// ```
/// assert_eq!(tt_arbiter::mask_of(&[0, 16]).unwrap(), 1 | 1 << 16);
/// assert!(tt_arbiter::mask_of(&[]).is_err());
/// assert!(tt_arbiter::mask_of(&[64]).is_err());
/// ```
pub fn mask_of(indices: &[u32]) -> Result<u64> {
    let mut mask = 0;
    for &i in indices {
        mask |= bit(i)?;
    }
    if mask == 0 {
        return Err(Error::Invalid);
    }
    Ok(mask)
}

fn bit(index: u32) -> Result<u64> {
    1u64.checked_shl(index).ok_or(Error::Invalid)
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Device {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl IntoRawFd for Device {
    fn into_raw_fd(self) -> RawFd {
        self.fd.into_raw_fd()
    }
}

impl From<OwnedFd> for Device {
    fn from(fd: OwnedFd) -> Self {
        Device { fd }
    }
}

impl From<Device> for OwnedFd {
    fn from(d: Device) -> Self {
        d.fd
    }
}

/// Locks held by a [`Device`]; dropping the guard releases them.
#[derive(Debug)]
#[must_use = "the locks are released when the guard is dropped"]
pub struct LockGuard<'a> {
    dev: &'a Device,
    mask: u64,
    acquired: Acquired,
    armed: bool,
}

impl LockGuard<'_> {
    /// The locks held (bit i = lock i).
    pub fn mask(&self) -> u64 {
        self.mask
    }

    /// The indices of the locks held, in increasing order.
    pub fn indices(&self) -> Vec<u32> {
        (0..abi::LOCK_COUNT)
            .filter(|&i| self.mask & (1 << i) != 0)
            .collect()
    }

    /// Whether the previous holder of any of them died holding it: its
    /// file closed (exit, crash, `SIGKILL`) while it held the lock, so the
    /// state the lock protects may be half-updated.
    pub fn owner_died(&self) -> bool {
        self.acquired.owner_died_mask != 0
    }

    /// Which of them had a holder that died holding it.
    pub fn owner_died_mask(&self) -> u64 {
        self.acquired.owner_died_mask
    }

    /// Time spent waiting for them.
    pub fn waited(&self) -> Duration {
        self.acquired.waited
    }

    /// The device the locks belong to.
    pub fn device(&self) -> &Device {
        self.dev
    }

    /// Releases now, reporting errors (dropping ignores them).
    pub fn unlock(mut self) -> Result<()> {
        self.armed = false;
        self.dev.release(self.mask)
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.dev.release(self.mask);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_of_index_lists() {
        assert_eq!(mask_of(&[0]).unwrap(), 1);
        assert_eq!(mask_of(&[63, 0, 63]).unwrap(), 1 << 63 | 1);
        assert!(matches!(mask_of(&[]), Err(Error::Invalid)));
        assert!(matches!(mask_of(&[1, 64]), Err(Error::Invalid)));
        assert!(matches!(mask_of(&[u32::MAX]), Err(Error::Invalid)));
        assert!(matches!(bit(64), Err(Error::Invalid)));
    }

    #[test]
    fn well_known_names_are_constants() {
        use crate::locks;
        for (i, name) in locks::NAMES.iter().enumerate() {
            assert_eq!(locks::index(name), Some(i as u32));
        }
        assert_eq!(locks::ETH15, 15);
        assert_eq!(locks::name(locks::ARC_MSG), Some("ARC_MSG"));
        assert_eq!(locks::name(locks::CHIP_IN_USE), Some("CHIP_IN_USE"));
        assert_eq!(locks::name(22), None);
    }

    #[test]
    fn open_missing_node_is_an_error() {
        let e = Device::open("/nonexistent/tenstorrent/0").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}

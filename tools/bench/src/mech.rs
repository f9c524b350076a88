//! The lock mechanisms compared, behind one interface.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

use tt_arbiter::abi::{self, Extensible};

use crate::sys;

/// A locking mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mech {
    /// ENOTTY ioctl on /dev/null: the floor of any ioctl-based lock (no lock).
    Null,
    /// This driver's LOCK_CTL (ACQUIRE_BLOCKING / RELEASE).
    LockCtl,
    /// This driver's LOCK_ACQUIRE / LOCK_RELEASE.
    Acquire,
    /// `flock(LOCK_EX)` / `flock(LOCK_UN)` on a tmpfs file.
    Flock,
    /// OFD write lock, `fcntl(F_OFD_SETLKW)`, on a tmpfs file.
    Ofd,
    /// Process-shared robust pthread mutex in shared memory (UMD today).
    Robust,
    /// LOCK_CTL try, then 1 ms nanosleep, until acquired (UMD today
    /// against the C driver).
    Poll,
}

impl Mech {
    /// Every mechanism, in table order.
    pub const ALL: [Mech; 7] = [
        Mech::Null,
        Mech::LockCtl,
        Mech::Acquire,
        Mech::Flock,
        Mech::Ofd,
        Mech::Robust,
        Mech::Poll,
    ];

    /// Short name (JSON key, table row).
    pub fn name(self) -> &'static str {
        match self {
            Mech::Null => "null_ioctl",
            Mech::LockCtl => "lock_ctl",
            Mech::Acquire => "acquire",
            Mech::Flock => "flock",
            Mech::Ofd => "ofd",
            Mech::Robust => "robust_mutex",
            Mech::Poll => "poll_1ms",
        }
    }

    /// The mechanism named `name` ([`Mech::name`]).
    pub fn from_name(name: &str) -> Option<Mech> {
        Mech::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether tt-kmd 2.10 can run it: it has LOCK_CTL (a try, and a
    /// blocking acquire that wakes every waiter at each release) but none
    /// of this driver's own commands.
    pub fn runs_on_ttkmd(self) -> bool {
        matches!(self, Mech::Null | Mech::Flock | Mech::LockCtl | Mech::Poll)
    }

    /// Whether it needs /dev/tenstorrent.
    pub fn needs_device(self) -> bool {
        matches!(self, Mech::LockCtl | Mech::Acquire | Mech::Poll)
    }

    /// Whether it is a lock at all (the null ioctl is not).
    pub fn is_lock(self) -> bool {
        self != Mech::Null
    }

    /// Whether the driver's QUERY counters describe it.
    pub fn is_driver_queue(self) -> bool {
        matches!(self, Mech::LockCtl | Mech::Acquire)
    }
}

/// Where the locks live, set once at start-up (before any fork).
pub struct Setup {
    /// The device node.
    pub device: String,
    /// The lock index used on the device.
    pub index: u32,
    /// The file locked by flock and OFD locks.
    pub lock_file: String,
    /// The process-shared robust mutex, in shared memory.
    pub mutex: *mut libc::pthread_mutex_t,
}

// SAFETY: the mutex pointer refers to process-shared memory that lives as
// long as the process; the mutex is designed to be used from any thread.
unsafe impl Sync for Setup {}
// SAFETY: as above.
unsafe impl Send for Setup {}

static SETUP: OnceLock<Setup> = OnceLock::new();

struct MutexBox(libc::pthread_mutex_t);

/// Records where the locks live and initialises the robust mutex.
pub fn init(device: String, index: u32, lock_file: String) {
    let mutex = &sys::shared::<MutexBox>().0 as *const _ as *mut libc::pthread_mutex_t;
    // SAFETY: an all-zero attr is fine to pass to init; every call gets
    // valid pointers; the mutex is not in use yet.
    unsafe {
        let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_mutexattr_init(&mut attr), 0);
        assert_eq!(
            libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED),
            0
        );
        assert_eq!(
            libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST),
            0
        );
        assert_eq!(libc::pthread_mutex_init(mutex, &attr), 0);
        libc::pthread_mutexattr_destroy(&mut attr);
    }
    let c = CString::new(lock_file.clone()).unwrap();
    // SAFETY: valid path; the descriptor is closed at once.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        )
    };
    assert!(
        fd >= 0,
        "create {lock_file}: {}",
        io::Error::last_os_error()
    );
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    assert!(
        SETUP
            .set(Setup {
                device,
                index,
                lock_file,
                mutex,
            })
            .is_ok(),
        "mech::init called twice"
    );
}

fn setup() -> &'static Setup {
    SETUP.get().expect("mech::init not called")
}

fn open(path: &str) -> RawFd {
    let c = CString::new(path).unwrap();
    // SAFETY: valid path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open {path}: {}", io::Error::last_os_error());
    fd
}

/// One lock owner: its own open file description (or, for the mutex, a
/// handle on the shared mutex). Open one per process or thread, after
/// forking: the driver's locks, flock and OFD locks belong to the open file.
pub struct Locker {
    mech: Mech,
    fd: RawFd,
    index: u32,
    mutex: *mut libc::pthread_mutex_t,
}

impl Locker {
    /// A new owner for `mech`.
    pub fn open(mech: Mech) -> Locker {
        let s = setup();
        let fd = match mech {
            Mech::Null => open("/dev/null"),
            Mech::LockCtl | Mech::Acquire | Mech::Poll => open(&s.device),
            Mech::Flock | Mech::Ofd => open(&s.lock_file),
            Mech::Robust => -1,
        };
        Locker {
            mech,
            fd,
            index: s.index,
            mutex: s.mutex,
        }
    }

    fn ioctl<T>(&self, cmd: u32, arg: &mut T) -> io::Result<()> {
        // SAFETY: `arg` is the struct `cmd` reads and writes.
        let rc = unsafe { libc::ioctl(self.fd, cmd as _, arg as *mut T) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn lock_ctl(&self, op: u32) -> u8 {
        let mut arg = abi::LockCtl::default();
        arg.input.output_size_bytes = size_of::<abi::LockCtlOut>() as u32;
        arg.input.flags = op;
        arg.input.index = self.index as u8;
        loop {
            match self.ioctl(abi::IOCTL_LOCK_CTL, &mut arg) {
                Ok(()) => return arg.output.value,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => panic!("LOCK_CTL {op}: {e}"),
            }
        }
    }

    /// Takes the lock, waiting as long as needed. For [`Mech::Null`], one
    /// ENOTTY ioctl.
    pub fn lock(&self) {
        match self.mech {
            Mech::Null => {
                let mut arg = abi::LockCtl::default();
                let e = self.ioctl(abi::IOCTL_LOCK_CTL, &mut arg).unwrap_err();
                debug_assert_eq!(e.raw_os_error(), Some(libc::ENOTTY));
            }
            Mech::LockCtl => {
                let v = self.lock_ctl(abi::LOCK_CTL_ACQUIRE_BLOCKING);
                assert_eq!(v, 1, "LOCK_CTL ACQUIRE_BLOCKING");
            }
            Mech::Poll => {
                while self.lock_ctl(abi::LOCK_CTL_ACQUIRE) != 1 {
                    sys::sleep_ns(1_000_000);
                }
            }
            Mech::Acquire => {
                let mut arg = abi::LockAcquire::new();
                arg.index = self.index;
                loop {
                    match self.ioctl(abi::IOCTL_LOCK_ACQUIRE, &mut arg) {
                        Ok(()) => return,
                        Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                        Err(e) => panic!("LOCK_ACQUIRE: {e}"),
                    }
                }
            }
            Mech::Flock => {
                // SAFETY: our descriptor.
                while unsafe { libc::flock(self.fd, libc::LOCK_EX) } != 0 {
                    let e = io::Error::last_os_error();
                    assert_eq!(e.raw_os_error(), Some(libc::EINTR), "flock: {e}");
                }
            }
            Mech::Ofd => self.ofd(libc::F_WRLCK as i16),
            Mech::Robust => {
                // SAFETY: an initialised process-shared mutex.
                let rc = unsafe { libc::pthread_mutex_lock(self.mutex) };
                if rc == libc::EOWNERDEAD {
                    // SAFETY: we hold it.
                    unsafe { libc::pthread_mutex_consistent(self.mutex) };
                } else {
                    assert_eq!(rc, 0, "pthread_mutex_lock");
                }
            }
        }
    }

    /// One try at the lock, without waiting: whether it was taken.
    /// LOCK_CTL's ACQUIRE for the LOCK_CTL mechanisms (what UMD polls),
    /// LOCK_NONBLOCK, `LOCK_NB`, `F_OFD_SETLK`, `pthread_mutex_trylock`.
    pub fn try_lock(&self) -> bool {
        let busy = |e: io::Error, what: &str| match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EACCES | libc::EBUSY) => false,
            _ => panic!("{what}: {e}"),
        };
        match self.mech {
            Mech::Null => {
                self.lock();
                true
            }
            Mech::LockCtl | Mech::Poll => self.lock_ctl(abi::LOCK_CTL_ACQUIRE) == 1,
            Mech::Acquire => {
                let mut arg = abi::LockAcquire::new();
                arg.index = self.index;
                arg.flags = abi::LOCK_NONBLOCK;
                match self.ioctl(abi::IOCTL_LOCK_ACQUIRE, &mut arg) {
                    Ok(()) => true,
                    Err(e) => busy(e, "LOCK_ACQUIRE NONBLOCK"),
                }
            }
            Mech::Flock => {
                // SAFETY: our descriptor.
                if unsafe { libc::flock(self.fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                    true
                } else {
                    busy(io::Error::last_os_error(), "flock(LOCK_NB)")
                }
            }
            Mech::Ofd => {
                // SAFETY: an all-zero flock is valid.
                let mut fl: libc::flock = unsafe { std::mem::zeroed() };
                fl.l_type = libc::F_WRLCK as i16;
                fl.l_whence = libc::SEEK_SET as i16;
                // SAFETY: our descriptor and a valid struct flock.
                if unsafe { libc::fcntl(self.fd, libc::F_OFD_SETLK, &fl) } == 0 {
                    true
                } else {
                    busy(io::Error::last_os_error(), "F_OFD_SETLK")
                }
            }
            Mech::Robust => {
                // SAFETY: an initialised process-shared mutex.
                match unsafe { libc::pthread_mutex_trylock(self.mutex) } {
                    0 => true,
                    libc::EOWNERDEAD => {
                        // SAFETY: we hold it.
                        unsafe { libc::pthread_mutex_consistent(self.mutex) };
                        true
                    }
                    libc::EBUSY => false,
                    rc => panic!("pthread_mutex_trylock: {rc}"),
                }
            }
        }
    }

    /// Releases the lock (nothing for [`Mech::Null`]).
    pub fn unlock(&self) {
        match self.mech {
            Mech::Null => {}
            Mech::LockCtl | Mech::Poll => {
                let v = self.lock_ctl(abi::LOCK_CTL_RELEASE);
                assert_eq!(v, 1, "LOCK_CTL RELEASE");
            }
            Mech::Acquire => {
                let mut arg = abi::LockRelease::new();
                arg.mask = 1 << self.index;
                self.ioctl(abi::IOCTL_LOCK_RELEASE, &mut arg)
                    .unwrap_or_else(|e| panic!("LOCK_RELEASE: {e}"));
            }
            Mech::Flock => {
                // SAFETY: our descriptor.
                let rc = unsafe { libc::flock(self.fd, libc::LOCK_UN) };
                assert_eq!(rc, 0, "flock(LOCK_UN)");
            }
            Mech::Ofd => self.ofd(libc::F_UNLCK as i16),
            Mech::Robust => {
                // SAFETY: we hold the mutex.
                let rc = unsafe { libc::pthread_mutex_unlock(self.mutex) };
                assert_eq!(rc, 0, "pthread_mutex_unlock");
            }
        }
    }

    fn ofd(&self, ty: i16) {
        // SAFETY: an all-zero flock is valid.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = ty;
        fl.l_whence = libc::SEEK_SET as i16;
        // SAFETY: our descriptor and a valid struct flock.
        while unsafe { libc::fcntl(self.fd, libc::F_OFD_SETLKW, &fl) } != 0 {
            let e = io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EINTR), "F_OFD_SETLKW: {e}");
        }
    }

    /// The open file (-1 for the mutex).
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// The lock index on the device.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// LOCK_CTL with operation `op` (`abi::LOCK_CTL_*`): `out.value`.
    pub fn ctl(&self, op: u32) -> u8 {
        self.lock_ctl(op)
    }

    /// The driver's QUERY of the benchmark's lock.
    pub fn query(&self) -> abi::LockQuery {
        let mut q = abi::LockQuery::new();
        q.index = self.index;
        self.ioctl(abi::IOCTL_LOCK_QUERY, &mut q)
            .unwrap_or_else(|e| panic!("LOCK_QUERY: {e}"));
        q
    }
}

impl Drop for Locker {
    fn drop(&mut self) {
        if self.fd >= 0 {
            // SAFETY: our descriptor.
            unsafe { libc::close(self.fd) };
        }
    }
}

/// A QUERY of the benchmark's lock through a fresh descriptor.
pub fn query() -> abi::LockQuery {
    Locker::open(Mech::Acquire).query()
}

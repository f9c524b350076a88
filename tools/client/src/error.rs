//! Typed errors of the lock commands.

use std::fmt;
use std::io;

/// An error of a tt-arbiter command, decoded from its errno.
///
/// ```
/// use tt_arbiter::Error;
/// let e = Error::from_errno(libc::EBUSY, 42);
/// assert!(matches!(e, Error::Busy { holder_pid: 42 }));
/// assert_eq!(e.errno(), Some(libc::EBUSY));
/// ```
#[derive(Debug)]
pub enum Error {
    /// EBUSY: a non-blocking request ([`Wait::Try`](crate::Wait::Try))
    /// and the lock is held or someone is queued for it. `holder_pid` is 0
    /// when nobody holds it or the holder is not visible in this pid
    /// namespace.
    Busy {
        /// The holder, as the kernel reported it.
        holder_pid: u32,
    },
    /// ETIMEDOUT: a request with a deadline was not granted by it (never
    /// before it; at once for a deadline already past, also one that
    /// passed while the caller was stopped).
    Timeout {
        /// The holder, as the kernel reported it.
        holder_pid: u32,
    },
    /// EINTR: a signal handler ran while waiting.
    Interrupted,
    /// EDEADLK: this file already holds the lock.
    Deadlock,
    /// EPERM: release of a lock this file does not hold.
    NotHeld,
    /// ENODEV: the card is gone (unbound or removed).
    DeviceGone,
    /// EINVAL: bad index, flags, mask or reserved field.
    Invalid,
    /// Any other error.
    Io(io::Error),
}

impl Error {
    /// Decodes `errno`; `holder_pid` is used for EBUSY and ETIMEDOUT.
    pub fn from_errno(errno: i32, holder_pid: u32) -> Self {
        match errno {
            libc::EBUSY => Error::Busy { holder_pid },
            libc::ETIMEDOUT => Error::Timeout { holder_pid },
            libc::EINTR => Error::Interrupted,
            libc::EDEADLK => Error::Deadlock,
            libc::EPERM => Error::NotHeld,
            libc::ENODEV => Error::DeviceGone,
            libc::EINVAL => Error::Invalid,
            _ => Error::Io(io::Error::from_raw_os_error(errno)),
        }
    }

    /// The errno this error stands for, if any.
    pub fn errno(&self) -> Option<i32> {
        Some(match self {
            Error::Busy { .. } => libc::EBUSY,
            Error::Timeout { .. } => libc::ETIMEDOUT,
            Error::Interrupted => libc::EINTR,
            Error::Deadlock => libc::EDEADLK,
            Error::NotHeld => libc::EPERM,
            Error::DeviceGone => libc::ENODEV,
            Error::Invalid => libc::EINVAL,
            Error::Io(e) => return e.raw_os_error(),
        })
    }

    /// The holder reported with EBUSY or ETIMEDOUT.
    pub fn holder_pid(&self) -> Option<u32> {
        match self {
            Error::Busy { holder_pid } | Error::Timeout { holder_pid } => Some(*holder_pid),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(errno) => Error::from_errno(errno, 0),
            None => Error::Io(e),
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Io(e) => e,
            other => io::Error::from_raw_os_error(other.errno().unwrap_or(libc::EIO)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Busy { holder_pid: 0 } => write!(f, "lock busy"),
            Error::Busy { holder_pid } => write!(f, "lock busy (held by pid {holder_pid})"),
            Error::Timeout { holder_pid: 0 } => write!(f, "timed out waiting for the lock"),
            Error::Timeout { holder_pid } => {
                write!(
                    f,
                    "timed out waiting for the lock (held by pid {holder_pid})"
                )
            }
            Error::Interrupted => write!(f, "interrupted by a signal"),
            Error::Deadlock => write!(f, "this file already holds the lock"),
            Error::NotHeld => write!(f, "lock not held by this file"),
            Error::DeviceGone => write!(f, "device gone"),
            Error::Invalid => write!(f, "invalid argument"),
            Error::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping_round_trips() {
        let cases = [
            (libc::EBUSY, "Busy"),
            (libc::ETIMEDOUT, "Timeout"),
            (libc::EINTR, "Interrupted"),
            (libc::EDEADLK, "Deadlock"),
            (libc::EPERM, "NotHeld"),
            (libc::ENODEV, "DeviceGone"),
            (libc::EINVAL, "Invalid"),
            (libc::EFAULT, "Io"),
        ];
        for (errno, variant) in cases {
            let e = Error::from_errno(errno, 7);
            assert!(format!("{e:?}").starts_with(variant), "{errno} -> {e:?}");
            assert_eq!(e.errno(), Some(errno));
            assert_eq!(io::Error::from(e).raw_os_error(), Some(errno));
        }
        assert_eq!(Error::from_errno(libc::EBUSY, 7).holder_pid(), Some(7));
        assert_eq!(Error::from_errno(libc::ETIMEDOUT, 9).holder_pid(), Some(9));
        assert_eq!(Error::Deadlock.holder_pid(), None);
        let e: Error = io::Error::from_raw_os_error(libc::ENODEV).into();
        assert!(matches!(e, Error::DeviceGone));
        assert!(Error::Busy { holder_pid: 3 }.to_string().contains("pid 3"));
    }
}

//! Client library of tt-arbiter, the `tenstorrent` kernel module that binds
//! Tenstorrent PCIe cards as `/dev/tenstorrent/N` and arbitrates 64 locks
//! per card between processes.
//!
//! - [`abi`]: the raw structs and command numbers of
//!   `include/uapi/linux/tenstorrent.h`, checked against the header.
//! - [`Device`]: an open device file, with the info commands, the C
//!   driver's `LOCK_CTL`, and the blocking/timed/multi-lock commands with
//!   RAII guards.
//!
//! Locks are owned by the open file description: `dup()`, `fork()` and
//! `SCM_RIGHTS` share them and the kernel releases them when the last
//! reference closes, even if the process crashed.
//!
//! ```no_run
//! use std::time::Duration;
//! use tt_arbiter::{abi, Device, Error};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! for node in Device::enumerate()? {
//!     let dev = Device::open(&node.path)?;
//!     match dev.lock_timeout(abi::LOCK_CHIP_IN_USE, Duration::from_secs(1)) {
//!         Ok(_guard) => println!("{}: ours", node.path.display()),
//!         Err(Error::Timeout { holder_pid }) => println!("busy, pid {holder_pid}"),
//!         Err(e) => return Err(e.into()),
//!     };
//! }
//! # Ok(()) }
//! ```

pub mod abi;
mod device;
mod error;
mod wait;

pub use device::{
    Acquired, Device, DeviceNode, LockCtlOp, LockGuard, LockState, CLASS_DIR, DEV_DIR,
};
pub use error::{Error, Result};
pub use wait::{Monotonic, Wait};

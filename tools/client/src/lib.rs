//! Client library of tt-arbiter, the `tenstorrent` kernel module that binds
//! Tenstorrent PCIe cards as `/dev/tenstorrent/N` and arbitrates 64 locks
//! per card between processes.
//!
//! - [`abi`]: the raw structs and command numbers of
//!   `include/uapi/linux/tenstorrent.h`, checked against the header.
//! - [`Device`]: an open device file, with the info commands, the C
//!   driver's `LOCK_CTL`, and the blocking/timed/multi-lock commands with
//!   RAII guards ([`Device::lock`], [`Device::try_lock`],
//!   [`Device::lock_timeout`], [`Device::lock_many`]) that carry the
//!   owner-died flag ([`LockGuard::owner_died`]).
//! - [`Device::enumerate`]: the cards, found the way the ecosystem finds
//!   them (`/dev/tenstorrent/N` cross-checked with sysfs).
//! - [`locks`]: the well-known lock indices (`ARC_MSG`, `ETH00`, ...).
//! - [`fdinfo`]: what each open file of a card holds, from
//!   `/proc/PID/fdinfo/FD`, and every process's card files ([`fdinfo::scan`]).
//! - [`Error`]: failures as a typed enum (`Busy { holder_pid }`,
//!   `Timeout { holder_pid }`, `Interrupted`, `DeviceGone`, ...).
//!
//! The crate is plain userspace code (`libc` only); it does not depend on
//! the kernel module being present to build or to run its unit tests.
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
pub mod fdinfo;
pub mod resources;
pub mod sysfs;
mod wait;

pub use device::{
    mask_of, Acquired, Device, DeviceNode, LockCtlOp, LockGuard, LockState, CLASS_DIR, DEV_DIR,
};
pub use error::{Error, Result};
pub use wait::{Monotonic, Wait};

/// The well-known lock indices, as UMD uses them and sysfs names them.
///
/// ```
/// use tt_arbiter::locks;
/// assert_eq!(locks::ARC_MSG, 16);
/// assert_eq!(locks::eth(3), locks::ETH03);
/// assert_eq!(locks::name(locks::PCIE_DMA), Some("PCIE_DMA"));
/// assert_eq!(locks::index("NON_MMIO"), Some(locks::NON_MMIO));
/// ```
pub mod locks {
    use crate::abi;

    /// Locks per card.
    pub const COUNT: u32 = abi::LOCK_COUNT;
    /// The names of the well-known locks, by index.
    pub const NAMES: [&str; 22] = abi::LOCK_NAMES;

    /// Lock of ERISC core `n` (0..16).
    pub const fn eth(n: u32) -> u32 {
        abi::lock_eth(n)
    }

    macro_rules! eth_locks {
        ($($name:ident = $n:literal),*) => {$(
            #[doc = concat!("Lock of ERISC core ", $n, ".")]
            pub const $name: u32 = abi::lock_eth($n);
        )*};
    }
    eth_locks!(
        ETH00 = 0,
        ETH01 = 1,
        ETH02 = 2,
        ETH03 = 3,
        ETH04 = 4,
        ETH05 = 5,
        ETH06 = 6,
        ETH07 = 7,
        ETH08 = 8,
        ETH09 = 9,
        ETH10 = 10,
        ETH11 = 11,
        ETH12 = 12,
        ETH13 = 13,
        ETH14 = 14,
        ETH15 = 15
    );

    /// The ARC firmware's message queue (mailbox).
    pub const ARC_MSG: u32 = abi::LOCK_ARC_MSG;
    /// The ARC message queue of a remote chip (reached over ethernet).
    pub const REMOTE_ARC_MSG: u32 = abi::LOCK_REMOTE_ARC_MSG;
    /// Non-MMIO (ethernet-routed) access to remote chips.
    pub const NON_MMIO: u32 = abi::LOCK_NON_MMIO;
    /// Memory barrier.
    pub const MEM_BARRIER: u32 = abi::LOCK_MEM_BARRIER;
    /// The chip is in use by a workload.
    pub const CHIP_IN_USE: u32 = abi::LOCK_CHIP_IN_USE;
    /// PCIe DMA engine.
    pub const PCIE_DMA: u32 = abi::LOCK_PCIE_DMA;

    /// The well-known name of lock `index`, if it has one.
    pub fn name(index: u32) -> Option<&'static str> {
        abi::lock_name(index)
    }

    /// The index of the well-known lock `name`.
    pub fn index(name: &str) -> Option<u32> {
        abi::lock_index(name)
    }
}

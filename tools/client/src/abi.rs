//! The raw ABI of `include/uapi/linux/tenstorrent.h`, mirrored in Rust.
//!
//! Struct and constant names follow the C header without its
//! `tenstorrent_`/`TENSTORRENT_` prefix; field names are the C ones, except
//! the `in`/`out` members of the three commands shared with the C driver,
//! named `input`/`output` here (`in` is a Rust keyword). The tests check
//! every size, offset, command number and flag against the header itself,
//! compiled by a C compiler.
//!
//! ```
//! use tt_arbiter::abi;
//! assert_eq!(abi::IOCTL_GET_DRIVER_INFO, abi::io(abi::IOCTL_MAGIC, 5));
//! assert_eq!(abi::lock_name(16), Some("ARC_MSG"));
//! assert_eq!(abi::lock_index("ETH03"), Some(3));
//! ```

use std::mem::{offset_of, size_of};

// ---- ioctl number encoding (asm-generic/ioctl.h, as on x86) -------------

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;

/// `_IOC_NONE`.
pub const IOC_NONE: u32 = 0;
/// `_IOC_WRITE`: userspace writes, the kernel reads.
pub const IOC_WRITE: u32 = 1;
/// `_IOC_READ`: the kernel writes.
pub const IOC_READ: u32 = 2;

/// `_IOC(dir, type, nr, size)`.
pub const fn ioc(dir: u32, ty: u32, nr: u32, size: usize) -> u32 {
    assert!(size < (1 << IOC_SIZEBITS), "ioctl argument too large");
    (dir << IOC_DIRSHIFT)
        | (ty << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}

/// `_IO(type, nr)`: no direction, no size (the C driver's style).
pub const fn io(ty: u32, nr: u32) -> u32 {
    ioc(IOC_NONE, ty, nr, 0)
}

/// `_IOR(type, nr, size)`.
pub const fn ior(ty: u32, nr: u32, size: usize) -> u32 {
    ioc(IOC_READ, ty, nr, size)
}

/// `_IOW(type, nr, size)`.
pub const fn iow(ty: u32, nr: u32, size: usize) -> u32 {
    ioc(IOC_WRITE, ty, nr, size)
}

/// `_IOWR(type, nr, size)`.
pub const fn iowr(ty: u32, nr: u32, size: usize) -> u32 {
    ioc(IOC_READ | IOC_WRITE, ty, nr, size)
}

// ---- structs --------------------------------------------------------------

/// A struct of the header: its C name and its fields as
/// `(C name, offset, size)`, in declaration order.
pub trait AbiStruct: Copy + Default {
    /// Name of the C struct without `struct `.
    const C_NAME: &'static str;
    /// `(C field name, offset, size)` of every field.
    const FIELDS: &'static [(&'static str, usize, usize)];
}

macro_rules! field_name {
    ($f:ident) => {
        stringify!($f)
    };
    ($f:ident, $c:literal) => {
        $c
    };
}

macro_rules! abi_struct {
    ($(
        $(#[$m:meta])*
        $cname:literal => pub struct $name:ident {
            $( $(#[$fm:meta])* pub $f:ident : $t:ty $(as $cf:literal)? ),* $(,)?
        }
    )*) => {$(
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fm])* pub $f: $t, )*
        }
        impl AbiStruct for $name {
            const C_NAME: &'static str = $cname;
            const FIELDS: &'static [(&'static str, usize, usize)] = &[
                $( (field_name!($f $(, $cf)?), offset_of!($name, $f), size_of::<$t>()), )*
            ];
        }
    )*};
}

abi_struct! {
    /// `in` of GET_DEVICE_INFO.
    "tenstorrent_get_device_info_in" => pub struct GetDeviceInfoIn {
        /// How many bytes of `out` the kernel writes (zeroes, then fills).
        pub output_size_bytes: u32,
    }

    /// `out` of GET_DEVICE_INFO.
    "tenstorrent_get_device_info_out" => pub struct GetDeviceInfoOut {
        /// `sizeof(struct tenstorrent_get_device_info_out)`.
        pub output_size_bytes: u32,
        /// PCI vendor id.
        pub vendor_id: u16,
        /// PCI device id.
        pub device_id: u16,
        /// PCI subsystem vendor id.
        pub subsystem_vendor_id: u16,
        /// PCI subsystem id.
        pub subsystem_id: u16,
        /// Function in bits 0-2, device in 3-7, bus in 8-15.
        pub bus_dev_fn: u16,
        /// 0: no DMA buffers yet.
        pub max_dma_buf_size_log2: u16,
        /// PCI domain (segment).
        pub pci_domain: u16,
        /// Reserved.
        pub reserved: u16,
    }

    /// GET_DEVICE_INFO argument.
    "tenstorrent_get_device_info" => pub struct GetDeviceInfo {
        /// `in`.
        pub input: GetDeviceInfoIn as "in",
        /// `out`.
        pub output: GetDeviceInfoOut as "out",
    }

    /// `in` of GET_DRIVER_INFO.
    "tenstorrent_get_driver_info_in" => pub struct GetDriverInfoIn {
        /// How many bytes of `out` the kernel writes (zeroes, then fills).
        pub output_size_bytes: u32,
    }

    /// `out` of GET_DRIVER_INFO.
    "tenstorrent_get_driver_info_out" => pub struct GetDriverInfoOut {
        /// `sizeof(struct tenstorrent_get_driver_info_out)`.
        pub output_size_bytes: u32,
        /// [`DRIVER_API_VERSION`].
        pub driver_version: u32,
        /// Equal to `/sys/module/tenstorrent/version`'s major.
        pub driver_version_major: u8,
        /// Minor.
        pub driver_version_minor: u8,
        /// Patch.
        pub driver_version_patch: u8,
        /// Reserved.
        pub reserved0: u8,
    }

    /// GET_DRIVER_INFO argument.
    "tenstorrent_get_driver_info" => pub struct GetDriverInfo {
        /// `in`.
        pub input: GetDriverInfoIn as "in",
        /// `out`.
        pub output: GetDriverInfoOut as "out",
    }

    /// `in` of LOCK_CTL.
    "tenstorrent_lock_ctl_in" => pub struct LockCtlIn {
        /// How many bytes of `out` the kernel writes (zeroes, then fills).
        pub output_size_bytes: u32,
        /// One of `LOCK_CTL_*`.
        pub flags: u32,
        /// Lock index, < [`LOCK_COUNT`].
        pub index: u8,
        /// Not checked by the kernel.
        pub reserved: [u8; 3],
    }

    /// `out` of LOCK_CTL.
    "tenstorrent_lock_ctl_out" => pub struct LockCtlOut {
        /// The answer, see the header.
        pub value: u8,
        /// Reserved.
        pub reserved: [u8; 3],
    }

    /// LOCK_CTL argument.
    "tenstorrent_lock_ctl" => pub struct LockCtl {
        /// `in`.
        pub input: LockCtlIn as "in",
        /// `out`.
        pub output: LockCtlOut as "out",
    }

    /// ACQUIRE argument.
    "tenstorrent_lock_acquire" => pub struct LockAcquire {
        /// In: `size_of::<LockAcquire>()`.
        pub argsz: u32,
        /// In: [`LOCK_NONBLOCK`] or [`LOCK_DEADLINE`].
        pub flags: u32,
        /// In: lock index.
        pub index: u32,
        /// In: 0.
        pub reserved0: u32,
        /// In: absolute CLOCK_MONOTONIC nanoseconds, with [`LOCK_DEADLINE`].
        pub deadline_ns: u64,
        /// Out: [`LOCK_OWNER_DIED`].
        pub out_flags: u32,
        /// Out, on EBUSY/ETIMEDOUT: the holder's pid (0 if none or not visible).
        pub holder_pid: u32,
        /// Out: time spent waiting.
        pub waited_ns: u64,
    }

    /// ACQUIRE_SET argument.
    "tenstorrent_lock_acquire_set" => pub struct LockAcquireSet {
        /// In: `size_of::<LockAcquireSet>()`.
        pub argsz: u32,
        /// In: [`LOCK_NONBLOCK`] or [`LOCK_DEADLINE`].
        pub flags: u32,
        /// In: bit i = lock i.
        pub mask: u64,
        /// In: absolute CLOCK_MONOTONIC nanoseconds, with [`LOCK_DEADLINE`].
        pub deadline_ns: u64,
        /// Out: locks whose previous holder died.
        pub owner_died_mask: u64,
        /// Out: time spent waiting.
        pub waited_ns: u64,
        /// Out, on EBUSY/ETIMEDOUT: holder of the lowest busy lock.
        pub holder_pid: u32,
        /// In: 0.
        pub reserved0: u32,
    }

    /// RELEASE argument.
    "tenstorrent_lock_release" => pub struct LockRelease {
        /// In: `size_of::<LockRelease>()`.
        pub argsz: u32,
        /// In: 0.
        pub flags: u32,
        /// In: bit i = lock i, non-zero.
        pub mask: u64,
    }

    /// QUERY argument.
    "tenstorrent_lock_query" => pub struct LockQuery {
        /// In: `size_of::<LockQuery>()`.
        pub argsz: u32,
        /// In: 0.
        pub flags: u32,
        /// In: lock index.
        pub index: u32,
        /// Out: `LOCK_QUERY_*`.
        pub out_flags: u32,
        /// Out: holder's pid in the caller's pid namespace, 0 if not visible.
        pub holder_pid: u32,
        /// Out: number of queued waiters.
        pub waiters: u32,
        /// Out: how long it has been held.
        pub held_ns: u64,
        /// Out: holder's comm at acquisition, NUL-terminated.
        pub holder_comm: [u8; 16],
        /// Out: grants since the card was bound.
        pub acquisitions: u64,
        /// Out: grants that had to wait.
        pub contended: u64,
        /// Out: releases because the holder's file closed.
        pub owner_died_count: u64,
        /// Out: wake-ups of a waiter that found no grant, no signal and no
        /// expired deadline (stays 0 with FIFO hand-off).
        pub spurious_wakeups: u64,
    }

    /// ALLOCATE_TLB input (the C driver's layout).
    "tenstorrent_allocate_tlb_in" => pub struct AllocateTlbIn {
        /// Window size in bytes: one of the card's window sizes.
        pub size: u64,
        /// Not checked.
        pub reserved: u64,
    }

    /// ALLOCATE_TLB output, always written.
    "tenstorrent_allocate_tlb_out" => pub struct AllocateTlbOut {
        /// Window id.
        pub id: u32,
        /// Zero.
        pub reserved0: u32,
        /// mmap offset of the window, uncached.
        pub mmap_offset_uc: u64,
        /// mmap offset of the window, write-combined.
        pub mmap_offset_wc: u64,
        /// Zero.
        pub reserved1: u64,
    }

    /// ALLOCATE_TLB argument.
    "tenstorrent_allocate_tlb" => pub struct AllocateTlb {
        /// In.
        pub input: AllocateTlbIn as "in",
        /// Out.
        pub output: AllocateTlbOut as "out",
    }

    /// FREE_TLB input.
    "tenstorrent_free_tlb_in" => pub struct FreeTlbIn {
        /// Window id.
        pub id: u32,
    }

    /// FREE_TLB argument.
    "tenstorrent_free_tlb" => pub struct FreeTlb {
        /// In.
        pub input: FreeTlbIn as "in",
    }

    /// QUERY_MAPPINGS input; `output_mapping_count` [`Mapping`]s follow it.
    "tenstorrent_query_mappings_in" => pub struct QueryMappingsIn {
        /// How many mappings the caller has room for after `in`.
        pub output_mapping_count: u32,
        /// Not checked.
        pub reserved: u32,
    }

    /// One mapping of QUERY_MAPPINGS.
    "tenstorrent_mapping" => pub struct Mapping {
        /// `MAPPING_RESOURCEn_UC/WC`, 0 for an unused entry.
        pub mapping_id: u32,
        /// Zero.
        pub reserved: u32,
        /// mmap offset.
        pub mapping_base: u64,
        /// Bytes.
        pub mapping_size: u64,
    }

    /// Where CONFIGURE_TLB aims a window.
    "tenstorrent_noc_tlb_config" => pub struct NocTlbConfig {
        /// NOC address of the window's first byte, aligned to its size.
        pub addr: u64,
        /// Destination tile (or the end of a multicast rectangle).
        pub x_end: u16,
        /// Destination tile.
        pub y_end: u16,
        /// Start of a multicast rectangle.
        pub x_start: u16,
        /// Start of a multicast rectangle.
        pub y_start: u16,
        /// Which NOC.
        pub noc: u8,
        /// Multicast.
        pub mcast: u8,
        /// 0 relaxed, 1 strict, 2 posted.
        pub ordering: u8,
        /// Linked.
        pub linked: u8,
        /// Blackhole: use a static VC (ignored on Wormhole).
        pub static_vc: u8,
        /// Not checked.
        pub reserved0: [u8; 3],
        /// Not checked.
        pub reserved1: [u32; 2],
    }

    /// CONFIGURE_TLB input.
    "tenstorrent_configure_tlb_in" => pub struct ConfigureTlbIn {
        /// Window id, held by this file.
        pub id: u32,
        /// Not checked.
        pub reserved: u32,
        /// The target.
        pub config: NocTlbConfig,
    }

    /// CONFIGURE_TLB output: never written.
    "tenstorrent_configure_tlb_out" => pub struct ConfigureTlbOut {
        /// Untouched.
        pub reserved: u64,
    }

    /// CONFIGURE_TLB argument.
    "tenstorrent_configure_tlb" => pub struct ConfigureTlb {
        /// In.
        pub input: ConfigureTlbIn as "in",
        /// Out.
        pub output: ConfigureTlbOut as "out",
    }

    /// TLB_ALLOCATE argument.
    "tenstorrent_tlb_allocate" => pub struct TlbAllocate {
        /// In: `size_of::<TlbAllocate>()`.
        pub argsz: u32,
        /// In: `LOCK_NONBLOCK` or `LOCK_DEADLINE`.
        pub flags: u32,
        /// In: window size in bytes.
        pub size: u64,
        /// In: absolute `CLOCK_MONOTONIC` deadline, with `LOCK_DEADLINE`.
        pub deadline_ns: u64,
        /// Out: window id.
        pub id: u32,
        /// In: 0.
        pub reserved0: u32,
        /// Out: mmap offset, uncached.
        pub mmap_offset_uc: u64,
        /// Out: mmap offset, write-combined.
        pub mmap_offset_wc: u64,
        /// Out: time spent waiting.
        pub waited_ns: u64,
    }

    /// ALLOCATE_DMA_BUF input.
    "tenstorrent_allocate_dma_buf_in" => pub struct AllocateDmaBufIn {
        /// Bytes, a multiple of the page size.
        pub requested_size: u32,
        /// The file's buffer index.
        pub buf_index: u8,
        /// `ALLOCATE_DMA_BUF_NOC_DMA` or 0.
        pub flags: u8,
        /// Not checked.
        pub reserved0: [u8; 2],
        /// Not checked.
        pub reserved1: [u64; 2],
    }

    /// ALLOCATE_DMA_BUF output.
    "tenstorrent_allocate_dma_buf_out" => pub struct AllocateDmaBufOut {
        /// Bus address (an IOVA behind an IOMMU).
        pub physical_address: u64,
        /// mmap offset.
        pub mapping_offset: u64,
        /// Bytes.
        pub size: u32,
        /// Zero.
        pub reserved0: u32,
        /// NOC address, 0 without NOC DMA.
        pub noc_address: u64,
        /// Zero.
        pub reserved1: u64,
    }

    /// ALLOCATE_DMA_BUF argument.
    "tenstorrent_allocate_dma_buf" => pub struct AllocateDmaBuf {
        /// In.
        pub input: AllocateDmaBufIn as "in",
        /// Out.
        pub output: AllocateDmaBufOut as "out",
    }

    /// PIN_PAGES input.
    "tenstorrent_pin_pages_in" => pub struct PinPagesIn {
        /// Bytes of `out` the caller has room for (8, or 16 for the
        /// extended output).
        pub output_size_bytes: u32,
        /// `PIN_PAGES_*`.
        pub flags: u32,
        /// Page aligned.
        pub virtual_address: u64,
        /// Bytes, page aligned.
        pub size: u64,
    }

    /// PIN_PAGES output.
    "tenstorrent_pin_pages_out" => pub struct PinPagesOut {
        /// Bus address of the first byte.
        pub physical_address: u64,
    }

    /// PIN_PAGES output, with `output_size_bytes` >= 16.
    "tenstorrent_pin_pages_out_extended" => pub struct PinPagesOutExtended {
        /// Bus address of the first byte.
        pub physical_address: u64,
        /// NOC address, 0 without NOC DMA.
        pub noc_address: u64,
    }

    /// PIN_PAGES argument.
    "tenstorrent_pin_pages" => pub struct PinPages {
        /// In.
        pub input: PinPagesIn as "in",
        /// Out.
        pub output: PinPagesOut as "out",
    }

    /// UNPIN_PAGES input.
    "tenstorrent_unpin_pages_in" => pub struct UnpinPagesIn {
        /// Where the pin starts.
        pub virtual_address: u64,
        /// Its size.
        pub size: u64,
        /// 0.
        pub reserved: u64,
    }

    /// UNPIN_PAGES argument.
    "tenstorrent_unpin_pages" => pub struct UnpinPages {
        /// In.
        pub input: UnpinPagesIn as "in",
    }

    /// MAP_PEER_BAR input.
    "tenstorrent_map_peer_bar_in" => pub struct MapPeerBarIn {
        /// An open file of another card of the same chip.
        pub peer_fd: u32,
        /// PCI resource index: 0, 2 or 4.
        pub peer_bar_index: u32,
        /// Bytes into the BAR.
        pub peer_bar_offset: u32,
        /// Bytes to map.
        pub peer_bar_length: u32,
        /// 0.
        pub flags: u32,
        /// Not checked.
        pub reserved: u32,
    }

    /// MAP_PEER_BAR output.
    "tenstorrent_map_peer_bar_out" => pub struct MapPeerBarOut {
        /// Bus address of the first byte, for this card.
        pub dma_address: u64,
        /// Zero.
        pub reserved: u64,
    }

    /// MAP_PEER_BAR argument.
    "tenstorrent_map_peer_bar" => pub struct MapPeerBar {
        /// In.
        pub input: MapPeerBarIn as "in",
        /// Out.
        pub output: MapPeerBarOut as "out",
    }

    /// RESET_DEVICE input.
    "tenstorrent_reset_device_in" => pub struct ResetDeviceIn {
        /// Bytes of `out` the caller has room for.
        pub output_size_bytes: u32,
        /// `RESET_DEVICE_*`.
        pub flags: u32,
    }

    /// RESET_DEVICE output.
    "tenstorrent_reset_device_out" => pub struct ResetDeviceOut {
        /// 8.
        pub output_size_bytes: u32,
        /// 0 success, 1 failure.
        pub result: u32,
    }

    /// RESET_DEVICE argument.
    "tenstorrent_reset_device" => pub struct ResetDevice {
        /// In.
        pub input: ResetDeviceIn as "in",
        /// Out.
        pub output: ResetDeviceOut as "out",
    }

    /// EXPORT_TLB_DMABUF argument.
    "tenstorrent_export_tlb_dmabuf" => pub struct ExportTlbDmabuf {
        /// At least 32 (the bytes past 32 zero).
        pub argsz: u32,
        /// 0.
        pub flags: u32,
        /// A window this file holds.
        pub tlb_id: u32,
        /// Out: the dma-buf's descriptor.
        pub fd: i32,
        /// Page-aligned offset in the window.
        pub offset: u64,
        /// Page-aligned size, 0 for the rest of the window.
        pub size: u64,
    }

    /// SMC_MSG argument (tt-kmd 2.11).
    "tenstorrent_smc_msg" => pub struct SmcMsg {
        /// At least 48.
        pub argsz: u32,
        /// Exactly one of `SMC_MSG_POST`, `_POLL`, `_ABANDON`.
        pub flags: u32,
        /// 0.
        pub queue_index: u32,
        /// 0.
        pub reserved0: u32,
        /// The request on POST (word 0: the type in its low byte), the
        /// response on POLL (word 0: the firmware's status).
        pub message: [u32; 8],
    }

    /// SMC_WAIT argument.
    "tenstorrent_smc_wait" => pub struct SmcWait {
        /// At least 56.
        pub argsz: u32,
        /// In: 0, [`LOCK_NONBLOCK`] or [`LOCK_DEADLINE`].
        pub flags: u32,
        /// In: absolute CLOCK_MONOTONIC nanoseconds, with [`LOCK_DEADLINE`].
        pub deadline_ns: u64,
        /// Out: [`SMC_WAIT_DONE`] when the message is done.
        pub out_flags: u32,
        /// 0.
        pub reserved0: u32,
        /// Out: the response.
        pub message: [u32; 8],
    }

    /// SET_POWER_STATE argument.
    "tenstorrent_power_state" => pub struct PowerState {
        /// At least 40 (the bytes past 40 zero).
        pub argsz: u32,
        /// 0.
        pub flags: u32,
        /// 0.
        pub reserved0: u8,
        /// Flags covered (bits 0-3) and settings (bits 4-7).
        pub validity: u8,
        /// `POWER_FLAG_*`.
        pub power_flags: u16,
        /// Settings, as many as `validity` says.
        pub power_settings: [u16; 14],
    }

    /// SET_NOC_CLEANUP argument.
    "tenstorrent_set_noc_cleanup" => pub struct SetNocCleanup {
        /// At least 32 (the bytes past 32 zero).
        pub argsz: u32,
        /// 0.
        pub flags: u32,
        /// 1 to register, 0 to clear.
        pub enabled: u8,
        /// Tile.
        pub x: u8,
        /// Tile.
        pub y: u8,
        /// Which NOC.
        pub noc: u8,
        /// 0.
        pub reserved0: u32,
        /// NOC address, 4-byte aligned.
        pub addr: u64,
        /// The low 32 bits are written.
        pub data: u64,
    }

    /// NOC_READ argument.
    "tenstorrent_noc_read" => pub struct NocRead {
        /// At least 32 (the bytes past 32 zero).
        pub argsz: u32,
        /// 0.
        pub flags: u32,
        /// Tile, in the coordinates of `noc`.
        pub x: u16,
        /// Tile.
        pub y: u16,
        /// Which NOC: 0 or 1.
        pub noc: u8,
        /// 1, 2, 4 or 8 bytes; `addr` aligned to it.
        pub width: u8,
        /// 0.
        pub reserved0: [u8; 2],
        /// NOC address in the tile.
        pub addr: u64,
        /// Out: the value read, zero-extended.
        pub value: u64,
    }

    /// NOC_WRITE argument.
    "tenstorrent_noc_write" => pub struct NocWrite {
        /// At least 32 (the bytes past 32 zero).
        pub argsz: u32,
        /// 0.
        pub flags: u32,
        /// Tile, in the coordinates of `noc`.
        pub x: u16,
        /// Tile.
        pub y: u16,
        /// Which NOC: 0 or 1.
        pub noc: u8,
        /// 1, 2, 4 or 8 bytes; `addr` aligned to it.
        pub width: u8,
        /// 0.
        pub reserved0: [u8; 2],
        /// NOC address in the tile.
        pub addr: u64,
        /// Its low `width` bytes are written.
        pub value: u64,
    }
}

/// An all-zero struct with `argsz` set, for the extensible commands.
pub trait Extensible: AbiStruct {
    /// `Self::default()` with `argsz = size_of::<Self>()`.
    fn new() -> Self;
}

macro_rules! extensible {
    ($($t:ty),*) => {$(
        impl Extensible for $t {
            fn new() -> Self {
                Self { argsz: size_of::<Self>() as u32, ..Self::default() }
            }
        }
    )*};
}
extensible!(
    LockAcquire,
    LockAcquireSet,
    LockRelease,
    LockQuery,
    TlbAllocate,
    SetNocCleanup,
    PowerState,
    ExportTlbDmabuf,
    NocRead,
    NocWrite,
    SmcMsg,
    SmcWait
);

// ---- constants ------------------------------------------------------------

/// `TENSTORRENT_IOCTL_MAGIC`.
pub const IOCTL_MAGIC: u32 = 0xFA;

/// GET_DEVICE_INFO, `_IO(0xFA, 0)`.
pub const IOCTL_GET_DEVICE_INFO: u32 = io(IOCTL_MAGIC, 0);
/// GET_DRIVER_INFO, `_IO(0xFA, 5)`.
pub const IOCTL_GET_DRIVER_INFO: u32 = io(IOCTL_MAGIC, 5);
/// LOCK_CTL, `_IO(0xFA, 8)`.
pub const IOCTL_LOCK_CTL: u32 = io(IOCTL_MAGIC, 8);
/// ALLOCATE_TLB, `_IO(0xFA, 11)` (C driver).
pub const IOCTL_ALLOCATE_TLB: u32 = io(IOCTL_MAGIC, 11);
/// FREE_TLB, `_IO(0xFA, 12)` (C driver).
pub const IOCTL_FREE_TLB: u32 = io(IOCTL_MAGIC, 12);
/// QUERY_MAPPINGS, `_IO(0xFA, 2)` (C driver).
pub const IOCTL_QUERY_MAPPINGS: u32 = io(IOCTL_MAGIC, 2);
/// CONFIGURE_TLB, `_IO(0xFA, 13)` (C driver).
pub const IOCTL_CONFIGURE_TLB: u32 = io(IOCTL_MAGIC, 13);
/// ALLOCATE_DMA_BUF, `_IO(0xFA, 3)` (C driver).
pub const IOCTL_ALLOCATE_DMA_BUF: u32 = io(IOCTL_MAGIC, 3);
/// FREE_DMA_BUF, `_IO(0xFA, 4)` (C driver): always EINVAL.
pub const IOCTL_FREE_DMA_BUF: u32 = io(IOCTL_MAGIC, 4);
/// PIN_PAGES, `_IO(0xFA, 7)` (C driver).
pub const IOCTL_PIN_PAGES: u32 = io(IOCTL_MAGIC, 7);
/// UNPIN_PAGES, `_IO(0xFA, 10)` (C driver).
pub const IOCTL_UNPIN_PAGES: u32 = io(IOCTL_MAGIC, 10);
/// MAP_PEER_BAR, `_IO(0xFA, 9)` (C driver).
pub const IOCTL_MAP_PEER_BAR: u32 = io(IOCTL_MAGIC, 9);
/// RESET_DEVICE, `_IO(0xFA, 6)` (C driver).
pub const IOCTL_RESET_DEVICE: u32 = io(IOCTL_MAGIC, 6);
/// RESET_DEVICE flag: restore the configuration space saved at probe.
pub const RESET_DEVICE_RESTORE_STATE: u32 = 0;
/// RESET_DEVICE flag: hot-reset the PCIe link.
pub const RESET_DEVICE_RESET_PCIE_LINK: u32 = 1;
/// RESET_DEVICE flag: fire the PCIe interface timer (fences other files).
pub const RESET_DEVICE_CONFIG_WRITE: u32 = 2;
/// RESET_DEVICE flag: set the reset marker; userspace resets the chip.
pub const RESET_DEVICE_USER_RESET: u32 = 3;
/// RESET_DEVICE flag: the firmware resets the chip.
pub const RESET_DEVICE_ASIC_RESET: u32 = 4;
/// RESET_DEVICE flag: the firmware resets the chip and its board controller.
pub const RESET_DEVICE_ASIC_DMC_RESET: u32 = 5;
/// RESET_DEVICE flag: check the reset marker is clear.
pub const RESET_DEVICE_POST_RESET: u32 = 6;
/// SET_NOC_CLEANUP, `_IO(0xFA, 14)` (C driver).
pub const IOCTL_SET_NOC_CLEANUP: u32 = io(IOCTL_MAGIC, 14);
/// EXPORT_TLB_DMABUF, `_IO(0xFA, 16)` (C driver).
pub const IOCTL_EXPORT_TLB_DMABUF: u32 = io(IOCTL_MAGIC, 16);
/// SET_POWER_STATE, `_IO(0xFA, 15)` (C driver).
pub const IOCTL_SET_POWER_STATE: u32 = io(IOCTL_MAGIC, 15);
/// NOC_READ, `_IO(0xFA, 18)` (C driver 2.11).
pub const IOCTL_NOC_READ: u32 = io(IOCTL_MAGIC, 18);
/// NOC_WRITE, `_IO(0xFA, 19)` (C driver 2.11).
pub const IOCTL_NOC_WRITE: u32 = io(IOCTL_MAGIC, 19);
/// SET_POWER_STATE flag: the AI clock at its maximum.
pub const POWER_FLAG_MAX_AI_CLK: u16 = 1 << 0;
/// SET_POWER_STATE flag: Tensix cores enabled.
pub const POWER_FLAG_TENSIX_ENABLE: u16 = 1 << 2;
/// `TT_POWER_VALIDITY(flags, settings)`.
pub const fn power_validity(flags: u8, settings: u8) -> u8 {
    (flags & 0xF) | (settings & 0xF) << 4
}
/// ALLOCATE_DMA_BUF flag: give the buffer a NOC address.
pub const ALLOCATE_DMA_BUF_NOC_DMA: u32 = 2;
/// PIN_PAGES flags.
pub const PIN_PAGES_CONTIGUOUS: u32 = 1;
/// Give the pinned range a NOC address (bottom-up).
pub const PIN_PAGES_NOC_DMA: u32 = 2;
/// Give the pinned range a NOC address from the top of the window.
pub const PIN_PAGES_NOC_TOP_DOWN: u32 = 4;
/// The card only reads the pages (needs an IOMMU).
pub const PIN_PAGES_READ_ONLY: u32 = 8;
/// QUERY_MAPPINGS ids: no mapping.
pub const MAPPING_UNUSED: u32 = 0;
/// BAR0 uncached.
pub const MAPPING_RESOURCE0_UC: u32 = 1;
/// BAR0 write-combined.
pub const MAPPING_RESOURCE0_WC: u32 = 2;
/// BAR2 uncached.
pub const MAPPING_RESOURCE1_UC: u32 = 3;
/// BAR2 write-combined.
pub const MAPPING_RESOURCE1_WC: u32 = 4;
/// BAR4 uncached.
pub const MAPPING_RESOURCE2_UC: u32 = 5;
/// BAR4 write-combined.
pub const MAPPING_RESOURCE2_WC: u32 = 6;
/// TLB_ALLOCATE, `_IOWR(0xFA, 0x44, struct tenstorrent_tlb_allocate)`.
pub const IOCTL_TLB_ALLOCATE: u32 = iowr(IOCTL_MAGIC, 0x44, size_of::<TlbAllocate>());
/// Window ids are below this.
pub const TLB_MAX_WINDOWS: u32 = 256;
/// SMC_MSG, `_IO(0xFA, 17)` (tt-kmd 2.11).
pub const IOCTL_SMC_MSG: u32 = io(IOCTL_MAGIC, 17);
/// SMC_MSG: queue a message.
pub const SMC_MSG_POST: u32 = 1 << 0;
/// SMC_MSG: collect the response.
pub const SMC_MSG_POLL: u32 = 1 << 1;
/// SMC_MSG: forget the message.
pub const SMC_MSG_ABANDON: u32 = 1 << 2;
/// SMC_WAIT, `_IOWR(0xFA, 0x45, struct tenstorrent_smc_wait)`.
pub const IOCTL_SMC_WAIT: u32 = iowr(IOCTL_MAGIC, 0x45, size_of::<SmcWait>());
/// SMC_WAIT out_flags: the message is done (collected).
pub const SMC_WAIT_DONE: u32 = 1 << 0;
/// mmap offset space of uncached TLB windows (plus the window's BAR offset).
pub const MMAP_OFFSET_TLB_UC: u64 = 6 << 36;
/// mmap offset space of write-combined TLB windows.
pub const MMAP_OFFSET_TLB_WC: u64 = 7 << 36;
/// ACQUIRE, `_IOWR(0xFA, 0x40, struct tenstorrent_lock_acquire)`.
pub const IOCTL_LOCK_ACQUIRE: u32 = iowr(IOCTL_MAGIC, 0x40, size_of::<LockAcquire>());
/// ACQUIRE_SET, `_IOWR(0xFA, 0x41, struct tenstorrent_lock_acquire_set)`.
pub const IOCTL_LOCK_ACQUIRE_SET: u32 = iowr(IOCTL_MAGIC, 0x41, size_of::<LockAcquireSet>());
/// RELEASE, `_IOWR(0xFA, 0x42, struct tenstorrent_lock_release)`.
pub const IOCTL_LOCK_RELEASE: u32 = iowr(IOCTL_MAGIC, 0x42, size_of::<LockRelease>());
/// QUERY, `_IOWR(0xFA, 0x43, struct tenstorrent_lock_query)`.
pub const IOCTL_LOCK_QUERY: u32 = iowr(IOCTL_MAGIC, 0x43, size_of::<LockQuery>());

/// API version reported in `driver_version`.
pub const DRIVER_API_VERSION: u32 = 2;

/// Locks per card.
pub const LOCK_COUNT: u32 = 64;

/// `TENSTORRENT_LOCK_ETH(n)`: lock of ERISC core `n` (0..16).
pub const fn lock_eth(n: u32) -> u32 {
    n
}
/// ARC message queue.
pub const LOCK_ARC_MSG: u32 = 16;
/// Remote ARC message queue.
pub const LOCK_REMOTE_ARC_MSG: u32 = 17;
/// Non-MMIO access.
pub const LOCK_NON_MMIO: u32 = 18;
/// Memory barrier.
pub const LOCK_MEM_BARRIER: u32 = 19;
/// Chip in use.
pub const LOCK_CHIP_IN_USE: u32 = 20;
/// PCIe DMA.
pub const LOCK_PCIE_DMA: u32 = 21;

/// LOCK_CTL: non-blocking try.
pub const LOCK_CTL_ACQUIRE: u32 = 0;
/// LOCK_CTL: release.
pub const LOCK_CTL_RELEASE: u32 = 1;
/// LOCK_CTL: test (bit 0 held by this file, bit 1 held by anyone).
pub const LOCK_CTL_TEST: u32 = 2;
/// LOCK_CTL: blocking acquire.
pub const LOCK_CTL_ACQUIRE_BLOCKING: u32 = 3;

/// ACQUIRE/ACQUIRE_SET: EBUSY instead of waiting.
pub const LOCK_NONBLOCK: u32 = 1 << 0;
/// ACQUIRE/ACQUIRE_SET: ETIMEDOUT at `deadline_ns`.
pub const LOCK_DEADLINE: u32 = 1 << 1;
/// ACQUIRE `out_flags`: the previous holder's file closed holding it.
pub const LOCK_OWNER_DIED: u32 = 1 << 0;

/// QUERY `out_flags`: held.
pub const LOCK_QUERY_HELD: u32 = 1 << 0;
/// QUERY `out_flags`: held by the calling file.
pub const LOCK_QUERY_HELD_BY_CALLER: u32 = 1 << 1;
/// QUERY `out_flags`: owner-died mark not yet consumed.
pub const LOCK_QUERY_OWNER_DIED: u32 = 1 << 2;

/// Every object-like macro of the header, by its C name (for the tests and
/// for tools that print the ABI).
pub const DEFINES: &[(&str, u64)] = &[
    ("TENSTORRENT_IOCTL_MAGIC", IOCTL_MAGIC as u64),
    (
        "TENSTORRENT_IOCTL_GET_DEVICE_INFO",
        IOCTL_GET_DEVICE_INFO as u64,
    ),
    (
        "TENSTORRENT_IOCTL_GET_DRIVER_INFO",
        IOCTL_GET_DRIVER_INFO as u64,
    ),
    ("TENSTORRENT_IOCTL_LOCK_CTL", IOCTL_LOCK_CTL as u64),
    ("TENSTORRENT_DRIVER_API_VERSION", DRIVER_API_VERSION as u64),
    ("TENSTORRENT_LOCK_COUNT", LOCK_COUNT as u64),
    ("TENSTORRENT_LOCK_ARC_MSG", LOCK_ARC_MSG as u64),
    (
        "TENSTORRENT_LOCK_REMOTE_ARC_MSG",
        LOCK_REMOTE_ARC_MSG as u64,
    ),
    ("TENSTORRENT_LOCK_NON_MMIO", LOCK_NON_MMIO as u64),
    ("TENSTORRENT_LOCK_MEM_BARRIER", LOCK_MEM_BARRIER as u64),
    ("TENSTORRENT_LOCK_CHIP_IN_USE", LOCK_CHIP_IN_USE as u64),
    ("TENSTORRENT_LOCK_PCIE_DMA", LOCK_PCIE_DMA as u64),
    ("TENSTORRENT_LOCK_CTL_ACQUIRE", LOCK_CTL_ACQUIRE as u64),
    ("TENSTORRENT_LOCK_CTL_RELEASE", LOCK_CTL_RELEASE as u64),
    ("TENSTORRENT_LOCK_CTL_TEST", LOCK_CTL_TEST as u64),
    (
        "TENSTORRENT_LOCK_CTL_ACQUIRE_BLOCKING",
        LOCK_CTL_ACQUIRE_BLOCKING as u64,
    ),
    ("TENSTORRENT_LOCK_NONBLOCK", LOCK_NONBLOCK as u64),
    ("TENSTORRENT_LOCK_DEADLINE", LOCK_DEADLINE as u64),
    ("TENSTORRENT_LOCK_OWNER_DIED", LOCK_OWNER_DIED as u64),
    ("TENSTORRENT_LOCK_QUERY_HELD", LOCK_QUERY_HELD as u64),
    (
        "TENSTORRENT_LOCK_QUERY_HELD_BY_CALLER",
        LOCK_QUERY_HELD_BY_CALLER as u64,
    ),
    (
        "TENSTORRENT_LOCK_QUERY_OWNER_DIED",
        LOCK_QUERY_OWNER_DIED as u64,
    ),
    ("TENSTORRENT_IOCTL_LOCK_ACQUIRE", IOCTL_LOCK_ACQUIRE as u64),
    (
        "TENSTORRENT_IOCTL_LOCK_ACQUIRE_SET",
        IOCTL_LOCK_ACQUIRE_SET as u64,
    ),
    ("TENSTORRENT_IOCTL_LOCK_RELEASE", IOCTL_LOCK_RELEASE as u64),
    ("TENSTORRENT_IOCTL_LOCK_QUERY", IOCTL_LOCK_QUERY as u64),
    ("TENSTORRENT_IOCTL_ALLOCATE_TLB", IOCTL_ALLOCATE_TLB as u64),
    ("TENSTORRENT_IOCTL_FREE_TLB", IOCTL_FREE_TLB as u64),
    (
        "TENSTORRENT_IOCTL_QUERY_MAPPINGS",
        IOCTL_QUERY_MAPPINGS as u64,
    ),
    (
        "TENSTORRENT_IOCTL_CONFIGURE_TLB",
        IOCTL_CONFIGURE_TLB as u64,
    ),
    ("TENSTORRENT_MAPPING_UNUSED", MAPPING_UNUSED as u64),
    (
        "TENSTORRENT_MAPPING_RESOURCE0_UC",
        MAPPING_RESOURCE0_UC as u64,
    ),
    (
        "TENSTORRENT_MAPPING_RESOURCE0_WC",
        MAPPING_RESOURCE0_WC as u64,
    ),
    (
        "TENSTORRENT_MAPPING_RESOURCE1_UC",
        MAPPING_RESOURCE1_UC as u64,
    ),
    (
        "TENSTORRENT_MAPPING_RESOURCE1_WC",
        MAPPING_RESOURCE1_WC as u64,
    ),
    (
        "TENSTORRENT_MAPPING_RESOURCE2_UC",
        MAPPING_RESOURCE2_UC as u64,
    ),
    (
        "TENSTORRENT_MAPPING_RESOURCE2_WC",
        MAPPING_RESOURCE2_WC as u64,
    ),
    (
        "TENSTORRENT_IOCTL_ALLOCATE_DMA_BUF",
        IOCTL_ALLOCATE_DMA_BUF as u64,
    ),
    ("TENSTORRENT_IOCTL_FREE_DMA_BUF", IOCTL_FREE_DMA_BUF as u64),
    ("TENSTORRENT_IOCTL_PIN_PAGES", IOCTL_PIN_PAGES as u64),
    ("TENSTORRENT_IOCTL_UNPIN_PAGES", IOCTL_UNPIN_PAGES as u64),
    ("TENSTORRENT_IOCTL_RESET_DEVICE", IOCTL_RESET_DEVICE as u64),
    ("TENSTORRENT_IOCTL_MAP_PEER_BAR", IOCTL_MAP_PEER_BAR as u64),
    (
        "TENSTORRENT_RESET_DEVICE_RESTORE_STATE",
        RESET_DEVICE_RESTORE_STATE as u64,
    ),
    (
        "TENSTORRENT_RESET_DEVICE_POST_RESET",
        RESET_DEVICE_POST_RESET as u64,
    ),
    (
        "TENSTORRENT_RESET_DEVICE_RESET_PCIE_LINK",
        RESET_DEVICE_RESET_PCIE_LINK as u64,
    ),
    (
        "TENSTORRENT_RESET_DEVICE_CONFIG_WRITE",
        RESET_DEVICE_CONFIG_WRITE as u64,
    ),
    (
        "TENSTORRENT_RESET_DEVICE_USER_RESET",
        RESET_DEVICE_USER_RESET as u64,
    ),
    (
        "TENSTORRENT_RESET_DEVICE_ASIC_RESET",
        RESET_DEVICE_ASIC_RESET as u64,
    ),
    (
        "TENSTORRENT_RESET_DEVICE_ASIC_DMC_RESET",
        RESET_DEVICE_ASIC_DMC_RESET as u64,
    ),
    (
        "TENSTORRENT_IOCTL_SET_NOC_CLEANUP",
        IOCTL_SET_NOC_CLEANUP as u64,
    ),
    (
        "TENSTORRENT_IOCTL_SET_POWER_STATE",
        IOCTL_SET_POWER_STATE as u64,
    ),
    (
        "TENSTORRENT_IOCTL_EXPORT_TLB_DMABUF",
        IOCTL_EXPORT_TLB_DMABUF as u64,
    ),
    ("TENSTORRENT_IOCTL_NOC_READ", IOCTL_NOC_READ as u64),
    ("TENSTORRENT_IOCTL_NOC_WRITE", IOCTL_NOC_WRITE as u64),
    (
        "TENSTORRENT_ALLOCATE_DMA_BUF_NOC_DMA",
        ALLOCATE_DMA_BUF_NOC_DMA as u64,
    ),
    (
        "TENSTORRENT_PIN_PAGES_CONTIGUOUS",
        PIN_PAGES_CONTIGUOUS as u64,
    ),
    ("TENSTORRENT_PIN_PAGES_NOC_DMA", PIN_PAGES_NOC_DMA as u64),
    (
        "TENSTORRENT_PIN_PAGES_NOC_TOP_DOWN",
        PIN_PAGES_NOC_TOP_DOWN as u64,
    ),
    (
        "TENSTORRENT_PIN_PAGES_READ_ONLY",
        PIN_PAGES_READ_ONLY as u64,
    ),
    ("TENSTORRENT_IOCTL_TLB_ALLOCATE", IOCTL_TLB_ALLOCATE as u64),
    ("TENSTORRENT_IOCTL_SMC_MSG", IOCTL_SMC_MSG as u64),
    ("TENSTORRENT_SMC_MSG_POST", SMC_MSG_POST as u64),
    ("TENSTORRENT_SMC_MSG_POLL", SMC_MSG_POLL as u64),
    ("TENSTORRENT_SMC_MSG_ABANDON", SMC_MSG_ABANDON as u64),
    ("TENSTORRENT_IOCTL_SMC_WAIT", IOCTL_SMC_WAIT as u64),
    ("TENSTORRENT_SMC_WAIT_DONE", SMC_WAIT_DONE as u64),
    ("TENSTORRENT_TLB_MAX_WINDOWS", TLB_MAX_WINDOWS as u64),
    ("TENSTORRENT_MMAP_OFFSET_TLB_UC", MMAP_OFFSET_TLB_UC),
    ("TENSTORRENT_MMAP_OFFSET_TLB_WC", MMAP_OFFSET_TLB_WC),
];

// ---- well-known lock names --------------------------------------------------

/// The well-known lock names, by index (0..22), as UMD and sysfs use them.
pub const LOCK_NAMES: [&str; 22] = [
    "ETH00",
    "ETH01",
    "ETH02",
    "ETH03",
    "ETH04",
    "ETH05",
    "ETH06",
    "ETH07",
    "ETH08",
    "ETH09",
    "ETH10",
    "ETH11",
    "ETH12",
    "ETH13",
    "ETH14",
    "ETH15",
    "ARC_MSG",
    "REMOTE_ARC_MSG",
    "NON_MMIO",
    "MEM_BARRIER",
    "CHIP_IN_USE",
    "PCIE_DMA",
];

/// The well-known name of lock `index` (as UMD and sysfs use it), if it has one.
pub fn lock_name(index: u32) -> Option<&'static str> {
    LOCK_NAMES.get(usize::try_from(index).ok()?).copied()
}

/// The index of the well-known lock `name` (exact, case-sensitive match).
pub fn lock_index(name: &str) -> Option<u32> {
    LOCK_NAMES.iter().position(|n| *n == name).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[allow(dead_code)]
    struct CStruct {
        name: &'static str,
        size: usize,
        fields: &'static [(&'static str, usize, usize)],
    }

    mod c {
        use super::CStruct;
        include!(concat!(env!("OUT_DIR"), "/c_abi.rs"));
    }

    type Layout = (usize, Vec<(&'static str, usize, usize)>);

    fn rust_layouts() -> BTreeMap<&'static str, Layout> {
        fn entry<T: AbiStruct>(m: &mut BTreeMap<&'static str, Layout>) {
            assert!(
                m.insert(T::C_NAME, (size_of::<T>(), T::FIELDS.to_vec()))
                    .is_none(),
                "{} mirrored twice",
                T::C_NAME
            );
        }
        let mut m = BTreeMap::new();
        entry::<GetDeviceInfoIn>(&mut m);
        entry::<GetDeviceInfoOut>(&mut m);
        entry::<GetDeviceInfo>(&mut m);
        entry::<GetDriverInfoIn>(&mut m);
        entry::<GetDriverInfoOut>(&mut m);
        entry::<GetDriverInfo>(&mut m);
        entry::<LockCtlIn>(&mut m);
        entry::<LockCtlOut>(&mut m);
        entry::<LockCtl>(&mut m);
        entry::<LockAcquire>(&mut m);
        entry::<LockAcquireSet>(&mut m);
        entry::<LockRelease>(&mut m);
        entry::<LockQuery>(&mut m);
        entry::<AllocateTlbIn>(&mut m);
        entry::<AllocateTlbOut>(&mut m);
        entry::<AllocateTlb>(&mut m);
        entry::<FreeTlbIn>(&mut m);
        entry::<FreeTlb>(&mut m);
        entry::<QueryMappingsIn>(&mut m);
        entry::<Mapping>(&mut m);
        entry::<NocTlbConfig>(&mut m);
        entry::<AllocateDmaBufIn>(&mut m);
        entry::<AllocateDmaBufOut>(&mut m);
        entry::<AllocateDmaBuf>(&mut m);
        entry::<PinPagesIn>(&mut m);
        entry::<PinPagesOut>(&mut m);
        entry::<PinPagesOutExtended>(&mut m);
        entry::<PinPages>(&mut m);
        entry::<UnpinPagesIn>(&mut m);
        entry::<UnpinPages>(&mut m);
        entry::<SetNocCleanup>(&mut m);
        entry::<PowerState>(&mut m);
        entry::<ExportTlbDmabuf>(&mut m);
        entry::<NocRead>(&mut m);
        entry::<NocWrite>(&mut m);
        entry::<MapPeerBarIn>(&mut m);
        entry::<MapPeerBarOut>(&mut m);
        entry::<MapPeerBar>(&mut m);
        entry::<ResetDeviceIn>(&mut m);
        entry::<ResetDeviceOut>(&mut m);
        entry::<ResetDevice>(&mut m);
        entry::<ConfigureTlbIn>(&mut m);
        entry::<ConfigureTlbOut>(&mut m);
        entry::<ConfigureTlb>(&mut m);
        entry::<TlbAllocate>(&mut m);
        entry::<SmcMsg>(&mut m);
        entry::<SmcWait>(&mut m);
        m
    }

    fn c_layouts(structs: &[CStruct]) -> BTreeMap<&'static str, Layout> {
        structs
            .iter()
            .map(|s| (s.name, (s.size, s.fields.to_vec())))
            .collect()
    }

    fn c_ok() {
        if let Some(e) = c::ERROR {
            panic!("the C header could not be compiled by build.rs: {e}");
        }
    }

    #[test]
    fn every_struct_matches_the_c_header() {
        c_ok();
        let c = c_layouts(c::STRUCTS);
        let rust = rust_layouts();
        assert_eq!(
            c.keys().collect::<Vec<_>>(),
            rust.keys().collect::<Vec<_>>(),
            "struct sets differ"
        );
        for (name, (size, fields)) in &c {
            let (rsize, rfields) = &rust[name];
            assert_eq!(size, rsize, "sizeof(struct {name})");
            assert_eq!(
                fields, rfields,
                "fields (name, offset, size) of struct {name}"
            );
        }
        assert!(c.len() >= 13, "header parse found only {} structs", c.len());
    }

    #[test]
    fn no_implicit_padding() {
        for (name, (size, fields)) in rust_layouts() {
            let mut end = 0;
            for (f, off, sz) in fields {
                assert_eq!(off, end, "hole before {name}.{f}");
                end = off + sz;
            }
            assert_eq!(end, size, "tail padding in {name}");
        }
    }

    #[test]
    fn layout_is_the_same_for_32_bit_userspace() {
        c_ok();
        match c::STRUCTS_M32 {
            Some(m32) => assert!(
                c_layouts(m32) == c_layouts(c::STRUCTS),
                "32-bit layout differs from 64-bit"
            ),
            None => {
                eprintln!("note: no 32-bit C toolchain on this host, 32-bit layout not checked")
            }
        }
    }

    #[test]
    fn every_define_matches_the_c_header() {
        c_ok();
        let c: BTreeMap<_, _> = c::DEFINES.iter().copied().collect();
        let rust: BTreeMap<_, _> = DEFINES.iter().copied().collect();
        assert_eq!(rust.len(), DEFINES.len(), "duplicate in DEFINES");
        assert_eq!(
            c.keys().collect::<Vec<_>>(),
            rust.keys().collect::<Vec<_>>(),
            "macro sets differ"
        );
        for (name, value) in &c {
            assert_eq!(
                rust[name], *value,
                "{name}: Rust {:#x}, C {value:#x}",
                rust[name]
            );
        }
    }

    #[test]
    fn ioctl_encoding() {
        // Values of the Linux macros, independent of the header.
        assert_eq!(io(0xFA, 8), 0xFA08);
        assert_eq!(iowr(0xFA, 0x40, 40), 0xC028_FA40);
        assert_eq!(ior(0xFA, 1, 8), 0x8008_FA01);
        assert_eq!(iow(0xFA, 1, 8), 0x4008_FA01);
        // New commands can never collide with the C driver's _IO numbers.
        for cmd in [
            IOCTL_LOCK_ACQUIRE,
            IOCTL_LOCK_ACQUIRE_SET,
            IOCTL_LOCK_RELEASE,
            IOCTL_LOCK_QUERY,
        ] {
            assert_ne!(cmd >> IOC_SIZESHIFT, 0);
            assert_eq!((cmd >> IOC_TYPESHIFT) & 0xff, IOCTL_MAGIC);
        }
    }

    #[test]
    fn extensible_new_sets_argsz() {
        assert_eq!(LockAcquire::new().argsz, 40);
        assert_eq!(LockAcquireSet::new().argsz, 48);
        assert_eq!(LockRelease::new().argsz, 16);
        assert_eq!(LockQuery::new().argsz, 80);
        assert_eq!(NocRead::new().argsz, 32);
        assert_eq!(NocWrite::new().argsz, 32);
        assert_eq!(SetNocCleanup::new().argsz, 32);
        assert_eq!(PowerState::new().argsz, 40);
        assert_eq!(ExportTlbDmabuf::new().argsz, 32);
    }

    #[test]
    fn lock_names_both_ways() {
        assert_eq!(lock_name(0), Some("ETH00"));
        assert_eq!(lock_name(lock_eth(15)), Some("ETH15"));
        assert_eq!(lock_name(LOCK_ARC_MSG), Some("ARC_MSG"));
        assert_eq!(lock_name(LOCK_REMOTE_ARC_MSG), Some("REMOTE_ARC_MSG"));
        assert_eq!(lock_name(LOCK_NON_MMIO), Some("NON_MMIO"));
        assert_eq!(lock_name(LOCK_MEM_BARRIER), Some("MEM_BARRIER"));
        assert_eq!(lock_name(LOCK_CHIP_IN_USE), Some("CHIP_IN_USE"));
        assert_eq!(lock_name(LOCK_PCIE_DMA), Some("PCIE_DMA"));
        assert_eq!(lock_name(22), None);
        assert_eq!(lock_name(u32::MAX), None);
        for i in 0..LOCK_COUNT {
            if let Some(n) = lock_name(i) {
                assert_eq!(lock_index(n), Some(i));
            }
        }
        assert_eq!(lock_index("PCIE_DMA"), Some(21));
        assert_eq!(lock_index("eth00"), None);
        assert_eq!(lock_index("ETH16"), None);
    }
}

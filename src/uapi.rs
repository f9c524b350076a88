// SPDX-License-Identifier: GPL-2.0

//! The userspace ABI: command numbers, flags and structures of
//! `include/uapi/linux/tenstorrent.h`, which is the source of truth.
//!
//! Structures are `#[repr(C)]` with the header's fields in its order, declared
//! through [`abi_struct!`] (rust/abi.rs), which makes them
//! [`FromBytes`](kernel::transmute::FromBytes) and
//! [`AsBytes`](kernel::transmute::AsBytes): src/file/ copies them from and
//! to userspace whole, with `UserSliceReader::read` and
//! `UserSliceWriter::write`. The header declares them without implicit
//! padding, and the build fails if one has any; the sizes below pin the
//! header's, and the host tests compare every size and offset with the
//! compiled header.

use crate::rust_ext::abi::abi_struct;
use kernel::ioctl::_IO;

/// The ioctl type byte of every command.
pub(crate) const IOCTL_MAGIC: u32 = 0xFA;

pub(crate) const GET_DEVICE_INFO: u32 = _IO(IOCTL_MAGIC, 0);
pub(crate) const GET_DRIVER_INFO: u32 = _IO(IOCTL_MAGIC, 5);
pub(crate) const LOCK_CTL: u32 = _IO(IOCTL_MAGIC, 8);
pub(crate) const ALLOCATE_TLB: u32 = _IO(IOCTL_MAGIC, 11);
pub(crate) const FREE_TLB: u32 = _IO(IOCTL_MAGIC, 12);
pub(crate) const QUERY_MAPPINGS: u32 = _IO(IOCTL_MAGIC, 2);
pub(crate) const CONFIGURE_TLB: u32 = _IO(IOCTL_MAGIC, 13);
pub(crate) const ALLOCATE_DMA_BUF: u32 = _IO(IOCTL_MAGIC, 3);
pub(crate) const FREE_DMA_BUF: u32 = _IO(IOCTL_MAGIC, 4);
pub(crate) const PIN_PAGES: u32 = _IO(IOCTL_MAGIC, 7);
pub(crate) const UNPIN_PAGES: u32 = _IO(IOCTL_MAGIC, 10);
pub(crate) const SET_NOC_CLEANUP: u32 = _IO(IOCTL_MAGIC, 14);
pub(crate) const GET_HARVESTING: u32 = _IO(IOCTL_MAGIC, 1);
pub(crate) const RESET_DEVICE: u32 = _IO(IOCTL_MAGIC, 6);
pub(crate) const MAP_PEER_BAR: u32 = _IO(IOCTL_MAGIC, 9);
pub(crate) const EXPORT_TLB_DMABUF: u32 = _IO(IOCTL_MAGIC, 16);
pub(crate) const SET_POWER_STATE: u32 = _IO(IOCTL_MAGIC, 15);
pub(crate) const NOC_READ: u32 = _IO(IOCTL_MAGIC, 18);
pub(crate) const NOC_WRITE: u32 = _IO(IOCTL_MAGIC, 19);
pub(crate) const SMC_MSG: u32 = _IO(IOCTL_MAGIC, 17);

pub(crate) const LOCK_ACQUIRE_NR: u32 = 0x40;
pub(crate) const LOCK_ACQUIRE_SET_NR: u32 = 0x41;
pub(crate) const LOCK_RELEASE_NR: u32 = 0x42;
pub(crate) const LOCK_QUERY_NR: u32 = 0x43;
pub(crate) const TLB_ALLOCATE_NR: u32 = 0x44;
pub(crate) const SMC_WAIT_NR: u32 = 0x45;

/// `driver_version` of GET_DRIVER_INFO: the C driver's API version.
pub(crate) const DRIVER_API_VERSION: u32 = 2;

pub(crate) const LOCK_CTL_ACQUIRE: u32 = 0;
pub(crate) const LOCK_CTL_RELEASE: u32 = 1;
pub(crate) const LOCK_CTL_TEST: u32 = 2;
pub(crate) const LOCK_CTL_ACQUIRE_BLOCKING: u32 = 3;

pub(crate) const LOCK_NONBLOCK: u32 = 1 << 0;
pub(crate) const LOCK_DEADLINE: u32 = 1 << 1;
pub(crate) const LOCK_OWNER_DIED: u32 = 1 << 0;

pub(crate) const SMC_MSG_POST: u32 = 1 << 0;
pub(crate) const SMC_MSG_POLL: u32 = 1 << 1;
pub(crate) const SMC_MSG_ABANDON: u32 = 1 << 2;
pub(crate) const SMC_WAIT_DONE: u32 = 1 << 0;

pub(crate) const LOCK_QUERY_HELD: u32 = 1 << 0;
pub(crate) const LOCK_QUERY_HELD_BY_CALLER: u32 = 1 << 1;
pub(crate) const LOCK_QUERY_OWNER_DIED: u32 = 1 << 2;

abi_struct!(
    /// `struct tenstorrent_get_device_info_out`.
    DeviceInfoOut {
        output_size_bytes: u32,
        vendor_id: u16,
        device_id: u16,
        subsystem_vendor_id: u16,
        subsystem_id: u16,
        bus_dev_fn: u16,
        max_dma_buf_size_log2: u16,
        pci_domain: u16,
        reserved: u16,
    }
);

abi_struct!(
    /// `struct tenstorrent_get_driver_info_out`.
    DriverInfoOut {
        output_size_bytes: u32,
        driver_version: u32,
        driver_version_major: u8,
        driver_version_minor: u8,
        driver_version_patch: u8,
        reserved0: u8,
    }
);

abi_struct!(
    /// `struct tenstorrent_lock_ctl_in`.
    LockCtlIn {
        output_size_bytes: u32,
        flags: u32,
        index: u8,
        reserved: [u8; 3],
    }
);

abi_struct!(
    /// `struct tenstorrent_lock_ctl_out`.
    LockCtlOut {
        value: u8,
        reserved: [u8; 3],
    }
);

abi_struct!(
    /// `struct tenstorrent_lock_acquire`.
    LockAcquire {
        argsz: u32,
        flags: u32,
        index: u32,
        reserved0: u32,
        deadline_ns: u64,
        out_flags: u32,
        holder_pid: u32,
        waited_ns: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_lock_acquire_set`.
    LockAcquireSet {
        argsz: u32,
        flags: u32,
        mask: u64,
        deadline_ns: u64,
        owner_died_mask: u64,
        waited_ns: u64,
        holder_pid: u32,
        reserved0: u32,
    }
);

abi_struct!(
    /// `struct tenstorrent_lock_release`.
    LockRelease {
        argsz: u32,
        flags: u32,
        mask: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_lock_query`.
    LockQuery {
        argsz: u32,
        flags: u32,
        index: u32,
        out_flags: u32,
        holder_pid: u32,
        waiters: u32,
        held_ns: u64,
        holder_comm: [u8; 16],
        acquisitions: u64,
        contended: u64,
        owner_died_count: u64,
        spurious_wakeups: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_allocate_tlb_in`.
    AllocateTlbIn {
        size: u64,
        reserved: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_allocate_tlb_out`.
    AllocateTlbOut {
        id: u32,
        reserved0: u32,
        mmap_offset_uc: u64,
        mmap_offset_wc: u64,
        reserved1: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_free_tlb_in`.
    FreeTlbIn { id: u32 }
);

abi_struct!(
    /// `struct tenstorrent_tlb_allocate`.
    TlbAllocate {
        argsz: u32,
        flags: u32,
        size: u64,
        deadline_ns: u64,
        id: u32,
        reserved0: u32,
        mmap_offset_uc: u64,
        mmap_offset_wc: u64,
        waited_ns: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_query_mappings_in`.
    QueryMappingsIn {
        output_mapping_count: u32,
        reserved: u32,
    }
);

abi_struct!(
    /// `struct tenstorrent_mapping`.
    Mapping {
        mapping_id: u32,
        reserved: u32,
        mapping_base: u64,
        mapping_size: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_configure_tlb_in` (its `config` inline).
    ConfigureTlbIn {
        id: u32,
        reserved: u32,
        addr: u64,
        x_end: u16,
        y_end: u16,
        x_start: u16,
        y_start: u16,
        noc: u8,
        mcast: u8,
        ordering: u8,
        linked: u8,
        static_vc: u8,
        reserved0: [u8; 3],
        reserved1: [u8; 8],
    }
);

// The sizes of the C header; the host tests check the header against the
// userspace crate, these keep the kernel's side in step with both.
const _: () = assert!(size_of::<DeviceInfoOut>() == 20);
const _: () = assert!(size_of::<DriverInfoOut>() == 12);
const _: () = assert!(size_of::<LockCtlIn>() == 12);
const _: () = assert!(size_of::<LockCtlOut>() == 4);
const _: () = assert!(size_of::<LockAcquire>() == 40);
const _: () = assert!(size_of::<LockAcquireSet>() == 48);
const _: () = assert!(size_of::<LockRelease>() == 16);
const _: () = assert!(size_of::<LockQuery>() == 80);
const _: () = assert!(size_of::<AllocateTlbIn>() == 16);
const _: () = assert!(size_of::<AllocateTlbOut>() == 32);
const _: () = assert!(size_of::<FreeTlbIn>() == 4);
const _: () = assert!(size_of::<TlbAllocate>() == 56);
const _: () = assert!(size_of::<QueryMappingsIn>() == 8);
const _: () = assert!(size_of::<Mapping>() == 24);
const _: () = assert!(size_of::<ConfigureTlbIn>() == 40);

abi_struct!(
    /// `struct tenstorrent_allocate_dma_buf_in`.
    AllocateDmaBufIn {
        requested_size: u32,
        buf_index: u8,
        flags: u8,
        reserved0: [u8; 2],
        reserved1: [u8; 16],
    }
);

abi_struct!(
    /// `struct tenstorrent_allocate_dma_buf_out`.
    AllocateDmaBufOut {
        physical_address: u64,
        mapping_offset: u64,
        size: u32,
        reserved0: u32,
        noc_address: u64,
        reserved1: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_pin_pages_in`.
    PinPagesIn {
        output_size_bytes: u32,
        flags: u32,
        virtual_address: u64,
        size: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_pin_pages_out_extended` (the first 8 bytes are
    /// `struct tenstorrent_pin_pages_out`).
    PinPagesOutExtended {
        physical_address: u64,
        noc_address: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_unpin_pages_in`.
    UnpinPagesIn {
        virtual_address: u64,
        size: u64,
        reserved: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_set_noc_cleanup`.
    SetNocCleanup {
        argsz: u32,
        flags: u32,
        enabled: u8,
        x: u8,
        y: u8,
        noc: u8,
        reserved0: u32,
        addr: u64,
        data: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_reset_device_in`.
    ResetDeviceIn {
        output_size_bytes: u32,
        flags: u32,
    }
);

abi_struct!(
    /// `struct tenstorrent_reset_device_out`.
    ResetDeviceOut {
        output_size_bytes: u32,
        result: u32,
    }
);

abi_struct!(
    /// `struct tenstorrent_map_peer_bar_in`.
    MapPeerBarIn {
        peer_fd: u32,
        peer_bar_index: u32,
        peer_bar_offset: u32,
        peer_bar_length: u32,
        flags: u32,
        reserved: u32,
    }
);

abi_struct!(
    /// `struct tenstorrent_map_peer_bar_out`.
    MapPeerBarOut {
        dma_address: u64,
        reserved: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_power_state`; `power_settings` is `__u16[14]`.
    SetPowerState {
        argsz: u32,
        flags: u32,
        reserved0: u8,
        validity: u8,
        power_flags: u16,
        power_settings: [u8; 28],
    }
);

abi_struct!(
    /// `struct tenstorrent_export_tlb_dmabuf`; `fd` is `__s32`.
    ExportTlbDmabuf {
        argsz: u32,
        flags: u32,
        tlb_id: u32,
        fd: u32,
        offset: u64,
        size: u64,
    }
);

abi_struct!(
    /// `struct tenstorrent_noc_read` and `struct tenstorrent_noc_write`,
    /// which share one layout (tt-kmd 2.11).
    NocIo {
        argsz: u32,
        flags: u32,
        x: u16,
        y: u16,
        noc: u8,
        width: u8,
        reserved0: [u8; 2],
        addr: u64,
        value: u64,
    }
);

const _: () = assert!(size_of::<NocIo>() == 32);

abi_struct!(
    /// `struct tenstorrent_smc_msg` (tt-kmd 2.11).
    SmcMsg {
        argsz: u32,
        flags: u32,
        queue_index: u32,
        reserved0: u32,
        message: [u32; 8],
    }
);

abi_struct!(
    /// `struct tenstorrent_smc_wait`.
    SmcWait {
        argsz: u32,
        flags: u32,
        deadline_ns: u64,
        out_flags: u32,
        reserved0: u32,
        message: [u32; 8],
    }
);

/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * tt-arbiter: the userspace ABI of the `tenstorrent` kernel module.
 *
 * Where it overlaps with the existing C driver (GET_DEVICE_INFO,
 * GET_DRIVER_INFO, LOCK_CTL) it is binary compatible with it: same command
 * numbers (_IO(0xFA, nr), no size bits), same layouts, same rules.
 *
 * The commands added by tt-arbiter are encoded with size and direction,
 * _IOWR(0xFA, nr, struct), so they can never equal any _IO(0xFA, n) of the
 * C driver. A size in the command number smaller than the struct's first
 * version is ENOTTY; a larger one is a later version of the same command.
 * They are extensible: every struct starts with `argsz` (the caller's
 * sizeof) and `flags`. The kernel reads min(argsz, its own size)
 * bytes; bytes past its own size must be zero (E2BIG otherwise); an argsz
 * smaller than the first version of the struct, unknown flags or non-zero
 * reserved fields are EINVAL. Output fields are written back, up to
 * min(argsz, its own size) bytes, on success and on the errors whose
 * description below says so. All fields are fixed-width with no implicit
 * padding, so 32-bit and 64-bit programs share one layout.
 *
 * Deadlines are absolute CLOCK_MONOTONIC times in nanoseconds, so a call
 * restarted after a signal never waits longer than first asked (a call
 * restarted after stop/continue whose deadline passed meanwhile is a try:
 * EBUSY if the lock is not free).
 *
 * A command that takes a lock or a TLB window and then cannot write its
 * answer back (EFAULT) gives the lock or window back at once: the caller
 * cannot know it holds it. An owner-died mark the grant consumed is kept
 * for the next acquirer.
 */
#ifndef _UAPI_LINUX_TENSTORRENT_H
#define _UAPI_LINUX_TENSTORRENT_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define TENSTORRENT_IOCTL_MAGIC 0xFA

/* ---- Commands shared with the C driver ------------------------------- */

#define TENSTORRENT_IOCTL_GET_DEVICE_INFO	_IO(TENSTORRENT_IOCTL_MAGIC, 0)
#define TENSTORRENT_IOCTL_GET_DRIVER_INFO	_IO(TENSTORRENT_IOCTL_MAGIC, 5)
#define TENSTORRENT_IOCTL_LOCK_CTL		_IO(TENSTORRENT_IOCTL_MAGIC, 8)
#define TENSTORRENT_IOCTL_ALLOCATE_TLB		_IO(TENSTORRENT_IOCTL_MAGIC, 11)
#define TENSTORRENT_IOCTL_FREE_TLB		_IO(TENSTORRENT_IOCTL_MAGIC, 12)

/*
 * The "output_size_bytes" rule of the three commands above: the kernel reads
 * only `in`, zeroes output_size_bytes bytes of `out`, then copies
 * min(output_size_bytes, sizeof(out)) bytes of its answer there. With
 * output_size_bytes == 0 `out` is never touched, so `in` may end a mapping.
 */

struct tenstorrent_get_device_info_in {
	__u32 output_size_bytes;
};

struct tenstorrent_get_device_info_out {
	__u32 output_size_bytes;	/* sizeof(this struct) */
	__u16 vendor_id;
	__u16 device_id;
	__u16 subsystem_vendor_id;
	__u16 subsystem_id;
	__u16 bus_dev_fn;		/* fn bits 0-2, dev 3-7, bus 8-15 */
	__u16 max_dma_buf_size_log2;	/* 0: no DMA buffers yet */
	__u16 pci_domain;
	__u16 reserved;
};

struct tenstorrent_get_device_info {
	struct tenstorrent_get_device_info_in in;
	struct tenstorrent_get_device_info_out out;
};

/* API version reported in driver_version. */
#define TENSTORRENT_DRIVER_API_VERSION 2

struct tenstorrent_get_driver_info_in {
	__u32 output_size_bytes;
};

struct tenstorrent_get_driver_info_out {
	__u32 output_size_bytes;	/* sizeof(this struct) */
	__u32 driver_version;		/* TENSTORRENT_DRIVER_API_VERSION */
	__u8 driver_version_major;	/* equal to /sys/module/tenstorrent/version */
	__u8 driver_version_minor;
	__u8 driver_version_patch;
	__u8 reserved0;
};

struct tenstorrent_get_driver_info {
	struct tenstorrent_get_driver_info_in in;
	struct tenstorrent_get_driver_info_out out;
};

/* 64 locks per card. */
#define TENSTORRENT_LOCK_COUNT 64

/* Well-known lock indices, as used by UMD. */
#define TENSTORRENT_LOCK_ETH(n)		(n)	/* 0..15: ERISC cores */
#define TENSTORRENT_LOCK_ARC_MSG	16
#define TENSTORRENT_LOCK_REMOTE_ARC_MSG	17
#define TENSTORRENT_LOCK_NON_MMIO	18
#define TENSTORRENT_LOCK_MEM_BARRIER	19
#define TENSTORRENT_LOCK_CHIP_IN_USE	20
#define TENSTORRENT_LOCK_PCIE_DMA	21

/* LOCK_CTL flags: exactly one of these values. */
#define TENSTORRENT_LOCK_CTL_ACQUIRE		0	/* non-blocking try */
#define TENSTORRENT_LOCK_CTL_RELEASE		1
#define TENSTORRENT_LOCK_CTL_TEST		2
#define TENSTORRENT_LOCK_CTL_ACQUIRE_BLOCKING	3

struct tenstorrent_lock_ctl_in {
	__u32 output_size_bytes;
	__u32 flags;		/* TENSTORRENT_LOCK_CTL_* */
	__u8 index;		/* < TENSTORRENT_LOCK_COUNT, else EINVAL */
	__u8 reserved[3];	/* not checked: old binaries left them uninitialised */
};

/*
 * value:
 *  ACQUIRE:		1 acquired, 0 held by anyone (this file included) or
 *			someone is queued
 *  RELEASE:		1 released, 0 not held by this file
 *  TEST:		bit 0 held by this file, bit 1 held by anyone
 *  ACQUIRE_BLOCKING:	1 once acquired; a signal gives -ERESTARTSYS (EINTR,
 *			or a restart under SA_RESTART). On a lock this file
 *			already holds, it waits until the file releases it.
 */
struct tenstorrent_lock_ctl_out {
	__u8 value;
	__u8 reserved[3];
};

struct tenstorrent_lock_ctl {
	struct tenstorrent_lock_ctl_in in;
	struct tenstorrent_lock_ctl_out out;
};

/*
 * TLB windows. Each card has a fixed set of BAR windows in size classes:
 *   Wormhole:  156 x 1 MiB (ids 0-155), 10 x 2 MiB (156-165),
 *              20 x 16 MiB (166-185; 185 is kept by the kernel)
 *   Blackhole: 202 x 2 MiB (ids 0-201; 201 is kept by the kernel),
 *              BAR4 size / 4 GiB x 4 GiB (from 202; 8 on a full card)
 * Ids count across the classes in that order, and so do the windows' BAR
 * offsets (each class packed after the previous one; Blackhole's 4 GiB
 * windows live in BAR4, whose offsets start after BAR0's 512 MiB).
 *
 * ALLOCATE_TLB: `size` must equal a window size of the card exactly
 * (EINVAL otherwise); the lowest free window of that size is taken; ENOMEM
 * when none is free or earlier waiters of that size are queued (see
 * TLB_ALLOCATE). It has no output_size_bytes: the kernel always writes the
 * 32 bytes of `out`, and frees the window if that write fails (EFAULT).
 * `in.reserved` is not checked. FREE_TLB: EINVAL for an id >= 256, EPERM
 * for a window this file does not hold. Windows are freed on last close.
 */
#define TENSTORRENT_TLB_MAX_WINDOWS	256
#define TENSTORRENT_MMAP_OFFSET_TLB_UC	(6ULL << 36)	/* + window's BAR offset */
#define TENSTORRENT_MMAP_OFFSET_TLB_WC	(7ULL << 36)

struct tenstorrent_allocate_tlb_in {
	__u64 size;
	__u64 reserved;
};

struct tenstorrent_allocate_tlb_out {
	__u32 id;
	__u32 reserved0;
	__u64 mmap_offset_uc;
	__u64 mmap_offset_wc;
	__u64 reserved1;
};

struct tenstorrent_allocate_tlb {
	struct tenstorrent_allocate_tlb_in in;
	struct tenstorrent_allocate_tlb_out out;
};

struct tenstorrent_free_tlb_in {
	__u32 id;
};

struct tenstorrent_free_tlb {
	struct tenstorrent_free_tlb_in in;
};

/* ---- Commands of tt-arbiter (extensible) ----------------------------- */

/*
 * Flags of ACQUIRE and ACQUIRE_SET (in). At most one of the two. A queued
 * ACQUIRE_SET counts as a waiter of each of its locks (QUERY `waiters`).
 */
#define TENSTORRENT_LOCK_NONBLOCK	(1U << 0)	/* EBUSY instead of waiting */
#define TENSTORRENT_LOCK_DEADLINE	(1U << 1)	/* ETIMEDOUT at deadline_ns */

/* out_flags of ACQUIRE and ACQUIRE_SET. */
#define TENSTORRENT_LOCK_OWNER_DIED	(1U << 0)	/* previous holder's file closed holding it */

/*
 * ACQUIRE: take one lock; blocks until it is granted (FIFO among waiters)
 * unless NONBLOCK or DEADLINE. A deadline already past behaves as a try.
 * Errors:
 *   EBUSY	NONBLOCK (or a past deadline) and the lock is held or someone
 *		is queued; holder_pid tells who holds it (written back)
 *   ETIMEDOUT	the deadline passed (never before it); holder_pid written back
 *   EDEADLK	this file already holds the lock
 *   EINTR	a signal handler ran, even one installed with SA_RESTART
 *		(the deadline is absolute: call again to go on waiting);
 *		stop/continue and ignored signals restart transparently
 *   ENODEV	the card is gone
 *   EINVAL	index >= 64, unknown flags, reserved fields not zero
 */
struct tenstorrent_lock_acquire {
	__u32 argsz;		/* in: sizeof(struct tenstorrent_lock_acquire) */
	__u32 flags;		/* in: TENSTORRENT_LOCK_NONBLOCK | _DEADLINE */
	__u32 index;		/* in: lock index */
	__u32 reserved0;	/* in: 0 */
	__u64 deadline_ns;	/* in: absolute CLOCK_MONOTONIC, with DEADLINE */
	__u32 out_flags;	/* out: TENSTORRENT_LOCK_OWNER_DIED */
	__u32 holder_pid;	/* out: on EBUSY/ETIMEDOUT, the holder (0 if none or not visible) */
	__u64 waited_ns;	/* out: time spent waiting */
};

/*
 * ACQUIRE_SET: take every lock of `mask` at once, all or nothing. The
 * request is granted when all its locks are free and no earlier waiter on
 * the card wants any of them; it never holds some while waiting for others.
 * Errors as ACQUIRE; EDEADLK if this file holds any of them; EINVAL for an
 * empty mask. holder_pid is the holder of the lowest busy lock.
 */
struct tenstorrent_lock_acquire_set {
	__u32 argsz;		/* in */
	__u32 flags;		/* in: TENSTORRENT_LOCK_NONBLOCK | _DEADLINE */
	__u64 mask;		/* in: bit i = lock i */
	__u64 deadline_ns;	/* in */
	__u64 owner_died_mask;	/* out: locks whose previous holder died */
	__u64 waited_ns;	/* out */
	__u32 holder_pid;	/* out: on EBUSY/ETIMEDOUT */
	__u32 reserved0;	/* in: 0 */
};

/*
 * RELEASE: release every lock of `mask`, all or nothing.
 * EPERM when this file does not hold all of them (none is released then).
 */
struct tenstorrent_lock_release {
	__u32 argsz;		/* in */
	__u32 flags;		/* in: 0 */
	__u64 mask;		/* in: bit i = lock i, non-zero */
};

/* out_flags of QUERY. */
#define TENSTORRENT_LOCK_QUERY_HELD		(1U << 0)
#define TENSTORRENT_LOCK_QUERY_HELD_BY_CALLER	(1U << 1)	/* by the calling file */
#define TENSTORRENT_LOCK_QUERY_OWNER_DIED	(1U << 2)	/* mark not yet consumed */

/* QUERY: the state of one lock. Never blocks. */
struct tenstorrent_lock_query {
	__u32 argsz;		/* in */
	__u32 flags;		/* in: 0 */
	__u32 index;		/* in */
	__u32 out_flags;	/* out: TENSTORRENT_LOCK_QUERY_* */
	__u32 holder_pid;	/* out: in the caller's pid namespace, 0 if not visible */
	__u32 waiters;		/* out: number of queued waiters */
	__u64 held_ns;		/* out: how long it has been held */
	char holder_comm[16];	/* out: holder's comm at acquisition, NUL-terminated */
	__u64 acquisitions;	/* out: grants since the card was bound (any command) */
	__u64 contended;	/* out: grants that had to wait */
	__u64 owner_died_count;	/* out: releases because the holder's file closed */
	/*
	 * out: wake-ups the driver sent to a waiter of this lock that then
	 * found no grant (the card still there). FIFO hand-off wakes only
	 * the granted waiter, so this stays 0. (Late wake-ups that the
	 * scheduler delivers for an earlier sleep are not the driver's and
	 * are not counted.)
	 */
	__u64 spurious_wakeups;
};

/*
 * TLB_ALLOCATE: allocate a TLB window of `size` bytes, waiting for one if
 * none is free: blocking by default, or NONBLOCK (EBUSY), or until
 * DEADLINE (ETIMEDOUT, never early; a deadline already past is a try).
 * Waiters of one size are served in arrival order, and a freed window goes
 * straight to the longest waiter of its size. Errors as ACQUIRE (EINTR,
 * ENODEV), EINVAL for a size that is not one of the card's window sizes.
 * Free the window with FREE_TLB.
 */
struct tenstorrent_tlb_allocate {
	__u32 argsz;		/* in */
	__u32 flags;		/* in: TENSTORRENT_LOCK_NONBLOCK | _DEADLINE */
	__u64 size;		/* in: window size in bytes */
	__u64 deadline_ns;	/* in */
	__u32 id;		/* out */
	__u32 reserved0;	/* in: 0 */
	__u64 mmap_offset_uc;	/* out */
	__u64 mmap_offset_wc;	/* out */
	__u64 waited_ns;	/* out */
};

#define TENSTORRENT_IOCTL_LOCK_ACQUIRE \
	_IOWR(TENSTORRENT_IOCTL_MAGIC, 0x40, struct tenstorrent_lock_acquire)
#define TENSTORRENT_IOCTL_LOCK_ACQUIRE_SET \
	_IOWR(TENSTORRENT_IOCTL_MAGIC, 0x41, struct tenstorrent_lock_acquire_set)
#define TENSTORRENT_IOCTL_LOCK_RELEASE \
	_IOWR(TENSTORRENT_IOCTL_MAGIC, 0x42, struct tenstorrent_lock_release)
#define TENSTORRENT_IOCTL_LOCK_QUERY \
	_IOWR(TENSTORRENT_IOCTL_MAGIC, 0x43, struct tenstorrent_lock_query)
#define TENSTORRENT_IOCTL_TLB_ALLOCATE \
	_IOWR(TENSTORRENT_IOCTL_MAGIC, 0x44, struct tenstorrent_tlb_allocate)

#endif /* _UAPI_LINUX_TENSTORRENT_H */

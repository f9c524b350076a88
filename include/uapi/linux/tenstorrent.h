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
 * Deadlines are absolute CLOCK_MONOTONIC times in nanoseconds, on the
 * caller's clock: in a time namespace, its CLOCK_MONOTONIC (the kernel
 * converts it, as futex and timerfd do). A call restarted after a signal
 * therefore never waits longer than first asked; one whose deadline passed
 * meanwhile (while stopped, say) times out at once: ETIMEDOUT, unless the
 * lock can be granted at once.
 *
 * A waiter that is stopped (SIGSTOP, job control), frozen (cgroup freezer)
 * or trapped by ptrace keeps its place in the queue: no handler runs, the
 * call is restarted and takes up its request again, granted meanwhile or
 * not. A waiter whose signal handler runs leaves the queue (EINTR, or a
 * restart at the back under SA_RESTART for LOCK_CTL). Any other lock
 * command of the same file, or its close, gives up a place kept for a
 * stopped call that has not come back.
 *
 * Pollers are served too: a try (LOCK_CTL ACQUIRE, NONBLOCK ACQUIRE or
 * ACQUIRE_SET) that fails while others are queued for its locks leaves a
 * poll place in the queue for 20 ms, renewed by the same file's next try of
 * the same locks (any other lock command of the file gives it up). While
 * the place has waited (since its first failed try) less than the card's
 * hand-off bound (module parameter handoff_us, 2 ms; 0 is strict FIFO), it
 * reserves nothing: a release that reaches it hands the lock to the
 * sleeping waiter behind it or leaves it free, and whoever asks first
 * takes it (the poller's next try included). Once it has waited longer, a
 * release that reaches it keeps the locks for that file (QUERY shows it as
 * the holder) until its next try takes them, or until the lease ends and
 * they go to the next waiter; nobody passes it. So a poller that tries at
 * least every 20 ms (UMD tries every 1 ms) is served, at the latest once
 * past the bound, after at most one grant to each request queued before
 * its place, and one that stops trying delays the others by at most 20 ms.
 * Sleeping waiters and lock sets are never passed, and a set passes no
 * poll place. Poll places are not counted in QUERY's `waiters`.
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
#define TENSTORRENT_IOCTL_QUERY_MAPPINGS	_IO(TENSTORRENT_IOCTL_MAGIC, 2)
#define TENSTORRENT_IOCTL_CONFIGURE_TLB		_IO(TENSTORRENT_IOCTL_MAGIC, 13)
#define TENSTORRENT_IOCTL_ALLOCATE_DMA_BUF	_IO(TENSTORRENT_IOCTL_MAGIC, 3)
#define TENSTORRENT_IOCTL_FREE_DMA_BUF		_IO(TENSTORRENT_IOCTL_MAGIC, 4)
#define TENSTORRENT_IOCTL_PIN_PAGES		_IO(TENSTORRENT_IOCTL_MAGIC, 7)
#define TENSTORRENT_IOCTL_UNPIN_PAGES		_IO(TENSTORRENT_IOCTL_MAGIC, 10)
#define TENSTORRENT_IOCTL_SET_NOC_CLEANUP	_IO(TENSTORRENT_IOCTL_MAGIC, 14)
#define TENSTORRENT_IOCTL_SET_POWER_STATE	_IO(TENSTORRENT_IOCTL_MAGIC, 15)
#define TENSTORRENT_IOCTL_EXPORT_TLB_DMABUF	_IO(TENSTORRENT_IOCTL_MAGIC, 16)
#define TENSTORRENT_IOCTL_RESET_DEVICE		_IO(TENSTORRENT_IOCTL_MAGIC, 6)
#define TENSTORRENT_IOCTL_MAP_PEER_BAR		_IO(TENSTORRENT_IOCTL_MAGIC, 9)
#define TENSTORRENT_IOCTL_SMC_MSG		_IO(TENSTORRENT_IOCTL_MAGIC, 17)
#define TENSTORRENT_IOCTL_NOC_READ		_IO(TENSTORRENT_IOCTL_MAGIC, 18)
#define TENSTORRENT_IOCTL_NOC_WRITE		_IO(TENSTORRENT_IOCTL_MAGIC, 19)

/*
 * The C driver's commands that start with `argsz` (SET_NOC_CLEANUP,
 * SET_POWER_STATE, SMC_MSG, NOC_READ, NOC_WRITE) negotiate it as tt-kmd
 * 2.11 does, and as this module's own commands do: argsz below the
 * struct's size is EINVAL (nothing past argsz is read), a larger argsz is
 * accepted when the bytes past the kernel's struct are zero (E2BIG
 * otherwise, and above 4096), unknown flags are EINVAL. EXPORT_TLB_DMABUF
 * keeps tt-kmd's rule: argsz must be exactly its struct's size (EINVAL
 * otherwise).
 */

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
	__u16 max_dma_buf_size_log2;	/* 28; 0 if the card cannot DMA */
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
 *			someone is queued for it (a waiter that waits for a
 *			lock this file holds does not count: see ACQUIRE_SET)
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
 * for a window this file does not hold, EBUSY while a mapping of it made
 * since it was taken exists (as tt-kmd 2.10). Windows are freed on last
 * close.
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

/*
 * QUERY_MAPPINGS (tt-kmd 2.10): the mmap offsets of the BARs. The kernel
 * reads only `in`; `out` is an array of output_mapping_count struct
 * tenstorrent_mapping right after it, of which the kernel fills the first
 * min(output_mapping_count, n) with its mappings and zeroes the rest. The
 * mappings, in this order, for each of BAR0, BAR2, BAR4 the card has:
 * RESOURCEn_UC (id 2n + 1) at offset (2n << 36) and RESOURCEn_WC (id
 * 2n + 2) at ((2n + 1) << 36), each the BAR's size. Ids are not indices.
 *
 * mmap of the file: a BAR mapping must lie inside one of these (EINVAL
 * otherwise), UC uncached, WC write-combined. A TLB window is mapped at
 * the mmap_offset_uc/wc ALLOCATE_TLB or TLB_ALLOCATE gave: from the
 * window's start, no longer than the window (EINVAL otherwise), only by
 * the file that holds it (EPERM otherwise; the kernel's own window
 * included). Mappings are VM_IO | VM_PFNMAP, shared only (MAP_PRIVATE is
 * EINVAL, as vfio-pci answers), never executable (PROT_EXEC is EPERM,
 * mprotect(PROT_EXEC) EACCES), not copied by fork (MADV_DOFORK is EINVAL),
 * not expanded by mremap (EFAULT), not reachable through /proc/PID/mem or
 * ptrace (EIO). When a window is freed (last close, or a reset that fences
 * its file) or the card is unbound, every mapping of it in every process
 * is revoked before anyone else gets it: the next access gets SIGBUS. A
 * freed window is reset to NOC address 0 of tile (0, 0).
 */
#define TENSTORRENT_MAPPING_UNUSED		0
#define TENSTORRENT_MAPPING_RESOURCE0_UC	1
#define TENSTORRENT_MAPPING_RESOURCE0_WC	2
#define TENSTORRENT_MAPPING_RESOURCE1_UC	3
#define TENSTORRENT_MAPPING_RESOURCE1_WC	4
#define TENSTORRENT_MAPPING_RESOURCE2_UC	5
#define TENSTORRENT_MAPPING_RESOURCE2_WC	6

struct tenstorrent_query_mappings_in {
	__u32 output_mapping_count;
	__u32 reserved;
};

struct tenstorrent_mapping {
	__u32 mapping_id;
	__u32 reserved;
	__u64 mapping_base;
	__u64 mapping_size;
};

/*
 * CONFIGURE_TLB (tt-kmd 2.10): aims window `id`, held by this file, at NOC
 * address `addr` (aligned to the window's size; below 2^36 on Wormhole) of
 * tile (x_end, y_end), or of the rectangle from (x_start, y_start) with
 * mcast. The kernel reads only `in`. EINVAL for an id >= 256, a bad
 * address or a field wider than its register field (coordinates 6 bits,
 * noc 1 bit on Wormhole and 2 on Blackhole, mcast 1, ordering 2, linked 1,
 * static_vc 1 on Blackhole; ignored on Wormhole); EPERM for a window this
 * file does not hold. Reserved fields are not checked, as in tt-kmd.
 */
struct tenstorrent_noc_tlb_config {
	__u64 addr;
	__u16 x_end;
	__u16 y_end;
	__u16 x_start;
	__u16 y_start;
	__u8 noc;
	__u8 mcast;
	__u8 ordering;
	__u8 linked;
	__u8 static_vc;
	__u8 reserved0[3];
	__u32 reserved1[2];
};

struct tenstorrent_configure_tlb_in {
	__u32 id;
	__u32 reserved;
	struct tenstorrent_noc_tlb_config config;
};

struct tenstorrent_configure_tlb_out {
	__u64 reserved;
};

struct tenstorrent_configure_tlb {
	struct tenstorrent_configure_tlb_in in;
	struct tenstorrent_configure_tlb_out out;
};

/* ---- Commands of tt-arbiter (extensible) ----------------------------- */

/*
 * Flags of ACQUIRE and ACQUIRE_SET (in). At most one of the two. A queued
 * ACQUIRE_SET counts as a waiter of each of its locks (QUERY `waiters`).
 */
#define TENSTORRENT_LOCK_NONBLOCK	(1U << 0)	/* EBUSY instead of waiting */
#define TENSTORRENT_LOCK_DEADLINE	(1U << 1)	/* ETIMEDOUT at deadline_ns, even if already past */

/* out_flags of ACQUIRE and ACQUIRE_SET. */
#define TENSTORRENT_LOCK_OWNER_DIED	(1U << 0)	/* previous holder's file closed holding it */

/*
 * ACQUIRE: take one lock; blocks until it is granted (FIFO among waiters)
 * unless NONBLOCK or DEADLINE. A deadline already past is checked like a
 * try, and gives ETIMEDOUT where a try gives EBUSY.
 * Errors:
 *   EBUSY	NONBLOCK and the lock is held or someone is queued for it
 *		that may not be passed (a sleeping waiter, a set, a poller
 *		past the hand-off bound);
 *		holder_pid tells who holds it (written back)
 *   ETIMEDOUT	DEADLINE and not granted by the deadline: never before it,
 *		also when it had passed before the call or while the caller
 *		was stopped; holder_pid written back
 *   EDEADLK	this file already holds the lock
 *   EINTR	a signal handler ran, even one installed with SA_RESTART
 *		(the deadline is absolute: call again to go on waiting);
 *		stop/continue, freezing, ptrace and ignored signals restart
 *		transparently, keeping the waiter's place
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
 *
 * Arrival order never creates a deadlock: a request (of any command, one
 * lock or several, blocking or not) does not wait behind an earlier waiter
 * that itself waits for a lock the requester's file holds, directly or
 * through other waiters (one behind it, or whose file it waits for). Such a
 * waiter could not be granted before the requester releases anyway. So a
 * file holding CHIP_IN_USE gets a free ARC_MSG at once even while another
 * file's ACQUIRE_SET {CHIP_IN_USE, ARC_MSG} is queued.
 *
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
	 * out: returns of a waiter of this lock from its sleep that found
	 * nothing to act on (no grant, no signal, no deadline, the card
	 * still there) after a wake-up sent to it or a timer that fired
	 * early. A release wakes only the waiter it grants to, so it stays
	 * 0. A stray wake-up not sent to the waiter (a mutex's deferred
	 * wake-up meant for an earlier sleep of the task) is not counted.
	 */
	__u64 spurious_wakeups;
};

/*
 * TLB_ALLOCATE: allocate a TLB window of `size` bytes, waiting for one if
 * none is free: blocking by default, or NONBLOCK (EBUSY), or until
 * DEADLINE (ETIMEDOUT, never early; at once for a deadline already past
 * when none is free).
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

/*
 * DMA (tt-kmd 2.10). ALLOCATE_DMA_BUF gives the file buffer `buf_index` of
 * `requested_size` bytes (a multiple of the page size, at most
 * 1 << max_dma_buf_size_log2), physically contiguous and zeroed: EINVAL
 * for a bad size or an index the file already has, ENOMEM when no such
 * block is free (callers halve). `physical_address` is the bus address
 * (an IOVA behind an IOMMU); with ALLOCATE_DMA_BUF_NOC_DMA the buffer also
 * gets `noc_address`, through one of the card's 16 outbound regions
 * (ENOSPC when all are in use). The kernel reads only `in` and writes only
 * `out`. The buffer is mmapped at `mapping_offset` ((PAGE_SIZE - 256) << 32
 * + buf_index << 32), cached, any page-aligned part of it; it lives until
 * its file is closed or the card is unbound (mappings then get SIGBUS).
 * FREE_DMA_BUF always fails with EINVAL, as in tt-kmd.
 *
 * PIN_PAGES pins `size` bytes of the caller's memory from
 * `virtual_address` (both page aligned, size > 0), charged to its
 * RLIMIT_MEMLOCK (ENOMEM past it, unless CAP_IPC_LOCK). The caller's
 * `output_size_bytes` bytes of `out` are cleared first; they then hold
 * `physical_address` (the pages must be one range the card can reach:
 * physically contiguous without an IOMMU, one IOVA range with one; EINVAL
 * otherwise) and, from 16 bytes, `noc_address` (0 without NOC_DMA).
 * NOC_TOP_DOWN implies NOC_DMA. READ_ONLY needs an IOMMU (EOPNOTSUPP).
 * EEXIST if the file pinned the same range already; EFAULT if any page of
 * the range is unmapped or PROT_NONE. UNPIN_PAGES unpins
 * the newest pin at `virtual_address`, whose size (cut to whole pages)
 * must be `size`: EINVAL otherwise. Close unpins everything of the file.
 */
#define TENSTORRENT_ALLOCATE_DMA_BUF_NOC_DMA	2
#define TENSTORRENT_PIN_PAGES_CONTIGUOUS	1
#define TENSTORRENT_PIN_PAGES_NOC_DMA		2
#define TENSTORRENT_PIN_PAGES_NOC_TOP_DOWN	4
#define TENSTORRENT_PIN_PAGES_READ_ONLY		8

struct tenstorrent_allocate_dma_buf_in {
	__u32 requested_size;
	__u8 buf_index;
	__u8 flags;
	__u8 reserved0[2];
	__u64 reserved1[2];
};

struct tenstorrent_allocate_dma_buf_out {
	__u64 physical_address;
	__u64 mapping_offset;
	__u32 size;
	__u32 reserved0;
	__u64 noc_address;
	__u64 reserved1;
};

struct tenstorrent_allocate_dma_buf {
	struct tenstorrent_allocate_dma_buf_in in;
	struct tenstorrent_allocate_dma_buf_out out;
};

struct tenstorrent_pin_pages_in {
	__u32 output_size_bytes;
	__u32 flags;
	__u64 virtual_address;
	__u64 size;
};

struct tenstorrent_pin_pages_out {
	__u64 physical_address;
};

struct tenstorrent_pin_pages_out_extended {
	__u64 physical_address;
	__u64 noc_address;
};

struct tenstorrent_pin_pages {
	struct tenstorrent_pin_pages_in in;
	struct tenstorrent_pin_pages_out out;
};

struct tenstorrent_unpin_pages_in {
	__u64 virtual_address;
	__u64 size;
	__u64 reserved;
};

struct tenstorrent_unpin_pages {
	struct tenstorrent_unpin_pages_in in;
};

/*
 * SET_NOC_CLEANUP (tt-kmd 2.10): registers (enabled 1) or clears (enabled
 * 0) the one 32-bit write (the low half of `data`) the kernel makes at NOC
 * address `addr` (4-byte aligned) of tile (x, y) on `noc` when this file
 * is released, through its own TLB window with strict ordering, before the
 * file's DMA, locks and TLB windows go, also after kill -9. A second call
 * replaces the first. EINVAL for flags or reserved0 != 0 (tt-kmd 2.11),
 * enabled or noc above 1, x or y above 63, an unaligned address or one the
 * window cannot reach (Wormhole: 2^36 and up); argsz as above.
 */
struct tenstorrent_set_noc_cleanup {
	__u32 argsz;
	__u32 flags;
	__u8 enabled;
	__u8 x;
	__u8 y;
	__u8 noc;
	__u32 reserved0;
	__u64 addr;
	__u64 data;
};

/*
 * SET_POWER_STATE (tt-kmd 2.10): this file's power vote. validity bits 0-3
 * say how many of the low power_flags bits the vote covers (the others
 * count as on), bits 4-7 how many power_settings. A plain open starts with
 * every flag but MAX_AI_CLK, an O_APPEND open with nothing. The card gets
 * what the open files' votes add up to (a flag is on if any vote has it or
 * does not cover it, a setting is the largest asked for) whenever a vote
 * changes, a file with a vote closes, or the last one does (Wormhole: after
 * the module's idle_power_down_grace_ms). argsz as above; EINVAL for flags
 * or reserved0 != 0, 15 settings, or when the firmware did not take the state
 * (the vote stays). The kernel writes nothing back.
 */
#define TT_POWER_FLAG_MAX_AI_CLK	(1U << 0)
#define TT_POWER_FLAG_MRISC_PHY_WAKEUP	(1U << 1)
#define TT_POWER_FLAG_TENSIX_ENABLE	(1U << 2)
#define TT_POWER_FLAG_L2CPU_ENABLE	(1U << 3)
#define TT_POWER_VALIDITY_FLAGS(n)	(((n) & 0xF) << 0)
#define TT_POWER_VALIDITY_SETTINGS(n)	(((n) & 0xF) << 4)
#define TT_POWER_VALIDITY(flags, settings) \
	(TT_POWER_VALIDITY_FLAGS(flags) | TT_POWER_VALIDITY_SETTINGS(settings))

struct tenstorrent_power_state {
	__u32 argsz;
	__u32 flags;
	__u8 reserved0;
	__u8 validity;
	__u16 power_flags;
	__u16 power_settings[14];
};

/*
 * EXPORT_TLB_DMABUF (tt-kmd 2.10): exports `size` bytes (0: to the end)
 * from `offset` of TLB window `tlb_id`, which this file holds, as a dma-buf
 * for peer-to-peer importers; `fd` is its new descriptor (close-on-exec).
 * The export holds the window (it survives FREE_TLB and close) until the
 * dma-buf is released; RESET_DEVICE 1-5 is EBUSY meanwhile; unbind revokes
 * it. argsz must be 32, sizeof this struct, as in tt-kmd (EINVAL
 * otherwise; the kernel writes the struct back); EINVAL for
 * flags, tlb_id >= 256 or of no window, offset or size not page-aligned or
 * past the window; EPERM for a window not held.
 */
struct tenstorrent_export_tlb_dmabuf {
	__u32 argsz;
	__u32 flags;
	__u32 tlb_id;
	__s32 fd;
	__u64 offset;
	__u64 size;
};

/*
 * RESET_DEVICE (tt-kmd 2.10's struct, flags and results). RESTORE_STATE
 * puts back the configuration space saved at probe; RESET_PCIE_LINK
 * hot-resets the link; CONFIG_WRITE fires the PCIe interface timer;
 * USER_RESET sets the reset marker (PCI_COMMAND_PARITY) for userspace to
 * reset the chip; ASIC_RESET and ASIC_DMC_RESET (with the board
 * management controller) have the firmware reset it. 2-5 first fence the
 * card's other files: every later command of theirs is ENODEV, their
 * waiters wake with ENODEV, their windows and mappings are revoked, their
 * locks stay held until they close. 1-5 are EBUSY while a TLB window is
 * exported (EXPORT_TLB_DMABUF). After 3-5 only GET_DEVICE_INFO,
 * GET_DRIVER_INFO and RESET_DEVICE answer (others ENODEV) until
 * POST_RESET, which succeeds when the marker is clear. Other flags EINVAL.
 * The kernel reads only `in`; the caller's output_size_bytes bytes of
 * `out` are cleared, then get output_size_bytes 8 and result (0 success,
 * 1 failure).
 */
#define TENSTORRENT_RESET_DEVICE_RESTORE_STATE	0
#define TENSTORRENT_RESET_DEVICE_RESET_PCIE_LINK	1
#define TENSTORRENT_RESET_DEVICE_CONFIG_WRITE	2
#define TENSTORRENT_RESET_DEVICE_USER_RESET	3
#define TENSTORRENT_RESET_DEVICE_ASIC_RESET	4
#define TENSTORRENT_RESET_DEVICE_ASIC_DMC_RESET	5
#define TENSTORRENT_RESET_DEVICE_POST_RESET	6

struct tenstorrent_reset_device_in {
	__u32 output_size_bytes;
	__u32 flags;
};

struct tenstorrent_reset_device_out {
	__u32 output_size_bytes;
	__u32 result;
};

struct tenstorrent_reset_device {
	struct tenstorrent_reset_device_in in;
	struct tenstorrent_reset_device_out out;
};

/*
 * MAP_PEER_BAR (tt-kmd 2.10): maps peer_bar_length bytes from
 * peer_bar_offset of PCI resource peer_bar_index (0, 2 or 4: the BARs) of
 * another card of the same chip, open in this process as peer_fd, for this
 * card's DMA; dma_address is the bus address. The mapping lives until this
 * file is closed, the card unbound or the peer unbound. EINVAL for flags,
 * an index >= 17 or of no BAR, a zero length or a range past the BAR, a
 * descriptor that is not a card's file, the same card, a card of another
 * chip; EBADF for a descriptor that is not open; ENODEV once the peer is
 * unbound. The kernel reads only `in`.
 */
struct tenstorrent_map_peer_bar_in {
	__u32 peer_fd;
	__u32 peer_bar_index;
	__u32 peer_bar_offset;
	__u32 peer_bar_length;
	__u32 flags;
	__u32 reserved;
};

struct tenstorrent_map_peer_bar_out {
	__u64 dma_address;
	__u64 reserved;
};

struct tenstorrent_map_peer_bar {
	struct tenstorrent_map_peer_bar_in in;
	struct tenstorrent_map_peer_bar_out out;
};

/*
 * NOC_READ and NOC_WRITE (tt-kmd 2.11): one access of `width` bytes (1, 2,
 * 4 or 8) at NOC address `addr` of tile (x, y) on NOC `noc`, made by the
 * kernel through its own TLB window, aimed again for every access. NOC_READ
 * writes the struct back with `value` (zero-extended); NOC_WRITE writes the
 * low `width` bytes of `value` and returns once the write has reached the
 * card. Nothing is mapped, so a reset cannot raise SIGBUS: an access waits
 * while a reset of the card runs, then answers ENODEV if the reset fenced
 * this file (as every command then does). Slower than a window the caller
 * maps; for tools that watch a card while something else runs on it.
 * Whether a 1 or 2-byte access to a register is one access of that width
 * on the chip is the hardware's: the kernel makes one access of `width`
 * through the window, but does not promise narrower register accesses.
 * argsz as above; EINVAL for flags or reserved0 != 0, noc above 1, a width
 * other than 1, 2, 4, 8, an address not aligned to the width, and what the
 * window cannot reach: x or y above 63, on Wormhole an address of 2^36 and
 * up.
 */
struct tenstorrent_noc_read {
	__u32 argsz;
	__u32 flags;
	__u16 x;
	__u16 y;
	__u8 noc;
	__u8 width;
	__u8 reserved0[2];
	__u64 addr;
	__u64 value;
};

struct tenstorrent_noc_write {
	__u32 argsz;
	__u32 flags;
	__u16 x;
	__u16 y;
	__u8 noc;
	__u8 width;
	__u8 reserved0[2];
	__u64 addr;
	__u64 value;
};

/*
 * SMC_MSG (tt-kmd 2.11): a message to the card's ARC firmware (the system
 * management controller) through its message queue, which the driver owns
 * and shares between the open files and its own messages, in arrival
 * order. A file has at most one message outstanding.
 *
 * flags is exactly one of:
 * - POST: queues message[] (word 0: the message type in its low byte).
 *   EBUSY if this file has a message outstanding; EOPNOTSUPP (nothing
 *   posted) when the firmware publishes no queue.
 * - POLL: collects the response into message[]: 0, or EREMOTEIO when the
 *   firmware's status (message[0]) is nonzero (0xFFFFFFFF: the queue could
 *   not be read or written); either way the file may post again. EAGAIN
 *   while the message is outstanding, ESRCH when the file has none.
 *   Beyond tt-kmd: ETIMEDOUT when the firmware did not answer it (or one
 *   ahead of it) in time, ENODEV when a reset fenced the file or the card
 *   went away; the file may post again after these too.
 * - ABANDON: forgets the file's message (its response is dropped when it
 *   comes). Always 0. Closing the file abandons too.
 * argsz >= 48 (a larger one's tail must be zero: E2BIG otherwise),
 * queue_index and reserved0 zero, other flags: EINVAL.
 *
 * The file is readable (poll/select/epoll: EPOLLIN) when its message is
 * done and writable (EPOLLOUT) when it may post; SMC_WAIT sleeps for it.
 */
#define TENSTORRENT_SMC_MSG_POST	(1U << 0)
#define TENSTORRENT_SMC_MSG_POLL	(1U << 1)
#define TENSTORRENT_SMC_MSG_ABANDON	(1U << 2)

struct tenstorrent_smc_msg {
	__u32 argsz;
	__u32 flags;
	__u32 queue_index;
	__u32 reserved0;
	__u32 message[8];
};

/*
 * SMC_WAIT (tt-arbiter): POLL that sleeps until the file's message is done,
 * with the locks' waits: flags 0 waits for ever, TENSTORRENT_LOCK_NONBLOCK
 * does not wait (EAGAIN), TENSTORRENT_LOCK_DEADLINE waits until
 * deadline_ns, absolute CLOCK_MONOTONIC of the caller's time namespace
 * (ETIMEDOUT, also when already past). EINTR when a signal handler ran
 * (call again: the deadline is absolute), ENODEV once the card is gone,
 * ESRCH with nothing outstanding. When the message is done, out_flags has
 * TENSTORRENT_SMC_WAIT_DONE and the result is POLL's (0, EREMOTEIO with
 * message[] written; ETIMEDOUT or ENODEV from the message itself); without
 * it, ETIMEDOUT is the caller's deadline and the message stays
 * outstanding.
 */
#define TENSTORRENT_SMC_WAIT_DONE	(1U << 0)

struct tenstorrent_smc_wait {
	__u32 argsz;		/* in */
	__u32 flags;		/* in: TENSTORRENT_LOCK_NONBLOCK | _DEADLINE */
	__u64 deadline_ns;	/* in */
	__u32 out_flags;	/* out */
	__u32 reserved0;	/* in: 0 */
	__u32 message[8];	/* out */
};

#define TENSTORRENT_IOCTL_SMC_WAIT \
	_IOWR(TENSTORRENT_IOCTL_MAGIC, 0x45, struct tenstorrent_smc_wait)

#endif /* _UAPI_LINUX_TENSTORRENT_H */

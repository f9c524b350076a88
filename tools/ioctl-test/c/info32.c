/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * info32: the ABI from 32-bit userspace (built with -m32 -static), through
 * the kernel's compat ioctl path: GET_DRIVER_INFO and GET_DEVICE_INFO on
 * both cards checked against sysfs, then QUERY, ACQUIRE, ACQUIRE_SET and
 * RELEASE, whose layout must be the same as for 64-bit programs, and
 * NOC_WRITE / NOC_READ with their 64-bit address and value. TAP output.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <linux/tenstorrent.h>

#include "tap.h"

/* The same layout as 64-bit programs (checked on the host against the header). */
_Static_assert(sizeof(struct tenstorrent_get_device_info) == 24, "device info");
_Static_assert(sizeof(struct tenstorrent_get_driver_info) == 16, "driver info");
_Static_assert(sizeof(struct tenstorrent_lock_ctl) == 16, "lock_ctl");
_Static_assert(sizeof(struct tenstorrent_lock_acquire) == 40, "acquire");
_Static_assert(sizeof(struct tenstorrent_lock_acquire_set) == 48, "acquire_set");
_Static_assert(sizeof(struct tenstorrent_lock_release) == 16, "release");
_Static_assert(sizeof(struct tenstorrent_lock_query) == 80, "query");
_Static_assert(offsetof(struct tenstorrent_lock_acquire, deadline_ns) == 16, "deadline_ns");
_Static_assert(offsetof(struct tenstorrent_lock_query, acquisitions) == 48, "acquisitions");
_Static_assert(sizeof(struct tenstorrent_noc_read) == 32, "noc_read");
_Static_assert(sizeof(struct tenstorrent_noc_write) == 32, "noc_write");
_Static_assert(offsetof(struct tenstorrent_noc_read, addr) == 16, "noc_read addr");
_Static_assert(offsetof(struct tenstorrent_noc_write, value) == 24, "noc_write value");

#define IDX 43

static int read_sysfs(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static long sysfs_hex(int card, const char *attr)
{
	char path[PATH_MAX], buf[64];

	snprintf(path, sizeof(path), "/sys/class/tenstorrent/tenstorrent!%d/device/%s", card, attr);
	if (read_sysfs(path, buf, sizeof(buf)))
		return -1;
	return strtol(buf, NULL, 16);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int open_card(int card)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/tenstorrent/%d", card);
	return open(path, O_RDWR | O_CLOEXEC);
}

static void driver_info(int card)
{
	struct tenstorrent_get_driver_info arg;
	char ver[64], mine[64];
	int fd = open_card(card);

	if (fd < 0) {
		tap_fail("open card %d: %s", card, strerror(errno));
		return;
	}
	memset(&arg, 0, sizeof(arg));
	arg.in.output_size_bytes = sizeof(arg.out);
	if (ioctl(fd, TENSTORRENT_IOCTL_GET_DRIVER_INFO, &arg) < 0) {
		tap_fail("GET_DRIVER_INFO: %s", strerror(errno));
	} else {
		CHECK(arg.out.driver_version == TENSTORRENT_DRIVER_API_VERSION, "driver_version %u",
		      arg.out.driver_version);
		CHECK(arg.out.output_size_bytes == sizeof(arg.out), "output_size_bytes %u",
		      arg.out.output_size_bytes);
		snprintf(mine, sizeof(mine), "%u.%u.%u", arg.out.driver_version_major,
			 arg.out.driver_version_minor, arg.out.driver_version_patch);
		if (read_sysfs("/sys/module/tenstorrent/version", ver, sizeof(ver)))
			tap_fail("read /sys/module/tenstorrent/version: %s", strerror(errno));
		else
			CHECK(strncmp(ver, mine, strlen(mine)) == 0 &&
				      (ver[strlen(mine)] == 0 || ver[strlen(mine)] == '-' ||
				       ver[strlen(mine)] == '+'),
			      "version %s, sysfs says %s", mine, ver);
	}
	close(fd);
}

static void device_info(int card)
{
	struct tenstorrent_get_device_info arg;
	char path[PATH_MAX], link[PATH_MAX];
	unsigned int dom, bus, dev, fn;
	const char *bdf;
	ssize_t n;
	int fd = open_card(card);

	if (fd < 0) {
		tap_fail("open card %d: %s", card, strerror(errno));
		return;
	}
	memset(&arg, 0, sizeof(arg));
	arg.in.output_size_bytes = sizeof(arg.out);
	if (ioctl(fd, TENSTORRENT_IOCTL_GET_DEVICE_INFO, &arg) < 0) {
		tap_fail("GET_DEVICE_INFO: %s", strerror(errno));
		close(fd);
		return;
	}
	CHECK(arg.out.output_size_bytes == sizeof(arg.out), "output_size_bytes %u",
	      arg.out.output_size_bytes);
	CHECK(arg.out.vendor_id == sysfs_hex(card, "vendor"), "vendor_id %04x, sysfs %lx",
	      arg.out.vendor_id, sysfs_hex(card, "vendor"));
	CHECK(arg.out.device_id == sysfs_hex(card, "device"), "device_id %04x, sysfs %lx",
	      arg.out.device_id, sysfs_hex(card, "device"));
	CHECK(arg.out.subsystem_vendor_id == sysfs_hex(card, "subsystem_vendor"),
	      "subsystem_vendor_id %04x", arg.out.subsystem_vendor_id);
	CHECK(arg.out.subsystem_id == sysfs_hex(card, "subsystem_device"), "subsystem_id %04x",
	      arg.out.subsystem_id);
	CHECK(arg.out.max_dma_buf_size_log2 == 28, "max_dma_buf_size_log2 %u",
	      arg.out.max_dma_buf_size_log2);
	snprintf(path, sizeof(path), "/sys/class/tenstorrent/tenstorrent!%d/device", card);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0) {
		tap_fail("readlink %s: %s", path, strerror(errno));
	} else {
		link[n] = 0;
		bdf = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
		if (sscanf(bdf, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) {
			tap_fail("cannot parse BDF %s", bdf);
		} else {
			CHECK(arg.out.pci_domain == dom, "pci_domain %u, BDF %s", arg.out.pci_domain, bdf);
			CHECK(arg.out.bus_dev_fn == ((bus << 8) | (dev << 3) | fn), "bus_dev_fn %#x, BDF %s",
			      arg.out.bus_dev_fn, bdf);
		}
	}
	close(fd);
}

static int query(int fd, unsigned int index, struct tenstorrent_lock_query *q)
{
	memset(q, 0, sizeof(*q));
	q->argsz = sizeof(*q);
	q->index = index;
	return ioctl(fd, TENSTORRENT_IOCTL_LOCK_QUERY, q);
}

static int release(int fd, uint64_t mask)
{
	struct tenstorrent_lock_release r;

	memset(&r, 0, sizeof(r));
	r.argsz = sizeof(r);
	r.mask = mask;
	return ioctl(fd, TENSTORRENT_IOCTL_LOCK_RELEASE, &r);
}

/*
 * NOC_WRITE of 8 bytes to a Tensix tile's L1 (card 0 Wormhole (1, 1), card
 * 1 Blackhole (1, 2)), then NOC_READ of 8 and of the upper 4: the 64-bit
 * fields cross the compat path whole.
 */
static void noc_io(int card)
{
	struct tenstorrent_noc_write w;
	struct tenstorrent_noc_read r;
	const uint64_t value = 0x8badf00d12345678ull ^ (uint64_t)card;
	int fd = open_card(card);

	if (fd < 0) {
		tap_fail("open card %d: %s", card, strerror(errno));
		return;
	}
	memset(&w, 0, sizeof(w));
	w.argsz = sizeof(w);
	w.x = 1;
	w.y = card == 0 ? 1 : 2;
	w.width = 8;
	w.addr = 0x41000;
	w.value = value;
	CHECK(ioctl(fd, TENSTORRENT_IOCTL_NOC_WRITE, &w) == 0, "NOC_WRITE: %s", strerror(errno));
	memset(&r, 0, sizeof(r));
	r.argsz = sizeof(r);
	r.x = w.x;
	r.y = w.y;
	r.width = 8;
	r.addr = w.addr;
	if (ioctl(fd, TENSTORRENT_IOCTL_NOC_READ, &r) < 0)
		tap_fail("NOC_READ: %s", strerror(errno));
	else
		CHECK(r.value == value, "NOC_READ of 8 bytes: %#llx", (unsigned long long)r.value);
	r.width = 4;
	r.addr = w.addr + 4;
	if (ioctl(fd, TENSTORRENT_IOCTL_NOC_READ, &r) < 0)
		tap_fail("NOC_READ: %s", strerror(errno));
	else
		CHECK(r.value == value >> 32, "NOC_READ of the upper 4 bytes: %#llx",
		      (unsigned long long)r.value);
	close(fd);
}

int main(void)
{
	struct tenstorrent_lock_acquire a;
	struct tenstorrent_lock_acquire_set s;
	struct tenstorrent_lock_query q;
	uint64_t deadline, after;
	int card, fd, other;

	for (card = 0; card < 2; card++) {
		char name[64];

		snprintf(name, sizeof(name), "GET_DRIVER_INFO card %d (32-bit)", card);
		tap_begin(name);
		driver_info(card);
		tap_end();
		snprintf(name, sizeof(name), "GET_DEVICE_INFO card %d (32-bit)", card);
		tap_begin(name);
		device_info(card);
		tap_end();
		snprintf(name, sizeof(name), "NOC_WRITE and NOC_READ card %d (32-bit)", card);
		tap_begin(name);
		noc_io(card);
		tap_end();
	}

	fd = open_card(0);
	other = open_card(0);
	if (fd < 0 || other < 0) {
		printf("Bail out! open /dev/tenstorrent/0: %s\n", strerror(errno));
		return 1;
	}
	prctl(PR_SET_NAME, "info32-holder", 0, 0, 0);

	tap_begin("ACQUIRE and QUERY (32-bit)");
	memset(&a, 0, sizeof(a));
	a.argsz = sizeof(a);
	a.index = IDX;
	a.flags = TENSTORRENT_LOCK_NONBLOCK;
	if (ioctl(fd, TENSTORRENT_IOCTL_LOCK_ACQUIRE, &a) < 0)
		tap_fail("NONBLOCK ACQUIRE of lock %d: %s", IDX, strerror(errno));
	if (query(other, IDX, &q) < 0) {
		tap_fail("QUERY: %s", strerror(errno));
	} else {
		CHECK(q.out_flags == TENSTORRENT_LOCK_QUERY_HELD, "out_flags %#x", q.out_flags);
		CHECK(q.holder_pid == (uint32_t)getpid(), "holder_pid %u, pid %d", q.holder_pid, getpid());
		CHECK(strncmp(q.holder_comm, "info32-holder", sizeof(q.holder_comm)) == 0, "holder_comm %.16s", q.holder_comm);
		CHECK(q.waiters == 0, "waiters %u", q.waiters);
		CHECK(q.spurious_wakeups == 0, "spurious_wakeups %llu",
		      (unsigned long long)q.spurious_wakeups);
	}
	if (query(fd, IDX, &q) < 0)
		tap_fail("QUERY: %s", strerror(errno));
	else
		CHECK(q.out_flags == (TENSTORRENT_LOCK_QUERY_HELD | TENSTORRENT_LOCK_QUERY_HELD_BY_CALLER),
		      "holder's out_flags %#x", q.out_flags);
	tap_end();

	tap_begin("64-bit deadline from 32-bit userspace: ETIMEDOUT, never early");
	memset(&a, 0, sizeof(a));
	a.argsz = sizeof(a);
	a.index = IDX;
	a.flags = TENSTORRENT_LOCK_DEADLINE;
	deadline = now_ns() + 30000000ull;
	a.deadline_ns = deadline;
	errno = 0;
	CHECK(ioctl(other, TENSTORRENT_IOCTL_LOCK_ACQUIRE, &a) < 0 && errno == ETIMEDOUT,
	      "DEADLINE ACQUIRE of a held lock: %s", strerror(errno));
	after = now_ns();
	CHECK(after >= deadline, "returned %llu ns before the deadline",
	      (unsigned long long)(deadline - after));
	CHECK(a.holder_pid == (uint32_t)getpid(), "holder_pid %u", a.holder_pid);
	tap_end();

	tap_begin("ACQUIRE_SET and RELEASE with 64-bit masks (32-bit)");
	memset(&s, 0, sizeof(s));
	s.argsz = sizeof(s);
	s.mask = (1ull << 63) | (1ull << IDX);
	s.flags = TENSTORRENT_LOCK_NONBLOCK;
	errno = 0;
	CHECK(ioctl(other, TENSTORRENT_IOCTL_LOCK_ACQUIRE_SET, &s) < 0 && errno == EBUSY,
	      "ACQUIRE_SET with a busy lock: %s", strerror(errno));
	CHECK(release(fd, 1ull << IDX) == 0, "RELEASE: %s", strerror(errno));
	CHECK(ioctl(other, TENSTORRENT_IOCTL_LOCK_ACQUIRE_SET, &s) == 0, "ACQUIRE_SET: %s",
	      strerror(errno));
	if (query(other, 63, &q) < 0)
		tap_fail("QUERY 63: %s", strerror(errno));
	else
		CHECK(q.out_flags & TENSTORRENT_LOCK_QUERY_HELD_BY_CALLER, "lock 63 out_flags %#x",
		      q.out_flags);
	CHECK(release(other, s.mask) == 0, "RELEASE of the set: %s", strerror(errno));
	errno = 0;
	CHECK(release(other, s.mask) < 0 && errno == EPERM, "RELEASE again: %s", strerror(errno));
	if (query(fd, 63, &q) < 0)
		tap_fail("QUERY 63: %s", strerror(errno));
	else
		CHECK(q.out_flags == 0, "lock 63 after release: out_flags %#x", q.out_flags);
	tap_end();

	close(fd);
	close(other);
	return tap_exit();
}

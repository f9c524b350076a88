/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * lockctl_compat: the LOCK_CTL semantics of the C driver, written in plain
 * C against the uapi header as an existing client would (built with
 * `gcc -static -O2 -Wall -Werror -I include/uapi`). TAP output.
 *
 * Usage: lockctl_compat [DEVICE]   (default /dev/tenstorrent/0)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/tenstorrent.h>

#include "tap.h"

#define IDX 42

/* LOCK_CTL with a full `out`: returns out.value, or -errno. */
static int lock_ctl(int fd, unsigned int index, unsigned int flags)
{
	struct tenstorrent_lock_ctl arg;

	memset(&arg, 0, sizeof(arg));
	arg.in.output_size_bytes = sizeof(arg.out);
	arg.in.flags = flags;
	arg.in.index = index;
	if (ioctl(fd, TENSTORRENT_IOCTL_LOCK_CTL, &arg) < 0)
		return -errno;
	return arg.out.value;
}

#define EXPECT(fd, index, flags, want, what)                                   \
	do {                                                                   \
		int got_ = lock_ctl(fd, index, flags);                         \
		CHECK(got_ == (want), "%s: got %d, expected %d", what, got_,   \
		      want);                                                   \
	} while (0)

static const char *dev = "/dev/tenstorrent/0";

static int xopen(void)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		printf("Bail out! open %s: %s\n", dev, strerror(errno));
		exit(1);
	}
	return fd;
}

int main(int argc, char **argv)
{
	unsigned char buf[64];
	int a, b, i, k, bad;

	if (argc > 1)
		dev = argv[1];
	a = xopen();
	b = xopen();

	tap_begin("acquire, not re-entrant, exclusive between opens");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_TEST, 0, "TEST before (lock must be free)");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_ACQUIRE, 1, "ACQUIRE of a free lock");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_ACQUIRE, 0, "ACQUIRE again, same file");
	EXPECT(b, IDX, TENSTORRENT_LOCK_CTL_ACQUIRE, 0, "ACQUIRE by another open()");
	tap_end();

	tap_begin("TEST bits from both files");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_TEST, 3, "TEST by the holder");
	EXPECT(b, IDX, TENSTORRENT_LOCK_CTL_TEST, 2, "TEST by the other file");
	tap_end();

	tap_begin("foreign release refused, lock still held");
	EXPECT(b, IDX, TENSTORRENT_LOCK_CTL_RELEASE, 0, "RELEASE by the other file");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_TEST, 3, "TEST by the holder after it");
	tap_end();

	tap_begin("release, release again");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_RELEASE, 1, "RELEASE");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_RELEASE, 0, "RELEASE again");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_TEST, 0, "TEST by the former holder");
	EXPECT(b, IDX, TENSTORRENT_LOCK_CTL_TEST, 0, "TEST by the other file");
	tap_end();

	tap_begin("all 64 locks acquired then released");
	for (i = 0; i < TENSTORRENT_LOCK_COUNT; i++)
		EXPECT(a, i, TENSTORRENT_LOCK_CTL_ACQUIRE, 1, "ACQUIRE");
	for (i = 0; i < TENSTORRENT_LOCK_COUNT; i++)
		EXPECT(b, i, TENSTORRENT_LOCK_CTL_TEST, 2, "TEST by the other file");
	for (i = 0; i < TENSTORRENT_LOCK_COUNT; i++)
		EXPECT(a, i, TENSTORRENT_LOCK_CTL_RELEASE, 1, "RELEASE");
	for (i = 0; i < TENSTORRENT_LOCK_COUNT; i++)
		EXPECT(b, i, TENSTORRENT_LOCK_CTL_TEST, 0, "TEST after release");
	tap_end();

	tap_begin("index 64 and 255: EINVAL");
	EXPECT(a, 64, TENSTORRENT_LOCK_CTL_ACQUIRE, -EINVAL, "ACQUIRE index 64");
	EXPECT(a, 255, TENSTORRENT_LOCK_CTL_ACQUIRE, -EINVAL, "ACQUIRE index 255");
	EXPECT(a, 64, TENSTORRENT_LOCK_CTL_TEST, -EINVAL, "TEST index 64");
	EXPECT(a, 255, TENSTORRENT_LOCK_CTL_RELEASE, -EINVAL, "RELEASE index 255");
	tap_end();

	tap_begin("unknown flags: EINVAL");
	EXPECT(a, IDX, 4, -EINVAL, "flags 4");
	EXPECT(a, IDX, 0xffff, -EINVAL, "flags 0xffff");
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_TEST, 0, "nothing taken");
	tap_end();

	/*
	 * output_size_bytes: out is zeroed for output_size_bytes bytes, then
	 * min(output_size_bytes, sizeof(out)) bytes of the answer are copied.
	 * Here `in` is followed by 0xAA bytes in buf.
	 */
	tap_begin("output_size_bytes rule");
	{
		static const unsigned int sizes[] = { 0, 1, 4, 16, 40 };
		unsigned int flags[] = { TENSTORRENT_LOCK_CTL_ACQUIRE, TENSTORRENT_LOCK_CTL_TEST,
					 TENSTORRENT_LOCK_CTL_RELEASE, TENSTORRENT_LOCK_CTL_TEST,
					 TENSTORRENT_LOCK_CTL_ACQUIRE };
		unsigned char answer[] = { 1, 3, 1, 0, 1 };
		struct tenstorrent_lock_ctl_in in;

		for (k = 0; k < 5; k++) {
			unsigned int n = sizes[k];

			memset(buf, 0xAA, sizeof(buf));
			memset(&in, 0, sizeof(in));
			in.output_size_bytes = n;
			in.flags = flags[k];
			in.index = IDX;
			memcpy(buf, &in, sizeof(in));
			if (ioctl(a, TENSTORRENT_IOCTL_LOCK_CTL, buf) < 0) {
				tap_fail("output_size_bytes %u: %s", n, strerror(errno));
				continue;
			}
			bad = -1;
			for (i = sizeof(in); i < (int)sizeof(buf); i++) {
				unsigned int off = i - sizeof(in);
				unsigned char want = off < n ? 0 : 0xAA;

				if (off == 0 && n > 0)
					want = answer[k];
				if (buf[i] != want) {
					bad = off;
					break;
				}
			}
			CHECK(bad < 0, "output_size_bytes %u flags %u: out byte %d wrong (0x%02x)", n,
			      flags[k], bad, bad < 0 ? 0 : buf[sizeof(in) + bad]);
		}
		/* The last ACQUIRE (40 bytes) took the lock. */
		EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_TEST, 3, "TEST after the ACQUIREs");
		EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_RELEASE, 1, "RELEASE");
	}
	tap_end();

	tap_begin("reserved bytes of in are ignored");
	{
		struct tenstorrent_lock_ctl arg;
		unsigned int seq[] = { TENSTORRENT_LOCK_CTL_ACQUIRE, TENSTORRENT_LOCK_CTL_TEST,
				       TENSTORRENT_LOCK_CTL_RELEASE };
		int want[] = { 1, 3, 1 };

		for (k = 0; k < 3; k++) {
			memset(&arg, 0, sizeof(arg));
			arg.in.output_size_bytes = sizeof(arg.out);
			arg.in.flags = seq[k];
			arg.in.index = IDX;
			arg.in.reserved[0] = 0xde;
			arg.in.reserved[1] = 0xad;
			arg.in.reserved[2] = 0xbf;
			if (ioctl(a, TENSTORRENT_IOCTL_LOCK_CTL, &arg) < 0)
				tap_fail("flags %u with garbage reserved: %s", seq[k], strerror(errno));
			else
				CHECK(arg.out.value == want[k], "flags %u: value %u, expected %d", seq[k],
				      arg.out.value, want[k]);
		}
	}
	tap_end();

	tap_begin("last close releases");
	EXPECT(b, IDX, TENSTORRENT_LOCK_CTL_ACQUIRE, 1, "ACQUIRE by the second file");
	close(b);
	EXPECT(a, IDX, TENSTORRENT_LOCK_CTL_TEST, 0, "TEST after the holder's close");
	tap_end();

	close(a);
	return tap_exit();
}

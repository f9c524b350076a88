// SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note
//
// tenstorrent/lock.hpp: header-only C++17 wrapper of tt-arbiter's lock
// commands (include/uapi/linux/tenstorrent.h), for UMD and other C++ users.
//
//   tenstorrent::Device dev = tenstorrent::Device::open(0);   // /dev/tenstorrent/0
//   tenstorrent::Lock arc(dev, TENSTORRENT_LOCK_ARC_MSG);
//   {
//       std::lock_guard<tenstorrent::Lock> guard(arc);          // blocks, FIFO
//       if (arc.owner_died())
//           reset_the_mailbox();    // previous holder died holding it
//       ...
//   }                                                           // released
//   if (arc.try_lock_for(std::chrono::milliseconds(100))) { ...; arc.unlock(); }
//
// Lock satisfies the standard Lockable and TimedLockable requirements
// (lock, try_lock, unlock, try_lock_for, try_lock_until), so std::lock_guard,
// std::unique_lock and std::scoped_lock work with it. It is not re-entrant.
//
// Locks belong to the open file description (like flock): every Lock made
// from the same Device (fd) shares the owner, dup() and fork() share it, and
// the kernel releases whatever the file still holds when its last reference
// is closed, even if the process crashed. Two Devices opened separately are
// two owners and exclude each other.
//
// Errors: std::system_error with the errno (std::generic_category()):
// EINTR (a signal handler ran during lock(); call again to go on waiting),
// ENODEV (the card is gone), EDEADLK (this file already holds the lock),
// EINVAL, EPERM (unlock of a lock not held). try_lock returns false on
// EBUSY, try_lock_for/try_lock_until false on ETIMEDOUT (at once for a
// zero or past time; also on EBUSY, which earlier modules gave then);
// holder_pid() then tells who holds the lock. Deadlines are on
// CLOCK_MONOTONIC (steady_clock); in a time namespace, the namespace's,
// which the kernel converts. A waiter stopped (SIGSTOP, freezer, ptrace)
// keeps its place in the queue.
#ifndef TENSTORRENT_LOCK_HPP
#define TENSTORRENT_LOCK_HPP

#include <linux/tenstorrent.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

namespace tenstorrent {

namespace detail {

[[noreturn]] inline void throw_errno(int err, const char *what)
{
	throw std::system_error(err, std::generic_category(), what);
}

// ioctl(2): 0 or the errno. Never retried on EINTR: for the lock commands
// it means a signal handler ran, which the caller must see.
inline int ioctl_errno(int fd, unsigned long cmd, void *arg)
{
	return ::ioctl(fd, cmd, arg) < 0 ? errno : 0;
}

// Now on CLOCK_MONOTONIC, in ns: the clock of the kernel's deadlines.
inline std::uint64_t monotonic_ns()
{
	struct timespec ts;
	::clock_gettime(CLOCK_MONOTONIC, &ts);
	return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

// CLOCK_MONOTONIC deadline `d` from now, saturating; 0 or negative: now.
template <class Rep, class Period>
inline std::uint64_t deadline_after(const std::chrono::duration<Rep, Period> &d)
{
	using std::chrono::nanoseconds;
	const std::uint64_t now = monotonic_ns();
	if (d <= d.zero())
		return now;
	// Compare as long double first: a huge duration (hours::max()) would
	// overflow nanoseconds.
	const long double ns = std::chrono::duration<long double, std::nano>(d).count();
	if (ns >= static_cast<long double>(UINT64_MAX - now))
		return UINT64_MAX;
	std::uint64_t n = std::uint64_t(std::chrono::ceil<nanoseconds>(d).count());
	return now + n;
}

} // namespace detail

// An open /dev/tenstorrent/N: the owner of the locks taken through it.
// Move-only; closes the file (releasing every lock it holds) when destroyed.
class Device {
public:
	Device() noexcept = default;
	// Takes ownership of an open device file descriptor.
	explicit Device(int fd) noexcept : fd_(fd) {}
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;
	Device(Device &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
	Device &operator=(Device &&o) noexcept
	{
		if (this != &o) {
			close();
			fd_ = std::exchange(o.fd_, -1);
		}
		return *this;
	}
	~Device() { close(); }

	// Opens `path` read-write, close-on-exec; std::system_error on failure.
	static Device open(const std::string &path)
	{
		int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
		if (fd < 0)
			detail::throw_errno(errno, ("open " + path).c_str());
		return Device(fd);
	}

	// Opens /dev/tenstorrent/N.
	static Device open(int n)
	{
		return open("/dev/tenstorrent/" + std::to_string(n));
	}

	int fd() const noexcept { return fd_; }
	explicit operator bool() const noexcept { return fd_ >= 0; }

	// Gives up ownership of the descriptor.
	int release() noexcept { return std::exchange(fd_, -1); }

	// Closes the file now: the kernel releases every lock it still holds
	// (when this was the last reference to the file).
	void close() noexcept
	{
		if (fd_ >= 0)
			::close(std::exchange(fd_, -1));
	}

	// GET_DRIVER_INFO.
	tenstorrent_get_driver_info_out driver_info() const
	{
		tenstorrent_get_driver_info arg{};
		arg.in.output_size_bytes = sizeof(arg.out);
		if (int e = detail::ioctl_errno(fd_, TENSTORRENT_IOCTL_GET_DRIVER_INFO, &arg))
			detail::throw_errno(e, "GET_DRIVER_INFO");
		return arg.out;
	}

	// GET_DEVICE_INFO.
	tenstorrent_get_device_info_out device_info() const
	{
		tenstorrent_get_device_info arg{};
		arg.in.output_size_bytes = sizeof(arg.out);
		if (int e = detail::ioctl_errno(fd_, TENSTORRENT_IOCTL_GET_DEVICE_INFO, &arg))
			detail::throw_errno(e, "GET_DEVICE_INFO");
		return arg.out;
	}

	// LOCK_QUERY of lock `index`.
	tenstorrent_lock_query query(unsigned index) const
	{
		tenstorrent_lock_query q{};
		q.argsz = sizeof(q);
		q.index = index;
		if (int e = detail::ioctl_errno(fd_, TENSTORRENT_IOCTL_LOCK_QUERY, &q))
			detail::throw_errno(e, "LOCK_QUERY");
		return q;
	}

private:
	int fd_ = -1;
};

// The locks of `mask` (bit i = lock i) on one file, taken and released
// together (ACQUIRE for one lock, ACQUIRE_SET for several: all or nothing,
// never holding some while waiting for the others). Meets Lockable and
// TimedLockable. Does not own the file descriptor; the Device (or fd) must
// outlive it. Not copyable (it carries the last acquisition's state).
class LockSet {
public:
	LockSet(int fd, std::uint64_t mask) : fd_(fd), mask_(mask)
	{
		if (mask == 0)
			detail::throw_errno(EINVAL, "tenstorrent::LockSet: empty mask");
	}
	LockSet(const Device &dev, std::uint64_t mask) : LockSet(dev.fd(), mask) {}
	LockSet(int fd, std::initializer_list<unsigned> indices) : LockSet(fd, mask_of(indices)) {}
	LockSet(const Device &dev, std::initializer_list<unsigned> indices)
		: LockSet(dev.fd(), mask_of(indices))
	{
	}
	LockSet(const LockSet &) = delete;
	LockSet &operator=(const LockSet &) = delete;

	// Blocks until every lock is granted. std::system_error on EINTR,
	// ENODEV, EDEADLK, EINVAL.
	void lock()
	{
		int e = acquire(0, 0);
		if (e)
			detail::throw_errno(e, "tenstorrent lock");
	}

	// Takes the locks if free and nobody is queued that may not be passed
	// (only pollers under the hand-off bound may be); false if busy
	// (holder_pid() says who holds the first busy one). A try that fails
	// while others are queued holds a place for a short lease (20 ms),
	// renewed by the next try: a polling caller is served in its turn.
	bool try_lock()
	{
		int e = acquire(TENSTORRENT_LOCK_NONBLOCK, 0);
		if (e == EBUSY)
			return false;
		if (e)
			detail::throw_errno(e, "tenstorrent try_lock");
		return true;
	}

	// Waits at most `d` (never returns false before it has passed).
	template <class Rep, class Period>
	bool try_lock_for(const std::chrono::duration<Rep, Period> &d)
	{
		return try_lock_until_ns(detail::deadline_after(d));
	}

	// Waits until `t`. steady_clock is CLOCK_MONOTONIC on Linux, used as
	// is; any other clock is converted to a duration from now.
	template <class Clock, class Duration>
	bool try_lock_until(const std::chrono::time_point<Clock, Duration> &t)
	{
		if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
			auto ns = std::chrono::ceil<std::chrono::nanoseconds>(t.time_since_epoch()).count();
			return try_lock_until_ns(ns < 0 ? 0 : std::uint64_t(ns));
		} else {
			return try_lock_for(t - Clock::now());
		}
	}

	// Absolute CLOCK_MONOTONIC deadline in ns.
	bool try_lock_until_ns(std::uint64_t deadline_ns)
	{
		int e = acquire(TENSTORRENT_LOCK_DEADLINE, deadline_ns);
		if (e == ETIMEDOUT || e == EBUSY)
			return false;
		if (e)
			detail::throw_errno(e, "tenstorrent try_lock_for");
		return true;
	}

	// Releases every lock of the set. std::system_error(EPERM) if this file
	// does not hold them all (then none is released).
	void unlock()
	{
		tenstorrent_lock_release r{};
		r.argsz = sizeof(r);
		r.mask = mask_;
		if (int e = detail::ioctl_errno(fd_, TENSTORRENT_IOCTL_LOCK_RELEASE, &r))
			detail::throw_errno(e, "tenstorrent unlock");
	}

	// After an acquisition: whether the previous holder of any of the locks
	// died holding it (its file closed: exit, crash, SIGKILL), so the state
	// the lock protects may be half-updated.
	bool owner_died() const noexcept { return owner_died_mask_ != 0; }
	std::uint64_t owner_died_mask() const noexcept { return owner_died_mask_; }
	// After a failed try: the holder's pid (0 if none or not visible).
	std::uint32_t holder_pid() const noexcept { return holder_pid_; }
	// After an acquisition: how long it waited.
	std::chrono::nanoseconds waited() const noexcept { return std::chrono::nanoseconds(waited_ns_); }
	std::uint64_t mask() const noexcept { return mask_; }
	int fd() const noexcept { return fd_; }

	static std::uint64_t mask_of(std::initializer_list<unsigned> indices)
	{
		std::uint64_t m = 0;
		for (unsigned i : indices) {
			if (i >= TENSTORRENT_LOCK_COUNT)
				detail::throw_errno(EINVAL, "tenstorrent lock index >= 64");
			m |= std::uint64_t(1) << i;
		}
		return m;
	}

private:
	// Returns 0 or the errno; records owner-died, holder and wait time.
	int acquire(std::uint32_t flags, std::uint64_t deadline_ns)
	{
		owner_died_mask_ = 0;
		holder_pid_ = 0;
		waited_ns_ = 0;
		if ((mask_ & (mask_ - 1)) == 0) {
			tenstorrent_lock_acquire a{};
			a.argsz = sizeof(a);
			a.flags = flags;
			a.index = unsigned(__builtin_ctzll(mask_));
			a.deadline_ns = deadline_ns;
			int e = detail::ioctl_errno(fd_, TENSTORRENT_IOCTL_LOCK_ACQUIRE, &a);
			holder_pid_ = a.holder_pid;
			if (e == 0) {
				owner_died_mask_ = (a.out_flags & TENSTORRENT_LOCK_OWNER_DIED) ? mask_ : 0;
				waited_ns_ = a.waited_ns;
			}
			return e;
		}
		tenstorrent_lock_acquire_set s{};
		s.argsz = sizeof(s);
		s.flags = flags;
		s.mask = mask_;
		s.deadline_ns = deadline_ns;
		int e = detail::ioctl_errno(fd_, TENSTORRENT_IOCTL_LOCK_ACQUIRE_SET, &s);
		holder_pid_ = s.holder_pid;
		if (e == 0) {
			owner_died_mask_ = s.owner_died_mask;
			waited_ns_ = s.waited_ns;
		}
		return e;
	}

	int fd_;
	std::uint64_t mask_;
	std::uint64_t owner_died_mask_ = 0;
	std::uint64_t waited_ns_ = 0;
	std::uint32_t holder_pid_ = 0;
};

// One lock of a card: tenstorrent::Lock(dev_or_fd, TENSTORRENT_LOCK_ARC_MSG).
// Two Locks are needed for std::scoped_lock(a, b); for several locks at
// once without std::lock's try-and-back-off loop, prefer one LockSet.
class Lock : public LockSet {
public:
	Lock(int fd, unsigned index) : LockSet(fd, mask_of({index})), index_(index) {}
	Lock(const Device &dev, unsigned index) : Lock(dev.fd(), index) {}

	unsigned index() const noexcept { return index_; }

private:
	unsigned index_;
};

} // namespace tenstorrent

#endif // TENSTORRENT_LOCK_HPP

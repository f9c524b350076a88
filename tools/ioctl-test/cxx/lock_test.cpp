// SPDX-License-Identifier: GPL-2.0-only
//
// The C++ wrapper include/tenstorrent/lock.hpp against the driver, in the
// test VM: std::lock_guard, std::scoped_lock, try_lock, try_lock_for,
// owner_died after a holder is killed, errors as std::system_error.
// Prints TAP; exit status 1 if any test failed.
//
// Built by tools/check with
//   g++ -std=c++17 -static -O2 -Wall -Werror -I include/uapi -I include
#include <tenstorrent/lock.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../c/tap.h"

using namespace std::chrono_literals;
using tenstorrent::Device;
using tenstorrent::Lock;
using tenstorrent::LockSet;

namespace {

// Lock indices of this program (the Rust scenarios use others too, but the
// programs run one after the other).
constexpr unsigned A = 40, B = 41, C = 42, D = 43;

bool held_by(const Device &dev, unsigned i)
{
	return dev.query(i).out_flags & TENSTORRENT_LOCK_QUERY_HELD_BY_CALLER;
}

bool held(const Device &dev, unsigned i)
{
	return dev.query(i).out_flags & TENSTORRENT_LOCK_QUERY_HELD;
}

// Runs one test: exceptions are failures.
void test(const char *name, const std::function<void()> &body)
{
	tap_begin(name);
	try {
		body();
	} catch (const std::system_error &e) {
		tap_fail("std::system_error: %s (errno %d)", e.what(), e.code().value());
	} catch (const std::exception &e) {
		tap_fail("exception: %s", e.what());
	}
	tap_end();
}

// errno of the std::system_error `f` throws, or 0.
int thrown_errno(const std::function<void()> &f)
{
	try {
		f();
	} catch (const std::system_error &e) {
		return e.code().value();
	}
	return 0;
}

double ms_since(std::chrono::steady_clock::time_point t)
{
	return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

} // namespace

int main()
{
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	std::printf("1..8\n");

	test("open and info (the uapi header as C++)", [] {
		Device dev = Device::open(0u);
		CHECK(bool(dev), "no fd");
		auto drv = dev.driver_info();
		CHECK(drv.driver_version == TENSTORRENT_DRIVER_API_VERSION, "driver_version %u",
		      drv.driver_version);
		auto info = dev.device_info();
		CHECK(info.output_size_bytes == sizeof(info), "device_info output_size_bytes %u",
		      info.output_size_bytes);
		int e = thrown_errno([] { Device::open("/dev/tenstorrent/999"); });
		CHECK(e == ENOENT, "open of a missing node: errno %d", e);
	});

	test("std::lock_guard holds the lock for its scope", [] {
		Device dev = Device::open(0u);
		Lock a(dev, A);
		CHECK(!held(dev, A), "lock %u not free at start", A);
		{
			std::lock_guard<Lock> g(a);
			CHECK(held_by(dev, A), "not held inside the lock_guard");
			CHECK(!a.owner_died(), "owner_died on a fresh lock");
		}
		CHECK(!held(dev, A), "still held after the lock_guard");
		{
			std::unique_lock<Lock> u(a, 1s);
			CHECK(u.owns_lock(), "unique_lock with a timeout did not get a free lock");
		}
		CHECK(!held(dev, A), "still held after the unique_lock");
	});

	test("std::scoped_lock of two locks", [] {
		Device dev = Device::open(0u);
		Lock a(dev, A), b(dev, B);
		{
			std::scoped_lock g(a, b);
			CHECK(held_by(dev, A) && held_by(dev, B), "not both held in the scoped_lock");
		}
		CHECK(!held(dev, A) && !held(dev, B), "held after the scoped_lock");
		LockSet set(dev, {A, B, C});
		{
			std::lock_guard<LockSet> g(set);
			CHECK(held_by(dev, A) && held_by(dev, B) && held_by(dev, C),
			      "LockSet: not all held");
		}
		CHECK(!held(dev, A) && !held(dev, B) && !held(dev, C), "LockSet: held after");
	});

	test("try_lock is false while another file holds the lock", [] {
		Device one = Device::open(0u), two = Device::open(0u);
		Lock mine(one, C), theirs(two, C);
		std::lock_guard<Lock> g(mine);
		CHECK(!theirs.try_lock(), "try_lock from another file succeeded");
		CHECK(theirs.holder_pid() == std::uint32_t(getpid()), "holder_pid %u, expected %d",
		      theirs.holder_pid(), getpid());
		LockSet set(two, {B, C});
		CHECK(!set.try_lock(), "LockSet try_lock with one busy lock succeeded");
		CHECK(!held(two, B), "LockSet took lock %u although %u was busy", B, C);
	});

	test("try_lock_for times out, never early", [] {
		Device one = Device::open(0u), two = Device::open(0u);
		Lock mine(one, C), theirs(two, C);
		std::lock_guard<Lock> g(mine);
		auto t = std::chrono::steady_clock::now();
		bool got = theirs.try_lock_for(50ms);
		double ms = ms_since(t);
		CHECK(!got, "try_lock_for got a held lock");
		CHECK(ms >= 50.0, "gave up after %.3f ms, before 50 ms", ms);
		CHECK(theirs.holder_pid() == std::uint32_t(getpid()), "holder_pid %u",
		      theirs.holder_pid());
		CHECK(!theirs.try_lock_until(std::chrono::steady_clock::now() + 10ms),
		      "try_lock_until got a held lock");
		CHECK(!theirs.try_lock_for(0ms), "try_lock_for(0) got a held lock");
	});

	test("owner_died after the holder is killed with SIGKILL", [] {
		int p[2];
		if (pipe(p) != 0) {
			tap_fail("pipe: %s", strerror(errno));
			return;
		}
		std::fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			close(p[0]);
			try {
				Device dev = Device::open(0u);
				Lock d(dev, D);
				d.lock();
				(void)!write(p[1], "L", 1);
				for (;;)
					pause();
			} catch (...) {
				_exit(2);
			}
		}
		close(p[1]);
		char c = 0;
		ssize_t n = read(p[0], &c, 1);
		close(p[0]);
		CHECK(n == 1 && c == 'L', "the child did not take the lock");
		Device dev = Device::open(0u);
		CHECK(dev.query(D).holder_pid == std::uint32_t(pid), "holder %u, child %d",
		      dev.query(D).holder_pid, pid);
		kill(pid, SIGKILL);
		int status = 0;
		waitpid(pid, &status, 0);
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %#x", status);
		Lock d(dev, D);
		{
			std::lock_guard<Lock> g(d);
			CHECK(d.owner_died(), "owner_died() false after the holder was killed");
			CHECK(d.owner_died_mask() == (std::uint64_t(1) << D), "owner_died_mask %#llx",
			      (unsigned long long)d.owner_died_mask());
		}
		{
			std::lock_guard<Lock> g(d);
			CHECK(!d.owner_died(), "owner_died() still true after a clean release");
		}
	});

	test("errors are std::system_error with the errno", [] {
		Device dev = Device::open(0u);
		Lock a(dev, A);
		int e = thrown_errno([&] { a.unlock(); });
		CHECK(e == EPERM, "unlock of a lock not held: errno %d", e);
		std::lock_guard<Lock> g(a);
		Lock again(dev, A);
		e = thrown_errno([&] { again.lock(); });
		CHECK(e == EDEADLK, "lock of a lock this file holds: errno %d", e);
		e = thrown_errno([&] { Lock bad(dev, 64); });
		CHECK(e == EINVAL, "Lock(dev, 64): errno %d", e);
	});

	test("closing the Device releases its locks", [] {
		Device watcher = Device::open(0u);
		{
			Device dev = Device::open(0u);
			Lock b(dev, B);
			b.lock(); // never unlocked: the close releases it
			CHECK(held(watcher, B), "not held after lock()");
		}
		CHECK(!held(watcher, B), "still held after the Device was destroyed");
		Lock b(watcher, B);
		CHECK(b.try_lock(), "try_lock after the close failed");
		CHECK(b.owner_died(), "closing the file while holding the lock is an owner death");
		b.unlock();
	});

	return tap_exit();
}

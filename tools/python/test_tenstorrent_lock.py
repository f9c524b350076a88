#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Tests of tenstorrent_lock.py, printing TAP (standard library only).

    test_tenstorrent_lock.py --host   pure logic: layouts, ioctl numbers,
                                      errors, deadlines, enumeration on a
                                      fake tree (checked against the C header
                                      when a C compiler is found)
    test_tenstorrent_lock.py --vm     the above plus the module's behaviour
                                      on /dev/tenstorrent/0 (the test VM);
                                      fails if there is no device

Exit status 1 if any test failed.
"""

import errno
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tenstorrent_lock as tt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
UAPI = os.path.normpath(os.path.join(HERE, "..", "..", "include", "uapi"))
PATIENCE = 30.0  # seconds: a hang detector, never a pass criterion


class Pure(unittest.TestCase):
    """No device needed."""

    def test_struct_sizes(self):
        sizes = {
            tt.GET_DEVICE_INFO_FMT: 24, tt.GET_DRIVER_INFO_FMT: 16, tt.LOCK_CTL_FMT: 16,
            tt.LOCK_ACQUIRE_FMT: 40, tt.LOCK_ACQUIRE_SET_FMT: 48, tt.LOCK_RELEASE_FMT: 16,
            tt.LOCK_QUERY_FMT: 80,
        }
        for fmt, size in sizes.items():
            self.assertEqual(struct.calcsize(fmt), size, fmt)

    def test_ioctl_numbers(self):
        self.assertEqual(tt.IOCTL_GET_DEVICE_INFO, 0xFA00)
        self.assertEqual(tt.IOCTL_GET_DRIVER_INFO, 0xFA05)
        self.assertEqual(tt.IOCTL_LOCK_CTL, 0xFA08)
        self.assertEqual(tt.IOCTL_LOCK_ACQUIRE, 0xC028FA40)
        self.assertEqual(tt.IOCTL_LOCK_ACQUIRE_SET, 0xC030FA41)
        self.assertEqual(tt.IOCTL_LOCK_RELEASE, 0xC010FA42)
        self.assertEqual(tt.IOCTL_LOCK_QUERY, 0xC050FA43)

    def test_against_the_c_header(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        header = os.path.join(UAPI, "linux", "tenstorrent.h")
        if not cc or not os.path.exists(header):
            self.skipTest("no C compiler or no header")
        checks = [
            ("sizeof(struct tenstorrent_get_device_info)", struct.calcsize(tt.GET_DEVICE_INFO_FMT)),
            ("sizeof(struct tenstorrent_get_driver_info)", struct.calcsize(tt.GET_DRIVER_INFO_FMT)),
            ("sizeof(struct tenstorrent_lock_ctl)", struct.calcsize(tt.LOCK_CTL_FMT)),
            ("sizeof(struct tenstorrent_lock_acquire)", struct.calcsize(tt.LOCK_ACQUIRE_FMT)),
            ("sizeof(struct tenstorrent_lock_acquire_set)",
             struct.calcsize(tt.LOCK_ACQUIRE_SET_FMT)),
            ("sizeof(struct tenstorrent_lock_release)", struct.calcsize(tt.LOCK_RELEASE_FMT)),
            ("sizeof(struct tenstorrent_lock_query)", struct.calcsize(tt.LOCK_QUERY_FMT)),
            ("offsetof(struct tenstorrent_lock_acquire, holder_pid)", 28),
            ("offsetof(struct tenstorrent_lock_acquire_set, holder_pid)", 40),
            ("offsetof(struct tenstorrent_lock_query, holder_comm)", 32),
            ("TENSTORRENT_IOCTL_GET_DEVICE_INFO", tt.IOCTL_GET_DEVICE_INFO),
            ("TENSTORRENT_IOCTL_GET_DRIVER_INFO", tt.IOCTL_GET_DRIVER_INFO),
            ("TENSTORRENT_IOCTL_LOCK_CTL", tt.IOCTL_LOCK_CTL),
            ("TENSTORRENT_IOCTL_LOCK_ACQUIRE", tt.IOCTL_LOCK_ACQUIRE),
            ("TENSTORRENT_IOCTL_LOCK_ACQUIRE_SET", tt.IOCTL_LOCK_ACQUIRE_SET),
            ("TENSTORRENT_IOCTL_LOCK_RELEASE", tt.IOCTL_LOCK_RELEASE),
            ("TENSTORRENT_IOCTL_LOCK_QUERY", tt.IOCTL_LOCK_QUERY),
            ("TENSTORRENT_LOCK_COUNT", tt.LOCK_COUNT),
            ("TENSTORRENT_LOCK_NONBLOCK", tt.LOCK_NONBLOCK),
            ("TENSTORRENT_LOCK_DEADLINE", tt.LOCK_DEADLINE),
            ("TENSTORRENT_LOCK_OWNER_DIED", tt.LOCK_OWNER_DIED),
            ("TENSTORRENT_LOCK_QUERY_HELD", tt.LOCK_QUERY_HELD),
            ("TENSTORRENT_LOCK_QUERY_HELD_BY_CALLER", tt.LOCK_QUERY_HELD_BY_CALLER),
            ("TENSTORRENT_LOCK_QUERY_OWNER_DIED", tt.LOCK_QUERY_OWNER_DIED),
            ("TENSTORRENT_LOCK_CTL_ACQUIRE_BLOCKING", tt.LOCK_CTL_ACQUIRE_BLOCKING),
            ("TENSTORRENT_DRIVER_API_VERSION", tt.DRIVER_API_VERSION),
            ("TENSTORRENT_LOCK_ARC_MSG", tt.ARC_MSG),
            ("TENSTORRENT_LOCK_PCIE_DMA", tt.PCIE_DMA),
        ]
        src = "#include <stdio.h>\n#include <stddef.h>\n#include <linux/tenstorrent.h>\n"
        src += "int main(void)\n{\n"
        for expr, _ in checks:
            src += '\tprintf("%%llu\\n", (unsigned long long)(%s));\n' % expr
        src += "\treturn 0;\n}\n"
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "t.c"), "w") as f:
                f.write(src)
            subprocess.run([cc, "-I", UAPI, "-o", os.path.join(d, "t"), os.path.join(d, "t.c")],
                           check=True)
            out = subprocess.run([os.path.join(d, "t")], check=True, stdout=subprocess.PIPE)
        got = [int(x) for x in out.stdout.split()]
        for (expr, want), value in zip(checks, got):
            self.assertEqual(value, want, expr)

    def test_lock_names(self):
        self.assertEqual(len(tt.LOCK_NAMES), 22)
        self.assertEqual(tt.lock_name(0), "ETH00")
        self.assertEqual(tt.lock_name(15), "ETH15")
        self.assertEqual(tt.lock_name(tt.ARC_MSG), "ARC_MSG")
        self.assertEqual(tt.lock_name(tt.PCIE_DMA), "PCIE_DMA")
        self.assertIsNone(tt.lock_name(22))
        for i, name in enumerate(tt.LOCK_NAMES):
            self.assertEqual(tt.lock_index(name), i)
        self.assertEqual(tt.lock_index(63), 63)
        self.assertEqual(tt.eth(3), 3)
        with self.assertRaises(tt.Invalid):
            tt.lock_index(64)
        with self.assertRaises(tt.Invalid):
            tt.lock_index("NOPE")
        with self.assertRaises(TypeError):
            tt.lock_index(1.0)

    def test_masks(self):
        self.assertEqual(tt.mask_of([0, "ARC_MSG", 63, 0]), 1 | 1 << 16 | 1 << 63)
        self.assertEqual(tt.indices_of(1 | 1 << 16 | 1 << 63), [0, 16, 63])
        with self.assertRaises(tt.Invalid):
            tt.mask_of([])

    def test_errors(self):
        cases = [(errno.EBUSY, tt.Busy), (errno.ETIMEDOUT, tt.Timeout),
                 (errno.EINTR, tt.Interrupted), (errno.EDEADLK, tt.Deadlock),
                 (errno.EPERM, tt.NotHeld), (errno.ENODEV, tt.DeviceGone),
                 (errno.EINVAL, tt.Invalid), (errno.EFAULT, tt.Error)]
        for err, cls in cases:
            e = tt.error_from_errno(err, 42)
            self.assertIs(type(e), cls)
            self.assertIsInstance(e, OSError)
            self.assertEqual(e.errno, err)
        self.assertEqual(tt.error_from_errno(errno.EBUSY, 42).holder_pid, 42)
        self.assertEqual(tt.error_from_errno(errno.ETIMEDOUT, 7).holder_pid, 7)
        self.assertIn("pid 42", str(tt.error_from_errno(errno.EBUSY, 42)))
        self.assertIsInstance(tt.Timeout(), TimeoutError)
        self.assertIsInstance(tt.Interrupted(), InterruptedError)

    def test_wait_args(self):
        self.assertEqual(tt.wait_args(), (0, 0))
        self.assertEqual(tt.wait_args(blocking=False), (tt.LOCK_NONBLOCK, 0))
        self.assertEqual(tt.wait_args(0.5, now_ns=1000), (tt.LOCK_DEADLINE, 500001000))
        self.assertEqual(tt.wait_args(0, now_ns=1000), (tt.LOCK_DEADLINE, 1000))
        self.assertEqual(tt.wait_args(-1, now_ns=1000), (tt.LOCK_DEADLINE, 1000))
        self.assertEqual(tt.wait_args(1e30, now_ns=1000), (tt.LOCK_DEADLINE, (1 << 64) - 1))
        with self.assertRaises(ValueError):
            tt.wait_args(1.0, blocking=False)
        a = tt.monotonic_ns()
        self.assertLessEqual(a, tt.monotonic_ns())

    def test_bdf_and_query_unpacking(self):
        self.assertEqual(tt.bdf_string(0, 0x0010), "0000:00:02.0")
        self.assertEqual(tt.bdf_string(1, 0xff0f), "0001:ff:01.7")
        buf = struct.pack(tt.LOCK_QUERY_FMT, 80, 0, 16, 7, 1234, 2, 99, b"umd\0junk",
                          5, 4, 3, 0)
        q = tt.unpack_query(16, buf)
        self.assertEqual((q.name, q.held, q.held_by_caller, q.owner_died), ("ARC_MSG", True,
                                                                           True, True))
        self.assertEqual((q.holder_pid, q.holder_comm, q.waiters, q.held_ns),
                         (1234, "umd", 2, 99))
        self.assertEqual((q.acquisitions, q.contended, q.owner_died_count), (5, 4, 3))

    def test_enumerate_fake_tree(self):
        # /dev/null stands in for a char device node: its number is known.
        st = os.stat("/dev/null")
        dev = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        with tempfile.TemporaryDirectory() as d:
            devdir, cls = os.path.join(d, "dev"), os.path.join(d, "class")
            os.makedirs(devdir)
            for n, number in [(0, dev), (1, dev), (2, "1:99"), (10, dev)]:
                os.symlink("/dev/null", os.path.join(devdir, str(n)))
                c = os.path.join(cls, "tenstorrent!%d" % n)
                os.makedirs(c)
                with open(os.path.join(c, "dev"), "w") as f:
                    f.write(number + "\n")
            os.symlink("/sys/devices/pci0000:00/0000:00:02.0",
                       os.path.join(cls, "tenstorrent!0", "device"))
            os.symlink("/dev/null", os.path.join(devdir, "3"))   # no sysfs entry
            open(os.path.join(devdir, "4"), "w").close()        # not a char device
            os.symlink("/dev/null", os.path.join(devdir, "x"))   # not a number
            nodes = tt.enumerate_devices(devdir, cls)
            self.assertEqual([n.index for n in nodes], [0, 1, 10])
            self.assertEqual(nodes[0].bdf, "0000:00:02.0")
            self.assertIsNone(nodes[1].bdf)
            self.assertEqual(tt.enumerate_devices(os.path.join(d, "none"), cls), [])

    def test_open_missing(self):
        with self.assertRaises(FileNotFoundError):
            tt.Device("/nonexistent/tenstorrent/0")


# ---- against the driver (the test VM) -----------------------------------------------


def fork_child(body):
    """Forks a child running ``body(write_fd)``; returns (pid, read_fd)."""
    r, w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            body(w)
        except BaseException as e:  # noqa: BLE001 - report anything
            os.write(w, ("ERR %r\n" % (e,)).encode())
            code = 1
        os._exit(code)
    os.close(w)
    return pid, r


def read_line(fd, timeout=PATIENCE):
    import select
    data = b""
    end = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError("no answer from the child within %.0f s" % timeout)
        chunk = os.read(fd, 1)
        if not chunk:
            raise AssertionError("child closed its pipe after %r" % data)
        data += chunk
    return data.decode().strip()


def wait_for(cond, what):
    end = time.monotonic() + PATIENCE
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("%s not reached within %.0f s" % (what, PATIENCE))
        time.sleep(0.001)


class OnDevice(unittest.TestCase):
    """Needs /dev/tenstorrent/0 and /dev/tenstorrent/1 (the test VM)."""

    def setUp(self):
        if not os.path.exists("/dev/tenstorrent/0"):
            self.skipTest("no /dev/tenstorrent/0")
        self.dev = tt.Device(0)
        self.children = []

    def tearDown(self):
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.dev.close()

    def assertFree(self, *locks):
        for i in locks:
            q = self.dev.query(i)
            self.assertFalse(q.held or q.waiters, "lock %d not free: %r" % (i, q))

    def test_info(self):
        info = self.dev.driver_info()
        self.assertEqual(info.api_version, tt.DRIVER_API_VERSION)
        with open("/sys/module/tenstorrent/version") as f:
            self.assertEqual(info.version, f.read().strip())
        d = self.dev.device_info()
        with open("/sys/class/tenstorrent/tenstorrent!0/device/vendor") as f:
            self.assertEqual(d.vendor_id, int(f.read(), 16))
        with open("/sys/class/tenstorrent/tenstorrent!0/device/device") as f:
            self.assertEqual(d.device_id, int(f.read(), 16))
        bdf = os.path.basename(os.readlink("/sys/class/tenstorrent/tenstorrent!0/device"))
        self.assertEqual(d.bdf, bdf)

    def test_enumerate(self):
        nodes = tt.enumerate_devices()
        self.assertEqual([n.index for n in nodes], [0, 1])
        self.assertEqual(nodes[0].path, "/dev/tenstorrent/0")
        self.assertEqual(nodes[0].bdf, self.dev.device_info().bdf)

    def test_context_manager_releases(self):
        self.assertFree(57)
        with self.dev.lock(57) as held:
            self.assertTrue(self.dev.query(57).held_by_caller)
            self.assertFalse(held.owner_died)
            self.assertEqual(held.indices, [57])
        self.assertFree(57)
        with self.dev.try_lock(57):
            self.assertTrue(self.dev.query(57).held_by_caller)
        with self.dev.lock(57, timeout=5):
            self.assertTrue(self.dev.query(57).held_by_caller)
        self.assertFree(57)
        g = self.dev.lock(57)
        g.release()
        g.release()  # idempotent
        self.assertFree(57)
        with self.dev.lock("ARC_MSG") as held:
            self.assertEqual(self.dev.query(tt.ARC_MSG).holder_pid, os.getpid())
            self.assertEqual(self.dev.query("ARC_MSG").name, "ARC_MSG")
        self.assertFree(tt.ARC_MSG)

    def test_busy_timeout_from_another_file(self):
        with tt.Device(0) as other, other.lock(58):
            with self.assertRaises(tt.Busy) as cm:
                self.dev.try_lock(58)
            self.assertEqual(cm.exception.holder_pid, os.getpid())
            with self.assertRaises(tt.Busy):
                self.dev.lock(58, blocking=False)
            # A timeout already over is a deadline, not a try: Timeout.
            with self.assertRaises(tt.Timeout) as cm:
                self.dev.lock(58, timeout=0)
            self.assertEqual(cm.exception.holder_pid, os.getpid())
            start = time.monotonic()
            with self.assertRaises(tt.Timeout) as cm:
                self.dev.lock(58, timeout=0.05)
            self.assertGreaterEqual(time.monotonic() - start, 0.05)
            self.assertEqual(cm.exception.holder_pid, os.getpid())
        self.assertFree(58)

    def test_deadlock_notheld_invalid(self):
        with self.dev.lock(59):
            with self.assertRaises(tt.Deadlock):
                self.dev.lock(59)
        with self.assertRaises(tt.NotHeld):
            self.dev.release([59])
        with self.assertRaises(tt.Invalid):
            self.dev.lock(64)
        self.assertFree(59)

    def test_owner_died_after_sigkill(self):
        self.assertFree(60)

        def holder(w):
            d = tt.Device(0)
            d.lock(60)
            os.write(w, b"held\n")
            while True:
                time.sleep(60)

        pid, r = fork_child(holder)
        self.children.append(pid)
        self.assertEqual(read_line(r), "held")
        os.close(r)
        self.assertEqual(self.dev.query(60).holder_pid, pid)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        self.assertTrue(self.dev.query(60).owner_died)
        with self.dev.lock(60) as held:
            self.assertTrue(held.owner_died)
            self.assertEqual(held.owner_died_mask, 1 << 60)
        with self.dev.lock(60) as held:
            self.assertFalse(held.owner_died)
        self.assertFree(60)

    def test_lock_many_all_or_nothing(self):
        locks = [61, 62, 63]
        self.assertFree(*locks)
        with tt.Device(0) as other:
            g = other.lock(62)
            with self.assertRaises(tt.Busy):
                self.dev.lock_many(locks, blocking=False)
            with self.assertRaises(tt.Timeout):
                self.dev.lock_many(locks, timeout=0.02)
            self.assertFree(61, 63)

            def waiter(w):
                d = tt.Device(0)
                with d.lock_many(locks) as held:
                    os.write(w, ("got %x\n" % held.mask).encode())

            pid, r = fork_child(waiter)
            self.children.append(pid)
            wait_for(lambda: self.dev.query(62).waiters == 1, "a waiter on lock 62")
            self.assertFalse(self.dev.query(61).held or self.dev.query(63).held,
                             "lock_many holds some locks while waiting")
            g.release()
            self.assertEqual(read_line(r), "got %x" % tt.mask_of(locks))
            os.close(r)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(status, 0)
        self.assertFree(*locks)
        with self.dev.lock_many(locks) as held:
            self.assertEqual(held.indices, locks)
            for i in locks:
                self.assertTrue(self.dev.query(i).held_by_caller)
        self.assertFree(*locks)

    def test_interrupted(self):
        self.assertFree(56)
        g = self.dev.lock(56)

        def waiter(w):
            signal.signal(signal.SIGUSR1, lambda *a: None)
            d = tt.Device(0)
            os.write(w, b"ready\n")
            try:
                d.lock(56)
                os.write(w, b"granted\n")
            except tt.Interrupted:
                os.write(w, b"interrupted\n")

        pid, r = fork_child(waiter)
        self.children.append(pid)
        self.assertEqual(read_line(r), "ready")
        wait_for(lambda: self.dev.query(56).waiters == 1, "a waiter on lock 56")
        os.kill(pid, signal.SIGUSR1)
        self.assertEqual(read_line(r), "interrupted")
        os.close(r)
        os.waitpid(pid, 0)
        self.assertEqual(self.dev.query(56).waiters, 0)
        self.assertTrue(self.dev.query(56).held_by_caller)
        g.release()
        self.assertFree(56)

    def test_close_releases_and_lock_ctl(self):
        self.assertFree(55)
        d = tt.Device(0)
        d.lock(55)
        d.close()
        self.assertFalse(self.dev.query(55).held)
        self.assertEqual(self.dev.lock_ctl(55, tt.LOCK_CTL_ACQUIRE), 1)
        self.assertEqual(self.dev.lock_ctl(55, tt.LOCK_CTL_TEST), 3)
        self.assertEqual(self.dev.lock_ctl(55, tt.LOCK_CTL_RELEASE), 1)
        self.assertEqual(self.dev.lock_ctl(55, tt.LOCK_CTL_RELEASE), 0)
        self.assertFree(55)


# ---- a tiny TAP runner ------------------------------------------------------------------


class TapResult(unittest.TestResult):
    def __init__(self, require_device):
        super().__init__()
        self.n = 0
        self.failed_count = 0
        self.require_device = require_device

    def _line(self, ok, test, extra="", diag=None):
        self.n += 1
        name = "%s.%s" % (type(test).__name__, test._testMethodName)
        print("%sok %d - %s%s" % ("" if ok else "not ", self.n, name, extra))
        if diag:
            for line in diag.rstrip().splitlines():
                print("# " + line)
        sys.stdout.flush()

    def addSuccess(self, test):
        self._line(True, test)

    def addFailure(self, test, err):
        self.failed_count += 1
        self._line(False, test, diag=self._exc_info_to_string(err, test))

    addError = addFailure

    def addSkip(self, test, reason):
        if self.require_device and isinstance(test, OnDevice):
            self.failed_count += 1
            self._line(False, test, diag="skipped but --vm requires the device: " + reason)
        else:
            self._line(True, test, " # SKIP " + reason)


def main(argv):
    mode = argv[1] if len(argv) > 1 else "--all"
    if mode not in ("--host", "--vm", "--all"):
        print(__doc__, file=sys.stderr)
        return 2
    loader = unittest.TestLoader()
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(Pure)])
    if mode != "--host":
        suite.addTests(loader.loadTestsFromTestCase(OnDevice))
    print("1..%d" % suite.countTestCases())
    result = TapResult(require_device=(mode == "--vm"))
    suite.run(result)
    print("# summary: %d ok, %d not ok" % (result.n - result.failed_count, result.failed_count))
    return 1 if result.failed_count else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

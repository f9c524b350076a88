# SPDX-License-Identifier: GPL-2.0-only
"""Locks of the tt-arbiter (``tenstorrent``) kernel module, from Python.

Pure Python, standard library only (``fcntl.ioctl`` and ``struct``): copy
this one file next to your tool (tt-smi, a script) or onto ``sys.path``.
Linux only; Python 3.8 or later.

    import tenstorrent_lock as tt

    with tt.Device(0) as dev:                       # /dev/tenstorrent/0
        print(dev.driver_info().version, dev.device_info().bdf)
        with dev.lock(tt.ARC_MSG, timeout=2.0) as held:
            if held.owner_died:
                ...  # the previous holder died holding it: reset the mailbox
            ...      # talk to the ARC firmware
        try:
            with dev.try_lock("CHIP_IN_USE"):
                ...
        except tt.Busy as e:
            print("in use by pid", e.holder_pid)

Locks belong to the open file (the :class:`Device`), like ``flock``: the
kernel releases whatever it still holds when the last reference to the file
is closed, even if the process was killed. A ``Device`` shared across
``os.fork()`` shares its locks; open one ``Device`` per independent owner.

Errors are :class:`Error` subclasses (all ``OSError`` with the errno):
:class:`Busy` and :class:`Timeout` (with ``holder_pid``),
:class:`Interrupted`, :class:`Deadlock`, :class:`NotHeld`,
:class:`DeviceGone`, :class:`Invalid`; the same as the Rust client's.
"""

import errno as _errno
import fcntl as _fcntl
import os as _os
import stat as _stat
import struct as _struct
import time as _time
from collections import namedtuple as _namedtuple

__all__ = [
    "Device", "LockGuard", "DeviceNode", "DriverInfo", "DeviceInfo", "LockState",
    "Error", "Busy", "Timeout", "Interrupted", "Deadlock", "NotHeld",
    "DeviceGone", "Invalid", "enumerate_devices", "lock_name", "lock_index",
    "LOCK_COUNT", "LOCK_NAMES", "ARC_MSG", "REMOTE_ARC_MSG", "NON_MMIO",
    "MEM_BARRIER", "CHIP_IN_USE", "PCIE_DMA", "eth",
]

DEV_DIR = "/dev/tenstorrent"
CLASS_DIR = "/sys/class/tenstorrent"

# ---- ABI (include/uapi/linux/tenstorrent.h) ----------------------------------

IOCTL_MAGIC = 0xFA
_IOC_NONE, _IOC_WRITE, _IOC_READ = 0, 1, 2


def _ioc(direction, nr, size):
    """``_IOC(dir, 0xFA, nr, size)`` as on x86 and the generic layout."""
    if not 0 <= size < (1 << 14):
        raise ValueError("ioctl argument too large")
    return (direction << 30) | (size << 16) | (IOCTL_MAGIC << 8) | nr


# Struct layouts: little-endian fixed-width fields, no padding (checked by
# the tests against sizeof of the C header when a C compiler is at hand).
GET_DEVICE_INFO_FMT = "=I" + "I8H"          # in, out
GET_DRIVER_INFO_FMT = "=I" + "II4B"         # in, out
LOCK_CTL_FMT = "=IIB3x" + "B3x"             # in, out
LOCK_ACQUIRE_FMT = "=IIIIQIIQ"
LOCK_ACQUIRE_SET_FMT = "=IIQQQQII"
LOCK_RELEASE_FMT = "=IIQ"
LOCK_QUERY_FMT = "=IIIIIIQ16sQQQQ"

IOCTL_GET_DEVICE_INFO = _ioc(_IOC_NONE, 0, 0)
IOCTL_GET_DRIVER_INFO = _ioc(_IOC_NONE, 5, 0)
IOCTL_LOCK_CTL = _ioc(_IOC_NONE, 8, 0)
IOCTL_LOCK_ACQUIRE = _ioc(_IOC_READ | _IOC_WRITE, 0x40, _struct.calcsize(LOCK_ACQUIRE_FMT))
IOCTL_LOCK_ACQUIRE_SET = _ioc(_IOC_READ | _IOC_WRITE, 0x41,
                              _struct.calcsize(LOCK_ACQUIRE_SET_FMT))
IOCTL_LOCK_RELEASE = _ioc(_IOC_READ | _IOC_WRITE, 0x42, _struct.calcsize(LOCK_RELEASE_FMT))
IOCTL_LOCK_QUERY = _ioc(_IOC_READ | _IOC_WRITE, 0x43, _struct.calcsize(LOCK_QUERY_FMT))

DRIVER_API_VERSION = 2
LOCK_COUNT = 64

LOCK_NONBLOCK = 1 << 0
LOCK_DEADLINE = 1 << 1
LOCK_OWNER_DIED = 1 << 0
LOCK_QUERY_HELD = 1 << 0
LOCK_QUERY_HELD_BY_CALLER = 1 << 1
LOCK_QUERY_OWNER_DIED = 1 << 2

LOCK_CTL_ACQUIRE = 0
LOCK_CTL_RELEASE = 1
LOCK_CTL_TEST = 2
LOCK_CTL_ACQUIRE_BLOCKING = 3

# ---- well-known locks ---------------------------------------------------------

LOCK_NAMES = tuple(["ETH%02d" % n for n in range(16)] + [
    "ARC_MSG", "REMOTE_ARC_MSG", "NON_MMIO", "MEM_BARRIER", "CHIP_IN_USE", "PCIE_DMA",
])
ARC_MSG = 16
REMOTE_ARC_MSG = 17
NON_MMIO = 18
MEM_BARRIER = 19
CHIP_IN_USE = 20
PCIE_DMA = 21


def eth(n):
    """Index of the lock of ERISC core ``n`` (0..15)."""
    if not 0 <= n < 16:
        raise ValueError("ERISC core %r out of range 0..15" % (n,))
    return n


def lock_name(index):
    """The well-known name of lock ``index``, or None."""
    return LOCK_NAMES[index] if 0 <= index < len(LOCK_NAMES) else None


def lock_index(lock):
    """Index of ``lock``: an int (0..63) or a well-known name ("ARC_MSG")."""
    if isinstance(lock, str):
        try:
            return LOCK_NAMES.index(lock)
        except ValueError:
            raise Invalid("unknown lock name %r" % (lock,)) from None
    if isinstance(lock, bool) or not isinstance(lock, int):
        raise TypeError("a lock is an index or a name, not %r" % (lock,))
    if not 0 <= lock < LOCK_COUNT:
        raise Invalid("lock index %d not in 0..%d" % (lock, LOCK_COUNT - 1))
    return lock


def mask_of(locks):
    """Bit mask (bit i = lock i) of an iterable of indices or names."""
    mask = 0
    for lock in locks:
        mask |= 1 << lock_index(lock)
    if not mask:
        raise Invalid("no lock given")
    return mask


def indices_of(mask):
    """The lock indices of ``mask``, increasing."""
    return [i for i in range(LOCK_COUNT) if mask >> i & 1]


# ---- errors -----------------------------------------------------------------------


class Error(OSError):
    """A failed command; ``errno`` says which."""

    default_errno = _errno.EIO

    def __init__(self, message=None, holder_pid=None, err=None):
        err = self.default_errno if err is None else err
        super().__init__(err, message or _os.strerror(err))
        self.holder_pid = holder_pid


class Busy(Error):
    """EBUSY: a non-blocking request (``blocking=False``) and the lock is
    held, or someone is queued that may not be passed (only pollers under
    the hand-off bound may be); ``holder_pid`` (0 if none or not visible in
    this pid namespace). A try that fails while others are queued holds a
    place for a short lease, renewed by the next try, so a polling caller
    is served in its turn."""

    default_errno = _errno.EBUSY


class Timeout(Error, TimeoutError):
    """ETIMEDOUT: a timeout passed (never before it; at once for
    ``timeout=0``, or one that passed while the process was stopped);
    ``holder_pid``."""

    default_errno = _errno.ETIMEDOUT


class Interrupted(Error, InterruptedError):
    """EINTR: a signal handler ran while waiting (call again to go on)."""

    default_errno = _errno.EINTR


class Deadlock(Error):
    """EDEADLK: this file already holds the lock (locks are not re-entrant)."""

    default_errno = _errno.EDEADLK


class NotHeld(Error):
    """EPERM: release of a lock this file does not hold."""

    default_errno = _errno.EPERM


class DeviceGone(Error):
    """ENODEV: the card was unbound or removed; close the Device."""

    default_errno = _errno.ENODEV


class Invalid(Error, ValueError):
    """EINVAL: bad index, mask, flags or reserved field."""

    default_errno = _errno.EINVAL


_BY_ERRNO = {c.default_errno: c for c in (Busy, Timeout, Interrupted, Deadlock, NotHeld,
                                          DeviceGone, Invalid)}


_MESSAGES = {
    _errno.EBUSY: "lock busy",
    _errno.ETIMEDOUT: "timed out waiting for the lock",
    _errno.EINTR: "interrupted by a signal",
    _errno.EDEADLK: "this file already holds the lock",
    _errno.EPERM: "lock not held by this file",
    _errno.ENODEV: "device gone",
}


def error_from_errno(err, holder_pid=0, what=None):
    """The :class:`Error` subclass for ``err`` (plain Error for others)."""
    cls = _BY_ERRNO.get(err, Error)
    msg = _MESSAGES.get(err) or _os.strerror(err)
    if what:
        msg = "%s: %s" % (what, msg)
    if cls in (Busy, Timeout) and holder_pid:
        msg += " (held by pid %d)" % holder_pid
    return cls(msg, holder_pid=holder_pid if cls in (Busy, Timeout) else None, err=err)


# ---- time ---------------------------------------------------------------------------


def monotonic_ns():
    """CLOCK_MONOTONIC in ns: the clock of the kernel's deadlines."""
    return _time.clock_gettime_ns(_time.CLOCK_MONOTONIC)


def wait_args(timeout=None, blocking=True, now_ns=None):
    """``(flags, deadline_ns)`` of an acquisition.

    ``blocking=False``: NONBLOCK. ``timeout`` (seconds, float): an absolute
    CLOCK_MONOTONIC deadline, computed once (a restarted wait never waits
    longer; in a time namespace the kernel converts it from the
    namespace's clock); 0 or negative: checked at once like a try, but
    :class:`Timeout`, not :class:`Busy`, when not free. None: wait until
    granted.
    """
    if not blocking:
        if timeout is not None:
            raise ValueError("a timeout needs blocking=True")
        return LOCK_NONBLOCK, 0
    if timeout is None:
        return 0, 0
    now = monotonic_ns() if now_ns is None else now_ns
    if timeout <= 0:
        return LOCK_DEADLINE, now
    return LOCK_DEADLINE, min(now + int(round(timeout * 1e9)), (1 << 64) - 1)


# ---- records --------------------------------------------------------------------

DriverInfo = _namedtuple("DriverInfo", "api_version major minor patch version")
DriverInfo.__doc__ = "GET_DRIVER_INFO: API version (2) and the module's semver."

DeviceInfo = _namedtuple(
    "DeviceInfo",
    "vendor_id device_id subsystem_vendor_id subsystem_id bus_dev_fn "
    "max_dma_buf_size_log2 pci_domain bdf")
DeviceInfo.__doc__ = "GET_DEVICE_INFO; bdf is 'DDDD:BB:DD.F'."

LockState = _namedtuple(
    "LockState",
    "index name held held_by_caller owner_died holder_pid holder_comm held_ns "
    "waiters acquisitions contended owner_died_count spurious_wakeups")
LockState.__doc__ = "LOCK_QUERY of one lock."

DeviceNode = _namedtuple("DeviceNode", "index path major minor bdf")
DeviceNode.__doc__ = "A card found by enumerate_devices()."


def bdf_string(domain, bus_dev_fn):
    """'DDDD:BB:DD.F' of GET_DEVICE_INFO's pci_domain and bus_dev_fn."""
    return "%04x:%02x:%02x.%x" % (domain, bus_dev_fn >> 8, (bus_dev_fn >> 3) & 0x1F,
                                  bus_dev_fn & 7)


def unpack_query(index, buf):
    """A :class:`LockState` from a LOCK_QUERY buffer."""
    (_, _, _, out_flags, holder_pid, waiters, held_ns, comm, acquisitions, contended,
     owner_died_count, spurious) = _struct.unpack(LOCK_QUERY_FMT, bytes(buf))
    return LockState(
        index=index, name=lock_name(index),
        held=bool(out_flags & LOCK_QUERY_HELD),
        held_by_caller=bool(out_flags & LOCK_QUERY_HELD_BY_CALLER),
        owner_died=bool(out_flags & LOCK_QUERY_OWNER_DIED),
        holder_pid=holder_pid,
        holder_comm=comm.split(b"\0", 1)[0].decode("utf-8", "replace"),
        held_ns=held_ns, waiters=waiters, acquisitions=acquisitions, contended=contended,
        owner_died_count=owner_died_count, spurious_wakeups=spurious)


def enumerate_devices(dev_dir=DEV_DIR, class_dir=CLASS_DIR):
    """The cards, the way the ecosystem finds them: every numeric entry of
    ``/dev/tenstorrent/`` that is a character device whose number equals
    ``/sys/class/tenstorrent/tenstorrent!N/dev``. Sorted by N; empty when
    there is no device directory."""
    try:
        names = _os.listdir(dev_dir)
    except FileNotFoundError:
        return []
    nodes = []
    for name in names:
        if not name.isdigit():
            continue
        path = _os.path.join(dev_dir, name)
        try:
            st = _os.stat(path)
        except OSError:
            continue
        if not _stat.S_ISCHR(st.st_mode):
            continue
        major, minor = _os.major(st.st_rdev), _os.minor(st.st_rdev)
        cls = _os.path.join(class_dir, "tenstorrent!%s" % name)
        try:
            with open(_os.path.join(cls, "dev")) as f:
                dev = f.read().strip()
        except OSError:
            continue
        if dev != "%d:%d" % (major, minor):
            continue
        try:
            bdf = _os.path.basename(_os.readlink(_os.path.join(cls, "device")))
        except OSError:
            bdf = None
        nodes.append(DeviceNode(int(name), path, major, minor, bdf))
    nodes.sort(key=lambda n: n.index)
    return nodes


# ---- the device ------------------------------------------------------------------


class LockGuard:
    """Locks held by a :class:`Device`; a context manager that releases them
    on exit. ``owner_died`` tells whether the previous holder of any of them
    died holding it (``owner_died_mask``: which)."""

    def __init__(self, device, mask, owner_died_mask, waited_ns):
        self.device = device
        self.mask = mask
        self.owner_died_mask = owner_died_mask
        self.waited_ns = waited_ns
        self._held = True

    @property
    def owner_died(self):
        return self.owner_died_mask != 0

    @property
    def indices(self):
        return indices_of(self.mask)

    @property
    def held(self):
        return self._held

    def release(self):
        """Releases now (a second call does nothing)."""
        if self._held:
            self._held = False
            self.device.release(mask=self.mask)

    unlock = release

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._held:
            self._held = False
            try:
                self.device.release(mask=self.mask)
            except DeviceGone:
                pass  # the card went away: nothing is held any more
        return False

    def __repr__(self):
        return "<LockGuard locks=%s owner_died=%s>" % (self.indices, self.owner_died)


class Device:
    """An open ``/dev/tenstorrent/N``: the owner of the locks it takes.

    ``Device(0)`` or ``Device("/dev/tenstorrent/0")``; ``Device(fd=...)``
    wraps an open descriptor (owned from then on). A context manager that
    closes the file, which releases every lock it still holds."""

    def __init__(self, device=None, fd=None):
        if fd is not None:
            if device is not None:
                raise TypeError("give a device or an fd, not both")
            self.path = None
            self._fd = fd
            return
        if isinstance(device, int) and not isinstance(device, bool):
            device = "%s/%d" % (DEV_DIR, device)
        self.path = device
        self._fd = _os.open(device, _os.O_RDWR | _os.O_CLOEXEC)

    # -- file --

    def fileno(self):
        if self._fd is None:
            raise ValueError("Device is closed")
        return self._fd

    @property
    def closed(self):
        return self._fd is None

    def close(self):
        """Closes the file: the kernel releases its locks (if this was the
        last reference to the file)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            _os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self):
        return "<tenstorrent_lock.Device %s fd=%s>" % (self.path, self._fd)

    def _ioctl(self, cmd, buf, what, holder_at=None, fmt=None):
        """ioctl with a mutable buffer; an Error (with holder_pid read from
        field ``holder_at`` of ``fmt``) on failure."""
        try:
            _fcntl.ioctl(self.fileno(), cmd, buf, True)
        except OSError as e:
            holder = 0
            if holder_at is not None:
                holder = _struct.unpack(fmt, bytes(buf))[holder_at]
            raise error_from_errno(e.errno, holder, what) from None
        return buf

    # -- info --

    def driver_info(self):
        """GET_DRIVER_INFO."""
        buf = bytearray(_struct.pack(GET_DRIVER_INFO_FMT, 12, 0, 0, 0, 0, 0, 0))
        self._ioctl(IOCTL_GET_DRIVER_INFO, buf, "GET_DRIVER_INFO")
        _, _, api, major, minor, patch, _ = _struct.unpack(GET_DRIVER_INFO_FMT, bytes(buf))
        return DriverInfo(api, major, minor, patch, "%d.%d.%d" % (major, minor, patch))

    def device_info(self):
        """GET_DEVICE_INFO."""
        buf = bytearray(_struct.pack(GET_DEVICE_INFO_FMT, 20, 0, *[0] * 8))
        self._ioctl(IOCTL_GET_DEVICE_INFO, buf, "GET_DEVICE_INFO")
        (_, _, vendor, device, sub_vendor, sub_id, bdf, dma_log2, domain,
         _) = _struct.unpack(GET_DEVICE_INFO_FMT, bytes(buf))
        return DeviceInfo(vendor, device, sub_vendor, sub_id, bdf, dma_log2, domain,
                          bdf_string(domain, bdf))

    # -- locks --

    def acquire(self, lock, timeout=None, blocking=True):
        """ACQUIRE of one lock; returns ``(owner_died, waited_ns)``. Prefer
        :meth:`lock`, which returns a guard."""
        index = lock_index(lock)
        flags, deadline = wait_args(timeout, blocking)
        buf = bytearray(_struct.pack(LOCK_ACQUIRE_FMT, _struct.calcsize(LOCK_ACQUIRE_FMT),
                                     flags, index, 0, deadline, 0, 0, 0))
        self._ioctl(IOCTL_LOCK_ACQUIRE, buf, "lock %d" % index, 6, LOCK_ACQUIRE_FMT)
        f = _struct.unpack(LOCK_ACQUIRE_FMT, bytes(buf))
        return bool(f[5] & LOCK_OWNER_DIED), f[7]

    def acquire_set(self, mask, timeout=None, blocking=True):
        """ACQUIRE_SET of ``mask``; returns ``(owner_died_mask, waited_ns)``."""
        flags, deadline = wait_args(timeout, blocking)
        buf = bytearray(_struct.pack(LOCK_ACQUIRE_SET_FMT,
                                     _struct.calcsize(LOCK_ACQUIRE_SET_FMT),
                                     flags, mask, deadline, 0, 0, 0, 0))
        self._ioctl(IOCTL_LOCK_ACQUIRE_SET, buf, "locks %#x" % mask, 6, LOCK_ACQUIRE_SET_FMT)
        f = _struct.unpack(LOCK_ACQUIRE_SET_FMT, bytes(buf))
        return f[4], f[5]

    def lock(self, lock, timeout=None, blocking=True):
        """Takes one lock (index or name) and returns a :class:`LockGuard`
        (``with dev.lock(ARC_MSG) as held: ...``).

        Waits until granted (FIFO), at most ``timeout`` seconds
        (:class:`Timeout`), or not at all with ``blocking=False``
        (:class:`Busy`). :class:`Interrupted` when a signal handler ran."""
        index = lock_index(lock)
        died, waited = self.acquire(index, timeout, blocking)
        return LockGuard(self, 1 << index, (1 << index) if died else 0, waited)

    def try_lock(self, lock):
        """``lock(lock, blocking=False)``: :class:`Busy` if held or queued."""
        return self.lock(lock, blocking=False)

    def lock_many(self, locks, timeout=None, blocking=True):
        """Takes every lock of ``locks`` at once, all or nothing (never
        holding some while waiting for the others); one guard for all."""
        mask = mask_of(locks)
        if mask & (mask - 1) == 0:
            return self.lock(mask.bit_length() - 1, timeout, blocking)
        died_mask, waited = self.acquire_set(mask, timeout, blocking)
        return LockGuard(self, mask, died_mask, waited)

    def release(self, locks=None, mask=None):
        """Releases locks, all or nothing (:class:`NotHeld` if this file
        does not hold them all): a guard, an iterable of indices or names,
        or ``mask=`` (bit i = lock i)."""
        if isinstance(locks, LockGuard):
            mask = locks.mask
        elif locks is not None:
            if mask is not None:
                raise TypeError("give locks or mask, not both")
            mask = mask_of(locks)
        elif mask is None:
            raise TypeError("release() needs locks or mask=")
        buf = bytearray(_struct.pack(LOCK_RELEASE_FMT, _struct.calcsize(LOCK_RELEASE_FMT), 0,
                                     mask))
        self._ioctl(IOCTL_LOCK_RELEASE, buf, "release %#x" % mask)

    def query(self, lock):
        """LOCK_QUERY: a :class:`LockState` (never blocks)."""
        index = lock_index(lock)
        size = _struct.calcsize(LOCK_QUERY_FMT)
        buf = bytearray(_struct.pack(LOCK_QUERY_FMT, size, 0, index, 0, 0, 0, 0, b"",
                                     0, 0, 0, 0))
        self._ioctl(IOCTL_LOCK_QUERY, buf, "query %d" % index)
        return unpack_query(index, buf)

    def lock_ctl(self, lock, op):
        """The C driver's LOCK_CTL (``LOCK_CTL_*``): returns ``out.value``."""
        index = lock_index(lock)
        buf = bytearray(_struct.pack(LOCK_CTL_FMT, 4, op, index, 0))
        self._ioctl(IOCTL_LOCK_CTL, buf, "LOCK_CTL")
        return _struct.unpack(LOCK_CTL_FMT, bytes(buf))[3]

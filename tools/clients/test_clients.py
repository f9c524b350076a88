#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The real Tenstorrent tools on this driver, printing TAP.

Run in the test VM (the "clients" layer of make check) with the wheels of
tools/clients/wheels.lock installed (tools/vm/setup-clients, packed by
tools/vm/run --python-site) and luwen-probe in /tmp:

    test_clients.py            every scenario
    test_clients.py FILTER     the scenarios whose name contains FILTER

Card 0 is an emulated Wormhole n150, card 1 a Blackhole p150a. What each
tool reports is compared with what the emulators' firmware holds (their
control ports, TT_CARDn_CONTROL), and with this driver's own views.
Exit status 1 if any scenario failed.
"""

import faulthandler
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import traceback

PATIENCE = 120.0  # seconds: a hang detector for one step, never a pass criterion
CARDS = (0, 1)
ARCH = {0: "wormhole", 1: "blackhole"}
# A tile that is a Tensix on both chips (NOC0 coordinates, translation
# off), and an L1 address in it that nothing else uses.
TENSIX = (1, 2)
L1_ADDR = 0x1F000
LUWEN_PROBE = os.environ.get("TT_LUWEN_PROBE", "/tmp/luwen-probe")


class Failure(Exception):
    pass


def ensure(cond, what):
    if not cond:
        raise Failure(what)


# ---- the emulators' side -------------------------------------------------------------


def control(card, line):
    """One command on card's emulator control port; what follows "ok"."""
    path = os.environ["TT_CARD%d_CONTROL" % card]
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        while True:  # whatever an abandoned command left
            try:
                if not os.read(fd, 256):
                    break
            except BlockingIOError:
                break
        os.write(fd, (line + "\n").encode())
        reply = b""
        end = time.monotonic() + 20
        while not reply.endswith(b"\n"):
            left = end - time.monotonic()
            ensure(left > 0, "card %d control: no reply to %r (got %r)" % (card, line, reply))
            select.select([fd], [], [], left)
            try:
                reply += os.read(fd, 1)
            except BlockingIOError:
                pass
    finally:
        os.close(fd)
    reply = reply.decode().strip()
    ensure(reply.startswith("ok"), "card %d emulator: %r: %s" % (card, line, reply))
    return reply[2:].strip()


def fields(text):
    return dict(kv.split("=", 1) for kv in text.split() if "=" in kv)


def board(card):
    """The board the card's firmware describes (the emulator's `board`)."""
    b = fields(control(card, "board"))
    return {k: (v if k == "name" else int(v, 0)) for k, v in b.items()}


def tile_word(card, x, y, addr):
    data = bytes.fromhex(control(card, "noc-read %d %d 0x%x 4" % (x, y, addr)))
    return int.from_bytes(data, "little")


def set_tile_word(card, x, y, addr, value):
    control(card, "noc-write %d %d 0x%x %s" % (x, y, addr, value.to_bytes(4, "little").hex()))


# ---- this driver's side ----------------------------------------------------------------


def lock_line(card, index):
    path = "/sys/class/tenstorrent/tenstorrent!%d/locks/%02d" % (card, index)
    with open(path) as f:
        return fields(f.read())


def polled_by(card, index):
    """The pids a lock line shows polling it (`polled_by`: pid/comm/ns/tries, comma separated)."""
    return [p.split("/")[0] for p in lock_line(card, index).get("polled_by", "").split(",") if p]


def held_by(card, index, pid):
    line = lock_line(card, index)
    return line["held"] == "1" and line["pid"] == str(pid)


def note(text):
    """A diagnostic line in the TAP output (where a slow step is)."""
    print("# " + text, flush=True)


def wait_for(cond, what, patience=PATIENCE):
    end = time.monotonic() + patience
    while not cond():
        ensure(time.monotonic() < end, "%s: not within %.0f s" % (what, patience))
        time.sleep(0.01)


# ---- the tools, each in a process of its own ---------------------------------------------


def python(args, env=None):
    """Starts a new python3 with `args`; its stdout and stderr are pipes."""
    return subprocess.Popen(
        [sys.executable] + args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **(env or {})),
    )


def finish(proc, what, patience=PATIENCE):
    """Waits for a started tool; its stdout, or a failure with its words."""
    try:
        out, err = proc.communicate(timeout=patience)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise Failure("%s: still running after %.0f s\n%s\n%s" % (what, patience, out[-2000:], err[-2000:]))
    ensure(proc.returncode == 0, "%s: exit status %d\n%s\n%s" % (what, proc.returncode, out[-3000:], err[-3000:]))
    return out, err


def run_python(code, what, env=None):
    """Runs `code` in a new python3 to its end."""
    return finish(python(["-c", code], env), what)


def tool(args, what, env=None):
    """Runs a tool's module (`python3 -m ARGS`) to its end."""
    return finish(python(["-m"] + args, env), what)


def json_lines(out):
    """The `KEY {json}` lines a child printed, as a dict."""
    return {k: json.loads(v) for k, v in (l.split(" ", 1) for l in out.splitlines() if l.startswith("@"))}


# ---- tt-umd ------------------------------------------------------------------------------


def test_umd_pci_device():
    """tt-umd's PCIDevice on each card: enumeration, the ids, the KMD version it gates on."""
    out, _ = run_python(
        """
import json, tt_umd
print("@enum", json.dumps(tt_umd.PCIDevice.enumerate_devices()))
v = tt_umd.PCIDevice.read_kmd_version()
print("@kmd", json.dumps([v.major, v.minor, v.patch]))
for n in (0, 1):
    i = tt_umd.PCIDevice(n).get_device_info()
    print("@dev%d" % n, json.dumps([i.vendor_id, i.device_id, i.pci_bdf]))
""",
        "tt_umd.PCIDevice",
    )
    got = json_lines(out)
    ensure(got["@enum"] == [0, 1], "enumerate_devices: %r" % got["@enum"])
    ensure(got["@kmd"] == [2, 11, 0], "read_kmd_version: %r" % got["@kmd"])
    for n in CARDS:
        vendor, device = (int(x, 16) for x in os.environ["TT_CARD%d_ID" % n].split(":"))
        ensure(got["@dev%d" % n][:2] == [vendor, device], "card %d ids %r" % (n, got["@dev%d" % n]))
        ensure(got["@dev%d" % n][2] == os.environ["TT_CARD%d_BDF" % n], "card %d BDF %r" % (n, got["@dev%d" % n]))


def test_umd_tt_device_telemetry():
    """tt-umd's TTDevice opens and initialises each card; board id, firmware bundle and ARC telemetry as the firmware holds them."""
    out, _ = run_python(
        """
import json, tt_umd
T = tt_umd.TelemetryTag
for n in (0, 1):
    d = tt_umd.TTDevice.create(n)
    d.init_tt_device()
    r = d.get_arc_telemetry_reader()
    fw = d.get_firmware_info_provider().get_firmware_version()
    print("@dev%d" % n, json.dumps({
        "arch": str(d.get_arch()), "board_id": d.get_board_id(), "board_type": str(d.get_board_type()),
        "fw": [fw.major, fw.minor, fw.patch],
        "telemetry_board_id": r.read_entry(int(T.BOARD_ID_HIGH)) << 32 | r.read_entry(int(T.BOARD_ID_LOW)),
    }))
""",
        "tt_umd.TTDevice",
    )
    got = json_lines(out)
    for n in CARDS:
        b, d = board(n), got["@dev%d" % n]
        ensure(ARCH[n] in d["arch"].lower(), "card %d arch %r" % (n, d))
        ensure(d["board_id"] == b["board-id"], "card %d board id %#x, firmware %#x" % (n, d["board_id"], b["board-id"]))
        ensure(d["telemetry_board_id"] == b["board-id"], "card %d telemetry board id %r" % (n, d))
        bundle = b["fw-bundle"]
        ensure(d["fw"] == [bundle >> 24, (bundle >> 16) & 0xFF, (bundle >> 8) & 0xFF], "card %d firmware %r, bundle %#x" % (n, d, bundle))
        ensure(("N150" in d["board_type"].upper()) if n == 0 else ("P150" in d["board_type"].upper()), "card %d board type %r" % (n, d))


# The end of a tile_memory_both_ways program, once it has its TTDevice `d`.
TILE_MEMORY_BOTH_WAYS = """
d.noc_write32(x, y, addr, value)
print("@read", d.noc_read32(x, y, addr))
sys.stdout.flush()
sys.stdin.readline()  # the test changes the word from the card's side
print("@again", d.noc_read32(x, y, addr))
"""


def tile_memory_both_ways(n, code, value, other, what, env=None):
    """Runs `code` (a tt-umd program taking n, x, y, addr, value: it writes
    the word, prints `@read` with what it reads back, waits for a line, and
    prints `@again` with what it reads then) on card `n`, and checks its
    side against the card's both ways: the emulator holds what UMD wrote,
    and UMD reads what the card's side wrote meanwhile. Returns the `@`
    lines it printed before `@read`, for the caller's own checks."""
    x, y = TENSIX
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(n), str(x), str(y), hex(L1_ADDR), hex(value)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, **(env or {})),
    )
    lines = {}
    while "@read" not in lines:
        line = p.stdout.readline()
        if not line:
            p.kill()
            raise Failure("card %d: %s stopped: %r\n%s" % (n, what, lines, p.stderr.read()[-3000:]))
        if line.startswith("@"):
            k, v = line.split(" ", 1)
            lines[k] = v
    ensure(int(lines["@read"]) == value, "card %d: UMD read back %s" % (n, lines["@read"]))
    ensure(tile_word(n, x, y, L1_ADDR) == value, "card %d: the emulator holds %#x" % (n, tile_word(n, x, y, L1_ADDR)))
    set_tile_word(n, x, y, L1_ADDR, other)
    p.stdin.write("\n")
    p.stdin.flush()
    out, _ = finish(p, "card %d %s" % (n, what))
    ensure(("@again %d" % other) in out, "card %d: UMD read %r after the card's write of %#x" % (n, out, other))
    return lines


def test_umd_tile_memory():
    """Tile memory written and read through tt-umd's own TLB path, checked from the emulator's side both ways."""
    code = """
import sys, tt_umd
n, x, y, addr, value = (int(a, 0) for a in sys.argv[1:])
d = tt_umd.TTDevice.create(n)
"""
    code += TILE_MEMORY_BOTH_WAYS
    for n in CARDS:
        tile_memory_both_ways(n, code, 0x5EED0000 | n, 0xC0DE0000 | n, "tile memory")


BH = 1
ARC_MSG = 16  # UMD's KmdMutex index for ARC_MSG, this driver's name for it
UMD_QUEUE = 3  # tt-umd's Blackhole message queue (APPLICATION)
BH_ARC = (8, 0)  # the Blackhole ARC tile
BH_QUEUE_CONTROL = 0x8003042C  # SCRATCH_RAM[11]: where the queue control block is


def drop_stale_answers(card, index):
    """Blackhole message queue `index` as a client that lost track finds
    it: answers the firmware wrote that no sender took out (a sender
    killed while waiting, its answer then taken by the next sender as
    its own, and so on). Takes them out from the card's side, as the
    queue's host reader would, so the next sender gets its own; returns
    how many there were."""
    ensure(card == BH, "only Blackhole's queues are shared with tt-umd")
    x, y = BH_ARC
    control_block = tile_word(card, x, y, BH_QUEUE_CONTROL)
    base = tile_word(card, x, y, control_block)
    entries = tile_word(card, x, y, control_block + 4) & 0xFF
    queue = base + index * (32 + 2 * entries * 32)
    read_ptr, write_ptr = tile_word(card, x, y, queue + 4), tile_word(card, x, y, queue + 0x14)
    set_tile_word(card, x, y, queue + 4, write_ptr)
    return (write_ptr - read_ptr) % (2 * entries)


class Talker:
    """A tool in a process of its own whose output (stdout and stderr
    together) the test follows as it comes."""

    def __init__(self, code, env=None):
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", code],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0,
            env=dict(os.environ, **(env or {})),
        )
        self.pid = self.proc.pid
        self.out = b""

    def wait_output(self, text, what, or_exit=False):
        """Reads until `text` has appeared in the output (True), or with
        `or_exit`, until the tool exits without printing it (False)."""
        end = time.monotonic() + PATIENCE
        fd = self.proc.stdout.fileno()
        while text.encode() not in self.out:
            left = end - time.monotonic()
            ensure(left > 0, "%s: %r not printed within %.0f s; output:\n%s" % (what, text, PATIENCE, self.text()[-3000:]))
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 4096)
                if not chunk:
                    status = self.proc.wait()
                    if or_exit:
                        return False
                    raise Failure("%s: exited (%s) before printing %r; output:\n%s" % (what, status, text, self.text()[-3000:]))
                self.out += chunk
        return True if or_exit else self.text()

    def drain(self):
        """What it printed so far, without waiting for more."""
        fd = self.proc.stdout.fileno()
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            self.out += chunk
        return self.text()

    def go(self):
        """Sends it a line (it waits for one where it reads stdin)."""
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def text(self):
        return self.out.decode(errors="replace")

    def finish(self, what):
        try:
            rest, _ = self.proc.communicate(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rest, _ = self.proc.communicate()
        self.out += rest or b""
        ensure(self.proc.returncode == 0, "%s: exit status %s; output:\n%s" % (what, self.proc.returncode, self.text()[-3000:]))
        return self.text()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def test_umd_kmd_mutex_across_processes():
    """UMD's ARC_MSG lock on Blackhole: the KMD lock held by a running UMD and shown with its pid, a second UMD waits, kill -9 of the holder hands it on."""
    code = """
import sys, tt_umd
d = tt_umd.TTDevice.create(%d)
d.init_tt_device()
print("ready")
sys.stdin.readline()
# Blackhole ARC messages hold the KMD lock ARC_MSG for the whole exchange;
# with the firmware hung, that is until the 60 s timeout.
d.arc_msg(0x90, True, [0, 0], 60000)
print("done")
""" % BH
    first = second = None
    try:
        # Both initialised while the firmware answers, then it stops.
        first, second = Talker(code), Talker(code)
        first.wait_output("ready", "first UMD")
        second.wait_output("ready", "second UMD")
        note("two UMDs (pids %d, %d) opened the Blackhole; its firmware stops answering" % (first.pid, second.pid))
        control(BH, "arc-hang")
        first.go()
        wait_for(lambda: held_by(BH, ARC_MSG, first.pid), "ARC_MSG held by the first UMD (pid %d)" % first.pid)
        line = lock_line(BH, ARC_MSG)
        ensure(line["name"] == "ARC_MSG" and line["comm"] == "python3", "sysfs shows %r" % line)
        note("the first UMD holds ARC_MSG: %r" % line)
        second.go()
        # UMD 0.9.12 takes its process-shared robust mutex ARC_MSG_1_PCIe
        # (/dev/shm) first and the KMD lock inside it; a waiter says so
        # after a second.
        second.wait_output("Waiting for lock 'ARC_MSG", "second UMD")
        ensure(held_by(BH, ARC_MSG, first.pid), "ARC_MSG left the first UMD: %r" % lock_line(BH, ARC_MSG))
        died = int(lock_line(BH, ARC_MSG)["owner_died"])
        note("the second UMD waits; kill -9 of the first")
        first.kill()
        wait_for(lambda: held_by(BH, ARC_MSG, second.pid), "ARC_MSG handed to the second UMD after kill -9")
        ensure(int(lock_line(BH, ARC_MSG)["owner_died"]) == died + 1, "owner_died not counted: %r" % lock_line(BH, ARC_MSG))
    except BaseException:
        if second:
            second.kill()
        raise
    finally:
        control(BH, "arc-resume")
        if first:
            first.kill()
    out = second.finish("second UMD's ARC message")
    ensure("done" in out, "second UMD: %r" % out[-2000:])
    wait_for(lambda: lock_line(BH, ARC_MSG)["held"] == "0", "ARC_MSG free after the second UMD")
    # The killed UMD's request was answered too, and nobody took that
    # answer out: the second UMD took it for its own, leaving its own
    # answer for the next UMD message on that queue.
    note("stale answers left in tt-umd's queue by the killed UMD, dropped: %d" % drop_stale_answers(BH, UMD_QUEUE))


# ---- tt-umd's ARC messages and SMC_MSG at once -------------------------------------------

TEST = 0x90  # the firmware's TEST message: answers its argument plus one
# Where each sender's TEST messages must reach the firmware (the emulator's
# `arc-tests` names): tt-umd 0.9.12 sends Blackhole messages through queue 3
# (its BlackholeArcMessageQueueIndex::APPLICATION) and Wormhole ones through
# the scratch-register mailbox (SCRATCH[5], WormholeArcMessenger); the
# driver's SMC_MSG queue is queue 0 on both chips.
UMD_CHANNEL = {0: "mailbox5", 1: "queue3"}
DRIVER_CHANNEL = "queue0"

# What both sides run (and this test, for the values). The arguments each
# side sends: its message #i carries a value no other message of either
# side carries (a bijection of i, in a range per side), so any answer
# received names the message it belongs to.
COEXIST_COMMON = """
import select, sys

def umd_value(i):
    return 0x7E000000 | ((i >> 16) & 0xFF) << 16 | ((i * 40503 + 12345) & 0xFFFF)

def smc_value(i):
    return 0x5A000000 | ((i * 40503 + 999) & 0xFFFFFF)

def stop_after(sent, least):
    # Says when `least` messages are done; stops once it is and a line
    # came on stdin.
    if sent == least:
        print("reached")
    return sent >= least and bool(select.select([sys.stdin], [], [], 0)[0])
"""
exec(COEXIST_COMMON)

# tt-umd's TEST messages in a loop, from the moment it reads "go" until it
# reads a second line (honoured once it has sent `least`), each answer
# checked. A message that raises ends the loop (a hang or a lost message:
# the rest would only wait as long again).
UMD_TEST_LOOP = """
import json, tt_umd
%(common)s
n, wormhole, least = %(card)d, %(wormhole)s, %(least)d
d = tt_umd.TTDevice.create(n)
d.init_tt_device()
print("ready")
sys.stdin.readline()
sent, wrong, error = 0, [], None
while True:
    v = umd_value(sent)
    # Wormhole's mailbox takes two 16-bit arguments, answering their
    # packed value plus one; Blackhole's queue one word.
    args = [v & 0xFFFF, v >> 16] if wormhole else [v]
    try:
        exit_code, ret0, ret1 = d.arc_msg(0x90, True, args, 30000)
    except Exception as e:
        error = [sent, repr(e), None]
        break
    if exit_code != 0 or ret0 != v + 1:
        wrong.append([sent, exit_code, ret0, ret1])
    sent += 1
    if stop_after(sent, least):
        break
print("@umd", json.dumps({"sent": sent, "wrong": wrong[:10], "wrong_count": len(wrong), "error": error}))
"""

# The same through SMC_MSG (tt-kmd 2.11, nr 17): POST, then SMC_WAIT with a
# deadline far enough to be only a hang detector.
SMC_MSG = 0xFA11  # _IO(0xFA, 17)
SMC_WAIT = 0xC038FA45  # _IOWR(0xFA, 0x45, struct tenstorrent_smc_wait)
SMC_TEST_LOOP = """
import fcntl, json, os, struct, time
%(common)s
n, least = %(card)d, %(least)d
sysfs = "/sys/class/tenstorrent/tenstorrent!%%d/smc/" %% n
fd = os.open("/dev/tenstorrent/%%d" %% n, os.O_RDWR)
print("ready")
sys.stdin.readline()
sent, wrong, error = 0, [], None
def view():
    return {f: open(sysfs + f).read().strip() for f in ("queue", "counters")}
while True:
    v = smc_value(sent)
    try:
        fcntl.ioctl(fd, %(post)d, struct.pack("<12I", 48, 1, 0, 0, 0x90, v, 0, 0, 0, 0, 0, 0))
    except OSError as e:
        error = [sent, "POST: %%s (the view then: %%s)" %% (os.strerror(e.errno), view()), None]
        break
    deadline = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 60 * 10**9
    buf = bytearray(struct.pack("<IIQII8I", 56, 2, deadline, 0, 0, *([0] * 8)))
    try:
        fcntl.ioctl(fd, %(wait)d, buf, True)
    except OSError as e:
        done = struct.unpack_from("<I", buf, 16)[0]
        error = [sent, "SMC_WAIT: %%s (out_flags %%d; the view then: %%s)" %% (os.strerror(e.errno), done, view()),
                 list(struct.unpack_from("<3I", buf, 24))]
        break
    m = struct.unpack_from("<8I", buf, 24)
    if m[0] != 0 or m[1] != v + 1:
        wrong.append([sent, m[0], m[1], m[2]])
    sent += 1
    if stop_after(sent, least):
        break
print("@smc", json.dumps({"sent": sent, "wrong": wrong[:10], "wrong_count": len(wrong), "error": error}))
"""


def arc_tests(card):
    """TEST messages the card's firmware answered, per channel."""
    return {k: int(v) for k, v in fields(control(card, "arc-tests")).items()}


def whose(value, umd_sent, smc_sent):
    """What a received answer is, in words."""
    for i in range(umd_sent + 1):
        if value == umd_value(i) + 1:
            return "the answer to tt-umd's TEST #%d" % i
        if value == umd_value(i):
            return "tt-umd's own argument #%d, unanswered (a request slot or an echo)" % i
    for i in range(smc_sent + 1):
        if value == smc_value(i) + 1:
            return "the answer to the SMC_MSG client's TEST #%d" % i
        if value == smc_value(i):
            return "the SMC_MSG client's own argument #%d, unanswered" % i
    return "no message's answer"


def test_umd_and_smc_msg_coexist():
    """tt-umd's ARC messages (TEST, from Python, in a loop) and SMC_MSG's on the same card at once, each chip: every answer is its sender's, and the firmware saw tt-umd's on tt-umd's channel and SMC_MSG's on the driver's queue."""
    least = 40  # messages of each side, each sent while the other side runs
    for n in CARDS:
        wormhole = n == 0
        values = {"common": COEXIST_COMMON, "card": n, "least": least}
        if n == BH:
            # Whatever an earlier client left (the kill of a UMD waiting for
            # an answer, umd/kmd_mutex_across_processes) would make each of
            # tt-umd's answers the one before it.
            stale = drop_stale_answers(n, UMD_QUEUE)
            if stale:
                note("card %d: %d stale answers dropped from tt-umd's queue first" % (n, stale))
        umd = smc = None
        try:
            umd = Talker(UMD_TEST_LOOP % dict(values, wormhole=wormhole))
            smc = Talker(SMC_TEST_LOOP % dict(values, post=SMC_MSG, wait=SMC_WAIT))
            umd.wait_output("ready", "card %d tt-umd" % n)
            smc.wait_output("ready", "card %d SMC_MSG client" % n)
            before = arc_tests(n)
            umd.go()
            smc.go()
            # Each side goes on until both have sent `least`: every message
            # of either is sent while the other is still sending. A side
            # that fails stops at once; the other is then stopped too.
            for t, what in ((umd, "tt-umd"), (smc, "the SMC_MSG client")):
                t.wait_output("reached", "card %d %s's TEST loop" % (n, what), or_exit=True)
            for t in (umd, smc):
                try:
                    t.go()
                except BrokenPipeError:
                    pass  # it stopped by itself: its output says why
            got_umd = json_lines(umd.finish("card %d tt-umd" % n))["@umd"]
            got_smc = json_lines(smc.finish("card %d SMC_MSG client" % n))["@smc"]
        finally:
            for t in (umd, smc):
                if t:
                    t.kill()
        after = arc_tests(n)
        delta = {k: after[k] - before.get(k, 0) for k in after}
        umd_sent, smc_sent = got_umd["sent"], got_smc["sent"]
        note("card %d: tt-umd sent %d TEST, the SMC_MSG client %d; the firmware answered %s"
             % (n, umd_sent, smc_sent, " ".join("%s +%d" % kv for kv in sorted(delta.items()))))
        problems = []
        for side, got in (("tt-umd", got_umd), ("the SMC_MSG client", got_smc)):
            if got["error"]:
                i, text, words = got["error"]
                problems.append("%s's TEST #%d failed: %s" % (side, i, text))
                if words:
                    problems.append("  with status %#x, value %#x (word 2 %#x) written back: %s"
                                    % (words[0], words[1], words[2], whose(words[1], umd_sent, smc_sent)))
            for i, status, value, extra in got["wrong"]:
                sent = umd_value(i) if side == "tt-umd" else smc_value(i)
                problems.append("%s's TEST #%d (argument %#x) was answered status %#x, value %#x (word 2 %#x): %s"
                                % (side, i, sent, status, value, extra, whose(value, umd_sent, smc_sent)))
            if got["wrong_count"] > len(got["wrong"]):
                problems.append("%s: %d wrong answers in all" % (side, got["wrong_count"]))
        want = {k: 0 for k in delta}
        want[DRIVER_CHANNEL] = smc_sent
        want[UMD_CHANNEL[n]] = umd_sent
        if delta != want:
            problems.append("card %d: the firmware answered TEST %s; expected %s (SMC_MSG on the driver's %s, tt-umd on its %s)"
                            % (n, sorted(delta.items()), sorted(want.items()), DRIVER_CHANNEL, UMD_CHANNEL[n]))
        ensure(not problems, "card %d (%s):\n%s" % (n, ARCH[n], "\n".join(problems)))


# ---- tt-umd 0.9.14, what `pip install tt-umd` gives today ------------------------------
#
# Unpacked beside 0.9.12 (which tt-smi pins) by tools/vm/setup-clients
# (tools/clients/umd-next.lock); a process that puts it first on its path
# imports it instead.
UMD_NEXT = os.environ.get("TT_UMD_NEXT", "/usr/lib/python3/dist-packages/umd-next")
UMD_NEXT_ENV = {"PYTHONPATH": UMD_NEXT}
UMD_NEXT_VERSION = "0.9.14"


def test_umd_next_version_and_io():
    """tt-umd 0.9.14: it is the one imported, gates on KMD 2.11.0, enumerates and opens both cards; tile memory through its own windows, checked from the card's side both ways."""
    code = """
import importlib.metadata, json, sys, tt_umd
print("@version", json.dumps([importlib.metadata.version("tt-umd"), tt_umd.__file__]))
v = tt_umd.PCIDevice.read_kmd_version()
print("@kmd", json.dumps([v.major, v.minor, v.patch]))
print("@enum", json.dumps(tt_umd.PCIDevice.enumerate_devices()))
n, x, y, addr, value = (int(a, 0) for a in sys.argv[1:])
d = tt_umd.TTDevice.create(n)
d.init_tt_device()
print("@arch", json.dumps(str(d.get_arch())))
"""
    code += TILE_MEMORY_BOTH_WAYS
    for n in CARDS:
        lines = tile_memory_both_ways(
            n, code, 0x1A7E0000 | n, 0x0BAD0000 | n, "tile memory (tt-umd %s)" % UMD_NEXT_VERSION, UMD_NEXT_ENV
        )
        version, path = json.loads(lines["@version"])
        ensure(version == UMD_NEXT_VERSION and path.startswith(UMD_NEXT), "imported tt-umd %s from %s" % (version, path))
        ensure(json.loads(lines["@kmd"]) == [2, 11, 0], "read_kmd_version: %s" % lines["@kmd"])
        ensure(json.loads(lines["@enum"]) == [0, 1], "enumerate_devices: %s" % lines["@enum"])
        ensure(ARCH[n] in json.loads(lines["@arch"]).lower(), "card %d arch %s" % (n, lines["@arch"]))


def test_umd_next_kmd_mutex_across_processes():
    """tt-umd 0.9.14's KmdMutex (its Python binding of the KMD lock) on both cards: one process holds, sysfs names it, a second's try fails and its lock() polls, shown in polled_by, kill -9 of the holder hands it on with owner_died counted."""
    code = """
import sys, tt_umd
m = tt_umd.KmdMutex(int(sys.argv[1]), %d)
print("@try=%%d@" %% m.try_lock())
sys.stdin.readline()
print("@in lock@")
m.lock()
print("@locked@")
sys.stdin.readline()
m.unlock()
print("unlocked")
""" % ARC_MSG
    for n in CARDS:
        first = second = None
        try:
            first = Talker(code.replace("sys.argv[1]", str(n)), UMD_NEXT_ENV)
            out = first.wait_output("@\n", "first KmdMutex's try_lock")
            ensure("@try=1@" in out, "card %d: the first try_lock of a free lock: %r" % (n, out[-2000:]))
            ensure(held_by(n, ARC_MSG, first.pid), "card %d: sysfs after try_lock: %r" % (n, lock_line(n, ARC_MSG)))
            line = lock_line(n, ARC_MSG)
            ensure(line["name"] == "ARC_MSG" and line["comm"] == "python3", "card %d: sysfs shows %r" % (n, line))
            second = Talker(code.replace("sys.argv[1]", str(n)), UMD_NEXT_ENV)
            out = second.wait_output("@\n", "second KmdMutex's try_lock")
            ensure("@try=0@" in out, "card %d: the second's try_lock of a held lock: %r" % (n, out[-2000:]))
            # lock() polls LOCK_CTL (UMD's pattern): a poller is not a
            # sleeping waiter, so sysfs counts no waiter but shows it among
            # the lock's pollers (pid/comm/ns/tries in polled_by); it must
            # not get the lock while the holder lives.
            second.go()
            second.wait_output("@in lock@", "second KmdMutex's lock()")
            wait_for(lambda: str(second.pid) in polled_by(n, ARC_MSG),
                     "card %d: the second KmdMutex (pid %d) shown polling ARC_MSG: %r" % (n, second.pid, lock_line(n, ARC_MSG)))
            ensure(held_by(n, ARC_MSG, first.pid), "card %d: ARC_MSG left the holder: %r" % (n, lock_line(n, ARC_MSG)))
            ensure("@locked@" not in second.drain(), "card %d: the second locked a held lock: %r" % (n, second.text()[-2000:]))
            died = int(lock_line(n, ARC_MSG)["owner_died"])
            note("card %d: pid %d holds ARC_MSG, pid %d waits; kill -9 of the holder" % (n, first.pid, second.pid))
            first.kill()
            second.wait_output("@locked@", "second KmdMutex after kill -9 of the holder")
            ensure(held_by(n, ARC_MSG, second.pid), "card %d: after the hand-off: %r" % (n, lock_line(n, ARC_MSG)))
            ensure(int(lock_line(n, ARC_MSG)["owner_died"]) == died + 1, "card %d: owner_died not counted: %r" % (n, lock_line(n, ARC_MSG)))
            second.go()
            out = second.finish("second KmdMutex")
            ensure("unlocked" in out, "card %d: %r" % (n, out[-2000:]))
            wait_for(lambda: lock_line(n, ARC_MSG)["held"] == "0", "card %d: ARC_MSG free after unlock" % n)
        finally:
            for t in (first, second):
                if t:
                    t.kill()


TT_LOCKS = os.environ.get("TT_LOCKS", "/tmp/tt-locks")


def tt_locks_status(card):
    p = subprocess.run([TT_LOCKS, "status", str(card)], capture_output=True, text=True, timeout=PATIENCE)
    ensure(p.returncode == 0, "tt-locks status %d: %d %s%s" % (card, p.returncode, p.stdout, p.stderr))
    return p.stdout


def test_tt_locks_sees_umd():
    """tt-locks status shows a running UMD's TLB windows, where UMD aimed them, its power vote, and who holds a card exclusively."""
    umd = Talker("""
import sys, tt_umd
d = tt_umd.TTDevice.create(0)
d.init_tt_device()
d.noc_read32(1, 2, 0)  # UMD's cached window, made on first use
print("ready")
sys.stdin.readline()
""")
    try:
        umd.wait_output("ready", "UMD")
        out = tt_locks_status(0)
        mine = [l.split() for l in out.splitlines() if re.match(r"\s+\d+\s+\d+[MG]\s+%d\s+python3" % umd.pid, l)]
        ensure(len(mine) >= 2, "tt-locks shows %d windows of UMD (pid %d):\n%s" % (len(mine), umd.pid, out))
        # UMD aims its windows itself; the driver reads where they point.
        ensure(any(r[-2:] == ["1,2", "0x0"] for r in mine), "no UMD window shown aimed at 1,2 0x0:\n%s" % out)
        ensure("pid %d (python3) 0x7ffe" % umd.pid in out, "tt-locks shows no power vote of UMD:\n%s" % out)
        umd.go()
        umd.finish("UMD")
    finally:
        umd.kill()
    out = tt_locks_status(0)
    ensure("TLB window" not in out, "windows left after UMD exited:\n%s" % out)
    excl = Talker("""
import os, sys
fd = os.open("/dev/tenstorrent/1", os.O_RDWR | os.O_EXCL)
print("ready")
sys.stdin.readline()
""")
    try:
        excl.wait_output("ready", "O_EXCL opener")
        out = tt_locks_status(1)
        ensure("exclusive: held by pid %d (python3)" % excl.pid in out, "tt-locks status 1:\n%s" % out)
    finally:
        excl.kill()


# ---- pyluwen -----------------------------------------------------------------------------


def test_pyluwen_detect():
    """pyluwen detects both cards; board ids and telemetry match the firmware."""
    out, _ = run_python(
        """
import json, pyluwen
chips = pyluwen.detect_chips()
print("@n", len(chips))
for c in chips:
    t = c.get_telemetry()
    print("@chip%d" % c.get_pci_interface_id(), json.dumps({
        "wh": c.as_wh() is not None, "board_id": c.board_id(), "telemetry_board_id": t.board_id,
        "heartbeat": t.timer_heartbeat}))
""",
        "pyluwen.detect_chips",
    )
    got = json_lines(out)
    ensure(got["@n"] == 2, "detect_chips found %r" % got["@n"])
    for n in CARDS:
        c, b = got["@chip%d" % n], board(n)
        ensure(c["wh"] == (n == 0), "card %d arch %r" % (n, c))
        ensure(c["board_id"] == b["board-id"] and c["telemetry_board_id"] == b["board-id"], "card %d %r vs %#x" % (n, c, b["board-id"]))


def test_luwen_kmd_probe():
    """luwen-kmd (crates.io) opens each card, reads BAR0 and moves a word through a window it allocates and configures."""
    ensure(os.path.exists(LUWEN_PROBE), "no %s" % LUWEN_PROBE)
    x, y = TENSIX
    for n in CARDS:
        set_tile_word(n, x, y, L1_ADDR, 0)
    value = 0x1A77E000
    p = subprocess.run([LUWEN_PROBE, str(x), str(y), hex(L1_ADDR), hex(value)], capture_output=True, text=True, timeout=PATIENCE)
    ensure(p.returncode == 0, "luwen-probe: %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
    lines = {int(l.split()[1]): fields(l) for l in p.stdout.splitlines() if l.startswith("card ")}
    ensure(sorted(lines) == list(CARDS), "luwen-probe cards: %s" % p.stdout)
    # The tile whose NIU luwen-probe reads: Wormhole's ARC, Blackhole's PCIe.
    niu = {0: (0, 10), 1: (2, 0)}
    for n in CARDS:
        c = lines[n]
        ensure((int(c["node_x"]), int(c["node_y"])) == niu[n], "card %d NOC_NODE_ID %r" % (n, c))
        ensure(int(c["read"], 16) == value, "card %d read back %r" % (n, c))
        ensure(tile_word(n, x, y, L1_ADDR) == value, "card %d: the emulator holds %#x" % (n, tile_word(n, x, y, L1_ADDR)))


# ---- tt-smi ------------------------------------------------------------------------------


def smi_snapshot(card, extra_env=None):
    """tt-smi -s with only `card` visible (UMD's discovery takes the first
    card's arch for all, so a host with both archs is discovered one arch
    at a time)."""
    out, _ = tool(["tt_smi", "-s", "--snapshot_no_tty"], "tt-smi -s (card %d)" % card, dict({"TT_VISIBLE_DEVICES": str(card)}, **(extra_env or {})))
    start = out.find("{")
    ensure(start >= 0, "tt-smi -s printed no JSON: %r" % out[-2000:])
    return json.loads(out[start:])


def test_tt_smi_snapshot_and_processes():
    """tt-smi -s names each card with its board id, firmware versions and AICLK, and lists a process that holds the card open."""
    holder = Talker("import os, sys\nfd = os.open('/dev/tenstorrent/0', os.O_RDWR)\nprint('open')\nsys.stdin.readline()")
    try:
        holder.wait_output("open", "holder")
        for n in CARDS:
            snap = smi_snapshot(n)
            devs = snap.get("device_info", [])
            ensure(len(devs) == 1, "card %d: %d devices in %r" % (n, len(devs), list(snap)))
            info = devs[0]["board_info"]
            b = board(n)
            ensure(int(info["board_id"], 16) == b["board-id"], "card %d board_id %r vs %#x" % (n, info.get("board_id"), b["board-id"]))
            fw = devs[0].get("firmwares", {})
            bundle = b["fw-bundle"]
            want = "%d.%d.%d" % (bundle >> 24, (bundle >> 16) & 0xFF, (bundle >> 8) & 0xFF)
            ensure(want in json.dumps(fw), "card %d firmwares %r, bundle %s" % (n, fw, want))
            eth = b["eth-fw"]
            eth = "%d.%d.%d" % ((eth >> 16) & 0xFF, (eth >> 8) & 0xFF, eth & 0xFF)
            ensure(eth in fw.get("eth_fw", ""), "card %d eth_fw %r, firmware %s" % (n, fw, eth))
            # Idle or busy: tt-smi's own open votes for power.
            aiclk = devs[0].get("telemetry", {}).get("aiclk")
            ensure(aiclk is not None and round(float(aiclk)) in (b["aiclk-idle"], b["aiclk-busy"]),
                   "card %d aiclk %r, firmware %d/%d MHz" % (n, aiclk, b["aiclk-idle"], b["aiclk-busy"]))
            if n == 0:
                procs = snap.get("processes", [])
                ensure(any(p.get("pid") == holder.pid and p.get("device") == 0 for p in procs), "holder %d not in processes %r" % (holder.pid, procs))
    finally:
        holder.kill()


def test_tt_smi_list():
    """tt-smi -ls lists each card with its board id."""
    for n in CARDS:
        # Wide enough that rich does not cut the board number.
        out, _ = tool(["tt_smi", "-ls"], "tt-smi -ls (card %d)" % n, {"TT_VISIBLE_DEVICES": str(n), "COLUMNS": "200"})
        b = board(n)
        ensure(("%016x" % b["board-id"]) in out.lower() or ("%x" % b["board-id"]) in out.lower(), "card %d board id %#x not in %r" % (n, b["board-id"], out[-2000:]))


# ---- tt-flash ----------------------------------------------------------------------------


def test_tt_flash_detection():
    """tt-flash's own detection (tt_flash.chip, over pyluwen's flash-safe detect) finds both cards, their board types and running bundles."""
    out, _ = run_python(
        """
import json
from tt_flash.chip import BhChip, detect_local_chips, resolve_board_type
for c in detect_local_chips():
    if isinstance(c, BhChip):
        # get_bundle_version also reads the SPI's boot-fs table, which the
        # emulator does not have: what it reads for the running bundle.
        v = c.get_telemetry_unchanged().fw_bundle_version
        running = [v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF]
    else:
        running = c.get_bundle_version().running
    print("@chip%d" % c.interface_id, json.dumps({
        "kind": type(c).__name__, "board_id": c.board_id(), "board_type": resolve_board_type(c),
        "running": running}))
""",
        "tt_flash.chip.detect_local_chips",
    )
    got = json_lines(out)
    ensure(sorted(got) == ["@chip0", "@chip1"], "tt-flash detected %r" % out[-2000:])
    # tt-flash's names for UPI 0x18 and 0x40 (tt_flash/utility.py).
    for n, kind, board_type in ((0, "WhChip", "NEBULA_X1"), (1, "BhChip", "P150A-1")):
        c, b = got["@chip%d" % n], board(n)
        ensure(c["kind"] == kind and c["board_id"] == b["board-id"], "card %d: %r vs %#x" % (n, c, b["board-id"]))
        ensure(c["board_type"] == board_type, "card %d board type %r" % (n, c))
        bundle = b["fw-bundle"]
        ensure(list(c["running"] or [])[:3] == [bundle >> 24, (bundle >> 16) & 0xFF, (bundle >> 8) & 0xFF],
               "card %d running bundle %r, firmware %#x" % (n, c, bundle))


TESTS = [
    ("umd/pci_device", test_umd_pci_device),
    ("umd/tt_device_telemetry", test_umd_tt_device_telemetry),
    ("umd/tile_memory", test_umd_tile_memory),
    ("umd/kmd_mutex_across_processes", test_umd_kmd_mutex_across_processes),
    ("umd/arc_messages_with_smc_msg", test_umd_and_smc_msg_coexist),
    ("umd-0.9.14/version_and_io", test_umd_next_version_and_io),
    ("umd-0.9.14/kmd_mutex_across_processes", test_umd_next_kmd_mutex_across_processes),
    ("tt-locks/sees_umd", test_tt_locks_sees_umd),
    ("pyluwen/detect", test_pyluwen_detect),
    ("luwen-kmd/probe", test_luwen_kmd_probe),
    ("tt-smi/snapshot_and_processes", test_tt_smi_snapshot_and_processes),
    ("tt-smi/list", test_tt_smi_list),
    ("tt-flash/detection", test_tt_flash_detection),
]


def main(argv):
    want = argv[1] if len(argv) > 1 else ""
    tests = [(name, f) for name, f in TESTS if want in name]
    print("1..%d" % len(tests), flush=True)
    failed = 0
    for i, (name, f) in enumerate(tests, 1):
        start = time.monotonic()
        # A step that hangs beyond its own patience shows where it is.
        faulthandler.dump_traceback_later(3 * PATIENCE, file=sys.stdout)
        try:
            f()
            print("ok %d - %s" % (i, name))
        except Exception:  # noqa: BLE001 - every failure is reported
            failed += 1
            print("not ok %d - %s" % (i, name))
            for line in traceback.format_exc().rstrip().splitlines()[-30:]:
                print("# " + line)
        faulthandler.cancel_dump_traceback_later()
        print("# %s took %.1f s" % (name, time.monotonic() - start), flush=True)
    print("# summary: %d ok, %d not ok" % (len(tests) - failed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

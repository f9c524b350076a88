//! The emulated cards as the PCIe bus shows them (tools/emu): their ids,
//! BARs and capabilities, their control channel, and resets with the
//! module bound. Facts the expectations come from are tt-kmd 2.10's and
//! the PCIe specification's, as tools/emu cites them.

use std::fs;

use crate::card::{hex, Aim, Chip, Control, Windows};
use crate::util::*;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Resource flags of include/linux/ioport.h, as the sysfs `resource` file
/// shows them.
const IORESOURCE_MEM: u64 = 0x0000_0200;
const IORESOURCE_PREFETCH: u64 = 0x0000_2000;
const IORESOURCE_MEM_64: u64 = 0x0010_0000;
const MEM_64_PREFETCH: u64 = IORESOURCE_MEM | IORESOURCE_PREFETCH | IORESOURCE_MEM_64;

/// The BARs of card `n`: (index, size, flags) of every BAR it has. As on
/// the boards (lspci of an n150 and a p150a): BAR0 and BAR4 64-bit
/// prefetchable, BAR2 (the PCIe controller's registers) 32-bit
/// non-prefetchable.
fn expected_bars(n: usize) -> &'static [(usize, u64, u64)] {
    match n {
        // Wormhole n150: BAR0 holds the TLB windows and registers, BAR4
        // 32 MiB.
        0 => &[
            (0, 512 * MIB, MEM_64_PREFETCH),
            (2, MIB, IORESOURCE_MEM),
            (4, 32 * MIB, MEM_64_PREFETCH),
        ],
        // Blackhole p150: BAR4 holds 4 GiB windows; the emulated card has
        // two of them.
        _ => &[
            (0, 512 * MIB, MEM_64_PREFETCH),
            (2, MIB, IORESOURCE_MEM),
            (4, 8 * GIB, MEM_64_PREFETCH),
        ],
    }
}

/// Reads card `n`'s config space through sysfs (all 4 KiB: root).
fn config_space(n: usize) -> Result<Vec<u8>, String> {
    let path = format!("/sys/bus/pci/devices/{}/config", bdf(n)?);
    let bytes = fs::read(&path).map_err(|e| format!("read {path}: {e}"))?;
    ensure!(
        bytes.len() == 4096,
        "{path}: {} bytes, expected the 4096 of PCIe extended config space",
        bytes.len()
    );
    Ok(bytes)
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The offset of the standard capability `id`, walking the list from 0x34.
fn capability(config: &[u8], id: u8) -> Option<usize> {
    let mut at = usize::from(config[0x34] & 0xfc);
    for _ in 0..48 {
        if at < 0x40 {
            return None;
        }
        if config[at] == id {
            return Some(at);
        }
        at = usize::from(config[at + 1] & 0xfc);
    }
    None
}

/// The offset of the extended capability `id`, walking the list from 0x100.
fn extended_capability(config: &[u8], id: u16) -> Option<usize> {
    let mut at = 0x100;
    for _ in 0..480 {
        let header = le32(config, at);
        if header == 0 || header == u32::MAX {
            return None;
        }
        if header & 0xffff == u32::from(id) {
            return Some(at);
        }
        at = (header >> 20) as usize & 0xffc;
        if at < 0x100 {
            return None;
        }
    }
    None
}

/// Each card is the chip its node says: ids in sysfs and in
/// GET_DEVICE_INFO, 64-bit prefetchable BARs of the sizes tt-kmd expects,
/// and the capabilities the driver and tt-kmd's tests use (MSI, PCIe with
/// function-level reset, AER).
pub fn ids_bars_and_capabilities() -> TestResult {
    if !emulated_cards() {
        return Ok(());
    }
    for n in 0..2 {
        let bdf = bdf(n)?;
        let (vendor, device) = card_ids(n);
        let info = ctx(open(n as u32)?.device_info(), "GET_DEVICE_INFO")?;
        ensure_eq!(
            (info.vendor_id, info.device_id),
            (vendor, device),
            "card {n} GET_DEVICE_INFO ids"
        );
        let resources = sysfs(&format!("/sys/bus/pci/devices/{bdf}/resource"))?;
        let lines: Vec<&str> = resources.lines().collect();
        for &(bar, size, flags) in expected_bars(n) {
            let fields: Vec<u64> = lines
                .get(bar)
                .ok_or_else(|| format!("card {n}: no line for BAR{bar} in resource"))?
                .split_whitespace()
                .map(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).unwrap_or(0))
                .collect();
            ensure!(fields.len() == 3, "card {n} BAR{bar}: {fields:?}");
            ensure_eq!(
                fields[1] + 1 - fields[0],
                size,
                "card {n} BAR{bar} size (start {:#x})",
                fields[0]
            );
            ensure_eq!(
                fields[2] & MEM_64_PREFETCH,
                flags,
                "card {n} BAR{bar} memory flags (all flags {:#x})",
                fields[2]
            );
        }
        let config = config_space(n)?;
        ensure_eq!(
            (le16(&config, 0), le16(&config, 2)),
            (vendor, device),
            "card {n} config space ids"
        );
        // PCI_CAP_ID_MSI, PCI_CAP_ID_EXP.
        ensure!(
            capability(&config, 0x05).is_some(),
            "card {n}: no MSI capability"
        );
        let pcie = capability(&config, 0x10)
            .ok_or_else(|| format!("card {n}: no PCI Express capability"))?;
        // Device Capabilities bit 28: Function Level Reset capable.
        ensure!(
            le32(&config, pcie + 4) & (1 << 28) != 0,
            "card {n}: DevCap {:#x} does not offer FLR",
            le32(&config, pcie + 4)
        );
        // PCI_EXT_CAP_ID_ERR.
        ensure!(
            extended_capability(&config, 0x0001).is_some(),
            "card {n}: no AER extended capability"
        );
    }
    Ok(())
}

/// Each emulator answers on its control port, and the port reaches the
/// card it is named for.
pub fn control_channel() -> TestResult {
    if !emulated_cards() {
        return Ok(());
    }
    for n in 0..2 {
        let mut control = Control::open(n)?;
        ensure_eq!(control.command("ping")?, "pong", "card {n} ping");
        let err = control.command("no-such-command");
        ensure!(err.is_err(), "card {n}: an unknown command got {err:?}");
        // The channel stays in step after an error.
        ensure_eq!(
            control.command("ping")?,
            "pong",
            "card {n} ping after an error"
        );
    }
    Ok(())
}

/// The number of resets of `kind` card `n`'s emulator has seen, from its
/// `resets` reply (`cold=N secondary-bus=N function-level=N`).
fn resets_seen(n: usize, kind: &str) -> Result<u64, String> {
    let reply = Control::open(n)?.command("resets")?;
    reply
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(kind).and_then(|v| v.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("card {n}: no {kind}=N in the resets reply {reply:?}"))
}

/// A reset through sysfs (`reset_method` then `reset`) with the module
/// bound reaches the emulated card as the kind of reset it is, and the
/// card stays bound and usable.
fn reset_through_sysfs(method: &str, kind: &str) -> TestResult {
    if !emulated_cards() {
        return Ok(());
    }
    for n in 0..2 {
        let bdf = bdf(n)?;
        let before = resets_seen(n, kind)?;
        // The reset must reach the chip, not only a counter: a window
        // register programmed now reads back as its reset value (0) after.
        let windows = Windows::open(n)?;
        let aim = Aim {
            window: 7,
            x: 1,
            y: 2,
            addr: 0x20_0000,
        };
        windows.aim(&aim);
        ensure!(
            windows.register(7).iter().any(|&w| w != 0),
            "card {n}: window 7's register reads {:x?} after it was programmed",
            windows.register(7)
        );
        sysfs_reset(&bdf, method)?;
        ensure_eq!(
            resets_seen(n, kind)?,
            before + 1,
            "card {n}: {kind} resets seen by the emulator after `{method}`"
        );
        ensure!(
            windows.register(7).iter().all(|&w| w == 0),
            "card {n}: window 7's register reads {:x?} after the reset",
            windows.register(7)
        );
        let dev = open(n as u32)?;
        let info = ctx(dev.device_info(), "GET_DEVICE_INFO after the reset")?;
        ensure_eq!(info.vendor_id, card_ids(n).0, "card {n} vendor after reset");
        let guard = ctx(dev.try_lock(5), "a lock after the reset")?;
        drop(guard);
    }
    Ok(())
}

/// Function-level reset (PCIe DevCtl "Initiate FLR").
pub fn function_level_reset() -> TestResult {
    reset_through_sysfs("flr", "function-level")
}

/// Secondary bus reset of the card's root port.
pub fn secondary_bus_reset() -> TestResult {
    reset_through_sysfs("bus", "secondary-bus")
}

/// The Tensix tile the memory tests use on each chip (tt-umd
/// wormhole_implementation.hpp / blackhole_implementation.hpp: Wormhole
/// Tensix columns 1-4 and 6-9, rows 1-5 and 7-11; Blackhole columns 1-7
/// and 10-16, rows 2-11).
fn tensix(chip: Chip) -> (u64, u64) {
    match chip {
        Chip::Wormhole => (1, 1),
        Chip::Blackhole => (1, 2),
    }
}

/// Tile memory through TLB windows, from userspace through the PCI
/// resource file: a pattern written through one window reads back through
/// another window (of another size) aimed at the same tile address, the
/// emulator sees the same bytes in the tile, bytes it puts there show up
/// through a window, and a window aimed where no tile is reads all ones.
pub fn tile_memory_through_windows() -> TestResult {
    if !emulated_cards() {
        return Ok(());
    }
    for n in 0..2 {
        let w = Windows::open(n)?;
        let (x, y) = tensix(w.chip);
        let addr = 0x1_0000;
        // Wormhole: a 1 MiB and a 2 MiB window; Blackhole: two 2 MiB ones.
        let (first, second) = match w.chip {
            Chip::Wormhole => (3, 157),
            Chip::Blackhole => (5, 9),
        };
        let a = Aim {
            window: first,
            x,
            y,
            addr: 0,
        };
        let b = Aim {
            window: second,
            x,
            y,
            addr: 0,
        };
        w.aim(&a);
        w.aim(&b);
        let pattern: Vec<u32> = (0..16)
            .map(|i| 0x5eed_0000 ^ ((n as u32) << 12) ^ (i * 0x0101_0101))
            .collect();
        for (i, v) in pattern.iter().enumerate() {
            w.write32(&a, addr + 4 * i as u64, *v);
        }
        let back: Vec<u32> = (0..16).map(|i| w.read32(&b, addr + 4 * i)).collect();
        ensure_eq!(back, pattern, "card {n}: read through window {second}");
        let bytes: Vec<u8> = pattern.iter().flat_map(|v| v.to_le_bytes()).collect();
        let seen = Control::open(n)?.command(&format!("noc-read {x} {y} {addr:#x} 64"))?;
        ensure_eq!(
            seen,
            hex(&bytes),
            "card {n}: the tile as the emulator sees it"
        );
        // The other way: the emulator writes the tile, the host reads it.
        let put = [0xa5u8, 0x5a, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66];
        Control::open(n)?.command(&format!("noc-write {x} {y} 0x20000 {}", hex(&put)))?;
        ensure_eq!(
            (w.read32(&a, 0x20000), w.read32(&a, 0x20004)),
            (0x2211_5aa5, 0x6655_4433),
            "card {n}: what the emulator put in the tile"
        );
        // Unwritten tile memory reads as zeros.
        ensure_eq!(w.read32(&b, 0x30000), 0, "card {n}: unwritten L1");
        // No tile at (40, 40): the NOC answers all ones.
        let nowhere = Aim {
            window: first,
            x: 40,
            y: 40,
            addr: 0,
        };
        w.aim(&nowhere);
        ensure_eq!(
            w.read32(&nowhere, addr),
            u32::MAX,
            "card {n}: a read where no tile is"
        );
    }
    Ok(())
}

/// Wormhole's reset unit in BAR0 (tt-kmd 2.10 wormhole.c) and the mailbox
/// registers in it.
const WH_RESET_UNIT: usize = 0x1FF3_0000;
const WH_SCRATCH3: usize = WH_RESET_UNIT + 0x60 + 3 * 4;
const WH_SCRATCH5: usize = WH_RESET_UNIT + 0x60 + 5 * 4;
const WH_ARC_MISC_CNTL: usize = WH_RESET_UNIT + 0x100;

/// Wormhole's ARC mailbox through BAR0 as tt-kmd, tt-umd and luwen use it
/// (tt-kmd 2.10 wormhole.c, tt-umd wormhole_arc_messenger.cpp): arguments
/// in SCRATCH[3], `0xAA00 | code` in SCRATCH[5], bit 16 of ARC_MISC_CNTL
/// rings the firmware; the answer is `code | exit << 16` in SCRATCH[5]
/// and the return value in SCRATCH[3]. TEST (0x90) answers its argument
/// plus one; an unknown code is answered with all ones.
fn wormhole_arc_message(w: &Windows, code: u32, arg: u32) -> Result<(u32, u32), String> {
    let bar = &w.bar0;
    let misc = wormhole_doorbell_idle(w)?;
    bar.write32(WH_SCRATCH3, arg);
    bar.write32(WH_SCRATCH5, 0xAA00 | code);
    bar.write32(WH_ARC_MISC_CNTL, misc | 1 << 16);
    let start = std::time::Instant::now();
    loop {
        let status = bar.read32(WH_SCRATCH5);
        if status != 0xAA00 | code {
            return Ok((status, bar.read32(WH_SCRATCH3)));
        }
        ensure!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "ARC did not answer message {code:#x} within 5 s"
        );
    }
}

/// Waits until Wormhole's ARC doorbell (bit 16 of ARC_MISC_CNTL) is down
/// and returns the register. The driver rings the same doorbell for its
/// own queue messages (the power state of every open and close), and the
/// firmware lowers it only when it takes the message, so a scenario that
/// just opened or closed the card can find it still up.
fn wormhole_doorbell_idle(w: &Windows) -> Result<u32, String> {
    // A power message the driver posted for an open or close goes out
    // after it returned.
    super::power::power_settled(0)?;
    let start = std::time::Instant::now();
    loop {
        let misc = w.bar0.read32(WH_ARC_MISC_CNTL);
        if misc & (1 << 16) == 0 {
            return Ok(misc);
        }
        ensure!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "ARC_MISC_CNTL {misc:#x}: the doorbell stayed up for 5 s"
        );
    }
}

/// Blackhole's ARC message queue as tt-umd (blackhole_arc_message_queue.cpp)
/// and tt-kmd (msgqueue.c) drive it, through a TLB window aimed at the ARC
/// tile (8, 0): scratch RAM 11 (reset unit + 0x42C) points at the queue
/// control block {queue base, entries}; each queue is a 32-byte header
/// (host write pointer at +0, host read pointer at +4, firmware pointers
/// at +0x10/+0x14) then `entries` requests and `entries` responses of 32
/// bytes; pointers count modulo 2 x entries; writing 1 << 16 to
/// ARC_MISC_CNTL rings the firmware. Returns the response's first two
/// words.
fn blackhole_arc_message(w: &Windows, code: u32, arg: u32) -> Result<(u32, u32), String> {
    // Queue 0 is the driver's: no power message of its may be on the way
    // (one goes out after the open or close that caused it returned).
    super::power::power_settled(1)?;
    const ARC_X: u64 = 8;
    const ARC_Y: u64 = 0;
    let regs = Aim {
        window: 20,
        x: ARC_X,
        y: ARC_Y,
        addr: 0x8000_0000,
    };
    w.aim(&regs);
    let qcb = u64::from(w.read32(&regs, 0x8003_042C));
    let csm = Aim {
        window: 21,
        x: ARC_X,
        y: ARC_Y,
        addr: qcb,
    };
    w.aim(&csm);
    let base = u64::from(w.read32(&csm, qcb));
    let entries = u64::from(w.read32(&csm, qcb + 4) & 0xFF);
    ensure!(entries > 0, "queue control block at {qcb:#x}: no entries");
    // Queue 0.
    let queue = base;
    let q = Aim {
        window: 22,
        x: ARC_X,
        y: ARC_Y,
        addr: queue,
    };
    w.aim(&q);
    let wptr = u64::from(w.read32(&q, queue));
    let slot = queue + 32 + (wptr % entries) * 32;
    w.write32(&q, slot, code);
    w.write32(&q, slot + 4, arg);
    for i in 2..8 {
        w.write32(&q, slot + 4 * i, 0);
    }
    w.write32(&q, queue, ((wptr + 1) % (2 * entries)) as u32);
    w.write32(&regs, 0x8003_0100, 1 << 16);
    let start = std::time::Instant::now();
    let rptr = u64::from(w.read32(&q, queue + 4));
    while u64::from(w.read32(&q, queue + 0x14)) == rptr {
        ensure!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "ARC did not answer message {code:#x} within 5 s"
        );
    }
    let response = queue + 32 + (entries + rptr % entries) * 32;
    let answer = (w.read32(&q, response), w.read32(&q, response + 4));
    w.write32(&q, queue + 4, ((rptr + 1) % (2 * entries)) as u32);
    Ok(answer)
}

/// An ARC firmware message and its answer on each card, the way the C
/// driver and UMD send them.
pub fn arc_message() -> TestResult {
    if !emulated_cards() {
        return Ok(());
    }
    const TEST: u32 = 0x90;
    let wh = Windows::open(0)?;
    let (status, value) = wormhole_arc_message(&wh, TEST, 41)?;
    ensure_eq!(
        (status & 0xFFFF, status >> 16, value),
        (TEST, 0, 42),
        "Wormhole TEST(41)"
    );
    let (status, _) = wormhole_arc_message(&wh, 0xEE, 0)?;
    ensure_eq!(status, u32::MAX, "Wormhole: an unknown message");
    let bh = Windows::open(1)?;
    let (word0, value) = blackhole_arc_message(&bh, TEST, 41)?;
    // Response word 0: exit code in its low byte (0 = done).
    ensure_eq!(
        (word0 & 0xFF, value),
        (0, 42),
        "Blackhole TEST(41): response {word0:#x}"
    );
    let (word0, _) = blackhole_arc_message(&bh, 0xEE, 0)?;
    ensure_eq!(word0 & 0xFF, 0xFF, "Blackhole: an unknown message");
    Ok(())
}

/// A card that falls off the bus (the emulator's `vanish`): every read
/// returns all ones, as a surprise-removed PCIe device does; when it comes
/// back its memory is intact.
pub fn vanish_reads_all_ones() -> TestResult {
    if !emulated_cards() {
        return Ok(());
    }
    for n in 0..2 {
        let w = Windows::open(n)?;
        let (x, y) = tensix(w.chip);
        let a = Aim {
            window: 2,
            x,
            y,
            addr: 0,
        };
        w.aim(&a);
        w.write32(&a, 0x4000, 0x1234_5678);
        // The write is posted, and the emulator's control socket is another
        // path than QEMU's to the card: read it back so that it has reached
        // the card before the card vanishes (else a loaded host may deliver
        // it while the card is gone, and it is dropped).
        ensure_eq!(
            w.read32(&a, 0x4000),
            0x1234_5678,
            "card {n}: memory before it vanishes"
        );
        let mut control = Control::open(n)?;
        control.command("vanish")?;
        let gone = (w.read32(&a, 0x4000), w.bar0.read32(0x1FC0_0000));
        let back = control.command("reappear");
        back?;
        ensure_eq!(gone, (u32::MAX, u32::MAX), "card {n}: reads while vanished");
        ensure_eq!(
            w.read32(&a, 0x4000),
            0x1234_5678,
            "card {n}: memory after it came back"
        );
    }
    Ok(())
}

/// A hung ARC firmware (the emulator's `arc-hang`) leaves a message
/// unanswered, as the C driver's and UMD's timeouts expect; when it
/// resumes it answers the message that was rung meanwhile.
pub fn arc_hang_and_resume() -> TestResult {
    if !emulated_cards() {
        return Ok(());
    }
    const TEST: u32 = 0x90;
    let wh = Windows::open(0)?;
    let mut control = Control::open(0)?;
    // Hanging the firmware with the open's power message still unserved
    // would leave the doorbell up and the test's message unrung.
    wormhole_doorbell_idle(&wh)?;
    control.command("arc-hang")?;
    let hung = wormhole_arc_message(&wh, TEST, 7);
    let resumed = control.command("arc-resume");
    ensure!(
        matches!(&hung, Err(e) if e.contains("did not answer")),
        "a hung ARC answered: {hung:?}"
    );
    resumed?;
    let status = wh.bar0.read32(WH_SCRATCH5);
    ensure_eq!(
        (status & 0xFFFF, wh.bar0.read32(WH_SCRATCH3)),
        (TEST, 8),
        "the message rung while ARC hung, answered on resume (SCRATCH5 {status:#x})"
    );
    // And it answers new messages again.
    let (status, value) = wormhole_arc_message(&wh, TEST, 99)?;
    ensure_eq!(
        (status & 0xFFFF, value),
        (TEST, 100),
        "TEST(99) after resume"
    );
    Ok(())
}

/// An AER error raised on the card (the emulator's `aer`) shows in its
/// AER status registers and PCIe Device Status as the spec lays them out
/// (PCIe r5 7.8.4: Uncorrectable Error Status at +0x04, Correctable
/// Error Status at +0x10; Device Status bit 0 Correctable, bit 2 Fatal
/// Error Detected), and writing ones clears them (RW1C).
pub fn aer_errors_are_reported() -> TestResult {
    if !emulated_cards() {
        return Ok(());
    }
    use std::os::unix::fs::FileExt;
    for n in 0..2 {
        let path = format!("/sys/bus/pci/devices/{}/config", bdf(n)?);
        let before = config_space(n)?;
        let aer = extended_capability(&before, 0x0001)
            .ok_or_else(|| format!("card {n}: no AER capability"))?;
        let pcie =
            capability(&before, 0x10).ok_or_else(|| format!("card {n}: no PCIe capability"))?;
        ensure_eq!(
            le32(&before, aer + 0x10),
            0,
            "card {n}: correctable status at start"
        );
        Control::open(n)?.command("aer correctable")?;
        Control::open(n)?.command("aer fatal")?;
        let after = config_space(n)?;
        let correctable = le32(&after, aer + 0x10);
        let uncorrectable = le32(&after, aer + 0x04);
        let devsta = le16(&after, pcie + 0x0a);
        ensure!(
            correctable != 0,
            "card {n}: no correctable error status after `aer correctable`"
        );
        ensure!(
            uncorrectable != 0,
            "card {n}: no uncorrectable error status after `aer fatal`"
        );
        ensure_eq!(
            devsta & 0b101,
            0b101,
            "card {n}: DevSta {devsta:#x} correctable and fatal detected"
        );
        let file = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| format!("open {path} for writing: {e}"))?;
        for (at, value) in [(aer + 0x10, correctable), (aer + 0x04, uncorrectable)] {
            file.write_all_at(&value.to_le_bytes(), at as u64)
                .map_err(|e| format!("write {path} at {at:#x}: {e}"))?;
        }
        file.write_all_at(&devsta.to_le_bytes(), (pcie + 0x0a) as u64)
            .map_err(|e| format!("write {path} DevSta: {e}"))?;
        let cleared = config_space(n)?;
        ensure_eq!(
            (
                le32(&cleared, aer + 0x10),
                le32(&cleared, aer + 0x04),
                le16(&cleared, pcie + 0x0a) & 0b101
            ),
            (0, 0, 0),
            "card {n}: AER status after writing ones back"
        );
    }
    Ok(())
}

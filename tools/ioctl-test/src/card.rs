//! The emulated cards from the test's side: their BARs through the PCI
//! resource files (what userspace had before the module mapped windows
//! itself) and each emulator's control socket, which the VM harness wires
//! to a guest serial port (`TT_CARDn_CONTROL`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

/// How long the emulator may take to answer a control command. Generous:
/// the host may be busy, and a reply is a few bytes over a serial port.
const CONTROL_PATIENCE: Duration = Duration::from_secs(20);

/// A shared mapping of device memory: a BAR through its PCI resource file
/// ([`Mmio::bar`]) or the module's own mmap offsets ([`Mmio::new`]).
#[derive(Debug)]
pub struct Mmio {
    base: *mut u8,
    len: usize,
}

impl Mmio {
    /// Maps `len` bytes of `file` from `offset`, shared, read-write.
    pub fn new(file: &impl AsRawFd, offset: u64, len: usize) -> io::Result<Mmio> {
        Mmio::map(
            file,
            offset,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
        )
    }

    /// Maps `len` bytes of `file` from `offset` with `prot` and `flags`
    /// as given (the mapping tests try what a hostile caller would).
    pub fn map(
        file: &impl AsRawFd,
        offset: u64,
        len: usize,
        prot: i32,
        flags: i32,
    ) -> io::Result<Mmio> {
        // SAFETY: a new mapping of an open file, at an address the kernel
        // picks; the mapping outlives the file descriptor.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                flags,
                file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmio {
            base: base.cast(),
            len,
        })
    }

    /// Maps `len` bytes of BAR `bar` of the PCI device `bdf` from its start,
    /// through `/sys/bus/pci/devices/BDF/resourceN` (the kernel checks that
    /// it fits the BAR).
    pub fn bar(bdf: &str, bar: u32, len: usize) -> Result<Mmio, String> {
        let path = format!("/sys/bus/pci/devices/{bdf}/resource{bar}");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_SYNC)
            .open(&path)
            .map_err(|e| format!("open {path}: {e}"))?;
        Mmio::new(&file, 0, len).map_err(|e| format!("mmap {path} ({len} bytes): {e}"))
    }

    /// The address the mapping starts at.
    pub fn addr(&self) -> usize {
        self.base as usize
    }

    fn check(&self, offset: usize, size: usize) {
        assert!(
            offset % size == 0 && offset + size <= self.len,
            "access at {offset:#x} outside the {:#x}-byte mapping",
            self.len
        );
    }

    /// A 32-bit read at `offset`, as one access on the bus.
    pub fn read32(&self, offset: usize) -> u32 {
        self.check(offset, 4);
        // SAFETY: in bounds and aligned (checked), in a live mapping (a
        // revoked one raises SIGBUS, which the revocation tests look for).
        unsafe { std::ptr::read_volatile(self.base.add(offset).cast::<u32>()) }
    }

    /// A 32-bit write at `offset`, as one access on the bus.
    pub fn write32(&self, offset: usize, value: u32) {
        self.check(offset, 4);
        // SAFETY: as in `read32`.
        unsafe { std::ptr::write_volatile(self.base.add(offset).cast::<u32>(), value) }
    }
}

impl Drop for Mmio {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Bytes as lower-case hex, as the emulator's control protocol writes them.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The control channel of card `n`'s emulator.
pub struct Control {
    port: File,
    card: usize,
}

impl Control {
    /// Opens card `n`'s control port (`TT_CARDn_CONTROL`).
    pub fn open(card: usize) -> Result<Control, String> {
        let var = format!("TT_CARD{card}_CONTROL");
        let path = std::env::var(&var).map_err(|_| {
            format!("{var} is unset: card {card} is not an emulated card with a control port")
        })?;
        let port = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| format!("open {path}: {e}"))?;
        Ok(Control { port, card })
    }

    /// Sends one command line; returns what follows `ok` in the reply, or
    /// the emulator's `err` line as an error.
    pub fn command(&mut self, line: &str) -> Result<String, String> {
        // Whatever an earlier, abandoned command left unread would be
        // taken for this command's reply.
        let mut junk = [0u8; 256];
        while matches!(self.port.read(&mut junk), Ok(n) if n > 0) {}
        self.port
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|e| format!("card {} control: write {line:?}: {e}", self.card))?;
        let reply = self.read_line(line)?;
        match reply.split_once(' ').unwrap_or((reply.as_str(), "")) {
            ("ok", rest) => Ok(rest.to_string()),
            _ => Err(format!("card {} emulator: {line:?}: {reply}", self.card)),
        }
    }

    fn read_line(&mut self, line: &str) -> Result<String, String> {
        let start = Instant::now();
        let mut reply = Vec::new();
        loop {
            let left = CONTROL_PATIENCE.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(format!(
                    "card {} control: no reply to {line:?} within {CONTROL_PATIENCE:?} (got {:?})",
                    self.card,
                    String::from_utf8_lossy(&reply)
                ));
            }
            let mut pfd = libc::pollfd {
                fd: self.port.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(1000) as i32) };
            let mut byte = [0u8; 1];
            match self.port.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => {
                    return Ok(String::from_utf8_lossy(&reply)
                        .trim_end_matches('\r')
                        .to_string())
                }
                Ok(1) => reply.push(byte[0]),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("card {} control: read: {e}", self.card)),
            }
        }
    }
}

/// Which chip a card is, for the register layouts below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chip {
    Wormhole,
    Blackhole,
}

/// Where a card's TLB window configuration registers start in BAR0
/// (tt-kmd 2.10 wormhole.c and blackhole.c: TLB_REGS_START 0x1FC00000).
const TLB_REGS: usize = 0x1FC0_0000;

/// A TLB window aimed at a NOC tile: (window index, x, y, tile address).
/// Unicast, NOC 0, default ordering.
pub struct Aim {
    pub window: usize,
    pub x: u64,
    pub y: u64,
    pub addr: u64,
}

impl Chip {
    /// The size of window `index` and its offset in BAR0.
    ///
    /// Wormhole (tt-kmd wormhole.c, tt-umd wormhole_implementation.hpp):
    /// 156 windows of 1 MiB, then 10 of 2 MiB, then 20 of 16 MiB, from
    /// BAR0 offset 0. Blackhole (blackhole.c): 202 windows of 2 MiB.
    pub fn window(self, index: usize) -> (usize, usize) {
        const MIB: usize = 1 << 20;
        match self {
            Chip::Wormhole if index < 156 => (MIB, index * MIB),
            Chip::Wormhole if index < 166 => (2 * MIB, 156 * MIB + (index - 156) * 2 * MIB),
            Chip::Wormhole => (16 * MIB, 176 * MIB + (index - 166) * 16 * MIB),
            Chip::Blackhole => (2 * MIB, index * 2 * MIB),
        }
    }

    /// The register words that aim a window, low word first, and their
    /// BAR0 offset.
    ///
    /// Wormhole: one 64-bit register per window, 8 bytes apart: the
    /// window's address bits above its size (36 - log2(size) bits), then
    /// x_end, y_end, x_start, y_start (6 bits each), noc_sel, mcast,
    /// ordering (2), linked, static_vc (tt-umd TLB_1M/2M/16M_OFFSET,
    /// tt-kmd noc_tlb_non_address_bits). Blackhole 2 MiB windows: 96 bits,
    /// 12 bytes apart: 43 address bits, then x_end, y_end, x_start,
    /// y_start (6 bits each), noc (2), mcast, ordering (2), linked,
    /// static_vc (tt-kmd blackhole.c TLB_2M_REG).
    pub fn tlb_register(self, aim: &Aim) -> (usize, Vec<u32>) {
        let (size, _) = self.window(aim.window);
        let shift = size.trailing_zeros();
        let (address_bits, stride) = match self {
            Chip::Wormhole => (36 - shift, 8),
            Chip::Blackhole => (64 - shift, 12),
        };
        let fields: u128 = u128::from(aim.addr >> shift)
            | u128::from(aim.x) << address_bits
            | u128::from(aim.y) << (address_bits + 6);
        let words = stride / 4;
        let value = (0..words).map(|w| (fields >> (32 * w)) as u32).collect();
        (TLB_REGS + aim.window * stride, value)
    }
}

/// A card's BAR0 seen as its TLB windows.
pub struct Windows {
    pub bar0: Mmio,
    pub chip: Chip,
}

impl Windows {
    /// Maps BAR0 of card `n` (card 0 is the Wormhole, card 1 the Blackhole).
    pub fn open(n: usize) -> Result<Windows, String> {
        let chip = if n == 0 {
            Chip::Wormhole
        } else {
            Chip::Blackhole
        };
        let bdf = crate::util::bdf(n)?;
        Ok(Windows {
            bar0: Mmio::bar(&bdf, 0, 512 << 20)?,
            chip,
        })
    }

    /// Programs the window's configuration register.
    pub fn aim(&self, aim: &Aim) {
        let (at, words) = self.chip.tlb_register(aim);
        for (i, w) in words.iter().enumerate() {
            self.bar0.write32(at + 4 * i, *w);
        }
    }

    /// The window's configuration register as read back.
    pub fn register(&self, window: usize) -> Vec<u32> {
        let (at, words) = self.chip.tlb_register(&Aim {
            window,
            x: 0,
            y: 0,
            addr: 0,
        });
        (0..words.len())
            .map(|i| self.bar0.read32(at + 4 * i))
            .collect()
    }

    /// BAR0 offset of tile address `addr` through a window aimed at it.
    pub fn offset(&self, aim: &Aim, addr: u64) -> usize {
        let (size, base) = self.chip.window(aim.window);
        // The window shows the size-aligned block that holds aim.addr.
        let start = aim.addr & !(size as u64 - 1);
        assert!(
            addr >= start && addr - start < size as u64,
            "tile address {addr:#x} is outside window {} ({start:#x} + {size:#x})",
            aim.window
        );
        base + (addr - start) as usize
    }

    pub fn read32(&self, aim: &Aim, addr: u64) -> u32 {
        self.bar0.read32(self.offset(aim, addr))
    }

    pub fn write32(&self, aim: &Aim, addr: u64, value: u32) {
        self.bar0.write32(self.offset(aim, addr), value)
    }
}

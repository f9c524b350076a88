// SPDX-License-Identifier: GPL-2.0
//! The control socket: faults on request and a view from the emulator's
//! side, as a line protocol.
//!
//! QEMU connects to it as a chardev socket client wired to a guest serial
//! port, so the tests inside the VM write one command line to the port and
//! read one reply line (`ok ...` or `err ...`). A person can use it too
//! (`socat - UNIX-CONNECT:PATH`). Connections are accepted again and again:
//! QEMU reconnects, and several clients may be connected at once.
//!
//! The guest's tty may echo what it receives: our own replies then come
//! back as input. Lines starting with `ok` or `err` are therefore never
//! taken as commands and get no reply, which stops an echo loop; the tests
//! should still put the port in raw mode without echo (`stty raw -echo`).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::config_space::AerError;
use crate::server::{lock, Shared};
use crate::Arch;

/// Longest read a single command returns (noc-read, dma-read), in bytes:
/// the hex reply line stays 8 KiB.
pub const MAX_READ: usize = 4096;
/// A delay at or above this would approach QEMU's 5 s `x-msg-timeout`,
/// after which a late reply breaks the connection for good.
pub const MAX_DELAY_MS: u32 = 4000;
/// Longest command line accepted.
const MAX_LINE: usize = 3 * MAX_READ + 256;

/// One control command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Ping,
    Help,
    Status,
    /// Reads return all ones, writes are dropped (config space too).
    Vanish,
    Reappear,
    /// The emulator exits with this status: QEMU sees a broken pipe, the
    /// card is gone. 0 is a removal a test asked for; anything else stands
    /// for an emulator that crashed, which the VM harness must report.
    Exit(u8),
    /// The ARC firmware stops answering.
    ArcHang,
    ArcResume,
    /// The ARC firmware gets to its message queues this many milliseconds
    /// after their doorbell (0: at once).
    ArcSlow(u32),
    /// The ARC firmware moves its message queues elsewhere in CSM (and
    /// back, the next time).
    ArcMoveQueues,
    /// Delay each BAR access reply by this many milliseconds.
    Delay(u32),
    Aer(AerError),
    NocRead {
        x: u8,
        y: u8,
        addr: u64,
        len: usize,
    },
    NocWrite {
        x: u8,
        y: u8,
        addr: u64,
        data: Vec<u8>,
    },
    /// The card reading host memory through its PCIe tile.
    DmaRead {
        iova: u64,
        len: usize,
    },
    DmaWrite {
        iova: u64,
        data: Vec<u8>,
    },
    /// Raise the MSI vector (as the card would).
    Msi,
    /// Ask QEMU to hot-unplug the card (the vfio-user REQ interrupt).
    Unplug,
    /// Reset counts per kind.
    Resets,
    /// The power-setting messages the firmware received.
    Power,
    /// How many TEST messages the firmware answered on each channel.
    ArcTests,
    /// What the board's firmware reports about it: ids and versions.
    Board,
    /// BAR reads and writes served since the emulator started.
    Accesses,
}

const HELP: &str = "commands: ping | help | status | vanish | reappear | exit [STATUS] | \
arc-hang | arc-resume | arc-slow MS | arc-move-queues | delay MS | aer correctable|nonfatal|fatal | \
noc-read X Y ADDR LEN | noc-write X Y ADDR HEX | dma-read IOVA LEN | \
dma-write IOVA HEX | msi | unplug | resets | power | arc-tests | board | accesses \
(numbers decimal or 0x-hex)";

/// Parses a number, decimal or `0x` hexadecimal.
fn number(s: &str, what: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    };
    parsed.map_err(|_| format!("bad {what} '{s}'"))
}

fn coordinate(s: &str, what: &str) -> Result<u8, String> {
    let v = number(s, what)?;
    u8::try_from(v).map_err(|_| format!("{what} {v} is out of range"))
}

fn length(s: &str) -> Result<usize, String> {
    let v = number(s, "length")?;
    match usize::try_from(v) {
        Ok(n) if (1..=MAX_READ).contains(&n) => Ok(n),
        _ => Err(format!("length must be 1..={MAX_READ}")),
    }
}

/// Decodes a hex byte string (two digits a byte, no prefix).
pub fn hex_decode(s: &str) -> Result<Vec<u8>, String> {
    if s.is_empty() || s.len() % 2 != 0 {
        return Err("hex data needs an even, non-zero number of digits".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("bad hex data at digit {i}"))
        })
        .collect()
}

/// Encodes bytes as lowercase hex.
pub fn hex_encode(data: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(data.len() * 2);
    for b in data {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn data(s: &str) -> Result<Vec<u8>, String> {
    let d = hex_decode(s)?;
    if d.len() > MAX_READ {
        return Err(format!("at most {MAX_READ} bytes at a time"));
    }
    Ok(d)
}

/// Parses one line. `Ok(None)`: not a command (blank, or one of our own
/// replies echoed back), to be ignored without a reply.
pub fn parse(line: &str) -> Result<Option<Command>, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((&name, args)) = words.split_first() else {
        return Ok(None);
    };
    if name == "ok" || name == "err" {
        return Ok(None);
    }
    let want = |n: usize, usage: &str| -> Result<(), String> {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!("usage: {usage}"))
        }
    };
    let cmd = match name {
        "ping" => want(0, "ping").map(|_| Command::Ping)?,
        "help" => want(0, "help").map(|_| Command::Help)?,
        "status" => want(0, "status").map(|_| Command::Status)?,
        "vanish" => want(0, "vanish").map(|_| Command::Vanish)?,
        "reappear" => want(0, "reappear").map(|_| Command::Reappear)?,
        "exit" if args.is_empty() => Command::Exit(0),
        "exit" => {
            want(1, "exit [STATUS]")?;
            let status = number(args[0], "exit")?;
            Command::Exit(u8::try_from(status).map_err(|_| "exit: STATUS is 0-255".to_string())?)
        }
        "arc-hang" => want(0, "arc-hang").map(|_| Command::ArcHang)?,
        "arc-resume" => want(0, "arc-resume").map(|_| Command::ArcResume)?,
        "arc-slow" => {
            want(1, "arc-slow MS")?;
            let ms = number(args[0], "arc-slow")?;
            Command::ArcSlow(
                u32::try_from(ms).map_err(|_| "arc-slow: MS is too large".to_string())?,
            )
        }
        "arc-move-queues" => want(0, "arc-move-queues").map(|_| Command::ArcMoveQueues)?,
        "msi" => want(0, "msi").map(|_| Command::Msi)?,
        "unplug" => want(0, "unplug").map(|_| Command::Unplug)?,
        "resets" => want(0, "resets").map(|_| Command::Resets)?,
        "power" => want(0, "power").map(|_| Command::Power)?,
        "arc-tests" => want(0, "arc-tests").map(|_| Command::ArcTests)?,
        "board" => want(0, "board").map(|_| Command::Board)?,
        "accesses" => want(0, "accesses").map(|_| Command::Accesses)?,
        "delay" => {
            want(1, "delay MS")?;
            let ms = number(args[0], "delay")?;
            if ms >= u64::from(MAX_DELAY_MS) {
                return Err(format!(
                    "delay must be below {MAX_DELAY_MS} ms: QEMU drops the connection after 5000 ms"
                ));
            }
            Command::Delay(ms as u32)
        }
        "aer" => {
            want(1, "aer correctable|nonfatal|fatal")?;
            Command::Aer(match args[0] {
                "correctable" => AerError::Correctable,
                "nonfatal" => AerError::NonFatal,
                "fatal" => AerError::Fatal,
                other => return Err(format!("unknown AER error kind '{other}'")),
            })
        }
        "noc-read" => {
            want(4, "noc-read X Y ADDR LEN")?;
            Command::NocRead {
                x: coordinate(args[0], "x")?,
                y: coordinate(args[1], "y")?,
                addr: number(args[2], "address")?,
                len: length(args[3])?,
            }
        }
        "noc-write" => {
            want(4, "noc-write X Y ADDR HEX")?;
            Command::NocWrite {
                x: coordinate(args[0], "x")?,
                y: coordinate(args[1], "y")?,
                addr: number(args[2], "address")?,
                data: data(args[3])?,
            }
        }
        "dma-read" => {
            want(2, "dma-read IOVA LEN")?;
            Command::DmaRead {
                iova: number(args[0], "IOVA")?,
                len: length(args[1])?,
            }
        }
        "dma-write" => {
            want(2, "dma-write IOVA HEX")?;
            Command::DmaWrite {
                iova: number(args[0], "IOVA")?,
                data: data(args[1])?,
            }
        }
        other => return Err(format!("unknown command '{other}' (try help)")),
    };
    Ok(Some(cmd))
}

/// What a command leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Send this line.
    Reply(String),
    /// Send this line, then end the emulator with this status.
    ReplyThenExit(String, u8),
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Carries out a command on the card.
pub fn execute(cmd: Command, shared: &Shared) -> Outcome {
    // What a command shows comes after any reset the firmware made due.
    shared.catch_up();
    let ok = |s: String| Outcome::Reply(format!("ok {s}").trim_end().to_string());
    match cmd {
        Command::Ping => ok("pong".into()),
        Command::Help => ok(HELP.into()),
        Command::Status => {
            let arch = match shared.arch {
                Arch::Wormhole => "wormhole",
                Arch::Blackhole => "blackhole",
            };
            let bus_master = lock(&shared.config).bus_master_enabled();
            ok(format!(
                "arch={arch} vanished={} delay-ms={} arc-responding={} bus-master={} msi={} dma-mappings={}",
                yes_no(shared.vanished.load(Ordering::SeqCst)),
                shared.delay_ms.load(Ordering::SeqCst),
                yes_no(shared.arc_responding.load(Ordering::SeqCst)),
                yes_no(bus_master),
                if shared.interrupts.is_enabled(vfio_bindings::bindings::vfio::VFIO_PCI_MSI_IRQ_INDEX, 0) {
                    "enabled"
                } else {
                    "disabled"
                },
                shared.host.mapping_count(),
            ))
        }
        Command::Vanish => {
            shared.set_vanished(true);
            ok("vanished".into())
        }
        Command::Reappear => {
            shared.set_vanished(false);
            ok("present".into())
        }
        Command::Exit(status) => Outcome::ReplyThenExit("ok exiting".into(), status),
        Command::ArcHang | Command::ArcResume => {
            let responding = cmd == Command::ArcResume;
            // Our own record gates the resets the firmware carries out
            // (Blackhole's interface-timer reset); the card stops answering
            // firmware messages.
            shared.arc_responding.store(responding, Ordering::SeqCst);
            lock(&shared.card).set_arc_responding(responding);
            ok(if responding {
                "arc responding"
            } else {
                "arc hung"
            }
            .into())
        }
        Command::ArcSlow(ms) => {
            lock(&shared.card).set_arc_queue_latency(std::time::Duration::from_millis(ms.into()));
            ok(format!("arc queue latency {ms} ms"))
        }
        Command::ArcMoveQueues => {
            let addr = lock(&shared.card).move_arc_queues();
            ok(format!("arc queues at {addr:#x}"))
        }
        Command::Delay(ms) => {
            shared.delay_ms.store(ms, Ordering::SeqCst);
            ok(format!("delay {ms} ms"))
        }
        Command::Aer(kind) => {
            lock(&shared.config).raise_aer(kind);
            let name = match kind {
                AerError::Correctable => "correctable",
                AerError::NonFatal => "nonfatal",
                AerError::Fatal => "fatal",
            };
            ok(format!("aer {name} logged"))
        }
        Command::NocRead { x, y, addr, len } => {
            let mut buf = vec![0; len];
            lock(&shared.card).noc_read(x, y, addr, &mut buf);
            ok(hex_encode(&buf))
        }
        Command::NocWrite { x, y, addr, data } => {
            lock(&shared.card).noc_write(x, y, addr, &data);
            ok(format!("{} bytes written", data.len()))
        }
        Command::DmaRead { .. } | Command::DmaWrite { .. }
            if !lock(&shared.config).bus_master_enabled() =>
        {
            Outcome::Reply("err bus mastering is disabled (Command register bit 2)".into())
        }
        Command::DmaRead { iova, len } => {
            let mut buf = vec![0; len];
            match shared.host.read(iova, &mut buf) {
                Ok(()) => ok(hex_encode(&buf)),
                Err(e) => Outcome::Reply(format!("err {e}")),
            }
        }
        Command::DmaWrite { iova, data } => match shared.host.write(iova, &data) {
            Ok(()) => ok(format!("{} bytes written", data.len())),
            Err(e) => Outcome::Reply(format!("err {e}")),
        },
        Command::Msi => {
            if shared.interrupts.raise_msi(0) {
                ok("msi sent".into())
            } else {
                Outcome::Reply("err MSI is not enabled by the guest".into())
            }
        }
        Command::Unplug => {
            if shared.interrupts.request_unplug() {
                ok("unplug requested".into())
            } else {
                Outcome::Reply("err QEMU has not set up its unplug request notifier".into())
            }
        }
        Command::Resets => {
            let r = lock(&shared.card).resets();
            ok(format!(
                "cold={} secondary-bus={} function-level={}",
                r.cold, r.secondary_bus, r.function_level,
            ))
        }
        Command::Board => {
            let card = lock(&shared.card);
            let b = card.noc().arc().board();
            ok(format!(
                "name={} board-id=0x{:016x} upi=0x{:x} fw-bundle=0x{:08x} arc-fw=0x{:08x} \
                 eth-fw=0x{:08x} asic-id=0x{:016x} aiclk-idle={} aiclk-busy={}",
                b.name,
                b.board_id,
                b.upi(),
                b.fw_bundle_version,
                b.cm_fw_version,
                b.eth_fw_version,
                b.asic_id,
                b.aiclk_idle_mhz,
                b.aiclk_busy_mhz,
            ))
        }
        Command::Accesses => {
            let counts: Vec<String> = [0, 2, 4]
                .iter()
                .map(|&bar| {
                    let (reads, writes) = shared.bar_accesses.of(bar);
                    format!("bar{bar}-reads={reads} bar{bar}-writes={writes}")
                })
                .collect();
            ok(counts.join(" "))
        }
        Command::ArcTests => {
            let card = lock(&shared.card);
            let counts: Vec<String> = card
                .noc()
                .arc()
                .tests_answered()
                .iter()
                .map(|(channel, n)| format!("{channel}={n}"))
                .collect();
            ok(counts.join(" "))
        }
        Command::Power => {
            let card = lock(&shared.card);
            let (received, last) = card.noc().arc().power_settings();
            ok(match last {
                None => format!("received={received}"),
                Some(p) => {
                    let settings: Vec<String> = p.settings.iter().map(u16::to_string).collect();
                    format!(
                        "received={received} flags=0x{:04x} flags-valid={} settings-valid={} settings={}",
                        p.flags,
                        p.flags_valid,
                        p.settings_valid,
                        settings.join(","),
                    )
                }
            })
        }
    }
}

/// Parses and carries out one line; None when the line gets no reply.
pub fn handle_line(line: &str, shared: &Shared) -> Option<Outcome> {
    match parse(line) {
        Ok(None) => None,
        Ok(Some(cmd)) => Some(execute(cmd, shared)),
        Err(e) => Some(Outcome::Reply(format!("err {e}"))),
    }
}

/// Removes a socket file left by an earlier run, if nobody listens on it.
pub fn remove_stale_socket(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is in use by another process", path.display()),
            )),
            Err(_) => std::fs::remove_file(path),
        },
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// What to do when a client asks the emulator to exit; it should not
/// return.
pub type ExitHook = Arc<dyn Fn(u8) + Send + Sync>;

fn serve_connection(stream: UnixStream, shared: Arc<Shared>, on_exit: ExitHook) {
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let mut writer = writer;
    let mut reader = BufReader::new(stream);
    let mut raw = Vec::new();
    loop {
        raw.clear();
        // Bounded read: a client that never sends a newline cannot grow
        // the buffer without limit.
        match Read::take(&mut reader, MAX_LINE as u64 + 1).read_until(b'\n', &mut raw) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let outcome = if raw.len() > MAX_LINE && !raw.ends_with(b"\n") {
            // Skip the rest of the overlong line.
            let mut rest = Vec::new();
            if reader.read_until(b'\n', &mut rest).is_err() {
                return;
            }
            Some(Outcome::Reply("err line too long".into()))
        } else {
            let line: String = String::from_utf8_lossy(&raw).replace('\r', "");
            handle_line(&line, &shared)
        };
        let Some(outcome) = outcome else { continue };
        let (reply, exit) = match outcome {
            Outcome::Reply(r) => (r, None),
            Outcome::ReplyThenExit(r, status) => (r, Some(status)),
        };
        let sent = writer.write_all(format!("{reply}\n").as_bytes()).is_ok();
        if let Some(status) = exit {
            let _ = writer.flush();
            on_exit(status);
            return;
        }
        if !sent {
            return;
        }
    }
}

/// Listens on `path` and serves control connections on a thread of its
/// own, each connection on a thread too. The socket file is removed at
/// exit by the caller ([`ControlSocket::path`]).
pub struct ControlSocket {
    path: PathBuf,
    pub thread: JoinHandle<()>,
}

impl ControlSocket {
    /// Binds `path` (replacing a stale socket) and starts serving.
    pub fn start(path: &Path, shared: Arc<Shared>, on_exit: ExitHook) -> io::Result<ControlSocket> {
        remove_stale_socket(path)?;
        let listener = UnixListener::bind(path)?;
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let shared = shared.clone();
                    let on_exit = on_exit.clone();
                    let _ = std::thread::Builder::new()
                        .name("control-conn".into())
                        .spawn(move || serve_connection(stream, shared, on_exit));
                }
            })?;
        Ok(ControlSocket {
            path: path.to_path_buf(),
            thread,
        })
    }

    /// Where the socket is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str) -> Command {
        parse(line)
            .unwrap_or_else(|e| panic!("{line}: {e}"))
            .unwrap_or_else(|| panic!("{line}: ignored"))
    }

    #[test]
    fn simple_commands() {
        assert_eq!(p("ping"), Command::Ping);
        assert_eq!(p("  ping  "), Command::Ping);
        assert_eq!(p("vanish"), Command::Vanish);
        assert_eq!(p("reappear"), Command::Reappear);
        assert_eq!(p("accesses"), Command::Accesses);
        assert_eq!(p("arc-move-queues"), Command::ArcMoveQueues);
        assert!(parse("accesses 0").is_err());
        assert_eq!(p("exit"), Command::Exit(0));
        assert_eq!(p("exit 70"), Command::Exit(70));
        assert!(parse("exit 256").is_err());
        assert_eq!(p("arc-hang"), Command::ArcHang);
        assert_eq!(p("arc-resume"), Command::ArcResume);
        assert_eq!(p("arc-slow 0"), Command::ArcSlow(0));
        assert_eq!(p("arc-slow 0x10"), Command::ArcSlow(16));
        assert!(parse("arc-slow").is_err());
        assert!(parse("arc-slow 5000000000").is_err());
        assert_eq!(p("resets"), Command::Resets);
        assert_eq!(p("power"), Command::Power);
        assert_eq!(p("arc-tests"), Command::ArcTests);
        assert_eq!(p("board"), Command::Board);
        assert_eq!(p("help"), Command::Help);
        assert_eq!(p("unplug"), Command::Unplug);
        assert!(parse("ping now").is_err());
    }

    #[test]
    fn blank_lines_and_echoed_replies_are_ignored() {
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("   \t"), Ok(None));
        assert_eq!(parse("ok pong"), Ok(None));
        assert_eq!(parse("err unknown command 'x'"), Ok(None));
        // But a command merely starting with those letters is not.
        assert!(parse("okay").is_err());
    }

    #[test]
    fn delay_is_bounded_by_qemu_timeout() {
        assert_eq!(p("delay 0"), Command::Delay(0));
        assert_eq!(p("delay 3999"), Command::Delay(3999));
        assert!(parse("delay 4000").is_err());
        assert!(parse("delay 99999999999999999999").is_err());
        assert!(parse("delay -1").is_err());
        assert!(parse("delay").is_err());
    }

    #[test]
    fn aer_kinds() {
        assert_eq!(p("aer correctable"), Command::Aer(AerError::Correctable));
        assert_eq!(p("aer nonfatal"), Command::Aer(AerError::NonFatal));
        assert_eq!(p("aer fatal"), Command::Aer(AerError::Fatal));
        assert!(parse("aer bad").is_err());
    }

    #[test]
    fn noc_commands() {
        assert_eq!(
            p("noc-read 1 0x2 0x10000 16"),
            Command::NocRead {
                x: 1,
                y: 2,
                addr: 0x10000,
                len: 16
            }
        );
        assert_eq!(
            p("noc-write 18 18 0xffb20000 deadBEEF"),
            Command::NocWrite {
                x: 18,
                y: 18,
                addr: 0xffb2_0000,
                data: vec![0xde, 0xad, 0xbe, 0xef]
            }
        );
        assert!(parse("noc-read 256 0 0 4").is_err(), "x is a u8");
        assert!(parse("noc-read 0 0 0 0").is_err(), "zero length");
        assert!(parse(&format!("noc-read 0 0 0 {}", MAX_READ + 1)).is_err());
        assert!(parse("noc-write 0 0 0 abc").is_err(), "odd digits");
        assert!(parse("noc-write 0 0 0 zz").is_err(), "not hex");
        assert!(parse("noc-write 0 0 0").is_err());
    }

    #[test]
    fn dma_commands() {
        assert_eq!(
            p("dma-read 0x100000 8"),
            Command::DmaRead {
                iova: 0x10_0000,
                len: 8
            }
        );
        assert_eq!(
            p("dma-write 4096 00ff"),
            Command::DmaWrite {
                iova: 4096,
                data: vec![0, 0xff]
            }
        );
        assert!(parse("dma-read 0xg 8").is_err());
    }

    #[test]
    fn unknown_commands_are_errors() {
        let e = parse("reboot").unwrap_err();
        assert!(e.contains("unknown command"), "{e}");
    }

    fn reply(line: &str, shared: &Shared) -> String {
        match handle_line(line, shared) {
            Some(Outcome::Reply(r)) => r,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn dma_commands_reach_host_memory() {
        let shared = Shared::new(Arch::Wormhole);
        // Out of reset the function may not master the bus.
        assert!(reply("dma-read 0x1000 4", &shared).contains("bus mastering is disabled"));
        let command = (crate::config_space::hdr::COMMAND_MEMORY
            | crate::config_space::hdr::COMMAND_MASTER)
            .to_le_bytes();
        let _ = lock(&shared.config).write(crate::config_space::hdr::COMMAND as u64, &command);
        assert!(reply("dma-read 0x1000 4", &shared).starts_with("err unmapped"));
        // SAFETY: plain memfd creation; the fd is ours.
        let fd = unsafe { libc::memfd_create(c"ctl-test".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: fresh descriptor owned here.
        let f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(0x2000).unwrap();
        shared.host.map(0x1000, 0x2000, 0, f, true, true).unwrap();
        assert_eq!(
            reply("dma-write 0x1ffe c0ffee11", &shared),
            "ok 4 bytes written"
        );
        assert_eq!(reply("dma-read 0x1ffe 4", &shared), "ok c0ffee11");
        shared.host.unmap(0x1000, 0x2000);
        assert!(reply("dma-read 0x1ffe 4", &shared).starts_with("err"));
    }

    #[test]
    fn fault_commands_change_shared_state() {
        let shared = Shared::new(Arch::Blackhole);
        assert_eq!(reply("ping", &shared), "ok pong");
        assert_eq!(reply("delay 250", &shared), "ok delay 250 ms");
        assert_eq!(shared.delay_ms.load(Ordering::SeqCst), 250);
        assert!(reply("delay 5000", &shared).starts_with("err"));
        assert_eq!(shared.delay_ms.load(Ordering::SeqCst), 250);
        reply("vanish", &shared);
        assert!(shared.vanished.load(Ordering::SeqCst));
        reply("reappear", &shared);
        assert!(!shared.vanished.load(Ordering::SeqCst));
        reply("arc-hang", &shared);
        assert!(!shared.arc_responding.load(Ordering::SeqCst));
        reply("arc-resume", &shared);
        assert!(shared.arc_responding.load(Ordering::SeqCst));
        reply("aer fatal", &shared);
        // DevSta Fatal Error Detected.
        assert_ne!(lock(&shared.config).read_u16(0x70 + 0x0a) & 0x4, 0);
        assert_eq!(
            reply("resets", &shared),
            "ok cold=0 secondary-bus=0 function-level=0"
        );
        assert!(reply("msi", &shared).starts_with("err"), "MSI not enabled");
        assert_eq!(reply("power", &shared), "ok received=0");
        assert_eq!(
            reply("arc-tests", &shared),
            "ok queue0=0 queue1=0 queue2=0 queue3=0"
        );
        assert_eq!(
            handle_line("exit", &shared),
            Some(Outcome::ReplyThenExit("ok exiting".into(), 0))
        );
        assert_eq!(handle_line("ok pong", &shared), None);
    }

    #[test]
    fn hex_round_trip() {
        let d = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(hex_encode(&d), "00017f80ff");
        assert_eq!(hex_decode("00017f80ff").unwrap(), d);
        assert!(hex_decode("").is_err());
        // Multi-byte UTF-8 must not panic the decoder.
        assert!(hex_decode("aé0").is_err());
        assert!(hex_decode("é").is_err());
    }
}

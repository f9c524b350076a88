// SPDX-License-Identifier: GPL-2.0
//! `tt-emu`: serves one emulated card on a vfio-user socket.
//!
//! ```text
//! tt-emu --arch wormhole|blackhole --socket PATH [--control PATH]
//! ```
//!
//! Prints one line on stderr once QEMU can connect, and one line saying why
//! it exited: QEMU disconnected (status 0), `exit [STATUS]` asked on the
//! control socket (that status, 0 by default), or an error (status 1, with
//! the reason); 2 for a bad command line. The harness matches on the
//! `tt-emu[ARCH]:` prefix.
//!
//! `TT_EMU_LOG=error|warn|info|debug` sets how much of the vfio-user
//! crate's and our own log reaches stderr (default `warn`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use tt_emu::control::{remove_stale_socket, ControlSocket};
use tt_emu::server::{lock, CardServer, Shared};
use tt_emu::Arch;

const USAGE: &str = "usage: tt-emu --arch wormhole|blackhole --socket PATH [--control PATH]";

struct Args {
    arch: Arch,
    socket: PathBuf,
    control: Option<PathBuf>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut arch = None;
    let mut socket = None;
    let mut control = None;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--arch" => {
                arch = Some(match value("--arch")?.as_str() {
                    "wormhole" => Arch::Wormhole,
                    "blackhole" => Arch::Blackhole,
                    other => return Err(format!("unknown arch '{other}'")),
                })
            }
            "--socket" => socket = Some(PathBuf::from(value("--socket")?)),
            "--control" => control = Some(PathBuf::from(value("--control")?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(Args {
        arch: arch.ok_or("--arch is required")?,
        socket: socket.ok_or("--socket is required")?,
        control,
    })
}

/// Prints log records of the configured level and above on stderr.
struct StderrLog {
    prefix: String,
}

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!(
                "{} {} {}: {}",
                self.prefix,
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

fn init_log(prefix: &str) {
    let level = match std::env::var("TT_EMU_LOG").as_deref() {
        Ok("error") => log::LevelFilter::Error,
        Ok("info") => log::LevelFilter::Info,
        Ok("debug") => log::LevelFilter::Debug,
        Ok("trace") => log::LevelFilter::Trace,
        _ => log::LevelFilter::Warn,
    };
    // The logger lives as long as the process.
    let logger: &'static StderrLog = Box::leak(Box::new(StderrLog {
        prefix: prefix.to_string(),
    }));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}

fn run(args: Args, prefix: &str) -> Result<(), String> {
    let shared = Shared::new(args.arch);

    remove_stale_socket(&args.socket)
        .map_err(|e| format!("socket {}: {e}", args.socket.display()))?;
    let server = CardServer::bind(&args.socket, shared.clone())
        .map_err(|e| format!("cannot listen on {}: {e}", args.socket.display()))?;

    let control = match &args.control {
        Some(path) => {
            let socket = args.socket.clone();
            let control_path = path.clone();
            let prefix = prefix.to_string();
            let on_exit: tt_emu::control::ExitHook = Arc::new(move |status| {
                if status == 0 {
                    eprintln!(
                        "{prefix}: exiting: asked to on the control socket (the card is gone)"
                    );
                } else {
                    eprintln!("{prefix}: exiting with status {status}, as a crashed emulator would: asked to on the control socket");
                }
                // process::exit skips destructors: remove the sockets here.
                let _ = std::fs::remove_file(&socket);
                let _ = std::fs::remove_file(&control_path);
                std::process::exit(i32::from(status));
            });
            Some(
                ControlSocket::start(path, shared.clone(), on_exit)
                    .map_err(|e| format!("control socket {}: {e}", path.display()))?,
            )
        }
        None => None,
    };

    eprintln!(
        "{prefix}: listening on {}{}",
        args.socket.display(),
        match &control {
            Some(c) => format!(" (control: {})", c.path().display()),
            None => String::new(),
        }
    );

    let result = server.run();
    if let Some(c) = &control {
        remove_file_quietly(c.path());
    }
    // How the driver left the function: a driver that stops its DMA at
    // shutdown (reboot, kexec) clears Bus Master Enable before QEMU goes
    // (tools/check reads this line after the debug VM).
    eprintln!(
        "{prefix}: at exit: bus mastering {}",
        if lock(&shared.config).bus_master_enabled() {
            "on"
        } else {
            "off"
        }
    );
    result.map_err(|e| format!("vfio-user connection failed: {e}"))
}

fn remove_file_quietly(path: &Path) {
    let _ = std::fs::remove_file(path);
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("tt-emu: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let prefix = format!(
        "tt-emu[{}]",
        match args.arch {
            Arch::Wormhole => "wormhole",
            Arch::Blackhole => "blackhole",
        }
    );
    init_log(&prefix);
    match run(args, &prefix) {
        Ok(()) => {
            eprintln!("{prefix}: exiting: QEMU disconnected");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{prefix}: exiting on error: {e}");
            ExitCode::FAILURE
        }
    }
}

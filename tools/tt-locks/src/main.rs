//! `tt-locks`: see who holds which lock of the Tenstorrent cards, and take
//! one from the shell. See `tt-locks --help` (the text of [`HELP`]).

mod metrics;
mod signals;
mod status;

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tt_arbiter::sysfs::{self, format_duration, lock_label, parse_duration, parse_lock};
use tt_arbiter::{Device, Error, Monotonic, Wait, DEV_DIR};

use signals::{Signals, WaitEnd};

const HELP: &str = "\
tt-locks: who holds which lock of the Tenstorrent cards (tt-arbiter driver)

usage:
  tt-locks status [DEVICE]
      Every card (or DEVICE: an index N or /dev/tenstorrent/N): the locks
      that are held or waited for, with the holder's pid and comm, how long
      it has been held, the number of waiters and how often a holder died
      holding it; one summary line per card; then who waits for which lock
      and for how long (pid, comm), from the waiting processes'
      /proc/PID/fdinfo (every process's as root, your own otherwise). Reads
      sysfs and procfs only: works without access to the device. Pids are
      those of this pid namespace; '?' is a holder not visible here.
  tt-locks watch [DEVICE] [--interval DURATION] [--count N]
      The status table, refreshed every DURATION (default 1s) until Ctrl-C,
      or N times.
  tt-locks hold LOCK [--device N] [--for DURATION] [--timeout DURATION | --try]
      Acquires LOCK (waiting for it unless --try or --timeout say otherwise),
      prints \"holding LOCK on /dev/tenstorrent/N (pid P)\", holds it for
      DURATION or until SIGINT/SIGTERM, then releases it.
  tt-locks acquire LOCK [--device N] [--timeout DURATION | --try]
      Like hold, but holds the lock as long as standard input stays open
      (or until SIGINT/SIGTERM). The lock belongs to this process's open
      file: it is released when tt-locks exits, never before. From a script:
          coproc LOCK { tt-locks acquire ARC_MSG; }
          read -r line <&\"${LOCK[0]}\"   # \"holding ...\": the lock is ours
          ...                           # the critical section
          exec {LOCK[1]}>&-; wait        # EOF on its stdin: released
  tt-locks metrics [DEVICE] [--output FILE] [--sysfs DIR] [--procfs DIR]
      Every card (or DEVICE) in Prometheus' text format: each lock's holder
      (pid, comm), hold time, waiters and counters, windows and DMA in use,
      the firmware message queue, clocks and sensors; HELP and TYPE lines,
      a `card` label on every series. With --output, FILE is replaced
      atomically (for node_exporter's textfile collector, e.g.
      --output /var/lib/prometheus/node-exporter/tenstorrent.prom from a
      timer). Reads sysfs and procfs only (--sysfs, --procfs: where they
      are mounted, default /sys and /proc, e.g. the host's in a monitoring
      container); no card is not an error (tenstorrent_cards 0).
  tt-locks query LOCK [--device N]
      Every field of the driver's QUERY for LOCK (needs access to the device).
  tt-locks release LOCK [--device N]
      Cannot release another process's lock: locks belong to the open file
      that acquired them. Tells who holds LOCK and how to make it let go.

LOCK is an index 0-63 or a well-known name, any case: ETH00..ETH15 (or
ETH0..ETH15), ARC_MSG, REMOTE_ARC_MSG, NON_MMIO, MEM_BARRIER, CHIP_IN_USE,
PCIE_DMA. DEVICE and --device: an index N or a path /dev/tenstorrent/N
(default 0). DURATION: a number and a unit, ns us ms s m h (10s, 500ms, 2m,
1.5s); a bare number is seconds.

exit status:
  0  success (the lock was acquired, held and released; the table shown)
  1  the lock was not obtained: busy (--try) or timed out (--timeout)
  2  usage error (bad arguments, unknown lock, release of another's lock)
  3  device error: no such device, permission denied, device gone, I/O
  4  interrupted by a signal while waiting for the lock
";

/// Exit statuses, documented in [`HELP`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exit {
    NotObtained = 1,
    Usage = 2,
    Device = 3,
    Interrupted = 4,
}

/// A failure: its exit status and message.
struct Fail(Exit, String);

type Res<T = ()> = Result<T, Fail>;

fn usage(msg: impl Into<String>) -> Fail {
    Fail(
        Exit::Usage,
        format!("{} (tt-locks --help for usage)", msg.into()),
    )
}

/// Prints to stdout, ignoring a closed pipe (the reader may have gone).
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = run(&args);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, msg)) => {
            if !msg.is_empty() {
                eprintln!("tt-locks: {msg}");
            }
            ExitCode::from(code as u8)
        }
    }
}

/// Options after the subcommand.
#[derive(Debug, Default)]
struct Opts {
    positional: Vec<String>,
    device: Option<String>,
    hold_for: Option<Duration>,
    timeout: Option<Duration>,
    try_only: bool,
    interval: Option<Duration>,
    count: Option<u64>,
    output: Option<PathBuf>,
    sysfs: Option<PathBuf>,
    procfs: Option<PathBuf>,
}

fn parse_opts(args: &[String], allowed: &[&str]) -> Res<Opts> {
    let mut o = Opts::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if a.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        if !name.starts_with('-') || name == "-" {
            o.positional.push(a.clone());
            continue;
        }
        if !allowed.contains(&name) {
            return Err(usage(format!("unknown option {name}")));
        }
        let mut value = || -> Res<String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| usage(format!("{name} needs a value")))
        };
        let duration = |v: String| parse_duration(&v).map_err(|e| usage(e.to_string()));
        match name {
            "--device" | "-d" => o.device = Some(value()?),
            "--for" => o.hold_for = Some(duration(value()?)?),
            "--timeout" => o.timeout = Some(duration(value()?)?),
            "--interval" => o.interval = Some(duration(value()?)?),
            "--count" => {
                let v = value()?;
                o.count = Some(
                    v.parse()
                        .map_err(|_| usage(format!("--count {v:?}: not a number")))?,
                )
            }
            "--try" => o.try_only = true,
            "--output" | "-o" => o.output = Some(PathBuf::from(value()?)),
            "--sysfs" => o.sysfs = Some(PathBuf::from(value()?)),
            "--procfs" => o.procfs = Some(PathBuf::from(value()?)),
            _ => unreachable!("option {name} allowed but not handled"),
        }
    }
    if o.try_only && o.timeout.is_some() {
        return Err(usage("--try and --timeout exclude each other"));
    }
    Ok(o)
}

fn run(args: &[String]) -> Res {
    let Some(cmd) = args.first() else {
        eprint!("{HELP}");
        return Err(Fail(Exit::Usage, String::new()));
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "-h" | "--help" | "help" => {
            print!("{HELP}");
            Ok(())
        }
        "status" => {
            let o = parse_opts(rest, &[])?;
            let cards = select_cards(one_positional(&o, "DEVICE", false)?)?;
            print!("{}", status::render(&cards));
            Ok(())
        }
        "watch" => {
            let o = parse_opts(rest, &["--interval", "--count"])?;
            let cards = select_cards(one_positional(&o, "DEVICE", false)?)?;
            watch(
                &cards,
                o.interval.unwrap_or(Duration::from_secs(1)),
                o.count,
            )
        }
        "hold" | "acquire" => {
            let allowed: &[&str] = if cmd == "hold" {
                &["--device", "-d", "--for", "--timeout", "--try"]
            } else {
                &["--device", "-d", "--timeout", "--try"]
            };
            let o = parse_opts(rest, allowed)?;
            let lock = lock_arg(&o)?;
            let (_, path) = resolve_device(o.device.as_deref().unwrap_or("0"))?;
            let wait = if o.try_only {
                Wait::Try
            } else if let Some(t) = o.timeout {
                Wait::Deadline(Monotonic::now() + t)
            } else {
                Wait::Block
            };
            hold(HoldArgs {
                path: &path,
                lock,
                wait,
                timeout: o.timeout,
                until_eof: cmd == "acquire",
                hold_for: o.hold_for,
            })
        }
        "metrics" => {
            let o = parse_opts(rest, &["--output", "-o", "--sysfs", "--procfs"])?;
            let views = metrics::Views::new(
                o.sysfs.clone().unwrap_or_else(|| "/sys".into()),
                o.procfs.clone().unwrap_or_else(|| "/proc".into()),
            );
            let present = views
                .cards()
                .map_err(|e| Fail(Exit::Device, format!("the card class under sysfs: {e}")))?;
            let cards = match one_positional(&o, "DEVICE", false)? {
                Some(d) => {
                    let (n, _) = resolve_device(d)?;
                    if !present.contains(&n) {
                        return Err(Fail(Exit::Device, format!("no such device: card {n}")));
                    }
                    vec![n]
                }
                None => present,
            };
            let text = metrics::render(&views, &cards);
            match &o.output {
                None => {
                    print!("{text}");
                    Ok(())
                }
                Some(path) => metrics::write_atomically(path, &text)
                    .map_err(|e| Fail(Exit::Device, format!("{}: {e}", path.display()))),
            }
        }
        "query" => {
            let o = parse_opts(rest, &["--device", "-d"])?;
            let lock = lock_arg(&o)?;
            let (_, path) = resolve_device(o.device.as_deref().unwrap_or("0"))?;
            query(&path, lock)
        }
        "release" => {
            let o = parse_opts(rest, &["--device", "-d"])?;
            release(&o)
        }
        other => Err(usage(format!("unknown command {other:?}"))),
    }
}

fn one_positional<'a>(o: &'a Opts, what: &str, required: bool) -> Res<Option<&'a str>> {
    match o.positional.as_slice() {
        [] if required => Err(usage(format!("{what} missing"))),
        [] => Ok(None),
        [one] => Ok(Some(one)),
        [_, extra, ..] => Err(usage(format!("unexpected argument {extra:?}"))),
    }
}

fn lock_arg(o: &Opts) -> Res<u32> {
    let s = one_positional(o, "LOCK", true)?.unwrap_or_default();
    parse_lock(s).ok_or_else(|| {
        usage(format!(
            "unknown lock {s:?}: an index 0-63 or a name such as ARC_MSG, ETH03"
        ))
    })
}

/// The card meant by `s` (an index or a device path): its number and node.
fn resolve_device(s: &str) -> Res<(u32, PathBuf)> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok((n, Path::new(DEV_DIR).join(n.to_string())));
    }
    let path = PathBuf::from(s);
    let meta = std::fs::metadata(&path).map_err(|e| open_error(&path, &e))?;
    if meta.file_type().is_char_device() {
        let want = format!("{}:{}", libc::major(meta.rdev()), libc::minor(meta.rdev()));
        for n in sysfs::cards().unwrap_or_default() {
            let dev = std::fs::read_to_string(sysfs::class_dir(n).join("dev")).unwrap_or_default();
            if dev.trim() == want {
                return Ok((n, path));
            }
        }
    }
    Err(Fail(
        Exit::Device,
        format!("no such device: {s} is not a tenstorrent device node"),
    ))
}

/// The cards `status`/`watch` show: all of them, or the one named.
fn select_cards(dev: Option<&str>) -> Res<Vec<u32>> {
    let present = sysfs::cards()
        .map_err(|e| Fail(Exit::Device, format!("{}: {e}", tt_arbiter::CLASS_DIR)))?;
    match dev {
        None if present.is_empty() => Err(Fail(
            Exit::Device,
            format!(
                "no such device: no card under {} (is the tenstorrent module loaded?)",
                tt_arbiter::CLASS_DIR
            ),
        )),
        None => Ok(present),
        Some(d) => {
            let (n, _) = resolve_device(d)?;
            if present.contains(&n) {
                Ok(vec![n])
            } else {
                Err(Fail(
                    Exit::Device,
                    format!("no such device: {}", sysfs::class_dir(n).display()),
                ))
            }
        }
    }
}

fn open_error(path: &Path, e: &std::io::Error) -> Fail {
    let p = path.display();
    let msg = match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
            format!("no such device: {p}")
        }
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "permission denied: {p} (locking needs read-write access to the device; \
             'tt-locks status' works without)"
        ),
        _ => format!("{p}: {e}"),
    };
    Fail(Exit::Device, msg)
}

fn open(path: &Path) -> Res<Device> {
    Device::open(path).map_err(|e| open_error(path, &e))
}

/// Who holds lock `index` as this file sees it: "held by pid 123 (python3)".
fn holder_words(dev: &Device, index: u32, holder_pid: u32) -> String {
    let Ok(q) = dev.query(index) else {
        return if holder_pid != 0 {
            format!("held by pid {holder_pid}")
        } else {
            "held by another process".into()
        };
    };
    let mut s = if q.held {
        let comm = if q.holder_comm.is_empty() {
            String::new()
        } else {
            format!(" ({})", q.holder_comm)
        };
        if q.holder_pid != 0 {
            format!("held by pid {}{comm}", q.holder_pid)
        } else {
            format!("held by a process not visible in this pid namespace{comm}")
        }
    } else if holder_pid != 0 {
        format!("held by pid {holder_pid}")
    } else {
        "free, but other requests are queued first".into()
    };
    if q.waiters > 0 {
        s += &format!(", {} waiting", q.waiters);
    }
    s
}

/// A lock error as words, with the exit status it maps to.
fn lock_error(dev: &Device, what: &str, index: u32, timeout: Option<Duration>, e: Error) -> Fail {
    match e {
        Error::Busy { holder_pid } => Fail(
            Exit::NotObtained,
            format!("{what}: busy: {}", holder_words(dev, index, holder_pid)),
        ),
        Error::Timeout { holder_pid } => Fail(
            Exit::NotObtained,
            format!(
                "{what}: timed out after {}: {}",
                format_duration(timeout.unwrap_or_default()),
                holder_words(dev, index, holder_pid)
            ),
        ),
        Error::Interrupted => Fail(
            Exit::Interrupted,
            format!("{what}: interrupted while waiting"),
        ),
        Error::DeviceGone => Fail(
            Exit::Device,
            format!("{what}: device gone (the card was unbound or removed)"),
        ),
        Error::Deadlock => Fail(Exit::Device, format!("{what}: already held by this file")),
        Error::NotHeld => Fail(Exit::Device, format!("{what}: not held by this file")),
        Error::Invalid => Fail(
            Exit::Device,
            format!("{what}: the driver rejected the request as invalid"),
        ),
        Error::Io(e) => Fail(Exit::Device, format!("{what}: {e}")),
    }
}

struct HoldArgs<'a> {
    path: &'a Path,
    lock: u32,
    wait: Wait,
    timeout: Option<Duration>,
    until_eof: bool,
    hold_for: Option<Duration>,
}

fn hold(a: HoldArgs<'_>) -> Res {
    let name = lock_label(a.lock);
    let what = format!("{name} on {}", a.path.display());
    let signals = Signals::install().map_err(|e| Fail(Exit::Device, format!("sigaction: {e}")))?;
    let dev = open(a.path)?;

    // A first try, so that a wait is announced with who is in the way.
    let acquired = match dev.acquire(a.lock, Wait::Try) {
        Ok(acq) => acq,
        Err(Error::Busy { holder_pid }) if a.wait != Wait::Try => {
            say!(
                "waiting for {what}: {}",
                holder_words(&dev, a.lock, holder_pid)
            );
            if signals.pending().is_some() {
                return Err(lock_error(&dev, &what, a.lock, None, Error::Interrupted));
            }
            dev.acquire(a.lock, a.wait)
                .map_err(|e| lock_error(&dev, &what, a.lock, a.timeout, e))?
        }
        Err(e) => return Err(lock_error(&dev, &what, a.lock, a.timeout, e)),
    };
    let since = Instant::now();
    say!("holding {what} (pid {})", std::process::id());
    if !acquired.waited.is_zero() {
        say!("  waited {}", format_duration(acquired.waited));
    }
    if acquired.owner_died_mask != 0 {
        say!(
            "  note: the previous holder died holding {name}: what it protects may be \
             half-updated"
        );
    }

    let end = signals.wait(a.hold_for.map(|d| since + d), a.until_eof);
    let release = dev.release(1u64 << a.lock);
    let why = match end {
        WaitEnd::Elapsed => "time is up".to_string(),
        WaitEnd::Eof => "end of input".to_string(),
        WaitEnd::Signal(sig) => signals::name(sig),
    };
    match release {
        Ok(()) => {
            say!(
                "released {what} after {} ({why})",
                format_duration(since.elapsed())
            );
            Ok(())
        }
        Err(e) => Err(lock_error(
            &dev,
            &format!("release of {what}"),
            a.lock,
            None,
            e,
        )),
    }
}

fn query(path: &Path, lock: u32) -> Res {
    let dev = open(path)?;
    let what = format!("{} on {}", lock_label(lock), path.display());
    let q = dev
        .query(lock)
        .map_err(|e| lock_error(&dev, &what, lock, None, e))?;
    let r = &q.raw;
    say!("device: {}", path.display());
    say!("lock: {lock}");
    say!("name: {}", lock_label(lock));
    say!("held: {}", u8::from(q.held));
    say!("held_by_caller: {}", u8::from(q.held_by_caller));
    say!("owner_died_pending: {}", u8::from(q.owner_died));
    say!("holder_pid: {}", q.holder_pid);
    say!("holder_comm: {}", q.holder_comm);
    say!(
        "held_ns: {} ({})",
        r.held_ns,
        format_duration(Duration::from_nanos(r.held_ns))
    );
    say!("waiters: {}", q.waiters);
    say!("acquisitions: {}", r.acquisitions);
    say!("contended: {}", r.contended);
    say!("owner_died_count: {}", r.owner_died_count);
    say!("spurious_wakeups: {}", r.spurious_wakeups);
    Ok(())
}

fn release(o: &Opts) -> Res {
    let lock = lock_arg(o)?;
    let name = lock_label(lock);
    let card = match o.device.as_deref() {
        Some(d) => resolve_device(d)?.0,
        None => 0,
    };
    let holder = match sysfs::read_lock(card, lock) {
        Ok(l) if l.held && l.pid != 0 => format!(
            "{name} on card {card} is held by pid {} ({}): stop that process \
             (kill {}) to release it",
            l.pid, l.comm, l.pid
        ),
        Ok(l) if l.held => format!(
            "{name} on card {card} is held by a process not visible in this pid \
             namespace ({})",
            l.comm
        ),
        Ok(_) => format!("{name} on card {card} is not held"),
        Err(e) => format!("cannot read {name} of card {card}: {e}"),
    };
    Err(Fail(
        Exit::Usage,
        format!(
            "release: a lock belongs to the open file that acquired it, so another \
             process cannot release it; the driver releases it when that file is closed \
             (the holder exits, crashes or is killed). End a 'tt-locks hold' with Ctrl-C \
             and a 'tt-locks acquire' by closing its input.\n{holder}"
        ),
    ))
}

fn watch(cards: &[u32], interval: Duration, count: Option<u64>) -> Res {
    let signals = Signals::install().map_err(|e| Fail(Exit::Device, format!("sigaction: {e}")))?;
    let mut shown = 0u64;
    loop {
        let table = status::render(cards);
        say!(
            "\x1b[H\x1b[2Jtt-locks watch: every {} (Ctrl-C to stop)\n\n{table}",
            format_duration(interval)
        );
        shown += 1;
        if count.is_some_and(|c| shown >= c) {
            return Ok(());
        }
        if let WaitEnd::Signal(_) = signals.wait(Some(Instant::now() + interval), false) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn code(s: &str) -> Option<Exit> {
        run(&args(s)).err().map(|Fail(c, _)| c)
    }

    #[test]
    fn options() {
        let o = parse_opts(
            &args("arc_msg --device 1 --for 2m --timeout=500ms"),
            &["--device", "--for", "--timeout"],
        )
        .ok()
        .unwrap();
        assert_eq!(o.positional, vec!["arc_msg"]);
        assert_eq!(o.device.as_deref(), Some("1"));
        assert_eq!(o.hold_for, Some(Duration::from_secs(120)));
        assert_eq!(o.timeout, Some(Duration::from_millis(500)));
        assert_eq!(lock_arg(&o).ok(), Some(16));
        let o = parse_opts(&args("7 --count 3 --try"), &["--count", "--try"])
            .ok()
            .unwrap();
        assert_eq!((o.count, o.try_only), (Some(3), true));
    }

    #[test]
    fn usage_errors_exit_2() {
        for bad in [
            "",
            "frobnicate",
            "hold",
            "hold bogus",
            "hold 64",
            "hold 16 --for",
            "hold 16 --for 3x",
            "hold 16 --try --timeout 1s",
            "acquire 16 --for 1s",
            "hold 16 17",
            "status 0 1",
            "query",
            "watch --count x",
            "release",
            "release bogus",
        ] {
            assert_eq!(code(bad), Some(Exit::Usage), "{bad:?}");
        }
    }

    #[test]
    fn help_documents_every_exit_status() {
        for (c, words) in [
            (Exit::NotObtained, "1  the lock was not obtained"),
            (Exit::Usage, "2  usage error"),
            (Exit::Device, "3  device error"),
            (Exit::Interrupted, "4  interrupted"),
        ] {
            assert!(HELP.contains(words), "{c:?}");
            assert!(words.starts_with(&(c as u8).to_string()));
        }
        assert!(HELP.contains("0  success"));
    }
}

//! The read-only views of the module: who holds which lock, who has a card
//! open, who waits. Reading them needs no access to the device node, so
//! unprivileged tools (tt-smi-like monitors) can use them.
//!
//! - `/sys/class/tenstorrent/tenstorrent!N/locks/00..63`: one line of
//!   `key=value` fields per lock ([`LockLine`], [`read_locks`]);
//! - `/proc/driver/tenstorrent/N/pids`: one pid per open file
//!   ([`read_pids`]);
//! - `/sys/kernel/debug/tenstorrent/N/waiters`: the wait queue, root only,
//!   not a stable ABI ([`Waiters`]).
//!
//! Pids are translated by the kernel into the reader's pid namespace (0 when
//! not visible there).
//!
//! Also here: lock names as users type them ([`parse_lock`]) and durations
//! as `10s`, `500ms`, `2m` ([`parse_duration`], [`format_duration`]).
//!
//! ```
//! use tt_arbiter::sysfs::{parse_duration, parse_lock, LockLine};
//! let l: LockLine = "name=ARC_MSG held=1 pid=42 comm=python3 held_ns=1500000000 \
//!     waiters=2 owner_died_pending=0 acquisitions=7 contended=3 owner_died=1 \
//!     wait_total_ns=10 wait_max_ns=8 hold_max_ns=9 spurious_wakeups=0"
//!     .parse()
//!     .unwrap();
//! assert_eq!((l.pid, l.comm.as_str(), l.waiters), (42, "python3", 2));
//! assert_eq!(parse_lock("arc_msg"), Some(16));
//! assert_eq!(parse_duration("500ms").unwrap().as_millis(), 500);
//! ```

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::abi::{self, LOCK_COUNT};
use crate::device::CLASS_DIR;

/// Directory of the per-card procfs files.
pub const PROC_DIR: &str = "/proc/driver/tenstorrent";
/// Directory of the per-card debugfs files.
pub const DEBUGFS_DIR: &str = "/sys/kernel/debug/tenstorrent";

/// One lock as `/sys/class/tenstorrent/tenstorrent!N/locks/II` shows it.
///
/// Fields follow Documentation/ABI/testing/sysfs-class-tenstorrent; fields
/// the kernel may append later are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockLine {
    /// Well-known name (`ARC_MSG`, `ETH03`, ...) or the index as text.
    pub name: String,
    /// Held by anyone.
    pub held: bool,
    /// Pid of the process that acquired it, in the reader's pid namespace;
    /// 0 if free, not visible, or exited.
    pub pid: u32,
    /// That process's comm at acquisition (non-printable bytes and spaces
    /// shown as `?`); empty if free.
    pub comm: String,
    /// Nanoseconds since it was acquired; 0 if free.
    pub held_ns: u64,
    /// Queued requests that want it.
    pub waiters: u32,
    /// Its last holder's file closed holding it and nobody acquired it since.
    pub owner_died_pending: bool,
    /// Grants since the card was bound.
    pub acquisitions: u64,
    /// Grants that had to wait.
    pub contended: u64,
    /// Releases because the holder's file was closed.
    pub owner_died: u64,
    /// Sum of the waits of contended grants.
    pub wait_total_ns: u64,
    /// Longest wait of a contended grant.
    pub wait_max_ns: u64,
    /// Longest completed hold.
    pub hold_max_ns: u64,
    /// Wake-ups sent to a waiter (or its timer firing early) that found
    /// nothing to do. FIFO hand-off wakes only the waiter it grants to, so
    /// this stays 0. Stray wake-ups meant for something else, such as a
    /// mutex's or futex's deferred wake-up that reaches a task after it
    /// went to sleep in the driver, are not counted.
    pub spurious_wakeups: u64,
    /// Open files polling it: their failed tries (`LOCK_CTL` ACQUIRE, a
    /// non-blocking ACQUIRE) go on, each within the poll lease of the
    /// last. Not waiters: a poller sleeps in its own process, between
    /// tries. 0 from a module that does not show them.
    pub pollers: u32,
    /// Those that have polled longest (at most 32), longest first.
    pub polled_by: Vec<Poller>,
}

/// A file polling a lock, as a lock line's `polled_by` shows it
/// (`PID/COMM/NS/TRIES`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Poller {
    /// The process that tried last, in the reader's pid namespace; 0 if
    /// not visible, or exited.
    pub pid: u32,
    /// Its comm when it tried (`?` for bytes that are not printable, are
    /// spaces, `/` or `,`).
    pub comm: String,
    /// Nanoseconds since the first failed try of its run.
    pub polling_ns: u64,
    /// Failed tries in the run.
    pub tries: u64,
}

impl Poller {
    /// How long it has been polling.
    pub fn polling_for(&self) -> Duration {
        Duration::from_nanos(self.polling_ns)
    }
}

impl FromStr for Poller {
    type Err = ParseError;

    fn from_str(item: &str) -> Result<Self, ParseError> {
        let err = || ParseError(format!("poller {item:?} is not PID/COMM/NS/TRIES"));
        let parts: Vec<&str> = item.split('/').collect();
        let [pid, comm, ns, tries] = parts[..] else {
            return Err(err());
        };
        Ok(Poller {
            pid: pid.parse().map_err(|_| err())?,
            comm: comm.to_string(),
            polling_ns: ns.parse().map_err(|_| err())?,
            tries: tries.parse().map_err(|_| err())?,
        })
    }
}

/// A line of a view that does not have the documented format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

impl From<ParseError> for io::Error {
    fn from(e: ParseError) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, e.0)
    }
}

/// The fields of a lock line, in the kernel's order.
const FIELDS: [&str; 14] = [
    "name",
    "held",
    "pid",
    "comm",
    "held_ns",
    "waiters",
    "owner_died_pending",
    "acquisitions",
    "contended",
    "owner_died",
    "wait_total_ns",
    "wait_max_ns",
    "hold_max_ns",
    "spurious_wakeups",
];

impl FromStr for LockLine {
    type Err = ParseError;

    /// Parses one line: fields split on whitespace, each on its first `=`.
    /// Every documented field must be present exactly once, but `pollers`
    /// and `polled_by`, which older modules do not write; unknown fields
    /// (appended by a later kernel) are ignored.
    fn from_str(line: &str) -> Result<Self, ParseError> {
        let err = |what: String| ParseError(format!("lock line {:?}: {what}", line.trim_end()));
        let mut seen = [false; FIELDS.len()];
        let mut seen_polls = [false; 2];
        let mut l = LockLine::default();
        for field in line.split_whitespace() {
            let Some((key, value)) = field.split_once('=') else {
                return Err(err(format!("field {field:?} has no '='")));
            };
            if let Some(k) = ["pollers", "polled_by"].iter().position(|f| *f == key) {
                if std::mem::replace(&mut seen_polls[k], true) {
                    return Err(err(format!("field {key} appears twice")));
                }
                if k == 0 {
                    l.pollers = value
                        .parse()
                        .map_err(|_| err(format!("{key}={value:?} is not a number")))?;
                } else {
                    l.polled_by = value
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::parse)
                        .collect::<Result<_, ParseError>>()
                        .map_err(|e| err(e.0))?;
                }
                continue;
            }
            let Some(k) = FIELDS.iter().position(|f| *f == key) else {
                continue;
            };
            if std::mem::replace(&mut seen[k], true) {
                return Err(err(format!("field {key} appears twice")));
            }
            let num = || -> Result<u64, ParseError> {
                value
                    .parse::<u64>()
                    .map_err(|_| err(format!("{key}={value:?} is not a number")))
            };
            let small = || -> Result<u32, ParseError> {
                u32::try_from(num()?).map_err(|_| err(format!("{key}={value} out of range")))
            };
            let flag = || -> Result<bool, ParseError> {
                match value {
                    "0" => Ok(false),
                    "1" => Ok(true),
                    _ => Err(err(format!("{key}={value:?} is not 0 or 1"))),
                }
            };
            match key {
                "name" => l.name = value.to_string(),
                "held" => l.held = flag()?,
                "pid" => l.pid = small()?,
                "comm" => l.comm = value.to_string(),
                "held_ns" => l.held_ns = num()?,
                "waiters" => l.waiters = small()?,
                "owner_died_pending" => l.owner_died_pending = flag()?,
                "acquisitions" => l.acquisitions = num()?,
                "contended" => l.contended = num()?,
                "owner_died" => l.owner_died = num()?,
                "wait_total_ns" => l.wait_total_ns = num()?,
                "wait_max_ns" => l.wait_max_ns = num()?,
                "hold_max_ns" => l.hold_max_ns = num()?,
                _ => l.spurious_wakeups = num()?,
            }
        }
        if let Some(k) = seen.iter().position(|s| !s) {
            return Err(err(format!("field {} missing", FIELDS[k])));
        }
        if l.name.is_empty() {
            return Err(err("empty name".into()));
        }
        if l.polled_by.len() > l.pollers as usize {
            return Err(err(format!(
                "{} pollers listed, {} counted",
                l.polled_by.len(),
                l.pollers
            )));
        }
        Ok(l)
    }
}

impl LockLine {
    /// How long it has been held.
    pub fn held_for(&self) -> Duration {
        Duration::from_nanos(self.held_ns)
    }

    /// Held, wanted by a queued request or polled: worth showing.
    pub fn is_busy(&self) -> bool {
        self.held || self.waiters > 0 || self.pollers > 0
    }
}

/// `/sys/class/tenstorrent/tenstorrent!N`.
pub fn class_dir(card: u32) -> PathBuf {
    Path::new(CLASS_DIR).join(format!("tenstorrent!{card}"))
}

/// Numbers N of the cards present in sysfs (`tenstorrent!N`), sorted. An
/// empty list when the class does not exist (module not loaded).
pub fn cards() -> io::Result<Vec<u32>> {
    cards_in(Path::new(CLASS_DIR))
}

/// [`cards`] under another class directory (for tests).
pub fn cards_in(class: &Path) -> io::Result<Vec<u32>> {
    let entries = match fs::read_dir(class) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut cards = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        if let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix("tenstorrent!"))
            .and_then(|s| s.parse().ok())
        {
            cards.push(n);
        }
    }
    cards.sort_unstable();
    Ok(cards)
}

/// Reads one lock of card `card` from sysfs.
pub fn read_lock(card: u32, index: u32) -> io::Result<LockLine> {
    read_lock_in(&class_dir(card), index)
}

/// [`read_lock`] from a class device directory (for tests).
pub fn read_lock_in(dir: &Path, index: u32) -> io::Result<LockLine> {
    let text = fs::read_to_string(dir.join("locks").join(format!("{index:02}")))?;
    Ok(text.parse()?)
}

/// Reads all 64 locks of card `card`, in index order. Each line is
/// consistent in itself; the 64 are read one after the other.
pub fn read_locks(card: u32) -> io::Result<Vec<LockLine>> {
    read_locks_in(&class_dir(card))
}

/// [`read_locks`] from a class device directory (for tests).
pub fn read_locks_in(dir: &Path) -> io::Result<Vec<LockLine>> {
    (0..LOCK_COUNT).map(|i| read_lock_in(dir, i)).collect()
}

/// The pids of `/proc/driver/tenstorrent/N/pids`: one per open file of the
/// card, in opening order, 0 for openers not visible in our pid namespace.
pub fn read_pids(card: u32) -> io::Result<Vec<u32>> {
    parse_pids(&fs::read_to_string(
        Path::new(PROC_DIR).join(card.to_string()).join("pids"),
    )?)
    .map_err(Into::into)
}

/// Parses the text of a `pids` file.
pub fn parse_pids(text: &str) -> Result<Vec<u32>, ParseError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.trim()
                .parse()
                .map_err(|_| ParseError(format!("pids line {l:?} is not a pid")))
        })
        .collect()
}

/// One queued request of the debugfs `waiters` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedRequest {
    /// Position in the card's queue (0 = first to be considered).
    pub position: u32,
    /// The waiting process.
    pub pid: u32,
    /// Names of the locks it asks for.
    pub locks: Vec<String>,
}

/// The debugfs `waiters` file of a card (root only; not a stable ABI).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiters {
    /// Per lock that has waiters: its name and the waiters' pids in the
    /// order they will be granted.
    pub locks: Vec<(String, Vec<u32>)>,
    /// Every queued request, in arrival order.
    pub queue: Vec<QueuedRequest>,
}

impl Waiters {
    /// Reads `/sys/kernel/debug/tenstorrent/N/waiters`.
    pub fn read(card: u32) -> io::Result<Waiters> {
        let text = fs::read_to_string(
            Path::new(DEBUGFS_DIR)
                .join(card.to_string())
                .join("waiters"),
        )?;
        Ok(text.parse()?)
    }

    /// The waiters of lock `name`, in grant order (empty if none).
    pub fn of(&self, name: &str) -> &[u32] {
        self.locks
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_slice())
            .unwrap_or(&[])
    }
}

impl FromStr for Waiters {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, ParseError> {
        let err = |l: &str, what: &str| ParseError(format!("waiters line {l:?}: {what}"));
        let pid = |l: &str, s: &str| s.parse::<u32>().map_err(|_| err(l, "bad pid"));
        let mut w = Waiters::default();
        let mut in_queue = false;
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            if l.trim() == "queue:" {
                in_queue = true;
            } else if !in_queue {
                let (name, pids) = l.split_once(':').ok_or_else(|| err(l, "no ':'"))?;
                let pids = pids
                    .split_whitespace()
                    .map(|p| pid(l, p))
                    .collect::<Result<_, _>>()?;
                w.locks.push((name.trim().to_string(), pids));
            } else {
                let mut it = l.split_whitespace();
                let position = it
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| err(l, "bad position"))?;
                let p = it
                    .next()
                    .and_then(|f| f.strip_prefix("pid="))
                    .ok_or_else(|| err(l, "no pid="))?;
                let locks = it
                    .next()
                    .and_then(|f| f.strip_prefix("locks="))
                    .ok_or_else(|| err(l, "no locks="))?;
                w.queue.push(QueuedRequest {
                    position,
                    pid: pid(l, p)?,
                    locks: locks
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect(),
                });
            }
        }
        if !in_queue {
            return Err(ParseError("waiters: no \"queue:\" line".into()));
        }
        Ok(w)
    }
}

/// The lock a user means: an index (`16`, `0x10`) or a well-known name in
/// any case (`ARC_MSG`, `arc_msg`, `eth03`, `ETH3`). `None` if neither or
/// out of range.
pub fn parse_lock(s: &str) -> Option<u32> {
    let s = s.trim();
    let index = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16).ok()
    } else if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        let upper = s.to_ascii_uppercase();
        abi::lock_index(&upper).or_else(|| {
            // ETH3 for ETH03.
            let n: u32 = upper.strip_prefix("ETH")?.parse().ok()?;
            (n < 16).then_some(n)
        })
    };
    index.filter(|&i| i < LOCK_COUNT)
}

/// Name of lock `index` as sysfs shows it: the well-known name or the index.
pub fn lock_label(index: u32) -> String {
    abi::lock_name(index)
        .map(String::from)
        .unwrap_or_else(|| index.to_string())
}

/// Parses a duration: a number (decimals allowed) and a unit `ns`, `us`,
/// `ms`, `s`, `m`, `h`; a bare number is seconds. `10s`, `500ms`, `2m`,
/// `1.5s`, `0`.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let err = || {
        ParseError(format!(
            "invalid duration {s:?} (examples: 10s, 500ms, 2m, 1.5h)"
        ))
    };
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() || number.starts_with('.') && number.len() == 1 {
        return Err(err());
    }
    let ns_per_unit: u128 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "" | "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(err()),
    };
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if frac.contains('.') {
        return Err(err());
    }
    let int: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| err())?
    };
    let mut ns = int.checked_mul(ns_per_unit).ok_or_else(err)?;
    // Fraction: digits beyond nanosecond precision are dropped.
    let mut scale = ns_per_unit;
    for d in frac.bytes() {
        scale /= 10;
        ns += (d - b'0') as u128 * scale;
    }
    let ns = u64::try_from(ns).map_err(|_| err())?;
    Ok(Duration::from_nanos(ns))
}

/// A short human form: `850ns`, `12us`, `340ms`, `4.2s`, `3m07s`, `2h05m`.
/// Round-trips through [`parse_duration`] for the units it accepts, up to
/// the precision shown.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{}us", ns / 1_000)
    } else if ns < 1_000_000_000 {
        format!("{}ms", ns / 1_000_000)
    } else if ns < 60_000_000_000 {
        let tenths = ns / 100_000_000;
        if tenths % 10 == 0 {
            format!("{}s", tenths / 10)
        } else {
            format!("{}.{}s", tenths / 10, tenths % 10)
        }
    } else {
        let s = d.as_secs();
        if s < 3600 {
            format!("{}m{:02}s", s / 60, s % 60)
        } else {
            format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELD: &str = "name=ARC_MSG held=1 pid=123 comm=python3 held_ns=2500000000 waiters=2 \
        owner_died_pending=0 acquisitions=10 contended=4 owner_died=1 wait_total_ns=900 \
        wait_max_ns=500 hold_max_ns=7000 spurious_wakeups=0\n";
    const FREE: &str = "name=40 held=0 pid=0 comm= held_ns=0 waiters=0 owner_died_pending=1 \
        acquisitions=1 contended=0 owner_died=1 wait_total_ns=0 wait_max_ns=0 hold_max_ns=0 \
        spurious_wakeups=0";

    #[test]
    fn lock_lines() {
        let l: LockLine = HELD.parse().unwrap();
        assert_eq!(
            l,
            LockLine {
                name: "ARC_MSG".into(),
                held: true,
                pid: 123,
                comm: "python3".into(),
                held_ns: 2_500_000_000,
                waiters: 2,
                owner_died_pending: false,
                acquisitions: 10,
                contended: 4,
                owner_died: 1,
                wait_total_ns: 900,
                wait_max_ns: 500,
                hold_max_ns: 7000,
                spurious_wakeups: 0,
                pollers: 0,
                polled_by: vec![],
            }
        );
        assert!(l.is_busy());
        assert_eq!(l.held_for(), Duration::from_millis(2500));

        let f: LockLine = FREE.parse().unwrap();
        assert_eq!(
            (f.name.as_str(), f.held, f.comm.as_str()),
            ("40", false, "")
        );
        assert!(f.owner_died_pending && !f.is_busy());

        // Fields appended by a later kernel are ignored.
        let more: LockLine = format!("{} future_field=7 x=", HELD.trim())
            .parse()
            .unwrap();
        assert_eq!(more, l);

        // Pollers: absent (an older module) is none; listed longest first.
        assert_eq!((l.pollers, l.polled_by.len()), (0, 0));
        let none: LockLine = format!("{} pollers=0 polled_by=", HELD.trim())
            .parse()
            .unwrap();
        assert_eq!(none, l);
        let polled: LockLine = format!(
            "{} pollers=3 polled_by=77/umd?worker/1500000000/1501,0/x/9/1 later=1",
            HELD.trim()
        )
        .parse()
        .unwrap();
        assert_eq!(polled.pollers, 3);
        assert_eq!(
            polled.polled_by,
            vec![
                Poller {
                    pid: 77,
                    comm: "umd?worker".into(),
                    polling_ns: 1_500_000_000,
                    tries: 1501
                },
                Poller {
                    pid: 0,
                    comm: "x".into(),
                    polling_ns: 9,
                    tries: 1
                }
            ]
        );
        assert_eq!(
            polled.polled_by[0].polling_for(),
            Duration::from_millis(1500)
        );
        let free_polled: LockLine = format!("{} pollers=1 polled_by=5/p/1/1", FREE.trim())
            .parse()
            .unwrap();
        assert!(free_polled.is_busy() && !free_polled.held);

        for bad in [
            "",
            "gone",
            &HELD.replace("held=1", "held=2"),
            &HELD.replace("pid=123", "pid=-1"),
            &HELD.replace("waiters=2 ", ""),
            &HELD.replace("name=ARC_MSG", "name="),
            &format!("{} pid=4", HELD.trim()),
            &HELD.replace("pid=123", "pid=99999999999"),
            &format!("{} pollers=x polled_by=", HELD.trim()),
            &format!("{} pollers=1 polled_by=5/p/1", HELD.trim()),
            &format!("{} pollers=1 polled_by=5/p/q/1", HELD.trim()),
            &format!("{} pollers=1 polled_by=5/a/b/1/1", HELD.trim()),
            &format!("{} pollers=1 polled_by=5/p/1/1,6/p/1/1", HELD.trim()),
            &format!("{} pollers=1 pollers=1 polled_by=", HELD.trim()),
            &format!("{} pollers=0 polled_by= polled_by=", HELD.trim()),
        ] {
            let e = bad.parse::<LockLine>().unwrap_err();
            assert!(e.to_string().starts_with("lock line"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn sysfs_directory() {
        let tmp = std::env::temp_dir().join(format!("tt-sysfs-test-{}", std::process::id()));
        let card = tmp.join("tenstorrent!3");
        fs::create_dir_all(card.join("locks")).unwrap();
        fs::create_dir_all(tmp.join("tenstorrent!10")).unwrap();
        fs::create_dir_all(tmp.join("other")).unwrap();
        for i in 0..LOCK_COUNT {
            let line = if i == 16 {
                HELD.to_string()
            } else {
                FREE.replace("name=40", &format!("name={}", lock_label(i)))
            };
            fs::write(card.join("locks").join(format!("{i:02}")), line).unwrap();
        }
        assert_eq!(cards_in(&tmp).unwrap(), vec![3, 10]);
        assert_eq!(cards_in(&tmp.join("missing")).unwrap(), Vec::<u32>::new());
        let locks = read_locks_in(&card).unwrap();
        assert_eq!(locks.len(), 64);
        assert_eq!(locks[16].pid, 123);
        assert_eq!(locks[3].name, "ETH03");
        assert_eq!(locks[63].name, "63");
        assert_eq!(read_lock_in(&card, 16).unwrap().comm, "python3");
        fs::write(card.join("locks/05"), "gone\n").unwrap();
        let e = read_locks_in(&card).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn pids_and_waiters() {
        assert_eq!(parse_pids("12\n0\n345\n").unwrap(), vec![12, 0, 345]);
        assert_eq!(parse_pids("").unwrap(), Vec::<u32>::new());
        assert!(parse_pids("12\nx\n").is_err());

        let text = "ARC_MSG: 10 11 12\nNON_MMIO: 12\nqueue:\n0 pid=10 locks=ARC_MSG\n\
                    1 pid=11 locks=ARC_MSG\n2 pid=12 locks=ARC_MSG,NON_MMIO\n";
        let w: Waiters = text.parse().unwrap();
        assert_eq!(w.of("ARC_MSG"), &[10, 11, 12]);
        assert_eq!(w.of("NON_MMIO"), &[12]);
        assert_eq!(w.of("ETH00"), &[] as &[u32]);
        assert_eq!(
            w.queue[2],
            QueuedRequest {
                position: 2,
                pid: 12,
                locks: vec!["ARC_MSG".into(), "NON_MMIO".into()]
            }
        );
        let empty: Waiters = "queue:\n".parse().unwrap();
        assert_eq!(empty, Waiters::default());
        assert!("ARC_MSG: 1\n".parse::<Waiters>().is_err());
        assert!("ARC_MSG 1\nqueue:\n".parse::<Waiters>().is_err());
        assert!("queue:\n0 pid=x locks=A\n".parse::<Waiters>().is_err());
    }

    #[test]
    fn lock_names() {
        assert_eq!(parse_lock("16"), Some(16));
        assert_eq!(parse_lock("0x10"), Some(16));
        assert_eq!(parse_lock("63"), Some(63));
        assert_eq!(parse_lock("64"), None);
        assert_eq!(parse_lock("ARC_MSG"), Some(16));
        assert_eq!(parse_lock("arc_msg"), Some(16));
        assert_eq!(parse_lock("Pcie_Dma"), Some(21));
        assert_eq!(parse_lock("ETH03"), Some(3));
        assert_eq!(parse_lock("eth3"), Some(3));
        assert_eq!(parse_lock("eth15"), Some(15));
        assert_eq!(parse_lock("eth16"), None);
        assert_eq!(parse_lock("bogus"), None);
        assert_eq!(parse_lock(""), None);
        assert_eq!(parse_lock("-1"), None);
        assert_eq!(lock_label(16), "ARC_MSG");
        assert_eq!(lock_label(40), "40");
    }

    #[test]
    fn durations() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("10s").unwrap(), ms(10_000));
        assert_eq!(parse_duration("500ms").unwrap(), ms(500));
        assert_eq!(parse_duration("2m").unwrap(), ms(120_000));
        assert_eq!(parse_duration("1h").unwrap(), ms(3_600_000));
        assert_eq!(parse_duration("1.5s").unwrap(), ms(1_500));
        assert_eq!(parse_duration("0.25m").unwrap(), ms(15_000));
        assert_eq!(parse_duration("3").unwrap(), ms(3_000));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("7us").unwrap(), Duration::from_micros(7));
        assert_eq!(parse_duration("9ns").unwrap(), Duration::from_nanos(9));
        assert_eq!(parse_duration(" 2 s ").unwrap(), ms(2_000));
        for bad in [
            "",
            "s",
            "ms",
            "1.2.3s",
            "10x",
            "-1s",
            ".",
            "1e3s",
            "99999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }

        assert_eq!(format_duration(Duration::from_nanos(850)), "850ns");
        assert_eq!(format_duration(Duration::from_micros(12)), "12us");
        assert_eq!(format_duration(ms(340)), "340ms");
        assert_eq!(format_duration(ms(4_000)), "4s");
        assert_eq!(format_duration(ms(4_250)), "4.2s");
        assert_eq!(format_duration(ms(187_000)), "3m07s");
        assert_eq!(format_duration(ms(7_500_000)), "2h05m");
        for d in ["850ns", "12us", "340ms", "4s", "4.2s"] {
            assert_eq!(format_duration(parse_duration(d).unwrap()), d);
        }
    }
}

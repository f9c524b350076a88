//! The status table, built from sysfs and procfs: readable without access
//! to the devices. Per card the locks, then who waits for them (from the
//! waiting processes' fdinfo), then what else its files hold: the exclusive
//! open, the power votes, the TLB windows.

use std::fmt::Write;
use std::time::Duration;

use tt_arbiter::fdinfo::{self, FdInfo};
use tt_arbiter::resources::{self, Exclusive, PowerState, PowerVote, WindowLine};
use tt_arbiter::sysfs::{self, format_duration, parse_lock, LockLine};
use tt_arbiter::DEV_DIR;

/// What a card's files hold besides locks; `None` where the view could not
/// be read (an older module, or no permission).
#[derive(Default)]
pub struct Resources {
    pub exclusive: Option<Exclusive>,
    pub power: Option<(PowerState, Vec<PowerVote>)>,
    pub windows: Option<Vec<WindowLine>>,
}

impl Resources {
    fn read(card: u32) -> Resources {
        Resources {
            exclusive: resources::read_exclusive(card).ok(),
            power: resources::read_power(card).ok(),
            windows: resources::read_windows(card).ok(),
        }
    }
}

/// A process waiting for a lock, as the waiters' table shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub pid: u32,
    pub comm: String,
    pub lock: String,
    pub waited: Duration,
}

/// The waiters of card `card` among the open files `files` (one row per
/// open file and lock, whatever number of descriptors share the file),
/// lock by lock, the longest waiting first; `comm` names a pid.
pub fn waiting_of(card: u32, files: &[FdInfo], comm: impl Fn(u32) -> String) -> Vec<Waiting> {
    let mut seen = Vec::new();
    let mut rows = Vec::new();
    for f in files.iter().filter(|f| f.card == card) {
        if seen.contains(&f.client_id) {
            continue;
        }
        seen.push(f.client_id);
        for (lock, waited) in &f.waiting {
            rows.push(Waiting {
                pid: f.pid,
                comm: comm(f.pid),
                lock: lock.clone(),
                waited: *waited,
            });
        }
    }
    rows.sort_by_key(|w| (parse_lock(&w.lock), std::cmp::Reverse(w.waited)));
    rows
}

/// The waiters' table under a card's locks; a note when processes that
/// could not be inspected may hide some (`hidden`).
pub fn render_waiting(rows: &[Waiting], hidden: bool) -> String {
    let mut out = String::new();
    if !rows.is_empty() {
        let cells: Vec<[String; 4]> = rows
            .iter()
            .map(|w| {
                [
                    w.lock.clone(),
                    w.pid.to_string(),
                    w.comm.clone(),
                    format_duration(w.waited),
                ]
            })
            .collect();
        out += &table(&["WAITING-FOR", "PID", "COMM", "WAITED"], &cells);
    }
    if hidden {
        out += "  (waiters in processes this user may not inspect are not listed: run as root)\n";
    }
    out
}

/// The table of `cards`, one block per card.
pub fn render(cards: &[u32]) -> String {
    let mut out = String::new();
    // Who waits is in the waiting processes' fdinfo (the lock lines only
    // count them).
    let scan = fdinfo::scan().unwrap_or_default();
    for &card in cards {
        let bdf = std::fs::read_link(sysfs::class_dir(card).join("device"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let open_files = sysfs::read_pids(card).ok().map(|p| p.len());
        match sysfs::read_locks(card) {
            Ok(locks) => {
                out += &render_card(card, bdf.as_deref(), open_files, &locks);
                out += &render_polling(&locks);
                let waiters = locks.iter().any(|l| l.waiters > 0);
                let rows = waiting_of(card, &scan.files, |pid| {
                    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"));
                    comm.unwrap_or_default().trim_end().to_string()
                });
                out += &render_waiting(&rows, waiters && scan.unreadable > 0);
                out += &render_resources(&Resources::read(card));
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "{DEV_DIR}/{card}: cannot read {}/locks: {e}",
                    sysfs::class_dir(card).display()
                );
            }
        }
    }
    out
}

/// The block of one card: a summary line, then the busy locks (held or
/// waited for) as a table.
pub fn render_card(
    card: u32,
    bdf: Option<&str>,
    open_files: Option<usize>,
    locks: &[LockLine],
) -> String {
    let mut out = format!("{DEV_DIR}/{card}");
    if let Some(bdf) = bdf {
        let _ = write!(out, " ({bdf})");
    }
    let busy: Vec<(usize, &LockLine)> = locks
        .iter()
        .enumerate()
        .filter(|(_, l)| l.is_busy())
        .collect();
    let held = busy.iter().filter(|(_, l)| l.held).count();
    let waited = busy.iter().filter(|(_, l)| l.waiters > 0).count();
    let polled = busy.iter().filter(|(_, l)| l.pollers > 0).count();
    out += ": ";
    if held == 0 && waited == 0 {
        out += "no locks held";
    } else {
        let _ = write!(out, "{held} held, {waited} with waiters");
    }
    if polled > 0 {
        let _ = write!(out, ", {polled} polled");
    }
    if let Some(n) = open_files {
        let _ = write!(out, ", {n} open file{}", if n == 1 { "" } else { "s" });
    }
    let pending: Vec<&str> = locks
        .iter()
        .filter(|l| l.owner_died_pending)
        .map(|l| l.name.as_str())
        .collect();
    if !pending.is_empty() {
        let _ = write!(
            out,
            "; holder died holding {} (not re-acquired since)",
            pending.join(",")
        );
    }
    out.push('\n');
    if busy.is_empty() {
        return out;
    }
    let rows: Vec<[String; 8]> = busy
        .iter()
        .map(|(i, l)| {
            [
                i.to_string(),
                l.name.clone(),
                match (l.held, l.pid) {
                    (false, _) => "-".into(),
                    (true, 0) => "?".into(),
                    (true, p) => p.to_string(),
                },
                if l.held { l.comm.clone() } else { "-".into() },
                if l.held {
                    format_duration(l.held_for())
                } else {
                    "-".into()
                },
                l.waiters.to_string(),
                l.owner_died.to_string(),
                l.pollers.to_string(),
            ]
        })
        .collect();
    let header = [
        "LOCK",
        "NAME",
        "HOLDER(pid)",
        "COMM",
        "HELD-FOR",
        "WAITERS",
        "OWNER-DIED",
        "POLLERS",
    ];
    out += &table(&header, &rows);
    if rows.iter().any(|r| r[2] == "?") {
        out += "  (? = holder not visible in this pid namespace, or exited)\n";
    }
    out
}

/// The pollers' table under a card's locks, from the lock lines: who
/// polls which lock (failed tries that go on: UMD's `lock()` on `LOCK_CTL`),
/// for how long and with how many tries, the longest first, as sysfs
/// lists them; a note for those a lock line counts but does not list.
/// Nothing when nobody polls.
pub fn render_polling(locks: &[LockLine]) -> String {
    let mut out = String::new();
    let mut rows = Vec::new();
    let mut unlisted = 0;
    for l in locks {
        unlisted += (l.pollers as usize).saturating_sub(l.polled_by.len());
        for p in &l.polled_by {
            rows.push([
                l.name.clone(),
                pid_cell(p.pid),
                p.comm.clone(),
                format_duration(p.polling_for()),
                p.tries.to_string(),
            ]);
        }
    }
    if !rows.is_empty() {
        out += &table(&["POLLING", "PID", "COMM", "FOR", "TRIES"], &rows);
    }
    if unlisted > 0 {
        let _ = writeln!(out, "  ({unlisted} more pollers not listed)");
    }
    out
}

/// A pid as the tables show it: `?` when not visible in this namespace.
fn pid_cell(pid: u32) -> String {
    if pid == 0 {
        "?".into()
    } else {
        pid.to_string()
    }
}

/// Window sizes as people say them.
fn size_label(size: u64) -> String {
    match size {
        s if s >= 1 << 30 && s % (1 << 30) == 0 => format!("{}G", s >> 30),
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}M", s >> 20),
        s => format!("{s:#x}"),
    }
}

/// The lines under a card's lock table: who holds it exclusively, what its
/// power votes add up to, which TLB windows are held and where they point.
/// Nothing for a view that is absent, or that shows nothing held.
pub fn render_resources(res: &Resources) -> String {
    let mut out = String::new();
    if let Some(e) = res.exclusive.as_ref().filter(|e| e.held || e.waiting > 0) {
        if e.held {
            let _ = write!(
                out,
                "  exclusive: held by pid {} ({})",
                pid_cell(e.pid),
                e.comm
            );
        } else {
            out += "  exclusive: not held";
        }
        if e.waiting > 0 {
            let s = if e.waiting == 1 { "" } else { "s" };
            let _ = write!(out, ", {} open{s} waiting", e.waiting);
        }
        out.push('\n');
    }
    if let Some((state, votes)) = &res.power {
        let counting: Vec<String> = votes
            .iter()
            .filter(|v| v.flags != 0)
            .map(|v| format!("pid {} ({}) {:#06x}", pid_cell(v.pid), v.comm, v.flags))
            .collect();
        if state.sent || !counting.is_empty() {
            let how = match (state.sent, state.accepted) {
                (false, _) => "not sent yet",
                (true, true) => "sent to the firmware",
                (true, false) => "sent, not taken by the firmware",
            };
            let _ = write!(out, "  power: {:#06x} {how}", state.flags);
            if state.powerdown_pending {
                out += ", powering down";
            }
            if !counting.is_empty() {
                let _ = write!(out, "; votes: {}", counting.join(", "));
            }
            out.push('\n');
        }
    }
    if let Some(windows) = res.windows.as_ref().filter(|w| !w.is_empty()) {
        let s = if windows.len() == 1 { "" } else { "s" };
        let _ = writeln!(out, "  {} TLB window{s} held:", windows.len());
        let rows: Vec<[String; 5]> = windows
            .iter()
            .map(|w| {
                [
                    w.id.to_string(),
                    size_label(w.size),
                    pid_cell(w.pid),
                    w.comm.clone(),
                    w.target.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        out += &table(&["WINDOW", "SIZE", "HOLDER(pid)", "COMM", "TARGET"], &rows);
    }
    out
}

/// Left-aligned columns under a header, indented by two, lines trimmed.
fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; N]| {
        let mut s = String::from(" ");
        for (c, w) in cells.iter().zip(widths) {
            let _ = write!(s, " {c:<w$}");
        }
        out += s.trim_end();
        out.push('\n');
    };
    line(*header);
    for r in rows {
        line(r.each_ref().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tt_arbiter::sysfs::Poller;

    fn line(name: &str, held: bool, pid: u32, comm: &str, waiters: u32) -> LockLine {
        LockLine {
            name: name.into(),
            held,
            pid,
            comm: comm.into(),
            held_ns: if held { 1_500_000_000 } else { 0 },
            waiters,
            owner_died: 2,
            ..LockLine::default()
        }
    }

    #[test]
    fn no_locks_held() {
        let locks: Vec<LockLine> = (0..64)
            .map(|i| line(&i.to_string(), false, 0, "", 0))
            .collect();
        assert_eq!(
            render_card(1, Some("0000:00:05.0"), Some(0), &locks),
            "/dev/tenstorrent/1 (0000:00:05.0): no locks held, 0 open files\n"
        );
        let mut locks = locks;
        locks[3].owner_died_pending = true;
        locks[3].name = "ETH03".into();
        assert_eq!(
            render_card(0, None, None, &locks),
            "/dev/tenstorrent/0: no locks held; holder died holding ETH03 (not re-acquired since)\n"
        );
    }

    #[test]
    fn busy_locks_table() {
        let mut locks: Vec<LockLine> = (0..64)
            .map(|i| line(&i.to_string(), false, 0, "", 0))
            .collect();
        locks[16] = line("ARC_MSG", true, 123, "python3", 2);
        locks[18] = line("NON_MMIO", false, 0, "", 1);
        locks[40] = line("40", true, 0, "outsider", 0);
        let text = render_card(0, Some("0000:00:04.0"), Some(1), &locks);
        let expected = "\
/dev/tenstorrent/0 (0000:00:04.0): 2 held, 2 with waiters, 1 open file
  LOCK NAME     HOLDER(pid) COMM     HELD-FOR WAITERS OWNER-DIED POLLERS
  16   ARC_MSG  123         python3  1.5s     2       2          0
  18   NON_MMIO -           -        -        1       2          0
  40   40       ?           outsider 1.5s     0       2          0
  (? = holder not visible in this pid namespace, or exited)
";
        assert_eq!(text, expected);
    }

    #[test]
    fn polled_locks_and_pollers_table() {
        let poller = |pid, comm: &str, ms: u64, tries| Poller {
            pid,
            comm: comm.into(),
            polling_ns: ms * 1_000_000,
            tries,
        };
        let mut locks: Vec<LockLine> = (0..64)
            .map(|i| line(&i.to_string(), false, 0, "", 0))
            .collect();
        assert_eq!(render_polling(&locks), "");
        // ARC_MSG held by 123, polled by 77 alone (nobody queued); 45
        // free but polled by two, one not visible, and one more not listed.
        locks[16] = line("ARC_MSG", true, 123, "holder", 0);
        locks[16].pollers = 1;
        locks[16].polled_by = vec![poller(77, "umd-job", 2500, 2400)];
        locks[45].pollers = 3;
        locks[45].polled_by = vec![poller(0, "gone", 40, 3), poller(78, "p", 1, 1)];
        let text = render_card(0, None, Some(3), &locks);
        let expected = "\
/dev/tenstorrent/0: 1 held, 0 with waiters, 2 polled, 3 open files
  LOCK NAME    HOLDER(pid) COMM   HELD-FOR WAITERS OWNER-DIED POLLERS
  16   ARC_MSG 123         holder 1.5s     0       2          1
  45   45      -           -      -        0       2          3
";
        assert_eq!(text, expected);
        let expected = [
            "  POLLING PID COMM    FOR  TRIES",
            "  ARC_MSG 77  umd-job 2.5s 2400",
            "  45      ?   gone    40ms 3",
            "  45      78  p       1ms  1",
            "  (1 more pollers not listed)",
            "",
        ]
        .join("\n");
        assert_eq!(render_polling(&locks), expected);
    }

    #[test]
    fn waiters_table() {
        let file = |pid, id, card, waiting: &[(&str, u64)]| FdInfo {
            pid,
            card,
            client_id: id,
            waiting: waiting
                .iter()
                .map(|(l, ms)| (l.to_string(), Duration::from_millis(*ms)))
                .collect(),
            ..FdInfo::default()
        };
        let files = [
            file(5, 1, 0, &[("NON_MMIO", 100)]),
            file(6, 2, 0, &[("ARC_MSG", 2500), ("NON_MMIO", 3000)]),
            // The same open file through another process: shown once.
            file(7, 2, 0, &[("ARC_MSG", 2500), ("NON_MMIO", 3000)]),
            file(8, 1, 1, &[("ARC_MSG", 1)]),
        ];
        let rows = waiting_of(0, &files, |pid| format!("job{pid}"));
        let who: Vec<(&str, u32)> = rows.iter().map(|w| (w.lock.as_str(), w.pid)).collect();
        assert_eq!(who, [("ARC_MSG", 6), ("NON_MMIO", 6), ("NON_MMIO", 5)]);
        let text = render_waiting(&rows[..1], true);
        let expected = [
            "  WAITING-FOR PID COMM WAITED",
            "  ARC_MSG     6   job6 2.5s",
            "  (waiters in processes this user may not inspect are not listed: run as root)",
            "",
        ]
        .join("\n");
        assert_eq!(text, expected);
        assert_eq!(render_waiting(&[], false), "");
    }

    #[test]
    fn resources_lines() {
        assert_eq!(render_resources(&Resources::default()), "");
        let quiet = Resources {
            exclusive: Some(Exclusive {
                open: 2,
                ..Exclusive::default()
            }),
            power: Some((PowerState::default(), vec![])),
            windows: Some(vec![]),
        };
        assert_eq!(render_resources(&quiet), "");
        let window = |id, size, pid, comm: &str, target: Option<&str>| WindowLine {
            id,
            size,
            pid,
            comm: comm.into(),
            target: target.map(Into::into),
        };
        let busy = Resources {
            exclusive: Some(Exclusive {
                held: true,
                pid: 7,
                comm: "tt-flash".into(),
                open: 1,
                waiting: 2,
            }),
            power: Some((
                PowerState {
                    sent: true,
                    accepted: true,
                    flags: 0x7ffe,
                    voters: 2,
                    powerdown_pending: false,
                },
                vec![
                    PowerVote {
                        pid: 7,
                        comm: "tt-flash".into(),
                        flags: 0x7ffe,
                    },
                    PowerVote {
                        pid: 8,
                        comm: "umd".into(),
                        flags: 0,
                    },
                ],
            )),
            windows: Some(vec![
                window(3, 2 << 20, 7, "tt-flash", Some("1,2 0x1f000")),
                window(202, 4 << 30, 0, "gone", None),
            ]),
        };
        let expected = [
            "  exclusive: held by pid 7 (tt-flash), 2 opens waiting",
            "  power: 0x7ffe sent to the firmware; votes: pid 7 (tt-flash) 0x7ffe",
            "  2 TLB windows held:",
            "  WINDOW SIZE HOLDER(pid) COMM     TARGET",
            "  3      2M   7           tt-flash 1,2 0x1f000",
            "  202    4G   ?           gone     -",
            "",
        ]
        .join("\n");
        assert_eq!(render_resources(&busy), expected);
    }
}

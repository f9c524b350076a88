//! The status table, built from sysfs (and procfs for the open-file count):
//! readable without access to the devices.

use std::fmt::Write;

use tt_arbiter::sysfs::{self, format_duration, LockLine};
use tt_arbiter::DEV_DIR;

/// The table of `cards`, one block per card.
pub fn render(cards: &[u32]) -> String {
    let mut out = String::new();
    for &card in cards {
        let bdf = std::fs::read_link(sysfs::class_dir(card).join("device"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let open_files = sysfs::read_pids(card).ok().map(|p| p.len());
        match sysfs::read_locks(card) {
            Ok(locks) => out += &render_card(card, bdf.as_deref(), open_files, &locks),
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
    out += ": ";
    if held == 0 && waited == 0 {
        out += "no locks held";
    } else {
        let _ = write!(out, "{held} held, {waited} with waiters");
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
    let rows: Vec<[String; 7]> = busy
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
    ];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let mut line = |cells: &[&str]| {
        let mut s = String::from(" ");
        for (c, w) in cells.iter().zip(widths) {
            let _ = write!(s, " {c:<w$}");
        }
        out += s.trim_end();
        out.push('\n');
    };
    line(&header);
    for r in &rows {
        line(&r.each_ref().map(String::as_str));
    }
    if rows.iter().any(|r| r[2] == "?") {
        out += "  (? = holder not visible in this pid namespace, or exited)\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
  LOCK NAME     HOLDER(pid) COMM     HELD-FOR WAITERS OWNER-DIED
  16   ARC_MSG  123         python3  1.5s     2       2
  18   NON_MMIO -           -        -        1       2
  40   40       ?           outsider 1.5s     0       2
  (? = holder not visible in this pid namespace, or exited)
";
        assert_eq!(text, expected);
    }
}

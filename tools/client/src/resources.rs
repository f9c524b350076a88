//! The views of what a file holds on a card besides its locks: the
//! exclusive open, the power votes and the TLB windows. Like the lock view
//! ([`crate::sysfs`]) they are plain files that need no access to the
//! device node.
//!
//! - `/sys/class/tenstorrent/tenstorrent!N/open/exclusive` ([`Exclusive`]);
//! - `/sys/class/tenstorrent/tenstorrent!N/power_votes/state` and `power_votes/votes`
//!   ([`PowerState`], [`PowerVote`]);
//! - `/proc/driver/tenstorrent/N/tlb`, one line per window in use
//!   ([`WindowLine`]).
//!
//! ```
//! use tt_arbiter::resources::{Exclusive, WindowLine};
//! let e: Exclusive = "held=1 pid=7 comm=tt-flash open=1 waiting=2".parse().unwrap();
//! assert_eq!((e.held, e.pid, e.waiting), (true, 7, 2));
//! let w: WindowLine = "3 0x200000 42 python3 1,2 0x1f000".parse().unwrap();
//! assert_eq!((w.id, w.size, w.target.as_deref()), (3, 2 << 20, Some("1,2 0x1f000")));
//! ```

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;
use std::str::FromStr;

use crate::sysfs::{class_dir, ParseError, PROC_DIR};

/// A line of `key=value` fields, each key once; unknown keys (appended by
/// a later kernel) are kept and ignored.
struct Fields<'a> {
    what: &'static str,
    line: &'a str,
    map: HashMap<&'a str, &'a str>,
}

impl<'a> Fields<'a> {
    fn parse(what: &'static str, line: &'a str) -> Result<Self, ParseError> {
        let mut map = HashMap::new();
        for field in line.split_whitespace() {
            let (key, value) = field.split_once('=').ok_or_else(|| {
                ParseError(format!(
                    "{what} {:?}: field {field:?} has no '='",
                    line.trim_end()
                ))
            })?;
            if map.insert(key, value).is_some() {
                return Err(ParseError(format!(
                    "{what} {:?}: field {key} appears twice",
                    line.trim_end()
                )));
            }
        }
        Ok(Fields { what, line, map })
    }

    fn err(&self, what: String) -> ParseError {
        ParseError(format!("{} {:?}: {what}", self.what, self.line.trim_end()))
    }

    fn text(&self, key: &str) -> Result<&'a str, ParseError> {
        self.map
            .get(key)
            .copied()
            .ok_or_else(|| self.err(format!("field {key} missing")))
    }

    fn number(&self, key: &str) -> Result<u64, ParseError> {
        let value = self.text(key)?;
        let parsed = match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => value.parse(),
        };
        parsed.map_err(|_| self.err(format!("{key}={value:?} is not a number")))
    }

    fn small(&self, key: &str) -> Result<u32, ParseError> {
        u32::try_from(self.number(key)?).map_err(|_| self.err(format!("{key} out of range")))
    }

    fn flag(&self, key: &str) -> Result<bool, ParseError> {
        match self.text(key)? {
            "0" => Ok(false),
            "1" => Ok(true),
            v => Err(self.err(format!("{key}={v:?} is not 0 or 1"))),
        }
    }
}

/// The exclusive open of a card (`open/exclusive`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exclusive {
    /// An `O_EXCL` file holds the card (then its only open file).
    pub held: bool,
    /// Its opener, in the reader's pid namespace (0 if not visible or not
    /// held).
    pub pid: u32,
    /// The opener's comm; empty if not held.
    pub comm: String,
    /// Files of the card open now.
    pub open: u32,
    /// Opens waiting to be admitted.
    pub waiting: u32,
}

impl FromStr for Exclusive {
    type Err = ParseError;

    fn from_str(line: &str) -> Result<Self, ParseError> {
        let f = Fields::parse("open/exclusive", line)?;
        Ok(Exclusive {
            held: f.flag("held")?,
            pid: f.small("pid")?,
            comm: f.text("comm")?.to_string(),
            open: f.small("open")?,
            waiting: f.small("waiting")?,
        })
    }
}

/// The power state the driver last sent the card's firmware
/// (`power_votes/state`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PowerState {
    /// Something was sent since the card was bound.
    pub sent: bool,
    /// The firmware took it.
    pub accepted: bool,
    /// What the votes added up to (`TENSTORRENT_POWER_FLAG_*`).
    pub flags: u16,
    /// Open files (each votes).
    pub voters: u32,
    /// The last file closed; the card powers down after the grace.
    pub powerdown_pending: bool,
}

impl FromStr for PowerState {
    type Err = ParseError;

    fn from_str(line: &str) -> Result<Self, ParseError> {
        let f = Fields::parse("power_votes/state", line)?;
        Ok(PowerState {
            sent: f.flag("sent")?,
            accepted: f.flag("accepted")?,
            flags: u16::try_from(f.number("flags")?)
                .map_err(|_| f.err("flags out of range".into()))?,
            voters: f.small("voters")?,
            powerdown_pending: f.flag("powerdown_pending")?,
        })
    }
}

/// One open file's power vote (a line of `power_votes/votes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PowerVote {
    pub pid: u32,
    pub comm: String,
    /// The flags it asks for; 0 counts for nothing (an `O_APPEND` open).
    pub flags: u16,
}

impl FromStr for PowerVote {
    type Err = ParseError;

    fn from_str(line: &str) -> Result<Self, ParseError> {
        let f = Fields::parse("power_votes/votes line", line)?;
        Ok(PowerVote {
            pid: f.small("pid")?,
            comm: f.text("comm")?.to_string(),
            flags: u16::try_from(f.number("flags")?)
                .map_err(|_| f.err("flags out of range".into()))?,
        })
    }
}

/// One TLB window in use (a line of `/proc/driver/tenstorrent/N/tlb`:
/// `ID SIZE PID COMM TARGET`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowLine {
    /// The window's id, the hardware index (ALLOCATE_TLB's `id`).
    pub id: u32,
    /// Its size in bytes.
    pub size: u64,
    /// Its holder, in the reader's pid namespace (0 if not visible).
    pub pid: u32,
    pub comm: String,
    /// Where it points, read back from its register (`X,Y ADDR`, with
    /// `mcast from X,Y` for a multicast; `0,0 0x0` until someone aims it);
    /// `None` when the card's registers cannot be read (`-`).
    pub target: Option<String>,
}

impl FromStr for WindowLine {
    type Err = ParseError;

    fn from_str(line: &str) -> Result<Self, ParseError> {
        let err = |what: &str| ParseError(format!("tlb line {:?}: {what}", line.trim_end()));
        let mut words = line.split_whitespace();
        let mut next = |what: &str| words.next().ok_or_else(|| err(&format!("no {what}")));
        let id = next("id")?.parse().map_err(|_| err("id is not a number"))?;
        let size = next("size")?;
        let size = size
            .strip_prefix("0x")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .ok_or_else(|| err("size is not 0x-hex"))?;
        let pid = next("pid")?
            .parse()
            .map_err(|_| err("pid is not a number"))?;
        let comm = next("comm")?.to_string();
        let target: Vec<&str> = words.collect();
        let target = match target.as_slice() {
            [] => return Err(err("no target")),
            ["-"] => None,
            t => Some(t.join(" ")),
        };
        Ok(WindowLine {
            id,
            size,
            pid,
            comm,
            target,
        })
    }
}

fn read_line_file<T: FromStr<Err = ParseError>>(path: &Path) -> io::Result<T> {
    Ok(fs::read_to_string(path)?.trim_end().parse()?)
}

fn read_lines_file<T: FromStr<Err = ParseError>>(path: &Path) -> io::Result<Vec<T>> {
    fs::read_to_string(path)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.parse().map_err(io::Error::from))
        .collect()
}

/// Card `card`'s exclusive open.
pub fn read_exclusive(card: u32) -> io::Result<Exclusive> {
    read_line_file(&class_dir(card).join("open").join("exclusive"))
}

/// Card `card`'s power state and the votes behind it.
pub fn read_power(card: u32) -> io::Result<(PowerState, Vec<PowerVote>)> {
    let dir = class_dir(card).join("power_votes");
    Ok((
        read_line_file(&dir.join("state"))?,
        read_lines_file(&dir.join("votes"))?,
    ))
}

/// Card `card`'s TLB windows in use, by id.
pub fn read_windows(card: u32) -> io::Result<Vec<WindowLine>> {
    read_lines_file(&Path::new(PROC_DIR).join(card.to_string()).join("tlb"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_lines() {
        let e: Exclusive = "held=0 pid=0 comm= open=3 waiting=0".parse().unwrap();
        assert_eq!(
            e,
            Exclusive {
                open: 3,
                ..Exclusive::default()
            }
        );
        assert!("held=2 pid=0 comm= open=0 waiting=0"
            .parse::<Exclusive>()
            .is_err());
        assert!("held=1 pid=7 comm=x open=1".parse::<Exclusive>().is_err());
        // A field a later kernel appends is ignored.
        assert!("held=1 pid=7 comm=x open=1 waiting=0 new=5"
            .parse::<Exclusive>()
            .is_ok());
    }

    #[test]
    fn power_lines() {
        let s: PowerState = "sent=1 accepted=1 flags=0x7ffe validity=0x0f \
            settings=0,0 messages=3 failures=0 voters=2 powerdown_pending=0"
            .parse()
            .unwrap();
        assert_eq!((s.sent, s.flags, s.voters), (true, 0x7ffe, 2));
        let v: PowerVote = "pid=12 comm=python3 flags=0x0000 validity=0x0f settings="
            .parse()
            .unwrap();
        assert_eq!((v.pid, v.comm.as_str(), v.flags), (12, "python3", 0));
        assert!("pid=12 comm=x flags=0x10000".parse::<PowerVote>().is_err());
    }

    #[test]
    fn window_lines() {
        let w: WindowLine = "185 0x1000000 9 umd -".parse().unwrap();
        assert_eq!((w.id, w.size, w.pid, w.target), (185, 16 << 20, 9, None));
        let w: WindowLine = "0 0x100000 9 umd 4,5 0x100 mcast from 1,1".parse().unwrap();
        assert_eq!(w.target.as_deref(), Some("4,5 0x100 mcast from 1,1"));
        assert!("0 1048576 9 umd -".parse::<WindowLine>().is_err());
        assert!("0 0x100000 9 umd".parse::<WindowLine>().is_err());
    }
}

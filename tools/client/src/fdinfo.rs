//! What each open file of a card holds, from `/proc/PID/fdinfo/FD`
//! (Documentation/ABI/testing/procfs-fdinfo-tenstorrent): its locks held and
//! awaited, windows, DMA, power vote, exclusive open and firmware message.
//! This is how a tool attributes a card's use to processes, `lsof`-style.
//!
//! Reading another process's fdinfo needs the right to inspect it (the same
//! user, or root); [`scan`] counts the processes it could not look into.
//!
//! ```
//! use std::time::Duration;
//! use tt_arbiter::fdinfo::FdInfo;
//! let text = "pos:\t0\nflags:\t02\nmnt_id:\t20\nino:\t5\n\
//!     tt-driver:\ttenstorrent\ntt-card:\t0\ntt-client-id:\t7\n\
//!     tt-locks-held:\t1\ntt-lock-held-ARC_MSG:\t1500 ns\n\
//!     tt-locks-waiting:\t0\ntt-smc-msg:\tnone\n";
//! let f: FdInfo = text.parse().unwrap();
//! assert_eq!((f.card, f.client_id), (0, 7));
//! assert_eq!(f.held, vec![("ARC_MSG".to_string(), Duration::from_nanos(1500))]);
//! assert_eq!(f.get("tt-smc-msg"), Some("none"));
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use crate::sysfs::{self, ParseError};

/// The `tt-` lines of one open card file's fdinfo.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FdInfo {
    /// The process whose descriptor it was read through (0 when parsed
    /// from text).
    pub pid: u32,
    /// The descriptor (0 when parsed from text).
    pub fd: u32,
    /// N of `/dev/tenstorrent/N`.
    pub card: u32,
    /// The open file's id, unique on its card: descriptors that share one
    /// open file (`dup`, `fork`, `SCM_RIGHTS`) show the same.
    pub client_id: u64,
    /// The locks it holds, by name, and for how long.
    pub held: Vec<(String, Duration)>,
    /// The locks its queued requests wait for, and for how long.
    pub waiting: Vec<(String, Duration)>,
    /// The locks it polls (its failed tries go on): for how long, and
    /// how many tries failed.
    pub polling: Vec<(String, Duration, u64)>,
    /// Every `tt-` key with its value as written (units included).
    pub keys: BTreeMap<String, String>,
}

impl FdInfo {
    /// The value of `key` (e.g. `tt-tlb-windows`) as written.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.keys.get(key).map(String::as_str)
    }

    /// The value of `key` as a number (`0x` for hexadecimal), if present.
    pub fn number(&self, key: &str) -> Option<u64> {
        let v = self.get(key)?;
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    }

    /// Reads `/proc/PID/fdinfo/FD`.
    pub fn read(pid: u32, fd: u32) -> io::Result<FdInfo> {
        read_in(Path::new("/proc"), pid, fd)
    }
}

/// A duration as fdinfo writes it: `N ns`.
fn nanoseconds(v: &str) -> Option<Duration> {
    let n = v.strip_suffix(" ns")?;
    n.parse().ok().map(Duration::from_nanos)
}

impl FromStr for FdInfo {
    type Err = ParseError;

    /// The whole fdinfo text; the VFS's own lines (`pos:`, `flags:`, ...)
    /// are skipped, `tt-driver` must say `tenstorrent`.
    fn from_str(text: &str) -> Result<Self, ParseError> {
        let mut info = FdInfo::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            if !key.starts_with("tt-") {
                continue;
            }
            let value = value.trim_start();
            let bad = || ParseError(format!("fdinfo line {line:?}"));
            if let Some(lock) = key.strip_prefix("tt-lock-held-") {
                info.held
                    .push((lock.to_string(), nanoseconds(value).ok_or_else(bad)?));
            } else if let Some(lock) = key.strip_prefix("tt-lock-waiting-") {
                info.waiting
                    .push((lock.to_string(), nanoseconds(value).ok_or_else(bad)?));
            } else if let Some(lock) = key.strip_prefix("tt-lock-polling-") {
                info.polling
                    .push((lock.to_string(), nanoseconds(value).ok_or_else(bad)?, 0));
            } else if let Some(lock) = key.strip_prefix("tt-lock-poll-tries-") {
                let tries = value.parse().map_err(|_| bad())?;
                // After its lock's polling line.
                let entry = info.polling.iter_mut().find(|(l, _, _)| l == lock);
                entry.ok_or_else(bad)?.2 = tries;
            }
            if info.keys.insert(key.into(), value.into()).is_some() {
                return Err(ParseError(format!("fdinfo key {key} appears twice")));
            }
        }
        if info.get("tt-driver") != Some("tenstorrent") {
            return Err(ParseError(format!(
                "not a tenstorrent file: tt-driver is {:?}",
                info.get("tt-driver")
            )));
        }
        let number = |key: &str| {
            info.number(key)
                .ok_or_else(|| ParseError(format!("fdinfo: {key} missing or not a number")))
        };
        let card = u32::try_from(number("tt-card")?)
            .map_err(|_| ParseError("fdinfo: tt-card out of range".into()))?;
        let client_id = number("tt-client-id")?;
        Ok(FdInfo {
            card,
            client_id,
            ..info
        })
    }
}

fn read_in(proc_dir: &Path, pid: u32, fd: u32) -> io::Result<FdInfo> {
    let path = proc_dir.join(format!("{pid}/fdinfo/{fd}"));
    let mut info: FdInfo = fs::read_to_string(path)?.parse()?;
    (info.pid, info.fd) = (pid, fd);
    Ok(info)
}

/// What [`scan`] found.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Every descriptor of a card's node, by pid then descriptor.
    pub files: Vec<FdInfo>,
    /// Processes whose descriptors could not be read (another user's,
    /// without root).
    pub unreadable: usize,
}

/// Every descriptor of every process (in this pid namespace's `/proc`)
/// open on a card's node: `lsof` for the cards. A descriptor is a card's
/// when it is a character device whose number is one of
/// `/sys/class/tenstorrent/*/dev`.
pub fn scan() -> io::Result<Scan> {
    let mut devs = Vec::new();
    for card in sysfs::cards()? {
        let dev = fs::read_to_string(sysfs::class_dir(card).join("dev")).unwrap_or_default();
        if let Some((major, minor)) = dev.trim().split_once(':') {
            if let (Ok(major), Ok(minor)) = (major.parse(), minor.parse()) {
                devs.push(libc::makedev(major, minor));
            }
        }
    }
    let mut out = Scan::default();
    let proc_dir = Path::new("/proc");
    let mut pids: Vec<u32> = fs::read_dir(proc_dir)?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    for pid in pids {
        let fds = match fs::read_dir(proc_dir.join(format!("{pid}/fd"))) {
            Ok(fds) => fds,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                out.unreadable += 1;
                continue;
            }
            // Gone meanwhile, or a kernel thread.
            Err(_) => continue,
        };
        let mut fds: Vec<u32> = fds
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        fds.sort_unstable();
        for fd in fds {
            let Ok(meta) = fs::metadata(proc_dir.join(format!("{pid}/fd/{fd}"))) else {
                continue;
            };
            if !meta.file_type().is_char_device() || !devs.contains(&meta.rdev()) {
                continue;
            }
            // A module without fdinfo gives no tt- lines: left out.
            if let Ok(info) = read_in(proc_dir, pid, fd) {
                out.files.push(info);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "pos:\t0\nflags:\t0100002\nmnt_id:\t22\nino:\t93\n\
        tt-driver:\ttenstorrent\ntt-pdev:\t0000:01:00.0\ntt-card:\t1\n\
        tt-client-id:\t12\ntt-exclusive:\t0\ntt-locks-held:\t2\n\
        tt-lock-held-ARC_MSG:\t2500000000 ns\ntt-lock-held-40:\t7 ns\n\
        tt-locks-waiting:\t1\ntt-lock-waiting-NON_MMIO:\t900 ns\n\
        tt-locks-polling:\t1\ntt-lock-polling-ETH03:\t4000 ns\ntt-lock-poll-tries-ETH03:\t5\n\
        tt-tlb-windows:\t1\ntt-tlb-bytes:\t2097152\ntt-power-flags:\t0x7ffe\n\
        tt-smc-msg:\tsent\ntt-smc-msg-type:\t0x90\ntt-smc-msg-age:\t5 ns\n";

    #[test]
    fn parses_the_keys() {
        let f: FdInfo = TEXT.parse().unwrap();
        assert_eq!((f.card, f.client_id), (1, 12));
        assert_eq!(
            f.held,
            vec![
                ("ARC_MSG".into(), Duration::from_millis(2500)),
                ("40".into(), Duration::from_nanos(7))
            ]
        );
        assert_eq!(
            f.waiting,
            vec![("NON_MMIO".into(), Duration::from_nanos(900))]
        );
        assert_eq!(
            f.polling,
            vec![("ETH03".into(), Duration::from_nanos(4000), 5)]
        );
        assert_eq!(f.number("tt-locks-polling"), Some(1));
        assert_eq!(f.number("tt-tlb-bytes"), Some(2 << 20));
        assert_eq!(f.number("tt-power-flags"), Some(0x7ffe));
        assert_eq!(f.get("tt-pdev"), Some("0000:01:00.0"));
        assert_eq!(f.get("pos"), None);
    }

    #[test]
    fn refuses_other_files_and_bad_lines() {
        assert!("pos:\t0\nflags:\t02\n".parse::<FdInfo>().is_err());
        let bad = TEXT.replace("7 ns", "7ms");
        assert!(bad.parse::<FdInfo>().is_err());
        let twice = format!("{TEXT}tt-card:\t1\n");
        assert!(twice.parse::<FdInfo>().is_err());
        let no_id = TEXT.replace("tt-client-id:\t12\n", "");
        assert!(no_id.parse::<FdInfo>().is_err());
        // Tries of a lock it does not poll, or not a number.
        let orphan = TEXT.replace("tt-lock-poll-tries-ETH03", "tt-lock-poll-tries-ETH04");
        assert!(orphan.parse::<FdInfo>().is_err());
        let bad_tries = TEXT.replace("ETH03:\t5", "ETH03:\tfive");
        assert!(bad_tries.parse::<FdInfo>().is_err());
        // A module without pollers' lines: none.
        let old = TEXT.replace(
            "tt-locks-polling:\t1\ntt-lock-polling-ETH03:\t4000 ns\ntt-lock-poll-tries-ETH03:\t5\n",
            "",
        );
        assert!(old.parse::<FdInfo>().unwrap().polling.is_empty());
    }
}

//! `tt-locks metrics`: the cards' views in Prometheus' text exposition
//! format, for node_exporter's textfile collector (or any scraper that
//! reads a file).
//!
//! Everything comes from the views anyone may read (sysfs, procfs); a view
//! that cannot be read (an older module, no permission) leaves its metrics
//! out for that card and sets `tenstorrent_view_readable` to 0, so a
//! missing series is never mistaken for a zero. Names and labels are
//! stable: `card` (the index N of /dev/tenstorrent/N) on every series,
//! `lock` the lock's name as sysfs gives it, `size` a window size as the
//! `tlb/` directory names it. Units are the base units Prometheus asks
//! for (seconds, bytes, degrees Celsius, volts, amperes, watts).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::fs;
use std::path::{Path, PathBuf};

use tt_arbiter::resources::Exclusive;
use tt_arbiter::sysfs::{cards_in, parse_pids, read_locks_in};

/// Where the views are: `/sys` and `/proc` on a live system, the host's
/// mounted elsewhere in a monitoring container (as node_exporter's
/// `--path.sysfs`, `--path.procfs`), a fake tree in tests.
pub struct Views {
    sysfs: PathBuf,
    procfs: PathBuf,
}

impl Views {
    pub fn new(sysfs: impl Into<PathBuf>, procfs: impl Into<PathBuf>) -> Self {
        Views {
            sysfs: sysfs.into(),
            procfs: procfs.into(),
        }
    }

    fn class(&self) -> PathBuf {
        self.sysfs.join("class/tenstorrent")
    }

    fn card_dir(&self, card: u32) -> PathBuf {
        self.class().join(format!("tenstorrent!{card}"))
    }

    fn proc_dir(&self, card: u32) -> PathBuf {
        self.procfs
            .join("driver/tenstorrent")
            .join(card.to_string())
    }

    /// The cards present, by index.
    pub fn cards(&self) -> std::io::Result<Vec<u32>> {
        cards_in(&self.class())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    Counter,
}

/// One metric family: its help, type and samples (labels, value).
struct Family {
    help: &'static str,
    kind: Kind,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

/// The families in the order they are first used.
#[derive(Default)]
struct Exposition {
    order: Vec<&'static str>,
    families: BTreeMap<&'static str, Family>,
}

impl Exposition {
    fn add(
        &mut self,
        name: &'static str,
        kind: Kind,
        help: &'static str,
        labels: Vec<(&'static str, String)>,
        value: f64,
    ) {
        let family = self.families.entry(name).or_insert_with(|| {
            self.order.push(name);
            Family {
                help,
                kind,
                samples: Vec::new(),
            }
        });
        family.samples.push((labels, value));
    }

    fn gauge(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: Vec<(&'static str, String)>,
        value: f64,
    ) {
        self.add(name, Kind::Gauge, help, labels, value);
    }

    fn counter(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: Vec<(&'static str, String)>,
        value: f64,
    ) {
        self.add(name, Kind::Counter, help, labels, value);
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for name in &self.order {
            let f = &self.families[name];
            let _ = writeln!(out, "# HELP {name} {}", f.help);
            let kind = match f.kind {
                Kind::Gauge => "gauge",
                Kind::Counter => "counter",
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (labels, value) in &f.samples {
                out += name;
                if !labels.is_empty() {
                    out.push('{');
                    for (i, (k, v)) in labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{k}=\"{}\"", escape_label(v));
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {}", format_value(*value));
            }
        }
        out
    }
}

/// A label value as the exposition format wants it: backslash, double
/// quote and newline escaped (a comm may hold any byte but NUL).
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s += "\\\\",
            '"' => s += "\\\"",
            '\n' => s += "\\n",
            c => s.push(c),
        }
    }
    s
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// `key=value` words of a one-line view the client library has no
/// parser for (`dma/usage`, `smc/counters`, `tlb/SIZE`).
fn key_values(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|s| s.trim_end().to_string())
}

fn number(map: &BTreeMap<String, String>, key: &str) -> Option<f64> {
    map.get(key)?.parse::<u64>().ok().map(|v| v as f64)
}

/// The exposition of `cards`.
pub fn render(views: &Views, cards: &[u32]) -> String {
    let mut e = Exposition::default();
    e.gauge(
        "tenstorrent_cards",
        "Cards bound to tt-arbiter (0 when the module is not loaded).",
        Vec::new(),
        cards.len() as f64,
    );
    for &card in cards {
        card_metrics(&mut e, views, card);
    }
    e.render()
}

fn card_metrics(e: &mut Exposition, views: &Views, card: u32) {
    let dir = views.card_dir(card);
    let c = || ("card", card.to_string());
    let mut readable = |e: &mut Exposition, view: &'static str, ok: bool| {
        e.gauge(
            "tenstorrent_view_readable",
            "Whether the view the following metrics come from could be read (0: its metrics are left out).",
            vec![c(), ("view", view.to_string())],
            if ok { 1.0 } else { 0.0 },
        );
    };

    let bdf = fs::read_link(dir.join("device"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    e.gauge(
        "tenstorrent_card_info",
        "A card bound to tt-arbiter: its PCI address, board type and ASIC id (always 1).",
        vec![
            c(),
            ("bdf", bdf),
            (
                "card_type",
                read_trimmed(&dir.join("tt_card_type")).unwrap_or_default(),
            ),
            (
                "asic_id",
                read_trimmed(&dir.join("tt_asic_id")).unwrap_or_default(),
            ),
        ],
        1.0,
    );

    let pids =
        read_trimmed(&views.proc_dir(card).join("pids")).and_then(|text| parse_pids(&text).ok());
    readable(e, "pids", pids.is_some());
    if let Some(pids) = pids {
        e.gauge(
            "tenstorrent_open_files",
            "Open files of the card (/proc/driver/tenstorrent/N/pids).",
            vec![c()],
            pids.len() as f64,
        );
    }

    lock_metrics(e, &dir, card, &mut readable);
    window_metrics(e, &dir, card, &mut readable);

    let dma = read_trimmed(&dir.join("dma/usage")).map(|t| key_values(&t));
    readable(e, "dma/usage", dma.is_some());
    if let Some(dma) = dma {
        for (key, name, help) in [
            (
                "buffers",
                "tenstorrent_dma_buffers",
                "DMA buffers allocated by the card's files.",
            ),
            (
                "buffer_bytes",
                "tenstorrent_dma_buffer_bytes",
                "Bytes the card's DMA buffers take.",
            ),
            (
                "pins",
                "tenstorrent_dma_pins",
                "Pinned user ranges of the card's files.",
            ),
            (
                "pinned_pages",
                "tenstorrent_dma_pinned_pages",
                "Pages pinned by the card's files.",
            ),
        ] {
            if let Some(v) = number(&dma, key) {
                e.gauge(name, help, vec![c()], v);
            }
        }
        if let Some((used, total)) = dma.get("outbound_regions").and_then(|v| v.split_once('/')) {
            if let (Ok(used), Ok(total)) = (used.parse::<u32>(), total.parse::<u32>()) {
                e.gauge(
                    "tenstorrent_dma_outbound_regions",
                    "Outbound iATU regions in use.",
                    vec![c()],
                    used.into(),
                );
                e.gauge(
                    "tenstorrent_dma_outbound_regions_max",
                    "Outbound iATU regions of the card.",
                    vec![c()],
                    total.into(),
                );
            }
        }
    }

    let excl = read_trimmed(&dir.join("open/exclusive")).and_then(|t| t.parse::<Exclusive>().ok());
    readable(e, "open/exclusive", excl.is_some());
    if let Some(excl) = excl {
        e.gauge(
            "tenstorrent_exclusive_open",
            "Whether an O_EXCL file holds the card.",
            vec![c()],
            u8::from(excl.held).into(),
        );
    }

    smc_metrics(e, &dir, card, &mut readable);
    telemetry_metrics(e, &dir, card);
}

type Readable<'a> = dyn FnMut(&mut Exposition, &'static str, bool) + 'a;

fn lock_metrics(e: &mut Exposition, dir: &Path, card: u32, readable: &mut Readable<'_>) {
    let locks = read_locks_in(dir);
    readable(e, "locks", locks.is_ok());
    let Ok(locks) = locks else { return };
    let secs = |ns: u64| ns as f64 / 1e9;
    for l in &locks {
        let labels = || vec![("card", card.to_string()), ("lock", l.name.clone())];
        e.gauge(
            "tenstorrent_lock_held",
            "Whether the lock is held.",
            labels(),
            u8::from(l.held).into(),
        );
        if l.held {
            let mut with_holder = labels();
            with_holder.push(("pid", l.pid.to_string()));
            with_holder.push(("comm", l.comm.clone()));
            e.gauge(
                "tenstorrent_lock_holder",
                "The lock's holder: pid in the reader's pid namespace (0: not visible) and comm at acquisition (always 1).",
                with_holder,
                1.0,
            );
        }
        e.gauge(
            "tenstorrent_lock_held_seconds",
            "How long the lock has been held (0 when free).",
            labels(),
            secs(l.held_ns),
        );
        e.gauge(
            "tenstorrent_lock_waiters",
            "Queued requests that want the lock.",
            labels(),
            l.waiters.into(),
        );
        e.gauge(
            "tenstorrent_lock_pollers",
            "Open files polling the lock: their failed tries go on (not counted as waiters).",
            labels(),
            l.pollers.into(),
        );
        for p in &l.polled_by {
            let mut with_poller = labels();
            with_poller.push(("pid", p.pid.to_string()));
            with_poller.push(("comm", p.comm.clone()));
            e.gauge(
                "tenstorrent_lock_poller_seconds",
                "How long a file has been polling the lock (its first failed try of the run), by the pid in the reader's pid namespace (0: not visible) and comm of its last try; the 32 longest per lock.",
                with_poller,
                secs(p.polling_ns),
            );
        }
        e.gauge(
            "tenstorrent_lock_owner_died_pending",
            "The lock's last holder's file closed holding it and nobody acquired it since.",
            labels(),
            u8::from(l.owner_died_pending).into(),
        );
        e.counter(
            "tenstorrent_lock_acquisitions_total",
            "Grants of the lock since the card was bound.",
            labels(),
            l.acquisitions as f64,
        );
        e.counter(
            "tenstorrent_lock_contended_total",
            "Grants of the lock that had to wait.",
            labels(),
            l.contended as f64,
        );
        e.counter(
            "tenstorrent_lock_owner_died_total",
            "Releases because the holder's file was closed.",
            labels(),
            l.owner_died as f64,
        );
        e.counter(
            "tenstorrent_lock_wait_seconds_total",
            "Sum of the waits of contended grants.",
            labels(),
            secs(l.wait_total_ns),
        );
        e.gauge(
            "tenstorrent_lock_wait_max_seconds",
            "Longest wait of a contended grant.",
            labels(),
            secs(l.wait_max_ns),
        );
        e.gauge(
            "tenstorrent_lock_hold_max_seconds",
            "Longest completed hold.",
            labels(),
            secs(l.hold_max_ns),
        );
    }
}

fn window_metrics(e: &mut Exposition, dir: &Path, card: u32, readable: &mut Readable<'_>) {
    let entries = fs::read_dir(dir.join("tlb"));
    readable(e, "tlb", entries.is_ok());
    let Ok(entries) = entries else { return };
    let mut sizes: Vec<(String, BTreeMap<String, String>)> = entries
        .filter_map(Result::ok)
        .filter_map(|d| {
            let name = d.file_name().to_string_lossy().into_owned();
            read_trimmed(&d.path()).map(|t| (name, key_values(&t)))
        })
        .collect();
    sizes.sort_by_key(|(_, m)| number(m, "size").unwrap_or(0.0) as u64);
    for (size, m) in &sizes {
        let labels = || vec![("card", card.to_string()), ("size", size.clone())];
        for (key, name, help) in [
            (
                "windows",
                "tenstorrent_tlb_windows",
                "TLB windows of this size on the card.",
            ),
            (
                "kernel",
                "tenstorrent_tlb_windows_kernel",
                "TLB windows of this size the driver keeps for itself.",
            ),
            (
                "free",
                "tenstorrent_tlb_windows_free",
                "TLB windows of this size nobody holds.",
            ),
            (
                "waiters",
                "tenstorrent_tlb_window_waiters",
                "Files waiting for a TLB window of this size.",
            ),
            (
                "exported",
                "tenstorrent_tlb_windows_exported",
                "TLB windows of this size a dma-buf exports.",
            ),
        ] {
            if let Some(v) = number(m, key) {
                e.gauge(name, help, labels(), v);
            }
        }
    }
}

fn smc_metrics(e: &mut Exposition, dir: &Path, card: u32, readable: &mut Readable<'_>) {
    let counters = read_trimmed(&dir.join("smc/counters")).map(|t| key_values(&t));
    readable(e, "smc/counters", counters.is_some());
    let c = || vec![("card", card.to_string())];
    if let Some(m) = counters {
        for (key, name, help) in [
            (
                "posted",
                "tenstorrent_smc_messages_posted_total",
                "Firmware messages posted (SMC_MSG and the driver's own).",
            ),
            (
                "completed",
                "tenstorrent_smc_messages_completed_total",
                "Firmware messages answered.",
            ),
            (
                "firmware_errors",
                "tenstorrent_smc_firmware_errors_total",
                "Answers with a nonzero firmware status.",
            ),
            (
                "abandoned",
                "tenstorrent_smc_messages_abandoned_total",
                "Messages abandoned by their file (ABANDON or close).",
            ),
            (
                "timeouts",
                "tenstorrent_smc_timeouts_total",
                "Messages the firmware did not answer in time.",
            ),
            (
                "spurious_wakeups",
                "tenstorrent_smc_spurious_wakeups_total",
                "SMC_WAIT threads woken while their message was neither done nor gone.",
            ),
        ] {
            if let Some(v) = number(&m, key) {
                e.counter(name, help, c(), v);
            }
        }
        if let Some(v) = number(&m, "latency_max_us") {
            e.gauge(
                "tenstorrent_smc_latency_max_seconds",
                "Longest firmware round trip.",
                c(),
                v / 1e6,
            );
        }
    }
    let queue = read_trimmed(&dir.join("smc/queue"));
    readable(e, "smc/queue", queue.is_some());
    if let Some(q) = queue {
        e.gauge(
            "tenstorrent_smc_queue_length",
            "Firmware messages between their post and their collection.",
            c(),
            q.lines().filter(|l| !l.trim().is_empty()).count() as f64,
        );
    }
}

/// Telemetry: the `tt_*` clocks and heartbeat of the class device and the
/// card's hwmon sensors (under its PCI device, tt-kmd's channels).
fn telemetry_metrics(e: &mut Exposition, dir: &Path, card: u32) {
    let c = || ("card", card.to_string());
    for clock in ["aiclk", "axiclk", "arcclk"] {
        if let Some(v) =
            read_trimmed(&dir.join(format!("tt_{clock}"))).and_then(|s| s.parse::<f64>().ok())
        {
            e.gauge(
                "tenstorrent_clock_hertz",
                "A clock of the chip (tt_aiclk, tt_axiclk, tt_arcclk).",
                vec![c(), ("clock", clock.into())],
                v * 1e6,
            );
        }
    }
    if let Some(v) = read_trimmed(&dir.join("tt_heartbeat")).and_then(|s| s.parse::<f64>().ok()) {
        e.gauge("tenstorrent_firmware_heartbeat", "The ARC firmware's heartbeat counter (tt_heartbeat): it moves while the firmware runs.", vec![c()], v);
    }
    let Ok(hwmons) = fs::read_dir(dir.join("device/hwmon")) else {
        return;
    };
    let mut hwmons: Vec<PathBuf> = hwmons.filter_map(Result::ok).map(|d| d.path()).collect();
    hwmons.sort();
    for hw in hwmons {
        for (file, name, help, scale) in [
            (
                "temp1_input",
                "tenstorrent_temperature_celsius",
                "ASIC temperature (hwmon temp1).",
                1e-3,
            ),
            (
                "in0_input",
                "tenstorrent_voltage_volts",
                "Core voltage (hwmon in0).",
                1e-3,
            ),
            (
                "curr1_input",
                "tenstorrent_current_amperes",
                "Current (hwmon curr1).",
                1e-3,
            ),
            (
                "power1_input",
                "tenstorrent_power_watts",
                "Power (hwmon power1).",
                1e-6,
            ),
            (
                "fan1_input",
                "tenstorrent_fan_rpm",
                "Fan speed (hwmon fan1).",
                1.0,
            ),
        ] {
            if let Some(v) = read_trimmed(&hw.join(file)).and_then(|s| s.parse::<f64>().ok()) {
                e.gauge(name, help, vec![c()], v * scale);
            }
        }
    }
}

/// Writes `text` to `path` as the textfile collector wants it: a
/// temporary file in the same directory renamed over the target, so a
/// scrape never reads half a file.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "--output needs a file name",
        )
    })?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    fs::write(&tmp, text)
        .and_then(|()| fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A fake root with card 0 (a Wormhole with a held ARC_MSG, a waiter,
    /// windows, DMA and a message in flight) and card 1 (a Blackhole whose
    /// smc/ and dma/ views are missing, as on an older module).
    fn fake_root(tag: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("tt-locks-metrics-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let w = |p: &str, text: &str| {
            let path = root.join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        for card in 0..2 {
            for i in 0..64 {
                let line = match (card, i) {
                    (0, 16) => "name=ARC_MSG held=1 pid=4242 comm=umd\"job\"\\1 held_ns=2500000000 waiters=1 owner_died_pending=0 acquisitions=7 contended=3 owner_died=1 wait_total_ns=1500000000 wait_max_ns=900000000 hold_max_ns=4000000000 spurious_wakeups=0 pollers=1 polled_by=77/umd-poll/1500000000/1500\n".to_string(),
                    _ => format!("name={} held=0 pid=0 comm= held_ns=0 waiters=0 owner_died_pending=0 acquisitions=0 contended=0 owner_died=0 wait_total_ns=0 wait_max_ns=0 hold_max_ns=0 spurious_wakeups=0\n", tt_arbiter::sysfs::lock_label(i)),
                };
                w(
                    &format!("sys/class/tenstorrent/tenstorrent!{card}/locks/{i:02}"),
                    &line,
                );
            }
            w(
                &format!("proc/driver/tenstorrent/{card}/pids"),
                if card == 0 { "4242\n4243\n" } else { "" },
            );
            w(
                &format!("sys/class/tenstorrent/tenstorrent!{card}/open/exclusive"),
                "held=0 pid=0 comm= open=2 waiting=0\n",
            );
            w(
                &format!("sys/class/tenstorrent/tenstorrent!{card}/tt_aiclk"),
                "1000\n",
            );
        }
        w(
            "sys/class/tenstorrent/tenstorrent!0/tlb/1M",
            "size=1048576 windows=156 kernel=1 free=150 waiters=0 exported=0 holders=4242/umd/5\n",
        );
        w(
            "sys/class/tenstorrent/tenstorrent!0/tlb/16M",
            "size=16777216 windows=10 kernel=0 free=10 waiters=0 exported=0 holders=\n",
        );
        w("sys/class/tenstorrent/tenstorrent!0/dma/usage", "buffers=2 buffer_bytes=8192 pins=1 pinned_pages=4 outbound_regions=3/16 peer_mappings=0 translated=0 buffer_limit_bytes=0 pinned_limit_pages=0\n");
        w("sys/class/tenstorrent/tenstorrent!0/smc/counters", "posted=10 completed=9 firmware_errors=1 abandoned=0 timeouts=0 orphans=0 orphans_dropped=0 latency_avg_us=300 latency_max_us=2500 timeout_ms=1000 spurious_wakeups=0\n");
        w(
            "sys/class/tenstorrent/tenstorrent!0/smc/queue",
            "pid=4243 comm=smi type=0x90 state=sent age_ms=1\n",
        );
        w("sys/class/tenstorrent/tenstorrent!0/tt_card_type", "n150\n");
        w(
            "sys/class/tenstorrent/tenstorrent!0/tt_asic_id",
            "00000000deadbeef\n",
        );
        w("sys/class/tenstorrent/tenstorrent!0/tt_heartbeat", "77\n");
        w(
            "sys/class/tenstorrent/tenstorrent!0/device/hwmon/hwmon3/temp1_input",
            "45250\n",
        );
        w(
            "sys/class/tenstorrent/tenstorrent!0/device/hwmon/hwmon3/power1_input",
            "55000000\n",
        );
        root
    }

    /// One sample of the exposition: name, labels, value.
    type Sample = (String, BTreeMap<String, String>, f64);

    /// Parses the text exposition format strictly enough to catch what a
    /// scraper would refuse: a sample before its family's TYPE, a family
    /// declared twice or split, bad names, unterminated or badly escaped
    /// label values, unparsable values, duplicate series.
    fn parse(text: &str) -> Result<Vec<Sample>, String> {
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.chars().enumerate().all(|(i, c)| {
                    c == '_' || c == ':' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
                })
        };
        let mut typed: BTreeMap<String, String> = BTreeMap::new();
        let mut current: Option<String> = None;
        let mut closed: BTreeSet<String> = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap_or("");
                if !name_ok(name) || closed.contains(name) {
                    return Err(format!("bad or repeated HELP: {line}"));
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').ok_or(format!("bad TYPE: {line}"))?;
                if typed.contains_key(name) || !["gauge", "counter"].contains(&kind) {
                    return Err(format!("bad or repeated TYPE: {line}"));
                }
                if let Some(prev) = current.replace(name.to_string()) {
                    closed.insert(prev);
                }
                typed.insert(name.into(), kind.into());
                continue;
            }
            let (name, rest) = match line.find(['{', ' ']) {
                Some(i) => line.split_at(i),
                None => return Err(format!("no value: {line}")),
            };
            if current.as_deref() != Some(name) {
                return Err(format!("sample outside its family's block: {line}"));
            }
            if typed[name] == "counter" && !name.ends_with("_total") {
                return Err(format!("counter without _total: {name}"));
            }
            let mut labels = BTreeMap::new();
            let mut chars = rest.chars().peekable();
            if chars.peek() == Some(&'{') {
                chars.next();
                loop {
                    let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
                    if !name_ok(&key) || chars.next() != Some('"') {
                        return Err(format!("bad label in {line}"));
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next() {
                            Some('\\') => match chars.next() {
                                Some('\\') => value.push('\\'),
                                Some('"') => value.push('"'),
                                Some('n') => value.push('\n'),
                                _ => return Err(format!("bad escape in {line}")),
                            },
                            Some('"') => break,
                            Some(c) => value.push(c),
                            None => return Err(format!("unterminated label value in {line}")),
                        }
                    }
                    labels.insert(key, value);
                    match chars.next() {
                        Some(',') => continue,
                        Some('}') => break,
                        _ => return Err(format!("bad label list in {line}")),
                    }
                }
            }
            let value: String = chars.collect();
            let value: f64 = value
                .trim_start_matches(' ')
                .parse()
                .map_err(|_| format!("bad value in {line}"))?;
            if !seen.insert((name.to_string(), format!("{labels:?}"))) {
                return Err(format!("duplicate series: {line}"));
            }
            out.push((name.to_string(), labels, value));
        }
        Ok(out)
    }

    fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.2)
    }

    #[test]
    fn the_views_in_prometheus_format() {
        let root = fake_root("views");
        let views = Views::new(root.join("sys"), root.join("proc"));
        let cards = views.cards().unwrap();
        assert_eq!(cards, [0, 1]);
        let text = render(&views, &cards);
        let samples = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let v = |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels);
        let arc = [("card", "0"), ("lock", "ARC_MSG")];
        assert_eq!(v("tenstorrent_cards", &[]), Some(2.0));
        assert_eq!(v("tenstorrent_lock_held", &arc), Some(1.0));
        assert_eq!(
            v(
                "tenstorrent_lock_holder",
                &[
                    ("card", "0"),
                    ("lock", "ARC_MSG"),
                    ("pid", "4242"),
                    ("comm", "umd\"job\"\\1")
                ]
            ),
            Some(1.0)
        );
        assert_eq!(v("tenstorrent_lock_held_seconds", &arc), Some(2.5));
        assert_eq!(v("tenstorrent_lock_waiters", &arc), Some(1.0));
        assert_eq!(v("tenstorrent_lock_pollers", &arc), Some(1.0));
        assert_eq!(
            v(
                "tenstorrent_lock_poller_seconds",
                &[
                    ("card", "0"),
                    ("lock", "ARC_MSG"),
                    ("pid", "77"),
                    ("comm", "umd-poll")
                ]
            ),
            Some(1.5)
        );
        assert_eq!(
            v(
                "tenstorrent_lock_pollers",
                &[("card", "0"), ("lock", "NON_MMIO")]
            ),
            Some(0.0)
        );
        assert_eq!(v("tenstorrent_lock_acquisitions_total", &arc), Some(7.0));
        assert_eq!(v("tenstorrent_lock_owner_died_total", &arc), Some(1.0));
        assert_eq!(v("tenstorrent_lock_wait_seconds_total", &arc), Some(1.5));
        assert_eq!(v("tenstorrent_lock_hold_max_seconds", &arc), Some(4.0));
        assert_eq!(
            v(
                "tenstorrent_lock_held",
                &[("card", "1"), ("lock", "ARC_MSG")]
            ),
            Some(0.0)
        );
        assert_eq!(
            samples
                .iter()
                .filter(|s| s.0 == "tenstorrent_lock_held")
                .count(),
            128
        );
        assert_eq!(
            samples
                .iter()
                .filter(|s| s.0 == "tenstorrent_lock_holder")
                .count(),
            1,
            "only held locks have a holder series"
        );
        assert_eq!(v("tenstorrent_open_files", &[("card", "0")]), Some(2.0));
        assert_eq!(v("tenstorrent_open_files", &[("card", "1")]), Some(0.0));
        assert_eq!(v("tenstorrent_exclusive_open", &[("card", "0")]), Some(0.0));
        assert_eq!(
            v(
                "tenstorrent_tlb_windows_free",
                &[("card", "0"), ("size", "1M")]
            ),
            Some(150.0)
        );
        assert_eq!(
            v("tenstorrent_tlb_windows", &[("card", "0"), ("size", "16M")]),
            Some(10.0)
        );
        assert_eq!(
            v("tenstorrent_dma_buffer_bytes", &[("card", "0")]),
            Some(8192.0)
        );
        assert_eq!(
            v("tenstorrent_dma_outbound_regions", &[("card", "0")]),
            Some(3.0)
        );
        assert_eq!(
            v("tenstorrent_smc_messages_posted_total", &[("card", "0")]),
            Some(10.0)
        );
        assert_eq!(
            v("tenstorrent_smc_firmware_errors_total", &[("card", "0")]),
            Some(1.0)
        );
        assert_eq!(
            v("tenstorrent_smc_latency_max_seconds", &[("card", "0")]),
            Some(0.0025)
        );
        assert_eq!(
            v("tenstorrent_smc_queue_length", &[("card", "0")]),
            Some(1.0)
        );
        assert_eq!(
            v(
                "tenstorrent_clock_hertz",
                &[("card", "0"), ("clock", "aiclk")]
            ),
            Some(1e9)
        );
        assert_eq!(
            v("tenstorrent_temperature_celsius", &[("card", "0")]),
            Some(45.25)
        );
        assert_eq!(v("tenstorrent_power_watts", &[("card", "0")]), Some(55.0));
        assert_eq!(
            v(
                "tenstorrent_card_info",
                &[
                    ("card", "0"),
                    ("card_type", "n150"),
                    ("asic_id", "00000000deadbeef")
                ]
            ),
            Some(1.0)
        );
        // Card 1's missing views: said so, and no zeros in their place.
        assert_eq!(
            v(
                "tenstorrent_view_readable",
                &[("card", "1"), ("view", "smc/counters")]
            ),
            Some(0.0)
        );
        assert_eq!(
            v(
                "tenstorrent_view_readable",
                &[("card", "1"), ("view", "dma/usage")]
            ),
            Some(0.0)
        );
        assert_eq!(
            v(
                "tenstorrent_view_readable",
                &[("card", "0"), ("view", "dma/usage")]
            ),
            Some(1.0)
        );
        assert_eq!(v("tenstorrent_dma_buffers", &[("card", "1")]), None);
        assert_eq!(
            v("tenstorrent_smc_messages_posted_total", &[("card", "1")]),
            None
        );
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn no_module_is_zero_cards_not_an_error() {
        let root =
            std::env::temp_dir().join(format!("tt-locks-metrics-empty-{}", std::process::id()));
        let views = Views::new(root.join("sys"), root.join("proc"));
        let cards = views.cards().unwrap();
        let samples = parse(&render(&views, &cards)).unwrap();
        assert_eq!(
            samples,
            vec![("tenstorrent_cards".to_string(), BTreeMap::new(), 0.0)]
        );
    }

    #[test]
    fn the_parser_refuses_what_a_scraper_would() {
        for bad in [
            "tenstorrent_x 1\n",
            "# TYPE a gauge\na{l=\"x} 1\n",
            "# TYPE a gauge\na{l=\"\\q\"} 1\n",
            "# TYPE a gauge\na 1\na 2\n",
            "# TYPE a gauge\n# TYPE b gauge\na 1\n",
            "# TYPE a counter\na 1\n",
            "# TYPE a gauge\na one\n",
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn output_replaces_the_file_whole() {
        let dir = std::env::temp_dir().join(format!("tt-locks-metrics-out-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tenstorrent.prom");
        fs::write(&path, "old\n").unwrap();
        write_atomically(&path, "new\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
        let left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "temporary files left: {left:?}");
        fs::remove_dir_all(dir).unwrap();
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The sysfs view of a card: who holds which lock.
//!
//! `/sys/class/tenstorrent/tenstorrent!N/locks/II` (II = 00..63) shows lock
//! II on one line of `key=value` fields, so that `grep -r . locks/` lists
//! every lock and a script can split the fields. This is a documented
//! exception to one value per file (Documentation/ABI/testing/
//! sysfs-class-tenstorrent): 64 locks times a dozen values would be 800
//! files, and the values of one lock are only consistent when read together.
//! A line always fits in a page, however many waiters there are.
//!
//! `/sys/class/tenstorrent/tenstorrent!N/tlb/SIZE` (SIZE = 1M, 2M, 16M, 4G,
//! those of the card's layout) shows a TLB window class the same way.
//!
//! `/sys/class/tenstorrent/tenstorrent!N/open/exclusive` shows whether the
//! card is held by an `O_EXCL` open, by whom, how many files are open and
//! how many opens wait.
//!
//! `/sys/class/tenstorrent/tenstorrent!N/dma/usage` shows what the card's
//! DMA holds for all files: DMA buffers and their bytes, pinned ranges and
//! their pages, outbound (NOC DMA) regions in use out of 16, and whether
//! an IOMMU translates the card's DMA.
//!
//! `/sys/class/tenstorrent/tenstorrent!N/smc/queue` shows the firmware
//! message queue (src/smc.rs): one line per message from its post until
//! its file collects it, in the order they are served: the poster's pid in
//! the reader's pid namespace (0 for the driver's own messages, whose comm
//! is `kernel`), its comm at post time, the message type, `queued`, `sent`
//! or `done`, and its age. `smc/counters` is one line of counters.
//!
//! `/sys/class/tenstorrent/tenstorrent!N/tt_arbiter_version` is the
//! project's version (the module's own, in `/sys/module/tenstorrent/`, is
//! the level of tt-kmd's ABI it implements); the `tt_*` telemetry
//! attributes are src/telemetry.rs's.
//!
//! `/sys/class/tenstorrent/tenstorrent!N/power_votes/state` shows the power
//! state last sent to the card's firmware (what the votes added up to),
//! whether it took it, how many messages were sent and failed, how many
//! files vote, whether a powerdown is pending and whether a power message
//! is on its way; `power_votes/votes` shows the vote of each open file, one
//! line a file.
//!
//! `/sys/class/tenstorrent/tenstorrent!N/pcie_perf_counters/` (Blackhole
//! only, as in tt-kmd) shows the PCIe tile's NIU traffic counters of each
//! NOC, read from the card at each read.

use crate::{
    arbiter::LOCK_COUNT,
    card::Card,
    power::PowerVote,
    rust_ext::sysfs::{
        indexed_attribute_group,
        AttributeGroups,
        Page,
        ShowAttribute, //
    },
};
use core::fmt::{
    self,
    Write, //
};
use kernel::error::code::ENOMEM;

/// The names of the well-known locks, used by UMD; the others are named by
/// their index.
const WELL_KNOWN: [&str; 22] = [
    "ETH00",
    "ETH01",
    "ETH02",
    "ETH03",
    "ETH04",
    "ETH05",
    "ETH06",
    "ETH07",
    "ETH08",
    "ETH09",
    "ETH10",
    "ETH11",
    "ETH12",
    "ETH13",
    "ETH14",
    "ETH15",
    "ARC_MSG",
    "REMOTE_ARC_MSG",
    "NON_MMIO",
    "MEM_BARRIER",
    "CHIP_IN_USE",
    "PCIE_DMA",
];

/// Writes the name of lock `index`.
pub(crate) fn write_lock_name(out: &mut impl Write, index: usize) -> fmt::Result {
    match WELL_KNOWN.get(index) {
        Some(name) => out.write_str(name),
        None => write!(out, "{index}"),
    }
}

/// Writes a comm so that it stays one whitespace-free field.
fn write_comm(out: &mut impl Write, comm: &[u8]) -> fmt::Result {
    write_comm_except(out, comm, &[])
}

/// Writes a comm as [`write_comm`] does, with the bytes of `separators`
/// (those of a list it is an item of) shown as `?` too.
fn write_comm_except(out: &mut impl Write, comm: &[u8], separators: &[u8]) -> fmt::Result {
    for &c in comm.iter().take_while(|&&c| c != 0) {
        let shown = c.is_ascii_graphic() && !separators.contains(&c);
        out.write_char(if shown { c as char } else { '?' })?;
    }
    Ok(())
}

/// Pollers listed on a lock's line (`polled_by`), those that have polled
/// longest: with the rest of the line, at most about 2.7 KiB, so the line
/// fits in a page whatever the number of pollers (`pollers` counts them
/// all).
const MAX_POLLERS_SHOWN: usize = 32;

const LOCKS: u32 = 0;
const TLB: u32 = 1;
const DMA: u32 = 2;
const OPEN: u32 = 3;
const POWER: u32 = 4;
const TELEMETRY: u32 = 5;
const ABOUT: u32 = 6;
const SMC: u32 = 7;
const PCIE_COUNTERS: u32 = 8;

/// Votes shown in `power/votes`: the lines of as many fit in a page.
const MAX_VOTES_SHOWN: usize = 24;

indexed_attribute_group!(
    LOCKS_GROUP: Card,
    LOCKS,
    Some(c"locks"),
    [
        c"00",
        c"01",
        c"02",
        c"03",
        c"04",
        c"05",
        c"06",
        c"07",
        c"08",
        c"09",
        c"10",
        c"11",
        c"12",
        c"13",
        c"14",
        c"15",
        c"16",
        c"17",
        c"18",
        c"19",
        c"20",
        c"21",
        c"22",
        c"23",
        c"24",
        c"25",
        c"26",
        c"27",
        c"28",
        c"29",
        c"30",
        c"31",
        c"32",
        c"33",
        c"34",
        c"35",
        c"36",
        c"37",
        c"38",
        c"39",
        c"40",
        c"41",
        c"42",
        c"43",
        c"44",
        c"45",
        c"46",
        c"47",
        c"48",
        c"49",
        c"50",
        c"51",
        c"52",
        c"53",
        c"54",
        c"55",
        c"56",
        c"57",
        c"58",
        c"59",
        c"60",
        c"61",
        c"62",
        c"63"
    ]
);

/// The TLB window sizes of every layout; a card shows those of its own.
const TLB_SIZES: [u64; 4] = [1 << 20, 2 << 20, 16 << 20, 4 << 30];

indexed_attribute_group!(
    TLB_GROUP: Card,
    TLB,
    Some(c"tlb"),
    [c"1M", c"2M", c"16M", c"4G"]
);

indexed_attribute_group!(DMA_GROUP: Card, DMA, Some(c"dma"), [c"usage"]);

indexed_attribute_group!(OPEN_GROUP: Card, OPEN, Some(c"open"), [c"exclusive"]);

indexed_attribute_group!(
    POWER_GROUP: Card,
    POWER,
    Some(c"power_votes"),
    [c"state", c"votes"]
);

// tt-kmd 2.10's telemetry attributes, in the device's own directory
// (src/telemetry.rs `ATTRIBUTES`, in that order).
indexed_attribute_group!(
    TELEMETRY_GROUP: Card,
    TELEMETRY,
    None,
    [
        c"tt_aiclk",
        c"tt_axiclk",
        c"tt_arcclk",
        c"tt_serial",
        c"tt_card_type",
        c"tt_fw_bundle_ver",
        c"tt_m3app_fw_ver",
        c"tt_ttflash_ver",
        c"tt_m3bl_fw_ver",
        c"tt_arc_fw_ver",
        c"tt_eth_fw_ver",
        c"tt_asic_id",
        c"tt_heartbeat",
        c"tt_therm_trip_count",
    ]
);

indexed_attribute_group!(SMC_GROUP: Card, SMC, Some(c"smc"), [c"queue", c"counters"]);

// tt-kmd's `pcie_perf_counters` group, on the chips whose table has them
// (Blackhole, as in tt-kmd): what nvtop reads for a card's PCIe traffic.
// NOC0's six counters, in the order of `PcieCounters::ids`, then NOC1's.
indexed_attribute_group!(
    PCIE_COUNTERS_GROUP: Card,
    PCIE_COUNTERS,
    Some(c"pcie_perf_counters"),
    [
        c"slv_posted_wr_data_word_received0",
        c"slv_nonposted_wr_data_word_received0",
        c"slv_rd_data_word_sent0",
        c"mst_posted_wr_data_word_sent0",
        c"mst_nonposted_wr_data_word_sent0",
        c"mst_rd_data_word_received0",
        c"slv_posted_wr_data_word_received1",
        c"slv_nonposted_wr_data_word_received1",
        c"slv_rd_data_word_sent1",
        c"mst_posted_wr_data_word_sent1",
        c"mst_nonposted_wr_data_word_sent1",
        c"mst_rd_data_word_received1",
    ]
);

// The project's own version; the module's is tt-kmd's ABI level.
indexed_attribute_group!(ABOUT_GROUP: Card, ABOUT, None, [c"tt_arbiter_version"]);

/// The attribute groups of a card's class device.
pub(crate) static CARD_GROUPS: AttributeGroups<9> = AttributeGroups::new([
    &LOCKS_GROUP,
    &TLB_GROUP,
    &DMA_GROUP,
    &OPEN_GROUP,
    &POWER_GROUP,
    &TELEMETRY_GROUP,
    &ABOUT_GROUP,
    &SMC_GROUP,
    &PCIE_COUNTERS_GROUP,
]);

/// Writes a vote as `flags=0xFFFF validity=0xVV settings=S0,...,S13`.
fn write_vote(out: &mut impl Write, vote: &PowerVote) -> fmt::Result {
    write!(
        out,
        "flags=0x{:04x} validity=0x{:02x} settings=",
        vote.flags, vote.validity
    )?;
    for (i, setting) in vote.settings.iter().enumerate() {
        if i > 0 {
            out.write_char(',')?;
        }
        write!(out, "{setting}")?;
    }
    Ok(())
}

impl ShowAttribute for Card {
    fn show(&self, group: u32, index: usize, out: &mut Page<'_>) -> fmt::Result {
        match group {
            LOCKS => self.show_lock(index, out),
            TLB => self.show_tlb_class(index, out),
            DMA => self.show_dma(out),
            OPEN => self.show_open(out),
            POWER if index == 0 => self.show_power_state(out),
            POWER => self.show_power_votes(out),
            TELEMETRY => self.telemetry.show_attribute(&self.firmware(), index, out),
            ABOUT => writeln!(out, "{}", crate::PROJECT_VERSION),
            SMC if index == 0 => self.show_smc_queue(out),
            SMC => self.show_smc_counters(out),
            PCIE_COUNTERS => self.show_pcie_counter(index, out),
            _ => Ok(()),
        }
    }

    fn is_visible(&self, group: u32, index: usize) -> bool {
        match group {
            TLB => self.tlb_class_of(index).is_some(),
            TELEMETRY => self
                .telemetry
                .has_attribute(self.tlb.layout().family, index),
            _ => true,
        }
    }

    fn is_group_visible(&self, group: u32) -> bool {
        group != PCIE_COUNTERS || self.tlb.layout().family.chip().pcie_counters.is_some()
    }
}

impl Card {
    /// One of `pcie_perf_counters`, read from the card now: `ENODEV` once
    /// it is unbound.
    fn show_pcie_counter(&self, index: usize, out: &mut Page<'_>) -> fmt::Result {
        let Some(counters) = &self.tlb.layout().family.chip().pcie_counters else {
            return Ok(());
        };
        let noc = index / counters.ids.len();
        let id = counters.ids[index % counters.ids.len()];
        match self.memory.bar0_read32((counters.offset)(noc, id)) {
            Ok(value) => writeln!(out, "{value}"),
            Err(e) => {
                out.fail(e);
                Ok(())
            }
        }
    }

    fn show_power_state(&self, out: &mut Page<'_>) -> fmt::Result {
        let info = self.power.info();
        match info.sent {
            Some((vote, accepted)) => {
                write!(out, "sent=1 accepted={} ", u8::from(accepted))?;
                write_vote(out, &vote)?;
            }
            None => write!(out, "sent=0 accepted=0 ")?,
        }
        writeln!(
            out,
            " messages={} failures={} voters={} powerdown_pending={} sending={}",
            info.messages,
            info.failures,
            info.voters,
            u8::from(info.powerdown_pending),
            u8::from(info.sending)
        )
    }

    fn show_power_votes(&self, out: &mut Page<'_>) -> fmt::Result {
        let Ok(voters) = self.power.voters(MAX_VOTES_SHOWN) else {
            return writeln!(out, "unavailable");
        };
        for (pid, comm, vote) in voters.iter() {
            write!(out, "pid={pid} comm=")?;
            write_comm(out, comm)?;
            out.write_char(' ')?;
            write_vote(out, vote)?;
            out.write_char('\n')?;
        }
        Ok(())
    }

    /// `smc/queue`: one line per message from post to collection, oldest
    /// (first served) first.
    fn show_smc_queue(&self, out: &mut Page<'_>) -> fmt::Result {
        let Ok((messages, _, _)) = self.smc.view() else {
            out.fail(ENOMEM);
            return Ok(());
        };
        for m in messages.iter() {
            write!(out, "pid={} comm=", m.pid)?;
            write_comm(out, &m.comm)?;
            writeln!(
                out,
                " type=0x{:02x} state={} age_ms={}",
                m.code,
                m.state,
                m.age_ns / 1_000_000
            )?;
        }
        Ok(())
    }

    /// `smc/counters`: the queue's history, one line.
    fn show_smc_counters(&self, out: &mut Page<'_>) -> fmt::Result {
        let Ok((_, c, orphans)) = self.smc.view() else {
            out.fail(ENOMEM);
            return Ok(());
        };
        let average_us = c.latency_total_ns.checked_div(c.completed).unwrap_or(0) / 1000;
        writeln!(
            out,
            "posted={} completed={} firmware_errors={} abandoned={} timeouts={} \
             orphans={} orphans_dropped={} latency_avg_us={} latency_max_us={} timeout_ms={} \
             spurious_wakeups={}",
            c.posted,
            c.completed,
            c.firmware_errors,
            c.abandoned,
            c.timeouts,
            orphans,
            c.orphans_dropped,
            average_us,
            c.latency_max_ns / 1000,
            self.smc.timeout_ms(),
            c.spurious_wakeups
        )
    }

    fn show_open(&self, out: &mut Page<'_>) -> fmt::Result {
        let info = self.gate.info();
        match info.exclusive {
            Some((pid, comm)) => {
                write!(out, "held=1 pid={pid} comm=")?;
                write_comm(out, &comm)?;
            }
            None => write!(out, "held=0 pid=0 comm=")?,
        }
        writeln!(out, " open={} waiting={}", info.open, info.waiting)
    }

    fn show_dma(&self, out: &mut Page<'_>) -> fmt::Result {
        let usage = self.dma.usage(None);
        let limits = self.dma.limits();
        writeln!(
            out,
            "buffers={} buffer_bytes={} pins={} pinned_pages={} outbound_regions={}/{} \
             peer_mappings={} translated={} buffer_limit_bytes={} pinned_limit_pages={}",
            usage.buffers,
            usage.buffer_bytes,
            usage.pins,
            usage.pinned_pages,
            usage.regions,
            crate::iatu::REGIONS,
            usage.peer_mappings,
            u8::from(self.dma.is_translated()),
            limits.buffer_bytes,
            limits.pinned_pages,
        )
    }

    /// The class of the card's layout whose size is `TLB_SIZES[index]`.
    fn tlb_class_of(&self, index: usize) -> Option<usize> {
        let size = *TLB_SIZES.get(index)?;
        self.tlb
            .layout()
            .classes()
            .iter()
            .position(|c| c.size == size && c.total > 0)
    }

    fn show_tlb_class(&self, index: usize, out: &mut Page<'_>) -> fmt::Result {
        let Some(class) = self.tlb_class_of(index) else {
            return Ok(());
        };
        let Ok(info) = self.tlb.class_info(class) else {
            return writeln!(out, "unavailable");
        };
        write!(
            out,
            "size={} windows={} kernel={} free={} waiters={} exported={} holders=",
            info.class.size,
            info.class.total,
            info.class.kept,
            info.free,
            info.waiters,
            info.exported
        )?;
        for (n, (pid, comm, count)) in info.holders.iter().enumerate() {
            if n > 0 {
                out.write_char(',')?;
            }
            write!(out, "{pid}/")?;
            write_comm(out, comm)?;
            write!(out, "/{count}")?;
        }
        out.write_char('\n')
    }

    fn show_lock(&self, index: usize, out: &mut Page<'_>) -> fmt::Result {
        if index >= LOCK_COUNT {
            return Ok(());
        }
        let Ok(info) = self.arbiter.query(None, index) else {
            return writeln!(out, "gone");
        };
        write!(out, "name=")?;
        write_lock_name(out, index)?;
        match info.holder {
            Some((pid, comm)) => {
                write!(out, " held=1 pid={pid} comm=")?;
                write_comm(out, &comm)?;
            }
            None => write!(out, " held=0 pid=0 comm=")?,
        }
        let stats = info.stats;
        write!(
            out,
            " held_ns={} waiters={} owner_died_pending={} acquisitions={} contended={} \
             owner_died={} wait_total_ns={} wait_max_ns={} hold_max_ns={} spurious_wakeups={}",
            info.held_ns,
            info.waiters,
            u8::from(info.owner_died),
            stats.acquisitions,
            stats.contended,
            stats.owner_died,
            stats.total_wait_ns,
            stats.max_wait_ns,
            stats.max_hold_ns,
            stats.spurious_wakeups,
        )?;
        // The files polling it (LOCK_CTL tries that fail), which `waiters`
        // does not count: without them a process whose lock() never
        // returns would be seen waiting for nothing.
        let Ok((count, pollers)) = self.lock_pollers(index, MAX_POLLERS_SHOWN) else {
            out.fail(ENOMEM);
            return Ok(());
        };
        write!(out, " pollers={count} polled_by=")?;
        for (n, p) in pollers.iter().enumerate() {
            if n > 0 {
                out.write_char(',')?;
            }
            write!(out, "{}/", p.pid)?;
            write_comm_except(out, &p.comm, b"/,")?;
            write!(out, "/{}/{}", p.polling_ns, p.tries)?;
        }
        out.write_char('\n')
    }
}

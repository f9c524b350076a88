// SPDX-License-Identifier: GPL-2.0

//! `/sys/kernel/debug/tenstorrent/N/waiters`: the waiters of card N.
//!
//! One line per lock that has waiters, its name then the waiters' pids in
//! arrival order (the order they will be granted, but that a poller's
//! place under the hand-off bound may be passed); then the whole queue, one
//! request per line, with every lock it asks for.
//!
//! `/sys/kernel/debug/tenstorrent/N/smc_timeout_ms`: how long card N's
//! firmware has to answer a message (src/smc.rs), read and written as a
//! decimal number of milliseconds; for tests.
//!
//! `/sys/kernel/debug/tenstorrent/N/handoff_us`: card N's lock hand-off
//! bound (src/arbiter.rs), read and written as a decimal number of
//! microseconds; 0 is strict FIFO. Starts at the module parameter
//! `handoff_us`.
//!
//! `/sys/kernel/debug/tenstorrent/N/poll_lease_ms`: how long a failed
//! lock try keeps its place in card N's queue, in milliseconds (20 by
//! default); for tests, which make it longer than themselves.
//!
//! `/sys/kernel/debug/tenstorrent/N/mappings`: what each open file of card
//! N holds, tt-kmd 2.10's diagnostic view (its `mappings` file, whose
//! header and line kinds this follows; UMD's error messages point users
//! at it): the file itself (OPEN_FD), its pinned pages and DMA buffers
//! with their bus and NOC addresses, its windows (TLB-alloc, and TLB for a
//! mapped one) and its BAR mappings.

use crate::{
    arbiter::{
        bit,
        OwnerId,
        LOCK_COUNT, //
    },
    card::Card,
    dma::DmaKind,
    mapping::window_place,
    views::sysfs::write_lock_name,
};
use core::fmt::{
    self,
    Write, //
};
use kernel::{
    debugfs,
    prelude::*,
    str::CString,
    sync::Arc,
    uaccess::UserSliceReader, //
};

pub(crate) struct Waiters(Arc<Card>);

impl debugfs::Writer for Waiters {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Ok(queue) = self.0.arbiter.queue() else {
            return writeln!(f, "unavailable");
        };
        for index in 0..LOCK_COUNT {
            let mut pids = queue.iter().filter(|(_, mask)| mask & bit(index) != 0);
            let Some((first, _)) = pids.next() else {
                continue;
            };
            write_lock_name(f, index)?;
            write!(f, ": {first}")?;
            for (pid, _) in pids {
                write!(f, " {pid}")?;
            }
            f.write_char('\n')?;
        }
        writeln!(f, "queue:")?;
        for (position, (pid, mask)) in queue.iter().enumerate() {
            write!(f, "{position} pid={pid} locks=")?;
            let mut first = true;
            for index in (0..LOCK_COUNT).filter(|&i| mask & bit(i) != 0) {
                if !first {
                    f.write_char(',')?;
                }
                first = false;
                write_lock_name(f, index)?;
            }
            f.write_char('\n')?;
        }
        Ok(())
    }
}

pub(crate) struct Mappings(Arc<Card>);

impl Mappings {
    fn write_file(
        &self,
        f: &mut fmt::Formatter<'_>,
        owner: OwnerId,
        who: &dyn Fn(&mut fmt::Formatter<'_>, &str) -> fmt::Result,
    ) -> fmt::Result {
        let card = &self.0;
        who(f, "OPEN_FD")?;
        f.write_char('\n')?;
        let bus = if card.dma.is_translated() {
            "IOVA"
        } else {
            "PA"
        };
        for e in card.dma.entries().unwrap_or_default().iter() {
            if e.owner != owner {
                continue;
            }
            let kind = match (e.what, e.noc_address.is_some()) {
                (DmaKind::Pin(_), false) => "PIN_PAGES",
                (DmaKind::Pin(_), true) => "PIN_PAGES+IATU",
                (DmaKind::Buffer(_), false) => "DMA_BUF",
                (DmaKind::Buffer(_), true) => "DMA_BUF+IATU",
            };
            who(f, kind)?;
            match e.what {
                DmaKind::Pin(va) => write!(f, " VA: 0x{va:016x}")?,
                DmaKind::Buffer(index) => write!(f, " ID: {index:<3}")?,
            }
            write!(f, " -> {bus}: 0x{:016x}", e.dma_address)?;
            if let Some(noc) = e.noc_address {
                write!(f, " -> NOC: 0x{noc:x}")?;
            }
            writeln!(f, " (size=0x{:x})", e.size)?;
        }
        let layout = card.tlb.layout();
        for (id, holder) in card.tlb.held_windows().unwrap_or_default().iter() {
            if *holder != owner {
                continue;
            }
            who(f, "TLB-alloc")?;
            writeln!(f, " ID: {id:<3}")?;
            if let (true, Some(place)) = (card.memory.window_mapped(*id), window_place(layout, *id))
            {
                who(f, "TLB")?;
                writeln!(
                    f,
                    " ID: {id:<3} -> BAR{} + 0x{:x} (size=0x{:x})",
                    2 * place.resource,
                    place.bar_offset,
                    place.size
                )?;
            }
        }
        for v in card.memory.bar_vmas().unwrap_or_default().iter() {
            if v.owner != owner {
                continue;
            }
            who(f, "BAR")?;
            let caching = if v.write_combined { "WC" } else { "UC" };
            writeln!(f, " BAR{} {caching} (mappings={})", 2 * v.resource, v.count)?;
        }
        Ok(())
    }
}

impl debugfs::Writer for Mappings {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "WARNING: This file is for diagnostic purposes only.\n\
             Its format is not stable and may change in future driver versions.\n\
             Do not write scripts that parse this file.\n\n",
        )?;
        writeln!(
            f,
            "{:<8} {:<16} {:<14} Mapping Details",
            "PID", "Comm", "Type"
        )?;
        writeln!(
            f,
            "{:<8} {:<16} {:<14} ---------------",
            "----", "----", "----"
        )?;
        let Ok(openers) = self.0.openers_info() else {
            return writeln!(f, "unavailable");
        };
        for (owner, pid, comm) in openers.iter() {
            let name = comm.iter().take_while(|&&c| c != 0).count();
            let name = core::str::from_utf8(&comm[..name]).unwrap_or("?");
            let who = |f: &mut fmt::Formatter<'_>, kind: &str| {
                write!(f, "{pid:<8} {name:<16} {kind:<14}")
            };
            self.write_file(f, *owner, &who)?;
        }
        Ok(())
    }
}

fn show_smc_timeout(card: &Arc<Card>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", card.smc.timeout_ms())
}

/// The decimal number written to a settings file.
fn read_number(reader: &mut UserSliceReader) -> Result<u32> {
    let mut buf = [0u8; 16];
    let len = reader.len().min(buf.len());
    reader.read_slice(&mut buf[..len])?;
    let text = core::str::from_utf8(&buf[..len]).map_err(|_| EINVAL)?;
    text.trim().parse::<u32>().map_err(|_| EINVAL)
}

fn store_smc_timeout(card: &Arc<Card>, reader: &mut UserSliceReader) -> Result {
    card.smc.set_timeout_ms(read_number(reader)?);
    Ok(())
}

fn show_handoff(card: &Arc<Card>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", card.arbiter.handoff_us())
}

fn store_handoff(card: &Arc<Card>, reader: &mut UserSliceReader) -> Result {
    card.arbiter.set_handoff_us(read_number(reader)?);
    Ok(())
}

fn show_lease(card: &Arc<Card>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "{}", card.arbiter.poll_lease_ms())
}

fn store_lease(card: &Arc<Card>, reader: &mut UserSliceReader) -> Result {
    card.arbiter.set_poll_lease_ms(read_number(reader)?);
    Ok(())
}

/// The debugfs directory of a card, removed when dropped.
pub(crate) struct CardDebugfs {
    // Drop order: the files, then their directory.
    _waiters: Pin<KBox<debugfs::File<Waiters>>>,
    _mappings: Pin<KBox<debugfs::File<Mappings>>>,
    _smc_timeout: Pin<KBox<debugfs::File<Arc<Card>>>>,
    _handoff: Pin<KBox<debugfs::File<Arc<Card>>>>,
    _lease: Pin<KBox<debugfs::File<Arc<Card>>>>,
    _dir: debugfs::Dir,
}

impl CardDebugfs {
    pub(crate) fn new(root: &debugfs::Dir, card: &Arc<Card>) -> Result<Self> {
        let name = CString::try_from_fmt(fmt!("{}", card.ordinal))?;
        let dir = root.subdir(&name);
        let waiters = KBox::pin_init(
            dir.read_only_file(c"waiters", Waiters(card.clone())),
            GFP_KERNEL,
        )?;
        let mappings = KBox::pin_init(
            dir.read_only_file(c"mappings", Mappings(card.clone())),
            GFP_KERNEL,
        )?;
        // The message queue's per-message deadline, in milliseconds: tests
        // make it long (the firmware hung on purpose) or short.
        let smc_timeout = KBox::pin_init(
            dir.read_write_callback_file(
                c"smc_timeout_ms",
                card.clone(),
                &show_smc_timeout,
                &store_smc_timeout,
            ),
            GFP_KERNEL,
        )?;
        // The locks' hand-off bound: tests make it huge (barging always
        // allowed) or 0 (strict FIFO), so that their outcome does not
        // depend on how fast the machine runs.
        let handoff = KBox::pin_init(
            dir.read_write_callback_file(
                c"handoff_us",
                card.clone(),
                &show_handoff,
                &store_handoff,
            ),
            GFP_KERNEL,
        )?;
        // The poll places' lease: tests make it longer than themselves, so
        // that a poller's place is there when they need it.
        let lease = KBox::pin_init(
            dir.read_write_callback_file(c"poll_lease_ms", card.clone(), &show_lease, &store_lease),
            GFP_KERNEL,
        )?;
        Ok(Self {
            _waiters: waiters,
            _mappings: mappings,
            _smc_timeout: smc_timeout,
            _handoff: handoff,
            _lease: lease,
            _dir: dir,
        })
    }
}

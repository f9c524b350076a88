// SPDX-License-Identifier: GPL-2.0

//! `/proc/PID/fdinfo/FD` of an open `/dev/tenstorrent/N`: what that open
//! file holds, so that `lsof`-style tools and monitors can attribute a
//! card's use to processes without access to the device, and so that
//! someone looking at a hung process sees what it holds and waits for.
//!
//! One `key:\tvalue` line each, after the lines the VFS writes for every
//! file, in the style of DRM's fdinfo (Documentation/gpu/drm-usage-stats.rst:
//! keys without whitespace, prefixed with the driver's name, durations in
//! `ns`, sizes in bytes). The keys are documented in
//! Documentation/ABI/testing/procfs-fdinfo-tenstorrent. Counts are always
//! shown; a line per held or awaited lock, and the firmware message's
//! details, only when there is one.
//!
//! Each part is read under its own lock, so the lines are each true when
//! read but not a snapshot of one instant (a lock may be released between
//! the lock lines and the window lines).

use crate::{
    arbiter::Owner,
    card::Card,
    views::sysfs::write_lock_name, //
};
use kernel::{
    fmt,
    page::PAGE_SIZE,
    seq_file::{
        seq_print,
        SeqFile, //
    }, //
};

/// Lock `index` as sysfs names it (`ARC_MSG`, `ETH03`, or the index).
struct LockName(usize);

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_lock_name(f, self.0)
    }
}

/// Writes what the file `owner` of `card` holds (`exclusive`: opened with
/// `O_EXCL`).
pub(crate) fn show(m: &SeqFile, card: &Card, owner: &Owner, exclusive: bool) {
    let id = owner.id();
    let pci = &card.pci;
    seq_print!(m, "tt-driver:\ttenstorrent\n");
    seq_print!(
        m,
        "tt-pdev:\t{:04x}:{:02x}:{:02x}.{}\n",
        pci.domain,
        pci.bus_dev_fn >> 8,
        (pci.bus_dev_fn >> 3) & 0x1f,
        pci.bus_dev_fn & 7
    );
    seq_print!(m, "tt-card:\t{}\n", card.ordinal);
    // Unique per card (hence tt-pdev beside it): dup(), fork() and
    // SCM_RIGHTS copies of one open file show the same id.
    seq_print!(m, "tt-client-id:\t{}\n", id.number());
    seq_print!(m, "tt-exclusive:\t{}\n", u8::from(exclusive));

    // Without memory for the list the lock lines are left out, as if the
    // module did not show them; nothing else here allocates.
    if let Ok(locks) = card.arbiter.holdings(owner) {
        seq_print!(m, "tt-locks-held:\t{}\n", locks.held.len());
        for &(index, ns) in locks.held.iter() {
            seq_print!(m, "tt-lock-held-{}:\t{} ns\n", LockName(index), ns);
        }
        seq_print!(m, "tt-locks-waiting:\t{}\n", locks.waiting.len());
        for &(index, ns) in locks.waiting.iter() {
            seq_print!(m, "tt-lock-waiting-{}:\t{} ns\n", LockName(index), ns);
        }
        // A poller's failed tries are no wait, but what it waits for.
        seq_print!(m, "tt-locks-polling:\t{}\n", locks.polling.len());
        for &(index, ns, tries) in locks.polling.iter() {
            seq_print!(m, "tt-lock-polling-{}:\t{} ns\n", LockName(index), ns);
            seq_print!(m, "tt-lock-poll-tries-{}:\t{}\n", LockName(index), tries);
        }
    }

    let layout = card.tlb.layout();
    if let Ok(held) = card.tlb.held_windows() {
        let (mut windows, mut bytes) = (0u64, 0u64);
        for &(window, _) in held.iter().filter(|(_, o)| *o == id) {
            windows += 1;
            bytes += crate::mapping::window_place(layout, window).map_or(0, |p| p.size);
        }
        seq_print!(m, "tt-tlb-windows:\t{}\n", windows);
        seq_print!(m, "tt-tlb-bytes:\t{}\n", bytes);
    }

    let dma = card.dma.usage(Some(id));
    seq_print!(m, "tt-dma-buffers:\t{}\n", dma.buffers);
    seq_print!(m, "tt-dma-buffer-bytes:\t{}\n", dma.buffer_bytes);
    seq_print!(m, "tt-pinned-ranges:\t{}\n", dma.pins);
    seq_print!(m, "tt-pinned-bytes:\t{}\n", dma.pinned_pages * PAGE_SIZE);

    if let Some(vote) = card.power.vote_of(id) {
        seq_print!(m, "tt-power-validity:\t{:#04x}\n", vote.validity);
        seq_print!(m, "tt-power-flags:\t{:#06x}\n", vote.flags);
        let count = usize::from(vote.setting_count()).min(vote.settings.len());
        if count > 0 {
            seq_print!(m, "tt-power-settings:\t{}", vote.settings[0]);
            for s in &vote.settings[1..count] {
                seq_print!(m, ",{}", s);
            }
            seq_print!(m, "\n");
        }
    }

    seq_print!(
        m,
        "tt-noc-cleanup:\t{}\n",
        u8::from(card.noc_cleanups.of(id).is_some())
    );

    match card.smc.message_of(id) {
        Some((code, state, age_ns)) => {
            seq_print!(m, "tt-smc-msg:\t{}\n", state);
            seq_print!(m, "tt-smc-msg-type:\t{:#04x}\n", code);
            seq_print!(m, "tt-smc-msg-age:\t{} ns\n", age_ns.max(0));
        }
        None => seq_print!(m, "tt-smc-msg:\tnone\n"),
    }
}

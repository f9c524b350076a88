// SPDX-License-Identifier: GPL-2.0

//! `/sys/kernel/debug/tenstorrent/N/waiters`: the waiters of card N.
//!
//! One line per lock that has waiters, its name then the waiters' pids in
//! the order they will be granted; then the whole queue, one request per
//! line, with every lock it asks for.

use crate::{
    arbiter::{
        bit,
        LOCK_COUNT, //
    },
    card::Card,
    sysfs::write_lock_name,
};
use core::fmt::{
    self,
    Write, //
};
use kernel::{
    debugfs,
    prelude::*,
    str::CString,
    sync::Arc, //
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

/// The debugfs directory of a card, removed when dropped.
pub(crate) struct CardDebugfs {
    // Drop order: the file, then its directory.
    _waiters: Pin<KBox<debugfs::File<Waiters>>>,
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
        Ok(Self {
            _waiters: waiters,
            _dir: dir,
        })
    }
}

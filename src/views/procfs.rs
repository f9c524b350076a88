// SPDX-License-Identifier: GPL-2.0

//! `/proc/driver/tenstorrent/N/pids`: one line per open file of card N, the
//! pid of the process that opened it, as the C driver shows it. Operators
//! read it to find who has a hung card open. `/proc/driver/tenstorrent/N/tlb`:
//! the TLB windows in use (src/views/tlb.rs).

use crate::{
    card::Card,
    rust_ext::procfs::{
        ProcDir,
        ProcFile,
        ProcShow, //
    },
    views::tlb::TlbView,
};
use kernel::{
    prelude::*,
    seq_file::{
        seq_print,
        SeqFile, //
    },
    str::CString,
    sync::Arc, //
};

struct Pids(Arc<Card>);

impl ProcShow for Pids {
    fn show(&self, m: &SeqFile) {
        // Without memory for the list the file reads empty, like a card
        // with no open file; nothing else can fail here.
        if let Ok(openers) = self.0.openers_info() {
            for (_, pid, _) in openers.iter() {
                seq_print!(m, "{}\n", pid);
            }
        }
    }
}

/// The procfs directory of a card, removed with its files when dropped.
pub(crate) struct CardProc {
    // Drop order: the files, then their directory.
    _pids: ProcFile<Pids>,
    _tlb: ProcFile<TlbView>,
    _dir: ProcDir,
}

impl CardProc {
    pub(crate) fn new(root: &ProcDir, card: &Arc<Card>) -> Result<Self> {
        let name = CString::try_from_fmt(fmt!("{}", card.ordinal))?;
        let dir = ProcDir::new(&name, Some(root))?;
        Ok(Self {
            _pids: ProcFile::new(c"pids", &dir, Pids(card.clone()))?,
            _tlb: ProcFile::new(c"tlb", &dir, TlbView(card.clone()))?,
            _dir: dir,
        })
    }
}

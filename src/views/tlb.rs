// SPDX-License-Identifier: GPL-2.0

//! `/proc/driver/tenstorrent/N/tlb`: every TLB window in use on card N, one
//! line each: `ID SIZE PID COMM TARGET`, with the holder's pid in the
//! reader's pid namespace (0 if not visible there), its comm as when it
//! took the window, and where the window points now, read back from its
//! register (`X,Y ADDR` in hex, `mcast` and the start tile for a
//! multicast): what CONFIGURE_TLB or the holder itself, through the mapped
//! register page as UMD does, last wrote; a window nobody aimed yet shows
//! its reset value `0,0 0x0`, and `-` stands for a card whose registers can
//! no longer be read. A seq_file, so the list is never cut at a page as a
//! sysfs attribute would be.

use crate::{
    card::Card,
    mapping::window_place,
    rust_ext::procfs::ProcShow, //
};
use kernel::{
    seq_file::{
        seq_print,
        SeqFile, //
    },
    sync::Arc, //
};

pub(crate) struct TlbView(pub(crate) Arc<Card>);

/// The comm up to its NUL, or `?` if it is not UTF-8.
fn comm_str(comm: &[u8]) -> &str {
    let len = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    core::str::from_utf8(&comm[..len]).unwrap_or("?")
}

impl ProcShow for TlbView {
    fn show(&self, m: &SeqFile) {
        let card = &self.0;
        let layout = card.tlb.layout();
        let mut id = 0;
        while let Some(place) = window_place(layout, id) {
            if let Some((pid, comm)) = card.tlb.holder_of(id) {
                seq_print!(m, "{} {:#x} {} {} ", id, place.size, pid, comm_str(&comm));
                match card.memory.target(layout, id) {
                    Ok(t) if t.mcast != 0 => seq_print!(
                        m,
                        "{},{} {:#x} mcast from {},{}\n",
                        t.x_end,
                        t.y_end,
                        t.addr,
                        t.x_start,
                        t.y_start
                    ),
                    Ok(t) => seq_print!(m, "{},{} {:#x}\n", t.x_end, t.y_end, t.addr),
                    // The card is gone: its registers cannot be read.
                    Err(_) => seq_print!(m, "-\n"),
                }
            }
            id += 1;
        }
    }
}

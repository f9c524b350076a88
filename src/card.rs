// SPDX-License-Identifier: GPL-2.0

//! A bound card: what the ioctls report about it and its locks.

use crate::{
    arbiter::{
        Arbiter,
        OwnerId, //
    },
    tlb::{
        Layout,
        TlbPool, //
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        Mutex, //
    },
    task::Task, //
};

/// The PCI identity of a card, as GET_DEVICE_INFO reports it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PciIdentity {
    pub(crate) vendor_id: u16,
    pub(crate) device_id: u16,
    pub(crate) subsystem_vendor_id: u16,
    pub(crate) subsystem_id: u16,
    /// Function in bits 0-2, device in 3-7, bus in 8-15.
    pub(crate) bus_dev_fn: u16,
    pub(crate) domain: u16,
}

/// The state of one bound card shared by its open files.
///
/// It outlives the binding: files opened before an unbind keep it, and see
/// [`Card::is_gone`] (every command then fails with `ENODEV`).
#[pin_data]
pub(crate) struct Card {
    /// N of `/dev/tenstorrent/N`.
    pub(crate) ordinal: u32,
    pub(crate) pci: PciIdentity,
    #[pin]
    pub(crate) arbiter: Arbiter,
    #[pin]
    pub(crate) tlb: TlbPool,
    /// The open files and the processes that opened them.
    #[pin]
    openers: Mutex<KVec<Opener>>,
}

struct Opener {
    owner: OwnerId,
    /// The thread-group leader of the opener.
    task: ARef<Task>,
}

impl Card {
    pub(crate) fn new(
        ordinal: u32,
        pci: PciIdentity,
        layout: Layout,
    ) -> Result<impl PinInit<Self>> {
        let arbiter = Arbiter::new()?;
        let tlb = TlbPool::new(layout)?;
        Ok(pin_init!(Self {
            ordinal,
            pci,
            arbiter <- arbiter,
            tlb <- tlb,
            openers <- new_mutex!(KVec::new()),
        }))
    }

    /// The card is going away: every waiter wakes with `ENODEV`.
    pub(crate) fn shut_down(&self) {
        self.arbiter.shut_down();
        self.tlb.shut_down();
    }

    /// Records that the calling process opened the file `owner`.
    pub(crate) fn add_opener(&self, owner: OwnerId) -> Result {
        let task = kernel::current!().group_leader().into();
        self.openers
            .lock()
            .push(Opener { owner, task }, GFP_KERNEL)?;
        Ok(())
    }

    /// Forgets the file `owner`, which is being closed.
    pub(crate) fn remove_opener(&self, owner: OwnerId) {
        let mut openers = self.openers.lock();
        if let Some(position) = openers.iter().position(|o| o.owner == owner) {
            // The opener's task reference goes after the mutex is released.
            let _gone = openers.remove(position);
        }
    }

    /// The pid of the opener of each open file, in the caller's pid
    /// namespace (0 when not visible there or exited), in opening order.
    pub(crate) fn opener_pids(&self) -> Result<KVec<u32>> {
        let current = kernel::current!();
        let ns = current.active_pid_ns();
        let openers = self.openers.lock();
        let mut pids = KVec::with_capacity(openers.len(), GFP_KERNEL)?;
        for opener in openers.iter() {
            let pid = u32::try_from(opener.task.tgid_nr_ns(ns)).unwrap_or(0);
            pids.push(pid, GFP_KERNEL)?;
        }
        Ok(pids)
    }

    /// Whether the card has been unbound.
    pub(crate) fn is_gone(&self) -> bool {
        self.arbiter.is_gone()
    }
}

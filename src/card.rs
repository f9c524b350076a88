// SPDX-License-Identifier: GPL-2.0

//! A bound card: its parts, and what acts on several of them at once
//! (unbind, RESET_DEVICE and its fences, EXPORT_TLB_DMABUF, peer mappings,
//! the firmware's poll). Each part's own file knows nothing of the card.

use crate::{
    arbiter::{
        handoff_ns_of_us,
        Arbiter,
        Owner,
        OwnerId,
        Poller,
        POLL_LEASE_NS, //
    },
    arc::ArcMessenger,
    chip::Layout,
    dma::CardDma,
    mapping::{
        window_place,
        CardMemory, //
    },
    noc_cleanup::NocCleanups,
    open_gate::OpenGate,
    power::CardPower,
    reset::{
        CardFunction,
        PostReset,
        RESET_ASIC,
        RESET_ASIC_DMC,
        RESET_CONFIG_WRITE,
        RESET_PCIE_LINK,
        RESET_POST_RESET,
        RESET_RESTORE_STATE,
        RESET_USER, //
    },
    rust_ext::{
        dmabuf::{
            export,
            DmaBufOwner,
            LiveDmaBufs,
            PendingExport, //
        },
        task::{
            comm,
            TASK_COMM_LEN, //
        },
        workqueue::{
            cancel_delayed_work_sync,
            enqueue_delayed,
            new_delayed_work,
            DelayedWork,
            DelayedWorkItem, //
        },
    },
    smc::{
        Firmware,
        SmcQueue,
        POLL_FIRST_US,
        POLL_LOOKS,
        POLL_MAX_US, //
    },
    telemetry::Telemetry,
    tlb::{
        TlbPool,
        MAX_WINDOWS, //
    },
    uapi::ExportTlbDmabuf,
};
use kernel::{
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        Mutex, //
    },
    task::Task,
    time::{
        delay::fsleep,
        msecs_to_jiffies,
        Delta, //
    },
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
    /// The BARs and the mappings of them (src/mapping.rs).
    #[pin]
    pub(crate) memory: CardMemory,
    /// DMA buffers and pinned pages of every file (src/dma.rs).
    pub(crate) dma: CardDma,
    /// The PCI function, for RESET_DEVICE (src/reset.rs).
    pub(crate) function: CardFunction,
    /// The NOC writes files registered to be made when they are released.
    #[pin]
    pub(crate) noc_cleanups: NocCleanups,
    /// Who may open the card: the open-time reader/writer lock of `O_EXCL`.
    #[pin]
    pub(crate) gate: OpenGate,
    /// One message at a time to the card's ARC firmware (src/arc.rs).
    #[pin]
    arc: ArcMessenger,
    /// The firmware's message queue, shared by the files and the driver
    /// (src/smc.rs).
    #[pin]
    pub(crate) smc: SmcQueue,
    /// Moves the message queue on while messages are outstanding.
    #[pin]
    smc_work: DelayedWork<Card, 1>,
    /// The files' power votes and what the firmware was told (src/power.rs).
    #[pin]
    pub(crate) power: CardPower,
    /// The dma-bufs exporting its windows (EXPORT_TLB_DMABUF, below).
    #[pin]
    pub(crate) exports: LiveDmaBufs,
    /// Where the firmware's telemetry is (src/telemetry.rs).
    #[pin]
    pub(crate) telemetry: Telemetry,
    /// Held while the card is reset (src/reset.rs): one reset at a time.
    #[pin]
    pub(crate) resetting: Mutex<()>,
    /// Powers a Wormhole down once the grace after its last close is over.
    #[pin]
    powerdown: DelayedWork<Card>,
    /// The open files and the processes that opened them. Taken alone:
    /// nothing else is locked while it is held, and it is released before
    /// the arbiter's mutex is taken for the files it lists.
    #[pin]
    openers: Mutex<KVec<Opener>>,
    /// The cards whose DMA maps a BAR of this one (MAP_PEER_BAR), whose
    /// mappings of it go when this card is unbound
    /// ([`Card::revoke_peer_mappings`]). Taken alone; emptied at unbind,
    /// which breaks the reference cycle two cards mapping each other make.
    #[pin]
    mapped_by: Mutex<KVec<Arc<Card>>>,
}

struct Opener {
    /// The file's lock owner, which [`Card::lock_pollers`] asks the
    /// arbiter about.
    owner: Owner,
    /// The thread-group leader of the opener.
    task: ARef<Task>,
}

impl Card {
    pub(crate) fn new(
        ordinal: u32,
        pci: PciIdentity,
        layout: Layout,
        memory: impl PinInit<CardMemory>,
        dma: CardDma,
        function: CardFunction,
        power: impl PinInit<CardPower>,
    ) -> Result<impl PinInit<Self>> {
        let handoff_ns = handoff_ns_of_us(crate::module_parameters::handoff_us.value());
        let arbiter = Arbiter::new(POLL_LEASE_NS, handoff_ns)?;
        let tlb = TlbPool::new(layout)?;
        Ok(pin_init!(Self {
            ordinal,
            pci,
            arbiter <- arbiter,
            tlb <- tlb,
            memory <- memory,
            dma,
            function,
            noc_cleanups <- NocCleanups::new(),
            gate <- OpenGate::new(),
            arc <- ArcMessenger::new(),
            smc <- SmcQueue::new(),
            smc_work <- new_delayed_work!("Card::smc_work"),
            power <- power,
            exports <- LiveDmaBufs::new(),
            telemetry <- Telemetry::new(),
            resetting <- new_mutex!(()),
            powerdown <- new_delayed_work!("Card::powerdown"),
            openers <- new_mutex!(KVec::new()),
            mapped_by <- new_mutex!(KVec::new()),
        }))
    }

    /// The card is going away: every waiter wakes with `ENODEV`, nothing
    /// more is sent to its firmware.
    pub(crate) fn shut_down(self: &Arc<Self>) {
        self.power.shut_down();
        // After that nothing queues it again.
        cancel_delayed_work_sync::<_, 0>(self);
        // Every message outstanding fails with ENODEV; after that the queue
        // is never kicked again.
        self.smc.shut_down();
        cancel_delayed_work_sync::<_, 1>(self);
        self.gate.shut_down();
        self.arbiter.shut_down();
        self.tlb.shut_down();
        // After the pool refuses faults of windows: every mapping of the
        // card goes before its BARs are released, the importers' too.
        self.memory.revoke_all();
        self.exports.revoke_all();
        // While the BARs are still mapped: the function stops mastering the
        // bus next (`EnabledDevice`, src/driver.rs), then devres frees the
        // buffers the regions reached.
        self.dma.quiesce(&self.memory);
        // After the arbiter marked the card gone: see `map_peer_bar`.
        self.revoke_peer_mappings();
    }

    /// The identity of this card in other cards' peer mappings of its BARs
    /// (its address: a card is freed only after its unbind revoked them).
    pub(crate) fn peer_id(&self) -> usize {
        core::ptr::from_ref(self) as usize
    }

    /// Records that `user`'s DMA is about to map a BAR of this card, so
    /// that this card's unbind revokes the mapping. `ENODEV` once the card
    /// is gone (its unbind may have revoked the other cards' mappings
    /// already).
    pub(crate) fn add_peer_user(&self, user: &Arc<Card>) -> Result {
        let mut users = self.mapped_by.lock();
        if self.is_gone() {
            return Err(ENODEV);
        }
        if !users.iter().any(|u| Arc::ptr_eq(u, user)) {
            users.push(user.clone(), GFP_KERNEL)?;
        }
        Ok(())
    }

    /// The card is being unbound and its BARs released next: no other card
    /// keeps a DMA mapping of them. A MAP_PEER_BAR racing with this checks
    /// [`Card::is_gone`] after its mapping is listed, and undoes it.
    fn revoke_peer_mappings(&self) {
        let users = core::mem::take(&mut *self.mapped_by.lock());
        for user in users.iter() {
            user.dma.revoke_peer(self.peer_id());
        }
    }

    /// Records that the calling process opened the file `owner`.
    pub(crate) fn add_opener(&self, owner: &Owner) -> Result {
        let task = kernel::current!().group_leader().into();
        let owner = owner.clone();
        self.openers
            .lock()
            .push(Opener { owner, task }, GFP_KERNEL)?;
        Ok(())
    }

    /// Forgets the file `owner`, which is being closed.
    pub(crate) fn remove_opener(&self, owner: OwnerId) {
        let gone = {
            let mut openers = self.openers.lock();
            let position = openers.iter().position(|o| o.owner.id() == owner);
            position.map(|position| openers.remove(position))
        };
        // The opener's task reference is dropped here, after the mutex is
        // released: if it is the last one (the opener has exited), freeing
        // the task needs no lock of ours, so the list is not held meanwhile.
        drop(gone);
    }

    /// The open files, in opening order: the owner, the opener's pid in the
    /// caller's pid namespace (0 if not visible there) and its comm now.
    pub(crate) fn openers_info(&self) -> Result<KVec<(OwnerId, u32, [u8; TASK_COMM_LEN])>> {
        let current = kernel::current!();
        let ns = current.active_pid_ns();
        let openers = self.openers.lock();
        let mut out = KVec::with_capacity(openers.len(), GFP_KERNEL)?;
        for opener in openers.iter() {
            let pid = u32::try_from(opener.task.tgid_nr_ns(ns)).unwrap_or(0);
            out.push((opener.owner.id(), pid, comm(&opener.task)), GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// The open files that poll lock `index` ([`Arbiter::pollers`]): how
    /// many, and the `max` that have polled longest.
    pub(crate) fn lock_pollers(&self, index: usize, max: usize) -> Result<(u32, KVec<Poller>)> {
        let owners = {
            let openers = self.openers.lock();
            let mut owners = KVec::with_capacity(openers.len(), GFP_KERNEL)?;
            for opener in openers.iter() {
                owners.push(opener.owner.clone(), GFP_KERNEL)?;
            }
            owners
        };
        // The openers' list is released: the arbiter's mutex is never
        // taken under it.
        self.arbiter.pollers(index, &owners, max)
    }

    /// Revokes the mappings and the target of window `id`, just freed (a
    /// dma-buf that still exports it keeps its target).
    pub(crate) fn revoke_freed_window(&self, id: usize) {
        let exported = self.tlb.is_exported(id);
        self.memory.revoke_window(self.tlb.layout(), id, exported);
    }

    /// Whether the card has been unbound.
    pub(crate) fn is_gone(&self) -> bool {
        self.arbiter.is_gone()
    }

    /// Whether a reset fenced the file `owner`.
    pub(crate) fn is_fenced(&self, owner: OwnerId) -> bool {
        self.arbiter.is_stale(owner)
    }

    /// Whether the card refuses the commands of file `owner` (`ENODEV`):
    /// it is gone, or a reset fenced the file.
    pub(crate) fn refuses(&self, owner: OwnerId) -> bool {
        self.arbiter.refuses(owner)
    }

    /// RESET_DEVICE with `flags` from the file `resetter` (src/reset.rs):
    /// whether it succeeded (the command's `result` is its negation).
    /// `EINVAL` for an unknown flag, `ENODEV` once the card is unbound.
    pub(crate) fn reset_device(&self, resetter: OwnerId, flags: u32) -> Result<bool> {
        if flags > RESET_POST_RESET {
            return Err(EINVAL);
        }
        let _one_at_a_time = self.resetting.lock();
        // Importers reach the chip through an exported window: it must not
        // reset under them (tt-kmd 2.10).
        if (RESET_PCIE_LINK..=RESET_ASIC_DMC).contains(&flags) && self.exports.any() {
            return Err(EBUSY);
        }
        // As tt-kmd: whatever the reset, a powerdown waiting for its grace
        // does not come after it.
        self.power.cancel_powerdown();
        let function = &self.function;
        match flags {
            RESET_RESTORE_STATE => function.restore_state(),
            RESET_PCIE_LINK => {
                self.memory.zap_all();
                function.reset_link()
            }
            RESET_CONFIG_WRITE => {
                self.fence_all_but(resetter);
                function.fire_interface_timer()?;
                Ok(true)
            }
            RESET_USER | RESET_ASIC | RESET_ASIC_DMC => {
                self.fence_all_but(resetter);
                function.reset_chip(flags, &self.firmware())
            }
            _ => {
                let post = function.post_reset()?;
                if post == PostReset::ChipRebooted {
                    // The firmware rebooted with an empty message queue.
                    self.smc.chip_reset();
                    // And without the power state it was told.
                    self.power.chip_reset();
                    // Its table may be elsewhere.
                    let _ = self.telemetry.probe(&self.firmware());
                }
                Ok(post != PostReset::Failed)
            }
        }
    }

    /// Fences every file of the card but `survivor` (see
    /// [`crate::arbiter::Arbiter::fence_all_but`]): every later command on
    /// them is `ENODEV`, their queued lock and window requests wake with
    /// `ENODEV`, their windows are freed and revoked, their power votes no
    /// longer count, and every mapping of the card is zapped (theirs fault
    /// no more, the survivor's and newer files' fault in again). Their
    /// locks stay held until they close; their DMA buffers and pinned
    /// pages stay until then too, as in tt-kmd.
    fn fence_all_but(&self, survivor: OwnerId) {
        // No BAR fault of a fenced file inserts a page after the zap below.
        let fence = self
            .memory
            .excluding_faults(|| self.arbiter.fence_all_but(survivor));
        self.tlb.fence(fence, &|id| self.revoke_freed_window(id));
        self.power.fence(fence);
        self.smc.fence(fence);
        self.dma.fence(&self.memory, fence);
        self.memory.zap_all();
    }
}

/// The message queue's poll (see src/smc.rs for why it is a poll).
impl DelayedWorkItem<1> for Card {
    fn delayed_work(&self) -> &DelayedWork<Self, 1> {
        &self.smc_work
    }

    fn run(card: Arc<Card>) {
        let firmware = card.firmware();
        let mut sleep_us = POLL_FIRST_US;
        for look in 1..=POLL_LOOKS {
            // The last look queues the work again if a message is still
            // outstanding (under the queue's lock: see `kick_smc`).
            let busy = card.smc.advance(&firmware, || {
                if look == POLL_LOOKS {
                    card.kick_smc();
                }
            });
            // After the queue's lock is released (the votes' comes first).
            card.power.collect(&firmware, &|| card.kick_smc());
            if !busy || look == POLL_LOOKS {
                return;
            }
            fsleep(Delta::from_micros(sleep_us));
            sleep_us = (sleep_us * 2).min(POLL_MAX_US);
        }
    }
}

impl DelayedWorkItem for Card {
    fn delayed_work(&self) -> &DelayedWork<Self> {
        &self.powerdown
    }

    fn run(card: Arc<Card>) {
        card.power
            .powerdown(&card.firmware(), &|| card.kick_smc(), |left| {
                card.schedule_powerdown(left)
            });
    }
}

impl Card {
    /// The card's ARC firmware.
    pub(crate) fn firmware(&self) -> Firmware<'_> {
        Firmware {
            messenger: &self.arc,
            queue: &self.smc,
            memory: &self.memory,
            layout: self.tlb.layout(),
            in_reset: self.function.needs_post_reset(),
        }
    }

    /// Makes the message queue be looked at again soon: called under the
    /// queue's lock, so that unbind, which marks the queue gone under it
    /// and then cancels the work, never leaves a run queued.
    pub(crate) fn kick_smc(self: &Arc<Self>) {
        // At once: the work item paces its looks itself.
        enqueue_delayed::<_, 1>(self, 0);
    }

    /// Queues [`CardPower::powerdown`] to run after `delay`. If it is queued
    /// already, that run comes first and queues the next for what is left.
    pub(crate) fn schedule_powerdown(self: &Arc<Self>, delay: Delta) {
        let ms = u32::try_from(delay.as_millis_ceil()).unwrap_or(u32::MAX);
        enqueue_delayed::<_, 0>(self, msecs_to_jiffies(ms));
    }
}

/// One export of a window (EXPORT_TLB_DMABUF, tt-kmd 2.10: its `memory.c`
/// `ioctl_export_tlb_dmabuf` gives the checks, their order and the
/// exported range): part of a TLB window exported as a dma-buf, so that
/// another device (an RDMA NIC) reaches the tile memory the window is
/// aimed at, peer to peer; what its dma-buf's release gives back.
///
/// The export holds the window: it survives FREE_TLB and the close of the
/// file that allocated it, and the window goes back to the pool when the
/// last export of it is released (the register reset then). It holds the
/// card too, so a dma-buf outliving an unbind is safe: unbind revokes
/// every export (importers' mappings invalidated, new ones refused), and a
/// reset of the chip is refused (`EBUSY`) while one is live, as in tt-kmd.
struct WindowExport {
    card: Arc<Card>,
    window: usize,
}

impl DmaBufOwner for WindowExport {
    fn live(&self) -> &LiveDmaBufs {
        &self.card.exports
    }

    fn released(self) {
        let card = &self.card;
        let layout = card.tlb.layout();
        if !card.tlb.is_held(self.window) && !card.is_gone() {
            // Its holder freed it while exported: the register kept its
            // target for the importers until now.
            card.memory.reset_window_register(layout, self.window);
        }
        card.tlb.export_put(self.window);
    }
}

impl Card {
    /// EXPORT_TLB_DMABUF of `request` for the file `owner`: the export,
    /// with the descriptor it will have (`argsz` was checked when it was
    /// read). `EINVAL` for flags, an id past 255 or of no window, an offset or size not
    /// page-aligned or past the window; `EPERM` for a window the file does
    /// not hold.
    pub(crate) fn export_window(
        self: &Arc<Self>,
        owner: OwnerId,
        request: &ExportTlbDmabuf,
    ) -> Result<PendingExport> {
        let page = PAGE_SIZE as u64;
        if request.flags != 0
            || request.tlb_id >= MAX_WINDOWS
            || request.offset % page != 0
            || request.size % page != 0
        {
            return Err(EINVAL);
        }
        let id = request.tlb_id as usize;
        let layout = self.tlb.layout();
        let place = window_place(layout, id).ok_or(EINVAL)?;
        // Resets are refused while an export lives (src/reset.rs) and check
        // that under this mutex: an export waits for a reset in progress
        // instead of slipping in under it, then sees the reset's fence.
        let _no_reset = self.resetting.lock();
        if self.refuses(owner) {
            return Err(ENODEV);
        }
        if !self.tlb.holds(owner, id) {
            return Err(EPERM);
        }
        if request.offset >= place.size || request.size > place.size {
            return Err(EINVAL);
        }
        let size = if request.size == 0 {
            place.size - request.offset
        } else {
            request.size
        };
        if request.offset + size > place.size {
            return Err(EINVAL);
        }
        let range = self.memory.bar_range(place.resource).ok_or(EINVAL)?;
        let start = place.bar_offset + request.offset;
        if start + size > range.len() {
            return Err(EINVAL);
        }
        // Held from here; the export's release gives it back, also when
        // the export fails below.
        self.tlb.export_get(owner, id)?;
        let pending = export(
            range.start() + start,
            size,
            WindowExport {
                card: self.clone(),
                window: id,
            },
        )?;
        // Fails once the card is gone (asked under the list's mutex):
        // unbind marks the card gone before it revokes the listed exports
        // under that mutex, so an export listed after that would never be
        // revoked. On failure `pending` gives the window back as it drops,
        // after the list's mutex is released: its release takes it.
        pending.list_in(&self.exports, || self.is_gone())?;
        Ok(pending)
    }
}

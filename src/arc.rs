// SPDX-License-Identifier: GPL-2.0

//! Messages to the card's ARC firmware.
//!
//! The driver tells the firmware two things itself: the power state the
//! open files' votes add up to (src/power.rs), and to reset the chip
//! (RESET_DEVICE, src/reset.rs). Like tt-kmd 2.10 it sends power states
//! through the ARC message queue on both chips, and Wormhole's resets
//! through its scratch-register mailbox (which UMD and luwen also drive from
//! userspace, under the ARC_MSG lock). A
//! queue is a 32-byte header followed by request and response slots of
//! eight words each in the ARC's CSM, found through a control block the
//! firmware publishes.
//!
//! How the driver reaches the ARC tile: on Wormhole straight through BAR0,
//! where the chip shows the ARC's CSM at 0x1FE8_0000 and its APB
//! peripherals (the reset unit) at 0x1FF0_0000 (tt-umd and luwen use those
//! offsets; tt-kmd reaches the same addresses through BAR4, which its iATU
//! points at the same system registers): one MMIO access per word. On
//! Blackhole CSM is not in BAR0, and the APB block is there only when the
//! host uses the PCIe tile at x = 11, so the driver goes through its own TLB
//! window: aimed once per run of accesses to one block (CSM, or the APB
//! block with the reset unit and the MSI catcher), not once per word
//! ([`Exchange::run`]).
//!
//! This file knows the registers and the queue's layout: finding the
//! queue, checking that it is still where it was found, reading its header,
//! putting one request in, taking one response out, each without waiting.
//! Who sends what and when, the files' SMC_MSG messages and the driver's
//! own alike, is src/smc.rs's.
//!
//! Where each fact comes from (tt-kmd 2.10): the queue layout and protocol
//! in `msgqueue.c` / `msgqueue.h`; Wormhole's ready check, control block
//! pointer and doorbell in `wormhole.c` `send_arc_message`; Blackhole's in
//! `blackhole.c` `send_arc_message`; CSM bounds in `telemetry.h`; the BAR0
//! offsets of Wormhole's CSM and APB in tt-umd (`ARC_CSM_BAR0_XBAR_OFFSET_START`,
//! `ARC_APB_BAR0_XBAR_OFFSET_START`).

use crate::{
    chip::{
        regs::{
            arc_queue::{
                CONTROL_BLOCK_INFO,
                HEADER_BYTES,
                REQUEST_RPTR,
                REQUEST_WPTR,
                RESPONSE_RPTR,
                RESPONSE_WPTR,
                SLOT_BYTES, //
            },
            reset_unit_offset,
            WH_ARC_MISC_CNTL_REG,
            WH_FW_MESSAGE_PRESENT,
            WH_MAILBOX_ARGS_REG,
            WH_MAILBOX_MESSAGE_REG, //
        },
        ArcTile,
        Doorbell,
        Family,
        Layout,
        QueueAddress,
        ARC_APB_SIZE,
        ARC_CSM_BASE,
        ARC_CSM_SIZE, //
    },
    mapping::{
        CardMemory,
        KernelRun, //
    },
};
use core::num::NonZeroU32;
use kernel::{
    io::{
        poll::read_poll_timeout,
        register::FixedRegister, //
    },
    new_mutex,
    prelude::*,
    sync::Mutex,
    time::Delta, //
};

/// Between two looks at the mailbox (tt-kmd sleeps 100-200 µs).
const POLL_INTERVAL: Delta = Delta::from_micros(100);

const TWO: NonZeroU32 = NonZeroU32::MIN.saturating_add(1);

/// One queue message or answer: a header word and seven payload words.
pub(crate) type ArcMessage = [u32; 8];

/// A card's Wormhole scratch-register mailbox, one message at a time (the
/// message queue is src/smc.rs's).
#[pin_data]
pub(crate) struct ArcMessenger {
    /// Held for a whole mailbox exchange.
    #[pin]
    exchange: Mutex<()>,
}

/// The two blocks of the ARC tile the driver uses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    /// The APB peripherals: the reset unit and the MSI catcher.
    Apb,
    /// The ARC's CSM: the message queues and the telemetry.
    Csm,
}

/// A run of accesses to one block of the ARC tile, by NOC address.
pub(crate) enum ArcRun<'a> {
    /// Straight through BAR0 (Wormhole): the block's NOC address and the
    /// BAR0 offset that shows it.
    Bar0 {
        memory: &'a CardMemory,
        noc: u64,
        bar0: usize,
        len: u64,
    },
    /// Through the kernel's window, aimed at the block for the run.
    Window(&'a KernelRun<'a>),
}

impl ArcRun<'_> {
    fn bar0_offset(noc: u64, bar0: usize, len: u64, addr: u64) -> Result<usize> {
        let within = addr
            .checked_sub(noc)
            .filter(|&o| o <= len - 4)
            .ok_or(EINVAL)?;
        bar0.checked_add(usize::try_from(within)?).ok_or(EINVAL)
    }

    /// Reads the word at NOC address `addr` of the block.
    fn read(&self, addr: u64) -> Result<u32> {
        match *self {
            Self::Bar0 {
                memory,
                noc,
                bar0,
                len,
            } => memory.bar0_read32(Self::bar0_offset(noc, bar0, len, addr)?),
            Self::Window(run) => run.read32(addr),
        }
    }

    /// Writes `value` at NOC address `addr` of the block, posted: it has
    /// landed once a later read of the same block returns.
    fn write(&self, addr: u64, value: u32) -> Result {
        match *self {
            Self::Bar0 {
                memory,
                noc,
                bar0,
                len,
            } => memory.bar0_write32(Self::bar0_offset(noc, bar0, len, addr)?, value),
            Self::Window(run) => run.write32(addr, value),
        }
    }
}

/// CSM, inside a run: words by ARC address.
pub(crate) struct Csm<'a> {
    run: &'a ArcRun<'a>,
    /// The NOC address of ARC address [`ARC_CSM_BASE`].
    noc: u64,
}

impl Csm<'_> {
    /// The NOC address of the word of CSM at ARC address `addr`: `EIO`
    /// outside CSM, where a bad pointer from the firmware would otherwise
    /// send the driver.
    fn addr(&self, addr: u32) -> Result<u64> {
        csm_offset(addr).map(|offset| self.noc + u64::from(offset))
    }

    fn read(&self, addr: u32) -> Result<u32> {
        self.run.read(self.addr(addr)?)
    }

    fn write(&self, addr: u32, value: u32) -> Result {
        self.run.write(self.addr(addr)?, value)
    }
}

/// The offset in CSM of the word at ARC address `addr`: `EIO` outside CSM.
fn csm_offset(addr: u32) -> Result<u32> {
    let offset = addr.checked_sub(ARC_CSM_BASE).ok_or(EIO)?;
    if offset > ARC_CSM_SIZE - 4 {
        return Err(EIO);
    }
    Ok(offset)
}

/// The ARC tile as the driver reaches it (see the module's documentation).
pub(crate) struct Exchange<'a> {
    memory: &'a CardMemory,
    layout: &'a Layout,
    tile: ArcTile,
}

impl<'a> Exchange<'a> {
    /// The ARC tile of a card whose BARs are `memory` and whose windows
    /// are `layout` (see the module's documentation). The message queue's
    /// pointers are src/smc.rs's to move.
    pub(crate) fn new(memory: &'a CardMemory, layout: &'a Layout) -> Self {
        Self {
            memory,
            layout,
            tile: layout.family.chip().arc,
        }
    }

    /// Where the firmware publishes its telemetry: the ARC addresses of its
    /// tag table and of its values (Wormhole: reset unit `+0x1D0`/`+0x1D4`;
    /// Blackhole: `SCRATCH_RAM[13]`/`[12]`; tt-kmd 2.10 `telemetry.c`).
    pub(crate) fn telemetry_pointers(&self) -> Result<(u32, u32)> {
        let reset_unit = self.tile.reset_unit();
        let table = reset_unit + self.tile.telemetry_ptr;
        let values = reset_unit + self.tile.telemetry_data;
        Ok((self.read(table)?, self.read(values)?))
    }

    /// Runs `f` with one `block` of the ARC tile: on Wormhole straight
    /// through BAR0, on Blackhole through the kernel's window aimed once at
    /// the block for the whole run (and held meanwhile: keep runs short).
    fn run<R>(&self, block: Block, f: impl FnOnce(&ArcRun<'_>) -> Result<R>) -> Result<R> {
        let (noc, len) = match block {
            Block::Apb => (self.tile.apb, ARC_APB_SIZE),
            Block::Csm => (self.tile.csm, u64::from(ARC_CSM_SIZE)),
        };
        match self.tile.bar0 {
            Some((apb, csm)) => f(&ArcRun::Bar0 {
                memory: self.memory,
                noc,
                bar0: if block == Block::Apb { apb } else { csm },
                len,
            }),
            None => {
                self.memory
                    .kernel_noc_run(self.layout, (self.tile.x, self.tile.y, 0), noc, |run| {
                        f(&ArcRun::Window(run))
                    })
            }
        }
    }

    /// Runs `f` with the ARC's CSM (see [`Exchange::run`]).
    pub(crate) fn csm<R>(&self, f: impl FnOnce(&Csm<'_>) -> Result<R>) -> Result<R> {
        let noc = self.tile.csm;
        self.run(Block::Csm, |run| f(&Csm { run, noc }))
    }

    /// Reads one register of the APB block.
    fn read(&self, addr: u64) -> Result<u32> {
        self.run(Block::Apb, |run| run.read(addr))
    }

    /// Writes one register of the APB block and reads it back: it has
    /// reached the chip when this returns.
    fn write(&self, addr: u64, value: u32) -> Result {
        self.run(Block::Apb, |run| {
            run.write(addr, value)?;
            run.read(addr)?;
            Ok(())
        })
    }

    pub(crate) fn csm_read(&self, addr: u32) -> Result<u32> {
        self.csm(|csm| csm.read(addr))
    }

    /// The NOC address of reset unit register `T`.
    fn register<T: FixedRegister>(&self) -> u64 {
        self.tile.reset_unit() + reset_unit_offset::<T>()
    }

    /// The NOC address of the register that says whether the firmware
    /// takes messages, and what it says.
    fn message_ready(&self) -> (u64, fn(u32) -> bool) {
        let ready = self.tile.message_ready;
        (self.tile.reset_unit() + ready.register, ready.is_ready)
    }

    /// The register where the firmware publishes the ARC address of its
    /// queue control block (Wormhole `ARC_MSG_QCB_PTR`, Blackhole
    /// `SCRATCH_RAM[11]`).
    fn control_block_register(&self) -> u64 {
        self.tile.reset_unit() + self.tile.msg_qcb_ptr
    }

    /// Finds the firmware's queue without waiting: `EAGAIN` while the
    /// firmware is not ready for messages (it is booting), `EOPNOTSUPP`
    /// for firmware that publishes no queue, `EIO` when what it publishes
    /// makes no sense (or the card reads all ones).
    ///
    /// The caller keeps what this found ([`Queue`]) for the following
    /// messages, and checks it before it writes a request there
    /// ([`Exchange::control_block_pointer`], [`Queue::control_block_unchanged`]):
    /// a firmware that rebooted may publish its queue elsewhere.
    pub(crate) fn locate_queue(&self) -> Result<Queue> {
        let family = self.layout.family;
        let control_block = self.run(Block::Apb, |apb| {
            let (ready, is_ready) = self.message_ready();
            match apb.read(ready)? {
                u32::MAX => return Err(EIO),
                status if !is_ready(status) => return Err(EAGAIN),
                _ => {}
            }
            // Wormhole: 0 on firmware without the queue.
            apb.read(self.control_block_register())
        })?;
        // Blackhole firmware always publishes one; a 0 there is treated as
        // Wormhole's "no queue" too rather than read as an address.
        if control_block == 0 {
            return Err(EOPNOTSUPP);
        }
        let words = self.csm(|csm| {
            Ok([
                csm.read(control_block)?,
                csm.read(control_block.checked_add(CONTROL_BLOCK_INFO).ok_or(EIO)?)?,
            ])
        })?;
        Queue::new(family, control_block, words)
    }

    /// The queue control block's address as the firmware publishes it now:
    /// one read of the APB block.
    pub(crate) fn control_block_pointer(&self) -> Result<u32> {
        self.read(self.control_block_register())
    }

    /// Sends Wormhole mailbox message `id` with `args` and waits up to
    /// `answer_within` for the firmware's exit code (`None`: does not wait,
    /// for a message it acts on without answering). `EIO` when the ARC is
    /// not running or does not know the message, `ETIMEDOUT` without an
    /// answer in time.
    pub(crate) fn mailbox(
        &self,
        id: u8,
        args: (u16, u16),
        answer_within: Option<Delta>,
    ) -> Result<Option<u16>> {
        let (ready, is_ready) = self.message_ready();
        if !is_ready(self.read(ready)?) {
            return Err(EIO);
        }
        let message = self.register::<WH_MAILBOX_MESSAGE_REG>();
        self.write(
            self.register::<WH_MAILBOX_ARGS_REG>(),
            WH_MAILBOX_ARGS_REG::zeroed()
                .with_arg0(args.0)
                .with_arg1(args.1)
                .into(),
        )?;
        self.write(
            message,
            WH_MAILBOX_MESSAGE_REG::zeroed()
                .with_message(WH_FW_MESSAGE_PRESENT | u16::from(id))
                .into(),
        )?;
        self.ring()?;
        let Some(timeout) = answer_within else {
            return Ok(None);
        };
        let answer = read_poll_timeout(
            || self.read(message),
            |v| *v == u32::MAX || WH_MAILBOX_MESSAGE_REG::from(*v).message() == u16::from(id),
            POLL_INTERVAL,
            timeout,
        )?;
        if answer == u32::MAX {
            return Err(EIO);
        }
        Ok(Some(WH_MAILBOX_MESSAGE_REG::from(answer).exit_code()))
    }

    /// Rings the firmware: it looks at its mailboxes and queues. Posted:
    /// the caller's next read of the tile makes sure it has landed.
    pub(crate) fn ring(&self) -> Result {
        self.run(Block::Apb, |apb| match self.tile.doorbell {
            Doorbell::MiscControlIrq0 => {
                let misc_cntl = self.register::<WH_ARC_MISC_CNTL_REG>();
                let value = WH_ARC_MISC_CNTL_REG::from(apb.read(misc_cntl)?);
                apb.write(misc_cntl, value.with_irq0(true).into())
            }
            // A 0 pushed into the MSI catcher's FIFO; a read would pop it.
            Doorbell::MsiFifo { apb_offset } => apb.write(self.tile.apb + apb_offset, 0),
        })
    }
}

/// Where the firmware's message queue is, as found by
/// [`Exchange::locate_queue`], and the host's two pointers as the driver
/// last left them: kept from one message to the next while the queue
/// stays where it was found.
pub(crate) struct Queue {
    /// The ARC address of the control block and its two words as read:
    /// the queue's place as published and its entry count (low byte).
    control_block: u32,
    words: [u32; 2],
    /// The ARC address of the queue's header.
    base: u32,
    entries: NonZeroU32,
    /// The request write pointer and the response read pointer as the
    /// driver last wrote them, once it has read or written them.
    host: Option<(u32, u32)>,
}

/// The four pointers of a queue's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) request_wptr: u32,
    pub(crate) response_rptr: u32,
    pub(crate) request_rptr: u32,
    pub(crate) response_wptr: u32,
}

impl Queue {
    /// The queue the control block at `control_block` describes with
    /// `words`: `EOPNOTSUPP` with no entries, `EIO` when the queue would
    /// not fit in CSM.
    fn new(family: Family, control_block: u32, words: [u32; 2]) -> Result<Self> {
        let base = match family.chip().arc.queue_address {
            QueueAddress::CsmOffset => words[0].checked_add(ARC_CSM_BASE).ok_or(EIO)?,
            QueueAddress::ArcAddress => words[0],
        };
        let entries = NonZeroU32::new(words[1] & 0xFF).ok_or(EOPNOTSUPP)?;
        let bytes = HEADER_BYTES + 2 * entries.get() * SLOT_BYTES;
        csm_offset(base)?;
        csm_offset(base.checked_add(bytes - 4).ok_or(EIO)?)?;
        Ok(Queue {
            control_block,
            words,
            base,
            entries,
            host: None,
        })
    }

    /// Pointers count to twice the entry count, so that a full queue and an
    /// empty one differ.
    fn wrap(&self) -> NonZeroU32 {
        self.entries.saturating_mul(TWO)
    }

    /// How far `wptr` is ahead of `rptr`, both taken modulo the wrap
    /// (right for any entry count, where a plain wrapping subtraction is
    /// right only for powers of two).
    fn occupied(&self, wptr: u32, rptr: u32) -> u32 {
        let wrap = self.wrap();
        (wptr % wrap + (wrap.get() - rptr % wrap)) % wrap
    }

    fn advance(&self, ptr: u32) -> u32 {
        ptr.wrapping_add(1) % self.wrap()
    }

    /// Whether the control block's address, as the firmware publishes it
    /// now, is the one the queue was found through.
    pub(crate) fn control_block_is(&self, control_block: u32) -> bool {
        self.control_block == control_block
    }

    /// Whether the control block still says what it said when the queue
    /// was found: two reads of CSM.
    pub(crate) fn control_block_unchanged(&self, csm: &Csm<'_>) -> Result<bool> {
        let words = [
            csm.read(self.control_block)?,
            csm.read(
                self.control_block
                    .checked_add(CONTROL_BLOCK_INFO)
                    .ok_or(EIO)?,
            )?,
        ];
        Ok(words == self.words)
    }

    /// Reads a pointer of the header; all ones (a card that is gone) is
    /// `EIO`.
    fn pointer(&self, csm: &Csm<'_>, offset: u32) -> Result<u32> {
        match csm.read(self.base + offset)? {
            u32::MAX => Err(EIO),
            value => Ok(value),
        }
    }

    /// Whether `header` can be this queue's as the driver left it: every
    /// pointer below the wrap, the host's two as the driver last wrote them
    /// (once it has), no more requests outstanding than entries, and the
    /// firmware no further than the host (it cannot take a request not
    /// written, nor answer one not taken). A firmware that rebooted (CSM
    /// cleared) or moved its queue fails it, unless the header reads just
    /// as the driver left it, and then writing there is right.
    pub(crate) fn is_consistent(&self, header: &Header) -> bool {
        self.consistent(header, false)
    }

    /// [`Queue::is_consistent`], or with `requests_stale` when the
    /// firmware's request read pointer in `header` may be older than its
    /// response write pointer (it may have taken more since): then only
    /// that it answered no more than it owes.
    fn consistent(&self, header: &Header, requests_stale: bool) -> bool {
        let wrap = self.wrap().get();
        let h = header;
        let pointers = [
            h.request_wptr,
            h.response_rptr,
            h.request_rptr,
            h.response_wptr,
        ];
        if pointers.iter().any(|&p| p >= wrap) {
            return false;
        }
        if self
            .host
            .is_some_and(|host| host != (h.request_wptr, h.response_rptr))
        {
            return false;
        }
        let entries = self.entries.get();
        let owed = self.occupied(h.request_wptr, h.response_rptr);
        let untaken = self.occupied(h.request_wptr, h.request_rptr);
        let answered = self.occupied(h.response_wptr, h.response_rptr);
        if requests_stale {
            return owed <= entries && answered <= owed;
        }
        owed <= entries && untaken <= owed && answered <= owed - untaken
    }

    /// Reads the header: `ESTALE` when it is not consistent with what the
    /// driver left ([`Queue::is_consistent`]: the queue must be looked up
    /// again), `EIO` when it cannot be read. From the first read on, the
    /// host's pointers are the ones read.
    pub(crate) fn header(&mut self, csm: &Csm<'_>) -> Result<Header> {
        let header = Header {
            request_wptr: self.pointer(csm, REQUEST_WPTR)?,
            response_rptr: self.pointer(csm, RESPONSE_RPTR)?,
            request_rptr: self.pointer(csm, REQUEST_RPTR)?,
            response_wptr: self.pointer(csm, RESPONSE_WPTR)?,
        };
        if !self.is_consistent(&header) {
            return Err(ESTALE);
        }
        self.host = Some((header.request_wptr, header.response_rptr));
        Ok(header)
    }

    /// Reads the firmware's response write pointer again (one read):
    /// `ESTALE` if it makes no sense with the rest of `header`, whose
    /// request read pointer may be older.
    pub(crate) fn refresh_responses(&self, csm: &Csm<'_>, header: &mut Header) -> Result {
        header.response_wptr = self.pointer(csm, RESPONSE_WPTR)?;
        if !self.consistent(header, true) {
            return Err(ESTALE);
        }
        Ok(())
    }

    /// Reads the firmware's request read pointer again (one read), as
    /// [`Queue::refresh_responses`].
    pub(crate) fn refresh_requests(&self, csm: &Csm<'_>, header: &mut Header) -> Result {
        header.request_rptr = self.pointer(csm, REQUEST_RPTR)?;
        if !self.is_consistent(header) {
            return Err(ESTALE);
        }
        Ok(())
    }

    /// How many requests the host put in whose responses it has not taken
    /// out yet: requests and responses advance one for one, so this is what
    /// the firmware owes (0 after it rebooted: a reset clears CSM).
    pub(crate) fn owed(&self, header: &Header) -> u32 {
        self.occupied(header.request_wptr, header.response_rptr)
    }

    /// How many responses the firmware has written that the host has not
    /// taken out.
    pub(crate) fn answered(&self, header: &Header) -> u32 {
        self.occupied(header.response_wptr, header.response_rptr)
    }

    /// Whether a request slot is free.
    pub(crate) fn has_room(&self, header: &Header) -> bool {
        self.occupied(header.request_wptr, header.request_rptr) < self.entries.get()
    }

    /// Puts `request` in the free slot [`Queue::has_room`] found and moves
    /// the write pointer on, then reads it back so that the request has
    /// landed in CSM before the caller rings the firmware
    /// ([`Exchange::ring`]), whose doorbell takes another path.
    pub(crate) fn push(
        &mut self,
        csm: &Csm<'_>,
        header: &mut Header,
        request: &ArcMessage,
    ) -> Result {
        let wptr = header.request_wptr;
        let slot = self.base + HEADER_BYTES + (wptr % self.entries) * SLOT_BYTES;
        for (i, word) in (0u32..).zip(request.iter()) {
            csm.write(slot + 4 * i, *word)?;
        }
        let next = self.advance(wptr);
        csm.write(self.base + REQUEST_WPTR, next)?;
        // Whatever happens next, this is what the driver wrote.
        header.request_wptr = next;
        self.host = Some((next, header.response_rptr));
        if self.pointer(csm, REQUEST_WPTR)? != next {
            return Err(EIO);
        }
        Ok(())
    }

    /// Takes the oldest response out of the queue, which
    /// [`Queue::answered`] says is there.
    pub(crate) fn pop(&mut self, csm: &Csm<'_>, header: &mut Header) -> Result<ArcMessage> {
        let rptr = header.response_rptr;
        let entries = self.entries;
        let slot = self.base + HEADER_BYTES + (entries.get() + rptr % entries) * SLOT_BYTES;
        let mut response = [0u32; 8];
        for (i, word) in (0u32..).zip(response.iter_mut()) {
            *word = csm.read(slot + 4 * i)?;
        }
        let next = self.advance(rptr);
        csm.write(self.base + RESPONSE_RPTR, next)?;
        header.response_rptr = next;
        self.host = Some((header.request_wptr, next));
        Ok(response)
    }
}

impl ArcMessenger {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            exchange <- new_mutex!(()),
        })
    }

    /// Runs `f`, a whole mailbox exchange, with no other in between.
    pub(crate) fn exchange<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let _exchange = self.exchange.lock();
        f()
    }
}

#[cfg(tt_kunit)]
#[path = "../tests/kunit/arc_tests.rs"]
mod kunit;

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
//! firmware publishes. Every access goes through the kernel's own TLB
//! window to the ARC tile, which reaches the same registers on both chips
//! (tt-kmd reaches Wormhole's through BAR4 instead).
//!
//! This file knows the registers and the queue's layout: finding the
//! queue, putting one request in, taking one response out, each without
//! waiting. Who sends what and when, the files' SMC_MSG messages and the
//! driver's own alike, is src/smc.rs's.
//!
//! Where each fact comes from (tt-kmd 2.10): the queue layout and protocol
//! in `msgqueue.c` / `msgqueue.h`; Wormhole's ready check, control block
//! pointer and doorbell in `wormhole.c` `send_arc_message`; Blackhole's in
//! `blackhole.c` `send_arc_message`; CSM bounds in `telemetry.h`.

use crate::{
    mapping::CardMemory,
    smc::SmcQueue,
    tlb::{
        Family,
        Layout, //
    },
};
use core::num::NonZeroU32;
use kernel::{
    io::poll::read_poll_timeout,
    new_mutex,
    prelude::*,
    sync::Mutex,
    time::Delta, //
};

/// The ARC's CSM, as ARC addresses (`ARC_CSM_BASE`, 512 KiB).
const CSM_BASE: u32 = 0x1000_0000;
const CSM_SIZE: u32 = 512 << 10;

/// Wormhole `SCRATCH[0]` holds a post code starting `0xC0DE` once the ARC's
/// L2 runs and can take messages.
const WH_POST_CODE_PREFIX: u32 = 0xC0DE_0000;
/// Blackhole `BOOT_STATUS0` bit 0: the message queues are ready.
const BH_MSG_QUEUE_READY: u32 = 1 << 0;
/// `ARC_MISC_CNTL` IRQ0: rings the firmware.
const ARC_MISC_CNTL_IRQ0: u32 = 1 << 16;
/// Wormhole mailbox: a message id in `SCRATCH[5]` is `0xAA00 | id`; the
/// firmware answers `id | exit_code << 16`, or all ones for an id it does
/// not know (tt-kmd 2.10 `wormhole_send_arc_fw_message_with_args`).
const WH_MESSAGE_PRESENT: u32 = 0xAA00;
const WH_MAILBOX_ARGS: u64 = 3;
const WH_MAILBOX_MESSAGE: u64 = 5;

/// Between two looks at the mailbox (tt-kmd sleeps 100-200 µs).
const POLL_INTERVAL: Delta = Delta::from_micros(100);

/// Queue header: host-written request write pointer and response read
/// pointer, firmware-written request read pointer and response write
/// pointer; slots after the 32 bytes.
const REQUEST_WPTR: u32 = 0x00;
const RESPONSE_RPTR: u32 = 0x04;
const REQUEST_RPTR: u32 = 0x10;
const RESPONSE_WPTR: u32 = 0x14;
const HEADER_BYTES: u32 = 32;
const TWO: NonZeroU32 = NonZeroU32::MIN.saturating_add(1);
const SLOT_BYTES: u32 = 32;

/// One queue message or answer: a header word and seven payload words.
pub(crate) type ArcMessage = [u32; 8];

/// Where the ARC tile's registers are, as NOC addresses of that tile.
struct ArcTile {
    /// NOC0 coordinates of the ARC tile (tt-umd `ARC_CORES_NOC0`).
    x: u16,
    y: u16,
    /// The ARC's APB peripherals: the reset unit (home of the scratch
    /// registers) at +0x3_0000, Blackhole's MSI catcher at +0xB_0000.
    apb: u64,
    /// The NOC address of ARC address [`CSM_BASE`].
    csm: u64,
}

impl ArcTile {
    fn reset_unit(&self) -> u64 {
        self.apb + 0x3_0000
    }

    fn of(family: Family) -> Self {
        match family {
            Family::Wormhole => Self {
                x: 0,
                y: 10,
                apb: 0x8_8000_0000,
                csm: 0x8_1000_0000,
            },
            Family::Blackhole => Self {
                x: 8,
                y: 0,
                apb: 0x8000_0000,
                csm: u64::from(CSM_BASE),
            },
        }
    }
}

/// A card's Wormhole scratch-register mailbox, one message at a time (the
/// message queue is [`SmcQueue`]'s).
#[pin_data]
pub(crate) struct ArcMessenger {
    /// Held for a whole mailbox exchange.
    #[pin]
    exchange: Mutex<()>,
}

/// The ARC tile as seen through the kernel's window, for one exchange.
pub(crate) struct Exchange<'a> {
    memory: &'a CardMemory,
    layout: &'a Layout,
    tile: ArcTile,
}

impl Exchange<'_> {
    fn read(&self, addr: u64) -> Result<u32> {
        self.memory
            .kernel_noc_read32(self.layout, (self.tile.x, self.tile.y, 0), addr)
    }

    fn write(&self, addr: u64, value: u32) -> Result {
        self.memory
            .kernel_noc_write32(self.layout, (self.tile.x, self.tile.y, 0), addr, value)
    }

    /// A word of CSM at ARC address `addr`: `EIO` outside CSM, where a bad
    /// pointer from the firmware would otherwise send the driver.
    fn csm_addr(&self, addr: u32) -> Result<u64> {
        let offset = addr.checked_sub(CSM_BASE).ok_or(EIO)?;
        if offset > CSM_SIZE - 4 {
            return Err(EIO);
        }
        Ok(self.tile.csm + u64::from(offset))
    }

    fn csm_read(&self, addr: u32) -> Result<u32> {
        self.read(self.csm_addr(addr)?)
    }

    fn csm_write(&self, addr: u32, value: u32) -> Result {
        self.write(self.csm_addr(addr)?, value)
    }

    fn scratch(&self, family: Family, n: u64) -> u64 {
        match family {
            Family::Wormhole => self.tile.reset_unit() + 0x60 + 4 * n,
            Family::Blackhole => self.tile.reset_unit() + 0x400 + 4 * n,
        }
    }

    /// Finds the firmware's queue without waiting: `EAGAIN` while the
    /// firmware is not ready for messages (it is booting), `EOPNOTSUPP`
    /// for firmware that publishes no queue, `EIO` when what it publishes
    /// makes no sense (or the card reads all ones).
    ///
    /// Looked up again for every message: a firmware that rebooted (a
    /// reset) may publish its queue elsewhere.
    pub(crate) fn locate_queue(&self) -> Result<Queue> {
        let family = self.layout.family;
        let control_block = match family {
            Family::Wormhole => {
                let post = self.read(self.scratch(family, 0))?;
                if post == u32::MAX {
                    return Err(EIO);
                }
                if post & 0xFFFF_0000 != WH_POST_CODE_PREFIX {
                    return Err(EAGAIN);
                }
                // `ARC_MSG_QCB_PTR`: 0 on firmware without the queue.
                self.read(self.tile.reset_unit() + 0x1D8)?
            }
            Family::Blackhole => {
                let status = self.read(self.scratch(family, 2))?;
                if status == u32::MAX {
                    return Err(EIO);
                }
                if status & BH_MSG_QUEUE_READY == 0 {
                    return Err(EAGAIN);
                }
                self.read(self.scratch(family, 11))?
            }
        };
        // Blackhole firmware always publishes one; a 0 there is treated as
        // Wormhole's "no queue" too rather than read as an address.
        if control_block == 0 {
            return Err(EOPNOTSUPP);
        }
        let base = self.csm_read(control_block)?;
        // Wormhole publishes the queue as an offset into CSM.
        let base = match family {
            Family::Wormhole => base.checked_add(CSM_BASE).ok_or(EIO)?,
            Family::Blackhole => base,
        };
        let entries = self.csm_read(control_block.checked_add(4).ok_or(EIO)?)? & 0xFF;
        let entries = NonZeroU32::new(entries).ok_or(EOPNOTSUPP)?;
        let bytes = HEADER_BYTES + 2 * entries.get() * SLOT_BYTES;
        self.csm_addr(base.checked_add(bytes - 4).ok_or(EIO)?)?;
        Ok(Queue { base, entries })
    }

    /// Reads a pointer of the queue's header; all ones (a card that is
    /// gone) is `EIO`.
    fn pointer(&self, queue: &Queue, offset: u32) -> Result<u32> {
        match self.csm_read(queue.base + offset)? {
            u32::MAX => Err(EIO),
            value => Ok(value),
        }
    }

    /// Puts `request` in the queue and rings the firmware, unless the
    /// queue is full: whether it went in.
    pub(crate) fn try_push(&self, queue: &Queue, request: &ArcMessage) -> Result<bool> {
        let wptr = self.pointer(queue, REQUEST_WPTR)?;
        let rptr = self.pointer(queue, REQUEST_RPTR)?;
        if queue.occupied(wptr, rptr) >= queue.entries.get() {
            return Ok(false);
        }
        let slot = queue.base + HEADER_BYTES + (wptr % queue.entries) * SLOT_BYTES;
        for (i, word) in (0u32..).zip(request.iter()) {
            self.csm_write(slot + 4 * i, *word)?;
        }
        self.csm_write(queue.base + REQUEST_WPTR, queue.advance(wptr))?;
        self.ring()?;
        Ok(true)
    }

    /// How many requests the host put in the queue whose responses it has
    /// not taken out yet: requests and responses advance one for one, so
    /// this is what the firmware owes (0 after it rebooted: a reset clears
    /// CSM).
    pub(crate) fn owed(&self, queue: &Queue) -> Result<u32> {
        let wptr = self.pointer(queue, REQUEST_WPTR)?;
        let rptr = self.pointer(queue, RESPONSE_RPTR)?;
        Ok(queue.occupied(wptr, rptr))
    }

    /// Takes the oldest response out of the queue, if the firmware has
    /// written one.
    pub(crate) fn try_pop(&self, queue: &Queue) -> Result<Option<ArcMessage>> {
        let rptr = self.pointer(queue, RESPONSE_RPTR)?;
        let wptr = self.pointer(queue, RESPONSE_WPTR)?;
        if queue.occupied(wptr, rptr) == 0 {
            return Ok(None);
        }
        let entries = queue.entries;
        let slot = queue.base + HEADER_BYTES + (entries.get() + rptr % entries) * SLOT_BYTES;
        let mut response = [0u32; 8];
        for (i, word) in (0u32..).zip(response.iter_mut()) {
            *word = self.csm_read(slot + 4 * i)?;
        }
        self.csm_write(queue.base + RESPONSE_RPTR, queue.advance(rptr))?;
        Ok(Some(response))
    }

    /// Sends Wormhole mailbox message `id` with `args` and waits up to
    /// `answer_within` for the firmware's exit code (`None`: does not wait,
    /// for a message it acts on without answering). `EIO` when the ARC is
    /// not running or does not know the message, `ETIMEDOUT` without an
    /// answer in time.
    fn mailbox(
        &self,
        id: u8,
        args: (u16, u16),
        answer_within: Option<Delta>,
    ) -> Result<Option<u16>> {
        let family = Family::Wormhole;
        let post = self.read(self.scratch(family, 0))?;
        if post & 0xFFFF_0000 != WH_POST_CODE_PREFIX {
            return Err(EIO);
        }
        let message = self.scratch(family, WH_MAILBOX_MESSAGE);
        self.write(
            self.scratch(family, WH_MAILBOX_ARGS),
            u32::from(args.0) | u32::from(args.1) << 16,
        )?;
        self.write(message, WH_MESSAGE_PRESENT | u32::from(id))?;
        self.ring()?;
        let Some(timeout) = answer_within else {
            return Ok(None);
        };
        let answer = read_poll_timeout(
            || self.read(message),
            |v| *v == u32::MAX || *v & 0xFFFF == u32::from(id),
            POLL_INTERVAL,
            timeout,
        )?;
        if answer == u32::MAX {
            return Err(EIO);
        }
        Ok(Some((answer >> 16) as u16))
    }

    fn ring(&self) -> Result {
        match self.layout.family {
            Family::Wormhole => {
                let misc_cntl = self.tile.reset_unit() + 0x100;
                let value = self.read(misc_cntl)?;
                self.write(misc_cntl, value | ARC_MISC_CNTL_IRQ0)
            }
            // A 0 pushed into the MSI catcher's FIFO; a read would pop it.
            Family::Blackhole => self.memory.kernel_noc_write32_posted(
                self.layout,
                (self.tile.x, self.tile.y, 0),
                self.tile.apb + 0xB_0000,
                0,
            ),
        }
    }
}

/// Where the firmware's message queue is: the ARC address of its header and
/// its entry count.
pub(crate) struct Queue {
    base: u32,
    entries: NonZeroU32,
}

impl Queue {
    /// Pointers count to twice the entry count, so that a full queue and an
    /// empty one differ.
    fn wrap(&self) -> NonZeroU32 {
        self.entries.saturating_mul(TWO)
    }

    fn occupied(&self, wptr: u32, rptr: u32) -> u32 {
        wptr.wrapping_sub(rptr) % self.wrap()
    }

    fn advance(&self, ptr: u32) -> u32 {
        ptr.wrapping_add(1) % self.wrap()
    }
}

impl ArcMessenger {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            exchange <- new_mutex!(()),
        })
    }
}

/// A card's ARC firmware, as the driver talks to it: one message at a
/// time ([`ArcMessenger`]) through the kernel's window of the card.
pub(crate) struct Firmware<'a> {
    pub(crate) messenger: &'a ArcMessenger,
    /// The owner of the message queue, which the driver's own messages
    /// share with the files' (src/smc.rs).
    pub(crate) queue: &'a SmcQueue,
    pub(crate) memory: &'a CardMemory,
    pub(crate) layout: &'a Layout,
    /// The chip was reset and POST_RESET has not come yet: what the
    /// firmware is up to is not known (src/reset.rs).
    pub(crate) in_reset: bool,
}

impl Firmware<'_> {
    pub(crate) fn family(&self) -> Family {
        self.layout.family
    }

    fn exchange<R>(&self, f: impl FnOnce(&Exchange<'_>) -> Result<R>) -> Result<R> {
        let _exchange = self.messenger.exchange.lock();
        f(&self.reader())
    }

    /// Sends Wormhole mailbox message `id` (see [`Exchange::mailbox`]): the
    /// exit code, or `None` when `answer_within` is `None`. `EOPNOTSUPP` on
    /// Blackhole, which has no such mailbox.
    pub(crate) fn wh_mailbox(
        &self,
        id: u8,
        args: (u16, u16),
        answer_within: Option<Delta>,
    ) -> Result<Option<u16>> {
        if self.family() != Family::Wormhole {
            return Err(EOPNOTSUPP);
        }
        self.exchange(|e| e.mailbox(id, args, answer_within))
    }

    /// Reads the word at ARC address `addr` of CSM, where the firmware
    /// publishes its telemetry: a plain memory read, taken by no exchange.
    /// `EIO` outside CSM.
    pub(crate) fn read_csm(&self, addr: u32) -> Result<u32> {
        self.reader().csm_read(addr)
    }

    /// Where the firmware publishes its telemetry: the ARC addresses of its
    /// tag table and of its values (Wormhole: reset unit `+0x1D0`/`+0x1D4`;
    /// Blackhole: `SCRATCH_RAM[13]`/`[12]`; tt-kmd 2.10 `telemetry.c`).
    pub(crate) fn telemetry_pointers(&self) -> Result<(u32, u32)> {
        let reader = self.reader();
        let reset_unit = reader.tile.reset_unit();
        let (table, values) = match self.family() {
            Family::Wormhole => (reset_unit + 0x1D0, reset_unit + 0x1D4),
            Family::Blackhole => (reset_unit + 0x400 + 4 * 13, reset_unit + 0x400 + 4 * 12),
        };
        Ok((reader.read(table)?, reader.read(values)?))
    }

    /// The ARC tile through the kernel's window. The message queue's
    /// pointers are [`SmcQueue`]'s to move.
    pub(crate) fn reader(&self) -> Exchange<'_> {
        Exchange {
            memory: self.memory,
            layout: self.layout,
            tile: ArcTile::of(self.layout.family),
        }
    }

    /// Sends `request` through the message queue, in turn with the files'
    /// messages, and returns the firmware's answer (see [`SmcQueue::send`]).
    pub(crate) fn send(&self, request: &ArcMessage) -> Result<ArcMessage> {
        self.queue.send(self, request)
    }
}

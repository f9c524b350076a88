// SPDX-License-Identifier: GPL-2.0

//! Open files of `/dev/tenstorrent/N` and their ioctls.
//!
//! An open file description is a lock owner: locks are released when the
//! last reference to it goes away (close, exit, a crash, SIGKILL), before
//! that last `close()` returns.

use crate::{
    arbiter::{
        bit,
        AcquireError,
        LockMask,
        Owner,
        Reentry,
        Requester,
        LOCK_COUNT, //
    },
    card::Card,
    dma::{
        self,
        ALLOCATE_DMA_BUF_NOC_DMA,
        MAX_DMA_BUF_SIZE_LOG2, //
    },
    mapping::{
        self,
        CardMemory,
        Target, //
    },
    noc_cleanup,
    noc_io::NocAccess,
    power::PowerVote,
    rust_ext::{
        chrdev::{
            poll_events,
            CharDevice,
            FileOperations,
            PollTable, //
        },
        mm::{
            vma_offset,
            FaultResult,
            SharedMapping,
            VmFault, //
        },
        time::monotonic_from_caller, //
    },
    smc::Outcome,
    tlb::{
        TlbError,
        MAX_WINDOWS, //
    },
    tlb_regs::NocTlbConfig,
    uapi::{
        self,
        AllocateDmaBufIn,
        AllocateDmaBufOut,
        AllocateTlbIn,
        AllocateTlbOut,
        ConfigureTlbIn,
        DeviceInfoOut,
        DriverInfoOut,
        ExportTlbDmabuf,
        FreeTlbIn,
        LockAcquire,
        LockAcquireSet,
        LockCtlIn,
        LockCtlOut,
        LockQuery,
        LockRelease,
        MapPeerBarIn,
        MapPeerBarOut,
        Mapping,
        NocIo,
        PinPagesIn,
        PinPagesOutExtended,
        QueryMappingsIn,
        ResetDeviceIn,
        ResetDeviceOut,
        SetNocCleanup,
        SetPowerState,
        SmcMsg,
        SmcWait,
        TlbAllocate,
        UnpinPagesIn, //
    },
    wait::Wait,
    VERSION, //
};
use kernel::{
    fs::{
        file::flags,
        File, //
    },
    ioctl::{
        _IOC_DIR,
        _IOC_NR,
        _IOC_SIZE,
        _IOC_TYPE, //
    },
    mm::virt::VmaNew,
    prelude::*,
    seq_file::SeqFile,
    sync::Arc,
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    }, //
    uapi::{
        _IOC_READ,
        _IOC_WRITE, //
    },
};

/// Largest `argsz` accepted: the bytes past the kernel's own struct must be
/// checked for zero, and no struct of ours will grow to a page.
const MAX_ARGSZ: u32 = 4096;

/// The private data of an open file.
pub(crate) struct OpenFile {
    card: Arc<Card>,
    owner: Owner,
    /// Opened with `O_EXCL`: the card's only open file.
    exclusive: bool,
}

impl FileOperations for Card {
    type Ptr = KBox<OpenFile>;

    fn open(card: &Arc<Card>, file: &File) -> Result<KBox<OpenFile>> {
        if card.is_gone() {
            return Err(ENODEV);
        }
        let exclusive = file.flags() & flags::O_EXCL != 0;
        let nonblock = file.flags() & flags::O_NONBLOCK != 0;
        let append = file.flags() & flags::O_APPEND != 0;
        card.gate.enter(exclusive, nonblock)?;
        let admitted = (|| {
            let owner = card.arbiter.new_owner()?;
            let id = owner.id();
            let open = KBox::new(
                OpenFile {
                    card: card.clone(),
                    owner,
                    exclusive,
                },
                GFP_KERNEL,
            )?;
            card.add_opener(&open.owner)?;
            if let Err(e) = card
                .power
                .open(id, append, &card.firmware(), &|| card.kick_smc())
            {
                card.remove_opener(id);
                return Err(e);
            }
            Ok(open)
        })();
        if admitted.is_err() {
            card.gate.leave(exclusive);
        }
        admitted
    }

    fn release(open: KBox<OpenFile>, _file: &File) {
        let card = &open.card;
        // Its firmware message, if any, is nobody's any more.
        card.smc.abandon(open.owner.id());
        // First, before anything of the file goes (tt-kmd 2.10's order):
        // the next holder of its locks finds the chip cleaned up.
        if let Some(c) = card.noc_cleanups.take(open.owner.id()) {
            let tile = (c.x, c.y, c.noc);
            // Nothing to do once the card is gone (ENODEV).
            let _ = card
                .memory
                .kernel_noc_write32(card.tlb.layout(), tile, c.addr, c.data);
        }
        card.dma.release(&card.memory, open.owner.id());
        card.arbiter.release_all(&open.owner);
        open.card
            .tlb
            .free_all_revoking(open.owner.id(), &|id| open.card.revoke_freed_window(id));
        open.card.remove_opener(open.owner.id());
        card.power.release(
            open.owner.id(),
            &card.firmware(),
            &|| card.kick_smc(),
            |grace| card.schedule_powerdown(grace),
        );
        // Last: an opener waiting for the card finds it as closed as it is.
        open.card.gate.leave(open.exclusive);
    }

    fn ioctl(open: &OpenFile, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let command = Command::decode(cmd).ok_or(ENOTTY)?;
        if open.card.refuses(open.owner.id()) {
            return Err(ENODEV);
        }
        // After a reset of the chip, until POST_RESET, the card only says
        // what it is and takes resets (tt-kmd 2.10).
        let answers_before_post_reset = matches!(
            command,
            Command::GetDeviceInfo | Command::GetDriverInfo | Command::ResetDevice
        );
        if open.card.function.needs_post_reset() && !answers_before_post_reset {
            return Err(ENODEV);
        }
        match command {
            Command::GetDeviceInfo => open.get_device_info(arg),
            Command::GetDriverInfo => open.get_driver_info(arg),
            Command::LockCtl => open.lock_ctl(arg),
            Command::Acquire => open.acquire(arg),
            Command::AcquireSet => open.acquire_set(arg),
            Command::Release => open.release(arg),
            Command::Query => open.query(arg),
            Command::AllocateTlb => open.allocate_tlb(arg),
            Command::FreeTlb => open.free_tlb(arg),
            Command::TlbAllocate => open.tlb_allocate(arg),
            Command::QueryMappings => open.query_mappings(arg),
            Command::ConfigureTlb => open.configure_tlb(arg),
            Command::AllocateDmaBuf => open.allocate_dma_buf(arg),
            // Buffers live until close, as in tt-kmd 2.10, whose command
            // takes no argument saying which buffer.
            Command::FreeDmaBuf => Err(EINVAL),
            Command::PinPages => open.pin_pages(arg),
            Command::UnpinPages => open.unpin_pages(arg),
            Command::SetNocCleanup => open.set_noc_cleanup(arg),
            Command::SetPowerState => open.set_power_state(arg),
            Command::ExportTlbDmabuf => open.export_tlb_dmabuf(arg),
            // tt-kmd 2.10 answers EINVAL to it, whatever the card.
            Command::GetHarvesting => Err(EINVAL),
            Command::ResetDevice => open.reset_device(arg),
            Command::MapPeerBar => open.map_peer_bar(file, arg),
            Command::NocRead => open.noc_read(arg),
            Command::NocWrite => open.noc_write(arg),
            Command::SmcMsg => open.smc_msg(arg),
            Command::SmcWait => open.smc_wait(arg),
        }?;
        Ok(0)
    }

    /// Readable when the file's firmware message is done, writable when
    /// it may post one; a card that is gone hangs up.
    fn poll(open: &OpenFile, file: &File, table: &PollTable<'_>) -> u32 {
        let queue = &open.card.smc;
        table.register_wait(file, queue.ready());
        let (done, may_post, gone) = queue.readiness(open.owner.id());
        let mut events = 0;
        if done {
            events |= poll_events::EPOLLIN | poll_events::EPOLLRDNORM;
        }
        if may_post {
            events |= poll_events::EPOLLOUT | poll_events::EPOLLWRNORM;
        }
        if gone || open.card.refuses(open.owner.id()) {
            events |= poll_events::EPOLLHUP | poll_events::EPOLLERR;
        }
        events
    }

    /// What the file holds (src/fdinfo.rs).
    fn show_fdinfo(open: &OpenFile, m: &SeqFile, _file: &File) {
        crate::fdinfo::show(m, &open.card, &open.owner, open.exclusive);
    }

    fn shared_mapping(card: &Arc<Card>) -> Option<&SharedMapping> {
        Some(card.memory.shared_mapping())
    }

    fn mmap(open: &OpenFile, _file: &File, vma: &VmaNew) -> Result {
        open.mmap(vma)
    }

    /// A window mapping is one piece, as in tt-kmd 2.10 (its test program
    /// checks that a partial munmap of a window fails); BAR mappings split.
    fn may_split(_open: &OpenFile, offset: u64) -> Result {
        // (DMA buffer mappings split, like BAR mappings.)
        if mapping::is_window_offset(offset) {
            Err(EINVAL)
        } else {
            Ok(())
        }
    }

    fn vma_open(open: &OpenFile, offset: u64, tag: usize) {
        let layout = open.card.tlb.layout();
        let owner = open.owner.id();
        open.card
            .memory
            .vma_changed(layout, owner, offset, tag, true);
    }

    fn vma_close(open: &OpenFile, offset: u64, tag: usize) {
        let layout = open.card.tlb.layout();
        let owner = open.owner.id();
        open.card
            .memory
            .vma_changed(layout, owner, offset, tag, false);
    }

    fn fault(open: &OpenFile, fault: &VmFault) -> FaultResult {
        if dma::buffer_at(fault.offset()).is_some() {
            return open.card.dma.fault(open.owner.id(), fault);
        }
        // A reset zapped the mappings of the files it fenced: theirs stay
        // gone (DMA buffers stay theirs until close, as in tt-kmd). The
        // check is made where the page is inserted, ordered with the fence.
        let owner = open.owner.id();
        open.card
            .memory
            .fault(&open.card.tlb, owner, fault, || open.card.is_fenced(owner))
    }
}

/// The commands the driver knows.
enum Command {
    GetDeviceInfo,
    GetDriverInfo,
    LockCtl,
    Acquire,
    AcquireSet,
    Release,
    Query,
    AllocateTlb,
    FreeTlb,
    TlbAllocate,
    QueryMappings,
    ConfigureTlb,
    AllocateDmaBuf,
    FreeDmaBuf,
    PinPages,
    UnpinPages,
    SetNocCleanup,
    SetPowerState,
    ExportTlbDmabuf,
    GetHarvesting,
    ResetDevice,
    MapPeerBar,
    NocRead,
    NocWrite,
    SmcMsg,
    SmcWait,
}

impl Command {
    fn decode(cmd: u32) -> Option<Self> {
        match cmd {
            uapi::GET_DEVICE_INFO => return Some(Self::GetDeviceInfo),
            uapi::GET_DRIVER_INFO => return Some(Self::GetDriverInfo),
            uapi::LOCK_CTL => return Some(Self::LockCtl),
            uapi::ALLOCATE_TLB => return Some(Self::AllocateTlb),
            uapi::FREE_TLB => return Some(Self::FreeTlb),
            uapi::QUERY_MAPPINGS => return Some(Self::QueryMappings),
            uapi::CONFIGURE_TLB => return Some(Self::ConfigureTlb),
            uapi::ALLOCATE_DMA_BUF => return Some(Self::AllocateDmaBuf),
            uapi::FREE_DMA_BUF => return Some(Self::FreeDmaBuf),
            uapi::PIN_PAGES => return Some(Self::PinPages),
            uapi::UNPIN_PAGES => return Some(Self::UnpinPages),
            uapi::SET_NOC_CLEANUP => return Some(Self::SetNocCleanup),
            uapi::SET_POWER_STATE => return Some(Self::SetPowerState),
            uapi::EXPORT_TLB_DMABUF => return Some(Self::ExportTlbDmabuf),
            uapi::GET_HARVESTING => return Some(Self::GetHarvesting),
            uapi::RESET_DEVICE => return Some(Self::ResetDevice),
            uapi::MAP_PEER_BAR => return Some(Self::MapPeerBar),
            uapi::NOC_READ => return Some(Self::NocRead),
            uapi::NOC_WRITE => return Some(Self::NocWrite),
            uapi::SMC_MSG => return Some(Self::SmcMsg),
            _ => {}
        }
        // Our commands carry their struct's size, which grows with new
        // versions: any size from the first version's up is the command.
        if _IOC_TYPE(cmd) != uapi::IOCTL_MAGIC || _IOC_DIR(cmd) != _IOC_READ | _IOC_WRITE {
            return None;
        }
        let (command, first_size) = match _IOC_NR(cmd) {
            uapi::LOCK_ACQUIRE_NR => (Self::Acquire, size_of::<LockAcquire>()),
            uapi::LOCK_ACQUIRE_SET_NR => (Self::AcquireSet, size_of::<LockAcquireSet>()),
            uapi::LOCK_RELEASE_NR => (Self::Release, size_of::<LockRelease>()),
            uapi::LOCK_QUERY_NR => (Self::Query, size_of::<LockQuery>()),
            uapi::TLB_ALLOCATE_NR => (Self::TlbAllocate, size_of::<TlbAllocate>()),
            uapi::SMC_WAIT_NR => (Self::SmcWait, size_of::<SmcWait>()),
            _ => return None,
        };
        (_IOC_SIZE(cmd) >= first_size).then_some(command)
    }
}

/// Reads the `u32` at `addr`.
fn read_u32(addr: usize) -> Result<u32> {
    read_plain(addr)
}

/// Reads the `T` at `addr`: the argument of a command without `argsz`,
/// whose size is fixed by its ABI.
fn read_plain<T: FromBytes>(addr: usize) -> Result<T> {
    UserSlice::new(UserPtr::from_addr(addr), size_of::<T>())
        .reader()
        .read()
}

/// Writes `answer` to `out` by the rule of the C driver's commands: the
/// caller's `output_size_bytes` bytes of `out` end up holding the answer,
/// cut to fit, followed by zeros. With `output_size_bytes == 0`, `out` is
/// never touched.
fn write_sized_output(out: usize, output_size_bytes: u32, answer: &[u8]) -> Result {
    const ZEROS: [u8; 64] = [0; 64];
    let size = usize::try_from(output_size_bytes)?;
    let mut writer = UserSlice::new(UserPtr::from_addr(out), size).writer();
    writer.write_slice(&answer[..size.min(answer.len())])?;
    while !writer.is_empty() {
        let chunk = writer.len().min(ZEROS.len());
        writer.write_slice(&ZEROS[..chunk])?;
    }
    Ok(())
}

/// Reads an argument in the extensible style (`argsz` first, then
/// `flags`) as `T`, the kernel's struct, whose size is also the struct's
/// first version's: every command that has `argsz`, ours and
/// tt-kmd's (SET_NOC_CLEANUP, SET_POWER_STATE, NOC_READ, NOC_WRITE,
/// SMC_MSG), goes through here, so all negotiate alike (tt-kmd 2.11's
/// `copy_struct_from_user` rule), except EXPORT_TLB_DMABUF
/// ([`read_exact_argsz`]).
///
/// `argsz` is read alone first: below the struct's size it is `EINVAL`
/// without a byte past `argsz` being touched. Past the kernel's size, the
/// caller's extra bytes must be zero (`E2BIG` otherwise) and are ignored:
/// a newer program's struct with nothing set in what it added. An `argsz`
/// above [`MAX_ARGSZ`] is `E2BIG` too. Flags and reserved fields are each
/// command's to check.
fn read_extensible<T: FromBytes>(arg: usize) -> Result<T> {
    let argsz = read_u32(arg)?;
    if argsz > MAX_ARGSZ {
        return Err(E2BIG);
    }
    let argsz = usize::try_from(argsz)?;
    if argsz < size_of::<T>() {
        return Err(EINVAL);
    }
    let mut reader = UserSlice::new(UserPtr::from_addr(arg), argsz).reader();
    let value = reader.read()?;
    let mut tail = [0u8; 64];
    while !reader.is_empty() {
        let chunk = reader.len().min(tail.len());
        reader.read_slice(&mut tail[..chunk])?;
        if tail[..chunk].iter().any(|&b| b != 0) {
            return Err(E2BIG);
        }
    }
    Ok(value)
}

/// Reads an argument whose `argsz` must be exactly the size of `T`, the
/// kernel's struct: EXPORT_TLB_DMABUF, which tt-kmd's argsz change (PR
/// #277) left alone. tt-kmd refuses any other `argsz` with `EINVAL`, a
/// larger one whose tail is zero included, and its test program checks
/// that (dmabuf_export: one byte more is `EINVAL`); a program written for
/// tt-kmd never passes anything else. `argsz` is read alone first, as in
/// [`read_extensible`], so nothing past a wrong one is read.
fn read_exact_argsz<T: FromBytes>(arg: usize) -> Result<T> {
    if usize::try_from(read_u32(arg)?)? != size_of::<T>() {
        return Err(EINVAL);
    }
    read_plain(arg)
}

/// Writes `answer` whole at `addr`.
fn write_back<T: AsBytes>(addr: usize, answer: &T) -> Result {
    UserSlice::new(UserPtr::from_addr(addr), size_of::<T>())
        .writer()
        .write(answer)
}

/// Checks a lock index from userspace.
fn lock_index(index: u32) -> Result<usize> {
    let index = usize::try_from(index)?;
    if index < LOCK_COUNT {
        Ok(index)
    } else {
        Err(EINVAL)
    }
}

/// The wait of an ACQUIRE, ACQUIRE_SET or TLB_ALLOCATE from its flags. A
/// deadline is on the caller's `CLOCK_MONOTONIC`, which a time namespace
/// may offset from the host's: converted here, on every call (a restarted
/// call converts it again, with the same result).
fn wait_from_flags(flags: u32, deadline_ns: u64) -> Result<Wait> {
    match flags {
        0 => Ok(Wait::Forever),
        uapi::LOCK_NONBLOCK => Ok(Wait::Try),
        // A deadline beyond `i64::MAX` ns (292 years) is as good as none.
        uapi::LOCK_DEADLINE => Ok(
            i64::try_from(deadline_ns).map_or(Wait::Forever, |deadline| {
                Wait::Until(monotonic_from_caller(deadline))
            }),
        ),
        _ => Err(EINVAL),
    }
}

/// What ACQUIRE and ACQUIRE_SET write back.
#[derive(Default)]
struct AcquireReport {
    owner_died: LockMask,
    waited_ns: u64,
    holder_pid: u32,
}

impl AcquireError {
    /// The errno of the new commands, and the holder's pid where the
    /// command reports it.
    fn errno(self) -> (Error, Option<u32>) {
        match self {
            Self::Busy { holder_pid } => (EBUSY, Some(holder_pid)),
            Self::TimedOut { holder_pid } => (ETIMEDOUT, Some(holder_pid)),
            Self::Deadlock => (EDEADLK, None),
            // Restarted when no handler ran (stop/continue); EINTR when one
            // did, even with SA_RESTART: the deadline is absolute, so a
            // caller that wants to continue simply calls again.
            Self::Interrupted => (ERESTARTNOHAND, None),
            Self::Gone => (ENODEV, None),
            Self::NoMemory => (ENOMEM, None),
        }
    }
}

impl TlbError {
    /// The errno of the new command; ALLOCATE_TLB says `ENOMEM` for
    /// [`TlbError::Busy`], as the C driver does.
    fn errno(self) -> Error {
        match self {
            Self::NoSuchSize => EINVAL,
            Self::Busy => EBUSY,
            Self::TimedOut => ETIMEDOUT,
            Self::Interrupted => ERESTARTNOHAND,
            Self::Gone => ENODEV,
            Self::NoMemory => ENOMEM,
        }
    }
}

impl OpenFile {
    fn get_device_info(&self, arg: usize) -> Result {
        let output_size_bytes = read_u32(arg)?;
        let pci = &self.card.pci;
        let answer = DeviceInfoOut {
            output_size_bytes: size_of::<DeviceInfoOut>() as u32,
            vendor_id: pci.vendor_id,
            device_id: pci.device_id,
            subsystem_vendor_id: pci.subsystem_vendor_id,
            subsystem_id: pci.subsystem_id,
            bus_dev_fn: pci.bus_dev_fn,
            max_dma_buf_size_log2: if self.card.dma.is_capable() {
                MAX_DMA_BUF_SIZE_LOG2
            } else {
                0
            },
            pci_domain: pci.domain,
            reserved: 0,
        };
        write_sized_output(arg.wrapping_add(4), output_size_bytes, answer.as_bytes())
    }

    fn get_driver_info(&self, arg: usize) -> Result {
        let output_size_bytes = read_u32(arg)?;
        let answer = DriverInfoOut {
            output_size_bytes: size_of::<DriverInfoOut>() as u32,
            driver_version: uapi::DRIVER_API_VERSION,
            driver_version_major: VERSION.major,
            driver_version_minor: VERSION.minor,
            driver_version_patch: VERSION.patch,
            reserved0: 0,
        };
        write_sized_output(arg.wrapping_add(4), output_size_bytes, answer.as_bytes())
    }

    /// The C driver's lock command. Contention and releasing a lock not held
    /// are answers (`value`), not errors; its reserved bytes are not checked
    /// because binaries built against its first layout left them unset.
    fn lock_ctl(&self, arg: usize) -> Result {
        let request: LockCtlIn = read_plain(arg)?;
        let index = lock_index(request.index.into())?;
        let arbiter = &self.card.arbiter;
        let acquire = |wait| {
            arbiter.acquire(
                &self.owner,
                bit(index),
                Requester::current(),
                wait,
                Reentry::Wait,
            )
        };
        // The grant, if this call takes the lock: undone if the answer
        // cannot be written.
        let mut acquired = None;
        let value = match request.flags {
            uapi::LOCK_CTL_ACQUIRE => match acquire(Wait::Try) {
                Ok(grant) => {
                    acquired = Some(grant);
                    1
                }
                Err(AcquireError::Busy { .. }) => 0,
                Err(e) => return Err(e.errno().0),
            },
            uapi::LOCK_CTL_RELEASE => match arbiter.release(&self.owner, bit(index)) {
                Ok(()) => 1,
                Err(e) if e == EPERM => 0,
                Err(e) => return Err(e),
            },
            uapi::LOCK_CTL_TEST => {
                let (mine, held) = arbiter.test(&self.owner, index)?;
                u8::from(mine) | u8::from(held) << 1
            }
            uapi::LOCK_CTL_ACQUIRE_BLOCKING => match acquire(Wait::Forever) {
                Ok(grant) => {
                    acquired = Some(grant);
                    1
                }
                // As the C driver: restarted under SA_RESTART, EINTR
                // otherwise.
                Err(AcquireError::Interrupted) => return Err(ERESTARTSYS),
                Err(e) => return Err(e.errno().0),
            },
            _ => return Err(EINVAL),
        };
        let answer = LockCtlOut {
            value,
            reserved: [0; 3],
        };
        let written = write_sized_output(
            arg.wrapping_add(size_of::<LockCtlIn>()),
            request.output_size_bytes,
            answer.as_bytes(),
        );
        if let (Err(_), Some(grant)) = (&written, acquired) {
            arbiter.undo(&self.owner, bit(index), grant.owner_died);
        }
        written
    }

    /// Runs a request of ACQUIRE or ACQUIRE_SET: its result, and what to
    /// write back when the command writes anything (on success, and on the
    /// errors that report the holder).
    fn acquire_locks(&self, mask: LockMask, wait: Wait) -> (Result, Option<AcquireReport>) {
        let result = self.card.arbiter.acquire(
            &self.owner,
            mask,
            Requester::current(),
            wait,
            Reentry::Refuse,
        );
        match result {
            Ok(acquired) => (
                Ok(()),
                Some(AcquireReport {
                    owner_died: acquired.owner_died,
                    waited_ns: acquired.waited_ns,
                    holder_pid: 0,
                }),
            ),
            Err(e) => {
                let (errno, holder_pid) = e.errno();
                let report = holder_pid.map(|holder_pid| AcquireReport {
                    holder_pid,
                    ..AcquireReport::default()
                });
                (Err(errno), report)
            }
        }
    }

    fn acquire(&self, arg: usize) -> Result {
        let mut request: LockAcquire = read_extensible(arg)?;
        if request.reserved0 != 0 {
            return Err(EINVAL);
        }
        let index = lock_index(request.index)?;
        let wait = wait_from_flags(request.flags, request.deadline_ns)?;
        let (result, report) = self.acquire_locks(bit(index), wait);
        let Some(report) = report else {
            return result;
        };
        request.out_flags = if report.owner_died != 0 {
            uapi::LOCK_OWNER_DIED
        } else {
            0
        };
        request.holder_pid = report.holder_pid;
        request.waited_ns = report.waited_ns;
        self.write_report(arg, &request, bit(index), &result, &report)?;
        result
    }

    fn acquire_set(&self, arg: usize) -> Result {
        let mut request: LockAcquireSet = read_extensible(arg)?;
        if request.reserved0 != 0 || request.mask == 0 {
            return Err(EINVAL);
        }
        let wait = wait_from_flags(request.flags, request.deadline_ns)?;
        let (result, report) = self.acquire_locks(request.mask, wait);
        let Some(report) = report else {
            return result;
        };
        request.owner_died_mask = report.owner_died;
        request.holder_pid = report.holder_pid;
        request.waited_ns = report.waited_ns;
        self.write_report(arg, &request, request.mask, &result, &report)?;
        result
    }

    /// Writes back the answer of ACQUIRE or ACQUIRE_SET; if that fails
    /// after the locks of `mask` were granted, the grant is undone: the
    /// caller, told `EFAULT`, cannot know it holds them.
    fn write_report<T: AsBytes>(
        &self,
        arg: usize,
        answer: &T,
        mask: LockMask,
        result: &Result,
        report: &AcquireReport,
    ) -> Result {
        let written = write_back(arg, answer);
        if written.is_err() && result.is_ok() {
            self.card.arbiter.undo(&self.owner, mask, report.owner_died);
        }
        written
    }

    fn release(&self, arg: usize) -> Result {
        let request: LockRelease = read_extensible(arg)?;
        if request.flags != 0 || request.mask == 0 {
            return Err(EINVAL);
        }
        let mask: LockMask = request.mask;
        self.card.arbiter.release(&self.owner, mask)
    }

    fn query(&self, arg: usize) -> Result {
        let mut request: LockQuery = read_extensible(arg)?;
        if request.flags != 0 {
            return Err(EINVAL);
        }
        let index = lock_index(request.index)?;
        let info = self.card.arbiter.query(Some(&self.owner), index)?;
        let mut out_flags = 0;
        if info.holder.is_some() {
            out_flags |= uapi::LOCK_QUERY_HELD;
        }
        if info.held_by_caller {
            out_flags |= uapi::LOCK_QUERY_HELD_BY_CALLER;
        }
        if info.owner_died {
            out_flags |= uapi::LOCK_QUERY_OWNER_DIED;
        }
        let (holder_pid, holder_comm) = info.holder.unwrap_or((0, [0; 16]));
        request.out_flags = out_flags;
        request.holder_pid = holder_pid;
        request.holder_comm = holder_comm;
        request.waiters = info.waiters;
        request.held_ns = info.held_ns;
        request.acquisitions = info.stats.acquisitions;
        request.contended = info.stats.contended;
        request.owner_died_count = info.stats.owner_died;
        request.spurious_wakeups = info.stats.spurious_wakeups;
        write_back(arg, &request)
    }

    /// The C driver's ALLOCATE_TLB: never waits (`ENOMEM` when no window of
    /// the size is free, or earlier waiters of the size are queued), always
    /// writes its 32 output bytes, and frees the window if that write fails.
    /// Its reserved input is not checked, as in the C driver.
    fn allocate_tlb(&self, arg: usize) -> Result {
        let request: AllocateTlbIn = read_plain(arg)?;
        let window = self
            .card
            .tlb
            .allocate(
                self.owner.id(),
                request.size,
                Requester::current(),
                Wait::Try,
            )
            .map_err(|e| match e {
                TlbError::Busy => ENOMEM,
                e => e.errno(),
            })?;
        let answer = AllocateTlbOut {
            id: window.id,
            reserved0: 0,
            mmap_offset_uc: window.mmap_offset_uc,
            mmap_offset_wc: window.mmap_offset_wc,
            reserved1: 0,
        };
        let written = write_back(arg.wrapping_add(size_of::<AllocateTlbIn>()), &answer);
        if written.is_err() {
            // The caller cannot know the id: the window must not leak.
            self.free_window(window.id)?;
        }
        written
    }

    fn free_tlb(&self, arg: usize) -> Result {
        let request: FreeTlbIn = read_plain(arg)?;
        self.free_window(request.id)
    }

    fn tlb_allocate(&self, arg: usize) -> Result {
        let mut request: TlbAllocate = read_extensible(arg)?;
        if request.reserved0 != 0 {
            return Err(EINVAL);
        }
        let wait = wait_from_flags(request.flags, request.deadline_ns)?;
        let window = self
            .card
            .tlb
            .allocate(self.owner.id(), request.size, Requester::current(), wait)
            .map_err(TlbError::errno)?;
        request.id = window.id;
        request.mmap_offset_uc = window.mmap_offset_uc;
        request.mmap_offset_wc = window.mmap_offset_wc;
        request.waited_ns = window.waited_ns;
        let written = write_back(arg, &request);
        if written.is_err() {
            self.free_window(window.id)?;
        }
        written
    }

    /// Frees window `id` of this file, revoking its mappings first.
    /// FREE_TLB: `EBUSY` while the window is mapped, as tt-kmd 2.10.
    fn free_window(&self, id: u32) -> Result {
        let memory = &self.card.memory;
        self.card
            .tlb
            .free_revoking(self.owner.id(), id, &|id| memory.window_mapped(id), &|id| {
                self.card.revoke_freed_window(id)
            })
            .map_err(|e| self.or_fenced(e))
    }

    /// QUERY_MAPPINGS, as tt-kmd 2.10: reads only `in`; writes
    /// `min(output_mapping_count, n)` mappings after it and zeros the rest
    /// of the `output_mapping_count` entries.
    fn query_mappings(&self, arg: usize) -> Result {
        let request: QueryMappingsIn = read_plain(arg)?;
        let (mappings, valid) = mapping::mappings(self.card.memory.lens());
        let wanted = usize::try_from(request.output_mapping_count)?;
        let copied = wanted.min(valid);
        let extra = wanted - copied;
        // tt-kmd's limit: the bytes to clear must fit in a u32.
        if extra > u32::MAX as usize / size_of::<Mapping>() {
            return Err(EFAULT);
        }
        let out = arg.wrapping_add(size_of::<QueryMappingsIn>());
        let mut writer =
            UserSlice::new(UserPtr::from_addr(out), wanted * size_of::<Mapping>()).writer();
        for m in &mappings[..copied] {
            writer.write(m)?;
        }
        const ZEROS: [u8; 240] = [0; 240];
        while !writer.is_empty() {
            let chunk = writer.len().min(ZEROS.len());
            writer.write_slice(&ZEROS[..chunk])?;
        }
        Ok(())
    }

    /// CONFIGURE_TLB, as tt-kmd 2.10: reads only `in` (its reserved fields
    /// unchecked), `EINVAL` for an id >= 256 or a bad config, `EPERM` for a
    /// window this file does not hold.
    fn configure_tlb(&self, arg: usize) -> Result {
        let r: ConfigureTlbIn = read_plain(arg)?;
        if r.id >= MAX_WINDOWS {
            return Err(EINVAL);
        }
        let config = NocTlbConfig {
            addr: r.addr,
            x_end: r.x_end,
            y_end: r.y_end,
            x_start: r.x_start,
            y_start: r.y_start,
            noc: r.noc,
            mcast: r.mcast,
            ordering: r.ordering,
            linked: r.linked,
            static_vc: r.static_vc,
        };
        self.card
            .memory
            .configure(&self.card.tlb, self.owner.id(), r.id as usize, &config)
            .map_err(|e| self.or_fenced(e))
    }

    /// `e`, or `ENODEV` if a reset fenced this file or the card is gone: a
    /// reset frees a fenced file's windows after fencing it, so a command
    /// that finds its window gone in between was refused by the reset, and
    /// must say so as every later command does, not `EPERM`.
    fn or_fenced(&self, e: Error) -> Error {
        if e == EPERM && self.card.refuses(self.owner.id()) {
            ENODEV
        } else {
            e
        }
    }

    /// ALLOCATE_DMA_BUF, as tt-kmd 2.10 (src/dma.rs): reads only `in`,
    /// writes only `out`; its reserved fields are not checked (tt-kmd does
    /// not check them), unknown flags are `EINVAL`.
    fn allocate_dma_buf(&self, arg: usize) -> Result {
        let r: AllocateDmaBufIn = read_plain(arg)?;
        if r.flags & !ALLOCATE_DMA_BUF_NOC_DMA != 0 {
            return Err(EINVAL);
        }
        let noc = r.flags & ALLOCATE_DMA_BUF_NOC_DMA != 0;
        let (memory, owner) = (&self.card.memory, self.owner.id());
        let given = self
            .card
            .dma
            .allocate(memory, owner, r.buf_index, r.requested_size, noc)?;
        let answer = AllocateDmaBufOut {
            physical_address: given.dma_address,
            mapping_offset: dma::buffer_offset(r.buf_index),
            size: r.requested_size,
            reserved0: 0,
            noc_address: given.noc_address,
            reserved1: 0,
        };
        let written = write_back(arg.wrapping_add(size_of::<AllocateDmaBufIn>()), &answer);
        if written.is_err() {
            // The caller cannot know it has the buffer: it must not stay.
            self.card.dma.free_buffer(memory, owner, r.buf_index);
        }
        written
    }

    /// PIN_PAGES, as tt-kmd 2.10: the caller's `output_size_bytes` bytes of
    /// `out` are cleared first (even when the call then fails), then get
    /// `physical_address` and, from 16 bytes, `noc_address`.
    fn pin_pages(&self, arg: usize) -> Result {
        let r: PinPagesIn = read_plain(arg)?;
        let out = arg.wrapping_add(size_of::<PinPagesIn>());
        write_sized_output(out, r.output_size_bytes, &[])?;
        let (memory, owner) = (&self.card.memory, self.owner.id());
        let given = self
            .card
            .dma
            .pin(memory, owner, r.virtual_address, r.size, r.flags)?;
        let answer = PinPagesOutExtended {
            physical_address: given.dma_address,
            noc_address: given.noc_address,
        };
        let wanted = usize::try_from(r.output_size_bytes)?.min(size_of::<PinPagesOutExtended>());
        // Only the bytes asked for: the caller's struct may be the 8-byte
        // `tenstorrent_pin_pages_out`.
        let written = UserSlice::new(UserPtr::from_addr(out), wanted)
            .writer()
            .write_slice(&answer.as_bytes()[..wanted]);
        if written.is_err() {
            let _ = self
                .card
                .dma
                .unpin(memory, owner, r.virtual_address, r.size);
        }
        written
    }

    /// UNPIN_PAGES, as tt-kmd 2.10: `size` is cut to whole pages, and must
    /// be the size of the newest pin at `virtual_address`.
    fn unpin_pages(&self, arg: usize) -> Result {
        let r: UnpinPagesIn = read_plain(arg)?;
        if r.reserved != 0 {
            return Err(EINVAL);
        }
        self.card.dma.unpin(
            &self.card.memory,
            self.owner.id(),
            r.virtual_address,
            r.size,
        )
    }

    /// MAP_PEER_BAR, as tt-kmd 2.10: maps part of a BAR of another card
    /// (of the same chip, open in this process as `peer_fd`) for this
    /// card's DMA. Reads only `in`. `EINVAL` for flags, a resource index
    /// past the PCI resources or of no BAR, a zero length or a range past
    /// the BAR, a descriptor that is not a card's file, the same card, a
    /// card of another chip; `EBADF` for a descriptor not open.
    fn map_peer_bar(&self, file: &File, arg: usize) -> Result {
        /// `PCI_NUM_RESOURCES` (with SR-IOV): tt-kmd's bound.
        const PCI_NUM_RESOURCES: u32 = 17;
        let r: MapPeerBarIn = read_plain(arg)?;
        if r.flags != 0 || r.peer_bar_index >= PCI_NUM_RESOURCES || r.peer_bar_length == 0 {
            return Err(EINVAL);
        }
        let peer = CharDevice::<Card>::with_peer(file, r.peer_fd, |peer| {
            peer.map(|p: &OpenFile| p.card.clone()).ok_or(EINVAL)
        })??;
        if Arc::ptr_eq(&peer, &self.card)
            || peer.tlb.layout().family != self.card.tlb.layout().family
        {
            return Err(EINVAL);
        }
        if peer.is_gone() {
            return Err(ENODEV);
        }
        // PCI resources 0, 2 and 4 are the BARs a card has (RESOURCE0-2);
        // the others have no length.
        let resource = match r.peer_bar_index {
            0 => 0,
            2 => 1,
            4 => 2,
            _ => return Err(EINVAL),
        };
        let range = peer.memory.bar_range(resource).ok_or(EINVAL)?;
        let owner = self.owner.id();
        // The peer's unbind revokes this card's mappings of its BARs. It
        // marks the peer gone first: a mapping listed after the revocation
        // sees that below and is undone.
        peer.add_peer_user(&self.card)?;
        let address = self.card.dma.map_peer(
            owner,
            peer.peer_id(),
            &range,
            r.peer_bar_offset.into(),
            r.peer_bar_length.into(),
        )?;
        if peer.is_gone() {
            self.card.dma.unmap_peer(owner, address);
            return Err(ENODEV);
        }
        let answer = MapPeerBarOut {
            dma_address: address,
            reserved: 0,
        };
        let written = write_back(arg.wrapping_add(size_of::<MapPeerBarIn>()), &answer);
        if written.is_err() {
            self.card.dma.unmap_peer(owner, address);
        }
        written
    }

    /// RESET_DEVICE, as tt-kmd 2.10 (src/reset.rs): reads only `in`; the
    /// caller's `output_size_bytes` bytes of `out` get `output_size_bytes`
    /// 8 and `result`, then zeros.
    fn reset_device(&self, arg: usize) -> Result {
        let r: ResetDeviceIn = read_plain(arg)?;
        let ok = self.card.reset_device(self.owner.id(), r.flags)?;
        let answer = ResetDeviceOut {
            output_size_bytes: size_of::<ResetDeviceOut>() as u32,
            result: u32::from(!ok),
        };
        write_sized_output(
            arg.wrapping_add(size_of::<ResetDeviceIn>()),
            r.output_size_bytes,
            answer.as_bytes(),
        )
    }

    /// SET_NOC_CLEANUP, as tt-kmd 2.11 (src/noc_cleanup.rs): `argsz`
    /// negotiated, writes nothing back.
    fn set_noc_cleanup(&self, arg: usize) -> Result {
        let request: SetNocCleanup = read_extensible(arg)?;
        let cleanup = noc_cleanup::decode(&request)?;
        if let Some(c) = cleanup {
            if !CardMemory::kernel_can_reach(self.card.tlb.layout(), c.x, c.y, c.noc, c.addr) {
                return Err(EINVAL);
            }
        }
        self.card.noc_cleanups.set(self.owner.id(), cleanup)
    }

    /// EXPORT_TLB_DMABUF, as tt-kmd 2.10 and 2.11 (src/export.rs), `argsz`
    /// exactly 32 as there: writes the kernel's struct back with `fd`; the
    /// descriptor exists only once that write succeeded.
    fn export_tlb_dmabuf(&self, arg: usize) -> Result {
        let mut request: ExportTlbDmabuf = read_exact_argsz(arg)?;
        let pending = self.card.export_window(self.owner.id(), &request)?;
        request.fd = pending.fd() as u32;
        // Not written: the export goes with `pending`.
        write_back(arg, &request)?;
        pending.install();
        Ok(())
    }

    /// SET_POWER_STATE, as tt-kmd 2.11 (src/power.rs): `argsz`
    /// negotiated, writes nothing back.
    fn set_power_state(&self, arg: usize) -> Result {
        let request: SetPowerState = read_extensible(arg)?;
        let vote = PowerVote::decode(&request)?;
        let card = &self.card;
        card.power
            .set(self.owner.id(), vote, &card.firmware(), &|| card.kick_smc())
    }

    /// NOC_READ, as tt-kmd 2.11 (src/noc_io.rs): writes the struct back
    /// with `value`, the value read zero-extended.
    fn noc_read(&self, arg: usize) -> Result {
        let mut request: NocIo = read_extensible(arg)?;
        let access = NocAccess::decode(&request)?;
        request.value = self.card.noc_read(self.owner.id(), &access)?;
        write_back(arg, &request)
    }

    /// NOC_WRITE, as tt-kmd 2.11 (src/noc_io.rs): writes the low `width`
    /// bytes of `value`, nothing back.
    fn noc_write(&self, arg: usize) -> Result {
        let request: NocIo = read_extensible(arg)?;
        let access = NocAccess::decode(&request)?;
        self.card.noc_write(self.owner.id(), &access, request.value)
    }

    /// SMC_MSG, tt-kmd 2.11's contract (src/smc.rs): POST, POLL or
    /// ABANDON this file's firmware message.
    fn smc_msg(&self, arg: usize) -> Result {
        let mut request: SmcMsg = read_extensible(arg)?;
        if request.queue_index != 0 || request.reserved0 != 0 {
            return Err(EINVAL);
        }
        let queue = &self.card.smc;
        let owner = self.owner.id();
        match request.flags {
            uapi::SMC_MSG_POST => {
                queue.post(&self.card.firmware(), owner, &request.message, || {
                    self.card.kick_smc()
                })
            }
            uapi::SMC_MSG_POLL => {
                let outcome = queue.poll(&self.card.firmware(), owner)?;
                self.write_outcome(arg, &mut request, outcome)
            }
            uapi::SMC_MSG_ABANDON => {
                queue.abandon(owner);
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }

    /// Writes the response of a done message back as POLL does: the whole
    /// struct with `message` set, then `EREMOTEIO` for a nonzero status.
    /// A message that got no response writes nothing.
    fn write_outcome(&self, arg: usize, request: &mut SmcMsg, outcome: Outcome) -> Result {
        match outcome {
            Outcome::Answered(response) => {
                request.message = response;
                write_back(arg, &*request)?;
                if response[0] != 0 {
                    Err(EREMOTEIO)
                } else {
                    Ok(())
                }
            }
            Outcome::Failed(e) => Err(e),
        }
    }

    /// SMC_WAIT: POLL that sleeps until the message is done (see the C
    /// header).
    fn smc_wait(&self, arg: usize) -> Result {
        let mut request: SmcWait = read_extensible(arg)?;
        if request.reserved0 != 0 {
            return Err(EINVAL);
        }
        let wait = wait_from_flags(request.flags, request.deadline_ns)?;
        let outcome = self.card.smc.wait(self.owner.id(), wait)?;
        request.out_flags = uapi::SMC_WAIT_DONE;
        let result = match outcome {
            Outcome::Answered(response) => {
                request.message = response;
                if response[0] != 0 {
                    Err(EREMOTEIO)
                } else {
                    Ok(())
                }
            }
            Outcome::Failed(e) => Err(e),
        };
        write_back(arg, &request)?;
        result
    }

    /// mmap of a BAR or a window (see src/mapping.rs): `EINVAL` outside a
    /// mapping, `EPERM` for a window this file does not hold.
    fn mmap(&self, vma: &VmaNew) -> Result {
        if self.card.refuses(self.owner.id()) {
            return Err(ENODEV);
        }
        let len = u64::try_from(vma.end() - vma.start())?;
        let offset = vma_offset(vma);
        if dma::buffer_at(offset).is_some() {
            return self.card.dma.mmap(self.owner.id(), offset, len, vma);
        }
        let layout = self.card.tlb.layout();
        let (target, caching) = mapping::decode_mmap(layout, self.card.memory.lens(), offset, len)?;
        match target {
            Target::Bar { .. } => {
                self.card.memory.mmap(vma, caching)?;
                self.card
                    .memory
                    .vma_changed(layout, self.owner.id(), offset, 0, true);
                Ok(())
            }
            Target::Window(window) => self
                .card
                .tlb
                .with_held(self.owner.id(), window.id, || {
                    self.card.memory.mmap_window(vma, caching, window)
                })
                .unwrap_or(Err(EPERM))
                .map_err(|e| self.or_fenced(e)),
        }
    }
}

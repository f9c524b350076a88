// SPDX-License-Identifier: GPL-2.0

//! The lock commands (src/arbiter.rs): the C driver's LOCK_CTL, and
//! ACQUIRE, ACQUIRE_SET, RELEASE and QUERY.

use super::{
    args::{
        read_extensible,
        read_plain,
        wait_from_flags,
        write_back,
        write_sized_output, //
    },
    OpenFile,
};
use crate::{
    arbiter::{
        bit,
        AcquireError,
        LockMask,
        Reentry,
        Requester,
        LOCK_COUNT, //
    },
    uapi::{
        self,
        LockAcquire,
        LockAcquireSet,
        LockCtlIn,
        LockCtlOut,
        LockQuery,
        LockRelease, //
    },
    wait::Wait,
};
use kernel::{
    prelude::*,
    transmute::AsBytes, //
};

/// Checks a lock index from userspace.
fn lock_index(index: u32) -> Result<usize> {
    let index = usize::try_from(index)?;
    if index < LOCK_COUNT {
        Ok(index)
    } else {
        Err(EINVAL)
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

impl OpenFile {
    /// The C driver's lock command. Contention and releasing a lock not held
    /// are answers (`value`), not errors; its reserved bytes are not checked
    /// because binaries built against its first layout left them unset.
    pub(super) fn lock_ctl(&self, arg: usize) -> Result {
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

    pub(super) fn acquire(&self, arg: usize) -> Result {
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

    pub(super) fn acquire_set(&self, arg: usize) -> Result {
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

    pub(super) fn release(&self, arg: usize) -> Result {
        let request: LockRelease = read_extensible(arg)?;
        if request.flags != 0 || request.mask == 0 {
            return Err(EINVAL);
        }
        let mask: LockMask = request.mask;
        self.card.arbiter.release(&self.owner, mask)
    }

    pub(super) fn query(&self, arg: usize) -> Result {
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
}

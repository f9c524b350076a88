// SPDX-License-Identifier: GPL-2.0

//! Firmware messages (src/smc.rs): SMC_MSG and SMC_WAIT.

use super::{
    args::{
        read_extensible,
        wait_from_flags,
        write_back, //
    },
    OpenFile,
};
use crate::{
    smc::Outcome,
    uapi::{
        self,
        SmcMsg,
        SmcWait, //
    },
};
use kernel::prelude::*;

impl OpenFile {
    /// SMC_MSG, tt-kmd 2.11's contract (src/smc.rs): POST, POLL or
    /// ABANDON this file's firmware message.
    pub(super) fn smc_msg(&self, arg: usize) -> Result {
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
    pub(super) fn smc_wait(&self, arg: usize) -> Result {
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
}

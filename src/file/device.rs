// SPDX-License-Identifier: GPL-2.0

//! The card as a whole: GET_DEVICE_INFO, GET_DRIVER_INFO, RESET_DEVICE
//! (src/reset.rs) and SET_POWER_STATE (src/power.rs).

use super::{
    args::{
        read_extensible,
        read_plain,
        read_u32,
        write_sized_output, //
    },
    OpenFile,
};
use crate::{
    dma::MAX_DMA_BUF_SIZE_LOG2,
    power::PowerVote,
    uapi::{
        self,
        DeviceInfoOut,
        DriverInfoOut,
        ResetDeviceIn,
        ResetDeviceOut,
        SetPowerState, //
    },
    VERSION, //
};
use kernel::{
    prelude::*,
    transmute::AsBytes, //
};

impl OpenFile {
    pub(super) fn get_device_info(&self, arg: usize) -> Result {
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

    pub(super) fn get_driver_info(&self, arg: usize) -> Result {
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

    /// RESET_DEVICE, as tt-kmd 2.10 (src/reset.rs): reads only `in`; the
    /// caller's `output_size_bytes` bytes of `out` get `output_size_bytes`
    /// 8 and `result`, then zeros.
    pub(super) fn reset_device(&self, arg: usize) -> Result {
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

    /// SET_POWER_STATE, as tt-kmd 2.11 (src/power.rs): `argsz`
    /// negotiated, writes nothing back.
    pub(super) fn set_power_state(&self, arg: usize) -> Result {
        let request: SetPowerState = read_extensible(arg)?;
        let vote = PowerVote::decode(&request)?;
        let card = &self.card;
        card.power
            .set(self.owner.id(), vote, &card.firmware(), &|| card.kick_smc())
    }
}

// SPDX-License-Identifier: GPL-2.0
//! The card's PCI configuration space (4 KiB, PCIe extended), per arch.
//!
//! QEMU's `vfio-user-pci` reads the whole image once at realize time and
//! takes the BAR types, the MSI capability and the PCIe capability from it;
//! it then emulates BAR sizing and MSI itself but still forwards every
//! config write here and reads the bits it does not emulate (command,
//! status, DevCtl/DevSta, AER, vendor-specific registers) from here on each
//! guest access. So this model must keep what the guest writes, honour
//! read-only and write-1-to-clear bits, and notice the writes that have side
//! effects on the card (FLR, the interface timer).
//!
//! Layout: a real n150 as `lspci -v` shows it (Wormhole, rev 01, subsystem
//! "n150"): PM at 0x40, MSI at 0x50 (64-bit, maskable), PCIe endpoint at
//! 0x70, AER at 0x100; BAR0 64-bit prefetchable 512M, BAR2 32-bit
//! non-prefetchable 1M, BAR4 64-bit prefetchable 32M. Blackhole uses the same
//! DesignWare controller: its firmware (tt-zephyr-platforms
//! lib/tenstorrent/bh_arc/pcie_msi.c) gives the MSI capability register
//! default 0x01807005: MSI at 0x50, next capability 0x70, 64-bit, per-vector
//! masking, one vector. The extended capabilities a real card has after AER
//! (Secondary PCIe, Physical Layer 16 GT/s, Lane Margining, vendor-specific)
//! are not modelled: AER ends the chain.

use crate::Arch;

/// PCI vendor ID of Tenstorrent (tt-kmd 2.10 enumerate.h).
pub const VENDOR_TENSTORRENT: u16 = 0x1e52;
/// Wormhole's device ID (tt-kmd 2.10 enumerate.h).
pub const DEVICE_ID_WORMHOLE: u16 = 0x401e;
/// Blackhole's device ID (tt-kmd 2.10 enumerate.h).
pub const DEVICE_ID_BLACKHOLE: u16 = 0xb140;
/// Class code 0x120000, "Processing accelerator, vendor-specific
/// interface": what tt-kmd 2.10 enumerate.c assigns to unflashed boards
/// that come up without one, and what flashed cards report.
pub const CLASS_CODE: u32 = 0x12_0000;
/// Size of the PCIe configuration space.
pub const CONFIG_SPACE_SIZE: usize = 4096;

/// Offset of the Power Management capability.
pub const PM_CAP: usize = 0x40;
/// Offset of the MSI capability.
pub const MSI_CAP: usize = 0x50;
/// Offset of the PCI Express capability.
pub const PCIE_CAP: usize = 0x70;
/// Offset of the Advanced Error Reporting extended capability.
pub const AER_CAP: usize = 0x100;
/// Config-space offset of the interface timer's control register, a vendor
/// register of the card's PCIe controller (tt-kmd 2.10 pcie.c
/// `INTERFACE_TIMER_CONTROL_OFF`, written by `pcie_timer_interrupt`).
pub const INTERFACE_TIMER_CONTROL_OFF: usize = 0x930;
/// Config-space offset of the interface timer's target (tt-kmd 2.10 pcie.c
/// `INTERFACE_TIMER_TARGET_OFF`; tt-kmd writes 1 there first).
pub const INTERFACE_TIMER_TARGET_OFF: usize = 0x934;
/// Interface timer control bit 0: timer enable (tt-kmd 2.10 pcie.c).
pub const INTERFACE_TIMER_EN: u32 = 0x1;
/// Interface timer control bit 4: force the timer interrupt pending (tt-kmd
/// 2.10 pcie.c).
pub const INTERFACE_FORCE_PENDING: u32 = 0x10;

/// Type 0 header registers (PCI Local Bus 3.0, 6.1).
pub mod hdr {
    pub const VENDOR_ID: usize = 0x00;
    pub const DEVICE_ID: usize = 0x02;
    pub const COMMAND: usize = 0x04;
    pub const STATUS: usize = 0x06;
    pub const REVISION_ID: usize = 0x08;
    pub const CLASS_PROG: usize = 0x09;
    pub const CACHE_LINE_SIZE: usize = 0x0c;
    pub const HEADER_TYPE: usize = 0x0e;
    pub const BAR0: usize = 0x10;
    pub const SUBSYSTEM_VENDOR_ID: usize = 0x2c;
    pub const SUBSYSTEM_ID: usize = 0x2e;
    pub const ROM_ADDRESS: usize = 0x30;
    pub const CAPABILITIES_POINTER: usize = 0x34;
    pub const INTERRUPT_LINE: usize = 0x3c;
    pub const INTERRUPT_PIN: usize = 0x3d;

    pub const COMMAND_MEMORY: u16 = 1 << 1;
    pub const COMMAND_MASTER: u16 = 1 << 2;
    /// Parity Error Response; tt-kmd uses it as a reset marker: it sets it
    /// and expects a reset to clear it (pcie.c `set_reset_marker`).
    pub const COMMAND_PARITY: u16 = 1 << 6;
    pub const COMMAND_SERR: u16 = 1 << 8;
    pub const COMMAND_INTX_DISABLE: u16 = 1 << 10;
    pub const STATUS_CAP_LIST: u16 = 1 << 4;
}

/// Capability IDs (PCI Code and ID Assignment).
pub mod cap_id {
    pub const PM: u8 = 0x01;
    pub const MSI: u8 = 0x05;
    pub const EXP: u8 = 0x10;
    pub const EXT_AER: u16 = 0x0001;
}

/// Register offsets inside the PCI Express capability (PCIe Base 4.0, 7.5.3).
pub mod exp {
    pub const FLAGS: usize = 0x02;
    pub const DEVCAP: usize = 0x04;
    pub const DEVCTL: usize = 0x08;
    pub const DEVSTA: usize = 0x0a;
    pub const LNKCAP: usize = 0x0c;
    pub const LNKCTL: usize = 0x10;
    pub const LNKSTA: usize = 0x12;
    pub const DEVCAP2: usize = 0x24;
    pub const DEVCTL2: usize = 0x28;
    pub const LNKCAP2: usize = 0x2c;
    pub const LNKCTL2: usize = 0x30;
    pub const LNKSTA2: usize = 0x32;
    /// Size of a version 2 PCI Express capability for an endpoint.
    pub const SIZE: usize = 0x3c;

    pub const FLAGS_VERSION_2: u16 = 0x2;
    pub const DEVCAP_EXT_TAG: u32 = 1 << 5;
    pub const DEVCAP_RBER: u32 = 1 << 15;
    pub const DEVCAP_FLR: u32 = 1 << 28;
    pub const DEVCTL_CERE: u16 = 1 << 0;
    pub const DEVCTL_NFERE: u16 = 1 << 1;
    pub const DEVCTL_FERE: u16 = 1 << 2;
    pub const DEVCTL_URRE: u16 = 1 << 3;
    pub const DEVCTL_RELAX_EN: u16 = 1 << 4;
    pub const DEVCTL_NOSNOOP_EN: u16 = 1 << 11;
    /// Initiate Function Level Reset: always reads 0.
    pub const DEVCTL_BCR_FLR: u16 = 1 << 15;
    pub const DEVSTA_CED: u16 = 1 << 0;
    pub const DEVSTA_NFED: u16 = 1 << 1;
    pub const DEVSTA_FED: u16 = 1 << 2;
    pub const DEVSTA_URD: u16 = 1 << 3;
}

/// Register offsets inside the AER capability (PCIe Base 4.0, 7.8.4).
pub mod aer {
    pub const UNCOR_STATUS: usize = 0x04;
    pub const UNCOR_MASK: usize = 0x08;
    pub const UNCOR_SEVER: usize = 0x0c;
    pub const COR_STATUS: usize = 0x10;
    pub const COR_MASK: usize = 0x14;
    pub const CAP_CTRL: usize = 0x18;
    pub const HEADER_LOG: usize = 0x1c;
    /// An endpoint without TLP prefix support ends after the header log.
    pub const SIZE: usize = 0x2c;

    /// Uncorrectable errors an endpoint can report: Data Link Protocol,
    /// Surprise Down, Poisoned TLP, Flow Control Protocol, Completion
    /// Timeout, Completer Abort, Unexpected Completion, Receiver Overflow,
    /// Malformed TLP, ECRC, Unsupported Request, Uncorrectable Internal.
    pub const UNCOR_IMPLEMENTED: u32 = 0x005f_f030;
    pub const UNC_DLP: u32 = 1 << 4;
    pub const UNC_COMP_TIME: u32 = 1 << 14;
    pub const UNC_INTN: u32 = 1 << 22;
    /// Default severity: DLP, Surprise Down, FCP, Receiver Overflow,
    /// Malformed TLP and Uncorrectable Internal are fatal (PCIe Base 7.8.4.4).
    pub const UNCOR_SEVER_DEFAULT: u32 = 0x0046_2030;
    /// Default mask: Uncorrectable Internal Error masked (PCIe Base 7.8.4.3).
    pub const UNCOR_MASK_DEFAULT: u32 = UNC_INTN;
    /// Correctable errors: Receiver Error, Bad TLP, Bad DLLP, REPLAY_NUM
    /// Rollover, Replay Timer Timeout, Advisory Non-Fatal, Corrected
    /// Internal, Header Log Overflow.
    pub const COR_IMPLEMENTED: u32 = 0x0000_f1c1;
    pub const COR_BAD_TLP: u32 = 1 << 6;
    /// Default mask: Advisory Non-Fatal, Corrected Internal and Header Log
    /// Overflow masked (PCIe Base 7.8.4.6).
    pub const COR_MASK_DEFAULT: u32 = 0x0000_e000;
    /// First Error Pointer field of the capabilities and control register.
    pub const CAP_CTRL_FEP: u32 = 0x1f;
}

/// Offsets inside the MSI capability (64-bit layout with per-vector masking,
/// PCI Local Bus 3.0, 6.8.1).
pub mod msi {
    pub const FLAGS: usize = 0x02;
    pub const ADDRESS_LO: usize = 0x04;
    pub const ADDRESS_HI: usize = 0x08;
    pub const DATA: usize = 0x0c;
    pub const MASK: usize = 0x10;
    pub const PENDING: usize = 0x14;
    pub const SIZE: usize = 0x18;

    pub const FLAGS_ENABLE: u16 = 1 << 0;
    pub const FLAGS_QMASK: u16 = 0x7 << 1;
    pub const FLAGS_QSIZE: u16 = 0x7 << 4;
    pub const FLAGS_64BIT: u16 = 1 << 7;
    pub const FLAGS_MASKBIT: u16 = 1 << 8;
}

/// Offsets inside the PM capability (PCI PM 1.2, 3.2).
pub mod pm {
    pub const PMC: usize = 0x02;
    pub const CTRL: usize = 0x04;
    pub const SIZE: usize = 0x08;
    pub const CTRL_STATE_MASK: u16 = 0x3;
    pub const CTRL_NO_SOFT_RESET: u16 = 1 << 3;
}

/// The card's device ID.
pub fn device_id(arch: Arch) -> u16 {
    match arch {
        Arch::Wormhole => DEVICE_ID_WORMHOLE,
        Arch::Blackhole => DEVICE_ID_BLACKHOLE,
    }
}

/// The subsystem ID, which Tenstorrent sets to the board type ("UPI") of
/// the board ID: tt-kmd 2.10 enumerate.c and tt-umd's tests take subsystem
/// 0x0035 / 0x0047 for Galaxy boards, the UPIs luwen and tt-umd map to
/// "galaxy-wormhole" / "galaxy-blackhole"; the same tables give 0x18 for an
/// n150 and 0x40 for a p150a, and a p150a's lspci shows "Subsystem:
/// Tenstorrent Inc Device 0040".
pub fn subsystem_id(arch: Arch) -> u16 {
    match arch {
        Arch::Wormhole => 0x0018,
        Arch::Blackhole => 0x0040,
    }
}

/// Revision ID: tt-umd refuses a Wormhole B0 whose revision is not 0x01
/// (pci_device.cpp); a Blackhole's lspci line shows no "(rev ..)", so 0.
pub fn revision(arch: Arch) -> u8 {
    match arch {
        Arch::Wormhole => 0x01,
        Arch::Blackhole => 0x00,
    }
}

/// Size of BAR `bar` (0-5) in bytes; 0 when the BAR does not exist,
/// including the upper halves of 64-bit BARs.
///
/// Blackhole's BAR4 holds the 4 GiB TLB windows: tt-kmd 2.10 blackhole.c
/// counts them as BAR4 length / 4 GiB, and a real p150a has 32 GiB (8
/// windows: tt-zephyr-platforms P150A fw_table.txt, `pcie_bar4_size:
/// 32768` MiB). We model 8 GiB (2 windows) so that two emulated cards fit
/// QEMU q35's default 32 GiB 64-bit PCI hole with room for alignment.
pub fn bar_size(arch: Arch, bar: usize) -> u64 {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match (arch, bar) {
        (_, 0) => 512 * MIB,
        (_, 2) => MIB,
        (Arch::Wormhole, 4) => 32 * MIB,
        (Arch::Blackhole, 4) => 8 * GIB,
        _ => 0,
    }
}

/// The type bits (3:0) of BAR `bar`'s register: BAR0 and BAR4 are 64-bit
/// prefetchable memory (0xc), BAR2 32-bit non-prefetchable memory (0x0), as
/// a real n150 reports them.
fn bar_type_bits(bar: usize) -> u32 {
    match bar {
        0 | 4 => BAR_MEM_TYPE_64 | BAR_MEM_PREFETCH,
        _ => 0,
    }
}

/// Memory BAR type field value for a 64-bit BAR (PCI Local Bus 3.0, 6.2.5.1).
pub const BAR_MEM_TYPE_64: u32 = 0x4;
/// Memory BAR prefetchable bit.
pub const BAR_MEM_PREFETCH: u32 = 0x8;

/// Kinds of AER error the fault injector can raise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AerError {
    /// A correctable error (logged as Bad TLP).
    Correctable,
    /// An uncorrectable error of non-fatal default severity (logged as
    /// Completion Timeout).
    NonFatal,
    /// An uncorrectable error of fatal default severity (logged as Data
    /// Link Protocol Error).
    Fatal,
}

/// What a config write asks of the rest of the card.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigEvent {
    /// Nothing beyond the register change.
    None,
    /// Initiate Function Level Reset was written: config space has already
    /// been reset as an FLR does; the card must reset too.
    FunctionLevelReset,
    /// Bus Master Enable changed to this value.
    BusMaster(bool),
    /// The interface timer was forced pending. On Blackhole its interrupt is
    /// wired to the firmware's chip reset request (tt-zephyr-platforms
    /// bh_arc/pcie.c connects the PCIe error interrupt to
    /// `ChipResetRequest`), which is how tt-kmd's CONFIG_WRITE and
    /// ASIC_RESET resets work; the caller decides whether the firmware is
    /// alive to act on it, then resets the chip and calls
    /// [`ConfigSpace::fundamental_reset`].
    ChipResetRequest,
}

const N: usize = CONFIG_SPACE_SIZE;

/// A configuration space image with its access rules.
pub struct ConfigSpace {
    arch: Arch,
    regs: Box<[u8; N]>,
    /// The image at power-on, what resets go back to.
    power_on: Box<[u8; N]>,
    /// Bits software can write.
    rw: Box<[u8; N]>,
    /// Bits software clears by writing 1.
    rw1c: Box<[u8; N]>,
    /// Sticky bits (RWS, RW1CS, ROS): kept by conventional reset and FLR,
    /// lost only at a fundamental reset (PCIe Base 4.0, 7.4).
    sticky: Box<[u8; N]>,
    /// Link state an FLR must leave alone (PCIe Base 4.0, 6.6.2: FLR does
    /// not affect the link): Link Control and Link Control 2.
    link: Box<[u8; N]>,
}

/// Builds the image and masks: each field is set once with its value and
/// its access type.
struct Builder {
    regs: Box<[u8; N]>,
    rw: Box<[u8; N]>,
    rw1c: Box<[u8; N]>,
    sticky: Box<[u8; N]>,
    link: Box<[u8; N]>,
}

impl Builder {
    fn new() -> Self {
        Builder {
            regs: Box::new([0; N]),
            rw: Box::new([0; N]),
            rw1c: Box::new([0; N]),
            sticky: Box::new([0; N]),
            link: Box::new([0; N]),
        }
    }

    fn put(buf: &mut [u8; N], off: usize, bytes: &[u8]) {
        buf[off..off + bytes.len()].copy_from_slice(bytes);
    }

    /// A register of `width` bytes with initial value `value`, writable
    /// bits `rw` and write-1-to-clear bits `rw1c`.
    fn reg(&mut self, off: usize, width: usize, value: u32, rw: u32, rw1c: u32) -> &mut Self {
        Self::put(&mut self.regs, off, &value.to_le_bytes()[..width]);
        Self::put(&mut self.rw, off, &rw.to_le_bytes()[..width]);
        Self::put(&mut self.rw1c, off, &rw1c.to_le_bytes()[..width]);
        self
    }

    fn ro8(&mut self, off: usize, value: u8) -> &mut Self {
        self.reg(off, 1, value.into(), 0, 0)
    }

    fn ro16(&mut self, off: usize, value: u16) -> &mut Self {
        self.reg(off, 2, value.into(), 0, 0)
    }

    fn ro32(&mut self, off: usize, value: u32) -> &mut Self {
        self.reg(off, 4, value, 0, 0)
    }

    fn sticky(&mut self, off: usize, width: usize) -> &mut Self {
        self.sticky[off..off + width].fill(0xff);
        self
    }

    fn link(&mut self, off: usize, width: usize) -> &mut Self {
        self.link[off..off + width].fill(0xff);
        self
    }
}

fn build(arch: Arch) -> Builder {
    let mut b = Builder::new();

    // Type 0 header.
    b.ro16(hdr::VENDOR_ID, VENDOR_TENSTORRENT)
        .ro16(hdr::DEVICE_ID, device_id(arch))
        // No I/O BARs, so I/O Space Enable is hardwired to 0; the other
        // writable bits are those a PCIe function implements (PCIe Base
        // 4.0, 7.5.1.1.3).
        .reg(
            hdr::COMMAND,
            2,
            0,
            u32::from(
                hdr::COMMAND_MEMORY
                    | hdr::COMMAND_MASTER
                    | hdr::COMMAND_PARITY
                    | hdr::COMMAND_SERR
                    | hdr::COMMAND_INTX_DISABLE,
            ),
            0,
        )
        // Master Data Parity Error, Signaled/Received Target Abort,
        // Received Master Abort, Signaled System Error, Detected Parity
        // Error are RW1C.
        .reg(hdr::STATUS, 2, hdr::STATUS_CAP_LIST.into(), 0, 0xf900)
        .ro8(hdr::REVISION_ID, revision(arch))
        .reg(hdr::CLASS_PROG, 3, CLASS_CODE, 0, 0)
        .reg(hdr::CACHE_LINE_SIZE, 1, 0, 0xff, 0)
        .ro8(hdr::HEADER_TYPE, 0x00);
    let mut bar = 0;
    while bar < 6 {
        let size = bar_size(arch, bar);
        let off = hdr::BAR0 + 4 * bar;
        if size == 0 {
            bar += 1;
            continue;
        }
        let type_bits = bar_type_bits(bar);
        let addr_mask = !(size - 1);
        b.reg(off, 4, type_bits, (addr_mask as u32) & !0xf, 0);
        if type_bits & BAR_MEM_TYPE_64 != 0 {
            b.reg(off + 4, 4, 0, (addr_mask >> 32) as u32, 0);
            bar += 2;
        } else {
            bar += 1;
        }
    }
    b.ro16(hdr::SUBSYSTEM_VENDOR_ID, VENDOR_TENSTORRENT)
        .ro16(hdr::SUBSYSTEM_ID, subsystem_id(arch))
        .ro32(hdr::ROM_ADDRESS, 0)
        .ro8(hdr::CAPABILITIES_POINTER, PM_CAP as u8)
        .reg(hdr::INTERRUPT_LINE, 1, 0, 0xff, 0)
        // No INTx: tt-kmd asks for one vector of any type and gets MSI,
        // and an interrupt pin would make QEMU wire up INTx for nothing.
        .ro8(hdr::INTERRUPT_PIN, 0);

    // Power Management, version 3 (PCI PM 1.2), D0 and D3hot only, no PME.
    // No_Soft_Reset: D3hot -> D0 keeps the card's state, so a power state
    // change never needs a reset to be modelled.
    b.ro8(PM_CAP, cap_id::PM)
        .ro8(PM_CAP + 1, MSI_CAP as u8)
        .ro16(PM_CAP + pm::PMC, 0x0003)
        .reg(
            PM_CAP + pm::CTRL,
            2,
            pm::CTRL_NO_SOFT_RESET.into(),
            pm::CTRL_STATE_MASK.into(),
            0,
        )
        .ro16(PM_CAP + pm::CTRL + 2, 0);

    // MSI: one vector, 64-bit, per-vector masking (bh_arc/pcie_msi.c
    // default 0x01807005). A real n150 offers 32 vectors; tt-kmd uses one.
    b.ro8(MSI_CAP, cap_id::MSI)
        .ro8(MSI_CAP + 1, PCIE_CAP as u8)
        .reg(
            MSI_CAP + msi::FLAGS,
            2,
            (msi::FLAGS_64BIT | msi::FLAGS_MASKBIT).into(),
            (msi::FLAGS_ENABLE | msi::FLAGS_QSIZE).into(),
            0,
        )
        .reg(MSI_CAP + msi::ADDRESS_LO, 4, 0, 0xffff_fffc, 0)
        .reg(MSI_CAP + msi::ADDRESS_HI, 4, 0, 0xffff_ffff, 0)
        .reg(MSI_CAP + msi::DATA, 2, 0, 0xffff, 0)
        .reg(MSI_CAP + msi::MASK, 4, 0, 0x1, 0)
        .ro32(MSI_CAP + msi::PENDING, 0);

    // PCI Express capability, version 2, endpoint.
    // Wormhole links at 16 GT/s (a real n150 has the Physical Layer 16.0
    // GT/s capability), Blackhole at 32 GT/s ("16 PCIe 5.0 lanes",
    // tt-system-firmware docs); both x16.
    let max_speed: u32 = match arch {
        Arch::Wormhole => 4,
        Arch::Blackhole => 5,
    };
    let width: u32 = 16;
    // Supported Link Speeds Vector: every speed up to the maximum.
    let speeds_vector: u32 = ((1 << max_speed) - 1) << 1;
    let devcap = exp::DEVCAP_FLR
        | exp::DEVCAP_RBER
        // Endpoint L0s and L1 acceptable latency: no limit.
        | (7 << 9)
        | (7 << 6)
        | exp::DEVCAP_EXT_TAG
        // Max_Payload_Size Supported: 256 bytes.
        | 1;
    // Error reporting enables, relaxed ordering, MPS, extended tag, no
    // snoop and max read request size are writable. Aux Power PM and
    // Phantom Functions are not supported, so their bits stay 0.
    let devctl_rw: u32 = 0x79ff;
    // Defaults: relaxed ordering and no snoop enabled, MRRS 512 bytes
    // (PCIe Base 4.0, 7.5.3.4).
    let devctl_default = u32::from(exp::DEVCTL_RELAX_EN | exp::DEVCTL_NOSNOOP_EN) | (0b010 << 12);
    b.ro8(PCIE_CAP, cap_id::EXP)
        .ro8(PCIE_CAP + 1, 0)
        .ro16(PCIE_CAP + exp::FLAGS, exp::FLAGS_VERSION_2)
        .ro32(PCIE_CAP + exp::DEVCAP, devcap)
        .reg(PCIE_CAP + exp::DEVCTL, 2, devctl_default, devctl_rw, 0)
        .reg(PCIE_CAP + exp::DEVSTA, 2, 0, 0, 0x000f)
        // ASPM Optionality Compliance, no ASPM, port 0.
        .ro32(PCIE_CAP + exp::LNKCAP, (1 << 22) | (width << 4) | max_speed)
        // ASPM Control, RCB, Common Clock Configuration, Extended Synch.
        .reg(PCIE_CAP + exp::LNKCTL, 2, 0, 0x00cb, 0)
        .link(PCIE_CAP + exp::LNKCTL, 2)
        // Slot Clock Configuration, negotiated width and current speed.
        .ro16(
            PCIE_CAP + exp::LNKSTA,
            ((1 << 12) | (width << 4) | max_speed) as u16,
        )
        // Completion timeout ranges A-D and Completion Timeout Disable.
        .ro32(PCIE_CAP + exp::DEVCAP2, 0x1f)
        .reg(PCIE_CAP + exp::DEVCTL2, 2, 0, 0x001f, 0)
        .ro32(PCIE_CAP + exp::LNKCAP2, speeds_vector)
        // Target Link Speed, Enter Compliance, Hardware Autonomous Speed
        // Disable; the target defaults to the highest speed.
        .reg(PCIE_CAP + exp::LNKCTL2, 2, max_speed, 0x003f, 0)
        .link(PCIE_CAP + exp::LNKCTL2, 2)
        // Equalization complete, phases 1-3 successful (Gen3 and above).
        .ro16(PCIE_CAP + exp::LNKSTA2, 0x001e);

    // AER, version 2, last in the chain.
    b.ro32(AER_CAP, u32::from(cap_id::EXT_AER) | (2 << 16))
        .reg(AER_CAP + aer::UNCOR_STATUS, 4, 0, 0, aer::UNCOR_IMPLEMENTED)
        .reg(
            AER_CAP + aer::UNCOR_MASK,
            4,
            aer::UNCOR_MASK_DEFAULT,
            aer::UNCOR_IMPLEMENTED,
            0,
        )
        .reg(
            AER_CAP + aer::UNCOR_SEVER,
            4,
            aer::UNCOR_SEVER_DEFAULT,
            aer::UNCOR_IMPLEMENTED,
            0,
        )
        .reg(AER_CAP + aer::COR_STATUS, 4, 0, 0, aer::COR_IMPLEMENTED)
        .reg(
            AER_CAP + aer::COR_MASK,
            4,
            aer::COR_MASK_DEFAULT,
            aer::COR_IMPLEMENTED,
            0,
        )
        // No ECRC generation or checking, no multiple header recording:
        // nothing writable, the First Error Pointer is ROS.
        .ro32(AER_CAP + aer::CAP_CTRL, 0)
        .sticky(AER_CAP + aer::UNCOR_STATUS, aer::SIZE - aer::UNCOR_STATUS);

    // The interface timer registers hold what is written (tt-kmd writes
    // them whole dwords).
    b.reg(INTERFACE_TIMER_CONTROL_OFF, 4, 0, 0xffff_ffff, 0)
        .reg(INTERFACE_TIMER_TARGET_OFF, 4, 0, 0xffff_ffff, 0);
    b
}

impl ConfigSpace {
    /// The configuration space of a freshly powered card.
    pub fn new(arch: Arch) -> Self {
        let b = build(arch);
        ConfigSpace {
            arch,
            power_on: b.regs.clone(),
            regs: b.regs,
            rw: b.rw,
            rw1c: b.rw1c,
            sticky: b.sticky,
            link: b.link,
        }
    }

    /// Which chip this is the config space of.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Reads `data.len()` bytes at `offset`; bytes beyond the 4 KiB read as
    /// all ones, as an unclaimed config read does.
    pub fn read(&self, offset: u64, data: &mut [u8]) {
        for (i, byte) in data.iter_mut().enumerate() {
            *byte = usize::try_from(offset)
                .ok()
                .and_then(|o| o.checked_add(i))
                .and_then(|o| self.regs.get(o))
                .copied()
                .unwrap_or(0xff);
        }
    }

    /// Reads a little-endian 16-bit register.
    pub fn read_u16(&self, offset: usize) -> u16 {
        let mut b = [0; 2];
        self.read(offset as u64, &mut b);
        u16::from_le_bytes(b)
    }

    /// Reads a little-endian 32-bit register.
    pub fn read_u32(&self, offset: usize) -> u32 {
        let mut b = [0; 4];
        self.read(offset as u64, &mut b);
        u32::from_le_bytes(b)
    }

    /// Whether Bus Master Enable is set: only then does the function reach
    /// host memory (the PCIe tile's outbound path and the control socket's
    /// `dma-read`/`dma-write` answer no response / an error otherwise).
    pub fn bus_master_enabled(&self) -> bool {
        self.read_u16(hdr::COMMAND) & hdr::COMMAND_MASTER != 0
    }

    /// Writes `data` at `offset`: read-only bits keep their value, RW1C bits
    /// clear where a 1 is written, bytes beyond the 4 KiB are dropped.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> ConfigEvent {
        let Ok(start) = usize::try_from(offset) else {
            return ConfigEvent::None;
        };
        if start >= N {
            return ConfigEvent::None;
        }
        let end = start.saturating_add(data.len()).min(N);
        let covers = |off: usize| (start..end).contains(&off);
        let byte_at = |off: usize| data[off - start];

        // Initiate FLR lives in the high byte of DevCtl; it is not a
        // stored bit, so look for it in what was written.
        let flr_byte = PCIE_CAP + exp::DEVCTL + 1;
        if covers(flr_byte) && byte_at(flr_byte) & ((exp::DEVCTL_BCR_FLR >> 8) as u8) != 0 {
            self.function_level_reset();
            return ConfigEvent::FunctionLevelReset;
        }

        let old_master = self.bus_master_enabled();
        let old_pm_state = self.read_u16(PM_CAP + pm::CTRL) & pm::CTRL_STATE_MASK;
        for off in start..end {
            let v = byte_at(off);
            let mut new = (self.regs[off] & !self.rw[off]) | (v & self.rw[off]);
            new &= !(v & self.rw1c[off]);
            self.regs[off] = new;
        }

        // D1 and D2 are not supported: a write asking for them leaves the
        // power state unchanged (PCI PM 1.2, 3.2.4).
        let pm_state = self.read_u16(PM_CAP + pm::CTRL) & pm::CTRL_STATE_MASK;
        if pm_state == 1 || pm_state == 2 {
            let off = PM_CAP + pm::CTRL;
            self.regs[off] = (self.regs[off] & !(pm::CTRL_STATE_MASK as u8)) | old_pm_state as u8;
        }

        if self.arch == Arch::Blackhole
            && (start..end).any(|o| {
                (INTERFACE_TIMER_CONTROL_OFF..INTERFACE_TIMER_CONTROL_OFF + 4).contains(&o)
            })
        {
            let ctl = self.read_u32(INTERFACE_TIMER_CONTROL_OFF);
            let fire = INTERFACE_TIMER_EN | INTERFACE_FORCE_PENDING;
            if ctl & fire == fire {
                return ConfigEvent::ChipResetRequest;
            }
        }

        let master = self.bus_master_enabled();
        if master != old_master {
            return ConfigEvent::BusMaster(master);
        }
        ConfigEvent::None
    }

    /// A conventional reset (hot reset from a secondary bus reset, or the
    /// vfio-user reset message): every register back to its power-on value
    /// except the sticky ones.
    pub fn reset(&mut self) {
        self.reset_keeping(|s, i| s.sticky[i]);
    }

    /// What an FLR does: as a conventional reset, and the link control
    /// registers are left alone.
    pub fn function_level_reset(&mut self) {
        self.reset_keeping(|s, i| s.sticky[i] | s.link[i]);
    }

    /// A fundamental reset (power-on, or the chip resetting its PCIe
    /// controller): everything back to power-on values, sticky bits too.
    pub fn fundamental_reset(&mut self) {
        self.regs.copy_from_slice(&self.power_on[..]);
    }

    fn reset_keeping(&mut self, keep: impl Fn(&Self, usize) -> u8) {
        for i in 0..N {
            let k = keep(self, i);
            self.regs[i] = (self.power_on[i] & !k) | (self.regs[i] & k);
        }
    }

    fn set_u16(&mut self, off: usize, v: u16) {
        self.regs[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn set_u32(&mut self, off: usize, v: u32) {
        self.regs[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// Logs an error as the card's PCIe controller would on detecting it:
    /// the AER status bit, the First Error Pointer for uncorrectable
    /// errors, and the Device Status "detected" bit unless AER masks it
    /// (PCIe Base 4.0, 6.2.5 and 7.5.3.5).
    ///
    /// No error message reaches the root port: QEMU's vfio-user client has
    /// no path for one (its ERR interrupt stops the VM instead), so the
    /// guest sees the error only by reading config space.
    pub fn raise_aer(&mut self, kind: AerError) {
        let devsta_off = PCIE_CAP + exp::DEVSTA;
        let mut devsta = self.read_u16(devsta_off);
        match kind {
            AerError::Correctable => {
                let bit = aer::COR_BAD_TLP;
                let status = self.read_u32(AER_CAP + aer::COR_STATUS);
                self.set_u32(AER_CAP + aer::COR_STATUS, status | bit);
                if self.read_u32(AER_CAP + aer::COR_MASK) & bit == 0 {
                    devsta |= exp::DEVSTA_CED;
                }
            }
            AerError::NonFatal | AerError::Fatal => {
                let bit = if kind == AerError::Fatal {
                    aer::UNC_DLP
                } else {
                    aer::UNC_COMP_TIME
                };
                let status = self.read_u32(AER_CAP + aer::UNCOR_STATUS);
                let ctrl = self.read_u32(AER_CAP + aer::CAP_CTRL);
                // The First Error Pointer stays on an earlier error whose
                // status bit software has not cleared yet.
                let fep = ctrl & aer::CAP_CTRL_FEP;
                if status & (1 << fep) == 0 {
                    let new_ctrl = (ctrl & !aer::CAP_CTRL_FEP) | bit.trailing_zeros();
                    self.set_u32(AER_CAP + aer::CAP_CTRL, new_ctrl);
                }
                self.set_u32(AER_CAP + aer::UNCOR_STATUS, status | bit);
                if self.read_u32(AER_CAP + aer::UNCOR_MASK) & bit == 0 {
                    // The severity register, not the kind asked for,
                    // decides: software may have changed it.
                    if self.read_u32(AER_CAP + aer::UNCOR_SEVER) & bit != 0 {
                        devsta |= exp::DEVSTA_FED;
                    } else {
                        devsta |= exp::DEVSTA_NFED;
                    }
                }
            }
        }
        self.set_u16(devsta_off, devsta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARCHES: [Arch; 2] = [Arch::Wormhole, Arch::Blackhole];

    fn r8(c: &ConfigSpace, off: usize) -> u8 {
        let mut b = [0];
        c.read(off as u64, &mut b);
        b[0]
    }

    /// Walks the capability list the way tt-kmd's test/config_space.cpp
    /// does: pointer at 0x34 masked with 0xfc, ID at +0, next at +1.
    fn find_capability(c: &ConfigSpace, id: u8) -> Option<usize> {
        let mut off = usize::from(r8(c, 0x34) & 0xfc);
        let mut hops = 0;
        while off != 0 && hops < 48 {
            if r8(c, off) == id {
                return Some(off);
            }
            off = usize::from(r8(c, off + 1));
            hops += 1;
        }
        None
    }

    #[test]
    fn identity_matches_the_sources() {
        let wh = ConfigSpace::new(Arch::Wormhole);
        assert_eq!(wh.read_u16(0x00), 0x1e52);
        assert_eq!(wh.read_u16(0x02), 0x401e);
        assert_eq!(r8(&wh, 0x08), 0x01);
        assert_eq!(wh.read_u16(0x2c), 0x1e52);
        assert_eq!(wh.read_u16(0x2e), 0x0018);

        let bh = ConfigSpace::new(Arch::Blackhole);
        assert_eq!(bh.read_u16(0x00), 0x1e52);
        assert_eq!(bh.read_u16(0x02), 0xb140);
        assert_eq!(r8(&bh, 0x08), 0x00);
        assert_eq!(bh.read_u16(0x2c), 0x1e52);
        assert_eq!(bh.read_u16(0x2e), 0x0040);

        for c in [&wh, &bh] {
            // Class 0x12 (processing accelerator), subclass 0, prog-if 0.
            assert_eq!(r8(c, 0x0b), 0x12);
            assert_eq!(r8(c, 0x0a), 0x00);
            assert_eq!(r8(c, 0x09), 0x00);
            // Type 0 header, single function.
            assert_eq!(r8(c, 0x0e), 0x00);
            // Status: capabilities list present.
            assert_ne!(c.read_u16(0x06) & 0x10, 0);
        }
    }

    #[test]
    fn capability_chain_is_that_of_a_real_card() {
        for arch in ARCHES {
            let c = ConfigSpace::new(arch);
            // lspci -v of an n150: PM at 0x40, MSI at 0x50, Express at 0x70.
            assert_eq!(find_capability(&c, 0x01), Some(0x40));
            assert_eq!(find_capability(&c, 0x05), Some(0x50));
            assert_eq!(find_capability(&c, 0x10), Some(0x70));
            // Blackhole firmware's MSI capability register default.
            assert_eq!(c.read_u32(0x50) & 0x0180_ffff, 0x0180_7005);
            // Extended capabilities start with AER (ID 1, version 2) at
            // 0x100.
            let ext = c.read_u32(0x100);
            assert_eq!(ext & 0xffff, 0x0001);
            assert_eq!((ext >> 16) & 0xf, 2);
        }
    }

    #[test]
    fn msi_is_64_bit_one_vector_and_can_be_enabled() {
        for arch in ARCHES {
            let mut c = ConfigSpace::new(arch);
            let msi = find_capability(&c, 0x05).unwrap();
            let ctrl = c.read_u16(msi + 2);
            // tt-kmd's test: 0x80 is "64-bit address capable".
            assert_ne!(ctrl & 0x80, 0);
            // Multiple Message Capable (bits 3:1) = 0: one vector.
            assert_eq!(ctrl & 0x0e, 0);
            // What tt-kmd's VerifyMSI reads back after the kernel set it up.
            let _ = c.write((msi + 4) as u64, &0xfee0_0000u32.to_le_bytes());
            let _ = c.write((msi + 8) as u64, &0u32.to_le_bytes());
            let _ = c.write((msi + 2) as u64, &(ctrl | 1).to_le_bytes());
            assert_eq!(c.read_u16(msi + 2) & 1, 1);
            assert_eq!(c.read_u32(msi + 4), 0xfee0_0000);
            // Message address bits 1:0 are reserved zero.
            let _ = c.write((msi + 4) as u64, &0xffff_ffffu32.to_le_bytes());
            assert_eq!(c.read_u32(msi + 4), 0xffff_fffc);
        }
    }

    #[test]
    fn pcie_capability_is_an_flr_capable_endpoint() {
        for arch in ARCHES {
            let c = ConfigSpace::new(arch);
            let exp = find_capability(&c, 0x10).unwrap();
            let flags = c.read_u16(exp + 2);
            // Device/port type (7:4) 0: PCI Express endpoint.
            assert_eq!((flags >> 4) & 0xf, 0);
            assert_eq!(flags & 0xf, 2);
            // DevCap bit 28: Function Level Reset capability.
            assert_ne!(c.read_u32(exp + 4) & (1 << 28), 0);
            // Link: x16.
            assert_eq!((c.read_u32(exp + 0x0c) >> 4) & 0x3f, 16);
        }
    }

    #[test]
    fn bars_have_the_sizes_and_types_of_a_real_card() {
        for arch in ARCHES {
            let mut c = ConfigSpace::new(arch);
            // BAR0 and BAR4: 64-bit prefetchable memory; BAR2: 32-bit
            // non-prefetchable memory (lspci of an n150).
            assert_eq!(c.read_u32(0x10) & 0xf, 0xc);
            assert_eq!(c.read_u32(0x18) & 0xf, 0x0);
            assert_eq!(c.read_u32(0x20) & 0xf, 0xc);
            // Sizing: write all ones, read the size mask back.
            for off in (0x10..0x28).step_by(4) {
                let _ = c.write(off as u64, &[0xff; 4]);
            }
            let bar0 = u64::from(c.read_u32(0x10) & !0xf) | (u64::from(c.read_u32(0x14)) << 32);
            assert_eq!(!bar0 + 1, 512 << 20);
            assert_eq!(!(c.read_u32(0x18) & !0xf) + 1, 1 << 20);
            // BAR3 and BAR5 do not exist (BAR2 is 32-bit, BAR5 is BAR4's
            // upper half).
            assert_eq!(c.read_u32(0x1c), 0);
            let bar4 = u64::from(c.read_u32(0x20) & !0xf) | (u64::from(c.read_u32(0x24)) << 32);
            let expected: u64 = match arch {
                Arch::Wormhole => 32 << 20,
                // Two 4 GiB windows, the 4 GiB window size of tt-kmd
                // blackhole.c.
                Arch::Blackhole => 2 * (4 << 30),
            };
            assert_eq!(!bar4 + 1, expected);
            assert_eq!(bar_size(arch, 4), expected);
            assert_eq!(bar_size(arch, 1), 0);
            assert_eq!(bar_size(arch, 3), 0);
            assert_eq!(bar_size(arch, 5), 0);
            assert_eq!(bar_size(arch, 6), 0);
        }
    }

    #[test]
    fn read_only_registers_ignore_writes() {
        let mut c = ConfigSpace::new(Arch::Wormhole);
        let _ = c.write(0, &[0, 0, 0, 0]);
        assert_eq!(c.read_u32(0), 0x401e_1e52);
        let _ = c.write(0x2c, &[0; 4]);
        assert_eq!(c.read_u16(0x2e), 0x0018);
        // The capability pointer and chain are read-only too.
        let _ = c.write(0x34, &[0]);
        assert_eq!(r8(&c, 0x34), 0x40);
        // I/O Space Enable is hardwired to 0: there are no I/O BARs.
        let _ = c.write(0x04, &0xffffu16.to_le_bytes());
        assert_eq!(c.read_u16(0x04) & 1, 0);
    }

    #[test]
    fn command_bits_tt_kmd_relies_on_are_writable() {
        let mut c = ConfigSpace::new(Arch::Blackhole);
        // VerifyCommand: memory space and bus master enable.
        assert_eq!(
            c.write(0x04, &0x0006u16.to_le_bytes()),
            ConfigEvent::BusMaster(true)
        );
        assert_eq!(c.read_u16(0x04) & 0x6, 0x6);
        // The reset marker: parity error response, set then cleared by a
        // reset.
        let cmd = c.read_u16(0x04);
        assert_eq!(
            c.write(0x04, &(cmd | 0x40).to_le_bytes()),
            ConfigEvent::None
        );
        assert_ne!(c.read_u16(0x04) & 0x40, 0);
        c.reset();
        assert_eq!(c.read_u16(0x04) & 0x40, 0);
        assert_eq!(c.read_u16(0x04), 0);
    }

    #[test]
    fn devctl_error_reporting_enables_stick() {
        // tt-kmd's VerifyAER reads them back after the kernel enabled AER.
        let mut c = ConfigSpace::new(Arch::Wormhole);
        let devctl = 0x70 + 8;
        let v = c.read_u16(devctl) | 0xf;
        let _ = c.write(devctl as u64, &v.to_le_bytes());
        assert_eq!(c.read_u16(devctl) & 0xf, 0xf);
    }

    #[test]
    fn initiate_flr_resets_config_space() {
        for arch in ARCHES {
            let mut c = ConfigSpace::new(arch);
            let devctl = 0x70 + 8;
            let _ = c.write(0x04, &0x0046u16.to_le_bytes());
            let _ = c.write(devctl as u64, &0x000fu16.to_le_bytes());
            let _ = c.write(0x70 + 0x10, &0x0040u16.to_le_bytes());
            c.raise_aer(AerError::NonFatal);
            let before = c.read_u16(devctl);
            // Writing bit 15 of DevCtl is the FLR request.
            let ev = c.write(devctl as u64, &(before | 0x8000).to_le_bytes());
            assert_eq!(ev, ConfigEvent::FunctionLevelReset);
            assert_eq!(c.read_u16(0x04), 0, "command register reset");
            let after = c.read_u16(devctl);
            assert_eq!(after & 0x8000, 0, "Initiate FLR reads 0");
            assert_eq!(after & 0xf, 0, "DevCtl back to defaults");
            // Sticky AER status survives an FLR, link control too.
            assert_ne!(c.read_u32(0x104) & (1 << 14), 0);
            assert_eq!(c.read_u16(0x70 + 0x10), 0x0040);
            // A one-byte write of the high byte is an FLR too.
            let ev = c.write((devctl + 1) as u64, &[0x80]);
            assert_eq!(ev, ConfigEvent::FunctionLevelReset);
            // Writing DevCtl without bit 15 is not.
            let ev = c.write(devctl as u64, &0x2810u16.to_le_bytes());
            assert_eq!(ev, ConfigEvent::None);
        }
    }

    #[test]
    fn conventional_reset_keeps_sticky_fundamental_does_not() {
        let mut c = ConfigSpace::new(Arch::Blackhole);
        c.raise_aer(AerError::Correctable);
        let _ = c.write(0x70 + 0x10, &0x0040u16.to_le_bytes());
        c.reset();
        assert_ne!(c.read_u32(0x110) & (1 << 6), 0);
        assert_eq!(c.read_u16(0x70 + 0x10), 0, "hot reset resets link control");
        c.fundamental_reset();
        assert_eq!(c.read_u32(0x110), 0);
    }

    #[test]
    fn aer_errors_set_status_and_devsta_and_clear_with_rw1c() {
        let mut c = ConfigSpace::new(Arch::Wormhole);
        let devsta = 0x70 + 0x0a;
        c.raise_aer(AerError::Correctable);
        assert_ne!(c.read_u32(0x110), 0);
        assert_eq!(c.read_u16(devsta) & 0x7, 0x1);
        c.raise_aer(AerError::NonFatal);
        assert_eq!(c.read_u16(devsta) & 0x7, 0x3);
        c.raise_aer(AerError::Fatal);
        assert_eq!(c.read_u16(devsta) & 0x7, 0x7);
        let uncor = c.read_u32(0x104);
        assert_eq!(uncor, (1 << 14) | (1 << 4));
        // First Error Pointer names the first uncorrectable error.
        assert_eq!(c.read_u32(0x118) & 0x1f, 14);

        // Writing 0 clears nothing; writing 1 clears just that bit.
        let _ = c.write(devsta as u64, &0u16.to_le_bytes());
        assert_eq!(c.read_u16(devsta) & 0x7, 0x7);
        let _ = c.write(devsta as u64, &0x2u16.to_le_bytes());
        assert_eq!(c.read_u16(devsta) & 0x7, 0x5);
        let _ = c.write(0x104, &(1u32 << 14).to_le_bytes());
        assert_eq!(c.read_u32(0x104), 1 << 4);
        let _ = c.write(0x110, &0xffff_ffffu32.to_le_bytes());
        assert_eq!(c.read_u32(0x110), 0);
        // With the earlier error cleared, the pointer moves on.
        c.raise_aer(AerError::Fatal);
        assert_eq!(c.read_u32(0x118) & 0x1f, 4);
    }

    #[test]
    fn masked_errors_are_logged_but_not_reported_in_devsta() {
        let mut c = ConfigSpace::new(Arch::Blackhole);
        let _ = c.write(0x114, &(1u32 << 6).to_le_bytes());
        c.raise_aer(AerError::Correctable);
        assert_ne!(c.read_u32(0x110) & (1 << 6), 0);
        assert_eq!(c.read_u16(0x70 + 0x0a) & 1, 0);
        // Severity decides between non-fatal and fatal.
        let _ = c.write(0x10c, &0u32.to_le_bytes());
        c.raise_aer(AerError::Fatal);
        assert_eq!(c.read_u16(0x70 + 0x0a) & 0x6, 0x2);
    }

    #[test]
    fn status_register_error_bits_are_rw1c() {
        let mut c = ConfigSpace::new(Arch::Wormhole);
        c.set_u16(0x06, 0x10 | 0x2000);
        let _ = c.write(0x06, &0x0010u16.to_le_bytes());
        assert_eq!(c.read_u16(0x06), 0x2010);
        let _ = c.write(0x06, &0x2000u16.to_le_bytes());
        assert_eq!(c.read_u16(0x06), 0x0010);
    }

    #[test]
    fn interface_timer_requests_a_chip_reset_on_blackhole() {
        // tt-kmd pcie_timer_interrupt: target 1, then EN | FORCE_PENDING.
        let mut bh = ConfigSpace::new(Arch::Blackhole);
        assert_eq!(bh.write(0x934, &1u32.to_le_bytes()), ConfigEvent::None);
        assert_eq!(
            bh.write(0x930, &0x11u32.to_le_bytes()),
            ConfigEvent::ChipResetRequest
        );
        bh.fundamental_reset();
        assert_eq!(bh.read_u32(0x930), 0);

        let mut wh = ConfigSpace::new(Arch::Wormhole);
        assert_eq!(wh.write(0x930, &0x11u32.to_le_bytes()), ConfigEvent::None);
        assert_eq!(wh.read_u32(0x930), 0x11);
    }

    #[test]
    fn unsupported_power_states_are_ignored() {
        let mut c = ConfigSpace::new(Arch::Wormhole);
        let _ = c.write(0x44, &3u16.to_le_bytes());
        assert_eq!(c.read_u16(0x44) & 3, 3);
        let _ = c.write(0x44, &1u16.to_le_bytes());
        assert_eq!(c.read_u16(0x44) & 3, 3);
        let _ = c.write(0x44, &0u16.to_le_bytes());
        assert_eq!(c.read_u16(0x44) & 3, 0);
        // No_Soft_Reset is read-only 1.
        assert_ne!(c.read_u16(0x44) & 0x8, 0);
    }

    #[test]
    fn reads_beyond_config_space_are_all_ones() {
        let c = ConfigSpace::new(Arch::Wormhole);
        let mut b = [0; 4];
        c.read(4094, &mut b);
        assert_eq!(b, [0, 0, 0xff, 0xff]);
        let mut b = [0; 4];
        c.read(u64::MAX, &mut b);
        assert_eq!(b, [0xff; 4]);
    }
}

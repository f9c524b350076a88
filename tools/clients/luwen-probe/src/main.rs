// SPDX-License-Identifier: GPL-2.0
//! luwen-probe: what luwen's kernel-driver layer (the `luwen-kmd` crate as
//! published) makes of each card on this driver.
//!
//!     luwen-probe X Y ADDR VALUE
//!
//! For every card `PciDevice::scan` finds: `PciDevice::open` (GET_DEVICE_INFO,
//! GET_DRIVER_INFO, QUERY_MAPPINGS and the BAR0 mapping at luwen's fixed
//! offset), a BAR0 read of an NIU's `NOC_NODE_ID`, and VALUE written
//! to and read back from NOC address ADDR of tile (X, Y) through a TLB
//! window luwen allocates (ALLOCATE_TLB) and aims (CONFIGURE_TLB) itself.
//! One line per card, `card N ...` with `key=value` fields; exit status 1
//! if a card failed (its line says where).

use std::process::ExitCode;

use luwen_def::Arch;
use luwen_kmd::{PciDevice, PossibleTlbAllocation, Tlb};

/// A BAR0 address of an NIU's `NOC_NODE_ID`, the register tt-umd's
/// `is_pcie_hung` reads: on Wormhole the ARC tile's NIU in ARC's AXI space
/// (0x1FF50000 + 0x2C), on Blackhole the PCIe tile's (0x1FD04000 + 0x44).
fn node_id_register(arch: Arch) -> u32 {
    if arch.is_blackhole() {
        0x1FD0_4044
    } else {
        0x1FF5_002C
    }
}

/// The window luwen itself asks for: 16 MiB on Wormhole, 2 MiB on
/// Blackhole (luwen-if `ExtendedPciDevice::open`).
fn window_size(arch: Arch) -> u64 {
    if arch.is_blackhole() {
        2 << 20
    } else {
        16 << 20
    }
}

fn probe(id: usize, x: u8, y: u8, addr: u64, value: u32) -> Result<String, String> {
    let mut dev = PciDevice::open(id).map_err(|e| format!("PciDevice::open: {e}"))?;
    let arch = dev.arch;
    let node_id = dev
        .read32(node_id_register(arch))
        .map_err(|e| format!("BAR0 read of NOC_NODE_ID: {e}"))?;
    let window = dev
        .allocate_tlb(window_size(arch))
        .map_err(|e| format!("allocate_tlb: {e}"))?;
    let window = PossibleTlbAllocation::Allocation(window);
    let target = || Tlb {
        local_offset: addr,
        x_end: x,
        y_end: y,
        ..Default::default()
    };
    dev.noc_write32(&window, target(), value)
        .map_err(|e| format!("noc_write32: {e}"))?;
    let back = dev
        .noc_read32(&window, target())
        .map_err(|e| format!("noc_read32: {e}"))?;
    Ok(format!(
        "arch={arch:?} device_id={:#06x} driver_version={} node_id={node_id:#x} \
         node_x={} node_y={} wrote={value:#x} read={back:#x}",
        dev.physical.device_id,
        dev.driver_version,
        node_id & 0x3F,
        (node_id >> 6) & 0x3F,
    ))
}

fn parse(arg: Option<String>) -> Option<u64> {
    let arg = arg?;
    match arg.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => arg.parse().ok(),
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(x), Some(y), Some(addr), Some(value)) = (
        parse(args.next()),
        parse(args.next()),
        parse(args.next()),
        parse(args.next()),
    ) else {
        eprintln!("usage: luwen-probe X Y ADDR VALUE");
        return ExitCode::from(2);
    };
    let (Ok(x), Ok(y), Ok(value)) = (u8::try_from(x), u8::try_from(y), u32::try_from(value)) else {
        eprintln!("luwen-probe: X and Y are 0..255, VALUE 32 bits");
        return ExitCode::from(2);
    };
    let cards = PciDevice::scan();
    println!("cards {}", cards.len());
    let mut failed = false;
    for id in cards {
        match probe(id, x, y, addr, value) {
            Ok(line) => println!("card {id} {line}"),
            Err(e) => {
                println!("card {id} failed: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

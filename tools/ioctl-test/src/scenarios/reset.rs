//! RESET_DEVICE as far as the driver goes (src/reset.rs): RESTORE_STATE
//! puts back the configuration space saved at probe, POST_RESET reports
//! the reset marker (Parity Error Response in the Command register), the
//! resets themselves are EOPNOTSUPP for now, unknown flags EINVAL; tt-kmd
//! 2.10's output rule. GET_HARVESTING is EINVAL, as tt-kmd answers.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use tt_arbiter::abi;

use crate::util::*;

const CACHE_LINE_SIZE: u64 = 0x0c;
const COMMAND: u64 = 0x04;
const PARITY: u16 = 1 << 6;

/// RESET_DEVICE with room for `out_size` bytes of output, prefilled with
/// 0xFF: (result of the call, the output bytes).
fn reset(dev: &impl AsRawFd, flags: u32, out_size: u32) -> (io::Result<i32>, Vec<u8>) {
    let mut buf = vec![0xFFu8; 8 + 64];
    buf[..4].copy_from_slice(&out_size.to_ne_bytes());
    buf[4..8].copy_from_slice(&flags.to_ne_bytes());
    let r = ioctl_addr(
        dev.as_raw_fd(),
        abi::IOCTL_RESET_DEVICE,
        buf.as_mut_ptr() as usize,
    );
    (r, buf[8..].to_vec())
}

/// The result RESET_DEVICE reported (8 bytes of output asked for).
fn result_of(dev: &impl AsRawFd, flags: u32) -> Result<u32, String> {
    let (r, out) = reset(dev, flags, 8);
    expect_ok(r, &format!("RESET_DEVICE {flags}"))?;
    ensure_eq!(
        u32::from_ne_bytes(out[..4].try_into().unwrap_or_default()),
        8,
        "RESET_DEVICE {flags}: output_size_bytes"
    );
    Ok(u32::from_ne_bytes(out[4..8].try_into().unwrap_or_default()))
}

fn config_rw(bdf: &str) -> Result<std::fs::File, String> {
    let path = format!("/sys/bus/pci/devices/{bdf}/config");
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("open {path}: {e}"))
}

fn read16(f: &std::fs::File, at: u64) -> Result<u16, String> {
    let mut b = [0u8; 2];
    f.read_exact_at(&mut b, at)
        .map_err(|e| format!("config read: {e}"))?;
    Ok(u16::from_le_bytes(b))
}

fn write_bytes(f: &std::fs::File, at: u64, b: &[u8]) -> TestResult {
    f.write_all_at(b, at)
        .map_err(|e| format!("config write: {e}"))
}

pub fn restore_state_and_post_reset() -> TestResult {
    for n in 0..2u32 {
        let dev = open(n)?;
        let config = config_rw(&bdf(n as usize)?)?;
        // The output rule: cleared, then {8, result}; nothing with size 0.
        let (r, out) = reset(&dev, 0, 64);
        expect_ok(r, "RESTORE_STATE")?;
        let mut want = vec![0u8; 64];
        want[..4].copy_from_slice(&8u32.to_ne_bytes());
        ensure_eq!(out, want, "card {n}: RESTORE_STATE's 64 bytes of output");
        let (r, out) = reset(&dev, 0, 0);
        expect_ok(r, "RESTORE_STATE without output")?;
        ensure!(
            out.iter().all(|&b| b == 0xFF),
            "card {n}: output written with size 0"
        );

        // A register the card lost comes back as probe saved it.
        let saved = read16(&config, CACHE_LINE_SIZE)? & 0xFF;
        let changed = (saved as u8) ^ 0x10;
        write_bytes(&config, CACHE_LINE_SIZE, &[changed])?;
        ensure_eq!(
            read16(&config, CACHE_LINE_SIZE)? & 0xFF,
            u16::from(changed),
            "written"
        );
        ensure_eq!(result_of(&dev, 0)?, 0, "card {n}: RESTORE_STATE result");
        ensure_eq!(
            read16(&config, CACHE_LINE_SIZE)? & 0xFF,
            saved,
            "card {n}: cache line size after RESTORE_STATE"
        );

        // POST_RESET: the marker.
        ensure_eq!(result_of(&dev, 6)?, 0, "card {n}: POST_RESET, marker clear");
        let command = read16(&config, COMMAND)?;
        write_bytes(&config, COMMAND, &(command | PARITY).to_le_bytes())?;
        let marked = result_of(&dev, 6);
        write_bytes(&config, COMMAND, &(command & !PARITY).to_le_bytes())?;
        ensure_eq!(marked?, 1, "card {n}: POST_RESET, marker set");
        ensure_eq!(
            result_of(&dev, 6)?,
            0,
            "card {n}: POST_RESET, marker cleared"
        );

        for flags in 1..=5 {
            let (r, out) = reset(&dev, flags, 8);
            expect_errno(r, libc::EOPNOTSUPP, &format!("RESET_DEVICE {flags}"))?;
            ensure!(
                out.iter().all(|&b| b == 0xFF),
                "card {n}: output of a refused reset"
            );
        }
        for flags in [7, 0x100, u32::MAX] {
            expect_errno(
                reset(&dev, flags, 8).0,
                libc::EINVAL,
                &format!("RESET_DEVICE {flags:#x}"),
            )?;
        }
        let mut harvesting = [0u8; 64];
        expect_errno(
            ioctl_addr(
                dev.as_raw_fd(),
                abi::io(abi::IOCTL_MAGIC, 1),
                harvesting.as_mut_ptr() as usize,
            ),
            libc::EINVAL,
            "GET_HARVESTING",
        )?;
        // The file goes on working.
        ctx(dev.device_info(), "GET_DEVICE_INFO after the resets")?;
    }
    Ok(())
}

//! Foundation: device nodes, sysfs, GET_DRIVER_INFO / GET_DEVICE_INFO, the
//! output_size_bytes rule, unknown commands and bad pointers.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use tt_arbiter::abi::{self, AbiStruct};
use tt_arbiter::Device;

use crate::util::*;

const CARDS: [u32; 2] = [0, 1];

/// Both nodes exist and the sysfs files/links the ecosystem reads hold.
pub fn nodes_and_sysfs() -> TestResult {
    let found = ctx(Device::enumerate(), "Device::enumerate")?;
    for n in CARDS {
        let path = node(n);
        let meta = fs::metadata(&path).map_err(|e| format!("stat {path}: {e}"))?;
        ensure!(
            meta.file_type().is_char_device(),
            "{path} is not a character device"
        );
        let (maj, min) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
        let want = format!("{maj}:{min}");
        let class = sysfs(&format!("/sys/class/tenstorrent/tenstorrent!{n}/dev"))?;
        ensure_eq!(
            class,
            want,
            "/sys/class/tenstorrent/tenstorrent!{n}/dev vs st_rdev of {path}"
        );
        let bdf = bdf(n as usize)?;
        let bus = sysfs(&format!(
            "/sys/bus/pci/devices/{bdf}/tenstorrent/tenstorrent!{n}/dev"
        ))?;
        ensure_eq!(
            bus,
            want,
            "/sys/bus/pci/devices/{bdf}/tenstorrent/tenstorrent!{n}/dev"
        );
        let link = format!("/sys/dev/char/{want}/subsystem");
        let target = fs::read_link(&link).map_err(|e| format!("readlink {link}: {e}"))?;
        ensure_eq!(
            target.file_name().map(|f| f.to_string_lossy().into_owned()),
            Some("tenstorrent".to_string()),
            "basename of {link} -> {}",
            target.display()
        );
        let entry = found.iter().find(|d| d.index == n);
        ensure!(
            entry.is_some(),
            "Device::enumerate did not list {path}: {found:?}"
        );
        let entry = entry.unwrap();
        ensure_eq!(
            (entry.major, entry.minor),
            (maj, min),
            "enumerated numbers of {path}"
        );
        ensure_eq!(
            entry.bdf.as_deref(),
            Some(bdf.as_str()),
            "enumerated BDF of {path}"
        );
    }
    Ok(())
}

/// Parses "major.minor.patch" (a pre-release or build suffix is ignored).
fn parse_semver(s: &str) -> Result<(u8, u8, u8), String> {
    let core = s.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    ensure!(parts.len() == 3, "version {s:?} is not major.minor.patch");
    let p = |i: usize| {
        parts[i]
            .parse::<u8>()
            .map_err(|e| format!("version {s:?}: {e}"))
    };
    Ok((p(0)?, p(1)?, p(2)?))
}

/// GET_DRIVER_INFO agrees with /sys/module/tenstorrent/version, which is
/// the tt-kmd ABI level the module implements (2.11.0); the project's own
/// version is each card's `tt_arbiter_version`.
pub fn driver_info_version() -> TestResult {
    let sys = sysfs("/sys/module/tenstorrent/version")?;
    let want = parse_semver(&sys)?;
    ensure_eq!(
        want,
        (2, 11, 0),
        "the tt-kmd ABI level in /sys/module/tenstorrent/version"
    );
    for n in CARDS {
        let own = sysfs(&format!(
            "/sys/class/tenstorrent/tenstorrent!{n}/tt_arbiter_version"
        ))?;
        let (major, _, _) = parse_semver(&own)?;
        ensure_eq!(major, 0, "card {n}: tt_arbiter_version {own:?}");
    }
    for n in CARDS {
        let d = ctx(open(n)?.driver_info(), "GET_DRIVER_INFO")?;
        ensure_eq!(
            d.driver_version,
            abi::DRIVER_API_VERSION,
            "card {n} driver_version"
        );
        ensure_eq!(
            (
                d.driver_version_major,
                d.driver_version_minor,
                d.driver_version_patch
            ),
            want,
            "card {n} version bytes vs /sys/module/tenstorrent/version {sys:?}"
        );
        ensure_eq!(
            d.output_size_bytes as usize,
            size_of::<abi::GetDriverInfoOut>(),
            "card {n} out.output_size_bytes"
        );
        ensure_eq!(d.reserved0, 0, "card {n} reserved0");
    }
    Ok(())
}

fn sysfs_hex(bdf: &str, attr: &str) -> Result<u16, String> {
    let s = sysfs(&format!("/sys/bus/pci/devices/{bdf}/{attr}"))?;
    u16::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|e| format!("{attr} {s:?}: {e}"))
}

/// Splits "DDDD:BB:DD.F" into (domain, bus_dev_fn).
fn parse_bdf(bdf: &str) -> Result<(u16, u16), String> {
    let bad = || format!("malformed BDF {bdf:?}");
    let (dom, rest) = bdf.split_once(':').ok_or_else(bad)?;
    let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
    let (dev, func) = rest.split_once('.').ok_or_else(bad)?;
    let h = |s: &str| u16::from_str_radix(s, 16).map_err(|_| bad());
    Ok((h(dom)?, (h(bus)? << 8) | (h(dev)? << 3) | h(func)?))
}

/// GET_DEVICE_INFO matches sysfs for each card.
pub fn device_info_values() -> TestResult {
    for n in CARDS {
        let bdf = bdf(n as usize)?;
        let d = ctx(open(n)?.device_info(), "GET_DEVICE_INFO")?;
        let (domain, bus_dev_fn) = parse_bdf(&bdf)?;
        let got = (
            d.vendor_id,
            d.device_id,
            d.subsystem_vendor_id,
            d.subsystem_id,
        );
        let want = (
            sysfs_hex(&bdf, "vendor")?,
            sysfs_hex(&bdf, "device")?,
            sysfs_hex(&bdf, "subsystem_vendor")?,
            sysfs_hex(&bdf, "subsystem_device")?,
        );
        ensure_eq!(
            got,
            want,
            "card {n} ({bdf}) vendor, device, subsystem vendor, subsystem"
        );
        ensure_eq!(d.bus_dev_fn, bus_dev_fn, "card {n} bus_dev_fn of {bdf}");
        ensure_eq!(d.pci_domain, domain, "card {n} pci_domain of {bdf}");
        ensure_eq!(
            d.max_dma_buf_size_log2,
            28,
            "card {n} max_dma_buf_size_log2"
        );
        ensure_eq!(
            d.output_size_bytes as usize,
            size_of::<abi::GetDeviceInfoOut>(),
            "card {n} out.output_size_bytes"
        );
        ensure_eq!(d.reserved, 0, "card {n} reserved");
    }
    Ok(())
}

/// Bytes of an ABI struct (they have no padding).
pub fn bytes_of<T: AbiStruct>(t: &T) -> Vec<u8> {
    // SAFETY: ABI structs are plain integers without padding.
    unsafe { std::slice::from_raw_parts((t as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
}

const SLACK: usize = 256;

/// Calls an old-style command with `input` (its first u32 replaced by `k`,
/// the output_size_bytes) at the start of a 0xAA-filled buffer; returns the
/// `SLACK` bytes that follow `input`.
pub fn call_old_style(dev: &Device, cmd: u32, input: &[u8], k: u32) -> Result<Vec<u8>, String> {
    let mut buf = vec![0xAAu8; input.len() + SLACK];
    buf[..input.len()].copy_from_slice(input);
    buf[..4].copy_from_slice(&k.to_ne_bytes());
    expect_ok(
        ioctl_addr(dev.as_raw_fd(), cmd, buf.as_mut_ptr() as usize),
        &format!("output_size_bytes {k}"),
    )?;
    ensure!(
        buf[..4] == k.to_ne_bytes() && buf[4..input.len()] == input[4..],
        "`in` was modified (output_size_bytes {k}): {:02x?}",
        &buf[..input.len()]
    );
    Ok(buf[input.len()..].to_vec())
}

/// Checks the rule: `answer` in the first min(k, len) bytes, zeros up to
/// k, untouched (0xAA) after.
pub fn check_out(out: &[u8], k: usize, answer: &[u8], what: &str) -> TestResult {
    for (i, &b) in out.iter().enumerate() {
        let want = if i < k.min(answer.len()) {
            answer[i]
        } else if i < k {
            0
        } else {
            0xAA
        };
        ensure!(
            b == want,
            "{what}, output_size_bytes {k}: out byte {i} is {b:#04x}, expected {want:#04x} (answer {answer:02x?}); out: {:02x?}",
            &out[..(k + 4).min(out.len())]
        );
    }
    Ok(())
}

/// Runs `check_out` for a range of output_size_bytes values.
pub fn check_output_rule(
    dev: &Device,
    cmd: u32,
    input: &[u8],
    answer: &[u8],
    what: &str,
) -> TestResult {
    let len = answer.len() as u32;
    for k in [
        0,
        1,
        2,
        3,
        4,
        len - 1,
        len,
        len + 1,
        len + 8,
        100,
        SLACK as u32,
    ] {
        let out = call_old_style(dev, cmd, input, k)?;
        check_out(&out, k as usize, answer, what)?;
    }
    Ok(())
}

/// output_size_bytes rule of GET_DRIVER_INFO and GET_DEVICE_INFO.
pub fn output_size_rule() -> TestResult {
    let dev = open(0)?;
    let drv = bytes_of(&ctx(dev.driver_info(), "GET_DRIVER_INFO")?);
    let info = bytes_of(&ctx(dev.device_info(), "GET_DEVICE_INFO")?);
    check_output_rule(
        &dev,
        abi::IOCTL_GET_DRIVER_INFO,
        &[0; 4],
        &drv,
        "GET_DRIVER_INFO",
    )?;
    check_output_rule(
        &dev,
        abi::IOCTL_GET_DEVICE_INFO,
        &[0; 4],
        &info,
        "GET_DEVICE_INFO",
    )
}

/// `in` ending a mapping with output_size_bytes 0 works; with a non-zero
/// output_size_bytes (out unmapped) it is EFAULT.
pub fn in_at_end_of_mapping() -> TestResult {
    let dev = open(0)?;
    let (_map, end) = page_before_hole()?;
    let fd = dev.as_raw_fd();
    let put = |bytes: &[u8]| {
        let at = end - bytes.len();
        // SAFETY: `at..end` is inside the mapped page.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
        at
    };
    for (cmd, name) in [
        (abi::IOCTL_GET_DRIVER_INFO, "GET_DRIVER_INFO"),
        (abi::IOCTL_GET_DEVICE_INFO, "GET_DEVICE_INFO"),
    ] {
        let at = put(&0u32.to_ne_bytes());
        expect_ok(
            ioctl_addr(fd, cmd, at),
            &format!("{name} with `in` ending the mapping, output_size_bytes 0"),
        )?;
        let at = put(&4u32.to_ne_bytes());
        expect_errno(
            ioctl_addr(fd, cmd, at),
            libc::EFAULT,
            &format!("{name} with `out` unmapped, output_size_bytes 4"),
        )?;
    }
    let index = 35u8;
    ensure_free(&dev, index as u32)?;
    let ctl = |flags: u32, k: u32| {
        let input = abi::LockCtlIn {
            output_size_bytes: k,
            flags,
            index,
            reserved: [0; 3],
        };
        put(&bytes_of(&input))
    };
    for (flags, name) in [
        (abi::LOCK_CTL_TEST, "TEST"),
        (abi::LOCK_CTL_ACQUIRE, "ACQUIRE"),
    ] {
        expect_ok(
            ioctl_addr(fd, abi::IOCTL_LOCK_CTL, ctl(flags, 0)),
            &format!("LOCK_CTL {name}, `in` ending the mapping"),
        )?;
    }
    ensure_eq!(
        ctl_test(&dev, index)?,
        (true, true),
        "lock taken by LOCK_CTL ACQUIRE at the end of the mapping"
    );
    expect_errno(
        ioctl_addr(fd, abi::IOCTL_LOCK_CTL, ctl(abi::LOCK_CTL_TEST, 1)),
        libc::EFAULT,
        "LOCK_CTL TEST with `out` unmapped, output_size_bytes 1",
    )?;
    expect_ok(
        ioctl_addr(fd, abi::IOCTL_LOCK_CTL, ctl(abi::LOCK_CTL_RELEASE, 0)),
        "LOCK_CTL RELEASE, `in` ending the mapping",
    )?;
    ensure_eq!(
        ctl_test(&dev, index)?,
        (false, false),
        "lock released by LOCK_CTL RELEASE at the end of the mapping"
    );
    // A new command whose struct runs into the hole.
    let mut a = <abi::LockAcquire as abi::Extensible>::new();
    a.index = index as u32;
    let at = put(&bytes_of(&a)[..16]);
    expect_errno(
        ioctl_addr(fd, abi::IOCTL_LOCK_ACQUIRE, at),
        libc::EFAULT,
        "ACQUIRE struct running into an unmapped page",
    )?;
    ensure_free(&dev, index as u32)
}

/// The C driver's other numbers and unknown numbers: ENOTTY.
pub fn unknown_ioctls_enotty() -> TestResult {
    let dev = open(0)?;
    let m = abi::IOCTL_MAGIC;
    // Every number of the C driver's, 0-19, is a command now (1
    // GET_HARVESTING answers EINVAL as tt-kmd, and so do 16
    // EXPORT_TLB_DMABUF and 17 SMC_MSG without their argsz, checked
    // below; 18 and 19 are NOC_READ and NOC_WRITE): only the numbers past
    // them are unknown.
    let mut cmds = vec![
        abi::io(m, 20),
        abi::io(m, 0x40),
        abi::io(m, 0x41),
        abi::io(m, 0x42),
        abi::io(m, 0x43),
        abi::io(m, 0xFF),
        abi::iowr(m, 0x44, 40),
        abi::iowr(m, 0x3F, 40),
        abi::ior(m, 0, 24),
        abi::iowr(m, 5, 16),
        abi::iowr(m, 8, 16),
        abi::io(0xFB, 0),
        abi::io(0xFB, 8),
        abi::iowr(0xFB, 0x40, 40),
        abi::io(0xA5, 0x11),
    ];
    let known = [
        abi::IOCTL_GET_DEVICE_INFO,
        abi::IOCTL_GET_DRIVER_INFO,
        abi::IOCTL_LOCK_CTL,
        abi::IOCTL_LOCK_ACQUIRE,
        abi::IOCTL_LOCK_ACQUIRE_SET,
        abi::IOCTL_LOCK_RELEASE,
        abi::IOCTL_LOCK_QUERY,
        abi::IOCTL_NOC_READ,
        abi::IOCTL_NOC_WRITE,
    ];
    // EXPORT_TLB_DMABUF is known: a zeroed argument is EINVAL (argsz).
    let mut export = [0u8; 32];
    expect_errno(
        ioctl_addr(
            dev.as_raw_fd(),
            abi::io(m, 16),
            export.as_mut_ptr() as usize,
        ),
        libc::EINVAL,
        "EXPORT_TLB_DMABUF",
    )?;
    // SMC_MSG (tt-kmd 2.11) too.
    let mut smc = [0u8; 48];
    expect_errno(
        ioctl_addr(
            dev.as_raw_fd(),
            abi::IOCTL_SMC_MSG,
            smc.as_mut_ptr() as usize,
        ),
        libc::EINVAL,
        "SMC_MSG",
    )?;
    let mut rng = Rng::new(0x7e57);
    while cmds.len() < 60 {
        // Types no VFS-level ioctl uses, so the driver must answer.
        let ty = [0xFA, 0xFA, 0xFA, 0xF9, 0xFB, 0x77][rng.below(6) as usize];
        let cmd = abi::ioc(
            rng.below(4) as u32,
            ty,
            rng.below(256) as u32,
            rng.below(1024) as usize,
        );
        // SMC_WAIT takes any size from its struct's up.
        let smc_wait =
            cmd & 0xC000_FFFF == abi::IOCTL_SMC_WAIT & 0xC000_FFFF && (cmd >> 16) & 0x3FFF >= 56;
        if !known.contains(&cmd) && !smc_wait {
            cmds.push(cmd);
        }
    }
    let mut buf = vec![0u8; 16384];
    for cmd in cmds {
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), cmd, buf.as_mut_ptr() as usize),
            libc::ENOTTY,
            &format!("ioctl {cmd:#010x}"),
        )?;
        ensure!(
            buf.iter().all(|&b| b == 0),
            "ioctl {cmd:#010x} wrote to its argument"
        );
    }
    Ok(())
}

/// NULL and unmapped argument pointers: EFAULT for every command.
pub fn bad_pointers_efault() -> TestResult {
    let dev = open(0)?;
    let (_hole_map, hole) = unmapped_addr()?;
    for (cmd, name) in [
        (abi::IOCTL_GET_DEVICE_INFO, "GET_DEVICE_INFO"),
        (abi::IOCTL_GET_DRIVER_INFO, "GET_DRIVER_INFO"),
        (abi::IOCTL_LOCK_CTL, "LOCK_CTL"),
        (abi::IOCTL_LOCK_ACQUIRE, "ACQUIRE"),
        (abi::IOCTL_LOCK_ACQUIRE_SET, "ACQUIRE_SET"),
        (abi::IOCTL_LOCK_RELEASE, "RELEASE"),
        (abi::IOCTL_LOCK_QUERY, "QUERY"),
    ] {
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), cmd, 0),
            libc::EFAULT,
            &format!("{name}(NULL)"),
        )?;
        expect_errno(
            ioctl_addr(dev.as_raw_fd(), cmd, hole),
            libc::EFAULT,
            &format!("{name}(inaccessible {hole:#x})"),
        )?;
    }
    ensure_free(&dev, 0)
}

/// The stable names the udev rule gives (packaging/60-tenstorrent.rules,
/// tt-kmd's `by-id` links): the rule's link lines are evaluated against
/// this driver's sysfs as udev would (`ATTRS{device}` on the PCI parent,
/// `ATTR{tt_asic_id}` on the class device, `%s{tt_asic_id}` substituted),
/// and every card must get exactly one link, named after its chip as
/// GET_DEVICE_INFO reports it, usable as a file name and unique.
pub fn udev_by_id_names() -> TestResult {
    const RULES: &str = include_str!("../../../../packaging/60-tenstorrent.rules");
    let links = by_id_rules(RULES)?;
    ensure!(
        links.len() >= 2,
        "the rule has {} by-id link lines: {links:?}",
        links.len()
    );
    let mut names = Vec::new();
    for n in CARDS {
        let class = format!("/sys/class/tenstorrent/tenstorrent!{n}");
        let pci_device = sysfs(&format!("{class}/device/device"))?;
        let asic_id = sysfs(&format!("{class}/tt_asic_id"))?;
        let got: Vec<String> = links
            .iter()
            .filter(|l| l.device == pci_device && !asic_id.is_empty())
            .map(|l| l.link.replace("%s{tt_asic_id}", &asic_id))
            .collect();
        ensure_eq!(
            got.len(),
            1,
            "card {n} (PCI device {pci_device}, tt_asic_id {asic_id:?}) gets links {got:?}"
        );
        let name = got[0].strip_prefix("tenstorrent/by-id/").unwrap_or(&got[0]);
        ensure!(
            !name.is_empty() && !name.contains(['/', ' ', '\n']) && name != "." && name != "..",
            "card {n}: link name {name:?} is not a file name"
        );
        let dev = ctx(Device::open_index(n), "open")?;
        let info = ctx(dev.device_info(), "GET_DEVICE_INFO")?;
        let chip = match info.device_id {
            0x401e => "wormhole-",
            0xb140 => "blackhole-",
            other => return Err(format!("card {n}: unexpected device id {other:#x}")),
        };
        ensure!(
            name.starts_with(chip),
            "card {n}: link {name:?} for a {chip} card"
        );
        ensure!(
            !names.contains(&got[0]),
            "two cards get the link {}",
            got[0]
        );
        names.push(got[0].clone());
    }
    Ok(())
}

#[derive(Debug)]
struct ByIdRule {
    device: String,
    link: String,
}

/// The rule lines that add a by-id link: `ATTRS{device}=="ID"` and
/// `SYMLINK+="..."` (any other key on such a line must be the
/// `ATTR{tt_asic_id}=="?*"` guard the evaluation above applies).
fn by_id_rules(rules: &str) -> Result<Vec<ByIdRule>, String> {
    let mut out = Vec::new();
    for line in rules.lines().map(str::trim) {
        if line.starts_with('#') || !line.contains("SYMLINK+=") {
            continue;
        }
        let mut device = None;
        let mut link = None;
        for key in line.split(", ") {
            if let Some(v) = key.strip_prefix("ATTRS{device}==") {
                device = Some(v.trim_matches('"').to_string());
            } else if let Some(v) = key.strip_prefix("SYMLINK+=") {
                link = Some(v.trim_matches('"').to_string());
            } else if key != "SUBSYSTEM==\"tenstorrent\"" && key != "ATTR{tt_asic_id}==\"?*\"" {
                return Err(format!(
                    "rule line with a key this check does not know: {line}"
                ));
            }
        }
        match (device, link) {
            (Some(device), Some(link)) => out.push(ByIdRule { device, link }),
            _ => return Err(format!("link rule without ATTRS{{device}}: {line}")),
        }
    }
    Ok(out)
}

//! Fuzzing of the mapping surface: random mmaps of every kind of mapping
//! the module makes (a BAR UC and WC, a window UC and WC, a DMA buffer) and
//! of random offsets, with random protections and flags (MAP_PRIVATE and
//! PROT_EXEC among them), each followed by random operations on it
//! (touch, mprotect, mremap, madvise, /proc/self/mem, fork, partial
//! munmap). What must hold, whatever the sequence:
//! - a private mapping is `EINVAL` and an executable one `EPERM`, for
//!   every kind (before private mappings were refused, touching one was a
//!   kernel oops: this suite's first touch found it);
//! - `mprotect(PROT_EXEC)` is `EACCES`, growing by mremap `EFAULT`,
//!   `MADV_DOFORK` `EINVAL`, /proc/self/mem `EIO`, a forked child touching
//!   the mapping dies of `SIGSEGV` (nothing is inherited);
//! - touching a live mapping never faults (the fuzzing process would die
//!   of `SIGBUS`), and the kernel log stays clean (the harness scans it).
//!
//! Each card is fuzzed in a child process, which reports the first broken
//! rule and exits non-zero, or dies of the signal that broke it.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use super::{figure, fork_child, seed, sized};
use crate::util::*;

const PAGE: usize = 4096;

/// A place to map: its mmap offset, how many pages may be mapped from it,
/// and whether it is one of the file's own (`known`: the rules on its
/// answers apply) or a random offset (any answer but a crash is fine).
#[derive(Clone, Copy)]
struct Target {
    offset: u64,
    pages: usize,
    known: bool,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The targets of card `n` for the file `dev`: every kind of mapping the
/// `vma/*` scenarios try; the windows and buffer are the file's for the
/// whole run.
fn targets(dev: &impl AsRawFd, n: u32) -> Result<Vec<Target>, String> {
    Ok(crate::scenarios::vma::kinds(dev, n)?
        .into_iter()
        .map(|kind| Target {
            offset: kind.offset,
            pages: kind.pages,
            known: true,
        })
        .collect())
}

/// Runs `rounds` random rounds on card `n`; `Err` names the broken rule.
fn fuzz_card(n: u32, seed: u64, rounds: u64) -> Result<u64, String> {
    let mut rng = Rng::new(seed);
    let dev = open(n)?;
    let fd = dev.as_raw_fd();
    let list = targets(&dev, n)?;
    let mem = ctx(
        OpenOptions::new()
            .read(true)
            .write(true)
            .open("/proc/self/mem"),
        "/proc/self/mem",
    )?;
    let prots = [
        libc::PROT_READ,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::PROT_NONE,
        libc::PROT_WRITE,
        libc::PROT_READ | libc::PROT_EXEC,
        libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
    ];
    let flags = [
        libc::MAP_SHARED,
        libc::MAP_PRIVATE,
        libc::MAP_SHARED_VALIDATE,
        libc::MAP_SHARED | libc::MAP_POPULATE,
        libc::MAP_PRIVATE | libc::MAP_POPULATE,
        libc::MAP_SHARED | libc::MAP_LOCKED,
        libc::MAP_PRIVATE | libc::MAP_NORESERVE,
    ];
    let advice = [
        libc::MADV_DONTNEED,
        libc::MADV_DOFORK,
        libc::MADV_DONTFORK,
        libc::MADV_WIPEONFORK,
        libc::MADV_KEEPONFORK,
        libc::MADV_REMOVE,
        libc::MADV_FREE,
        libc::MADV_COLD,
        libc::MADV_PAGEOUT,
        libc::MADV_POPULATE_READ,
        libc::MADV_POPULATE_WRITE,
        libc::MADV_WILLNEED,
        libc::MADV_MERGEABLE,
        libc::MADV_HUGEPAGE,
        libc::MADV_DONTDUMP,
        libc::MADV_DODUMP,
    ];
    let mut mapped = 0;
    for round in 0..rounds {
        let target = if rng.below(8) == 0 {
            let space = rng.below(9) << 36;
            Target {
                offset: space + (rng.below(1 << 24) << 12),
                pages: 1 + rng.below(4) as usize,
                known: false,
            }
        } else {
            list[rng.below(list.len() as u64) as usize]
        };
        let pages = 1 + rng.below(target.pages.min(8) as u64) as usize;
        let mut len = pages * PAGE;
        let mut prot = prots[rng.below(prots.len() as u64) as usize];
        let flag = flags[rng.below(flags.len() as u64) as usize];
        let what = format!(
            "round {round}: mmap({len:#x}, prot {prot:#x}, flags {flag:#x}, offset {:#x})",
            target.offset
        );
        // SAFETY: a new mapping at an address the kernel picks.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                flag,
                fd,
                target.offset as libc::off_t,
            )
        };
        // MAP_SHARED_VALIDATE (3) shares MAP_PRIVATE's bit: compare types.
        let private = flag & libc::MAP_TYPE == libc::MAP_PRIVATE;
        if addr == libc::MAP_FAILED {
            let e = errno();
            if target.known && private {
                ensure_eq!(e, libc::EINVAL, "{what}: private mapping");
            } else if target.known && prot & libc::PROT_EXEC != 0 {
                ensure_eq!(e, libc::EPERM, "{what}: executable mapping");
            }
            continue;
        }
        ensure!(!private, "{what}: a private mapping was made");
        ensure!(
            prot & libc::PROT_EXEC == 0,
            "{what}: an executable mapping was made"
        );
        mapped += 1;
        let mut addr = addr as usize;
        for _ in 0..1 + rng.below(4) {
            let readable = prot & (libc::PROT_READ | libc::PROT_WRITE) != 0;
            match rng.below(7) {
                0 if readable => {
                    // SAFETY: a live mapping of ours, readable.
                    let _ = unsafe { std::ptr::read_volatile(addr as *const u32) };
                }
                1 => {
                    let new = prots[rng.below(prots.len() as u64) as usize];
                    // SAFETY: changing the protection of our own mapping.
                    let rc = unsafe { libc::mprotect(addr as *mut libc::c_void, len, new) };
                    if new & libc::PROT_EXEC != 0 {
                        ensure!(
                            rc != 0 && errno() == libc::EACCES,
                            "{what}: mprotect to {new:#x}: {}",
                            if rc == 0 {
                                "succeeded".into()
                            } else {
                                errname(errno())
                            }
                        );
                    } else if rc == 0 {
                        prot = new;
                    }
                }
                2 => {
                    // SAFETY: growing our own mapping; must fail.
                    let grown = unsafe {
                        libc::mremap(
                            addr as *mut libc::c_void,
                            len,
                            len + PAGE,
                            libc::MREMAP_MAYMOVE,
                        )
                    };
                    ensure!(
                        grown == libc::MAP_FAILED && errno() == libc::EFAULT,
                        "{what}: mremap grew it ({})",
                        errname(errno())
                    );
                }
                3 => {
                    let a = advice[rng.below(advice.len() as u64) as usize];
                    // SAFETY: advice on our own mapping.
                    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, len, a) };
                    // ENOSYS: a kernel without madvise (the debug one).
                    if a == libc::MADV_DOFORK {
                        ensure!(
                            rc != 0 && [libc::EINVAL, libc::ENOSYS].contains(&errno()),
                            "{what}: MADV_DOFORK answered {rc} ({})",
                            errname(errno())
                        );
                    }
                }
                4 => {
                    let mut word = [0u8; 4];
                    let got = mem.read_at(&mut word, addr as u64);
                    ensure!(
                        got.as_ref().err().and_then(|e| e.raw_os_error()) == Some(libc::EIO),
                        "{what}: /proc/self/mem read: {got:?}"
                    );
                }
                5 => {
                    let child = fork_child(&[], || {
                        // SAFETY: the parent's address: the child expects to die.
                        let _ = unsafe { std::ptr::read_volatile(addr as *const u32) };
                        0
                    })?;
                    let status = waitpid(child, 0)?;
                    ensure!(
                        died_of(status, libc::SIGSEGV),
                        "{what}: a forked child touching it: {}",
                        describe_status(status)
                    );
                }
                6 if len > PAGE => {
                    // Drop the last page: windows refuse (they do not
                    // split), the others shrink.
                    // SAFETY: shrinking our own mapping in place.
                    let shrunk =
                        unsafe { libc::mremap(addr as *mut libc::c_void, len, len - PAGE, 0) };
                    if shrunk != libc::MAP_FAILED {
                        addr = shrunk as usize;
                        len -= PAGE;
                    }
                }
                _ => {}
            }
        }
        // SAFETY: our own mapping, whatever is left of it.
        unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    }
    Ok(mapped)
}

/// `reliability/fuzz_mmaps`: both cards, each in a child of its own.
pub fn fuzz_mmaps() -> TestResult {
    let seed = seed("fuzz_mmaps");
    let rounds = sized(400u64, 6000);
    let mut children = Vec::new();
    for n in 0..2u32 {
        let pid = fork_child(&[], move || {
            match fuzz_card(n, seed ^ u64::from(n), rounds) {
                Ok(mapped) => {
                    println!("# fuzz_mmaps: card {n}: {rounds} rounds, {mapped} mappings made");
                    0
                }
                Err(e) => {
                    println!("# fuzz_mmaps: card {n}: {e}");
                    2
                }
            }
        })?;
        children.push((n, pid));
    }
    let mut failures = Vec::new();
    for (n, pid) in children {
        let status = waitpid(pid, 0)?;
        if status != 0 {
            failures.push(format!("card {n}: {}", describe_status(status)));
        }
    }
    figure("fuzz_inputs", 2 * rounds);
    ensure!(failures.is_empty(), "{}", failures.join("; "));
    Ok(())
}

//! Fuzzing of the ioctl surface, and the replay of its regression corpus.
//!
//! Inputs: random command numbers (inside and outside the 0xFA range; the
//! VFS' own generic ioctls, which act on the inode or the descriptor, are
//! left out), `_IOC(dir, 0xFA, nr, size)` with random sizes, our commands
//! with structured-random and mutated structs, argsz extremes, the C
//! driver's commands with random output_size_bytes, flags and indices, and
//! pointers that are aligned, unaligned, at the end of a mapping, into a
//! read-only page, a PROT_NONE page, NULL, low, kernel and non-canonical.
//! Several threads fuzz at once, each with its own files, while another file
//! holds locks; a watchdog thread interrupts (SIGUSR2, no SA_RESTART) any
//! call that blocks for long, so blocking commands are fuzzed too.
//!
//! Oracle for every input: an unknown command is ENOTTY; a known one with
//! an unreadable pointer is EFAULT; otherwise its errno is one the command
//! can give; and the kernel wrote nothing outside what the command may
//! write (the argument buffer sits in a pattern-filled arena). Afterwards
//! every lock of both cards is free once the files are closed.
//!
//! The corpus (`tools/ioctl-test/corpus/*.txt`, compiled in) holds inputs
//! that once broke something plus hand-picked nasty ones, one per line:
//!   card=N cmd=0xC ptr=KIND bytes=HEX [len=N] [poke=OFF:BYTE]...
//!   [prehold=MASK] [selfhold=MASK] [expect=ok|ENAME|any]
//! KIND: valid@OFF (in a read-write arena, any alignment), end (the bytes
//! end where an inaccessible page starts), ro@OFF (read-only page),
//! none@OFF (PROT_NONE page), null, addr:0xADDR. `len` zero-extends the
//! bytes; `poke` sets one byte; `prehold` locks are held by another file
//! of the card, `selfhold` ones by the file under test, during the call.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tt_arbiter::abi;

use super::*;

#[path = "fuzz_smc.rs"]
mod smc;

use smc::SmcFile;

const CORPUS: &[(&str, &str)] = &[(
    "handpicked.txt",
    include_str!("../../../corpus/handpicked.txt"),
)];

const MAGIC: u32 = 0xFA;

/// Where the argument points.
#[derive(Clone, Debug, PartialEq)]
enum Ptr {
    Valid(usize),
    End,
    ReadOnly(usize),
    NoAccess(usize),
    Null,
    Addr(u64),
}

/// One fuzz input.
#[derive(Clone, Debug)]
struct Input {
    card: u32,
    cmd: u32,
    ptr: Ptr,
    bytes: Vec<u8>,
    prehold: u64,
    selfhold: u64,
    expect: Option<i32>,
}

impl Input {
    /// The corpus line of this input.
    fn line(&self) -> String {
        let ptr = match &self.ptr {
            Ptr::Valid(o) => format!("valid@{o}"),
            Ptr::End => "end".into(),
            Ptr::ReadOnly(o) => format!("ro@{o}"),
            Ptr::NoAccess(o) => format!("none@{o}"),
            Ptr::Null => "null".into(),
            Ptr::Addr(a) => format!("addr:{a:#x}"),
        };
        let used = self
            .bytes
            .iter()
            .rposition(|&b| b != 0)
            .map_or(0, |p| p + 1);
        let hex: String = self.bytes[..used]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut s = format!(
            "card={} cmd={:#010x} ptr={ptr} bytes={hex} len={}",
            self.card,
            self.cmd,
            self.bytes.len()
        );
        if self.prehold != 0 {
            s += &format!(" prehold={:#x}", self.prehold);
        }
        if self.selfhold != 0 {
            s += &format!(" selfhold={:#x}", self.selfhold);
        }
        s
    }

    fn parse(line: &str) -> Result<Input, String> {
        let mut input = Input {
            card: 0,
            cmd: 0,
            ptr: Ptr::Valid(0),
            bytes: Vec::new(),
            prehold: 0,
            selfhold: 0,
            expect: None,
        };
        let mut len = None;
        let mut pokes = Vec::new();
        let num = |s: &str| -> Result<u64, String> {
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            }
            .map_err(|e| format!("{s:?}: {e}"))
        };
        for word in line.split_whitespace() {
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| format!("{word:?} is not key=value"))?;
            match k {
                "card" => input.card = num(v)? as u32,
                "cmd" => input.cmd = num(v)? as u32,
                "prehold" => input.prehold = num(v)?,
                "selfhold" => input.selfhold = num(v)?,
                "len" => len = Some(num(v)? as usize),
                "poke" => {
                    let (o, b) = v.split_once(':').ok_or("poke wants OFF:BYTE")?;
                    pokes.push((
                        num(o)? as usize,
                        u8::from_str_radix(b, 16).map_err(|e| e.to_string())?,
                    ));
                }
                "bytes" => {
                    ensure!(v.len() % 2 == 0, "odd number of hex digits");
                    input.bytes = (0..v.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&v[i..i + 2], 16))
                        .collect::<Result<_, _>>()
                        .map_err(|e| format!("bytes: {e}"))?;
                }
                "ptr" => {
                    let at = |p: &str| -> Result<usize, String> { Ok(num(p)? as usize) };
                    input.ptr = match v.split_once('@') {
                        Some(("valid", o)) => Ptr::Valid(at(o)?),
                        Some(("ro", o)) => Ptr::ReadOnly(at(o)?),
                        Some(("none", o)) => Ptr::NoAccess(at(o)?),
                        _ => match v {
                            "end" => Ptr::End,
                            "null" => Ptr::Null,
                            _ => match v.strip_prefix("addr:") {
                                Some(a) => Ptr::Addr(num(a)?),
                                None => return Err(format!("unknown ptr {v:?}")),
                            },
                        },
                    }
                }
                "expect" => {
                    input.expect = match v {
                        "any" => None,
                        "ok" => Some(0),
                        name => Some(
                            errno_by_name(name).ok_or_else(|| format!("unknown errno {name}"))?,
                        ),
                    }
                }
                _ => return Err(format!("unknown key {k:?}")),
            }
        }
        if let Some(len) = len {
            ensure!(input.bytes.len() <= len, "len {len} shorter than the bytes");
            input.bytes.resize(len, 0);
        }
        for (o, b) in pokes {
            ensure!(o < input.bytes.len(), "poke {o} past len");
            input.bytes[o] = b;
        }
        ensure!(input.bytes.len() <= ARENA, "bytes longer than the arena");
        Ok(input)
    }
}

fn errno_by_name(name: &str) -> Option<i32> {
    (1..200).find(|&e| errname(e) == name)
}

// ---- memory -----------------------------------------------------------------

/// Read-write bytes of the arena (two pages, then an inaccessible one).
const ARENA: usize = 8192;
const PATTERN: u8 = 0xa5;

fn mprotect(addr: usize, len: usize, prot: i32) -> TestResult {
    // SAFETY: changing the protection of our own mapping, which no Rust
    // reference points into.
    let rc = unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot) };
    ensure!(rc == 0, "mprotect: {}", std::io::Error::last_os_error());
    Ok(())
}

/// The memory a fuzz thread passes to the kernel. Never Rust objects: the
/// kernel may write (zeroes, answers) anywhere it is allowed to.
struct Mem {
    rw: Shared,
    ro: Shared,
    none: Shared,
    before: Vec<u8>,
}

impl Mem {
    fn new() -> Result<Mem, String> {
        let page = page_size();
        let rw = Shared::new(ARENA + page)?;
        mprotect(rw.addr() + ARENA, page, libc::PROT_NONE)?;
        let ro = Shared::new(2 * page)?;
        mprotect(ro.addr(), page, libc::PROT_READ)?;
        mprotect(ro.addr() + page, page, libc::PROT_NONE)?;
        let none = Shared::new(2 * page)?;
        mprotect(none.addr(), 2 * page, libc::PROT_NONE)?;
        Ok(Mem {
            rw,
            ro,
            none,
            before: vec![0; ARENA],
        })
    }

    fn arena_mut(&mut self) -> &mut [u8] {
        // SAFETY: ARENA read-write bytes of our mapping, only accessed
        // through `self`; the kernel only writes there during our calls.
        unsafe { std::slice::from_raw_parts_mut(self.rw.addr() as *mut u8, ARENA) }
    }

    fn arena(&self) -> &[u8] {
        // SAFETY: as for `arena_mut`.
        unsafe { std::slice::from_raw_parts(self.rw.addr() as *const u8, ARENA) }
    }

    /// Lays the input out; returns the pointer to pass.
    fn prepare(&mut self, input: &Input) -> Result<usize, String> {
        let page = page_size();
        let n = input.bytes.len();
        let rw = self.rw.addr();
        let arena = self.arena_mut();
        arena.fill(PATTERN);
        let ptr = match input.ptr {
            Ptr::Valid(off) => {
                let off = off.min(ARENA - n);
                arena[off..off + n].copy_from_slice(&input.bytes);
                rw + off
            }
            Ptr::End => {
                arena[ARENA - n..].copy_from_slice(&input.bytes);
                rw + ARENA - n
            }
            Ptr::ReadOnly(off) => {
                let off = off.min(page - 1);
                mprotect(self.ro.addr(), page, libc::PROT_READ | libc::PROT_WRITE)?;
                // SAFETY: the read-only page, writable for this moment.
                let p = unsafe { std::slice::from_raw_parts_mut(self.ro.addr() as *mut u8, page) };
                p.fill(PATTERN);
                let k = n.min(page - off);
                p[off..off + k].copy_from_slice(&input.bytes[..k]);
                mprotect(self.ro.addr(), page, libc::PROT_READ)?;
                self.ro.addr() + off
            }
            Ptr::NoAccess(off) => self.none.addr() + off.min(page - 1),
            Ptr::Null => 0,
            Ptr::Addr(a) => a as usize,
        };
        let mut before = std::mem::take(&mut self.before);
        before.copy_from_slice(self.arena());
        self.before = before;
        Ok(ptr)
    }

    /// What the kernel can read at `ptr` and the `len` bytes after it, as
    /// the memory is now: the read-write arena's and the read-only page's
    /// bytes, None elsewhere.
    fn view(&self, ptr: usize, len: usize) -> Vec<Option<u8>> {
        let page = page_size();
        let (rw, ro) = (self.rw.addr(), self.ro.addr());
        // SAFETY: the read-only page is readable and ours; the kernel only
        // writes there when it may (never: it is read-only).
        let ro_bytes = unsafe { std::slice::from_raw_parts(ro as *const u8, page) };
        let arena = self.arena();
        (0..len)
            .map(|i| {
                let a = ptr.checked_add(i)?;
                if (rw..rw + ARENA).contains(&a) {
                    Some(arena[a - rw])
                } else if (ro..ro + page).contains(&a) {
                    Some(ro_bytes[a - ro])
                } else {
                    None
                }
            })
            .collect()
    }

    /// The `len` bytes at `ptr` if they are all in the read-write arena.
    fn read_back(&self, ptr: usize, len: usize) -> Option<Vec<u8>> {
        let off = ptr.checked_sub(self.rw.addr())?;
        self.arena()
            .get(off..off.checked_add(len)?)
            .map(<[u8]>::to_vec)
    }

    /// Bytes of the arena the call changed outside [lo, hi).
    fn stray_writes(&self, lo: usize, hi: usize) -> Option<String> {
        let base = self.rw.addr();
        let now = self.arena();
        let mut bad = (0..ARENA).filter(|&i| {
            let a = base + i;
            now[i] != self.before[i] && !(lo <= a && a < hi)
        });
        let first = bad.next()?;
        Some(format!(
            "the kernel wrote outside the command's output: arena byte {first} ({:#04x} -> {:#04x}), {} byte(s) in all",
            self.before[first],
            now[first],
            1 + bad.count()
        ))
    }
}

// ---- the oracle -------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Debug)]
enum Known {
    /// GET_DEVICE_INFO, GET_DRIVER_INFO: `out` at +4.
    Info,
    /// LOCK_CTL: `out` at +12.
    LockCtl,
    /// ALLOCATE_TLB: always writes its 32-byte `out` at +16.
    AllocateTlb,
    /// FREE_TLB: writes nothing.
    FreeTlb,
    /// QUERY_MAPPINGS: writes `output_mapping_count` 24-byte entries at +8.
    QueryMappings,
    /// CONFIGURE_TLB: writes nothing.
    ConfigureTlb,
    /// The C driver's DMA, reset and cleanup commands (GET_HARVESTING,
    /// ALLOCATE_DMA_BUF, FREE_DMA_BUF, RESET_DEVICE, PIN_PAGES,
    /// MAP_PEER_BAR, UNPIN_PAGES, SET_NOC_CLEANUP, SET_POWER_STATE,
    /// EXPORT_TLB_DMABUF, NOC_READ, NOC_WRITE): they
    /// write only their `out`, from `at`, at most `len` bytes or (with
    /// `sized`) `output_size_bytes`. Those that answer without reading
    /// anything (`reads` false) are not EFAULT for a bad pointer.
    CDriver {
        at: usize,
        len: usize,
        sized: bool,
        reads: bool,
    },
    /// Ours: writes back `size` bytes (0: RELEASE writes nothing).
    Ours { writes: usize },
    /// SMC_MSG (tt-kmd 2.11) and SMC_WAIT: write back `writes` bytes; their
    /// own errnos (a message outstanding, none, the firmware's status).
    Smc { writes: usize },
}

fn known(cmd: u32) -> Option<Known> {
    match cmd {
        c if c == abi::IOCTL_GET_DEVICE_INFO || c == abi::IOCTL_GET_DRIVER_INFO => {
            return Some(Known::Info)
        }
        c if c == abi::IOCTL_LOCK_CTL => return Some(Known::LockCtl),
        c if c == abi::IOCTL_ALLOCATE_TLB => return Some(Known::AllocateTlb),
        c if c == abi::IOCTL_FREE_TLB => return Some(Known::FreeTlb),
        c if c == abi::IOCTL_QUERY_MAPPINGS => return Some(Known::QueryMappings),
        c if c == abi::IOCTL_CONFIGURE_TLB => return Some(Known::ConfigureTlb),
        c if c == abi::IOCTL_ALLOCATE_DMA_BUF => {
            return Some(Known::CDriver {
                at: 24,
                len: 40,
                sized: false,
                reads: true,
            })
        }
        c if c == abi::IOCTL_PIN_PAGES => {
            return Some(Known::CDriver {
                at: 24,
                len: 0,
                sized: true,
                reads: true,
            })
        }
        c if c == abi::IOCTL_RESET_DEVICE => {
            return Some(Known::CDriver {
                at: 8,
                len: 0,
                sized: true,
                reads: true,
            })
        }
        c if c == abi::IOCTL_MAP_PEER_BAR => {
            return Some(Known::CDriver {
                at: 24,
                len: 16,
                sized: false,
                reads: true,
            })
        }
        c if [10, 14, 15].iter().any(|&nr| c == abi::io(MAGIC, nr)) => {
            return Some(Known::CDriver {
                at: 0,
                len: 0,
                sized: false,
                reads: true,
            })
        }
        c if c == abi::IOCTL_SMC_MSG => return Some(Known::Smc { writes: 48 }),
        c if c == abi::IOCTL_EXPORT_TLB_DMABUF || c == abi::IOCTL_NOC_READ => {
            return Some(Known::CDriver {
                at: 0,
                len: 32,
                sized: false,
                reads: true,
            })
        }
        c if c == abi::IOCTL_NOC_WRITE => {
            return Some(Known::CDriver {
                at: 0,
                len: 0,
                sized: false,
                reads: true,
            })
        }
        c if [1, 4].iter().any(|&nr| c == abi::io(MAGIC, nr)) => {
            return Some(Known::CDriver {
                at: 0,
                len: 0,
                sized: false,
                reads: false,
            })
        }
        _ => {}
    }
    let (dir, ty, nr, size) = (
        cmd >> 30,
        (cmd >> 8) & 0xff,
        cmd & 0xff,
        (cmd >> 16) & 0x3fff,
    );
    if dir != 3 || ty != MAGIC {
        return None;
    }
    let (first, writes) = match nr {
        0x40 => (40, 40),
        0x41 => (48, 48),
        0x42 => (16, 0),
        0x43 => (80, 80),
        0x44 => (56, 56),
        0x45 => return (size >= 56).then_some(Known::Smc { writes: 56 }),
        _ => return None,
    };
    (size >= first).then_some(Known::Ours { writes })
}

/// Generic VFS ioctls (they act on the descriptor or the inode before the
/// driver sees the call): their type bytes are not fuzzed.
fn vfs_type(cmd: u32) -> bool {
    matches!((cmd >> 8) & 0xff, 0x00 | 0x15 | 0x54 | 0x58 | 0x66 | 0x94)
}

fn readable(ptr: &Ptr) -> bool {
    match ptr {
        Ptr::Valid(_) | Ptr::End | Ptr::ReadOnly(_) => true,
        Ptr::NoAccess(_) | Ptr::Null => false,
        // Low, kernel and non-canonical addresses only (see gen_ptr).
        Ptr::Addr(_) => false,
    }
}

/// Judges an answer; `Err` describes what is wrong.
fn judge(input: &Input, errno: i32) -> TestResult {
    if let Some(want) = input.expect {
        ensure!(
            errno == want,
            "got {}, expected {}",
            name(errno),
            name(want)
        );
    }
    let Some(k) = known(input.cmd) else {
        if vfs_type(input.cmd) {
            return Ok(());
        }
        ensure!(
            errno == libc::ENOTTY,
            "unknown command: got {}, expected ENOTTY",
            name(errno)
        );
        return Ok(());
    };
    let reads = !matches!(k, Known::CDriver { reads: false, .. });
    if reads && !readable(&input.ptr) {
        ensure!(
            errno == libc::EFAULT,
            "unreadable argument: got {}, expected EFAULT",
            name(errno)
        );
        return Ok(());
    }
    let allowed: &[i32] = match k {
        Known::Info => &[0, libc::EFAULT],
        Known::LockCtl => &[0, libc::EFAULT, libc::EINVAL, libc::EINTR],
        Known::AllocateTlb => &[0, libc::EFAULT, libc::EINVAL, libc::ENOMEM],
        Known::FreeTlb => &[0, libc::EFAULT, libc::EINVAL, libc::EPERM],
        Known::QueryMappings => &[0, libc::EFAULT],
        Known::ConfigureTlb => &[0, libc::EFAULT, libc::EINVAL, libc::EPERM],
        Known::CDriver { .. } => &[
            0,
            libc::EFAULT,
            libc::EINVAL,
            // The argsz commands' long argsz with a non-zero tail.
            libc::E2BIG,
            libc::EPERM,
            libc::ENOMEM,
            libc::ENOSPC,
            libc::EEXIST,
            libc::EBADF,
            libc::EOPNOTSUPP,
        ],
        Known::Smc { .. } => &[
            0,
            libc::EFAULT,
            libc::EINVAL,
            libc::E2BIG,
            libc::EBUSY,
            libc::EAGAIN,
            libc::ESRCH,
            libc::EREMOTEIO,
            libc::EOPNOTSUPP,
            libc::ETIMEDOUT,
            libc::EINTR,
        ],
        Known::Ours { .. } => &[
            0,
            libc::EFAULT,
            libc::EINVAL,
            libc::E2BIG,
            libc::EBUSY,
            libc::ETIMEDOUT,
            libc::EDEADLK,
            libc::EPERM,
            libc::EINTR,
            libc::ENOMEM,
        ],
    };
    ensure!(
        allowed.contains(&errno),
        "{k:?}: unexpected {}",
        name(errno)
    );
    Ok(())
}

fn name(errno: i32) -> String {
    if errno == 0 {
        "success".into()
    } else {
        errname(errno)
    }
}

/// The bytes the command may write, as [lo, hi) addresses.
fn write_window(input: &Input, ptr: usize) -> (usize, usize) {
    // output_size_bytes; past short bytes, the word is the arena's pattern.
    let mut w = [PATTERN; 4];
    let k = input.bytes.len().min(4);
    w[..k].copy_from_slice(&input.bytes[..k]);
    let osb = u32::from_ne_bytes(w) as usize;
    match known(input.cmd) {
        Some(Known::Info) => (ptr.wrapping_add(4), ptr.wrapping_add(4).saturating_add(osb)),
        Some(Known::LockCtl) => (
            ptr.wrapping_add(12),
            ptr.wrapping_add(12).saturating_add(osb),
        ),
        Some(Known::AllocateTlb) => (ptr.wrapping_add(16), ptr.wrapping_add(48)),
        Some(Known::FreeTlb) | Some(Known::ConfigureTlb) => (0, 0),
        Some(Known::QueryMappings) => (
            ptr.wrapping_add(8),
            ptr.wrapping_add(8).saturating_add(osb.saturating_mul(24)),
        ),
        Some(Known::Ours { writes }) | Some(Known::Smc { writes }) => {
            (ptr, ptr.saturating_add(writes))
        }
        Some(Known::CDriver { at, len, sized, .. }) => {
            let n = if sized { osb } else { len };
            (ptr.wrapping_add(at), ptr.wrapping_add(at).saturating_add(n))
        }
        None => (0, 0),
    }
}

// ---- the watchdog -------------------------------------------------------------------

extern "C" fn on_sigusr2(_: libc::c_int) {}

/// Per thread: when its current call started (0: not in a call), its tid.
struct Watch {
    since: Vec<AtomicU64>,
    tid: Vec<AtomicU64>,
    stop: AtomicBool,
    kicks: AtomicU64,
}

impl Watch {
    fn new(n: usize) -> Arc<Watch> {
        Arc::new(Watch {
            since: (0..n).map(|_| AtomicU64::new(0)).collect(),
            tid: (0..n).map(|_| AtomicU64::new(0)).collect(),
            stop: AtomicBool::new(false),
            kicks: AtomicU64::new(0),
        })
    }

    /// Interrupts calls that have blocked for more than `limit`.
    fn run(&self, limit: Duration) {
        let pid = std::process::id() as i64;
        while !self.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
            let now = now_ns();
            for (since, tid) in self.since.iter().zip(&self.tid) {
                let s = since.load(Ordering::SeqCst);
                if s != 0 && now.saturating_sub(s) > limit.as_nanos() as u64 {
                    let t = tid.load(Ordering::SeqCst) as i64;
                    // SAFETY: signalling one of our own threads.
                    unsafe { libc::syscall(libc::SYS_tgkill, pid, t, libc::SIGUSR2) };
                    self.kicks.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn register(&self, i: usize) {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        self.tid[i].store(tid as u64, Ordering::SeqCst);
    }
}

/// Runs one input on `dev`, whose firmware message the oracle knows as
/// `smc` (and updates): (errno, problem).
fn execute(
    mem: &mut Mem,
    dev: &tt_arbiter::Device,
    input: &Input,
    smc: &mut SmcFile,
    watch: &Watch,
    me: usize,
) -> Result<(i32, Option<String>), String> {
    let ptr = mem.prepare(input)?;
    let smc_command = smc::command(input.cmd).map(|wait| (wait, mem.view(ptr, smc::VIEW)));
    watch.since[me].store(now_ns().max(1), Ordering::SeqCst);
    let r = ioctl_addr(dev.as_raw_fd(), input.cmd, ptr);
    watch.since[me].store(0, Ordering::SeqCst);
    let errno = errno_of(&r);
    let mut problem = judge(input, errno).err();
    if problem.is_none() {
        let (lo, hi) = write_window(input, ptr);
        problem = mem.stray_writes(lo, hi);
    }
    if let Some((wait, view)) = smc_command {
        let own = if wait { 56 } else { 48 };
        // The struct can be written exactly where it can be read back.
        let after = mem.read_back(ptr, own);
        let (p, next) = smc::judge(wait, &view, after.is_some(), after.as_deref(), *smc, errno);
        *smc = next;
        problem = problem.or(p);
    }
    Ok((errno, problem))
}

// ---- generation -----------------------------------------------------------------------

/// An argsz past the struct (`own` bytes) and within the kernel's 4096
/// makes the argument that long, its tail zero or, half the time, with one
/// nonzero byte (accepted or E2BIG).
fn grow_to_argsz(rng: &mut Rng, b: &mut Vec<u8>, own: usize, argsz: u32) {
    if argsz as usize > own && argsz <= 4096 {
        b.resize(argsz as usize, 0);
        if rng.below(2) == 0 {
            let at = own + rng.below((argsz as usize - own) as u64) as usize;
            b[at] = 1 + rng.below(255) as u8;
        }
    }
}

/// The argsz of a struct of `own` bytes, in its first word: mostly `own`,
/// else an extreme (the argument grown to a larger one).
fn put_argsz(rng: &mut Rng, b: &mut Vec<u8>, own: usize) {
    let mut argsz = own as u32;
    if rng.below(5) == 0 {
        argsz = pick(
            rng,
            &[
                0,
                1,
                4,
                own as u32 - 1,
                own as u32 + 1,
                own as u32 + 8,
                4095,
                4096,
                4097,
                0x7fff_ffff,
                0xffff_ffff,
            ],
        );
        grow_to_argsz(rng, b, own, argsz);
    }
    put32(b, 0, argsz);
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[rng.below(xs.len() as u64) as usize]
}

fn random_bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next() as u8).collect()
}

fn gen_index(rng: &mut Rng) -> u32 {
    match rng.below(10) {
        0 => pick(rng, &[64, 65, 255, 256, u32::MAX, 0x8000_0000]),
        1 => rng.next() as u32,
        _ => rng.below(64) as u32,
    }
}

fn gen_flags(rng: &mut Rng) -> u32 {
    match rng.below(10) {
        0..=3 => abi::LOCK_NONBLOCK,
        4..=5 => abi::LOCK_DEADLINE,
        6 => 0,
        7 => 3,
        8 => 1 << rng.below(32),
        _ => rng.next() as u32,
    }
}

fn gen_deadline(rng: &mut Rng) -> u64 {
    match rng.below(8) {
        0 => 0,
        1 => now_ns(),
        2 => u64::MAX,
        3 => i64::MAX as u64 + 1,
        4 => rng.next(),
        _ => now_ns() + rng.below(3_000_000),
    }
}

fn gen_mask(rng: &mut Rng) -> u64 {
    match rng.below(8) {
        0 => 0,
        1 => u64::MAX,
        2 => rng.next(),
        _ => {
            let mut m = 0;
            for _ in 0..1 + rng.below(3) {
                m |= 1u64 << rng.below(64);
            }
            m
        }
    }
}

/// One of our commands, as a struct with random (mostly plausible) fields.
fn gen_ours(rng: &mut Rng) -> (u32, Vec<u8>) {
    let nr = 0x40 + rng.below(5) as u32;
    let own = [40usize, 48, 16, 80, 56][(nr - 0x40) as usize];
    let mut b = vec![0u8; own];
    match nr {
        0x40 => {
            put32(&mut b, 4, gen_flags(rng));
            put32(&mut b, 8, gen_index(rng));
            put64(&mut b, 16, gen_deadline(rng));
        }
        0x41 => {
            put32(&mut b, 4, gen_flags(rng));
            put64(&mut b, 8, gen_mask(rng));
            put64(&mut b, 16, gen_deadline(rng));
        }
        0x42 => {
            put32(
                &mut b,
                4,
                if rng.below(6) == 0 {
                    rng.next() as u32
                } else {
                    0
                },
            );
            put64(&mut b, 8, gen_mask(rng));
        }
        0x44 => {
            put32(&mut b, 4, gen_flags(rng));
            put64(&mut b, 8, gen_tlb_size(rng));
            put64(&mut b, 16, gen_deadline(rng));
        }
        _ => {
            put32(
                &mut b,
                4,
                if rng.below(6) == 0 {
                    rng.next() as u32
                } else {
                    0
                },
            );
            put32(&mut b, 8, gen_index(rng));
        }
    }
    // reserved0 of ACQUIRE and ACQUIRE_SET, sometimes not zero
    if rng.below(10) == 0 {
        match nr {
            0x40 => put32(&mut b, 12, rng.next() as u32),
            0x41 => put32(&mut b, 44, rng.next() as u32),
            0x44 => put32(&mut b, 28, rng.next() as u32),
            _ => {}
        }
    }
    // output fields with garbage in them (must be ignored)
    if rng.below(4) == 0 && own > 24 {
        for x in &mut b[24..] {
            *x = rng.next() as u8;
        }
    }
    put_argsz(rng, &mut b, own);
    if rng.below(5) == 0 {
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(b.len().min(own) as u64) as usize;
            b[at] ^= 1 << rng.below(8);
        }
    }
    let size = own as u32;
    (abi::iowr(MAGIC, nr, size as usize), b)
}

/// The C driver's commands, with random output_size_bytes / flags / index.
/// A TLB window size: mostly one of the layouts' sizes.
fn gen_tlb_size(rng: &mut Rng) -> u64 {
    match rng.below(6) {
        0 => rng.next(),
        1 => rng.below(1 << 34),
        _ => pick(rng, &[1 << 20, 2 << 20, 16 << 20, 4 << 30]),
    }
}

fn gen_old(rng: &mut Rng) -> (u32, Vec<u8>) {
    let cmd = pick(
        rng,
        &[
            abi::IOCTL_GET_DEVICE_INFO,
            abi::IOCTL_GET_DRIVER_INFO,
            abi::IOCTL_LOCK_CTL,
            abi::IOCTL_LOCK_CTL,
            abi::IOCTL_ALLOCATE_TLB,
            abi::IOCTL_FREE_TLB,
        ],
    );
    if cmd == abi::IOCTL_ALLOCATE_TLB || cmd == abi::IOCTL_FREE_TLB {
        let len = rng.below(24) as usize;
        let mut b = random_bytes(rng, len);
        if cmd == abi::IOCTL_ALLOCATE_TLB && b.len() >= 8 && rng.below(2) == 0 {
            put64(&mut b, 0, gen_tlb_size(rng));
        }
        if cmd == abi::IOCTL_FREE_TLB && b.len() >= 4 && rng.below(2) == 0 {
            put32(&mut b, 0, rng.below(260) as u32);
        }
        return (cmd, b);
    }
    let osb = match rng.below(8) {
        0 => 0,
        1 => 0xffff_ffff,
        2 => rng.next() as u32,
        3 => pick(rng, &[1, 3, 4096, 8192, 0x8000_0000]),
        _ => pick(rng, &[4, 16, 24]),
    };
    let mut b = vec![0u8; 12 + rng.below(20) as usize];
    put32(&mut b, 0, osb);
    if cmd == abi::IOCTL_LOCK_CTL {
        let flags = match rng.below(8) {
            0 => rng.next() as u32,
            1 => 4 + rng.below(4) as u32,
            // Blocking and TEST less often: try, release, test
            _ => pick(rng, &[0, 0, 1, 1, 2, 3]),
        };
        put32(&mut b, 4, flags);
        b[8] = if rng.below(8) == 0 {
            rng.next() as u8
        } else {
            rng.below(64) as u8
        };
        if rng.below(3) == 0 {
            b[9] = rng.next() as u8;
            b[10] = rng.next() as u8;
            b[11] = rng.next() as u8;
        }
    } else if rng.below(3) == 0 {
        b.truncate(4);
    }
    (cmd, b)
}

/// The C driver's argsz commands that reach the chip: SET_NOC_CLEANUP,
/// NOC_READ and NOC_WRITE, with random flags, widths, alignment, reserved
/// bytes and argsz. Their tile is a Tensix tile's L1 or coordinates no tile
/// has: a NOC_WRITE (or a cleanup write at close) anywhere else could reset
/// the chip or break its firmware under the other scenarios.
fn gen_noc(rng: &mut Rng, card: u32) -> (u32, Vec<u8>) {
    let (x, y) = if card == 0 { (1u16, 1u16) } else { (1, 2) };
    let cmd = pick(
        rng,
        &[
            abi::IOCTL_SET_NOC_CLEANUP,
            abi::IOCTL_NOC_READ,
            abi::IOCTL_NOC_WRITE,
        ],
    );
    let own = 32usize;
    let mut b = vec![0u8; own];
    let (x, y) = if rng.below(8) == 0 {
        (64 + rng.below(0xFFC0) as u16, rng.below(0x10000) as u16)
    } else {
        (x, y)
    };
    if rng.below(8) == 0 {
        put32(&mut b, 4, 1 << rng.below(32));
    }
    let addr = rng.below(1 << 20) & !pick(rng, &[0u64, 0, 1, 3, 7]);
    if cmd == abi::IOCTL_SET_NOC_CLEANUP {
        b[8] = pick(rng, &[0, 1, 1, 2]);
        b[9] = x as u8;
        b[10] = y as u8;
        b[11] = pick(rng, &[0, 0, 1, 2]);
        if rng.below(8) == 0 {
            put32(&mut b, 12, rng.next() as u32);
        }
        put64(&mut b, 16, addr & !3);
        put64(&mut b, 24, rng.next());
    } else {
        b[8..10].copy_from_slice(&x.to_ne_bytes());
        b[10..12].copy_from_slice(&y.to_ne_bytes());
        b[12] = pick(rng, &[0, 0, 1, 2]);
        b[13] = pick(rng, &[1, 2, 4, 8, 8, 0, 3, 16]);
        if rng.below(8) == 0 {
            b[14 + rng.below(2) as usize] = 1 + rng.below(255) as u8;
        }
        put64(&mut b, 16, addr);
        put64(&mut b, 24, rng.next());
    }
    let mut argsz = own as u32;
    if rng.below(4) == 0 {
        argsz = pick(rng, &[0, 4, 31, 33, 40, 4096, 4097, u32::MAX]);
        grow_to_argsz(rng, &mut b, own, argsz);
    }
    put32(&mut b, 0, argsz);
    (cmd, b)
}

/// A RESET_DEVICE that resets (flags 1-5) would fence the fuzzer's own
/// files and reset the chip under it: those flags become an unknown one.
fn gen_cmd_bytes(rng: &mut Rng) -> (u32, Vec<u8>) {
    let (cmd, mut bytes) = gen_any_cmd_bytes(rng);
    if cmd == abi::IOCTL_RESET_DEVICE && bytes.len() >= 8 {
        let flags = u32::from_ne_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        if (1..=5).contains(&flags) {
            put32(&mut bytes, 4, 7);
        }
    }
    (cmd, bytes)
}

fn gen_any_cmd_bytes(rng: &mut Rng) -> (u32, Vec<u8>) {
    match rng.below(100) {
        0..=39 => gen_ours(rng),
        40..=59 => gen_old(rng),
        60..=69 => {
            // our numbers with random size and direction bits
            let (_, mut b) = gen_ours(rng);
            let nr = 0x40 + rng.below(5) as u32;
            let dir = if rng.below(2) == 0 {
                3
            } else {
                rng.below(4) as u32
            };
            let size = match rng.below(4) {
                0 => rng.below(0x4000),
                1 => 0x3fff,
                _ => rng.below(100),
            } as u32;
            b.resize(b.len().max((size as usize).min(ARENA)), 0);
            (abi::ioc(dir, MAGIC, nr, size as usize), b)
        }
        70..=84 => {
            let dir = rng.below(4) as u32;
            let nr = rng.below(256) as u32;
            let size = rng.below(0x4000) as usize;
            let n = rng.below(128) as usize;
            (abi::ioc(dir, MAGIC, nr, size), random_bytes(rng, n))
        }
        _ => {
            let cmd = loop {
                let c = rng.next() as u32;
                if !vfs_type(c) {
                    break c;
                }
            };
            let n = rng.below(128) as usize;
            (cmd, random_bytes(rng, n))
        }
    }
}

fn gen_ptr(rng: &mut Rng, len: usize) -> Ptr {
    let page = page_size();
    match rng.below(100) {
        0..=44 => Ptr::Valid(8 * rng.below(((ARENA - len) / 8) as u64 + 1) as usize),
        45..=59 => Ptr::Valid(rng.below((ARENA - len) as u64 + 1) as usize),
        60..=69 => Ptr::End,
        70..=77 => Ptr::ReadOnly(rng.below(page as u64) as usize),
        78..=82 => Ptr::NoAccess(rng.below(page as u64) as usize),
        83..=86 => Ptr::Null,
        87..=91 => Ptr::Addr(1 + rng.below(4095)),
        _ => Ptr::Addr(pick(
            rng,
            &[
                0xffff_8000_0000_0000,
                0xffff_8880_0000_0000,
                0xffff_ffff_8100_0000,
                0xffff_ffff_ff60_0000,
                u64::MAX - 7,
                u64::MAX,
                0x0000_8000_0000_0000,
                0x8000_0000_0000_0000,
            ],
        )),
    }
}

fn gen_input(rng: &mut Rng) -> Input {
    let card = rng.below(2) as u32;
    let (cmd, bytes) = match rng.below(10) {
        0 => gen_noc(rng, card),
        1 | 2 => smc::gen_smc(rng),
        _ => gen_cmd_bytes(rng),
    };
    let ptr = gen_ptr(rng, bytes.len());
    Input {
        card,
        cmd,
        ptr,
        bytes,
        prehold: 0,
        selfhold: 0,
        expect: None,
    }
}

// ---- the suites -------------------------------------------------------------------------

/// What fuzz threads report.
#[derive(Default)]
struct Tally {
    inputs: u64,
    ok: u64,
    eintr: u64,
    breaks: Vec<String>,
}

fn fuzz_thread(me: usize, seed: u64, n: u64, watch: &Watch) -> Result<Tally, String> {
    watch.register(me);
    let mut rng = Rng::new(seed);
    let mut mem = Mem::new()?;
    let mut devs = [open(0)?, open(1)?];
    let mut smc = [SmcFile::Idle; 2];
    let mut t = Tally::default();
    for k in 0..n {
        if k % 100 == 99 {
            // Closing releases what the fuzzed commands acquired, and
            // abandons a firmware message (in flight or not).
            devs = [open(0)?, open(1)?];
            smc = [SmcFile::Idle; 2];
        }
        let input = gen_input(&mut rng);
        let card = input.card as usize;
        let (errno, problem) = execute(&mut mem, &devs[card], &input, &mut smc[card], watch, me)?;
        t.inputs += 1;
        match errno {
            0 => t.ok += 1,
            libc::EINTR => t.eintr += 1,
            _ => {}
        }
        if let Some(p) = problem {
            t.breaks.push(format!(
                "{p}\n  (errno {})\n  corpus: {}",
                name(errno),
                input.line()
            ));
        }
    }
    Ok(t)
}

fn install_sigusr2() -> TestResult {
    install_handler(libc::SIGUSR2, on_sigusr2, false)
}

/// Multithreaded fuzzing of both cards, with locks held by another file.
pub fn fuzz_ioctls() -> TestResult {
    let nthreads = sized(4usize, 8);
    let per_thread = sized(1500u64, 12_500);
    let left = check_all_free(&[0, 1])?;
    ensure!(
        left.lost == 0,
        "locks not free before fuzzing:\n{}",
        left.report.join("\n")
    );
    let seed = seed("fuzz");
    let answers_before = smc::ANSWERS_CHECKED.load(Ordering::Relaxed);
    install_sigusr2()?;
    // Locks held elsewhere during the fuzzing: a blocking command on them
    // waits until the watchdog interrupts it.
    let holder = [open(0)?, open(1)?];
    let held = bit(0) | bit(1) | bit(16) | bit(20) | bit(63);
    for h in &holder {
        expect_ok(
            acquire_set(h, held, abi::LOCK_NONBLOCK, 0).0,
            "ACQUIRE_SET of the held locks",
        )?;
    }
    let watch = Watch::new(nthreads);
    let w = watch.clone();
    let dog = std::thread::spawn(move || w.run(Duration::from_millis(15)));
    let slow = SlowFirmware::new(3)?;
    let start = Instant::now();
    let results: Vec<Result<Tally, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..nthreads)
            .map(|i| {
                let watch = &watch;
                let seed = seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                s.spawn(move || fuzz_thread(i, seed, per_thread, watch))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|p| Err(format!("fuzz thread panicked: {}", panic_message(&p))))
            })
            .collect()
    });
    watch.stop.store(true, Ordering::SeqCst);
    let _ = dog.join();
    let took = start.elapsed();
    drop(slow);
    for h in &holder {
        for i in 0..64 {
            if held & bit(i) != 0 {
                ensure!(query(h, i)?.held_by_caller, "the holder file lost lock {i}");
            }
        }
    }
    drop(holder);
    let mut total = Tally::default();
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(t) => {
                total.inputs += t.inputs;
                total.ok += t.ok;
                total.eintr += t.eintr;
                total.breaks.extend(t.breaks);
            }
            Err(e) => errors.push(e),
        }
    }
    let left = check_all_free(&[0, 1])?;
    let messages_left = [smc_queue_left(0)?, smc_queue_left(1)?].concat();
    figure("fuzz_inputs", total.inputs);
    figure("operations", total.inputs);
    figure("fuzz_succeeded", total.ok);
    figure("fuzz_interrupted", total.eintr);
    figure("fuzz_watchdog_kicks", watch.kicks.load(Ordering::SeqCst));
    figure("fuzz_breaks", total.breaks.len());
    let answers = smc::ANSWERS_CHECKED.load(Ordering::Relaxed) - answers_before;
    figure("fuzz_smc_answers_checked", answers);
    figure("lost_locks", left.lost);
    println!(
        "# fuzz: {} inputs in {:.1} s on {nthreads} threads",
        total.inputs,
        took.as_secs_f64()
    );
    for b in total.breaks.iter().take(20) {
        for line in b.lines() {
            println!("# fuzz break: {line}");
        }
    }
    ensure!(errors.is_empty(), "{}", errors.join("\n"));
    ensure!(
        total.breaks.is_empty(),
        "{} input(s) broke something (the '# corpus:' lines above go in tools/ioctl-test/corpus/); first:\n{}",
        total.breaks.len(),
        total.breaks[0]
    );
    ensure!(
        left.lost == 0,
        "after the fuzz files closed, locks are not free:\n{}",
        left.report.join("\n")
    );
    ensure!(
        answers > 0,
        "no firmware answer was collected: SMC_MSG and SMC_WAIT went unfuzzed"
    );
    ensure!(
        messages_left.is_empty(),
        "after the fuzz files closed, firmware messages of files are still queued:\n{}",
        messages_left.join("\n")
    );
    Ok(())
}

/// The corpus' inputs, replayed one by one with their expectations.
///
/// The watchdog ends a call blocked for a second: the inputs that block on
/// a lock expect its EINTR, and a call that waits for the firmware (a
/// power vote) answers in milliseconds, yet took more than the fuzzer's
/// 50 ms with two TCG VMs on two cores ("line 74: SET_POWER_STATE: got
/// EINTR, expected success").
pub fn corpus_replay() -> TestResult {
    install_sigusr2()?;
    let watch = Watch::new(1);
    watch.register(0);
    let w = watch.clone();
    let dog = std::thread::spawn(move || w.run(Duration::from_secs(1)));
    let result = replay_all(&watch);
    watch.stop.store(true, Ordering::SeqCst);
    let _ = dog.join();
    result
}

fn replay_all(watch: &Watch) -> TestResult {
    let mut mem = Mem::new()?;
    let mut n = 0;
    let mut failures = Vec::new();
    for (file, text) in CORPUS {
        for (lineno, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{file}:{}", lineno + 1);
            let input = Input::parse(line).map_err(|e| format!("{at}: {e}"))?;
            n += 1;
            let queued_before = smc_queue_left(input.card)?;
            let dev = open(input.card)?;
            let other = open(input.card)?;
            if input.prehold != 0 {
                expect_ok(
                    acquire_set(&other, input.prehold, abi::LOCK_NONBLOCK, 0).0,
                    &format!("{at}: prehold"),
                )?;
            }
            if input.selfhold != 0 {
                expect_ok(
                    acquire_set(&dev, input.selfhold, abi::LOCK_NONBLOCK, 0).0,
                    &format!("{at}: selfhold"),
                )?;
            }
            let (errno, problem) = execute(&mut mem, &dev, &input, &mut SmcFile::Idle, watch, 0)?;
            if let Some(p) = problem {
                failures.push(format!("{at}: {p} (errno {})\n  {line}", name(errno)));
            }
            drop(dev);
            drop(other);
            // Only what this input left (an earlier one's is reported
            // there).
            let mut messages_left = smc_queue_left(input.card)?;
            for old in queued_before {
                let same = |l: &String| l.split(" age_ms=").next() == old.split(" age_ms=").next();
                if let Some(i) = messages_left.iter().position(same) {
                    messages_left.remove(i);
                }
            }
            if !messages_left.is_empty() {
                failures.push(format!(
                    "{at}: firmware messages still queued after closing:\n{}",
                    messages_left.join("\n")
                ));
            }
            let left = check_all_free(&[input.card])?;
            if left.lost != 0 {
                failures.push(format!(
                    "{at}: locks not free after closing:\n{}",
                    left.report.join("\n")
                ));
            }
        }
    }
    figure("corpus_inputs", n);
    ensure!(n > 0, "the corpus is empty");
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_parses_and_lines_round_trip() {
        for (file, text) in CORPUS {
            for line in text.lines().map(str::trim) {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let i = Input::parse(line).unwrap_or_else(|e| panic!("{file}: {line}: {e}"));
                let again = Input::parse(&i.line()).unwrap();
                assert_eq!((again.card, again.cmd, &again.ptr), (i.card, i.cmd, &i.ptr));
                assert_eq!(again.bytes, i.bytes, "{line}");
            }
        }
        let mut rng = Rng::new(5);
        for _ in 0..2000 {
            let i = gen_input(&mut rng);
            assert!(i.bytes.len() <= ARENA);
            let again = Input::parse(&i.line()).unwrap();
            assert_eq!(again.bytes, i.bytes);
            assert_eq!(again.ptr, i.ptr);
            assert!(!vfs_type(i.cmd) || known(i.cmd).is_some());
        }
        assert_eq!(
            known(abi::IOCTL_LOCK_QUERY),
            Some(Known::Ours { writes: 80 })
        );
        assert_eq!(known(abi::iowr(MAGIC, 0x43, 79)), None);
        assert_eq!(
            known(abi::iowr(MAGIC, 0x40, 0x3fff)),
            Some(Known::Ours { writes: 40 })
        );
        assert_eq!(known(0x8008_fa08), None);
        assert_eq!(errno_by_name("EFAULT"), Some(libc::EFAULT));
    }
}

//! Teardown under load: unbind/rebind card 0 in a loop while waiters are
//! queued on it and a stress workload runs on card 1; module reload.
//! Both leave the system as they found it (module loaded, both cards
//! bound in their order).

use std::ffi::CString;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tt_arbiter::abi;

use super::storm::bits;
use super::*;

const DRIVER: &str = "/sys/bus/pci/drivers/tenstorrent";

/// Stress on one card: random blocking / timed / try / set / LOCK_CTL
/// operations with owner words; any errno but EBUSY and ETIMEDOUT is an
/// error, and so is a conflict in the owner words.
struct Load {
    stop: Counter,
    ops: Counter,
    owners: Owners,
    errors: FirstError,
    doubles: FirstError,
    /// Files fenced by a reset, closed and opened again.
    fenced: Counter,
}

impl Load {
    fn new() -> Result<Load, String> {
        Ok(Load {
            stop: Counter::new()?,
            ops: Counter::new()?,
            owners: Owners::new()?,
            errors: FirstError::new()?,
            doubles: FirstError::new()?,
            fenced: Counter::new()?,
        })
    }

    /// With `fenced_reopens`, a file fenced by a reset (ENODEV) is closed,
    /// which releases what it held, and the card opened again.
    fn worker(&self, card: u32, span: u32, id: u32, seed: u64, fenced_reopens: bool) -> i32 {
        let mut dev = match open(card) {
            Ok(d) => d,
            Err(e) => {
                self.errors.report(&e);
                return 1;
            }
        };
        let mut rng = Rng::new(seed);
        while self.stop.get().load(Ordering::SeqCst) == 0 {
            let one = rng.below(span as u64) as u32;
            let kind = rng.below(6);
            let mask = if kind == 5 {
                bit(one) | bit((one + 1 + rng.below(span as u64 - 1) as u32) % span)
            } else {
                bit(one)
            };
            self.ops.get().fetch_add(1, Ordering::SeqCst);
            let r = match kind {
                0 => acquire(&dev, one, 0, 0).0,
                1 => acquire(&dev, one, abi::LOCK_NONBLOCK, 0).0,
                2 => {
                    acquire(
                        &dev,
                        one,
                        abi::LOCK_DEADLINE,
                        now_ns() + rng.below(2_000_000),
                    )
                    .0
                }
                3 => {
                    lock_ctl(&dev, one as u8, abi::LOCK_CTL_ACQUIRE_BLOCKING).map(|v| v as i32 - 1)
                }
                4 => match lock_ctl(&dev, one as u8, abi::LOCK_CTL_ACQUIRE) {
                    Ok(1) => Ok(0),
                    Ok(_) => Err(std::io::Error::from_raw_os_error(libc::EBUSY)),
                    Err(e) => Err(e),
                },
                _ => acquire_set(&dev, mask, 0, 0).0,
            };
            match r {
                Ok(0) => {}
                Ok(v) => {
                    self.errors
                        .report(&format!("card {card}: op {kind} answered {v}"));
                    return 1;
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::ETIMEDOUT)) => {
                    continue
                }
                Err(e) if fenced_reopens && e.raw_os_error() == Some(libc::ENODEV) => {
                    match self.reopen(card, &mut dev) {
                        Ok(()) => continue,
                        Err(()) => return 1,
                    }
                }
                Err(e) => {
                    self.errors.report(&format!(
                        "card {card} (stress on the other card): op {kind} on {mask:#x}: {}",
                        outcome::<()>(&Err(e))
                    ));
                    return 1;
                }
            }
            for l in bits(mask) {
                if let Err(other) = self.owners.claim(card, l, id) {
                    self.doubles.report(&format!(
                        "card {card} lock {l}: worker {id} granted it while worker {other} holds it"
                    ));
                }
            }
            for _ in 0..rng.below(3000) {
                std::hint::spin_loop();
            }
            for l in bits(mask) {
                if let Err(other) = self.owners.unclaim(card, l, id) {
                    self.doubles.report(&format!(
                        "card {card} lock {l}: owner word {other} while worker {id} held it"
                    ));
                }
            }
            self.ops.get().fetch_add(1, Ordering::SeqCst);
            let released = release(&dev, mask);
            if fenced_reopens
                && matches!(&released, Err(e) if e.raw_os_error() == Some(libc::ENODEV))
            {
                // Fenced while holding: the locks stay held until the file
                // closes, which the reopen does.
                if self.reopen(card, &mut dev).is_err() {
                    return 1;
                }
                continue;
            }
            if let Err(e) = released {
                self.errors.report(&format!(
                    "card {card}: RELEASE {mask:#x}: {}",
                    outcome::<()>(&Err(e))
                ));
                return 1;
            }
        }
        0
    }
}

impl Load {
    fn reopen(&self, card: u32, dev: &mut Device) -> Result<(), ()> {
        self.fenced.get().fetch_add(1, Ordering::SeqCst);
        match open(card) {
            Ok(d) => {
                *dev = d;
                Ok(())
            }
            Err(e) => {
                self.errors.report(&format!("reopen after a reset: {e}"));
                Err(())
            }
        }
    }
}

/// Card 0 is fresh: every lock free, counters zero.
fn fresh(card: u32) -> TestResult {
    let dev = open(card)?;
    for i in 0..abi::LOCK_COUNT {
        let q = query(&dev, i)?;
        ensure!(
            !q.held && q.waiters == 0 && q.raw.acquisitions == 0 && q.raw.owner_died_count == 0,
            "card {card} lock {i} is not fresh after (re)binding: {q:?}"
        );
    }
    Ok(())
}

/// Unbind and rebind card 0 in a loop, each time with waiters of every
/// kind queued on it (they must all wake with ENODEV), while stress runs on
/// card 1 (no error, mutual exclusion holds).
pub fn unbind_rebind_under_load() -> TestResult {
    let iterations = sized(3, 25);
    let nwaiters = sized(4u32, 8);
    let bdf0 = bdf(0)?;
    let left = check_all_free(&[0, 1])?;
    ensure!(
        left.lost == 0,
        "locks not free at start:\n{}",
        left.report.join("\n")
    );
    let mut rng = Rng::new(seed("teardown"));
    let load = Load::new()?;
    let mut stressers = Vec::new();
    for id in 1..=sized(3u32, 4) {
        let seed = rng.next();
        let load = &load;
        stressers.push(fork_child(&[], move || load.worker(1, 6, id, seed, false))?);
    }
    let results = Shared::new(4096)?;
    let i = 2u32;
    let mut result = Ok(());
    let mut rebinds = 0u64;
    let mut woken = 0u64;
    for it in 0..iterations {
        let r = (|| -> TestResult {
            let holder = open(0)?;
            expect_ok(
                acquire(&holder, i, abi::LOCK_NONBLOCK, 0).0,
                "holder ACQUIRE",
            )?;
            // A mapped window too, which the unbind must take down.
            let window = ctx(
                super::super::mapping::alloc(&holder, 2 << 20),
                "ALLOCATE_TLB",
            )?;
            let mapped = ctx(
                crate::card::Mmio::new(&holder, window.mmap_offset_uc, 4096),
                "mmap",
            )?;
            let _ = mapped.read32(0);
            // And a NOC DMA buffer, whose outbound region the unbind must
            // disable before the buffer is freed.
            let buffer = expect_ok(
                super::super::dma_helpers::allocate_noc_buffer(&holder, 0, 4096),
                "NOC_DMA buffer",
            )?;
            let mut pids = Vec::new();
            for w in 0..nwaiters {
                results.u64(w as usize).store(0, Ordering::SeqCst);
                let results = &results;
                let kind = (w + it as u32) % 4;
                pids.push(fork_child(&[], move || {
                    let Ok(d) = open(0) else {
                        results.u64(w as usize).store(u64::MAX, Ordering::SeqCst);
                        return 1;
                    };
                    let r = match kind {
                        0 => acquire(&d, i, 0, 0).0,
                        1 => lock_ctl(&d, i as u8, abi::LOCK_CTL_ACQUIRE_BLOCKING).map(i32::from),
                        2 => acquire(&d, i, abi::LOCK_DEADLINE, now_ns() + 300_000_000_000).0,
                        _ => acquire_set(&d, bit(i) | bit(i + 1), 0, 0).0,
                    };
                    results
                        .u64(w as usize)
                        .store(1000 + errno_of(&r) as u64, Ordering::SeqCst);
                    0
                })?);
                wait_waiters(&holder, i, w + 1)?;
            }
            sysfs_write(&format!("{DRIVER}/unbind"), &bdf0)?;
            rebinds += 1;
            let deadline = Instant::now() + PATIENCE;
            let mut problems = Vec::new();
            if let Err(e) = super::super::dma_helpers::expect_quiesced(0, buffer.noc_address) {
                problems.push(e);
            }
            for (w, pid) in pids.into_iter().enumerate() {
                if reap_until(pid, deadline).is_none() {
                    kill_reap(pid);
                    problems.push(format!(
                        "waiter {w} still blocked {PATIENCE:?} after the unbind"
                    ));
                    continue;
                }
                let got = results.u64(w).load(Ordering::SeqCst);
                if got == 1000 + libc::ENODEV as u64 {
                    woken += 1;
                } else {
                    problems.push(format!(
                        "waiter {w} (kind {}): {}, expected ENODEV",
                        (w as u32 + it as u32) % 4,
                        if got >= 1000 {
                            name_of(got as i32 - 1000)
                        } else {
                            format!("no result ({got})")
                        }
                    ));
                }
            }
            expect_errno(
                holder.query(i).map_err(std::io::Error::from),
                libc::ENODEV,
                "QUERY on the unbound card",
            )?;
            drop(mapped);
            drop(holder);
            sysfs_write(&format!("{DRIVER}/bind"), &bdf0)?;
            wait_path(&node(0), true)?;
            fresh(0)?;
            ensure!(
                problems.is_empty(),
                "iteration {it}:\n{}",
                problems.join("\n")
            );
            ensure!(
                load.errors.count() == 0 && load.doubles.count() == 0,
                "stress on card 1 during iteration {it}: {} {}",
                load.errors.first(),
                load.doubles.first()
            );
            Ok(())
        })();
        if r.is_err() {
            if !is_bound(&bdf0) {
                let _ = sysfs_write(&format!("{DRIVER}/bind"), &bdf0);
            }
            result = r;
            break;
        }
    }
    load.stop.get().store(1, Ordering::SeqCst);
    let deadline = Instant::now() + PATIENCE;
    let mut stuck = 0;
    for pid in stressers {
        match reap_until(pid, deadline) {
            Some(0) => {}
            Some(s) => {
                if result.is_ok() {
                    result = Err(format!(
                        "card 1 stress process {}: {}",
                        describe_status(s),
                        load.errors.first()
                    ));
                }
            }
            None => {
                stuck += 1;
                kill_reap(pid);
            }
        }
    }
    let left = check_all_free(&[0, 1])?;
    figure("rebinds", rebinds);
    figure("teardown_waiters_woken_enodev", woken);
    figure("operations", load.ops.get().load(Ordering::SeqCst));
    figure("lost_locks", left.lost + stuck);
    figure("double_holders", load.doubles.count());
    result?;
    ensure!(
        stuck == 0,
        "{stuck} card 1 stress process(es) stuck at the end"
    );
    ensure!(
        load.errors.count() == 0,
        "card 1 stress: {} error(s), first: {}",
        load.errors.count(),
        load.errors.first()
    );
    ensure!(
        load.doubles.count() == 0,
        "card 1 stress: {} double holder(s), first: {}",
        load.doubles.count(),
        load.doubles.first()
    );
    ensure!(
        left.lost == 0,
        "locks not free at the end:\n{}",
        left.report.join("\n")
    );
    Ok(())
}

fn name_of(errno: i32) -> String {
    if errno == 0 {
        "success".into()
    } else {
        errname(errno)
    }
}

fn delete_module() -> TestResult {
    let start = Instant::now();
    loop {
        // SAFETY: delete_module with a NUL-terminated name.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_delete_module,
                c"tenstorrent".as_ptr(),
                libc::O_NONBLOCK,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        let errno = e.raw_os_error().unwrap_or(0);
        // Files of processes just reaped may still be on their way out.
        if (errno == libc::EAGAIN || errno == libc::EBUSY)
            && start.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        return Err(format!("delete_module(\"tenstorrent\", O_NONBLOCK): {e}"));
    }
}

fn insert_module(path: &str) -> TestResult {
    insert_module_with(path, "")
}

fn insert_module_with(path: &str, params: &str) -> TestResult {
    let f = std::fs::File::open(path).map_err(|e| format!("open {path}: {e}"))?;
    let params = CString::new(params).map_err(|e| e.to_string())?;
    // SAFETY: finit_module with an open module file and empty parameters.
    let rc = unsafe { libc::syscall(libc::SYS_finit_module, f.as_raw_fd(), params.as_ptr(), 0) };
    ensure!(
        rc == 0,
        "finit_module({path}): {}",
        std::io::Error::last_os_error()
    );
    Ok(())
}

/// Module reload with nothing open: delete_module, finit_module of
/// /tenstorrent.ko (TT_MODULE_PATH), both cards bound again, and they
/// come back in the same order, fresh.
pub fn module_reload() -> TestResult {
    let reloads = sized(1, 4);
    let path = std::env::var("TT_MODULE_PATH").unwrap_or_else(|_| "/tenstorrent.ko".into());
    ensure!(
        std::path::Path::new(&path).exists(),
        "{path} does not exist (the VM harness puts the module there)"
    );
    let bdfs = [bdf(0)?, bdf(1)?];
    let left = check_all_free(&[0, 1])?;
    ensure!(
        left.lost == 0,
        "locks not free at start:\n{}",
        left.report.join("\n")
    );
    let mut done = 0;
    let mut result = Ok(());
    for r in 0..reloads {
        let step = (|| -> TestResult {
            delete_module()?;
            ensure!(
                !std::path::Path::new("/sys/module/tenstorrent").exists(),
                "/sys/module/tenstorrent still exists after delete_module"
            );
            wait_path(&node(0), false)?;
            wait_path(&node(1), false)?;
            insert_module(&path)?;
            bind_both()?;
            for (n, (bdf, (v, d))) in bdfs.iter().zip([card_ids(0), card_ids(1)]).enumerate() {
                let dev = open(n as u32)?;
                let info = ctx(dev.device_info(), "GET_DEVICE_INFO after reload")?;
                ensure!(
                    info.vendor_id == v && info.device_id == d,
                    "after reload {} is {:04x}:{:04x}, expected {v:04x}:{d:04x}",
                    node(n as u32),
                    info.vendor_id,
                    info.device_id
                );
                let link =
                    std::fs::read_link(format!("/sys/class/tenstorrent/tenstorrent!{n}/device"))
                        .map_err(|e| format!("device link of card {n}: {e}"))?;
                ensure!(
                    link.file_name()
                        .is_some_and(|f| f.to_string_lossy() == *bdf),
                    "after reload card {n} is {}, expected {bdf}",
                    link.display()
                );
                fresh(n as u32)?;
                ctx(
                    dev.acquire(5, tt_arbiter::Wait::Try),
                    "ACQUIRE after reload",
                )?;
            }
            Ok(())
        })();
        if let Err(e) = step {
            // Leave the system usable for the scenarios after this one.
            if !std::path::Path::new("/sys/module/tenstorrent").exists() {
                let _ = insert_module(&path);
            }
            if !std::path::Path::new(&node(0)).exists() || !std::path::Path::new(&node(1)).exists()
            {
                let _ = bind_both();
            }
            result = Err(format!("reload {r}: {e}"));
            break;
        }
        done += 1;
    }
    figure("reloads", done);
    result?;
    let left = check_all_free(&[0, 1])?;
    figure("lost_locks", left.lost);
    ensure!(
        left.lost == 0,
        "locks not free after the reloads:\n{}",
        left.report.join("\n")
    );
    Ok(())
}

/// Exit status of [`bar_faulter`] when a file touched a BAR page after the
/// reset that fenced it had returned.
const TOUCHED_AFTER_FENCE: i32 = 3;

/// Maps a BAR page of card 0, touches it (a fault that inserts the page)
/// and unmaps it, in a loop, until `stop`, which the caller sets once its
/// reset (which fenced this file) has returned: the mapping of that round,
/// made before the fence, is touched once more and must fault (`SIGBUS`).
/// Exits 0 when the fence was seen first (mmap `ENODEV`), and
/// [`TOUCHED_AFTER_FENCE`] when the touch worked: a fault that checked the
/// fence before the reset inserted its page after the reset's zap (seen
/// with the check outside the lock the fence is set under).
/// It writes a byte to `opened` once its file is open and has faulted a
/// page in, so that the caller's reset fences it.
fn bar_faulter(stop: &Counter, opened: RawFd) -> i32 {
    let Ok(dev) = open(0) else {
        return 1;
    };
    let mut told = false;
    loop {
        let bar = match crate::card::Mmio::new(&dev, 0, 4096) {
            Ok(bar) => bar,
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return 0,
            Err(_) => return 1,
        };
        let _ = bar.read32(0);
        if !told {
            told = true;
            if write_all(opened, b"o").is_err() {
                return 1;
            }
        }
        if stop.get().load(Ordering::SeqCst) != 0 {
            let _ = bar.read32(0);
            return TOUCHED_AFTER_FENCE;
        }
    }
}

/// Maps a window and a BAR page of card 0 and touches them, allocating,
/// configuring and freeing the window, until `stop`; a file fenced by a
/// reset (ENODEV) is opened again. A touch of a mapping a reset revoked
/// ends the process with SIGBUS, which the caller expects.
fn mapper(stop: &Counter, errors: &FirstError) -> i32 {
    use super::super::mapping::{alloc, chip, configure, free, tensix};
    const PAGE: usize = 4096;
    let tile = tensix(chip(0));
    let Ok(mut dev) = open(0) else {
        errors.report("mapper: open");
        return 1;
    };
    let fenced = |r: &std::io::Error| r.raw_os_error() == Some(libc::ENODEV);
    while stop.get().load(Ordering::SeqCst) == 0 {
        let round = (|| -> std::io::Result<()> {
            let w = alloc(&dev, 1 << 20)?;
            configure(&dev, w.id, tile, 0)?;
            let window = crate::card::Mmio::new(&dev, w.mmap_offset_uc, PAGE)?;
            let bar = crate::card::Mmio::new(&dev, 0, PAGE)?;
            let _ = (window.read32(0), bar.read32(0));
            drop((window, bar));
            free(&dev, w.id)?;
            Ok(())
        })();
        match round {
            Ok(()) => {}
            Err(e) if fenced(&e) => match open(0) {
                Ok(d) => dev = d,
                Err(e) => {
                    errors.report(&format!("mapper: reopen: {e}"));
                    return 1;
                }
            },
            Err(e) => {
                errors.report(&format!("mapper: {}", outcome::<()>(&Err(e))));
                return 1;
            }
        }
    }
    0
}

/// Resets racing with what files do: lock workers on card 0 (a fenced
/// file is closed, which releases its locks, and opened again), a mapper
/// mapping, touching and freeing windows, a BAR faulter whose file must
/// not reach the card once the reset returned, and resets (CONFIG_WRITE, which
/// fences every other file and on a Wormhole touches nothing else) from a
/// file of their own, in a loop; then resets racing with an unbind. No lock
/// is lost or held twice, every error is one a reset explains, the card
/// comes back fresh, and the kernel reports nothing (the harness reads
/// its log).
pub fn resets_under_load() -> TestResult {
    let iterations = sized(20, 200);
    let bdf0 = bdf(0)?;
    let left = check_all_free(&[0])?;
    ensure!(
        left.lost == 0,
        "locks not free at start:\n{}",
        left.report.join("\n")
    );
    let mut rng = Rng::new(seed("resets"));
    let load = Load::new()?;
    let mut workers = Vec::new();
    for id in 1..=4u32 {
        let seed = rng.next();
        let load = &load;
        workers.push(fork_child(&[], move || load.worker(0, 6, id, seed, true))?);
    }
    let stop = Counter::new()?;
    let mapper_errors = FirstError::new()?;
    let mut result = Ok(());
    let mut sigbus = 0u64;
    for it in 0..iterations {
        stop.get().store(0, Ordering::SeqCst);
        let (stop, errors) = (&stop, &mapper_errors);
        let pid = fork_child(&[], move || mapper(stop, errors))?;
        let (opened_r, opened_w) = pipe()?;
        let opened = opened_w.as_raw_fd();
        let faulter = fork_child(&[opened], move || bar_faulter(stop, opened))?;
        drop(opened_w);
        let r = (|| -> TestResult {
            let mut byte = [0u8];
            read_timeout(opened_r.as_raw_fd(), &mut byte, PATIENCE)
                .map_err(|e| format!("the BAR faulter did not start: {e}"))?;
            let resetter = open(0)?;
            let mut r = abi::ResetDevice::default();
            r.input.output_size_bytes = 8;
            r.input.flags = 2;
            expect_ok(
                ioctl(&resetter, abi::IOCTL_RESET_DEVICE, &mut r),
                "RESET_DEVICE",
            )?;
            ensure_eq!(r.output.result, 0, "CONFIG_WRITE result");
            Ok(())
        })();
        stop.get().store(1, Ordering::SeqCst);
        match reap_until(pid, Instant::now() + PATIENCE) {
            Some(0) => {}
            Some(s) if died_of(s, libc::SIGBUS) => sigbus += 1,
            Some(s) => {
                result = Err(format!(
                    "mapper: {}: {}",
                    describe_status(s),
                    mapper_errors.first()
                ));
            }
            None => {
                kill_reap(pid);
                result = Err("mapper stuck".into());
            }
        }
        match reap_until(faulter, Instant::now() + PATIENCE) {
            Some(0) => {}
            Some(s) if died_of(s, libc::SIGBUS) => sigbus += 1,
            Some(s) if libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == TOUCHED_AFTER_FENCE => {
                result = Err("a fenced file touched a BAR page after the reset returned".into());
            }
            Some(s) => result = Err(format!("BAR faulter: {}", describe_status(s))),
            None => {
                kill_reap(faulter);
                result = Err("BAR faulter stuck".into());
            }
        }
        if let Err(e) = r {
            result = Err(format!("iteration {it}: {e}"));
        }
        if result.is_err() {
            break;
        }
    }
    load.stop.get().store(1, Ordering::SeqCst);
    let mut stuck = 0;
    for pid in workers {
        match reap_until(pid, Instant::now() + PATIENCE) {
            Some(0) => {}
            Some(s) if result.is_ok() => {
                result = Err(format!(
                    "worker {}: {}",
                    describe_status(s),
                    load.errors.first()
                ));
            }
            Some(_) => {}
            None => {
                stuck += 1;
                kill_reap(pid);
            }
        }
    }
    let left = check_all_free(&[0])?;
    figure("resets", iterations);
    figure("fenced_reopens", load.fenced.get().load(Ordering::SeqCst));
    figure("mapper_sigbus", sigbus);
    figure("operations", load.ops.get().load(Ordering::SeqCst));
    result?;
    ensure!(stuck == 0, "{stuck} worker(s) stuck at the end");
    ensure!(load.errors.count() == 0, "workers: {}", load.errors.first());
    ensure!(
        load.doubles.count() == 0,
        "double holders: {}",
        load.doubles.first()
    );
    ensure!(
        left.lost == 0,
        "locks not free at the end:\n{}",
        left.report.join("\n")
    );
    ensure!(
        load.fenced.get().load(Ordering::SeqCst) > 0,
        "no worker was ever fenced"
    );

    // Resets racing with an unbind: the resetter's call ends, with a result
    // or ENODEV, and the card binds again fresh.
    let mut racer = spawn("resetter", &[], |link| {
        let dev = open(0)?;
        link.send("open")?;
        loop {
            let mut r = abi::ResetDevice::default();
            r.input.flags = 2;
            match ioctl(&dev, abi::IOCTL_RESET_DEVICE, &mut r) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return Ok(()),
                Err(e) => return Err(format!("RESET_DEVICE during the unbind: {e}")),
            }
        }
    })?;
    racer.expect("open")?;
    sysfs_write(&format!("{DRIVER}/unbind"), &bdf0)?;
    let raced = racer.wait();
    sysfs_write(&format!("{DRIVER}/bind"), &bdf0)?;
    wait_path(&node(0), true)?;
    raced.map_err(|e| format!("resetter racing the unbind: {e}"))?;
    fresh(0)
}

/// The card-wide DMA limits (module parameters `max_dma_buf_mb_per_card`,
/// `max_pinned_mb_per_card`; none by default): with 1 MiB of each, the
/// files of a card together get 1 MiB of buffers and 256 pinned pages,
/// the next is ENOMEM for any of them until something is freed, and sysfs
/// shows the limits. The module is loaded again with its defaults after.
pub fn dma_limits_per_card() -> TestResult {
    use super::super::dma_helpers::{allocate_buffer, pin_pages, unpin_pages};
    let path = std::env::var("TT_MODULE_PATH").unwrap_or_else(|_| "/tenstorrent.ko".into());
    let reload = |params: &str| -> TestResult {
        delete_module()?;
        wait_path(&node(0), false)?;
        insert_module_with(&path, params)?;
        bind_both()
    };
    reload("max_dma_buf_mb_per_card=1 max_pinned_mb_per_card=1")?;
    let checked = (|| -> TestResult {
        let usage = sysfs("/sys/class/tenstorrent/tenstorrent!0/dma/usage")?;
        ensure!(
            usage.contains("buffer_limit_bytes=1048576")
                && usage.contains("pinned_limit_pages=256"),
            "dma/usage with limits: {usage}"
        );
        let a = open(0)?;
        let b = open(0)?;
        for index in 0..4 {
            expect_ok(
                allocate_buffer(&a, index, 256 << 10),
                "a buffer within the limit",
            )?;
        }
        expect_errno(
            allocate_buffer(&a, 4, 4096),
            libc::ENOMEM,
            "a buffer past the limit",
        )?;
        expect_errno(
            allocate_buffer(&b, 0, 4096),
            libc::ENOMEM,
            "another file's, past the limit",
        )?;
        drop(a);
        // A 3-page buffer takes a 4-page block (dma_alloc_pages rounds to a
        // power of two), and the limit counts what buffers take: 64 fit in
        // 1 MiB, a 65th does not (it did when the limit counted the 12 KiB
        // asked for: 780 KiB).
        let c = open(0)?;
        for index in 0..64 {
            expect_ok(allocate_buffer(&c, index, 3 * 4096), "a 3-page buffer")?;
        }
        let usage = sysfs("/sys/class/tenstorrent/tenstorrent!0/dma/usage")?;
        ensure!(
            usage.contains("buffer_bytes=1048576"),
            "dma/usage with 64 3-page buffers: {usage}"
        );
        expect_errno(
            allocate_buffer(&c, 64, 3 * 4096),
            libc::ENOMEM,
            "a 65th 3-page buffer",
        )?;
        drop(c);
        expect_ok(
            allocate_buffer(&b, 0, 4096),
            "a buffer once the others went",
        )?;
        // 256 pages pinned one by one, then the 257th.
        let pages = Shared::new(257 * 4096)?;
        let page = |i: usize| pages.addr() + i * 4096;
        for i in 0..256 {
            expect_ok(pin_pages(&b, page(i), 4096), "a pin within the limit")?;
        }
        expect_errno(
            pin_pages(&b, page(256), 4096),
            libc::ENOMEM,
            "a pin past the limit",
        )?;
        expect_ok(unpin_pages(&b, page(0), 4096), "UNPIN_PAGES")?;
        expect_ok(pin_pages(&b, page(256), 4096), "a pin once one went")?;
        Ok(())
    })();
    reload("")?;
    checked?;
    let usage = sysfs("/sys/class/tenstorrent/tenstorrent!0/dma/usage")?;
    ensure!(
        usage.contains("buffer_limit_bytes=0") && usage.contains("pinned_limit_pages=0"),
        "dma/usage with the defaults: {usage}"
    );
    Ok(())
}

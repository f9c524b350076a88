//! Crash storm: worker processes loop over random blocking / timed / try /
//! LOCK_CTL / multi-lock acquisitions and releases on the locks of both
//! cards while a supervisor SIGKILLs random ones at random moments and
//! starts replacements. Each worker also holds a mapped window on each
//! card, touched as it goes: after every round all windows are free again.
//! And it writes and reads back a word of its own through NOC_WRITE and
//! NOC_READ now and then: the kernel's window, shared by every worker and
//! the driver, gives each its own word back, kills included. And it sends
//! the firmware TEST messages through SMC_MSG, each with an argument no
//! other message carries: it collects some at once (SMC_WAIT), leaves
//! others outstanding for a while (so kills, exits and closes come with a
//! message queued or in flight: orphans ahead of the next worker's), posts
//! again while one is outstanding (EBUSY), abandons some, and abandons one
//! the moment it is posted and posts another (its answer comes after the
//! orphan's). The firmware is slow meanwhile (5 ms), so messages are in
//! flight when that happens. Every answer collected must be the worker's
//! own (its argument plus one); after each round, with every worker gone,
//! no file's message is left in the queue.
//!
//! Accounting that stays exact across kills. Each worker keeps, per (card,
//! lock), one 64-bit word in shared memory holding its grant count and
//! three flags, every transition a single store:
//! - PENDING is set before an acquisition is asked for; on success the word
//!   becomes (count + 1, HELD) in one store, on failure PENDING is cleared;
//! - RELEASING is set before a release; on success HELD and RELEASING are
//!   cleared.
//!
//! A worker killed between the kernel's grant and its store leaves PENDING:
//! the kernel counted an acquisition the worker did not, and (the file
//! closing while holding) an owner death. A worker killed inside a release
//! leaves RELEASING: the kernel may or may not have released. So per lock,
//! with A / D the deltas of QUERY `acquisitions` / `owner_died_count`, G the
//! grants recorded, H the deaths recorded as holding (HELD without
//! RELEASING), P the deaths with PENDING and R the deaths with RELEASING:
//!   x = A - G  must be in [0, P]   (grants the kill hid from the worker)
//!   D - H - x  must be in [0, R]   (releases the kill interrupted)
//! Both are exact inequalities: the uncertainty is at most one per kill and
//! lock, and is reported.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tt_arbiter::abi;

use super::*;

const PENDING: u64 = 1;
const HELD: u64 = 2;
const RELEASING: u64 = 4;
const ONE_GRANT: u64 = 8;

/// u64 words of a slot: pid, reaped, ops, owner-died reports, one word per
/// (card, lock), then the firmware answers collected.
const SLOT_WORDS: usize = 4 + 128 + 1;
const W_PID: usize = 0;
const W_REAPED: usize = 1;
const W_OPS: usize = 2;
const W_DIED_SEEN: usize = 3;
const W_SMC_ANSWERS: usize = 4 + 128;
/// The firmware's TEST message: it answers its argument plus one.
const TEST: u32 = 0x90;

struct Storm {
    stop: Counter,
    slots: Shared,
    max_slots: usize,
    owners: Owners,
    errors: FirstError,
    doubles: FirstError,
    span: u32,
}

impl Storm {
    fn w(&self, slot: usize, word: usize) -> &AtomicU64 {
        self.slots.u64(slot * SLOT_WORDS + word)
    }

    fn lock_word(&self, slot: usize, card: u32, lock: u32) -> &AtomicU64 {
        self.w(slot, 4 + (card * 64 + lock) as usize)
    }

    fn stopped(&self) -> bool {
        self.stop.get().load(Ordering::SeqCst) != 0
    }

    /// Sets `flag` on the words of `mask`.
    fn mark(&self, slot: usize, card: u32, mask: u64, flag: u64) {
        for l in bits(mask) {
            let w = self.lock_word(slot, card, l);
            w.store(w.load(Ordering::SeqCst) | flag, Ordering::SeqCst);
        }
    }

    /// Clears `flags` on the words of `mask`.
    fn clear(&self, slot: usize, card: u32, mask: u64, flags: u64) {
        for l in bits(mask) {
            let w = self.lock_word(slot, card, l);
            w.store(w.load(Ordering::SeqCst) & !flags, Ordering::SeqCst);
        }
    }

    /// PENDING -> one more grant, HELD (one store per lock).
    fn commit(&self, slot: usize, card: u32, mask: u64) {
        for l in bits(mask) {
            let w = self.lock_word(slot, card, l);
            let v = w.load(Ordering::SeqCst);
            w.store(((v & !7) + ONE_GRANT) | HELD, Ordering::SeqCst);
        }
    }

    /// Whether the worker of owner id `id` is dead (reaped, zombie, gone).
    fn is_dead(&self, id: u32) -> bool {
        let slot = (id - 1) as usize;
        if self.w(slot, W_REAPED).load(Ordering::SeqCst) != 0 {
            return true;
        }
        let pid = self.w(slot, W_PID).load(Ordering::SeqCst) as u32;
        matches!(proc_state(pid), None | Some('Z') | Some('X'))
    }

    /// Puts our id in the owner word of each lock of `mask`. A stale id
    /// is allowed only if its worker is dead (it was killed or exited
    /// holding, and the kernel gave us the lock when its file closed).
    fn claim(&self, card: u32, mask: u64, id: u32) {
        for l in bits(mask) {
            loop {
                let other = match self.owners.claim(card, l, id) {
                    Ok(()) => break,
                    Err(other) => other,
                };
                let start = Instant::now();
                while !self.is_dead(other) && start.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_micros(200));
                }
                if !self.is_dead(other) {
                    self.doubles.report(&format!(
                        "card {card} lock {l}: worker {id} (pid {}) was granted it while live worker {other} (pid {}) holds it",
                        std::process::id(),
                        self.w((other - 1) as usize, W_PID).load(Ordering::SeqCst)
                    ));
                    break;
                }
                if self.owners.take_over(card, l, other, id).is_ok() {
                    break;
                }
            }
        }
    }

    fn check_held(&self, card: u32, mask: u64, id: u32) -> bool {
        for l in bits(mask) {
            let other = self.owners.get(card, l);
            if other != id {
                self.doubles.report(&format!(
                    "card {card} lock {l}: owner word {other} while worker {id} holds it"
                ));
                return false;
            }
        }
        true
    }

    fn unclaim(&self, card: u32, mask: u64, id: u32) {
        for l in bits(mask) {
            if let Err(other) = self.owners.unclaim(card, l, id) {
                self.doubles.report(&format!(
                    "card {card} lock {l}: owner word became {other} while worker {id} held it"
                ));
            }
        }
    }
}

/// The set bits of a mask.
pub fn bits(mask: u64) -> impl Iterator<Item = u32> {
    (0..64).filter(move |i| mask & (1u64 << i) != 0)
}

fn random_mask(rng: &mut Rng, span: u32, n: u32) -> u64 {
    let mut m = 0u64;
    while m.count_ones() < n.min(span) {
        m |= bit(rng.below(span as u64) as u32);
    }
    m
}

/// Outcome of one acquisition attempt: granted, refused (an allowed
/// answer), or a problem.
enum Got {
    Granted(u64),
    Refused,
    Bad(String),
}

fn judge(r: std::io::Result<i32>, allowed: &[i32], what: &str, died: u64) -> Got {
    match r {
        Ok(_) => Got::Granted(died),
        Err(e) if allowed.contains(&e.raw_os_error().unwrap_or(0)) => Got::Refused,
        Err(e) => Got::Bad(format!("{what}: {}", outcome::<()>(&Err(e)))),
    }
}

/// The TEST argument of worker `slot`'s operation `n`: no other message
/// of the storm carries it (bit 18 set: the second message of the
/// operation).
fn smc_arg(slot: usize, n: u64) -> u32 {
    ((slot as u32) << 19) | (n as u32 & 0x3_FFFF)
}

/// Whose answer `value` is, in words.
fn smc_whose(value: u32) -> String {
    let arg = value.wrapping_sub(1);
    format!(
        "the answer to worker {}'s {} TEST of its operation {}",
        (arg >> 19) + 1,
        if arg & 0x4_0000 != 0 {
            "second"
        } else {
            "first"
        },
        arg & 0x3_FFFF
    )
}

/// One step of the worker's firmware messages on `dev`; `outstanding` is
/// the argument of the one it has outstanding there.
fn smc_step(
    st: &Storm,
    slot: usize,
    dev: &tt_arbiter::Device,
    rng: &mut Rng,
    n: u64,
    outstanding: &mut Option<u32>,
) -> Result<(), String> {
    use super::super::smc;
    let arg = match *outstanding {
        None => {
            let arg = smc_arg(slot, n);
            smc::post(dev, TEST, arg).map_err(|e| format!("POST TEST {arg:#x}: {e}"))?;
            *outstanding = Some(arg);
            match rng.below(4) {
                // Left outstanding until a later step (or a kill, an exit,
                // the end of the round).
                0 | 1 => return Ok(()),
                // Abandoned at once, most likely in flight (the firmware
                // is slow), and another posted: its answer comes after the
                // orphan's, which must not be taken for it.
                2 => {
                    smc::abandon(dev).map_err(|e| format!("ABANDON of TEST {arg:#x}: {e}"))?;
                    *outstanding = None;
                    let arg = smc_arg(slot, n) ^ 0x4_0000;
                    smc::post(dev, TEST, arg)
                        .map_err(|e| format!("POST TEST {arg:#x} after an ABANDON: {e}"))?;
                    *outstanding = Some(arg);
                    arg
                }
                _ => arg,
            }
        }
        Some(arg) => match rng.below(4) {
            0 => {
                smc::abandon(dev).map_err(|e| format!("ABANDON of TEST {arg:#x}: {e}"))?;
                *outstanding = None;
                return Ok(());
            }
            1 => {
                return match smc::post(dev, TEST, smc_arg(slot, n)) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(()),
                    r => Err(format!(
                        "POST with TEST {arg:#x} outstanding: {} (EBUSY expected)",
                        outcome(&r)
                    )),
                };
            }
            _ => arg,
        },
    };
    // A deadline only as a hang detector.
    let (r, w) = smc::smc_wait(
        dev,
        abi::LOCK_DEADLINE,
        now_ns() + PATIENCE.as_nanos() as u64,
    );
    *outstanding = None;
    match r {
        Ok(_) if w.message[0] == 0 && w.message[1] == arg.wrapping_add(1) => {
            st.w(slot, W_SMC_ANSWERS).fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        Ok(_) => Err(format!(
            "TEST {arg:#x} answered status {:#x}, value {:#x}: {}",
            w.message[0],
            w.message[1],
            smc_whose(w.message[1])
        )),
        r => Err(format!(
            "SMC_WAIT for TEST {arg:#x}: {} (out_flags {:#x}, message {:x?})",
            outcome(&r),
            w.out_flags,
            &w.message[..2]
        )),
    }
}

fn worker(st: &Storm, slot: usize, seed: u64) -> i32 {
    st.w(slot, W_PID)
        .store(std::process::id() as u64, Ordering::SeqCst);
    let id = slot as u32 + 1;
    let devs = match (open(0), open(1)) {
        (Ok(a), Ok(b)) => [a, b],
        (Err(e), _) | (_, Err(e)) => {
            st.errors.report(&format!("worker {id}: {e}"));
            return 1;
        }
    };
    // Each worker also holds a mapped window on each card, aimed at a
    // tile and touched as it goes: kills and exits must take the windows
    // and their mappings down too (the storm checks they are all free).
    let mut windows = Vec::new();
    for (card, dev) in devs.iter().enumerate() {
        let tile = super::super::mapping::tensix(super::super::mapping::chip(card as u32));
        let Ok(w) = super::super::mapping::alloc(dev, 2 << 20) else {
            continue;
        };
        if super::super::mapping::configure(dev, w.id, tile, 0).is_err() {
            continue;
        }
        if let Ok(map) = crate::card::Mmio::new(dev, w.mmap_offset_uc, 4096) {
            windows.push(map);
        }
    }
    let mut rng = Rng::new(seed);
    // A quarter of the workers exit on their own at some point, holding
    // what they hold: the kernel must release it at close like after a kill.
    let exit_holding_at = (rng.below(4) == 0).then(|| 1 + rng.below(100));
    let span = st.span;
    let mut n = 0u64;
    let mut smc_outstanding = [None, None];
    while !st.stopped() {
        n += 1;
        let card = rng.below(2) as u32;
        let dev = &devs[card as usize];
        let kind = rng.below(8);
        let one = rng.below(span as u64) as u32;
        let mask = if kind >= 5 {
            let n = 2 + rng.below(2) as u32;
            random_mask(&mut rng, span, n)
        } else {
            bit(one)
        };
        let deadline = now_ns() + rng.below(3_000_000);
        if let Some(map) = windows.get(card as usize) {
            let _ = map.read32(0);
        }
        if n % 4 == 0 {
            let tile = super::super::mapping::tensix(super::super::mapping::chip(card));
            let at = 0x5_0000 + 8 * slot as u64;
            let word = seed ^ n;
            let back = super::super::noc_io::noc_write(dev, tile, 0, at, 8, word)
                .and_then(|_| super::super::noc_io::noc_read(dev, tile, 0, at, 8));
            match back {
                Ok(v) if v == word => {}
                r => {
                    st.errors.report(&format!(
                        "worker {id} card {card}: NOC_WRITE {word:#x} then NOC_READ: {}",
                        outcome(&r)
                    ));
                    return 1;
                }
            }
        }
        if n % 3 == 1 {
            if let Err(msg) = smc_step(
                st,
                slot,
                dev,
                &mut rng,
                n,
                &mut smc_outstanding[card as usize],
            ) {
                st.errors.report(&format!("worker {id} card {card}: {msg}"));
                return 1;
            }
        }
        st.mark(slot, card, mask, PENDING);
        st.w(slot, W_OPS).fetch_add(1, Ordering::SeqCst);
        let (busy, timed) = (libc::EBUSY, libc::ETIMEDOUT);
        let got = match kind {
            0 => {
                let (r, a) = acquire(dev, one, 0, 0);
                judge(r, &[], "blocking ACQUIRE", a.out_flags as u64)
            }
            1 => {
                let (r, a) = acquire(dev, one, abi::LOCK_DEADLINE, deadline);
                judge(r, &[busy, timed], "DEADLINE ACQUIRE", a.out_flags as u64)
            }
            2 => {
                let (r, a) = acquire(dev, one, abi::LOCK_NONBLOCK, 0);
                judge(r, &[busy], "NONBLOCK ACQUIRE", a.out_flags as u64)
            }
            3 => match lock_ctl(dev, one as u8, abi::LOCK_CTL_ACQUIRE) {
                Ok(1) => Got::Granted(0),
                Ok(0) => Got::Refused,
                r => Got::Bad(format!("LOCK_CTL ACQUIRE: {}", outcome(&r))),
            },
            4 => match lock_ctl(dev, one as u8, abi::LOCK_CTL_ACQUIRE_BLOCKING) {
                Ok(1) => Got::Granted(0),
                r => Got::Bad(format!("LOCK_CTL ACQUIRE_BLOCKING: {}", outcome(&r))),
            },
            5 => {
                let (r, a) = acquire_set(dev, mask, 0, 0);
                judge(r, &[], "blocking ACQUIRE_SET", a.owner_died_mask)
            }
            6 => {
                let (r, a) = acquire_set(dev, mask, abi::LOCK_DEADLINE, deadline);
                judge(r, &[busy, timed], "DEADLINE ACQUIRE_SET", a.owner_died_mask)
            }
            _ => {
                let (r, a) = acquire_set(dev, mask, abi::LOCK_NONBLOCK, 0);
                judge(r, &[busy], "NONBLOCK ACQUIRE_SET", a.owner_died_mask)
            }
        };
        match got {
            Got::Granted(died) => {
                st.commit(slot, card, mask);
                if died != 0 {
                    st.w(slot, W_DIED_SEEN).fetch_add(1, Ordering::SeqCst);
                }
            }
            Got::Refused => {
                st.clear(slot, card, mask, PENDING);
                continue;
            }
            Got::Bad(msg) => {
                st.clear(slot, card, mask, PENDING);
                st.errors
                    .report(&format!("worker {id} card {card} mask {mask:#x}: {msg}"));
                return 1;
            }
        }
        st.claim(card, mask, id);
        if rng.below(8) == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(400)));
        } else {
            for _ in 0..rng.below(2000) {
                std::hint::spin_loop();
            }
        }
        st.check_held(card, mask, id);
        if exit_holding_at == Some(n) {
            return 0;
        }
        st.unclaim(card, mask, id);
        st.mark(slot, card, mask, RELEASING);
        st.w(slot, W_OPS).fetch_add(1, Ordering::SeqCst);
        let released = if mask.count_ones() == 1 && rng.below(2) == 0 {
            match lock_ctl(dev, one as u8, abi::LOCK_CTL_RELEASE) {
                Ok(1) => Ok(()),
                r => Err(format!("LOCK_CTL RELEASE: {}", outcome(&r))),
            }
        } else {
            release(dev, mask)
                .map(drop)
                .map_err(|e| format!("RELEASE: {}", outcome::<()>(&Err(e))))
        };
        match released {
            Ok(()) => st.clear(slot, card, mask, HELD | RELEASING),
            Err(msg) => {
                st.errors
                    .report(&format!("worker {id} card {card} mask {mask:#x}: {msg}"));
                return 1;
            }
        }
    }
    0
}

/// Per (card, lock) sums over the dead workers of a round.
#[derive(Default, Clone, Copy)]
struct Tally {
    grants: u64,
    held: u64,
    pending: u64,
    releasing: u64,
}

/// Crash storm over both cards; see the module documentation.
pub fn crash_storm() -> TestResult {
    let rounds = sized(3, 12);
    let round_time = Duration::from_millis(sized(2500, 6000));
    let nworkers = sized(6, 14);
    let kill_gap_ms = sized(60, 40);
    let span = sized(6, 10);
    let max_slots = 8192;
    let st = Storm {
        stop: Counter::new()?,
        slots: Shared::new(max_slots * SLOT_WORDS * 8)?,
        max_slots,
        owners: Owners::new()?,
        errors: FirstError::new()?,
        doubles: FirstError::new()?,
        span,
    };
    let windows_free_before = [windows_free(0)?, windows_free(1)?];
    let left = check_all_free(&[0, 1])?;
    ensure!(
        left.lost == 0,
        "locks not free before the storm:\n{}",
        left.report.join("\n")
    );
    let mut rng = Rng::new(seed("crash storm"));
    let observers = [open(0)?, open(1)?];
    let _slow = SlowFirmware::new(5)?;
    let mut next_slot = 0usize;
    let (mut kills, mut spawned, mut lost, mut exited_holding) = (0u64, 0u64, 0u64, 0u64);
    let (mut ops, mut grants, mut hidden_grants, mut cut_releases, mut window) = (0, 0, 0, 0, 0);
    let (mut died_total, mut died_seen, mut smc_answers) = (0u64, 0u64, 0u64);
    let mut problems: Vec<String> = Vec::new();
    let spawn = |next_slot: &mut usize, rng: &mut Rng| -> Result<(libc::pid_t, usize), String> {
        ensure!(*next_slot < st.max_slots, "out of worker slots");
        let slot = *next_slot;
        *next_slot += 1;
        let seed = rng.next();
        let st = &st;
        let pid = fork_child(&[], move || worker(st, slot, seed))?;
        st.w(slot, W_PID).store(pid as u64, Ordering::SeqCst);
        Ok((pid, slot))
    };
    for round in 0..rounds {
        let before = [snapshot(&observers[0])?, snapshot(&observers[1])?];
        st.stop.get().store(0, Ordering::SeqCst);
        let first_slot = next_slot;
        let mut live: Vec<(libc::pid_t, usize)> = Vec::new();
        for _ in 0..nworkers {
            live.push(spawn(&mut next_slot, &mut rng)?);
            spawned += 1;
        }
        let end = Instant::now() + round_time;
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(rng.below(kill_gap_ms)));
            // Workers that exited on their own (or failed) are replaced.
            let mut i = 0;
            while i < live.len() {
                let (pid, slot) = live[i];
                match try_reap(pid) {
                    Some(status) => {
                        st.w(slot, W_REAPED).store(1, Ordering::SeqCst);
                        if status != 0 {
                            problems.push(format!(
                                "worker {} {}",
                                slot + 1,
                                describe_status(status)
                            ));
                        }
                        live.swap_remove(i);
                        live.push(spawn(&mut next_slot, &mut rng)?);
                        spawned += 1;
                    }
                    None => i += 1,
                }
            }
            if live.is_empty() || next_slot + 1 >= st.max_slots {
                continue;
            }
            let victim = rng.below(live.len() as u64) as usize;
            let (pid, slot) = live.swap_remove(victim);
            kill_reap(pid);
            st.w(slot, W_REAPED).store(1, Ordering::SeqCst);
            kills += 1;
            live.push(spawn(&mut next_slot, &mut rng)?);
            spawned += 1;
        }
        // End of the round: everyone finishes its operation, releases and
        // exits. A blocked worker gets its lock as the others leave; one
        // still blocked after the grace period on a free lock lost a grant.
        st.stop.get().store(1, Ordering::SeqCst);
        let grace = Instant::now() + PATIENCE;
        for &(pid, slot) in &live {
            match reap_until(pid, grace) {
                Some(status) => {
                    if status != 0 {
                        problems.push(format!("worker {} {}", slot + 1, describe_status(status)));
                    }
                }
                None => {
                    let mut what = Vec::new();
                    for card in 0..2 {
                        for l in 0..span {
                            let w = st.lock_word(slot, card, l).load(Ordering::SeqCst);
                            if w & PENDING != 0 {
                                let q = query(&observers[card as usize], l)?;
                                what.push(format!("card {card} lock {l} (now {q:?})"));
                            }
                        }
                    }
                    lost += 1;
                    problems.push(format!(
                        "lost grant: worker {} (pid {pid}) still blocked {PATIENCE:?} after the end of round {round}, waiting for {}",
                        slot + 1,
                        what.join(", ")
                    ));
                    kill_reap(pid);
                }
            }
            st.w(slot, W_REAPED).store(1, Ordering::SeqCst);
        }
        // Everything is dead: every lock must be free, and the counters
        // must agree with what the workers saw; every window is free again.
        let left = check_all_free(&[0, 1])?;
        lost += left.lost;
        problems.extend(left.report);
        // Every worker's file is closed: none of their firmware messages
        // may be left (close abandons).
        for card in 0..2 {
            for line in smc_queue_left(card)? {
                problems.push(format!("after round {round}, every worker gone: {line}"));
            }
        }
        for (card, free) in windows_free_before.iter().enumerate() {
            let now = windows_free(card as u32)?;
            if now != *free {
                problems.push(format!("card {card}: {now} 2M windows free after round {round}, {free} before the storm"));
            }
        }
        let after = [snapshot(&observers[0])?, snapshot(&observers[1])?];
        let mut tally = [[Tally::default(); 64]; 2];
        for slot in first_slot..next_slot {
            ops += st.w(slot, W_OPS).load(Ordering::SeqCst);
            died_seen += st.w(slot, W_DIED_SEEN).load(Ordering::SeqCst);
            smc_answers += st.w(slot, W_SMC_ANSWERS).load(Ordering::SeqCst);
            for card in 0..2u32 {
                for l in 0..span {
                    let w = st.lock_word(slot, card, l).load(Ordering::SeqCst);
                    let t = &mut tally[card as usize][l as usize];
                    t.grants += w / ONE_GRANT;
                    if w & HELD != 0 && w & RELEASING == 0 {
                        t.held += 1;
                    }
                    if w & HELD != 0 && w & RELEASING != 0 {
                        t.releasing += 1;
                    }
                    if w & PENDING != 0 {
                        t.pending += 1;
                    }
                }
            }
        }
        for card in 0..2usize {
            for l in 0..span as usize {
                let t = tally[card][l];
                let (b, a) = (&before[card][l], &after[card][l]);
                let acq = a.acquisitions - b.acquisitions;
                let died = a.owner_died_count - b.owner_died_count;
                died_total += died;
                exited_holding += t.held;
                grants += acq;
                window += t.pending + t.releasing;
                let hidden = acq as i64 - t.grants as i64;
                let cut = died as i64 - t.held as i64 - hidden;
                if hidden < 0 || hidden > t.pending as i64 || cut < 0 || cut > t.releasing as i64 {
                    problems.push(format!(
                        "round {round} card {card} lock {l}: kernel acquisitions +{acq}, owner_died +{died}; \
                         workers recorded {} grants, {} deaths holding, {} deaths with a grant pending, \
                         {} deaths inside a release: need 0 <= {hidden} <= {} and 0 <= {cut} <= {}",
                        t.grants, t.held, t.pending, t.releasing, t.pending, t.releasing
                    ));
                } else {
                    hidden_grants += hidden as u64;
                    cut_releases += cut as u64;
                }
                if a.spurious_wakeups != b.spurious_wakeups {
                    // Deadlines are in play here, so this is reported, not
                    // asserted (see the signal and scale suites for that).
                    println!(
                        "# card {card} lock {l}: spurious_wakeups +{}",
                        a.spurious_wakeups - b.spurious_wakeups
                    );
                }
            }
        }
    }
    let doubles = st.doubles.count();
    if smc_answers == 0 {
        problems.push("no worker collected a firmware answer: SMC_MSG went untested".into());
    }
    figure("operations", ops);
    figure("storm_rounds", rounds);
    figure("storm_grants", grants);
    figure("kills", kills);
    figure("storm_workers", spawned);
    figure("storm_deaths_holding", exited_holding);
    figure("storm_owner_died", died_total);
    figure("storm_owner_died_reported", died_seen);
    figure("storm_kill_window_bound", window);
    figure("storm_kill_window_grants", hidden_grants);
    figure("storm_kill_window_releases", cut_releases);
    figure("storm_smc_answers", smc_answers);
    figure("lost_locks", lost);
    figure("double_holders", doubles);
    if doubles != 0 {
        problems.insert(
            0,
            format!("{doubles} double holder(s); first: {}", st.doubles.first()),
        );
    }
    if st.errors.count() != 0 {
        problems.insert(
            0,
            format!(
                "{} worker error(s); first: {}",
                st.errors.count(),
                st.errors.first()
            ),
        );
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

/// How many 2 MiB windows of card `n` are free (sysfs `tlb/2M`).
fn windows_free(n: u32) -> Result<u64, String> {
    let line = sysfs(&format!("/sys/class/tenstorrent/tenstorrent!{n}/tlb/2M"))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("free="))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("card {n}: no free= in {line:?}"))
}

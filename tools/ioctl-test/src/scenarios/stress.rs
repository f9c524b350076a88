//! Many processes, random operations, mutual exclusion checked by owner
//! words in shared memory.

use std::sync::atomic::Ordering;

use tt_arbiter::abi;

use crate::util::*;

/// Iterations per process: TT_STRESS_ITERS or `default`.
pub(crate) fn iterations(default: u64) -> u64 {
    std::env::var("TT_STRESS_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Shared words: owner word per lock, then counters.
const GRANTS: usize = 64; // u32 word index of the grant counter (u64 at 32)
const VIOLATIONS: usize = 66;

/// Takes ownership words of `mask` for `id` (must be 0), checks, frees them.
fn critical_section(shm: &Shared, base: u32, mask: u64, id: u32) -> TestResult {
    for i in 0..64 {
        if mask & bit(i) != 0 {
            let w = shm.u32((i - base) as usize);
            if let Err(other) = w.compare_exchange(0, id, Ordering::SeqCst, Ordering::SeqCst) {
                shm.u32(VIOLATIONS).fetch_add(1, Ordering::SeqCst);
                return Err(format!(
                    "process {id} got lock {i} while process {other} holds it"
                ));
            }
        }
    }
    for _ in 0..20 {
        for i in 0..64 {
            if mask & bit(i) != 0 {
                let other = shm.u32((i - base) as usize).load(Ordering::SeqCst);
                if other != id {
                    shm.u32(VIOLATIONS).fetch_add(1, Ordering::SeqCst);
                    return Err(format!(
                        "lock {i} owner word is {other} while process {id} holds it"
                    ));
                }
            }
        }
        std::hint::spin_loop();
    }
    for i in 0..64 {
        if mask & bit(i) != 0 {
            let w = shm.u32((i - base) as usize);
            if let Err(other) = w.compare_exchange(id, 0, Ordering::SeqCst, Ordering::SeqCst) {
                shm.u32(VIOLATIONS).fetch_add(1, Ordering::SeqCst);
                return Err(format!(
                    "lock {i} owner word changed to {other} while process {id} held it"
                ));
            }
        }
    }
    shm.u64(GRANTS / 2)
        .fetch_add(mask.count_ones() as u64, Ordering::SeqCst);
    Ok(())
}

fn random_mask(rng: &mut Rng, base: u32, span: u32, min: u32, max: u32) -> u64 {
    let n = min + rng.below((max - min + 1) as u64) as u32;
    let mut m = 0u64;
    while m.count_ones() < n {
        m |= bit(base + rng.below(span as u64) as u32);
    }
    m
}

fn accepted(r: &std::io::Result<i32>, allowed: &[i32], what: &str) -> Result<bool, String> {
    match r {
        Ok(_) => Ok(true),
        Err(e) if allowed.contains(&e.raw_os_error().unwrap_or(0)) => Ok(false),
        Err(_) => Err(format!("{what}: {}", outcome(r))),
    }
}

/// One stress process: random operations on locks base..base+span.
fn stress_process(
    shm: &Shared,
    card: u32,
    base: u32,
    span: u32,
    id: u32,
    iters: u64,
    sets_only: bool,
) -> TestResult {
    let dev = open(card)?;
    let mut rng = Rng::new(id as u64 * 7919 + 17);
    for _ in 0..iters {
        let op = if sets_only { 3 } else { rng.below(7) };
        let one = base + rng.below(span as u64) as u32;
        let (got, mask) = match op {
            0 => (
                accepted(&acquire(&dev, one, 0, 0).0, &[], "blocking ACQUIRE")?,
                bit(one),
            ),
            1 => (
                accepted(
                    &acquire(&dev, one, abi::LOCK_NONBLOCK, 0).0,
                    &[libc::EBUSY],
                    "NONBLOCK ACQUIRE",
                )?,
                bit(one),
            ),
            2 => {
                let deadline = now_ns() + rng.below(2_000_000);
                let r = acquire(&dev, one, abi::LOCK_DEADLINE, deadline).0;
                if matches!(&r, Err(e) if e.raw_os_error() == Some(libc::ETIMEDOUT)) {
                    let now = now_ns();
                    ensure!(
                        now >= deadline,
                        "ETIMEDOUT {} ns before the deadline",
                        deadline - now
                    );
                }
                (
                    accepted(&r, &[libc::EBUSY, libc::ETIMEDOUT], "DEADLINE ACQUIRE")?,
                    bit(one),
                )
            }
            3 => {
                let m = random_mask(&mut rng, base, span, 2, 4.min(span));
                (
                    accepted(&acquire_set(&dev, m, 0, 0).0, &[], "blocking ACQUIRE_SET")?,
                    m,
                )
            }
            4 => {
                let v = expect_ok(
                    lock_ctl(&dev, one as u8, abi::LOCK_CTL_ACQUIRE_BLOCKING),
                    "ACQUIRE_BLOCKING",
                )?;
                ensure_eq!(v, 1, "ACQUIRE_BLOCKING value");
                (true, bit(one))
            }
            5 => (
                expect_ok(
                    lock_ctl(&dev, one as u8, abi::LOCK_CTL_ACQUIRE),
                    "LOCK_CTL ACQUIRE",
                )? == 1,
                bit(one),
            ),
            _ => {
                let m = random_mask(&mut rng, base, span, 2, 3);
                (
                    accepted(
                        &acquire_set(&dev, m, abi::LOCK_NONBLOCK, 0).0,
                        &[libc::EBUSY],
                        "NONBLOCK ACQUIRE_SET",
                    )?,
                    m,
                )
            }
        };
        if !got {
            continue;
        }
        critical_section(shm, base, mask, id)?;
        if mask.count_ones() == 1 && rng.below(2) == 0 {
            let v = expect_ok(
                lock_ctl(&dev, mask.trailing_zeros() as u8, abi::LOCK_CTL_RELEASE),
                "LOCK_CTL RELEASE",
            )?;
            ensure_eq!(v, 1, "LOCK_CTL RELEASE value");
        } else {
            expect_ok(release(&dev, mask), "RELEASE")?;
        }
    }
    Ok(())
}

pub(crate) fn run_stress(
    procs: u32,
    base: u32,
    span: u32,
    iters: u64,
    sets_only: bool,
) -> TestResult {
    let observer = open(0)?;
    let mut before = 0;
    let mut spurious_before = 0;
    for i in base..base + span {
        ensure_free(&observer, i)?;
        let q = query(&observer, i)?;
        before += q.raw.acquisitions;
        spurious_before += q.raw.spurious_wakeups;
    }
    let shm = Shared::new(4096)?;
    let mut children = Vec::new();
    for id in 1..=procs {
        let shm = &shm;
        children.push(spawn(&format!("stress process {id}"), &[], move |_| {
            stress_process(shm, 0, base, span, id, iters, sets_only)
        })?);
    }
    crate::worker::wait_all(children)?;
    ensure_eq!(
        shm.u32(VIOLATIONS).load(Ordering::SeqCst),
        0,
        "mutual exclusion violations"
    );
    let grants = shm.u64(GRANTS / 2).load(Ordering::SeqCst);
    let mut after = 0;
    let mut spurious = 0;
    for i in base..base + span {
        let q = query(&observer, i)?;
        ensure!(
            !q.held && q.waiters == 0,
            "lock {i} after the stress: {q:?}"
        );
        after += q.raw.acquisitions;
        spurious += q.raw.spurious_wakeups;
    }
    ensure_eq!(
        after - before,
        grants,
        "QUERY acquisitions delta vs grants observed by the processes"
    );
    if sets_only {
        // Counters live as long as the card is bound: only this run's
        // wake-ups are this run's business.
        ensure_eq!(
            spurious - spurious_before,
            0,
            "spurious_wakeups delta (no deadlines or signals in this run)"
        );
    }
    Ok(())
}

/// 8 processes x 8 locks, random blocking/try/deadline/set/LOCK_CTL ops.
pub fn mutual_exclusion() -> TestResult {
    run_stress(8, 48, 8, iterations(150), false)
}

/// 6 processes taking random overlapping 2-4-lock sets of 8 locks.
pub fn overlapping_sets() -> TestResult {
    run_stress(6, 56, 8, iterations(150) / 2, true)
}

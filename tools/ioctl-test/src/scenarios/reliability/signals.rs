//! Signal storm: waiter processes queue on one lock, each planning to take
//! it a number of times, by blocking ACQUIRE, ACQUIRE with a deadline
//! (both with a SIGALRM handler without SA_RESTART: EINTR, then they call
//! again; a deadline that passed while stopped gives ETIMEDOUT, or EBUSY
//! when the call is restarted after it) or LOCK_CTL ACQUIRE_BLOCKING
//! (handler with SA_RESTART: restarted transparently, never EINTR), while a supervisor sends random SIGSTOP,
//! SIGCONT and SIGALRM to them. In the end each waiter got the lock exactly
//! as often as it planned, nobody held it twice, no grant was lost, no
//! wake-up was spurious, and the lock is free.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tt_arbiter::abi;

use super::*;

static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_alarm(_: libc::c_int) {
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

/// Per-waiter words: grants, EINTR, ETIMEDOUT, handler runs.
const WORDS: usize = 4;

fn waiter(
    shm: &Shared,
    owners: &Owners,
    (errors, doubles): (&FirstError, &FirstError),
    i: usize,
    plan: u64,
    seed: u64,
) -> i32 {
    let kind = i % 3;
    if let Err(e) = install_handler(libc::SIGALRM, on_alarm, kind == 2) {
        errors.report(&e);
        return 1;
    }
    let dev = match open(0) {
        Ok(d) => d,
        Err(e) => {
            errors.report(&e);
            return 1;
        }
    };
    let l = LOCK;
    let me = i as u32 + 1;
    let mut rng = Rng::new(seed);
    let w = |k: usize| shm.u64(i * WORDS + k);
    for _ in 0..plan {
        loop {
            let deadline = now_ns() + 500_000_000 + rng.below(2_000_000_000);
            let r = match kind {
                0 => acquire(&dev, l, 0, 0).0,
                1 => acquire(&dev, l, abi::LOCK_DEADLINE, deadline).0,
                _ => lock_ctl(&dev, l as u8, abi::LOCK_CTL_ACQUIRE_BLOCKING).map(|v| v as i32 - 1),
            };
            match (kind, r) {
                (_, Ok(0)) => break,
                (0 | 1, Err(e)) if e.raw_os_error() == Some(libc::EINTR) => {
                    w(1).fetch_add(1, Ordering::SeqCst);
                }
                (1, Err(e)) if e.raw_os_error() == Some(libc::ETIMEDOUT) => {
                    w(2).fetch_add(1, Ordering::SeqCst);
                }
                // A call restarted after a stop whose deadline passed in
                // the meantime is a try ("a deadline already past behaves
                // as a try"): EBUSY, but never before the deadline.
                (1, Err(e)) if e.raw_os_error() == Some(libc::EBUSY) && now_ns() >= deadline => {
                    w(2).fetch_add(1, Ordering::SeqCst);
                }
                (_, r) => {
                    errors.report(&format!(
                        "waiter {i} (kind {kind}{}): {}",
                        if kind == 2 {
                            ": LOCK_CTL ACQUIRE_BLOCKING under SA_RESTART"
                        } else {
                            ""
                        },
                        outcome(&r)
                    ));
                    return 1;
                }
            }
        }
        w(0).fetch_add(1, Ordering::SeqCst);
        if let Err(other) = owners.claim(0, l, me) {
            doubles.report(&format!(
                "waiter {i} granted the lock while waiter {} holds it",
                other - 1
            ));
        }
        for _ in 0..rng.below(20_000) {
            std::hint::spin_loop();
        }
        if let Err(other) = owners.unclaim(0, l, me) {
            doubles.report(&format!(
                "owner word became {other} while waiter {i} held the lock"
            ));
        }
        let r = if kind == 2 {
            match lock_ctl(&dev, l as u8, abi::LOCK_CTL_RELEASE) {
                Ok(1) => Ok(()),
                r => Err(outcome(&r)),
            }
        } else {
            release(&dev, bit(l))
                .map(drop)
                .map_err(|e| outcome::<()>(&Err(e)))
        };
        if let Err(e) = r {
            errors.report(&format!("waiter {i}: release: {e}"));
            return 1;
        }
    }
    w(3).store(HANDLED.load(Ordering::SeqCst), Ordering::SeqCst);
    0
}

const LOCK: u32 = 33;

/// See the module documentation.
pub fn signal_storm() -> TestResult {
    let nwaiters = sized(9usize, 24);
    let plan = sized(4u64, 8);
    let limit = Duration::from_secs(sized(60, 240));
    let mut rng = Rng::new(seed("signal storm"));
    let holder = open(0)?;
    ensure_free(&holder, LOCK)?;
    let before = query(&holder, LOCK)?.raw;
    let shm = Shared::new(nwaiters * WORDS * 8)?;
    let owners = Owners::new()?;
    let errors = FirstError::new()?;
    let doubles = FirstError::new()?;
    ctx(
        holder.acquire(LOCK, tt_arbiter::Wait::Try),
        "holder ACQUIRE",
    )?;
    let mut live: Vec<(usize, libc::pid_t, bool)> = Vec::new();
    for i in 0..nwaiters {
        let (shm, owners, reports) = (&shm, &owners, (&errors, &doubles));
        let seed = rng.next();
        let pid = fork_child(&[], move || waiter(shm, owners, reports, i, plan, seed))?;
        live.push((i, pid, false));
    }
    wait_waiters(&holder, LOCK, nwaiters as u32)?;
    ctx(holder.release(bit(LOCK)), "holder RELEASE")?;
    let (mut alrm, mut stop, mut cont) = (0u64, 0u64, 0u64);
    let mut statuses = Vec::new();
    let start = Instant::now();
    while !live.is_empty() && start.elapsed() < limit {
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        live.retain(|&(i, pid, _)| match try_reap(pid) {
            Some(s) => {
                statuses.push((i, s));
                false
            }
            None => true,
        });
        if live.is_empty() {
            break;
        }
        let k = rng.below(live.len() as u64) as usize;
        let (_, pid, stopped) = &mut live[k];
        let sig = match rng.below(20) {
            0..=8 => libc::SIGALRM,
            9..=13 => libc::SIGSTOP,
            _ => libc::SIGCONT,
        };
        // A waiter stays stopped only until the next signal picks it.
        let sig = if *stopped { libc::SIGCONT } else { sig };
        // SAFETY: signalling our own child (not reaped yet).
        unsafe { libc::kill(*pid, sig) };
        match sig {
            libc::SIGALRM => alrm += 1,
            libc::SIGSTOP => stop += 1,
            _ => cont += 1,
        }
        *stopped = sig == libc::SIGSTOP;
    }
    // The storm is over: everyone continues and must finish.
    for &(_, pid, _) in &live {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
    let deadline = Instant::now() + PATIENCE;
    let mut lost = 0u64;
    let mut problems = Vec::new();
    for &(i, pid, _) in &live {
        match reap_until(pid, deadline) {
            Some(s) => statuses.push((i, s)),
            None => {
                lost += 1;
                let q = query(&holder, LOCK)?;
                problems.push(format!(
                    "waiter {i} (kind {}) not done {:?} after the storm; lock now {q:?}",
                    i % 3,
                    limit
                ));
                kill_reap(pid);
            }
        }
    }
    let after = query(&holder, LOCK)?;
    let word = |i: usize, k: usize| shm.u64(i * WORDS + k).load(Ordering::SeqCst);
    let (mut grants, mut eintr, mut timeouts, mut handled) = (0, 0, 0, 0);
    for (i, s) in &statuses {
        if *s != 0 {
            problems.push(format!("waiter {i} {}", describe_status(*s)));
        }
    }
    for i in 0..nwaiters {
        grants += word(i, 0);
        eintr += word(i, 1);
        timeouts += word(i, 2);
        handled += word(i, 3);
        if word(i, 0) != plan {
            problems.push(format!(
                "waiter {i} (kind {}) was granted the lock {} times, planned {plan}",
                i % 3,
                word(i, 0)
            ));
        }
    }
    let acquisitions = after.raw.acquisitions - before.acquisitions;
    let spurious = after.raw.spurious_wakeups - before.spurious_wakeups;
    figure("signals_sent", alrm + stop + cont);
    figure("signals_sigalrm", alrm);
    figure("signals_sigstop", stop);
    figure("signals_sigcont", cont);
    figure("signals_handled", handled);
    figure("signals_eintr", eintr);
    figure("signals_timeouts", timeouts);
    figure("signals_grants", grants);
    figure("operations", grants + eintr + timeouts);
    figure("spurious_wakeups", spurious);
    figure("lost_locks", lost);
    figure("double_holders", doubles.count());
    if doubles.count() != 0 {
        problems.insert(
            0,
            format!(
                "{} double holder(s); first: {}",
                doubles.count(),
                doubles.first()
            ),
        );
    }
    if errors.count() != 0 {
        problems.insert(
            0,
            format!(
                "{} problem(s) in the waiters; first: {}",
                errors.count(),
                errors.first()
            ),
        );
    }
    ensure!(problems.is_empty(), "{}", problems.join("\n"));
    ensure_eq!(
        acquisitions,
        grants + 1,
        "QUERY acquisitions delta vs grants seen (+1 for the holder)"
    );
    // spurious_wakeups counts the returns from a sleep that found nothing
    // to act on after a wake-up sent to the waiter (issue 15). A SIGCONT
    // that comes before the waiter has acted on the SIGSTOP that woke it
    // takes that stop back: the waiter then finds no signal pending. That
    // wake-up was not sent to it and is not counted, so the bound holds
    // with room; anything beyond it is a wake-up for nothing.
    ensure!(
        spurious <= cont,
        "spurious_wakeups delta {spurious}, more than the {cont} SIGCONTs sent"
    );
    ensure!(
        !after.held && after.waiters == 0,
        "lock {LOCK} not free at the end: {after:?}"
    );
    if alrm >= 100 {
        ensure!(eintr > 0, "{alrm} SIGALRMs and no EINTR from ACQUIRE");
    }
    Ok(())
}

//! Distributions of single waits: a log-linear histogram (32 buckets per
//! power of two, so any value is known to within 1/32 of itself), filled
//! through atomics in shared memory by every process of a measurement, and
//! its quantiles, maximum and tail. Exact below 32 ns; no value is ever
//! out of range (the buckets cover every u64).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bits of the mantissa kept: 2^SUB_BITS buckets per power of two.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets covering 0..=u64::MAX.
pub const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB as usize;

/// The bucket of `v`.
pub fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let m = (v >> (e - SUB_BITS)) & (SUB - 1);
    (e - SUB_BITS + 1) as usize * SUB as usize + m as usize
}

/// The smallest value of bucket `i`.
pub fn lower(i: usize) -> u64 {
    let sub = SUB as usize;
    if i < sub {
        return i as u64;
    }
    let e = (i / sub) as u32 + SUB_BITS - 1;
    (SUB + (i % sub) as u64) << (e - SUB_BITS)
}

/// The largest value of bucket `i`.
pub fn upper(i: usize) -> u64 {
    if i + 1 >= BUCKETS {
        u64::MAX
    } else {
        lower(i + 1) - 1
    }
}

/// A histogram being filled by several processes at once (it lives in
/// shared memory; all-zero is empty).
#[repr(C)]
pub struct SharedHist {
    counts: [AtomicU64; BUCKETS],
    max: AtomicU64,
}

impl SharedHist {
    pub fn record(&self, v: u64) {
        self.counts[bucket(v)].fetch_add(1, Relaxed);
        self.max.fetch_max(v, Relaxed);
    }

    /// What has been recorded so far.
    pub fn snapshot(&self) -> Hist {
        let mut h = Hist::new();
        for (i, c) in self.counts.iter().enumerate() {
            let c = c.load(Relaxed);
            if c > 0 {
                h.add(i, c);
            }
        }
        h.max = self.max.load(Relaxed);
        h
    }
}

/// A distribution of values (nanoseconds): counts per bucket, sparse, in
/// bucket order, and the exact maximum.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hist {
    /// (bucket, count), count > 0, increasing buckets.
    buckets: Vec<(usize, u64)>,
    pub n: u64,
    pub max: u64,
}

impl Hist {
    pub fn new() -> Hist {
        Hist::default()
    }

    /// Adds `count` values of bucket `i` (buckets added in increasing
    /// order, or merged).
    fn add(&mut self, i: usize, count: u64) {
        match self.buckets.binary_search_by_key(&i, |&(b, _)| b) {
            Ok(k) => self.buckets[k].1 += count,
            Err(k) => self.buckets.insert(k, (i, count)),
        }
        self.n += count;
    }

    /// Records one value.
    #[cfg(test)]
    pub fn record(&mut self, v: u64) {
        self.add(bucket(v), 1);
        self.max = self.max.max(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Hist) {
        for &(i, c) in &other.buckets {
            self.add(i, c);
        }
        self.max = self.max.max(other.max);
    }

    /// The `q`-quantile (0..=1, nearest rank): the middle of the bucket
    /// holding it, never above the maximum; NaN when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for &(i, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                let (lo, hi) = (lower(i) as f64, upper(i) as f64);
                return (lo + (hi - lo) / 2.0).min(self.max as f64);
            }
        }
        self.max as f64
    }

    /// The tail: for each bucket that holds values, its smallest value and
    /// the fraction of all values at least that large (from 1 down).
    pub fn tail(&self) -> Vec<(u64, f64)> {
        let mut above = self.n;
        let mut out = Vec::with_capacity(self.buckets.len());
        for &(i, c) in &self.buckets {
            out.push((lower(i), above as f64 / self.n as f64));
            above -= c;
        }
        out
    }

    /// (smallest value of the bucket, count) for each bucket that holds
    /// values: the JSON form.
    pub fn pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.buckets.iter().map(|&(i, c)| (lower(i), c))
    }

    /// Rebuilds from [`Hist::pairs`] and the maximum.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, u64)>, max: u64) -> Hist {
        let mut h = Hist::new();
        for (v, c) in pairs {
            if c > 0 {
                h.add(bucket(v), c);
            }
        }
        h.max = max;
        h
    }

    /// One word: `MAX:BUCKET=COUNT,...` (`MAX:` when empty).
    pub fn to_word(&self) -> String {
        let mut s = format!("{}:", self.max);
        for (k, &(i, c)) in self.buckets.iter().enumerate() {
            let _ = write!(s, "{}{i}={c}", if k > 0 { "," } else { "" });
        }
        s
    }

    /// Parses [`Hist::to_word`].
    pub fn from_word(w: &str) -> Option<Hist> {
        let (max, rest) = w.split_once(':')?;
        let mut h = Hist::new();
        h.max = max.parse().ok()?;
        for item in rest.split(',').filter(|s| !s.is_empty()) {
            let (i, c) = item.split_once('=')?;
            let (i, c): (usize, u64) = (i.parse().ok()?, c.parse().ok()?);
            if i >= BUCKETS || c == 0 {
                return None;
            }
            h.add(i, c);
        }
        Some(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(31), 31);
        assert_eq!(bucket(32), 32);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(upper(BUCKETS - 1), u64::MAX);
        for i in 0..BUCKETS {
            assert_eq!(bucket(lower(i)), i, "lower({i})");
            assert_eq!(bucket(upper(i)), i, "upper({i})");
            if i + 1 < BUCKETS {
                assert_eq!(upper(i) + 1, lower(i + 1));
            }
        }
    }

    #[test]
    fn bucket_width_is_within_a_32nd() {
        for v in [
            32u64,
            100,
            1_000,
            50_000,
            1_234_567,
            3_980_000,
            u64::MAX / 3,
        ] {
            let i = bucket(v);
            assert!(lower(i) <= v && v <= upper(i));
            let width = (upper(i) - lower(i) + 1) as f64;
            assert!(width / lower(i) as f64 <= 1.0 / 32.0, "{v}: width {width}");
        }
    }

    #[test]
    fn quantiles_and_max() {
        let mut h = Hist::new();
        assert!(h.quantile(0.5).is_nan());
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.n, 1000);
        assert_eq!(h.max, 1_000_000);
        let near = |got: f64, want: f64| (got - want).abs() <= want / 32.0;
        assert!(near(h.quantile(0.5), 500_000.0), "{}", h.quantile(0.5));
        assert!(near(h.quantile(0.99), 990_000.0), "{}", h.quantile(0.99));
        // The top quantile never reads above the exact maximum.
        assert_eq!(h.quantile(1.0), 1_000_000.0);
        // Small values are exact.
        let mut s = Hist::new();
        for v in [3, 3, 7, 9] {
            s.record(v);
        }
        assert_eq!(s.quantile(0.5), 3.0);
        assert_eq!(s.quantile(0.75), 7.0);
        assert_eq!(s.quantile(1.0), 9.0);
    }

    #[test]
    fn one_slow_wait_in_a_hundred_is_the_p99() {
        let mut h = Hist::new();
        for _ in 0..99 {
            h.record(10_000);
        }
        h.record(4_000_000);
        assert!((h.quantile(0.99) - 10_000.0).abs() < 400.0);
        assert_eq!(h.max, 4_000_000);
        let mut two = h.clone();
        two.record(4_000_000);
        assert!(two.quantile(0.99) > 3_800_000.0);
    }

    #[test]
    fn merge_and_shared_snapshot_agree() {
        let shared = crate::sys::shared::<SharedHist>();
        let (mut a, mut b) = (Hist::new(), Hist::new());
        for v in (0..5000u64).map(|k| k * k % 7_777_777) {
            shared.record(v);
            if v % 2 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
        }
        a.merge(&b);
        assert_eq!(shared.snapshot(), a);
        assert_eq!(a.n, 5000);
    }

    #[test]
    fn tail_starts_at_one_and_falls() {
        let mut h = Hist::new();
        for v in [10, 10, 20, 40] {
            h.record(v * 1000);
        }
        let t = h.tail();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].1, 1.0);
        assert_eq!(t[1].1, 0.5);
        assert_eq!(t[2].1, 0.25);
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn word_and_pairs_round_trip() {
        let mut h = Hist::new();
        for v in [0, 5, 5, 64, 1_000_000, 123_456_789] {
            h.record(v);
        }
        let w = h.to_word();
        assert_eq!(Hist::from_word(&w), Some(h.clone()));
        assert_eq!(Hist::from_pairs(h.pairs().collect::<Vec<_>>(), h.max), h);
        assert_eq!(Hist::from_word("0:"), Some(Hist::new()));
        for bad in ["", "12", "x:", "1:3", "1:3=0", "1:99999=1", "1:2=x"] {
            assert_eq!(Hist::from_word(bad), None, "{bad:?}");
        }
    }
}

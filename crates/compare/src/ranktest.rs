//! The Mann–Whitney U test (the Wilcoxon rank-sum test), as benchstat uses it: does one
//! build's figure tend to be larger than the other's, judged from the runs' ranks alone? It
//! assumes no shape for the run-to-run spread, so one wild run moves it no more than any
//! other run, where a mean or an overlap of ranges would follow it.
//!
//! The p-value is exact: every way of splitting the pooled runs into two sides of the same
//! sizes is tried, and p is the share of them whose rank sum lies at least as far from its
//! mean as the observed one. Ties take their mean rank, and the enumeration counts them as
//! they fall, so tied runs need no correction. Past [`EXACT_SPLITS`] splits (11 runs a side),
//! the normal approximation with the tie and continuity corrections stands in.
//!
//! The smallest p a test of `n` and `m` runs can give is 2 / C(n + m, n): 0.10 for 3 runs a
//! side, 0.029 for 4, 0.0079 for 5. So 3 runs a side can never show a difference at 0.05.

/// Splits enumerated exactly; past it, the normal approximation. C(22, 11) = 705,432 is the
/// first over it.
pub const EXACT_SPLITS: u64 = 500_000;

/// The two-sided p-value of the hypothesis that `a` and `b` come from one distribution;
/// `None` when a side is empty or every run is tied (no ranks to tell the sides apart).
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return None;
    }
    let ranks = mid_ranks(a.iter().chain(b).copied());
    if ranks.iter().all(|&r| r == ranks[0]) {
        return None;
    }
    let total = n + m;
    // Rank sum of side A; its mean under the hypothesis is n (N + 1) / 2.
    let observed: f64 = ranks[..n].iter().sum();
    let mean = n as f64 * (total + 1) as f64 / 2.0;
    let far = (observed - mean).abs();
    let splits = choose(total as u64, n.min(m) as u64);
    if splits <= EXACT_SPLITS {
        return Some(exact(&ranks, n, mean, far, splits));
    }
    Some(normal(&ranks, n, m, far))
}

/// The ranks of `values` (1-based), ties sharing their mean rank.
fn mid_ranks(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let v: Vec<f64> = values.collect();
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut ranks = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        // Positions i..=j (0-based) hold ranks i + 1 ..= j + 1.
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// The smallest two-sided p a test of `n` runs against `m` can give: 2 / C(n + m, n), the
/// two splits that put every run of one side below every run of the other.
pub fn smallest_p(n: usize, m: usize) -> f64 {
    (2.0 / choose((n + m) as u64, n.min(m) as u64) as f64).min(1.0)
}

/// C(n, k), saturating.
fn choose(n: u64, k: u64) -> u64 {
    let k = k.min(n - k);
    let mut c: u64 = 1;
    for i in 0..k {
        // Exact at each step: c · (n − i) is divisible by i + 1.
        c = match c.checked_mul(n - i) {
            Some(x) => x / (i + 1),
            None => return u64::MAX,
        };
    }
    c
}

/// The share of all splits of `ranks` into `n` and the rest whose side-A rank sum is at least
/// `far` from `mean`.
fn exact(ranks: &[f64], n: usize, mean: f64, far: f64, splits: u64) -> f64 {
    // Rank sums are multiples of 0.5: compare with a margin well under that.
    let far = far - 1e-9;
    let mut pick: Vec<usize> = (0..n).collect();
    let mut extreme = 0u64;
    loop {
        let sum: f64 = pick.iter().map(|&i| ranks[i]).sum();
        if (sum - mean).abs() >= far {
            extreme += 1;
        }
        // The next combination in lexicographic order.
        let Some(i) = (0..n).rev().find(|&i| pick[i] < ranks.len() - n + i) else {
            break;
        };
        pick[i] += 1;
        for j in i + 1..n {
            pick[j] = pick[j - 1] + 1;
        }
    }
    extreme as f64 / splits as f64
}

/// The normal approximation: the rank sum's variance with the tie correction, and a half-rank
/// continuity correction.
fn normal(ranks: &[f64], n: usize, m: usize, far: f64) -> f64 {
    let total = (n + m) as f64;
    let mut sorted = ranks.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let j = sorted[i..].iter().take_while(|&&r| r == sorted[i]).count();
        let t = j as f64;
        ties += t * t * t - t;
        i += j;
    }
    let variance = n as f64 * m as f64 / 12.0 * ((total + 1.0) - ties / (total * (total - 1.0)));
    let z = ((far - 0.5).max(0.0)) / variance.sqrt();
    (2.0 * (1.0 - standard_normal_cdf(z))).min(1.0)
}

/// Φ(z) for z ≥ 0, from erf's Abramowitz–Stegun 7.1.26 form (error under 1.5e-7).
fn standard_normal_cdf(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    0.5 * (1.0 + erf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(p: Option<f64>, want: f64) {
        let p = p.expect("a p-value");
        assert!((p - want).abs() < 1e-4, "p = {p}, want {want}");
    }

    #[test]
    fn separated_sides_give_the_smallest_p_their_sizes_allow() {
        // 2 / C(6, 3), 2 / C(8, 4), 2 / C(10, 5), 2 / C(8, 3).
        close(mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]), 0.1);
        close(
            mann_whitney(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]),
            2.0 / 70.0,
        );
        close(
            mann_whitney(&[10.0, 11.0, 12.0, 13.0, 14.0], &[1.0, 2.0, 3.0, 4.0, 5.0]),
            2.0 / 252.0,
        );
        close(
            mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0, 7.0, 8.0]),
            2.0 / 56.0,
        );
    }

    #[test]
    fn one_run_out_of_order_doubles_the_tail() {
        // 5 against 5 with one swap (U = 1): rank sums 16 and 39; splits at least as far from
        // 27.5 are U ∈ {0, 1, 24, 25}: 2 · (1 + 1) of 252.
        close(
            mann_whitney(&[1.0, 2.0, 3.0, 4.0, 6.0], &[5.0, 7.0, 8.0, 9.0, 10.0]),
            4.0 / 252.0,
        );
        // Interleaved sides: nothing to tell them apart.
        close(
            mann_whitney(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]),
            // Rank sums 25 and 30, 2.5 from 27.5: every split but those within 2.5 of it.
            {
                let mut near = 0;
                let r: Vec<f64> = (1..=10).map(f64::from).collect();
                let mut count = 0;
                for mask in 0u32..1024 {
                    if mask.count_ones() != 5 {
                        continue;
                    }
                    count += 1;
                    let s: f64 = (0..10).filter(|i| mask >> i & 1 == 1).map(|i| r[i]).sum();
                    if (s - 27.5).abs() < 2.5 {
                        near += 1;
                    }
                }
                (count - near) as f64 / count as f64
            },
        );
    }

    #[test]
    fn ties_share_their_rank_and_all_tied_is_no_test() {
        assert_eq!(
            mid_ranks([3.0, 1.0, 3.0, 2.0].into_iter()),
            [3.5, 1.0, 3.5, 2.0]
        );
        assert_eq!(mann_whitney(&[5.0, 5.0, 5.0], &[5.0, 5.0, 5.0]), None);
        assert_eq!(mann_whitney(&[], &[1.0]), None);
        // Two ties across the sides: 4 of C(6, 3) = 20 splits are as far as A = {1, 2, 3.5}.
        close(mann_whitney(&[1.0, 2.0, 3.0], &[3.0, 4.0, 5.0]), 4.0 / 20.0);
    }

    #[test]
    fn many_runs_use_the_normal_approximation() {
        // 12 a side (C(24, 12) > EXACT_SPLITS), fully separated: z = (222 − 150 − 0.5) / √300.
        let a: Vec<f64> = (0..12).map(f64::from).collect();
        let b: Vec<f64> = (100..112).map(f64::from).collect();
        assert!(choose(24, 12) > EXACT_SPLITS);
        let z: f64 = 71.5 / 300f64.sqrt();
        let want = 2.0 * (1.0 - standard_normal_cdf(z));
        close(mann_whitney(&a, &b), want);
        assert!(want < 1e-4, "{want}");
        // Φ at known points.
        assert!((standard_normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((standard_normal_cdf(0.0) - 0.5).abs() < 1e-6);
    }
}

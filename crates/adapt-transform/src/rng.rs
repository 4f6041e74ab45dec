//! Per-sample random draws for augmentation.

/// The random stream of one sample in one epoch: a pure function of
/// (seed, epoch, key), where the key is the sample's
/// [`draw_key`](crate::Dataset::draw_key). Nothing else enters (no worker,
/// thread, batch or rank), so a sample's augmented pixels are the same for
/// every loader configuration; epochs differ, the same epoch twice is
/// identical.
///
/// The generator is SplitMix64 (Steele, Lea and Flood 2014), written out
/// here so the stream depends on nothing but this file: statistically sound
/// for augmentation, a few nanoseconds per draw, and seeded per sample
/// without a per-sample key schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleRng {
    state: u64,
}

const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Default for SampleRng {
    fn default() -> Self {
        Self::new(0, 0, 0)
    }
}

impl SampleRng {
    /// The stream of sample `key` in `epoch` under `seed`.
    pub fn new(seed: u64, epoch: u64, key: u64) -> Self {
        // Each input is folded in through the finaliser, so (1, 0, 0) and
        // (0, 1, 0) start unrelated streams.
        let s = mix(seed ^ 0x6a09_e667_f3bc_c908);
        let s = mix(s ^ epoch.wrapping_mul(GAMMA) ^ 0xbb67_ae85_84ca_a73b);
        Self {
            state: mix(s ^ key.wrapping_mul(0xd1b5_4a32_d192_ed03)),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi).
    pub fn uniform_in(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in `0..n` (0 when `n` is 0), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_pure_and_distinct() {
        let draw = |s, e, k| SampleRng::new(s, e, k).next_u64();
        assert_eq!(draw(1, 2, 3), draw(1, 2, 3));
        let all = [
            draw(0, 0, 0),
            draw(1, 0, 0),
            draw(0, 1, 0),
            draw(0, 0, 1),
            draw(1, 1, 0),
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn uniform_and_below_stay_in_range_with_the_right_mean() {
        let mut r = SampleRng::new(7, 0, 0);
        let n = 100_000;
        let mut sum = 0.0;
        let mut counts = [0u32; 5];
        for _ in 0..n {
            let u = r.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u;
            counts[r.below(5) as usize] += 1;
        }
        assert!((sum / n as f64 - 0.5).abs() < 0.01);
        // Each bucket expects 20,000 ± 126 (1 sd): allow 5 sd.
        assert!(
            counts.iter().all(|&c| (c as i64 - 20_000).abs() < 640),
            "{counts:?}"
        );
        assert_eq!(r.below(0), 0);
    }
}

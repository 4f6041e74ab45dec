//! Seeded permutations of an epoch's indices (ChaCha8), and the FNV-1a hash.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// A permutation of `0..len`, a pure function of (`seed`, `stream`):
/// Fisher–Yates over the ChaCha8 stream `stream` keyed by `seed`. The
/// bounded draw is written out (multiply-shift) so the result depends only
/// on the ChaCha specification, not on a rand release's sampling algorithm.
/// The loader uses it per epoch (stream = epoch), the pack writer once.
pub fn permutation(len: usize, seed: u64, stream: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    for i in (1..len).rev() {
        let j = ((u128::from(rng.next_u64()) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
    order
}

/// FNV-1a, 64 bits, of `bytes`: a stable digest for identities and damage
/// checks (fingerprints, checkpoints), not for security.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_deterministic_permutation() {
        let a = permutation(1000, 7, 0);
        assert_eq!(a, permutation(1000, 7, 0));
        assert_ne!(a, permutation(1000, 7, 1));
        assert_ne!(a, permutation(1000, 8, 0));
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        assert!(permutation(0, 1, 1).is_empty());
    }
}

//! How far an epoch order is from a uniform shuffle, in three statistics a
//! training run feels: how far samples move from their storage position,
//! how far apart consecutive samples were stored, and how many classes a
//! batch mixes (data is often stored sorted by class).

/// The statistics of one order; compare each with a full shuffle's
/// ([`ShuffleQuality::of`] on a permutation of the same data).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShuffleQuality {
    /// Mean |output position − storage position| over the data's length
    /// (a uniform shuffle: about 1/3; storage order: 0).
    pub displacement: f64,
    /// Mean |storage position of sample t+1 − of sample t| over the data's
    /// length (a uniform shuffle: about 1/3; reading shards in storage
    /// order: near 0).
    pub neighbour_distance: f64,
    /// Mean number of distinct labels in a batch.
    pub classes_per_batch: f64,
}

impl ShuffleQuality {
    /// The statistics of `order` (storage indices, each below
    /// `labels.len()`) in batches of `batch` (≥ 1; a last partial batch is
    /// not counted); `labels[i]` is sample i's label.
    pub fn of(order: &[usize], labels: &[i64], batch: usize) -> Self {
        let n = labels.len().max(1) as f64;
        let displacement = order
            .iter()
            .enumerate()
            .map(|(t, &i)| t.abs_diff(i) as f64)
            .sum::<f64>()
            / (order.len().max(1) as f64 * n);
        let neighbour_distance = order
            .windows(2)
            .map(|w| w[0].abs_diff(w[1]) as f64)
            .sum::<f64>()
            / (order.len().saturating_sub(1).max(1) as f64 * n);
        let mut seen: Vec<i64> = Vec::with_capacity(batch);
        let mut classes = 0usize;
        let batches = order.chunks_exact(batch.max(1));
        let count = batches.len();
        for b in batches {
            seen.clear();
            seen.extend(b.iter().filter_map(|&i| labels.get(i)));
            seen.sort_unstable();
            seen.dedup();
            classes += seen.len();
        }
        Self {
            displacement,
            neighbour_distance,
            classes_per_batch: classes as f64 / count.max(1) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_order_scores_zero_and_a_shuffle_about_a_third() {
        let labels: Vec<i64> = (0..10_000).map(|i| i / 1000).collect();
        let plain: Vec<usize> = (0..10_000).collect();
        let q = ShuffleQuality::of(&plain, &labels, 100);
        assert_eq!(q.displacement, 0.0);
        assert!(q.neighbour_distance < 1e-3);
        assert!((q.classes_per_batch - 1.0).abs() < 1e-9);
        let shuffled = crate::permutation(10_000, 7, 0);
        let q = ShuffleQuality::of(&shuffled, &labels, 100);
        assert!((q.displacement - 1.0 / 3.0).abs() < 0.02, "{q:?}");
        assert!((q.neighbour_distance - 1.0 / 3.0).abs() < 0.02, "{q:?}");
        // 100 draws of 10 equally likely classes: almost always all 10.
        assert!(q.classes_per_batch > 9.9, "{q:?}");
    }
}

//! The balanced binary search tree over one parameter's sorted domain.

/// A balanced binary search tree over a sorted domain of `n` values, built
/// by taking the middle element as the root (the upper middle for an even
/// count) and recursing on each half. It satisfies the AVL balance property
/// and has height ⌈log2(n + 1)⌉ (a single node has height 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// `(left, right)` child domain indices for each domain index.
    children: Vec<(Option<usize>, Option<usize>)>,
    root: usize,
}

impl Tree {
    /// The tree over domain indices `0..n` (n ≥ 1).
    pub fn new(n: usize) -> Self {
        let mut children = vec![(None, None); n];
        let root = build(&mut children, 0, n).unwrap_or(0);
        Self { children, root }
    }

    /// The root's domain index.
    pub fn root(&self) -> usize {
        self.root
    }

    /// Left and right children of a node.
    pub fn children(&self, node: usize) -> (Option<usize>, Option<usize>) {
        self.children[node]
    }

    /// Height of the subtree at `node` (a leaf has height 1).
    pub fn height_at(&self, node: usize) -> usize {
        let (l, r) = self.children[node];
        1 + l
            .map_or(0, |l| self.height_at(l))
            .max(r.map_or(0, |r| self.height_at(r)))
    }

    /// Height of the tree.
    pub fn height(&self) -> usize {
        self.height_at(self.root)
    }

    /// Whether every node's subtrees differ in height by at most one.
    pub fn is_avl(&self) -> bool {
        (0..self.children.len()).all(|n| {
            let (l, r) = self.children[n];
            l.map_or(0, |l| self.height_at(l))
                .abs_diff(r.map_or(0, |r| self.height_at(r)))
                <= 1
        })
    }
}

fn build(children: &mut [(Option<usize>, Option<usize>)], lo: usize, hi: usize) -> Option<usize> {
    if lo >= hi {
        return None;
    }
    let mid = lo + (hi - lo) / 2;
    let left = build(children, lo, mid);
    let right = build(children, mid + 1, hi);
    children[mid] = (left, right);
    Some(mid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_upper_middle_rule() {
        // 1..15: root 8 (index 7), children 4 and 12.
        let t = Tree::new(15);
        assert_eq!(t.root(), 7);
        assert_eq!(t.children(7), (Some(3), Some(11)));
        assert_eq!(t.height(), 4);
        // Prefetch domain 1..2048: root 64 (index 6), children from [1..32] and [128..2048].
        let t = Tree::new(12);
        assert_eq!(t.root(), 6);
        assert_eq!(t.children(6), (Some(3), Some(9)));
        // [1, 2, 4, 8]: root 4, left 2 (with child 1), right 8.
        let t = Tree::new(4);
        assert_eq!(
            (t.root(), t.children(2), t.children(1)),
            (2, (Some(1), Some(3)), (Some(0), None))
        );
    }

    #[test]
    fn every_size_is_avl_with_log_height() {
        for n in 1..300 {
            let t = Tree::new(n);
            assert!(t.is_avl(), "n={n}");
            assert_eq!(
                t.height(),
                (usize::BITS - n.leading_zeros()) as usize,
                "n={n}"
            );
        }
        // The paper's space: heights 6, 4, 2, 2.
        assert_eq!([33, 12, 2, 2].map(|n| Tree::new(n).height()), [6, 4, 2, 2]);
    }
}

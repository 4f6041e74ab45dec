//! What publishing a pack to an object store did.

/// What an upload did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UploadReport {
    /// Shards sent.
    pub uploaded: usize,
    /// Shards found already there, identical (an earlier, interrupted
    /// upload's).
    pub skipped: usize,
    /// Bytes sent.
    pub bytes: u64,
    /// Objects of a replaced pack removed after the new manifest went up.
    pub removed: usize,
}

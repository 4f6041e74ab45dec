//! The machine a tuning result belongs to: cores, memory, GPU.

use serde::{Deserialize, Serialize};

/// The machine a tuning result belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU cores available to this process.
    pub cores: usize,
    /// Total memory, bytes.
    pub memory_bytes: u64,
    /// Memory available now, bytes (not part of a profile's identity).
    #[serde(default)]
    pub available_bytes: u64,
    /// The CUDA device, when one is usable; `None` on the host backend.
    pub gpu: Option<String>,
}

impl Machine {
    /// This machine, as seen now; the GPU is device 0 as the transfer
    /// engine's probe reports it (none without a driver).
    pub fn detect() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (total, available) = meminfo().unwrap_or((8 << 30, 4 << 30));
        Self {
            cores,
            memory_bytes: total,
            available_bytes: available,
            gpu: adapt_transfer::probe().ok().map(|i| i.name),
        }
    }

    /// Whether a profile measured on `other` applies here: same cores, same
    /// GPU, memory within 10%.
    pub fn matches(&self, other: &Machine) -> bool {
        let (a, b) = (self.memory_bytes as f64, other.memory_bytes as f64);
        self.cores == other.cores && self.gpu == other.gpu && (a - b).abs() <= 0.1 * a.max(b)
    }
}

/// `(MemTotal, MemAvailable)` in bytes from `/proc/meminfo`.
fn meminfo() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kib| kib * 1024)
    };
    Some((field("MemTotal:")?, field("MemAvailable:")?))
}

//! Loader integration tests: the config sweep (invariant 1), property tests
//! over random configurations, and every failure behaviour.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

mod failures;
mod properties;
mod real_data;
mod resume;
mod stages;
mod sweep;
mod util;

//! Loader integration tests: the config sweep (invariant 1), property tests
//! over random configurations, and every failure behaviour.

mod failures;
mod properties;
mod real_data;
mod sweep;
mod util;

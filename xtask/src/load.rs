//! `cargo xtask load`: placeholder until the loader lands.

#[derive(clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_: Args) -> anyhow::Result<()> {
    anyhow::bail!("the loader is not built yet")
}

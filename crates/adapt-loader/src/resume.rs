//! Checkpoints of an epoch in progress, resumed exactly, on the same or a
//! different number of ranks; ranks from the launcher's environment.
//!
//! Semantics. An epoch's global order G is a pure function of (seed,
//! epoch). Ranks take strided shares of it (PyTorch's DistributedSampler:
//! rank r gets G[r], G[r+W], …), so after every rank delivered `b` batches of
//! `B` samples, the samples delivered are exactly the first `b·B·W` of G:
//! a checkpoint is the epoch plus the number of batches each rank has
//! delivered, taken at the same step on every rank (synchronous training).
//!
//! Resuming on the same world size continues each rank's share where it
//! stopped. Resuming on another world size W′ deals the rest of G (the
//! samples not yet delivered) across the W′ ranks with the same rules; a
//! resumed epoch can be checkpointed and resumed again (each change of world
//! size is a *segment*). Padding and `drop_last` apply to what is dealt:
//! without `drop_last`, the rest is padded by repeating its first samples
//! so every rank gets as many (at most W′−1 samples are then delivered
//! twice in the epoch, as DistributedSampler repeats samples); with
//! `drop_last`, up to W′−1 samples of the rest are left out of the epoch.
//! The next epoch starts from scratch on the new world size.

use crate::{Distributed, LoaderConfig, LoaderError};
use serde::{Deserialize, Serialize};

/// A change of world size inside an epoch: `batches` batches were delivered
/// by each of `world_size` ranks before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Ranks in the segment.
    pub world_size: usize,
    /// Batches each rank delivered in it.
    pub batches: usize,
}

/// Where a loader stands at a batch boundary: enough to resume exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// Layout of this record.
    pub format: u32,
    /// The epoch in progress.
    pub epoch: u64,
    /// Batches this rank delivered in the current segment.
    pub batches: usize,
    /// Earlier segments of this epoch (world-size changes).
    pub segments: Vec<Segment>,
    /// This rank.
    pub rank: usize,
    /// Ranks in the current segment.
    pub world_size: usize,
    /// The loader's seed.
    pub seed: u64,
    /// Samples per batch.
    pub batch_size: usize,
    /// Shuffled order.
    pub shuffle: bool,
    /// drop_last.
    pub drop_last: bool,
    /// Samples in the dataset.
    pub dataset_len: usize,
    /// The pipeline the batches came from ([`LoaderConfig::identity`]).
    pub identity: String,
    /// Whether a custom sampler (a pack's streaming order) made the order.
    pub custom_sampler: bool,
    /// The custom sampler's [`describe`](adapt_dataset::Sampler::describe)
    /// (buffer, shards at once); empty without one, and in checkpoints
    /// written before it was recorded (then only `custom_sampler` is
    /// checked).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sampler: String,
}

pub(crate) const FORMAT: u32 = 1;

fn damaged(reason: impl Into<String>) -> LoaderError {
    LoaderError::Checkpoint(reason.into())
}

impl LoaderState {
    /// The JSON text, with a checksum line last.
    pub fn to_text(&self) -> String {
        let body = serde_json::to_string_pretty(self).unwrap_or_default();
        format!(
            "{body}\n#checksum {:016x}\n",
            adapt_dataset::fnv1a(body.as_bytes())
        )
    }

    /// Reads a checkpoint written by [`to_text`](Self::to_text); a damaged
    /// or truncated one is an error, never a silent restart.
    pub fn from_text(text: &str) -> Result<Self, LoaderError> {
        let (body, tail) = text
            .rsplit_once("\n#checksum ")
            .ok_or_else(|| damaged("no checksum line: truncated or not a checkpoint"))?;
        let sum = u64::from_str_radix(tail.trim(), 16)
            .map_err(|_| damaged(format!("unreadable checksum {:?}", tail.trim())))?;
        if adapt_dataset::fnv1a(body.as_bytes()) != sum {
            return Err(damaged("checksum mismatch: the checkpoint is damaged"));
        }
        let state: Self =
            serde_json::from_str(body).map_err(|e| damaged(format!("unreadable: {e}")))?;
        if state.format != FORMAT {
            return Err(damaged(format!(
                "format {} (this build reads {FORMAT})",
                state.format
            )));
        }
        if state.world_size == 0
            || state.rank >= state.world_size
            || state.batch_size == 0
            || state.segments.iter().any(|s| s.world_size == 0)
        {
            return Err(damaged("impossible rank, world size or batch size"));
        }
        Ok(state)
    }

    /// Refuses a checkpoint of another dataset, pipeline, seed or batching.
    pub(crate) fn check_against(
        &self,
        config: &LoaderConfig,
        len: usize,
    ) -> Result<(), LoaderError> {
        let mismatch = |what: &str, ours: String, theirs: String| {
            Err(LoaderError::CheckpointMismatch {
                what: what.to_owned(),
                loader: ours,
                checkpoint: theirs,
            })
        };
        if self.identity != config.identity {
            return mismatch("pipeline", config.identity.clone(), self.identity.clone());
        }
        if self.dataset_len != len {
            return mismatch(
                "dataset length",
                len.to_string(),
                self.dataset_len.to_string(),
            );
        }
        if self.seed != config.seed {
            return mismatch("seed", config.seed.to_string(), self.seed.to_string());
        }
        if self.batch_size != config.batch_size {
            return mismatch(
                "batch size",
                config.batch_size.to_string(),
                self.batch_size.to_string(),
            );
        }
        if (self.shuffle, self.drop_last) != (config.shuffle, config.drop_last) {
            return mismatch(
                "shuffle/drop_last",
                format!("{}/{}", config.shuffle, config.drop_last),
                format!("{}/{}", self.shuffle, self.drop_last),
            );
        }
        if self.custom_sampler != config.sampler.is_some() {
            return mismatch(
                "sampler",
                custom(config.sampler.is_some()),
                custom(self.custom_sampler),
            );
        }
        let ours = sampler_description(config);
        if !self.sampler.is_empty() && self.sampler != ours {
            return mismatch("sampler", ours, self.sampler.clone());
        }
        Ok(())
    }
}

/// What a checkpoint records of `config`'s custom sampler.
pub(crate) fn sampler_description(config: &LoaderConfig) -> String {
    config
        .sampler
        .as_ref()
        .map(|s| s.describe())
        .unwrap_or_default()
}

fn custom(c: bool) -> String {
    if c { "custom" } else { "built-in" }.into()
}

/// DistributedSampler's share of `order` for `rank` of `world`: padded by
/// repeating from the start (or trimmed with `drop_last`) to a multiple of
/// `world`, then every `world`-th sample from `rank`.
pub(crate) fn share(order: &[usize], world: usize, rank: usize, drop_last: bool) -> Vec<usize> {
    if world <= 1 {
        return order.to_vec();
    }
    let per = if drop_last {
        order.len() / world
    } else {
        order.len().div_ceil(world)
    };
    (0..per)
        .filter_map(|k| {
            let i = k * world + rank;
            // Padding repeats the order from its start (as often as needed).
            (!order.is_empty()).then(|| order[i % order.len()])
        })
        .collect()
}

/// What is left of a global order after `segments`.
pub(crate) fn rest<'a>(order: &'a [usize], segments: &[Segment], batch_size: usize) -> &'a [usize] {
    segments.iter().fold(order, |rest, s| {
        let taken = s
            .batches
            .saturating_mul(batch_size)
            .saturating_mul(s.world_size);
        &rest[taken.min(rest.len())..]
    })
}

/// How a run was launched: torchrun's or Slurm's variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Global rank and world size.
    pub distributed: Distributed,
    /// Rank on this node, when the launcher says.
    pub local_rank: Option<usize>,
    /// Ranks on this node, when the launcher says.
    pub local_world_size: Option<usize>,
    /// Which launcher's variables were read.
    pub launcher: &'static str,
}

impl Launch {
    /// Reads torchrun's `RANK` / `WORLD_SIZE` (`LOCAL_RANK`,
    /// `LOCAL_WORLD_SIZE`); else Lightning's launcher's `WORLD_SIZE` with
    /// `LOCAL_RANK` and `NODE_RANK` (no `RANK`: the global rank is
    /// `NODE_RANK × LOCAL_WORLD_SIZE + LOCAL_RANK`, or `LOCAL_RANK` on node
    /// 0); else Slurm's `SLURM_PROCID` / `SLURM_NTASKS` (`SLURM_LOCALID`).
    /// `None` when none is set; a variable that is set but unusable, or
    /// missing beside another, is an error naming it.
    pub fn from_env() -> Result<Option<Self>, LoaderError> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// As [`from_env`](Self::from_env), from any source of variables.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, LoaderError> {
        let num =
            |k: &str| -> Result<Option<usize>, LoaderError> {
                match var(k) {
                    None => Ok(None),
                    Some(v) => v.trim().parse().map(Some).map_err(|_| {
                        LoaderError::InvalidConfig(format!("{k}={v:?} is not a number"))
                    }),
                }
            };
        let (rank, world, local, local_world, launcher) = match (num("RANK")?, num("WORLD_SIZE")?) {
            (Some(r), Some(w)) => (
                r,
                w,
                num("LOCAL_RANK")?,
                num("LOCAL_WORLD_SIZE")?,
                "torchrun",
            ),
            (None, Some(w)) if var("LOCAL_RANK").is_some() => {
                let local = num("LOCAL_RANK")?.unwrap_or(0);
                let node = match num("NODE_RANK")? {
                    Some(n) => n,
                    None => num("GROUP_RANK")?.unwrap_or(0),
                };
                let local_world = num("LOCAL_WORLD_SIZE")?;
                let rank = match (node, local_world) {
                    (0, _) => local,
                    (n, Some(per_node)) => n.saturating_mul(per_node).saturating_add(local),
                    (n, None) => {
                        return Err(LoaderError::InvalidConfig(format!(
                            "WORLD_SIZE={w} and NODE_RANK={n} without RANK: the global rank \
                             needs LOCAL_WORLD_SIZE (or give the rank and world size yourself)"
                        )));
                    }
                };
                (rank, w, Some(local), local_world, "lightning")
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(LoaderError::InvalidConfig(
                    "RANK and WORLD_SIZE must be set together (or WORLD_SIZE with LOCAL_RANK, \
                     as Lightning's launcher sets them)"
                        .into(),
                ));
            }
            (None, None) => match (num("SLURM_PROCID")?, num("SLURM_NTASKS")?) {
                (Some(r), Some(w)) => (r, w, num("SLURM_LOCALID")?, None, "slurm"),
                (None, None) => return Ok(None),
                _ => {
                    return Err(LoaderError::InvalidConfig(
                        "SLURM_PROCID and SLURM_NTASKS must be set together".into(),
                    ));
                }
            },
        };
        if world == 0 || rank >= world {
            return Err(LoaderError::InvalidConfig(format!(
                "{launcher}: rank {rank} is not below world size {world}"
            )));
        }
        Ok(Some(Self {
            distributed: Distributed {
                rank,
                world_size: world,
            },
            local_rank: local,
            local_world_size: local_world,
            launcher,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_reads_torchrun_then_slurm_and_refuses_nonsense() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let l = Launch::from_vars(vars(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (l.distributed.rank, l.distributed.world_size, l.local_rank),
            (3, 4, Some(1))
        );
        assert_eq!(l.launcher, "torchrun");
        let l = Launch::from_vars(vars(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")]))
            .unwrap()
            .unwrap();
        assert_eq!(l.launcher, "slurm");
        assert!(Launch::from_vars(vars(&[])).unwrap().is_none());
        assert!(Launch::from_vars(vars(&[("RANK", "4"), ("WORLD_SIZE", "4")])).is_err());
        assert!(Launch::from_vars(vars(&[("RANK", "x"), ("WORLD_SIZE", "4")])).is_err());
        assert!(Launch::from_vars(vars(&[("RANK", "1")])).is_err());
        assert!(Launch::from_vars(vars(&[("WORLD_SIZE", "2")])).is_err());
    }

    #[test]
    fn launch_reads_lightnings_variables_without_rank() {
        let get = |pairs: &'static [(&'static str, &'static str)]| {
            Launch::from_vars(move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            })
        };
        let l = get(&[("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")])
            .unwrap()
            .unwrap();
        assert_eq!((l.distributed.rank, l.distributed.world_size), (1, 2));
        assert_eq!(l.launcher, "lightning");
        let l = get(&[
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("NODE_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "4"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(l.distributed.rank, 5);
        let e = get(&[("WORLD_SIZE", "8"), ("LOCAL_RANK", "1"), ("NODE_RANK", "1")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("LOCAL_WORLD_SIZE"), "{e}");
        assert!(get(&[("WORLD_SIZE", "2"), ("LOCAL_RANK", "2")]).is_err());
    }

    #[test]
    fn a_damaged_checkpoint_is_an_error() {
        let s = LoaderState {
            format: FORMAT,
            epoch: 2,
            batches: 5,
            segments: vec![Segment {
                world_size: 4,
                batches: 3,
            }],
            rank: 1,
            world_size: 2,
            seed: 7,
            batch_size: 8,
            shuffle: true,
            drop_last: false,
            dataset_len: 100,
            identity: "cifar10|hflip".into(),
            custom_sampler: false,
            sampler: String::new(),
        };
        let text = s.to_text();
        assert_eq!(LoaderState::from_text(&text).unwrap(), s);
        let flipped = text.replacen("\"batches\": 5", "\"batches\": 6", 1);
        assert!(LoaderState::from_text(&flipped).is_err());
        assert!(LoaderState::from_text(&text[..text.len() / 2]).is_err());
        assert!(LoaderState::from_text("").is_err());
    }

    #[test]
    fn shares_pad_or_trim_like_distributed_sampler() {
        let order: Vec<usize> = (10..15).collect();
        assert_eq!(share(&order, 3, 2, false), [12, 10]);
        assert_eq!(share(&order, 3, 0, true), [10]);
        assert_eq!(share(&order, 1, 0, false), order);
        let seg = [Segment {
            world_size: 2,
            batches: 1,
        }];
        assert_eq!(rest(&order, &seg, 2), &[14]);
    }
}

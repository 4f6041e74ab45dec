//! Helpers of the loader's tests: a synthetic dataset, fake pinned
//! buffers, epoch runs and the knob sweep.

use adapt_dataset::{Dataset, Error, Read, Sample, Shape};
use adapt_loader::{BufferProvider, HostBuffer, Loader, LoaderConfig, LoaderError, LoaderKnobs};
use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// An in-memory dataset whose pixels are a function of the index, with
/// failures, panics and delays where a test wants them.
#[derive(Default)]
pub struct Synthetic {
    pub len: usize,
    pub fail: HashSet<usize>,
    pub panic: HashSet<usize>,
    /// Samples that come out 3x2 rather than 2x3.
    pub odd: HashSet<usize>,
    pub slow: Option<(usize, Duration)>,
    pub every_sample: Option<Duration>,
}

pub const SHAPE: Shape = Shape::new(2, 3, 3);

impl Synthetic {
    pub fn new(len: usize) -> Self {
        Self {
            len,
            ..Self::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("synthetic failure at {0}")]
pub struct Boom(pub usize);

impl Dataset for Synthetic {
    fn len(&self) -> usize {
        self.len
    }
    fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
        adapt_dataset::check_index(index, self.len)?;
        if let Some(d) = self.every_sample {
            std::thread::sleep(d);
        }
        if let Some((i, d)) = self.slow
            && i == index
        {
            std::thread::sleep(d);
        }
        if self.fail.contains(&index) {
            return Err(Error::reader(Boom(index)));
        }
        if self.panic.contains(&index) {
            panic!("sample {index} panics");
        }
        let px = (0..SHAPE.len())
            .map(|k| ((index * 31 + k * 7) % 256) as u8)
            .collect();
        let (h, w) = if self.odd.contains(&index) {
            (SHAPE.width, SHAPE.height)
        } else {
            (SHAPE.height, SHAPE.width)
        };
        *buf = Sample::hwc(px, h, w, SHAPE.channels, (index % 7) as i64)?;
        Ok(Read::Filled)
    }
    fn sample_shape(&self) -> Option<Shape> {
        Some(SHAPE)
    }
}

/// A stand-in for pinned memory: a heap buffer that says it is pinned, so
/// tests see the provider seam used.
pub struct FakePinned;
/// Filled with NaN bytes (0xFF) so an unwritten value would show.
struct FakeBuf(Vec<u32>, usize);
impl HostBuffer for FakeBuf {
    fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.0)[..self.1]
    }
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.0)[..self.1]
    }
    fn is_pinned(&self) -> bool {
        true
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
impl BufferProvider for FakePinned {
    fn allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>, LoaderError> {
        Ok(Box::new(FakeBuf(vec![u32::MAX; bytes.div_ceil(4)], bytes)))
    }
}

/// What an epoch delivered: per batch, data bits, labels and indices.
#[derive(Debug, PartialEq, Eq)]
pub struct Stream(pub Vec<(Vec<u8>, Vec<i64>, Vec<usize>)>);

pub fn loader(ds: Arc<dyn Dataset>, config: LoaderConfig) -> Loader {
    let pinned: Arc<dyn BufferProvider> = Arc::new(FakePinned);
    Loader::with_buffers(ds, config, Some(pinned)).unwrap()
}

pub fn run_epoch(loader: &mut Loader, epoch: u64) -> Stream {
    let pin = loader.config().knobs.pin_memory;
    let bound = loader.config().max_in_flight();
    let mut e = loader.epoch(epoch).unwrap();
    let mut out = Vec::new();
    for b in e.by_ref() {
        let b = b.unwrap();
        assert_eq!(b.host_buffer().is_pinned(), pin);
        out.push((
            b.bytes().to_vec(),
            b.labels().to_vec(),
            b.indices().to_vec(),
        ));
    }
    assert!(
        e.max_in_flight() <= bound,
        "{} in flight > bound {bound}",
        e.max_in_flight()
    );
    Stream(out)
}

/// Every loader configuration of the sweep, labelled like `w4-p8-pin-persist`.
pub fn sweep(base: &LoaderConfig) -> Vec<(String, LoaderConfig)> {
    let mut out = Vec::new();
    for workers in 0..=4 {
        let prefetches: &[Option<usize>] = if workers == 0 {
            &[None]
        } else {
            &[Some(1), Some(2), Some(4), Some(8)]
        };
        for &prefetch in prefetches {
            for pin in [false, true] {
                for persist in [false, true] {
                    if workers == 0 && persist {
                        continue;
                    }
                    let label = format!(
                        "w{workers}-p{}{}{}",
                        prefetch.unwrap_or(0),
                        if pin { "-pin" } else { "" },
                        if persist { "-persist" } else { "" }
                    );
                    let config = LoaderConfig {
                        knobs: LoaderKnobs {
                            num_workers: workers,
                            prefetch_factor: prefetch,
                            pin_memory: pin,
                            persistent_workers: persist,
                        },
                        ..base.clone()
                    };
                    out.push((label, config));
                }
            }
        }
    }
    out
}

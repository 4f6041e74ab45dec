//! The painter: photo-like RGB images from a seeded generator.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded painter for one image. The stream is ChaCha8, whose output is
/// fixed by its specification, so images do not change with rand releases.
pub struct Painter {
    rng: ChaCha8Rng,
}

/// splitmix64 finaliser: spreads (seed, tag, index) over the seed space.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn tag_hash(tag: &str) -> u64 {
    tag.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

impl Painter {
    /// The painter of image `index` of dataset `tag` under `seed`.
    pub fn new(seed: u64, tag: &str, index: u64) -> Self {
        let s = mix(mix(seed ^ tag_hash(tag)).wrapping_add(index));
        Self {
            rng: ChaCha8Rng::seed_from_u64(s),
        }
    }

    /// A uniform integer below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.rng.random_range(0..n.max(1))
    }

    fn colour(&mut self) -> [f32; 3] {
        [
            self.rng.random_range(0.0..255.0),
            self.rng.random_range(0.0..255.0),
            self.rng.random_range(0.0..255.0),
        ]
    }

    /// A photo-like interleaved RGB image: a two-colour gradient, soft
    /// ellipses and rectangles, then per-pixel noise. `theme` tints the
    /// palette (a class label), so classes differ on average.
    pub fn photo(&mut self, width: u32, height: u32, theme: u64) -> Vec<u8> {
        let mut img = Canvas::new(width, height);
        let tint = Painter::new(theme, "theme", 0).colour();
        let (a, b) = (self.colour(), self.colour());
        let angle: f32 = self.rng.random_range(0.0..std::f32::consts::TAU);
        img.gradient(blend(a, tint, 0.4), blend(b, tint, 0.4), angle);
        for _ in 0..self.rng.random_range(3..8) {
            let c = blend(self.colour(), tint, 0.3);
            let (cx, cy) = (
                self.rng.random_range(0.0..width as f32),
                self.rng.random_range(0.0..height as f32),
            );
            let (rx, ry) = (
                self.rng.random_range(0.08..0.4) * width as f32,
                self.rng.random_range(0.08..0.4) * height as f32,
            );
            if self.rng.random_bool(0.6) {
                img.ellipse(cx, cy, rx, ry, c, 0.85);
            } else {
                img.rect(cx - rx, cy - ry, cx + rx, cy + ry, c, 0.7);
            }
        }
        self.finish(img)
    }

    /// A face-like image: a background as [`photo`](Self::photo), then a
    /// skin-toned oval with eyes and mouth whose tones come from `identity`,
    /// so images of one identity look alike.
    pub fn face(&mut self, width: u32, height: u32, identity: u64) -> Vec<u8> {
        let mut img = Canvas::new(width, height);
        let (a, b) = (self.colour(), self.colour());
        img.gradient(a, b, self.rng.random_range(0.0..std::f32::consts::TAU));
        for _ in 0..self.rng.random_range(2..5) {
            let c = self.colour();
            let (cx, cy) = (
                self.rng.random_range(0.0..width as f32),
                self.rng.random_range(0.0..height as f32),
            );
            img.ellipse(cx, cy, width as f32 * 0.2, height as f32 * 0.15, c, 0.6);
        }
        let mut who = Painter::new(identity, "identity", 0);
        let skin = [
            who.rng.random_range(120.0..240.0),
            who.rng.random_range(80.0..190.0),
            who.rng.random_range(60.0..170.0),
        ];
        let eyes = who.colour();
        let (w, h) = (width as f32, height as f32);
        let jitter = |p: &mut Painter, v: f32| v + p.rng.random_range(-0.03..0.03) * w;
        let (cx, cy) = (jitter(self, w * 0.5), jitter(self, h * 0.52));
        img.ellipse(cx, cy, w * 0.3, h * 0.36, skin, 1.0);
        img.ellipse(cx - w * 0.11, cy - h * 0.08, w * 0.05, h * 0.03, eyes, 1.0);
        img.ellipse(cx + w * 0.11, cy - h * 0.08, w * 0.05, h * 0.03, eyes, 1.0);
        img.ellipse(
            cx,
            cy + h * 0.17,
            w * 0.1,
            h * 0.025,
            blend(skin, [90.0, 20.0, 30.0], 0.6),
            1.0,
        );
        self.finish(img)
    }

    fn finish(&mut self, img: Canvas) -> Vec<u8> {
        let mut noise = vec![0u8; img.px.len()];
        self.rng.fill_bytes(&mut noise);
        let amp: f32 = self.rng.random_range(4.0..14.0);
        img.px
            .iter()
            .zip(&noise)
            .map(|(&v, &n)| (v + (f32::from(n) / 255.0 - 0.5) * amp).clamp(0.0, 255.0) as u8)
            .collect()
    }
}

/// One photo-like image, as [`Painter::photo`] paints it.
pub fn photo(seed: u64, index: u64, width: u32, height: u32) -> Vec<u8> {
    Painter::new(seed, "photo", index).photo(width, height, 0)
}

fn blend(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    [
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
    ]
}

struct Canvas {
    w: usize,
    h: usize,
    px: Vec<f32>,
}

impl Canvas {
    fn new(width: u32, height: u32) -> Self {
        Self {
            w: width as usize,
            h: height as usize,
            px: vec![0.0; width as usize * height as usize * 3],
        }
    }

    fn gradient(&mut self, a: [f32; 3], b: [f32; 3], angle: f32) {
        let (dx, dy) = (angle.cos(), angle.sin());
        let span = (self.w as f32).hypot(self.h as f32).max(1.0);
        for y in 0..self.h {
            for x in 0..self.w {
                let t = ((x as f32 * dx + y as f32 * dy) / span + 0.5).clamp(0.0, 1.0);
                let i = (y * self.w + x) * 3;
                self.px[i..i + 3].copy_from_slice(&blend(a, b, t));
            }
        }
    }

    fn paint(&mut self, x: usize, y: usize, c: [f32; 3], alpha: f32) {
        let i = (y * self.w + x) * 3;
        let p = [self.px[i], self.px[i + 1], self.px[i + 2]];
        self.px[i..i + 3].copy_from_slice(&blend(p, c, alpha));
    }

    /// A filled ellipse with a soft (about 1.5 px) edge.
    fn ellipse(&mut self, cx: f32, cy: f32, rx: f32, ry: f32, c: [f32; 3], opacity: f32) {
        let (rx, ry) = (rx.max(1.0), ry.max(1.0));
        let y0 = (cy - ry - 2.0).max(0.0) as usize;
        let y1 = ((cy + ry + 2.0).max(0.0) as usize).min(self.h);
        let x0 = (cx - rx - 2.0).max(0.0) as usize;
        let x1 = ((cx + rx + 2.0).max(0.0) as usize).min(self.w);
        for y in y0..y1 {
            for x in x0..x1 {
                let (u, v) = ((x as f32 - cx) / rx, (y as f32 - cy) / ry);
                let d = ((u * u + v * v).sqrt() - 1.0) * rx.min(ry);
                let a = (0.5 - d / 1.5).clamp(0.0, 1.0) * opacity;
                if a > 0.0 {
                    self.paint(x, y, c, a);
                }
            }
        }
    }

    fn rect(&mut self, x0: f32, y0: f32, x1: f32, y1: f32, c: [f32; 3], opacity: f32) {
        let ys = (y0.max(0.0) as usize).min(self.h)..(y1.max(0.0) as usize).min(self.h);
        let xs = (x0.max(0.0) as usize).min(self.w)..(x1.max(0.0) as usize).min(self.w);
        for y in ys {
            for x in xs.clone() {
                self.paint(x, y, c, opacity);
            }
        }
    }
}

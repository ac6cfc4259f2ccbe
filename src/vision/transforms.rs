//! Image transforms applied to samples on the host (`paddle.vision.transforms`).

use crate::{Error, NdArray, Result};

/// A per-sample transform of a CHW float image.
pub trait Transform: Send + Sync {
    /// The transformed image.
    fn apply(&self, image: NdArray<f32>) -> Result<NdArray<f32>>;
}

/// `(x − mean[c]) / std[c]` per channel of a CHW image (`transforms.Normalize`). One value
/// applies to every channel. The MNIST seed's `x / 255 · 2 − 1` is `Normalize([127.5], [127.5])`.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalize {
    /// Per-channel means.
    pub mean: Vec<f32>,
    /// Per-channel standard deviations.
    pub std: Vec<f32>,
}

impl Normalize {
    /// With per-channel (or single) mean and std.
    pub fn new(mean: &[f32], std: &[f32]) -> Result<Self> {
        if mean.is_empty() || mean.len() != std.len() || std.contains(&0.0) {
            return Err(Error::invalid(
                "Normalize",
                format!("mean {mean:?} and std {std:?} must have the same non-zero length, std non-zero"),
            ));
        }
        Ok(Normalize { mean: mean.to_vec(), std: std.to_vec() })
    }
}

impl Transform for Normalize {
    fn apply(&self, mut image: NdArray<f32>) -> Result<NdArray<f32>> {
        let channels = image.shape.first().copied().unwrap_or(1).max(1);
        if image.data.len() != image.shape.iter().product::<usize>() || !image.data.len().is_multiple_of(channels) {
            return Err(Error::shape(
                "Normalize",
                format!("{} values do not fill an image of shape {:?}", image.data.len(), image.shape),
            ));
        }
        if self.mean.len() != 1 && self.mean.len() != channels {
            return Err(Error::shape(
                "Normalize",
                format!("{} means for an image of shape {:?} (CHW)", self.mean.len(), image.shape),
            ));
        }
        let plane = image.data.len() / channels;
        for (c, chunk) in image.data.chunks_mut(plane.max(1)).enumerate() {
            let k = if self.mean.len() == 1 { 0 } else { c };
            let (m, s) = (self.mean[k], self.std[k]);
            for v in chunk {
                *v = (*v - m) / s;
            }
        }
        Ok(image)
    }
}

/// Transforms applied in order (`transforms.Compose`).
pub struct Compose(pub Vec<Box<dyn Transform>>);

impl Compose {
    /// The transforms, first applied first.
    pub fn new(transforms: Vec<Box<dyn Transform>>) -> Self {
        Compose(transforms)
    }
}

impl Transform for Compose {
    fn apply(&self, mut image: NdArray<f32>) -> Result<NdArray<f32>> {
        for t in &self.0 {
            image = t.apply(image)?;
        }
        Ok(image)
    }
}

/// `(channels, height, width)` of a CHW image, checked.
fn chw(op: &'static str, image: &NdArray<f32>) -> Result<(usize, usize, usize)> {
    match image.shape[..] {
        [c, h, w] if c * h * w == image.data.len() => Ok((c, h, w)),
        _ => Err(Error::shape(
            op,
            format!("expected a CHW image, got shape {:?} with {} values", image.shape, image.data.len()),
        )),
    }
}

/// Pixel values scaled from 0–255 to 0–1 (`transforms.ToTensor`; images here are already
/// CHW float arrays).
#[derive(Clone, Copy, Debug, Default)]
pub struct ToTensor;

impl Transform for ToTensor {
    fn apply(&self, mut image: NdArray<f32>) -> Result<NdArray<f32>> {
        image.data.iter_mut().for_each(|v| *v /= 255.0);
        Ok(image)
    }
}

/// Bilinear resampling to `(height, width)` with half-pixel centres (`transforms.Resize`).
#[derive(Clone, Copy, Debug)]
pub struct Resize {
    /// The output `(height, width)`.
    pub size: (usize, usize),
}

impl Transform for Resize {
    fn apply(&self, image: NdArray<f32>) -> Result<NdArray<f32>> {
        let (c, h, w) = chw("Resize", &image)?;
        let (oh, ow) = self.size;
        if oh == 0 || ow == 0 || h == 0 || w == 0 {
            return Err(Error::shape("Resize", format!("cannot resize {:?} to {:?}", image.shape, self.size)));
        }
        let coord = |o: usize, out: usize, input: usize| {
            let src = ((o as f64 + 0.5) * input as f64 / out as f64 - 0.5).clamp(0.0, (input - 1) as f64);
            let lo = src.floor() as usize;
            (lo, (lo + 1).min(input - 1), (src - lo as f64) as f32)
        };
        let mut data = Vec::with_capacity(c * oh * ow);
        for ch in 0..c {
            let plane = &image.data[ch * h * w..(ch + 1) * h * w];
            for y in 0..oh {
                let (y0, y1, fy) = coord(y, oh, h);
                for x in 0..ow {
                    let (x0, x1, fx) = coord(x, ow, w);
                    let top = plane[y0 * w + x0] * (1.0 - fx) + plane[y0 * w + x1] * fx;
                    let bottom = plane[y1 * w + x0] * (1.0 - fx) + plane[y1 * w + x1] * fx;
                    data.push(top * (1.0 - fy) + bottom * fy);
                }
            }
        }
        Ok(NdArray { data, shape: vec![c, oh, ow] })
    }
}

/// The `(height, width)` window at `(top, left)`, zero outside the image.
fn crop(
    image: &NdArray<f32>,
    (c, h, w): (usize, usize, usize),
    top: i64,
    left: i64,
    (oh, ow): (usize, usize),
) -> NdArray<f32> {
    let mut data = vec![0.0; c * oh * ow];
    for ch in 0..c {
        for y in 0..oh {
            for x in 0..ow {
                let (sy, sx) = (top + y as i64, left + x as i64);
                if (0..h as i64).contains(&sy) && (0..w as i64).contains(&sx) {
                    data[(ch * oh + y) * ow + x] = image.data[(ch * h + sy as usize) * w + sx as usize];
                }
            }
        }
    }
    NdArray { data, shape: vec![c, oh, ow] }
}

/// The central `(height, width)` window (`transforms.CenterCrop`).
#[derive(Clone, Copy, Debug)]
pub struct CenterCrop {
    /// The output `(height, width)`.
    pub size: (usize, usize),
}

impl Transform for CenterCrop {
    fn apply(&self, image: NdArray<f32>) -> Result<NdArray<f32>> {
        let dims = chw("CenterCrop", &image)?;
        let top = (dims.1 as i64 - self.size.0 as i64) / 2;
        let left = (dims.2 as i64 - self.size.1 as i64) / 2;
        Ok(crop(&image, dims, top, left, self.size))
    }
}

/// A window of `(height, width)` at a random position of the image padded by `padding`
/// zeros on each side (`transforms.RandomCrop`).
#[derive(Clone, Copy, Debug)]
pub struct RandomCrop {
    /// The output `(height, width)`.
    pub size: (usize, usize),
    /// Zeros added on every side first.
    pub padding: usize,
}

impl Transform for RandomCrop {
    fn apply(&self, image: NdArray<f32>) -> Result<NdArray<f32>> {
        let dims = chw("RandomCrop", &image)?;
        let p = self.padding as i64;
        let (rh, rw) = (dims.1 as i64 + 2 * p - self.size.0 as i64, dims.2 as i64 + 2 * p - self.size.1 as i64);
        if rh < 0 || rw < 0 {
            return Err(Error::shape(
                "RandomCrop",
                format!("{:?} is larger than the padded image {:?}", self.size, image.shape),
            ));
        }
        let u = crate::random::host_uniform(2);
        let top = (u[0] * (rh + 1) as f64) as i64 - p;
        let left = (u[1] * (rw + 1) as f64) as i64 - p;
        Ok(crop(&image, dims, top, left, self.size))
    }
}

/// Mirrors the image left–right with probability `p` (`transforms.RandomHorizontalFlip`).
#[derive(Clone, Copy, Debug)]
pub struct RandomHorizontalFlip {
    /// The flip probability (0.5 in Paddle).
    pub p: f64,
}

impl Transform for RandomHorizontalFlip {
    fn apply(&self, mut image: NdArray<f32>) -> Result<NdArray<f32>> {
        let (_, _, w) = chw("RandomHorizontalFlip", &image)?;
        if crate::random::host_uniform(1)[0] < self.p {
            image.data.chunks_mut(w.max(1)).for_each(|row| row.reverse());
        }
        Ok(image)
    }
}

/// Rotates by an angle drawn uniformly from `[-degrees, degrees]` about the centre, nearest
/// sampling, zeros where nothing maps (`transforms.RandomRotation`; positive is
/// counter-clockwise).
#[derive(Clone, Copy, Debug)]
pub struct RandomRotation {
    /// The largest rotation in degrees.
    pub degrees: f64,
}

impl Transform for RandomRotation {
    fn apply(&self, image: NdArray<f32>) -> Result<NdArray<f32>> {
        let (c, h, w) = chw("RandomRotation", &image)?;
        let angle = (crate::random::host_uniform(1)[0] * 2.0 - 1.0) * self.degrees.to_radians();
        let (sin, cos) = angle.sin_cos();
        let (cy, cx) = ((h as f64 - 1.0) / 2.0, (w as f64 - 1.0) / 2.0);
        let mut data = vec![0.0; image.data.len()];
        for y in 0..h {
            for x in 0..w {
                // The source of output pixel (y, x): rotate back by the angle (y grows down).
                let (dy, dx) = (y as f64 - cy, x as f64 - cx);
                let sx = (cos * dx - sin * dy + cx).round();
                let sy = (sin * dx + cos * dy + cy).round();
                if (0.0..w as f64).contains(&sx) && (0.0..h as f64).contains(&sy) {
                    for ch in 0..c {
                        data[(ch * h + y) * w + x] = image.data[(ch * h + sy as usize) * w + sx as usize];
                    }
                }
            }
        }
        Ok(NdArray { data, shape: image.shape })
    }
}

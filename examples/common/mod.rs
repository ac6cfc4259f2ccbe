//! Shared by the examples: `--place cpu|gpu|gpu:N` on the command line.
#![allow(dead_code)]

pub mod classifier;

use dygraph::{Place, Result};

/// The place named by `--place`, else the default place (a hardware GPU if present, else the
/// CPU; `DYGRAPH_DEVICE` overrides).
pub fn place_from_args() -> Result<Place> {
    let args: Vec<String> = std::env::args().collect();
    for (i, a) in args.iter().enumerate() {
        let value =
            if a == "--place" { args.get(i + 1).cloned() } else { a.strip_prefix("--place=").map(str::to_string) };
        if let Some(v) = value {
            let place: Place = v.parse()?;
            dygraph::set_place(place)?;
            return Ok(place);
        }
    }
    dygraph::current_place()
}

/// A flag's value: `--name value` or `--name=value`.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let flag = format!("--{name}");
    args.iter().enumerate().find_map(|(i, a)| {
        if *a == flag { args.get(i + 1).cloned() } else { a.strip_prefix(&format!("{flag}=")).map(str::to_string) }
    })
}

/// The seed's `load_image`: any image file, converted to 28×28 grayscale, scaled to [−1, 1]
/// (light backgrounds are inverted to MNIST's white-on-black).
pub fn load_image(path: &std::path::Path, place: Place) -> Result<dygraph::Tensor> {
    let bytes =
        std::fs::read(path).map_err(|e| dygraph::Error::invalid("load_image", format!("{}: {e}", path.display())))?;
    decode_image(&bytes, place).map_err(|e| dygraph::Error::invalid("load_image", format!("{}: {e}", path.display())))
}

/// Decodes a PNG into the `[1, 1, 28, 28]` input `load_image` gives. Images over 4096×4096 or
/// needing more than 64 MiB to decode are refused before any pixel is allocated.
pub fn decode_image(bytes: &[u8], place: Place) -> Result<dygraph::Tensor> {
    let bad = |e: image::ImageError| dygraph::Error::invalid("load_image", e.to_string());
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| dygraph::Error::invalid("load_image", e.to_string()))?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(4096);
    limits.max_image_height = Some(4096);
    limits.max_alloc = Some(64 << 20);
    reader.limits(limits);
    let img = reader.decode().map_err(bad)?;
    let gray = image::imageops::resize(&img.to_luma8(), 28, 28, image::imageops::FilterType::Lanczos3);
    let mut px: Vec<f32> = gray.pixels().map(|p| p.0[0] as f32).collect();
    if px.iter().sum::<f32>() / px.len() as f32 > 127.5 {
        px.iter_mut().for_each(|v| *v = 255.0 - *v);
    }
    let px: Vec<f32> = px.into_iter().map(|v| v / 255.0 * 2.0 - 1.0).collect();
    dygraph::Tensor::from_vec_on(px, [1, 1, 28, 28], place)
}

/// The seed's input scaling, `x / 255 · 2 − 1`.
pub fn mnist_normalize() -> Result<dygraph::vision::transforms::Normalize> {
    dygraph::vision::transforms::Normalize::new(&[127.5], &[127.5])
}

/// Every step's loss, kept on the device and read back together every 100 steps (one
/// readback per 100 steps instead of a sync per step).
#[derive(Default)]
pub struct LossLog {
    pending: Vec<dygraph::Tensor>,
    /// The losses read back so far, in order.
    pub losses: Vec<f32>,
}

impl LossLog {
    /// Records step `batch_id`'s loss (`last`: the epoch's last step); on every 100th step,
    /// returns its value to print.
    pub fn push(&mut self, loss: dygraph::Tensor, batch_id: usize, last: bool) -> Result<Option<f32>> {
        self.pending.push(loss);
        if !batch_id.is_multiple_of(100) && !last {
            return Ok(None);
        }
        let values = dygraph::stack(&self.pending, 0)?.to_vec::<f32>()?;
        self.pending.clear();
        self.losses.extend(&values);
        Ok(batch_id.is_multiple_of(100).then(|| values[values.len() - 1]))
    }
}

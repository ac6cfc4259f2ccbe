//! Training the MNIST network from scratch in the page: Adam 1e-3 on shuffled batches of a
//! slice of real MNIST, one step per call so the page stays responsive between steps, in
//! float32 or under float16 mixed precision (`auto_cast` O1 and a `GradScaler`), which the
//! page picks where the browser's WebGPU has `shader-f16`.

use dygraph::amp::{self, AutoCast, GradScaler};
use dygraph::io::{Batches, DataLoader, Dataset};
use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::vision::datasets::Mnist;
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::vision::transforms::Normalize;
use dygraph::{self as paddle, Error, Place, Result, Tensor};

/// A network, its optimizer and its data.
pub struct Trainer {
    model: MnistNet,
    optimizer: Adam,
    loader: DataLoader<Mnist>,
    epoch: Option<Batches<Mnist>>,
    test: Mnist,
    place: Place,
    steps: usize,
    autocast: Option<AutoCast>,
    scaler: GradScaler,
    precision: String,
}

/// The precision `asked` (`"auto"`, `"float32"` or `"float16"`) resolves to on `place`: the
/// autocast (none for float32) and the words the page shows. `"auto"` is float16 where the
/// place is WebGPU with `shader-f16` (float16 kernels run natively), else float32; `"float16"`
/// is float16 anywhere (computed through float32 where the device has no `shader-f16`).
fn precision(asked: &str, place: Place) -> Result<(Option<AutoCast>, String)> {
    let shader_f16 = match place {
        Place::Gpu(i) => paddle::gpu_info(i)?.shader_f16,
        Place::Cpu => false,
    };
    let native = if shader_f16 { "float16 kernels, shader-f16" } else { "through float32: no shader-f16 here" };
    let mixed =
        || (Some(amp::auto_cast(true).level("O1").dtype("float16")), format!("float16 mixed precision ({native})"));
    Ok(match asked {
        "float16" => mixed(),
        "auto" if shader_f16 => mixed(),
        "auto" if place.is_gpu() => (None, "float32 (this WebGPU has no shader-f16)".to_string()),
        "auto" | "float32" => (None, "float32".to_string()),
        other => {
            return Err(Error::invalid(
                "Trainer",
                format!("unknown precision {other:?}; expected \"auto\", \"float32\" or \"float16\""),
            ));
        }
    })
}

/// The tutorial's scaling, `x / 255 · 2 − 1`.
fn normalize() -> Result<Normalize> {
    Normalize::new(&[127.5], &[127.5])
}

impl Trainer {
    /// A fresh network on `place` (weights drawn from `seed`) over `train`, evaluated on `test`,
    /// trained in precision `asked` (see [`precision`]).
    pub fn new(train: Mnist, test: Mnist, batch_size: usize, seed: u64, place: Place, asked: &str) -> Result<Self> {
        if train.len() < batch_size || batch_size == 0 {
            return Err(Error::invalid(
                "Trainer",
                format!("{} training images cannot fill a batch of {batch_size}", train.len()),
            ));
        }
        let (autocast, precision) = precision(asked, place)?;
        let scaler = GradScaler::new().enable(autocast.is_some());
        paddle::seed(seed);
        let model = paddle::guard(place, MnistNet::new)?;
        let optimizer = Adam::new(1e-3, model.parameters());
        let loader =
            DataLoader::new(train.with_transform(normalize()?), batch_size).shuffle(true).drop_last(true).place(place);
        Ok(Trainer { model, optimizer, loader, epoch: None, test, place, steps: 0, autocast, scaler, precision })
    }

    /// One optimisation step on the next batch (a new shuffled epoch when one runs out);
    /// returns the batch's loss, still on the trainer's place.
    pub fn step(&mut self) -> Result<Tensor> {
        let batch = match self.epoch.as_mut().and_then(|e| e.next()) {
            Some(b) => b,
            None => self
                .epoch
                .insert(self.loader.iter()?)
                .next()
                .ok_or_else(|| Error::invalid("Trainer", "the training set yields no batches"))?,
        };
        let (img, label) = batch?;
        let loss = {
            let _scope = self.autocast.as_ref().map(|a| a.enter()).transpose()?;
            mnist_loss(&self.model.forward(&img)?, &label)?
        };
        let scaled = self.scaler.scale(&loss)?;
        scaled.backward()?;
        self.scaler.minimize(&mut self.optimizer, &scaled)?;
        self.optimizer.clear_grad();
        self.steps += 1;
        loss.detach().cast(paddle::DType::Float32)
    }

    /// What the trainer computes in, as the page shows it.
    pub fn precision(&self) -> &str {
        &self.precision
    }

    /// Steps taken so far.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Test images.
    pub fn test_len(&self) -> usize {
        self.test.len()
    }

    /// The predicted classes of test images `start..end` (int64, on the trainer's place) and
    /// their true labels.
    pub fn predict_test(&self, start: usize, end: usize) -> Result<(Tensor, Vec<i64>)> {
        let end = end.min(self.test.len());
        let (rows, cols) = self.test.image_size();
        let pixels: Vec<f32> =
            (start..end).flat_map(|i| self.test.image_bytes(i).iter().map(|&b| b as f32 / 127.5 - 1.0)).collect();
        let x = Tensor::from_vec_on(pixels, [end - start, 1, rows, cols], self.place)?;
        let pred = paddle::no_grad(|| self.model.forward(&x)?.argmax(Some(1), false))?;
        Ok((pred, (start..end).map(|i| self.test.label(i) as i64).collect()))
    }
}

//! CIFAR-10 (`paddle.vision.datasets.Cifar10`) from the file Paddle reads,
//! `cifar-10-python.tar.gz`: a gzipped tar of pickled batches (`data_batch_1..5`,
//! `test_batch`), each a dict holding `data` (a `[10000, 3072]` uint8 numpy array, the red,
//! green and blue planes of each 32×32 image) and `labels` (a list of ints). The batches are
//! read with the crate's restricted pickle reader, so the file cannot run code.
//!
//! Samples are `[3, 32, 32]` float arrays (CHW, values 0–255 until a transform rescales
//! them), as this crate's transforms take images; Paddle hands its transforms HWC arrays.
//! Batches are taken in the archive's order, as Paddle takes them.

use std::io::Read;
use std::path::Path;

use super::datasets::Mode;
use super::transforms::Transform;
use crate::backend::cpu::CpuData;
use crate::io::Dataset;
use crate::io::peer_weights::numpy_array;
use crate::io::pickle::Pickle;
use crate::{Error, NdArray, Result};

const OP: &str = "Cifar10";
const PIXELS: usize = 3 * 32 * 32;
/// No batch of the real file is larger than 31 MiB; a member past this is refused before
/// it is read into memory.
const MAX_MEMBER_BYTES: u64 = 1 << 28;

/// The ten classes of CIFAR-10: 32×32 colour images with labels 0–9.
pub struct Cifar10 {
    images: Vec<u8>,
    labels: Vec<u8>,
    transform: Option<Box<dyn Transform>>,
}

impl std::fmt::Debug for Cifar10 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cifar10")
            .field("len", &self.labels.len())
            .field("transform", &self.transform.is_some())
            .finish()
    }
}

impl Cifar10 {
    /// The `mode` split of `data_file` (`cifar-10-python.tar.gz`; Paddle downloads it to
    /// `~/.cache/paddle/dataset/cifar/`, this crate reads local files).
    pub fn new(data_file: &Path, mode: Mode) -> Result<Self> {
        let bytes = std::fs::read(data_file)
            .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("Cifar10 {}: {e}", data_file.display()))))?;
        Self::from_tar_gz_bytes(&bytes, mode).map_err(|e| match e {
            Error::InvalidArgument { op, msg } => {
                Error::InvalidArgument { op, msg: format!("{}: {msg}", data_file.display()) }
            }
            other => other,
        })
    }

    /// The `mode` split from the bytes of `cifar-10-python.tar.gz` (in the browser, what
    /// `fetch` returned).
    pub fn from_tar_gz_bytes(bytes: &[u8], mode: Mode) -> Result<Self> {
        let wanted = match mode {
            Mode::Train => "data_batch",
            Mode::Test => "test_batch",
        };
        let bad = |m: String| Error::invalid(OP, m);
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
        let (mut images, mut labels) = (Vec::new(), Vec::new());
        let mut batches = 0;
        for entry in archive.entries().map_err(|e| bad(format!("not a tar.gz archive: {e}")))? {
            let entry = entry.map_err(|e| bad(format!("a damaged archive: {e}")))?;
            let name = entry.path().map_err(|e| bad(format!("a member name: {e}")))?.display().to_string();
            if !name.contains(wanted) {
                continue;
            }
            if entry.size() > MAX_MEMBER_BYTES {
                return Err(bad(format!("{name} claims {} bytes", entry.size())));
            }
            let mut member = Vec::new();
            entry.take(MAX_MEMBER_BYTES).read_to_end(&mut member).map_err(|e| bad(format!("{name}: {e}")))?;
            read_batch(&member, &mut images, &mut labels).map_err(|e| bad(format!("{name}: {e}")))?;
            batches += 1;
        }
        // Reading to the end checks the gzip trailer (CRC and length) of what tar left unread.
        let mut rest = archive.into_inner().take(MAX_MEMBER_BYTES);
        std::io::copy(&mut rest, &mut std::io::sink()).map_err(|e| bad(format!("a damaged archive: {e}")))?;
        if batches == 0 {
            return Err(bad(format!("the archive has no {wanted} member")));
        }
        Ok(Cifar10 { images, labels, transform: None })
    }

    /// Applies `transform` to every image sample.
    pub fn with_transform(mut self, transform: impl Transform + 'static) -> Self {
        self.transform = Some(Box::new(transform));
        self
    }

    /// Label `i`.
    pub fn label(&self, i: usize) -> u8 {
        self.labels[i]
    }
}

/// Appends one pickled batch's images and labels.
fn read_batch(member: &[u8], images: &mut Vec<u8>, labels: &mut Vec<u8>) -> std::result::Result<(), String> {
    let pk = Pickle::parse(member)?;
    let data = pk.dict_get(pk.root, "data").ok_or("no `data` entry")?;
    let label_list = pk.dict_get(pk.root, "labels").ok_or("no `labels` entry")?;
    let (array, shape) = numpy_array(&pk, data)?;
    let CpuData::I32(values) = array else {
        return Err("`data` is not a uint8 array".into());
    };
    if shape.len() != 2 || shape[1] != PIXELS {
        return Err(format!("`data` has shape {shape:?}, expected [N, {PIXELS}]"));
    }
    let items = pk.items(label_list).ok_or("`labels` is not a list")?;
    if items.len() != shape[0] {
        return Err(format!("{} images but {} labels", shape[0], items.len()));
    }
    for &l in items {
        match pk.int(l) {
            Some(v @ 0..=9) => labels.push(v as u8),
            _ => return Err(format!("label {} is not a class 0–9", pk.describe(l))),
        }
    }
    images.extend(values.into_iter().map(|v| v as u8));
    Ok(())
}

impl Dataset for Cifar10 {
    type Sample = (NdArray<f32>, i64);

    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get(&self, index: usize) -> Result<Self::Sample> {
        if index >= self.len() {
            return Err(Error::invalid(OP, format!("index {index} out of range for {} samples", self.len())));
        }
        let image = NdArray {
            data: self.images[index * PIXELS..(index + 1) * PIXELS].iter().map(|&b| b as f32).collect(),
            shape: vec![3, 32, 32],
        };
        let image = match &self.transform {
            Some(t) => t.apply(image)?,
            None => image,
        };
        Ok((image, self.labels[index] as i64))
    }
}

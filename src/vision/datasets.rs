//! MNIST (`paddle.vision.datasets.MNIST`) from the four IDX files, raw or gzipped;
//! Fashion-MNIST in the same format; CIFAR-10 (in `cifar.rs`).

use std::io::Read;
use std::path::{Path, PathBuf};

pub use super::cifar::Cifar10;
use super::transforms::Transform;
use crate::io::Dataset;
use crate::{Error, NdArray, Result};

/// Which split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The 60 000 training images.
    Train,
    /// The 10 000 test images.
    Test,
}

impl Mode {
    fn prefix(self) -> &'static str {
        match self {
            Mode::Train => "train",
            Mode::Test => "t10k",
        }
    }
}

/// The MNIST digits: 28×28 grayscale images (samples `[1, 28, 28]`, values 0–255 unless a
/// transform rescales them) and labels 0–9.
pub struct Mnist {
    images: Vec<u8>,
    labels: Vec<u8>,
    rows: usize,
    cols: usize,
    transform: Option<Box<dyn Transform>>,
}

impl std::fmt::Debug for Mnist {
    /// A summary: the pixel and label bytes are far too many to print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mnist")
            .field("len", &self.labels.len())
            .field("image_size", &(self.rows, self.cols))
            .field("transform", &self.transform.is_some())
            .finish()
    }
}

const IMAGE_MAGIC: u32 = 0x0000_0803;
const LABEL_MAGIC: u32 = 0x0000_0801;

/// Directories searched when none is given: `DYGRAPH_DATA`, `../shared/data/mnist` (from the
/// working directory, then beside the dygraph checkout, so examples find the data wherever
/// they are run from), `data/mnist`.
fn candidates(dir: Option<&Path>) -> Vec<PathBuf> {
    if let Some(d) = dir {
        return vec![d.to_path_buf()];
    }
    let mut v = Vec::new();
    if let Ok(d) = std::env::var("DYGRAPH_DATA") {
        let d = PathBuf::from(d);
        v.push(d.join("mnist"));
        v.push(d);
    }
    v.push(PathBuf::from("../shared/data/mnist"));
    #[cfg(not(target_arch = "wasm32"))]
    v.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/mnist"));
    v.push(PathBuf::from("data/mnist"));
    v
}

fn file_in(dir: &Path, name: &str) -> Option<PathBuf> {
    [dir.join(format!("{name}.gz")), dir.join(name)].into_iter().find(|p| p.is_file())
}

fn read_idx(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))))
}

/// The IDX payload of `raw`, gunzipped when it is named `*.gz` or starts with gzip's magic bytes.
fn gunzip_if_needed(name: &str, raw: &[u8]) -> Result<Vec<u8>> {
    if !raw.starts_with(&[0x1f, 0x8b]) && !name.ends_with(".gz") {
        return Ok(raw.to_vec());
    }
    // A bound on the decompressed size: a corrupt or hostile stream cannot exhaust memory
    // (the largest MNIST file is 47 MB).
    const MAX_BYTES: u64 = 1 << 30;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(raw)
        .take(MAX_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::invalid("MNIST", format!("{name}: not a valid gzip file ({e})")))?;
    if out.len() as u64 > MAX_BYTES {
        return Err(Error::invalid("MNIST", format!("{name}: decompresses to more than {MAX_BYTES} bytes")));
    }
    Ok(out)
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses an IDX file of `dims` dimensions with `magic`; returns the sizes and the payload.
fn parse_idx(name: &str, bytes: &[u8], magic: u32, dims: usize) -> Result<(Vec<usize>, Vec<u8>)> {
    let bad = |msg: String| Error::invalid("MNIST", format!("{name}: {msg}"));
    let header = 4 + 4 * dims;
    if bytes.len() < header {
        return Err(bad(format!("truncated header ({} bytes)", bytes.len())));
    }
    let m = be32(bytes, 0);
    if m != magic {
        return Err(bad(format!("bad magic number 0x{m:08x} (expected 0x{magic:08x})")));
    }
    let sizes: Vec<usize> = (0..dims).map(|i| be32(bytes, 4 + 4 * i) as usize).collect();
    let n = sizes
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad(format!("header sizes {sizes:?} overflow")))?;
    if bytes.len() - header != n {
        return Err(bad(format!("holds {} data bytes but its header {sizes:?} promises {n}", bytes.len() - header)));
    }
    Ok((sizes, bytes[header..].to_vec()))
}

impl Mnist {
    /// Loads a split from `dir` (else `DYGRAPH_DATA`, `../shared/data/mnist` from the working
    /// directory or beside the dygraph checkout, `data/mnist`).
    pub fn new(dir: Option<&Path>, mode: Mode) -> Result<Self> {
        let prefix = mode.prefix();
        let (img_name, lbl_name) = (format!("{prefix}-images-idx3-ubyte"), format!("{prefix}-labels-idx1-ubyte"));
        let searched = candidates(dir);
        let found = searched.iter().find_map(|d| Some((file_in(d, &img_name)?, file_in(d, &lbl_name)?)));
        let Some((img_path, lbl_path)) = found else {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "MNIST {mode:?} files not found: looked for {img_name}[.gz] and {lbl_name}[.gz] in {}",
                    searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                ),
            )));
        };
        let (img_name, lbl_name) = (img_path.display().to_string(), lbl_path.display().to_string());
        Self::parse(&img_name, &read_idx(&img_path)?, &lbl_name, &read_idx(&lbl_path)?)
    }

    /// A split from the bytes of its two IDX files, raw or gzipped (in the browser, what
    /// `fetch` returned): `images` of `[N, rows, cols]` bytes and `labels` of `N` digits.
    pub fn from_idx_bytes(images: &[u8], labels: &[u8]) -> Result<Self> {
        Self::parse("images", images, "labels", labels)
    }

    fn parse(img_name: &str, img_raw: &[u8], lbl_name: &str, lbl_raw: &[u8]) -> Result<Self> {
        let (isz, images) = parse_idx(img_name, &gunzip_if_needed(img_name, img_raw)?, IMAGE_MAGIC, 3)?;
        let (lsz, labels) = parse_idx(lbl_name, &gunzip_if_needed(lbl_name, lbl_raw)?, LABEL_MAGIC, 1)?;
        if isz[0] != lsz[0] {
            return Err(Error::invalid(
                "MNIST",
                format!("{img_name} holds {} images but {lbl_name} holds {} labels", isz[0], lsz[0]),
            ));
        }
        if let Some(bad) = labels.iter().find(|&&l| l > 9) {
            return Err(Error::invalid("MNIST", format!("{lbl_name}: label {bad} is not a digit")));
        }
        Ok(Mnist { images, labels, rows: isz[1], cols: isz[2], transform: None })
    }

    /// Applies `transform` to every image sample.
    pub fn with_transform(mut self, transform: impl Transform + 'static) -> Self {
        self.transform = Some(Box::new(transform));
        self
    }

    /// Image `i` as raw bytes (row-major, `rows × cols`).
    pub fn image_bytes(&self, i: usize) -> &[u8] {
        let n = self.rows * self.cols;
        &self.images[i * n..(i + 1) * n]
    }

    /// Label `i`.
    pub fn label(&self, i: usize) -> u8 {
        self.labels[i]
    }

    /// (rows, cols) of every image.
    pub fn image_size(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
}

impl Dataset for Mnist {
    type Sample = (NdArray<f32>, i64);

    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get(&self, index: usize) -> Result<Self::Sample> {
        if index >= self.len() {
            return Err(Error::invalid("MNIST", format!("index {index} out of range for {} samples", self.len())));
        }
        let image = NdArray {
            data: self.image_bytes(index).iter().map(|&b| b as f32).collect(),
            shape: vec![1, self.rows, self.cols],
        };
        let image = match &self.transform {
            Some(t) => t.apply(image)?,
            None => image,
        };
        Ok((image, self.labels[index] as i64))
    }
}

/// Fashion-MNIST (`paddle.vision.datasets.FashionMNIST`): the same IDX files (names,
/// formats, 28×28 images of ten classes) as MNIST, so it loads as an [`Mnist`] dataset from
/// `dir` (there is no default location; Paddle downloads it, this crate reads local files).
pub struct FashionMnist;

impl FashionMnist {
    /// The `mode` split from `dir` (`train-images-idx3-ubyte[.gz]` and its labels, or the
    /// `t10k-` pair).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(dir: &Path, mode: Mode) -> Result<Mnist> {
        Mnist::new(Some(dir), mode)
    }
}

//! MNIST loading from the real files (gzipped and raw), corrupted copies made here, the
//! DataLoader (batching, shuffling with the global seed, drop_last, prefetch, worker threads),
//! ComposeDataset and Normalize.

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use dygraph::io::{ComposeDataset, DataLoader, Dataset};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::transforms::{Normalize, Transform};
use dygraph::{DType, NdArray, Place};

fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/mnist")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dygraph-data-{}-{}-{name}", std::process::id(), common::run_seed()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn gunzip(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn real_mnist_files_load() {
    let _generator = common::generator_lock();
    let train = Mnist::new(Some(&shared()), Mode::Train).unwrap();
    let test = Mnist::new(Some(&shared()), Mode::Test).unwrap();
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    assert_eq!(train.image_size(), (28, 28));
    // The well-known first labels.
    assert_eq!((0..5).map(|i| train.label(i)).collect::<Vec<_>>(), vec![5, 0, 4, 1, 9]);
    assert_eq!((0..5).map(|i| test.label(i)).collect::<Vec<_>>(), vec![7, 2, 1, 0, 4]);
    let (img, label) = train.get(0).unwrap();
    assert_eq!((img.shape.clone(), label), (vec![1, 28, 28], 5));
    assert!(img.data.iter().all(|&v| (0.0..=255.0).contains(&v)) && img.data.contains(&255.0));
    let mut counts = [0usize; 10];
    for i in 0..test.len() {
        counts[test.label(i) as usize] += 1;
    }
    assert_eq!(counts.iter().sum::<usize>(), 10_000);
    assert!(counts.iter().all(|&c| c > 850), "{counts:?}");
}

#[test]
fn raw_idx_files_load_like_gzipped_ones() {
    let _generator = common::generator_lock();
    let dir = tmpdir("raw");
    for name in ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"] {
        std::fs::write(dir.join(name), gunzip(&shared().join(format!("{name}.gz")))).unwrap();
    }
    let raw = Mnist::new(Some(&dir), Mode::Test).unwrap();
    let gz = Mnist::new(Some(&shared()), Mode::Test).unwrap();
    assert_eq!(raw.len(), gz.len());
    assert_eq!(raw.image_bytes(123), gz.image_bytes(123));
    assert_eq!(raw.label(9999), gz.label(9999));
}

fn write_pair(dir: &Path, images: &[u8], labels: &[u8]) {
    std::fs::write(dir.join("t10k-images-idx3-ubyte"), images).unwrap();
    std::fs::write(dir.join("t10k-labels-idx1-ubyte"), labels).unwrap();
}

#[test]
fn a_directory_without_the_files_says_where_it_looked_and_what_it_expects() {
    let _generator = common::generator_lock();
    let dir = tmpdir("empty");
    let msg = Mnist::new(Some(&dir), Mode::Test).unwrap_err().to_string();
    assert!(msg.contains(&dir.display().to_string()), "{msg}");
    assert!(msg.contains("t10k-images-idx3-ubyte") && msg.contains("t10k-labels-idx1-ubyte"), "{msg}");
    // Without a directory the search starts at DYGRAPH_DATA, then finds the shared data
    // beside the checkout even when the working directory is elsewhere.
    assert_eq!(Mnist::new(None, Mode::Test).unwrap().len(), 10_000);
}

#[test]
fn idx_bytes_load_like_files_gzipped_or_raw() {
    let _generator = common::generator_lock();
    // What the browser demo does with fetched files.
    let gz_images = std::fs::read(shared().join("t10k-images-idx3-ubyte.gz")).unwrap();
    let gz_labels = std::fs::read(shared().join("t10k-labels-idx1-ubyte.gz")).unwrap();
    let from_gz = Mnist::from_idx_bytes(&gz_images, &gz_labels).unwrap();
    let images = gunzip(&shared().join("t10k-images-idx3-ubyte.gz"));
    let labels = gunzip(&shared().join("t10k-labels-idx1-ubyte.gz"));
    let from_raw = Mnist::from_idx_bytes(&images, &labels).unwrap();
    let from_file = Mnist::new(Some(&shared()), Mode::Test).unwrap();
    assert_eq!((from_gz.len(), from_raw.len()), (10_000, 10_000));
    for i in [0, 4321, 9999] {
        assert_eq!(from_gz.image_bytes(i), from_file.image_bytes(i));
        assert_eq!(from_raw.image_bytes(i), from_file.image_bytes(i));
        assert_eq!((from_gz.label(i), from_raw.label(i)), (from_file.label(i), from_file.label(i)));
    }
    // Swapped arguments name what is wrong.
    let e = Mnist::from_idx_bytes(&labels, &images).expect_err("swapped files").to_string();
    assert!(e.contains("images") && e.contains("bad magic"), "{e}");
}

#[test]
fn corrupted_files_are_clear_errors() {
    let _generator = common::generator_lock();
    let images = gunzip(&shared().join("t10k-images-idx3-ubyte.gz"));
    let labels = gunzip(&shared().join("t10k-labels-idx1-ubyte.gz"));
    let msg = |dir: &Path| Mnist::new(Some(dir), Mode::Test).expect_err("must fail").to_string();

    let d = tmpdir("magic");
    let mut bad = images.clone();
    bad[3] = 0x01;
    write_pair(&d, &bad, &labels);
    let e = msg(&d);
    assert!(e.contains("bad magic") && e.contains("t10k-images"), "{e}");

    let d = tmpdir("trunc");
    write_pair(&d, &images[..images.len() - 100], &labels);
    let e = msg(&d);
    assert!(e.contains("promises"), "{e}");

    let d = tmpdir("count");
    let mut short = labels[..8 + 9000].to_vec();
    short[4..8].copy_from_slice(&9000u32.to_be_bytes());
    write_pair(&d, &images, &short);
    let e = msg(&d);
    assert!(e.contains("10000 images") && e.contains("9000 labels"), "{e}");

    let d = tmpdir("gzip");
    std::fs::write(d.join("t10k-images-idx3-ubyte.gz"), b"not gzip at all").unwrap();
    std::fs::write(d.join("t10k-labels-idx1-ubyte"), &labels).unwrap();
    assert!(msg(&d).contains("gzip"));

    let d = tmpdir("empty");
    let e = msg(&d);
    assert!(e.contains("t10k-images-idx3-ubyte[.gz]") && e.contains(&d.display().to_string()), "{e}");
}

/// A tiny in-memory dataset: sample i is an image filled with i, label i.
struct Counting(usize);

impl Dataset for Counting {
    type Sample = (NdArray<f32>, i64);
    fn len(&self) -> usize {
        self.0
    }
    fn get(&self, i: usize) -> dygraph::Result<Self::Sample> {
        Ok((NdArray { data: vec![i as f32; 4], shape: vec![1, 2, 2] }, i as i64))
    }
}

fn labels_of(loader: &DataLoader<Counting>) -> Vec<Vec<i64>> {
    loader.iter().unwrap().map(|b| b.unwrap().1.to_vec::<i64>().unwrap()).collect()
}

#[test]
fn loader_batches_in_order_and_drops_the_last_when_asked() {
    let _generator = common::generator_lock();
    let l = DataLoader::new(Counting(10), 4).place(Place::Cpu);
    assert_eq!(l.len(), 3);
    let batches: Vec<_> = l.iter().unwrap().map(|b| b.unwrap()).collect();
    assert_eq!(batches[0].0.shape(), &[4, 1, 2, 2]);
    assert_eq!(batches[0].1.shape(), &[4, 1]);
    assert_eq!(batches[0].1.dtype(), DType::Int64);
    assert_eq!(batches[2].1.to_vec::<i64>().unwrap(), vec![8, 9]);
    assert_eq!(common::values(&batches[1].0)[..4], [4.0; 4]);
    let l = DataLoader::new(Counting(10), 4).drop_last(true).prefetch(0).place(Place::Cpu);
    assert_eq!(labels_of(&l), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    if let Some(gpu) = common::gpu_or_skip() {
        let g: Vec<_> = DataLoader::new(Counting(6), 3).place(gpu).iter().unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(g[1].0.place(), gpu);
        assert_eq!(g[1].1.to_vec::<i64>().unwrap(), vec![3, 4, 5]);
    }
}

/// Sample `i` takes longer the smaller `i % 4` is, so that with several workers later
/// batches are ready first and the loader has to put them back in order.
struct Uneven(usize);

impl Dataset for Uneven {
    type Sample = (NdArray<f32>, i64);
    fn len(&self) -> usize {
        self.0
    }
    fn get(&self, i: usize) -> dygraph::Result<Self::Sample> {
        std::thread::sleep(std::time::Duration::from_millis(((4 - i % 4) * 2) as u64));
        if i == 1000 {
            return Err(dygraph::Error::invalid("Uneven", "sample 1000 is unreadable"));
        }
        Ok((NdArray { data: vec![i as f32; 2], shape: vec![2] }, i as i64))
    }
}

#[test]
fn worker_threads_keep_batch_order_and_pass_errors_through() {
    let _g = common::generator_lock();
    for workers in [1, 3, 4, 9] {
        let l = DataLoader::new(Uneven(22), 2).num_workers(workers).place(Place::Cpu);
        let got: Vec<Vec<i64>> = l.iter().unwrap().map(|b| b.unwrap().1.to_vec::<i64>().unwrap()).collect();
        let want: Vec<Vec<i64>> = (0..11).map(|b| vec![2 * b, 2 * b + 1]).collect();
        assert_eq!(got, want, "{workers} workers");
        // Shuffled, several workers give the batches of the single-threaded loader.
        dygraph::seed(5);
        let one: Vec<_> = DataLoader::new(Uneven(22), 3)
            .shuffle(true)
            .prefetch(0)
            .place(Place::Cpu)
            .iter()
            .unwrap()
            .map(|b| b.unwrap().1.to_vec::<i64>().unwrap())
            .collect();
        dygraph::seed(5);
        let many: Vec<_> = DataLoader::new(Uneven(22), 3)
            .shuffle(true)
            .num_workers(workers)
            .place(Place::Cpu)
            .iter()
            .unwrap()
            .map(|b| b.unwrap().1.to_vec::<i64>().unwrap())
            .collect();
        assert_eq!(one, many, "{workers} workers, shuffled");
    }
    let l = DataLoader::new(Uneven(1004), 4).num_workers(3).place(Place::Cpu);
    let results: Vec<_> = l.iter().unwrap().collect();
    assert_eq!(results.len(), 251);
    let err = results[250].as_ref().map(|_| ()).unwrap_err().to_string();
    assert!(err.contains("sample 1000"), "{err}");
    assert!(results[..250].iter().all(|r| r.is_ok()));
    // Dropping an epoch half-way stops the workers without hanging.
    let mut it = DataLoader::new(Uneven(400), 2).num_workers(4).place(Place::Cpu).iter().unwrap();
    assert!(it.next().unwrap().is_ok());
    drop(it);
}

#[test]
fn compose_dataset_pairs_samples_and_batches() {
    let _generator = common::generator_lock();
    let both = ComposeDataset::new(Counting(5), Uneven(5)).unwrap();
    assert_eq!(both.len(), 5);
    let ((img, label), (other, other_label)) = both.get(3).unwrap();
    assert_eq!((img.data[0], label, other.data, other_label), (3.0, 3, vec![3.0, 3.0], 3));
    let batches: Vec<_> = DataLoader::new(both, 2).place(Place::Cpu).iter().unwrap().map(|b| b.unwrap()).collect();
    let ((x, y), (x2, y2)) = &batches[1];
    assert_eq!((x.shape(), x2.shape()), (&[2, 1, 2, 2][..], &[2, 2][..]));
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![2, 3]);
    assert_eq!(y2.to_vec::<i64>().unwrap(), vec![2, 3]);
    let err = ComposeDataset::new(Counting(5), Uneven(6)).err().unwrap().to_string();
    assert!(err.contains("5 and 6"), "{err}");
}

#[test]
fn shuffling_follows_the_global_seed() {
    let _g = common::generator_lock();
    let l = DataLoader::new(Counting(50), 7).shuffle(true).place(Place::Cpu);
    dygraph::seed(3);
    let a = labels_of(&l);
    let b = labels_of(&l);
    dygraph::seed(3);
    let c = labels_of(&l);
    assert_eq!(a, c, "same seed, same order");
    assert_ne!(a, b, "a fresh order every epoch");
    let mut all: Vec<i64> = a.concat();
    all.sort();
    assert_eq!(all, (0..50).collect::<Vec<_>>(), "each sample once per epoch");
}

#[test]
fn normalize_matches_the_seed_scaling() {
    let _generator = common::generator_lock();
    let n = Normalize::new(&[127.5], &[127.5]).unwrap();
    let img = NdArray { data: vec![0.0, 127.5, 255.0, 51.0], shape: vec![1, 2, 2] };
    let out = n.apply(img).unwrap();
    for (o, x) in out.data.iter().zip([0.0f32, 127.5, 255.0, 51.0]) {
        assert!((o - (x / 255.0 * 2.0 - 1.0)).abs() < 1e-6);
    }
    let rgb = Normalize::new(&[1.0, 2.0, 3.0], &[1.0, 1.0, 2.0]).unwrap();
    let out = rgb.apply(NdArray { data: vec![1.0, 2.0, 3.0, 5.0], shape: vec![3, 1, 1] });
    assert!(out.is_err(), "4 values cannot be 3 equal channels");
    let out = rgb.apply(NdArray { data: vec![1.0, 2.0, 5.0], shape: vec![3, 1, 1] }).unwrap();
    assert_eq!(out.data, vec![0.0, 0.0, 1.0]);
    assert!(Normalize::new(&[0.5], &[0.0]).is_err());
    let ds = Mnist::new(Some(&shared()), Mode::Test).unwrap().with_transform(n);
    let (img, _) = ds.get(0).unwrap();
    assert!(img.data.iter().all(|&v| (-1.0..=1.0).contains(&v)));
    let _ = std::io::stdout().flush();
}

//! LeNet and the ResNets: Paddle's parameter names, shapes and counts (the counts Paddle's
//! and torchvision's models print), output shapes, and a state dict round trip into a fresh
//! model giving the same outputs.

use crate::common;

use dygraph::nn::{Forward, Layer};
use dygraph::vision::models::{LeNet, ResNet, resnet18, resnet34, resnet50};
use dygraph::{self as paddle, DType};

fn count(l: &dyn Layer) -> usize {
    l.parameters().iter().map(|p| p.numel()).sum()
}

#[test]
fn resnets_have_paddles_names_and_parameter_counts() {
    let _g = common::generator_lock();
    paddle::seed(common::run_seed());
    let r18 = resnet18(1000).unwrap();
    assert_eq!(count(&r18), 11_689_512);
    assert_eq!(count(&resnet34(1000).unwrap()), 21_797_672);
    let r50 = resnet50(1000).unwrap();
    assert_eq!(count(&r50), 25_557_032);
    let keys = r18.state_dict().keys();
    for k in [
        "conv1.weight",
        "bn1._mean",
        "bn1._variance",
        "layer1.0.conv1.weight",
        "layer2.0.downsample.0.weight",
        "layer2.0.downsample.1.bias",
        "layer4.1.bn2.weight",
        "fc.weight",
        "fc.bias",
    ] {
        assert!(keys.contains(&k.to_string()), "{k} missing from {:?}", &keys[..8]);
    }
    assert!(!keys.iter().any(|k| k.starts_with("layer1.0.downsample")), "layer1 keeps the identity shortcut");
    assert!(r50.state_dict().keys().contains(&"layer1.0.downsample.0.weight".to_string()), "bottlenecks widen at once");
    let shapes: Vec<(String, Vec<usize>)> =
        r18.named_parameters().into_iter().map(|(n, p)| (n, p.shape().to_vec())).collect();
    assert_eq!(shapes[0], ("conv1.weight".to_string(), vec![64, 3, 7, 7]));
    assert_eq!(shapes.last().unwrap(), &("fc.bias".to_string(), vec![1000]));
    assert!(ResNet::new(20, 10).is_err());

    let mut small = resnet18(10).unwrap();
    small.eval();
    let x = paddle::randn([2, 3, 32, 32]).unwrap();
    let y = small.forward(&x).unwrap();
    assert_eq!(y.shape(), &[2, 10]);
    let mut features = ResNet::new(18, 0).unwrap();
    features.eval();
    assert_eq!(features.forward(&x).unwrap().shape(), &[2, 512]);
    // The state dict loads into a fresh model, which then computes the same outputs.
    let mut fresh = resnet18(10).unwrap();
    fresh.set_state_dict(&small.state_dict()).unwrap();
    fresh.eval();
    assert_eq!(common::values(&fresh.forward(&x).unwrap()), common::values(&y));
}

#[test]
fn lenet_matches_paddles_layout_on_every_place() {
    let _g = common::generator_lock();
    for place in common::places() {
        paddle::guard(place, || {
            let net = LeNet::new(10).unwrap();
            assert_eq!(count(&net), 61_610);
            let names: Vec<String> = net.named_parameters().into_iter().map(|(n, _)| n).collect();
            assert_eq!(names[..4], ["features.0.weight", "features.0.bias", "features.3.weight", "features.3.bias"]);
            assert_eq!(names[4], "fc.0.weight");
            let y = net.forward(&paddle::zeros([3, 1, 28, 28], DType::Float32).unwrap()).unwrap();
            assert_eq!(y.shape(), &[3, 10]);
        });
    }
}

/// Fashion-MNIST read from small IDX files in the real format (gzipped), written here.
#[test]
fn fashion_mnist_reads_idx_files() {
    let _generator = common::generator_lock();
    use dygraph::io::Dataset;
    use dygraph::vision::datasets::{FashionMnist, Mode};
    use std::io::Write;
    let dir = std::env::temp_dir().join(format!("dygraph-fashion-{}-{}", std::process::id(), common::run_seed()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = |name: &str, bytes: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        std::fs::write(dir.join(name), e.finish().unwrap()).unwrap();
    };
    let mut images = vec![0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 28, 0, 0, 0, 28];
    images.extend((0..3 * 784).map(|i| (i % 251) as u8));
    gz("t10k-images-idx3-ubyte.gz", &images);
    gz("t10k-labels-idx1-ubyte.gz", &[0, 0, 8, 1, 0, 0, 0, 3, 9, 0, 4]);
    let ds = FashionMnist::new(&dir, Mode::Test).unwrap();
    assert_eq!(ds.len(), 3);
    let (img, label) = ds.get(2).unwrap();
    assert_eq!((img.shape.as_slice(), label), (&[1usize, 28, 28][..], 4));
    assert_eq!(img.data[0], ((2 * 784) % 251) as f32);
    assert!(FashionMnist::new(&dir, Mode::Train).is_err(), "no training files in the directory");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn vgg16_has_paddles_layout() {
    use dygraph::vision::models::{Vgg, vgg16};
    let _g = common::generator_lock();
    // On the CPU: its 411 MB classifier weight is past some GPUs' binding limit (lavapipe's 128 MiB).
    let mut v = paddle::guard(paddle::Place::Cpu, || vgg16(1000)).unwrap();
    assert_eq!(count(&v), 138_357_544);
    let names: Vec<String> = v.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "features.0.weight");
    assert_eq!(names[names.len() - 2..], ["classifier.6.weight", "classifier.6.bias"]);
    v.eval();
    let x = paddle::zeros_on([1, 3, 32, 32], DType::Float32, paddle::Place::Cpu).unwrap();
    assert_eq!(v.forward(&x).unwrap().shape(), &[1, 1000]);
    let bn = paddle::guard(paddle::Place::Cpu, || Vgg::new(11, true, 10)).unwrap();
    assert!(bn.state_dict().keys().contains(&"features.1._mean".to_string()));
    assert!(Vgg::new(12, false, 10).is_err());
}

/// Names and shapes as Paddle 3.3.1's own models list them
/// (`tests/fixtures/peer_weights/paddle_keys_*.txt`, written by `make_fixtures.py`).
fn paddle_keys(name: &str) -> Vec<(String, Vec<usize>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/peer_weights/paddle_keys_{name}.txt"));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, s) = l.split_once(' ').unwrap();
            (k.to_string(), s.split(',').filter(|d| !d.is_empty()).map(|d| d.parse().unwrap()).collect())
        })
        .collect()
}

fn our_keys(l: &dyn Layer) -> Vec<(String, Vec<usize>)> {
    l.state_dict().iter().map(|(k, t)| (k.to_string(), t.shape().to_vec())).collect()
}

#[test]
fn state_dicts_list_paddles_names_and_shapes_in_paddles_order() {
    let _g = common::generator_lock();
    paddle::seed(common::run_seed());
    use dygraph::vision::models::{mobilenet_v2, vgg16};
    assert_eq!(our_keys(&mobilenet_v2(1000).unwrap()), paddle_keys("mobilenet_v2"));
    assert_eq!(our_keys(&resnet18(1000).unwrap()), paddle_keys("resnet18"));
    let vgg = paddle::guard(paddle::Place::Cpu, || vgg16(1000)).unwrap();
    assert_eq!(our_keys(&vgg), paddle_keys("vgg16"));
}

#[test]
fn mobilenet_v2_counts_and_shapes() {
    let _g = common::generator_lock();
    paddle::seed(common::run_seed());
    use dygraph::vision::models::{MobileNetV2, mobilenet_v2};
    let mut m = mobilenet_v2(1000).unwrap();
    // Paddle's and torchvision's count for the standard network.
    assert_eq!(count(&m), 3_504_872);
    m.eval();
    let x = paddle::randn([1, 3, 96, 96]).unwrap();
    assert_eq!(m.forward(&x).unwrap().shape(), [1, 1000]);
    // Half width, features only: 1280 channels at 1/32 of the input.
    let mut half = MobileNetV2::new(0.5, 0, false).unwrap();
    half.eval();
    assert_eq!(half.forward(&x).unwrap().shape(), [1, 1280, 3, 3]);
    assert!(MobileNetV2::new(0.0, 10, true).is_err());
}

#[test]
fn cifar10_reads_the_python_tarball_in_archive_order() {
    let _generator = common::generator_lock();
    use dygraph::io::Dataset;
    use dygraph::vision::datasets::{Cifar10, Mode};
    use dygraph::vision::transforms::ToTensor;
    let archive = common::cifar::archive(&[
        ("data_batch_2", common::cifar::py2_batch(&common::cifar::pixels(3, 2), &[7, 8])),
        ("readme.html", b"<html>".to_vec()),
        ("test_batch", common::cifar::py2_batch(&common::cifar::pixels(100, 2), &[9, 0])),
        ("data_batch_1", common::cifar::py2_batch(&common::cifar::pixels(0, 3), &[1, 2, 3])),
        ("batches.meta", b"not a batch".to_vec()),
    ]);
    let dir = std::env::temp_dir().join(format!("dygraph-cifar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cifar-10-python.tar.gz");
    std::fs::write(&file, &archive).unwrap();
    let train = Cifar10::new(&file, Mode::Train).unwrap();
    assert_eq!(train.len(), 5);
    let labels: Vec<u8> = (0..5).map(|i| train.label(i)).collect();
    assert_eq!(labels, [7, 8, 1, 2, 3], "data_batch_2 comes first in this archive");
    let (img, label) = train.get(2).unwrap();
    assert_eq!((img.shape.as_slice(), label), (&[3, 32, 32][..], 1));
    // Image 0 of data_batch_1: channel 1 (green) starts at pixel 1024.
    assert_eq!((img.data[0], img.data[1024], img.data[3071]), (0.0, 0.0, (3071 % 256) as f32));
    let (img, _) = train.get(0).unwrap();
    assert_eq!(img.data[5], 98.0, "31·3 + 5");
    let test = Cifar10::new(&file, Mode::Test).unwrap().with_transform(ToTensor);
    let (img, label) = test.get(1).unwrap();
    assert_eq!(label, 0);
    assert_eq!(img.data[1], ((31 * 101 + 1) % 256) as f32 / 255.0);
    assert!(test.get(2).is_err());

    // Damaged files are typed errors naming what is wrong.
    let invalid = |bytes: &[u8]| match Cifar10::from_tar_gz_bytes(bytes, Mode::Train) {
        Err(dygraph::Error::InvalidArgument { msg, .. }) => msg,
        other => panic!("expected InvalidArgument, got {:?}", other.map(|d| d.len())),
    };
    let e = invalid(&common::cifar::archive(&[(
        "data_batch_1",
        common::cifar::py2_batch(&common::cifar::pixels(0, 3), &[1, 2]),
    )]));
    assert!(e.contains("3 images but 2 labels"), "{e}");
    let e = invalid(&common::cifar::archive(&[(
        "data_batch_1",
        common::cifar::py2_batch(&common::cifar::pixels(0, 1), &[10]),
    )]));
    assert!(e.contains("label 10"), "{e}");
    let e = invalid(&common::cifar::archive(&[(
        "test_batch",
        common::cifar::py2_batch(&common::cifar::pixels(0, 1), &[1]),
    )]));
    assert!(e.contains("no data_batch"), "{e}");
    for cut in [0, 10, archive.len() / 3, archive.len() - 9] {
        let _ = invalid(&archive[..cut]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

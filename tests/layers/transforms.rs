//! Image transforms on CHW float arrays against values worked out here; the random ones
//! checked by their invariants under a printed seed.

use crate::common;

use dygraph::NdArray;
use dygraph::vision::transforms::{
    CenterCrop, Compose, Normalize, RandomCrop, RandomHorizontalFlip, RandomRotation, Resize, ToTensor, Transform,
};

fn img(c: usize, h: usize, w: usize) -> NdArray<f32> {
    NdArray { data: (0..c * h * w).map(|v| v as f32).collect(), shape: vec![c, h, w] }
}

#[test]
fn deterministic_transforms_match_hand_values() {
    let _generator = common::generator_lock();
    let x = img(1, 2, 2);
    let t = Compose::new(vec![Box::new(ToTensor), Box::new(Normalize::new(&[0.5], &[0.5]).unwrap())]);
    let y = t.apply(img(1, 1, 3)).unwrap();
    let want: Vec<f32> = [0.0f32, 1.0, 2.0].iter().map(|v| (v / 255.0 - 0.5) / 0.5).collect();
    assert_eq!(y.data, want);

    // Bilinear, half-pixel centres: 2×2 → 4×4 samples at -0.25 (clamped to 0), 0.25, 0.75, 1.25 (→1).
    let r = Resize { size: (4, 4) }.apply(x.clone()).unwrap();
    assert_eq!(r.shape, [1, 4, 4]);
    let axis = [0.0f32, 0.25, 0.75, 1.0];
    let want: Vec<f32> = axis.iter().flat_map(|y| axis.iter().map(move |x| 2.0 * y + x)).collect();
    assert_eq!(r.data, want);
    assert_eq!(Resize { size: (2, 2) }.apply(x.clone()).unwrap().data, x.data, "same size is the identity");

    let c = CenterCrop { size: (2, 2) }.apply(img(2, 4, 4)).unwrap();
    assert_eq!(c.data, [5.0, 6.0, 9.0, 10.0, 21.0, 22.0, 25.0, 26.0]);
    let padded = CenterCrop { size: (4, 4) }.apply(x.clone()).unwrap();
    assert_eq!(padded.data[5..7], [0.0, 1.0], "a crop larger than the image pads with zeros");
    assert!(Resize { size: (0, 2) }.apply(x.clone()).is_err());
    assert!(CenterCrop { size: (1, 1) }.apply(NdArray { data: vec![0.0; 4], shape: vec![4] }).is_err());
}

#[test]
fn random_transforms_keep_their_invariants() {
    let _g = common::generator_lock();
    dygraph::seed(common::run_seed());
    let x = img(1, 3, 3);
    assert_eq!(RandomHorizontalFlip { p: 0.0 }.apply(x.clone()).unwrap().data, x.data);
    let flipped = RandomHorizontalFlip { p: 1.0 }.apply(x.clone()).unwrap();
    assert_eq!(flipped.data, [2.0, 1.0, 0.0, 5.0, 4.0, 3.0, 8.0, 7.0, 6.0]);
    assert_eq!(RandomRotation { degrees: 0.0 }.apply(x.clone()).unwrap().data, x.data);
    for _ in 0..20 {
        // A crop of a padded image: every value is 0 or one of the image's, in order within a row.
        let c = RandomCrop { size: (3, 3), padding: 1 }.apply(x.clone()).unwrap();
        assert_eq!(c.shape, [1, 3, 3]);
        assert!(c.data.iter().all(|v| *v == 0.0 || x.data.contains(v)));
        let r = RandomRotation { degrees: 30.0 }.apply(x.clone()).unwrap();
        assert_eq!(r.data[4], 4.0, "the centre stays");
        assert!(r.data.iter().all(|v| *v == 0.0 || x.data.contains(v)));
    }
    // Flips with p = 0.5 happen about half the time.
    let flips = (0..400).filter(|_| RandomHorizontalFlip { p: 0.5 }.apply(x.clone()).unwrap().data[0] == 2.0).count();
    assert!((150..250).contains(&flips), "{flips} flips of 400 (seed {})", common::run_seed());
    assert!(RandomCrop { size: (6, 6), padding: 1 }.apply(x).is_err());
}

//! A drawn digit turned into the network's input the way MNIST's own digits were made: the ink's
//! bounding box scaled (area-averaged, aspect kept) to fit 20×20, placed in a 28×28 frame so its
//! centre of mass sits at the centre, then scaled from 0–255 to [−1, 1].

/// MNIST's image side.
pub const SIDE: usize = 28;
/// The side of the box the digit is fitted into.
const FIT: usize = 20;
/// Pixels at or below this are background.
const INK_THRESHOLD: u8 = 16;

/// The `[28 × 28]` input for `ink` (row-major `width × height` intensities, ink high), or
/// `None` when nothing is drawn or the sizes disagree.
pub fn to_mnist_input(ink: &[u8], width: usize, height: usize) -> Option<Vec<f32>> {
    if width == 0 || height == 0 || ink.len() != width * height {
        return None;
    }
    let (x0, y0, x1, y1) = ink_bounds(ink, width)?;
    let (bw, bh) = (x1 - x0 + 1, y1 - y0 + 1);
    let scale = FIT as f64 / bw.max(bh) as f64;
    let (sw, sh) = (((bw as f64 * scale).round() as usize).max(1), ((bh as f64 * scale).round() as usize).max(1));
    let crop: Vec<f64> = (y0..=y1).flat_map(|y| (x0..=x1).map(move |x| ink[y * width + x] as f64)).collect();
    let small = resample_area(&crop, bw, bh, sw, sh);

    let (mut total, mut mx, mut my) = (0.0, 0.0, 0.0);
    for y in 0..sh {
        for x in 0..sw {
            let v = small[y * sw + x];
            total += v;
            mx += v * (x as f64 + 0.5);
            my += v * (y as f64 + 0.5);
        }
    }
    let centre = SIDE as f64 / 2.0;
    let offset = |mass: f64, size: usize| -> usize {
        let o = (centre - mass / total).round();
        o.clamp(0.0, (SIDE - size) as f64) as usize
    };
    let (ox, oy) = (offset(mx, sw), offset(my, sh));

    let mut out = vec![-1.0f32; SIDE * SIDE];
    for y in 0..sh {
        for x in 0..sw {
            let v = small[y * sw + x].clamp(0.0, 255.0);
            out[(y + oy) * SIDE + x + ox] = (v / 127.5 - 1.0) as f32;
        }
    }
    Some(out)
}

/// The inclusive box `(x0, y0, x1, y1)` around every pixel above the threshold.
fn ink_bounds(ink: &[u8], width: usize) -> Option<(usize, usize, usize, usize)> {
    let mut b: Option<(usize, usize, usize, usize)> = None;
    for (i, &v) in ink.iter().enumerate() {
        if v > INK_THRESHOLD {
            let (x, y) = (i % width, i / width);
            b = Some(match b {
                None => (x, y, x, y),
                Some((x0, y0, x1, y1)) => (x0.min(x), y0.min(y), x1.max(x), y1.max(y)),
            });
        }
    }
    b
}

/// Area-averaging resize of a `sw × sh` image to `dw × dh`: each output pixel is the mean of
/// the source area it covers, partial pixels weighted by their covered fraction.
fn resample_area(src: &[f64], sw: usize, sh: usize, dw: usize, dh: usize) -> Vec<f64> {
    let rows = resample_axis(src, sw, sh, dw, true);
    resample_axis(&rows, dw, sh, dh, false)
}

/// One separable pass: along x (`horizontal`) from `w` to `n` columns, or along y from `h` to
/// `n` rows.
fn resample_axis(src: &[f64], w: usize, h: usize, n: usize, horizontal: bool) -> Vec<f64> {
    let len = if horizontal { w } else { h };
    let step = len as f64 / n as f64;
    let weights: Vec<Vec<(usize, f64)>> = (0..n)
        .map(|o| {
            let (lo, hi) = (o as f64 * step, (o + 1) as f64 * step);
            (lo.floor() as usize..(hi.ceil() as usize).min(len))
                .map(|i| (i, ((i + 1) as f64).min(hi) - (i as f64).max(lo)))
                .filter(|&(_, w)| w > 0.0)
                .collect()
        })
        .collect();
    let (ow, oh) = if horizontal { (n, h) } else { (w, n) };
    let mut out = vec![0.0; ow * oh];
    for y in 0..oh {
        for x in 0..ow {
            let (o, fixed) = if horizontal { (x, y) } else { (y, x) };
            let sum: f64 = weights[o]
                .iter()
                .map(|&(i, wgt)| wgt * if horizontal { src[fixed * w + i] } else { src[i * w + fixed] })
                .sum();
            out[y * ow + x] = sum / step;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

    use super::*;

    wasm_bindgen_test_configure!(run_in_browser);

    #[wasm_bindgen_test]
    fn an_empty_canvas_has_no_input() {
        assert!(to_mnist_input(&[0; 100], 10, 10).is_none());
        assert!(to_mnist_input(&[255; 10], 10, 10).is_none());
    }

    #[wasm_bindgen_test]
    fn a_filled_square_is_fitted_into_20x20_and_centred() {
        let (w, h) = (280, 280);
        let mut ink = vec![0u8; w * h];
        for y in 10..110 {
            for x in 150..250 {
                ink[y * w + x] = 255;
            }
        }
        let out = to_mnist_input(&ink, w, h).unwrap();
        let inked: Vec<usize> = (0..SIDE * SIDE).filter(|&i| out[i] > 0.99).collect();
        assert_eq!(inked.len(), 400);
        assert_eq!(inked[0], 4 * SIDE + 4);
        assert_eq!(*inked.last().unwrap(), 23 * SIDE + 23);
        assert_eq!(out.iter().filter(|&&v| v == -1.0).count(), SIDE * SIDE - 400);
    }

    #[wasm_bindgen_test]
    fn a_tall_stroke_keeps_its_aspect_and_is_centred_by_mass() {
        let (w, h) = (280, 280);
        let mut ink = vec![0u8; w * h];
        for y in 100..200 {
            for x in 20..60 {
                ink[y * w + x] = 255;
            }
        }
        let input = to_mnist_input(&ink, w, h).unwrap();
        let inked: Vec<usize> = (0..SIDE * SIDE).filter(|&i| input[i] > 0.0).collect();
        let (xs, ys): (Vec<usize>, Vec<usize>) = inked.iter().map(|&i| (i % SIDE, i / SIDE)).unzip();
        assert_eq!((xs.iter().min(), xs.iter().max()), (Some(&10), Some(&17)));
        assert_eq!((ys.iter().min(), ys.iter().max()), (Some(&4), Some(&23)));
    }

    #[wasm_bindgen_test]
    fn area_resampling_keeps_the_mean() {
        let src: Vec<f64> = (0..7 * 5).map(|i| (i * 37 % 255) as f64).collect();
        let out = resample_area(&src, 7, 5, 3, 2);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean(&src) - mean(&out)).abs() < 1e-9);
    }
}

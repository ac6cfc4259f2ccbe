//! conv2d: hand-computed values, a naive direct-convolution reference, GPU against CPU over
//! a grid of strides, paddings (explicit, pair, asymmetric 4-tuple, SAME, VALID),
//! dilations and groups (forward and all gradients), float64 gradchecks of input, weight
//! and bias, double backward, determinism, errors (the MNIST convs are timed by `cargo bench --bench ops`).

use crate::common;

use dygraph::{self as paddle, Conv2dOptions, DType, Error, Padding, Place, Result, Tensor};

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    common::tensor(v, shape, DType::Float64, Place::Cpu)
}

fn seq(n: usize, from: f64) -> Vec<f64> {
    (0..n).map(|i| from + i as f64).collect()
}

/// Runs conv2d on float64 CPU tensors and returns (shape, values).
fn conv64(
    x: (&[f64], &[usize]),
    w: (&[f64], &[usize]),
    b: Option<&[f64]>,
    o: &Conv2dOptions,
) -> (Vec<usize>, Vec<f64>) {
    let bt = b.map(|b| t64(b, &[b.len()]));
    let y = paddle::conv2d(&t64(x.0, x.1), &t64(w.0, w.1), bt.as_ref(), o).unwrap();
    (y.shape().to_vec(), common::values(&y))
}

#[test]
fn hand_computed_values() {
    let _generator = common::generator_lock();
    let x: Vec<f64> = seq(9, 1.0); // [[1,2,3],[4,5,6],[7,8,9]]
    let w = [1.0, 2.0, 3.0, 4.0];
    // Plain 2×2 kernel, stride 1, no padding.
    let (s, v) = conv64((&x, &[1, 1, 3, 3]), (&w, &[1, 1, 2, 2]), None, &Conv2dOptions::default());
    assert_eq!(s, [1, 1, 2, 2]);
    assert_eq!(v, [37.0, 47.0, 67.0, 77.0]);

    // Padding 1, stride 2, bias 10: windows at (-1,-1), (-1,1), (1,-1), (1,1).
    let o = Conv2dOptions::new().stride(2).padding(1);
    let (s, v) = conv64((&x, &[1, 1, 3, 3]), (&w, &[1, 1, 2, 2]), Some(&[10.0]), &o);
    assert_eq!(s, [1, 1, 2, 2]);
    assert_eq!(v, [14.0, 28.0, 46.0, 87.0]);

    // Dilation 2 on x[i, j] = 5i + j: out(i, j) = 10·(5i + j) + (2·2 + 3·10 + 4·12).
    let x5 = seq(25, 0.0);
    let (s, v) = conv64((&x5, &[1, 1, 5, 5]), (&w, &[1, 1, 2, 2]), None, &Conv2dOptions::new().dilation(2));
    assert_eq!(s, [1, 1, 3, 3]);
    let expect: Vec<f64> = (0..9).map(|k| 82.0 + 10.0 * (5 * (k / 3) + k % 3) as f64).collect();
    assert_eq!(v, expect);

    // Groups 2 with 1×1 kernels: channel 0 doubled, channel 1 negated.
    let xg = seq(8, 1.0);
    let (s, v) = conv64((&xg, &[1, 2, 2, 2]), (&[2.0, -1.0], &[2, 1, 1, 1]), None, &Conv2dOptions::new().groups(2));
    assert_eq!(s, [1, 2, 2, 2]);
    assert_eq!(v, [2.0, 4.0, 6.0, 8.0, -5.0, -6.0, -7.0, -8.0]);

    // Two output channels over two input channels (sum over channels).
    let (s, v) = conv64(
        (&xg, &[1, 2, 2, 2]),
        (&[1.0, 1.0, 1.0, -1.0], &[2, 2, 1, 1]),
        Some(&[0.5, 0.0]),
        &Conv2dOptions::default(),
    );
    assert_eq!(s, [1, 2, 2, 2]);
    assert_eq!(v, [6.5, 8.5, 10.5, 12.5, -4.0, -4.0, -4.0, -4.0]);

    // SAME, stride 2, 3×3 ones on 3×3: output ceil(3/2) = 2, padding 1 on each side.
    let ones9 = [1.0; 9];
    let same = Conv2dOptions::new().stride(2).padding(Padding::Same);
    let (s, v) = conv64((&x, &[1, 1, 3, 3]), (&ones9, &[1, 1, 3, 3]), None, &same);
    assert_eq!(s, [1, 1, 2, 2]);
    assert_eq!(v, [12.0, 16.0, 24.0, 28.0]);

    // SAME, stride 1, 2×2 on 4×4: total padding 1, all of it bottom/right.
    let x16 = seq(16, 1.0);
    let (s, v) = conv64(
        (&x16, &[1, 1, 4, 4]),
        (&[1.0; 4], &[1, 1, 2, 2]),
        None,
        &Conv2dOptions::new().padding(Padding::parse("same").unwrap()),
    );
    assert_eq!(s, [1, 1, 4, 4]);
    assert_eq!((v[0], v[3], v[12], v[15]), (14.0, 12.0, 27.0, 16.0));

    // VALID is no padding.
    let valid: Padding = "VALID".try_into().unwrap();
    let (s, v) = conv64((&x, &[1, 1, 3, 3]), (&w, &[1, 1, 2, 2]), None, &Conv2dOptions::new().padding(valid));
    assert_eq!(s, [1, 1, 2, 2]);
    assert_eq!(v, [37.0, 47.0, 67.0, 77.0]);

    // Asymmetric [top, bottom, left, right] = [0, 1, 1, 0] on [[1,2],[3,4]] with 2×2 ones.
    let (s, v) = conv64(
        (&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]),
        (&[1.0; 4], &[1, 1, 2, 2]),
        None,
        &Conv2dOptions::new().padding([0, 1, 1, 0]),
    );
    assert_eq!(s, [1, 1, 2, 2]);
    assert_eq!(v, [4.0, 10.0, 3.0, 7.0]);

    // Pair padding [ph, pw] = [1, 0] with stride [1, 2].
    let (s, v) = conv64(
        (&x, &[1, 1, 3, 3]),
        (&[1.0; 4], &[1, 1, 2, 2]),
        None,
        &Conv2dOptions::new().padding([1, 0]).stride([1, 2]),
    );
    assert_eq!(s, [1, 1, 4, 1]);
    assert_eq!(v, [3.0, 12.0, 24.0, 15.0]);
}

#[test]
fn hand_computed_gradients() {
    let _generator = common::generator_lock();
    // y = conv(x, w) with x 3×3, w 2×2, Σ y: dx[i, j] = Σ of the kernel taps touching (i, j),
    // dw[a, b] = Σ of the inputs each tap sees, db = number of outputs.
    let x = t64(&seq(9, 1.0), &[1, 1, 3, 3]);
    let w = t64(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]);
    let b = t64(&[0.5], &[1]);
    for t in [&x, &w, &b] {
        t.set_stop_gradient(false);
    }
    let y = paddle::conv2d(&x, &w, Some(&b), &Conv2dOptions::default()).unwrap();
    y.sum(&[], false).unwrap().backward().unwrap();
    assert_eq!(common::values(&x.grad().unwrap()), [1.0, 3.0, 2.0, 4.0, 10.0, 6.0, 3.0, 7.0, 4.0]);
    assert_eq!(common::values(&w.grad().unwrap()), [12.0, 16.0, 24.0, 28.0]);
    assert_eq!(common::values(&b.grad().unwrap()), [4.0]);
}

/// One convolution configuration of the test grids.
#[derive(Clone)]
struct Cfg {
    name: &'static str,
    x: [usize; 4],
    oc: usize,
    k: [usize; 2],
    opts: Conv2dOptions,
    bias: bool,
}

#[allow(clippy::too_many_arguments)]
fn cfg(
    name: &'static str,
    x: [usize; 4],
    oc: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: Padding,
    d: [usize; 2],
    groups: usize,
    bias: bool,
) -> Cfg {
    Cfg { name, x, oc, k, opts: Conv2dOptions::new().stride(s).padding(p).dilation(d).groups(groups), bias }
}

impl Cfg {
    fn w_shape(&self) -> [usize; 4] {
        [self.oc, self.x[1] / self.opts.groups, self.k[0], self.k[1]]
    }
    fn inputs(&self, rng: &mut common::Rng) -> Vec<(Vec<f64>, Vec<usize>)> {
        let xn: usize = self.x.iter().product();
        let wn: usize = self.w_shape().iter().product();
        let mut v = vec![(rng.vec(xn, -1.0, 1.0), self.x.to_vec()), (rng.vec(wn, -1.0, 1.0), self.w_shape().to_vec())];
        if self.bias {
            v.push((rng.vec(self.oc, -1.0, 1.0), vec![self.oc]));
        }
        v
    }
    fn run(&self, t: &[Tensor]) -> Result<Tensor> {
        paddle::conv2d(&t[0], &t[1], t.get(2), &self.opts)
    }
}

fn grid() -> Vec<Cfg> {
    use Padding::{Explicit, Same, Valid};
    vec![
        cfg("basic", [2, 3, 7, 7], 4, [3, 3], [1, 1], Explicit([0; 4]), [1, 1], 1, true),
        cfg("stride2_pad1", [2, 3, 8, 7], 5, [3, 3], [2, 2], 1.into(), [1, 1], 1, true),
        cfg("pair_pad_dil2_groups2", [1, 4, 9, 9], 6, [3, 3], [1, 1], [1, 2].into(), [2, 2], 2, false),
        cfg("depthwise_same", [2, 4, 6, 6], 4, [3, 3], [1, 1], Same, [1, 1], 4, true),
        cfg("same_stride2_asym", [2, 4, 7, 8], 8, [3, 2], [2, 2], Same, [1, 1], 2, true),
        cfg("valid", [2, 3, 6, 6], 4, [3, 3], [1, 1], Valid, [1, 1], 1, true),
        cfg("asym_pad4", [2, 2, 7, 6], 3, [3, 3], [2, 1], [0, 1, 2, 1].into(), [1, 2], 1, true),
        cfg("many_out_channels", [2, 3, 6, 6], 40, [3, 3], [1, 1], 1.into(), [1, 1], 1, true),
        cfg("many_in_channels", [1, 36, 5, 5], 4, [3, 3], [1, 1], 1.into(), [1, 1], 1, false),
        cfg("mid_channels_groups", [2, 6, 5, 5], 48, [2, 2], [1, 1], 0.into(), [1, 1], 2, true),
        cfg("pointwise", [2, 5, 4, 4], 3, [1, 1], [1, 1], 0.into(), [1, 1], 1, true),
        cfg("pointwise_stride2", [2, 5, 5, 5], 3, [1, 1], [2, 2], 0.into(), [1, 1], 1, false),
        cfg("split_k_filter", [4, 2, 16, 16], 3, [3, 3], [1, 1], 1.into(), [1, 1], 1, true),
        cfg("stride3_dil2_groups3", [2, 6, 11, 10], 6, [3, 3], [3, 3], 2.into(), [2, 2], 3, true),
        cfg("depthwise_multiplier", [2, 3, 6, 5], 6, [3, 3], [2, 1], 1.into(), [1, 1], 3, true),
        cfg("mnist_like", [3, 1, 12, 12], 4, [5, 5], [1, 1], 0.into(), [1, 1], 1, true),
        // Software adapters' 8-column blocks with a partly filled last row block: 22 output
        // channels in 12-row blocks (forward, filter gradient), 17·9 column rows in 12-row
        // ones and 16 channels in 8-row ones; a 1×1 kernel's input gradient (no columns) over
        // 17 input channels in 10-row blocks.
        cfg("wide_blocks_partial_rows", [2, 17, 5, 6], 22, [3, 3], [1, 1], 1.into(), [1, 1], 1, true),
        cfg("wide_blocks_eight_rows", [1, 3, 5, 5], 16, [3, 3], [1, 1], 0.into(), [1, 1], 1, false),
        cfg("wide_blocks_pointwise_input_gradient", [2, 17, 4, 3], 6, [1, 1], [1, 1], 0.into(), [1, 1], 1, true),
        // Their vec4 loads (K = 5·2·2 and oh·ow = 36 multiples of 4): 22 output channels in
        // 12-row blocks (forward, filter gradient), 20 column rows in 12-row ones (the last
        // quad clamped), 108 columns in 8-column blocks (the last half clamped, blocks
        // straddling images).
        cfg("vector_blocks_partial_rows", [3, 5, 7, 7], 22, [2, 2], [1, 1], 0.into(), [1, 1], 1, true),
        // Padding below and right only: only the last taps fall outside the image.
        cfg("pad_bottom_right_only", [2, 4, 6, 5], 5, [3, 2], [1, 1], [0, 2, 0, 1].into(), [1, 1], 1, true),
    ]
}

/// Naive direct convolution in f64 (an independent reference for the im2col path).
fn naive(c: &Cfg, x: &[f64], w: &[f64], b: Option<&[f64]>) -> Vec<f64> {
    let [n, ch, h, wd] = c.x;
    let [oc, cig, kh, kw] = c.w_shape();
    let (s, d) = (c.opts.stride.0, c.opts.dilation.0);
    let (p, d) = match c.opts.padding {
        Padding::Same => (c.opts.padding_resolved([h, wd], [kh, kw]), [1, 1]),
        Padding::Valid => ([0; 4], d),
        Padding::Explicit(p) => (p, d),
    };
    let oh = (h + p[0] + p[1] - d[0] * (kh - 1) - 1) / s[0] + 1;
    let ow = (wd + p[2] + p[3] - d[1] * (kw - 1) - 1) / s[1] + 1;
    let cog = oc / c.opts.groups;
    let mut out = vec![0.0; n * oc * oh * ow];
    for ni in 0..n {
        for o in 0..oc {
            let g = o / cog;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b[o]);
                    for ci in 0..cig {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (y * s[0] + ky * d[0]) as isize - p[0] as isize;
                                let ix = (xx * s[1] + kx * d[1]) as isize - p[2] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let cin = g * cig + ci;
                                acc += x[((ni * ch + cin) * h + iy as usize) * wd + ix as usize]
                                    * w[((o * cig + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    out[((ni * oc + o) * oh + y) * ow + xx] = acc;
                }
            }
        }
    }
    out
}

/// Paddle's SAME padding, written out independently of the library.
trait SamePad {
    fn padding_resolved(&self, hw: [usize; 2], k: [usize; 2]) -> [usize; 4];
}

impl SamePad for Conv2dOptions {
    fn padding_resolved(&self, hw: [usize; 2], k: [usize; 2]) -> [usize; 4] {
        let mut p = [0; 4];
        for a in 0..2 {
            let s = self.stride.0[a];
            let out = hw[a].div_ceil(s);
            let total = ((out - 1) * s + k[a]).saturating_sub(hw[a]);
            p[2 * a] = total / 2;
            p[2 * a + 1] = total - total / 2;
        }
        p
    }
}

#[test]
fn cpu_matches_naive_reference() {
    let _generator = common::generator_lock();
    let mut rng = common::Rng::new(1);
    let mut failures = Vec::new();
    for c in grid() {
        let inputs = c.inputs(&mut rng);
        let ts: Vec<Tensor> = inputs.iter().map(|(v, s)| t64(v, s)).collect();
        let got = common::values(&c.run(&ts).unwrap());
        let expect = naive(&c, &inputs[0].0, &inputs[1].0, inputs.get(2).map(|b| b.0.as_slice()));
        if let Err(m) = common::check_close(c.name, &got, &expect, 1e-12) {
            failures.push(m);
        }
        // float32 on the CPU agrees too.
        let ts32: Vec<Tensor> = inputs.iter().map(|(v, s)| common::tensor(v, s, DType::Float32, Place::Cpu)).collect();
        let got32 = common::values(&c.run(&ts32).unwrap());
        if let Err(m) = common::check_close(&format!("{} f32", c.name), &got32, &expect, 1e-5) {
            failures.push(m);
        }
    }
    common::report("conv2d CPU vs naive", &failures);
}

#[test]
fn gpu_matches_cpu_forward_and_gradients() {
    let _generator = common::generator_lock();
    let mut rng = common::Rng::new(2);
    let mut failures = Vec::new();
    for c in grid() {
        let inputs = c.inputs(&mut rng);
        let f = |t: &[Tensor]| c.run(t);
        if let Some(m) = common::catch(c.name, || common::gpu_matches_cpu(c.name, &f, &inputs, true, 1e-4)) {
            failures.push(m);
        }
    }
    common::report("conv2d GPU vs CPU", &failures);
}

/// The GPU has two entries (tiled through workgroup memory, and barrier-free blocks of 4
/// columns on hardware or 8 on software adapters) and picks one per adapter and shape; rerun
/// the GPU grid with each forced, in a child process (the choice is read once per process),
/// so all three are checked on any machine.
#[test]
fn gpu_matches_cpu_with_each_kernel_forced() {
    let _generator = common::generator_lock();
    common::rerun_with_each(
        &common::test_path(module_path!(), "gpu_matches_cpu_forward_and_gradients"),
        "DYGRAPH_CONV_KERNEL",
        &["tiled", "direct", "direct8"],
    );
}

#[test]
fn gradcheck_input_weight_bias_float64() {
    let _generator = common::generator_lock();
    use Padding::{Explicit, Same, Valid};
    let configs = [
        cfg("g_basic_pad1", [2, 2, 5, 5], 3, [3, 3], [1, 1], 1.into(), [1, 1], 1, true),
        cfg("g_same_stride2_groups2", [2, 4, 6, 6], 4, [3, 3], [2, 2], Same, [1, 1], 2, true),
        cfg("g_asym_dil2_stride12", [2, 2, 6, 5], 2, [2, 3], [1, 2], Explicit([1, 0, 0, 2]), [2, 1], 1, true),
        cfg("g_depthwise", [2, 3, 5, 5], 3, [3, 3], [1, 1], 1.into(), [1, 1], 3, true),
        cfg("g_multiplier_valid_stride2", [2, 2, 6, 6], 4, [2, 2], [2, 2], Valid, [1, 1], 2, true),
        cfg("g_pointwise", [2, 3, 4, 4], 2, [1, 1], [1, 1], 0.into(), [1, 1], 1, false),
    ];
    let mut rng = common::Rng::new(3);
    let mut failures = Vec::new();
    for c in configs {
        let inputs = c.inputs(&mut rng);
        if let Err(m) = common::gradcheck(c.name, &|t| c.run(t), &inputs) {
            failures.push(m);
        }
    }
    common::report("conv2d gradcheck", &failures);
}

#[test]
fn second_order_gradients() {
    let _generator = common::generator_lock();
    // d/dw of (∂/∂x <v, conv(x, w)>) and d/dx of (∂/∂w <v, conv(x, w)>): the backward ops'
    // own backward rules, checked by finite differences.
    let c = cfg("second_order", [2, 2, 5, 5], 3, [3, 3], [2, 1], [1, 0, 1, 1].into(), [1, 2], 1, false);
    let mut rng = common::Rng::new(4);
    let inputs = c.inputs(&mut rng);
    let ts: Vec<Tensor> = inputs.iter().map(|(v, s)| t64(v, s)).collect();
    let ys = c.run(&ts).unwrap().shape().to_vec();
    assert_eq!(ys, [2, 3, 2, 3]);
    let v = t64(&rng.vec(ys.iter().product(), -1.0, 1.0), &ys);
    let grad_of = |which: usize| {
        let v = v.clone();
        let c = c.clone();
        move |t: &[Tensor]| -> Result<Tensor> {
            let _g = paddle::enable_grad();
            let y = c.run(t)?;
            let l = y.mul(&v)?.sum(&[], false)?;
            Ok(paddle::grad(&[l], &[t[which].clone()], None, true, true, false)?[0].clone().unwrap())
        }
    };
    let gx = grad_of(0);
    let gw = grad_of(1);
    let mut failures = Vec::new();
    for (name, f) in [("d(dx)", &gx as &dyn Fn(&[Tensor]) -> Result<Tensor>), ("d(dw)", &gw)] {
        if let Err(m) = common::gradcheck(name, f, &inputs) {
            failures.push(m);
        }
    }
    common::report("conv2d double backward", &failures);
}

#[test]
fn results_are_deterministic() {
    let _generator = common::generator_lock();
    let c = cfg("det", [4, 3, 16, 16], 5, [3, 3], [1, 1], 1.into(), [1, 1], 1, true);
    let mut rng = common::Rng::new(5);
    let inputs = c.inputs(&mut rng);
    let mut places = vec![Place::Cpu];
    places.extend(common::gpu_or_skip());
    for place in places {
        let run = || {
            let ts: Vec<Tensor> = inputs.iter().map(|(v, s)| common::tensor(v, s, DType::Float32, place)).collect();
            for t in &ts {
                t.set_stop_gradient(false);
            }
            c.run(&ts).unwrap().sum(&[], false).unwrap().backward().unwrap();
            ts.iter().map(|t| common::values(&t.grad().unwrap())).collect::<Vec<_>>()
        };
        assert_eq!(run(), run(), "gradients differ between two runs on {place}");
    }
}

#[test]
fn float16_runs_in_float32() {
    let _generator = common::generator_lock();
    let x = common::tensor(&seq(9, 1.0), &[1, 1, 3, 3], DType::Float16, Place::Cpu);
    let w = common::tensor(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2], DType::Float16, Place::Cpu);
    let y = paddle::conv2d(&x, &w, None, &Conv2dOptions::default()).unwrap();
    assert_eq!(y.dtype(), DType::Float16);
    assert_eq!(common::values(&y), [37.0, 47.0, 67.0, 77.0]);
}

fn err(r: Result<Tensor>) -> Error {
    match r {
        Ok(t) => panic!("expected an error, got a tensor of shape {:?}", t.shape()),
        Err(e) => e,
    }
}

#[test]
fn errors_are_typed_and_name_the_op() {
    let _generator = common::generator_lock();
    let x = t64(&[0.0; 2 * 4 * 5 * 5], &[2, 4, 5, 5]);
    let w = t64(&[0.0; 6 * 4 * 9], &[6, 4, 3, 3]);
    let d = Conv2dOptions::default();
    let shape_err = |e: Error, needle: &str| {
        let m = e.to_string();
        assert!(matches!(e, Error::Shape { .. }), "{m}");
        assert!(m.contains("conv2d") && m.contains(needle), "{m} (wanted {needle})");
    };
    shape_err(err(paddle::conv2d(&t64(&[0.0; 100], &[4, 5, 5]), &w, None, &d)), "[4, 5, 5]");
    shape_err(err(paddle::conv2d(&x, &t64(&[0.0; 24], &[6, 4]), None, &d)), "[6, 4]");
    // in_c 4 != weight in_c 3 × groups 1.
    shape_err(err(paddle::conv2d(&x, &t64(&[0.0; 6 * 27], &[6, 3, 3, 3]), None, &d)), "[6, 3, 3, 3]");
    // out_c 6 not divisible by groups 4 (in_c 4 = 1 × 4 is fine).
    shape_err(err(paddle::conv2d(&x, &t64(&[0.0; 54], &[6, 1, 3, 3]), None, &d.clone().groups(4))), "groups 4");
    shape_err(err(paddle::conv2d(&x, &w, Some(&t64(&[0.0; 5], &[5])), &d)), "[5]");
    shape_err(err(paddle::conv2d(&x, &t64(&[0.0; 6 * 4 * 36], &[6, 4, 6, 6]), None, &d)), "<= 0");
    shape_err(err(paddle::conv2d(&x, &w, None, &d.clone().dilation(3))), "<= 0");

    let invalid = |e: Error| {
        let m = e.to_string();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{m}");
        assert!(m.contains("conv2d") || m.contains("padding"), "{m}");
    };
    invalid(err(paddle::conv2d(&x, &w, None, &d.clone().stride(0))));
    invalid(err(paddle::conv2d(&x, &w, None, &d.clone().groups(0))));
    invalid(err(paddle::conv2d(&x, &w, None, &Conv2dOptions { data_format: "NHWC".into(), ..d.clone() })));
    invalid(Padding::parse("FULL").unwrap_err());

    let w32 = common::tensor(&[0.0; 6 * 4 * 9], &[6, 4, 3, 3], DType::Float32, Place::Cpu);
    let e = err(paddle::conv2d(&x, &w32, None, &d));
    assert!(matches!(e, Error::DTypeMismatch { op: "conv2d", .. }), "{e}");
    let xi = common::tensor(&[0.0; 100], &[1, 4, 5, 5], DType::Int32, Place::Cpu);
    let wi = common::tensor(&[0.0; 6 * 36], &[6, 4, 3, 3], DType::Int32, Place::Cpu);
    let e = err(paddle::conv2d(&xi, &wi, None, &d));
    assert!(matches!(e, Error::UnsupportedDType { op: "conv2d", .. }), "{e}");

    if let Some(gpu) = common::gpu_or_skip() {
        let wg = w.cast(DType::Float32).unwrap().to(gpu).unwrap();
        let e = err(paddle::conv2d(&x.cast(DType::Float32).unwrap(), &wg, None, &d));
        assert!(matches!(e, Error::PlaceMismatch { op: "conv2d", .. }), "{e}");
        let bg = common::tensor(&[0.0; 6], &[6], DType::Float32, gpu);
        let xg = x.cast(DType::Float32).unwrap().to(gpu).unwrap();
        let e = err(paddle::conv2d(&xg, &wg, Some(&bg.cpu().unwrap()), &d));
        assert!(matches!(e, Error::PlaceMismatch { op: "conv2d", .. }), "{e}");
    }
}

#[test]
fn empty_batch() {
    let _generator = common::generator_lock();
    let mut places = vec![Place::Cpu];
    places.extend(common::gpu_or_skip());
    for place in places {
        let x = common::tensor(&[], &[0, 2, 5, 5], DType::Float32, place);
        let w = common::tensor(&[0.5; 3 * 2 * 9], &[3, 2, 3, 3], DType::Float32, place);
        let b = common::tensor(&[1.0; 3], &[3], DType::Float32, place);
        for t in [&x, &w, &b] {
            t.set_stop_gradient(false);
        }
        let y = paddle::conv2d(&x, &w, Some(&b), &Conv2dOptions::new().padding(1)).unwrap();
        assert_eq!(y.shape(), [0, 3, 5, 5]);
        y.sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().shape(), [0, 2, 5, 5]);
        assert_eq!(common::values(&w.grad().unwrap()), vec![0.0; 54], "on {place}");
        assert_eq!(common::values(&b.grad().unwrap()), vec![0.0; 3], "on {place}");
    }
}

//! `conv3d` / `Conv3D` against a float64 seven-loop reference on every place (strides,
//! padding, dilation, groups, a non-cubic kernel), float64 finite-difference gradients, the
//! GPU's gradients against the CPU's, a static program, and typed errors.

use crate::common;

use dygraph::nn::{Conv3D, Conv3dOptions, Forward};
use dygraph::{self as paddle, DType, Error, Tensor};

#[allow(clippy::needless_range_loop)] // indices are the formula's
/// `out[n, o, d, h, w] = b[o] + Σ x[n, g·cg + c, d·s + kd·dl − p, ...] · w[o, c, kd, kh, kw]`.
fn reference(
    x: &[f64],
    xs: [usize; 5],
    w: &[f64],
    ws: [usize; 5],
    b: &[f64],
    o: &Conv3dOptions,
) -> (Vec<f64>, [usize; 5]) {
    let [n, c, dims @ ..] = xs;
    let [out, cg, ks @ ..] = ws;
    let og = out / o.groups;
    let od: Vec<usize> =
        (0..3).map(|a| (dims[a] + 2 * o.padding[a] - o.dilation[a] * (ks[a] - 1) - 1) / o.stride[a] + 1).collect();
    let shape = [n, out, od[0], od[1], od[2]];
    let mut y = vec![0.0; shape.iter().product()];
    let mut i = 0;
    for bn in 0..n {
        for oc in 0..out {
            let g = oc / og;
            for d in 0..od[0] {
                for h in 0..od[1] {
                    for ww in 0..od[2] {
                        let mut acc = b[oc];
                        for ci in 0..cg {
                            for a in 0..ks[0] {
                                for bb in 0..ks[1] {
                                    for cc in 0..ks[2] {
                                        let pos = [(d, a), (h, bb), (ww, cc)]
                                            .iter()
                                            .enumerate()
                                            .map(|(ax, &(p, k))| {
                                                (p * o.stride[ax] + k * o.dilation[ax]) as i64 - o.padding[ax] as i64
                                            })
                                            .collect::<Vec<_>>();
                                        if pos.iter().zip(&dims).all(|(&p, &dim)| (0..dim as i64).contains(&p)) {
                                            let xi = (((bn * c + g * cg + ci) * dims[0] + pos[0] as usize) * dims[1]
                                                + pos[1] as usize)
                                                * dims[2]
                                                + pos[2] as usize;
                                            let wi = (((oc * cg + ci) * ks[0] + a) * ks[1] + bb) * ks[2] + cc;
                                            acc += x[xi] * w[wi];
                                        }
                                    }
                                }
                            }
                        }
                        y[i] = acc;
                        i += 1;
                    }
                }
            }
        }
    }
    (y, shape)
}

#[test]
fn conv3d_matches_seven_loops_on_every_place() {
    let _g = common::generator_lock();
    let seed = common::run_seed();
    paddle::seed(seed);
    let mut rng = common::Rng::new(seed ^ 0x3d);
    let cases = [
        ([2, 2, 4, 5, 5], [3, 3, 3], Conv3dOptions::default()),
        (
            [1, 4, 5, 6, 4],
            [2, 3, 1],
            Conv3dOptions { stride: [2, 1, 2], padding: [1, 1, 0], dilation: [1, 1, 1], groups: 2 },
        ),
        (
            [1, 3, 7, 5, 5],
            [3, 2, 2],
            Conv3dOptions { stride: [1, 2, 1], padding: [2, 0, 1], dilation: [2, 1, 2], groups: 1 },
        ),
    ];
    for (xs, k, opts) in cases {
        let out_channels = 2 * opts.groups;
        let conv = Conv3D::with_options(xs[1], out_channels, k, opts, true).unwrap();
        let (w, b) = (common::values(&conv.weight), common::values(conv.bias.as_ref().unwrap()));
        let b: Vec<f64> = b.iter().enumerate().map(|(i, v)| v + 0.1 * i as f64).collect();
        let xv = rng.vec(xs.iter().product(), -1.0, 1.0);
        let ws = [out_channels, xs[1] / opts.groups, k[0], k[1], k[2]];
        let (want, shape) = reference(&xv, xs, &w, ws, &b, &opts);
        for place in common::places() {
            let x = common::tensor(&xv, &xs, DType::Float32, place);
            let wt = common::tensor(&w, &ws, DType::Float32, place);
            let bt = common::tensor(&b, &[out_channels], DType::Float32, place);
            let got = paddle::conv3d(&x, &wt, Some(&bt), &opts).unwrap();
            assert_eq!(got.shape(), shape, "{opts:?} on {place}");
            common::assert_close(&format!("conv3d {opts:?} on {place}"), &common::values(&got), &want, 1e-5);
        }
        // The layer is the function with its own parameters.
        let x = common::tensor(&xv, &xs, DType::Float32, conv.weight.place());
        let layer_out = conv.forward(&x).unwrap();
        let (want_layer, _) = reference(&xv, xs, &w, ws, &common::values(conv.bias.as_ref().unwrap()), &opts);
        common::assert_close("Conv3D layer", &common::values(&layer_out), &want_layer, 1e-5);
    }
}

#[test]
fn conv3d_gradients_in_float64_and_on_the_gpu() {
    let _generator = common::generator_lock();
    let mut rng = common::Rng::new(common::run_seed() ^ 0x3d3d);
    let opts = Conv3dOptions { stride: [2, 1, 1], padding: [1, 0, 1], dilation: [1, 2, 1], groups: 2 };
    let shapes = [vec![1, 4, 3, 5, 3], vec![2, 2, 2, 2, 2], vec![2]];
    let inputs: Vec<(Vec<f64>, Vec<usize>)> =
        shapes.iter().map(|s| (rng.vec(s.iter().product(), -1.0, 1.0), s.clone())).collect();
    let f = move |t: &[Tensor]| paddle::conv3d(&t[0], &t[1], Some(&t[2]), &opts);
    common::gradcheck("conv3d", &f, &inputs).unwrap();
    common::gpu_matches_cpu("conv3d", &f, &inputs, true, 1e-4);
}

#[test]
fn conv3d_in_a_static_program_matches_eager() {
    let _generator = common::generator_lock();
    use dygraph::static_::{Executor, Program, Scope, data, program_guard};
    let mut rng = common::Rng::new(common::run_seed() ^ 0x5d);
    let xv = rng.vec(2 * 2 * 3 * 4 * 4, -1.0, 1.0);
    let wv = rng.vec(3 * 2 * 2 * 3 * 3, -1.0, 1.0);
    let opts = Conv3dOptions { padding: [0, 1, 1], ..Default::default() };
    let eager = paddle::conv3d(
        &common::tensor(&xv, &[2, 2, 3, 4, 4], DType::Float32, paddle::Place::Cpu),
        &common::tensor(&wv, &[3, 2, 2, 3, 3], DType::Float32, paddle::Place::Cpu),
        None,
        &opts,
    )
    .unwrap();
    let (main, startup) = (Program::new(), Program::new());
    let y = program_guard(&main, &startup, || {
        let x = data("x", &[-1, 2, 3, 4, 4], DType::Float32)?;
        let w = data("w", &[3, 2, 2, 3, 3], DType::Float32)?;
        paddle::conv3d(&x, &w, None, &opts)
    })
    .unwrap();
    let exe = Executor::with_scope(paddle::Place::Cpu, Scope::new());
    let xt = common::tensor(&xv, &[2, 2, 3, 4, 4], DType::Float32, paddle::Place::Cpu);
    let wt = common::tensor(&wv, &[3, 2, 2, 3, 3], DType::Float32, paddle::Place::Cpu);
    let out = exe.run(&main, &[("x", &xt), ("w", &wt)], &[y.name().unwrap()]).unwrap();
    common::assert_close("conv3d static vs eager", &common::values(&out[0]), &common::values(&eager), 1e-6);
}

#[test]
fn conv3d_bad_shapes_are_typed_errors() {
    let _generator = common::generator_lock();
    let cpu = paddle::Place::Cpu;
    let x = common::tensor(&[0.0; 2 * 3 * 2 * 2], &[1, 2, 3, 2, 2], DType::Float32, cpu);
    let expect = |r: paddle::Result<Tensor>, needle: &str| match r {
        Err(Error::Shape { op, msg }) => assert!(op == "conv3d" && msg.contains(needle), "{op}: {msg}"),
        other => panic!("expected a conv3d shape error with {needle:?}, got {:?}", other.map(|t| t.shape().to_vec())),
    };
    let w = |s: &[usize]| common::tensor(&vec![0.0; s.iter().product()], s, DType::Float32, cpu);
    expect(paddle::conv3d(&x, &w(&[2, 3, 1, 1, 1]), None, &Default::default()), "C = weight[1]");
    expect(paddle::conv3d(&x, &w(&[2, 2, 4, 1, 1]), None, &Default::default()), "depth 3");
    expect(
        paddle::conv3d(&x.reshape([2, 3, 2, 2]).unwrap(), &w(&[2, 2, 1, 1, 1]), None, &Default::default()),
        "[N, C, D, H, W]",
    );
    let zero_stride = Conv3dOptions { stride: [0, 1, 1], ..Default::default() };
    expect(paddle::conv3d(&x, &w(&[2, 2, 1, 1, 1]), None, &zero_stride), "nonzero stride");
}

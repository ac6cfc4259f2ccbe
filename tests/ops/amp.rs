//! Autocast (`amp::auto_cast`): every registered op's list against a copy of Paddle 3.x's
//! `amp_lists.py`, the table of `docs/amp.md` against the code, the dtypes ops run in at
//! each level, eager values and gradients against float64 references of the float16
//! arithmetic, and the same casts in a static program and a `to_static` trace.

use std::collections::BTreeMap;

use crate::common;

use common::{assert_close, places, values};
use dygraph::amp::{self, AmpLevel, AmpList, AmpState};
use dygraph::nn::{self, Forward};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Place, Tensor};

/// Paddle 3.x's `FP16_WHITE_LIST` (python/paddle/amp/amp_lists.py).
const FP16_WHITE: &[&str] = &[
    "conv2d",
    "einsum",
    "matmul",
    "matmul_v2",
    "max_pool2d_with_index",
    "mul",
    "fake_quantize_dequantize_abs_max",
    "fake_quantize_dequantize_moving_average_abs_max",
    "fused_gemm_epilogue",
    "fused_attention",
    "fused_feedforward",
];

/// Its `FP16_BLACK_LIST`.
const FP16_BLACK: &[&str] = &[
    "tan",
    "acos",
    "asin",
    "sinh",
    "cosh",
    "atanh",
    "tanh_shrink",
    "cos_sim",
    "erfinv",
    "exp",
    "expm1",
    "log",
    "log10",
    "log2",
    "reciprocal",
    "rsqrt",
    "pow",
    "square",
    "reduce_sum",
    "mean",
    "reduce_mean",
    "reduce_prod",
    "cumprod",
    "cumsum",
    "dist",
    "pnorm",
    "frobenius_norm",
    "renorm",
    "group_norm",
    "layer_norm",
    "softmax",
    "softmin",
    "softplus",
    "log_softmax",
    "softmax_with_cross_entropy",
    "sigmoid_cross_entropy_with_logits",
    "c_softmax_with_cross_entropy",
    "cross_entropy",
    "cross_entropy2",
    "nll_loss",
    "huber_loss",
    "triplet_margin_loss",
    "log_loss",
    "hsigmoid_loss",
    "margin_cross_entropy",
];

/// Its `EXTRA_BLACK_LIST`.
const EXTRA_BLACK: &[&str] = &[
    "linear_interp_v2",
    "nearest_interp_v2",
    "bilinear_interp_v2",
    "bicubic_interp_v2",
    "trilinear_interp_v2",
    "lookup_table",
    "lookup_table_v2",
    "scatter",
];

/// Its `BF16_WHITE_LIST`.
const BF16_WHITE: &[&str] = &["conv2d", "einsum", "matmul_v2"];

/// The Paddle op each of ours is (where the names differ): its product's fused forms count
/// as the product.
const AS_PADDLE: &[(&str, &str)] = &[
    ("matmul", "matmul_v2"),
    ("matmul_epilogue", "fused_gemm_epilogue"),
    ("conv2d_product", "conv2d"),
    ("conv2d_epilogue", "conv2d"),
    ("max_pool2d", "max_pool2d_with_index"),
    ("sum", "reduce_sum"),
    ("prod", "reduce_prod"),
    ("pow_scalar", "pow"),
    ("cross_entropy_with_softmax", "softmax_with_cross_entropy"),
    ("embedding", "lookup_table_v2"),
    ("scatter_axis", "scatter"),
];

/// The ops autocast leaves alone whatever the lists say.
const KEPT: &[&str] = &["cast", "check_finite_and_unscale", "update_loss_scaling"];

#[test]
fn every_op_is_on_paddles_list() {
    let mut wrong = Vec::new();
    for op in dygraph::ops::registry::registry() {
        let ours = op.name();
        let paddle = AS_PADDLE.iter().find(|(o, _)| *o == ours).map_or(ours, |(_, p)| p);
        let on = |list: &[&str]| list.contains(&paddle);
        let expected = if KEPT.contains(&ours) {
            AmpList::Keep
        } else if on(FP16_WHITE) && on(BF16_WHITE) {
            AmpList::White
        } else if on(FP16_WHITE) {
            AmpList::WhiteFloat16
        } else if on(EXTRA_BLACK) {
            AmpList::Black
        } else if on(FP16_BLACK) {
            AmpList::BlackFloat16
        } else {
            AmpList::Gray
        };
        if op.facts().amp != expected {
            wrong.push(format!(
                "{ours} (Paddle's {paddle}): declared {:?}, Paddle's lists say {expected:?}",
                op.facts().amp
            ));
        }
    }
    assert!(wrong.is_empty(), "ops on the wrong list:\n{}", wrong.join("\n"));
}

fn state(level: AmpLevel, use_promote: bool, dtype: DType) -> AmpState {
    AmpState { level, dtype, white: Default::default(), black: Default::default(), use_promote }
}

/// What a cell of the table says: the dtype for an input of the scope's low dtype and for a
/// float32 input.
fn cell(s: &AmpState, op: &dyn dygraph::ops::registry::RegisteredOp) -> &'static str {
    let low = s.dtype_for(op, &[s.dtype, s.dtype]);
    let high = s.dtype_for(op, &[DType::Float32, s.dtype]);
    match (low, high) {
        (None, None) => "as is",
        (Some(l), Some(h)) if l == s.dtype && h == s.dtype => s.dtype.name(),
        (Some(DType::Float32), Some(DType::Float32)) => "float32",
        (Some(l), Some(DType::Float32)) if l == s.dtype => "widest",
        other => panic!("{}: an unexpected pair {other:?}", op.name()),
    }
}

/// docs/amp.md's table, as the code decides it.
fn table() -> String {
    let mut by_op: BTreeMap<&str, String> = BTreeMap::new();
    let levels = [
        state(AmpLevel::OD, true, DType::Float16),
        state(AmpLevel::O1, true, DType::Float16),
        state(AmpLevel::O2, true, DType::Float16),
        state(AmpLevel::O2, false, DType::Float16),
        state(AmpLevel::O1, true, DType::BFloat16),
    ];
    for op in dygraph::ops::registry::registry() {
        let cells: Vec<&str> = levels.iter().map(|s| cell(s, *op)).collect();
        by_op.insert(op.name(), format!("| `{}` | {:?} | {} |", op.name(), op.facts().amp, cells.join(" | ")));
    }
    let mut out = String::from(
        "| op | list | OD | O1 | O2 | O2, use_promote=false | bfloat16, O1 |\n|---|---|---|---|---|---|---|\n",
    );
    for row in by_op.values() {
        out += row;
        out += "\n";
    }
    out
}

#[test]
fn the_docs_table_is_what_the_code_does() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/amp.md")).unwrap();
    let (start, end) = ("<!-- table: begin -->\n", "<!-- table: end -->");
    let at = doc.find(start).expect("docs/amp.md has the table markers") + start.len();
    let len = doc[at..].find(end).expect("the end marker");
    let expected = table();
    assert!(doc[at..at + len] == expected, "docs/amp.md's table is stale; it should read:\n{expected}");
}

/// The dtype of each op's output for inputs of the given dtypes, under `scope` (`None`:
/// the op refused its inputs' dtypes, as a float16 + float32 add does outside autocast).
fn dtypes_under(scope: amp::AutoCast, place: Place) -> Vec<(&'static str, Option<DType>)> {
    let t = |d: DType| paddle::ones_on([2, 2], DType::Float32, place).unwrap().cast(d).unwrap();
    let (h, f) = (t(DType::Float16), t(DType::Float32));
    let _s = scope.enter().unwrap();
    let w = paddle::ones_on([2], DType::Float32, place).unwrap();
    vec![
        ("matmul f32·f32", paddle::matmul(&f, &f, false, false).ok().map(|t| t.dtype())),
        ("add f16+f32", h.add(&f).ok().map(|t| t.dtype())),
        ("add f16+f16", h.add(&h).ok().map(|t| t.dtype())),
        ("exp f16", h.exp().ok().map(|t| t.dtype())),
        ("relu f16", h.relu().ok().map(|t| t.dtype())),
        (
            "layer_norm f16 with f32 weight",
            paddle::layer_norm(&h, &[2], Some(&w), Some(&w), 1e-5).ok().map(|t| t.dtype()),
        ),
        (
            "float64 untouched (CPU)",
            paddle::ones_on([2], DType::Float64, Place::Cpu).unwrap().exp().ok().map(|t| t.dtype()),
        ),
    ]
}

#[test]
fn each_level_runs_each_op_in_paddles_dtype() {
    const H: Option<DType> = Some(DType::Float16);
    const F: Option<DType> = Some(DType::Float32);
    const D: Option<DType> = Some(DType::Float64);
    const REFUSED: Option<DType> = None;
    for place in places() {
        let cases: [(&str, amp::AutoCast, [Option<DType>; 7]); 7] = [
            ("off", amp::auto_cast(false), [F, REFUSED, H, H, H, H, D]),
            ("O0", amp::auto_cast(true).level("O0"), [F, REFUSED, H, H, H, H, D]),
            ("OD", amp::auto_cast(true).level("OD"), [H, F, F, F, F, F, D]),
            ("O1", amp::auto_cast(true), [H, F, H, F, H, F, D]),
            ("O2", amp::auto_cast(true).level("O2"), [H, F, H, H, H, H, D]),
            ("O2 no promote", amp::auto_cast(true).level("O2").use_promote(false), [H, H, H, H, H, H, D]),
            (
                "O1 custom",
                amp::auto_cast(true).custom_white_list(["exp"]).custom_black_list(["matmul"]),
                [F, F, H, H, H, F, D],
            ),
        ];
        for (what, scope, expected) in cases {
            let got = dtypes_under(scope, place);
            for ((op, dt), want) in got.iter().zip(expected) {
                assert_eq!(*dt, want, "{what} on {place}: {op}");
            }
        }
        // Outside every scope nothing is cast.
        let x = paddle::ones_on([2, 2], DType::Float32, place).unwrap();
        assert_eq!(paddle::matmul(&x, &x, false, false).unwrap().dtype(), DType::Float32);
        assert!(!amp::is_auto_cast_enabled());
    }
}

#[test]
fn bad_settings_are_typed_errors() {
    let err = |s: amp::AutoCast| s.enter().err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(amp::auto_cast(true).level("O3")).contains("O0, OD, O1 or O2"));
    assert!(err(amp::auto_cast(true).dtype("int8")).contains("'float16' or 'bfloat16'"));
    assert!(err(amp::auto_cast(true).custom_white_list(["exp"]).custom_black_list(["exp"])).contains("overlaps"));
    assert!(err(amp::auto_cast(true).custom_black_list(["no_such_op"])).contains("no_such_op"));
    // Paddle's legacy names are accepted.
    let s = amp::auto_cast(true).custom_black_list(["reduce_sum", "matmul_v2"]).state().unwrap();
    assert!(s.black.contains("sum") && s.black.contains("matmul"));
}

/// float16's value of `v`.
fn f16(v: f64) -> f64 {
    half::f16::from_f64(v).to_f64()
}

/// `round16(x·W) + b` in float64 over float16-rounded operands: what O1's matmul and
/// promoted bias add compute.
fn linear_reference(x: &[f64], w: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut y = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            let s: f64 = (0..k).map(|t| f16(x[i * k + t]) * f16(w[t * m + j])).sum();
            y[i * m + j] = f16(s) + b[j];
        }
    }
    y
}

#[test]
fn o1_linear_matches_float16_arithmetic_and_trains_float32_parameters() {
    let _g = common::generator_lock();
    for place in places() {
        paddle::guard(place, || {
            let seed = common::run_seed();
            paddle::seed(seed);
            let fc = nn::Linear::new(6, 5).unwrap();
            let x = paddle::randn([4, 6]).unwrap();
            let y = amp::auto_cast(true).scope(|| fc.forward(&x)).unwrap().unwrap();
            assert_eq!(y.dtype(), DType::Float32, "the bias add promotes");
            let (xv, wv, bv) = (values(&x), values(&fc.weight), values(fc.bias.as_ref().unwrap()));
            let want = linear_reference(&xv, &wv, &bv, 4, 6, 5);
            common::check_allclose(&format!("O1 linear on {place} (seed {seed})"), &values(&y), &want, 1e-6, 1e-6)
                .unwrap();
            // The loss's gradients reach the float32 parameters through the casts.
            y.square().unwrap().sum(&[], false).unwrap().backward().unwrap();
            let gw = fc.weight.grad().expect("the weight has a gradient");
            assert_eq!(gw.dtype(), DType::Float32);
            // dW = xᵀ · 2y, with x and 2y rounded to float16 as the recorded product saw them.
            let mut want_gw = vec![0.0; 6 * 5];
            for t in 0..6 {
                for j in 0..5 {
                    want_gw[t * 5 + j] = f16((0..4).map(|i| f16(xv[i * 6 + t]) * f16(2.0 * want[i * 5 + j])).sum());
                }
            }
            common::check_allclose(&format!("O1 dW on {place} (seed {seed})"), &values(&gw), &want_gw, 1e-3, 2e-3)
                .unwrap();
        });
    }
}

/// A small MLP whose forward serves both modes.
#[derive(nn::Layer)]
struct Mlp {
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> paddle::Result<Tensor> {
        self.fc2.forward(&self.fc1.forward(x)?.relu()?)?.softmax(-1)
    }
}

#[test]
fn a_static_program_built_under_autocast_holds_the_casts_and_matches_eager() {
    let _g = common::generator_lock();
    for place in places() {
        paddle::guard(place, || {
            let seed = common::run_seed();
            paddle::seed(seed);
            let eager = Mlp { fc1: nn::Linear::new(4, 8).unwrap(), fc2: nn::Linear::new(8, 3).unwrap() };
            let x = paddle::randn([5, 4]).unwrap();
            let want = amp::auto_cast(true).scope(|| eager.forward(&x)).unwrap().unwrap();

            let (main, startup) = (Program::new(), Program::new());
            let (model, out) = amp::auto_cast(true)
                .scope(|| {
                    st::program_guard(&main, &startup, || {
                        let xv = st::data("x", &[-1, 4], DType::Float32).unwrap();
                        let model = Mlp { fc1: nn::Linear::new(4, 8).unwrap(), fc2: nn::Linear::new(8, 3).unwrap() };
                        let out = model.forward(&xv).unwrap();
                        (model, out)
                    })
                })
                .unwrap();
            let ops: Vec<String> = main.ops().iter().map(|o| o.op_type.clone()).collect();
            let casts = ops.iter().filter(|o| *o == "cast").count();
            // Each matmul casts its two operands down and its product back up for the add.
            assert_eq!(casts, 6, "the program's ops: {ops:?}");
            assert_eq!(out.dtype(), DType::Float32, "softmax is on float16's black list");
            let exe = Executor::with_scope(place, Scope::new());
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            for ((_, s), (_, e)) in nn::Layer::named_parameters(&model).iter().zip(nn::Layer::named_parameters(&eager))
            {
                exe.scope().set_var(&s.name().unwrap(), e.detach().clone_data().unwrap());
            }
            // Run inside a scope too: the executor runs the program's ops, casting nothing more.
            let got = amp::auto_cast(true).scope(|| exe.run(&main, &[("x", &x)], &[&out])).unwrap().unwrap();
            assert_close(&format!("static O1 on {place} (seed {seed})"), &values(&got[0]), &values(&want), 1e-6);

            // to_static: a trace under autocast is cached apart from one without.
            let traced = dygraph::jit::to_static(eager, None);
            let amp_out = amp::auto_cast(true).scope(|| traced.forward(&x)).unwrap().unwrap();
            assert_close(&format!("to_static O1 on {place} (seed {seed})"), &values(&amp_out), &values(&want), 1e-6);
            let plain = traced.forward(&x).unwrap();
            let plain_want = traced.layer().forward(&x).unwrap();
            assert_close(&format!("to_static float32 on {place}"), &values(&plain), &values(&plain_want), 1e-6);
            assert_eq!(traced.num_traced(), 2);
        });
    }
}

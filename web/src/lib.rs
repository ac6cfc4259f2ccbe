//! dygraph in the browser: the WebAssembly module behind `web/index.html`.
//!
//! `start()` opens WebGPU when the browser has an adapter and falls back to the CPU backend
//! compiled to wasm otherwise; the page then classifies drawn digits with natively trained
//! weights (`load_classifier`, `predict`), trains the same network from scratch on a slice of
//! MNIST (`trainer_new`, `train_steps`, `evaluate`) and compares ops on the two backends
//! (`run_checks`). Every readback is awaited; nothing blocks on the GPU. The page runs this
//! module in a dedicated worker (`web/worker.js`), so its compute never occupies the page's
//! thread.

pub mod check;
pub mod classifier;
pub mod digit;
pub mod trainer;

use std::cell::RefCell;

use dygraph::io::Dataset;
use dygraph::vision::datasets::Mnist;
use dygraph::{self as paddle, Place};
use wasm_bindgen::prelude::*;

use crate::classifier::Classifier;
use crate::trainer::Trainer;

/// What the module holds between calls (it runs on the one thread of its worker).
struct Session {
    place: Place,
    backend: String,
    classifier: Option<Classifier>,
    trainer: Option<Trainer>,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

fn with_session<R>(f: impl FnOnce(&mut Session) -> Result<R, JsError>) -> Result<R, JsError> {
    SESSION.with(|s| match s.borrow_mut().as_mut() {
        Some(session) => f(session),
        None => Err(JsError::new("dygraph is not started: await start() first")),
    })
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console)]
    fn error(message: &str);
}

/// Panics (there should be none) reach the browser console with their message.
#[wasm_bindgen(start)]
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| error(&format!("dygraph-web panicked: {info}"))));
}

/// Picks the place: `"auto"` uses WebGPU when the browser has an adapter, else the CPU
/// backend; `"cpu"` always uses the CPU backend. Returns what runs, for the page to show.
#[wasm_bindgen]
pub async fn start(backend: String) -> Result<String, JsError> {
    let (place, description) = match backend.as_str() {
        "cpu" => (Place::Cpu, "CPU (WebAssembly), as asked".to_string()),
        "auto" => match paddle::init_gpu().await {
            Ok(info) => (Place::Gpu(0), format!("WebGPU ({})", adapter_words(&info))),
            Err(paddle::Error::Device(why)) => (Place::Cpu, format!("CPU (WebAssembly): {why}")),
            Err(e) => (Place::Cpu, format!("CPU (WebAssembly): {e}")),
        },
        other => return Err(JsError::new(&format!("start: unknown backend {other:?}; expected \"auto\" or \"cpu\""))),
    };
    paddle::set_place(place)?;
    SESSION.with(|s| {
        *s.borrow_mut() = Some(Session { place, backend: description.clone(), classifier: None, trainer: None })
    });
    Ok(description)
}

/// The adapter as the page names it: the browser often hides the name, never the kind.
fn adapter_words(info: &paddle::GpuInfo) -> String {
    let kind = match info.device_type.as_str() {
        "DiscreteGpu" => "discrete GPU",
        "IntegratedGpu" => "integrated GPU",
        "VirtualGpu" => "virtual GPU",
        "Cpu" => "software adapter",
        _ => "GPU",
    };
    if info.name.is_empty() { kind.to_string() } else { format!("{}, {kind}", info.name) }
}

/// True when ops run on WebGPU.
#[wasm_bindgen]
pub fn using_webgpu() -> Result<bool, JsError> {
    with_session(|s| Ok(s.place.is_gpu()))
}

/// The description `start` returned.
#[wasm_bindgen]
pub fn backend() -> Result<String, JsError> {
    with_session(|s| Ok(s.backend.clone()))
}

/// Loads the classifier: an inference model's program (`.pdmodel`) and parameters
/// (`.pdiparams`), as saved by `save_inference_model`.
#[wasm_bindgen]
pub fn load_classifier(pdmodel: &[u8], pdiparams: &[u8]) -> Result<(), JsError> {
    with_session(|s| {
        s.classifier = Some(Classifier::from_inference_model(pdmodel, pdiparams, s.place)?);
        Ok(())
    })
}

/// What the network makes of a drawing, as `{input, probabilities}`: the 28×28 image it sees
/// (values in [−1, 1], for the page to show) and the ten class probabilities. `ink` holds
/// `width × height` intensities (ink high, background 0). Both arrays are empty when nothing
/// is drawn.
#[wasm_bindgen]
pub async fn predict(ink: Vec<u8>, width: usize, height: usize) -> Result<js_sys::Object, JsError> {
    if ink.len() != width * height {
        return Err(JsError::new(&format!(
            "predict: ink has {} values but the drawing is {width} × {height} = {}",
            ink.len(),
            width * height
        )));
    }
    let (input, probabilities) = match digit::to_mnist_input(&ink, width, height) {
        None => (Vec::new(), Vec::new()),
        Some(input) => {
            let probs = with_session(|s| match &s.classifier {
                Some(c) => Ok(c.probabilities(&input)?),
                None => Err(JsError::new("predict: no classifier loaded; call load_classifier first")),
            })?;
            let probabilities = probs.to_vec_async::<f32>().await?;
            (input, probabilities)
        }
    };
    let result = js_sys::Object::new();
    for (key, values) in [("input", input), ("probabilities", probabilities)] {
        js_sys::Reflect::set(&result, &key.into(), &js_sys::Float32Array::from(&values[..]))
            .map_err(|_| JsError::new("predict: could not build the result object"))?;
    }
    Ok(result)
}

/// A fresh network to train on the given IDX files (raw or gzipped, as fetched), in
/// `precision`: `"auto"` (float16 mixed precision where WebGPU has `shader-f16`, else
/// float32), `"float32"` or `"float16"`. Returns what it trains on and in.
#[wasm_bindgen]
pub fn trainer_new(
    train_images: &[u8],
    train_labels: &[u8],
    test_images: &[u8],
    test_labels: &[u8],
    batch_size: usize,
    seed: u32,
    precision: String,
) -> Result<String, JsError> {
    let train = Mnist::from_idx_bytes(train_images, train_labels)?;
    let test = Mnist::from_idx_bytes(test_images, test_labels)?;
    let images = format!("{} training and {} test images", train.len(), test.len());
    with_session(|s| {
        s.trainer = None;
        let trainer = s.trainer.insert(Trainer::new(train, test, batch_size, seed as u64, s.place, &precision)?);
        Ok(format!("{images} in {}", trainer.precision()))
    })
}

/// What the trainer computes in (`trainer_new`'s precision, resolved).
#[wasm_bindgen]
pub fn training_precision() -> Result<String, JsError> {
    with_session(|s| Ok(s.trainer.as_ref().ok_or_else(no_trainer)?.precision().to_string()))
}

/// Runs `n` training steps and returns their losses (read back together, asynchronously).
#[wasm_bindgen]
pub async fn train_steps(n: usize) -> Result<Vec<f32>, JsError> {
    let mut losses = Vec::with_capacity(n);
    for _ in 0..n {
        losses.push(with_session(|s| match s.trainer.as_mut() {
            Some(t) => Ok(t.step()?),
            None => Err(JsError::new("train_steps: no trainer; call trainer_new first")),
        })?);
    }
    if losses.is_empty() {
        return Ok(Vec::new());
    }
    Ok(paddle::stack(&losses, 0)?.to_vec_async::<f32>().await?)
}

/// The trained network's accuracy on the test images.
#[wasm_bindgen]
pub async fn evaluate() -> Result<f64, JsError> {
    const CHUNK: usize = 250;
    let total = with_session(|s| s.trainer.as_ref().map(|t| t.test_len()).ok_or_else(no_trainer))?;
    let mut correct = 0;
    for start in (0..total).step_by(CHUNK) {
        let (pred, labels) =
            with_session(|s| Ok(s.trainer.as_ref().ok_or_else(no_trainer)?.predict_test(start, start + CHUNK)?))?;
        let pred = pred.to_vec_async::<i64>().await?;
        correct += pred.iter().zip(&labels).filter(|(p, l)| p == l).count();
    }
    Ok(correct as f64 / total.max(1) as f64)
}

fn no_trainer() -> JsError {
    JsError::new("no trainer; call trainer_new first")
}

/// The op families `run_checks` accepts.
#[wasm_bindgen]
pub fn check_families() -> Vec<String> {
    check::FAMILIES.iter().map(|s| s.to_string()).collect()
}

/// Runs one family of GPU-against-CPU checks; returns a JSON array of
/// `{name, max_error, tolerance, elements, passed}`. Needs WebGPU.
#[wasm_bindgen]
pub async fn run_checks(family: String) -> Result<String, JsError> {
    let place = with_session(|s| Ok(s.place))?;
    if !place.is_gpu() {
        return Err(JsError::new("run_checks: WebGPU is not in use, so there is no GPU result to compare"));
    }
    let results = check::run_family(&family, place).await?;
    let rows: Vec<String> = results
        .iter()
        .map(|r| {
            format!(
                "{{\"name\":{},\"max_error\":{},\"tolerance\":{},\"elements\":{},\"passed\":{}}}",
                json_string(&r.name),
                json_number(r.max_error),
                json_number(r.tolerance),
                r.elements,
                r.passed()
            )
        })
        .collect();
    Ok(format!("[{}]", rows.join(",")))
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// JSON has no NaN or infinity: they are written as null (and fail the check).
fn json_number(v: f64) -> String {
    if v.is_finite() { format!("{v:e}") } else { "null".into() }
}

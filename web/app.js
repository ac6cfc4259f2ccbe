// The demo page: draws, trains and checks through the dygraph-web wasm module (pkg/, built by
// `wasm-pack build web --target web`), which runs in a worker (worker.js): this thread only
// draws and shows. `?backend=cpu` forces the CPU backend.
// window.dygraphDemo exposes the page's state and timings (the end-to-end test reads them).

const $ = (id) => document.getElementById(id);
const demo = (window.dygraphDemo = {
  ready: false, backend: null, webgpu: false, timings: {}, predictions: 0,
  training: { state: "idle", losses: [], accuracy: null, stepsPerSecond: null, precision: null },
  checks: null, error: null,
});

function fail(where, e) {
  const msg = `${where}: ${e && e.message ? e.message : e}`;
  demo.error = msg;
  $("error").textContent = msg;
  console.error(msg);
}

// ---- the worker ---------------------------------------------------------------------------
const worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
const pending = new Map();
let nextCall = 0;
worker.onmessage = ({ data: { id, value, error } }) => {
  const call = pending.get(id);
  pending.delete(id);
  if (error === undefined) call.resolve(value);
  else call.reject(new Error(error));
};
worker.onerror = (e) => {
  const why = new Error(`the worker failed: ${e.message || "it could not load (see the console)"}`);
  for (const call of pending.values()) call.reject(why);
  pending.clear();
  fail("worker", why);
};
// Calls a dygraph-web export in the worker; resolves with its result.
function dy(name, ...args) {
  return new Promise((resolve, reject) => {
    const id = nextCall++;
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, name, args });
  });
}

async function fetchBytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status} (run web/make_data.py and wasm-pack build first)`);
  return new Uint8Array(await r.arrayBuffer());
}

// ---- start-up ----------------------------------------------------------------------------
async function boot() {
  const t0 = performance.now();
  await dy("init");
  demo.timings.wasmInitMs = performance.now() - t0;
  const asked = new URLSearchParams(location.search).get("backend") === "cpu" ? "cpu" : "auto";
  demo.backend = await dy("start", asked);
  demo.webgpu = await dy("using_webgpu");
  demo.timings.startMs = performance.now() - t0;
  const badge = $("backend");
  badge.textContent = demo.backend;
  badge.dataset.backend = demo.webgpu ? "webgpu" : "cpu";
  if (!demo.webgpu) {
    $("check-summary").textContent = "WebGPU is not available here: nothing to compare the CPU results with.";
    $("check-run").disabled = true;
  }
  await dy("load_classifier", await fetchBytes("mnist.pdmodel"), await fetchBytes("mnist.pdiparams"));
  demo.timings.weightsLoadedMs = performance.now() - t0;
  // The first prediction builds the forward pass's pipelines (a third of a second on a software
  // WebGPU adapter): pay for it here, on a stroke of our own, not on the user's first digit.
  const w = performance.now();
  await dy("predict", warmUpStroke(), pad.width, pad.height);
  demo.timings.warmUpPredictionMs = performance.now() - w;
  demo.timings.readyMs = performance.now() - t0;
  demo.ready = true;
}

// A vertical bar down the middle of the pad, as ink.
function warmUpStroke() {
  const out = new Uint8Array(pad.width * pad.height);
  for (let y = Math.round(pad.height * 0.2); y < Math.round(pad.height * 0.8); y++) {
    out.fill(255, y * pad.width + Math.round(pad.width * 0.45), y * pad.width + Math.round(pad.width * 0.55));
  }
  return out;
}

// ---- draw a digit ------------------------------------------------------------------------
const pad = $("pad");
const ctx = pad.getContext("2d", { willReadFrequently: true });
function clearPad() {
  ctx.fillStyle = "#000";
  ctx.fillRect(0, 0, pad.width, pad.height);
  $("prediction").textContent = "–";
  $("prediction").dataset.label = "";
  $("bars").innerHTML = "";
  $("input-preview").getContext("2d").clearRect(0, 0, 28, 28);
}
clearPad();

let drawing = false;
let last = null;
function point(ev) {
  const r = pad.getBoundingClientRect();
  return [(ev.clientX - r.left) * (pad.width / r.width), (ev.clientY - r.top) * (pad.height / r.height)];
}
pad.addEventListener("pointerdown", (ev) => {
  drawing = true;
  last = point(ev);
  pad.setPointerCapture(ev.pointerId);
  stroke(last, last);
});
pad.addEventListener("pointermove", (ev) => {
  if (!drawing) return;
  const p = point(ev);
  stroke(last, p);
  last = p;
});
pad.addEventListener("pointerup", () => {
  if (!drawing) return;
  drawing = false;
  predict().catch((e) => fail("predict", e));
});
function stroke(a, b) {
  ctx.strokeStyle = "#fff";
  ctx.lineWidth = 20;
  ctx.lineCap = "round";
  ctx.lineJoin = "round";
  ctx.beginPath();
  ctx.moveTo(a[0], a[1]);
  ctx.lineTo(b[0], b[1]);
  ctx.stroke();
}
$("clear").addEventListener("click", clearPad);

function ink() {
  const rgba = ctx.getImageData(0, 0, pad.width, pad.height).data;
  const out = new Uint8Array(pad.width * pad.height);
  for (let i = 0; i < out.length; i++) out[i] = rgba[4 * i];
  return out;
}

// Predictions run one at a time, after start-up: a release during one (or before the page is
// ready) waits its turn. Resolves when every prediction asked for so far has been shown.
let predicting = null;
demo.settled = () => predicting;
async function predict() {
  predicting = predicting.then(async () => {
    if (!demo.ready) return;
    const pixels = ink();
    const t = performance.now();
    const { input, probabilities } = await dy("predict", pixels, pad.width, pad.height);
    const ms = performance.now() - t;
    if (demo.predictions === 0) demo.timings.firstPredictionMs = ms;
    else demo.timings.lastPredictionMs = ms;
    demo.predictions += 1;
    $("predict-ms").textContent = `${ms.toFixed(1)} ms`;
    showInput(input);
    showProbabilities(probabilities);
  });
  return predicting;
}

function showInput(input) {
  const c = $("input-preview").getContext("2d");
  const img = c.createImageData(28, 28);
  for (let i = 0; i < 784; i++) {
    const v = input.length ? Math.round((input[i] + 1) * 127.5) : 0;
    img.data.set([v, v, v, 255], 4 * i);
  }
  c.putImageData(img, 0, 0);
}

function showProbabilities(probs) {
  const bars = $("bars");
  bars.innerHTML = "";
  if (!probs.length) return;
  const best = probs.indexOf(Math.max(...probs));
  $("prediction").textContent = String(best);
  $("prediction").dataset.label = String(best);
  probs.forEach((p, digit) => {
    const cls = digit === best ? "best" : "";
    bars.insertAdjacentHTML("beforeend",
      `<span class="${cls}">${digit}</span><div><div class="bar" style="width:${(p * 100).toFixed(1)}%"></div></div>` +
      `<span class="${cls}">${(p * 100).toFixed(1)}%</span>`);
  });
}

// ---- train here --------------------------------------------------------------------------
let trainData = null;
let stopAsked = false;
async function train() {
  const total = Math.max(1, parseInt($("train-steps").value, 10) || 300);
  const t = demo.training;
  t.state = "loading data"; t.losses = []; t.accuracy = null; t.stepsPerSecond = null;
  stopAsked = false;
  $("train-start").disabled = true;
  $("train-stop").disabled = false;
  $("test-accuracy").textContent = "–";
  $("train-status").textContent = t.state;
  trainData ??= await Promise.all([
    "data/train-images-idx3-ubyte.gz", "data/train-labels-idx1-ubyte.gz",
    "data/t10k-images-idx3-ubyte.gz", "data/t10k-labels-idx1-ubyte.gz",
  ].map(fetchBytes));
  // float16 mixed precision where WebGPU has shader-f16, else float32; the page says which.
  const summary = await dy("trainer_new", ...trainData, 64, 2020, "auto");
  t.precision = await dy("training_precision");
  $("train-precision").textContent = t.precision;
  t.state = "training";
  $("train-status").textContent = `training on ${summary}`;
  // WebGPU queues several steps per readback; a CPU step already takes ~100 ms, so the chart
  // follows every one. Stop takes effect between chunks.
  const chunk = demo.webgpu ? 10 : 1;
  const started = performance.now();
  while (!stopAsked && t.losses.length < total) {
    const losses = await dy("train_steps", Math.min(chunk, total - t.losses.length));
    t.losses.push(...losses);
    t.stepsPerSecond = t.losses.length / ((performance.now() - started) / 1000);
    $("train-step").textContent = String(t.losses.length);
    $("train-loss").textContent = losses[losses.length - 1].toFixed(4);
    $("steps-per-second").textContent = t.stepsPerSecond.toFixed(1);
    drawChart(t.losses, total);
  }
  t.state = "evaluating";
  $("train-status").textContent = `${stopAsked ? "stopped" : "done"} after ${t.losses.length} steps; evaluating`;
  $("train-stop").disabled = true;
  t.accuracy = await dy("evaluate");
  $("test-accuracy").textContent = `${(t.accuracy * 100).toFixed(1)}%`;
  t.state = stopAsked ? "stopped" : "done";
  $("train-status").textContent = `${t.state} after ${t.losses.length} steps`;
  $("train-start").disabled = false;
}
$("train-start").addEventListener("click", () => train().catch((e) => {
  demo.training.state = "failed";
  $("train-start").disabled = false;
  $("train-stop").disabled = true;
  fail("train", e);
}));
$("train-stop").addEventListener("click", () => { stopAsked = true; });

function drawChart(losses, total) {
  const c = $("loss-chart");
  const g = c.getContext("2d");
  const [w, h, left, bottom] = [c.width, c.height, 44, 20];
  g.clearRect(0, 0, w, h);
  const top = Math.max(2.5, ...losses.slice(0, 5));
  const x = (i) => left + (i / Math.max(1, total - 1)) * (w - left - 8);
  const y = (v) => 6 + (1 - Math.min(v, top) / top) * (h - bottom - 6);
  g.strokeStyle = "#c8d0da"; g.fillStyle = "#5b6775"; g.font = "11px system-ui";
  for (const v of [0, top / 2, top]) {
    g.beginPath(); g.moveTo(left, y(v)); g.lineTo(w - 8, y(v)); g.stroke();
    g.fillText(v.toFixed(2), 4, y(v) + 4);
  }
  g.fillText(`step ${losses.length} of ${total}`, left, h - 4);
  const line = (values, color, width) => {
    g.strokeStyle = color; g.lineWidth = width; g.beginPath();
    values.forEach((v, i) => (i ? g.lineTo(x(i), y(v)) : g.moveTo(x(i), y(v))));
    g.stroke(); g.lineWidth = 1;
  };
  line(losses, "#a9c4f5", 1);
  const k = 20;
  line(losses.map((_, i) => {
    const s = losses.slice(Math.max(0, i - k + 1), i + 1);
    return s.reduce((a, b) => a + b, 0) / s.length;
  }), "#2f6fde", 2);
}

// ---- check -------------------------------------------------------------------------------
async function runChecks() {
  $("check-run").disabled = true;
  const body = $("check-table").tBodies[0];
  body.innerHTML = "";
  const rows = [];
  try {
    for (const family of await dy("check_families")) {
      $("check-summary").textContent = `running ${family}…`;
      for (const r of JSON.parse(await dy("run_checks", family))) {
        rows.push(r);
        body.insertAdjacentHTML("beforeend",
          `<tr><td>${r.name}</td><td>${r.max_error === null ? "NaN" : r.max_error.toExponential(2)}</td>` +
          `<td>${r.tolerance.toExponential(0)}</td><td>${r.elements}</td>` +
          `<td class="${r.passed ? "pass" : "fail"}">${r.passed ? "agree" : "DIFFER"}</td></tr>`);
      }
    }
    const failed = rows.filter((r) => !r.passed).length;
    $("check-summary").textContent = failed ? `${failed} of ${rows.length} differ` : `all ${rows.length} agree`;
    demo.checks = rows;
  } finally {
    $("check-run").disabled = false;
  }
}
$("check-run").addEventListener("click", () => runChecks().catch((e) => fail("check", e)));

predicting = boot().catch((e) => fail("start", e));

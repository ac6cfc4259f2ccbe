// The demo page: draws, trains and checks through the dygraph-web wasm module (pkg/, built by
// `wasm-pack build web --target web`). `?backend=cpu` forces the CPU backend.
// window.dygraphDemo exposes the page's state and timings (the end-to-end test reads them).
import init, * as dy from "./pkg/dygraph_web.js";

const $ = (id) => document.getElementById(id);
const demo = (window.dygraphDemo = {
  ready: false, backend: null, webgpu: false, timings: {}, predictions: 0,
  training: { state: "idle", losses: [], accuracy: null, stepsPerSecond: null },
  checks: null, error: null,
});

function fail(where, e) {
  const msg = `${where}: ${e && e.message ? e.message : e}`;
  demo.error = msg;
  $("error").textContent = msg;
  console.error(msg);
}

async function fetchBytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status} (run web/make_data.py and wasm-pack build first)`);
  return new Uint8Array(await r.arrayBuffer());
}

// ---- start-up ----------------------------------------------------------------------------
async function boot() {
  const t0 = performance.now();
  await init();
  demo.timings.wasmInitMs = performance.now() - t0;
  const asked = new URLSearchParams(location.search).get("backend") === "cpu" ? "cpu" : "auto";
  demo.backend = await dy.start(asked);
  demo.webgpu = dy.using_webgpu();
  demo.timings.startMs = performance.now() - t0;
  const badge = $("backend");
  badge.textContent = demo.backend;
  badge.dataset.backend = demo.webgpu ? "webgpu" : "cpu";
  if (!demo.webgpu) {
    $("check-summary").textContent = "WebGPU is not available here: nothing to compare the CPU results with.";
    $("check-run").disabled = true;
  }
  dy.load_classifier(await fetchBytes("mnist.safetensors"));
  demo.timings.weightsLoadedMs = performance.now() - t0;
  demo.ready = true;
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

let predicting = Promise.resolve();
// Resolves when every prediction asked for so far has been shown.
demo.settled = () => predicting;
async function predict() {
  if (!demo.ready) return;
  // One prediction at a time; a release during one waits for it.
  predicting = predicting.then(async () => {
    const pixels = ink();
    showInput(dy.network_input(pixels, pad.width, pad.height));
    const t = performance.now();
    const probs = await dy.predict(pixels, pad.width, pad.height);
    const ms = performance.now() - t;
    if (demo.predictions === 0) demo.timings.firstPredictionMs = ms;
    else demo.timings.lastPredictionMs = ms;
    demo.predictions += 1;
    $("predict-ms").textContent = `${ms.toFixed(1)} ms`;
    showProbabilities(probs);
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
  const summary = dy.trainer_new(...trainData, 64, 2020);
  t.state = "training";
  $("train-status").textContent = `training on ${summary}`;
  // WebGPU queues several steps per readback; the CPU backend computes on this thread, so it
  // hands the page back after every step.
  const chunk = demo.webgpu ? 10 : 1;
  const started = performance.now();
  while (!stopAsked && t.losses.length < total) {
    const losses = await dy.train_steps(Math.min(chunk, total - t.losses.length));
    t.losses.push(...losses);
    t.stepsPerSecond = t.losses.length / ((performance.now() - started) / 1000);
    $("train-step").textContent = String(t.losses.length);
    $("train-loss").textContent = losses[losses.length - 1].toFixed(4);
    $("steps-per-second").textContent = t.stepsPerSecond.toFixed(1);
    drawChart(t.losses, total);
    await new Promise((r) => setTimeout(r, 0));
  }
  t.state = "evaluating";
  $("train-status").textContent = `${stopAsked ? "stopped" : "done"} after ${t.losses.length} steps; evaluating`;
  $("train-stop").disabled = true;
  t.accuracy = await dy.evaluate();
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
    for (const family of dy.check_families()) {
      $("check-summary").textContent = `running ${family}…`;
      for (const r of JSON.parse(await dy.run_checks(family))) {
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

boot().catch((e) => fail("start", e));

// End-to-end test of the demo page in headless Chromium, driven by playwright-core.
//
// Run 1 (WebGPU): draws real MNIST test digits on the canvas with the mouse and checks each
// predicted label, trains from scratch and checks the loss falls and the test accuracy, runs
// the Check panel, and saves a screenshot. Run 2 (Chromium without --enable-unsafe-webgpu:
// navigator.gpu is there but offers no adapter, as in Chrome on most Linux machines): checks
// the page says it fell back to the CPU backend, still predicts, and still trains. Run 3
// (navigator.gpu deleted in the page and its worker, as in a browser without WebGPU): checks
// the fallback says so, predicts, and that Stop ends a training. The training runs also check
// that no task on the page's thread lasts as long as a step (the Long Tasks API): the worker
// computes, the page only draws.
//
// Needs web/pkg (wasm-pack build web --target web) and web/data (python3 web/make_data.py).
// Env: CHROMIUM (default /usr/lib/chromium/chromium), E2E_OUT (default target/web-e2e),
// GPU_STEPS and CPU_STEPS (training steps of each run).
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync, gzipSync } from "node:zlib";
import { chromium } from "playwright-core";
import { serve } from "./serve.mjs";

const WEB = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = resolve(process.env.E2E_OUT ?? join(WEB, "..", "target", "web-e2e"));
const CHROMIUM = process.env.CHROMIUM ?? "/usr/lib/chromium/chromium";
// SwiftShader (CI's WebGPU) runs about 0.3 steps/s, the wasm CPU backend about 8.
const GPU_STEPS = parseInt(process.env.GPU_STEPS ?? "30", 10);
const CPU_STEPS = parseInt(process.env.CPU_STEPS ?? "60", 10);
// Test images drawn: the first of each digit 0–9 in the test set.
const DIGITS_TO_DRAW = 10;
const ARGS = ["--no-sandbox", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures += 1;
}

async function testDigits() {
  const images = gunzipSync(await readFile(join(WEB, "data", "t10k-images-idx3-ubyte.gz")));
  const labels = gunzipSync(await readFile(join(WEB, "data", "t10k-labels-idx1-ubyte.gz")));
  const picked = new Map();
  for (let i = 0; i < labels.length - 8 && picked.size < DIGITS_TO_DRAW; i++) {
    const label = labels[8 + i];
    if (!picked.has(label)) picked.set(label, { index: i, label, pixels: images.subarray(16 + i * 784, 16 + (i + 1) * 784) });
  }
  return [...picked.values()].sort((a, b) => a.label - b.label);
}

// Draws a 28×28 image on the canvas as mouse strokes: one stroke per horizontal run of
// bright pixels, scaled to the canvas (the page's brush is 20 px, two image pixels).
async function drawDigit(page, pixels) {
  await page.click("#clear");
  const box = await page.locator("#pad").boundingBox();
  const s = box.width / 28;
  const at = (x, y) => [box.x + (x + 0.5) * s, box.y + (y + 0.5) * s];
  for (let y = 0; y < 28; y++) {
    for (let x = 0; x < 28; x++) {
      if (pixels[y * 28 + x] < 128) continue;
      let end = x;
      while (end + 1 < 28 && pixels[y * 28 + end + 1] >= 128) end++;
      await page.mouse.move(...at(x, y));
      await page.mouse.down();
      await page.mouse.move(...at(end, y), { steps: 2 });
      await page.mouse.up();
      x = end;
    }
  }
  await page.evaluate(() => window.dygraphDemo.settled());
  return Number(await page.locator("#prediction").getAttribute("data-label"));
}

function trainingEnded(page, timeoutMs) {
  return page.waitForFunction(() => ["done", "stopped", "failed"].includes(window.dygraphDemo.training.state),
    null, { timeout: timeoutMs, polling: 200 });
}

async function train(page, steps, timeoutMs) {
  await page.fill("#train-steps", String(steps));
  await page.evaluate(() => { window.longTasks = []; });
  await page.click("#train-start");
  await trainingEnded(page, timeoutMs);
  return page.evaluate(() => ({ ...window.dygraphDemo.training, error: window.dygraphDemo.error,
    longestTaskMs: Math.max(0, ...window.longTasks) }));
}

// Starts a long training, presses Stop once a few steps are in, and returns the final state.
async function trainAndStop(page, afterSteps, timeoutMs) {
  await page.fill("#train-steps", "100000");
  await page.click("#train-start");
  await page.waitForFunction((n) => window.dygraphDemo.training.losses.length >= n || window.dygraphDemo.error,
    afterSteps, { timeout: timeoutMs, polling: 100 });
  await page.click("#train-stop");
  await trainingEnded(page, timeoutMs);
  return page.evaluate(() => ({ ...window.dygraphDemo.training, status: document.getElementById("train-status").textContent,
    startEnabled: !document.getElementById("train-start").disabled }));
}

// The long-task probe must see a task it should: a 150 ms busy loop on the page thread.
async function longTaskProbeWorks(page) {
  // A task of the page's own (code run by page.evaluate itself is not attributed to the page).
  await page.evaluate(() => {
    window.longTasks = [];
    setTimeout(() => { const t = performance.now(); while (performance.now() - t < 150); }, 0);
  });
  await page.waitForFunction(() => window.longTasks.some((d) => d >= 100), null, { timeout: 10000 }).catch(() => {});
  return page.evaluate(() => window.longTasks.some((d) => d >= 100));
}

const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;

async function run(browser, name, { webgpu, steps, stopAfter = 0, noNavigatorGpu = false }) {
  console.log(`\n== ${name} ==`);
  const context = await browser.newContext({ viewport: { width: 1100, height: 1300 } });
  await context.addInitScript(() => {
    window.longTasks = [];
    new PerformanceObserver((list) => { for (const e of list.getEntries()) window.longTasks.push(e.duration); })
      .observe({ type: "longtask" });
  });
  if (noNavigatorGpu) {
    // As in a browser without WebGPU: no navigator.gpu, in the page or in its worker.
    await context.addInitScript(() => { delete Navigator.prototype.gpu; });
    await context.route("**/worker.js", async (route) => {
      const response = await route.fetch();
      route.fulfill({ response, body: `delete WorkerNavigator.prototype.gpu;\n${await response.text()}` });
    });
  }
  const page = await context.newPage();
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  await page.goto(`${baseUrl}/index.html`);
  await page.waitForFunction(() => window.dygraphDemo?.ready || window.dygraphDemo?.error, null, { timeout: 120000 });
  const state = await page.evaluate(() => ({ ...window.dygraphDemo }));
  check(!state.error, `page started without error ${state.error ?? ""}`);
  const badge = await page.locator("#backend").textContent();
  const badgeKind = await page.locator("#backend").getAttribute("data-backend");
  console.log(`     backend: ${badge}`);
  if (webgpu) {
    check(state.webgpu && badgeKind === "webgpu" && badge.startsWith("WebGPU"), "the page runs on WebGPU and says so");
  } else {
    check(!state.webgpu && badgeKind === "cpu" && badge.includes("CPU (WebAssembly)") && badge.includes("no WebGPU"),
      "without WebGPU the page falls back to the CPU backend and says so");
  }

  const digits = (await testDigits()).filter((d) => steps > 0 || d.label === 7);
  const results = [];
  for (const d of digits) {
    const predicted = await drawDigit(page, d.pixels);
    results.push({ index: d.index, label: d.label, predicted });
  }
  const right = results.filter((r) => r.predicted === r.label).length;
  console.log(`     drawn digits (test index: label → predicted): ${results.map((r) => `${r.index}: ${r.label}→${r.predicted}`).join(", ")}`);
  check(right >= digits.length - (digits.length > 1 ? 1 : 0),
    `drawn test digits classified: ${right} of ${digits.length} (at most one miss in ten allowed)`);
  check(results.some((r) => r.label === 7 && r.predicted === 7), "the first test digit (a 7) is read as 7");
  const timings = await page.evaluate(() => window.dygraphDemo.timings);

  let training = null;
  if (steps > 0) {
    const trained = await train(page, steps, 540000);
    check(trained.state === "done", `training finished (${trained.state}${trained.error ? ": " + trained.error : ""})`);
    const losses = trained.losses;
    const k = Math.min(10, Math.floor(losses.length / 3));
    const [first, last] = [mean(losses.slice(0, k)), mean(losses.slice(-k))];
    console.log(`     ${losses.length} steps at ${trained.stepsPerSecond?.toFixed(2)} steps/s; loss ${first.toFixed(3)} → ${last.toFixed(3)}; test accuracy ${(trained.accuracy * 100).toFixed(1)}%`);
    console.log(`     the page thread's longest task while training: ${trained.longestTaskMs.toFixed(0)} ms`);
    check(losses.length === steps && losses.every(Number.isFinite), `${steps} finite losses recorded`);
    console.log(`     precision: ${trained.precision}`);
    const shown = await page.locator("#train-precision").textContent();
    const f16 = webgpu && (await page.evaluate(() => navigator.gpu?.requestAdapter().then((a) => a?.features.has("shader-f16") ?? false)));
    check(shown === trained.precision && trained.precision.startsWith(f16 ? "float16 mixed precision" : "float32"),
      `the page trains in ${f16 ? "float16 (this WebGPU has shader-f16)" : "float32"} and says so (${shown})`);
    check(last < 0.6 * first, `the loss falls (mean of the first ${k} ${first.toFixed(3)}, of the last ${k} ${last.toFixed(3)})`);
    check(trained.accuracy > 0.5, `test accuracy after ${steps} steps is above 50% (${(trained.accuracy * 100).toFixed(1)}%)`);
    // The worker runs the steps: no task on the page's thread comes near one step's length.
    const stepMs = 1000 / trained.stepsPerSecond;
    check(await longTaskProbeWorks(page), "the long-task probe sees a 150 ms task on the page thread");
    check(trained.longestTaskMs < stepMs,
      `the page thread stays free while training (longest task ${trained.longestTaskMs.toFixed(0)} ms, a step ${stepMs.toFixed(0)} ms)`);
    training = { steps: losses.length, stepsPerSecond: trained.stepsPerSecond, lossFirst: first, lossLast: last,
      accuracy: trained.accuracy, longestPageTaskMs: trained.longestTaskMs };
  }

  if (stopAfter) {
    const stopped = await trainAndStop(page, stopAfter, 120000);
    console.log(`     Stop pressed after ${stopAfter} steps: ${stopped.status}, ${stopped.losses.length} steps, test accuracy ${(stopped.accuracy * 100).toFixed(1)}%`);
    check(stopped.state === "stopped" && stopped.losses.length >= stopAfter && stopped.losses.length < stopAfter + 5 &&
      Number.isFinite(stopped.accuracy) && stopped.startEnabled,
      "Stop ends the training within a few steps, reports the test accuracy and re-enables Train");
  }

  let checks = null;
  if (webgpu) {
    await page.click("#check-run");
    await page.waitForFunction(() => window.dygraphDemo.checks || window.dygraphDemo.error, null, { timeout: 180000 });
    checks = await page.evaluate(() => window.dygraphDemo.checks);
    const bad = (checks ?? []).filter((r) => !r.passed);
    check(checks && checks.length > 20 && bad.length === 0,
      `Check panel: ${checks?.length ?? 0} WebGPU-vs-CPU comparisons, ${bad.length} differ ${bad.map((r) => r.name).join(", ")}`);
  } else {
    check(await page.locator("#check-run").isDisabled(), "the Check panel is disabled without WebGPU");
  }
  check(consoleErrors.length === 0, `no console errors ${consoleErrors.join(" | ")}`);
  const shot = join(OUT, `${name}.png`);
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`     screenshot: ${shot}`);
  await context.close();
  return { backend: badge, timings, digits: results, training, checks: checks?.length ?? 0 };
}

await mkdir(OUT, { recursive: true });
const wasm = await readFile(join(WEB, "pkg", "dygraph_web_bg.wasm"));
const glue = await readFile(join(WEB, "pkg", "dygraph_web.js"));
const sizes = { wasmBytes: wasm.length, wasmGzipBytes: gzipSync(wasm, { level: 9 }).length,
  glueGzipBytes: gzipSync(glue, { level: 9 }).length };
console.log(`wasm module: ${sizes.wasmBytes} bytes, ${sizes.wasmGzipBytes} gzipped; JS glue ${sizes.glueGzipBytes} gzipped`);
const server = await serve(WEB);
const baseUrl = `http://127.0.0.1:${server.address().port}`;
const summary = { sizes };
try {
  let browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...ARGS, "--enable-unsafe-webgpu"] });
  summary.webgpu = await run(browser, "webgpu", { webgpu: true, steps: GPU_STEPS });
  await browser.close();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  summary.cpu = await run(browser, "cpu-fallback", { webgpu: false, steps: CPU_STEPS });
  summary.noNavigatorGpu = await run(browser, "no-navigator-gpu", { webgpu: false, steps: 0, stopAfter: 3, noNavigatorGpu: true });
  await browser.close();
} finally {
  server.close();
}
await writeFile(join(OUT, "summary.json"), JSON.stringify(summary, null, 2));
console.log(`\nsummary: ${join(OUT, "summary.json")}`);
if (failures) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("all end-to-end checks passed");

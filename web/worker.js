// The page's dygraph worker: it owns the wasm module and answers app.js's calls, so neither
// the CPU backend's arithmetic nor WebGPU's command encoding ever runs on the page's thread.
// Messages in: {id, name, args}, `name` an export of pkg/dygraph_web.js or "init". Messages out:
// {id, value} or {id, error}. Typed arrays in results are transferred, not copied.
import init, * as dy from "./pkg/dygraph_web.js";

const instantiated = init();
const api = { ...dy, init: async () => { await instantiated; } };
delete api.default;
delete api.initSync;

onmessage = async ({ data: { id, name, args } }) => {
  try {
    await instantiated;
    const f = api[name];
    if (typeof f !== "function") throw new Error(`worker: dygraph-web has no function ${name}`);
    const value = await f(...args);
    postMessage({ id, value }, ArrayBuffer.isView(value) ? [value.buffer] : []);
  } catch (e) {
    postMessage({ id, error: e && e.message ? e.message : String(e) });
  }
};

// A static file server for web/ on 127.0.0.1 (the end-to-end test's; any static server works
// for the page, e.g. `python3 -m http.server -d web`). Files are sent as they are: the .gz
// data files are bytes for the page to gunzip, not a Content-Encoding.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize, sep } from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript",
  ".wasm": "application/wasm", ".json": "application/json", ".gz": "application/gzip",
  ".safetensors": "application/octet-stream", ".css": "text/css", ".png": "image/png",
  ".pdmodel": "text/plain; charset=utf-8", ".pdiparams": "application/octet-stream",
};

export function serve(root) {
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    const file = normalize(join(root, path.endsWith("/") ? path + "index.html" : path));
    if (!file.startsWith(root + sep) && file !== root) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, { "Content-Type": TYPES[extname(file)] ?? "application/octet-stream", "Cache-Control": "no-store" });
      res.end(body);
    } catch {
      res.writeHead(404).end(`${path} not found`);
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

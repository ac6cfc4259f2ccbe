//! The one table: dygraph's cells and PyTorch's (JSON lines from `torch_bench.py`), every
//! figure derived from seconds per iteration by the row's workload, plus the notes under it.

use std::collections::HashMap;

use crate::workloads::{Kind, Work, Workload};

/// One measurement.
#[derive(Clone)]
pub enum Cell {
    /// Seconds per iteration (per op for the host-cost rows).
    Secs(f64),
    Failed(String),
    /// Not measured, and why (said once under the table).
    Na,
}

impl Cell {
    fn secs(&self) -> Option<f64> {
        match self {
            Cell::Secs(s) => Some(*s),
            _ => None,
        }
    }
}

/// A table row: the workload and its four cells.
pub struct Row {
    pub workload: Workload,
    pub eager: Cell,
    pub static_: Cell,
    pub torch_eager: Cell,
    pub torch_graph: Cell,
}

/// What `torch_bench.py` reported.
#[derive(Default)]
pub struct Torch {
    /// Version and device, e.g. `2.15.0+cu132 on cuda (NVIDIA H100 80GB HBM3)`.
    pub about: String,
    /// Why the CUDA graph column is empty, when it is.
    pub graphs_na: Option<String>,
    /// A caveat about reading the PyTorch figures.
    pub note: Option<String>,
    /// Per workload id: (eager, graph).
    pub results: HashMap<String, (Cell, Cell)>,
}

/// Reads `torch_bench.py`'s output; lines that are not JSON objects (warnings) are skipped.
pub fn read_torch(text: &str) -> Torch {
    let mut t = Torch { about: "unknown version and device (no _meta line)".into(), ..Torch::default() };
    for obj in text.lines().filter_map(parse_object) {
        let s = |k: &str| match obj.get(k) {
            Some(Json::Str(v)) => Some(v.clone()),
            _ => None,
        };
        let Some(id) = s("id") else { continue };
        if id == "_meta" {
            t.about = format!("{} on {}", s("torch").unwrap_or_default(), s("device").unwrap_or_default());
            if !matches!(obj.get("graphs"), Some(Json::Bool(true))) {
                t.graphs_na = Some(s("graphs_note").unwrap_or_else(|| "no CUDA".into()));
            }
            t.note = s("note").filter(|n| !n.is_empty());
            continue;
        }
        let cell = |key: &str| match (obj.get(&format!("{key}_s")), s(&format!("{key}_error"))) {
            (_, Some(e)) => Cell::Failed(e),
            (Some(Json::Num(v)), None) => Cell::Secs(*v),
            _ => Cell::Na,
        };
        t.results.insert(id, (cell("eager"), cell("graph")));
    }
    t
}

#[derive(Debug)]
enum Json {
    Str(String),
    Num(f64),
    Bool(bool),
    /// null, or a nested value this reader does not need.
    Other,
}

/// A flat JSON object (string, number, bool or null values), or `None`.
fn parse_object(line: &str) -> Option<HashMap<String, Json>> {
    let mut p = Parser { s: line.trim().as_bytes(), i: 0 };
    p.eat(b'{')?;
    let mut out = HashMap::new();
    if p.peek()? == b'}' {
        return Some(out);
    }
    loop {
        let key = p.string()?;
        p.eat(b':')?;
        let value = match p.peek()? {
            b'"' => Json::Str(p.string()?),
            b't' | b'f' | b'n' => {
                let word = p.word();
                match word.as_str() {
                    "true" => Json::Bool(true),
                    "false" => Json::Bool(false),
                    "null" => Json::Other,
                    _ => return None,
                }
            }
            _ => Json::Num(p.word().parse().ok()?),
        };
        out.insert(key, value);
        match p.peek()? {
            b',' => p.i += 1,
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&mut self) -> Option<u8> {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    fn word(&mut self) -> String {
        let start = self.i;
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || b"+-.".contains(c)) {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            let c = *self.s.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = *self.s.get(self.i)?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' | b'f' => out.push(b' '),
                        b'u' => {
                            let hex = std::str::from_utf8(self.s.get(self.i..self.i + 4)?).ok()?;
                            self.i += 4;
                            // Surrogate halves (non-BMP) come out as U+FFFD: error text only.
                            let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
    }
}

/// Three significant digits, without exponent.
fn sig(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return format!("{x}");
    }
    let decimals = (2 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
    format!("{x:.decimals$}")
}

/// What the table needs besides the rows.
pub struct Context<'a> {
    /// Float32 peak in TFLOP/s, when known.
    pub peak: Option<f64>,
    /// How host time is measured (the calling thread's CPU time, or wall time).
    pub host_clock: &'a str,
    pub torch: Option<&'a Torch>,
    /// Why there is no PyTorch column content, when there is none.
    pub torch_missing: Option<String>,
}

fn unit(w: &Workload, cx: &Context<'_>) -> String {
    match w.work() {
        Work::Flops(_) if cx.peak.is_some() => "ms · TFLOP/s · % of peak".into(),
        Work::Flops(_) => "ms · TFLOP/s (peak unknown)".into(),
        Work::Bytes(_) if matches!(w.kind, Kind::Add { .. }) => "ms · GB/s · % of copy GB/s".into(),
        Work::Bytes(_) => "ms · GB/s".into(),
        Work::HostOp => format!("µs per op ({})", cx.host_clock),
        Work::Images(_) => "ms per step · images/s".into(),
    }
}

/// One cell's text; `copy_gbs` is the same column's copy bandwidth (for the add row's share).
fn figure(w: &Workload, secs: f64, copy_gbs: Option<f64>, cx: &Context<'_>) -> String {
    let ms = sig(secs * 1e3);
    match w.work() {
        Work::Flops(f) => {
            let tflops = f / secs / 1e12;
            // The peak is float32's: a float16 product's share of it would mislead.
            match cx.peak {
                Some(p) if !matches!(w.kind, Kind::MatmulF16 { .. }) => {
                    format!("{ms} · {} · {}%", sig(tflops), sig(100.0 * tflops / p))
                }
                _ => format!("{ms} · {}", sig(tflops)),
            }
        }
        Work::Bytes(b) => {
            let gbs = b / secs / 1e9;
            match copy_gbs {
                Some(c) if matches!(w.kind, Kind::Add { .. }) => {
                    format!("{ms} · {} · {}%", sig(gbs), sig(100.0 * gbs / c))
                }
                _ => format!("{ms} · {}", sig(gbs)),
            }
        }
        Work::HostOp => sig(secs * 1e6),
        Work::Images(n) => format!("{ms} · {}", sig(n as f64 / secs)),
    }
}

/// dygraph's speed over PyTorch's (time ratio inverted): above 1, dygraph is faster.
fn ratio(ours: &Cell, theirs: &Cell) -> String {
    match (ours.secs(), theirs.secs()) {
        (Some(a), Some(b)) => format!("{}×", sig(b / a)),
        _ => "n/a".into(),
    }
}

/// Selects one of a row's four measured cells.
type Pick = fn(&Row) -> &Cell;

/// The markdown table, then the notes (failures included). Returns the text and whether
/// any cell failed.
pub fn render(rows: &[Row], cx: &Context<'_>) -> (String, bool) {
    let copy_gbs = |pick: Pick| {
        let r = rows.iter().find(|r| matches!(r.workload.kind, Kind::Copy { .. }))?;
        let Work::Bytes(b) = r.workload.work() else { return None };
        pick(r).secs().map(|s| b / s / 1e9)
    };
    let columns: [(Pick, Option<f64>); 4] = [
        (|r| &r.eager, copy_gbs(|r| &r.eager)),
        (|r| &r.static_, copy_gbs(|r| &r.static_)),
        (|r| &r.torch_eager, copy_gbs(|r| &r.torch_eager)),
        (|r| &r.torch_graph, copy_gbs(|r| &r.torch_graph)),
    ];
    let mut failures = Vec::new();
    let mut out = String::from(
        "| workload | unit | dygraph eager | dygraph static | PyTorch eager | PyTorch CUDA graph \
         | eager ÷ PT eager | static ÷ PT eager | static ÷ PT graph |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let w = &r.workload;
        let mut cells = vec![w.label(), unit(w, cx)];
        for (col, (pick, copy)) in
            ["dygraph eager", "dygraph static", "PyTorch eager", "PyTorch CUDA graph"].iter().zip(&columns)
        {
            cells.push(match pick(r) {
                Cell::Secs(s) => figure(w, *s, *copy, cx),
                Cell::Failed(e) => {
                    failures.push(format!("- {} / {col}: {}", w.label(), e.replace('\n', " ")));
                    "FAILED".into()
                }
                Cell::Na => "n/a".into(),
            });
        }
        cells.push(ratio(&r.eager, &r.torch_eager));
        cells.push(ratio(&r.static_, &r.torch_eager));
        cells.push(ratio(&r.static_, &r.torch_graph));
        out += &format!("| {} |\n", cells.join(" | "));
    }
    out += "\nRatios are dygraph's speed over PyTorch's from the time per iteration (above 1: dygraph faster). \
            dygraph static runs each workload as a Program through static_::Executor; its host-cost rows divide \
            one run of the chained program by the chain length.\n";
    match (cx.torch, &cx.torch_missing) {
        (Some(t), _) => {
            out += &format!("PyTorch: {}.\n", t.about);
            if let Some(why) = &t.graphs_na {
                out += &format!("PyTorch CUDA graph: n/a, {why}.\n");
            }
            if let Some(note) = &t.note {
                out += &format!("PyTorch note: {note}.\n");
            }
        }
        (None, Some(why)) => out += &format!("PyTorch: n/a, {why}.\n"),
        (None, None) => out += "PyTorch: n/a, not run (pass --torch FILE, as benches/gpu/run.sh does).\n",
    }
    let failed = !failures.is_empty();
    if failed {
        out += &format!("\nFailed ({}):\n{}\n", failures.len(), failures.join("\n"));
    }
    (out, failed)
}

//! `Display` for tensors in Paddle 2.x's exact layout, and numpy's `str()` layout for host
//! arrays.
//!
//! ```text
//! Tensor(shape=[4, 2], dtype=float32, place=CPUPlace, stop_gradient=True,
//!        [[ 1.60883498,  0.43853286],
//!         [-1.14591110,  1.26320088], ...
//! ```
//! Floats print with 8 decimals (integral values as `1.`), every item is padded to the
//! widest one, positive items get a leading space when some item is negative, and tensors
//! past 1000 elements are summarised with `...`.

use std::fmt;
use std::sync::Mutex;

use crate::backend::cpu::CpuData;
use crate::{DType, Element, Tensor};

/// Printing options (`paddle.set_printoptions`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrintOptions {
    /// Digits after the decimal point for floats.
    pub precision: usize,
    /// Element count above which the tensor is summarised.
    pub threshold: usize,
    /// Items kept at each end of a summarised axis.
    pub edgeitems: usize,
    /// Characters per line before 1-D rows wrap.
    pub linewidth: usize,
    /// Scientific notation for floats.
    pub sci_mode: bool,
}

impl Default for PrintOptions {
    fn default() -> Self {
        PrintOptions { precision: 8, threshold: 1000, edgeitems: 3, linewidth: 80, sci_mode: false }
    }
}

static OPTIONS: Mutex<PrintOptions> =
    Mutex::new(PrintOptions { precision: 8, threshold: 1000, edgeitems: 3, linewidth: 80, sci_mode: false });

/// Sets the options every later `Display` of a tensor uses.
pub fn set_printoptions(options: PrintOptions) {
    *OPTIONS.lock().unwrap_or_else(|e| e.into_inner()) = options;
}

fn options() -> PrintOptions {
    *OPTIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// One element, typed for formatting.
#[derive(Clone, Copy)]
enum Item {
    Float(f64),
    Int(i64),
    Bool(bool),
}

impl Item {
    fn negative(self) -> bool {
        match self {
            Item::Float(v) => v < 0.0,
            Item::Int(v) => v < 0,
            Item::Bool(_) => false,
        }
    }
}

/// Python's `'{:.{p}e}'` (mantissa, `e`, sign, at least two exponent digits).
fn sci(v: f64, p: usize) -> String {
    let s = format!("{v:.p$e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = if let Some(d) = e.strip_prefix('-') { ('-', d) } else { ('+', e) };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

fn python_float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{v:.0}")
    }
}

fn format_item(item: Item, opts: &PrintOptions) -> String {
    match item {
        Item::Float(v) => {
            if opts.sci_mode {
                sci(v, opts.precision)
            } else if v.ceil() == v || v.is_infinite() {
                // Paddle: np.ceil(x) == x → '{:.0f}.'
                format!("{}.", python_float(v))
            } else if v.is_nan() {
                "nan".into()
            } else {
                format!("{v:.prec$}", prec = opts.precision)
            }
        }
        Item::Int(v) => v.to_string(),
        Item::Bool(b) => {
            if b {
                "True".into()
            } else {
                "False".into()
            }
        }
    }
}

fn pad_item(item: Item, width: usize, signed: bool, opts: &PrintOptions) -> String {
    let s = format_item(item, opts);
    if width > s.len() {
        if signed && !item.negative() { format!(" {s:<w$}", w = width - 1) } else { format!("{s:<width$}") }
    } else {
        s
    }
}

struct Formatter<'a> {
    items: &'a [Item],
    shape: &'a [usize],
    summary: bool,
    width: usize,
    signed: bool,
    opts: PrintOptions,
}

impl Formatter<'_> {
    /// Indices of axis entries shown (None marks the `...`).
    fn shown(&self, n: usize) -> Vec<Option<usize>> {
        let e = self.opts.edgeitems;
        if self.summary && n > 2 * e {
            (0..e).map(Some).chain(std::iter::once(None)).chain((n - e..n).map(Some)).collect()
        } else {
            (0..n).map(Some).collect()
        }
    }

    fn format(&self, dim: usize, offset: usize, indent: usize) -> String {
        let shape = &self.shape[dim..];
        if shape.is_empty() {
            return pad_item(self.items[offset], self.width, self.signed, &self.opts);
        }
        let stride: usize = shape[1..].iter().product();
        if shape.len() == 1 {
            let per_line = ((self.opts.linewidth.saturating_sub(indent)) / (self.width + 2)).max(1);
            let items: Vec<String> = self
                .shown(shape[0])
                .into_iter()
                .map(|i| match i {
                    Some(i) => pad_item(self.items[offset + i], self.width, self.signed, &self.opts),
                    None => "...".into(),
                })
                .collect();
            let lines: Vec<String> = items.chunks(per_line).map(|l| l.join(", ")).collect();
            return format!("[{}]", lines.join(&format!(",\n{}", " ".repeat(indent + 1))));
        }
        let parts: Vec<String> = self
            .shown(shape[0])
            .into_iter()
            .map(|i| match i {
                Some(i) => self.format(dim + 1, offset + i * stride, indent + 1),
                None => "...".into(),
            })
            .collect();
        let sep = format!(",{}{}", "\n".repeat(shape.len() - 1), " ".repeat(indent + 1));
        format!("[{}]", parts.join(&sep))
    }
}

/// Positions of the items Paddle's `_to_summary` keeps: the edges of every axis longer
/// than `2 * edge`.
fn summary_positions(shape: &[usize], edge: usize) -> Vec<usize> {
    let mut out = vec![0usize];
    for (d, &n) in shape.iter().enumerate() {
        let stride: usize = shape[d + 1..].iter().product();
        let idx: Vec<usize> = if n > 2 * edge { (0..edge).chain(n - edge..n).collect() } else { (0..n).collect() };
        out = out.iter().flat_map(|&base| idx.iter().map(move |&i| base + i * stride)).collect();
    }
    out
}

fn items_of(data: &CpuData) -> Vec<Item> {
    let n = data.len();
    match data.dtype() {
        DType::Bool => (0..n).map(|i| Item::Bool(data.get_i64(i) != 0)).collect(),
        DType::Int32 | DType::Int64 => (0..n).map(|i| Item::Int(data.get_i64(i))).collect(),
        _ => (0..n).map(|i| Item::Float(data.get_f64(i))).collect(),
    }
}

/// Paddle's `to_string` body (the part after the header) for `data` of `shape`.
pub(crate) fn format_data(data: &CpuData, shape: &[usize], indent: usize) -> String {
    let opts = options();
    let items = items_of(data);
    let size: usize = if shape.is_empty() { 0 } else { shape.iter().product() };
    let summary = size > opts.threshold;
    let mut width = 0;
    let mut signed = false;
    if !items.is_empty() {
        // Paddle measures the width and sign over `_to_summary(x)` even when it does not
        // summarise, so only the edge items of each axis count (an interior item may print
        // wider than the rest).
        for p in summary_positions(shape, opts.edgeitems) {
            let it = items[p];
            signed |= it.negative();
            width = width.max(format_item(it, &opts).len());
        }
    }
    Formatter { items: &items, shape, summary, width, signed, opts }.format(0, 0, indent)
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v) = self.var_ref() {
            // Paddle's form for a static variable.
            let Some(d) = v.program.var(&v.program.var_name(v.id)) else {
                return write!(f, "var <missing>");
            };
            let dims: Vec<String> = d.shape.iter().map(|x| x.to_string()).collect();
            return write!(
                f,
                "var {} : LOD_TENSOR.shape({}).dtype({}).stop_gradient({})",
                d.name,
                dims.join(", "),
                d.dtype,
                if self.stop_gradient() { "True" } else { "False" }
            );
        }
        let prefix = "Tensor";
        let indent = prefix.len() + 1;
        let header = format!(
            "{prefix}(shape={:?}, dtype={}, place={}, stop_gradient={},",
            self.shape(),
            self.dtype(),
            self.place(),
            if self.stop_gradient() { "True" } else { "False" }
        );
        match self.to_cpu_data("display") {
            Ok(data) => write!(f, "{header}\n{}{})", " ".repeat(indent), format_data(&data, self.shape(), indent)),
            Err(e) => write!(f, "{header}\n{}<unavailable: {e}>)", " ".repeat(indent)),
        }
    }
}

fn numpy_item<T: Element>(v: T) -> (String, bool) {
    let d = T::DTYPE;
    if d.is_float() {
        let x = v.to_f64();
        let s = if x.is_nan() {
            "nan".into()
        } else if x.is_infinite() {
            if x > 0.0 { "inf".into() } else { "-inf".into() }
        } else if d == DType::Float32 {
            format!("{}", x as f32)
        } else {
            format!("{x}")
        };
        (s, true)
    } else if d == DType::Bool {
        ((if v.to_i64() != 0 { "True" } else { "False" }).into(), false)
    } else {
        (v.to_i64().to_string(), false)
    }
}

/// numpy's `str()` of an array: `[ 5  9 15]`, `[1.5 2. ]`, nested rows on new lines.
pub(crate) fn numpy_str<T: Element>(data: &[T], shape: &[usize]) -> String {
    let raw: Vec<(String, bool)> = data.iter().map(|&v| numpy_item(v)).collect();
    let is_float = raw.first().is_some_and(|r| r.1);
    let cells: Vec<String> = if is_float {
        let finite = |s: &str| s.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '-');
        let split: Vec<(String, String)> = raw
            .iter()
            .map(|(s, _)| match s.split_once('.') {
                Some((i, f)) => (i.to_string(), f.to_string()),
                None if finite(s) && s != "-inf" => (s.clone(), String::new()),
                None => (s.clone(), "\u{0}".into()),
            })
            .collect();
        let frac = split.iter().filter(|(_, f)| f != "\u{0}").map(|(_, f)| f.len()).max().unwrap_or(0);
        split.iter().map(|(i, f)| if f == "\u{0}" { i.clone() } else { format!("{i}.{f:<frac$}") }).collect()
    } else {
        raw.into_iter().map(|(s, _)| s).collect()
    };
    let width = cells.iter().map(|c| c.len()).max().unwrap_or(0);
    fn rec(cells: &[String], shape: &[usize], width: usize, depth: usize) -> String {
        if shape.is_empty() {
            return cells.first().cloned().unwrap_or_default();
        }
        if shape.len() == 1 {
            let row: Vec<String> = cells.iter().map(|c| format!("{c:>width$}")).collect();
            return format!("[{}]", row.join(" "));
        }
        let stride: usize = shape[1..].iter().product();
        let parts: Vec<String> =
            (0..shape[0]).map(|i| rec(&cells[i * stride..(i + 1) * stride], &shape[1..], width, depth + 1)).collect();
        let sep = format!("{}{}", "\n".repeat(shape.len() - 1), " ".repeat(depth + 1));
        format!("[{}]", parts.join(&sep))
    }
    rec(&cells, shape, width, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_data(v: &[f32]) -> CpuData {
        CpuData::F32(v.to_vec())
    }

    #[test]
    fn paddle_layout_of_the_seed_tensors() {
        // Values of the Paddle 2.2 seed (001): `print(a)` of a [4, 2] randn tensor.
        let a = f32_data(&[
            -0.24989827,
            0.662_012_7,
            -1.581_358,
            0.07232992,
            -0.960_442_3,
            0.317_901_6,
            1.123_846_4,
            0.663_615_2,
        ]);
        assert_eq!(
            format_data(&a, &[4, 2], 7),
            "[[-0.24989827,  0.66201270],\n        [-1.58135796,  0.07232992],\n        [-0.96044230,  0.31790161],\n        [ 1.12384641,  0.66361523]]"
        );
        assert_eq!(format_data(&f32_data(&[1.0, 2.0]), &[2], 7), "[1., 2.]");
        assert_eq!(format_data(&CpuData::I64(vec![1, 10, 100]), &[3], 7), "[1  , 10 , 100]");
    }

    #[test]
    fn numpy_str_of_int_and_float_arrays() {
        assert_eq!(numpy_str(&[5i64, 9, 15], &[3]), "[ 5  9 15]");
        assert_eq!(numpy_str(&[-3i64, 3, 21], &[3]), "[-3  3 21]");
        assert_eq!(numpy_str(&[1.5f32, 2.0], &[2]), "[1.5 2. ]");
        assert_eq!(numpy_str(&[1i32, 2, 3, 4], &[2, 2]), "[[1 2]\n [3 4]]");
    }
}

//! `paddle.summary`: a table of a model's built-in layers (type, input and output shapes,
//! parameter count) and its totals, computed on meta tensors, so no kernel runs and any
//! input size costs nothing.

use std::cell::RefCell;
use std::fmt;

use crate::nn::{Forward, Layer};
use crate::{DType, Result, Tensor, current_place};

/// One row of the table: a built-in layer's call.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    /// `Conv2D-1`: the layer type and its count among layers of that type.
    pub name: String,
    /// The input's shape.
    pub input_shape: Vec<usize>,
    /// The output's shape.
    pub output_shape: Vec<usize>,
    /// Parameters the layer owns directly.
    pub params: usize,
}

/// What [`summary`] computed (it also prints it, as Paddle does).
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The rows, in call order.
    pub rows: Vec<SummaryRow>,
    /// Every parameter of the model.
    pub total_params: usize,
    /// Parameters with `stop_gradient = false`.
    pub trainable_params: usize,
    /// The input's shape.
    pub input_size: Vec<usize>,
}

thread_local! {
    static TRACE: RefCell<Option<Vec<(&'static str, SummaryRow)>>> = const { RefCell::new(None) };
}

/// Runs a built-in layer's forward `f` on `x`, recording a row when a summary is being taken.
pub(crate) fn traced<L: Layer + ?Sized>(
    layer: &L,
    type_name: &'static str,
    x: &Tensor,
    f: impl FnOnce() -> Result<Tensor>,
) -> Result<Tensor> {
    let active = TRACE.with(|t| t.borrow().is_some());
    let y = f()?;
    if active {
        let mut params = 0;
        layer.visit_parameters(&mut |_, p| params += p.numel());
        TRACE.with(|t| {
            if let Some(rows) = t.borrow_mut().as_mut() {
                let count = rows.iter().filter(|(ty, _)| *ty == type_name).count() + 1;
                let row = SummaryRow {
                    name: format!("{type_name}-{count}"),
                    input_shape: x.shape().to_vec(),
                    output_shape: y.shape().to_vec(),
                    params,
                };
                rows.push((type_name, row));
            }
        });
    }
    Ok(y)
}

/// Restores the previous trace when the summary ends (also on error).
struct TraceGuard(Option<Vec<(&'static str, SummaryRow)>>);

impl Drop for TraceGuard {
    fn drop(&mut self) {
        let prev = self.0.take();
        TRACE.with(|t| *t.borrow_mut() = prev);
    }
}

/// Prints and returns the summary of `net` for a float32 input of `input_size` (batch
/// included, e.g. `[1, 1, 28, 28]`), as `paddle.summary(net, input_size)`. The forward pass
/// runs on a meta tensor on the model's place: only shapes are computed.
pub fn summary<L: Layer + Forward + ?Sized>(net: &L, input_size: &[usize]) -> Result<Summary> {
    let s = summarize(net, input_size)?;
    print!("{s}");
    Ok(s)
}

/// [`summary`] without printing.
pub fn summarize<L: Layer + Forward + ?Sized>(net: &L, input_size: &[usize]) -> Result<Summary> {
    summarize_with(net, input_size, DType::Float32)
}

/// [`summarize`] for an input of `dtype` (int64 ids for an embedding, Paddle's `dtypes`).
pub fn summarize_with<L: Layer + Forward + ?Sized>(net: &L, input_size: &[usize], dtype: DType) -> Result<Summary> {
    let place = match net.parameters().first() {
        Some(p) => p.place(),
        None => current_place()?,
    };
    let x = Tensor::meta(input_size.to_vec(), dtype, place);
    let prev = TRACE.with(|t| t.borrow_mut().replace(Vec::new()));
    let guard = TraceGuard(prev);
    crate::no_grad(|| net.forward(&x))?;
    let rows = TRACE.with(|t| t.borrow_mut().take()).unwrap_or_default();
    drop(guard);
    // After the forward pass: layers that build their weights on the first call (FC) have
    // them now.
    let params = net.parameters();
    Ok(Summary {
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        total_params: params.iter().map(|p| p.numel()).sum(),
        trainable_params: params.iter().filter(|p| !p.stop_gradient()).map(|p| p.numel()).sum(),
        input_size: input_size.to_vec(),
    })
}

/// `33580` as `33,580`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn centered(s: &str, width: usize) -> String {
    format!("{s:^width$}")
}

impl fmt::Display for Summary {
    /// Paddle's summary table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = "-".repeat(75);
        let double = "=".repeat(75);
        writeln!(f, "{line}")?;
        writeln!(
            f,
            "{}{}{}{}",
            centered("Layer (type)", 15),
            centered("Input Shape", 20),
            centered("Output Shape", 20),
            centered("Param #", 15)
        )?;
        writeln!(f, "{double}")?;
        for r in &self.rows {
            writeln!(
                f,
                "{}{}{}{}",
                centered(&r.name, 15),
                centered(&format!("[{:?}]", r.input_shape), 20),
                centered(&format!("{:?}", r.output_shape), 20),
                centered(&thousands(r.params), 15)
            )?;
        }
        writeln!(f, "{double}")?;
        writeln!(f, "Total params: {}", thousands(self.total_params))?;
        writeln!(f, "Trainable params: {}", thousands(self.trainable_params))?;
        writeln!(f, "Non-trainable params: {}", thousands(self.total_params - self.trainable_params))?;
        writeln!(f, "{line}")?;
        let mb = |elements: usize| elements as f64 * 4.0 / (1024.0 * 1024.0);
        let input = mb(self.input_size.iter().product());
        let activations = 2.0 * mb(self.rows.iter().map(|r| r.output_shape.iter().product::<usize>()).sum());
        let params = mb(self.total_params);
        writeln!(f, "Input size (MB): {input:.2}")?;
        writeln!(f, "Forward/backward pass size (MB): {activations:.2}")?;
        writeln!(f, "Params size (MB): {params:.2}")?;
        writeln!(f, "Estimated Total Size (MB): {:.2}", input + activations + params)?;
        writeln!(f, "{line}")
    }
}

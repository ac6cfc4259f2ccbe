//! Recurrent layers: `SimpleRNN`, `LSTM` and `GRU` (`paddle.nn.*`), multi-layer and
//! bidirectional, batch-first unless `time_major`, with Paddle's gate order (LSTM `i, f, g,
//! o`; GRU `r, z, c`), parameter names (`weight_ih_l0`, `bias_hh_l1_reverse`, ...) and
//! shapes (`weight_ih: [gates·hidden, input]`), initialised U(±1/√hidden).
//!
//! Each layer projects the whole input sequence at once (`x·W_ihᵀ + b_ih`, one matmul),
//! then steps through time with one `h·W_hhᵀ` product per step; everything is registered
//! ops, so gradients, both places and static programs (unrolled over the time steps) come
//! with them.
//!
//! Paddle's `sequence_length` (an integer tensor `[batch]` of valid lengths, each in
//! `0..=time`) goes to `forward_with_lengths`: at a step `t ≥ length[b]` sequence `b`'s
//! state is carried unchanged and its output is zero, so the final states are those of each
//! sequence's last valid step. The reverse direction of a bidirectional layer walks from the
//! last step down to 0 under the same mask, which reads each sequence from its own last
//! valid step (`length − 1`) down to 0 — the valid part reversed, padded steps giving zero
//! outputs. A stack hands the masked outputs to the next layer with the same lengths. The
//! masking is a float mask `m` per step, `h = m·h_new + (1 − m)·h_old` and output `m·h_new`
//! (exact for `m ∈ {0, 1}`), so gradients and both places come with it; bad lengths (shape,
//! dtype or values) are typed [`Error::InvalidArgument`]s naming the layer.

use crate::nn::Layer;
use crate::nn::init::{Initializer, ParamAttr, create_parameter};
use crate::ops::nn::DropoutOptions;
use crate::{DType, Error, Result, Tensor};

/// Which way a recurrent layer reads its sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// First to last step (Paddle's `"forward"`).
    Forward,
    /// Both ways, outputs concatenated on the feature axis (`"bidirect"`).
    Bidirect,
}

impl Direction {
    fn count(self) -> usize {
        if self == Direction::Bidirect { 2 } else { 1 }
    }
}

/// The nonlinearity of a `SimpleRNN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnActivation {
    /// Hyperbolic tangent (the default).
    Tanh,
    /// `max(x, 0)`.
    Relu,
}

/// The cell a recurrent stack runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Simple(RnnActivation),
    Lstm,
    Gru,
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Simple(_) => 1,
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
}

/// One direction of one layer's parameters.
struct CellWeights {
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor,
    bias_hh: Tensor,
}

/// Options shared by the recurrent layers (Paddle's constructor keywords).
#[derive(Clone, Copy, Debug)]
pub struct RnnOptions {
    /// Stacked layers.
    pub num_layers: usize,
    /// One direction or both.
    pub direction: Direction,
    /// Inputs and outputs are `[time, batch, features]` instead of batch-first.
    pub time_major: bool,
    /// Dropout on the outputs of every layer but the last, in training.
    pub dropout: f64,
}

impl Default for RnnOptions {
    fn default() -> Self {
        RnnOptions { num_layers: 1, direction: Direction::Forward, time_major: false, dropout: 0.0 }
    }
}

/// The stack every recurrent layer is.
struct RnnStack {
    cell: Cell,
    input_size: usize,
    hidden_size: usize,
    options: RnnOptions,
    /// Index `layer · directions + direction`.
    weights: Vec<CellWeights>,
    training: bool,
}

impl RnnStack {
    fn new(cell: Cell, input_size: usize, hidden_size: usize, options: RnnOptions) -> Result<Self> {
        let name = match cell {
            Cell::Simple(_) => "SimpleRNN",
            Cell::Lstm => "LSTM",
            Cell::Gru => "GRU",
        };
        if hidden_size == 0 || options.num_layers == 0 {
            return Err(Error::invalid(name, "hidden_size and num_layers must be at least 1"));
        }
        let k = 1.0 / (hidden_size as f64).sqrt();
        let init = ParamAttr::with_initializer(Initializer::Uniform { low: -k, high: k });
        let g = cell.gates() * hidden_size;
        let dirs = options.direction.count();
        let mut weights = Vec::new();
        for layer in 0..options.num_layers {
            let width = if layer == 0 { input_size } else { hidden_size * dirs };
            for _ in 0..dirs {
                let p = |shape: &[usize]| create_parameter(shape, DType::Float32, &init, &Initializer::Constant(0.0));
                weights.push(CellWeights {
                    weight_ih: p(&[g, width])?,
                    weight_hh: p(&[g, hidden_size])?,
                    bias_ih: p(&[g])?,
                    bias_hh: p(&[g])?,
                });
            }
        }
        Ok(RnnStack { cell, input_size, hidden_size, options, weights, training: true })
    }

    /// Paddle's name of parameter `what` of layer `l`, direction `d`.
    fn param_name(&self, what: &str, index: usize) -> String {
        let dirs = self.options.direction.count();
        let suffix = if index % dirs == 1 { "_reverse" } else { "" };
        format!("{what}_l{}{suffix}", index / dirs)
    }

    /// Runs the stack: the outputs and, per (layer, direction), the final hidden state (and
    /// cell state for an LSTM). `initial` holds `[layers·dirs, batch, hidden]` states;
    /// `lengths` the valid length of each sequence (see the module docs).
    fn run(&self, x: &Tensor, initial: &[Tensor], lengths: Option<&Tensor>) -> Result<(Tensor, Vec<Vec<Tensor>>)> {
        let name = self.name();
        if x.ndim() != 3 || x.shape()[2] != self.input_size {
            return Err(Error::shape(
                name,
                format!(
                    "input must be [batch, time, {}] (time-major: [time, batch, ..]), got {:?}",
                    self.input_size,
                    x.shape()
                ),
            ));
        }
        let x = if self.options.time_major { x.transpose(&[1, 0, 2])? } else { x.clone() };
        let (batch, steps) = (x.shape()[0], x.shape()[1]);
        if steps == 0 {
            return Err(Error::shape(name, "the sequence has no time steps"));
        }
        let (dirs, layers) = (self.options.direction.count(), self.options.num_layers);
        let states = if self.cell == Cell::Lstm { 2 } else { 1 };
        let initial: Vec<Vec<Tensor>> = initial.iter().map(|s| s.unbind(0)).collect::<Result<_>>()?;
        for (k, s) in initial.iter().enumerate() {
            let want = [layers * dirs, batch, self.hidden_size];
            if s.len() != want[0] || s.iter().any(|t| t.shape() != &want[1..]) {
                return Err(Error::shape(name, format!("initial state {k} must be {want:?}")));
            }
        }
        let mask = lengths.map(|l| self.step_mask(l, &x)).transpose()?;
        let mut input = x;
        let mut finals = vec![Vec::new(); states];
        for layer in 0..layers {
            let mut outs = Vec::new();
            for d in 0..dirs {
                let index = layer * dirs + d;
                let init: Vec<Tensor> = initial.iter().map(|s| s[index].clone()).collect();
                let (seq, last) = self.run_direction(&input, &self.weights[index], d == 1, init, mask.as_ref())?;
                outs.push(seq);
                for (f, s) in finals.iter_mut().zip(last) {
                    f.push(s);
                }
            }
            input = if dirs == 1 { outs.remove(0) } else { crate::concat(&outs, -1)? };
            if layer + 1 < layers && self.options.dropout > 0.0 {
                let opts = DropoutOptions { p: self.options.dropout, training: self.training, ..Default::default() };
                input = crate::dropout(&input, opts)?;
            }
        }
        let out = if self.options.time_major { input.transpose(&[1, 0, 2])? } else { input };
        Ok((out, finals))
    }

    /// `run` for the cells with one state (SimpleRNN, GRU): the outputs and the final hidden
    /// states stacked `[layers·dirs, batch, hidden]`.
    fn run_hidden(&self, x: &Tensor, h0: Option<&Tensor>, lengths: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let (out, finals) = self.run(x, &h0.into_iter().cloned().collect::<Vec<_>>(), lengths)?;
        Ok((out, crate::stack(&finals[0], 0)?))
    }

    /// Checks `sequence_length` against the batch-first input `x` and returns the bool mask
    /// `[batch, time]`, true where `t < length[b]`.
    fn step_mask(&self, lengths: &Tensor, x: &Tensor) -> Result<Tensor> {
        let name = self.name();
        let (batch, steps) = (x.shape()[0], x.shape()[1]);
        if !lengths.dtype().is_int() {
            return Err(Error::invalid(
                name,
                format!("sequence_length must be an int32 or int64 tensor, got {:?}", lengths.dtype()),
            ));
        }
        let symbolic = lengths.is_static_var() || x.is_static_var();
        if lengths.ndim() != 1 || (!symbolic && lengths.shape()[0] != batch) {
            return Err(Error::invalid(
                name,
                format!(
                    "sequence_length must have shape [{batch}] (one length per sequence), got {:?}",
                    lengths.shape()
                ),
            ));
        }
        let lengths = if symbolic || lengths.place() == x.place() { lengths.clone() } else { lengths.to(x.place())? };
        if !symbolic {
            let values: Vec<i64> = lengths.to_f64_vec()?.into_iter().map(|v| v as i64).collect();
            if values.iter().any(|&v| v < 0 || v as usize > steps) {
                return Err(Error::invalid(
                    name,
                    format!("sequence_length values must lie in 0..={steps} (the time steps), got {values:?}"),
                ));
            }
        }
        let t = crate::arange_on(0, steps as i64, 1, DType::Int64, x.place())?.unsqueeze(&[0])?;
        t.less_than(&lengths.cast(DType::Int64)?.unsqueeze(&[1])?)
    }

    /// One direction of one layer over `[batch, time, features]`: the outputs
    /// `[batch, time, hidden]` and the final states. With `mask` (bool `[batch, time]`), a
    /// masked step keeps the state and outputs zeros.
    fn run_direction(
        &self,
        x: &Tensor,
        w: &CellWeights,
        reverse: bool,
        initial: Vec<Tensor>,
        mask: Option<&Tensor>,
    ) -> Result<(Tensor, Vec<Tensor>)> {
        let steps = x.shape()[1];
        let hsz = self.hidden_size as i64;
        let projected = crate::linear(x, &w.weight_ih.t()?, Some(&w.bias_ih))?;
        let step_input = |t: usize| crate::slice(&projected, &[1], &[t as i64], &[t as i64 + 1])?.squeeze(&[1]);
        let order: Vec<usize> = if reverse { (0..steps).rev().collect() } else { (0..steps).collect() };
        let mut state = if initial.is_empty() {
            // Zeros shaped [batch, hidden] from the data, so a static program keeps its
            // unknown batch.
            let zeros = crate::full_like(&crate::slice(&step_input(order[0])?, &[1], &[0], &[hsz])?, 0)?;
            vec![zeros; if self.cell == Cell::Lstm { 2 } else { 1 }]
        } else {
            initial
        };
        // The mask in the states' dtype, and its complement.
        let keep = match mask {
            Some(m) => {
                let m = m.cast(projected.dtype())?;
                let rest = m.scale(-1.0, 1.0)?;
                Some((m, rest))
            }
            None => None,
        };
        let mut outputs = vec![None; steps];
        for &t in &order {
            let xp = step_input(t)?;
            let hp = crate::linear(&state[0], &w.weight_hh.t()?, Some(&w.bias_hh))?;
            let new = self.step(&xp, &hp, &state)?;
            match &keep {
                None => {
                    state = new;
                    outputs[t] = Some(state[0].clone());
                }
                Some((m, rest)) => {
                    let at = |a: &Tensor| crate::slice(a, &[1], &[t as i64], &[t as i64 + 1]);
                    let (m, rest) = (at(m)?, at(rest)?);
                    outputs[t] = Some(new[0].mul(&m)?);
                    state = new
                        .iter()
                        .zip(&state)
                        .map(|(n, old)| n.mul(&m)?.add(&old.mul(&rest)?))
                        .collect::<Result<_>>()?;
                }
            }
        }
        let outputs: Vec<Tensor> = outputs.into_iter().flatten().collect();
        Ok((crate::stack(&outputs, 1)?, state))
    }

    /// One time step from the projected input `xp` and projected hidden state `hp`.
    fn step(&self, xp: &Tensor, hp: &Tensor, state: &[Tensor]) -> Result<Vec<Tensor>> {
        match self.cell {
            Cell::Simple(act) => {
                let z = xp.add(hp)?;
                Ok(vec![if act == RnnActivation::Tanh { z.tanh()? } else { z.relu()? }])
            }
            Cell::Lstm => {
                let g = xp.add(hp)?.chunk(4, -1)?;
                let (i, f, c, o) = (g[0].sigmoid()?, g[1].sigmoid()?, g[2].tanh()?, g[3].sigmoid()?);
                let cell = f.mul(&state[1])?.add(&i.mul(&c)?)?;
                Ok(vec![o.mul(&cell.tanh()?)?, cell])
            }
            Cell::Gru => {
                let (x, h) = (xp.chunk(3, -1)?, hp.chunk(3, -1)?);
                let r = x[0].add(&h[0])?.sigmoid()?;
                let z = x[1].add(&h[1])?.sigmoid()?;
                let c = x[2].add(&r.mul(&h[2])?)?.tanh()?;
                Ok(vec![state[0].subtract(&c)?.mul(&z)?.add(&c)?])
            }
        }
    }

    fn name(&self) -> &'static str {
        match self.cell {
            Cell::Simple(_) => "SimpleRNN",
            Cell::Lstm => "LSTM",
            Cell::Gru => "GRU",
        }
    }
}

impl Layer for RnnStack {
    fn visit_parameters<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor)) {
        for (k, w) in self.weights.iter().enumerate() {
            f(&self.param_name("weight_ih", k), &w.weight_ih);
            f(&self.param_name("weight_hh", k), &w.weight_hh);
            f(&self.param_name("bias_ih", k), &w.bias_ih);
            f(&self.param_name("bias_hh", k), &w.bias_hh);
        }
    }

    fn visit_parameters_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        let names: Vec<[String; 4]> = (0..self.weights.len())
            .map(|k| ["weight_ih", "weight_hh", "bias_ih", "bias_hh"].map(|w| self.param_name(w, k)))
            .collect();
        for (w, [a, b, c, d]) in self.weights.iter_mut().zip(names) {
            f(&a, &mut w.weight_ih);
            f(&b, &mut w.weight_hh);
            f(&c, &mut w.bias_ih);
            f(&d, &mut w.bias_hh);
        }
    }

    fn is_training(&self) -> bool {
        self.training
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

/// Declares a public recurrent layer over an `RnnStack`, forwarding `Layer` to it.
macro_rules! recurrent_layer {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name(RnnStack);

        impl Layer for $name {
            fn visit_parameters<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor)) {
                self.0.visit_parameters(f)
            }
            fn visit_parameters_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
                self.0.visit_parameters_mut(f)
            }
            fn is_training(&self) -> bool {
                self.0.training
            }
            fn set_training(&mut self, training: bool) {
                self.0.training = training;
            }
        }

        impl $name {
            /// The hidden width.
            pub fn hidden_size(&self) -> usize {
                self.0.hidden_size
            }
        }
    };
}

recurrent_layer!(
    /// An Elman RNN: `h_t = act(x_t·W_ihᵀ + b_ih + h_{t−1}·W_hhᵀ + b_hh)`.
    SimpleRNN
);

recurrent_layer!(
    /// Long short-term memory: gates `i, f, g, o` (in that order in the weights),
    /// `c_t = σ(f)·c_{t−1} + σ(i)·tanh(g)`, `h_t = σ(o)·tanh(c_t)`.
    LSTM
);

recurrent_layer!(
    /// Gated recurrent unit: gates `r, z, c` (in that order in the weights),
    /// `c = tanh(x_c + r·(h·W_hcᵀ + b_hc))`, `h_t = z·h_{t−1} + (1 − z)·c`.
    GRU
);

impl SimpleRNN {
    /// One tanh layer.
    pub fn new(input_size: usize, hidden_size: usize) -> Result<Self> {
        SimpleRNN::with_options(input_size, hidden_size, RnnActivation::Tanh, RnnOptions::default())
    }

    /// Explicit activation, layers, direction, layout and dropout.
    pub fn with_options(input_size: usize, hidden_size: usize, act: RnnActivation, o: RnnOptions) -> Result<Self> {
        Ok(SimpleRNN(RnnStack::new(Cell::Simple(act), input_size, hidden_size, o)?))
    }

    /// The outputs `[batch, time, dirs·hidden]` and the final hidden states
    /// `[layers·dirs, batch, hidden]`; `h0` has that shape too (zeros when `None`).
    pub fn forward(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        self.forward_with_lengths(x, h0, None)
    }

    /// [`forward`](Self::forward) with Paddle's `sequence_length`: an int32/int64 tensor
    /// `[batch]` of valid lengths in `0..=time` (see the module docs); `None` is `forward`.
    pub fn forward_with_lengths(
        &self,
        x: &Tensor,
        h0: Option<&Tensor>,
        sequence_length: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        self.0.run_hidden(x, h0, sequence_length)
    }
}

impl GRU {
    /// One layer.
    pub fn new(input_size: usize, hidden_size: usize) -> Result<Self> {
        GRU::with_options(input_size, hidden_size, RnnOptions::default())
    }

    /// Explicit layers, direction, layout and dropout.
    pub fn with_options(input_size: usize, hidden_size: usize, o: RnnOptions) -> Result<Self> {
        Ok(GRU(RnnStack::new(Cell::Gru, input_size, hidden_size, o)?))
    }

    /// The outputs and final hidden states, as [`SimpleRNN::forward`].
    pub fn forward(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        self.forward_with_lengths(x, h0, None)
    }

    /// [`forward`](Self::forward) with Paddle's `sequence_length`, as
    /// [`SimpleRNN::forward_with_lengths`].
    pub fn forward_with_lengths(
        &self,
        x: &Tensor,
        h0: Option<&Tensor>,
        sequence_length: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        self.0.run_hidden(x, h0, sequence_length)
    }
}

impl LSTM {
    /// One layer.
    pub fn new(input_size: usize, hidden_size: usize) -> Result<Self> {
        LSTM::with_options(input_size, hidden_size, RnnOptions::default())
    }

    /// Explicit layers, direction, layout and dropout.
    pub fn with_options(input_size: usize, hidden_size: usize, o: RnnOptions) -> Result<Self> {
        Ok(LSTM(RnnStack::new(Cell::Lstm, input_size, hidden_size, o)?))
    }

    /// The outputs `[batch, time, dirs·hidden]` and the final `(h, c)`, each
    /// `[layers·dirs, batch, hidden]`; `initial` gives `(h0, c0)` of that shape (zeros when
    /// `None`).
    pub fn forward(&self, x: &Tensor, initial: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, (Tensor, Tensor))> {
        self.forward_with_lengths(x, initial, None)
    }

    /// [`forward`](Self::forward) with Paddle's `sequence_length`, as
    /// [`SimpleRNN::forward_with_lengths`]: the final `(h, c)` are those of each sequence's
    /// last valid step.
    pub fn forward_with_lengths(
        &self,
        x: &Tensor,
        initial: Option<(&Tensor, &Tensor)>,
        sequence_length: Option<&Tensor>,
    ) -> Result<(Tensor, (Tensor, Tensor))> {
        let init: Vec<Tensor> = initial.map(|(h, c)| vec![h.clone(), c.clone()]).unwrap_or_default();
        let (out, finals) = self.0.run(x, &init, sequence_length)?;
        Ok((out, (crate::stack(&finals[0], 0)?, crate::stack(&finals[1], 0)?)))
    }
}

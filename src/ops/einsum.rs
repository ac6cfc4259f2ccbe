//! `einsum` (`paddle.einsum`): Einstein summation over any number of operands, composed from
//! `sum`, `transpose`, `reshape` and batched `matmul`, so it differentiates, runs on both
//! places and builds into static programs like those ops.
//!
//! Operands are contracted left to right: the letters two operands share and nothing later
//! needs are the matmul's inner dimension, the shared ones still needed are its batch, and a
//! letter only one operand has (and nothing later needs) is summed out first.

use crate::{Error, Result, Tensor};

const OP: &str = "einsum";

/// One operand in flight: its tensor and the letter of each axis.
struct Term {
    t: Tensor,
    letters: Vec<char>,
}

impl Term {
    /// Sums out the axes whose letters `keep` rejects.
    fn sum_except(self, keep: impl Fn(char) -> bool) -> Result<Term> {
        let axes: Vec<isize> =
            self.letters.iter().enumerate().filter(|(_, c)| !keep(**c)).map(|(i, _)| i as isize).collect();
        if axes.is_empty() {
            return Ok(self);
        }
        let letters = self.letters.iter().copied().filter(|&c| keep(c)).collect();
        Ok(Term { t: self.t.sum(&axes, false)?, letters })
    }

    /// The tensor with its axes in the order of `order`.
    fn permuted(&self, order: &[char]) -> Result<Tensor> {
        let perm: Vec<usize> = order.iter().map(|c| self.letters.iter().position(|l| l == c).unwrap_or(0)).collect();
        if perm.iter().enumerate().all(|(i, &p)| i == p) { Ok(self.t.clone()) } else { self.t.transpose(&perm) }
    }

    fn size(&self, c: char) -> usize {
        self.letters.iter().position(|&l| l == c).map_or(1, |i| self.t.shape()[i])
    }
}

fn parse(equation: &str, n: usize) -> Result<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    if eq.contains("...") {
        return Err(Error::invalid(OP, format!("{equation:?}: ellipsis ('...') is not supported yet")));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let inputs: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    if inputs.len() != n {
        return Err(Error::invalid(OP, format!("{equation:?} names {} operands, {n} given", inputs.len())));
    }
    for (k, term) in inputs.iter().enumerate() {
        if let Some(c) = term.iter().find(|c| !c.is_ascii_alphabetic()) {
            return Err(Error::invalid(OP, format!("{equation:?}: operand {k} has '{c}' (letters only)")));
        }
        if let Some(c) = term.iter().find(|c| term.iter().filter(|d| d == c).count() > 1) {
            return Err(Error::invalid(
                OP,
                format!("{equation:?}: operand {k} repeats '{c}' (diagonals are not supported yet)"),
            ));
        }
    }
    let output: Vec<char> = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            // Implicit output: the letters that appear once, in alphabetical order.
            let mut once: Vec<char> = inputs
                .iter()
                .flatten()
                .copied()
                .filter(|c| inputs.iter().flatten().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort();
            once
        }
    };
    for c in &output {
        if !inputs.iter().flatten().any(|d| d == c) || output.iter().filter(|d| *d == c).count() > 1 {
            return Err(Error::invalid(OP, format!("{equation:?}: output letter '{c}' is not an input letter once")));
        }
    }
    Ok((inputs, output))
}

/// Einstein summation (`paddle.einsum`), e.g. `einsum("bhqd,bhkd->bhqk", &[&q, &k])`.
/// Letters `a-zA-Z`; each operand's axes named once (no diagonals, no `...` yet).
pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
    let (inputs, output) = parse(equation, operands.len())?;
    let mut terms = Vec::new();
    for (k, (t, letters)) in operands.iter().zip(&inputs).enumerate() {
        if t.ndim() != letters.len() {
            return Err(Error::shape(
                OP,
                format!("operand {k} has shape {:?} but {equation:?} names {} axes", t.shape(), letters.len()),
            ));
        }
        terms.push(Term { t: (*t).clone(), letters: letters.clone() });
    }
    // Every letter's size must agree (size-1 axes do not broadcast here, as in Paddle).
    for c in inputs.iter().flatten() {
        let sizes: Vec<usize> = terms.iter().filter(|t| t.letters.contains(c)).map(|t| t.size(*c)).collect();
        if sizes.windows(2).any(|w| w[0] != w[1]) {
            return Err(Error::shape(OP, format!("{equation:?}: '{c}' has sizes {sizes:?}")));
        }
    }
    let needed_after = |terms: &[Term], from: usize, c: char| {
        output.contains(&c) || terms[from..].iter().any(|t| t.letters.contains(&c))
    };
    let mut acc = terms.remove(0);
    acc = acc.sum_except(|c| needed_after(&terms, 0, c))?;
    while !terms.is_empty() {
        let next = terms.remove(0);
        let next = next.sum_except(|c| acc.letters.contains(&c) || needed_after(&terms, 0, c))?;
        let shared: Vec<char> = acc.letters.iter().copied().filter(|c| next.letters.contains(c)).collect();
        let (batch, inner): (Vec<char>, Vec<char>) = shared.iter().partition(|&&c| needed_after(&terms, 0, c));
        let a_only: Vec<char> = acc.letters.iter().copied().filter(|c| !shared.contains(c)).collect();
        let b_only: Vec<char> = next.letters.iter().copied().filter(|c| !shared.contains(c)).collect();
        let prod = |cs: &[char], t: &Term| cs.iter().map(|&c| t.size(c) as i64).product::<i64>();
        let (bsz, m, k, n) = (prod(&batch, &acc), prod(&a_only, &acc), prod(&inner, &acc), prod(&b_only, &next));
        let a = acc.permuted(&[batch.clone(), a_only.clone(), inner.clone()].concat())?;
        let b = next.permuted(&[batch.clone(), inner.clone(), b_only.clone()].concat())?;
        let a = crate::reshape(&a, &[bsz, m, k])?;
        let b = crate::reshape(&b, &[bsz, k, n])?;
        let out = crate::matmul(&a, &b, false, false)?;
        let dims: Vec<i64> = batch
            .iter()
            .map(|&c| acc.size(c) as i64)
            .chain(a_only.iter().map(|&c| acc.size(c) as i64))
            .chain(b_only.iter().map(|&c| next.size(c) as i64))
            .collect();
        let letters = [batch, a_only, b_only].concat();
        acc = Term { t: crate::reshape(&out, &dims)?, letters };
    }
    let acc = acc.sum_except(|c| output.contains(&c))?;
    acc.permuted(&output)
}

//! `einsum` (`paddle.einsum`): Einstein summation over any number of operands, composed from
//! `sum`, `transpose`, `reshape`, `strided_slice` and batched `matmul`, so it differentiates,
//! runs on both places and builds into static programs like those ops.
//!
//! Supported, with numpy's and Paddle's meaning:
//! - letters `a-zA-Z` naming axes; a letter's size must agree across operands (size-1 axes
//!   named by letters do not broadcast, as in Paddle);
//! - an explicit output after `->` (empty: the full sum), or the implicit one: the ellipsis
//!   axes, then the letters used once, in alphabetical order;
//! - one ellipsis `...` per operand and in the output, standing for the axes the letters do
//!   not name. The ellipsis axes of the operands are right-aligned and broadcast as in numpy
//!   (sizes equal or 1); an output without `...` is an error unless the ellipsis covers no
//!   axis;
//! - a letter repeated within one operand takes the diagonal: `"ii->i"` (diagonal), `"ii->"`
//!   (trace), `"bii->bi"`, `"iij->j"`; the repeated axes must have equal sizes.
//!
//! Each operand is prepared first: a repeated letter's axes are moved last, merged by a
//! reshape into one axis of `n^k` and read with a strided slice of step `1 + n + … + n^(k-1)`
//! (the diagonal); an ellipsis axis of size 1 that another operand broadcasts is reshaped away
//! (the product is constant along it). Internally each ellipsis axis gets a fresh label.
//!
//! Operands are then contracted left to right: the letters two operands share and nothing
//! later needs are the matmul's inner dimension, the shared ones still needed are its batch,
//! and a letter only one operand has (and nothing later needs) is summed out first.

use crate::{Error, Result, Tensor};

const OP: &str = "einsum";

/// The first of the labels (Unicode private-use characters) standing for ellipsis axes:
/// `ellipsis_label(j)` is the `j`-th axis of the widest ellipsis, counted from the left.
const ELLIPSIS_BASE: u32 = 0xE000;

fn ellipsis_label(j: usize) -> char {
    char::from_u32(ELLIPSIS_BASE + j as u32).unwrap_or('\u{E000}')
}

fn is_ellipsis_label(c: char) -> bool {
    (ELLIPSIS_BASE..0xF900).contains(&(c as u32))
}

/// One operand in flight: its tensor and the label of each axis.
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
        permute(&self.t, &perm)
    }

    fn size(&self, c: char) -> usize {
        self.letters.iter().position(|&l| l == c).map_or(1, |i| self.t.shape()[i])
    }

    /// Takes the diagonal of every letter the operand repeats (operand `k` of `equation`): the
    /// `k` axes of size `n` go last, merge into one of `n^k` and a slice of step
    /// `1 + n + … + n^(k-1)` reads the elements whose indices agree.
    fn diagonal(mut self, equation: &str, k: usize) -> Result<Term> {
        while let Some(c) = self.letters.iter().copied().find(|c| self.letters.iter().filter(|d| *d == c).count() > 1) {
            let at: Vec<usize> = (0..self.letters.len()).filter(|&i| self.letters[i] == c).collect();
            let sizes: Vec<usize> = at.iter().map(|&i| self.t.shape()[i]).collect();
            if sizes.windows(2).any(|w| w[0] != w[1]) {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "{equation:?}: operand {k} (shape {:?}) repeats '{c}' on axes of sizes {sizes:?}; a \
                         diagonal needs equal sizes",
                        self.t.shape()
                    ),
                ));
            }
            let n = sizes[0];
            let rest: Vec<usize> = (0..self.letters.len()).filter(|i| !at.contains(i)).collect();
            let perm: Vec<usize> = rest.iter().chain(&at).copied().collect();
            let t = permute(&self.t, &perm)?;
            let total: usize = sizes.iter().product();
            let dims: Vec<i64> =
                rest.iter().map(|&i| self.t.shape()[i] as i64).chain(std::iter::once(total as i64)).collect();
            let t = crate::reshape(&t, &dims)?;
            // Σ_{j<k} n^j: one step moves every one of the k indices by 1 (1 when n is 0).
            let step = (0..at.len()).fold((0usize, 1usize), |(s, p), _| (s + p, p.saturating_mul(n))).0.max(1);
            let t = crate::strided_slice(&t, &[rest.len() as isize], &[0], &[total as i64], &[step as i64])?;
            let letters = rest.iter().map(|&i| self.letters[i]).chain(std::iter::once(c)).collect();
            self = Term { t, letters };
        }
        Ok(self)
    }

    /// Drops axis `c`, which has size 1.
    fn drop_unit_axis(self, c: char) -> Result<Term> {
        let dims: Vec<i64> =
            self.letters.iter().zip(self.t.shape()).filter(|(l, _)| **l != c).map(|(_, &d)| d as i64).collect();
        let letters = self.letters.iter().copied().filter(|&l| l != c).collect();
        Ok(Term { t: crate::reshape(&self.t, &dims)?, letters })
    }
}

/// `t` with its axes in the order `perm`; `t` itself for the identity.
fn permute(t: &Tensor, perm: &[usize]) -> Result<Tensor> {
    if perm.iter().enumerate().all(|(i, &p)| i == p) { Ok(t.clone()) } else { t.transpose(perm) }
}

/// One subscript string split at its ellipsis: the letters before it and, when it has one,
/// those after it. `what` names the string in errors.
fn split_ellipsis(equation: &str, what: &str, s: &str) -> Result<(Vec<char>, Option<Vec<char>>)> {
    let (before, after) = match s.split_once("...") {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    if before.contains('.') || after.is_some_and(|a| a.contains('.')) {
        return Err(Error::invalid(
            OP,
            format!("{equation:?}: {what} {s:?} has a '.' outside one ellipsis ('...'; at most one per operand)"),
        ));
    }
    let before: Vec<char> = before.chars().collect();
    let after: Option<Vec<char>> = after.map(|a| a.chars().collect());
    if let Some(c) = before.iter().chain(after.iter().flatten()).find(|c| !c.is_ascii_alphabetic()) {
        return Err(Error::invalid(OP, format!("{equation:?}: {what} has '{c}' (letters and '...' only)")));
    }
    Ok((before, after))
}

/// The label of every axis of every operand (ellipsis axes get fresh labels, right-aligned
/// across operands) and of the output.
fn parse(equation: &str, operands: &[&Tensor]) -> Result<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != operands.len() {
        return Err(Error::invalid(
            OP,
            format!("{equation:?} names {} operands, {} given", terms.len(), operands.len()),
        ));
    }
    let mut split = Vec::new();
    for (k, (term, t)) in terms.iter().zip(operands).enumerate() {
        let (before, after) = split_ellipsis(equation, &format!("operand {k}"), term)?;
        let named = before.len() + after.as_ref().map_or(0, Vec::len);
        let covered = match after {
            None if t.ndim() != named => {
                return Err(Error::shape(
                    OP,
                    format!("operand {k} has shape {:?} but {equation:?} names {named} axes", t.shape()),
                ));
            }
            Some(_) if t.ndim() < named => {
                return Err(Error::shape(
                    OP,
                    format!("operand {k} has shape {:?} but {equation:?} names {named} axes besides '...'", t.shape()),
                ));
            }
            None => 0,
            Some(_) => t.ndim() - named,
        };
        split.push((before, after, covered));
    }
    // The widest ellipsis; a narrower one is its last axes (numpy's right alignment).
    let width = split.iter().map(|s| s.2).max().unwrap_or(0);
    let inputs: Vec<Vec<char>> = split
        .into_iter()
        .map(|(before, after, covered)| {
            let dots = (width - covered..width).map(ellipsis_label);
            before.into_iter().chain(dots).chain(after.into_iter().flatten()).collect()
        })
        .collect();
    let output: Vec<char> = match rhs {
        Some(r) => {
            let (before, after) = split_ellipsis(equation, "the output", &r)?;
            if after.is_none() && width > 0 {
                return Err(Error::invalid(
                    OP,
                    format!("{equation:?}: the operands' '...' covers {width} axes but the output has no '...'"),
                ));
            }
            // (Without a '...' the width is 0 here.)
            let dots = (0..width).map(ellipsis_label);
            before.into_iter().chain(dots).chain(after.into_iter().flatten()).collect()
        }
        None => {
            // Implicit output: the ellipsis axes, then the letters that appear once, in
            // alphabetical order (a letter an operand repeats appears more than once).
            let mut once: Vec<char> = inputs
                .iter()
                .flatten()
                .copied()
                .filter(|c| !is_ellipsis_label(*c) && inputs.iter().flatten().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort();
            (0..width).map(ellipsis_label).chain(once).collect()
        }
    };
    for c in &output {
        if !inputs.iter().flatten().any(|d| d == c) || output.iter().filter(|d| *d == c).count() > 1 {
            return Err(Error::invalid(OP, format!("{equation:?}: output letter '{c}' is not an input letter once")));
        }
    }
    Ok((inputs, output))
}

/// Broadcasts the ellipsis axes: at each position the sizes must be equal or 1, and an axis
/// of size 1 that another operand has larger is dropped from its operand.
fn broadcast_ellipsis(equation: &str, terms: Vec<Term>) -> Result<Vec<Term>> {
    let mut labels: Vec<char> =
        terms.iter().flat_map(|t| t.letters.iter().copied()).filter(|&c| is_ellipsis_label(c)).collect();
    labels.sort();
    labels.dedup();
    let mut drop = Vec::new();
    for &c in &labels {
        let with: Vec<usize> = (0..terms.len()).filter(|&k| terms[k].letters.contains(&c)).collect();
        let mut sizes: Vec<usize> = with.iter().map(|&k| terms[k].size(c)).filter(|&s| s != 1).collect();
        sizes.sort();
        sizes.dedup();
        if sizes.len() > 1 {
            let shapes: Vec<&[usize]> = terms.iter().map(|t| t.t.shape()).collect();
            return Err(Error::shape(
                OP,
                format!(
                    "{equation:?}: the '...' axes of the operands (shapes {shapes:?}) do not broadcast: sizes {sizes:?} at one position"
                ),
            ));
        }
        if !sizes.is_empty() {
            drop.extend(with.iter().filter(|&&k| terms[k].size(c) == 1).map(|&k| (k, c)));
        }
    }
    let mut terms: Vec<Option<Term>> = terms.into_iter().map(Some).collect();
    for (k, c) in drop {
        if let Some(t) = terms[k].take() {
            terms[k] = Some(t.drop_unit_axis(c)?);
        }
    }
    Ok(terms.into_iter().flatten().collect())
}

/// Einstein summation (`paddle.einsum`), e.g. `einsum("bhqd,bhkd->bhqk", &[&q, &k])`,
/// `einsum("...ij,...jk->...ik", &[&a, &b])` (broadcast batch axes) or `einsum("ii->", &[&m])`
/// (trace). Letters `a-zA-Z`, one `...` per operand, repeated letters take diagonals; see the
/// module documentation.
pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
    let (inputs, output) = parse(equation, operands)?;
    let mut terms = Vec::new();
    for (k, (t, letters)) in operands.iter().zip(&inputs).enumerate() {
        terms.push(Term { t: (*t).clone(), letters: letters.clone() }.diagonal(equation, k)?);
    }
    let mut terms = broadcast_ellipsis(equation, terms)?;
    // Every letter's size must agree (size-1 axes do not broadcast here, as in Paddle).
    for c in inputs.iter().flatten().filter(|c| !is_ellipsis_label(**c)) {
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

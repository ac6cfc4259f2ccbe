//! In-place forms of elementwise kernels, for execution plans.
//!
//! A plan may place an elementwise op's output over an input of the same size that dies in
//! that dispatch. WebGPU forbids binding one buffer range twice in a dispatch when either
//! binding is writable, so the in-place form binds it once: the output's declaration is
//! dropped, the input's becomes `read_write`, and the output's name reads as the input's.
//!
//! A kernel opts in with a line `// in-place: NAME` in its WGSL, NAME being its output. The
//! line promises that every entry point writes `NAME` only at the element it computes, after
//! reading that element of each input, and reads no other element of an input of the
//! output's length (a broadcast input is shorter, an input of the same length is read at the
//! output's index). Only an input declared with the output's element type can take its place.

/// How the line a kernel's WGSL carries when it may run in place starts (see the module docs).
const MARKER: &str = "// in-place: ";

/// A `var<storage, ...>` declaration of the group-0 bindings.
struct Decl<'a> {
    line: usize,
    binding: usize,
    read_only: bool,
    name: &'a str,
    ty: &'a str,
}

fn parse_decl(line: &str) -> Option<(usize, bool, &str, &str)> {
    let rest = line.trim().strip_prefix("@group(0) @binding(")?;
    let (binding, rest) = rest.split_once(')')?;
    let rest = rest.trim_start().strip_prefix("var<storage, ")?;
    let (access, rest) = rest.split_once('>')?;
    let (name, ty) = rest.split_once(':')?;
    Some((binding.parse().ok()?, access == "read", name.trim(), ty.trim().strip_suffix(';')?.trim()))
}

fn decls(source: &str) -> Vec<Decl<'_>> {
    source
        .lines()
        .enumerate()
        .filter_map(|(line, l)| {
            let (binding, read_only, name, ty) = parse_decl(l)?;
            Some(Decl { line, binding, read_only, name, ty })
        })
        .collect()
}

/// The binding of the output of a kernel that may run in place, if `source` is one.
pub(crate) fn output_binding(source: &str) -> Option<usize> {
    let name = source.lines().find_map(|l| l.trim().strip_prefix(MARKER))?.split_whitespace().next()?;
    decls(source).iter().find(|d| d.name == name && !d.read_only).map(|d| d.binding)
}

/// The bindings of inputs whose place the output may take.
pub(crate) fn input_bindings(source: &str) -> Vec<usize> {
    let Some(out) = output_binding(source) else { return Vec::new() };
    let all = decls(source);
    let Some(ty) = all.iter().find(|d| d.binding == out).map(|d| d.ty) else { return Vec::new() };
    all.iter().filter(|d| d.read_only && d.ty == ty && d.name != "params").map(|d| d.binding).collect()
}

/// `source` with its output written into binding `input`, or None when the kernel may not
/// run in place over that input.
pub(crate) fn in_place_source(source: &str, input: usize) -> Option<String> {
    let out = output_binding(source)?;
    if !input_bindings(source).contains(&input) {
        return None;
    }
    let all = decls(source);
    let o = all.iter().find(|d| d.binding == out)?;
    let i = all.iter().find(|d| d.binding == input)?;
    let mut text = String::with_capacity(source.len());
    for (n, line) in source.lines().enumerate() {
        if n == o.line {
            continue;
        }
        if n == i.line {
            text += &line.replacen("var<storage, read>", "var<storage, read_write>", 1);
        } else {
            text += &rename(line, o.name, i.name);
        }
        text.push('\n');
    }
    Some(text)
}

/// `line` with every identifier `from` replaced by `to`.
fn rename(line: &str, from: &str, to: &str) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find(|c: char| word(c)) {
        out += &rest[..start];
        let len = rest[start..].find(|c: char| !word(c)).unwrap_or(rest.len() - start);
        let token = &rest[start..start + len];
        out += if token == from { to } else { token };
        rest = &rest[start + len..];
    }
    out + rest
}

//! WGSL sources: the embedded `shaders/` files, the `#include` / `{{KEY}}` template
//! expansion, and the list of every kernel (for validation and tooling): the runtime's own
//! and those the op families register ([`register_kernels`], from the op registry's catalog).

use std::sync::OnceLock;

use crate::{Error, Result};

include!(concat!(env!("OUT_DIR"), "/shader_files.rs"));

/// The runtime's own kernels.
static RUNTIME_KERNELS: &[&Kernel] = &[&COPY_WORDS];

/// Copies words between buffers: small host writes out of the arena (`write`) and
/// buffer-to-buffer copies (`copy`), inside the open compute pass.
pub(crate) static COPY_WORDS: Kernel = Kernel::single("copy_words.wgsl");

/// Every kernel: the runtime's, then the families' once registered.
static KERNELS: OnceLock<Vec<&'static Kernel>> = OnceLock::new();

/// Registers the op families' kernels (once; the op registry does it when it is first
/// built, before any op runs).
pub(crate) fn register_kernels(families: &[&'static [&'static Kernel]]) {
    KERNELS.get_or_init(|| {
        RUNTIME_KERNELS.iter().copied().chain(families.iter().flat_map(|f| f.iter().copied())).collect()
    });
}

fn kernels() -> &'static [&'static Kernel] {
    KERNELS.get().map_or(RUNTIME_KERNELS, |k| k.as_slice())
}

/// One substitution set for a template: `(KEY, value)` pairs replacing `{{KEY}}`.
pub(crate) type Variant = Vec<(&'static str, String)>;

/// A WGSL template file plus every substitution set an op may instantiate it with, each
/// named by a small integer key the op computes from its parameters (so a dispatch looks its
/// pipeline up by `(kernel, key, entry)` without building any string). A family lists its
/// kernels beside its ops (`static FAMILY`), so the validation test covers each; a dispatch
/// of a kernel no family lists is an error.
pub(crate) struct Kernel {
    /// Path below `shaders/`.
    pub file: &'static str,
    /// Every variant key the kernel's ops can ask for.
    pub keys: fn() -> Vec<u32>,
    /// The substitutions of variant `key`.
    pub variant: fn(u32) -> Variant,
}

impl Kernel {
    /// A kernel with one variant (key 0) and no substitutions.
    pub const fn single(file: &'static str) -> Kernel {
        Kernel { file, keys: || vec![0], variant: |_| Vec::new() }
    }

    /// The expanded source of variant `key`.
    pub fn source(&self, key: u32) -> Result<String> {
        expand(self.file, &(self.variant)(key))
    }

    /// True when this kernel is the runtime's or a registered family's.
    pub fn is_registered(&self) -> bool {
        kernels().iter().any(|k| std::ptr::eq(*k, self))
    }
}

fn file(name: &str) -> Result<&'static str> {
    SHADER_FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .ok_or_else(|| Error::Gpu { op: "shader", msg: format!("no shader file {name:?}") })
}

/// Expands `#include "path"` lines (each file once) and `{{KEY}}` placeholders; `{{WG}}` is
/// the 1-D workgroup size, the same constant the dispatcher divides by, and `{{CACHED}}` the
/// row kernels' elements per invocation, the same constant their dispatchers compare with.
/// A placeholder left unfilled is an error, so a template and its variants cannot drift
/// apart silently. A variant's `ENABLE` entry names a WGSL extension the source enables first
/// (`f16`: a variant for devices with `SHADER_F16`).
pub(crate) fn expand(name: &str, variant: &Variant) -> Result<String> {
    let mut out = String::new();
    for (_, ext) in variant.iter().filter(|(k, _)| *k == "ENABLE") {
        out.push_str(&format!("enable {ext};\n"));
    }
    let mut included = Vec::new();
    include_into(name, &mut out, &mut included)?;
    out = out.replace("{{WG}}", &super::WORKGROUP.to_string());
    out = out.replace("{{CACHED}}", &super::ROW_CACHE.to_string());
    for (key, value) in variant {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    if let Some(pos) = out.find("{{") {
        let end = out[pos..].find("}}").map_or(out.len(), |e| pos + e + 2);
        return Err(Error::Gpu { op: "shader", msg: format!("{name}: placeholder {} has no value", &out[pos..end]) });
    }
    Ok(out)
}

fn include_into(name: &str, out: &mut String, included: &mut Vec<String>) -> Result<()> {
    if included.iter().any(|n| n == name) {
        return Ok(());
    }
    included.push(name.to_string());
    for line in file(name)?.lines() {
        if let Some(rest) = line.trim().strip_prefix("#include") {
            let inc = rest.trim().trim_matches('"');
            include_into(inc, out, included)?;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(())
}

/// Every (kernel file, variant, expanded source) the library can dispatch, with the
/// in-place forms execution plans may use (named `file#key in place of binding i`; they
/// leave their output's binding out). Used by the shader-validation tests.
pub fn all_shader_variants() -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for k in kernels() {
        for key in (k.keys)() {
            let source = k.source(key)?;
            for i in super::in_place::input_bindings(&source) {
                if let Some(form) = super::in_place::in_place_source(&source, i) {
                    out.push((format!("{}#{key} in place of binding {i}", k.file), form));
                }
            }
            out.push((format!("{}#{key}", k.file), source));
        }
    }
    Ok(out)
}

/// Names of the embedded WGSL files (below `shaders/`).
pub fn shader_files() -> Vec<&'static str> {
    SHADER_FILES.iter().map(|(n, _)| *n).collect()
}

/// The kernels' files, so a test can check that every file is used by some kernel.
pub fn kernel_files() -> Vec<&'static str> {
    kernels().iter().map(|k| k.file).collect()
}

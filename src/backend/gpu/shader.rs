//! WGSL sources: the embedded `shaders/` files, the `#include` / `{{KEY}}` template
//! expansion, and the registry of every kernel (for validation and tooling).

use crate::{Error, Result};

include!(concat!(env!("OUT_DIR"), "/shader_files.rs"));
include!(concat!(env!("OUT_DIR"), "/kernel_registry.rs"));

/// One substitution set for a template: `(KEY, value)` pairs replacing `{{KEY}}`.
pub(crate) type Variant = Vec<(&'static str, String)>;

/// A WGSL template file plus every substitution set an op may instantiate it with.
/// Declaring one as `pub(crate) static NAME: Kernel = ...` anywhere under `src/` registers it
/// (build.rs collects them), so the validation test covers it without further wiring.
pub(crate) struct Kernel {
    /// Path below `shaders/`.
    pub file: &'static str,
    /// Every variant the kernel's ops can ask for.
    pub variants: fn() -> Vec<Variant>,
}

impl Kernel {
    /// The expanded source of one variant.
    pub fn source(&self, variant: &Variant) -> Result<String> {
        expand(self.file, variant)
    }

    /// A cache key that identifies the variant and entry point.
    pub fn key(&self, variant: &Variant, entry: &str) -> String {
        let mut k = String::with_capacity(64);
        k.push_str(self.file);
        k.push('#');
        k.push_str(entry);
        for (name, value) in variant {
            k.push('|');
            k.push_str(name);
            k.push('=');
            k.push_str(value);
        }
        k
    }
}

fn file(name: &str) -> Result<&'static str> {
    SHADER_FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .ok_or_else(|| Error::Gpu { op: "shader", msg: format!("no shader file {name:?}") })
}

/// Expands `#include "path"` lines (each file once) and `{{KEY}}` placeholders. A placeholder
/// left unfilled is an error, so a template and its variants cannot drift apart silently.
pub(crate) fn expand(name: &str, variant: &Variant) -> Result<String> {
    let mut out = String::new();
    let mut included = Vec::new();
    include_into(name, &mut out, &mut included)?;
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

/// Every (kernel file, variant, expanded source) the library can dispatch. Used by the
/// shader-validation test; also handy for warming a pipeline cache.
pub fn all_shader_variants() -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for k in KERNELS {
        for v in (k.variants)() {
            out.push((k.key(&v, "*"), k.source(&v)?));
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
    KERNELS.iter().map(|k| k.file).collect()
}

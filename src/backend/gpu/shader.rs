//! WGSL sources: the embedded `shaders/` files, the `#include` / `{{KEY}}` template
//! expansion, and the list of every kernel (for validation and tooling): the runtime's own
//! and those the op families register ([`register_kernels`], from the op registry's catalog).

use std::sync::OnceLock;

use crate::{Error, Result};

include!(concat!(env!("OUT_DIR"), "/shader_files.rs"));

/// Variant-key bit of a kernel's subgroup form (see [`Kernel::has_subgroup_form`]).
pub(crate) const SUBGROUP_FORM: u32 = 1 << 31;

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

    /// The expanded source of variant `key` (with [`SUBGROUP_FORM`], of its subgroup form).
    pub fn source(&self, key: u32) -> Result<String> {
        let mut variant = (self.variant)(key & !SUBGROUP_FORM);
        if key & SUBGROUP_FORM != 0 {
            variant.push(("FORM", "subgroups".into()));
        }
        expand(self.file, &variant)
    }

    /// True when the kernel's includes have a subgroup form (`lib/x.subgroups.wgsl`), which
    /// devices with `SUBGROUP` run (the dispatch adds [`SUBGROUP_FORM`] to the key).
    pub fn has_subgroup_form(&self) -> bool {
        static FILES: OnceLock<Vec<&'static str>> = OnceLock::new();
        FILES
            .get_or_init(|| {
                let includes = |name: &str, enabled: &[&str]| {
                    let mut files = Vec::new();
                    include_into(name, enabled, &mut String::new(), &mut files).map(|_| files).unwrap_or_default()
                };
                SHADER_FILES
                    .iter()
                    .map(|(n, _)| *n)
                    .filter(|n| includes(n, &[]) != includes(n, &["subgroups"]))
                    .collect()
            })
            .contains(&self.file)
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
/// (`f16`: a variant for devices with `SHADER_F16`), and a `FORM` entry names a form of the
/// libraries (`subgroups`, whose operations naga 30 takes without a directive: it rejects
/// `enable subgroups;`); an include `lib/x.wgsl` then reads `lib/x.NAME.wgsl` where that file
/// exists, for either.
pub(crate) fn expand(name: &str, variant: &Variant) -> Result<String> {
    let mut out = String::new();
    let enabled: Vec<&str> =
        variant.iter().filter(|(k, _)| *k == "ENABLE" || *k == "FORM").map(|(_, e)| e.as_str()).collect();
    for (_, ext) in variant.iter().filter(|(k, _)| *k == "ENABLE") {
        out.push_str(&format!("enable {ext};\n"));
    }
    let mut included = Vec::new();
    include_into(name, &enabled, &mut out, &mut included)?;
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

/// The file an include of `name` reads under the enabled extensions: `lib/x.EXT.wgsl` for the
/// first extension that has one, else `name`.
fn included_file(name: &str, enabled: &[&str]) -> String {
    let stem = name.strip_suffix(".wgsl").unwrap_or(name);
    enabled
        .iter()
        .map(|ext| format!("{stem}.{ext}.wgsl"))
        .find(|alt| SHADER_FILES.iter().any(|(n, _)| n == alt))
        .unwrap_or_else(|| name.to_string())
}

fn include_into(name: &str, enabled: &[&str], out: &mut String, included: &mut Vec<String>) -> Result<()> {
    if included.iter().any(|n| n == name) {
        return Ok(());
    }
    included.push(name.to_string());
    for line in file(name)?.lines() {
        if let Some(rest) = line.trim().strip_prefix("#include") {
            let inc = included_file(rest.trim().trim_matches('"'), enabled);
            include_into(&inc, enabled, out, included)?;
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
        let forms: &[u32] = if k.has_subgroup_form() { &[0, SUBGROUP_FORM] } else { &[0] };
        for key in (k.keys)().into_iter().flat_map(|key| forms.iter().map(move |f| key | f)) {
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

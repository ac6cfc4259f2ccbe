//! Embeds every `shaders/**/*.wgsl` file with `include_str!`, so adding a shader never means
//! listing it by hand. Ops and kernels are not found here: each family lists its entries
//! (`static OPS`) and kernels (`static KERNELS`) and `ops/registry/catalog.rs` names the
//! families, where the compiler sees them.

use std::fs;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, ext, out);
        } else if p.extension().is_some_and(|e| e == ext) {
            out.push(p);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=shaders");

    let shader_dir = root.join("shaders");
    let mut wgsl = Vec::new();
    walk(&shader_dir, "wgsl", &mut wgsl);
    let mut table = String::from("pub(crate) static SHADER_FILES: &[(&str, &str)] = &[\n");
    for p in &wgsl {
        let rel = p.strip_prefix(&shader_dir).unwrap().to_string_lossy().replace('\\', "/");
        table += &format!("    ({rel:?}, include_str!({:?})),\n", p.to_string_lossy());
    }
    table += "];\n";
    fs::write(out_dir.join("shader_files.rs"), table).unwrap();
}

//! Generates two tables so that adding a kernel never means registering it by hand:
//! - every `shaders/**/*.wgsl` file, embedded with `include_str!`;
//! - every `static NAME: Kernel` declared under `src/`, so the shader-validation test can
//!   instantiate every variant of every kernel.
//!
//! Ops are not found here: each family lists its entries (`static OPS`) and
//! `ops/registry/catalog.rs` names the families, where the compiler sees them.

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
    println!("cargo:rerun-if-changed=src");

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

    let src_dir = root.join("src");
    let mut rust = Vec::new();
    walk(&src_dir, "rs", &mut rust);
    let mut kernels = String::from("pub(crate) static KERNELS: &[&crate::backend::gpu::Kernel] = &[\n");
    for p in &rust {
        let text = fs::read_to_string(p).unwrap();
        let rel = p.strip_prefix(&src_dir).unwrap().with_extension("");
        let mut module: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if module.last().is_some_and(|m| m == "mod" || m == "lib") {
            module.pop();
        }
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix("pub(crate) static ") else {
                continue;
            };
            let Some((name, ty)) = rest.split_once(':') else {
                continue;
            };
            let path = std::iter::once("crate".to_string())
                .chain(module.iter().cloned())
                .chain(std::iter::once(name.trim().to_string()))
                .collect::<Vec<_>>()
                .join("::");
            let ty = ty.trim_start();
            let Some((ty, _)) = ty.split_once(" =") else {
                continue;
            };
            if ty == "Kernel" {
                kernels += &format!("    &{path},\n");
            }
        }
    }
    kernels += "];\n";
    fs::write(out_dir.join("kernel_registry.rs"), kernels).unwrap();
}

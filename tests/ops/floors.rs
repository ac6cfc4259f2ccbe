//! The crate's floors, read from `src/`: every `crate::` path of every source file (in `use`
//! lines, braces expanded, and inline) is resolved to the file defining it, and the rules of
//! ARCHITECTURE.md's picture are checked — a file never imports a file of a higher floor,
//! two files of different folders never import each other, `backend/` names nothing above
//! it, the GPU runtime's files import each other in no circle (its facets are leaves), and
//! no static pass compares an op's name with a string literal. A file's
//! `#[cfg(test)] mod tests` and comments are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floor of each top-level module (a folder or a file of `src/`), bottom to top.
const FLOORS: &[(&str, usize)] = &[
    ("builder.rs", 0),
    ("error.rs", 0),
    ("dtype.rs", 0),
    ("shape.rs", 0),
    ("host.rs", 0),
    ("place.rs", 0),
    ("flags.rs", 0),
    ("backend", 1),
    ("tensor", 2),
    ("device.rs", 2),
    ("random.rs", 2),
    ("ops", 3),
    ("autograd", 4),
    ("static_", 5),
    ("nn", 6),
    ("optimizer", 6),
    ("io", 6),
    ("metric", 6),
    ("amp", 7),
    ("jit.rs", 7),
    ("hapi.rs", 7),
    ("vision", 7),
    ("distributed", 7),
    ("profiler.rs", 7),
    ("testing.rs", 7),
    ("lib.rs", 8),
];

struct Crate {
    root: PathBuf,
    /// Module path (without `crate`) → file.
    modules: BTreeMap<Vec<String>, PathBuf>,
    /// Names the crate root re-exports → the file defining them.
    root_names: BTreeMap<String, PathBuf>,
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The text that counts: comments and the unit-test module removed.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

/// `a::{b, c::{d, e}}` → `[a, b]`, `[a, c, d]`, `[a, c, e]`.
fn expand(prefix: &[String], body: &str, out: &mut Vec<Vec<String>>) {
    let mut depth = 0;
    let mut item = String::new();
    let mut items = Vec::new();
    let body = body.split_whitespace().collect::<Vec<_>>().join(" ").replace(" as ", "@");
    for ch in body.chars().filter(|c| !c.is_whitespace()) {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            items.push(std::mem::take(&mut item));
        } else {
            item.push(ch);
        }
    }
    items.push(item);
    for it in items.into_iter().filter(|i| !i.is_empty()) {
        if let Some((head, rest)) = it.split_once('{') {
            let mut p = prefix.to_vec();
            p.extend(head.split("::").filter(|s| !s.is_empty()).map(String::from));
            expand(&p, &rest[..rest.len() - 1], out);
        } else {
            let it = it.split('@').next().unwrap();
            let mut p = prefix.to_vec();
            p.extend(it.split("::").filter(|s| !s.is_empty()).map(String::from));
            out.push(p);
        }
    }
}

/// The paths of every `use crate::...;` of `text`, and of every inline `crate::a::b`.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    paths_under(text, "crate")
}

/// The paths of every `use {root}::...;` (`pub use`, `pub(crate) use` too) of `text`, and
/// of every inline `{root}::a::b`, without the root.
fn paths_under(text: &str, root: &str) -> Vec<Vec<String>> {
    let (used, inline) = (format!("use {root}::"), format!("{root}::"));
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(&used) {
        let after = &rest[i + used.len()..];
        let end = after.find(';').unwrap_or(after.len());
        expand(&[], &after[..end], &mut out);
        rest = &after[end..];
    }
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(&inline) {
        let at = from + i;
        from = at + inline.len();
        let before = if at == 0 { b' ' } else { bytes[at - 1] };
        if before.is_ascii_alphanumeric() || before == b'_' || before == b':' || text[..at].ends_with("use ") {
            continue;
        }
        let path: String = text[from..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        out.push(path.split("::").filter(|s| !s.is_empty()).map(String::from).collect());
    }
    out
}

/// The nodes of `edges` that lie on a circle or lead only into one: what is left once the
/// nodes importing nothing left are taken away, again and again (Kahn's order).
fn on_circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> BTreeSet<PathBuf> {
    let mut left: BTreeMap<PathBuf, BTreeSet<PathBuf>> = edges.clone();
    loop {
        let free: Vec<PathBuf> =
            left.iter().filter(|(_, t)| t.iter().all(|t| !left.contains_key(t))).map(|(f, _)| f.clone()).collect();
        if free.is_empty() {
            return left.into_keys().collect();
        }
        for f in free {
            left.remove(&f);
        }
    }
}

impl Crate {
    fn read() -> Crate {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&root, &mut files);
        let mut modules = BTreeMap::new();
        for f in files {
            let rel = f.strip_prefix(&root).unwrap().with_extension("");
            let mut m: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            if m.last().is_some_and(|l| l == "mod" || l == "lib") {
                m.pop();
            }
            modules.insert(m, f);
        }
        let mut c = Crate { root, modules, root_names: BTreeMap::new() };
        let lib = code(&c.root.join("lib.rs"));
        let mut exported = Vec::new();
        for stmt in lib.split(';') {
            if let Some(i) = stmt.find("pub use ") {
                expand(&[], &stmt[i + 8..], &mut exported);
            }
        }
        for path in exported {
            let path: Vec<String> = path.into_iter().filter(|s| s != "crate" && s != "self").collect();
            let Some((last, module)) = path.split_last() else { continue };
            let Some(file) = c.module_file(module, false) else { continue };
            if last == "*" {
                let text = std::fs::read_to_string(&file).unwrap();
                for kw in
                    ["pub fn ", "pub struct ", "pub enum ", "pub trait ", "pub type ", "pub const ", "pub static "]
                {
                    for (i, _) in text.match_indices(kw) {
                        let name: String =
                            text[i + kw.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                        c.root_names.entry(name).or_insert_with(|| file.clone());
                    }
                }
            } else {
                c.root_names.insert(last.clone(), file);
            }
        }
        c
    }

    /// The file of the deepest module `path` names.
    fn module_file(&self, path: &[String], resolve_root: bool) -> Option<PathBuf> {
        if resolve_root
            && let Some(first) = path.first()
            && !self.modules.contains_key(std::slice::from_ref(first))
            && let Some(f) = self.root_names.get(first)
        {
            return Some(f.clone());
        }
        (0..=path.len()).rev().find_map(|n| self.modules.get(&path[..n]).cloned())
    }

    /// File → the files it imports.
    fn imports(&self) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut edges = BTreeMap::new();
        for file in self.modules.values() {
            let targets: BTreeSet<PathBuf> = crate_paths(&code(file))
                .iter()
                .filter_map(|p| self.module_file(p, true))
                .filter(|t| t != file)
                .collect();
            edges.insert(file.clone(), targets);
        }
        edges
    }

    fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.root).unwrap().to_string_lossy().into_owned()
    }

    fn top(&self, p: &Path) -> String {
        self.rel(p).split('/').next().unwrap().to_string()
    }
}

fn floor(top: &str) -> usize {
    FLOORS.iter().find(|(t, _)| *t == top).unwrap_or_else(|| panic!("src/{top} has no floor in FLOORS")).1
}

#[test]
fn no_file_imports_a_higher_floor() {
    let c = Crate::read();
    let mut upward = Vec::new();
    for (a, targets) in c.imports() {
        for b in targets {
            let (fa, fb) = (floor(&c.top(&a)), floor(&c.top(&b)));
            if fa < fb && c.top(&b) != "lib.rs" {
                upward.push(format!("{} (floor {fa}) imports {} (floor {fb})", c.rel(&a), c.rel(&b)));
            }
        }
    }
    assert!(upward.is_empty(), "{} imports run upward:\n{}", upward.len(), upward.join("\n"));
}

#[test]
fn no_two_files_of_different_folders_import_each_other() {
    let c = Crate::read();
    let edges = c.imports();
    let mut circles = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            if a < b && edges[b].contains(a) && a.parent() != b.parent() {
                circles.push(format!("{} <-> {}", c.rel(a), c.rel(b)));
            }
        }
    }
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

#[test]
fn the_backend_names_nothing_above_it() {
    let c = Crate::read();
    for (file, text) in c.modules.values().filter(|f| c.top(f) == "backend").map(|f| (f, code(f))) {
        for above in ["crate::tensor", "crate::static_", "crate::nn", "crate::ops", "crate::autograd"] {
            assert!(!text.contains(above), "{} names {above}", c.rel(file));
        }
    }
}

#[test]
fn the_gpu_runtime_is_a_stack_of_facets() {
    // Its files import each other through `super::`; `mod.rs` (the locks, the constants and
    // the re-exports) is left out as an importer.
    let c = Crate::read();
    let dir = c.root.join("backend/gpu");
    let files: Vec<PathBuf> =
        c.modules.values().filter(|f| f.parent() == Some(dir.as_path()) && !f.ends_with("mod.rs")).cloned().collect();
    assert!(files.len() >= 10, "the runtime's files: {files:?}");
    let edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = files
        .iter()
        .map(|f| {
            let targets = paths_under(&code(f), "super")
                .iter()
                .filter_map(|p| p.first())
                .map(|m| dir.join(format!("{m}.rs")))
                .filter(|t| t != f && files.contains(t))
                .collect();
            (f.clone(), targets)
        })
        .collect();
    let circled = on_circles(&edges);
    let names: Vec<String> = circled.iter().map(|f| c.rel(f)).collect();
    assert!(names.is_empty(), "runtime files on an import circle: {names:?}");
    // The facets are leaves: they name no other file of the runtime but the kernels' sources
    // (`shader.rs`, and `in_place.rs`, which rewrites them).
    for leaf in ["pool.rs", "pipeline.rs", "profile.rs", "error_flag.rs", "shader.rs", "device.rs"] {
        let t: Vec<String> = edges[&dir.join(leaf)]
            .iter()
            .map(|f| c.rel(f))
            .filter(|f| !f.ends_with("shader.rs") && !f.ends_with("in_place.rs"))
            .collect();
        assert!(t.is_empty(), "backend/gpu/{leaf} imports {t:?}");
    }
}

#[test]
fn no_static_pass_compares_an_op_name() {
    let c = Crate::read();
    for (file, text) in c.modules.values().filter(|f| c.top(f) == "static_").map(|f| (f, code(f))) {
        for (i, line) in text.lines().enumerate() {
            let compares = ["op_type == \"", "op_type != \"", "name() == \"", "name() != \""];
            assert!(
                !compares.iter().any(|p| line.contains(p)),
                "{}:{}: compares an op's name: {}",
                c.rel(file),
                i + 1,
                line.trim()
            );
        }
    }
}

#[test]
fn the_rules_can_fail() {
    // The parser finds what a violation would look like, so the checks above can fail.
    let paths =
        crate_paths("use crate::static_::{self, program::Program as P};\nlet x = crate::nn::unique_name(\"a\");");
    assert_eq!(
        paths,
        [vec!["static_", "self"], vec!["static_", "program", "Program"], vec!["nn", "unique_name"]]
            .map(|p| p.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    );
    let c = Crate::read();
    let shape = c.module_file(&["shape".to_string(), "View".to_string()], true).unwrap();
    assert_eq!(c.rel(&shape), "shape.rs");
    assert_eq!(c.rel(&c.module_file(&["Tensor".to_string()], true).unwrap()), "tensor/mod.rs");
    assert!(floor("backend") < floor("tensor") && floor("ops") < floor("static_"));
    assert_eq!(paths_under("use super::{a::B, c};\nlet x = super::d::e();", "super").len(), 3);
    let node = |n: &str| PathBuf::from(n);
    let graph = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry(node(a)).or_default().insert(node(b));
            g.entry(node(b)).or_default();
        }
        g
    };
    let circle = on_circles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("c", "e")]));
    assert_eq!(circle, ["a", "b", "c", "d"].map(node).into_iter().collect());
    assert!(on_circles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
}

//! Deterministic mutation fuzzing of every loader that reads bytes a user may not control:
//! safetensors checkpoints, state dicts into a model, optimizer state, MNIST IDX files (raw
//! and gzipped), inference models, PNG input, Paddle and PyTorch weight files, CIFAR-10.
//!
//! Each target starts from valid inputs made here, mutates them (bit flips, interesting
//! integers over length fields, truncation, deletion, duplication, splicing) with a seeded
//! generator and runs the loader. A panic, an execution over 5 s, or an allocation of more
//! than the target's allowance over the input's size fails the test; the input is written to
//! `tests/fuzz_regressions/<target>-<hash>.bin`, which `every_saved_regression_input_stays_fixed`
//! replays from then on. Each target runs `DYGRAPH_FUZZ_EXECS` executions (default 40,000,
//! about a second or two each), or for `DYGRAPH_FUZZ_SECONDS` seconds when that is set; the
//! seed is printed (`DYGRAPH_TEST_SEED` repeats a run). The long runs of RELIABILITY.md are
//! `DYGRAPH_FUZZ_SECONDS=600 cargo test --release --test end_to_end fuzz -- --nocapture`.

use crate::common;

#[path = "../../examples/common/mod.rs"]
#[allow(clippy::duplicate_mod)]
mod example_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use dygraph::io::{load_from_bytes, load_paddle_from_bytes, load_torch_from_bytes, save_to_bytes};
use dygraph::nn::{Forward, Layer, Linear};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::vision::datasets::{Cifar10, Mnist, Mode};
use dygraph::{DType, Place, Tensor};

/// Counts the bytes each thread has allocated and not freed, and their peak, so that one
/// execution's allocations can be bounded by its input's size.
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grow(n: usize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get() + n;
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

fn shrink(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrink(layout.size());
            grow(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// splitmix64: the mutations' generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING_32: [u32; 9] = [0, 1, 0x7f, 0x80, 0xff, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, 0xffff_ffff];
const INTERESTING_64: [u64; 5] = [0, 1 << 31, 1 << 40, 1 << 60, u64::MAX];

/// One to four mutations of `seed`, sometimes spliced with another corpus entry.
fn mutate(rng: &mut Rng, seed: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = [0u8, 1, 0x7f, 0x80, 0xff, b'\n', b'.'][rng.below(7)];
            }
            2 if len >= 4 => {
                let i = rng.below(len - 3);
                let x = INTERESTING_32[rng.below(INTERESTING_32.len())];
                let b = if rng.below(2) == 0 { x.to_le_bytes() } else { x.to_be_bytes() };
                v[i..i + 4].copy_from_slice(&b);
            }
            3 if len >= 8 => {
                let i = rng.below(len - 7);
                let x = INTERESTING_64[rng.below(INTERESTING_64.len())];
                v[i..i + 8].copy_from_slice(&x.to_le_bytes());
            }
            4 => v.truncate(rng.below(len + 1)),
            5 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                v.drain(a..b);
            }
            6 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                let chunk = v[a..b].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, chunk);
            }
            7 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            _ => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() && len > 0 {
                    let cut = rng.below(len);
                    let from = rng.below(other.len());
                    v.truncate(cut);
                    v.extend_from_slice(&other[from..]);
                }
            }
        }
    }
    v
}

/// Two byte strings in one input (`[u32 length of a][a][b]`), so one mutation stream covers
/// loaders that read a pair of files.
fn pack(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut v = (a.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    v
}

fn unpack(v: &[u8]) -> (&[u8], &[u8]) {
    if v.len() < 4 {
        return (v, &[]);
    }
    let n = (u32::from_le_bytes(v[..4].try_into().unwrap()) as usize).min(v.len() - 4);
    (&v[4..4 + n], &v[4 + n..])
}

/// Loads one input: whether it was accepted.
type Loader = Box<dyn Fn(&[u8]) -> bool>;

/// A loader under test: its name, its seed inputs, the run (Ok or a typed error are both
/// fine; only a panic, a hang or a runaway allocation fail), and the allocation allowed on
/// top of 64 × the input's size.
struct Target {
    seeds: Vec<Vec<u8>>,
    run: Loader,
    slack: usize,
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/peer_weights").join(name)).unwrap()
}

/// On the CPU whatever the default place (a hardware GPU where there is one): the targets feed it CPU tensors.
fn small_model() -> Linear {
    dygraph::guard(Place::Cpu, || Linear::new(4, 3)).unwrap()
}

fn target(name: &str) -> Target {
    let cpu = Place::Cpu;
    let state_bytes = || save_to_bytes(&small_model().state_dict()).unwrap();
    let mixed = || {
        let mut s = dygraph::nn::StateDict::new();
        s.insert("f", Tensor::from_vec_on(vec![1.5f32, -2.0], [2], cpu).unwrap());
        s.insert("i", Tensor::from_vec_on(vec![7i64], [1, 1], cpu).unwrap());
        s.insert("b", Tensor::from_vec_on(vec![true, false, true], [3], cpu).unwrap());
        s.insert("h", Tensor::from_vec_on(vec![0.5f64], [1], cpu).unwrap().cast(DType::Float16).unwrap());
        save_to_bytes(&s).unwrap()
    };
    match name {
        "safetensors" => Target {
            seeds: vec![state_bytes(), mixed()],
            run: Box::new(move |b| load_from_bytes(b, cpu).is_ok()),
            slack: 1 << 20,
        },
        "state_dict" => Target {
            seeds: vec![state_bytes()],
            run: Box::new(move |b| {
                let mut m = small_model();
                load_from_bytes(b, cpu).and_then(|s| m.set_state_dict(&s)).is_ok()
            }),
            slack: 1 << 20,
        },
        "optimizer_state" => {
            // Optimizer state is keyed by the parameters' generated names: every run loads into
            // an optimizer over the same model.
            let m = small_model();
            let mut opt = Adam::new(1e-3, m.parameters());
            let x = Tensor::from_vec_on(vec![1.0f32; 8], [2, 4], cpu).unwrap();
            m.forward(&x).unwrap().sum(&[], false).unwrap().backward().unwrap();
            opt.step().unwrap();
            let seed = save_to_bytes(&opt.state_dict()).unwrap();
            Target {
                seeds: vec![seed],
                run: Box::new(move |b| {
                    let mut opt = Adam::new(1e-3, m.parameters());
                    load_from_bytes(b, cpu).and_then(|s| opt.set_state_dict(&s)).is_ok()
                }),
                slack: 1 << 20,
            }
        }
        "mnist_idx" => {
            let mut images = vec![0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 4];
            images.extend((0..48).map(|i| (i * 5) as u8));
            let labels = vec![0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9];
            let gz = |b: &[u8]| {
                use std::io::Write;
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
                e.write_all(b).unwrap();
                e.finish().unwrap()
            };
            Target {
                seeds: vec![pack(&images, &labels), pack(&gz(&images), &gz(&labels))],
                run: Box::new(|b| {
                    let (i, l) = unpack(b);
                    Mnist::from_idx_bytes(i, l).is_ok()
                }),
                // gzip may legitimately expand a small input.
                slack: 64 << 20,
            }
        }
        "inference_model" => {
            use dygraph::static_::{Executor, Program, Scope, data, program_guard, save_inference_model};
            let (main, startup) = (Program::new(), Program::new());
            let (x, y) = program_guard(&main, &startup, || {
                let x = data("x", &[-1, 4], DType::Float32).unwrap();
                let y = small_model().forward(&x).unwrap().relu().unwrap();
                (x, y)
            });
            let exe = Executor::with_scope(cpu, Scope::new());
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            let dir = std::env::temp_dir().join(format!("dygraph-fuzz-infer-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let prefix = dir.join("model");
            save_inference_model(&prefix, &[&x], &[&y], &exe, &main).unwrap();
            let model = std::fs::read(dir.join("model.pdmodel")).unwrap();
            let params = std::fs::read(dir.join("model.pdiparams")).unwrap();
            let _ = std::fs::remove_dir_all(&dir);
            Target {
                seeds: vec![pack(&model, &params)],
                run: Box::new(move |b| {
                    let (m, p) = unpack(b);
                    let exe = Executor::with_scope(cpu, Scope::new());
                    dygraph::static_::load_inference_model_from_bytes(m, p, &exe).is_ok()
                }),
                slack: 4 << 20,
            }
        }
        "png" => {
            let mut png = Vec::new();
            let img = image::GrayImage::from_fn(6, 5, |x, y| image::Luma([(x * 40 + y * 9) as u8]));
            img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).unwrap();
            Target {
                seeds: vec![png],
                run: Box::new(move |b| example_common::decode_image(b, cpu).is_ok()),
                // The decoder's documented cap: 64 MiB.
                slack: 80 << 20,
            }
        }
        "paddle_pdparams" => Target {
            seeds: vec![fixture("tiny.pdparams"), fixture("values.pdparams"), fixture("numpy_layouts_p2.pdparams")],
            run: Box::new(move |b| load_paddle_from_bytes(b, cpu).is_ok()),
            slack: 1 << 20,
        },
        "torch_pt" => Target {
            seeds: vec![fixture("values.pt"), fixture("tiny.pt")],
            run: Box::new(move |b| load_torch_from_bytes(b, cpu).is_ok()),
            slack: 1 << 20,
        },
        "cifar10" => {
            use common::cifar::{archive_with, pixels, py2_batch};
            let seed = archive_with(
                &[("data_batch_1", py2_batch(&pixels(0, 2), &[3, 4])), ("test_batch", py2_batch(&pixels(5, 1), &[1]))],
                flate2::Compression::none(),
            );
            Target {
                seeds: vec![seed],
                run: Box::new(|b| Cifar10::from_tar_gz_bytes(b, Mode::Train).is_ok()),
                slack: 1 << 20,
            }
        }
        other => panic!("no fuzz target {other}"),
    }
}

fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions")
}

/// Runs `input` once: `Err` with what went wrong (panic, time, allocation).
fn execute(t: &Target, input: &[u8]) -> Result<bool, String> {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let start = Instant::now();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (t.run)(input)));
    let elapsed = start.elapsed();
    let peak = PEAK.with(Cell::get).saturating_sub(base);
    let ok = r.map_err(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
        format!("panicked: {}", msg.unwrap_or_default())
    })?;
    if elapsed > Duration::from_secs(5) {
        return Err(format!("took {elapsed:?}"));
    }
    let allowed = 64 * input.len() + t.slack;
    if peak > allowed {
        return Err(format!("allocated {peak} bytes for a {}-byte input (allowed {allowed})", input.len()));
    }
    Ok(ok)
}

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Keeps the messages of the panics this thread catches out of the output (a failure is
/// reported once, after the loop); other threads' panics print as usual.
fn quiet_panics(on: bool) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(on));
}

fn fuzz(name: &str) {
    let t = target(name);
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<u64>().ok());
    let seconds = env("DYGRAPH_FUZZ_SECONDS");
    let execs = if seconds.is_some() { u64::MAX } else { env("DYGRAPH_FUZZ_EXECS").unwrap_or(40_000) };
    let seed = common::run_seed() ^ name.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let mut rng = Rng(seed);
    for s in &t.seeds {
        assert!(
            execute(&t, s).unwrap_or_else(|e| panic!("{name}: a seed input {e}")),
            "{name}: a seed input fails to load"
        );
    }
    quiet_panics(true);
    let start = Instant::now();
    let deadline = seconds.map(|s| start + Duration::from_secs(s));
    let (mut runs, mut accepted) = (0u64, 0u64);
    let mut failure = None;
    while runs < execs && deadline.is_none_or(|d| Instant::now() < d) && failure.is_none() {
        for _ in 0..64 {
            let base = &t.seeds[rng.below(t.seeds.len())];
            let input = mutate(&mut rng, base, &t.seeds);
            runs += 1;
            match execute(&t, &input) {
                Ok(ok) => accepted += ok as u64,
                Err(e) => {
                    failure = Some((e, input));
                    break;
                }
            }
        }
    }
    quiet_panics(false);
    let line = format!(
        "fuzz {name}: {runs} executions in {:.1} s ({accepted} loaded, the rest typed errors), seed {seed:#x}\n",
        start.elapsed().as_secs_f64()
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    if let Some((e, input)) = failure {
        let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        let path = regressions_dir().join(format!("{name}-{hash:016x}.bin"));
        let _ = std::fs::create_dir_all(regressions_dir());
        let _ = std::fs::write(&path, &input);
        panic!("fuzz {name}: an input {e}; saved to {} (seed {seed:#x})", path.display());
    }
}

const TARGETS: [&str; 9] = [
    "safetensors",
    "state_dict",
    "optimizer_state",
    "mnist_idx",
    "inference_model",
    "png",
    "paddle_pdparams",
    "torch_pt",
    "cifar10",
];

macro_rules! fuzz_tests {
    ($($test:ident => $name:literal;)*) => {$(
        #[test]
        fn $test() {
            fuzz($name);
        }
    )*};
}

fuzz_tests! {
    fuzz_safetensors => "safetensors";
    fuzz_state_dict => "state_dict";
    fuzz_optimizer_state => "optimizer_state";
    fuzz_mnist_idx => "mnist_idx";
    fuzz_inference_model => "inference_model";
    fuzz_png => "png";
    fuzz_paddle_pdparams => "paddle_pdparams";
    fuzz_torch_pt => "torch_pt";
    fuzz_cifar10 => "cifar10";
}

#[test]
fn every_saved_regression_input_stays_fixed() {
    let mut replayed = 0;
    if let Ok(entries) = std::fs::read_dir(regressions_dir()) {
        for e in entries {
            let path = e.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            let Some((name, _)) = file.rsplit_once('-').filter(|_| file.ends_with(".bin")) else { continue };
            assert!(TARGETS.contains(&name), "{file}: no fuzz target {name}");
            let input = std::fs::read(&path).unwrap();
            if let Err(e) = execute(&target(name), &input) {
                panic!("{file}: {e}");
            }
            replayed += 1;
        }
    }
    let line = format!("fuzz regressions: {replayed} saved inputs replayed\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

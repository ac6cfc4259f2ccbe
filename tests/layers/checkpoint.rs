//! Checkpoints: round trips on both places and all dtypes, strict errors for truncated,
//! corrupt and mismatched files, atomic writes, and a round trip through Python's
//! safetensors + numpy (the venv test.sh makes in the user cache directory).

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use dygraph::nn::StateDict;
use dygraph::{self as paddle, DType, Place, Tensor};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dygraph-ckpt-{}-{}", std::process::id(), common::run_seed()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn sample(place: Place) -> StateDict {
    let mut sd = StateDict::new();
    sd.insert("linear1.weight", Tensor::from_vec_on(vec![1.5f32, -2.0, 0.25, 4.0, 5.0, 6.0], [2, 3], place).unwrap());
    sd.insert("linear1.bias", Tensor::from_vec_on(vec![0.5f32, -0.5, 1.0], [3], place).unwrap());
    sd.insert("steps", Tensor::from_vec_on(vec![7i64, -3], [2], place).unwrap());
    sd.insert("count", Tensor::from_vec_on(vec![42i32], &[] as &[usize], place).unwrap());
    sd.insert("mask", Tensor::from_vec_on(vec![true, false, true], [3], place).unwrap());
    sd.insert("half", Tensor::from_vec_on(vec![1.0f32, 0.5], [2], place).unwrap().cast(DType::Float16).unwrap());
    if place == Place::Cpu {
        sd.insert("double", Tensor::from_vec_on(vec![std::f64::consts::PI], [1], place).unwrap());
    }
    sd
}

fn assert_same(a: &StateDict, b: &StateDict) {
    assert_eq!(a.keys(), b.keys(), "keys and their order survive");
    for (name, t) in a.iter() {
        let u = b.get(name).unwrap();
        assert_eq!((t.shape(), t.dtype()), (u.shape(), u.dtype()), "{name}");
        assert_eq!(common::values(t), common::values(u), "{name}");
    }
}

#[test]
fn round_trip_every_dtype_on_both_places() {
    let _generator = common::generator_lock();
    let mut places = vec![Place::Cpu];
    places.extend(common::gpu_or_skip());
    for place in places {
        let sd = sample(place);
        let path = tmp(&format!("rt-{place}.safetensors"));
        paddle::save(&sd, &path).unwrap();
        let back = paddle::load(&path).unwrap();
        assert_same(&sd, &back);
        assert!(back.iter().all(|(_, t)| t.place() == Place::Cpu));
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left behind");
    }
}

#[test]
fn truncated_corrupt_and_missing_files_are_clear_errors() {
    let _generator = common::generator_lock();
    let path = tmp("good.safetensors");
    paddle::save(&sample(Place::Cpu), &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let truncated = tmp("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() - 5]).unwrap();
    let e = paddle::load(&truncated).unwrap_err().to_string();
    assert!(e.contains("truncated.safetensors") && e.contains("load"), "{e}");
    let corrupt = tmp("corrupt.safetensors");
    let mut c = bytes.clone();
    c[9] = b'{';
    c[12] = 0xff;
    std::fs::write(&corrupt, &c).unwrap();
    assert!(paddle::load(&corrupt).is_err());
    let e = paddle::load(tmp("absent.safetensors")).unwrap_err();
    assert!(matches!(e, paddle::Error::Io(_)) && e.to_string().contains("absent.safetensors"), "{e}");
}

#[test]
fn a_failed_save_keeps_the_previous_checkpoint() {
    let _generator = common::generator_lock();
    let path = tmp("keep.safetensors");
    paddle::save(&sample(Place::Cpu), &path).unwrap();
    let before = std::fs::read(&path).unwrap();
    // Saving into a directory that does not exist fails without touching the old file.
    let bad = path.parent().unwrap().join("missing-dir").join("keep.safetensors");
    assert!(paddle::save(&sample(Place::Cpu), &bad).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

fn python_or_skip() -> Option<PathBuf> {
    let candidates = [
        std::env::var("DYGRAPH_PYTHON").ok().map(PathBuf::from),
        // Where test.sh makes its venv.
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|c| c.join("dygraph/venv/bin/python")),
    ];
    let found = candidates.into_iter().flatten().find(|p| {
        // A path, or a command name found on PATH (`DYGRAPH_PYTHON=python3`).
        Command::new(p).args(["-c", "import safetensors, numpy"]).status().is_ok_and(|s| s.success())
    });
    if found.is_none() {
        let why =
            "no Python with safetensors and numpy (the venv test.sh makes in ~/.cache/dygraph, or DYGRAPH_PYTHON)";
        if !common::skipping("python") {
            panic!("{why}; set DYGRAPH_TEST_SKIP=python to skip this check (it is counted and printed)");
        }
        common::skip("python", "the safetensors round trip through Python", why);
    }
    found
}

#[test]
fn round_trip_through_python_safetensors_and_numpy() {
    let _generator = common::generator_lock();
    let Some(py) = python_or_skip() else { return };
    let ours = tmp("ours.safetensors");
    let theirs = tmp("theirs.safetensors");
    paddle::save(&sample(Place::Cpu), &ours).unwrap();
    let script = r#"
import sys, numpy as np
from safetensors.numpy import load_file, save_file
d = load_file(sys.argv[1])
assert d["linear1.weight"].dtype == np.float32 and d["linear1.weight"].shape == (2, 3)
assert np.array_equal(d["linear1.weight"], np.array([[1.5, -2.0, 0.25], [4.0, 5.0, 6.0]], np.float32))
assert d["steps"].dtype == np.int64 and list(d["steps"]) == [7, -3]
assert d["count"].shape == () and int(d["count"]) == 42
assert d["mask"].dtype == np.bool_ and list(d["mask"]) == [True, False, True]
assert d["half"].dtype == np.float16 and list(d["half"]) == [1.0, 0.5]
assert d["double"].dtype == np.float64
out = {k: v for k, v in d.items()}
out["linear1.weight"] = d["linear1.weight"] * 2
out["numpy_made"] = np.arange(6, dtype=np.int32).reshape(2, 3)
save_file(out, sys.argv[2])
print("python ok")
"#;
    let o = Command::new(&py).arg("-c").arg(script).arg(&ours).arg(&theirs).output().unwrap();
    assert!(o.status.success(), "python failed: {}", String::from_utf8_lossy(&o.stderr));
    let back = paddle::load(&theirs).unwrap();
    assert_eq!(common::values(back.get("linear1.weight").unwrap()), vec![3.0, -4.0, 0.5, 8.0, 10.0, 12.0]);
    let made = back.get("numpy_made").unwrap();
    assert_eq!((made.dtype(), made.shape()), (DType::Int32, &[2usize, 3][..]));
    assert_eq!(made.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
}

//! Out-of-range indices on the GPU: the kernel records them in the device's error flag and
//! the next readback or `sync()` returns the CPU's typed error. A binary of its own: the flag
//! is per device, so a test running beside these would read their errors.

use crate::common;

use common::gpu_or_skip;
use dygraph::ops::{AttrMap, run_op};
use dygraph::{self as paddle, DType, Error, Place, Tensor};

fn f32_on(v: &[f32], shape: &[usize], place: Place) -> Tensor {
    Tensor::from_vec_on(v.to_vec(), shape, place).unwrap()
}

fn idx_on(v: &[i64], shape: &[usize], dtype: DType, place: Place) -> Tensor {
    Tensor::from_vec_on(v.to_vec(), shape, place).unwrap().cast(dtype).unwrap()
}

/// The error an out-of-range index gives on the GPU: at the next readback (or sync), the
/// CPU's typed error naming the op, the index and the size.
fn gpu_index_error(op: &str, run: impl FnOnce() -> paddle::Result<Tensor>, needles: &[&str]) {
    let e = match run() {
        Err(e) => e,
        Ok(y) => y.to_vec::<f32>().map(|_| ()).expect_err(&format!("{op}: an out-of-range index gave no error")),
    };
    assert!(matches!(&e, Error::InvalidArgument { op: o, .. } if *o == op), "{op}: {e:?}");
    for n in needles {
        assert!(e.to_string().contains(n), "{op}: {e} lacks {n:?}");
    }
    // The flag is cleared: the next readback is clean.
    paddle::sync().unwrap();
}

#[test]
fn gpu_out_of_range_indices_are_errors_at_the_next_readback() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = gpu_or_skip() else { return };
    let x = f32_on(&[1., 2., 3., 4., 5., 6., 7., 8., 9.], &[3, 3], gpu);
    gpu_index_error(
        "index_select",
        || paddle::index_select(&x, &idx_on(&[1, 7, 0], &[3], DType::Int64, gpu), 0),
        &["index 7", "size 3"],
    );
    gpu_index_error(
        "index_select",
        || paddle::index_select(&x, &idx_on(&[-2], &[1], DType::Int32, gpu), 1),
        &["index -2"],
    );
    gpu_index_error("gather", || paddle::gather(&x, &idx_on(&[3], &[], DType::Int64, gpu), 0), &["index 3"]);
    gpu_index_error(
        "take_along_axis",
        || paddle::take_along_axis(&x, &idx_on(&[0, 4, 1], &[1, 3], DType::Int64, gpu), 0),
        &["index 4", "size 3"],
    );
    gpu_index_error(
        "embedding",
        || paddle::embedding(&idx_on(&[2, 9], &[2], DType::Int64, gpu), &x, None),
        &["index 9"],
    );
    gpu_index_error(
        "one_hot",
        || paddle::one_hot(&idx_on(&[1, 3], &[2], DType::Int64, gpu), 3),
        &["index 3", "size 3"],
    );
    // The scatters: a 1-D list, a full index tensor, and a multi-index coordinate (each
    // coordinate is checked against its own dimension, so [0, 3] of a [3, 3] is an error
    // even though its flat position 3 exists).
    let rows = f32_on(&[1., 1., 1., 2., 2., 2.], &[2, 3], gpu);
    gpu_index_error(
        "scatter_axis",
        || paddle::scatter(&x, &idx_on(&[0, 3], &[2], DType::Int64, gpu), &rows, true),
        &["index 3", "size 3"],
    );
    gpu_index_error(
        "scatter_axis",
        || {
            paddle::put_along_axis(
                &x,
                &idx_on(&[0, 1, -1], &[1, 3], DType::Int32, gpu),
                &x.slice(&[0], &[0], &[1])?,
                0,
                "add",
            )
        },
        &["index -1"],
    );
    gpu_index_error(
        "scatter_axis",
        || paddle::scatter_nd_add(&x, &idx_on(&[0, 3], &[1, 2], DType::Int64, gpu), &f32_on(&[5.], &[1], gpu)),
        &["index -1"],
    );
    // int64 indices past 32 bits are out of range, not wrapped.
    gpu_index_error(
        "index_select",
        || paddle::index_select(&x, &idx_on(&[1 << 33], &[1], DType::Int64, gpu), 0),
        &["index 8589934592"],
    );
    // The gather's gradient (index_scatter_add) with padding row 0, as an embedding with
    // padding_idx = 0 runs it: the out-of-range index is reported even though the row that
    // checks the indices is the padding row.
    let attrs = AttrMap::new()
        .with("outer", 1usize)
        .with("n", 3usize)
        .with("m", 2usize)
        .with("inner", 2usize)
        .with("so", 0usize)
        .with("sj", 1usize)
        .with("si", 0usize)
        .with("pad", Some(0usize))
        .with("out_shape", vec![2usize, 2])
        .with("in_shape", vec![3usize, 2])
        .with("axis", 0usize);
    let g = f32_on(&[1., 2., 3., 4.], &[2, 2], gpu);
    gpu_index_error(
        "index_scatter_add",
        || Ok(run_op("index_scatter_add", &[&g, &idx_on(&[1, 5], &[2], DType::Int64, gpu)], &attrs)?.remove(0)),
        &["index 5", "size 3"],
    );
    // In range, the padding row sums nothing and the others sum their rows.
    let y = run_op("index_scatter_add", &[&g, &idx_on(&[1, 0], &[2], DType::Int64, gpu)], &attrs).unwrap();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), [0., 0., 1., 2., 0., 0.]);
    // sync() reports it too, with no readback.
    let _y = paddle::index_select(&x, &idx_on(&[5], &[1], DType::Int64, gpu), 0).unwrap();
    let e = paddle::sync().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { op: "index_select", .. }), "{e}");
    // With label smoothing too.
    let logits = f32_on(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[2, 3], gpu);
    let opts = paddle::nn::CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() };
    gpu_index_error(
        "take_along_axis",
        || paddle::nn::functional::cross_entropy(&logits, &idx_on(&[0, 3], &[2], DType::Int64, gpu), &opts),
        &["index 3"],
    );
    // Cross entropy's labels: ≥ C and negative (other than ignore_index) on both places.
    for place in [Place::Cpu, gpu] {
        let logits = f32_on(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], &[2, 3], place);
        for bad in [[0i64, 3], [-2, 1]] {
            let r = paddle::nn::functional::cross_entropy(
                &logits,
                &idx_on(&bad, &[2], DType::Int64, place),
                &Default::default(),
            )
            .and_then(|l| l.to_vec::<f32>());
            let e = r.expect_err(&format!("label {bad:?} on {place}"));
            assert!(matches!(e, Error::InvalidArgument { .. }), "{place}: {e}");
            paddle::sync().unwrap();
        }
    }
}

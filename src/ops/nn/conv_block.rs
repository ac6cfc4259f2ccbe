//! The lines of `conv2d.wgsl`'s `direct` entry that depend on its block shape: each
//! invocation computes `rows` × `cols` outputs (`cols` 4 or 8), and these lines spell the
//! block out one named value per row, column and accumulator instead of looping over arrays.
//!
//! Software adapters run a shader's invocations as SIMD lanes and load from a storage buffer
//! one lane at a time, so a block's cost is about its loads per k (`rows + cols`) and its
//! worth is its products per k (`rows · cols`): 8 × 8 does 64 products for 16 loads where
//! 4 × 4 did 16 for 8. Written as loops over private arrays, blocks larger than 4 × 4 are not
//! unrolled by lavapipe and index their arrays through memory, which made 8 × 8 slower than
//! 4 × 4 there; named values keep every accumulator in a register.

/// The `{{DIRECT_*}}` placeholders of a `rows` × `cols` block of mode `mode` (the prefix of
/// the mode's functions in the shader: `fwd`, `bwd_data`, `bwd_filter`, `bwd_cols`).
pub(crate) fn block_lines(mode: &str, rows: u32, cols: u32) -> Vec<(&'static str, String)> {
    let halves = cols / 4;
    let mut setup = String::new();
    for j in 0..cols {
        setup += &format!("    let i{j} = {mode}_col_info(min(col0 + {j}u, last_n));\n");
    }
    for i in 0..rows {
        setup += &format!("    let r{i} = min(row0 + {i}u, last_m);\n");
        for h in 0..halves {
            setup += &format!("    var c{i}_{h} = vec4<f32>(0.0);\n");
        }
    }
    let mut product = String::new();
    for h in 0..halves {
        let loads: Vec<String> = (0..4).map(|j| format!("{mode}_load_b(s, i{}, grp)", 4 * h + j)).collect();
        product += &format!("        let b{h} = vec4<f32>({});\n", loads.join(", "));
    }
    for i in 0..rows {
        product += &format!("        let a{i} = {mode}_load_a(r{i}, k, s, grp);\n");
        for h in 0..halves {
            product += &format!("        c{i}_{h} = c{i}_{h} + a{i} * b{h};\n");
        }
    }
    let mut store = String::new();
    for i in 0..rows {
        for h in 0..halves {
            store += &format!("    direct_store(row0 + {i}u, col0 + {}u, grp, split, c{i}_{h});\n", 4 * h);
        }
    }
    vec![("DIRECT_SETUP", setup), ("DIRECT_PRODUCT", product), ("DIRECT_STORE", store)]
}

/// The row counts of the 8-column direct block (at most 15: the variant key's field).
pub(crate) const WIDE_ROWS: [usize; 7] = [1, 2, 4, 6, 8, 10, 12];

/// The 8-column block's rows for a product of `m` GEMM rows: the count in [`WIDE_ROWS`]
/// whose row blocks load least per k in all (`⌈m / rows⌉ · (rows + 8)`), the larger on a
/// tie. Rows past `m` load and multiply for nothing, so 20 and 50 channels take 10-row
/// blocks (lavapipe, MNIST conv2: forward 22 → 17 ms, input gradient 45 → 37 ms over 8 rows).
pub(crate) fn wide_rows(m: usize) -> usize {
    WIDE_ROWS.into_iter().rev().min_by_key(|&rows| m.div_ceil(rows) * (rows + 8)).unwrap_or(8)
}

#[cfg(test)]
mod tests {
    use super::{block_lines, wide_rows};

    #[test]
    fn a_block_names_every_row_column_and_accumulator_once() {
        let lines = block_lines("fwd", 2, 8);
        let text = |key: &str| lines.iter().find(|(k, _)| *k == key).unwrap().1.clone();
        let setup = text("DIRECT_SETUP");
        assert_eq!(setup.matches("_col_info(").count(), 8);
        assert_eq!(setup.matches("vec4<f32>(0.0)").count(), 4);
        assert!(setup.contains("let r1 = min(row0 + 1u, last_m);"));
        let product = text("DIRECT_PRODUCT");
        assert_eq!(product.matches("fwd_load_b(").count(), 8);
        assert_eq!(product.matches("fwd_load_a(").count(), 2);
        assert!(product.contains("c1_1 = c1_1 + a1 * b1;"));
        assert_eq!(text("DIRECT_STORE").matches("direct_store(").count(), 4);
    }

    #[test]
    fn wide_blocks_take_the_rows_that_waste_least() {
        // (GEMM rows, block rows): MNIST's 20 and 50 channels fit 10-row blocks exactly.
        for (m, rows) in [(1, 1), (2, 2), (3, 4), (6, 6), (16, 8), (20, 10), (50, 10), (64, 12), (500, 12)] {
            assert_eq!(wide_rows(m), rows, "{m} rows");
        }
    }
}

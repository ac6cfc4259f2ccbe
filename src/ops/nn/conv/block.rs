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
    product += "        s = k_next(s, dims);\n";
    vec![("DIRECT_SETUP", setup), ("DIRECT_PRODUCT", product), ("DIRECT_STORE", store_lines(rows, cols))]
}

fn store_lines(rows: u32, cols: u32) -> String {
    let mut store = String::new();
    for i in 0..rows {
        for h in 0..cols / 4 {
            store += &format!("    direct_store(row0 + {i}u, col0 + {}u, grp, split, c{i}_{h});\n", 4 * h);
        }
    }
    store
}

/// The `{{OPERANDS}}` placeholder: `a_src` and `b_src` with their accessors, as arrays of
/// `element` (f32, or f16 in the float16 variants: the accessors return f32), or of vec4s
/// in the `vector` variant (whose indices are then multiples of 4 wherever it loads four at
/// once, and whose operands' lengths are multiples of 4, so that no value lies past the last
/// whole vec4 when a plan binds a buffer at its exact size). lavapipe loads a storage buffer
/// one lane and one component at a time, but a vec4 in one such load: about twice the
/// values per cycle (a probe: 1.25 ns per vec4 lane load against 0.65 ns per f32 one).
pub(crate) fn operands(vector: bool, element: &str) -> String {
    let mut text = String::new();
    for (binding, side) in [(0, 'a'), (1, 'b')] {
        text += &if vector {
            format!(
                "@group(0) @binding({binding}) var<storage, read> {side}_src: array<vec4<{element}>>;\n\
                 fn {side}_at(i: u32) -> f32 {{ return f32({side}_src[i / 4u][i % 4u]); }}\n\
                 fn {side}4_at(i: u32) -> vec4<f32> {{ return vec4<f32>({side}_src[i / 4u]); }}\n"
            )
        } else {
            format!(
                "@group(0) @binding({binding}) var<storage, read> {side}_src: array<{element}>;\n\
                 fn {side}_at(i: u32) -> f32 {{ return f32({side}_src[i]); }}\n\
                 fn {side}4_at(i: u32) -> vec4<f32> {{\n    \
                 return vec4<f32>(f32({side}_src[i]), f32({side}_src[i + 1u]), f32({side}_src[i + 2u]), f32({side}_src[i + 3u]));\n}}\n"
            )
        };
    }
    text
}

/// The `{{DIRECT_*}}` placeholders of the VECTOR variant's `rows` × 8 block (`rows` a
/// multiple of 4), for a product whose A rows and B columns are each contiguous in memory
/// from a multiple of 4 (`bwd_cols` where cin_g·kh·kw and oh·ow are multiples of 4): per k,
/// one vec4 load per four rows and per four columns.
pub(crate) fn vector_block_lines(mode: &str, rows: u32) -> Vec<(&'static str, String)> {
    let mut setup = String::new();
    for h in 0..2 {
        setup += &format!("    let i{h} = {mode}_col_info(min(col0 + {}u, n_len - 4u));\n", 4 * h);
    }
    for q in 0..rows / 4 {
        setup += &format!("    let r{q} = min(row0 + {}u, m_len - 4u);\n", 4 * q);
    }
    for i in 0..rows {
        for h in 0..2 {
            setup += &format!("    var c{i}_{h} = vec4<f32>(0.0);\n");
        }
    }
    let mut product = String::new();
    for h in 0..2 {
        product += &format!("        let b{h} = {mode}_load_b4(s, i{h}, grp);\n");
    }
    for q in 0..rows / 4 {
        product += &format!("        let a{q} = {mode}_load_a4(r{q}, k, s, grp);\n");
        for (t, lane) in ["x", "y", "z", "w"].iter().enumerate() {
            let i = 4 * q as usize + t;
            for h in 0..2 {
                product += &format!("        c{i}_{h} = c{i}_{h} + a{q}.{lane} * b{h};\n");
            }
        }
    }
    product += "        s = k_next(s, dims);\n";
    vec![("DIRECT_SETUP", setup), ("DIRECT_PRODUCT", product), ("DIRECT_STORE", store_lines(rows, 8))]
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

/// The row counts of the VECTOR variant's block (multiples of 4).
pub(crate) const VECTOR_ROWS: [usize; 3] = [4, 8, 12];

/// The VECTOR block's rows for `m` GEMM rows (a multiple of 4), chosen as [`wide_rows`]
/// chooses.
pub(crate) fn vector_rows(m: usize) -> usize {
    VECTOR_ROWS.into_iter().rev().min_by_key(|&rows| m.div_ceil(rows) * (rows + 8)).unwrap_or(4)
}

#[cfg(test)]
mod tests {
    use super::{block_lines, operands, vector_block_lines, vector_rows, wide_rows};

    fn text(lines: &[(&'static str, String)], key: &str) -> String {
        lines.iter().find(|(k, _)| *k == key).unwrap().1.clone()
    }

    #[test]
    fn a_block_names_every_row_column_and_accumulator_once() {
        let lines = block_lines("fwd", 2, 8);
        let text = |key: &str| text(&lines, key);
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
    fn a_vector_block_loads_each_quad_of_rows_and_columns_once_per_k() {
        let lines = vector_block_lines("bwd_cols", 8);
        let product = text(&lines, "DIRECT_PRODUCT");
        assert_eq!(product.matches("bwd_cols_load_a4(").count(), 2);
        assert_eq!(product.matches("bwd_cols_load_b4(").count(), 2);
        // Row 6 is the third lane of the second quad, for both column halves.
        assert!(product.contains("c6_0 = c6_0 + a1.z * b0;"));
        assert!(product.contains("c6_1 = c6_1 + a1.z * b1;"));
        assert!(text(&lines, "DIRECT_SETUP").contains("let r1 = min(row0 + 4u, m_len - 4u);"));
        assert_eq!(text(&lines, "DIRECT_STORE").matches("direct_store(").count(), 16);
    }

    #[test]
    fn vector_operands_load_four_values_at_once() {
        assert!(operands(true, "f32").contains("var<storage, read> a_src: array<vec4<f32>>;"));
        assert!(operands(true, "f32").contains("return vec4<f32>(b_src[i / 4u]);"));
        assert!(operands(false, "f32").contains("var<storage, read> b_src: array<f32>;"));
        assert!(operands(false, "f16").contains("var<storage, read> b_src: array<f16>;"));
        for (m, rows) in [(4, 4), (8, 8), (12, 12), (20, 12), (500, 12)] {
            assert_eq!(vector_rows(m), rows, "{m} rows");
        }
    }

    #[test]
    fn wide_blocks_take_the_rows_that_waste_least() {
        // (GEMM rows, block rows): MNIST's 20 and 50 channels fit 10-row blocks exactly.
        for (m, rows) in [(1, 1), (2, 2), (3, 4), (6, 6), (16, 8), (20, 10), (50, 10), (64, 12), (500, 12)] {
            assert_eq!(wide_rows(m), rows, "{m} rows");
        }
    }
}

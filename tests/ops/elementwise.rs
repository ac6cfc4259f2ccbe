//! Elementwise ops, driven by the op tables (`elementwise_ops()` / `apply_elementwise`) so a
//! new row is covered without touching this file: GPU against CPU for every op and dtype,
//! broadcasting, CPU known values, Rust operators, float64 gradchecks and GPU gradients.

use crate::common;

use common::{
    Rng, catch, check_allclose, check_close, check_exact, gpu_matches_cpu, gpu_or_skip, gradcheck, places, report,
    tensor, values,
};
use dygraph::{DType, OpInfo, Place, Tensor, apply_elementwise, elementwise_ops};

/// Scalar parameters each parameterised op runs with.
fn params(name: &str) -> [f64; 2] {
    match name {
        "leaky_relu" => [0.1, 0.0],
        "elu" => [1.3, 0.0],
        "softplus" => [1.5, 10.0],
        "hardsigmoid" => [1.0 / 6.0, 0.5],
        "selu" => [1.0507009873554805, 1.6732632423543772],
        "clip" => [-2.0, 3.0],
        "scale" => [3.0, -2.0],
        "pow_scalar" => [3.0, 0.0],
        _ => [0.0, 0.0],
    }
}

/// Float inputs of operand `k` of `name`: `(lo, hi, smallest |x|)`.
fn float_domain(name: &str, k: usize) -> (f64, f64, f64) {
    match (name, k) {
        ("log" | "sqrt" | "rsqrt", _) => (0.1, 5.0, 0.0),
        ("log1p", _) => (-0.9, 5.0, 0.0),
        ("reciprocal", _) => (-3.0, 3.0, 0.25),
        ("exp", _) => (-5.0, 5.0, 0.0),
        ("relu6", _) => (-3.0, 9.0, 0.0),
        ("divide" | "floor_divide" | "remainder", 0) => (-6.0, 6.0, 0.0),
        ("divide" | "floor_divide" | "remainder", _) => (-3.0, 3.0, 0.25),
        ("pow_tensor", 0) => (0.1, 3.0, 0.0),
        ("pow_tensor", _) => (-2.0, 2.0, 0.0),
        _ => (-4.0, 4.0, 0.0),
    }
}

/// Integer inputs of operand `k` of `name`: `[lo, hi)`. int64 ranges go past 32 bits so the
/// two-word emulation on the GPU is exercised; int32 add/subtract wrap on both places.
fn int_domain(name: &str, k: usize, dtype: DType) -> (i64, i64) {
    let big = dtype == DType::Int64;
    match (name, k) {
        ("logical_not" | "logical_and" | "logical_or" | "logical_xor", _) => (-1, 2),
        ("pow_scalar", _) => (-30, 31),
        ("pow_tensor", 0) => (-5, 6),
        ("pow_tensor", _) => (-2, 9),
        ("divide" | "floor_divide" | "remainder", 1) => (-7, 8),
        ("square" | "multiply", _) if big => (-3_000_000_000, 3_000_000_001),
        ("square" | "multiply", _) => (-40_000, 40_001),
        ("scale", _) if big => (-1_000_000_000_000, 1_000_000_000_001),
        ("scale", _) => (-1_000_000, 1_000_001),
        _ if big => (-3_000_000_000_000, 3_000_000_000_001),
        _ => (-1_500_000_000, 1_500_000_001),
    }
}

fn operand(name: &str, k: usize, dtype: DType, n: usize, rng: &mut Rng) -> Vec<f64> {
    match dtype {
        DType::Bool => rng.ints(n, 0, 2).into_iter().map(|v| v as f64).collect(),
        DType::Int32 | DType::Int64 => {
            let (lo, hi) = int_domain(name, k, dtype);
            rng.ints(n, lo, hi).into_iter().map(|v| v as f64).collect()
        }
        _ => {
            let (lo, hi, gap) = float_domain(name, k);
            let v = if gap > 0.0 { rng.vec_away_from_zero(n, lo, hi, gap) } else { rng.vec(n, lo, hi) };
            // Identical inputs for float32 and float64 (the CPU consistency check).
            v.into_iter().map(|x| x as f32 as f64).collect()
        }
    }
}

/// Fresh inputs for `op` in `dtype`: equal pairs for comparisons, NaN and ±∞ where an op's
/// special-value handling is part of its contract.
fn inputs(op: &OpInfo, dtype: DType, n: usize, rng: &mut Rng) -> Vec<Vec<f64>> {
    let mut xs: Vec<Vec<f64>> = (0..op.arity).map(|k| operand(op.name, k, dtype, n, rng)).collect();
    if op.arity == 2 && (op.returns_bool || matches!(op.name, "maximum" | "minimum")) {
        for i in (0..n).step_by(4) {
            xs[1][i] = xs[0][i];
        }
    }
    let special = op.returns_bool || matches!(op.name, "maximum" | "minimum" | "sign");
    if dtype.is_float() && special {
        for (i, x) in xs[0].iter_mut().enumerate() {
            match i % 11 {
                1 => *x = f64::NAN,
                2 => *x = f64::INFINITY,
                3 => *x = f64::NEG_INFINITY,
                _ => {}
            }
        }
        if let Some(b) = xs.get_mut(1) {
            b.iter_mut().skip(5).step_by(11).for_each(|y| *y = f64::NAN);
        }
    }
    xs
}

/// The elements of an int or bool tensor, exactly.
fn exact(t: &Tensor) -> Vec<i64> {
    match t.dtype() {
        DType::Int64 => t.to_vec::<i64>().unwrap(),
        DType::Int32 => t.to_vec::<i32>().unwrap().into_iter().map(i64::from).collect(),
        DType::Bool => t.to_vec::<bool>().unwrap().into_iter().map(i64::from).collect(),
        d => panic!("exact() of a {d} tensor"),
    }
}

/// Compares two results of the same op: shape, dtype, and values (exact for int and bool,
/// relative 1e-5 for float32/64, 2e-3 for float16).
fn same_result(what: &str, actual: &Tensor, expected: &Tensor) -> Result<(), String> {
    if actual.shape() != expected.shape() {
        return Err(format!("{what}: shape {:?} vs {:?}", actual.shape(), expected.shape()));
    }
    if actual.dtype() != expected.dtype() {
        return Err(format!("{what}: dtype {} vs {}", actual.dtype(), expected.dtype()));
    }
    match expected.dtype() {
        DType::Bool | DType::Int32 | DType::Int64 => {
            let (a, e) = (exact(actual), exact(expected));
            match a.iter().zip(&e).position(|(x, y)| x != y) {
                None => Ok(()),
                Some(i) => Err(format!("{what}: element {i} is {} but expected {}", a[i], e[i])),
            }
        }
        DType::Float16 => check_close(what, &values(actual), &values(expected), 2e-3),
        _ => check_close(what, &values(actual), &values(expected), 1e-5),
    }
}

fn expected_dtype(op: &OpInfo, dtype: DType) -> DType {
    if op.returns_bool { DType::Bool } else { dtype }
}

fn run(op: &OpInfo, xs: &[Tensor]) -> dygraph::Result<Tensor> {
    let refs: Vec<&Tensor> = xs.iter().collect();
    apply_elementwise(op.name, &refs, params(op.name))
}

#[test]
fn every_table_op_and_dtype_matches_between_gpu_and_cpu() {
    let _generator = common::generator_lock();
    let ops = elementwise_ops();
    assert!(!ops.is_empty(), "the elementwise tables are empty");
    let gpu = gpu_or_skip();
    let shape = [4usize, 75];
    let n = 300;
    let mut failures = Vec::new();
    let (mut covered, mut pairs) = (0, 0);
    for (idx, op) in ops.iter().enumerate() {
        assert!(!op.dtypes.is_empty(), "{} declares no dtype", op.name);
        covered += 1;
        for &dtype in &op.dtypes {
            pairs += 1;
            let mut rng = Rng::new(1000 + idx as u64 * 16 + dtype as u64);
            let xs = inputs(op, dtype, n, &mut rng);
            let what = format!("{} {dtype}", op.name);
            let on =
                |d: DType, place: Place| -> Vec<Tensor> { xs.iter().map(|v| tensor(v, &shape, d, place)).collect() };
            let cpu = match run(op, &on(dtype, Place::Cpu)) {
                Ok(t) => t,
                Err(e) => {
                    failures.push(format!("{what} on the CPU: {e}"));
                    continue;
                }
            };
            if cpu.dtype() != expected_dtype(op, dtype) || cpu.shape() != shape {
                failures.push(format!("{what}: CPU result is {} {:?}", cpu.dtype(), cpu.shape()));
            }
            if dtype == DType::Float64 {
                // Float64 lives on the CPU only: it must agree with the float32 kernel.
                let f32_run = run(op, &on(DType::Float32, Place::Cpu)).map_err(|e| e.to_string());
                let res = f32_run.and_then(|r| {
                    let r = if r.dtype() == DType::Bool { r } else { r.cast(DType::Float64).unwrap() };
                    same_result(&format!("{what} vs float32 on the CPU"), &cpu, &r)
                });
                failures.extend(res.err());
                continue;
            }
            let Some(g) = gpu else { continue };
            match run(op, &on(dtype, g)) {
                Ok(dev) => {
                    if dev.place() != g {
                        failures.push(format!("{what}: GPU result is on {}", dev.place()));
                    }
                    failures.extend(same_result(&format!("{what} GPU vs CPU"), &dev, &cpu).err());
                }
                Err(e) => failures.push(format!("{what} on the GPU: {e}")),
            }
        }
    }
    assert_eq!(covered, ops.len());
    eprintln!("checked {covered} elementwise ops in {pairs} (op, dtype) pairs");
    report("elementwise GPU vs CPU", &failures);
}

#[test]
fn float_ops_with_other_parameters() {
    let _generator = common::generator_lock();
    // Parameters the table sweep does not use: a fractional exponent on positive inputs,
    // exponent 0, a non-default softplus, and the other side of every parameterised op.
    let cases: &[(&str, [f64; 2], (f64, f64))] = &[
        ("pow_scalar", [2.5, 0.0], (0.1, 4.0)),
        ("pow_scalar", [-1.5, 0.0], (0.1, 4.0)),
        ("pow_scalar", [0.0, 0.0], (-4.0, 4.0)),
        ("pow_scalar", [-2.0, 0.0], (0.5, 4.0)),
        ("softplus", [1.0, 20.0], (-30.0, 30.0)),
        ("softplus", [2.0, 3.0], (-4.0, 4.0)),
        ("leaky_relu", [0.01, 0.0], (-4.0, 4.0)),
        ("elu", [0.5, 0.0], (-4.0, 4.0)),
        ("clip", [0.0, 0.0], (-1.0, 1.0)),
        ("scale", [-0.5, 0.25], (-4.0, 4.0)),
    ];
    let mut failures = Vec::new();
    for (i, &(name, p, (lo, hi))) in cases.iter().enumerate() {
        let mut rng = Rng::new(500 + i as u64);
        let v = rng.vec(257, lo, hi);
        let what = format!("{name}{p:?}");
        let cpu = apply_elementwise(name, &[&tensor(&v, &[257], DType::Float32, Place::Cpu)], p).unwrap();
        // The CPU closure itself, against plain Rust on the same inputs.
        let reference: Vec<f64> = v
            .iter()
            .map(|&x| {
                let x = x as f32 as f64;
                match name {
                    "pow_scalar" => x.powf(p[0]),
                    "softplus" if x * p[0] > p[1] => x,
                    "softplus" => (x * p[0]).exp().ln_1p() / p[0],
                    "leaky_relu" => {
                        if x > 0.0 {
                            x
                        } else {
                            p[0] * x
                        }
                    }
                    "elu" => {
                        if x > 0.0 {
                            x
                        } else {
                            p[0] * x.exp_m1()
                        }
                    }
                    "clip" => x.clamp(p[0], p[1]),
                    "scale" => x * p[0] + p[1],
                    _ => unreachable!(),
                }
            })
            .collect();
        failures.extend(check_close(&format!("{what} CPU vs reference"), &values(&cpu), &reference, 1e-6).err());
        if let Some(g) = gpu_or_skip() {
            let dev = apply_elementwise(name, &[&tensor(&v, &[257], DType::Float32, g)], p).unwrap();
            failures.extend(check_close(&format!("{what} GPU vs CPU"), &values(&dev), &values(&cpu), 1e-5).err());
        }
    }
    report("parameterised ops", &failures);
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    let _generator = common::generator_lock();
    let shapes: &[(&[usize], &[usize], &[usize])] = &[
        (&[4, 1, 3], &[2, 3], &[4, 2, 3]),
        (&[2, 3], &[4, 1, 3], &[4, 2, 3]),
        (&[], &[3, 4], &[3, 4]),
        (&[3, 4], &[], &[3, 4]),
        (&[2, 1], &[1, 3], &[2, 3]),
        (&[5, 1, 1], &[1, 2, 1], &[5, 2, 1]),
        (&[0, 3], &[0, 3], &[0, 3]),
        (&[0, 3], &[1, 3], &[0, 3]),
        (&[3], &[0, 1], &[0, 3]),
    ];
    let mut failures = Vec::new();
    let mut checked = 0;
    for (idx, op) in elementwise_ops().iter().enumerate().filter(|(_, o)| o.arity == 2) {
        let dtypes: Vec<DType> =
            op.dtypes.iter().copied().filter(|d| matches!(d, DType::Float32 | DType::Int64 | DType::Bool)).collect();
        for dtype in dtypes {
            for (s, &(sa, sb, out)) in shapes.iter().enumerate() {
                let mut rng = Rng::new(7000 + idx as u64 * 64 + s as u64 * 4 + dtype as u64);
                let na: usize = sa.iter().product();
                let nb: usize = sb.iter().product();
                let va = operand(op.name, 0, dtype, na, &mut rng);
                let vb = operand(op.name, 1, dtype, nb, &mut rng);
                let what = format!("{} {dtype} {sa:?} with {sb:?}", op.name);
                checked += 1;
                let (a, b) = (tensor(&va, sa, dtype, Place::Cpu), tensor(&vb, sb, dtype, Place::Cpu));
                let cpu = match apply_elementwise(op.name, &[&a, &b], [0.0; 2]) {
                    Ok(t) => t,
                    Err(e) => {
                        failures.push(format!("{what}: {e}"));
                        continue;
                    }
                };
                if cpu.shape() != out {
                    failures.push(format!("{what}: shape {:?}, expected {out:?}", cpu.shape()));
                    continue;
                }
                // Broadcasting must equal the op on explicitly expanded operands.
                let (ea, eb) = (a.broadcast_to(out).unwrap(), b.broadcast_to(out).unwrap());
                let expanded = apply_elementwise(op.name, &[&ea, &eb], [0.0; 2]).unwrap();
                failures.extend(same_result(&format!("{what} vs expanded operands"), &cpu, &expanded).err());
                if let Some(g) = gpu_or_skip() {
                    let (ga, gb) = (tensor(&va, sa, dtype, g), tensor(&vb, sb, dtype, g));
                    match apply_elementwise(op.name, &[&ga, &gb], [0.0; 2]) {
                        Ok(dev) => failures.extend(same_result(&format!("{what} GPU vs CPU"), &dev, &cpu).err()),
                        Err(e) => failures.push(format!("{what} on the GPU: {e}")),
                    }
                }
            }
        }
    }
    assert!(checked > 0);
    report("broadcasting", &failures);
}

#[test]
fn unary_ops_on_scalars_and_empty_tensors() {
    let _generator = common::generator_lock();
    let mut failures = Vec::new();
    for op in elementwise_ops().iter().filter(|o| o.arity == 1) {
        let dtype = if op.dtypes.contains(&DType::Float32) { DType::Float32 } else { op.dtypes[0] };
        for place in std::iter::once(Place::Cpu).chain(gpu_or_skip()) {
            let what = format!("{} {dtype} on {place}", op.name);
            let empty = tensor(&[], &[0, 3], dtype, place);
            match apply_elementwise(op.name, &[&empty], params(op.name)) {
                Ok(t) if t.shape() == [0, 3] && values(&t).is_empty() => {}
                Ok(t) => failures.push(format!("{what}: empty input gave {:?}", t.shape())),
                Err(e) => failures.push(format!("{what}: empty input: {e}")),
            }
            let x = tensor(&[1.0], &[], dtype, place);
            let cpu_x = tensor(&[1.0], &[1], dtype, Place::Cpu);
            match (
                apply_elementwise(op.name, &[&x], params(op.name)),
                apply_elementwise(op.name, &[&cpu_x], params(op.name)),
            ) {
                (Ok(t), Ok(r)) => {
                    if !t.shape().is_empty() {
                        failures.push(format!("{what}: 0-d input gave shape {:?}", t.shape()));
                    }
                    failures.extend(check_close(&format!("{what} 0-d"), &values(&t), &values(&r), 1e-6).err());
                }
                (Err(e), _) | (_, Err(e)) => failures.push(format!("{what}: 0-d input: {e}")),
            }
        }
    }
    report("scalars and empty tensors", &failures);
}

/// The places every known-value check runs on.
fn f32s(v: &[f64], place: Place) -> Tensor {
    tensor(v, &[v.len()], DType::Float32, place)
}

fn ints<T: Copy + Into<i64>>(v: &[T], dtype: DType, place: Place) -> Tensor {
    let v: Vec<f64> = v.iter().map(|&x| x.into() as f64).collect();
    tensor(&v, &[v.len()], dtype, place)
}

fn bools(t: &Tensor) -> Vec<bool> {
    assert_eq!(t.dtype(), DType::Bool);
    t.to_vec::<bool>().unwrap()
}

#[test]
fn known_values_on_every_place() {
    let _generator = common::generator_lock();
    for place in places() {
        let at = |s: &str| format!("{s} on {place}");
        let x = f32s(&[-1.0, 0.0, 2.0], place);
        check_exact(&at("relu"), &values(&x.relu().unwrap()), &[0.0, 0.0, 2.0]).unwrap();
        check_exact(&at("relu6"), &values(&f32s(&[-1.0, 3.0, 7.0], place).relu6().unwrap()), &[0.0, 3.0, 6.0]).unwrap();
        check_exact(&at("sigmoid(0)"), &values(&f32s(&[0.0], place).sigmoid().unwrap()), &[0.5]).unwrap();
        check_exact(&at("sign"), &values(&f32s(&[-2.0, 0.0, 3.0], place).sign().unwrap()), &[-1.0, 0.0, 1.0]).unwrap();
        check_exact(&at("abs"), &values(&x.abs().unwrap()), &[1.0, 0.0, 2.0]).unwrap();
        check_exact(&at("sqrt"), &values(&f32s(&[4.0, 9.0], place).sqrt().unwrap()), &[2.0, 3.0]).unwrap();
        check_exact(&at("exp(0), log(1)"), &values(&f32s(&[0.0], place).exp().unwrap().log().unwrap()), &[0.0])
            .unwrap();
        check_close(
            &at("leaky_relu"),
            &values(&f32s(&[-2.0, 3.0], place).leaky_relu(0.1).unwrap()),
            &[-0.2, 3.0],
            1e-7,
        )
        .unwrap();
        check_close(&at("elu"), &values(&f32s(&[-1.0, 3.0], place).elu(1.0).unwrap()), &[(-1f64).exp_m1(), 3.0], 1e-6)
            .unwrap();
        check_close(&at("softplus"), &values(&f32s(&[0.0], place).softplus(1.0, 20.0).unwrap()), &[2f64.ln()], 1e-6)
            .unwrap();
        check_close(
            &at("gelu erf"),
            &values(&dygraph::gelu(&f32s(&[1.0], place), false).unwrap()),
            &[0.8413447460685429],
            1e-6,
        )
        .unwrap();
        check_close(
            &at("gelu tanh"),
            &values(&dygraph::gelu(&f32s(&[1.0], place), true).unwrap()),
            &[0.8411919906082768],
            1e-6,
        )
        .unwrap();
        check_exact(&at("scale"), &values(&f32s(&[1.0, 2.0], place).scale(2.0, 1.0).unwrap()), &[3.0, 5.0]).unwrap();

        // Rounding: halves to even (Paddle 3.x and numpy; Paddle 2.x rounded them away).
        let r = f32s(&[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7, -3.7], place).round().unwrap();
        check_exact(&at("round"), &values(&r), &[0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, 4.0, -4.0]).unwrap();
        let v = f32s(&[-2.5, -0.5, 0.5, 2.5], place);
        check_exact(&at("floor"), &values(&v.floor().unwrap()), &[-3.0, -1.0, 0.0, 2.0]).unwrap();
        check_exact(&at("ceil"), &values(&v.ceil().unwrap()), &[-2.0, -0.0, 1.0, 3.0]).unwrap();
        check_exact(&at("trunc"), &values(&v.trunc().unwrap()), &[-2.0, -0.0, 0.0, 2.0]).unwrap();

        // Integer operands divide truly into float32 (Paddle 3.x); floor_divide and remainder
        // stay integer, take the sign of the divisor (Python's // and %) and give 0 for x / 0.
        for dt in [DType::Int32, DType::Int64] {
            let a = ints(&[7, -7, 7, -7, 5, 0], dt, place);
            let b = ints(&[2, 2, -2, -2, 0, 3], dt, place);
            let at = |s: &str| format!("{s} {dt} on {place}");
            let q = a.divide(&b).unwrap();
            assert_eq!(q.dtype(), DType::Float32, "{}", at("divide"));
            check_exact(&at("divide"), &values(&q), &[3.5, -3.5, -3.5, 3.5, f64::INFINITY, 0.0]).unwrap();
            assert_eq!(exact(&a.floor_divide(&b).unwrap()), [3, -4, -4, 3, 0, 0], "{}", at("floor_divide"));
            assert_eq!(exact(&a.remainder(&b).unwrap()), [1, 1, -1, -1, 0, 0], "{}", at("remainder"));
            assert_eq!(exact(&ints(&[-5, 0, 5], dt, place).clip(-2.0, 3.0).unwrap()), [-2, 0, 3], "{}", at("clip"));
            assert_eq!(exact(&ints(&[-5, 0, 5], dt, place).neg().unwrap()), [5, 0, -5], "{}", at("neg"));
            let p = ints(&[1, 2, 3, -3, 0, 2], dt, place).pow_tensor(&ints(&[9, 9, 9, 3, 0, -1], dt, place)).unwrap();
            assert_eq!(exact(&p), [1, 512, 19683, -27, 1, 0], "{}", at("pow_tensor"));
        }
        let af = f32s(&[7.0, -7.0, 7.0, -7.0, 7.5], place);
        let bf = f32s(&[2.0, 2.0, -2.0, -2.0, 2.0], place);
        check_exact(&at("float floor_divide"), &values(&af.floor_divide(&bf).unwrap()), &[3.0, -4.0, -4.0, 3.0, 3.0])
            .unwrap();
        check_exact(&at("float remainder"), &values(&af.remainder(&bf).unwrap()), &[1.0, 1.0, -1.0, -1.0, 1.5])
            .unwrap();
        // Quotients at and near integers: k·b rounded to float32 over several divisors, whose
        // rounded quotients land on either side of an integer (a GPU's division need not
        // round correctly). The reference: the float32 values' exact quotient floored in
        // float64 (exact for float32 operands), and the remainder a − q·b in float64, which
        // float32 arithmetic meets within a unit of a's last place.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for d in [3.0f32, 0.1, 0.3, 7.0, 1.1, -0.1, -3.0] {
            for k in -40..=40 {
                a.push((k as f32 * d) as f64);
                b.push(d as f64);
            }
        }
        // A dividend far smaller than the divisor: the remainder 3 − 1e-30 is not
        // representable, so only the quotient's sign can decide (−1, or 0).
        a.extend([-1e-30f32 as f64, 1e-30f32 as f64, 1e-30f32 as f64]);
        b.extend([3.0, 3.0, -3.0]);
        a.extend([1.0, -273.0, 1.0]);
        b.extend([0.1f32 as f64, 3.0, -0.1f32 as f64]);
        let q: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (x / y).floor()).collect();
        let r: Vec<f64> = a.iter().zip(&b).zip(&q).map(|((x, y), q)| ((x - q * y) as f32) as f64).collect();
        assert_eq!(&q[q.len() - 3..], [9.0, -91.0, -10.0], "Python's 1.0 // 0.1, -273 // 3, 1.0 // -0.1");
        let (at_, bt) = (f32s(&a, place), f32s(&b, place));
        check_exact(&at("floor_divide near integers"), &values(&at_.floor_divide(&bt).unwrap()), &q).unwrap();
        let ulp = a.iter().fold(0.0f64, |m, x| m.max(x.abs())) * f32::EPSILON as f64;
        check_allclose(&at("remainder near integers"), &values(&at_.remainder(&bt).unwrap()), &r, ulp, 0.0).unwrap();
        let q = f32s(&[1.0, -1.0, 0.0], place).divide(&f32s(&[0.0, 0.0, 0.0], place)).unwrap();
        let qv = values(&q);
        assert!(qv[0] == f64::INFINITY && qv[1] == f64::NEG_INFINITY && qv[2].is_nan(), "{}: {qv:?}", at("x / 0.0"));

        // Exact integer powers on both places (the seed's paddle.pow(a, 9)).
        let a = dygraph::to_tensor_on([1i64, 2, 3], place).unwrap();
        assert_eq!(a.pow(9).unwrap().to_vec::<i64>().unwrap(), [1, 512, 19683], "{}", at("int64 pow 9"));
        assert_eq!(a.pow(9).unwrap().dtype(), DType::Int64);
        let big = dygraph::to_tensor_on([3i64, -2, 10], place).unwrap().pow(39).unwrap();
        let wrapped = [3i64.wrapping_pow(39), (-2i64).wrapping_pow(39), 10i64.wrapping_pow(39)];
        assert_eq!(wrapped[0], 4052555153018976267);
        assert_eq!(big.to_vec::<i64>().unwrap(), wrapped, "{}", at("int64 pow 39 (wrapping past 2^63)"));
        let i32p = dygraph::to_tensor_on([3i32, -3], place).unwrap().pow(19).unwrap();
        assert_eq!(i32p.to_vec::<i32>().unwrap(), [1162261467, -1162261467], "{}", at("int32 pow 19"));
        let fp = dygraph::to_tensor_on([4.0f32, -8.0, -8.0], place).unwrap();
        let fv = values(&fp.pow_scalar(0.5).unwrap());
        assert_eq!(fv[0], 2.0, "{}", at("4^0.5"));
        assert!(fv[1].is_nan() && fv[2].is_nan(), "{}: negative base, fractional exponent: {fv:?}", at("pow"));
        check_exact(&at("(-8)^3"), &values(&fp.pow_scalar(3.0).unwrap()), &[64.0, -512.0, -512.0]).unwrap();
        assert_eq!(fp.pow(2.5f64).unwrap().dtype(), DType::Float32);
        assert_eq!(a.pow(0.5f64).unwrap().dtype(), DType::Float32, "int tensor ^ float exponent promotes");

        // int64 beyond 32 bits stays exact.
        let l = dygraph::to_tensor_on([(1i64 << 40) + 1, -3_000_000_000, i64::MAX], place).unwrap();
        let m = dygraph::to_tensor_on([1i64 << 40, 3, 0], place).unwrap();
        assert_eq!(l.add(&m).unwrap().to_vec::<i64>().unwrap(), [(1 << 41) + 1, -2_999_999_997, i64::MAX]);
        assert_eq!(
            l.multiply(&m).unwrap().to_vec::<i64>().unwrap(),
            [(1i64 << 40).wrapping_mul((1 << 40) + 1), -9_000_000_000, 0]
        );
        assert_eq!(bools(&l.greater_than(&m).unwrap()), [true, false, true], "{}", at("int64 >"));
        assert_eq!(l.maximum(&m).unwrap().to_vec::<i64>().unwrap(), [(1 << 40) + 1, 3, i64::MAX]);

        // NaN propagates through maximum and minimum.
        let p = f32s(&[1.0, f64::NAN, 3.0, f64::NAN], place);
        let q = f32s(&[f64::NAN, 2.0, 1.0, f64::NAN], place);
        for r in [p.maximum(&q).unwrap(), p.minimum(&q).unwrap()] {
            let v = values(&r);
            assert!(v[0].is_nan() && v[1].is_nan() && v[3].is_nan(), "{}: {v:?}", at("NaN propagation"));
        }
        assert_eq!(values(&p.maximum(&q).unwrap())[2], 3.0);
        assert_eq!(values(&p.minimum(&q).unwrap())[2], 1.0);

        // Comparisons and logic.
        let c = f32s(&[1.0, 2.0, 3.0], place);
        let d = f32s(&[2.0, 2.0, 2.0], place);
        assert_eq!(bools(&c.less_than(&d).unwrap()), [true, false, false], "{}", at("less_than"));
        assert_eq!(bools(&c.less_equal(&d).unwrap()), [true, true, false], "{}", at("less_equal"));
        assert_eq!(bools(&c.greater_than(&d).unwrap()), [false, false, true], "{}", at("greater_than"));
        assert_eq!(bools(&c.greater_equal(&d).unwrap()), [false, true, true], "{}", at("greater_equal"));
        assert_eq!(bools(&c.equal(&d).unwrap()), [false, true, false], "{}", at("equal"));
        assert_eq!(bools(&c.not_equal(&d).unwrap()), [true, false, true], "{}", at("not_equal"));
        assert_eq!(bools(&c.greater_than_scalar(1.5).unwrap()), [false, true, true], "{}", at("> scalar"));
        let n = f32s(&[f64::NAN], place);
        assert_eq!(bools(&n.equal(&n).unwrap()), [false], "{}", at("NaN == NaN"));
        assert_eq!(bools(&n.not_equal(&n).unwrap()), [true], "{}", at("NaN != NaN"));
        let i = ints(&[0, 1, 2], DType::Int32, place);
        let j = ints(&[1, 1, 0], DType::Int32, place);
        assert_eq!(bools(&i.logical_and(&j).unwrap()), [false, true, false], "{}", at("logical_and"));
        assert_eq!(bools(&i.logical_or(&j).unwrap()), [true, true, true], "{}", at("logical_or"));
        assert_eq!(bools(&i.logical_xor(&j).unwrap()), [true, false, true], "{}", at("logical_xor"));
        assert_eq!(bools(&i.logical_not().unwrap()), [true, false, false], "{}", at("logical_not"));
        let s = f32s(&[1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY], place);
        assert_eq!(bools(&s.isnan().unwrap()), [false, true, false, false], "{}", at("isnan"));
        assert_eq!(bools(&s.isinf().unwrap()), [false, false, true, true], "{}", at("isinf"));
        assert_eq!(bools(&s.isfinite().unwrap()), [true, false, false, false], "{}", at("isfinite"));
        let b = dygraph::to_tensor_on([true, false], place).unwrap();
        assert_eq!(bools(&b.logical_not().unwrap()), [false, true], "{}", at("bool logical_not"));
        assert_eq!(bools(&b.equal(&b.logical_not().unwrap()).unwrap()), [false, false], "{}", at("bool equal"));

        // where
        let cond = dygraph::to_tensor_on([true, false, true], place).unwrap();
        let w = dygraph::where_(&cond, &c, &d).unwrap();
        check_exact(&at("where"), &values(&w), &[1.0, 2.0, 3.0]).unwrap();
        let wi =
            dygraph::where_(&cond, &ints(&[1, 2, 3], DType::Int64, place), &ints(&[-1, -2, -3], DType::Int64, place));
        assert_eq!(exact(&wi.unwrap()), [1, -2, 3], "{}", at("where int64"));
    }
}

#[test]
fn the_seed_control_flow_program_gives_its_printed_values() {
    let _generator = common::generator_lock();
    // paddle.pow(a, i) ± b for a = [1, 2, 3], b = [4, 5, 6]: every line seeds 000 and 001 print.
    let plus: &[(i64, [i64; 3])] = &[
        (0, [5, 6, 7]),
        (1, [5, 7, 9]),
        (2, [5, 9, 15]),
        (3, [5, 13, 33]),
        (5, [5, 37, 249]),
        (6, [5, 69, 735]),
        (7, [5, 133, 2193]),
        (8, [5, 261, 6567]),
    ];
    let minus: &[(i64, [i64; 3])] = &[
        (2, [-3, -1, 3]),
        (3, [-3, 3, 21]),
        (4, [-3, 11, 75]),
        (5, [-3, 27, 237]),
        (7, [-3, 123, 2181]),
        (8, [-3, 251, 6555]),
        (9, [-3, 507, 19677]),
    ];
    for place in places() {
        let a = dygraph::to_tensor_on([1i64, 2, 3], place).unwrap();
        let b = dygraph::to_tensor_on([4i64, 5, 6], place).unwrap();
        for &(i, expected) in plus {
            let c = dygraph::pow(&a, i).unwrap() + &b;
            assert_eq!(c.to_vec::<i64>().unwrap(), expected, "pow(a, {i}) + b on {place}");
        }
        for &(i, expected) in minus {
            let c = dygraph::pow(&a, i).unwrap() - &b;
            assert_eq!(c.to_vec::<i64>().unwrap(), expected, "pow(a, {i}) - b on {place}");
        }
    }
}

#[test]
fn rust_operators() {
    let _generator = common::generator_lock();
    for place in places() {
        let a = f32s(&[1.0, 2.0, 4.0], place);
        let b = f32s(&[2.0, 8.0, 3.0], place);
        let v = |t: Tensor| values(&t);
        assert_eq!(v(&a + &b), [3.0, 10.0, 7.0], "a + b on {place}");
        assert_eq!(v(&a - &b), [-1.0, -6.0, 1.0]);
        assert_eq!(v(&a * &b), [2.0, 16.0, 12.0]);
        assert_eq!(v(&a / &b), [0.5, 0.25, (4.0f32 / 3.0) as f64]);
        assert_eq!(v(&b % &a), [0.0, 0.0, 3.0]);
        assert_eq!(v(a.clone() + b.clone()), [3.0, 10.0, 7.0]);
        assert_eq!(v(a.clone() * &b), [2.0, 16.0, 12.0]);
        assert_eq!(v(&a * 2.0), [2.0, 4.0, 8.0]);
        assert_eq!(v(2.0 * &a), [2.0, 4.0, 8.0]);
        assert_eq!(v(2.0 - &a), [1.0, 0.0, -2.0]);
        assert_eq!(v(&a - 2.0), [-1.0, 0.0, 2.0]);
        assert_eq!(v(&a + 0.5), [1.5, 2.5, 4.5]);
        assert_eq!(v(&a / 2.0), [0.5, 1.0, 2.0]);
        assert_eq!(v(8.0 / &a), [8.0, 4.0, 2.0]);
        assert_eq!(v(-&a), [-1.0, -2.0, -4.0]);
        assert_eq!(v(-(a.clone())), [-1.0, -2.0, -4.0]);
        assert_eq!((&a * 2.0).place(), place);

        let i = dygraph::to_tensor_on([1i64, -7, 9], place).unwrap();
        let r = &i + 1;
        assert_eq!(r.dtype(), DType::Int64, "int + int literal stays int64");
        assert_eq!(r.to_vec::<i64>().unwrap(), [2, -6, 10]);
        assert_eq!((&i * 3).to_vec::<i64>().unwrap(), [3, -21, 27]);
        assert_eq!((&i - 1).to_vec::<i64>().unwrap(), [0, -8, 8]);
        assert_eq!((10 - &i).to_vec::<i64>().unwrap(), [9, 17, 1]);
        assert_eq!(values(&(&i / 2)), [0.5, -3.5, 4.5], "int64 / 2 divides truly into float32 (Paddle 3.x)");
        assert_eq!((&i / 2).dtype(), DType::Float32);
        assert_eq!(
            dygraph::floor_divide(&i, &dygraph::full_like(&i, 2).unwrap()).unwrap().to_vec::<i64>().unwrap(),
            [0, -4, 4]
        );
        assert_eq!((&i % 4).to_vec::<i64>().unwrap(), [1, 1, 1], "int64 % 4 has the divisor's sign");
        assert_eq!((-&i).to_vec::<i64>().unwrap(), [-1, 7, -9]);
        let f = &i + 0.5;
        assert_eq!(f.dtype(), DType::Float32, "int + fractional float promotes to float32");
        assert_eq!(values(&f), [1.5, -6.5, 9.5]);
        let i32t = dygraph::to_tensor_on([5i32, -5], place).unwrap();
        assert_eq!((&i32t + 1).to_vec::<i32>().unwrap(), [6, -4]);
        assert_eq!((&i32t * 2).dtype(), DType::Int32);
        assert_eq!(values(&(&i32t / 2)), [2.5, -2.5]);

        // Operators panic with the fallible method's message.
        let c = f32s(&[1.0, 2.0], place);
        let msg = catch("a + c", || drop(&a + &c)).expect("adding [3] and [2] must panic");
        assert!(msg.contains("add") && msg.contains("[3]") && msg.contains("[2]"), "{msg}");
    }
}

/// A finite-difference case: inputs (values and shapes) chosen away from the op's kinks.
fn grad_case(op: &OpInfo, rng: &mut Rng) -> Option<Vec<(Vec<f64>, Vec<usize>)>> {
    let away = |rng: &mut Rng, n: usize, lo: f64, hi: f64, kinks: &[f64]| -> Vec<f64> {
        (0..n)
            .map(|_| {
                loop {
                    let v = rng.uniform(lo, hi);
                    if kinks.iter().all(|k| (v - k).abs() > 0.1) {
                        break v;
                    }
                }
            })
            .collect()
    };
    // Fractional parts inside (0.1, 0.4): away from every jump of floor/ceil/trunc/round.
    let steps = |rng: &mut Rng, n: usize| -> Vec<f64> {
        (0..n).map(|_| rng.ints(1, -3, 3)[0] as f64 + rng.uniform(0.1, 0.4)).collect()
    };
    let s = vec![2usize, 3];
    if op.arity == 1 {
        let v = match op.name {
            "neg" | "square" | "exp" | "sin" | "cos" | "tanh" | "sigmoid" | "erf" | "gelu_erf" | "gelu_tanh"
            | "silu" | "scale" | "pow_scalar" | "mish" => rng.vec(6, -2.0, 2.0),
            "abs" | "relu" | "leaky_relu" | "elu" | "selu" => away(rng, 6, -2.0, 2.0, &[0.0]),
            "hardswish" | "hardsigmoid" => away(rng, 6, -5.0, 5.0, &[-3.0, 3.0]),
            "relu6" => away(rng, 6, -2.0, 8.0, &[0.0, 6.0]),
            "clip" => away(rng, 6, -4.0, 5.0, &[-2.0, 3.0]),
            "softplus" => away(rng, 6, -4.0, 9.0, &[10.0 / 1.5]),
            "sqrt" | "rsqrt" | "log" => rng.vec(6, 0.2, 3.0),
            "log1p" => rng.vec(6, -0.5, 3.0),
            "reciprocal" => rng.vec_away_from_zero(6, -2.0, 2.0, 0.3),
            "sign" | "floor" | "ceil" | "round" | "trunc" => steps(rng, 6),
            _ => return None,
        };
        return Some(vec![(v, s)]);
    }
    // Binary: [2, 1, 3] against [2, 3] broadcasts to [2, 2, 3]; resample until every
    // broadcast pair keeps away from the op's kinks.
    let (sa, sb) = (vec![2usize, 1, 3], vec![2usize, 3]);
    let ok: fn(f64, f64) -> bool = match op.name {
        "add" | "subtract" | "multiply" => |_, _| true,
        "divide" => |_, b| b.abs() > 0.3,
        "remainder" => |a, b| {
            let q = a / b;
            b.abs() > 0.3 && (q - q.floor()) > 0.1 && (q - q.floor()) < 0.9
        },
        "pow_tensor" => |a, _| a > 0.2,
        "maximum" | "minimum" => |a, b| (a - b).abs() > 0.1,
        "relu_grad" => |a, _| a.abs() > 0.1,
        _ => return None,
    };
    let (lo, hi) = if op.name == "pow_tensor" { (0.2, 2.5) } else { (-2.0, 2.0) };
    loop {
        let a = rng.vec(6, lo, hi);
        let b = rng.vec(6, -2.0, 2.0);
        let pairs_ok = (0..2).all(|i| (0..2).all(|j| (0..3).all(|k| ok(a[i * 3 + k], b[j * 3 + k]))));
        if pairs_ok {
            return Some(vec![(a, sa), (b, sb)]);
        }
    }
}

#[test]
fn gradcheck_every_differentiable_op_in_float64() {
    let _generator = common::generator_lock();
    let ops: Vec<OpInfo> = elementwise_ops().into_iter().filter(|o| o.differentiable).collect();
    assert!(!ops.is_empty());
    let mut failures = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let mut rng = Rng::new(3000 + i as u64);
        let Some(case) = grad_case(op, &mut rng) else {
            failures.push(format!("{}: differentiable op has no gradcheck case", op.name));
            continue;
        };
        let f = |xs: &[Tensor]| run(op, xs);
        failures.extend(gradcheck(op.name, &f, &case).err());
    }
    // Parameters the table sweep does not use.
    let extra: &[(&str, [f64; 2], (f64, f64))] = &[
        ("pow_scalar", [2.5, 0.0], (0.2, 3.0)),
        ("pow_scalar", [0.0, 0.0], (-2.0, 2.0)),
        ("softplus", [1.0, 20.0], (-5.0, 5.0)),
    ];
    for (k, &(name, p, (lo, hi))) in extra.iter().enumerate() {
        let mut rng = Rng::new(3900 + k as u64);
        let f = |xs: &[Tensor]| apply_elementwise(name, &[&xs[0]], p);
        failures.extend(gradcheck(&format!("{name}{p:?}"), &f, &[(rng.vec(6, lo, hi), vec![6])]).err());
    }
    eprintln!("gradchecked {} differentiable elementwise ops", ops.len());
    report("gradcheck", &failures);
}

#[test]
fn gradients_match_between_gpu_and_cpu() {
    let _generator = common::generator_lock();
    if gpu_or_skip().is_none() {
        return;
    }
    let ops: Vec<OpInfo> = elementwise_ops().into_iter().filter(|o| o.differentiable).collect();
    let mut failures = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let mut rng = Rng::new(4000 + i as u64);
        let Some(case) = grad_case(op, &mut rng) else {
            failures.push(format!("{}: differentiable op has no case", op.name));
            continue;
        };
        let case: Vec<(Vec<f64>, Vec<usize>)> =
            case.into_iter().map(|(v, s)| (v.into_iter().map(|x| x as f32 as f64).collect(), s)).collect();
        let f = |xs: &[Tensor]| run(op, xs);
        failures.extend(catch(op.name, || gpu_matches_cpu(op.name, &f, &case, true, 1e-5)));
    }
    report("GPU gradients", &failures);
}

//! The linear layer (`x @ W^T + bias` with W `[N, K]` in f32 or a ggml block format): by hand,
//! f32 weights on random shapes that are not multiples of any workgroup tile (both GEMV and
//! tiled paths, rows past one staging pass) against f64, every block format against gguf-py
//! fixtures (tests/fixtures/linear), and hostile programs and weights refused.
//!
//! Tolerance of the random cases: `|got - want| <= 5e-5 * sum_k |w_nk x_mk| + 1e-6` (f32
//! accumulation in any order stays far inside it; a wrong element is off by a whole term).

use super::activations::{gelu_tanh, silu};
use crate::common::harness::{
    Model, SCOPE, SuiteConfig, assert_error, dims, f32_tensor, init_blob,
};
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::program::ops::Linear;
use webdelegate::program::{BinaryOp, UnaryOp};
use webdelegate::program::{BlockFormat, DType, Op, ProgramBuilder, TensorId};
use webdelegate::registry::SharedBackend;
use webdelegate::{ErrorCode, Tensor};

/// Relative tolerance against `sum |w||x|`.
pub const LINEAR_TOL: f64 = 5e-5;

/// Checks `got` (`[m, n]`) against the f64 product of `x` (`[m, k]`) and the dense weight
/// `w` (`[n, k]`, already decoded) plus `bias`, within [`LINEAR_TOL`] of `sum |w||x|`.
pub fn check_linear(
    what: &str,
    got: &Tensor,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    n: usize,
) {
    let k = w.len() / n.max(1);
    let m = x.len().checked_div(k).unwrap_or(0);
    let data = got.as_f32().expect("f32 output");
    assert_eq!(data.len(), m * n, "{what}: output length");
    for r in 0..m {
        for c in 0..n {
            let (wr, xr) = (&w[c * k..(c + 1) * k], &x[r * k..(r + 1) * k]);
            let bias = bias.map_or(0.0, |b| f64::from(b[c]));
            let want: f64 = wr
                .iter()
                .zip(xr)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum::<f64>()
                + bias;
            let scale: f64 = wr
                .iter()
                .zip(xr)
                .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                .sum::<f64>()
                + bias.abs();
            let g = f64::from(data[r * n + c]);
            assert!(
                (g - want).abs() <= LINEAR_TOL * scale + 1e-6,
                "{what}: out[{r}, {c}] = {g}, want {want} (scale {scale})"
            );
        }
    }
}

/// The compile-spec variants a product with `rows` activation rows runs under: every GEMV
/// kernel of the backend (`config.gemv_specs`) for one row, the defaults otherwise.
fn variants(
    config: &SuiteConfig,
    rows: usize,
) -> &'static [&'static [(&'static str, &'static str)]] {
    if rows == 1 { config.gemv_specs } else { &[&[]] }
}

/// A program `out = linear(x [rows.., k], weight f32 [n, k], bias?)` with the weight a parameter.
fn f32_program(rows: &[usize], n: usize, k: usize, w: &[f32], bias: Option<&[f32]>) -> Model {
    let mut m = Model::new();
    let mut x_shape = rows.to_vec();
    x_shape.push(k);
    let x = m.input("x", &x_shape);
    let weight = m.param("weight", &[n, k], w);
    let bias = bias.map(|values| m.param("bias", &[n], values));
    let out =
        m.b.push(|out| Linear {
            x,
            weight,
            bias,
            out,
        })
        .unwrap();
    m.b.output(out);
    m
}

op_case! {
/// `x = [[1, 2, 3], [4, 5, 6]]`, `W = [[1, 0, -1], [0.5, 0.5, 0.5]]`, `bias = [10, 20]`:
/// `[[1 - 3 + 10, 3 + 20], [4 - 6 + 10, 7.5 + 20]] = [[8, 23], [8, 27.5]]`; the first row
/// alone (the GEMV path) gives `[8, 23]`, and without bias `[-2, 3]`.
pub async fn linear_by_hand(backend: SharedBackend, config: SuiteConfig) {
    let w = [1.0, 0.0, -1.0, 0.5, 0.5, 0.5];
    let bias = [10.0, 20.0];
    let m = f32_program(&[2], 2, 3, &w, Some(&bias));
    assert!(m.dump().contains("linear x=%0 weight=%1 bias=%2 -> %3"), "{}", m.dump());
    let x = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let got = m.run(&backend, vec![f32_tensor(&[2, 3], x)]).await;
    assert_eq!(got[0].shape(), &[2, 2]);
    assert_eq!(got[0].as_f32().unwrap(), &[8.0, 23.0, 8.0, 27.5]);
    for &specs in variants(&config, 1) {
        let m = f32_program(&[1], 2, 3, &w, Some(&bias));
        let got = m.run_with(&backend, specs, vec![f32_tensor(&[1, 3], vec![1.0, 2.0, 3.0])]).await;
        assert_eq!(got[0].as_f32().unwrap(), &[8.0, 23.0], "{specs:?}");
        let m = f32_program(&[], 2, 3, &w, None);
        let got = m.run_with(&backend, specs, vec![f32_tensor(&[3], vec![1.0, 2.0, 3.0])]).await;
        assert_eq!(got[0].shape(), &[2]);
        assert_eq!(got[0].as_f32().unwrap(), &[-2.0, 3.0], "{specs:?}");
    }
}
}

op_case! {
/// f32 weights on shapes off every tile: `N` 37 (tiles of 16 and 32 rows), `K` 70 (not a
/// multiple of 8: the dense tail) and 2100 (two GEMV staging passes), `M` 1, 3 and 17, with and
/// without bias, leading dims `[M]` or `[1, M]`.
pub async fn linear_f32_random(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(12);
    let shapes: &[(usize, usize, usize)] = if config.small {
        &[(1, 37, 70), (3, 37, 70), (1, 5, 2100)]
    } else {
        &[(1, 37, 70), (3, 37, 70), (17, 37, 70), (1, 9, 2100), (17, 9, 2100), (5, 40, 64)]
    };
    for (case, &(rows, n, k)) in shapes.iter().enumerate() {
        let w = rng.vec(n * k, -1.0, 1.0);
        let x = rng.vec(rows * k, -2.0, 2.0);
        let bias_values = rng.vec(n, -1.0, 1.0);
        let bias = (case % 2 == 0).then_some(bias_values.as_slice());
        let leading: Vec<usize> = if case % 3 == 1 { vec![1, rows] } else { vec![rows] };
        let m = f32_program(&leading, n, k, &w, bias);
        let mut shape = leading.clone();
        shape.push(k);
        let mut out_shape = leading;
        out_shape.push(n);
        for &specs in variants(&config, rows) {
            let got = m.run_with(&backend, specs, vec![f32_tensor(&shape, x.clone())]).await;
            assert_eq!(got[0].shape(), out_shape.as_slice());
            let what = format!("linear f32 m={rows} n={n} k={k} {specs:?}");
            check_linear(&what, &got[0], &x, &w, bias, n);
        }
    }
}
}

op_case! {
/// The builder refuses a K that disagrees with the weight's rows, a weight that is not
/// `[N, K]`, a bias that is not `[N]` and an integer weight (`InvalidArgument`); the same
/// programs made by hand are `InvalidProgram` at init.
pub async fn linear_refuses_bad_programs(backend: SharedBackend, _config: SuiteConfig) {
    type Case = (&'static str, Vec<usize>, DType, Option<Vec<usize>>, &'static str);
    let cases: Vec<Case> = vec![
        ("K 4 against rows of 3", vec![2, 3], DType::F32, None, "K must agree"),
        ("rank-3 weight", vec![1, 2, 4], DType::F32, None, "expected [N, K]"),
        ("bias [3] for N 2", vec![2, 4], DType::F32, Some(vec![3]), "bias"),
        ("i32 weight", vec![2, 4], DType::I32, None, "i32"),
    ];
    for (what, w_shape, dtype, bias_shape, part) in cases {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, dims(&[5, 4]));
        let weight = b.input("weight", dtype, dims(&w_shape));
        let bias: Option<TensorId> = bias_shape.map(|s| b.input("bias", DType::F32, dims(&s)));
        let before = b.program().clone();
        assert_error(
            what,
            b.push(|out| Linear { x, weight, bias, out }),
            ErrorCode::InvalidArgument,
            &["linear", part],
        );
        assert_eq!(b.program(), &before, "{what}: a refused op leaves the builder unchanged");
        let out = b.tensor("out", DType::F32, dims(&[5, 2]));
        b.op(Op::Linear(Linear { x, weight, bias, out })).output(out);
        assert_error(
            what,
            init_blob(&backend, &b).await,
            ErrorCode::InvalidProgram,
            &["linear", part],
        );
    }
}
}

/// A block-format parameter `name` (also its key) of `shape` holding `bytes`, described to the
/// provider with ggml's type name.
fn block_param(
    m: &mut Model,
    name: &str,
    format: BlockFormat,
    shape: &[usize],
    bytes: &[u8],
) -> TensorId {
    m.provider.insert_described(
        SCOPE,
        name,
        bytes.to_vec(),
        Some(format.name().into()),
        Some(shape.iter().map(|&d| d as u64).collect()),
    );
    m.b.param(name, DType::Block(format), dims(shape), SCOPE, name)
}

/// One fixture of scripts/make-linear-fixtures.py: a weight `[n, k]` in `format`, 17 rows of
/// activations, a bias, and gguf-py + float64 NumPy's product and `sum |w||x|`.
struct Fixture {
    name: &'static str,
    format: BlockFormat,
    n: usize,
    k: usize,
    weight: &'static [u8],
    x: &'static [u8],
    bias: &'static [u8],
    want: &'static [u8],
    scale: &'static [u8],
}

macro_rules! fixture {
    ($name:literal, $format:ident, $n:expr, $k:expr) => {
        Fixture {
            name: $name,
            format: BlockFormat::$format,
            n: $n,
            k: $k,
            weight: include_bytes!(concat!("../../fixtures/linear/", $name, ".weight")),
            x: include_bytes!(concat!("../../fixtures/linear/", $name, ".x")),
            bias: include_bytes!(concat!("../../fixtures/linear/", $name, ".bias")),
            want: include_bytes!(concat!("../../fixtures/linear/", $name, ".want")),
            scale: include_bytes!(concat!("../../fixtures/linear/", $name, ".scale")),
        }
    };
}

/// Every fixture (tests/fixtures/linear, scripts/make-linear-fixtures.py).
fn fixtures() -> [Fixture; 13] {
    [
        fixture!("F16", F16, 37, 70),
        fixture!("BF16", BF16, 37, 70),
        fixture!("Q4_0", Q4_0, 37, 64),
        fixture!("Q5_0", Q5_0, 37, 64),
        fixture!("Q8_0", Q8_0, 37, 64),
        fixture!("Q8_0_long", Q8_0, 9, 4160),
        fixture!("Q4_K", Q4_K, 13, 512),
        fixture!("Q5_K", Q5_K, 13, 512),
        fixture!("Q6_K", Q6_K, 13, 512),
        fixture!("Q8_0_odd", Q8_0, 45, 800),
        fixture!("Q5_0_odd", Q5_0, 45, 96),
        fixture!("Q6_K_odd", Q6_K, 19, 1280),
        fixture!("Q4_K_odd", Q4_K, 19, 1280),
    ]
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect()
}

op_case! {
/// Every block format against an independent oracle: gguf-py's quantizer and dequantizer plus
/// a float64 NumPy product (scripts/make-linear-fixtures.py), for `M` 1 (GEMV), 3 and 17
/// (tiled), with a bias, on shapes off every tile. Tolerance: `5e-5 * sum |w||x| + 1e-6` per
/// output (the fixture's `scale`).
pub async fn linear_matches_gguf_py_fixtures(backend: SharedBackend, config: SuiteConfig) {
    for fixture in fixtures() {
        let Fixture { name, format, n, k, .. } = fixture;
        assert_eq!(
            fixture.weight.len(),
            format.row_bytes(k as u64).unwrap() as usize * n,
            "{name}: weight bytes"
        );
        let (x, bias) = (f32s(fixture.x), f32s(fixture.bias));
        let (want, scale) = (f64s(fixture.want), f64s(fixture.scale));
        assert_eq!((x.len(), bias.len(), want.len()), (17 * k, n, 17 * n), "{name}: sizes");
        let row_counts: &[usize] = if config.small { &[1, 3] } else { &[1, 3, 17] };
        for &rows in row_counts {
            for &specs in variants(&config, rows) {
                let mut m = Model::new();
                let xs = m.input("x", &[rows, k]);
                let weight = block_param(&mut m, "weight", format, &[n, k], fixture.weight);
                let b = m.param("bias", &[n], &bias);
                let out = m.b.push(|out| Linear { x: xs, weight, bias: Some(b), out }).unwrap();
                m.b.output(out);
                let input = f32_tensor(&[rows, k], x[..rows * k].to_vec());
                let got = m.run_with(&backend, specs, vec![input]).await;
                assert_eq!(got[0].shape(), &[rows, n], "{name}");
                let data = got[0].as_f32().unwrap();
                for (i, &g) in data.iter().enumerate() {
                    let error = (f64::from(g) - want[i]).abs();
                    assert!(
                        error <= LINEAR_TOL * scale[i] + 1e-6,
                        "{name} M={rows} {specs:?}: out[{}, {}] = {g}, want {} (error {error:e}, scale {})",
                        i / n,
                        i % n,
                        want[i],
                        scale[i]
                    );
                }
            }
        }
    }
}
}

op_case! {
/// The compile spec `activations = "int8"` (the CPU backend's int8 activation rows) against
/// the same independent oracle as above, gguf-py's dequantizer plus a float64 NumPy product of
/// the f32 activations, for every block format with an int8 kernel, `M` 1 and 3 (17 at full
/// size), with a bias. Tolerance: the activations' rounding, `sum_j |w_j| * d_j / 2` per output
/// (`d_j = max|x| / 127` of the 32-value block holding `x_j`), plus `5e-5 * sum |w||x|`; and
/// the results must differ from the f32 path's somewhere (the spec took effect). Other values
/// of the spec are `InvalidArgument`; a backend without it refuses the key.
pub async fn linear_int8_activations_stay_within_their_rounding(backend: SharedBackend, config: SuiteConfig) {
    let fixtures = fixtures();
    let q8 = &fixtures[4];
    let program = |rows: usize, fixture: &Fixture| {
        let mut m = Model::new();
        let xs = m.input("x", &[rows, fixture.k]);
        let weight = block_param(&mut m, "weight", fixture.format, &[fixture.n, fixture.k], fixture.weight);
        let b = m.param("bias", &[fixture.n], &f32s(fixture.bias));
        let out = m.b.push(|out| Linear { x: xs, weight, bias: Some(b), out }).unwrap();
        m.b.output(out);
        m
    };
    let spec = [webdelegate::registry::CompileSpec::new("activations", "int8")];
    if !config.int8_activations {
        let error = program(1, q8).init_with(&backend, &spec).await.map(|_| ()).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
        assert!(error.message().contains("activations"), "{error}");
        return;
    }
    for bad in ["bf16", "", "INT8"] {
        let specs = [webdelegate::registry::CompileSpec::new("activations", bad)];
        let error = program(1, q8).init_with(&backend, &specs).await.map(|_| ()).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{bad:?}: {error}");
        assert!(error.message().contains("\"int8\""), "{bad:?}: {error}");
    }
    let mut differs = false;
    for fixture in fixtures.iter().filter(|f| f.format.row_format().is_some()) {
        let Fixture { name, format, n, k, .. } = *fixture;
        let x = f32s(fixture.x);
        let (want, scale) = (f64s(fixture.want), f64s(fixture.scale));
        let mut dense = vec![0f32; n * k];
        format.dequantize(fixture.weight, &mut dense).unwrap();
        let row_counts: &[usize] = if config.small { &[1, 3] } else { &[1, 3, 17] };
        for &rows in row_counts {
            let m = program(rows, fixture);
            let input = || f32_tensor(&[rows, k], x[..rows * k].to_vec());
            let got = m.run_with(&backend, &[("activations", "int8")], vec![input()]).await;
            let exact = m.run(&backend, vec![input()]).await;
            let (data, exact) = (got[0].as_f32().unwrap(), exact[0].as_f32().unwrap());
            differs |= data.iter().zip(exact).any(|(a, b)| a.to_bits() != b.to_bits());
            for (i, &g) in data.iter().enumerate() {
                let (r, c) = (i / n, i % n);
                let rounding: f64 = (0..k)
                    .map(|j| {
                        let block = &x[r * k + j / 32 * 32..r * k + j / 32 * 32 + 32];
                        let d = block.iter().fold(0f32, |a, v| a.max(v.abs())) / 127.0;
                        f64::from(dense[c * k + j].abs()) * f64::from(d) / 2.0
                    })
                    .sum();
                let error = (f64::from(g) - want[i]).abs();
                assert!(
                    error <= rounding + LINEAR_TOL * scale[i] + 1e-6,
                    "{name} M={rows} int8: out[{r}, {c}] = {g}, want {} (error {error:e}, rounding bound {rounding:e})",
                    want[i]
                );
            }
        }
    }
    assert!(differs, "int8 activations gave the f32 path's bits everywhere: the spec had no effect");
}
}

op_case! {
/// Untrusted weights: a Q8_0 tensor whose file has one byte too few, or says another type or
/// shape, is refused at init with `InvalidExternalData` naming it; a Q4_K weight with
/// 640-value rows (not whole 256-value blocks) is an `InvalidProgram`.
pub async fn linear_refuses_disagreeing_weights(backend: SharedBackend, _config: SuiteConfig) {
    let fixture = &fixtures()[4];
    let cases: [(&str, usize, &str, [u64; 2], &str); 3] = [
        ("short file", fixture.weight.len() - 1, "Q8_0", [37, 64], "bytes"),
        ("Q5_0 in the file", fixture.weight.len(), "Q5_0", [37, 64], "Q5_0"),
        ("transposed shape", fixture.weight.len(), "Q8_0", [64, 37], "[64, 37]"),
    ];
    for (what, len, file_dtype, file_shape, part) in cases {
        let mut m = Model::new();
        let x = m.input("x", &[1, 64]);
        m.provider.insert_described(
            SCOPE,
            "weight",
            fixture.weight[..len].to_vec(),
            Some(file_dtype.into()),
            Some(file_shape.to_vec()),
        );
        let weight = m.b.param("weight", DType::Block(BlockFormat::Q8_0), dims(&[37, 64]), SCOPE, "weight");
        let out = m.b.push(|out| Linear { x, weight, bias: None, out }).unwrap();
        m.b.output(out);
        assert_error(what, m.init(&backend).await, ErrorCode::InvalidExternalData, &["weight", part]);
    }
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[1, 640]));
    let weight = b.param("weight", DType::Block(BlockFormat::Q4_K), dims(&[4, 640]), SCOPE, "weight");
    let out = b.tensor("out", DType::F32, dims(&[1, 4]));
    b.op(Op::Linear(Linear { x, weight, bias: None, out })).output(out);
    assert_error(
        "Q4_K rows of 640",
        init_blob(&backend, &b).await,
        ErrorCode::InvalidProgram,
        &["Q4_K", "multiple of 256"],
    );
}
}

op_case! {
/// `gather` from block-format tables (the fixtures' weights as `[V, H]` embeddings: F16 with
/// rows of 70, not a multiple of the kernel's 8-value units, Q8_0, Q5_0, Q4_K and Q6_K) decodes
/// the picked rows like `BlockFormat::dequantize` (bit-exact with gguf-py, tests/quant_blocks.rs)
/// within `1e-6 * max |row| + 1e-7` (a GPU may fuse `d * sc * q - dmin * m`); an id past the
/// table is `InvalidArgument`.
pub async fn gather_decodes_block_tables(backend: SharedBackend, _config: SuiteConfig) {
    use webdelegate::program::ops::Gather;
    for fixture in fixtures().into_iter().filter(|f| {
        ["F16", "Q8_0", "Q5_0", "Q4_K", "Q6_K"].contains(&f.name)
    }) {
        let Fixture { name, format, n: vocab, k: width, .. } = fixture;
        let mut table = vec![0.0f32; vocab * width];
        format.dequantize(fixture.weight, &mut table).unwrap();
        let ids = [0i64, vocab as i64 - 1, 3, 3, 1, vocab as i64 / 2];
        let mut m = Model::new();
        let id_input = m.b.input("ids", DType::I64, dims(&[2, 3]));
        let t = block_param(&mut m, "table", format, &[vocab, width], fixture.weight);
        let out = m.b.push(|out| Gather { table: t, ids: id_input, out }).unwrap();
        m.b.output(out);
        let got = m.run(&backend, vec![crate::common::harness::i64_tensor(&[2, 3], ids.to_vec())]).await;
        assert_eq!(got[0].shape(), &[2, 3, width], "{name}");
        let data = got[0].as_f32().unwrap();
        for (s, &id) in ids.iter().enumerate() {
            let row = &table[id as usize * width..(id as usize + 1) * width];
            let max = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            for (h, (&g, &w)) in data[s * width..(s + 1) * width].iter().zip(row).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-6 * max + 1e-7,
                    "{name}: out[{s}, {h}] (row {id}) = {g}, want {w}"
                );
            }
        }
        let mut delegate = m.init(&backend).await.unwrap();
        let bad = crate::common::harness::i64_tensor(&[2, 3], vec![0, 0, vocab as i64, 0, 0, 0]);
        assert_error(
            name,
            crate::common::harness::execute(&mut delegate, vec![bad], 1).await,
            ErrorCode::InvalidArgument,
            &[&vocab.to_string()],
        );
    }
}
}

op_case! {
/// A linear whose input is a gated activation, `linear(f(a) * u)` for `f` tanh-GELU and SiLU
/// (GeGLU / SwiGLU before an FFN's down projection; the WebGPU backend reads the product as it
/// loads its activations, see its `fusion.rs`), against f64 ([`check_linear`]'s tolerance): an
/// f32 weight `[37, 70]` with a bias, and the Q8_0, Q5_0, Q4_K and Q6_K fixtures' weights (Q5_0
/// and Q4_K with the suite's small shapes)
/// decoded by the crate's dequantizer (bit-exact against gguf-py in tests/quant_blocks.rs), for
/// `M` 1 and 3 (tiled) under every GEMV kernel; then the product also a program output, so
/// nothing fuses, which must give the same values.
pub async fn linear_of_a_gated_activation(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(83);
    let dense_w = rng.vec(37 * 70, -1.0, 1.0);
    let dense_bias = rng.vec(37, -0.5, 0.5);
    // (name, block format or f32, n, k, the weight's bytes, its decoded values)
    type Weight = (&'static str, Option<BlockFormat>, usize, usize, Vec<u8>, Vec<f32>);
    let mut weights: Vec<Weight> = vec![("f32", None, 37, 70, Vec::new(), dense_w)];
    for fixture in fixtures() {
        // In the browser (small shapes) one format of 32-value and one of 256-value blocks.
        let wanted: &[BlockFormat] = if config.small {
            &[BlockFormat::Q5_0, BlockFormat::Q4_K]
        } else {
            &[BlockFormat::Q8_0, BlockFormat::Q5_0, BlockFormat::Q4_K, BlockFormat::Q6_K]
        };
        if !wanted.contains(&fixture.format) {
            continue;
        }
        let mut decoded = vec![0.0f32; fixture.n * fixture.k];
        fixture.format.dequantize(fixture.weight, &mut decoded).unwrap();
        weights.push((
            fixture.name,
            Some(fixture.format),
            fixture.n,
            fixture.k,
            fixture.weight.to_vec(),
            decoded,
        ));
    }
    type Activation = (UnaryOp, fn(f64) -> f64);
    let activations: [Activation; 2] = [(UnaryOp::GeluTanh, gelu_tanh), (UnaryOp::Silu, silu)];
    for (name, format, n, k, bytes, decoded) in &weights {
        let (n, k) = (*n, *k);
        let bias: Vec<f32> = dense_bias.iter().cycle().take(n).copied().collect();
        for (op, f) in activations {
            for rows in [1usize, 3] {
                let a = rng.vec(rows * k, -4.0, 4.0);
                let u = rng.vec(rows * k, -1.5, 1.5);
                let x: Vec<f32> = a
                    .iter()
                    .zip(&u)
                    .map(|(&a, &u)| (f(f64::from(a)) * f64::from(u)) as f32)
                    .collect();
                for also_output in [false, true] {
                    // Every GEMV kernel also for M = 3: the kernel decides whether the gated
                    // activation fuses into the tiled linear too (not with the rows GEMV).
                    for &specs in config.gemv_specs {
                        let mut m = Model::new();
                        let (ai, ui) = (m.input("a", &[rows, k]), m.input("u", &[rows, k]));
                        let weight = match format {
                            Some(format) => block_param(&mut m, "weight", *format, &[n, k], bytes),
                            None => m.param("weight", &[n, k], decoded),
                        };
                        let b = m.param("bias", &[n], &bias);
                        let g = m.b.unary(op, ai).unwrap();
                        let product = m.b.binary(BinaryOp::Mul, g, ui).unwrap();
                        let out = m
                            .b
                            .push(|out| Linear { x: product, weight, bias: Some(b), out })
                            .unwrap();
                        m.b.output(out);
                        if also_output {
                            m.b.output(product);
                        }
                        let inputs = vec![
                            f32_tensor(&[rows, k], a.clone()),
                            f32_tensor(&[rows, k], u.clone()),
                        ];
                        let got = m.run_with(&backend, specs, inputs).await;
                        let what = format!("{name} {op:?} M={rows} {specs:?} output={also_output}");
                        check_linear(&what, &got[0], &x, decoded, Some(&bias), n);
                    }
                }
            }
        }
    }
}
}

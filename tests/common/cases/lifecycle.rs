//! Lifecycle through the registry types: init once, execute many times, destroy; bad blobs,
//! bad arguments, missing or inconsistent parameters and unknown specs give the right codes.

use crate::common::harness::{
    Model, SCOPE, SuiteConfig, assert_close, assert_error, dims, execute, f32_tensor, i32_tensor,
    i64_tensor,
};
use crate::common::reference::{self, Ref};
use crate::common::rng::Rng;
use crate::op_case;
use std::sync::Arc;
use webdelegate::params::MemoryProvider;
use webdelegate::program::ops;
use webdelegate::program::{DType, Dim, FORMAT_VERSION, Op, ProgramBuilder};
use webdelegate::registry::{
    BackendInitContext, BackendOption, CompileSpec, FreeableBuffer, LoadedDelegate, SharedBackend,
};
use webdelegate::{EValue, ErrorCode};

/// `softmax(x @ w + b)` over a symbolic number of rows.
fn small_model(w: &[f32], b: &[f32]) -> Model {
    let mut m = Model::new();
    let rows = m.b.symbol("rows");
    let x = m.b.input("x", DType::F32, vec![rows, Dim::Fixed(4)]);
    let weight = m.param("w", &[4, 3], w);
    let bias = m.param("b", &[3], b);
    let logits = m.b.matmul(x, weight, Some(bias), false, false).unwrap();
    let probs = m.b.softmax(logits, None).unwrap();
    m.b.output(probs);
    m
}

op_case! {
/// One init, twenty executions with different row counts (0 included) and output slots that
/// start empty or hold a stale tensor, each checked; then the delegate is dropped (destroy).
pub async fn lifecycle_init_execute_many_destroy(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(61);
    let (w, b) = (rng.vec(12, -1.0, 1.0), rng.vec(3, -1.0, 1.0));
    let model = small_model(&w, &b);
    let mut delegate = model.init(&backend).await.unwrap();
    for round in 0..20 {
        let rows = [3, 1, 0, 17, 5][round % 5];
        let x = rng.vec(rows * 4, -2.0, 2.0);
        let stale = EValue::Tensor(f32_tensor(&[2, 2], vec![9.0; 4]));
        let mut args = vec![
            EValue::Tensor(f32_tensor(&[rows, 4], x.clone())),
            if round % 2 == 0 { EValue::None } else { stale },
        ];
        delegate.execute(&mut args).await.unwrap();
        let got = args[1].as_tensor().expect("output tensor");
        let logits = reference::matmul(
            &Ref::new(&[rows, 4], &x),
            &Ref::new(&[4, 3], &w),
            Some(&Ref::new(&[3], &b)),
            false,
            false,
        );
        let want = reference::softmax(&logits, None);
        assert_close(
            &format!("round {round} ({rows} rows)"),
            got,
            &want,
            config.reduction,
        );
        // The input is left as it was.
        assert_eq!(args[0].as_tensor().unwrap().as_f32().unwrap(), x.as_slice());
    }
    drop(delegate);
    // A second program on the same backend instance works independently.
    let mut again = small_model(&w, &b).init(&backend).await.unwrap();
    execute(&mut again, vec![f32_tensor(&[1, 4], vec![0.0; 4])], 1)
        .await
        .unwrap();
}
}

async fn init_blob(backend: &SharedBackend, blob: Vec<u8>) -> webdelegate::Result<LoadedDelegate> {
    LoadedDelegate::init_with_backend(
        "under-test",
        Arc::clone(backend),
        FreeableBuffer::new(blob),
        &[],
        &BackendInitContext::new(),
    )
    .await
}

op_case! {
/// Foreign or future blobs are `DelegateInvalidCompatibility`; malformed ones `InvalidProgram`
/// with a message saying what is wrong.
pub async fn bad_blobs_get_the_right_codes(backend: SharedBackend, _config: SuiteConfig) {
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[2]));
    let y = b.relu(x).unwrap();
    b.output(y);
    let good = b.encode().unwrap();
    init_blob(&backend, good.clone()).await.unwrap();

    let compatibility = ErrorCode::DelegateInvalidCompatibility;
    assert_error(
        "empty",
        init_blob(&backend, vec![]).await,
        compatibility,
        &["magic"],
    );
    let mut foreign = good.clone();
    foreign[0] = b'X';
    assert_error(
        "bad magic",
        init_blob(&backend, foreign).await,
        compatibility,
        &["magic"],
    );
    let mut future = good.clone();
    future[4..6].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    assert_error(
        "version",
        init_blob(&backend, future).await,
        compatibility,
        &["version"],
    );

    let invalid = ErrorCode::InvalidProgram;
    let mut reserved = good.clone();
    reserved[6] = 1;
    assert_error(
        "reserved",
        init_blob(&backend, reserved).await,
        invalid,
        &["reserved"],
    );
    assert_error(
        "truncated header",
        init_blob(&backend, good[..6].to_vec()).await,
        invalid,
        &["truncated header"],
    );
    let truncated = good[..good.len() - 1].to_vec();
    assert_error(
        "truncated",
        init_blob(&backend, truncated).await,
        invalid,
        &["malformed"],
    );
    let mut trailing = good.clone();
    trailing.push(0);
    assert_error(
        "trailing",
        init_blob(&backend, trailing).await,
        invalid,
        &["after the program"],
    );

    // Well-formed bytes, invalid program: a declared shape the op does not compute.
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[2]));
    let out = b.tensor("y", DType::F32, dims(&[3]));
    b.op(Op::Unary(ops::Unary {
        op: webdelegate::program::UnaryOp::Relu,
        x,
        out,
    }))
    .output(out);
    let blob = b.encode_unchecked().unwrap();
    assert_error(
        "shape mismatch",
        init_blob(&backend, blob).await,
        invalid,
        &["op 0 (relu)", "[3]"],
    );

    // A cycle.
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[2]));
    let t1 = b.tensor("t1", DType::F32, dims(&[2]));
    let t2 = b.tensor("t2", DType::F32, dims(&[2]));
    b.op(Op::Binary(ops::Binary {
        op: webdelegate::program::BinaryOp::Add,
        a: x,
        b: t2,
        out: t1,
    }));
    b.op(Op::Unary(ops::Unary {
        op: webdelegate::program::UnaryOp::Tanh,
        x: t1,
        out: t2,
    }));
    b.output(t2);
    let blob = b.encode_unchecked().unwrap();
    assert_error(
        "cycle",
        init_blob(&backend, blob).await,
        invalid,
        &["cycle"],
    );
}
}

op_case! {
/// Every malformed argument list is `InvalidArgument`, and the delegate keeps working.
pub async fn wrong_inputs_are_invalid_arguments(backend: SharedBackend, _config: SuiteConfig) {
    let mut m = Model::new();
    let seq = m.b.symbol("seq");
    let x = m.b.input("x", DType::F32, vec![seq, Dim::Fixed(2)]);
    let ids = m.b.input("ids", DType::I64, vec![seq]);
    let table = m.param("table", &[3, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let rows = m.b.gather(table, ids).unwrap();
    let sum = m.b.add(x, rows).unwrap();
    m.b.output(sum);
    let mut delegate = m.init(&backend).await.unwrap();
    let x_ok = || EValue::Tensor(f32_tensor(&[2, 2], vec![1.0; 4]));
    let ids_ok = || EValue::Tensor(i64_tensor(&[2], vec![0, 2]));
    let invalid = ErrorCode::InvalidArgument;
    let cases: Vec<(&str, Vec<EValue>, &[&str])> = vec![
        ("too few", vec![x_ok(), ids_ok()], &["arguments"]),
        (
            "too many",
            vec![x_ok(), ids_ok(), EValue::None, EValue::None],
            &["arguments"],
        ),
        (
            "not a tensor",
            vec![EValue::Int(3), ids_ok(), EValue::None],
            &["input 0", "Int"],
        ),
        (
            "dtype",
            vec![
                EValue::Tensor(i32_tensor(&[2, 2], vec![1; 4])),
                ids_ok(),
                EValue::None,
            ],
            &["input 0", "int32"],
        ),
        (
            "rank",
            vec![
                EValue::Tensor(f32_tensor(&[4], vec![1.0; 4])),
                ids_ok(),
                EValue::None,
            ],
            &["rank"],
        ),
        (
            "fixed extent",
            vec![
                EValue::Tensor(f32_tensor(&[2, 3], vec![1.0; 6])),
                ids_ok(),
                EValue::None,
            ],
            &["dim 1"],
        ),
        (
            "symbol bound twice",
            vec![
                x_ok(),
                EValue::Tensor(i64_tensor(&[3], vec![0, 1, 2])),
                EValue::None,
            ],
            &["seq"],
        ),
        (
            "output slot",
            vec![x_ok(), ids_ok(), EValue::Int(1)],
            &["output slot 0"],
        ),
        (
            "output dtype",
            vec![x_ok(), ids_ok(), EValue::Tensor(i64_tensor(&[1], vec![0]))],
            &["output slot 0", "int64"],
        ),
        (
            "id out of range",
            vec![
                x_ok(),
                EValue::Tensor(i64_tensor(&[2], vec![0, 3])),
                EValue::None,
            ],
            &["id 3"],
        ),
    ];
    for (what, mut args, parts) in cases {
        assert_error(what, delegate.execute(&mut args).await, invalid, parts);
    }
    let got = execute(
        &mut delegate,
        vec![
            f32_tensor(&[2, 2], vec![1.0; 4]),
            i64_tensor(&[2], vec![0, 2]),
        ],
        1,
    )
    .await
    .unwrap();
    assert_eq!(got[0].as_f32().unwrap(), &[1.0, 2.0, 5.0, 6.0]);
}
}

fn weight_program() -> ProgramBuilder {
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[1, 2]));
    let w = b.param("w", DType::F32, dims(&[2, 3]), SCOPE, "w");
    let y = b.matmul(x, w, None, false, false).unwrap();
    b.output(y);
    b
}

async fn init_with_provider(
    backend: &SharedBackend,
    provider: Option<MemoryProvider>,
) -> webdelegate::Result<LoadedDelegate> {
    let mut context = BackendInitContext::new();
    if let Some(provider) = provider {
        context = context.with_parameters(Arc::new(provider));
    }
    LoadedDelegate::init_with_backend(
        "under-test",
        Arc::clone(backend),
        FreeableBuffer::new(weight_program().encode().unwrap()),
        &[],
        &context,
    )
    .await
}

op_case! {
/// No provider, unknown scope or key -> `NotFound`; a provider that disagrees with the
/// program about length, dtype or shape -> `InvalidExternalData`.
pub async fn parameter_errors(backend: SharedBackend, _config: SuiteConfig) {
    let bytes = |count: usize| vec![0u8; count * 4];
    let not_found = ErrorCode::NotFound;
    assert_error(
        "no provider",
        init_with_provider(&backend, None).await,
        not_found,
        &["provider"],
    );
    let other_scope = MemoryProvider::new();
    other_scope.insert("elsewhere", "w", bytes(6));
    assert_error(
        "scope",
        init_with_provider(&backend, Some(other_scope)).await,
        not_found,
        &["scope"],
    );
    let other_key = MemoryProvider::new();
    other_key.insert(SCOPE, "v", bytes(6));
    assert_error(
        "key",
        init_with_provider(&backend, Some(other_key)).await,
        not_found,
        &["\"w\""],
    );

    let external = ErrorCode::InvalidExternalData;
    let short = MemoryProvider::new();
    short.insert(SCOPE, "w", bytes(5));
    assert_error(
        "length",
        init_with_provider(&backend, Some(short)).await,
        external,
        &["20 bytes", "24"],
    );
    let wrong_dtype = MemoryProvider::new();
    wrong_dtype.insert_described(SCOPE, "w", bytes(6), Some("I32".into()), None);
    assert_error(
        "dtype",
        init_with_provider(&backend, Some(wrong_dtype)).await,
        external,
        &["I32"],
    );
    let transposed = MemoryProvider::new();
    transposed.insert_described(SCOPE, "w", bytes(6), Some("F32".into()), Some(vec![3, 2]));
    assert_error(
        "shape",
        init_with_provider(&backend, Some(transposed)).await,
        external,
        &["[3, 2]"],
    );

    let good = MemoryProvider::new();
    let values = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    good.insert_described(
        SCOPE,
        "w",
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        Some("F32".into()),
        Some(vec![2, 3]),
    );
    let mut delegate = init_with_provider(&backend, Some(good)).await.unwrap();
    let got = execute(&mut delegate, vec![f32_tensor(&[1, 2], vec![1.0, 1.0])], 1)
        .await
        .unwrap();
    assert_eq!(got[0].as_f32().unwrap(), &[5.0, 7.0, 9.0]);
}
}

op_case! {
/// `precision = f32` is accepted; unknown compile-spec or runtime-spec keys, repeated keys and
/// unknown precisions are `InvalidArgument` naming them.
pub async fn compile_specs_are_checked(backend: SharedBackend, _config: SuiteConfig) {
    let model = small_model(&[0.0; 12], &[0.0; 3]);
    let precision = CompileSpec::new("precision", "f32");
    model
        .init_with(&backend, std::slice::from_ref(&precision))
        .await
        .unwrap();

    let invalid = ErrorCode::InvalidArgument;
    let unknown = [precision.clone(), CompileSpec::new("no_such_spec", "1")];
    assert_error(
        "unknown spec",
        model.init_with(&backend, &unknown).await,
        invalid,
        &["no_such_spec"],
    );
    let twice = [precision.clone(), precision.clone()];
    assert_error(
        "repeated spec",
        model.init_with(&backend, &twice).await,
        invalid,
        &["more than once"],
    );
    // Specs are checked before the blob on every backend: a bad spec with a bad blob is the spec's.
    let bad_blob = LoadedDelegate::init_with_backend(
        "suite",
        Arc::clone(&backend),
        FreeableBuffer::new(b"XXXXXXXX".to_vec()),
        &unknown,
        &BackendInitContext::new(),
    )
    .await;
    assert_error(
        "unknown spec, foreign blob",
        bad_blob,
        invalid,
        &["no_such_spec"],
    );
    let odd = [CompileSpec::new("precision", "f64")];
    assert_error(
        "precision",
        model.init_with(&backend, &odd).await,
        invalid,
        &["f64"],
    );

    let context = BackendInitContext::new()
        .with_parameters(model.provider.clone())
        .with_runtime_specs(vec![BackendOption::new("no_such_option", true).unwrap()]);
    let result = LoadedDelegate::init_with_backend(
        "under-test",
        Arc::clone(&backend),
        FreeableBuffer::new(model.blob()),
        &[],
        &context,
    )
    .await;
    assert_error("runtime spec", result, invalid, &["no_such_option"]);
}
}

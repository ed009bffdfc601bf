//! Runs programs on any backend through the registry types, as an application would:
//! `LoadedDelegate::init_with_backend` with a `MemoryProvider` holding the parameters, then
//! `execute` with the inputs followed by `EValue::None` output slots.

use crate::common::reference::Ref;
use std::sync::Arc;
use webdelegate::params::MemoryProvider;
use webdelegate::program::{DType, Dim, ProgramBuilder, TensorId};
use webdelegate::registry::{
    BackendInitContext, CompileSpec, FreeableBuffer, LoadedDelegate, SharedBackend,
};
use webdelegate::{EValue, ErrorCode, Result, Tensor, TensorData};

/// The scope every test parameter lives in.
pub const SCOPE: &str = "test";

/// Absolute plus relative tolerance: `|got - want| <= abs + rel * |want|`.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    /// Relative part.
    pub rel: f64,
    /// Absolute floor.
    pub abs: f64,
}

/// What a backend is held to, and how big the random cases are.
#[derive(Clone, Copy, Debug)]
pub struct SuiteConfig {
    /// Element-wise ops (binaries, scale, activations, casts).
    pub elementwise: Tol,
    /// Row reductions (layer norm, softmax, L2 norm, mean pool).
    pub reduction: Tol,
    /// Matrix products.
    pub matmul: Tol,
    /// The end-to-end block (errors compound through a dozen ops).
    pub model: Tol,
    /// Small shapes and fewer random trials (for slow backends, e.g. emulated GPUs).
    pub small: bool,
    /// The compile-spec variants the one-activation-row (GEMV) `linear` cases run under, one
    /// init per variant, so that a backend with several GEMV kernels has each tested whatever
    /// its adapter would pick (`[[]]`: the backend's defaults only).
    pub gemv_specs: &'static [&'static [(&'static str, &'static str)]],
    /// The compile-spec variants the attention cases run under, one init per variant (a
    /// backend that splits attention across workgroups has both ways tested whatever its
    /// adapter would pick; `[[]]`: the backend's defaults only).
    pub attention_specs: &'static [&'static [(&'static str, &'static str)]],
    /// The compile-spec variants the matmul cases run under, one init per variant (a backend
    /// with several matmul kernels has each tested; `[[]]`: the backend's defaults only).
    pub matmul_specs: &'static [&'static [(&'static str, &'static str)]],
    /// Whether the backend takes the compile spec `activations = "int8"` (the CPU backend's
    /// int8 activation rows for block-format `linear`s); a backend that does not must refuse
    /// it.
    pub int8_activations: bool,
}

impl SuiteConfig {
    /// What the CPU backend (f32 throughout) must meet.
    pub const CPU: Self = Self {
        elementwise: Tol {
            rel: 1e-5,
            abs: 1e-6,
        },
        reduction: Tol {
            rel: 1e-4,
            abs: 1e-5,
        },
        matmul: Tol {
            rel: 1e-4,
            abs: 1e-4,
        },
        model: Tol {
            rel: 1e-3,
            abs: 1e-4,
        },
        small: false,
        gemv_specs: &[&[]],
        attention_specs: &[&[]],
        matmul_specs: &[&[]],
        int8_activations: true,
    };

    /// The same tolerances with small shapes.
    pub const fn small(self) -> Self {
        Self {
            small: true,
            ..self
        }
    }
}

/// A program under construction plus the parameters it references.
pub struct Model {
    /// The builder.
    pub b: ProgramBuilder,
    /// The parameters (scope [`SCOPE`]).
    pub provider: Arc<MemoryProvider>,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

/// Fixed dims.
pub fn dims(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Fixed(d as u64)).collect()
}

impl Model {
    /// An empty program with an empty provider.
    pub fn new() -> Self {
        Self {
            b: ProgramBuilder::new(),
            provider: Arc::new(MemoryProvider::new()),
        }
    }

    /// An f32 parameter `name` (also its key) with `values`, described to the provider.
    pub fn param(&mut self, name: &str, shape: &[usize], values: &[f32]) -> TensorId {
        assert_eq!(values.len(), shape.iter().product::<usize>(), "{name}");
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.provider.insert_described(
            SCOPE,
            name,
            bytes,
            Some("F32".into()),
            Some(shape.iter().map(|&d| d as u64).collect()),
        );
        self.b.param(name, DType::F32, dims(shape), SCOPE, name)
    }

    /// An f32 input of fixed shape.
    pub fn input(&mut self, name: &str, shape: &[usize]) -> TensorId {
        self.b.input(name, DType::F32, dims(shape))
    }

    /// The encoded, validated blob.
    pub fn blob(&self) -> Vec<u8> {
        match self.b.encode() {
            Ok(blob) => blob,
            Err(error) => panic!("test program does not validate: {error}\n{}", self.dump()),
        }
    }

    /// The program's text dump (for failure messages).
    pub fn dump(&self) -> String {
        webdelegate::program::dump(self.b.program())
    }

    /// Initialises the program on `backend`.
    pub async fn init(&self, backend: &SharedBackend) -> Result<LoadedDelegate> {
        self.init_with(backend, &[]).await
    }

    /// Initialises the program on `backend` with compile specs.
    pub async fn init_with(
        &self,
        backend: &SharedBackend,
        specs: &[CompileSpec],
    ) -> Result<LoadedDelegate> {
        let context = BackendInitContext::new().with_parameters(self.provider.clone());
        LoadedDelegate::init_with_backend(
            "under-test",
            Arc::clone(backend),
            FreeableBuffer::new(self.blob()),
            specs,
            &context,
        )
        .await
    }

    /// Initialises, executes once on `inputs` and returns the outputs.
    pub async fn run(&self, backend: &SharedBackend, inputs: Vec<Tensor>) -> Vec<Tensor> {
        self.run_with(backend, &[], inputs).await
    }

    /// [`Model::run`] with compile specs (`(key, value)` pairs).
    pub async fn run_with(
        &self,
        backend: &SharedBackend,
        specs: &[(&str, &str)],
        inputs: Vec<Tensor>,
    ) -> Vec<Tensor> {
        let specs: Vec<CompileSpec> = specs
            .iter()
            .map(|&(key, value)| CompileSpec::new(key, value))
            .collect();
        let mut delegate = match self.init_with(backend, &specs).await {
            Ok(delegate) => delegate,
            Err(error) => panic!("init failed ({specs:?}): {error}\n{}", self.dump()),
        };
        let outputs = self.b.program().outputs.len();
        match execute(&mut delegate, inputs, outputs).await {
            Ok(outputs) => outputs,
            Err(error) => panic!("execute failed: {error}\n{}", self.dump()),
        }
    }
}

/// Initialises the program of `b` as it stands (possibly invalid: for refusal tests), with no
/// parameters.
pub async fn init_blob(backend: &SharedBackend, b: &ProgramBuilder) -> Result<LoadedDelegate> {
    let blob = b.encode_unchecked()?;
    LoadedDelegate::init_with_backend(
        "under-test",
        Arc::clone(backend),
        FreeableBuffer::new(blob),
        &[],
        &BackendInitContext::new(),
    )
    .await
}

/// Executes with `inputs` and `outputs` empty slots; returns the output tensors.
pub async fn execute(
    delegate: &mut LoadedDelegate,
    inputs: Vec<Tensor>,
    outputs: usize,
) -> Result<Vec<Tensor>> {
    let inputs_len = inputs.len();
    let mut args: Vec<EValue> = inputs.into_iter().map(EValue::Tensor).collect();
    args.extend((0..outputs).map(|_| EValue::None));
    delegate.execute(&mut args).await?;
    Ok(args
        .into_iter()
        .skip(inputs_len)
        .map(|value| match value {
            EValue::Tensor(tensor) => tensor,
            other => panic!("output slot holds {} after execute", other.tag()),
        })
        .collect())
}

/// An f32 tensor.
pub fn f32_tensor(shape: &[usize], values: Vec<f32>) -> Tensor {
    Tensor::from_f32(shape.to_vec(), values).expect("test tensor")
}

/// An i64 tensor.
pub fn i64_tensor(shape: &[usize], values: Vec<i64>) -> Tensor {
    Tensor::new(shape.to_vec(), TensorData::Int64(values)).expect("test tensor")
}

/// An i32 tensor.
pub fn i32_tensor(shape: &[usize], values: Vec<i32>) -> Tensor {
    Tensor::new(shape.to_vec(), TensorData::Int32(values)).expect("test tensor")
}

/// Asserts that `got` has `want`'s shape and every element is within `tol`.
pub fn assert_close(what: &str, got: &Tensor, want: &Ref, tol: Tol) {
    assert_eq!(got.shape(), want.shape.as_slice(), "{what}: shape");
    let got = Ref::from_tensor(got);
    for (index, (&g, &w)) in got.data.iter().zip(&want.data).enumerate() {
        let error = (g - w).abs();
        let allowed = tol.abs + tol.rel * w.abs();
        let same_special = (g.is_nan() && w.is_nan()) || (g.is_infinite() && g == w);
        if !(error <= allowed || same_special) {
            panic!(
                "{what}: element {index} (of shape {:?}) is {g}, want {w} (error {error:e} > {allowed:e})",
                want.shape
            );
        }
    }
}

/// Asserts that `got` equals `want` exactly (integer outputs, data movement).
pub fn assert_exact(what: &str, got: &Tensor, want: &Ref) {
    assert_eq!(got.shape(), want.shape.as_slice(), "{what}: shape");
    let got = Ref::from_tensor(got);
    for (index, (&g, &w)) in got.data.iter().zip(&want.data).enumerate() {
        assert!(
            g == w || (g.is_nan() && w.is_nan()),
            "{what}: element {index} is {g}, want {w}"
        );
    }
}

/// Asserts that `result` failed with `code` and its message contains every part of `parts`.
pub fn assert_error<T>(what: &str, result: Result<T>, code: ErrorCode, parts: &[&str]) {
    match result {
        Ok(_) => panic!("{what}: succeeded, expected {code}"),
        Err(error) => {
            assert_eq!(error.code(), code, "{what}: {error}");
            for part in parts {
                assert!(
                    error.message().contains(part),
                    "{what}: message {:?} lacks {part:?}",
                    error.message()
                );
            }
        }
    }
}

//! Arbitrary blobs through the CPU backend: init (a provider serves zeros of the declared size
//! for every parameter) and, when init succeeds, one execute with small zero inputs (every
//! symbol bound to 2). Nothing may panic, and no failure may be `Internal`; sizes are capped so
//! a legitimately huge program is skipped rather than allocated.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use webdelegate::backends::CpuBackend;
use webdelegate::params::MemoryProvider;
use webdelegate::program::{DType, Dim, load};
use webdelegate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate};
use webdelegate::{EValue, ErrorCode, ScalarType, Tensor};

const MAX_ELEMENTS: u64 = 1 << 16;

fuzz_target!(|blob: &[u8]| {
    let Ok(program) = load(blob) else { return };
    // Skip programs whose tensors would be large when every symbol is 2.
    let numel = |shape: &[Dim]| {
        shape.iter().try_fold(1u64, |acc, dim| match dim {
            Dim::Fixed(n) => acc.checked_mul(*n),
            Dim::Symbol(_) => acc.checked_mul(2),
        })
    };
    if program
        .tensors
        .iter()
        .any(|t| numel(&t.shape).is_none_or(|n| n > MAX_ELEMENTS))
    {
        return;
    }
    let inputs: Vec<EValue> = program
        .inputs
        .iter()
        .map(|&id| {
            let decl = &program.tensors[id as usize];
            let shape: Vec<usize> = decl
                .shape
                .iter()
                .map(|dim| match dim {
                    Dim::Fixed(n) => *n as usize,
                    Dim::Symbol(_) => 2,
                })
                .collect();
            let dtype = match decl.dtype {
                DType::F32 => ScalarType::Float32,
                DType::I32 => ScalarType::Int32,
                DType::I64 => ScalarType::Int64,
                DType::U8 | DType::Block(_) => ScalarType::UInt8,
            };
            EValue::Tensor(Tensor::zeros(dtype, shape).expect("small tensor"))
        })
        .collect();
    let provider = MemoryProvider::new();
    for param in &program.params {
        let decl = &program.tensors[param.tensor as usize];
        let fixed: Option<Vec<u64>> = decl
            .shape
            .iter()
            .map(|dim| match dim {
                Dim::Fixed(n) => Some(*n),
                Dim::Symbol(_) => None,
            })
            .collect();
        if let Some(bytes) = fixed.and_then(|shape| decl.dtype.tensor_bytes(&shape)) {
            provider.insert(&param.scope, &param.key, vec![0; bytes as usize]);
        }
    }
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    pollster::block_on(async {
        let outcome = match LoadedDelegate::init_with_backend(
            "cpu",
            Arc::new(CpuBackend::new()),
            FreeableBuffer::new(blob.to_vec()),
            &[],
            &context,
        )
        .await
        {
            Ok(mut delegate) => {
                let mut args = inputs;
                args.extend(program.outputs.iter().map(|_| EValue::None));
                delegate.execute(&mut args).await
            }
            Err(error) => Err(error),
        };
        if let Err(error) = outcome {
            assert_ne!(error.code(), ErrorCode::Internal, "{error}");
        }
    });
});

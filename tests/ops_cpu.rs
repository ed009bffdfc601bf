//! The op suite on the CPU backend: natively, and inside headless Chromium (wasm32, simd128)
//! with the suite's small shapes (`bash scripts/test-wasm.sh --test ops_cpu`); and the kernels'
//! vector lanes checked against their scalar definitions on both (in the browser they are
//! simd128 instructions, natively arrays).

mod common;

use common::harness::SuiteConfig;
use std::sync::Arc;
use webdelegate::backends::CpuBackend;

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

op_suite!(
    Arc::new(CpuBackend::new()),
    if cfg!(target_arch = "wasm32") {
        SuiteConfig::CPU.small()
    } else {
        SuiteConfig::CPU
    }
);

#[cfg(not(target_arch = "wasm32"))]
mod cpu_specific {
    use super::common::harness::{Model, execute, f32_tensor};
    use std::sync::Arc;
    use webdelegate::ErrorCode;
    use webdelegate::backends::CpuBackend;
    use webdelegate::registry::{
        BackendInterface, BackendOption, BackendOptionContext, OptionValue, SharedBackend,
    };

    fn relu_model() -> Model {
        let mut m = Model::new();
        let x = m.input("x", &[3]);
        let y = m.b.relu(x).unwrap();
        m.b.output(y);
        m
    }

    #[test]
    fn destroy_releases_every_program() {
        let cpu = Arc::new(CpuBackend::new());
        let backend: SharedBackend = cpu.clone();
        pollster::block_on(async {
            let model = relu_model();
            let mut first = model.init(&backend).await.unwrap();
            let second = model.init(&backend).await.unwrap();
            assert_eq!(cpu.live_programs(), 2);
            // A failed init leaves nothing behind.
            let mut broken = relu_model();
            broken.b.output(99);
            let blob = broken.b.encode_unchecked().unwrap();
            let failed = webdelegate::registry::LoadedDelegate::init_with_backend(
                "cpu",
                backend.clone(),
                webdelegate::registry::FreeableBuffer::new(blob),
                &[],
                &Default::default(),
            )
            .await;
            assert_eq!(failed.unwrap_err().code(), ErrorCode::InvalidProgram);
            assert_eq!(cpu.live_programs(), 2);
            let got = execute(&mut first, vec![f32_tensor(&[3], vec![-1.0, 0.5, 2.0])], 1)
                .await
                .unwrap();
            assert_eq!(got[0].as_f32().unwrap(), &[0.0, 0.5, 2.0]);
            drop(second);
            assert_eq!(cpu.live_programs(), 1);
            drop(first);
            assert_eq!(cpu.live_programs(), 0);
        });
    }

    #[test]
    fn options_report_precision_and_refuse_unknown_keys() {
        let cpu = CpuBackend::new();
        let mut context = BackendOptionContext::default();
        let mut options = vec![
            BackendOption::new("precision", "").unwrap(),
            BackendOption::new("live_programs", 7).unwrap(),
            BackendOption::new("simd128", true).unwrap(),
        ];
        cpu.get_option(&mut context, &mut options).unwrap();
        assert_eq!(options[0].value(), &OptionValue::String("f32".into()));
        assert_eq!(options[1].value(), &OptionValue::Int(0));
        // Natively there is no wasm SIMD.
        assert_eq!(options[2].value(), &OptionValue::Bool(false));
        // Natively there is no worker pool: one thread, and the reason says so.
        let mut threads = vec![
            BackendOption::new("threads", 0).unwrap(),
            BackendOption::new("threads_reason", "").unwrap(),
        ];
        cpu.get_option(&mut context, &mut threads).unwrap();
        assert_eq!(threads[0].value(), &OptionValue::Int(1));
        let OptionValue::String(reason) = threads[1].value() else {
            panic!("threads_reason is not a string: {:?}", threads[1].value());
        };
        assert!(reason.contains("one thread"), "{reason}");
        let four = [BackendOption::new("threads", 4).unwrap()];
        let error = cpu.set_option(&mut context, &four).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        assert!(error.message().contains("cannot use 4 threads"), "{error}");
        cpu.set_option(&mut context, &[BackendOption::new("threads", 1).unwrap()])
            .unwrap();
        let mut unknown = vec![BackendOption::new("cores", 4).unwrap()];
        let error = cpu.get_option(&mut context, &mut unknown).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        let error = cpu.set_option(&mut context, &unknown).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument);
        cpu.set_option(&mut context, &[]).unwrap();
        assert!(cpu.is_available());
    }

    /// The `threads` compile spec: 1 runs as without it; natively there is no pool, so 2 is
    /// `InvalidArgument` saying why, as are 0 and text that is not a count.
    #[test]
    fn the_threads_compile_spec_is_checked() {
        use webdelegate::registry::{CompileSpec, FreeableBuffer, LoadedDelegate};
        let backend: SharedBackend = Arc::new(CpuBackend::new());
        pollster::block_on(async {
            let init = |value: &'static str| {
                let backend = backend.clone();
                async move {
                    let blob = relu_model().b.encode_unchecked().unwrap();
                    LoadedDelegate::init_with_backend(
                        "cpu",
                        backend,
                        FreeableBuffer::new(blob),
                        &[CompileSpec::new("threads", value)],
                        &Default::default(),
                    )
                    .await
                }
            };
            let mut one = init("1").await.unwrap();
            let got = execute(&mut one, vec![f32_tensor(&[3], vec![-1.0, 0.5, 2.0])], 1)
                .await
                .unwrap();
            assert_eq!(got[0].as_f32().unwrap(), &[0.0, 0.5, 2.0]);
            let error = init("2").await.unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidArgument);
            assert!(
                error
                    .message()
                    .contains("cannot run a program on 2 threads"),
                "{error}"
            );
            assert!(error.message().contains("one thread"), "{error}");
            for bad in ["0", "two", "-1"] {
                let error = init(bad).await.unwrap_err();
                assert_eq!(error.code(), ErrorCode::InvalidArgument, "{bad}");
                assert!(
                    error.message().contains("positive integer"),
                    "{bad}: {error}"
                );
            }
        });
    }

    #[test]
    fn the_sample_encoder_runs_and_normalises() {
        use webdelegate::program::{self, samples};
        use webdelegate::{EValue, Tensor, TensorData};
        let shape = samples::EncoderShape {
            vocab: 50,
            max_positions: 16,
            hidden: 16,
            heads: 4,
            intermediate: 32,
            layers: 2,
        };
        let program = samples::encoder(shape).unwrap();
        assert_eq!(program.outputs.len(), 2);
        let provider = samples::random_parameters(&program, 1);
        let context =
            webdelegate::registry::BackendInitContext::new().with_parameters(Arc::new(provider));
        pollster::block_on(async {
            let mut delegate = webdelegate::registry::LoadedDelegate::init_with_backend(
                "cpu",
                Arc::new(CpuBackend::new()),
                webdelegate::registry::FreeableBuffer::new(program::encode(&program).unwrap()),
                &[],
                &context,
            )
            .await
            .unwrap();
            let ids = Tensor::new(vec![2, 5], TensorData::Int64((0..10).collect())).unwrap();
            let mask = Tensor::new(
                vec![2, 5],
                TensorData::Int64(vec![1, 1, 1, 1, 1, 1, 1, 1, 0, 0]),
            )
            .unwrap();
            let mut args = vec![
                EValue::Tensor(ids),
                EValue::Tensor(mask),
                EValue::None,
                EValue::None,
            ];
            delegate.execute(&mut args).await.unwrap();
            assert_eq!(args[2].as_tensor().unwrap().shape(), &[2, 5, 16]);
            let embedding = args[3].as_tensor().unwrap();
            assert_eq!(embedding.shape(), &[2, 16]);
            for row in embedding.as_f32().unwrap().chunks(16) {
                let norm: f32 = row.iter().map(|v| v * v).sum::<f32>().sqrt();
                assert!((norm - 1.0).abs() < 1e-5, "{norm}");
            }
        });
        assert!(samples::encoder(samples::EncoderShape { heads: 5, ..shape }).is_err());
        samples::encoder(samples::EncoderShape::default()).unwrap();
    }
}

/// Every f16 bit pattern widened four at a time (`F32x4::from_halves`) equals the scalar
/// `half_to_f32` (itself checked against the `half` crate for all patterns in the kernels'
/// unit tests), bit for bit; NaN stays NaN.
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn vector_half_widening_matches_the_scalar_one_for_every_pattern() {
    use webdelegate_kernels::math::{F32x4, half_to_f32};
    for h in (0..=u16::MAX).step_by(4) {
        let halves = [h, h + 1, h + 2, h + 3];
        let got = F32x4::from_halves(halves).to_array();
        for (&half, value) in halves.iter().zip(got) {
            let want = half_to_f32(half);
            if want.is_nan() {
                assert!(value.is_nan(), "{half:#06x}");
            } else {
                assert_eq!(value.to_bits(), want.to_bits(), "{half:#06x}");
            }
        }
    }
}

/// `I32x4::lane_sums` puts each of four vectors' lane sums in its lane.
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn lane_sums_transpose_four_vectors() {
    use webdelegate_kernels::math::{I32x4, U8x16};
    // I32x4 values from integer dots of bytes with i16 quants (the way the kernels build them),
    // small enough that every sum is exact in f32.
    let bytes: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
    let quants: Vec<i16> = (0..64i16).map(|i| i * 7 - 200).collect();
    let vectors: [I32x4; 4] =
        std::array::from_fn(|v| U8x16::load(&bytes[16 * v..]).dot_i16(&quants[16 * v..]));
    let sums = I32x4::lane_sums(vectors).to_f32().to_array();
    for (v, sum) in sums.into_iter().enumerate() {
        let want: i32 = (0..16)
            .map(|i| i32::from(bytes[16 * v + i] as i8) * i32::from(quants[16 * v + i]))
            .sum();
        assert_eq!(sum, want as f32, "vector {v}");
    }
}

//! The device's limits: the adapter's own, requested at device creation (oracle: the limits
//! wgpu reports for the same adapter, asked for independently here), and the caps that force
//! smaller ones (`max_storage_binding_bytes`, `max_buffer_bytes`): validated, applied at the
//! next `init` without live programs, and then enforced for activations and parameters alike.

use super::{dims, f32_bytes, new_backend};
use crate::backends::webgpu::WebGpuBackend;
use crate::error::ErrorCode;
use crate::params::MemoryProvider;
use crate::program::{DType, ProgramBuilder};
use crate::registry::{
    BackendInitContext, BackendInterface, BackendOption, BackendOptionContext, CompileSpec,
    FreeableBuffer, OptionValue,
};
use std::sync::Arc;

fn int_option(backend: &WebGpuBackend, key: &str) -> i64 {
    let mut options = [BackendOption::new(key, 0).unwrap()];
    backend
        .get_option(&mut BackendOptionContext::default(), &mut options)
        .unwrap();
    match options[0].value() {
        OptionValue::Int(n) => *n,
        other => panic!("{key}: {other:?}"),
    }
}

fn set(backend: &WebGpuBackend, key: &str, value: OptionValue) -> crate::error::Result<()> {
    let option = BackendOption::new(key, value).unwrap();
    backend.set_option(&mut BackendOptionContext::default(), &[option])
}

#[test]
fn the_device_gets_the_adapters_own_limits() {
    let backend = new_backend();
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::None,
        force_fallback_adapter: false,
        compatible_surface: None,
        ..Default::default()
    }))
    .expect("an adapter");
    let a = adapter.limits();
    let expected: [(&str, u64); 12] = [
        ("limits.max_buffer_size", a.max_buffer_size),
        (
            "limits.max_storage_buffer_binding_size",
            a.max_storage_buffer_binding_size,
        ),
        (
            "limits.max_compute_invocations_per_workgroup",
            a.max_compute_invocations_per_workgroup.into(),
        ),
        (
            "limits.max_compute_workgroup_size_x",
            a.max_compute_workgroup_size_x.into(),
        ),
        (
            "limits.max_compute_workgroup_size_y",
            a.max_compute_workgroup_size_y.into(),
        ),
        (
            "limits.max_compute_workgroup_size_z",
            a.max_compute_workgroup_size_z.into(),
        ),
        (
            "limits.max_compute_workgroups_per_dimension",
            a.max_compute_workgroups_per_dimension.into(),
        ),
        (
            "limits.max_compute_workgroup_storage_size",
            a.max_compute_workgroup_storage_size.into(),
        ),
        (
            "limits.min_storage_buffer_offset_alignment",
            a.min_storage_buffer_offset_alignment.into(),
        ),
        (
            "limits.max_storage_buffers_per_shader_stage",
            a.max_storage_buffers_per_shader_stage.into(),
        ),
        (
            "adapter_limits.max_storage_buffer_binding_size",
            a.max_storage_buffer_binding_size,
        ),
        ("adapter_limits.max_buffer_size", a.max_buffer_size),
    ];
    for (key, value) in expected {
        assert_eq!(int_option(&backend, key) as u64, value, "{key}");
    }
    // Not WebGPU's defaults, which a device gets when it asks for nothing: lavapipe's binding
    // limit is the default's 128 MiB, but it allows bigger buffers and more storage buffers.
    let defaults = wgpu::Limits::default();
    assert!(
        a.max_buffer_size > defaults.max_buffer_size
            && a.max_storage_buffers_per_shader_stage
                > defaults.max_storage_buffers_per_shader_stage,
        "lavapipe offers more than the defaults: {a:?}"
    );
    assert_eq!(int_option(&backend, "max_storage_binding_bytes"), 0);
    assert_eq!(int_option(&backend, "max_buffer_bytes"), 0);
}

/// `y = relu(x) + w` over `n` floats, `w` a parameter.
fn program(n: usize) -> Vec<u8> {
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[n]));
    let w = b.param("w", DType::F32, dims(&[n]), "test", "w");
    let r = b.relu(x).unwrap();
    let y = b.add(r, w).unwrap();
    b.output(y);
    b.encode().unwrap()
}

fn init(backend: &WebGpuBackend, n: usize) -> crate::error::Result<()> {
    let provider = MemoryProvider::new();
    provider.insert("test", "w", f32_bytes(&vec![1.0; n]));
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    let handle = pollster::block_on(backend.init(&context, FreeableBuffer::new(program(n)), &[]))?;
    backend.destroy(handle);
    Ok(())
}

#[test]
fn a_forced_binding_cap_takes_effect_at_the_next_init_and_is_validated() {
    let backend = new_backend();
    let adapter_binding = int_option(&backend, "limits.max_storage_buffer_binding_size");
    for bad in [-4, 6, 1] {
        let error = set(&backend, "max_storage_binding_bytes", OptionValue::Int(bad)).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{bad}: {error}");
    }
    let error = set(&backend, "max_buffer_bytes", OptionValue::Bool(true)).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    assert_eq!(
        int_option(&backend, "max_storage_binding_bytes"),
        0,
        "nothing applied"
    );

    let cap = 64 << 10;
    set(&backend, "max_storage_binding_bytes", OptionValue::Int(cap)).unwrap();
    assert_eq!(int_option(&backend, "max_storage_binding_bytes"), cap);
    let generation = int_option(&backend, "device_generation");
    // 16 Ki floats (64 KiB) fit the cap exactly; 16 Ki + 1 do not (activations and parameter).
    init(&backend, 16 << 10).unwrap();
    assert_eq!(int_option(&backend, "device_generation"), generation + 1);
    assert_eq!(
        int_option(&backend, "limits.max_storage_buffer_binding_size"),
        cap
    );
    assert_eq!(
        int_option(&backend, "adapter_limits.max_storage_buffer_binding_size"),
        adapter_binding
    );
    let error = init(&backend, (16 << 10) + 1).unwrap_err();
    assert_eq!(error.code(), ErrorCode::OutOfResources, "{error}");
    assert!(error.message().contains(&cap.to_string()), "{error}");

    // A buffer cap, then both cleared: the adapter's own limits again, the big program fits.
    set(&backend, "max_buffer_bytes", OptionValue::Int(1 << 20)).unwrap();
    init(&backend, 1024).unwrap();
    assert_eq!(int_option(&backend, "limits.max_buffer_size"), 1 << 20);
    set(&backend, "max_storage_binding_bytes", OptionValue::Int(0)).unwrap();
    set(&backend, "max_buffer_bytes", OptionValue::Int(0)).unwrap();
    init(&backend, (16 << 10) + 1).unwrap();
    assert_eq!(
        int_option(&backend, "limits.max_storage_buffer_binding_size"),
        adapter_binding
    );
    assert_eq!(int_option(&backend, "device_generation"), generation + 3);
}

/// A tied Q8_0 table `[700, 64]` (47,600 bytes) under a 16 KiB binding cap: the embedding
/// gather and the linear head that share it run by row ranges (68-byte rows, ranges starting on
/// the device's storage offset alignment: four with 256, three with lavapipe's smaller one),
/// and give the CPU backend's results (oracle; tolerance 1e-4 absolute + relative, the op
/// suite's matmul bound) for one row (GEMV, under both GEMV kernels) and three (tiled). Without
/// the cap the same program runs in one dispatch per op.
#[test]
fn a_weight_larger_than_one_binding_runs_by_row_ranges() {
    use crate::backends::cpu::CpuBackend;
    use crate::evalue::{EValue, Tensor, TensorData};
    use crate::program::BlockFormat;
    use crate::program::ops::Linear;
    use crate::registry::BackendExecutionContext;
    let (vocab, hidden) = (700usize, 64usize);
    let mut table = Vec::new();
    let mut state = 12345u32;
    for block in 0..vocab * hidden / 32 {
        let scale = half::f16::from_f32(0.002 + 0.0001 * (block % 17) as f32);
        table.extend(scale.to_le_bytes());
        for _ in 0..32 {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            table.push((state >> 24) as u8);
        }
    }
    let mut b = ProgramBuilder::new();
    let rows = b.symbol("rows");
    let ids = b.input("ids", DType::I32, vec![rows]);
    let embd = b.param(
        "embd",
        DType::Block(BlockFormat::Q8_0),
        dims(&[vocab, hidden]),
        "test",
        "embd",
    );
    let x = b.gather(embd, ids).unwrap();
    let logits = b
        .push(|out| Linear {
            x,
            weight: embd,
            bias: None,
            out,
        })
        .unwrap();
    b.output(x).output(logits);
    let blob = b.encode().unwrap();
    let provider = MemoryProvider::new();
    provider.insert_described(
        "test",
        "embd",
        table,
        Some("Q8_0".into()),
        Some(vec![vocab as u64, hidden as u64]),
    );
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    let run = |backend: &dyn BackendInterface,
               ids: &[i32],
               specs: &[CompileSpec]|
     -> (Vec<Vec<f32>>, usize) {
        let mut handle =
            pollster::block_on(backend.init(&context, FreeableBuffer::new(blob.clone()), specs))
                .unwrap();
        let input = Tensor::new(vec![ids.len()], TensorData::Int32(ids.to_vec())).unwrap();
        let mut args = vec![EValue::Tensor(input), EValue::None, EValue::None];
        pollster::block_on(backend.execute(
            &BackendExecutionContext::default(),
            &mut handle,
            &mut args,
        ))
        .unwrap();
        let dispatches = WebGpuBackend::stats_of(&handle).map_or(0, |s| s.dispatches);

        backend.destroy(handle);
        let outputs = args[1..]
            .iter()
            .map(|a| a.as_tensor().unwrap().as_f32().unwrap().to_vec())
            .collect();
        (outputs, dispatches)
    };
    let gpu = new_backend();
    let cpu = CpuBackend::new();
    let kernels = ["rows", "workgroup", "subgroup"].map(|k| [CompileSpec::new("gemv_kernel", k)]);
    for (ids, specs) in [&[699][..], &[0, 350, 699][..]]
        .into_iter()
        .flat_map(|ids| kernels.iter().map(move |specs| (ids, specs)))
    {
        let (want, _) = run(&cpu, ids, &[]);
        let (whole, one_each) = run(&gpu, ids, specs);
        assert_eq!(one_each, 2, "one dispatch per op without a cap");
        set(
            &gpu,
            "max_storage_binding_bytes",
            OptionValue::Int(16 << 10),
        )
        .unwrap();
        let (split, dispatches) = run(&gpu, ids, specs);
        set(&gpu, "max_storage_binding_bytes", OptionValue::Int(0)).unwrap();
        let alignment = int_option(&gpu, "limits.min_storage_buffer_offset_alignment") as u64;
        let ranges = crate::backends::webgpu::kernels::row_chunks(vocab, 68, 16 << 10, alignment)
            .unwrap()
            .len();
        assert!(ranges >= 3, "{ranges} row ranges");
        assert_eq!(
            dispatches,
            2 * ranges,
            "{ranges} row ranges for each of the two ops"
        );
        for (name, got) in [("whole", &whole), ("split", &split)] {
            for (output, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.len(), w.len());
                for (i, (a, b)) in g.iter().zip(w).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
                        "{name} {ids:?} {specs:?} output {output}[{i}]: {a} vs cpu {b}"
                    );
                }
            }
        }
    }
}

#[test]
fn row_ranges_start_aligned_and_cover_every_row() {
    use crate::backends::webgpu::kernels::row_chunks;
    assert_eq!(row_chunks(700, 68, 1 << 20, 256).unwrap(), [(0, 700)]);
    assert_eq!(
        row_chunks(700, 68, 16 << 10, 256).unwrap(),
        [(0, 192), (192, 192), (384, 192), (576, 124)]
    );
    // The real Gemma lm_head (680-byte Q8_0 rows) under lavapipe's 128 MiB binding.
    let chunks = row_chunks(262_144, 680, 128 << 20, 256).unwrap();
    assert_eq!(chunks.len(), 2);
    for &(first, rows) in &chunks {
        assert_eq!(first as u64 * 680 % 256, 0);
        assert!(rows as u64 * 680 <= 128 << 20);
    }
    assert_eq!(chunks.iter().map(|c| c.1).sum::<usize>(), 262_144);
    // A row group that cannot fit is refused, not split into misaligned pieces.
    let error = row_chunks(10, 4096, 2048, 256).unwrap_err();
    assert_eq!(error.code(), ErrorCode::OutOfResources);
}

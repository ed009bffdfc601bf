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
    BackendInitContext, BackendInterface, BackendOption, BackendOptionContext, FreeableBuffer,
    OptionValue,
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

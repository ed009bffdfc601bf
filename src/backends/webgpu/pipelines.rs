//! Compiled compute pipelines, cached per device by [`KernelKey`] (kernel + specialisation), so
//! each is compiled once however many programs use it. Every kernel a program can dispatch is
//! compiled before its first execution (at `init`, or in the browser in the background during
//! `init` and awaited by the first `execute`: see `program`); plans never compile.
//!
//! Compilation runs inside a WebGPU validation error scope, so a kernel the device cannot
//! compile is a `NotSupported` error naming the kernel, not a device-wide uncaptured error.

use crate::backends::webgpu::kernels::KernelKey;
use crate::backends::webgpu::kernels::source::source;
use crate::error::{Error, ErrorCode, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A compute pipeline and the layout of its bind group 0.
#[derive(Debug)]
pub(crate) struct Pipeline {
    /// The pipeline.
    pub pipeline: wgpu::ComputePipeline,
    /// Layout of bind group 0: a uniform block, then the kernel's storage buffers.
    pub layout: wgpu::BindGroupLayout,
}

/// The pipelines of one device.
#[derive(Default)]
pub(crate) struct PipelineCache {
    layouts: Mutex<HashMap<u32, wgpu::BindGroupLayout>>,
    pipelines: Mutex<HashMap<KernelKey, Arc<Pipeline>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Inserts are single map operations; a poisoned map is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl PipelineCache {
    /// How many pipelines are compiled.
    pub(crate) fn len(&self) -> usize {
        lock(&self.pipelines).len()
    }

    /// The pipeline for `key`, if compiled.
    pub(crate) fn get(&self, key: &KernelKey) -> Option<Arc<Pipeline>> {
        lock(&self.pipelines).get(key).cloned()
    }

    fn layout(&self, device: &wgpu::Device, storage: u32) -> wgpu::BindGroupLayout {
        lock(&self.layouts)
            .entry(storage)
            .or_insert_with(|| {
                let mut entries = vec![wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                }];
                entries.extend((1..=storage).map(|binding| wgpu::BindGroupLayoutEntry {
                    binding,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only: false },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                }));
                device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some(&format!("uniform + {storage} storage")),
                    entries: &entries,
                })
            })
            .clone()
    }

    fn build(&self, device: &wgpu::Device, key: &KernelKey, wgsl: String) -> Pipeline {
        let label = key.label();
        let layout = self.layout(device, key.storage_bindings());
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(&label),
            source: wgpu::ShaderSource::Wgsl(wgsl.into()),
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(&label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        Pipeline { pipeline, layout }
    }

    /// Compiles whichever of `keys` are not cached yet, each inside its own validation error
    /// scope. Every pipeline is created before any scope is awaited, so the device compiles
    /// them back to back instead of one round trip each.
    ///
    /// # Errors
    /// `NotSupported` naming the first kernel the device refused, with its message; `Internal`
    /// for a kernel whose module is malformed (see `source`).
    pub(crate) async fn compile(&self, device: &wgpu::Device, keys: &[KernelKey]) -> Result<()> {
        let mut pending = Vec::new();
        for key in keys {
            if self.get(key).is_some() || pending.iter().any(|(k, _, _)| k == key) {
                continue;
            }
            let wgsl = source(key)?;
            let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
            let pipeline = self.build(device, key, wgsl);
            pending.push((key.clone(), pipeline, scope.pop()));
        }
        let (built, checks): (Vec<_>, Vec<_>) =
            pending.into_iter().map(|(k, p, c)| ((k, p), c)).unzip();
        let errors = futures_util::future::join_all(checks).await;
        for ((key, _), error) in built.iter().zip(&errors) {
            if let Some(error) = error {
                return Err(Error::new(
                    ErrorCode::NotSupported,
                    format!("this device cannot compile kernel {}: {error}", key.label()),
                ));
            }
        }
        let mut cache = lock(&self.pipelines);
        for (key, pipeline) in built {
            cache.insert(key, Arc::new(pipeline));
        }
        Ok(())
    }

    /// The pipeline for `key`, compiled now if needed, without an error scope (for the small
    /// fixed kernels used from synchronous code; failures reach the device's error record).
    ///
    /// # Errors
    /// `Internal` for a kernel whose module is malformed (see `source`).
    pub(crate) fn get_or_compile_unchecked(
        &self,
        device: &wgpu::Device,
        key: &KernelKey,
    ) -> Result<Arc<Pipeline>> {
        if let Some(pipeline) = self.get(key) {
            return Ok(pipeline);
        }
        let pipeline = Arc::new(self.build(device, key, source(key)?));
        lock(&self.pipelines).insert(key.clone(), pipeline.clone());
        Ok(pipeline)
    }
}

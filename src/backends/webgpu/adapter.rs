//! What the backend tells users about its adapter and device: identity (vendor, architecture,
//! device, description, fallback or not, graphics backend), the limits the kernels depend on,
//! and the optional features it uses, as [`OptionValue`]s under documented `get_option` keys.
//!
//! Natively the identity comes from wgpu's `AdapterInfo` (PCI vendor ids named where known). In
//! the browser wgpu leaves vendor and architecture empty, so they are read from the page's
//! `GPUDevice.adapterInfo` (vendor, architecture, device, description, isFallbackAdapter)
//! through `browser::gpu::adapter_facts` (natively its stub has none).

use crate::browser::gpu::{self, AdapterFacts};
use crate::registry::OptionValue;

/// Identity of the adapter a device came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdapterReport {
    /// Vendor, e.g. `"google"` in Chromium or `"mesa"` natively.
    pub vendor: String,
    /// Architecture, e.g. `"swiftshader"`, or the driver natively (e.g. `"llvmpipe"`).
    pub architecture: String,
    /// Device, e.g. a PCI device id natively.
    pub device: String,
    /// Human-readable description.
    pub description: String,
    /// Whether the adapter is a fallback (software / CPU) adapter.
    pub fallback: bool,
    /// The graphics backend: `"vulkan"`, `"metal"`, `"dx12"`, `"gl"` or `"webgpu"`.
    pub backend: String,
}

fn vendor_name(id: u32) -> Option<&'static str> {
    Some(match id {
        0x1002 => "amd",
        0x10de => "nvidia",
        0x8086 => "intel",
        0x13b5 => "arm",
        0x5143 => "qualcomm",
        0x106b => "apple",
        0x1010 => "imagination",
        0x10005 => "mesa",
        _ => return None,
    })
}

impl AdapterReport {
    /// The report for the adapter behind `device`: the browser's facts where it has them
    /// (`browser::gpu`), wgpu's `AdapterInfo` otherwise.
    pub(crate) fn of(info: &wgpu::AdapterInfo, device: &wgpu::Device) -> Self {
        match gpu::adapter_facts(device) {
            Some(facts) => Self::from_browser(info, facts),
            None => Self::from_info(info),
        }
    }

    /// The report for a native adapter.
    fn from_info(info: &wgpu::AdapterInfo) -> Self {
        Self {
            vendor: vendor_name(info.vendor)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("0x{:04x}", info.vendor)),
            architecture: info.driver.clone(),
            device: format!("0x{:04x}", info.device),
            description: if info.driver_info.is_empty() {
                info.name.clone()
            } else {
                format!("{} ({})", info.name, info.driver_info)
            },
            fallback: info.device_type == wgpu::DeviceType::Cpu,
            backend: info.backend.to_str().to_owned(),
        }
    }

    /// The report for a browser device, from what the browser tells (`GPUDevice.adapterInfo`).
    fn from_browser(info: &wgpu::AdapterInfo, facts: AdapterFacts) -> Self {
        Self {
            vendor: facts.vendor,
            architecture: facts.architecture,
            device: facts.device,
            description: if facts.description.is_empty() {
                info.name.clone()
            } else {
                facts.description
            },
            fallback: facts
                .fallback
                .unwrap_or(info.device_type == wgpu::DeviceType::Cpu),
            backend: "webgpu".to_owned(),
        }
    }
}

/// The `get_option` keys that describe the adapter and device, in documentation order.
pub const ADAPTER_KEYS: [&str; 19] = [
    "adapter.vendor",
    "adapter.architecture",
    "adapter.device",
    "adapter.description",
    "adapter.fallback",
    "adapter.backend",
    "limits.max_buffer_size",
    "limits.max_storage_buffer_binding_size",
    "limits.max_compute_invocations_per_workgroup",
    "limits.max_compute_workgroup_size_x",
    "limits.max_compute_workgroup_size_y",
    "limits.max_compute_workgroup_size_z",
    "limits.max_compute_workgroups_per_dimension",
    "limits.max_compute_workgroup_storage_size",
    "limits.min_storage_buffer_offset_alignment",
    "limits.max_storage_buffers_per_shader_stage",
    "features.shader_f16",
    "features.timestamp_query",
    "features.subgroups",
];

/// The value of adapter/limit/feature `key` for a device, or `None` for another key.
pub(crate) fn adapter_option(
    key: &str,
    report: &AdapterReport,
    limits: &wgpu::Limits,
    features: wgpu::Features,
) -> Option<OptionValue> {
    let int = |v: u64| OptionValue::Int(i64::try_from(v).unwrap_or(i64::MAX));
    Some(match key {
        "adapter.vendor" => OptionValue::String(clip(&report.vendor)),
        "adapter.architecture" => OptionValue::String(clip(&report.architecture)),
        "adapter.device" => OptionValue::String(clip(&report.device)),
        "adapter.description" => OptionValue::String(clip(&report.description)),
        "adapter.fallback" => OptionValue::Bool(report.fallback),
        "adapter.backend" => OptionValue::String(clip(&report.backend)),
        "limits.max_buffer_size" => int(limits.max_buffer_size),
        "limits.max_storage_buffer_binding_size" => int(limits.max_storage_buffer_binding_size),
        "limits.max_compute_invocations_per_workgroup" => {
            int(limits.max_compute_invocations_per_workgroup.into())
        }
        "limits.max_compute_workgroup_size_x" => int(limits.max_compute_workgroup_size_x.into()),
        "limits.max_compute_workgroup_size_y" => int(limits.max_compute_workgroup_size_y.into()),
        "limits.max_compute_workgroup_size_z" => int(limits.max_compute_workgroup_size_z.into()),
        "limits.max_compute_workgroups_per_dimension" => {
            int(limits.max_compute_workgroups_per_dimension.into())
        }
        "limits.max_compute_workgroup_storage_size" => {
            int(limits.max_compute_workgroup_storage_size.into())
        }
        "limits.min_storage_buffer_offset_alignment" => {
            int(limits.min_storage_buffer_offset_alignment.into())
        }
        "limits.max_storage_buffers_per_shader_stage" => {
            int(limits.max_storage_buffers_per_shader_stage.into())
        }
        "features.shader_f16" => OptionValue::Bool(features.contains(wgpu::Features::SHADER_F16)),
        "features.timestamp_query" => {
            OptionValue::Bool(features.contains(wgpu::Features::TIMESTAMP_QUERY))
        }
        "features.subgroups" => OptionValue::Bool(features.contains(wgpu::Features::SUBGROUP)),
        _ => return None,
    })
}

/// `text` cut to the longest option string (255 bytes) at a character boundary.
pub(crate) fn clip(text: &str) -> String {
    let limit = crate::registry::MAX_OPTION_STRING_BYTES;
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_key_has_a_value() {
        let report = AdapterReport::default();
        let limits = wgpu::Limits::default();
        for key in ADAPTER_KEYS {
            assert!(
                adapter_option(key, &report, &limits, wgpu::Features::empty()).is_some(),
                "{key}"
            );
        }
        assert!(
            adapter_option("adapter.nope", &report, &limits, wgpu::Features::empty()).is_none()
        );
    }

    #[test]
    fn long_strings_are_clipped_on_a_char_boundary() {
        let long = "é".repeat(200);
        let clipped = clip(&long);
        assert!(clipped.len() <= 255);
        assert!(long.starts_with(&clipped));
        assert_eq!(vendor_name(0x10de), Some("nvidia"));
    }
}

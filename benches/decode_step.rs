//! Native decode-step benchmark of Gemma 3 270M on the WebGPU backend (Mesa lavapipe on
//! machines without a GPU, or whatever adapter wgpu finds): one token fed at the next position
//! of a growing sequence, the next token chosen greedily on the device (argmax), only its id
//! read back — what `Generator` does per generated token.
//!
//! The model has the real file's shapes and tensor types (`gemma-3-270m-q4_k_m.gguf`, as
//! `npm run setup` fetches it): 18 layers, hidden 640, 4 query heads and 1 key/value head of
//! 256, FFN 2048, vocabulary 262,144; Q8_0 token embedding (also the tied lm_head, 178 MB),
//! Q5_0 / Q8_0 / Q4_K / Q6_K layer weights as llama.cpp's Q4_K_M picks them, F32 norms;
//! 236 tensors, 246.6 MB. The program is the library's own (`models::decoder`, from the file's
//! metadata keys), its weights deterministic random blocks with ordinary scales
//! (`quant::random_blocks`): the time of a step does not depend on what the weights mean.
//! `--gguf PATH` runs the real file instead (after checking that the synthetic tensors match
//! its index name for name, in type, shape and bytes).
//!
//! After a prefill of `--prompt` tokens (16) and 3 warm-up steps, steps are timed one by one:
//! at least `--steps` (32; 20 with `--quick`), then more up to 4x as many within 10 s (none
//! with `--quick`). Reported: the median ms per step with its spread `(max - min) / median`,
//! tokens/s, the weight bytes one step reads (every weight once, the lm_head whole, one
//! embedding row) and the resulting GB/s, the KV-cache bytes read at the median position, the
//! dispatches of one step (`decode_step_dispatches`: fused pairs count once, see the WebGPU
//! backend's `fusion.rs`), and one profiled step's GPU time (timestamp queries, where the
//! adapter has them) summed by op (a fused pair `a+b` under the key `..._a_b_ms`).
//! Run with `cargo bench --bench decode_step` (for a quicker build without LTO:
//! `CARGO_PROFILE_BENCH_LTO=false CARGO_PROFILE_BENCH_CODEGEN_UNITS=16`); `--json FILE` writes
//! the numbers as JSON (`decode_step_*`); `--spec KEY=VALUE` (repeatable) passes a WebGPU
//! compile spec (e.g. `attention_splits=1`, `gemv_kernel=staged`, `fusion=off`), recorded as
//! `decode_step_specs`. Absolute numbers depend on the machine and its load.

#[cfg(not(target_arch = "wasm32"))]
mod common;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use crate::common::{Args, Record, measure, webgpu_backend};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use webdelegate::backends::WebGpuBackend;
    use webdelegate::models::catalog::ProviderCatalog;
    use webdelegate::models::decoder::{
        DecoderConfig, DecoderProgramOptions, DecoderSignature, decoder_program,
    };
    use webdelegate::models::decoder_session::{DecoderSession, GREEDY, LogitRows};
    use webdelegate::params::MemoryProvider;
    use webdelegate::params::formats::gguf::{GgufIndex, GgufValue};
    use webdelegate::program::{self, BlockFormat};
    use webdelegate::quant::{random_blocks, random_bytes};
    use webdelegate::registry::{
        BackendInitContext, BackendInterface, BackendOption, BackendOptionContext, CompileSpec,
        FreeableBuffer, LoadedDelegate, SharedBackend,
    };

    const SCOPE: &str = "gemma-3-270m";
    const VOCAB: u64 = 262_144;
    const WARMUPS: usize = 3;

    /// The metadata keys of the real file that the decoder builder reads.
    fn gemma3_270m_metadata() -> Vec<(String, GgufValue)> {
        let u = |k: &str, v: u32| (format!("gemma3.{k}"), GgufValue::U32(v));
        let f = |k: &str, v: f32| (format!("gemma3.{k}"), GgufValue::F32(v));
        vec![
            (
                "general.architecture".into(),
                GgufValue::String(b"gemma3".to_vec()),
            ),
            u("context_length", 32_768),
            u("embedding_length", 640),
            u("block_count", 18),
            u("feed_forward_length", 2048),
            u("attention.head_count", 4),
            u("attention.head_count_kv", 1),
            u("attention.key_length", 256),
            u("attention.value_length", 256),
            f("attention.layer_norm_rms_epsilon", 1e-6),
            f("rope.freq_base", 1e6),
            u("attention.sliding_window", 512),
        ]
    }

    /// One tensor: name, dtype (`None`: F32), row-major shape.
    type TensorSpec = (String, Option<BlockFormat>, Vec<u64>);

    /// The real file's tensors: llama.cpp's Q4_K_M choices (Q6_K for `attn_v` and `ffn_down`
    /// on the "more bits" layers, fallen back to Q8_0 where a row of 640 is not whole 256-blocks;
    /// Q4_K falls back to Q5_0 likewise).
    fn gemma3_270m_tensors(c: &DecoderConfig) -> Vec<TensorSpec> {
        let n = c.layers;
        let more_bits = |i: u32| i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
        let (hidden, ff, q, kv) = (
            c.hidden,
            c.ff,
            c.heads * c.head_dim,
            c.kv_heads * c.head_dim,
        );
        let mut tensors: Vec<TensorSpec> = vec![
            ("output_norm.weight".into(), None, vec![hidden]),
            (
                "token_embd.weight".into(),
                Some(BlockFormat::Q8_0),
                vec![VOCAB, hidden],
            ),
        ];
        for i in 0..n {
            let (v, down) = if more_bits(i) {
                (BlockFormat::Q8_0, BlockFormat::Q6_K)
            } else {
                (BlockFormat::Q5_0, BlockFormat::Q4_K)
            };
            let layer: [(&str, Option<BlockFormat>, Vec<u64>); 13] = [
                ("attn_k", Some(BlockFormat::Q5_0), vec![kv, hidden]),
                ("attn_k_norm", None, vec![c.head_dim]),
                ("attn_norm", None, vec![hidden]),
                ("attn_output", Some(BlockFormat::Q4_K), vec![hidden, q]),
                ("attn_q", Some(BlockFormat::Q5_0), vec![q, hidden]),
                ("attn_q_norm", None, vec![c.head_dim]),
                ("attn_v", Some(v), vec![kv, hidden]),
                ("ffn_down", Some(down), vec![hidden, ff]),
                ("ffn_gate", Some(BlockFormat::Q5_0), vec![ff, hidden]),
                ("ffn_norm", None, vec![hidden]),
                ("ffn_up", Some(BlockFormat::Q5_0), vec![ff, hidden]),
                ("post_attention_norm", None, vec![hidden]),
                ("post_ffw_norm", None, vec![hidden]),
            ];
            tensors.extend(
                layer
                    .into_iter()
                    .map(|(name, format, shape)| (format!("blk.{i}.{name}.weight"), format, shape)),
            );
        }
        tensors
    }

    fn byte_length((_, format, shape): &TensorSpec) -> u64 {
        match format {
            Some(f) => f.tensor_bytes(shape[0], shape[1]).expect("whole blocks"),
            None => shape.iter().product::<u64>() * 4,
        }
    }

    /// Norm weights near 1 (Gemma's files hold `1 + w`).
    fn norm_values(len: usize, seed: u64) -> Vec<u8> {
        random_bytes(len, seed)
            .into_iter()
            .flat_map(|b| (1.0 + (f32::from(b) - 128.0) / 1024.0).to_le_bytes())
            .collect()
    }

    /// A provider serving `tensors` with synthetic values.
    fn synthetic(tensors: &[TensorSpec]) -> MemoryProvider {
        let provider = MemoryProvider::new();
        for (seed, tensor) in tensors.iter().enumerate() {
            let (name, format, shape) = tensor;
            let len = byte_length(tensor) as usize;
            let (bytes, dtype) = match format {
                Some(f) => (random_blocks(*f, len, seed as u64 + 1), f.name()),
                None => (norm_values(len / 4, seed as u64 + 1), "F32"),
            };
            provider.insert_described(SCOPE, name, bytes, Some(dtype.into()), Some(shape.clone()));
        }
        provider
    }

    /// A provider serving the real file's tensors, after checking the file's config and index
    /// against the synthetic model's.
    fn real(path: &str, config: &DecoderConfig, tensors: &[TensorSpec]) -> MemoryProvider {
        let file = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let header = pollster::block_on(GgufIndex::parse(file.as_slice())).expect("GGUF header");
        let index = header.index();
        let file_config = DecoderConfig::from_gguf(header.metadata()).expect("config");
        assert_eq!(&file_config, config, "{path}: not Gemma 3 270M's config");
        assert_eq!(index.entries().len(), tensors.len(), "{path}: tensor count");
        let provider = MemoryProvider::new();
        for tensor in tensors {
            let (name, format, shape) = tensor;
            let entry = index
                .get(name)
                .unwrap_or_else(|| panic!("{path}: no {name}"));
            let info = index.info(name).expect("info");
            let dtype = format.map_or("F32", BlockFormat::name);
            assert_eq!(info.dtype.as_deref(), Some(dtype), "{name}: dtype");
            assert_eq!(
                info.row_major_shape().as_ref(),
                Some(shape),
                "{name}: shape"
            );
            assert_eq!(entry.length, byte_length(tensor), "{name}: bytes");
            let webdelegate::params::EntryStorage::Data { offset } = entry.storage else {
                panic!("{name}: not stored in the file")
            };
            let at = offset as usize;
            let bytes = file[at..at + entry.length as usize].to_vec();
            provider.insert_described(SCOPE, name, bytes, info.dtype, Some(shape.clone()));
        }
        println!("{path}: its 236 tensors match the synthetic model's; running its weights");
        provider
    }

    /// Bytes of the KV cache one step reads at `position` (each layer's rows in its window).
    fn kv_bytes(c: &DecoderConfig, position: u64) -> u64 {
        let row = c.kv_heads * (c.head_dim + c.value_dim) * 4;
        (0..c.layers)
            .map(|layer| {
                let rows = position + 1;
                let rows = if c.is_global(layer) {
                    rows
                } else {
                    rows.min(u64::from(c.sliding_window))
                };
                rows * row
            })
            .sum()
    }

    fn set_profiling(backend: &WebGpuBackend, on: bool) {
        let option = BackendOption::new("profiling", on).expect("option");
        backend
            .set_option(&mut BackendOptionContext::default(), &[option])
            .expect("profiling");
    }

    pub fn main() {
        let args = Args::from_env();
        let quick = args.flag("--quick");
        let number = |name: &str, default: usize| {
            args.value(name).map_or(default, |v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name} {v}: not a number"))
            })
        };
        let steps = number("--steps", if quick { 20 } else { 32 }).max(1);
        let prompt = number("--prompt", 16).max(1);
        let (max_steps, budget) = if quick {
            (steps, Duration::ZERO)
        } else {
            (steps * 4, Duration::from_secs(10))
        };
        let mut record = Record::new("decode_step", &args);
        let backend = Arc::new(webgpu_backend("decode_step", &args, &mut record));

        let config = DecoderConfig::from_gguf(&gemma3_270m_metadata()).expect("config");
        let tensors = gemma3_270m_tensors(&config);
        let t0 = Instant::now();
        let provider = match args.value("--gguf") {
            Some(path) => real(path, &config, &tensors),
            None => synthetic(&tensors),
        };
        record.set(
            "decode_step_weights",
            args.value("--gguf").map_or("synthetic", |_| "gguf"),
        );
        let file_bytes: u64 = tensors.iter().map(byte_length).sum();
        let row_bytes = BlockFormat::Q8_0.row_bytes(config.hidden).expect("row");
        // Every tensor once (the tied table as the lm_head), plus the embedding row gathered.
        let weight_bytes = file_bytes + row_bytes;
        println!(
            "gemma3 270M shapes: {} tensors, {:.1} MB, made in {:.1} s",
            tensors.len(),
            file_bytes as f64 / 1e6,
            t0.elapsed().as_secs_f64()
        );

        let context = (prompt + WARMUPS + max_steps + 2) as u64;
        let options = DecoderProgramOptions::new(context, false);
        let catalog = ProviderCatalog::new(&provider, SCOPE);
        let program = decoder_program(&config, &catalog, SCOPE, &options).expect("program");
        let signature = DecoderSignature::of(&program).expect("signature");
        let blob = program::encode(&program).expect("encode");
        let init = BackendInitContext::new().with_parameters(Arc::new(provider));
        let t0 = Instant::now();
        let specs: Vec<CompileSpec> = args
            .values("--spec")
            .into_iter()
            .map(|spec| {
                let (key, value) = spec
                    .split_once('=')
                    .unwrap_or_else(|| panic!("--spec {spec}: expected KEY=VALUE"));
                CompileSpec::new(key, value)
            })
            .collect();
        record.set("decode_step_specs", args.values("--spec").join(","));
        let delegate = pollster::block_on(LoadedDelegate::init_with_backend(
            "webgpu",
            Arc::clone(&backend) as SharedBackend,
            FreeableBuffer::new(blob),
            &specs,
            &init,
        ))
        .expect("init");
        let init_s = t0.elapsed().as_secs_f64();
        let mut session = DecoderSession::new(delegate, signature);

        let ids: Vec<u32> = (0..prompt as u32)
            .map(|i| (2 + i * 7919) % VOCAB as u32)
            .collect();
        let t0 = Instant::now();
        let mut next = pollster::block_on(session.feed(&ids, LogitRows::Last, GREEDY))
            .expect("prefill")
            .tokens[0];
        let prefill_s = t0.elapsed().as_secs_f64();
        let first_position = session.position() + WARMUPS as u64;
        let mut step = || {
            next = pollster::block_on(session.feed(&[next], LogitRows::Last, GREEDY))
                .expect("step")
                .tokens[0];
        };
        let t = measure(WARMUPS, steps, max_steps, budget, &mut step);
        let median_position = first_position + t.runs as u64 / 2;
        let kv = kv_bytes(&config, median_position);

        set_profiling(&backend, true);
        step();
        set_profiling(&backend, false);
        let handle = session.delegate().handle().expect("handle");
        let profile = WebGpuBackend::profile_of(handle)
            .expect("profile")
            .expect("profiled");
        let mut by_op: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
        for op in &profile.ops {
            let entry = by_op.entry(op.name).or_default();
            entry.0 += op.gpu_ns.unwrap_or(0);
            entry.1 += op.dispatches;
        }

        let gbps = weight_bytes as f64 / t.median / 1e9;
        println!(
            "init {init_s:.2} s, prefill of {prompt} tokens {:.1} ms",
            prefill_s * 1e3
        );
        println!(
            "decode step: {:.3} ms median ({:.1} tokens/s), spread {:.0}%, {} steps at positions {}..{}",
            t.median * 1e3,
            1.0 / t.median,
            t.spread() * 100.0,
            t.runs,
            first_position,
            first_position + t.runs as u64 - 1
        );
        println!(
            "reads {:.1} MB of weights per step: {gbps:.2} GB/s; plus {:.2} MB of KV cache at position {median_position}",
            weight_bytes as f64 / 1e6,
            kv as f64 / 1e6
        );
        record.set("decode_step_init_s", init_s);
        record.set("decode_step_prefill_tokens", prompt as u64);
        record.set("decode_step_prefill_ms", prefill_s * 1e3);
        record.timing("decode_step", &t);
        record.set("decode_step_tok_s", 1.0 / t.median);
        record.set("decode_step_first_position", first_position);
        record.set("decode_step_weight_bytes", weight_bytes);
        record.set("decode_step_weight_gbps", gbps);
        record.set("decode_step_kv_bytes", kv);
        record.set(
            "decode_step_total_gbps",
            (weight_bytes + kv) as f64 / t.median / 1e9,
        );
        // Dispatches per step, whether or not the adapter can time them.
        let dispatches: usize = by_op.values().map(|v| v.1).sum();
        record.set("decode_step_dispatches", dispatches as u64);
        match profile.total_gpu_ns() {
            Some(total) => {
                println!(
                    "one profiled step (a pass per op): GPU {:.3} ms over {dispatches} dispatches",
                    total as f64 / 1e6
                );
                record.set("decode_step_profiled_gpu_ms", total as f64 / 1e6);
                record.set("decode_step_profiled_dispatches", dispatches as u64);
                // Ops that dispatch nothing (the earlier ops of a fused run, views) are left out.
                let mut ops: Vec<_> = by_op.into_iter().filter(|(_, (_, n))| *n > 0).collect();
                ops.sort_by_key(|(_, (ns, _))| std::cmp::Reverse(*ns));
                let width = ops.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
                for (name, (ns, count)) in ops {
                    println!(
                        "  {name:<width$} {:>9.3} ms {:>5.1}%  {count} dispatches",
                        ns as f64 / 1e6,
                        ns as f64 / total.max(1) as f64 * 100.0
                    );
                    // A fused run's name ("rms_norm+add") as a key: rms_norm_add.
                    let key = name.replace('+', "_");
                    record.set(&format!("decode_step_profiled_{key}_ms"), ns as f64 / 1e6);
                }
            }
            None => println!("the adapter has no timestamp queries: no per-op GPU times"),
        }
    }
}

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    native::main();
}

//! The `.pte` reader and method runtime (`webdelegate::pte`) against real ExecuTorch files
//! (tests/fixtures/pte/real, written by scripts/make-pte-reader-fixtures.py) and files written
//! by the test writer (tests/pte_support), which lays files out as ExecuTorch's serializer does
//! (checked here against the real ones).
//!
//! - Real files: what ExecuTorch 1.5.1 writes parses (methods, operators, delegates, named
//!   data), and a program of portable aten kernels fails to load with `OperatorMissing`.
//! - Hostile files: every malformed header, segment, index, tensor and list is a coded error
//!   naming what is wrong, never a panic; a deterministic mutation test (the in-CI counterpart
//!   of fuzz/fuzz_targets/pte_file.rs) parses, loads and runs thousands of mutants.
//! - The runtime: delegate calls through the process-wide registry (test backends under unique
//!   names: the registry has 16 slots and no unregister), prim ops, jumps, input checks,
//!   delegate output checks and named data reaching `init`.

#![cfg(not(target_arch = "wasm32"))]

mod pte_support;

use pollster::block_on;
use pte_support::{
    Blob, Instr, PROGRAM_SIZE_AT, PteWriter, SEGMENT_BASE_AT, SEGMENT_DATA_SIZE_AT, Value,
    delegate, dtype, dynamic_tensor, patch_u32, patch_u64, read_u64, tensor,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use webdelegate::executorch_schema::verified_program;
use webdelegate::params::{MemoryProvider, SharedProvider};
use webdelegate::pte::{
    MAX_INSTRUCTIONS_PER_EXECUTE, Method, MethodLoadOptions, NAMED_DATA_SCOPE, PteFile,
    TensorSource, ValueSpec,
};
use webdelegate::registry::{
    Backend, BackendExecutionContext, BackendInitContext, BackendInterface, CompileSpec,
    DelegateHandle, FreeableBuffer, LocalBoxFuture, register_backend,
};
use webdelegate::{EValue, Error, ErrorCode, Result, ScalarType, Tensor};

// ---------------------------------------------------------------------------------------------
// Helpers

fn real(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/pte/real/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `bytes` must fail to parse with `code` and a message containing `needle`.
#[track_caller]
fn rejects(bytes: Vec<u8>, code: ErrorCode, needle: &str) {
    match PteFile::parse(bytes) {
        Ok(file) => panic!(
            "parsed, expected {code:?} ({needle}): {:?}",
            file.method_names()
        ),
        Err(e) => {
            assert_eq!(e.code(), code, "{e}");
            assert!(e.message().contains(needle), "{e:?} lacks {needle:?}");
        }
    }
}

/// `writer`'s file must fail to parse (see [`rejects`]).
#[track_caller]
fn rejects_writer(writer: &PteWriter, code: ErrorCode, needle: &str) {
    rejects(writer.build(), code, needle);
}

const SYM_SIZE: (&str, &str) = ("aten::sym_size", "int");
const PRIM_ADD: (&str, &str) = ("executorch_prim::add", "Scalar");

/// The base program: `forward(x: f32[2, 3]) -> f32[2, 3]` computing `n = sym_size(x, 0) + 1`
/// with prim ops, then `delegate(x, n, out)`; a constant, named data `weight`, the blob in a
/// segment, a memory plan.
///
/// Values: 0 x, 1 out, 2 Int(0), 3 Int (sym_size), 4 Int(1), 5 Int (n), 6 f32[3] constant,
/// 7 IntList [2, 4], 8 Bool(true).
fn base(backend_id: &str) -> PteWriter {
    let mut x = tensor(dtype::F32, &[2, 3]);
    x.tensor_mut().allocation = Some((1, 0));
    let mut out = tensor(dtype::F32, &[2, 3]);
    out.tensor_mut().allocation = Some((1, 32));
    let mut constant = tensor(dtype::F32, &[3]);
    constant.tensor_mut().data_buffer_idx = 1;
    let mut writer = PteWriter::new()
        .constant(&[0u8; 12])
        .delegate_blob_in_segment(b"A-blob")
        .named_data("weight", &[1, 2, 3, 4, 5])
        .method(
            "forward",
            vec![
                x,
                out,
                Value::Int(0),
                Value::Int(0),
                Value::Int(1),
                Value::Int(0),
                constant,
                Value::IntList(vec![2, 4]),
                Value::Bool(true),
            ],
            &[0],
            &[1],
            vec![
                Instr::Kernel {
                    op: 0,
                    args: vec![0, 2, 3],
                },
                Instr::Kernel {
                    op: 1,
                    args: vec![3, 4, 5],
                },
                Instr::Delegate {
                    delegate: 0,
                    args: vec![0, 5, 1],
                },
            ],
            &[SYM_SIZE, PRIM_ADD],
            vec![delegate(backend_id, Blob::Segment(1))],
        );
    writer.forward().arena_sizes = vec![0, 64];
    writer
}

/// A one-delegate program `forward(x) -> out` with `delegate(x, out)`, its blob inline.
fn single(backend_id: &str, blob: &[u8], x: Value) -> PteWriter {
    let out = match &x {
        Value::Tensor(decl) => Value::Tensor(decl.clone()),
        _ => tensor(dtype::F32, &[2, 3]),
    };
    PteWriter::new().inline_blob(blob).method(
        "forward",
        vec![x, out],
        &[0],
        &[1],
        vec![Instr::Delegate {
            delegate: 0,
            args: vec![0, 1],
        }],
        &[],
        vec![delegate(backend_id, Blob::Inline(0))],
    )
}

fn parse(writer: &PteWriter) -> PteFile {
    PteFile::parse(writer.build()).expect("the writer's file parses")
}

fn load(file: &PteFile, options: &MethodLoadOptions) -> Result<Method> {
    block_on(Method::load(file, "forward", options))
}

fn f32_tensor(shape: &[usize], start: f32) -> EValue {
    let n: usize = shape.iter().product();
    EValue::Tensor(
        Tensor::from_f32(shape.to_vec(), (0..n).map(|i| start + i as f32).collect()).unwrap(),
    )
}

fn floats(value: &EValue) -> Vec<f32> {
    value
        .as_tensor()
        .and_then(Tensor::as_f32)
        .expect("an f32 tensor")
        .to_vec()
}

// ---------------------------------------------------------------------------------------------
// The test backend

/// Records what the runtime hands it. Blob byte 0 picks the behaviour: `A` writes
/// `out = x + (sum of the Int args)`, `I` writes an i32 output (a wrong dtype), `F` fails
/// `init`, `N` fails `execute` when `x[0]` is NaN (else as `A`). Compile spec `read` names a
/// named-data key `init` reads through `context.get_named_data_map()`.
#[derive(Default)]
struct TestBackend {
    inits: AtomicUsize,
    destroys: AtomicUsize,
    blobs: Mutex<Vec<Vec<u8>>>,
    specs: Mutex<Vec<Vec<CompileSpec>>>,
    /// Per `read` spec: the key and what the named data map gave.
    reads: Mutex<Vec<Read>>,
    /// Per `init`: the keys the named data map lists (`None`: no map).
    key_lists: Mutex<Vec<Option<Vec<String>>>>,
    /// Per `execute`: each arg described.
    calls: Mutex<Vec<Vec<String>>>,
}

struct Mode(u8);

/// A named-data read in `init`: the key and its bytes or error code.
type Read = (String, std::result::Result<Vec<u8>, ErrorCode>);

/// Breaks a valid program.
type Breaker = fn(&mut PteWriter);

fn describe(value: &EValue) -> String {
    match value {
        EValue::Tensor(t) => format!("{:?}{:?}", t.dtype(), t.shape()),
        EValue::Int(v) => format!("Int({v})"),
        other => other.tag().to_owned(),
    }
}

impl BackendInterface for TestBackend {
    fn is_available(&self) -> bool {
        true
    }

    fn init<'a>(
        &'a self,
        context: &'a BackendInitContext,
        processed: FreeableBuffer,
        compile_specs: &'a [CompileSpec],
    ) -> LocalBoxFuture<'a, Result<DelegateHandle>> {
        Box::pin(async move {
            self.inits.fetch_add(1, Ordering::SeqCst);
            self.blobs.lock().unwrap().push(processed.data().to_vec());
            self.specs.lock().unwrap().push(compile_specs.to_vec());
            let map = context.get_named_data_map()?;
            let keys = match &map {
                Some(map) => Some(
                    (0..map.get_num_keys()?)
                        .map(|i| map.get_key(i).map(str::to_owned))
                        .collect::<Result<Vec<_>>>()?,
                ),
                None => None,
            };
            self.key_lists.lock().unwrap().push(keys);
            for spec in compile_specs.iter().filter(|s| s.key == "read") {
                let key = String::from_utf8(spec.value.clone()).unwrap();
                let read = match &map {
                    Some(map) => map
                        .get_data(&key)
                        .await
                        .map(|b| b.data().to_vec())
                        .map_err(|e| e.code()),
                    None => Err(ErrorCode::NotFound),
                };
                self.reads.lock().unwrap().push((key, read));
            }
            match processed.data().first() {
                Some(b'F') => Err(Error::new(
                    ErrorCode::DelegateInvalidCompatibility,
                    "init refused",
                )),
                Some(&mode) => Ok(DelegateHandle::new(Mode(mode))),
                None => Err(Error::invalid_program("empty blob")),
            }
        })
    }

    fn execute<'a>(
        &'a self,
        _context: &'a BackendExecutionContext,
        handle: &'a mut DelegateHandle,
        args: &'a mut [EValue],
    ) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.calls
                .lock()
                .unwrap()
                .push(args.iter().map(describe).collect());
            // Mutants reach here too: refuse what this backend does not take, never panic.
            let refuse = || Error::invalid_argument("not (x: f32 tensor, ..ints, out)");
            let mode = handle.downcast_ref::<Mode>().ok_or_else(refuse)?.0;
            let (out, inputs) = args.split_last_mut().ok_or_else(refuse)?;
            let x = inputs
                .first()
                .and_then(EValue::as_tensor)
                .ok_or_else(refuse)?
                .clone();
            if mode == b'I' {
                *out = EValue::Tensor(Tensor::zeros(ScalarType::Int32, x.shape().to_vec())?);
                return Ok(());
            }
            let values = x.as_f32().ok_or_else(refuse)?;
            if mode == b'N' && values.first().is_some_and(|v| v.is_nan()) {
                return Err(Error::invalid_argument("NaN input"));
            }
            let add: i64 = inputs
                .iter()
                .filter_map(|v| match v {
                    EValue::Int(i) => Some(*i),
                    _ => None,
                })
                .sum();
            let result = values.iter().map(|v| v + add as f32).collect();
            *out = EValue::Tensor(Tensor::from_f32(x.shape().to_vec(), result)?);
            Ok(())
        })
    }

    fn destroy(&self, _handle: DelegateHandle) {
        self.destroys.fetch_add(1, Ordering::SeqCst);
    }
}

/// A fresh test backend registered under `name` (unique per test).
fn register(name: &str) -> Arc<TestBackend> {
    let backend = Arc::new(TestBackend::default());
    register_backend(Backend::new(name, backend.clone())).expect("registers");
    backend
}

// ---------------------------------------------------------------------------------------------
// Real files and the writer's layout

/// The layout ExecuTorch's serializer promises, checked on any file: header fields, segment
/// base, 128-aligned segments ending exactly at the file's end.
fn check_layout(bytes: &[u8]) {
    let header = &bytes[8..12] == b"eh00";
    let root = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let program_len = if header {
        assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), 32);
        let program_size = read_u64(bytes, PROGRAM_SIZE_AT) as usize;
        let base = read_u64(bytes, SEGMENT_BASE_AT) as usize;
        assert_eq!(base, program_size.next_multiple_of(128));
        assert_eq!(
            read_u64(bytes, SEGMENT_DATA_SIZE_AT) as usize,
            bytes.len() - base
        );
        assert!(
            bytes[program_size..base].iter().all(|&b| b == 0),
            "zero padding"
        );
        assert!(root >= 40, "the root moved past the header");
        program_size
    } else {
        bytes.len()
    };
    let program = verified_program(&bytes[..program_len]).unwrap();
    let segments: Vec<_> = program.segments().unwrap().iter().collect();
    let mut end = 0u64;
    for segment in &segments {
        assert_eq!(segment.offset() % 128, 0);
        assert_eq!(segment.offset(), end.next_multiple_of(128));
        end = segment.offset() + segment.size_();
    }
    if header {
        assert_eq!(
            end as usize,
            bytes.len() - read_u64(bytes, SEGMENT_BASE_AT) as usize
        );
    } else {
        assert_eq!(end, 0, "segments without a header are all empty");
    }
    // Upstream's emitter: segment 0 is the constant segment, offsets[0] the placeholder.
    let constants = program.constant_segment().unwrap();
    assert_eq!(constants.segment_index(), 0);
    assert_eq!(constants.offsets().unwrap().get(0), 0);
    assert!(program.constant_buffer().is_none_or(|b| b.is_empty()));
}

#[test]
fn real_and_written_files_share_executorchs_layout() {
    for name in ["linear.pte", "linear_xnnpack.pte", "add.pte"] {
        check_layout(&real(name));
    }
    check_layout(&base("pte-layout").build());
    // No weights and no blob: no segment data, so no header (as `add.pte`).
    let bytes = single("pte-layout", b"A", tensor(dtype::F32, &[2])).build();
    assert_ne!(&bytes[8..12], b"eh00");
    check_layout(&bytes);
}

/// `file`'s programs as the test writer's declarations (the writer re-serializes what the
/// reader understood of a real file).
fn rewrite(file: &PteFile, bytes: &[u8]) -> PteWriter {
    use webdelegate::pte::{Dynamism, Instruction as I, scalar_type_code};
    let mut writer = PteWriter::new();
    for plan in file.methods() {
        let mut values = Vec::new();
        for value in plan.values() {
            values.push(match value {
                ValueSpec::None => Value::Null,
                ValueSpec::Int(v) => Value::Int(*v),
                ValueSpec::Bool(v) => Value::Bool(*v),
                ValueSpec::Double(v) => Value::Double(*v),
                ValueSpec::String(v) => Value::Str(v.clone()),
                ValueSpec::IntList(v) => Value::IntList(v.iter().map(|&i| i as i64).collect()),
                ValueSpec::DoubleList(v) => Value::DoubleList(v.clone()),
                ValueSpec::BoolList(v) => Value::BoolList(v.clone()),
                ValueSpec::TensorList(v) => {
                    Value::TensorList(v.iter().map(|&i| i as i32).collect())
                }
                ValueSpec::OptionalTensorList(v) => Value::OptionalTensorList(
                    v.iter().map(|i| i.map_or(-1, |i| i as i32)).collect(),
                ),
                ValueSpec::Tensor(t) => {
                    let sizes: Vec<i32> = t.sizes.iter().map(|&d| d as i32).collect();
                    let mut decl = tensor(scalar_type_code(t.dtype), &sizes);
                    let decl_mut = decl.tensor_mut();
                    decl_mut.dynamism = match t.dynamism {
                        Dynamism::Static => 0,
                        Dynamism::Bound => 1,
                        Dynamism::Unbound => 2,
                    };
                    match &t.source {
                        TensorSource::Runtime { placement } => decl_mut.allocation = *placement,
                        TensorSource::Constant(range) => {
                            writer.constants.push(bytes[range.clone()].to_vec());
                            decl_mut.data_buffer_idx = writer.constants.len() as u32;
                        }
                        TensorSource::External(key) => decl_mut.external = Some(key.clone()),
                    }
                    decl
                }
            });
        }
        let mut delegates = Vec::new();
        for d in plan.delegates() {
            let index = writer.next_segment_index();
            writer = writer.delegate_blob_in_segment(&bytes[d.processed.clone()]);
            let mut decl = delegate(&d.id, Blob::Segment(index));
            decl.compile_specs = d
                .compile_specs
                .iter()
                .map(|s| (s.key.clone(), s.value.clone()))
                .collect();
            delegates.push(decl);
        }
        assert_eq!(plan.chains().len(), 1, "the writer writes one chain");
        let i32s = |v: &[usize]| v.iter().map(|&i| i as i32).collect::<Vec<_>>();
        let instructions = plan.chains()[0]
            .iter()
            .map(|i| match i {
                I::Kernel { operator, args } => Instr::Kernel {
                    op: *operator as i32,
                    args: i32s(args),
                },
                I::Delegate { delegate, args } => Instr::Delegate {
                    delegate: *delegate as i32,
                    args: i32s(args),
                },
                I::Move { from, to } => Instr::Move {
                    from: *from as i32,
                    to: *to as i32,
                },
                I::JumpFalse {
                    condition,
                    destination,
                } => Instr::JumpFalse {
                    cond: *condition as i32,
                    dest: *destination as i32,
                },
                I::Free { value } => Instr::Free {
                    value: *value as i32,
                },
            })
            .collect();
        let operators: Vec<(&str, &str)> = plan
            .operators()
            .iter()
            .map(|o| (o.name.as_str(), o.overload.as_str()))
            .collect();
        writer = writer.method(
            plan.name(),
            values,
            &i32s(plan.inputs()),
            &i32s(plan.outputs()),
            instructions,
            &operators,
            delegates,
        );
        writer.methods.last_mut().unwrap().arena_sizes =
            plan.arena_sizes().iter().map(|&s| s as i64).collect();
    }
    // ExecuTorch's order: constants, delegate blobs, then named data.
    for (key, data) in file.named_data() {
        writer = writer.named_data(key, data);
    }
    writer
}

/// A plan with its file ranges replaced by the bytes they hold, to compare across files.
fn comparable(file: &PteFile, bytes: &[u8]) -> Vec<String> {
    file.methods()
        .iter()
        .map(|plan| {
            let values: Vec<String> = plan
                .values()
                .iter()
                .map(|v| match v {
                    ValueSpec::Tensor(t) => match &t.source {
                        TensorSource::Constant(range) => {
                            format!("{:?} {:?} = {:?}", t.dtype, t.sizes, &bytes[range.clone()])
                        }
                        _ => format!("{t:?}"),
                    },
                    other => format!("{other:?}"),
                })
                .collect();
            let delegates: Vec<String> = plan
                .delegates()
                .iter()
                .map(|d| {
                    format!(
                        "{} {:?} {:?}",
                        d.id,
                        &bytes[d.processed.clone()],
                        d.compile_specs
                    )
                })
                .collect();
            format!(
                "{} {values:?} {:?} {:?} {:?} {:?} {delegates:?} {:?}",
                plan.name(),
                plan.inputs(),
                plan.outputs(),
                plan.chains(),
                plan.operators(),
                plan.arena_sizes()
            )
        })
        .chain(file.named_data().map(|(k, v)| format!("{k} = {v:?}")))
        .collect()
}

/// Bytes of the program (flatbuffer and header): the file without its segment data.
fn program_size_of(bytes: &[u8]) -> usize {
    if &bytes[8..12] == b"eh00" {
        read_u64(bytes, PROGRAM_SIZE_AT) as usize
    } else {
        bytes.len()
    }
}

/// `Program.segments` as `(offset, size)`.
fn segment_table(bytes: &[u8]) -> Vec<(u64, u64)> {
    let program = verified_program(&bytes[..program_size_of(bytes)]).unwrap();
    program
        .segments()
        .unwrap()
        .iter()
        .map(|s| (s.offset(), s.size_()))
        .collect()
}

#[test]
fn the_writer_rewrites_real_files_to_files_that_read_the_same() {
    for name in ["linear.pte", "linear_xnnpack.pte", "add.pte"] {
        let bytes = real(name);
        let file = PteFile::parse(bytes.clone()).unwrap();
        let again = rewrite(&file, &bytes).build();
        check_layout(&again);
        let reread = PteFile::parse(again.clone()).unwrap();
        assert_eq!(
            comparable(&reread, &again),
            comparable(&file, &bytes),
            "{name}"
        );
        // The same sections: a header exactly when the original has one, the same segments.
        assert_eq!(&again[8..12] == b"eh00", &bytes[8..12] == b"eh00", "{name}");
        assert_eq!(segment_table(&again), segment_table(&bytes), "{name}");
        // The same segment data, byte for byte (the padding after the program may differ).
        let segment_data =
            |b: &[u8]| b[program_size_of(b).next_multiple_of(128).min(b.len())..].to_vec();
        assert_eq!(segment_data(&again), segment_data(&bytes), "{name}");
    }
}

#[test]
fn real_linear_parses_and_names_its_aten_operators() {
    let bytes = real("linear.pte");
    let file = PteFile::parse(bytes.clone()).unwrap();
    assert_eq!(file.method_names(), ["forward"]);
    let forward = file.method("forward").unwrap();
    let ops: Vec<String> = forward
        .operators()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(ops, ["aten::permute_copy.out", "aten::addmm.out"]);
    assert!(forward.delegates().is_empty());
    assert_eq!((forward.inputs().len(), forward.outputs().len()), (1, 1));
    let ValueSpec::Tensor(x) = &forward.values()[forward.inputs()[0]] else {
        panic!("input is a tensor")
    };
    assert_eq!(
        (x.dtype, x.sizes.as_slice()),
        (ScalarType::Float32, &[2, 4][..])
    );
    // The weight [3, 4] and bias [3] are constants in the constant segment: the seeded
    // Linear(4, 3)'s values, read back from the file.
    let constants: Vec<_> = forward
        .values()
        .iter()
        .filter_map(|v| match v {
            ValueSpec::Tensor(t) => match &t.source {
                TensorSource::Constant(range) => Some((t.sizes.clone(), range.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(constants.len(), 2);
    assert_eq!(constants[0].0, [3, 4]);
    assert_eq!(constants[0].1.len(), 48);
    assert_eq!(constants[1].0, [3]);
    let weight: Vec<f32> = bytes[constants[0].1.clone()]
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(
        weight.iter().all(|w| w.abs() <= 0.5 && *w != 0.0),
        "{weight:?}"
    );

    // The runtime runs no portable kernels: the first aten operator is named.
    let error = load(&file, &MethodLoadOptions::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::OperatorMissing, "{error}");
    assert!(
        error.message().contains("aten::permute_copy.out"),
        "{error}"
    );
}

#[test]
fn real_xnnpack_file_has_one_delegate_and_its_weights_as_named_data() {
    let bytes = real("linear_xnnpack.pte");
    let file = PteFile::parse(bytes.clone()).unwrap();
    let forward = file.method("forward").unwrap();
    assert!(forward.operators().is_empty());
    assert_eq!(forward.delegates().len(), 1);
    let delegate = &forward.delegates()[0];
    assert_eq!(delegate.id, "XnnpackBackend");
    // The blob is XNNPACK's: its own header, magic `XH00` at byte 4.
    let blob = &bytes[delegate.processed.clone()];
    assert_eq!(&blob[4..8], b"XH00");
    let chain = &forward.chains()[0];
    assert!(
        matches!(&chain[..], [webdelegate::pte::Instruction::Delegate { delegate: 0, args }]
        if *args == [forward.inputs(), forward.outputs()].concat())
    );
    // Weight and bias are named data in the .pte itself, keyed by content hash.
    let named: Vec<(String, usize)> = file
        .named_data()
        .map(|(k, b)| (k.to_owned(), b.len()))
        .collect();
    assert_eq!(named.len(), 2);
    assert_eq!(named.iter().map(|n| n.1).collect::<Vec<_>>(), [48, 12]);
    assert!(named.iter().all(|(k, _)| k.len() == 64), "{named:?}");

    // Nobody registered XnnpackBackend here.
    let error = load(&file, &MethodLoadOptions::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound);
    assert!(error.message().contains("\"XnnpackBackend\""), "{error}");
}

#[test]
fn real_weightless_file_without_a_header_parses() {
    // ExecuTorch lists the empty constant segment but writes no header when there is no
    // segment data (this failed with "lists segments but has no extended header").
    let bytes = real("add.pte");
    assert_ne!(&bytes[8..12], b"eh00");
    let file = PteFile::parse(bytes).unwrap();
    let forward = file.method("forward").unwrap();
    assert_eq!(forward.operators()[0].to_string(), "aten::add.out");
    let error = load(&file, &MethodLoadOptions::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::OperatorMissing);
    assert!(error.message().contains("aten::add.out"), "{error}");
}

#[test]
fn written_files_read_back_as_written() {
    let mut writer = base("pte-readback");
    writer.forward().delegates[0].compile_specs = vec![("k".into(), b"v".to_vec())];
    let bytes = writer.build();
    let file = PteFile::parse(bytes.clone()).unwrap();
    let forward = file.method("forward").unwrap();
    assert_eq!(forward.values().len(), 9);
    assert_eq!((forward.inputs(), forward.outputs()), (&[0][..], &[1][..]));
    assert_eq!(forward.instruction_count(), 3);
    assert_eq!(forward.arena_sizes(), [0, 64]);
    assert!(matches!(&forward.values()[7], ValueSpec::IntList(items) if *items == [2, 4]));
    let delegate = &forward.delegates()[0];
    assert_eq!(&bytes[delegate.processed.clone()], b"A-blob");
    assert_eq!(
        delegate.compile_specs,
        [CompileSpec::new("k", b"v".to_vec())]
    );
    let named: Vec<_> = file.named_data().collect();
    assert_eq!(named, [("weight", &[1u8, 2, 3, 4, 5][..])]);
    assert_eq!(file.segment_count(), 3);
    // Constants in the old `constant_buffer` read the same.
    let mut old = base("pte-readback");
    old.raw_constants = true;
    old.constants = vec![(1..=12).collect()];
    let bytes = old.build();
    let file = PteFile::parse(bytes.clone()).unwrap();
    let ValueSpec::Tensor(constant) = &file.method("forward").unwrap().values()[6] else {
        panic!()
    };
    let TensorSource::Constant(range) = &constant.source else {
        panic!()
    };
    assert_eq!(&bytes[range.clone()], (1..=12).collect::<Vec<u8>>());
}

// ---------------------------------------------------------------------------------------------
// Hostile files: the container

#[test]
fn every_truncation_is_an_error() {
    for bytes in [
        base("pte-trunc").build(),
        real("linear_xnnpack.pte"),
        real("add.pte"),
    ] {
        for len in 0..bytes.len() {
            let error = PteFile::parse(bytes[..len].to_vec()).unwrap_err();
            assert_eq!(
                error.code(),
                ErrorCode::InvalidProgram,
                "prefix {len}: {error}"
            );
        }
    }
}

#[test]
fn a_foreign_identifier_is_refused() {
    let mut bytes = base("pte-ident").build();
    bytes[4..8].copy_from_slice(b"ET13");
    rejects(bytes, ErrorCode::InvalidProgram, "ET12");
    rejects(
        b"PK\x03\x04 not a pte at all".to_vec(),
        ErrorCode::InvalidProgram,
        "ET12",
    );
}

#[test]
fn a_bad_extended_header_is_refused() {
    let good = base("pte-header").build();
    let program_size = read_u64(&good, PROGRAM_SIZE_AT);
    let mut short = good.clone();
    patch_u32(&mut short, 12, 16);
    rejects(
        short,
        ErrorCode::InvalidProgram,
        "fewer than its minimum 24",
    );
    let mut huge = good.clone();
    patch_u32(&mut huge, 12, u32::MAX);
    rejects(huge, ErrorCode::InvalidProgram, "truncated");
    // The header alone, cut inside its fields.
    rejects(good[..20].to_vec(), ErrorCode::InvalidProgram, "truncated");

    let mut past = good.clone();
    patch_u64(&mut past, PROGRAM_SIZE_AT, good.len() as u64 + 1);
    rejects(past, ErrorCode::InvalidProgram, "claims a program");
    let mut giant = good.clone();
    patch_u64(&mut giant, PROGRAM_SIZE_AT, u64::MAX);
    rejects(giant, ErrorCode::InvalidProgram, "claims a program");
    let mut tiny = good.clone();
    patch_u64(&mut tiny, PROGRAM_SIZE_AT, 4);
    rejects(tiny, ErrorCode::InvalidProgram, "claims a program");

    let mut inside = good.clone();
    patch_u64(&mut inside, SEGMENT_BASE_AT, program_size - 8);
    rejects(inside, ErrorCode::InvalidProgram, "segment base offset");
    let mut beyond = good.clone();
    patch_u64(&mut beyond, SEGMENT_BASE_AT, good.len() as u64 + 1);
    rejects(beyond, ErrorCode::InvalidProgram, "segment base offset");
    let mut max = good.clone();
    patch_u64(&mut max, SEGMENT_BASE_AT, u64::MAX);
    rejects(max, ErrorCode::InvalidProgram, "segment base offset");
    // Moving the base later pushes the last segment past the end.
    let mut later = good.clone();
    patch_u64(
        &mut later,
        SEGMENT_BASE_AT,
        read_u64(&good, SEGMENT_BASE_AT) + 128,
    );
    rejects(later, ErrorCode::InvalidProgram, "runs past the end");
}

#[test]
fn segments_past_the_file_are_refused() {
    let mut overflow = base("pte-seg");
    overflow.extra_segment_entries = vec![(u64::MAX - 10, 100)];
    rejects_writer(&overflow, ErrorCode::InvalidProgram, "segment 3");
    let mut size_overflow = base("pte-seg");
    size_overflow.extra_segment_entries = vec![(0, u64::MAX)];
    rejects_writer(
        &size_overflow,
        ErrorCode::InvalidProgram,
        "runs past the end",
    );
    let mut past = base("pte-seg");
    let len = past.build().len() as u64;
    past.extra_segment_entries = vec![(len, 1)];
    rejects_writer(&past, ErrorCode::InvalidProgram, "runs past the end");
    // A zero-size segment exactly at the end is fine.
    let mut at_end = base("pte-seg");
    let bytes = at_end.build();
    let end = bytes.len() as u64 - read_u64(&bytes, SEGMENT_BASE_AT);
    at_end.extra_segment_entries = vec![(end, 0)];
    assert_eq!(parse(&at_end).segment_count(), 4);
}

#[test]
fn delegate_blobs_must_exist() {
    for (blob, needle) in [
        (Blob::Segment(9), "SEGMENT 9"),
        (Blob::Inline(0), "INLINE 0"),
        (Blob::Raw(7, 0), "names nothing"),
    ] {
        let mut writer = base("pte-blob");
        writer.forward().delegates[0].blob = blob;
        rejects_writer(&writer, ErrorCode::InvalidProgram, needle);
    }
    let mut no_id = base("pte-blob");
    no_id.forward().delegates[0].id = String::new();
    rejects_writer(&no_id, ErrorCode::InvalidProgram, "has no backend id");
    // An inline blob is found by index.
    let mut inline = base("pte-blob").inline_blob(b"zero").inline_blob(b"one");
    inline.forward().delegates[0].blob = Blob::Inline(1);
    let bytes = inline.build();
    let file = PteFile::parse(bytes.clone()).unwrap();
    assert_eq!(
        &bytes[file.methods()[0].delegates()[0].processed.clone()],
        b"one"
    );
}

#[test]
fn named_data_must_name_a_segment() {
    let mut writer = base("pte-named");
    writer.named_data.push(("missing".into(), 9));
    rejects_writer(&writer, ErrorCode::InvalidProgram, "named data \"missing\"");
}

#[test]
fn two_methods_with_one_name_are_refused() {
    let mut writer = base("pte-twice");
    let copy = writer.methods[0].clone();
    writer.methods.push(copy);
    rejects_writer(
        &writer,
        ErrorCode::InvalidProgram,
        "two methods named \"forward\"",
    );
    writer.methods[1].name = "other".into();
    assert_eq!(parse(&writer).method_names(), ["forward", "other"]);
}

// ---------------------------------------------------------------------------------------------
// Hostile files: the plan

#[test]
fn value_indices_must_exist() {
    let cases: Vec<(Breaker, &str)> = vec![
        (|w| w.forward().inputs = vec![9], "input value index 9"),
        (
            |w| w.forward().inputs = vec![-1],
            "input value index -1 is negative",
        ),
        (
            |w| w.forward().outputs = vec![i32::MAX],
            "output value index",
        ),
        (|w| w.forward().outputs = vec![i32::MIN], "is negative"),
        (
            |w| {
                w.forward().instructions[2] = Instr::Delegate {
                    delegate: 0,
                    args: vec![0, 9],
                }
            },
            "instruction 2: argument value index 9",
        ),
        (
            |w| {
                w.forward().instructions[0] = Instr::Kernel {
                    op: 0,
                    args: vec![-3],
                }
            },
            "argument value index -3 is negative",
        ),
        (
            |w| w.forward().values[7] = Value::IntList(vec![2, 99]),
            "list item 99",
        ),
        (
            |w| w.forward().values[7] = Value::IntList(vec![-1]),
            "list item -1",
        ),
        (
            |w| w.forward().values[7] = Value::TensorList(vec![0, 12]),
            "tensor list item 12",
        ),
        (
            |w| w.forward().values[7] = Value::OptionalTensorList(vec![0, 9]),
            "optional tensor list item 9",
        ),
        (
            |w| {
                w.forward()
                    .instructions
                    .push(Instr::Move { from: 0, to: 9 })
            },
            "move destination",
        ),
        (
            |w| {
                w.forward()
                    .instructions
                    .push(Instr::Move { from: -1, to: 0 })
            },
            "move source",
        ),
        (
            |w| w.forward().instructions.push(Instr::Free { value: 9 }),
            "freed value",
        ),
        (
            |w| {
                w.forward()
                    .instructions
                    .push(Instr::JumpFalse { cond: 9, dest: 0 })
            },
            "jump condition",
        ),
    ];
    for (break_it, needle) in cases {
        let mut writer = base("pte-index");
        break_it(&mut writer);
        rejects_writer(&writer, ErrorCode::InvalidProgram, needle);
    }
}

#[test]
fn lists_must_name_the_right_kind() {
    let mut int_list = base("pte-lists");
    int_list.forward().values[7] = Value::IntList(vec![2, 0]);
    rejects_writer(
        &int_list,
        ErrorCode::InvalidProgram,
        "its ListInt names value 0, a Tensor",
    );
    let mut tensor_list = base("pte-lists");
    tensor_list.forward().values[7] = Value::TensorList(vec![0, 2]);
    rejects_writer(
        &tensor_list,
        ErrorCode::InvalidProgram,
        "names value 2, a Int",
    );
    // Optional tensor lists take tensors, None values and negative (absent) items.
    let mut optional = base("pte-lists");
    optional.forward().values.push(Value::None);
    optional.forward().values[7] = Value::OptionalTensorList(vec![0, -1, 9]);
    let file = parse(&optional);
    assert!(matches!(&file.methods()[0].values()[7],
        ValueSpec::OptionalTensorList(items) if *items == [Some(0), None, Some(9)]));
}

#[test]
fn operator_delegate_and_jump_targets_must_exist() {
    let mut op = base("pte-targets");
    op.forward().instructions[0] = Instr::Kernel {
        op: 2,
        args: vec![0, 2, 3],
    };
    rejects_writer(&op, ErrorCode::InvalidProgram, "operator index 2");
    let mut negative_op = base("pte-targets");
    negative_op.forward().instructions[0] = Instr::Kernel {
        op: -1,
        args: vec![0, 2, 3],
    };
    rejects_writer(&negative_op, ErrorCode::InvalidProgram, "operator index -1");
    let mut delegate_index = base("pte-targets");
    delegate_index.forward().instructions[2] = Instr::Delegate {
        delegate: 1,
        args: vec![0, 1],
    };
    rejects_writer(
        &delegate_index,
        ErrorCode::InvalidProgram,
        "delegate index 1",
    );
    // The chain's length ends the chain; one past it is refused.
    let mut jump = base("pte-targets");
    jump.forward()
        .instructions
        .push(Instr::JumpFalse { cond: 8, dest: 4 });
    assert!(PteFile::parse(jump.build()).is_ok());
    jump.forward().instructions[3] = Instr::JumpFalse { cond: 8, dest: 5 };
    rejects_writer(&jump, ErrorCode::InvalidProgram, "jump destination 5");
    jump.forward().instructions[3] = Instr::JumpFalse { cond: 8, dest: -1 };
    rejects_writer(
        &jump,
        ErrorCode::InvalidProgram,
        "jump destination -1 is negative",
    );
}

#[test]
fn malformed_tensors_are_refused() {
    let cases: Vec<(Breaker, ErrorCode, &str)> = vec![
        (
            |w| w.forward().values[0].tensor_mut().sizes = vec![2, -3],
            ErrorCode::InvalidProgram,
            "tensor size -3 is negative",
        ),
        (
            |w| w.forward().values[0].tensor_mut().sizes = vec![i32::MAX; 4],
            ErrorCode::InvalidProgram,
            "overflows",
        ),
        (
            |w| w.forward().values[0].tensor_mut().dim_order = Some(vec![1, 0]),
            ErrorCode::NotSupported,
            "dim order [1, 0]",
        ),
        (
            |w| w.forward().values[0].tensor_mut().dim_order = Some(vec![0]),
            ErrorCode::NotSupported,
            "dim order [0]",
        ),
        (
            |w| w.forward().values[0].tensor_mut().scalar_type = dtype::F16,
            ErrorCode::NotSupported,
            "tensors of HALF are not supported",
        ),
        (
            |w| w.forward().values[0].tensor_mut().scalar_type = 99,
            ErrorCode::NotSupported,
            "scalar type 99",
        ),
        (
            |w| w.forward().values[0].tensor_mut().storage_offset = 4,
            ErrorCode::NotSupported,
            "storage offset 4",
        ),
        (
            |w| w.forward().values[0].tensor_mut().dynamism = 3,
            ErrorCode::InvalidProgram,
            "shape dynamism 3",
        ),
        // Planned: 24 bytes at 48 in a 64-byte arena; arena 2 does not exist.
        (
            |w| w.forward().values[1].tensor_mut().allocation = Some((1, 48)),
            ErrorCode::InvalidProgram,
            "runs past arena 1 of 64 bytes",
        ),
        (
            |w| w.forward().values[1].tensor_mut().allocation = Some((1, u64::MAX - 4)),
            ErrorCode::InvalidProgram,
            "runs past arena",
        ),
        (
            |w| w.forward().values[1].tensor_mut().allocation = Some((2, 0)),
            ErrorCode::InvalidProgram,
            "memory id",
        ),
        (
            |w| w.forward().arena_sizes = vec![0, -64],
            ErrorCode::InvalidProgram,
            "arena size is negative",
        ),
        // Constant 1 holds 12 bytes; 16 do not fit, constant 2 does not exist.
        (
            |w| w.forward().values[6].tensor_mut().sizes = vec![4],
            ErrorCode::InvalidProgram,
            "constant 1 of 16 bytes",
        ),
        (
            |w| w.forward().values[6].tensor_mut().data_buffer_idx = 2,
            ErrorCode::InvalidProgram,
            "constant 2",
        ),
    ];
    for (at, (break_it, code, needle)) in cases.into_iter().enumerate() {
        let mut writer = base("pte-tensor");
        break_it(&mut writer);
        match PteFile::parse(writer.build()) {
            Ok(_) => panic!("case {at} parsed, expected {code:?} ({needle})"),
            Err(e) => assert!(
                e.code() == code && e.message().contains(needle),
                "case {at}: {e}"
            ),
        }
    }
    // The same constant checks against the old `constant_buffer`.
    let mut old = base("pte-tensor");
    old.raw_constants = true;
    old.forward().values[6].tensor_mut().sizes = vec![4];
    rejects_writer(&old, ErrorCode::InvalidProgram, "constant 1 of 16 bytes");
    old.forward().values[6].tensor_mut().sizes = vec![3];
    old.forward().values[6].tensor_mut().data_buffer_idx = 2;
    rejects_writer(&old, ErrorCode::InvalidProgram, "constant 2");
    // A value without a union tag is None.
    let mut empty = base("pte-tensor");
    empty.forward().values.push(Value::None);
    assert!(matches!(
        parse(&empty).methods()[0].values()[9],
        ValueSpec::None
    ));
    // An EXTERNAL tensor parses (its key kept) but only delegates read named data here.
    let mut external = base("pte-tensor");
    external.forward().values[6].tensor_mut().external = Some("w".into());
    let file = parse(&external);
    let ValueSpec::Tensor(t) = &file.methods()[0].values()[6] else {
        panic!()
    };
    assert_eq!(t.source, TensorSource::External("w".into()));
    let error = load(&file, &MethodLoadOptions::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotSupported);
    assert!(
        error
            .message()
            .contains("reads tensor \"w\" from named data"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// The method runtime

#[test]
fn a_delegate_call_gets_inputs_then_outputs_and_its_outputs_come_back() {
    let backend = register("pte-test-args");
    let mut writer = base("pte-test-args");
    writer.forward().delegates[0].compile_specs = vec![("mode".into(), b"fast".to_vec())];
    let file = parse(&writer);
    let mut method = load(&file, &MethodLoadOptions::default()).unwrap();
    assert_eq!(backend.inits.load(Ordering::SeqCst), 1);
    assert_eq!(backend.blobs.lock().unwrap()[0], b"A-blob");
    assert_eq!(
        backend.specs.lock().unwrap()[0],
        [CompileSpec::new("mode", b"fast".to_vec())]
    );

    // n = sym_size(x, 0) + 1 = 3, out = x + 3.
    let outputs = block_on(method.execute(vec![f32_tensor(&[2, 3], 0.0)])).unwrap();
    assert_eq!(outputs.len(), 1);
    assert_eq!(floats(&outputs[0]), [3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    // The output slot holds nothing before the call (values are owned, not planned).
    assert_eq!(
        backend.calls.lock().unwrap()[0],
        ["Float32[2, 3]", "Int(3)", "None"]
    );

    // Again: the same answer (no state leaks between executions).
    let again = block_on(method.execute(vec![f32_tensor(&[2, 3], 10.0)])).unwrap();
    assert_eq!(floats(&again[0])[0], 13.0);
    drop(method);
    assert_eq!(backend.destroys.load(Ordering::SeqCst), 1);
}

#[test]
fn prim_ops_read_the_runtime_shape_of_a_dynamic_input() {
    let backend = register("pte-test-prim");
    let mut writer = base("pte-test-prim");
    writer.forward().values[0] = dynamic_tensor(dtype::F32, &[8, 3], 1);
    writer.forward().values[1] = dynamic_tensor(dtype::F32, &[8, 3], 1);
    // n = sym_size(x, 0) * sym_size(x, 0) via a second prim op into value 5.
    writer
        .forward()
        .operators
        .push(("executorch_prim::mul".into(), "Scalar".into()));
    writer.forward().instructions[1] = Instr::Kernel {
        op: 2,
        args: vec![3, 3, 5],
    };
    let file = parse(&writer);
    let mut method = load(&file, &MethodLoadOptions::default()).unwrap();
    let out = block_on(method.execute(vec![f32_tensor(&[5, 3], 0.0)])).unwrap();
    assert_eq!(floats(&out[0])[0], 25.0);
    assert_eq!(backend.calls.lock().unwrap()[0][1], "Int(25)");
    // A prim op's bad operand (dim 7 of a rank-2 tensor) is InvalidArgument at execute.
    let mut bad_dim = base("pte-test-prim");
    bad_dim.forward().values[2] = Value::Int(7);
    let file = parse(&bad_dim);
    let mut method = load(&file, &MethodLoadOptions::default()).unwrap();
    let error = block_on(method.execute(vec![f32_tensor(&[2, 3], 0.0)])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    assert!(
        error.message().contains("dim 7 of a rank-2 tensor"),
        "{error}"
    );
}

#[test]
fn operators_that_are_not_prim_ops_fail_to_load_before_any_init() {
    let backend = register("pte-test-ops");
    let mut writer = base("pte-test-ops");
    writer.forward().operators[1] = ("aten::add".into(), "out".into());
    let error = load(&parse(&writer), &MethodLoadOptions::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::OperatorMissing);
    assert!(error.message().contains("aten::add.out"), "{error}");
    assert_eq!(backend.inits.load(Ordering::SeqCst), 0);
    // A prim op called with the wrong number of values.
    let mut arity = base("pte-test-ops");
    arity.forward().instructions[1] = Instr::Kernel {
        op: 1,
        args: vec![3, 5],
    };
    let error = load(&parse(&arity), &MethodLoadOptions::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidProgram);
    assert!(
        error
            .message()
            .contains("takes 3 values, the call passes 2"),
        "{error}"
    );
}

#[test]
fn an_unregistered_delegate_id_is_not_found_and_can_be_mapped() {
    let backend = register("pte-test-mapped");
    let file = parse(&base("pte-test-nobody-registered-this"));
    let error = load(&file, &MethodLoadOptions::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound);
    assert!(
        error
            .message()
            .contains("\"pte-test-nobody-registered-this\""),
        "{error}"
    );

    let mapped = MethodLoadOptions {
        backends: vec![(
            "pte-test-nobody-registered-this".into(),
            "pte-test-mapped".into(),
        )],
        ..Default::default()
    };
    let mut method = load(&file, &mapped).unwrap();
    assert_eq!(method.delegates()[0].backend_id(), "pte-test-mapped");
    block_on(method.execute(vec![f32_tensor(&[2, 3], 0.0)])).unwrap();
    assert_eq!(backend.calls.lock().unwrap().len(), 1);

    let to_nobody = MethodLoadOptions {
        backends: vec![(
            "pte-test-nobody-registered-this".into(),
            "pte-test-ghost".into(),
        )],
        ..Default::default()
    };
    let error = load(&file, &to_nobody).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound);
    assert!(
        error
            .message()
            .contains("mapped to backend \"pte-test-ghost\""),
        "{error}"
    );
}

#[test]
fn a_failed_init_destroys_the_delegates_before_it() {
    let backend = register("pte-test-destroy");
    let mut writer = base("pte-test-destroy")
        .inline_blob(b"A-second")
        .inline_blob(b"F-third");
    let ok = writer.forward().delegates[0].clone();
    let mut second = ok.clone();
    second.blob = Blob::Inline(0);
    let mut third = ok.clone();
    third.blob = Blob::Inline(1);
    writer.forward().delegates = vec![ok, second, third];
    let error = load(&parse(&writer), &MethodLoadOptions::default()).unwrap_err();
    assert_eq!(error.code(), ErrorCode::DelegateInvalidCompatibility);
    assert!(error.message().contains("delegate 2"), "{error}");
    assert_eq!(backend.inits.load(Ordering::SeqCst), 3);
    assert_eq!(backend.destroys.load(Ordering::SeqCst), 2);
}

#[test]
fn jumps_need_a_bool() {
    register("pte-test-jump");
    // JumpFalse on value 2 (an Int).
    let mut writer = base("pte-test-jump");
    writer
        .forward()
        .instructions
        .insert(0, Instr::JumpFalse { cond: 2, dest: 1 });
    let mut method = load(&parse(&writer), &MethodLoadOptions::default()).unwrap();
    let error = block_on(method.execute(vec![f32_tensor(&[2, 3], 0.0)])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidProgram);
    assert!(error.message().contains("a Int, not a Bool"), "{error}");
    // A false condition skips the rest: the output was never produced.
    let mut skip = base("pte-test-jump");
    skip.forward().values[8] = Value::Bool(false);
    skip.forward()
        .instructions
        .insert(0, Instr::JumpFalse { cond: 8, dest: 4 });
    let mut method = load(&parse(&skip), &MethodLoadOptions::default()).unwrap();
    let error = block_on(method.execute(vec![f32_tensor(&[2, 3], 0.0)])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidState);
    assert!(error.message().contains("never produced"), "{error}");
}

#[test]
fn a_jump_loop_ends_at_the_instruction_cap() {
    // Instruction 0 jumps to itself forever.
    let writer = PteWriter::new().method(
        "forward",
        vec![Value::Bool(false)],
        &[],
        &[],
        vec![Instr::JumpFalse { cond: 0, dest: 0 }],
        &[],
        vec![],
    );
    let mut method = load(&parse(&writer), &MethodLoadOptions::default()).unwrap();
    let started = std::time::Instant::now();
    let error = block_on(method.execute(vec![])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidProgram);
    assert!(
        error
            .message()
            .contains(&MAX_INSTRUCTIONS_PER_EXECUTE.to_string()),
        "{error}"
    );
    eprintln!(
        "{MAX_INSTRUCTIONS_PER_EXECUTE} instructions in {:?}",
        started.elapsed()
    );
}

#[test]
fn inputs_are_checked_against_their_declarations() {
    register("pte-test-inputs");
    let mut writer = base("pte-test-inputs");
    // Input 0 static [2, 3]; add input 1: dynamic bound [4, 3] (value 9), passed to nothing.
    writer
        .forward()
        .values
        .push(dynamic_tensor(dtype::F32, &[4, 3], 1));
    writer
        .forward()
        .values
        .push(dynamic_tensor(dtype::I64, &[2], 2));
    writer.forward().inputs = vec![0, 9, 10];
    let mut method = load(&parse(&writer), &MethodLoadOptions::default()).unwrap();
    let run = |method: &mut Method, inputs: Vec<EValue>| block_on(method.execute(inputs));
    let i64s = |n: usize| EValue::Tensor(Tensor::zeros(ScalarType::Int64, vec![n]).unwrap());
    let good = || vec![f32_tensor(&[2, 3], 0.0), f32_tensor(&[4, 3], 0.0), i64s(2)];
    run(&mut method, good()).unwrap();
    // Bound: smaller extents pass, larger or another rank fail; unbound takes any extent.
    run(
        &mut method,
        vec![f32_tensor(&[2, 3], 0.0), f32_tensor(&[1, 3], 0.0), i64s(9)],
    )
    .unwrap();
    let bad: Vec<(Vec<EValue>, &str)> = vec![
        (vec![f32_tensor(&[2, 3], 0.0)], "takes 3 inputs, got 1"),
        (
            vec![f32_tensor(&[2, 4], 0.0), f32_tensor(&[4, 3], 0.0), i64s(2)],
            "input 0: shape [2, 4]",
        ),
        (
            vec![f32_tensor(&[1, 3], 0.0), f32_tensor(&[4, 3], 0.0), i64s(2)],
            "declared static",
        ),
        (
            vec![f32_tensor(&[2, 3], 0.0), f32_tensor(&[5, 3], 0.0), i64s(2)],
            "dynamic_bound",
        ),
        (
            vec![f32_tensor(&[2, 3], 0.0), f32_tensor(&[4], 0.0), i64s(2)],
            "input 1: shape [4]",
        ),
        (
            vec![good()[0].clone(), good()[1].clone(), f32_tensor(&[2], 0.0)],
            "Int64",
        ),
        (
            vec![EValue::Int(1), good()[1].clone(), i64s(2)],
            "expected a Tensor, got a Int",
        ),
        (
            vec![i64s(6), good()[1].clone(), i64s(2)],
            "expected a Float32 tensor",
        ),
    ];
    for (inputs, needle) in bad {
        let error = run(&mut method, inputs).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
        assert!(
            error.message().contains(needle),
            "{error:?} lacks {needle:?}"
        );
        // Still usable.
        run(&mut method, good()).unwrap();
    }
}

#[test]
fn a_backend_output_of_the_wrong_dtype_is_refused_and_errors_leave_the_method_usable() {
    register("pte-test-outputs");
    let writer = single("pte-test-outputs", b"I", tensor(dtype::F32, &[2, 3]));
    let mut method = load(&parse(&writer), &MethodLoadOptions::default()).unwrap();
    let error = block_on(method.execute(vec![f32_tensor(&[2, 3], 0.0)])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    assert!(
        error.message().contains("Int32 tensor of shape [2, 3]"),
        "{error}"
    );

    // A backend's execute error is passed through, naming the delegate; the next call works.
    let writer = single("pte-test-outputs", b"N", tensor(dtype::F32, &[2, 3]));
    let mut method = load(&parse(&writer), &MethodLoadOptions::default()).unwrap();
    let mut nan = f32_tensor(&[2, 3], 0.0);
    nan.as_tensor_mut().unwrap().as_f32_mut().unwrap()[0] = f32::NAN;
    let error = block_on(method.execute(vec![nan])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument);
    assert!(
        error
            .message()
            .contains("delegate 0 (pte-test-outputs): NaN input"),
        "{error}"
    );
    let out = block_on(method.execute(vec![f32_tensor(&[2, 3], 1.0)])).unwrap();
    assert_eq!(floats(&out[0]), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn named_data_of_the_pte_and_an_external_provider_reach_init() {
    let backend = register("pte-test-named");
    let mut writer = base("pte-test-named").named_data("shared", b"from the pte");
    writer.forward().delegates[0].compile_specs = ["weight", "external", "shared", "absent"]
        .iter()
        .map(|key| ("read".to_owned(), key.as_bytes().to_vec()))
        .collect();
    let file = parse(&writer);

    // The .pte alone: its keys; an external-only key is NotFound (no .ptd given).
    let _method = load(&file, &MethodLoadOptions::default()).unwrap();
    let reads = std::mem::take(&mut *backend.reads.lock().unwrap());
    assert_eq!(reads[0], ("weight".into(), Ok(vec![1, 2, 3, 4, 5])));
    assert_eq!(reads[1], ("external".into(), Err(ErrorCode::NotFound)));
    assert_eq!(reads[2], ("shared".into(), Ok(b"from the pte".to_vec())));

    // With a .ptd: its keys too; the .pte wins a key both hold; unknown keys are NotFound.
    let external = Arc::new(MemoryProvider::new());
    external.insert(NAMED_DATA_SCOPE, "external", b"from the ptd".to_vec());
    external.insert(NAMED_DATA_SCOPE, "shared", b"the ptd's copy".to_vec());
    let options = MethodLoadOptions {
        external_data: Some(external as SharedProvider),
        ..Default::default()
    };
    let _method = load(&file, &options).unwrap();
    let reads = std::mem::take(&mut *backend.reads.lock().unwrap());
    assert_eq!(reads[0], ("weight".into(), Ok(vec![1, 2, 3, 4, 5])));
    assert_eq!(reads[1], ("external".into(), Ok(b"from the ptd".to_vec())));
    assert_eq!(reads[2], ("shared".into(), Ok(b"from the pte".to_vec())));
    assert_eq!(reads[3], ("absent".into(), Err(ErrorCode::NotFound)));
    let keys = backend.key_lists.lock().unwrap()[1].clone().unwrap();
    assert_eq!(keys, ["weight", "shared", "external"]);
}

#[test]
fn a_pte_without_named_data_still_gives_init_a_named_data_map() {
    // A backend that always asks for the map (as the JavaScript bridge does) must get an empty
    // one, not NotFound (this failed before the scope was always added).
    let backend = register("pte-test-no-named");
    let writer = single("pte-test-no-named", b"A", tensor(dtype::F32, &[2, 3]));
    let _method = load(&parse(&writer), &MethodLoadOptions::default()).unwrap();
    assert_eq!(backend.key_lists.lock().unwrap()[0], Some(vec![]));
}

// ---------------------------------------------------------------------------------------------
// Mutation

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn mutate(rng: &mut Rng, original: &[u8]) -> Vec<u8> {
    const INTERESTING: [u64; 12] = [
        0,
        1,
        2,
        7,
        8,
        24,
        32,
        127,
        128,
        0x7fff_ffff,
        0xffff_ffff,
        u64::MAX,
    ];
    let mut bytes = original.to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(bytes.len() as u64) as usize;
        match rng.below(7) {
            0 => {
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
            }
            1 => {
                if let Some(b) = bytes.get_mut(at) {
                    *b = rng.next() as u8;
                }
            }
            2 | 3 => {
                let value = match rng.below(3) {
                    0 => bytes.len() as u64 + rng.below(3) - 1,
                    _ => INTERESTING[rng.below(INTERESTING.len() as u64) as usize],
                };
                let width = [1, 2, 4, 8][rng.below(4) as usize];
                for (offset, byte) in value.to_le_bytes().iter().take(width).enumerate() {
                    if let Some(slot) = bytes.get_mut(at + offset) {
                        *slot = *byte;
                    }
                }
            }
            4 => bytes.truncate(rng.below(bytes.len() as u64 + 1) as usize),
            5 => {
                let end = (at + 1 + rng.below(8) as usize).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
            _ => {
                let insert: Vec<u8> = (0..=rng.below(8)).map(|_| rng.next() as u8).collect();
                let at = at.min(bytes.len());
                bytes.splice(at..at, insert);
            }
        }
    }
    bytes
}

/// What a parsed file promises (module docs of `pte::plan`), checked from outside.
fn check_parsed(file: &PteFile) {
    assert!(
        file.named_data()
            .all(|(_, bytes)| bytes.len() <= file.len())
    );
    for plan in file.methods() {
        let count = plan.values().len();
        assert!(
            plan.inputs()
                .iter()
                .chain(plan.outputs())
                .all(|&i| i < count)
        );
        for value in plan.values() {
            match value {
                ValueSpec::IntList(items) => {
                    assert!(
                        items
                            .iter()
                            .all(|&i| matches!(plan.values()[i], ValueSpec::Int(_)))
                    )
                }
                ValueSpec::TensorList(items) => assert!(items.iter().all(|&i| i < count)),
                ValueSpec::Tensor(t) => {
                    if let TensorSource::Constant(range) = &t.source {
                        assert!(range.end <= file.len() && range.len() == t.nbytes());
                    }
                }
                _ => {}
            }
        }
        for delegate in plan.delegates() {
            assert!(delegate.processed.start <= delegate.processed.end);
            assert!(delegate.processed.end <= file.len());
        }
        for chain in plan.chains() {
            for instruction in chain {
                use webdelegate::pte::Instruction as I;
                match instruction {
                    I::Kernel { operator, args } => {
                        assert!(*operator < plan.operators().len());
                        assert!(args.iter().all(|&a| a < count));
                    }
                    I::Delegate { delegate, args } => {
                        assert!(*delegate < plan.delegates().len());
                        assert!(args.iter().all(|&a| a < count));
                    }
                    I::Move { from, to } => assert!(*from < count && *to < count),
                    I::JumpFalse {
                        condition,
                        destination,
                    } => {
                        assert!(*condition < count && *destination <= chain.len())
                    }
                    I::Free { value } => assert!(*value < count),
                }
            }
        }
    }
}

/// Loads and runs every method of a parsed mutant: delegates go to the test backend (the
/// mutated ids are mapped to it), inputs are zeros of the declared sizes.
fn exercise(file: &PteFile) {
    for plan in file.methods() {
        let options = MethodLoadOptions {
            backends: plan
                .delegates()
                .iter()
                .map(|d| (d.id.clone(), "pte-test-mutants".to_owned()))
                .collect(),
            ..Default::default()
        };
        let Ok(mut method) = block_on(Method::load(file, plan.name(), &options)) else {
            continue;
        };
        let inputs: Option<Vec<EValue>> = plan
            .inputs()
            .iter()
            .map(|&i| match &plan.values()[i] {
                ValueSpec::Tensor(t) if t.nbytes() <= 1 << 16 => {
                    Tensor::zeros(t.dtype, t.sizes.clone())
                        .ok()
                        .map(EValue::Tensor)
                }
                ValueSpec::Int(v) => Some(EValue::Int(*v)),
                ValueSpec::Bool(v) => Some(EValue::Bool(*v)),
                ValueSpec::Double(v) => Some(EValue::Double(*v)),
                ValueSpec::None => Some(EValue::None),
                _ => None,
            })
            .collect();
        // Jumps could loop up to the instruction cap: skip those (slow, tested above).
        let jumps = plan
            .chains()
            .iter()
            .flatten()
            .any(|i| matches!(i, webdelegate::pte::Instruction::JumpFalse { .. }));
        if let (Some(inputs), false) = (inputs, jumps) {
            let _ = block_on(method.execute(inputs));
        }
    }
}

#[test]
fn mutants_never_panic() {
    let backend = register("pte-test-mutants");
    let seeds = [
        base("pte-test-mutants").build(),
        real("linear.pte"),
        real("linear_xnnpack.pte"),
        real("add.pte"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut parsed, mut failed) = (0, 0);
    for seed in &seeds {
        for _ in 0..3000 {
            let mutant = mutate(&mut rng, seed);
            match PteFile::parse(mutant) {
                Ok(file) => {
                    parsed += 1;
                    check_parsed(&file);
                    exercise(&file);
                }
                Err(e) => {
                    failed += 1;
                    assert!(
                        matches!(
                            e.code(),
                            ErrorCode::InvalidProgram | ErrorCode::NotSupported
                        ),
                        "{e}"
                    );
                }
            }
        }
    }
    eprintln!(
        "{parsed} mutants parsed, {failed} refused; the test backend ran {} inits",
        backend.inits.load(Ordering::SeqCst)
    );
    assert!(
        parsed > 100 && failed > 1000,
        "{parsed} parsed, {failed} refused"
    );
}

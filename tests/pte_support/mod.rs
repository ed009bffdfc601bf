//! A small `.pte` writer for tests: programs described as plain values (so a test can break any
//! field), serialized with the generated flatbuffers builders and laid out as ExecuTorch's
//! serializer (`exir/_serialize/_program.py`, `serialize_pte_binary`) lays them out:
//!
//! - the `Program` flatbuffer, identifier `ET12`;
//! - when there is segment data, the 32-byte extended header `eh00` inserted at byte 8 (the root
//!   offset moved by 32): header length 32, `program_size` (flatbuffer + header),
//!   `segment_base_offset` (`program_size` rounded up to 128), `segment_data_size`;
//! - zero padding to the base, then each segment at the next multiple of 128 after the previous
//!   one's end (`DataSegment.offset` relative to the base).
//!
//! Like upstream's emitter, segment 0 is the constant segment (constants 16-aligned inside it,
//! offsets `[0, ..]` with entry 0 the reserved placeholder), then delegate blobs and named data
//! in the order they were added. Set [`PteWriter::raw_constants`] to `false` for older files
//! with the constants in `constant_buffer`.

#![allow(dead_code)]

use flatbuffers::{FlatBufferBuilder, WIPOffset};
use webdelegate::executorch_schema::program as fb;

/// ExecuTorch's default segment alignment.
pub const SEGMENT_ALIGNMENT: usize = 128;
/// The extended header as ExecuTorch writes it (magic, length, three `u64`s).
pub const HEADER_LENGTH: usize = 32;
/// Where the header's fields lie in the file.
pub const HEADER_LENGTH_AT: usize = 12;
/// `program_size`.
pub const PROGRAM_SIZE_AT: usize = 16;
/// `segment_base_offset`.
pub const SEGMENT_BASE_AT: usize = 24;
/// `segment_data_size`.
pub const SEGMENT_DATA_SIZE_AT: usize = 32;

/// ExecuTorch `ScalarType` codes.
pub mod dtype {
    /// `Byte`.
    pub const U8: i8 = 0;
    /// `Int`.
    pub const I32: i8 = 3;
    /// `Long`.
    pub const I64: i8 = 4;
    /// `Half`.
    pub const F16: i8 = 5;
    /// `Float`.
    pub const F32: i8 = 6;
    /// `Bool`.
    pub const BOOL: i8 = 11;
}

/// A tensor value's declaration (`Tensor` table).
#[derive(Clone, Debug)]
pub struct TensorDecl {
    pub scalar_type: i8,
    pub sizes: Vec<i32>,
    /// `None`: the identity, as the emitter writes it.
    pub dim_order: Option<Vec<u8>>,
    /// 0 static, 1 dynamic bound, 2 dynamic unbound.
    pub dynamism: i8,
    /// Constant index (0: not a constant).
    pub data_buffer_idx: u32,
    /// `(memory_id, offset)` of a memory-planned tensor.
    pub allocation: Option<(u32, u64)>,
    /// Named-data key of an `EXTERNAL` tensor.
    pub external: Option<String>,
    pub storage_offset: i32,
}

/// A runtime tensor of `scalar_type` and `sizes`, planned nowhere.
pub fn tensor(scalar_type: i8, sizes: &[i32]) -> Value {
    Value::Tensor(TensorDecl {
        scalar_type,
        sizes: sizes.to_vec(),
        dim_order: None,
        dynamism: 0,
        data_buffer_idx: 0,
        allocation: None,
        external: None,
        storage_offset: 0,
    })
}

/// The same with dynamism (1: bound, 2: unbound).
pub fn dynamic_tensor(scalar_type: i8, sizes: &[i32], dynamism: i8) -> Value {
    let Value::Tensor(mut decl) = tensor(scalar_type, sizes) else {
        unreachable!()
    };
    decl.dynamism = dynamism;
    Value::Tensor(decl)
}

/// One entry of a method's value table (`EValue`).
#[derive(Clone, Debug)]
pub enum Value {
    /// `val_type` NONE (no payload).
    None,
    Null,
    Int(i64),
    Bool(bool),
    Double(f64),
    Str(String),
    IntList(Vec<i64>),
    DoubleList(Vec<f64>),
    BoolList(Vec<bool>),
    TensorList(Vec<i32>),
    OptionalTensorList(Vec<i32>),
    Tensor(TensorDecl),
}

impl Value {
    /// The tensor declaration, to edit.
    pub fn tensor_mut(&mut self) -> &mut TensorDecl {
        match self {
            Self::Tensor(decl) => decl,
            other => panic!("not a tensor: {other:?}"),
        }
    }
}

/// One instruction.
#[derive(Clone, Debug)]
pub enum Instr {
    Kernel { op: i32, args: Vec<i32> },
    Delegate { delegate: i32, args: Vec<i32> },
    Move { from: i32, to: i32 },
    JumpFalse { cond: i32, dest: i32 },
    Free { value: i32 },
}

/// Where a delegate's blob is (`BackendDelegateDataReference`).
#[derive(Clone, Copy, Debug)]
pub enum Blob {
    /// `backend_delegate_data[index]`.
    Inline(u32),
    /// `segments[index]`.
    Segment(u32),
    /// Any location code.
    Raw(i8, u32),
}

/// A delegate entry.
#[derive(Clone, Debug)]
pub struct DelegateDecl {
    pub id: String,
    pub blob: Blob,
    pub compile_specs: Vec<(String, Vec<u8>)>,
}

/// A delegate with backend `id` and blob `blob`.
pub fn delegate(id: &str, blob: Blob) -> DelegateDecl {
    DelegateDecl {
        id: id.to_owned(),
        blob,
        compile_specs: Vec::new(),
    }
}

/// One method (`ExecutionPlan`), its instructions in one chain.
#[derive(Clone, Debug)]
pub struct MethodDecl {
    pub name: String,
    pub values: Vec<Value>,
    pub inputs: Vec<i32>,
    pub outputs: Vec<i32>,
    pub instructions: Vec<Instr>,
    /// `(name, overload)`.
    pub operators: Vec<(String, String)>,
    pub delegates: Vec<DelegateDecl>,
    /// `non_const_buffer_sizes` (entry 0 reserved, as upstream).
    pub arena_sizes: Vec<i64>,
}

/// A `.pte` to write.
#[derive(Clone, Debug)]
pub struct PteWriter {
    pub version: u32,
    pub methods: Vec<MethodDecl>,
    /// Constant tensors' bytes (index 1.. in tensors' `data_buffer_idx`).
    pub constants: Vec<Vec<u8>>,
    /// Constants in `constant_buffer` (older files) instead of segment 0.
    pub raw_constants: bool,
    /// Payloads of the segments after segment 0 (the constant segment).
    pub segments: Vec<Vec<u8>>,
    /// `backend_delegate_data` payloads.
    pub inline_blobs: Vec<Vec<u8>>,
    /// `(key, segment index)` of the named data.
    pub named_data: Vec<(String, u32)>,
    /// Extra `DataSegment` entries `(offset, size)` appended after the real ones.
    pub extra_segment_entries: Vec<(u64, u64)>,
}

impl Default for PteWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl PteWriter {
    /// An empty program (schema version 0, as upstream writes).
    pub fn new() -> Self {
        Self {
            version: 0,
            methods: Vec::new(),
            constants: Vec::new(),
            raw_constants: false,
            segments: Vec::new(),
            inline_blobs: Vec::new(),
            named_data: Vec::new(),
            extra_segment_entries: Vec::new(),
        }
    }

    /// Adds a method.
    #[allow(clippy::too_many_arguments)]
    pub fn method(
        mut self,
        name: &str,
        values: Vec<Value>,
        inputs: &[i32],
        outputs: &[i32],
        instructions: Vec<Instr>,
        operators: &[(&str, &str)],
        delegates: Vec<DelegateDecl>,
    ) -> Self {
        self.methods.push(MethodDecl {
            name: name.to_owned(),
            values,
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
            instructions,
            operators: operators
                .iter()
                .map(|(n, o)| ((*n).to_owned(), (*o).to_owned()))
                .collect(),
            delegates,
            arena_sizes: Vec::new(),
        });
        self
    }

    /// Adds a segment; its index in `Program.segments` is 1 + the segments added before.
    pub fn segment(mut self, bytes: &[u8]) -> Self {
        self.segments.push(bytes.to_vec());
        self
    }

    /// A delegate blob in a new segment (the layout `extract_delegate_segments` writes).
    pub fn delegate_blob_in_segment(self, bytes: &[u8]) -> Self {
        self.segment(bytes)
    }

    /// A delegate blob kept inline in `backend_delegate_data`.
    pub fn inline_blob(mut self, bytes: &[u8]) -> Self {
        self.inline_blobs.push(bytes.to_vec());
        self
    }

    /// Named data `key` in a new segment.
    pub fn named_data(mut self, key: &str, bytes: &[u8]) -> Self {
        self.segments.push(bytes.to_vec());
        self.named_data
            .push((key.to_owned(), self.segments.len() as u32));
        self
    }

    /// A constant tensor's bytes (its `data_buffer_idx` is 1 + the constants added before).
    pub fn constant(mut self, bytes: &[u8]) -> Self {
        self.constants.push(bytes.to_vec());
        self
    }

    /// The index the next segment gets.
    pub fn next_segment_index(&self) -> u32 {
        self.segments.len() as u32 + 1
    }

    /// The first method, to edit.
    pub fn forward(&mut self) -> &mut MethodDecl {
        &mut self.methods[0]
    }

    /// The file's bytes.
    pub fn build(&self) -> Vec<u8> {
        // Segment 0: the constants, each padded to 16 but the last (`_extract_constant_segment`).
        let mut constant_segment = Vec::new();
        let mut constant_offsets = vec![0u64];
        if !self.raw_constants {
            for (at, bytes) in self.constants.iter().enumerate() {
                constant_offsets.push(constant_segment.len() as u64);
                constant_segment.extend_from_slice(bytes);
                if at + 1 < self.constants.len() {
                    constant_segment.resize(constant_segment.len().next_multiple_of(16), 0);
                }
            }
        }
        let payloads: Vec<&[u8]> = std::iter::once(constant_segment.as_slice())
            .chain(self.segments.iter().map(Vec::as_slice))
            .collect();
        let mut entries = Vec::new();
        let mut segment_data = Vec::new();
        for payload in &payloads {
            let end = entries.last().map_or(0, |(o, s): &(u64, u64)| o + s);
            let offset = (end as usize).next_multiple_of(SEGMENT_ALIGNMENT);
            segment_data.resize(segment_data.len().next_multiple_of(SEGMENT_ALIGNMENT), 0);
            assert_eq!(segment_data.len(), offset);
            entries.push((offset as u64, payload.len() as u64));
            segment_data.extend_from_slice(payload);
        }
        entries.extend(&self.extra_segment_entries);
        let flatbuffer = self.flatbuffer(&entries, &constant_offsets);
        if segment_data.is_empty() {
            return flatbuffer;
        }
        let program_size = flatbuffer.len() + HEADER_LENGTH;
        let base = program_size.next_multiple_of(SEGMENT_ALIGNMENT);
        let mut out = Vec::with_capacity(base + segment_data.len());
        let root = u32::from_le_bytes(flatbuffer[..4].try_into().unwrap()) + HEADER_LENGTH as u32;
        out.extend_from_slice(&root.to_le_bytes());
        out.extend_from_slice(&flatbuffer[4..8]);
        out.extend_from_slice(b"eh00");
        out.extend_from_slice(&(HEADER_LENGTH as u32).to_le_bytes());
        for field in [program_size, base, segment_data.len()] {
            out.extend_from_slice(&(field as u64).to_le_bytes());
        }
        out.extend_from_slice(&flatbuffer[8..]);
        assert_eq!(out.len(), program_size);
        out.resize(base, 0);
        out.extend_from_slice(&segment_data);
        out
    }

    fn flatbuffer(&self, segments: &[(u64, u64)], constant_offsets: &[u64]) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let plans: Vec<_> = self.methods.iter().map(|m| method(&mut fbb, m)).collect();
        let execution_plan = Some(fbb.create_vector(&plans));
        let segments: Vec<_> = segments
            .iter()
            .map(|&(offset, size)| {
                fb::DataSegment::create(
                    &mut fbb,
                    &fb::DataSegmentArgs {
                        offset,
                        size_: size,
                    },
                )
            })
            .collect();
        let segments = Some(fbb.create_vector(&segments));
        let (constant_buffer, constant_segment) = if self.raw_constants {
            let buffers: Vec<_> = std::iter::once(&Vec::new())
                .chain(&self.constants)
                .map(|bytes| {
                    let storage = Some(fbb.create_vector(bytes));
                    fb::Buffer::create(&mut fbb, &fb::BufferArgs { storage })
                })
                .collect();
            (Some(fbb.create_vector(&buffers)), None)
        } else {
            let offsets = Some(fbb.create_vector(constant_offsets));
            let segment = fb::SubsegmentOffsets::create(
                &mut fbb,
                &fb::SubsegmentOffsetsArgs {
                    segment_index: 0,
                    offsets,
                },
            );
            (None, Some(segment))
        };
        let inline: Vec<_> = self
            .inline_blobs
            .iter()
            .map(|bytes| {
                let data = Some(fbb.create_vector(bytes));
                fb::BackendDelegateInlineData::create(
                    &mut fbb,
                    &fb::BackendDelegateInlineDataArgs { data },
                )
            })
            .collect();
        let backend_delegate_data = Some(fbb.create_vector(&inline));
        let named: Vec<_> = self
            .named_data
            .iter()
            .map(|(key, segment_index)| {
                let key = Some(fbb.create_string(key));
                fb::NamedData::create(
                    &mut fbb,
                    &fb::NamedDataArgs {
                        key,
                        segment_index: *segment_index,
                    },
                )
            })
            .collect();
        let named_data = Some(fbb.create_vector(&named));
        let program = fb::Program::create(
            &mut fbb,
            &fb::ProgramArgs {
                version: self.version,
                execution_plan,
                constant_buffer,
                backend_delegate_data,
                segments,
                constant_segment,
                mutable_data_segments: None,
                named_data,
            },
        );
        fbb.finish(program, Some("ET12"));
        fbb.finished_data().to_vec()
    }
}

type Fbb<'a> = FlatBufferBuilder<'a>;

fn method<'a>(fbb: &mut Fbb<'a>, m: &MethodDecl) -> WIPOffset<fb::ExecutionPlan<'a>> {
    let name = Some(fbb.create_string(&m.name));
    let values: Vec<_> = m.values.iter().map(|v| value(fbb, v)).collect();
    let values = Some(fbb.create_vector(&values));
    let inputs = Some(fbb.create_vector(&m.inputs));
    let outputs = Some(fbb.create_vector(&m.outputs));
    let instructions: Vec<_> = m.instructions.iter().map(|i| instruction(fbb, i)).collect();
    let instructions = Some(fbb.create_vector(&instructions));
    let chain_inputs = Some(fbb.create_vector(&m.inputs));
    let chain_outputs = Some(fbb.create_vector(&m.outputs));
    let chain = fb::Chain::create(
        fbb,
        &fb::ChainArgs {
            inputs: chain_inputs,
            outputs: chain_outputs,
            instructions,
            stacktrace: None,
        },
    );
    let chains = Some(fbb.create_vector(&[chain]));
    let operators: Vec<_> = m
        .operators
        .iter()
        .map(|(name, overload)| {
            let name = Some(fbb.create_string(name));
            let overload = Some(fbb.create_string(overload));
            fb::Operator::create(fbb, &fb::OperatorArgs { name, overload })
        })
        .collect();
    let operators = Some(fbb.create_vector(&operators));
    let delegates: Vec<_> = m.delegates.iter().map(|d| delegate_entry(fbb, d)).collect();
    let delegates = Some(fbb.create_vector(&delegates));
    let non_const_buffer_sizes = Some(fbb.create_vector(&m.arena_sizes));
    fb::ExecutionPlan::create(
        fbb,
        &fb::ExecutionPlanArgs {
            name,
            container_meta_type: None,
            values,
            inputs,
            outputs,
            chains,
            operators,
            delegates,
            non_const_buffer_sizes,
            non_const_buffer_device: None,
        },
    )
}

fn value<'a>(fbb: &mut Fbb<'a>, v: &Value) -> WIPOffset<fb::EValue<'a>> {
    use fb::KernelTypes as K;
    let (val_type, val) = match v {
        Value::None => (K::NONE, None),
        Value::Null => (
            K::Null,
            Some(fb::Null::create(fbb, &fb::NullArgs {}).as_union_value()),
        ),
        Value::Int(int_val) => (
            K::Int,
            Some(fb::Int::create(fbb, &fb::IntArgs { int_val: *int_val }).as_union_value()),
        ),
        Value::Bool(bool_val) => (
            K::Bool,
            Some(
                fb::Bool::create(
                    fbb,
                    &fb::BoolArgs {
                        bool_val: *bool_val,
                    },
                )
                .as_union_value(),
            ),
        ),
        Value::Double(double_val) => (
            K::Double,
            Some(
                fb::Double::create(
                    fbb,
                    &fb::DoubleArgs {
                        double_val: *double_val,
                    },
                )
                .as_union_value(),
            ),
        ),
        Value::Str(s) => {
            let string_val = Some(fbb.create_string(s));
            let table = fb::String::create(fbb, &fb::StringArgs { string_val });
            (K::String, Some(table.as_union_value()))
        }
        Value::IntList(items) => {
            let items = Some(fbb.create_vector(items));
            let table = fb::IntList::create(fbb, &fb::IntListArgs { items });
            (K::IntList, Some(table.as_union_value()))
        }
        Value::DoubleList(items) => {
            let items = Some(fbb.create_vector(items));
            let table = fb::DoubleList::create(fbb, &fb::DoubleListArgs { items });
            (K::DoubleList, Some(table.as_union_value()))
        }
        Value::BoolList(items) => {
            let items = Some(fbb.create_vector(items));
            let table = fb::BoolList::create(fbb, &fb::BoolListArgs { items });
            (K::BoolList, Some(table.as_union_value()))
        }
        Value::TensorList(items) => {
            let items = Some(fbb.create_vector(items));
            let table = fb::TensorList::create(fbb, &fb::TensorListArgs { items });
            (K::TensorList, Some(table.as_union_value()))
        }
        Value::OptionalTensorList(items) => {
            let items = Some(fbb.create_vector(items));
            let table = fb::OptionalTensorList::create(fbb, &fb::OptionalTensorListArgs { items });
            (K::OptionalTensorList, Some(table.as_union_value()))
        }
        Value::Tensor(t) => (K::Tensor, Some(tensor_table(fbb, t).as_union_value())),
    };
    fb::EValue::create(fbb, &fb::EValueArgs { val_type, val })
}

fn tensor_table<'a>(fbb: &mut Fbb<'a>, t: &TensorDecl) -> WIPOffset<fb::Tensor<'a>> {
    let sizes = Some(fbb.create_vector(&t.sizes));
    let identity: Vec<u8> = (0..t.sizes.len() as u8).collect();
    let dim_order = Some(fbb.create_vector(t.dim_order.as_ref().unwrap_or(&identity)));
    let allocation_info = t.allocation.map(|(memory_id, offset)| {
        fb::AllocationDetails::create(
            fbb,
            &fb::AllocationDetailsArgs {
                memory_id,
                memory_offset_low: offset as u32,
                memory_offset_high: (offset >> 32) as u32,
            },
        )
    });
    let extra_tensor_info = t.external.as_ref().map(|key| {
        let fully_qualified_name = Some(fbb.create_string(key));
        fb::ExtraTensorInfo::create(
            fbb,
            &fb::ExtraTensorInfoArgs {
                mutable_data_segments_idx: 0,
                fully_qualified_name,
                location: fb::TensorDataLocation::EXTERNAL,
                ..Default::default()
            },
        )
    });
    fb::Tensor::create(
        fbb,
        &fb::TensorArgs {
            scalar_type: fb::ScalarType(t.scalar_type),
            storage_offset: t.storage_offset,
            sizes,
            dim_order,
            requires_grad: false,
            data_buffer_idx: t.data_buffer_idx,
            allocation_info,
            layout: 0,
            shape_dynamism: fb::TensorShapeDynamism(t.dynamism),
            extra_tensor_info,
        },
    )
}

fn instruction<'a>(fbb: &mut Fbb<'a>, i: &Instr) -> WIPOffset<fb::Instruction<'a>> {
    use fb::InstructionArguments as A;
    let (instr_args_type, table) = match i {
        Instr::Kernel { op, args } => {
            let args = Some(fbb.create_vector(args));
            let call = fb::KernelCall::create(
                fbb,
                &fb::KernelCallArgs {
                    op_index: *op,
                    args,
                },
            );
            (A::KernelCall, call.as_union_value())
        }
        Instr::Delegate { delegate, args } => {
            let args = Some(fbb.create_vector(args));
            let call = fb::DelegateCall::create(
                fbb,
                &fb::DelegateCallArgs {
                    delegate_index: *delegate,
                    args,
                },
            );
            (A::DelegateCall, call.as_union_value())
        }
        Instr::Move { from, to } => {
            let call = fb::MoveCall::create(
                fbb,
                &fb::MoveCallArgs {
                    move_from: *from,
                    move_to: *to,
                },
            );
            (A::MoveCall, call.as_union_value())
        }
        Instr::JumpFalse { cond, dest } => {
            let call = fb::JumpFalseCall::create(
                fbb,
                &fb::JumpFalseCallArgs {
                    cond_value_index: *cond,
                    destination_instruction: *dest,
                },
            );
            (A::JumpFalseCall, call.as_union_value())
        }
        Instr::Free { value } => {
            let call = fb::FreeCall::create(
                fbb,
                &fb::FreeCallArgs {
                    value_index: *value,
                },
            );
            (A::FreeCall, call.as_union_value())
        }
    };
    fb::Instruction::create(
        fbb,
        &fb::InstructionArgs {
            instr_args_type,
            instr_args: Some(table),
        },
    )
}

fn delegate_entry<'a>(fbb: &mut Fbb<'a>, d: &DelegateDecl) -> WIPOffset<fb::BackendDelegate<'a>> {
    let id = Some(fbb.create_string(&d.id));
    let (location, index) = match d.blob {
        Blob::Inline(index) => (fb::DataLocation::INLINE, index),
        Blob::Segment(index) => (fb::DataLocation::SEGMENT, index),
        Blob::Raw(location, index) => (fb::DataLocation(location), index),
    };
    let processed = Some(fb::BackendDelegateDataReference::create(
        fbb,
        &fb::BackendDelegateDataReferenceArgs { location, index },
    ));
    let specs: Vec<_> = d
        .compile_specs
        .iter()
        .map(|(key, value)| {
            let key = Some(fbb.create_string(key));
            let value = Some(fbb.create_vector(value));
            fb::CompileSpec::create(fbb, &fb::CompileSpecArgs { key, value })
        })
        .collect();
    let compile_specs = Some(fbb.create_vector(&specs));
    fb::BackendDelegate::create(
        fbb,
        &fb::BackendDelegateArgs {
            id,
            processed,
            compile_specs,
        },
    )
}

/// Overwrites the little-endian `u64` at `at`.
pub fn patch_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// Overwrites the little-endian `u32` at `at`.
pub fn patch_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// Reads the little-endian `u64` at `at`.
pub fn read_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

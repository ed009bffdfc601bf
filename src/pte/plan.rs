//! One method of a `.pte` (upstream's `ExecutionPlan`) as owned, checked values: its value
//! table, inputs and outputs, instruction chains, operator names and delegate entries.
//!
//! Promises of a parsed [`MethodPlan`]: every value index an input, output, list or instruction
//! names exists; every operator and delegate index exists; every jump lands inside its chain (or
//! on its end); every tensor is contiguous (its dim order is the identity), has an element type
//! this runtime holds, non-negative sizes whose byte size does not overflow, and, when memory
//! planned, fits its arena; every constant lies inside its buffer; every delegate blob lies
//! inside the file. The runtime (`method`) relies on these and never re-checks them.

use crate::error::{Error, Result};
use crate::evalue::ScalarType;
use crate::executorch_schema::program as fb;
use crate::pte::sources::{PlanSources, checked_index};
use crate::registry::CompileSpec;
use std::ops::Range;

/// ExecuTorch's `ScalarType` codes for the element types this runtime holds in tensors.
const SCALAR_TYPES: [(i8, ScalarType); 6] = [
    (0, ScalarType::UInt8),
    (3, ScalarType::Int32),
    (4, ScalarType::Int64),
    (6, ScalarType::Float32),
    (7, ScalarType::Float64),
    (11, ScalarType::Bool),
];

/// Upstream's name of an ExecuTorch `ScalarType` code, for messages.
pub fn scalar_type_name(code: i8) -> String {
    fb::ScalarType(code)
        .variant_name()
        .map_or_else(|| format!("scalar type {code}"), str::to_owned)
}

/// Our tensor element type for an ExecuTorch `ScalarType` code.
///
/// # Errors
/// `NotSupported` naming the type for one this runtime holds no tensors of (f16, bf16,
/// quantized and 8/16-bit integer types).
pub fn scalar_type_from_code(code: i8) -> Result<ScalarType> {
    SCALAR_TYPES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            Error::not_supported(format!(
                "tensors of {} are not supported outside a delegate (supported: BYTE, INT, \
                 LONG, FLOAT, DOUBLE, BOOL)",
                scalar_type_name(code)
            ))
        })
}

/// The ExecuTorch `ScalarType` code of one of our element types.
pub fn scalar_type_code(scalar: ScalarType) -> i8 {
    SCALAR_TYPES
        .iter()
        .find(|(_, t)| *t == scalar)
        .map_or(6, |(c, _)| *c)
}

/// Whether a tensor's shape may change between executions (upstream's `TensorShapeDynamism`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dynamism {
    /// The sizes are exact.
    Static,
    /// The sizes are upper bounds.
    Bound,
    /// The sizes are a hint; any extent is allowed.
    Unbound,
}

impl Dynamism {
    /// The name JavaScript and messages use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::Bound => "dynamic_bound",
            Self::Unbound => "dynamic_unbound",
        }
    }
}

/// Where a tensor's bytes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TensorSource {
    /// Produced at run time (an input, an intermediate or an output); `arena` and `offset`
    /// are the memory plan's placement when the file has one (checked, not used: values are
    /// owned tensors here, never a slice of a planned arena).
    Runtime {
        /// `(memory_id, offset)` from `allocation_info`, if planned.
        placement: Option<(u32, u64)>,
    },
    /// Constant bytes inside the `.pte` (absolute range).
    Constant(Range<usize>),
    /// Bytes from named data under this key (upstream's `TensorDataLocation::EXTERNAL`).
    External(String),
}

/// A tensor value's declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Element type.
    pub dtype: ScalarType,
    /// Sizes (upper bounds for a dynamic-bound tensor).
    pub sizes: Vec<usize>,
    /// Whether the sizes may change.
    pub dynamism: Dynamism,
    /// Where its bytes come from.
    pub source: TensorSource,
}

impl TensorSpec {
    /// Bytes of the tensor at its declared sizes.
    pub fn nbytes(&self) -> usize {
        // Checked when parsed.
        self.sizes
            .iter()
            .fold(self.dtype.element_size(), |n, &d| n.saturating_mul(d))
    }
}

/// One entry of a method's value table (upstream's `EValue` as serialized).
#[derive(Clone, Debug, PartialEq)]
pub enum ValueSpec {
    /// No value.
    None,
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A double.
    Double(f64),
    /// A string.
    String(String),
    /// A list of integers, as the indices of `Int` values (upstream's boxed list).
    IntList(Vec<usize>),
    /// A list of doubles.
    DoubleList(Vec<f64>),
    /// A list of booleans.
    BoolList(Vec<bool>),
    /// A list of tensors, as value indices.
    TensorList(Vec<usize>),
    /// A list of optional tensors, as value indices (`None` for an absent one).
    OptionalTensorList(Vec<Option<usize>>),
    /// A tensor.
    Tensor(TensorSpec),
}

impl ValueSpec {
    /// The tag name, as upstream's `Tag` names it.
    pub fn tag(&self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Int(_) => "Int",
            Self::Bool(_) => "Bool",
            Self::Double(_) => "Double",
            Self::String(_) => "String",
            Self::IntList(_) => "ListInt",
            Self::DoubleList(_) => "ListDouble",
            Self::BoolList(_) => "ListBool",
            Self::TensorList(_) => "ListTensor",
            Self::OptionalTensorList(_) => "ListOptionalTensor",
            Self::Tensor(_) => "Tensor",
        }
    }
}

/// One instruction of a chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// Calls operator `operator` on the values `args`.
    Kernel {
        /// Index into the method's operators.
        operator: usize,
        /// Value indices.
        args: Vec<usize>,
    },
    /// Calls delegate `delegate` on the values `args` (inputs, then outputs).
    Delegate {
        /// Index into the method's delegates.
        delegate: usize,
        /// Value indices.
        args: Vec<usize>,
    },
    /// Copies value `from` into value `to`.
    Move {
        /// Source value index.
        from: usize,
        /// Destination value index.
        to: usize,
    },
    /// Jumps to `destination` when the boolean value `condition` is false.
    JumpFalse {
        /// Value index of a `Bool`.
        condition: usize,
        /// Instruction index in the same chain (the chain's length ends it).
        destination: usize,
    },
    /// Releases the tensor in value `value`.
    Free {
        /// Value index.
        value: usize,
    },
}

/// An operator a `KernelCall` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorName {
    /// E.g. `aten::sym_size`.
    pub name: String,
    /// E.g. `int` (may be empty).
    pub overload: String,
}

impl std::fmt::Display for OperatorName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.overload.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}.{}", self.name, self.overload)
        }
    }
}

/// A delegate entry: which backend, which blob, which compile specs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegateSpec {
    /// The backend id (e.g. `WebDelegateBackend`).
    pub id: String,
    /// The blob's absolute range in the file.
    pub processed: Range<usize>,
    /// The compile specs used ahead of time.
    pub compile_specs: Vec<CompileSpec>,
}

/// One method of a `.pte`.
#[derive(Clone, Debug)]
pub struct MethodPlan {
    name: String,
    values: Vec<ValueSpec>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    chains: Vec<Vec<Instruction>>,
    operators: Vec<OperatorName>,
    delegates: Vec<DelegateSpec>,
    arena_sizes: Vec<u64>,
}

/// A value index from the file, checked.
fn value_index(index: i64, count: usize, what: &str) -> Result<usize> {
    u64::try_from(index)
        .map_err(|_| Error::invalid_program(format!("{what} {index} is negative")))
        .and_then(|index| checked_index(index, count, what))
}

impl MethodPlan {
    /// Reads and checks execution plan `index` (see the module docs for what is checked).
    pub(crate) fn parse(
        index: usize,
        plan: fb::ExecutionPlan<'_>,
        sources: &PlanSources<'_>,
    ) -> Result<Self> {
        let name = plan
            .name()
            .ok_or_else(|| Error::invalid_program(format!("execution plan {index} has no name")))?
            .to_owned();
        let arena_sizes = plan
            .non_const_buffer_sizes()
            .into_iter()
            .flatten()
            .map(|size| {
                u64::try_from(size).map_err(|_| {
                    Error::invalid_program(format!("method {name:?}: an arena size is negative"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let raw_values: Vec<fb::EValue<'_>> = plan.values().into_iter().flatten().collect();
        let count = raw_values.len();
        let values = raw_values
            .iter()
            .enumerate()
            .map(|(at, value)| {
                Self::value(*value, count, &arena_sizes, sources).map_err(|e| {
                    Error::new(
                        e.code(),
                        format!("method {name:?}, value {at}: {}", e.message()),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let indices = |list: Option<flatbuffers::Vector<'_, i32>>, what: &str| {
            list.into_iter()
                .flatten()
                .map(|i| value_index(i.into(), count, &format!("method {name:?}: {what}")))
                .collect::<Result<Vec<_>>>()
        };
        let inputs = indices(plan.inputs(), "input value index")?;
        let outputs = indices(plan.outputs(), "output value index")?;
        let operators = plan
            .operators()
            .into_iter()
            .flatten()
            .map(|op| OperatorName {
                name: op.name().unwrap_or_default().to_owned(),
                overload: op.overload().unwrap_or_default().to_owned(),
            })
            .collect::<Vec<_>>();
        let delegates = plan
            .delegates()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(at, delegate)| Self::delegate(at, delegate, sources))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| Error::new(e.code(), format!("method {name:?}: {}", e.message())))?;
        let chains = plan
            .chains()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(at, chain)| {
                let instructions: Vec<fb::Instruction<'_>> =
                    chain.instructions().into_iter().flatten().collect();
                let len = instructions.len();
                instructions
                    .into_iter()
                    .enumerate()
                    .map(|(pc, instruction)| {
                        Self::instruction(instruction, count, operators.len(), delegates.len(), len)
                            .map_err(|e| {
                                Error::new(
                                    e.code(),
                                    format!(
                                        "method {name:?}, chain {at}, instruction {pc}: {}",
                                        e.message()
                                    ),
                                )
                            })
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let plan = Self {
            name,
            values,
            inputs,
            outputs,
            chains,
            operators,
            delegates,
            arena_sizes,
        };
        plan.check_lists()?;
        Ok(plan)
    }

    fn value(
        value: fb::EValue<'_>,
        count: usize,
        arena_sizes: &[u64],
        sources: &PlanSources<'_>,
    ) -> Result<ValueSpec> {
        let kind = value.val_type();
        let missing = || Error::invalid_program(format!("its {kind:?} payload is missing"));
        let index_list = |items: Option<flatbuffers::Vector<'_, i64>>| {
            items
                .into_iter()
                .flatten()
                .map(|i| value_index(i, count, "list item"))
                .collect::<Result<Vec<_>>>()
        };
        Ok(match kind {
            fb::KernelTypes::NONE | fb::KernelTypes::Null => ValueSpec::None,
            fb::KernelTypes::Int => {
                ValueSpec::Int(value.val_as_int().ok_or_else(missing)?.int_val())
            }
            fb::KernelTypes::Bool => {
                ValueSpec::Bool(value.val_as_bool().ok_or_else(missing)?.bool_val())
            }
            fb::KernelTypes::Double => {
                ValueSpec::Double(value.val_as_double().ok_or_else(missing)?.double_val())
            }
            fb::KernelTypes::String => ValueSpec::String(
                value
                    .val_as_string()
                    .ok_or_else(missing)?
                    .string_val()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            fb::KernelTypes::IntList => ValueSpec::IntList(index_list(
                value.val_as_int_list().ok_or_else(missing)?.items(),
            )?),
            fb::KernelTypes::DoubleList => ValueSpec::DoubleList(
                value
                    .val_as_double_list()
                    .ok_or_else(missing)?
                    .items()
                    .into_iter()
                    .flatten()
                    .collect(),
            ),
            fb::KernelTypes::BoolList => ValueSpec::BoolList(
                value
                    .val_as_bool_list()
                    .ok_or_else(missing)?
                    .items()
                    .into_iter()
                    .flatten()
                    .collect(),
            ),
            fb::KernelTypes::TensorList => ValueSpec::TensorList(
                value
                    .val_as_tensor_list()
                    .ok_or_else(missing)?
                    .items()
                    .into_iter()
                    .flatten()
                    .map(|i| value_index(i.into(), count, "tensor list item"))
                    .collect::<Result<Vec<_>>>()?,
            ),
            fb::KernelTypes::OptionalTensorList => ValueSpec::OptionalTensorList(
                value
                    .val_as_optional_tensor_list()
                    .ok_or_else(missing)?
                    .items()
                    .into_iter()
                    .flatten()
                    .map(|i| {
                        if i < 0 {
                            Ok(None)
                        } else {
                            value_index(i.into(), count, "optional tensor list item").map(Some)
                        }
                    })
                    .collect::<Result<Vec<_>>>()?,
            ),
            fb::KernelTypes::Tensor => ValueSpec::Tensor(Self::tensor(
                value.val_as_tensor().ok_or_else(missing)?,
                arena_sizes,
                sources,
            )?),
            other => {
                return Err(Error::invalid_program(format!(
                    "unknown value type {}",
                    other.0
                )));
            }
        })
    }

    fn tensor(
        tensor: fb::Tensor<'_>,
        arena_sizes: &[u64],
        sources: &PlanSources<'_>,
    ) -> Result<TensorSpec> {
        let dtype = scalar_type_from_code(tensor.scalar_type().0)?;
        let sizes = tensor
            .sizes()
            .into_iter()
            .flatten()
            .map(|size| {
                usize::try_from(size)
                    .map_err(|_| Error::invalid_program(format!("tensor size {size} is negative")))
            })
            .collect::<Result<Vec<_>>>()?;
        let nbytes = sizes
            .iter()
            .try_fold(dtype.element_size(), |n, &d| n.checked_mul(d))
            .ok_or_else(|| {
                Error::invalid_program(format!("a tensor of sizes {sizes:?} overflows"))
            })?;
        let dim_order: Vec<u8> = tensor
            .dim_order()
            .map_or_else(Vec::new, |d| d.bytes().to_vec());
        let contiguous = dim_order.is_empty()
            || (dim_order.len() == sizes.len()
                && dim_order
                    .iter()
                    .enumerate()
                    .all(|(i, &d)| usize::from(d) == i));
        if !contiguous {
            return Err(Error::not_supported(format!(
                "a tensor with dim order {dim_order:?} (sizes {sizes:?}): only contiguous \
                 tensors are supported"
            )));
        }
        if tensor.storage_offset() != 0 {
            return Err(Error::not_supported(format!(
                "a tensor with storage offset {}",
                tensor.storage_offset()
            )));
        }
        let dynamism = match tensor.shape_dynamism() {
            fb::TensorShapeDynamism::STATIC => Dynamism::Static,
            fb::TensorShapeDynamism::DYNAMIC_BOUND => Dynamism::Bound,
            fb::TensorShapeDynamism::DYNAMIC_UNBOUND => Dynamism::Unbound,
            other => {
                return Err(Error::invalid_program(format!(
                    "unknown shape dynamism {}",
                    other.0
                )));
            }
        };
        let external = tensor
            .extra_tensor_info()
            .filter(|info| info.location() == fb::TensorDataLocation::EXTERNAL);
        let source = if let Some(info) = external {
            let key = info.fully_qualified_name().ok_or_else(|| {
                Error::invalid_program("an external tensor has no fully qualified name".to_owned())
            })?;
            TensorSource::External(key.to_owned())
        } else if tensor.data_buffer_idx() > 0 {
            TensorSource::Constant(
                sources
                    .constants
                    .get(tensor.data_buffer_idx() as usize, nbytes)?,
            )
        } else {
            let placement = match tensor.allocation_info() {
                Some(info) => {
                    let offset = u64::from(info.memory_offset_low())
                        | (u64::from(info.memory_offset_high()) << 32);
                    let arena = checked_index(
                        info.memory_id().into(),
                        arena_sizes.len(),
                        "the memory id of a planned tensor",
                    )?;
                    let fits = offset
                        .checked_add(nbytes as u64)
                        .is_some_and(|end| end <= arena_sizes[arena]);
                    if !fits {
                        return Err(Error::invalid_program(format!(
                            "a planned tensor of {nbytes} bytes at offset {offset} runs past \
                             arena {arena} of {} bytes",
                            arena_sizes[arena]
                        )));
                    }
                    Some((info.memory_id(), offset))
                }
                None => None,
            };
            TensorSource::Runtime { placement }
        };
        Ok(TensorSpec {
            dtype,
            sizes,
            dynamism,
            source,
        })
    }

    fn delegate(
        at: usize,
        delegate: fb::BackendDelegate<'_>,
        sources: &PlanSources<'_>,
    ) -> Result<DelegateSpec> {
        let id = delegate
            .id()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| Error::invalid_program(format!("delegate {at} has no backend id")))?
            .to_owned();
        let reference = delegate.processed().ok_or_else(|| {
            Error::invalid_program(format!("delegate {at} ({id}) has no processed blob"))
        })?;
        let processed = match reference.location() {
            fb::DataLocation::INLINE => sources
                .inline_delegate_data
                .get(reference.index() as usize)
                .cloned(),
            fb::DataLocation::SEGMENT => sources.segments.get(reference.index() as usize).cloned(),
            _ => None,
        }
        .ok_or_else(|| {
            Error::invalid_program(format!(
                "delegate {at} ({id}): its blob reference ({:?} {}) names nothing in the file",
                reference.location(),
                reference.index()
            ))
        })?;
        let compile_specs = delegate
            .compile_specs()
            .into_iter()
            .flatten()
            .map(|spec| {
                CompileSpec::new(
                    spec.key().unwrap_or_default(),
                    spec.value().map_or_else(Vec::new, |v| v.bytes().to_vec()),
                )
            })
            .collect();
        Ok(DelegateSpec {
            id,
            processed,
            compile_specs,
        })
    }

    fn instruction(
        instruction: fb::Instruction<'_>,
        count: usize,
        operators: usize,
        delegates: usize,
        chain_len: usize,
    ) -> Result<Instruction> {
        let kind = instruction.instr_args_type();
        let missing = || Error::invalid_program(format!("its {kind:?} arguments are missing"));
        let args = |list: Option<flatbuffers::Vector<'_, i32>>| {
            list.into_iter()
                .flatten()
                .map(|i| value_index(i.into(), count, "argument value index"))
                .collect::<Result<Vec<_>>>()
        };
        let index = |value: i32, limit: usize, what: &str| value_index(value.into(), limit, what);
        Ok(match kind {
            fb::InstructionArguments::KernelCall => {
                let call = instruction
                    .instr_args_as_kernel_call()
                    .ok_or_else(missing)?;
                Instruction::Kernel {
                    operator: index(call.op_index(), operators, "operator index")?,
                    args: args(call.args())?,
                }
            }
            fb::InstructionArguments::DelegateCall => {
                let call = instruction
                    .instr_args_as_delegate_call()
                    .ok_or_else(missing)?;
                Instruction::Delegate {
                    delegate: index(call.delegate_index(), delegates, "delegate index")?,
                    args: args(call.args())?,
                }
            }
            fb::InstructionArguments::MoveCall => {
                let call = instruction.instr_args_as_move_call().ok_or_else(missing)?;
                Instruction::Move {
                    from: index(call.move_from(), count, "move source")?,
                    to: index(call.move_to(), count, "move destination")?,
                }
            }
            fb::InstructionArguments::JumpFalseCall => {
                let call = instruction
                    .instr_args_as_jump_false_call()
                    .ok_or_else(missing)?;
                Instruction::JumpFalse {
                    condition: index(call.cond_value_index(), count, "jump condition")?,
                    // The chain's length is a valid destination: it ends the chain.
                    destination: index(
                        call.destination_instruction(),
                        chain_len + 1,
                        "jump destination",
                    )?,
                }
            }
            fb::InstructionArguments::FreeCall => {
                let call = instruction.instr_args_as_free_call().ok_or_else(missing)?;
                Instruction::Free {
                    value: index(call.value_index(), count, "freed value")?,
                }
            }
            other => {
                return Err(Error::invalid_program(format!(
                    "unknown instruction type {}",
                    other.0
                )));
            }
        })
    }

    /// Lists must name values of the right kind: `IntList` items are `Int`s, tensor lists'
    /// items are tensors (or `None`).
    fn check_lists(&self) -> Result<()> {
        for (at, value) in self.values.iter().enumerate() {
            let bad = match value {
                ValueSpec::IntList(items) => items
                    .iter()
                    .find(|&&i| !matches!(self.values[i], ValueSpec::Int(_))),
                ValueSpec::TensorList(items) => items
                    .iter()
                    .find(|&&i| !matches!(self.values[i], ValueSpec::Tensor(_))),
                ValueSpec::OptionalTensorList(items) => items
                    .iter()
                    .flatten()
                    .find(|&&i| !matches!(self.values[i], ValueSpec::Tensor(_) | ValueSpec::None)),
                _ => None,
            };
            if let Some(&item) = bad {
                return Err(Error::invalid_program(format!(
                    "method {:?}, value {at}: its {} names value {item}, a {}",
                    self.name,
                    value.tag(),
                    self.values[item].tag()
                )));
            }
        }
        Ok(())
    }

    /// The method's name (e.g. `forward`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value table.
    pub fn values(&self) -> &[ValueSpec] {
        &self.values
    }

    /// Value indices of the inputs, in argument order.
    pub fn inputs(&self) -> &[usize] {
        &self.inputs
    }

    /// Value indices of the outputs, in order.
    pub fn outputs(&self) -> &[usize] {
        &self.outputs
    }

    /// The instruction chains, run in order.
    pub fn chains(&self) -> &[Vec<Instruction>] {
        &self.chains
    }

    /// The operators `KernelCall`s name.
    pub fn operators(&self) -> &[OperatorName] {
        &self.operators
    }

    /// The delegate entries.
    pub fn delegates(&self) -> &[DelegateSpec] {
        &self.delegates
    }

    /// The memory plan's arena sizes (`non_const_buffer_sizes`; entry 0 is reserved).
    pub fn arena_sizes(&self) -> &[u64] {
        &self.arena_sizes
    }

    /// How many instructions all chains hold.
    pub fn instruction_count(&self) -> usize {
        self.chains.iter().map(Vec::len).sum()
    }
}

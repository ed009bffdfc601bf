//! A loaded method (upstream's `Method`): its delegates initialised through the backend
//! registry, its value table, and the instruction interpreter that runs its chains.
//!
//! - **Delegates by backend id.** Each `DelegateCall`'s backend is looked up by the id the
//!   `.pte` names, so a JavaScript backend registered under that id receives the call. The one
//!   exception is an explicit mapping in [`MethodLoadOptions::backends`]: the Python partitioner
//!   writes `WebDelegateBackend`, which a caller maps to `"webgpu"` or `"cpu"`.
//! - **Delegates get the named data.** `init` receives a context whose parameter provider serves
//!   [`NAMED_DATA_SCOPE`] from the `.pte`'s named data merged with the caller's external
//!   provider (the `.ptd`), whose named-data scope is set, so `get_named_data_map()` works.
//! - **Values are owned, not planned.** The file's memory plan is checked when parsed but no
//!   arena is allocated: inputs are moved in, delegate outputs are the tensors the backend
//!   returns, and every runtime tensor is released when `execute` returns, so a method holds no
//!   activation memory between calls (the weights stay where the delegate put them).
//! - **Operators.** `KernelCall`s run only the prim ops of `prim_ops`; a method calling any other
//!   operator fails to load with `OperatorMissing` naming it (upstream's code for a kernel the
//!   runtime lacks), before any delegate is initialised or any weight fetched.

use crate::error::{Error, ErrorCode, Result};
use crate::evalue::{EValue, Tensor, TensorData};
use crate::params::{MemoryProvider, SharedProvider};
use crate::pte::file::PteFile;
use crate::pte::named_data::{NAMED_DATA_SCOPE, NamedDataUnion};
use crate::pte::plan::{Dynamism, Instruction, MethodPlan, TensorSource, TensorSpec, ValueSpec};
use crate::pte::prim_ops::PrimOp;
use crate::registry::{
    BackendInitContext, FreeableBuffer, LoadBackendOptionsMap, LoadedDelegate, get_backend_class,
};
use std::sync::Arc;

/// The most instructions one `execute` may run (a guard against a jump loop in a crafted file:
/// `InvalidProgram` instead of a hang).
pub const MAX_INSTRUCTIONS_PER_EXECUTE: usize = 1 << 24;

/// How a method finds its backends and data.
#[derive(Clone, Default)]
pub struct MethodLoadOptions {
    /// Delegate backend id -> the registered backend that runs it (e.g.
    /// `("WebDelegateBackend", "webgpu")`). Ids not listed are looked up as they are.
    pub backends: Vec<(String, String)>,
    /// Runtime specs per backend (upstream's `LoadBackendOptionsMap`), keyed by the registered
    /// backend's name.
    pub load_options: LoadBackendOptionsMap,
    /// The external named data (the `.ptd`), serving [`NAMED_DATA_SCOPE`].
    pub external_data: Option<SharedProvider>,
}

impl MethodLoadOptions {
    /// The registered backend that runs delegates with id `delegate_id`.
    pub fn backend_for<'a>(&'a self, delegate_id: &'a str) -> &'a str {
        self.backends
            .iter()
            .find(|(id, _)| id == delegate_id)
            .map_or(delegate_id, |(_, backend)| backend.as_str())
    }
}

/// A method ready to execute.
pub struct Method {
    plan: MethodPlan,
    initial: Vec<EValue>,
    values: Vec<EValue>,
    prim_ops: Vec<Option<PrimOp>>,
    delegates: Vec<LoadedDelegate>,
    parameters: SharedProvider,
}

impl std::fmt::Debug for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Method")
            .field("name", &self.plan.name())
            .field("delegates", &self.delegates)
            .finish_non_exhaustive()
    }
}

/// The bytes of a constant as a tensor of `spec`'s type and sizes.
fn constant_tensor(spec: &TensorSpec, bytes: &[u8]) -> Result<Tensor> {
    Tensor::new(
        spec.sizes.clone(),
        TensorData::from_le_bytes(spec.dtype, bytes)?,
    )
}

impl Method {
    /// Loads method `name` of `file`: checks every operator, builds the value table, and
    /// initialises every delegate in order (all or nothing: a failure destroys the delegates
    /// already initialised).
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown method; `OperatorMissing` for an operator this runtime
    /// does not run; `NotSupported` for a constant tensor the method reads from named data
    /// outside a delegate; `NotFound` for a backend id nobody registered (naming it and the
    /// mapping option); otherwise the backend's `init` error.
    pub async fn load(file: &PteFile, name: &str, options: &MethodLoadOptions) -> Result<Self> {
        let plan = file.method(name)?.clone();
        let prim_ops = plan
            .operators()
            .iter()
            .map(PrimOp::lookup)
            .collect::<Vec<_>>();
        for chain in plan.chains() {
            for instruction in chain {
                if let Instruction::Kernel { operator, args } = instruction {
                    let op_name = &plan.operators()[*operator];
                    let prim = prim_ops[*operator].ok_or_else(|| {
                        Error::new(
                            ErrorCode::OperatorMissing,
                            format!(
                                "method {name:?} calls operator {op_name}, which this runtime \
                                 does not run (it runs delegates and the prim ops of dynamic \
                                 shapes); export with the webdelegate partitioner so every \
                                 operator lands in a delegate"
                            ),
                        )
                    })?;
                    if args.len() != prim.arity() {
                        return Err(Error::invalid_program(format!(
                            "method {name:?}: {op_name} takes {} values, the call passes {}",
                            prim.arity(),
                            args.len()
                        )));
                    }
                }
            }
        }
        let initial = plan
            .values()
            .iter()
            .map(|value| {
                Ok(match value {
                    ValueSpec::Int(v) => EValue::Int(*v),
                    ValueSpec::Bool(v) => EValue::Bool(*v),
                    ValueSpec::Double(v) => EValue::Double(*v),
                    ValueSpec::String(v) => EValue::String(v.clone()),
                    ValueSpec::Tensor(spec) => match &spec.source {
                        TensorSource::Constant(range) => {
                            EValue::Tensor(constant_tensor(spec, file.slice(range))?)
                        }
                        TensorSource::External(key) => {
                            return Err(Error::not_supported(format!(
                                "method {name:?} reads tensor {key:?} from named data outside \
                                 a delegate; only delegates read named data here"
                            )));
                        }
                        TensorSource::Runtime { .. } => EValue::None,
                    },
                    // Lists are read only by kernels, which this runtime does not run.
                    _ => EValue::None,
                })
            })
            .collect::<Result<Vec<_>>>()?;

        let inline = Arc::new(MemoryProvider::new());
        // The scope exists even when the .pte has no named data, so `get_named_data_map()` is an
        // empty map rather than `NotFound` (a backend that always asks would fail to init).
        inline.add_scope(NAMED_DATA_SCOPE, false);
        for (key, bytes) in file.named_data() {
            inline.insert(NAMED_DATA_SCOPE, key, bytes.to_vec());
        }
        let parameters: SharedProvider =
            Arc::new(NamedDataUnion::new(inline, options.external_data.clone()));
        let mut delegates = Vec::with_capacity(plan.delegates().len());
        for (index, delegate) in plan.delegates().iter().enumerate() {
            let backend_name = options.backend_for(&delegate.id);
            let backend = get_backend_class(backend_name).ok_or_else(|| {
                let mapped = if backend_name == delegate.id {
                    format!(
                        "no backend is registered under {:?} (register one under that id, or \
                         map the id to a registered backend)",
                        delegate.id
                    )
                } else {
                    format!("it is mapped to backend {backend_name:?}, which is not registered")
                };
                Error::not_found(format!(
                    "method {name:?}, delegate {index} ({}): {mapped}",
                    delegate.id
                ))
            })?;
            let context =
                BackendInitContext::for_backend(backend_name, Some(name), &options.load_options)
                    .with_parameters(Arc::clone(&parameters))
                    .with_named_data_scope(NAMED_DATA_SCOPE);
            let processed = FreeableBuffer::new(file.slice(&delegate.processed).to_vec());
            let loaded = LoadedDelegate::init_with_backend(
                backend_name,
                backend,
                processed,
                &delegate.compile_specs,
                &context,
            )
            .await
            .map_err(|e| {
                let hint = if e.code() == ErrorCode::NotFound && options.external_data.is_none() {
                    " (no external data was given: pass the program's .ptd)"
                } else {
                    ""
                };
                Error::new(
                    e.code(),
                    format!(
                        "method {name:?}, delegate {index} ({} on {backend_name:?}): {}{hint}",
                        delegate.id,
                        e.message()
                    ),
                )
            })?;
            delegates.push(loaded);
        }
        Ok(Self {
            values: initial.clone(),
            initial,
            plan,
            prim_ops,
            delegates,
            parameters,
        })
    }

    /// The method's plan (values, inputs, outputs, instructions, delegates).
    pub fn plan(&self) -> &MethodPlan {
        &self.plan
    }

    /// The loaded delegates, in the plan's order.
    pub fn delegates(&self) -> &[LoadedDelegate] {
        &self.delegates
    }

    /// The provider the delegates read their named data from.
    pub fn parameters(&self) -> &SharedProvider {
        &self.parameters
    }

    /// Checks input `at` against its declaration.
    fn check_input(&self, at: usize, input: &EValue) -> Result<()> {
        let spec = &self.plan.values()[self.plan.inputs()[at]];
        let mismatch = |what: String| Error::invalid_argument(format!("input {at}: {what}"));
        match (spec, input) {
            (ValueSpec::Tensor(spec), EValue::Tensor(tensor)) => {
                if tensor.dtype() != spec.dtype {
                    return Err(mismatch(format!(
                        "expected a {:?} tensor, got {:?}",
                        spec.dtype,
                        tensor.dtype()
                    )));
                }
                let shape = tensor.shape();
                let fits = shape.len() == spec.sizes.len()
                    && match spec.dynamism {
                        Dynamism::Static => shape == spec.sizes.as_slice(),
                        Dynamism::Bound => shape.iter().zip(&spec.sizes).all(|(s, b)| s <= b),
                        Dynamism::Unbound => true,
                    };
                if !fits {
                    return Err(mismatch(format!(
                        "shape {shape:?} does not fit the declared {} sizes {:?}",
                        spec.dynamism.name(),
                        spec.sizes
                    )));
                }
                Ok(())
            }
            (ValueSpec::Int(_), EValue::Int(_))
            | (ValueSpec::Bool(_), EValue::Bool(_))
            | (ValueSpec::Double(_), EValue::Double(_))
            | (ValueSpec::None, EValue::None) => Ok(()),
            (spec, input) => Err(mismatch(format!(
                "expected a {}, got a {}",
                spec.tag(),
                input.tag()
            ))),
        }
    }

    /// Runs the method on `inputs` (one per declared input) and returns its outputs.
    ///
    /// # Errors
    /// `InvalidArgument` for a wrong input count, kind, dtype or shape, or a prim op's bad
    /// operands; `InvalidProgram` for a jump on a non-boolean or a run past
    /// [`MAX_INSTRUCTIONS_PER_EXECUTE`]; `InvalidState` when an output was never produced;
    /// a delegate's error, naming the delegate. The method stays usable after an error.
    pub async fn execute(&mut self, inputs: Vec<EValue>) -> Result<Vec<EValue>> {
        if inputs.len() != self.plan.inputs().len() {
            return Err(Error::invalid_argument(format!(
                "method {:?} takes {} inputs, got {}",
                self.plan.name(),
                self.plan.inputs().len(),
                inputs.len()
            )));
        }
        for (at, input) in inputs.iter().enumerate() {
            self.check_input(at, input)?;
        }
        self.values.clone_from(&self.initial);
        for (&index, input) in self.plan.inputs().iter().zip(inputs) {
            self.values[index] = input;
        }
        let result = self.run_chains().await;
        let outputs = result.and_then(|()| {
            self.plan
                .outputs()
                .iter()
                .enumerate()
                .map(|(at, &index)| {
                    match std::mem::replace(&mut self.values[index], EValue::None) {
                        EValue::None
                            if matches!(self.plan.values()[index], ValueSpec::Tensor(_)) =>
                        {
                            Err(Error::invalid_state(format!(
                                "method {:?}: output {at} (value {index}) was never produced",
                                self.plan.name()
                            )))
                        }
                        value => Ok(value),
                    }
                })
                .collect()
        });
        // Release every runtime tensor: no activation outlives the call.
        self.values.clone_from(&self.initial);
        outputs
    }

    async fn run_chains(&mut self) -> Result<()> {
        let mut budget = MAX_INSTRUCTIONS_PER_EXECUTE;
        for chain_index in 0..self.plan.chains().len() {
            let mut pc = 0;
            while let Some(instruction) = self.plan.chains()[chain_index].get(pc).cloned() {
                budget = budget.checked_sub(1).ok_or_else(|| {
                    Error::invalid_program(format!(
                        "method {:?} ran {MAX_INSTRUCTIONS_PER_EXECUTE} instructions without \
                         ending (a jump loop?)",
                        self.plan.name()
                    ))
                })?;
                pc = self.step(chain_index, pc, instruction).await?;
            }
        }
        Ok(())
    }

    /// Runs one instruction; returns the next instruction's index.
    async fn step(&mut self, chain: usize, pc: usize, instruction: Instruction) -> Result<usize> {
        match instruction {
            Instruction::Kernel { operator, args } => {
                let op_name = &self.plan.operators()[operator];
                // Checked at load: every kernel call names a prim op of the right arity.
                let prim = self.prim_ops[operator].ok_or_else(|| {
                    Error::internal(format!("operator {op_name} is not a prim op"))
                })?;
                let (out, operands) = args
                    .split_last()
                    .ok_or_else(|| Error::internal("a kernel call without arguments"))?;
                let operands: Vec<&EValue> = operands.iter().map(|&i| &self.values[i]).collect();
                let result = prim.run(op_name, &operands).map_err(|e| {
                    Error::new(
                        e.code(),
                        format!("chain {chain}, instruction {pc}: {}", e.message()),
                    )
                })?;
                self.values[*out] = result;
            }
            Instruction::Delegate { delegate, args } => {
                let mut call_args: Vec<EValue> = Vec::with_capacity(args.len());
                for (at, &index) in args.iter().enumerate() {
                    // A value passed twice is moved once and copied for the later slot.
                    let value = match args[..at].iter().position(|&i| i == index) {
                        Some(first) => call_args[first].clone(),
                        None => std::mem::replace(&mut self.values[index], EValue::None),
                    };
                    call_args.push(value);
                }
                let result = self.delegates[delegate].execute(&mut call_args).await;
                let id = self.delegates[delegate].backend_id().to_owned();
                for (&index, value) in args.iter().zip(call_args) {
                    self.values[index] = value;
                }
                result.map_err(|e| {
                    Error::new(
                        e.code(),
                        format!(
                            "method {:?}, delegate {delegate} ({id}): {}",
                            self.plan.name(),
                            e.message()
                        ),
                    )
                })?;
                self.check_delegate_outputs(delegate, &args)?;
            }
            Instruction::Move { from, to } => {
                self.values[to] = self.values[from].clone();
            }
            Instruction::JumpFalse {
                condition,
                destination,
            } => {
                return match self.values[condition] {
                    EValue::Bool(true) => Ok(pc + 1),
                    EValue::Bool(false) => Ok(destination),
                    ref other => Err(Error::invalid_program(format!(
                        "chain {chain}, instruction {pc}: jumps on value {condition}, a {}, \
                         not a Bool",
                        other.tag()
                    ))),
                };
            }
            Instruction::Free { value } => {
                if matches!(self.plan.values()[value], ValueSpec::Tensor(_)) {
                    self.values[value] = self.initial[value].clone();
                }
            }
        }
        Ok(pc + 1)
    }

    /// Every tensor value a delegate call names must hold a tensor of its declared type and
    /// rank afterwards (the backend returned what the `.pte` declares).
    fn check_delegate_outputs(&self, delegate: usize, args: &[usize]) -> Result<()> {
        for &index in args {
            let ValueSpec::Tensor(spec) = &self.plan.values()[index] else {
                continue;
            };
            let ok = match &self.values[index] {
                EValue::Tensor(tensor) => {
                    tensor.dtype() == spec.dtype && tensor.shape().len() == spec.sizes.len()
                }
                _ => false,
            };
            if !ok {
                return Err(Error::invalid_argument(format!(
                    "method {:?}, delegate {delegate}: value {index} should be a {:?} tensor of \
                     rank {} after the call, the backend left a {}",
                    self.plan.name(),
                    spec.dtype,
                    spec.sizes.len(),
                    describe(&self.values[index])
                )));
            }
        }
        Ok(())
    }

    /// Sets every delegate's state (ExecuTorch's mutable buffers, e.g. a KV cache) back to
    /// zero. Delegates that keep no state are skipped.
    ///
    /// # Errors
    /// A delegate's error other than `NotSupported`.
    pub fn reset_state(&mut self) -> Result<()> {
        for delegate in &mut self.delegates {
            match delegate.reset_state() {
                Err(e) if e.code() != ErrorCode::NotSupported => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

fn describe(value: &EValue) -> String {
    match value {
        EValue::Tensor(t) => format!("{:?} tensor of shape {:?}", t.dtype(), t.shape()),
        other => other.tag().to_owned(),
    }
}

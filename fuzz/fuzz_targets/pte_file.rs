//! `PteFile::parse` on arbitrary bytes: it must never panic, and every refusal is
//! `InvalidProgram` or `NotSupported`. What parses is loaded (`Method::load`: no backend is
//! registered in this process, so delegates are `NotFound`; operators other than prim ops are
//! `OperatorMissing`) and, when that succeeds and the method has no jumps (a loop would run up
//! to the instruction cap), executed once on zero inputs of the declared sizes.
//! Its deterministic counterpart in `cargo test` is `mutants_never_panic` in tests/pte_reader.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webdelegate::pte::{Instruction, Method, MethodLoadOptions, PteFile, ValueSpec};
use webdelegate::{EValue, ErrorCode, Tensor};

fuzz_target!(|bytes: &[u8]| {
    let file = match PteFile::parse(bytes.to_vec()) {
        Ok(file) => file,
        Err(error) => {
            assert!(
                matches!(error.code(), ErrorCode::InvalidProgram | ErrorCode::NotSupported),
                "unexpected code {error}"
            );
            return;
        }
    };
    let options = MethodLoadOptions::default();
    for plan in file.methods() {
        let Ok(mut method) = pollster::block_on(Method::load(&file, plan.name(), &options)) else {
            continue;
        };
        if plan
            .chains()
            .iter()
            .flatten()
            .any(|i| matches!(i, Instruction::JumpFalse { .. }))
        {
            continue;
        }
        let inputs: Option<Vec<EValue>> = plan
            .inputs()
            .iter()
            .map(|&i| match &plan.values()[i] {
                ValueSpec::Tensor(t) if t.nbytes() <= 1 << 16 => {
                    Tensor::zeros(t.dtype, t.sizes.clone()).ok().map(EValue::Tensor)
                }
                ValueSpec::Int(v) => Some(EValue::Int(*v)),
                ValueSpec::Bool(v) => Some(EValue::Bool(*v)),
                ValueSpec::Double(v) => Some(EValue::Double(*v)),
                ValueSpec::None => Some(EValue::None),
                _ => None,
            })
            .collect();
        if let Some(inputs) = inputs {
            let _ = pollster::block_on(method.execute(inputs));
        }
    }
});

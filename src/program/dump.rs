//! A stable, line-oriented text form of a program, for debugging and for golden tests.
//!
//! The format (one item per line, in this order; `%N` is tensor N, `$N` symbol N, `#N` op N):
//!
//! ```text
//! webdelegate program format 1
//! symbol $0 "batch"
//! tensor %0 i64 [$0, 8] "ids"
//! tensor %1 f32 [100, 16] "table"
//! tensor %2 f32 [$0, 8, 16] "emb"
//! input 0 %0
//! param 0 %1 scope "weights" key "embeddings"
//! op #0 gather table=%1 ids=%0 -> %2
//! output 0 %2
//! ```
//!
//! - Strings are quoted; `"` and `\` are escaped with `\`, and any character outside printable
//!   ASCII is written `\u{HEX}`, so the text does not depend on the Rust version or locale.
//! - Op attributes appear in the order of the fields of the op's struct, as `name=value`; optional
//!   tensors that are absent are written `none`; floats use Rust's shortest round-trip form.
//! - The dump never fails and never panics, even for programs that do not validate (it prints
//!   what is there), so it can show why a blob was refused.

use crate::program::format::FORMAT_VERSION;
use crate::program::infer::shape_text;
use crate::program::ir::Program;
use crate::program::ops::support::tensor_text as t;
use std::fmt::Write;

/// `s` quoted and escaped (see the module docs).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// The program as text (see the module docs for the format).
pub fn dump(program: &Program) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "webdelegate program format {FORMAT_VERSION}");
    for (index, name) in program.symbols.iter().enumerate() {
        let _ = writeln!(out, "symbol ${index} {}", quote(name));
    }
    for (id, decl) in program.tensors.iter().enumerate() {
        let _ = writeln!(
            out,
            "tensor %{id} {} {} {}",
            decl.dtype.name(),
            shape_text(&decl.shape),
            quote(&decl.name)
        );
    }
    for (position, id) in program.inputs.iter().enumerate() {
        let _ = writeln!(out, "input {position} {}", t(*id));
    }
    for (position, param) in program.params.iter().enumerate() {
        let _ = writeln!(
            out,
            "param {position} {} scope {} key {}",
            t(param.tensor),
            quote(&param.scope),
            quote(&param.key)
        );
    }
    for (position, id) in program.states.iter().enumerate() {
        let _ = writeln!(out, "state {position} {}", t(*id));
    }
    for (index, op) in program.ops.iter().enumerate() {
        let attributes = op.attributes();
        let separator = if attributes.is_empty() { "" } else { " " };
        let _ = writeln!(
            out,
            "op #{index} {}{separator}{attributes} -> {}",
            op.name(),
            t(op.output())
        );
    }
    for (position, id) in program.outputs.iter().enumerate() {
        let _ = writeln!(out, "output {position} {}", t(*id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::ops::Range;
    use crate::program::{DType, Dim, Op, ProgramBuilder};

    #[test]
    fn dump_is_stable_line_per_item() {
        let mut b = ProgramBuilder::new();
        let batch = b.symbol("batch");
        let ids = b.input("ids", DType::I64, vec![batch, Dim::Fixed(8)]);
        let table = b.param(
            "table",
            DType::F32,
            vec![Dim::Fixed(100), Dim::Fixed(16)],
            "weights",
            "embeddings",
        );
        let emb = b.gather(table, ids).unwrap();
        let probs = b.softmax(emb, None).unwrap();
        let scaled = b.scale(probs, 0.125, -1.0).unwrap();
        let head = b.slice(scaled, 1, 0, Some(1)).unwrap();
        b.set_name(head, "q\"uote\u{e9}").unwrap();
        b.output(head);
        b.state("cache", DType::F32, vec![Dim::Fixed(4)]);
        let expected = "\
webdelegate program format 4
symbol $0 \"batch\"
tensor %0 i64 [$0, 8] \"ids\"
tensor %1 f32 [100, 16] \"table\"
tensor %2 f32 [$0, 8, 16] \"gather.0\"
tensor %3 f32 [$0, 8, 16] \"softmax.1\"
tensor %4 f32 [$0, 8, 16] \"scale.2\"
tensor %5 f32 [$0, 1, 16] \"q\\\"uote\\u{e9}\"
tensor %6 f32 [4] \"cache\"
input 0 %0
param 0 %1 scope \"weights\" key \"embeddings\"
state 0 %6
op #0 gather table=%1 ids=%0 -> %2
op #1 softmax x=%2 mask=none -> %3
op #2 scale x=%3 scale=0.125 bias=-1.0 -> %4
op #3 slice x=%4 axis=1 start=0 end=1 -> %5
output 0 %5
";
        assert_eq!(dump(b.program()), expected);
    }

    #[test]
    fn dump_prints_invalid_programs_without_panicking() {
        let mut program = Program::default();
        program.inputs.push(7);
        program.ops.push(Op::Range(Range { out: 9 }));
        program.outputs.push(3);
        let text = dump(&program);
        assert!(text.contains("input 0 %7"));
        assert!(text.contains("op #0 range -> %9"));
    }
}

//! `webdelegate-lower [IN.json|-] [OUT.wdpg|-]`: the ahead-of-time door into the program format
//! for other languages. Reads a program as JSON (serde's form of `webdelegate::program::Program`:
//! `{"symbols": [...], "tensors": [...], "inputs": [...], "outputs": [...], "params": [...],
//! "ops": [{"Linear": {...}}, ...], "states": [...]}`), validates it with the same checks a
//! backend's `init` runs, and writes the versioned program blob. `--dump` prints the program's
//! text form to stderr. The Python partitioner (`python/webdelegate_executorch`) calls it from
//! `preprocess`, so a blob that exports is a blob that loads.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("webdelegate-lower: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn run(args: Vec<String>) -> Result<(), String> {
    use std::io::{Read, Write};
    use webdelegate::program::{Program, dump, encode, load};

    let usage = "usage: webdelegate-lower [--dump] [IN.json|-] [OUT.wdpg|-]";
    let mut print_dump = false;
    let mut positional = Vec::new();
    for arg in args {
        match arg.as_str() {
            "--dump" => print_dump = true,
            "-h" | "--help" => return Err(usage.to_owned()),
            _ => positional.push(arg),
        }
    }
    if positional.len() > 2 {
        return Err(usage.to_owned());
    }
    let input = positional.first().map_or("-", String::as_str);
    let output = positional.get(1).map_or("-", String::as_str);
    let json = if input == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("stdin: {e}"))?;
        text
    } else {
        std::fs::read_to_string(input).map_err(|e| format!("{input}: {e}"))?
    };
    let program: Program =
        serde_json::from_str(&json).map_err(|e| format!("{input}: not a program: {e}"))?;
    let blob = encode(&program).map_err(|e| e.to_string())?;
    let checked = load(&blob).map_err(|e| format!("the program does not validate: {e}"))?;
    if print_dump {
        eprintln!("{}", dump(&checked));
    }
    if output == "-" {
        std::io::stdout()
            .write_all(&blob)
            .map_err(|e| format!("stdout: {e}"))?;
    } else {
        std::fs::write(output, &blob).map_err(|e| format!("{output}: {e}"))?;
    }
    Ok(())
}

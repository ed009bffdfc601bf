//! `bert-program MODEL_DIR OUT.wdpg [--scope NAME] [--weights FILE]`: writes the sentence-embedding
//! program of a BERT-family checkpoint (config.json + the weights file's index, read from its
//! header only) as a webdelegate program blob, and prints its text dump summary.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bert-program: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn run(args: Vec<String>) -> Result<(), String> {
    use std::path::PathBuf;
    use webdelegate::models::bert::{BertConfig, sentence_embedding_program};
    use webdelegate::params::RangeRead;
    use webdelegate::params::formats::{detect, parse_index};

    let usage = "usage: bert-program MODEL_DIR OUT.wdpg [--scope NAME] [--weights FILE]";
    let mut positional = Vec::new();
    let mut scope = "model".to_owned();
    let mut weights = "model.safetensors".to_owned();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--scope" => scope = args.next().ok_or(usage)?,
            "--weights" => weights = args.next().ok_or(usage)?,
            "-h" | "--help" => return Err(usage.to_owned()),
            _ => positional.push(arg),
        }
    }
    let [model_dir, out] = <[String; 2]>::try_from(positional).map_err(|_| usage.to_owned())?;
    let model_dir = PathBuf::from(model_dir);
    let config_path = model_dir.join("config.json");
    let config_json = std::fs::read_to_string(&config_path)
        .map_err(|e| format!("{}: {e}", config_path.display()))?;
    let config = BertConfig::from_json(&config_json).map_err(|e| e.to_string())?;
    let weights_path = model_dir.join(&weights);
    let file =
        LocalFile::open(&weights_path).map_err(|e| format!("{}: {e}", weights_path.display()))?;
    let head =
        pollster::block_on(file.read_range(0, file.len.min(64))).map_err(|e| e.to_string())?;
    let format = detect(&weights, &head).map_err(|e| e.to_string())?;
    // Only the header is read: the parsers ask for the few ranges they need.
    let index = pollster::block_on(parse_index(format, &file)).map_err(|e| e.to_string())?;
    let program = sentence_embedding_program(&config, &index, &scope).map_err(|e| e.to_string())?;
    let blob = webdelegate::program::encode(&program).map_err(|e| e.to_string())?;
    webdelegate::program::load(&blob)
        .map_err(|e| format!("the built program does not validate: {e}"))?;
    std::fs::write(&out, &blob).map_err(|e| format!("{out}: {e}"))?;
    println!(
        "{out}: {} bytes, {} tensors, {} ops, {} parameters in scope {scope:?}",
        blob.len(),
        program.tensors.len(),
        program.ops.len(),
        program.params.len()
    );
    Ok(())
}

/// A local file read by ranges (what the index parsers need).
#[cfg(not(target_arch = "wasm32"))]
struct LocalFile {
    file: std::sync::Mutex<std::fs::File>,
    len: u64,
}

#[cfg(not(target_arch = "wasm32"))]
impl LocalFile {
    fn open(path: &std::path::Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Self {
            file: std::sync::Mutex::new(file),
            len,
        })
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl webdelegate::params::RangeRead for LocalFile {
    fn size(&self) -> Option<u64> {
        Some(self.len)
    }

    fn read_range(
        &self,
        offset: u64,
        length: u64,
    ) -> webdelegate::registry::LocalBoxFuture<'_, webdelegate::params::StatusResult<Vec<u8>>> {
        use std::io::{Read, Seek, SeekFrom};
        use webdelegate::{Status, StatusCode};
        Box::pin(async move {
            webdelegate::params::check_span("file", offset, length, self.len)?;
            let io = |e: std::io::Error| Status::new(StatusCode::Unavailable, e.to_string());
            let mut file = self
                .file
                .lock()
                .map_err(|_| Status::new(StatusCode::Internal, "file lock poisoned"))?;
            file.seek(SeekFrom::Start(offset)).map_err(io)?;
            let mut bytes =
                vec![
                    0;
                    usize::try_from(length)
                        .map_err(|_| Status::new(StatusCode::OutOfRange, "range too large"))?
                ];
            file.read_exact(&mut bytes).map_err(io)?;
            Ok(bytes)
        })
    }
}

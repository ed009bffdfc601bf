//! The `bert-program` CLI on the real all-MiniLM-L6-v2 directory: the blob it writes is byte
//! for byte the library's encoding of the program built from the same config and index (with
//! the default scope and with `--scope`), the program a provider's catalog yields is the same,
//! and bad invocations fail with a message and a non-zero exit status.
#![cfg(not(target_arch = "wasm32"))]

mod minilm_support;

use minilm_support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use webdelegate::models::bert::{BertConfig, sentence_embedding_program};
use webdelegate::models::catalog::ProviderCatalog;
use webdelegate::params::ParameterIndex;
use webdelegate::params::formats::{Format, parse_index};
use webdelegate::program;

fn cli(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bert-program"))
        .args(args)
        .output()
        .expect("the bert-program binary runs")
}

/// A fresh scratch directory for this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bert-program-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config() -> BertConfig {
    BertConfig::from_json(std::str::from_utf8(&model_file("config.json")).unwrap()).unwrap()
}

fn index() -> ParameterIndex {
    let bytes = model_file("model.safetensors");
    pollster::block_on(parse_index(Format::Safetensors, bytes.as_slice())).unwrap()
}

fn library_blob(index: &ParameterIndex, scope: &str) -> Vec<u8> {
    program::encode(&sentence_embedding_program(&config(), index, scope).unwrap()).unwrap()
}

fn run_ok(args: &[&std::ffi::OsStr], out: &Path) -> Vec<u8> {
    let output = cli(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bert-program failed: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let blob = std::fs::read(out).unwrap();
    assert!(
        stdout.contains(&format!("{} bytes", blob.len())),
        "summary names the size: {stdout}"
    );
    blob
}

#[test]
fn writes_the_library_program_byte_for_byte() {
    let dir = scratch("ok");
    let index = index();
    let model = model_dir();

    let out = dir.join("default.wdpg");
    let blob = run_ok(&[model.as_os_str(), out.as_os_str()], &out);
    let expected = library_blob(&index, "model");
    assert_eq!(blob.len(), expected.len(), "blob size");
    assert!(
        blob == expected,
        "the CLI's blob differs from the library's"
    );
    program::load(&blob).expect("the blob validates");

    let out = dir.join("scoped.wdpg");
    let scoped = run_ok(
        &[
            model.as_os_str(),
            out.as_os_str(),
            "--scope".as_ref(),
            "minilm".as_ref(),
            "--weights".as_ref(),
            "model.safetensors".as_ref(),
        ],
        &out,
    );
    assert!(scoped == library_blob(&index, "minilm"), "--scope minilm");
    assert!(scoped != blob, "the scope is part of the program");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_provider_catalog_builds_the_same_program_as_the_index() {
    let (index, provider) = checkpoint();
    let from_provider = program::encode(
        &sentence_embedding_program(
            &config(),
            &ProviderCatalog::new(provider.as_ref(), SCOPE),
            SCOPE,
        )
        .unwrap(),
    )
    .unwrap();
    assert!(from_provider == library_blob(&index, SCOPE));
    let missing = sentence_embedding_program(
        &config(),
        &ProviderCatalog::new(provider.as_ref(), "no-such-scope"),
        SCOPE,
    )
    .unwrap_err();
    assert_eq!(
        missing.code(),
        webdelegate::ErrorCode::InvalidExternalData,
        "{missing}"
    );
}

#[test]
fn bad_invocations_fail_with_a_message() {
    let dir = scratch("bad");
    let out = dir.join("out.wdpg");
    let model = model_dir();
    let expect_failure = |args: &[&std::ffi::OsStr], needle: &str| {
        let output = cli(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(
            stderr.contains(needle),
            "{args:?}: stderr {stderr:?} lacks {needle:?}"
        );
    };
    expect_failure(&[], "usage: bert-program");
    expect_failure(&[model.as_os_str()], "usage: bert-program");
    expect_failure(
        &[model.as_os_str(), out.as_os_str(), "--scope".as_ref()],
        "usage: bert-program",
    );
    expect_failure(&[dir.as_os_str(), out.as_os_str()], "config.json");
    expect_failure(
        &[
            model.as_os_str(),
            out.as_os_str(),
            "--weights".as_ref(),
            "nope.safetensors".as_ref(),
        ],
        "nope.safetensors",
    );
    // A config whose hidden size disagrees with the checkpoint.
    let other = dir.join("model");
    std::fs::create_dir_all(&other).unwrap();
    let json = String::from_utf8(model_file("config.json"))
        .unwrap()
        .replace("\"hidden_size\": 384", "\"hidden_size\": 768");
    assert!(json.contains("768"), "config.json has hidden_size 384");
    std::fs::write(other.join("config.json"), json).unwrap();
    std::os::unix::fs::symlink(
        model.join("model.safetensors"),
        other.join("model.safetensors"),
    )
    .unwrap();
    expect_failure(&[other.as_os_str(), out.as_os_str()], "embeddings.");
    assert!(!out.exists(), "no blob is written on failure");
    let _ = std::fs::remove_dir_all(dir);
}

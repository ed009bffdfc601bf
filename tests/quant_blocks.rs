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

//! `TokenMask` on the CPU: a masked copy of the logits, one mask word per 32 values.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::values::Values;
use crate::error::{Error, Result};
use crate::program::ops::TokenMask;

/// `logits` (`rows` rows of `vocab`) with every value whose bit is clear in its row's mask
/// (`mask` has one row of `vocab.div_ceil(32)` words for all rows, or one per row) set to
/// `-inf`.
fn token_mask(logits: &[f32], mask: &[i32], rows: usize, vocab: usize) -> Result<Vec<f32>> {
    let words = vocab.div_ceil(32);
    let mask_rows = mask.len().checked_div(words).unwrap_or(0);
    if logits.len() != rows.saturating_mul(vocab)
        || mask.len() != mask_rows * words
        || (vocab > 0 && mask_rows != 1 && mask_rows != rows)
    {
        return Err(Error::invalid_argument(format!(
            "token_mask: a mask of {} words for {rows} rows of {vocab} logits; [1 or {rows}, \
             {words}] expected",
            mask.len()
        )));
    }
    let mut out = logits.to_vec();
    if vocab == 0 {
        return Ok(out);
    }
    for (r, row) in out.chunks_exact_mut(vocab).enumerate() {
        let m = if mask_rows == 1 { 0 } else { r };
        let bits = &mask[m * words..(m + 1) * words];
        for (values, &word) in row.chunks_mut(32).zip(bits) {
            if word == -1 {
                continue;
            }
            let word = word as u32;
            for (j, v) in values.iter_mut().enumerate() {
                if (word >> j) & 1 == 0 {
                    *v = f32::NEG_INFINITY;
                }
            }
        }
    }
    Ok(out)
}

impl CpuOp for TokenMask {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let vocab = cx.frame.last_dim(self.logits)?;
        let rows = cx.frame.numel(self.logits)? / vocab.max(1);
        let out = token_mask(
            cx.frame.f32(self.logits)?,
            cx.frame.typed::<i32>(self.mask)?,
            rows,
            vocab,
        )?;
        Ok(Slot::Owned(Values::F32(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_values_become_negative_infinity() {
        let inf = f32::NEG_INFINITY;
        let logits: Vec<f32> = (0..35).map(|i| i as f32).collect();
        // Tokens 0, 2 and 33 allowed; bits past 35 in the second word are ignored.
        let mask = [0b101, (1 << 1) | (1 << 20)];
        let out = token_mask(&logits, &mask, 1, 35).unwrap();
        for (i, &v) in out.iter().enumerate() {
            let want = if [0, 2, 33].contains(&i) {
                i as f32
            } else {
                inf
            };
            assert_eq!(v, want, "token {i}");
        }
        // One mask for two rows, and one mask per row.
        let two = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            token_mask(&two, &[0b10], 2, 2).unwrap(),
            [inf, 2.0, inf, 4.0]
        );
        assert_eq!(
            token_mask(&two, &[0b10, 0b01], 2, 2).unwrap(),
            [inf, 2.0, 3.0, inf]
        );
        // All ones keeps everything, NaN included.
        let nan = [f32::NAN, 1.0];
        let kept = token_mask(&nan, &[-1], 1, 2).unwrap();
        assert!(kept[0].is_nan() && kept[1] == 1.0);
        // A mask that fits neither one row nor every row.
        let err = token_mask(&[0.0; 6], &[1, 1], 3, 2).unwrap_err();
        assert!(err.message().contains("[1 or 3, 1]"), "{err}");
    }
}

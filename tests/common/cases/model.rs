//! A small BERT-like encoder layer end to end: embeddings (word + position), layer norm,
//! two-head self-attention under a padding mask, feed-forward with GELU, residuals, mean
//! pooling and L2 normalisation, run for two different (batch, sequence) bindings on one
//! initialised delegate and compared with the same computation in f64.

use crate::common::harness::{Model, SuiteConfig, assert_close, execute, i64_tensor};
use crate::common::reference::{self, Ref};
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::program::{DType, Dim};
use webdelegate::registry::SharedBackend;

const VOCAB: usize = 30;
const MAX_POSITIONS: usize = 16;
const HIDDEN: usize = 16;
const HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;
const FFN: usize = 32;

/// The weights, by name.
struct Weights(Vec<(String, Vec<usize>, Vec<f32>)>);

impl Weights {
    fn random(rng: &mut Rng) -> Self {
        let mut all = Vec::new();
        let mut add = |name: &str, shape: &[usize], low: f32, high: f32| {
            let values = rng.vec(shape.iter().product(), low, high);
            all.push((name.to_owned(), shape.to_vec(), values));
        };
        add("word", &[VOCAB, HIDDEN], -1.0, 1.0);
        add("position", &[MAX_POSITIONS, HIDDEN], -0.5, 0.5);
        for layer in ["ln0", "ln1", "ln2"] {
            add(&format!("{layer}.gamma"), &[HIDDEN], 0.8, 1.2);
            add(&format!("{layer}.beta"), &[HIDDEN], -0.1, 0.1);
        }
        for (weight, bias, out, inner) in [
            ("q.w", "q.b", HIDDEN, HIDDEN),
            ("k.w", "k.b", HIDDEN, HIDDEN),
            ("v.w", "v.b", HIDDEN, HIDDEN),
            ("o.w", "o.b", HIDDEN, HIDDEN),
            ("ff1.w", "ff1.b", FFN, HIDDEN),
            ("ff2.w", "ff2.b", HIDDEN, FFN),
        ] {
            let bound = 1.0 / (inner as f32).sqrt();
            add(weight, &[out, inner], -bound, bound);
            add(bias, &[out], -0.1, 0.1);
        }
        Self(all)
    }

    fn get(&self, name: &str) -> Ref {
        let (_, shape, values) = self.0.iter().find(|(n, _, _)| *n == name).expect(name);
        Ref::new(shape, values)
    }
}

/// Builds the program; returns the model (outputs: hidden states, sentence embedding).
fn build(weights: &Weights) -> Model {
    let mut m = Model::new();
    let p: std::collections::HashMap<String, u32> = weights
        .0
        .iter()
        .map(|(name, shape, values)| (name.clone(), m.param(name, shape, values)))
        .collect();
    let b = &mut m.b;
    let (batch, seq) = (b.symbol("batch"), b.symbol("seq"));
    let ids = b.input("input_ids", DType::I64, vec![batch, seq]);
    let mask = b.input("attention_mask", DType::I64, vec![batch, seq]);
    let fixed = |d: usize| Dim::Fixed(d as u64);

    let positions = b.range(seq, DType::I64).unwrap();
    let words = b.gather(p["word"], ids).unwrap();
    let position_rows = b.gather(p["position"], positions).unwrap();
    let embedded = b.add(words, position_rows).unwrap();
    let x = b
        .layer_norm(embedded, p["ln0.gamma"], p["ln0.beta"], 1e-12)
        .unwrap();

    let heads = |b: &mut webdelegate::program::ProgramBuilder, w: &str, bias: &str| {
        let projected = b.matmul(x, p[w], Some(p[bias]), false, true).unwrap();
        let split = b
            .reshape(projected, vec![batch, seq, fixed(HEADS), fixed(HEAD_DIM)])
            .unwrap();
        b.permute(split, vec![0, 2, 1, 3]).unwrap()
    };
    let q = heads(b, "q.w", "q.b");
    let k = heads(b, "k.w", "k.b");
    let v = heads(b, "v.w", "v.b");
    let scores = b.matmul(q, k, None, false, true).unwrap();
    let scaled = b
        .scale(scores, 1.0 / (HEAD_DIM as f32).sqrt(), 0.0)
        .unwrap();
    let mask_f32 = b.cast(mask, DType::F32).unwrap();
    let additive = b.scale(mask_f32, 10000.0, -10000.0).unwrap();
    let mask4 = b
        .reshape(additive, vec![batch, fixed(1), fixed(1), seq])
        .unwrap();
    let probs = b.softmax(scaled, Some(mask4)).unwrap();
    let context = b.matmul(probs, v, None, false, false).unwrap();
    let merged = b.permute(context, vec![0, 2, 1, 3]).unwrap();
    let merged = b.reshape(merged, vec![batch, seq, fixed(HIDDEN)]).unwrap();
    let attention = b
        .matmul(merged, p["o.w"], Some(p["o.b"]), false, true)
        .unwrap();
    let residual = b.add(attention, x).unwrap();
    let h1 = b
        .layer_norm(residual, p["ln1.gamma"], p["ln1.beta"], 1e-12)
        .unwrap();
    let up = b
        .matmul(h1, p["ff1.w"], Some(p["ff1.b"]), false, true)
        .unwrap();
    let activated = b.gelu(up).unwrap();
    let down = b
        .matmul(activated, p["ff2.w"], Some(p["ff2.b"]), false, true)
        .unwrap();
    let residual = b.add(down, h1).unwrap();
    let hidden = b
        .layer_norm(residual, p["ln2.gamma"], p["ln2.beta"], 1e-12)
        .unwrap();
    let pooled = b.mean_pool(hidden, mask).unwrap();
    let embedding = b.l2_normalize(pooled, 1e-12).unwrap();
    b.set_name(hidden, "last_hidden_state").unwrap();
    b.set_name(embedding, "sentence_embedding").unwrap();
    b.output(hidden).output(embedding);
    m
}

/// The same layer in f64.
fn reference_layer(w: &Weights, ids: &[i64], mask: &[i64], batch: usize, seq: usize) -> (Ref, Ref) {
    let words = reference::gather(&w.get("word"), ids, &[batch, seq]);
    let positions: Vec<i64> = (0..seq as i64).collect();
    let position_rows = reference::gather(&w.get("position"), &positions, &[seq]);
    let embedded = reference::binary(&words, &position_rows, |a, b| a + b);
    let ln = |x: &Ref, name: &str| {
        reference::layer_norm(
            x,
            &w.get(&format!("{name}.gamma")),
            &w.get(&format!("{name}.beta")),
            1e-12,
        )
    };
    let linear = |x: &Ref, name: &str| {
        reference::matmul(
            x,
            &w.get(&format!("{name}.w")),
            Some(&w.get(&format!("{name}.b"))),
            false,
            true,
        )
    };
    let x = ln(&embedded, "ln0");
    let heads = |name: &str| {
        let projected = linear(&x, name).reshape(&[batch, seq, HEADS, HEAD_DIM]);
        reference::permute(&projected, &[0, 2, 1, 3])
    };
    let (q, k, v) = (heads("q"), heads("k"), heads("v"));
    let scale = 1.0 / (HEAD_DIM as f64).sqrt();
    let scores = reference::matmul(&q, &k, None, false, true).map(|s| s * scale);
    let additive = Ref::from_f64(
        &[batch, 1, 1, seq],
        mask.iter().map(|&m| m as f64 * 10000.0 - 10000.0).collect(),
    );
    let probs = reference::softmax(&scores, Some(&additive));
    let context = reference::matmul(&probs, &v, None, false, false);
    let merged = reference::permute(&context, &[0, 2, 1, 3]).reshape(&[batch, seq, HIDDEN]);
    let h1 = ln(
        &reference::binary(&linear(&merged, "o"), &x, |a, b| a + b),
        "ln1",
    );
    let activated = linear(&h1, "ff1").map(reference::gelu);
    let hidden = ln(
        &reference::binary(&linear(&activated, "ff2"), &h1, |a, b| a + b),
        "ln2",
    );
    let keep = Ref::from_f64(&[batch, seq], mask.iter().map(|&m| m as f64).collect());
    let embedding = reference::l2_normalize(&reference::mean_pool(&hidden, &keep), 1e-12);
    (hidden, embedding)
}

op_case! {
/// The layer for `(2, 5)` with padding, then `(1, 7)`, on one delegate.
pub async fn bert_block_end_to_end(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(51);
    let weights = Weights::random(&mut rng);
    let model = build(&weights);
    let mut delegate = model.init(&backend).await.unwrap();
    for (batch, seq, padding) in [(2, 5, 2), (1, 7, 0), (2, 5, 2)] {
        let ids: Vec<i64> = (0..batch * seq).map(|_| rng.below(VOCAB) as i64).collect();
        // The last sequence of the batch ends in `padding` masked positions.
        let mask: Vec<i64> = (0..batch * seq)
            .map(|i| i64::from(!(i / seq == batch - 1 && i % seq >= seq - padding)))
            .collect();
        let got = execute(
            &mut delegate,
            vec![
                i64_tensor(&[batch, seq], ids.clone()),
                i64_tensor(&[batch, seq], mask.clone()),
            ],
            2,
        )
        .await
        .unwrap();
        let (hidden, embedding) = reference_layer(&weights, &ids, &mask, batch, seq);
        let what = format!("bert block ({batch}, {seq})");
        assert_close(&format!("{what} hidden"), &got[0], &hidden, config.model);
        assert_close(
            &format!("{what} embedding"),
            &got[1],
            &embedding,
            config.model,
        );
    }
}
}

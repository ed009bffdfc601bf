// The side-by-side benchmark's inputs: texts that all-MiniLM-L6-v2's tokenizer turns into exactly
// SEQ tokens each, and those token ids, so webdelegate (which takes texts) and onnxruntime-web
// (which takes ids) run the very same batch.
//
// Each text is SEQ - 2 distinct lower-case ASCII words taken from the model's vocab.txt, joined
// by spaces: the BERT normaliser leaves them as they are, the pre-tokeniser splits on the spaces
// and WordPiece maps a word that is in the vocabulary to its own id, so the ids are
// [CLS] w1 ... w126 [SEP] with no padding. `verifyWithTokenizers` checks that claim with the
// reference tokenizer (HF `tokenizers`, Python) on the model's own tokenizer.json.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

/** Tokens per row, [CLS] and [SEP] included. */
export const SEQ = 128;
/** Rows in the larger batch (the smaller one is the first row alone). */
export const BATCH = 8;

/**
 * Reads `vocab.txt` in `modelDir` and builds BATCH texts of exactly SEQ tokens.
 * @returns {Promise<{texts: string[], ids: number[][]}>} ids[i] are the SEQ token ids of texts[i]
 */
export async function makeInputs(modelDir) {
  const vocab = (await readFile(path.join(modelDir, 'vocab.txt'), 'utf8')).split('\n').map((l) => l.trim());
  const idOf = (token) => {
    const id = vocab.indexOf(token);
    if (id < 0) throw new Error(`${token} is not in ${modelDir}/vocab.txt`);
    return id;
  };
  const cls = idOf('[CLS]');
  const sep = idOf('[SEP]');
  // Whole words only (no "##" pieces, no digits or punctuation), 3..10 letters.
  const words = [];
  vocab.forEach((token, id) => { if (/^[a-z]{3,10}$/.test(token)) words.push({ token, id }); });
  const perText = SEQ - 2;
  if (words.length < perText * BATCH) throw new Error(`only ${words.length} whole words in vocab.txt`);
  // A fixed stride co-prime with the word count spreads each text over the vocabulary.
  let stride = 7919;
  while (gcd(stride, words.length) !== 1) stride += 2;
  const texts = [];
  const ids = [];
  for (let row = 0; row < BATCH; row++) {
    const picked = [];
    for (let k = 0; k < perText; k++) picked.push(words[((row * perText + k) * stride) % words.length]);
    texts.push(picked.map((w) => w.token).join(' '));
    ids.push([cls, ...picked.map((w) => w.id), sep]);
  }
  return { texts, ids };
}

function gcd(a, b) {
  return b === 0 ? a : gcd(b, a % b);
}

/**
 * Tokenises `texts` with the Python `tokenizers` package (the reference implementation of the
 * tokenizer.json format; webdelegate uses its Rust crate) truncating at SEQ, as the Embedder
 * does with maxTokens = SEQ, and throws unless the ids are exactly `ids`.
 */
export async function verifyWithTokenizers(python, modelDir, texts, ids) {
  const script = [
    'import json, sys',
    'from tokenizers import Tokenizer',
    'args = json.loads(sys.stdin.read())',
    'tok = Tokenizer.from_file(args["tokenizer"])',
    'tok.enable_truncation(max_length=args["seq"])',
    'print(json.dumps([e.ids for e in tok.encode_batch(args["texts"])]))',
  ].join('\n');
  const input = JSON.stringify({ tokenizer: path.join(modelDir, 'tokenizer.json'), seq: SEQ, texts });
  const child = promisify(execFile)(python, ['-c', script], { maxBuffer: 1 << 24 });
  child.child.stdin.end(input);
  const got = JSON.parse((await child).stdout);
  texts.forEach((_, i) => {
    if (got[i].length !== SEQ || got[i].some((id, k) => id !== ids[i][k])) {
      throw new Error(`text ${i} tokenizes to ${got[i].length} ids that differ from the benchmark's ${SEQ}`);
    }
  });
}

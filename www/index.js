// The vector index: the corpus' embeddings (L2-normalised, so cosine similarity is a dot product)
// in one flat Float32Array, and a top-k search over it.
export class VectorIndex {
  constructor(dim) {
    this.dim = dim;
    this.items = [];
    this.data = new Float32Array(0);
  }

  add(items, vectors) {
    if (items.length !== vectors.length) throw new Error(`${items.length} items but ${vectors.length} vectors`);
    const grown = new Float32Array((this.items.length + items.length) * this.dim);
    grown.set(this.data);
    vectors.forEach((v, i) => {
      if (v.length !== this.dim) throw new Error(`vector of ${v.length} values, expected ${this.dim}`);
      grown.set(v, (this.items.length + i) * this.dim);
    });
    this.data = grown;
    this.items.push(...items);
  }

  get size() { return this.items.length; }

  /** The k nearest items to `query` as [{...item, score}], best first. */
  search(query, k = 5) {
    const { dim, data } = this;
    const scored = this.items.map((item, i) => {
      let dot = 0;
      for (let j = 0, o = i * dim; j < dim; j++) dot += data[o + j] * query[j];
      return { ...item, score: dot };
    });
    scored.sort((a, b) => b.score - a.score);
    return scored.slice(0, k);
  }
}

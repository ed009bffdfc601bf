// Merges bytes into one 32-bit word of a buffer: word = (word & ~mask) | (value & mask). Host
// writes are whole words (WebGPU's writeBuffer needs 4-byte alignment); a write that starts or
// ends inside a word patches that word here, in queue order, without reading it back.
// The uniforms `p` and the binding `words`: patch.rs.

@compute @workgroup_size(1)
fn main() {
    let w = p.head.x;
    words[w] = (words[w] & ~p.head.z) | (p.head.y & p.head.z);
}

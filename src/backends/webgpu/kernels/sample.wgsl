// Token selection per row (the Sample op's chain), one workgroup of WG threads per row:
// knobs -> (greedy: an argmax reduction) | radix select of the k-th best order_key (4 passes of
// 8 bits, then index passes only when ties straddle the boundary) -> collect exactly k
// candidates -> bitonic sort (best first, ties by index) -> one thread runs the f32 chain.

const NEG_INF_KEY: u32 = 0x007fffffu;
const POS_INF_KEY: u32 = 0xff800000u;
const NONE: u32 = 0xffffffffu;

var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> cand_key: array<u32, K_MAX>;
var<workgroup> cand_index: array<u32, K_MAX>;
var<workgroup> collected: atomic<u32>;
// Values thread 0 decides and every thread then reads with workgroupUniformLoad.
var<workgroup> shared_sel: vec4<u32>;

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// Scans the histogram from the top bin (descending) or the bottom bin for the bin holding the
// `rank`-th element (from 1); returns (bin, rank within the bin, count in the bin).
fn pick_bin(rank: u32, descending: bool) -> vec3<u32> {
    var passed = 0u;
    for (var step = 0u; step < 256u; step = step + 1u) {
        let bin = select(step, 255u - step, descending);
        let c = atomicLoad(&hist[bin]);
        if (passed + c >= rank || step == 255u) {
            return vec3<u32>(bin, rank - passed, c);
        }
        passed = passed + c;
    }
    return vec3<u32>(0u, 1u, 0u);
}

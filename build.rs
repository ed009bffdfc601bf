//! Names the one platform split the crate has: `web` (wasm32 in a browser) and `native`.
fn main() {
    cfg_aliases::cfg_aliases! {
        web: { all(target_arch = "wasm32", target_os = "unknown") },
        native: { not(all(target_arch = "wasm32", target_os = "unknown")) },
    }
}

//! Planning, the HTTP provider's pure layer: what to ask the server for and how. The planner
//! turns spans of many parameters into few coalesced Range requests ([`planner`]); the options
//! carry the tuning that shapes them and the loads (request sizes and gaps, concurrency,
//! staging, retries: [`options`]). No I/O, no platform code.

pub(crate) mod options;
pub(crate) mod planner;
#[cfg(test)]
mod tests;

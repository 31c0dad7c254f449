//! The layer's HTTP behaviour on a real PostgreSQL: claims and duplicates,
//! verification of what senders and proxies send, bodies and their limits,
//! first-use traps, inputs from the security review.

mod bodies;
mod claims;
mod first_use;
mod security;
mod verification;

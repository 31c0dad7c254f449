//! Faults: the database failing or fighting, time limits running out, a soak
//! under random faults.

mod database;
mod soak;
mod timeouts;

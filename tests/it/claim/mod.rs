//! The claim protocol: the store API without HTTP, concurrent deliveries of
//! one event, and storms of deliveries over one or several server processes.

mod adversarial;
mod budget;
mod concurrency;
mod store;
mod storm;

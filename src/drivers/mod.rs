//! The drivers' public faces: per driver, what only that driver has (its
//! pool and client types, its constructors and settings of the
//! [`StoreConfig`](crate::StoreConfig)). The seam they implement, and their
//! wire-level implementations, are `store::driver`'s (crate-internal).

#[cfg(feature = "tokio-postgres")]
pub mod postgres;
#[cfg(feature = "sqlx")]
pub mod sqlx;

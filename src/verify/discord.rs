//! discord: preset not written yet.

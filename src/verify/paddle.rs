//! paddle: preset not written yet.

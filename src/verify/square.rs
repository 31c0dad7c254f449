//! square: preset not written yet.

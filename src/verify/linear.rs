//! linear: preset not written yet.

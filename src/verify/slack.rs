//! slack: preset not written yet.

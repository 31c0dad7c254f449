//! typeform: preset not written yet.

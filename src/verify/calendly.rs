//! calendly: preset not written yet.

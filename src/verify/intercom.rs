//! intercom: preset not written yet.

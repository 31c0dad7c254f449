//! twilio: preset not written yet.

//! mailgun: preset not written yet.

//! sendgrid: preset not written yet.

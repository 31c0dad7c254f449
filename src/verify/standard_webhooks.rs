//! standard_webhooks: preset not written yet.

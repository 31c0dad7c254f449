//! shopify: preset not written yet.

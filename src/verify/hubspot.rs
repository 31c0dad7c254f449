//! hubspot: preset not written yet.

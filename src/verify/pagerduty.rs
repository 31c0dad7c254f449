//! pagerduty: preset not written yet.

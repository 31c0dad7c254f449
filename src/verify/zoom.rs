//! zoom: preset not written yet.

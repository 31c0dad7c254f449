//! twitch: preset not written yet.

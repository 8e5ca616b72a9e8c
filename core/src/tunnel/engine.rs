//! The tunnel engine (being written).
/// Placeholder.
pub struct Engine;

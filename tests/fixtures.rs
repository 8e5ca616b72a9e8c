//! Fixture validation (being written).

//! See [`crate::host`].

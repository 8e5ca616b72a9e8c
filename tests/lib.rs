//! Shared helpers for mcpwire's end-to-end and contract tests.

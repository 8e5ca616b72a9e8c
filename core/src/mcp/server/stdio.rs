//! Newline-delimited stdio framing on the server's side (`transports.mdx`, stdio): each line
//! of stdin is one JSON-RPC message, each output one line of stdout.

use crate::jsonrpc::{code, ErrorObject};

use super::error_object;

/// The error for a line longer than the bound (answered with id `null`, the line skipped).
pub(super) fn overlong(max: usize) -> ErrorObject {
    error_object(
        code::PARSE_ERROR,
        format!("Parse error: a line is longer than {max} bytes"),
    )
}

/// A line of output: the JSON text and its newline.
pub(super) fn line(text: String) -> Vec<u8> {
    let mut bytes = text.into_bytes();
    bytes.push(b'\n');
    bytes
}

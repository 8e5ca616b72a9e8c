//! What both drivers need of a stdio MCP server's child: the runtime spawns it (argv, no
//! shell), pumps its pipes and kills it ([`StdioChild`]). Which child is current, frames
//! waiting for a child and restarts with backoff are the core's
//! ([`mcpwire_core::tunnel::Tunnel`], [`mcpwire_core::tunnel::supervisor`]).

use mcpwire_core::tunnel::ChildId;

use crate::tunnel::log::{Level, Logger};

/// The longest stderr line logged (the rest of the line is dropped).
pub const MAX_STDERR_LINE: usize = 4096;

/// A running child, as the runtime holds it.
pub trait StdioChild {
    /// Hands a frame to the child's stdin writer (lost if the child is gone: its exit is
    /// reported by the stdout reader).
    fn send(&self, frame: Vec<u8>);
    /// Kills the child; its stdout reader then reports its exit.
    fn kill(&mut self);
    /// Kills the child and lets the runtime reap it.
    fn reap(self);
}

/// What the runtime needs to start a channel's child.
pub struct StdioSpawn<'a> {
    /// The program (argv\[0\]).
    pub program: &'a str,
    /// The rest of argv.
    pub args: &'a [String],
    /// The channel name (for thread names and logs).
    pub name: &'a str,
    /// The child, for [`super::Completion::StdioOut`] and [`super::Completion::StdioExit`].
    pub child: ChildId,
}

/// Logs one line a child wrote on stdout or stderr (trailing white space trimmed, blank lines
/// skipped; the logger redacts): `message` with `field` and the line.
pub fn log_output_line(log: &Logger, message: &str, field: (&str, &str), line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    if !text.is_empty() {
        let (name, value) = field;
        log.log(Level::Info, message, &[(name, &value), ("line", &text)]);
    }
}

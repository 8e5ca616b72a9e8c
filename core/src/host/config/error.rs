//! What can be wrong with a config file, said so that a person can fix it: the file, the line
//! and column, the server, and what was expected.
//!
//! No message holds a value that may be a secret: an environment variable's or a header's
//! value, a URL (it may carry a token in its query or user info), an argument. Messages name
//! fields (`env.API_KEY`, `args[2]`), variables (`${GITHUB_TOKEN}`) and JSON kinds ("a
//! number"), and quote only words that are keywords of the format (`type`, `trust`).

use std::fmt;

use super::Position;
use crate::host::InvalidServerId;

/// One problem in a config file.
///
/// Displays as `file:line:column: server "id": message`, or `file:line:column: message` when
/// the problem is not in one server's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file's display name, as given to [`parse`](super::parse).
    pub file: String,
    /// Where: the entry's key, or the offending value (1-based line and column).
    pub position: Position,
    /// The server's key, when the problem is in one server's entry (as written, even when it
    /// is not a valid [`ServerId`](crate::host::ServerId)).
    pub server: Option<String>,
    /// What is wrong.
    pub kind: ConfigErrorKind,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.file, self.position)?;
        if let Some(server) = &self.server {
            // `{:?}`: a key with a quote or a control character in it stays on one line.
            write!(f, "server {server:?}: ")?;
        }
        write!(f, "{}", self.kind)
    }
}

impl std::error::Error for ConfigError {}

/// The kind of a JSON value, as an error message names it ("found a number").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JsonKind {
    /// `{...}`
    Object,
    /// `[...]`
    Array,
    /// `"..."`
    String,
    /// `1`, `-2.5`
    Number,
    /// `true`, `false`
    Boolean,
    /// `null`
    Null,
}

impl fmt::Display for JsonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JsonKind::Object => "an object",
            JsonKind::Array => "an array",
            JsonKind::String => "a string",
            JsonKind::Number => "a number",
            JsonKind::Boolean => "a boolean",
            JsonKind::Null => "null",
        })
    }
}

/// What is wrong, by kind. Fields are named as paths inside the entry: `command`, `args[2]`,
/// `env.API_KEY`, `headers.Authorization`, `oauth.callbackPort`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigErrorKind {
    /// The bytes are not UTF-8 text (the position is that of the first bad byte).
    #[error("the file is not UTF-8 text")]
    NotUtf8,
    /// The text is not JSON, nor JSONC (JSON with `//` and `/* */` comments and trailing
    /// commas). The whole file is rejected.
    #[error("the file is not valid JSON (nor JSONC): {reason}")]
    Syntax {
        /// What the parser met, e.g. "expected a comma".
        reason: &'static str,
    },
    /// The file holds JSON, but not an object.
    #[error("the file must hold a JSON object, found {found}")]
    NotAnObject {
        /// What it holds.
        found: JsonKind,
    },
    /// A value has the wrong JSON kind.
    #[error("`{field}` must be {expected}, found {found}")]
    WrongType {
        /// Where (`args`, `args[1]`, `mcpServers`, `permissions.allow[0]`).
        field: String,
        /// What it must be ("an array of strings").
        expected: &'static str,
        /// What it is.
        found: JsonKind,
    },
    /// A value has the right kind but not an allowed value.
    #[error("`{field}` must be {expected}")]
    InvalidValue {
        /// Where.
        field: String,
        /// What it must be (`"trusted" or "untrusted"`, "a port number from 1 to 65535").
        expected: &'static str,
    },
    /// The same key twice in one object. JavaScript hosts silently take the last one; a reader
    /// of the file sees the first. Neither is used, so that what runs is never a surprise.
    #[error("`{field}` is given more than once (also at {other}): remove all but one; none of them is used")]
    DuplicateKey {
        /// The key, as a path (`mcpServers.github`, `command`).
        field: String,
        /// Where the other occurrence is.
        other: Position,
    },
    /// The server's key is not a valid [`ServerId`](crate::host::ServerId).
    #[error(transparent)]
    InvalidServerId(#[from] InvalidServerId),
    /// `type: "sse"`: the 2024-11-05 HTTP+SSE transport.
    #[error("`type` is \"sse\", the 2024-11-05 HTTP+SSE transport, which mcpwire does not support: use the server's Streamable HTTP endpoint with `\"type\": \"http\"` (many servers offer it beside the SSE one, often at a URL ending in /mcp rather than /sse)")]
    SseUnsupported,
    /// A `type` that no host defines.
    #[error("unknown `type` {found:?}: expected \"stdio\" or \"http\" (also spelled \"streamable-http\")")]
    UnknownType {
        /// The `type` as written (a keyword, not a secret), cut to 40 characters.
        found: String,
    },
    /// Neither `command` nor `url`.
    #[error("the entry has neither `command` (a local server) nor `url` (a remote server)")]
    NoTransport,
    /// Both `command` and `url`, and no `type` to choose.
    #[error("the entry has both `command` and `url` and no `type`: set `\"type\"` to \"stdio\" or \"http\"")]
    AmbiguousTransport,
    /// The `type` needs a field that is missing.
    #[error("`type` is {transport:?} but `{field}` is missing")]
    MissingField {
        /// The missing field (`command` or `url`).
        field: &'static str,
        /// The `type` (`stdio` or `http`).
        transport: &'static str,
    },
    /// A value that must not be empty is, after interpolation.
    #[error("`{field}` is empty")]
    Empty {
        /// Where.
        field: String,
    },
    /// A URL that is not an absolute `http` or `https` URL.
    #[error("`{field}` is not an absolute http or https URL: {reason}")]
    InvalidUrl {
        /// Where (`url`).
        field: String,
        /// What is wrong (never the URL itself).
        reason: String,
    },
    /// `${VAR}` (or `${env:VAR}`) names a variable that is not set, and gives no default.
    #[error(
        "`{field}` uses ${{{name}}}, which is not set (give a default with ${{{name}:-default}})"
    )]
    MissingVariable {
        /// The variable's name, as written inside `${...}` (e.g. `GITHUB_TOKEN`, `env:HOME`).
        name: String,
        /// Where it is used.
        field: String,
    },
    /// `${workspaceFolder}` or `${userHome}`, and the host did not say what it is.
    #[error("`{field}` uses ${{{name}}}, which the host did not provide")]
    NotProvided {
        /// `workspaceFolder` or `userHome`.
        name: &'static str,
        /// Where it is used.
        field: String,
    },
    /// `${input:id}`: VS Code would prompt for it; mcpwire does not prompt while reading a
    /// file. A host can ask the person and parse again with the answer
    /// ([`Vars::with_input`](super::Vars::with_input)).
    #[error("`{field}` uses ${{input:{id}}}{}, which VS Code prompts for: prompting is not supported here; set the value through the host, or use ${{VAR}} from the environment", description.as_ref().map(|d| format!(" ({d:?})")).unwrap_or_default())]
    NeedsInput {
        /// The input's id.
        id: String,
        /// Its `description` in the file's `inputs`, if it has one.
        description: Option<String>,
        /// Where it is used.
        field: String,
    },
    /// `${...}` holding something that is none of the supported forms (`${config:x}`,
    /// `${command:y}`, a nested `${A:-${B}}`).
    #[error("`{field}` uses ${{{reference}}}, which is not supported: the forms are ${{VAR}}, ${{VAR:-default}}, ${{env:VAR}}, ${{workspaceFolder}}, ${{userHome}} and ${{input:id}}")]
    UnsupportedVariable {
        /// What is inside the braces, cut to 40 characters.
        reference: String,
        /// Where it is used.
        field: String,
    },
    /// `${` with no closing `}`.
    #[error("`{field}` has a `${{` that is not closed by `}}`")]
    UnterminatedVariable {
        /// Where.
        field: String,
    },
}

/// `s` cut to at most `max` characters, with `…` when cut.
pub(super) fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

//! The MCP server config files people already have, read as they are.
//!
//! Two layouts:
//! - `mcpServers`: Claude Desktop's `claude_desktop_config.json`, Claude Code's `.mcp.json`
//!   and `~/.claude.json` (which also has `projects.<path>.mcpServers`, read for
//!   [`Vars::with_workspace_folder`]), Cursor's `.cursor/mcp.json`;
//! - `servers`: VS Code's `.vscode/mcp.json` and user `mcp.json`, with its `inputs`.
//!
//! Every file is read as JSONC (`//` and `/* */` comments, trailing commas), which strict
//! JSON files are too. An entry is a local server (`command`, `args`, `env`, `cwd`,
//! `envFile`) or a remote one (`url`, `headers`); `type` is `stdio`, `http` (also spelled
//! `streamable-http`, `streamableHttp`) or `sse` (refused, with a message saying what to use);
//! without `type`, `command` means stdio and `url` means HTTP. The `oauth` block gives
//! `clientId`, `callbackPort` and `scopes`. Keys of other hosts (`autoApprove`, `timeout`,
//! `sandbox`, `dev`, ...) are ignored.
//!
//! Our own keys, which other hosts ignore: an entry's `"trust": "trusted"` or `"untrusted"`
//! ([`Trust`](crate::host::Trust)) and `"disabled": true`; and a top-level
//! `"permissions": {"allow": [...], "ask": [...], "deny": [...]}` of rule strings (Claude
//! Code style, such as `mcp__github__create_issue`), returned as written with their positions.
//!
//! Values of `command`, `args`, `env`, `cwd`, `envFile`, `url` and `headers` are interpolated
//! ([`interpolate`]: `${VAR}`, `${VAR:-default}`, `${env:VAR}`, `${workspaceFolder}`,
//! `${userHome}`, `${input:id}`) from a [`Vars`] the caller passes in: core reads no
//! environment.
//!
//! Problems are [`ConfigError`]s with the file, line and column: a malformed entry is
//! rejected and the other servers still load; a file that is not JSONC at all is one error.
//! A key given twice in an object we read (a server id, a field of an entry) is an error, and
//! none of its values is used: JavaScript hosts take the last silently while a person reading
//! the file sees the first, and a second `"command"` further down is the kind of thing a
//! review misses.
//!
//! [`known_locations`] lists where each host keeps its files; [`parse_env_file`] reads the
//! files `envFile` names.

use std::collections::BTreeSet;
use std::fmt;

mod entry;
mod env_file;
mod error;
mod file;
mod interpolate;
mod json;
mod locations;

pub use env_file::{parse_env_file, EnvFileError, EnvFileErrorKind};
pub use error::{ConfigError, ConfigErrorKind, JsonKind};
pub use interpolate::{interpolate, InterpolationError, Vars};
pub use locations::{known_locations, App, Dirs, Location, Os, Scope};

use super::ServerSpec;

/// A 1-based line and column (columns count characters). Displays as `line:column`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Which layout a file has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layout {
    /// `mcpServers` (Claude Desktop, Claude Code, Cursor).
    McpServers,
    /// `servers` (VS Code).
    VsCode,
    /// Both keys; their servers share one namespace.
    Both,
    /// Neither (e.g. a `~/.claude.json` with servers only under `projects`, or `{}`).
    NoServers,
}

/// Where in the file an entry is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Section {
    /// The top-level `mcpServers`.
    McpServers,
    /// The top-level `servers`.
    Servers,
    /// `projects.<path>.mcpServers` of a Claude Code `~/.claude.json` (its "local" scope,
    /// which wins over the top level for the same id: see [`ConfigFile::effective`]).
    Project {
        /// The project's key, as written.
        path: String,
    },
}

impl Section {
    /// The section as a path in the file, for messages (`mcpServers`,
    /// `projects."/src/app".mcpServers`).
    pub fn path(&self) -> String {
        match self {
            Section::McpServers => "mcpServers".to_owned(),
            Section::Servers => "servers".to_owned(),
            Section::Project { path } => format!("projects.{path:?}.mcpServers"),
        }
    }
}

/// One server that loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The server, values interpolated.
    pub spec: ServerSpec,
    /// `envFile`, interpolated (e.g. `${workspaceFolder}/.env` made absolute), for a local
    /// server: the driver reads it, [`parse_env_file`] parses it and
    /// [`Entry::apply_env_file`] adds it. `None` for HTTP entries (hosts read it for local
    /// servers only).
    pub env_file: Option<String>,
    /// Where the entry's key is.
    pub position: Position,
    /// Which section it is in.
    pub section: Section,
}

/// A VS Code input (`inputs`): what VS Code would prompt for. A host that prompts passes the
/// answer back with [`Vars::with_input`] and parses again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The `id` that `${input:id}` names.
    pub id: String,
    /// The prompt's text.
    pub description: Option<String>,
    /// `password: true`: the answer is a secret (hide it while typed).
    pub password: bool,
    /// Where the input is defined.
    pub position: Position,
}

/// One permission rule as written (`mcp__github__create_issue`), with where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The rule's text.
    pub text: String,
    /// Where it is.
    pub position: Position,
}

/// Our top-level `permissions`, as written, in the file's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permissions {
    /// `allow`: calls that need no approval.
    pub allow: Vec<Rule>,
    /// `ask`: calls that always ask.
    pub ask: Vec<Rule>,
    /// `deny`: calls that are refused.
    pub deny: Vec<Rule>,
    /// `billing` (mcpwire's addition): tools whose calls spend money, so they always ask.
    pub billing: Vec<Rule>,
}

/// A parsed config file: what loaded, and what did not and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFile {
    /// The display name given to [`parse`].
    pub file: String,
    /// Its layout.
    pub layout: Layout,
    /// The servers that loaded, in the file's order.
    pub servers: Vec<Entry>,
    /// VS Code's `inputs`.
    pub inputs: Vec<Input>,
    /// Our `permissions`.
    pub permissions: Permissions,
    /// Every problem, in the file's order. A server with a problem is not in `servers`.
    pub errors: Vec<ConfigError>,
}

impl ConfigFile {
    /// The servers that apply: a Claude Code project's entry replaces a top-level one of the
    /// same id (Claude Code's "local" scope wins over its "user" scope). In the file's order.
    pub fn effective(&self) -> Vec<&Entry> {
        let local: BTreeSet<_> = self
            .servers
            .iter()
            .filter(|e| matches!(e.section, Section::Project { .. }))
            .map(|e| &e.spec.id)
            .collect();
        self.servers
            .iter()
            .filter(|e| matches!(e.section, Section::Project { .. }) || !local.contains(&e.spec.id))
            .collect()
    }
}

/// Reads a config file's text. `file` is the name errors show (a path, or `~/.claude.json`).
/// A leading byte-order mark is skipped. Never fails: problems are in
/// [`ConfigFile::errors`].
pub fn parse(file: &str, text: &str, vars: &Vars<'_>) -> ConfigFile {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    file::read(file, text, vars)
}

/// [`parse`] for bytes as read from disk: text that is not UTF-8 is one
/// [`ConfigErrorKind::NotUtf8`] at the first bad byte.
pub fn parse_bytes(file: &str, bytes: &[u8], vars: &Vars<'_>) -> ConfigFile {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(file, text, vars),
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            // The prefix is valid UTF-8 by construction.
            let prefix = std::str::from_utf8(valid).unwrap_or_default();
            let position = json::Lines::new(prefix).position(prefix.len());
            ConfigFile {
                file: file.to_owned(),
                layout: Layout::NoServers,
                servers: Vec::new(),
                inputs: Vec::new(),
                permissions: Permissions::default(),
                errors: vec![ConfigError {
                    file: file.to_owned(),
                    position,
                    server: None,
                    kind: ConfigErrorKind::NotUtf8,
                }],
            }
        }
    }
}

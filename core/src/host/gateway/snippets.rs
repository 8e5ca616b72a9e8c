//! What `mcpwire host serve --print-config` prints: the entry that makes each host start the
//! gateway, `mcpwire host serve --config FILE` over stdio, with the absolute paths of the
//! binary and the config (a host starts its servers from a directory of its own, and Claude
//! Desktop without the user's `PATH`).
//!
//! The shapes, as each host documents them (the documents
//! [`crate::host::config::known_locations`] cites):
//! - Claude Desktop, `claude_desktop_config.json`: `mcpServers.<name>` with `command` and
//!   `args` ([`ServeCommand::claude_desktop`]);
//! - Claude Code: `claude mcp add --transport stdio --scope user <name> -- <command> <args>`
//!   (everything after `--` is the command line; [`ServeCommand::claude_code_command`],
//!   quoted for a POSIX shell), or the project's `.mcp.json`, `mcpServers.<name>` with
//!   `"type": "stdio"`, `command`, `args` and `env` ([`ServeCommand::claude_code_mcp_json`]);
//! - Cursor, `~/.cursor/mcp.json` or `.cursor/mcp.json`: `mcpServers.<name>` with
//!   `"type": "stdio"`, `command` and `args` ([`ServeCommand::cursor`]);
//! - VS Code, `.vscode/mcp.json` or the profile's `mcp.json`: `servers.<name>` with
//!   `"type": "stdio"`, `command` and `args` ([`ServeCommand::vscode`]).
//!
//! A config file that holds the gateway's own entry would make the gateway start itself,
//! again and again: [`runs_gateway`] tells such an entry, so the gateway can leave it out
//! (and say so) when it reads its config.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::host::{ServerSpec, TransportSpec};

/// The name the snippets give the gateway's entry.
pub const ENTRY_NAME: &str = "mcpwire";

/// A path the snippets cannot use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnippetError {
    /// The path is relative: the host would resolve it against a directory of its own.
    #[error("the {what} path {path:?} is not absolute: a host starts its servers from a directory of its own, so the snippet needs an absolute path")]
    NotAbsolute {
        /// `binary` or `config`.
        what: &'static str,
        /// The path given.
        path: String,
    },
    /// The path holds a control character (a newline would end the shell command early).
    #[error("the {what} path holds a control character, which no snippet can carry safely")]
    ControlCharacter {
        /// `binary` or `config`.
        what: &'static str,
    },
}

/// Whether `path` is absolute on POSIX (`/...`) or Windows (`C:\...`, `C:/...`, `\\server\...`).
fn is_absolute(path: &str) -> bool {
    let b = path.as_bytes();
    path.starts_with('/')
        || path.starts_with("\\\\")
        || (b.len() >= 3
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && (b[2] == b'\\' || b[2] == b'/'))
}

/// The gateway's command line: `BINARY host serve --config CONFIG`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeCommand {
    binary: String,
    config: String,
}

impl ServeCommand {
    /// The command for the absolute paths `binary` (the `mcpwire` executable) and `config`.
    pub fn new(binary: &str, config: &str) -> Result<ServeCommand, SnippetError> {
        for (what, path) in [("binary", binary), ("config", config)] {
            if path.chars().any(char::is_control) {
                return Err(SnippetError::ControlCharacter { what });
            }
            if !is_absolute(path) {
                return Err(SnippetError::NotAbsolute {
                    what,
                    path: path.to_owned(),
                });
            }
        }
        Ok(ServeCommand {
            binary: binary.to_owned(),
            config: config.to_owned(),
        })
    }

    /// The program.
    pub fn binary(&self) -> &str {
        &self.binary
    }

    /// Its arguments: `host serve --config CONFIG`.
    pub fn args(&self) -> Vec<String> {
        vec![
            "host".to_owned(),
            "serve".to_owned(),
            "--config".to_owned(),
            self.config.clone(),
        ]
    }

    /// Claude Desktop's `claude_desktop_config.json`: `{"mcpServers": {"mcpwire": {command,
    /// args}}}`.
    pub fn claude_desktop(&self) -> Value {
        json!({"mcpServers": {ENTRY_NAME: {"command": self.binary, "args": self.args()}}})
    }

    /// Claude Code's command line, for a POSIX shell.
    pub fn claude_code_command(&self) -> String {
        let mut line = format!("claude mcp add --transport stdio --scope user {ENTRY_NAME} --");
        for word in std::iter::once(self.binary.clone()).chain(self.args()) {
            line.push(' ');
            line.push_str(&shell_quote(&word));
        }
        line
    }

    /// Claude Code's project `.mcp.json`.
    pub fn claude_code_mcp_json(&self) -> Value {
        json!({"mcpServers": {ENTRY_NAME: {
            "type": "stdio", "command": self.binary, "args": self.args(), "env": {}
        }}})
    }

    /// Cursor's `mcp.json`.
    pub fn cursor(&self) -> Value {
        json!({"mcpServers": {ENTRY_NAME: {
            "type": "stdio", "command": self.binary, "args": self.args()
        }}})
    }

    /// VS Code's `mcp.json`.
    pub fn vscode(&self) -> Value {
        json!({"servers": {ENTRY_NAME: {
            "type": "stdio", "command": self.binary, "args": self.args()
        }}})
    }

    /// Everything `--print-config` prints: each host's snippet under a heading saying where
    /// it goes.
    pub fn render(&self) -> String {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Claude Desktop: add to \"mcpServers\" in claude_desktop_config.json\n\
             #   (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\)\n{}\n",
            pretty(&self.claude_desktop())
        );
        let _ = writeln!(
            out,
            "# Claude Code: run this (user scope), or put the JSON below in the project's .mcp.json\n{}\n{}\n",
            self.claude_code_command(),
            pretty(&self.claude_code_mcp_json())
        );
        let _ = writeln!(
            out,
            "# Cursor: add to \"mcpServers\" in ~/.cursor/mcp.json (or the project's .cursor/mcp.json)\n{}\n",
            pretty(&self.cursor())
        );
        let _ = write!(
            out,
            "# VS Code: add to \"servers\" in .vscode/mcp.json (or the profile's mcp.json)\n{}\n",
            pretty(&self.vscode())
        );
        out
    }
}

/// `word` as one word of a POSIX shell: as it is when it holds only safe characters, else in
/// single quotes (a `'` inside written `'\''`).
fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:=@%,".contains(&b));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Whether a config entry runs the gateway itself (`mcpwire host serve`, whatever the
/// program's directory or other flags): reading it, the gateway would start itself.
pub fn runs_gateway(spec: &ServerSpec) -> bool {
    let TransportSpec::Stdio { command, args, .. } = &spec.transport else {
        return false;
    };
    let program = command
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(command)
        .to_ascii_lowercase();
    let program = program.strip_suffix(".exe").unwrap_or(&program);
    if program != "mcpwire" {
        return false;
    }
    // `host` then, somewhere after it (flags of `host` may stand between), `serve`.
    args.iter()
        .position(|a| a == "host")
        .is_some_and(|h| args[h + 1..].iter().any(|a| a == "serve"))
}

//! Consent to start a local server (SEP-1024; the guide's "Adding a local server"): before a
//! stdio server's command runs, the person sees the whole command line, untruncated, the
//! names of the environment variables it gets (never their values: they are often secrets),
//! its working directory, and that it runs code on this machine with their permissions; and
//! approves it explicitly, or cancels.
//!
//! The approval is remembered per exact [`CommandLine`]: program, every argument, the set of
//! environment variable names and the working directory. Change any of them (one argument,
//! one more variable) and it asks again. The values of the variables are not part of it (they
//! are not shown, and an approvals file must not hold secrets; the line itself is kept only as
//! its SHA-256, since an argument may be an interpolated secret), so a changed value alone does
//! not ask again; neither does a change to the program file itself (the core reads no files).
//! The server's id is not part of it either: the same command under another name is the same
//! code.

use std::collections::BTreeSet;
use std::fmt;

use super::shown;
use crate::host::{ServerId, ServerSpec, TransportSpec};

/// A local server's command line, as approved: the key of [`CommandApprovals`].
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct CommandLine {
    /// The program, as the config names it (found on `PATH` if it has no `/`).
    pub program: String,
    /// Its arguments, in order.
    pub args: Vec<String>,
    /// The names of the variables added to its environment, sorted.
    pub env: Vec<String>,
    /// Its working directory, if the config sets one.
    pub cwd: Option<String>,
}

impl CommandLine {
    /// The command line of a stdio transport; `None` for HTTP.
    pub fn of(transport: &TransportSpec) -> Option<CommandLine> {
        match transport {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => Some(CommandLine {
                program: command.clone(),
                args: args.clone(),
                env: env.keys().cloned().collect(),
                cwd: cwd.clone(),
            }),
            TransportSpec::Http { .. } => None,
        }
    }

    /// The program and its arguments as one line, each word quoted the way a POSIX shell
    /// would read it back as that word: bare when it holds only `A-Za-z0-9@%+=:,./_-`, else
    /// in single quotes, else (when it holds control or invisible characters) in `$'..'`
    /// with escapes. Nothing is cut.
    pub fn display(&self) -> String {
        let mut out = quote(&self.program);
        for a in &self.args {
            out.push(' ');
            out.push_str(&quote(a));
        }
        out
    }
}

/// Quoting for display. A crate such as `shlex` quotes for a shell to run, leaving control
/// characters raw inside the quotes; shown on a terminal those act instead of showing, so
/// the few lines here escape them.
fn quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        return word.to_owned();
    }
    if !word.chars().any(shown::is_hidden) {
        return format!("'{}'", word.replace('\'', "'\\''"));
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if shown::is_hidden(c) => {
                let n = u32::from(c);
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The statement every [`CommandPrompt`] makes.
pub const RUNS_CODE: &str = "This runs a program on this machine with your user's permissions: \
it can read and change your files, use the network, and use any credential you can reach. \
Approve it only if you trust this exact command.";

/// What to show before starting a local server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CommandPrompt {
    /// The config's id for the server.
    pub server: ServerId,
    /// The command, as it will run.
    pub command: CommandLine,
    /// [`CommandLine::display`] of it: the whole command line, quoted, uncut.
    pub command_line: String,
    /// [`RUNS_CODE`].
    pub warning: &'static str,
    /// Always `true`: it runs only after the person approves it explicitly.
    pub needs_approval: bool,
}

/// A server that runs no local command (an HTTP server): there is nothing to approve.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{server} is reached over HTTP and runs no local command: there is no command to approve")]
pub struct NotALocalCommand {
    /// The server.
    pub server: ServerId,
}

impl CommandPrompt {
    /// The prompt for starting `spec`'s command.
    pub fn new(spec: &ServerSpec) -> Result<CommandPrompt, NotALocalCommand> {
        let command = CommandLine::of(&spec.transport).ok_or_else(|| NotALocalCommand {
            server: spec.id.clone(),
        })?;
        Ok(CommandPrompt {
            server: spec.id.clone(),
            command_line: command.display(),
            command,
            warning: RUNS_CODE,
            needs_approval: true,
        })
    }
}

impl fmt::Display for CommandPrompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Start the local MCP server {}?", self.server)?;
        writeln!(f, "  command:     {}", self.command_line)?;
        match &self.command.cwd {
            Some(dir) => writeln!(f, "  directory:   {}", quote(dir))?,
            None => writeln!(
                f,
                "  directory:   (not set: the host's own working directory)"
            )?,
        }
        if self.command.env.is_empty() {
            writeln!(f, "  environment: no variables added")?;
        } else {
            let names: Vec<String> = self.command.env.iter().map(|n| shown::inline(n)).collect();
            writeln!(
                f,
                "  environment: {} (names only; the values are not shown)",
                names.join(", ")
            )?;
        }
        writeln!(f, "  {}", self.warning)?;
        write!(f, "  Approve to start it, or cancel the setup.")
    }
}

/// Whether a server may be started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandCheck {
    /// An HTTP server: no local command runs.
    NoCommand,
    /// This exact command line was approved before.
    Approved,
    /// It must be shown and approved first.
    NeedsApproval(Box<CommandPrompt>),
}

/// The command lines a person approved, as state a driver persists (serde). An approval is
/// kept as the SHA-256 of the exact [`CommandLine`] (program, arguments, variable names, working
/// directory) with the program's name beside it for people reading the file, never the
/// arguments themselves: an interpolated argument (`--token ${TOKEN}`) may be a secret, and
/// an approvals file is not a token store.
/// `{"approved": [{"program": "npx", "sha256": "9f86d0…"}]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandApprovals {
    #[serde(default)]
    approved: BTreeSet<ApprovedCommand>,
}

/// One approval: the program's name (for people) and the fingerprint of the whole line.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ApprovedCommand {
    /// The program, as the config names it.
    pub program: String,
    /// The SHA-256 of the command line, 64 lower-case hex digits.
    pub sha256: String,
}

impl ApprovedCommand {
    fn of(command: &CommandLine) -> ApprovedCommand {
        use sha2::{Digest, Sha256};
        // Length-prefixed fields: no two command lines hash the same text.
        let mut h = Sha256::new();
        let mut field = |tag: &[u8], text: &str| {
            h.update(tag);
            h.update((text.len() as u64).to_be_bytes());
            h.update(text.as_bytes());
        };
        field(b"p", &command.program);
        for a in &command.args {
            field(b"a", a);
        }
        for e in &command.env {
            field(b"e", e);
        }
        match &command.cwd {
            Some(cwd) => field(b"c", cwd),
            None => field(b"n", ""),
        }
        ApprovedCommand {
            program: command.program.clone(),
            sha256: crate::host::lower_hex(&h.finalize()),
        }
    }
}

impl CommandApprovals {
    /// None approved.
    pub fn new() -> CommandApprovals {
        CommandApprovals::default()
    }

    /// Whether `spec` may start now, or what to ask first.
    pub fn check(&self, spec: &ServerSpec) -> CommandCheck {
        match CommandPrompt::new(spec) {
            Err(_) => CommandCheck::NoCommand,
            Ok(p) if self.is_approved(&p.command) => CommandCheck::Approved,
            Ok(p) => CommandCheck::NeedsApproval(Box::new(p)),
        }
    }

    /// Whether this exact command line is approved.
    pub fn is_approved(&self, command: &CommandLine) -> bool {
        self.approved.contains(&ApprovedCommand::of(command))
    }

    /// The person approved the command `prompt` showed.
    pub fn approve(&mut self, prompt: &CommandPrompt) {
        self.approved.insert(ApprovedCommand::of(&prompt.command));
    }

    /// Forgets an approval; `true` if there was one.
    pub fn revoke(&mut self, command: &CommandLine) -> bool {
        self.approved.remove(&ApprovedCommand::of(command))
    }

    /// The approvals (program and fingerprint), in a fixed order.
    pub fn iter(&self) -> impl Iterator<Item = &ApprovedCommand> {
        self.approved.iter()
    }

    /// How many are approved.
    pub fn len(&self) -> usize {
        self.approved.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.approved.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::host::Trust;
    use std::collections::BTreeMap;

    fn spec(args: &[&str], env: &[(&str, &str)], cwd: Option<&str>) -> ServerSpec {
        ServerSpec {
            id: ServerId::new("files").unwrap(),
            transport: TransportSpec::Stdio {
                command: "npx".into(),
                args: args.iter().map(|a| a.to_string()).collect(),
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
                cwd: cwd.map(Into::into),
            },
            oauth: None,
            trust: Trust::Untrusted,
            disabled: false,
        }
    }

    #[test]
    fn words_are_quoted_unambiguously() {
        assert_eq!(
            quote("plain-word_1.2/x@y:z=w,%+"),
            "plain-word_1.2/x@y:z=w,%+"
        );
        assert_eq!(quote(""), "''");
        assert_eq!(quote("two words"), "'two words'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote("a\nb"), "$'a\\nb'");
        assert_eq!(quote("\u{1b}[31mred"), "$'\\u001b[31mred'");
        assert_eq!(quote("x'\\\u{202e}"), "$'x\\'\\\\\\u202e'");
        assert_eq!(quote("\u{E0041}"), "$'\\U000e0041'");
        assert_eq!(quote("naïve"), "'naïve'");
    }

    #[test]
    fn the_prompt_shows_the_whole_command_and_env_names_not_values() {
        let long = "x".repeat(5000);
        let s = spec(
            &[
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/home/me/my docs",
                &long,
            ],
            &[("API_KEY", "sk-live-secret"), ("DEBUG", "1")],
            Some("/work"),
        );
        let p = CommandPrompt::new(&s).unwrap();
        let shown = p.to_string();
        assert!(shown.contains(&format!(
            "npx -y @modelcontextprotocol/server-filesystem '/home/me/my docs' {long}"
        )));
        assert!(shown.contains("API_KEY, DEBUG"));
        assert!(!shown.contains("sk-live-secret"), "{shown}");
        assert!(!format!("{p:?}").contains("sk-live-secret"));
        assert!(!serde_json::to_string(&p)
            .unwrap()
            .contains("sk-live-secret"));
        assert!(shown.contains("/work"));
        assert!(shown.contains("runs a program on this machine with your user's permissions"));
        assert!(p.needs_approval);
    }

    #[test]
    fn approval_is_for_the_exact_command_line() {
        let s = spec(&["server", "--root", "/a"], &[("TOKEN", "t1")], None);
        let mut approvals = CommandApprovals::new();
        let CommandCheck::NeedsApproval(p) = approvals.check(&s) else {
            panic!()
        };
        approvals.approve(&p);
        assert_eq!(approvals.check(&s), CommandCheck::Approved);
        // A changed value of a variable is not part of the key (values are never stored).
        let same = spec(&["server", "--root", "/a"], &[("TOKEN", "t2")], None);
        assert_eq!(approvals.check(&same), CommandCheck::Approved);
        for changed in [
            spec(&["server", "--root", "/b"], &[("TOKEN", "t1")], None),
            spec(&["server", "--root"], &[("TOKEN", "t1")], None),
            spec(&["server", "--root", "/a", "--x"], &[("TOKEN", "t1")], None),
            spec(
                &["server", "--root", "/a"],
                &[("TOKEN", "t1"), ("NODE_OPTIONS", "")],
                None,
            ),
            spec(&["server", "--root", "/a"], &[], None),
            spec(
                &["server", "--root", "/a"],
                &[("TOKEN", "t1")],
                Some("/tmp"),
            ),
        ] {
            assert!(
                matches!(approvals.check(&changed), CommandCheck::NeedsApproval(_)),
                "{changed:?}"
            );
        }
        let text = serde_json::to_string(&approvals).unwrap();
        assert!(!text.contains("t1"), "{text}");
        let back: CommandApprovals = serde_json::from_str(&text).unwrap();
        assert_eq!(back, approvals);
        assert!(approvals.revoke(&p.command));
        assert!(approvals.is_empty());
    }

    #[test]
    fn http_servers_run_no_command() {
        let s = ServerSpec {
            transport: TransportSpec::Http {
                url: "https://example.com/mcp".into(),
                headers: BTreeMap::new(),
            },
            ..spec(&[], &[], None)
        };
        assert_eq!(CommandApprovals::new().check(&s), CommandCheck::NoCommand);
        assert!(CommandPrompt::new(&s).is_err());
    }
}

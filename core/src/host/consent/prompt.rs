//! What the policy hands the UI for one call: [`ConsentPrompt`]. It holds the full arguments,
//! never cut, with the server, the tool's name and description, its annotations and whether
//! they were believed, and every reason. Its `Display` is the terminal rendering the CLI
//! prints; its `Serialize` is the `--json` form.

use std::fmt;

use serde_json::Value;

use super::policy::{Decision, ToolCall, Verdict};
use super::shown;
use crate::host::{ServerId, Trust};

/// One annotation as shown: what the tool states, and the spec's default when it is silent.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ShownHint {
    /// The annotation's name (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
    /// `openWorldHint`).
    pub name: &'static str,
    /// What the tool states, if anything.
    pub stated: Option<bool>,
    /// The spec's default for it.
    pub default: bool,
}

/// The tool's annotations as shown.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ShownAnnotations {
    /// Whether the policy believed them (only a trusted server's are).
    pub believed: bool,
    /// The four behaviour hints, in that order.
    pub hints: Vec<ShownHint>,
}

/// Everything a person needs to approve or refuse one call.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ConsentPrompt {
    /// The server the call goes to.
    pub server: ServerId,
    /// Whether the host trusts it.
    pub trusted: bool,
    /// The tool's name, as the server lists it.
    pub tool: String,
    /// The name the model called it by.
    pub exposed_name: String,
    /// The tool's display name, when it has one besides its name.
    pub title: Option<String>,
    /// The tool's description, whole.
    pub description: Option<String>,
    /// Its annotations, and whether they were believed.
    pub annotations: ShownAnnotations,
    /// The arguments, exactly as they will be sent.
    pub arguments: Value,
    /// The same arguments as pretty-printed JSON, whole: it parses back to
    /// [`ConsentPrompt::arguments`]. Characters that would act on a terminal or stay
    /// invisible (controls, bidi overrides, zero-width and tag characters) are written as
    /// `\uXXXX` escapes, which JSON reads as the same characters.
    #[serde(skip)]
    pub arguments_json: String,
    /// The policy's decision, with every reason.
    pub decision: Decision,
}

impl ConsentPrompt {
    /// The prompt for `call`, decided as `decision`.
    pub(super) fn new(call: &ToolCall<'_>, decision: Decision) -> ConsentPrompt {
        let a = call.tool.annotations.clone().unwrap_or_default();
        let hint = |name, stated, default| ShownHint {
            name,
            stated,
            default,
        };
        let display = call.tool.display_name();
        ConsentPrompt {
            server: call.server.clone(),
            trusted: call.trust == Trust::Trusted,
            tool: call.tool.name.clone(),
            exposed_name: call.exposed_name.to_owned(),
            title: (display != call.tool.name).then(|| display.to_owned()),
            description: call.tool.description.clone(),
            annotations: ShownAnnotations {
                believed: call.trust == Trust::Trusted,
                hints: vec![
                    hint("readOnlyHint", a.read_only_hint, false),
                    hint("destructiveHint", a.destructive_hint, true),
                    hint("idempotentHint", a.idempotent_hint, false),
                    hint("openWorldHint", a.open_world_hint, true),
                ],
            },
            arguments: call.arguments.clone(),
            arguments_json: shown::json(call.arguments),
            decision,
        }
    }
}

const INDENT: &str = "    ";

/// The terminal rendering: every server-supplied text with its hidden characters escaped
/// and its extra lines indented, the arguments whole.
impl fmt::Display for ConsentPrompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let heading = match self.decision.verdict {
            Verdict::Ask => "This tool call needs your approval",
            Verdict::Allow => "This tool call is allowed",
            Verdict::Deny => "This tool call is denied",
        };
        writeln!(f, "{heading}")?;
        let trust = if self.trusted {
            "trusted"
        } else {
            "not trusted"
        };
        writeln!(f, "  server:      {} ({trust})", self.server)?;
        write!(f, "  tool:        {}", shown::inline(&self.tool))?;
        if self.exposed_name != self.tool {
            write!(
                f,
                " (the model calls it {})",
                shown::inline(&self.exposed_name)
            )?;
        }
        writeln!(f)?;
        if let Some(title) = &self.title {
            writeln!(f, "  title:       {}", shown::inline(title))?;
        }
        match &self.description {
            Some(d) => writeln!(f, "  description: {}", shown::block(d, "               "))?,
            None => writeln!(f, "  description: (none)")?,
        }
        if self.annotations.believed {
            writeln!(f, "  annotations: believed ({} is trusted)", self.server)?;
        } else {
            writeln!(
                f,
                "  annotations: NOT believed ({} is not trusted; hints are claims only)",
                self.server
            )?;
        }
        for h in &self.annotations.hints {
            match h.stated {
                Some(v) => writeln!(f, "{INDENT}{:<16} {v}", h.name)?,
                None => writeln!(f, "{INDENT}{:<16} absent (default {})", h.name, h.default)?,
            }
        }
        let why = match self.decision.verdict {
            Verdict::Ask => "it asks because",
            Verdict::Allow => "it is allowed because",
            Verdict::Deny => "it is denied because",
        };
        writeln!(f, "  {why}:")?;
        for r in &self.decision.reasons {
            writeln!(f, "{INDENT}- {r}")?;
        }
        writeln!(
            f,
            "  arguments, in full, as they will be sent ({} bytes of JSON shown):",
            self.arguments_json.len()
        )?;
        for line in self.arguments_json.split('\n') {
            writeln!(f, "{INDENT}{line}")?;
        }
        match self.decision.verdict {
            Verdict::Ask if self.decision.offer_always => {
                write!(f, "  approve once, always allow this tool, or deny?")
            }
            Verdict::Ask => write!(
                f,
                "  approve once, or deny? (\"always allow\" is not offered for this tool)"
            ),
            Verdict::Allow => write!(f, "  it goes out without asking"),
            Verdict::Deny => write!(f, "  it will not be sent"),
        }
    }
}

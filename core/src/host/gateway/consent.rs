//! Consent through the gateway: the policy's verdict ([`crate::host::consent`]) turned into
//! what the downstream client sees.
//!
//! [`decide`] gives a [`ConsentStep`]:
//! - **allow**: [`ConsentStep::Call`], the call goes upstream;
//! - **deny**: [`ConsentStep::Refuse`] with a tool error naming the deny rule;
//! - **ask**, to a client that declared elicitation form mode: [`ConsentStep::Ask`] with a
//!   [`ConsentForm`], the elicitation the client shows the person. In 2026-07-28 it goes out
//!   inside an MRTR `input_required` result, in 2025-11-25 as an `elicitation/create`
//!   request; both carry the same `ElicitRequestFormParams` ([`ConsentForm::params`]);
//! - **ask**, to a client that cannot elicit: [`ConsentStep::Refuse`] with a tool error that
//!   says which rule to add to the config ([`Fix`]), or why no rule can lift it. Never a
//!   silent call.
//!
//! # The form
//!
//! Its message shows the server id (and whether it is trusted), the tool (its name as the
//! server lists it, the name the client called), its title and description, every reason
//! the policy asks, the cross-server data-flow warning when text of one server's results is
//! in the arguments ([`crate::host::consent::provenance`]), and the arguments in full, as
//! pretty-printed JSON exactly as they will be sent (hidden characters escaped as `\uXXXX`,
//! which reads back as the same JSON). Accepting approves the call once; where the policy
//! offers "always allow this tool" ([`crate::host::consent::Decision::offer_always`]) the form
//! has one optional boolean field, [`ALWAYS_FIELD`]. Declining or cancelling sends nothing.
//!
//! # An answer approves what was shown
//!
//! The form carries a digest of the call it shows ([`call_digest`]: the server, the tool's
//! definition fingerprint, the exposed name and the canonical arguments). The gateway puts
//! it in the MRTR `requestState` (which the engine seals) or keeps it with the pending
//! `elicitation/create`; [`ConsentForm::apply`] refuses an answer for a call whose digest
//! differs (arguments edited in the retry, or the tool redefined meanwhile), and asks the
//! policy again, so a deny rule added meanwhile still wins.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::route::UpstreamCall;
use super::ToolRefusal;
use crate::host::consent::shown;
use crate::host::consent::{
    ApprovalError, ApprovalScope, ConsentPolicy, ConsentPrompt, DataFlow, Reason, Rule,
    ToolFingerprint, ToolPattern, Verdict,
};
use crate::host::ServerId;
use crate::mcp::elicitation::{
    find_suspicions, ElicitationRequest, FormElicitation, PropertyKind, PropertySchema,
    RequestedSchema,
};
use crate::mcp::meta::ClientCapabilities;

/// The form's one field, offered only for a tool that may be approved "always".
pub const ALWAYS_FIELD: &str = "always";

/// What the gateway does with one upstream call, per the policy and the client.
#[derive(Clone, Debug, PartialEq)]
pub enum ConsentStep {
    /// Send it (and then, as for every call that went out, record its result with
    /// [`ConsentPolicy::record_result`], so that its text carried into another server's call
    /// asks).
    Call,
    /// Ask the person with this form first.
    Ask(ConsentForm),
    /// Do not send it; answer this tool error.
    Refuse(ToolRefusal),
}

/// What would let a call through that the client could not be asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fix {
    /// An `allow` rule naming the tool lifts every reason it asks.
    AddAllow {
        /// The rule.
        rule: Rule,
        /// The config file to add it to.
        file: String,
    },
    /// An `ask` rule matches; no `allow` rule lifts it.
    RemoveAsk {
        /// The ask rule.
        rule: Rule,
        /// The config file it is in.
        file: String,
        /// The `allow` rule the call needs besides, if the ask rule is not its only reason.
        then_allow: Option<Rule>,
    },
    /// The arguments carry text from other servers' results: no rule lifts that.
    DataFlow {
        /// The servers the text came from.
        sources: Vec<ServerId>,
    },
    /// No rule can name this tool (its name or its server's id would read back as another
    /// rule): only an approval could send it.
    NoRule {
        /// The server.
        server: ServerId,
        /// The tool.
        tool: String,
    },
}

fn allow_snippet(rule: &Rule) -> String {
    json!({"permissions": {"allow": [rule.to_string()]}}).to_string()
}

impl std::fmt::Display for Fix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fix::AddAllow { rule, file } => write!(
                f,
                "To allow this tool's calls without asking, add the rule \"{rule}\" to \
                 `permissions.allow` in {file} (for example {}), then start the gateway again; \
                 or use a client that can ask (one that declares the elicitation capability).",
                allow_snippet(rule)
            ),
            Fix::RemoveAsk {
                rule,
                file,
                then_allow,
            } => {
                write!(
                    f,
                    "The ask rule \"{rule}\" in `permissions.ask` of {file} asks every time, and \
                     no allow rule lifts it: remove it"
                )?;
                if let Some(allow) = then_allow {
                    write!(
                        f,
                        " and add \"{allow}\" to `permissions.allow` (for example {})",
                        allow_snippet(allow)
                    )?;
                }
                f.write_str(
                    ", then start the gateway again; or use a client that can ask (one that \
                     declares the elicitation capability).",
                )
            }
            Fix::DataFlow { sources } => {
                let names: Vec<&str> = sources.iter().map(ServerId::as_str).collect();
                write!(
                    f,
                    "The arguments carry text from the results of {}: a result of one server is \
                     untrusted input to another, and no rule lets it through without asking. Use \
                     a client that can ask (one that declares the elicitation capability), or \
                     call the tool without that text.",
                    names.join(", ")
                )
            }
            Fix::NoRule { server, tool } => write!(
                f,
                "No permission rule can name {server}'s tool {tool:?} (its name or the server's \
                 id would read back as another rule), so only an approval can send it: use a \
                 client that can ask (one that declares the elicitation capability)."
            ),
        }
    }
}

fn join(reasons: &[Reason]) -> String {
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether a reason is a note (it explains, it does not ask on its own).
fn is_note(r: &Reason) -> bool {
    matches!(
        r,
        Reason::HintsNotBelieved { .. } | Reason::AllowRuleNotEnough { .. }
    )
}

/// What the gateway does with `call` for a downstream client that declared `client`;
/// `config_file` is the file a rule would be added to (the `--config` file, as the person
/// wrote its path).
pub fn decide(
    policy: &ConsentPolicy,
    call: &UpstreamCall,
    client: &ClientCapabilities,
    config_file: &str,
) -> ConsentStep {
    let tool_call = call.as_tool_call();
    let decision = policy.decide(&tool_call);
    match decision.verdict {
        Verdict::Allow => ConsentStep::Call,
        Verdict::Deny => ConsentStep::Refuse(ToolRefusal::Denied {
            server: call.server.clone(),
            tool: call.tool.name.clone(),
            reasons: join(&decision.reasons),
        }),
        Verdict::Ask if client.supports_elicitation_form() => {
            ConsentStep::Ask(ConsentForm::new(call, policy.prompt(&tool_call)))
        }
        Verdict::Ask => ConsentStep::Refuse(ToolRefusal::CannotAsk {
            server: call.server.clone(),
            tool: call.tool.name.clone(),
            exposed: call.exposed.clone(),
            reasons: join(&decision.reasons),
            fix: Box::new(fix_for(call, &decision.reasons, config_file)),
        }),
    }
}

fn fix_for(call: &UpstreamCall, reasons: &[Reason], file: &str) -> Fix {
    let flows: Vec<ServerId> = reasons
        .iter()
        .filter_map(|r| match r {
            Reason::DataFlow(flow) => Some(flow.source.clone()),
            _ => None,
        })
        .collect();
    if !flows.is_empty() {
        let mut sources = flows;
        sources.sort();
        sources.dedup();
        return Fix::DataFlow { sources };
    }
    let allow = Rule::new(
        call.server.clone(),
        ToolPattern::Named(call.tool.name.clone()),
    )
    .ok();
    let ask = reasons.iter().find_map(|r| match r {
        Reason::AskRule { rule } => Some(rule.clone()),
        _ => None,
    });
    if let Some(rule) = ask {
        let others = reasons
            .iter()
            .any(|r| !is_note(r) && !matches!(r, Reason::AskRule { .. }));
        return Fix::RemoveAsk {
            rule,
            file: file.to_owned(),
            then_allow: if others { allow } else { None },
        };
    }
    match allow {
        Some(rule) => Fix::AddAllow {
            rule,
            file: file.to_owned(),
        },
        None => Fix::NoRule {
            server: call.server.clone(),
            tool: call.tool.name.clone(),
        },
    }
}

/// The digest of a call as shown: SHA-256 of the canonical JSON of its server, its tool's
/// definition fingerprint, its exposed name and its arguments, written `sha256:<hex>`.
pub fn call_digest(call: &UpstreamCall) -> String {
    let v = json!({
        "server": call.server.as_str(),
        "tool": ToolFingerprint::of(&call.tool).as_str(),
        "exposed": call.exposed,
        "arguments": call.arguments,
    });
    let mut text = String::new();
    crate::mcp::cache::write_canonical(&mut text, &v);
    format!(
        "sha256:{}",
        crate::host::lower_hex(&Sha256::digest(text.as_bytes()))
    )
}

/// The approval form for one call (an `elicitation/create` in form mode).
#[derive(Clone, Debug, PartialEq)]
pub struct ConsentForm {
    server: ServerId,
    tool: String,
    message: String,
    offer_always: bool,
    data_flows: Vec<DataFlow>,
    digest: String,
}

/// A person's answer to a [`ConsentForm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsentAnswer {
    /// Send the call; with `always`, allow the tool's later calls too.
    Accept {
        /// The "always allow this tool" box was ticked.
        always: bool,
    },
    /// Refuse it.
    Decline,
    /// Dismissed without choosing: refused.
    Cancel,
}

impl ConsentForm {
    fn new(call: &UpstreamCall, prompt: ConsentPrompt) -> ConsentForm {
        let data_flows: Vec<DataFlow> = prompt
            .decision
            .reasons
            .iter()
            .filter_map(|r| match r {
                Reason::DataFlow(flow) => Some(flow.clone()),
                _ => None,
            })
            .collect();
        ConsentForm {
            server: call.server.clone(),
            tool: call.tool.name.clone(),
            message: message(&prompt, &data_flows),
            offer_always: prompt.decision.offer_always,
            data_flows,
            digest: call_digest(call),
        }
    }

    /// The server the call goes to.
    pub fn server(&self) -> &ServerId {
        &self.server
    }

    /// The tool, as the server names it.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The text the person reads.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the form offers "always allow this tool".
    pub fn offers_always(&self) -> bool {
        self.offer_always
    }

    /// The cross-server data flows it warns about (empty: none).
    pub fn data_flows(&self) -> &[DataFlow] {
        &self.data_flows
    }

    /// The digest of the call shown ([`call_digest`]): the state to keep with the question.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The `requestedSchema`: no field, or the optional boolean [`ALWAYS_FIELD`].
    pub fn schema(&self) -> Value {
        let mut properties = Map::new();
        if self.offer_always {
            properties.insert(
                ALWAYS_FIELD.into(),
                json!({
                    "type": "boolean",
                    "title": "Always allow this tool",
                    "description": "Later calls of this tool go out without asking, while its definition stays as it is now.",
                    "default": false
                }),
            );
        }
        json!({"type": "object", "properties": properties})
    }

    /// The `ElicitRequestFormParams`: what `elicitation/create` carries (2025-11-25) and what
    /// an MRTR input request's `params` are (2026-07-28).
    pub fn params(&self) -> Value {
        json!({
            "mode": "form",
            "message": self.message,
            "requestedSchema": self.schema(),
        })
    }

    /// The same request as the client side reads it (what [`ElicitationRequest::parse`]
    /// gives for [`ConsentForm::params`]).
    pub fn request(&self) -> ElicitationRequest {
        let mut properties = Vec::new();
        if self.offer_always {
            properties.push((
                ALWAYS_FIELD.to_owned(),
                PropertySchema {
                    title: Some("Always allow this tool".to_owned()),
                    description: Some(
                        "Later calls of this tool go out without asking, while its definition stays as it is now."
                            .to_owned(),
                    ),
                    default: Some(Value::Bool(false)),
                    kind: PropertyKind::Boolean,
                },
            ));
        }
        let schema = RequestedSchema {
            properties,
            required: Vec::new(),
        };
        ElicitationRequest::Form(FormElicitation {
            suspicious: find_suspicions(&self.message, &schema),
            message: self.message.clone(),
            schema,
        })
    }

    fn bad(&self, problem: impl Into<String>) -> ToolRefusal {
        ToolRefusal::BadAnswer {
            server: self.server.clone(),
            tool: self.tool.clone(),
            problem: problem.into(),
        }
    }

    /// Reads the client's `ElicitResult` (`{"action": "accept" | "decline" | "cancel",
    /// "content"?: {...}}`). Anything else, content with a field the form does not have, or
    /// a non-boolean `always`, is refused: an answer that cannot be read sends nothing.
    pub fn read_answer(&self, result: &Value) -> Result<ConsentAnswer, ToolRefusal> {
        let Some(o) = result.as_object() else {
            return Err(self.bad("the ElicitResult is not an object"));
        };
        match o.get("action").and_then(Value::as_str) {
            Some("decline") => return Ok(ConsentAnswer::Decline),
            Some("cancel") => return Ok(ConsentAnswer::Cancel),
            Some("accept") => {}
            Some(other) => return Err(self.bad(format!("unknown action {other:?}"))),
            None => return Err(self.bad("no string \"action\"")),
        }
        let content = match o.get("content") {
            None | Some(Value::Null) => return Ok(ConsentAnswer::Accept { always: false }),
            Some(Value::Object(c)) => c,
            Some(_) => return Err(self.bad("\"content\" is not an object")),
        };
        let mut always = false;
        for (field, value) in content {
            if field != ALWAYS_FIELD || !self.offer_always {
                return Err(self.bad(format!("the form has no field {field:?}")));
            }
            always = value
                .as_bool()
                .ok_or_else(|| self.bad(format!("{ALWAYS_FIELD:?} must be a boolean")))?;
        }
        Ok(ConsentAnswer::Accept { always })
    }

    /// Applies the person's answer to `call` (the call being answered: in 2026-07-28 the
    /// retry's, rebuilt from its params). Accept: `Ok` with the approval's scope, the call
    /// goes out (and with [`ApprovalScope::Always`] the driver saves
    /// [`ConsentPolicy::approvals`]); after it, the driver records the result
    /// ([`ConsentPolicy::record_result`]) as for any call. Decline, cancel, a call other
    /// than the one shown, or a call the policy now denies: the tool error to answer.
    pub fn apply(
        &self,
        policy: &mut ConsentPolicy,
        call: &UpstreamCall,
        answer: ConsentAnswer,
    ) -> Result<ApprovalScope, ToolRefusal> {
        if call.server != self.server || call_digest(call) != self.digest {
            return Err(ToolRefusal::AnswerForAnotherCall {
                server: call.server.clone(),
                tool: call.tool.name.clone(),
            });
        }
        let always = match answer {
            ConsentAnswer::Decline => {
                return Err(ToolRefusal::Declined {
                    server: self.server.clone(),
                    tool: self.tool.clone(),
                })
            }
            ConsentAnswer::Cancel => {
                return Err(ToolRefusal::Cancelled {
                    server: self.server.clone(),
                    tool: self.tool.clone(),
                })
            }
            ConsentAnswer::Accept { always } => always,
        };
        let tool_call = call.as_tool_call();
        let denied = |reasons: Vec<Reason>| ToolRefusal::Denied {
            server: self.server.clone(),
            tool: self.tool.clone(),
            reasons: join(&reasons),
        };
        if always {
            match policy.approve_always(&tool_call) {
                Ok(a) => return Ok(a.scope),
                Err(ApprovalError::Denied { reasons, .. }) => return Err(denied(reasons)),
                // No longer offered (the policy changed since): the person approved at least
                // this call.
                Err(_) => {}
            }
        }
        match policy.approve_once(&tool_call) {
            Ok(a) => Ok(a.scope),
            Err(ApprovalError::Denied { reasons, .. }) => Err(denied(reasons)),
            Err(e) => Err(self.bad(e.to_string())),
        }
    }
}

/// The form's message (plain text: hosts show it as it is).
fn message(p: &ConsentPrompt, flows: &[DataFlow]) -> String {
    use std::fmt::Write as _;
    let mut m = String::new();
    let trust = if p.trusted { "trusted" } else { "not trusted" };
    let _ = writeln!(m, "mcpwire asks before this tool call goes out.");
    let _ = writeln!(m);
    let _ = writeln!(m, "Server: {} ({trust})", p.server);
    let _ = write!(m, "Tool: {}", shown::inline(&p.tool));
    if p.exposed_name != p.tool {
        let _ = write!(m, " (called as {})", shown::inline(&p.exposed_name));
    }
    let _ = writeln!(m);
    if let Some(title) = &p.title {
        let _ = writeln!(m, "Title: {}", shown::inline(title));
    }
    match &p.description {
        Some(d) => {
            let _ = writeln!(m, "Description: {}", shown::block(d, "  "));
        }
        None => {
            let _ = writeln!(m, "Description: (none)");
        }
    }
    for flow in flows {
        let _ = writeln!(
            m,
            "WARNING: the arguments carry text from {src}'s results into this call to {dst} \
             (at {at}: \"{excerpt}\"). A result of one server is untrusted input to another: \
             check what {src} returned before it reaches {dst}.",
            src = flow.source,
            dst = flow.target,
            at = if flow.pointer.is_empty() {
                "the arguments".to_owned()
            } else {
                shown::inline(&flow.pointer)
            },
            excerpt = shown::inline(&flow.excerpt),
        );
    }
    let _ = writeln!(m, "Why it asks:");
    for r in &p.decision.reasons {
        if !matches!(r, Reason::DataFlow(_)) {
            let _ = writeln!(m, "  - {r}");
        }
    }
    let _ = writeln!(
        m,
        "Arguments, in full, exactly as they will be sent ({} bytes of JSON):",
        p.arguments_json.len()
    );
    let _ = writeln!(m, "{}", p.arguments_json);
    let _ = writeln!(m);
    if p.decision.offer_always {
        let _ = write!(
            m,
            "Accept to send this call (tick \"{ALWAYS_FIELD}\" to allow this tool from now on); \
             decline to refuse it."
        );
    } else {
        let _ = write!(m, "Accept to send this call once; decline to refuse it.");
    }
    m
}

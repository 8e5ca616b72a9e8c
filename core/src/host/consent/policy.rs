//! The per-call decision: [`ConsentPolicy::decide`] weighs a [`ToolCall`] against the user's
//! [`Rules`], the remembered [`ToolApprovals`] and the session's [`Provenance`], and gives a
//! [`Decision`]: a [`Verdict`] with every [`Reason`]. The rules it applies are listed in
//! [`crate::host::consent`].

use std::fmt;

use serde_json::Value;

use super::approvals::{ApprovalState, ToolApprovals};
use super::billing::{self, KeywordLocation};
use super::prompt::ConsentPrompt;
use super::provenance::{DataFlow, Provenance};
use super::rules::{Rule, RuleList, Rules, ToolPattern};
use super::shown;
use crate::host::{ServerId, Trust};
use crate::mcp::results::{CallToolResult, Tool, ToolAnnotations};

/// One call the model wants to make, as the policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct ToolCall<'a> {
    /// The server it goes to (the host's id for it).
    pub server: &'a ServerId,
    /// The host's trust in that server.
    pub trust: Trust,
    /// The tool, as the server listed it.
    pub tool: &'a Tool,
    /// The name the model called it by (the catalog's exposed name).
    pub exposed_name: &'a str,
    /// The arguments exactly as they will be sent.
    pub arguments: &'a Value,
}

/// Allow, ask or deny. Ordered by strictness: `Allow < Ask < Deny`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Send the call without asking.
    Allow,
    /// Show the [`ConsentPrompt`] and send only if the person approves.
    Ask,
    /// Do not send it; nothing the person answers changes that.
    Deny,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Allow => "allow",
            Verdict::Ask => "ask",
            Verdict::Deny => "deny",
        })
    }
}

/// What a behaviour the policy acts on rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// A trusted server's annotation says so.
    Stated,
    /// A trusted server's tool leaves the hint out, and the spec's default says so.
    Default,
    /// The server is not trusted: its hints are not believed, and the worst is assumed.
    Untrusted,
}

/// A hint an untrusted server's tool claims that would spare a prompt if it were believed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HintClaim {
    /// The annotation's name (`readOnlyHint`, ...).
    pub hint: &'static str,
    /// The value claimed.
    pub value: bool,
}

/// How the policy knows a tool spends money.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum BillingEvidence {
    /// A `billing` rule of the user names it.
    Tagged {
        /// The rule.
        rule: Rule,
    },
    /// The keyword heuristic ([`super::billing`]) found a word.
    Keyword {
        /// The word.
        keyword: &'static str,
        /// Where.
        location: KeywordLocation,
    },
}

/// One reason behind a [`Decision`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// A `deny` rule matches: the call is refused.
    DeniedByRule {
        /// The rule.
        rule: Rule,
    },
    /// An `ask` rule matches: the call asks every time.
    AskRule {
        /// The rule.
        rule: Rule,
    },
    /// The arguments carry text from another server's results. No rule or approval lifts it.
    DataFlow(DataFlow),
    /// The server is not trusted: every call asks.
    UntrustedServer {
        /// The server.
        server: ServerId,
    },
    /// The untrusted server's tool claims hints that would spare a prompt; not believed.
    HintsNotBelieved {
        /// The server.
        server: ServerId,
        /// What the tool claims.
        claimed: Vec<HintClaim>,
    },
    /// The call may be destructive: it asks every time.
    Destructive {
        /// What that rests on.
        basis: Basis,
    },
    /// The tool is not read-only (though not destructive): it asks every time.
    NotReadOnly {
        /// What that rests on.
        basis: Basis,
    },
    /// The call may reach external parties (open world): it asks every time.
    OpenWorld {
        /// What that rests on.
        basis: Basis,
    },
    /// The call may spend money: it asks every time.
    Billing {
        /// How that is known.
        evidence: BillingEvidence,
    },
    /// A read-only tool that sends nothing outside, not (or no longer) approved "always".
    NotYetApproved {
        /// It was approved "always", but the server has changed the tool's definition since.
        changed: bool,
    },
    /// An `allow` rule matches but does not lift what still asks.
    AllowRuleNotEnough {
        /// The rule.
        rule: Rule,
        /// What still asks needs a rule naming the tool itself (the rule is server-wide).
        needs_tool_rule: bool,
        /// That rule, when one can be written.
        suggestion: Option<Rule>,
    },
    /// An `allow` rule lets the call through.
    AllowedByRule {
        /// The rule.
        rule: Rule,
    },
    /// The person approved this tool "always" (as it is defined now).
    ApprovedAlways,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::DeniedByRule { rule } => write!(f, "the deny rule {rule} matches"),
            Reason::AskRule { rule } => {
                write!(f, "the ask rule {rule} matches: this tool asks every time")
            }
            Reason::DataFlow(flow) => {
                let at = if flow.pointer.is_empty() {
                    "in the arguments".to_owned()
                } else {
                    format!("at {}", shown::inline(&flow.pointer))
                };
                write!(
                    f,
                    "the arguments carry text from {src}'s results ({at}: \"{excerpt}\") into a \
                     call to {dst}: a result of one server is untrusted input to another; \
                     review what {src} returned before it reaches {dst}",
                    src = flow.source,
                    dst = flow.target,
                    excerpt = shown::inline(&flow.excerpt),
                )
            }
            Reason::UntrustedServer { server } => write!(
                f,
                "{server} is not trusted: every call of an untrusted server asks"
            ),
            Reason::HintsNotBelieved { server, claimed } => {
                let list: Vec<String> = claimed
                    .iter()
                    .map(|c| format!("{}: {}", c.hint, c.value))
                    .collect();
                write!(
                    f,
                    "the tool claims {}, but {server} is not trusted, so its hints are not believed",
                    list.join(", ")
                )
            }
            Reason::Destructive { basis } => match basis {
                Basis::Stated => f.write_str(
                    "the tool may be destructive (destructiveHint: true): destructive calls ask every time",
                ),
                Basis::Default => f.write_str(
                    "the tool may be destructive (it says neither readOnlyHint: true nor \
                     destructiveHint: false, and the spec's default is destructive): \
                     destructive calls ask every time",
                ),
                Basis::Untrusted => f.write_str(
                    "the server is not trusted, so the tool is taken as possibly destructive",
                ),
            },
            Reason::NotReadOnly { basis } => {
                let why = match basis {
                    Basis::Stated => "readOnlyHint: false",
                    _ => "readOnlyHint is absent, and the spec's default is false",
                };
                write!(
                    f,
                    "the tool changes things ({why}): only read-only tools can be allowed without asking"
                )
            }
            Reason::OpenWorld { basis } => match basis {
                Basis::Stated => f.write_str(
                    "the tool may send data outside (openWorldHint: true): calls that reach \
                     external parties ask every time",
                ),
                Basis::Default => f.write_str(
                    "the tool may send data outside (openWorldHint is absent, and the spec's \
                     default is open world): calls that reach external parties ask every time",
                ),
                Basis::Untrusted => f.write_str(
                    "the server is not trusted, so the tool is taken as possibly sending data outside",
                ),
            },
            Reason::Billing { evidence } => match evidence {
                BillingEvidence::Tagged { rule } => write!(
                    f,
                    "the billing rule {rule} marks the tool as spending money: billing calls ask every time"
                ),
                BillingEvidence::Keyword { keyword, location } => {
                    let place = match location {
                        KeywordLocation::Name => "name",
                        KeywordLocation::Title => "title",
                        KeywordLocation::Description => "description",
                    };
                    write!(
                        f,
                        "the tool looks like it spends money (\"{keyword}\" in its {place}): \
                         billing calls ask every time"
                    )
                }
            },
            Reason::NotYetApproved { changed: false } => f.write_str(
                "the tool is read-only and sends nothing outside, but is not approved yet: \
                 approve this call, or always allow this tool",
            ),
            Reason::NotYetApproved { changed: true } => f.write_str(
                "the tool was approved always, but the server has changed its definition since: \
                 approve it again",
            ),
            Reason::AllowRuleNotEnough {
                rule,
                needs_tool_rule: true,
                suggestion,
            } => {
                write!(
                    f,
                    "the allow rule {rule} covers the whole server, which is not enough for a call \
                     that may be destructive, spend money or send data outside"
                )?;
                match suggestion {
                    Some(s) => write!(f, ": only a rule naming the tool ({s}) lets it through"),
                    None => f.write_str(": only a rule naming the tool lets it through"),
                }
            }
            Reason::AllowRuleNotEnough { rule, .. } => write!(
                f,
                "the allow rule {rule} matches, but no allow rule lifts an ask rule or text \
                 carried from another server"
            ),
            Reason::AllowedByRule { rule } => write!(f, "the allow rule {rule} matches"),
            Reason::ApprovedAlways => f.write_str("you approved this tool always"),
        }
    }
}

/// The policy's answer for one call.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// Allow, ask or deny.
    pub verdict: Verdict,
    /// Why, in a fixed order: for a deny the deny rule; for an ask every reason it asks (and
    /// notes that explain them); for an allow what allows it.
    pub reasons: Vec<Reason>,
    /// Whether "always allow this tool" may be offered: a trusted server's read-only tool that
    /// sends nothing outside, not billing, with no ask or deny rule. (Approving it always
    /// still leaves calls carrying another server's text asking.)
    pub offer_always: bool,
}

/// One line: the verdict, then the reasons, `; `-separated (`ask: github is not trusted: ...`).
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.verdict, join(&self.reasons))
    }
}

/// How far an ask reason can be lifted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lift {
    /// Nothing lifts it (an ask rule, a data flow).
    Never,
    /// Any matching allow rule lifts it.
    AnyAllow,
    /// Only an allow rule naming the tool lifts it.
    ToolAllow,
    /// Any matching allow rule, or a current "always" approval.
    AllowOrApproval,
}

/// Whether a reason blocks "always allow" (an ask reason about the tool, not the call).
fn blocks_always(r: &Reason) -> bool {
    !matches!(
        r,
        Reason::DataFlow(_) | Reason::NotYetApproved { .. } | Reason::HintsNotBelieved { .. }
    )
}

/// A person's approval of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    /// The server.
    pub server: ServerId,
    /// The tool's name (the server's).
    pub tool: String,
    /// Once, or always for this tool.
    pub scope: ApprovalScope,
}

/// How far an [`Approval`] reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalScope {
    /// This call only.
    Once,
    /// This call and the tool's later calls, while its definition stays the same.
    Always,
}

/// Why an approval was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The call is denied; no approval sends it.
    #[error("{server}'s tool {tool:?} is denied ({}); it cannot be approved", join(.reasons))]
    Denied {
        /// The server.
        server: ServerId,
        /// The tool's name.
        tool: String,
        /// Why it is denied.
        reasons: Vec<Reason>,
    },
    /// "Always allow" is not offered for this tool; approve the call once instead.
    #[error("\"always allow\" is not offered for {server}'s tool {tool:?} ({}); approve this call once instead", join(.because))]
    AlwaysNotOffered {
        /// The server.
        server: ServerId,
        /// The tool's name.
        tool: String,
        /// What keeps it from being offered.
        because: Vec<Reason>,
    },
}

fn join(reasons: &[Reason]) -> String {
    let texts: Vec<String> = reasons.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// The consent policy of one host session: the user's rules, the remembered approvals and the
/// provenance of result text. Pure: it reads no clock and no file; a driver loads and stores
/// [`ConsentPolicy::approvals`] and feeds it results as they arrive.
#[derive(Debug, Default)]
pub struct ConsentPolicy {
    rules: Rules,
    approvals: ToolApprovals,
    provenance: Provenance,
}

struct Assessment {
    decision: Decision,
    /// Why "always allow" is not offered (empty when it is).
    blockers: Vec<Reason>,
}

/// The hints a tool claims that would spare a prompt.
fn reassuring(a: &ToolAnnotations) -> Vec<HintClaim> {
    let mut out = Vec::new();
    let mut claim = |hint, stated: Option<bool>, reassuring_value: bool| {
        if stated == Some(reassuring_value) {
            out.push(HintClaim {
                hint,
                value: reassuring_value,
            });
        }
    };
    claim("readOnlyHint", a.read_only_hint, true);
    claim("destructiveHint", a.destructive_hint, false);
    claim("idempotentHint", a.idempotent_hint, true);
    claim("openWorldHint", a.open_world_hint, false);
    out
}

fn basis(stated: Option<bool>) -> Basis {
    if stated.is_some() {
        Basis::Stated
    } else {
        Basis::Default
    }
}

impl ConsentPolicy {
    /// A policy with these rules, no approvals and an empty provenance.
    pub fn new(rules: Rules) -> ConsentPolicy {
        ConsentPolicy {
            rules,
            ..ConsentPolicy::default()
        }
    }

    /// This policy with approvals a driver loaded.
    pub fn with_approvals(mut self, approvals: ToolApprovals) -> ConsentPolicy {
        self.approvals = approvals;
        self
    }

    /// This policy with a provenance store of another configuration.
    pub fn with_provenance(mut self, provenance: Provenance) -> ConsentPolicy {
        self.provenance = provenance;
        self
    }

    /// The rules in force.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Replaces the rules (the settings file changed).
    pub fn set_rules(&mut self, rules: Rules) {
        self.rules = rules;
    }

    /// The remembered approvals, for the driver to persist after a change.
    pub fn approvals(&self) -> &ToolApprovals {
        &self.approvals
    }

    /// The remembered approvals, to revoke some.
    pub fn approvals_mut(&mut self) -> &mut ToolApprovals {
        &mut self.approvals
    }

    /// The session's provenance of result text.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// The session's provenance, to record other text or clear it.
    pub fn provenance_mut(&mut self) -> &mut Provenance {
        &mut self.provenance
    }

    /// Records a `tools/call` result of `server`, so that its text carried into another
    /// server's call asks.
    pub fn record_result(&mut self, server: &ServerId, result: &CallToolResult) {
        self.provenance.record_result(server, result);
    }

    /// Records other text `server` returned (a resource, a prompt).
    pub fn record_text(&mut self, server: &ServerId, text: &str) {
        self.provenance.record_text(server, text);
    }

    /// The decision for `call`. Deterministic: the same rules, approvals, provenance and call
    /// give the same decision.
    pub fn decide(&self, call: &ToolCall<'_>) -> Decision {
        self.assess(call).decision
    }

    /// The decision for `call` with everything a person needs to answer it.
    pub fn prompt(&self, call: &ToolCall<'_>) -> ConsentPrompt {
        ConsentPrompt::new(call, self.decide(call))
    }

    /// The person approves this call once. Refused only when the call is denied.
    pub fn approve_once(&self, call: &ToolCall<'_>) -> Result<Approval, ApprovalError> {
        let decision = self.decide(call);
        if decision.verdict == Verdict::Deny {
            return Err(ApprovalError::Denied {
                server: call.server.clone(),
                tool: call.tool.name.clone(),
                reasons: decision.reasons,
            });
        }
        Ok(Approval {
            server: call.server.clone(),
            tool: call.tool.name.clone(),
            scope: ApprovalScope::Once,
        })
    }

    /// The person approves this call and the tool's later calls ("always allow this tool").
    /// Refused where blanket approval is not allowed (see [`Decision::offer_always`]); on
    /// success the approval is remembered in [`ConsentPolicy::approvals`], for this tool as
    /// it is defined now.
    pub fn approve_always(&mut self, call: &ToolCall<'_>) -> Result<Approval, ApprovalError> {
        let Assessment { decision, blockers } = self.assess(call);
        if decision.verdict == Verdict::Deny {
            return Err(ApprovalError::Denied {
                server: call.server.clone(),
                tool: call.tool.name.clone(),
                reasons: decision.reasons,
            });
        }
        if !decision.offer_always {
            return Err(ApprovalError::AlwaysNotOffered {
                server: call.server.clone(),
                tool: call.tool.name.clone(),
                because: blockers,
            });
        }
        self.approvals.insert(call.server, call.tool);
        Ok(Approval {
            server: call.server.clone(),
            tool: call.tool.name.clone(),
            scope: ApprovalScope::Always,
        })
    }

    fn assess(&self, call: &ToolCall<'_>) -> Assessment {
        let server = call.server;
        let tool = call.tool;
        let name = tool.name.as_str();
        let exposed = Some(call.exposed_name);
        if let Some(rule) = self.rules.find_call(RuleList::Deny, server, name, exposed) {
            let reasons = vec![Reason::DeniedByRule { rule: rule.clone() }];
            return Assessment {
                blockers: reasons.clone(),
                decision: Decision {
                    verdict: Verdict::Deny,
                    reasons,
                    offer_always: false,
                },
            };
        }
        let annotations = tool.annotations.clone().unwrap_or_default();
        let trusted = call.trust == Trust::Trusted;
        let billing = match self
            .rules
            .find_call(RuleList::Billing, server, name, exposed)
        {
            Some(rule) => Some(BillingEvidence::Tagged { rule: rule.clone() }),
            None => billing::keyword(tool)
                .map(|(keyword, location)| BillingEvidence::Keyword { keyword, location }),
        };
        let ask_rule = self.rules.find_call(RuleList::Ask, server, name, exposed);

        let mut asks: Vec<(Reason, Lift)> = Vec::new();
        if let Some(rule) = ask_rule {
            asks.push((Reason::AskRule { rule: rule.clone() }, Lift::Never));
        }
        for flow in self.provenance.flows_into(server, call.arguments) {
            asks.push((Reason::DataFlow(flow), Lift::Never));
        }
        let mut notes = Vec::new();
        if trusted {
            if annotations.is_destructive() {
                let b = basis(annotations.destructive_hint);
                asks.push((Reason::Destructive { basis: b }, Lift::ToolAllow));
            } else if !annotations.is_read_only() {
                let b = basis(annotations.read_only_hint);
                asks.push((Reason::NotReadOnly { basis: b }, Lift::AnyAllow));
            }
            if annotations.is_open_world() {
                let b = basis(annotations.open_world_hint);
                asks.push((Reason::OpenWorld { basis: b }, Lift::ToolAllow));
            }
        } else {
            asks.push((
                Reason::UntrustedServer {
                    server: server.clone(),
                },
                Lift::AnyAllow,
            ));
            let claimed = reassuring(&annotations);
            if !claimed.is_empty() {
                notes.push(Reason::HintsNotBelieved {
                    server: server.clone(),
                    claimed,
                });
            }
            let b = Basis::Untrusted;
            asks.push((Reason::Destructive { basis: b }, Lift::ToolAllow));
            asks.push((Reason::OpenWorld { basis: b }, Lift::ToolAllow));
        }
        if let Some(evidence) = billing.clone() {
            asks.push((Reason::Billing { evidence }, Lift::ToolAllow));
        }
        let blockers: Vec<Reason> = asks
            .iter()
            .map(|(r, _)| r)
            .filter(|r| blocks_always(r))
            .cloned()
            .collect();
        let offer_always = blockers.is_empty();
        let mut approved = false;
        if offer_always {
            match self.approvals.state(server, tool) {
                ApprovalState::Current => approved = true,
                state => asks.push((
                    Reason::NotYetApproved {
                        changed: state == ApprovalState::Outdated,
                    },
                    Lift::AllowOrApproval,
                )),
            }
        }

        let tool_allow = self
            .rules
            .find_specific_call(RuleList::Allow, server, name, exposed);
        let any_allow = self.rules.find_call(RuleList::Allow, server, name, exposed);
        let remaining: Vec<(Reason, Lift)> = asks
            .into_iter()
            .filter(|(_, lift)| match lift {
                Lift::Never => true,
                Lift::AnyAllow => any_allow.is_none(),
                Lift::ToolAllow => tool_allow.is_none(),
                Lift::AllowOrApproval => any_allow.is_none() && !approved,
            })
            .collect();

        if remaining.is_empty() {
            let reason = match any_allow {
                Some(rule) => Reason::AllowedByRule { rule: rule.clone() },
                None => Reason::ApprovedAlways,
            };
            return Assessment {
                blockers,
                decision: Decision {
                    verdict: Verdict::Allow,
                    reasons: vec![reason],
                    offer_always,
                },
            };
        }
        let needs_tool_rule = remaining.iter().any(|(_, l)| *l == Lift::ToolAllow);
        let mut reasons: Vec<Reason> = Vec::with_capacity(remaining.len() + 2);
        for (reason, _) in remaining {
            let after_untrusted = matches!(reason, Reason::UntrustedServer { .. });
            reasons.push(reason);
            if after_untrusted {
                reasons.append(&mut notes);
            }
        }
        reasons.append(&mut notes);
        if let Some(rule) = any_allow {
            reasons.push(Reason::AllowRuleNotEnough {
                rule: rule.clone(),
                needs_tool_rule,
                suggestion: needs_tool_rule
                    .then(|| Rule::new(server.clone(), ToolPattern::Named(name.to_owned())).ok())
                    .flatten(),
            });
        }
        Assessment {
            blockers,
            decision: Decision {
                verdict: Verdict::Ask,
                reasons,
                offer_always,
            },
        }
    }
}

//! The consent policy: which calls go out on their own, which ask a person first, which are
//! refused; what the person is shown; and consent to start local servers and to answer
//! elicitations (the guide's "The user consent UI" and "Managing multiple servers").
//!
//! - [`policy`]: [`ConsentPolicy::decide`] gives a [`Decision`] ([`Verdict`] allow / ask /
//!   deny, with every [`Reason`]) per [`ToolCall`]; approvals once and always;
//! - [`prompt`]: the [`ConsentPrompt`] the UI shows (full arguments, never cut);
//! - [`rules`]: the user's `allow` / `ask` / `deny` lists (`mcp__<server>`,
//!   `mcp__<server>__<tool>`, `mcp__<server>__*`);
//! - [`approvals`]: "always allow this tool", remembered per tool definition (serde);
//! - [`provenance`]: which server's results a call's arguments carry text from;
//! - [`billing`]: how a tool is known to spend money;
//! - [`command`]: consent to run a local server's command (SEP-1024), remembered per exact
//!   command line (serde);
//! - [`elicitation`]: the [`ElicitationPrompt`] for a server's `elicitation/create`.
//!
//! # The rules of a decision
//!
//! In this order:
//!
//! 1. **A `deny` rule** matching the server or the tool denies the call. Nothing overrides it:
//!    no `allow`, no approval; [`ConsentPolicy::approve_once`] refuses it.
//! 2. **Asks that nothing lifts:** an `ask` rule (the tool asks every time, even when it was
//!    approved "always"), and text from another server's results in the arguments
//!    ([`provenance`]: the decision names both servers). No `allow` rule, however specific,
//!    and no remembered approval skips these.
//! 3. **An untrusted server** ([`crate::host::Trust::Untrusted`], the default): every call
//!    asks. Its annotations are not believed (an untrusted tool claiming `readOnlyHint: true`
//!    still asks, and the reason says the hint was not believed); the tool is taken as
//!    possibly destructive and possibly sending data outside.
//! 4. **A trusted server's annotations are believed**, with the spec's defaults where the
//!    tool is silent (`readOnlyHint` false, `destructiveHint` true, `openWorldHint` true):
//!    a destructive tool asks every time; a tool that is not read-only asks every time; an
//!    open-world tool (one that may reach external parties: "external send") asks every
//!    time.
//! 5. **Billing** ([`billing`]: a `billing` rule tag, or keywords in the tool's name, title or
//!    description) asks every time.
//! 6. **A read-only tool of a trusted server that sends nothing outside** (`readOnlyHint:
//!    true`, `openWorldHint: false`), not billing, with no `ask` rule: the only tool for which
//!    "always allow this tool" is offered ([`Decision::offer_always`]). It asks until the
//!    person approves it once or always; an approval "always" lasts while the tool's
//!    definition stays the same ([`approvals`]). [`ConsentPolicy::approve_always`] refuses
//!    any other tool with [`ApprovalError::AlwaysNotOffered`].
//!
//! # What an `allow` rule lifts
//!
//! The person wrote it, so it counts; but how far depends on how precisely it names the
//! tool:
//!
//! | asks because                                  | server-wide `allow` (`mcp__s`, `mcp__s__*`) | `allow` naming the tool (`mcp__s__t`) |
//! |-----------------------------------------------|-----------|-----------|
//! | deny rule                                     | denied    | denied    |
//! | ask rule                                      | asks      | asks      |
//! | text from another server                      | asks      | asks      |
//! | untrusted server                              | lifted    | lifted    |
//! | not read-only (trusted, not destructive)      | lifted    | lifted    |
//! | not yet approved (read-only, closed world)    | lifted    | lifted    |
//! | destructive (stated, default, or untrusted)   | asks      | lifted    |
//! | open world (stated, default, or untrusted)    | asks      | lifted    |
//! | billing                                       | asks      | lifted    |
//!
//! So "destructive, billing and external-send calls always ask" holds against every rule
//! that does not name the tool: a server-wide `allow` approves nothing the server may add
//! later that deletes, pays or posts. Naming one tool in `allow` is the person's explicit
//! word that this tool's calls may go out unasked, and it is taken (as hosts' permission
//! lists do). The decision then says which rule allowed it; and when a server-wide rule was
//! not enough, a note says which rule would be.
//!
//! Within the lists, deny beats ask beats allow whatever each names ([`rules`]).

pub mod approvals;
pub mod billing;
pub mod command;
pub mod elicitation;
pub mod policy;
pub mod prompt;
pub mod provenance;
pub mod rules;
pub(crate) mod shown;

pub use approvals::{ApprovalState, ToolApprovals, ToolFingerprint};
pub use command::{
    ApprovedCommand, CommandApprovals, CommandCheck, CommandLine, CommandPrompt, NotALocalCommand,
};
pub use elicitation::ElicitationPrompt;
pub use policy::{
    Approval, ApprovalError, ApprovalScope, Basis, BillingEvidence, ConsentPolicy, Decision,
    HintClaim, Reason, ToolCall, Verdict,
};
pub use prompt::{ConsentPrompt, ShownAnnotations, ShownHint};
pub use provenance::{DataFlow, Provenance, ProvenanceConfig};
pub use rules::{Rule, RuleError, RuleErrorKind, RuleList, Rules, RulesError, ToolPattern};

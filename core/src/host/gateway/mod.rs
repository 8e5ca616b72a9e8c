//! The gateway's decisions: what `mcpwire host serve` shows the downstream client (the host
//! that started it: Claude Desktop, Claude Code, Cursor, VS Code) and how each downstream
//! request reaches an upstream server. Pure, like the rest of [`crate::host`]: built on the
//! [`catalog`](crate::host::catalog) (names, presentation, search), the
//! [`consent`](crate::host::consent) policy and the [`registry`](crate::host::registry)'s
//! server states; the server engine (`crate::mcp::server`) carries the bytes, a driver calls
//! the upstreams.
//!
//! - [`tools`]: the tools listed downstream ([`ExposedTools`]: every upstream tool under its
//!   exposed name below the discovery threshold, only `search_tools` and `call_tool` (and the
//!   pinned tools) above it), the answer to `search_tools` as tool definitions, and
//!   [`list_changed`]: whether `notifications/tools/list_changed` must go downstream;
//! - [`route`]: a downstream `tools/call` (an exposed name, or `call_tool{name, arguments}`)
//!   to its upstream (server, tool, arguments), or the error to answer;
//! - [`consent`]: the policy's verdict as the downstream sees it: the call goes out, a tool
//!   error naming the rule, or an approval form (an elicitation, MRTR `input_required` in
//!   2026-07-28 or `elicitation/create` in 2025-11-25) and what each answer leads to; a
//!   client that cannot elicit gets the rule to add instead, never a silent call;
//! - [`passthrough`]: upstream prompts under prefixed names and resources under their own
//!   URIs (a URI two servers share, under the gateway's `mcpwire://` form), and the reverse
//!   routing;
//! - [`login`]: an upstream sign-in needed mid-session, as a URL-mode elicitation (the
//!   gateway never opens a browser);
//! - [`snippets`]: what `mcpwire host serve --print-config` prints for each host.
//!
//! Every refusal is a [`ToolRefusal`]: a tool result with `isError: true` whose text says what
//! happened and what to do, written for the person and the model alike.

pub mod consent;
pub mod login;
pub mod passthrough;
pub mod route;
pub mod snippets;
pub mod tools;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{json, Value};

use super::registry::{ConnectionState, Server};
use super::{ServerId, Trust};

pub use consent::{ConsentAnswer, ConsentForm, ConsentStep, Fix, ALWAYS_FIELD};
pub use login::{LoginAnswer, LoginElicitation};
pub use passthrough::{Prompts, ResourceRouteError, Resources, UriForm};
pub use route::{route_call, RouteError, Routed, UpstreamCall};
pub use snippets::{runs_gateway, ServeCommand, SnippetError};
pub use tools::{downstream_tool, list_changed, search_result, ExposedTools};

/// Whether an upstream server can take calls now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Connected and usable.
    Ready,
    /// Not usable now, and why (for a person).
    Unavailable {
        /// The reason, e.g. `exited (while connected): the process ended with status 1`.
        reason: String,
    },
}

impl Availability {
    /// What the registry's state of a server means for calls.
    pub fn of(state: &ConnectionState) -> Availability {
        let reason = match state {
            ConnectionState::Ready { .. } => return Availability::Ready,
            ConnectionState::Connecting { stage, .. } => {
                format!("it is connecting ({stage})")
            }
            ConnectionState::Failed(failure) => failure.to_string(),
            ConnectionState::Disconnected => "it is disconnected".to_owned(),
            ConnectionState::Disabled => {
                "it is disabled in the config (`disabled: true`)".to_owned()
            }
        };
        Availability::Unavailable { reason }
    }
}

/// What becomes of a call whose server the gateway's last look saw unavailable
/// ([`ToolRefusal::Unavailable`] from [`route_call`]), given the server's state now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenUnavailable {
    /// Wait for the server to settle (connect, or the gateway's listing to follow a server
    /// that is ready again), then route the call again.
    Wait,
    /// Answer the refusal.
    Refuse,
}

impl WhenUnavailable {
    /// Connecting (the gateway just started, or it is reconnecting): wait for it, within its
    /// connect timeout. Ready: the host saw it come back before the gateway's listing followed
    /// (the refresh is on its way); wait for that rather than refuse with what is no longer
    /// true. Failed, disconnected, disabled, unknown: refuse, saying why.
    pub fn of(now: Option<&ConnectionState>) -> WhenUnavailable {
        match now {
            Some(ConnectionState::Connecting { .. } | ConnectionState::Ready { .. }) => {
                WhenUnavailable::Wait
            }
            _ => WhenUnavailable::Refuse,
        }
    }
}

/// What the gateway knows of one upstream server for routing and presentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// The host's trust in it: only a trusted server's tool annotations go downstream.
    pub trust: Trust,
    /// Whether it takes calls now.
    pub availability: Availability,
}

/// The upstream servers, by id: what [`route`] and [`tools`] consult. Built from the
/// registry's servers ([`Upstreams::from_servers`]) each time they change, or by hand.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Upstreams(BTreeMap<ServerId, Upstream>);

impl Upstreams {
    /// No server.
    pub fn new() -> Upstreams {
        Upstreams::default()
    }

    /// The registry's servers, each with its trust and availability.
    pub fn from_servers<'a>(servers: impl IntoIterator<Item = &'a Server>) -> Upstreams {
        Upstreams(
            servers
                .into_iter()
                .map(|s| {
                    (
                        s.id().clone(),
                        Upstream {
                            trust: s.trust(),
                            availability: Availability::of(s.state()),
                        },
                    )
                })
                .collect(),
        )
    }

    /// Adds (or replaces) one server.
    pub fn insert(&mut self, id: ServerId, trust: Trust, availability: Availability) {
        self.0.insert(
            id,
            Upstream {
                trust,
                availability,
            },
        );
    }

    /// One server, if the gateway has it.
    pub fn get(&self, id: &ServerId) -> Option<&Upstream> {
        self.0.get(id)
    }

    /// The trust in a server (untrusted for a server the gateway does not have).
    pub fn trust(&self, id: &ServerId) -> Trust {
        self.0.get(id).map(|u| u.trust).unwrap_or_default()
    }

    /// The servers, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&ServerId, &Upstream)> {
        self.0.iter()
    }
}

/// A downstream call the gateway answers with a tool error (`isError: true`) instead of an
/// upstream result. Its `Display` is the text of that error.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ToolRefusal {
    /// `call_tool` named no tool the gateway has.
    UnknownTool {
        /// The name given.
        name: String,
    },
    /// The tool's server cannot take calls now.
    Unavailable {
        /// The server.
        server: ServerId,
        /// Why (see [`Availability`]).
        reason: String,
    },
    /// A meta-tool call with bad arguments (the catalog's message, for the model).
    BadMetaCall {
        /// What is wrong.
        message: String,
    },
    /// `search_tools` could not run the query.
    SearchFailed {
        /// What is wrong with the query.
        message: String,
    },
    /// `call_tool` named a meta-tool.
    MetaToolThroughCallTool {
        /// The meta-tool named.
        name: String,
    },
    /// The consent policy denies the call.
    Denied {
        /// The server.
        server: ServerId,
        /// The tool, as the server names it.
        tool: String,
        /// Why (the deny rule).
        reasons: String,
    },
    /// The call needs approval and the downstream client cannot ask (it declared no
    /// elicitation capability): what to change in the config instead.
    CannotAsk {
        /// The server.
        server: ServerId,
        /// The tool, as the server names it.
        tool: String,
        /// The name the client called it by.
        exposed: String,
        /// Why it asks.
        reasons: String,
        /// What would let it through.
        fix: Box<Fix>,
    },
    /// The person declined the approval form.
    Declined {
        /// The server.
        server: ServerId,
        /// The tool, as the server names it.
        tool: String,
    },
    /// The person dismissed the approval form without choosing.
    Cancelled {
        /// The server.
        server: ServerId,
        /// The tool, as the server names it.
        tool: String,
    },
    /// The answer to the approval form does not fit it (the client's fault): nothing sent.
    BadAnswer {
        /// The server.
        server: ServerId,
        /// The tool, as the server names it.
        tool: String,
        /// What is wrong with the answer.
        problem: String,
    },
    /// The answer came for another call than the one shown (arguments or tool changed).
    AnswerForAnotherCall {
        /// The server.
        server: ServerId,
        /// The tool, as the server names it.
        tool: String,
    },
    /// An upstream needs a sign-in the downstream client cannot show (no URL-mode
    /// elicitation), or the person declined it.
    LoginNeeded {
        /// The server.
        server: ServerId,
        /// What happened.
        why: String,
    },
}

impl ToolRefusal {
    /// The `CallToolResult` JSON: the text as one text block, `isError: true`.
    pub fn to_call_result(&self) -> Value {
        json!({
            "content": [{"type": "text", "text": self.to_string()}],
            "isError": true,
        })
    }
}

impl fmt::Display for ToolRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolRefusal::UnknownTool { name } => write!(
                f,
                "no tool is called {name:?}; search_tools finds tools and gives their exact names"
            ),
            ToolRefusal::Unavailable { server, reason } => write!(
                f,
                "server {server} is unavailable: {reason}; its tools come back when it reconnects"
            ),
            ToolRefusal::BadMetaCall { message } => f.write_str(message),
            ToolRefusal::SearchFailed { message } => write!(f, "search_tools: {message}"),
            ToolRefusal::MetaToolThroughCallTool { name } => write!(
                f,
                "call_tool calls the servers' tools, not {name}; call {name} directly"
            ),
            ToolRefusal::Denied {
                server,
                tool,
                reasons,
            } => write!(
                f,
                "mcpwire refused to call {server}'s tool {tool:?}: {reasons}; a deny rule cannot be \
                 overridden by an approval (remove it from `permissions.deny` to allow the call)"
            ),
            ToolRefusal::CannotAsk {
                server,
                tool,
                exposed,
                reasons,
                fix,
            } => {
                write!(
                    f,
                    "mcpwire did not call {server}'s tool {tool:?} ({exposed}): the call needs your \
                     approval ({reasons}), and this client cannot ask for it (it declared no \
                     elicitation capability). "
                )?;
                fix.fmt(f)
            }
            ToolRefusal::Declined { server, tool } => write!(
                f,
                "you declined the call of {server}'s tool {tool:?}; it was not sent"
            ),
            ToolRefusal::Cancelled { server, tool } => write!(
                f,
                "the approval of {server}'s tool {tool:?} was cancelled without an answer; the call \
                 was not sent"
            ),
            ToolRefusal::BadAnswer {
                server,
                tool,
                problem,
            } => write!(
                f,
                "the answer to the approval of {server}'s tool {tool:?} could not be read \
                 ({problem}); the call was not sent"
            ),
            ToolRefusal::AnswerForAnotherCall { server, tool } => write!(
                f,
                "the approval answered was for another call of {server}'s tool {tool:?} (its \
                 arguments or definition changed since the form was shown); the call was not \
                 sent: call it again to be asked about this one"
            ),
            ToolRefusal::LoginNeeded { server, why } => {
                write!(f, "server {server} needs you to sign in: {why}")
            }
        }
    }
}

/// An upstream's result as the gateway answers it downstream: what the upstream said of
/// itself at the protocol level is dropped (its `resultType` and its
/// `_meta["io.modelcontextprotocol/serverInfo"]`, which the gateway's server core writes
/// for the gateway), everything else (content, `structuredContent`, `isError`, other `_meta`
/// keys) is kept as sent. `_meta` left empty is removed.
pub fn downstream_result(mut result: Value) -> Value {
    if let Some(o) = result.as_object_mut() {
        o.remove("resultType");
        let emptied = match o.get_mut("_meta") {
            Some(Value::Object(meta)) => {
                meta.remove(crate::mcp::meta::SERVER_INFO_KEY);
                meta.is_empty()
            }
            _ => false,
        };
        if emptied {
            o.remove("_meta");
        }
    }
    result
}

//! Operations: what the host asks of the server ([`Operation`], [`OpOptions`]), the handle it
//! gets ([`OpId`]), and the client's record of each one while it runs (its state, the
//! capabilities and versions it is sent with, its MRTR round, its cache ticket), with how an
//! operation ends (served from the cache, failed, restarted, superseded).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::error::IncompatibleError;
use super::{Client, EraState, Event, OpError, RetryReason};
use crate::http::Headers;
use crate::jsonrpc::Id;
use crate::mcp::cache::{CacheableMethod, FetchTicket, ListKind, Lookup, RequestKey};
use crate::mcp::era::VersionNegotiation;
use crate::mcp::headers;
use crate::mcp::meta::{ClientCapabilities, JsonObject, LoggingLevel};
use crate::mcp::mrtr::MrtrRound;
use crate::mcp::request::{CallOptions, RequestHandle};
use crate::mcp::subscription;
use crate::time::Instant;

/// The host's handle for one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// What the host asks of the server.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum Operation {
    /// `server/discover` (in the legacy era: answered from the `initialize` result).
    Discover,
    /// `tools/list`, `prompts/list`, `resources/list` or `resources/templates/list`.
    List {
        /// Which list.
        kind: ListKind,
        /// The page (`None`: the first).
        cursor: Option<String>,
    },
    /// `tools/call`.
    CallTool {
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: JsonObject,
    },
    /// `prompts/get`.
    GetPrompt {
        /// The prompt.
        name: String,
        /// Its arguments.
        arguments: JsonObject,
    },
    /// `resources/read`.
    ReadResource {
        /// The resource.
        uri: String,
    },
    /// `ping` (legacy era only: the modern era has no ping).
    Ping,
}

impl fmt::Debug for Operation {
    /// Names the operation, not its arguments (they may be private).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::List { kind, cursor } => f
                .debug_struct("List")
                .field("kind", kind)
                .field("cursor", &cursor.is_some())
                .finish(),
            Operation::CallTool { name, arguments } => f
                .debug_struct("CallTool")
                .field("name", name)
                .field("arguments", &arguments.len())
                .finish(),
            Operation::GetPrompt { name, arguments } => f
                .debug_struct("GetPrompt")
                .field("name", name)
                .field("arguments", &arguments.len())
                .finish(),
            Operation::ReadResource { uri } => {
                f.debug_struct("ReadResource").field("uri", uri).finish()
            }
            Operation::Discover => f.write_str("Discover"),
            Operation::Ping => f.write_str("Ping"),
        }
    }
}

impl Operation {
    /// The JSON-RPC method.
    pub fn method(&self) -> &'static str {
        match self {
            Operation::Discover => crate::mcp::discover::METHOD,
            Operation::List { kind, .. } => kind.method(),
            Operation::CallTool { .. } => "tools/call",
            Operation::GetPrompt { .. } => "prompts/get",
            Operation::ReadResource { .. } => "resources/read",
            Operation::Ping => "ping",
        }
    }

    /// `params` without `_meta`.
    pub(super) fn params(&self) -> JsonObject {
        let mut p = JsonObject::new();
        match self {
            Operation::Discover | Operation::Ping => {}
            Operation::List { cursor, .. } => {
                if let Some(c) = cursor {
                    p.insert("cursor".to_owned(), Value::String(c.clone()));
                }
            }
            Operation::CallTool { name, arguments } | Operation::GetPrompt { name, arguments } => {
                p.insert("name".to_owned(), Value::String(name.clone()));
                p.insert("arguments".to_owned(), Value::Object(arguments.clone()));
            }
            Operation::ReadResource { uri } => {
                p.insert("uri".to_owned(), Value::String(uri.clone()));
            }
        }
        p
    }

    pub(super) fn cacheable(&self) -> bool {
        CacheableMethod::from_method(self.method()).is_some()
    }

    /// What the Streamable HTTP headers mirror from a request of this operation in `version`
    /// (the fields [`headers::request_headers_for`] reads from the request).
    pub(super) fn header_fields<'a>(&'a self, version: &'a str) -> headers::RequestFields<'a> {
        let null = headers::Arguments::Value(&Value::Null);
        let (name, tool, arguments) = match self {
            Operation::CallTool { name, arguments } | Operation::GetPrompt { name, arguments } => {
                let name = Some(name.as_str());
                (name, name, headers::Arguments::Object(arguments))
            }
            Operation::ReadResource { uri } => (Some(uri.as_str()), None, null),
            Operation::Discover | Operation::Ping | Operation::List { .. } => (None, None, null),
        };
        headers::RequestFields {
            method: self.method(),
            version: Some(Some(version)),
            name,
            tool,
            arguments,
        }
    }
}

/// How an operation uses the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CachePolicy {
    /// Serve a fresh entry without asking the server; store the answer (the default).
    #[default]
    Use,
    /// Ask the server whatever the cache holds; store the answer.
    Refresh,
}

/// Per-operation options.
#[derive(Clone, Debug, Default)]
pub struct OpOptions {
    /// Timeout, resends, idempotency (`None`: [`ClientConfig::call_options`](super::ClientConfig::call_options)).
    pub call: Option<CallOptions>,
    /// Ask for progress notifications (a progress token is allocated).
    pub progress: bool,
    /// `io.modelcontextprotocol/logLevel`.
    pub log_level: Option<LoggingLevel>,
    /// W3C `traceparent` and `tracestate`.
    pub trace: Option<(String, Option<String>)>,
    /// The cache policy.
    pub cache: CachePolicy,
}

/// Where a result came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultSource {
    /// The server answered this operation.
    Server,
    /// A fresh cache entry; nothing was sent.
    Cache,
    /// The refetch failed and the cache policy allowed a stale entry.
    StaleAfterError,
    /// The legacy `initialize` result (a `server/discover` in the legacy era).
    Handshake,
}

/// What an internal operation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Internal {
    /// The stdio `server/discover` probe.
    Probe,
    /// The legacy `initialize`.
    Initialize,
    /// A `tools/list` refresh after `-32020` for this operation.
    ToolsRefresh { waiter: OpId, pages: u32 },
    /// The `tools/list` fetched before this operation's first call of a tool whose
    /// annotations are not known ([`ClientConfig::list_tools_before_call`](super::ClientConfig::list_tools_before_call)).
    ToolsPrefetch { waiter: OpId, pages: u32 },
}

#[derive(Debug)]
pub(super) enum OpState {
    /// Waiting for the era, the handshake or a refresh.
    Queued,
    /// An attempt is with the request tracker.
    Sent { req: RequestHandle },
    /// Waiting for the host's answers.
    AwaitingInput,
}

pub(super) struct Op {
    pub(super) operation: Operation,
    pub(super) options: OpOptions,
    pub(super) internal: Option<Internal>,
    pub(super) state: OpState,
    /// The capabilities declared for this operation (grows on `-32021`).
    pub(super) declared: ClientCapabilities,
    pub(super) versions: VersionNegotiation,
    pub(super) header_refresh_used: bool,
    pub(super) mrtr: Option<MrtrRound>,
    /// The params (with `_meta`) of the last MRTR retry, for resending it.
    pub(super) retry_params: Option<String>,
    pub(super) ticket: Option<FetchTicket>,
    pub(super) progress_token: Option<Id>,
    /// The headers of the attempt with the tracker (HTTP, modern era).
    pub(super) headers: Option<Headers>,
    /// The era the attempt was built for.
    pub(super) sent_legacy: bool,
}

impl Op {
    /// A new operation, queued; `internal` when the client runs it for itself.
    pub(super) fn new(
        operation: Operation,
        options: OpOptions,
        declared: ClientCapabilities,
        versions: VersionNegotiation,
        internal: Option<Internal>,
    ) -> Self {
        Op {
            operation,
            options,
            internal,
            state: OpState::Queued,
            declared,
            versions,
            // An internal operation's `-32020` is not fixed by another refresh.
            header_refresh_used: internal.is_some(),
            mrtr: None,
            retry_params: None,
            ticket: None,
            progress_token: None,
            headers: None,
            sent_legacy: false,
        }
    }
}

pub(super) fn cache_key(
    operation: &Operation,
) -> Result<RequestKey, crate::mcp::cache::CacheError> {
    let params = Value::Object(operation.params());
    RequestKey::from_request(operation.method(), Some(&params))
}

pub(super) fn op_ticket(ops: &mut BTreeMap<OpId, Op>, op_id: OpId) -> Option<FetchTicket> {
    ops.get_mut(&op_id).and_then(|o| o.ticket.take())
}

impl Client {
    /// Drops `req` (the client's own decision: fallback, restart, host cancel): cancels it on
    /// the wire; its events are not reported.
    pub(super) fn supersede(&mut self, now: Instant, req: RequestHandle) {
        self.forget_held(req);
        if self.requests.cancel(now, req, None).is_ok() {
            self.superseded.push(req);
            if self.superseded.len() > 1024 {
                self.superseded.remove(0);
            }
        }
        self.by_req.remove(&req);
    }

    /// Sends `op` again from the start of its current round (after a fix).
    pub(super) fn restart(&mut self, now: Instant, op_id: OpId, reason: RetryReason) {
        let host_op = self.ops.get(&op_id).is_some_and(|o| o.internal.is_none());
        if let Some(op) = self.ops.get_mut(&op_id) {
            op.state = OpState::Queued;
        }
        if host_op {
            self.event(Event::Retrying { op: op_id, reason });
        }
        self.dispatch(now, op_id);
    }

    pub(super) fn fail(&mut self, op_id: OpId, error: OpError) {
        let Some(op) = self.ops.remove(&op_id) else {
            return;
        };
        if let OpState::Sent { req } = op.state {
            self.by_req.remove(&req);
        }
        match op.internal {
            None => self.event(Event::Failed { op: op_id, error }),
            Some(Internal::ToolsRefresh { waiter, .. }) => {
                let message = match error {
                    OpError::Server(e) => e.message,
                    other => other.to_string(),
                };
                self.fail(waiter, IncompatibleError::HeaderMismatch { message }.into());
            }
            Some(Internal::ToolsPrefetch { waiter, .. }) => {
                // Nothing learned: the call goes out without the listing (at the next pump).
                self.tools.listed = true;
                self.tools.released.push(waiter);
            }
            Some(Internal::Probe | Internal::Initialize) => {}
        }
    }

    pub(super) fn fail_queued(&mut self, error: &OpError) {
        for (sub, _) in std::mem::take(&mut self.held_subs) {
            self.event(Event::Subscription(subscription::Event::Ended {
                sub,
                reason: subscription::EndReason::NotOpened(error.to_string()),
            }));
        }
        let queued = self.queued_ops();
        for op_id in queued {
            self.fail(op_id, error.clone());
        }
    }

    /// A host operation whose fresh cache entry answers it: reported, and no request is made.
    pub(super) fn serve_fresh(&mut self, now: Instant, op_id: OpId) -> bool {
        let Some(op) = self.ops.get(&op_id) else {
            return false;
        };
        if op.internal.is_some()
            || op.options.cache != CachePolicy::Use
            || op.retry_params.is_some()
            || !op.operation.cacheable()
            || (matches!(self.era, EraState::Legacy) && op.operation == Operation::Discover)
        {
            return false;
        }
        let Ok(key) = cache_key(&op.operation) else {
            return false;
        };
        let Lookup::Fresh(hit) = self.cache.lookup(now, &key, &self.config.auth_context) else {
            return false;
        };
        self.ops.remove(&op_id);
        self.event(Event::Result {
            op: op_id,
            result: hit.result_json().to_owned(),
            is_error: false,
            source: ResultSource::Cache,
        });
        true
    }

    /// The method of `op_id` (empty when it ended).
    pub(super) fn method_of(&self, op_id: OpId) -> &'static str {
        self.ops.get(&op_id).map_or("", |o| o.operation.method())
    }

    /// The host operations waiting to be sent.
    pub(super) fn queued_ops(&self) -> Vec<OpId> {
        self.ops
            .iter()
            .filter(|(_, o)| o.internal.is_none() && matches!(o.state, OpState::Queued))
            .map(|(&id, _)| id)
            .collect()
    }

    /// The oldest operation of the host that is waiting for its response.
    pub(super) fn oldest_in_flight(&self) -> Option<OpId> {
        self.ops
            .iter()
            .find(|(_, o)| o.internal.is_none() && matches!(o.state, OpState::Sent { .. }))
            .map(|(&id, _)| id)
    }
}

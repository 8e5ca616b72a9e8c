//! `subscription`: `subscriptions/listen`, the long-lived notification streams of `2026-07-28`.
//!
//! Sources: `basic/patterns/subscriptions.mdx` (all of it), `basic/patterns/cancellation.mdx`,
//! `basic/transports/streamable-http.mdx` ("Receiving Messages": the listen response is a
//! long-lived SSE stream), `basic/transports/stdio.mdx` ("Unexpected Termination"), the client
//! guide's "Subscriptions", and the digest's sections 11 and 17.1.
//!
//! [`Subscriptions`] holds any number of subscriptions at once, as a sans-IO state machine:
//!
//! - [`Subscriptions::listen`] builds the request with only the kinds asked for (a
//!   [`SubscriptionFilter`] serializes `false` flags and an empty URI list as absent: "Omitting
//!   a field is equivalent to not subscribing").
//! - The first message of a subscription must be `notifications/subscriptions/acknowledged`
//!   (on stdio: the first message carrying its subscription id; other subscriptions' messages
//!   may come before it). A JSON-RPC error is also accepted first: the server refused the
//!   request ([`EndReason::Rejected`]). Anything else first is a [`ProtocolError`] and ends the
//!   subscription. The acknowledged set may be smaller than the one requested: it is accepted
//!   and the difference is reported ([`Event::Acknowledged::dropped`]).
//! - Later notifications are routed by `_meta["io.modelcontextprotocol/subscriptionId"]`, the id
//!   of the listen request (on HTTP each subscription has its own stream as well). Kinds the
//!   subscription did not ask for are ignored ("The server MUST NOT send notification types the
//!   client has not explicitly requested").
//! - The host ends a subscription with [`Subscriptions::close`]: [`Output::CloseStream`] on HTTP,
//!   [`Output::Notify`] with `notifications/cancelled` for the listen id on stdio.
//! - The server ends it cleanly with a result for the listen request, or with a
//!   `notifications/cancelled` naming the listen id: the spec says both (open issue
//!   modelcontextprotocol#3348, digest section 17.1), so both are a clean end.
//! - A stream that ends with neither, fails, or goes unacknowledged for `ack_timeout`, is an
//!   unexpected disconnect: the subscription is re-sent (a new id) after a jittered backoff.
//!   Nothing is resumed ("Resumption through Last-Event-ID is not supported"), so once the new
//!   stream is acknowledged an [`Event::Refetch`] names the lists and resources to refetch. It
//!   waits for the acknowledgment so that no change between the refetch and the new stream's
//!   start can be missed; [`Event::Disconnected`] tells the host at once that its data may be
//!   stale.

use crate::time::{Duration, Instant};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::backoff::{self, Backoff, Jitter};
use crate::jsonrpc::{ErrorObject, Id, Message, VERSION};
use crate::mcp::request::{
    cancelled_notification, draw_fresh_id, IdSource, RetiredIds, Routed, StreamFailure, Transport,
};

/// The `_meta` key that names the subscription a message belongs to.
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// The listen method.
pub const LISTEN_METHOD: &str = "subscriptions/listen";

/// The acknowledgment's method.
pub const ACKNOWLEDGED_METHOD: &str = "notifications/subscriptions/acknowledged";

/// How many ended or superseded listen ids are remembered, to drop their stragglers quietly.
const RETIRED_CAPACITY: usize = 64;

/// The notification kinds of a subscription (the schema's `SubscriptionFilter`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tools_list_changed: bool,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub prompts_list_changed: bool,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub resources_list_changed: bool,
    /// `notifications/resources/updated` for these resource URIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_subscriptions: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl SubscriptionFilter {
    /// Whether it asks for nothing.
    pub fn is_empty(&self) -> bool {
        !self.tools_list_changed
            && !self.prompts_list_changed
            && !self.resources_list_changed
            && self.resource_subscriptions.is_empty()
    }

    /// What `self` has and `other` lacks.
    pub fn difference(&self, other: &SubscriptionFilter) -> SubscriptionFilter {
        SubscriptionFilter {
            tools_list_changed: self.tools_list_changed && !other.tools_list_changed,
            prompts_list_changed: self.prompts_list_changed && !other.prompts_list_changed,
            resources_list_changed: self.resources_list_changed && !other.resources_list_changed,
            resource_subscriptions: self
                .resource_subscriptions
                .iter()
                .filter(|u| !other.resource_subscriptions.contains(u))
                .cloned()
                .collect(),
        }
    }

    /// What both have.
    pub fn intersection(&self, other: &SubscriptionFilter) -> SubscriptionFilter {
        SubscriptionFilter {
            tools_list_changed: self.tools_list_changed && other.tools_list_changed,
            prompts_list_changed: self.prompts_list_changed && other.prompts_list_changed,
            resources_list_changed: self.resources_list_changed && other.resources_list_changed,
            resource_subscriptions: self
                .resource_subscriptions
                .iter()
                .filter(|u| other.resource_subscriptions.contains(u))
                .cloned()
                .collect(),
        }
    }

    /// What either has (URIs in order of first appearance, without repeats).
    pub fn union(&self, other: &SubscriptionFilter) -> SubscriptionFilter {
        let mut uris: Vec<String> = Vec::new();
        for u in self
            .resource_subscriptions
            .iter()
            .chain(&other.resource_subscriptions)
        {
            if !uris.contains(u) {
                uris.push(u.clone());
            }
        }
        SubscriptionFilter {
            tools_list_changed: self.tools_list_changed || other.tools_list_changed,
            prompts_list_changed: self.prompts_list_changed || other.prompts_list_changed,
            resources_list_changed: self.resources_list_changed || other.resources_list_changed,
            resource_subscriptions: uris,
        }
    }

    /// The refetches that cover every kind in the filter.
    pub fn refetch_targets(&self) -> Vec<RefetchTarget> {
        let mut out = Vec::new();
        if self.tools_list_changed {
            out.push(RefetchTarget::ToolsList);
        }
        if self.prompts_list_changed {
            out.push(RefetchTarget::PromptsList);
        }
        if self.resources_list_changed {
            out.push(RefetchTarget::ResourcesList);
            out.push(RefetchTarget::ResourceTemplatesList);
        }
        out.extend(
            self.resource_subscriptions
                .iter()
                .map(|uri| RefetchTarget::Resource { uri: uri.clone() }),
        );
        out
    }

    fn allows(&self, change: &Change) -> bool {
        match change {
            Change::ToolsListChanged => self.tools_list_changed,
            Change::PromptsListChanged => self.prompts_list_changed,
            Change::ResourcesListChanged => self.resources_list_changed,
            // The uri may be a sub-resource of a subscribed one (digest section 11), so any
            // resource subscription admits it.
            Change::ResourceUpdated { .. } => !self.resource_subscriptions.is_empty(),
        }
    }
}

/// A change a subscription reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `notifications/tools/list_changed`.
    ToolsListChanged,
    /// `notifications/prompts/list_changed`.
    PromptsListChanged,
    /// `notifications/resources/list_changed`.
    ResourcesListChanged,
    /// `notifications/resources/updated`.
    ResourceUpdated {
        /// The resource (possibly a sub-resource of a subscribed URI).
        uri: String,
    },
}

/// Something to fetch again after a reconnect, since changes may have been missed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefetchTarget {
    /// `tools/list`.
    ToolsList,
    /// `prompts/list`.
    PromptsList,
    /// `resources/list`.
    ResourcesList,
    /// `resources/templates/list`: a resources change may change the templates too (the spec
    /// does not say it cannot; the cache invalidates both on `resources/list_changed`).
    ResourceTemplatesList,
    /// `resources/read` of this URI.
    Resource {
        /// The URI.
        uri: String,
    },
}

impl RefetchTarget {
    /// The method that refetches it.
    pub fn method(&self) -> &'static str {
        match self {
            RefetchTarget::ToolsList => "tools/list",
            RefetchTarget::PromptsList => "prompts/list",
            RefetchTarget::ResourcesList => "resources/list",
            RefetchTarget::ResourceTemplatesList => "resources/templates/list",
            RefetchTarget::Resource { .. } => "resources/read",
        }
    }
}

/// HTTP: whether a listen stream that failed with `status` (`None`: the transport failed, no
/// answer) is reconnected (after the backoff): 408, 429, 500, 502, 503 and 504 are passing
/// conditions; any other status ends the subscription.
pub fn reconnects_after(status: Option<u16>) -> bool {
    matches!(status, None | Some(408 | 429 | 500 | 502 | 503 | 504))
}

/// The text of a `subscriptions/listen` request with `meta` as `params._meta`.
pub fn listen_request(id: &Id, meta: &Map<String, Value>, filter: &SubscriptionFilter) -> String {
    #[derive(Serialize)]
    struct Params<'a> {
        #[serde(rename = "_meta")]
        meta: &'a Map<String, Value>,
        notifications: &'a SubscriptionFilter,
    }
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        id: &'a Id,
        method: &'static str,
        params: Params<'a>,
    }
    // Owned JSON values and strings always serialize.
    serde_json::to_string(&Out {
        jsonrpc: VERSION,
        id,
        method: LISTEN_METHOD,
        params: Params {
            meta,
            notifications: filter,
        },
    })
    .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Public state-machine types.

/// The configuration of [`Subscriptions`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionsConfig {
    /// How listen streams are carried (and so how they are closed).
    pub transport: Transport,
    /// The backoff between reconnects.
    pub backoff: Backoff,
    /// How long a listen request may wait for its acknowledgment before it counts as a failed
    /// connection (default 60 s).
    pub ack_timeout: Duration,
    /// A stream that stayed acknowledged this long before it broke starts the backoff over
    /// (default 60 s); a shorter-lived one continues it, so a server that acknowledges and
    /// drops at once is not hammered.
    pub healthy_after: Duration,
    /// How many reconnects in a row before giving up ([`EndReason::GaveUp`]); `None` (the
    /// default) never gives up, waiting at most the backoff's maximum between attempts.
    pub max_reconnects: Option<u32>,
    /// The seed of the jitter source (the caller draws it from its own randomness).
    pub jitter_seed: u64,
}

impl SubscriptionsConfig {
    /// The defaults for `transport`: backoff 250 ms doubling to 30 s, 60 s acknowledgment
    /// timeout, 60 s to be healthy, unlimited reconnects, jitter seed 0.
    pub fn new(transport: Transport) -> Self {
        Self {
            transport,
            backoff: Backoff::default(),
            ack_timeout: Duration::from_secs(60),
            healthy_after: Duration::from_secs(60),
            max_reconnects: None,
            jitter_seed: 0,
        }
    }
}

/// The host's handle for one subscription, stable across reconnects (each of which has a new
/// listen id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubscriptionHandle(pub u64);

/// An output of [`Subscriptions`].
#[derive(Clone, PartialEq)]
pub enum Output {
    /// Send this listen request. HTTP: POST it and feed its response stream to
    /// [`Subscriptions::handle_stream_message`] / [`Subscriptions::handle_stream_end`] /
    /// [`Subscriptions::handle_stream_failed`]. stdio: write it, and feed what the server writes
    /// to [`Subscriptions::handle_channel_message`].
    Send {
        /// The subscription.
        sub: SubscriptionHandle,
        /// The listen id (the subscription id the server will echo).
        id: Id,
        /// The JSON-RPC request text.
        body: String,
    },
    /// HTTP: close this listen stream (it cancels the subscription, or releases the connection
    /// after the server ended it).
    CloseStream {
        /// The subscription.
        sub: SubscriptionHandle,
        /// The listen id.
        id: Id,
    },
    /// stdio: write this notification (`notifications/cancelled` for a listen id).
    Notify {
        /// The notification's JSON text.
        body: String,
    },
    /// Something for the host.
    Event(Event),
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Send { sub, id, body } => f
                .debug_struct("Send")
                .field("sub", sub)
                .field("id", id)
                .field("body_bytes", &body.len())
                .finish(),
            Output::CloseStream { sub, id } => f
                .debug_struct("CloseStream")
                .field("sub", sub)
                .field("id", id)
                .finish(),
            Output::Notify { body } => f.debug_struct("Notify").field("body", body).finish(),
            Output::Event(e) => f.debug_tuple("Event").field(e).finish(),
        }
    }
}

/// The server broke the subscription protocol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The first message of the subscription was not its acknowledgment.
    #[error("the first message of subscription {id} was {got}, not {ACKNOWLEDGED_METHOD}")]
    NotAcknowledgedFirst {
        /// The listen id.
        id: Id,
        /// What came instead (a method name, or "a result").
        got: String,
    },
    /// The acknowledgment's `notifications` is missing or not a filter.
    #[error("the acknowledgment of subscription {id} is malformed: {reason}")]
    MalformedAck {
        /// The listen id.
        id: Id,
        /// What is wrong.
        reason: String,
    },
}

/// Why a subscription ended (for good: no reconnect follows).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum EndReason {
    /// The host closed it.
    ClosedByHost,
    /// The server ended it with a `subscriptions/listen` result (graceful closure).
    ServerCompleted,
    /// The server ended it with `notifications/cancelled` for the listen id.
    ServerCancelled {
        /// The server's reason, if it gave one.
        reason: Option<String>,
    },
    /// The server answered the listen request with a JSON-RPC error.
    Rejected(ErrorObject),
    /// The server answered the listen POST with an HTTP status no reconnect can fix.
    HttpStatus(u16),
    /// The server broke the protocol.
    Protocol(ProtocolError),
    /// It never opened: the era it waited for could not be learned (the error).
    NotOpened(String),
    /// `max_reconnects` reconnects in a row failed.
    GaveUp {
        /// How many reconnects were made.
        reconnects: u32,
    },
    /// The id allocator kept handing out ids already in use.
    IdInUse,
}

/// Why a stream was lost (a reconnect follows).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectCause {
    /// The stream ended without a listen result or a cancellation.
    StreamEnded,
    /// The HTTP request failed (`None`: transport failure; else a retryable status).
    StreamFailed {
        /// The HTTP status.
        status: Option<u16>,
    },
    /// No acknowledgment came within `ack_timeout` (the stream was closed or cancelled).
    AckTimeout,
    /// The stdio channel closed (the server exited).
    ChannelClosed,
}

/// A fact for the host.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The server acknowledged the subscription.
    Acknowledged {
        /// The subscription.
        sub: SubscriptionHandle,
        /// The listen id.
        id: Id,
        /// The kinds that will be delivered (requested and acknowledged).
        accepted: SubscriptionFilter,
        /// Requested kinds the server does not honour.
        dropped: SubscriptionFilter,
        /// Kinds the acknowledgment names that were never requested (ignored).
        unrequested: SubscriptionFilter,
    },
    /// A change notification for the subscription.
    Changed {
        /// The subscription.
        sub: SubscriptionHandle,
        /// What changed.
        change: Change,
    },
    /// The subscription is back after a disconnect, and these may have changed meanwhile.
    Refetch {
        /// The subscription.
        sub: SubscriptionHandle,
        /// What to fetch again.
        targets: Vec<RefetchTarget>,
    },
    /// The stream was lost; a new listen request is sent at `reconnect_at`.
    Disconnected {
        /// The subscription.
        sub: SubscriptionHandle,
        /// The lost listen id.
        id: Id,
        /// Why.
        cause: DisconnectCause,
        /// Reconnects in a row so far, this one included.
        attempt: u32,
        /// When (on stdio, not before the channel is open again).
        reconnect_at: Instant,
    },
    /// The subscription ended for good.
    Ended {
        /// The subscription.
        sub: SubscriptionHandle,
        /// Why.
        reason: EndReason,
    },
    /// A message was not used.
    Ignored {
        /// The subscription whose stream carried it.
        sub: SubscriptionHandle,
        /// Why.
        reason: &'static str,
    },
}

/// Why [`Subscriptions::poll_timeout`] wants to be woken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeoutReason {
    /// The acknowledgment is overdue.
    Ack {
        /// The subscription.
        sub: SubscriptionHandle,
    },
    /// A reconnect is due.
    Reconnect {
        /// The subscription.
        sub: SubscriptionHandle,
    },
}

/// The next instant [`Subscriptions::handle_timeout`] must be called, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// When.
    pub at: Instant,
    /// Why.
    pub reason: TimeoutReason,
}

/// Why a call was refused (the caller broke the API contract).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// The filter asks for nothing.
    #[error("a subscription must ask for at least one notification kind")]
    EmptyFilter,
    /// The handle is unknown or its subscription ended.
    #[error("no active subscription with this handle (unknown or ended)")]
    UnknownHandle,
    /// The id allocator handed out ids already in use.
    #[error("the id allocator returned ids that are already in use")]
    IdInUse,
    /// A stream input on the stdio transport, or a channel input on HTTP.
    #[error("this input does not belong to the configured transport")]
    WrongTransport,
}

// ---------------------------------------------------------------------------------------------
// Internal state.

#[derive(Debug)]
enum State {
    AwaitingAck {
        id: Id,
        deadline: Instant,
    },
    Active {
        id: Id,
        accepted: SubscriptionFilter,
        since: Instant,
    },
    Reconnecting {
        at: Instant,
    },
}

#[derive(Debug)]
struct Sub {
    requested: SubscriptionFilter,
    meta: Map<String, Value>,
    state: State,
    /// Disconnects in a row (see `healthy_after`).
    failures: u32,
    /// What to refetch once the next stream is acknowledged.
    refetch: Option<SubscriptionFilter>,
}

impl Sub {
    fn current_id(&self) -> Option<&Id> {
        match &self.state {
            State::AwaitingAck { id, .. } | State::Active { id, .. } => Some(id),
            State::Reconnecting { .. } => None,
        }
    }
}

/// What a message is, as far as subscriptions care.
enum Kind {
    Ack(Option<Value>),
    Change(Option<Change>),
    ServerCancelled(Option<String>),
    OtherNotification(String),
    Result,
    Error(ErrorObject),
    Request,
}

/// A message's subscription-relevant facts.
struct Parsed {
    kind: Kind,
    /// The id of a response or error, or `notifications/cancelled`'s `requestId`.
    about: Option<Id>,
    /// `_meta["io.modelcontextprotocol/subscriptionId"]`.
    subscription_id: Option<Id>,
}

fn parse(message: &str) -> Option<Parsed> {
    let m = Message::parse(message).ok()?;
    Some(match m {
        Message::Response { id, result } => {
            let sid = serde_json::from_str::<Value>(result.get())
                .ok()
                .and_then(|v| subscription_id_in(&v));
            Parsed {
                kind: Kind::Result,
                about: Some(id),
                subscription_id: sid,
            }
        }
        Message::Error { id, error } => Parsed {
            kind: Kind::Error(error),
            about: id,
            subscription_id: None,
        },
        Message::Request { .. } => Parsed {
            kind: Kind::Request,
            about: None,
            subscription_id: None,
        },
        Message::Notification { method, params } => {
            let params: Value = params
                .and_then(|p| serde_json::from_str(p.get()).ok())
                .unwrap_or(Value::Null);
            let subscription_id = subscription_id_in(&params);
            let mut about = None;
            let kind = match method.as_str() {
                ACKNOWLEDGED_METHOD => Kind::Ack(params.get("notifications").cloned()),
                "notifications/tools/list_changed" => Kind::Change(Some(Change::ToolsListChanged)),
                "notifications/prompts/list_changed" => {
                    Kind::Change(Some(Change::PromptsListChanged))
                }
                "notifications/resources/list_changed" => {
                    Kind::Change(Some(Change::ResourcesListChanged))
                }
                "notifications/resources/updated" => {
                    Kind::Change(params.get("uri").and_then(Value::as_str).map(|uri| {
                        Change::ResourceUpdated {
                            uri: uri.to_owned(),
                        }
                    }))
                }
                "notifications/cancelled" => {
                    about = params
                        .get("requestId")
                        .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok());
                    Kind::ServerCancelled(
                        params
                            .get("reason")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    )
                }
                _ => Kind::OtherNotification(method),
            };
            Parsed {
                kind,
                about,
                subscription_id,
            }
        }
    })
}

fn subscription_id_in(v: &Value) -> Option<Id> {
    let raw = v.get("_meta")?.get(SUBSCRIPTION_ID_KEY)?;
    serde_json::from_value::<Id>(raw.clone()).ok()
}

/// The subscriptions of one server connection (see the module docs).
#[derive(Debug)]
pub struct Subscriptions {
    config: SubscriptionsConfig,
    jitter: Jitter,
    next_handle: u64,
    subs: BTreeMap<SubscriptionHandle, Sub>,
    retired: RetiredIds<SubscriptionHandle>,
    outputs: VecDeque<Output>,
    channel_open: bool,
}

impl Subscriptions {
    /// No subscriptions yet.
    pub fn new(config: SubscriptionsConfig) -> Self {
        Self {
            jitter: Jitter::new(config.jitter_seed),
            config,
            next_handle: 0,
            subs: BTreeMap::new(),
            retired: RetiredIds::new(RETIRED_CAPACITY),
            outputs: VecDeque::new(),
            channel_open: true,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SubscriptionsConfig {
        &self.config
    }

    /// How many subscriptions have not ended.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// The subscriptions that have not ended (connected, connecting or waiting to reconnect).
    pub fn handles(&self) -> Vec<SubscriptionHandle> {
        self.subs.keys().copied().collect()
    }

    /// The current listen id of `sub` (`None` while it waits to reconnect).
    pub fn current_id(&self, sub: SubscriptionHandle) -> Option<&Id> {
        self.subs.get(&sub)?.current_id()
    }

    /// The kinds `sub` currently receives (`None` until acknowledged).
    pub fn accepted(&self, sub: SubscriptionHandle) -> Option<&SubscriptionFilter> {
        match &self.subs.get(&sub)?.state {
            State::Active { accepted, .. } => Some(accepted),
            _ => None,
        }
    }

    /// Opens a subscription for `filter`'s kinds; `meta` is the request's `_meta` (protocol
    /// version, client info and capabilities), kept for reconnects. Emits [`Output::Send`].
    pub fn listen(
        &mut self,
        now: Instant,
        filter: SubscriptionFilter,
        meta: Map<String, Value>,
        ids: &mut dyn IdSource,
    ) -> Result<SubscriptionHandle, UsageError> {
        if filter.is_empty() {
            return Err(UsageError::EmptyFilter);
        }
        let handle = self.reserve();
        self.listen_as(now, handle, filter, meta, ids)?;
        Ok(handle)
    }

    /// Hands out a handle without opening anything: for a subscription that opens later with
    /// [`Subscriptions::listen_as`] (or is kept by the host's client another way).
    pub fn reserve(&mut self) -> SubscriptionHandle {
        let handle = SubscriptionHandle(self.next_handle);
        self.next_handle += 1;
        handle
    }

    /// Whether `sub` was handed out by [`Subscriptions::reserve`] (or `listen`); it may have
    /// ended since.
    pub fn issued(&self, sub: SubscriptionHandle) -> bool {
        sub.0 < self.next_handle
    }

    /// [`Subscriptions::listen`] under a handle from [`Subscriptions::reserve`].
    pub fn listen_as(
        &mut self,
        now: Instant,
        handle: SubscriptionHandle,
        filter: SubscriptionFilter,
        meta: Map<String, Value>,
        ids: &mut dyn IdSource,
    ) -> Result<(), UsageError> {
        if filter.is_empty() {
            return Err(UsageError::EmptyFilter);
        }
        if handle.0 >= self.next_handle || self.subs.contains_key(&handle) {
            return Err(UsageError::UnknownHandle);
        }
        let id = self.fresh_id(ids).ok_or(UsageError::IdInUse)?;
        let mut sub = Sub {
            requested: filter,
            meta,
            state: State::Reconnecting { at: now },
            failures: 0,
            refetch: None,
        };
        self.send(now, handle, &mut sub, id);
        self.subs.insert(handle, sub);
        Ok(())
    }

    /// The host ends `sub`: closes its stream (HTTP) or sends `notifications/cancelled` for its
    /// listen id (stdio), then [`Event::Ended`] with [`EndReason::ClosedByHost`].
    pub fn close(&mut self, _now: Instant, sub: SubscriptionHandle) -> Result<(), UsageError> {
        let s = self.subs.remove(&sub).ok_or(UsageError::UnknownHandle)?;
        if let Some(id) = s.current_id() {
            self.cancel_stream(sub, id.clone(), "Subscription closed by the client");
        }
        self.event(Event::Ended {
            sub,
            reason: EndReason::ClosedByHost,
        });
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Outputs.

    /// The next output, or `None` when there is nothing to do until the next input or timeout.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next instant [`Subscriptions::handle_timeout`] must be called, and why.
    pub fn poll_timeout(&self) -> Option<Timeout> {
        let mut best: Option<Timeout> = None;
        for (&sub, s) in &self.subs {
            let (at, reason) = match s.state {
                State::AwaitingAck { deadline, .. } => (deadline, TimeoutReason::Ack { sub }),
                State::Reconnecting { at } => {
                    if self.config.transport == Transport::Stdio && !self.channel_open {
                        continue;
                    }
                    (at, TimeoutReason::Reconnect { sub })
                }
                State::Active { .. } => continue,
            };
            if best.as_ref().is_none_or(|b| at < b.at) {
                best = Some(Timeout { at, reason });
            }
        }
        best
    }

    // -----------------------------------------------------------------------------------------
    // Inputs.

    /// Time passed: overdue acknowledgments count as a lost stream, due reconnects are sent
    /// (with ids from `ids`). Calling it early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Instant, ids: &mut dyn IdSource) {
        let handles: Vec<SubscriptionHandle> = self.subs.keys().copied().collect();
        for handle in handles {
            let Some(mut s) = self.subs.remove(&handle) else {
                continue;
            };
            let keep = match &s.state {
                State::AwaitingAck { id, deadline } if *deadline <= now => {
                    let id = id.clone();
                    self.cancel_stream(handle, id.clone(), "No acknowledgment in time");
                    self.disconnect(now, handle, &mut s, id, DisconnectCause::AckTimeout, None)
                }
                State::Reconnecting { at }
                    if *at <= now
                        && (self.config.transport == Transport::Http || self.channel_open) =>
                {
                    match self.fresh_id(ids) {
                        Some(id) => {
                            self.send(now, handle, &mut s, id);
                            true
                        }
                        None => {
                            self.event(Event::Ended {
                                sub: handle,
                                reason: EndReason::IdInUse,
                            });
                            false
                        }
                    }
                }
                _ => true,
            };
            if keep {
                self.subs.insert(handle, s);
            }
        }
    }

    /// HTTP: one JSON-RPC message from `sub`'s listen stream.
    pub fn handle_stream_message(
        &mut self,
        now: Instant,
        sub: SubscriptionHandle,
        message: &str,
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        let Some(s) = self.subs.get(&sub) else {
            return self.stray(sub);
        };
        let Some(cur) = s.current_id().cloned() else {
            // The stream was already given up (e.g. after an acknowledgment timeout).
            return Ok(());
        };
        let Some(parsed) = parse(message) else {
            self.event(Event::Ignored {
                sub,
                reason: "not a JSON-RPC message",
            });
            return Ok(());
        };
        // On HTTP the stream names the subscription; a subscription id, when present, must agree.
        if let Some(sid) = parsed.subscription_id.as_ref().filter(|sid| **sid != cur) {
            if self.retired.owner(sid) == Some(sub) {
                // A straggler of this subscription's previous stream.
                return Ok(());
            }
            if matches!(s.state, State::AwaitingAck { .. }) {
                let got = "a message of another subscription".to_owned();
                self.protocol_error(sub, ProtocolError::NotAcknowledgedFirst { id: cur, got });
            } else {
                self.event(Event::Ignored {
                    sub,
                    reason: "a message naming another subscription id",
                });
            }
            return Ok(());
        }
        self.apply(now, sub, cur, parsed);
        Ok(())
    }

    /// HTTP: `sub`'s listen stream ended. Without a listen result or cancellation first, that
    /// is an unexpected disconnect.
    pub fn handle_stream_end(
        &mut self,
        now: Instant,
        sub: SubscriptionHandle,
    ) -> Result<(), UsageError> {
        self.stream_lost(now, sub, DisconnectCause::StreamEnded, None)
    }

    /// HTTP: `sub`'s listen request failed without a JSON-RPC body: a transport failure
    /// (`status: None`) or 408, 429, 500, 502, 503, 504 reconnect (after `retry_after` plus the
    /// backoff); any other status ends the subscription ([`EndReason::HttpStatus`]).
    pub fn handle_stream_failed(
        &mut self,
        now: Instant,
        sub: SubscriptionHandle,
        failure: StreamFailure,
    ) -> Result<(), UsageError> {
        match failure.status {
            Some(status) if !reconnects_after(Some(status)) => {
                if self.config.transport != Transport::Http {
                    return Err(UsageError::WrongTransport);
                }
                let Some(s) = self.subs.get(&sub) else {
                    return self.stray(sub);
                };
                if s.current_id().is_none() {
                    return Ok(());
                }
                self.end(sub, EndReason::HttpStatus(status));
                Ok(())
            }
            status => self.stream_lost(
                now,
                sub,
                DisconnectCause::StreamFailed { status },
                failure.retry_after,
            ),
        }
    }

    /// stdio: one message the server wrote. Messages of a subscription (by subscription id,
    /// listen id, or `notifications/cancelled`'s `requestId`) are used, stragglers of ended
    /// subscriptions are dropped; the rest is [`Routed::NotMine`].
    pub fn handle_channel_message(&mut self, now: Instant, message: &str) -> Routed {
        let Some(parsed) = parse(message) else {
            return Routed::NotMine;
        };
        let key = match &parsed.kind {
            Kind::Result | Kind::Error(_) | Kind::ServerCancelled(_) => {
                parsed.about.as_ref().or(parsed.subscription_id.as_ref())
            }
            Kind::Request => None,
            _ => parsed.subscription_id.as_ref(),
        };
        let Some(key) = key.cloned() else {
            return Routed::NotMine;
        };
        let owner = self
            .subs
            .iter()
            .find(|(_, s)| s.current_id() == Some(&key))
            .map(|(&h, _)| h);
        match owner {
            Some(sub) => {
                self.apply(now, sub, key, parsed);
                Routed::Consumed
            }
            None if self.retired.owner(&key).is_some() => Routed::Consumed,
            None => Routed::NotMine,
        }
    }

    /// stdio: the channel closed (the server exited). Every live subscription is lost and will
    /// be re-sent after [`Subscriptions::handle_channel_open`] and its backoff: the server keeps
    /// no subscription state across restarts.
    pub fn handle_channel_closed(&mut self, now: Instant) {
        self.channel_open = false;
        let handles: Vec<SubscriptionHandle> = self.subs.keys().copied().collect();
        for handle in handles {
            let Some(mut s) = self.subs.remove(&handle) else {
                continue;
            };
            let keep = match s.current_id().cloned() {
                Some(id) => self.disconnect(
                    now,
                    handle,
                    &mut s,
                    id,
                    DisconnectCause::ChannelClosed,
                    None,
                ),
                None => true,
            };
            if keep {
                self.subs.insert(handle, s);
            }
        }
    }

    /// stdio: the channel is open again; due reconnects show up in
    /// [`Subscriptions::poll_timeout`].
    pub fn handle_channel_open(&mut self, _now: Instant) {
        self.channel_open = true;
    }

    // -----------------------------------------------------------------------------------------
    // Internals.

    fn event(&mut self, e: Event) {
        self.outputs.push_back(Output::Event(e));
    }

    /// A stream input for a handle that is not live: quiet for an ended subscription's
    /// stragglers, an error for a handle never issued.
    fn stray(&self, sub: SubscriptionHandle) -> Result<(), UsageError> {
        if sub.0 < self.next_handle {
            Ok(())
        } else {
            Err(UsageError::UnknownHandle)
        }
    }

    fn retire(&mut self, id: Id, sub: SubscriptionHandle) {
        self.retired.retire(id, sub);
    }

    fn fresh_id(&self, ids: &mut dyn IdSource) -> Option<Id> {
        draw_fresh_id(ids, |id| {
            self.subs.values().any(|s| s.current_id() == Some(id))
                || self.retired.owner(id).is_some()
        })
    }

    fn send(&mut self, now: Instant, handle: SubscriptionHandle, s: &mut Sub, id: Id) {
        let body = listen_request(&id, &s.meta, &s.requested);
        self.outputs.push_back(Output::Send {
            sub: handle,
            id: id.clone(),
            body,
        });
        let deadline = crate::backoff::saturating_add(now, self.config.ack_timeout);
        s.state = State::AwaitingAck { id, deadline };
    }

    /// Closes (HTTP) or cancels (stdio) the stream of listen id `id`, and retires the id.
    fn cancel_stream(&mut self, sub: SubscriptionHandle, id: Id, reason: &str) {
        let out = match self.config.transport {
            Transport::Http => Output::CloseStream {
                sub,
                id: id.clone(),
            },
            Transport::Stdio => Output::Notify {
                body: cancelled_notification(&id, Some(reason)),
            },
        };
        self.outputs.push_back(out);
        self.retire(id, sub);
    }

    /// Ends `sub` for good after the server's doing: on HTTP the stream is released.
    fn end(&mut self, sub: SubscriptionHandle, reason: EndReason) {
        if let Some(s) = self.subs.remove(&sub) {
            if let Some(id) = s.current_id() {
                if self.config.transport == Transport::Http {
                    self.outputs.push_back(Output::CloseStream {
                        sub,
                        id: id.clone(),
                    });
                }
                self.retire(id.clone(), sub);
            }
        }
        self.event(Event::Ended { sub, reason });
    }

    fn protocol_error(&mut self, sub: SubscriptionHandle, error: ProtocolError) {
        if let Some(s) = self.subs.remove(&sub) {
            if let Some(id) = s.current_id() {
                self.cancel_stream(sub, id.clone(), "Subscription protocol error");
            }
        }
        self.event(Event::Ended {
            sub,
            reason: EndReason::Protocol(error),
        });
    }

    fn stream_lost(
        &mut self,
        now: Instant,
        sub: SubscriptionHandle,
        cause: DisconnectCause,
        retry_after: Option<Duration>,
    ) -> Result<(), UsageError> {
        if self.config.transport != Transport::Http {
            return Err(UsageError::WrongTransport);
        }
        let Some(mut s) = self.subs.remove(&sub) else {
            return self.stray(sub);
        };
        let keep = match s.current_id().cloned() {
            Some(id) => self.disconnect(now, sub, &mut s, id, cause, retry_after),
            // Already waiting to reconnect: this stream was given up before.
            None => true,
        };
        if keep {
            self.subs.insert(sub, s);
        }
        Ok(())
    }

    /// The stream with listen id `id` is lost: schedule a reconnect (returns `true`: keep the
    /// subscription) or give up (returns `false`).
    fn disconnect(
        &mut self,
        now: Instant,
        handle: SubscriptionHandle,
        s: &mut Sub,
        id: Id,
        cause: DisconnectCause,
        retry_after: Option<Duration>,
    ) -> bool {
        self.retire(id.clone(), handle);
        if let State::Active {
            accepted, since, ..
        } = &s.state
        {
            if now.saturating_duration_since(*since) >= self.config.healthy_after {
                s.failures = 0;
            }
            let pending = s.refetch.take().unwrap_or_default();
            s.refetch = Some(pending.union(accepted));
        }
        s.failures = s.failures.saturating_add(1);
        if self
            .config
            .max_reconnects
            .is_some_and(|max| s.failures > max)
        {
            self.event(Event::Ended {
                sub: handle,
                reason: EndReason::GaveUp {
                    reconnects: s.failures - 1,
                },
            });
            return false;
        }
        let Some(at) = backoff::next_attempt(
            &self.config.backoff,
            now,
            s.failures,
            self.jitter.next_u64(),
            retry_after,
            None,
        ) else {
            self.event(Event::Ended {
                sub: handle,
                reason: EndReason::GaveUp {
                    reconnects: s.failures - 1,
                },
            });
            return false;
        };
        s.state = State::Reconnecting { at };
        self.event(Event::Disconnected {
            sub: handle,
            id,
            cause,
            attempt: s.failures,
            reconnect_at: at,
        });
        true
    }

    /// Applies a message that belongs to `sub`, whose current listen id is `cur`.
    fn apply(&mut self, now: Instant, sub: SubscriptionHandle, cur: Id, parsed: Parsed) {
        let Some(s) = self.subs.get_mut(&sub) else {
            return;
        };
        let awaiting = matches!(s.state, State::AwaitingAck { .. });
        // A response or cancellation about another id is not about this subscription.
        let foreign = parsed.about.as_ref().is_some_and(|a| *a != cur);
        match parsed.kind {
            Kind::Error(error) if !foreign => self.end(sub, EndReason::Rejected(error)),
            Kind::Ack(notifications) if awaiting => {
                let acked = match notifications
                    .map(serde_json::from_value::<SubscriptionFilter>)
                    .transpose()
                {
                    Ok(Some(f)) => f,
                    Ok(None) => {
                        let reason = "no notifications member".to_owned();
                        self.protocol_error(sub, ProtocolError::MalformedAck { id: cur, reason });
                        return;
                    }
                    Err(e) => {
                        let reason = e.to_string();
                        self.protocol_error(sub, ProtocolError::MalformedAck { id: cur, reason });
                        return;
                    }
                };
                let accepted = s.requested.intersection(&acked);
                let dropped = s.requested.difference(&acked);
                let unrequested = acked.difference(&s.requested);
                let refetch = s.refetch.take();
                s.state = State::Active {
                    id: cur.clone(),
                    accepted: accepted.clone(),
                    since: now,
                };
                self.event(Event::Acknowledged {
                    sub,
                    id: cur,
                    accepted,
                    dropped,
                    unrequested,
                });
                if let Some(refetch) = refetch {
                    let targets = refetch.refetch_targets();
                    if !targets.is_empty() {
                        self.event(Event::Refetch { sub, targets });
                    }
                }
            }
            _ if awaiting => {
                let got = match &parsed.kind {
                    Kind::Result => "a result".to_owned(),
                    Kind::Request => "a request".to_owned(),
                    Kind::Change(Some(Change::ToolsListChanged)) => {
                        "notifications/tools/list_changed".to_owned()
                    }
                    Kind::Change(Some(Change::PromptsListChanged)) => {
                        "notifications/prompts/list_changed".to_owned()
                    }
                    Kind::Change(Some(Change::ResourcesListChanged)) => {
                        "notifications/resources/list_changed".to_owned()
                    }
                    Kind::Change(_) => "notifications/resources/updated".to_owned(),
                    Kind::ServerCancelled(_) => "notifications/cancelled".to_owned(),
                    Kind::OtherNotification(m) => m.clone(),
                    Kind::Ack(_) | Kind::Error(_) => "a message about another request".to_owned(),
                };
                self.protocol_error(sub, ProtocolError::NotAcknowledgedFirst { id: cur, got });
            }
            Kind::Ack(_) => self.event(Event::Ignored {
                sub,
                reason: "a second acknowledgment",
            }),
            Kind::Result if !foreign => self.end(sub, EndReason::ServerCompleted),
            Kind::ServerCancelled(reason) if !foreign => {
                self.end(sub, EndReason::ServerCancelled { reason });
            }
            Kind::Change(Some(change)) => {
                if s.requested.allows(&change) {
                    self.event(Event::Changed { sub, change });
                } else {
                    self.event(Event::Ignored {
                        sub,
                        reason: "a notification kind this subscription did not ask for",
                    });
                }
            }
            Kind::Change(None) => self.event(Event::Ignored {
                sub,
                reason: "notifications/resources/updated without a uri",
            }),
            Kind::Request => self.event(Event::Ignored {
                sub,
                reason: "a server request on a listen stream (not allowed in 2026-07-28)",
            }),
            Kind::OtherNotification(_) => self.event(Event::Ignored {
                sub,
                reason: "a notification that does not belong on a listen stream",
            }),
            Kind::Error(_) | Kind::Result | Kind::ServerCancelled(_) => {
                self.event(Event::Ignored {
                    sub,
                    reason: "a response or cancellation about another request",
                });
            }
        }
    }
}

/// A sentence for a person: why the subscription ended (the CLI prints it as is).
impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::ClosedByHost => f.write_str("the subscription was closed by the client"),
            EndReason::ServerCompleted => f.write_str("the server ended the subscription"),
            EndReason::ServerCancelled { reason: None } => {
                f.write_str("the server cancelled the subscription")
            }
            EndReason::ServerCancelled {
                reason: Some(reason),
            } => write!(f, "the server cancelled the subscription: {reason}"),
            EndReason::Rejected(e) => write!(
                f,
                "the server refused the subscription: {} (JSON-RPC error {})",
                e.message, e.code
            ),
            EndReason::HttpStatus(status) => write!(
                f,
                "the server refused the subscription with HTTP status {status}"
            ),
            EndReason::Protocol(e) => {
                write!(f, "the server broke the subscription protocol: {e}")
            }
            EndReason::NotOpened(error) => {
                write!(f, "the subscription could not be opened: {error}")
            }
            EndReason::GaveUp { reconnects: 0 } => {
                f.write_str("the subscription's stream was lost and no reconnect was made")
            }
            EndReason::GaveUp { reconnects: 1 } => {
                f.write_str("the subscription's stream was lost and the one reconnect failed")
            }
            EndReason::GaveUp { reconnects } => write!(
                f,
                "the subscription's stream was lost and {reconnects} reconnects in a row failed"
            ),
            EndReason::IdInUse => {
                f.write_str("the subscription ended: every request id it was given was in use")
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn filter(tools: bool, prompts: bool, resources: bool, uris: &[&str]) -> SubscriptionFilter {
        SubscriptionFilter {
            tools_list_changed: tools,
            prompts_list_changed: prompts,
            resources_list_changed: resources,
            resource_subscriptions: uris.iter().map(|u| (*u).to_owned()).collect(),
        }
    }

    /// `subscriptions.mdx`, "Notification Filter": "Omitting a field is equivalent to not
    /// subscribing to that notification type", so only the kinds asked for are sent.
    #[test]
    fn listen_request_names_only_the_kinds_asked_for() {
        let f = filter(true, false, false, &["file:///project/config.json"]);
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"toolsListChanged":true,"resourceSubscriptions":["file:///project/config.json"]}"#
        );
        assert_eq!(
            serde_json::to_string(&filter(false, true, false, &[])).unwrap(),
            r#"{"promptsListChanged":true}"#
        );
    }

    /// `subscriptions.mdx`, "Opening a Stream": the spec's own example request.
    #[test]
    fn listen_request_matches_the_spec_example() {
        let text = include_str!(
            "../../../fixtures/mcp/examples/SubscriptionsListenRequest-listen-for-list-changes.json"
        );
        let expected: Value = serde_json::from_str(text).unwrap();
        let meta = expected["params"]["_meta"].as_object().unwrap().clone();
        let ours = listen_request(
            &Id::from("listen-1"),
            &meta,
            &filter(true, false, false, &["file:///project/config.json"]),
        );
        assert_eq!(serde_json::from_str::<Value>(&ours).unwrap(), expected);
    }

    /// The schema's `SubscriptionFilter`: every field optional, `false` = not subscribed.
    #[test]
    fn acknowledged_filter_reads_absent_fields_as_not_subscribed() {
        let f: SubscriptionFilter =
            serde_json::from_str(r#"{"toolsListChanged":false,"resourcesListChanged":true}"#)
                .unwrap();
        assert_eq!(f, filter(false, false, true, &[]));
        let f: SubscriptionFilter = serde_json::from_str("{}").unwrap();
        assert!(f.is_empty());
    }

    /// `subscriptions.mdx`, "Acknowledgment": a smaller acknowledged set is the subset honoured.
    #[test]
    fn dropped_kinds_are_the_requested_minus_the_acknowledged() {
        let req = filter(true, true, false, &["a", "b"]);
        let ack = filter(true, false, true, &["b"]);
        assert_eq!(req.difference(&ack), filter(false, true, false, &["a"]));
        assert_eq!(req.intersection(&ack), filter(true, false, false, &["b"]));
        assert_eq!(ack.difference(&req), filter(false, false, true, &[]));
        assert_eq!(
            req.union(&ack),
            filter(true, true, true, &["a", "b"]),
            "union keeps each uri once"
        );
    }

    /// Client guide, "Subscriptions": refetch "the relevant lists on every reconnect".
    #[test]
    fn refetch_targets_cover_every_subscribed_kind() {
        let f = filter(true, true, true, &["file:///a"]);
        let targets = f.refetch_targets();
        let methods: Vec<_> = targets.iter().map(RefetchTarget::method).collect();
        assert_eq!(
            methods,
            [
                "tools/list",
                "prompts/list",
                "resources/list",
                "resources/templates/list",
                "resources/read"
            ]
        );
        assert_eq!(
            targets[4],
            RefetchTarget::Resource {
                uri: "file:///a".into()
            }
        );
    }

    /// `subscriptions.mdx`, "Receiving Notifications": the id is under
    /// `io.modelcontextprotocol/subscriptionId` in `_meta`, a string or an integer.
    #[test]
    fn subscription_id_is_read_from_meta() {
        let text = include_str!(
            "../../../fixtures/mcp/examples/ToolListChangedNotification-tools-list-changed.json"
        );
        let p = parse(text).unwrap();
        assert_eq!(p.subscription_id, Some(Id::from("listen-1")));
        assert!(matches!(
            p.kind,
            Kind::Change(Some(Change::ToolsListChanged))
        ));
        let p = parse(
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}"#,
        )
        .unwrap();
        assert_eq!(p.subscription_id, Some(Id::Number(1)));
    }
}

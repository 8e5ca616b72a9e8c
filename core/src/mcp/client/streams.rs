//! The HTTP streams: one numbered exchange per request the driver makes ([`StreamId`]), what
//! each one's response body is (JSON, an SSE stream, an error body), and where the messages it
//! carries go (a request, a `subscriptions/listen` stream, the legacy session's GET streams).

use std::collections::BTreeMap;

use super::{Client, Output};
use crate::backoff;
use crate::http::{Headers, Method, Request, ResponseHead};
use crate::jsonrpc::{ErrorObject, Message};
use crate::mcp::request::{RequestHandle, Routed, StreamFailure};
use crate::mcp::subscription::SubscriptionHandle;
use crate::sse::SseParser;
use crate::time::{Duration, Instant, SystemTime};

/// The number of one HTTP exchange the client asked the driver to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

/// The streams the driver was asked to open and has not finished, by number and by owner.
#[derive(Default)]
pub(super) struct HttpStreams {
    pub(super) map: BTreeMap<StreamId, Stream>,
    /// The stream of each request's current attempt.
    pub(super) by_req: BTreeMap<RequestHandle, StreamId>,
    /// The stream of each `subscriptions/listen` request.
    pub(super) by_sub: BTreeMap<SubscriptionHandle, StreamId>,
    /// The number of the next stream (every number below it was issued).
    next: u64,
    /// The response headers of the stream whose message is being routed.
    pub(super) current_headers: Headers,
}

impl HttpStreams {
    /// Whether `stream` was ever handed to the driver (it may have ended since).
    pub(super) fn issued(&self, stream: StreamId) -> bool {
        stream.0 < self.next
    }

    /// A new stream for `owner`, sent with `sent`.
    pub(super) fn open(&mut self, owner: Owner, sent: Headers) -> StreamId {
        let stream = StreamId(self.next);
        self.next += 1;
        self.map.insert(
            stream,
            Stream {
                owner,
                sent,
                in_session: false,
                head: None,
                wall: None,
                retry_after: None,
                body: Body::Empty,
            },
        );
        stream
    }
}

pub(super) enum Body {
    Empty,
    Json(Vec<u8>),
    Sse(Box<SseParser>),
    /// A non-2xx status: the body is kept to read its JSON-RPC error.
    Error(Vec<u8>),
    /// The body grew past the bound: dropped.
    TooLarge,
}

/// Who a stream's response is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Owner {
    Request(RequestHandle),
    Listen(SubscriptionHandle),
    /// A legacy session's GET stream for a legacy-era subscription.
    LegacyListen(SubscriptionHandle),
    /// The legacy session's own GET stream ([`super::ClientConfig::legacy_listen`]).
    LegacySession,
    /// A notification or an answer: the response is drained and dropped.
    Fire,
    /// One of the authorization flow's fetches ([`super::AuthConfig`]), with what it is for
    /// ([`Client::fetch_guard`]).
    Auth(crate::auth::FetchId, crate::auth::FetchPurpose),
}

pub(super) struct Stream {
    pub(super) owner: Owner,
    pub(super) sent: Headers,
    /// A request sent in the legacy session (its cancellation is a `notifications/cancelled`
    /// POST, not only the closed stream).
    pub(super) in_session: bool,
    pub(super) head: Option<ResponseHead>,
    /// The wall time the head came with.
    wall: Option<SystemTime>,
    pub(super) retry_after: Option<Duration>,
    body: Body,
}

impl Stream {
    /// The response head arrived: how its body is read follows from the status and the
    /// content type; `Retry-After` is read with `wall` (capped at `max_retry_after`).
    pub(super) fn set_head(
        &mut self,
        head: ResponseHead,
        max_body: usize,
        wall: SystemTime,
        max_retry_after: Duration,
    ) {
        let content_type = head
            .headers
            .get("content-type")
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        self.body = if !(200..300).contains(&head.status) {
            Body::Error(Vec::new())
        } else if content_type == "text/event-stream" {
            Body::Sse(Box::new(SseParser::with_max_event_size(max_body)))
        } else if head.status == 202 || head.status == 204 {
            Body::Empty
        } else {
            Body::Json(Vec::new())
        };
        self.retry_after = backoff::retry_after_from_headers(&head.headers, wall, max_retry_after);
        self.wall = Some(wall);
        self.head = Some(head);
    }

    /// Body bytes: the SSE messages they complete go to `messages`; `false` when the body
    /// grew past `max_body` (it is dropped).
    pub(super) fn push(
        &mut self,
        data: &[u8],
        max_body: usize,
        messages: &mut Vec<String>,
    ) -> bool {
        match &mut self.body {
            Body::Json(buf) | Body::Error(buf) => {
                if buf.len().saturating_add(data.len()) > max_body {
                    self.body = Body::TooLarge;
                    return false;
                }
                buf.extend_from_slice(data);
            }
            Body::Sse(parser) => {
                parser.push(data);
                drain_sse(parser, messages);
            }
            Body::Empty | Body::TooLarge => {}
        }
        true
    }
}

pub(super) fn is_jsonrpc_error(body: &[u8]) -> bool {
    std::str::from_utf8(body)
        .ok()
        .map(|t| t.trim_start_matches('\u{feff}'))
        .is_some_and(|t| matches!(Message::parse(t), Ok(Message::Error { .. })))
}

/// The error object of a JSON-RPC error body.
pub(super) fn jsonrpc_error_object(body: &[u8]) -> Option<ErrorObject> {
    let text = std::str::from_utf8(body)
        .ok()?
        .trim_start_matches('\u{feff}');
    match Message::parse(text) {
        Ok(Message::Error { error, .. }) => Some(error),
        _ => None,
    }
}

pub(super) fn is_message_event(event: &str) -> bool {
    event.is_empty() || event == "message"
}

/// Drains complete SSE events into JSON-RPC message texts (`message` events with data; the
/// empty priming event and other event types are skipped).
pub(super) fn drain_sse(parser: &mut SseParser, out: &mut Vec<String>) {
    loop {
        match parser.next_event() {
            Ok(Some(ev)) => {
                if is_message_event(&ev.event) && !ev.data.trim().is_empty() {
                    out.push(ev.data);
                }
            }
            Ok(None) => break,
            Err(_) => continue,
        }
    }
}

impl Client {
    /// Asks the driver for an exchange on a new stream for `owner`.
    pub(super) fn http(
        &mut self,
        owner: Owner,
        method: Method,
        headers: Headers,
        body: String,
    ) -> StreamId {
        let stream = self.streams.open(owner, headers.clone());
        self.push_http(stream, method, headers, body);
        stream
    }

    /// Emits the request of `stream`: `method` to the configured URL with `headers`, then the
    /// host's extra headers whose names `headers` does not have (the client's header wins),
    /// and `body`.
    pub(super) fn push_http(
        &mut self,
        stream: StreamId,
        method: Method,
        mut headers: Headers,
        body: String,
    ) {
        if let Some(bearer) = self.bearer_header() {
            // The token, for the resource it was issued for (this URL) only; it replaces a
            // host `Authorization` header. A token is valid header text. Kept with the
            // stream's sent headers too: a refusal of an older token is told from one of the
            // current token.
            if let Some(s) = self.streams.map.get_mut(&stream) {
                let _ = s.sent.set("authorization", bearer.clone());
            }
            let _ = headers.set("authorization", bearer);
        }
        for (name, value) in self.config.headers.iter() {
            if headers.get(name).is_none() {
                // Both come from a `Headers` already: valid.
                let _ = headers.append(name, value);
            }
        }
        self.outputs.push_back(Output::Http {
            stream,
            request: Request {
                method,
                url: self.config.url.clone(),
                headers,
                body: body.into_bytes(),
            },
        });
    }

    /// HTTP: the head of `stream`'s response.
    pub(super) fn on_response_head(
        &mut self,
        now: Instant,
        wall: SystemTime,
        stream: StreamId,
        head: ResponseHead,
    ) {
        self.opening_answered(now, stream);
        let max_body = self.config.max_body_bytes;
        let max_retry_after = self.config.call_options.backoff.max;
        self.auth_clock(now, wall);
        let succeeded = (200..300).contains(&head.status);
        if let Some(s) = self.streams.map.get_mut(&stream) {
            if succeeded && matches!(s.owner, Owner::Request(_)) {
                self.auth_request_succeeded();
            }
        }
        if let Some(s) = self.streams.map.get_mut(&stream) {
            s.set_head(head, max_body, wall, max_retry_after);
        }
    }

    /// HTTP: bytes of `stream`'s response body.
    pub(super) fn on_response_data(&mut self, now: Instant, stream: StreamId, data: &[u8]) {
        let max_body = self.config.max_body_bytes;
        let mut messages = Vec::new();
        let Some(s) = self.streams.map.get_mut(&stream) else {
            return;
        };
        let owner = s.owner;
        if !s.push(data, max_body, &mut messages) {
            self.outputs.push_back(Output::CloseStream(stream));
            self.stream_failed(now, stream, None);
        }
        if let Some(h) = self.streams.map.get(&stream).and_then(|s| s.head.as_ref()) {
            self.streams.current_headers = h.headers.clone();
        }
        for m in messages {
            self.route_stream_message(now, owner, &m);
        }
    }

    /// HTTP: `stream`'s response ended (the body is complete).
    pub(super) fn on_response_end(&mut self, now: Instant, stream: StreamId) {
        let Some(mut s) = self.streams.map.remove(&stream) else {
            return;
        };
        let status = s.head.as_ref().map_or(0, |h| h.status);
        if let Owner::Auth(fetch, _) = s.owner {
            let wall = s.wall.unwrap_or(crate::time::UNIX_EPOCH);
            let headers = s
                .head
                .as_ref()
                .map(|h| h.headers.clone())
                .unwrap_or_default();
            return match std::mem::replace(&mut s.body, Body::Empty) {
                Body::Json(buf) | Body::Error(buf) => {
                    self.auth_fetch_done(now, fetch, wall, status, &headers, &buf)
                }
                Body::Empty if s.head.is_some() => {
                    self.auth_fetch_done(now, fetch, wall, status, &headers, &[])
                }
                Body::Empty => self.auth_fetch_failed(now, fetch, "no answer"),
                Body::Sse(_) => {
                    self.auth_fetch_failed(now, fetch, "an event stream, not a document")
                }
                Body::TooLarge => self.auth_fetch_failed(now, fetch, "the answer is too large"),
            };
        }
        if let Some(h) = &s.head {
            self.streams.current_headers = h.headers.clone();
        }
        match std::mem::replace(&mut s.body, Body::Empty) {
            Body::Json(buf) => {
                let text = String::from_utf8_lossy(&buf);
                let text = text.trim_start_matches('\u{feff}');
                if !text.trim().is_empty() {
                    self.route_stream_message(now, s.owner, text);
                }
                self.owner_end(now, s.owner);
            }
            Body::Sse(mut parser) => {
                let mut messages = Vec::new();
                if let Ok(Some(ev)) = parser.finish() {
                    if is_message_event(&ev.event) && !ev.data.is_empty() {
                        messages.push(ev.data);
                    }
                }
                for m in messages {
                    self.route_stream_message(now, s.owner, &m);
                }
                let last = parser.last_event_id().map(str::to_owned);
                if !self.schedule_resume(now, s.owner, last, parser.retry()) {
                    self.owner_end(now, s.owner);
                }
            }
            Body::Empty => {
                if s.head.is_none() {
                    // The stream ended before any head: a transport failure.
                    self.owner_failed(now, s.owner, None, None);
                } else {
                    self.owner_end(now, s.owner);
                }
            }
            Body::Error(buf) => {
                if let Owner::Request(req) = s.owner {
                    let wall = s.wall.unwrap_or(crate::time::UNIX_EPOCH);
                    let sent = s.sent.get("authorization").map(str::to_owned);
                    if self.auth_takes(now, req, s.head.as_ref(), wall, status, sent.as_deref()) {
                        return;
                    }
                }
                self.http_error(now, &s, status, &buf)
            }
            Body::TooLarge => {}
        }
    }

    pub(super) fn route_stream_message(&mut self, now: Instant, owner: Owner, text: &str) {
        let parsed = match Message::parse(text) {
            Ok(Message::Request { id, method, params }) => {
                let op = match owner {
                    Owner::Request(req) => self.by_req.get(&req).copied(),
                    // A request on the session's stream belongs to no call; like on stdio, the
                    // oldest operation in flight is the one it is asked for.
                    Owner::LegacySession => self.oldest_in_flight(),
                    _ => None,
                };
                return self.server_request(now, op, &id, &method, params.map(|p| p.get()));
            }
            parsed => parsed,
        };
        match owner {
            Owner::Request(req) => {
                let _ = self.requests.stream_message(now, req, text, || parsed);
            }
            Owner::Listen(sub) => {
                let _ = self.subs.handle_stream_message(now, sub, text);
            }
            Owner::LegacyListen(_) | Owner::LegacySession => {
                // A server may deliver a call's response or progress on a GET stream (legacy
                // "Resumability and Redelivery"): matched by id or token, as on stdio.
                if self.requests.handle_channel_message(now, text) == Routed::Consumed {
                    return;
                }
                if let Ok(Message::Notification { method, .. }) = Message::parse(text) {
                    self.notification(None, method, text.to_owned());
                }
            }
            Owner::Fire | Owner::Auth(..) => {}
        }
    }

    pub(super) fn owner_end(&mut self, now: Instant, owner: Owner) {
        match owner {
            Owner::Request(req) => {
                self.streams.by_req.remove(&req);
                let _ = self.requests.handle_stream_end(now, req);
            }
            Owner::Listen(sub) => {
                self.streams.by_sub.remove(&sub);
                let _ = self.subs.handle_stream_end(now, sub);
            }
            Owner::LegacyListen(sub) => self.legacy_stream_gone(sub, None),
            Owner::LegacySession => self.set_session_stream(None, None),
            Owner::Fire | Owner::Auth(..) => {}
        }
    }

    pub(super) fn owner_failed(
        &mut self,
        now: Instant,
        owner: Owner,
        status: Option<u16>,
        retry_after: Option<Duration>,
    ) {
        let failure = StreamFailure {
            status,
            retry_after,
        };
        self.session.resumes.retain(|r| r.owner != owner);
        match owner {
            Owner::Request(req) => {
                self.streams.by_req.remove(&req);
                let _ = self.requests.handle_stream_failed(now, req, failure);
            }
            Owner::Listen(sub) => {
                self.streams.by_sub.remove(&sub);
                let _ = self.subs.handle_stream_failed(now, sub, failure);
            }
            Owner::LegacyListen(sub) => self.legacy_stream_gone(sub, status),
            Owner::LegacySession => self.set_session_stream(None, status),
            Owner::Fire => {}
            Owner::Auth(fetch, _) => {
                let cause = match status {
                    Some(s) => format!("HTTP {s}"),
                    None => "the connection failed".to_owned(),
                };
                self.auth_fetch_failed(now, fetch, &cause);
            }
        }
    }

    pub(super) fn stream_failed(&mut self, now: Instant, stream: StreamId, status: Option<u16>) {
        self.opening_answered(now, stream);
        if let Some(s) = self.streams.map.remove(&stream) {
            // A broken legacy SSE stream is resumed like one the server closed ("Disconnection
            // MAY occur at any time").
            if let (None, Body::Sse(parser)) = (status, &s.body) {
                let last = parser.last_event_id().map(str::to_owned);
                if self.schedule_resume(now, s.owner, last, parser.retry()) {
                    return;
                }
            }
            self.owner_failed(now, s.owner, status, s.retry_after);
        }
    }
}

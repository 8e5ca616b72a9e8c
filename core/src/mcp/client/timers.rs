//! The client's timers: the next deadline with its reason ([`Timeout`]), from the request
//! tracker, the subscriptions and the legacy session.

use super::Client;
use crate::mcp::request;
use crate::mcp::subscription;
use crate::time::Instant;

/// Why [`Client::handle_timeout`] is due.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutReason {
    /// A request's deadline or resend.
    Request(request::TimeoutReason),
    /// A subscription's acknowledgment or reconnect.
    Subscription(subscription::TimeoutReason),
    /// Legacy HTTP: an SSE stream is resumed with `Last-Event-ID`.
    SseResume,
    /// Legacy HTTP: the session's requests stop waiting for its opening exchanges
    /// ([`super::SESSION_OPEN_WAIT`]).
    SessionOpenWait,
    /// The authorization's browser step runs out of time.
    Authorization,
}

/// The next instant [`Client::handle_timeout`] must be called, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// When.
    pub at: Instant,
    /// Why.
    pub reason: TimeoutReason,
}

impl Client {
    /// The earliest deadline of the client's parts.
    pub(super) fn next_timeout(&self) -> Option<Timeout> {
        let mut best: Option<Timeout> = None;
        let mut consider = |at: Instant, reason: TimeoutReason| {
            if best.as_ref().is_none_or(|b| at < b.at) {
                best = Some(Timeout { at, reason });
            }
        };
        if let Some(t) = self.requests.poll_timeout() {
            consider(t.at, TimeoutReason::Request(t.reason));
        }
        if let Some(t) = self.subs.poll_timeout() {
            consider(t.at, TimeoutReason::Subscription(t.reason));
        }
        if let Some(at) = self.session.next_resume() {
            consider(at, TimeoutReason::SseResume);
        }
        if let Some(at) = self.session.opening.1 {
            consider(at, TimeoutReason::SessionOpenWait);
        }
        if let Some(at) = self.auth_timeout() {
            consider(at, TimeoutReason::Authorization);
        }
        best
    }
}

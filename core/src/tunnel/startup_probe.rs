//! The start-up probe of the main MCP server (`--mcp.startup-wait-timeout`, the Go
//! tunnel-client's setting): before the first poll, the tunnel client waits until the main
//! channel's Streamable HTTP server answers, so that a server started beside it (a sidecar, a
//! unit started at the same time) is up before commands arrive; `/readyz` says `mcp startup
//! probe pending` meanwhile, and keeps saying why when the wait fails.
//!
//! [`StartupProbe`] is a step function like every machine of the tunnel: it hands out the
//! request to send ([`StartupProbe::poll_request`]), takes the answer or the failure
//! ([`StartupProbe::handle_response`], [`StartupProbe::handle_failed`]), and names the next
//! instant it needs ([`StartupProbe::poll_timeout`], [`StartupProbe::handle_timeout`]).
//!
//! The rules:
//! - One request at a time: `POST {url}` with a JSON-RPC `ping`, the forward's `Accept` and
//!   `Content-Type`, and the operator's MCP extra headers; each attempt may take
//!   [`ATTEMPT_TIMEOUT`].
//! - Ready once the server answers HTTP with a status below 500 other than 404: a `2xx`, or a
//!   `4xx` that says the server is up but wants more (a session, an era, authorization).
//! - Retried, with a backoff from 50 ms doubling to 1 s, while the wait lasts: a refused
//!   connection, a missing Unix socket, an attempt that timed out, and a `5xx` (a gateway in
//!   front of a server still starting).
//! - Failed at once, not retried: a `404` (the URL names no MCP endpoint), and any other failure
//!   (a TLS problem, a name that does not resolve): waiting would not fix the configuration.
//! - When the wait passes first: failed, with the last cause.
//!
//! A failed probe keeps `/readyz` at 503 for the life of the process (as in the Go client),
//! and polling starts anyway (fail-open, also as in the Go client), so the tunnel still serves
//! what it can. Differences from the Go client: it runs a whole `initialize` handshake and
//! fails on any status but `2xx`/`401`, retries only refused connections, and probes once even
//! without the setting; this probe runs only when the setting is given.

use std::time::Duration;

use crate::http::{Headers, Method, Request};
use crate::mcp::headers::{ACCEPT, CONTENT_TYPE};
use crate::time::Instant;

/// The longest one attempt may take (the Go client's).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

/// The first pause between attempts; it doubles after each, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// The longest pause between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The longest wait a probe takes (a larger one is this).
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// The probe's body: a JSON-RPC `ping`, which every era of MCP defines.
pub const PROBE_BODY: &[u8] = br#"{"jsonrpc":"2.0","id":"mcpwire-startup-probe","method":"ping"}"#;

/// Why an attempt got no HTTP answer (the driver classifies its transport's error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptFailure {
    /// The connection was refused: nothing listens yet.
    Refused,
    /// The Unix socket does not exist yet.
    NoSocket,
    /// The attempt took longer than [`ATTEMPT_TIMEOUT`].
    TimedOut,
    /// Anything else (TLS, name resolution, a proxy): not retried.
    Other,
}

/// How the probe ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The server answered.
    Ready {
        /// The status of its answer.
        status: u16,
        /// Attempts made.
        attempts: u32,
    },
    /// It did not, or answered that it cannot serve.
    Failed {
        /// Why, in words a person can act on (never a header value).
        reason: String,
        /// Attempts made.
        attempts: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// The next attempt is due at this instant.
    Due(Instant),
    /// An attempt is out.
    Awaiting,
    /// Over.
    Done(ProbeOutcome),
}

/// The start-up probe of one MCP server (see the module's documentation).
#[derive(Clone, Debug)]
pub struct StartupProbe {
    request: Request,
    /// The URL as messages show it (no credentials, query or fragment).
    shown: String,
    wait_until: Instant,
    wait: Duration,
    backoff: Duration,
    attempts: u32,
    last_cause: Option<String>,
    state: State,
}

impl StartupProbe {
    /// A probe of the server at `url`, with `extra_headers` (the operator's
    /// `--mcp.extra-headers`) on its requests, waiting at most `wait` from `now` (at most
    /// [`MAX_WAIT`]). The first attempt is due at once.
    pub fn new(
        url: &str,
        extra_headers: &[(String, crate::tunnel::engine::Secret)],
        wait: Duration,
        now: Instant,
    ) -> Self {
        let mut headers = Headers::new();
        let _ = headers.append("Accept", ACCEPT);
        let _ = headers.append("Content-Type", CONTENT_TYPE);
        crate::tunnel::forward_headers::add_extra_headers(&mut headers, extra_headers);
        let wait = wait.min(MAX_WAIT);
        StartupProbe {
            shown: shown_url(url),
            request: Request {
                method: Method::Post,
                url: url.to_owned(),
                headers,
                body: PROBE_BODY.to_vec(),
            },
            wait_until: now.checked_add(wait).unwrap_or(now),
            wait,
            backoff: FIRST_BACKOFF,
            attempts: 0,
            last_cause: None,
            state: State::Due(now),
        }
    }

    /// The request to send now, when an attempt is due (then nothing more until its answer or
    /// failure is reported).
    pub fn poll_request(&mut self, now: Instant) -> Option<Request> {
        match self.state {
            State::Due(at) if at <= now => {
                self.state = State::Awaiting;
                self.attempts += 1;
                Some(self.request.clone())
            }
            _ => None,
        }
    }

    /// The instant the probe needs [`StartupProbe::handle_timeout`]: the next attempt, or the
    /// end of the wait, whichever is first (`None` while an attempt is out, and once over).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Due(at) => Some(at.min(self.wait_until)),
            _ => None,
        }
    }

    /// Time passed: when the wait is over before the next attempt, the probe fails.
    pub fn handle_timeout(&mut self, now: Instant) {
        if matches!(self.state, State::Due(_)) && now >= self.wait_until {
            self.give_up();
        }
    }

    /// The server answered the attempt with `status`.
    pub fn handle_response(&mut self, now: Instant, status: u16) {
        if self.state != State::Awaiting {
            return;
        }
        match status {
            404 => self.fail(format!(
                "mcp probe failed: {} answered 404: the URL names no MCP endpoint",
                self.shown
            )),
            500.. => self.retry(now, format!("the server answered HTTP {status}")),
            _ => {
                self.state = State::Done(ProbeOutcome::Ready {
                    status,
                    attempts: self.attempts,
                });
            }
        }
    }

    /// The attempt got no answer: `failure` is what kind of failure, `cause` its words (with
    /// the host, never a secret).
    pub fn handle_failed(&mut self, now: Instant, failure: AttemptFailure, cause: &str) {
        if self.state != State::Awaiting {
            return;
        }
        match failure {
            AttemptFailure::Refused | AttemptFailure::NoSocket | AttemptFailure::TimedOut => {
                self.retry(now, cause.to_owned());
            }
            AttemptFailure::Other => self.fail(format!("mcp probe failed: {cause}")),
        }
    }

    /// How the probe ended, once it has.
    pub fn outcome(&self) -> Option<&ProbeOutcome> {
        match &self.state {
            State::Done(o) => Some(o),
            _ => None,
        }
    }

    /// Whether the probe is over.
    pub fn is_done(&self) -> bool {
        self.outcome().is_some()
    }

    /// What `/readyz` says because of the probe: `mcp startup probe pending` while it runs,
    /// its failure once failed, nothing once ready.
    pub fn not_ready_reason(&self) -> Option<String> {
        match &self.state {
            State::Done(ProbeOutcome::Ready { .. }) => None,
            State::Done(ProbeOutcome::Failed { reason, .. }) => Some(reason.clone()),
            _ => Some("mcp startup probe pending".to_owned()),
        }
    }

    /// The cause of the last attempt that will be tried again, for the driver's log line.
    pub fn last_cause(&self) -> Option<&str> {
        self.last_cause.as_deref()
    }

    /// Attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How long the attempt sent at `now` may take: [`ATTEMPT_TIMEOUT`], or less when the wait
    /// ends sooner (at least a millisecond).
    pub fn attempt_timeout(&self, now: Instant) -> Duration {
        self.wait_until
            .saturating_duration_since(now)
            .min(ATTEMPT_TIMEOUT)
            .max(Duration::from_millis(1))
    }

    /// The server's URL as messages show it (no credentials, query or fragment).
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    fn retry(&mut self, now: Instant, cause: String) {
        self.last_cause = Some(cause);
        let at = now + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        if at >= self.wait_until {
            self.give_up();
        } else {
            self.state = State::Due(at);
        }
    }

    fn give_up(&mut self) {
        let cause = self
            .last_cause
            .clone()
            .unwrap_or_else(|| "no attempt finished".to_owned());
        let wait = duration_words(self.wait);
        self.fail(format!(
            "mcp startup wait failed: no answer from {} within {wait}: {cause}",
            self.shown
        ));
    }

    fn fail(&mut self, reason: String) {
        self.state = State::Done(ProbeOutcome::Failed {
            reason,
            attempts: self.attempts,
        });
    }
}

/// `url` without its credentials, query and fragment (which may hold secrets).
fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "the MCP server".to_owned(),
    }
}

/// `300ms`, `10s`, `2m`: a wait as an operator wrote it.
fn duration_words(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    if ms % 1000 != 0 {
        format!("{ms}ms")
    } else if s > 0 && s % 60 == 0 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

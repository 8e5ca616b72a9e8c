//! The upstream sign-ins of `mcpwire host serve`, as the downstream client sees them.
//!
//! An upstream server's grant can stop working mid-session (revoked, its refresh refused):
//! the upstream client then runs the authorization flow again, and its browser step is
//! [`GatewayBrowser`]: it listens on the loopback redirect URI, as `mcpwire host` does, but
//! instead of asking someone at a terminal it hands the authorization URL to the downstream
//! calls waiting on that server. Each gets a URL-mode elicitation
//! ([`LoginElicitation`]: MRTR `input_required` in 2026-07-28, `elicitation/create` in
//! 2025-11-25, mapped by the server core), never a browser opened behind the person's back;
//! a client that cannot show a link gets a tool error saying how to sign in outside it.
//!
//! The upstream call that met the refusal is not lost: it goes on once the flow is done (the
//! upstream client resends it with the new grant), and its result is kept for the retry that
//! carries the person's answer (bound to the call by an unguessable `requestState`). A
//! declined sign-in gives the flow up, and the call with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mcpwire::host::{HostUserAgent, ServerId};
use mcpwire::mcp::{LoopbackBrowser, UserAgent as _, UserAgentError};
use mcpwire::server::Responder;
use mcpwire_core::host::gateway::LoginElicitation;
use mcpwire_core::mcp::meta::ClientCapabilities;
use mcpwire_core::mcp::server::RequestId;
use mcpwire_core::mcp::server::{InputRequest, Reply, RequestContext};
use mcpwire_core::mcp::{Era, JsonObject};
use serde_json::Value;

/// The key the sign-in's answer comes back under (MRTR `inputResponses`).
pub(super) const LOGIN_INPUT: &str = "login";
/// The prefix of a sign-in's `requestState` (the consent form's is its digest).
const STATE_PREFIX: &str = "login:";
/// How long the browser step may take (as `mcpwire host`).
const BROWSER_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a retry waits for the call the sign-in held up: the browser step, then the call.
const RETRY_WAIT: Duration = Duration::from_secs(420);
/// Results kept for retries that have not come (yet); the oldest go first.
const MAX_PARKED: usize = 64;

/// The sign-ins under way and the downstream calls waiting on upstream servers.
pub(super) struct Logins {
    /// The servers that can need a sign-in (HTTP servers the host authorizes): the calls of
    /// the others are not followed.
    may_sign_in: BTreeSet<ServerId>,
    state: Mutex<State>,
    changed: Condvar,
    /// How a person signs in without the client, for the tool error of a client that cannot
    /// show a link.
    how_else: String,
}

#[derive(Default)]
struct State {
    /// The sign-in each server waits for.
    pending: BTreeMap<ServerId, Pending>,
    /// Downstream calls whose upstream call runs now.
    flights: BTreeMap<u64, Flight>,
    next_flight: u64,
    /// Calls whose downstream request was answered with a sign-in link, by token.
    parked: BTreeMap<String, Parked>,
}

struct Pending {
    url: String,
    /// Set when the person declined: the browser step gives up.
    abandoned: Option<String>,
}

struct Flight {
    server: ServerId,
    responder: Responder,
    request: RequestId,
    era: Era,
    capabilities: ClientCapabilities,
    name: String,
    arguments: Value,
    /// The token its downstream request was answered with, once handed to a sign-in.
    handed: Option<String>,
}

struct Parked {
    name: String,
    arguments: Value,
    login: LoginElicitation,
    /// The upstream call's reply, once it came.
    reply: Option<Reply>,
    since: Instant,
}

/// A downstream call registered with [`Logins::begin`] (`None`: not followed).
pub(super) struct FlightId(Option<u64>);

/// What a retry that carries a sign-in's answer comes to.
pub(super) enum Retry {
    /// Answer this now.
    Reply(Reply),
    /// Accepted: wait for the held-up call ([`Logins::wait`]) with this token.
    Wait(String),
}

impl Logins {
    pub(super) fn new(may_sign_in: BTreeSet<ServerId>, how_else: String) -> Arc<Logins> {
        Arc::new(Logins {
            may_sign_in,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            how_else,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A downstream call (`name`, `arguments`, from `cx`) is about to wait on `server`. When
    /// a sign-in of that server is under way it is handed to it at once.
    pub(super) fn begin(
        &self,
        server: &ServerId,
        responder: &Responder,
        cx: &RequestContext,
        name: &str,
        arguments: &Value,
    ) -> FlightId {
        if !self.may_sign_in.contains(server) {
            return FlightId(None);
        }
        let mut st = self.lock();
        let id = st.next_flight;
        st.next_flight += 1;
        st.flights.insert(
            id,
            Flight {
                server: server.clone(),
                responder: responder.clone(),
                request: cx.request,
                era: cx.era,
                capabilities: cx.client_capabilities.clone(),
                name: name.to_owned(),
                arguments: arguments.clone(),
                handed: None,
            },
        );
        let answers = match st.pending.get(server).map(|p| p.url.clone()) {
            Some(url) => self.hand_over(&mut st, server, &url),
            None => Vec::new(),
        };
        drop(st);
        send(answers);
        FlightId(Some(id))
    }

    /// The upstream call of `flight` ended with `reply`: `Some` to answer downstream now,
    /// `None` when its request was answered with a sign-in link (the reply waits for the
    /// retry).
    pub(super) fn end(&self, flight: FlightId, reply: Reply) -> Option<Reply> {
        let Some(id) = flight.0 else {
            return Some(reply);
        };
        let mut st = self.lock();
        let Some(f) = st.flights.remove(&id) else {
            return Some(reply);
        };
        let Some(token) = f.handed else {
            return Some(reply);
        };
        if let Some(p) = st.parked.get_mut(&token) {
            p.reply = Some(reply);
            self.changed.notify_all();
        }
        None
    }

    /// Server `server`'s browser step shows `url`: every call waiting on that server is
    /// answered with the sign-in link.
    fn publish(&self, server: &ServerId, url: &str) {
        let mut st = self.lock();
        st.pending.insert(
            server.clone(),
            Pending {
                url: url.to_owned(),
                abandoned: None,
            },
        );
        let answers = self.hand_over(&mut st, server, url);
        drop(st);
        send(answers);
    }

    /// The answers for the calls on `server` not handed to a sign-in yet.
    fn hand_over(
        &self,
        st: &mut State,
        server: &ServerId,
        url: &str,
    ) -> Vec<(Responder, RequestId, Reply)> {
        let mut answers = Vec::new();
        let now = Instant::now();
        let mut parked = Vec::new();
        for f in st.flights.values_mut() {
            if &f.server != server || f.handed.is_some() {
                continue;
            }
            let reply = match LoginElicitation::new(server, url, &f.capabilities, &self.how_else) {
                Err(refusal) => {
                    // The call goes on without anyone to give its result to.
                    f.handed = Some(String::new());
                    Reply::Result(refusal.to_call_result())
                }
                Ok(login) => {
                    let token = new_token();
                    let id = (f.era == Era::Legacy).then_some(token.as_str());
                    let params = match login.params(id) {
                        Value::Object(p) => p,
                        _ => JsonObject::new(),
                    };
                    let reply = Reply::InputRequired {
                        inputs: vec![(
                            LOGIN_INPUT.to_owned(),
                            InputRequest {
                                method: "elicitation/create".to_owned(),
                                params,
                            },
                        )],
                        state: Some(format!("{STATE_PREFIX}{token}")),
                    };
                    f.handed = Some(token.clone());
                    parked.push((
                        token,
                        Parked {
                            name: f.name.clone(),
                            arguments: f.arguments.clone(),
                            login,
                            reply: None,
                            since: now,
                        },
                    ));
                    reply
                }
            };
            answers.push((f.responder.clone(), f.request, reply));
        }
        for (token, p) in parked {
            st.parked.insert(token, p);
        }
        while st.parked.len() > MAX_PARKED {
            let oldest = st
                .parked
                .iter()
                .min_by_key(|(_, p)| p.since)
                .map(|(t, _)| t.clone());
            match oldest {
                Some(t) => st.parked.remove(&t),
                None => break,
            };
        }
        answers
    }

    /// Whether the browser step of `server` is to give up, and why.
    fn abandoned(&self, server: &ServerId) -> Option<String> {
        self.lock()
            .pending
            .get(server)
            .and_then(|p| p.abandoned.clone())
    }

    /// The browser step of `server` ended.
    fn finish(&self, server: &ServerId) {
        self.lock().pending.remove(server);
    }

    /// Whether `state` (a request's `requestState`) is a sign-in's.
    pub(super) fn is_login_state(state: Option<&str>) -> bool {
        state.is_some_and(|s| s.starts_with(STATE_PREFIX))
    }

    /// The retry of a call answered with a sign-in link: `answer` is the client's
    /// `ElicitResult` (if it sent one), `state` the request's `requestState`.
    pub(super) fn retry(
        &self,
        state: &str,
        answer: Option<&Value>,
        name: &str,
        arguments: &Value,
    ) -> Retry {
        let token = state.strip_prefix(STATE_PREFIX).unwrap_or_default();
        let mut st = self.lock();
        let stale = || {
            Retry::Reply(Reply::tool_error(format!(
                "{name}: this answer is for a sign-in that is no longer pending (or for another \
                 call); call the tool again"
            )))
        };
        let Some(p) = st.parked.get(token) else {
            return stale();
        };
        if p.name != name || &p.arguments != arguments {
            return stale();
        }
        let read = match answer {
            Some(a) => p.login.read_answer(a),
            None => p.login.read_answer(&Value::Null),
        };
        match read {
            Ok(_) => Retry::Wait(token.to_owned()),
            Err(refusal) => {
                let server = p.login.server().clone();
                st.parked.remove(token);
                if let Some(pending) = st.pending.get_mut(&server) {
                    pending.abandoned = Some("the person declined to sign in".to_owned());
                }
                Retry::Reply(Reply::Result(refusal.to_call_result()))
            }
        }
    }

    /// Waits for the reply of the call held up by sign-in `token` (at most [`RETRY_WAIT`]).
    pub(super) fn wait(&self, token: &str) -> Reply {
        let until = Instant::now() + RETRY_WAIT;
        let mut st = self.lock();
        loop {
            match st.parked.get_mut(token) {
                None => {
                    return Reply::tool_error(
                        "the sign-in is no longer pending; call the tool again",
                    )
                }
                Some(p) => {
                    if let Some(reply) = p.reply.take() {
                        st.parked.remove(token);
                        return reply;
                    }
                }
            }
            let now = Instant::now();
            if now >= until {
                st.parked.remove(token);
                return Reply::tool_error(format!(
                    "the sign-in did not finish within {} s; call the tool again",
                    RETRY_WAIT.as_secs()
                ));
            }
            st = self
                .changed
                .wait_timeout(st, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

fn send(answers: Vec<(Responder, RequestId, Reply)>) {
    for (responder, request, reply) in answers {
        // The client may have gone or cancelled: nothing left to answer.
        let _ = responder.respond(request, reply);
    }
}

/// 128 bits from the system's random source, as hex (the clock's nanoseconds if it has
/// none: the token is also bound to the call's name and arguments).
fn new_token() -> String {
    let bits = getrandom::u64()
        .and_then(|a| getrandom::u64().map(|b| (u128::from(a) << 64) | u128::from(b)))
        .unwrap_or_else(|_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        });
    format!("{bits:032x}")
}

/// The gateway's browser step: the loopback redirect as `mcpwire host` waits for it, the
/// URL handed to the downstream calls of that server (and shown on stderr, for whoever reads
/// the host's log).
pub(super) struct GatewayBrowser {
    pub(super) logins: Arc<Logins>,
}

impl HostUserAgent for GatewayBrowser {
    fn authorize_server(
        &self,
        server: &ServerId,
        url: &str,
        redirect_uri: &str,
    ) -> Result<String, UserAgentError> {
        let (shown, asked) = (Arc::clone(&self.logins), Arc::clone(&self.logins));
        let (s1, s2) = (server.clone(), server.clone());
        let browser = LoopbackBrowser::new()
            .with_timeout(BROWSER_TIMEOUT)
            .with_show(move |url| {
                eprintln!(
                    "mcpwire host serve: server {s1} asks for a sign-in; the client is shown the link:"
                );
                eprintln!("  {url}");
                shown.publish(&s1, url);
            })
            .with_abandon(move || asked.abandoned(&s2));
        let outcome = browser.authorize(url, redirect_uri);
        self.logins.finish(server);
        outcome
    }
}

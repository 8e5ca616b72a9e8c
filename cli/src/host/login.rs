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
const MAX_PARKED: usize = 256;
/// How long a held-up call's entry is kept for its retry at most.
const PARKED_FOR: Duration = Duration::from_secs(480);
/// How often a retry waiting for its call tells the client it is still under way (a
/// `notifications/progress`, when the client asked for progress).
const KEEP_ALIVE: Duration = Duration::from_secs(10);

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
    /// The number of the next sign-in (a server's browser step, each time it starts).
    next_generation: u64,
    /// Servers whose last sign-in the person declined: the next call asks again.
    declined: BTreeSet<ServerId>,
    /// Calls whose downstream request was answered with a sign-in link, by token.
    parked: BTreeMap<String, Parked>,
}

struct Pending {
    /// Which sign-in of the server this is.
    generation: u64,
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
    /// Whether its downstream request was answered already, and how.
    handed: Handed,
}

/// What a call's downstream request was answered with while its upstream call ran.
enum Handed {
    /// Nothing yet: the upstream call's reply is the answer.
    No,
    /// A sign-in link: the reply waits (parked under this token) for the retry.
    ToSignIn(String),
    /// A tool error saying the client cannot show the link: the call goes on, and nobody
    /// is left to give its reply to.
    Refused,
}

struct Parked {
    /// The sign-in it was handed to.
    generation: u64,
    name: String,
    arguments: Value,
    login: LoginElicitation,
    /// The upstream call's reply, once it came.
    reply: Option<Reply>,
    since: Instant,
}

/// A downstream call registered with [`Logins::begin`] (`None`: not followed).
#[derive(Clone, Copy)]
pub(super) struct FlightId(Option<u64>);

/// What a retry that carries a sign-in's answer comes to.
pub(super) enum Retry {
    /// Answer this now.
    Reply(Reply),
    /// Accepted: wait for the held-up call ([`Logins::wait`]) with this token.
    Wait(String),
    /// Declined: answer `reply` once the sign-in has been given up ([`Logins::wait_given_up`]),
    /// so that a call made after the answer does not meet the flow being given up.
    Declined {
        server: ServerId,
        generation: u64,
        reply: Reply,
    },
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
                handed: Handed::No,
            },
        );
        // A sign-in being given up is not handed out: this call meets the next one.
        let live = st.pending.get(server).filter(|p| p.abandoned.is_none());
        let answers = match live.map(|p| (p.url.clone(), p.generation)) {
            Some((url, generation)) => self.hand_over(&mut st, server, &url, generation),
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
        let token = match f.handed {
            Handed::No => return Some(reply),
            Handed::Refused => return None,
            Handed::ToSignIn(token) => token,
        };
        if let Some(p) = st.parked.get_mut(&token) {
            p.reply = Some(reply);
            self.changed.notify_all();
        }
        None
    }

    /// Server `server`'s browser step shows `url`: every call waiting on that server is
    /// answered with the sign-in link. The sign-in's number, for [`Logins::finish`].
    fn publish(&self, server: &ServerId, url: &str) -> u64 {
        let mut st = self.lock();
        let generation = st.next_generation;
        st.next_generation += 1;
        st.pending.insert(
            server.clone(),
            Pending {
                generation,
                url: url.to_owned(),
                abandoned: None,
            },
        );
        let answers = self.hand_over(&mut st, server, url, generation);
        drop(st);
        send(answers);
        generation
    }

    /// The answers for the calls on `server` not handed to a sign-in yet.
    ///
    /// Every call on the server is handed over, not only those the refusal held up: which
    /// ones it held is the upstream client's to know. A call that was not held finishes
    /// anyway, and its result waits for the retry like the others'.
    fn hand_over(
        &self,
        st: &mut State,
        server: &ServerId,
        url: &str,
        generation: u64,
    ) -> Vec<(Responder, RequestId, Reply)> {
        let mut answers = Vec::new();
        let now = Instant::now();
        st.parked
            .retain(|_, p| now.duration_since(p.since) < PARKED_FOR);
        let mut parked = Vec::new();
        for f in st.flights.values_mut() {
            if &f.server != server || !matches!(f.handed, Handed::No) {
                continue;
            }
            let reply = match LoginElicitation::new(server, url, &f.capabilities, &self.how_else) {
                Err(refusal) => {
                    // The call goes on without anyone to give its result to.
                    f.handed = Handed::Refused;
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
                    f.handed = Handed::ToSignIn(token.clone());
                    parked.push((
                        token,
                        Parked {
                            generation,
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

    /// Whether sign-in `generation` of `server` is to give up, and why.
    fn abandoned(&self, server: &ServerId, generation: Option<u64>) -> Option<String> {
        self.lock()
            .pending
            .get(server)
            .filter(|p| Some(p.generation) == generation)
            .and_then(|p| p.abandoned.clone())
    }

    /// Sign-in `generation` of `server` ended (a later one of the same server stays).
    fn finish(&self, server: &ServerId, generation: Option<u64>) {
        let mut st = self.lock();
        if st
            .pending
            .get(server)
            .is_some_and(|p| Some(p.generation) == generation)
        {
            st.pending.remove(server);
            self.changed.notify_all();
        }
    }

    /// Waits (a few seconds at most: the browser step looks every 50 ms) until sign-in
    /// `generation` of `server` is over.
    pub(super) fn wait_given_up(&self, server: &ServerId, generation: u64) {
        let until = Instant::now() + Duration::from_secs(5);
        let mut st = self.lock();
        while st
            .pending
            .get(server)
            .is_some_and(|p| p.generation == generation)
        {
            let now = Instant::now();
            if now >= until {
                return;
            }
            st = self
                .changed
                .wait_timeout(st, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Whether the person declined `server`'s last sign-in (once: the call that asks makes
    /// the upstream client sign in again, `allow_authorization_again`).
    pub(super) fn take_declined(&self, server: &ServerId) -> bool {
        self.lock().declined.remove(server)
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
        let Some(answer) = answer else {
            // No answer came with the retry: the sign-in stays, and so does the call.
            return Retry::Reply(Reply::tool_error(format!(
                "{name}: the retry carried no answer to the sign-in request; answer it to go on"
            )));
        };
        match p.login.read_answer(answer) {
            Ok(_) => Retry::Wait(token.to_owned()),
            Err(refusal) => {
                let (server, generation) = (p.login.server().clone(), p.generation);
                let Some(p) = st.parked.remove(token) else {
                    return stale();
                };
                // The call finished anyway (it was not the one the sign-in held up).
                if let Some(reply) = p.reply {
                    return Retry::Reply(reply);
                }
                if let Some(pending) = st
                    .pending
                    .get_mut(&server)
                    .filter(|pending| pending.generation == generation)
                {
                    pending.abandoned = Some("the person declined to sign in".to_owned());
                }
                st.declined.insert(server.clone());
                Retry::Declined {
                    server,
                    generation,
                    reply: Reply::Result(refusal.to_call_result()),
                }
            }
        }
    }

    /// Waits for the reply of the call held up by sign-in `token` (at most [`RETRY_WAIT`]),
    /// telling the client every [`KEEP_ALIVE`] that it is still under way (`request`'s
    /// progress, dropped by the core when the client did not ask for progress).
    pub(super) fn wait(&self, token: &str, responder: &Responder, request: RequestId) -> Reply {
        let until = Instant::now() + RETRY_WAIT;
        let mut next_keep_alive = Instant::now() + KEEP_ALIVE;
        let mut beats = 0u32;
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
            if now >= next_keep_alive {
                drop(st);
                beats += 1;
                let _ = responder.progress(
                    request,
                    f64::from(beats),
                    None,
                    Some("waiting for the sign-in to finish"),
                );
                next_keep_alive = now + KEEP_ALIVE;
                st = self.lock();
                continue;
            }
            st = self
                .changed
                .wait_timeout(st, until.min(next_keep_alive) - now)
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
        let generation = Arc::new(Mutex::new(None));
        let (set, read) = (Arc::clone(&generation), Arc::clone(&generation));
        let browser = LoopbackBrowser::new()
            .with_timeout(BROWSER_TIMEOUT)
            .with_show(move |url| {
                eprintln!(
                    "mcpwire host serve: server {s1} asks for a sign-in; the client is shown the link:"
                );
                eprintln!("  {url}");
                let g = shown.publish(&s1, url);
                *set.lock().unwrap_or_else(PoisonError::into_inner) = Some(g);
            })
            .with_abandon(move || {
                let g = *read.lock().unwrap_or_else(PoisonError::into_inner);
                asked.abandoned(&s2, g)
            });
        let outcome = browser.authorize(url, redirect_uri);
        let g = *generation.lock().unwrap_or_else(PoisonError::into_inner);
        self.logins.finish(server, g);
        outcome
    }
}

//! What both faces of the host share, written once: the registry behind one lock with the
//! client of each server's current attempt, the hooks that feed it what the clients see, how a
//! spec becomes a client's options, and how a client's error becomes a typed failure.
//!
//! The lock is never held while a client is called or closed: [`Shared::update`] hands back
//! the clients whose attempt ended (disconnected, timed out, removed) for the caller to close
//! outside it, and the hooks (which run on a client's thread or task) only touch the registry.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use mcpwire_core::host::registry::{
    Attempt, ConnectFailure, Connected, ConnectionState, FailureKind, GrantIdentity,
    ReconnectPolicy, Registry, RegistryEvent, Stage, UsageError,
};
use mcpwire_core::host::{ServerId, ServerSpec, TransportSpec};
use mcpwire_core::mcp::request::FailReason;
use mcpwire_core::mcp::results::ListToolsResult;
use mcpwire_core::mcp::subscription::RefetchTarget;
use mcpwire_core::mcp::{
    CachedEra, ElicitAnswer, Era, Event, InputAnswer, InputRequestEvent, OpError, OpId,
    SubscriptionChange, SubscriptionEvent, TransportError,
};

use super::{Hooks, HostError, HostOptions, HostUserAgent};
use crate::mcp::{
    Authorization, ClientOptions, Error, PreRegistered, StdioCommand, UserAgent, UserAgentError,
};

/// The notification a server sends when its tool list changed.
pub(crate) const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";

/// A driver's client, as the host holds it.
pub(crate) trait HostClient: Clone + Send + Sync + 'static {
    /// Ends the client for every handle, without waiting.
    fn close_now(self);
}

/// The client of a server's current attempt, and what lives as long as it (the tool-change
/// subscription).
pub(crate) struct Live<C> {
    pub(crate) attempt: Attempt,
    pub(crate) client: C,
    keep: Option<Box<dyn Send>>,
    /// The tools listed while connecting, handed to the first [`State::take_listing`] unless
    /// the server announced a change since (so connecting and the first listing of the
    /// host's catalog ask the server once, even when its answers carry no TTL).
    listing: Option<ListToolsResult>,
}

/// What the lock guards.
pub(crate) struct State<C> {
    pub(crate) registry: Registry,
    live: BTreeMap<ServerId, Live<C>>,
    /// The client's error behind each failed server's current failure.
    errors: BTreeMap<ServerId, Arc<Error>>,
    events: VecDeque<RegistryEvent>,
    /// Bumped whenever the registry emitted an event (waiters compare it).
    generation: u64,
    wakers: Vec<Waker>,
}

/// What [`Shared::update`] leaves to do outside the lock: the clients to close.
#[must_use = "the clients of ended attempts must be closed"]
pub(crate) struct Closing<C>(Vec<Live<C>>);

impl<C: HostClient> Closing<C> {
    pub(crate) fn close(self) {
        for live in self.0 {
            drop(live.keep);
            live.client.close_now();
        }
    }
}

/// The host's state, shared by its handles, its connect threads or tasks and the clients'
/// hooks.
pub(crate) struct Shared<C> {
    state: Mutex<State<C>>,
    changed: Condvar,
}

impl<C: HostClient> Shared<C> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Shared {
            state: Mutex::new(State {
                registry: Registry::new(),
                live: BTreeMap::new(),
                errors: BTreeMap::new(),
                events: VecDeque::new(),
                generation: 0,
                wakers: Vec::new(),
            }),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the state after the clock has been fed to the registry, then takes the
    /// registry's events, wakes the waiters if there were any, and hands back the clients of
    /// attempts that ended, with the generation after the change.
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut State<C>) -> R) -> (R, Closing<C>, u64) {
        self.update_at(true, f)
    }

    /// [`update`](Self::update), feeding the clock to the registry only when `tick`. Without
    /// it no attempt can end (only the clock and the host's requests end one), so nothing is
    /// left to close: what a client's hooks use, since they run on that client's own thread.
    fn update_at<R>(&self, tick: bool, f: impl FnOnce(&mut State<C>) -> R) -> (R, Closing<C>, u64) {
        let mut st = self.lock();
        if tick {
            st.registry.handle_timeout(Instant::now());
        }
        let r = f(&mut st);
        if tick {
            st.registry.handle_timeout(Instant::now());
        }
        let mut changed = false;
        while let Some(e) = st.registry.poll_event() {
            st.events.push_back(e);
            changed = true;
        }
        let ended: Vec<ServerId> = st
            .live
            .iter()
            .filter(|(_, l)| !st.registry.is_current(l.attempt))
            .map(|(id, _)| id.clone())
            .collect();
        let closing = ended.iter().filter_map(|id| st.live.remove(id)).collect();
        if changed {
            st.generation += 1;
            for w in st.wakers.drain(..) {
                w.wake();
            }
            self.changed.notify_all();
        }
        let generation = st.generation;
        (r, Closing(closing), generation)
    }

    /// [`update`](Self::update), closing the ended clients at once.
    pub(crate) fn apply<R>(&self, f: impl FnOnce(&mut State<C>) -> R) -> R {
        let (r, closing, _) = self.update(f);
        closing.close();
        r
    }

    /// Blocks until the generation moves past `seen` or `until` passes.
    pub(crate) fn wait_change(&self, seen: u64, until: Option<Instant>) {
        let mut st = self.lock();
        while st.generation == seen {
            match until {
                None => {
                    st = self
                        .changed
                        .wait(st)
                        .unwrap_or_else(PoisonError::into_inner)
                }
                Some(until) => {
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
        }
    }

    /// Ready once the generation moved past `seen`; otherwise leaves the waker.
    #[cfg_attr(not(feature = "smol"), allow(dead_code))]
    pub(crate) fn poll_change(&self, seen: u64, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.lock();
        if st.generation != seen {
            return Poll::Ready(());
        }
        if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            st.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// The hooks of `server`'s client for `attempt`.
    pub(crate) fn hooks(
        self: &Arc<Self>,
        server: &ServerId,
        attempt: Attempt,
        user: Option<Arc<dyn Hooks>>,
    ) -> ClientHooks<C> {
        ClientHooks {
            server: server.clone(),
            attempt,
            shared: Arc::downgrade(self),
            user,
        }
    }
}

impl<C: HostClient> State<C> {
    /// The next event, until `None`.
    pub(crate) fn next_event(&mut self) -> Option<RegistryEvent> {
        self.events.pop_front()
    }

    /// Adds a server.
    pub(crate) fn add(&mut self, spec: ServerSpec) -> Result<(), HostError> {
        self.registry.add(spec).map_err(usage)
    }

    /// Starts an attempt of `id` and makes its plan; `Ok(None)` when it is connecting or
    /// ready already. A plan that cannot be made fails the attempt at once.
    pub(crate) fn begin(
        &mut self,
        id: &ServerId,
        options: &HostOptions,
    ) -> Result<Option<(Attempt, Plan)>, HostError> {
        let attempt = match self
            .registry
            .connect(id, Instant::now(), options.connect_timeout)
        {
            Ok(a) => a,
            Err(UsageError::Busy { .. }) => return Ok(None),
            Err(e) => return Err(usage(e)),
        };
        self.errors.remove(id);
        let Some(server) = self.registry.get(id) else {
            return Err(HostError::UnknownServer(id.clone()));
        };
        match plan(server.spec(), server.era().cloned(), options) {
            Ok(plan) => Ok(Some((attempt, plan))),
            Err(failure) => {
                let _ = self
                    .registry
                    .handle_failed(Instant::now(), attempt, failure);
                Ok(None)
            }
        }
    }

    /// Takes `client` as the one of `attempt`, unless that attempt has ended (`false`: close
    /// it).
    pub(crate) fn adopt(&mut self, id: &ServerId, attempt: Attempt, client: &C) -> bool {
        if !self.registry.is_current(attempt) {
            return false;
        }
        self.live.insert(
            id.clone(),
            Live {
                attempt,
                client: client.clone(),
                keep: None,
                listing: None,
            },
        );
        true
    }

    /// Keeps `thing` alive as long as `attempt`'s client; hands it back when the attempt has
    /// ended (to be dropped outside the lock).
    pub(crate) fn keep(
        &mut self,
        id: &ServerId,
        attempt: Attempt,
        thing: Box<dyn Send>,
    ) -> Result<(), Box<dyn Send>> {
        match self.live.get_mut(id) {
            Some(l) if l.attempt == attempt && self.registry.is_current(attempt) => {
                l.keep = Some(thing);
                Ok(())
            }
            _ => Err(thing),
        }
    }

    /// Keeps the tools `attempt` listed while connecting (see [`Live::listing`]).
    pub(crate) fn keep_listing(&mut self, id: &ServerId, attempt: Attempt, tools: ListToolsResult) {
        if let Some(l) = self.live.get_mut(id).filter(|l| l.attempt == attempt) {
            l.listing = Some(tools);
        }
    }

    /// The tools listed while connecting, once, if no change was announced since.
    pub(crate) fn take_listing(
        &mut self,
        id: &ServerId,
        attempt: Attempt,
    ) -> Option<ListToolsResult> {
        let stale = self.registry.get(id).is_none_or(|s| s.tools().stale);
        let listing = self
            .live
            .get_mut(id)
            .filter(|l| l.attempt == attempt)?
            .listing
            .take();
        listing.filter(|_| !stale)
    }

    /// `attempt` reached `stage`.
    pub(crate) fn stage(&mut self, attempt: Attempt, stage: Stage) {
        let _ = self.registry.handle_stage(attempt, stage);
    }

    /// `attempt` connected.
    pub(crate) fn ready(&mut self, attempt: Attempt, connected: Connected) {
        let _ = self.registry.handle_ready(attempt, connected);
    }

    /// `attempt` failed at `stage` with the client's `error` (or lost its connection).
    pub(crate) fn fail(&mut self, attempt: Attempt, stage: Stage, error: Error) {
        let Some(id) = self.registry.server_of(attempt).cloned() else {
            return;
        };
        let failure = failure_of(stage, &error);
        self.errors.insert(id, Arc::new(error));
        let _ = self
            .registry
            .handle_failed(Instant::now(), attempt, failure);
    }

    /// The tools of `attempt` were listed.
    pub(crate) fn tools_listed(&mut self, attempt: Attempt, count: usize) {
        let _ = self.registry.handle_tools_listed(attempt, count);
    }

    /// Where `id` stands, as a connect outcome: `Ok` when ready.
    pub(crate) fn outcome(&self, id: &ServerId) -> Result<(), HostError> {
        let server = self
            .registry
            .get(id)
            .ok_or_else(|| HostError::UnknownServer(id.clone()))?;
        match server.state() {
            ConnectionState::Ready { .. } => Ok(()),
            ConnectionState::Failed(failure) => Err(HostError::Connect {
                server: id.clone(),
                failure: failure.clone(),
                source: self.errors.get(id).cloned(),
            }),
            ConnectionState::Disabled => Err(HostError::Disabled(id.clone())),
            other => Err(HostError::NotReady {
                server: id.clone(),
                state: other.kind(),
                failure: None,
            }),
        }
    }

    /// The client of a ready server, with its attempt.
    pub(crate) fn ready_client(&self, id: &ServerId) -> Result<(Attempt, C), HostError> {
        let server = self
            .registry
            .get(id)
            .ok_or_else(|| HostError::UnknownServer(id.clone()))?;
        let not_ready = |failure| HostError::NotReady {
            server: id.clone(),
            state: server.state().kind(),
            failure,
        };
        match server.state() {
            ConnectionState::Ready { attempt } => match self.live.get(id) {
                Some(l) if l.attempt == *attempt => Ok((l.attempt, l.client.clone())),
                _ => Err(not_ready(None)),
            },
            ConnectionState::Failed(f) => Err(not_ready(Some(f.clone()))),
            ConnectionState::Disabled => Err(HostError::Disabled(id.clone())),
            _ => Err(not_ready(None)),
        }
    }

    /// A request to the ready server of `attempt` failed: the registry decides whether that
    /// lost the connection ([`FailureKind::loses_connection`]: the stdio server exited, an
    /// HTTP server no longer answers) and the server has failed.
    pub(crate) fn request_failed(&mut self, attempt: Attempt, error: &Error) {
        let Some(id) = self.registry.server_of(attempt).cloned() else {
            return;
        };
        let failure = failure_of(Stage::Running, error);
        if let Ok(true) = self
            .registry
            .handle_request_failed(Instant::now(), attempt, failure)
        {
            self.errors.remove(&id);
        }
    }

    /// Turns reconnecting on (see [`ReconnectPolicy`]), its jitter seeded from the system's
    /// random source.
    pub(crate) fn set_reconnect(&mut self, policy: ReconnectPolicy) {
        // A seed that could not be drawn only makes replicas' delays alike: the clock's
        // nanoseconds still spread them.
        let seed = getrandom::u64().unwrap_or_else(|_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::from(d.subsec_nanos()))
        });
        self.registry.set_reconnect(policy, seed);
    }

    /// What the reconnect loop does next: the servers due now (to connect), when to look
    /// again, and whether the host has closed (the loop ends).
    pub(crate) fn reconnect_step(&self) -> Reconnects {
        Reconnects {
            due: self.registry.due_reconnects(Instant::now()),
            next: self.registry.poll_timeout().map(|t| t.at),
            closed: self.registry.is_shut_down(),
        }
    }

    /// Closes the host: every server disconnected, no new work.
    pub(crate) fn shutdown(&mut self) {
        self.registry.shutdown(Instant::now());
    }
}

/// One look of the reconnect loop ([`State::reconnect_step`]).
pub(crate) struct Reconnects {
    pub(crate) due: Vec<ServerId>,
    pub(crate) next: Option<Instant>,
    pub(crate) closed: bool,
}

impl<C: HostClient> Shared<C> {
    /// One look of a reconnect loop: `connect` each server due, then what to wait for (the
    /// generation seen and until when), or `None` once the host has closed.
    pub(crate) fn reconnect_look(&self, connect: impl Fn(&ServerId)) -> Option<(u64, Instant)> {
        let (step, closing, generation) = self.update(|st| st.reconnect_step());
        closing.close();
        if step.closed {
            return None;
        }
        for id in &step.due {
            connect(id);
        }
        let idle = Instant::now() + RECONNECT_IDLE;
        Some((generation, step.next.map_or(idle, |n| n.min(idle))))
    }
}

/// How long the reconnect loop sleeps at most between looks, so that it notices a dropped
/// host that had nothing to report.
pub(crate) const RECONNECT_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// A registry refusal as the host's error.
pub(crate) fn usage(e: UsageError) -> HostError {
    match e {
        UsageError::UnknownServer(id) => HostError::UnknownServer(id),
        UsageError::Duplicate(id) => HostError::Duplicate(id),
        UsageError::Disabled(id) => HostError::Disabled(id),
        UsageError::Busy { server, state } => HostError::NotReady {
            server,
            state,
            failure: None,
        },
        // An attempt the host never got is not the caller's to name; a closed host is closed.
        _ => HostError::Closed,
    }
}

// ---------------------------------------------------------------------------------------------
// The hooks.

/// One client's [`mcp::Host`](crate::mcp::Host): tells the registry what the client saw (a
/// tool-list change, a grant), then hands everything to the host's [`Hooks`] with the server's
/// id.
pub(crate) struct ClientHooks<C> {
    server: ServerId,
    attempt: Attempt,
    shared: Weak<Shared<C>>,
    user: Option<Arc<dyn Hooks>>,
}

impl<C: HostClient> ClientHooks<C> {
    /// Tells the registry what the client saw. The clock is not fed here, so no attempt ends
    /// and no client is closed on its own thread.
    fn report(&self, f: impl FnOnce(&mut Registry, Attempt)) {
        if let Some(shared) = self.shared.upgrade() {
            let ((), closing, _) = shared.update_at(false, |st| f(&mut st.registry, self.attempt));
            debug_assert!(closing.0.is_empty());
            closing.close();
        }
    }
}

impl<C: HostClient> crate::mcp::Host for ClientHooks<C> {
    fn on_input_request(&mut self, op: OpId, request: &InputRequestEvent) -> InputAnswer {
        match &self.user {
            Some(h) => h.on_input_request(&self.server, op, request),
            None => InputAnswer::Elicitation(ElicitAnswer::Decline),
        }
    }

    fn on_progress(&mut self, op: OpId, progress: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(h) = &self.user {
            h.on_progress(&self.server, op, progress, total, message);
        }
    }

    fn on_notification(&mut self, op: Option<OpId>, method: &str, message: &str) {
        if method == TOOLS_LIST_CHANGED {
            self.report(|r, a| {
                let _ = r.handle_list_changed(a);
            });
        }
        if let Some(h) = &self.user {
            h.on_notification(&self.server, op, method, message);
        }
    }

    fn on_event(&mut self, event: &Event) {
        match event {
            Event::Subscription(SubscriptionEvent::Changed {
                change: SubscriptionChange::ToolsListChanged,
                ..
            }) => self.report(|r, a| {
                let _ = r.handle_list_changed(a);
            }),
            Event::Subscription(SubscriptionEvent::Refetch { targets, .. })
                if targets.contains(&RefetchTarget::ToolsList) =>
            {
                self.report(|r, a| {
                    let _ = r.handle_list_changed(a);
                })
            }
            Event::Authorized { grant } => {
                let grant = GrantIdentity {
                    issuer: grant.issuer.clone(),
                    resource: grant.resource.clone(),
                };
                self.report(|r, a| {
                    let _ = r.handle_authorized(a, grant);
                });
            }
            _ => {}
        }
        if let Some(h) = &self.user {
            h.on_event(&self.server, event);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// From a spec to a client.

/// Where a server is.
pub(crate) enum Target {
    Http(String),
    Stdio(StdioCommand),
}

/// How to connect one server: where, and the client's options.
pub(crate) struct Plan {
    pub(crate) target: Target,
    pub(crate) options: ClientOptions,
}

/// The plan for `spec`: the host's client template, the spec's headers (HTTP), the host's
/// authorization with the server's own token store partition and the spec's `oauth` block,
/// and `era` (from the server's last connection) when the template names none.
pub(crate) fn plan(
    spec: &ServerSpec,
    era: Option<CachedEra>,
    host: &HostOptions,
) -> Result<Plan, ConnectFailure> {
    let mut options = host.client.clone();
    options.authorization = None;
    if options.known_era.is_none() {
        options.known_era = era;
    }
    let target = match &spec.transport {
        TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut c = StdioCommand::new(command.clone()).args(args.iter().cloned());
            c.env = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            c.cwd = cwd.as_ref().map(Into::into);
            Target::Stdio(c)
        }
        TransportSpec::Http { url, headers } => {
            for (name, value) in headers {
                options.headers.push((name.clone(), value.clone()));
            }
            let has_credentials = options
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("authorization"));
            if let (Some(auth), false) = (&host.authorization, has_credentials) {
                let store = auth.tokens.store_for(&spec.id).map_err(|e| {
                    ConnectFailure::new(
                        Stage::Start,
                        FailureKind::Config,
                        format!("its token store: {e}"),
                    )
                })?;
                let user_agent = Arc::new(ServerUserAgent {
                    server: spec.id.clone(),
                    agent: Arc::clone(&auth.user_agent),
                });
                let mut a = Authorization::new(user_agent, store);
                a.client.client_name = auth.client_name.clone();
                a.allow_http_loopback = auth.allow_http_loopback;
                a.timeout = auth.timeout;
                if let Some(o) = &spec.oauth {
                    if let Some(id) = &o.client_id {
                        a.client.pre_registered = Some(PreRegistered {
                            client_id: id.clone(),
                            client_secret: None,
                            issuer: None,
                        });
                    }
                    a.callback_port = o.callback_port.unwrap_or(0);
                    if !o.scopes.is_empty() {
                        a.scope = Some(o.scopes.join(" "));
                    }
                }
                options.authorization = Some(a);
            }
            Target::Http(url.clone())
        }
    };
    Ok(Plan { target, options })
}

/// One server's browser step: the host's, told the server.
struct ServerUserAgent {
    server: ServerId,
    agent: Arc<dyn HostUserAgent>,
}

impl UserAgent for ServerUserAgent {
    fn authorize(&self, url: &str, redirect_uri: &str) -> Result<String, UserAgentError> {
        self.agent.authorize_server(&self.server, url, redirect_uri)
    }
}

/// Whether to open the tool-change subscription: modern, and the server announces changes.
pub(crate) fn watches_tools(
    host: &HostOptions,
    era: Option<&CachedEra>,
    connected: &Connected,
) -> bool {
    host.watch_tool_changes
        && era.is_some_and(|e| e.era == Era::Modern)
        && connected.summary.announces_tool_changes()
}

/// A client's error at `stage` as a typed failure, by what a person does about it.
pub(crate) fn failure_of(stage: Stage, e: &Error) -> ConnectFailure {
    let kind = match e {
        Error::Spawn { .. } => FailureKind::Spawn,
        Error::ServerExited { .. } => FailureKind::Exited,
        Error::InvalidUrl { .. } => FailureKind::Config,
        Error::Setup { .. } | Error::Thread { .. } | Error::Closed | Error::Cancelled => {
            FailureKind::Local
        }
        _ => match e.op_error() {
            Some(OpError::Transport(TransportError::Failed(FailReason::Unauthorized {
                ..
            }))) => FailureKind::Authorization,
            Some(OpError::Transport(TransportError::Failed(FailReason::HttpStatus(401 | 403)))) => {
                FailureKind::Authorization
            }
            Some(OpError::Transport(TransportError::Failed(
                FailReason::HttpStatus(_) | FailReason::Protocol(_),
            ))) => FailureKind::Server,
            Some(OpError::Transport(TransportError::TimedOut { .. })) => FailureKind::NoAnswer,
            // The server answered a status (503, 429, ...) that no resend fixed: it is there.
            Some(OpError::Transport(TransportError::Failed(
                FailReason::NotResendable {
                    last_status: Some(_),
                    ..
                }
                | FailReason::ResendsExhausted {
                    last_status: Some(_),
                    ..
                }
                | FailReason::MaxTotalReached {
                    last_status: Some(_),
                },
            ))) => FailureKind::Server,
            Some(OpError::Transport(TransportError::Failed(FailReason::IdInUse))) => {
                FailureKind::Local
            }
            // The connection was refused or broke, for every resend.
            Some(OpError::Transport(_)) => FailureKind::Unreachable,
            Some(OpError::Incompatible(_)) => FailureKind::Incompatible,
            Some(OpError::Local(_)) => FailureKind::Local,
            _ => FailureKind::Server,
        },
    };
    ConnectFailure::new(stage, kind, e.to_string())
}

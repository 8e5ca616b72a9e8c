//! The servers a host has ("Managing multiple servers"): each keyed by the [`ServerId`] the
//! host chose, never by its self-reported `serverInfo.name`, each with its own state kept
//! apart: its spec and trust, where its connection stands ([`ConnectionState`]: connecting,
//! ready, failed with a typed reason, disconnected), its era, what its `server/discover` said
//! ([`ServerSummary`]), how many tools it listed and whether they changed since
//! ([`ToolsState`]), and its credentials' identity ([`Credentials`]: a token store partition
//! of its own, see [`credentials`](self#credentials)).
//!
//! The registry is pure state and transitions; the driver owns the clients. It follows the
//! step-function contract of `ARCHITECTURE.md`:
//!
//! - the host's requests: [`add`](Registry::add), [`remove`](Registry::remove),
//!   [`connect`](Registry::connect) (which issues an [`Attempt`] with its deadline),
//!   [`disconnect`](Registry::disconnect), [`set_trust`](Registry::set_trust),
//!   [`shutdown`](Registry::shutdown);
//! - what the driver saw, naming the attempt: [`handle_stage`](Registry::handle_stage),
//!   [`handle_ready`](Registry::handle_ready), [`handle_failed`](Registry::handle_failed),
//!   [`handle_tools_listed`](Registry::handle_tools_listed),
//!   [`handle_list_changed`](Registry::handle_list_changed),
//!   [`handle_authorized`](Registry::handle_authorized), and the clock:
//!   [`handle_timeout`](Registry::handle_timeout);
//! - outputs: [`poll_event`](Registry::poll_event) (what changed, for the host and its
//!   catalog) and [`poll_timeout`](Registry::poll_timeout) (the next connect deadline, naming
//!   the server).
//!
//! With [`set_reconnect`](Registry::set_reconnect) a failed server is connected again by
//! itself after a backoff (the [`reconnect`](ReconnectPolicy) rules): `poll_timeout` names
//! it, [`due_reconnects`](Registry::due_reconnects) lists it, the driver connects it.
//!
//! An input naming an attempt that has ended (the server timed out, was disconnected or
//! removed, or connected again) is late: it is dropped, and `Ok(())` returned, so a slow
//! server's answer can never overwrite what the host decided meanwhile. An attempt this
//! registry never issued is the caller's bug ([`UsageError::UnknownAttempt`]).
//!
//! Every iteration is in id order, so the same servers list the same way whatever order the
//! config had.
//!
//! # Credentials
//!
//! The client's token store keeps a grant under its issuer and resource, and finds one for a
//! server URL by whether the grant's resource covers it. Two servers in one store could then
//! share a grant (two config entries for one URL; one server's grant for an origin's root
//! covering another server's URL there). The registry gives each server its own partition,
//! named by its id ([`Credentials::partition`], and [`store_name`] as a file name), so a grant
//! one server obtained is never sent to another.

mod credentials;
mod failure;
mod reconnect;
mod server;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use crate::time::{Duration, Instant};

use super::{ServerId, ServerSpec, Trust};

pub use credentials::{store_name, Credentials, GrantIdentity};
pub use failure::{ConnectFailure, FailureKind, Stage};
pub use reconnect::{ReconnectPolicy, ReconnectState};
pub use server::{
    Attempt, Connected, ConnectionState, Server, ServerSummary, StateKind, ToolsState,
};

/// What changed in the registry, in the order it changed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryEvent {
    /// A server was added.
    Added {
        /// The server.
        server: ServerId,
    },
    /// A server was removed (its tools leave the catalog).
    Removed {
        /// The server.
        server: ServerId,
    },
    /// A server's connection state changed (see [`Server::state`] for the details).
    StateChanged {
        /// The server.
        server: ServerId,
        /// Its new state.
        state: StateKind,
    },
    /// The server announced that its tool list changed (`notifications/tools/list_changed`):
    /// list its tools again (the client's cache has dropped them) and refresh the catalog.
    /// Sent once until the tools are listed again.
    ToolsChanged {
        /// The server.
        server: ServerId,
    },
}

/// The next deadline of the registry, and whose it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// When.
    pub at: Instant,
    /// Why.
    pub reason: TimeoutReason,
}

/// What a [`Timeout`] is for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutReason {
    /// The server's connect timeout: it fails unless ready by then.
    Connect(ServerId),
    /// The failed server is due to be connected again
    /// ([`Registry::due_reconnects`], [`ReconnectPolicy`]).
    Reconnect(ServerId),
}

/// The caller used the registry wrongly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// No server has this id.
    #[error("no server {0:?} in the registry")]
    UnknownServer(ServerId),
    /// A server with this id is there already.
    #[error("a server {0:?} is in the registry already")]
    Duplicate(ServerId),
    /// The server's config entry is disabled.
    #[error("the server {0:?} is disabled in its config")]
    Disabled(ServerId),
    /// The server is connecting or connected already.
    #[error("the server {server:?} is {state} already")]
    Busy {
        /// The server.
        server: ServerId,
        /// Its state.
        state: StateKind,
    },
    /// The registry was shut down.
    #[error("the registry is shut down")]
    ShutDown,
    /// The registry never issued this attempt.
    #[error("{0} was never issued by this registry")]
    UnknownAttempt(Attempt),
}

/// The servers a host has (see the module docs).
#[derive(Clone, Default, PartialEq)]
pub struct Registry {
    servers: BTreeMap<ServerId, Server>,
    next_attempt: u64,
    events: VecDeque<RegistryEvent>,
    shut_down: bool,
    /// Off unless [`Registry::set_reconnect`] was called.
    reconnect: Option<reconnect::Reconnect>,
    retries: BTreeMap<ServerId, ReconnectState>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.servers.iter().map(|(id, s)| (id, s.state.kind())))
            .finish()
    }
}

impl Registry {
    /// An empty registry. A failed server stays failed until the host connects it again,
    /// unless [`set_reconnect`](Self::set_reconnect) is called.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Reconnects failed servers by themselves from now on, as `policy` says (see
    /// [`ReconnectPolicy`]); `seed` (from the driver's random source) spreads the jitter.
    pub fn set_reconnect(&mut self, policy: ReconnectPolicy, seed: u64) {
        self.reconnect = Some(reconnect::Reconnect::new(policy, seed));
    }

    /// The reconnect state of `id`: its consecutive failures since it was last ready and
    /// when it is due; `None` when it has not failed since (or reconnecting is off).
    pub fn reconnect_state(&self, id: &ServerId) -> Option<ReconnectState> {
        self.retries.get(id).copied()
    }

    /// The failed servers due to be connected again at `now`, in id order: the driver calls
    /// [`connect`](Self::connect) for each.
    pub fn due_reconnects(&self, now: Instant) -> Vec<ServerId> {
        self.retries
            .iter()
            .filter(|(id, r)| {
                r.due.is_some_and(|due| due <= now)
                    && self
                        .servers
                        .get(*id)
                        .is_some_and(|s| s.state.kind() == StateKind::Failed)
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    // -----------------------------------------------------------------------------------------
    // Queries.

    /// The server `id`.
    pub fn get(&self, id: &ServerId) -> Option<&Server> {
        self.servers.get(id)
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.shut_down
    }

    /// Every server, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Server> {
        self.servers.values()
    }

    /// Every id, in order.
    pub fn ids(&self) -> impl Iterator<Item = &ServerId> {
        self.servers.keys()
    }

    /// How many servers there are.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The server whose current attempt (connecting or ready) is `attempt`.
    pub fn server_of(&self, attempt: Attempt) -> Option<&ServerId> {
        self.servers
            .iter()
            .find(|(_, s)| s.state.attempt() == Some(attempt))
            .map(|(id, _)| id)
    }

    /// Whether `attempt` is still some server's current one (its results are wanted).
    pub fn is_current(&self, attempt: Attempt) -> bool {
        self.server_of(attempt).is_some()
    }

    /// Whether none of `ids` is connecting (each is ready, failed, disconnected, disabled or
    /// gone).
    pub fn settled<'a>(&self, ids: impl IntoIterator<Item = &'a ServerId>) -> bool {
        ids.into_iter().all(|id| {
            self.servers
                .get(id)
                .is_none_or(|s| s.state.kind() != StateKind::Connecting)
        })
    }

    // -----------------------------------------------------------------------------------------
    // The host's requests.

    /// Adds a server (disconnected, or disabled when its spec says so).
    pub fn add(&mut self, spec: ServerSpec) -> Result<(), UsageError> {
        if self.shut_down {
            return Err(UsageError::ShutDown);
        }
        if self.servers.contains_key(&spec.id) {
            return Err(UsageError::Duplicate(spec.id));
        }
        let id = spec.id.clone();
        self.servers.insert(id.clone(), Server::new(spec));
        self.events.push_back(RegistryEvent::Added { server: id });
        Ok(())
    }

    /// Removes a server, in whatever state: what its attempt still reports is dropped. The
    /// driver closes its client.
    pub fn remove(&mut self, id: &ServerId) -> Result<Server, UsageError> {
        let server = self
            .servers
            .remove(id)
            .ok_or_else(|| UsageError::UnknownServer(id.clone()))?;
        self.retries.remove(id);
        self.events
            .push_back(RegistryEvent::Removed { server: id.clone() });
        Ok(server)
    }

    /// Changes the host's trust in a server (the user said so).
    pub fn set_trust(&mut self, id: &ServerId, trust: Trust) -> Result<(), UsageError> {
        self.server_mut(id)?.trust = trust;
        Ok(())
    }

    /// Starts connecting a server that is disconnected or failed: it is connecting until the
    /// driver reports it ready or failed, or until `now + timeout` (then it fails with
    /// [`FailureKind::TimedOut`]). The attempt names what the driver reports.
    pub fn connect(
        &mut self,
        id: &ServerId,
        now: Instant,
        timeout: Duration,
    ) -> Result<Attempt, UsageError> {
        if self.shut_down {
            return Err(UsageError::ShutDown);
        }
        let attempt = Attempt(self.next_attempt);
        let server = self.server_mut(id)?;
        match server.state.kind() {
            StateKind::Disabled => return Err(UsageError::Disabled(id.clone())),
            state @ (StateKind::Connecting | StateKind::Ready) => {
                return Err(UsageError::Busy {
                    server: id.clone(),
                    state,
                })
            }
            StateKind::Disconnected | StateKind::Failed => {}
        }
        server.state = ConnectionState::Connecting {
            attempt,
            deadline: now.checked_add(timeout),
            timeout,
            stage: Stage::Start,
        };
        self.next_attempt += 1;
        if let Some(retry) = self.retries.get_mut(id) {
            retry.due = None;
        }
        self.state_changed(id);
        Ok(attempt)
    }

    /// Disconnects a server (connecting, ready or failed): what its attempt still reports is
    /// dropped; the driver closes its client. A disconnected or disabled server stays as it is;
    /// neither is reconnected by itself.
    pub fn disconnect(&mut self, id: &ServerId) -> Result<(), UsageError> {
        self.retries.remove(id);
        let server = self.server_mut(id)?;
        match server.state.kind() {
            StateKind::Disconnected | StateKind::Disabled => return Ok(()),
            _ => server.state = ConnectionState::Disconnected,
        }
        self.state_changed(id);
        Ok(())
    }

    /// Disconnects every server and takes no new connection (nor new servers) from then on.
    pub fn shutdown(&mut self, now: Instant) {
        let _ = now;
        self.shut_down = true;
        let ids: Vec<ServerId> = self.servers.keys().cloned().collect();
        for id in &ids {
            let _ = self.disconnect(id);
        }
    }

    // -----------------------------------------------------------------------------------------
    // What the driver saw.

    /// The attempt reached `stage` (for the timeout's message: where it was stuck).
    pub fn handle_stage(&mut self, attempt: Attempt, stage: Stage) -> Result<(), UsageError> {
        if let Some(server) = self.current(attempt)? {
            if let ConnectionState::Connecting { stage: s, .. } = &mut server.state {
                *s = stage;
            }
        }
        Ok(())
    }

    /// The attempt connected: the server is ready, with its era, summary and tool count.
    pub fn handle_ready(
        &mut self,
        attempt: Attempt,
        connected: Connected,
    ) -> Result<(), UsageError> {
        let Some(server) = self.current(attempt)? else {
            return Ok(());
        };
        if !matches!(server.state, ConnectionState::Connecting { .. }) {
            return Ok(());
        }
        server.state = ConnectionState::Ready { attempt };
        let id = server.spec.id.clone();
        self.retries.remove(&id);
        let Some(server) = self.servers.get_mut(&id) else {
            return Ok(());
        };
        if connected.era.is_some() {
            server.era = connected.era;
        }
        server.summary = Some(connected.summary);
        server.tools = ToolsState {
            count: connected.tools,
            stale: false,
        };
        let id = server.spec.id.clone();
        self.state_changed(&id);
        Ok(())
    }

    /// The attempt failed (while connecting), or its connection was lost (once ready), at
    /// `now`: with [`set_reconnect`](Self::set_reconnect), its next attempt is scheduled.
    pub fn handle_failed(
        &mut self,
        now: Instant,
        attempt: Attempt,
        failure: ConnectFailure,
    ) -> Result<(), UsageError> {
        let Some(server) = self.current(attempt)? else {
            return Ok(());
        };
        let kind = failure.kind;
        server.state = ConnectionState::Failed(failure);
        let id = server.spec.id.clone();
        self.schedule(&id, kind, now);
        self.state_changed(&id);
        Ok(())
    }

    /// A request to the server of `attempt`, once it was ready, failed with `failure` at
    /// `now`. When the failure [loses the connection](FailureKind::loses_connection) the
    /// server has failed (at [`Stage::Running`], as [`handle_failed`](Self::handle_failed)
    /// says, its next attempt scheduled); otherwise it stays ready. Returns whether it
    /// failed. An attempt that is no longer the server's, or not ready, is left alone
    /// (`Ok(false)`): a failure while connecting is [`handle_failed`](Self::handle_failed)'s.
    pub fn handle_request_failed(
        &mut self,
        now: Instant,
        attempt: Attempt,
        failure: ConnectFailure,
    ) -> Result<bool, UsageError> {
        let ready = matches!(
            self.current(attempt)?.map(|s| &s.state),
            Some(ConnectionState::Ready { .. })
        );
        if !ready || !failure.kind.loses_connection() {
            return Ok(false);
        }
        let failure = ConnectFailure {
            stage: Stage::Running,
            ..failure
        };
        self.handle_failed(now, attempt, failure)?;
        Ok(true)
    }

    /// The server's tools were listed again: `count` of them, fresh.
    pub fn handle_tools_listed(
        &mut self,
        attempt: Attempt,
        count: usize,
    ) -> Result<(), UsageError> {
        if let Some(server) = self.current(attempt)? {
            server.tools = ToolsState {
                count: Some(count),
                stale: false,
            };
        }
        Ok(())
    }

    /// The server announced a change of its tool list: its tools are stale, and (unless they
    /// were already) [`RegistryEvent::ToolsChanged`] tells the host.
    pub fn handle_list_changed(&mut self, attempt: Attempt) -> Result<(), UsageError> {
        let Some(server) = self.current(attempt)? else {
            return Ok(());
        };
        if server.tools.stale {
            return Ok(());
        }
        server.tools.stale = true;
        let id = server.spec.id.clone();
        self.events
            .push_back(RegistryEvent::ToolsChanged { server: id });
        Ok(())
    }

    /// The attempt's client obtained a grant (kept in the server's own partition).
    pub fn handle_authorized(
        &mut self,
        attempt: Attempt,
        grant: GrantIdentity,
    ) -> Result<(), UsageError> {
        if let Some(server) = self.current(attempt)? {
            server.credentials.set_grant(grant);
        }
        Ok(())
    }

    /// The clock: every server connecting past its deadline fails with
    /// [`FailureKind::TimedOut`], naming the step it was at. Early or repeated calls are
    /// harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut late = Vec::new();
        for (id, server) in &mut self.servers {
            if let ConnectionState::Connecting {
                deadline: Some(deadline),
                timeout,
                stage,
                ..
            } = server.state
            {
                if now >= deadline {
                    let failure = ConnectFailure::timed_out(stage, timeout);
                    let kind = failure.kind;
                    server.state = ConnectionState::Failed(failure);
                    late.push((id.clone(), kind));
                }
            }
        }
        for (id, kind) in &late {
            self.schedule(id, *kind, now);
            self.state_changed(id);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Outputs.

    /// The next event, until `None`.
    pub fn poll_event(&mut self) -> Option<RegistryEvent> {
        self.events.pop_front()
    }

    /// The earliest connect deadline or reconnect (ties: the first id, a connect deadline
    /// before a reconnect).
    pub fn poll_timeout(&self) -> Option<Timeout> {
        let mut best: Option<Timeout> = None;
        let mut offer = |at: Instant, reason: TimeoutReason| {
            if best.as_ref().is_none_or(|b| at < b.at) {
                best = Some(Timeout { at, reason });
            }
        };
        for (id, server) in &self.servers {
            if let ConnectionState::Connecting {
                deadline: Some(at), ..
            } = server.state
            {
                offer(at, TimeoutReason::Connect(id.clone()));
            }
        }
        for (id, retry) in &self.retries {
            let failed = self
                .servers
                .get(id)
                .is_some_and(|s| s.state.kind() == StateKind::Failed);
            if let (true, Some(at)) = (failed, retry.due) {
                offer(at, TimeoutReason::Reconnect(id.clone()));
            }
        }
        best
    }

    // -----------------------------------------------------------------------------------------

    fn server_mut(&mut self, id: &ServerId) -> Result<&mut Server, UsageError> {
        self.servers
            .get_mut(id)
            .ok_or_else(|| UsageError::UnknownServer(id.clone()))
    }

    /// The server whose current attempt is `attempt`; `None` when that attempt has ended (a
    /// late input), an error when it was never issued.
    fn current(&mut self, attempt: Attempt) -> Result<Option<&mut Server>, UsageError> {
        if attempt.0 >= self.next_attempt {
            return Err(UsageError::UnknownAttempt(attempt));
        }
        Ok(self
            .servers
            .values_mut()
            .find(|s| s.state.attempt() == Some(attempt)))
    }

    /// With reconnecting on, counts a failure of `id` and schedules its next attempt.
    fn schedule(&mut self, id: &ServerId, kind: FailureKind, now: Instant) {
        if let Some(reconnect) = &mut self.reconnect {
            let retry = self.retries.entry(id.clone()).or_default();
            reconnect.after_failure(retry, kind, now);
        }
    }

    fn state_changed(&mut self, id: &ServerId) {
        if let Some(s) = self.servers.get(id) {
            self.events.push_back(RegistryEvent::StateChanged {
                server: id.clone(),
                state: s.state.kind(),
            });
        }
    }
}

//! The blocking host: [`Host`] holds one [`McpClient`] per server and connects each on a
//! thread of its own (`mcp-host-connect`), so that many connect at once and a slow or dead
//! server holds up no other.
//!
//! A `Host` is a cheap handle (`Clone + Send + Sync`); its methods take `&self` and may be
//! called from many threads at once: calls to different servers run at once, and calls to
//! one server run at once on its connection as its client allows. Dropping the last handle
//! closes every client.
//!
//! A server's connect timeout ([`HostOptions::connect_timeout`]) is the registry's deadline:
//! whoever uses the host next, or waits on it ([`Host::connect_all`], [`Host::wait_for`],
//! [`Host::wait_event`]), feeds it the clock, and a server past its deadline fails
//! ([`FailureKind::TimedOut`](super::FailureKind::TimedOut)) and has its client closed;
//! what that client still reports is dropped.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use mcpwire::host::{blocking::Host, HostOptions, ServerId, ServerSpec, TransportSpec, Trust};
//!
//! let host = Host::new(HostOptions::default());
//! let id = ServerId::new("everything").unwrap();
//! host.add(ServerSpec {
//!     id: id.clone(),
//!     transport: TransportSpec::Stdio {
//!         command: "npx".into(),
//!         args: vec!["-y".into(), "@modelcontextprotocol/server-everything".into()],
//!         env: BTreeMap::new(),
//!         cwd: None,
//!     },
//!     oauth: None,
//!     trust: Trust::Untrusted,
//!     disabled: false,
//! })?;
//! host.connect(&id)?; // returns at once
//! host.wait_for(&id)?; // ready, or why not
//! for tool in host.tools(&id)? {
//!     println!("{}", tool.name);
//! }
//! # Ok::<(), mcpwire::host::HostError>(())
//! ```

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use mcpwire_core::host::registry::{
    Attempt, Connected, Registry, RegistryEvent, Server, ServerSummary, Stage,
};
use mcpwire_core::host::{ServerId, ServerSpec, Trust};
use mcpwire_core::mcp::SubscriptionFilter;
use serde::Serialize;

use super::shared::{usage, watches_tools, HostClient, Plan, Shared, Target};
use super::{ConnectReport, HostError, HostOptions};
use crate::mcp::blocking::{Canceller, McpClient, Pending, TryStart};
use crate::mcp::{arguments_object, CallToolResult, Error, ListToolsResult, OpOptions, Tool};
use mcpwire_core::mcp::Operation;

impl HostClient for McpClient {
    fn close_now(self) {
        self.close();
    }
}

/// A host of many MCP servers on the blocking driver (see the [module docs](self) and
/// [`crate::host`]).
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared<McpClient>>,
    options: HostOptions,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.apply(|st| st.shutdown());
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.with_registry(|r| r.fmt(f))
    }
}

impl Host {
    /// A host with no servers yet.
    pub fn new(options: HostOptions) -> Host {
        let reconnect = options.reconnect.clone();
        let host = Host {
            inner: Arc::new(Inner {
                shared: Shared::new(),
                options,
            }),
        };
        if let Some(policy) = reconnect {
            host.shared().apply(|st| st.set_reconnect(policy));
            host.spawn_reconnects();
        }
        host
    }

    fn shared(&self) -> &Arc<Shared<McpClient>> {
        &self.inner.shared
    }

    // -----------------------------------------------------------------------------------------
    // Servers.

    /// Adds a server, not connected (disabled when its spec says so).
    pub fn add(&self, spec: ServerSpec) -> Result<(), HostError> {
        self.shared().apply(|st| st.add(spec))
    }

    /// Starts connecting a server (disconnected or failed) on a thread of its own and returns
    /// at once; [`wait_for`](Self::wait_for) waits for the outcome. A server connecting or
    /// ready already is left as it is.
    pub fn connect(&self, id: &ServerId) -> Result<(), HostError> {
        let begun = self
            .shared()
            .apply(|st| st.begin(id, &self.inner.options))?;
        if let Some((attempt, plan)) = begun {
            self.spawn_connect(id.clone(), attempt, plan);
        }
        Ok(())
    }

    /// Adds `specs` and connects them all at once, each within its connect timeout; returns
    /// when every one is ready or failed, with each server's outcome in id order (a failure
    /// names its server; a disabled server is [`HostError::Disabled`], a second spec with an id
    /// already there [`HostError::Duplicate`]).
    pub fn connect_all(&self, specs: impl IntoIterator<Item = ServerSpec>) -> ConnectReport {
        let mut report: ConnectReport = Vec::new();
        let mut started = Vec::new();
        for spec in specs {
            let id = spec.id.clone();
            match self.add(spec).and_then(|()| self.connect(&id)) {
                Ok(()) => started.push(id),
                Err(e) => report.push((id, Err(e))),
            }
        }
        self.wait_settled(&started);
        self.shared().apply(|st| {
            for id in started {
                let outcome = st.outcome(&id);
                report.push((id, outcome));
            }
        });
        report.sort_by(|a, b| a.0.cmp(&b.0));
        report
    }

    /// Waits until `id` is no longer connecting (at most its connect timeout): `Ok` when it is
    /// ready, else why not.
    pub fn wait_for(&self, id: &ServerId) -> Result<(), HostError> {
        self.wait_settled(std::slice::from_ref(id));
        self.shared().apply(|st| st.outcome(id))
    }

    fn wait_settled(&self, ids: &[ServerId]) {
        loop {
            let ((settled, deadline), closing, generation) = self.shared().update(|st| {
                (
                    st.registry.settled(ids),
                    st.registry.poll_timeout().map(|t| t.at),
                )
            });
            closing.close();
            if settled {
                return;
            }
            self.shared().wait_change(generation, deadline);
        }
    }

    /// Disconnects a server: its client is closed (calls in flight on it fail), what it still
    /// reports is dropped; it stays in the host, to be connected again.
    pub fn disconnect(&self, id: &ServerId) -> Result<(), HostError> {
        self.shared()
            .apply(|st| st.registry.disconnect(id).map_err(usage))
    }

    /// Removes a server (disconnecting it first).
    pub fn remove(&self, id: &ServerId) -> Result<(), HostError> {
        self.shared()
            .apply(|st| st.registry.remove(id).map(drop).map_err(usage))
    }

    /// Changes the host's trust in a server.
    pub fn set_trust(&self, id: &ServerId, trust: Trust) -> Result<(), HostError> {
        self.shared()
            .apply(|st| st.registry.set_trust(id, trust).map_err(usage))
    }

    /// Every server as the registry has it (state, era, summary, tool count, credentials), in
    /// id order.
    pub fn servers(&self) -> Vec<Server> {
        self.with_registry(|r| r.iter().cloned().collect())
    }

    /// One server as the registry has it.
    pub fn server(&self, id: &ServerId) -> Option<Server> {
        self.with_registry(|r| r.get(id).cloned())
    }

    /// Reads the registry (without cloning it).
    pub fn with_registry<R>(&self, f: impl FnOnce(&Registry) -> R) -> R {
        self.shared().apply(|st| f(&st.registry))
    }

    // -----------------------------------------------------------------------------------------
    // Tools.

    /// Every tool of a ready server, every page, through its client's cache (fresh while the
    /// server's `ttlMs` lasts, dropped on `list_changed`).
    pub fn tools(&self, id: &ServerId) -> Result<Vec<Tool>, HostError> {
        self.tools_listing(id).map(|list| list.tools)
    }

    /// [`tools`](Self::tools) as the server answered it: every page joined, with the `ttlMs`
    /// and `cacheScope` of the answer (a host memoizing the definitions lists again when the
    /// TTL has passed, or on `list_changed`).
    pub fn tools_listing(&self, id: &ServerId) -> Result<ListToolsResult, HostError> {
        let (attempt, client) = self.shared().apply(|st| st.ready_client(id))?;
        if let Some(list) = self.shared().apply(|st| st.take_listing(id, attempt)) {
            return Ok(list);
        }
        match client.list_all_tools() {
            Ok(list) => {
                let count = list.tools.len();
                self.shared().apply(|st| st.tools_listed(attempt, count));
                Ok(list)
            }
            Err(e) => Err(self.request_failed(id, attempt, "tools/list".into(), e)),
        }
    }

    /// Every ready server's tools, grouped by server in id order (each listed on a thread of
    /// its own, so a slow server's listing overlaps the others').
    pub fn all_tools(&self) -> Vec<(ServerId, Result<Vec<Tool>, HostError>)> {
        let ready: Vec<ServerId> = self.with_registry(|r| {
            r.iter()
                .filter(|s| s.is_ready())
                .map(|s| s.id().clone())
                .collect()
        });
        thread::scope(|scope| {
            let listings: Vec<_> = ready
                .iter()
                .map(|id| (id, scope.spawn(|| self.tools(id))))
                .collect();
            listings
                .into_iter()
                .map(|(id, listing)| {
                    // A listing's panic is this host's bug: it goes on in the caller.
                    let tools = listing
                        .join()
                        .unwrap_or_else(|p| std::panic::resume_unwind(p));
                    (id.clone(), tools)
                })
                .collect()
        })
    }

    /// Calls `tool` on the server `id` (with progress notifications requested; they reach
    /// [`Hooks::on_progress`](super::Hooks::on_progress)). A tool that failed answers a result
    /// with `is_error` set, not an error.
    pub fn call_tool(
        &self,
        id: &ServerId,
        tool: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolResult, HostError> {
        let options = OpOptions {
            progress: true,
            ..OpOptions::default()
        };
        self.call_tool_with(id, tool, arguments, options)
    }

    /// [`call_tool`](Self::call_tool) with the core's per-operation options.
    pub fn call_tool_with(
        &self,
        id: &ServerId,
        tool: &str,
        arguments: impl Serialize,
        options: OpOptions,
    ) -> Result<CallToolResult, HostError> {
        self.start_call_tool(id, tool, arguments, options)?.wait()
    }

    /// Starts calling `tool` on the server `id` without waiting for anything: the request goes
    /// out on this thread when the server's client has a place for it
    /// ([`ClientOptions::max_in_flight`](crate::mcp::ClientOptions::max_in_flight)), otherwise
    /// once [`PendingCall::wait`] is called. Wait for the answer on any thread (the one that
    /// waits reads it, with no hand-off between threads). The host's hooks never run on this
    /// thread, so a server's request handler may call it.
    pub fn start_call_tool(
        &self,
        id: &ServerId,
        tool: &str,
        arguments: impl Serialize,
        options: OpOptions,
    ) -> Result<PendingCall, HostError> {
        let (attempt, client) = self.shared().apply(|st| st.ready_client(id))?;
        let fail = |e| self.request_failed(id, attempt, format!("tools/call {tool}"), e);
        let operation = Operation::CallTool {
            name: tool.to_owned(),
            arguments: arguments_object(arguments).map_err(fail)?,
        };
        let sent = match client.try_start(operation, options.clone()).map_err(fail)? {
            TryStart::Started(pending) => Sent::Now(pending),
            TryStart::Full(operation) => Sent::Later {
                client,
                operation,
                options,
            },
        };
        let cancel = Arc::new(CancelCell::default());
        if let Sent::Now(pending) = &sent {
            lock(&cancel.0).1 = Some(pending.canceller());
        }
        Ok(PendingCall {
            host: self.clone(),
            server: id.clone(),
            attempt,
            tool: tool.to_owned(),
            sent: Some(sent),
            cancel,
        })
    }

    /// The client of a ready server, for what the host does not wrap (prompts, resources,
    /// subscriptions). It is closed when the server is disconnected.
    pub fn client(&self, id: &ServerId) -> Result<McpClient, HostError> {
        self.shared()
            .apply(|st| st.ready_client(id))
            .map(|(_, c)| c)
    }

    fn request_failed(&self, id: &ServerId, attempt: Attempt, what: String, e: Error) -> HostError {
        self.shared().apply(|st| st.request_failed(attempt, &e));
        HostError::Request {
            server: id.clone(),
            what,
            source: Box::new(e),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Events.

    /// The next change (a server added, removed, changing state; a server's tools changed),
    /// if any, without waiting.
    pub fn poll_event(&self) -> Option<RegistryEvent> {
        self.shared().apply(|st| st.next_event())
    }

    /// The next change, waiting up to `timeout` for one.
    pub fn wait_event(&self, timeout: Duration) -> Option<RegistryEvent> {
        let until = Instant::now().checked_add(timeout);
        loop {
            let ((event, deadline), closing, generation) = self
                .shared()
                .update(|st| (st.next_event(), st.registry.poll_timeout().map(|t| t.at)));
            closing.close();
            if event.is_some() {
                return event;
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                return None;
            }
            let wake = match (until, deadline) {
                (Some(u), Some(d)) => Some(u.min(d)),
                (u, d) => u.or(d),
            };
            self.shared().wait_change(generation, wake);
        }
    }

    /// Closes every client and takes no new server. Other handles' calls then fail.
    pub fn close(self) {
        self.shared().apply(|st| st.shutdown());
    }

    // -----------------------------------------------------------------------------------------

    /// The reconnect loop, on a thread of its own for as long as the host lives: it connects
    /// each failed server the registry says is due ([`ReconnectPolicy`](super::ReconnectPolicy)).
    fn spawn_reconnects(&self) {
        let weak = Arc::downgrade(&self.inner);
        let spawned = thread::Builder::new()
            .name("mcp-host-reconnect".to_owned())
            .spawn(move || loop {
                let Some(inner) = weak.upgrade() else { return };
                let host = Host { inner };
                // Removed or connected meanwhile: `connect` has nothing to do.
                let look = host.shared().reconnect_look(|id| drop(host.connect(id)));
                let Some((generation, until)) = look else {
                    return;
                };
                let shared = Arc::clone(host.shared());
                drop(host);
                shared.wait_change(generation, Some(until));
            });
        // Without a thread the host still works; its failed servers wait for `connect`.
        drop(spawned);
    }

    fn spawn_connect(&self, id: ServerId, attempt: Attempt, plan: Plan) {
        let shared = Arc::clone(self.shared());
        let options = self.inner.options.clone();
        let spawned = thread::Builder::new()
            .name("mcp-host-connect".to_owned())
            .spawn(move || connect(&shared, &id, attempt, plan, &options));
        if let Err(source) = spawned {
            self.shared()
                .apply(|st| st.fail(attempt, Stage::Start, Error::Thread { source }));
        }
    }
}

/// One attempt, on its own thread: the client, `server/discover`, every tool, the tool-change
/// subscription; each step's failure fails the attempt at that step.
fn connect(
    shared: &Arc<Shared<McpClient>>,
    id: &ServerId,
    attempt: Attempt,
    plan: Plan,
    host: &HostOptions,
) {
    let fail = |stage, e| shared.apply(|st| st.fail(attempt, stage, e));
    let made = match &plan.target {
        Target::Http(url) => McpClient::connect_http(url, plan.options),
        Target::Stdio(command) => McpClient::connect_stdio_command(command, plan.options),
    };
    let client = match made {
        Ok(c) => c,
        Err(e) => return fail(Stage::Start, e),
    };
    client.set_host(Box::new(shared.hooks(id, attempt, host.hooks.clone())));
    // From here a disconnect or a timeout closes the client, which ends what it waits for.
    if !shared.apply(|st| st.adopt(id, attempt, &client)) {
        return client.close();
    }
    shared.apply(|st| st.stage(attempt, Stage::Discover));
    let summary = match client.discover() {
        Ok(d) => ServerSummary::from(&d),
        Err(e) => return fail(Stage::Discover, e),
    };
    let mut connected = Connected {
        era: client.era(),
        summary,
        tools: Some(0),
    };
    if connected.summary.has_tools() {
        shared.apply(|st| st.stage(attempt, Stage::ListTools));
        match client.list_all_tools() {
            Ok(list) => {
                connected.tools = Some(list.tools.len());
                shared.apply(|st| st.keep_listing(id, attempt, list));
            }
            Err(e) => return fail(Stage::ListTools, e),
        }
    }
    connected.era = client.era();
    if watches_tools(host, connected.era.as_ref(), &connected) {
        let filter = SubscriptionFilter {
            tools_list_changed: true,
            ..SubscriptionFilter::default()
        };
        // Its changes reach the hooks; it lives as long as the client. A server that refuses it
        // still has the TTL.
        if let Ok(sub) = client.subscribe(filter) {
            if let Err(sub) = shared.apply(|st| st.keep(id, attempt, Box::new(sub))) {
                drop(sub);
            }
        }
    }
    shared.apply(|st| st.ready(attempt, connected));
}

/// A `tools/call` started with [`Host::start_call_tool`]. Dropping it before its end cancels
/// the call.
#[derive(Debug)]
pub struct PendingCall {
    host: Host,
    server: ServerId,
    attempt: Attempt,
    tool: String,
    /// `None` once waited for.
    sent: Option<Sent>,
    cancel: Arc<CancelCell>,
}

#[derive(Debug)]
enum Sent {
    /// In flight.
    Now(Pending),
    /// Not started yet: the client had no place for it.
    Later {
        client: McpClient,
        operation: Operation,
        options: OpOptions,
    },
}

/// Whether the call was cancelled, and its operation's canceller once it is in flight.
#[derive(Debug, Default)]
struct CancelCell(std::sync::Mutex<(bool, Option<Canceller>)>);

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Cancels a [`PendingCall`] from any thread (the call then ends with
/// [`Error::Cancelled`] unless its answer was there first).
#[derive(Debug, Clone)]
pub struct CallCanceller(Arc<CancelCell>);

impl CallCanceller {
    /// Cancels the call: at once when it is in flight (the server is told), or before it
    /// starts. It never waits.
    pub fn cancel(&self) {
        let op = {
            let mut cell = lock(&(self.0).0);
            cell.0 = true;
            cell.1.clone()
        };
        // Outside the lock: the cancelled call's outcome may be handed on from here.
        if let Some(op) = op {
            op.cancel();
        }
    }
}

impl PendingCall {
    /// The server called.
    pub fn server(&self) -> &ServerId {
        &self.server
    }

    /// A handle that cancels this call from another thread.
    pub fn canceller(&self) -> CallCanceller {
        CallCanceller(Arc::clone(&self.cancel))
    }

    /// Hands the call's outcome to `then` instead of waiting for it, when the call is in
    /// flight (see [`Pending::then`]: `then` runs on the thread that reads the answer and
    /// must not wait for this server); a call not started yet is handed back (wait for it).
    pub fn then(
        mut self,
        then: impl FnOnce(Result<CallToolResult, HostError>) + Send + 'static,
    ) -> Result<(), Box<PendingCall>> {
        let pending = match self.sent.take() {
            Some(Sent::Now(pending)) => pending,
            other => {
                self.sent = other;
                return Err(Box::new(self));
            }
        };
        let (host, server, attempt, tool) = (
            self.host.clone(),
            self.server.clone(),
            self.attempt,
            std::mem::take(&mut self.tool),
        );
        pending.then(move |outcome| {
            let outcome = outcome
                .and_then(|v| CallToolResult::from_value(v).map_err(Error::InvalidResult))
                .map_err(|e| {
                    host.request_failed(&server, attempt, format!("tools/call {tool}"), e)
                });
            then(outcome);
        });
        Ok(())
    }

    /// Waits for the call's end (its timeout bounds that), starting it first if it has not
    /// started yet (waiting for a place among the client's operations in flight).
    pub fn wait(mut self) -> Result<CallToolResult, HostError> {
        let pending = match self.sent.take() {
            Some(Sent::Now(pending)) => Ok(pending),
            Some(Sent::Later {
                client,
                operation,
                options,
            }) => {
                if lock(&self.cancel.0).0 {
                    Err(Error::Cancelled)
                } else {
                    client.start(operation, options).inspect(|pending| {
                        let mut cell = lock(&self.cancel.0);
                        if cell.0 {
                            pending.canceller().cancel();
                        }
                        cell.1 = Some(pending.canceller());
                    })
                }
            }
            None => Err(Error::Cancelled),
        };
        pending
            .and_then(Pending::wait)
            .and_then(|value| CallToolResult::from_value(value).map_err(Error::InvalidResult))
            .map_err(|e| {
                self.host.request_failed(
                    &self.server,
                    self.attempt,
                    format!("tools/call {}", self.tool),
                    e,
                )
            })
    }
}

//! The smol host: [`Host`] holds one [`McpClient`] per server and connects each in a task of
//! its own (on smol's global executor), so that many connect at once and a slow or dead server
//! holds up no other. Its methods are those of the blocking host; the ones that wait for a
//! server (connecting, listing, calling, the next event) are `async fn`s.
//!
//! A `Host` is a cheap handle (`Clone + Send + Sync`); futures of calls to different servers
//! run at once (`join_all` over `call_tool` on several servers just works). Dropping a call's
//! future before its end cancels that call only. Dropping the last handle closes every client.
//!
//! A server's connect timeout ([`HostOptions::connect_timeout`]) is the registry's deadline:
//! whoever uses the host next, or waits on it ([`Host::connect_all`], [`Host::wait_for`],
//! [`Host::next_event`]), feeds it the clock, and a server past its deadline fails
//! ([`FailureKind::TimedOut`](super::FailureKind::TimedOut)) and has its client closed.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use mcpwire::host::{smol::Host, HostOptions, ServerId, ServerSpec, TransportSpec, Trust};
//!
//! smol::block_on(async {
//!     let host = Host::new(HostOptions::default());
//!     let id = ServerId::new("docs").unwrap();
//!     let spec = ServerSpec {
//!         id: id.clone(),
//!         transport: TransportSpec::Http {
//!             url: "http://127.0.0.1:8931/mcp".into(),
//!             headers: BTreeMap::new(),
//!         },
//!         oauth: None,
//!         trust: Trust::Untrusted,
//!         disabled: false,
//!     };
//!     for (id, outcome) in host.connect_all([spec]).await {
//!         println!("{id}: {:?}", outcome.map(|()| "ready"));
//!     }
//!     let answer = host.call_tool(&id, "echo", serde_json::json!({"text": "hi"})).await?;
//!     println!("{}", answer.text());
//!     Ok::<(), mcpwire::host::HostError>(())
//! })?;
//! # Ok::<(), mcpwire::host::HostError>(())
//! ```

use std::future::poll_fn;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire_core::host::registry::{
    Attempt, Connected, Registry, RegistryEvent, Server, ServerSummary, Stage,
};
use mcpwire_core::host::{ServerId, ServerSpec, Trust};
use mcpwire_core::mcp::SubscriptionFilter;
use serde::Serialize;
use smol::future::FutureExt as _;
use smol::Timer;

use super::shared::{usage, watches_tools, HostClient, Plan, Shared, Target};
use super::{ConnectReport, HostError, HostOptions};
use crate::mcp::smol::McpClient;
use crate::mcp::{CallToolResult, Error, ListToolsResult, OpOptions, Tool};

impl HostClient for McpClient {
    fn close_now(self) {
        // `close` ends the client for every handle at once; what is left (a legacy session's
        // goodbye) finishes in the background.
        smol::spawn(self.close()).detach();
    }
}

/// A host of many MCP servers on smol (see the [module docs](self) and [`crate::host`]).
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

    /// The reconnect loop, a task for as long as the host lives: it connects each failed
    /// server the registry says is due ([`ReconnectPolicy`](super::ReconnectPolicy)).
    fn spawn_reconnects(&self) {
        let weak = Arc::downgrade(&self.inner);
        smol::spawn(async move {
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let host = Host { inner };
                // Removed or connected meanwhile: `connect` has nothing to do.
                let look = host.shared().reconnect_look(|id| drop(host.connect(id)));
                let Some((generation, until)) = look else {
                    return;
                };
                let shared = Arc::clone(host.shared());
                drop(host);
                poll_fn(|cx| shared.poll_change(generation, cx))
                    .or(async {
                        Timer::at(until).await;
                    })
                    .await;
            }
        })
        .detach();
    }

    // -----------------------------------------------------------------------------------------
    // Servers.

    /// Adds a server, not connected (disabled when its spec says so).
    pub fn add(&self, spec: ServerSpec) -> Result<(), HostError> {
        self.shared().apply(|st| st.add(spec))
    }

    /// Starts connecting a server (disconnected or failed) in a task of its own and returns at
    /// once; [`wait_for`](Self::wait_for) waits for the outcome. A server connecting or ready
    /// already is left as it is.
    pub fn connect(&self, id: &ServerId) -> Result<(), HostError> {
        let begun = self
            .shared()
            .apply(|st| st.begin(id, &self.inner.options))?;
        if let Some((attempt, plan)) = begun {
            let shared = Arc::clone(self.shared());
            let options = self.inner.options.clone();
            let id = id.clone();
            smol::spawn(async move { connect(&shared, &id, attempt, plan, &options).await })
                .detach();
        }
        Ok(())
    }

    /// Adds `specs` and connects them all at once, each within its connect timeout; completes
    /// when every one is ready or failed, with each server's outcome in id order (see the
    /// blocking [`connect_all`](crate::host::blocking::Host::connect_all)).
    pub async fn connect_all(&self, specs: impl IntoIterator<Item = ServerSpec>) -> ConnectReport {
        let mut report: ConnectReport = Vec::new();
        let mut started = Vec::new();
        for spec in specs {
            let id = spec.id.clone();
            match self.add(spec).and_then(|()| self.connect(&id)) {
                Ok(()) => started.push(id),
                Err(e) => report.push((id, Err(e))),
            }
        }
        self.wait_settled(&started).await;
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
    pub async fn wait_for(&self, id: &ServerId) -> Result<(), HostError> {
        self.wait_settled(std::slice::from_ref(id)).await;
        self.shared().apply(|st| st.outcome(id))
    }

    async fn wait_settled(&self, ids: &[ServerId]) {
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
            self.wait_change(generation, deadline).await;
        }
    }

    /// Waits until the registry changes or `until` passes.
    async fn wait_change(&self, seen: u64, until: Option<Instant>) {
        let changed = poll_fn(|cx| self.shared().poll_change(seen, cx));
        match until {
            Some(at) => {
                changed
                    .or(async {
                        Timer::at(at).await;
                    })
                    .await
            }
            None => changed.await,
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

    /// Every server as the registry has it, in id order.
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

    /// Every tool of a ready server, every page, through its client's cache.
    pub async fn tools(&self, id: &ServerId) -> Result<Vec<Tool>, HostError> {
        self.tools_listing(id).await.map(|list| list.tools)
    }

    /// [`tools`](Self::tools) as the server answered it: every page joined, with the `ttlMs`
    /// and `cacheScope` of the answer (a host memoizing the definitions lists again when the
    /// TTL has passed, or on `list_changed`).
    pub async fn tools_listing(&self, id: &ServerId) -> Result<ListToolsResult, HostError> {
        let (attempt, client) = self.shared().apply(|st| st.ready_client(id))?;
        if let Some(list) = self.shared().apply(|st| st.take_listing(id, attempt)) {
            return Ok(list);
        }
        match client.list_all_tools().await {
            Ok(list) => {
                let count = list.tools.len();
                self.shared().apply(|st| st.tools_listed(attempt, count));
                Ok(list)
            }
            Err(e) => Err(self.request_failed(id, attempt, "tools/list".into(), e)),
        }
    }

    /// Every ready server's tools, grouped by server in id order (the listings run at once).
    pub async fn all_tools(&self) -> Vec<(ServerId, Result<Vec<Tool>, HostError>)> {
        let ready: Vec<ServerId> = self.with_registry(|r| {
            r.iter()
                .filter(|s| s.is_ready())
                .map(|s| s.id().clone())
                .collect()
        });
        let listings: Vec<_> = ready
            .into_iter()
            .map(|id| {
                let host = self.clone();
                smol::spawn(async move {
                    let tools = host.tools(&id).await;
                    (id, tools)
                })
            })
            .collect();
        let mut all = Vec::with_capacity(listings.len());
        for listing in listings {
            all.push(listing.await);
        }
        all
    }

    /// Calls `tool` on the server `id` (with progress notifications requested).
    pub async fn call_tool(
        &self,
        id: &ServerId,
        tool: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolResult, HostError> {
        let options = OpOptions {
            progress: true,
            ..OpOptions::default()
        };
        self.call_tool_with(id, tool, arguments, options).await
    }

    /// [`call_tool`](Self::call_tool) with the core's per-operation options.
    pub async fn call_tool_with(
        &self,
        id: &ServerId,
        tool: &str,
        arguments: impl Serialize,
        options: OpOptions,
    ) -> Result<CallToolResult, HostError> {
        let (attempt, client) = self.shared().apply(|st| st.ready_client(id))?;
        client
            .call_tool_with(tool, arguments, options)
            .await
            .map_err(|e| self.request_failed(id, attempt, format!("tools/call {tool}"), e))
    }

    /// The client of a ready server, for what the host does not wrap. It is closed when the
    /// server is disconnected.
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

    /// The next change, if any, without waiting.
    pub fn poll_event(&self) -> Option<RegistryEvent> {
        self.shared().apply(|st| st.next_event())
    }

    /// The next change, waiting for one (a server's deadline passing is one).
    pub async fn next_event(&self) -> RegistryEvent {
        loop {
            let ((event, deadline), closing, generation) = self
                .shared()
                .update(|st| (st.next_event(), st.registry.poll_timeout().map(|t| t.at)));
            closing.close();
            if let Some(event) = event {
                return event;
            }
            self.wait_change(generation, deadline).await;
        }
    }

    /// The next change, waiting up to `timeout` for one.
    pub async fn wait_event(&self, timeout: Duration) -> Option<RegistryEvent> {
        let next = async { Some(self.next_event().await) };
        next.or(async {
            Timer::after(timeout).await;
            None
        })
        .await
    }

    /// Closes every client and takes no new server. Other handles' calls then fail.
    pub fn close(self) {
        self.shared().apply(|st| st.shutdown());
    }
}

/// One attempt, in its own task (see the blocking driver's).
async fn connect(
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
    if !shared.apply(|st| st.adopt(id, attempt, &client)) {
        return client.close().await;
    }
    shared.apply(|st| st.stage(attempt, Stage::Discover));
    let summary = match client.discover().await {
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
        match client.list_all_tools().await {
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
        if let Ok(sub) = client.subscribe(filter).await {
            if let Err(sub) = shared.apply(|st| st.keep(id, attempt, Box::new(sub))) {
                drop(sub);
            }
        }
    }
    shared.apply(|st| st.ready(attempt, connected));
}

//! `mcpwire host serve`: the host as one MCP server. A host the user already has (Claude
//! Desktop, Claude Code, Cursor, VS Code) starts it as its only server entry; it connects
//! every server of the config, and serves their tools under the host's exposed names (or,
//! above the discovery threshold, `search_tools` and `call_tool`), their prompts and
//! resources, every call through the consent policy: "ask" is an elicitation to the downstream
//! client (MRTR in 2026-07-28, `elicitation/create` in 2025-11-25, mapped by the server core).
//!
//! The decisions are the core's (`mcpwire_core::host::gateway`, `host::consent`,
//! `host::catalog`, `mcp::server`); the upstream servers run on the blocking host
//! (`mcpwire::host::blocking::Host`, reconnecting by itself), the downstream on the blocking
//! server driver (`mcpwire::server::blocking`). Nothing is read from stdin but the protocol:
//! stdout carries only the protocol too, and everything for a person goes to stderr.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use mcpwire::host::blocking::{CallCanceller, Host, PendingCall};
use mcpwire::host::{HostError, HostOptions, ReconnectPolicy, RegistryEvent, ServerId};
use mcpwire::mcp::CallToolResult;
use mcpwire::mcp::ClientOptions;
use mcpwire::server::{blocking as server, HttpOptions, Responder};
use mcpwire_core::host::catalog::{Catalog, PresentationConfig};
use mcpwire_core::host::consent::{ApprovalScope, ConsentPolicy};
use mcpwire_core::host::gateway::{
    self, search_result, ConsentStep, ExposedTools, Prompts, Resources, RouteError, Routed,
    ServeCommand, ToolRefusal, UpstreamCall, Upstreams, WhenUnavailable,
};
use mcpwire_core::jsonrpc::{code, ErrorObject};
use mcpwire_core::mcp::results::{Prompt, Resource, ResourceTemplate, Tool};
use mcpwire_core::mcp::server::{
    Application, CallContext, InputRequest, Reply, RequestContext, RequestId, ServerConfig,
};
use mcpwire_core::mcp::{Implementation, JsonObject, ListKind, OpOptions};
use serde_json::Value;

use super::login::{FlightId, GatewayBrowser, Logins, Retry, LOGIN_INPUT};
use super::{approve_command, describe, load, rules, state, Failure, Outcome, Terminal};

/// The key the consent form's answer comes back under (MRTR `inputResponses`).
const CONSENT_INPUT: &str = "consent";

/// `mcpwire host serve`: one MCP server in front of every server of the config.
#[derive(Args, Debug, Clone)]
pub(crate) struct ServeArgs {
    /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8808; the endpoint is /mcp)
    /// instead of stdio. Only loopback clients' Host and Origin headers are accepted.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Print the config entry to paste into Claude Desktop, Claude Code, Cursor and VS Code
    /// (with this binary's and the config's absolute paths), then exit.
    #[arg(long)]
    print_config: bool,
}

pub(super) const SERVE_ABOUT: &str = "\
Serves every server of the config as one MCP server: put it into the host you already use as
its only server entry (--print-config prints the entry for Claude Desktop, Claude Code, Cursor
and VS Code). Over stdio by default (what hosts start), or Streamable HTTP with --listen.

Below the discovery threshold (--threshold percent of --context-window) the client sees every
upstream tool as <server>__<tool>; above it only search_tools and call_tool. Every call goes
through the config's permissions and the consent policy: a call that needs approval becomes a
form the client shows you (the server, the tool, its description and the exact arguments); a
client that cannot show forms gets a tool error naming the rule that would allow the call.

A server that is down or slow holds up no other: its tools answer that it is unavailable, and
it is reconnected with backoff. A server whose OAuth grant stops working mid-session gets a new
sign-in through the client: the call is answered with the authorization link (a URL-mode
elicitation), and goes on once you have signed in; mcpwire never opens a browser itself. Local commands run only once approved: run
`mcpwire host --config FILE servers` on a terminal first (or pass --approve-commands).";

/// Runs `mcpwire host serve`.
pub(super) fn run(args: &super::HostArgs, serve: &ServeArgs) -> Result<Outcome, Failure> {
    if serve.print_config {
        return print_config(&args.configs);
    }
    if args.configs.is_empty() {
        return Err(Failure(
            "host serve needs --config FILE (the servers it fronts); see --help".into(),
        ));
    }
    let threshold = mcpwire_core::host::catalog::DiscoveryThreshold::from_percent(args.threshold)?;
    let loaded = load::load(&args.configs)?;
    for (path, location) in &loaded.read {
        match location {
            Some(l) => eprintln!(
                "mcpwire host serve: reading {} ({})",
                path.display(),
                describe(l)
            ),
            None => eprintln!("mcpwire host serve: reading {}", path.display()),
        }
    }
    for e in &loaded.errors {
        eprintln!("mcpwire host serve: {e}");
    }
    let rules = rules(&loaded.permissions)?;
    let mut state = state::State::load(state::state_dir(args.state_dir.as_deref()))?;
    // stdin is the protocol (or, with --listen, nobody's): nobody can be asked here.
    let mut io = Terminal {
        interactive: false,
        terminal: false,
    };
    let mut specs = Vec::new();
    let mut not_approved = Vec::new();
    for entry in &loaded.entries {
        let spec = entry.spec.clone();
        if gateway::runs_gateway(&spec) {
            eprintln!(
                "mcpwire host serve: server \"{}\" is mcpwire host serve itself: skipped",
                spec.id
            );
            continue;
        }
        if spec.disabled || approve_command(&spec, args.approve_commands, &mut io, &mut state)? {
            specs.push(spec);
        } else {
            not_approved.push(spec.id.clone());
        }
    }
    let config_file = args
        .configs
        .first()
        .map(|p| p.display().to_string())
        .unwrap_or_default();

    // The gateway never opens a browser: a sign-in an upstream server needs is shown to the
    // downstream client as a link (and on stderr).
    // Only an HTTP server the host authorizes can need a sign-in (one whose config sets an
    // `Authorization` header is not authorized by the host).
    let may_sign_in = specs
        .iter()
        .filter(|s| match &s.transport {
            mcpwire::host::TransportSpec::Http { headers, .. } => !headers
                .keys()
                .any(|h| h.eq_ignore_ascii_case("authorization")),
            mcpwire::host::TransportSpec::Stdio { .. } => false,
        })
        .map(|s| s.id.clone())
        .collect();
    let logins = Logins::new(may_sign_in, format!(
        "open the link mcpwire host serve printed on its stderr, or run `mcpwire host --config {config_file} servers` on a terminal"
    ));
    let user_agent = Arc::new(GatewayBrowser {
        logins: Arc::clone(&logins),
    });
    let authorization = super::host_authorization(args, user_agent, "mcpwire host serve")?;
    let host = Host::new(
        HostOptions::default()
            .with_client(ClientOptions::default())
            .with_connect_timeout(args.connect_timeout)
            .with_authorization(authorization)
            .with_reconnect(ReconnectPolicy::default()),
    );
    for spec in specs {
        let id = spec.id.clone();
        if let Err(e) = host.add(spec).and_then(|()| host.connect(&id)) {
            eprintln!("mcpwire host serve: {e}");
        }
    }

    let gateway = Arc::new(Gateway {
        host: host.clone(),
        config_file,
        presentation: PresentationConfig::new(args.context_window).with_threshold(threshold),
        pins: args.pins.clone(),
        not_approved,
        logins,
        refreshing: Mutex::new(()),
        calls: Mutex::new(HashMap::new()),
        inner: Mutex::new(Inner {
            catalog: Catalog::new(),
            prompts: Prompts::new(),
            resources: Resources::new(),
            upstreams: Upstreams::new(),
            exposed: None,
            policy: ConsentPolicy::new(rules).with_approvals(state.tools.clone()),
            state,
            changed: BTreeSet::new(),
            fresh_until: BTreeMap::new(),
            listed_extras: BTreeSet::new(),
        }),
    });
    // What the client sees first: the servers ready within a moment (the rest follow with
    // `list_changed`).
    let seen = wait_briefly(&host, Duration::from_secs(2));
    gateway.refresh_with(seen, None);

    let mut config = mcpwire::server::config(Implementation::new(
        "mcpwire-host",
        env!("CARGO_PKG_VERSION"),
    ))?;
    config.prompts = true;
    config.resources = true;
    config.instructions = Some(
        "Tools of several MCP servers, named <server>__<tool>. When only search_tools and \
         call_tool are listed, search first, then call a tool by the name the search gave."
            .to_owned(),
    );
    let outcome = match serve.listen {
        None => serve_stdio(config, &gateway),
        Some(addr) => serve_http(config, addr, &gateway),
    };
    host.close();
    outcome
}

fn serve_stdio(config: ServerConfig, gateway: &Arc<Gateway>) -> Result<Outcome, Failure> {
    let g = Arc::clone(gateway);
    server::serve_stdio_with(config, move |responder| {
        g.watch(responder.clone());
        GatewayApp {
            gateway: g,
            responder,
            workers: Workers::new(),
        }
    })?;
    Ok(Outcome::Done)
}

fn serve_http(
    config: ServerConfig,
    addr: SocketAddr,
    gateway: &Arc<Gateway>,
) -> Result<Outcome, Failure> {
    let g = Arc::clone(gateway);
    let mut http =
        server::HttpServer::start_with(config, HttpOptions::listen(addr), move |responder| {
            g.watch(responder.clone());
            GatewayApp {
                gateway: g,
                responder,
                workers: Workers::new(),
            }
        })?;
    eprintln!("mcpwire host serve: serving {}", http.url());
    wait_for_signal()?;
    http.stop();
    Ok(Outcome::Done)
}

#[cfg(unix)]
fn wait_for_signal() -> Result<(), Failure> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| Failure(format!("cannot watch for SIGINT/SIGTERM: {e}")))?;
    let _ = signals.forever().next();
    Ok(())
}

#[cfg(not(unix))]
fn wait_for_signal() -> Result<(), Failure> {
    loop {
        thread::park();
    }
}

/// Waits until no server is connecting, or `at_most`; the events seen meanwhile.
fn wait_briefly(host: &Host, at_most: Duration) -> Vec<RegistryEvent> {
    let until = Instant::now() + at_most;
    let mut seen = Vec::new();
    while Instant::now() < until {
        let connecting = host
            .servers()
            .iter()
            .any(|s| s.state().kind() == mcpwire::host::StateKind::Connecting);
        if !connecting {
            break;
        }
        seen.extend(host.wait_event(Duration::from_millis(50)));
    }
    seen
}

/// `--print-config`: the entry for each host, for the first config file.
fn print_config(configs: &[PathBuf]) -> Result<Outcome, Failure> {
    let Some(config) = configs.first() else {
        return Err(Failure(
            "--print-config needs --config FILE (the file the gateway will read)".into(),
        ));
    };
    let config =
        std::fs::canonicalize(config).map_err(|e| Failure(format!("{}: {e}", config.display())))?;
    let binary = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| Failure(format!("cannot find this program's path: {e}")))?;
    let command = ServeCommand::new(&path_text(&binary), &path_text(&config))?;
    print!("{}", command.render());
    Ok(Outcome::Done)
}

fn path_text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// The gateway's state.

struct Gateway {
    host: Host,
    config_file: String,
    presentation: PresentationConfig,
    pins: Vec<String>,
    not_approved: Vec<ServerId>,
    /// The upstream sign-ins under way, and the calls waiting on upstream servers.
    logins: Arc<Logins>,
    refreshing: Mutex<()>,
    inner: Mutex<Inner>,
    /// The upstream calls in flight, by the downstream request they answer.
    calls: Mutex<HashMap<RequestId, CallCanceller>>,
}

struct Inner {
    catalog: Catalog,
    prompts: Prompts,
    resources: Resources,
    upstreams: Upstreams,
    /// What was last listed downstream (`None`: nothing yet).
    exposed: Option<ExposedTools>,
    policy: ConsentPolicy,
    state: state::State,
    /// Servers that announced `list_changed` since their tools were listed.
    changed: BTreeSet<ServerId>,
    /// When each listing with a positive `ttlMs` goes stale.
    fresh_until: BTreeMap<ServerId, Instant>,
    /// Servers whose prompts and resources were listed in their current connection.
    listed_extras: BTreeSet<ServerId>,
}

impl Gateway {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Follows the upstream servers on a thread of its own: every change of the registry
    /// refreshes the catalog, and `list_changed` goes downstream when what is listed changed
    /// (and only then).
    fn watch(self: &Arc<Self>, responder: Responder) {
        let weak = Arc::downgrade(self);
        let spawned = thread::Builder::new()
            .name("mcpwire-gateway-watch".to_owned())
            .spawn(move || loop {
                let Some(g) = weak.upgrade() else { return };
                let event = g.host.wait_event(Duration::from_millis(500));
                if g.host.with_registry(|r| r.is_shut_down()) {
                    return;
                }
                let mut events = Vec::new();
                events.extend(event);
                g.refresh_with(events, Some(&responder));
            });
        if let Err(e) = spawned {
            eprintln!("mcpwire host serve: cannot follow the servers' changes: {e}");
        }
    }

    fn refresh(&self, responder: Option<&Responder>) {
        self.refresh_with(Vec::new(), responder);
    }

    /// The catalog follows the servers (as in `mcpwire host`), except that a server that is
    /// not ready keeps its tools there: they answer that it is unavailable, and its reconnect
    /// with the same tools changes nothing downstream.
    fn refresh_with(&self, mut events: Vec<RegistryEvent>, responder: Option<&Responder>) {
        // One refresh at a time (the watch thread's, a failed call's); calls go on meanwhile.
        let _one = self
            .refreshing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while let Some(e) = self.host.poll_event() {
            events.push(e);
        }
        let servers = self.host.servers();
        let mut inner = self.lock();
        for e in events {
            match e {
                RegistryEvent::ToolsChanged { server } => {
                    inner.changed.insert(server);
                }
                // What the person sees on stderr (the host's log): each server's state.
                RegistryEvent::StateChanged { server, state } => {
                    let detail =
                        servers
                            .iter()
                            .find(|s| *s.id() == server)
                            .and_then(|s| match s.state() {
                                mcpwire::host::ConnectionState::Failed(f) => Some(f.to_string()),
                                _ => None,
                            });
                    match detail {
                        Some(d) => eprintln!("mcpwire host serve: server {server}: {d}"),
                        None => {
                            eprintln!("mcpwire host serve: server {server}: {}", state.as_str())
                        }
                    }
                }
                _ => {}
            }
        }
        let mut upstreams = Upstreams::from_servers(&servers);
        for id in &self.not_approved {
            upstreams.insert(
                id.clone(),
                mcpwire_core::host::Trust::Untrusted,
                gateway::Availability::Unavailable {
                    reason: format!(
                        "its local command is not approved yet: run `mcpwire host --config {} servers` on a terminal to approve it",
                        self.config_file
                    ),
                },
            );
        }
        let mut prompts_changed = false;
        let mut resources_changed = false;
        // What to ask the servers, decided under the lock; asked without it (a slow server
        // must not hold up the calls of the others); applied under it again.
        let mut to_list = Vec::new();
        let mut to_extras = Vec::new();
        for s in &servers {
            let id = s.id();
            if !s.is_ready() {
                inner.listed_extras.remove(id);
                continue;
            }
            let known = inner.catalog.servers().any(|k| k == id);
            let expired = inner
                .fresh_until
                .get(id)
                .is_some_and(|t| Instant::now() >= *t);
            if !known || expired || inner.changed.contains(id) {
                to_list.push(id.clone());
            }
            if !inner.listed_extras.contains(id) {
                to_extras.push(s);
            }
        }
        drop(inner);
        let listings: Vec<_> = to_list
            .into_iter()
            .map(|id| {
                let listing = self.host.tools_listing(&id);
                (id, listing)
            })
            .collect();
        let extras: Vec<_> = to_extras
            .into_iter()
            .map(|s| (s.id().clone(), self.list_extras(s.id(), s)))
            .collect();
        let mut inner = self.lock();
        for (id, listing) in listings {
            match listing {
                Ok(list) => {
                    match list
                        .ttl_ms
                        .and_then(|ms| u64::try_from(ms).ok())
                        .filter(|ms| *ms > 0)
                    {
                        Some(ms) => {
                            inner
                                .fresh_until
                                .insert(id.clone(), Instant::now() + Duration::from_millis(ms));
                        }
                        None => {
                            inner.fresh_until.remove(&id);
                        }
                    }
                    inner.catalog.set_server_tools(id.clone(), list.tools);
                    inner.changed.remove(&id);
                }
                Err(e) => eprintln!("mcpwire host serve: {id}: cannot list the tools: {e}"),
            }
        }
        for (id, (p, r)) in extras {
            prompts_changed |= inner.prompts.set_server_prompts(id.clone(), p);
            resources_changed |= inner.resources.set_server_resources(id.clone(), r.0, r.1);
            inner.listed_extras.insert(id);
        }
        // Servers no longer in the host (none are removed today) leave.
        let gone: Vec<ServerId> = inner
            .catalog
            .servers()
            .filter(|k| !servers.iter().any(|s| s.id() == *k))
            .cloned()
            .collect();
        for id in gone {
            inner.catalog.remove_server(&id);
            prompts_changed |= inner.prompts.remove_server(&id);
            resources_changed |= inner.resources.remove_server(&id);
        }
        for name in &self.pins {
            if let Some((server, tool)) = inner.catalog.route(name) {
                let (server, tool) = (server.clone(), tool.name.clone());
                inner.catalog.pin(&server, &tool);
            }
        }
        let next = ExposedTools::new(&inner.catalog, &self.presentation, &upstreams);
        let tools_changed = inner
            .exposed
            .as_ref()
            .is_some_and(|prev| gateway::list_changed(prev, &next));
        inner.exposed = Some(next);
        inner.upstreams = upstreams;
        drop(inner);
        if let Some(r) = responder {
            if tools_changed {
                r.list_changed(ListKind::Tools);
            }
            if prompts_changed {
                r.list_changed(ListKind::Prompts);
            }
            if resources_changed {
                r.list_changed(ListKind::Resources);
            }
        }
    }

    /// A ready server's prompts and resources (empty where it has none or they fail).
    fn list_extras(
        &self,
        id: &ServerId,
        s: &mcpwire::host::Server,
    ) -> (Vec<Prompt>, (Vec<Resource>, Vec<ResourceTemplate>)) {
        let caps = s.summary().map(|m| m.capabilities.clone());
        let Ok(client) = self.host.client(id) else {
            return (Vec::new(), (Vec::new(), Vec::new()));
        };
        let has = |f: fn(&mcpwire_core::mcp::discover::ServerCapabilities) -> bool| {
            caps.as_ref().is_some_and(f)
        };
        let prompts = if has(|c| c.prompts.is_some()) {
            client
                .list_all_prompts()
                .map(|l| l.prompts)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let (resources, templates) = if has(|c| c.resources.is_some()) {
            (
                client
                    .list_all_resources()
                    .map(|l| l.resources)
                    .unwrap_or_default(),
                client
                    .list_resource_templates(None)
                    .map(|l| l.resource_templates)
                    .unwrap_or_default(),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        (prompts, (resources, templates))
    }
}

// ---------------------------------------------------------------------------------------------
// The threads upstream calls wait on.

type Job = Box<dyn FnOnce() + Send>;

/// The threads that wait on upstream calls: kept and reused (a thread per call would add its
/// start-up to every call's latency), more started while every one is busy, up to
/// [`Workers::MAX`]; past that a job waits for a free thread. A job goes to one idle thread,
/// the one idle last (its stack and caches are warm), and wakes only that one.
struct Workers {
    pool: Arc<Pool>,
}

#[derive(Default)]
struct Pool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    /// The idle threads, the one idle last at the end.
    idle: Vec<Arc<Slot>>,
    /// Threads started (and not ended).
    started: usize,
    /// Jobs waiting for a thread (every one busy, and [`Workers::MAX`] started).
    queue: std::collections::VecDeque<Job>,
}

/// Where an idle thread waits for its next job.
#[derive(Default)]
struct Slot {
    job: Mutex<Option<Job>>,
    ready: std::sync::Condvar,
}

impl Workers {
    const MAX: usize = 64;

    fn new() -> Workers {
        Workers {
            pool: Arc::new(Pool::default()),
        }
    }

    fn run(&self, job: Job) -> Result<(), std::io::Error> {
        let mut st = lock_pool(&self.pool);
        if let Some(slot) = st.idle.pop() {
            drop(st);
            *slot.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(job);
            slot.ready.notify_one();
            return Ok(());
        }
        if st.started >= Self::MAX {
            st.queue.push_back(job);
            return Ok(());
        }
        st.started += 1;
        drop(st);
        let pool = Arc::clone(&self.pool);
        let started = thread::Builder::new()
            .name("mcpwire-gateway-call".to_owned())
            .spawn(move || pool.work(job));
        started
            .map(drop)
            .inspect_err(|_| lock_pool(&self.pool).started -= 1)
    }
}

fn lock_pool(pool: &Pool) -> MutexGuard<'_, PoolState> {
    pool.state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    /// A thread's life: its first job, then what is queued, then each job handed to it while
    /// idle; it ends when the pool is gone.
    fn work(self: Arc<Self>, first: Job) {
        let slot = Arc::new(Slot::default());
        let mut job = first;
        loop {
            job();
            let mut st = lock_pool(&self);
            if let Some(next) = st.queue.pop_front() {
                job = next;
                continue;
            }
            st.idle.push(Arc::clone(&slot));
            drop(st);
            let mut held = slot.job.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(next) = held.take() {
                    job = next;
                    break;
                }
                if Arc::strong_count(&self) == 1 {
                    return;
                }
                held = slot
                    .ready
                    .wait_timeout(held, Duration::from_secs(60))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The downstream server's application.

struct GatewayApp {
    gateway: Arc<Gateway>,
    responder: Responder,
    workers: Workers,
}

impl GatewayApp {
    /// Sends `call` upstream from this thread (the request goes out before the downstream
    /// handler returns) and waits for its answer on a call thread, whose wake-up overlaps the
    /// upstream's work; the answer goes downstream through the responder.
    fn call_upstream(
        &self,
        cx: &CallContext,
        name: &str,
        args: Value,
        call: UpstreamCall,
    ) -> Reply {
        let g = Arc::clone(&self.gateway);
        let responder = self.responder.clone();
        let context = cx.request.clone();
        let started = start_call(&g, &responder, &context, name, &args, &call);
        // A call thread waits for the answer, reading it itself (the upstream client lets a
        // waiting caller poll its stdout). Handing the answer on from the client's own loop
        // thread instead (`PendingCall::then`) was measured slower: 7 to 15 µs more per call
        // at p50 in bench/gateway.sh's free and split layouts, the same on one CPU.
        self.spawn(move || finish_call(&g, &responder, &context, &call, started))
    }
}

/// An upstream call sent (or that could not be).
struct Started {
    flight: FlightId,
    call: Result<PendingCall, HostError>,
}

/// Sends `call` upstream without waiting (see [`Host::start_call_tool`]): on any thread, the
/// downstream handler's included. A cancellation of the downstream request from now on
/// cancels it upstream.
fn start_call(
    g: &Gateway,
    responder: &Responder,
    cx: &RequestContext,
    name: &str,
    args: &Value,
    call: &UpstreamCall,
) -> Started {
    // A call after a declined sign-in is the person trying again: the upstream client, which
    // fails refused requests at once after a declined sign-in, may ask again.
    if g.logins.take_declined(&call.server) {
        if let Ok(client) = g.host.client(&call.server) {
            client.allow_authorization_again();
        }
    }
    let flight = g.logins.begin(&call.server, responder, cx, name, args);
    let options = OpOptions {
        progress: true,
        ..OpOptions::default()
    };
    let started = g
        .host
        .start_call_tool(&call.server, &call.tool.name, &call.arguments, options);
    if let Ok(pending) = &started {
        lock_calls(g).insert(cx.request, pending.canceller());
    }
    Started {
        flight,
        call: started,
    }
}

/// Waits for the upstream's answer on this thread and answers downstream: unless a sign-in of
/// the upstream server held the call up, when the answer waits for the retry (see
/// [`Logins`]).
fn finish_call(
    g: &Gateway,
    responder: &Responder,
    cx: &RequestContext,
    call: &UpstreamCall,
    started: Started,
) {
    let outcome = started.call.and_then(PendingCall::wait);
    if answer_call(g, responder, cx, call, started.flight, outcome) {
        g.refresh(Some(responder));
    }
}

/// Answers downstream with the upstream call's outcome (unless a sign-in holds the answer for
/// the retry); never waits for an upstream server. `true`: the call failed, and the
/// server's state may have changed (refresh it, where waiting is allowed).
fn answer_call(
    g: &Gateway,
    responder: &Responder,
    cx: &RequestContext,
    call: &UpstreamCall,
    flight: FlightId,
    outcome: Result<CallToolResult, HostError>,
) -> bool {
    lock_calls(g).remove(&cx.request);
    let cancelled = matches!(
        outcome.as_ref().map_err(HostError::client_error),
        Err(Some(mcpwire::mcp::Error::Cancelled))
    );
    let reply = match outcome {
        Ok(result) => {
            // Before the answer: the next call's consent sees where this text went.
            g.lock().policy.record_result(&call.server, &result);
            Reply::Result(gateway::downstream_result(result.raw().clone()))
        }
        Err(e) => Reply::tool_error(format!(
            "server {}: the call of {:?} failed: {e}",
            call.server, call.tool.name
        )),
    };
    let failed = matches!(&reply, Reply::Result(v) if v["isError"] == Value::Bool(true));
    if let Some(reply) = g.logins.end(flight, reply) {
        // The client may have gone or cancelled: nothing left to answer.
        let _ = responder.respond(cx.request, reply);
    }
    // A failed call may have found the server gone: its state changed.
    failed && !cancelled
}

fn lock_calls(g: &Gateway) -> MutexGuard<'_, HashMap<RequestId, CallCanceller>> {
    g.calls.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a downstream `tools/call` comes to.
enum Decided {
    /// Answer this.
    Reply(Reply),
    /// Call the upstream.
    Call(Box<UpstreamCall>),
    /// The server is connecting: wait for it, then decide again.
    WaitFor(ServerId),
}

/// Routes a downstream call and puts it through the consent policy (with the answer to an
/// approval form, when the request is the retry that carries it).
fn decide(gateway: &Gateway, cx: &RequestContext, name: &str, args: &Value) -> Decided {
    let mut inner = gateway.lock();
    let call = match route_call_in(&inner, name, args) {
        Err(RouteError::Refused(ToolRefusal::Unavailable { server, reason })) => {
            let now = gateway.host.server(&server);
            if WhenUnavailable::of(now.as_ref().map(|s| s.state())) == WhenUnavailable::Wait {
                return Decided::WaitFor(server);
            }
            return Decided::Reply(refusal(&ToolRefusal::Unavailable { server, reason }));
        }
        Err(RouteError::Refused(r)) => return Decided::Reply(refusal(&r)),
        Err(e) => {
            return Decided::Reply(match e.to_error_object() {
                Some(err) => Reply::Error(err),
                None => Reply::tool_error(format!("{name}: the call cannot be routed")),
            })
        }
        Ok(Routed::Search { query, limit }) => {
            return Decided::Reply(match inner.catalog.search(&query, limit) {
                Ok(results) => Reply::Result(search_result(&results, &inner.upstreams)),
                Err(e) => refusal(&ToolRefusal::SearchFailed {
                    message: e.to_string(),
                }),
            });
        }
        Ok(Routed::Call(call)) => *call,
    };
    let step = gateway::consent::decide(
        &inner.policy,
        &call,
        &cx.client_capabilities,
        &gateway.config_file,
    );
    let form = match step {
        ConsentStep::Call => return Decided::Call(Box::new(call)),
        ConsentStep::Refuse(r) => return Decided::Reply(refusal(&r)),
        ConsentStep::Ask(form) => form,
    };
    // The retry carries the answer to the form shown, bound to this very call.
    let answer = match (cx.state.as_deref(), cx.input_response(CONSENT_INPUT)) {
        (Some(digest), Some(answer)) if digest == form.digest() => answer.clone(),
        (Some(_), Some(_)) => {
            return Decided::Reply(refusal(&ToolRefusal::AnswerForAnotherCall {
                server: call.server.clone(),
                tool: call.tool.name.clone(),
            }))
        }
        _ => {
            let params = match form.params() {
                Value::Object(p) => p,
                _ => JsonObject::new(),
            };
            return Decided::Reply(Reply::InputRequired {
                inputs: vec![(
                    CONSENT_INPUT.to_owned(),
                    InputRequest {
                        method: "elicitation/create".to_owned(),
                        params,
                    },
                )],
                state: Some(form.digest().to_owned()),
            });
        }
    };
    let applied = form
        .read_answer(&answer)
        .and_then(|a| form.apply(&mut inner.policy, &call, a));
    match applied {
        Ok(scope) => {
            if matches!(scope, ApprovalScope::Always) {
                let approvals = inner.policy.approvals().clone();
                if let Err(e) = inner.state.save_tools(&approvals) {
                    eprintln!("mcpwire host serve: cannot save the approval: {e}");
                }
            }
            Decided::Call(Box::new(call))
        }
        Err(r) => Decided::Reply(refusal(&r)),
    }
}

fn refusal(r: &ToolRefusal) -> Reply {
    Reply::Result(r.to_call_result())
}

impl Application for GatewayApp {
    fn list_tools(&mut self, _: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        Ok(self
            .gateway
            .lock()
            .exposed
            .as_ref()
            .map(|e| e.tools.clone())
            .unwrap_or_default())
    }

    fn tool(&mut self, _: &RequestContext, name: &str) -> Option<Tool> {
        let inner = self.gateway.lock();
        if let Some(t) = inner
            .exposed
            .as_ref()
            .and_then(|e| e.tools.iter().find(|t| t.name == name))
        {
            return Some(t.clone());
        }
        // A tool reached through discovery (not listed) still has its definition.
        inner.catalog.route(name).map(|(server, tool)| {
            gateway::downstream_tool(name, tool, inner.upstreams.trust(server))
        })
    }

    fn call_tool(&mut self, cx: &mut CallContext, name: &str, arguments: &JsonObject) -> Reply {
        let args = Value::Object(arguments.clone());
        // The retry of a call a sign-in held up: its answer, then the call's own result.
        if let Some(state) = cx
            .request
            .state
            .as_deref()
            .filter(|s| Logins::is_login_state(Some(s)))
        {
            let answer = cx.request.input_response(LOGIN_INPUT);
            return match self.gateway.logins.retry(state, answer, name, &args) {
                Retry::Reply(reply) => reply,
                Retry::Declined {
                    server,
                    generation,
                    reply,
                } => {
                    let g = Arc::clone(&self.gateway);
                    let responder = self.responder.clone();
                    let request = cx.request.request;
                    self.spawn(move || {
                        g.logins.wait_given_up(&server, generation);
                        let _ = responder.respond(request, reply);
                    })
                }
                Retry::Wait(token) => {
                    let g = Arc::clone(&self.gateway);
                    let responder = self.responder.clone();
                    let request = cx.request.request;
                    self.spawn(move || {
                        let reply = g.logins.wait(&token, &responder, request);
                        let _ = responder.respond(request, reply);
                    })
                }
            };
        }
        match decide(&self.gateway, &cx.request, name, &args) {
            Decided::Reply(reply) => reply,
            Decided::Call(call) => self.call_upstream(cx, name, args, *call),
            Decided::WaitFor(server) => {
                // A server still connecting (the gateway just started, or it is reconnecting):
                // this call waits for it, on a thread of its own, and no other call does.
                let g = Arc::clone(&self.gateway);
                let responder = self.responder.clone();
                let context = cx.request.clone();
                let name = name.to_owned();
                self.spawn(move || {
                    let _ = g.host.wait_for(&server);
                    g.refresh(Some(&responder));
                    let reply = match decide(&g, &context, &name, &args) {
                        Decided::Reply(reply) => reply,
                        Decided::Call(call) => {
                            let started = start_call(&g, &responder, &context, &name, &args, &call);
                            return finish_call(&g, &responder, &context, &call, started);
                        }
                        // Still not ready within its connect timeout: what routing says now.
                        Decided::WaitFor(_) => match route_call_in(&g.lock(), &name, &args) {
                            Err(RouteError::Refused(r)) => refusal(&r),
                            _ => Reply::tool_error(format!("server {server} is not ready")),
                        },
                    };
                    let _ = responder.respond(context.request, reply);
                })
            }
        }
    }

    fn cancelled(&mut self, request: RequestId) {
        // The downstream client gave up: so does the upstream call (its server is told).
        // Taken out first: the map is not held while the upstream call is cancelled.
        let call = lock_calls(&self.gateway).remove(&request);
        if let Some(call) = call {
            call.cancel();
        }
    }

    fn list_prompts(&mut self, _: &RequestContext) -> Result<Vec<Prompt>, ErrorObject> {
        Ok(self.gateway.lock().prompts.list())
    }

    fn get_prompt(&mut self, cx: &mut CallContext, name: &str, arguments: &JsonObject) -> Reply {
        let routed = {
            let inner = self.gateway.lock();
            inner
                .prompts
                .route(name)
                .map(|(s, p)| (s.clone(), p.name.clone()))
        };
        let Some((server, prompt)) = routed else {
            return Reply::invalid_params(format!("Unknown prompt: {name}"));
        };
        let g = Arc::clone(&self.gateway);
        let responder = self.responder.clone();
        let request = cx.request.request;
        let arguments = arguments.clone();
        self.spawn(move || {
            let reply = match g.host.client(&server) {
                Ok(client) => match client.get_prompt(&prompt, Value::Object(arguments)) {
                    Ok(r) => Reply::Result(gateway::downstream_result(r.raw().clone())),
                    Err(e) => upstream_error(&server, &e),
                },
                Err(e) => Reply::error(code::INTERNAL_ERROR, e.to_string()),
            };
            let _ = responder.respond(request, reply);
        })
    }

    fn list_resources(&mut self, _: &RequestContext) -> Result<Vec<Resource>, ErrorObject> {
        Ok(self.gateway.lock().resources.list_resources())
    }

    fn list_resource_templates(
        &mut self,
        _: &RequestContext,
    ) -> Result<Vec<ResourceTemplate>, ErrorObject> {
        Ok(self.gateway.lock().resources.list_templates())
    }

    fn read_resource(&mut self, cx: &mut CallContext, uri: &str) -> Reply {
        let routed = self.gateway.lock().resources.route(uri);
        let (server, upstream_uri) = match routed {
            Ok(r) => r,
            Err(e) => return Reply::Error(e.to_error_object()),
        };
        let g = Arc::clone(&self.gateway);
        let responder = self.responder.clone();
        let request = cx.request.request;
        self.spawn(move || {
            let reply = match g.host.client(&server) {
                Ok(client) => match client.read_resource(&upstream_uri) {
                    Ok(r) => {
                        let mut value = gateway::downstream_result(r.raw().clone());
                        g.lock().resources.rewrite_read_result(&server, &mut value);
                        Reply::Result(value)
                    }
                    Err(e) => upstream_error(&server, &e),
                },
                Err(e) => Reply::error(code::INTERNAL_ERROR, e.to_string()),
            };
            let _ = responder.respond(request, reply);
        })
    }
}

impl GatewayApp {
    fn spawn(&self, f: impl FnOnce() + Send + 'static) -> Reply {
        match self.workers.run(Box::new(f)) {
            Ok(()) => Reply::Pending,
            Err(e) => Reply::error(
                code::INTERNAL_ERROR,
                format!("cannot start the request: {e}"),
            ),
        }
    }
}

fn route_call_in(inner: &Inner, name: &str, args: &Value) -> Result<Routed, RouteError> {
    gateway::route_call(&inner.catalog, &inner.upstreams, name, Some(args))
}

/// An upstream's error for a prompt or resource: its own error object when it sent one.
fn upstream_error(server: &ServerId, e: &mcpwire::mcp::Error) -> Reply {
    match e.server_error() {
        Some(err) => Reply::Error(err.clone()),
        None => Reply::error(code::INTERNAL_ERROR, format!("server {server}: {e}")),
    }
}

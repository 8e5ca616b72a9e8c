//! The smol driver: hyper 1 over smol's sockets for HTTP (rustls via futures-rustls for
//! `https`), smol tasks, async-process for stdio MCP servers.
//!
//! One future runs the loop and owns the core's tunnel
//! ([`mcpwire_core::tunnel::Tunnel`]): read the clock, feed the tunnel, drain its outputs,
//! perform them, then wait for the next completion or its `poll_timeout`, whichever comes
//! first. Tasks (the poll, each forward and response POST, the stdio pipe tasks) never touch
//! the tunnel: they report on one bounded channel of completions.
//!
//! - The receipt instant of a poll response is read when its head arrives, before its body.
//! - A deadline (`CancelForward`/`CancelPost`) drops that exchange's task, which closes its
//!   connection at once; for stdio the tunnel's binding retires the id and the pipes stay open.
//! - Memory is bounded: the completion channel is bounded (tasks wait when it is full), the
//!   engine bounds forwards and posts in flight, a poll body is read up to 64 MiB,
//!   forward bodies are streamed to the engine (which bounds them), and a stdio binding bounds
//!   its queue and frames.

mod cloudflared;
mod stdio;

use crate::net::hyper_smol as http;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_rustls::rustls::ClientConfig;
use mcpwire_core::http::Request;
use mcpwire_core::tunnel::cloudflare::CompanionState;
use mcpwire_core::tunnel::startup_probe;
use mcpwire_core::tunnel::{AttemptLimit, CommandId, PollId, PostId};
use smol::channel::{self, Receiver, Sender};
use smol::future::FutureExt as _;
use smol::lock::Semaphore;
use smol::{Task, Timer};

use self::http::CONNECT_TIMEOUT;
use self::stdio::StdioChild;
use crate::tunnel::config::{Egress, McpEgress, TunnelConfig, TunnelProxies};
use crate::tunnel::driver_core::stdio::StdioSpawn;
use crate::tunnel::driver_core::{Completion, PollFailure, MAX_POLL_BODY};
use crate::tunnel::driver_core::{
    NotStarted, Prepared, Runtime, Wake, CHUNK, COMPLETIONS, MAX_POST_ANSWER,
};
use crate::tunnel::harpoon_discovery;
use crate::tunnel::log::{Level, Logger};
use crate::tunnel::startup;
use crate::tunnel::stop::Stopper;
use crate::tunnel::Error;
use crate::tunnel::Status;

/// Idle kept-alive connections to a server with a transport of its own.
const OWN_IDLE: usize = 4;

/// Response POSTs on the wire at once (the rest wait for a slot).
const POST_SLOTS: usize = 4;

/// The tasks in flight and what they share.
struct Tasks {
    tx: Sender<Completion>,
    tls: Arc<ClientConfig>,
    /// TLS to MCP servers and Harpoon's targets (the MCP client certificate, if any).
    mcp_tls: Arc<ClientConfig>,
    /// Kept-alive connections to the control plane, reused by the poll and the response
    /// POSTs.
    pool: Arc<http::Pool>,
    /// Kept-alive connections to the MCP servers, reused by the forwards (apart from the
    /// control plane's, so that a connection made with one client certificate never carries
    /// the other's requests).
    mcp_pool: Arc<http::Pool>,
    /// Which proxy each request takes.
    proxies: TunnelProxies,
    /// Which way each MCP request leaves (a Unix socket, a proxy, direct).
    egress: McpEgress,
    /// The MCP servers with a transport of their own (a Unix socket, a client certificate),
    /// by URL: their connections and TLS settings, apart from `mcp_pool`'s.
    own: BTreeMap<String, (Arc<http::Pool>, Arc<ClientConfig>)>,
    post_slots: Arc<Semaphore>,
    poll_task: Option<Task<()>>,
    forward_tasks: BTreeMap<CommandId, Task<()>>,
    post_tasks: BTreeMap<PostId, Task<()>>,
    companion: Option<cloudflared::Managed>,
}

/// Runs the tunnel in this thread (on smol's executor) until the [`Stopper`] handed to
/// `on_start` is used, then lets in-flight commands finish within the grace period and returns.
/// No signal handler is installed: `on_start` is where an embedder wires the stopper to one
/// (the `mcpwire` command does). An `Err` from `on_start` ends the run before the first poll.
pub fn run(
    config: TunnelConfig,
    log: Arc<Logger>,
    status: Arc<Status>,
    on_start: impl FnOnce(Stopper) -> std::io::Result<()>,
) -> Result<(), Error> {
    smol::block_on(run_async(config, log, status, on_start))
}

async fn run_async(
    config: TunnelConfig,
    log: Arc<Logger>,
    status: Arc<Status>,
    on_start: impl FnOnce(Stopper) -> std::io::Result<()>,
) -> Result<(), Error> {
    let now = Instant::now();
    let (tx, rx) = channel::bounded::<Completion>(COMPLETIONS);
    let signal = tx.clone();
    on_start(Stopper::new(move || {
        signal.send_blocking(Completion::Signal).is_ok()
    }))
    .map_err(Error::Start)?;
    let roots = crate::net::tls::load_roots(&config.tls).map_err(|e| Error::Tls {
        reason: e.to_string(),
    })?;
    crate::tunnel::report::trust(&log, &roots);
    let tls = crate::net::tls::client_config(&roots, config.tls.control_plane_identity.as_ref())
        .map_err(|reason| Error::Tls { reason })?;
    let mcp_tls = crate::net::tls::client_config(&roots, config.tls.mcp_identity.as_ref())
        .map_err(|reason| Error::Tls { reason })?;
    let egress = config.mcp_egress();
    let mut own = BTreeMap::new();
    for url in config.own_transports() {
        let tls = match config.tls.mcp_servers.get(&url) {
            Some(id) => crate::net::tls::client_config(&roots, Some(id))
                .map_err(|reason| Error::Tls { reason })?,
            None => Arc::clone(&mcp_tls),
        };
        own.insert(url, (http::Pool::new(OWN_IDLE), tls));
    }
    let mut config = config;
    // The start-up wait comes first, as in the Go client: discovery then finds the server up.
    let mut startup_problem = None;
    if let Some(mut probe) = startup::begin(&config, &log, &status, Instant::now()) {
        loop {
            if let Some(request) = probe.poll_request(Instant::now()) {
                let way = egress.of(&request.url);
                let tls = own.get(&request.url).map_or(&mcp_tls, |(_, tls)| tls);
                let limit = probe.attempt_timeout(Instant::now());
                let sent = http::send_within_on(tls, route(&way), &request, limit).await;
                match sent {
                    Ok(exchange) => probe.handle_response(Instant::now(), exchange.head.status),
                    Err(e) => {
                        let host = crate::net::host_of(&request.url);
                        let cause = format!("{} ({host})", crate::mcp::smol::describe(&e));
                        probe.handle_failed(Instant::now(), probe_failure(&e), &cause);
                    }
                }
                startup::retrying(&log, &probe);
                continue;
            }
            let Some(at) = probe.poll_timeout() else {
                break;
            };
            // A signal while waiting ends the run cleanly.
            match next_completion(&rx, Some(at)).await {
                Wake::Completion(Completion::Signal) | Wake::Closed => {
                    log.log(
                        Level::Info,
                        "signal received during the mcp startup wait: stopping",
                        &[],
                    );
                    return Ok(());
                }
                _ => probe.handle_timeout(Instant::now()),
            }
        }
        startup_problem = startup::end(&log, &probe);
    }
    if let Some((wanted, mut d)) = harpoon_discovery::begin(&config, &log) {
        let discovery_route = config.proxies.route_of(&wanted.server_url);
        // The main server's own client certificate goes to its origin only (the Go client's
        // rule); the other documents' hosts get the route's.
        let server_tls = own.get(&wanted.server_url).map(|(_, tls)| tls);
        while let Some(fetch) = d.next_fetch() {
            let tls = match server_tls {
                Some(t) if crate::net::same_origin(&fetch.request.url, &wanted.server_url) => t,
                _ => &mcp_tls,
            };
            match harpoon_discovery::fetch_smol(tls, &discovery_route, &fetch, wanted.policy).await
            {
                Ok((head, body)) => d.handle_response(&head, &body),
                Err(cause) => d.handle_failed(&cause),
            }
        }
        // Host names are resolved with the system's (blocking) resolver.
        let (found, d) = smol::unblock(move || (harpoon_discovery::found(&wanted, &d), d)).await;
        harpoon_discovery::register(&mut config, &d, found, &log);
    }
    let prepared = Prepared::new(&config, now)?.with_startup_problem(startup_problem);
    let companion = match &config.cloudflared {
        None => None,
        Some(cfg) => {
            let route = cloudflared::ControlRoute {
                tls: &tls,
                proxies: &config.proxies.control_plane,
            };
            match cloudflared::start(cfg, &config.engine, &log, &status, route, &rx, &tx).await? {
                cloudflared::Started::Running(c) => Some(c),
                cloudflared::Started::Interrupted => return Ok(()),
            }
        }
    };
    let companion_state = companion.as_ref().map(|_| CompanionState::Ready);
    // Enough idle connections for every forward in flight, the response POSTs and the poll.
    let max_idle = config.engine.max_concurrent_forwards + 1;
    let tasks = Tasks {
        tx,
        tls,
        mcp_tls,
        pool: http::Pool::new(POST_SLOTS + 1),
        mcp_pool: http::Pool::new(max_idle),
        proxies: config.proxies.clone(),
        egress,
        own,
        post_slots: Arc::new(Semaphore::new(POST_SLOTS)),
        poll_task: None,
        forward_tasks: BTreeMap::new(),
        post_tasks: BTreeMap::new(),
        companion,
    };
    let mut d = prepared.start(tasks, log, status, companion_state, "smol", Instant::now());
    while let ControlFlow::Continue(next) = d.settle() {
        if d.wake(next_completion(&rx, next).await).is_break() {
            break;
        }
    }
    if let Some(c) = d.rt.companion.take() {
        c.stop().await;
    }
    d.finish(|_| {})
}

/// The next completion, or [`Wake::Deadline`] once `deadline` passes.
async fn next_completion(rx: &Receiver<Completion>, deadline: Option<Instant>) -> Wake {
    let recv = async {
        match rx.recv().await {
            Ok(c) => Wake::Completion(c),
            Err(_) => Wake::Closed,
        }
    };
    match deadline {
        Some(at) => {
            recv.or(async {
                Timer::at(at).await;
                Wake::Deadline
            })
            .await
        }
        None => recv.await,
    }
}

impl Runtime for Tasks {
    type Child = StdioChild;

    fn start_poll(
        &mut self,
        id: PollId,
        request: Request,
        timeout: Duration,
    ) -> Result<(), NotStarted> {
        let tx = self.tx.clone();
        let (pool, tls) = (Arc::clone(&self.pool), Arc::clone(&self.tls));
        let proxy = self.proxies.control_plane.for_url(&request.url).cloned();
        self.poll_task = Some(smol::spawn(async move {
            let exchange = async {
                let mut ex =
                    http::send_pooled_via(&pool, &tls, proxy.as_ref(), &request, CONNECT_TIMEOUT)
                        .await?;
                // The receipt instant: the head is here, the body is not read yet.
                let received_at = Instant::now();
                let body = ex.read_to_vec(MAX_POLL_BODY).await?;
                Ok::<_, http::HttpError>((received_at, ex.head, body))
            };
            let result = exchange
                .or(async {
                    Timer::after(timeout).await;
                    Err(http::HttpError::TimedOut)
                })
                .await
                .map_err(|e| {
                    let host = crate::net::host_of(&request.url);
                    PollFailure {
                        cause: format!("{} ({host})", crate::mcp::smol::describe(&e)),
                        timed_out: matches!(e, http::HttpError::TimedOut),
                    }
                });
            let _ = tx.send(Completion::Poll { id, result }).await;
        }));
        Ok(())
    }

    fn cancel_poll(&mut self) {
        // Dropping the task drops the exchange and closes its connection.
        self.poll_task = None;
    }

    fn poll_ended(&mut self) {
        self.poll_task = None;
    }

    fn start_forward(
        &mut self,
        cmd: CommandId,
        request: Request,
        deadline: Option<Instant>,
    ) -> Result<(), NotStarted> {
        let tx = self.tx.clone();
        let (pool, tls) = match self.own.get(&request.url) {
            Some((pool, tls)) => (Arc::clone(pool), Arc::clone(tls)),
            None => (Arc::clone(&self.mcp_pool), Arc::clone(&self.mcp_tls)),
        };
        let way = self.egress.of(&request.url);
        let task = smol::spawn(async move {
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return; // already expired: the engine drops it on its own
            }
            forward_task(&pool, &tls, route(&way), &tx, cmd, &request).await;
        });
        self.forward_tasks.insert(cmd, task);
        Ok(())
    }

    fn cancel_forward(&mut self, cmd: CommandId) {
        // Dropping the task drops the exchange and closes its connection.
        drop(self.forward_tasks.remove(&cmd));
    }

    fn forward_ended(&mut self, cmd: CommandId) {
        self.forward_tasks.remove(&cmd);
    }

    fn start_post(
        &mut self,
        id: PostId,
        cmd: CommandId,
        request: Request,
        limit: AttemptLimit,
    ) -> Result<(), NotStarted> {
        let tx = self.tx.clone();
        let (pool, tls) = (Arc::clone(&self.pool), Arc::clone(&self.tls));
        let proxy = self.proxies.control_plane.for_url(&request.url).cloned();
        let slots = Arc::clone(&self.post_slots);
        let task = smol::spawn(async move {
            let _slot = slots.acquire().await;
            let timeout = limit.remaining(Instant::now());
            let exchange = async {
                let mut ex =
                    http::send_pooled_via(&pool, &tls, proxy.as_ref(), &request, CONNECT_TIMEOUT)
                        .await?;
                let _ = ex.read_to_vec(MAX_POST_ANSWER).await;
                Ok::<_, http::HttpError>(ex.head)
            };
            let result = exchange
                .or(async {
                    Timer::after(timeout).await;
                    Err(http::HttpError::TimedOut)
                })
                .await
                .map_err(|e| {
                    let host = crate::net::host_of(&request.url);
                    let cause = format!("{} ({host})", crate::mcp::smol::describe(&e));
                    (e.maybe_written(), cause)
                });
            let _ = tx.send(Completion::Post { id, cmd, result }).await;
        });
        self.post_tasks.insert(id, task);
        Ok(())
    }

    fn cancel_post(&mut self, id: PostId) {
        drop(self.post_tasks.remove(&id));
    }

    fn post_ended(&mut self, id: PostId) {
        self.post_tasks.remove(&id);
    }

    fn spawn_stdio(
        &mut self,
        spawn: StdioSpawn<'_>,
        log: &Arc<Logger>,
    ) -> std::io::Result<StdioChild> {
        StdioChild::spawn(&spawn, &self.tx, log)
    }

    fn abandon_all(&mut self) {
        self.forward_tasks.clear();
        self.post_tasks.clear();
    }
}

/// One HTTP forward: send, report the head, stream the body.
/// The HTTP layer's route of an egress.
fn route(way: &Egress) -> http::Route<'_> {
    match way {
        Egress::Direct => http::Route::Direct,
        Egress::Proxy(p) => http::Route::Proxy(p),
        Egress::Unix(path) => http::Route::Unix(path),
    }
}

async fn forward_task(
    pool: &Arc<http::Pool>,
    tls: &Arc<ClientConfig>,
    way: http::Route<'_>,
    tx: &Sender<Completion>,
    cmd: CommandId,
    request: &Request,
) {
    let mut ex = match http::send_pooled_on(pool, tls, way, request, CONNECT_TIMEOUT).await {
        Ok(ex) => ex,
        Err(e) => {
            let failure = e.failure();
            let _ = tx.send(Completion::Failed { cmd, failure }).await;
            return;
        }
    };
    let head = ex.head.clone();
    if tx.send(Completion::Head { cmd, head }).await.is_err() {
        return;
    }
    loop {
        match ex.next_chunk().await {
            Ok(Some(frame)) => {
                // Pieces of at most CHUNK bytes: the completion channel then holds at most
                // COMPLETIONS * CHUNK body bytes.
                for piece in frame.chunks(CHUNK) {
                    let chunk = piece.to_vec();
                    if tx.send(Completion::Body { cmd, chunk }).await.is_err() {
                        return;
                    }
                }
            }
            Ok(None) => {
                let _ = tx.send(Completion::End { cmd }).await;
                return;
            }
            Err(e) => {
                let failure = e.body_failure();
                let _ = tx.send(Completion::Failed { cmd, failure }).await;
                return;
            }
        }
    }
}

/// How a start-up probe attempt failed, for the probe's retry rule.
fn probe_failure(e: &http::HttpError) -> startup_probe::AttemptFailure {
    use startup_probe::AttemptFailure;
    match e {
        http::HttpError::Connect(std::io::ErrorKind::ConnectionRefused) => AttemptFailure::Refused,
        http::HttpError::Connect(std::io::ErrorKind::NotFound) => AttemptFailure::NoSocket,
        http::HttpError::Connect(std::io::ErrorKind::TimedOut) | http::HttpError::TimedOut => {
            AttemptFailure::TimedOut
        }
        _ => AttemptFailure::Other,
    }
}

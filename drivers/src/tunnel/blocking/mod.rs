//! The blocking driver: ureq for HTTP, bounded pools of std threads, `std::process` for stdio
//! MCP servers.
//!
//! One thread runs the loop and owns the core's tunnel
//! ([`mcpwire_core::tunnel::Tunnel`]): read the clock, feed the tunnel, drain its outputs,
//! perform them, then sleep until its `poll_timeout` or the next completion. Workers (the poll
//! thread, the forward and post pools, the stdio pipe threads) never touch the tunnel: they
//! report on one bounded channel of completions.
//!
//! - The receipt instant of a poll response is read when its head arrives, before its body.
//! - A deadline (`CancelForward`/`CancelPost`) closes that job's connection at once (its worker's
//!   agent is shut down); for stdio the tunnel's binding retires the id and the pipes stay open.
//! - Memory is bounded: job queues and the completion channel are bounded, a poll body is read
//!   up to 64 MiB, forward bodies are streamed to the engine (which bounds them),
//!   and a stdio binding bounds its queue and frames.

mod cloudflared;
mod stdio;

use crate::net::threads as pool;
use crate::net::ureq as http;

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::ControlFlow;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire_core::http::Request;
use mcpwire_core::tunnel::cloudflare::CompanionState;
use mcpwire_core::tunnel::failure::{transport_failure, TransportStage};
use mcpwire_core::tunnel::startup_probe;
use mcpwire_core::tunnel::{AttemptLimit, CommandId, PollId, PostId};

use self::cloudflared::Companion;
use self::pool::{JobCtl, Pool};
use self::stdio::StdioChild;
use crate::tunnel::config::{Egress, McpEgress, TunnelConfig, TunnelProxies};
use crate::tunnel::driver_core::cloudflared::CHILD_GRACE;
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
use mcpwire_core::net_policy::proxy::ProxyUrl;

/// Response POST workers.
const POST_THREADS: usize = 4;

/// The thread pools and the jobs in flight.
struct Threads {
    tx: SyncSender<Completion>,
    poller: Pool,
    forwards: Pool<McpAgents>,
    posts: Pool,
    poll_job: Option<Arc<JobCtl>>,
    forward_jobs: BTreeMap<CommandId, Arc<JobCtl>>,
    post_jobs: BTreeMap<PostId, Arc<JobCtl>>,
    companion: Option<Companion>,
    log: Arc<Logger>,
    /// Which proxy each request takes.
    proxies: TunnelProxies,
    /// Which way each MCP request leaves (a Unix socket, a proxy, direct).
    egress: McpEgress,
}

/// A forward worker's agents: the MCP route's, and one per server with a transport of its own
/// (a Unix socket, a client certificate), so that no connection is shared between them.
struct McpAgents {
    main: ureq::Agent,
    own: BTreeMap<String, ureq::Agent>,
}

impl pool::Agents for McpAgents {
    fn primary(&self) -> &ureq::Agent {
        &self.main
    }
}

impl McpAgents {
    /// The agent of a request to `url`.
    fn for_url(&self, url: &str) -> &ureq::Agent {
        self.own.get(url).unwrap_or(&self.main)
    }
}

/// Makes [`McpAgents`]: what a server with a transport of its own is reached with.
#[derive(Clone)]
struct McpAgentSpec {
    main: ureq::tls::TlsConfig,
    own: BTreeMap<String, (ureq::tls::TlsConfig, Option<std::path::PathBuf>)>,
}

impl McpAgentSpec {
    fn new(
        config: &TunnelConfig,
        roots: &crate::net::tls::Roots,
        main: ureq::tls::TlsConfig,
    ) -> Result<Self, Error> {
        let mut own = BTreeMap::new();
        for url in config.own_transports() {
            let tls = match config.tls.mcp_servers.get(&url) {
                Some(id) => crate::net::tls::ureq_config(roots, Some(id)),
                None => main.clone(),
            };
            let socket = config.unix_sockets.get(&url).cloned();
            if socket.is_some() && cfg!(not(unix)) {
                return Err(Error::Start(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    format!("{url}: Unix sockets need a Unix system"),
                )));
            }
            own.insert(url, (tls, socket));
        }
        Ok(McpAgentSpec { main, own })
    }

    fn agents(&self) -> McpAgents {
        let own = self
            .own
            .iter()
            .map(|(url, (tls, socket))| {
                let config = http::mcp_config(tls.clone());
                let agent = match socket {
                    #[cfg(unix)]
                    Some(path) => crate::net::unix_socket::agent(config, path.clone()),
                    _ => config.into(),
                };
                (url.clone(), agent)
            })
            .collect();
        McpAgents {
            main: http::mcp_agent(self.main.clone()),
            own,
        }
    }
}

/// The proxy of an egress.
fn proxy_of(way: &Egress) -> Option<&ProxyUrl> {
    match way {
        Egress::Proxy(p) => Some(p),
        Egress::Direct | Egress::Unix(_) => None,
    }
}

/// Runs the tunnel in this thread until the [`Stopper`] handed to `on_start` is used, then
/// lets in-flight commands finish within the grace period and returns. No signal handler is
/// installed: `on_start` is where an embedder wires the stopper to one (the `mcpwire` command
/// does), to a UI, or keeps it for later. An `Err` from `on_start` ends the run before the
/// first poll.
pub fn run(
    config: TunnelConfig,
    log: Arc<Logger>,
    status: Arc<Status>,
    on_start: impl FnOnce(Stopper) -> std::io::Result<()>,
) -> Result<(), Error> {
    let now = Instant::now();
    let (tx, rx) = mpsc::sync_channel::<Completion>(COMPLETIONS);
    let signal = tx.clone();
    on_start(Stopper::new(move || {
        signal.send(Completion::Signal).is_ok()
    }))
    .map_err(Error::Start)?;
    let roots = crate::net::tls::load_roots(&config.tls).map_err(|e| Error::Tls {
        reason: e.to_string(),
    })?;
    crate::tunnel::report::trust(&log, &roots);
    let cp_tls = crate::net::tls::ureq_config(&roots, config.tls.control_plane_identity.as_ref());
    let mcp_tls = crate::net::tls::ureq_config(&roots, config.tls.mcp_identity.as_ref());
    let spec = McpAgentSpec::new(&config, &roots, mcp_tls.clone())?;
    let egress = config.mcp_egress();
    let mut config = config;
    // The start-up wait comes first, as in the Go client: discovery then finds the server up.
    let mut startup_problem = None;
    if let Some(mut probe) = startup::begin(&config, &log, &status, Instant::now()) {
        let agents = spec.agents();
        loop {
            if let Some(request) = probe.poll_request(Instant::now()) {
                let way = egress.of(&request.url);
                let limit = probe.attempt_timeout(Instant::now());
                let agent = agents.for_url(&request.url);
                let sent = http::send_via(agent, proxy_of(&way), &request, Some(limit));
                match sent {
                    Ok(response) => {
                        probe.handle_response(Instant::now(), response.status().as_u16())
                    }
                    Err(e) => probe.handle_failed(
                        Instant::now(),
                        probe_failure(&e),
                        &http::cause(&e, &request.url),
                    ),
                }
                startup::retrying(&log, &probe);
                continue;
            }
            let Some(at) = probe.poll_timeout() else {
                break;
            };
            // A signal while waiting ends the run cleanly.
            match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(Completion::Signal) => {
                    log.log(
                        Level::Info,
                        "signal received during the mcp startup wait: stopping",
                        &[],
                    );
                    return Ok(());
                }
                Ok(_) | Err(RecvTimeoutError::Timeout) => probe.handle_timeout(Instant::now()),
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
        startup_problem = startup::end(&log, &probe);
    }
    if let Some((wanted, mut d)) = harpoon_discovery::begin(&config, &log) {
        let discovery_route = config.proxies.route_of(&wanted.server_url);
        // The main server's own client certificate goes to its origin only (the Go client's
        // rule); the other documents' hosts get the route's.
        let server_tls = spec.own.get(&wanted.server_url).map(|(tls, _)| tls);
        while let Some(fetch) = d.next_fetch() {
            let tls = match server_tls {
                Some(t) if crate::net::same_origin(&fetch.request.url, &wanted.server_url) => t,
                _ => &mcp_tls,
            };
            match harpoon_discovery::fetch_blocking(tls, &discovery_route, &fetch, wanted.policy) {
                Ok((head, body)) => d.handle_response(&head, &body),
                Err(cause) => d.handle_failed(&cause),
            }
        }
        let found = harpoon_discovery::found(&wanted, &d);
        harpoon_discovery::register(&mut config, &d, found, &log);
    }
    let max_in_flight = config.engine.max_in_flight;
    let max_forwards = config.engine.max_concurrent_forwards;
    let prepared = Prepared::new(&config, now)?.with_startup_problem(startup_problem);
    let companion = match &config.cloudflared {
        None => None,
        Some(cfg) => {
            crate::tunnel::driver_core::cloudflared::publish_starting(&status);
            let token = cloudflared::token(
                cfg,
                &config.engine,
                &log,
                cp_tls.clone(),
                &config.proxies.control_plane,
            )
            .map_err(|reason| Error::Cloudflared { reason })?;
            let companion = Companion::start(cfg, &token, &log)
                .map_err(|reason| Error::Cloudflared { reason })?;
            drop(token);
            // Only the signal watcher reports this early: a signal ends the start-up cleanly.
            let interrupted = || matches!(rx.try_recv(), Ok(Completion::Signal));
            match companion.wait_ready(cfg.ready_timeout, &interrupted) {
                Ok(true) => {}
                Ok(false) => {
                    log.log(
                        Level::Info,
                        "signal received while cloudflared was starting: stopping",
                        &[],
                    );
                    companion.stop(CHILD_GRACE);
                    return Ok(());
                }
                Err(e) => {
                    companion.stop(CHILD_GRACE);
                    return Err(Error::Cloudflared { reason: e });
                }
            }
            log.log(Level::Info, "cloudflared ready", &[]);
            companion.watch(tx.clone());
            Some(companion)
        }
    };
    let companion_state = companion.as_ref().map(|_| CompanionState::Ready);
    let control = Arc::new(move || http::control_agent(cp_tls.clone()));
    let mcp = Arc::new(move || spec.agents());
    let threads = Threads {
        tx,
        poller: Pool::new("poll", 1, 2, control.clone()),
        forwards: Pool::new("forward", max_forwards, max_in_flight + 1, mcp),
        posts: Pool::new("post", POST_THREADS, max_in_flight + 1, control),
        poll_job: None,
        forward_jobs: BTreeMap::new(),
        post_jobs: BTreeMap::new(),
        companion,
        log: Arc::clone(&log),
        proxies: config.proxies.clone(),
        egress,
    };
    let mut d = prepared.start(
        threads,
        log,
        status,
        companion_state,
        "blocking",
        Instant::now(),
    );
    while let ControlFlow::Continue(next) = d.settle() {
        let received = match next {
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let wake = match received {
            Ok(c) => Wake::Completion(c),
            Err(RecvTimeoutError::Timeout) => Wake::Deadline,
            Err(RecvTimeoutError::Disconnected) => Wake::Closed,
        };
        if d.wake(wake).is_break() {
            break;
        }
    }
    d.finish(Threads::stop_companion)
}

impl Runtime for Threads {
    type Child = StdioChild;

    fn start_poll(
        &mut self,
        id: PollId,
        request: Request,
        timeout: Duration,
    ) -> Result<(), NotStarted> {
        let ctl = JobCtl::new();
        let tx = self.tx.clone();
        let proxy = self.proxies.control_plane.for_url(&request.url).cloned();
        let work = Box::new(move |agent: &ureq::Agent, ctl: &JobCtl| {
            let result = match http::send_via(agent, proxy.as_ref(), &request, Some(timeout)) {
                Ok(mut response) => {
                    let received_at = Instant::now();
                    let head = http::head_of(&response);
                    response
                        .body_mut()
                        .with_config()
                        .limit(MAX_POLL_BODY)
                        .read_to_vec()
                        .map(|body| (received_at, head, body))
                        .map_err(|e| PollFailure {
                            cause: format!("reading the body: {}", http::cause(&e, &request.url)),
                            timed_out: matches!(e, ureq::Error::Timeout(_)),
                        })
                }
                Err(e) => Err(PollFailure {
                    cause: http::cause(&e, &request.url),
                    timed_out: matches!(e, ureq::Error::Timeout(_)),
                }),
            };
            if !ctl.is_cancelled() {
                let _ = tx.send(Completion::Poll { id, result });
            }
        });
        self.poll_job = Some(Arc::clone(&ctl));
        self.poller.submit(ctl, work).map_err(|_| NotStarted)
    }

    fn cancel_poll(&mut self) {
        if let Some(ctl) = self.poll_job.take() {
            ctl.cancel();
        }
    }

    fn poll_ended(&mut self) {
        self.poll_job = None;
    }

    fn start_forward(
        &mut self,
        cmd: CommandId,
        request: Request,
        deadline: Option<Instant>,
    ) -> Result<(), NotStarted> {
        let tx = self.tx.clone();
        let way = self.egress.of(&request.url);
        let work = Box::new(move |agents: &McpAgents, ctl: &JobCtl| {
            let agent = agents.for_url(&request.url);
            // A cancellation closes the agent the job runs on.
            if ctl.switch_to(agent) {
                forward_job(agent, proxy_of(&way), ctl, &tx, cmd, &request, deadline);
            }
        });
        let ctl = JobCtl::new();
        self.forward_jobs.insert(cmd, Arc::clone(&ctl));
        if self.forwards.submit(ctl, work).is_err() {
            self.forward_jobs.remove(&cmd);
            return Err(NotStarted);
        }
        Ok(())
    }

    fn cancel_forward(&mut self, cmd: CommandId) {
        if let Some(ctl) = self.forward_jobs.remove(&cmd) {
            ctl.cancel();
        }
    }

    fn forward_ended(&mut self, cmd: CommandId) {
        self.forward_jobs.remove(&cmd);
    }

    fn start_post(
        &mut self,
        id: PostId,
        cmd: CommandId,
        request: Request,
        limit: AttemptLimit,
    ) -> Result<(), NotStarted> {
        let tx = self.tx.clone();
        let proxy = self.proxies.control_plane.for_url(&request.url).cloned();
        let work = Box::new(move |agent: &ureq::Agent, ctl: &JobCtl| {
            let timeout = limit.remaining(Instant::now());
            let result = match http::send_via(agent, proxy.as_ref(), &request, Some(timeout)) {
                Ok(mut response) => {
                    let head = http::head_of(&response);
                    let _ = response
                        .body_mut()
                        .with_config()
                        .limit(MAX_POST_ANSWER)
                        .read_to_vec();
                    Ok(head)
                }
                Err(e) => Err((http::maybe_written(&e), http::cause(&e, &request.url))),
            };
            if !ctl.is_cancelled() {
                let _ = tx.send(Completion::Post { id, cmd, result });
            }
        });
        let ctl = JobCtl::new();
        self.post_jobs.insert(id, Arc::clone(&ctl));
        if self.posts.submit(ctl, work).is_err() {
            self.post_jobs.remove(&id);
            return Err(NotStarted);
        }
        Ok(())
    }

    fn cancel_post(&mut self, id: PostId) {
        if let Some(ctl) = self.post_jobs.remove(&id) {
            ctl.cancel();
        }
    }

    fn post_ended(&mut self, id: PostId) {
        self.post_jobs.remove(&id);
    }

    fn spawn_stdio(
        &mut self,
        spawn: StdioSpawn<'_>,
        log: &Arc<Logger>,
    ) -> std::io::Result<StdioChild> {
        StdioChild::spawn(&spawn, &self.tx, log)
    }

    fn abandon_all(&mut self) {
        for ctl in self.forward_jobs.values().chain(self.post_jobs.values()) {
            ctl.cancel();
        }
    }
}

impl Threads {
    fn stop_companion(&mut self) {
        if let Some(c) = self.companion.take() {
            let status = c
                .stop(CHILD_GRACE)
                .map_or_else(|| "unknown".to_owned(), |s| s.to_string());
            self.log
                .log(Level::Info, "cloudflared stopped", &[("status", &status)]);
        }
    }
}

/// One HTTP forward on a worker: send, report the head, stream the body.
fn forward_job(
    agent: &ureq::Agent,
    proxy: Option<&ProxyUrl>,
    ctl: &JobCtl,
    tx: &SyncSender<Completion>,
    cmd: CommandId,
    request: &Request,
    deadline: Option<Instant>,
) {
    let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    if timeout.is_some_and(|t| t.is_zero()) {
        return; // already expired: the engine drops it on its own
    }
    let report = |c: Completion| {
        if !ctl.is_cancelled() {
            let _ = tx.send(c);
        }
    };
    let response = match http::send_via(agent, proxy, request, timeout) {
        Ok(r) => r,
        Err(e) => {
            report(Completion::Failed {
                cmd,
                failure: http::failure_before_head(&e),
            });
            return;
        }
    };
    report(Completion::Head {
        cmd,
        head: http::head_of(&response),
    });
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; CHUNK];
    loop {
        if ctl.is_cancelled() {
            return;
        }
        match reader.read(&mut buf) {
            Ok(0) => {
                report(Completion::End { cmd });
                return;
            }
            Ok(n) => report(Completion::Body {
                cmd,
                chunk: buf.get(..n).unwrap_or_default().to_vec(),
            }),
            Err(e) => {
                report(Completion::Failed {
                    cmd,
                    failure: transport_failure(TransportStage::Body, Some(e.kind())),
                });
                return;
            }
        }
    }
}

/// What `GET /v1/tunnels/{id}` (the startup metadata) answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The control plane's error code, when its body named one.
    pub code: Option<String>,
    /// The tunnel's name, when a `200` named it (at most 200 characters, control characters
    /// removed).
    pub name: Option<String>,
    /// The tunnel's description, likewise.
    pub description: Option<String>,
}

/// Why [`check_control_plane`] got no answer.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The trust roots or the client certificate cannot be used (the caller's configuration).
    #[error(transparent)]
    Tls(#[from] crate::net::tls::TlsError),
    /// The configuration cannot form the request (the caller's).
    #[error(transparent)]
    Config(#[from] mcpwire_core::tunnel::engine::ConfigError),
    /// No answer came (the network, the proxy or the control plane): why, in words, with the
    /// host.
    #[error("{cause}")]
    Unreachable {
        /// Why, e.g. `connection refused (127.0.0.1:9)`.
        cause: String,
    },
}

/// A text field of the metadata as a log may show it.
fn shown(v: &serde_json::Value) -> Option<String> {
    let text: String = v
        .as_str()?
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    (!text.is_empty()).then_some(text)
}

/// `GET /v1/tunnels/{id}` (the startup metadata) as `run` would send it (the same trust,
/// client certificate and proxy, a 10-second limit): the answer, or why none came. For the
/// start-up line of `mcpwire tunnel run` and for `mcpwire tunnel doctor`.
///
/// # Errors
/// [`MetadataError`]: the TLS settings or the configuration cannot be used, or no answer came.
pub fn check_control_plane(config: &TunnelConfig) -> Result<MetadataAnswer, MetadataError> {
    let roots = crate::net::tls::load_roots(&config.tls)?;
    let tls = crate::net::tls::ureq_config(&roots, config.tls.control_plane_identity.as_ref());
    let request = mcpwire_core::tunnel::engine::metadata_request(&config.engine)?;
    let agent = http::control_agent(tls);
    let proxy = config.proxies.control_plane.for_url(&request.url);
    let mut response = http::send_via(&agent, proxy, &request, Some(Duration::from_secs(10)))
        .map_err(|e| MetadataError::Unreachable {
            cause: http::cause(&e, &request.url),
        })?;
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 * 1024)
        .read_to_vec()
        .unwrap_or_default();
    let json = serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default();
    Ok(MetadataAnswer {
        status,
        code: json["error"]["code"].as_str().map(str::to_owned),
        name: shown(&json["name"]),
        description: shown(&json["description"]),
    })
}

/// One start-up probe request (a `ping`) to the HTTP MCP server at `url`, the way the tunnel
/// reaches it: its Unix socket or proxy, its client certificate, the trust roots, the extra
/// headers. The HTTP status it answered (`mcpwire tunnel doctor` reports it for servers the
/// MCP client cannot reach on its own, such as one on a Unix socket).
///
/// # Errors
/// The TLS settings cannot be used, or no answer came (why, with the host).
pub fn check_mcp_server(config: &TunnelConfig, url: &str) -> Result<u16, MetadataError> {
    let roots = crate::net::tls::load_roots(&config.tls)?;
    let main = crate::net::tls::ureq_config(&roots, config.tls.mcp_identity.as_ref());
    let spec = McpAgentSpec::new(config, &roots, main).map_err(|e| MetadataError::Unreachable {
        cause: e.to_string(),
    })?;
    let agents = spec.agents();
    let now = Instant::now();
    let mut probe = startup_probe::StartupProbe::new(
        url,
        &config.discovery_headers(),
        Duration::from_secs(10),
        now,
    );
    let Some(request) = probe.poll_request(now) else {
        return Err(MetadataError::Unreachable {
            cause: "the probe has no request to send".to_owned(),
        });
    };
    let way = config.mcp_egress().of(url);
    let agent = agents.for_url(url);
    match http::send_via(
        agent,
        proxy_of(&way),
        &request,
        Some(Duration::from_secs(10)),
    ) {
        Ok(response) => Ok(response.status().as_u16()),
        Err(e) => Err(MetadataError::Unreachable {
            cause: http::cause(&e, &request.url),
        }),
    }
}

/// How a start-up probe attempt failed, for the probe's retry rule.
fn probe_failure(e: &ureq::Error) -> startup_probe::AttemptFailure {
    use startup_probe::AttemptFailure;
    match e {
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => AttemptFailure::Refused,
            std::io::ErrorKind::NotFound => AttemptFailure::NoSocket,
            std::io::ErrorKind::TimedOut => AttemptFailure::TimedOut,
            _ => AttemptFailure::Other,
        },
        ureq::Error::Timeout(_) => AttemptFailure::TimedOut,
        ureq::Error::ConnectionFailed => AttemptFailure::Refused,
        _ => AttemptFailure::Other,
    }
}

//! The managed `cloudflared` companion on the smol driver: the runtime-token fetch (hyper on
//! smol, [`super::http`]), the child (async-process), its readiness probe, watching it, and
//! stopping it.
//!
//! The decisions are the core's ([`mcpwire_core::tunnel::cloudflare`]): what to request, what
//! an answer means, how long to wait before another attempt, the child's argv and environment,
//! what a probe answer means and how the companion's state moves. This module performs them,
//! as the blocking driver's `cloudflared` module does with threads:
//!
//! - The token is held in memory only (never disk, argv or logs: it joins the logger's
//!   redaction list the moment it is known) and reaches the child only in its environment.
//! - Readiness comes from cloudflared's `GET /ready` on `--metrics 127.0.0.1:PORT` (a loopback
//!   port reserved just before the start).
//! - A watcher task probes readiness and notices the child's exit; the loop reflects both in
//!   `/readyz`, and an unexpected exit stops the client (the blocking driver's policy).
//! - On exit the child gets SIGTERM, then SIGKILL after [`CHILD_GRACE`]. The child is reaped
//!   only through `try_status` under the one lock that also guards signalling it (async-process
//!   reaps a live child only when asked), so a reused pid is never signalled.
//! - A signal during start-up (the fetch, its retries, or the readiness wait) ends it cleanly.

use std::net::SocketAddr;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures_rustls::rustls::ClientConfig;
use mcpwire_core::backoff::DEFAULT_RETRY_AFTER_CAP;
use mcpwire_core::http::{Headers, Method, Request};
use mcpwire_core::net_policy::proxy::ProxyRoute;
use mcpwire_core::tunnel::cloudflare::{
    self, parse_runtime_response, ready_from_probe, RuntimeError, READY_PATH,
};
use mcpwire_core::tunnel::engine::{Config, Secret};
use smol::channel::{Receiver, Sender};
use smol::future::FutureExt as _;
use smol::io::AsyncRead;
use smol::process::{Child, Command, Stdio};
use smol::{Task, Timer};

use super::stdio::for_each_line;
use super::{http, Completion};
use crate::tunnel::config::Cloudflared;
use crate::tunnel::driver_core::cloudflared::{
    companion_command, publish_starting, Attempt, TokenFetch, TokenStart, CHILD_GRACE,
    EXIT_CHECK_EVERY, FETCH_TIMEOUT, MAX_OUTPUT_LINE, MAX_RUNTIME_BODY, PROBE_EVERY, PROBE_TIMEOUT,
    START_PROBE_EVERY,
};
use crate::tunnel::driver_core::stdio::log_output_line;
use crate::tunnel::log::{Level, Logger};
use crate::tunnel::Error;
use crate::tunnel::Status;

/// The most bytes of a probe answer read.
const MAX_PROBE_BODY: u64 = 64 * 1024;
/// How long reaping may take after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// How the start-up ended.
pub enum Started {
    /// cloudflared runs and said ready; its watcher reports on the loop's channel.
    Running(Managed),
    /// A signal arrived first; nothing is left running.
    Interrupted,
}

/// Starts the companion for `cfg`: the token (static or fetched), the child, the wait for its
/// readiness (`/readyz` says "starting" meanwhile), then its watcher. A completion on `signals`
/// (before the loop starts only the signal watcher sends there) ends the start-up cleanly.
/// How the runtime fetch reaches the control plane: its TLS settings and its proxy route.
#[derive(Clone, Copy)]
pub struct ControlRoute<'a> {
    /// The control plane's TLS settings (its client certificate, if any).
    pub tls: &'a Arc<ClientConfig>,
    /// The control plane's proxy route.
    pub proxies: &'a ProxyRoute,
}

pub async fn start(
    cfg: &Cloudflared,
    engine: &Config,
    log: &Arc<Logger>,
    status: &Status,
    route: ControlRoute<'_>,
    signals: &Receiver<Completion>,
    tx: &Sender<Completion>,
) -> Result<Started, Error> {
    publish_starting(status);
    let token = match async { Some(token(cfg, engine, log, route.tls, route.proxies).await) }
        .or(signalled(signals))
        .await
    {
        Some(token) => token.map_err(|reason| Error::Cloudflared { reason })?,
        None => {
            log.log(
                Level::Info,
                "signal received while fetching the cloudflared token: stopping",
                &[],
            );
            return Ok(Started::Interrupted);
        }
    };
    let companion =
        Companion::start(cfg, &token, log).map_err(|reason| Error::Cloudflared { reason })?;
    drop(token);
    let ready = async { Some(companion.wait_ready(route.tls, cfg.ready_timeout).await) }
        .or(signalled(signals))
        .await;
    match ready {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            companion.stop().await;
            return Err(Error::Cloudflared { reason: e });
        }
        None => {
            log.log(
                Level::Info,
                "signal received while cloudflared was starting: stopping",
                &[],
            );
            companion.stop().await;
            return Ok(Started::Interrupted);
        }
    }
    log.log(Level::Info, "cloudflared ready", &[]);
    let watcher = companion.watch(Arc::clone(route.tls), tx.clone());
    Ok(Started::Running(Managed {
        companion,
        watcher: Some(watcher),
        log: Arc::clone(log),
    }))
}

/// `None` once a completion (a signal) arrives on `signals`.
async fn signalled<T>(signals: &Receiver<Completion>) -> Option<T> {
    let _ = signals.recv().await;
    None
}

/// The token for the companion: the static one, or one fetched from the control plane (see
/// [`TokenFetch`]). The token is added to the log's redaction list before this returns.
async fn token(
    cfg: &Cloudflared,
    engine: &Config,
    log: &Logger,
    tls: &Arc<ClientConfig>,
    proxies: &ProxyRoute,
) -> Result<Secret, String> {
    let mut fetch = match TokenFetch::begin(cfg, engine, log)? {
        TokenStart::Ready(token) => return Ok(token),
        TokenStart::Fetch(fetch) => fetch,
    };
    loop {
        match fetch.attempted(fetch_once(tls, proxies, fetch.request()).await)? {
            Attempt::Token(token) => return Ok(token),
            Attempt::RetryIn(wait) => {
                Timer::after(wait).await;
            }
        }
    }
}

/// One runtime fetch, bounded by [`FETCH_TIMEOUT`] and [`MAX_RUNTIME_BODY`].
async fn fetch_once(
    tls: &Arc<ClientConfig>,
    proxies: &ProxyRoute,
    request: &Request,
) -> Result<cloudflare::ManagedRuntime, RuntimeError> {
    let exchange = async {
        let proxy = proxies.for_url(&request.url);
        let mut ex = http::send_within_via(tls, proxy, request, http::CONNECT_TIMEOUT).await?;
        let body = ex.read_to_vec(MAX_RUNTIME_BODY).await?;
        Ok::<_, http::HttpError>((ex.head, body))
    };
    let (head, body) = exchange
        .or(async {
            Timer::after(FETCH_TIMEOUT).await;
            Err(http::HttpError::TimedOut)
        })
        .await
        .map_err(|e| RuntimeError::Transport {
            // The error's kind only: never the URL's query or a header.
            detail: format!("{e:?}"),
        })?;
    parse_runtime_response(&head, &body, SystemTime::now(), DEFAULT_RETRY_AFTER_CAP)
}

/// A running companion and its watcher (the loop keeps its state).
pub struct Managed {
    companion: Companion,
    watcher: Option<Task<()>>,
    log: Arc<Logger>,
}

impl Managed {
    /// Stops the watcher, then the child (SIGTERM, SIGKILL after [`CHILD_GRACE`]), and logs
    /// how it ended.
    pub async fn stop(mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.cancel().await;
        }
        let status = self
            .companion
            .stop()
            .await
            .map_or_else(|| "unknown".to_owned(), |s| s.to_string());
        self.log
            .log(Level::Info, "cloudflared stopped", &[("status", &status)]);
    }
}

/// The child and where its readiness is asked.
struct Companion {
    child: Arc<Mutex<Child>>,
    metrics: SocketAddr,
}

fn try_status(child: &Mutex<Child>) -> Option<ExitStatus> {
    child
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .try_status()
        .ok()
        .flatten()
}

impl Companion {
    /// Starts `cfg.path tunnel --no-autoupdate --metrics 127.0.0.1:PORT run` with the token in
    /// its environment only, its output copied to the log (redacted).
    fn start(cfg: &Cloudflared, token: &Secret, log: &Arc<Logger>) -> Result<Self, String> {
        let (cmd, metrics) = companion_command(cfg, token)?;
        let mut cmd = Command::from(cmd);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Whatever path leaves it behind, the child does not outlive its handle.
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start cloudflared {:?}: {e}", cfg.path))?;
        if let Some(out) = child.stdout.take() {
            let log = Arc::clone(log);
            smol::spawn(async move { output_loop(out, &log, "stdout").await }).detach();
        }
        if let Some(err) = child.stderr.take() {
            let log = Arc::clone(log);
            smol::spawn(async move { output_loop(err, &log, "stderr").await }).detach();
        }
        log.log(
            Level::Info,
            "cloudflared started",
            &[("pid", &child.id()), ("metrics_addr", &metrics)],
        );
        Ok(Companion {
            child: Arc::new(Mutex::new(child)),
            metrics,
        })
    }

    /// Waits until cloudflared's `/ready` says ready, or fails when it exits or `timeout`
    /// passes.
    async fn wait_ready(&self, tls: &Arc<ClientConfig>, timeout: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Some(status) = try_status(&self.child) {
                return Err(format!("cloudflared exited before it was ready ({status})"));
            }
            if probe(tls, self.metrics).await {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(format!(
                    "cloudflared did not report ready within {}ms (GET http://{}{READY_PATH})",
                    timeout.as_millis(),
                    self.metrics
                ));
            }
            Timer::after(START_PROBE_EVERY).await;
        }
    }

    /// A task that reports each readiness change and the child's exit on `tx`; it ends after
    /// the exit (or when cancelled by [`Managed::stop`]).
    fn watch(&self, tls: Arc<ClientConfig>, tx: Sender<Completion>) -> Task<()> {
        let child = Arc::clone(&self.child);
        let metrics = self.metrics;
        smol::spawn(async move {
            let mut last = true; // wait_ready saw it ready
            let mut next_probe = Instant::now() + PROBE_EVERY;
            loop {
                if let Some(status) = try_status(&child) {
                    let status = status.to_string();
                    let _ = tx.send(Completion::CompanionExited { status }).await;
                    return;
                }
                if Instant::now() >= next_probe {
                    let ready = probe(&tls, metrics).await;
                    if ready != last {
                        last = ready;
                        if tx.send(Completion::CompanionProbe { ready }).await.is_err() {
                            return;
                        }
                    }
                    next_probe = Instant::now() + PROBE_EVERY;
                }
                Timer::after(EXIT_CHECK_EVERY).await;
            }
        })
    }

    /// Stops the child: SIGTERM, then SIGKILL after [`CHILD_GRACE`]; reaps it. Returns how it
    /// ended, when known.
    async fn stop(&self) -> Option<ExitStatus> {
        {
            let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
            if let Ok(Some(status)) = child.try_status() {
                return Some(status);
            }
            // Not reaped (checked under this lock): the pid is still this child's.
            terminate(&child);
        }
        let start = Instant::now();
        while start.elapsed() < CHILD_GRACE {
            if let Some(status) = try_status(&self.child) {
                return Some(status);
            }
            Timer::after(Duration::from_millis(20)).await;
        }
        let status = {
            let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = child.kill();
            child.status()
        };
        status
            .or(async {
                Timer::after(KILL_WAIT).await;
                Err(std::io::ErrorKind::TimedOut.into())
            })
            .await
            .ok()
    }
}

#[cfg(unix)]
fn terminate(child: &Child) {
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

#[cfg(not(unix))]
fn terminate(_child: &Child) {}

/// One `GET /ready` on cloudflared's metrics listener, bounded by [`PROBE_TIMEOUT`]; false on
/// any failure.
async fn probe(tls: &Arc<ClientConfig>, addr: SocketAddr) -> bool {
    let request = Request {
        method: Method::Get,
        url: format!("http://{addr}{READY_PATH}"),
        headers: Headers::new(),
        body: Vec::new(),
    };
    let exchange = async {
        let mut ex = http::send(tls, &request).await.ok()?;
        let body = ex.read_to_vec(MAX_PROBE_BODY).await.ok()?;
        Some(ready_from_probe(ex.head.status, &body))
    };
    exchange
        .or(async {
            Timer::after(PROBE_TIMEOUT).await;
            None
        })
        .await
        .unwrap_or(false)
}

/// Copies the child's output to the log line by line (redacted by the logger); an over-long
/// line is cut at [`MAX_OUTPUT_LINE`] bytes and its rest dropped.
async fn output_loop(pipe: impl AsyncRead + Unpin, log: &Logger, stream: &str) {
    for_each_line(pipe, MAX_OUTPUT_LINE, |line| {
        log_output_line(log, "cloudflared output", ("stream", stream), line);
    })
    .await;
}

//! The managed `cloudflared` companion on the blocking driver: the runtime-token fetch, the
//! child process, its readiness probe, and stopping it.
//!
//! The decisions (what to request, what an answer means, the child's argv and environment,
//! what a probe answer means, how readiness combines) are the core's
//! ([`mcpwire_core::tunnel::cloudflare`]); this module only performs them.
//!
//! - The token is held in memory only: never written to disk, argv or logs (it is added to the
//!   logger's redaction list the moment it is known).
//! - Readiness comes from cloudflared's own `GET /ready` on `--metrics 127.0.0.1:PORT` (a port
//!   reserved on loopback just before the start), not from its log lines: the endpoint is
//!   cloudflared's documented readiness contract, while log wording changes between releases.
//! - On exit the child gets SIGTERM, then SIGKILL after
//!   [`CHILD_GRACE`](crate::tunnel::driver_core::cloudflared::CHILD_GRACE). The child is
//!   only ever signalled while not yet reaped (both happen under one lock), so a reused pid is
//!   never hit.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::backoff::DEFAULT_RETRY_AFTER_CAP;
use mcpwire_core::http::Request;
use mcpwire_core::tunnel::cloudflare::{
    parse_runtime_response, ready_from_probe, ManagedRuntime, RuntimeError, READY_PATH,
};
use mcpwire_core::tunnel::engine::{Config, Secret};

use super::stdio::for_each_line;
use super::{http, Completion};
use crate::tunnel::config::Cloudflared;
use crate::tunnel::driver_core::cloudflared::{
    companion_command, Attempt, TokenFetch, TokenStart, EXIT_CHECK_EVERY, FETCH_TIMEOUT,
    MAX_OUTPUT_LINE, MAX_RUNTIME_BODY, PROBE_EVERY, PROBE_TIMEOUT, START_PROBE_EVERY,
};
use crate::tunnel::driver_core::stdio::log_output_line;
use crate::tunnel::log::{Level, Logger};

/// The token for the companion: the static one, or one fetched from the control plane (see
/// [`TokenFetch`]). The token is added to the log's redaction list before this returns.
pub fn token(
    cfg: &Cloudflared,
    engine: &Config,
    log: &Logger,
    tls: ureq::tls::TlsConfig,
    proxies: &mcpwire_core::net_policy::proxy::ProxyRoute,
) -> Result<Secret, String> {
    let mut fetch = match TokenFetch::begin(cfg, engine, log)? {
        TokenStart::Ready(token) => return Ok(token),
        TokenStart::Fetch(fetch) => fetch,
    };
    let agent = http::control_agent(tls);
    loop {
        let proxy = proxies.for_url(&fetch.request().url).cloned();
        match fetch.attempted(fetch_once(&agent, proxy.as_ref(), fetch.request()))? {
            Attempt::Token(token) => return Ok(token),
            Attempt::RetryIn(wait) => thread::sleep(wait),
        }
    }
}

/// One runtime fetch, bounded by [`FETCH_TIMEOUT`] and [`MAX_RUNTIME_BODY`].
fn fetch_once(
    agent: &ureq::Agent,
    proxy: Option<&mcpwire_core::net_policy::proxy::ProxyUrl>,
    request: &Request,
) -> Result<ManagedRuntime, RuntimeError> {
    let mut response = http::send_via(agent, proxy, request, Some(FETCH_TIMEOUT)).map_err(|e| {
        RuntimeError::Transport {
            detail: e.to_string(),
        }
    })?;
    let head = http::head_of(&response);
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_RUNTIME_BODY)
        .read_to_vec()
        .map_err(|e| RuntimeError::Transport {
            detail: format!("reading the body: {e}"),
        })?;
    parse_runtime_response(&head, &body, SystemTime::now(), DEFAULT_RETRY_AFTER_CAP)
}

/// A running companion.
pub struct Companion {
    child: Arc<Mutex<Child>>,
    metrics: SocketAddr,
    stopping: Arc<AtomicBool>,
}

impl Companion {
    /// Starts `cfg.path tunnel --no-autoupdate --metrics 127.0.0.1:PORT run` with the token
    /// in its environment only, its output copied to the log (redacted).
    pub fn start(cfg: &Cloudflared, token: &Secret, log: &Arc<Logger>) -> Result<Self, String> {
        let (mut cmd, metrics) = companion_command(cfg, token)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start cloudflared {:?}: {e}", cfg.path))?;
        for (stream, pipe) in [
            (
                "stdout",
                child
                    .stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
            (
                "stderr",
                child
                    .stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
        ] {
            if let Some(pipe) = pipe {
                let log = Arc::clone(log);
                let _ = thread::Builder::new()
                    .name(format!("cloudflared-{stream}"))
                    .spawn(move || output_loop(pipe, &log, stream));
            }
        }
        log.log(
            Level::Info,
            "cloudflared started",
            &[("pid", &child.id()), ("metrics_addr", &metrics)],
        );
        Ok(Companion {
            child: Arc::new(Mutex::new(child)),
            metrics,
            stopping: Arc::new(AtomicBool::new(false)),
        })
    }

    fn try_wait(child: &Mutex<Child>) -> Option<ExitStatus> {
        child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_wait()
            .ok()
            .flatten()
    }

    /// Waits until cloudflared's `/ready` says ready (`Ok(true)`), it exits or `timeout` passes
    /// (`Err`), or `interrupted` says a signal arrived (`Ok(false)`).
    pub fn wait_ready(
        &self,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<bool, String> {
        let start = Instant::now();
        loop {
            if interrupted() {
                return Ok(false);
            }
            if let Some(status) = Self::try_wait(&self.child) {
                return Err(format!("cloudflared exited before it was ready ({status})"));
            }
            if probe(self.metrics) {
                return Ok(true);
            }
            if start.elapsed() >= timeout {
                return Err(format!(
                    "cloudflared did not report ready within {}ms (GET http://{}{READY_PATH})",
                    timeout.as_millis(),
                    self.metrics
                ));
            }
            thread::sleep(START_PROBE_EVERY);
        }
    }

    /// Watches the child from a thread: reports each readiness change and its exit.
    pub fn watch(&self, tx: SyncSender<Completion>) {
        let child = Arc::clone(&self.child);
        let stopping = Arc::clone(&self.stopping);
        let metrics = self.metrics;
        let _ = thread::Builder::new()
            .name("cloudflared-watch".into())
            .spawn(move || {
                let mut last = true; // wait_ready saw it ready
                let mut next_probe = Instant::now() + PROBE_EVERY;
                while !stopping.load(Ordering::SeqCst) {
                    if let Some(status) = Self::try_wait(&child) {
                        if !stopping.load(Ordering::SeqCst) {
                            let _ = tx.send(Completion::CompanionExited {
                                status: status.to_string(),
                            });
                        }
                        return;
                    }
                    if Instant::now() >= next_probe {
                        let ready = probe(metrics);
                        if ready != last && !stopping.load(Ordering::SeqCst) {
                            last = ready;
                            if tx.send(Completion::CompanionProbe { ready }).is_err() {
                                return;
                            }
                        }
                        next_probe = Instant::now() + PROBE_EVERY;
                    }
                    thread::sleep(EXIT_CHECK_EVERY);
                }
            });
    }

    /// Stops the child: SIGTERM, then SIGKILL after `grace`; reaps it. Returns how it ended.
    pub fn stop(&self, grace: Duration) -> Option<ExitStatus> {
        self.stopping.store(true, Ordering::SeqCst);
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        terminate(&child);
        let start = Instant::now();
        while start.elapsed() < grace {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        child.wait().ok()
    }
}

#[cfg(unix)]
fn terminate(child: &Child) {
    let pid = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
}

#[cfg(not(unix))]
fn terminate(_child: &Child) {}

/// One `GET /ready` on cloudflared's metrics listener; false on any failure.
fn probe(addr: SocketAddr) -> bool {
    let Ok(mut conn) = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(PROBE_TIMEOUT));
    let _ = conn.set_write_timeout(Some(PROBE_TIMEOUT));
    let request = format!("GET {READY_PATH} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if conn.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut raw = Vec::new();
    if (&mut conn).take(64 * 1024).read_to_end(&mut raw).is_err() && raw.is_empty() {
        return false;
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(&raw) {
        Ok(httparse::Status::Complete(len)) => {
            let status = response.code.unwrap_or(0);
            ready_from_probe(status, raw.get(len..).unwrap_or_default())
        }
        _ => false,
    }
}

fn output_loop(pipe: Box<dyn Read + Send>, log: &Logger, stream: &str) {
    for_each_line(pipe, MAX_OUTPUT_LINE, |line| {
        log_output_line(log, "cloudflared output", ("stream", stream), line);
    });
}

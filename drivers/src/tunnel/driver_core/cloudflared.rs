//! The managed cloudflared token as both drivers get it: the static one, or a fetch from the
//! control plane retried as the core says ([`fetch_retry_in`]). The runtime performs each
//! attempt and each wait; this decides, logs, and registers the token with the log's
//! redaction list the moment it is known. No cache: fetched once per start-up, kept in memory
//! only.

use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::Duration;

use mcpwire_core::backoff::Jitter;
use mcpwire_core::http::Request;
use mcpwire_core::tunnel::cloudflare::{
    self, companion_args, companion_env, fetch_retry_in, keep_from_child_env, ManagedRuntime,
    RuntimeError,
};
use mcpwire_core::tunnel::engine::{Config, Secret};

use crate::tunnel::config::{Cloudflared, CloudflaredToken};
use crate::tunnel::log::{Level, Logger};
use crate::tunnel::status::{Metrics, Status};

/// How long the child may take to stop after SIGTERM before it is killed.
pub const CHILD_GRACE: Duration = Duration::from_secs(5);
/// How long one runtime fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of a runtime response read.
pub const MAX_RUNTIME_BODY: u64 = 64 * 1024;
/// How often readiness is probed while starting.
pub const START_PROBE_EVERY: Duration = Duration::from_millis(200);
/// How often readiness is probed once running.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How often the watcher checks whether the child exited.
pub const EXIT_CHECK_EVERY: Duration = Duration::from_millis(100);
/// How long one probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest cloudflared output line logged (the rest of the line is dropped).
pub const MAX_OUTPUT_LINE: usize = 4096;

/// `/readyz` says the companion is starting until the loop publishes its own metrics.
pub fn publish_starting(status: &Status) {
    status.publish(Metrics {
        not_ready: cloudflare::CompanionState::Starting
            .not_ready_reason()
            .map(str::to_owned),
        ..Metrics::default()
    });
}

/// cloudflared's command, `cfg.path tunnel --no-autoupdate --metrics 127.0.0.1:PORT run` (a
/// loopback port free a moment ago), with the token in its environment only and the variables
/// the core keeps from a child removed; and the metrics address. The runtime sets its stdio.
pub fn companion_command(
    cfg: &Cloudflared,
    token: &Secret,
) -> Result<(Command, SocketAddr), String> {
    let metrics = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("cannot reserve a loopback port for cloudflared: {e}"))?;
    let mut cmd = Command::new(&cfg.path);
    cmd.args(companion_args(&metrics.to_string()));
    let extra: Vec<&str> = cfg.secret_vars.iter().map(String::as_str).collect();
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(|n| keep_from_child_env(n, &extra))
        {
            cmd.env_remove(&name);
        }
    }
    cmd.envs(companion_env(token));
    Ok((cmd, metrics))
}

/// Where getting the token starts.
pub enum TokenStart<'a> {
    /// The static token (already registered for redaction).
    Ready(Secret),
    /// Fetch it: send [`TokenFetch::request`], report with [`TokenFetch::attempted`].
    Fetch(TokenFetch<'a>),
}

/// What to do after an attempt.
pub enum Attempt {
    /// The token (already registered for redaction).
    Token(Secret),
    /// Wait this long, then send the request again.
    RetryIn(Duration),
}

/// A runtime token fetch in progress.
pub struct TokenFetch<'a> {
    request: Request,
    jitter: Jitter,
    attempt: u32,
    log: &'a Logger,
}

impl<'a> TokenFetch<'a> {
    /// The static token, or the fetch to perform for `engine`'s tunnel.
    pub fn begin(
        cfg: &Cloudflared,
        engine: &Config,
        log: &'a Logger,
    ) -> Result<TokenStart<'a>, String> {
        if let CloudflaredToken::Static(token) = &cfg.token {
            log.add_secret(token.expose());
            log.log(
                Level::Info,
                "cloudflared token: static (managed runtime fetch skipped)",
                &[],
            );
            return Ok(TokenStart::Ready(token.clone()));
        }
        let request = cloudflare::runtime_request(engine).map_err(|e| e.to_string())?;
        Ok(TokenStart::Fetch(TokenFetch {
            request,
            jitter: Jitter::new(crate::random_seed()),
            attempt: 1,
            log,
        }))
    }

    /// The request of every attempt.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// An attempt's outcome: the token, a wait before the next attempt, or the final error.
    pub fn attempted(
        &mut self,
        result: Result<ManagedRuntime, RuntimeError>,
    ) -> Result<Attempt, String> {
        match result {
            Ok(runtime) => {
                self.log.add_secret(runtime.token.expose());
                self.log.log(
                    Level::Info,
                    "cloudflared token: fetched from the control plane",
                    &[
                        ("cloudflare_tunnel_id", &runtime.tunnel.tunnel_id),
                        ("cloudflare_tunnel_name", &runtime.tunnel.name),
                    ],
                );
                Ok(Attempt::Token(runtime.token))
            }
            Err(e) => match fetch_retry_in(&e, self.attempt, self.jitter.next_u64()) {
                Some(wait) => {
                    self.log.log(
                        Level::Warn,
                        "managed Cloudflare runtime fetch failed; retrying",
                        &[
                            ("error", &e),
                            ("attempt", &self.attempt),
                            ("retry_in_ms", &wait.as_millis()),
                        ],
                    );
                    self.attempt += 1;
                    Ok(Attempt::RetryIn(wait))
                }
                None => Err(e.to_string()),
            },
        }
    }
}

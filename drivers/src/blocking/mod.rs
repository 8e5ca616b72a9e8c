//! The blocking driver: ureq for HTTP, bounded pools of std threads, `std::process` for stdio
//! MCP servers.
//!
//! One thread runs the loop and owns the [`Engine`] and the stdio bindings: read the clock,
//! feed the engine, drain its outputs, perform them, then sleep until [`Engine::poll_timeout`]
//! or the next completion. Workers (the poll thread, the forward and post pools, the stdio pipe
//! threads) never touch the engine: they report on one bounded channel of [`Completion`]s.
//!
//! - The receipt instant of a poll response is read when its head arrives, before its body.
//! - A deadline (`CancelForward`/`CancelPost`) closes that job's connection at once (its worker's
//!   agent is shut down); for stdio the binding retires the id and the pipes stay open.
//! - Memory is bounded: job queues and the completion channel are bounded, a poll body is read
//!   up to [`MAX_POLL_BODY`], forward bodies are streamed to the engine (which bounds them),
//!   and a stdio binding bounds its queue and frames.

mod cloudflared;
pub(crate) mod http;
pub(crate) mod pool;
mod stdio;

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::http::{Method, Request, ResponseHead};
use mcpwire_core::tunnel::cloudflare::{after_probe, CompanionState};
use mcpwire_core::tunnel::engine::{CommandId, Forward, ForwardKind, Output, PollId, PostId};
use mcpwire_core::tunnel::failure::{
    transport_failure, FailureSource, TransportStage, TunnelFailure,
};
use mcpwire_core::tunnel::stdio::{session_termination_failure, StdioOutput};
use mcpwire_core::tunnel::Engine;

use self::cloudflared::Companion;
use self::pool::{JobCtl, Pool};
use self::stdio::StdioChannel;
use crate::tunnel_run::config::{RunConfig, TargetKind};
use crate::tunnel_run::health::{Metrics, Status};
use crate::tunnel_run::log::{Level, Logger};
use crate::tunnel_run::report::Report;
use crate::tunnel_run::stop::watch_signals;
pub use crate::tunnel_run::stop::Stopper;

/// The largest poll response body read.
pub const MAX_POLL_BODY: u64 = 64 * 1024 * 1024;
/// Extra time a poll may take beyond the requested long-poll wait.
const POLL_GUARD: Duration = Duration::from_secs(10);
/// The longest a response POST attempt may take (less when the command's deadline is nearer).
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of a response POST's answer read (the answer is not used).
const MAX_POST_ANSWER: u64 = 64 * 1024;
/// The size of one forward body chunk handed to the engine.
const CHUNK: usize = 16 * 1024;
/// Completions waiting for the loop, at most (workers wait when it is full).
const COMPLETIONS: usize = 1024;
/// Response POST workers.
const POST_THREADS: usize = 4;

/// What a worker reports to the loop.
pub enum Completion {
    /// A poll answered (`Ok`) or failed.
    Poll {
        /// The poll.
        id: PollId,
        /// The instant its head arrived, the head and the body.
        result: Result<(Instant, ResponseHead, Vec<u8>), ()>,
    },
    /// A forward's response head.
    Head {
        /// The command.
        cmd: CommandId,
        /// The head.
        head: ResponseHead,
    },
    /// A piece of a forward's response body.
    Body {
        /// The command.
        cmd: CommandId,
        /// The bytes.
        chunk: Vec<u8>,
    },
    /// A forward's response body ended.
    End {
        /// The command.
        cmd: CommandId,
    },
    /// A forward failed.
    Failed {
        /// The command.
        cmd: CommandId,
        /// Why.
        failure: TunnelFailure,
    },
    /// A response POST answered (`Ok`) or failed (`Err(written)`).
    Post {
        /// The attempt.
        id: PostId,
        /// Its command.
        cmd: CommandId,
        /// The answer's head, or whether the request may have been written.
        result: Result<ResponseHead, bool>,
    },
    /// Bytes from a stdio child's stdout.
    StdioOut {
        /// The channel's index.
        chan: usize,
        /// The child's generation.
        generation: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// A stdio child's stdout closed.
    StdioExit {
        /// The channel's index.
        chan: usize,
        /// The child's generation.
        generation: u64,
    },
    /// The cloudflared companion's readiness changed.
    CompanionProbe {
        /// Its `/ready` said ready.
        ready: bool,
    },
    /// The cloudflared companion exited on its own.
    CompanionExited {
        /// How it ended.
        status: String,
    },
    /// SIGINT or SIGTERM.
    Signal,
}

/// Where a channel's forwards go.
#[derive(Clone)]
enum Route {
    Http(String),
    Stdio(usize),
}

struct Driver {
    engine: Engine,
    log: Arc<Logger>,
    status: Arc<Status>,
    tx: SyncSender<Completion>,
    routes: BTreeMap<String, Route>,
    stdio: Vec<StdioChannel>,
    poller: Pool,
    forwards: Pool,
    posts: Pool,
    poll_job: Option<Arc<JobCtl>>,
    last_poll: Option<PollId>,
    forward_jobs: BTreeMap<CommandId, Arc<JobCtl>>,
    post_jobs: BTreeMap<PostId, Arc<JobCtl>>,
    report: Report,
    poll_timeout: Duration,
    stopping: Option<Instant>,
    companion: Option<Companion>,
    companion_state: Option<CompanionState>,
    /// Why the client stops with an error (the companion died), if it does.
    fatal: Option<String>,
}

/// Runs the tunnel until SIGINT/SIGTERM and the grace period, then returns.
pub fn run(config: RunConfig, log: Arc<Logger>, status: Arc<Status>) -> Result<(), String> {
    run_with(config, log, status, |stopper| {
        watch_signals(stopper).map_err(|e| format!("cannot install signal handlers: {e}"))
    })
}

/// Runs the tunnel in this thread until `on_start`'s [`Stopper`] is used (no signal handlers
/// are installed), for a tunnel inside another program (`mcpwire demo`, tests).
pub fn run_with(
    config: RunConfig,
    log: Arc<Logger>,
    status: Arc<Status>,
    on_start: impl FnOnce(Stopper) -> Result<(), String>,
) -> Result<(), String> {
    let now = Instant::now();
    let (tx, rx) = mpsc::sync_channel::<Completion>(COMPLETIONS);
    let signal = tx.clone();
    on_start(Stopper::new(move || {
        signal.send(Completion::Signal).is_ok()
    }))?;
    let grace = config.grace;
    let max_in_flight = config.engine.max_in_flight;
    let max_forwards = config.engine.max_concurrent_forwards;
    let poll_timeout = config.engine.poll_wait + POLL_GUARD;
    let engine = Engine::new(config.engine.clone(), now).map_err(|e| e.to_string())?;
    let mut routes = BTreeMap::new();
    let mut stdio = Vec::new();
    for t in &config.targets {
        match &t.kind {
            TargetKind::Http { url } => {
                routes.insert(t.channel.clone(), Route::Http(url.clone()));
            }
            TargetKind::Stdio { argv } => {
                routes.insert(t.channel.clone(), Route::Stdio(stdio.len()));
                stdio.push(StdioChannel::new(
                    t.channel.clone(),
                    stdio.len(),
                    argv.clone(),
                    config.stdio.clone(),
                    crate::tunnel_run::config::random_u64(),
                ));
            }
        }
    }
    let companion = match &config.cloudflared {
        None => None,
        Some(cfg) => {
            status.publish(Metrics {
                not_ready: CompanionState::Starting
                    .not_ready_reason()
                    .map(str::to_owned),
                ..Metrics::default()
            });
            let token = cloudflared::token(cfg, &config.engine, &log)
                .map_err(|e| format!("managed cloudflared: {e}"))?;
            let companion = Companion::start(cfg, &token, &log)
                .map_err(|e| format!("managed cloudflared: {e}"))?;
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
                    companion.stop(cloudflared::CHILD_GRACE);
                    return Ok(());
                }
                Err(e) => {
                    companion.stop(cloudflared::CHILD_GRACE);
                    return Err(format!("managed cloudflared: {e}"));
                }
            }
            log.log(Level::Info, "cloudflared ready", &[]);
            companion.watch(tx.clone());
            Some(companion)
        }
    };
    let companion_state = companion.as_ref().map(|_| CompanionState::Ready);
    let control = Arc::new(http::control_agent);
    let mcp = Arc::new(http::mcp_agent);
    let mut d = Driver {
        engine,
        report: Report::new(Arc::clone(&log)),
        log,
        status,
        tx,
        routes,
        stdio,
        poller: Pool::new("poll", 1, 2, control.clone()),
        forwards: Pool::new("forward", max_forwards, max_in_flight + 1, mcp),
        posts: Pool::new("post", POST_THREADS, max_in_flight + 1, control),
        poll_job: None,
        last_poll: None,
        forward_jobs: BTreeMap::new(),
        post_jobs: BTreeMap::new(),
        poll_timeout,
        stopping: None,
        companion,
        companion_state,
        fatal: None,
    };
    for i in 0..d.stdio.len() {
        d.start_stdio(i, now);
    }
    d.log.log(
        Level::Info,
        "tunnel client started",
        &[
            ("driver", &"blocking"),
            ("tunnel_id", &d.engine.config().tunnel_id.clone()),
            ("channels", &d.engine.config().channels.join(",")),
        ],
    );
    d.engine.handle_timeout(now);
    loop {
        d.pump();
        let stopping = d.stopping;
        d.report
            .metrics
            .update(&d.engine.health(), d.companion_state, stopping.is_some());
        d.status.publish(d.report.metrics.clone());
        let now = Instant::now();
        if let Some(until) = stopping {
            if d.engine.is_idle() || now >= until {
                break;
            }
        }
        let next = [
            d.engine.poll_timeout().map(|t| t.at),
            d.stdio.iter().filter_map(|s| s.restart_at).min(),
            stopping,
        ]
        .into_iter()
        .flatten()
        .min();
        let received = match next {
            Some(at) => rx.recv_timeout(at.saturating_duration_since(now)),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(Completion::Signal) => {
                if d.stopping.is_some() {
                    d.log.log(Level::Warn, "second signal: stopping now", &[]);
                    break;
                }
                d.begin_shutdown(grace);
            }
            Ok(Completion::CompanionExited { status }) => {
                d.companion_state = Some(CompanionState::Exited);
                if d.stopping.is_none() {
                    d.log.log(
                        Level::Error,
                        "cloudflared exited unexpectedly; the tunnel client stops",
                        &[("status", &status)],
                    );
                    d.fatal = Some(format!("cloudflared exited unexpectedly ({status})"));
                    d.begin_shutdown(grace);
                }
            }
            Ok(c) => d.complete(c),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        d.engine.handle_timeout(now);
        for i in 0..d.stdio.len() {
            if d.stdio
                .get(i)
                .and_then(|s| s.restart_at)
                .is_some_and(|t| t <= now)
            {
                d.start_stdio(i, now);
            }
        }
    }
    d.finish();
    match d.fatal {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

impl Driver {
    /// Drains the engine's and the stdio bindings' outputs until neither has any.
    fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(out) = self.engine.poll_output() {
                progressed = true;
                self.perform(out);
            }
            for i in 0..self.stdio.len() {
                while let Some(out) = self.stdio.get_mut(i).and_then(|s| s.binding.poll_output()) {
                    progressed = true;
                    self.stdio_output(i, out);
                }
            }
            if !progressed {
                return;
            }
        }
    }

    fn perform(&mut self, out: Output) {
        match out {
            Output::Poll { id, request } => self.start_poll(id, request),
            Output::Forward(f) => self.start_forward(f),
            Output::CancelForward { cmd } => {
                if let Some(ctl) = self.forward_jobs.remove(&cmd) {
                    ctl.cancel();
                }
                for s in &mut self.stdio {
                    s.binding.handle_deadline(cmd.0);
                }
            }
            Output::Post {
                id,
                cmd,
                request,
                deadline,
            } => self.start_post(id, cmd, request, deadline),
            Output::CancelPost { id } => {
                if let Some(ctl) = self.post_jobs.remove(&id) {
                    ctl.cancel();
                }
            }
            Output::Event(e) => self.report.event(e),
        }
    }

    fn start_poll(&mut self, id: PollId, request: Request) {
        self.report.metrics.polls += 1;
        let ctl = JobCtl::new();
        let tx = self.tx.clone();
        let timeout = self.poll_timeout;
        let work = Box::new(move |agent: &ureq::Agent, ctl: &JobCtl| {
            let result = match http::send(agent, &request, Some(timeout)) {
                Ok(mut response) => {
                    let received_at = Instant::now();
                    let head = http::head_of(&response);
                    response
                        .body_mut()
                        .with_config()
                        .limit(MAX_POLL_BODY)
                        .read_to_vec()
                        .map(|body| (received_at, head, body))
                        .map_err(|_| ())
                }
                Err(_) => Err(()),
            };
            if !ctl.is_cancelled() {
                let _ = tx.send(Completion::Poll { id, result });
            }
        });
        self.poll_job = Some(Arc::clone(&ctl));
        self.last_poll = Some(id);
        if self.poller.submit(ctl, work).is_err() {
            let _ = self.engine.handle_poll_failed(Instant::now(), id);
        }
    }

    fn start_forward(&mut self, f: Forward) {
        self.report.forward_started(&f);
        match self.routes.get(&f.channel).cloned() {
            Some(Route::Stdio(i)) => self.forward_stdio(i, f),
            Some(Route::Http(url)) => self.forward_http(url, f),
            None => {
                // The engine only forwards served channels; answer rather than lose it.
                let failure = TunnelFailure::before_response(FailureSource::ClientInternal, None);
                let _ = self
                    .engine
                    .handle_forward_failed(Instant::now(), f.cmd, failure);
            }
        }
    }

    fn forward_stdio(&mut self, i: usize, f: Forward) {
        let now = Instant::now();
        let Some(chan) = self.stdio.get_mut(i) else {
            return;
        };
        let refused = match &f.kind {
            ForwardKind::JsonRpc { payload, .. } => chan
                .binding
                .handle_command(f.cmd.0, payload.get())
                .err()
                .map(|e| e.to_tunnel_failure()),
            ForwardKind::SessionTermination => Some(session_termination_failure()),
        };
        if let Some(failure) = refused {
            self.report.note_failure(&f.request_id, failure);
            let _ = self.engine.handle_forward_failed(now, f.cmd, failure);
        }
    }

    fn forward_http(&mut self, url: String, f: Forward) {
        let (method, body) = match &f.kind {
            ForwardKind::JsonRpc { payload, .. } => {
                (Method::Post, payload.get().as_bytes().to_vec())
            }
            ForwardKind::SessionTermination => (Method::Delete, Vec::new()),
        };
        let request = Request {
            method,
            url,
            headers: f.headers,
            body,
        };
        let cmd = f.cmd;
        let deadline = f.deadline;
        let tx = self.tx.clone();
        let work = Box::new(move |agent: &ureq::Agent, ctl: &JobCtl| {
            forward_job(agent, ctl, &tx, cmd, &request, deadline);
        });
        let ctl = JobCtl::new();
        self.forward_jobs.insert(cmd, Arc::clone(&ctl));
        if self.forwards.submit(ctl, work).is_err() {
            self.forward_jobs.remove(&cmd);
            let failure = TunnelFailure::before_response(FailureSource::ClientInternal, None);
            let _ = self
                .engine
                .handle_forward_failed(Instant::now(), cmd, failure);
        }
    }

    fn start_post(
        &mut self,
        id: PostId,
        cmd: CommandId,
        request: Request,
        deadline: Option<Instant>,
    ) {
        self.report.post_started(cmd);
        let tx = self.tx.clone();
        let work = Box::new(move |agent: &ureq::Agent, ctl: &JobCtl| {
            let timeout = deadline
                .map(|d| {
                    d.saturating_duration_since(Instant::now())
                        .min(POST_TIMEOUT)
                })
                .unwrap_or(POST_TIMEOUT);
            let result = match http::send(agent, &request, Some(timeout)) {
                Ok(mut response) => {
                    let head = http::head_of(&response);
                    let _ = response
                        .body_mut()
                        .with_config()
                        .limit(MAX_POST_ANSWER)
                        .read_to_vec();
                    Ok(head)
                }
                Err(e) => Err(http::maybe_written(&e)),
            };
            if !ctl.is_cancelled() {
                let _ = tx.send(Completion::Post { id, cmd, result });
            }
        });
        let ctl = JobCtl::new();
        self.post_jobs.insert(id, Arc::clone(&ctl));
        if self.posts.submit(ctl, work).is_err() {
            self.post_jobs.remove(&id);
            let _ = self.engine.handle_post_failed(Instant::now(), id, false);
        }
    }

    fn stdio_output(&mut self, i: usize, out: StdioOutput) {
        let now = Instant::now();
        let result = match out {
            StdioOutput::Write(bytes) => {
                if let Some(s) = self.stdio.get_mut(i) {
                    s.write(bytes);
                }
                Ok(())
            }
            StdioOutput::Message { token, json } | StdioOutput::Response { token, json } => self
                .engine
                .handle_forward_message(now, CommandId(token), &json),
            StdioOutput::NotificationSent { token } => self
                .engine
                .handle_forward_acknowledged(now, CommandId(token)),
            StdioOutput::Failed { token, reason } => {
                let failure = reason.to_tunnel_failure();
                self.engine
                    .handle_forward_failed(now, CommandId(token), failure)
            }
            StdioOutput::Restart => {
                let Some(s) = self.stdio.get_mut(i) else {
                    return;
                };
                self.log.log(
                    Level::Warn,
                    "restarting stdio server (initialize deadline passed)",
                    &[("channel", &s.name)],
                );
                if !s.request_restart() {
                    // No child to wait for: the replacement starts now.
                    self.replace_stdio(i, now);
                }
                Ok(())
            }
            StdioOutput::Discarded { reason, .. } => {
                let name = self
                    .stdio
                    .get(i)
                    .map(|s| s.name.clone())
                    .unwrap_or_default();
                self.log.log(
                    Level::Debug,
                    "stdio frame discarded",
                    &[("channel", &name), ("reason", &format!("{reason:?}"))],
                );
                Ok(())
            }
        };
        // A late report for a command the engine already dropped is harmless.
        drop(result);
    }

    /// Starts channel `i`'s child; false when it could not be started (its waiting commands
    /// are then answered with `transport_closed`, and a retry is scheduled).
    fn start_stdio(&mut self, i: usize, now: Instant) -> bool {
        let tx = self.tx.clone();
        let log = Arc::clone(&self.log);
        let Some(s) = self.stdio.get_mut(i) else {
            return false;
        };
        let Err(e) = s.start(&tx, &log) else {
            return true;
        };
        log.log(
            Level::Error,
            "cannot start stdio server",
            &[("channel", &s.name), ("error", &e)],
        );
        // Leave a pending restart (its held commands are admitted and their frames kept), then
        // answer everything admitted now rather than at its deadline, and drop those frames.
        s.binding.handle_child_exit();
        self.pump();
        if let Some(s) = self.stdio.get_mut(i) {
            s.binding.handle_child_exit();
            s.schedule_restart(now);
        }
        false
    }

    /// A requested restart: start the replacement, then let the binding admit the commands
    /// that waited for it.
    fn replace_stdio(&mut self, i: usize, now: Instant) {
        if self.start_stdio(i, now) {
            if let Some(s) = self.stdio.get_mut(i) {
                s.binding.handle_child_exit();
            }
        }
    }

    fn complete(&mut self, c: Completion) {
        let now = Instant::now();
        let wall = SystemTime::now();
        match c {
            Completion::Poll { id, result } => {
                self.poll_job = None;
                self.last_poll = None;
                let _ = match result {
                    Ok((received_at, head, body)) => {
                        self.engine
                            .handle_poll_response(now, received_at, wall, id, &head, &body)
                    }
                    Err(()) => self.engine.handle_poll_failed(now, id),
                };
            }
            Completion::Head { cmd, head } => {
                let _ = self.engine.handle_forward_head(now, cmd, head);
            }
            Completion::Body { cmd, chunk } => {
                let _ = self.engine.handle_forward_body(now, cmd, &chunk);
            }
            Completion::End { cmd } => {
                self.forward_jobs.remove(&cmd);
                let _ = self.engine.handle_forward_end(now, cmd);
            }
            Completion::Failed { cmd, failure } => {
                self.forward_jobs.remove(&cmd);
                let _ = self.engine.handle_forward_failed(now, cmd, failure);
            }
            Completion::Post { id, cmd, result } => {
                self.post_jobs.remove(&id);
                self.report.post_ended(cmd, &result);
                let _ = match result {
                    Ok(head) => self.engine.handle_post_response(now, wall, id, &head),
                    Err(written) => self.engine.handle_post_failed(now, id, written),
                };
            }
            Completion::StdioOut {
                chan,
                generation,
                bytes,
            } => {
                if let Some(s) = self.stdio.get_mut(chan) {
                    if s.is_current(generation) {
                        s.binding.handle_stdout(&bytes);
                    }
                }
            }
            Completion::StdioExit { chan, generation } => self.stdio_exit(chan, generation, now),
            Completion::CompanionProbe { ready } => {
                if let Some(state) = self.companion_state {
                    let next = after_probe(state, ready);
                    if next != state {
                        let level = if ready { Level::Info } else { Level::Warn };
                        let why = next.not_ready_reason().unwrap_or("ready");
                        self.log
                            .log(level, "cloudflared readiness changed", &[("state", &why)]);
                    }
                    self.companion_state = Some(next);
                }
            }
            Completion::Signal | Completion::CompanionExited { .. } => {}
        }
    }

    fn stdio_exit(&mut self, chan: usize, generation: u64, now: Instant) {
        let Some(s) = self.stdio.get_mut(chan) else {
            return;
        };
        if !s.is_current(generation) {
            return;
        }
        if s.exited(now) {
            self.replace_stdio(chan, now);
        } else {
            self.log.log(
                Level::Warn,
                "stdio server exited; its commands fail with transport_closed and it restarts",
                &[("channel", &s.name)],
            );
            s.binding.handle_child_exit();
        }
    }

    fn begin_shutdown(&mut self, grace: Duration) {
        let now = Instant::now();
        self.log.log(
            Level::Info,
            "signal received: polling stopped, finishing in-flight commands",
            &[
                ("in_flight", &self.engine.health().in_flight),
                ("grace_ms", &grace.as_millis()),
            ],
        );
        self.engine.shutdown();
        if let Some(ctl) = self.poll_job.take() {
            ctl.cancel();
            // The cancelled poll reports nothing: tell the engine it ended.
            if let Some(id) = self.last_poll.take() {
                let _ = self.engine.handle_poll_failed(now, id);
            }
        }
        self.stopping = Some(now.checked_add(grace).unwrap_or(now));
    }

    fn finish(&mut self) {
        for ctl in self.forward_jobs.values().chain(self.post_jobs.values()) {
            ctl.cancel();
        }
        for s in &mut self.stdio {
            s.stop();
        }
        if let Some(c) = self.companion.take() {
            let status = c
                .stop(cloudflared::CHILD_GRACE)
                .map_or_else(|| "unknown".to_owned(), |s| s.to_string());
            self.log
                .log(Level::Info, "cloudflared stopped", &[("status", &status)]);
        }
        let h = self.engine.health();
        self.log.log(
            Level::Info,
            "tunnel client stopped",
            &[("abandoned_commands", &h.in_flight)],
        );
    }
}

/// One HTTP forward on a worker: send, report the head, stream the body.
fn forward_job(
    agent: &ureq::Agent,
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
    let response = match http::send(agent, request, timeout) {
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

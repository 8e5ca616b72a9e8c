//! The smol driver: hyper 1 over smol's sockets for HTTP (rustls via futures-rustls for
//! `https`), smol tasks, async-process for stdio MCP servers.
//!
//! One future runs the loop and owns the [`Engine`] and the stdio bindings: read the clock,
//! feed the engine, drain its outputs, perform them, then wait for the next completion or
//! [`Engine::poll_timeout`], whichever comes first. Tasks (the poll, each forward and response
//! POST, the stdio pipe tasks) never touch the engine: they report on one bounded channel of
//! [`Completion`]s.
//!
//! - The receipt instant of a poll response is read when its head arrives, before its body.
//! - A deadline (`CancelForward`/`CancelPost`) drops that exchange's task, which closes its
//!   connection at once; for stdio the binding retires the id and the pipes stay open.
//! - Memory is bounded: the completion channel is bounded (tasks wait when it is full), the
//!   engine bounds forwards and posts in flight, a poll body is read up to [`MAX_POLL_BODY`],
//!   forward bodies are streamed to the engine (which bounds them), and a stdio binding bounds
//!   its queue and frames.

mod cloudflared;
pub(crate) mod http;
mod stdio;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures_rustls::rustls::ClientConfig;
use mcpwire_core::http::{Method, Request, ResponseHead};
use mcpwire_core::tunnel::cloudflare::CompanionState;
use mcpwire_core::tunnel::engine::{CommandId, Forward, ForwardKind, Output, PollId, PostId};
use mcpwire_core::tunnel::failure::{FailureSource, TunnelFailure};
use mcpwire_core::tunnel::stdio::{session_termination_failure, StdioOutput};
use mcpwire_core::tunnel::Engine;
use smol::channel::{self, Receiver, Sender};
use smol::future::FutureExt as _;
use smol::lock::Semaphore;
use smol::{Task, Timer};

use self::stdio::StdioChannel;
use crate::tunnel_run::config::{RunConfig, TargetKind};
use crate::tunnel_run::health::Status;
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
/// The size of one forward body chunk handed to the engine, at most.
const CHUNK: usize = 16 * 1024;
/// Completions waiting for the loop, at most (tasks wait when it is full).
const COMPLETIONS: usize = 1024;
/// Response POSTs on the wire at once (the rest wait for a slot).
const POST_SLOTS: usize = 4;

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
    tx: Sender<Completion>,
    routes: BTreeMap<String, Route>,
    stdio: Vec<StdioChannel>,
    tls: Arc<ClientConfig>,
    post_slots: Arc<Semaphore>,
    poll_task: Option<Task<()>>,
    last_poll: Option<PollId>,
    forward_tasks: BTreeMap<CommandId, Task<()>>,
    post_tasks: BTreeMap<PostId, Task<()>>,
    report: Report,
    poll_timeout: Duration,
    stopping: Option<Instant>,
    companion: Option<cloudflared::Managed>,
    /// Why the client stops with an error (the companion died), if it does.
    fatal: Option<String>,
}

/// Runs the tunnel until SIGINT/SIGTERM and the grace period, then returns.
pub fn run(config: RunConfig, log: Arc<Logger>, status: Arc<Status>) -> Result<(), String> {
    run_with(config, log, status, |stopper| {
        watch_signals(stopper).map_err(|e| format!("cannot install signal handlers: {e}"))
    })
}

/// Runs the tunnel in this thread (on smol's executor) until `on_start`'s [`Stopper`] is used
/// (no signal handlers are installed), for a tunnel inside another program (tests).
pub fn run_with(
    config: RunConfig,
    log: Arc<Logger>,
    status: Arc<Status>,
    on_start: impl FnOnce(Stopper) -> Result<(), String>,
) -> Result<(), String> {
    smol::block_on(run_async(config, log, status, on_start))
}

async fn run_async(
    config: RunConfig,
    log: Arc<Logger>,
    status: Arc<Status>,
    on_start: impl FnOnce(Stopper) -> Result<(), String>,
) -> Result<(), String> {
    let now = Instant::now();
    let (tx, rx) = channel::bounded::<Completion>(COMPLETIONS);
    let signal = tx.clone();
    on_start(Stopper::new(move || {
        signal.send_blocking(Completion::Signal).is_ok()
    }))?;
    let grace = config.grace;
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
    let tls = http::tls_config()?;
    let companion = match &config.cloudflared {
        None => None,
        Some(cfg) => {
            match cloudflared::start(cfg, &config.engine, &log, &status, &tls, &rx, &tx).await? {
                cloudflared::Started::Running(c) => Some(c),
                cloudflared::Started::Interrupted => return Ok(()),
            }
        }
    };
    let mut d = Driver {
        engine,
        report: Report::new(Arc::clone(&log)),
        log,
        status,
        tx,
        routes,
        stdio,
        tls,
        post_slots: Arc::new(Semaphore::new(POST_SLOTS)),
        poll_task: None,
        last_poll: None,
        forward_tasks: BTreeMap::new(),
        post_tasks: BTreeMap::new(),
        poll_timeout,
        stopping: None,
        companion,
        fatal: None,
    };
    for i in 0..d.stdio.len() {
        d.start_stdio(i, now);
    }
    d.log.log(
        Level::Info,
        "tunnel client started",
        &[
            ("driver", &"smol"),
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
            .update(&d.engine.health(), d.companion_state(), stopping.is_some());
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
        match next_completion(&rx, next).await {
            Wake::Completion(Completion::Signal) => {
                if d.stopping.is_some() {
                    d.log.log(Level::Warn, "second signal: stopping now", &[]);
                    break;
                }
                d.begin_shutdown(grace);
            }
            Wake::Completion(Completion::CompanionExited { status }) => {
                d.companion_exited(&status, grace);
            }
            Wake::Completion(c) => d.complete(c),
            Wake::Deadline => {}
            Wake::Closed => break,
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
    if let Some(c) = d.companion.take() {
        c.stop().await;
    }
    d.finish();
    match d.fatal {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Why the loop woke up.
enum Wake {
    Completion(Completion),
    Deadline,
    Closed,
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
                // Dropping the task drops the exchange and closes its connection.
                drop(self.forward_tasks.remove(&cmd));
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
            Output::CancelPost { id } => drop(self.post_tasks.remove(&id)),
            Output::Event(e) => self.report.event(e),
        }
    }

    fn start_poll(&mut self, id: PollId, request: Request) {
        self.report.metrics.polls += 1;
        let tx = self.tx.clone();
        let tls = Arc::clone(&self.tls);
        let timeout = self.poll_timeout;
        self.last_poll = Some(id);
        self.poll_task = Some(smol::spawn(async move {
            let exchange = async {
                let mut ex = http::send(&tls, &request).await?;
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
                .map_err(|_| ());
            let _ = tx.send(Completion::Poll { id, result }).await;
        }));
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
        let tls = Arc::clone(&self.tls);
        let task = smol::spawn(async move {
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return; // already expired: the engine drops it on its own
            }
            forward_task(&tls, &tx, cmd, &request).await;
        });
        self.forward_tasks.insert(cmd, task);
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
        let tls = Arc::clone(&self.tls);
        let slots = Arc::clone(&self.post_slots);
        let task = smol::spawn(async move {
            let _slot = slots.acquire().await;
            let timeout = deadline
                .map(|d| {
                    d.saturating_duration_since(Instant::now())
                        .min(POST_TIMEOUT)
                })
                .unwrap_or(POST_TIMEOUT);
            let exchange = async {
                let mut ex = http::send(&tls, &request).await?;
                let _ = ex.read_to_vec(MAX_POST_ANSWER).await;
                Ok::<_, http::HttpError>(ex.head)
            };
            let result = exchange
                .or(async {
                    Timer::after(timeout).await;
                    Err(http::HttpError::TimedOut)
                })
                .await
                .map_err(|e| e.maybe_written());
            let _ = tx.send(Completion::Post { id, cmd, result }).await;
        });
        self.post_tasks.insert(id, task);
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
                self.poll_task = None;
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
                self.forward_tasks.remove(&cmd);
                let _ = self.engine.handle_forward_end(now, cmd);
            }
            Completion::Failed { cmd, failure } => {
                self.forward_tasks.remove(&cmd);
                let _ = self.engine.handle_forward_failed(now, cmd, failure);
            }
            Completion::Post { id, cmd, result } => {
                self.post_tasks.remove(&id);
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
                if let Some(c) = &mut self.companion {
                    c.probed(ready);
                }
            }
            Completion::Signal | Completion::CompanionExited { .. } => {}
        }
    }

    fn companion_state(&self) -> Option<CompanionState> {
        self.companion.as_ref().map(cloudflared::Managed::state)
    }

    /// cloudflared exited on its own: the client stops (the blocking driver's policy).
    fn companion_exited(&mut self, status: &str, grace: Duration) {
        if let Some(c) = &mut self.companion {
            c.exited();
        }
        if self.stopping.is_none() {
            self.log.log(
                Level::Error,
                "cloudflared exited unexpectedly; the tunnel client stops",
                &[("status", &status)],
            );
            self.fatal = Some(format!("cloudflared exited unexpectedly ({status})"));
            self.begin_shutdown(grace);
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
        if let Some(task) = self.poll_task.take() {
            drop(task);
            // The cancelled poll reports nothing: tell the engine it ended.
            if let Some(id) = self.last_poll.take() {
                let _ = self.engine.handle_poll_failed(now, id);
            }
        }
        self.stopping = Some(now.checked_add(grace).unwrap_or(now));
    }

    fn finish(&mut self) {
        self.forward_tasks.clear();
        self.post_tasks.clear();
        for s in &mut self.stdio {
            s.stop();
        }
        let h = self.engine.health();
        self.log.log(
            Level::Info,
            "tunnel client stopped",
            &[("abandoned_commands", &h.in_flight)],
        );
    }
}

/// One HTTP forward: send, report the head, stream the body.
async fn forward_task(
    tls: &Arc<ClientConfig>,
    tx: &Sender<Completion>,
    cmd: CommandId,
    request: &Request,
) {
    let mut ex = match http::send(tls, request).await {
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

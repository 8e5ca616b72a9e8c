//! What the blocking and the smol tunnel drivers share: the loop's state around the
//! [`Engine`] and the stdio bindings, turning their outputs into work for the runtime and
//! feeding the runtime's [`Completion`]s back. No sockets, threads, tasks or waiting here.
//!
//! A driver supplies a [`Runtime`] (how a poll, a forward or a response POST is started and
//! cancelled, how a stdio child is spawned), then runs the loop in its own way of waiting:
//!
//! ```text
//! let mut d = Prepared::new(&config, now)?.start(runtime, log, status, companion, "name", now);
//! while let ControlFlow::Continue(deadline) = d.settle() {
//!     let wake = /* the next completion, or Wake::Deadline once `deadline` passes */;
//!     if d.wake(wake).is_break() { break; }
//! }
//! d.finish(|runtime| /* stop what only the runtime can stop */)
//! ```

pub mod cloudflared;
pub mod stdio;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::http::{Request, ResponseHead};
use mcpwire_core::tunnel::cloudflare::{after_probe, CompanionState};
use mcpwire_core::tunnel::engine::{CommandId, Forward, Output, PollId, PostId};
use mcpwire_core::tunnel::failure::{FailureSource, TunnelFailure};
use mcpwire_core::tunnel::stdio::StdioOutput;
use mcpwire_core::tunnel::Engine;

use self::stdio::{StdioChannel, StdioChild, StdioSpawn};
use super::config::{TargetKind, TunnelConfig};
use super::log::{Level, Logger};
use super::report::Report;
use super::status::Status;
use super::Error;

/// The largest poll response body read.
pub const MAX_POLL_BODY: u64 = 64 * 1024 * 1024;
/// Extra time a poll may take beyond the requested long-poll wait.
const POLL_GUARD: Duration = Duration::from_secs(10);
/// The longest a response POST attempt may take (less when the command's deadline is nearer).
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of a response POST's answer read (the answer is not used).
pub const MAX_POST_ANSWER: u64 = 64 * 1024;
/// The size of one forward body chunk handed to the engine, at most.
pub const CHUNK: usize = 16 * 1024;
/// Completions waiting for the loop, at most (workers wait when it is full).
pub const COMPLETIONS: usize = 1024;

/// How long a response POST starting now may take: 30 s, or less when the
/// command's `deadline` is nearer.
pub fn post_timeout(deadline: Option<Instant>) -> Duration {
    deadline
        .map(|d| {
            d.saturating_duration_since(Instant::now())
                .min(POST_TIMEOUT)
        })
        .unwrap_or(POST_TIMEOUT)
}

/// What a worker or task reports to the loop.
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

/// Why the loop woke up.
pub enum Wake {
    /// A completion arrived.
    Completion(Completion),
    /// The deadline [`DriverCore::settle`] gave passed.
    Deadline,
    /// Every sender is gone.
    Closed,
}

/// The exchange could not be started (a full queue): the runtime kept nothing for it, and the
/// loop answers it as failed.
#[derive(Debug)]
pub struct NotStarted;

/// What only the runtime does: start and cancel exchanges, spawn stdio children. Every
/// exchange reports back with [`Completion`]s, unless cancelled.
pub trait Runtime {
    /// A running stdio child.
    type Child: StdioChild;

    /// Sends the poll, bounded by `timeout`; reports [`Completion::Poll`].
    fn start_poll(
        &mut self,
        id: PollId,
        request: Request,
        timeout: Duration,
    ) -> Result<(), NotStarted>;
    /// The poll in flight (if any) is dropped without a report; true when there was one.
    fn cancel_poll(&mut self) -> bool;
    /// The poll reported: forget its handle.
    fn poll_ended(&mut self);

    /// Sends a forward (unless its `deadline` passed: the engine drops it on its own); reports
    /// [`Completion::Head`], [`Completion::Body`]s and [`Completion::End`], or
    /// [`Completion::Failed`].
    fn start_forward(
        &mut self,
        cmd: CommandId,
        request: Request,
        deadline: Option<Instant>,
    ) -> Result<(), NotStarted>;
    /// The forward's deadline passed: close its connection now, report nothing more.
    fn cancel_forward(&mut self, cmd: CommandId);
    /// The forward reported its last completion: forget its handle.
    fn forward_ended(&mut self, cmd: CommandId);

    /// Sends a response POST (bounded by [`post_timeout`]); reports [`Completion::Post`].
    fn start_post(
        &mut self,
        id: PostId,
        cmd: CommandId,
        request: Request,
        deadline: Option<Instant>,
    ) -> Result<(), NotStarted>;
    /// The POST's deadline passed: close its connection now, report nothing more.
    fn cancel_post(&mut self, id: PostId);
    /// The POST reported: forget its handle.
    fn post_ended(&mut self, id: PostId);

    /// Starts a stdio child whose stdout reports [`Completion::StdioOut`] then
    /// [`Completion::StdioExit`], and whose stderr is logged to `log`.
    fn spawn_stdio(
        &mut self,
        spawn: StdioSpawn<'_>,
        log: &Arc<Logger>,
    ) -> std::io::Result<Self::Child>;

    /// Shutdown: drop every forward and response POST still in flight.
    fn abandon_all(&mut self);
}

/// Where a channel's forwards go.
#[derive(Clone)]
enum Route {
    Http(String),
    Stdio(usize),
}

/// The engine, the routes and the stdio channels, before the runtime exists.
pub struct Prepared<C> {
    engine: Engine,
    routes: BTreeMap<String, Route>,
    stdio: Vec<StdioChannel<C>>,
    poll_timeout: Duration,
    grace: Duration,
}

impl<C: StdioChild> Prepared<C> {
    /// The engine for `config` and one route per target (stdio children not started yet).
    pub fn new(config: &TunnelConfig, now: Instant) -> Result<Self, Error> {
        let engine = Engine::new(config.engine.clone(), now)?;
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
                        crate::random_seed(),
                    ));
                }
            }
        }
        Ok(Prepared {
            engine,
            routes,
            stdio,
            poll_timeout: config.engine.poll_wait + POLL_GUARD,
            grace: config.grace,
        })
    }

    /// Starts the stdio children on `rt`, logs the start and gives the engine its first
    /// timeout. `companion` is the managed cloudflared's state (it said ready), if one runs.
    pub fn start<R: Runtime<Child = C>>(
        self,
        rt: R,
        log: Arc<Logger>,
        status: Arc<Status>,
        companion: Option<CompanionState>,
        driver: &str,
        now: Instant,
    ) -> DriverCore<R> {
        let mut d = DriverCore {
            engine: self.engine,
            report: Report::new(Arc::clone(&log)),
            log,
            status,
            routes: self.routes,
            stdio: self.stdio,
            poll_timeout: self.poll_timeout,
            grace: self.grace,
            last_poll: None,
            stopping: None,
            companion,
            fatal: None,
            rt,
        };
        for i in 0..d.stdio.len() {
            d.start_stdio(i, now);
        }
        d.log.log(
            Level::Info,
            "tunnel client started",
            &[
                ("driver", &driver),
                ("tunnel_id", &d.engine.config().tunnel_id.clone()),
                ("channels", &d.engine.config().channels.join(",")),
            ],
        );
        d.engine.handle_timeout(now);
        d
    }
}

/// The loop's state: the engine, the stdio channels, the report, and the runtime.
pub struct DriverCore<R: Runtime> {
    engine: Engine,
    log: Arc<Logger>,
    status: Arc<Status>,
    routes: BTreeMap<String, Route>,
    stdio: Vec<StdioChannel<R::Child>>,
    report: Report,
    poll_timeout: Duration,
    grace: Duration,
    last_poll: Option<PollId>,
    stopping: Option<Instant>,
    companion: Option<CompanionState>,
    /// Why the client stops with an error (the companion died), if it does.
    fatal: Option<Error>,
    /// The runtime performing the work.
    pub rt: R,
}

impl<R: Runtime> DriverCore<R> {
    /// Drains every output, publishes the metrics, and says what to wait for: the earliest
    /// deadline (`None`: only a completion), or `Break` when the loop is done (stopping, and
    /// idle or past the grace period).
    pub fn settle(&mut self) -> ControlFlow<(), Option<Instant>> {
        self.pump();
        let stopping = self.stopping;
        self.report
            .metrics
            .update(&self.engine.health(), self.companion, stopping.is_some());
        self.status.publish(self.report.metrics.clone());
        if let Some(until) = stopping {
            if self.engine.is_idle() || Instant::now() >= until {
                return ControlFlow::Break(());
            }
        }
        let next = [
            self.engine.poll_timeout().map(|t| t.at),
            self.stdio.iter().filter_map(|s| s.restart_at).min(),
            stopping,
        ]
        .into_iter()
        .flatten()
        .min();
        ControlFlow::Continue(next)
    }

    /// Handles what woke the loop, then the deadlines that passed; `Break` to stop now (a
    /// second signal, or no sender left).
    pub fn wake(&mut self, wake: Wake) -> ControlFlow<()> {
        match wake {
            Wake::Completion(Completion::Signal) => {
                if self.stopping.is_some() {
                    self.log
                        .log(Level::Warn, "second signal: stopping now", &[]);
                    return ControlFlow::Break(());
                }
                self.begin_shutdown();
            }
            Wake::Completion(Completion::CompanionExited { status }) => {
                self.companion_exited(&status);
            }
            Wake::Completion(c) => self.complete(c),
            Wake::Deadline => {}
            Wake::Closed => return ControlFlow::Break(()),
        }
        let now = Instant::now();
        self.engine.handle_timeout(now);
        for i in 0..self.stdio.len() {
            if self
                .stdio
                .get(i)
                .and_then(|s| s.restart_at)
                .is_some_and(|t| t <= now)
            {
                self.start_stdio(i, now);
            }
        }
        ControlFlow::Continue(())
    }

    /// Shutdown: abandons the exchanges in flight, stops the stdio children, runs `then` (what
    /// else only the runtime stops), and logs the end. `Err` when the companion died.
    pub fn finish(mut self, then: impl FnOnce(&mut R)) -> Result<(), Error> {
        self.rt.abandon_all();
        for s in &mut self.stdio {
            s.stop();
        }
        then(&mut self.rt);
        let h = self.engine.health();
        self.log.log(
            Level::Info,
            "tunnel client stopped",
            &[("abandoned_commands", &h.in_flight)],
        );
        match self.fatal {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

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
            Output::Poll { id, request } => {
                self.report.metrics.polls += 1;
                self.last_poll = Some(id);
                if self.rt.start_poll(id, request, self.poll_timeout).is_err() {
                    let _ = self.engine.handle_poll_failed(Instant::now(), id);
                }
            }
            Output::Forward(f) => self.start_forward(f),
            Output::CancelForward { cmd } => {
                self.rt.cancel_forward(cmd);
                for s in &mut self.stdio {
                    s.binding.handle_deadline(Instant::now(), cmd);
                }
            }
            Output::Post {
                id,
                cmd,
                request,
                deadline,
            } => {
                self.report.post_started(cmd);
                if self.rt.start_post(id, cmd, request, deadline).is_err() {
                    let _ = self.engine.handle_post_failed(Instant::now(), id, false);
                }
            }
            Output::CancelPost { id } => self.rt.cancel_post(id),
            Output::Event(e) => self.report.event(e),
        }
    }

    fn start_forward(&mut self, f: Forward) {
        self.report.forward_started(&f);
        match self.routes.get(&f.channel).cloned() {
            Some(Route::Stdio(i)) => {
                let now = Instant::now();
                let Some(chan) = self.stdio.get_mut(i) else {
                    return;
                };
                if let Err(failure) = chan.binding.handle_forward(now, f.cmd, &f.kind) {
                    self.report.note_failure(&f.request_id, failure);
                    let _ = self.engine.handle_forward_failed(now, f.cmd, failure);
                }
            }
            Some(Route::Http(url)) => {
                let (cmd, deadline) = (f.cmd, f.deadline);
                let request = f.into_http_request(url);
                if self.rt.start_forward(cmd, request, deadline).is_err() {
                    let _ = self
                        .engine
                        .handle_forward_failed(Instant::now(), cmd, not_started());
                }
            }
            // The engine only forwards served channels; answer rather than lose it.
            None => {
                let _ = self
                    .engine
                    .handle_forward_failed(Instant::now(), f.cmd, not_started());
            }
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
            StdioOutput::Message { cmd, json } | StdioOutput::Response { cmd, json } => {
                self.engine.handle_forward_message(now, cmd, &json)
            }
            StdioOutput::NotificationSent { cmd } => {
                self.engine.handle_forward_acknowledged(now, cmd)
            }
            StdioOutput::Failed { cmd, reason } => {
                let failure = reason.to_tunnel_failure();
                self.engine.handle_forward_failed(now, cmd, failure)
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
        let Some(s) = self.stdio.get_mut(i) else {
            return false;
        };
        let (rt, log) = (&mut self.rt, &self.log);
        let Err(e) = s.start(|spawn| rt.spawn_stdio(spawn, log)) else {
            return true;
        };
        log.log(
            Level::Error,
            "cannot start stdio server",
            &[("channel", &s.name), ("error", &e)],
        );
        // Leave a pending restart (its held commands are admitted and their frames kept), then
        // answer everything admitted now rather than at its deadline, and drop those frames.
        s.binding.handle_child_exit(now);
        self.pump();
        if let Some(s) = self.stdio.get_mut(i) {
            s.binding.handle_child_exit(now);
            s.schedule_restart(now);
        }
        false
    }

    /// A requested restart: start the replacement, then let the binding admit the commands
    /// that waited for it.
    fn replace_stdio(&mut self, i: usize, now: Instant) {
        if self.start_stdio(i, now) {
            if let Some(s) = self.stdio.get_mut(i) {
                s.binding.handle_child_exit(now);
            }
        }
    }

    fn complete(&mut self, c: Completion) {
        let now = Instant::now();
        let wall = SystemTime::now();
        match c {
            Completion::Poll { id, result } => {
                self.rt.poll_ended();
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
                self.rt.forward_ended(cmd);
                let _ = self.engine.handle_forward_end(now, cmd);
            }
            Completion::Failed { cmd, failure } => {
                self.rt.forward_ended(cmd);
                let _ = self.engine.handle_forward_failed(now, cmd, failure);
            }
            Completion::Post { id, cmd, result } => {
                self.rt.post_ended(id);
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
                        s.binding.handle_stdout(now, &bytes);
                    }
                }
            }
            Completion::StdioExit { chan, generation } => self.stdio_exit(chan, generation, now),
            Completion::CompanionProbe { ready } => {
                if let Some(state) = self.companion {
                    let next = after_probe(state, ready);
                    if next != state {
                        let level = if ready { Level::Info } else { Level::Warn };
                        let why = next.not_ready_reason().unwrap_or("ready");
                        self.log
                            .log(level, "cloudflared readiness changed", &[("state", &why)]);
                    }
                    self.companion = Some(next);
                }
            }
            Completion::Signal | Completion::CompanionExited { .. } => {}
        }
    }

    /// cloudflared exited on its own: the client stops.
    fn companion_exited(&mut self, status: &str) {
        self.companion = Some(CompanionState::Exited);
        if self.stopping.is_none() {
            self.log.log(
                Level::Error,
                "cloudflared exited unexpectedly; the tunnel client stops",
                &[("status", &status)],
            );
            self.fatal = Some(Error::CompanionExited {
                status: status.to_string(),
            });
            self.begin_shutdown();
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
            s.binding.handle_child_exit(now);
        }
    }

    fn begin_shutdown(&mut self) {
        let now = Instant::now();
        self.log.log(
            Level::Info,
            "signal received: polling stopped, finishing in-flight commands",
            &[
                ("in_flight", &self.engine.health().in_flight),
                ("grace_ms", &self.grace.as_millis()),
            ],
        );
        self.engine.shutdown(now);
        if self.rt.cancel_poll() {
            // The cancelled poll reports nothing: tell the engine it ended.
            if let Some(id) = self.last_poll.take() {
                let _ = self.engine.handle_poll_failed(now, id);
            }
        }
        self.stopping = Some(now.checked_add(self.grace).unwrap_or(now));
    }
}

/// The failure of a forward the client could not start (a local refusal, before any contact
/// with the server).
fn not_started() -> TunnelFailure {
    TunnelFailure::before_response(FailureSource::ClientInternal, None)
}

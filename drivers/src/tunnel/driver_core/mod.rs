//! What the blocking and the smol tunnel drivers share: the loop around the core's [`Tunnel`]
//! (which decides routing, deadlines, stdio restarts and every bound), performing its outputs
//! on a [`Runtime`] and feeding the runtime's [`Completion`]s back, with the log lines and
//! counters of [`Report`]. No sockets, threads, tasks or waiting here.
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
use mcpwire_core::tunnel::{
    self, AttemptLimit, ChildId, CommandId, Output, PollId, PostId, Tunnel, TunnelFailure,
};

use self::stdio::{StdioChild, StdioSpawn};
use super::config::TunnelConfig;
use super::log::{Level, Logger};
use super::report::Report;
use super::status::Status;
use super::Error;

/// The largest poll response body read.
pub const MAX_POLL_BODY: u64 = 64 * 1024 * 1024;
/// The most bytes of a response POST's answer read (the answer is not used).
pub const MAX_POST_ANSWER: u64 = 64 * 1024;
/// The size of one forward body chunk handed to the engine, at most.
pub const CHUNK: usize = 16 * 1024;
/// Completions waiting for the loop, at most (workers wait when it is full).
pub const COMPLETIONS: usize = 1024;

/// Why a poll got no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PollFailure {
    /// In words, with the host (for the log line).
    pub cause: String,
    /// Whether it ran out of time (the Go client's `error_kind="timeout"`).
    pub timed_out: bool,
}

/// What a worker or task reports to the loop.
pub enum Completion {
    /// A poll answered (`Ok`) or failed.
    Poll {
        /// The poll.
        id: PollId,
        /// The instant its head arrived, the head and the body; or why it failed.
        result: Result<(Instant, ResponseHead, Vec<u8>), PollFailure>,
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
        /// The answer's head, or whether the request may have been written and why it failed
        /// (in words with the host, for the log line).
        result: Result<ResponseHead, (bool, String)>,
    },
    /// Bytes from a stdio child's stdout.
    StdioOut {
        /// The child.
        child: ChildId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// A stdio child's stdout closed.
    StdioExit {
        /// The child.
        child: ChildId,
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
    /// The poll in flight (if any) is dropped without a report.
    fn cancel_poll(&mut self);
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

    /// Sends a response POST, bounded by `limit` from when the attempt starts; reports
    /// [`Completion::Post`].
    fn start_post(
        &mut self,
        id: PostId,
        cmd: CommandId,
        request: Request,
        limit: AttemptLimit,
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

/// The tunnel, before the runtime exists.
pub struct Prepared {
    tunnel: Tunnel,
    grace: Duration,
    /// Why `/readyz` stays 503 whatever the engine says (a failed start-up probe).
    startup_problem: Option<String>,
}

impl Prepared {
    /// The tunnel for `config` (stdio children not started yet).
    pub fn new(config: &TunnelConfig, now: Instant) -> Result<Self, Error> {
        let tunnel = Tunnel::new(
            tunnel::Config {
                engine: config.engine.clone(),
                targets: config.targets.clone(),
                stdio: config.stdio.clone(),
                grace: config.grace,
                restart_seed: crate::random_seed(),
                mcp_extra_headers: config.mcp_extra_headers.clone(),
                harpoon: config.harpoon.clone(),
            },
            now,
        )?;
        Ok(Prepared {
            tunnel,
            grace: config.grace,
            startup_problem: None,
        })
    }

    /// Keeps `/readyz` at 503 with `problem` for the life of the run (a failed start-up probe).
    #[must_use]
    pub fn with_startup_problem(mut self, problem: Option<String>) -> Self {
        self.startup_problem = problem;
        self
    }

    /// Starts the stdio children on `rt`, logs the start and gives the tunnel its first
    /// timeout. `companion` is the managed cloudflared's state (it said ready), if one runs.
    pub fn start<R: Runtime>(
        self,
        rt: R,
        log: Arc<Logger>,
        status: Arc<Status>,
        companion: Option<CompanionState>,
        driver: &str,
        now: Instant,
    ) -> DriverCore<R> {
        let mut d = DriverCore {
            tunnel: self.tunnel,
            report: Report::new(Arc::clone(&log)),
            log,
            status,
            children: BTreeMap::new(),
            grace: self.grace,
            companion,
            fatal: None,
            poll_started: None,
            rt,
        };
        d.report.metrics.startup_problem = self.startup_problem;
        d.report.metrics.tunnel_id = d.tunnel.config().tunnel_id.clone();
        d.report.activity = Arc::clone(d.status.activity());
        d.report.metrics.queue_capacity = d.tunnel.config().max_in_flight;
        d.report.metrics.worker_capacity = d.tunnel.config().max_concurrent_forwards;
        // The tunnel's first outputs start the stdio children.
        d.pump();
        d.log.log(
            Level::Info,
            "tunnel client started",
            &[
                ("driver", &driver),
                ("tunnel_id", &d.tunnel.config().tunnel_id.clone()),
                ("channels", &d.tunnel.config().channels.join(",")),
            ],
        );
        d.tunnel.handle_timeout(now);
        d
    }
}

/// The loop's state: the tunnel, the children the runtime runs, the report, and the runtime.
pub struct DriverCore<R: Runtime> {
    tunnel: Tunnel,
    log: Arc<Logger>,
    status: Arc<Status>,
    /// The running stdio child of each stdio channel (by the channel's index).
    children: BTreeMap<usize, (ChildId, R::Child)>,
    report: Report,
    grace: Duration,
    companion: Option<CompanionState>,
    /// Why the client stops with an error (the companion died), if it does.
    fatal: Option<Error>,
    /// When the running poll was sent (for `commands_poll_latency_seconds`).
    poll_started: Option<Instant>,
    /// The runtime performing the work.
    pub rt: R,
}

impl<R: Runtime> DriverCore<R> {
    /// Performs every output, publishes the metrics, and says what to wait for: the earliest
    /// deadline (`None`: only a completion), or `Break` when the loop is done (stopping, and
    /// idle or past the grace period).
    pub fn settle(&mut self) -> ControlFlow<(), Option<Instant>> {
        self.pump();
        self.report.metrics.update(
            &self.tunnel.health(),
            self.companion,
            self.tunnel.is_stopping(),
        );
        self.status.publish(self.report.metrics.clone());
        if self.tunnel.is_done(Instant::now()) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(self.tunnel.poll_timeout().map(|t| t.at))
    }

    /// Handles what woke the loop, then the deadlines that passed; `Break` to stop now (a
    /// second signal, or no sender left).
    pub fn wake(&mut self, wake: Wake) -> ControlFlow<()> {
        match wake {
            Wake::Completion(Completion::Signal) => {
                if self.tunnel.is_stopping() {
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
        self.tunnel.handle_timeout(Instant::now());
        ControlFlow::Continue(())
    }

    /// Shutdown: abandons the exchanges in flight, stops the stdio children, runs `then` (what
    /// else only the runtime stops), and logs the end. `Err` when the companion died.
    pub fn finish(mut self, then: impl FnOnce(&mut R)) -> Result<(), Error> {
        self.rt.abandon_all();
        for (_, (_, child)) in std::mem::take(&mut self.children) {
            child.reap();
        }
        then(&mut self.rt);
        let h = self.tunnel.health();
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

    /// Performs the tunnel's outputs until it has none.
    fn pump(&mut self) {
        while let Some(out) = self.tunnel.poll_output() {
            self.perform(out);
        }
    }

    fn perform(&mut self, out: Output) {
        // A refused report names a handle the tunnel issued: it cannot be refused as unknown,
        // and a late one is dropped by the tunnel itself.
        match out {
            Output::Poll {
                id,
                request,
                timeout,
            } => {
                self.report.metrics.polls += 1;
                self.poll_started = Some(Instant::now());
                if self.rt.start_poll(id, request, timeout).is_err() {
                    let _ = self.tunnel.handle_poll_failed(Instant::now(), id);
                }
            }
            Output::CancelPoll { .. } => self.rt.cancel_poll(),
            Output::Forward {
                cmd,
                request,
                deadline,
            } => {
                if self.rt.start_forward(cmd, request, deadline).is_err() {
                    let _ = self.tunnel.handle_forward_not_started(Instant::now(), cmd);
                }
            }
            Output::CancelForward { cmd } => self.rt.cancel_forward(cmd),
            Output::Post {
                id,
                cmd,
                request,
                limit,
            } => {
                self.report.post_started(cmd);
                if self.rt.start_post(id, cmd, request, limit).is_err() {
                    let _ = self.tunnel.handle_post_failed(Instant::now(), id, false);
                }
            }
            Output::CancelPost { id } => self.rt.cancel_post(id),
            Output::Spawn {
                child,
                channel,
                program,
                args,
            } => self.spawn(child, &channel, &program, &args),
            Output::Write { child, bytes } => {
                if let Some((_, c)) = self
                    .children
                    .get(&child.channel)
                    .filter(|(id, _)| *id == child)
                {
                    c.send(bytes);
                }
            }
            Output::Kill { child } => {
                if let Some((_, c)) = self
                    .children
                    .get_mut(&child.channel)
                    .filter(|(id, _)| *id == child)
                {
                    c.kill();
                }
            }
            Output::Event(e) => self.report.tunnel_event(e),
        }
    }

    /// Starts a stdio child and tells the tunnel at once whether it runs.
    fn spawn(&mut self, child: ChildId, channel: &str, program: &str, args: &[String]) {
        let spawn = StdioSpawn {
            program,
            args,
            name: channel,
            child,
        };
        let now = Instant::now();
        match self.rt.spawn_stdio(spawn, &self.log) {
            Ok(c) => {
                if let Some((_, old)) = self.children.insert(child.channel, (child, c)) {
                    old.reap();
                }
                let _ = self.tunnel.handle_spawned(now, child);
            }
            Err(e) => {
                self.log.log(
                    Level::Error,
                    "cannot start stdio server",
                    &[("channel", &channel), ("error", &e)],
                );
                let _ = self.tunnel.handle_spawn_failed(now, child);
            }
        }
    }

    fn complete(&mut self, c: Completion) {
        let now = Instant::now();
        let wall = SystemTime::now();
        // As in `perform`: every report names an issued handle; late ones are dropped.
        match c {
            Completion::Poll { id, result } => {
                self.rt.poll_ended();
                if let Some(started) = self.poll_started.take() {
                    let answered =
                        matches!(&result, Ok((_, h, _)) if (200..300).contains(&h.status));
                    self.report
                        .metrics
                        .poll_ended(now.saturating_duration_since(started), !answered);
                }
                let _ = match result {
                    Ok((received_at, head, body)) => {
                        self.tunnel
                            .handle_poll_response(now, received_at, wall, id, &head, &body)
                    }
                    Err(failure) => {
                        self.report.poll_cause(failure.cause, failure.timed_out);
                        self.tunnel.handle_poll_failed(now, id)
                    }
                };
            }
            Completion::Head { cmd, head } => {
                let _ = self.tunnel.handle_forward_head(now, cmd, head);
            }
            Completion::Body { cmd, chunk } => {
                let _ = self.tunnel.handle_forward_body(now, cmd, &chunk);
            }
            Completion::End { cmd } => {
                self.rt.forward_ended(cmd);
                self.report.forward_ended(cmd);
                let _ = self.tunnel.handle_forward_end(now, cmd);
            }
            Completion::Failed { cmd, failure } => {
                self.rt.forward_ended(cmd);
                self.report.forward_failed(cmd, &failure);
                let _ = self.tunnel.handle_forward_failed(now, cmd, failure);
            }
            Completion::Post { id, cmd, result } => {
                self.rt.post_ended(id);
                self.report.post_ended(cmd, &result);
                let _ = match result {
                    Ok(head) => self.tunnel.handle_post_response(now, wall, id, &head),
                    Err((written, _)) => self.tunnel.handle_post_failed(now, id, written),
                };
            }
            Completion::StdioOut { child, bytes } => {
                let _ = self.tunnel.handle_stdout(now, child, &bytes);
            }
            Completion::StdioExit { child } => {
                if self
                    .children
                    .get(&child.channel)
                    .is_some_and(|(id, _)| *id == child)
                {
                    if let Some((_, c)) = self.children.remove(&child.channel) {
                        c.reap();
                    }
                }
                let _ = self.tunnel.handle_child_exit(now, child);
            }
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
        if !self.tunnel.is_stopping() {
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

    fn begin_shutdown(&mut self) {
        self.log.log(
            Level::Info,
            "signal received: polling stopped, finishing in-flight commands",
            &[
                ("in_flight", &self.tunnel.health().in_flight),
                ("grace_ms", &self.grace.as_millis()),
            ],
        );
        self.tunnel.shutdown(Instant::now());
    }
}

//! `machine`: the module of [`Tunnel`], the whole tunnel client as one machine (what it
//! decides is on [`Tunnel`]). The module is private: `tunnel` re-exports what it exports.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::http::{Request, ResponseHead};
use crate::time::{Duration, Instant, SystemTime};

use super::engine::{
    self, CommandId, ConfigError, Engine, Forward, ForwardKind, Health, PollId, PostId, UsageError,
};
use super::failure::{FailureSource, TunnelFailure};
use super::harpoon::{Harpoon, HarpoonConfig, HarpoonEvent, HarpoonOutput};
use super::server_info::{ChannelBinding, ChannelDeclaration, ServerInfo};
use super::stdio::{DiscardReason, StdioBinding, StdioConfig, StdioOutput};
use super::supervisor::{Exit, Supervisor};
use crate::backoff::Jitter;

/// Extra time a poll may take beyond the requested long-poll wait.
pub const POLL_GUARD: Duration = Duration::from_secs(10);
/// The longest a response POST attempt may take (less when the command's deadline is nearer).
pub const POST_ATTEMPT_CAP: Duration = Duration::from_secs(30);

/// What serves one channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A Streamable HTTP endpoint.
    Http {
        /// Its URL.
        url: String,
    },
    /// A child process speaking newline-delimited JSON-RPC on stdio (argv, no shell).
    Stdio {
        /// The program and its arguments.
        argv: Vec<String>,
    },
}

/// One channel's MCP server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The channel name.
    pub channel: String,
    /// The server.
    pub kind: TargetKind,
}

/// How the tunnel is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// The engine's configuration (its `channels` should name the targets' channels).
    pub engine: engine::Config,
    /// One server per served channel.
    pub targets: Vec<Target>,
    /// How the stdio bindings behave.
    pub stdio: StdioConfig,
    /// How long admitted commands may take to finish after [`Tunnel::shutdown`].
    pub grace: Duration,
    /// Seeds the jitter of the stdio restart backoff (the caller draws it from its own
    /// randomness).
    pub restart_seed: u64,
    /// Harpoon, the built-in allowlisted HTTP client on the reserved [`HARPOON_CHANNEL`]: served
    /// while it has a target. The tunnel then serves the channel and declares it in
    /// `X-Tunnel-MCP-Server-Info` (version 2, `stateless` and `proc_affinity`); without a target
    /// it does neither, and a command for the channel is answered as for any unserved channel.
    pub harpoon: Option<HarpoonConfig>,
    /// Headers added to every forward to a Streamable HTTP MCP server (`--mcp.extra-headers`),
    /// after the command's own, which win ([`add_extra_headers`](super::forward_headers::add_extra_headers)); never sent
    /// to the control plane, to Harpoon's targets or to a stdio server. A reserved name
    /// ([`is_reserved_extra_header`](super::forward_headers::is_reserved_extra_header)) is a [`ConfigError`].
    pub mcp_extra_headers: Vec<(String, engine::Secret)>,
}

/// The channel name reserved for Harpoon: no target of [`Config::targets`] may take it.
pub const HARPOON_CHANNEL: &str = "harpoon";

/// One stdio child: its channel's index among the stdio channels, and its generation (each start
/// attempt of a channel gets the next one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChildId {
    /// The channel's index (the order of the stdio targets in [`Config::targets`]).
    pub channel: usize,
    /// The child's generation on that channel.
    pub generation: u64,
}

/// How long one response POST attempt may run: until the command's deadline, and at most a cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptLimit {
    /// The command's deadline, if it has one.
    pub deadline: Option<Instant>,
    /// The longest any attempt may take.
    pub cap: Duration,
}

impl AttemptLimit {
    /// The time an attempt starting at `now` may take.
    pub fn remaining(&self, now: Instant) -> Duration {
        self.deadline
            .map(|d| d.saturating_duration_since(now).min(self.cap))
            .unwrap_or(self.cap)
    }
}

/// What a forward carries, for the host's per-command log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Forwarded {
    /// A JSON-RPC payload and its method, when it has one.
    JsonRpc {
        /// The method.
        method: Option<String>,
    },
    /// A session termination.
    SessionTermination,
}

/// A fact the tunnel reports: the engine's, and those of the composition. Never carries
/// payloads, header values or secrets.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// An engine event.
    Engine(engine::Event),
    /// A forward starts (to an HTTP or a stdio server, or refused just after).
    ForwardStarted {
        /// The command.
        cmd: CommandId,
        /// Its opaque request id.
        request_id: String,
        /// Its channel.
        channel: String,
        /// What it carries.
        what: Forwarded,
    },
    /// A stdio binding refused a forward (a full queue, a payload it cannot write, a session
    /// termination): it is answered with this failure, before any contact with the child.
    ForwardRefused {
        /// The opaque request id.
        request_id: String,
        /// The failure posted.
        failure: TunnelFailure,
    },
    /// An `initialize` deadline passed on a stdio channel: its child is restarted (fail-closed).
    StdioRestarting {
        /// The channel.
        channel: String,
    },
    /// A stdio child exited on its own: its commands fail with `transport_closed`, and it is
    /// restarted after a backoff.
    StdioExited {
        /// The channel.
        channel: String,
    },
    /// A frame from a stdio child was dropped.
    StdioDiscarded {
        /// The channel.
        channel: String,
        /// Why.
        reason: DiscardReason,
    },
    /// A fact of Harpoon's (a finished call, dropped headers, a connection reset).
    Harpoon(HarpoonEvent),
}

/// An output of the tunnel: work for the driver, or a fact for its log.
#[derive(Debug)]
pub enum Output {
    /// Send this poll, bounded by `timeout`; report with [`Tunnel::handle_poll_response`] or
    /// [`Tunnel::handle_poll_failed`].
    Poll {
        /// The poll.
        id: PollId,
        /// The `GET` request.
        request: Request,
        /// The longest the poll may take (the long-poll wait and [`POLL_GUARD`]).
        timeout: Duration,
    },
    /// Abandon the poll in flight (shutdown): report nothing more for it.
    CancelPoll {
        /// The poll.
        id: PollId,
    },
    /// Send this request to the channel's Streamable HTTP server; report with the
    /// `handle_forward_*` inputs, or [`Tunnel::handle_forward_not_started`].
    Forward {
        /// The command.
        cmd: CommandId,
        /// The request, exactly.
        request: Request,
        /// Apply this deadline to connect, write and read (an expired forward need not be sent:
        /// the tunnel drops it on its own).
        deadline: Option<Instant>,
    },
    /// Stop the HTTP forward (close its connection) and report nothing more for it.
    CancelForward {
        /// The command.
        cmd: CommandId,
    },
    /// Send this response POST; report with [`Tunnel::handle_post_response`] or
    /// [`Tunnel::handle_post_failed`].
    Post {
        /// The attempt.
        id: PostId,
        /// Its command.
        cmd: CommandId,
        /// The request (the same bytes on every attempt).
        request: Request,
        /// How long the attempt may take, from when it starts.
        limit: AttemptLimit,
    },
    /// Abort this POST (its command's deadline passed); report nothing more for it.
    CancelPost {
        /// The attempt.
        id: PostId,
    },
    /// Start a stdio child (argv, no shell), then report at once with [`Tunnel::handle_spawned`]
    /// or [`Tunnel::handle_spawn_failed`]; later, its stdout with [`Tunnel::handle_stdout`] and
    /// its exit (stdout closed) with [`Tunnel::handle_child_exit`].
    Spawn {
        /// The child.
        child: ChildId,
        /// The channel name (for thread names and logs).
        channel: String,
        /// The program (argv\[0\]).
        program: String,
        /// The rest of argv.
        args: Vec<String>,
    },
    /// Write these bytes (one frame and its `\n`) to the child's stdin.
    Write {
        /// The child.
        child: ChildId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Kill the child; keep it until its exit is reported.
    Kill {
        /// The child.
        child: ChildId,
    },
    /// A fact for the host's log or metrics.
    Event(Event),
}

/// Why [`Tunnel::poll_timeout`] wants to be woken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeoutReason {
    /// An engine deadline (the next poll, a command's deadline, a POST retry).
    Engine(engine::TimeoutReason),
    /// A stdio child's restart is due.
    StdioRestart {
        /// The channel's index.
        channel: usize,
    },
    /// The shutdown grace period ends.
    Grace,
    /// Harpoon's connection reaches its maximum age, or a deadline of its server core.
    Harpoon,
}

/// The next instant the tunnel needs [`Tunnel::handle_timeout`], and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// When.
    pub at: Instant,
    /// Why.
    pub reason: TimeoutReason,
}

/// One stdio channel: its binding, its supervisor, and frames waiting for a child.
struct StdioChannel {
    name: String,
    program: String,
    args: Vec<String>,
    binding: StdioBinding,
    supervisor: Supervisor,
    /// Frames written while no child runs (sent to the next one).
    pending: Vec<Vec<u8>>,
    /// The start under way replaces a child the binding failed closed on: once it runs, the
    /// binding admits the commands that waited for it.
    replacing: bool,
}

#[derive(Clone, Debug)]
enum Route {
    Http(String),
    Stdio(usize),
    Harpoon,
}

/// The whole tunnel client as one machine: the [`Engine`], the route table (one
/// MCP server per channel), one [`StdioBinding`] and restart [`Supervisor`] per stdio channel,
/// and the shutdown grace period.
///
/// The engine decides the tunnel protocol, the binding frames one child's JSON-RPC, the
/// supervisor restarts children; the tunnel is where they meet, so a driver only performs what
/// comes out of [`Tunnel::poll_output`] (polls, forwards to HTTP servers, response POSTs, stdio
/// spawns, writes and kills) and reports what happened with the `handle_*` inputs. It decides:
///
/// - **routing**: a forward goes to its channel's server; a stdio forward goes to that channel's
///   binding (the driver sees only its writes), an HTTP forward becomes the request to send;
///   a forward for a channel with no server, or one the driver could not start, is answered with
///   a `client_internal` failure before any contact with a server;
/// - **deadlines**: the engine's cancellation of a stdio command is that binding's deadline (it
///   retires the id, the pipes stay open); of an HTTP command, a [`Output::CancelForward`];
/// - **stdio children** ([`super::supervisor`]): started at once, restarted after a crash or a
///   failed start with backoff, replaced at once when the binding fails closed; frames the
///   binding writes while no child runs wait for the next child, and are dropped when a start
///   fails or a child crashes (their commands are answered `transport_closed`);
/// - **bounds on attempts**: a poll may take [`POLL_GUARD`] longer than its long-poll wait; a
///   response POST attempt at most [`POST_ATTEMPT_CAP`], less when the command's deadline is
///   nearer ([`AttemptLimit`]);
/// - **shutdown** ([`Tunnel::shutdown`]): polling stops, the poll in flight is abandoned
///   ([`Output::CancelPoll`]), admitted commands finish within [`Config::grace`]
///   ([`Tunnel::is_done`]).
///
/// It follows the step-function contract (ARCHITECTURE.md, "The step-function contract"): inputs through `handle_*(now, ..)`,
/// outputs through [`Tunnel::poll_output`] (drain after every input), and one
/// [`Tunnel::poll_timeout`] labelled with its reason. Late inputs follow the convention of the
/// [`tunnel` module documentation](super#late-inputs).
pub struct Tunnel {
    engine: Engine,
    routes: BTreeMap<String, Route>,
    stdio: Vec<StdioChannel>,
    /// Commands whose forward runs on a stdio binding, and which one.
    on_stdio: BTreeMap<CommandId, usize>,
    /// Harpoon, while it has a target.
    harpoon: Option<Harpoon>,
    /// Commands Harpoon serves (their forward reports are Harpoon's outbound requests).
    on_harpoon: BTreeSet<CommandId>,
    poll_timeout: Duration,
    grace: Duration,
    /// Added to every forward to an HTTP MCP server.
    mcp_extra_headers: Vec<(String, engine::Secret)>,
    stopping: Option<Instant>,
    outputs: VecDeque<Output>,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("engine", &self.engine)
            .field("stdio_channels", &self.stdio.len())
            .field("outputs", &self.outputs.len())
            .finish_non_exhaustive()
    }
}

impl Tunnel {
    /// A tunnel for `config`: its first outputs start the stdio children; the first poll is due
    /// at `now` (emitted by the first [`Tunnel::handle_timeout`]).
    pub fn new(config: Config, now: Instant) -> Result<Self, ConfigError> {
        let poll_timeout = config.engine.poll_wait.saturating_add(POLL_GUARD);
        if config.targets.iter().any(|t| t.channel == HARPOON_CHANNEL) {
            return Err(ConfigError::Invalid(
                "the channel name 'harpoon' is reserved for the built-in Harpoon server",
            ));
        }
        let harpoon = match config.harpoon {
            Some(h) if !h.registry.is_empty() => Some(
                Harpoon::new(h, now)
                    .map_err(|_| ConfigError::Invalid("harpoon's MCP server cannot be set up"))?,
            ),
            _ => None,
        };
        for (name, value) in &config.mcp_extra_headers {
            if super::forward_headers::is_reserved_extra_header(name) {
                return Err(ConfigError::Invalid(
                    "mcp extra headers may not set the forward's own or MCP's headers",
                ));
            }
            crate::http::Headers::new()
                .append(name.clone(), value.expose().to_owned())
                .map_err(|_| ConfigError::Invalid("an mcp extra header is not a valid header"))?;
        }
        let mut engine_config = config.engine;
        declare_harpoon(&mut engine_config, harpoon.is_some());
        let engine = Engine::new(engine_config, now)?;
        let mut seeds = Jitter::new(config.restart_seed);
        let mut routes = BTreeMap::new();
        if harpoon.is_some() {
            routes.insert(HARPOON_CHANNEL.to_owned(), Route::Harpoon);
        }
        let mut stdio = Vec::new();
        for t in config.targets {
            match t.kind {
                TargetKind::Http { url } => {
                    routes.insert(t.channel, Route::Http(url));
                }
                TargetKind::Stdio { argv } => {
                    let mut argv = argv.into_iter();
                    let Some(program) = argv.next() else {
                        return Err(ConfigError::Invalid("a stdio target needs a command"));
                    };
                    routes.insert(t.channel.clone(), Route::Stdio(stdio.len()));
                    stdio.push(StdioChannel {
                        name: t.channel,
                        program,
                        args: argv.collect(),
                        binding: StdioBinding::new(config.stdio.clone()),
                        supervisor: Supervisor::new(seeds.next_u64()),
                        pending: Vec::new(),
                        replacing: false,
                    });
                }
            }
        }
        let mut tunnel = Tunnel {
            engine,
            routes,
            stdio,
            on_stdio: BTreeMap::new(),
            harpoon,
            on_harpoon: BTreeSet::new(),
            poll_timeout,
            grace: config.grace,
            mcp_extra_headers: config.mcp_extra_headers,
            stopping: None,
            outputs: VecDeque::new(),
        };
        for i in 0..tunnel.stdio.len() {
            tunnel.start_child(i);
        }
        Ok(tunnel)
    }

    /// The engine's configuration.
    pub fn config(&self) -> &engine::Config {
        self.engine.config()
    }

    /// The engine's state, for health checks and metrics.
    pub fn health(&self) -> Health {
        self.engine.health()
    }

    // -----------------------------------------------------------------------------------------
    // Outputs.

    /// The next output, or `None` until the next input or timeout.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The next instant [`Tunnel::handle_timeout`] must be called, and why.
    pub fn poll_timeout(&self) -> Option<Timeout> {
        let engine = self.engine.poll_timeout().map(|t| Timeout {
            at: t.at,
            reason: TimeoutReason::Engine(t.reason),
        });
        let restarts = self.stdio.iter().enumerate().filter_map(|(i, s)| {
            s.supervisor.restart_at().map(|at| Timeout {
                at,
                reason: TimeoutReason::StdioRestart { channel: i },
            })
        });
        let grace = self.stopping.map(|at| Timeout {
            at,
            reason: TimeoutReason::Grace,
        });
        let harpoon = self
            .harpoon
            .as_ref()
            .and_then(Harpoon::poll_timeout)
            .map(|at| Timeout {
                at,
                reason: TimeoutReason::Harpoon,
            });
        engine
            .into_iter()
            .chain(restarts)
            .chain(grace)
            .chain(harpoon)
            .min_by_key(|t| t.at)
    }

    // -----------------------------------------------------------------------------------------
    // Time and shutdown.

    /// Time passed: engine deadlines, due stdio restarts. Calling it early or twice is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now);
        if let Some(h) = self.harpoon.as_mut() {
            h.handle_timeout(now);
        }
        for i in 0..self.stdio.len() {
            if self
                .stdio
                .get(i)
                .is_some_and(|s| s.supervisor.restart_due(now))
            {
                self.start_child(i);
            }
        }
        self.pump(now);
    }

    /// Stops polling and abandons the poll in flight; admitted commands may finish until `now`
    /// plus [`Config::grace`]. A second call changes nothing.
    pub fn shutdown(&mut self, now: Instant) {
        if self.stopping.is_some() {
            return;
        }
        self.engine.shutdown(now);
        if let Some(id) = self.engine.poll_in_flight() {
            self.outputs.push_back(Output::CancelPoll { id });
            // The abandoned poll reports nothing: it ended.
            let _ = self.engine.handle_poll_failed(now, id);
        }
        self.stopping = Some(now.checked_add(self.grace).unwrap_or(now));
        self.pump(now);
    }

    /// Whether [`Tunnel::shutdown`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_some()
    }

    /// Whether the tunnel is done at `now`: stopping, and idle (no poll, no command) or past the
    /// grace period.
    pub fn is_done(&self, now: Instant) -> bool {
        self.stopping
            .is_some_and(|until| self.engine.is_idle() || now >= until)
    }

    // -----------------------------------------------------------------------------------------
    // Polls and response POSTs (the engine's inputs, as they are).

    /// A poll's response arrived and its body was read; see [`Engine::handle_poll_response`].
    pub fn handle_poll_response(
        &mut self,
        now: Instant,
        received_at: Instant,
        wall: SystemTime,
        id: PollId,
        head: &ResponseHead,
        body: &[u8],
    ) -> Result<(), UsageError> {
        let r = self
            .engine
            .handle_poll_response(now, received_at, wall, id, head, body);
        self.pump(now);
        r
    }

    /// A poll failed before a response arrived, or could not be started.
    pub fn handle_poll_failed(&mut self, now: Instant, id: PollId) -> Result<(), UsageError> {
        let r = self.engine.handle_poll_failed(now, id);
        self.pump(now);
        r
    }

    /// A response POST was answered; see [`Engine::handle_post_response`].
    pub fn handle_post_response(
        &mut self,
        now: Instant,
        wall: SystemTime,
        id: PostId,
        head: &ResponseHead,
    ) -> Result<(), UsageError> {
        let r = self.engine.handle_post_response(now, wall, id, head);
        self.pump(now);
        r
    }

    /// A response POST failed without a response, or could not be started (`written: false`);
    /// see [`Engine::handle_post_failed`].
    pub fn handle_post_failed(
        &mut self,
        now: Instant,
        id: PostId,
        written: bool,
    ) -> Result<(), UsageError> {
        let r = self.engine.handle_post_failed(now, id, written);
        self.pump(now);
        r
    }

    // -----------------------------------------------------------------------------------------
    // HTTP forwards.

    /// The HTTP MCP server's response head arrived.
    pub fn handle_forward_head(
        &mut self,
        now: Instant,
        cmd: CommandId,
        head: ResponseHead,
    ) -> Result<(), UsageError> {
        let r = match self.harpoon_fetch(cmd) {
            Some(h) => h.handle_fetch_head(now, cmd, head),
            None => self.engine.handle_forward_head(now, cmd, head),
        };
        self.pump(now);
        r
    }

    /// A chunk of the HTTP MCP server's response body.
    pub fn handle_forward_body(
        &mut self,
        now: Instant,
        cmd: CommandId,
        chunk: &[u8],
    ) -> Result<(), UsageError> {
        let r = match self.harpoon_fetch(cmd) {
            Some(h) => h.handle_fetch_body(now, cmd, chunk),
            None => self.engine.handle_forward_body(now, cmd, chunk),
        };
        self.pump(now);
        r
    }

    /// The HTTP MCP server's response body ended.
    pub fn handle_forward_end(&mut self, now: Instant, cmd: CommandId) -> Result<(), UsageError> {
        let r = match self.harpoon_fetch(cmd) {
            Some(h) => h.handle_fetch_end(now, cmd),
            None => self.engine.handle_forward_end(now, cmd),
        };
        self.pump(now);
        r
    }

    /// The HTTP forward failed before a usable reply (connect, TLS, timeout, reset...).
    pub fn handle_forward_failed(
        &mut self,
        now: Instant,
        cmd: CommandId,
        failure: TunnelFailure,
    ) -> Result<(), UsageError> {
        let r = match self.harpoon_fetch(cmd) {
            Some(h) => h.handle_fetch_failed(now, cmd, failure),
            None => self.engine.handle_forward_failed(now, cmd, failure),
        };
        self.pump(now);
        r
    }

    /// The driver could not start the forward (a full queue): it is answered with a
    /// `client_internal` failure, before any contact with the server.
    pub fn handle_forward_not_started(
        &mut self,
        now: Instant,
        cmd: CommandId,
    ) -> Result<(), UsageError> {
        self.handle_forward_failed(now, cmd, not_started())
    }

    // -----------------------------------------------------------------------------------------
    // Stdio children.

    /// The child of an [`Output::Spawn`] runs: the frames waiting for it are written.
    pub fn handle_spawned(&mut self, now: Instant, child: ChildId) -> Result<(), UsageError> {
        let s = channel(&mut self.stdio, child)?;
        if !s.supervisor.started(now, child.generation) {
            return Ok(());
        }
        for bytes in std::mem::take(&mut s.pending) {
            self.outputs.push_back(Output::Write { child, bytes });
        }
        if std::mem::take(&mut s.replacing) {
            // The replacement can take the commands that waited for it.
            s.binding.handle_child_exit(now);
        }
        self.pump(now);
        Ok(())
    }

    /// The child of an [`Output::Spawn`] could not be started (the driver logs why): what waits
    /// for it is answered `transport_closed`, and a restart is scheduled after a backoff.
    pub fn handle_spawn_failed(&mut self, now: Instant, child: ChildId) -> Result<(), UsageError> {
        let s = channel(&mut self.stdio, child)?;
        if !s.supervisor.start_failed(now, child.generation) {
            return Ok(());
        }
        s.replacing = false;
        // End a pending restart (its held commands are admitted and their frames kept), then
        // answer everything admitted now rather than at its deadline, and drop those frames.
        s.binding.handle_child_exit(now);
        self.pump(now);
        if let Some(s) = self.stdio.get_mut(child.channel) {
            s.binding.handle_child_exit(now);
            s.pending.clear();
        }
        self.pump(now);
        Ok(())
    }

    /// Bytes from the child's stdout, split anywhere.
    pub fn handle_stdout(
        &mut self,
        now: Instant,
        child: ChildId,
        bytes: &[u8],
    ) -> Result<(), UsageError> {
        let s = channel(&mut self.stdio, child)?;
        if s.supervisor.current() == Some(child.generation) {
            s.binding.handle_stdout(now, bytes);
            self.pump(now);
        }
        Ok(())
    }

    /// The child's stdout closed (it exited, or its pipes did); the driver lets go of it.
    pub fn handle_child_exit(&mut self, now: Instant, child: ChildId) -> Result<(), UsageError> {
        let s = channel(&mut self.stdio, child)?;
        match s.supervisor.exited(now, child.generation) {
            Exit::Stale => return Ok(()),
            Exit::Replace => {
                s.replacing = true;
                self.start_child(child.channel);
            }
            Exit::Crashed => {
                s.pending.clear();
                self.outputs.push_back(Output::Event(Event::StdioExited {
                    channel: s.name.clone(),
                }));
                s.binding.handle_child_exit(now);
            }
        }
        self.pump(now);
        Ok(())
    }

    /// Emits the start of channel `i`'s next child.
    fn start_child(&mut self, i: usize) {
        let Some(s) = self.stdio.get_mut(i) else {
            return;
        };
        let generation = s.supervisor.begin_start();
        self.outputs.push_back(Output::Spawn {
            child: ChildId {
                channel: i,
                generation,
            },
            channel: s.name.clone(),
            program: s.program.clone(),
            args: s.args.clone(),
        });
    }

    // -----------------------------------------------------------------------------------------
    // The composition.

    /// Drains the engine's and the bindings' outputs until neither has any: what is for the
    /// driver is queued, what is for another part is fed to it at `now`, the instant of the
    /// input being handled. Every input ends with it.
    fn pump(&mut self, now: Instant) {
        loop {
            let mut progressed = false;
            while let Some(out) = self.engine.poll_output() {
                progressed = true;
                self.engine_output(now, out);
            }
            for i in 0..self.stdio.len() {
                while let Some(out) = self.stdio.get_mut(i).and_then(|s| s.binding.poll_output()) {
                    progressed = true;
                    self.stdio_output(now, i, out);
                }
            }
            while let Some(out) = self.harpoon.as_mut().and_then(Harpoon::poll_output) {
                progressed = true;
                self.harpoon_output(now, out);
            }
            if !progressed {
                return;
            }
        }
    }

    fn engine_output(&mut self, now: Instant, out: engine::Output) {
        match out {
            engine::Output::Poll { id, request } => self.outputs.push_back(Output::Poll {
                id,
                request,
                timeout: self.poll_timeout,
            }),
            engine::Output::Forward(f) => self.forward(now, f),
            engine::Output::CancelForward { cmd } => {
                if let Some(i) = self.on_stdio.remove(&cmd) {
                    if let Some(s) = self.stdio.get_mut(i) {
                        s.binding.handle_deadline(now, cmd);
                    }
                } else if self.on_harpoon.remove(&cmd) {
                    if let Some(h) = self.harpoon.as_mut() {
                        h.cancel(now, cmd);
                    }
                } else {
                    self.outputs.push_back(Output::CancelForward { cmd });
                }
            }
            engine::Output::Post {
                id,
                cmd,
                request,
                deadline,
            } => self.outputs.push_back(Output::Post {
                id,
                cmd,
                request,
                limit: AttemptLimit {
                    deadline,
                    cap: POST_ATTEMPT_CAP,
                },
            }),
            engine::Output::CancelPost { id } => self.outputs.push_back(Output::CancelPost { id }),
            engine::Output::Event(e) => self.outputs.push_back(Output::Event(Event::Engine(e))),
        }
    }

    fn forward(&mut self, now: Instant, f: Forward) {
        let what = match &f.kind {
            ForwardKind::JsonRpc { method, .. } => Forwarded::JsonRpc {
                method: method.clone(),
            },
            ForwardKind::SessionTermination => Forwarded::SessionTermination,
        };
        self.outputs.push_back(Output::Event(Event::ForwardStarted {
            cmd: f.cmd,
            request_id: f.request_id.clone(),
            channel: f.channel.clone(),
            what,
        }));
        match self.routes.get(&f.channel) {
            Some(Route::Stdio(i)) => {
                let i = *i;
                let Some(s) = self.stdio.get_mut(i) else {
                    return;
                };
                match s.binding.handle_forward(now, f.cmd, &f.kind) {
                    Ok(()) => {
                        self.on_stdio.insert(f.cmd, i);
                    }
                    Err(failure) => {
                        self.outputs.push_back(Output::Event(Event::ForwardRefused {
                            request_id: f.request_id,
                            failure,
                        }));
                        let _ = self.engine.handle_forward_failed(now, f.cmd, failure);
                    }
                }
            }
            Some(Route::Harpoon) => {
                let Some(h) = self.harpoon.as_mut() else {
                    return;
                };
                match &f.kind {
                    ForwardKind::JsonRpc { payload, .. } => {
                        self.on_harpoon.insert(f.cmd);
                        h.handle_command(now, f.cmd, payload.get(), f.deadline);
                    }
                    // Harpoon has no Streamable HTTP session to close (as stdio has none).
                    ForwardKind::SessionTermination => {
                        let failure = super::stdio::session_termination_failure();
                        self.outputs.push_back(Output::Event(Event::ForwardRefused {
                            request_id: f.request_id,
                            failure,
                        }));
                        let _ = self.engine.handle_forward_failed(now, f.cmd, failure);
                    }
                }
            }
            Some(Route::Http(url)) => {
                let (cmd, deadline) = (f.cmd, f.deadline);
                let mut request = f.into_http_request(url.clone());
                super::forward_headers::add_extra_headers(
                    &mut request.headers,
                    &self.mcp_extra_headers,
                );
                self.outputs.push_back(Output::Forward {
                    cmd,
                    request,
                    deadline,
                });
            }
            // The engine only forwards served channels; answer rather than lose it.
            None => {
                let _ = self.engine.handle_forward_failed(now, f.cmd, not_started());
            }
        }
    }

    /// Harpoon, when `cmd` is one of its commands (its forward reports are Harpoon's).
    fn harpoon_fetch(&mut self, cmd: CommandId) -> Option<&mut Harpoon> {
        if self.on_harpoon.contains(&cmd) {
            self.harpoon.as_mut()
        } else {
            None
        }
    }

    fn harpoon_output(&mut self, now: Instant, out: HarpoonOutput) {
        // Reports for a command the engine already dropped are late: the engine ignores them.
        match out {
            HarpoonOutput::Fetch {
                cmd,
                request,
                deadline,
            } => self.outputs.push_back(Output::Forward {
                cmd,
                request,
                deadline,
            }),
            HarpoonOutput::CancelFetch { cmd } => {
                self.outputs.push_back(Output::CancelForward { cmd });
            }
            HarpoonOutput::Message { cmd, json } => {
                let _ = self.engine.handle_forward_message(now, cmd, &json);
            }
            HarpoonOutput::Reply { cmd, json } => {
                self.on_harpoon.remove(&cmd);
                let _ = self.engine.handle_forward_message(now, cmd, &json);
            }
            HarpoonOutput::Acknowledged { cmd } => {
                self.on_harpoon.remove(&cmd);
                let _ = self.engine.handle_forward_acknowledged(now, cmd);
            }
            HarpoonOutput::Failed { cmd, failure } => {
                self.on_harpoon.remove(&cmd);
                let _ = self.engine.handle_forward_failed(now, cmd, failure);
            }
            HarpoonOutput::Event(e) => self.outputs.push_back(Output::Event(Event::Harpoon(e))),
        }
    }

    fn stdio_output(&mut self, now: Instant, i: usize, out: StdioOutput) {
        // Reports for a command the engine already dropped are late: the engine ignores them.
        match out {
            StdioOutput::Write(bytes) => {
                let Some(s) = self.stdio.get_mut(i) else {
                    return;
                };
                match s.supervisor.current() {
                    Some(generation) => self.outputs.push_back(Output::Write {
                        child: ChildId {
                            channel: i,
                            generation,
                        },
                        bytes,
                    }),
                    None => s.pending.push(bytes),
                }
            }
            StdioOutput::Message { cmd, json } => {
                let _ = self.engine.handle_forward_message(now, cmd, &json);
            }
            StdioOutput::Response { cmd, json } => {
                self.on_stdio.remove(&cmd);
                let _ = self.engine.handle_forward_message(now, cmd, &json);
            }
            StdioOutput::NotificationSent { cmd } => {
                self.on_stdio.remove(&cmd);
                let _ = self.engine.handle_forward_acknowledged(now, cmd);
            }
            StdioOutput::Failed { cmd, reason } => {
                self.on_stdio.remove(&cmd);
                let _ = self
                    .engine
                    .handle_forward_failed(now, cmd, reason.to_tunnel_failure());
            }
            StdioOutput::Restart => self.restart(i),
            StdioOutput::Discarded { reason, .. } => {
                let channel = self
                    .stdio
                    .get(i)
                    .map(|s| s.name.clone())
                    .unwrap_or_default();
                self.outputs
                    .push_back(Output::Event(Event::StdioDiscarded { channel, reason }));
            }
        }
    }

    /// The binding failed closed: kill the child (its exit starts the replacement), or start the
    /// replacement now when none runs.
    fn restart(&mut self, i: usize) {
        let Some(s) = self.stdio.get_mut(i) else {
            return;
        };
        self.outputs
            .push_back(Output::Event(Event::StdioRestarting {
                channel: s.name.clone(),
            }));
        if let Some(generation) = s.supervisor.request_restart() {
            self.outputs.push_back(Output::Kill {
                child: ChildId {
                    channel: i,
                    generation,
                },
            });
        } else if s.supervisor.is_starting() {
            // The start under way is the replacement.
            s.replacing = true;
        } else {
            s.replacing = true;
            self.start_child(i);
        }
    }
}

/// The stdio channel of `child`: `Err` for a child never spawned.
fn channel(stdio: &mut [StdioChannel], child: ChildId) -> Result<&mut StdioChannel, UsageError> {
    match stdio.get_mut(child.channel) {
        Some(s) if s.supervisor.issued(child.generation) => Ok(s),
        _ => Err(UsageError::UnknownHandle("stdio child")),
    }
}

/// The failure of a forward the client could not start (a local refusal, before any contact
/// with the server).
fn not_started() -> TunnelFailure {
    TunnelFailure::before_response(FailureSource::ClientInternal, None)
}

/// Serves and declares the `harpoon` channel exactly when Harpoon is on (it has a target), and
/// neither otherwise: the engine answers a command for an unserved channel itself. A
/// declaration the embedder left out stays out, unless Harpoon is the only channel.
fn declare_harpoon(config: &mut engine::Config, on: bool) {
    config.channels.retain(|c| c != HARPOON_CHANNEL);
    if let Some(subs) = config.poll_channels.as_mut() {
        if !on {
            subs.retain(|c| c != HARPOON_CHANNEL);
        }
    }
    let declared = match config.server_info.take() {
        Some(info) => Some(info.channels().to_vec()),
        None if on && config.channels.is_empty() => Some(Vec::new()),
        None => None,
    };
    if on {
        config.channels.push(HARPOON_CHANNEL.to_owned());
    }
    config.server_info = declared.and_then(|mut channels| {
        channels.retain(|c| c.name != HARPOON_CHANNEL);
        if on {
            channels.push(ChannelDeclaration::for_binding(
                HARPOON_CHANNEL,
                ChannelBinding::InMemoryStateless,
            ));
        }
        // Valid before, one canonical name more or less: only an empty list is refused.
        ServerInfo::new(channels).ok()
    });
}

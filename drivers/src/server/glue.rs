//! The engine behind one lock, shared by both drivers: every input (a request from a
//! connection, bytes from stdin, a connection gone, a timer, a [`Responder`] call) takes the
//! lock, reads the clock, feeds the core, lets the application answer
//! ([`Server::serve_with`]) and drains the core's outputs into the sinks (one channel per HTTP
//! exchange, one for stdout), all before the lock is released, so the order the core produced
//! is the order each connection writes. The timer loop is told when the core's next deadline
//! changes. No protocol decision is made here: only where each output goes.
//!
//! The application's methods run under the lock. A [`Responder`] call made from inside one
//! (a tool that changes the tool list and says so) cannot take the lock again: it is queued
//! and applied before the lock is released.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::ThreadId;
use std::time::Instant;

use mcpwire_core::mcp::meta::LoggingLevel;
use mcpwire_core::mcp::server::{
    Application, ExchangeId, HttpMethod, HttpOutput, HttpRequest, Notice, Output, Reply, RequestId,
    Server, UsageError,
};
use mcpwire_core::mcp::ListKind;

use super::transport::{Exchanges, Incoming, Out, Sink};
use super::{HttpHook, HttpOverride};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where stdout lines go: a channel to the writer. `push` never blocks (the order of lines is
/// the order they were pushed under the lock); the writer counts down [`StdoutQueue::bytes`]
/// as it writes, and the stdin reader waits while too much is queued.
pub(crate) trait StdoutSink: Send + 'static {
    fn push(&self, line: Vec<u8>) -> bool;
}

/// How many stdout bytes wait for the writer (the stdin reader stops reading past
/// [`MAX_STDOUT_BACKLOG`]: a client that does not read its answers stops being read).
#[derive(Debug, Default)]
pub(crate) struct StdoutQueue {
    pub bytes: AtomicUsize,
    // The blocking driver's stdin reader waits on these; the smol one polls.
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    changed: Mutex<()>,
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    cv: Condvar,
}

impl StdoutQueue {
    /// The writer took some bytes (or stopped).
    #[cfg(feature = "blocking")]
    pub(crate) fn notify(&self) {
        let _g = lock(&self.changed);
        self.cv.notify_all();
    }

    /// Whether more than `max` bytes wait.
    pub(crate) fn over(&self, max: usize) -> bool {
        self.bytes.load(Ordering::SeqCst) > max
    }

    /// Blocks while more than `max` bytes wait (blocking driver).
    #[cfg(feature = "blocking")]
    pub(crate) fn wait_below(&self, max: usize) {
        let mut g = lock(&self.changed);
        while self.over(max) {
            g = self
                .cv
                .wait_timeout(g, std::time::Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// The stdout bytes queued for the writer past which stdin is not read.
pub(crate) const MAX_STDOUT_BACKLOG: usize = 8 * 1024 * 1024;

/// What the timer loop is told.
pub(crate) trait TimerWake: Send + Sync + 'static {
    /// The core's next deadline changed (to `at`, or none).
    fn rearm(&self, at: Option<Instant>);
}

/// The application, behind a pointer: one copy of the driver's code serves every
/// application type (the binary carries it once, not once per application and driver).
pub(crate) type DynApp = Box<dyn Application + Send>;

/// Marks the current thread as the lock's holder while it lives (a panic in the application
/// unwinds through it too).
struct Holding<'a>(&'a Mutex<Option<ThreadId>>);

impl<'a> Holding<'a> {
    fn new(holder: &'a Mutex<Option<ThreadId>>) -> Self {
        *lock(holder) = Some(std::thread::current().id());
        Holding(holder)
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        *lock(self.0) = None;
    }
}

/// One call on the engine from outside the application's methods.
enum Command {
    Respond(RequestId, Vec<Notice>, Reply),
    Progress(RequestId, f64, Option<f64>, Option<String>),
    Log(
        Option<RequestId>,
        LoggingLevel,
        Option<String>,
        serde_json::Value,
    ),
    CloseStream(RequestId),
    Override(ExchangeId, HttpOverride),
    ListChanged(ListKind),
    ResourceUpdated(String),
    EndListens,
}

struct State<S> {
    server: Server,
    app: DynApp,
    exchanges: HashMap<ExchangeId, S>,
    stdout: Option<Box<dyn StdoutSink>>,
    deadline: Option<Instant>,
    stopped: bool,
    /// What the application asked to change in an exchange's response.
    overrides: HashMap<ExchangeId, HttpOverride>,
}

/// The engine, the application and where outputs go, behind one lock.
pub(crate) struct Shared<S> {
    state: Mutex<State<S>>,
    /// The thread holding `state` (so a [`Responder`] call from inside the application is
    /// queued instead of locking again).
    holder: Mutex<Option<ThreadId>>,
    deferred: Mutex<Vec<Command>>,
    timer: Mutex<Option<Arc<dyn TimerWake>>>,
    pub(crate) stdout_queue: Arc<StdoutQueue>,
    hook: Mutex<Option<Arc<dyn HttpHook>>>,
}

impl<S> Shared<S>
where
    S: Sink,
{
    /// The shared engine, with the application made from its [`Responder`] (which holds the
    /// engine weakly: an application keeping its responder makes no cycle).
    pub(crate) fn new_with(
        server: Server,
        make_app: impl FnOnce(Responder) -> DynApp,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me: &Weak<Self>| {
            let engine: Weak<dyn Control> = me.clone();
            let app = make_app(Responder { engine });
            Shared {
                state: Mutex::new(State {
                    server,
                    app,
                    exchanges: HashMap::new(),
                    stdout: None,
                    deadline: None,
                    stopped: false,
                    overrides: HashMap::new(),
                }),
                holder: Mutex::new(None),
                deferred: Mutex::new(Vec::new()),
                timer: Mutex::new(None),
                stdout_queue: Arc::new(StdoutQueue::default()),
                hook: Mutex::new(None),
            }
        })
    }

    pub(crate) fn set_timer(&self, timer: Arc<dyn TimerWake>) {
        *lock(&self.timer) = Some(timer);
    }

    pub(crate) fn set_hook(&self, hook: Option<Arc<dyn HttpHook>>) {
        *lock(&self.hook) = hook;
    }

    pub(crate) fn set_stdout(&self, sink: Box<dyn StdoutSink>) {
        lock(&self.state).stdout = Some(sink);
    }

    /// Runs `f` on the engine at the current instant, then lets the application answer and
    /// delivers every output. Returns `f`'s result.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Server, Instant) -> R) -> R {
        self.locked(|state, now| f(&mut state.server, now))
    }

    fn locked<R>(&self, f: impl FnOnce(&mut State<S>, Instant) -> R) -> R {
        let mut state = lock(&self.state);
        let _holding = Holding::new(&self.holder);
        let now = Instant::now();
        let r = f(&mut state, now);
        self.settle(&mut state, now);
        r
    }

    /// The application's turn and the outputs' delivery, until nothing is left to do.
    fn settle(&self, state: &mut State<S>, now: Instant) {
        loop {
            let State { server, app, .. } = &mut *state;
            server.serve_with(&mut **app, now);
            let deferred: Vec<Command> = std::mem::take(&mut *lock(&self.deferred));
            let had_deferred = !deferred.is_empty();
            for c in deferred {
                // A deferred call's usage error has no caller left to hear it.
                let _ = apply(state, now, c);
            }
            let hook = lock(&self.hook).clone();
            let closed = deliver(state, &self.stdout_queue, hook.as_deref());
            if closed.is_empty() && !had_deferred {
                break;
            }
            for x in closed {
                // The exchange's connection fell behind or went away while we pushed.
                let _ = state.server.handle_exchange_closed(now, x);
            }
        }
        let next = state.server.poll_timeout().map(|t| t.at);
        if next != state.deadline {
            state.deadline = next;
            if let Some(timer) = lock(&self.timer).as_ref() {
                timer.rearm(next);
            }
        }
    }

    /// Stops the engine: what is in flight is cancelled (answered where it still can be),
    /// streams end, sessions close; later inputs are ignored.
    pub(crate) fn shutdown(&self) {
        self.with(|server, now| server.shutdown(now));
        let mut state = lock(&self.state);
        state.stopped = true;
        state.exchanges.clear();
        state.stdout = None;
    }

    fn command(&self, c: Command) -> Result<usize, UsageError> {
        let me = std::thread::current().id();
        if *lock(&self.holder) == Some(me) {
            lock(&self.deferred).push(c);
            return Ok(0);
        }
        self.locked(|state, now| apply(state, now, c))
    }
}

/// Applies a command; `Ok` carries how many were told (list changes, resource updates, ended
/// listen streams), 0 otherwise.
fn apply<S>(state: &mut State<S>, now: Instant, c: Command) -> Result<usize, UsageError> {
    let server = &mut state.server;
    let done = |r: Result<(), UsageError>| r.map(|()| 0);
    match c {
        Command::Override(x, o) => {
            // Only for an exchange still open (a finished one would keep it forever).
            if state.exchanges.contains_key(&x) {
                state.overrides.insert(x, o);
            }
            Ok(0)
        }
        Command::Respond(r, notices, reply) => {
            done(server.respond_with_notices(now, r, notices, reply))
        }
        Command::Progress(r, p, t, m) => done(server.progress(now, r, p, t, m.as_deref())),
        Command::Log(r, level, logger, data) => {
            done(server.log(now, r, level, logger.as_deref(), data))
        }
        Command::CloseStream(r) => done(server.close_stream(now, r)),
        Command::ListChanged(kind) => Ok(server.list_changed(now, kind)),
        Command::ResourceUpdated(uri) => Ok(server.resource_updated(now, &uri)),
        Command::EndListens => Ok(server.end_listens(now)),
    }
}

/// Drains the core's outputs into the sinks; returns the exchanges whose sink refused a piece.
fn deliver<S: Sink>(
    state: &mut State<S>,
    queue: &StdoutQueue,
    hook: Option<&dyn HttpHook>,
) -> Vec<ExchangeId> {
    let mut closed = Vec::new();
    while let Some(out) = state.server.poll_output() {
        match out {
            Output::Stdio(line) => {
                if let Some(stdout) = &state.stdout {
                    let n = line.len();
                    queue.bytes.fetch_add(n, Ordering::SeqCst);
                    if !stdout.push(line) {
                        queue.bytes.fetch_sub(n, Ordering::SeqCst);
                    }
                }
            }
            Output::Http(x, piece) => {
                let (piece, last) = match piece {
                    HttpOutput::Response {
                        mut status,
                        mut headers,
                        mut body,
                    } => {
                        if let Some(o) = state.overrides.remove(&x) {
                            o.apply(&mut status, &mut headers, Some(&mut body));
                        }
                        if let Some(hook) = hook {
                            hook.answered(status, &headers, &body);
                        }
                        (
                            Out::Response {
                                status,
                                headers,
                                body,
                            },
                            true,
                        )
                    }
                    HttpOutput::StreamStart {
                        mut status,
                        mut headers,
                    } => {
                        if let Some(o) = state.overrides.remove(&x) {
                            o.apply(&mut status, &mut headers, None);
                        }
                        (Out::StreamStart { status, headers }, false)
                    }
                    HttpOutput::StreamEvent(bytes) => (Out::Event(bytes), false),
                    HttpOutput::StreamEnd => (Out::End, true),
                };
                if last {
                    state.overrides.remove(&x);
                }
                let Some(sink) = state.exchanges.get(&x) else {
                    // Its connection is gone (already reported closed) or the server stopped.
                    continue;
                };
                let ok = sink.push(piece);
                if last || !ok {
                    state.exchanges.remove(&x);
                }
                if !ok && !last {
                    closed.push(x);
                }
            }
        }
    }
    closed
}

impl<S> Exchanges<S> for Shared<S>
where
    S: Sink,
{
    type Id = Option<ExchangeId>;

    fn open(&self, req: Incoming, sink: S) -> Option<ExchangeId> {
        let (path, query) = match req.target.split_once('?') {
            Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
            None => (req.target, None),
        };
        let mut request = HttpRequest {
            method: HttpMethod::from_token(&req.method),
            path,
            headers: req.headers,
            body: req.body,
        };
        // The hook runs outside the engine's lock: what it does (an authorization server's
        // token check, a page) never holds up the MCP exchanges.
        let hook = lock(&self.hook).clone();
        if let Some(answer) = hook.and_then(|h| h.before(&mut request, query.as_deref())) {
            sink.push(Out::Response {
                status: answer.status,
                headers: answer.headers,
                body: answer.body,
            });
            return None;
        }
        self.locked(|state, now| {
            let x = state.server.handle_http_request(now, request);
            // After a stop the sink is dropped: its connection sees the end and closes.
            if !state.stopped {
                state.exchanges.insert(x, sink);
            }
            Some(x)
        })
    }

    fn closed(&self, x: Option<ExchangeId>) {
        // A hook's answer was whole: nothing of it is left to close.
        let Some(x) = x else { return };
        self.with(|server, now| {
            // A finished exchange is dropped with Ok; this one was issued, so no error.
            let _ = server.handle_exchange_closed(now, x);
        });
    }
}

/// A handle to the running server for an application that answers later
/// ([`Reply::Pending`]) or reports changes: cloneable, usable from any thread or task. A call
/// made while the server is inside one of the application's methods (on that thread) is
/// applied as soon as the method returns, and then reports `Ok`. (An application method must
/// not wait for another thread that calls the `Responder`: the engine stays locked while the
/// method runs. Return `Reply::Pending` and let that thread answer instead.)
#[derive(Clone)]
pub struct Responder {
    engine: Weak<dyn Control>,
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder").finish_non_exhaustive()
    }
}

trait Control: Send + Sync + 'static {
    fn call(&self, c: Command) -> Result<usize, UsageError>;
}

impl<S> Control for Shared<S>
where
    S: Sink,
{
    fn call(&self, c: Command) -> Result<usize, UsageError> {
        self.command(c)
    }
}

impl Responder {
    pub(crate) fn new<S>(shared: &Arc<Shared<S>>) -> Responder
    where
        S: Sink,
    {
        let engine: Weak<dyn Control> = Arc::downgrade(shared) as Weak<Shared<S>>;
        Responder { engine }
    }

    fn call(&self, c: Command) -> Result<(), UsageError> {
        self.count(c).map(|_| ())
    }

    fn count(&self, c: Command) -> Result<usize, UsageError> {
        match self.engine.upgrade() {
            Some(engine) => engine.call(c),
            // The server is gone: like an answer to a request that ended, dropped.
            None => Ok(0),
        }
    }

    /// Answers `request` (one the application returned [`Reply::Pending`] for). An answer to a
    /// request that ended meanwhile (cancelled, its client gone) is dropped with `Ok`.
    pub fn respond(&self, request: RequestId, reply: Reply) -> Result<(), UsageError> {
        self.call(Command::Respond(request, Vec::new(), reply))
    }

    /// Answers `request` after the progress and log messages in `notices`, in order.
    pub fn respond_with_notices(
        &self,
        request: RequestId,
        notices: Vec<Notice>,
        reply: Reply,
    ) -> Result<(), UsageError> {
        self.call(Command::Respond(request, notices, reply))
    }

    /// Sends `notifications/progress` for `request` now (it must have a `progressToken`).
    pub fn progress(
        &self,
        request: RequestId,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), UsageError> {
        self.call(Command::Progress(
            request,
            progress,
            total,
            message.map(str::to_owned),
        ))
    }

    /// Sends `notifications/message`, for one request (on its stream) or to every legacy
    /// session (`None`), filtered by the log level each asked for.
    pub fn log(
        &self,
        request: Option<RequestId>,
        level: LoggingLevel,
        logger: Option<&str>,
        data: serde_json::Value,
    ) -> Result<(), UsageError> {
        self.call(Command::Log(
            request,
            level,
            logger.map(str::to_owned),
            data,
        ))
    }

    /// Closes `request`'s SSE stream now (SEP-1699 polling): the client reconnects with
    /// `Last-Event-ID` for what follows.
    pub fn close_stream(&self, request: RequestId) -> Result<(), UsageError> {
        self.call(Command::CloseStream(request))
    }

    /// Changes the HTTP response of `exchange` (a request's
    /// [`RequestContext::exchange`](mcpwire_core::mcp::server::RequestContext::exchange)): its
    /// status, extra headers, or its whole body, for an application whose HTTP behaviour is its
    /// own business (a test server answering an error with a `502`, a tool adding a header).
    /// Call it before the answer goes out (from inside the application's method, or before
    /// [`Responder::respond`]); for an exchange already answered it does nothing. A streamed
    /// answer takes the extra headers only (its status and events are the protocol's).
    pub fn override_http(&self, exchange: ExchangeId, change: HttpOverride) {
        let _ = self.call(Command::Override(exchange, change));
    }

    /// A list changed: `notifications/*/list_changed` to whoever listens. Returns how many
    /// sessions and listen streams were told (0 when called from inside an application
    /// method: it is applied when the method returns).
    pub fn list_changed(&self, kind: ListKind) -> usize {
        self.count(Command::ListChanged(kind)).unwrap_or(0)
    }

    /// The resource `uri` changed: `notifications/resources/updated` to its subscribers.
    /// Returns how many were told (0 from inside an application method, as above).
    pub fn resource_updated(&self, uri: &str) -> usize {
        self.count(Command::ResourceUpdated(uri.to_owned()))
            .unwrap_or(0)
    }

    /// Ends every open `subscriptions/listen` stream gracefully (the server goes on); how
    /// many (0 from inside an application method, as above).
    pub fn end_listens(&self) -> usize {
        self.count(Command::EndListens).unwrap_or(0)
    }
}

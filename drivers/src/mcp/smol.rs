//! The smol MCP client: [`McpClient`] runs [`mcpwire_core::mcp::Client`] on smol tasks, hyper 1
//! (the tunnel's smol HTTP stack, `crate::net::hyper_smol`) and async-process. Its methods are
//! those of the blocking client, as `async fn`s.
//!
//! One client is one connection to one server, shared by every clone of its handle: clones are
//! cheap (`Clone + Send + Sync`), their methods take `&self`, and their futures run at once on
//! the one connection (`join_all` over `call_tool` just works; at most
//! [`ClientOptions::max_in_flight`] run, more wait for a place). Dropping an operation's future
//! before its end cancels that operation only. Dropping the last handle closes the connection.
//!
//! Whoever polls an operation's future first performs what the core outputs for it, in that
//! poll: an HTTP exchange task is spawned, a stdio request line is written as far as the pipe
//! takes it. While polled, the future also waits for what comes back when nobody else does
//! (its task is then woken by its own answer); one background task per client (the loop, on
//! smol's global executor) waits whenever no future has for 20 milliseconds. Whoever
//! waits feeds what came to the core and wakes the futures whose operations ended. Events
//! reach the [`Host`] while calls run, and subscriptions are [`Stream`]s. This
//! runtime makes no protocol decision; it only moves bytes:
//!
//! - **HTTP**: every [`Output::Http`] (the whole request, as the core built it) is one smol
//!   task: it takes an idle kept-alive connection to the server (or opens one), sends the
//!   request, reports the response head, then each body chunk as it arrives (SSE is never
//!   buffered whole), then the end, to the loop over a bounded channel (a task waits while it
//!   is full); a connection whose body was read to its end is kept for the next exchange. At
//!   most [`ClientOptions::max_exchanges`] exchanges run at once (more wait for one to end),
//!   and as many idle connections are kept. [`Output::CloseStream`] drops the task, which
//!   drops its connection at once. An authorization fetch (the core's `fetch_guard`: a URL a
//!   server chose) resolves its host once, checks every address under the flow's policy, and
//!   connects to one that passed on a connection of its own, never pooled (TLS still names
//!   the host); when none passes nothing connects and the authorization fails naming the
//!   address.
//! - **stdio**: the child is started without a shell (`kill_on_drop`). Its stdin and stdout
//!   are async-io registered pipes; the rest of a line the pipe did not take is written by the
//!   loop when there is room, so a child that stops reading never holds up timeouts or
//!   cancellation. The loop reads stdout into a buffer of its own and hands the bytes to the
//!   core, which cuts the lines (a line longer than 16 MiB is skipped). One task keeps the
//!   tail of its stderr. If the child exits, what is in flight fails with
//!   [`Error::ServerExited`], its exit status and stderr tail.
//!
//! ```no_run
//! use mcpwire::mcp::{smol::McpClient, ClientOptions};
//! smol::block_on(async {
//!     let client = McpClient::connect_http("http://127.0.0.1:3000/mcp", ClientOptions::default())?;
//!     let tools = client.list_tools(None).await?;
//!     let answer = client.call_tool("echo", serde_json::json!({"text": "hi"})).await?;
//!     Ok::<(), mcpwire::mcp::Error>(())
//! })?;
//! # Ok::<(), mcpwire::mcp::Error>(())
//! ```
//!
//! [`Output::Http`]: mcpwire_core::mcp::Output::Http
//! [`Output::CloseStream`]: mcpwire_core::mcp::Output::CloseStream
//! [`Stream`]: smol::stream::Stream

use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_rustls::rustls::ClientConfig as TlsConfig;
use mcpwire_core::http::Request;
use mcpwire_core::mcp::{
    CachedEra, Client, ListKind, OpId, OpOptions, Operation, StreamId, SubscriptionEvent,
    SubscriptionFilter, SubscriptionHandle, Transport,
};
use serde_json::Value;
use smol::channel::{self, Receiver, Sender};
use smol::future::FutureExt as _;
use smol::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, BufReader};
use smol::lock::Semaphore;
use smol::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use smol::stream::Stream;
use smol::{Task, Timer};

use super::session::{DriverAuth, Exchange, LinkView, Runtime, Session, Shared};
use super::{
    arguments_object, check_http_url, parse_value, stdio_command, CallToolResult, ClientOptions,
    DiscoverResult, Error, FromResult, GetPromptResult, Host, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, Pages, PaginatedResult,
    ReadResourceResult, StderrTail, StdioCommand,
};
use crate::net::guard::{Guarded, PinError};
use crate::net::hyper_smol::{self as http, HttpError};
use mcpwire_core::mcp::CallOptions;
use mcpwire_core::net_policy::UrlRejected;
use serde::Serialize;

/// Reports waiting for the loop (the tasks wait when it is full: back-pressure).
const CHANNEL_DEPTH: usize = 256;
/// The longest body of known length reported with its head in one piece.
const WHOLE_BODY: usize = 16 * 1024;
/// How much one read of a stdio server's stdout takes at most.
const READ_CHUNK: usize = 64 * 1024;
/// A buffer of request lines that grew beyond this (a long line) is freed once written.
const KEEP_BUFFER: usize = 1024 * 1024;
/// How long a child whose stdout closed may take to exit before it is killed, and how long
/// its stderr reader may take to deliver the last lines.
const REAP_WAIT: Duration = Duration::from_millis(500);

/// Cancels one operation from any task or thread: it then ends with [`Error::Cancelled`] (on
/// HTTP its exchange is closed; on stdio the server gets `notifications/cancelled`), and its
/// future gives that. Once the operation ended, or the client is gone, it does nothing.
#[derive(Clone, Debug)]
pub struct Canceller {
    shared: Weak<Shared<Smol>>,
    op: OpId,
}

impl Canceller {
    /// Cancels the operation (see the type's docs). It never waits.
    pub fn cancel(&self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.with(|s| s.request_cancel(self.op));
        }
    }
}

struct HttpLink {
    url: String,
    tls: Result<Arc<TlsConfig>, String>,
    connect_timeout: Duration,
    /// Idle kept-alive connections.
    pool: Arc<http::Pool>,
    /// One permit per exchange running ([`ClientOptions::max_exchanges`]).
    permits: Arc<Semaphore>,
    /// One task per exchange in flight; dropping it closes the connection.
    jobs: BTreeMap<StreamId, Task<()>>,
}

struct StdioLink {
    program: String,
    /// The child's stdin; `None` once closed (by the client, or a write failed: the child is
    /// gone, which its stdout's end reports).
    stdin: Option<ChildStdin>,
    /// Request lines (each with its newline) not written yet, from `written` on.
    pending: Vec<u8>,
    written: usize,
    stderr: Arc<Mutex<StderrTail>>,
    /// How the child ended, once it did.
    exit: Option<String>,
}

impl StdioLink {
    /// Queues one request line for the child's stdin (dropped if stdin is closed).
    fn queue(&mut self, line: &str) {
        if self.stdin.is_some() {
            self.pending.extend_from_slice(line.as_bytes());
            self.pending.push(b'\n');
        }
    }

    /// Writes what the pipe takes of the pending lines, without waiting; a full pipe
    /// registers `cx` to be woken when it has room. Ready once nothing waits.
    fn poll_write_pending(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while self.written < self.pending.len() {
            let Some(stdin) = &mut self.stdin else { break };
            let rest = self.pending.get(self.written..).unwrap_or_default();
            match Pin::new(stdin).poll_write(cx, rest) {
                Poll::Ready(Ok(n)) if n > 0 => self.written += n,
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The child is gone (its stdout's end reports it) or it closed its stdin.
                Poll::Ready(_) => self.stdin = None,
                Poll::Pending => return Poll::Pending,
            }
        }
        self.pending.clear();
        if self.pending.capacity() > KEEP_BUFFER {
            self.pending = Vec::new();
        }
        self.written = 0;
        Poll::Ready(())
    }
}

enum Link {
    Http(HttpLink),
    Stdio(StdioLink),
}

/// An async MCP client of one server on smol: a cheap handle, shared by cloning (see the
/// module docs).
#[derive(Clone)]
pub struct McpClient {
    handle: Arc<Handle>,
}

/// What the handles share; dropping the last one closes the client (its loop finishes the
/// goodbye requests in the background, bounded).
struct Handle {
    shared: Arc<Shared<Smol>>,
    poller: Arc<Poller>,
    /// Closed by the loop when it ends.
    done: Receiver<()>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.with(Session::close);
        self.poller.wake_loop();
    }
}

impl McpClient {
    /// A client of the Streamable HTTP server at `url` (`http://` or `https://`). Nothing is
    /// sent until the first operation, which also detects the server's era.
    pub fn connect_http(url: &str, options: ClientOptions) -> Result<McpClient, Error> {
        check_http_url(url)?;
        // A TLS set-up failure (not expected: the settings are fixed) fails each exchange.
        let tls = http::tls_config();
        let (config, auth) = options.http_config(url)?;
        let core = Client::new(config);
        let link = Link::Http(HttpLink {
            url: url.to_owned(),
            tls,
            connect_timeout: options.connect_timeout,
            pool: http::Pool::new(options.max_exchanges),
            permits: Arc::new(Semaphore::new(options.max_exchanges.max(1))),
            jobs: BTreeMap::new(),
        });
        Ok(McpClient::start_loop(core, link, None, &options, auth))
    }

    /// A client of the stdio server `program args...`, started now without a shell. The child
    /// inherits the environment and is killed when the client closes.
    pub fn connect_stdio(
        program: &str,
        args: &[&str],
        options: ClientOptions,
    ) -> Result<McpClient, Error> {
        let command = StdioCommand::new(program).args(args.iter().copied());
        McpClient::connect_stdio_command(&command, options)
    }

    /// A client of the stdio server `command` (its program, arguments, added environment
    /// variables and working directory), started now without a shell; killed when the client
    /// closes.
    pub fn connect_stdio_command(
        spec: &StdioCommand,
        options: ClientOptions,
    ) -> Result<McpClient, Error> {
        let (command, spawn_err) = stdio_command(spec);
        // The conversion keeps the program, arguments, environment and directory, not the
        // pipes.
        let mut child = Command::from(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(&spawn_err)?;
        let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(stdin), Some(stdout), Some(err)) = pipes else {
            let _ = child.kill();
            return Err(spawn_err(std::io::Error::other(
                "the child's pipes are missing",
            )));
        };
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        let (done_tx, stderr_done) = channel::bounded::<()>(1);
        let tail = Arc::clone(&stderr);
        let stderr_task = smol::spawn(async move {
            keep_stderr(err, &tail).await;
            drop(done_tx);
        });
        let core = Client::new(options.core_config(Transport::Stdio, "", crate::random_seed()));
        let link = Link::Stdio(StdioLink {
            program: spec.program.clone(),
            stdin: Some(stdin),
            pending: Vec::new(),
            written: 0,
            stderr,
            exit: None,
        });
        let child = ChildSide {
            child,
            stdout: Some(stdout),
            read_buf: vec![0; READ_CHUNK],
            stderr_done,
            _stderr_task: stderr_task,
        };
        Ok(McpClient::start_loop(
            core,
            link,
            Some(child),
            &options,
            None,
        ))
    }

    /// Shares the session of `core` on `link` and spawns its loop.
    fn start_loop(
        core: Client,
        link: Link,
        child: Option<ChildSide>,
        options: &ClientOptions,
        auth: Option<Arc<DriverAuth>>,
    ) -> McpClient {
        let (tx, rx) = channel::bounded(CHANNEL_DEPTH);
        let (kick_tx, kick_rx) = channel::bounded(1);
        let rt = Smol { link, tx, kick_tx };
        let shared = Shared::new(Session::new(core, rt, options.max_in_flight), auth);
        let (done_tx, done) = channel::bounded::<()>(1);
        let lp = Loop {
            rx: Box::pin(rx),
            kick_rx: Box::pin(kick_rx),
            child,
            timer: Timer::never(),
            timer_at: None,
            reap_due: false,
        };
        let (notify_tx, notify_rx) = channel::bounded(1);
        let poller = Arc::new(Poller {
            state: Mutex::new(PollerState {
                io: Some(lp),
                held_by_loop: false,
                queue: Vec::new(),
                released: None,
                done: false,
            }),
            notify: notify_tx,
            kick: shared.lock().rt.kick_tx.clone(),
        });
        let task = Arc::clone(&poller).run(Arc::clone(&shared), notify_rx, done_tx);
        smol::spawn(task).detach();
        McpClient {
            handle: Arc::new(Handle {
                shared,
                poller,
                done,
            }),
        }
    }

    /// Resolves the guarded fetches' host names with `lookup` (the tests' own resolver).
    #[cfg(test)]
    pub(crate) fn set_lookup(&self, lookup: crate::net::guard::Lookup) {
        self.shared().with(|s| s.lookup = lookup);
    }

    fn shared(&self) -> &Arc<Shared<Smol>> {
        &self.handle.shared
    }

    /// Sets the host hooks (elicitation answers, progress, notifications, events), for every
    /// handle of this client. They run while calls run, in the poll of whichever future or
    /// the client's loop task waits for input, one at a time and in order.
    pub fn set_host(&self, host: Box<dyn Host + Send>) {
        self.shared().set_host(host);
    }

    /// The era and version in use, once known: keep it, and give it back as
    /// [`ClientOptions::known_era`] when connecting to this server again.
    pub fn era(&self) -> Option<CachedEra> {
        self.shared().lock().era()
    }

    /// After the person declined (or did not finish) an authorization, the requests the
    /// server refuses fail at once with that error; this lets the next one start a new
    /// authorization (a host's "sign in again").
    pub fn allow_authorization_again(&self) {
        self.shared().lock().allow_authorization_again();
    }

    /// The client's default call options (timeout, resends), for `list_all_*`.
    fn call_options(&self) -> CallOptions {
        self.shared().lock().call_options()
    }

    // -----------------------------------------------------------------------------------------
    // Operations.

    operations!(async await);

    /// Any operation, with its options.
    ///
    /// Dropping the returned future before it completes cancels the operation.
    pub async fn run(&self, operation: Operation, options: OpOptions) -> Result<Value, Error> {
        self.start(operation, options).await?.await
    }

    /// Starts any operation and hands it back: a future of its outcome, which can also hand
    /// out a [`Canceller`]. When as many operations are in flight as
    /// [`ClientOptions::max_in_flight`] allows, this waits for one to end first.
    pub async fn start(&self, operation: Operation, options: OpOptions) -> Result<Pending, Error> {
        let mut operation = Some(operation);
        let op = poll_fn(|cx| {
            match self
                .shared()
                .with(|s| s.start(&mut operation, &options, cx.waker()))
            {
                Ok(Some(op)) => Poll::Ready(Ok(op)),
                Ok(None) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            }
        })
        .await?;
        Ok(Pending {
            shared: Arc::clone(self.shared()),
            poller: Arc::clone(&self.handle.poller),
            op,
            done: false,
        })
    }

    // -----------------------------------------------------------------------------------------
    // Subscriptions.

    /// Subscribes to `filter`'s change notifications (with the era not known yet, the core
    /// learns it first and opens the subscription in it). Its events, the acknowledgment first,
    /// come from the [`Subscription`] (a [`Stream`]); dropping it ends the subscription.
    pub async fn subscribe(&self, filter: SubscriptionFilter) -> Result<Subscription, Error> {
        let sub = self.shared().with(|s| s.subscribe(filter))?;
        Ok(Subscription {
            client: self.clone(),
            sub,
            over: false,
        })
    }

    /// Ends the client for every handle: cancels what is in flight, ends a legacy HTTP session
    /// (`DELETE`), waiting for that at most a couple of seconds, and stops the child process.
    /// Other handles' operations then fail with [`Error::Closed`].
    pub async fn close(self) {
        self.shared().with(Session::close);
        let done = self.handle.done.clone();
        drop(self);
        let _ = done.recv().await;
    }
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared().lock().fmt(f)
    }
}

/// An operation in flight (see [`McpClient::start`]): a future of its outcome. Dropping it
/// before its end cancels the operation.
#[derive(Debug)]
pub struct Pending {
    shared: Arc<Shared<Smol>>,
    poller: Arc<Poller>,
    op: OpId,
    done: bool,
}

impl Pending {
    /// The core's id of the operation (the one the [`Host`] hooks name).
    pub fn id(&self) -> OpId {
        self.op
    }

    /// A handle that cancels this operation from another task or thread.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            shared: Arc::downgrade(&self.shared),
            op: self.op,
        }
    }

    fn ready(&mut self, outcome: Result<(String, bool), Error>) -> Poll<Result<Value, Error>> {
        self.done = true;
        Poll::Ready(parse_value(outcome))
    }

    /// Leaves `waker` in the operation's slot, unless the outcome came meanwhile (a cancel, a
    /// close, another poller's turn).
    fn wait_for(&mut self, waker: &Waker) -> Poll<Result<Value, Error>> {
        let op = self.op;
        match self.shared.with(|s| s.outcome_or_wait(op, Some(waker))) {
            Some(outcome) => self.ready(outcome),
            None => Poll::Pending,
        }
    }
}

impl Future for Pending {
    type Output = Result<Value, Error>;

    /// Takes the outcome when it is there; otherwise waits for input itself when the waiting
    /// half is free, so that the answer wakes this task directly.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let op = self.op;
        // Bounded: each round feeds input or returns.
        for _ in 0..64 {
            // While this future waits with the waiting half, it looks at its outcome after each
            // turn: its slot keeps no waker meanwhile, so an answer fed in its own turn does not
            // wake its task again for nothing.
            if let Some(outcome) = self.shared.with(|s| s.outcome_or_wait(op, None)) {
                return self.ready(outcome);
            }
            let Some(mut io) = self.poller.take_for_caller(cx.waker()) else {
                return self.wait_for(cx.waker());
            };
            let turn = io.poll_turn(&self.shared, cx);
            self.poller.put_back(io, &turn);
            if turn.is_pending() {
                // Whoever waits next (the loop's task, another future) wakes this one by its
                // slot.
                return self.wait_for(cx.waker());
            }
        }
        // Plenty came at once: let other tasks run, then look again.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            self.shared.with(|s| s.cancel(self.op));
        }
    }
}

/// One subscription's events, in order, as a [`Stream`] that ends after
/// [`SubscriptionEvent::Ended`] (see [`McpClient::subscribe`]); dropping it ends the
/// subscription.
#[derive(Debug)]
pub struct Subscription {
    client: McpClient,
    sub: SubscriptionHandle,
    over: bool,
}

impl Subscription {
    /// The core's handle of this subscription (the one its events name).
    pub fn handle(&self) -> SubscriptionHandle {
        self.sub
    }

    /// Waits up to `timeout` for the next event: `Ok(None)` when none came in time, or the
    /// subscription has ended and every event was read ([`Subscription::is_over`]); an error
    /// once the client is closed or the stdio server exited.
    pub async fn next_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<SubscriptionEvent>, Error> {
        let next = poll_fn(|cx| self.poll_event(cx));
        next.or(async {
            Timer::after(timeout).await;
            Ok(None)
        })
        .await
    }

    /// Whether the subscription is over: it ended (its last event was read) or failed.
    pub fn is_over(&self) -> bool {
        self.over
    }

    fn poll_event(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<SubscriptionEvent>, Error>> {
        if self.over {
            return Poll::Ready(Ok(None));
        }
        let sub = self.sub;
        match self
            .client
            .shared()
            .with(|s| s.subscription_event(sub, cx.waker()))
        {
            Some(Ok(Some(event))) => Poll::Ready(Ok(Some(event))),
            Some(other) => {
                self.over = true;
                Poll::Ready(other)
            }
            None => Poll::Pending,
        }
    }
}

/// Each event in order; ends after [`SubscriptionEvent::Ended`], or when the client is
/// closed or the stdio server exited.
impl Stream for Subscription {
    type Item = SubscriptionEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_event(cx).map(|r| r.ok().flatten())
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if !self.over {
            let sub = self.sub;
            self.client.shared().with(|s| s.unsubscribe(sub));
        }
    }
}

/// The smol runtime: the link, the channel the exchange tasks report to, and the loop's kick.
pub(crate) struct Smol {
    link: Link,
    tx: Sender<Exchange>,
    kick_tx: Sender<()>,
}

impl Runtime for Smol {
    fn start_http(
        &mut self,
        stream: StreamId,
        request: Request,
        guarded: Option<Guarded>,
    ) -> Result<(), String> {
        let Link::Http(h) = &mut self.link else {
            return Ok(());
        };
        let tls = Arc::clone(h.tls.as_ref().map_err(Clone::clone)?);
        let task = smol::spawn(exchange(
            Route {
                pool: Arc::clone(&h.pool),
                permits: Arc::clone(&h.permits),
                tls,
                connect_timeout: h.connect_timeout,
                guarded,
            },
            request,
            stream,
            self.tx.clone(),
        ));
        h.jobs.insert(stream, task);
        Ok(())
    }

    fn close_http(&mut self, stream: StreamId) {
        if let Link::Http(h) = &mut self.link {
            // Dropping the task drops its connection.
            h.jobs.remove(&stream);
        }
    }

    fn exchange_ended(&mut self, stream: StreamId) {
        if let Link::Http(h) = &mut self.link {
            if let Some(task) = h.jobs.remove(&stream) {
                // It has reported its end; let it finish on its own.
                task.detach();
            }
        }
    }

    /// Request lines for a stdio child are queued, and written at the end of the drain as far
    /// as its stdin pipe takes them (the rest by the loop).
    fn write_stdio(&mut self, line: String) {
        if let Link::Stdio(s) = &mut self.link {
            s.queue(&line);
        }
    }

    fn flush_stdio(&mut self) {
        if let Link::Stdio(s) = &mut self.link {
            if s.written < s.pending.len() {
                // No waker: what the pipe does not take now is written by the loop, which
                // polls the pipe again with its own waker.
                let _ = s.poll_write_pending(&mut Context::from_waker(Waker::noop()));
            }
        }
    }

    fn stdin_pending(&self) -> bool {
        matches!(&self.link, Link::Stdio(s) if s.stdin.is_some() && s.written < s.pending.len())
    }

    fn exchanges_open(&self) -> bool {
        matches!(&self.link, Link::Http(h) if !h.jobs.is_empty())
    }

    fn kick(&self) {
        // Full means a kick is pending already.
        let _ = self.kick_tx.try_send(());
    }

    fn link(&self) -> LinkView<'_> {
        match &self.link {
            Link::Http(h) => LinkView::Http { url: &h.url },
            Link::Stdio(s) => LinkView::Stdio {
                program: &s.program,
                exit: s.exit.as_deref(),
                stderr: &s.stderr,
            },
        }
    }
}

impl Smol {
    /// Closes the child's stdin, or drops the exchanges still open.
    fn stop(&mut self) {
        match &mut self.link {
            Link::Http(h) => h.jobs.clear(),
            Link::Stdio(s) => {
                s.stdin = None; // closes the child's stdin
                s.pending = Vec::new();
                s.written = 0;
                if s.exit.is_none() {
                    s.exit = Some("stopped by the client".into());
                }
            }
        }
    }
}

/// How long after a caller last waited for input the loop's task leaves the waiting to
/// callers: a caller that makes call after call keeps reading its own answers. While callers
/// keep coming back, the loop's task wakes about once per grace to look (and goes back to
/// sleep), so the grace is also what those wake-ups cost: at 2 ms, 500 wake-ups a second of
/// the executor's thread, which then tended to keep the reactor, cost a sequential HTTP caller
/// about 40% more CPU per call than at 20 ms (bench/README.md, "the loop's wake-ups"). What
/// comes while no future waits (server notifications, a deadline) is taken up within this
/// long after the last caller's turn; once the loop's task holds the waiting half, at once.
const CALLER_GRACE: Duration = Duration::from_millis(20);

/// Who waits for input ([`Loop`]): an operation's future, while it is polled and the waiting
/// half is free, so that its answer wakes its own task directly (no hand-off through the
/// loop's task); otherwise the loop's task, which delivers events and fires timers while no
/// caller polls. A future that finds the loop's task waiting kicks it, and the task lets go;
/// it takes the waiting half back once no future has used it for [`CALLER_GRACE`].
struct Poller {
    state: Mutex<PollerState>,
    /// Wakes the loop's task when it waits for the waiting half.
    notify: Sender<()>,
    /// Wakes whoever waits with the waiting half.
    kick: Sender<()>,
}

struct PollerState {
    /// The waiting half; `None` while someone waits with it.
    io: Option<Loop>,
    held_by_loop: bool,
    /// Futures that found it taken, woken when it is put back.
    queue: Vec<Waker>,
    /// When a future last put it back.
    released: Option<Instant>,
    done: bool,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller").finish_non_exhaustive()
    }
}

impl Poller {
    fn lock(&self) -> std::sync::MutexGuard<'_, PollerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake_loop(&self) {
        let _ = self.notify.try_send(());
        let _ = self.kick.try_send(());
    }

    /// The waiting half for a future's poll, or `None` (then `waker` is woken when it is put
    /// back; a loop's task holding it is kicked).
    fn take_for_caller(&self, waker: &Waker) -> Option<Loop> {
        let mut st = self.lock();
        if let Some(io) = st.io.take() {
            return Some(io);
        }
        if !st.queue.iter().any(|w| w.will_wake(waker)) {
            st.queue.push(waker.clone());
        }
        if st.held_by_loop {
            let _ = self.kick.try_send(());
        }
        None
    }

    /// A future's poll is over with it.
    fn put_back(&self, io: Loop, turn: &Poll<Turn>) {
        let mut st = self.lock();
        st.io = Some(io);
        st.released = Some(Instant::now());
        let to_loop = match turn {
            Poll::Ready(Turn::Closed) => true,
            Poll::Ready(Turn::Done) => {
                st.done = true;
                true
            }
            _ => false,
        };
        let queued = std::mem::take(&mut st.queue);
        drop(st);
        for w in queued {
            w.wake();
        }
        if to_loop {
            let _ = self.notify.try_send(());
        }
    }

    /// The loop's task: waits with the waiting half while no future does, reaps a child whose
    /// stdout ended, until the client is done; then finishes.
    async fn run(
        self: Arc<Self>,
        shared: Arc<Shared<Smol>>,
        notify: Receiver<()>,
        _done: Sender<()>,
    ) {
        loop {
            let mut io = loop {
                let wait = {
                    let mut st = self.lock();
                    let since = st.released.map(|t| t.elapsed());
                    let recent = since.filter(|d| *d < CALLER_GRACE);
                    let reap = st.io.as_ref().is_some_and(|io| io.reap_due);
                    if st.io.is_some() && (st.done || reap || recent.is_none()) {
                        st.held_by_loop = true;
                        break st.io.take();
                    }
                    recent.map(|d| CALLER_GRACE.saturating_sub(d))
                };
                // A future let go a moment ago (it is likely to come back), or one has it now:
                // look again then, or when told.
                let wait = wait.unwrap_or(Duration::from_millis(100));
                async {
                    let _ = notify.recv().await;
                }
                .or(async {
                    Timer::after(wait).await;
                })
                .await;
            };
            let Some(lp) = io.as_mut() else { break };
            let turn = if lp.reap_due {
                lp.closed(&shared).await;
                Turn::Fed
            } else {
                poll_fn(|cx| lp.poll_turn(&shared, cx)).await
            };
            if matches!(turn, Turn::Closed) {
                lp.closed(&shared).await;
            }
            let done = matches!(turn, Turn::Done);
            if done {
                lp.finish(&shared);
                break;
            }
            let mut st = self.lock();
            st.held_by_loop = false;
            st.io = io;
            let queued = std::mem::take(&mut st.queue);
            if !queued.is_empty() {
                // Handed to the futures that wait for it: stay away while they use it.
                st.released = Some(Instant::now());
            }
            drop(st);
            for w in queued {
                w.wake();
            }
        }
        // Futures still waiting see the client closed.
        let queued = std::mem::take(&mut self.lock().queue);
        for w in queued {
            w.wake();
        }
    }
}

/// The stdio child as the loop has it: its stdout, and what reaps it.
struct ChildSide {
    child: Child,
    /// The child's stdout; `None` once it ended.
    stdout: Option<ChildStdout>,
    /// What one read of stdout fills ([`READ_CHUNK`] bytes, allocated once).
    read_buf: Vec<u8>,
    /// Closed by the stderr reader when the child's stderr ends.
    stderr_done: Receiver<()>,
    /// The stderr reader (dropped with the loop).
    _stderr_task: Task<()>,
}

/// The loop's own half: what it waits on.
struct Loop {
    /// The exchange tasks' reports (boxed: a receiver polled as a stream stays pinned).
    rx: Pin<Box<Receiver<Exchange>>>,
    kick_rx: Pin<Box<Receiver<()>>>,
    child: Option<ChildSide>,
    /// The loop's wake-up timer, kept between waits (arming one registers it with the reactor
    /// and wakes the reactor's thread), and when it is set to fire.
    timer: Timer,
    timer_at: Option<Instant>,
    /// stdout ended and the child is not reaped yet (the loop's task does that).
    reap_due: bool,
}

/// What woke the loop.
enum Woke {
    /// This many bytes of stdout are in the read buffer.
    Read(usize),
    /// stdout ended (or failed).
    Closed,
    Exchange(Exchange),
    /// A kick, the timer, or room in stdin.
    Look,
}

/// What one turn of waiting did.
enum Turn {
    /// Input was fed (or the deadline passed): look again.
    Fed,
    /// The child's stdout ended: the loop's task reaps it (that waits) and tells the session.
    Closed,
    /// The client has closed and its goodbye exchanges are done.
    Done,
}

impl Loop {
    /// One turn of waiting, polled with `cx`: arms the timer at the session's next deadline,
    /// polls what input may come, and feeds what came.
    fn poll_turn(&mut self, shared: &Shared<Smol>, cx: &mut Context<'_>) -> Poll<Turn> {
        if self.reap_due {
            return Poll::Ready(Turn::Closed);
        }
        let next = {
            let mut s = shared.lock();
            s.begin_wait().map(|wake| (wake, s.rt.stdin_pending()))
        };
        let Some((wake, pending)) = next else {
            return Poll::Ready(Turn::Done);
        };
        // Re-armed only when it must fire earlier than it is set to, or it has fired: waking
        // early is harmless (the poller looks at the clock and waits again).
        if self
            .timer_at
            .is_none_or(|at| wake < at || at <= Instant::now())
        {
            self.timer.set_at(wake);
            self.timer_at = Some(wake);
        }
        let woke = match self.poll_wait(shared, cx, pending) {
            Poll::Ready(woke) => woke,
            // The timer and the sources hold `cx`'s waker: it is woken for what comes.
            Poll::Pending => return Poll::Pending,
        };
        match woke {
            Woke::Read(n) => shared.with_loop(|s| {
                if let Some(c) = &self.child {
                    s.stdio_bytes(c.read_buf.get(..n).unwrap_or_default());
                }
                s.end_wait();
            }),
            Woke::Closed => {
                self.reap_due = true;
                return Poll::Ready(Turn::Closed);
            }
            Woke::Exchange(report) => shared.with_loop(|s| {
                s.exchange(report);
                // Take what else is waiting, a bounded batch, before looking at the clock.
                for _ in 0..CHANNEL_DEPTH {
                    match self.rx.try_recv() {
                        Ok(report) => s.exchange(report),
                        Err(_) => break,
                    }
                }
                s.end_wait();
            }),
            Woke::Look => shared.with_loop(Session::end_wait),
        }
        Poll::Ready(Turn::Fed)
    }

    /// Polls for stdout bytes, a report, a kick, room in stdin (when `pending`) or the timer.
    fn poll_wait(
        &mut self,
        shared: &Shared<Smol>,
        cx: &mut Context<'_>,
        pending: bool,
    ) -> Poll<Woke> {
        match &mut self.child {
            Some(ChildSide {
                stdout: out @ Some(_),
                read_buf,
                ..
            }) => {
                if let Some(stdout) = out.as_mut() {
                    match Pin::new(stdout).poll_read(cx, read_buf) {
                        Poll::Ready(Ok(n)) if n > 0 => return Poll::Ready(Woke::Read(n)),
                        Poll::Ready(_) => {
                            *out = None;
                            return Poll::Ready(Woke::Closed);
                        }
                        Poll::Pending => {}
                    }
                }
            }
            // No stdout (any more): the exchange tasks report over the channel. The session
            // holds a sender, so it does not close while the poller waits.
            _ => {
                if let Poll::Ready(Some(report)) = self.rx.as_mut().poll_next(cx) {
                    return Poll::Ready(Woke::Exchange(report));
                }
            }
        }
        if pending {
            let written = match &mut shared.lock().rt.link {
                Link::Stdio(s) => s.poll_write_pending(cx),
                Link::Http(_) => Poll::Ready(()),
            };
            if written.is_ready() {
                return Poll::Ready(Woke::Look);
            }
        }
        if let Poll::Ready(Some(())) = self.kick_rx.as_mut().poll_next(cx) {
            return Poll::Ready(Woke::Look);
        }
        if Pin::new(&mut self.timer).poll(cx).is_ready() {
            return Poll::Ready(Woke::Look);
        }
        Poll::Pending
    }

    /// The child's stdout ended: its exit status, then the session is told.
    async fn closed(&mut self, shared: &Shared<Smol>) {
        let status = self.reap().await;
        self.reap_due = false;
        shared.with_loop(|s| {
            if let Link::Stdio(l) = &mut s.rt.link {
                l.exit = Some(status);
            }
            s.stdio_closed();
            s.end_wait();
        });
    }

    /// The client is done: drops what is still open and stops the child.
    fn finish(&mut self, shared: &Shared<Smol>) {
        shared.with_loop(|s| s.rt.stop());
        if let Some(c) = &mut self.child {
            let _ = c.child.kill();
        }
    }

    /// stdio: the child's stdout closed; collect its exit status (killing it if it lingers
    /// with its stdout closed), and let the stderr reader take the last lines (bounded: a
    /// grandchild may hold the pipe), each wait bounded by [`REAP_WAIT`].
    async fn reap(&mut self) -> String {
        let Some(c) = &mut self.child else {
            return "unknown".to_owned();
        };
        let status = async {
            match c.child.status().await {
                Ok(status) => Some(status.to_string()),
                Err(e) => Some(format!("its status is unknown: {e}")),
            }
        }
        .or(async {
            Timer::after(REAP_WAIT).await;
            None
        })
        .await;
        let status = status.unwrap_or_else(|| {
            let _ = c.child.kill();
            "it closed its stdout and was killed".to_owned()
        });
        let done = c.stderr_done.clone();
        async move {
            let _ = done.recv().await;
        }
        .or(async {
            Timer::after(REAP_WAIT).await;
        })
        .await;
        status
    }
}

/// What the HTTP stack's error says, for [`Error::Transport`].
pub(crate) fn describe(e: &HttpError) -> String {
    match e {
        HttpError::Request => "the request cannot be sent (bad URL or header)".into(),
        HttpError::Resolve(Some(kind)) => format!("the host name did not resolve ({kind})"),
        HttpError::Resolve(None) => "the host name did not resolve".into(),
        HttpError::Connect(kind) => crate::net::io_words(&std::io::Error::from(*kind)),
        HttpError::Tls(why) if why.is_empty() => "the TLS handshake failed".into(),
        HttpError::Tls(why) => format!("the TLS handshake failed: {why}"),
        HttpError::Exchange(Some(kind)) => format!("the exchange failed: {kind}"),
        HttpError::Exchange(None) => "the exchange failed".into(),
        HttpError::Protocol => "the answer is not HTTP/1.1".into(),
        HttpError::TimedOut => "timed out".into(),
        HttpError::ProxyRefused(0) => "the HTTP proxy did not answer the CONNECT".into(),
        HttpError::ProxyRefused(status) => {
            format!("the HTTP proxy refused the CONNECT (status {status})")
        }
    }
}

/// What an exchange task needs to reach the server.
struct Route {
    pool: Arc<http::Pool>,
    permits: Arc<Semaphore>,
    tls: Arc<TlsConfig>,
    connect_timeout: Duration,
    /// An authorization fetch: resolved once, checked, connected to a checked address on a
    /// connection of its own (see [`guarded_send`]).
    guarded: Option<Guarded>,
}

/// One HTTP exchange as a task: the head, each body chunk, then the end (or the failure).
/// It waits for a permit first and holds it to its end. Dropping the task (a closed stream)
/// drops the connection.
async fn exchange(route: Route, request: Request, stream: StreamId, tx: Sender<Exchange>) {
    let _permit = route.permits.acquire_arc().await;
    let sent = match route.guarded {
        Some(guarded) => guarded_send(guarded, &route.tls, &request, route.connect_timeout).await,
        None => http::send_pooled(&route.pool, &route.tls, &request, route.connect_timeout)
            .await
            .map_err(|e| Unsent::Failed(describe(&e))),
    };
    let mut response = match sent {
        Ok(r) => r,
        Err(Unsent::Failed(cause)) => {
            let _ = tx.send(Exchange::Failed { stream, cause }).await;
            return;
        }
        Err(Unsent::Refused(rejected)) => {
            let _ = tx.send(Exchange::Refused { stream, rejected }).await;
            return;
        }
    };
    let head = response.head.clone();
    // A body of known length that fits a small buffer (a JSON answer) is read whole and
    // reported with its head: one hand-off to the poller instead of three. Streams (SSE) and
    // longer bodies are reported as they come.
    let known = head
        .headers
        .get("content-length")
        .and_then(|v| v.trim().parse::<usize>().ok());
    if known.is_some_and(|n| n <= WHOLE_BODY) {
        let mut body = Vec::new();
        loop {
            match response.next_chunk().await {
                Ok(None) => {
                    let _ = tx.send(Exchange::Whole { stream, head, body }).await;
                    return;
                }
                Ok(Some(bytes)) => body.extend_from_slice(&bytes),
                Err(e) => {
                    // The head did arrive: report it, then the failure, as a stream would.
                    if tx.send(Exchange::Head { stream, head }).await.is_ok() {
                        let cause = format!("reading the response body: {}", describe(&e));
                        let _ = tx.send(Exchange::Failed { stream, cause }).await;
                    }
                    return;
                }
            }
        }
    }
    if tx.send(Exchange::Head { stream, head }).await.is_err() {
        return;
    }
    loop {
        match response.next_chunk().await {
            Ok(None) => {
                let _ = tx.send(Exchange::End { stream }).await;
                return;
            }
            Ok(Some(bytes)) => {
                let bytes = bytes.to_vec();
                if tx.send(Exchange::Data { stream, bytes }).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                let cause = format!("reading the response body: {}", describe(&e));
                let _ = tx.send(Exchange::Failed { stream, cause }).await;
                return;
            }
        }
    }
}

/// Why an exchange has no response.
enum Unsent {
    /// The transport failed (for a person).
    Failed(String),
    /// The policy refused every address the guarded fetch's host resolved to.
    Refused(UrlRejected),
}

/// A guarded fetch (an authorization fetch): its host resolved once (on smol's blocking
/// pool) and every address checked ([`Guarded::pin`]), both within `connect_timeout`; then
/// [`http::send_to`] the addresses that passed, on a connection of its own that is never taken
/// from the pool nor put back in it (a kept-alive connection to the same host name, opened
/// for an unguarded request, may lead to an address the policy refuses, and a guarded one
/// must not serve anyone else). Nothing connects when the policy refuses.
async fn guarded_send(
    guarded: Guarded,
    tls: &Arc<TlsConfig>,
    request: &Request,
    connect_timeout: Duration,
) -> Result<http::Exchange, Unsent> {
    let pinned = smol::unblock(move || guarded.pin())
        .or(async {
            Timer::after(connect_timeout).await;
            Err(PinError::Resolve("resolving the host timed out".into()))
        })
        .await;
    let addrs = match pinned {
        Ok(addrs) => addrs,
        Err(PinError::Refused(rejected)) => return Err(Unsent::Refused(rejected)),
        Err(PinError::Resolve(cause)) => return Err(Unsent::Failed(cause)),
    };
    http::send_to(tls, request, &addrs, connect_timeout)
        .await
        .map_err(|e| Unsent::Failed(describe(&e)))
}

/// Reads up to the next newline, discarding; false at the end of the stream.
async fn skip_line(reader: &mut (impl smol::io::AsyncBufRead + Unpin)) -> bool {
    loop {
        let (found, used) = match reader.fill_buf().await {
            Ok([]) | Err(_) => return false,
            Ok(buf) => match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (true, i + 1),
                None => (false, buf.len()),
            },
        };
        reader.consume(used);
        if found {
            return true;
        }
    }
}

async fn keep_stderr(stderr: smol::process::ChildStderr, tail: &Mutex<StderrTail>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(super::STDERR_LINE_BYTES).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") && !skip_line(&mut reader).await {
            // The last, over-long line: keep its start.
            tail.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(&String::from_utf8_lossy(&line));
            return;
        }
        tail.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(&String::from_utf8_lossy(&line));
    }
}

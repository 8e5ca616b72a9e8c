//! The blocking MCP client: [`McpClient`] runs [`mcpwire_core::mcp::Client`] on ureq, std
//! threads and `std::process`.
//!
//! One client is one connection to one server, shared by every clone of its handle: clones are
//! cheap (`Clone + Send + Sync`), their methods take `&self`, and operations started from
//! several threads run at once on the one connection (at most
//! [`ClientOptions::max_in_flight`]; more wait for a place). A method blocks its own thread
//! until its operation ends; [`McpClient::start`] hands back a [`Pending`] operation to wait for
//! with a deadline, or to cancel from anywhere. Dropping the last handle closes the connection.
//!
//! Whoever starts an operation performs what the core outputs for it at once, on its own
//! thread. A caller waiting for its operation also waits for what comes back when nobody else
//! does, so that its answer wakes it with no hand-off between threads; one background thread
//! per client (the loop, `mcp-client`) waits whenever no caller has for a couple of
//! milliseconds. Whoever waits feeds what came to the core and wakes the callers whose
//! operations ended. Events reach the [`Host`] while calls run, on that thread. This runtime makes no protocol decision; it only
//! moves bytes:
//!
//! - **HTTP**: every [`Output::Http`] (the whole request, as the core built it) is one job on a
//!   bounded pool of worker threads, each with its own ureq agent (16 KiB buffers, no
//!   redirects: a bearer token must not follow one). The worker sends the response head, then
//!   each body chunk as it arrives (SSE is never buffered whole), then the end, to the loop
//!   over a bounded channel. [`Output::CloseStream`] cancels the job: its agent is shut down,
//!   which closes the connection at once. An authorization fetch (the core's `fetch_guard`: a
//!   URL a server chose) runs on an agent of its own that keeps no connection, whose resolver
//!   resolves the host once, checks every address under the flow's policy and hands ureq only
//!   those that passed; when none passes nothing connects and the authorization fails naming
//!   the address.
//! - **stdio**: the child is started without a shell. On unix a request line is written to its
//!   stdin (non-blocking) by the thread that starts the operation, and the loop waits in
//!   `poll(2)` for its stdout (and for room in stdin when a line did not fit); elsewhere a
//!   thread writes and one reads (see `pipes`). One more thread keeps the tail of its stderr.
//!   The child is killed when the client closes; if it exits, what is in flight fails with
//!   [`Error::ServerExited`], its exit status and stderr tail.
//!
//! ```no_run
//! use mcpwire::mcp::{blocking::McpClient, ClientOptions};
//! let client = McpClient::connect_http("http://127.0.0.1:3000/mcp", ClientOptions::default())?;
//! let tools = client.list_tools(None)?;
//! let answer = client.call_tool("echo", serde_json::json!({"text": "hi"}))?;
//! # Ok::<(), mcpwire::mcp::Error>(())
//! ```
//!
//! [`Output::Http`]: mcpwire_core::mcp::Output::Http
//! [`Output::CloseStream`]: mcpwire_core::mcp::Output::CloseStream

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::task::{Wake, Waker};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mcpwire_core::http::Request;
use mcpwire_core::mcp::{
    CachedEra, Client, ListKind, OpId, OpOptions, Operation, StreamId, SubscriptionEvent,
    SubscriptionFilter, SubscriptionHandle, Transport,
};
use serde_json::Value;

use super::session::{DriverAuth, Exchange, LinkView, Runtime, Session, Shared, StdioFlush};
use super::{
    arguments_object, check_http_url, parse_value, stdio_command, CallToolResult, ClientOptions,
    DiscoverResult, Error, FromResult, GetPromptResult, Host, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, Pages, PaginatedResult,
    ReadResourceResult, StderrTail, StdioCommand,
};
use crate::net::guard::Guarded;
use crate::net::threads::{AgentFactory, JobCtl, Pool, Work};
use crate::net::ureq as http;
use mcpwire_core::mcp::CallOptions;
use serde::Serialize;

mod pipes;

use pipes::{Kicker, Stdin, Stdout};

/// ureq's read buffer per connection, and the largest body chunk sent to the loop.
const BUFFER_BYTES: usize = 16 * 1024;
/// ureq's write buffer per connection: a request head (request line and headers) must fit in
/// it, so it is as large as the head most servers accept.
const HEAD_BYTES: usize = 64 * 1024;
/// Reports waiting for the loop (the workers block when it is full: back-pressure).
const CHANNEL_DEPTH: usize = 256;
/// HTTP jobs waiting for a worker.
const JOB_QUEUE: usize = 64;
/// How long a child whose stdout closed may take to exit before it is killed, and how long
/// its stderr reader may take to deliver the last lines.
const REAP_WAIT: Duration = Duration::from_millis(500);

/// What the workers and pipe threads report to the loop.
enum Input {
    Exchange(Exchange),
    /// Bytes of the stdio child's stdout (the pipe threads).
    Stdout(Vec<u8>),
    StdioClosed,
    /// Look again (a caller moved the deadline, or the client is closing).
    Kick,
}

/// Wakes a thread parked in a blocking method.
struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    static THREAD_WAKER: Waker = Waker::from(Arc::new(Unpark(thread::current())));
}

/// The current thread's waker (made once per thread).
fn thread_waker() -> Waker {
    THREAD_WAKER.with(Waker::clone)
}

/// Parks the current thread until woken or `until` (`false`: `until` passed).
fn park_until(until: Option<Instant>) -> bool {
    match until {
        None => thread::park(),
        Some(until) => {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            thread::park_timeout(until - now);
        }
    }
    true
}

/// Cancels one operation from any thread: it then ends with [`Error::Cancelled`] (on HTTP its
/// exchange is closed; on stdio the server gets `notifications/cancelled`), and its caller
/// gets that. Once the operation ended, or the client is gone, it does nothing.
#[derive(Clone, Debug)]
pub struct Canceller {
    shared: Weak<Shared<Blocking>>,
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

/// A blocking MCP client of one server: a cheap handle, shared by cloning (see the module
/// docs).
#[derive(Clone)]
pub struct McpClient {
    handle: Arc<Handle>,
}

/// What the handles share; dropping the last one closes the client.
struct Handle {
    shared: Arc<Shared<Blocking>>,
    poller: Arc<Poller>,
    /// The loop's thread, joined when the last handle goes (unless that happens on it).
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.with(Session::close);
        self.poller.wake_loop();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            // The loop ends within the goodbye requests' time.
            if t.thread().id() != thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl McpClient {
    /// A client of the Streamable HTTP server at `url` (`http://` or `https://`). Nothing is
    /// sent until the first operation, which also detects the server's era.
    pub fn connect_http(url: &str, options: ClientOptions) -> Result<McpClient, Error> {
        check_http_url(url)?;
        let connect_timeout = options.connect_timeout;
        let agents: AgentFactory = Arc::new(move || mcp_client_agent(connect_timeout));
        let pool = Pool::new("mcp-client-http", options.max_exchanges, JOB_QUEUE, agents);
        let (tx, rx) = mpsc::sync_channel(CHANNEL_DEPTH);
        let (config, auth) = options.http_config(url)?;
        let core = Client::new(config);
        let link = Link::Http(HttpLink {
            url: url.to_owned(),
            connect_timeout,
            pool,
            jobs: BTreeMap::new(),
        });
        let rt = Blocking {
            link,
            kicker: Kicker::Channel(tx.clone()),
            tx,
        };
        let lp = Loop {
            rx,
            inbox: Vec::new(),
            read: Vec::new(),
            stdout: None,
            child: None,
            stderr_done: None,
        };
        McpClient::start_loop(Session::new(core, rt, options.max_in_flight), lp, auth)
    }

    /// A client of the stdio server `program args...`, started now without a shell. The child
    /// inherits the environment and is killed when the client closes.
    pub fn connect_stdio(
        program: &str,
        args: &[&str],
        options: ClientOptions,
    ) -> Result<McpClient, Error> {
        let command = StdioCommand::new(program).args(args.iter().copied());
        McpClient::start_stdio(&command, options, cfg!(unix))
    }

    /// A client of the stdio server `command` (its program, arguments, added environment
    /// variables and working directory), started now without a shell; killed when the client
    /// closes.
    pub fn connect_stdio_command(
        command: &StdioCommand,
        options: ClientOptions,
    ) -> Result<McpClient, Error> {
        McpClient::start_stdio(command, options, cfg!(unix))
    }

    /// [`McpClient::connect_stdio`] with a thread writing the child's stdin and one reading its
    /// stdout, as on platforms without `poll(2)`: there for the tests of that path on unix.
    #[doc(hidden)]
    pub fn connect_stdio_with_pipe_threads(
        program: &str,
        args: &[&str],
        options: ClientOptions,
    ) -> Result<McpClient, Error> {
        let command = StdioCommand::new(program).args(args.iter().copied());
        McpClient::start_stdio(&command, options, false)
    }

    fn start_stdio(
        spec: &StdioCommand,
        options: ClientOptions,
        polled: bool,
    ) -> Result<McpClient, Error> {
        let (mut command, spawn_err) = stdio_command(spec);
        let mut child = command.spawn().map_err(&spawn_err)?;
        let (tx, rx) = mpsc::sync_channel(CHANNEL_DEPTH);
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(stdin), Some(stdout), Some(err)) = pipes else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_err(std::io::Error::other(
                "the child's pipes are missing",
            )));
        };
        let started = match (stdin, stdout, polled) {
            #[cfg(unix)]
            (stdin, stdout, true) => match pipes::polled(stdin, stdout) {
                Ok(halves) => Ok(halves),
                Err((stdin, stdout)) => pipes::threads(stdin, stdout, tx.clone())
                    .map(|(i, o)| (i, o, Kicker::Channel(tx.clone()))),
            },
            (stdin, stdout, _) => pipes::threads(stdin, stdout, tx.clone())
                .map(|(i, o)| (i, o, Kicker::Channel(tx.clone()))),
        };
        let (stdin, stdout, kicker) = match started {
            Ok(halves) => halves,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(spawn_err(e));
            }
        };
        let tail = Arc::clone(&stderr);
        let (done_tx, stderr_done) = mpsc::channel::<()>();
        if let Err(e) = spawn("mcp-stdio-err", move || {
            keep_stderr(err, &tail);
            drop(done_tx);
        }) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_err(e));
        }
        let core = Client::new(options.core_config(Transport::Stdio, "", crate::random_seed()));
        let link = Link::Stdio(StdioLink {
            program: spec.program.clone(),
            stdin,
            stderr,
            exit: None,
        });
        let rt = Blocking { link, kicker, tx };
        let lp = Loop {
            rx,
            inbox: Vec::new(),
            read: Vec::new(),
            stdout: Some(stdout),
            child: Some(child),
            stderr_done: Some(stderr_done),
        };
        McpClient::start_loop(Session::new(core, rt, options.max_in_flight), lp, None)
    }

    /// Shares `session` and starts its loop's thread.
    fn start_loop(
        session: Session<Blocking>,
        lp: Loop,
        auth: Option<Arc<DriverAuth>>,
    ) -> Result<McpClient, Error> {
        let kicker = session.rt.kicker.clone();
        let shared = Shared::new(session, auth);
        let poller = Arc::new(Poller::new(kicker, lp));
        let (for_loop, poller_for_loop) = (Arc::clone(&shared), Arc::clone(&poller));
        let thread = thread::Builder::new()
            .name("mcp-client".to_owned())
            .spawn(move || poller_for_loop.run(&for_loop));
        let thread = match thread {
            Ok(t) => t,
            Err(source) => {
                if let Some(mut lp) = poller.lock().io.take() {
                    lp.stop_child();
                }
                return Err(Error::Thread { source });
            }
        };
        Ok(McpClient {
            handle: Arc::new(Handle {
                shared,
                poller,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// Waits for input once, as the poller when it is free (see [`Poller`]), or parks until
    /// woken (`false`: `until` passed).
    fn wait_turn(&self, until: Option<Instant>) -> bool {
        self.handle.poller.turn(&self.handle.shared, until)
    }

    /// Resolves the guarded fetches' host names with `lookup` (the tests' own resolver).
    #[cfg(test)]
    pub(crate) fn set_lookup(&self, lookup: crate::net::guard::Lookup) {
        self.shared().with(|s| s.lookup = lookup);
    }

    fn shared(&self) -> &Shared<Blocking> {
        &self.handle.shared
    }

    /// Sets the host hooks (elicitation answers, progress, notifications, events), for every
    /// handle of this client. They run while calls run, on the thread that waits for input (a
    /// caller's or the client's loop thread), one at a time and in order.
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

    operations!();

    /// Any operation, with its options; waits for its end.
    pub fn run(&self, operation: Operation, options: OpOptions) -> Result<Value, Error> {
        self.start(operation, options)?.wait()
    }

    /// Starts any operation and hands it back to wait for ([`Pending::wait`],
    /// [`Pending::wait_timeout`]) or cancel. When as many operations are in flight as
    /// [`ClientOptions::max_in_flight`] allows, this waits for one to end first.
    pub fn start(&self, operation: Operation, options: OpOptions) -> Result<Pending, Error> {
        let waker = thread_waker();
        let mut operation = Some(operation);
        loop {
            if let Some(op) = self
                .shared()
                .with(|s| s.start(&mut operation, &options, &waker))?
            {
                return Ok(Pending {
                    client: self.clone(),
                    op,
                    done: false,
                });
            }
            park_until(None);
        }
    }

    /// [`start`](Self::start) without waiting: the operation starts (its request goes out on
    /// this thread) when a place among the operations in flight is free, and is handed back
    /// as [`TryStart::Full`] when none is. The host's hooks are not run on this thread (the
    /// next thread that waits runs them), so it may be called where a hook must not run, such
    /// as inside a server's request handler.
    pub fn try_start(&self, operation: Operation, options: OpOptions) -> Result<TryStart, Error> {
        let mut operation = Some(operation);
        let started = self
            .shared()
            .with_undelivered(|s| s.try_start(&mut operation, &options))?;
        match (started, operation) {
            (Some(op), _) => Ok(TryStart::Started(Pending {
                client: self.clone(),
                op,
                done: false,
            })),
            (None, Some(operation)) => Ok(TryStart::Full(operation)),
            (None, None) => Err(Error::Cancelled),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Subscriptions.

    /// Subscribes to `filter`'s change notifications (with the era not known yet, the core
    /// learns it first and opens the subscription in it). Read its events, the acknowledgment
    /// first, from the [`Subscription`]; dropping it ends the subscription.
    pub fn subscribe(&self, filter: SubscriptionFilter) -> Result<Subscription, Error> {
        let sub = self.shared().with(|s| s.subscribe(filter))?;
        Ok(Subscription {
            client: self.clone(),
            sub,
            over: false,
        })
    }

    /// Ends the client for every handle: cancels what is in flight, ends a legacy HTTP session
    /// (`DELETE`), waiting for that at most a couple of seconds once the last handle is gone,
    /// and stops the child process. Other handles' operations then fail with
    /// [`Error::Closed`].
    pub fn close(self) {
        self.shared().with(Session::close);
    }
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared().lock().fmt(f)
    }
}

/// What [`McpClient::try_start`] did.
#[derive(Debug)]
pub enum TryStart {
    /// The operation is in flight.
    Started(Pending),
    /// As many operations are in flight as [`ClientOptions::max_in_flight`] allows: the
    /// operation, not started ([`McpClient::start`] waits for a place).
    Full(Operation),
}

/// An operation in flight (see [`McpClient::start`]). Dropping it before its end cancels it.
#[derive(Debug)]
pub struct Pending {
    client: McpClient,
    op: OpId,
    done: bool,
}

impl Pending {
    /// The core's id of the operation (the one the [`Host`] hooks name).
    pub fn id(&self) -> OpId {
        self.op
    }

    /// A handle that cancels this operation from another thread.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            shared: Arc::downgrade(&self.client.handle.shared),
            op: self.op,
        }
    }

    /// Waits for the operation's end (its own timeout, the request timeout, bounds that).
    pub fn wait(mut self) -> Result<Value, Error> {
        match self.wait_until(None) {
            Some(outcome) => outcome,
            None => Err(Error::Cancelled),
        }
    }

    /// Waits up to `timeout` for the operation's end: `Err(self)` when it has not ended (wait
    /// again, or drop it to cancel it).
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<Result<Value, Error>, Pending> {
        let until = Instant::now().checked_add(timeout);
        match self.wait_until(until) {
            Some(outcome) => Ok(outcome),
            None => Err(self),
        }
    }

    /// Hands the operation's outcome to `then` instead of waiting for it: `then` runs on the
    /// thread that reads the answer (the client's own loop thread, or a caller of this client
    /// waiting for another operation), with no lock of the client held, or on this thread
    /// when the outcome is there already. Nothing waits, and no thread is woken to pass the
    /// answer on. `then` must not wait for this client (its thread is the one that would read
    /// the answer); hand such work to a thread of its own. [`Pending::canceller`] still
    /// cancels it; the client closing ends it with [`Error::Closed`] or [`Error::Cancelled`].
    pub fn then(mut self, then: impl FnOnce(Result<Value, Error>) + Send + 'static) {
        self.done = true;
        let poller = Arc::clone(&self.client.handle.poller);
        poller.detached.fetch_add(1, Ordering::SeqCst);
        let counted = Arc::clone(&poller);
        let then: super::session::Then = Box::new(move |outcome| {
            counted.detached.fetch_sub(1, Ordering::SeqCst);
            then(parse_value(outcome));
        });
        let now = self
            .client
            .shared()
            .with_undelivered(|s| s.then(self.op, then));
        match now {
            Some((then, outcome)) => then(outcome),
            // The loop's thread reads the answer unless a caller does: it stops waiting for
            // a caller to come back.
            None => poller.detached_started(),
        }
    }

    /// Cancels the operation and waits for that to take effect (it ends with
    /// [`Error::Cancelled`] unless its outcome was there first).
    pub fn cancel(self) -> Result<Value, Error> {
        self.client.shared().with(|s| s.request_cancel(self.op));
        self.wait()
    }

    fn wait_until(&mut self, until: Option<Instant>) -> Option<Result<Value, Error>> {
        let waker = thread_waker();
        loop {
            if let Some(outcome) = self.client.shared().with(|s| s.outcome(self.op, &waker)) {
                self.done = true;
                self.client.handle.poller.leave();
                return Some(parse_value(outcome));
            }
            if !self.client.wait_turn(until) {
                return None;
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            self.client.shared().with(|s| s.cancel(self.op));
        }
    }
}

/// One subscription's events, in order (see [`McpClient::subscribe`]); dropping it ends the
/// subscription. As an [`Iterator`] it waits for each event and ends after
/// [`SubscriptionEvent::Ended`].
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
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<SubscriptionEvent>, Error> {
        self.next_until(Instant::now().checked_add(timeout))
    }

    /// Whether the subscription is over: it ended (its last event was read) or failed.
    pub fn is_over(&self) -> bool {
        self.over
    }

    fn next_until(&mut self, until: Option<Instant>) -> Result<Option<SubscriptionEvent>, Error> {
        if self.over {
            return Ok(None);
        }
        let waker = thread_waker();
        loop {
            let next = self
                .client
                .shared()
                .with(|s| s.subscription_event(self.sub, &waker));
            if next.is_some() {
                self.client.handle.poller.leave();
            }
            match next {
                Some(Ok(Some(event))) => return Ok(Some(event)),
                Some(other) => {
                    self.over = true;
                    return other;
                }
                None if !self.client.wait_turn(until) => return Ok(None),
                None => {}
            }
        }
    }
}

/// Waits for each event; ends after [`SubscriptionEvent::Ended`], or when the client is
/// closed or the stdio server exited.
impl Iterator for Subscription {
    type Item = SubscriptionEvent;

    fn next(&mut self) -> Option<SubscriptionEvent> {
        self.next_until(None).ok().flatten()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if !self.over {
            self.client.shared().with(|s| s.unsubscribe(self.sub));
        }
    }
}

struct HttpLink {
    url: String,
    /// How long opening a connection may take (the guarded fetches' agents get it too).
    connect_timeout: Duration,
    pool: Pool,
    jobs: BTreeMap<StreamId, Arc<JobCtl>>,
}

struct StdioLink {
    program: String,
    stdin: Stdin,
    stderr: Arc<Mutex<StderrTail>>,
    /// How the child ended, once it did.
    exit: Option<String>,
}

enum Link {
    Http(HttpLink),
    Stdio(StdioLink),
}

/// The blocking runtime: the link, the channel every worker and pipe thread reports to.
pub(crate) struct Blocking {
    link: Link,
    tx: SyncSender<Input>,
    kicker: Kicker,
}

impl Runtime for Blocking {
    fn start_http(
        &mut self,
        stream: StreamId,
        request: Request,
        guarded: Option<Guarded>,
    ) -> Result<(), String> {
        let Link::Http(h) = &mut self.link else {
            return Ok(());
        };
        let ctl = JobCtl::new();
        let tx = self.tx.clone();
        let connect_timeout = h.connect_timeout;
        let work: Work = Box::new(move |agent, ctl| match guarded {
            Some(g) => guarded_exchange(connect_timeout, g, ctl, &request, stream, &tx),
            None => exchange(agent, ctl, &request, stream, &tx, None),
        });
        if h.pool.submit(Arc::clone(&ctl), work).is_err() {
            return Err("too many HTTP exchanges at once (the queue is full)".into());
        }
        h.jobs.insert(stream, ctl);
        Ok(())
    }

    fn close_http(&mut self, stream: StreamId) {
        if let Link::Http(h) = &mut self.link {
            if let Some(ctl) = h.jobs.remove(&stream) {
                ctl.cancel();
            }
        }
    }

    fn exchange_ended(&mut self, stream: StreamId) {
        if let Link::Http(h) = &mut self.link {
            h.jobs.remove(&stream);
        }
    }

    fn write_stdio(&mut self, line: String) {
        if let Link::Stdio(s) = &mut self.link {
            s.stdin.send(line);
        }
    }

    fn stdin_pending(&self) -> bool {
        matches!(&self.link, Link::Stdio(s) if s.stdin.pending())
    }

    fn stdio_flusher(&self) -> Option<Arc<dyn StdioFlush>> {
        match &self.link {
            Link::Stdio(s) => s.stdin.flusher(),
            Link::Http(_) => None,
        }
    }

    fn exchanges_open(&self) -> bool {
        matches!(&self.link, Link::Http(h) if !h.jobs.is_empty())
    }

    fn kick(&self) {
        self.kicker.kick();
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

impl Blocking {
    /// Drops the exchanges still open, or closes the child's stdin.
    fn stop(&mut self) {
        match &mut self.link {
            Link::Http(h) => {
                for ctl in std::mem::take(&mut h.jobs).into_values() {
                    ctl.cancel();
                }
            }
            Link::Stdio(s) => s.stdin.close(),
        }
    }
}

/// How long after a caller last waited for input the loop's thread leaves the waiting to
/// callers: a caller that makes call after call keeps reading its own answers.
const CALLER_GRACE: Duration = Duration::from_millis(2);

/// Who waits for input ([`Loop`]): a caller waiting for its own operation when the waiting
/// half is free, so that its answer wakes it directly (no hand-off through another thread);
/// otherwise the loop's thread, which delivers events and fires timers while no caller waits.
/// A caller that finds the loop's thread waiting kicks it, and the thread lets go; it takes
/// the waiting half back once no caller has used it for [`CALLER_GRACE`]. A caller that finds
/// another caller waiting parks until its operation ends or the waiting half is handed to it.
struct Poller {
    state: Mutex<PollerState>,
    /// The loop's thread waits here for the waiting half.
    cv: Condvar,
    /// Wakes whoever waits for input.
    kicker: Kicker,
    /// Operations in flight whose outcome goes to a [`Pending::then`]: while there are any,
    /// the loop's thread waits for input whenever no caller does (no grace period).
    detached: AtomicUsize,
}

struct PollerState {
    /// The waiting half; `None` while someone waits with it.
    io: Option<Loop>,
    /// The loop's thread has it.
    held_by_loop: bool,
    /// Callers that want it, in order.
    queue: VecDeque<thread::Thread>,
    /// When a caller last let go of it.
    released: Option<Instant>,
    /// The loop's thread waits for a caller to let go (untimed): tell it.
    loop_parked: bool,
    /// The client is done.
    done: bool,
}

impl Poller {
    fn new(kicker: Kicker, io: Loop) -> Self {
        Poller {
            state: Mutex::new(PollerState {
                io: Some(io),
                held_by_loop: false,
                queue: VecDeque::new(),
                released: None,
                loop_parked: false,
                done: false,
            }),
            cv: Condvar::new(),
            kicker,
            detached: AtomicUsize::new(0),
        }
    }

    /// An operation's outcome now goes to a [`Pending::then`]: the loop's thread, if it is
    /// waiting for a caller to come back, takes the waiting half at once.
    fn detached_started(&self) {
        let st = self.lock();
        if st.io.is_some() && !st.held_by_loop {
            self.cv.notify_all();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PollerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the loop's thread (the client closed).
    fn wake_loop(&self) {
        self.cv.notify_all();
        self.kicker.kick();
    }

    /// A caller's wait: one turn of waiting for input when the waiting half is free, or a park
    /// until woken. `false` once `until` passed.
    fn turn(&self, shared: &Shared<Blocking>, until: Option<Instant>) -> bool {
        if until.is_some_and(|u| Instant::now() >= u) {
            return false;
        }
        let me = thread::current();
        let io = {
            let mut st = self.lock();
            match st.io.take() {
                Some(io) => {
                    st.queue.retain(|t| t.id() != me.id());
                    Some(io)
                }
                None => {
                    if !st.queue.iter().any(|t| t.id() == me.id()) {
                        st.queue.push_back(me.clone());
                    }
                    if st.held_by_loop {
                        self.kicker.kick();
                    }
                    None
                }
            }
        };
        let Some(mut io) = io else {
            return park_until(until);
        };
        let more = io.turn(shared, until);
        let mut st = self.lock();
        st.io = Some(io);
        st.released = Some(Instant::now());
        st.done |= !more;
        if let Some(next) = st.queue.pop_front() {
            next.unpark();
        } else if st.loop_parked || st.done {
            self.cv.notify_all();
        }
        true
    }

    /// A caller got what it waited for: it leaves the queue, and the next one is woken when
    /// the waiting half is free.
    fn leave(&self) {
        let me = thread::current().id();
        let mut st = self.lock();
        if st.queue.is_empty() {
            return;
        }
        st.queue.retain(|t| t.id() != me);
        if st.io.is_some() {
            if let Some(next) = st.queue.pop_front() {
                next.unpark();
            }
        }
    }

    /// The loop's thread: waits with the waiting half while no caller does, until the client
    /// is done; then finishes it.
    fn run(&self, shared: &Shared<Blocking>) {
        loop {
            let io = {
                let mut st = self.lock();
                loop {
                    if st.done {
                        break None;
                    }
                    if st.io.is_some() {
                        if let Some(next) = st.queue.pop_front() {
                            // Free, and a caller waits for it: hand it over.
                            st.released = Some(Instant::now());
                            next.unpark();
                        }
                    }
                    let since = st.released.map(|t| t.elapsed());
                    let recent = since
                        .filter(|d| *d < CALLER_GRACE)
                        .filter(|_| self.detached.load(Ordering::SeqCst) == 0);
                    if st.io.is_some() && st.queue.is_empty() && recent.is_none() {
                        st.held_by_loop = true;
                        break st.io.take();
                    }
                    st = match recent {
                        // A caller let go a moment ago: it is likely to come back.
                        Some(d) => {
                            self.cv
                                .wait_timeout(st, CALLER_GRACE.saturating_sub(d))
                                .unwrap_or_else(PoisonError::into_inner)
                                .0
                        }
                        // A caller has it, or callers wait for it: they hand it on.
                        None => {
                            st.loop_parked = true;
                            let mut st = self
                                .cv
                                .wait_timeout(st, Duration::from_secs(1))
                                .unwrap_or_else(PoisonError::into_inner)
                                .0;
                            st.loop_parked = false;
                            st
                        }
                    };
                }
            };
            let Some(mut io) = io else { break };
            let more = io.turn(shared, None);
            let mut st = self.lock();
            st.held_by_loop = false;
            st.io = Some(io);
            st.done |= !more;
            if let Some(next) = st.queue.pop_front() {
                // Handed to a caller: stay away while it is likely to keep it.
                st.released = Some(Instant::now());
                next.unpark();
            }
        }
        // Done: wait for the waiting half (a caller may still hold it, briefly), then finish.
        let io = {
            let mut st = self.lock();
            loop {
                if let Some(io) = st.io.take() {
                    break io;
                }
                st = self
                    .cv
                    .wait_timeout(st, Duration::from_millis(50))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        io.finish(shared);
        // Callers still parked see the client closed.
        for t in self.lock().queue.drain(..) {
            t.unpark();
        }
    }
}

/// The waiting half: what the poller waits on, and the child it reaps.
struct Loop {
    rx: Receiver<Input>,
    /// Reports taken by one wait, and stdout bytes read by one wait (kept for their
    /// allocations).
    inbox: Vec<Input>,
    read: Vec<u8>,
    /// The stdio child's stdout (`None` on HTTP).
    stdout: Option<Stdout>,
    child: Option<Child>,
    /// Closed by the stderr reader when the child's stderr ends.
    stderr_done: Option<Receiver<()>>,
}

impl Loop {
    /// Waits for input once (at most until the session's next deadline or `until`) and feeds
    /// what came. `false`: the client has closed and its goodbye exchanges are done.
    fn turn(&mut self, shared: &Shared<Blocking>, until: Option<Instant>) -> bool {
        let next = {
            let mut s = shared.lock();
            s.begin_wait().map(|wake| (wake, s.rt.stdin_pending()))
        };
        let Some((wake, pending)) = next else {
            return false;
        };
        let wake = until.map_or(wake, |u| u.min(wake));
        let sleep = wake.saturating_duration_since(Instant::now());
        let mut room = false;
        let mut closed = false;
        let (inbox, read) = (&mut self.inbox, &mut self.read);
        match &mut self.stdout {
            #[cfg(unix)]
            Some(Stdout::Polled(reader)) => {
                let woke = reader.wait(sleep, pending, read);
                room = woke.room;
                closed = woke.closed;
                inbox.extend(self.rx.try_iter().take(CHANNEL_DEPTH));
            }
            _ => {
                if let Ok(input) = self.rx.recv_timeout(sleep) {
                    inbox.push(input);
                    inbox.extend(self.rx.try_iter().take(CHANNEL_DEPTH));
                }
            }
        }
        shared.with_loop(|s| {
            if room {
                if let Link::Stdio(l) = &mut s.rt.link {
                    l.stdin.flush();
                }
            }
            if !read.is_empty() {
                s.stdio_bytes(read);
            }
            for input in inbox.drain(..) {
                match input {
                    Input::Exchange(report) => s.exchange(report),
                    Input::Stdout(bytes) => s.stdio_bytes(&bytes),
                    Input::StdioClosed => closed = true,
                    Input::Kick => {}
                }
            }
            s.end_wait();
        });
        read.clear();
        if closed {
            let status = self.reap();
            shared.with_loop(|s| {
                if let Link::Stdio(l) = &mut s.rt.link {
                    l.exit = Some(status);
                }
                s.stdio_closed();
            });
        }
        true
    }

    /// The client is done: drops what is still open and stops the child.
    fn finish(mut self, shared: &Shared<Blocking>) {
        shared.with_loop(|s| s.rt.stop());
        self.stop_child();
    }

    /// stdio: the child's stdout closed; collect its exit status (killing it if it lingers
    /// with its stdout closed), and let the stderr reader take the last lines (bounded: a
    /// grandchild may hold the pipe).
    fn reap(&mut self) -> String {
        let Some(child) = &mut self.child else {
            return "unknown".to_owned();
        };
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status.to_string(),
                Ok(None) if started.elapsed() < REAP_WAIT => {
                    thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break "it closed its stdout and was killed".to_owned();
                }
                Err(e) => break format!("its status is unknown: {e}"),
            }
        };
        if let Some(done) = &self.stderr_done {
            let _ = done.recv_timeout(REAP_WAIT);
        }
        self.child = None;
        status
    }

    /// Stops the child if it still runs.
    fn stop_child(&mut self) {
        #[cfg(unix)]
        if let Some(Stdout::Polled(reader)) = &mut self.stdout {
            reader.close();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The agent of one worker: statuses are answers, not errors; no redirects.
fn mcp_client_agent(connect_timeout: Duration) -> ureq::Agent {
    mcp_client_config(connect_timeout, 2).into()
}

/// The settings of the workers' agents, keeping at most `idle` connections alive.
fn mcp_client_config(connect_timeout: Duration, idle: usize) -> ureq::config::Config {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(connect_timeout))
        .input_buffer_size(BUFFER_BYTES)
        .output_buffer_size(HEAD_BYTES)
        .max_idle_connections(idle)
        .max_idle_connections_per_host(idle)
        .max_idle_age(crate::KEEP_ALIVE_REUSE)
        .user_agent(concat!("mcpwire/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// A guarded fetch (an authorization fetch, see [`Guarded`]) on a worker: on an agent made for
/// it alone, whose resolver connects only to the addresses the policy let through
/// ([`http::GuardedResolver`]), and which keeps no connection (nothing is pooled with the
/// worker's own agent, in either direction). A cancellation shuts this agent down.
fn guarded_exchange(
    connect_timeout: Duration,
    guarded: Guarded,
    ctl: &JobCtl,
    request: &Request,
    stream: StreamId,
    tx: &SyncSender<Input>,
) {
    let refused = http::Refusal::default();
    let config = mcp_client_config(connect_timeout, 0);
    let agent = http::guarded_agent(config, guarded, Arc::clone(&refused));
    if !ctl.switch_to(&agent) {
        return;
    }
    exchange(&agent, ctl, request, stream, tx, Some(&refused));
}

/// One HTTP exchange on a worker: the head, each body chunk, then the end (or the failure;
/// a refusal the agent's [`http::GuardedResolver`] left in `refused` is reported as such).
/// A cancelled exchange reports nothing more (the core has forgotten its stream).
fn exchange(
    agent: &ureq::Agent,
    ctl: &JobCtl,
    request: &Request,
    stream: StreamId,
    tx: &SyncSender<Input>,
    refused: Option<&http::Refusal>,
) {
    let failed = |cause: String| {
        if !ctl.is_cancelled() {
            let _ = tx.send(Input::Exchange(Exchange::Failed { stream, cause }));
        }
    };
    let head_bytes = request.url.len()
        + request
            .headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 4)
            .sum::<usize>();
    // The head ureq adds (request line, Host, User-Agent, Content-Length) stays far below 1 KiB.
    if head_bytes + 1024 > HEAD_BYTES {
        return failed(format!(
            "the request headers are {head_bytes} bytes, more than this client sends \
             ({} KiB at most)",
            HEAD_BYTES / 1024
        ));
    }
    let response = match http::send(agent, request, None) {
        Ok(r) => r,
        Err(e) => {
            let rejected =
                refused.and_then(|r| r.lock().unwrap_or_else(PoisonError::into_inner).take());
            return match rejected {
                Some(rejected) if !ctl.is_cancelled() => {
                    let _ = tx.send(Input::Exchange(Exchange::Refused { stream, rejected }));
                }
                Some(_) => {}
                None => failed(e.to_string()),
            };
        }
    };
    let head = http::head_of(&response);
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; BUFFER_BYTES];
    // A body of known length that fits one buffer (a JSON answer) is read whole and reported
    // with its head: one hand-off to the loop instead of three. Streams (SSE) and longer bodies
    // are reported as they come.
    let known = head
        .headers
        .get("content-length")
        .and_then(|v| v.trim().parse::<usize>().ok());
    if known.is_some_and(|n| n <= BUFFER_BYTES) {
        let mut body = Vec::new();
        loop {
            if ctl.is_cancelled() {
                return;
            }
            match reader.read(&mut buf) {
                Ok(0) => {
                    let _ = tx.send(Input::Exchange(Exchange::Whole { stream, head, body }));
                    return;
                }
                Ok(n) => body.extend_from_slice(buf.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // The head did arrive: report it, then the failure, as a stream would.
                    if tx
                        .send(Input::Exchange(Exchange::Head { stream, head }))
                        .is_ok()
                    {
                        failed(format!("reading the response body: {e}"));
                    }
                    return;
                }
            }
        }
    }
    if tx
        .send(Input::Exchange(Exchange::Head { stream, head }))
        .is_err()
    {
        return;
    }
    loop {
        if ctl.is_cancelled() {
            return;
        }
        match reader.read(&mut buf) {
            Ok(0) => {
                let _ = tx.send(Input::Exchange(Exchange::End { stream }));
                return;
            }
            Ok(n) => {
                let bytes = buf.get(..n).unwrap_or_default().to_vec();
                if tx
                    .send(Input::Exchange(Exchange::Data { stream, bytes }))
                    .is_err()
                {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return failed(format!("reading the response body: {e}")),
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map(drop)
}

fn keep_stderr(stderr: impl Read, tail: &Mutex<StderrTail>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(super::STDERR_LINE_BYTES).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            let _ = reader.skip_until(b'\n');
        }
        tail.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(&String::from_utf8_lossy(&line));
    }
}

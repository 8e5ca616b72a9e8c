//! The blocking MCP client: [`McpClient`] runs [`mcpwire_core::mcp::Client`] on ureq,
//! std threads and `std::process`.
//!
//! Each method starts one operation in the session (`super::session`: the core, the outcomes,
//! the running operation) and waits until that operation's final event: on the channel the
//! workers report to, or in `poll(2)` on a stdio child's pipes, until the session's deadline.
//! This runtime makes no protocol decision; it only moves bytes:
//!
//! - **HTTP**: every [`Output::Http`] (the whole request, as the core built it) is one job on a
//!   bounded pool of worker threads, each with its own ureq agent (16 KiB buffers, no
//!   redirects: a bearer token must not follow one). The worker sends the response head, then
//!   each body chunk as it arrives (SSE is never buffered whole), then the end, over a bounded
//!   channel. [`Output::CloseStream`] cancels the job: its agent is shut down, which closes the
//!   connection at once.
//! - **stdio**: the child is started without a shell. On unix the loop's own thread writes its
//!   stdin and reads its stdout, waiting in `poll(2)`; elsewhere a thread writes and one reads
//!   (see `pipes`). One more thread keeps the tail of its stderr (`StderrTail`). The child is
//!   killed when the client is dropped; if it exits, the waiting operation fails with
//!   [`Error::ServerExited`], its exit status and stderr tail.
//!
//! ```no_run
//! use mcpwire::mcp::{blocking::McpClient, ClientOptions};
//! let mut client = McpClient::connect_http("http://127.0.0.1:3000/mcp", ClientOptions::default())?;
//! let tools = client.list_tools(None)?;
//! let answer = client.call_tool("echo", serde_json::json!({"text": "hi"}))?;
//! # Ok::<(), mcpwire::mcp::Error>(())
//! ```
//!
//! [`Output::Http`]: mcpwire_core::mcp::Output::Http
//! [`Output::CloseStream`]: mcpwire_core::mcp::Output::CloseStream

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use mcpwire_core::http::Request;
use mcpwire_core::mcp::{
    subscription, CachedEra, Client, ListKind, OpId, OpOptions, Operation, StreamId,
    SubscriptionFilter, SubscriptionHandle, Transport,
};
use serde_json::Value;

use super::session::{Exchange, LinkView, Runtime, Session};
use super::{
    arguments_object, check_http_url, stdio_command, ClientOptions, Error, Host, StderrTail,
};
use crate::net::threads::{AgentFactory, JobCtl, Pool, Work};
use crate::net::ureq as http;

mod pipes;

use pipes::{Pipes, Threads, Waker};

/// ureq's read buffer per connection, and the largest body chunk sent to the loop.
const BUFFER_BYTES: usize = 16 * 1024;
/// ureq's write buffer per connection: a request head (request line and headers) must fit in
/// it, so it is as large as the head most servers accept.
const HEAD_BYTES: usize = 64 * 1024;
/// Reports waiting for the loop (the workers block when it is full: back-pressure).
const CHANNEL_DEPTH: usize = 256;
/// HTTP jobs waiting for a worker.
const JOB_QUEUE: usize = 64;

/// What the workers and pipe threads report to the loop.
enum Input {
    Exchange(Exchange),
    /// Bytes of the stdio child's stdout (the pipe threads).
    Stdout(Vec<u8>),
    StdioClosed,
    /// A [`Canceller`] asked to cancel this operation (ignored unless it is still running).
    Cancel(OpId),
}

/// Cancels the operation an [`McpClient`] is running, from another thread. The operation then
/// ends with [`Error::Cancelled`] (on HTTP its exchange is closed; on stdio the server gets
/// `notifications/cancelled`). Without an operation running it does nothing.
#[derive(Clone, Debug)]
pub struct Canceller {
    tx: SyncSender<Input>,
    waker: Waker,
    running: Arc<AtomicU64>,
}

impl Canceller {
    /// Cancels the running operation (if none runs, or the client is gone, nothing happens).
    pub fn cancel(&self) {
        let running = self.running.load(Ordering::SeqCst);
        if running > 0 && self.tx.send(Input::Cancel(OpId(running - 1))).is_ok() {
            self.waker.wake();
        }
    }
}

struct HttpLink {
    url: String,
    pool: Pool,
    jobs: BTreeMap<StreamId, Arc<JobCtl>>,
}

struct StdioLink {
    program: String,
    child: Child,
    pipes: Pipes,
    stderr: Arc<Mutex<StderrTail>>,
    /// Closed by the stderr reader when the child's stderr ends.
    stderr_done: Receiver<()>,
    /// How the child ended, once it did.
    exit: Option<String>,
}

enum Link {
    Http(HttpLink),
    Stdio(StdioLink),
}

/// A blocking MCP client of one server (see the module docs).
pub struct McpClient {
    session: Session<Blocking>,
}

impl McpClient {
    /// A client of the Streamable HTTP server at `url` (`http://` or `https://`). Nothing is
    /// sent until the first operation, which also detects the server's era.
    pub fn connect_http(url: &str, options: ClientOptions) -> Result<McpClient, Error> {
        check_http_url(url)?;
        let connect_timeout = options.connect_timeout;
        let agents: AgentFactory = Arc::new(move || mcp_client_agent(connect_timeout));
        let pool = Pool::new("mcp-client", options.max_exchanges, JOB_QUEUE, agents);
        let (tx, rx) = mpsc::sync_channel(CHANNEL_DEPTH);
        let core = Client::new(options.core_config(Transport::Http, url, crate::random_seed()));
        let link = Link::Http(HttpLink {
            url: url.to_owned(),
            pool,
            jobs: BTreeMap::new(),
        });
        Ok(McpClient::with_link(core, link, tx, rx, Waker::default()))
    }

    /// A client of the stdio server `program args...`, started now without a shell. The child
    /// inherits the environment and is killed when the client is dropped.
    pub fn connect_stdio(
        program: &str,
        args: &[&str],
        options: ClientOptions,
    ) -> Result<McpClient, Error> {
        McpClient::start_stdio(program, args, options, cfg!(unix))
    }

    /// [`McpClient::connect_stdio`] with a thread writing the child's stdin and one reading its
    /// stdout, as on platforms without `poll(2)`: there for the tests of that path on unix.
    #[doc(hidden)]
    pub fn connect_stdio_with_pipe_threads(
        program: &str,
        args: &[&str],
        options: ClientOptions,
    ) -> Result<McpClient, Error> {
        McpClient::start_stdio(program, args, options, false)
    }

    fn start_stdio(
        program: &str,
        args: &[&str],
        options: ClientOptions,
        polled: bool,
    ) -> Result<McpClient, Error> {
        let (mut command, spawn_err) = stdio_command(program, args);
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
        let (pipes, waker) = match (stdin, stdout, polled) {
            #[cfg(unix)]
            (stdin, stdout, true) => match pipes::Polled::start(stdin, stdout) {
                Ok((p, waker)) => (Pipes::Polled(p), waker),
                Err((stdin, stdout)) => {
                    let threads = Threads::start(stdin, stdout, tx.clone()).map_err(&spawn_err)?;
                    (Pipes::Threads(threads), Waker::default())
                }
            },
            (stdin, stdout, _) => {
                let threads = Threads::start(stdin, stdout, tx.clone()).map_err(&spawn_err)?;
                (Pipes::Threads(threads), Waker::default())
            }
        };
        let tail = Arc::clone(&stderr);
        let (done_tx, stderr_done) = mpsc::channel::<()>();
        spawn("mcp-stdio-err", move || {
            keep_stderr(err, &tail);
            drop(done_tx);
        })
        .map_err(&spawn_err)?;
        let core = Client::new(options.core_config(Transport::Stdio, "", crate::random_seed()));
        let link = Link::Stdio(StdioLink {
            program: program.to_owned(),
            child,
            pipes,
            stderr,
            stderr_done,
            exit: None,
        });
        Ok(McpClient::with_link(core, link, tx, rx, waker))
    }

    fn with_link(
        core: Client,
        link: Link,
        tx: SyncSender<Input>,
        rx: Receiver<Input>,
        waker: Waker,
    ) -> Self {
        let rt = Blocking {
            link,
            tx,
            rx,
            waker,
            inbox: Vec::new(),
        };
        McpClient {
            session: Session::new(core, rt),
        }
    }

    /// Sets the host hooks (elicitation answers, progress, notifications, events).
    pub fn set_host(&mut self, host: Box<dyn Host + Send>) {
        self.session.set_host(host);
    }

    /// A handle that cancels the running operation from another thread.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            tx: self.session.rt.tx.clone(),
            waker: self.session.rt.waker.clone(),
            running: self.session.running(),
        }
    }

    /// The era and version in use, once known.
    pub fn era(&self) -> Option<CachedEra> {
        self.session.era()
    }

    // -----------------------------------------------------------------------------------------
    // Operations.

    operations!();

    /// Any operation, with its options.
    pub fn run(&mut self, operation: Operation, options: OpOptions) -> Result<Value, Error> {
        let op = self.session.start(operation, options)?;
        loop {
            if let Some(outcome) = self.session.outcome(op) {
                return outcome;
            }
            self.wait(None);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Subscriptions.

    /// Subscribes to `filter`'s change notifications (with the era not known yet, the core
    /// learns it first and opens the subscription in it). Read the events, the acknowledgment
    /// first, with [`McpClient::next_subscription_event`].
    pub fn subscribe(&mut self, filter: SubscriptionFilter) -> Result<SubscriptionHandle, Error> {
        self.session.subscribe(filter)
    }

    /// Waits up to `timeout` for the next subscription event (acknowledged, changed,
    /// disconnected, ended); `None` when none came.
    pub fn next_subscription_event(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<subscription::Event>, Error> {
        let until = self.session.events_until(timeout);
        loop {
            if let Some(event) = self.session.subscription_event(until) {
                return event;
            }
            self.wait(until);
        }
    }

    /// Ends a subscription.
    pub fn unsubscribe(&mut self, sub: SubscriptionHandle) -> Result<(), Error> {
        self.session.unsubscribe(sub)
    }

    /// Ends the client: cancels what is in flight, ends a legacy HTTP session (`DELETE`),
    /// waiting for that at most a couple of seconds, and stops the child process.
    pub fn close(mut self) {
        self.shutdown();
    }

    // -----------------------------------------------------------------------------------------
    // Waiting.

    /// Waits for reports (at most until the session's deadline or `until`) and hands them to
    /// the session, stdout bytes first; then the core's timer fires when due.
    fn wait(&mut self, until: Option<Instant>) {
        let sleep = self
            .session
            .wake_at(until)
            .saturating_duration_since(Instant::now());
        let mut inbox = std::mem::take(&mut self.session.rt.inbox);
        self.session.rt.wait(sleep, &mut inbox);
        // Taken out while the session reads them (no copy).
        let read = self.session.rt.take_read();
        if !read.is_empty() {
            self.session.stdio_bytes(&read);
        }
        self.session.rt.give_back(read);
        for input in inbox.drain(..) {
            match input {
                Input::Exchange(report) => self.session.exchange(report),
                Input::Stdout(bytes) => self.session.stdio_bytes(&bytes),
                Input::StdioClosed => {
                    self.session.rt.reap();
                    self.session.stdio_closed();
                }
                Input::Cancel(op) => self.session.cancel_requested(op),
            }
        }
        self.session.rt.inbox = inbox;
        self.session.after_wait();
    }

    fn shutdown(&mut self) {
        let until = self.session.shutdown();
        while self.session.rt.jobs_open() && until.is_some_and(|u| Instant::now() < u) {
            self.wait(until);
        }
        self.session.rt.stop();
    }
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.session.fmt(f)
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The blocking runtime: the link, the channel every worker and pipe thread reports to.
struct Blocking {
    link: Link,
    tx: SyncSender<Input>,
    rx: Receiver<Input>,
    /// Wakes the loop for a [`Canceller`] (stdio on unix, where it does not wait on `rx`).
    waker: Waker,
    /// Reports taken by one wait, kept for their allocation.
    inbox: Vec<Input>,
}

impl Runtime for Blocking {
    fn start_http(&mut self, stream: StreamId, request: Request) -> Result<(), String> {
        let Link::Http(h) = &mut self.link else {
            return Ok(());
        };
        let ctl = JobCtl::new();
        let tx = self.tx.clone();
        let work: Work = Box::new(move |agent, ctl| exchange(agent, ctl, &request, stream, &tx));
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
            s.pipes.send(line);
        }
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
    /// Waits up to `sleep` for reports (a bounded batch) into `inbox`: on the pipes (stdio on
    /// unix, whose stdout bytes stay in the pipes' buffer) or on the channel.
    fn wait(&mut self, sleep: Duration, inbox: &mut Vec<Input>) {
        #[cfg(unix)]
        if let Link::Stdio(StdioLink {
            pipes: Pipes::Polled(pipes),
            ..
        }) = &mut self.link
        {
            // A canceller's request first; only without one wait for the pipes.
            match self.rx.try_recv() {
                Ok(input) => inbox.push(input),
                Err(_) => {
                    if pipes.wait(sleep) {
                        inbox.push(Input::StdioClosed);
                    }
                    inbox.extend(self.rx.try_iter().take(CHANNEL_DEPTH));
                }
            }
            return;
        }
        match self.rx.recv_timeout(sleep) {
            Ok(input) => {
                inbox.push(input);
                inbox.extend(self.rx.try_iter().take(CHANNEL_DEPTH));
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
    }

    /// The stdout bytes the polled pipes read in the last wait (none elsewhere).
    fn take_read(&mut self) -> Vec<u8> {
        #[cfg(unix)]
        if let Link::Stdio(StdioLink {
            pipes: Pipes::Polled(pipes),
            ..
        }) = &mut self.link
        {
            return std::mem::take(&mut pipes.read);
        }
        Vec::new()
    }

    /// The buffer [`Blocking::take_read`] took, emptied, for the next reads.
    fn give_back(&mut self, mut read: Vec<u8>) {
        #[cfg(unix)]
        if let Link::Stdio(StdioLink {
            pipes: Pipes::Polled(pipes),
            ..
        }) = &mut self.link
        {
            read.clear();
            pipes.read = read;
        }
        #[cfg(not(unix))]
        drop(read);
    }

    fn jobs_open(&self) -> bool {
        matches!(&self.link, Link::Http(h) if !h.jobs.is_empty())
    }

    /// stdio: the child's stdout closed; collect its exit status (killing it if it lingers
    /// with its stdout closed).
    fn reap(&mut self) {
        let Link::Stdio(s) = &mut self.link else {
            return;
        };
        let started = Instant::now();
        let status = loop {
            match s.child.try_wait() {
                Ok(Some(status)) => break status.to_string(),
                Ok(None) if started.elapsed() < Duration::from_millis(500) => {
                    thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = s.child.kill();
                    let _ = s.child.wait();
                    break "it closed its stdout and was killed".to_owned();
                }
                Err(e) => break format!("its status is unknown: {e}"),
            }
        };
        // Let the stderr reader take the last lines (bounded: a grandchild may hold the pipe).
        let _ = s.stderr_done.recv_timeout(Duration::from_millis(500));
        s.exit = Some(status);
    }

    /// Drops the exchanges still open, or closes the child's stdin and stops it.
    fn stop(&mut self) {
        match &mut self.link {
            Link::Http(h) => {
                for ctl in std::mem::take(&mut h.jobs).into_values() {
                    ctl.cancel();
                }
            }
            Link::Stdio(s) => {
                s.pipes.close_stdin();
                if s.exit.is_none() {
                    let _ = s.child.kill();
                    let _ = s.child.wait();
                    s.exit = Some("stopped by the client".into());
                }
            }
        }
    }
}

/// The agent of one worker: statuses are answers, not errors; no redirects.
fn mcp_client_agent(connect_timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_connect(Some(connect_timeout))
        .input_buffer_size(BUFFER_BYTES)
        .output_buffer_size(HEAD_BYTES)
        .max_idle_connections(2)
        .max_idle_connections_per_host(2)
        .max_idle_age(crate::KEEP_ALIVE_REUSE)
        .user_agent(concat!("mcpwire/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

/// One HTTP exchange on a worker: the head, each body chunk, then the end (or the failure).
/// A cancelled exchange reports nothing more (the core has forgotten its stream).
fn exchange(
    agent: &ureq::Agent,
    ctl: &JobCtl,
    request: &Request,
    stream: StreamId,
    tx: &SyncSender<Input>,
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
        Err(e) => return failed(e.to_string()),
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

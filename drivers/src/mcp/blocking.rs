//! The blocking MCP client: [`McpClient`] runs [`mcpwire_core::mcp::client::Client`] on ureq,
//! std threads and `std::process`.
//!
//! Each method starts one operation in the core and runs the loop until that operation's final
//! event: read the clock, feed what the workers reported, drain the core's outputs and perform
//! them, then wait on the channel until [`Client::poll_timeout`]. The loop makes no protocol
//! decision; it only moves bytes:
//!
//! - **HTTP**: every [`Output::Http`] is one job on a bounded pool of worker threads, each with
//!   its own ureq agent (16 KiB buffers, no redirects: a bearer token must not follow one). The
//!   worker sends the response head, then each body chunk as it arrives (SSE is never buffered
//!   whole), then the end, over a bounded channel. [`Output::CloseStream`] cancels the job: its
//!   agent is shut down, which closes the connection at once.
//! - **stdio**: the child is started without a shell. On unix the loop's own thread writes its
//!   stdin and reads its stdout, waiting in `poll(2)`; elsewhere a thread writes and one reads
//!   (see `pipes`). One more thread keeps the tail of its stderr ([`StderrTail`]). The child is
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

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::http::{Request, ResponseHead};
use mcpwire_core::mcp::cache::ListKind;
use mcpwire_core::mcp::client::{Client, OpId, OpOptions, Operation, Output, StreamId};
use mcpwire_core::mcp::era::CachedEra;
use mcpwire_core::mcp::request::Transport;
use mcpwire_core::mcp::subscription::{self, SubscriptionFilter, SubscriptionHandle};
use serde_json::Value;

use super::{
    arguments_object, check_http_url, ClientOptions, Error, Host, LinkView, Outcomes, StderrTail,
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
/// The longest the loop sleeps without looking at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// The longest stdout line of a stdio server (a longer one is skipped).
const MAX_STDIO_LINE: usize = 16 * 1024 * 1024;
/// How long dropping the client waits for its goodbye requests (a legacy `DELETE`).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// What the workers report to the loop.
enum Input {
    Head {
        stream: StreamId,
        head: ResponseHead,
    },
    Data {
        stream: StreamId,
        bytes: Vec<u8>,
    },
    End {
        stream: StreamId,
    },
    /// A whole response at once: the head, its body (of a known, small length), the end.
    Whole {
        stream: StreamId,
        head: ResponseHead,
        body: Vec<u8>,
    },
    Failed {
        stream: StreamId,
        cause: String,
    },
    Line(String),
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
    core: Client,
    link: Link,
    tx: SyncSender<Input>,
    rx: Receiver<Input>,
    /// The host, final outcomes and subscription events.
    outcomes: Outcomes,
    /// The transport's last error (HTTP), for the message of an operation it failed.
    last_cause: Option<String>,
    /// The operation a method is running.
    current: Option<OpId>,
    /// The same, for [`Canceller`]s: its id plus one, 0 for none.
    running: Arc<AtomicU64>,
    /// Wakes the loop for a [`Canceller`] (stdio on unix, where it does not wait on `rx`).
    waker: Waker,
    /// Reports read by the loop itself (stdio on unix), kept for their allocation.
    inbox: Vec<Input>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = match &self.link {
            Link::Http(h) => h.url.as_str(),
            Link::Stdio(s) => s.program.as_str(),
        };
        f.debug_struct("McpClient")
            .field("target", &target)
            .field("core", &self.core)
            .finish_non_exhaustive()
    }
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
        let spawn_err = |source| Error::Spawn {
            program: program.to_owned(),
            source,
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_err)?;
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
                    let threads = Threads::start(stdin, stdout, tx.clone()).map_err(spawn_err)?;
                    (Pipes::Threads(threads), Waker::default())
                }
            },
            (stdin, stdout, _) => {
                let threads = Threads::start(stdin, stdout, tx.clone()).map_err(spawn_err)?;
                (Pipes::Threads(threads), Waker::default())
            }
        };
        let tail = Arc::clone(&stderr);
        let (done_tx, stderr_done) = mpsc::channel::<()>();
        spawn("mcp-stdio-err", move || {
            keep_stderr(err, &tail);
            drop(done_tx);
        })
        .map_err(spawn_err)?;
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
        // Nothing is drained yet: events the core emits at creation (a pinned era) reach the
        // host set with `set_host` before the first operation.
        McpClient {
            core,
            link,
            tx,
            rx,
            outcomes: Outcomes::default(),
            last_cause: None,
            current: None,
            running: Arc::new(AtomicU64::new(0)),
            waker,
            inbox: Vec::new(),
        }
    }

    /// Sets the host hooks (elicitation answers, progress, notifications, events).
    pub fn set_host(&mut self, host: Box<dyn Host + Send>) {
        self.outcomes.set_host(host);
    }

    /// A handle that cancels the running operation from another thread.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            tx: self.tx.clone(),
            waker: self.waker.clone(),
            running: Arc::clone(&self.running),
        }
    }

    /// The era and version in use, once known.
    pub fn era(&self) -> Option<CachedEra> {
        self.core.era()
    }

    // -----------------------------------------------------------------------------------------
    // Operations.

    /// `server/discover` (in the legacy era: the `initialize` result).
    pub fn discover(&mut self) -> Result<Value, Error> {
        self.run(Operation::Discover, OpOptions::default())
    }

    /// One page of `tools/list` (`cursor: None` for the first).
    pub fn list_tools(&mut self, cursor: Option<&str>) -> Result<Value, Error> {
        self.list(ListKind::Tools, cursor)
    }

    /// One page of `prompts/list`.
    pub fn list_prompts(&mut self, cursor: Option<&str>) -> Result<Value, Error> {
        self.list(ListKind::Prompts, cursor)
    }

    /// One page of `resources/list`.
    pub fn list_resources(&mut self, cursor: Option<&str>) -> Result<Value, Error> {
        self.list(ListKind::Resources, cursor)
    }

    /// One page of `resources/templates/list`.
    pub fn list_resource_templates(&mut self, cursor: Option<&str>) -> Result<Value, Error> {
        self.list(ListKind::ResourceTemplates, cursor)
    }

    /// One page of any list.
    pub fn list(&mut self, kind: ListKind, cursor: Option<&str>) -> Result<Value, Error> {
        let operation = Operation::List {
            kind,
            cursor: cursor.map(str::to_owned),
        };
        self.run(operation, OpOptions::default())
    }

    /// `tools/call` with progress notifications requested (they reach [`Host::on_progress`]).
    /// A tool that failed answers a result with `isError: true`, not an error.
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, Error> {
        let options = OpOptions {
            progress: true,
            ..OpOptions::default()
        };
        self.call_tool_with(name, arguments, options)
    }

    /// `tools/call` with the core's per-operation options (timeout, progress, cache policy).
    pub fn call_tool_with(
        &mut self,
        name: &str,
        arguments: Value,
        options: OpOptions,
    ) -> Result<Value, Error> {
        let operation = Operation::CallTool {
            name: name.to_owned(),
            arguments: arguments_object(arguments)?,
        };
        self.run(operation, options)
    }

    /// `prompts/get`.
    pub fn get_prompt(&mut self, name: &str, arguments: Value) -> Result<Value, Error> {
        let operation = Operation::GetPrompt {
            name: name.to_owned(),
            arguments: arguments_object(arguments)?,
        };
        self.run(operation, OpOptions::default())
    }

    /// `resources/read`.
    pub fn read_resource(&mut self, uri: &str) -> Result<Value, Error> {
        let operation = Operation::ReadResource {
            uri: uri.to_owned(),
        };
        self.run(operation, OpOptions::default())
    }

    /// `ping` (the legacy era only; the modern era has none and answers
    /// [`IncompatibleError::Unsupported`](mcpwire_core::mcp::client::IncompatibleError::Unsupported)).
    pub fn ping(&mut self) -> Result<Value, Error> {
        self.run(Operation::Ping, OpOptions::default())
    }

    /// Any operation, with its options.
    pub fn run(&mut self, operation: Operation, options: OpOptions) -> Result<Value, Error> {
        self.check_alive()?;
        let op = self.core.start(Instant::now(), operation, options);
        let text = self.wait_for(op)?;
        serde_json::from_str(&text).map_err(|e| Error::BadResult(e.to_string()))
    }

    // -----------------------------------------------------------------------------------------
    // Subscriptions.

    /// Subscribes to `filter`'s change notifications (with the era not known yet, the core
    /// learns it first and opens the subscription in it). Read the events, the acknowledgment
    /// first, with [`McpClient::next_subscription_event`].
    pub fn subscribe(&mut self, filter: SubscriptionFilter) -> Result<SubscriptionHandle, Error> {
        self.check_alive()?;
        let sub = self
            .core
            .subscribe(Instant::now(), filter)
            .map_err(|e| Error::Usage(Box::new(e)))?;
        self.drain();
        Ok(sub)
    }

    /// Waits up to `timeout` for the next subscription event (acknowledged, changed,
    /// disconnected, ended); `None` when none came.
    pub fn next_subscription_event(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<subscription::Event>, Error> {
        let until = Instant::now().checked_add(timeout);
        loop {
            self.drain();
            if let Some(e) = self.outcomes.next_subscription_event() {
                return Ok(Some(e));
            }
            self.check_alive()?;
            if until.is_none_or(|u| Instant::now() >= u) {
                return Ok(None);
            }
            self.wait_once(until);
        }
    }

    /// Ends a subscription.
    pub fn unsubscribe(&mut self, sub: SubscriptionHandle) -> Result<(), Error> {
        self.core
            .unsubscribe(Instant::now(), sub)
            .map_err(|e| Error::Usage(Box::new(e)))?;
        self.drain();
        Ok(())
    }

    /// Ends the client: cancels what is in flight, ends a legacy HTTP session (`DELETE`),
    /// waiting for that at most a couple of seconds, and stops the child process.
    pub fn close(mut self) {
        self.shutdown();
    }

    // -----------------------------------------------------------------------------------------
    // The loop.

    /// Runs the loop until `op` ends.
    fn wait_for(&mut self, op: OpId) -> Result<String, Error> {
        self.current = Some(op);
        self.running.store(op.0.saturating_add(1), Ordering::SeqCst);
        let outcome = self.wait_for_current(op);
        self.running.store(0, Ordering::SeqCst);
        self.current = None;
        outcome
    }

    fn wait_for_current(&mut self, op: OpId) -> Result<String, Error> {
        loop {
            self.drain();
            if let Some(outcome) = self.outcomes.take(op) {
                return outcome.map_err(|e| self.explain(e));
            }
            if let Err(e) = self.check_alive() {
                let _ = self.core.cancel(Instant::now(), op);
                self.drain();
                self.outcomes.take(op);
                return Err(e);
            }
            self.wait_once(None);
        }
    }

    /// Waits for one report (at most until the core's deadline or `until`), feeds it and any
    /// that follow it, and fires the core's timer when due.
    fn wait_once(&mut self, until: Option<Instant>) {
        let now = Instant::now();
        let deadline = self.core.poll_timeout().map(|t| t.at);
        let mut sleep = MAX_SLEEP;
        for d in [deadline, until].into_iter().flatten() {
            sleep = sleep.min(d.saturating_duration_since(now));
        }
        if !self.wait_polled(sleep) {
            self.wait_channel(sleep);
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            self.core.handle_timeout(now);
        }
    }

    /// stdio on unix: waits up to `sleep` on the pipes (or a canceller) and feeds what came;
    /// `false` on any other link, which reports over the channel.
    fn wait_polled(&mut self, sleep: Duration) -> bool {
        #[cfg(unix)]
        if let Link::Stdio(StdioLink {
            pipes: Pipes::Polled(pipes),
            ..
        }) = &mut self.link
        {
            let mut inbox = std::mem::take(&mut self.inbox);
            // A canceller's request first; only without one wait for the pipes.
            match self.rx.try_recv() {
                Ok(input) => inbox.push(input),
                Err(_) => {
                    pipes.wait(sleep, &mut inbox);
                    inbox.extend(self.rx.try_iter().take(CHANNEL_DEPTH));
                }
            }
            for input in inbox.drain(..) {
                self.feed(input);
            }
            self.inbox = inbox;
            return true;
        }
        let _ = sleep;
        false
    }

    /// Waits up to `sleep` for a report on the channel and feeds it, with a bounded batch of
    /// what else is waiting.
    fn wait_channel(&mut self, sleep: Duration) {
        match self.rx.recv_timeout(sleep) {
            Ok(input) => {
                self.feed(input);
                for _ in 0..CHANNEL_DEPTH {
                    match self.rx.try_recv() {
                        Ok(input) => self.feed(input),
                        Err(_) => break,
                    }
                }
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
    }

    /// Feeds one report to the core. The core refuses only inputs of the other transport,
    /// which this driver never mixes, so its `UsageError`s are not expected here.
    fn feed(&mut self, input: Input) {
        if let Input::Whole { stream, head, body } = input {
            // The three inputs in their order, each followed by a drain.
            self.feed(Input::Head { stream, head });
            if !body.is_empty() {
                self.feed(Input::Data {
                    stream,
                    bytes: body,
                });
            }
            return self.feed(Input::End { stream });
        }
        let now = Instant::now();
        let _ = match input {
            Input::Head { stream, head } => {
                self.core
                    .handle_response_head(now, SystemTime::now(), stream, head)
            }
            Input::Data { stream, bytes } => self.core.handle_response_data(now, stream, &bytes),
            Input::End { stream } => {
                self.forget_job(stream);
                self.core.handle_response_end(now, stream)
            }
            Input::Failed { stream, cause } => {
                self.forget_job(stream);
                self.last_cause = Some(cause);
                self.core.handle_transport_failed(now, stream)
            }
            Input::Line(line) => self.core.handle_stdio_line(now, &line),
            Input::StdioClosed => {
                self.reap();
                self.core.handle_stdio_closed(now)
            }
            Input::Cancel(op) if self.current == Some(op) => self.core.cancel(now, op),
            Input::Cancel(_) | Input::Whole { .. } => Ok(()),
        };
        self.drain();
    }

    /// Performs every output of the core.
    fn drain(&mut self) {
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Http { stream, request } => self.send_http(stream, request),
                Output::CloseStream(stream) => {
                    if let Link::Http(h) = &mut self.link {
                        if let Some(ctl) = h.jobs.remove(&stream) {
                            ctl.cancel();
                        }
                    }
                }
                Output::Stdio(line) => {
                    if let Link::Stdio(s) = &mut self.link {
                        s.pipes.send(line);
                    }
                }
                Output::Event(event) => self.outcomes.on_event(&mut self.core, event),
            }
        }
    }

    fn send_http(&mut self, stream: StreamId, request: Request) {
        let Link::Http(h) = &mut self.link else {
            return;
        };
        let ctl = JobCtl::new();
        let tx = self.tx.clone();
        let work: Work = Box::new(move |agent, ctl| exchange(agent, ctl, &request, stream, &tx));
        if h.pool.submit(Arc::clone(&ctl), work).is_ok() {
            h.jobs.insert(stream, ctl);
        } else {
            self.last_cause = Some("too many HTTP exchanges at once (the queue is full)".into());
            let _ = self.core.handle_transport_failed(Instant::now(), stream);
        }
    }

    fn forget_job(&mut self, stream: StreamId) {
        if let Link::Http(h) = &mut self.link {
            h.jobs.remove(&stream);
        }
    }

    /// Adds what the transport said to an operation's error (see [`LinkView::explain`]).
    fn explain(&mut self, e: Error) -> Error {
        let cause = self.last_cause.take();
        self.view().explain(e, cause)
    }

    /// stdio: fails once the child has ended (it is not restarted).
    fn check_alive(&self) -> Result<(), Error> {
        self.view().check_alive()
    }

    fn view(&self) -> LinkView<'_> {
        match &self.link {
            Link::Http(h) => LinkView::Http { url: &h.url },
            Link::Stdio(s) => LinkView::Stdio {
                program: &s.program,
                exit: s.exit.as_deref(),
                stderr: &s.stderr,
            },
        }
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

    fn shutdown(&mut self) {
        self.core.shutdown(Instant::now());
        self.drain();
        let until = Instant::now().checked_add(SHUTDOWN_WAIT);
        while matches!(&self.link, Link::Http(h) if !h.jobs.is_empty())
            && until.is_some_and(|u| Instant::now() < u)
        {
            self.wait_once(until);
        }
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

impl Drop for McpClient {
    fn drop(&mut self) {
        self.shutdown();
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
            let _ = tx.send(Input::Failed { stream, cause });
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
                    let _ = tx.send(Input::Whole { stream, head, body });
                    return;
                }
                Ok(n) => body.extend_from_slice(buf.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // The head did arrive: report it, then the failure, as a stream would.
                    if tx.send(Input::Head { stream, head }).is_ok() {
                        failed(format!("reading the response body: {e}"));
                    }
                    return;
                }
            }
        }
    }
    if tx.send(Input::Head { stream, head }).is_err() {
        return;
    }
    loop {
        if ctl.is_cancelled() {
            return;
        }
        match reader.read(&mut buf) {
            Ok(0) => {
                let _ = tx.send(Input::End { stream });
                return;
            }
            Ok(n) => {
                let bytes = buf.get(..n).unwrap_or_default().to_vec();
                if tx.send(Input::Data { stream, bytes }).is_err() {
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

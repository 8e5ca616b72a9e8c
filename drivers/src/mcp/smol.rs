//! The smol MCP client: [`McpClient`] runs [`mcpwire_core::mcp::Client`] on smol tasks,
//! hyper 1 (the tunnel's smol HTTP stack, `crate::net::hyper_smol`) and async-process. Its methods
//! are those of the blocking client, as `async fn`s.
//!
//! Each method starts one operation in the session (`super::session`: the core, the outcomes,
//! the running operation) and waits until that operation's final event: for the next report,
//! stdio bytes or an async-io timer at the session's deadline, whichever comes first. This
//! runtime makes no protocol decision; it only moves bytes:
//!
//! - **HTTP**: every [`Output::Http`] (the whole request, as the core built it) is one smol
//!   task: it takes an idle kept-alive connection to the server (or opens one), sends the
//!   request, reports the response head, then each body chunk as it arrives (SSE is never
//!   buffered whole), then the end, over a bounded channel (a task waits while it is full); a
//!   connection whose body was read to its end is kept for the next exchange. At most
//!   [`ClientOptions::max_exchanges`] exchanges run at once (more wait for one to end), and as
//!   many idle connections are kept. [`Output::CloseStream`] drops the task, which drops its
//!   connection at once.
//! - **stdio**: the child is started without a shell (`kill_on_drop`). The loop itself owns
//!   its stdin and stdout (async-io registered pipes) and uses them on the caller's task, with
//!   no thread hand-off per message: a request line is written as soon as the core emits it,
//!   as far as the pipe takes it; the rest is written while the loop waits, so a child that
//!   stops reading never holds up timeouts or cancellation. While waiting, the loop reads
//!   stdout into a buffer of its own and hands the bytes to the core, which cuts the lines
//!   (a line longer than 16 MiB is skipped). One task keeps the tail of its stderr. If the
//!   child exits, the waiting operation fails with [`Error::ServerExited`], its exit status
//!   and stderr tail.
//!
//! HTTP exchange tasks run on smol's global executor, so they progress while no method is
//! awaited. The stdio pipes are served while a method runs (between methods the child's output
//! waits in the pipe, and request lines the pipe did not take wait in the client).
//! Dropping the client ends it like [`McpClient::close`], except that the goodbye requests (a
//! legacy `DELETE`) are left to a detached task bounded to a couple of seconds.
//!
//! ```no_run
//! use mcpwire::mcp::{smol::McpClient, ClientOptions};
//! smol::block_on(async {
//!     let mut client =
//!         McpClient::connect_http("http://127.0.0.1:3000/mcp", ClientOptions::default())?;
//!     let tools = client.list_tools(None).await?;
//!     let answer = client.call_tool("echo", serde_json::json!({"text": "hi"})).await?;
//!     Ok::<(), mcpwire::mcp::Error>(())
//! })?;
//! # Ok::<(), mcpwire::mcp::Error>(())
//! ```
//!
//! [`Output::Http`]: mcpwire_core::mcp::Output::Http
//! [`Output::CloseStream`]: mcpwire_core::mcp::Output::CloseStream

use std::collections::BTreeMap;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_rustls::rustls::ClientConfig as TlsConfig;
use mcpwire_core::http::Request;
use mcpwire_core::mcp::{
    subscription, CachedEra, Client, ListKind, OpId, OpOptions, Operation, StreamId,
    SubscriptionFilter, SubscriptionHandle, Transport,
};
use serde_json::Value;
use smol::channel::{self, Receiver, Sender};
use smol::future::FutureExt as _;
use smol::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, BufReader};
use smol::lock::Semaphore;
use smol::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use smol::{Task, Timer};

use super::session::{Exchange, LinkView, Runtime, Session, SHUTDOWN_WAIT};
use super::{
    arguments_object, check_http_url, stdio_command, ClientOptions, Error, Host, StderrTail,
};
use crate::net::hyper_smol::{self as http, HttpError};

/// Reports waiting for the loop (the tasks wait when it is full: back-pressure).
const CHANNEL_DEPTH: usize = 256;
/// How much one read of a stdio server's stdout takes at most.
const READ_CHUNK: usize = 64 * 1024;
/// A buffer of request lines that grew beyond this (a long line) is freed once written.
const KEEP_BUFFER: usize = 1024 * 1024;
/// How long a child whose stdout closed may take to exit before it is killed, and how long
/// its stderr reader may take to deliver the last lines.
const REAP_WAIT: Duration = Duration::from_millis(500);

/// Cancels the operation an [`McpClient`] is running, from another task or thread. The
/// operation then ends with [`Error::Cancelled`] (on HTTP its exchange is closed; on stdio the
/// server gets `notifications/cancelled`). Without an operation running it does nothing.
#[derive(Clone, Debug)]
pub struct Canceller {
    tx: Sender<OpId>,
    running: Arc<AtomicU64>,
}

impl Canceller {
    /// Cancels the running operation (if none runs, or the client is gone, nothing happens).
    /// It never waits.
    pub fn cancel(&self) {
        let running = self.running.load(Ordering::SeqCst);
        if running > 0 {
            let _ = self.tx.try_send(OpId(running - 1));
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
    child: Child,
    /// The child's stdin; `None` once closed (by the client, or a write failed: the child is
    /// gone, which its stdout's end reports).
    stdin: Option<ChildStdin>,
    /// Request lines (each with its newline) not written yet, from `written` on.
    pending: Vec<u8>,
    written: usize,
    /// The child's stdout; `None` once it ended.
    stdout: Option<ChildStdout>,
    /// What one read of stdout fills ([`READ_CHUNK`] bytes, allocated once).
    read_buf: Vec<u8>,
    stderr: Arc<Mutex<StderrTail>>,
    /// Closed by the stderr reader when the child's stderr ends.
    stderr_done: Receiver<()>,
    /// How the child ended, once it did.
    exit: Option<String>,
    /// The stderr reader (dropped with the client).
    _stderr_task: Task<()>,
}

/// What the stdio pipes gave the loop.
enum Pipe {
    /// This many bytes of stdout are in `read_buf`.
    Read(usize),
    /// stdout ended (or failed).
    Closed,
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
    /// registers `cx` to be woken when it has room.
    fn poll_write_pending(&mut self, cx: &mut Context<'_>) {
        while self.written < self.pending.len() {
            let Some(stdin) = &mut self.stdin else { break };
            let rest = self.pending.get(self.written..).unwrap_or_default();
            match Pin::new(stdin).poll_write(cx, rest) {
                Poll::Ready(Ok(n)) if n > 0 => self.written += n,
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The child is gone (its stdout's end reports it) or it closed its stdin.
                Poll::Ready(_) => self.stdin = None,
                Poll::Pending => return,
            }
        }
        self.pending.clear();
        if self.pending.capacity() > KEEP_BUFFER {
            self.pending = Vec::new();
        }
        self.written = 0;
    }

    /// Writes pending lines while the pipe has room, then waits for stdout to give bytes
    /// (or end). Cancel-safe: what was read is in `read_buf` once this returns, and nothing
    /// is read by a poll that returns `Pending`.
    fn poll_pipes(&mut self, cx: &mut Context<'_>) -> Poll<Pipe> {
        self.poll_write_pending(cx);
        let Some(stdout) = &mut self.stdout else {
            // Its end was reported; nothing more comes.
            return Poll::Pending;
        };
        match Pin::new(stdout).poll_read(cx, &mut self.read_buf) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                self.stdout = None;
                Poll::Ready(Pipe::Closed)
            }
            Poll::Ready(Ok(n)) => Poll::Ready(Pipe::Read(n)),
            Poll::Pending => Poll::Pending,
        }
    }
}

enum Link {
    Http(HttpLink),
    Stdio(StdioLink),
}

/// An async MCP client of one server on smol (see the module docs).
pub struct McpClient {
    session: Session<Smol>,
}

impl McpClient {
    /// A client of the Streamable HTTP server at `url` (`http://` or `https://`). Nothing is
    /// sent until the first operation, which also detects the server's era.
    pub fn connect_http(url: &str, options: ClientOptions) -> Result<McpClient, Error> {
        check_http_url(url)?;
        // A TLS set-up failure (not expected: the settings are fixed) fails each exchange.
        let tls = http::tls_config();
        let core = Client::new(options.core_config(Transport::Http, url, crate::random_seed()));
        let link = Link::Http(HttpLink {
            url: url.to_owned(),
            tls,
            connect_timeout: options.connect_timeout,
            pool: http::Pool::new(options.max_exchanges),
            permits: Arc::new(Semaphore::new(options.max_exchanges.max(1))),
            jobs: BTreeMap::new(),
        });
        Ok(McpClient::with_link(
            core,
            link,
            channel::bounded(CHANNEL_DEPTH),
        ))
    }

    /// A client of the stdio server `program args...`, started now without a shell. The child
    /// inherits the environment and is killed when the client is dropped.
    pub fn connect_stdio(
        program: &str,
        args: &[&str],
        options: ClientOptions,
    ) -> Result<McpClient, Error> {
        let (command, spawn_err) = stdio_command(program, args);
        // The conversion keeps the program and arguments, not the pipes.
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
            program: program.to_owned(),
            child,
            stdin: Some(stdin),
            pending: Vec::new(),
            written: 0,
            stdout: Some(stdout),
            read_buf: vec![0; READ_CHUNK],
            stderr,
            stderr_done,
            exit: None,
            _stderr_task: stderr_task,
        });
        // Nothing reports over the channel on stdio; the loop holds its sender.
        Ok(McpClient::with_link(
            core,
            link,
            channel::bounded(CHANNEL_DEPTH),
        ))
    }

    fn with_link(
        core: Client,
        link: Link,
        (tx, rx): (Sender<Exchange>, Receiver<Exchange>),
    ) -> Self {
        let (cancel_tx, cancel_rx) = channel::unbounded();
        let rt = Smol {
            link,
            tx,
            rx,
            cancel_tx,
            cancel_rx,
            closed: false,
            timer: Timer::never(),
            timer_at: None,
        };
        McpClient {
            session: Session::new(core, rt),
        }
    }

    /// Sets the host hooks (elicitation answers, progress, notifications, events).
    pub fn set_host(&mut self, host: Box<dyn Host + Send>) {
        self.session.set_host(host);
    }

    /// A handle that cancels the running operation from another task or thread.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            tx: self.session.rt.cancel_tx.clone(),
            running: self.session.running(),
        }
    }

    /// The era and version in use, once known.
    pub fn era(&self) -> Option<CachedEra> {
        self.session.era()
    }

    // -----------------------------------------------------------------------------------------
    // Operations.

    operations!(async await);

    /// Any operation, with its options.
    ///
    /// Dropping the returned future before it completes cancels the operation the next time
    /// the client runs (its answer is not waited for).
    pub async fn run(&mut self, operation: Operation, options: OpOptions) -> Result<Value, Error> {
        let op = self.session.start(operation, options)?;
        loop {
            if let Some(outcome) = self.session.outcome(op) {
                return outcome;
            }
            self.wait(None).await;
        }
    }

    // -----------------------------------------------------------------------------------------
    // Subscriptions.

    /// Subscribes to `filter`'s change notifications (with the era not known yet, the core
    /// learns it first and opens the subscription in it). Read the events, the acknowledgment
    /// first, with [`McpClient::next_subscription_event`].
    pub async fn subscribe(
        &mut self,
        filter: SubscriptionFilter,
    ) -> Result<SubscriptionHandle, Error> {
        self.session.subscribe(filter)
    }

    /// Waits up to `timeout` for the next subscription event (acknowledged, changed,
    /// disconnected, ended); `None` when none came.
    pub async fn next_subscription_event(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<subscription::Event>, Error> {
        let until = self.session.events_until(timeout);
        loop {
            if let Some(event) = self.session.subscription_event(until) {
                return event;
            }
            self.wait(until).await;
        }
    }

    /// Ends a subscription.
    pub async fn unsubscribe(&mut self, sub: SubscriptionHandle) -> Result<(), Error> {
        self.session.unsubscribe(sub)
    }

    /// Ends the client: cancels what is in flight, ends a legacy HTTP session (`DELETE`),
    /// waiting for that at most a couple of seconds, and stops the child process.
    pub async fn close(mut self) {
        let until = self.session.shutdown();
        while self.session.rt.jobs_open() && until.is_some_and(|u| Instant::now() < u) {
            self.wait(until).await;
        }
        self.session.rt.stop_link();
    }

    // -----------------------------------------------------------------------------------------
    // Waiting.

    /// Waits for one report, stdio bytes or cancel request (at most until the session's
    /// deadline or `until`) and hands it to the session, with a bounded batch of the reports
    /// that follow it; then the core's timer fires when due.
    async fn wait(&mut self, until: Option<Instant>) {
        let wake = self.session.wake_at(until);
        match self.session.rt.wait(wake).await {
            Woke::Pipe(Pipe::Read(n)) => {
                // Taken out while the session reads it (feeding writes to the link).
                let buf = match &mut self.session.rt.link {
                    Link::Stdio(s) => std::mem::take(&mut s.read_buf),
                    Link::Http(_) => Vec::new(),
                };
                self.session.stdio_bytes(buf.get(..n).unwrap_or_default());
                if let Link::Stdio(s) = &mut self.session.rt.link {
                    s.read_buf = buf;
                }
            }
            Woke::Pipe(Pipe::Closed) => {
                self.session.rt.reap().await;
                self.session.stdio_closed();
            }
            Woke::Exchange(report) => {
                self.session.exchange(report);
                // Take what else is waiting, a bounded batch, before looking at the clock.
                for _ in 0..CHANNEL_DEPTH {
                    match self.session.rt.rx.try_recv() {
                        Ok(report) => self.session.exchange(report),
                        Err(_) => break,
                    }
                }
            }
            Woke::Cancel(op) => self.session.cancel_requested(op),
            Woke::Timer => {}
        }
        self.session.after_wait();
    }
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.session.fmt(f)
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        if self.session.rt.closed {
            return;
        }
        self.session.shutdown();
        // The goodbye exchanges (a legacy DELETE) finish in the background, bounded.
        if let Link::Http(h) = &mut self.session.rt.link {
            let jobs: Vec<Task<()>> = std::mem::take(&mut h.jobs).into_values().collect();
            if !jobs.is_empty() {
                smol::spawn(async move {
                    async move {
                        for job in jobs {
                            job.await;
                        }
                    }
                    .or(async {
                        Timer::after(SHUTDOWN_WAIT).await;
                    })
                    .await;
                })
                .detach();
            }
        }
        self.session.rt.stop_link();
    }
}

/// The smol runtime: the link, the channel the exchange tasks report to, the cancel channel
/// and the loop's timer.
struct Smol {
    link: Link,
    tx: Sender<Exchange>,
    rx: Receiver<Exchange>,
    cancel_tx: Sender<OpId>,
    cancel_rx: Receiver<OpId>,
    closed: bool,
    /// The loop's wake-up timer, kept between waits (arming one registers it with the reactor
    /// and wakes the reactor's thread), and when it is set to fire.
    timer: Timer,
    timer_at: Option<Instant>,
}

/// What woke the loop.
enum Woke {
    Pipe(Pipe),
    Exchange(Exchange),
    Cancel(OpId),
    Timer,
}

impl Runtime for Smol {
    fn start_http(&mut self, stream: StreamId, request: Request) -> Result<(), String> {
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
    /// as its stdin pipe takes them (the rest while the loop waits).
    fn write_stdio(&mut self, line: String) {
        if let Link::Stdio(s) = &mut self.link {
            s.queue(&line);
        }
    }

    fn flush_stdio(&mut self) {
        if let Link::Stdio(s) = &mut self.link {
            if s.written < s.pending.len() {
                // No waker: what the pipe does not take now is written while the loop waits
                // (which polls the pipe again with its own waker).
                s.poll_write_pending(&mut Context::from_waker(Waker::noop()));
            }
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

impl Smol {
    /// Waits until `wake` for a report, stdio bytes or a cancel request.
    async fn wait(&mut self, wake: Instant) -> Woke {
        // Re-armed only when it must fire earlier than it is set to, or it has fired: waking
        // early is harmless (the caller looks at the clock and waits again).
        if self
            .timer_at
            .is_none_or(|at| wake < at || at <= Instant::now())
        {
            self.timer.set_at(wake);
            self.timer_at = Some(wake);
        }
        let (rx, cancel_rx, timer) = (&self.rx, &self.cancel_rx, &mut self.timer);
        let link = &mut self.link;
        async move {
            match link {
                Link::Stdio(s) => Woke::Pipe(poll_fn(|cx| s.poll_pipes(cx)).await),
                // The exchange tasks report over the channel (nothing does on stdio). The
                // client holds a sender of each channel, so neither closes while it waits.
                Link::Http(_) => match rx.recv().await {
                    Ok(report) => Woke::Exchange(report),
                    Err(_) => smol::future::pending().await,
                },
            }
        }
        .or(async move {
            match cancel_rx.recv().await {
                Ok(op) => Woke::Cancel(op),
                Err(_) => smol::future::pending().await,
            }
        })
        .or(async move {
            timer.await;
            Woke::Timer
        })
        .await
    }

    fn jobs_open(&self) -> bool {
        matches!(&self.link, Link::Http(h) if !h.jobs.is_empty())
    }

    /// stdio: the child's stdout closed; collect its exit status (killing it if it lingers
    /// with its stdout closed), and let the stderr reader take the last lines (bounded: a
    /// grandchild may hold the pipe), each wait bounded by [`REAP_WAIT`].
    async fn reap(&mut self) {
        let Link::Stdio(s) = &mut self.link else {
            return;
        };
        let status = async {
            match s.child.status().await {
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
            let _ = s.child.kill();
            "it closed its stdout and was killed".to_owned()
        });
        let done = s.stderr_done.clone();
        async move {
            let _ = done.recv().await;
        }
        .or(async {
            Timer::after(REAP_WAIT).await;
        })
        .await;
        s.exit = Some(status);
    }

    /// Closes the child's stdin and stops it, or drops the exchanges still open.
    fn stop_link(&mut self) {
        self.closed = true;
        match &mut self.link {
            Link::Http(h) => h.jobs.clear(),
            Link::Stdio(s) => {
                s.stdin = None; // closes the child's stdin
                s.pending = Vec::new();
                s.written = 0;
                if s.exit.is_none() {
                    let _ = s.child.kill();
                    s.exit = Some("stopped by the client".into());
                }
            }
        }
    }
}

/// What the HTTP stack's error says, for [`Error::Transport`].
fn describe(e: &HttpError) -> String {
    match e {
        HttpError::Request => "the request cannot be sent (bad URL or header)".into(),
        HttpError::Resolve(Some(kind)) => format!("the host name did not resolve ({kind})"),
        HttpError::Resolve(None) => "the host name did not resolve".into(),
        HttpError::Connect(kind) => format!("cannot connect: {kind}"),
        HttpError::Tls => "the TLS handshake failed".into(),
        HttpError::Exchange(Some(kind)) => format!("the exchange failed: {kind}"),
        HttpError::Exchange(None) => "the exchange failed".into(),
        HttpError::Protocol => "the answer is not HTTP/1.1".into(),
        HttpError::TimedOut => "timed out".into(),
    }
}

/// What an exchange task needs to reach the server.
struct Route {
    pool: Arc<http::Pool>,
    permits: Arc<Semaphore>,
    tls: Arc<TlsConfig>,
    connect_timeout: Duration,
}

/// One HTTP exchange as a task: the head, each body chunk, then the end (or the failure).
/// It waits for a permit first and holds it to its end. Dropping the task (a closed stream)
/// drops the connection.
async fn exchange(route: Route, request: Request, stream: StreamId, tx: Sender<Exchange>) {
    let _permit = route.permits.acquire_arc().await;
    let sent = http::send_pooled(&route.pool, &route.tls, &request, route.connect_timeout).await;
    let mut response = match sent {
        Ok(r) => r,
        Err(e) => {
            let cause = describe(&e);
            let _ = tx.send(Exchange::Failed { stream, cause }).await;
            return;
        }
    };
    let head = response.head.clone();
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

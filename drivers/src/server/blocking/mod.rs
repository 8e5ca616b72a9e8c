//! The blocking server driver: std threads. [`serve_stdio`] serves one client on stdin and
//! stdout until stdin ends; [`HttpServer`] serves Streamable HTTP on a loopback listener until
//! it is stopped. One thread waits for the core's next deadline; the application runs on the
//! thread of the input that reached it (the stdin reader, a connection's thread, the timer, or
//! whoever called the [`Responder`]).

mod http;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mcpwire_core::mcp::server::{Application, Server, ServerConfig};

use super::glue::{lock, Shared, StdoutQueue, StdoutSink, TimerWake, MAX_STDOUT_BACKLOG};
use super::transport::Out;
use super::{url_of, with_clock, HttpOptions, Responder, ServeError};

/// The bytes read from stdin at once.
const READ_CHUNK: usize = 64 * 1024;

/// Serves `app` on this process's stdin and stdout until stdin ends (the client closed it),
/// then cancels what is still in flight, writes what is left and returns.
pub fn serve_stdio<A>(config: ServerConfig, app: A) -> Result<(), ServeError>
where
    A: Application + Send + 'static,
{
    serve_stdio_with(config, |_| app)
}

/// [`serve_stdio`] with the application made from the server's [`Responder`] (for one that
/// answers later or reports changes).
pub fn serve_stdio_with<A>(
    config: ServerConfig,
    make_app: impl FnOnce(Responder) -> A,
) -> Result<(), ServeError>
where
    A: Application + Send + 'static,
{
    serve_stdio_inner(config, io::stdin(), io::stdout(), make_app, direct_stdout())
}

/// [`serve_stdio_with`] reading `input` (stdin behind a wrapper of the application's, such as
/// a request log) and writing this process's stdout, as [`serve_stdio_with`] does.
pub fn serve_stdio_reading<A, R>(
    config: ServerConfig,
    input: R,
    make_app: impl FnOnce(Responder) -> A,
) -> Result<(), ServeError>
where
    A: Application + Send + 'static,
    R: Read,
{
    serve_stdio_inner(config, input, io::stdout(), make_app, direct_stdout())
}

/// [`serve_stdio_with`] on any reader and writer (a pipe, a socket, a test's buffers): `input`
/// is read on this thread until it ends, `output` written on a thread of its own.
pub fn serve_stdio_on<A, R, W>(
    config: ServerConfig,
    input: R,
    output: W,
    make_app: impl FnOnce(Responder) -> A,
) -> Result<(), ServeError>
where
    A: Application + Send + 'static,
    R: Read,
    W: Write + Send + 'static,
{
    serve_stdio_inner(config, input, output, make_app, None)
}

fn serve_stdio_inner<A, R, W>(
    config: ServerConfig,
    mut input: R,
    output: W,
    make_app: impl FnOnce(Responder) -> A,
    direct: Option<DirectStdout>,
) -> Result<(), ServeError>
where
    A: Application + Send + 'static,
    R: Read,
    W: Write + Send + 'static,
{
    let server = Server::new(with_clock(config))?;
    let shared = Shared::<mpsc::SyncSender<Out>>::new_with(server, |r| Box::new(make_app(r)));
    let timer = ThreadTimer::start(&shared)?;
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let queue = shared.stdout_queue.clone();
    let writer = std::thread::Builder::new()
        .name("mcpwire-server-stdout".to_owned())
        .spawn(move || write_lines(output, &rx, &queue))
        .map_err(|source| ServeError::Io {
            what: "starting the stdout writer",
            source,
        })?;
    shared.set_stdout(Box::new(LineSender {
        tx,
        wake: shared.stdout_queue.clone(),
        direct,
    }));
    let mut buf = vec![0u8; READ_CHUNK];
    let mut failed = None;
    loop {
        shared.stdout_queue.wait_below(MAX_STDOUT_BACKLOG);
        match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => shared.with(|server, now| server.handle_stdio_bytes(now, &buf[..n])),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    shared.with(|server, now| server.handle_stdio_eof(now));
    // What is still in flight is cancelled (its answers go out first), then the writer drains.
    shared.shutdown();
    timer.stop();
    let _ = writer.join();
    match failed {
        Some(source) => Err(ServeError::Io {
            what: "reading stdin",
            source,
        }),
        None => Ok(()),
    }
}

struct LineSender {
    tx: mpsc::Sender<Vec<u8>>,
    wake: Arc<StdoutQueue>,
    direct: Option<DirectStdout>,
}

impl StdoutSink for LineSender {
    fn push(&self, line: Vec<u8>) -> bool {
        // Nothing queued but this line (the engine counts it before the push, and pushes one
        // at a time), so the writer thread is idle: a short line that stdout takes without
        // blocking goes out from this thread, saving the writer's wake-up.
        let mut line = line;
        if let Some(direct) = &self.direct {
            if self.wake.bytes.load(Ordering::SeqCst) == line.len() {
                let written = direct.write_now(&line);
                if written > 0 {
                    self.wake.bytes.fetch_sub(written, Ordering::SeqCst);
                    self.wake.notify();
                    if written == line.len() {
                        return true;
                    }
                    // Cut short after all: the writer sends the rest (the engine's count
                    // of this line is put right if that fails).
                    line.drain(..written);
                    let ok = self.tx.send(line).is_ok();
                    if !ok {
                        self.wake.bytes.fetch_add(written, Ordering::SeqCst);
                        self.wake.notify();
                    }
                    return ok;
                }
            }
        }
        let ok = self.tx.send(line).is_ok();
        if !ok {
            self.wake.notify();
        }
        ok
    }
}

/// The process's own stdout when it is a pipe, written from the thread that produced a line
/// when that cannot block: a line of at most [`DirectStdout::ATOMIC`] bytes while `poll(2)`
/// says there is room (a pipe with room takes so short a write whole, at once). Anything else, and everything
/// while a line waits for the writer thread, goes through the writer: a thread holding the
/// engine never waits for the reader of stdout (the pipe deadlock the backlog exists for).
#[cfg(unix)]
struct DirectStdout {
    out: io::Stdout,
}

#[cfg(not(unix))]
#[allow(dead_code)] // never made: there is no poll(2) to ask
struct DirectStdout;

/// The fast path only where its guarantee holds: stdout is a pipe (a FIFO). A socket (what
/// libuv gives a child), a terminal or a file goes through the writer thread as before.
fn direct_stdout() -> Option<DirectStdout> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let out = io::stdout();
        let stat = rustix::fs::fstat(out.as_fd()).ok()?;
        (rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Fifo)
            .then_some(DirectStdout { out })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

impl DirectStdout {
    /// The longest line written directly: Linux's `PIPE_BUF` (a pipe that polls writable has
    /// a free page); POSIX's minimum elsewhere.
    #[cfg(target_os = "linux")]
    const ATOMIC: usize = 4096;
    #[cfg(not(target_os = "linux"))]
    const ATOMIC: usize = 512;

    /// Writes `line` if that cannot block: the bytes written (0: none).
    #[cfg(unix)]
    fn write_now(&self, line: &[u8]) -> usize {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        use std::os::fd::AsFd;
        if line.len() > Self::ATOMIC {
            return 0;
        }
        let fd = self.out.as_fd();
        let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match poll(&mut fds, Some(&zero)) {
            Ok(1) if fds[0].revents().contains(PollFlags::OUT) => {}
            _ => return 0,
        }
        // One write of at most PIPE_BUF bytes to a pipe is all or nothing.
        rustix::io::write(fd, line).unwrap_or(0)
    }

    #[cfg(not(unix))]
    fn write_now(&self, _line: &[u8]) -> usize {
        0
    }
}

/// Writes each line and flushes it (a client waits for whole lines); a broken pipe ends the
/// writer, and what is still queued is dropped (nobody reads it).
fn write_lines<W: Write>(mut out: W, rx: &mpsc::Receiver<Vec<u8>>, queue: &StdoutQueue) {
    let mut broken = false;
    while let Ok(line) = rx.recv() {
        let n = line.len();
        if !broken {
            broken = out.write_all(&line).and_then(|()| out.flush()).is_err();
        }
        queue.bytes.fetch_sub(n, Ordering::SeqCst);
        queue.notify();
    }
}

/// A Streamable HTTP server on a listener of its own (loopback by default), one thread per
/// connection, running the core until [`HttpServer::stop`] (or drop).
pub struct HttpServer {
    addr: SocketAddr,
    url: String,
    listener: Option<http::Listener>,
    engine: Arc<dyn Stop>,
    responder: Responder,
    timer: Option<ThreadTimer>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

trait Stop: Send + Sync {
    fn shutdown(&self);
}

impl Stop for Shared<mpsc::SyncSender<Out>> {
    fn shutdown(&self) {
        Shared::shutdown(self);
    }
}

impl HttpServer {
    /// Binds `options.listen` and serves `app`.
    pub fn start<A>(
        config: ServerConfig,
        options: HttpOptions,
        app: A,
    ) -> Result<HttpServer, ServeError>
    where
        A: Application + Send + 'static,
    {
        HttpServer::start_with(config, options, |_| app)
    }

    /// [`HttpServer::start`] with the application made from the server's [`Responder`].
    pub fn start_with<A>(
        config: ServerConfig,
        options: HttpOptions,
        make_app: impl FnOnce(Responder) -> A,
    ) -> Result<HttpServer, ServeError>
    where
        A: Application + Send + 'static,
    {
        let server = Server::new(with_clock(config))?;
        let path = server.config().http_path.clone();
        let limits = options.limits(server.limits().max_body_bytes);
        let socket = TcpListener::bind(options.listen).map_err(|source| ServeError::Bind {
            addr: options.listen,
            source,
        })?;
        let shared = Shared::<mpsc::SyncSender<Out>>::new_with(server, |r| Box::new(make_app(r)));
        shared.set_hook(options.hook.clone());
        let timer = ThreadTimer::start(&shared)?;
        let listener = http::Listener::start(socket, shared.clone(), limits).map_err(|source| {
            ServeError::Io {
                what: "starting the listener",
                source,
            }
        })?;
        let addr = listener.local_addr();
        Ok(HttpServer {
            addr,
            url: url_of(addr, &path),
            listener: Some(listener),
            responder: Responder::new(&shared),
            engine: shared,
            timer: Some(timer),
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint's URL (`http://127.0.0.1:PORT/mcp`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A handle for answering later and reporting changes.
    pub fn responder(&self) -> Responder {
        self.responder.clone()
    }

    /// Stops: what is in flight is cancelled (answered where it still can be), streams end,
    /// sessions close, then every connection is closed and every thread joined. Harmless
    /// twice.
    pub fn stop(&mut self) {
        if self.listener.is_none() {
            return;
        }
        self.engine.shutdown();
        if let Some(mut listener) = self.listener.take() {
            listener.stop();
        }
        if let Some(timer) = self.timer.take() {
            timer.stop();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread that waits for the core's next deadline and fires `handle_timeout`.
struct ThreadTimer {
    state: Arc<TimerState>,
    thread: JoinHandle<()>,
}

#[derive(Default)]
struct TimerState {
    at: Mutex<(Option<Instant>, bool)>,
    cv: Condvar,
}

impl TimerWake for TimerState {
    fn rearm(&self, at: Option<Instant>) {
        lock(&self.at).0 = at;
        self.cv.notify_all();
    }
}

impl ThreadTimer {
    fn start(shared: &Arc<Shared<mpsc::SyncSender<Out>>>) -> Result<ThreadTimer, ServeError> {
        let state = Arc::new(TimerState::default());
        shared.set_timer(state.clone());
        let engine = shared.clone();
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name("mcpwire-server-timer".to_owned())
            .spawn(move || timer_loop(&st, &engine))
            .map_err(|source| ServeError::Io {
                what: "starting the timer thread",
                source,
            })?;
        Ok(ThreadTimer { state, thread })
    }

    fn stop(self) {
        lock(&self.state.at).1 = true;
        self.state.cv.notify_all();
        let _ = self.thread.join();
    }
}

fn timer_loop(state: &TimerState, engine: &Shared<mpsc::SyncSender<Out>>) {
    // A deadline the core keeps in the past after firing would spin; it waits this long.
    const AGAIN: Duration = Duration::from_millis(10);
    let mut guard = lock(&state.at);
    let mut last_fired: Option<Instant> = None;
    loop {
        if guard.1 {
            return;
        }
        let now = Instant::now();
        match guard.0 {
            Some(at) if at <= now && last_fired.is_none_or(|f| now >= f + AGAIN) => {
                drop(guard);
                engine.with(|server, now| server.handle_timeout(now));
                last_fired = Some(Instant::now());
                guard = lock(&state.at);
            }
            Some(at) => {
                let until = if at <= now {
                    last_fired.map_or(now, |f| f + AGAIN)
                } else {
                    at
                };
                guard = state
                    .cv
                    .wait_timeout(guard, until.saturating_duration_since(now))
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            None => {
                guard = state
                    .cv
                    .wait(guard)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
    }
}

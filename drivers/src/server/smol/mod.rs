//! The smol server driver: the same as [`crate::server::blocking`] with `async fn`s, on
//! smol's global executor. [`serve_stdio`] serves one client on stdin and stdout until stdin
//! ends; [`HttpServer`] serves Streamable HTTP with hyper's HTTP/1.1 server connection, one task
//! per connection. One task waits for the core's next deadline; the application runs in the
//! task of the input that reached it (its methods must not block: a slow one returns
//! `Reply::Pending` and answers through the [`Responder`]).

mod http;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpwire_core::mcp::server::{Application, Server, ServerConfig};
use smol::channel::{Receiver, Sender};
use smol::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use smol::{Task, Timer};

use super::glue::{lock, Shared, StdoutQueue, StdoutSink, TimerWake, MAX_STDOUT_BACKLOG};
use super::transport::Out;
use super::{url_of, with_clock, HttpOptions, Responder, ServeError};

/// The bytes read from stdin at once.
const READ_CHUNK: usize = 64 * 1024;

/// Serves `app` on this process's stdin and stdout until stdin ends, then cancels what is
/// still in flight, writes what is left and returns.
pub async fn serve_stdio<A>(config: ServerConfig, app: A) -> Result<(), ServeError>
where
    A: Application + Send + 'static,
{
    serve_stdio_with(config, |_| app).await
}

/// [`serve_stdio`] with the application made from the server's [`Responder`].
pub async fn serve_stdio_with<A>(
    config: ServerConfig,
    make_app: impl FnOnce(Responder) -> A,
) -> Result<(), ServeError>
where
    A: Application + Send + 'static,
{
    // Small pipes: `Unblock`'s default (8 MiB each way) would read that much of stdin ahead of
    // the server and hide that much unwritten output from the backlog bound.
    serve_stdio_on(
        config,
        smol::Unblock::with_capacity(READ_CHUNK, std::io::stdin()),
        smol::Unblock::with_capacity(READ_CHUNK, std::io::stdout()),
        make_app,
    )
    .await
}

/// [`serve_stdio_with`] on any async reader and writer: `input` is read in this future until
/// it ends, `output` written by a task of its own (each line flushed). The backlog bound counts
/// what `output` has not taken: a writer that buffers (an `Unblock` with a large pipe) or a
/// reader that reads ahead widens it by its buffer.
pub async fn serve_stdio_on<A, R, W>(
    config: ServerConfig,
    mut input: R,
    output: W,
    make_app: impl FnOnce(Responder) -> A,
) -> Result<(), ServeError>
where
    A: Application + Send + 'static,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let server = Server::new(with_clock(config))?;
    let shared = Shared::<Sender<Out>>::new_with(server, |r| Box::new(make_app(r)));
    let timer = TaskTimer::start(&shared);
    let (tx, rx) = smol::channel::unbounded::<Vec<u8>>();
    let queue = shared.stdout_queue.clone();
    let writer = smol::spawn(write_lines(output, rx, queue));
    shared.set_stdout(Box::new(LineSender(tx)));
    let mut buf = vec![0u8; READ_CHUNK];
    let mut failed = None;
    loop {
        // A client that does not read its answers stops being read (bounded, polled: the
        // writer's progress has no async signal of its own).
        while shared.stdout_queue.over(MAX_STDOUT_BACKLOG) {
            Timer::after(Duration::from_millis(5)).await;
        }
        match input.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => shared.with(|server, now| server.handle_stdio_bytes(now, &buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    shared.with(|server, now| server.handle_stdio_eof(now));
    shared.shutdown();
    timer.stop().await;
    writer.await;
    match failed {
        Some(source) => Err(ServeError::Io {
            what: "reading stdin",
            source,
        }),
        None => Ok(()),
    }
}

struct LineSender(Sender<Vec<u8>>);

impl StdoutSink for LineSender {
    fn push(&self, line: Vec<u8>) -> bool {
        self.0.try_send(line).is_ok()
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut out: W,
    rx: Receiver<Vec<u8>>,
    queue: Arc<StdoutQueue>,
) {
    let mut broken = false;
    while let Ok(line) = rx.recv().await {
        let n = line.len();
        if !broken {
            broken = out.write_all(&line).await.is_err() || out.flush().await.is_err();
        }
        queue.bytes.fetch_sub(n, Ordering::SeqCst);
    }
}

/// A Streamable HTTP server on a listener of its own (loopback by default), one task per
/// connection, running the core until [`HttpServer::stop`].
pub struct HttpServer {
    addr: SocketAddr,
    url: String,
    listener: Option<http::Listener>,
    engine: Arc<dyn Stop>,
    responder: Responder,
    timer: Option<TaskTimer>,
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

impl Stop for Shared<Sender<Out>> {
    fn shutdown(&self) {
        Shared::shutdown(self);
    }
}

impl HttpServer {
    /// Binds `options.listen` and serves `app`.
    pub async fn start<A>(
        config: ServerConfig,
        options: HttpOptions,
        app: A,
    ) -> Result<HttpServer, ServeError>
    where
        A: Application + Send + 'static,
    {
        HttpServer::start_with(config, options, |_| app).await
    }

    /// [`HttpServer::start`] with the application made from the server's [`Responder`].
    pub async fn start_with<A>(
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
        let socket = smol::net::TcpListener::bind(options.listen)
            .await
            .map_err(|source| ServeError::Bind {
                addr: options.listen,
                source,
            })?;
        let shared = Shared::<Sender<Out>>::new_with(server, |r| Box::new(make_app(r)));
        shared.set_hook(options.hook.clone());
        let timer = TaskTimer::start(&shared);
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
    /// sessions close, then every connection and task ends. Harmless twice. (Dropping the
    /// server without it ends the tasks too, without the engine's goodbyes.)
    pub async fn stop(&mut self) {
        if self.listener.is_none() {
            return;
        }
        self.engine.shutdown();
        if let Some(mut listener) = self.listener.take() {
            listener.stop().await;
        }
        if let Some(timer) = self.timer.take() {
            timer.stop().await;
        }
    }
}

/// The task that waits for the core's next deadline and fires `handle_timeout`.
struct TaskTimer {
    state: Arc<TimerState>,
    task: Task<()>,
}

struct TimerState {
    at: Mutex<Option<Instant>>,
    wake: Sender<()>,
}

impl TimerWake for TimerState {
    fn rearm(&self, at: Option<Instant>) {
        *lock(&self.at) = at;
        // One pending wake is enough: the task reads the latest deadline.
        let _ = self.wake.try_send(());
    }
}

impl TaskTimer {
    fn start(shared: &Arc<Shared<Sender<Out>>>) -> TaskTimer {
        let (wake, woken) = smol::channel::bounded(1);
        let state = Arc::new(TimerState {
            at: Mutex::new(None),
            wake,
        });
        shared.set_timer(state.clone());
        let engine = shared.clone();
        let st = state.clone();
        let task = smol::spawn(async move { timer_loop(&st, &engine, woken).await });
        TaskTimer { state, task }
    }

    async fn stop(self) {
        self.state.wake.close();
        self.task.cancel().await;
    }
}

async fn timer_loop(state: &TimerState, engine: &Shared<Sender<Out>>, woken: Receiver<()>) {
    // A deadline the core keeps in the past after firing would spin; it waits this long.
    const AGAIN: Duration = Duration::from_millis(10);
    let mut last_fired: Option<Instant> = None;
    loop {
        let at = *lock(&state.at);
        let now = Instant::now();
        let Some(at) = at else {
            if woken.recv().await.is_err() {
                return;
            }
            continue;
        };
        let until = match last_fired {
            Some(f) if at <= now => at.max(f + AGAIN),
            _ => at,
        };
        let fired = smol::future::or(
            async {
                Timer::at(until).await;
                true
            },
            async {
                // Woken (a new deadline) or closed (stopping): look again.
                let _ = woken.recv().await;
                false
            },
        )
        .await;
        if woken.is_closed() {
            return;
        }
        if fired {
            engine.with(|server, now| server.handle_timeout(now));
            last_fired = Some(Instant::now());
        }
    }
}

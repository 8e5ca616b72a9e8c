//! The MCP client session, written once for both drivers: the core [`Client`], the outcomes of
//! its operations, the operation a method is running and the transport's last cause, over a
//! small [`Runtime`] each driver implements (in the spirit of the tunnel's
//! `tunnel::driver_core`).
//!
//! The runtime only performs: it starts an HTTP exchange (which reports back as [`Exchange`]s),
//! closes one, writes a stdio line, and waits, in its own way (a channel or `poll(2)`, an
//! async-io timer), until the deadline [`Session::wake_at`] gives, for the next report or stdio
//! bytes. A face's method is then a short loop:
//!
//! ```text
//! let op = session.start(operation, options)?;
//! loop {
//!     if let Some(outcome) = session.outcome(op) { return outcome; }
//!     let wake = session.wake_at(None);
//!     /* wait until `wake` for a report; hand it over: */
//!     session.exchange(report);          // or stdio_bytes(..), stdio_closed(), cancel_requested(..)
//!     session.after_wait();              // fires the core's timer when due
//! }
//! ```
//!
//! Every input is followed by a drain of the core's outputs, performed through the runtime. The
//! session makes no protocol decision; the core does.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::http::{Request, ResponseHead};
use mcpwire_core::mcp::{
    subscription, CachedEra, Client, Event, OpError, OpId, OpOptions, Operation, Output, StreamId,
    SubscriptionFilter, SubscriptionHandle, TransportError,
};
use serde_json::Value;

use super::{Error, Host, NoHost, StderrTail, MAX_SUBSCRIPTION_EVENTS};

/// The longest a loop sleeps without looking at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// How long ending the client waits for its goodbye requests (a legacy `DELETE`).
pub(crate) const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// What an HTTP exchange reports, in order: the head, body chunks, the end (or a failure).
pub(crate) enum Exchange {
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
}

/// What only the runtime does (see the module docs).
pub(crate) trait Runtime {
    /// Starts the exchange of `stream`, which reports [`Exchange`]s until it ends or is closed;
    /// `Err` with the cause when it cannot start (the exchange then fails in the core).
    fn start_http(&mut self, stream: StreamId, request: Request) -> Result<(), String>;
    /// The core closed `stream`: drop its exchange now (its connection too); it reports
    /// nothing more.
    fn close_http(&mut self, stream: StreamId);
    /// `stream`'s exchange reported its end or failure: forget it.
    fn exchange_ended(&mut self, stream: StreamId);
    /// Writes one line (the newline added here) to the child's stdin, as far as the pipe takes
    /// it without waiting; the rest while the runtime waits.
    fn write_stdio(&mut self, line: String);
    /// Every output of one drain was performed.
    fn flush_stdio(&mut self) {}
    /// What the link adds to an operation's error.
    fn link(&self) -> LinkView<'_>;
}

/// One MCP client session on a runtime (see the module docs). It owns the core; callers talk
/// to it.
pub(crate) struct Session<R> {
    core: Client,
    /// The host, final outcomes and subscription events.
    outcomes: Outcomes,
    /// The transport's last error (HTTP), for the message of an operation it failed.
    last_cause: Option<String>,
    /// The operation a method is running (a future dropped before its end leaves it here).
    current: Option<OpId>,
    /// The same, for a `Canceller`: its id plus one, 0 for none.
    running: Arc<AtomicU64>,
    /// What performs the core's outputs and waits.
    pub(crate) rt: R,
}

impl<R: Runtime> fmt::Debug for Session<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match self.rt.link() {
            LinkView::Http { url } => url,
            LinkView::Stdio { program, .. } => program,
        };
        f.debug_struct("McpClient")
            .field("target", &target)
            .field("core", &self.core)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Session<R> {
    /// A session of `core` on `rt`. Nothing is drained yet: events the core emits at creation
    /// (a pinned era) reach the host set with [`Session::set_host`] before the first operation.
    pub(crate) fn new(core: Client, rt: R) -> Self {
        Session {
            core,
            outcomes: Outcomes::default(),
            last_cause: None,
            current: None,
            running: Arc::new(AtomicU64::new(0)),
            rt,
        }
    }

    /// Sets the host hooks.
    pub(crate) fn set_host(&mut self, host: Box<dyn Host + Send>) {
        self.outcomes.host = host;
    }

    /// The era and version in use, once known.
    pub(crate) fn era(&self) -> Option<CachedEra> {
        self.core.era()
    }

    /// The running operation's id plus one (0: none), shared with a `Canceller`.
    pub(crate) fn running(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.running)
    }

    // -----------------------------------------------------------------------------------------
    // What a face's methods ask.

    /// Starts `operation` as the running one (an abandoned one is cancelled first).
    pub(crate) fn start(
        &mut self,
        operation: Operation,
        options: OpOptions,
    ) -> Result<OpId, Error> {
        self.abandon();
        self.check_alive()?;
        let op = self.core.start(Instant::now(), operation, options);
        self.current = Some(op);
        self.running.store(op.0.saturating_add(1), Ordering::SeqCst);
        Ok(op)
    }

    /// Drains the outputs; `op`'s outcome once it ended, its result parsed (or, on stdio, an
    /// error once the child has ended: the operation is cancelled). `None`: wait.
    pub(crate) fn outcome(&mut self, op: OpId) -> Option<Result<Value, Error>> {
        self.drain();
        let outcome = match self.outcomes.finished.remove(&op) {
            Some(outcome) => outcome.map_err(|e| self.explain(e)),
            None => {
                let alive = self.check_alive();
                let e = alive.err()?;
                let _ = self.core.cancel(Instant::now(), op);
                self.drain();
                self.outcomes.finished.remove(&op);
                Err(e)
            }
        };
        self.running.store(0, Ordering::SeqCst);
        self.current = None;
        Some(outcome.and_then(|text| {
            serde_json::from_str(&text).map_err(|e| Error::BadResult(e.to_string()))
        }))
    }

    /// Cancels the operation of a method whose future was dropped before it ended.
    pub(crate) fn abandon(&mut self) {
        if let Some(old) = self.current.take() {
            self.running.store(0, Ordering::SeqCst);
            let _ = self.core.cancel(Instant::now(), old);
            self.drain();
            self.outcomes.finished.remove(&old);
        }
    }

    /// Subscribes to `filter` (see the faces' `subscribe`).
    pub(crate) fn subscribe(
        &mut self,
        filter: SubscriptionFilter,
    ) -> Result<SubscriptionHandle, Error> {
        self.abandon();
        self.check_alive()?;
        let sub = self
            .core
            .subscribe(Instant::now(), filter)
            .map_err(|e| Error::Usage(Box::new(e)))?;
        self.drain();
        Ok(sub)
    }

    /// Starts waiting up to `timeout` for a subscription event: until when.
    pub(crate) fn events_until(&mut self, timeout: Duration) -> Option<Instant> {
        self.abandon();
        Instant::now().checked_add(timeout)
    }

    /// Drains the outputs; the next subscription event, an error once a stdio child ended, or
    /// `Ok(None)` once `until` passed. `None`: wait.
    pub(crate) fn subscription_event(
        &mut self,
        until: Option<Instant>,
    ) -> Option<Result<Option<subscription::Event>, Error>> {
        self.drain();
        if let Some(e) = self.outcomes.subscription_events.pop_front() {
            return Some(Ok(Some(e)));
        }
        if let Err(e) = self.check_alive() {
            return Some(Err(e));
        }
        until
            .is_none_or(|u| Instant::now() >= u)
            .then_some(Ok(None))
    }

    /// Ends a subscription.
    pub(crate) fn unsubscribe(&mut self, sub: SubscriptionHandle) -> Result<(), Error> {
        self.core
            .unsubscribe(Instant::now(), sub)
            .map_err(|e| Error::Usage(Box::new(e)))?;
        self.drain();
        Ok(())
    }

    /// Shuts the core down (cancelling what is in flight, a legacy `DELETE`) and performs
    /// that: the goodbye exchanges may run until the instant returned.
    pub(crate) fn shutdown(&mut self) -> Option<Instant> {
        self.core.shutdown(Instant::now());
        self.drain();
        Instant::now().checked_add(SHUTDOWN_WAIT)
    }

    // -----------------------------------------------------------------------------------------
    // What the runtime reports.

    /// When the runtime's wait ends at the latest: the core's next deadline, `until`, or a
    /// second from now, whichever comes first.
    pub(crate) fn wake_at(&self, until: Option<Instant>) -> Instant {
        let now = Instant::now();
        let deadline = self.core.poll_timeout().map(|t| t.at);
        let mut wake = now.checked_add(MAX_SLEEP).unwrap_or(now);
        for d in [deadline, until].into_iter().flatten() {
            wake = wake.min(d);
        }
        wake
    }

    /// After a wait: fires the core's timer when its deadline passed.
    pub(crate) fn after_wait(&mut self) {
        let now = Instant::now();
        if self.core.poll_timeout().is_some_and(|t| now >= t.at) {
            self.core.handle_timeout(now);
        }
    }

    /// Feeds one report of an HTTP exchange. The core refuses only inputs of the other
    /// transport, which a driver never mixes, so its `UsageError`s are not expected here.
    pub(crate) fn exchange(&mut self, report: Exchange) {
        if let Exchange::Whole { stream, head, body } = report {
            // The three inputs in their order, each followed by a drain.
            self.exchange(Exchange::Head { stream, head });
            if !body.is_empty() {
                self.exchange(Exchange::Data {
                    stream,
                    bytes: body,
                });
            }
            return self.exchange(Exchange::End { stream });
        }
        let now = Instant::now();
        let _ = match report {
            Exchange::Head { stream, head } => {
                self.core
                    .handle_response_head(now, SystemTime::now(), stream, head)
            }
            Exchange::Data { stream, bytes } => self.core.handle_response_data(now, stream, &bytes),
            Exchange::End { stream } => {
                self.rt.exchange_ended(stream);
                self.core.handle_response_end(now, stream)
            }
            Exchange::Failed { stream, cause } => {
                self.rt.exchange_ended(stream);
                self.last_cause = Some(cause);
                self.core.handle_transport_failed(now, stream)
            }
            Exchange::Whole { .. } => Ok(()),
        };
        self.drain();
    }

    /// Feeds bytes the stdio child wrote to its stdout (the core cuts the lines).
    pub(crate) fn stdio_bytes(&mut self, bytes: &[u8]) {
        let _ = self.core.handle_stdio_bytes(Instant::now(), bytes);
        self.drain();
    }

    /// The child's stdout ended (the runtime collected its exit status first).
    pub(crate) fn stdio_closed(&mut self) {
        let _ = self.core.handle_stdio_closed(Instant::now());
        self.drain();
    }

    /// A `Canceller` asked to cancel `op` (ignored unless it is the running operation).
    pub(crate) fn cancel_requested(&mut self, op: OpId) {
        if self.current == Some(op) {
            let _ = self.core.cancel(Instant::now(), op);
            self.drain();
        }
    }

    // -----------------------------------------------------------------------------------------
    // The outputs.

    /// Performs every output of the core.
    fn drain(&mut self) {
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Http { stream, request } => {
                    if let Err(cause) = self.rt.start_http(stream, request) {
                        self.last_cause = Some(cause);
                        let _ = self.core.handle_transport_failed(Instant::now(), stream);
                    }
                }
                Output::CloseStream(stream) => self.rt.close_http(stream),
                Output::Stdio(line) => self.rt.write_stdio(line),
                Output::Event(event) => self.outcomes.on_event(&mut self.core, event),
            }
        }
        self.rt.flush_stdio();
    }

    /// Adds what the transport said to an operation's error (see [`LinkView::explain`]).
    fn explain(&mut self, e: Error) -> Error {
        let cause = self.last_cause.take();
        self.rt.link().explain(e, cause)
    }

    /// stdio: fails once the child has ended (it is not restarted).
    fn check_alive(&self) -> Result<(), Error> {
        self.rt.link().check_alive()
    }
}

/// What a driver's link adds to an operation's error.
pub(crate) enum LinkView<'a> {
    Http {
        url: &'a str,
    },
    Stdio {
        program: &'a str,
        /// How the child ended, once it did.
        exit: Option<&'a str>,
        stderr: &'a Mutex<StderrTail>,
    },
}

impl LinkView<'_> {
    /// Adds what the transport said to a core error: on HTTP the last transport failure's
    /// cause; on stdio, once the child has ended, its exit status and stderr tail instead of a
    /// transport failure.
    fn explain(&self, e: Error, last_cause: Option<String>) -> Error {
        match (e, self) {
            (Error::Op(error), LinkView::Http { url }) => {
                explain_http_failure(error, url, last_cause)
            }
            (Error::Op(error), LinkView::Stdio { exit: Some(_), .. })
                if matches!(*error, OpError::Transport(TransportError::Failed(_))) =>
            {
                self.exited()
            }
            (e, _) => e,
        }
    }

    /// stdio: an error once the child has ended (it is not restarted).
    fn check_alive(&self) -> Result<(), Error> {
        match self {
            LinkView::Stdio { exit: Some(_), .. } => Err(self.exited()),
            _ => Ok(()),
        }
    }

    fn exited(&self) -> Error {
        match self {
            LinkView::Stdio {
                program,
                exit,
                stderr,
            } => Error::ServerExited {
                program: (*program).to_owned(),
                status: exit.unwrap_or("still running").to_owned(),
                stderr_tail: stderr
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .lines(),
            },
            LinkView::Http { .. } => Error::Cancelled,
        }
    }
}

/// A transport failure of the core, with what the HTTP transport said about it (when it said
/// anything) and the server's URL.
fn explain_http_failure(error: Box<OpError>, url: &str, cause: Option<String>) -> Error {
    match cause {
        Some(cause) if matches!(*error, OpError::Transport(TransportError::Failed(_))) => {
            Error::Transport {
                url: url.to_owned(),
                cause,
                error,
            }
        }
        _ => Error::Op(error),
    }
}

/// What the core's events lead to: the host's hooks are called, final outcomes are kept by
/// operation, input requests are answered (through the host) and subscription events are
/// queued for the reader.
struct Outcomes {
    host: Box<dyn Host + Send>,
    /// Final outcomes by operation (the JSON text of a result, or the error).
    finished: BTreeMap<OpId, Result<String, Error>>,
    subscription_events: VecDeque<subscription::Event>,
}

impl Default for Outcomes {
    fn default() -> Self {
        Outcomes {
            host: Box::new(NoHost),
            finished: BTreeMap::new(),
            subscription_events: VecDeque::new(),
        }
    }
}

impl Outcomes {
    /// Acts on one event of `core`. An input request's answer goes back to `core` at once;
    /// an answer the core refuses ends the operation (the core cancels it) with
    /// [`Error::InputRefused`].
    fn on_event(&mut self, core: &mut Client, event: Event) {
        self.host.on_event(&event);
        match event {
            Event::Result { op, result, .. } => {
                self.finished.entry(op).or_insert(Ok(result));
            }
            Event::Failed { op, error } => {
                self.finished
                    .entry(op)
                    .or_insert(Err(Error::Op(Box::new(error))));
            }
            Event::Cancelled { op } => {
                self.finished.entry(op).or_insert(Err(Error::Cancelled));
            }
            Event::InputRequested { op, requests, .. } => {
                for request in requests {
                    let answer = self.host.on_input_request(op, &request);
                    let now = Instant::now();
                    if let Err(error) = core.answer_input_or_cancel(now, op, &request.key, answer) {
                        self.finished.entry(op).or_insert(Err(Error::InputRefused {
                            key: request.key.clone(),
                            error: Box::new(error),
                        }));
                        break;
                    }
                }
            }
            Event::Progress {
                op,
                progress,
                total,
                message,
            } => self
                .host
                .on_progress(op, progress, total, message.as_deref()),
            Event::Notification {
                op,
                method,
                message,
            } => self.host.on_notification(op, &method, &message),
            Event::Subscription(e) => {
                if self.subscription_events.len() == MAX_SUBSCRIPTION_EVENTS {
                    self.subscription_events.pop_front();
                }
                self.subscription_events.push_back(e);
            }
            _ => {}
        }
    }
}

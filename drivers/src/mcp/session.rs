//! The MCP client session, written once for both drivers: the core [`Client`] behind one lock,
//! the operations in flight with the callers waiting for them, the subscriptions with their
//! readers, the calls owed to the host, over a small [`Runtime`] each driver implements.
//!
//! Three kinds of party share a session ([`Shared`]):
//!
//! - **Callers** (any number of handle clones, on any thread or task) start an operation, take
//!   its outcome when it is there, or leave a [`Waker`] to be woken when it is; cancel; subscribe.
//!   Whatever the core outputs while a caller holds the lock is performed right then on the
//!   caller's thread: an HTTP exchange starts, a stdio line is written as far as the pipe takes
//!   it. No hand-off between threads on the way out.
//! - **The poller** waits for input: HTTP reports, the stdio child's stdout, the core's next
//!   deadline; between waits it takes the lock, feeds what came and fires the timer. It is
//!   whoever holds the driver's waiting half: a caller waiting for its own operation when the
//!   half is free (its answer then wakes it directly), otherwise the client's loop (one
//!   background thread or task, the driver's), which keeps events and timers going while no
//!   caller waits (the driver's `Poller`). A caller whose action moved the deadline earlier,
//!   left stdin bytes unwritten, or closed the client, kicks whoever waits
//!   ([`Runtime::kick`]).
//! - **The host** ([`Host`]): its hooks run after the lock is released, in the order the core
//!   emitted the events, one at a time, on whichever thread drained them (the poller's).
//!   A hook may call the client; it must not wait for an operation in the blocking driver
//!   (nothing else delivers the events of that thread meanwhile).
//!
//! The session makes no protocol decision; the core does.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError, Weak};
use std::task::Waker;
use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::http::{Request, ResponseHead};
use mcpwire_core::mcp::{
    CachedEra, CallOptions, Client, Event, InputRequestEvent, OpError, OpId, OpOptions, Operation,
    Output, StreamId, SubscriptionEvent, SubscriptionFilter, SubscriptionHandle, TransportError,
};

use mcpwire_core::net_policy::UrlRejected;

use super::{Error, Host, NoHost, StderrTail};
use crate::net::guard::{system_lookup, Guarded, Lookup};

/// The longest the loop sleeps without looking at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// How long ending the client waits for its goodbye requests (a legacy `DELETE`).
pub(crate) const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);
/// Events of one subscription kept while nobody reads them (the oldest are dropped).
pub(crate) const MAX_SUBSCRIPTION_EVENTS: usize = 1024;

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
    /// A guarded fetch connected to nothing: the policy refused every address its host
    /// resolved to.
    Refused {
        stream: StreamId,
        rejected: UrlRejected,
    },
}

/// What only the runtime does (see the module docs). Its methods are called with the session
/// locked, from any thread: none may wait.
pub(crate) trait Runtime: Send + 'static {
    /// Starts the exchange of `stream`, which reports [`Exchange`]s to the loop until it ends
    /// or is closed; `Err` with the cause when it cannot start (the exchange then fails in the
    /// core).
    ///
    /// With `guarded` (an authorization fetch, its URL already checked and `request.url` set
    /// to the checked form), the exchange resolves the host once with [`Guarded::pin`], off
    /// the lock, connects only to an address that passed, on a connection of its own (never
    /// one pooled with unguarded requests), and reports [`Exchange::Refused`] when none did.
    fn start_http(
        &mut self,
        stream: StreamId,
        request: Request,
        guarded: Option<Guarded>,
    ) -> Result<(), String>;
    /// The core closed `stream`: drop its exchange now (its connection too); it reports
    /// nothing more.
    fn close_http(&mut self, stream: StreamId);
    /// `stream`'s exchange reported its end or failure: forget it.
    fn exchange_ended(&mut self, stream: StreamId);
    /// Queues one line (the newline added here) for the child's stdin.
    fn write_stdio(&mut self, line: String);
    /// Every output of one drain was performed: write the queued lines as far as the pipe
    /// takes them without waiting (the loop writes the rest).
    fn flush_stdio(&mut self) {}
    /// Whether bytes wait for room in the child's stdin (the loop must watch for it).
    fn stdin_pending(&self) -> bool {
        false
    }
    /// What writes queued stdin lines once the session is let go, when the runtime writes
    /// them off the lock (see [`StdioFlush`]).
    fn stdio_flusher(&self) -> Option<Arc<dyn StdioFlush>> {
        None
    }
    /// Whether HTTP exchanges are still open (the goodbye requests of a closing client).
    fn exchanges_open(&self) -> bool;
    /// Wakes the loop from its wait (cheap when a wake-up is pending already).
    fn kick(&self);
    /// What the link adds to an operation's error.
    fn link(&self) -> LinkView<'_>;
}

/// One operation a caller waits for.
#[derive(Default)]
struct Slot {
    /// The outcome once final: the JSON text of the result and its `isError`, or the error.
    outcome: Option<Result<(String, bool), Error>>,
    waker: Option<Waker>,
    /// Nobody waits: this takes the outcome instead (see [`Session::then`]).
    then: Option<Then>,
}

/// Writes a child's queued stdin lines with no session lock held: a child woken by the write
/// may run (and answer) at once, and the thread that reads its answer must not find the
/// session held by the writer. [`Shared::lock`]'s guard calls it once it has let go.
pub(crate) trait StdioFlush: Send + Sync {
    fn flush(&self);
}

/// The locked session; letting go of it writes what was queued for the child's stdin.
pub(crate) struct Locked<'a, R> {
    guard: Option<MutexGuard<'a, Session<R>>>,
    flusher: Option<&'a dyn StdioFlush>,
}

impl<R> std::ops::Deref for Locked<'_, R> {
    type Target = Session<R>;
    fn deref(&self) -> &Session<R> {
        // Present until drop.
        self.guard.as_deref().unwrap_or_else(|| unreachable!())
    }
}

impl<R> std::ops::DerefMut for Locked<'_, R> {
    fn deref_mut(&mut self) -> &mut Session<R> {
        self.guard.as_deref_mut().unwrap_or_else(|| unreachable!())
    }
}

impl<R> Drop for Locked<'_, R> {
    fn drop(&mut self) {
        drop(self.guard.take());
        if let Some(flusher) = self.flusher {
            flusher.flush();
        }
    }
}

/// What an operation's outcome is handed to when nobody waits for it.
pub(crate) type Then = Box<dyn FnOnce(Result<(String, bool), Error>) + Send>;

/// An outcome to hand to its [`Then`].
type Completion = (Then, Result<(String, bool), Error>);

/// One subscription's events, for its reader.
#[derive(Default)]
struct SubQueue {
    events: VecDeque<SubscriptionEvent>,
    /// The `Ended` event was queued: nothing more comes.
    ended: bool,
    waker: Option<Waker>,
}

/// What the host is owed, in order.
enum HostCall {
    /// An event for [`Host::on_event`] (and the hook of its kind).
    Event(Event),
    /// Authorization: the browser step for this URL (on a thread of its own).
    Authorize(String),
    /// Authorization: lock the token store for a refresh (on a thread of its own: another
    /// process may hold it), then hand the core what it holds.
    LockStore,
    /// An input request to answer (only the hook that answers, `on_event` had the event).
    Input {
        op: OpId,
        request: InputRequestEvent,
    },
}

/// One MCP client session on a runtime (see the module docs).
pub(crate) struct Session<R> {
    core: Client,
    ops: BTreeMap<OpId, Slot>,
    subs: BTreeMap<SubscriptionHandle, SubQueue>,
    /// The host's calls, delivered after the lock is released.
    host_calls: VecDeque<HostCall>,
    /// Outcomes of operations nobody waits for, handed over after the lock is released.
    completions: Vec<Completion>,
    /// A host was set: every event is queued for it (otherwise only input requests, which the
    /// default host declines).
    host_set: bool,
    /// Authorization's store and browser step (set by [`Shared::new`]).
    auth: Option<Arc<DriverAuth>>,
    /// The token store's refresh lock, while a refresh runs.
    refresh_lock: Option<Box<dyn super::StoreLock>>,
    /// The transport's last error (HTTP), for the message of an operation it failed; cleared
    /// by the next response head.
    last_cause: Option<String>,
    /// Operations in flight, at most `limit` (more callers wait in `start_waiters`).
    limit: usize,
    start_waiters: VecDeque<Waker>,
    /// When the loop's current wait ends (`None`: it is not waiting; it will look again).
    loop_wake: Option<Instant>,
    /// The client is closing: the goodbye exchanges may run until then.
    closing: Option<Instant>,
    /// A caller needs the loop to look again (see [`Session::take_kick`]).
    kick: bool,
    /// How the guarded fetches' host names are resolved (the system's resolver; the tests'
    /// own).
    pub(crate) lookup: Lookup,
    /// What performs the core's outputs.
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
            .field("in_flight", &self.ops.len())
            .field("core", &self.core)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> Session<R> {
    /// A session of `core` on `rt`, with at most `limit` operations in flight.
    pub(crate) fn new(core: Client, rt: R, limit: usize) -> Self {
        Session {
            core,
            ops: BTreeMap::new(),
            subs: BTreeMap::new(),
            host_calls: VecDeque::new(),
            completions: Vec::new(),
            host_set: false,
            auth: None,
            refresh_lock: None,
            last_cause: None,
            limit: limit.max(1),
            start_waiters: VecDeque::new(),
            loop_wake: None,
            closing: None,
            kick: false,
            lookup: system_lookup,
            rt,
        }
    }

    /// The era and version in use, once known.
    pub(crate) fn era(&self) -> Option<CachedEra> {
        self.core.era()
    }

    /// See the clients' `allow_authorization_again`.
    pub(crate) fn allow_authorization_again(&mut self) {
        self.core.allow_authorization_again();
    }

    /// The client's default call options.
    pub(crate) fn call_options(&self) -> CallOptions {
        self.core.config().call_options.clone()
    }

    // -----------------------------------------------------------------------------------------
    // What callers do.

    /// Starts `operation`, or leaves `waker` to be woken when a place among the operations in
    /// flight frees up (`Ok(None)`: try again then).
    pub(crate) fn start(
        &mut self,
        operation: &mut Option<Operation>,
        options: &OpOptions,
        waker: &Waker,
    ) -> Result<Option<OpId>, Error> {
        self.start_or(operation, options, Some(waker))
    }

    /// Starts `operation` if a place among the operations in flight is free (`Ok(None)`, with
    /// `operation` left as it was, when none is), keeping no waker.
    #[cfg(feature = "blocking")]
    pub(crate) fn try_start(
        &mut self,
        operation: &mut Option<Operation>,
        options: &OpOptions,
    ) -> Result<Option<OpId>, Error> {
        self.start_or(operation, options, None)
    }

    fn start_or(
        &mut self,
        operation: &mut Option<Operation>,
        options: &OpOptions,
        waker: Option<&Waker>,
    ) -> Result<Option<OpId>, Error> {
        self.check_usable()?;
        if self.ops.len() >= self.limit {
            if let Some(waker) = waker {
                if !self.start_waiters.iter().any(|w| w.will_wake(waker)) {
                    self.start_waiters.push_back(waker.clone());
                }
            }
            return Ok(None);
        }
        let Some(operation) = operation.take() else {
            return Err(Error::Cancelled);
        };
        let op = self.core.start(Instant::now(), operation, options.clone());
        self.ops.insert(op, Slot::default());
        self.drain();
        Ok(Some(op))
    }

    /// `op`'s outcome once it ended (its place is freed); otherwise `waker` is kept to be woken
    /// when it does.
    pub(crate) fn outcome(
        &mut self,
        op: OpId,
        waker: &Waker,
    ) -> Option<Result<(String, bool), Error>> {
        self.outcome_or_wait(op, Some(waker))
    }

    /// `op`'s outcome once it ended, as [`Session::outcome`]; otherwise `Some(waker)` is kept
    /// to be woken when it does, and `None` forgets the one kept: the caller is about to wait
    /// for input itself and looks again after every turn, so the operation ending in its own
    /// turn must not wake it (a stale wake-up costs an empty poll of every future on its task
    /// before the next operation can sleep). A caller that passed `None` passes its waker
    /// before it returns `Pending`.
    pub(crate) fn outcome_or_wait(
        &mut self,
        op: OpId,
        waker: Option<&Waker>,
    ) -> Option<Result<(String, bool), Error>> {
        let Some(slot) = self.ops.get_mut(&op) else {
            // Not started here, or already taken.
            return Some(Err(Error::Cancelled));
        };
        match slot.outcome.take() {
            Some(outcome) => {
                self.forget(op);
                Some(outcome.map_err(|e| self.explain(e)))
            }
            None => {
                match waker {
                    Some(waker) if !slot.waker.as_ref().is_some_and(|w| w.will_wake(waker)) => {
                        slot.waker = Some(waker.clone());
                    }
                    Some(_) => {}
                    None => slot.waker = None,
                }
                None
            }
        }
    }

    /// Nobody will wait for `op`: its outcome goes to `then`, on the thread that feeds it to
    /// the core, once the session is unlocked. `Some` when the outcome is there already (hand
    /// it over now).
    #[cfg(feature = "blocking")]
    pub(crate) fn then(&mut self, op: OpId, then: Then) -> Option<Completion> {
        let Some(slot) = self.ops.get_mut(&op) else {
            return Some((then, Err(Error::Cancelled)));
        };
        match slot.outcome.take() {
            Some(outcome) => {
                self.forget(op);
                let outcome = outcome.map_err(|e| self.explain(e));
                Some((then, outcome))
            }
            None => {
                slot.waker = None;
                slot.then = Some(then);
                None
            }
        }
    }

    /// Cancels `op` (a caller gave up, or its future was dropped); nobody waits for it any
    /// more.
    pub(crate) fn cancel(&mut self, op: OpId) {
        if self.ops.contains_key(&op) {
            let _ = self.core.cancel(Instant::now(), op);
            self.drain();
            self.forget(op);
        }
    }

    /// Asks `op` to end with [`Error::Cancelled`] (its caller still gets the outcome).
    pub(crate) fn request_cancel(&mut self, op: OpId) {
        if self.ops.get(&op).is_some_and(|s| s.outcome.is_none()) {
            let _ = self.core.cancel(Instant::now(), op);
            self.drain();
        }
    }

    /// Subscribes to `filter`.
    pub(crate) fn subscribe(
        &mut self,
        filter: SubscriptionFilter,
    ) -> Result<SubscriptionHandle, Error> {
        self.check_usable()?;
        let sub = self
            .core
            .subscribe(Instant::now(), filter)
            .map_err(|e| Error::Usage(Box::new(e)))?;
        self.subs.entry(sub).or_default();
        self.drain();
        Ok(sub)
    }

    /// The next event of `sub` (`Some(Ok(None))`: it ended and everything was read; an error
    /// once the client closed or the stdio server exited); otherwise `waker` is kept to be
    /// woken when one comes.
    pub(crate) fn subscription_event(
        &mut self,
        sub: SubscriptionHandle,
        waker: &Waker,
    ) -> Option<Result<Option<SubscriptionEvent>, Error>> {
        let usable = self.check_usable();
        let Some(queue) = self.subs.get_mut(&sub) else {
            return Some(Ok(None));
        };
        if let Some(event) = queue.events.pop_front() {
            return Some(Ok(Some(event)));
        }
        if queue.ended {
            self.subs.remove(&sub);
            return Some(usable.map(|()| None));
        }
        if let Err(e) = usable {
            self.subs.remove(&sub);
            return Some(Err(e));
        }
        if !queue.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            queue.waker = Some(waker.clone());
        }
        None
    }

    /// Ends `sub` (its reader is gone or asked).
    pub(crate) fn unsubscribe(&mut self, sub: SubscriptionHandle) {
        if self.subs.remove(&sub).is_some() {
            let _ = self.core.unsubscribe(Instant::now(), sub);
            self.drain();
        }
    }

    /// Shuts the core down (cancelling what is in flight, a legacy `DELETE`): the goodbye
    /// exchanges may run for [`SHUTDOWN_WAIT`]; the loop then stops.
    pub(crate) fn close(&mut self) {
        if self.closing.is_some() {
            return;
        }
        let now = Instant::now();
        self.closing = Some(now.checked_add(SHUTDOWN_WAIT).unwrap_or(now));
        self.core.shutdown(now);
        self.drain();
        self.kick = true;
        // Callers waiting to start fail now; subscription readers see the end.
        for w in self.start_waiters.drain(..) {
            w.wake();
        }
        for queue in self.subs.values_mut() {
            queue.ended = true;
            if let Some(w) = queue.waker.take() {
                w.wake();
            }
        }
    }

    /// Whether the loop must be woken after what a caller did: it wrote less than it queued for
    /// stdin, the core's deadline moved before the loop's wake-up, or the client is closing.
    /// Cleared by the call.
    pub(crate) fn take_kick(&mut self) -> bool {
        let earlier = match (self.core.poll_timeout(), self.loop_wake) {
            (Some(t), Some(wake)) => t.at < wake,
            _ => false,
        };
        // Only whoever waits needs telling (a poller not waiting now looks again anyway).
        let waiting = self.loop_wake.is_some();
        let kick =
            std::mem::take(&mut self.kick) || earlier || (waiting && self.rt.stdin_pending());
        if kick {
            // One kick per wait is enough.
            self.loop_wake = None;
        }
        kick
    }

    // -----------------------------------------------------------------------------------------
    // What the loop does.

    /// Starts a wait: until when at the latest (the core's next deadline, the close deadline,
    /// or a second from now). `None`: the loop is done (the client closed and its goodbye
    /// exchanges ended or ran out of time).
    pub(crate) fn begin_wait(&mut self) -> Option<Instant> {
        let now = Instant::now();
        if let Some(until) = self.closing {
            if !self.rt.exchanges_open() || now >= until {
                return None;
            }
        }
        let mut wake = now.checked_add(MAX_SLEEP).unwrap_or(now);
        let deadline = self.core.poll_timeout().map(|t| t.at);
        for d in [deadline, self.closing].into_iter().flatten() {
            wake = wake.min(d);
        }
        self.loop_wake = Some(wake);
        Some(wake)
    }

    /// A wait ended: fires the core's timer when its deadline passed.
    pub(crate) fn end_wait(&mut self) {
        self.loop_wake = None;
        let now = Instant::now();
        if self.core.poll_timeout().is_some_and(|t| now >= t.at) {
            self.core.handle_timeout(now);
            self.drain();
        }
    }

    /// Feeds one report of an HTTP exchange. The core refuses only inputs of the other
    /// transport, which a driver never mixes, so its `UsageError`s are not expected here.
    pub(crate) fn exchange(&mut self, report: Exchange) {
        if let Exchange::Whole { stream, head, body } = report {
            // The three inputs in their order.
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
                self.last_cause = None;
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
            Exchange::Refused { stream, rejected } => {
                // The authorization's error names the refusal; it is no cause of the MCP
                // URL's (`last_cause`).
                self.rt.exchange_ended(stream);
                self.core.handle_fetch_refused(now, stream, &rejected)
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

    /// The child's stdout ended (the runtime recorded its exit status first): what is in
    /// flight fails.
    pub(crate) fn stdio_closed(&mut self) {
        let _ = self.core.handle_stdio_closed(Instant::now());
        self.drain();
    }

    // -----------------------------------------------------------------------------------------
    // The outputs.

    /// Performs every output of the core.
    fn drain(&mut self) {
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Http { stream, request } => {
                    let Some((request, guarded)) = self.guard(stream, request) else {
                        continue;
                    };
                    if let Err(cause) = self.rt.start_http(stream, request, guarded) {
                        self.last_cause = Some(cause);
                        let _ = self.core.handle_transport_failed(Instant::now(), stream);
                    }
                }
                Output::CloseStream(stream) => self.rt.close_http(stream),
                Output::Stdio(line) => self.rt.write_stdio(line),
                Output::Event(event) => self.on_event(event),
            }
        }
        self.rt.flush_stdio();
    }

    /// The request of `stream` as it goes out, and its guard when the core guards it (an
    /// authorization fetch): the URL checked under the guard and the request sent to the
    /// checked form. `None` when the policy refuses the URL itself (the core was told; not
    /// expected: the flow checked it with the same policy).
    fn guard(
        &mut self,
        stream: StreamId,
        mut request: Request,
    ) -> Option<(Request, Option<Guarded>)> {
        let Some(guard) = self.core.fetch_guard(stream) else {
            return Some((request, None));
        };
        match guard.check_url(&request.url) {
            Ok(url) => {
                request.url = url.url().to_string();
                let lookup = self.lookup;
                Some((request, Some(Guarded { guard, url, lookup })))
            }
            Err(rejected) => {
                let _ = self
                    .core
                    .handle_fetch_refused(Instant::now(), stream, &rejected);
                None
            }
        }
    }

    /// Acts on one event: final outcomes go to their slot (and wake its caller), subscription
    /// events to their queue, and the host is owed what it hears (the event first, then the
    /// input requests it asks to answer).
    fn on_event(&mut self, event: Event) {
        if self.host_set {
            self.host_calls.push_back(HostCall::Event(event.clone()));
        }
        match event {
            Event::Result {
                op,
                result,
                is_error,
                ..
            } => self.finish(op, Ok((result, is_error))),
            Event::Failed { op, error } => self.finish(op, Err(Error::Op(Box::new(error)))),
            Event::Cancelled { op } => self.finish(op, Err(Error::Cancelled)),
            Event::InputRequested { op, requests, .. } => {
                if self.ops.contains_key(&op) {
                    // Answered by the host (the default one declines), after the lock is
                    // released.
                    let calls = requests
                        .into_iter()
                        .map(|request| HostCall::Input { op, request });
                    self.host_calls.extend(calls);
                } else {
                    let _ = self.core.cancel(Instant::now(), op);
                }
            }
            Event::AuthorizationUrl { url } => self.host_calls.push_back(HostCall::Authorize(url)),
            Event::Authorized { grant } => {
                // Written before the requests waiting for it go out (they follow this event),
                // then the refresh lock is released. A grant that cannot be written is used
                // anyway; the next run authorizes again.
                if let Some(a) = &self.auth {
                    let _ = a.store.save(&grant);
                }
                self.refresh_lock = None;
            }
            Event::AuthorizationFailed { .. } | Event::AuthorizationProgress { .. } => {
                self.refresh_lock = None;
            }
            Event::AuthorizationStoreLock { .. } => self.host_calls.push_back(HostCall::LockStore),
            Event::Subscription(e) => {
                let Some((sub, ended)) = subscription_of(&e) else {
                    return;
                };
                if let Some(queue) = self.subs.get_mut(&sub) {
                    if queue.events.len() == MAX_SUBSCRIPTION_EVENTS {
                        queue.events.pop_front();
                    }
                    queue.events.push_back(e);
                    queue.ended |= ended;
                    if let Some(w) = queue.waker.take() {
                        w.wake();
                    }
                }
            }
            _ => {}
        }
    }

    /// Records `op`'s final outcome (the first one counts) and wakes its caller.
    fn finish(&mut self, op: OpId, outcome: Result<(String, bool), Error>) {
        if let Some(then) = self.ops.get_mut(&op).and_then(|slot| slot.then.take()) {
            self.forget(op);
            let outcome = outcome.map_err(|e| self.explain(e));
            self.completions.push((then, outcome));
            return;
        }
        if let Some(slot) = self.ops.get_mut(&op) {
            if slot.outcome.is_none() {
                slot.outcome = Some(outcome);
                if let Some(w) = slot.waker.take() {
                    w.wake();
                }
            }
        }
    }

    /// `op` is no longer waited for: its place is free. Every caller waiting to start is woken
    /// (the first to look takes the place; a waiter that went away cannot swallow the wake-up).
    fn forget(&mut self, op: OpId) {
        if self.ops.remove(&op).is_some() {
            for w in self.start_waiters.drain(..) {
                w.wake();
            }
        }
    }

    /// Adds what the transport said to an operation's error (see [`LinkView::explain`]).
    fn explain(&self, e: Error) -> Error {
        self.rt.link().explain(e, self.last_cause.clone())
    }

    /// Fails once the client is closing, or a stdio child has ended (it is not restarted).
    fn check_usable(&self) -> Result<(), Error> {
        if self.closing.is_some() {
            return Err(Error::Closed);
        }
        self.rt.link().check_alive()
    }
}

/// The subscription an event belongs to, and whether it is the last.
fn subscription_of(e: &SubscriptionEvent) -> Option<(SubscriptionHandle, bool)> {
    use SubscriptionEvent as E;
    match e {
        E::Acknowledged { sub, .. }
        | E::Changed { sub, .. }
        | E::Refetch { sub, .. }
        | E::Disconnected { sub, .. }
        | E::Ignored { sub, .. } => Some((*sub, false)),
        E::Ended { sub, .. } => Some((*sub, true)),
        _ => None,
    }
}

/// A session shared by a client's handles, its loop and its host (see the module docs).
pub(crate) struct Shared<R> {
    session: Mutex<Session<R>>,
    /// Writes stdin lines off the lock, when the runtime does (see [`StdioFlush`]).
    flusher: Option<Arc<dyn StdioFlush>>,
    host: Mutex<Box<dyn Host + Send>>,
    /// Authorization's two jobs in the world: the browser step and the token store.
    auth: Option<Arc<DriverAuth>>,
    /// Itself, for the browser step's thread.
    me: Weak<Shared<R>>,
}

/// What the driver does for authorization (see [`super::Authorization`]).
pub(crate) struct DriverAuth {
    pub(crate) user_agent: Arc<dyn super::UserAgent>,
    pub(crate) store: Arc<dyn super::TokenStore>,
    pub(crate) redirect_uri: String,
    pub(crate) server_url: String,
}

impl<R: Runtime> fmt::Debug for Shared<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.lock().fmt(f)
    }
}

/// Hands each outcome to the operation's [`Then`], with no lock held.
fn hand_over(done: Vec<Completion>) {
    for (then, outcome) in done {
        then(outcome);
    }
}

impl<R> Drop for Session<R> {
    /// An operation nobody waits for still gets an outcome when the session goes first.
    fn drop(&mut self) {
        let mut done = std::mem::take(&mut self.completions);
        for slot in self.ops.values_mut() {
            if let Some(then) = slot.then.take() {
                done.push((then, Err(Error::Closed)));
            }
        }
        hand_over(done);
    }
}

impl<R: Runtime> Shared<R> {
    pub(crate) fn new(mut session: Session<R>, auth: Option<Arc<DriverAuth>>) -> Arc<Self> {
        session.auth = auth.clone();
        let flusher = session.rt.stdio_flusher();
        Arc::new_cyclic(|me| Shared {
            session: Mutex::new(session),
            flusher,
            host: Mutex::new(Box::new(NoHost)),
            auth,
            me: me.clone(),
        })
    }

    /// Takes the token store's refresh lock on a thread of its own (it may wait for another
    /// process), then hands the core what the store holds; the session keeps the lock until
    /// the flow's next outcome.
    fn lock_store(&self) {
        let Some(auth) = self.auth.clone() else {
            self.with(|s| {
                s.core
                    .handle_store_locked(Instant::now(), std::time::SystemTime::now(), None);
                s.drain();
            });
            return;
        };
        let me = self.me.clone();
        let spawned = std::thread::Builder::new()
            .name("mcpwire-token-lock".into())
            .spawn(move || {
                // Without the lock (the file cannot be locked) the refresh still runs.
                let lock = auth.store.lock().ok();
                let stored = auth.store.load(&auth.server_url);
                if let Some(shared) = me.upgrade() {
                    shared.with(|s| {
                        s.refresh_lock = lock;
                        s.core.handle_store_locked(
                            Instant::now(),
                            std::time::SystemTime::now(),
                            stored,
                        );
                        s.drain();
                        s.kick = true;
                    });
                }
            });
        if spawned.is_err() {
            let stored = self.auth.as_ref().and_then(|a| a.store.load(&a.server_url));
            self.with(|s| {
                s.core
                    .handle_store_locked(Instant::now(), std::time::SystemTime::now(), stored);
                s.drain();
            });
        }
    }

    /// The browser step for `url`, on a thread of its own; its answer goes to the core.
    fn authorize(&self, url: String) {
        let (Some(auth), Some(me)) = (self.auth.clone(), self.me.upgrade()) else {
            self.with(|s| {
                s.core.handle_authorization_failed(
                    Instant::now(),
                    "no user agent is configured for the browser step",
                );
                s.drain();
            });
            return;
        };
        drop(me);
        let me = self.me.clone();
        let spawned = std::thread::Builder::new()
            .name("mcpwire-authorize".into())
            .spawn(move || {
                let answer = auth.user_agent.authorize(&url, &auth.redirect_uri);
                if let Some(shared) = me.upgrade() {
                    shared.with(|s| {
                        let now = Instant::now();
                        match answer {
                            Ok(query) => {
                                let _ = s.core.handle_authorization_redirect(
                                    now,
                                    std::time::SystemTime::now(),
                                    &query,
                                );
                            }
                            Err(e) => s.core.handle_authorization_failed(now, &e.to_string()),
                        }
                        s.drain();
                        s.kick = true;
                    });
                }
            });
        if let Err(e) = spawned {
            self.with(|s| {
                s.core.handle_authorization_failed(
                    Instant::now(),
                    &format!("cannot start a thread: {e}"),
                );
                s.drain();
            });
        }
    }

    /// Runs `f` on the session, kicks the loop when `f` asked for it, then delivers what the
    /// host is owed.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Session<R>) -> T) -> T {
        let (t, deliver, done) = {
            let mut s = self.lock();
            let t = f(&mut s);
            if s.take_kick() {
                s.rt.kick();
            }
            (
                t,
                !s.host_calls.is_empty(),
                std::mem::take(&mut s.completions),
            )
        };
        hand_over(done);
        if deliver {
            self.deliver();
        }
        t
    }

    /// Runs `f` on the session and kicks the loop when `f` asked for it, delivering nothing to
    /// the host: for a caller that must not run the host's hooks on its thread (whoever waits
    /// next delivers them).
    #[cfg(feature = "blocking")]
    pub(crate) fn with_undelivered<T>(&self, f: impl FnOnce(&mut Session<R>) -> T) -> T {
        let mut s = self.lock();
        let t = f(&mut s);
        if s.take_kick() {
            s.rt.kick();
        }
        t
    }

    /// Runs `f` on the session for the loop (which needs no kick), then delivers what the
    /// host is owed.
    pub(crate) fn with_loop<T>(&self, f: impl FnOnce(&mut Session<R>) -> T) -> T {
        let (t, deliver, done) = {
            let mut s = self.lock();
            let t = f(&mut s);
            s.kick = false;
            (
                t,
                !s.host_calls.is_empty(),
                std::mem::take(&mut s.completions),
            )
        };
        hand_over(done);
        if deliver {
            self.deliver();
        }
        t
    }

    /// The session, locked (a panic elsewhere does not make it unusable: its state stays
    /// consistent between calls).
    pub(crate) fn lock(&self) -> Locked<'_, R> {
        Locked {
            guard: Some(self.session.lock().unwrap_or_else(PoisonError::into_inner)),
            flusher: self.flusher.as_deref(),
        }
    }

    /// Sets the host hooks; from now on every event reaches them.
    pub(crate) fn set_host(&self, host: Box<dyn Host + Send>) {
        *self.host.lock().unwrap_or_else(PoisonError::into_inner) = host;
        self.lock().host_set = true;
    }

    /// Delivers what the host is owed, in order, with the session unlocked. A thread already
    /// delivering (another one, or this one from inside a hook) takes the new calls too.
    pub(crate) fn deliver(&self) {
        let mut host = match self.host.try_lock() {
            Ok(host) => host,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        loop {
            let Some(call) = self.lock().host_calls.pop_front() else {
                break;
            };
            match call {
                HostCall::Event(event) => {
                    host.on_event(&event);
                    match event {
                        Event::Progress {
                            op,
                            progress,
                            total,
                            message,
                        } => host.on_progress(op, progress, total, message.as_deref()),
                        Event::Notification {
                            op,
                            method,
                            message,
                        } => host.on_notification(op, &method, &message),
                        _ => {}
                    }
                }
                HostCall::Authorize(url) => self.authorize(url),
                HostCall::LockStore => self.lock_store(),
                HostCall::Input { op, request } => {
                    let answer = host.on_input_request(op, &request);
                    let mut s = self.lock();
                    if !s.ops.contains_key(&op) {
                        continue; // its caller gave up meanwhile
                    }
                    let now = Instant::now();
                    if let Err(error) = s.core.answer_input_or_cancel(now, op, &request.key, answer)
                    {
                        s.finish(
                            op,
                            Err(Error::InputRefused {
                                key: request.key.clone(),
                                error: Box::new(error),
                            }),
                        );
                        // The other keys of this round are not asked any more.
                        s.host_calls
                            .retain(|c| !matches!(c, HostCall::Input { op: o, .. } if *o == op));
                    }
                    s.drain();
                    if s.take_kick() {
                        s.rt.kick();
                    }
                }
            }
        }
        // A call queued after the last pop by a thread that found the host busy.
        drop(host);
        if !self.lock().host_calls.is_empty() {
            self.deliver();
        }
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
                // A token may ride in the query (`?api_key=`): never in an error message.
                url: mcpwire_core::host::redacted_url(url),
                cause,
                error,
            }
        }
        _ => Error::Op(error),
    }
}

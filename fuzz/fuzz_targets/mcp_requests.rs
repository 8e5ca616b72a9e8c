//! `mcp::request::Requests` fed an arbitrary sequence of starts, cancellations, time steps,
//! stream messages (arbitrary text or well-formed responses, progress and notifications about
//! live, retired or unknown ids), stream ends and failures, and stdio channel messages,
//! closes and reopens. The first byte picks the transport and the id source.
//!
//! Invariants checked after every step (all from the module docs):
//! - every started request ends with exactly one final event (`Response`, `TimedOut`,
//!   `Cancelled`, `Failed`), never two, and after a final settle (time advanced to every
//!   timeout in turn) none is left in flight;
//! - no `Send`, `Resending`, `Progress` or `Notification` for a request after its final event;
//!   only `LateResponseIgnored` may name it afterwards;
//! - every attempt has a new id: with a well-behaved allocator, no id is handed to two
//!   requests or twice to one while outstanding; with a misbehaving id source (a small pool
//!   that repeats), no two attempts in flight ever share an id;
//! - a `Response` carries the id of the attempt in flight; a late response names an id of its
//!   request that is no longer current;
//! - resends only for read-only or idempotent requests, within `max_resends`, never due at
//!   or past `max_total`; `TimedOut` never before the deadline; after `handle_timeout(now)`
//!   no attempt whose deadline passed is still in flight and `poll_timeout` is not in the past;
//!   no deadline ever passes `first send + max_total`;
//! - `Progress` only when `progress` increased within the attempt;
//! - `in_flight()` agrees with the requests that have not ended.
#![no_main]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::jsonrpc::Id;
use mcpwire_core::mcp::meta::IdAllocator;
use mcpwire_core::mcp::request::{
    is_read_only, Event, IdSource, Output, RequestHandle, Requests, RequestsConfig, StreamFailure,
    TimeoutReason, UsageError,
};
use mcpwire_core::mcp::{CallOptions, Transport};
use serde_json::{json, Value};

const METHODS: &[&str] = &[
    "tools/list",
    "tools/call",
    "resources/read",
    "prompts/get",
    "server/discover",
    "completion/complete",
];

#[derive(Arbitrary, Debug)]
enum IdPick {
    Current,
    Earlier(u8),
    OfOther(u8),
    Small(i8),
    Str(u8),
}

#[derive(Arbitrary, Debug)]
enum Msg {
    Raw(String),
    Result {
        id: IdPick,
        shape: u8,
    },
    Error {
        id: IdPick,
        null_id: bool,
        code: i16,
    },
    Progress {
        token: u8,
        progress: i16,
        total: Option<u8>,
    },
    Notification {
        method: u8,
    },
    ServerRequest {
        id: u8,
    },
}

#[derive(Arbitrary, Debug)]
enum Op {
    Start {
        method: u8,
        params: u8,
        timeout: u16,
        max_total: u16,
        max_resends: u8,
        idempotent: bool,
        reset_on_progress: bool,
        resend_on_timeout: bool,
    },
    Cancel {
        which: u8,
        reason: Option<String>,
    },
    Advance {
        ms: u16,
    },
    AdvanceToTimeout,
    Stream {
        which: u8,
        msg: Msg,
    },
    StreamEnd {
        which: u8,
    },
    StreamFailed {
        which: u8,
        status: Option<u16>,
        retry_after_ms: Option<u16>,
    },
    Channel {
        which: u8,
        msg: Msg,
    },
    ChannelClosed,
    ChannelOpen,
}

#[derive(Arbitrary, Debug)]
struct Input {
    config: u8,
    pool: Vec<u8>,
    ops: Vec<Op>,
}

/// Where ids come from: the client's own allocator (released when a request ends, as a client
/// would), or a misbehaving pool that repeats small values.
enum Ids {
    Alloc(IdAllocator),
    Pool { bytes: Vec<u8>, i: usize },
}

impl IdSource for Ids {
    fn next_id(&mut self) -> Id {
        match self {
            Ids::Alloc(a) => a.allocate(),
            Ids::Pool { bytes, i } => {
                let b = if bytes.is_empty() {
                    (*i % 5) as u8
                } else {
                    bytes[*i % bytes.len()]
                };
                *i += 1;
                if b & 0x80 != 0 {
                    Id::String(format!("s{}", b & 7))
                } else {
                    Id::Number(i128::from(b & 7))
                }
            }
        }
    }
}

struct Model {
    handle: RequestHandle,
    method: String,
    options: CallOptions,
    progress_token: Option<Id>,
    first_sent: Instant,
    /// Every attempt's id, in order.
    history: Vec<Id>,
    /// The attempt in flight (its id and when it was sent), `None` while waiting to resend.
    current: Option<(Id, Instant)>,
    resend_at: Option<Instant>,
    attempts: u32,
    last_progress: Option<f64>,
    ended: bool,
}

impl Model {
    fn cap(&self) -> Instant {
        self.first_sent + self.options.max_total
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Start,
    Cancel,
    Timeout,
    Other,
}

struct World {
    r: Requests,
    ids: Ids,
    models: Vec<Model>,
    by_handle: BTreeMap<RequestHandle, usize>,
    transport: Transport,
    channel_open: bool,
    now: Instant,
}

fn token(t: u8) -> Id {
    if t & 4 == 0 {
        Id::Number(i128::from(t & 3))
    } else {
        Id::String(format!("p{}", t & 3))
    }
}

fn id_value(id: &Id) -> Value {
    match id {
        Id::Number(n) => serde_json::from_str(&n.to_string()).unwrap_or(Value::Null),
        Id::String(s) => Value::String(s.clone()),
    }
}

impl World {
    fn pick(&self, which: u8) -> Option<usize> {
        (!self.models.is_empty()).then(|| usize::from(which) % self.models.len())
    }

    fn pick_id(&self, m: Option<usize>, p: &IdPick) -> Id {
        let model = m.map(|i| &self.models[i]);
        match p {
            IdPick::Current => model
                .and_then(|m| {
                    m.current
                        .as_ref()
                        .map(|c| c.0.clone())
                        .or(m.history.last().cloned())
                })
                .unwrap_or(Id::Number(1)),
            IdPick::Earlier(k) => model
                .filter(|m| !m.history.is_empty())
                .map(|m| m.history[usize::from(*k) % m.history.len()].clone())
                .unwrap_or(Id::Number(1)),
            IdPick::OfOther(k) => {
                let all: Vec<&Id> = self.models.iter().flat_map(|m| &m.history).collect();
                if all.is_empty() {
                    Id::Number(0)
                } else {
                    all[usize::from(*k) % all.len()].clone()
                }
            }
            IdPick::Small(n) => Id::Number(i128::from(*n)),
            IdPick::Str(n) => Id::String(format!("s{}", n & 7)),
        }
    }

    fn message(&self, m: Option<usize>, msg: &Msg) -> String {
        let v = match msg {
            Msg::Raw(s) => return s.clone(),
            Msg::Result { id, shape } => {
                let result = match shape % 6 {
                    0 => json!({"content": []}),
                    1 => json!({"content": [], "isError": true}),
                    2 => json!({"resultType": "input_required", "inputRequests": {}}),
                    3 => json!({"resultType": "partial"}),
                    4 => json!(5),
                    _ => json!({"resultType": "complete", "tools": []}),
                };
                json!({"jsonrpc": "2.0", "id": id_value(&self.pick_id(m, id)), "result": result})
            }
            Msg::Error { id, null_id, code } => {
                let id = if *null_id {
                    Value::Null
                } else {
                    id_value(&self.pick_id(m, id))
                };
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "e"}})
            }
            Msg::Progress {
                token: t,
                progress,
                total,
            } => {
                let tok = match m.and_then(|i| self.models[i].progress_token.clone()) {
                    Some(own) if t & 8 == 0 => own,
                    _ => token(*t),
                };
                let mut params = json!({"progressToken": id_value(&tok), "progress": progress});
                if let Some(total) = total {
                    params["total"] = json!(total);
                }
                json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
            }
            Msg::Notification { method } => {
                let method = ["notifications/message", "notifications/progress", "x/y"]
                    [usize::from(*method % 3)];
                json!({"jsonrpc": "2.0", "method": method, "params": {"level": "info"}})
            }
            Msg::ServerRequest { id } => {
                json!({"jsonrpc": "2.0", "id": id, "method": "sampling/createMessage"})
            }
        };
        v.to_string()
    }

    fn drain(&mut self, step: Step) {
        let now = self.now;
        while let Some(o) = self.r.poll_output() {
            match o {
                Output::Send {
                    req,
                    id,
                    method,
                    body,
                    attempt,
                } => {
                    let &i = self
                        .by_handle
                        .get(&req)
                        .expect("Send for an unknown request");
                    // Id freshness.
                    for (j, other) in self.models.iter().enumerate() {
                        if other.ended {
                            continue;
                        }
                        if let Some((cur, _)) = &other.current {
                            assert!(
                                !(j != i && *cur == id),
                                "id {id} handed to two requests in flight"
                            );
                        }
                        if matches!(self.ids, Ids::Alloc(_)) {
                            assert!(
                                !other.history.contains(&id),
                                "id {id} reused while outstanding"
                            );
                        }
                    }
                    let m = &mut self.models[i];
                    assert!(!m.ended, "Send after the final event");
                    assert!(m.current.is_none(), "Send while an attempt is in flight");
                    assert_eq!(m.method, method);
                    assert_eq!(attempt, m.attempts + 1, "attempt numbers count up by one");
                    if attempt == 1 {
                        assert!(step == Step::Start, "first send outside start");
                    } else {
                        assert!(step == Step::Timeout, "resend outside handle_timeout");
                        let at = m.resend_at.expect("resend without Resending");
                        assert!(now >= at, "resent before its time");
                        assert!(now < m.cap(), "resent at or past max_total");
                    }
                    let v: Value = serde_json::from_str(&body).expect("request body is JSON");
                    assert_eq!(v["id"], id_value(&id));
                    assert_eq!(v["method"], Value::String(method.clone()));
                    m.attempts = attempt;
                    m.history.push(id.clone());
                    m.current = Some((id, now));
                    m.resend_at = None;
                    m.last_progress = None;
                }
                Output::CloseStream { req, id } => {
                    assert_eq!(self.transport, Transport::Http, "CloseStream on stdio");
                    let &i = self
                        .by_handle
                        .get(&req)
                        .expect("CloseStream for an unknown request");
                    let m = &self.models[i];
                    assert!(!m.ended, "CloseStream after the final event");
                    assert!(m.history.contains(&id), "CloseStream for a foreign id");
                }
                Output::CancelNotice { req, id, body } => {
                    assert_eq!(self.transport, Transport::Http, "CancelNotice on stdio");
                    let &i = self
                        .by_handle
                        .get(&req)
                        .expect("CancelNotice for an unknown request");
                    let m = &self.models[i];
                    assert!(!m.ended, "CancelNotice after the final event");
                    assert!(m.history.contains(&id), "CancelNotice for a foreign id");
                    let v: Value = serde_json::from_str(&body).expect("notification is JSON");
                    assert_eq!(v["method"], "notifications/cancelled");
                    assert_eq!(v["params"]["requestId"], id_value(&id));
                }
                Output::Notify { body } => {
                    assert_eq!(self.transport, Transport::Stdio, "Notify on HTTP");
                    let v: Value = serde_json::from_str(&body).expect("notification is JSON");
                    assert_eq!(v["method"], "notifications/cancelled");
                    let id: Id = serde_json::from_value(v["params"]["requestId"].clone())
                        .expect("requestId is an id");
                    assert!(
                        self.models
                            .iter()
                            .any(|m| !m.ended && m.history.contains(&id)),
                        "cancelled an id no live request sent"
                    );
                }
                Output::Event(e) => self.event(step, e),
            }
        }
        let live = self.models.iter().filter(|m| !m.ended).count();
        assert_eq!(self.r.in_flight(), live, "in_flight disagrees");
        if let Some(t) = self.r.poll_timeout() {
            let req = match t.reason {
                TimeoutReason::Deadline { req } | TimeoutReason::Resend { req } => req,
            };
            let &i = self
                .by_handle
                .get(&req)
                .expect("timeout for an unknown request");
            let m = &self.models[i];
            assert!(!m.ended, "timeout for an ended request");
            assert!(t.at <= m.cap(), "a deadline past max_total");
            if step == Step::Timeout {
                assert!(t.at >= now, "poll_timeout in the past after handle_timeout");
            }
        }
        if step == Step::Timeout {
            for m in self.models.iter().filter(|m| !m.ended) {
                match &m.current {
                    Some((_, sent)) => {
                        assert!(now < m.cap(), "in flight past max_total");
                        if !m.options.reset_on_progress {
                            assert!(
                                now < *sent + m.options.timeout,
                                "in flight past its timeout"
                            );
                        }
                    }
                    None => {
                        if self.transport == Transport::Http || self.channel_open {
                            let at = m.resend_at.expect("waiting without Resending");
                            assert!(now < at, "a due resend was not sent");
                        }
                    }
                }
            }
        }
    }

    fn model(&mut self, req: RequestHandle, what: &str) -> &mut Model {
        let &i = self
            .by_handle
            .get(&req)
            .unwrap_or_else(|| panic!("{what} for an unknown request"));
        &mut self.models[i]
    }

    fn event(&mut self, step: Step, e: Event) {
        let now = self.now;
        let alloc = matches!(self.ids, Ids::Alloc(_));
        let mut release: Vec<Id> = Vec::new();
        match e {
            Event::Response { req, id, .. } => {
                let m = self.model(req, "Response");
                assert!(!m.ended, "a second final event (Response)");
                assert_eq!(
                    m.current.as_ref().map(|c| &c.0),
                    Some(&id),
                    "Response for an id that is not in flight"
                );
                m.ended = true;
                release = m.history.clone();
            }
            Event::TimedOut { req, id, max_total } => {
                assert!(step == Step::Timeout, "TimedOut outside handle_timeout");
                let m = self.model(req, "TimedOut");
                assert!(!m.ended, "a second final event (TimedOut)");
                let (cur, sent) = m.current.clone().expect("TimedOut while not in flight");
                assert_eq!(cur, id);
                if max_total {
                    assert!(now >= m.cap(), "max_total timeout before max_total");
                } else {
                    assert!(now >= sent + m.options.timeout, "timed out early");
                }
                m.ended = true;
                release = m.history.clone();
            }
            Event::Cancelled { req, id } => {
                assert!(step == Step::Cancel, "Cancelled without cancel");
                let m = self.model(req, "Cancelled");
                assert!(!m.ended, "a second final event (Cancelled)");
                assert_eq!(id, m.current.as_ref().map(|c| c.0.clone()));
                m.ended = true;
                release = m.history.clone();
            }
            Event::Failed { req, .. } => {
                let m = self.model(req, "Failed");
                assert!(!m.ended, "a second final event (Failed)");
                m.ended = true;
                release = m.history.clone();
            }
            Event::Resending {
                req,
                lost_id,
                next_attempt,
                at,
            } => {
                let m = self.model(req, "Resending");
                assert!(!m.ended, "Resending after the final event");
                assert!(
                    is_read_only(&m.method) || m.options.idempotent,
                    "resending a request with side effects"
                );
                let (cur, _) = m.current.take().expect("Resending while not in flight");
                assert_eq!(cur, lost_id);
                assert_eq!(next_attempt, m.attempts + 1);
                assert!(
                    next_attempt - 1 <= m.options.max_resends,
                    "more resends than max_resends"
                );
                assert!(at >= now, "a resend scheduled in the past");
                assert!(at < m.cap(), "a resend at or past max_total");
                m.resend_at = Some(at);
            }
            Event::Progress { req, progress, .. } => {
                let m = self.model(req, "Progress");
                assert!(!m.ended, "Progress after the final event");
                // On HTTP a progress message fed for a request waiting to resend is still
                // reported (it moves no deadline); the module does not forbid it.
                assert!(
                    m.last_progress.is_none_or(|last| progress > last),
                    "progress did not increase"
                );
                m.last_progress = Some(progress);
            }
            Event::Notification { req, .. } => {
                let m = self.model(req, "Notification");
                assert!(!m.ended, "Notification after the final event");
            }
            Event::LateResponseIgnored { req, id } => {
                let m = self.model(req, "LateResponseIgnored");
                assert!(m.history.contains(&id), "late response for a foreign id");
                assert!(
                    m.ended || m.current.as_ref().map(|c| &c.0) != Some(&id),
                    "the response of the attempt in flight was dropped as late"
                );
            }
            Event::Ignored { req, .. } => {
                if let Some(req) = req {
                    self.model(req, "Ignored");
                }
            }
            _ => {}
        }
        if alloc {
            if let Ids::Alloc(a) = &mut self.ids {
                for id in &release {
                    a.release(id);
                }
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let transport = if input.config & 1 == 0 {
        Transport::Http
    } else {
        Transport::Stdio
    };
    let ids = if input.config & 2 == 0 {
        let first = if input.config & 4 == 0 {
            1
        } else {
            i64::MAX - i64::from(input.config >> 4)
        };
        Ids::Alloc(IdAllocator::starting_at(first))
    } else {
        Ids::Pool {
            bytes: input.pool.iter().copied().take(16).collect(),
            i: 0,
        }
    };
    let mut w = World {
        r: Requests::new(RequestsConfig {
            transport,
            jitter_seed: u64::from(input.config),
        }),
        ids,
        models: Vec::new(),
        by_handle: BTreeMap::new(),
        transport,
        channel_open: true,
        now: Instant::now(),
    };

    for op in input.ops.into_iter().take(200) {
        let mut step = Step::Other;
        match op {
            Op::Start {
                method,
                params,
                timeout,
                max_total,
                max_resends,
                idempotent,
                reset_on_progress,
                resend_on_timeout,
            } => {
                step = Step::Start;
                let method = METHODS[usize::from(method) % METHODS.len()];
                let (params, progress_token) = match params % 4 {
                    0 => (None, None),
                    1 => (Some(json!({"name": "x"})), None),
                    _ => {
                        let t = token(params >> 2);
                        (
                            Some(json!({"name": "x", "_meta": {"progressToken": id_value(&t)}})),
                            Some(t),
                        )
                    }
                };
                let options = CallOptions {
                    timeout: Duration::from_millis(u64::from(timeout % 600 + 1) * 100),
                    reset_on_progress,
                    max_total: Duration::from_millis(u64::from(max_total % 1200 + 1) * 100),
                    max_resends: u32::from(max_resends % 5),
                    idempotent,
                    resend_on_timeout,
                    ..CallOptions::default()
                };
                let text = params.map(|p| p.to_string());
                match w
                    .r
                    .start(w.now, method, text.as_deref(), options.clone(), &mut w.ids)
                {
                    Ok(handle) => {
                        assert!(!w.by_handle.contains_key(&handle), "handle reused");
                        w.by_handle.insert(handle, w.models.len());
                        w.models.push(Model {
                            handle,
                            method: method.to_owned(),
                            options,
                            progress_token,
                            first_sent: w.now,
                            history: Vec::new(),
                            current: None,
                            resend_at: None,
                            attempts: 0,
                            last_progress: None,
                            ended: false,
                        });
                    }
                    Err(UsageError::IdInUse) => {
                        assert!(matches!(w.ids, Ids::Pool { .. }), "the allocator ran dry")
                    }
                    Err(e) => panic!("start refused valid input: {e}"),
                }
            }
            Op::Cancel { which, reason } => {
                step = Step::Cancel;
                if let Some(i) = w.pick(which) {
                    let handle = w.models[i].handle;
                    let res = w.r.cancel(w.now, handle, reason.as_deref());
                    if w.models[i].ended {
                        assert_eq!(res, Err(UsageError::UnknownHandle));
                    } else {
                        assert_eq!(res, Ok(()));
                    }
                }
            }
            Op::Advance { ms } => {
                step = Step::Timeout;
                w.now += Duration::from_millis(u64::from(ms));
                w.r.handle_timeout(w.now, &mut w.ids);
            }
            Op::AdvanceToTimeout => {
                step = Step::Timeout;
                if let Some(t) = w.r.poll_timeout() {
                    w.now = w.now.max(t.at);
                }
                w.r.handle_timeout(w.now, &mut w.ids);
            }
            Op::Stream { which, msg } => {
                if let Some(i) = w.pick(which) {
                    let text = w.message(Some(i), &msg);
                    let res = w.r.handle_stream_message(w.now, w.models[i].handle, &text);
                    check_stream_result(&w, i, res);
                }
            }
            Op::StreamEnd { which } => {
                if let Some(i) = w.pick(which) {
                    let res = w.r.handle_stream_end(w.now, w.models[i].handle);
                    check_stream_result(&w, i, res);
                }
            }
            Op::StreamFailed {
                which,
                status,
                retry_after_ms,
            } => {
                if let Some(i) = w.pick(which) {
                    let failure = StreamFailure {
                        status: status.map(|s| s % 600),
                        retry_after: retry_after_ms.map(|ms| Duration::from_millis(u64::from(ms))),
                    };
                    let res = w.r.handle_stream_failed(w.now, w.models[i].handle, failure);
                    check_stream_result(&w, i, res);
                }
            }
            Op::Channel { which, msg } => {
                if transport == Transport::Stdio {
                    let m = w.pick(which);
                    let text = w.message(m, &msg);
                    let _ = w.r.handle_channel_message(w.now, &text);
                }
            }
            Op::ChannelClosed => {
                if transport == Transport::Stdio {
                    w.channel_open = false;
                    w.r.handle_channel_closed(w.now);
                }
            }
            Op::ChannelOpen => {
                if transport == Transport::Stdio {
                    w.channel_open = true;
                    w.r.handle_channel_open(w.now);
                }
            }
        }
        w.drain(step);
    }

    // Settle: the channel comes back and time runs to every timeout in turn.
    if !w.channel_open {
        w.channel_open = true;
        w.r.handle_channel_open(w.now);
        w.drain(Step::Other);
    }
    for _ in 0..10_000 {
        let Some(t) = w.r.poll_timeout() else {
            break;
        };
        w.now = w.now.max(t.at);
        w.r.handle_timeout(w.now, &mut w.ids);
        w.drain(Step::Timeout);
    }
    assert_eq!(
        w.r.in_flight(),
        0,
        "requests left in flight after the settle"
    );
    assert!(
        w.models.iter().all(|m| m.ended),
        "a request ended without a final event"
    );
});

fn check_stream_result(w: &World, i: usize, res: Result<(), UsageError>) {
    match w.transport {
        Transport::Stdio => assert_eq!(res, Err(UsageError::WrongTransport)),
        Transport::Http => {
            if !w.models[i].ended {
                assert_eq!(res, Ok(()), "a stream input for a live request was refused");
            } else {
                assert!(
                    matches!(res, Ok(()) | Err(UsageError::UnknownHandle)),
                    "unexpected error for an ended request: {res:?}"
                );
            }
        }
    }
}

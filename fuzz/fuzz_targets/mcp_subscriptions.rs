//! `mcp::subscription::Subscriptions` fed an arbitrary sequence of listens (filters from
//! bits), closes, time steps, stream and channel messages (arbitrary text, or well-formed
//! acknowledgments, change notifications, listen results and errors, and cancellations naming
//! a current, stale or unknown listen id), stream ends and failures, and stdio channel closes
//! and reopens. The first byte picks the transport, the id source and the reconnect limit.
//!
//! Invariants checked after every step (all from the module docs):
//! - events only for live subscriptions; each ends with exactly one `Ended`, after which it
//!   gets no `Send` and no event; after `close` the subscription is ended at once;
//! - a listen request asks for exactly the kinds requested;
//! - `Changed` only once the current stream is acknowledged, and only for a kind the
//!   subscription asked for; `Acknowledged` splits the requested kinds into accepted and
//!   dropped; `Refetch` follows an acknowledgment after a reconnect and names only requested
//!   kinds;
//! - every listen request has a fresh id: with a well-behaved allocator, never one a live
//!   subscription used; with a misbehaving pool, never the current id of another live one;
//!   reconnects only from `handle_timeout`, not before their announced time;
//! - after `handle_timeout(now)` no overdue acknowledgment or due reconnect is left and
//!   `poll_timeout` is not in the past; `len()` agrees with the live subscriptions.
#![no_main]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::jsonrpc::Id;
use mcpwire_core::mcp::meta::IdAllocator;
use mcpwire_core::mcp::request::{IdSource, StreamFailure};
use mcpwire_core::mcp::subscription::{
    Change, EndReason, Event, Output, RefetchTarget, Subscriptions, TimeoutReason, UsageError,
    SUBSCRIPTION_ID_KEY,
};
use mcpwire_core::mcp::{SubscriptionFilter, SubscriptionHandle, SubscriptionsConfig, Transport};
use serde_json::{json, Map, Value};

const URIS: &[&str] = &["file:///a", "file:///b", "file:///c"];

#[derive(Arbitrary, Debug)]
enum SidPick {
    Current,
    Earlier(u8),
    OfOther(u8),
    Small(i8),
    Absent,
}

#[derive(Arbitrary, Debug)]
enum Msg {
    Raw(String),
    Ack {
        sid: SidPick,
        bits: u8,
        uris: u8,
        shape: u8,
    },
    Change {
        sid: SidPick,
        kind: u8,
    },
    ListenResult {
        id: SidPick,
        with_sid: bool,
    },
    ListenError {
        id: SidPick,
        null_id: bool,
    },
    Cancelled {
        id: SidPick,
        reason: Option<String>,
    },
    Other {
        sid: SidPick,
    },
    ServerRequest,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Listen {
        bits: u8,
        uris: u8,
    },
    Close {
        which: u8,
    },
    Advance {
        ms: u16,
    },
    AdvanceToTimeout,
    /// The usual server: acknowledge exactly what was asked, on the subscription's own stream.
    AckAsAsked {
        which: u8,
    },
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

fn filter(bits: u8, uris: u8) -> SubscriptionFilter {
    SubscriptionFilter {
        tools_list_changed: bits & 1 != 0,
        prompts_list_changed: bits & 2 != 0,
        resources_list_changed: bits & 4 != 0,
        resource_subscriptions: URIS
            .iter()
            .enumerate()
            .filter(|(i, _)| uris & (1 << i) != 0)
            .map(|(_, u)| (*u).to_owned())
            .collect(),
    }
}

fn id_value(id: &Id) -> Value {
    match id {
        Id::Number(n) => serde_json::from_str(&n.to_string()).unwrap_or(Value::Null),
        Id::String(s) => Value::String(s.clone()),
    }
}

fn allows(f: &SubscriptionFilter, c: &Change) -> bool {
    match c {
        Change::ToolsListChanged => f.tools_list_changed,
        Change::PromptsListChanged => f.prompts_list_changed,
        Change::ResourcesListChanged => f.resources_list_changed,
        Change::ResourceUpdated { .. } => !f.resource_subscriptions.is_empty(),
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

struct Model {
    handle: SubscriptionHandle,
    requested: SubscriptionFilter,
    history: Vec<Id>,
    /// The listen id in use and when it was sent; `None` while waiting to reconnect.
    current: Option<(Id, Instant)>,
    acked: bool,
    reconnect_at: Option<Instant>,
    /// Whether the last event for it was `Acknowledged` (a `Refetch` follows only that).
    just_acked: bool,
    ended: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Listen,
    Close,
    Timeout,
    Other,
}

struct World {
    s: Subscriptions,
    ids: Ids,
    models: Vec<Model>,
    by_handle: BTreeMap<SubscriptionHandle, usize>,
    transport: Transport,
    ack_timeout: Duration,
    channel_open: bool,
    now: Instant,
}

impl World {
    fn pick(&self, which: u8) -> Option<usize> {
        (!self.models.is_empty()).then(|| usize::from(which) % self.models.len())
    }

    fn sid(&self, m: Option<usize>, p: &SidPick) -> Option<Id> {
        let model = m.map(|i| &self.models[i]);
        Some(match p {
            SidPick::Current => model
                .and_then(|m| {
                    m.current
                        .as_ref()
                        .map(|c| c.0.clone())
                        .or(m.history.last().cloned())
                })
                .unwrap_or(Id::Number(1)),
            SidPick::Earlier(k) => model
                .filter(|m| !m.history.is_empty())
                .map(|m| m.history[usize::from(*k) % m.history.len()].clone())
                .unwrap_or(Id::Number(1)),
            SidPick::OfOther(k) => {
                let all: Vec<&Id> = self.models.iter().flat_map(|m| &m.history).collect();
                if all.is_empty() {
                    Id::Number(0)
                } else {
                    all[usize::from(*k) % all.len()].clone()
                }
            }
            SidPick::Small(n) => Id::Number(i128::from(*n)),
            SidPick::Absent => return None,
        })
    }

    fn meta(&self, m: Option<usize>, p: &SidPick) -> Value {
        match self.sid(m, p) {
            Some(id) => json!({ SUBSCRIPTION_ID_KEY: id_value(&id) }),
            None => json!({}),
        }
    }

    fn message(&self, m: Option<usize>, msg: &Msg) -> String {
        let v = match msg {
            Msg::Raw(s) => return s.clone(),
            Msg::Ack {
                sid,
                bits,
                uris,
                shape,
            } => {
                let mut params = json!({"_meta": self.meta(m, sid)});
                match shape % 8 {
                    0 => {}
                    1 => params["notifications"] = json!(5),
                    2 => params["notifications"] = json!({"toolsListChanged": "yes"}),
                    3 | 4 => {
                        // Echo what the subscription asked for (the usual server).
                        let asked = m
                            .map(|i| self.models[i].requested.clone())
                            .unwrap_or_default();
                        params["notifications"] = serde_json::to_value(asked).unwrap_or(Value::Null)
                    }
                    _ => {
                        params["notifications"] =
                            serde_json::to_value(filter(*bits, *uris)).unwrap_or(Value::Null)
                    }
                }
                json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": params})
            }
            Msg::Change { sid, kind } => {
                let mut params = json!({"_meta": self.meta(m, sid)});
                let method = match kind % 8 {
                    0 => "notifications/tools/list_changed",
                    1 => "notifications/prompts/list_changed",
                    2 => "notifications/resources/list_changed",
                    3 => {
                        params["uri"] = json!("file:///a/sub");
                        "notifications/resources/updated"
                    }
                    4 => "notifications/resources/updated",
                    _ => {
                        params["uri"] = json!(URIS[usize::from(*kind) % URIS.len()]);
                        "notifications/resources/updated"
                    }
                };
                json!({"jsonrpc": "2.0", "method": method, "params": params})
            }
            Msg::ListenResult { id, with_sid } => {
                let id = self.sid(m, id).unwrap_or(Id::Number(1));
                let mut result = json!({});
                if *with_sid {
                    result["_meta"] = json!({ SUBSCRIPTION_ID_KEY: id_value(&id) });
                }
                json!({"jsonrpc": "2.0", "id": id_value(&id), "result": result})
            }
            Msg::ListenError { id, null_id } => {
                let id = match self.sid(m, id) {
                    Some(id) if !null_id => id_value(&id),
                    _ => Value::Null,
                };
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
            }
            Msg::Cancelled { id, reason } => {
                let mut params = json!({});
                if let Some(id) = self.sid(m, id) {
                    params["requestId"] = id_value(&id);
                }
                if let Some(r) = reason {
                    params["reason"] = json!(r);
                }
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
            }
            Msg::Other { sid } => {
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"_meta": self.meta(m, sid)}})
            }
            Msg::ServerRequest => {
                json!({"jsonrpc": "2.0", "id": 9, "method": "roots/list"})
            }
        };
        v.to_string()
    }

    fn model(&mut self, sub: SubscriptionHandle, what: &str) -> &mut Model {
        let &i = self
            .by_handle
            .get(&sub)
            .unwrap_or_else(|| panic!("{what} for an unknown subscription"));
        let m = &mut self.models[i];
        assert!(!m.ended, "{what} for an ended subscription");
        m
    }

    fn drain(&mut self, step: Step) {
        let now = self.now;
        while let Some(o) = self.s.poll_output() {
            match o {
                Output::Send { sub, id, body } => {
                    let &i = self.by_handle.get(&sub).expect("Send for an unknown sub");
                    for (j, other) in self.models.iter().enumerate() {
                        if other.ended {
                            continue;
                        }
                        if j != i {
                            assert!(
                                other.current.as_ref().map(|c| &c.0) != Some(&id),
                                "listen id {id} shared by two live subscriptions"
                            );
                        }
                        if matches!(self.ids, Ids::Alloc(_)) {
                            assert!(!other.history.contains(&id), "listen id {id} reused");
                        }
                    }
                    let m = &mut self.models[i];
                    assert!(!m.ended, "Send after Ended (or after close)");
                    assert!(m.current.is_none(), "Send while a stream is open");
                    if m.history.is_empty() {
                        assert!(step == Step::Listen, "first listen outside listen()");
                    } else {
                        assert!(step == Step::Timeout, "reconnect outside handle_timeout");
                        let at = m.reconnect_at.expect("reconnect without Disconnected");
                        assert!(now >= at, "reconnected before its time");
                    }
                    let v: Value = serde_json::from_str(&body).expect("listen body is JSON");
                    assert_eq!(v["method"], "subscriptions/listen");
                    assert_eq!(v["id"], id_value(&id));
                    let asked: SubscriptionFilter =
                        serde_json::from_value(v["params"]["notifications"].clone())
                            .expect("notifications is a filter");
                    assert_eq!(asked, m.requested, "listen asks for other kinds");
                    let notif = v["params"]["notifications"].as_object().expect("an object");
                    assert!(
                        notif
                            .values()
                            .all(|x| *x != json!(false) && *x != json!([])),
                        "a kind not asked for is present in the listen request"
                    );
                    m.history.push(id.clone());
                    m.current = Some((id, now));
                    m.acked = false;
                    m.reconnect_at = None;
                    m.just_acked = false;
                }
                Output::CloseStream { sub, id } => {
                    assert_eq!(self.transport, Transport::Http, "CloseStream on stdio");
                    let m = self.model(sub, "CloseStream");
                    assert!(m.history.contains(&id), "CloseStream of a foreign id");
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
                        "cancelled a listen id no live subscription sent"
                    );
                }
                Output::Event(e) => self.event(step, e),
            }
        }
        let live = self.models.iter().filter(|m| !m.ended).count();
        assert_eq!(self.s.len(), live, "len() disagrees");
        if let Some(t) = self.s.poll_timeout() {
            let sub = match t.reason {
                TimeoutReason::Ack { sub } | TimeoutReason::Reconnect { sub } => sub,
            };
            self.model(sub, "poll_timeout");
            if step == Step::Timeout {
                assert!(t.at >= now, "poll_timeout in the past after handle_timeout");
            }
        }
        if step == Step::Timeout {
            for m in self.models.iter().filter(|m| !m.ended) {
                match &m.current {
                    Some((_, sent)) if !m.acked => {
                        assert!(now < *sent + self.ack_timeout, "overdue ack left waiting")
                    }
                    Some(_) => {}
                    None => {
                        if self.transport == Transport::Http || self.channel_open {
                            let at = m.reconnect_at.expect("waiting without Disconnected");
                            assert!(now < at, "a due reconnect was not sent");
                        }
                    }
                }
            }
        }
    }

    fn event(&mut self, step: Step, e: Event) {
        let now = self.now;
        let mut release: Vec<Id> = Vec::new();
        let mut acked_now = None;
        match e {
            Event::Acknowledged {
                sub,
                id,
                accepted,
                dropped,
                ..
            } => {
                let m = self.model(sub, "Acknowledged");
                assert_eq!(m.current.as_ref().map(|c| &c.0), Some(&id));
                assert!(!m.acked, "acknowledged twice");
                let r = &m.requested;
                for (a, d, q) in [
                    (
                        accepted.tools_list_changed,
                        dropped.tools_list_changed,
                        r.tools_list_changed,
                    ),
                    (
                        accepted.prompts_list_changed,
                        dropped.prompts_list_changed,
                        r.prompts_list_changed,
                    ),
                    (
                        accepted.resources_list_changed,
                        dropped.resources_list_changed,
                        r.resources_list_changed,
                    ),
                ] {
                    assert!(!(a && d), "a kind both accepted and dropped");
                    assert_eq!(a || d, q, "accepted + dropped is not what was requested");
                }
                let mut both = accepted.resource_subscriptions.clone();
                both.extend(dropped.resource_subscriptions.iter().cloned());
                assert_eq!(
                    sorted(both),
                    sorted(r.resource_subscriptions.clone()),
                    "accepted + dropped URIs are not the requested ones"
                );
                m.acked = true;
                acked_now = Some(sub);
            }
            Event::Changed { sub, change } => {
                let m = self.model(sub, "Changed");
                assert!(m.acked, "Changed before the acknowledgment");
                assert!(
                    allows(&m.requested, &change),
                    "Changed for a kind not asked for: {change:?}"
                );
            }
            Event::Refetch { sub, targets } => {
                let m = self.model(sub, "Refetch");
                assert!(m.just_acked, "Refetch not right after an acknowledgment");
                assert!(m.history.len() > 1, "Refetch without a reconnect");
                for t in &targets {
                    let ok = match t {
                        RefetchTarget::ToolsList => m.requested.tools_list_changed,
                        RefetchTarget::PromptsList => m.requested.prompts_list_changed,
                        RefetchTarget::ResourcesList | RefetchTarget::ResourceTemplatesList => {
                            m.requested.resources_list_changed
                        }
                        RefetchTarget::Resource { uri } => {
                            m.requested.resource_subscriptions.contains(uri)
                        }
                    };
                    assert!(ok, "Refetch of something not subscribed: {t:?}");
                }
            }
            Event::Disconnected {
                sub,
                id,
                reconnect_at,
                ..
            } => {
                let m = self.model(sub, "Disconnected");
                let (cur, _) = m.current.take().expect("Disconnected without a stream");
                assert_eq!(cur, id, "Disconnected names another listen id");
                assert!(reconnect_at >= now, "a reconnect scheduled in the past");
                m.reconnect_at = Some(reconnect_at);
                m.acked = false;
            }
            Event::Ended { sub, reason } => {
                if matches!(reason, EndReason::ClosedByHost) {
                    assert!(step == Step::Close, "ClosedByHost without close");
                }
                let m = self.model(sub, "Ended");
                m.ended = true;
                release = m.history.clone();
            }
            Event::Ignored { sub, .. } => {
                self.model(sub, "Ignored");
            }
            _ => {}
        }
        for m in &mut self.models {
            m.just_acked = acked_now == Some(m.handle);
        }
        if let Ids::Alloc(a) = &mut self.ids {
            for id in &release {
                a.release(id);
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
        Ids::Alloc(IdAllocator::starting_at(if input.config & 4 == 0 {
            1
        } else {
            i64::MAX - 2
        }))
    } else {
        Ids::Pool {
            bytes: input.pool.iter().copied().take(16).collect(),
            i: 0,
        }
    };
    let mut config = SubscriptionsConfig::new(transport);
    config.max_reconnects = match (input.config >> 3) & 3 {
        0 => None,
        n => Some(u32::from(n - 1)),
    };
    config.ack_timeout = Duration::from_secs(u64::from(input.config >> 5) + 1);
    config.healthy_after = Duration::from_secs(5);
    config.jitter_seed = u64::from(input.config);
    let ack_timeout = config.ack_timeout;
    let mut w = World {
        s: Subscriptions::new(config),
        ids,
        models: Vec::new(),
        by_handle: BTreeMap::new(),
        transport,
        ack_timeout,
        channel_open: true,
        now: Instant::now(),
    };

    for op in input.ops.into_iter().take(200) {
        let mut step = Step::Other;
        match op {
            Op::Listen { bits, uris } => {
                step = Step::Listen;
                let f = filter(bits, uris);
                let empty = f.is_empty();
                let mut meta = Map::new();
                meta.insert(
                    "io.modelcontextprotocol/protocolVersion".into(),
                    json!("2026-07-28"),
                );
                match w.s.listen(w.now, f.clone(), meta, &mut w.ids) {
                    Ok(handle) => {
                        assert!(!empty, "an empty filter was accepted");
                        assert!(!w.by_handle.contains_key(&handle), "handle reused");
                        w.by_handle.insert(handle, w.models.len());
                        w.models.push(Model {
                            handle,
                            requested: f,
                            history: Vec::new(),
                            current: None,
                            acked: false,
                            reconnect_at: None,
                            just_acked: false,
                            ended: false,
                        });
                    }
                    Err(UsageError::EmptyFilter) => assert!(empty),
                    Err(UsageError::IdInUse) => {
                        assert!(matches!(w.ids, Ids::Pool { .. }), "the allocator ran dry")
                    }
                    Err(e) => panic!("listen refused valid input: {e}"),
                }
            }
            Op::Close { which } => {
                step = Step::Close;
                if let Some(i) = w.pick(which) {
                    let res = w.s.close(w.now, w.models[i].handle);
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
                w.s.handle_timeout(w.now, &mut w.ids);
            }
            Op::AdvanceToTimeout => {
                step = Step::Timeout;
                if let Some(t) = w.s.poll_timeout() {
                    w.now = w.now.max(t.at);
                }
                w.s.handle_timeout(w.now, &mut w.ids);
            }
            Op::AckAsAsked { which } => {
                if let Some(i) = w.pick(which) {
                    let msg = Msg::Ack {
                        sid: SidPick::Current,
                        bits: 0,
                        uris: 0,
                        shape: 3,
                    };
                    let text = w.message(Some(i), &msg);
                    if transport == Transport::Http {
                        let res = w.s.handle_stream_message(w.now, w.models[i].handle, &text);
                        check(&w, res);
                    } else {
                        let _ = w.s.handle_channel_message(w.now, &text);
                    }
                }
            }
            Op::Stream { which, msg } => {
                if let Some(i) = w.pick(which) {
                    let text = w.message(Some(i), &msg);
                    let res = w.s.handle_stream_message(w.now, w.models[i].handle, &text);
                    check(&w, res);
                }
            }
            Op::StreamEnd { which } => {
                if let Some(i) = w.pick(which) {
                    let res = w.s.handle_stream_end(w.now, w.models[i].handle);
                    check(&w, res);
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
                    let res = w.s.handle_stream_failed(w.now, w.models[i].handle, failure);
                    check(&w, res);
                }
            }
            Op::Channel { which, msg } => {
                if transport == Transport::Stdio {
                    let m = w.pick(which);
                    let text = w.message(m, &msg);
                    let _ = w.s.handle_channel_message(w.now, &text);
                }
            }
            Op::ChannelClosed => {
                if transport == Transport::Stdio {
                    w.channel_open = false;
                    w.s.handle_channel_closed(w.now);
                }
            }
            Op::ChannelOpen => {
                if transport == Transport::Stdio {
                    w.channel_open = true;
                    w.s.handle_channel_open(w.now);
                }
            }
        }
        w.drain(step);
    }

    // Settle: the host closes everything that is left.
    for i in 0..w.models.len() {
        if !w.models[i].ended {
            assert_eq!(w.s.close(w.now, w.models[i].handle), Ok(()));
            w.drain(Step::Close);
            assert!(w.models[i].ended, "close did not end the subscription");
        }
    }
    assert!(w.s.is_empty(), "subscriptions left after closing all");
    assert_eq!(w.s.poll_timeout(), None, "a timeout with nothing live");
});

fn check(w: &World, res: Result<(), UsageError>) {
    match w.transport {
        Transport::Stdio => assert_eq!(res, Err(UsageError::WrongTransport)),
        Transport::Http => assert_eq!(res, Ok(()), "a stream input was refused"),
    }
}

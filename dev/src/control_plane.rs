//! `mcpwire dev control-plane`: a local Secure MCP Tunnel control plane
//! (`shared/spec/tunnel/protocol.md`, `openapi.json`), for people and for end-to-end tests.
//!
//! **For tunnel clients** (bearer API key on every request; a wrong or missing key is `401`):
//!
//! | Method and path | What it does |
//! |---|---|
//! | `GET /v1/tunnels/{id}` | `200` with `{id, name, description}` |
//! | `GET /v1/tunnels/{id}/cloudflare/runtime` | `200` with the managed runtime (when a runtime token is configured), else `404`; always `Cache-Control: no-store` |
//! | `GET /v1/tunnels/{id}/poll?limit=&timeout_ms=&channel=` | long poll: `200 {"commands": [...]}` or `204` after the wait (at most [`Config::max_poll_wait`]); `limit` 1 to 25 (default 25), `channel` repeatable (default: every channel); `400` for a bad `limit`, `timeout_ms` or tunnel id |
//! | `POST /v1/tunnels/{id}/response` | `200 {"status":"ok"}`; `400 invalid_json_payload` / `invalid_channel_format`; `401 tunnel_request_mismatch` when `X-Tunnel-Shard-Token` (or a present `channel`) differs from the command's; `404 pending_request_not_found` for an unknown or completed request id; `413 request_body_too_large` |
//!
//! Error bodies are the contract's `{"error": {"message", "type", "param", "code"}}`.
//!
//! **For MCP clients** (no authentication; loopback only): `POST /v1/mcp/{id}` turns the
//! JSON-RPC body into a `jsonrpc` command (request id and shard token drawn at random, the
//! request's `Mcp-*` and `Last-Event-ID` headers copied into the command's `headers`), queued
//! for the next poll on channel `?channel=` (default `main`). Its `response_timeout` is the
//! `X-Mcpwire-Response-Timeout` request header, copied verbatim (so malformed values can be
//! tried), else [`Config::response_timeout`]. The tunnel client's answers come back as the HTTP
//! response: each `jsonrpc_notify` as an SSE event (the response becomes `text/event-stream` at
//! the first one), the terminal response as the last event, or, when no notification came, as
//! the response itself (its `resp_code`, `resp_headers` and `resp_json`; a `notify_ack` answers
//! `202` with no body). `DELETE /v1/mcp/{id}` with `Mcp-Session-Id` queues a
//! `session_termination` command and answers its `resp_code` (`400 missing_mcp_session_id`
//! without the header). When no terminal response comes in time (the command's
//! `response_timeout` plus [`Config::expiry_grace`], else [`Config::mcp_wait`]) the command is
//! dropped (a later response POST gets `404`) and the MCP client gets `504`. `GET` is `405`.
//!
//! **Test hooks** (in-process on [`ControlPlane`], or over HTTP under `/admin/`, with the same
//! bearer key):
//!
//! | Admin request | In-process | Effect |
//! |---|---|---|
//! | `POST /admin/tunnels/{id}/commands` `{"commands": [...]}` | [`ControlPlane::enqueue_raw`] | queue raw command objects verbatim, all at once (one poll can take them all); those with a string `request_id` become pending |
//! | `GET /admin/tunnels/{id}/responses?request_id=&terminal=1&wait_ms=` | [`ControlPlane::responses`], [`ControlPlane::wait_for_response`] | every response POST received (also refused ones), in order, with its exact body, shard token header and the status answered |
//! | `GET /admin/tunnels/{id}/polls` | [`ControlPlane::polls`] | every poll received, its query, headers (key redacted), status and the request ids it delivered |
//! | `GET /admin/tunnels/{id}/pending` | [`ControlPlane::pending`] | request ids still pending, and how many are queued |
//! | `POST /admin/faults` `{"endpoint", "status", "retry_after", "count", "code", "resp_type"}` | [`ControlPlane::inject_fault`] | answer the next `count` requests to `endpoint` (`poll`, `response`, `metadata`, `cloudflare_runtime`) with `status` and `Retry-After` (no `count`: until cleared; `resp_type`: only response POSTs of that type) |
//! | `DELETE /admin/faults` | [`ControlPlane::clear_faults`] | remove every injected fault |
//! | `POST /admin/settings` `{"poll_batch": N}` | [`ControlPlane::set_poll_batch`] | polls return up to `N` commands whatever their `limit` (`null`: honour `limit`) |
//! | `POST /admin/cloudflare-runtime` `{"runtime_token": "..."}` | [`ControlPlane::set_cloudflare_runtime_token`] | serve (or, with `null`, stop serving) the managed runtime |

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::{self, code, ErrorObject, Id};
use mcpwire_core::mcp::headers::SESSION_ID_HEADER;
use mcpwire_core::tunnel::response_timeout;
use mcpwire_core::tunnel::wire::{RespType, ResponsePayload, DEFAULT_CHANNEL};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::http::{headers, lock, Handler, HttpServer, Limits, Request, Responder, Shutdown};
use crate::{random_token, ApiKey};

/// The request header an MCP client sets to give its command a `response_timeout`.
pub const RESPONSE_TIMEOUT_HEADER: &str = "X-Mcpwire-Response-Timeout";
/// The header carrying a command's shard token on a response POST.
pub const SHARD_TOKEN_HEADER: &str = "X-Tunnel-Shard-Token";
/// The largest `limit` a poll may ask for.
pub const MAX_POLL_LIMIT: usize = 25;

/// The control plane's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The tunnel clients' bearer key.
    pub api_key: ApiKey,
    /// The longest a poll waits for commands (the effective wait is the smaller of this and the
    /// poll's `timeout_ms`).
    pub max_poll_wait: Duration,
    /// The `response_timeout` of MCP requests that do not set [`RESPONSE_TIMEOUT_HEADER`].
    pub response_timeout: Option<String>,
    /// How long an MCP request whose command has no valid `response_timeout` waits.
    pub mcp_wait: Duration,
    /// Added to a valid `response_timeout` before the control plane drops the command (the
    /// client anchors its deadline at poll receipt, later than the enqueue).
    pub expiry_grace: Duration,
    /// The largest response POST body (`413` past it).
    pub max_response_body: usize,
    /// Commands queued or pending per tunnel; more are refused (`503`).
    pub max_pending: usize,
    /// Response POSTs and polls kept for [`ControlPlane::responses`] / [`ControlPlane::polls`].
    pub record_limit: usize,
    /// A managed Cloudflare runtime token to serve; `None` answers `404`.
    pub cloudflare_runtime_token: Option<ApiKey>,
    /// HTTP bounds (the body bound is raised to fit [`Config::max_response_body`]).
    pub limits: Limits,
}

impl Config {
    /// Defaults around `api_key`: polls wait at most 30 s, MCP requests 120 s, a 1 s grace,
    /// 16 MiB response bodies, 10 000 pending commands per tunnel.
    pub fn new(api_key: ApiKey) -> Config {
        Config {
            api_key,
            max_poll_wait: Duration::from_secs(30),
            response_timeout: None,
            mcp_wait: Duration::from_secs(120),
            expiry_grace: Duration::from_secs(1),
            max_response_body: 16 * 1024 * 1024,
            max_pending: 10_000,
            record_limit: 10_000,
            cloudflare_runtime_token: None,
            limits: Limits::default(),
        }
    }
}

/// A tunnel endpoint a fault can be injected into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `GET /v1/tunnels/{id}`.
    Metadata,
    /// `GET /v1/tunnels/{id}/cloudflare/runtime`.
    CloudflareRuntime,
    /// `GET /v1/tunnels/{id}/poll`.
    Poll,
    /// `POST /v1/tunnels/{id}/response`.
    Response,
}

impl Endpoint {
    /// Reads `poll`, `response`, `metadata` or `cloudflare_runtime`.
    pub fn parse(s: &str) -> Option<Endpoint> {
        match s {
            "poll" => Some(Endpoint::Poll),
            "response" => Some(Endpoint::Response),
            "metadata" => Some(Endpoint::Metadata),
            "cloudflare_runtime" => Some(Endpoint::CloudflareRuntime),
            _ => None,
        }
    }
}

/// An injected failure: the next `count` matching requests are answered `status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The status to answer.
    pub status: u16,
    /// The `Retry-After` value, sent verbatim (so malformed values can be tried too).
    pub retry_after: Option<String>,
    /// How many requests; `None` until [`ControlPlane::clear_faults`].
    pub count: Option<u32>,
    /// The error body's `code` (default: by status, e.g. `rate_limit_exceeded` for `429`).
    pub code: Option<String>,
    /// For response POSTs: only those whose `resp_type` is this.
    pub resp_type: Option<String>,
}

impl Fault {
    /// `status` with `Retry-After: retry_after` on the next `count` requests.
    pub fn new(status: u16, retry_after: Option<&str>, count: Option<u32>) -> Fault {
        Fault {
            status,
            retry_after: retry_after.map(str::to_owned),
            count,
            code: None,
            resp_type: None,
        }
    }
}

/// One response POST as received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecordedResponse {
    /// Arrival order across the control plane.
    pub seq: u64,
    /// The tunnel id of the path.
    pub tunnel_id: String,
    /// The body's `request_id`, when it could be read.
    pub request_id: Option<String>,
    /// The body's `resp_type`, when it could be read.
    pub resp_type: Option<String>,
    /// The `X-Tunnel-Shard-Token` header as received.
    pub shard_token: Option<String>,
    /// The request headers, `Authorization` redacted.
    pub headers: Vec<(String, String)>,
    /// The exact body (lossy UTF-8).
    pub body: String,
    /// The status the control plane answered.
    pub status: u16,
}

impl RecordedResponse {
    /// Whether it was accepted as a terminal response.
    pub fn is_accepted_terminal(&self) -> bool {
        self.status == 200 && self.resp_type.as_deref() != Some(RespType::JsonrpcNotify.as_str())
    }
}

/// One poll as received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecordedPoll {
    /// Arrival order across the control plane.
    pub seq: u64,
    /// The tunnel id of the path.
    pub tunnel_id: String,
    /// The raw query.
    pub query: String,
    /// The request headers, `Authorization` redacted.
    pub headers: Vec<(String, String)>,
    /// The status answered.
    pub status: u16,
    /// The request ids of the commands delivered (`null` for a command without one).
    pub delivered: Vec<Option<String>>,
}

/// Why raw commands were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueError {
    /// The tunnel id is not `[A-Za-z0-9_-]{1,128}`.
    BadTunnelId,
    /// A command is not a JSON object.
    NotAnObject(usize),
    /// The tunnel's queue is full.
    Full,
    /// The control plane is stopping.
    Stopped,
}

impl fmt::Display for EnqueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnqueueError::BadTunnelId => {
                f.write_str("the tunnel id must be 1 to 128 of A-Z a-z 0-9 _ -")
            }
            EnqueueError::NotAnObject(i) => write!(f, "command {i} is not a JSON object"),
            EnqueueError::Full => f.write_str("the tunnel's queue is full"),
            EnqueueError::Stopped => f.write_str("the control plane is stopping"),
        }
    }
}

impl std::error::Error for EnqueueError {}

/// What reaches a waiting MCP request.
enum Delivery {
    Notify(Box<RawValue>),
    Terminal(ResponsePayload),
}

struct Pending {
    channel: String,
    shard_token: Option<String>,
    /// When the control plane drops it (MCP-originated commands only).
    expires: Option<Instant>,
    waiter: Option<mpsc::SyncSender<Delivery>>,
}

struct Queued {
    channel: String,
    request_id: Option<String>,
    /// The command's exact JSON text.
    command: Box<RawValue>,
}

#[derive(Default)]
struct State {
    queues: HashMap<String, VecDeque<Queued>>,
    pending: HashMap<(String, String), Pending>,
    faults: Vec<(Endpoint, Fault)>,
    responses: VecDeque<RecordedResponse>,
    polls: VecDeque<RecordedPoll>,
    poll_batch: Option<usize>,
    cloudflare_runtime_token: Option<ApiKey>,
    seq: u64,
    stopped: bool,
}

impl State {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn pending_count(&self, tunnel: &str) -> usize {
        let queued = self.queues.get(tunnel).map_or(0, VecDeque::len);
        let pending = self.pending.keys().filter(|(t, _)| t == tunnel).count();
        queued.max(pending)
    }

    /// Drops MCP-originated commands whose time has passed.
    fn sweep(&mut self, now: Instant) {
        let expired: Vec<(String, String)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.expires.is_some_and(|e| e <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            self.drop_command(&key.0, &key.1);
        }
    }

    fn drop_command(&mut self, tunnel: &str, request_id: &str) {
        self.pending
            .remove(&(tunnel.to_owned(), request_id.to_owned()));
        if let Some(q) = self.queues.get_mut(tunnel) {
            q.retain(|c| c.request_id.as_deref() != Some(request_id));
        }
    }

    /// Takes the first active fault for `endpoint` (and `resp_type`), counting it down.
    fn take_fault(&mut self, endpoint: Endpoint, resp_type: Option<&str>) -> Option<Fault> {
        let i = self.faults.iter().position(|(e, f)| {
            *e == endpoint
                && f.count != Some(0)
                && f.resp_type
                    .as_deref()
                    .is_none_or(|want| Some(want) == resp_type)
        })?;
        let fault = &mut self.faults[i].1;
        let taken = fault.clone();
        if let Some(n) = fault.count.as_mut() {
            *n -= 1;
            if *n == 0 {
                self.faults.remove(i);
            }
        }
        Some(taken)
    }
}

/// The control plane: its state and its HTTP surface.
pub struct ControlPlane {
    config: Config,
    state: Mutex<State>,
    commands_cv: Condvar,
    responses_cv: Condvar,
    shutdown: Arc<Shutdown>,
}

impl fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlPlane").finish_non_exhaustive()
    }
}

/// A running control plane.
#[derive(Debug)]
pub struct ControlPlaneHandle {
    http: HttpServer,
    plane: Arc<ControlPlane>,
}

impl ControlPlaneHandle {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }

    /// `http://ADDR`, the base URL a tunnel client is given.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.local_addr())
    }

    /// The MCP endpoint of `tunnel_id`: `http://ADDR/v1/mcp/{tunnel_id}`.
    pub fn mcp_url(&self, tunnel_id: &str) -> String {
        format!("{}/v1/mcp/{tunnel_id}", self.base_url())
    }

    /// The control plane (test hooks).
    pub fn plane(&self) -> &Arc<ControlPlane> {
        &self.plane
    }

    /// Stops: waiting polls and MCP requests are answered, threads are joined.
    pub fn stop(&mut self) {
        self.plane.stop();
        self.http.stop();
    }
}

impl Drop for ControlPlaneHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

fn valid_tunnel_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn valid_channel(c: &str) -> bool {
    (1..=64).contains(&c.len())
        && c.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

fn redacted(h: &Headers) -> Vec<(String, String)> {
    h.iter()
        .map(|(n, v)| {
            let v = if n.eq_ignore_ascii_case("authorization") {
                "<redacted>"
            } else {
                v
            };
            (n.to_owned(), v.to_owned())
        })
        .collect()
}

/// The command JSON a poll delivers (the field names of `openapi.json`'s polled commands, the
/// ones [`mcpwire_core::tunnel::wire::decode_poll_body`] reads).
#[derive(Serialize)]
struct WireCommand<'a> {
    request_id: &'a str,
    shard_token: &'a str,
    command_type: &'a str,
    channel: &'a str,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_timeout: Option<&'a str>,
    headers: std::collections::BTreeMap<String, Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jsonrpc: Option<&'a RawValue>,
}

/// RFC 3339 UTC (`2026-01-01T00:00:00Z`) of a wall-clock time.
fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// `{"error": {"message", "type", "param", "code"}}`.
fn api_error(message: &str, kind: &str, error_code: Option<&str>) -> Vec<u8> {
    json!({"error": {"message": message, "type": kind, "param": null, "code": error_code}})
        .to_string()
        .into_bytes()
}

/// A whole HTTP answer, built before it is sent (so it can be recorded first).
struct Out {
    status: u16,
    headers: Headers,
    body: Vec<u8>,
}

impl Out {
    fn send(self, res: &mut Responder<'_>) {
        let _ = res.send(self.status, &self.headers, &self.body);
    }
}

fn api_error_out(
    status: u16,
    message: &str,
    error_code: Option<&str>,
    extra: &[(&str, &str)],
) -> Out {
    let kind = if status >= 500 {
        "server_error"
    } else {
        "invalid_request_error"
    };
    let mut h = headers(extra);
    let _ = h.append("Content-Type", "application/json");
    Out {
        status,
        headers: h,
        body: api_error(message, kind, error_code),
    }
}

fn send_api_error(
    res: &mut Responder<'_>,
    status: u16,
    message: &str,
    error_code: Option<&str>,
    extra: &[(&str, &str)],
) {
    api_error_out(status, message, error_code, extra).send(res);
}

fn json_out(status: u16, body: &Value) -> Out {
    Out {
        status,
        headers: headers(&[("Content-Type", "application/json")]),
        body: body.to_string().into_bytes(),
    }
}

fn send_json(res: &mut Responder<'_>, status: u16, body: &Value) {
    json_out(status, body).send(res);
}

fn fault_out(fault: &Fault) -> Out {
    let default_code = match fault.status {
        429 => Some("rate_limit_exceeded"),
        401 | 403 => Some("tunnel_use_forbidden"),
        _ => None,
    };
    let error_code = fault.code.as_deref().or(default_code);
    let mut extra: Vec<(&str, &str)> = Vec::new();
    if let Some(ra) = &fault.retry_after {
        extra.push(("Retry-After", ra));
    }
    api_error_out(
        fault.status,
        "injected failure (mcpwire dev control-plane)",
        error_code,
        &extra,
    )
}

fn send_fault(res: &mut Responder<'_>, fault: &Fault) {
    fault_out(fault).send(res);
}

impl ControlPlane {
    /// A control plane with `config`, not yet serving.
    pub fn new(config: Config) -> Arc<ControlPlane> {
        let state = State {
            cloudflare_runtime_token: config.cloudflare_runtime_token.clone(),
            ..State::default()
        };
        Arc::new(ControlPlane {
            config,
            state: Mutex::new(state),
            commands_cv: Condvar::new(),
            responses_cv: Condvar::new(),
            shutdown: Shutdown::new(),
        })
    }

    /// Starts serving on `addr` (port 0 picks one).
    pub fn start(config: Config, addr: impl ToSocketAddrs) -> io::Result<ControlPlaneHandle> {
        let mut limits = config.limits;
        limits.max_body = limits
            .max_body
            .max(config.max_response_body.saturating_mul(2));
        let plane = ControlPlane::new(config);
        let http = HttpServer::start(addr, plane.clone(), limits, plane.shutdown.clone())?;
        Ok(ControlPlaneHandle { http, plane })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Wakes every waiting poll and MCP request and refuses new work.
    pub fn stop(&self) {
        let mut st = self.state();
        st.stopped = true;
        st.pending.clear();
        drop(st);
        self.shutdown.stop();
        self.commands_cv.notify_all();
        self.responses_cv.notify_all();
    }

    /// Queues raw command objects verbatim, all under one lock (so one poll can take them
    /// all). A command with a string `request_id` becomes pending: response POSTs for it are
    /// accepted (checked against its string `shard_token`, when it has one). Returns each
    /// command's request id.
    pub fn enqueue_raw(
        &self,
        tunnel_id: &str,
        commands: Vec<Value>,
    ) -> Result<Vec<Option<String>>, EnqueueError> {
        let texts = commands
            .iter()
            .enumerate()
            .map(|(i, c)| {
                RawValue::from_string(c.to_string()).map_err(|_| EnqueueError::NotAnObject(i))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.enqueue_raw_texts(tunnel_id, texts)
    }

    /// [`ControlPlane::enqueue_raw`] for command texts, delivered byte for byte.
    pub fn enqueue_raw_texts(
        &self,
        tunnel_id: &str,
        commands: Vec<Box<RawValue>>,
    ) -> Result<Vec<Option<String>>, EnqueueError> {
        if !valid_tunnel_id(tunnel_id) {
            return Err(EnqueueError::BadTunnelId);
        }
        let mut parsed = Vec::with_capacity(commands.len());
        for (i, text) in commands.iter().enumerate() {
            match serde_json::from_str::<Value>(text.get()) {
                Ok(Value::Object(m)) => parsed.push(m),
                _ => return Err(EnqueueError::NotAnObject(i)),
            }
        }
        let mut st = self.state();
        if st.stopped {
            return Err(EnqueueError::Stopped);
        }
        if st.pending_count(tunnel_id) + commands.len() > self.config.max_pending {
            return Err(EnqueueError::Full);
        }
        let mut ids = Vec::with_capacity(commands.len());
        for (command, fields) in commands.into_iter().zip(parsed) {
            let request_id = fields
                .get("request_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let channel = match fields.get("channel").and_then(Value::as_str) {
                Some(c) if !c.is_empty() => c.to_owned(),
                _ => DEFAULT_CHANNEL.to_owned(),
            };
            if let Some(id) = &request_id {
                st.pending.insert(
                    (tunnel_id.to_owned(), id.clone()),
                    Pending {
                        channel: channel.clone(),
                        shard_token: fields
                            .get("shard_token")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        expires: None,
                        waiter: None,
                    },
                );
            }
            ids.push(request_id.clone());
            st.queues
                .entry(tunnel_id.to_owned())
                .or_default()
                .push_back(Queued {
                    channel,
                    request_id,
                    command,
                });
        }
        drop(st);
        self.commands_cv.notify_all();
        Ok(ids)
    }

    /// Adds a fault for `endpoint`; faults are used in the order added.
    pub fn inject_fault(&self, endpoint: Endpoint, fault: Fault) {
        self.state().faults.push((endpoint, fault));
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Polls return up to `batch` commands whatever their `limit` (`None`: honour `limit`).
    pub fn set_poll_batch(&self, batch: Option<usize>) {
        self.state().poll_batch = batch;
    }

    /// Serves (or, with `None`, stops serving) the managed Cloudflare runtime.
    pub fn set_cloudflare_runtime_token(&self, token: Option<ApiKey>) {
        self.state().cloudflare_runtime_token = token;
    }

    /// Every response POST received for `tunnel_id`, in order.
    pub fn responses(&self, tunnel_id: &str) -> Vec<RecordedResponse> {
        self.state()
            .responses
            .iter()
            .filter(|r| r.tunnel_id == tunnel_id)
            .cloned()
            .collect()
    }

    /// Waits up to `timeout` until a response POST for `tunnel_id` matching `pred` is recorded;
    /// returns the first such one.
    pub fn wait_for_response(
        &self,
        tunnel_id: &str,
        timeout: Duration,
        pred: impl Fn(&RecordedResponse) -> bool,
    ) -> Option<RecordedResponse> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state();
        loop {
            if let Some(r) = st
                .responses
                .iter()
                .find(|r| r.tunnel_id == tunnel_id && pred(r))
            {
                return Some(r.clone());
            }
            let now = Instant::now();
            if now >= deadline || st.stopped {
                return None;
            }
            st = self
                .responses_cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Every poll received for `tunnel_id`, in order.
    pub fn polls(&self, tunnel_id: &str) -> Vec<RecordedPoll> {
        self.state()
            .polls
            .iter()
            .filter(|p| p.tunnel_id == tunnel_id)
            .cloned()
            .collect()
    }

    /// The request ids pending for `tunnel_id` (sorted), and how many commands are queued.
    pub fn pending(&self, tunnel_id: &str) -> (Vec<String>, usize) {
        let st = self.state();
        let mut ids: Vec<String> = st
            .pending
            .keys()
            .filter(|(t, _)| t == tunnel_id)
            .map(|(_, id)| id.clone())
            .collect();
        ids.sort();
        (ids, st.queues.get(tunnel_id).map_or(0, VecDeque::len))
    }

    fn record_response(&self, st: &mut State, mut r: RecordedResponse) {
        r.seq = st.next_seq();
        if st.responses.len() >= self.config.record_limit {
            st.responses.pop_front();
        }
        st.responses.push_back(r);
        self.responses_cv.notify_all();
    }

    /// `Some(401 answer)` unless the request carries the bearer key.
    fn auth_failure(&self, req: &Request) -> Option<Out> {
        if self
            .config
            .api_key
            .matches_authorization(req.headers.get("Authorization"))
        {
            return None;
        }
        Some(api_error_out(
            401,
            "missing or wrong API key (send Authorization: Bearer <key>)",
            Some("invalid_api_key"),
            &[],
        ))
    }

    fn authorized(&self, req: &Request, res: &mut Responder<'_>) -> bool {
        match self.auth_failure(req) {
            None => true,
            Some(out) => {
                out.send(res);
                false
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Tunnel client endpoints
    // -----------------------------------------------------------------------------------------

    fn metadata(&self, req: &Request, res: &mut Responder<'_>, tunnel: &str) {
        if !self.authorized(req, res) {
            return;
        }
        if let Some(f) = self.state().take_fault(Endpoint::Metadata, None) {
            return send_fault(res, &f);
        }
        send_json(
            res,
            200,
            &json!({
                "id": tunnel,
                "name": "mcpwire dev tunnel",
                "description": "A tunnel served by mcpwire dev control-plane"
            }),
        );
    }

    fn cloudflare_runtime(&self, req: &Request, res: &mut Responder<'_>, tunnel: &str) {
        let no_store = [("Cache-Control", "no-store"), ("Pragma", "no-cache")];
        if !self.authorized(req, res) {
            return;
        }
        let (fault, token) = {
            let mut st = self.state();
            (
                st.take_fault(Endpoint::CloudflareRuntime, None),
                st.cloudflare_runtime_token.clone(),
            )
        };
        if let Some(f) = fault {
            return send_fault(res, &f);
        }
        match token {
            None => send_api_error(
                res,
                404,
                "this tunnel has no managed Cloudflare runtime material",
                None,
                &no_store,
            ),
            Some(token) => {
                let body = json!({
                    "cloudflare_tunnel": {
                        "tunnel_id": format!("cf-{tunnel}"),
                        "name": format!("mcpwire-dev-{tunnel}"),
                        "account_id": "mcpwire-dev-account",
                        "created_at": null
                    },
                    "runtime_token": token.expose()
                });
                let mut h = headers(&no_store);
                let _ = h.append("Content-Type", "application/json");
                let _ = res.send(200, &h, body.to_string().as_bytes());
            }
        }
    }

    fn poll(&self, req: &Request, res: &mut Responder<'_>, tunnel: &str) {
        let mut record = RecordedPoll {
            seq: 0,
            tunnel_id: tunnel.to_owned(),
            query: req.query.clone(),
            headers: redacted(&req.headers),
            status: 0,
            delivered: Vec::new(),
        };
        let out = self.poll_inner(req, tunnel, &mut record);
        record.status = out.status;
        {
            // Recorded before it is answered, so whoever got the answer finds the record.
            let mut st = self.state();
            record.seq = st.next_seq();
            if st.polls.len() >= self.config.record_limit {
                st.polls.pop_front();
            }
            st.polls.push_back(record);
        }
        out.send(res);
    }

    fn poll_inner(&self, req: &Request, tunnel: &str, record: &mut RecordedPoll) -> Out {
        if let Some(out) = self.auth_failure(req) {
            return out;
        }
        if let Some(f) = self.state().take_fault(Endpoint::Poll, None) {
            return fault_out(&f);
        }
        let limit = match req.query_values("limit").last().map(|v| v.parse::<usize>()) {
            None => MAX_POLL_LIMIT,
            Some(Ok(n)) if (1..=MAX_POLL_LIMIT).contains(&n) => n,
            Some(_) => {
                return api_error_out(400, "limit must be an integer from 1 to 25", None, &[])
            }
        };
        let wait = match req
            .query_values("timeout_ms")
            .last()
            .map(|v| v.parse::<u64>())
        {
            None => self.config.max_poll_wait,
            Some(Ok(n)) if n >= 1 => Duration::from_millis(n).min(self.config.max_poll_wait),
            Some(_) => {
                return api_error_out(400, "timeout_ms must be a positive integer", None, &[])
            }
        };
        let channels = req.query_values("channel");
        let deadline = Instant::now() + wait;
        let mut st = self.state();
        loop {
            if st.stopped {
                return api_error_out(
                    503,
                    "the control plane is stopping",
                    None,
                    &[("Retry-After", "1")],
                );
            }
            st.sweep(Instant::now());
            let batch = st.poll_batch.unwrap_or(limit);
            let taken = take_commands(&mut st, tunnel, &channels, batch);
            if !taken.is_empty() {
                record.delivered = taken.iter().map(|c| c.request_id.clone()).collect();
                let texts: Vec<&str> = taken.iter().map(|c| c.command.get()).collect();
                return Out {
                    status: 200,
                    headers: headers(&[("Content-Type", "application/json")]),
                    body: format!("{{\"commands\":[{}]}}", texts.join(",")).into_bytes(),
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Out {
                    status: 204,
                    headers: Headers::new(),
                    body: Vec::new(),
                };
            }
            st = self
                .commands_cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn response(&self, req: &Request, res: &mut Responder<'_>, tunnel: &str) {
        let shard = req.headers.get(SHARD_TOKEN_HEADER).map(str::to_owned);
        let lenient: Option<Value> = serde_json::from_slice(&req.body).ok();
        let str_member = |name: &str| {
            lenient
                .as_ref()
                .and_then(|v| v.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let mut record = RecordedResponse {
            seq: 0,
            tunnel_id: tunnel.to_owned(),
            request_id: str_member("request_id"),
            resp_type: str_member("resp_type").or_else(|| {
                lenient
                    .as_ref()
                    .map(|_| RespType::JsonrpcResponse.as_str().to_owned())
            }),
            shard_token: shard.clone(),
            headers: redacted(&req.headers),
            body: String::from_utf8_lossy(&req.body).into_owned(),
            status: 0,
        };
        let (out, handoff) =
            self.response_inner(req, tunnel, shard.as_deref(), lenient.as_ref(), &record);
        record.status = out.status;
        // Recorded first, then handed to the waiting MCP request, then answered: whoever sees
        // an effect of this POST finds it in the record.
        {
            let mut st = self.state();
            self.record_response(&mut st, record);
        }
        if let Some((waiter, delivery)) = handoff {
            // A waiter that went away, or a full buffer, loses this delivery only.
            let _ = waiter.try_send(delivery);
        }
        out.send(res);
    }

    fn response_inner(
        &self,
        req: &Request,
        tunnel: &str,
        shard: Option<&str>,
        lenient: Option<&Value>,
        record: &RecordedResponse,
    ) -> (Out, Option<(mpsc::SyncSender<Delivery>, Delivery)>) {
        if let Some(out) = self.auth_failure(req) {
            return (out, None);
        }
        if let Some(f) = self
            .state()
            .take_fault(Endpoint::Response, record.resp_type.as_deref())
        {
            return (fault_out(&f), None);
        }
        if req.body.len() > self.config.max_response_body {
            return (
                api_error_out(
                    413,
                    "the response body is too large",
                    Some("request_body_too_large"),
                    &[],
                ),
                None,
            );
        }
        // `channel: null` reads like an absent channel (`main`), as in polled commands.
        let decoded = match lenient {
            Some(Value::Object(m)) if m.get("channel").is_some_and(Value::is_null) => {
                let mut m = m.clone();
                m.remove("channel");
                serde_json::from_value::<ResponsePayload>(Value::Object(m))
            }
            _ => serde_json::from_slice::<ResponsePayload>(&req.body),
        };
        let payload: ResponsePayload = match decoded {
            Ok(p) if lenient.is_some_and(Value::is_object) => p,
            _ => {
                return (
                    api_error_out(
                        400,
                        "the body is not a valid TunnelResponsePayload JSON object",
                        Some("invalid_json_payload"),
                        &[],
                    ),
                    None,
                );
            }
        };
        if !valid_channel(&payload.channel) {
            return (
                api_error_out(
                    400,
                    "the channel name holds unsupported characters",
                    Some("invalid_channel_format"),
                    &[],
                ),
                None,
            );
        }
        let channel_sent = lenient
            .and_then(|v| v.get("channel"))
            .is_some_and(|c| !c.is_null());
        let key = (tunnel.to_owned(), payload.request_id.clone());
        let mut st = self.state();
        st.sweep(Instant::now());
        let Some(pending) = st.pending.get(&key) else {
            return (
                api_error_out(
                    404,
                    "no pending request has this request_id",
                    Some("pending_request_not_found"),
                    &[],
                ),
                None,
            );
        };
        let shard_ok = pending
            .shard_token
            .as_deref()
            .is_none_or(|t| shard == Some(t));
        let channel_ok = !channel_sent || pending.channel == payload.channel;
        if !shard_ok || !channel_ok {
            return (
                api_error_out(
                    401,
                    "the shard token or channel does not match the polled command",
                    Some("tunnel_request_mismatch"),
                    &[],
                ),
                None,
            );
        }
        if payload.resp_type == RespType::JsonrpcNotify {
            let Some(json) = payload.resp_json.clone() else {
                return (
                    api_error_out(
                        400,
                        "a jsonrpc_notify needs resp_json",
                        Some("invalid_json_payload"),
                        &[],
                    ),
                    None,
                );
            };
            let handoff = pending.waiter.clone().map(|w| (w, Delivery::Notify(json)));
            return (json_out(200, &json!({"status": "ok"})), handoff);
        }
        let handoff = st
            .pending
            .remove(&key)
            .and_then(|p| p.waiter)
            .map(|w| (w, Delivery::Terminal(payload)));
        (json_out(200, &json!({"status": "ok"})), handoff)
    }

    // -----------------------------------------------------------------------------------------
    // The MCP endpoint
    // -----------------------------------------------------------------------------------------

    fn mcp_post(&self, req: &Request, res: &mut Responder<'_>, tunnel: &str) {
        let body: Value = match serde_json::from_slice(&req.body) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return send_api_error(
                    res,
                    400,
                    "the MCP request body is not a JSON object",
                    Some("invalid_json_payload"),
                    &[],
                )
            }
        };
        // The body travels byte for byte (the JSON-RPC payload is never re-encoded).
        let text = String::from_utf8_lossy(&req.body).trim().to_owned();
        let raw = match RawValue::from_string(text) {
            Ok(r) => r,
            Err(_) => {
                return send_api_error(
                    res,
                    400,
                    "the MCP request body is not JSON",
                    Some("invalid_json_payload"),
                    &[],
                )
            }
        };
        let id: Option<Id> = body
            .get("id")
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        let mut forwarded = std::collections::BTreeMap::<String, Vec<String>>::new();
        for (name, value) in req.headers.iter() {
            let lower = name.to_ascii_lowercase();
            if lower.starts_with("mcp-") || lower == "last-event-id" {
                forwarded
                    .entry(name.to_owned())
                    .or_default()
                    .push(value.to_owned());
            }
        }
        self.mcp_forward(req, res, tunnel, "jsonrpc", Some(raw), forwarded, id);
    }

    fn mcp_delete(&self, req: &Request, res: &mut Responder<'_>, tunnel: &str) {
        let Some(sid) = req.headers.get(SESSION_ID_HEADER) else {
            return send_api_error(
                res,
                400,
                "DELETE needs the Mcp-Session-Id header of the session to end",
                Some("missing_mcp_session_id"),
                &[],
            );
        };
        let mut forwarded = std::collections::BTreeMap::new();
        forwarded.insert(SESSION_ID_HEADER.to_owned(), vec![sid.to_owned()]);
        self.mcp_forward(
            req,
            res,
            tunnel,
            "session_termination",
            None,
            forwarded,
            None,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn mcp_forward(
        &self,
        req: &Request,
        res: &mut Responder<'_>,
        tunnel: &str,
        command_type: &str,
        jsonrpc: Option<Box<RawValue>>,
        forwarded: std::collections::BTreeMap<String, Vec<String>>,
        id: Option<Id>,
    ) {
        let channel = req
            .query_values("channel")
            .last()
            .cloned()
            .unwrap_or_else(|| DEFAULT_CHANNEL.to_owned());
        if !valid_channel(&channel) {
            return send_api_error(
                res,
                400,
                "the channel name holds unsupported characters",
                Some("invalid_channel_format"),
                &[],
            );
        }
        let timeout = req
            .headers
            .get(RESPONSE_TIMEOUT_HEADER)
            .map(str::to_owned)
            .or_else(|| self.config.response_timeout.clone());
        let now = Instant::now();
        let expires = match timeout.as_deref().map(response_timeout::parse) {
            Some(Ok(d)) => now
                .checked_add(d)
                .and_then(|t| t.checked_add(self.config.expiry_grace))
                .unwrap_or(now + self.config.mcp_wait),
            _ => now + self.config.mcp_wait,
        };
        let request_id = random_token("req_");
        let shard_token = random_token("shard_");
        let command = WireCommand {
            request_id: &request_id,
            shard_token: &shard_token,
            command_type,
            channel: &channel,
            created_at: rfc3339(SystemTime::now()),
            response_timeout: timeout.as_deref(),
            headers: forwarded,
            jsonrpc: jsonrpc.as_deref(),
        };
        let command = match serde_json::to_string(&command).map(RawValue::from_string) {
            Ok(Ok(c)) => c,
            _ => {
                return send_api_error(res, 500, "the command could not be encoded", None, &[]);
            }
        };
        let (tx, rx) = mpsc::sync_channel::<Delivery>(1024);
        {
            let mut st = self.state();
            st.sweep(now);
            if st.stopped {
                drop(st);
                return send_api_error(
                    res,
                    503,
                    "the control plane is stopping",
                    None,
                    &[("Retry-After", "1")],
                );
            }
            if st.pending_count(tunnel) >= self.config.max_pending {
                drop(st);
                return send_api_error(
                    res,
                    503,
                    "the tunnel's queue is full",
                    None,
                    &[("Retry-After", "1")],
                );
            }
            st.pending.insert(
                (tunnel.to_owned(), request_id.clone()),
                Pending {
                    channel: channel.clone(),
                    shard_token: Some(shard_token),
                    expires: Some(expires),
                    waiter: Some(tx),
                },
            );
            st.queues
                .entry(tunnel.to_owned())
                .or_default()
                .push_back(Queued {
                    channel,
                    request_id: Some(request_id.clone()),
                    command,
                });
        }
        self.commands_cv.notify_all();
        self.relay(res, tunnel, &request_id, rx, expires, id.as_ref());
    }

    /// Turns the tunnel client's posts for one command into the MCP client's HTTP response.
    fn relay(
        &self,
        res: &mut Responder<'_>,
        tunnel: &str,
        request_id: &str,
        rx: mpsc::Receiver<Delivery>,
        expires: Instant,
        id: Option<&Id>,
    ) {
        let mut broken = false;
        loop {
            let now = Instant::now();
            if now >= expires {
                break;
            }
            // Wake now and then to notice an MCP client that went away.
            let slice = (expires - now).min(Duration::from_millis(250));
            match rx.recv_timeout(slice) {
                Ok(Delivery::Notify(json)) => {
                    if broken {
                        continue;
                    }
                    if !res.is_streaming() {
                        let h = headers(&[
                            ("Content-Type", "text/event-stream"),
                            ("Cache-Control", "no-cache"),
                            ("X-Accel-Buffering", "no"),
                        ]);
                        broken = res.start_stream(200, &h).is_err();
                    }
                    let event = format!("event: message\ndata: {}\n\n", json.get());
                    broken = broken || res.write_chunk(event.as_bytes()).is_err();
                }
                Ok(Delivery::Terminal(p)) => return answer_terminal(res, p),
                Err(RecvTimeoutError::Timeout) => {
                    if !res.is_streaming() && res.peer_gone() {
                        // Nobody to answer; the command stays pending until it expires.
                        return res.abandon();
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    if res.is_streaming() {
                        let _ = res.finish();
                        return res.close_after();
                    }
                    return send_api_error(
                        res,
                        503,
                        "the control plane is stopping",
                        None,
                        &[("Retry-After", "1")],
                    );
                }
            }
        }
        self.state().drop_command(tunnel, request_id);
        if res.is_streaming() {
            let _ = res.finish();
            return res.close_after();
        }
        let error = ErrorObject {
            code: code::INTERNAL_ERROR,
            message: "Gateway Timeout: the tunnel client did not answer in time (mcpwire dev control-plane)".to_owned(),
            data: None,
        };
        let _ = res.send(
            504,
            &headers(&[("Content-Type", "application/json")]),
            jsonrpc::error_response(id, &error).as_bytes(),
        );
    }

    // -----------------------------------------------------------------------------------------
    // Admin
    // -----------------------------------------------------------------------------------------

    fn admin(&self, req: &Request, res: &mut Responder<'_>, rest: &[&str]) {
        if !self.authorized(req, res) {
            return;
        }
        let body: Value = if req.body.is_empty() {
            Value::Null
        } else {
            match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(_) => {
                    return send_api_error(
                        res,
                        400,
                        "the admin request body is not JSON",
                        None,
                        &[],
                    )
                }
            }
        };
        match (req.method.as_str(), rest) {
            ("POST", ["tunnels", tunnel, "commands"]) => {
                #[derive(serde::Deserialize)]
                struct Batch {
                    commands: Vec<Box<RawValue>>,
                }
                let Ok(batch) = serde_json::from_slice::<Batch>(&req.body) else {
                    return send_api_error(res, 400, "expected {\"commands\": [...]}", None, &[]);
                };
                match self.enqueue_raw_texts(tunnel, batch.commands) {
                    Ok(ids) => send_json(res, 200, &json!({"request_ids": ids})),
                    Err(e) => {
                        let status = if matches!(e, EnqueueError::Full | EnqueueError::Stopped) {
                            503
                        } else {
                            400
                        };
                        send_api_error(res, status, &e.to_string(), None, &[])
                    }
                }
            }
            ("GET", ["tunnels", tunnel, "responses"]) => {
                let wanted = req.query_values("request_id").last().cloned();
                let terminal = req
                    .query_values("terminal")
                    .last()
                    .is_some_and(|v| v == "1" || v == "true");
                let matches = |r: &RecordedResponse| {
                    wanted
                        .as_ref()
                        .is_none_or(|w| r.request_id.as_ref() == Some(w))
                        && (!terminal || r.is_accepted_terminal())
                };
                if let Some(ms) = req
                    .query_values("wait_ms")
                    .last()
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    let wait = Duration::from_millis(ms).min(self.config.max_poll_wait);
                    let _ = self.wait_for_response(tunnel, wait, matches);
                }
                let list: Vec<RecordedResponse> = self
                    .responses(tunnel)
                    .into_iter()
                    .filter(|r| matches(r))
                    .collect();
                send_json(res, 200, &json!({"responses": list}));
            }
            ("GET", ["tunnels", tunnel, "polls"]) => {
                send_json(res, 200, &json!({"polls": self.polls(tunnel)}));
            }
            ("GET", ["tunnels", tunnel, "pending"]) => {
                let (ids, queued) = self.pending(tunnel);
                send_json(res, 200, &json!({"pending": ids, "queued": queued}));
            }
            ("POST", ["faults"]) => match parse_fault(&body) {
                Ok((endpoint, fault)) => {
                    self.inject_fault(endpoint, fault);
                    send_json(res, 200, &json!({"status": "ok"}));
                }
                Err(why) => send_api_error(res, 400, why, None, &[]),
            },
            ("DELETE", ["faults"]) => {
                self.clear_faults();
                send_json(res, 200, &json!({"status": "ok"}));
            }
            ("POST", ["settings"]) => {
                match body.get("poll_batch") {
                    Some(Value::Null) => self.set_poll_batch(None),
                    Some(v) => match v.as_u64().filter(|n| (1..=1000).contains(n)) {
                        Some(n) => self.set_poll_batch(Some(n as usize)),
                        None => {
                            return send_api_error(
                                res,
                                400,
                                "poll_batch must be an integer from 1 to 1000, or null",
                                None,
                                &[],
                            )
                        }
                    },
                    None => {}
                }
                send_json(res, 200, &json!({"status": "ok"}));
            }
            ("POST", ["cloudflare-runtime"]) => match body.get("runtime_token") {
                Some(Value::Null) => {
                    self.set_cloudflare_runtime_token(None);
                    send_json(res, 200, &json!({"status": "ok"}));
                }
                Some(Value::String(t)) => match ApiKey::new(t.clone()) {
                    Ok(k) => {
                        self.set_cloudflare_runtime_token(Some(k));
                        send_json(res, 200, &json!({"status": "ok"}));
                    }
                    Err(e) => send_api_error(res, 400, &e.to_string(), None, &[]),
                },
                _ => send_api_error(
                    res,
                    400,
                    "expected {\"runtime_token\": \"...\" | null}",
                    None,
                    &[],
                ),
            },
            _ => send_api_error(res, 404, "no such admin endpoint", None, &[]),
        }
    }
}

fn parse_fault(body: &Value) -> Result<(Endpoint, Fault), &'static str> {
    let endpoint = body
        .get("endpoint")
        .and_then(Value::as_str)
        .and_then(Endpoint::parse)
        .ok_or("endpoint must be one of poll, response, metadata, cloudflare_runtime")?;
    let status = body
        .get("status")
        .and_then(Value::as_u64)
        .filter(|s| (200..=599).contains(s))
        .ok_or("status must be an integer from 200 to 599")? as u16;
    let text = |name: &str| -> Result<Option<String>, &'static str> {
        match body.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) if name == "retry_after" => Ok(Some(n.to_string())),
            Some(_) => Err("retry_after, code and resp_type must be strings"),
        }
    };
    let count = match body.get("count") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or("count must be a positive integer")?,
        ),
    };
    Ok((
        endpoint,
        Fault {
            status,
            retry_after: text("retry_after")?,
            count,
            code: text("code")?,
            resp_type: text("resp_type")?,
        },
    ))
}

/// Removes up to `n` queued commands of `tunnel` on `channels` (every channel when empty).
fn take_commands(st: &mut State, tunnel: &str, channels: &[String], n: usize) -> Vec<Queued> {
    let Some(q) = st.queues.get_mut(tunnel) else {
        return Vec::new();
    };
    let mut taken = Vec::new();
    let mut kept = VecDeque::with_capacity(q.len());
    while let Some(c) = q.pop_front() {
        if taken.len() < n && (channels.is_empty() || channels.contains(&c.channel)) {
            taken.push(c);
        } else {
            kept.push_back(c);
        }
    }
    *q = kept;
    taken
}

/// Answers the MCP client with a terminal response (the last SSE event when streaming).
fn answer_terminal(res: &mut Responder<'_>, p: ResponsePayload) {
    if res.is_streaming() {
        if let Some(json) = &p.resp_json {
            let event = format!("event: message\ndata: {}\n\n", json.get());
            let _ = res.write_chunk(event.as_bytes());
        }
        let _ = res.finish();
        return;
    }
    // The contract's status mapping: informational and unknown statuses become 502.
    let status = match p.resp_code {
        200..=599 => p.resp_code,
        _ => 502,
    };
    let mut h = Headers::new();
    for (name, values) in &p.resp_headers {
        for v in values {
            let _ = h.append(name.as_str(), v.as_str());
        }
    }
    match &p.resp_json {
        Some(json) => {
            if !h.contains("Content-Type") {
                let _ = h.append("Content-Type", "application/json");
            }
            let _ = res.send(status, &h, json.get().as_bytes());
        }
        None => {
            h.remove("Content-Type");
            let _ = res.send(status, &h, b"");
        }
    }
}

impl Handler for ControlPlane {
    fn handle(&self, req: &Request, res: &mut Responder<'_>) {
        let segments = req.segments();
        match (req.method.as_str(), segments.as_slice()) {
            (_, ["v1", "tunnels", tunnel, ..]) | (_, ["v1", "mcp", tunnel])
                if !valid_tunnel_id(tunnel) =>
            {
                send_api_error(
                    res,
                    400,
                    "the tunnel id must be 1 to 128 of A-Z a-z 0-9 _ -",
                    Some("invalid_tunnel_id_format"),
                    &[],
                )
            }
            ("GET", ["v1", "tunnels", tunnel]) => self.metadata(req, res, tunnel),
            ("GET", ["v1", "tunnels", tunnel, "cloudflare", "runtime"]) => {
                self.cloudflare_runtime(req, res, tunnel)
            }
            ("GET", ["v1", "tunnels", tunnel, "poll"]) => self.poll(req, res, tunnel),
            ("POST", ["v1", "tunnels", tunnel, "response"]) => self.response(req, res, tunnel),
            ("POST", ["v1", "mcp", tunnel]) => self.mcp_post(req, res, tunnel),
            ("DELETE", ["v1", "mcp", tunnel]) => self.mcp_delete(req, res, tunnel),
            (_, ["v1", "mcp", _]) => {
                let _ = res.send(405, &headers(&[("Allow", "POST, DELETE")]), b"");
            }
            (_, ["v1", "tunnels", _, "poll"])
            | (_, ["v1", "tunnels", _])
            | (_, ["v1", "tunnels", _, "cloudflare", "runtime"]) => {
                let _ = res.send(405, &headers(&[("Allow", "GET")]), b"");
            }
            (_, ["v1", "tunnels", _, "response"]) => {
                let _ = res.send(405, &headers(&[("Allow", "POST")]), b"");
            }
            (_, ["admin", rest @ ..]) => self.admin(req, res, rest),
            _ => send_api_error(res, 404, "no such endpoint", None, &[]),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use mcpwire_core::tunnel::wire::{decode_poll_body, CommandKind};

    #[test]
    fn rfc3339_formats_utc_dates() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600 + 3661);
        assert_eq!(rfc3339(t), "2026-01-01T01:01:01Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn a_generated_command_decodes_with_the_core_poll_decoder() {
        let raw = RawValue::from_string(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#.into())
            .unwrap();
        let mut h = std::collections::BTreeMap::new();
        h.insert("Mcp-Method".to_owned(), vec!["tools/list".to_owned()]);
        let c = WireCommand {
            request_id: "req_1",
            shard_token: "shard_1",
            command_type: "jsonrpc",
            channel: "main",
            created_at: rfc3339(SystemTime::now()),
            response_timeout: Some("30s"),
            headers: h,
            jsonrpc: Some(&raw),
        };
        let body = format!("{{\"commands\":[{}]}}", serde_json::to_string(&c).unwrap());
        let decoded = decode_poll_body(body.as_bytes()).unwrap();
        let cmd = decoded[0].as_ref().unwrap();
        assert_eq!(cmd.request_id, "req_1");
        assert_eq!(cmd.shard_token.as_deref(), Some("shard_1"));
        assert_eq!(
            cmd.response_timeout.duration(),
            Some(Duration::from_secs(30))
        );
        assert_eq!(cmd.headers.get("mcp-method"), Some("tools/list"));
        assert!(matches!(&cmd.kind, CommandKind::JsonRpc(p) if p.get() == raw.get()));
    }

    #[test]
    fn a_counted_fault_is_used_up_and_a_filtered_one_waits_for_its_type() {
        let mut st = State::default();
        st.faults.push((
            Endpoint::Response,
            Fault {
                resp_type: Some("jsonrpc_notify".into()),
                ..Fault::new(429, Some("1"), Some(1))
            },
        ));
        st.faults
            .push((Endpoint::Response, Fault::new(503, None, Some(2))));
        assert_eq!(st.take_fault(Endpoint::Poll, None), None);
        assert_eq!(
            st.take_fault(Endpoint::Response, Some("jsonrpc_response"))
                .unwrap()
                .status,
            503
        );
        assert_eq!(
            st.take_fault(Endpoint::Response, Some("jsonrpc_notify"))
                .unwrap()
                .status,
            429
        );
        assert_eq!(
            st.take_fault(Endpoint::Response, Some("jsonrpc_notify"))
                .unwrap()
                .status,
            503
        );
        assert_eq!(st.take_fault(Endpoint::Response, None), None);
    }

    #[test]
    fn tunnel_ids_and_channels_are_checked() {
        assert!(valid_tunnel_id("tunnel_0123abc"));
        assert!(!valid_tunnel_id(""));
        assert!(!valid_tunnel_id("a/b"));
        assert!(!valid_tunnel_id(&"x".repeat(129)));
        assert!(valid_channel("main") && valid_channel("side-1_a"));
        assert!(!valid_channel("Main") && !valid_channel("") && !valid_channel("a b"));
    }
}

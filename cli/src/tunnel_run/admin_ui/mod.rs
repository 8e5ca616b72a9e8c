//! The operator's page: a live admin UI for `mcpwire tunnel run`, served at `/` on the health
//! listener. Overview, recent commands, logs, metrics charts and Harpoon, from the tunnel's
//! own report stream (the [`Status`] snapshot and its [`Activity`] feeds, the [`Logger`]'s
//! recent lines), never a second bookkeeping.
//!
//! Safe by construction:
//! - only loopback peers with a loopback `Host` (a DNS-rebinding page cannot read it) unless
//!   `--admin-ui.allow-remote`;
//! - state-changing requests (the log level, the diagnostic bundle) are `POST`s that must come
//!   from the page's own origin (`Origin`) and carry the per-process token the page holds;
//! - nothing secret reaches it: records hold ids, names, outcomes and sizes; log lines are the
//!   redacted ones; the configuration shown has no key, token, header value or password;
//! - its assets are in the binary (no build step, no network), with a Content-Security-Policy
//!   that allows only them; the page writes data as text, never as HTML.

pub mod http;
pub mod overview;
pub mod series;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcpwire::tunnel::activity::{Activity, Batch, CommandRecord, HarpoonCallRecord, LogRecord};
use mcpwire::tunnel::log::{Level, Logger};
use mcpwire::tunnel::Status;
use serde_json::{json, Value};

use self::http::{Request, Response};
use self::series::Series;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// The header a state-changing request carries the page's token in.
pub const TOKEN_HEADER: &str = "x-mcpwire-admin-token";

/// The most log lines or commands one answer carries.
pub const MAX_BATCH: usize = 1000;

/// How long an event stream stays silent before it sends a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The admin UI of one running tunnel client.
pub struct AdminUi {
    allow_remote: bool,
    /// Host names besides IP addresses and loopback names that a remote page may be reached
    /// under (`--admin-ui.allowed-host`, lower case, without a port).
    allowed_hosts: Vec<String>,
    /// `None` when the OS gave no randomness: every change is then refused.
    token: Option<String>,
    status: Arc<Status>,
    log: Arc<Logger>,
    series: Arc<Series>,
    overview: overview::Fixed,
    started: Instant,
    /// This process's prefix of event ids, so a page that reconnects to a restarted client
    /// starts over instead of waiting for numbers it saw already.
    epoch: String,
}

/// Which live stream a client follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Finished commands.
    Commands,
    /// Log lines.
    Logs,
}

/// What the admin UI answers.
pub enum Answer {
    /// A whole response.
    Full(Response),
    /// A server-sent event stream of `Stream`, from after the given sequence number.
    Events(Stream, u64),
}

impl AdminUi {
    /// The admin UI for a tunnel that publishes into `status` and logs to `log` (which should
    /// keep its recent lines); `overview` is what the configuration says. Starts the metrics
    /// sampler.
    pub fn new(
        allow_remote: bool,
        allowed_hosts: Vec<String>,
        status: Arc<Status>,
        log: Arc<Logger>,
        overview: overview::Fixed,
    ) -> Arc<Self> {
        let series = Series::start(Arc::clone(&status));
        Arc::new(AdminUi {
            allow_remote,
            allowed_hosts: allowed_hosts
                .iter()
                .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            token: new_token(),
            status,
            log,
            series,
            overview,
            started: Instant::now(),
            epoch: format!("{:08x}", mcpwire::random_seed() as u32),
        })
    }

    /// Whether `path` is the admin UI's.
    pub fn owns(path: &str) -> bool {
        path == "/" || path == "/index.html" || path.starts_with("/admin/")
    }

    /// Answers a request for one of its paths from a peer (`loopback`: the peer is on this
    /// host, over loopback or a Unix socket).
    pub fn handle(&self, req: &Request, loopback: bool) -> Answer {
        if let Some(refusal) = self.refusal(req, loopback) {
            return Answer::Full(refusal);
        }
        let activity: &Activity = self.status.activity();
        let after = req.query_u64("after").unwrap_or(0);
        let page = |body: &str, ctype: &str| Answer::Full(Response::new(200, ctype, body));
        match (req.method.as_str(), req.path.as_str()) {
            ("GET" | "HEAD", "/" | "/index.html") => page(
                &INDEX_HTML.replace("{{TOKEN}}", self.token.as_deref().unwrap_or("")),
                "text/html; charset=utf-8",
            ),
            ("GET" | "HEAD", "/admin/app.js") => page(APP_JS, "text/javascript; charset=utf-8"),
            ("GET" | "HEAD", "/admin/style.css") => page(STYLE_CSS, "text/css; charset=utf-8"),
            ("GET" | "HEAD", "/admin/api/overview") => json_answer(&self.overview_json()),
            ("GET" | "HEAD", "/admin/api/commands") => json_answer(&batch_json(
                &activity.commands.after_at_most(after, MAX_BATCH),
                command_json,
            )),
            ("GET" | "HEAD", "/admin/api/logs") => match self.log.recent() {
                Some(feed) => {
                    json_answer(&batch_json(&feed.after_at_most(after, MAX_BATCH), log_json))
                }
                None => json_answer(&json!({"items": [], "last": 0, "missed": 0})),
            },
            ("GET" | "HEAD", "/admin/api/metrics") => json_answer(&self.series.json()),
            ("GET" | "HEAD", "/admin/api/harpoon") => json_answer(&json!({
                "targets": self.overview.harpoon_targets,
                "calls": batch_json(&activity.harpoon_calls.after_at_most(after, MAX_BATCH), harpoon_json),
            })),
            ("GET", "/admin/events/commands") => {
                Answer::Events(Stream::Commands, self.resume_point(req))
            }
            ("GET", "/admin/events/logs") => Answer::Events(Stream::Logs, self.resume_point(req)),
            ("POST", "/admin/api/log-level") => Answer::Full(self.set_level(req)),
            ("POST", "/admin/api/bundle") => Answer::Full(self.bundle()),
            (
                _,
                "/admin/api/log-level"
                | "/admin/api/bundle"
                | "/admin/events/commands"
                | "/admin/events/logs",
            )
            | ("POST" | "PUT" | "DELETE" | "PATCH", _) => {
                Answer::Full(Response::text(405, "method not allowed\n"))
            }
            _ => Answer::Full(Response::text(404, "not found\n")),
        }
    }

    /// Why a request is refused, if it is: a remote peer or a foreign `Host` (unless remote
    /// access is allowed), and for a `POST` a foreign `Origin` or a wrong token.
    fn refusal(&self, req: &Request, loopback: bool) -> Option<Response> {
        if self.allow_remote {
            // Remote pages too, but only under a name a DNS-rebinding page cannot take: an IP
            // address, a loopback name, or one the operator listed.
            let host_ok = req.header("host").is_some_and(|h| {
                is_loopback_host(h)
                    || host_name(h).parse::<std::net::IpAddr>().is_ok()
                    || self.allowed_hosts.iter().any(|a| *a == host_name(h))
            });
            if !host_ok {
                return Some(Response::text(
                    403,
                    "the admin UI answers remote pages only under an IP address or a name given with --admin-ui.allowed-host\n",
                ));
            }
        } else {
            if !loopback {
                return Some(Response::text(
                    403,
                    "the admin UI answers only on loopback; start with --admin-ui.allow-remote to serve it to other hosts\n",
                ));
            }
            if !req.header("host").is_some_and(is_loopback_host) {
                return Some(Response::text(
                    403,
                    "the admin UI answers only to a loopback Host (localhost, 127.0.0.1, [::1])\n",
                ));
            }
        }
        let host = req.header("host").unwrap_or_default();
        let same_origin = |o: &str| o == format!("http://{host}") || o == format!("https://{host}");
        // Data and live views are for the page itself: a browser says where a request comes
        // from (`Sec-Fetch-Site`, `Origin` on cross-origin requests); another site's request is
        // refused, so it cannot use up the live views or read through a misconfigured proxy.
        if req.path.starts_with("/admin/api/") || req.path.starts_with("/admin/events/") {
            let site_ok = req
                .header("sec-fetch-site")
                .is_none_or(|s| s == "same-origin" || s == "none");
            let origin_ok = req.header("origin").is_none_or(same_origin);
            if !site_ok || !origin_ok {
                return Some(Response::text(
                    403,
                    "cross-origin request refused: the admin UI's data is for its own page\n",
                ));
            }
        }
        if req.method == "POST" {
            let same_origin = req.header("origin").is_some_and(same_origin);
            if !same_origin {
                return Some(Response::text(
                    403,
                    "cross-origin request refused: a change must come from the admin UI's own page\n",
                ));
            }
            let token_ok = match (req.header(TOKEN_HEADER), &self.token) {
                (Some(given), Some(token)) => constant_time_eq(given.as_bytes(), token.as_bytes()),
                _ => false,
            };
            if !token_ok {
                return Some(Response::text(
                    403,
                    "missing or wrong admin token: reload the admin UI's page\n",
                ));
            }
        }
        None
    }

    /// `POST /admin/api/log-level` with `{"level": "debug"}`: changes the running log level.
    fn set_level(&self, req: &Request) -> Response {
        let wanted = serde_json::from_slice::<Value>(&req.body)
            .ok()
            .and_then(|v| v.get("level").and_then(Value::as_str).map(str::to_owned));
        let Some(level) = wanted.as_deref().and_then(Level::parse) else {
            return Response::text(
                400,
                "expected a JSON body {\"level\": \"debug\" | \"info\" | \"warn\" | \"error\"}\n",
            );
        };
        let before = self.log.set_level(level);
        self.log.log(
            Level::Info,
            "log level changed from the admin UI",
            &[("from", &before.as_str()), ("to", &level.as_str())],
        );
        json_response(&json!({"level": level.as_str(), "previous": before.as_str()}))
    }

    /// `POST /admin/api/bundle`: the redacted diagnostic bundle (one JSON file): recent log
    /// lines, a metrics snapshot, the overview and the effective configuration without secrets.
    fn bundle(&self) -> Response {
        let logs = self.log.recent().map_or_else(
            || json!([]),
            |f| batch_json(&f.after(0), log_json)["items"].take(),
        );
        let activity = self.status.activity();
        let body = json!({
            "kind": "mcpwire tunnel diagnostic bundle",
            "generated_at_unix_ms": mcpwire::tunnel::activity::unix_ms_now(),
            "overview": self.overview_json(),
            "configuration": self.overview.configuration,
            "metrics": self.status.get().prometheus(),
            "recent_commands": batch_json(&activity.commands.after(0), command_json)["items"],
            "recent_harpoon_calls": batch_json(&activity.harpoon_calls.after(0), harpoon_json)["items"],
            "logs": logs,
        });
        // The log lines are the redacted ones; every other string is redacted too (each value
        // on its own, so the JSON stays valid whatever a value holds).
        let mut body = body;
        redact_strings(&self.log, &mut body);
        let text = body.to_string();
        let mut r = Response::new(200, "application/json", &text);
        r.headers.push((
            "Content-Disposition",
            format!(
                "attachment; filename=\"mcpwire-diagnostics-{}.json\"",
                mcpwire::tunnel::activity::unix_ms_now() / 1000
            ),
        ));
        r
    }

    /// The overview: the configuration's part and the running state.
    fn overview_json(&self) -> Value {
        let m = self.status.get();
        let mut v = self.overview.summary.clone();
        let commands: serde_json::Map<String, Value> = m
            .commands
            .iter()
            .map(|(k, n)| ((*k).to_owned(), json!(n)))
            .collect();
        let errors: serde_json::Map<String, Value> = m
            .poll_errors_by_kind
            .iter()
            .map(|(k, n)| ((*k).to_owned(), json!(n)))
            .collect();
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "uptime_seconds".into(),
                json!(self.started.elapsed().as_secs()),
            );
            o.insert("log_level".into(), json!(self.log.level().as_str()));
            o.insert("ready".into(), json!(m.not_ready.is_none()));
            o.insert("not_ready_reason".into(), json!(m.not_ready));
            o.insert(
                "control_plane".into(),
                json!({
                    "polls": m.polls,
                    "poll_errors": m.poll_errors,
                    "poll_errors_by_kind": errors,
                    "last_successful_poll_unix": m.last_successful_poll,
                    "backoff_ms": m.poll_backoff_ms,
                }),
            );
            o.insert("cloudflared".into(), json!(m.companion));
            o.insert(
                "load".into(),
                json!({
                    "in_flight": m.in_flight,
                    "queued": m.queued,
                    "forwards_in_flight": m.forwards_in_flight,
                    "posts_in_flight": m.posts_in_flight,
                    "queue_capacity": m.queue_capacity,
                    "worker_capacity": m.worker_capacity,
                }),
            );
            o.insert("commands".into(), Value::Object(commands));
        }
        v
    }

    /// The head of an event stream's response, and its reconnection delay.
    pub const STREAM_HEAD: &'static str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\nretry: 1000\n\n";

    /// The next piece of event stream `stream` after `cursor` (which it advances): the new
    /// items as events (at most [`MAX_BATCH`], a `missed` event first when the reader fell
    /// behind the feed), or `None` when there is nothing new. Never blocks.
    pub fn next_events(&self, stream: Stream, cursor: &mut u64) -> Option<String> {
        let (event, batch) = match stream {
            Stream::Commands => {
                let b = self
                    .status
                    .activity()
                    .commands
                    .after_at_most(*cursor, MAX_BATCH);
                ("command", frames(&b, command_json))
            }
            Stream::Logs => {
                let b = self.log.recent()?.after_at_most(*cursor, MAX_BATCH);
                ("log", frames(&b, log_json))
            }
        };
        let (frames, missed, last) = batch;
        if frames.is_empty() && missed == 0 {
            return None;
        }
        let mut text = String::new();
        if missed > 0 {
            text.push_str(&format!("event: missed\ndata: {{\"count\":{missed}}}\n\n"));
        }
        for (seq, data) in frames {
            text.push_str(&format!(
                "id: {}-{seq}\nevent: {event}\ndata: {data}\n\n",
                self.epoch
            ));
        }
        *cursor = last.max(*cursor);
        Some(text)
    }

    /// Where a (re)connecting event stream resumes: after the `Last-Event-ID` the browser
    /// sends, or the `after` the page asks for, when it is this process's (`epoch-seq`, or the
    /// `epoch` query parameter); from the start otherwise (a restarted client numbers anew).
    fn resume_point(&self, req: &Request) -> u64 {
        if let Some(id) = req.header("last-event-id") {
            return match id.trim().split_once('-') {
                Some((epoch, seq)) if epoch == self.epoch => seq.parse().unwrap_or(0),
                _ => 0,
            };
        }
        let after = req.query_u64("after").unwrap_or(0);
        match req.query_str("epoch") {
            Some(epoch) if epoch != self.epoch => 0,
            _ => after,
        }
    }
}

/// One item as JSON, with its sequence number.
fn numbered<T>(seq: u64, item: &T, to_json: fn(&T) -> Value) -> Value {
    let mut v = to_json(item);
    if let Some(o) = v.as_object_mut() {
        o.insert("seq".into(), json!(seq));
    }
    v
}

/// A batch's items as `(seq, JSON text)`, with how many the reader missed and the newest
/// number sent.
fn frames<T>(b: &Batch<T>, to_json: fn(&T) -> Value) -> (Vec<(u64, String)>, u64, u64) {
    let items = b
        .items
        .iter()
        .map(|(seq, item)| (*seq, numbered(*seq, item, to_json).to_string()))
        .collect::<Vec<_>>();
    let last = items.last().map_or(b.last, |(seq, _)| *seq);
    (items, b.missed, last)
}

fn batch_json<T>(b: &Batch<T>, to_json: fn(&T) -> Value) -> Value {
    let items: Vec<Value> = b
        .items
        .iter()
        .map(|(seq, item)| numbered(*seq, item, to_json))
        .collect();
    json!({"items": items, "last": b.last, "missed": b.missed})
}

/// Redacts every string in `v` (keys too) as the logger redacts a line, keeping line breaks
/// (the metrics snapshot is many lines).
fn redact_strings(log: &Logger, v: &mut Value) {
    match v {
        Value::String(text) => {
            *text = text
                .split('\n')
                .map(|line| log.redact(line))
                .collect::<Vec<_>>()
                .join("\n");
        }
        Value::Array(items) => items.iter_mut().for_each(|i| redact_strings(log, i)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (k, mut item) in entries {
                redact_strings(log, &mut item);
                map.insert(log.redact(&k), item);
            }
        }
        _ => {}
    }
}

fn command_json(c: &CommandRecord) -> Value {
    json!({
        "at_unix_ms": c.at_unix_ms,
        "request_id": c.request_id,
        "channel": c.channel,
        "method": c.method,
        "outcome": c.outcome,
        "resp_code": c.resp_code,
        "failure_source": c.failure_source,
        "failure_kind": c.failure_kind,
        "duration_ms": c.duration_ms,
        "post_retries": c.post_retries,
    })
}

fn log_json(l: &LogRecord) -> Value {
    let fields: serde_json::Map<String, Value> = l
        .fields
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    json!({
        "at_unix_ms": l.at_unix_ms,
        "level": l.level.as_str(),
        "msg": l.msg,
        "fields": fields,
    })
}

fn harpoon_json(c: &HarpoonCallRecord) -> Value {
    json!({
        "at_unix_ms": c.at_unix_ms,
        "label": c.label,
        "status": c.status,
        "outcome": c.outcome,
        "duration_ms": c.duration_ms,
        "response_bytes": c.response_bytes,
    })
}

fn json_response(v: &Value) -> Response {
    Response::new(200, "application/json", &v.to_string())
}

fn json_answer(v: &Value) -> Answer {
    Answer::Full(json_response(v))
}

/// The name of a `Host` header: without its port and brackets, lower case, no final dot.
fn host_name(host: &str) -> String {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(ip, _)| ip)
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether a `Host` header names this host over loopback: `localhost` (or a name under it),
/// `127.0.0.0/8` or `[::1]`, with any port.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, port)) if port.is_empty() || port.starts_with(':') => ip,
            _ => return false,
        }
    } else {
        host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                name
            } else {
                host
            }
        })
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    name.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh per-process token: 128 random bits from the OS, in hex (`None` without them).
fn new_token() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests;

//! Harpoon's MCP server (`tunnel::harpoon::server::Harpoon`) over a registry of 2 to 4 targets
//! (a token endpoint among them, two sharing one URL in different spellings, two sharing an
//! origin), fed an arbitrary sequence of inputs: commands (`initialize`, `tools/list`, other
//! methods, `tools/call` of `list_targets`, `call_target` and `get_oauth_target_audience` with
//! fuzzed arguments, in the modern or the legacy era, sometimes pretty-printed over several
//! lines; notifications, `notifications/cancelled` among them, client responses; arbitrary
//! text), the outbound request's answer (any status, redirects with a `Location` that is
//! sometimes a registered URL in some spelling, relative or with a dot segment; any headers,
//! `Content-Encoding` among them; bodies in arbitrary chunks, JSON ones holding registered URLs
//! as values and keys, PRM-like documents, and JSON-typed ones that do not parse: truncated,
//! nested too deep, with `/` escaped), its failure, misordered and late reports, the engine's
//! cancels and time (steps, with deadlines expiring, and exactly at or just before a call's
//! `timeout_ms`).
//!
//! Invariants checked on every output and after every input:
//! - no panic, whatever arrives;
//! - every command ends at most once (`Reply`, `Acknowledged` or `Failed`), and one the engine
//!   did not cancel ends exactly once: a notification or a client response is acknowledged at
//!   once and nothing else is, and whenever no outbound request is outstanding every command
//!   handed in has ended (one at a time, nothing waits for nothing); nothing at all comes for a
//!   command after its end or its cancel (a cancelled one ends with no answer, as documented);
//! - `Failed` is `transport_closed` only at the connection's age (in `handle_timeout`), and
//!   `client_internal` for a well-formed request only after a `notifications/cancelled` for it;
//!   a connection reset is `Deadline` only in `cancel` and `MaxAge` only in `handle_timeout`;
//! - a `Reply` is one JSON-RPC response line with the id of the command's request;
//! - at most one outbound request is outstanding; a `Fetch` goes to exactly a registered URL,
//!   never after the command's `CancelFetch` or end; the first one of a `call_target` goes to its
//!   label's URL with its method, body and deadline (the call's `timeout_ms` or the command's
//!   deadline, whichever is first), a later one only after a redirect answer of the previous one
//!   (to the `Location`'s target when it is registered as written; never through a dot segment;
//!   within `max_redirects`; a 301, 302 or 303 of anything but a GET as a bodiless GET, any
//!   other with the previous method and body) and with the same deadline and headers, but that
//!   once a hop went to another origin (scheme, host, port) than the hop before it, no
//!   `Authorization` (in any case) is sent for the rest of the call; arguments `call_target`
//!   documents as refused never lead to a fetch, and valid modern ones always do;
//! - an outbound request carries exactly the caller's headers that `headers.rs` documents as
//!   kept (never `Cookie`, `Host`, `Proxy`, `Proxy-*`, `X-Forwarded-*`, forwarding ones
//!   (`X-Original-Host` and `X-Host` among them), hop-by-hop or `Connection`-nominated ones, URL
//!   and method overrides, `Accept-Encoding`, `Range` or `If-Range`), then
//!   `Accept-Encoding: identity` and our `User-Agent`, each exactly once; `HeadersDropped` names
//!   the class of each other one, in order (`Override`, `Encoding` and `Range` among them);
//! - `timeout_ms` is Harpoon's own timer: while a call's request is outstanding `poll_timeout`
//!   is no later than the call's start plus `timeout_ms`; `handle_timeout` before that instant
//!   leaves the call alone, and at or past it (unless the command was dropped first) cancels
//!   the request (`CancelFetch`), records `TimedOut` and answers the `isError` result "no answer
//!   within timeout_ms (N ms)", then serves the next queued request;
//! - an answer with a `Content-Encoding` other than `identity` or empty (in any of its values)
//!   is never passed through: it ends, at its end, as an `isError` result naming the encoding,
//!   recorded `Failed` (and nothing else ends at its end as `Failed`);
//! - a `call_target` answer carries the delivered status, the headers as delivered but for
//!   `Location` and `Content-Location` naming a registered URL (`harpoon://<label>` then) and
//!   `Link` (no bracketed registered URL left); its body is the delivered one byte for byte,
//!   unless its content type is JSON and either it parses and holds a registered URL as a
//!   string or key outside the top-level `resource` of a Protected Resource Metadata document
//!   (a top-level object with `authorization_servers`, `bearer_methods_supported`,
//!   `resource_name` or `resource_documentation`; anywhere else `resource` is rewritten): then
//!   none is left and that `resource` is unchanged; or it does not parse: then it is the
//!   delivered text with every registered URL (longest first, as written and with `/` escaped
//!   as `\/`) replaced by `harpoon://<label>`, and holds no registered URL in either form; never
//!   more than `max_response_bytes`; a redirect is answered only with `follow_redirects: false`;
//! - no `Reply` or `Message` holds a registered target's URL, but a `call_target` answer's
//!   passed-through headers (the `Content-Encoding` a refusal names among them), an echo of the
//!   command's own payload, or `get_oauth_target_audience`'s audience (which is a token
//!   endpoint's registered URL);
//! - one `Call` record per started call when it ends (its latency from the call's start, its
//!   redirects, last status and body bytes as delivered), labels registered or folded;
//! - handlers never refuse a report valid by construction; a second head, or body bytes or an
//!   end before the head, is refused with no effect; a late report or a cancel naming a command
//!   not served changes nothing;
//! - after `handle_timeout(now)` the next deadline is not in the past.
#![no_main]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::{self, Headers, ResponseHead};
use mcpwire_core::jsonrpc::Message;
use mcpwire_core::net_policy::Url;
use mcpwire_core::tunnel::engine::{CommandId, UsageError};
use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind, TunnelFailure};
use mcpwire_core::tunnel::harpoon::headers::DroppedClass;
use mcpwire_core::tunnel::harpoon::server::{CallResult, HarpoonEvent, ResetReason, UNKNOWN_LABEL};
use mcpwire_core::tunnel::harpoon::{
    Harpoon, HarpoonConfig, HarpoonOutput, Registry, TargetSource, TargetSpec,
};
use serde_json::{json, Map, Value};

/// The targets a registry is drawn from: label, URL, OAuth role, tags. No URL is a substring
/// of another; `issuer` and `sso` are one URL in two spellings of the host.
const POOL: [(&str, &str, Option<&str>, &[&str]); 6] = [
    (
        "token",
        "https://idp.example.test/oauth2/token",
        Some("token_endpoint"),
        &[],
    ),
    (
        "api",
        "https://api.example.test/v1/items?x=1",
        None,
        &["read"],
    ),
    (
        "jwks",
        "https://idp.example.test/keys/jwks.json",
        Some("jwks_uri"),
        &[],
    ),
    (
        "issuer",
        "https://sso.example.test/realm",
        Some("issuer"),
        &[],
    ),
    ("sso", "https://SSO.example.test/realm", None, &["custom"]),
    (
        "echo_1",
        "https://user@echo.example.test:8443/x%2Fy?q=a%20b",
        None,
        &["token-endpoint"],
    ),
];

const USER_AGENT: &str = "fuzz-agent/1";
const MODERN: &str = "2026-07-28";

/// Request header names a call may carry (dropped ones among them).
const REQ_HEADERS: [&str; 40] = [
    "Accept",
    "Authorization",
    "authorization",
    "Accept-Encoding",
    "accept-encoding",
    "Range",
    "If-Range",
    "X-Original-URL",
    "X-Rewrite-URL",
    "X-HTTP-Method-Override",
    "x-http-method",
    "X-Method-Override",
    "X-Original-Host",
    "X-Host",
    "Proxy",
    "Trailer",
    "Cookie",
    "COOKIE",
    "Host",
    "Proxy-Authorization",
    "proxy-foo",
    "X-Forwarded-For",
    "x-forwarded-proto",
    "Forwarded",
    "Via",
    "X-Real-IP",
    "True-Client-IP",
    "Connection",
    "Keep-Alive",
    "TE",
    "Transfer-Encoding",
    "Upgrade",
    "Proxy-Connection",
    "Content-Length",
    "User-Agent",
    "X-Drop",
    "Content-Type",
    "bad name",
    "X-Custom",
    "",
];

/// Response header names an answer may carry.
const RESP_HEADERS: [&str; 11] = [
    "Location",
    "location",
    "Content-Location",
    "Content-Encoding",
    "content-encoding",
    "Link",
    "Content-Type",
    "Set-Cookie",
    "X-Url",
    "WWW-Authenticate",
    "Cache-Control",
];

const METHODS: [&str; 8] = [
    "ping",
    "resources/list",
    "prompts/list",
    "server/discover",
    "logging/setLevel",
    "completion/complete",
    "tools/call",
    "x/unknown",
];

const KEYS: [&str; 11] = [
    "issuer",
    "token_endpoint",
    "jwks_uri",
    "authorization_servers",
    "bearer_methods_supported",
    "resource_name",
    "resource_documentation",
    "registration_endpoint",
    "resource",
    "links",
    "href",
];

#[derive(Arbitrary, Debug, Clone)]
enum Id {
    Num(u8),
    Str(u8),
}

#[derive(Arbitrary, Debug)]
enum LabelSel {
    Registered(u8),
    Pool(u8),
    Other(String),
    Missing,
    NotString,
}

#[derive(Arbitrary, Debug)]
enum MethodSel {
    Get,
    Post,
    Put,
    LowerPost,
    Delete,
    NotString,
}

#[derive(Arbitrary, Debug)]
enum HName {
    Known(u8),
    Any(String),
}

#[derive(Arbitrary, Debug)]
enum HVal {
    Text(String),
    Nominate(u8),
    Url(u8),
    Crlf,
}

#[derive(Arbitrary, Debug)]
enum HeadersArg {
    Map(Vec<(HName, HVal)>),
    /// Credentials (in some case) and a header kept along.
    Credentials(bool),
    NotObject,
    NonStringValue,
}

#[derive(Arbitrary, Debug)]
enum BodyArg {
    Text(String),
    WithUrl(u8),
    NotString,
}

#[derive(Arbitrary, Debug)]
enum NumArg {
    Value(u32),
    Small(u8),
    Null,
    Negative,
    Float,
    Text,
}

#[derive(Arbitrary, Debug)]
enum BoolArg {
    B(bool),
    Null,
    NotBool,
}

#[derive(Arbitrary, Debug)]
struct CallArgs {
    label: LabelSel,
    method: Option<MethodSel>,
    headers: Option<HeadersArg>,
    body: Option<BodyArg>,
    timeout_ms: Option<NumArg>,
    max_response_bytes: Option<NumArg>,
    follow_redirects: Option<BoolArg>,
    max_redirects: Option<NumArg>,
    unknown: bool,
}

#[derive(Arbitrary, Debug)]
enum Req {
    Initialize {
        version: u8,
    },
    ToolsList,
    Other(u8),
    ListTargets {
        category: Option<u8>,
        source: Option<u8>,
        tags: Option<Vec<u8>>,
        extra: bool,
    },
    Call(CallArgs),
    Audience(LabelSel),
    UnknownTool(String),
    ArgumentsNotObject(bool),
}

#[derive(Arbitrary, Debug)]
enum Notif {
    Initialized,
    /// Cancels the request of the n-th command that has an id.
    Cancel {
        nth: u8,
        reason: bool,
    },
    CancelId(Id),
    Other(u8),
    Response {
        id: Id,
        error: bool,
    },
}

#[derive(Arbitrary, Debug)]
enum Status {
    Ok,
    Redirect(u8),
    Any(u16),
}

#[derive(Arbitrary, Debug)]
enum RName {
    Known(u8),
    Any(String),
}

#[derive(Arbitrary, Debug)]
enum RVal {
    Url(u8, u8),
    Link(Vec<(u8, u8)>),
    Text(String),
    Encoding(u8),
}

#[derive(Arbitrary, Debug)]
enum Ct {
    None,
    Json,
    JsonCharset,
    ProblemJson,
    Text,
    Any(String),
}

#[derive(Arbitrary, Debug)]
enum Key {
    Url(u8, u8),
    Known(u8),
    Any(String),
}

#[derive(Arbitrary, Debug)]
enum J {
    Url(u8, u8),
    Str(String),
    Num(i16),
    Bool(bool),
    Null,
    Arr(Vec<J>),
    Obj(Vec<(Key, J)>),
}

#[derive(Arbitrary, Debug)]
enum BodySpec {
    Raw(Vec<u8>),
    Json(J),
    Sized(u16),
    /// JSON with every `/` escaped as `\/` (still JSON).
    Escaped(J),
    /// JSON cut short (so that it does not parse), its `/` escaped or not.
    Truncated {
        json: J,
        cut: u16,
        escape: bool,
    },
    /// JSON nested deeper than a parser takes.
    Deep {
        json: J,
        extra: u8,
    },
    /// An object with a top-level `resource` (a target's URL in some spelling), members only
    /// a PRM document has (by the low bits of `prm`, none with its high bit), and a nested
    /// `resource`.
    Resource {
        url: (u8, u8),
        prm: u8,
        nested: (u8, u8),
    },
}

#[derive(Arbitrary, Debug)]
struct HeadSpec {
    status: Status,
    headers: Vec<(RName, RVal)>,
    ct: Ct,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Request {
        req: Req,
        id: Id,
        modern: bool,
        deadline: Option<u8>,
        pretty: bool,
    },
    Notify {
        notif: Notif,
        modern: bool,
    },
    Raw {
        text: String,
        deadline: Option<u8>,
    },
    Head(HeadSpec),
    Body(BodySpec),
    End,
    Answer {
        head: HeadSpec,
        body: BodySpec,
        cuts: Vec<u16>,
    },
    Fail {
        source: u8,
        kind: u8,
    },
    Misuse(u8),
    Late {
        nth: u8,
        what: u8,
    },
    Cancel(u8),
    Time {
        tenths: u16,
        expire: bool,
    },
    /// Time advances to the outstanding call's `timeout_ms` (exactly, just before, just after)
    /// or to the next deadline `poll_timeout` names.
    Due {
        how: u8,
        expire: bool,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    targets: u8,
    cap: u8,
    age: u8,
    entropy: u8,
    ops: Vec<Op>,
}

// --- building inputs ------------------------------------------------------------------------------

fn pool_url(i: u8) -> &'static str {
    POOL[usize::from(i) % POOL.len()].1
}

/// A target's URL in some spelling: as registered, scheme upper-cased, padded, with a slash
/// added, relative, with a dot segment, with a fragment.
fn url_form(i: u8, v: u8) -> String {
    let url = pool_url(i);
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let path = rest.find('/').map_or("/", |at| &rest[at..]);
    match v % 8 {
        0..=2 => url.to_owned(),
        3 => format!("{}://{rest}", scheme.to_ascii_uppercase()),
        4 => format!("  {url} "),
        5 => format!("{url}/"),
        6 => path.to_owned(),
        _ => format!(
            "{scheme}://{}/../{}",
            &rest[..rest.find('/').unwrap_or(rest.len())],
            path.trim_start_matches('/')
        ),
    }
}

fn id_value(id: &Id) -> Value {
    match id {
        Id::Num(n) => json!(n % 16),
        Id::Str(n) => json!(format!("r{}", n % 16)),
    }
}

fn label_value(sel: &LabelSel, reg: &Registry) -> Option<Value> {
    match sel {
        LabelSel::Registered(i) => {
            let n = reg.len().max(1);
            reg.iter()
                .nth(usize::from(*i) % n)
                .map(|t| Value::from(t.label()))
        }
        LabelSel::Pool(i) => Some(Value::from(POOL[usize::from(*i) % POOL.len()].0)),
        LabelSel::Other(s) => Some(Value::from(s.as_str())),
        LabelSel::Missing => None,
        LabelSel::NotString => Some(json!(7)),
    }
}

fn num_value(n: &NumArg) -> Value {
    match n {
        NumArg::Value(v) => json!(v),
        NumArg::Small(v) => json!(u32::from(*v) * 10),
        NumArg::Null => Value::Null,
        NumArg::Negative => json!(-1),
        NumArg::Float => json!(1000.5),
        NumArg::Text => json!("1000"),
    }
}

/// What the harness expects of a `call_target` it built (`call.rs`'s documented rules).
#[derive(Debug, Clone)]
struct CallSpec {
    valid: bool,
    label: String,
    method: http::Method,
    headers: Vec<(String, String)>,
    body: Option<String>,
    timeout: Duration,
    max_bytes: u64,
    follow: bool,
    max_redirects: u32,
}

fn in_range(v: &Value, lo: u64, hi: u64, default: u64) -> Option<u64> {
    match v {
        Value::Null => Some(default),
        _ => v.as_u64().filter(|n| (lo..=hi).contains(n)),
    }
}

fn call_args(
    a: &CallArgs,
    reg: &Registry,
    cap: u64,
    redirects_cap: u32,
) -> (Map<String, Value>, CallSpec) {
    let mut args = Map::new();
    let mut valid = true;
    let label = label_value(&a.label, reg);
    let label_s = label
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    valid &= reg.get(&label_s).is_some() && label.as_ref().is_some_and(Value::is_string);
    if let Some(l) = label {
        args.insert("label".into(), l);
    }
    let mut method = http::Method::Get;
    if let Some(m) = &a.method {
        let (v, ok) = match m {
            MethodSel::Get => (json!("GET"), Some(http::Method::Get)),
            MethodSel::Post => (json!("POST"), Some(http::Method::Post)),
            MethodSel::Put => (json!("PUT"), Some(http::Method::Put)),
            MethodSel::LowerPost => (json!("post"), Some(http::Method::Post)),
            MethodSel::Delete => (json!("DELETE"), None),
            MethodSel::NotString => (json!(1), None),
        };
        args.insert("method".into(), v);
        match ok {
            Some(m) => method = m,
            None => valid = false,
        }
    }
    let mut headers = Vec::new();
    if let Some(h) = &a.headers {
        let v = match h {
            HeadersArg::Map(pairs) => {
                let mut m = Map::new();
                for (name, value) in pairs.iter().take(12) {
                    let name = match name {
                        HName::Known(i) => {
                            REQ_HEADERS[usize::from(*i) % REQ_HEADERS.len()].to_owned()
                        }
                        HName::Any(s) => s.clone(),
                    };
                    let value = match value {
                        HVal::Text(s) => s.clone(),
                        HVal::Nominate(i) => {
                            format!(
                                "keep-alive, {}",
                                REQ_HEADERS[usize::from(*i) % REQ_HEADERS.len()]
                            )
                        }
                        HVal::Url(i) => pool_url(*i).to_owned(),
                        HVal::Crlf => "a\r\nX-Injected: 1".to_owned(),
                    };
                    m.insert(name, Value::from(value));
                }
                // As `from_arguments` reads them: the map's own order, duplicates folded.
                headers = m
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect();
                Value::Object(m)
            }
            HeadersArg::Credentials(lower) => {
                let name = if *lower {
                    "authorization"
                } else {
                    "Authorization"
                };
                let mut m = Map::new();
                m.insert(name.into(), json!("Bearer secret"));
                m.insert("X-Kept".into(), json!("1"));
                headers = m
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect();
                Value::Object(m)
            }
            HeadersArg::NotObject => {
                valid = false;
                json!(["Accept"])
            }
            HeadersArg::NonStringValue => {
                valid = false;
                json!({"Accept": 1})
            }
        };
        args.insert("headers".into(), v);
    }
    let mut body = None;
    if let Some(b) = &a.body {
        let v = match b {
            BodyArg::Text(s) => {
                body = Some(s.clone());
                Value::from(s.as_str())
            }
            BodyArg::WithUrl(i) => {
                body = Some(format!("{{\"aud\":\"{}\"}}", pool_url(*i)));
                Value::from(body.clone().unwrap_or_default())
            }
            BodyArg::NotString => {
                valid = false;
                json!({"a": 1})
            }
        };
        args.insert("body".into(), v);
    }
    if body.is_some() && method == http::Method::Get {
        valid = false;
    }
    let mut timeout = Duration::from_millis(30_000);
    if let Some(n) = &a.timeout_ms {
        let v = num_value(n);
        match in_range(&v, 100, 120_000, 30_000) {
            Some(ms) => timeout = Duration::from_millis(ms),
            None => valid = false,
        }
        args.insert("timeout_ms".into(), v);
    }
    let cap = cap.max(1);
    let mut max_bytes = cap.min(100 * 1024);
    if let Some(n) = &a.max_response_bytes {
        let v = num_value(n);
        match in_range(&v, 1, cap, max_bytes) {
            Some(b) => max_bytes = b,
            None => valid = false,
        }
        args.insert("max_response_bytes".into(), v);
    }
    let mut follow = true;
    if let Some(b) = &a.follow_redirects {
        let v = match b {
            BoolArg::B(b) => {
                follow = *b;
                json!(b)
            }
            BoolArg::Null => Value::Null,
            BoolArg::NotBool => {
                valid = false;
                json!("yes")
            }
        };
        args.insert("follow_redirects".into(), v);
    }
    // `--harpoon.max-redirects` is a call's default and its cap (the Go client's rule).
    let mut max_redirects = redirects_cap;
    if let Some(n) = &a.max_redirects {
        let v = num_value(n);
        match in_range(&v, 0, u64::from(redirects_cap), u64::from(redirects_cap)) {
            Some(r) => max_redirects = u32::try_from(r).unwrap_or(redirects_cap),
            None => valid = false,
        }
        args.insert("max_redirects".into(), v);
    }
    if a.unknown {
        valid = false;
        args.insert("path".into(), json!("/admin"));
    }
    let spec = CallSpec {
        valid,
        label: label_s,
        method,
        headers,
        body,
        timeout,
        max_bytes,
        follow,
        max_redirects,
    };
    (args, spec)
}

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientCapabilities": {}})
}

fn json_of(j: &J, depth: u32) -> Value {
    if depth > 6 {
        return Value::Null;
    }
    match j {
        J::Url(i, v) => Value::from(url_form(*i, *v)),
        J::Str(s) => Value::from(s.as_str()),
        J::Num(n) => json!(n),
        J::Bool(b) => json!(b),
        J::Null => Value::Null,
        J::Arr(items) => Value::Array(
            items
                .iter()
                .take(8)
                .map(|x| json_of(x, depth + 1))
                .collect(),
        ),
        J::Obj(members) => {
            let mut m = Map::new();
            for (k, v) in members.iter().take(8) {
                let k = match k {
                    Key::Url(i, v) => url_form(*i, *v),
                    Key::Known(i) => KEYS[usize::from(*i) % KEYS.len()].to_owned(),
                    Key::Any(s) => s.clone(),
                };
                m.insert(k, json_of(v, depth + 1));
            }
            Value::Object(m)
        }
    }
}

fn body_bytes(b: &BodySpec) -> Vec<u8> {
    match b {
        BodySpec::Raw(bytes) => bytes.clone(),
        BodySpec::Json(j) => json_of(j, 0).to_string().into_bytes(),
        BodySpec::Sized(n) => vec![b'x'; usize::from(*n % 5000)],
        BodySpec::Escaped(j) => json_of(j, 0).to_string().replace('/', "\\/").into_bytes(),
        BodySpec::Truncated { json, cut, escape } => {
            let mut text = json_of(json, 0).to_string();
            if *escape {
                text = text.replace('/', "\\/");
            }
            let mut bytes = text.into_bytes();
            // At least one byte is cut off. A cut number may still parse: the oracle asks the
            // same parser as the rewrite, so either way the expectation holds.
            let keep = usize::from(*cut) % bytes.len().max(1);
            bytes.truncate(keep);
            bytes
        }
        BodySpec::Resource { url, prm, nested } => {
            let mut m = Map::new();
            m.insert("resource".into(), Value::from(url_form(url.0, url.1)));
            let members = [
                "authorization_servers",
                "bearer_methods_supported",
                "resource_name",
                "resource_documentation",
            ];
            for (bit, k) in members.iter().enumerate() {
                if prm & 0x80 == 0 && prm & (1 << bit) != 0 {
                    m.insert((*k).into(), json!([]));
                }
            }
            m.insert(
                "data".into(),
                json!({"resource": url_form(nested.0, nested.1)}),
            );
            Value::Object(m).to_string().into_bytes()
        }
        BodySpec::Deep { json, extra } => {
            let depth = 128 + usize::from(*extra % 32);
            let inner = json_of(json, 0).to_string();
            format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()
        }
    }
}

fn head_of(h: &HeadSpec) -> ResponseHead {
    let status = match h.status {
        Status::Ok => 200,
        Status::Redirect(i) => [301, 302, 303, 307, 308, 300, 304][usize::from(i) % 7],
        Status::Any(s) => s % 1000,
    };
    let mut headers = Headers::new();
    match &h.ct {
        Ct::None => {}
        Ct::Json => {
            let _ = headers.append("Content-Type", "application/json");
        }
        Ct::JsonCharset => {
            let _ = headers.append("content-type", "Application/JSON; charset=utf-8");
        }
        Ct::ProblemJson => {
            let _ = headers.append("Content-Type", "application/problem+json");
        }
        Ct::Text => {
            let _ = headers.append("Content-Type", "text/plain");
        }
        Ct::Any(s) => {
            let _ = headers.append("Content-Type", s.as_str());
        }
    }
    for (name, value) in h.headers.iter().take(8) {
        let name = match name {
            RName::Known(i) => RESP_HEADERS[usize::from(*i) % RESP_HEADERS.len()].to_owned(),
            RName::Any(s) => s.clone(),
        };
        let value = match value {
            RVal::Url(i, v) => url_form(*i, *v),
            RVal::Link(links) => links
                .iter()
                .take(4)
                .map(|(i, v)| format!("<{}>; rel=\"r{i}\"", url_form(*i, *v)))
                .collect::<Vec<_>>()
                .join(", "),
            RVal::Text(s) => s.clone(),
            RVal::Encoding(e) => [
                "gzip",
                "identity",
                "IDENTITY",
                "",
                " ",
                "br",
                " identity ",
                "gzip, identity",
                "x-custom",
            ][usize::from(*e) % 9]
                .to_owned(),
        };
        // A head the driver could not have received is not built.
        let _ = headers.append(name, value);
    }
    ResponseHead { status, headers }
}

/// The payload as Harpoon frames it (`server.rs`'s `frame`, without the newline), parsed.
fn framed_value(payload: &str) -> Option<Value> {
    let text = if payload.contains(['\n', '\r']) {
        match serde_json::from_str::<Value>(payload) {
            Ok(v) => return Some(v),
            Err(_) => payload.replace(['\n', '\r'], " "),
        }
    } else {
        payload.to_owned()
    };
    serde_json::from_str(text.trim()).ok()
}

fn all_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| all_strings(x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                all_strings(x, out);
            }
        }
        _ => {}
    }
}

/// Whether `v` is a Protected Resource Metadata document: a top-level object with a member
/// only RFC 9728 defines (`rewrite.rs`).
fn is_prm(v: &Value) -> bool {
    v.as_object().is_some_and(|m| {
        [
            "authorization_servers",
            "bearer_methods_supported",
            "resource_name",
            "resource_documentation",
        ]
        .iter()
        .any(|k| m.contains_key(*k))
    })
}

/// The strings a JSON answer's rewrite looks at: every key, every string but the top-level
/// `resource` of a PRM document (`prm`: `v` is that document; `rewrite.rs`).
fn rewritable<'a>(v: &'a Value, prm: bool, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| rewritable(x, false, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k);
                if !(prm && k == "resource" && x.is_string()) {
                    rewritable(x, false, out);
                }
            }
        }
        _ => {}
    }
}

/// `text` with every `from` replaced by `to`, left to right, occurrences not overlapping.
fn replace_bytes(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest.starts_with(from) {
            out.extend_from_slice(to);
            rest = &rest[from.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

/// The two forms of a URL a JSON text may hold: as written, and with `/` escaped as `\/`.
fn url_forms(url: &str) -> [String; 2] {
    [url.to_owned(), url.replace('/', "\\/")]
}

/// An unparsable JSON-typed body as `rewrite.rs` documents it: every registered URL (longest
/// first; as written, then with `/` escaped) replaced by `harpoon://<label>` in its bytes.
fn text_rewritten(reg: &Registry, body: &[u8]) -> Vec<u8> {
    let mut targets: Vec<(&str, &str)> = reg.iter().map(|t| (t.url(), t.label())).collect();
    // Stable: among URLs of one length, registration order.
    targets.sort_by(|a, b| b.0.len().cmp(&a.0.len()));
    let mut out = body.to_vec();
    for (url, label) in targets {
        let to = format!("harpoon://{label}");
        for from in url_forms(url) {
            out = replace_bytes(&out, from.as_bytes(), to.as_bytes());
        }
    }
    out
}

fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The `Content-Encoding` values of `head` that say the body is encoded (not `identity`, not
/// empty).
/// The content codings other than identity, over every `Content-Encoding` line and every
/// comma-separated item (repeated lines form one list).
fn encodings(head: &ResponseHead) -> Vec<&str> {
    head.headers
        .get_all("content-encoding")
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity"))
        .collect()
}

/// A URL's origin: scheme, host, port (the scheme's default when none is written); `None` for
/// one that does not parse (which has no origin in common with any).
fn origin(url: &str) -> Option<(String, String, u16)> {
    let u = Url::parse(url).ok()?;
    let port = u.port().or(match u.scheme() {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    })?;
    Some((
        u.scheme().to_owned(),
        u.host_str()?.to_ascii_lowercase(),
        port,
    ))
}

fn same_origin(a: &str, b: &str) -> bool {
    matches!((origin(a), origin(b)), (Some(x), Some(y)) if x == y)
}

fn is_json_type(ct: &str) -> bool {
    let essence = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// The URIs in `<...>` of a `Link` value.
fn link_uris(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>').map(|c| open + c) else {
            break;
        };
        out.push(&rest[open + 1..close]);
        rest = &rest[close + 1..];
    }
    out
}

fn is_dot_segment(segment: &str) -> bool {
    let s = segment.to_ascii_lowercase().replace("%2e", ".");
    s == "." || s == ".."
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    let s = s.trim_end_matches('=');
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

/// The caller's headers `headers.rs` documents as kept, and the class of each it drops.
fn expected_kept(headers: &[(String, String)]) -> (Vec<(String, String)>, Vec<DroppedClass>) {
    const HOP: [&str; 7] = [
        "connection",
        "keep-alive",
        "te",
        "transfer-encoding",
        "upgrade",
        "trailer",
        "proxy-connection",
    ];
    const FWD: [&str; 13] = [
        "forwarded",
        "x-original-host",
        "x-host",
        "via",
        "x-real-ip",
        "x-client-ip",
        "client-ip",
        "true-client-ip",
        "x-cluster-client-ip",
        "cf-connecting-ip",
        "fastly-client-ip",
        "x-original-forwarded-for",
        "x-proxyuser-ip",
    ];
    let nominated: Vec<String> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    const OVERRIDES: [&str; 5] = [
        "x-original-url",
        "x-rewrite-url",
        "x-http-method-override",
        "x-http-method",
        "x-method-override",
    ];
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (n, v) in headers {
        let l = n.to_ascii_lowercase();
        let l = l.as_str();
        let class = if http::validate_name(n).is_err() || http::validate_value(n, v).is_err() {
            Some(DroppedClass::Invalid)
        } else if HOP.contains(&l) {
            Some(DroppedClass::HopByHop)
        } else if l == "proxy" || l.starts_with("proxy-") {
            Some(DroppedClass::Proxy)
        } else if OVERRIDES.contains(&l) {
            Some(DroppedClass::Override)
        } else if FWD.contains(&l) || l.starts_with("x-forwarded-") {
            Some(DroppedClass::Forwarding)
        } else {
            match l {
                "host" => Some(DroppedClass::Host),
                "content-length" => Some(DroppedClass::ContentLength),
                "cookie" => Some(DroppedClass::Cookie),
                "user-agent" => Some(DroppedClass::UserAgent),
                "accept-encoding" => Some(DroppedClass::Encoding),
                "range" | "if-range" => Some(DroppedClass::Range),
                _ if nominated.iter().any(|t| t == l) => Some(DroppedClass::ConnectionNominated),
                _ => None,
            }
        };
        match class {
            Some(c) => dropped.push(c),
            None => kept.push((n.clone(), v.clone())),
        }
    }
    (kept, dropped)
}

// --- the harness ----------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FetchState {
    None,
    Open { head: bool },
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Command(usize),
    Cancel,
    Timeout,
    Report(usize),
    Quiet,
}

struct Cmd {
    payload: String,
    strings: Vec<String>,
    /// A notification or a client response (acknowledged at once).
    notice: bool,
    structured: bool,
    modern: bool,
    id: Option<Value>,
    call: Option<CallSpec>,
    deadline: Option<Instant>,
    ended: bool,
    cancelled: bool,
    cancel_notified: bool,
    fetches: u32,
    fetch: FetchState,
    fetch_cancelled: bool,
    first_deadline: Option<Instant>,
    /// The headers of the call's first request.
    first_headers: Option<Headers>,
    /// When the call started (its first request).
    started: Option<Instant>,
    /// When its `timeout_ms` runs out (known for a call the harness built).
    timeout_at: Option<Instant>,
    /// A hop went to another origin than the hop before it: no `Authorization` from then on.
    cross_origin: bool,
    last_request: Option<http::Request>,
    head: Option<ResponseHead>,
    body: Vec<u8>,
    /// How the call ended, by its `Call` record.
    result: Option<CallResult>,
    /// The `error` of its `isError` result.
    error: Option<String>,
}

impl Cmd {
    fn pending(&self) -> bool {
        !self.ended && !self.cancelled
    }
}

struct Fuzz {
    h: Harpoon,
    reg: Registry,
    now: Instant,
    cap: u64,
    /// `--harpoon.max-redirects`.
    redirects_cap: u32,
    cmds: Vec<Cmd>,
    /// The command whose outbound request is outstanding.
    open: Option<usize>,
    records: usize,
    calls_ended: usize,
    dropped: Option<Vec<DroppedClass>>,
    /// The command of the latest `Fetch` (a started call's record is its).
    last_fetch: Option<usize>,
}

impl Fuzz {
    fn cmd_id(i: usize) -> CommandId {
        CommandId(u64::try_from(i).unwrap_or(u64::MAX))
    }

    fn index(&self, cmd: CommandId) -> usize {
        let i = usize::try_from(cmd.0).unwrap_or(usize::MAX);
        assert!(
            i < self.cmds.len(),
            "an output for a command never handed in: {cmd:?}"
        );
        i
    }

    /// Drains the outputs, checking each; returns how many there were.
    fn drain(&mut self, ctx: Ctx) -> usize {
        let mut n = 0;
        self.dropped = None;
        while let Some(out) = self.h.poll_output() {
            n += 1;
            assert!(n < 100_000, "endless output");
            self.output(ctx, out);
        }
        self.global();
        n
    }

    fn global(&mut self) {
        assert_eq!(
            self.records, self.calls_ended,
            "one Call record per started call, when it ends"
        );
        let open: Vec<usize> = (0..self.cmds.len())
            .filter(|&i| matches!(self.cmds[i].fetch, FetchState::Open { .. }))
            .collect();
        assert!(open.len() <= 1, "two outbound requests at once: {open:?}");
        assert_eq!(open.first().copied(), self.open);
        if self.open.is_none() {
            let waiting: Vec<usize> = (0..self.cmds.len())
                .filter(|&i| self.cmds[i].pending())
                .collect();
            assert!(
                waiting.is_empty(),
                "commands {waiting:?} wait with no outbound request outstanding (one at a time: the next is served when one ends)"
            );
            assert!(self.h.is_idle(), "idle with nothing pending");
        } else {
            assert!(
                !self.h.is_idle(),
                "idle with an outbound request outstanding"
            );
        }
        // The outstanding call's timeout_ms is Harpoon's own timer.
        if let Some(t) = self.open.and_then(|i| self.cmds[i].timeout_at) {
            assert!(
                self.h.poll_timeout().is_some_and(|p| p <= t),
                "poll_timeout later than the outstanding call's timeout_ms"
            );
        }
    }

    fn output(&mut self, ctx: Ctx, out: HarpoonOutput) {
        match out {
            HarpoonOutput::Fetch {
                cmd,
                request,
                deadline,
            } => self.fetch(ctx, cmd, request, deadline),
            HarpoonOutput::CancelFetch { cmd } => {
                let i = self.index(cmd);
                let c = &mut self.cmds[i];
                assert!(
                    matches!(c.fetch, FetchState::Open { .. }),
                    "CancelFetch for {cmd:?} with no outbound request outstanding"
                );
                assert!(!c.ended, "CancelFetch after the end of {cmd:?}");
                c.fetch = FetchState::Done;
                c.fetch_cancelled = true;
                self.open = None;
                self.calls_ended += 1;
            }
            HarpoonOutput::Message { cmd, json } => {
                let i = self.index(cmd);
                let c = &self.cmds[i];
                assert!(c.pending(), "a Message for {cmd:?} after its end or cancel");
                assert!(!c.notice, "a Message for a notification");
                assert!(!json.contains('\n'));
                assert!(
                    matches!(
                        Message::parse(&json),
                        Ok(Message::Request { .. } | Message::Notification { .. })
                    ),
                    "a Message that is not a request or notification: {json}"
                );
                self.no_url(i, &json, None, &[]);
            }
            HarpoonOutput::Reply { cmd, json } => self.reply(cmd, &json),
            HarpoonOutput::Acknowledged { cmd } => {
                let i = self.index(cmd);
                let c = &mut self.cmds[i];
                assert!(
                    c.pending(),
                    "Acknowledged after the end or cancel of {cmd:?}"
                );
                assert!(c.notice, "a request acknowledged instead of answered");
                assert_eq!(ctx, Ctx::Command(i), "acknowledged later than at once");
                c.ended = true;
            }
            HarpoonOutput::Failed { cmd, failure } => {
                let i = self.index(cmd);
                let c = &mut self.cmds[i];
                assert!(c.pending(), "Failed after the end or cancel of {cmd:?}");
                assert!(!c.notice, "a notification failed");
                assert!(
                    !matches!(c.fetch, FetchState::Open { .. }),
                    "Failed with its outbound request still outstanding (no CancelFetch)"
                );
                assert!(
                    c.fetches == 0 || c.fetch_cancelled,
                    "Failed after an answered outbound request"
                );
                match failure.source() {
                    FailureSource::TransportClosed => {
                        assert_eq!(ctx, Ctx::Timeout, "transport_closed outside the age reset")
                    }
                    FailureSource::ClientInternal => assert!(
                        c.cancel_notified || !c.structured,
                        "a well-formed request failed client_internal with no cancellation"
                    ),
                    other => panic!("an unexpected failure source {other:?}"),
                }
                c.ended = true;
            }
            HarpoonOutput::Event(e) => match e {
                HarpoonEvent::Call(r) => {
                    assert!(
                        r.label == UNKNOWN_LABEL || self.reg.get(&r.label).is_some(),
                        "an unfolded label in a Call record"
                    );
                    assert!(r.redirects <= 20);
                    if r.result != CallResult::Refused {
                        self.records += 1;
                        assert!(self.reg.get(&r.label).is_some(), "a started call's label");
                        let i = self.last_fetch.expect("a started call had a Fetch");
                        let now = self.now;
                        let c = &mut self.cmds[i];
                        assert!(c.result.is_none(), "a second Call record for one call");
                        c.result = Some(r.result);
                        let started = c.started.expect("a started call has a start");
                        assert_eq!(r.latency, now - started, "a call's latency");
                        assert_eq!(r.redirects + 1, c.fetches, "the redirects recorded");
                        assert_eq!(
                            r.status,
                            c.head.as_ref().map(|h| h.status),
                            "the last status recorded"
                        );
                        assert_eq!(
                            r.response_bytes,
                            u64::try_from(c.body.len()).unwrap_or(u64::MAX),
                            "the body bytes recorded"
                        );
                        if let Some(spec) = &c.call {
                            assert_eq!(r.label, spec.label, "the call's label recorded");
                        }
                        if r.result == CallResult::TimedOut && ctx == Ctx::Timeout {
                            let t = c.timeout_at;
                            assert!(
                                t.is_none_or(|t| now >= t),
                                "timed out by handle_timeout before its timeout_ms"
                            );
                        }
                    }
                    if r.result == CallResult::Cancelled {
                        assert!(
                            matches!(ctx, Ctx::Cancel | Ctx::Timeout | Ctx::Command(_)),
                            "cancelled in {ctx:?}"
                        );
                    }
                }
                HarpoonEvent::HeadersDropped { label, classes } => {
                    assert!(self.reg.get(&label).is_some());
                    assert!(!classes.is_empty());
                    self.dropped = Some(classes);
                }
                HarpoonEvent::ConnectionReset { reason } => match reason {
                    ResetReason::Deadline => assert_eq!(ctx, Ctx::Cancel),
                    ResetReason::MaxAge => assert_eq!(ctx, Ctx::Timeout),
                },
                _ => {}
            },
        }
    }

    fn fetch(
        &mut self,
        ctx: Ctx,
        cmd: CommandId,
        request: http::Request,
        deadline: Option<Instant>,
    ) {
        let i = self.index(cmd);
        let now = self.now;
        let dropped = self.dropped.take();
        let reg = &self.reg;
        let c = &mut self.cmds[i];
        assert!(c.pending(), "a Fetch for {cmd:?} after its end or cancel");
        assert!(
            !c.fetch_cancelled,
            "a Fetch for {cmd:?} after its CancelFetch"
        );
        assert!(!c.notice, "a Fetch for a notification");
        assert!(
            !matches!(c.fetch, FetchState::Open { .. }),
            "a second outbound request while one is outstanding"
        );
        assert!(self.open.is_none(), "two outbound requests at once");
        assert!(
            reg.iter().any(|t| t.url() == request.url),
            "a Fetch to an unregistered URL"
        );
        assert!(matches!(
            request.method,
            http::Method::Get | http::Method::Post | http::Method::Put
        ));
        let names: Vec<String> = request
            .headers
            .iter()
            .map(|(n, _)| n.to_ascii_lowercase())
            .collect();
        for n in &names {
            assert!(
                n != "cookie"
                    && n != "host"
                    && !n.starts_with("proxy-")
                    && !n.starts_with("x-forwarded-")
                    && n != "forwarded"
                    && n != "via"
                    && n != "connection"
                    && n != "transfer-encoding"
                    && n != "content-length"
                    && n != "proxy"
                    && n != "range"
                    && n != "if-range"
                    && n != "x-original-host"
                    && n != "x-host"
                    && n != "x-original-url"
                    && n != "x-rewrite-url"
                    && n != "x-http-method-override"
                    && n != "x-http-method"
                    && n != "x-method-override",
                "the caller's {n} header went out"
            );
        }
        assert_eq!(
            names.iter().filter(|n| *n == "user-agent").count(),
            1,
            "one User-Agent"
        );
        assert_eq!(
            names.iter().filter(|n| *n == "accept-encoding").count(),
            1,
            "one Accept-Encoding"
        );
        let mut sent: Vec<(String, String)> = request
            .headers
            .iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(
            sent.pop(),
            Some(("User-Agent".to_owned(), USER_AGENT.to_owned())),
            "our User-Agent, last"
        );
        assert_eq!(
            sent.pop(),
            Some(("Accept-Encoding".to_owned(), "identity".to_owned())),
            "Accept-Encoding: identity, before our User-Agent"
        );
        let deadline = deadline.expect("an outbound request has a deadline");
        if let Some(d) = c.deadline {
            assert!(deadline <= d, "an outbound request outlives its command");
        }
        assert!(deadline <= now + Duration::from_secs(120));
        if c.fetches == 0 {
            if let Some(spec) = &c.call {
                assert!(
                    spec.valid,
                    "a call_target refused by its rules was sent: {spec:?}"
                );
                let target = reg.get(&spec.label).expect("a registered label");
                assert_eq!(
                    request.url,
                    target.url(),
                    "the first request goes to the label's URL"
                );
                assert_eq!(request.method, spec.method);
                let body = spec.body.clone().unwrap_or_default().into_bytes();
                assert_eq!(request.body, body);
                let (kept, classes) = expected_kept(&spec.headers);
                assert_eq!(sent, kept, "the headers sent, in order");
                assert_eq!(
                    dropped.unwrap_or_default(),
                    classes,
                    "the classes of the headers dropped"
                );
                let own = now.checked_add(spec.timeout);
                let expect = match (own, c.deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                assert_eq!(Some(deadline), expect, "the first request's deadline");
                c.timeout_at = own;
            }
            c.first_deadline = Some(deadline);
            c.first_headers = Some(request.headers.clone());
            c.started = Some(now);
        } else {
            assert_eq!(
                ctx,
                Ctx::Report(i),
                "a redirect is followed when its answer ends"
            );
            assert_eq!(
                c.first_deadline,
                Some(deadline),
                "a redirect keeps the deadline"
            );
            let head = c.head.as_ref().expect("a redirect answer had a head");
            assert!(
                matches!(head.status, 301 | 302 | 303 | 307 | 308),
                "a second request after a {} answer",
                head.status
            );
            let location = head
                .headers
                .get("location")
                .map(str::trim)
                .unwrap_or_default();
            assert!(!location.is_empty(), "followed without a Location");
            let path = location.split(['?', '#']).next().unwrap_or_default();
            assert!(
                !path.split(['/', '\\']).any(is_dot_segment),
                "followed through a dot segment"
            );
            if let Some(t) = reg.find_url(location).next() {
                assert_eq!(
                    request.url,
                    t.url(),
                    "followed elsewhere than the Location's target"
                );
            }
            if let Some(spec) = &c.call {
                assert!(spec.follow, "followed with follow_redirects false");
                assert!(
                    c.fetches <= spec.max_redirects,
                    "more than max_redirects followed"
                );
            }
            let prev = c.last_request.as_ref().expect("a previous request");
            // As Go's client: a 301, 302 or 303 of anything but a GET goes on as a bodiless
            // GET; anything else repeats the method and the body.
            if matches!(head.status, 301..=303) && prev.method != http::Method::Get {
                assert_eq!(
                    request.method,
                    http::Method::Get,
                    "a {} as GET",
                    head.status
                );
                assert!(request.body.is_empty(), "a {} without body", head.status);
            } else {
                assert_eq!(
                    request.method, prev.method,
                    "a {} repeats the method",
                    head.status
                );
                assert_eq!(
                    request.body, prev.body,
                    "a {} repeats the body",
                    head.status
                );
            }
            // Credentials stay off from the first hop to another origin on.
            if !same_origin(&prev.url, &request.url) {
                c.cross_origin = true;
            }
            let first = c
                .first_headers
                .as_ref()
                .expect("the first request's headers");
            let expect: Vec<(&str, &str)> = first
                .iter()
                .filter(|(n, _)| !(c.cross_origin && n.eq_ignore_ascii_case("authorization")))
                .collect();
            let got: Vec<(&str, &str)> = request.headers.iter().collect();
            assert_eq!(
                got, expect,
                "a redirect keeps the headers (but Authorization once off the origin; cross: {})",
                c.cross_origin
            );
        }
        c.fetches += 1;
        c.fetch = FetchState::Open { head: false };
        c.head = None;
        c.body.clear();
        c.last_request = Some(request);
        self.open = Some(i);
        self.last_fetch = Some(i);
    }

    fn reply(&mut self, cmd: CommandId, json: &str) {
        let i = self.index(cmd);
        {
            let c = &mut self.cmds[i];
            assert!(c.pending(), "a Reply for {cmd:?} after its end or cancel");
            assert!(!c.notice, "a Reply for a notification");
            assert!(
                !matches!(c.fetch, FetchState::Open { .. }),
                "a Reply with its outbound request still outstanding (no CancelFetch)"
            );
            assert!(!json.contains('\n'));
            if c.fetches > 0 && !c.fetch_cancelled {
                self.calls_ended += 1;
            }
            c.ended = true;
        }
        let c = &self.cmds[i];
        let parsed = Message::parse(json);
        assert!(
            matches!(parsed, Ok(Message::Response { .. } | Message::Error { .. })),
            "a Reply that is no JSON-RPC response: {json}"
        );
        let v: Value = serde_json::from_str(json).expect("a Reply is JSON");
        if let Some(id) = &c.id {
            assert_eq!(&v["id"], id, "the Reply of another request: {json}");
        }
        let result = &v["result"];
        let sc = &result["structuredContent"];
        if sc.get("body_base64").is_some() {
            self.outcome(i, result);
            return;
        }
        let audience = sc.get("audience").and_then(Value::as_str);
        if let Some(a) = audience {
            assert!(
                self.reg
                    .find_url(a)
                    .any(|t| t.is_token_endpoint() && t.url() == a),
                "an audience that is no token endpoint's URL"
            );
        }
        // A started call's error: what its record says it was.
        let mut passed: Vec<String> = Vec::new();
        if c.fetches > 0 && result["isError"] == true {
            let error = sc["error"]
                .as_str()
                .expect("an error result's error")
                .to_owned();
            let label = sc["label"].as_str().expect("an error result's label");
            assert_eq!(
                result["content"][0]["text"].as_str(),
                Some(format!("harpoon target '{label}': {error}").as_str()),
                "the error's text"
            );
            if let Some(spec) = &c.call {
                assert_eq!(label, spec.label, "the error's label");
            }
            match c.result {
                Some(CallResult::TimedOut) => {
                    if let Some(spec) = &c.call {
                        assert_eq!(
                            error,
                            format!(
                                "no answer within timeout_ms ({} ms)",
                                spec.timeout.as_millis()
                            ),
                            "the timeout's error"
                        );
                    }
                }
                Some(CallResult::Answered) | None => {
                    panic!("an error result for a call recorded {:?}: {json}", c.result)
                }
                Some(_) => {}
            }
            if error.starts_with("the answer is encoded") {
                // The encoding named is the target's own header, passed on.
                if let Some(head) = &c.head {
                    passed = encodings(head).iter().map(|e| (*e).to_owned()).collect();
                }
            }
            self.cmds[i].error = Some(error);
        }
        let c = &self.cmds[i];
        self.no_url(i, json, audience, &passed);
        if let Some(spec) = &c.call {
            if spec.valid && c.modern && c.fetches == 0 && v.get("result").is_some() {
                panic!("a valid call_target was answered without a request: {json}");
            }
        }
    }

    /// A call's answer against what was delivered.
    fn outcome(&self, i: usize, result: &Value) {
        let c = &self.cmds[i];
        let sc = &result["structuredContent"];
        assert_eq!(result["isError"], false);
        assert!(!c.fetch_cancelled, "an answer after CancelFetch");
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap_or(""))
            .expect("the text content is JSON");
        assert_eq!(&text, sc, "the text content and structuredContent differ");
        let head = c.head.as_ref().expect("an answer with no head delivered");
        assert_eq!(sc["status_code"], head.status, "the answer's status");
        assert_eq!(
            c.result,
            Some(CallResult::Answered),
            "an answer recorded otherwise"
        );
        assert!(
            encodings(head).is_empty(),
            "an encoded answer passed through (Content-Encoding: {:?})",
            head.headers.get_all("content-encoding").collect::<Vec<_>>()
        );
        if matches!(head.status, 301 | 302 | 303 | 307 | 308) {
            if let Some(spec) = &c.call {
                assert!(
                    !spec.follow,
                    "a redirect answered though redirects are followed"
                );
            }
        }
        // Headers: the delivered ones, by lowercased name, joined.
        let got = sc["headers"].as_object().expect("headers");
        let mut names: Vec<String> = head
            .headers
            .iter()
            .map(|(n, _)| n.to_ascii_lowercase())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(got.len(), names.len(), "the answer's header names");
        for name in &names {
            let values: Vec<&str> = head.headers.get_all(name).collect();
            let value = got
                .get(name)
                .and_then(Value::as_str)
                .expect("a delivered header is answered");
            match name.as_str() {
                "location" | "content-location" => {
                    let expect: Vec<String> = values
                        .iter()
                        .map(|v| match self.reg.find_url(v.trim()).next() {
                            Some(t) => format!("harpoon://{}", t.label()),
                            None => (*v).to_owned(),
                        })
                        .collect();
                    assert_eq!(value, expect.join(", "), "{name} rewritten");
                }
                "link" => {
                    for uri in link_uris(value) {
                        assert!(
                            self.reg.find_url(uri.trim()).next().is_none(),
                            "a registered URL left in Link"
                        );
                    }
                    let any = values.iter().any(|v| {
                        link_uris(v)
                            .iter()
                            .any(|u| self.reg.find_url(u.trim()).next().is_some())
                    });
                    if !any {
                        assert_eq!(
                            value,
                            values.join(", "),
                            "Link changed with nothing to rewrite"
                        );
                    }
                }
                _ => assert_eq!(value, values.join(", "), "{name} changed"),
            }
        }
        // The body.
        let got = base64_decode(sc["body_base64"].as_str().unwrap_or_default())
            .expect("body_base64 is base64");
        assert_eq!(sc["body_size_bytes"], got.len());
        let limit = c.call.as_ref().map_or(self.cap, |s| s.max_bytes);
        assert!(
            u64::try_from(c.body.len()).unwrap_or(u64::MAX) <= limit,
            "a body over max_response_bytes answered"
        );
        let json_type = head.headers.get("content-type").is_some_and(is_json_type);
        if !json_type {
            assert_eq!(got, c.body, "a body that is not JSON-typed changed");
            return;
        }
        let Ok(parsed) = serde_json::from_slice::<Value>(&c.body) else {
            // JSON-typed but unparsable: its registered URLs replaced in the text.
            assert_eq!(
                got,
                text_rewritten(&self.reg, &c.body),
                "an unparsable JSON-typed body's text rewrite"
            );
            for t in self.reg.iter() {
                for form in url_forms(t.url()) {
                    assert!(
                        !contains_bytes(&got, form.as_bytes()),
                        "the URL of '{}' left in an unparsable JSON-typed body",
                        t.label()
                    );
                }
            }
            return;
        };
        let prm = is_prm(&parsed);
        let mut before = Vec::new();
        rewritable(&parsed, prm, &mut before);
        let registered = |s: &&str| self.reg.find_url(s.trim()).next().is_some();
        if !before.iter().any(registered) {
            assert_eq!(got, c.body, "a body with nothing to rewrite changed");
        } else {
            let after: Value = serde_json::from_slice(&got).expect("a rewritten body is JSON");
            let mut left = Vec::new();
            rewritable(&after, prm, &mut left);
            assert!(
                !left.iter().any(registered),
                "a registered URL survived the rewrite (PRM document: {prm})"
            );
            assert_eq!(
                is_prm(&after),
                prm,
                "the rewrite made or unmade a PRM document"
            );
            if prm {
                if let Some(r) = parsed.get("resource").filter(|r| r.is_string()) {
                    assert_eq!(
                        after.get("resource"),
                        Some(r),
                        "a PRM document's top-level resource rewritten"
                    );
                }
            }
        }
    }

    /// No registered URL in `json`, but an echo of the command's payload, the audience or a
    /// header value of the target's that is passed on.
    fn no_url(&self, i: usize, json: &str, audience: Option<&str>, passed: &[String]) {
        let c = &self.cmds[i];
        for t in self.reg.iter() {
            let url = t.url();
            if json.contains(url) {
                let echoed = c.payload.contains(url)
                    || c.strings.iter().any(|s| s.contains(url))
                    || passed.iter().any(|s| s.contains(url));
                assert!(
                    echoed || audience == Some(url),
                    "the URL of '{}' left Harpoon: {json}",
                    t.label()
                );
            }
        }
    }

    // --- inputs ----------------------------------------------------------------------------

    fn command(
        &mut self,
        payload: String,
        structured: bool,
        modern: bool,
        id: Option<Value>,
        call: Option<CallSpec>,
        deadline: Option<u8>,
    ) {
        let deadline = deadline.map(|d| self.now + Duration::from_millis(u64::from(d) * 100));
        let notice = matches!(
            Message::parse(&payload),
            Ok(Message::Notification { .. } | Message::Response { .. } | Message::Error { .. })
        );
        let framed = framed_value(&payload);
        let mut strings = Vec::new();
        if let Some(v) = &framed {
            all_strings(v, &mut strings);
            // A cancellation reaches the connection at once: the request it names may end
            // with client_internal.
            if v["method"] == "notifications/cancelled" && v.get("id").is_none() {
                let target = &v["params"]["requestId"];
                for c in self.cmds.iter_mut().filter(|c| c.pending()) {
                    if c.id.as_ref() == Some(target) {
                        c.cancel_notified = true;
                    }
                }
            }
        }
        let i = self.cmds.len();
        self.cmds.push(Cmd {
            payload: payload.clone(),
            strings,
            notice,
            structured,
            modern,
            id: if notice { None } else { id },
            call,
            deadline,
            ended: false,
            cancelled: false,
            cancel_notified: false,
            fetches: 0,
            fetch: FetchState::None,
            fetch_cancelled: false,
            first_deadline: None,
            first_headers: None,
            started: None,
            timeout_at: None,
            cross_origin: false,
            last_request: None,
            head: None,
            body: Vec::new(),
            result: None,
            error: None,
        });
        self.h
            .handle_command(self.now, Self::cmd_id(i), &payload, deadline);
        self.drain(Ctx::Command(i));
        if notice {
            assert!(
                self.cmds[i].ended,
                "a notification not acknowledged at once"
            );
        }
    }

    fn request(&mut self, req: &Req, id: &Id, modern: bool, deadline: Option<u8>, pretty: bool) {
        let idv = id_value(id);
        let mut call = None;
        let (method, mut params) = match req {
            Req::Initialize { version } => {
                let v =
                    ["2025-11-25", "2025-06-18", MODERN, "1999-01-01"][usize::from(*version) % 4];
                (
                    "initialize",
                    json!({"protocolVersion": v, "capabilities": {},
                           "clientInfo": {"name": "tunnel-service", "version": "1"}}),
                )
            }
            Req::ToolsList => ("tools/list", json!({})),
            Req::Other(m) => (METHODS[usize::from(*m) % METHODS.len()], json!({})),
            Req::ListTargets {
                category,
                source,
                tags,
                extra,
            } => {
                let mut a = Map::new();
                if let Some(c) = category {
                    a.insert(
                        "category".into(),
                        json!(["oauth", "custom", "OAUTH", "x"][usize::from(*c) % 4]),
                    );
                }
                if let Some(s) = source {
                    a.insert(
                        "source".into(),
                        json!(["config", "oauth_discovery", "x"][usize::from(*s) % 3]),
                    );
                }
                if let Some(t) = tags {
                    let t: Vec<&str> = t
                        .iter()
                        .take(4)
                        .map(|i| {
                            [
                                "read",
                                "oauth",
                                "token-endpoint",
                                "custom",
                                "Token-Endpoint ",
                            ][usize::from(*i) % 5]
                        })
                        .collect();
                    a.insert("tags".into(), json!(t));
                }
                if *extra {
                    a.insert("label".into(), json!("api"));
                }
                (
                    "tools/call",
                    json!({"name": "list_targets", "arguments": a}),
                )
            }
            Req::Call(args) => {
                let (a, spec) = call_args(args, &self.reg, self.cap, self.redirects_cap);
                call = Some(spec);
                ("tools/call", json!({"name": "call_target", "arguments": a}))
            }
            Req::Audience(sel) => {
                let mut a = Map::new();
                if let Some(l) = label_value(sel, &self.reg) {
                    a.insert("label".into(), l);
                }
                (
                    "tools/call",
                    json!({"name": "get_oauth_target_audience", "arguments": a}),
                )
            }
            Req::UnknownTool(name) => ("tools/call", json!({"name": name, "arguments": {}})),
            Req::ArgumentsNotObject(b) => (
                "tools/call",
                json!({"name": if *b { "call_target" } else { "list_targets" }, "arguments": 5}),
            ),
        };
        if modern {
            params["_meta"] = modern_meta();
        }
        let v = json!({"jsonrpc": "2.0", "id": idv, "method": method, "params": params});
        let payload = if pretty {
            serde_json::to_string_pretty(&v).unwrap_or_default()
        } else {
            v.to_string()
        };
        self.command(payload, true, modern, Some(idv), call, deadline);
    }

    fn notify(&mut self, n: &Notif, modern: bool) {
        let meta = |mut p: Value| {
            if modern {
                p["_meta"] = modern_meta();
            }
            p
        };
        let v = match n {
            Notif::Initialized => {
                json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": meta(json!({}))})
            }
            Notif::Cancel { nth, reason } => {
                let ids: Vec<Value> = self.cmds.iter().filter_map(|c| c.id.clone()).collect();
                let target = ids
                    .get(usize::from(*nth) % ids.len().max(1))
                    .cloned()
                    .unwrap_or(json!(0));
                let mut p = json!({"requestId": target});
                if *reason {
                    p["reason"] = json!("the caller gave up");
                }
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": meta(p)})
            }
            Notif::CancelId(id) => {
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": meta(json!({"requestId": id_value(id)}))})
            }
            Notif::Other(m) => {
                let m = [
                    "notifications/roots/list_changed",
                    "notifications/progress",
                    "x/y",
                ][usize::from(*m) % 3];
                json!({"jsonrpc": "2.0", "method": m, "params": meta(json!({}))})
            }
            Notif::Response { id, error } => {
                if *error {
                    json!({"jsonrpc": "2.0", "id": id_value(id), "error": {"code": -1, "message": "no"}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id_value(id), "result": {}})
                }
            }
        };
        self.command(v.to_string(), true, modern, None, None, None);
    }

    fn cmd_of_open(&self) -> Option<(usize, bool)> {
        let i = self.open?;
        match self.cmds[i].fetch {
            FetchState::Open { head } => Some((i, head)),
            _ => None,
        }
    }

    fn head(&mut self, head: ResponseHead) -> bool {
        let Some((i, false)) = self.cmd_of_open() else {
            return false;
        };
        self.cmds[i].head = Some(head.clone());
        self.cmds[i].fetch = FetchState::Open { head: true };
        let r = self.h.handle_fetch_head(self.now, Self::cmd_id(i), head);
        assert!(r.is_ok(), "a first head refused: {r:?}");
        self.drain(Ctx::Report(i));
        true
    }

    fn ensure_head(&mut self) {
        if let Some((_, false)) = self.cmd_of_open() {
            self.head(ResponseHead {
                status: 200,
                headers: Headers::new(),
            });
        }
    }

    fn body(&mut self, chunk: &[u8]) {
        self.ensure_head();
        let Some((i, true)) = self.cmd_of_open() else {
            return;
        };
        self.cmds[i].body.extend_from_slice(chunk);
        let r = self.h.handle_fetch_body(self.now, Self::cmd_id(i), chunk);
        assert!(r.is_ok(), "body bytes after the head refused: {r:?}");
        self.drain(Ctx::Report(i));
        let c = &self.cmds[i];
        let limit = c.call.as_ref().map_or(self.cap, |s| s.max_bytes);
        if u64::try_from(c.body.len()).unwrap_or(u64::MAX) > limit {
            assert!(
                c.fetch_cancelled,
                "a body over max_response_bytes not stopped"
            );
        }
    }

    fn end(&mut self) {
        self.ensure_head();
        let Some((i, true)) = self.cmd_of_open() else {
            return;
        };
        self.cmds[i].fetch = FetchState::Done;
        self.open = None;
        let head = self.cmds[i].head.clone().expect("a head before the end");
        let r = self.h.handle_fetch_end(self.now, Self::cmd_id(i));
        assert!(r.is_ok(), "an end after the head refused: {r:?}");
        self.drain(Ctx::Report(i));
        // An encoded answer (identity was asked for) is refused, and nothing else fails here.
        let c = &self.cmds[i];
        let encoded = encodings(&head);
        match c.result {
            Some(CallResult::Answered) => {
                assert!(
                    encoded.is_empty(),
                    "an encoded answer accepted: {encoded:?}"
                )
            }
            Some(CallResult::Failed) => {
                assert!(!encoded.is_empty(), "an answer without encoding failed");
                let error = c.error.as_deref().unwrap_or_default();
                let prefix = "the answer is encoded (Content-Encoding: ";
                assert!(error.starts_with(prefix), "the encoding's error: {error}");
                // The message names the first coding.
                if let Some(only) = encoded.first() {
                    assert_eq!(
                        error,
                        format!(
                            "{prefix}{}) although identity was asked for; Harpoon returns only \
                             bodies it can rewrite",
                            only.chars().take(40).collect::<String>()
                        ),
                        "the encoding's error"
                    );
                }
            }
            _ => {}
        }
    }

    fn fail(&mut self, failure: TunnelFailure) {
        let Some((i, _)) = self.cmd_of_open() else {
            return;
        };
        self.cmds[i].fetch = FetchState::Done;
        self.open = None;
        let r = self
            .h
            .handle_fetch_failed(self.now, Self::cmd_id(i), failure);
        assert!(
            r.is_ok(),
            "a failure of the outstanding request refused: {r:?}"
        );
        self.drain(Ctx::Report(i));
    }

    fn misuse(&mut self, what: u8) {
        let Some((i, head)) = self.cmd_of_open() else {
            return;
        };
        let cmd = Self::cmd_id(i);
        let r = if head {
            let head = ResponseHead {
                status: 500,
                headers: Headers::new(),
            };
            self.h.handle_fetch_head(self.now, cmd, head)
        } else if what % 2 == 0 {
            self.h.handle_fetch_body(self.now, cmd, b"early")
        } else {
            self.h.handle_fetch_end(self.now, cmd)
        };
        assert!(
            matches!(r, Err(UsageError::OutOfOrder(_))),
            "a misordered report accepted: {r:?}"
        );
        assert_eq!(self.drain(Ctx::Quiet), 0, "a refused report had an effect");
    }

    fn late(&mut self, nth: u8, what: u8) {
        if self.cmds.is_empty() {
            return;
        }
        let i = usize::from(nth) % (self.cmds.len() + 1);
        if Some(i) == self.open {
            return;
        }
        let cmd = Self::cmd_id(i);
        let now = self.now;
        // Late or unknown: whatever it answers, nothing may follow.
        let _ = match what % 4 {
            0 => self.h.handle_fetch_head(
                now,
                cmd,
                ResponseHead {
                    status: 200,
                    headers: Headers::new(),
                },
            ),
            1 => self.h.handle_fetch_body(now, cmd, b"late"),
            2 => self.h.handle_fetch_end(now, cmd),
            _ => self.h.handle_fetch_failed(
                now,
                cmd,
                TunnelFailure::before_response(FailureSource::Connect, None),
            ),
        };
        assert_eq!(self.drain(Ctx::Quiet), 0, "a late report had an effect");
    }

    fn cancel(&mut self, i: usize) {
        let known = i < self.cmds.len();
        let pending = known && self.cmds[i].pending();
        if pending {
            self.cmds[i].cancelled = true;
        }
        let open = self.open == Some(i);
        self.h.cancel(self.now, Self::cmd_id(i));
        if pending {
            self.drain(Ctx::Cancel);
            if open {
                assert!(
                    self.cmds[i].fetch_cancelled,
                    "a cancel left its request outstanding"
                );
            }
        } else {
            assert_eq!(
                self.drain(Ctx::Quiet),
                0,
                "a cancel of a command not pending had an effect"
            );
        }
    }

    fn time(&mut self, tenths: u16, expire: bool) {
        let to = self.now + Duration::from_millis(u64::from(tenths) * 100);
        self.advance(to, expire);
    }

    /// Time to the outstanding call's `timeout_ms`: exactly, a millisecond before or after;
    /// or to whatever `poll_timeout` names next.
    fn due(&mut self, how: u8, expire: bool) {
        let ms = Duration::from_millis(1);
        let at = self.open.and_then(|i| self.cmds[i].timeout_at);
        let to = match (how % 4, at) {
            (0, Some(t)) => Some(t),
            (1, Some(t)) => t.checked_sub(ms),
            (2, Some(t)) => t.checked_add(ms),
            _ => self.h.poll_timeout(),
        };
        if let Some(to) = to.filter(|&to| to >= self.now) {
            self.advance(to, expire);
        }
    }

    /// Time is `to`: the engine drops the commands whose deadline passed (before or after
    /// Harpoon's `handle_timeout`), and a call whose `timeout_ms` ran out ends timed out.
    fn advance(&mut self, to: Instant, expire: bool) {
        self.now = to;
        if expire {
            self.expire();
        }
        let now = self.now;
        let open = self.open.map(|i| (i, self.cmds[i].timeout_at));
        self.h.handle_timeout(now);
        self.drain(Ctx::Timeout);
        match open {
            Some((i, Some(t))) if now >= t => {
                let c = &self.cmds[i];
                assert_eq!(
                    c.result,
                    Some(CallResult::TimedOut),
                    "a call past its timeout_ms not ended by handle_timeout"
                );
                assert!(
                    c.fetch_cancelled,
                    "a timed-out call's request not cancelled"
                );
                assert!(c.ended, "a timed-out call not answered");
            }
            Some((i, Some(_))) => {
                // Not due: only the connection's age can end it here.
                let c = &self.cmds[i];
                assert!(
                    c.result.is_none() || c.result == Some(CallResult::Cancelled),
                    "a call ended by handle_timeout before its timeout_ms: {:?}",
                    c.result
                );
            }
            _ => {}
        }
        if let Some(t) = self.h.poll_timeout() {
            assert!(t > now, "a deadline in the past after handle_timeout");
        }
        if !expire {
            self.expire();
        }
    }

    /// The engine drops the commands whose deadline passed.
    fn expire(&mut self) {
        let due: Vec<usize> = (0..self.cmds.len())
            .filter(|&i| {
                self.cmds[i].pending() && self.cmds[i].deadline.is_some_and(|d| d <= self.now)
            })
            .collect();
        for i in due {
            if self.cmds[i].pending() {
                self.cancel(i);
            }
        }
    }
}

fn failure_of(source: u8, kind: u8) -> TunnelFailure {
    let source = FailureSource::ALL[usize::from(source) % FailureSource::ALL.len()];
    let kind = (kind % 2 == 0)
        .then(|| TransportErrorKind::ALL[usize::from(kind / 2) % TransportErrorKind::ALL.len()]);
    TunnelFailure::before_response(source, kind)
}

fuzz_target!(|input: Input| {
    let mut reg = Registry::new(false);
    let mut picked = vec![0usize];
    for (bit, at) in (1..POOL.len()).enumerate() {
        if picked.len() < 4 && input.targets & (1 << bit) != 0 {
            picked.push(at);
        }
    }
    if picked.len() < 2 {
        picked.push(1);
    }
    for at in picked {
        let (label, url, role, tags) = POOL[at];
        let spec = TargetSpec {
            label: label.to_owned(),
            url: url.to_owned(),
            description: format!("the {label} target"),
            source: match role {
                Some(r) => TargetSource::OauthDiscovery { role: r.to_owned() },
                None => TargetSource::Config,
            },
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        };
        assert!(reg.register(spec).is_ok(), "a pool target registers");
    }
    let cap = [100 * 1024, 16, 300, 4096][usize::from(input.cap % 4)];
    let age = [600, 1, 20, 90][usize::from(input.age % 4)];
    let mut config = HarpoonConfig::new(reg.clone(), [input.entropy; 64]);
    config.max_response_cap = cap;
    config.connection_max_age = Duration::from_secs(age);
    let redirects_cap = [5, 0, 2, 20][usize::from((input.age / 4) % 4)];
    config.max_redirects = redirects_cap;
    config.user_agent = USER_AGENT.to_owned();
    let now = Instant::now();
    let h = Harpoon::new(config, now).expect("Harpoon sets up");
    assert!(h.is_enabled() && h.is_idle());
    let mut f = Fuzz {
        h,
        reg,
        now,
        cap,
        redirects_cap,
        cmds: Vec::new(),
        open: None,
        records: 0,
        calls_ended: 0,
        dropped: None,
        last_fetch: None,
    };
    for op in input.ops.iter().take(48) {
        match op {
            Op::Request {
                req,
                id,
                modern,
                deadline,
                pretty,
            } => f.request(req, id, *modern, *deadline, *pretty),
            Op::Notify { notif, modern } => f.notify(notif, *modern),
            Op::Raw { text, deadline } => {
                f.command(text.clone(), false, false, None, None, *deadline)
            }
            Op::Head(h) => {
                if !f.head(head_of(h)) {
                    f.misuse(0);
                }
            }
            Op::Body(b) => f.body(&body_bytes(b)),
            Op::End => f.end(),
            Op::Answer { head, body, cuts } => {
                if f.cmd_of_open().is_none() {
                    continue;
                }
                let i = f.open;
                f.head(head_of(head));
                let bytes = body_bytes(body);
                let mut at = 0;
                for cut in cuts.iter().take(3) {
                    let to = at + usize::from(*cut) % (bytes.len() - at + 1);
                    if f.open != i {
                        break;
                    }
                    f.body(&bytes[at..to]);
                    at = to;
                }
                if f.open == i && at < bytes.len() {
                    f.body(&bytes[at..]);
                }
                if f.open == i {
                    f.end();
                }
            }
            Op::Fail { source, kind } => f.fail(failure_of(*source, *kind)),
            Op::Misuse(w) => f.misuse(*w),
            Op::Late { nth, what } => f.late(*nth, *what),
            Op::Cancel(n) => {
                let i = usize::from(*n) % (f.cmds.len() + 1);
                f.cancel(i);
            }
            Op::Time { tenths, expire } => f.time(*tenths, *expire),
            Op::Due { how, expire } => f.due(*how, *expire),
        }
    }
    // The driver answers whatever is still outstanding: then every command has ended.
    for _ in 0..64 {
        if f.open.is_none() {
            break;
        }
        f.fail(TunnelFailure::before_response(FailureSource::Connect, None));
    }
    assert!(f.open.is_none(), "outbound requests without end");
    assert!(f.cmds.iter().all(|c| !c.pending()), "commands left waiting");
});

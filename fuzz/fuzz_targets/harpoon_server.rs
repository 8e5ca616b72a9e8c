//! Harpoon's MCP server (`tunnel::harpoon::server::Harpoon`) over a registry of 2 to 4 targets
//! (a token endpoint among them, two sharing one URL in different spellings), fed an arbitrary
//! sequence of inputs: commands (`initialize`, `tools/list`, other methods, `tools/call` of
//! `list_targets`, `call_target` and `get_oauth_target_audience` with fuzzed arguments, in the
//! modern or the legacy era, sometimes pretty-printed over several lines; notifications,
//! `notifications/cancelled` among them, client responses; arbitrary text), the outbound
//! request's answer (any status, redirects with a `Location` that is sometimes a registered URL
//! in some spelling, relative or with a dot segment; any headers; bodies in arbitrary chunks,
//! JSON ones holding registered URLs as values and keys), its failure, misordered and late
//! reports, the engine's cancels and time (with deadlines expiring).
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
//!   within `max_redirects`; 303, and 301/302 after a POST, as a bodiless GET) and with the same
//!   deadline; arguments `call_target` documents as refused never lead to a fetch, and valid
//!   modern ones always do;
//! - an outbound request carries exactly the caller's headers that `headers.rs` documents as
//!   kept (never `Cookie`, `Host`, `Proxy-*`, `X-Forwarded-*`, forwarding, hop-by-hop or
//!   `Connection`-nominated ones) and then our `User-Agent`, once; `HeadersDropped` counts the
//!   rest;
//! - a `call_target` answer carries the delivered status, the headers as delivered but for
//!   `Location` and `Content-Location` naming a registered URL (`harpoon://<label>` then) and
//!   `Link` (no bracketed registered URL left); its body is the delivered one byte for byte,
//!   unless its content type is JSON, it parses and holds a registered URL as a string or key
//!   outside the top-level `resource`: then none is left; never more than `max_response_bytes`;
//!   a redirect is answered only with `follow_redirects: false`;
//! - no `Reply` or `Message` holds a registered target's URL, but a `call_target` answer's
//!   passed-through headers, an echo of the command's own payload, or
//!   `get_oauth_target_audience`'s audience (which is a token endpoint's registered URL);
//! - one `Call` record per started call when it ends, labels registered or folded;
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
use mcpwire_core::tunnel::engine::{CommandId, UsageError};
use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind, TunnelFailure};
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
const REQ_HEADERS: [&str; 26] = [
    "Accept",
    "Authorization",
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
const RESP_HEADERS: [&str; 9] = [
    "Location",
    "location",
    "Content-Location",
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

const KEYS: [&str; 8] = [
    "issuer",
    "token_endpoint",
    "jwks_uri",
    "authorization_servers",
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

fn call_args(a: &CallArgs, reg: &Registry, cap: u64) -> (Map<String, Value>, CallSpec) {
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
    let mut max_redirects = 5;
    if let Some(n) = &a.max_redirects {
        let v = num_value(n);
        match in_range(&v, 0, 20, 5) {
            Some(r) => max_redirects = u32::try_from(r).unwrap_or(20),
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

/// The strings a JSON answer's rewrite looks at: every key, every string but a top-level
/// `resource` (`rewrite.rs`).
fn rewritable<'a>(v: &'a Value, top: bool, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| rewritable(x, false, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k);
                if !(top && k == "resource" && x.is_string()) {
                    rewritable(x, false, out);
                }
            }
        }
        _ => {}
    }
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

/// The caller's headers `headers.rs` documents as kept, and how many it drops.
fn expected_kept(headers: &[(String, String)]) -> (Vec<(String, String)>, usize) {
    const HOP: [&str; 7] = [
        "connection",
        "keep-alive",
        "te",
        "transfer-encoding",
        "upgrade",
        "trailer",
        "proxy-connection",
    ];
    const FWD: [&str; 11] = [
        "forwarded",
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
    let mut kept = Vec::new();
    let mut dropped = 0;
    for (n, v) in headers {
        let l = n.to_ascii_lowercase();
        let drop = http::validate_name(n).is_err()
            || http::validate_value(n, v).is_err()
            || HOP.contains(&l.as_str())
            || l.starts_with("proxy-")
            || FWD.contains(&l.as_str())
            || l.starts_with("x-forwarded-")
            || ["host", "content-length", "cookie", "user-agent"].contains(&l.as_str())
            || nominated.contains(&l);
        if drop {
            dropped += 1;
        } else {
            kept.push((n.clone(), v.clone()));
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
    last_request: Option<http::Request>,
    head: Option<ResponseHead>,
    body: Vec<u8>,
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
    cmds: Vec<Cmd>,
    /// The command whose outbound request is outstanding.
    open: Option<usize>,
    records: usize,
    calls_ended: usize,
    dropped: Option<usize>,
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
                self.no_url(i, &json, None);
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
                    self.dropped = Some(classes.len());
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
                    && n != "content-length",
                "the caller's {n} header went out"
            );
        }
        assert_eq!(
            names.iter().filter(|n| *n == "user-agent").count(),
            1,
            "one User-Agent"
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
                let (mut kept, n_dropped) = expected_kept(&spec.headers);
                kept.sort();
                sent.sort();
                assert_eq!(sent, kept, "the headers sent");
                assert_eq!(dropped.unwrap_or(0), n_dropped, "the headers dropped");
                let own = now.checked_add(spec.timeout);
                let expect = match (own, c.deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                assert_eq!(Some(deadline), expect, "the first request's deadline");
            }
            c.first_deadline = Some(deadline);
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
            if head.status == 303
                || (matches!(head.status, 301 | 302) && prev.method == http::Method::Post)
            {
                assert_eq!(request.method, http::Method::Get);
                assert!(request.body.is_empty());
            } else {
                assert_eq!(request.method, prev.method);
                assert_eq!(request.body, prev.body);
            }
            assert_eq!(
                request.headers, prev.headers,
                "a redirect keeps the headers"
            );
        }
        c.fetches += 1;
        c.fetch = FetchState::Open { head: false };
        c.head = None;
        c.body.clear();
        c.last_request = Some(request);
        self.open = Some(i);
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
        self.no_url(i, json, audience);
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
        let parsed = serde_json::from_slice::<Value>(&c.body)
            .ok()
            .filter(|_| json_type);
        let mut before = Vec::new();
        if let Some(v) = &parsed {
            rewritable(v, true, &mut before);
        }
        let registered = |s: &&str| self.reg.find_url(s.trim()).next().is_some();
        if !before.iter().any(registered) {
            assert_eq!(got, c.body, "a body with nothing to rewrite changed");
        } else {
            let after: Value = serde_json::from_slice(&got).expect("a rewritten body is JSON");
            let mut left = Vec::new();
            rewritable(&after, true, &mut left);
            assert!(
                !left.iter().any(registered),
                "a registered URL survived the rewrite"
            );
        }
    }

    /// No registered URL in `json`, but an echo of the command's payload or the audience.
    fn no_url(&self, i: usize, json: &str, audience: Option<&str>) {
        let c = &self.cmds[i];
        for t in self.reg.iter() {
            let url = t.url();
            if json.contains(url) {
                let echoed = c.payload.contains(url) || c.strings.iter().any(|s| s.contains(url));
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
            last_request: None,
            head: None,
            body: Vec::new(),
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
                let (a, spec) = call_args(args, &self.reg, self.cap);
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
        let r = self.h.handle_fetch_end(self.now, Self::cmd_id(i));
        assert!(r.is_ok(), "an end after the head refused: {r:?}");
        self.drain(Ctx::Report(i));
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
        self.now += Duration::from_millis(u64::from(tenths) * 100);
        if expire {
            self.expire();
        }
        self.h.handle_timeout(self.now);
        self.drain(Ctx::Timeout);
        if let Some(t) = self.h.poll_timeout() {
            assert!(t > self.now, "a deadline in the past after handle_timeout");
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
    config.user_agent = USER_AGENT.to_owned();
    let now = Instant::now();
    let h = Harpoon::new(config, now).expect("Harpoon sets up");
    assert!(h.is_enabled() && h.is_idle());
    let mut f = Fuzz {
        h,
        reg,
        now,
        cap,
        cmds: Vec::new(),
        open: None,
        records: 0,
        calls_ended: 0,
        dropped: None,
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

//! `mcp::legacy::LegacySession` fed arbitrary `initialize` responses (structured results with
//! known, modern and arbitrary versions, errors, raw text), arbitrary response headers
//! (`Mcp-Session-Id` values of any shape), HTTP statuses, and request/notification building.
//!
//! Invariants checked after every step (all from the module docs):
//! - no panic; `negotiated()` is present exactly when the phase is `Ready`;
//! - the negotiated version is always one of `KNOWN_LEGACY_VERSIONS` and the one the server
//!   chose; a response with an unknown version is refused (`UnsupportedVersion`), returns the
//!   session to idle, and never becomes the negotiated version;
//! - a refusal, an invalid result or an invalid session id returns to idle; a message that is
//!   not the awaited response leaves the state as it was; a response with nothing outstanding
//!   is `NotInitializing`;
//! - session headers (and every outgoing message's headers) never contain CR, LF or NUL;
//!   `Mcp-Session-Id` is visible ASCII and is the server's; `MCP-Protocol-Version` is the
//!   negotiated version;
//! - the session id never shows in `Debug` of the session or in an error;
//! - a 404 to the current session id expires the session; to another one it is stale; any
//!   other status changes nothing.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::Id;
use mcpwire_core::mcp::headers::{PROTOCOL_VERSION_HEADER, SESSION_ID_HEADER};
use mcpwire_core::mcp::legacy::{LegacyError, LegacySession, Phase, SessionStatus};
use mcpwire_core::mcp::{ClientCapabilities, Implementation, KNOWN_LEGACY_VERSIONS};
use serde_json::{json, Value};

const MARKER: &str = "zzsid-";

#[derive(Arbitrary, Debug)]
enum Version {
    Known(u8),
    Modern,
    Any(String),
    NotAString,
}

#[derive(Arbitrary, Debug)]
enum Body {
    Result {
        version: Version,
        caps: u8,
        server_info: bool,
        instructions: Option<String>,
    },
    Error {
        code: i16,
        message: String,
        data: Option<String>,
        null_id: bool,
    },
    Notification,
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Sid {
    None,
    Marker(String),
    Raw(String),
    Two(String, String),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Initialize {
        id: i8,
        string: bool,
    },
    Respond {
        right_id: bool,
        body: Body,
        sid: Sid,
        extra: Vec<(String, String)>,
    },
    Status {
        status: u16,
        sent: u8,
        other: String,
    },
    Request {
        method: String,
        params: u8,
    },
    Notification {
        method: String,
        params: u8,
    },
}

fn params(p: u8) -> Value {
    match p % 4 {
        0 => Value::Null,
        1 => json!({}),
        2 => json!({"name": "x", "arguments": {"a": 1}}),
        _ => json!([1]),
    }
}

fn no_ctl(h: &Headers) {
    for (n, v) in h.iter() {
        assert!(
            !n.bytes()
                .chain(v.bytes())
                .any(|b| matches!(b, b'\r' | b'\n' | 0)),
            "a header with CR, LF or NUL"
        );
    }
}

fn id_value(id: &Id) -> Value {
    match id {
        Id::Number(n) => serde_json::from_str(&n.to_string()).unwrap_or(Value::Null),
        Id::String(s) => Value::String(s.clone()),
    }
}

struct World {
    s: LegacySession,
    expected: Option<Id>,
    /// The session id the server gave (as the fuzzer sent it), once ready.
    sid: Option<String>,
    version: Option<String>,
    /// Whether the session id also appears in the response that set it (then the redaction
    /// check is skipped: the server's own text may be shown).
    sid_in_input: bool,
}

impl World {
    fn check(&self) {
        let phase = self.s.phase();
        assert_eq!(
            self.s.negotiated().is_some(),
            phase == Phase::Ready,
            "negotiated() and the phase disagree"
        );
        if let Some(n) = self.s.negotiated() {
            assert!(
                KNOWN_LEGACY_VERSIONS.contains(&n.protocol_version.as_str()),
                "negotiated an unknown version {:?}",
                n.protocol_version
            );
            assert_eq!(Some(&n.protocol_version), self.version.as_ref());
        }
        assert_eq!(
            self.s.has_session(),
            self.sid.is_some() && phase == Phase::Ready
        );
        match self.s.session_headers() {
            Ok(h) => {
                assert_eq!(phase, Phase::Ready);
                no_ctl(&h);
                let v = h.get(PROTOCOL_VERSION_HEADER).expect("a version header");
                assert_eq!(Some(v), self.version.as_deref());
                let sid = h.get(SESSION_ID_HEADER);
                assert_eq!(
                    sid,
                    self.sid.as_deref(),
                    "the session header is not the server's"
                );
                if let Some(sid) = sid {
                    assert!(
                        !sid.is_empty() && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)),
                        "a session id that is not visible ASCII"
                    );
                }
                assert_eq!(
                    h.get_all(SESSION_ID_HEADER).count(),
                    usize::from(sid.is_some())
                );
            }
            Err(e) => {
                assert_ne!(phase, Phase::Ready);
                assert_eq!(e, LegacyError::NotReady);
            }
        }
        if let Some(sid) = self.sid.as_ref().filter(|s| s.starts_with(MARKER)) {
            if !self.sid_in_input {
                let dbg = format!("{:?}", self.s);
                assert!(!dbg.contains(sid.as_str()), "the session id shows in Debug");
            }
        }
    }

    fn no_secret_in(e: &LegacyError, sid: Option<&str>, in_input: bool) {
        if let Some(sid) = sid.filter(|s| s.starts_with(MARKER)) {
            if !in_input {
                assert!(
                    !e.to_string().contains(sid),
                    "the session id shows in an error: {sid:?} in {e}"
                );
                assert!(
                    !format!("{e:?}").contains(sid),
                    "the session id shows in an error"
                );
            }
        }
    }
}

/// Whether any JSON string (key or value) in `text` contains `needle` after decoding escapes.
fn json_strings_contain(text: &str, needle: &str) -> bool {
    fn walk(v: &Value, needle: &str) -> bool {
        match v {
            Value::String(s) => s.contains(needle),
            Value::Array(a) => a.iter().any(|x| walk(x, needle)),
            Value::Object(o) => o.iter().any(|(k, x)| k.contains(needle) || walk(x, needle)),
            _ => false,
        }
    }
    serde_json::from_str::<Value>(text).is_ok_and(|v| walk(&v, needle))
}

fuzz_target!(|ops: Vec<Op>| {
    let mut w = World {
        s: LegacySession::new(
            Implementation::new("fuzz-client", "1.0"),
            ClientCapabilities::none().with_elicitation_form(),
        ),
        expected: None,
        sid: None,
        version: None,
        sid_in_input: false,
    };
    w.check();
    for op in ops.into_iter().take(64) {
        match op {
            Op::Initialize { id, string } => {
                let id = if string {
                    Id::String(format!("init-{id}"))
                } else {
                    Id::Number(i128::from(id))
                };
                let out = w.s.initialize(id.clone());
                no_ctl(&out.headers);
                let v: Value = serde_json::from_str(&out.body).expect("initialize is JSON");
                assert_eq!(v["method"], "initialize");
                assert_eq!(v["id"], id_value(&id));
                assert_eq!(v["params"]["protocolVersion"], "2025-11-25");
                assert!(!out.headers.contains(SESSION_ID_HEADER));
                assert!(!out.headers.contains(PROTOCOL_VERSION_HEADER));
                assert_eq!(w.s.phase(), Phase::Initializing);
                w.expected = Some(id);
                w.sid = None;
                w.version = None;
            }
            Op::Respond {
                right_id,
                body,
                sid,
                extra,
            } => {
                let before = w.s.phase();
                let id = match (&w.expected, right_id) {
                    (Some(id), true) => id_value(id),
                    _ => json!(4242),
                };
                let mut offered: Option<String> = None;
                let mut structured_result = false;
                let text = match &body {
                    Body::Result {
                        version,
                        caps,
                        server_info,
                        instructions,
                    } => {
                        structured_result = true;
                        let v = match version {
                            Version::Known(k) => {
                                json!(
                                    KNOWN_LEGACY_VERSIONS
                                        [usize::from(*k) % KNOWN_LEGACY_VERSIONS.len()]
                                )
                            }
                            Version::Modern => json!("2026-07-28"),
                            Version::Any(s) => json!(s),
                            Version::NotAString => json!(20251125),
                        };
                        offered = v.as_str().map(str::to_owned);
                        let mut result = json!({"protocolVersion": v});
                        match caps % 4 {
                            0 => {}
                            1 => result["capabilities"] = json!([]),
                            2 => result["capabilities"] = json!({"tools": {"listChanged": true}}),
                            _ => result["capabilities"] = json!({}),
                        }
                        if *server_info {
                            result["serverInfo"] = json!({"name": "s", "version": "1"});
                        }
                        if let Some(i) = instructions {
                            result["instructions"] = json!(i);
                        }
                        json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
                    }
                    Body::Error {
                        code,
                        message,
                        data,
                        null_id,
                    } => {
                        let id = if *null_id { Value::Null } else { id };
                        let mut err = json!({"code": code, "message": message});
                        if let Some(d) = data {
                            err["data"] = json!(d);
                        }
                        json!({"jsonrpc": "2.0", "id": id, "error": err}).to_string()
                    }
                    Body::Notification => {
                        json!({"jsonrpc": "2.0", "method": "notifications/message"}).to_string()
                    }
                    Body::Raw(s) => s.clone(),
                };
                let mut headers = Headers::new();
                for (n, v) in extra.iter().take(4) {
                    let _ = headers.append(n.as_str(), v.as_str());
                }
                let given: Option<String> = match &sid {
                    Sid::None => None,
                    Sid::Marker(s) => Some(format!("{MARKER}{s}")),
                    Sid::Raw(s) => Some(s.clone()),
                    Sid::Two(a, b) => {
                        let _ = headers.append("mcp-session-id", format!("{MARKER}{a}"));
                        Some(format!("{MARKER}{b}"))
                    }
                };
                if let Some(g) = &given {
                    let _ = headers.append("MCP-SESSION-ID", g.as_str());
                }
                // What the session should keep: the first session header, if it is visible ASCII.
                let first = headers.get(SESSION_ID_HEADER).map(str::to_owned);
                let first_ok = first
                    .as_deref()
                    .map(|v| !v.is_empty() && v.bytes().all(|b| (0x21..=0x7e).contains(&b)));
                // In the input as written, or inside a JSON string once its escapes are decoded
                // (the module can only repeat what the body says; it keeps no refused header).
                let in_input = first.as_deref().is_some_and(|f| {
                    text.contains(f)
                        || json_strings_contain(&text, f)
                        || extra.iter().any(|(n, v)| n.contains(f) || v.contains(f))
                });

                match w.s.handle_initialize_response(&headers, &text) {
                    Ok(out) => {
                        assert_eq!(before, Phase::Initializing);
                        assert_eq!(w.s.phase(), Phase::Ready);
                        let n = w.s.negotiated().expect("ready").clone();
                        if structured_result {
                            assert_eq!(
                                Some(&n.protocol_version),
                                offered.as_ref(),
                                "negotiated a version the server did not choose"
                            );
                        }
                        assert_ne!(first_ok, Some(false), "accepted a bad session id");
                        w.sid = first;
                        w.sid_in_input = in_input;
                        w.version = Some(n.protocol_version.clone());
                        no_ctl(&out.headers);
                        let v: Value = serde_json::from_str(&out.body).expect("JSON");
                        assert_eq!(v["method"], "notifications/initialized");
                        assert_eq!(Ok(out.headers), w.s.session_headers());
                    }
                    Err(e) => {
                        World::no_secret_in(&e, first.as_deref(), in_input);
                        let after = w.s.phase();
                        match &e {
                            LegacyError::NotInitializing => {
                                assert_ne!(before, Phase::Initializing);
                                assert_eq!(after, before, "NotInitializing changed the state");
                            }
                            LegacyError::UnexpectedId { .. } => {
                                assert_eq!(before, Phase::Initializing);
                                assert_eq!(after, before, "a foreign response changed the state");
                            }
                            LegacyError::Malformed(_) => {
                                assert_eq!(before, Phase::Initializing);
                                assert_ne!(after, Phase::Ready);
                            }
                            LegacyError::UnsupportedVersion { offered: o, .. } => {
                                assert_eq!(after, Phase::Idle);
                                if let Some(off) = &offered {
                                    assert!(!KNOWN_LEGACY_VERSIONS.contains(&off.as_str()));
                                    assert!(off.starts_with(o.as_str()));
                                }
                            }
                            LegacyError::Rejected { .. }
                            | LegacyError::InvalidResult(_)
                            | LegacyError::InvalidSessionId => {
                                assert_eq!(before, Phase::Initializing);
                                assert_eq!(after, Phase::Idle, "a refusal did not return to idle");
                            }
                            other => panic!("unexpected error {other:?}"),
                        }
                        if after == Phase::Idle {
                            w.sid = None;
                            w.version = None;
                        }
                        // A known version offered in a refused response is still not negotiated.
                        assert!(w.s.negotiated().is_none() || before == Phase::Ready);
                    }
                }
            }
            Op::Status {
                status,
                sent,
                other,
            } => {
                let before = w.s.phase();
                let mut h = Headers::new();
                match sent % 3 {
                    0 => {
                        if let Some(sid) = &w.sid {
                            let _ = h.append(SESSION_ID_HEADER, sid.as_str());
                        }
                    }
                    1 => {
                        let _ = h.append(SESSION_ID_HEADER, other.as_str());
                    }
                    _ => {}
                }
                let sent_sid = h.get(SESSION_ID_HEADER).map(str::to_owned);
                let status = if status & 1 == 0 { 404 } else { status % 600 };
                let r = w.s.handle_status(status, &h);
                let current = w.s.has_session();
                match r {
                    SessionStatus::Expired => {
                        assert_eq!(status, 404);
                        assert!(sent_sid.is_some() && sent_sid == w.sid);
                        assert_eq!(w.s.phase(), Phase::Idle);
                        assert!(!current);
                        w.sid = None;
                        w.version = None;
                    }
                    SessionStatus::Stale => {
                        assert_eq!(status, 404);
                        assert!(sent_sid.is_some() && sent_sid != w.sid);
                        assert_eq!(w.s.phase(), before);
                    }
                    SessionStatus::Unaffected => {
                        assert!(status != 404 || sent_sid.is_none());
                        assert_eq!(w.s.phase(), before);
                    }
                }
            }
            Op::Request { method, params: p } => {
                let id = Id::Number(7);
                match w.s.request(&id, &method, params(p)) {
                    Ok(out) => {
                        assert_eq!(w.s.phase(), Phase::Ready);
                        no_ctl(&out.headers);
                        let v: Value = serde_json::from_str(&out.body).expect("JSON");
                        assert_eq!(v["method"], json!(method));
                        assert_eq!(v["id"], 7);
                        assert_eq!(Ok(out.headers), w.s.session_headers());
                    }
                    Err(LegacyError::NotReady) => assert_ne!(w.s.phase(), Phase::Ready),
                    Err(LegacyError::ParamsNotObject(_)) => assert_eq!(p % 4, 3),
                    Err(e) => panic!("unexpected error {e:?}"),
                }
            }
            Op::Notification { method, params: p } => match w.s.notification(&method, params(p)) {
                Ok(out) => {
                    assert_eq!(w.s.phase(), Phase::Ready);
                    no_ctl(&out.headers);
                    let v: Value = serde_json::from_str(&out.body).expect("JSON");
                    assert_eq!(v["method"], json!(method));
                    assert!(v.get("id").is_none());
                }
                Err(LegacyError::NotReady) => assert_ne!(w.s.phase(), Phase::Ready),
                Err(LegacyError::ParamsNotObject(_)) => assert_eq!(p % 4, 3),
                Err(e) => panic!("unexpected error {e:?}"),
            },
        }
        w.check();
    }
});

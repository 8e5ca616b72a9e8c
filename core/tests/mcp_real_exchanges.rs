//! Transcript tests of the MCP client core driven by REAL exchanges: the requests a raw client
//! sent to real servers (PyPI `mcp==2.3.0`, npm `@modelcontextprotocol/server@2.4.0`,
//! `@modelcontextprotocol/server-everything@2026.8.31`) and what they answered, recorded under
//! `fixtures/mcp/<server>/<transport>/NN-<what>.json` (format and findings:
//! `fixtures/mcp/README.md`). The fixtures are read at run time.
//!
//! Every test feeds the recorded bytes to a `mcpwire_core::mcp` module and checks that it
//! decides what the spec (`shared/spec/mcp-2026-07-28/`, legacy `mcp-2025-11-25-legacy/`) says,
//! and, where the raw client's next request is recorded and was accepted by the server, that
//! the request our code builds is the same one. Each test's doc comment names the spec section.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::{Id, Message};
use mcpwire_core::mcp::cache::{Lookup, RequestKey, ResultCache};
use mcpwire_core::mcp::era::{
    classify_http_400, classify_probe, negotiate_version, Http400Verdict, LegacyEvidence,
    ModernError, ProbeOutcome, ProbeVerdict, VersionNegotiation,
};
use mcpwire_core::mcp::headers::{partition_tools, request_headers};
use mcpwire_core::mcp::legacy::{LegacySession, Phase, SessionStatus};
use mcpwire_core::mcp::meta::RequestMeta;
use mcpwire_core::mcp::mrtr::{InputCapabilities, MrtrError, MrtrRound, ResultKind};
use mcpwire_core::mcp::request::{classify_response, RequestsConfig, ResponseKind, Routed};
use mcpwire_core::mcp::subscription::{Change, EndReason, Event, Output, Subscriptions};
use mcpwire_core::mcp::{
    cache, discover, era, meta, mrtr, request, AuthContext, CallOptions, ClientCapabilities,
    DiscoverResult, ElicitAnswer, ElicitationRequest, Era, Implementation, InputAnswer,
    InputRequest, SubscriptionFilter, SubscriptionsConfig, ToolHeaders, Transport, VersionError,
    LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSION,
};
use mcpwire_core::sse::{SseEvent, SseParser};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

// ---------------------------------------------------------------------------------------------
// Loading the recorded exchanges
// ---------------------------------------------------------------------------------------------

/// The recorded servers, in the order of the README.
const SERVERS: [&str; 3] = ["python-sdk", "typescript-sdk", "server-everything"];
/// The two dual-era SDK servers.
const MODERN: [&str; 2] = ["python-sdk", "typescript-sdk"];

/// Requests the raw client corrupted on purpose (a header that disagrees with the body, or is
/// missing): they are not what a conforming client sends.
const CORRUPTED_HEADERS: [&str; 5] = [
    "tools-call-header-param-wrong",
    "tools-call-header-param-missing",
    "tools-list-version-header-mismatch",
    "tools-call-name-header-mismatch",
    "missing-mcp-method-header",
];

/// One recorded exchange.
struct Fx {
    /// Path relative to `fixtures/mcp/`.
    rel: String,
    server: String,
    transport: String,
    era: String,
    what: String,
    v: Value,
}

impl Fx {
    fn http(&self) -> bool {
        self.transport == "http"
    }
    fn modern_era(&self) -> bool {
        self.era == LATEST_PROTOCOL_VERSION
    }
    fn request(&self) -> &Value {
        &self.v["request"]
    }
    fn body(&self) -> &Value {
        &self.v["request"]["body"]
    }
    fn method(&self) -> Option<&str> {
        self.body().get("method").and_then(Value::as_str)
    }
    fn response(&self) -> &Value {
        &self.v["response"]
    }
    fn status(&self) -> Option<u64> {
        self.response().get("status").and_then(Value::as_u64)
    }
    /// The recorded request headers, names lower-cased.
    fn request_headers(&self) -> BTreeMap<String, String> {
        lower_map(self.request().get("headers"))
    }
    /// The recorded response headers as a header map.
    fn response_headers(&self) -> Headers {
        let mut h = Headers::new();
        if let Some(Value::Object(m)) = self.response().get("headers") {
            for (k, v) in m {
                h.append(k.clone(), v.as_str().unwrap()).unwrap();
            }
        }
        h
    }
    /// Whether the HTTP response body is an SSE stream (kept as raw text).
    fn sse_text(&self) -> Option<&str> {
        if self.http() {
            self.response().get("body").and_then(Value::as_str)
        } else {
            None
        }
    }
    /// Every JSON-RPC message the server sent for this exchange, as JSON text, in order.
    fn server_messages(&self) -> Vec<String> {
        let r = self.response();
        if self.http() {
            match r.get("body") {
                Some(Value::String(sse)) => decode_sse(sse.as_bytes())
                    .into_iter()
                    .filter(|e| !e.data.is_empty())
                    .map(|e| e.data)
                    .collect(),
                Some(v @ Value::Object(_)) => vec![v.to_string()],
                _ => Vec::new(),
            }
        } else {
            let mut out: Vec<String> = r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(Value::to_string)
                .collect();
            if let Some(b) = r.get("body").filter(|b| !b.is_null()) {
                out.push(b.to_string());
            }
            out
        }
    }
    /// The final response (result or error) to the recorded request, as JSON text: on stdio
    /// the recorded `body` (other messages may answer other requests), on HTTP the last
    /// response on the POST's stream.
    fn final_response(&self) -> Option<String> {
        if !self.http() {
            return self
                .response()
                .get("body")
                .filter(|b| !b.is_null())
                .map(Value::to_string);
        }
        self.server_messages().into_iter().rev().find(|m| {
            matches!(
                Message::parse(m),
                Ok(Message::Response { .. } | Message::Error { .. })
            )
        })
    }
    /// The `result` member of the final response.
    fn result(&self) -> Option<Value> {
        let text = self.final_response()?;
        let v: Value = serde_json::from_str(&text).unwrap();
        v.get("result").cloned()
    }
}

fn lower_map(v: Option<&Value>) -> BTreeMap<String, String> {
    match v {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.as_str().unwrap().to_owned()))
            .collect(),
        _ => BTreeMap::new(),
    }
}

fn header_map(h: &Headers) -> BTreeMap<String, String> {
    h.iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect()
}

fn fixtures_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/mcp")).to_path_buf()
}

fn all() -> &'static [Fx] {
    static ALL: OnceLock<Vec<Fx>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut out = Vec::new();
        for server in SERVERS {
            for transport in ["http", "stdio"] {
                let dir = fixtures_dir().join(server).join(transport);
                let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect();
                files.sort();
                for path in files {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let v: Value = serde_json::from_str(&text).unwrap();
                    let name = path.file_name().unwrap().to_str().unwrap().to_owned();
                    out.push(Fx {
                        rel: format!("{server}/{transport}/{name}"),
                        server: server.to_owned(),
                        transport: transport.to_owned(),
                        era: v["era"].as_str().unwrap().to_owned(),
                        what: v["what"].as_str().unwrap().to_owned(),
                        v,
                    });
                }
            }
        }
        assert_eq!(out.len(), 147, "the README counts 147 exchanges");
        out
    })
}

/// The fixture `<server>/<transport>/` whose `what` is `what`.
fn fx(server: &str, transport: &str, what: &str) -> &'static Fx {
    all()
        .iter()
        .find(|f| f.server == server && f.transport == transport && f.what == what)
        .unwrap_or_else(|| panic!("no fixture {server}/{transport}/*-{what}.json"))
}

/// Decodes a whole SSE body with the core parser.
fn decode_sse(bytes: &[u8]) -> Vec<SseEvent> {
    let mut p = SseParser::new();
    p.push(bytes);
    let mut out = Vec::new();
    while let Some(e) = p.next_event().unwrap() {
        out.push(e);
    }
    while let Some(e) = p.finish().unwrap() {
        out.push(e);
    }
    out
}

/// Decodes an SSE body fed one byte at a time.
fn decode_sse_bytewise(bytes: &[u8]) -> Vec<SseEvent> {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    for b in bytes {
        p.push(std::slice::from_ref(b));
        while let Some(e) = p.next_event().unwrap() {
            out.push(e);
        }
    }
    while let Some(e) = p.finish().unwrap() {
        out.push(e);
    }
    out
}

/// The raw JSON text of member `key` of the JSON object `json`.
fn raw_member(json: &str, key: &str) -> Option<String> {
    let m: BTreeMap<String, Box<RawValue>> = serde_json::from_str(json).unwrap();
    m.get(key).map(|r| r.get().to_owned())
}

/// The usable tools of `server`'s recorded modern HTTP `tools/list`, with their annotations.
fn tool_headers_of(server: &str) -> BTreeMap<String, ToolHeaders> {
    let list = fx(server, "http", "tools-list");
    let tools = list.result().unwrap()["tools"].as_array().unwrap().clone();
    let (kept, excluded) = partition_tools(tools);
    assert!(excluded.is_empty(), "{}: {excluded:?}", list.rel);
    kept.into_iter()
        .map(|(t, h)| (t["name"].as_str().unwrap().to_owned(), h))
        .collect()
}

/// The capture client's identity, as recorded in every request.
fn capture_client() -> Implementation {
    Implementation::new("mcpwire-capture", "0.1.0")
}

// ---------------------------------------------------------------------------------------------
// 1. Headers mirrored from the body
// ---------------------------------------------------------------------------------------------

/// `basic/transports/streamable-http.mdx`, "Request Metadata" ("Protocol Version Header",
/// "Standard Request Headers", "Custom Headers from Tool Parameters" / "Value Encoding"):
/// for every 2026-07-28 POST the real servers accepted, the headers built from the recorded body
/// alone (with the `x-mcp-header` annotations of that server's recorded `tools/list`) are
/// exactly the headers the raw client sent: `Accept`, `Content-Type`, `MCP-Protocol-Version`,
/// `Mcp-Method`, `Mcp-Name`, `Mcp-Param-Region` (plain and `=?base64?…?=`), names compared
/// case-insensitively.
#[test]
fn accepted_modern_posts_get_exactly_the_recorded_headers_from_their_body() {
    let mut checked = Vec::new();
    for f in all() {
        if !(f.http() && f.modern_era() && f.request()["method"] == "POST") {
            continue;
        }
        if CORRUPTED_HEADERS.contains(&f.what.as_str()) {
            continue;
        }
        let tools = if MODERN.contains(&f.server.as_str()) {
            tool_headers_of(&f.server)
        } else {
            BTreeMap::new()
        };
        let body = f.body().to_string();
        let th = match f.method() {
            Some("tools/call") => tools.get(f.body()["params"]["name"].as_str().unwrap()),
            _ => None,
        };
        let ours = request_headers(&body, th).unwrap_or_else(|e| panic!("{}: {e}", f.rel));
        assert_eq!(header_map(&ours), f.request_headers(), "{}", f.rel);
        checked.push(f.rel.as_str());
    }
    // 2 × 23 accepted SDK requests (28 POSTs minus the 5 corrupted ones) + 2 probes of
    // server-everything.
    assert_eq!(checked.len(), 48, "{checked:#?}");
    assert!(checked.contains(&"python-sdk/http/05-tools-call-header-param-non-ascii.json"));
}

/// `basic/transports/streamable-http.mdx`, "Server Validation": the requests the raw client
/// corrupted on purpose differ from what the client builds exactly in the corrupted header,
/// and the servers' answers to them are recognized as `-32020` HeaderMismatch (modern) by
/// `era::classify_http_400` — except Python's answer to a `MCP-Protocol-Version` that
/// disagrees with `_meta`, which is the README's nonconforming finding (routed to its legacy
/// transport: `-32600 "Missing session ID"`), read as legacy.
#[test]
fn corrupted_header_requests_differ_only_in_that_header_and_get_header_mismatch() {
    let mut seen = 0;
    for f in all() {
        if !CORRUPTED_HEADERS.contains(&f.what.as_str()) {
            continue;
        }
        seen += 1;
        let tools = tool_headers_of(&f.server);
        let th = match f.method() {
            Some("tools/call") => tools.get(f.body()["params"]["name"].as_str().unwrap()),
            _ => None,
        };
        let ours = header_map(&request_headers(&f.body().to_string(), th).unwrap());
        let recorded = f.request_headers();
        let differing: Vec<&str> = ours
            .keys()
            .chain(recorded.keys())
            .filter(|k| ours.get(*k) != recorded.get(*k))
            .map(String::as_str)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let expected: &[&str] = match f.what.as_str() {
            "tools-call-header-param-wrong" | "tools-call-header-param-missing" => {
                &["mcp-param-region"]
            }
            "tools-list-version-header-mismatch" => &["mcp-protocol-version"],
            "tools-call-name-header-mismatch" => &["mcp-name"],
            "missing-mcp-method-header" => &["mcp-method"],
            other => panic!("{other}"),
        };
        assert_eq!(differing, expected, "{}", f.rel);
        assert_eq!(f.status(), Some(400), "{}", f.rel);
        let verdict = classify_http_400(f.response()["body"].to_string().as_bytes());
        if f.rel == "python-sdk/http/08-tools-list-version-header-mismatch.json" {
            assert_eq!(verdict, Http400Verdict::Legacy, "README finding");
        } else {
            assert!(
                matches!(
                    verdict,
                    Http400Verdict::Modern(ModernError::HeaderMismatch { .. })
                ),
                "{}: {verdict:?}",
                f.rel
            );
        }
    }
    assert_eq!(seen, 10);
}

// ---------------------------------------------------------------------------------------------
// 2. x-mcp-header schema walk on the real tool lists
// ---------------------------------------------------------------------------------------------

/// `basic/transports/streamable-http.mdx`, "Schema Extension" and `server/tools.mdx`,
/// "x-mcp-header": `partition_tools` on every recorded `tools/list` result (both eras, both
/// transports, all three servers) — which tools are kept, with which `Mcp-Param-*` headers,
/// and which are excluded and why (snapshot). The SDKs' `query_region` keeps its `Region`
/// annotation on `arguments.region`; nothing real is excluded.
#[test]
fn partition_tools_on_every_recorded_tools_list() {
    let mut report = String::new();
    let mut lists = 0;
    for f in all() {
        if f.method() != Some("tools/list") {
            continue;
        }
        let Some(tools) = f.result().and_then(|r| r.get("tools").cloned()) else {
            continue;
        };
        lists += 1;
        let (kept, excluded) = partition_tools(tools.as_array().unwrap().clone());
        writeln!(report, "{}", f.rel).unwrap();
        for (tool, h) in &kept {
            let params: Vec<String> = h
                .params()
                .iter()
                .map(|p| format!("{} <- arguments.{}", p.header_name(), p.path().join(".")))
                .collect();
            writeln!(
                report,
                "  kept {}{}",
                tool["name"].as_str().unwrap(),
                if params.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", params.join(", "))
                }
            )
            .unwrap();
        }
        for e in &excluded {
            writeln!(report, "  EXCLUDED {e}").unwrap();
        }
        if MODERN.contains(&f.server.as_str()) {
            let region = kept
                .iter()
                .find(|(t, _)| t["name"] == "query_region")
                .map(|(_, h)| h)
                .unwrap_or_else(|| panic!("{}: query_region missing", f.rel));
            assert_eq!(region.params().len(), 1);
            assert_eq!(region.params()[0].name(), "Region");
            assert_eq!(region.params()[0].path(), ["region".to_owned()]);
        }
        assert!(excluded.is_empty(), "{}: {excluded:?}", f.rel);
    }
    // SDKs: http tools-list, bad-cursor, legacy; stdio tools-list, legacy (5 each); TS also
    // answers the session-less legacy tools/list and the stdio one naming 2099-01-01 (2);
    // server-everything: http legacy, stdio modern-before-initialize and legacy (3).
    assert_eq!(lists, 15);
    insta::assert_snapshot!(report);
}

// ---------------------------------------------------------------------------------------------
// 3. Eras and versions
// ---------------------------------------------------------------------------------------------

/// `basic/transports/streamable-http.mdx`, "Backward Compatibility": what a real legacy server
/// answers to a modern first request (`400 {"code":-32000,"message":"Bad Request: Server not
/// initialized"}`, for `server/discover` and `tools/list` alike) is not a recognized modern
/// error, so the client falls back to `initialize`; the same holds for the SDKs' own legacy
/// legs (`-32600 "Missing session ID"`, `-32000 "No valid session ID provided"`).
#[test]
fn real_legacy_http_400_bodies_classify_as_legacy() {
    let cases = [
        ("server-everything", "modern-server-discover"),
        ("server-everything", "modern-tools-list"),
        ("server-everything", "legacy-no-session"),
        ("server-everything", "legacy-bogus-session"),
        ("python-sdk", "legacy-no-session"),
    ];
    for (server, what) in cases {
        let f = fx(server, "http", what);
        assert_eq!(f.status(), Some(400), "{}", f.rel);
        let body = f.response()["body"].to_string();
        assert_eq!(
            classify_http_400(body.as_bytes()),
            Http400Verdict::Legacy,
            "{}",
            f.rel
        );
    }
}

/// `basic/transports/streamable-http.mdx`, "Backward Compatibility" and `basic/versioning.mdx`,
/// "Protocol Version Negotiation": every `400` a real modern server sent with `-32022`,
/// `-32021` or `-32020` is a recognized modern error carrying what the client needs
/// (`data.supported` / `data.requested`; `data.requiredCapabilities`); a `400` with another
/// code (`-32602` for an unknown resource or a missing `clientCapabilities`) is not one.
#[test]
fn real_modern_http_400_bodies_classify_as_modern_with_their_error() {
    let mut table = String::new();
    for f in all() {
        if !(f.http() && f.modern_era() && f.status() == Some(400)) {
            continue;
        }
        if !MODERN.contains(&f.server.as_str()) {
            continue;
        }
        let body = &f.response()["body"];
        let code = body["error"]["code"].as_i64().unwrap();
        let verdict = classify_http_400(body.to_string().as_bytes());
        writeln!(table, "{} {code} -> {verdict:?}", f.rel).unwrap();
        let data = &body["error"]["data"];
        match (code, &verdict) {
            (
                -32022,
                Http400Verdict::Modern(ModernError::UnsupportedProtocolVersion {
                    supported,
                    requested,
                }),
            ) => {
                assert_eq!(supported, &vec![LATEST_PROTOCOL_VERSION.to_owned()]);
                assert_eq!(requested.as_deref(), Some("2099-01-01"));
                assert_eq!(data["supported"], json!(supported));
            }
            (
                -32021,
                Http400Verdict::Modern(ModernError::MissingRequiredClientCapability { required }),
            ) => {
                assert_eq!(
                    Value::Object(required.clone()),
                    data["requiredCapabilities"]
                );
                assert!(required.contains_key("elicitation"), "{}", f.rel);
            }
            (-32020, Http400Verdict::Modern(ModernError::HeaderMismatch { .. })) => {}
            (-32602, Http400Verdict::Legacy) => {}
            (-32600, Http400Verdict::Legacy) => {
                assert_eq!(
                    f.what, "tools-list-version-header-mismatch",
                    "README finding"
                );
            }
            _ => panic!("{}: code {code} classified {verdict:?}", f.rel),
        }
    }
    insta::assert_snapshot!(table);
}

/// `basic/transports/stdio.mdx`, "Backward Compatibility": the `server/discover` probe on the
/// real stdio servers. The SDKs answer with a `DiscoverResult` (modern, `2026-07-28`
/// supported); server-everything answers `-32601 Method not found` (legacy: "any other
/// error"); Python's `-32022` to an unknown version on stdio is a recognized modern error
/// (modern: retry with a supported version, do not fall back).
#[test]
fn stdio_discover_probe_on_real_servers() {
    for server in MODERN {
        let f = fx(server, "stdio", "server-discover");
        let text = f.final_response().unwrap();
        let msg = Message::parse(&text).unwrap();
        let verdict = classify_probe(ProbeOutcome::from_message(&msg).unwrap());
        assert_eq!(verdict.era(), Era::Modern, "{}", f.rel);
        let ProbeVerdict::Modern(d) = verdict else {
            panic!("{}: {verdict:?}", f.rel)
        };
        assert!(d.supports_version(LATEST_PROTOCOL_VERSION));
    }

    let f = fx("server-everything", "stdio", "modern-server-discover");
    let text = f.final_response().unwrap();
    let msg = Message::parse(&text).unwrap();
    let verdict = classify_probe(ProbeOutcome::from_message(&msg).unwrap());
    assert_eq!(
        verdict,
        ProbeVerdict::Legacy(LegacyEvidence::Error {
            code: -32601,
            message: "Method not found".to_owned()
        })
    );
    assert_eq!(verdict.era(), Era::Legacy);

    let f = fx("python-sdk", "stdio", "unsupported-protocol-version");
    let text = f.final_response().unwrap();
    let msg = Message::parse(&text).unwrap();
    let verdict = classify_probe(ProbeOutcome::from_message(&msg).unwrap());
    assert!(
        matches!(
            verdict,
            ProbeVerdict::ModernError(ModernError::UnsupportedProtocolVersion { .. })
        ),
        "{verdict:?}"
    );
    assert_eq!(verdict.era(), Era::Modern);
    assert_eq!(
        classify_probe(ProbeOutcome::TimedOut),
        ProbeVerdict::Legacy(LegacyEvidence::TimedOut)
    );
}

/// `basic/versioning.mdx`, "Protocol Version Negotiation": with the real `data.supported` of
/// every recorded `-32022` (HTTP from both SDKs, stdio from Python), a client speaking
/// `2026-07-28` and `2025-11-25` retries with `2026-07-28` (a modern version, not the one
/// rejected); a client speaking neither gets a typed error naming both lists.
#[test]
fn negotiate_version_with_the_real_supported_lists() {
    let cases = [
        fx("python-sdk", "http", "unsupported-protocol-version"),
        fx("typescript-sdk", "http", "unsupported-protocol-version"),
        fx("python-sdk", "stdio", "unsupported-protocol-version"),
    ];
    for f in cases {
        let text = f.final_response().unwrap();
        let Ok(Message::Error { error, .. }) = Message::parse(&text) else {
            panic!("{}", f.rel)
        };
        let Some(ModernError::UnsupportedProtocolVersion {
            supported,
            requested,
        }) = ModernError::from_error(&error)
        else {
            panic!("{}: {error:?}", f.rel)
        };
        let requested = requested.unwrap();
        assert_eq!(
            requested,
            f.body()["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        );
        let choice = negotiate_version(
            &[LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSION],
            &supported,
            &requested,
        )
        .unwrap();
        assert_eq!(choice.version, LATEST_PROTOCOL_VERSION);
        assert_eq!(choice.era, Some(Era::Modern));
        assert!(!choice.same_as_requested);

        let mut n = VersionNegotiation::new(&[LATEST_PROTOCOL_VERSION]);
        assert_eq!(
            n.on_unsupported(&supported, &requested).unwrap().version,
            LATEST_PROTOCOL_VERSION
        );

        let err = negotiate_version(&["2030-01-01"], &supported, &requested).unwrap_err();
        assert_eq!(
            err,
            VersionError::NoCommonVersion {
                ours: vec!["2030-01-01".to_owned()],
                supported: supported.clone(),
                requested: requested.clone(),
            }
        );
        let shown = err.to_string();
        assert!(shown.contains("2030-01-01") && shown.contains(LATEST_PROTOCOL_VERSION));
    }
}

/// `basic/index.mdx`, "`_meta`" ("Per-request protocol fields": a missing required
/// capability is `-32021` with `data.requiredCapabilities`) and "Error Codes": the real `-32021` (HTTP and stdio, both SDKs) names the elicitation
/// capability; a host that supports form elicitation declares it and retries, and that
/// declaration is the one the raw client sent next, which the server answered with
/// `input_required` instead of `-32021`.
#[test]
fn real_missing_capability_errors_lead_to_the_recorded_declaration() {
    for server in MODERN {
        for (transport, refused, accepted) in [
            (
                "http",
                "tools-call-elicit-no-capability",
                "tools-call-elicit-input-required",
            ),
            (
                "stdio",
                "tools-call-elicit-no-capability",
                "tools-call-elicit-input-required",
            ),
        ] {
            let f = fx(server, transport, refused);
            let text = f.final_response().unwrap();
            let Ok(Message::Error { error, .. }) = Message::parse(&text) else {
                panic!("{}", f.rel)
            };
            let Some(ModernError::MissingRequiredClientCapability { required }) =
                ModernError::from_error(&error)
            else {
                panic!("{}: {error:?}", f.rel)
            };
            let declared: ClientCapabilities = serde_json::from_value(
                f.body()["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone(),
            )
            .unwrap();
            assert!(era::missing_capabilities(&declared, &required).is_some());
            let host = ClientCapabilities::none().with_elicitation_form();
            let now = era::declare_required(&declared, &host, &required).unwrap();
            let next = fx(server, transport, accepted);
            assert_eq!(
                now.to_value(),
                next.body()["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"],
                "{}",
                next.rel
            );
            // A host without elicitation cannot satisfy it.
            assert!(
                era::declare_required(&declared, &ClientCapabilities::none(), &required).is_err()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 4. server/discover and caching hints
// ---------------------------------------------------------------------------------------------

/// `server/discover.mdx`, "Response" / "DiscoverResult" and `server/utilities/caching.mdx`,
/// "Time-to-Live (TTL) Field", "Cache Scope Field": every recorded discover result parses
/// (versions, capabilities, serverInfo from `_meta`), writes back to an equal value, and its
/// `ttlMs` / `cacheScope` read the same through `DiscoverResult` and `cache::parse_hints`; the
/// real servers send `ttlMs: 0` (stale at once) and `private`, so a cached copy is stale at
/// the instant of receipt and invisible to another authorization context.
#[test]
fn recorded_discover_results_parse_and_feed_the_cache_consistently() {
    let mut n = 0;
    for f in all() {
        if f.method() != Some(discover::METHOD) {
            continue;
        }
        // The probe itself: `discover_request` builds the recorded body.
        let id: Id = serde_json::from_value(f.body()["id"].clone()).unwrap();
        let m = RequestMeta::new(LATEST_PROTOCOL_VERSION, ClientCapabilities::none())
            .with_client_info(capture_client());
        let probe: Value = serde_json::from_str(&discover::discover_request(&id, &m)).unwrap();
        assert_eq!(&probe, f.body(), "{}", f.rel);
        let Some(result) = f.result() else { continue };
        n += 1;
        let text = result.to_string();
        let d = DiscoverResult::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", f.rel));
        assert_eq!(
            d.supported_versions,
            vec![LATEST_PROTOCOL_VERSION.to_owned()]
        );
        assert_eq!(
            d.instructions.as_deref(),
            Some("Fixture server for mcpwire tests.")
        );
        let info = d.server_info().unwrap();
        assert!(info.name.starts_with("mcpwire-fixture-"), "{}", f.rel);
        assert_eq!(DiscoverResult::from_value(d.to_value()).unwrap(), d);
        // The TS server does not declare resources.subscribe (README finding), Python does.
        let subscribe = d.capabilities.resources.as_ref().unwrap().subscribe;
        match f.server.as_str() {
            "python-sdk" => assert_eq!(subscribe, Some(true)),
            _ => assert_eq!(subscribe, None),
        }

        let hints = cache::parse_hints(&text).unwrap();
        assert_eq!(d.ttl(), hints.ttl, "{}", f.rel);
        assert_eq!(d.ttl(), Duration::ZERO);
        assert_eq!(d.cache_scope.as_ref().map(|s| s.as_str()), Some("private"));
        assert_eq!(hints.scope, cache::CacheScope::Private);
        assert!(hints.scope_recognized);

        let key = RequestKey::from_request(discover::METHOD, f.body().get("params")).unwrap();
        assert_eq!(key, RequestKey::discover());
        let mut c = ResultCache::default();
        let t0 = Instant::now();
        let alice = AuthContext::new("alice");
        let ticket = c.begin_fetch(key.clone());
        c.insert(t0, ticket, &alice, &text).unwrap();
        assert!(matches!(c.lookup(t0, &key, &alice), Lookup::Stale(_)));
        assert!(matches!(
            c.lookup(t0, &key, &AuthContext::new("bob")),
            Lookup::Miss
        ));
    }
    assert_eq!(n, 4);
}

/// `server/utilities/caching.mdx`, "Cacheable Results", "Cache Key" and
/// `basic/patterns/mrtr.mdx`, "Client Requirements": every recorded modern request to a
/// cacheable method gets a cache key from its recorded params (`cursor` / `uri` in it), its
/// result is stored with the recorded hints (`ttlMs: 0` → stale at once, `private`), and an
/// MRTR retry (a recorded request with `inputResponses` / `requestState`) is never keyed.
#[test]
fn recorded_cacheable_results_are_keyed_and_stored_with_their_hints() {
    let mut stored = 0;
    for f in all() {
        if !(f.modern_era() && MODERN.contains(&f.server.as_str())) {
            continue;
        }
        let Some(method) = f.method() else { continue };
        let params = f.body().get("params");
        if params.is_some_and(|p| p.get("requestState").is_some()) {
            // tools/call is refused as uncacheable before its MRTR members are looked at.
            assert!(
                RequestKey::from_request(method, params).is_err(),
                "{}",
                f.rel
            );
            let mut as_read = params.unwrap().clone();
            as_read["uri"] = json!("fixture://readme");
            assert_eq!(
                RequestKey::from_request("resources/read", Some(&as_read)),
                Err(cache::CacheError::MrtrRetry),
                "{}",
                f.rel
            );
            continue;
        }
        if cache::CacheableMethod::from_method(method).is_none() {
            assert!(RequestKey::from_request(method, params).is_err());
            continue;
        }
        let Some(result) = f.result() else { continue };
        let key =
            RequestKey::from_request(method, params).unwrap_or_else(|e| panic!("{}: {e}", f.rel));
        if method == "resources/read" {
            assert_eq!(key.uri(), params.unwrap()["uri"].as_str());
        }
        if let Some(cursor) = params.and_then(|p| p.get("cursor")) {
            assert_eq!(key.cursor(), cursor.as_str());
        }
        let mut c = ResultCache::default();
        let t0 = Instant::now();
        let ctx = AuthContext::new("ctx");
        let s = c
            .insert(t0, c.begin_fetch(key.clone()), &ctx, &result.to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", f.rel));
        assert_eq!(s.hints.ttl, Duration::ZERO, "{}", f.rel);
        assert_eq!(s.hints.scope, cache::CacheScope::Private, "{}", f.rel);
        assert!(matches!(c.lookup(t0, &key, &ctx), Lookup::Stale(_)));
        stored += 1;
    }
    // Per SDK: http discover, tools/list ×2, prompts/list, resources/list, resources/read ×2,
    // templates/list (8) + stdio the same minus the bad cursor (7); plus TS stdio's
    // tools/list under an unsupported version (answered normally: README finding).
    assert_eq!(stored, 31);
}

// ---------------------------------------------------------------------------------------------
// 5. MRTR
// ---------------------------------------------------------------------------------------------

/// Drives `MrtrRound` through one recorded `input_required` → retry pair and checks the retry
/// against the one the raw client sent (which the server accepted).
fn replay_mrtr(server: &str, transport: &str, retry_what: &str, answer: ElicitAnswer) {
    let first = fx(server, transport, "tools-call-elicit-input-required");
    let retry = fx(server, transport, retry_what);
    let result = first.result().unwrap();
    let result_text = result.to_string();

    let ResultKind::InputRequired(ir) = mrtr::classify_result("tools/call", &result_text).unwrap()
    else {
        panic!("{}: not input_required", first.rel)
    };
    let recorded_keys: Vec<&String> = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    let keys: Vec<&String> = ir.input_requests().iter().map(|(k, _)| k).collect();
    assert_eq!(keys, recorded_keys, "{}", first.rel);
    let state_raw = raw_member(&result_text, "requestState").unwrap();
    assert_eq!(ir.request_state_json(), Some(state_raw.as_str()));

    let original_id: Id = serde_json::from_value(first.body()["id"].clone()).unwrap();
    let params_text = first.body()["params"].to_string();
    let caps = InputCapabilities {
        elicitation_form: true,
        ..InputCapabilities::default()
    };
    let mut round = MrtrRound::new(original_id.clone(), "tools/call", &params_text, caps).unwrap();
    let events = round.handle_input_required(ir).unwrap();
    assert_eq!(events.len(), 1);
    let ev = &events[0];
    let InputRequest::Elicitation(ElicitationRequest::Form(form)) = &ev.request else {
        panic!("{}: {:?}", first.rel, ev.request)
    };
    assert_eq!(form.message, "Really act on prod?");
    assert!(form.suspicious.is_empty());
    round
        .answer(&ev.key, InputAnswer::Elicitation(answer))
        .unwrap();

    // The original id may not be reused for the retry.
    assert!(matches!(
        round.build_retry(original_id, None),
        Err(MrtrError::IdReused(_))
    ));
    let retry_id: Id = serde_json::from_value(retry.body()["id"].clone()).unwrap();
    let built = round.build_retry(retry_id, None).unwrap();
    assert!(!built.cacheable());

    // Same members as the recorded retry the server accepted...
    let ours: Value = serde_json::from_str(built.body()).unwrap();
    assert_eq!(&ours, retry.body(), "{}", retry.rel);
    // ...and requestState byte-identical to what the server sent.
    let sent_state = raw_member(built.params_json(), "requestState").unwrap();
    assert_eq!(sent_state, state_raw);
    let recorded_state = raw_member(&retry.body()["params"].to_string(), "requestState").unwrap();
    assert_eq!(sent_state, recorded_state);
    // inputResponses carries exactly the server's keys.
    let responses: Vec<&String> = ours["params"]["inputResponses"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(responses, recorded_keys);
}

fn confirm() -> ElicitAnswer {
    let mut m = Map::new();
    m.insert("confirm".to_owned(), Value::Bool(true));
    ElicitAnswer::Accept(m)
}

/// `basic/patterns/mrtr.mdx`, "Basic Workflow" / "Client Requirements (Basic Workflow)":
/// on the real `input_required` results (Python's resolver-named key and sealed
/// `v1.<base64url>` state; the TS server's plain key and state), over HTTP and stdio, the
/// retry `MrtrRound` builds — new id, original params, `inputResponses` under the same keys,
/// `requestState` byte-exact — is the retry the raw client sent and the server completed.
#[test]
fn mrtr_retry_matches_the_accepted_recorded_retry() {
    for server in MODERN {
        replay_mrtr(server, "http", "tools-call-elicit-retry", confirm());
        replay_mrtr(server, "stdio", "tools-call-elicit-retry", confirm());
        replay_mrtr(
            server,
            "http",
            "tools-call-elicit-retry-declined",
            ElicitAnswer::Decline,
        );
        let done = fx(server, "http", "tools-call-elicit-retry");
        let kind = classify_response(&done.final_response().unwrap())
            .unwrap()
            .kind;
        assert_eq!(kind, ResponseKind::Complete, "{}", done.rel);
    }
}

/// `basic/patterns/mrtr.mdx`, "Client Requirements (Basic Workflow)" and `server/tools.mdx`,
/// "Error Handling": after a declined elicitation the real servers diverge — Python completes
/// with an `isError` tool result, the TS server asks again (`input_required`, same key and
/// state). The TS answer is a second round for the same `MrtrRound`, counted against the
/// round limit; with a limit of 1 it is refused.
#[test]
fn declined_elicitation_is_a_tool_error_or_a_second_round() {
    let py = fx("python-sdk", "http", "tools-call-elicit-retry-declined");
    let kind = classify_response(&py.final_response().unwrap())
        .unwrap()
        .kind;
    assert_eq!(kind, ResponseKind::ToolError);

    let first = fx("typescript-sdk", "http", "tools-call-elicit-input-required");
    let again = fx("typescript-sdk", "http", "tools-call-elicit-retry-declined");
    let kind = classify_response(&again.final_response().unwrap())
        .unwrap()
        .kind;
    assert_eq!(kind, ResponseKind::InputRequired);

    for (limit, second_ok) in [(10, true), (1, false)] {
        let caps = InputCapabilities {
            elicitation_form: true,
            ..InputCapabilities::default()
        };
        let mut round = MrtrRound::new(
            Id::from(11),
            "tools/call",
            &first.body()["params"].to_string(),
            caps,
        )
        .unwrap()
        .with_max_rounds(limit);
        let ResultKind::InputRequired(ir) =
            mrtr::classify_result("tools/call", &first.result().unwrap().to_string()).unwrap()
        else {
            panic!()
        };
        let ev = round.handle_input_required(ir).unwrap();
        round
            .answer(&ev[0].key, InputAnswer::Elicitation(ElicitAnswer::Decline))
            .unwrap();
        round.build_retry(Id::from(13), None).unwrap();
        let ResultKind::InputRequired(ir2) =
            mrtr::classify_result("tools/call", &again.result().unwrap().to_string()).unwrap()
        else {
            panic!()
        };
        let second = round.handle_input_required(ir2);
        if second_ok {
            let ev2 = second.unwrap();
            assert_eq!(ev2[0].key, "confirm");
            assert_eq!(round.rounds(), 2);
            round
                .answer(&ev2[0].key, InputAnswer::Elicitation(confirm()))
                .unwrap();
            let r = round.build_retry(Id::from(14), None).unwrap();
            assert_eq!(
                raw_member(r.params_json(), "requestState").as_deref(),
                Some("\"target=prod\"")
            );
        } else {
            assert!(matches!(
                second,
                Err(MrtrError::RoundLimitExceeded { limit: 1 })
            ));
        }
    }
}

/// `basic/patterns/mrtr.mdx`, "Client Requirements (Basic Workflow)" and
/// `client/elicitation.mdx`, "Capabilities": a real form elicitation reaching a request whose host declared no
/// elicitation capability is refused instead of being surfaced.
#[test]
fn real_input_request_without_declared_capability_is_refused() {
    let first = fx("python-sdk", "stdio", "tools-call-elicit-input-required");
    let mut round = MrtrRound::new(
        Id::from(6),
        "tools/call",
        &first.body()["params"].to_string(),
        InputCapabilities::default(),
    )
    .unwrap();
    let ResultKind::InputRequired(ir) =
        mrtr::classify_result("tools/call", &first.result().unwrap().to_string()).unwrap()
    else {
        panic!()
    };
    assert!(matches!(
        round.handle_input_required(ir),
        Err(MrtrError::UndeclaredCapability {
            capability: "elicitation.form",
            ..
        })
    ));
}

// ---------------------------------------------------------------------------------------------
// 6. Subscriptions
// ---------------------------------------------------------------------------------------------

fn listen_filter(f: &Fx) -> SubscriptionFilter {
    serde_json::from_value(f.body()["params"]["notifications"].clone()).unwrap()
}

fn listen_meta(f: &Fx) -> Map<String, Value> {
    f.body()["params"]["_meta"].as_object().unwrap().clone()
}

fn drain(s: &mut Subscriptions) -> Vec<Output> {
    std::iter::from_fn(|| s.poll_output()).collect()
}

fn events(outs: &[Output]) -> Vec<&Event> {
    outs.iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

/// Checks the acknowledgment and changes a real server delivered.
fn check_listen_events(server: &str, evs: &[&Event], handle_id: &Id) {
    let readme = vec!["fixture://readme".to_owned()];
    let Event::Acknowledged {
        id,
        accepted,
        dropped,
        ..
    } = evs[0]
    else {
        panic!("{server}: first event {:?}", evs[0])
    };
    assert_eq!(id, handle_id);
    assert!(accepted.tools_list_changed);
    let changes: Vec<&Change> = evs[1..]
        .iter()
        .map(|e| match e {
            Event::Changed { change, .. } => change,
            other => panic!("{server}: {other:?}"),
        })
        .collect();
    match server {
        "python-sdk" => {
            assert_eq!(accepted.resource_subscriptions, readme);
            assert!(dropped.is_empty(), "{dropped:?}");
            assert_eq!(
                changes,
                [
                    &Change::ResourceUpdated {
                        uri: "fixture://readme".to_owned()
                    },
                    &Change::ToolsListChanged
                ]
            );
        }
        _ => {
            // README finding: the TS server acknowledges only toolsListChanged.
            assert!(accepted.resource_subscriptions.is_empty());
            assert_eq!(
                dropped,
                &SubscriptionFilter {
                    resource_subscriptions: readme,
                    ..SubscriptionFilter::default()
                }
            );
            assert_eq!(changes, [&Change::ToolsListChanged]);
        }
    }
}

/// `basic/patterns/subscriptions.mdx`, "Opening a Stream", "Acknowledgment", "Receiving
/// Notifications", "Cancellation" with `basic/transports/streamable-http.mdx`, "Receiving
/// Messages": a listen with the recorded filter is the recorded request; the recorded SSE
/// stream is acknowledged (the TS server's dropped `resourceSubscriptions` reported as
/// dropped), its `resources/updated` / `tools/list_changed` are routed to the subscription,
/// and closing it closes the stream (the client closed it in the capture).
#[test]
fn recorded_http_listen_streams_are_acknowledged_and_routed() {
    for server in MODERN {
        let f = fx(server, "http", "subscriptions-listen");
        assert_eq!(f.response()["closed_by_client"], true);
        let listen_id: Id = serde_json::from_value(f.body()["id"].clone()).unwrap();
        let mut subs = Subscriptions::new(SubscriptionsConfig::new(Transport::Http));
        let t0 = Instant::now();
        let id = listen_id.clone();
        let mut ids = move || id.clone();
        let h = subs
            .listen(t0, listen_filter(f), listen_meta(f), &mut ids)
            .unwrap();
        let outs = drain(&mut subs);
        let Some(Output::Send { body, .. }) = outs.first() else {
            panic!("{outs:?}")
        };
        let sent: Value = serde_json::from_str(body).unwrap();
        assert_eq!(&sent, f.body(), "{}", f.rel);
        let headers = request_headers(body, None).unwrap();
        assert_eq!(header_map(&headers), f.request_headers());

        for m in f.server_messages() {
            subs.handle_stream_message(t0, h, &m).unwrap();
        }
        let outs = drain(&mut subs);
        check_listen_events(server, &events(&outs), &listen_id);
        assert_eq!(subs.current_id(h), Some(&listen_id));

        subs.close(t0, h).unwrap();
        let outs = drain(&mut subs);
        assert!(matches!(outs[0], Output::CloseStream { ref id, .. } if *id == listen_id));
        assert!(matches!(
            outs[1],
            Output::Event(Event::Ended {
                reason: EndReason::ClosedByHost,
                ..
            })
        ));
        assert!(subs.is_empty());
    }
}

/// `basic/patterns/subscriptions.mdx`, "Receiving Notifications", "Multiple Concurrent
/// Subscriptions", "Cancellation" with `basic/transports/stdio.mdx`, "Cancellation": on the
/// recorded stdio channel the subscription's messages are recognized by
/// `_meta["io.modelcontextprotocol/subscriptionId"]` (the listen id), the interleaved
/// `touch_readme` response is not the subscription's, and closing sends
/// `notifications/cancelled` for the listen id, as the raw client did.
#[test]
fn recorded_stdio_listen_channel_is_routed_by_subscription_id() {
    for server in MODERN {
        let f = fx(server, "stdio", "subscriptions-listen");
        let listen_id: Id = serde_json::from_value(f.body()["id"].clone()).unwrap();
        let mut subs = Subscriptions::new(SubscriptionsConfig::new(Transport::Stdio));
        let t0 = Instant::now();
        let id = listen_id.clone();
        let mut ids = move || id.clone();
        let h = subs
            .listen(t0, listen_filter(f), listen_meta(f), &mut ids)
            .unwrap();
        let outs = drain(&mut subs);
        let Some(Output::Send { body, .. }) = outs.first() else {
            panic!("{outs:?}")
        };
        assert_eq!(&serde_json::from_str::<Value>(body).unwrap(), f.body());

        let mut not_mine = Vec::new();
        for m in f.server_messages() {
            match subs.handle_channel_message(t0, &m) {
                Routed::Consumed => {}
                Routed::NotMine => not_mine.push(m),
            }
        }
        assert_eq!(not_mine.len(), 1, "{}: {not_mine:?}", f.rel);
        let touch: Value = serde_json::from_str(&not_mine[0]).unwrap();
        assert_eq!(touch["id"], f.request()["then"][0]["body"]["id"]);
        let outs = drain(&mut subs);
        check_listen_events(server, &events(&outs), &listen_id);

        subs.close(t0, h).unwrap();
        let outs = drain(&mut subs);
        let Output::Notify { body } = &outs[0] else {
            panic!("{outs:?}")
        };
        let ours: Value = serde_json::from_str(body).unwrap();
        let recorded = &f.request()["then"][1]["body"];
        assert_eq!(ours["method"], recorded["method"]);
        assert_eq!(ours["params"]["requestId"], recorded["params"]["requestId"]);
        // The server sent nothing after the cancellation (phases.after_cancel = 0).
        assert_eq!(f.response()["phases"]["after_cancel"], 0);
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Response classification and the request lifecycle
// ---------------------------------------------------------------------------------------------

/// `basic/index.mdx`, "Result Responses" / "ResultType" / "Error Responses" and
/// `server/tools.mdx`, "Error Handling": every recorded final response classifies as a
/// complete result, a tool error (`isError: true`), `input_required`, or a JSON-RPC error, as
/// its recorded members say, and answers the recorded request's id (errors for a request the
/// server could not tie to one carry no id). An unknown tool is an `isError` result from
/// Python and a `-32602` error from TS; both classify as such (snapshot of all of them).
#[test]
fn every_recorded_response_classifies_by_its_members() {
    let mut table = String::new();
    let mut n = 0;
    for f in all() {
        let Some(text) = f.final_response() else {
            continue;
        };
        n += 1;
        let c = classify_response(&text).unwrap_or_else(|e| panic!("{}: {e}", f.rel));
        let v: Value = serde_json::from_str(&text).unwrap();
        let expected = if let Some(e) = v.get("error") {
            assert!(
                matches!(&c.kind, ResponseKind::Error(o) if Some(o.code) == e["code"].as_i64()),
                "{}",
                f.rel
            );
            format!("error {}", e["code"])
        } else {
            let r = &v["result"];
            let kind = if r["resultType"] == "input_required" {
                ResponseKind::InputRequired
            } else if r["isError"] == true {
                ResponseKind::ToolError
            } else {
                ResponseKind::Complete
            };
            assert_eq!(c.kind, kind, "{}", f.rel);
            format!("{kind:?}")
        };
        match (&c.id, f.body().get("id")) {
            (Some(id), Some(sent)) => assert_eq!(
                id,
                &serde_json::from_value::<Id>(sent.clone()).unwrap(),
                "{}",
                f.rel
            ),
            (None, _) => assert!(v.get("error").is_some()),
            (Some(_), None) => panic!("{}: a response to a notification", f.rel),
        }
        writeln!(table, "{} -> {expected}", f.rel).unwrap();
    }
    assert_eq!(
        classify_response(
            &fx("python-sdk", "http", "tools-call-unknown-tool")
                .final_response()
                .unwrap()
        )
        .unwrap()
        .kind,
        ResponseKind::ToolError
    );
    assert!(matches!(
        classify_response(
            &fx("typescript-sdk", "http", "tools-call-unknown-tool")
                .final_response()
                .unwrap()
        )
        .unwrap()
        .kind,
        ResponseKind::Error(ref e) if e.code == -32602
    ));
    assert!(n > 120, "{n}");
    insta::assert_snapshot!(table);
}

/// `basic/patterns/progress.mdx`, "Progress Flow" and `basic/transports/streamable-http.mdx`,
/// "Receiving Messages": the recorded `count_slowly` exchanges (an SSE stream of three
/// `notifications/progress` then the result on HTTP; the same lines on stdio) fed to
/// `request::Requests`, started from the recorded params, give three progress events with the
/// recorded values and then the final response, and nothing else.
#[test]
fn recorded_progress_exchanges_drive_the_request_tracker() {
    for server in MODERN {
        for transport in ["http", "stdio"] {
            let f = fx(server, transport, "tools-call-progress");
            let tr = if transport == "http" {
                Transport::Http
            } else {
                Transport::Stdio
            };
            let mut reqs = request::Requests::new(RequestsConfig {
                transport: tr,
                jitter_seed: 0,
            });
            let t0 = Instant::now();
            let sent_id: Id = serde_json::from_value(f.body()["id"].clone()).unwrap();
            let id = sent_id.clone();
            let mut ids = move || id.clone();
            let params = f.body()["params"].to_string();
            let h = reqs
                .start(
                    t0,
                    "tools/call",
                    Some(&params),
                    CallOptions::default(),
                    &mut ids,
                )
                .unwrap();
            let first: Vec<request::Output> = std::iter::from_fn(|| reqs.poll_output()).collect();
            let Some(request::Output::Send { body, .. }) = first.first() else {
                panic!("{first:?}")
            };
            assert_eq!(&serde_json::from_str::<Value>(body).unwrap(), f.body());
            for m in f.server_messages() {
                if tr == Transport::Http {
                    reqs.handle_stream_message(t0, h, &m).unwrap();
                } else {
                    assert_eq!(reqs.handle_channel_message(t0, &m), Routed::Consumed);
                }
            }
            let evs: Vec<request::Event> = std::iter::from_fn(|| reqs.poll_output())
                .filter_map(|o| match o {
                    request::Output::Event(e) => Some(e),
                    _ => None,
                })
                .collect();
            assert_eq!(evs.len(), 4, "{}: {evs:?}", f.rel);
            for (i, e) in evs[..3].iter().enumerate() {
                let request::Event::Progress {
                    progress,
                    total,
                    message,
                    ..
                } = e
                else {
                    panic!("{}: {e:?}", f.rel)
                };
                let step = i as f64 + 1.0;
                assert_eq!(*progress, step);
                assert_eq!(*total, Some(3.0));
                assert_eq!(message.as_deref(), Some(format!("step {}", i + 1).as_str()));
            }
            let request::Event::Response { id, kind, .. } = &evs[3] else {
                panic!("{}: {:?}", f.rel, evs[3])
            };
            assert_eq!(id, &sent_id);
            assert_eq!(kind, &ResponseKind::Complete);
            assert_eq!(reqs.in_flight(), 0);
        }
    }
}

/// `basic/index.mdx`, "`_meta`" ("Per-request protocol fields"): every recorded modern request
/// the servers accepted is what `meta::build_request` builds from its method, its params
/// without `_meta`, and a `RequestMeta` with the capture client's version, capabilities,
/// `clientInfo` and (for `count_slowly`) `progressToken`.
#[test]
fn accepted_modern_requests_are_rebuilt_by_build_request() {
    let mut n = 0;
    for f in all() {
        if !f.modern_era() || f.what == "missing-client-capabilities-meta" {
            continue;
        }
        let Some(method) = f.method() else { continue };
        let Some(id) = f.body().get("id") else {
            continue;
        };
        let mut params = f.body()["params"].as_object().unwrap().clone();
        let recorded_meta = params.remove("_meta").unwrap();
        let version = recorded_meta["io.modelcontextprotocol/protocolVersion"]
            .as_str()
            .unwrap();
        let caps: ClientCapabilities = serde_json::from_value(
            recorded_meta["io.modelcontextprotocol/clientCapabilities"].clone(),
        )
        .unwrap();
        let mut m = RequestMeta::new(version, caps).with_client_info(capture_client());
        if let Some(t) = recorded_meta.get("progressToken") {
            m = m.with_progress_token(serde_json::from_value(t.clone()).unwrap());
        }
        let id: Id = serde_json::from_value(id.clone()).unwrap();
        let built = meta::build_request(&id, method, Value::Object(params), &m).unwrap();
        assert_eq!(
            &serde_json::from_str::<Value>(&built).unwrap(),
            f.body(),
            "{}",
            f.rel
        );
        n += 1;
    }
    assert!(n > 80, "{n}");
}

// ---------------------------------------------------------------------------------------------
// 8. The legacy era
// ---------------------------------------------------------------------------------------------

/// `mcp-2025-11-25-legacy/lifecycle.mdx`, "Initialization" / "Version Negotiation" and
/// `transports.mdx`, "Session Management" / "Protocol Version Header": for each real server
/// over HTTP and stdio, `LegacySession` builds the recorded `initialize`, accepts the recorded
/// `InitializeResult` (`2025-11-25`), keeps the recorded `Mcp-Session-Id` (Python and
/// server-everything; the TS legacy leg gives none), and then builds exactly the recorded
/// `notifications/initialized` and later requests — bodies and HTTP headers.
#[test]
fn legacy_session_replays_every_recorded_handshake_and_request() {
    for server in SERVERS {
        for transport in ["http", "stdio"] {
            let init = fx(server, transport, "legacy-initialize");
            let mut s = LegacySession::new(capture_client(), ClientCapabilities::none());
            let id: Id = serde_json::from_value(init.body()["id"].clone()).unwrap();
            let out = s.initialize(id);
            assert_eq!(
                &serde_json::from_str::<Value>(&out.body).unwrap(),
                init.body(),
                "{}",
                init.rel
            );
            if init.http() {
                assert_eq!(header_map(&out.headers), init.request_headers());
            }
            assert_eq!(s.phase(), Phase::Initializing);

            let headers = if init.http() {
                init.response_headers()
            } else {
                Headers::new()
            };
            let answer = init.final_response().unwrap();
            let notif = s
                .handle_initialize_response(&headers, &answer)
                .unwrap_or_else(|e| panic!("{}: {e}", init.rel));
            assert_eq!(s.phase(), Phase::Ready);
            let n = s.negotiated().unwrap();
            assert_eq!(n.protocol_version, LEGACY_PROTOCOL_VERSION);
            assert!(n.server_info.is_some());
            let sid = init.response()["headers"]
                .get("mcp-session-id")
                .and_then(Value::as_str);
            assert_eq!(s.has_session(), sid.is_some(), "{}", init.rel);
            if init.http() && server != "typescript-sdk" {
                assert!(sid.is_some(), "{}", init.rel);
            }
            // The session id is never printed.
            if let Some(sid) = sid {
                assert!(!format!("{s:?}").contains(sid));
            }

            let initialized = fx(server, transport, "legacy-initialized");
            assert_eq!(
                &serde_json::from_str::<Value>(&notif.body).unwrap(),
                initialized.body()
            );
            if initialized.http() {
                assert_eq!(header_map(&notif.headers), initialized.request_headers());
            }

            let mut later = 0;
            for f in all() {
                if f.server != server || f.transport != transport || f.modern_era() {
                    continue;
                }
                let session_case = matches!(
                    f.what.as_str(),
                    "legacy-no-session" | "legacy-bogus-session" | "legacy-delete-session"
                );
                if f.what == "legacy-initialize" || f.what == "legacy-initialized" {
                    continue;
                }
                if session_case && (server != "typescript-sdk") {
                    continue;
                }
                let Some(method) = f.method() else { continue };
                let id: Id = serde_json::from_value(f.body()["id"].clone()).unwrap();
                let params = f.body().get("params").cloned().unwrap_or(Value::Null);
                let out = s.request(&id, method, params).unwrap();
                assert_eq!(
                    &serde_json::from_str::<Value>(&out.body).unwrap(),
                    f.body(),
                    "{}",
                    f.rel
                );
                if f.http() {
                    assert_eq!(header_map(&out.headers), f.request_headers(), "{}", f.rel);
                }
                later += 1;
            }
            assert!(later >= 5, "{server}/{transport}: {later}");
        }
    }
}

/// `mcp-2025-11-25-legacy/transports.mdx`, "Session Management": Python answers a request
/// with an unknown session id `404 "Session not found"`. That 404 is about a session id that
/// is not the current one, so the current session is kept (stale, resend with the current
/// headers); a 404 naming the current session ends it.
#[test]
fn legacy_404_for_a_foreign_session_keeps_the_current_one() {
    let init = fx("python-sdk", "http", "legacy-initialize");
    let bogus = fx("python-sdk", "http", "legacy-bogus-session");
    let mut s = LegacySession::new(capture_client(), ClientCapabilities::none());
    s.initialize(Id::from(1));
    s.handle_initialize_response(&init.response_headers(), &init.final_response().unwrap())
        .unwrap();
    let mut sent = Headers::new();
    for (k, v) in bogus.request_headers() {
        sent.append(k, v).unwrap();
    }
    assert_eq!(bogus.status(), Some(404));
    assert_eq!(s.handle_status(404, &sent), SessionStatus::Stale);
    assert_eq!(s.phase(), Phase::Ready);
    let current = s.session_headers().unwrap();
    assert_eq!(s.handle_status(404, &current), SessionStatus::Expired);
    assert_eq!(s.phase(), Phase::Idle);
    assert!(!s.has_session());
}

// ---------------------------------------------------------------------------------------------
// 9. SSE
// ---------------------------------------------------------------------------------------------

/// `basic/transports/streamable-http.mdx`, "Sending Messages" / "Receiving Messages" (SSE
/// response streams) and WHATWG "Interpreting an event stream": every recorded SSE body —
/// CRLF (Python) and LF (TS, server-everything) line ends, server-everything's priming events
/// (`id` + empty `data`) — decodes with `SseParser`, whole or byte by byte, into the recorded
/// events; skipping empty-data events leaves only JSON-RPC messages `Message::parse` accepts.
#[test]
fn every_recorded_sse_body_decodes_into_json_rpc_messages() {
    let mut bodies = 0;
    let mut priming = 0;
    for f in all() {
        let Some(text) = f.sse_text() else { continue };
        bodies += 1;
        let whole = decode_sse(text.as_bytes());
        assert_eq!(whole, decode_sse_bytewise(text.as_bytes()), "{}", f.rel);
        let recorded = f.response()["sse_events"].as_array().unwrap();
        assert_eq!(whole.len(), recorded.len(), "{}", f.rel);
        for (e, r) in whole.iter().zip(recorded) {
            assert_eq!(e.id.as_deref(), r.get("id").and_then(Value::as_str));
            if e.data.is_empty() {
                priming += 1;
                assert_eq!(f.server, "server-everything", "{}", f.rel);
                assert!(e.id.is_some());
                continue;
            }
            assert_eq!(e.event, "message");
            let parsed: Value = serde_json::from_str(&e.data).unwrap();
            assert_eq!(&parsed, &r["data"], "{}", f.rel);
            Message::parse(&e.data).unwrap_or_else(|err| panic!("{}: {err}", f.rel));
        }
    }
    assert!(bodies >= 20, "{bodies}");
    assert!(priming >= 5, "{priming}");
}

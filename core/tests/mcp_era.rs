//! Transcript tests of the era decision, built from `mcp::{meta, discover, era, legacy}`:
//! what a dual-era client sends and decides, step by step, against scripted servers.
#![allow(clippy::unwrap_used)]

use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::Message;
use mcpwire_core::mcp::discover::discover_request;
use mcpwire_core::mcp::era::{
    classify_http_400, classify_probe, http_server_key, stdio_server_key, EraCache, Http400Verdict,
    ModernError, ProbeOutcome, ProbeVerdict, VersionNegotiation,
};
use mcpwire_core::mcp::legacy::{LegacySession, Phase};
use mcpwire_core::mcp::meta::{build_request, IdAllocator, RequestMeta, PROTOCOL_VERSION_KEY};
use mcpwire_core::mcp::{
    CachedEra, ClientCapabilities, Era, Implementation, LATEST_PROTOCOL_VERSION,
    LEGACY_PROTOCOL_VERSION,
};
use serde_json::{json, Value};

const OURS: &[&str] = &[LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSION];

fn info() -> Implementation {
    Implementation::new("mcpwire", "0.1.0")
}

fn meta(version: &str) -> RequestMeta {
    RequestMeta::new(version, ClientCapabilities::none()).with_client_info(info())
}

/// basic/transports/streamable-http.mdx, "Backward Compatibility": a legacy server answers the
/// modern request with 400 "Missing session ID"; the client falls back to initialize, caches
/// the verdict for the origin, and later requests carry the session headers.
#[test]
fn http_legacy_server_falls_back_to_initialize_and_the_verdict_is_cached() {
    let mut ids = IdAllocator::new();
    let mut cache = EraCache::new();
    let key = http_server_key("http://127.0.0.1:3001/mcp").unwrap();
    assert!(cache.get(&key).is_none());

    let first = ids.allocate();
    let _modern = build_request(
        &first,
        "tools/list",
        Value::Null,
        &meta(LATEST_PROTOCOL_VERSION),
    )
    .unwrap();
    // The server: 400 with a plain-text body.
    assert_eq!(
        classify_http_400(b"Bad Request: Missing session ID"),
        Http400Verdict::Legacy
    );
    cache.record(
        key.clone(),
        CachedEra {
            era: Era::Legacy,
            protocol_version: None,
        },
    );

    let mut legacy = LegacySession::new(info(), ClientCapabilities::none());
    let init_id = ids.retry(&first);
    let init = legacy.initialize(init_id.clone());
    assert!(init.body.contains("\"method\":\"initialize\""));
    let mut response_headers = Headers::new();
    response_headers.append("Mcp-Session-Id", "abc123").unwrap();
    let reply = json!({"jsonrpc": "2.0", "id": init_id, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
        "serverInfo": {"name": "everything", "version": "2026.8.31"}}});
    let initialized = legacy
        .handle_initialize_response(&response_headers, &reply.to_string())
        .unwrap();
    ids.release(&init_id);
    assert_eq!(
        initialized.headers.get("MCP-Protocol-Version"),
        Some("2025-06-18")
    );
    assert_eq!(legacy.phase(), Phase::Ready);

    let list_id = ids.allocate();
    let list = legacy.request(&list_id, "tools/list", Value::Null).unwrap();
    assert_eq!(list.headers.get("Mcp-Session-Id"), Some("abc123"));
    assert_ne!(list_id, first, "a resend after fallback gets a new id");
    assert_eq!(cache.get(&key).unwrap().era, Era::Legacy);
}

/// basic/versioning.mdx, "Protocol Version Negotiation": a modern server rejects the version
/// with -32022; the client retries with the highest common one, with a new id, without falling
/// back; `_meta` carries the new version.
#[test]
fn http_unsupported_version_is_retried_with_a_common_version_not_a_fallback() {
    let mut ids = IdAllocator::new();
    let first = ids.allocate();
    let body = json!({"jsonrpc": "2.0", "id": first, "error": {"code": -32022,
        "message": "Unsupported protocol version",
        "data": {"supported": ["2026-07-28", "2025-11-25"], "requested": "2027-03-01"}}});
    let Http400Verdict::Modern(ModernError::UnsupportedProtocolVersion {
        supported,
        requested,
    }) = classify_http_400(body.to_string().as_bytes())
    else {
        panic!("a modern error")
    };
    let mut negotiation = VersionNegotiation::new(&["2027-03-01", "2026-07-28"]);
    let choice = negotiation
        .on_unsupported(&supported, requested.as_deref().unwrap())
        .unwrap();
    assert_eq!(choice.version, "2026-07-28");
    assert_eq!(choice.era, Some(Era::Modern));
    let retry_id = ids.retry(&first);
    let retry =
        build_request(&retry_id, "tools/list", Value::Null, &meta(&choice.version)).unwrap();
    let v: Value = serde_json::from_str(&retry).unwrap();
    assert_eq!(v["params"]["_meta"][PROTOCOL_VERSION_KEY], "2026-07-28");
    assert_ne!(v["id"], json!(first));
}

/// basic/transports/stdio.mdx, "Backward Compatibility": the probe goes first; a legacy
/// server's -32601 (or silence) means initialize; a modern server's result means modern.
#[test]
fn stdio_probe_decides_the_era_per_process() {
    let mut ids = IdAllocator::new();
    let mut cache = EraCache::new();
    let legacy_key = stdio_server_key("npx", &["@modelcontextprotocol/server-everything"]);
    let modern_key = stdio_server_key("uvx", &["mcp-server"]);

    let probe_id = ids.allocate();
    let probe = discover_request(&probe_id, &meta(LATEST_PROTOCOL_VERSION));
    assert!(probe.contains("\"method\":\"server/discover\""));

    let legacy_reply = json!({"jsonrpc": "2.0", "id": probe_id,
        "error": {"code": -32601, "message": "Method not found"}})
    .to_string();
    let msg = Message::parse(&legacy_reply).unwrap();
    let verdict = classify_probe(ProbeOutcome::from_message(&msg).unwrap());
    assert_eq!(verdict.era(), Era::Legacy);
    cache.record(
        legacy_key.clone(),
        CachedEra {
            era: verdict.era(),
            protocol_version: None,
        },
    );
    assert_eq!(classify_probe(ProbeOutcome::TimedOut).era(), Era::Legacy);

    let modern_probe_id = ids.allocate();
    assert_ne!(modern_probe_id, probe_id);
    let modern_reply = json!({"jsonrpc": "2.0", "id": modern_probe_id, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28", "2025-11-25"],
        "capabilities": {"tools": {"listChanged": true}}, "ttlMs": 60000, "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "py", "version": "2.3.0"}}}})
    .to_string();
    let msg = Message::parse(&modern_reply).unwrap();
    let ProbeVerdict::Modern(result) = classify_probe(ProbeOutcome::from_message(&msg).unwrap())
    else {
        panic!("modern")
    };
    let version = mcpwire_core::mcp::era::negotiate_version(
        OURS,
        &result.supported_versions,
        LATEST_PROTOCOL_VERSION,
    )
    .unwrap();
    cache.record(
        modern_key.clone(),
        CachedEra {
            era: Era::Modern,
            protocol_version: Some(version.version),
        },
    );
    assert_eq!(cache.get(&legacy_key).unwrap().era, Era::Legacy);
    assert_eq!(
        cache.get(&modern_key).unwrap().protocol_version.as_deref(),
        Some("2026-07-28")
    );
    // The legacy assumption breaks (e.g. the server was upgraded): probe again.
    assert!(cache.invalidate(&legacy_key).is_some());
    assert!(cache.get(&legacy_key).is_none());
}

/// basic/transports/streamable-http.mdx, "Backward Compatibility" and the `-32601` rule: 400, 404
/// and 405 without a recognized modern body mean legacy; a 404 with `-32601` is a modern server's
/// unknown method; other statuses say nothing about the era.
#[test]
fn http_errors_classify_by_status_and_body() {
    use mcpwire_core::mcp::era::{classify_http_error, HttpErrorVerdict};
    let not_found =
        br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}"#;
    assert_eq!(
        classify_http_error(404, not_found),
        Some(HttpErrorVerdict::MethodNotFound)
    );
    assert_eq!(
        classify_http_error(404, b"Not Found"),
        Some(HttpErrorVerdict::Legacy)
    );
    assert_eq!(
        classify_http_error(405, b""),
        Some(HttpErrorVerdict::Legacy)
    );
    let legacy = br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}"#;
    assert_eq!(
        classify_http_error(400, legacy),
        Some(HttpErrorVerdict::Legacy)
    );
    let version = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2099-01-01"}}}"#;
    assert!(matches!(
        classify_http_error(400, version),
        Some(HttpErrorVerdict::Modern(_))
    ));
    // -32601 on a 400 is not the modern unknown-method signal.
    assert_eq!(
        classify_http_error(400, not_found),
        Some(HttpErrorVerdict::Legacy)
    );
    assert_eq!(classify_http_error(401, b""), None);
    assert_eq!(classify_http_error(500, not_found), None);
}

/// The session id works like a credential: a refused re-initialize whose message echoes it does
/// not carry it into the error (found by the mcp_legacy fuzz target).
#[test]
fn refused_initialize_error_redacts_the_session_id() {
    use mcpwire_core::http::Headers;
    use mcpwire_core::jsonrpc::Id;
    use mcpwire_core::mcp::legacy::LegacySession;
    use mcpwire_core::mcp::{ClientCapabilities, Implementation};
    let mut s = LegacySession::new(Implementation::new("t", "1"), ClientCapabilities::none());
    s.initialize(Id::from(1));
    let mut h = Headers::new();
    h.append("Mcp-Session-Id", "sess-SECRET-42").unwrap();
    let ok = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#;
    s.handle_initialize_response(&h, ok).unwrap();
    s.initialize(Id::from(2));
    let refused = r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"session sess-SECRET-42 is busy","data":{"sid":"sess-SECRET-42"}}}"#;
    let e = s
        .handle_initialize_response(&Headers::new(), refused)
        .unwrap_err();
    assert!(!e.to_string().contains("sess-SECRET-42"), "{e}");
    assert!(!format!("{e:?}").contains("sess-SECRET-42"), "{e:?}");
}

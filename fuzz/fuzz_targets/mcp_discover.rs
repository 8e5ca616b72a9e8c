//! `server/discover` results and the era decision fed arbitrary bytes: nothing panics, every
//! accepted `DiscoverResult` re-serializes and re-reads equal, and every verdict is consistent
//! with what was read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::Headers;
use mcpwire_core::jsonrpc::{Id, Message};
use mcpwire_core::mcp::era::{
    classify_http_400, classify_probe, negotiate_version, Http400Verdict, LegacyEvidence,
    ModernError, ProbeOutcome, ProbeVerdict,
};
use mcpwire_core::mcp::legacy::{LegacySession, Phase};
use mcpwire_core::mcp::{
    ClientCapabilities, DiscoverResult, Implementation, KNOWN_LEGACY_VERSIONS,
};
use std::time::Duration;

const OURS: &[&str] = &["2026-07-28", "2025-11-25"];

fn check_round_trip(r: &DiscoverResult) {
    let v = r.to_value();
    let again = DiscoverResult::from_value(v.clone()).expect("re-reading our own output");
    assert_eq!(&again, r);
    assert_eq!(again.to_value(), v);
    if r.ttl_ms.is_none_or(|t| t <= 0) {
        assert_eq!(r.ttl(), Duration::ZERO);
    }
}

fn check_version_choice(supported: &[String], requested: &str) {
    if let Ok(choice) = negotiate_version(OURS, supported, requested) {
        assert!(supported.contains(&choice.version));
        assert!(OURS.contains(&choice.version.as_str()));
        assert_eq!(choice.same_as_requested, choice.version == requested);
    }
}

fuzz_target!(|data: &[u8]| {
    // The 400 body classifier takes any bytes.
    if let Http400Verdict::Modern(ModernError::UnsupportedProtocolVersion {
        supported,
        requested,
    }) = classify_http_400(data)
    {
        check_version_choice(&supported, requested.as_deref().unwrap_or(""));
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A bare result object.
    if let Ok(r) = DiscoverResult::parse(text) {
        check_round_trip(&r);
    }
    // A whole response, as the stdio probe sees it.
    if let Ok(msg) = Message::parse(text) {
        if let Some(outcome) = ProbeOutcome::from_message(&msg) {
            match classify_probe(outcome) {
                ProbeVerdict::Modern(r) => {
                    assert!(matches!(msg, Message::Response { .. }));
                    check_round_trip(&r);
                }
                ProbeVerdict::ModernMalformed(_)
                | ProbeVerdict::Legacy(LegacyEvidence::NotADiscoverResult) => {
                    assert!(matches!(msg, Message::Response { .. }))
                }
                ProbeVerdict::ModernError(_) | ProbeVerdict::Legacy(_) => {
                    assert!(matches!(msg, Message::Error { .. }))
                }
            }
        }
    }
    // The same text as the answer to `initialize`.
    let mut legacy =
        LegacySession::new(Implementation::new("fuzz", "0"), ClientCapabilities::none());
    legacy.initialize(Id::from(1));
    match legacy.handle_initialize_response(&Headers::new(), text) {
        Ok(out) => {
            assert_eq!(legacy.phase(), Phase::Ready);
            let v = legacy
                .negotiated()
                .expect("ready")
                .protocol_version
                .as_str();
            assert!(KNOWN_LEGACY_VERSIONS.contains(&v));
            assert_eq!(out.headers.get("MCP-Protocol-Version"), Some(v));
        }
        Err(_) => assert_ne!(legacy.phase(), Phase::Ready),
    }
});

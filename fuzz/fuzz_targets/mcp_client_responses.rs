//! Response and SSE decoding into client events: one operation is started on a Streamable HTTP
//! client, and its response stream is arbitrary (status, content type, `Retry-After`, body
//! bytes cut into arbitrary chunks, the stream ended or broken). What the driver hands over is
//! exactly what a server can send.
//!
//! Invariants: no panic; the operation ends at most once; when the body was a complete JSON
//! response to the request with a `complete` result and status 200, the operation ends with
//! exactly that result.
#![no_main]

use std::time::{Instant, SystemTime};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::http::{Headers, ResponseHead};
use mcpwire_core::mcp::{
    Client, ClientConfig, Event, Implementation, ListKind, Output, ProtocolChoice, StreamId,
    Transport,
};

#[derive(Arbitrary, Debug)]
struct Input {
    status: u16,
    content_type: u8,
    retry_after: Option<String>,
    body: Vec<u8>,
    cuts: Vec<u16>,
    end: bool,
}

fuzz_target!(|input: Input| {
    let mut config = ClientConfig::new(Transport::Http, Implementation::new("fuzz", "0"));
    config.protocol = ProtocolChoice::Modern;
    let mut c = Client::new(config);
    let now = Instant::now();
    let op = c.list(now, ListKind::Tools, None);
    let mut stream = None;
    let mut events = Vec::new();
    let drain = |c: &mut Client, events: &mut Vec<Event>, stream: &mut Option<StreamId>| {
        while let Some(o) = c.poll_output() {
            match o {
                Output::Http { stream: s, .. } => *stream = stream.or(Some(s)),
                Output::Event(e) => events.push(e),
                _ => {}
            }
        }
    };
    drain(&mut c, &mut events, &mut stream);
    // A tools/list over HTTP always opens its stream first.
    let Some(sid) = stream else {
        panic!("the list opened no HTTP stream: {events:?}")
    };
    let mut headers = Headers::new();
    let ct = [
        "application/json",
        "text/event-stream",
        "text/event-stream; charset=utf-8",
        "text/plain",
        "",
    ][input.content_type as usize % 5];
    if !ct.is_empty() {
        let _ = headers.append("Content-Type", ct);
    }
    if let Some(ra) = &input.retry_after {
        let _ = headers.append("Retry-After", ra.as_str());
    }
    let head = ResponseHead {
        status: input.status,
        headers,
    };
    // Every input names the stream the client issued: none is refused, whatever its content
    // (a stream that already ended is a late input, not an error).
    let refused = |what: &str, r: Result<(), mcpwire_core::mcp::UsageError>| {
        assert!(r.is_ok(), "{what} refused: {r:?}");
    };
    refused(
        "the head",
        c.handle_response_head(now, SystemTime::UNIX_EPOCH, sid, head),
    );
    let mut rest: &[u8] = &input.body;
    for cut in input.cuts.iter().take(16) {
        let at = (*cut as usize).min(rest.len());
        let (a, b) = rest.split_at(at);
        refused("a body piece", c.handle_response_data(now, sid, a));
        drain(&mut c, &mut events, &mut stream);
        rest = b;
    }
    refused(
        "the last body piece",
        c.handle_response_data(now, sid, rest),
    );
    if input.end {
        refused("the end", c.handle_response_end(now, sid));
    } else {
        refused("the failure", c.handle_transport_failed(now, sid));
    }
    drain(&mut c, &mut events, &mut stream);
    let finals = events
        .iter()
        .filter(|e| matches!(e, Event::Result { op: o, .. } | Event::Failed { op: o, .. } | Event::Cancelled { op: o } if *o == op))
        .count();
    assert!(finals <= 1, "{events:?}");
    // A well-formed JSON answer is delivered as is.
    if input.end && input.status == 200 && ct == "application/json" {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&input.body) {
            let complete = v["id"] == serde_json::json!(1)
                && v.get("error").is_none()
                && v["result"].is_object()
                && v["result"]
                    .get("resultType")
                    .is_none_or(|t| t == "complete")
                && v["result"]["tools"].is_array()
                && v["result"]["tools"]
                    .as_array()
                    .is_some_and(|a| a.is_empty())
                && v.get("method").is_none()
                && v["jsonrpc"] == "2.0";
            if complete {
                assert!(
                    events
                        .iter()
                        .any(|e| matches!(e, Event::Result { op: o, .. } if *o == op)),
                    "{events:?}"
                );
            }
        }
    }
});

//! Encoding server-sent events (the core writes them; `crate::sse` parses them) and the event
//! ids of resumable streams (`transports.mdx`, "Resumability and Redelivery": ids unique across
//! a session's streams, naming the stream they belong to).

use std::fmt::Write as _;

/// One `message` event carrying `data` (one JSON text, which has no newline), with `id`.
pub(super) fn event(id: Option<&str>, data: &str) -> Vec<u8> {
    let mut out = String::with_capacity(data.len() + 48);
    if let Some(id) = id {
        let _ = writeln!(out, "id: {id}");
    }
    out.push_str("event: message\n");
    for line in data.split('\n') {
        let _ = writeln!(out, "data: {line}");
    }
    out.push('\n');
    out.into_bytes()
}

/// The priming event of a resumable stream (SEP-1699): an id and empty data, with `retry` in
/// milliseconds when set.
pub(super) fn priming(id: &str, retry_ms: Option<u128>) -> Vec<u8> {
    let mut out = String::with_capacity(48);
    let _ = writeln!(out, "id: {id}");
    if let Some(ms) = retry_ms {
        let _ = writeln!(out, "retry: {ms}");
    }
    out.push_str("data: \n\n");
    out.into_bytes()
}

/// The event id of event `seq` of stream `stream`.
pub(super) fn event_id(stream: u64, seq: u64) -> String {
    format!("{stream}-{seq}")
}

/// Reads an event id of ours.
pub(super) fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (stream, seq) = id.trim().split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(stream) || !digits(seq) {
        return None;
    }
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;

    #[test]
    fn events_read_back_through_the_parser() {
        let mut p = SseParser::new();
        p.push(&priming("3-0", Some(500)));
        p.push(&event(Some("3-1"), r#"{"a":1}"#));
        let first = p.next_event().ok().flatten();
        assert!(first.is_none() || first.as_ref().is_some_and(|e| e.data.is_empty()));
        let mut found = None;
        for _ in 0..3 {
            if let Ok(Some(e)) = p.next_event() {
                if !e.data.is_empty() {
                    found = Some(e);
                    break;
                }
            }
        }
        let e = found.unwrap_or_else(|| crate::sse::SseEvent {
            event: String::new(),
            data: String::new(),
            id: None,
            retry: None,
        });
        assert_eq!(e.data, r#"{"a":1}"#);
        assert_eq!(e.id.as_deref(), Some("3-1"));
        assert_eq!(p.retry(), Some(500));
        assert_eq!(parse_event_id("3-1"), Some((3, 1)));
        for bad in ["", "3", "-1", "a-1", "1-", "1-2-3"] {
            assert_eq!(parse_event_id(bad), None, "{bad}");
        }
    }
}

//! Fuzzes the `text/event-stream` push parser.
//!
//! Input layout: byte 0 picks the size bound (below 128: that many bytes, so the bound is hit
//! often; otherwise the default), byte 1 the number of split points (up to 16), then two bytes
//! per split point (little-endian offsets, taken modulo the stream length + 1), then the stream.
//!
//! Checked: the results (events and errors, in order) are the same for the chunked feed, a
//! byte-by-byte feed and a single-chunk feed; no event's data is longer than the bound; events
//! are well formed (no CR in data, no line break in type or id, no NUL in id, type non-empty).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::sse::{SseError, SseEvent, SseParser, DEFAULT_MAX_EVENT_SIZE};

type Outcome = Vec<Result<SseEvent, SseError>>;

fn drain(
    parser: &mut SseParser,
    out: &mut Outcome,
    step: fn(&mut SseParser) -> Result<Option<SseEvent>, SseError>,
) {
    loop {
        match step(parser) {
            Ok(Some(event)) => out.push(Ok(event)),
            Ok(None) => return,
            Err(error) => out.push(Err(error)),
        }
    }
}

fn run<'a>(limit: usize, chunks: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let mut parser = SseParser::with_max_event_size(limit);
    let mut out = Vec::new();
    for chunk in chunks {
        parser.push(chunk);
        drain(&mut parser, &mut out, SseParser::next_event);
    }
    drain(&mut parser, &mut out, SseParser::finish);
    out
}

fuzz_target!(|input: &[u8]| {
    let (limit, rest) = match input.split_first() {
        Some((&b, rest)) if b < 128 => (usize::from(b), rest),
        Some((_, rest)) => (DEFAULT_MAX_EVENT_SIZE, rest),
        None => return,
    };
    let (splits, mut rest) = match rest.split_first() {
        Some((&n, rest)) => (usize::from(n % 17), rest),
        None => return,
    };
    let mut raw_points = Vec::with_capacity(splits);
    for _ in 0..splits {
        match rest {
            [lo, hi, tail @ ..] => {
                raw_points.push(usize::from(u16::from_le_bytes([*lo, *hi])));
                rest = tail;
            }
            _ => break,
        }
    }
    let stream = rest;
    let mut points: Vec<usize> = raw_points
        .into_iter()
        .map(|p| p % (stream.len() + 1))
        .collect();
    points.sort_unstable();
    let mut chunks = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for point in points {
        chunks.push(&stream[start..point]);
        start = point;
    }
    chunks.push(&stream[start..]);

    let whole = run(limit, [stream]);
    let chunked = run(limit, chunks);
    assert_eq!(
        chunked, whole,
        "chunked feed differs from single-chunk feed"
    );
    let bytewise = run(limit, stream.chunks(1));
    assert_eq!(
        bytewise, whole,
        "byte-by-byte feed differs from single-chunk feed"
    );

    for event in whole.iter().flatten() {
        assert!(event.data.len() <= limit, "data longer than the bound");
        assert!(!event.data.contains('\r'), "CR in data");
        assert!(!event.event.is_empty(), "empty event type");
        assert!(!event.event.contains(['\r', '\n']), "line break in type");
        if let Some(id) = &event.id {
            assert!(!id.is_empty(), "empty id is represented as None");
            assert!(!id.contains(['\r', '\n', '\0']), "bad char in id");
        }
    }
});

use super::*;
use proptest::prelude::*;

type Outcome = Vec<Result<SseEvent, SseError>>;

/// Calls `step` until it returns `Ok(None)`, collecting events and errors.
fn drain_with(
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

/// Feeds `chunks` one by one, draining after each, then finishes the stream.
fn feed(parser: &mut SseParser, chunks: &[&[u8]]) -> Outcome {
    let mut out = Vec::new();
    for chunk in chunks {
        parser.push(chunk);
        drain_with(parser, &mut out, SseParser::next_event);
    }
    drain_with(parser, &mut out, SseParser::finish);
    out
}

/// Parses a whole stream given as one chunk with the default bound.
fn parse(input: &[u8]) -> Outcome {
    feed(&mut SseParser::new(), &[input])
}

/// Parses a whole stream that must produce no error.
fn events(input: &[u8]) -> Vec<SseEvent> {
    parse(input).into_iter().map(Result::unwrap).collect()
}

/// Splits `input` at the given offsets (taken modulo its length + 1).
fn split_at_points(input: &[u8], points: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = points.iter().map(|p| p % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(input[start..cut].to_vec());
        start = cut;
    }
    chunks.push(input[start..].to_vec());
    chunks
}

fn feed_split(limit: usize, input: &[u8], points: &[usize]) -> Outcome {
    let chunks = split_at_points(input, points);
    let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
    feed(&mut SseParser::with_max_event_size(limit), &refs)
}

/// Feeds one byte per chunk.
fn bytewise(input: &[u8]) -> Outcome {
    let chunks: Vec<&[u8]> = input.chunks(1).collect();
    feed(&mut SseParser::new(), &chunks)
}

fn event(event: &str, data: &str, id: Option<&str>, retry: Option<u64>) -> SseEvent {
    SseEvent {
        event: event.to_owned(),
        data: data.to_owned(),
        id: id.map(str::to_owned),
        retry,
    }
}

fn message(data: &str) -> SseEvent {
    event("message", data, None, None)
}

// ---- line ends ----

#[test]
fn lf_ends_a_line() {
    assert_eq!(events(b"data: a\ndata: b\n\n"), [message("a\nb")]);
}

#[test]
fn crlf_ends_a_line() {
    assert_eq!(events(b"data: a\r\ndata: b\r\n\r\n"), [message("a\nb")]);
}

#[test]
fn lone_cr_ends_a_line() {
    assert_eq!(events(b"data: a\rdata: b\r\r"), [message("a\nb")]);
}

#[test]
fn mixed_line_ends_are_all_honoured() {
    assert_eq!(
        events(b"data: a\rdata: b\r\ndata: c\n\r\ndata: d\r\n\r"),
        [message("a\nb\nc"), message("d")]
    );
}

#[test]
fn crlf_split_across_chunks_is_one_line_end() {
    // Were the LF taken as a second line end, it would be a blank line dispatching "a" alone.
    let out = feed(
        &mut SseParser::new(),
        &[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"],
    );
    assert_eq!(out, [Ok(message("a\nb"))]);
}

#[test]
fn cr_at_chunk_end_then_other_byte_starts_a_new_line() {
    let out = feed(&mut SseParser::new(), &[b"data: a\r", b"data: b\r", b"\r"]);
    assert_eq!(out, [Ok(message("a\nb"))]);
}

#[test]
fn cr_ending_a_chunk_ends_the_line_without_waiting() {
    let mut parser = SseParser::new();
    parser.push(b"data: a\n\r");
    assert_eq!(parser.next_event(), Ok(Some(message("a"))));
}

#[test]
fn lf_after_cr_lf_is_a_blank_line() {
    assert_eq!(
        events(b"data: a\r\n\ndata: b\r\n\n"),
        [message("a"), message("b")]
    );
}

// ---- byte order mark ----

#[test]
fn bom_at_stream_start_is_skipped() {
    assert_eq!(events(b"\xEF\xBB\xBFdata: a\n\n"), [message("a")]);
}

#[test]
fn bom_split_across_chunks_is_skipped() {
    let out = feed(
        &mut SseParser::new(),
        &[b"\xEF", b"", b"\xBB", b"\xBF", b"da", b"ta: a\n\n"],
    );
    assert_eq!(out, [Ok(message("a"))]);
    assert_eq!(bytewise(b"\xEF\xBB\xBFdata: a\n\n"), [Ok(message("a"))]);
}

#[test]
fn bom_is_skipped_only_once() {
    // The second BOM becomes part of the field name, which is then unknown.
    assert_eq!(events(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"), []);
}

#[test]
fn bom_after_stream_start_is_not_skipped() {
    assert_eq!(
        events(b"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata:\xEF\xBB\xBFc\n\n"),
        [message("a"), message("\u{FEFF}c")]
    );
}

#[test]
fn bom_prefix_that_is_not_a_bom_is_kept() {
    // EF BB followed by another byte is an invalid sequence in a field name, not a BOM.
    assert_eq!(
        feed(
            &mut SseParser::new(),
            &[b"\xEF\xBB", b"data: a\n\ndata: b\n\n"]
        ),
        [Ok(message("b"))]
    );
}

// ---- fields ----

#[test]
fn data_lines_are_joined_with_lf() {
    assert_eq!(
        events(b"data: one\ndata: two\ndata:three\n\n"),
        [message("one\ntwo\nthree")]
    );
}

#[test]
fn data_may_hold_empty_lines() {
    assert_eq!(events(b"data:\ndata: b\ndata:\n\n"), [message("\nb\n")]);
}

#[test]
fn event_field_sets_the_type() {
    assert_eq!(
        events(b"event: progress\ndata: 1\n\n"),
        [event("progress", "1", None, None)]
    );
}

#[test]
fn event_type_defaults_to_message() {
    assert_eq!(
        events(b"data: 1\n\nevent:\ndata: 2\n\n"),
        [message("1"), message("2")]
    );
}

#[test]
fn event_type_is_reset_after_each_event() {
    assert_eq!(
        events(b"event: a\ndata: 1\n\ndata: 2\n\n"),
        [event("a", "1", None, None), message("2")]
    );
}

#[test]
fn comment_line_is_ignored_and_counted() {
    let mut parser = SseParser::new();
    let out = feed(&mut parser, &[b": ping\n\n:\ndata: a\n: data: b\n\n"]);
    assert_eq!(out, [Ok(message("a"))]);
    assert_eq!(parser.comment_count(), 3);
}

#[test]
fn field_without_colon_has_empty_value() {
    assert_eq!(events(b"data\n\n"), [message("")]);
    assert_eq!(events(b"data\ndata\n\n"), [message("\n")]);
    assert_eq!(
        events(b"event: x\nevent\ndata: 1\n\n"),
        [message("1")],
        "`event` alone resets the type"
    );
}

#[test]
fn leading_single_space_is_stripped_but_only_one() {
    assert_eq!(
        events(b"data: a\n\ndata:b\n\ndata:  c\n\ndata:\td\n\n"),
        [message("a"), message("b"), message(" c"), message("\td")]
    );
}

#[test]
fn field_name_ends_at_the_first_colon() {
    assert_eq!(events(b"data: a: b:c\n\n"), [message("a: b:c")]);
}

#[test]
fn field_names_are_case_sensitive_and_unknown_ones_ignored() {
    assert_eq!(
        events(b"Data: no\ndata : no\nfoo: bar\ndata: yes\n\n"),
        [message("yes")]
    );
}

#[test]
fn id_sets_the_event_id() {
    assert_eq!(
        events(b"id: 42\ndata: a\n\n"),
        [event("message", "a", Some("42"), None)]
    );
}

#[test]
fn id_with_nul_is_ignored() {
    let mut parser = SseParser::new();
    let out = feed(&mut parser, &[b"id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n"]);
    assert_eq!(
        out,
        [
            Ok(event("message", "a", Some("1"), None)),
            Ok(event("message", "b", Some("1"), None)),
        ]
    );
    assert_eq!(parser.last_event_id(), Some("1"));
}

#[test]
fn id_persists_across_events() {
    let mut parser = SseParser::new();
    let out = feed(
        &mut parser,
        &[b"id: 7\ndata: a\n\ndata: b\n\nid: 8\ndata: c\n\n"],
    );
    assert_eq!(
        out,
        [
            Ok(event("message", "a", Some("7"), None)),
            Ok(event("message", "b", Some("7"), None)),
            Ok(event("message", "c", Some("8"), None)),
        ]
    );
    assert_eq!(parser.last_event_id(), Some("8"));
}

#[test]
fn empty_id_clears_the_last_event_id() {
    let mut parser = SseParser::new();
    let out = feed(&mut parser, &[b"id: 7\ndata: a\n\nid\ndata: b\n\n"]);
    assert_eq!(
        out,
        [Ok(event("message", "a", Some("7"), None)), Ok(message("b"))]
    );
    assert_eq!(parser.last_event_id(), None);
}

#[test]
fn last_event_id_is_committed_by_a_blank_line_even_without_data() {
    let mut parser = SseParser::new();
    assert_eq!(feed(&mut parser, &[b"id: 5\n\n"]), []);
    assert_eq!(parser.last_event_id(), Some("5"));
}

#[test]
fn last_event_id_is_not_committed_before_the_blank_line() {
    let mut parser = SseParser::new();
    parser.push(b"id: 5\ndata: a\n");
    assert_eq!(parser.next_event(), Ok(None));
    assert_eq!(parser.last_event_id(), None);
}

#[test]
fn retry_accepts_ascii_digits_only() {
    for bad in [
        &b"retry: 15a\n"[..],
        b"retry: -1\n",
        b"retry: 1.5\n",
        b"retry: +3\n",
        b"retry:  3\n",
        b"retry:\n",
        b"retry\n",
        "retry: \u{0663}\n".as_bytes(),
    ] {
        let mut parser = SseParser::new();
        let mut input = bad.to_vec();
        input.extend_from_slice(b"data: a\n\n");
        assert_eq!(feed(&mut parser, &[&input]), [Ok(message("a"))], "{bad:?}");
        assert_eq!(parser.retry(), None, "{bad:?}");
    }
    let mut parser = SseParser::new();
    assert_eq!(
        feed(&mut parser, &[b"retry: 01500\ndata: a\n\n"]),
        [Ok(event("message", "a", None, Some(1500)))]
    );
    assert_eq!(parser.retry(), Some(1500));
}

#[test]
fn retry_too_big_saturates() {
    assert_eq!(
        events(b"retry: 99999999999999999999999\ndata: a\n\n"),
        [event("message", "a", None, Some(u64::MAX))]
    );
}

#[test]
fn retry_marks_only_the_event_that_carried_it_but_persists_in_the_parser() {
    let mut parser = SseParser::new();
    let out = feed(
        &mut parser,
        &[b"retry: 10\ndata: a\n\ndata: b\n\nretry: 20\n\n"],
    );
    assert_eq!(
        out,
        [Ok(event("message", "a", None, Some(10))), Ok(message("b"))]
    );
    assert_eq!(parser.retry(), Some(20));
}

// ---- dispatch ----

#[test]
fn empty_data_priming_event_is_dispatched_with_its_id() {
    assert_eq!(
        events(b"id: prime-1\ndata:\n\n"),
        [event("message", "", Some("prime-1"), None)]
    );
    assert_eq!(
        events(b"id: prime-1\r\ndata\r\n\r\n"),
        [event("message", "", Some("prime-1"), None)]
    );
}

#[test]
fn blank_line_without_data_dispatches_nothing() {
    assert_eq!(
        events(b"\n\nevent: ping\n\nid: 1\nretry: 5\n\n: c\n\ndata: x\n\n"),
        [event("message", "x", Some("1"), None)],
        "no event for the blank lines; the type set without data does not leak"
    );
}

#[test]
fn incomplete_event_at_end_of_stream_is_discarded() {
    assert_eq!(parse(b"data: a\n\ndata: b\n"), [Ok(message("a"))]);
    assert_eq!(parse(b"data: a\n\ndata: b"), [Ok(message("a"))]);
    let mut parser = SseParser::new();
    parser.push(b"id: 9\ndata: b\n");
    assert_eq!(parser.finish(), Ok(None));
    assert_eq!(
        parser.last_event_id(),
        None,
        "the id of a discarded event is not committed"
    );
}

#[test]
fn finish_returns_complete_events_still_buffered() {
    let mut parser = SseParser::new();
    parser.push(b"data: a\n\ndata: b\n\ndata: c");
    assert_eq!(parser.finish(), Ok(Some(message("a"))));
    assert_eq!(parser.finish(), Ok(Some(message("b"))));
    assert_eq!(parser.finish(), Ok(None));
}

#[test]
fn finish_readies_the_parser_for_a_new_stream_keeping_the_last_event_id() {
    let mut parser = SseParser::new();
    assert_eq!(
        feed(
            &mut parser,
            &[b"\xEF\xBB\xBFid: 3\nretry: 7\ndata: a\n\ndata: cut"]
        ),
        [Ok(event("message", "a", Some("3"), Some(7)))]
    );
    // The next stream may start with a BOM again; the cut-off "data: cut" is gone.
    assert_eq!(
        feed(&mut parser, &[b"\xEF\xBB\xBFdata: b\n\n"]),
        [Ok(event("message", "b", Some("3"), None))]
    );
    assert_eq!(parser.retry(), Some(7));
}

// ---- size bound ----

#[test]
fn oversized_data_is_an_error_and_the_event_is_discarded_up_to_the_next_blank_line() {
    let mut parser = SseParser::with_max_event_size(8);
    let out = feed(
        &mut parser,
        &[b"id: lost\ndata: 1234\ndata: 5678\nid: lost2\ndata: 9\n\ndata: ok\n\n"],
    );
    assert_eq!(
        out,
        [Err(SseError::EventTooLarge { limit: 8 }), Ok(message("ok"))]
    );
    assert_eq!(
        parser.last_event_id(),
        None,
        "the id of the dropped event is not committed"
    );
}

#[test]
fn data_and_line_at_exactly_the_limit_are_accepted() {
    // "data:12345678" is a 13-byte line; "12345678\n1234" is 13 bytes of data: the joining line
    // feed counts, the final one does not.
    let mut parser = SseParser::with_max_event_size(13);
    assert_eq!(
        feed(&mut parser, &[b"data:12345678\ndata:1234\n\n"]),
        [Ok(message("12345678\n1234"))]
    );
    let mut parser = SseParser::with_max_event_size(13);
    assert_eq!(
        feed(&mut parser, &[b"data:12345678\ndata:12345\n\n"]),
        [Err(SseError::EventTooLarge { limit: 13 })]
    );
    let mut parser = SseParser::with_max_event_size(12);
    assert_eq!(
        feed(&mut parser, &[b"data:12345678\n\n"]),
        [Err(SseError::EventTooLarge { limit: 12 })]
    );
}

#[test]
fn oversized_line_is_an_error_even_when_its_data_would_fit() {
    // The line "data: 1234567" is 13 bytes, over 10; its value alone (7) is not.
    let mut parser = SseParser::with_max_event_size(10);
    assert_eq!(
        feed(&mut parser, &[b"data: 1234567\n\ndata: ok\n\n"]),
        [
            Err(SseError::EventTooLarge { limit: 10 }),
            Ok(message("ok"))
        ]
    );
    let mut parser = SseParser::with_max_event_size(10);
    assert_eq!(
        feed(&mut parser, &[b": a long comment line\ndata: ok\n\n"]),
        [Err(SseError::EventTooLarge { limit: 10 })]
    );
}

#[test]
fn oversized_line_split_across_chunks_gives_one_error_and_the_stream_continues() {
    let limit = 64;
    let mut input = b"data: before\n\nid: 1\ndata: ".to_vec();
    input.extend(std::iter::repeat_n(b'x', 1000));
    input.extend_from_slice(b"\rdata: more\r\rid: 2\rdata: after\r\r");
    let expected = [
        Ok(message("before")),
        Err(SseError::EventTooLarge { limit }),
        Ok(event("message", "after", Some("2"), None)),
    ];
    let chunks: Vec<&[u8]> = input.chunks(7).collect();
    assert_eq!(
        feed(&mut SseParser::with_max_event_size(limit), &chunks),
        expected
    );
    assert_eq!(
        feed(&mut SseParser::with_max_event_size(limit), &[&input]),
        expected
    );
}

#[test]
fn unterminated_line_memory_is_bounded_by_the_limit() {
    let limit = 1000;
    let chunk = [b'y'; 100];
    let mut parser = SseParser::with_max_event_size(limit);
    parser.push(b"data: ");
    let mut errors = 0;
    for _ in 0..10_000 {
        parser.push(&chunk);
        loop {
            match parser.next_event() {
                Ok(None) => break,
                Ok(Some(event)) => panic!("unexpected {event:?}"),
                Err(error) => {
                    assert_eq!(error, SseError::EventTooLarge { limit });
                    errors += 1;
                }
            }
        }
        assert!(
            parser.buf.len() <= limit + chunk.len(),
            "buffered {}",
            parser.buf.len()
        );
    }
    assert_eq!(errors, 1);
    parser.push(b"\n\ndata: fine\n\n");
    assert_eq!(parser.next_event(), Ok(Some(message("fine"))));
}

#[test]
fn tiny_chunks_are_scanned_in_linear_time() {
    // One long line, one byte at a time: without remembering how far it searched, the parser
    // would search the whole pending line again on every push.
    let n = 50_000;
    let mut parser = SseParser::new();
    parser.push(b"data: ");
    for _ in 0..n {
        parser.push(b"z");
        assert_eq!(parser.next_event(), Ok(None));
    }
    parser.push(b"\n\n");
    assert_eq!(parser.next_event().unwrap().unwrap().data.len(), n);
    assert!(parser.work <= 2 * n, "work {}", parser.work);

    // Many short lines, one byte at a time: consumed bytes are compacted without quadratic moves.
    let input = b"data: x\n\n".repeat(10_000);
    let mut parser = SseParser::new();
    let mut count = 0;
    for byte in &input {
        parser.push(std::slice::from_ref(byte));
        while parser.next_event().unwrap().is_some() {
            count += 1;
        }
    }
    assert_eq!(count, 10_000);
    assert!(parser.work <= 3 * input.len(), "work {}", parser.work);
    assert!(parser.buf.len() <= 16, "buffer {}", parser.buf.len());
}

// ---- encoding ----

#[test]
fn invalid_utf8_is_replaced_with_u_fffd() {
    assert_eq!(
        events(b"event: \xFFx\ndata: a\xC3(b\xE2\x82\ndata: \xF0\x9F\x98\n\n"),
        [event(
            "\u{FFFD}x",
            "a\u{FFFD}(b\u{FFFD}\n\u{FFFD}",
            None,
            None
        )]
    );
}

#[test]
fn utf8_sequence_split_across_chunks_is_decoded() {
    let input = "data: é€😀\n\n".as_bytes();
    assert_eq!(bytewise(input), [Ok(message("é€😀"))]);
}

// ---- a realistic stream ----

#[test]
fn mcp_response_stream_snapshot() {
    let stream = concat!(
        "id: 0\r\ndata:\r\n\r\n",
        ": ping\r\n\r\n",
        "event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",",
        "\"params\":{\"progressToken\":\"t\",\"progress\":1}}\r\n\r\n",
        "retry: 3000\r\nid: 2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\r\n",
        "data: \"result\":{}}\r\n\r\n",
    );
    let mut parser = SseParser::new();
    let out = feed(&mut parser, &[stream.as_bytes()]);
    insta::assert_debug_snapshot!((out, parser));
}

// ---- properties ----

/// One generated event: the fields it writes, in a fixed order.
#[derive(Clone, Debug)]
struct Spec {
    comment: Option<String>,
    event: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    data: Vec<String>,
    meta_after_data: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::option::of("[^\r\n]{0,6}"),
        proptest::option::of("[^\r\n]{1,6}"),
        proptest::option::of("[^\r\n\u{0}]{0,6}"),
        proptest::option::of(any::<u64>()),
        proptest::collection::vec("[^\r\n]{0,8}", 0..4),
        any::<bool>(),
    )
        .prop_map(|(comment, event, id, retry, data, meta_after_data)| Spec {
            comment,
            event,
            id,
            retry,
            data,
            meta_after_data,
        })
}

/// Serializes events with line ends chosen from `ends` (0: LF, 1: CRLF, 2: CR) in turn, and
/// `tight` choosing `name:value` over `name: value` where that keeps the value.
fn serialize(specs: &[Spec], ends: &[u8], tight: &[bool], bom: bool) -> Vec<u8> {
    let mut lines: Vec<String> = Vec::new();
    for spec in specs {
        let mut meta = Vec::new();
        if let Some(id) = &spec.id {
            meta.push(("id", id.clone()));
        }
        if let Some(event) = &spec.event {
            meta.push(("event", event.clone()));
        }
        if let Some(retry) = spec.retry {
            meta.push(("retry", retry.to_string()));
        }
        let data: Vec<(&str, String)> = spec.data.iter().map(|d| ("data", d.clone())).collect();
        let fields = if spec.meta_after_data {
            [data, meta].concat()
        } else {
            [meta, data].concat()
        };
        if let Some(comment) = &spec.comment {
            lines.push(format!(":{comment}"));
        }
        for (name, value) in fields {
            let i = lines.len();
            if tight[i % tight.len()] && !value.starts_with(' ') {
                lines.push(format!("{name}:{value}"));
            } else {
                lines.push(format!("{name}: {value}"));
            }
        }
        lines.push(String::new());
    }
    let mut out = if bom { BOM.to_vec() } else { Vec::new() };
    let mut previous_cr = false;
    for (i, line) in lines.iter().enumerate() {
        out.extend_from_slice(line.as_bytes());
        let mut end = ends[i % ends.len()];
        // An LF right after a CR would merge with it into one CRLF line end.
        if previous_cr && line.is_empty() && end == 0 {
            end = 2;
        }
        out.extend_from_slice(match end {
            0 => b"\n".as_slice(),
            1 => b"\r\n",
            _ => b"\r",
        });
        previous_cr = end == 2;
    }
    out
}

/// The events a correct parser yields for `specs`.
fn expected(specs: &[Spec]) -> Vec<SseEvent> {
    let mut id: Option<String> = None;
    let mut out = Vec::new();
    for spec in specs {
        if let Some(new) = &spec.id {
            id = (!new.is_empty()).then(|| new.clone());
        }
        if !spec.data.is_empty() {
            out.push(SseEvent {
                event: spec.event.clone().unwrap_or_else(|| "message".to_owned()),
                data: spec.data.join("\n"),
                id: id.clone(),
                retry: spec.retry,
            });
        }
    }
    out
}

/// Byte strings that, glued together, make streams full of edge cases.
const PIECES: &[&[u8]] = &[
    b"data",
    b"id",
    b"event",
    b"retry",
    b":",
    b" ",
    b"\r",
    b"\n",
    b"\r\n",
    b"\xEF\xBB\xBF",
    b"\xEF",
    b"\xFF",
    b"\xC3\xA9",
    b"\0",
    b"7",
    b"xyz",
];

proptest! {
    #[test]
    fn generated_events_survive_any_chunking(
        specs in proptest::collection::vec(spec(), 0..6),
        ends in proptest::collection::vec(0u8..3, 1..8),
        tight in proptest::collection::vec(any::<bool>(), 1..8),
        bom in any::<bool>(),
        points in proptest::collection::vec(any::<usize>(), 0..24),
    ) {
        let input = serialize(&specs, &ends, &tight, bom);
        let want: Outcome = expected(&specs).into_iter().map(Ok).collect();
        let whole = feed(&mut SseParser::new(), &[&input]);
        prop_assert_eq!(&whole, &want);
        prop_assert_eq!(feed_split(DEFAULT_MAX_EVENT_SIZE, &input, &points), want);
    }

    #[test]
    fn any_bytes_give_the_same_results_under_any_chunking(
        pieces in proptest::collection::vec(proptest::sample::select(PIECES), 0..80),
        limit in 0usize..24,
        points in proptest::collection::vec(any::<usize>(), 0..24),
    ) {
        let input = pieces.concat();
        let whole = feed(&mut SseParser::with_max_event_size(limit), &[&input]);
        for event in whole.iter().flatten() {
            prop_assert!(event.data.len() <= limit);
        }
        prop_assert_eq!(feed_split(limit, &input, &points), whole.clone());
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        prop_assert_eq!(feed(&mut SseParser::with_max_event_size(limit), &bytes), whole);
    }
}

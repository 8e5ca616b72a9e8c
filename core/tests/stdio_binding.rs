//! The tunnel's shared stdio binding (`tunnel::stdio`): one request lifecycle at a time,
//! retired ids and late responses, the initialize deadline that fails closed, the initialized
//! guard, framing (one line per payload, stdout cut in any chunking, oversized frames scanned
//! for their id and discarded), the child's exit, the wire transcript of a guarded session, and
//! the exactly-once property. The instants are the test's own (the core reads no clock).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Instant;

use mcpwire_core::jsonrpc::{Id, Message};
use mcpwire_core::tunnel::failure::{FailureSource, TransportErrorKind};
use mcpwire_core::tunnel::stdio::{
    StdioError, StdioFailure, StdioOutput, INITIALIZED_NOTIFICATION,
};
use mcpwire_core::tunnel::{CommandId, DiscardReason, StdioBinding, StdioConfig};
use proptest::prelude::*;

/// The binding keeps no deadline of its own and ignores the instant it is given; the test reads
/// the clock for it (the core reads none).
fn now() -> Instant {
    Instant::now()
}

fn binding() -> StdioBinding {
    StdioBinding::new(StdioConfig::default())
}

fn guarded() -> StdioBinding {
    StdioBinding::new(StdioConfig {
        send_initialized_notification: true,
        ..StdioConfig::default()
    })
}

fn with(config: StdioConfig) -> StdioBinding {
    StdioBinding::new(config)
}

fn drain(b: &mut StdioBinding) -> Vec<StdioOutput> {
    std::iter::from_fn(|| b.poll_output()).collect()
}

fn req(id: i64, method: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#)
}

fn notif(method: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#)
}

fn ok(id: i64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
}

fn err(id: i64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"no"}}}}"#)
}

const PROGRESS: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;

fn write(json: &str) -> StdioOutput {
    StdioOutput::Write(format!("{json}\n").into_bytes())
}

fn feed(b: &mut StdioBinding, json: &str) {
    b.handle_stdout(now(), format!("{json}\n").as_bytes());
}

fn response(n: u64, json: &str) -> StdioOutput {
    StdioOutput::Response {
        cmd: CommandId(n),
        json: json.to_owned(),
    }
}

fn message(n: u64, json: &str) -> StdioOutput {
    StdioOutput::Message {
        cmd: CommandId(n),
        json: json.to_owned(),
    }
}

fn failed(n: u64, reason: StdioFailure) -> StdioOutput {
    StdioOutput::Failed {
        cmd: CommandId(n),
        reason,
    }
}

fn sent(n: u64) -> StdioOutput {
    StdioOutput::NotificationSent { cmd: CommandId(n) }
}

fn discarded(reason: DiscardReason, id: Option<i64>) -> StdioOutput {
    StdioOutput::Discarded {
        reason,
        id: id.map(Id::from),
    }
}

#[test]
fn request_is_written_as_one_line_and_waits_for_its_response() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "tools/list"))
        .unwrap();
    assert_eq!(drain(&mut b), [write(&req(1, "tools/list"))]);
    assert!(!b.is_idle());
}

#[test]
fn payload_whitespace_outside_strings_is_removed_and_strings_are_byte_identical() {
    let pretty = "{\n  \"jsonrpc\" : \"2.0\",\r\n\t\"id\": \"a b\",\n  \"method\": \"tools/call\",\n  \"params\": { \"text\": \"one\\ntwo \\\" three \\\\\", \"u\": \"\u{e9} \\u00e9 \u{1F600}\", \"sp\": \"  two  spaces \" , \"n\": [ 1 , 2.5e3 , true , null ] }\n}\n";
    let expected = "{\"jsonrpc\":\"2.0\",\"id\":\"a b\",\"method\":\"tools/call\",\"params\":{\"text\":\"one\\ntwo \\\" three \\\\\",\"u\":\"\u{e9} \\u00e9 \u{1F600}\",\"sp\":\"  two  spaces \",\"n\":[1,2.5e3,true,null]}}";
    let mut b = binding();
    b.handle_command(now(), CommandId(1), pretty).unwrap();
    let out = drain(&mut b);
    assert_eq!(out, [write(expected)]);
    let StdioOutput::Write(bytes) = &out[0] else {
        unreachable!()
    };
    assert_eq!(bytes.iter().filter(|&&c| c == b'\n').count(), 1);
    for s in [
        "\"one\\ntwo \\\" three \\\\\"",
        "\"\u{e9} \\u00e9 \u{1F600}\"",
        "\"  two  spaces \"",
    ] {
        assert!(expected.contains(s), "string {s} changed");
    }
    let a: serde_json::Value = serde_json::from_str(pretty).unwrap();
    let c: serde_json::Value = serde_json::from_str(expected).unwrap();
    assert_eq!(a, c);
}

#[test]
fn response_with_the_active_id_ends_the_lifecycle() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(7, "tools/list"))
        .unwrap();
    b.handle_command(now(), CommandId(2), &req(8, "tools/list"))
        .unwrap();
    assert_eq!(drain(&mut b), [write(&req(7, "tools/list"))]);
    feed(&mut b, &ok(7));
    assert_eq!(
        drain(&mut b),
        [response(1, &ok(7)), write(&req(8, "tools/list"))]
    );
    feed(&mut b, &err(8));
    assert_eq!(drain(&mut b), [response(2, &err(8))]);
    assert!(b.is_idle());
}

#[test]
fn server_messages_during_a_request_are_messages_for_that_token() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
        .unwrap();
    drain(&mut b);
    feed(&mut b, PROGRESS);
    // A server request that happens to use the active id is not the response.
    let server_req = req(1, "sampling/createMessage");
    feed(&mut b, &server_req);
    assert_eq!(
        drain(&mut b),
        [message(1, PROGRESS), message(1, &server_req)]
    );
    feed(&mut b, &ok(1));
    assert_eq!(drain(&mut b), [response(1, &ok(1))]);
}

#[test]
fn notification_is_written_and_acknowledged() {
    let mut b = binding();
    b.handle_command(
        now(),
        CommandId(1),
        &notif("notifications/roots/list_changed"),
    )
    .unwrap();
    assert_eq!(
        drain(&mut b),
        [write(&notif("notifications/roots/list_changed")), sent(1)]
    );
    assert!(b.is_idle());
}

#[test]
fn notification_is_not_held_behind_an_active_request() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
        .unwrap();
    drain(&mut b);
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
    b.handle_command(now(), CommandId(2), cancel).unwrap();
    assert_eq!(drain(&mut b), [write(cancel), sent(2)]);
}

#[test]
fn commands_are_written_in_arrival_order() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_command(now(), CommandId(2), &req(2, "b")).unwrap();
    b.handle_command(now(), CommandId(3), &notif("n")).unwrap();
    assert_eq!(drain(&mut b), [write(&req(1, "a"))]);
    feed(&mut b, &ok(1));
    assert_eq!(
        drain(&mut b),
        [
            response(1, &ok(1)),
            write(&req(2, "b")),
            write(&notif("n")),
            sent(3)
        ]
    );
}

#[test]
fn nothing_is_written_while_initialize_is_active() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(0, "initialize"))
        .unwrap();
    b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
        .unwrap();
    assert_eq!(drain(&mut b), [write(&req(0, "initialize"))]);
    feed(&mut b, &ok(0));
    assert_eq!(
        drain(&mut b),
        [
            response(1, &ok(0)),
            write(&notif("notifications/initialized")),
            sent(2)
        ]
    );
}

#[test]
fn deadline_retires_id_and_next_command_is_served() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
        .unwrap();
    b.handle_command(now(), CommandId(2), &req(2, "tools/list"))
        .unwrap();
    assert_eq!(drain(&mut b), [write(&req(1, "tools/call"))]);
    b.handle_deadline(now(), CommandId(1));
    assert_eq!(drain(&mut b), [write(&req(2, "tools/list"))]);
    assert_eq!(b.retired(), 1);
    feed(&mut b, &ok(2));
    assert_eq!(drain(&mut b), [response(2, &ok(2))]);
    feed(&mut b, &ok(1));
    assert_eq!(
        drain(&mut b),
        [discarded(DiscardReason::LateResponse, Some(1))]
    );
    assert_eq!(b.retired(), 0);
    assert!(b.is_idle());
}

#[test]
fn late_response_is_not_mistaken_for_the_active_request() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
        .unwrap();
    b.handle_deadline(now(), CommandId(1));
    b.handle_command(now(), CommandId(2), &req(2, "tools/list"))
        .unwrap();
    drain(&mut b);
    // The late response arrives while request 2 is active: it is not 2's answer.
    feed(&mut b, &ok(1));
    assert_eq!(
        drain(&mut b),
        [discarded(DiscardReason::LateResponse, Some(1))]
    );
    assert!(!b.is_idle());
}

#[test]
fn response_for_active_id_is_delivered_while_a_retired_id_is_outstanding() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
        .unwrap();
    b.handle_deadline(now(), CommandId(1));
    b.handle_command(now(), CommandId(2), &req(2, "tools/list"))
        .unwrap();
    drain(&mut b);
    feed(&mut b, &ok(2));
    assert_eq!(drain(&mut b), [response(2, &ok(2))]);
    assert_eq!(b.retired(), 1);
}

#[test]
fn server_messages_are_ambiguous_while_a_retired_response_is_outstanding() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "tools/call"))
        .unwrap();
    b.handle_deadline(now(), CommandId(1));
    b.handle_command(now(), CommandId(2), &req(2, "tools/call"))
        .unwrap();
    drain(&mut b);
    feed(&mut b, PROGRESS);
    feed(&mut b, &req(40, "roots/list"));
    assert_eq!(
        drain(&mut b),
        [
            discarded(DiscardReason::Ambiguous, None),
            discarded(DiscardReason::Ambiguous, Some(40))
        ]
    );
    // Once the late response is in, messages are attributable again.
    feed(&mut b, &ok(1));
    feed(&mut b, PROGRESS);
    assert_eq!(
        drain(&mut b),
        [
            discarded(DiscardReason::LateResponse, Some(1)),
            message(2, PROGRESS)
        ]
    );
}

#[test]
fn command_reusing_an_outstanding_retired_id_fails_with_retired_id_in_use() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(5, "tools/call"))
        .unwrap();
    b.handle_deadline(now(), CommandId(1));
    drain(&mut b);
    b.handle_command(now(), CommandId(2), &req(5, "tools/call"))
        .unwrap();
    assert_eq!(drain(&mut b), [failed(2, StdioFailure::RetiredIdInUse)]);
    // The string id "5" is a different id.
    let string_id = r#"{"jsonrpc":"2.0","id":"5","method":"tools/call"}"#;
    b.handle_command(now(), CommandId(3), string_id).unwrap();
    assert_eq!(drain(&mut b), [write(string_id)]);
}

#[test]
fn retired_id_is_free_again_after_its_late_response() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(5, "tools/call"))
        .unwrap();
    b.handle_deadline(now(), CommandId(1));
    feed(&mut b, &ok(5));
    drain(&mut b);
    b.handle_command(now(), CommandId(2), &req(5, "tools/call"))
        .unwrap();
    assert_eq!(drain(&mut b), [write(&req(5, "tools/call"))]);
    feed(&mut b, &ok(5));
    assert_eq!(drain(&mut b), [response(2, &ok(5))]);
}

#[test]
fn initialize_deadline_fails_closed() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(0, "initialize"))
        .unwrap();
    b.handle_command(now(), CommandId(2), &req(1, "tools/list"))
        .unwrap();
    b.handle_command(now(), CommandId(3), &notif("notifications/initialized"))
        .unwrap();
    drain(&mut b);
    b.handle_deadline(now(), CommandId(1));
    assert_eq!(
        drain(&mut b),
        [
            failed(2, StdioFailure::Restarted),
            failed(3, StdioFailure::Restarted),
            StdioOutput::Restart
        ]
    );
    assert_eq!(b.retired(), 0, "initialize is never retired");
}

#[test]
fn commands_after_restart_wait_for_the_replacement_child() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(0, "initialize"))
        .unwrap();
    b.handle_deadline(now(), CommandId(1));
    drain(&mut b);
    b.handle_command(now(), CommandId(2), &req(0, "initialize"))
        .unwrap();
    assert!(!b.is_idle());
    // The old child's output is not attributable to anything.
    feed(&mut b, &ok(0));
    assert_eq!(drain(&mut b), []);
    b.handle_child_exit(now());
    assert_eq!(drain(&mut b), [write(&req(0, "initialize"))]);
    feed(&mut b, &ok(0));
    assert_eq!(drain(&mut b), [response(2, &ok(0))]);
}

#[test]
fn queued_command_deadline_removes_it_without_output() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_command(now(), CommandId(2), &req(2, "b")).unwrap();
    drain(&mut b);
    b.handle_deadline(now(), CommandId(2));
    assert_eq!(drain(&mut b), []);
    assert_eq!(b.queued(), 0);
    feed(&mut b, &ok(1));
    assert_eq!(drain(&mut b), [response(1, &ok(1))]);
}

#[test]
fn queued_initialize_deadline_does_not_restart() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_command(now(), CommandId(2), &req(0, "initialize"))
        .unwrap();
    drain(&mut b);
    b.handle_deadline(now(), CommandId(2));
    assert_eq!(drain(&mut b), []);
    assert!(!b.awaiting_exit());
}

#[test]
fn deadline_after_the_terminal_output_is_ignored() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    feed(&mut b, &ok(1));
    drain(&mut b);
    b.handle_deadline(now(), CommandId(1));
    assert_eq!(drain(&mut b), []);
    assert_eq!(b.retired(), 0);
}

#[test]
fn too_many_retired_ids_fail_closed() {
    let mut b = with(StdioConfig {
        max_retired: 1,
        ..StdioConfig::default()
    });
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_deadline(now(), CommandId(1));
    b.handle_command(now(), CommandId(2), &req(2, "a")).unwrap();
    b.handle_command(now(), CommandId(3), &req(3, "a")).unwrap();
    drain(&mut b);
    b.handle_deadline(now(), CommandId(2));
    assert_eq!(
        drain(&mut b),
        [failed(3, StdioFailure::Restarted), StdioOutput::Restart]
    );
}

#[test]
fn guard_writes_initialized_after_successful_initialize_before_the_next_command() {
    let mut b = guarded();
    b.handle_command(now(), CommandId(1), &req(0, "initialize"))
        .unwrap();
    b.handle_command(now(), CommandId(2), &req(1, "tools/list"))
        .unwrap();
    drain(&mut b);
    feed(&mut b, &ok(0));
    assert_eq!(
        drain(&mut b),
        [
            response(1, &ok(0)),
            write(INITIALIZED_NOTIFICATION),
            write(&req(1, "tools/list"))
        ]
    );
}

#[test]
fn guard_acknowledges_the_callers_initialized_without_a_duplicate() {
    let mut b = guarded();
    b.handle_command(now(), CommandId(1), &req(0, "initialize"))
        .unwrap();
    feed(&mut b, &ok(0));
    drain(&mut b);
    b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
        .unwrap();
    assert_eq!(drain(&mut b), [sent(2)]);
    // Only the one the guard stood in for is absorbed.
    b.handle_command(now(), CommandId(3), &notif("notifications/initialized"))
        .unwrap();
    assert_eq!(
        drain(&mut b),
        [write(&notif("notifications/initialized")), sent(3)]
    );
}

#[test]
fn guard_does_not_write_after_an_initialize_error() {
    let mut b = guarded();
    b.handle_command(now(), CommandId(1), &req(0, "initialize"))
        .unwrap();
    drain(&mut b);
    feed(&mut b, &err(0));
    assert_eq!(drain(&mut b), [response(1, &err(0))]);
    b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
        .unwrap();
    assert_eq!(
        drain(&mut b),
        [write(&notif("notifications/initialized")), sent(2)]
    );
}

#[test]
fn guard_disabled_by_default_forwards_verbatim() {
    assert!(!StdioConfig::default().send_initialized_notification);
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(0, "initialize"))
        .unwrap();
    drain(&mut b);
    feed(&mut b, &ok(0));
    assert_eq!(drain(&mut b), [response(1, &ok(0))]);
    b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
        .unwrap();
    assert_eq!(
        drain(&mut b),
        [write(&notif("notifications/initialized")), sent(2)]
    );
}

#[test]
fn child_exit_answers_every_queued_command() {
    let mut b = binding();
    b.handle_command(now(), CommandId(9), &req(9, "a")).unwrap();
    b.handle_deadline(now(), CommandId(9));
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_command(now(), CommandId(2), &req(2, "b")).unwrap();
    b.handle_command(now(), CommandId(3), &notif("n")).unwrap();
    drain(&mut b);
    b.handle_child_exit(now());
    assert_eq!(
        drain(&mut b),
        [
            failed(1, StdioFailure::TransportClosed),
            failed(2, StdioFailure::TransportClosed),
            failed(3, StdioFailure::TransportClosed)
        ]
    );
    assert!(b.is_idle());
    assert_eq!(b.retired(), 0, "a fresh child has no retired ids");
    b.handle_command(now(), CommandId(4), &req(9, "a")).unwrap();
    assert_eq!(drain(&mut b), [write(&req(9, "a"))]);
}

#[test]
fn unterminated_last_frame_is_read_at_exit() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    b.handle_stdout(now(), ok(1).as_bytes());
    assert_eq!(drain(&mut b), []);
    b.handle_child_exit(now());
    assert_eq!(drain(&mut b), [response(1, &ok(1))]);
}

#[test]
fn queue_bound_refuses_with_queue_full_and_keeps_nothing() {
    let mut b = with(StdioConfig {
        max_queued: 2,
        ..StdioConfig::default()
    });
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_command(now(), CommandId(2), &req(2, "a")).unwrap();
    b.handle_command(now(), CommandId(3), &req(3, "a")).unwrap();
    assert_eq!(
        b.handle_command(now(), CommandId(4), &req(4, "a")),
        Err(StdioError::QueueFull { max: 2 })
    );
    assert_eq!(b.queued(), 2);
    drain(&mut b);
    b.handle_child_exit(now());
    let tokens: Vec<u64> = drain(&mut b)
        .into_iter()
        .filter_map(|o| match o {
            StdioOutput::Failed { cmd, .. } => Some(cmd.0),
            _ => None,
        })
        .collect();
    assert_eq!(tokens, [1, 2, 3]);
}

#[test]
fn queue_bound_counts_only_waiting_commands() {
    let mut b = with(StdioConfig {
        max_queued: 0,
        ..StdioConfig::default()
    });
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    assert_eq!(drain(&mut b), [write(&req(1, "a"))]);
    assert!(matches!(
        b.handle_command(now(), CommandId(2), &req(2, "a")),
        Err(StdioError::QueueFull { .. })
    ));
}

#[test]
fn frame_split_across_chunks_is_one_message() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    let bytes = format!("{PROGRESS}\r\n{}\r\n", ok(1)).into_bytes();
    for byte in bytes.chunks(1) {
        b.handle_stdout(now(), byte);
    }
    assert_eq!(drain(&mut b), [message(1, PROGRESS), response(1, &ok(1))]);
}

#[test]
fn two_frames_in_one_chunk_are_two_messages() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    b.handle_stdout(now(), format!("{PROGRESS}\n{}\n", ok(1)).as_bytes());
    assert_eq!(drain(&mut b), [message(1, PROGRESS), response(1, &ok(1))]);
}

#[test]
fn crlf_line_ends_and_blank_lines_are_tolerated() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    b.handle_stdout(now(), b"\r\n   \n\n");
    b.handle_stdout(now(), format!("{}\r\n", ok(1)).as_bytes());
    assert_eq!(drain(&mut b), [response(1, &ok(1))]);
}

fn small_frames() -> StdioBinding {
    with(StdioConfig {
        max_frame_bytes: 64,
        ..StdioConfig::default()
    })
}

fn big(prefix: &str, suffix: &str) -> String {
    format!("{prefix}{}{suffix}", "x".repeat(10_000))
}

#[test]
fn oversized_frame_is_discarded_without_buffering_it() {
    let mut b = small_frames();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    let frame = big(
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":""#,
        "\"}}\n",
    );
    for chunk in frame.as_bytes().chunks(100) {
        b.handle_stdout(now(), chunk);
        assert!(b.buffered() <= 64, "buffered {}", b.buffered());
    }
    assert_eq!(
        drain(&mut b),
        [discarded(DiscardReason::FrameTooLarge, None)]
    );
    // The lifecycle goes on.
    feed(&mut b, &ok(1));
    assert_eq!(drain(&mut b), [response(1, &ok(1))]);
}

#[test]
fn frame_of_exactly_max_bytes_is_accepted() {
    let json = ok(1);
    let mut b = with(StdioConfig {
        max_frame_bytes: json.len(),
        ..StdioConfig::default()
    });
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    feed(&mut b, &json);
    assert_eq!(drain(&mut b), [response(1, &json)]);

    let mut b = with(StdioConfig {
        max_frame_bytes: json.len() - 1,
        ..StdioConfig::default()
    });
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    feed(&mut b, &json);
    assert_eq!(
        drain(&mut b),
        [
            discarded(DiscardReason::FrameTooLarge, Some(1)),
            failed(1, StdioFailure::FrameTooLarge)
        ]
    );
}

#[test]
fn oversized_response_for_the_active_id_fails_the_command() {
    let mut b = small_frames();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_command(now(), CommandId(2), &req(2, "b")).unwrap();
    drain(&mut b);
    feed(
        &mut b,
        &big(r#"{"jsonrpc":"2.0","id":1,"result":{"big":""#, "\"}}"),
    );
    assert_eq!(
        drain(&mut b),
        [
            discarded(DiscardReason::FrameTooLarge, Some(1)),
            failed(1, StdioFailure::FrameTooLarge),
            write(&req(2, "b"))
        ]
    );
}

#[test]
fn oversized_frame_scan_reads_only_the_top_level_id() {
    let mut b = small_frames();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    // A nested "id" and an id key inside a string come first; the top-level id is last.
    feed(
        &mut b,
        &big(
            r#"{"jsonrpc":"2.0","result":{"id":2,"s":"\"id\":3,","big":""#,
            r#""}, "id" : 1 }"#,
        ),
    );
    assert_eq!(
        drain(&mut b),
        [
            discarded(DiscardReason::FrameTooLarge, Some(1)),
            failed(1, StdioFailure::FrameTooLarge)
        ]
    );
}

#[test]
fn oversized_server_request_with_the_active_id_is_not_the_response() {
    let mut b = small_frames();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    feed(
        &mut b,
        &big(
            r#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"p":""#,
            "\"}}",
        ),
    );
    assert_eq!(
        drain(&mut b),
        [discarded(DiscardReason::FrameTooLarge, Some(1))]
    );
    assert!(!b.is_idle());
}

#[test]
fn oversized_late_response_frees_the_retired_id() {
    let mut b = small_frames();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_deadline(now(), CommandId(1));
    drain(&mut b);
    feed(
        &mut b,
        &big(r#"{"jsonrpc":"2.0","id":1,"result":{"big":""#, "\"}}"),
    );
    assert_eq!(
        drain(&mut b),
        [discarded(DiscardReason::FrameTooLarge, Some(1))]
    );
    assert_eq!(b.retired(), 0);
}

#[test]
fn malformed_and_non_utf8_lines_are_discarded() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    b.handle_stdout(now(), b"\xff\xfe{}\n");
    b.handle_stdout(now(), b"server starting...\n");
    b.handle_stdout(now(), b"{\"id\":1,\"result\":{}}\n");
    assert_eq!(
        drain(&mut b),
        [
            discarded(DiscardReason::Malformed, None),
            discarded(DiscardReason::Malformed, None),
            discarded(DiscardReason::Malformed, None)
        ]
    );
    assert!(!b.is_idle());
}

#[test]
fn null_id_error_is_discarded_as_unattributable() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    feed(
        &mut b,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
    );
    assert_eq!(drain(&mut b), [discarded(DiscardReason::NullIdError, None)]);
    assert!(!b.is_idle());
}

#[test]
fn unmatched_response_is_discarded() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    drain(&mut b);
    feed(&mut b, &ok(9));
    assert_eq!(
        drain(&mut b),
        [discarded(DiscardReason::UnmatchedResponse, Some(9))]
    );
}

#[test]
fn server_message_without_an_active_request_is_discarded() {
    let mut b = binding();
    feed(&mut b, PROGRESS);
    assert_eq!(
        drain(&mut b),
        [discarded(DiscardReason::NoActiveRequest, None)]
    );
}

#[test]
fn invalid_payload_is_refused() {
    let mut b = binding();
    for bad in ["not json", r#"{"id":1,"method":"x"}"#, "[1]", ""] {
        assert!(matches!(
            b.handle_command(now(), CommandId(1), bad),
            Err(StdioError::InvalidPayload(_))
        ));
    }
    assert_eq!(drain(&mut b), []);
    assert!(b.is_idle());
}

#[test]
fn duplicate_token_is_refused() {
    let mut b = binding();
    b.handle_command(now(), CommandId(1), &req(1, "a")).unwrap();
    b.handle_command(now(), CommandId(2), &req(2, "a")).unwrap();
    assert_eq!(
        b.handle_command(now(), CommandId(1), &req(3, "a")),
        Err(StdioError::DuplicateCommand(CommandId(1)))
    );
    assert_eq!(
        b.handle_command(now(), CommandId(2), &req(3, "a")),
        Err(StdioError::DuplicateCommand(CommandId(2)))
    );
    assert_eq!(b.queued(), 1);
}

#[test]
fn caller_response_payload_is_written_and_acknowledged() {
    let mut b = binding();
    let answer = r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#;
    b.handle_command(now(), CommandId(1), answer).unwrap();
    assert_eq!(drain(&mut b), [write(answer), sent(1)]);
}

#[test]
fn stdio_failures_map_to_bounded_tunnel_failures() {
    let closed = StdioFailure::TransportClosed.to_tunnel_failure();
    assert_eq!(closed.source(), FailureSource::TransportClosed);
    assert_eq!(
        closed.transport_error_kind(),
        Some(TransportErrorKind::ClosedPipe)
    );
    assert!(!closed.upstream_response_received());
    let restarted = StdioFailure::Restarted.to_tunnel_failure();
    assert_eq!(restarted.source(), FailureSource::TransportClosed);
    assert!(!restarted.upstream_response_received());
    let retired = StdioFailure::RetiredIdInUse.to_tunnel_failure();
    assert_eq!(retired.source(), FailureSource::ClientInternal);
    let too_large = StdioFailure::FrameTooLarge.to_tunnel_failure();
    assert_eq!(too_large.source(), FailureSource::Protocol);
    assert!(too_large.upstream_response_received());
    assert_eq!(
        too_large.transport_error_kind(),
        Some(TransportErrorKind::ResponseBodyTooLarge)
    );
    let refused = StdioError::QueueFull { max: 1 }.to_tunnel_failure();
    assert_eq!(refused.source(), FailureSource::ClientInternal);
    assert!(!refused.upstream_response_received());
}

#[test]
fn debug_output_never_contains_payloads() {
    let mut b = binding();
    let secret = "sk-live-secret-123";
    let payload = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"key":"{secret}"}}}}"#
    );
    b.handle_command(now(), CommandId(1), &payload).unwrap();
    b.handle_command(
        now(),
        CommandId(2),
        &payload.replace("\"id\":1", "\"id\":2"),
    )
    .unwrap();
    let reply = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"key":"{secret}"}}}}"#);
    feed(&mut b, &reply);
    let out = drain(&mut b);
    assert!(out
        .iter()
        .any(|o| matches!(o, StdioOutput::Response { .. })));
    assert!(!format!("{out:?} {b:?}").contains(secret));
}

/// One line per output, with the payloads: the wire as the driver sees it.
fn transcript(out: &[StdioOutput]) -> String {
    let mut s = String::new();
    for o in out {
        let line = match o {
            StdioOutput::Write(bytes) => {
                format!("stdin <- {}", String::from_utf8_lossy(bytes).trim_end())
            }
            StdioOutput::Message {
                cmd: CommandId(token),
                json,
            } => format!("message {token}: {json}"),
            StdioOutput::Response {
                cmd: CommandId(token),
                json,
            } => format!("response {token}: {json}"),
            StdioOutput::NotificationSent {
                cmd: CommandId(token),
            } => format!("sent {token}"),
            StdioOutput::Failed {
                cmd: CommandId(token),
                reason,
            } => format!("failed {token}: {reason:?}"),
            StdioOutput::Restart => "restart".to_owned(),
            StdioOutput::Discarded { reason, id } => format!("discarded {reason:?} {id:?}"),
        };
        s.push_str(&line);
        s.push('\n');
    }
    s
}

#[test]
fn wire_transcript_of_a_guarded_session_with_a_timeout() {
    let mut b = guarded();
    let mut out = Vec::new();
    b.handle_command(now(), CommandId(1),
        "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 0,\n  \"method\": \"initialize\",\n  \"params\": {\"protocolVersion\": \"2025-11-25\", \"capabilities\": {}, \"clientInfo\": {\"name\": \"c\", \"version\": \"1\"}}\n}",
    )
    .unwrap();
    out.extend(drain(&mut b));
    b.handle_stdout(now(), b"{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"s\",\"version\":\"1\"}}}\r\n");
    out.extend(drain(&mut b));
    b.handle_command(now(), CommandId(2), &notif("notifications/initialized"))
        .unwrap();
    b.handle_command(
        now(),
        CommandId(3),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}"#,
    )
    .unwrap();
    b.handle_command(now(), CommandId(4), &req(2, "tools/list"))
        .unwrap();
    out.extend(drain(&mut b));
    b.handle_deadline(now(), CommandId(3));
    out.extend(drain(&mut b));
    feed(&mut b, PROGRESS);
    feed(
        &mut b,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"late"}]}}"#,
    );
    feed(&mut b, PROGRESS);
    feed(&mut b, r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#);
    out.extend(drain(&mut b));
    b.handle_child_exit(now());
    out.extend(drain(&mut b));
    insta::assert_snapshot!(transcript(&out));
}

/// One step of a generated run.
#[derive(Debug, Clone)]
enum Op {
    Request { id: i64, initialize: bool },
    Notify { initialized: bool },
    Deadline(usize),
    Reply { id: i64, error: bool },
    ServerNotification,
    ServerRequest(i64),
    NullIdError,
    Garbage,
    Big { id: i64, reply: bool },
    Exit,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..4i64, prop::bool::weighted(0.2))
            .prop_map(|(id, initialize)| Op::Request { id, initialize }),
        1 => any::<bool>().prop_map(|initialized| Op::Notify { initialized }),
        2 => any::<usize>().prop_map(Op::Deadline),
        3 => (0..4i64, any::<bool>()).prop_map(|(id, error)| Op::Reply { id, error }),
        1 => Just(Op::ServerNotification),
        1 => (0..4i64).prop_map(Op::ServerRequest),
        1 => Just(Op::NullIdError),
        1 => Just(Op::Garbage),
        1 => (0..4i64, any::<bool>()).prop_map(|(id, reply)| Op::Big { id, reply }),
        1 => Just(Op::Exit),
    ]
}

/// What the run knows about one admitted command.
#[derive(Debug, Default)]
struct Record {
    request_id: Option<Id>,
    terminals: u32,
    deadline_first: bool,
}

/// Checks one batch of outputs against the records: no output after a terminal or a handled
/// deadline, at most one terminal, and a response carries its own request's id.
fn check(
    records: &mut BTreeMap<CommandId, Record>,
    out: &[StdioOutput],
) -> Result<(), TestCaseError> {
    for o in out {
        let token = match o {
            StdioOutput::Write(bytes) => {
                prop_assert_eq!(bytes.last(), Some(&b'\n'));
                prop_assert_eq!(bytes.iter().filter(|&&c| c == b'\n').count(), 1);
                continue;
            }
            StdioOutput::Restart | StdioOutput::Discarded { .. } => continue,
            StdioOutput::Message { cmd: token, .. }
            | StdioOutput::Response { cmd: token, .. }
            | StdioOutput::NotificationSent { cmd: token }
            | StdioOutput::Failed { cmd: token, .. } => *token,
        };
        let Some(r) = records.get_mut(&token) else {
            return Err(TestCaseError::fail(format!(
                "output for unknown token {token:?}"
            )));
        };
        prop_assert!(!r.deadline_first, "output after deadline for {:?}", token);
        prop_assert_eq!(r.terminals, 0, "output after terminal for {:?}", token);
        match o {
            StdioOutput::Response { json, .. } => {
                let id = Message::parse(json).ok().and_then(|m| m.id().cloned());
                prop_assert!(r.request_id.is_some());
                prop_assert_eq!(
                    &id,
                    &r.request_id,
                    "response delivered to the wrong command"
                );
                r.terminals += 1;
            }
            StdioOutput::NotificationSent { .. } => {
                prop_assert!(r.request_id.is_none());
                r.terminals += 1;
            }
            StdioOutput::Failed { .. } => r.terminals += 1,
            _ => prop_assert!(r.request_id.is_some(), "message for a notification"),
        }
    }
    Ok(())
}

fn child_line(op: &Op) -> Option<String> {
    Some(match op {
        Op::Reply { id, error: false } => ok(*id),
        Op::Reply { id, error: true } => err(*id),
        Op::ServerNotification => PROGRESS.to_owned(),
        Op::ServerRequest(id) => req(*id, "roots/list"),
        Op::NullIdError => {
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}"#.to_owned()
        }
        Op::Garbage => "garbage".to_owned(),
        Op::Big { id, reply: true } => big(
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"b":""#),
            "\"}}",
        ),
        Op::Big { id, reply: false } => big(
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m","params":{{"b":""#),
            "\"}}",
        ),
        _ => return None,
    })
}

proptest! {
    #[test]
    fn every_admitted_command_gets_exactly_one_terminal_unless_its_deadline_came_first(
        ops in prop::collection::vec(op(), 0..60),
        split in 0usize..40,
        guard in any::<bool>(),
        max_queued in 0usize..4,
        max_retired in 0usize..3,
    ) {
        let mut b = with(StdioConfig {
            send_initialized_notification: guard,
            max_queued,
            max_frame_bytes: 200,
            max_retired,
        });
        let mut records: BTreeMap<CommandId, Record> = BTreeMap::new();
        let mut next = 0u64;
        for op in &ops {
            match op {
                Op::Request { id, initialize } => {
                    next += 1;
                    let method = if *initialize { "initialize" } else { "tools/call" };
                    if b.handle_command(now(), CommandId(next), &req(*id, method)).is_ok() {
                        records.insert(CommandId(next), Record { request_id: Some(Id::from(*id)), ..Record::default() });
                    }
                }
                Op::Notify { initialized } => {
                    next += 1;
                    let method = if *initialized { "notifications/initialized" } else { "notifications/cancelled" };
                    if b.handle_command(now(), CommandId(next), &notif(method)).is_ok() {
                        records.insert(CommandId(next), Record::default());
                    }
                }
                Op::Deadline(i) => {
                    let keys: Vec<CommandId> = records.keys().copied().collect();
                    if !keys.is_empty() {
                        let token = keys[i % keys.len()];
                        b.handle_deadline(now(), token);
                        if let Some(r) = records.get_mut(&token) {
                            if r.terminals == 0 {
                                r.deadline_first = true;
                            }
                        }
                    }
                }
                Op::Exit => b.handle_child_exit(now()),
                other => {
                    if let Some(line) = child_line(other) {
                        let bytes = format!("{line}\n").into_bytes();
                        let (a, c) = bytes.split_at(split.min(bytes.len()));
                        b.handle_stdout(now(), a);
                        b.handle_stdout(now(), c);
                    }
                }
            }
            let out = drain(&mut b);
            check(&mut records, &out)?;
        }
        // The first exit may only end a pending restart; the second fails the rest.
        b.handle_child_exit(now());
        b.handle_child_exit(now());
        let out = drain(&mut b);
        check(&mut records, &out)?;
        for (token, r) in &records {
            prop_assert!(
                r.deadline_first || r.terminals == 1,
                "token {:?} ended with {} terminals", token, r.terminals
            );
        }
        prop_assert!(b.is_idle());
    }
}

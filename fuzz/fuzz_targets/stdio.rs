//! Fuzzes the shared stdio binding with arbitrary interleavings of commands, deadlines, child
//! output (well-formed frames, split anywhere, oversized or raw bytes) and exits, and checks its
//! invariants: every admitted command gets exactly one terminal output unless its deadline was
//! reported first (then none), nothing is said about a command after that, a response goes only
//! to the command whose request id it carries, and every write is exactly one line.
#![no_main]

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::jsonrpc::{Id, Message};
use mcpwire_core::time::Instant;
use mcpwire_core::tunnel::stdio::StdioOutput;
use mcpwire_core::tunnel::{CommandId, StdioBinding, StdioConfig};

/// The number of a command's [`CommandId`].
type Token = u64;

#[derive(Arbitrary, Debug)]
enum Op {
    /// A request with a small id (collisions exercise retired ids), maybe `initialize`.
    Request {
        id: u8,
        initialize: bool,
        pretty: bool,
    },
    /// A notification, maybe `notifications/initialized`.
    Notify {
        initialized: bool,
    },
    /// A payload of arbitrary text.
    RawCommand(String),
    /// The deadline of the n-th admitted command (modulo their count), or of an unknown token.
    Deadline(u16),
    /// A response or error from the child.
    Reply {
        id: u8,
        error: bool,
    },
    ServerNotification,
    ServerRequest(u8),
    NullIdError,
    /// A frame past the frame limit, a response or a server request.
    Big {
        id: u8,
        reply: bool,
        len: u16,
    },
    /// Raw bytes on stdout.
    Bytes(Vec<u8>),
    Exit,
}

#[derive(Arbitrary, Debug)]
struct Run {
    guard: bool,
    max_queued: u8,
    max_retired: u8,
    max_frame_bytes: u16,
    /// Where each child frame is split in two.
    split: u16,
    ops: Vec<Op>,
}

#[derive(Default)]
struct Record {
    request_id: Option<Id>,
    terminals: u32,
    deadline_first: bool,
}

fn request(id: u8, method: &str, pretty: bool) -> String {
    if pretty {
        format!("{{\n  \"jsonrpc\": \"2.0\",\n  \"id\": {id},\n  \"method\": \"{method}\",\n  \"params\": {{ \"s\": \"a \\n b\" }}\n}}\n")
    } else {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#)
    }
}

fn check(records: &mut BTreeMap<Token, Record>, out: &[StdioOutput]) {
    for o in out {
        let token = match o {
            StdioOutput::Write(bytes) => {
                assert_eq!(bytes.last(), Some(&b'\n'), "a write ends its line");
                assert_eq!(
                    bytes.iter().filter(|&&c| c == b'\n').count(),
                    1,
                    "one line per write"
                );
                continue;
            }
            StdioOutput::Message { cmd, .. }
            | StdioOutput::Response { cmd, .. }
            | StdioOutput::NotificationSent { cmd }
            | StdioOutput::Failed { cmd, .. } => cmd.0,
            _ => continue,
        };
        let r = records
            .get_mut(&token)
            .expect("output for a command that was not admitted");
        assert!(!r.deadline_first, "output after the deadline of {token}");
        assert_eq!(r.terminals, 0, "output after the terminal of {token}");
        match o {
            StdioOutput::Response { json, .. } => {
                let id = Message::parse(json).ok().and_then(|m| m.id().cloned());
                assert!(r.request_id.is_some(), "response for a notification");
                assert_eq!(id, r.request_id, "response delivered to the wrong command");
                r.terminals += 1;
            }
            StdioOutput::NotificationSent { .. } => {
                assert!(r.request_id.is_none(), "acknowledged a request");
                r.terminals += 1;
            }
            StdioOutput::Failed { .. } => r.terminals += 1,
            _ => assert!(r.request_id.is_some(), "message for a notification"),
        }
    }
}

fn drain(b: &mut StdioBinding) -> Vec<StdioOutput> {
    std::iter::from_fn(|| b.poll_output()).collect()
}

fuzz_target!(|run: Run| {
    // The binding keeps no deadline: one instant serves every input.
    let now = Instant::now();
    let mut b = StdioBinding::new(StdioConfig {
        send_initialized_notification: run.guard,
        max_queued: usize::from(run.max_queued % 8),
        max_retired: usize::from(run.max_retired % 4),
        max_frame_bytes: usize::from(run.max_frame_bytes % 512).max(1),
    });
    let mut records: BTreeMap<Token, Record> = BTreeMap::new();
    let mut next: Token = 0;
    for op in run.ops.iter().take(256) {
        let mut line = None;
        match op {
            Op::Request {
                id,
                initialize,
                pretty,
            } => {
                next += 1;
                let method = if *initialize {
                    "initialize"
                } else {
                    "tools/call"
                };
                if b.handle_command(now, CommandId(next), &request(*id, method, *pretty))
                    .is_ok()
                {
                    let r = Record {
                        request_id: Some(Id::from(i64::from(*id))),
                        ..Record::default()
                    };
                    records.insert(next, r);
                }
            }
            Op::Notify { initialized } => {
                next += 1;
                let method = if *initialized {
                    "notifications/initialized"
                } else {
                    "notifications/cancelled"
                };
                let json = format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#);
                if b.handle_command(now, CommandId(next), &json).is_ok() {
                    records.insert(next, Record::default());
                }
            }
            Op::RawCommand(text) => {
                next += 1;
                if b.handle_command(now, CommandId(next), text).is_ok() {
                    let request_id = match Message::parse(text) {
                        Ok(Message::Request { id, .. }) => Some(id),
                        _ => None,
                    };
                    records.insert(
                        next,
                        Record {
                            request_id,
                            ..Record::default()
                        },
                    );
                }
            }
            Op::Deadline(n) => {
                let keys: Vec<Token> = records.keys().copied().collect();
                let token = match keys.len() {
                    0 => u64::from(*n),
                    len => keys[usize::from(*n) % len],
                };
                b.handle_deadline(now, CommandId(token));
                if let Some(r) = records.get_mut(&token) {
                    if r.terminals == 0 {
                        r.deadline_first = true;
                    }
                }
            }
            Op::Reply { id, error: false } => {
                line = Some(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#));
            }
            Op::Reply { id, error: true } => {
                line = Some(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-1,"message":"m"}}}}"#
                ));
            }
            Op::ServerNotification => {
                line = Some(r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#.to_owned());
            }
            Op::ServerRequest(id) => line = Some(request(*id, "roots/list", false)),
            Op::NullIdError => {
                line = Some(
                    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}"#.to_owned(),
                );
            }
            Op::Big { id, reply, len } => {
                let pad = "x".repeat(usize::from(*len % 2048));
                line = Some(if *reply {
                    format!(r#"{{"jsonrpc":"2.0","result":{{"id":99,"p":"{pad}"}},"id":{id}}}"#)
                } else {
                    format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"method":"m","params":{{"p":"{pad}"}}}}"#
                    )
                });
            }
            Op::Bytes(bytes) => b.handle_stdout(now, bytes),
            Op::Exit => b.handle_child_exit(now),
        }
        if let Some(line) = line {
            let bytes = format!("{line}\r\n").into_bytes();
            let (a, c) = bytes.split_at(usize::from(run.split) % (bytes.len() + 1));
            b.handle_stdout(now, a);
            b.handle_stdout(now, c);
        }
        let out = drain(&mut b);
        check(&mut records, &out);
    }
    // The first exit may only end a pending restart; the second fails whatever is left.
    b.handle_child_exit(now);
    b.handle_child_exit(now);
    let out = drain(&mut b);
    check(&mut records, &out);
    for (token, r) in &records {
        assert!(
            r.deadline_first || r.terminals == 1,
            "command {token} ended with {} terminal outputs",
            r.terminals
        );
    }
    assert!(b.is_idle());
});

//! Arbitrary bytes as a `200` poll body fed to `decode_poll_body`.
//!
//! Invariants: no panic; an accepted body lists exactly as many results as its `commands` array
//! has entries; every decoded command has a non-empty channel (`main` when the wire gives none),
//! echoes the wire's `request_id`, and is dispatched on `command_type` alone; a JSON-RPC payload is
//! a JSON object that re-parses to exactly the member received; decoded header values never hold
//! CR, LF or NUL; a per-command error names the command by index or by its `request_id`.
//!
//! The cross-checks read the input with `RawValue`/`BTreeMap` rather than `serde_json::Value`, so
//! deeply nested input (beyond `Value`'s recursion limit) is still checked rather than skipped.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use mcpwire_core::tunnel::wire::{decode_poll_body, CommandKind, DecodeError, DEFAULT_CHANNEL};
use serde_json::value::RawValue;

type Members<'a> = BTreeMap<String, &'a RawValue>;

/// The string value of member `key`, if it is a JSON string.
fn string(members: &Members<'_>, key: &str) -> Option<String> {
    members
        .get(key)
        .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
}

fuzz_target!(|data: &[u8]| {
    let Ok(results) = decode_poll_body(data) else {
        return;
    };
    // serde_json skips ignored string members without checking their UTF-8, so an accepted body
    // may hold invalid UTF-8 outside its commands (each command is captured as checked text).
    // Replacing those bytes cannot change the JSON structure: they are never structural.
    let text = String::from_utf8_lossy(data);
    let body: Members<'_> = serde_json::from_str(&text).expect("an accepted body is an object");
    let listed: Vec<&RawValue> = serde_json::from_str(body["commands"].get())
        .expect("an accepted body has a commands array");
    assert_eq!(listed.len(), results.len(), "one result per listed command");

    for (i, (result, raw)) in results.iter().zip(&listed).enumerate() {
        let members: Option<Members<'_>> = serde_json::from_str(raw.get()).ok();
        match result {
            Ok(cmd) => {
                let m = members.expect("a decoded command is a JSON object");
                assert!(
                    !cmd.channel.is_empty(),
                    "command {i} decoded with an empty channel"
                );
                match m.get("channel").map(|c| c.get()) {
                    None | Some("null") | Some("\"\"") => assert_eq!(cmd.channel, DEFAULT_CHANNEL),
                    Some(_) => assert_eq!(Some(&cmd.channel), string(&m, "channel").as_ref()),
                }
                assert_eq!(Some(&cmd.request_id), string(&m, "request_id").as_ref());
                let command_type = string(&m, "command_type");
                match &cmd.kind {
                    CommandKind::JsonRpc(payload) => {
                        assert!(matches!(command_type.as_deref(), None | Some("jsonrpc")));
                        let again: Box<RawValue> = serde_json::from_str(payload.get())
                            .expect("a JSON-RPC payload re-parses");
                        assert_eq!(again.get(), payload.get(), "re-parsing keeps the text");
                        assert!(
                            payload.get().starts_with('{'),
                            "a JSON-RPC payload is an object"
                        );
                        let _: Members<'_> = serde_json::from_str(payload.get())
                            .expect("a JSON-RPC payload is a JSON object");
                        assert_eq!(
                            m.get("jsonrpc").map(|r| r.get()),
                            Some(payload.get()),
                            "the payload is the received member, verbatim"
                        );
                    }
                    CommandKind::SessionTermination => {
                        assert_eq!(command_type.as_deref(), Some("session_termination"));
                    }
                    CommandKind::Unknown(t) => {
                        assert!(t != "jsonrpc" && t != "session_termination");
                        assert!(
                            t.chars().count() <= 64,
                            "unknown command types are truncated"
                        );
                        match command_type {
                            Some(wire) => assert!(wire.starts_with(t.as_str())),
                            // A command_type that is not a string is unknown, never JSON-RPC.
                            None => assert!(m.contains_key("command_type")),
                        }
                    }
                }
                for (_, v) in cmd.headers.iter() {
                    assert!(!v.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)));
                }
            }
            Err(DecodeError::NoRequestId { index, .. }) => assert_eq!(*index, i),
            Err(DecodeError::Command(bad)) => {
                let m = members.expect("a command named by its request_id is an object");
                assert_eq!(Some(&bad.request_id), string(&m, "request_id").as_ref());
                assert!(
                    !bad.channel.is_empty(),
                    "a malformed command's channel defaults to main"
                );
            }
            Err(e) => panic!("command {i}: a per-command error of the envelope kind: {e}"),
        }
    }
});

//! `X-Tunnel-MCP-Server-Info`: arbitrary text through the strict reader, and arbitrary
//! declaration lists through the builder. Every accepted value must satisfy the format's
//! invariants and survive a canonical round trip.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mcpwire_core::tunnel::server_info::{
    is_canonical_channel_name, ChannelDeclaration, ServerInfo, MAX_CHANNELS, MAX_HEADER_BYTES,
};

#[derive(Arbitrary, Debug)]
struct Declaration {
    name: String,
    stateless: bool,
    proc_affinity: bool,
}

/// Every invariant a built or parsed value must hold.
fn check_invariants(info: &ServerInfo) {
    let header = info.header_value();
    assert!(header.len() <= MAX_HEADER_BYTES);
    let channels = info.channels();
    assert!(!channels.is_empty() && channels.len() <= MAX_CHANNELS);
    for (i, c) in channels.iter().enumerate() {
        assert!(is_canonical_channel_name(&c.name), "{:?}", c.name);
        assert!(
            channels[..i].iter().all(|e| e.name != c.name),
            "duplicate {:?}",
            c.name
        );
    }
    let stateless = channels.iter().any(|c| c.stateless);
    assert_eq!(info.version(), if stateless { 2 } else { 1 });
    assert!(!header.contains(":false"), "a false flag was serialized");

    // The header is the canonical encoding, spelled independently here.
    let mut expected = format!("{{\"version\":{},\"channels\":[", info.version());
    for (i, c) in channels.iter().enumerate() {
        if i > 0 {
            expected.push(',');
        }
        expected.push_str(&format!("{{\"name\":\"{}\"", c.name));
        if c.stateless {
            expected.push_str(",\"stateless\":true");
        }
        if c.proc_affinity {
            expected.push_str(",\"proc_affinity\":true");
        }
        expected.push('}');
    }
    expected.push_str("]}");
    assert_eq!(header, expected);

    // Re-reading the header gives the same value.
    let again = ServerInfo::parse(header).expect("a built header must parse");
    assert_eq!(&again, info);
    assert_eq!(again.header_value(), header);
}

// The first byte picks the mode: even, the rest is a header value for the strict reader
// (so seeds such as `\0{"version":1,...}` are plain text); odd, the rest is decoded as a
// declaration list.
fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let Ok(text) = std::str::from_utf8(rest) else {
            return;
        };
        if let Ok(info) = ServerInfo::parse(text) {
            assert!(text.len() <= MAX_HEADER_BYTES);
            check_invariants(&info);
        }
        return;
    }
    let Ok(decls) = Vec::<Declaration>::arbitrary_take_rest(Unstructured::new(rest)) else {
        return;
    };
    let channels: Vec<ChannelDeclaration> = decls
        .into_iter()
        .map(|d| ChannelDeclaration {
            name: d.name,
            stateless: d.stateless,
            proc_affinity: d.proc_affinity,
        })
        .collect();
    // With names of at most 64 bytes and at most 32 channels the encoding stays under the byte
    // bound, so these three rules decide validity on their own.
    let valid = !channels.is_empty()
        && channels.len() <= MAX_CHANNELS
        && channels.iter().enumerate().all(|(i, c)| {
            is_canonical_channel_name(&c.name) && channels[..i].iter().all(|e| e.name != c.name)
        });
    match ServerInfo::new(channels.clone()) {
        Ok(info) => {
            assert!(valid);
            assert_eq!(info.channels(), channels.as_slice());
            check_invariants(&info);
        }
        Err(e) => {
            assert!(!valid, "valid declarations rejected: {e}");
            assert!(!e.to_string().is_empty());
        }
    }
});

//! The `2025-11-25` era's pieces: version negotiation in `initialize`, session ids, and the
//! `initialize` result (`lifecycle.mdx`, `transports.mdx` "Session Management").

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::jsonrpc::code;
use crate::mcp::meta::{ClientCapabilities, Implementation, JsonObject};
use crate::mcp::KNOWN_LEGACY_VERSIONS;

use super::modern::Refusal;

/// The id of the stdio connection's legacy session.
pub(super) const STDIO_SESSION: &str = "stdio";

/// What `initialize` asked, read.
#[derive(Debug, Clone)]
pub(super) struct InitializeRequest {
    pub(super) version: String,
    pub(super) capabilities: ClientCapabilities,
    pub(super) client_info: Option<Implementation>,
}

/// Reads `initialize`'s params and picks the version: the client's when the server speaks it,
/// else the newest legacy one (the client decides whether it can go on).
pub(super) fn read_initialize(params: &JsonObject) -> Result<InitializeRequest, Refusal> {
    let bad = |m: &str| Refusal::new(200, code::INVALID_PARAMS, format!("Invalid params: {m}"));
    let requested = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("initialize needs a string protocolVersion"))?;
    let capabilities = match params.get("capabilities") {
        None | Some(Value::Null) => ClientCapabilities::default(),
        Some(c @ Value::Object(_)) => serde_json::from_value(c.clone())
            .map_err(|_| bad("capabilities must be a ClientCapabilities object"))?,
        Some(_) => return Err(bad("capabilities must be an object")),
    };
    let client_info = match params.get("clientInfo") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            serde_json::from_value(v.clone())
                .map_err(|_| bad("clientInfo must be an Implementation (name and version)"))?,
        ),
    };
    let version = if KNOWN_LEGACY_VERSIONS.contains(&requested) {
        requested.to_owned()
    } else {
        KNOWN_LEGACY_VERSIONS[0].to_owned()
    };
    Ok(InitializeRequest {
        version,
        capabilities,
        client_info,
    })
}

/// The `n`th session id derived from `seed`: `mcp-` and 32 lower-case hex digits of
/// SHA-256(domain ‖ seed ‖ n) — visible ASCII, unguessable without the seed, distinct for
/// distinct `n`.
pub(super) fn session_id(seed: &[u8; 32], n: u64) -> String {
    let mut h = Sha256::new();
    h.update(b"mcpwire session id v1");
    h.update(seed);
    h.update(n.to_be_bytes());
    let digest = h.finalize();
    let mut out = String::with_capacity(36);
    out.push_str("mcp-");
    for b in digest.iter().take(16) {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// The `initialize` result.
pub(super) fn initialize_result(
    version: &str,
    capabilities: Value,
    info: &Implementation,
    instructions: Option<&str>,
) -> Value {
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": info,
    });
    if let (Some(text), Some(m)) = (instructions, result.as_object_mut()) {
        m.insert("instructions".into(), Value::String(text.to_owned()));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_visible_ascii_and_distinct() {
        let a = session_id(&[1; 32], 0);
        let b = session_id(&[1; 32], 1);
        let c = session_id(&[2; 32], 0);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.len(), 36);
        assert!(a.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    }

    #[test]
    fn negotiation_keeps_a_known_version_and_offers_the_newest_otherwise() {
        let read = |v: &str| {
            let p = json!({"protocolVersion": v, "capabilities": {}});
            read_initialize(p.as_object().unwrap_or(&JsonObject::new())).map(|r| r.version)
        };
        assert_eq!(read("2025-06-18").ok().as_deref(), Some("2025-06-18"));
        assert_eq!(read("1999-01-01").ok().as_deref(), Some("2025-11-25"));
        assert_eq!(read("2026-07-28").ok().as_deref(), Some("2025-11-25"));
    }
}

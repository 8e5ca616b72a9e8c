//! Sealing MRTR `requestState` (`2026-07-28`, `basic/utilities/mrtr` / SEP-2322): the
//! application's state goes to the client inside an opaque token the server can verify, so a
//! stateless server trusts nothing the client could have changed.
//!
//! A token is `v1.` followed by base64url (no padding) of:
//! `expiry (8 bytes, big-endian unix seconds) ‖ state (UTF-8) ‖ HMAC-SHA256 tag (32 bytes)`,
//! where the tag covers a domain label, the expiry, the [`Binding`] (the method, the
//! tool/prompt/resource name, the SHA-256 digests of the request's arguments and of its
//! principal, each length-prefixed) and the state (`basic/patterns/mrtr.mdx`: the principal,
//! a short expiry and the originating request, inside the integrity-protected state). A token is refused when it is not of that shape, when its
//! tag does not verify under the key for the request it came back with (tampered, or sealed for
//! another request or by a server with another key), or when it has expired.
//!
//! The seal authenticates, it does not encrypt: the client can read the state (it is only
//! base64url-encoded), so an application puts no secret in it (a key into its own store
//! instead), and a state meant to be redeemed once must be tracked by the application.
//!
//! HMAC comes from RustCrypto's `hmac` crate (0.13, over the same `sha2` 0.11 the core already
//! uses); the comparison of tags is its constant-time `verify_slice`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The prefix of every sealed token (its format version).
pub const PREFIX: &str = "v1.";

/// The longest application state sealed (a longer one is refused by [`seal`]'s caller, the
/// server, with `-32603`): tokens travel in request bodies, not headers, but stay bounded.
pub const MAX_STATE_BYTES: usize = 64 * 1024;

const DOMAIN: &[u8] = b"mcpwire requestState v1";
const TAG_LEN: usize = 32;

/// What a sealed state belongs to: the request it was issued for. A retry must name the same
/// method and name, with the same arguments, for the state to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The JSON-RPC method (`tools/call`, `prompts/get`, `resources/read`).
    pub method: String,
    /// The tool or prompt name, or the resource URI.
    pub name: String,
    /// SHA-256 of the canonical JSON of the arguments (see [`arguments_digest`]).
    pub arguments_digest: [u8; 32],
    /// SHA-256 of who asked (the server binds the HTTP `Authorization` value, so a state is
    /// refused when presented with other credentials); zeros for no one.
    pub principal_digest: [u8; 32],
}

impl Binding {
    /// The binding of a request of `method` naming `name` with `arguments` (`None` for a
    /// resource read, which has none).
    pub fn new(method: &str, name: &str, arguments: Option<&Value>) -> Self {
        Binding {
            method: method.to_owned(),
            name: name.to_owned(),
            arguments_digest: arguments_digest(arguments),
            principal_digest: [0; 32],
        }
    }

    /// Binds the state to `principal` too (the credentials the request came with).
    pub fn with_principal(mut self, principal: &str) -> Self {
        self.principal_digest = Sha256::digest(principal.as_bytes()).into();
        self
    }
}

/// SHA-256 of the arguments' canonical JSON: object members sorted by key at every depth
/// (serde_json's map is ordered by key), so the client's member order does not matter;
/// `None`, `null` and `{}` are the same (no arguments).
pub fn arguments_digest(arguments: Option<&Value>) -> [u8; 32] {
    let canonical = match arguments {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::Object(m)) if m.is_empty() => "{}".to_owned(),
        Some(v) => v.to_string(),
    };
    Sha256::digest(canonical.as_bytes()).into()
}

/// Why a token did not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Not a token of this format (no prefix, not base64url, too short, state not UTF-8).
    #[error("requestState is not a state this server issued (malformed)")]
    Malformed,
    /// The tag does not verify: the state was changed, was sealed for another request, or by
    /// another key.
    #[error("requestState failed verification (tampered, or issued for another request)")]
    BadTag,
    /// The state's expiry has passed.
    #[error("requestState has expired")]
    Expired,
}

fn tag(key: &[u8; 32], binding: &Binding, expiry: u64, state: &[u8]) -> Hmac<Sha256> {
    // HMAC pads a short key with zeros to the block size (64 bytes); doing it here gives the
    // same MAC through the infallible constructor.
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let mut mac = <Hmac<Sha256> as KeyInit>::new(&block.into());
    let mut field = |bytes: &[u8]| {
        mac.update(&(bytes.len() as u64).to_be_bytes());
        mac.update(bytes);
    };
    field(DOMAIN);
    field(&expiry.to_be_bytes());
    field(binding.method.as_bytes());
    field(binding.name.as_bytes());
    field(&binding.arguments_digest);
    field(&binding.principal_digest);
    field(state);
    mac
}

/// Seals `state` for `binding`, valid until `expiry` (unix seconds).
pub fn seal(key: &[u8; 32], binding: &Binding, state: &str, expiry: u64) -> String {
    let mac = tag(key, binding, expiry, state.as_bytes());
    let mut raw = Vec::with_capacity(8 + state.len() + TAG_LEN);
    raw.extend_from_slice(&expiry.to_be_bytes());
    raw.extend_from_slice(state.as_bytes());
    raw.extend_from_slice(&mac.finalize().into_bytes());
    let mut out = String::with_capacity(PREFIX.len() + raw.len() * 4 / 3 + 4);
    out.push_str(PREFIX);
    URL_SAFE_NO_PAD.encode_string(&raw, &mut out);
    out
}

/// Opens `token` for `binding` at `now` (unix seconds): the application's state, when the tag
/// verifies and the expiry has not passed.
pub fn open(key: &[u8; 32], binding: &Binding, token: &str, now: u64) -> Result<String, OpenError> {
    let body = token.strip_prefix(PREFIX).ok_or(OpenError::Malformed)?;
    if body.len() > (MAX_STATE_BYTES + 8 + TAG_LEN) * 4 / 3 + 4 {
        return Err(OpenError::Malformed);
    }
    let raw = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| OpenError::Malformed)?;
    if raw.len() < 8 + TAG_LEN {
        return Err(OpenError::Malformed);
    }
    let (head, tag_bytes) = raw.split_at(raw.len() - TAG_LEN);
    let (expiry_bytes, state) = head.split_at(8);
    let mut expiry = [0u8; 8];
    expiry.copy_from_slice(expiry_bytes);
    let expiry = u64::from_be_bytes(expiry);
    tag(key, binding, expiry, state)
        .verify_slice(tag_bytes)
        .map_err(|_| OpenError::BadTag)?;
    if now >= expiry {
        return Err(OpenError::Expired);
    }
    String::from_utf8(state.to_vec()).map_err(|_| OpenError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: [u8; 32] = [9; 32];

    fn binding() -> Binding {
        Binding::new("tools/call", "ask", Some(&json!({"b": 1, "a": [1, 2]})))
    }

    #[test]
    fn a_sealed_state_opens_for_its_request_before_expiry() {
        let token = seal(&KEY, &binding(), "step=2", 1_000);
        assert!(token.starts_with(PREFIX));
        assert!(
            !token.contains("step=2"),
            "the state is encoded, not shown verbatim"
        );
        assert_eq!(open(&KEY, &binding(), &token, 999).as_deref(), Ok("step=2"));
    }

    #[test]
    fn member_order_of_the_arguments_does_not_matter() {
        let token = seal(&KEY, &binding(), "s", 1_000);
        let reordered: Value = serde_json::from_str(r#"{"a":[1,2],"b":1}"#).unwrap_or_default();
        let same = Binding::new("tools/call", "ask", Some(&reordered));
        assert_eq!(open(&KEY, &same, &token, 0).as_deref(), Ok("s"));
        assert_eq!(arguments_digest(None), arguments_digest(Some(&json!({}))));
        assert_eq!(arguments_digest(None), arguments_digest(Some(&Value::Null)));
    }

    #[test]
    fn expired_tampered_foreign_and_malformed_states_are_refused() {
        let token = seal(&KEY, &binding(), "s", 1_000);
        assert_eq!(
            open(&KEY, &binding(), &token, 1_000),
            Err(OpenError::Expired)
        );
        assert_eq!(
            open(&[8; 32], &binding(), &token, 0),
            Err(OpenError::BadTag)
        );
        let other_args = Binding::new("tools/call", "ask", Some(&json!({"b": 2})));
        assert_eq!(open(&KEY, &other_args, &token, 0), Err(OpenError::BadTag));
        let other_tool = Binding::new("tools/call", "other", Some(&json!({"b": 1, "a": [1, 2]})));
        assert_eq!(open(&KEY, &other_tool, &token, 0), Err(OpenError::BadTag));
        let other_method = Binding::new("prompts/get", "ask", Some(&json!({"b": 1, "a": [1, 2]})));
        assert_eq!(open(&KEY, &other_method, &token, 0), Err(OpenError::BadTag));
        let alice = seal(&KEY, &binding().with_principal("Bearer alice"), "s", 1_000);
        assert_eq!(
            open(&KEY, &binding().with_principal("Bearer alice"), &alice, 0).as_deref(),
            Ok("s")
        );
        assert_eq!(
            open(&KEY, &binding().with_principal("Bearer bob"), &alice, 0),
            Err(OpenError::BadTag)
        );
        assert_eq!(open(&KEY, &binding(), &alice, 0), Err(OpenError::BadTag));
        // Flip one bit of every byte position in turn: never opens.
        let raw = URL_SAFE_NO_PAD
            .decode(&token[PREFIX.len()..])
            .unwrap_or_default();
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 1;
            let forged = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&bad));
            assert!(open(&KEY, &binding(), &forged, 0).is_err(), "byte {i}");
        }
        for junk in ["", "v1.", "v1.!!!", "v2.AAAA", "s", "v1.AAAA"] {
            assert_eq!(
                open(&KEY, &binding(), junk, 0),
                Err(OpenError::Malformed),
                "{junk:?}"
            );
        }
    }
}

//! `X-Tunnel-MCP-Server-Info`: the per-channel capability declaration a tunnel client sends on
//! its control-plane requests (`protocol.md`, "MCP server information").
//!
//! The value is compact JSON with a fixed key order:
//!
//! ```text
//! {"version":1,"channels":[{"name":"main"},{"name":"harpoon","proc_affinity":true}]}
//! {"version":2,"channels":[{"name":"main"},{"name":"harpoon","stateless":true,"proc_affinity":true}]}
//! ```
//!
//! Rules this module enforces when a [`ServerInfo`] is built (so nothing invalid is ever sent):
//! - the narrowest version: `1` when no channel is `stateless`, `2` when at least one is;
//! - key order `version`, `channels`, then per channel `name`, `stateless`, `proc_affinity`;
//! - a `false` flag is omitted, never written as `false`; both flags `true` is valid;
//! - channel names are canonical (`^[a-z0-9_-]{1,64}$`) and unique; the caller's order is kept;
//! - between 1 and [`MAX_CHANNELS`] declarations, at most [`MAX_HEADER_BYTES`] UTF-8 bytes.
//!
//! An empty declaration list is rejected ([`ServerInfoError::NoChannels`]): `channels` is a
//! required member that describes the enabled channels, a tunnel client always serves at least
//! its `main` channel, and the header itself is optional, so a client with nothing to declare
//! omits the header instead of sending an empty array. The reference Go client rejects it too.
//!
//! The value can carry nothing but names and two booleans: [`ChannelDeclaration`] has no other
//! field, so URLs, commands, transport details, headers, payloads, secrets, targets or customer
//! IDs cannot reach the wire by construction.
//!
//! [`ServerInfo::parse`] is a strict reader of this same format (exact keys per version, no
//! `false` or `null` flags, no `stateless` in v1, no v2 without a `stateless` channel). It accepts
//! any key order and insignificant whitespace, and [`ServerInfo::header_value`] of the result is
//! always the canonical encoding.

use serde::{Deserialize, Deserializer};

/// The HTTP header that carries the declaration.
pub const HEADER_NAME: &str = "X-Tunnel-MCP-Server-Info";

/// The most channel declarations one value may carry.
pub const MAX_CHANNELS: usize = 32;

/// The most UTF-8 bytes the encoded value may take.
pub const MAX_HEADER_BYTES: usize = 4096;

/// The longest canonical channel name, in bytes.
pub const MAX_CHANNEL_NAME_BYTES: usize = 64;

/// How a channel is served, which decides the capabilities it advertises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelBinding {
    /// A remote Streamable HTTP server: advertises neither capability.
    RemoteHttp,
    /// A remote Streamable HTTP server that independently supports MCP `2026-07-28`
    /// self-contained requests: `stateless` only.
    RemoteHttpStateless,
    /// A process-local stdio server: `proc_affinity` only.
    Stdio,
    /// A process-local in-memory server: `proc_affinity` only.
    InMemory,
    /// A built-in in-memory server whose requests are self-contained but whose registrations
    /// stay local to one client replica (Harpoon): both `stateless` and `proc_affinity`.
    InMemoryStateless,
}

impl ChannelBinding {
    /// Whether a channel with this binding advertises `stateless`.
    pub fn stateless(self) -> bool {
        matches!(
            self,
            ChannelBinding::RemoteHttpStateless | ChannelBinding::InMemoryStateless
        )
    }

    /// Whether a channel with this binding advertises `proc_affinity`.
    pub fn proc_affinity(self) -> bool {
        matches!(
            self,
            ChannelBinding::Stdio | ChannelBinding::InMemory | ChannelBinding::InMemoryStateless
        )
    }
}

/// One channel's declaration: its canonical name and its two capability flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelDeclaration {
    /// The canonical channel name (`^[a-z0-9_-]{1,64}$`), such as `main` or `harpoon`.
    pub name: String,
    /// The channel accepts MCP `2026-07-28` self-contained requests.
    pub stateless: bool,
    /// Session work for the channel must stay on one tunnel-client process.
    pub proc_affinity: bool,
}

impl ChannelDeclaration {
    /// The declaration for a channel served by `binding`.
    pub fn for_binding(name: impl Into<String>, binding: ChannelBinding) -> Self {
        ChannelDeclaration {
            name: name.into(),
            stateless: binding.stateless(),
            proc_affinity: binding.proc_affinity(),
        }
    }
}

/// A validated `X-Tunnel-MCP-Server-Info` value and its canonical encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    channels: Vec<ChannelDeclaration>,
    version: u8,
    header: String,
}

impl ServerInfo {
    /// Validates the declarations and encodes them once.
    ///
    /// Rejects an empty list, more than [`MAX_CHANNELS`] entries, an empty, non-canonical or
    /// invalid name, a repeated name, and an encoding over [`MAX_HEADER_BYTES`] bytes.
    pub fn new(channels: Vec<ChannelDeclaration>) -> Result<Self, ServerInfoError> {
        Self::build(channels, MAX_HEADER_BYTES)
    }

    /// [`ServerInfo::new`] with a configurable byte bound, so the bound's check can be tested:
    /// with today's name and count limits no valid declaration list reaches 4096 bytes.
    fn build(channels: Vec<ChannelDeclaration>, max_bytes: usize) -> Result<Self, ServerInfoError> {
        if channels.is_empty() {
            return Err(ServerInfoError::NoChannels);
        }
        if channels.len() > MAX_CHANNELS {
            return Err(ServerInfoError::TooManyChannels {
                count: channels.len(),
            });
        }
        for (index, channel) in channels.iter().enumerate() {
            check_name(index, &channel.name)?;
            if let Some(first_index) = channels
                .iter()
                .take(index)
                .position(|earlier| earlier.name == channel.name)
            {
                return Err(ServerInfoError::DuplicateChannel {
                    index,
                    first_index,
                    name: channel.name.clone(),
                });
            }
        }
        let version = if channels.iter().any(|c| c.stateless) {
            2
        } else {
            1
        };
        let header = encode(version, &channels);
        if header.len() > max_bytes {
            return Err(ServerInfoError::TooLarge {
                bytes: header.len(),
            });
        }
        Ok(ServerInfo {
            channels,
            version,
            header,
        })
    }

    /// The declarations, in the order they were given (and are encoded).
    pub fn channels(&self) -> &[ChannelDeclaration] {
        &self.channels
    }

    /// The encoded version: `1`, or `2` when at least one channel is `stateless`.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The canonical compact JSON to send as the header value.
    pub fn header_value(&self) -> &str {
        &self.header
    }

    /// Reads a value of this format strictly.
    ///
    /// Exactly the keys of the stated version are allowed (`version`, `channels`; `name`,
    /// optional `proc_affinity`, and in v2 optional `stateless`), each at most once. Flags must
    /// be `true` when present. A v2 value must have a `stateless` channel (a v1 value would
    /// otherwise be the narrowest encoding). Key order and insignificant whitespace are free; all
    /// the rules of [`ServerInfo::new`] apply, and inputs over [`MAX_HEADER_BYTES`] bytes are
    /// rejected before they are read.
    pub fn parse(value: &str) -> Result<Self, ServerInfoError> {
        if value.len() > MAX_HEADER_BYTES {
            return Err(ServerInfoError::TooLarge { bytes: value.len() });
        }
        let raw: RawServerInfo =
            serde_json::from_str(value).map_err(|e| ServerInfoError::Malformed {
                reason: e.to_string(),
            })?;
        if raw.version != 1 && raw.version != 2 {
            return Err(ServerInfoError::UnsupportedVersion {
                version: raw.version,
            });
        }
        let mut channels = Vec::with_capacity(raw.channels.len());
        for (index, channel) in raw.channels.into_iter().enumerate() {
            for (flag, value) in [
                ("stateless", channel.stateless),
                ("proc_affinity", channel.proc_affinity),
            ] {
                if value == Some(false) {
                    return Err(ServerInfoError::FalseFlag {
                        index,
                        name: channel.name,
                        flag,
                    });
                }
            }
            if raw.version == 1 && channel.stateless.is_some() {
                return Err(ServerInfoError::StatelessInVersion1 {
                    index,
                    name: channel.name,
                });
            }
            channels.push(ChannelDeclaration {
                name: channel.name,
                stateless: channel.stateless.unwrap_or(false),
                proc_affinity: channel.proc_affinity.unwrap_or(false),
            });
        }
        let info = ServerInfo::new(channels)?;
        if u64::from(info.version) != raw.version {
            return Err(ServerInfoError::NotNarrowestVersion);
        }
        Ok(info)
    }
}

/// Whether `name` is a canonical channel name: 1 to 64 bytes of `a-z`, `0-9`, `_` and `-`.
pub fn is_canonical_channel_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CHANNEL_NAME_BYTES
        && name
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'))
}

/// Why a declaration list or a header value is rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerInfoError {
    /// No channel is declared; omit the header instead.
    #[error(
        "X-Tunnel-MCP-Server-Info needs at least one channel declaration (omit the header instead)"
    )]
    NoChannels,
    /// More than [`MAX_CHANNELS`] channels are declared.
    #[error("X-Tunnel-MCP-Server-Info declares {count} channels, more than the maximum of {MAX_CHANNELS}")]
    TooManyChannels {
        /// How many were declared.
        count: usize,
    },
    /// A channel name is the empty string.
    #[error("X-Tunnel-MCP-Server-Info channel {index} has an empty name")]
    EmptyChannelName {
        /// The channel's position in the list.
        index: usize,
    },
    /// A channel name would be valid once trimmed and lowercased, but is not canonical as given.
    #[error("X-Tunnel-MCP-Server-Info channel {index} name {name:?} is not canonical; use {canonical:?}")]
    NonCanonicalChannelName {
        /// The channel's position in the list.
        index: usize,
        /// The name as given.
        name: String,
        /// The canonical form to use instead.
        canonical: String,
    },
    /// A channel name does not match `^[a-z0-9_-]{1,64}$`.
    #[error("X-Tunnel-MCP-Server-Info channel {index} name {name:?} is invalid: it must be 1 to 64 characters of a-z, 0-9, '_' and '-'")]
    InvalidChannelName {
        /// The channel's position in the list.
        index: usize,
        /// The name as given.
        name: String,
    },
    /// Two declarations share a name.
    #[error("X-Tunnel-MCP-Server-Info channel {index} repeats the name {name:?} of channel {first_index}")]
    DuplicateChannel {
        /// The position of the repeated declaration.
        index: usize,
        /// The position of the first declaration with that name.
        first_index: usize,
        /// The repeated name.
        name: String,
    },
    /// The value is longer than [`MAX_HEADER_BYTES`] bytes.
    #[error("X-Tunnel-MCP-Server-Info value is {bytes} bytes, more than the maximum of {MAX_HEADER_BYTES}")]
    TooLarge {
        /// The value's length in bytes.
        bytes: usize,
    },
    /// (Parsing) the value is not JSON of the declared shape: bad syntax, a missing, unknown or
    /// repeated key, a wrong type (including a `null` flag).
    #[error("X-Tunnel-MCP-Server-Info value is malformed: {reason}")]
    Malformed {
        /// What the JSON reader reported.
        reason: String,
    },
    /// (Parsing) the version is neither 1 nor 2.
    #[error("X-Tunnel-MCP-Server-Info version {version} is not supported (expected 1 or 2)")]
    UnsupportedVersion {
        /// The version found.
        version: u64,
    },
    /// (Parsing) a flag is written as `false`; false flags are omitted.
    #[error("X-Tunnel-MCP-Server-Info channel {index} ({name:?}) writes {flag} as false; a false flag must be omitted")]
    FalseFlag {
        /// The channel's position in the list.
        index: usize,
        /// The channel's name as read.
        name: String,
        /// The flag's key: `stateless` or `proc_affinity`.
        flag: &'static str,
    },
    /// (Parsing) a version 1 value declares `stateless`, a version 2 key.
    #[error("X-Tunnel-MCP-Server-Info channel {index} ({name:?}) declares stateless in a version 1 value")]
    StatelessInVersion1 {
        /// The channel's position in the list.
        index: usize,
        /// The channel's name as read.
        name: String,
    },
    /// (Parsing) a version 2 value declares no `stateless` channel; version 1 is required then.
    #[error("X-Tunnel-MCP-Server-Info is version 2 but no channel is stateless; version 1 is the narrowest encoding")]
    NotNarrowestVersion,
}

fn check_name(index: usize, name: &str) -> Result<(), ServerInfoError> {
    if is_canonical_channel_name(name) {
        return Ok(());
    }
    if name.is_empty() {
        return Err(ServerInfoError::EmptyChannelName { index });
    }
    let canonical = name
        .trim_matches(|c: char| c.is_ascii_whitespace())
        .to_ascii_lowercase();
    if is_canonical_channel_name(&canonical) {
        return Err(ServerInfoError::NonCanonicalChannelName {
            index,
            name: name.to_owned(),
            canonical,
        });
    }
    Err(ServerInfoError::InvalidChannelName {
        index,
        name: name.to_owned(),
    })
}

/// Writes the canonical compact JSON. Names are canonical (checked before), so they need no
/// escaping.
fn encode(version: u8, channels: &[ChannelDeclaration]) -> String {
    let mut out = String::with_capacity(32 + channels.len() * 48);
    out.push_str("{\"version\":");
    out.push_str(if version == 2 { "2" } else { "1" });
    out.push_str(",\"channels\":[");
    for (i, channel) in channels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":\"");
        out.push_str(&channel.name);
        out.push('"');
        if channel.stateless {
            out.push_str(",\"stateless\":true");
        }
        if channel.proc_affinity {
            out.push_str(",\"proc_affinity\":true");
        }
        out.push('}');
    }
    out.push_str("]}");
    out
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServerInfo {
    version: u64,
    channels: Vec<RawChannel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    name: String,
    #[serde(default, deserialize_with = "present_bool")]
    stateless: Option<bool>,
    #[serde(default, deserialize_with = "present_bool")]
    proc_affinity: Option<bool>,
}

/// A flag that is present must be a JSON boolean (`null` is rejected, unlike plain `Option`).
fn present_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    bool::deserialize(deserializer).map(Some)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decl(name: &str, stateless: bool, proc_affinity: bool) -> ChannelDeclaration {
        ChannelDeclaration {
            name: name.to_owned(),
            stateless,
            proc_affinity,
        }
    }

    fn header(channels: Vec<ChannelDeclaration>) -> String {
        ServerInfo::new(channels).unwrap().header_value().to_owned()
    }

    // Exact strings from protocol.md ("MCP server information") and the openapi.json examples.
    const SPEC_V1_REMOTE_MAIN: &str = r#"{"version":1,"channels":[{"name":"main"}]}"#;
    const SPEC_V1_STDIO_MAIN_AND_HARPOON: &str = r#"{"version":1,"channels":[{"name":"main","proc_affinity":true},{"name":"harpoon","proc_affinity":true}]}"#;
    const SPEC_V2_REMOTE_MAIN_AND_HARPOON: &str = r#"{"version":2,"channels":[{"name":"main"},{"name":"harpoon","stateless":true,"proc_affinity":true}]}"#;
    const SPEC_V2_HARPOON_ALONE: &str =
        r#"{"version":2,"channels":[{"name":"harpoon","stateless":true,"proc_affinity":true}]}"#;

    // ---- spec examples -------------------------------------------------------------------

    #[test]
    fn spec_example_v1_remote_main_without_harpoon() {
        let info = ServerInfo::new(vec![ChannelDeclaration::for_binding(
            "main",
            ChannelBinding::RemoteHttp,
        )])
        .unwrap();
        assert_eq!(info.header_value(), SPEC_V1_REMOTE_MAIN);
        insta::assert_snapshot!(info.header_value());
    }

    #[test]
    fn spec_example_v1_legacy_stdio_main_and_harpoon() {
        // The openapi.json "legacy-stdio-and-harpoon" example and the first protocol.md block.
        let info = ServerInfo::new(vec![
            ChannelDeclaration::for_binding("main", ChannelBinding::Stdio),
            decl("harpoon", false, true),
        ])
        .unwrap();
        assert_eq!(info.header_value(), SPEC_V1_STDIO_MAIN_AND_HARPOON);
        insta::assert_snapshot!(info.header_value());
    }

    #[test]
    fn spec_example_v2_remote_main_with_harpoon() {
        let info = ServerInfo::new(vec![
            ChannelDeclaration::for_binding("main", ChannelBinding::RemoteHttp),
            ChannelDeclaration::for_binding("harpoon", ChannelBinding::InMemoryStateless),
        ])
        .unwrap();
        assert_eq!(info.header_value(), SPEC_V2_REMOTE_MAIN_AND_HARPOON);
        insta::assert_snapshot!(info.header_value());
    }

    #[test]
    fn spec_example_v2_harpoon_alone() {
        // The openapi.json "modern-harpoon" example and the protocol.md version 2 block.
        let info = ServerInfo::new(vec![ChannelDeclaration::for_binding(
            "harpoon",
            ChannelBinding::InMemoryStateless,
        )])
        .unwrap();
        assert_eq!(info.header_value(), SPEC_V2_HARPOON_ALONE);
        insta::assert_snapshot!(info.header_value());
    }

    #[test]
    fn spec_examples_parse_and_reencode_identically() {
        for example in [
            SPEC_V1_REMOTE_MAIN,
            SPEC_V1_STDIO_MAIN_AND_HARPOON,
            SPEC_V2_REMOTE_MAIN_AND_HARPOON,
            SPEC_V2_HARPOON_ALONE,
        ] {
            assert_eq!(ServerInfo::parse(example).unwrap().header_value(), example);
        }
    }

    // ---- bindings ------------------------------------------------------------------------

    #[test]
    fn remote_http_binding_advertises_neither_capability() {
        assert_eq!(
            ChannelDeclaration::for_binding("main", ChannelBinding::RemoteHttp),
            decl("main", false, false)
        );
    }

    #[test]
    fn stdio_and_in_memory_bindings_advertise_proc_affinity_only() {
        for binding in [ChannelBinding::Stdio, ChannelBinding::InMemory] {
            assert_eq!(
                ChannelDeclaration::for_binding("main", binding),
                decl("main", false, true),
                "{binding:?}"
            );
        }
    }

    #[test]
    fn in_memory_stateless_binding_advertises_both_capabilities() {
        assert_eq!(
            ChannelDeclaration::for_binding("harpoon", ChannelBinding::InMemoryStateless),
            decl("harpoon", true, true)
        );
    }

    #[test]
    fn remote_http_stateless_binding_advertises_stateless_only() {
        assert_eq!(
            ChannelDeclaration::for_binding("tools", ChannelBinding::RemoteHttpStateless),
            decl("tools", true, false)
        );
    }

    // ---- version and encoding ------------------------------------------------------------

    #[test]
    fn version_1_when_no_channel_is_stateless() {
        let info = ServerInfo::new(vec![decl("main", false, true), decl("b", false, false)]);
        assert_eq!(info.unwrap().version(), 1);
    }

    #[test]
    fn version_2_when_any_channel_is_stateless() {
        let info = ServerInfo::new(vec![decl("main", false, false), decl("b", true, false)]);
        let info = info.unwrap();
        assert_eq!(info.version(), 2);
        assert!(info.header_value().starts_with(r#"{"version":2,"#));
    }

    #[test]
    fn false_flags_are_omitted_never_serialized() {
        let h = header(vec![
            decl("a", false, false),
            decl("b", true, false),
            decl("c", false, true),
        ]);
        assert!(!h.contains(":false"), "{h}");
        assert_eq!(
            h,
            r#"{"version":2,"channels":[{"name":"a"},{"name":"b","stateless":true},{"name":"c","proc_affinity":true}]}"#
        );
    }

    #[test]
    fn both_flags_true_is_valid() {
        let info = ServerInfo::new(vec![decl("main", true, true)]).unwrap();
        assert_eq!(info.channels(), &[decl("main", true, true)]);
    }

    #[test]
    fn keys_follow_canonical_order_without_whitespace() {
        let h = header(vec![decl("x", true, true)]);
        assert_eq!(
            h,
            r#"{"version":2,"channels":[{"name":"x","stateless":true,"proc_affinity":true}]}"#
        );
    }

    #[test]
    fn channel_order_is_the_callers_order_not_sorted() {
        let h = header(vec![
            decl("zeta", false, false),
            decl("alpha", false, false),
            decl("main", false, false),
        ]);
        assert_eq!(
            h,
            r#"{"version":1,"channels":[{"name":"zeta"},{"name":"alpha"},{"name":"main"}]}"#
        );
    }

    #[test]
    fn encoding_is_valid_json_with_only_permitted_keys() {
        let h = header(vec![decl("main", false, false), decl("h", true, true)]);
        let v: serde_json::Value = serde_json::from_str(&h).unwrap();
        let top = v.as_object().unwrap();
        assert_eq!(top.len(), 2);
        assert_eq!(top["version"], 2);
        for channel in top["channels"].as_array().unwrap() {
            for key in channel.as_object().unwrap().keys() {
                assert!(
                    ["name", "stateless", "proc_affinity"].contains(&key.as_str()),
                    "{key}"
                );
            }
        }
    }

    // ---- declaration rules ---------------------------------------------------------------

    #[test]
    fn empty_channel_list_is_rejected() {
        assert_eq!(ServerInfo::new(vec![]), Err(ServerInfoError::NoChannels));
    }

    #[test]
    fn thirty_two_channels_are_accepted() {
        let channels = (0..MAX_CHANNELS)
            .map(|i| decl(&format!("c{i}"), false, false))
            .collect();
        assert_eq!(ServerInfo::new(channels).unwrap().channels().len(), 32);
    }

    #[test]
    fn more_than_32_channels_are_rejected() {
        let channels = (0..=MAX_CHANNELS)
            .map(|i| decl(&format!("c{i}"), false, false))
            .collect();
        assert_eq!(
            ServerInfo::new(channels),
            Err(ServerInfoError::TooManyChannels { count: 33 })
        );
    }

    #[test]
    fn duplicate_channel_names_are_rejected() {
        let err = ServerInfo::new(vec![
            decl("main", false, false),
            decl("harpoon", true, true),
            decl("main", false, true),
        ])
        .unwrap_err();
        assert_eq!(
            err,
            ServerInfoError::DuplicateChannel {
                index: 2,
                first_index: 0,
                name: "main".into()
            }
        );
        assert!(err.to_string().contains("\"main\""), "{err}");
    }

    #[test]
    fn empty_channel_name_is_rejected() {
        assert_eq!(
            ServerInfo::new(vec![decl("main", false, false), decl("", false, false)]),
            Err(ServerInfoError::EmptyChannelName { index: 1 })
        );
    }

    #[test]
    fn non_canonical_channel_name_is_rejected_with_its_canonical_form() {
        for name in [" main", "main ", "Main", "HARPOON", "\tMain\n"] {
            let err = ServerInfo::new(vec![decl(name, false, false)]).unwrap_err();
            let expected_canonical = if name.to_ascii_lowercase().contains("harpoon") {
                "harpoon"
            } else {
                "main"
            };
            assert_eq!(
                err,
                ServerInfoError::NonCanonicalChannelName {
                    index: 0,
                    name: name.into(),
                    canonical: expected_canonical.into()
                }
            );
            assert!(err.to_string().contains(&format!("{name:?}")), "{err}");
        }
    }

    #[test]
    fn channel_name_outside_the_pattern_is_rejected() {
        let too_long = "a".repeat(MAX_CHANNEL_NAME_BYTES + 1);
        for name in [
            "bad/channel",
            "a.b",
            "a b",
            "https://example.com",
            "naïve",
            "ma\u{0}in",
            "\"main\"",
            too_long.as_str(),
        ] {
            let err = ServerInfo::new(vec![decl(name, false, false)]).unwrap_err();
            assert_eq!(
                err,
                ServerInfoError::InvalidChannelName {
                    index: 0,
                    name: name.into()
                },
                "{name:?}"
            );
        }
    }

    #[test]
    fn channel_name_of_64_bytes_with_every_permitted_class_is_accepted() {
        let name = format!("{}_-09az", "m".repeat(58));
        assert_eq!(name.len(), 64);
        assert!(is_canonical_channel_name(&name));
        assert!(ServerInfo::new(vec![decl(&name, false, false)]).is_ok());
    }

    #[test]
    fn canonical_channel_name_matches_exactly_the_pattern() {
        for ok in ["main", "harpoon", "a", "0", "_", "-", "a_b-c9"] {
            assert!(is_canonical_channel_name(ok), "{ok}");
        }
        for bad in ["", "Main", "a b", "a.b", "é", "a\n", &"x".repeat(65)] {
            assert!(!is_canonical_channel_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn encoded_value_over_the_byte_bound_is_rejected() {
        let channels = vec![decl("main", false, false)];
        let exact = SPEC_V1_REMOTE_MAIN.len();
        assert!(ServerInfo::build(channels.clone(), exact).is_ok());
        assert_eq!(
            ServerInfo::build(channels, exact - 1),
            Err(ServerInfoError::TooLarge { bytes: exact })
        );
    }

    #[test]
    fn largest_valid_declaration_fits_in_4096_bytes() {
        // 32 channels with 64-byte names and both flags: the worst case the name and count
        // rules allow. It must be accepted by `new`, so the byte bound never bites valid input.
        let channels: Vec<_> = (0..MAX_CHANNELS)
            .map(|i| decl(&format!("{}{i:02}", "n".repeat(62)), true, true))
            .collect();
        let info = ServerInfo::new(channels).unwrap();
        assert_eq!(info.header_value().len(), 3674);
        assert!(info.header_value().len() <= MAX_HEADER_BYTES);
    }

    #[test]
    fn errors_name_the_problem_and_the_channel() {
        let err =
            ServerInfo::new(vec![decl("ok", false, false), decl("b/d", false, false)]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("channel 1"), "{text}");
        assert!(text.contains("\"b/d\""), "{text}");
        assert!(text.contains("invalid"), "{text}");
    }

    // ---- strict parsing ------------------------------------------------------------------

    #[test]
    fn parse_rejects_unknown_top_level_keys() {
        let err = ServerInfo::parse(
            r#"{"version":1,"channels":[{"name":"main"}],"url":"https://x.example"}"#,
        )
        .unwrap_err();
        assert!(
            matches!(&err, ServerInfoError::Malformed { reason } if reason.contains("url")),
            "{err}"
        );
    }

    #[test]
    fn parse_rejects_unknown_channel_keys() {
        for extra in [r#""command":"npx""#, r#""transport":"stdio""#, r#""x":1"#] {
            let value = format!(r#"{{"version":1,"channels":[{{"name":"main",{extra}}}]}}"#);
            assert!(
                matches!(
                    ServerInfo::parse(&value),
                    Err(ServerInfoError::Malformed { .. })
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn parse_rejects_stateless_in_version_1() {
        assert_eq!(
            ServerInfo::parse(r#"{"version":1,"channels":[{"name":"h","stateless":true}]}"#),
            Err(ServerInfoError::StatelessInVersion1 {
                index: 0,
                name: "h".into()
            })
        );
    }

    #[test]
    fn parse_rejects_false_flags() {
        assert_eq!(
            ServerInfo::parse(r#"{"version":1,"channels":[{"name":"m","proc_affinity":false}]}"#),
            Err(ServerInfoError::FalseFlag {
                index: 0,
                name: "m".into(),
                flag: "proc_affinity"
            })
        );
        assert_eq!(
            ServerInfo::parse(
                r#"{"version":2,"channels":[{"name":"a","stateless":true},{"name":"m","stateless":false}]}"#
            ),
            Err(ServerInfoError::FalseFlag {
                index: 1,
                name: "m".into(),
                flag: "stateless"
            })
        );
    }

    #[test]
    fn parse_rejects_null_and_non_boolean_flags() {
        for flag in [
            r#""proc_affinity":null"#,
            r#""proc_affinity":1"#,
            r#""proc_affinity":"true""#,
        ] {
            let value = format!(r#"{{"version":1,"channels":[{{"name":"m",{flag}}}]}}"#);
            assert!(
                matches!(
                    ServerInfo::parse(&value),
                    Err(ServerInfoError::Malformed { .. })
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn parse_rejects_version_2_without_a_stateless_channel() {
        assert_eq!(
            ServerInfo::parse(r#"{"version":2,"channels":[{"name":"main","proc_affinity":true}]}"#),
            Err(ServerInfoError::NotNarrowestVersion)
        );
    }

    #[test]
    fn parse_rejects_unsupported_versions() {
        for version in [0, 3, 99] {
            let value = format!(r#"{{"version":{version},"channels":[{{"name":"main"}}]}}"#);
            assert_eq!(
                ServerInfo::parse(&value),
                Err(ServerInfoError::UnsupportedVersion { version })
            );
        }
    }

    #[test]
    fn parse_rejects_non_integer_versions() {
        for version in ["\"1\"", "1.0", "-1", "true", "null"] {
            let value = format!(r#"{{"version":{version},"channels":[{{"name":"main"}}]}}"#);
            assert!(
                matches!(
                    ServerInfo::parse(&value),
                    Err(ServerInfoError::Malformed { .. })
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn parse_rejects_repeated_keys() {
        for value in [
            r#"{"version":1,"version":1,"channels":[{"name":"main"}]}"#,
            r#"{"version":1,"channels":[{"name":"main","name":"main"}]}"#,
            r#"{"version":1,"channels":[{"name":"m","proc_affinity":true,"proc_affinity":true}]}"#,
        ] {
            assert!(
                matches!(
                    ServerInfo::parse(value),
                    Err(ServerInfoError::Malformed { .. })
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn parse_rejects_missing_required_keys() {
        for value in [
            r#"{"channels":[{"name":"main"}]}"#,
            r#"{"version":1}"#,
            r#"{"version":1,"channels":[{"proc_affinity":true}]}"#,
            r#"{"version":1,"channels":[{}]}"#,
        ] {
            assert!(
                matches!(
                    ServerInfo::parse(value),
                    Err(ServerInfoError::Malformed { .. })
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn parse_rejects_non_json_and_trailing_data() {
        for value in [
            "",
            "main",
            "[]",
            "null",
            r#"{"version":1,"channels":[{"name":"main"}]} x"#,
            r#"{"version":1,"channels":{"name":"main"}}"#,
        ] {
            assert!(
                matches!(
                    ServerInfo::parse(value),
                    Err(ServerInfoError::Malformed { .. })
                ),
                "{value:?}"
            );
        }
    }

    #[test]
    fn parse_applies_the_declaration_rules() {
        assert_eq!(
            ServerInfo::parse(r#"{"version":1,"channels":[]}"#),
            Err(ServerInfoError::NoChannels)
        );
        assert!(matches!(
            ServerInfo::parse(r#"{"version":1,"channels":[{"name":"m"},{"name":"m"}]}"#),
            Err(ServerInfoError::DuplicateChannel { index: 1, .. })
        ));
        assert!(matches!(
            ServerInfo::parse(r#"{"version":1,"channels":[{"name":"Main"}]}"#),
            Err(ServerInfoError::NonCanonicalChannelName { .. })
        ));
        assert!(matches!(
            ServerInfo::parse(r#"{"version":1,"channels":[{"name":"a/b"}]}"#),
            Err(ServerInfoError::InvalidChannelName { .. })
        ));
        let many: Vec<String> = (0..=MAX_CHANNELS)
            .map(|i| format!(r#"{{"name":"c{i}"}}"#))
            .collect();
        let value = format!(r#"{{"version":1,"channels":[{}]}}"#, many.join(","));
        assert_eq!(
            ServerInfo::parse(&value),
            Err(ServerInfoError::TooManyChannels { count: 33 })
        );
    }

    #[test]
    fn parse_rejects_input_over_4096_bytes() {
        let base = SPEC_V1_REMOTE_MAIN;
        let fits = format!("{base}{}", " ".repeat(MAX_HEADER_BYTES - base.len()));
        assert_eq!(fits.len(), MAX_HEADER_BYTES);
        assert_eq!(ServerInfo::parse(&fits).unwrap().header_value(), base);
        let over = format!("{fits} ");
        assert_eq!(
            ServerInfo::parse(&over),
            Err(ServerInfoError::TooLarge { bytes: 4097 })
        );
    }

    #[test]
    fn parse_accepts_any_key_order_and_reencodes_canonically() {
        let info = ServerInfo::parse(
            r#" { "channels" : [ {"proc_affinity":true, "stateless":true, "name":"harpoon"} ], "version" : 2 } "#,
        )
        .unwrap();
        assert_eq!(info.header_value(), SPEC_V2_HARPOON_ALONE);
        assert_eq!(info.version(), 2);
    }

    // ---- properties ----------------------------------------------------------------------

    fn name_strategy() -> impl Strategy<Value = String> {
        "[a-z0-9_-]{1,64}"
    }

    fn declarations_strategy() -> impl Strategy<Value = Vec<ChannelDeclaration>> {
        proptest::collection::vec(
            (name_strategy(), any::<bool>(), any::<bool>()),
            1..=MAX_CHANNELS,
        )
        .prop_map(|entries| {
            let mut out: Vec<ChannelDeclaration> = Vec::new();
            for (name, stateless, proc_affinity) in entries {
                if !out.iter().any(|d| d.name == name) {
                    out.push(ChannelDeclaration {
                        name,
                        stateless,
                        proc_affinity,
                    });
                }
            }
            out
        })
    }

    /// An independent spelling of one channel with its keys in a chosen order.
    fn channel_json(d: &ChannelDeclaration, reversed: bool) -> String {
        let mut parts = vec![format!(r#""name":"{}""#, d.name)];
        if d.stateless {
            parts.push(r#""stateless":true"#.to_owned());
        }
        if d.proc_affinity {
            parts.push(r#""proc_affinity":true"#.to_owned());
        }
        if reversed {
            parts.reverse();
        }
        format!("{{{}}}", parts.join(" , "))
    }

    proptest! {
        #[test]
        fn any_valid_declaration_set_round_trips_canonically(decls in declarations_strategy()) {
            let info = ServerInfo::new(decls.clone()).unwrap();
            let h = info.header_value();
            prop_assert!(h.len() <= MAX_HEADER_BYTES);
            prop_assert!(!h.contains(":false"));
            prop_assert!(!h.contains(' '));
            let expected_version = if decls.iter().any(|d| d.stateless) { 2 } else { 1 };
            prop_assert_eq!(info.version(), expected_version);
            prop_assert_eq!(info.channels(), decls.as_slice());
            let again = ServerInfo::parse(h).unwrap();
            prop_assert_eq!(again.header_value(), h);
            prop_assert_eq!(&again, &info);
            // The encoding agrees with a generic JSON reader, channel for channel, in order.
            let v: serde_json::Value = serde_json::from_str(h).unwrap();
            prop_assert_eq!(v["version"].as_u64(), Some(u64::from(expected_version)));
            let channels = v["channels"].as_array().unwrap();
            prop_assert_eq!(channels.len(), decls.len());
            for (c, d) in channels.iter().zip(&decls) {
                prop_assert_eq!(c["name"].as_str(), Some(d.name.as_str()));
                prop_assert_eq!(c.get("stateless").is_some(), d.stateless);
                prop_assert_eq!(c.get("proc_affinity").is_some(), d.proc_affinity);
            }
        }

        #[test]
        fn any_key_order_parses_to_the_canonical_encoding(
            decls in declarations_strategy(),
            reversed in any::<bool>(),
            channels_first in any::<bool>(),
        ) {
            let canonical = ServerInfo::new(decls.clone()).unwrap();
            let channels: Vec<String> = decls.iter().map(|d| channel_json(d, reversed)).collect();
            let channels = format!(r#""channels":[{}]"#, channels.join(","));
            let version = format!(r#""version":{}"#, canonical.version());
            let text = if channels_first {
                format!("{{{channels},{version}}}")
            } else {
                format!("{{{version},{channels}}}")
            };
            prop_assume!(text.len() <= MAX_HEADER_BYTES);
            let parsed = ServerInfo::parse(&text).unwrap();
            prop_assert_eq!(parsed.header_value(), canonical.header_value());
        }

        #[test]
        fn generated_canonical_names_are_accepted(name in name_strategy()) {
            prop_assert!(is_canonical_channel_name(&name));
            prop_assert!(ServerInfo::new(vec![decl(&name, false, false)]).is_ok());
        }

        #[test]
        fn names_with_a_character_outside_the_pattern_are_rejected(
            prefix in "[a-z0-9_-]{0,30}",
            bad in "[^a-z0-9_-]",
            suffix in "[a-z0-9_-]{0,30}",
        ) {
            let name = format!("{prefix}{bad}{suffix}");
            prop_assert!(!is_canonical_channel_name(&name));
            let err = ServerInfo::new(vec![decl(&name, false, false)]).unwrap_err();
            let is_name_error = matches!(
                err,
                ServerInfoError::InvalidChannelName { .. }
                    | ServerInfoError::NonCanonicalChannelName { .. }
            );
            prop_assert!(is_name_error);
        }

        #[test]
        fn names_longer_than_64_bytes_are_rejected(name in "[a-z0-9_-]{65,100}") {
            prop_assert!(!is_canonical_channel_name(&name));
            prop_assert_eq!(
                ServerInfo::new(vec![decl(&name, false, false)]),
                Err(ServerInfoError::InvalidChannelName { index: 0, name: name.clone() })
            );
        }
    }
}

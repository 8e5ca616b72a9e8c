//! The request headers of a command forwarded to a Streamable HTTP MCP server.
//!
//! A polled command carries multi-valued `headers` to apply to the MCP request (`protocol.md`,
//! "Poll loop"). The tunnel forwards the raw JSON-RPC body, but a `2026-07-28` server checks the
//! body against the Streamable HTTP request headers (a mismatch earns `-32020`), so the final
//! header list is built here, once, for every driver ([`forward_headers`]):
//!
//! 1. For a POST (a JSON-RPC payload): `Accept: application/json, text/event-stream` and
//!    `Content-Type: application/json`, always ours.
//! 2. For a `2026-07-28` body (one whose `params._meta` names
//!    `io.modelcontextprotocol/protocolVersion`): `MCP-Protocol-Version`, `Mcp-Method` and
//!    `Mcp-Name` mirrored from the body by [`crate::mcp::headers::request_headers_for`]; the body
//!    wins over a command header that disagrees. `Mcp-Param-*` come from the command's own
//!    headers when it has any; otherwise from the `x-mcp-header` annotations of the tool, as the
//!    last `tools/list` result forwarded on that channel declared them ([`ToolCatalog`]). When
//!    the body's arguments cannot be encoded, the `Mcp-Param-*` headers are left out and the
//!    server answers for itself; when the body cannot be mirrored at all, nothing is mirrored.
//!    An older-era body is forwarded with the command's headers as they are.
//! 3. Every other command header is kept, in order, except the hop-by-hop ones
//!    ([`HOP_BY_HOP`]), every header a `Connection` header nominates, and the ones the driver or
//!    this module sets ([`RESERVED`]).
//! 4. Last, the operator's extra headers (`--mcp.extra-headers`, [`add_extra_headers`]), each
//!    one the forward does not carry yet: the command's own win, as in the Go client. Names the
//!    forward or MCP itself owns are refused when the tunnel is set up
//!    ([`is_reserved_extra_header`]).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::http::Headers;
use crate::mcp::headers::{
    partition_tools, request_headers_for, ToolHeaderError, ToolHeaders, ACCEPT, CONTENT_TYPE,
    PARAM_HEADER_PREFIX, PROTOCOL_VERSION_META_KEY,
};

/// Hop-by-hop headers (RFC 9110 section 7.6.1, and the de facto ones): never forwarded.
pub const HOP_BY_HOP: [&str; 9] = [
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "Proxy-Authenticate",
    "Proxy-Authorization",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
];

/// Headers the forward sets itself (framing, content negotiation): a command's value is dropped.
pub const RESERVED: [&str; 5] = ["Host", "Content-Length", "Content-Type", "Accept", "Expect"];

/// Whether `name` may not be one of the operator's extra headers on forwards
/// (`--mcp.extra-headers`): the hop-by-hop headers ([`HOP_BY_HOP`]), the ones the forward sets
/// itself ([`RESERVED`]), and MCP's own request headers, which the body or the session decide
/// (`MCP-Protocol-Version`, `Mcp-Session-Id`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`,
/// `Last-Event-ID`). `Authorization` and every other name are the operator's to set.
#[must_use]
pub fn is_reserved_extra_header(name: &str) -> bool {
    let owned_by_mcp = [
        crate::mcp::headers::PROTOCOL_VERSION_HEADER,
        crate::mcp::headers::SESSION_ID_HEADER,
        crate::mcp::headers::METHOD_HEADER,
        crate::mcp::headers::NAME_HEADER,
        "Last-Event-ID",
    ];
    HOP_BY_HOP
        .iter()
        .chain(RESERVED.iter())
        .chain(owned_by_mcp.iter())
        .any(|h| h.eq_ignore_ascii_case(name))
        || is_param_header(name)
}

/// Adds the operator's extra headers to a forward's final `headers`: each one whose name the
/// forward does not carry yet (the command's own headers win).
pub fn add_extra_headers(headers: &mut Headers, extra: &[(String, crate::tunnel::engine::Secret)]) {
    for (name, value) in extra {
        if !headers.contains(name) {
            let _ = headers.append(name.clone(), value.expose().to_owned());
        }
    }
}

/// The most tools a [`ToolCatalog`] remembers for one channel (later pages are not recorded).
pub const MAX_CATALOG_TOOLS: usize = 10_000;

/// The `x-mcp-header` annotations of the tools one channel's server listed, by tool name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCatalog {
    tools: BTreeMap<String, ToolHeaders>,
}

impl ToolCatalog {
    /// An empty catalog (no `tools/list` seen yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a `tools/list` response forwarded on the channel. A first page (a request without
    /// `params.cursor`) replaces what was known; a later page adds to it. Returns the tools whose
    /// annotations break the rules (they are not recorded, so calls to them mirror nothing).
    /// A response that is not a successful `tools/list` result changes nothing.
    pub fn observe_tools_list(
        &mut self,
        continuation: bool,
        response_json: &str,
    ) -> Vec<ToolHeaderError> {
        let Ok(mut response) = serde_json::from_str::<Value>(response_json) else {
            return Vec::new();
        };
        let Some(Value::Array(tools)) = response
            .get_mut("result")
            .and_then(|r| r.get_mut("tools"))
            .map(Value::take)
        else {
            return Vec::new();
        };
        let (valid, rejected) = partition_tools(tools);
        if !continuation {
            self.tools.clear();
        }
        for (_, headers) in valid {
            if self.tools.len() >= MAX_CATALOG_TOOLS {
                break;
            }
            self.tools.insert(headers.tool_name().to_owned(), headers);
        }
        rejected
    }

    /// The annotations of `tool`, when it was listed with valid ones.
    pub fn get(&self, tool: &str) -> Option<&ToolHeaders> {
        self.tools.get(tool)
    }

    /// How many tools are known.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is known.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Whether `message` is a `tools/list` request asking for a later page (it has `params.cursor`).
/// `None` when it is not a `tools/list` request at all.
pub fn tools_list_continuation(message: &str) -> Option<bool> {
    let v: Value = serde_json::from_str(message).ok()?;
    if v.get("method").and_then(Value::as_str) != Some("tools/list") || v.get("id").is_none() {
        return None;
    }
    Some(
        v.get("params")
            .and_then(|p| p.get("cursor"))
            .is_some_and(|c| !c.is_null()),
    )
}

fn is_modern(message: &Value) -> bool {
    message
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(PROTOCOL_VERSION_META_KEY))
        .is_some()
}

/// The headers mirrored from a `2026-07-28` body (empty for any other body).
fn mirrored(message: &Value, command_has_params: bool, tools: Option<&ToolCatalog>) -> Headers {
    if !is_modern(message) {
        return Headers::new();
    }
    let tool = (!command_has_params)
        .then(|| {
            let called = message.get("params")?.get("name")?.as_str()?;
            let is_call = message.get("method").and_then(Value::as_str) == Some("tools/call");
            tools?.get(called).filter(|_| is_call)
        })
        .flatten();
    request_headers_for(message, tool)
        .or_else(|_| request_headers_for(message, None))
        .unwrap_or_default()
}

/// The final headers of the HTTP request that forwards a command: `payload` is the raw
/// JSON-RPC body of a POST, `None` for a session termination (`DELETE`); `command` the
/// command's headers; `tools` the channel's catalog. See the module documentation.
pub fn forward_headers(
    command: &Headers,
    payload: Option<&str>,
    tools: Option<&ToolCatalog>,
) -> Headers {
    let nominated: Vec<&str> = command
        .get_all("Connection")
        .flat_map(|v| v.split(','))
        .map(|t| t.trim_matches([' ', '\t']))
        .filter(|t| !t.is_empty())
        .collect();
    let command_has_params = command.iter().any(|(n, _)| is_param_header(n));
    let message = payload.and_then(|p| serde_json::from_str::<Value>(p).ok());
    let mirrored = message
        .as_ref()
        .map(|m| mirrored(m, command_has_params, tools))
        .unwrap_or_default();

    let mut out = Headers::new();
    if payload.is_some() {
        let _ = out.append("Accept", ACCEPT);
        let _ = out.append("Content-Type", CONTENT_TYPE);
    }
    for (name, value) in mirrored.iter() {
        if !out.contains(name) {
            let _ = out.append(name, value);
        }
    }
    let dropped = |name: &str| {
        HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
            || RESERVED.iter().any(|h| h.eq_ignore_ascii_case(name))
            || nominated.iter().any(|n| n.eq_ignore_ascii_case(name))
            || mirrored.contains(name)
    };
    for (name, value) in command.iter() {
        if !dropped(name) {
            let _ = out.append(name, value);
        }
    }
    out
}

fn is_param_header(name: &str) -> bool {
    name.len() > PARAM_HEADER_PREFIX.len()
        && name
            .get(..PARAM_HEADER_PREFIX.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(PARAM_HEADER_PREFIX))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (n, v) in pairs {
            h.append(*n, *v).unwrap();
        }
        h
    }

    fn pairs(h: &Headers) -> Vec<(String, String)> {
        h.iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect()
    }

    fn modern_call(name: &str, args: Value) -> String {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": args,
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
        .to_string()
    }

    fn catalog_with_region_tool() -> ToolCatalog {
        let mut c = ToolCatalog::new();
        let list = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
            {"name": "weather", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "city": {"type": "string"}}}},
            {"name": "bad", "inputSchema": {"type": "object", "properties": {
                "x": {"type": "object", "x-mcp-header": "X"}}}}
        ]}});
        let rejected = c.observe_tools_list(false, &list.to_string());
        assert_eq!(rejected.len(), 1);
        assert_eq!(rejected[0].tool, "bad");
        c
    }

    #[test]
    fn extra_headers_come_last_and_the_commands_own_win() {
        use crate::tunnel::engine::Secret;
        let mut h = Headers::new();
        h.append("Authorization", "Bearer from-command").unwrap();
        let extra = vec![
            ("authorization".to_owned(), Secret::new("Bearer operator")),
            ("X-Team".to_owned(), Secret::new("blue")),
        ];
        add_extra_headers(&mut h, &extra);
        let all: Vec<(&str, &str)> = h.iter().collect();
        assert_eq!(
            all,
            [("Authorization", "Bearer from-command"), ("X-Team", "blue")]
        );
        for name in [
            "mcp-session-id",
            "MCP-Protocol-Version",
            "Mcp-Method",
            "Mcp-Name",
            "Mcp-Param-Region",
            "Last-Event-ID",
            "Content-Length",
            "Accept",
            "Transfer-Encoding",
        ] {
            assert!(is_reserved_extra_header(name), "{name}");
        }
        for name in ["Authorization", "X-Api-Key", "Cookie", "Mcp-Other"] {
            assert!(!is_reserved_extra_header(name), "{name}");
        }
    }

    #[test]
    fn a_modern_body_is_mirrored_and_wins_over_disagreeing_command_headers() {
        let cmd = headers(&[
            ("Mcp-Method", "tools/list"),
            ("mcp-name", "other"),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Session-Id", "s1"),
        ]);
        let body = modern_call("echo", json!({"text": "hi"}));
        let out = forward_headers(&cmd, Some(&body), None);
        assert_eq!(
            pairs(&out),
            vec![
                ("Accept".into(), ACCEPT.into()),
                ("Content-Type".into(), CONTENT_TYPE.into()),
                ("MCP-Protocol-Version".into(), "2026-07-28".into()),
                ("Mcp-Method".into(), "tools/call".into()),
                ("Mcp-Name".into(), "echo".into()),
                ("Mcp-Session-Id".into(), "s1".into()),
            ]
        );
    }

    #[test]
    fn param_headers_come_from_the_last_tools_list_when_the_command_has_none() {
        let c = catalog_with_region_tool();
        let body = modern_call("weather", json!({"region": "eu-west", "city": "Paris"}));
        let out = forward_headers(&Headers::new(), Some(&body), Some(&c));
        assert_eq!(out.get("Mcp-Param-Region"), Some("eu-west"));
        assert!(out.get("Mcp-Param-City").is_none());
    }

    #[test]
    fn param_headers_of_the_command_are_kept_and_annotations_are_not_applied() {
        let c = catalog_with_region_tool();
        let cmd = headers(&[("mcp-param-region", "from-caller")]);
        let body = modern_call("weather", json!({"region": "eu-west"}));
        let out = forward_headers(&cmd, Some(&body), Some(&c));
        assert_eq!(
            out.get_all("Mcp-Param-Region").collect::<Vec<_>>(),
            vec!["from-caller"]
        );
    }

    #[test]
    fn an_unencodable_argument_drops_param_headers_but_keeps_the_mirrored_ones() {
        let c = catalog_with_region_tool();
        let body = modern_call("weather", json!({"region": {"nested": true}}));
        let out = forward_headers(&Headers::new(), Some(&body), Some(&c));
        assert_eq!(out.get("Mcp-Method"), Some("tools/call"));
        assert_eq!(out.get("Mcp-Name"), Some("weather"));
        assert!(out.get("Mcp-Param-Region").is_none());
    }

    #[test]
    fn a_rejected_or_unlisted_tool_mirrors_no_params() {
        let c = catalog_with_region_tool();
        let body = modern_call("bad", json!({"x": "v"}));
        let out = forward_headers(&Headers::new(), Some(&body), Some(&c));
        assert!(!out.iter().any(|(n, _)| n.starts_with("Mcp-Param-")));
    }

    #[test]
    fn a_legacy_body_keeps_the_command_headers_as_they_are() {
        let cmd = headers(&[
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Session-Id", "s1"),
        ]);
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let out = forward_headers(&cmd, Some(body), None);
        assert_eq!(
            pairs(&out),
            vec![
                ("Accept".into(), ACCEPT.into()),
                ("Content-Type".into(), CONTENT_TYPE.into()),
                ("MCP-Protocol-Version".into(), "2025-11-25".into()),
                ("Mcp-Session-Id".into(), "s1".into()),
            ]
        );
    }

    #[test]
    fn hop_by_hop_connection_nominated_and_reserved_command_headers_are_dropped() {
        let cmd = headers(&[
            ("Connection", "X-Private, keep-alive"),
            ("x-private", "secret-route"),
            ("Keep-Alive", "timeout=5"),
            ("Transfer-Encoding", "chunked"),
            ("Upgrade", "h2c"),
            ("Host", "evil.example"),
            ("Content-Length", "999"),
            ("Accept", "text/html"),
            ("Content-Type", "text/plain"),
            ("Authorization", "Bearer user-token"),
            ("X-Trace", "a"),
            ("X-Trace", "b"),
        ]);
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let out = forward_headers(&cmd, Some(body), None);
        assert_eq!(
            pairs(&out),
            vec![
                ("Accept".into(), ACCEPT.into()),
                ("Content-Type".into(), CONTENT_TYPE.into()),
                ("Authorization".into(), "Bearer user-token".into()),
                ("X-Trace".into(), "a".into()),
                ("X-Trace".into(), "b".into()),
            ]
        );
    }

    #[test]
    fn a_session_termination_gets_no_content_headers() {
        let cmd = headers(&[("Mcp-Session-Id", "s1"), ("Connection", "close")]);
        let out = forward_headers(&cmd, None, None);
        assert_eq!(pairs(&out), vec![("Mcp-Session-Id".into(), "s1".into())]);
    }

    #[test]
    fn a_later_tools_list_page_adds_and_a_first_page_replaces() {
        let mut c = catalog_with_region_tool();
        let page2 = json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
            {"name": "other", "inputSchema": {"type": "object", "properties": {
                "k": {"type": "string", "x-mcp-header": "K"}}}}]}});
        assert!(c.observe_tools_list(true, &page2.to_string()).is_empty());
        assert!(c.get("weather").is_some() && c.get("other").is_some());
        let fresh = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}});
        c.observe_tools_list(false, &fresh.to_string());
        assert!(c.is_empty());
    }

    #[test]
    fn an_error_or_garbage_response_leaves_the_catalog_alone() {
        let mut c = catalog_with_region_tool();
        c.observe_tools_list(
            false,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#,
        );
        c.observe_tools_list(false, "not json");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn tools_list_continuation_reads_the_cursor() {
        assert_eq!(
            tools_list_continuation(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            Some(false)
        );
        assert_eq!(
            tools_list_continuation(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c2"}}"#
            ),
            Some(true)
        );
        assert_eq!(
            tools_list_continuation(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            None
        );
    }
}

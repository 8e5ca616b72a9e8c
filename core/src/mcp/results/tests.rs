//! Unit tests: the spec's examples of both eras (copied into `fixtures/mcp/examples/`), the
//! lenient and strict cases, page merging, and properties (no input panics; an accepted result
//! re-reads equal from its normal form; generated valid results round-trip exactly).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;

macro_rules! example {
    ($path:literal) => {
        include_str!(concat!("../../../../fixtures/mcp/examples/", $path))
    };
}

/// The `result` member of a JSON-RPC response text.
fn result_of(response: &str) -> String {
    let v: Value = serde_json::from_str(response).unwrap();
    v["result"].to_string()
}

/// Reads `v` as `T`; when accepted, checks the normal form re-reads equal and `raw` is `v`.
fn check<T: FromResult + PartialEq + Debug>(v: &Value) -> Result<T, ResultError> {
    let r = T::from_value(v.clone())?;
    assert_eq!(r.raw(), v);
    let normal = r.to_value();
    let again = T::from_value(normal.clone()).expect("the normal form re-reads");
    assert_eq!(again, r);
    assert_eq!(again.to_value(), normal);
    Ok(r)
}

/// Every reader on `v`: none panics, each accepted result passes [`check`], each error says
/// which method's result it was about.
fn check_all(v: &Value) {
    fn one<T: FromResult + PartialEq + Debug>(v: &Value) {
        if let Err(e) = check::<T>(v) {
            assert_eq!(e.method(), T::METHOD);
            assert!(e.to_string().starts_with("the server's "));
        }
    }
    one::<CallToolResult>(v);
    one::<ListToolsResult>(v);
    one::<ListPromptsResult>(v);
    one::<GetPromptResult>(v);
    one::<ListResourcesResult>(v);
    one::<ListResourceTemplatesResult>(v);
    one::<ReadResourceResult>(v);
}

// ---------------------------------------------------------------------------------------------
// The 2026-07-28 examples
// ---------------------------------------------------------------------------------------------

#[test]
fn call_tool_examples_of_2026_07_28_read() {
    let r = CallToolResult::from_json(example!(
        "CallToolResult/result-with-unstructured-text.json"
    ))
    .unwrap();
    assert_eq!(
        r.text(),
        "Current weather in New York:\nTemperature: 72°F\nConditions: Partly cloudy"
    );
    assert!(!r.is_error);
    assert_eq!(r.structured_content, None);
    assert!(r.other.is_empty());

    let r = CallToolResult::from_json(example!(
        "CallToolResult/result-with-structured-content.json"
    ))
    .unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()["humidity"], 65);

    let r = CallToolResult::from_json(example!(
        "CallToolResult/result-with-array-structured-content.json"
    ))
    .unwrap();
    assert_eq!(r.structured_content.as_ref().unwrap()[1]["name"], "Bob");

    let r = CallToolResult::from_json(example!("CallToolResult/invalid-tool-input-error.json"))
        .unwrap();
    assert!(r.is_error);
    let e = r.into_result().unwrap_err();
    assert_eq!(
        e.to_string(),
        "the tool reported an error: Invalid departure date: must be in the future. Current date is 08/08/2025."
    );
    assert!(e.result().is_error);

    let r = CallToolResult::from_json(&result_of(example!(
        "CallToolResultResponse/call-tool-result-response.json"
    )))
    .unwrap();
    assert!(r.into_result().is_ok());
}

#[test]
fn list_examples_of_2026_07_28_read_with_their_cache_hints() {
    let t = ListToolsResult::from_json(example!(
        "ListToolsResult/tools-list-with-cursor-and-ttl.json"
    ))
    .unwrap();
    assert_eq!(t.tools.len(), 1);
    let tool = &t.tools[0];
    assert_eq!(tool.name, "get_weather");
    assert_eq!(tool.display_name(), "Weather Information Provider");
    assert_eq!(tool.input_schema["required"], json!(["location"]));
    assert_eq!(tool.icons[0].sizes, Some(vec!["48x48".to_owned()]));
    assert_eq!(t.next_cursor(), Some("next-page-cursor"));
    assert_eq!(t.ttl_ms, Some(300_000));
    assert_eq!(t.ttl(), Duration::from_secs(300));
    assert_eq!(t.cache_scope, Some(CacheScopeHint::Public));
    assert!(t.other.is_empty());

    let p = ListPromptsResult::from_json(example!(
        "ListPromptsResult/prompts-list-with-cursor-and-ttl.json"
    ))
    .unwrap();
    assert_eq!(p.prompts[0].arguments[0].name, "code");
    assert!(p.prompts[0].arguments[0].required);
    assert_eq!(p.ttl_ms, Some(600_000));

    let r = ListResourcesResult::from_json(example!(
        "ListResourcesResult/resources-list-with-cursor-and-ttl.json"
    ))
    .unwrap();
    assert_eq!(r.resources[0].uri, "file:///project/src/main.rs");
    assert_eq!(r.next_cursor(), Some("eyJwYWdlIjogM30="));
    assert_eq!(r.cache_scope, Some(CacheScopeHint::Private));

    let rt = ListResourceTemplatesResult::from_json(example!(
        "ListResourceTemplatesResult/resource-templates-list-with-cursor-and-ttl.json"
    ))
    .unwrap();
    assert_eq!(rt.resource_templates[0].uri_template, "file:///{path}");
    assert_eq!(rt.ttl_ms, Some(3_600_000));

    for (response, items) in [
        (
            example!("ListToolsResultResponse/list-tools-result-response.json"),
            1,
        ),
        (
            example!("ListPromptsResultResponse/list-prompts-result-response.json"),
            1,
        ),
        (
            example!("ListResourcesResultResponse/list-resources-result-response.json"),
            1,
        ),
    ] {
        let v: Value = serde_json::from_str(&result_of(response)).unwrap();
        let n = check::<ListToolsResult>(&v)
            .map(|r| r.tools.len())
            .or_else(|_| check::<ListPromptsResult>(&v).map(|r| r.prompts.len()))
            .or_else(|_| check::<ListResourcesResult>(&v).map(|r| r.resources.len()))
            .unwrap();
        assert_eq!(n, items);
    }
    let rt = ListResourceTemplatesResult::from_json(&result_of(example!(
        "ListResourceTemplatesResultResponse/list-resource-templates-result-response.json"
    )))
    .unwrap();
    assert_eq!(rt.next_cursor(), None);
}

#[test]
fn prompt_and_read_examples_of_2026_07_28_read() {
    let g =
        GetPromptResult::from_json(example!("GetPromptResult/code-review-prompt.json")).unwrap();
    assert_eq!(g.description.as_deref(), Some("Code review prompt"));
    assert_eq!(g.messages[0].role, Role::User);
    assert!(g.messages[0]
        .content
        .as_text()
        .unwrap()
        .starts_with("Please review"));
    GetPromptResult::from_json(&result_of(example!(
        "GetPromptResultResponse/get-prompt-result-response.json"
    )))
    .unwrap();

    let r =
        ReadResourceResult::from_json(example!("ReadResourceResult/file-resource-contents.json"))
            .unwrap();
    assert_eq!(r.contents[0].mime_type.as_deref(), Some("text/x-rust"));
    assert!(r.contents[0].text().unwrap().starts_with("fn main()"));
    assert_eq!(r.ttl(), Duration::from_secs(60));
    for response in [
        example!("ReadResourceResultResponse/read-resource-result-response.json"),
        example!("ReadResourceResultResponse/read-resource-result-response-with-ttl.json"),
    ] {
        ReadResourceResult::from_json(&result_of(response)).unwrap();
    }
}

#[test]
fn item_examples_read_through_serde() {
    for text in [
        example!("Tool/tool-with-array-output-schema.json"),
        example!("Tool/tool-with-composition-input-schema.json"),
        example!("Tool/with-default-2020-12-input-schema.json"),
        example!("Tool/with-explicit-draft-07-input-schema.json"),
        example!("Tool/with-no-parameters.json"),
        example!("Tool/with-output-schema-for-structured-content.json"),
    ] {
        let v: Value = serde_json::from_str(text).unwrap();
        let tool: Tool = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&tool).unwrap(), v);
    }
    let tool: Tool =
        serde_json::from_str(example!("Tool/tool-with-array-output-schema.json")).unwrap();
    assert_eq!(tool.output_schema.unwrap()["type"], "array");

    let r: Resource =
        serde_json::from_str(example!("Resource/file-resource-with-annotations.json")).unwrap();
    let a = r.annotations.unwrap();
    assert_eq!(a.audience, vec![Role::User]);
    assert_eq!(a.priority, Some(0.8));
    assert_eq!(a.last_modified.as_deref(), Some("2025-01-12T15:00:58Z"));

    let t: ResourceContents =
        serde_json::from_str(example!("TextResourceContents/text-file-contents.json")).unwrap();
    assert_eq!(t.text(), Some("Resource content"));
    let b: ResourceContents =
        serde_json::from_str(example!("BlobResourceContents/image-file-contents.json")).unwrap();
    assert!(b.blob().unwrap().starts_with("iVBOR"));
    assert_eq!(b.text(), None);
}

#[test]
fn every_content_block_example_reads_as_its_variant_and_writes_back() {
    let cases: [(&str, &str); 5] = [
        (example!("TextContent/text-content.json"), "text"),
        (
            example!("ImageContent/image-png-content-with-annotations.json"),
            "image",
        ),
        (example!("AudioContent/audio-wav-content.json"), "audio"),
        (
            example!("ResourceLink/file-resource-link.json"),
            "resource_link",
        ),
        (
            example!("EmbeddedResource/embedded-file-resource-with-annotations.json"),
            "resource",
        ),
    ];
    for (text, kind) in cases {
        let v: Value = serde_json::from_str(text).unwrap();
        let block: ContentBlock = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(block.kind(), kind);
        assert!(!matches!(block, ContentBlock::Unknown(_)), "{kind}");
        assert_eq!(block.to_value(), v, "{kind}");
    }
    let image: ContentBlock = serde_json::from_str(example!(
        "ImageContent/image-png-content-with-annotations.json"
    ))
    .unwrap();
    assert_eq!(image.annotations().unwrap().priority, Some(0.9));
    let ContentBlock::Resource(e) = serde_json::from_str(example!(
        "EmbeddedResource/embedded-file-resource-with-annotations.json"
    ))
    .unwrap() else {
        panic!("not an embedded resource")
    };
    assert_eq!(e.resource.uri, "file:///project/src/main.rs");
    assert_eq!(
        e.annotations.unwrap().audience,
        vec![Role::User, Role::Assistant]
    );
}

// ---------------------------------------------------------------------------------------------
// The 2025-11-25 era
// ---------------------------------------------------------------------------------------------

#[test]
fn legacy_results_without_result_type_or_cache_hints_read() {
    let t = ListToolsResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/tools-list-result-response.json"
    )))
    .unwrap();
    assert_eq!(t.ttl_ms, None);
    assert_eq!(t.cache_scope, None);
    assert_eq!(t.ttl(), Duration::ZERO);
    assert_eq!(t.next_cursor(), Some("next-page-cursor"));
    // `execution` is not in the 2026-07-28 schema: kept as sent.
    assert_eq!(
        t.tools[0].other["execution"],
        json!({"taskSupport": "optional"})
    );
    // The normal form adds `resultType`.
    assert_eq!(t.to_value()["resultType"], "complete");
    assert!(t.raw().get("resultType").is_none());

    let c = CallToolResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/tools-call-result-response.json"
    )))
    .unwrap();
    assert!(c.text().starts_with("Current weather"));
    let c = CallToolResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/tools-call-structured-result-response.json"
    )))
    .unwrap();
    assert_eq!(c.structured_content.unwrap()["temperature"], 22.5);
    let c = CallToolResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/tools-call-error-result-response.json"
    )))
    .unwrap();
    assert!(c.into_result().is_err());

    let p = ListPromptsResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/prompts-list-result-response.json"
    )))
    .unwrap();
    assert_eq!(p.prompts[0].name, "code_review");
    let g = GetPromptResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/prompts-get-result-response.json"
    )))
    .unwrap();
    assert_eq!(g.messages.len(), 1);
    let r = ListResourcesResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/resources-list-result-response.json"
    )))
    .unwrap();
    assert_eq!(r.resources[0].name, "main.rs");
    let r = ReadResourceResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/resources-read-result-response.json"
    )))
    .unwrap();
    assert_eq!(r.ttl_ms, None);
    let rt = ListResourceTemplatesResult::from_json(&result_of(example!(
        "legacy-2025-11-25/pages/resources-templates-list-result-response.json"
    )))
    .unwrap();
    assert_eq!(rt.resource_templates[0].name, "Project Files");
}

#[test]
fn legacy_content_blocks_read_and_annotations_inside_a_resource_are_kept() {
    for (text, kind) in [
        (
            example!("legacy-2025-11-25/pages/tools-content-text.json"),
            "text",
        ),
        (
            example!("legacy-2025-11-25/pages/tools-content-image.json"),
            "image",
        ),
        (
            example!("legacy-2025-11-25/pages/tools-content-audio.json"),
            "audio",
        ),
        (
            example!("legacy-2025-11-25/pages/tools-content-resource-link.json"),
            "resource_link",
        ),
        (
            example!("legacy-2025-11-25/pages/tools-content-resource.json"),
            "resource",
        ),
    ] {
        let v: Value = serde_json::from_str(text).unwrap();
        let block: ContentBlock = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(block.kind(), kind);
        assert_eq!(block.to_value(), v);
    }
    // The page puts `annotations` inside `resource`, where the schema has none.
    let ContentBlock::Resource(e) = serde_json::from_str(example!(
        "legacy-2025-11-25/pages/tools-content-resource.json"
    ))
    .unwrap() else {
        panic!("not an embedded resource")
    };
    assert_eq!(e.annotations, None);
    assert_eq!(e.resource.other["annotations"]["priority"], 0.7);
}

// ---------------------------------------------------------------------------------------------
// Lenient where the schema allows, strict where it requires
// ---------------------------------------------------------------------------------------------

#[test]
fn an_unknown_content_block_is_kept_and_the_others_still_read() {
    let v = json!({
        "resultType": "complete",
        "content": [
            {"type": "text", "text": "one"},
            {"type": "hologram", "frames": [1, 2], "text": 3},
            {"type": "text", "text": "two"}
        ]
    });
    let r = check::<CallToolResult>(&v).unwrap();
    assert_eq!(r.content.len(), 3);
    assert_eq!(r.content[1].kind(), "hologram");
    assert_eq!(r.content[1], ContentBlock::Unknown(v["content"][1].clone()));
    assert_eq!(r.content[1].as_text(), None);
    assert_eq!(r.text(), "one\ntwo");
    assert_eq!(r.to_value(), v);
}

#[test]
fn text_joins_the_text_blocks_with_newlines_and_skips_the_others() {
    let r = CallToolResult::from_value(json!({"content": [
        {"type": "image", "data": "AA==", "mimeType": "image/png"},
        {"type": "text", "text": "a"},
        {"type": "resource_link", "uri": "file:///x", "name": "x"},
        {"type": "text", "text": ""},
        {"type": "text", "text": "b\n"}
    ]}))
    .unwrap();
    assert_eq!(r.text(), "a\n\nb\n");
    let empty = CallToolResult::from_value(json!({"content": []})).unwrap();
    assert_eq!(empty.text(), "");
}

#[test]
fn is_error_decides_into_result_and_the_tool_error_shows_the_text() {
    let ok = CallToolResult::from_value(json!({"content": [], "isError": false})).unwrap();
    assert!(ok.clone().into_result().is_ok());
    let absent = CallToolResult::from_value(json!({"content": [], "isError": null})).unwrap();
    assert!(!absent.is_error);
    let failed = CallToolResult::from_value(json!({"content": [
        {"type": "text", "text": "disk full"},
        {"type": "text", "text": "try later"}
    ], "isError": true}))
    .unwrap();
    let e = failed.clone().into_result().unwrap_err();
    assert_eq!(
        e.to_string(),
        "the tool reported an error: disk full\ntry later"
    );
    assert_eq!(e.into_result(), failed);
    let silent = CallToolResult::from_value(json!({"content": [], "isError": true})).unwrap();
    assert_eq!(
        silent.into_result().unwrap_err().to_string(),
        "the tool reported an error (without text)"
    );
}

#[test]
fn structured_content_keeps_any_value_and_an_explicit_null() {
    for s in [
        json!(null),
        json!(3),
        json!("s"),
        json!([1]),
        json!({"a": {}}),
    ] {
        let v = json!({"resultType": "complete", "content": [], "structuredContent": s});
        let r = check::<CallToolResult>(&v).unwrap();
        assert_eq!(r.structured_content, Some(s));
        assert_eq!(r.to_value(), v);
    }
}

#[test]
fn members_the_schema_does_not_name_are_kept_at_every_level() {
    let v = json!({
        "resultType": "complete",
        "tools": [{
            "name": "t", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true, "x-cost": 3},
            "icons": [{"src": "data:,", "x-alt": "dot"}],
            "x-tool": true
        }],
        "x-page": {"n": 1},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}
    });
    let r = check::<ListToolsResult>(&v).unwrap();
    assert_eq!(r.other["x-page"], json!({"n": 1}));
    assert_eq!(r.tools[0].other["x-tool"], true);
    let a = r.tools[0].annotations.as_ref().unwrap();
    assert_eq!(a.other["x-cost"], 3);
    assert!(a.is_read_only() && !a.is_destructive() && a.is_idempotent() && a.is_open_world());
    assert_eq!(r.tools[0].icons[0].other["x-alt"], "dot");
    assert!(r.meta.as_ref().unwrap().contains_key(SERVER_INFO));
    assert_eq!(r.to_value(), v);
}

const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

#[test]
fn tool_annotation_defaults_are_the_spec_s() {
    let none = ToolAnnotations::default();
    assert!(!none.is_read_only());
    assert!(none.is_destructive());
    assert!(!none.is_idempotent());
    assert!(none.is_open_world());
    let additive = ToolAnnotations {
        destructive_hint: Some(false),
        idempotent_hint: Some(true),
        open_world_hint: Some(false),
        ..ToolAnnotations::default()
    };
    assert!(!additive.is_destructive() && additive.is_idempotent() && !additive.is_open_world());
}

#[test]
fn display_name_prefers_title_then_annotations_title_then_name() {
    let mut t = Tool {
        name: "n".into(),
        ..Tool::default()
    };
    assert_eq!(t.display_name(), "n");
    t.annotations = Some(ToolAnnotations {
        title: Some("a".into()),
        ..ToolAnnotations::default()
    });
    assert_eq!(t.display_name(), "a");
    t.title = Some("t".into());
    assert_eq!(t.display_name(), "t");
}

#[test]
fn values_outside_the_schema_enumerations_and_ranges_are_kept() {
    let v = json!({
        "resultType": "complete",
        "messages": [{"role": "system", "content": {
            "type": "text", "text": "hi", "annotations": {"priority": 7.5, "audience": ["robot"]}
        }}]
    });
    let g = check::<GetPromptResult>(&v).unwrap();
    assert_eq!(g.messages[0].role, Role::Other("system".into()));
    let a = g.messages[0].content.annotations().unwrap();
    assert_eq!(a.priority, Some(7.5));
    assert_eq!(a.audience, vec![Role::Other("robot".into())]);

    let l = check::<ListResourcesResult>(&json!({
        "resources": [], "cacheScope": "gateway", "ttlMs": -5
    }))
    .unwrap();
    assert_eq!(l.cache_scope, Some(CacheScopeHint::Other("gateway".into())));
    assert_eq!(l.ttl(), Duration::ZERO);
    // An `inputSchema` without `"type": "object"` is a server's sloppiness, not a lost list.
    check::<ListToolsResult>(&json!({"tools": [{"name": "t", "inputSchema": {}}]})).unwrap();
}

#[test]
fn resource_contents_are_text_or_blob_and_text_wins_when_both_are_sent() {
    let r = check::<ReadResourceResult>(&json!({"contents": [
        {"uri": "a", "text": "t"},
        {"uri": "b", "blob": "AA==", "mimeType": "application/octet-stream"},
        {"uri": "c", "text": "t", "blob": "AA=="},
        {"uri": "d", "text": null, "blob": "AA=="}
    ]}))
    .unwrap();
    assert_eq!(r.contents[0].body, ResourceBody::Text("t".into()));
    assert_eq!(r.contents[1].body, ResourceBody::Blob("AA==".into()));
    assert_eq!(r.contents[2].text(), Some("t"));
    assert_eq!(r.contents[2].other["blob"], "AA==");
    assert_eq!(
        r.contents[2].to_value(),
        json!({"uri": "c", "text": "t", "blob": "AA=="})
    );
    assert_eq!(r.contents[3].blob(), Some("AA=="));
}

#[test]
fn null_optional_members_read_as_absent() {
    let r = check::<ListToolsResult>(&json!({
        "resultType": null, "tools": [{"name": "t", "inputSchema": {"type": "object"},
            "title": null, "icons": null, "annotations": null, "_meta": null}],
        "nextCursor": null, "ttlMs": null, "cacheScope": null, "_meta": null
    }))
    .unwrap();
    assert_eq!(r.next_cursor(), None);
    assert_eq!(r.tools[0].title, None);
    assert!(r.tools[0].icons.is_empty());
    assert_eq!(
        r.to_value(),
        json!({"resultType": "complete", "tools": [{"name": "t", "inputSchema": {"type": "object"}}]})
    );
}

#[test]
fn numbers_are_read_by_their_value() {
    let r = ListPromptsResult::from_value(json!({"prompts": [], "ttlMs": 5000.0})).unwrap();
    assert_eq!(r.ttl_ms, Some(5000));
    let r = ListResourcesResult::from_value(json!({"resources": [
        {"uri": "u", "name": "n", "size": 12.0},
        {"uri": "u", "name": "n", "size": u64::MAX}
    ], "ttlMs": u64::MAX}))
    .unwrap();
    assert_eq!(r.resources[0].size, Some(12));
    assert_eq!(r.resources[1].size, Some(u64::MAX));
    assert_eq!(r.ttl_ms, Some(i64::MAX));
}

/// The errors, one per line (`input => Display`), in one snapshot.
#[test]
fn errors_name_the_method_and_the_member_at_fault() {
    fn err<T: FromResult + Debug>(text: &str) -> String {
        let e = T::from_json(text).unwrap_err();
        format!("{text}\n  => {e}")
    }
    let lines = [
        err::<CallToolResult>(""),
        err::<CallToolResult>("{\"content\": [}"),
        err::<CallToolResult>("[]"),
        err::<CallToolResult>("{}"),
        err::<CallToolResult>(r#"{"content": null}"#),
        err::<CallToolResult>(r#"{"content": {}}"#),
        err::<CallToolResult>(r#"{"content": [{"type": "text", "text": 3}]}"#),
        err::<CallToolResult>(r#"{"content": [{"type": "text", "text": "a"}, {"text": "b"}]}"#),
        err::<CallToolResult>(r#"{"content": [{"type": 1}]}"#),
        err::<CallToolResult>(r#"{"content": [7]}"#),
        err::<CallToolResult>(r#"{"content": [{"type": "image", "data": "AA=="}]}"#),
        err::<CallToolResult>(
            r#"{"content": [{"type": "text", "text": "a", "annotations": {"priority": "high"}}]}"#,
        ),
        err::<CallToolResult>(r#"{"content": [{"type": "resource", "resource": {"uri": "u"}}]}"#),
        err::<CallToolResult>(r#"{"content": [], "isError": "yes"}"#),
        err::<CallToolResult>(r#"{"content": [], "_meta": []}"#),
        err::<CallToolResult>(
            r#"{"resultType": "input_required", "inputRequests": {}, "content": []}"#,
        ),
        err::<CallToolResult>(r#"{"resultType": 1, "content": []}"#),
        err::<ListToolsResult>(r#"{"tools": [{"name": "t"}]}"#),
        err::<ListToolsResult>(r#"{"tools": [{"name": "t", "inputSchema": "object"}]}"#),
        err::<ListToolsResult>(
            r#"{"tools": [{"name": "t", "inputSchema": {}, "annotations": {"readOnlyHint": "no"}}]}"#,
        ),
        err::<ListToolsResult>(
            r#"{"tools": [{"name": "t", "inputSchema": {}, "icons": [{"sizes": ["1x1"]}]}]}"#,
        ),
        err::<ListToolsResult>(r#"{"tools": [], "nextCursor": 2}"#),
        err::<ListToolsResult>(r#"{"tools": [], "ttlMs": 1.5}"#),
        err::<ListToolsResult>(r#"{"tools": [], "cacheScope": true}"#),
        err::<ListPromptsResult>(r#"{"prompts": [{"name": "p", "arguments": [{}]}]}"#),
        err::<GetPromptResult>(r#"{"messages": [{"role": "user"}]}"#),
        err::<GetPromptResult>(r#"{"messages": [{"role": 1, "content": {}}]}"#),
        err::<ListResourcesResult>(r#"{"resources": [{"uri": "u", "name": "n", "size": -1}]}"#),
        err::<ListResourceTemplatesResult>(r#"{"resourceTemplates": [{"name": "n"}]}"#),
        err::<ReadResourceResult>(r#"{"contents": [{"uri": "u"}]}"#),
    ];
    insta::assert_snapshot!(lines.join("\n"));
}

#[test]
fn error_accessors_say_method_path_and_kind() {
    let e = CallToolResult::from_json(r#"{"content": [{"type": "text"}]}"#).unwrap_err();
    assert_eq!(e.method(), "tools/call");
    assert_eq!(e.path(), "content[0].text");
    assert_eq!(e.kind(), &ResultErrorKind::Missing);
    let e = ListToolsResult::from_json("nope").unwrap_err();
    assert_eq!(e.path(), "");
    assert!(matches!(e.kind(), ResultErrorKind::NotJson(_)));
    let long = "x".repeat(200);
    let e = GetPromptResult::from_value(json!({"resultType": long, "messages": []})).unwrap_err();
    assert_eq!(e.kind(), &ResultErrorKind::NotComplete("x".repeat(64)));
}

#[test]
fn an_item_error_through_serde_names_the_member() {
    let e = serde_json::from_value::<Tool>(json!({"name": "t", "inputSchema": {}, "icons": [{}]}))
        .unwrap_err();
    assert_eq!(e.to_string(), "icons[0].src is required but absent");
    let e = serde_json::from_value::<ContentBlock>(json!([])).unwrap_err();
    assert_eq!(e.to_string(), "the value is an array, expected an object");
    let e = serde_json::from_value::<CallToolResult>(json!({})).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the server's tools/call result is not valid: content is required but absent"
    );
}

#[test]
fn results_serialize_as_their_normal_form_and_deserialize_through_the_reader() {
    let v = json!({"resultType": "complete", "content": [{"type": "text", "text": "x"}]});
    let r: CallToolResult = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(r.raw(), &v);
    assert_eq!(serde_json::to_value(&r).unwrap(), v);
    let debug = format!("{r:?}");
    assert!(debug.starts_with("CallToolResult { content: ["), "{debug}");
    assert!(!debug.contains("raw"), "{debug}");
    assert_eq!(r.clone().into_raw(), v);
}

// ---------------------------------------------------------------------------------------------
// Pages
// ---------------------------------------------------------------------------------------------

fn tools_page(
    names: &[&str],
    cursor: Option<&str>,
    ttl: Option<i64>,
    scope: Option<&str>,
) -> Value {
    let mut v = json!({
        "resultType": "complete",
        "tools": names.iter().map(|n| json!({"name": n, "inputSchema": {"type": "object"}})).collect::<Vec<_>>()
    });
    if let Some(c) = cursor {
        v["nextCursor"] = json!(c);
    }
    if let Some(t) = ttl {
        v["ttlMs"] = json!(t);
    }
    if let Some(s) = scope {
        v["cacheScope"] = json!(s);
    }
    v
}

#[test]
fn extend_appends_the_next_page_and_takes_its_cursor() {
    let mut all = ListToolsResult::from_value(tools_page(
        &["a", "b"],
        Some("2"),
        Some(60_000),
        Some("public"),
    ))
    .unwrap();
    let next =
        ListToolsResult::from_value(tools_page(&["c"], Some("3"), Some(1_000), Some("private")))
            .unwrap();
    all.extend(next);
    let last = ListToolsResult::from_value(tools_page(&["d"], None, Some(5_000), Some("private")))
        .unwrap();
    all.extend(last);
    let names: Vec<&str> = all.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    assert_eq!(all.next_cursor(), None);
    assert_eq!(all.ttl_ms, Some(1_000));
    assert_eq!(all.cache_scope, Some(CacheScopeHint::Private));
    // raw is the pages merged the same way, so it equals the normal form here.
    assert_eq!(all.raw(), &all.to_value());
    assert_eq!(all.raw()["tools"].as_array().unwrap().len(), 4);
    assert!(all.raw().get("nextCursor").is_none());
}

#[test]
fn extend_drops_cache_hints_a_page_lacks_and_works_through_the_trait() {
    fn follow<P: PaginatedResult>(mut first: P, mut pages: Vec<P>) -> P {
        while first.next_cursor().is_some() && !pages.is_empty() {
            first.extend(pages.remove(0));
        }
        first
    }
    let first =
        ListToolsResult::from_value(tools_page(&["a"], Some("2"), Some(10), Some("public")))
            .unwrap();
    let legacy = ListToolsResult::from_value(tools_page(&["b"], None, None, None)).unwrap();
    let all = follow(first, vec![legacy]);
    assert_eq!(all.items().len(), 2);
    assert_eq!(all.ttl_ms, None);
    assert_eq!(all.cache_scope, None);
    assert_eq!(all.raw(), &all.to_value());
    assert_eq!(all.into_items().len(), 2);

    let mut p = ListPromptsResult::from_value(
        json!({"prompts": [{"name": "a"}], "nextCursor": "x", "cacheScope": "public", "ttlMs": 5}),
    )
    .unwrap();
    p.extend(
        ListPromptsResult::from_value(
            json!({"prompts": [{"name": "b"}], "cacheScope": "public", "ttlMs": 9}),
        )
        .unwrap(),
    );
    assert_eq!(p.cache_scope, Some(CacheScopeHint::Public));
    assert_eq!(p.ttl_ms, Some(5));
    assert_eq!(p.prompts.len(), 2);
    let mut r =
        ListResourcesResult::from_value(json!({"resources": [], "nextCursor": "x"})).unwrap();
    r.extend(
        ListResourcesResult::from_value(json!({"resources": [{"uri": "u", "name": "n"}]})).unwrap(),
    );
    assert_eq!(r.resources.len(), 1);
    let mut t = ListResourceTemplatesResult::from_value(json!({"resourceTemplates": []})).unwrap();
    t.extend(ListResourceTemplatesResult::from_value(json!({"resourceTemplates": [{"uriTemplate": "u/{x}", "name": "n"}], "nextCursor": "y"})).unwrap());
    assert_eq!(t.next_cursor(), Some("y"));
    assert_eq!(t.raw()["resourceTemplates"][0]["name"], "n");
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// Member names of the schema, so that random objects reach deep into the readers.
const KEYS: &[&str] = &[
    "resultType",
    "content",
    "type",
    "text",
    "isError",
    "structuredContent",
    "_meta",
    "tools",
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "src",
    "sizes",
    "nextCursor",
    "ttlMs",
    "cacheScope",
    "prompts",
    "arguments",
    "required",
    "messages",
    "role",
    "resources",
    "resourceTemplates",
    "uriTemplate",
    "uri",
    "mimeType",
    "size",
    "contents",
    "blob",
    "data",
    "resource",
    "audience",
    "priority",
    "lastModified",
    "readOnlyHint",
    "x",
];

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-z]{1,3}",
    ]
}

/// A float whose shortest text reads back exactly (so text round trips are exact).
fn arb_float() -> impl Strategy<Value = f64> {
    (-4000i32..4000).prop_map(|i| f64::from(i) / 4.0)
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        arb_float().prop_map(Value::from),
        prop_oneof![
            proptest::sample::select(
                &[
                    "text",
                    "image",
                    "audio",
                    "resource",
                    "resource_link",
                    "complete",
                    "user"
                ][..]
            )
            .prop_map(str::to_owned),
            ".{0,6}",
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
            proptest::collection::btree_map(arb_key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An object of the `present` members plus `extra` ones the schema does not name.
fn obj(members: Vec<(&str, Option<Value>)>, extra: Map<String, Value>) -> Value {
    let mut m = extra;
    for (k, v) in members {
        if let Some(v) = v {
            m.insert(k.to_owned(), v);
        }
    }
    Value::Object(m)
}

fn arb_extra() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::btree_map("x-[a-z]{1,4}", arb_json(), 0..2)
        .prop_map(|m| m.into_iter().collect())
}

fn arb_meta() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(
        proptest::collection::btree_map("com\\.example/[a-z]{1,4}", arb_json(), 0..2)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    )
}

fn arb_str() -> impl Strategy<Value = Value> {
    ".{0,8}".prop_map(Value::from)
}

fn opt_str() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(arb_str())
}

fn arb_annotations() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(
        (
            proptest::option::of(
                proptest::collection::vec(
                    proptest::sample::select(&["user", "assistant", "critic"][..])
                        .prop_map(Value::from),
                    1..3,
                )
                .prop_map(Value::from),
            ),
            proptest::option::of(arb_float().prop_map(Value::from)),
            opt_str(),
            arb_extra(),
        )
            .prop_map(|(audience, priority, last, extra)| {
                obj(
                    vec![
                        ("audience", audience),
                        ("priority", priority),
                        ("lastModified", last),
                    ],
                    extra,
                )
            }),
    )
}

fn arb_icons() -> impl Strategy<Value = Option<Value>> {
    let icon = (
        arb_str(),
        opt_str(),
        proptest::option::of(proptest::collection::vec(arb_str(), 0..2).prop_map(Value::from)),
        opt_str(),
        arb_extra(),
    )
        .prop_map(|(src, mime, sizes, theme, extra)| {
            obj(
                vec![
                    ("src", Some(src)),
                    ("mimeType", mime),
                    ("sizes", sizes),
                    ("theme", theme),
                ],
                extra,
            )
        });
    proptest::option::of(proptest::collection::vec(icon, 1..3).prop_map(Value::from))
}

fn arb_resource_contents() -> impl Strategy<Value = Value> {
    (
        arb_str(),
        opt_str(),
        any::<bool>(),
        arb_str(),
        arb_meta(),
        arb_extra(),
    )
        .prop_map(|(uri, mime, is_text, body, meta, extra)| {
            let key = if is_text { "text" } else { "blob" };
            obj(
                vec![
                    ("uri", Some(uri)),
                    ("mimeType", mime),
                    (key, Some(body)),
                    ("_meta", meta),
                ],
                extra,
            )
        })
}

/// The members of a `Resource` (a `resource_link` block adds `type`).
fn arb_resource_members() -> impl Strategy<Value = Value> {
    (
        (arb_str(), arb_str(), opt_str(), opt_str(), opt_str()),
        proptest::option::of((0u64..1 << 40).prop_map(Value::from)),
        arb_annotations(),
        arb_icons(),
        arb_meta(),
        arb_extra(),
    )
        .prop_map(
            |((uri, name, title, desc, mime), size, ann, icons, meta, extra)| {
                obj(
                    vec![
                        ("uri", Some(uri)),
                        ("name", Some(name)),
                        ("title", title),
                        ("description", desc),
                        ("mimeType", mime),
                        ("size", size),
                        ("annotations", ann),
                        ("icons", icons),
                        ("_meta", meta),
                    ],
                    extra,
                )
            },
        )
}

fn arb_block() -> impl Strategy<Value = Value> {
    let with_type = |mut v: Value, t: &str| {
        v["type"] = json!(t);
        v
    };
    let common = || (arb_annotations(), arb_meta(), arb_extra());
    prop_oneof![
        (arb_str(), common()).prop_map(|(text, (a, m, e))| obj(
            vec![
                ("type", Some(json!("text"))),
                ("text", Some(text)),
                ("annotations", a),
                ("_meta", m)
            ],
            e
        )),
        (
            proptest::sample::select(&["image", "audio"][..]),
            arb_str(),
            arb_str(),
            common()
        )
            .prop_map(|(t, data, mime, (a, m, e))| obj(
                vec![
                    ("type", Some(json!(t))),
                    ("data", Some(data)),
                    ("mimeType", Some(mime)),
                    ("annotations", a),
                    ("_meta", m)
                ],
                e
            )),
        arb_resource_members().prop_map(move |v| with_type(v, "resource_link")),
        (arb_resource_contents(), common()).prop_map(|(r, (a, m, e))| obj(
            vec![
                ("type", Some(json!("resource"))),
                ("resource", Some(r)),
                ("annotations", a),
                ("_meta", m)
            ],
            e
        )),
        ("x-[a-z]{1,5}", arb_extra()).prop_map(|(t, e)| obj(vec![("type", Some(json!(t)))], e)),
    ]
}

fn arb_call_tool() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec(arb_block(), 0..4),
        proptest::option::of(arb_json()),
        any::<bool>(),
        arb_meta(),
        arb_extra(),
    )
        .prop_map(|(content, structured, is_error, meta, extra)| {
            obj(
                vec![
                    ("resultType", Some(json!("complete"))),
                    ("content", Some(Value::from(content))),
                    ("structuredContent", structured),
                    ("isError", is_error.then_some(json!(true))),
                    ("_meta", meta),
                ],
                extra,
            )
        })
}

fn arb_tool() -> impl Strategy<Value = Value> {
    let hint = || proptest::option::of(any::<bool>().prop_map(Value::from));
    let annotations = proptest::option::of(
        (opt_str(), hint(), hint(), hint(), hint(), arb_extra()).prop_map(|(t, r, d, i, o, e)| {
            obj(
                vec![
                    ("title", t),
                    ("readOnlyHint", r),
                    ("destructiveHint", d),
                    ("idempotentHint", i),
                    ("openWorldHint", o),
                ],
                e,
            )
        }),
    );
    let schema = arb_extra().prop_map(|mut m| {
        m.insert("type".into(), json!("object"));
        Value::Object(m)
    });
    (
        (arb_str(), opt_str(), opt_str()),
        schema,
        proptest::option::of(arb_extra().prop_map(Value::Object)),
        annotations,
        arb_icons(),
        arb_meta(),
        arb_extra(),
    )
        .prop_map(
            |((name, title, desc), input, output, ann, icons, meta, extra)| {
                obj(
                    vec![
                        ("name", Some(name)),
                        ("title", title),
                        ("description", desc),
                        ("inputSchema", Some(input)),
                        ("outputSchema", output),
                        ("annotations", ann),
                        ("icons", icons),
                        ("_meta", meta),
                    ],
                    extra,
                )
            },
        )
}

fn arb_prompt() -> impl Strategy<Value = Value> {
    let argument = (arb_str(), opt_str(), opt_str(), any::<bool>(), arb_extra()).prop_map(
        |(name, title, desc, required, extra)| {
            obj(
                vec![
                    ("name", Some(name)),
                    ("title", title),
                    ("description", desc),
                    ("required", required.then_some(json!(true))),
                ],
                extra,
            )
        },
    );
    (
        (arb_str(), opt_str(), opt_str()),
        proptest::option::of(proptest::collection::vec(argument, 1..3).prop_map(Value::from)),
        arb_icons(),
        arb_meta(),
        arb_extra(),
    )
        .prop_map(|((name, title, desc), args, icons, meta, extra)| {
            obj(
                vec![
                    ("name", Some(name)),
                    ("title", title),
                    ("description", desc),
                    ("arguments", args),
                    ("icons", icons),
                    ("_meta", meta),
                ],
                extra,
            )
        })
}

fn arb_template() -> impl Strategy<Value = Value> {
    arb_resource_members().prop_map(|mut v| {
        let m = v.as_object_mut().unwrap();
        let uri = m.remove("uri").unwrap();
        m.remove("size");
        m.insert("uriTemplate".into(), uri);
        v
    })
}

/// A list result of `key` with `items`.
fn arb_list(key: &'static str, items: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec(items, 0..3),
        opt_str(),
        proptest::option::of((0i64..1 << 40).prop_map(Value::from)),
        proptest::option::of(
            proptest::sample::select(&["public", "private", "shared"][..]).prop_map(Value::from),
        ),
        arb_meta(),
        arb_extra(),
    )
        .prop_map(move |(items, cursor, ttl, scope, meta, extra)| {
            obj(
                vec![
                    ("resultType", Some(json!("complete"))),
                    (key, Some(Value::from(items))),
                    ("nextCursor", cursor),
                    ("ttlMs", ttl),
                    ("cacheScope", scope),
                    ("_meta", meta),
                ],
                extra,
            )
        })
}

fn arb_get_prompt() -> impl Strategy<Value = Value> {
    let message = (
        proptest::sample::select(&["user", "assistant"][..]),
        arb_block(),
        arb_extra(),
    )
        .prop_map(|(role, content, extra)| {
            obj(
                vec![("role", Some(json!(role))), ("content", Some(content))],
                extra,
            )
        });
    (
        opt_str(),
        proptest::collection::vec(message, 0..3),
        arb_meta(),
        arb_extra(),
    )
        .prop_map(|(desc, messages, meta, extra)| {
            obj(
                vec![
                    ("resultType", Some(json!("complete"))),
                    ("description", desc),
                    ("messages", Some(Value::from(messages))),
                    ("_meta", meta),
                ],
                extra,
            )
        })
}

fn arb_read() -> impl Strategy<Value = Value> {
    arb_list("contents", arb_resource_contents().boxed()).prop_map(|mut v| {
        v.as_object_mut().unwrap().remove("nextCursor");
        v
    })
}

/// A generated valid result reads, writes back exactly, and reads back equal from its text.
fn round_trip<T: FromResult + PartialEq + Debug>(v: &Value) -> Result<(), TestCaseError> {
    let r = check::<T>(v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&r.to_value(), v);
    let text = r.to_value().to_string();
    let again = T::from_json(&text).unwrap();
    prop_assert_eq!(&again, &r);
    prop_assert_eq!(again.raw(), v);
    Ok(())
}

/// Replaces the value at a random place in `v` (found by walking `steps`) with `new`.
fn mutate(v: &mut Value, steps: &[usize], new: Value) {
    let Some((step, rest)) = steps.split_first() else {
        *v = new;
        return;
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            let k = m.keys().nth(step % m.len()).cloned().unwrap();
            mutate(m.get_mut(&k).unwrap(), rest, new);
        }
        Value::Array(a) if !a.is_empty() => {
            let n = a.len();
            mutate(&mut a[step % n], rest, new);
        }
        _ => *v = new,
    }
}

fn arb_any_result() -> impl Strategy<Value = Value> {
    prop_oneof![
        arb_call_tool().boxed(),
        arb_list("tools", arb_tool().boxed()).boxed(),
        arb_list("prompts", arb_prompt().boxed()).boxed(),
        arb_get_prompt().boxed(),
        arb_list("resources", arb_resource_members().boxed()).boxed(),
        arb_list("resourceTemplates", arb_template().boxed()).boxed(),
        arb_read().boxed(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn arbitrary_json_never_panics_and_what_is_accepted_re_reads_equal(v in arb_json()) {
        check_all(&v);
        let mut m = Map::new();
        m.insert("content".into(), v.clone());
        m.insert("tools".into(), Value::from(vec![v.clone()]));
        m.insert("messages".into(), Value::from(vec![v.clone()]));
        m.insert("contents".into(), Value::from(vec![v]));
        check_all(&Value::Object(m));
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,64}") {
        let _ = CallToolResult::from_json(&text);
        let _ = ListToolsResult::from_json(&text);
        let _ = GetPromptResult::from_json(&text);
        let _ = ReadResourceResult::from_json(&text);
    }

    #[test]
    fn a_mutated_valid_result_never_panics(
        v in arb_any_result(),
        steps in proptest::collection::vec(any::<usize>(), 0..6),
        new in arb_json(),
    ) {
        let mut v = v;
        mutate(&mut v, &steps, new);
        check_all(&v);
    }

    #[test]
    fn generated_call_tool_results_round_trip(v in arb_call_tool()) {
        round_trip::<CallToolResult>(&v)?;
    }

    #[test]
    fn generated_list_results_round_trip(
        tools in arb_list("tools", arb_tool().boxed()),
        prompts in arb_list("prompts", arb_prompt().boxed()),
        resources in arb_list("resources", arb_resource_members().boxed()),
        templates in arb_list("resourceTemplates", arb_template().boxed()),
    ) {
        round_trip::<ListToolsResult>(&tools)?;
        round_trip::<ListPromptsResult>(&prompts)?;
        round_trip::<ListResourcesResult>(&resources)?;
        round_trip::<ListResourceTemplatesResult>(&templates)?;
    }

    #[test]
    fn generated_prompt_and_read_results_round_trip(g in arb_get_prompt(), r in arb_read()) {
        round_trip::<GetPromptResult>(&g)?;
        round_trip::<ReadResourceResult>(&r)?;
    }

    #[test]
    fn extended_pages_hold_every_item_in_order_and_raw_stays_the_normal_form(
        pages in proptest::collection::vec(arb_list("tools", arb_tool().boxed()), 1..4),
    ) {
        let mut pages: Vec<ListToolsResult> =
            pages.iter().map(|p| ListToolsResult::from_value(p.clone()).unwrap()).collect();
        let expected: Vec<Tool> = pages.iter().flat_map(|p| p.tools.clone()).collect();
        let last_cursor = pages.last().unwrap().next_cursor.clone();
        let mut all = pages.remove(0);
        for p in pages {
            all.extend(p);
        }
        prop_assert_eq!(&all.tools, &expected);
        prop_assert_eq!(&all.next_cursor, &last_cursor);
        prop_assert_eq!(all.raw(), &all.to_value());
    }
}

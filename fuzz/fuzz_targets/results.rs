//! The typed MCP results (`mcpwire_core::mcp::results`) fed arbitrary bytes: no reader panics,
//! every accepted result keeps the JSON it was read from as `raw`, and its normal form
//! (`to_value`) re-reads equal and writes back the same. The same text is also read as the
//! `result` member of a JSON-RPC response and inside a `content` array, so the item readers
//! see it too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::jsonrpc::Message;
use mcpwire_core::mcp::{
    CallToolResult, FromResult, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedResult, ReadResourceResult,
};
use serde_json::Value;

fn check<T: FromResult + PartialEq + std::fmt::Debug>(text: &str) -> Option<T> {
    match T::from_json(text) {
        Ok(r) => {
            let raw: Value = serde_json::from_str(text).expect("accepted text is JSON");
            assert_eq!(r.raw(), &raw);
            let normal = r.to_value();
            let again = T::from_value(normal.clone()).expect("the normal form re-reads");
            assert_eq!(again, r);
            assert_eq!(again.to_value(), normal);
            Some(r)
        }
        Err(e) => {
            assert_eq!(e.method(), T::METHOD);
            assert!(!e.to_string().is_empty());
            None
        }
    }
}

/// A list read twice and merged: every item of both, in order, and the second's cursor.
fn check_pages<T: PaginatedResult + PartialEq + std::fmt::Debug + Clone>(text: &str)
where
    T::Item: PartialEq + std::fmt::Debug + Clone,
{
    if let Some(first) = check::<T>(text) {
        let mut all = first.clone();
        all.extend(first.clone());
        assert_eq!(all.items().len(), 2 * first.items().len());
        assert_eq!(&all.items()[first.items().len()..], first.items());
        assert_eq!(all.next_cursor(), first.next_cursor());
    }
}

fn check_all(text: &str) {
    check::<CallToolResult>(text);
    check::<GetPromptResult>(text);
    check::<ReadResourceResult>(text);
    check_pages::<ListToolsResult>(text);
    check_pages::<ListPromptsResult>(text);
    check_pages::<ListResourcesResult>(text);
    check_pages::<ListResourceTemplatesResult>(text);
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    check_all(text);
    // The same text as the `result` of a response, as a driver gets it.
    if let Ok(Message::Response { result, .. }) = Message::parse(text) {
        check_all(result.get());
    }
    // The same text as one content block, tool, message and resource.
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        let wrapped = serde_json::json!({
            "content": [v.clone()],
            "tools": [v.clone()],
            "messages": [v.clone()],
            "contents": [v.clone()],
            "resources": [v.clone()],
            "resourceTemplates": [v.clone()],
            "prompts": [v],
        });
        check_all(&wrapped.to_string());
    }
});

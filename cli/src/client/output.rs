//! The human-readable renderings of results (`--json` prints results as received instead).

use std::fmt::Write as _;

use mcpwire_core::mcp::SubscriptionFilter;
use serde_json::Value;

/// The width tables are cut to: `COLUMNS` when set to a sane number, else 80.
pub(super) fn width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|w| (20..=1000).contains(w))
        .unwrap_or(80)
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The first line of `text`, cut to `max` characters (an ellipsis marks the cut).
fn cut(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Two columns: the key column as wide as its widest entry, the second cut to `width`.
fn table(rows: &[(String, String)], header: (&str, &str), width: usize) -> String {
    if rows.is_empty() {
        return "(none)\n".to_owned();
    }
    let key_w = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .chain([header.0.len()])
        .max()
        .unwrap_or(0);
    let rest = width.saturating_sub(key_w + 2).max(10);
    let mut out = String::new();
    for (k, v) in
        std::iter::once((header.0.to_owned(), header.1.to_owned())).chain(rows.iter().cloned())
    {
        let pad = key_w.saturating_sub(k.chars().count());
        let line = format!("{k}{}  {}", " ".repeat(pad), cut(&v, rest));
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

pub(super) fn tools_table(items: &[Value], width: usize) -> String {
    let rows: Vec<(String, String)> = items
        .iter()
        .map(|t| (str_of(t, "name").to_owned(), described(t)))
        .collect();
    table(&rows, ("NAME", "DESCRIPTION"), width)
}

pub(super) fn prompts_table(items: &[Value], width: usize) -> String {
    tools_table(items, width)
}

pub(super) fn resources_table(items: &[Value], width: usize) -> String {
    let rows: Vec<(String, String)> = items
        .iter()
        .map(|r| {
            let name = str_of(r, "name");
            let desc = described(r);
            let second = match (name.is_empty(), desc.is_empty()) {
                (false, false) => format!("{name}: {desc}"),
                (false, true) => name.to_owned(),
                _ => desc,
            };
            (str_of(r, "uri").to_owned(), second)
        })
        .collect();
    table(&rows, ("URI", "NAME / DESCRIPTION"), width)
}

pub(super) fn templates_table(items: &[Value], width: usize) -> String {
    let rows: Vec<(String, String)> = items
        .iter()
        .map(|r| (str_of(r, "uriTemplate").to_owned(), described(r)))
        .collect();
    table(&rows, ("URI TEMPLATE", "DESCRIPTION"), width)
}

fn described(v: &Value) -> String {
    let d = str_of(v, "description");
    if d.is_empty() {
        str_of(v, "title").to_owned()
    } else {
        d.to_owned()
    }
}

pub(super) fn discover(result: &Value) -> String {
    let mut out = String::new();
    let info = result
        .get("serverInfo")
        .or_else(|| {
            result
                .get("_meta")
                .and_then(|m| m.get(mcpwire_core::mcp::meta::SERVER_INFO_KEY))
        })
        .unwrap_or(&Value::Null);
    let _ = writeln!(
        out,
        "server: {} {}",
        str_of(info, "name"),
        str_of(info, "version")
    );
    if let Some(v) = result.get("supportedVersions").and_then(Value::as_array) {
        let v: Vec<&str> = v.iter().filter_map(Value::as_str).collect();
        let _ = writeln!(out, "versions: {}", v.join(", "));
    }
    if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
        let _ = writeln!(out, "version: {v}");
    }
    if let Some(caps) = result.get("capabilities").and_then(Value::as_object) {
        let names: Vec<&str> = caps.keys().map(String::as_str).collect();
        let _ = writeln!(out, "capabilities: {}", names.join(", "));
    }
    let instructions = str_of(result, "instructions");
    if !instructions.is_empty() {
        let _ = writeln!(out, "instructions: {instructions}");
    }
    out
}

/// A content block as text: its text, or a note for what is not text.
fn content_block(block: &Value) -> String {
    match str_of(block, "type") {
        "text" => str_of(block, "text").to_owned(),
        "image" | "audio" => format!(
            "[{} {}, {} base64 characters]",
            str_of(block, "type"),
            str_of(block, "mimeType"),
            str_of(block, "data").len()
        ),
        "resource_link" => format!("[resource link {}]", str_of(block, "uri")),
        "resource" => {
            let r = block.get("resource").unwrap_or(&Value::Null);
            resource_content(r)
        }
        _ => block.to_string(),
    }
}

fn resource_content(r: &Value) -> String {
    match r.get("text").and_then(Value::as_str) {
        Some(t) => t.to_owned(),
        None => format!(
            "[{} {}, {} base64 characters]",
            str_of(r, "uri"),
            str_of(r, "mimeType"),
            str_of(r, "blob").len()
        ),
    }
}

fn lines(parts: impl Iterator<Item = String>) -> String {
    let mut out = String::new();
    for p in parts {
        out.push_str(&p);
        if !p.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

pub(super) fn tool_result(result: &Value) -> String {
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty());
    match (content, result.get("structuredContent")) {
        (Some(c), _) => lines(c.iter().map(content_block)),
        (None, Some(s)) => lines(std::iter::once(
            serde_json::to_string_pretty(s).unwrap_or_default(),
        )),
        (None, None) => String::new(),
    }
}

pub(super) fn resource_contents(result: &Value) -> String {
    let contents = result.get("contents").and_then(Value::as_array);
    lines(contents.into_iter().flatten().map(resource_content))
}

pub(super) fn prompt_messages(result: &Value) -> String {
    let mut out = String::new();
    let d = str_of(result, "description");
    if !d.is_empty() {
        let _ = writeln!(out, "# {d}");
    }
    let messages = result.get("messages").and_then(Value::as_array);
    for m in messages.into_iter().flatten() {
        let content = m.get("content").unwrap_or(&Value::Null);
        let _ = writeln!(out, "{}: {}", str_of(m, "role"), content_block(content));
    }
    out
}

pub(super) fn filter_words(f: &SubscriptionFilter) -> String {
    let mut w: Vec<String> = Vec::new();
    if f.tools_list_changed {
        w.push("tools list".into());
    }
    if f.prompts_list_changed {
        w.push("prompts list".into());
    }
    if f.resources_list_changed {
        w.push("resources list".into());
    }
    for u in &f.resource_subscriptions {
        w.push(format!("resource {u}"));
    }
    if w.is_empty() {
        "nothing".into()
    } else {
        w.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table_cuts_descriptions_to_the_width() {
        let items = vec![
            json!({"name": "echo", "description": "x".repeat(200)}),
            json!({"name": "a-longer-name", "description": "first line\nsecond line"}),
        ];
        let t = tools_table(&items, 40);
        for line in t.lines() {
            assert!(line.chars().count() <= 40, "{line:?}");
        }
        assert!(t.contains("a-longer-name  first line"), "{t}");
        assert!(!t.contains("second line"));
        assert!(t.contains('…'));
    }

    #[test]
    fn tool_result_shows_text_content_then_structured_content() {
        let r = json!({"content": [{"type": "text", "text": "hi"}, {"type": "image", "mimeType": "image/png", "data": "AAAA"}]});
        assert_eq!(
            tool_result(&r),
            "hi\n[image image/png, 4 base64 characters]\n"
        );
        let r = json!({"content": [], "structuredContent": {"a": 1}});
        assert!(tool_result(&r).contains("\"a\": 1"));
    }
}

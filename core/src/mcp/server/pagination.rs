//! Cursors of list results (`server/utilities/pagination.mdx`): the core pages the whole list an
//! application returns. A cursor is opaque to the client: `o` and the decimal offset of the
//! page, base64url-encoded; anything else is refused with `-32602`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;

/// Reads `params.cursor`: `Ok(0)` without one, the offset for one of ours, `Err` otherwise.
pub(super) fn read_cursor(cursor: Option<&Value>) -> Result<usize, &'static str> {
    let text = match cursor {
        None | Some(Value::Null) => return Ok(0),
        Some(Value::String(s)) => s,
        Some(_) => return Err("Invalid params: cursor must be a string"),
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| "Invalid params: unknown cursor")?;
    let text = std::str::from_utf8(&bytes).map_err(|_| "Invalid params: unknown cursor")?;
    text.strip_prefix('o')
        .filter(|d| !d.is_empty() && d.len() <= 19 && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<usize>().ok())
        .ok_or("Invalid params: unknown cursor")
}

/// The cursor of the page starting at `offset`.
pub(super) fn cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("o{offset}"))
}

/// Cuts the array `key` of `result` to the page at `offset` of `size` items and adds
/// `nextCursor` when more follow. A result that already has a `nextCursor` (the application
/// pages itself) or no such array is left alone. An offset past the end gives an empty page.
pub(super) fn paginate(result: &mut Value, key: &str, offset: usize, size: usize) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    if obj.contains_key("nextCursor") {
        return;
    }
    let Some(Value::Array(items)) = obj.get_mut(key) else {
        return;
    };
    let all = std::mem::take(items);
    let total = all.len();
    let start = offset.min(total);
    let end = start.saturating_add(size).min(total);
    *items = all.into_iter().skip(start).take(end - start).collect();
    if end < total {
        obj.insert("nextCursor".into(), Value::String(cursor(end)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pages_follow_their_cursors_to_the_end() {
        let all: Vec<Value> = (0..5).map(|i| json!(i)).collect();
        let mut seen = Vec::new();
        let mut offset = 0;
        for _ in 0..10 {
            let mut r = json!({"tools": all.clone()});
            paginate(&mut r, "tools", offset, 2);
            seen.extend(r["tools"].as_array().cloned().unwrap_or_default());
            match r.get("nextCursor") {
                Some(c) => offset = read_cursor(Some(c)).unwrap_or(usize::MAX),
                None => break,
            }
        }
        assert_eq!(seen, all);
    }

    #[test]
    fn foreign_cursors_are_refused() {
        for bad in [
            json!(3),
            json!("nope"),
            json!(""),
            json!(URL_SAFE_NO_PAD.encode("o")),
            json!(URL_SAFE_NO_PAD.encode("o-1")),
            json!(URL_SAFE_NO_PAD.encode("x1")),
        ] {
            assert!(read_cursor(Some(&bad)).is_err(), "{bad}");
        }
        assert_eq!(read_cursor(None), Ok(0));
        assert_eq!(read_cursor(Some(&json!(cursor(7)))), Ok(7));
    }
}

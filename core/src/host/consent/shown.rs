//! Text from servers made safe to print on a terminal, without hiding anything: control
//! characters (an escape sequence can rewrite the lines above it), bidirectional overrides
//! (which reorder what is read), zero-width characters and Unicode tag characters (invisible
//! text a model still reads) are shown as escapes instead of acting.

use serde_json::Value;

/// Whether `c` would act on the terminal or stay invisible, rather than show.
pub(crate) fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'   // zero-width space, joiners, LRM/RLM
            | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
            | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
            | '\u{2066}'..='\u{2069}' // bidi isolates
            | '\u{FEFF}'              // zero-width no-break space
            | '\u{FFF9}'..='\u{FFFB}' // interlinear annotation
            | '\u{E0000}'..='\u{E007F}' // tag characters
        )
}

/// One line: every hidden character (newlines and tabs too) as `\n`, `\t` or `\u{..}`.
pub(crate) fn inline(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if is_hidden(c) => out.push_str(&format!("\\u{{{:04x}}}", u32::from(c))),
        c => out.push(c),
    }
}

/// Several lines: newlines kept, every line after the first indented by `indent` (so a line of
/// the text cannot pass for a line of the prompt), other hidden characters escaped.
pub(crate) fn block(s: &str, indent: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(indent);
        }
        for c in line.chars() {
            push_escaped(&mut out, c);
        }
    }
    out
}

/// `v` as pretty-printed JSON whose every hidden character is written as a `\uXXXX` escape:
/// still JSON, and it reads back as the very same value. (JSON writers escape C0 controls
/// already; DEL, C1 controls, bidi overrides and tag characters they leave as they are.)
pub(crate) fn json(v: &Value) -> String {
    let text = format!("{v:#}");
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        // The pretty printer's own newlines are the only raw controls it writes.
        if c != '\n' && is_hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hidden_characters_are_shown_as_escapes() {
        assert_eq!(inline("a\u{1b}[2Jb\nc"), "a\\u{001b}[2Jb\\nc");
        assert_eq!(inline("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(inline("x\u{E0041}y"), "x\\u{e0041}y");
        assert_eq!(inline("naïve 日本"), "naïve 日本");
        assert_eq!(block("one\ntwo\u{7}", "  "), "one\n  two\\u{0007}");
    }

    #[test]
    fn json_stays_the_same_value() {
        let v = json!({"a": "x\u{202e}y\u{7f}\u{9b}z\u{E0041}", "b": ["\n\u{1b}"], "c": 1});
        let text = json(&v);
        assert!(!text.chars().any(|c| c != '\n' && is_hidden(c)), "{text}");
        assert!(
            text.contains("\\u202e") && text.contains("\\udb40\\udc41"),
            "{text}"
        );
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }
}

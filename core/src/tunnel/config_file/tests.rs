#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::*;

fn env(name: &str) -> Option<String> {
    (name == "KEY").then(|| "sk-1".to_owned())
}

fn no_file(_: &str) -> std::io::Result<String> {
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "no such file",
    ))
}

fn parse_text(text: &str) -> Result<FileValues, ConfigFileError> {
    parse("/etc/t.yaml", text, &env, &no_file)
}

#[test]
fn errors_are_typed_with_file_line_and_key() {
    let e = parse_text("log:\n  level: [a]\n").unwrap_err();
    assert_eq!(
        e,
        ConfigFileError {
            path: "/etc/t.yaml".to_owned(),
            line: Some(2),
            key: "log.level".to_owned(),
            message: "expected a single value".to_owned(),
        }
    );
    let big = "#".repeat(MAX_FILE_BYTES + 1);
    let e = parse_text(&big).unwrap_err();
    assert_eq!(e.line, None);
    assert_eq!(
        e.to_string(),
        "invalid config file /etc/t.yaml: it is larger than 1048576 bytes"
    );
}

#[test]
fn a_value_is_never_repeated_in_an_error() {
    // A literal key under a wrong type, in a sequence where a string belongs, and so on.
    for text in [
        "control_plane:\n  api_key: [sk-secret-123]\n",
        "control_plane:\n  max_inflight_requests: sk-secret-123\n",
        "log:\n  http_raw_unsafe: sk-secret-123\n",
        "mcp:\n  server_urls:\n    - url: \"http://a\\nsk-secret-123\"\n",
        "control_plane:\n  extra_headers:\n    X-A: [sk-secret-123]\n",
    ] {
        let e = parse_text(text).unwrap_err().to_string();
        assert!(!e.contains("sk-secret-123"), "{e}");
    }
}

/// A scalar that YAML reads as itself in double quotes.
fn plain_text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 ./:_=,-]{1,40}"
        .prop_map(|s| s.trim().to_owned())
        // `env:`/`file:` would be references.
        .prop_filter("a reference", |s| {
            let lower = s.to_ascii_lowercase();
            !lower.starts_with("env:") && !lower.starts_with("file:")
        })
}

/// Every key of the schema with a value of its kind, written as YAML, and what it reads as.
fn key_and_value() -> impl Strategy<Value = (usize, String, Vec<String>)> {
    (0..KEYS.len(), plain_text(), 0u64..100_000, any::<bool>()).prop_map(|(i, text, n, b)| {
        let (_, _, kind) = KEYS[i];
        let text = if text.is_empty() {
            "x".to_owned()
        } else {
            text
        };
        let q = format!("\"{text}\"");
        let (yaml, items) = match kind {
            Kind::Text | Kind::Reference => (q, vec![text]),
            Kind::Bool => (b.to_string(), vec![b.to_string()]),
            Kind::Int => (n.to_string(), vec![n.to_string()]),
            Kind::List => (format!("[{q}, {q}]"), vec![text.clone(), text]),
            Kind::Headers => (format!("{{X-A: {q}}}"), vec![format!("X-A: {text}")]),
            Kind::ServerUrls => (
                format!("[{{url: {q}, channel: c1}}]"),
                vec![format!("channel=c1,url={text}")],
            ),
            Kind::Commands => (
                format!("[{{command: {q}}}]"),
                vec![format!("command={text}")],
            ),
            Kind::HarpoonTargets => (
                format!("[{{label: {q}, url: {q}}}]"),
                vec![format!("label={},url={}", quote(&text), quote(&text))],
            ),
        };
        (i, yaml, items)
    })
}

/// The YAML text setting the dotted `key` to `value` (block mappings, two-space indents).
fn nested(key: &str, value: &str) -> String {
    let parts: Vec<&str> = key.split('.').collect();
    let mut out = String::new();
    for (depth, part) in parts.iter().enumerate() {
        out.push_str(&"  ".repeat(depth));
        out.push_str(part);
        out.push(':');
        if depth + 1 == parts.len() {
            out.push(' ');
            out.push_str(value);
        }
        out.push('\n');
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any text: a typed answer, never a panic; an error names the file.
    #[test]
    fn any_text_is_read_or_refused_by_name(text in "\\PC{0,200}") {
        if let Err(e) = parse_text(&text) {
            prop_assert_eq!(e.path.as_str(), "/etc/t.yaml");
            prop_assert!(!e.message.is_empty());
        }
    }

    /// Every key of the schema, at its place with a value of its kind, reads back under its
    /// variable, at its line, with the value in the variable's form.
    #[test]
    fn every_key_reads_back_under_its_variable((i, value, items) in key_and_value(), blank in 0usize..3) {
        let (key, var, _) = KEYS[i];
        let text = format!("{}config_version: 1\n{}", "\n".repeat(blank), nested(key, &value));
        let values = parse_text(&text).unwrap();
        let got = values.get(var).unwrap();
        prop_assert_eq!(got.key, key);
        prop_assert_eq!(got.line, blank + 1 + key.split('.').count());
        prop_assert_eq!(&got.items, &items);
        prop_assert_eq!(values.iter().count(), 1);
    }

    /// A key the schema does not have is refused by its full name at its line.
    #[test]
    fn unknown_keys_are_refused_by_name(section in prop::sample::select(vec!["", "log.", "mcp.", "control_plane."]), name in "[a-z]{3,12}") {
        let key = format!("{section}{name}_zz");
        let e = parse_text(&nested(&key, "1")).unwrap_err();
        prop_assert_eq!(e.key, key.clone());
        prop_assert_eq!(e.line, Some(key.split('.').count()));
        prop_assert!(e.message.starts_with("unknown key (known here: "), "{}", e.message);
    }

    /// The same file reads the same way twice (nothing depends on order or state).
    #[test]
    fn reading_is_deterministic((_, value, _) in key_and_value(), i in 0..KEYS.len()) {
        let text = nested(KEYS[i].0, &value);
        prop_assert_eq!(parse_text(&text).ok(), parse_text(&text).ok());
    }
}

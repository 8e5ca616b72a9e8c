//! The Go tunnel-client's YAML config file (`tunnel::config_file::parse`) on arbitrary text.
//!
//! Invariants checked on every run:
//! - nothing panics, whatever the YAML (anchors, aliases, nesting, documents, tags);
//! - an error names the file and says what is wrong, and never repeats the secret the
//!   environment resolves `env:` references to (a reference's value is not quoted back);
//! - a value read keeps a line inside the file, and a key of the schema: the variable it is
//!   filed under is the one `key_for_variable` maps the key's variable to;
//! - reading is deterministic: the same text reads the same way twice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::tunnel::config_file::{key_for_variable, parse};

const SECRET: &str = "fz-secret-0x5eed";

fn env(name: &str) -> Option<String> {
    (name == "KEY").then(|| SECRET.to_owned())
}

fn read_file(path: &str) -> std::io::Result<String> {
    if path == "/run/key" {
        Ok(format!("{SECRET}\n"))
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such file",
        ))
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = parse("/etc/t.yaml", text, &env, &read_file);
    let again = parse("/etc/t.yaml", text, &env, &read_file);
    assert_eq!(first, again, "the same text read two ways");
    match first {
        Ok(values) => {
            // YAML breaks lines at LF, CR and CRLF: at most one line per break, plus one.
            let lines = text.matches(['\n', '\r']).count() + 1;
            for (var, value) in values.iter() {
                assert_eq!(
                    key_for_variable(var),
                    Some(value.key),
                    "{var} filed under another key"
                );
                assert!(
                    value.line >= 1 && value.line <= lines,
                    "line {} of {lines}",
                    value.line
                );
            }
        }
        Err(e) => {
            assert_eq!(e.path, "/etc/t.yaml");
            assert!(!e.message.is_empty());
            let shown = e.to_string();
            if !text.contains(SECRET) {
                assert!(
                    !shown.contains(SECRET),
                    "a resolved reference quoted back: {shown}"
                );
            }
        }
    }
});

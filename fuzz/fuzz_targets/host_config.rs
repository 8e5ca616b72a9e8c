//! Fuzzes the host's config file reader (`host::config::parse_bytes`), the env-file parser and
//! interpolation on arbitrary input.
//!
//! Input layout: the bytes are the file (they need not be UTF-8). Every environment variable
//! resolves to a marker holding its name, so that a value leaking into a message shows.
//!
//! Checked on every run:
//! - nothing panics;
//! - every error names the file, and its position is a line of the text and a column from 1;
//! - no error shows an environment variable's value (unless the text itself holds the marker);
//! - loaded servers have valid ids, none twice within one namespace (the top level, or one
//!   project), and they come in the file's order;
//! - parsing is deterministic;
//! - the env-file parser's errors are on a line of the text; interpolation of the text is
//!   the identity when it holds no `${`.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use mcpwire_core::host::config::{interpolate, parse_bytes, parse_env_file, Section, Vars};

const MARKER: &str = "\u{2}LEAK";

fuzz_target!(|bytes: &[u8]| {
    let lookup = |name: &str| Some(format!("{MARKER}{name}"));
    let vars = Vars::from_fn(&lookup)
        .with_workspace_folder("/p")
        .with_user_home("/h");
    let config = parse_bytes("f.json", bytes, &vars);
    let text = String::from_utf8_lossy(bytes);
    let lines = text.matches('\n').count() + text.matches('\r').count() + 1;
    for e in &config.errors {
        let shown = format!("{e}");
        assert!(shown.starts_with("f.json:"), "{shown}");
        assert!(e.position.line >= 1 && e.position.line <= lines, "{e:?}");
        assert!(e.position.column >= 1, "{e:?}");
        if !text.contains(MARKER) {
            assert!(!shown.contains(MARKER), "{shown}");
            assert!(!format!("{e:?}").contains(MARKER), "{e:?}");
        }
    }
    let mut seen = BTreeSet::new();
    for entry in &config.servers {
        let namespace = match &entry.section {
            Section::Project { path } => Some(path.clone()),
            _ => None,
        };
        assert!(
            seen.insert((namespace, entry.spec.id.clone())),
            "{:?} twice",
            entry.spec.id
        );
    }
    // The top level's servers, then the project's, each in the file's order.
    let (project, top): (Vec<_>, Vec<_>) = config
        .servers
        .iter()
        .partition(|e| matches!(e.section, Section::Project { .. }));
    for list in [top, project] {
        assert!(list.windows(2).all(|w| w[0].position < w[1].position));
    }
    assert_eq!(parse_bytes("f.json", bytes, &vars), config);

    if let Err(e) = parse_env_file(&text) {
        assert!(e.line >= 1 && e.line <= lines, "{e:?}");
    }
    let interpolated = interpolate(&text, &vars);
    if !text.contains("${") {
        assert_eq!(interpolated.as_deref().ok(), Some(text.as_ref()));
    }
});

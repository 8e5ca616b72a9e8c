//! `host::config`: the config files people already have (Claude Desktop, Claude Code, Cursor,
//! VS Code), read as they are, with errors at their line and column.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use mcpwire_core::host::config::{
    interpolate, parse, parse_bytes, parse_env_file, ConfigErrorKind, ConfigFile, EnvFileErrorKind,
    JsonKind, Layout, Position, Section, Vars,
};
use mcpwire_core::host::{OAuthSpec, TransportSpec, Trust};
use proptest::prelude::*;

fn vars(pairs: &[(&str, &str)]) -> Vars<'static> {
    Vars::from_map(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

/// Lines joined with `\n`, so that a test's positions can be read off the array.
fn text(lines: &[&str]) -> String {
    lines.join("\n")
}

fn ids(config: &ConfigFile) -> Vec<&str> {
    config.servers.iter().map(|e| e.spec.id.as_str()).collect()
}

fn messages(config: &ConfigFile) -> Vec<String> {
    config.errors.iter().map(ToString::to_string).collect()
}

fn pos(line: usize, column: usize) -> Position {
    Position { line, column }
}

fn stdio(config: &ConfigFile, id: &str) -> (String, Vec<String>, BTreeMap<String, String>) {
    let entry = config
        .servers
        .iter()
        .find(|e| e.spec.id.as_str() == id)
        .unwrap_or_else(|| panic!("{id} not loaded: {:?}", messages(config)));
    match &entry.spec.transport {
        TransportSpec::Stdio {
            command, args, env, ..
        } => (command.clone(), args.clone(), env.clone()),
        other => panic!("{id}: {other:?}"),
    }
}

fn http(config: &ConfigFile, id: &str) -> (String, BTreeMap<String, String>) {
    let entry = config
        .servers
        .iter()
        .find(|e| e.spec.id.as_str() == id)
        .unwrap_or_else(|| panic!("{id} not loaded: {:?}", messages(config)));
    match &entry.spec.transport {
        TransportSpec::Http { url, headers } => (url.clone(), headers.clone()),
        other => panic!("{id}: {other:?}"),
    }
}

fn only_error(config: &ConfigFile) -> &ConfigErrorKind {
    assert_eq!(config.errors.len(), 1, "{:?}", messages(config));
    &config.errors[0].kind
}

// ---------------------------------------------------------------------------------------------
// The layouts, from fixtures.

#[test]
fn claude_desktop_file_loads_every_server() {
    let config = parse(
        "claude_desktop_config.json",
        include_str!("../../fixtures/host/claude_desktop_config.json"),
        &Vars::none(),
    );
    assert_eq!(config.errors, []);
    assert_eq!(config.layout, Layout::McpServers);
    assert_eq!(ids(&config), ["files", "weather"]);
    let (command, args, env) = stdio(&config, "files");
    assert_eq!(command, "npx");
    assert_eq!(args[0], "-y");
    assert!(env.is_empty());
    let (_, _, env) = stdio(&config, "weather");
    assert_eq!(env["WEATHER_API_KEY"], "wk-fixture-not-a-real-key");
    assert_eq!(env["WEATHER_UNITS"], "metric");
    let weather = &config.servers[1];
    assert_eq!(weather.position, pos(7, 5));
    assert_eq!(weather.section, Section::McpServers);
    assert_eq!(weather.spec.trust, Trust::Untrusted);
    assert!(!weather.spec.disabled);
}

#[test]
fn claude_code_http_with_headers_defaults_oauth_trust_and_permissions() {
    let env = vars(&[
        ("TRACKER_TOKEN", "tt-123"),
        ("HOME", "/home/ada"),
        ("NOTES_TOKEN", "nt-456"),
    ]);
    let config = parse(
        ".mcp.json",
        include_str!("../../fixtures/host/claude_code.mcp.json"),
        &env,
    );
    assert_eq!(config.errors, []);
    assert_eq!(ids(&config), ["tracker", "notes", "archive"]);

    let (url, headers) = http(&config, "tracker");
    assert_eq!(url, "https://tracker.example.com/mcp", "the default");
    assert_eq!(headers["Authorization"], "Bearer tt-123");
    assert_eq!(headers["X-Team"], "platform");
    let tracker = &config.servers[0];
    assert_eq!(tracker.spec.trust, Trust::Trusted);
    assert_eq!(
        tracker.spec.oauth,
        Some(OAuthSpec {
            client_id: Some("mcpwire-fixture".into()),
            callback_port: Some(8976),
            scopes: vec!["issues:read".into(), "issues:write".into()],
        })
    );

    let (command, args, env) = stdio(&config, "notes");
    assert_eq!(command, "notes-mcp");
    assert_eq!(args, ["--root", "/home/ada/notes", "--log", "warn"]);
    assert_eq!(env["NOTES_TOKEN"], "nt-456");

    // "streamable-http" is HTTP; `disabled` is kept.
    let (url, _) = http(&config, "archive");
    assert_eq!(url, "https://archive.example.com/mcp");
    assert!(config.servers[2].spec.disabled);

    let p = &config.permissions;
    let texts = |rules: &[mcpwire_core::host::config::Rule]| {
        rules.iter().map(|r| r.text.clone()).collect::<Vec<_>>()
    };
    assert_eq!(texts(&p.allow), ["mcp__notes__search", "mcp__notes__read"]);
    assert_eq!(texts(&p.ask), ["mcp__tracker"]);
    assert_eq!(texts(&p.deny), ["mcp__tracker__delete_project"]);
    assert_eq!(p.allow[1].position, pos(32, 37));
    assert_eq!(p.deny[0].position, pos(34, 14));
}

#[test]
fn an_env_variable_set_to_a_value_wins_over_the_default() {
    let config = parse(
        ".mcp.json",
        include_str!("../../fixtures/host/claude_code.mcp.json"),
        &vars(&[
            ("TRACKER_TOKEN", "t"),
            ("TRACKER_URL", "https://self-hosted.example.org/mcp"),
            ("HOME", "/h"),
            ("NOTES_TOKEN", "n"),
        ]),
    );
    assert_eq!(
        http(&config, "tracker").0,
        "https://self-hosted.example.org/mcp"
    );
}

#[test]
fn vscode_jsonc_with_comments_trailing_commas_and_inputs() {
    let base = || {
        vars(&[("LINT_LEVEL", "strict")])
            .with_workspace_folder("/src/app")
            .with_user_home("/home/ada")
    };
    let config = parse(
        ".vscode/mcp.json",
        include_str!("../../fixtures/host/vscode.mcp.json"),
        &base(),
    );
    assert_eq!(config.layout, Layout::VsCode);
    assert_eq!(ids(&config), ["lint"]);
    let (command, args, env) = stdio(&config, "lint");
    assert_eq!(command, "node");
    assert_eq!(args, ["/src/app/tools/lint-mcp.js", "--home", "/home/ada"]);
    assert_eq!(env["LINT_LEVEL"], "strict");
    assert_eq!(env["LINT_JOBS"], "4", "a number is taken as its text");
    assert_eq!(config.servers[0].env_file.as_deref(), Some("/src/app/.env"));
    assert_eq!(config.servers[0].section, Section::Servers);

    let input = &config.inputs[0];
    assert_eq!(input.id, "search-key");
    assert_eq!(input.description.as_deref(), Some("Search API key"));
    assert!(input.password);
    assert_eq!(input.position, pos(4, 5));

    // `${input:search-key}`: VS Code would prompt; here it is a typed error naming the input.
    assert_eq!(
        messages(&config),
        [".vscode/mcp.json:24:31: server \"search\": `headers.Api-Key` uses ${input:search-key} (\"Search API key\"), which VS Code prompts for: prompting is not supported here; set the value through the host, or use ${VAR} from the environment"]
    );
    assert!(matches!(
        &config.errors[0].kind,
        ConfigErrorKind::NeedsInput { id, .. } if id == "search-key"
    ));

    // A host that asked the person parses again with the answer.
    let answered = parse(
        ".vscode/mcp.json",
        include_str!("../../fixtures/host/vscode.mcp.json"),
        &base().with_input("search-key", "sk-answer"),
    );
    assert_eq!(answered.errors, []);
    assert_eq!(http(&answered, "search").1["Api-Key"], "sk-answer");
}

#[test]
fn cursor_file_with_env_prefix_user_home_and_env_file() {
    let config = parse(
        ".cursor/mcp.json",
        include_str!("../../fixtures/host/cursor.mcp.json"),
        &vars(&[("DOCS_TOKEN", "d0c")]).with_user_home("/home/ada"),
    );
    assert_eq!(config.errors, []);
    assert_eq!(http(&config, "docs").1["Authorization"], "Bearer d0c");
    assert_eq!(stdio(&config, "shell").0, "/home/ada/bin/shell-mcp");
    assert_eq!(
        config.servers[1].env_file.as_deref(),
        Some("/home/ada/.config/shell-mcp.env")
    );
}

#[test]
fn claude_json_reads_the_projects_servers_for_the_workspace_folder() {
    let source = include_str!("../../fixtures/host/claude.json");
    // Without a workspace folder: the user scope only.
    let user = parse("~/.claude.json", source, &Vars::none());
    assert_eq!(user.errors, []);
    assert_eq!(ids(&user), ["notes", "calendar"]);

    // In /src/app (a trailing slash is forgiven): its local scope too, and nothing of
    // /src/other, whose broken entry is not looked at.
    let local = parse(
        "~/.claude.json",
        source,
        &Vars::none().with_workspace_folder("/src/app/"),
    );
    assert_eq!(local.errors, []);
    assert_eq!(ids(&local), ["notes", "calendar", "notes", "db"]);
    assert_eq!(
        local.servers[2].section,
        Section::Project {
            path: "/src/app".into()
        }
    );
    assert_eq!(stdio(&local, "db").2["DB_URL"], "postgres://localhost/app");
    // The project's "notes" replaces the user's.
    let effective: Vec<_> = local
        .effective()
        .iter()
        .map(|e| (e.spec.id.as_str(), e.position.line))
        .collect();
    assert_eq!(effective, [("calendar", 5), ("notes", 11), ("db", 12)]);

    let other = parse(
        "~/.claude.json",
        source,
        &Vars::none().with_workspace_folder("/src/other"),
    );
    assert_eq!(
        messages(&other),
        ["~/.claude.json:16:23: server \"broken\": the entry has neither `command` (a local server) nor `url` (a remote server)"]
    );
}

// ---------------------------------------------------------------------------------------------
// A malformed entry is rejected at its line and column; the others load.

#[test]
fn a_malformed_entry_is_rejected_with_its_line_and_column_and_the_others_load() {
    let source = text(&[
        "{",
        "  \"mcpServers\": {",
        "    \"good\": { \"command\": \"a\" },",
        "    \"bad\": {",
        "      \"command\": \"b\",",
        "      \"args\": 5",
        "    },",
        "    \"also-good\": { \"url\": \"https://x.example/mcp\" }",
        "  }",
        "}",
    ]);
    let config = parse("test.json", &source, &Vars::none());
    assert_eq!(ids(&config), ["good", "also-good"]);
    assert_eq!(
        messages(&config),
        ["test.json:6:15: server \"bad\": `args` must be an array of strings, found a number"]
    );
    let e = &config.errors[0];
    assert_eq!(e.position, pos(6, 15));
    assert_eq!(e.server.as_deref(), Some("bad"));
    assert_eq!(
        e.kind,
        ConfigErrorKind::WrongType {
            field: "args".into(),
            expected: "an array of strings",
            found: JsonKind::Number,
        }
    );
}

#[test]
fn every_problem_of_an_entry_is_reported_at_once() {
    let source = text(&[
        "{\"mcpServers\": {\"x\": {",
        "  \"command\": \"c\",",
        "  \"args\": [\"ok\", 7, null],",
        "  \"env\": {\"A\": [1]},",
        "  \"trust\": \"very\",",
        "  \"disabled\": \"yes\"",
        "}}}",
    ]);
    let config = parse("f", &source, &Vars::none());
    assert_eq!(config.servers, []);
    assert_eq!(
        messages(&config),
        [
            "f:3:18: server \"x\": `args[1]` must be a string, found a number",
            "f:3:21: server \"x\": `args[2]` must be a string, found null",
            "f:4:16: server \"x\": `env.A` must be a string, found an array",
            "f:5:12: server \"x\": `trust` must be \"trusted\" or \"untrusted\"",
            "f:6:15: server \"x\": `disabled` must be true or false, found a string",
        ]
    );
}

#[test]
fn a_file_that_is_not_json_is_one_error_at_its_line_and_column() {
    let source = text(&[
        "{",
        "  \"mcpServers\": {",
        "    \"a\": { \"command\": \"x\" }",
        "    \"b\": {}",
        "  }",
        "}",
    ]);
    let config = parse("broken.json", &source, &Vars::none());
    assert_eq!(config.servers, []);
    // Where the comma is missing: right after the value before it.
    assert_eq!(
        messages(&config),
        ["broken.json:3:28: the file is not valid JSON (nor JSONC): expected a comma"]
    );
    for (source, at) in [
        ("not json at all", pos(1, 1)),
        ("{\n  \"a\": 'single'\n}", pos(2, 8)),
        ("{\"a\": \"unclosed", pos(1, 7)),
        ("{} {}", pos(1, 4)),
        ("{\"a\": 1 /* open", pos(1, 9)),
    ] {
        let config = parse("f", source, &Vars::none());
        assert!(
            matches!(only_error(&config), ConfigErrorKind::Syntax { .. }),
            "{source}"
        );
        assert_eq!(config.errors[0].position, at, "{source}");
    }
    assert!(matches!(
        only_error(&parse("f", "[1, 2]", &Vars::none())),
        ConfigErrorKind::NotAnObject {
            found: JsonKind::Array
        }
    ));
    // Empty or only comments: nothing configured, no error.
    for source in ["", "  \n", "// nothing yet\n"] {
        let config = parse("f", source, &Vars::none());
        assert_eq!((config.errors.len(), config.layout), (0, Layout::NoServers));
    }
}

#[test]
fn bytes_that_are_not_utf8_are_one_error_at_the_bad_byte() {
    let config = parse_bytes("f", b"{\n  \"a\": \"\xff\"\n}", &Vars::none());
    assert_eq!(messages(&config), ["f:2:9: the file is not UTF-8 text"]);
    // A byte-order mark (Windows editors write one) is skipped.
    let config = parse_bytes(
        "f",
        b"\xef\xbb\xbf{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}",
        &Vars::none(),
    );
    assert_eq!((config.errors.len(), ids(&config)), (0, vec!["a"]));
}

// ---------------------------------------------------------------------------------------------
// Transports.

#[test]
fn sse_is_refused_with_a_message_that_says_what_to_use() {
    let source = text(&[
        "{\"mcpServers\": {",
        "  \"old\": { \"type\": \"sse\", \"url\": \"https://old.example.com/sse\" },",
        "  \"new\": { \"type\": \"http\", \"url\": \"https://old.example.com/mcp\" }",
        "}}",
    ]);
    let config = parse("f", &source, &Vars::none());
    assert_eq!(ids(&config), ["new"]);
    assert_eq!(*only_error(&config), ConfigErrorKind::SseUnsupported);
    let message = config.errors[0].to_string();
    assert!(message.starts_with("f:2:20: server \"old\": "), "{message}");
    assert!(
        message.contains("2024-11-05 HTTP+SSE transport"),
        "{message}"
    );
    assert!(message.contains("not support"), "{message}");
    assert!(message.contains("Streamable HTTP"), "{message}");
    assert!(message.contains("\"type\": \"http\""), "{message}");
}

#[test]
fn type_is_inferred_and_its_spellings_accepted() {
    let source = r#"{"mcpServers": {
        "a": {"command": "x"},
        "b": {"url": "https://b.example/mcp"},
        "c": {"type": "streamableHttp", "url": "https://c.example/mcp"},
        "d": {"type": "streamable_http", "url": "http://127.0.0.1:9/mcp"},
        "e": {"type": "STDIO", "command": "y", "url": "ignored for stdio"}
    }}"#;
    let config = parse("f", source, &Vars::none());
    assert_eq!(config.errors, []);
    assert_eq!(ids(&config), ["a", "b", "c", "d", "e"]);
    for (id, is_stdio) in [
        ("a", true),
        ("b", false),
        ("c", false),
        ("d", false),
        ("e", true),
    ] {
        let entry = config
            .servers
            .iter()
            .find(|e| e.spec.id.as_str() == id)
            .unwrap();
        assert_eq!(
            matches!(entry.spec.transport, TransportSpec::Stdio { .. }),
            is_stdio,
            "{id}"
        );
    }
}

#[test]
fn transport_problems() {
    let cases = [
        (
            r#"{"command": "x", "url": "https://a.example"}"#,
            ConfigErrorKind::AmbiguousTransport,
        ),
        (r#"{"args": []}"#, ConfigErrorKind::NoTransport),
        (
            r#"{"type": "stdio", "url": "https://a.example"}"#,
            ConfigErrorKind::MissingField {
                field: "command",
                transport: "stdio",
            },
        ),
        (
            r#"{"type": "http", "command": "x"}"#,
            ConfigErrorKind::MissingField {
                field: "url",
                transport: "http",
            },
        ),
        (
            r#"{"type": "websocket", "url": "wss://a.example"}"#,
            ConfigErrorKind::UnknownType {
                found: "websocket".into(),
            },
        ),
        (
            r#"{"type": "a-very-long-type-name-that-nobody-has-ever-defined", "command": "x"}"#,
            ConfigErrorKind::UnknownType {
                found: "a-very-long-type-name-that-nobody-has-ev…".into(),
            },
        ),
        (
            r#"{"type": 1, "command": "x"}"#,
            ConfigErrorKind::WrongType {
                field: "type".into(),
                expected: "a string",
                found: JsonKind::Number,
            },
        ),
        (
            r#"{"command": "  "}"#,
            ConfigErrorKind::Empty {
                field: "command".into(),
            },
        ),
    ];
    for (entry, expected) in cases {
        let source = format!("{{\"mcpServers\": {{\"s\": {entry}}}}}");
        let config = parse("f", &source, &Vars::none());
        assert_eq!(*only_error(&config), expected, "{entry}");
    }
}

#[test]
fn a_url_must_be_absolute_http_and_is_never_shown() {
    for (url, reason) in [
        ("relative/path?token=sekrit", "relative URL without a base"),
        (
            "ftp://files.example.com/?token=sekrit",
            "its scheme is `ftp`",
        ),
        ("unix:///tmp/sekrit.sock", "its scheme is `unix`"),
    ] {
        let source = format!("{{\"mcpServers\": {{\"s\": {{\"url\": \"{url}\"}}}}}}");
        let config = parse("f", &source, &Vars::none());
        assert_eq!(
            *only_error(&config),
            ConfigErrorKind::InvalidUrl {
                field: "url".into(),
                reason: reason.into()
            },
            "{url}"
        );
        let shown = format!("{} {:?}", config.errors[0], config.errors[0]);
        assert!(!shown.contains("sekrit"), "{shown}");
    }
}

// ---------------------------------------------------------------------------------------------
// Interpolation.

#[test]
fn a_missing_variable_rejects_its_entry_naming_it_and_where_and_the_others_load() {
    let source = text(&[
        "{\"mcpServers\": {",
        "  \"needs\": {",
        "    \"command\": \"srv\",",
        "    \"env\": { \"OTHER\": \"${SET_SECRET}\", \"KEY\": \"${MISSING_TOKEN}\" }",
        "  },",
        "  \"fine\": { \"command\": \"${SET_SECRET}\" }",
        "}}",
    ]);
    let config = parse("f", &source, &vars(&[("SET_SECRET", "s3cr3t-value")]));
    assert_eq!(ids(&config), ["fine"]);
    assert_eq!(
        messages(&config),
        ["f:4:47: server \"needs\": `env.KEY` uses ${MISSING_TOKEN}, which is not set (give a default with ${MISSING_TOKEN:-default})"]
    );
    assert_eq!(
        *only_error(&config),
        ConfigErrorKind::MissingVariable {
            name: "MISSING_TOKEN".into(),
            field: "env.KEY".into()
        }
    );
    let shown = format!("{:?} {}", config.errors, config.errors[0]);
    assert!(!shown.contains("s3cr3t"), "{shown}");
}

#[test]
fn interpolation_applies_to_command_args_env_cwd_url_and_headers_only() {
    let source = r#"{"mcpServers": {
        "l": {"command": "${BIN}", "args": ["${A}", "-${A}-"], "env": {"E": "${A}"},
              "cwd": "${A}/dir", "oauth": {"clientId": "${A}"}, "note": "${UNSET}"},
        "r": {"url": "https://${HOST}/mcp", "headers": {"H": "x ${A}"}}
    }}"#;
    let config = parse(
        "f",
        source,
        &vars(&[("BIN", "b"), ("A", "1"), ("HOST", "h.example")]),
    );
    assert_eq!(config.errors, []);
    let l = &config.servers[0].spec;
    assert_eq!(
        l.transport,
        TransportSpec::Stdio {
            command: "b".into(),
            args: vec!["1".into(), "-1-".into()],
            env: [("E".to_owned(), "1".to_owned())].into(),
            cwd: Some("1/dir".into()),
        }
    );
    assert_eq!(
        l.oauth.as_ref().unwrap().client_id.as_deref(),
        Some("${A}"),
        "not interpolated"
    );
    assert_eq!(
        http(&config, "r"),
        (
            "https://h.example/mcp".to_owned(),
            [("H".to_owned(), "x 1".to_owned())].into()
        )
    );
}

#[test]
fn variable_problems_are_typed() {
    let cases: [(&str, ConfigErrorKind); 5] = [
        (
            r#""${env:NOPE}""#,
            ConfigErrorKind::MissingVariable {
                name: "env:NOPE".into(),
                field: "command".into(),
            },
        ),
        (
            r#""${workspaceFolder}/x""#,
            ConfigErrorKind::NotProvided {
                name: "workspaceFolder",
                field: "command".into(),
            },
        ),
        (
            r#""${config:python.path}""#,
            ConfigErrorKind::UnsupportedVariable {
                reference: "config:python.path".into(),
                field: "command".into(),
            },
        ),
        (
            r#""${A:-${B}}""#,
            ConfigErrorKind::UnsupportedVariable {
                reference: "A:-${B".into(),
                field: "command".into(),
            },
        ),
        (
            r#""${OPEN""#,
            ConfigErrorKind::UnterminatedVariable {
                field: "command".into(),
            },
        ),
    ];
    for (command, expected) in cases {
        let source = format!("{{\"mcpServers\": {{\"s\": {{\"command\": {command}}}}}}}");
        let config = parse("f", &source, &Vars::none());
        assert_eq!(*only_error(&config), expected, "{command}");
    }
}

// ---------------------------------------------------------------------------------------------
// Ids, duplicates, oauth, trust.

#[test]
fn an_invalid_server_id_is_an_entry_error() {
    let source = text(&[
        "{\"servers\": {",
        "  \"BTP Admin\": { \"command\": \"x\" },",
        "  \"9lives\": { \"command\": \"x\" },",
        "  \"ok_1\": { \"command\": \"x\" }",
        "}}",
    ]);
    let config = parse("f", &source, &Vars::none());
    assert_eq!(ids(&config), ["ok_1"]);
    assert_eq!(config.errors.len(), 2);
    assert_eq!(config.errors[0].position, pos(2, 3));
    assert_eq!(config.errors[0].server.as_deref(), Some("BTP Admin"));
    assert!(matches!(
        &config.errors[0].kind,
        ConfigErrorKind::InvalidServerId(e) if e.id == "BTP Admin"
    ));
    assert!(
        config.errors[1]
            .to_string()
            .starts_with("f:3:3: server \"9lives\": \"9lives\" is not a valid server id"),
        "{}",
        config.errors[1]
    );
}

#[test]
fn duplicate_keys_use_neither_value() {
    let source = text(&[
        "{\"mcpServers\": {",
        "  \"twice\": { \"command\": \"first\" },",
        "  \"once\": { \"command\": \"a\", \"command\": \"b\" },",
        "  \"fine\": { \"command\": \"c\" },",
        "  \"twice\": { \"command\": \"second\" }",
        "}}",
    ]);
    let config = parse("f", &source, &Vars::none());
    assert_eq!(ids(&config), ["fine"]);
    assert_eq!(
        messages(&config),
        [
            "f:2:3: server \"twice\": `mcpServers.twice` is given more than once (also at 5:3): remove all but one; none of them is used",
            "f:3:13: server \"once\": `command` is given more than once (also at 3:29): remove all but one; none of them is used",
            "f:3:29: server \"once\": `command` is given more than once (also at 3:13): remove all but one; none of them is used",
            "f:5:3: server \"twice\": `mcpServers.twice` is given more than once (also at 2:3): remove all but one; none of them is used",
        ]
    );
    // Across the two layouts' sections too.
    let both = parse(
        "f",
        r#"{"mcpServers": {"a": {"command": "x"}}, "servers": {"a": {"command": "y"}, "b": {"command": "z"}}}"#,
        &Vars::none(),
    );
    assert_eq!((both.layout, ids(&both)), (Layout::Both, vec!["b"]));
    assert_eq!(both.errors.len(), 2);
    // A duplicated top-level section is not read at all.
    let sections = parse(
        "f",
        r#"{"mcpServers": {"a": {"command": "x"}}, "mcpServers": {}}"#,
        &Vars::none(),
    );
    assert_eq!(sections.servers, []);
    assert_eq!(sections.errors.len(), 2);
}

#[test]
fn oauth_block_variants_and_problems() {
    let parse_oauth = |block: &str| {
        let source = format!(
            "{{\"mcpServers\": {{\"s\": {{\"url\": \"https://a.example/mcp\", \"oauth\": {block}}}}}}}"
        );
        parse("f", &source, &Vars::none())
    };
    let config = parse_oauth(r#"{"scopes": ["a", "b"], "authServerMetadataUrl": "ignored"}"#);
    assert_eq!(
        config.servers[0].spec.oauth,
        Some(OAuthSpec {
            client_id: None,
            callback_port: None,
            scopes: vec!["a".into(), "b".into()],
        })
    );
    for (block, field) in [
        (r#"{"callbackPort": 70000}"#, "oauth.callbackPort"),
        (r#"{"callbackPort": 0}"#, "oauth.callbackPort"),
        (r#"{"callbackPort": 80.5}"#, "oauth.callbackPort"),
    ] {
        assert_eq!(
            *only_error(&parse_oauth(block)),
            ConfigErrorKind::InvalidValue {
                field: field.into(),
                expected: "a port number from 1 to 65535"
            },
            "{block}"
        );
    }
    for (block, field, found) in [
        (r#"{"clientId": 5}"#, "oauth.clientId", JsonKind::Number),
        (
            r#"{"callbackPort": "8080"}"#,
            "oauth.callbackPort",
            JsonKind::String,
        ),
        (r#"{"scopes": [1]}"#, "oauth.scopes[0]", JsonKind::Number),
        (r#"{"scopes": {}}"#, "oauth.scopes", JsonKind::Object),
        (r#"true"#, "oauth", JsonKind::Boolean),
    ] {
        assert!(
            matches!(only_error(&parse_oauth(block)), ConfigErrorKind::WrongType { field: f, found: k, .. } if f == field && *k == found),
            "{block}: {:?}",
            messages(&parse_oauth(block))
        );
    }
}

#[test]
fn env_values_numbers_and_booleans_are_text_null_is_refused() {
    let config = parse(
        "f",
        r#"{"mcpServers": {"s": {"command": "x", "env": {"N": 3, "B": true, "S": "s"}}}}"#,
        &Vars::none(),
    );
    let (_, _, env) = stdio(&config, "s");
    assert_eq!(
        env.into_iter().collect::<Vec<_>>(),
        [
            ("B".into(), "true".into()),
            ("N".into(), "3".into()),
            ("S".into(), "s".into())
        ]
    );
    let config = parse(
        "f",
        r#"{"mcpServers": {"s": {"command": "x", "env": {"PATH": null}}}}"#,
        &Vars::none(),
    );
    assert!(matches!(
        only_error(&config),
        ConfigErrorKind::InvalidValue { field, .. } if field == "env.PATH"
    ));
    // Headers take strings only.
    let config = parse(
        "f",
        r#"{"mcpServers": {"s": {"url": "https://a.example", "headers": {"X-N": 3}}}}"#,
        &Vars::none(),
    );
    assert!(matches!(
        only_error(&config),
        ConfigErrorKind::WrongType { field, .. } if field == "headers.X-N"
    ));
}

#[test]
fn permissions_problems_are_file_errors() {
    let config = parse(
        "f",
        r#"{"permissions": {"allow": ["ok", 3], "deny": "mcp__x", "defaultMode": "ignored"}}"#,
        &Vars::none(),
    );
    assert_eq!(config.permissions.allow.len(), 1);
    assert_eq!(
        messages(&config),
        [
            "f:1:34: `permissions.allow[1]` must be a string, found a number",
            "f:1:46: `permissions.deny` must be an array of strings, found a string",
        ]
    );
    assert!(config.errors.iter().all(|e| e.server.is_none()));
}

#[test]
fn inputs_and_project_section_problems_are_file_errors() {
    let config = parse(
        "f",
        r#"{"inputs": [{"type": "promptString", "description": "no id"}, 7, {"id": "ok"}], "servers": {}}"#,
        &Vars::none(),
    );
    assert_eq!(config.inputs.len(), 1);
    assert_eq!(config.inputs[0].id, "ok");
    assert_eq!(
        messages(&config),
        [
            "f:1:13: `inputs[0]` must be an object with an `id` string",
            "f:1:63: `inputs[1]` must be an object, found a number",
        ]
    );
    let config = parse("f", r#"{"inputs": {}}"#, &Vars::none());
    assert!(
        matches!(only_error(&config), ConfigErrorKind::WrongType { field, .. } if field == "inputs")
    );

    let config = parse(
        "f",
        r#"{"projects": {"/p": {"mcpServers": []}}, "mcpServers": 1}"#,
        &Vars::none().with_workspace_folder("/p"),
    );
    assert_eq!(
        messages(&config),
        [
            "f:1:36: `projects.\"/p\".mcpServers` must be an object of servers, found an array",
            "f:1:56: `mcpServers` must be an object of servers, found a number",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// envFile.

#[test]
fn env_files_parse_with_comments_quotes_export_and_multiline_values() {
    let pairs = parse_env_file(include_str!("../../fixtures/host/example.env")).unwrap();
    assert_eq!(
        pairs,
        [
            ("LINT_LEVEL".into(), "strict".into()),
            ("LINT_TOKEN".into(), "lt-fixture \"quoted\" value".into()),
            ("LINT_URL".into(), "https://lint.example.com/#anchor".into()),
            ("LINT_MULTI".into(), "first line\nsecond line".into()),
            ("EMPTY".into(), String::new()),
            ("LINT_LEVEL".into(), "pedantic".into()),
        ]
    );
    let pairs = parse_env_file("A=\"x\\ny\\t\\q\" # c\r\nB : 'lit $HOME \\n'\r\n\u{0}").err();
    assert_eq!(
        pairs.map(|e| (e.line, e.kind)),
        Some((3, EnvFileErrorKind::InvalidKey))
    );
    assert_eq!(
        parse_env_file("A=\"x\\ny\\t\\q\" # c\r\nB : 'lit $HOME \\n'\r\n").unwrap(),
        [
            ("A".into(), "x\ny\t\\q".into()),
            ("B".into(), "lit $HOME \\n".into())
        ]
    );
    for (text, line, kind) in [
        ("A=1\nJUSTAKEY\n", 2, EnvFileErrorKind::NoSeparator),
        ("A=1\n\n=nokey\n", 3, EnvFileErrorKind::InvalidKey),
        (
            "A=\"open\nstill open\n",
            1,
            EnvFileErrorKind::Unterminated { quote: '"' },
        ),
        ("A='x' trailing\n", 1, EnvFileErrorKind::TextAfterQuote),
    ] {
        let e = parse_env_file(text).unwrap_err();
        assert_eq!((e.line, e.kind), (line, kind), "{text:?}");
        assert!(e.to_string().starts_with(&format!("line {line}: ")));
    }
    // A secret in a bad line is not in the message.
    let e = parse_env_file("TOKEN='sk-unclosed-secret\n").unwrap_err();
    assert!(!format!("{e} {e:?}").contains("sk-unclosed"));
}

#[test]
fn an_env_file_adds_to_the_entry_and_explicit_env_wins() {
    let mut config = parse(
        ".vscode/mcp.json",
        include_str!("../../fixtures/host/vscode.mcp.json"),
        &vars(&[("LINT_LEVEL", "from-env-block")])
            .with_workspace_folder("/w")
            .with_user_home("/h")
            .with_input("search-key", "k"),
    );
    let pairs = parse_env_file(include_str!("../../fixtures/host/example.env")).unwrap();
    config.servers[0].apply_env_file(pairs.clone());
    let (_, _, env) = stdio(&config, "lint");
    assert_eq!(env["LINT_LEVEL"], "from-env-block", "the entry's env wins");
    assert_eq!(env["LINT_TOKEN"], "lt-fixture \"quoted\" value");
    assert_eq!(env["LINT_JOBS"], "4");
    // An HTTP entry has no environment and no env file.
    let search = &mut config.servers[1];
    assert_eq!(search.env_file, None);
    let before = search.clone();
    search.apply_env_file(pairs);
    assert_eq!(*search, before);
    // Within the file, the last value of a repeated key counts.
    let mut plain = parse(
        "f",
        r#"{"mcpServers": {"s": {"command": "x", "envFile": "e"}}}"#,
        &Vars::none(),
    );
    plain.servers[0].apply_env_file([("K".into(), "1".into()), ("K".into(), "2".into())]);
    assert_eq!(stdio(&plain, "s").2["K"], "2");
}

// ---------------------------------------------------------------------------------------------
// Secrets.

#[test]
fn secrets_are_in_no_error_nor_debug_output() {
    let source = r#"{
        "mcpServers": {
            "a": {"command": "x", "env": {"API_KEY": "${KEY}", "BAD": [1]}},
            "b": {"url": "https://h.example/mcp", "headers": {"Authorization": "Bearer ${KEY}"}},
            "c": {"url": "https://h.example/mcp", "headers": {"Authorization": "Bearer ${KEY}", "X": 1}},
            "d": {"url": "${KEY}"},
            "e": {"command": "x", "env": {"K": "${KEY}"}, "trust": "no"}
        }
    }"#;
    let env = vars(&[("KEY", "sk-live-topsecret")]);
    let config = parse("f", source, &env);
    assert_eq!(ids(&config), ["b"]);
    assert_eq!(config.errors.len(), 4, "{:?}", messages(&config));
    for error in &config.errors {
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("topsecret"), "{shown}");
    }
    // The loaded server's Debug shows header names, not values.
    let debug = format!("{:?}", config.servers[0]);
    assert!(debug.contains("Authorization"), "{debug}");
    assert!(!debug.contains("topsecret"), "{debug}");
    let env_debug = format!("{env:?}");
    assert!(!env_debug.contains("topsecret"), "{env_debug}");
}

// ---------------------------------------------------------------------------------------------
// A snapshot of one parsed file.

#[test]
fn parsed_claude_code_file_snapshot() {
    let config = parse(
        ".mcp.json",
        include_str!("../../fixtures/host/claude_code.mcp.json"),
        &vars(&[("TRACKER_TOKEN", "tt"), ("HOME", "/home/ada")]),
    );
    insta::assert_debug_snapshot!(config);
}

// ---------------------------------------------------------------------------------------------
// Properties.

proptest! {
    #[test]
    fn interpolation_never_panics(text in ".{0,64}", value in "[a-z${}:-]{0,8}") {
        let v = vars(&[("A", &value), ("B", "")]).with_workspace_folder("/w");
        let _ = interpolate(&text, &v);
        let _ = interpolate(&format!("${{A}}{text}${{B:-{text}}}"), &v);
    }

    #[test]
    fn interpolation_is_identity_without_a_dollar(text in "[^$]{0,64}") {
        let out = interpolate(&text, &Vars::none()).unwrap();
        prop_assert_eq!(out.as_ref(), text.as_str());
    }

    #[test]
    fn interpolation_is_identity_without_a_dollar_brace(text in "([^$]|\\$[^{$])*") {
        let out = interpolate(&text, &Vars::none()).unwrap();
        prop_assert_eq!(out.as_ref(), text.as_str());
    }

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let config = parse_bytes("f", &bytes, &Vars::none());
        let lines = bytes.iter().filter(|&&b| b == b'\n' || b == b'\r').count() + 1;
        for e in &config.errors {
            prop_assert!(e.position.line >= 1 && e.position.line <= lines);
            prop_assert!(e.position.column >= 1);
        }
    }

    #[test]
    fn parse_never_panics_on_config_shaped_text(
        parts in proptest::collection::vec(prop_oneof![
            Just("{"), Just("}"), Just("["), Just("]"), Just(","), Just(":"),
            Just("\"mcpServers\""), Just("\"servers\""), Just("\"command\""), Just("\"args\""),
            Just("\"env\""), Just("\"url\""), Just("\"headers\""), Just("\"type\""), Just("\"sse\""),
            Just("\"oauth\""), Just("\"callbackPort\""), Just("\"scopes\""), Just("\"trust\""),
            Just("\"permissions\""), Just("\"allow\""), Just("\"inputs\""), Just("\"id\""),
            Just("\"projects\""), Just("\"/p\""), Just("\"${A}\""), Just("\"${B:-x}\""),
            Just("\"${input:i}\""), Just("\"https://a.example\""), Just("\"x\""), Just("5"),
            Just("null"), Just("true"), Just("// c\n"), Just("/* c */"), Just("\n"),
        ], 0..64),
    ) {
        let source: String = parts.concat();
        let v = vars(&[("A", "a")]).with_workspace_folder("/p");
        let config = parse("f", &source, &v);
        for e in &config.errors {
            prop_assert!(e.to_string().starts_with("f:"));
        }
    }
}

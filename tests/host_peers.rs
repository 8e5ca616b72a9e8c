//! `mcpwire host` end to end against three real third-party servers at once, in one session:
//!
//! - `python`: the Python MCP SDK (PyPI `mcp==2.3.0`, `tests/peers/py_mcp_server.py`) over
//!   Streamable HTTP on 127.0.0.1 (a free port; the test starts and stops it);
//! - `typescript`: the TypeScript SDK v2 server (npm `@modelcontextprotocol/server@2.4.0`,
//!   `tests/peers/node/ts_peer.mjs`) as a stdio child of the host (2026-07-28);
//! - `everything`: npm `@modelcontextprotocol/server-everything@2026.8.31` as a stdio child,
//!   with `tests/peers/node/everything_spy.mjs` preloaded (it adds the `spy-stats` tool: what
//!   the server received). It speaks only the legacy era, 2025-11-25.
//!
//! All three define a tool named `echo`. The config is a `mcpServers` file (Claude Desktop's
//! layout) written into a temporary directory, with the host's state directory, `HOME` and the
//! XDG directories there too, so nothing touches the user's files.
//!
//! The interactive part is one `mcpwire host --config F shell` on a real pseudo-terminal
//! (rexpect): both commands' consent prompts, `servers`, `search echo`, calls through the
//! exposed names with their consent prompts, a refused call that the server's own record shows
//! never arrived, and one server's result carried into another server's call (the prompt names
//! both). Around it, the same host run off a terminal: `--json servers`, `--json search`,
//! `--json call` with `--yes`, and a call without `--yes` (exit 3, naming `--yes`); `--yes` alone
//! starts no local command, `--approve-commands` does for its run.
//!
//! Every wait is bounded ([`WAIT`] per expected output, [`RUN_TIMEOUT`] per command) and the
//! whole test must finish within [`BUDGET`]. The Python server and every process a host run
//! started (its process group) are killed when the test ends, failed or not.
//!
//! The peers come from `scripts/test` (`.venv-peers` with `mcp==2.3.0`, `npm ci` in
//! `tests/peers/node`); without them the test fails and says so.
//!
//! `MCPWIRE_HOST_E2E_SHOW=1 cargo test -p mcpwire-cli --test host_peers -- --nocapture` prints
//! what the host showed: the session's transcript and every run off the terminal.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/node_peers.rs"]
mod node_peers;
mod support;

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rexpect::reader::Options;
use rexpect::session::{spawn_with_options, PtySession};
use serde_json::{json, Value};

/// The pinned Python SDK (scripts/test's `PY_MCP_VERSION`).
const PY_MCP_VERSION: &str = "2.3.0";
/// The variable naming the Python interpreter that has it.
const PYTHON_ENV: &str = "MCPWIRE_PY_PEER_PYTHON";
/// The pinned npm packages (tests/peers/node/package-lock.json).
const TS_SERVER_VERSION: &str = "2.4.0";
const TS_NODE_ADAPTER_VERSION: &str = "2.1.2";
const EVERYTHING_VERSION: &str = "2026.8.31";

/// The eras the servers speak.
const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";

/// The servers' ids in the config (distinct words, so a line naming two of them is easy to
/// tell from one naming one).
const PY: &str = "python";
const TS: &str = "typescript";
const EVERYTHING: &str = "everything";

/// The longest wait for one expected output on the terminal (a hang guard, not a timing
/// assertion).
const WAIT: Duration = Duration::from_secs(20);
/// The longest one host run off the terminal may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a host that has ended may leave its servers running.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The whole test.
const BUDGET: Duration = Duration::from_secs(60);

/// What `scripts/test` sets up, for the failure messages.
const SETUP: &str =
    "the host end-to-end test needs the pinned peers. From the repository root run\n    \
     scripts/test\n\
     (it creates .venv-peers with mcp==2.3.0 and runs `npm ci` in tests/peers/node)";

#[test]
fn one_host_session_with_three_real_servers_searches_calls_and_asks() {
    let started = Instant::now();
    let budget = |step: &str| {
        assert!(
            started.elapsed() < BUDGET,
            "the test went over its {BUDGET:?} budget ({:?}) at: {step}",
            started.elapsed()
        );
    };
    let fx = Fixture::new();
    let py = PyHttpPeer::start(&fx.dir);
    fx.write_config(&py.url);
    budget("the Python server listens");

    // ------------------------------------------------------------------------------------
    // Off a terminal, --yes does not start a local command; --approve-commands does, for its
    // run only.
    let ran = fx.run(&["--json", "--yes", "servers"]);
    ran.ok("--json --yes servers");
    let states: Vec<(String, String)> = ran.json()["servers"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    (
                        s["id"].as_str().unwrap_or("").to_owned(),
                        s["state"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(
        states
            .iter()
            .any(|(id, st)| id == TS && st == "not approved"),
        "--yes alone started a local command: {states:?}"
    );
    let ran = fx.run(&["--json", "--approve-commands", "servers"]);
    ran.ok("--json --approve-commands servers");
    let servers = ran.json();
    check_servers_json(&servers);
    let ran = fx.run(&["--json", "--approve-commands", "search", "echo"]);
    ran.ok("--json --approve-commands search echo");
    let names = echo_names(&ran.json());
    assert_eq!(
        fx.approved_count(),
        0,
        "--approve-commands approves commands for its run only, yet {} holds them:\n{}",
        fx.approvals_file().display(),
        fx.approvals_text()
    );
    budget("the runs off a terminal");

    // ------------------------------------------------------------------------------------
    // The session on a terminal.
    shell_session(&fx, &names);
    budget("the shell session");

    // ------------------------------------------------------------------------------------
    // After the session: the approved commands are remembered in the state directory.
    // Kept as fingerprints: the file names the program, never the arguments.
    let approvals = fx.approvals_text();
    assert_eq!(
        fx.approved_count(),
        2,
        "both commands are remembered in {}:\n{approvals}",
        fx.approvals_file().display()
    );
    for word in [&fx.ts_script, &fx.everything_entry] {
        assert!(
            !approvals.contains(word.as_str()),
            "the approvals file holds the argument {word}:\n{approvals}"
        );
    }
    // ... so a run without --approve-commands starts both.
    let ran = fx.run(&["--json", "servers"]);
    ran.ok("--json servers, the commands approved in the shell");
    check_servers_json(&ran.json());

    // A call off a terminal with --yes goes through and prints the CallToolResult.
    let text = "sent off a terminal with --yes 5150";
    let args = json!({ "text": text }).to_string();
    let ran = fx.run(&["--json", "--yes", "call", &names.py, "--args", &args]);
    ran.ok("--json --yes call");
    let result = ran.json();
    assert_eq!(result["content"][0]["type"], "text", "{result}");
    assert_eq!(result["content"][0]["text"], text, "{result}");

    // Without --yes, off a terminal, an ask is refused: exit 3, naming --yes, no result.
    let ran = fx.run(&["call", &names.ts, "--args", &args]);
    assert_eq!(
        ran.code,
        Some(3),
        "call without --yes off a terminal:\n{}",
        ran.show()
    );
    assert!(
        ran.stderr.contains("--yes"),
        "the refusal names --yes:\n{}",
        ran.show()
    );
    assert!(
        !ran.stdout.contains(text),
        "no call was made, yet:\n{}",
        ran.show()
    );
    budget("the runs after the session");
    eprintln!("host_peers: the whole test took {:?}", started.elapsed());
}

/// The exposed names of the three `echo` tools.
struct EchoNames {
    py: String,
    ts: String,
    everything: String,
}

/// `--json search echo`: every server's `echo`, under distinct names `<server>__echo`.
fn echo_names(found: &Value) -> EchoNames {
    let results = found["results"]
        .as_array()
        .unwrap_or_else(|| panic!("search --json has no results array: {found}"));
    let name_of = |server: &str| -> String {
        let hit = results
            .iter()
            .find(|r| r["server"] == server && r["tool"] == "echo")
            .unwrap_or_else(|| panic!("no echo of {server} in {found}"));
        let name = hit["name"].as_str().unwrap().to_owned();
        assert_eq!(name, format!("{server}__echo"), "{hit}");
        assert!(hit["score"].is_number(), "{hit}");
        name
    };
    let names = EchoNames {
        py: name_of(PY),
        ts: name_of(TS),
        everything: name_of(EVERYTHING),
    };
    for r in results {
        let name = r["name"].as_str().unwrap_or_default();
        assert!(
            !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{name:?} breaks the providers' rule ^[a-zA-Z0-9_-]{{1,64}}$"
        );
    }
    names
}

/// `--json servers`: all three ready, in their eras and transports.
fn check_servers_json(found: &Value) {
    let list = found["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("servers --json has no servers array: {found}"));
    assert_eq!(list.len(), 3, "{found}");
    for (id, era, transport) in [
        (PY, MODERN, "http"),
        (TS, MODERN, "stdio"),
        (EVERYTHING, LEGACY, "stdio"),
    ] {
        let s = list
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no server {id} in {found}"));
        assert_eq!(s["state"], "ready", "{s}");
        assert!(s["era"].as_str().is_some_and(|e| e.contains(era)), "{s}");
        assert!(
            s["transport"]
                .as_str()
                .is_some_and(|t| t.contains(transport)),
            "{s}"
        );
        assert!(s["tools"].as_u64().is_some_and(|n| n >= 1), "{s}");
        assert!(s.get("trust").is_some(), "{s}");
        assert!(s["error"].is_null(), "{s}");
    }
}

// ---------------------------------------------------------------------------------------------
// The session on a terminal

/// The consent question of a call (with "always" offered or not).
const ALLOW: &str = r"Allow this call\? \[y\]es once, (\[a\]lways, )?\[n\]o: ";
/// The shell's prompt.
const PROMPT: &str = "mcpwire host> ";
/// The command-consent question.
const RUN_IT: &str = "Run this command? [y/N] ";

fn shell_session(fx: &Fixture, names: &EchoNames) {
    let mut sh = Shell::start(fx);

    // Both stdio servers' commands, shown whole, each approved once (in whichever order the
    // host asks).
    let mut asked = Vec::new();
    for _ in 0..2 {
        let shown = sh.expect(RUN_IT, "a command-consent prompt");
        let which = if contains_command(&shown, &fx.ts_command) {
            TS
        } else if contains_command(&shown, &fx.everything_command) {
            EVERYTHING
        } else {
            panic!(
                "a command prompt without either full command line\n{}\nor\n{}\n--- shown:\n{shown}",
                shell_line(&fx.ts_command),
                shell_line(&fx.everything_command)
            )
        };
        assert!(shown.contains(which), "the prompt names {which}:\n{shown}");
        assert!(!asked.contains(&which), "{which} asked twice:\n{shown}");
        asked.push(which);
        sh.send("y");
    }

    // servers: each ready, with its era.
    sh.expect(PROMPT, "the first shell prompt");
    let out = sh.command("servers");
    for (id, era, transport) in [
        (PY, MODERN, "http"),
        (TS, MODERN, "stdio"),
        (EVERYTHING, LEGACY, "stdio"),
    ] {
        let line = line_starting(&out, id).unwrap_or_else(|| panic!("no line for {id}:\n{out}"));
        for word in ["ready", era, transport] {
            assert!(line.contains(word), "{id}: {word} in {line:?}\n{out}");
        }
    }

    // search echo: each server's echo under its own exposed name.
    let out = sh.command("search echo");
    for (name, id) in [
        (&names.py, PY),
        (&names.ts, TS),
        (&names.everything, EVERYTHING),
    ] {
        let line = line_starting(&out, name).unwrap_or_else(|| panic!("no hit {name}:\n{out}"));
        assert!(line.contains(id), "{name}'s server {id} in {line:?}");
    }

    // The Python server's echo: the consent prompt holds the full arguments (a long text,
    // uncut); approved, the Python server answers.
    let py_text = long_text("quartz lantern", 24);
    let args = json!({ "text": py_text }).to_string();
    let (shown, answer) = sh.call(&names.py, &args, "y");
    check_call_prompt(&shown, PY, "echo", "text", &py_text);
    assert!(
        answer.contains(&py_text),
        "the Python server's answer:\n{answer}"
    );

    // The TypeScript server's echo, under its own name.
    let ts_text = "amber harbor signal 9932";
    let (shown, answer) = sh.call(&names.ts, &json!({ "text": ts_text }).to_string(), "y");
    check_call_prompt(&shown, TS, "echo", "text", ts_text);
    assert!(
        line_naming_both(&shown, PY, TS).is_none(),
        "nothing of python's reached this call, yet:\n{shown}"
    );
    assert!(answer.contains(ts_text), "the TypeScript answer:\n{answer}");

    // The TypeScript server's own record: two calls reached it (that echo and this stats
    // call), so the Python one went elsewhere.
    let (_, answer) = sh.call(&format!("{TS}__stats"), "{}", "y");
    assert_eq!(
        count_of(&answer, "tools/call"),
        Some(2),
        "the TypeScript server saw its echo and this call only:\n{answer}"
    );

    // A refused call: `call refused`, and server-everything never receives it (its spy counts
    // every request it gets: only the spy-stats call itself).
    let (shown, answer) = sh.call(
        &names.everything,
        &json!({ "message": "this one is refused" }).to_string(),
        "n",
    );
    check_call_prompt(&shown, EVERYTHING, "echo", "message", "this one is refused");
    assert!(answer.contains("call refused"), "{answer}");
    let (_, answer) = sh.call(&format!("{EVERYTHING}__spy-stats"), "{}", "y");
    assert_eq!(
        count_of(&answer, "tools/call"),
        Some(1),
        "server-everything received a call it was refused:\n{answer}"
    );
    // Its tools were listed once, at connect: the catalog is the host's memo of the
    // definitions (server-everything's answers carry no TTL, and it announced no change).
    assert_eq!(
        count_of(&answer, "tools/list"),
        Some(1),
        "server-everything's tools were listed again without a list_changed:\n{answer}"
    );

    // Across servers: the Python server's result carried into a call of the TypeScript
    // server's echo. The prompt names both servers.
    let (shown, answer) = sh.call(&names.ts, &json!({ "text": py_text }).to_string(), "y");
    check_call_prompt(&shown, TS, "echo", "text", &py_text);
    assert!(
        line_naming_both(&shown, PY, TS).is_some(),
        "the prompt names the server the text came from and the one it goes to:\n{shown}"
    );
    assert!(
        answer.contains(&py_text),
        "the TypeScript answer:\n{answer}"
    );

    sh.quit();
}

/// A `mcpwire host ... shell` on a pseudo-terminal. Its process group (the host and the
/// servers it started) is killed when it is dropped.
struct Shell {
    p: PtySession,
    group: Group,
    log: String,
}

impl Shell {
    fn start(fx: &Fixture) -> Shell {
        // `sh` says its pid, then becomes the host (same pid): the pty's session and process
        // group are that pid.
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(r#"echo "pid $$"; exec "$0" "$@""#)
            .arg(env!("CARGO_BIN_EXE_mcpwire"))
            .args(fx.host_args(&["shell"]));
        fx.environment(&mut cmd);
        let options = Options::new()
            .timeout_ms(Some(WAIT.as_millis() as u64))
            .strip_ansi_escape_codes(true);
        let mut p = spawn_with_options(cmd, options).unwrap();
        let (_, line) = p.exp_regex(r"pid \d+\r?\n").unwrap();
        let pid: u32 = line.trim().trim_start_matches("pid ").parse().unwrap();
        Shell {
            p,
            group: Group(pid),
            log: String::new(),
        }
    }

    /// The output up to `needle` (not included), with the terminal's `\r\n` as `\n`.
    fn expect(&mut self, needle: &str, what: &str) -> String {
        match self.p.exp_string(needle) {
            Ok(s) => self.seen(s, needle),
            Err(e) => panic!(
                "waiting for {what} ({needle:?}): {e}\n--- the session so far:\n{}",
                self.log
            ),
        }
    }

    fn expect_regex(&mut self, regex: &str, what: &str) -> String {
        match self.p.exp_regex(regex) {
            Ok((s, m)) => self.seen(s, &m),
            Err(e) => panic!(
                "waiting for {what} ({regex:?}): {e}\n--- the session so far:\n{}",
                self.log
            ),
        }
    }

    fn seen(&mut self, before: String, matched: &str) -> String {
        let before = before.replace("\r\n", "\n");
        self.log.push_str(&before);
        self.log.push_str(matched);
        before
    }

    fn send(&mut self, line: &str) {
        self.log.push_str(line);
        self.log.push('\n');
        self.p.send_line(line).unwrap();
    }

    /// Runs one shell command; its output up to the next prompt.
    fn command(&mut self, line: &str) -> String {
        self.send(line);
        self.expect(PROMPT, line)
    }

    /// `call NAME JSON`, answering the consent prompt with `answer`: the prompt as shown,
    /// and the output after the answer up to the next shell prompt.
    fn call(&mut self, name: &str, args: &str, answer: &str) -> (String, String) {
        let line = format!("call {name} {args}");
        self.send(&line);
        let shown = self.expect_regex(ALLOW, &format!("the consent prompt of {line}"));
        self.send(answer);
        let out = self.expect(PROMPT, &format!("the end of {line}"));
        (shown, out)
    }

    /// `quit`: the host ends with status 0 and its servers with it.
    fn quit(mut self) {
        self.send("quit");
        if let Err(e) = self.p.exp_eof() {
            panic!("the host did not end after quit: {e}\n{}", self.log);
        }
        let status = self.p.process().wait().unwrap();
        assert!(
            matches!(status, rexpect::process::WaitStatus::Exited(_, 0)),
            "the host ended with {status:?}\n{}",
            self.log
        );
        self.group.wait_empty("the shell session");
        if show_transcripts() {
            eprintln!("--- the session:\n{}", self.log);
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        self.group.kill();
    }
}

/// Whether to print what the host showed (`MCPWIRE_HOST_E2E_SHOW=1`, with `--nocapture`).
fn show_transcripts() -> bool {
    std::env::var_os("MCPWIRE_HOST_E2E_SHOW").is_some()
}

/// Checks a call's consent prompt: the server, the tool, the full argument.
fn check_call_prompt(shown: &str, server: &str, tool: &str, key: &str, value: &str) {
    assert!(shown.contains(server), "the server {server}:\n{shown}");
    assert!(shown.contains(tool), "the tool {tool}:\n{shown}");
    assert!(
        shown.contains(&format!("\"{key}\"")) && shown.contains(&format!("\"{value}\"")),
        "the full arguments ({key}: {value:?}):\n{shown}"
    );
}

/// A text of `n` numbered words after `lead`, long enough to be cut by a careless prompt.
fn long_text(lead: &str, n: usize) -> String {
    let mut t = lead.to_owned();
    for i in 0..n {
        t.push_str(&format!(" w{i:02}-{}", (i * 7919) % 1000));
    }
    t
}

/// The first line whose first word is `word`.
fn line_starting<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(word))
}

/// A line that names both servers (as whole words).
fn line_naming_both<'a>(text: &'a str, a: &str, b: &str) -> Option<&'a str> {
    let has = |l: &str, w: &str| {
        l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .any(|t| t == w)
    };
    text.lines().find(|l| has(l, a) && has(l, b))
}

/// The number after `"key":` in a JSON text (raw or inside a JSON string).
fn count_of(text: &str, key: &str) -> Option<u64> {
    for quote in ["\"", "\\\""] {
        let needle = format!("{quote}{key}{quote}:");
        if let Some(at) = text.find(&needle) {
            let rest = text[at + needle.len()..].trim_start();
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            return digits.parse().ok();
        }
    }
    None
}

/// A command line as a POSIX shell would read it back (words with only `A-Za-z0-9@%+=:,./_-`
/// bare, others in single quotes).
fn shell_line(words: &[String]) -> String {
    let quote = |w: &String| {
        if !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c))
        {
            w.clone()
        } else {
            format!("'{}'", w.replace('\'', r"'\''"))
        }
    };
    words.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// Whether `shown` holds the whole command line.
fn contains_command(shown: &str, words: &[String]) -> bool {
    shown.contains(&shell_line(words))
}

// ---------------------------------------------------------------------------------------------
// The host off a terminal

/// One finished host run.
struct Ran {
    args: Vec<String>,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn show(&self) -> String {
        format!(
            "mcpwire host {}\nexit: {:?}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.args.join(" "),
            self.code,
            self.stdout,
            self.stderr
        )
    }

    fn ok(&self, what: &str) {
        assert_eq!(self.code, Some(0), "{what}:\n{}", self.show());
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", self.show()))
    }
}

// ---------------------------------------------------------------------------------------------
// The fixture: the temporary directory, the config, the peers' command lines

struct Fixture {
    dir: PathBuf,
    config: PathBuf,
    state: PathBuf,
    /// `node ts_peer.mjs stdio`, absolute.
    ts_command: Vec<String>,
    ts_script: String,
    /// `node --import everything_spy.mjs .../dist/index.js stdio`, absolute.
    everything_command: Vec<String>,
    everything_entry: String,
}

impl Fixture {
    fn new() -> Fixture {
        // The peers first: a missing one fails here, saying how to install it.
        require_npm("@modelcontextprotocol/server", TS_SERVER_VERSION);
        require_npm("@modelcontextprotocol/node", TS_NODE_ADAPTER_VERSION);
        let everything = require_npm(
            "@modelcontextprotocol/server-everything",
            EVERYTHING_VERSION,
        );
        let node = absolute_program(&node_peers::node());
        let ts_script = node_peers::file("ts_peer.mjs");
        let everything_entry = everything.join("dist/index.js").display().to_string();
        assert!(
            Path::new(&everything_entry).exists(),
            "{everything_entry} is missing\n{SETUP}"
        );
        let spy = format!("file://{}", node_peers::file("everything_spy.mjs"));

        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!(
            "mcpwire-host-e2e-{}-{nanos:08x}",
            std::process::id()
        ));
        for sub in ["home", "config", "data", "state", "cache", "host-state"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        Fixture {
            config: dir.join("mcp.json"),
            state: dir.join("host-state"),
            ts_command: vec![node.clone(), ts_script.clone(), "stdio".to_owned()],
            ts_script,
            everything_command: vec![
                node,
                "--import".to_owned(),
                spy,
                everything_entry.clone(),
                "stdio".to_owned(),
            ],
            everything_entry,
            dir,
        }
    }

    /// The `mcpServers` file: the Python server over HTTP, the other two as commands.
    fn write_config(&self, py_url: &str) {
        let stdio = |words: &[String]| json!({ "command": words[0], "args": &words[1..] });
        let config = json!({
            "mcpServers": {
                PY: { "type": "http", "url": py_url },
                TS: stdio(&self.ts_command),
                EVERYTHING: stdio(&self.everything_command),
            }
        });
        std::fs::write(&self.config, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    }

    fn approvals_file(&self) -> PathBuf {
        self.state.join("command-approvals.json")
    }

    fn approvals_text(&self) -> String {
        std::fs::read_to_string(self.approvals_file()).unwrap_or_default()
    }

    /// How many command lines the approvals file holds (0 when there is none).
    fn approved_count(&self) -> usize {
        serde_json::from_str::<Value>(&self.approvals_text())
            .ok()
            .and_then(|v| v["approved"].as_array().map(Vec::len))
            .unwrap_or(0)
    }

    /// `host --config F --state-dir S --connect-timeout 15s ARGS`.
    fn host_args(&self, args: &[&str]) -> Vec<String> {
        let mut all: Vec<String> = vec![
            "host".into(),
            "--config".into(),
            self.config.display().to_string(),
            "--state-dir".into(),
            self.state.display().to_string(),
            "--connect-timeout".into(),
            "15s".into(),
        ];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        all
    }

    /// HOME and the XDG directories in the temporary directory; no terminal width.
    fn environment(&self, cmd: &mut Command) {
        cmd.env("HOME", self.dir.join("home"))
            .env("XDG_CONFIG_HOME", self.dir.join("config"))
            .env("XDG_DATA_HOME", self.dir.join("data"))
            .env("XDG_STATE_HOME", self.dir.join("state"))
            .env("XDG_CACHE_HOME", self.dir.join("cache"))
            .env("APPDATA", self.dir.join("config"))
            .env_remove("COLUMNS")
            .current_dir(&self.dir);
    }

    /// `mcpwire host ... ARGS` with stdin not a terminal (empty), bounded by [`RUN_TIMEOUT`];
    /// its process group is killed at the end.
    fn run(&self, args: &[&str]) -> Ran {
        let all = self.host_args(args);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpwire"));
        cmd.args(&all)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        self.environment(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let group = Group(child.id());
        let drain = |mut r: Box<dyn Read + Send>| {
            thread::spawn(move || {
                let mut s = String::new();
                let _ = r.read_to_string(&mut s);
                s
            })
        };
        let out = drain(Box::new(child.stdout.take().unwrap()));
        let err = drain(Box::new(child.stderr.take().unwrap()));
        let deadline = Instant::now() + RUN_TIMEOUT;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > deadline {
                break None;
            }
            thread::sleep(Duration::from_millis(20));
        };
        let Some(status) = status else {
            group.kill();
            let _ = child.wait();
            panic!(
                "mcpwire host {} did not end within {RUN_TIMEOUT:?}\n--- stdout:\n{}\n--- stderr:\n{}",
                all.join(" "),
                out.join().unwrap(),
                err.join().unwrap()
            );
        };
        let left = group.wait_empty_soft();
        group.kill();
        let ran = Ran {
            args: all[1..].to_vec(),
            code: status.code(),
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        };
        assert!(
            left.is_empty(),
            "the host left processes {left:?} running {STOP_GRACE:?} after it ended:\n{}",
            ran.show()
        );
        if show_transcripts() {
            eprintln!("--- off a terminal:\n{}", ran.show());
        }
        ran
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("host_peers: kept {} for a look", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `package` installed at exactly `version` (node_peers checks it, and that Node is 20 or
/// newer); a missing install fails naming scripts/test.
fn require_npm(package: &str, version: &str) -> PathBuf {
    let manifest = node_peers::node_dir()
        .join("node_modules")
        .join(package)
        .join("package.json");
    let found: Value = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| {
            panic!(
                "{package} is not installed ({})\n{SETUP}",
                manifest.display()
            )
        });
    assert_eq!(
        found["version"], version,
        "{package} is installed at {}, not the pinned {version}\n{SETUP}",
        found["version"]
    );
    node_peers::require(package, version)
}

/// `program` as an absolute path (looked up on `PATH` when it has no `/`).
fn absolute_program(program: &str) -> String {
    if program.contains('/') {
        return std::fs::canonicalize(program)
            .unwrap_or_else(|e| panic!("{program}: {e}\n{SETUP}"))
            .display()
            .to_string();
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH\n{SETUP}"))
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Processes

/// A process group this test started (a host run, or a pty session whose leader is the host):
/// killed, all of it, on drop.
struct Group(u32);

impl Group {
    fn kill(&self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// The group's live processes (zombies left out), from Linux's `/proc` (elsewhere none
    /// are found, and only the kill on drop remains).
    fn members(&self) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.len() > 2 && fields[0] != "Z" && fields[2] == self.0.to_string() {
                found.push(pid);
            }
        }
        found
    }

    /// Waits (at most [`STOP_GRACE`]) for the group to empty; what is still running.
    fn wait_empty_soft(&self) -> Vec<u32> {
        let until = Instant::now() + STOP_GRACE;
        loop {
            let left = self.members();
            if left.is_empty() || Instant::now() > until {
                return left;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_empty(&self, what: &str) {
        let left = self.wait_empty_soft();
        assert!(
            left.is_empty(),
            "{what}: the host left processes {left:?} running {STOP_GRACE:?} after it ended"
        );
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The Python server on Streamable HTTP at 127.0.0.1 on a free port; killed on drop.
struct PyHttpPeer {
    child: Child,
    url: String,
}

impl PyHttpPeer {
    fn start(dir: &Path) -> PyHttpPeer {
        let setup = format!(
            "the Python MCP SDK peer is not set up ({PYTHON_ENV}, else .venv-peers/bin/python, \
             with mcp=={PY_MCP_VERSION})\n{SETUP}"
        );
        let python = support::pinned_python(PYTHON_ENV, "mcp", PY_MCP_VERSION, &setup);
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join("python-server.log")).unwrap();
        let child = Command::new(python)
            .args([
                support::peer_script("py_mcp_server.py"),
                "http".to_owned(),
                port.to_string(),
            ])
            .env("HOME", dir.join("home"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        let mut peer = PyHttpPeer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        let until = Instant::now() + RUN_TIMEOUT;
        loop {
            if let Ok(Some(status)) = peer.child.try_wait() {
                panic!(
                    "the Python server exited ({status}): {}",
                    std::fs::read_to_string(dir.join("python-server.log")).unwrap_or_default()
                );
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return peer;
            }
            assert!(
                Instant::now() < until,
                "the Python server did not listen on 127.0.0.1:{port} within {RUN_TIMEOUT:?}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PyHttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

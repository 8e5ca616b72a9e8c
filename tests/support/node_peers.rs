//! The npm peers of `mcp_peers_ts.rs` and `mcp_peers_everything.rs`: the packages pinned by
//! `tests/peers/node/package.json` + `package-lock.json`, installed into
//! `tests/peers/node/node_modules` by `npm ci` (`.ci/run` does it), run with `node` from `PATH`
//! (or the program named by `MCPWIRE_NODE`).
//!
//! Without the install the tests fail and say how to set it up.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The variable naming the `node` program (default: `node` from `PATH`).
pub const NODE_ENV: &str = "MCPWIRE_NODE";

/// The directory with `package.json`, `package-lock.json` and the peer scripts.
pub fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/peers/node")
}

/// The `node` program.
pub fn node() -> String {
    std::env::var(NODE_ENV).unwrap_or_else(|_| "node".to_owned())
}

fn setup() -> String {
    format!(
        "the npm MCP peers are not set up. From the repository root run\n    \
         (cd tests/peers/node && npm ci --ignore-scripts)\n\
         (Node 20 or newer; set {NODE_ENV} to another node program if needed); .ci/run does this itself"
    )
}

/// Checks that `package` is installed at exactly `version` (the lock file's pin) and that
/// `node` runs; fails with the setup command otherwise. Returns the package's directory.
pub fn require(package: &str, version: &str) -> PathBuf {
    let dir = node_dir().join("node_modules").join(package);
    let manifest = dir.join("package.json");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        panic!(
            "{package} is missing ({}: {e})\n{}",
            manifest.display(),
            setup()
        )
    });
    let found: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", manifest.display(), setup()));
    assert_eq!(
        found["version"],
        version,
        "{package} is installed at {}, not the pinned {version}\n{}",
        found["version"],
        setup()
    );
    let out = Command::new(node())
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}\n{}", node(), setup()));
    assert!(
        out.status.success(),
        "{} --version failed\n{}",
        node(),
        setup()
    );
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    assert!(
        major >= 20,
        "{} is Node {version}; the npm MCP peers need Node 20 or newer\n{}",
        node(),
        setup()
    );
    dir
}

/// `node ARGS` run from [`node_dir`] (ESM resolves packages relative to the script).
pub fn command(args: &[String]) -> Command {
    let mut c = Command::new(node());
    c.current_dir(node_dir()).args(args);
    c
}

/// The path of a file in [`node_dir`], as a string argument.
pub fn file(name: &str) -> String {
    node_dir().join(name).display().to_string()
}

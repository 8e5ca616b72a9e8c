//! Managed `cloudflared` under `mcpwire tunnel run`, with a stand-in `cloudflared` shell script
//! (written by each test into its own temp dir) that records its argv, environment and pid,
//! prints its token (which the client must redact), and records SIGTERM. Its readiness endpoint
//! is served by the test on the `--metrics` address the client gave it. The fake control plane
//! (`support/`) serves the runtime endpoint. Everything is on 127.0.0.1. Each test runs once
//! per driver (`blocking`, then `smol`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use serde_json::json;
use support::*;

const FETCHED: &str = "cf-runtime-token-FETCHED-7f3a9c";
const STATIC: &str = "cf-static-token-STATIC-51be02";

const SCRIPT: &str = r#"#!/bin/sh
dir=$(dirname "$0")
trap 'echo term > "$dir/terminated"; exit 0' TERM
for a in "$@"; do printf '%s\n' "$a"; done > "$dir/argv"
env > "$dir/env"
echo $$ > "$dir/pid"
echo "stand-in cloudflared starting with token $TUNNEL_TOKEN"
echo "stderr: token=$TUNNEL_TOKEN" >&2
while :; do sleep 1 & wait $!; done
"#;

/// A temp dir holding the stand-in `cloudflared`.
struct Fake {
    dir: PathBuf,
}

impl Fake {
    fn new(name: &str) -> Fake {
        let dir = std::env::temp_dir().join(format!("mcpwire-cf-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Written by `cp` so no writable descriptor of the executable lives in this (threaded,
        // forking) test process: spawning it can then never fail with "text file busy".
        let src = dir.join("script.txt");
        std::fs::write(&src, SCRIPT).unwrap();
        let status = Command::new("cp")
            .arg(&src)
            .arg(dir.join("cloudflared"))
            .status()
            .unwrap();
        assert!(status.success());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.join("cloudflared"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        Fake { dir }
    }

    fn path(&self) -> String {
        self.dir.join("cloudflared").display().to_string()
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(name)).ok()
    }

    fn argv(&self) -> Vec<String> {
        wait_for("the stand-in's argv", || {
            let text = self.read("argv")?;
            // Written before env: once env exists, argv is complete.
            self.read("env")?;
            Some(text.lines().map(str::to_owned).collect())
        })
    }

    fn env(&self) -> String {
        wait_for("the stand-in's environment", || {
            self.read("pid").and(self.read("env"))
        })
    }

    /// Serves `/ready` on the stand-in's `--metrics` address with the status in `ready`.
    fn serve_ready(&self, ready: Arc<AtomicU16>) -> Arc<AtomicUsize> {
        let argv = self.argv();
        let at = argv.iter().position(|a| a == "--metrics").unwrap();
        let addr = argv[at + 1].clone();
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
        let listener = TcpListener::bind(&addr).unwrap();
        let probes = Arc::new(AtomicUsize::new(0));
        let p = Arc::clone(&probes);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf);
                p.fetch_add(1, Ordering::SeqCst);
                let status = ready.load(Ordering::SeqCst);
                let n = u8::from(status == 200);
                let body =
                    format!(r#"{{"status":{status},"readyConnections":{n},"connectorId":"c"}}"#);
                let _ = conn.write_all(
                    format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            }
        });
        probes
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        // Leave no stand-in running, then remove the dir.
        if let Some(pid) = self.read("pid") {
            if self.read("terminated").is_none() {
                let _ = Command::new("kill")
                    .args(["-KILL", pid.trim()])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn runtime_ok(cp: &ControlPlane, token: &str) {
    cp.with(|s| {
        s.runtime = Some((
            200,
            json!({
                "cloudflare_tunnel": {"tunnel_id": "cf-1", "name": "managed-1", "account_id": "acct", "created_at": null},
                "runtime_token": token
            }),
        ))
    });
}

fn mcp_tunnel(cp: &ControlPlane, mcp: &McpServer, fake: &Fake, extra: &[&str]) -> Tunnel {
    let url = mcp.url();
    let path = fake.path();
    let mut args = vec!["--mcp.server-url", &url, "--cloudflared.path", &path];
    args.extend_from_slice(extra);
    Tunnel::start_listening(cp, &args)
}

fn readyz(t: &Tunnel) -> (u16, String) {
    t.get("/readyz")
}

#[test]
fn the_fetched_token_reaches_cloudflared_only_through_its_environment_and_never_the_logs() {
    each_driver(|| {
        let (cp, mcp, fake) = (
            ControlPlane::start(),
            McpServer::start(),
            Fake::new("fetched"),
        );
        runtime_ok(&cp, FETCHED);
        let t = mcp_tunnel(&cp, &mcp, &fake, &["--cloudflared.managed"]);
        let ready = Arc::new(AtomicU16::new(200));
        fake.serve_ready(ready);
        wait_for("/readyz to say ready", || {
            (readyz(&t).0 == 200).then_some(())
        });

        // One runtime fetch, authorized with the tunnel API key, with the common headers.
        let reqs = cp.with(|s| s.runtime_requests.clone());
        assert_eq!(reqs.len(), 1);
        assert_eq!(
            reqs[0].header("Authorization"),
            Some(format!("Bearer {API_KEY}").as_str())
        );
        assert_eq!(
            reqs[0].header("X-Tunnel-Client-Wire-Protocol-Version"),
            Some("2026-08-25")
        );

        // argv: no secret; the metrics/readiness listener on loopback.
        let argv = fake.argv();
        assert_eq!(argv[0], "tunnel");
        assert!(argv.contains(&"--no-autoupdate".to_owned()), "{argv:?}");
        assert_eq!(argv.last().map(String::as_str), Some("run"));
        assert!(
            argv.iter()
                .all(|a| !a.contains(FETCHED) && !a.contains(API_KEY)),
            "{argv:?}"
        );
        // env: the fetched token as TUNNEL_TOKEN, diagnostics off, no API key inherited.
        let env = fake.env();
        assert!(
            env.lines().any(|l| l == format!("TUNNEL_TOKEN={FETCHED}")),
            "{env}"
        );
        assert!(
            env.lines()
                .any(|l| l == "TUNNEL_MANAGEMENT_DIAGNOSTICS=false"),
            "{env}"
        );
        assert!(
            !env.contains(API_KEY),
            "the API key leaked into the child's environment"
        );

        // Exit: the child gets SIGTERM and the client exits 0.
        let (code, log) = t.terminate();
        assert_eq!(code, Some(0), "{log}");
        assert_eq!(fake.read("terminated").as_deref(), Some("term\n"), "{log}");
        assert!(log.contains("cloudflared stopped"), "{log}");
        // The stand-in printed its token on stdout and stderr: both lines are redacted.
        assert!(!log.contains(FETCHED), "the token reached the log:\n{log}");
        assert!(!log.contains(API_KEY), "{log}");
        assert!(
            log.lines()
                .filter(|l| l.contains("cloudflared output") && l.contains("[redacted]"))
                .count()
                >= 2,
            "{log}"
        );
    });
}

#[test]
fn a_static_token_takes_precedence_and_skips_the_runtime_fetch() {
    each_driver(|| {
        let (cp, mcp, fake) = (
            ControlPlane::start(),
            McpServer::start(),
            Fake::new("static"),
        );
        runtime_ok(&cp, FETCHED);
        let token_file = fake.dir.join("token");
        std::fs::write(&token_file, format!("{STATIC}\n")).unwrap();
        let token_arg = format!("file:{}", token_file.display());
        let t = mcp_tunnel(
            &cp,
            &mcp,
            &fake,
            &["--cloudflared.managed", "--cloudflared.token", &token_arg],
        );
        fake.serve_ready(Arc::new(AtomicU16::new(200)));
        wait_for("/readyz to say ready", || {
            (readyz(&t).0 == 200).then_some(())
        });
        assert!(
            cp.with(|s| s.runtime_requests.is_empty()),
            "the runtime endpoint was fetched despite a static token"
        );
        let env = fake.env();
        assert!(
            env.lines().any(|l| l == format!("TUNNEL_TOKEN={STATIC}")),
            "{env}"
        );
        assert!(fake.argv().iter().all(|a| !a.contains(STATIC)));
        let (code, log) = t.terminate();
        assert_eq!(code, Some(0), "{log}");
        assert!(!log.contains(STATIC), "{log}");
        assert!(
            log.contains("static (managed runtime fetch skipped)"),
            "{log}"
        );
    });
}

#[test]
fn a_busy_runtime_endpoint_is_retried_and_the_token_it_later_gives_is_used() {
    each_driver(|| {
        let (cp, mcp, fake) = (ControlPlane::start(), McpServer::start(), Fake::new("busy"));
        cp.with(|s| {
            s.runtime = Some((503, json!({"error": {"message": "later", "code": "busy"}})))
        });
        let t = mcp_tunnel(&cp, &mcp, &fake, &["--cloudflared.managed"]);
        wait_for("the first runtime fetch", || {
            cp.with(|s| (!s.runtime_requests.is_empty()).then_some(()))
        });
        runtime_ok(&cp, FETCHED);
        fake.serve_ready(Arc::new(AtomicU16::new(200)));
        wait_for("/readyz to say ready", || {
            (readyz(&t).0 == 200).then_some(())
        });
        assert!(cp.with(|s| s.runtime_requests.len()) >= 2);
        let env = fake.env();
        assert!(
            env.lines().any(|l| l == format!("TUNNEL_TOKEN={FETCHED}")),
            "{env}"
        );
        let (code, log) = t.terminate();
        assert_eq!(code, Some(0), "{log}");
        assert!(
            log.lines()
                .any(|l| l.contains("fetch failed; retrying") && l.contains("HTTP 503")),
            "{log}"
        );
        assert!(!log.contains(FETCHED), "{log}");
    });
}

#[test]
fn unauthorized_runtime_fetch_stops_start_up_with_a_clear_line_and_no_fallback() {
    each_driver(|| {
        let (cp, mcp, fake) = (
            ControlPlane::start(),
            McpServer::start(),
            Fake::new("unauth"),
        );
        cp.with(|s| {
            s.runtime = Some((
                401,
                json!({"error": {"message": "no", "code": "tunnel_use_forbidden"}}),
            ))
        });
        let t = mcp_tunnel(&cp, &mcp, &fake, &["--cloudflared.managed"]);
        let (code, log) = t.wait_exit();
        assert_eq!(code, Some(1), "{log}");
        let line = log
            .lines()
            .find(|l| l.contains("stopped on an error"))
            .unwrap_or_else(|| panic!("no error line in\n{log}"));
        assert!(
            line.contains("HTTP 401")
                && line.contains("tunnel_use_forbidden")
                && line.contains("no other credential"),
            "{line}"
        );
        // No retry, no other credential, no child, no polling.
        assert_eq!(cp.with(|s| s.runtime_requests.len()), 1);
        assert!(fake.read("argv").is_none(), "cloudflared was started");
        assert!(cp.with(|s| s.polls.is_empty()), "the client polled");
        assert!(!log.contains(API_KEY), "{log}");
    });
}

#[test]
fn readyz_waits_for_cloudflared_follows_it_and_its_death_stops_the_client() {
    each_driver(|| {
        let (cp, mcp, fake) = (
            ControlPlane::start(),
            McpServer::start(),
            Fake::new("readyz"),
        );
        runtime_ok(&cp, FETCHED);
        let t = mcp_tunnel(&cp, &mcp, &fake, &["--cloudflared.managed"]);
        let ready = Arc::new(AtomicU16::new(503));
        let probes = fake.serve_ready(Arc::clone(&ready));
        // cloudflared answers 503: not ready, and the client does not poll yet.
        wait_for("a readiness probe", || {
            (probes.load(Ordering::SeqCst) > 0).then_some(())
        });
        let (status, body) = readyz(&t);
        assert_eq!(status, 503);
        assert!(body.contains("cloudflared is starting"), "{body}");
        assert!(cp.with(|s| s.polls.is_empty()));
        // Ready: /readyz follows once polls succeed.
        ready.store(200, Ordering::SeqCst);
        wait_for("/readyz to say ready", || {
            (readyz(&t).0 == 200).then_some(())
        });
        // cloudflared loses its connections: not ready; back again: ready.
        ready.store(503, Ordering::SeqCst);
        let body = wait_for("/readyz to say not ready", || {
            let (s, b) = readyz(&t);
            (s == 503).then_some(b)
        });
        assert!(
            body.contains("cloudflared has no ready connection"),
            "{body}"
        );
        ready.store(200, Ordering::SeqCst);
        wait_for("/readyz to say ready again", || {
            (readyz(&t).0 == 200).then_some(())
        });
        // cloudflared dies: the client stops with an error (policy: stop, not restart).
        let pid = fake.read("pid").unwrap();
        Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .unwrap();
        let (code, log) = t.wait_exit();
        assert_eq!(code, Some(1), "{log}");
        assert!(log.contains("cloudflared exited unexpectedly"), "{log}");
        assert!(!log.contains(FETCHED), "{log}");
    });
}

#[test]
fn cloudflared_that_never_gets_ready_fails_start_up_and_is_stopped() {
    each_driver(|| {
        let (cp, mcp, fake) = (
            ControlPlane::start(),
            McpServer::start(),
            Fake::new("never"),
        );
        runtime_ok(&cp, FETCHED);
        let t = mcp_tunnel(
            &cp,
            &mcp,
            &fake,
            &[
                "--cloudflared.managed",
                "--cloudflared.ready-timeout",
                "600ms",
            ],
        );
        let (code, log) = t.wait_exit();
        assert_eq!(code, Some(1), "{log}");
        assert!(log.contains("did not report ready within 600ms"), "{log}");
        assert_eq!(fake.read("terminated").as_deref(), Some("term\n"), "{log}");
    });
}

#[test]
fn a_missing_cloudflared_executable_is_a_clear_start_up_error() {
    each_driver(|| {
        let (cp, mcp) = (ControlPlane::start(), McpServer::start());
        runtime_ok(&cp, FETCHED);
        let t = Tunnel::start_listening(
            &cp,
            &[
                "--mcp.server-url",
                &mcp.url(),
                "--cloudflared.managed",
                "--cloudflared.path",
                "/nonexistent/mcpwire-test/cloudflared",
            ],
        );
        let (code, log) = t.wait_exit();
        assert_eq!(code, Some(1), "{log}");
        assert!(
            log.contains("cannot start cloudflared")
                && log.contains("/nonexistent/mcpwire-test/cloudflared"),
            "{log}"
        );
        assert!(!log.contains(FETCHED), "{log}");
    });
}

#[test]
fn a_signal_while_cloudflared_starts_stops_it_and_exits_cleanly() {
    each_driver(|| {
        let (cp, mcp, fake) = (
            ControlPlane::start(),
            McpServer::start(),
            Fake::new("sigstart"),
        );
        runtime_ok(&cp, FETCHED);
        let t = mcp_tunnel(&cp, &mcp, &fake, &["--cloudflared.managed"]);
        // Started (its environment is recorded) but never ready: no /ready is served.
        fake.env();
        let (code, log) = t.terminate();
        assert_eq!(code, Some(0), "{log}");
        assert!(
            log.contains("signal received while cloudflared was starting"),
            "{log}"
        );
        assert_eq!(fake.read("terminated").as_deref(), Some("term\n"), "{log}");
        assert!(cp.with(|s| s.polls.is_empty()));
    });
}

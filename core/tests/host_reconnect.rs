//! The registry reconnecting failed servers by itself (`host::registry::ReconnectPolicy`):
//! which failures retry, the backoff and its jitter, the count reset by a ready server, and
//! what the host's own decisions (disconnect, remove) do to it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mcpwire_core::backoff::Backoff;
use mcpwire_core::host::registry::{
    Attempt, ConnectFailure, Connected, ConnectionState, FailureKind, ReconnectPolicy,
    ReconnectState, Registry, Stage, StateKind, TimeoutReason,
};
use mcpwire_core::host::{ServerId, ServerSpec, TransportSpec, Trust};
use proptest::prelude::*;

fn id(s: &str) -> ServerId {
    ServerId::new(s).unwrap()
}

fn stdio(name: &str) -> ServerSpec {
    ServerSpec {
        id: id(name),
        transport: TransportSpec::Stdio {
            command: "server".into(),
            args: vec![],
            env: BTreeMap::new(),
            cwd: None,
        },
        oauth: None,
        trust: Trust::Trusted,
        disabled: false,
    }
}

const T: Duration = Duration::from_secs(5);

fn policy() -> ReconnectPolicy {
    ReconnectPolicy {
        backoff: Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(8),
            multiplier: 2,
        },
        max_failures: None,
    }
}

fn registry(names: &[&str], policy: ReconnectPolicy, seed: u64) -> Registry {
    let mut r = Registry::new();
    r.set_reconnect(policy, seed);
    for n in names {
        r.add(stdio(n)).unwrap();
    }
    r
}

fn fail(r: &mut Registry, now: Instant, a: Attempt, kind: FailureKind) {
    r.handle_failed(now, a, ConnectFailure::new(Stage::Discover, kind, "x"))
        .unwrap();
}

fn due(r: &Registry, name: &str) -> Option<Instant> {
    r.reconnect_state(&id(name)).and_then(|s| s.due)
}

#[test]
fn a_lost_server_is_due_again_after_a_backoff_that_grows_and_is_named_by_the_timeout() {
    let now = Instant::now();
    let mut r = registry(&["a"], policy(), 7);
    let a = r.connect(&id("a"), now, T).unwrap();
    fail(&mut r, now, a, FailureKind::Unreachable);

    // Retry 1: equal jitter within [0.5 s, 1 s] of the failure.
    let first = due(&r, "a").unwrap();
    assert!(first >= now + Duration::from_millis(500) && first <= now + Duration::from_secs(1));
    let t = r.poll_timeout().unwrap();
    assert_eq!((t.at, t.reason), (first, TimeoutReason::Reconnect(id("a"))));
    assert!(r
        .due_reconnects(first - Duration::from_millis(1))
        .is_empty());
    assert_eq!(r.due_reconnects(first), vec![id("a")]);

    // The driver connects it: no longer due while it connects, the count kept.
    let b = r.connect(&id("a"), first, T).unwrap();
    assert_eq!(
        r.reconnect_state(&id("a")),
        Some(ReconnectState {
            failures: 1,
            due: None
        })
    );
    assert!(r.due_reconnects(first + T).is_empty());
    assert_eq!(
        r.poll_timeout().map(|t| t.reason),
        Some(TimeoutReason::Connect(id("a")))
    );

    // Retry 2: within [1 s, 2 s]; retry 4 onwards capped at [4 s, 8 s].
    fail(&mut r, first, b, FailureKind::Exited);
    let second = due(&r, "a").unwrap();
    assert!(second >= first + Duration::from_secs(1) && second <= first + Duration::from_secs(2));
    let mut at = second;
    for _ in 0..6 {
        let c = r.connect(&id("a"), at, T).unwrap();
        fail(&mut r, at, c, FailureKind::Server);
        let next = due(&r, "a").unwrap();
        assert!(
            next <= at + Duration::from_secs(8),
            "capped at the backoff's max"
        );
        at = next;
    }
    assert_eq!(r.reconnect_state(&id("a")).unwrap().failures, 8);
}

#[test]
fn a_ready_server_starts_counting_again() {
    let now = Instant::now();
    let mut r = registry(&["a"], policy(), 1);
    let a = r.connect(&id("a"), now, T).unwrap();
    fail(&mut r, now, a, FailureKind::Unreachable);
    let b = r.connect(&id("a"), now, T).unwrap();
    r.handle_ready(b, Connected::default()).unwrap();
    assert_eq!(r.reconnect_state(&id("a")), None);
    // Lost once ready: the first retry's delay again, not the second's.
    fail(&mut r, now, b, FailureKind::Exited);
    assert_eq!(r.reconnect_state(&id("a")).unwrap().failures, 1);
    assert!(due(&r, "a").unwrap() <= now + Duration::from_secs(1));
}

#[test]
fn failures_a_person_must_fix_are_not_retried() {
    for kind in [
        FailureKind::Spawn,
        FailureKind::Config,
        FailureKind::Authorization,
        FailureKind::Incompatible,
    ] {
        let now = Instant::now();
        let mut r = registry(&["a"], policy(), 1);
        let a = r.connect(&id("a"), now, T).unwrap();
        fail(&mut r, now, a, kind);
        assert_eq!(
            r.reconnect_state(&id("a")),
            Some(ReconnectState {
                failures: 1,
                due: None
            }),
            "{kind:?}"
        );
        assert_eq!(r.poll_timeout(), None, "{kind:?}");
        assert!(r.due_reconnects(now + Duration::from_secs(3600)).is_empty());
    }
    for kind in [
        FailureKind::TimedOut { after: T },
        FailureKind::Unreachable,
        FailureKind::Exited,
        FailureKind::Server,
        FailureKind::Local,
    ] {
        assert!(kind.retries(), "{kind:?}");
    }
}

#[test]
fn a_connect_timeout_is_a_failure_that_retries() {
    let now = Instant::now();
    let mut r = registry(&["a"], policy(), 1);
    r.connect(&id("a"), now, T).unwrap();
    r.handle_timeout(now + T);
    assert_eq!(r.get(&id("a")).unwrap().state().kind(), StateKind::Failed);
    let due = due(&r, "a").unwrap();
    assert!(due >= now + T + Duration::from_millis(500) && due <= now + T + Duration::from_secs(1));
}

#[test]
fn max_failures_gives_up_until_the_host_connects_again() {
    let now = Instant::now();
    let mut r = registry(
        &["a"],
        ReconnectPolicy {
            max_failures: Some(2),
            ..policy()
        },
        1,
    );
    let a = r.connect(&id("a"), now, T).unwrap();
    fail(&mut r, now, a, FailureKind::Unreachable);
    assert!(due(&r, "a").is_some());
    let b = r.connect(&id("a"), now, T).unwrap();
    fail(&mut r, now, b, FailureKind::Unreachable);
    assert_eq!(due(&r, "a"), None, "given up after 2");
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn what_the_host_disconnects_or_removes_is_never_reconnected_by_itself() {
    let now = Instant::now();
    let mut r = registry(&["a", "b"], policy(), 1);
    let a = r.connect(&id("a"), now, T).unwrap();
    let b = r.connect(&id("b"), now, T).unwrap();
    fail(&mut r, now, a, FailureKind::Unreachable);
    fail(&mut r, now, b, FailureKind::Unreachable);
    r.disconnect(&id("a")).unwrap();
    r.remove(&id("b")).unwrap();
    assert_eq!(r.reconnect_state(&id("a")), None);
    assert_eq!(r.reconnect_state(&id("b")), None);
    assert_eq!(r.poll_timeout(), None);
    assert!(r.due_reconnects(now + Duration::from_secs(60)).is_empty());
}

#[test]
fn without_a_policy_nothing_is_scheduled() {
    let now = Instant::now();
    let mut r = Registry::new();
    r.add(stdio("a")).unwrap();
    let a = r.connect(&id("a"), now, T).unwrap();
    fail(&mut r, now, a, FailureKind::Unreachable);
    assert_eq!(r.reconnect_state(&id("a")), None);
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn the_jitter_is_the_seeds_so_replicas_spread_and_a_test_replays() {
    let now = Instant::now();
    let first_due = |seed: u64| {
        let mut r = registry(&["a"], policy(), seed);
        let a = r.connect(&id("a"), now, T).unwrap();
        fail(&mut r, now, a, FailureKind::Unreachable);
        due(&r, "a").unwrap()
    };
    assert_eq!(first_due(42), first_due(42));
    let spread: std::collections::BTreeSet<Instant> = (0..16).map(first_due).collect();
    assert!(
        spread.len() > 8,
        "16 seeds gave {} distinct delays",
        spread.len()
    );
}

#[derive(Clone, Debug)]
enum Op {
    Connect(usize),
    Fail(usize, bool),
    Ready(usize),
    Disconnect(usize),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize).prop_map(Op::Connect),
        (0..3usize, any::<bool>()).prop_map(|(s, r)| Op::Fail(s, r)),
        (0..3usize).prop_map(Op::Ready),
        (0..3usize).prop_map(Op::Disconnect),
        (0..20_000u64).prop_map(Op::Tick),
    ]
}

const NAMES: [&str; 3] = ["a", "b", "c"];

proptest! {
    /// Driven as a driver would (connecting every due server at each tick): only failed
    /// servers are ever due, a due instant is never before the failure that scheduled it, the
    /// next timeout is never later than the earliest due reconnect, and a retrying server's
    /// delay stays within the backoff's cap.
    #[test]
    fn reconnects_follow_the_policy(ops in proptest::collection::vec(op(), 1..80), seed in any::<u64>()) {
        let start = Instant::now();
        let mut now = start;
        let mut r = registry(&NAMES, policy(), seed);
        let mut current: BTreeMap<usize, Attempt> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Connect(s) => {
                    if let Ok(a) = r.connect(&id(NAMES[s]), now, T) {
                        current.insert(s, a);
                    }
                }
                Op::Fail(s, retries) => {
                    if let Some(&a) = current.get(&s) {
                        let kind = if retries { FailureKind::Unreachable } else { FailureKind::Spawn };
                        fail(&mut r, now, a, kind);
                        if let Some(d) = due(&r, NAMES[s]) {
                            prop_assert!(d >= now && d <= now + Duration::from_secs(8));
                        }
                    }
                }
                Op::Ready(s) => {
                    if let Some(&a) = current.get(&s) {
                        r.handle_ready(a, Connected::default()).unwrap();
                    }
                }
                Op::Disconnect(s) => {
                    r.disconnect(&id(NAMES[s])).unwrap();
                    prop_assert_eq!(r.reconnect_state(&id(NAMES[s])), None);
                }
                Op::Tick(ms) => {
                    now += Duration::from_millis(ms);
                    r.handle_timeout(now);
                    for s in r.due_reconnects(now) {
                        prop_assert_eq!(r.get(&s).unwrap().state().kind(), StateKind::Failed);
                        let a = r.connect(&s, now, T).unwrap();
                        let n = NAMES.iter().position(|n| *n == s.as_str()).unwrap();
                        current.insert(n, a);
                    }
                    prop_assert!(r.due_reconnects(now).is_empty());
                }
            }
            let earliest_due = NAMES
                .iter()
                .filter(|n| r.get(&id(n)).unwrap().state().kind() == StateKind::Failed)
                .filter_map(|n| due(&r, n))
                .min();
            if let Some(d) = earliest_due {
                prop_assert!(r.poll_timeout().unwrap().at <= d);
            }
        }
    }
}

#[test]
fn a_request_failure_that_loses_the_connection_fails_a_ready_server_and_others_do_not() {
    let now = Instant::now();
    let mut r = registry(&["a"], policy(), 3);
    let a = r.connect(&id("a"), now, T).unwrap();
    r.handle_ready(a, Connected::default()).unwrap();
    let failure = |kind| ConnectFailure::new(Stage::ListTools, kind, "the request failed");

    // A slow, erring or unauthorized server is still there: it stays ready, nothing is due.
    for kind in [
        FailureKind::NoAnswer,
        FailureKind::Server,
        FailureKind::Authorization,
        FailureKind::Incompatible,
        FailureKind::Local,
    ] {
        assert!(!kind.loses_connection(), "{kind:?}");
        assert_eq!(r.handle_request_failed(now, a, failure(kind)), Ok(false));
        assert_eq!(r.get(&id("a")).unwrap().state().kind(), StateKind::Ready);
        assert_eq!(due(&r, "a"), None);
    }

    // Nothing answers any more (an HTTP server gone): failed while connected, due again.
    assert!(FailureKind::Unreachable.loses_connection());
    assert_eq!(
        r.handle_request_failed(now, a, failure(FailureKind::Unreachable)),
        Ok(true)
    );
    match r.get(&id("a")).unwrap().state() {
        ConnectionState::Failed(f) => {
            assert_eq!(
                (f.stage, f.kind),
                (Stage::Running, FailureKind::Unreachable)
            );
        }
        other => panic!("not failed: {other:?}"),
    }
    let first = due(&r, "a").unwrap();
    assert!(first > now && first <= now + Duration::from_secs(1));

    // The same attempt's later failures are late: nothing changes.
    assert_eq!(
        r.handle_request_failed(now, a, failure(FailureKind::Exited)),
        Ok(false)
    );
    assert_eq!(due(&r, "a"), Some(first));

    // A connecting attempt is not this method's: a request failure while connecting is
    // the connect's own failure (handle_failed).
    let b = r.connect(&id("a"), first, T).unwrap();
    assert_eq!(
        r.handle_request_failed(first, b, failure(FailureKind::Exited)),
        Ok(false)
    );
    assert_eq!(
        r.get(&id("a")).unwrap().state().kind(),
        StateKind::Connecting
    );

    // Once ready again, the local server exiting fails it.
    r.handle_ready(b, Connected::default()).unwrap();
    assert_eq!(
        r.handle_request_failed(first, b, failure(FailureKind::Exited)),
        Ok(true)
    );
    assert_eq!(r.get(&id("a")).unwrap().state().kind(), StateKind::Failed);
}

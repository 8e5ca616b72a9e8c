//! The host's registry of servers (`mcpwire_core::host::registry`): each server's state kept
//! apart, attempts and their deadlines, late inputs, events in order. Here and not in
//! `core/src` because the instants come from the clock, which `core/src` never reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mcpwire_core::host::registry::{
    store_name, Attempt, ConnectFailure, Connected, ConnectionState, FailureKind, GrantIdentity,
    Registry, RegistryEvent, ServerSummary, Stage, StateKind, TimeoutReason, UsageError,
};
use mcpwire_core::host::{OAuthSpec, ServerId, ServerSpec, TransportSpec, Trust};
use mcpwire_core::mcp::{CachedEra, Era, Implementation};
use proptest::prelude::*;

fn id(s: &str) -> ServerId {
    ServerId::new(s).unwrap()
}

fn http(name: &str, url: &str) -> ServerSpec {
    ServerSpec {
        id: id(name),
        transport: TransportSpec::Http {
            url: url.to_owned(),
            headers: BTreeMap::new(),
        },
        oauth: None,
        trust: Trust::Untrusted,
        disabled: false,
    }
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

fn connected(name: &str, tools: usize) -> Connected {
    Connected {
        era: Some(CachedEra {
            era: Era::Modern,
            protocol_version: Some("2026-07-28".into()),
        }),
        summary: ServerSummary {
            server_info: Some(Implementation::new(name, "1.0")),
            supported_versions: vec!["2026-07-28".into()],
            ..ServerSummary::default()
        },
        tools: Some(tools),
    }
}

fn events(r: &mut Registry) -> Vec<RegistryEvent> {
    std::iter::from_fn(|| r.poll_event()).collect()
}

const T: Duration = Duration::from_secs(5);

#[test]
fn servers_are_listed_in_id_order_whatever_order_they_were_added() {
    let mut r = Registry::new();
    for n in ["zeta", "alpha", "Mid", "beta"] {
        r.add(http(n, "https://example.com/mcp")).unwrap();
    }
    let ids: Vec<&str> = r.ids().map(ServerId::as_str).collect();
    assert_eq!(ids, ["Mid", "alpha", "beta", "zeta"]);
    let listed: Vec<&str> = r.iter().map(|s| s.id().as_str()).collect();
    assert_eq!(listed, ids);
}

#[test]
fn a_second_server_with_the_same_id_is_refused_and_the_first_kept() {
    let mut r = Registry::new();
    r.add(http("github", "https://a.example/mcp")).unwrap();
    assert_eq!(
        r.add(http("github", "https://b.example/mcp")),
        Err(UsageError::Duplicate(id("github")))
    );
    let s = r.get(&id("github")).unwrap();
    assert_eq!(s.credentials().server_url(), Some("https://a.example/mcp"));
}

#[test]
fn servers_are_keyed_by_the_hosts_id_never_by_server_info_name() {
    // Two servers that both call themselves "everything" stay two servers.
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(http("one", "https://a.example/mcp")).unwrap();
    r.add(http("two", "https://b.example/mcp")).unwrap();
    let a = r.connect(&id("one"), now, T).unwrap();
    let b = r.connect(&id("two"), now, T).unwrap();
    r.handle_ready(a, connected("everything", 3)).unwrap();
    r.handle_ready(b, connected("everything", 5)).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r.get(&id("one")).unwrap().tools().count, Some(3));
    assert_eq!(r.get(&id("two")).unwrap().tools().count, Some(5));
}

#[test]
fn a_disabled_server_is_listed_but_never_connected() {
    let mut r = Registry::new();
    let mut spec = stdio("off");
    spec.disabled = true;
    r.add(spec).unwrap();
    assert_eq!(
        r.get(&id("off")).unwrap().state(),
        &ConnectionState::Disabled
    );
    assert_eq!(
        r.connect(&id("off"), Instant::now(), T),
        Err(UsageError::Disabled(id("off")))
    );
}

#[test]
fn connect_issues_attempts_in_order_and_refuses_a_server_already_connecting_or_ready() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(stdio("a")).unwrap();
    r.add(stdio("b")).unwrap();
    let a = r.connect(&id("a"), now, T).unwrap();
    let b = r.connect(&id("b"), now, T).unwrap();
    assert!(a < b);
    assert_eq!(
        r.connect(&id("a"), now, T),
        Err(UsageError::Busy {
            server: id("a"),
            state: StateKind::Connecting
        })
    );
    r.handle_ready(a, connected("a", 1)).unwrap();
    assert!(matches!(
        r.connect(&id("a"), now, T),
        Err(UsageError::Busy {
            state: StateKind::Ready,
            ..
        })
    ));
    assert_eq!(
        r.connect(&id("nope"), now, T),
        Err(UsageError::UnknownServer(id("nope")))
    );
}

#[test]
fn ready_keeps_the_era_the_summary_and_the_tool_count_of_that_server_only() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(stdio("a")).unwrap();
    r.add(stdio("b")).unwrap();
    let a = r.connect(&id("a"), now, T).unwrap();
    let _b = r.connect(&id("b"), now, T).unwrap();
    events(&mut r);
    r.handle_ready(a, connected("server-a", 7)).unwrap();
    assert_eq!(
        events(&mut r),
        [RegistryEvent::StateChanged {
            server: id("a"),
            state: StateKind::Ready
        }]
    );
    let sa = r.get(&id("a")).unwrap();
    assert!(sa.is_ready());
    assert_eq!(sa.era().unwrap().era, Era::Modern);
    assert_eq!(
        sa.summary().unwrap().server_info.as_ref().unwrap().name,
        "server-a"
    );
    assert_eq!(sa.tools().count, Some(7));
    let sb = r.get(&id("b")).unwrap();
    assert_eq!(sb.state().kind(), StateKind::Connecting);
    assert!(sb.era().is_none() && sb.summary().is_none());
    assert_eq!(sb.tools().count, None);
}

#[test]
fn a_server_not_ready_by_its_deadline_fails_timed_out_at_its_stage_and_the_others_do_not() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(http("slow", "https://slow.example/mcp")).unwrap();
    r.add(http("fast", "https://fast.example/mcp")).unwrap();
    let slow = r
        .connect(&id("slow"), now, Duration::from_millis(300))
        .unwrap();
    let fast = r.connect(&id("fast"), now, T).unwrap();
    r.handle_stage(slow, Stage::Discover).unwrap();
    events(&mut r);
    // Early: nothing happens.
    r.handle_timeout(now + Duration::from_millis(299));
    assert!(events(&mut r).is_empty());
    r.handle_timeout(now + Duration::from_millis(300));
    assert_eq!(
        events(&mut r),
        [RegistryEvent::StateChanged {
            server: id("slow"),
            state: StateKind::Failed
        }]
    );
    let ConnectionState::Failed(f) = r.get(&id("slow")).unwrap().state() else {
        panic!("not failed");
    };
    assert_eq!(f.stage, Stage::Discover);
    assert_eq!(
        f.kind,
        FailureKind::TimedOut {
            after: Duration::from_millis(300)
        }
    );
    assert!(f.to_string().contains("server/discover"), "{f}");
    // Twice is harmless.
    r.handle_timeout(now + Duration::from_secs(1));
    assert!(events(&mut r).is_empty());
    assert_eq!(
        r.get(&id("fast")).unwrap().state().kind(),
        StateKind::Connecting
    );
    r.handle_ready(fast, connected("fast", 1)).unwrap();
    assert!(r.get(&id("fast")).unwrap().is_ready());
}

#[test]
fn the_next_timeout_is_the_earliest_connect_deadline_and_names_its_server() {
    let mut r = Registry::new();
    let now = Instant::now();
    assert_eq!(r.poll_timeout(), None);
    for (n, ms) in [("a", 900), ("b", 200), ("c", 200), ("d", 500)] {
        r.add(stdio(n)).unwrap();
        r.connect(&id(n), now, Duration::from_millis(ms)).unwrap();
    }
    let t = r.poll_timeout().unwrap();
    assert_eq!(t.at, now + Duration::from_millis(200));
    assert_eq!(t.reason, TimeoutReason::Connect(id("b")));
    r.disconnect(&id("b")).unwrap();
    assert_eq!(
        r.poll_timeout().unwrap().reason,
        TimeoutReason::Connect(id("c"))
    );
    r.handle_timeout(now + Duration::from_millis(200));
    assert_eq!(
        r.poll_timeout().unwrap().reason,
        TimeoutReason::Connect(id("d"))
    );
    // A ready server has no deadline.
    let a = r.get(&id("a")).unwrap().state().attempt().unwrap();
    r.handle_ready(a, connected("a", 0)).unwrap();
    r.handle_timeout(now + Duration::from_secs(10));
    assert_eq!(r.poll_timeout(), None);
    assert!(r.get(&id("a")).unwrap().is_ready());
}

#[test]
fn what_a_timed_out_or_disconnected_attempt_reports_later_is_dropped() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(stdio("a")).unwrap();
    let first = r.connect(&id("a"), now, Duration::from_millis(10)).unwrap();
    r.handle_timeout(now + Duration::from_millis(10));
    events(&mut r);
    // The slow server answers after all: too late.
    assert_eq!(r.handle_ready(first, connected("a", 3)), Ok(()));
    assert_eq!(r.get(&id("a")).unwrap().state().kind(), StateKind::Failed);
    assert!(events(&mut r).is_empty());
    // A new attempt; the old one's failure does not touch it.
    let second = r.connect(&id("a"), now, T).unwrap();
    assert!(!r.is_current(first) && r.is_current(second));
    r.handle_failed(
        now,
        first,
        ConnectFailure::new(Stage::Discover, FailureKind::Exited, "gone"),
    )
    .unwrap();
    r.handle_list_changed(first).unwrap();
    assert_eq!(
        r.get(&id("a")).unwrap().state().kind(),
        StateKind::Connecting
    );
    r.disconnect(&id("a")).unwrap();
    r.handle_ready(second, connected("a", 3)).unwrap();
    assert_eq!(
        r.get(&id("a")).unwrap().state(),
        &ConnectionState::Disconnected
    );
}

#[test]
fn an_attempt_the_registry_never_issued_is_a_usage_error() {
    let mut r = Registry::new();
    r.add(stdio("a")).unwrap();
    let a = r.connect(&id("a"), Instant::now(), T).unwrap();
    let forged: Attempt = {
        // The next one, not issued yet: issue it on another registry.
        let mut other = Registry::new();
        other.add(stdio("x")).unwrap();
        other.add(stdio("y")).unwrap();
        other.connect(&id("x"), Instant::now(), T).unwrap();
        other.connect(&id("y"), Instant::now(), T).unwrap()
    };
    assert!(forged > a);
    assert_eq!(
        r.handle_ready(forged, connected("x", 0)),
        Err(UsageError::UnknownAttempt(forged))
    );
}

#[test]
fn a_failure_once_ready_is_the_lost_connection_and_a_reconnect_keeps_the_era() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(stdio("a")).unwrap();
    let a = r.connect(&id("a"), now, T).unwrap();
    r.handle_ready(a, connected("a", 2)).unwrap();
    r.handle_failed(
        now,
        a,
        ConnectFailure::new(Stage::Running, FailureKind::Exited, "exit status: 1"),
    )
    .unwrap();
    let s = r.get(&id("a")).unwrap();
    assert!(
        matches!(s.state(), ConnectionState::Failed(f) if f.stage == Stage::Running && f.kind == FailureKind::Exited)
    );
    // What the last connection learned stays, for the list and for the next connect.
    assert_eq!(s.era().unwrap().era, Era::Modern);
    assert_eq!(s.tools().count, Some(2));
    let again = r.connect(&id("a"), now, T).unwrap();
    assert!(again > a);
}

#[test]
fn list_changed_makes_the_tools_stale_and_is_reported_once_until_listed_again() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(stdio("a")).unwrap();
    r.add(stdio("b")).unwrap();
    let a = r.connect(&id("a"), now, T).unwrap();
    let b = r.connect(&id("b"), now, T).unwrap();
    r.handle_ready(a, connected("a", 2)).unwrap();
    r.handle_ready(b, connected("b", 2)).unwrap();
    events(&mut r);
    r.handle_list_changed(a).unwrap();
    r.handle_list_changed(a).unwrap();
    assert_eq!(
        events(&mut r),
        [RegistryEvent::ToolsChanged { server: id("a") }]
    );
    assert!(r.get(&id("a")).unwrap().tools().stale);
    assert!(!r.get(&id("b")).unwrap().tools().stale);
    r.handle_tools_listed(a, 3).unwrap();
    let t = r.get(&id("a")).unwrap().tools();
    assert_eq!((t.count, t.stale), (Some(3), false));
    r.handle_list_changed(a).unwrap();
    assert_eq!(
        events(&mut r),
        [RegistryEvent::ToolsChanged { server: id("a") }]
    );
}

#[test]
fn two_servers_on_one_url_have_separate_credential_partitions() {
    let mut r = Registry::new();
    let now = Instant::now();
    let mut work = http("work", "https://mcp.example.com/mcp");
    work.oauth = Some(OAuthSpec {
        client_id: Some("work-client".into()),
        ..OAuthSpec::default()
    });
    r.add(work).unwrap();
    r.add(http("personal", "https://mcp.example.com/mcp"))
        .unwrap();
    r.add(stdio("local")).unwrap();
    let w = r.get(&id("work")).unwrap().credentials().clone();
    let p = r.get(&id("personal")).unwrap().credentials().clone();
    assert_eq!(w.server_url(), p.server_url());
    assert_ne!(w.partition(), p.partition());
    assert_ne!(w.store_name(), p.store_name());
    assert_eq!(w.client_id(), Some("work-client"));
    assert_eq!(p.client_id(), None);
    assert_eq!(
        r.get(&id("local")).unwrap().credentials().server_url(),
        None
    );
    // A grant is recorded for the server whose attempt obtained it, only.
    let a = r.connect(&id("work"), now, T).unwrap();
    let grant = GrantIdentity {
        issuer: "https://as.example.com".into(),
        resource: "https://mcp.example.com/mcp".into(),
    };
    r.handle_authorized(a, grant.clone()).unwrap();
    assert_eq!(
        r.get(&id("work")).unwrap().credentials().grant(),
        Some(&grant)
    );
    assert_eq!(r.get(&id("personal")).unwrap().credentials().grant(), None);
    assert_eq!(store_name(&id("work")), "work");
}

#[test]
fn a_removed_server_is_gone_and_its_attempt_reports_nothing() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(stdio("a")).unwrap();
    let a = r.connect(&id("a"), now, T).unwrap();
    events(&mut r);
    let removed = r.remove(&id("a")).unwrap();
    assert_eq!(removed.id(), &id("a"));
    assert_eq!(events(&mut r), [RegistryEvent::Removed { server: id("a") }]);
    assert_eq!(r.handle_ready(a, connected("a", 1)), Ok(()));
    assert!(r.get(&id("a")).is_none() && events(&mut r).is_empty());
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(
        r.remove(&id("a")).unwrap_err(),
        UsageError::UnknownServer(id("a"))
    );
}

#[test]
fn trust_starts_from_the_spec_and_changes_per_server() {
    let mut r = Registry::new();
    r.add(stdio("t")).unwrap();
    r.add(http("u", "https://u.example/mcp")).unwrap();
    assert_eq!(r.get(&id("t")).unwrap().trust(), Trust::Trusted);
    assert_eq!(r.get(&id("u")).unwrap().trust(), Trust::Untrusted);
    r.set_trust(&id("u"), Trust::Trusted).unwrap();
    r.set_trust(&id("t"), Trust::Untrusted).unwrap();
    assert_eq!(r.get(&id("t")).unwrap().trust(), Trust::Untrusted);
    assert_eq!(r.get(&id("u")).unwrap().trust(), Trust::Trusted);
}

#[test]
fn settled_means_no_server_of_those_is_connecting() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(stdio("a")).unwrap();
    r.add(stdio("b")).unwrap();
    let a = r.connect(&id("a"), now, T).unwrap();
    let ids = [id("a"), id("b")];
    assert!(!r.settled(&ids));
    assert!(r.settled([&id("b")]));
    r.handle_failed(
        now,
        a,
        ConnectFailure::new(Stage::Start, FailureKind::Spawn, "no such file"),
    )
    .unwrap();
    assert!(r.settled(&ids));
}

#[test]
fn shutdown_disconnects_every_server_and_refuses_new_work() {
    let mut r = Registry::new();
    let now = Instant::now();
    r.add(stdio("a")).unwrap();
    r.add(stdio("b")).unwrap();
    let a = r.connect(&id("a"), now, T).unwrap();
    r.handle_ready(a, connected("a", 1)).unwrap();
    r.connect(&id("b"), now, T).unwrap();
    r.shutdown(now);
    assert!(r
        .iter()
        .all(|s| s.state() == &ConnectionState::Disconnected));
    assert_eq!(r.connect(&id("a"), now, T), Err(UsageError::ShutDown));
    assert_eq!(r.add(stdio("c")), Err(UsageError::ShutDown));
}

// ---------------------------------------------------------------------------------------------
// Properties.

#[derive(Clone, Debug)]
enum Op {
    Connect(usize, u64),
    Ready(usize),
    Fail(usize),
    ListChanged(usize),
    Listed(usize, usize),
    Disconnect(usize),
    Remove(usize),
    Add(usize),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4usize, 1..50u64).prop_map(|(s, t)| Op::Connect(s, t)),
        (0..8usize).prop_map(Op::Ready),
        (0..8usize).prop_map(Op::Fail),
        (0..8usize).prop_map(Op::ListChanged),
        (0..8usize, 0..20usize).prop_map(|(a, n)| Op::Listed(a, n)),
        (0..4usize).prop_map(Op::Disconnect),
        (0..4usize).prop_map(Op::Remove),
        (0..4usize).prop_map(Op::Add),
        (0..30u64).prop_map(Op::Tick),
    ]
}

const NAMES: [&str; 4] = ["d", "a", "c", "b"];

proptest! {
    /// Whatever the host and the drivers do, in any order: an input naming one server's attempt
    /// changes no other server; at most one attempt is current per server and none is shared;
    /// the next timeout is the earliest deadline; servers list in id order.
    #[test]
    fn each_servers_state_is_its_own(ops in proptest::collection::vec(op(), 1..60)) {
        let start = Instant::now();
        let mut now = start;
        let mut r = Registry::new();
        for n in NAMES {
            r.add(stdio(n)).unwrap();
        }
        let mut issued: Vec<Attempt> = Vec::new();
        for op in ops {
            let before = r.clone();
            // The server an attempt-naming input may touch.
            let owner: Option<ServerId>;
            match op {
                Op::Connect(s, ms) => {
                    if let Ok(a) = r.connect(&id(NAMES[s]), now, Duration::from_millis(ms)) {
                        issued.push(a);
                    }
                    owner = Some(id(NAMES[s]));
                }
                Op::Ready(i) | Op::Fail(i) | Op::ListChanged(i) | Op::Listed(i, _) => {
                    let Some(&a) = issued.get(i) else { continue };
                    owner = r.server_of(a).cloned();
                    let result = match op {
                        Op::Ready(_) => r.handle_ready(a, connected("x", 1)),
                        Op::Fail(_) => r.handle_failed(now, a, ConnectFailure::new(Stage::Discover, FailureKind::Server, "no")),
                        Op::ListChanged(_) => r.handle_list_changed(a),
                        Op::Listed(_, n) => r.handle_tools_listed(a, n),
                        _ => unreachable!(),
                    };
                    prop_assert_eq!(result, Ok(()));
                    if owner.is_none() {
                        // A late input changes nothing at all.
                        prop_assert!(r == before);
                    }
                }
                Op::Disconnect(s) => {
                    let _ = r.disconnect(&id(NAMES[s]));
                    owner = Some(id(NAMES[s]));
                }
                Op::Remove(s) => {
                    let _ = r.remove(&id(NAMES[s]));
                    owner = Some(id(NAMES[s]));
                }
                Op::Add(s) => {
                    let _ = r.add(stdio(NAMES[s]));
                    owner = Some(id(NAMES[s]));
                }
                Op::Tick(ms) => {
                    now += Duration::from_millis(ms);
                    r.handle_timeout(now);
                    for s in before.iter() {
                        if let Some(after) = r.get(s.id()) {
                            if after != s {
                                // Only a timeout changes a server on a tick.
                                let ConnectionState::Connecting { deadline: Some(d), .. } = s.state() else {
                                    prop_assert!(false, "{} changed on a tick", s.id());
                                    unreachable!()
                                };
                                prop_assert!(*d <= now);
                                let timed_out = matches!(
                                    after.state(),
                                    ConnectionState::Failed(f) if matches!(f.kind, FailureKind::TimedOut { .. })
                                );
                                prop_assert!(timed_out, "{} did not time out", s.id());
                            }
                        }
                    }
                    continue;
                }
            }
            for s in before.iter() {
                if Some(s.id()) != owner.as_ref() {
                    prop_assert_eq!(Some(s), r.get(s.id()), "{:?} touched {}", op, s.id());
                }
            }
            // At most one current attempt per server, none shared.
            let current: Vec<Attempt> = r.iter().filter_map(|s| s.state().attempt()).collect();
            let mut dedup = current.clone();
            dedup.sort();
            dedup.dedup();
            prop_assert_eq!(dedup.len(), current.len());
            // The next timeout is the earliest deadline.
            let earliest = r
                .iter()
                .filter_map(|s| match s.state() {
                    ConnectionState::Connecting { deadline, .. } => *deadline,
                    _ => None,
                })
                .min();
            prop_assert_eq!(r.poll_timeout().map(|t| t.at), earliest);
            let ids: Vec<&ServerId> = r.ids().collect();
            let mut sorted = ids.clone();
            sorted.sort();
            prop_assert_eq!(ids, sorted);
        }
    }
}

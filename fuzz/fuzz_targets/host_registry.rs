//! `host::registry::Registry` fed an arbitrary sequence of the host's requests (add, remove,
//! connect with a timeout, disconnect, trust, shutdown), the drivers' reports naming issued,
//! ended or never-issued attempts (stage, ready, failed, tools listed, list changed,
//! authorized) and clock steps.
//!
//! Invariants checked after every step (all from the module docs):
//! - nothing panics; an attempt never issued is refused, one issued is accepted (`Ok`), and an
//!   ended one changes nothing at all;
//! - an input naming one server's attempt changes no other server;
//! - at most one attempt is current per server and none is shared;
//! - `poll_timeout` is the earliest connect deadline, and after `handle_timeout(now)` none is
//!   in the past;
//! - servers list in id order; every event names a server that is there (or was just removed).
#![no_main]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::host::registry::{
    Attempt, ConnectFailure, Connected, ConnectionState, FailureKind, GrantIdentity, Registry,
    RegistryEvent, Stage, UsageError,
};
use mcpwire_core::host::{ServerId, ServerSpec, TransportSpec, Trust};

const NAMES: [&str; 5] = ["e", "a", "D", "b", "c_1"];

#[derive(Arbitrary, Debug)]
enum AttemptPick {
    Issued(u8),
    NeverIssued(u8),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Add { server: u8, disabled: bool },
    Remove(u8),
    Connect { server: u8, timeout_ms: u16 },
    Disconnect(u8),
    Trust { server: u8, trusted: bool },
    Stage(AttemptPick, u8),
    Ready(AttemptPick, u8),
    Fail(AttemptPick, u8),
    Listed(AttemptPick, u8),
    ListChanged(AttemptPick),
    Authorized(AttemptPick),
    Tick(u16),
    Shutdown,
}

fn id(i: u8) -> ServerId {
    ServerId::new(NAMES[usize::from(i) % NAMES.len()]).unwrap()
}

fn spec(i: u8, disabled: bool) -> ServerSpec {
    ServerSpec {
        id: id(i),
        transport: TransportSpec::Http {
            url: format!("https://s{i}.example/mcp"),
            headers: BTreeMap::new(),
        },
        oauth: None,
        trust: Trust::Untrusted,
        disabled,
    }
}

fn stage(b: u8) -> Stage {
    [
        Stage::Start,
        Stage::Discover,
        Stage::ListTools,
        Stage::Running,
    ][usize::from(b) % 4]
}

fuzz_target!(|ops: Vec<Op>| {
    let start = Instant::now();
    let mut now = start;
    let mut r = Registry::new();
    let mut issued: Vec<Attempt> = Vec::new();
    // Attempts the registry never issued: taken from a second registry, beyond this one's.
    let mut forger = Registry::new();
    let mut forged: Vec<Attempt> = Vec::new();
    for n in 0..64u8 {
        let name = ServerId::new(&format!("f{n}")).unwrap();
        forger
            .add(ServerSpec {
                id: name.clone(),
                ..spec(0, false)
            })
            .unwrap();
        forged.push(forger.connect(&name, start, Duration::ZERO).unwrap());
    }
    for op in ops.into_iter().take(200) {
        let before = r.clone();
        let pick = |p: &AttemptPick| -> Option<Attempt> {
            match p {
                AttemptPick::Issued(i) if !issued.is_empty() => {
                    Some(issued[usize::from(*i) % issued.len()])
                }
                AttemptPick::Issued(_) => None,
                AttemptPick::NeverIssued(i) => forged
                    .iter()
                    .copied()
                    .filter(|a| !issued.contains(a) && a.number() >= issued.len() as u64)
                    .nth(usize::from(*i) % 4),
            }
        };
        let owner: Option<ServerId>;
        let mut attempt_input: Option<(Attempt, Result<(), UsageError>)> = None;
        match &op {
            Op::Add { server, disabled } => {
                let _ = r.add(spec(*server, *disabled));
                owner = Some(id(*server));
            }
            Op::Remove(s) => {
                let _ = r.remove(&id(*s));
                owner = Some(id(*s));
            }
            Op::Connect { server, timeout_ms } => {
                if let Ok(a) = r.connect(
                    &id(*server),
                    now,
                    Duration::from_millis((*timeout_ms).into()),
                ) {
                    assert!(
                        issued.iter().all(|b| *b < a),
                        "attempts are issued in order"
                    );
                    issued.push(a);
                }
                owner = Some(id(*server));
            }
            Op::Disconnect(s) => {
                let _ = r.disconnect(&id(*s));
                owner = Some(id(*s));
            }
            Op::Trust { server, trusted } => {
                let t = if *trusted {
                    Trust::Trusted
                } else {
                    Trust::Untrusted
                };
                let _ = r.set_trust(&id(*server), t);
                owner = Some(id(*server));
            }
            Op::Stage(p, _)
            | Op::Ready(p, _)
            | Op::Fail(p, _)
            | Op::Listed(p, _)
            | Op::ListChanged(p)
            | Op::Authorized(p) => {
                let Some(a) = pick(p) else { continue };
                owner = r.server_of(a).cloned();
                let result = match &op {
                    Op::Stage(_, b) => r.handle_stage(a, stage(*b)),
                    Op::Ready(_, n) => r.handle_ready(
                        a,
                        Connected {
                            tools: Some(usize::from(*n)),
                            ..Connected::default()
                        },
                    ),
                    Op::Fail(_, b) => r.handle_failed(
                        now,
                        a,
                        ConnectFailure::new(stage(*b), FailureKind::Server, "fuzz"),
                    ),
                    Op::Listed(_, n) => r.handle_tools_listed(a, usize::from(*n)),
                    Op::ListChanged(_) => r.handle_list_changed(a),
                    Op::Authorized(_) => r.handle_authorized(
                        a,
                        GrantIdentity {
                            issuer: "https://as.example".into(),
                            resource: "https://s.example/mcp".into(),
                        },
                    ),
                    _ => unreachable!(),
                };
                attempt_input = Some((a, result));
            }
            Op::Tick(ms) => {
                now += Duration::from_millis((*ms).into());
                r.handle_timeout(now);
                if let Some(t) = r.poll_timeout() {
                    assert!(t.at > now, "a deadline left in the past");
                }
                for s in before.iter() {
                    if let Some(after) = r.get(s.id()) {
                        if after != s {
                            assert!(matches!(
                                after.state(),
                                ConnectionState::Failed(f) if matches!(f.kind, FailureKind::TimedOut { .. })
                            ));
                        }
                    }
                }
                owner = None;
            }
            Op::Shutdown => {
                r.shutdown(now);
                assert!(r.iter().all(|s| s.state().attempt().is_none()));
                while r.poll_event().is_some() {}
                continue;
            }
        }
        if let Some((a, result)) = attempt_input {
            if issued.contains(&a) {
                assert_eq!(result, Ok(()));
                if owner.is_none() {
                    assert!(r == before, "a late input changed the registry");
                }
            } else {
                assert_eq!(result, Err(UsageError::UnknownAttempt(a)));
                assert!(r == before);
            }
        }
        if !matches!(op, Op::Tick(_)) {
            for s in before.iter() {
                if Some(s.id()) != owner.as_ref() {
                    assert_eq!(Some(s), r.get(s.id()), "{op:?} touched {}", s.id());
                }
            }
        }
        let current: Vec<Attempt> = r.iter().filter_map(|s| s.state().attempt()).collect();
        let mut dedup = current.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), current.len());
        let earliest = r
            .iter()
            .filter_map(|s| match s.state() {
                ConnectionState::Connecting { deadline, .. } => *deadline,
                _ => None,
            })
            .min();
        assert_eq!(r.poll_timeout().map(|t| t.at), earliest);
        let ids: Vec<&ServerId> = r.ids().collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        while let Some(e) = r.poll_event() {
            let named = match &e {
                RegistryEvent::Added { server }
                | RegistryEvent::StateChanged { server, .. }
                | RegistryEvent::ToolsChanged { server } => Some(server),
                _ => None,
            };
            if let Some(server) = named {
                assert!(r.get(server).is_some(), "{e:?} for a server not there");
            }
        }
    }
});

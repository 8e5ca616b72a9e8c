//! Properties of the consent policy over generated input: rule parsing never panics and
//! round-trips; decisions are deterministic and do not depend on the order rules are written
//! in; no rule lifts a deny or a data flow; nothing but an allow rule naming the tool lets an
//! untrusted, destructive or external call through; provenance finds copied text wherever it
//! lands and never flags a server's own text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpwire_core::host::consent::{
    billing, ConsentPolicy, Provenance, Reason, Rule, RuleList, Rules, ToolCall, ToolPattern,
    Verdict,
};
use mcpwire_core::host::{ServerId, Trust};
use mcpwire_core::mcp::results::{Tool, ToolAnnotations};
use proptest::prelude::*;
use serde_json::{json, Value};

const SERVERS: [&str; 3] = ["alpha", "beta", "gamma_2"];
const TOOLS: [&str; 4] = ["search", "delete_all", "create_payment", "send.v2"];

fn id(s: &str) -> ServerId {
    ServerId::new(s).unwrap()
}

/// Rule text from a small alphabet, so that rules hit the calls generated.
fn rule_text() -> impl Strategy<Value = String> {
    (0..SERVERS.len(), 0..TOOLS.len() + 2).prop_map(|(s, t)| match t {
        t if t < TOOLS.len() => format!("mcp__{}__{}", SERVERS[s], TOOLS[t]),
        t if t == TOOLS.len() => format!("mcp__{}", SERVERS[s]),
        _ => format!("mcp__{}__*", SERVERS[s]),
    })
}

fn lists() -> impl Strategy<Value = [Vec<String>; 4]> {
    let list = || prop::collection::vec(rule_text(), 0..4);
    (list(), list(), list(), list()).prop_map(|(a, b, c, d)| [a, b, c, d])
}

fn build(lists: &[Vec<String>; 4]) -> Rules {
    Rules::from_lists(&lists[0], &lists[1], &lists[2])
        .unwrap()
        .with_billing(&lists[3])
        .unwrap()
}

fn hint() -> impl Strategy<Value = Option<bool>> {
    prop_oneof![Just(None), Just(Some(true)), Just(Some(false))]
}

fn tool() -> impl Strategy<Value = Tool> {
    (
        0..TOOLS.len(),
        hint(),
        hint(),
        hint(),
        hint(),
        any::<bool>(),
    )
        .prop_map(|(t, ro, de, id, ow, annotated)| Tool {
            name: TOOLS[t].into(),
            annotations: annotated.then(|| ToolAnnotations {
                read_only_hint: ro,
                destructive_hint: de,
                idempotent_hint: id,
                open_world_hint: ow,
                ..ToolAnnotations::default()
            }),
            ..Tool::default()
        })
}

fn trust() -> impl Strategy<Value = Trust> {
    prop_oneof![Just(Trust::Untrusted), Just(Trust::Trusted)]
}

fn call<'a>(server: &'a ServerId, trust: Trust, tool: &'a Tool, args: &'a Value) -> ToolCall<'a> {
    ToolCall {
        server,
        trust,
        tool,
        exposed_name: "x",
        arguments: args,
    }
}

/// A sentence of distinct long-enough words, so that any 3 of them form windows.
fn words() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[a-z]{6,10}", 6..30)
}

proptest! {
    #[test]
    fn rule_parsing_never_panics_and_what_parses_reads_back_the_same(text in "\\PC{0,40}") {
        if let Ok(rule) = Rule::parse(&text) {
            let written = rule.to_string();
            prop_assert_eq!(Rule::parse(&written), Ok(rule.clone()));
            // The written form is the canonical one: equal to the input unless it was the
            // `__*` spelling of a server-wide rule.
            prop_assert!(written == text || text == format!("{written}__*"), "{} -> {}", text, written);
        }
    }

    #[test]
    fn rule_like_text_never_panics(text in "(mcp|MCP|mcp_)?(__)?[a-zA-Z0-9_*(). -]{0,12}(__)?[a-zA-Z0-9_*(). -]{0,8}") {
        match Rule::parse(&text) {
            Ok(rule) => prop_assert_eq!(Rule::parse(&rule.to_string()).unwrap(), rule),
            Err(e) => {
                let quoted = format!("{:?}", text);
                prop_assert!(e.to_string().contains(&quoted));
            }
        }
    }

    #[test]
    fn built_rules_round_trip(server in "[a-zA-Z][a-zA-Z0-9-]{0,8}(_[a-zA-Z0-9-]{1,4})?", tool in "[a-zA-Z0-9_.-]{1,12}") {
        let server = id(&server);
        for pattern in [ToolPattern::Any, ToolPattern::Named(tool.clone())] {
            if let Ok(rule) = Rule::new(server.clone(), pattern) {
                prop_assert_eq!(Rule::parse(&rule.to_string()).unwrap(), rule);
            }
        }
    }

    #[test]
    fn decisions_are_deterministic_and_independent_of_rule_order(
        lists in lists(),
        s in 0..SERVERS.len(),
        trust in trust(),
        tool in tool(),
        approve in any::<bool>(),
        shuffle in any::<prop::sample::Index>(),
    ) {
        let server = id(SERVERS[s]);
        let args = json!({"q": "some query text"});
        let mut policy = ConsentPolicy::new(build(&lists));
        let c = call(&server, trust, &tool, &args);
        if approve {
            let _ = policy.approve_always(&c);
        }
        let first = policy.decide(&c);
        prop_assert_eq!(&policy.decide(&c), &first);
        prop_assert_eq!(policy.prompt(&c).decision, first.clone());

        // The same rules written in another order: the same verdict and offer.
        let mut reordered = lists.clone();
        for l in reordered.iter_mut() {
            if !l.is_empty() {
                let k = shuffle.index(l.len());
                l.rotate_left(k);
                l.reverse();
            }
        }
        let other = ConsentPolicy::new(build(&reordered)).with_approvals(policy.approvals().clone());
        let again = other.decide(&c);
        prop_assert_eq!(again.verdict, first.verdict);
        prop_assert_eq!(again.offer_always, first.offer_always);
        prop_assert!(!first.reasons.is_empty());
    }

    #[test]
    fn the_policys_guarantees_hold_for_any_rules(
        lists in lists(),
        s in 0..SERVERS.len(),
        trust in trust(),
        tool in tool(),
        approve in any::<bool>(),
    ) {
        let server = id(SERVERS[s]);
        let args = json!({});
        let rules = build(&lists);
        let mut policy = ConsentPolicy::new(rules.clone());
        let c = call(&server, trust, &tool, &args);
        if approve {
            let _ = policy.approve_always(&c);
        }
        let d = policy.decide(&c);
        let denied = rules.find(RuleList::Deny, &server, &tool.name).is_some();
        let asked = rules.find(RuleList::Ask, &server, &tool.name).is_some();
        let named = rules.find_specific(RuleList::Allow, &server, &tool.name).is_some();
        let a = tool.annotations.clone().unwrap_or_default();
        let billing = rules.find(RuleList::Billing, &server, &tool.name).is_some()
            || billing::keyword(&tool).is_some();

        // A deny rule always denies, and only a deny rule denies.
        prop_assert_eq!(d.verdict == Verdict::Deny, denied);
        // An ask rule always asks (unless denied).
        if asked && !denied {
            prop_assert_eq!(d.verdict, Verdict::Ask);
        }
        // Untrusted, destructive, external and billing calls need an allow rule naming the tool.
        let risky = trust == Trust::Untrusted || a.is_destructive() || a.is_open_world() || billing;
        if risky && !named {
            prop_assert_ne!(d.verdict, Verdict::Allow, "{:?}", d);
        }
        // "Always" is offered only for a trusted read-only tool that sends nothing outside.
        if d.offer_always {
            prop_assert!(trust == Trust::Trusted && a.is_read_only() && !a.is_open_world());
            prop_assert!(!billing && !asked && !denied);
        }
        // approve_always succeeds exactly when it is offered.
        let mut probe = ConsentPolicy::new(rules.clone());
        let offered = probe.decide(&c).offer_always;
        prop_assert_eq!(probe.approve_always(&c).is_ok(), offered);
    }

    #[test]
    fn no_rule_or_approval_lifts_a_data_flow(
        lists in lists(),
        sentence in words(),
        start in any::<prop::sample::Index>(),
        trust in trust(),
        tool in tool(),
    ) {
        let (source, target) = (id(SERVERS[0]), id(SERVERS[1]));
        let mut policy = ConsentPolicy::new(build(&lists));
        policy.record_text(&source, &sentence.join(" "));
        let i = start.index(sentence.len() - 3);
        let args = json!({"body": format!("see: {}.", sentence[i..i + 3].join(", "))});
        let c = call(&target, trust, &tool, &args);
        let _ = policy.approve_always(&c);
        let d = policy.decide(&c);
        prop_assert_ne!(d.verdict, Verdict::Allow);
        if d.verdict == Verdict::Ask {
            let flagged = d.reasons.iter().any(|r| matches!(r,
                Reason::DataFlow(f) if f.source == source && f.target == target));
            prop_assert!(flagged, "{:?}", d);
        }
    }

    #[test]
    fn provenance_finds_copied_text_in_other_servers_calls_only(
        sentence in words(),
        start in any::<prop::sample::Index>(),
        len in 3usize..6,
        upper in any::<bool>(),
    ) {
        let (a, b) = (id("a"), id("b"));
        let mut p = Provenance::default();
        p.record_text(&a, &sentence.join(" "));
        let i = start.index(sentence.len() - len + 1);
        let mut piece = sentence[i..i + len].join("\n");
        if upper {
            piece = piece.to_uppercase();
        }
        let args = json!({"list": [1, {"text": piece}]});
        let flows = p.flows_into(&b, &args);
        prop_assert_eq!(flows.len(), 1);
        prop_assert_eq!(flows[0].pointer.as_str(), "/list/1/text");
        prop_assert!(p.flows_into(&a, &args).is_empty());
    }

    #[test]
    fn text_shorter_than_the_minimum_is_never_a_flow(
        recorded in "\\PC{0,200}",
        short in "[a-zA-Z0-9 ,.]{0,15}",
    ) {
        let mut p = Provenance::default();
        p.record_text(&id("a"), &recorded);
        p.record_text(&id("a"), &short);
        prop_assert!(p.flows_into(&id("b"), &json!(short)).is_empty());
    }

    #[test]
    fn provenance_never_panics_and_stays_within_its_cap(
        texts in prop::collection::vec(("\\PC{0,300}", 0..3usize), 0..12),
        probe in "\\PC{0,300}",
        cap in 1usize..64,
    ) {
        let mut p = Provenance::new(mcpwire_core::host::consent::ProvenanceConfig {
            min_chars: 16,
            max_windows: cap,
        });
        for (text, s) in &texts {
            p.record_text(&id(SERVERS[*s]), text);
            prop_assert!(p.windows() <= cap);
        }
        let flows = p.flows_into(&id("alpha"), &json!(probe));
        prop_assert!(flows.windows(2).all(|w| w[0].source < w[1].source));
        prop_assert!(flows.iter().all(|f| f.source.as_str() != "alpha"));
    }
}

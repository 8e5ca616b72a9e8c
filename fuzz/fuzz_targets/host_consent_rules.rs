//! Fuzzes the consent policy's permission-rule parser and the decisions built on it.
//!
//! Input layout: the bytes as text (invalid UTF-8 replaced by U+FFFD). If the whole text is
//! JSON, it is also read as a `permissions` block. Then it is split on `\n`; each line's first
//! character picks a list (`a` allow, `k` ask, `d` deny, `b` billing; anything else: parsed
//! alone) and the rest is the rule text.
//!
//! Checked on every run:
//! - `Rule::parse` never panics; a rule it accepts is written back as the same text (or, for
//!   `mcp__<server>__*`, as `mcp__<server>`) and that text parses to the same rule; an error's
//!   message quotes the rule;
//! - the lists load exactly when every entry is a rule or not an MCP rule at all, the latter
//!   kept in `ignored`; a bad entry's error names its list and index;
//! - `Rules::from_permissions` never panics;
//! - for the servers and tools the rules name (and a few fixed ones; up to three of each),
//!   under both trust levels, with an annotation set the input's length picks: the decision is deterministic; only a matching deny rule
//!   denies, and it always does; a matching ask rule always asks; an untrusted, destructive,
//!   external or billing call is never allowed without an allow rule naming the tool; "always"
//!   is offered only for a trusted read-only closed-world tool, and `approve_always` succeeds
//!   exactly then; the prompt renders and holds the arguments.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::host::consent::{
    billing, ConsentPolicy, Rule, RuleErrorKind, RuleList, Rules, RulesError, ToolCall,
    ToolPattern, Verdict,
};
use mcpwire_core::host::{ServerId, Trust};
use mcpwire_core::mcp::results::{Tool, ToolAnnotations};
use serde_json::{json, Value};

fn check_one(text: &str) -> Option<Rule> {
    match Rule::parse(text) {
        Ok(rule) => {
            let written = rule.to_string();
            assert!(
                written == text || text == format!("{written}__*"),
                "{text:?} written as {written:?}"
            );
            assert_eq!(Rule::parse(&written).as_ref(), Ok(&rule));
            Some(rule)
        }
        Err(e) => {
            assert_eq!(e.rule, text);
            assert!(e.to_string().contains(&format!("{text:?}")));
            None
        }
    }
}

const HINTS: [(Option<bool>, Option<bool>, Option<bool>); 5] = [
    (None, None, None),
    (Some(true), None, Some(false)),
    (Some(true), None, None),
    (Some(false), Some(false), Some(false)),
    (Some(false), Some(true), Some(true)),
];

fn check_decisions(rules: &Rules, seed: usize) {
    let mut servers: Vec<ServerId> = vec![ServerId::new("github").expect("a valid id")];
    let mut tools: Vec<String> = vec!["search".into(), "create_payment".into()];
    for list in RuleList::ALL {
        for r in rules.list(list) {
            if !servers.contains(r.server()) {
                servers.push(r.server().clone());
            }
            if let ToolPattern::Named(t) = r.tool() {
                if !tools.contains(t) {
                    tools.push(t.clone());
                }
            }
        }
    }
    servers.truncate(3);
    tools.truncate(3);
    let args = json!({"q": "fuzz"});
    for (si, server) in servers.iter().enumerate() {
        for (ti, name) in tools.iter().enumerate() {
            // One annotation set per (server, tool), picked by the input, to keep runs fast.
            let h = (seed + si * 3 + ti) % HINTS.len();
            let (ro, de, ow) = HINTS[h];
            let tool = Tool {
                name: name.clone(),
                annotations: Some(ToolAnnotations {
                    read_only_hint: ro,
                    destructive_hint: de,
                    open_world_hint: ow,
                    ..ToolAnnotations::default()
                }),
                ..Tool::default()
            };
            for trust in [Trust::Untrusted, Trust::Trusted] {
                let call = ToolCall {
                    server,
                    trust,
                    tool: &tool,
                    exposed_name: name,
                    arguments: &args,
                };
                let mut policy = ConsentPolicy::new(rules.clone());
                let d = policy.decide(&call);
                assert_eq!(policy.decide(&call), d);
                assert!(!d.reasons.is_empty());
                let denied = rules
                    .find_call(RuleList::Deny, server, name, Some(name))
                    .is_some();
                let asked = rules
                    .find_call(RuleList::Ask, server, name, Some(name))
                    .is_some();
                let named = rules
                    .find_specific_call(RuleList::Allow, server, name, Some(name))
                    .is_some();
                let bills = rules
                    .find_call(RuleList::Billing, server, name, Some(name))
                    .is_some()
                    || billing::keyword(&tool).is_some();
                let a = tool.annotations.clone().unwrap_or_default();
                assert_eq!(d.verdict == Verdict::Deny, denied);
                if asked && !denied {
                    assert_eq!(d.verdict, Verdict::Ask);
                }
                let risky =
                    trust == Trust::Untrusted || a.is_destructive() || a.is_open_world() || bills;
                if risky && !named {
                    assert_ne!(d.verdict, Verdict::Allow, "{d:?}");
                }
                if d.offer_always {
                    assert!(trust == Trust::Trusted && a.is_read_only() && !a.is_open_world());
                    assert!(!bills && !asked && !denied);
                }
                assert_eq!(policy.approve_always(&call).is_ok(), d.offer_always);
                if trust == Trust::Trusted {
                    let prompt = policy.prompt(&call);
                    assert_eq!(prompt.arguments, args);
                    let shown = prompt.to_string();
                    assert!(shown.contains("\"q\": \"fuzz\""));
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(block) = serde_json::from_str::<Value>(&text) {
        if let Ok(rules) = Rules::from_permissions(&block) {
            check_decisions(&rules, data.len());
        }
    }
    let mut lists: [Vec<&str>; 4] = Default::default();
    for line in text.split('\n') {
        let mut chars = line.chars();
        let slot = match chars.next() {
            Some('a') => Some(0),
            Some('k') => Some(1),
            Some('d') => Some(2),
            Some('b') => Some(3),
            _ => None,
        };
        let rest = chars.as_str();
        match slot {
            Some(i) => lists[i].push(rest),
            None => {
                check_one(line);
            }
        }
    }
    let mut not_mcp = 0;
    let mut bad = Vec::new();
    for (i, list) in lists.iter().enumerate() {
        for (index, entry) in list.iter().enumerate() {
            if check_one(entry).is_none() {
                match Rule::parse(entry) {
                    Err(e) if e.kind == RuleErrorKind::NotMcp => not_mcp += 1,
                    _ => bad.push((i, index)),
                }
            }
        }
    }
    let loaded =
        Rules::from_lists(&lists[0], &lists[1], &lists[2]).and_then(|r| r.with_billing(&lists[3]));
    match loaded {
        Ok(rules) => {
            assert!(bad.is_empty(), "{bad:?} loaded");
            assert_eq!(rules.ignored().len(), not_mcp);
            check_decisions(&rules, data.len());
        }
        Err(RulesError::BadRules(errors)) => {
            assert!(!bad.is_empty());
            let order = [
                RuleList::Allow,
                RuleList::Ask,
                RuleList::Deny,
                RuleList::Billing,
            ];
            for e in &errors {
                let i = order
                    .iter()
                    .position(|l| *l == e.list)
                    .unwrap_or(usize::MAX);
                assert!(bad.contains(&(i, e.index)), "{e}");
                assert!(e
                    .to_string()
                    .starts_with(&format!("permissions.{}[{}]", e.list, e.index)));
            }
        }
        Err(other) => panic!("lists gave {other:?}"),
    }
});

//! The consent policy's cost per call, with no I/O.
//!
//! - `provenance_record_1mib`: recording 1 MiB of result text (about 150,000 words) in an empty
//!   store;
//! - `provenance_check_100kib`: checking a call whose one argument is 100 KiB of other text
//!   against a store holding 1 MiB of results (no match: the usual case);
//! - `decide_small_call`: a whole decision (ten rules, the 1 MiB store, small arguments);
//! - `prompt_100kib`: building and rendering the prompt of a call with a 100 KiB argument.
//!
//! The text is words drawn from a fixed vocabulary by a fixed linear congruential sequence, so
//! every run measures the same input.
//!
//! Run with `cargo bench -p mcpwire-core --bench host_consent`.

// Bench setup works on fixed, known-good data; a failure there is a broken bench, not bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use mcpwire_core::host::consent::{ConsentPolicy, Provenance, Rules, ToolCall};
use mcpwire_core::host::{ServerId, Trust};
use mcpwire_core::mcp::results::{Tool, ToolAnnotations};
use serde_json::json;

/// About `bytes` of text: words of 2 to 9 letters from a 4,096-word vocabulary.
fn text(bytes: usize, seed: u64) -> String {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    let vocabulary: Vec<String> = (0..4096)
        .map(|_| {
            let len = 2 + (next() % 8) as usize;
            (0..len)
                .map(|_| char::from(b'a' + (next() % 26) as u8))
                .collect()
        })
        .collect();
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(&vocabulary[(next() % 4096) as usize]);
        out.push(if next() % 12 == 0 { '\n' } else { ' ' });
    }
    out
}

fn bench(c: &mut Criterion) {
    let a = ServerId::new("alpha").unwrap();
    let b = ServerId::new("beta").unwrap();
    let results = text(1 << 20, 1);
    let argument = text(100 << 10, 2);

    c.bench_function("provenance_record_1mib", |bench| {
        bench.iter(|| {
            let mut p = Provenance::default();
            p.record_text(&a, black_box(&results));
            black_box(p.windows())
        })
    });

    let mut store = Provenance::default();
    store.record_text(&a, &results);
    eprintln!(
        "1 MiB of results: {} windows kept (cap {}), {} dropped",
        store.windows(),
        store.config().max_windows,
        store.dropped_records()
    );
    let args = json!({"body": argument});
    c.bench_function("provenance_check_100kib", |bench| {
        bench.iter(|| black_box(store.flows_into(&b, black_box(&args))))
    });

    let rules = Rules::from_lists(
        [
            "mcp__alpha",
            "mcp__beta__search",
            "mcp__gamma__*",
            "Bash(ls)",
        ],
        ["mcp__beta__delete", "mcp__delta"],
        ["mcp__shell", "mcp__beta__drop", "mcp__x__y", "mcp__z"],
    )
    .unwrap();
    let mut policy = ConsentPolicy::new(rules);
    policy.record_text(&a, &results);
    let tool = Tool {
        name: "search".into(),
        description: Some("Searches the docs.".into()),
        annotations: Some(ToolAnnotations {
            read_only_hint: Some(true),
            open_world_hint: Some(false),
            ..ToolAnnotations::default()
        }),
        ..Tool::default()
    };
    let small = json!({"q": "how do I configure the cache", "limit": 10});
    let call = ToolCall {
        server: &b,
        trust: Trust::Trusted,
        tool: &tool,
        exposed_name: "beta__search",
        arguments: &small,
    };
    c.bench_function("decide_small_call", |bench| {
        bench.iter(|| black_box(policy.decide(black_box(&call))))
    });

    let big = ToolCall {
        arguments: &args,
        ..call
    };
    c.bench_function("prompt_100kib", |bench| {
        bench.iter(|| black_box(policy.prompt(black_box(&big)).to_string().len()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);

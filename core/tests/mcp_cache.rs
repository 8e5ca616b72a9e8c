//! Transcript tests for `mcp::cache` (`server/utilities/caching.mdx`, SEP-2549) that need a real
//! `Instant` base, driven by the spec's own examples copied into `fixtures/mcp/examples/`.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use mcpwire_core::mcp::cache::{CacheError, CacheScope, Lookup, RequestKey, ResultCache};
use mcpwire_core::mcp::{AuthContext, CacheConfig, ListKind, StaleIfError};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{json, Value};

const DISCOVER: &str =
    include_str!("../../fixtures/mcp/examples/DiscoverResult/server-capabilities-discovery.json");
const TOOLS_PAGE: &str =
    include_str!("../../fixtures/mcp/examples/ListToolsResult/tools-list-with-cursor-and-ttl.json");
const PROMPTS_PAGE: &str = include_str!(
    "../../fixtures/mcp/examples/ListPromptsResult/prompts-list-with-cursor-and-ttl.json"
);
const TEMPLATES_RESPONSE: &str = include_str!(
    "../../fixtures/mcp/examples/ListResourceTemplatesResultResponse/list-resource-templates-result-response.json"
);
const READ_WITH_TTL: &str = include_str!(
    "../../fixtures/mcp/examples/ReadResourceResultResponse/read-resource-result-response-with-ttl.json"
);
const READ_WITHOUT_TTL: &str = include_str!(
    "../../fixtures/mcp/examples/ReadResourceResultResponse/read-resource-result-response.json"
);
const READ_REQUEST: &str =
    include_str!("../../fixtures/mcp/examples/ReadResourceRequest/read-resource-request.json");
const INPUT_REQUIRED: &str = include_str!(
    "../../fixtures/mcp/examples/InputRequiredResult/input-required-result-with-request-state-only.json"
);
const TOOLS_CHANGED: &str =
    include_str!("../../fixtures/mcp/examples/ToolListChangedNotification/tools-list-changed.json");
const PROMPTS_CHANGED: &str = include_str!(
    "../../fixtures/mcp/examples/PromptListChangedNotification/prompts-list-changed.json"
);
const RESOURCES_CHANGED: &str = include_str!(
    "../../fixtures/mcp/examples/ResourceListChangedNotification/resources-list-changed.json"
);
const RESOURCE_UPDATED: &str = include_str!(
    "../../fixtures/mcp/examples/ResourceUpdatedNotification/file-resource-updated-notification.json"
);
const INVALID_CURSOR: &str =
    include_str!("../../fixtures/mcp/examples/InvalidParamsError/invalid-cursor.json");

const MAIN_RS: &str = "file:///project/src/main.rs";

/// The raw text of a response's `result` member, byte for byte.
fn result_of(response: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Response<'a> {
        #[serde(borrow)]
        result: &'a RawValue,
    }
    let r: Response<'_> = serde_json::from_str(response).unwrap();
    r.result.get().to_owned()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn ctx(name: &str) -> AuthContext {
    AuthContext::new(name)
}

/// Feeds a notification message (full JSON-RPC text) to the cache.
fn notify(cache: &mut ResultCache, message: &str) -> usize {
    let v: Value = serde_json::from_str(message).unwrap();
    cache
        .on_notification(v["method"].as_str().unwrap(), v.get("params"))
        .unwrap()
}

fn store(cache: &mut ResultCache, at: Instant, key: RequestKey, auth: &AuthContext, result: &str) {
    let ticket = cache.begin_fetch(key);
    cache.insert(at, ticket, auth, result).unwrap();
}

fn page(ttl_ms: u64, scope: &str) -> String {
    json!({"resultType": "complete", "tools": [], "ttlMs": ttl_ms, "cacheScope": scope}).to_string()
}

fn is_fresh(l: &Lookup) -> bool {
    matches!(l, Lookup::Fresh(_))
}

fn is_stale(l: &Lookup) -> bool {
    matches!(l, Lookup::Stale(_))
}

/// caching.mdx, "Freshness Calculation": fresh while `now < t_received + ttlMs`, so stale at
/// exactly `t_received + ttlMs`; the entry is the server's text byte for byte.
#[test]
fn fresh_within_ttl_of_receipt_and_stale_from_expiry() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let key = RequestKey::list_page(ListKind::Tools, None);
    let a = ctx("a");
    store(&mut cache, t0, key.clone(), &a, TOOLS_PAGE);
    match cache.lookup(t0 + ms(299_999), &key, &a) {
        Lookup::Fresh(e) => {
            assert_eq!(e.result_json(), TOOLS_PAGE);
            assert_eq!(e.ttl(), ms(300_000));
            assert_eq!(e.received_at(), t0);
        }
        other => panic!("expected fresh, got {other:?}"),
    }
    assert!(is_stale(&cache.lookup(t0 + ms(300_000), &key, &a)));
    assert!(is_stale(&cache.lookup(t0 + ms(900_000), &key, &a)));
}

/// caching.mdx, "Time-to-Live (TTL) Field": an absent `ttlMs` means 0, immediately stale
/// (read-resource-result-response.json has no hints at all).
#[test]
fn absent_or_zero_ttl_is_immediately_stale() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let key = RequestKey::read_resource(MAIN_RS);
    let a = ctx("a");
    store(
        &mut cache,
        t0,
        key.clone(),
        &a,
        &result_of(READ_WITHOUT_TTL),
    );
    assert!(is_stale(&cache.lookup(t0, &key, &a)));
    let zero = RequestKey::list_page(ListKind::Tools, None);
    store(&mut cache, t0, zero.clone(), &a, &page(0, "public"));
    assert!(is_stale(&cache.lookup(t0, &zero, &a)));
}

/// caching.mdx, "Time-to-Live (TTL) Field": a negative `ttlMs` is treated as 0.
#[test]
fn negative_ttl_is_immediately_stale() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let key = RequestKey::discover();
    let a = ctx("a");
    let text = r#"{"resultType":"complete","supportedVersions":[],"capabilities":{},"ttlMs":-5000,"cacheScope":"public"}"#;
    store(&mut cache, t0, key.clone(), &a, text);
    assert!(is_stale(&cache.lookup(t0, &key, &a)));
}

/// caching.mdx, "Cache Scope Field": "private" entries "MUST NOT be shared across
/// authorization contexts" (read-resource-result-response-with-ttl.json is private).
#[test]
fn private_entry_is_never_served_to_another_auth_context() {
    let t0 = Instant::now();
    let mut cache = ResultCache::new(CacheConfig {
        stale_if_error: StaleIfError::Always,
        ..CacheConfig::default()
    });
    let (alice, bob) = (ctx("alice"), ctx("bob"));
    let v: Value = serde_json::from_str(READ_REQUEST).unwrap();
    let key = RequestKey::from_request("resources/read", v.get("params")).unwrap();
    store(
        &mut cache,
        t0,
        key.clone(),
        &alice,
        &result_of(READ_WITH_TTL),
    );
    match cache.lookup(t0 + ms(1), &key, &alice) {
        Lookup::Fresh(e) => assert_eq!(e.scope(), CacheScope::Private),
        other => panic!("expected fresh, got {other:?}"),
    }
    assert_eq!(cache.lookup(t0 + ms(1), &key, &bob), Lookup::Miss);
    assert_eq!(cache.serve_stale_on_error(t0 + ms(1), &key, &bob), None);
}

/// caching.mdx, "Cache Scope Field" (no default given; SEP-2549: "no safe default"): an absent
/// or unknown `cacheScope` is kept in its authorization context like "private".
#[test]
fn absent_or_unknown_scope_entry_stays_in_its_auth_context() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let (alice, bob) = (ctx("alice"), ctx("bob"));
    let absent = RequestKey::list_page(ListKind::Tools, None);
    store(
        &mut cache,
        t0,
        absent.clone(),
        &alice,
        r#"{"tools":[],"ttlMs":60000}"#,
    );
    let weird = RequestKey::list_page(ListKind::Prompts, None);
    store(
        &mut cache,
        t0,
        weird.clone(),
        &alice,
        &page(60_000, "shared"),
    );
    for key in [&absent, &weird] {
        assert!(is_fresh(&cache.lookup(t0, key, &alice)));
        assert_eq!(cache.lookup(t0, key, &bob), Lookup::Miss);
    }
}

/// caching.mdx, "Cache Scope Field": a "public" result may be served to any user
/// (server-capabilities-discovery.json is public).
#[test]
fn public_entry_is_shared_across_auth_contexts() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let key = RequestKey::discover();
    store(&mut cache, t0, key.clone(), &ctx("alice"), DISCOVER);
    match cache.lookup(t0 + ms(10), &key, &ctx("bob")) {
        Lookup::Fresh(e) => {
            assert_eq!(e.scope(), CacheScope::Public);
            assert_eq!(e.result_json(), DISCOVER);
        }
        other => panic!("expected fresh, got {other:?}"),
    }
}

/// caching.mdx, "Interaction with Notifications": `list_changed` invalidates the cached
/// response at once; every page of `tools/list` in every context, and nothing else.
#[test]
fn tools_list_changed_invalidates_every_page_at_once() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let (alice, bob) = (ctx("alice"), ctx("bob"));
    let pages = [None, Some(""), Some("next-page-cursor")];
    for cursor in pages {
        let key = RequestKey::list_page(ListKind::Tools, cursor);
        store(
            &mut cache,
            t0,
            key.clone(),
            &alice,
            &page(300_000, "private"),
        );
        store(&mut cache, t0, key, &bob, &page(300_000, "private"));
    }
    let prompts = RequestKey::list_page(ListKind::Prompts, None);
    store(&mut cache, t0, prompts.clone(), &alice, PROMPTS_PAGE);
    assert_eq!(notify(&mut cache, TOOLS_CHANGED), 6);
    for cursor in pages {
        let key = RequestKey::list_page(ListKind::Tools, cursor);
        for who in [&alice, &bob] {
            match cache.lookup(t0 + ms(1), &key, who) {
                Lookup::Stale(e) => assert!(e.invalidated()),
                other => panic!("expected stale, got {other:?}"),
            }
        }
    }
    assert!(is_fresh(&cache.lookup(t0 + ms(1), &prompts, &alice)));
}

/// caching.mdx, "Interaction with Notifications": `notifications/prompts/list_changed`
/// invalidates `prompts/list` only.
#[test]
fn prompts_list_changed_invalidates_prompts_pages_only() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let a = ctx("a");
    let prompts = RequestKey::list_page(ListKind::Prompts, Some("next-page-cursor"));
    let tools = RequestKey::list_page(ListKind::Tools, None);
    store(&mut cache, t0, prompts.clone(), &a, PROMPTS_PAGE);
    store(&mut cache, t0, tools.clone(), &a, TOOLS_PAGE);
    assert_eq!(notify(&mut cache, PROMPTS_CHANGED), 1);
    assert!(is_stale(&cache.lookup(t0, &prompts, &a)));
    assert!(is_fresh(&cache.lookup(t0, &tools, &a)));
}

/// caching.mdx, "Interaction with Notifications"; resources.mdx, "List Changed Notification":
/// `notifications/resources/list_changed` invalidates `resources/list` and (conservatively)
/// `resources/templates/list`, but not reads.
#[test]
fn resources_list_changed_invalidates_resources_and_templates_lists() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let a = ctx("a");
    let list = RequestKey::list_page(ListKind::Resources, None);
    let templates = RequestKey::list_page(ListKind::ResourceTemplates, None);
    let read = RequestKey::read_resource(MAIN_RS);
    store(&mut cache, t0, list.clone(), &a, &page(300_000, "public"));
    store(
        &mut cache,
        t0,
        templates.clone(),
        &a,
        &result_of(TEMPLATES_RESPONSE),
    );
    store(&mut cache, t0, read.clone(), &a, &result_of(READ_WITH_TTL));
    assert_eq!(notify(&mut cache, RESOURCES_CHANGED), 2);
    assert!(is_stale(&cache.lookup(t0, &list, &a)));
    assert!(is_stale(&cache.lookup(t0, &templates, &a)));
    assert!(is_fresh(&cache.lookup(t0, &read, &a)));
}

/// caching.mdx, "Interaction with Notifications": `notifications/resources/updated {uri}`
/// invalidates that resource's reads (in every context) and no other URI's.
#[test]
fn resources_updated_invalidates_only_that_uris_reads() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let (alice, bob) = (ctx("alice"), ctx("bob"));
    let main = RequestKey::read_resource(MAIN_RS);
    let other = RequestKey::read_resource("file:///project/src/lib.rs");
    let read = result_of(READ_WITH_TTL);
    store(&mut cache, t0, main.clone(), &alice, &read);
    store(&mut cache, t0, main.clone(), &bob, &read);
    store(&mut cache, t0, other.clone(), &alice, &read);
    assert_eq!(notify(&mut cache, RESOURCE_UPDATED), 2);
    assert!(is_stale(&cache.lookup(t0, &main, &alice)));
    assert!(is_stale(&cache.lookup(t0, &main, &bob)));
    assert!(is_fresh(&cache.lookup(t0, &other, &alice)));
}

/// caching.mdx, "Interaction with Pagination": "If a cursor becomes invalid ... the client
/// SHOULD discard all cached pages"; pagination.mdx: invalid cursors give -32602
/// (invalid-cursor.json).
#[test]
fn invalid_cursor_error_discards_all_pages_of_that_list() {
    let t0 = Instant::now();
    let mut cache = ResultCache::new(CacheConfig {
        stale_if_error: StaleIfError::Always,
        ..CacheConfig::default()
    });
    let (alice, bob) = (ctx("alice"), ctx("bob"));
    let first = RequestKey::list_page(ListKind::Tools, None);
    let second = RequestKey::list_page(ListKind::Tools, Some("next-page-cursor"));
    let prompts = RequestKey::list_page(ListKind::Prompts, None);
    store(&mut cache, t0, first.clone(), &alice, TOOLS_PAGE);
    store(
        &mut cache,
        t0,
        second.clone(),
        &bob,
        &page(300_000, "private"),
    );
    store(&mut cache, t0, prompts.clone(), &alice, PROMPTS_PAGE);
    let error: Value = serde_json::from_str(INVALID_CURSOR).unwrap();
    let code = error["code"].as_i64().unwrap();
    // A -32602 to a first page (no cursor) says nothing about cursors.
    assert_eq!(cache.on_error_response(&first, code), 0);
    assert_eq!(cache.on_error_response(&second, code), 2);
    for (key, who) in [(&first, &alice), (&second, &bob)] {
        assert_eq!(cache.lookup(t0, key, who), Lookup::Miss);
        assert_eq!(cache.serve_stale_on_error(t0, key, who), None);
    }
    assert!(is_fresh(&cache.lookup(t0, &prompts, &alice)));
}

/// caching.mdx, "Interaction with Pagination": each page is cached independently with its own
/// `ttlMs`, its clock starting when that page was received.
#[test]
fn pages_are_cached_independently_with_their_own_ttl() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let a = ctx("a");
    let first = RequestKey::list_page(ListKind::Tools, None);
    let second = RequestKey::list_page(ListKind::Tools, Some("next-page-cursor"));
    store(&mut cache, t0, first.clone(), &a, &page(10_000, "public"));
    store(
        &mut cache,
        t0 + ms(2_000),
        second.clone(),
        &a,
        &page(1_000, "public"),
    );
    assert!(is_fresh(&cache.lookup(t0 + ms(2_500), &first, &a)));
    assert!(is_fresh(&cache.lookup(t0 + ms(2_500), &second, &a)));
    assert!(is_fresh(&cache.lookup(t0 + ms(5_000), &first, &a)));
    assert!(is_stale(&cache.lookup(t0 + ms(5_000), &second, &a)));
    // Refetching page 2 touches nothing on page 1.
    store(
        &mut cache,
        t0 + ms(5_000),
        second.clone(),
        &a,
        &page(1_000, "public"),
    );
    assert!(is_fresh(&cache.lookup(t0 + ms(5_500), &second, &a)));
    assert!(is_stale(&cache.lookup(t0 + ms(10_000), &first, &a)));
}

/// caching.mdx, "Freshness Calculation": clients "MAY serve stale responses if errors occur
/// during re-fetching": only when the host's policy allows it.
#[test]
fn stale_is_served_on_refetch_error_only_when_the_host_allows_it() {
    let t0 = Instant::now();
    let key = RequestKey::list_page(ListKind::Tools, None);
    let a = ctx("a");
    let later = t0 + ms(400_000);

    let mut strict = ResultCache::default();
    store(&mut strict, t0, key.clone(), &a, TOOLS_PAGE);
    assert!(is_stale(&strict.lookup(later, &key, &a)));
    assert_eq!(strict.serve_stale_on_error(later, &key, &a), None);
    let e = strict
        .serve_stale_on_error_with(later, &key, &a, StaleIfError::Always)
        .unwrap();
    assert_eq!(e.result_json(), TOOLS_PAGE);

    let mut lenient = ResultCache::new(CacheConfig {
        stale_if_error: StaleIfError::MaxAge(ms(500_000)),
        ..CacheConfig::default()
    });
    store(&mut lenient, t0, key.clone(), &a, TOOLS_PAGE);
    assert!(lenient.serve_stale_on_error(later, &key, &a).is_some());
    assert_eq!(
        lenient.serve_stale_on_error(t0 + ms(500_001), &key, &a),
        None
    );
    assert_eq!(
        lenient.serve_stale_on_error_with(later, &key, &a, StaleIfError::Never),
        None
    );
}

/// caching.mdx, "Freshness Calculation": "Clients SHOULD NOT treat TTL as a polling
/// interval". Expiry is lazy: an expired entry is neither removed nor reported until a lookup
/// asks, and it can still serve a failed refetch.
#[test]
fn ttl_is_never_a_polling_interval_expiry_is_evaluated_lazily() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let key = RequestKey::list_page(ListKind::Tools, None);
    let a = ctx("a");
    store(&mut cache, t0, key.clone(), &a, &page(1_000, "public"));
    let far = t0 + Duration::from_secs(3_600);
    assert_eq!(cache.len(), 1);
    assert!(is_stale(&cache.lookup(far, &key, &a)));
    assert_eq!(cache.len(), 1);
    assert!(cache
        .serve_stale_on_error_with(far, &key, &a, StaleIfError::Always)
        .is_some());
}

/// caching.mdx, "Freshness Calculation": the cache offers no way to schedule refetches: no
/// public function of the module names a timer, deadline, poll or refresh schedule.
#[test]
fn cache_api_has_no_timer_poll_or_refresh_deadline() {
    let source = include_str!("../src/mcp/cache.rs");
    let banned = [
        "poll",
        "deadline",
        "timer",
        "schedule",
        "refresh",
        "expires_at",
        "wake",
    ];
    let mut public_fns = 0;
    for line in source.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("pub fn ") {
            public_fns += 1;
            let name: String = rest
                .chars()
                .take_while(|c| *c != '(' && *c != '<')
                .collect();
            for word in banned {
                assert!(
                    !name.contains(word),
                    "public fn `{name}` looks like a timer"
                );
            }
        }
    }
    assert!(public_fns > 10, "the scan found the public API");
}

/// caching.mdx, "Cache Key" and "Cacheable Results": MRTR retries (requests carrying
/// `inputResponses`/`requestState`) and `input_required` results are never cached.
#[test]
fn mrtr_retries_and_input_required_results_are_never_cached() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let retry = json!({"uri": MAIN_RS, "inputResponses": {"a": {"action": "accept"}},
        "requestState": "eyJwcm9ncmVzcyI6IjUwJSIsInN0YXRlIjoicHJvY2Vzc2luZyJ9"});
    assert_eq!(
        RequestKey::from_request("resources/read", Some(&retry)),
        Err(CacheError::MrtrRetry)
    );
    let ticket = cache.begin_fetch(RequestKey::read_resource(MAIN_RS));
    assert_eq!(
        cache.insert(t0, ticket, &ctx("a"), INPUT_REQUIRED),
        Err(CacheError::InputRequired)
    );
    assert!(cache.is_empty());
}

/// caching.mdx, "Interaction with Notifications": a notification that arrives while a fetch is
/// in flight invalidates the result of that fetch too (it may predate the change).
#[test]
fn invalidation_during_a_fetch_stores_the_result_already_stale() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let a = ctx("a");
    let key = RequestKey::list_page(ListKind::Tools, None);
    let ticket = cache.begin_fetch(key.clone());
    notify(&mut cache, TOOLS_CHANGED);
    let stored = cache.insert(t0, ticket, &a, TOOLS_PAGE).unwrap();
    assert!(stored.invalidated_in_flight);
    assert!(is_stale(&cache.lookup(t0, &key, &a)));
    // A fetch begun after the notification is fresh again.
    store(&mut cache, t0, key.clone(), &a, TOOLS_PAGE);
    assert!(is_fresh(&cache.lookup(t0, &key, &a)));
    // Unrelated kinds are not affected.
    let prompts = RequestKey::list_page(ListKind::Prompts, None);
    let ticket = cache.begin_fetch(prompts.clone());
    notify(&mut cache, TOOLS_CHANGED);
    assert!(
        !cache
            .insert(t0, ticket, &a, PROMPTS_PAGE)
            .unwrap()
            .invalidated_in_flight
    );
}

/// Bounded size: over `max_entries`, the least recently used entry (insert or lookup) goes.
#[test]
fn entry_bound_evicts_the_least_recently_used_entry() {
    let t0 = Instant::now();
    let mut cache = ResultCache::new(CacheConfig {
        max_entries: 2,
        ..CacheConfig::default()
    });
    let a = ctx("a");
    let k1 = RequestKey::read_resource("file:///1");
    let k2 = RequestKey::read_resource("file:///2");
    let k3 = RequestKey::read_resource("file:///3");
    store(&mut cache, t0, k1.clone(), &a, &page(60_000, "public"));
    store(&mut cache, t0, k2.clone(), &a, &page(60_000, "public"));
    assert!(is_fresh(&cache.lookup(t0, &k1, &a)));
    let ticket = cache.begin_fetch(k3.clone());
    let stored = cache
        .insert(t0, ticket, &a, &page(60_000, "public"))
        .unwrap();
    assert_eq!(stored.evicted, 1);
    assert_eq!(cache.len(), 2);
    assert!(is_fresh(&cache.lookup(t0, &k1, &a)));
    assert_eq!(cache.lookup(t0, &k2, &a), Lookup::Miss);
    assert!(is_fresh(&cache.lookup(t0, &k3, &a)));
}

/// Bounded size: bytes stay within `max_bytes`; an entry larger than the bound is refused.
#[test]
fn byte_bound_holds_and_an_oversized_entry_is_refused() {
    let t0 = Instant::now();
    let mut cache = ResultCache::new(CacheConfig {
        max_bytes: 400,
        ..CacheConfig::default()
    });
    let a = ctx("a");
    for i in 0..10 {
        let key = RequestKey::read_resource(&format!("file:///{i}"));
        store(&mut cache, t0, key, &a, &page(60_000, "private"));
        assert!(cache.bytes() <= 400);
    }
    assert!(cache.len() < 10);
    let key = RequestKey::discover();
    store(&mut cache, t0, key.clone(), &a, &page(60_000, "public"));
    let ticket = cache.begin_fetch(key.clone());
    assert!(matches!(
        cache.insert(t0 + ms(1), ticket, &a, DISCOVER),
        Err(CacheError::TooLarge { limit: 400, .. })
    ));
    // The older, smaller answer it supersedes is not served in its place.
    assert_eq!(cache.lookup(t0 + ms(2), &key, &a), Lookup::Miss);
}

/// caching.mdx, "Time-to-Live (TTL) Field" ("a freshness hint"): a host cap on the TTL applies.
#[test]
fn host_max_ttl_caps_the_server_ttl() {
    let t0 = Instant::now();
    let mut cache = ResultCache::new(CacheConfig {
        max_ttl: Some(ms(1_000)),
        ..CacheConfig::default()
    });
    let a = ctx("a");
    let key = RequestKey::discover();
    store(&mut cache, t0, key.clone(), &a, DISCOVER);
    assert!(is_fresh(&cache.lookup(t0 + ms(999), &key, &a)));
    assert!(is_stale(&cache.lookup(t0 + ms(1_000), &key, &a)));
}

/// caching.mdx, "Cache Scope Field": when a public and the caller's private entry exist for one
/// key, the later received answer is served; a refetch replaces an invalidated entry.
#[test]
fn later_answer_wins_and_a_refetch_replaces_an_invalidated_entry() {
    let t0 = Instant::now();
    let mut cache = ResultCache::default();
    let (alice, bob) = (ctx("alice"), ctx("bob"));
    let key = RequestKey::list_page(ListKind::Tools, None);
    store(
        &mut cache,
        t0,
        key.clone(),
        &alice,
        &page(60_000, "private"),
    );
    store(
        &mut cache,
        t0 + ms(5),
        key.clone(),
        &bob,
        &page(60_000, "public"),
    );
    match cache.lookup(t0 + ms(6), &key, &alice) {
        Lookup::Fresh(e) => assert_eq!(e.scope(), CacheScope::Public),
        other => panic!("expected fresh, got {other:?}"),
    }
    notify(&mut cache, TOOLS_CHANGED);
    assert!(is_stale(&cache.lookup(t0 + ms(7), &key, &bob)));
    store(
        &mut cache,
        t0 + ms(8),
        key.clone(),
        &bob,
        &page(60_000, "public"),
    );
    assert!(is_fresh(&cache.lookup(t0 + ms(9), &key, &bob)));
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        who: u8,
        key: u8,
        scope: u8,
        ttl: i64,
        at: u64,
    },
    Lookup {
        who: u8,
        key: u8,
        at: u64,
    },
    StaleOnError {
        who: u8,
        key: u8,
        at: u64,
    },
    Notify(u8),
    InvalidCursor(u8),
}

fn key_of(i: u8) -> RequestKey {
    match i % 5 {
        0 => RequestKey::discover(),
        1 => RequestKey::list_page(ListKind::Tools, None),
        2 => RequestKey::list_page(ListKind::Tools, Some("c2")),
        3 => RequestKey::read_resource(MAIN_RS),
        _ => RequestKey::list_page(ListKind::Resources, Some("")),
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..3, 0u8..5, 0u8..4, -10i64..5_000, 0u64..10_000).prop_map(
            |(who, key, scope, ttl, at)| Op::Insert {
                who,
                key,
                scope,
                ttl,
                at
            }
        ),
        (0u8..3, 0u8..5, 0u64..10_000).prop_map(|(who, key, at)| Op::Lookup { who, key, at }),
        (0u8..3, 0u8..5, 0u64..10_000).prop_map(|(who, key, at)| Op::StaleOnError { who, key, at }),
        (0u8..4).prop_map(Op::Notify),
        (0u8..5).prop_map(Op::InvalidCursor),
    ]
}

const SCOPES: [Option<&str>; 4] = [Some("public"), Some("private"), None, Some("team")];

fn result_text(who: u8, scope: u8, ttl: i64, pad: usize) -> String {
    let mut v = json!({"resultType": "complete", "owner": who, "ttlMs": ttl,
        "pad": "x".repeat(pad)});
    if let Some(s) = SCOPES[usize::from(scope % 4)] {
        v["cacheScope"] = json!(s);
    }
    v.to_string()
}

/// Checks an entry handed to `who`: private entries must have been stored by `who`.
fn assert_visible_to(who: u8, e: &mcpwire_core::mcp::cache::CachedResult) {
    let v: Value = serde_json::from_str(e.result_json()).unwrap();
    let declared_public = v["cacheScope"] == json!("public");
    assert_eq!(e.scope() == CacheScope::Public, declared_public);
    if !declared_public {
        assert_eq!(v["owner"], json!(who), "private entry crossed contexts");
    }
}

fn apply_notify(cache: &mut ResultCache, n: u8) {
    let (method, params) = match n % 4 {
        0 => ("notifications/tools/list_changed", None),
        1 => ("notifications/resources/list_changed", None),
        2 => ("notifications/prompts/list_changed", None),
        _ => (
            "notifications/resources/updated",
            Some(json!({"uri": MAIN_RS})),
        ),
    };
    cache.on_notification(method, params.as_ref()).unwrap();
}

proptest! {
    /// caching.mdx, "Freshness Calculation": once stale, an entry stays stale at every later
    /// instant, whatever the TTL, the receipt time and the invalidations in between.
    #[test]
    fn freshness_is_monotonic_in_time(
        ttl in prop_oneof![Just(json!(null)), (-5i64..5_000).prop_map(|t| json!(t)),
            Just(json!(1.5)), Just(json!(u64::MAX))],
        received in 0u64..1_000,
        mut probes in prop::collection::vec((0u64..10_000, any::<bool>()), 1..40),
    ) {
        let t0 = Instant::now();
        let mut cache = ResultCache::default();
        let a = ctx("a");
        let key = RequestKey::list_page(ListKind::Tools, None);
        let text = json!({"tools": [], "ttlMs": ttl, "cacheScope": "public"}).to_string();
        store(&mut cache, t0 + ms(received), key.clone(), &a, &text);
        probes.sort_by_key(|p| p.0);
        let mut seen_stale = false;
        for (at, invalidate) in probes {
            let l = cache.lookup(t0 + ms(at), &key, &a);
            if let Lookup::Fresh(e) = &l {
                prop_assert!(!seen_stale, "fresh again at {at} after being stale");
                prop_assert!(e.is_fresh_at(t0 + ms(at)));
            }
            prop_assert!(!matches!(l, Lookup::Miss));
            seen_stale |= is_stale(&l);
            if invalidate {
                apply_notify(&mut cache, 0);
                seen_stale = true;
            }
        }
    }

    /// caching.mdx, "Cache Scope Field": whatever the sequence of inserts, notifications,
    /// cursor errors and lookups, no lookup or stale fallback ever hands one authorization
    /// context an entry that another context stored as private (or with an unknown scope).
    #[test]
    fn lookups_never_cross_authorization_contexts(ops in prop::collection::vec(op(), 1..80)) {
        let t0 = Instant::now();
        let mut cache = ResultCache::new(CacheConfig { max_entries: 6, ..CacheConfig::default() });
        let who = |w: u8| ctx(&format!("ctx-{w}"));
        for op in ops {
            match op {
                Op::Insert { who: w, key, scope, ttl, at } => {
                    let ticket = cache.begin_fetch(key_of(key));
                    cache.insert(t0 + ms(at), ticket, &who(w), &result_text(w, scope, ttl, 0))
                        .unwrap();
                }
                Op::Lookup { who: w, key, at } => {
                    if let Lookup::Fresh(e) | Lookup::Stale(e) =
                        cache.lookup(t0 + ms(at), &key_of(key), &who(w))
                    {
                        assert_visible_to(w, &e);
                    }
                }
                Op::StaleOnError { who: w, key, at } => {
                    if let Some(e) = cache.serve_stale_on_error_with(
                        t0 + ms(at), &key_of(key), &who(w), StaleIfError::Always)
                    {
                        assert_visible_to(w, &e);
                    }
                }
                Op::Notify(n) => apply_notify(&mut cache, n),
                Op::InvalidCursor(k) => {
                    cache.on_error_response(&key_of(k), -32602);
                }
            }
        }
    }

    /// Bounded size: for any configuration and any sequence of inserts, the entry count and
    /// the byte count stay within their bounds.
    #[test]
    fn size_bound_holds_for_any_insert_sequence(
        max_entries in 0usize..8,
        max_bytes in 0usize..2_000,
        inserts in prop::collection::vec((0u8..3, 0u8..5, 0u8..4, 0usize..600), 1..60),
    ) {
        let t0 = Instant::now();
        let mut cache = ResultCache::new(CacheConfig {
            max_entries, max_bytes, ..CacheConfig::default()
        });
        for (i, (w, key, scope, pad)) in inserts.into_iter().enumerate() {
            let ticket = cache.begin_fetch(key_of(key));
            let text = result_text(w, scope, 60_000, pad);
            let at = t0 + ms(i as u64);
            match cache.insert(at, ticket, &ctx(&format!("ctx-{w}")), &text) {
                Ok(_) => prop_assert!(!cache.is_empty()),
                Err(CacheError::TooLarge { bytes, .. }) => {
                    prop_assert!(bytes >= text.len());
                    prop_assert!(max_entries == 0 || bytes > max_bytes);
                }
                Err(other) => prop_assert!(false, "unexpected {other:?}"),
            }
            prop_assert!(cache.len() <= max_entries);
            prop_assert!(cache.bytes() <= max_bytes);
            prop_assert_eq!(cache.is_empty(), cache.bytes() == 0);
        }
    }
}

/// A cached result may be a private resource: its `Debug` shows the size, not the text.
#[test]
fn cached_result_debug_hides_the_result_text() {
    let mut cache = ResultCache::default();
    let key = RequestKey::read_resource("file:///secret.txt");
    let ticket = cache.begin_fetch(key.clone());
    let auth = AuthContext::new("ctx");
    let now = Instant::now();
    cache
        .insert(
            now,
            ticket,
            &auth,
            r#"{"contents":[{"text":"top secret"}],"ttlMs":60000}"#,
        )
        .unwrap();
    match cache.lookup(now, &key, &auth) {
        Lookup::Fresh(e) => assert!(!format!("{e:?}").contains("top secret")),
        other => panic!("{other:?}"),
    }
}

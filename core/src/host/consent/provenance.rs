//! Provenance of result text: which server's results a piece of text came from, so that a
//! call carrying one server's output into another server's tool asks first (the guide's
//! "Managing multiple servers": a tool result from one server is untrusted input to another;
//! let the user review server A's output before it is passed to server B).
//!
//! # How text is matched
//!
//! Text is cut into *tokens*: maximal runs of alphanumeric characters (Unicode's
//! `char::is_alphanumeric`), lower-cased; everything else (spaces, punctuation, JSON and
//! Markdown syntax) only separates tokens. A *window* starts at every token and takes as many
//! whole tokens as it needs to reach [`ProvenanceConfig::min_chars`] characters, counting one
//! separator between tokens (16 by default). So `"alice@example.com"` becomes the window
//! `alice example com` (17), a 40-character API key is one window on its own, and a run of
//! short words becomes a window once the words add up to 16 characters. Windows depend only on
//! the tokens from their start on, so a piece of a result copied into an argument (at whole-token
//! boundaries, with any punctuation, spacing or case) yields the same windows as the result
//! did; text shorter than the minimum yields none and is never flagged ("ok", "the", "true",
//! `"hello world"`).
//!
//! Each window is hashed with a polynomial rolling hash over its tokens' hashes (O(1) per
//! window after one pass over the text), so recording a result and checking arguments are
//! linear in their length. The hashes are fixed (no random keys: the core draws no random
//! numbers); a collision can only make a call ask when it need not, never let one through.
//!
//! What is looked at: the text of every string, object member name and number (as JSON writes
//! it) in the arguments; in a result, its text content, embedded text resources, resource
//! links' URIs, names, titles and descriptions, and every string, member name and number of
//! `structuredContent`. Binary content (images, audio, blobs) is not recorded. Text the model
//! rewrites (translated, re-encoded, paraphrased) is not recognised: this catches copying, not
//! every flow.
//!
//! # Memory
//!
//! The store holds the window hashes of each recorded result (deduplicated within it), at most
//! [`ProvenanceConfig::max_windows`] in all. The default, 262,144, is about 1.6 MiB of
//! English-like text (one window per word of about six bytes), more than a 200,000-token
//! context window holds, in about 15 MB (8 bytes a window in its result's list, 25 in the hash
//! index, and the index's headroom). When a new result would exceed the cap, the oldest results
//! are dropped whole until it fits; a single result with more windows than the cap keeps its
//! first `max_windows` windows. No result text is kept, only hashes.
//!
//! Measured (`cargo bench -p mcpwire-core --bench host_consent`, one shared core): recording
//! 1 MiB of results takes about 18 ms; checking a 100 KiB argument against it about 1 ms.

use std::collections::hash_map::HashMap;
use std::collections::{BTreeMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use serde_json::Value;

use crate::host::ServerId;
use crate::mcp::results::{CallToolResult, ContentBlock};

/// The default [`ProvenanceConfig::min_chars`].
pub const DEFAULT_MIN_CHARS: usize = 16;
/// The default [`ProvenanceConfig::max_windows`].
pub const DEFAULT_MAX_WINDOWS: usize = 1 << 18;
/// The longest excerpt a [`DataFlow`] quotes, in characters (the prompt shows the whole
/// arguments anyway).
pub const MAX_EXCERPT_CHARS: usize = 80;

/// How provenance matches text and how much it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProvenanceConfig {
    /// The shortest text, in normalized characters, that counts as coming from a result
    /// (at least 1; 16 by default).
    pub min_chars: usize,
    /// How many window hashes the session keeps in all before the oldest results are dropped.
    pub max_windows: usize,
}

impl Default for ProvenanceConfig {
    fn default() -> Self {
        ProvenanceConfig {
            min_chars: DEFAULT_MIN_CHARS,
            max_windows: DEFAULT_MAX_WINDOWS,
        }
    }
}

/// Text of one server's result found in a call's arguments to another server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DataFlow {
    /// The server whose result the text came from.
    pub source: ServerId,
    /// The server the call goes to.
    pub target: ServerId,
    /// The JSON Pointer (RFC 6901) of the first argument value (or member name) holding it;
    /// `""` is the arguments themselves.
    pub pointer: String,
    /// The first matching text, as it stands in the arguments (at most
    /// [`MAX_EXCERPT_CHARS`] characters, then `…`).
    pub excerpt: String,
    /// How many windows of the arguments matched that server's results.
    pub windows: usize,
}

/// The keys are window hashes, already mixed: hashing them again would only cost time. (The
/// standard `RandomState` would also draw random keys, which the core does not do.)
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Which servers' results hold a window, each with the number of its results that do.
#[derive(Clone, Debug)]
enum Sources {
    One { server: u32, count: u32 },
    Many(Box<[(u32, u32)]>),
}

impl Sources {
    fn add(&mut self, server: u32) {
        match self {
            Sources::One { server: s, count } if *s == server => *count += 1,
            Sources::One { server: s, count } => {
                *self = Sources::Many(vec![(*s, *count), (server, 1)].into_boxed_slice());
            }
            Sources::Many(list) => {
                if let Some(entry) = list.iter_mut().find(|(s, _)| *s == server) {
                    entry.1 += 1;
                } else {
                    let mut v = list.to_vec();
                    v.push((server, 1));
                    *list = v.into_boxed_slice();
                }
            }
        }
    }

    /// Takes one result of `server` away; `true` when no result holds the window any more.
    fn remove(&mut self, server: u32) -> bool {
        match self {
            Sources::One { server: s, count } if *s == server => {
                *count -= 1;
                *count == 0
            }
            Sources::One { .. } => false,
            Sources::Many(list) => {
                let mut v: Vec<(u32, u32)> = list.to_vec();
                if let Some(i) = v.iter().position(|(s, _)| *s == server) {
                    v[i].1 -= 1;
                    if v[i].1 == 0 {
                        v.remove(i);
                    }
                }
                match v.as_slice() {
                    [] => return true,
                    [(s, c)] => {
                        *self = Sources::One {
                            server: *s,
                            count: *c,
                        }
                    }
                    _ => *list = v.into_boxed_slice(),
                }
                false
            }
        }
    }

    fn servers(&self) -> impl Iterator<Item = u32> + '_ {
        let (one, many) = match self {
            Sources::One { server, .. } => (Some(*server), &[][..]),
            Sources::Many(list) => (None, &list[..]),
        };
        one.into_iter().chain(many.iter().map(|(s, _)| *s))
    }
}

struct Record {
    server: u32,
    hashes: Box<[u64]>,
}

/// The provenance of result text in one session: record each server's results, then ask
/// which other servers' text a call's arguments carry. See the module docs for the matching
/// and the memory cap.
pub struct Provenance {
    config: ProvenanceConfig,
    server_ids: BTreeMap<ServerId, u32>,
    servers: Vec<ServerId>,
    records: VecDeque<Record>,
    index: HashMap<u64, Sources, BuildHasherDefault<PassThrough>>,
    windows: usize,
    dropped: u64,
}

impl Default for Provenance {
    fn default() -> Self {
        Provenance::new(ProvenanceConfig::default())
    }
}

impl std::fmt::Debug for Provenance {
    /// Counts only: the store holds hashes of result text, nothing worth printing.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provenance")
            .field("config", &self.config)
            .field("servers", &self.servers)
            .field("records", &self.records.len())
            .field("windows", &self.windows)
            .field("dropped_records", &self.dropped)
            .finish()
    }
}

impl Provenance {
    /// An empty store.
    pub fn new(config: ProvenanceConfig) -> Provenance {
        Provenance {
            config: ProvenanceConfig {
                min_chars: config.min_chars.max(1),
                max_windows: config.max_windows,
            },
            server_ids: BTreeMap::new(),
            servers: Vec::new(),
            records: VecDeque::new(),
            index: HashMap::default(),
            windows: 0,
            dropped: 0,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> ProvenanceConfig {
        self.config
    }

    /// Records the text of a `tools/call` result of `server` (see the module docs for what
    /// is taken from it).
    pub fn record_result(&mut self, server: &ServerId, result: &CallToolResult) {
        let mut hashes = Vec::new();
        let min = self.config.min_chars;
        let mut add = |text: &str| self_windows(min, text, &mut hashes);
        for block in &result.content {
            match block {
                ContentBlock::Text(t) => add(&t.text),
                ContentBlock::Resource(e) => {
                    add(&e.resource.uri);
                    if let Some(text) = e.resource.text() {
                        add(text);
                    }
                }
                ContentBlock::ResourceLink(r) => {
                    add(&r.uri);
                    add(&r.name);
                    for text in [&r.title, &r.description].into_iter().flatten() {
                        add(text);
                    }
                }
                ContentBlock::Image(_) | ContentBlock::Audio(_) => {}
                ContentBlock::Unknown(v) => walk_strings(v, &mut String::new(), &mut |_, t| add(t)),
            }
        }
        if let Some(structured) = &result.structured_content {
            walk_strings(structured, &mut String::new(), &mut |_, t| add(t));
        }
        self.push_record(server, hashes);
    }

    /// Records a piece of text `server` returned (a resource's text, a prompt, a result the
    /// host reads otherwise).
    pub fn record_text(&mut self, server: &ServerId, text: &str) {
        let mut hashes = Vec::new();
        self_windows(self.config.min_chars, text, &mut hashes);
        self.push_record(server, hashes);
    }

    /// Records every string, member name and number of a JSON value `server` returned.
    pub fn record_value(&mut self, server: &ServerId, value: &Value) {
        let mut hashes = Vec::new();
        let min = self.config.min_chars;
        walk_strings(value, &mut String::new(), &mut |_, t| {
            self_windows(min, t, &mut hashes)
        });
        self.push_record(server, hashes);
    }

    fn push_record(&mut self, server: &ServerId, mut hashes: Vec<u64>) {
        hashes.truncate(self.config.max_windows);
        hashes.sort_unstable();
        hashes.dedup();
        if hashes.is_empty() {
            return;
        }
        let idx = self.intern(server);
        self.index.reserve(hashes.len());
        for &h in &hashes {
            self.index
                .entry(h)
                .and_modify(|s| s.add(idx))
                .or_insert(Sources::One {
                    server: idx,
                    count: 1,
                });
        }
        self.windows += hashes.len();
        self.records.push_back(Record {
            server: idx,
            hashes: hashes.into_boxed_slice(),
        });
        while self.windows > self.config.max_windows {
            let Some(old) = self.records.pop_front() else {
                break;
            };
            self.forget(&old);
        }
    }

    fn forget(&mut self, record: &Record) {
        for h in record.hashes.iter() {
            if let Some(sources) = self.index.get_mut(h) {
                if sources.remove(record.server) {
                    self.index.remove(h);
                }
            }
        }
        self.windows -= record.hashes.len();
        self.dropped += 1;
    }

    fn intern(&mut self, server: &ServerId) -> u32 {
        if let Some(&i) = self.server_ids.get(server) {
            return i;
        }
        // More than u32::MAX servers in one session cannot happen before memory runs out.
        let i = u32::try_from(self.servers.len()).unwrap_or(u32::MAX);
        self.servers.push(server.clone());
        self.server_ids.insert(server.clone(), i);
        i
    }

    /// The text of other servers' results that `arguments`, bound for `target`, carry: one
    /// [`DataFlow`] per source server, ordered by server id. Text from `target`'s own
    /// results is not a flow.
    pub fn flows_into(&self, target: &ServerId, arguments: &Value) -> Vec<DataFlow> {
        if self.index.is_empty() {
            return Vec::new();
        }
        let own = self.server_ids.get(target).copied();
        let mut found: BTreeMap<u32, (String, String, usize)> = BTreeMap::new();
        walk_strings(arguments, &mut String::new(), &mut |pointer, text| {
            for_each_window(self.config.min_chars, text, |hash, start, end| {
                let Some(sources) = self.index.get(&hash) else {
                    return;
                };
                for s in sources.servers().filter(|&s| Some(s) != own) {
                    found
                        .entry(s)
                        .and_modify(|e| e.2 += 1)
                        .or_insert_with(|| (pointer.to_owned(), excerpt(&text[start..end]), 1));
                }
            });
        });
        let mut flows: Vec<DataFlow> = found
            .into_iter()
            .filter_map(|(s, (pointer, excerpt, windows))| {
                Some(DataFlow {
                    source: self.servers.get(s as usize)?.clone(),
                    target: target.clone(),
                    pointer,
                    excerpt,
                    windows,
                })
            })
            .collect();
        flows.sort_by(|a, b| a.source.cmp(&b.source));
        flows
    }

    /// How many results are recorded.
    pub fn records(&self) -> usize {
        self.records.len()
    }

    /// How many window hashes are kept (at most [`ProvenanceConfig::max_windows`]).
    pub fn windows(&self) -> usize {
        self.windows
    }

    /// How many results were dropped to stay within the cap, this session.
    pub fn dropped_records(&self) -> u64 {
        self.dropped
    }

    /// Forgets everything (a new session).
    pub fn clear(&mut self) {
        *self = Provenance::new(self.config);
    }
}

fn self_windows(min_chars: usize, text: &str, out: &mut Vec<u64>) {
    for_each_window(min_chars, text, |h, _, _| out.push(h));
}

fn excerpt(text: &str) -> String {
    let mut chars = text.char_indices();
    match chars.nth(MAX_EXCERPT_CHARS) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

/// Calls `f(pointer, text)` for every string, member name and number in `v`, in document
/// order (a member name with its member's pointer).
fn walk_strings(v: &Value, pointer: &mut String, f: &mut dyn FnMut(&str, &str)) {
    match v {
        Value::String(s) => f(pointer, s),
        Value::Number(n) => f(pointer, &n.to_string()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk_strings(item, pointer, f);
                pointer.truncate(len);
            }
        }
        Value::Object(members) => {
            for (k, item) in members {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                f(pointer, k);
                walk_strings(item, pointer, f);
                pointer.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
}

struct Token {
    start: usize,
    end: usize,
    chars: usize,
    hash: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// The rolling hash's base: odd, with no structure.
const BASE: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finalizer: spreads a hash's bits over all 64.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut current: Option<Token> = None;
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() {
            let t = current.get_or_insert(Token {
                start: i,
                end: i,
                chars: 0,
                hash: FNV_OFFSET,
            });
            if c.is_ascii() {
                // The common case, without the general lower-casing's iterator.
                let b = c.to_ascii_lowercase() as u8;
                t.hash = (t.hash ^ u64::from(b)).wrapping_mul(FNV_PRIME);
                t.chars += 1;
            } else {
                for lower in c.to_lowercase() {
                    let mut buf = [0u8; 4];
                    for &b in lower.encode_utf8(&mut buf).as_bytes() {
                        t.hash = (t.hash ^ u64::from(b)).wrapping_mul(FNV_PRIME);
                    }
                    t.chars += 1;
                }
            }
            t.end = i + c.len_utf8();
        } else if let Some(mut t) = current.take() {
            t.hash = mix(t.hash);
            tokens.push(t);
        }
    }
    if let Some(mut t) = current {
        t.hash = mix(t.hash);
        tokens.push(t);
    }
    tokens
}

/// Calls `f(hash, start, end)` for every window of `text` (byte offsets of its first and past
/// its last token), in text order.
fn for_each_window(min_chars: usize, text: &str, mut f: impl FnMut(u64, usize, usize)) {
    let tokens = tokenize(text);
    let n = tokens.len();
    if n == 0 {
        return;
    }
    // prefix[k] = hash of tokens[..k]; power[k] = BASE^k.
    let mut prefix = Vec::with_capacity(n + 1);
    let mut power = Vec::with_capacity(n + 1);
    prefix.push(0u64);
    power.push(1u64);
    for t in &tokens {
        let last = prefix[prefix.len() - 1];
        prefix.push(last.wrapping_mul(BASE).wrapping_add(t.hash));
        let p = power[power.len() - 1];
        power.push(p.wrapping_mul(BASE));
    }
    // Two pointers: the window [i, j) grows until it reaches min_chars; its end never moves
    // back as its start moves on.
    let mut j = 0;
    let mut len = 0; // characters of tokens[i..j] with one separator between each two
    for i in 0..n {
        if j < i {
            j = i;
            len = 0;
        }
        while len < min_chars && j < n {
            len += tokens[j].chars + usize::from(j > i);
            j += 1;
        }
        if len < min_chars {
            return; // no window starting here or later reaches the minimum
        }
        let count = j - i;
        let h = prefix[j].wrapping_sub(prefix[i].wrapping_mul(power[count]));
        f(
            mix(h ^ (count as u64).wrapping_mul(FNV_PRIME)),
            tokens[i].start,
            tokens[j - 1].end,
        );
        // Move the start past tokens[i] (and the separator after it, if the window has more).
        len -= tokens[i].chars + usize::from(j > i + 1);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(s: &str) -> ServerId {
        ServerId::new(s).unwrap()
    }

    fn windows_of(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for_each_window(DEFAULT_MIN_CHARS, text, |_, s, e| out.push(&text[s..e]));
        out
    }

    #[test]
    fn windows_take_whole_tokens_up_to_the_minimum() {
        assert_eq!(
            windows_of("Contact alice@example.com today!"),
            [
                "Contact alice@example",
                "alice@example.com",
                "example.com today"
            ]
        );
        assert_eq!(
            windows_of("sk_live_0123456789abcdef"),
            [
                "sk_live_0123456789abcdef",
                "live_0123456789abcdef",
                "0123456789abcdef"
            ]
        );
        assert_eq!(windows_of("0123456789abcdef"), ["0123456789abcdef"]);
        assert!(windows_of("0123456789abcde").is_empty());
        assert!(windows_of("the and ok yes").is_empty());
        assert!(windows_of("").is_empty());
        assert!(windows_of("   ...  ").is_empty());
    }

    #[test]
    fn the_same_tokens_hash_the_same_whatever_the_punctuation_and_case() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        self_windows(16, "The Quick brown fox", &mut a);
        self_windows(16, "the-quick, BROWN\n\tfox", &mut b);
        assert_eq!(a, b);
        let mut c = Vec::new();
        self_windows(16, "the quick brown fax", &mut c);
        assert_ne!(a, c);
    }

    #[test]
    fn text_from_one_server_is_a_flow_into_another_not_into_itself() {
        let (a, b) = (id("alpha"), id("beta"));
        let mut p = Provenance::default();
        p.record_text(
            &a,
            "Quarterly revenue for ACME Corp was 4.2 million dollars.",
        );
        let args = json!({"body": "fyi: ACME Corp was 4.2 million dollars", "n": 1});
        let flows = p.flows_into(&b, &args);
        assert_eq!(flows.len(), 1, "{flows:?}");
        assert_eq!(flows[0].source, a);
        assert_eq!(flows[0].target, b);
        assert_eq!(flows[0].pointer, "/body");
        assert!(
            flows[0].excerpt.starts_with("ACME Corp was"),
            "{:?}",
            flows[0].excerpt
        );
        assert!(p.flows_into(&a, &args).is_empty());
    }

    #[test]
    fn short_common_words_are_not_flows() {
        let mut p = Provenance::default();
        p.record_text(
            &id("alpha"),
            "the and of to in is it ok yes no true false hello world",
        );
        for args in [
            json!({"q": "the"}),
            json!({"q": "hello world", "flag": true}),
            json!({"q": "ok", "n": 12}),
            json!(["yes", "no", "true"]),
        ] {
            assert!(p.flows_into(&id("beta"), &args).is_empty(), "{args}");
        }
    }

    #[test]
    fn member_names_numbers_and_nested_values_are_looked_at() {
        let mut p = Provenance::default();
        p.record_value(
            &id("a"),
            &json!({"card": 4111111111111111u64, "k": ["supersecretvalue1"]}),
        );
        let flows = p.flows_into(&id("b"), &json!({"x": [{"supersecretvalue1": 1}]}));
        assert_eq!(flows[0].pointer, "/x/0/supersecretvalue1");
        let flows = p.flows_into(&id("b"), &json!({"a/b": 4111111111111111u64}));
        assert_eq!(flows[0].pointer, "/a~1b");
    }

    #[test]
    fn flows_name_every_source_in_id_order() {
        let mut p = Provenance::default();
        p.record_text(&id("zed"), "zzzz zzzz zzzz zzzz");
        p.record_text(&id("amy"), "aaaa aaaa aaaa aaaa");
        let flows = p.flows_into(
            &id("bob"),
            &json!("aaaa aaaa aaaa aaaa zzzz zzzz zzzz zzzz"),
        );
        let sources: Vec<&str> = flows.iter().map(|f| f.source.as_str()).collect();
        assert_eq!(sources, ["amy", "zed"]);
    }

    #[test]
    fn the_cap_drops_the_oldest_results_first() {
        let mut p = Provenance::new(ProvenanceConfig {
            min_chars: 16,
            max_windows: 10,
        });
        p.record_text(&id("old"), "0123456789abcdefA");
        p.record_text(&id("new"), "one two three four five six seven eight");
        assert!(p.windows() <= 10);
        assert_eq!((p.records(), p.dropped_records()), (2, 0));
        p.record_text(&id("newer"), "aaaa bbbb cccc dddd eeee ffff gggg hhhh");
        assert!(p.windows() <= 10, "{p:?}");
        assert_eq!(p.dropped_records(), 1);
        assert!(p
            .flows_into(&id("x"), &json!("0123456789abcdefA"))
            .is_empty());
        assert_eq!(
            p.flows_into(&id("x"), &json!("cccc dddd eeee ffff")).len(),
            1
        );
        // A single result over the cap keeps its first windows.
        let huge: Vec<String> = (0..1000).map(|i| format!("tok{i:05}word")).collect();
        p.record_text(&id("huge"), &huge.join(" "));
        assert_eq!((p.windows(), p.records()), (10, 1));
        assert_eq!(
            p.flows_into(&id("x"), &json!("tok00000word tok00001word"))
                .len(),
            1
        );
        assert!(p
            .flows_into(&id("x"), &json!("tok00900word tok00901word"))
            .is_empty());
        p.clear();
        assert_eq!((p.records(), p.windows()), (0, 0));
    }

    #[test]
    fn a_window_two_servers_share_survives_one_of_them_dropping() {
        let mut p = Provenance::new(ProvenanceConfig {
            min_chars: 16,
            max_windows: 3,
        });
        p.record_text(&id("a"), "shared text goes here");
        p.record_text(&id("b"), "shared text goes here");
        let flows = p.flows_into(&id("c"), &json!("shared text goes here"));
        assert_eq!(flows.len(), 2);
        p.record_text(&id("d"), "something else entirely new");
        let flows = p.flows_into(&id("c"), &json!("shared text goes here"));
        let sources: Vec<&str> = flows.iter().map(|f| f.source.as_str()).collect();
        assert_eq!(sources, ["b"]);
    }

    #[test]
    fn results_are_read_from_content_and_structured_content() {
        let result = CallToolResult::from_json(
            r#"{"content": [
                {"type": "text", "text": "first block has words enough"},
                {"type": "image", "data": "aGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///x", "text": "embedded resource text here"}},
                {"type": "resource_link", "uri": "https://example.com/private/report-2024", "name": "r"}
               ],
               "structuredContent": {"deep": {"v": "structured secret content"}}}"#,
        )
        .unwrap();
        let mut p = Provenance::default();
        p.record_result(&id("a"), &result);
        for text in [
            "first block has words",
            "embedded resource text",
            "example.com/private/report",
            "structured secret content",
        ] {
            assert_eq!(p.flows_into(&id("b"), &json!(text)).len(), 1, "{text}");
        }
        assert!(p
            .flows_into(&id("b"), &json!("aGVsbG8gaGVsbG8gaGVsbG8gaGVsbG8="))
            .is_empty());
    }

    #[test]
    fn excerpts_are_cut_at_a_character_boundary() {
        let long = "é".repeat(200);
        let mut p = Provenance::default();
        p.record_text(&id("a"), &long);
        let flows = p.flows_into(&id("b"), &json!(long));
        assert_eq!(flows[0].excerpt.chars().count(), MAX_EXCERPT_CHARS + 1);
        assert!(flows[0].excerpt.ends_with('…'));
    }
}

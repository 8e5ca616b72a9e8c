//! Fuzzes Harpoon's target registry and its `--harpoon.target` / `HARPOON_TARGETS` forms.
//!
//! Input layout: the bytes as text (invalid UTF-8 replaced by U+FFFD), read as a
//! `HARPOON_TARGETS` value; each line is also registered as a bare URL.
//!
//! Checked on every run:
//! - parsing and registering never panic;
//! - a parsed entry written back with `to_flag` parses to the same entry;
//! - a registered target is found by its label and by its own URL (and by that URL with the
//!   scheme upper-cased), and its URL is kept as written;
//! - nothing registered has a `.` or `..` path segment, and `Debug` shows no URL;
//! - the lines read as `name: value` headers: the filter keeps or drops each one, keeps no
//!   value with CR or LF and no `Host`, `Cookie` or `Proxy-*`, and adds our
//!   `Accept-Encoding: identity` and `User-Agent`, once each;
//! - the text as a JSON body, with every registered URL put in as well: after the rewrite no
//!   string (key or value) is a registered URL but a top-level `resource`; the lines as
//!   `Location` and `Link` values: a rewritten one names no registered URL;
//! - the text as `call_target` arguments: a request it accepts names a registered label and
//!   stays within the bounds; each line as a redirect's `Location`: a hop it follows goes to
//!   a registered target;
//! - `list_targets` with the text as arguments shows no registered URL; an audience is a
//!   token endpoint's registered URL.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::tunnel::harpoon::call::{next_hop, CallRequest, Hop};
use mcpwire_core::tunnel::harpoon::headers::filter_request_headers;
use mcpwire_core::tunnel::harpoon::rewrite::{rewrite_header, rewrite_json};
use mcpwire_core::tunnel::harpoon::tools::{list_targets, oauth_target_audience};
use mcpwire_core::tunnel::harpoon::{Registry, TargetSource, TargetSpec};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut reg = Registry::new(data.first().is_some_and(|b| b & 1 == 1));
    if let Ok(list) = TargetSpec::parse_list(&text) {
        for spec in list {
            let again = TargetSpec::parse(&spec.to_flag(), "x").expect("to_flag parses");
            assert_eq!(again, spec);
            let _ = reg.register(spec);
        }
    }
    for (i, line) in text.lines().enumerate() {
        let _ = reg.register(TargetSpec {
            label: format!("line-{i}"),
            url: line.to_owned(),
            description: String::new(),
            source: TargetSource::Config,
            tags: Vec::new(),
        });
    }
    let shown = format!("{reg:?}");
    for t in reg.iter() {
        assert_eq!(reg.get(t.label()).map(|x| x.url()), Some(t.url()));
        assert!(reg.find_url(t.url()).any(|x| x.label() == t.label()));
        if let Some((scheme, rest)) = t.url().split_once("://") {
            let upper = format!("{}://{rest}", scheme.to_ascii_uppercase());
            assert!(reg.find_url(&upper).any(|x| x.label() == t.label()));
        }
        let path = t.url().split_once("://").map_or("", |(_, r)| r);
        let path = path.split(['?', '#']).next().unwrap_or_default();
        assert!(path.split(['/', '\\']).skip(1).all(|s| {
            let s = s.to_ascii_lowercase().replace("%2e", ".");
            s != "." && s != ".."
        }));
        assert!(
            t.url().len() < 12 || !shown.contains(t.url()),
            "Debug shows a URL"
        );
    }
    let headers: Vec<(String, String)> = text
        .split('\n')
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    let f = filter_request_headers(&headers, "ua");
    // Ours are added: Accept-Encoding identity (the answer is rewritten), then User-Agent.
    assert_eq!(f.kept.len() + f.dropped.len(), headers.len() + 2);
    assert_eq!(
        f.kept.last(),
        Some(&("User-Agent".to_owned(), "ua".to_owned()))
    );
    assert_eq!(
        f.kept
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("accept-encoding"))
            .collect::<Vec<_>>(),
        [&("Accept-Encoding".to_owned(), "identity".to_owned())]
    );
    for (n, v) in &f.kept {
        let n = n.to_ascii_lowercase();
        assert!(
            n != "host" && n != "cookie" && !n.starts_with("proxy-"),
            "{n} kept"
        );
        assert!(!v.contains(['\r', '\n']));
    }
    let mut doc = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
    let urls: Vec<Value> = reg.iter().map(|t| Value::from(t.url())).collect();
    doc = serde_json::json!({"input": doc, "urls": urls});
    rewrite_json(&reg, &mut doc);
    let mut left = Vec::new();
    strings(&doc, true, &mut left);
    for s in left {
        assert_eq!(reg.find_url(s).count(), 0, "a registered URL survived");
    }
    let args = serde_json::from_str::<Value>(&text).unwrap_or(Value::Null);
    if let Ok(call) = CallRequest::from_arguments(&args, &reg, 1 << 20, 5) {
        assert!(reg.get(&call.label).is_some());
        assert!(call.max_response_bytes <= 1 << 20 && call.max_redirects <= 5);
    }
    if let Ok(listed) = list_targets(&reg, &args) {
        let listed = listed.to_string();
        for t in reg.iter() {
            // A description or tag may quote a URL; only the URL field must never show.
            let quoted = reg.iter().any(|x| {
                x.description().contains(t.url()) || x.tags().iter().any(|g| g.contains(t.url()))
            });
            assert!(
                quoted || t.url().len() < 12 || !listed.contains(t.url()),
                "list_targets showed a URL"
            );
        }
    }
    if let Ok(a) = oauth_target_audience(&reg, &args) {
        let url = a["structuredContent"]["audience"]
            .as_str()
            .expect("an audience");
        assert!(reg.find_url(url).any(|t| t.is_token_endpoint()));
    }
    let first = reg
        .iter()
        .next()
        .map(|t| (t.label().to_owned(), t.url().to_owned()));
    for line in text.lines() {
        if let Some((label, url)) = &first {
            let call =
                CallRequest::from_arguments(&serde_json::json!({"label": label}), &reg, 1 << 20, 5)
                    .expect("a registered label");
            if let Hop::Follow(t) = next_hop(&reg, &call, url, Some(line), 0) {
                assert!(reg.get(t.label()).is_some());
            }
        }
        for name in ["Location", "Link"] {
            if let Some(v) = rewrite_header(&reg, name, line) {
                assert!(reg.find_url(&v).next().is_none());
            }
        }
    }
});

fn strings<'a>(v: &'a Value, top: bool, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, false, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k);
                if !(top && k == "resource" && x.is_string()) {
                    strings(x, false, out);
                }
            }
        }
        _ => {}
    }
}

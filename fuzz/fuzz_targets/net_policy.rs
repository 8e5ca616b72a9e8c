//! The SSRF rules of `net_policy` on arbitrary input.
//!
//! Input layout: byte 0 picks the policy (bit 0 development mode, bit 1 private networks, bit 2
//! SVG icons) and bits 3..6 the purpose; the rest, read as UTF-8 (lossily), is up to three
//! lines: a URL, a redirect `Location`, an icon `src`. The first 4 and 16 bytes after byte 0
//! are also read as an IPv4 and an IPv6 address.
//!
//! Invariants checked on every run:
//! - nothing panics: `check_url`, `check_redirect`, `check_icon_url`, `check_addr`,
//!   `is_network_ref`, `sniff_image`;
//! - an accepted URL is `https`, or `http` only in development mode to a loopback host; it has
//!   no userinfo; an IP literal host passes `check_addr` and `check_resolved`; and its
//!   normalized serialization is accepted again with the same host and port;
//! - an accepted redirect never goes from `https` to `http`, and meets the same rules;
//! - an accepted `https` icon is on the server's origin; an accepted `data:` icon is at most
//!   `MAX_ICON_BYTES` and its bytes sniff as its kind;
//! - an IPv4 address and its IPv4-mapped form classify into the same range, and a policy that
//!   opens nothing accepts an address only if it is in no blocked range;
//! - a fragment `$ref` is never a network reference.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use mcpwire_core::net_policy::{
    blocked_range, is_network_ref, same_origin, sniff_image, BlockedRange, CheckedHost, CheckedUrl,
    IconSource, NetPolicy, UrlPurpose, MAX_ICON_BYTES,
};

const PURPOSES: [UrlPurpose; 6] = [
    UrlPurpose::ResourceMetadata,
    UrlPurpose::AuthorizationServer,
    UrlPurpose::MetadataEndpoint,
    UrlPurpose::Icon,
    UrlPurpose::AuthorizationUrl,
    UrlPurpose::ClientMetadataDocument,
];

fn sound(policy: &NetPolicy, c: &CheckedUrl) {
    let u = c.url();
    assert!(matches!(u.scheme(), "https" | "http"), "{u}");
    assert!(u.username().is_empty() && u.password().is_none(), "{u}");
    assert!(same_origin(u, u), "{u}");
    if let CheckedHost::Addr(a) = c.host() {
        assert!(policy.check_addr(*a, c.purpose()).is_ok(), "{u}");
        assert!(policy.check_resolved(c, *a).is_ok(), "{u}");
    }
    if u.scheme() == "http" {
        assert!(policy.allow_loopback_http, "{u}");
        if let CheckedHost::Addr(a) = c.host() {
            assert_eq!(
                blocked_range(*a).map(|b| b.range),
                Some(BlockedRange::Loopback),
                "{u}"
            );
        }
    }
    let again = policy
        .check_url(u.as_str(), c.purpose())
        .unwrap_or_else(|e| panic!("{u} was accepted, its serialization is not: {e}"));
    assert_eq!(again.host(), c.host(), "{u}");
    assert_eq!(again.port(), c.port(), "{u}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let policy = NetPolicy {
        allow_loopback_http: head & 1 != 0,
        allow_private: head & 2 != 0,
        allow_svg_icons: head & 4 != 0,
    };
    let purpose = PURPOSES[usize::from(head >> 3) % PURPOSES.len()];

    // Addresses.
    if let Some(b) = rest.get(..4) {
        let v4 = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
        let direct = blocked_range(IpAddr::V4(v4)).map(|b| b.range);
        let mapped = blocked_range(IpAddr::V6(v4.to_ipv6_mapped())).map(|b| b.range);
        assert_eq!(direct, mapped, "{v4}");
        let strict = NetPolicy::strict().check_addr(IpAddr::V4(v4), purpose);
        assert_eq!(
            strict.is_ok(),
            direct.is_none()
                || (purpose == UrlPurpose::AuthorizationUrl
                    && direct.is_some_and(BlockedRange::is_private_network)),
            "{v4}"
        );
    }
    if let Some(b) = rest.get(..16) {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(b);
        let v6 = IpAddr::V6(Ipv6Addr::from(octets));
        let _ = policy.check_addr(v6, purpose);
        if NetPolicy::strict()
            .check_addr(v6, UrlPurpose::ResourceMetadata)
            .is_ok()
        {
            assert!(blocked_range(v6).is_none(), "{v6}");
        }
    }
    let _ = sniff_image(rest);

    // URLs.
    let text = String::from_utf8_lossy(rest);
    let mut lines = text.splitn(3, '\n');
    let url = lines.next().unwrap_or("");
    let location = lines.next().unwrap_or("");
    let icon = lines.next().unwrap_or("");
    if url.starts_with('#') {
        assert!(!is_network_ref(url));
    }
    let _ = is_network_ref(location);
    let Ok(checked) = policy.check_url(url, purpose) else {
        return;
    };
    sound(&policy, &checked);
    if let Ok(next) = policy.check_redirect(&checked, location, purpose) {
        sound(&policy, &next);
        assert!(
            !(checked.url().scheme() == "https" && next.url().scheme() == "http"),
            "{} -> {}",
            checked.url(),
            next.url()
        );
    }
    match policy.check_icon_url(icon, &checked) {
        Ok(IconSource::Fetch(u)) => {
            sound(&policy, &u);
            assert!(same_origin(u.url(), checked.url()));
        }
        Ok(IconSource::Data(d)) => {
            assert!(d.bytes.len() <= MAX_ICON_BYTES);
            assert_eq!(sniff_image(&d.bytes), Some(d.kind));
        }
        Ok(_) | Err(_) => {}
    }
});

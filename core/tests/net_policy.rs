//! The SSRF rules of `net_policy`, as one table of URLs, addresses, redirects and icons with
//! the verdict each must get, plus properties over generated input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use mcpwire_core::net_policy::{
    blocked_range, is_network_ref, same_origin, sniff_image, BlockedRange, CheckedHost, CheckedUrl,
    FetchGuard, IconRejected, IconSource, ImageKind, MetadataService, NetPolicy, RejectReason,
    UrlPurpose, UrlRejected, MAX_ICON_BYTES, MAX_ICON_URL_LEN,
};
use proptest::prelude::*;

use BlockedRange as R;
use MetadataService as M;
use UrlPurpose::{
    AuthorizationServer as AS, AuthorizationUrl as AU, ClientMetadataDocument as CIMD,
    Icon as ICON, MetadataEndpoint as ME, ResourceMetadata as RM,
};

/// Strict (the default).
const S: NetPolicy = NetPolicy::strict();
/// Development mode: loopback, and http to it.
const D: NetPolicy = NetPolicy::development();
/// Private networks allowed.
const P: NetPolicy = NetPolicy {
    allow_private: true,
    ..NetPolicy::strict()
};
/// Everything a policy can open.
const ALL: NetPolicy = NetPolicy {
    allow_loopback_http: true,
    allow_private: true,
    allow_svg_icons: true,
};
/// SVG icons allowed (the host sanitizes them).
const SVG: NetPolicy = NetPolicy {
    allow_svg_icons: true,
    ..NetPolicy::strict()
};

/// What one row checks.
#[derive(Debug, Clone, Copy)]
enum Input {
    /// `check_url(url, purpose)`.
    Url(&'static str),
    /// `check_addr(addr, purpose)`.
    Addr(&'static str),
    /// `check_url(url)`, then `check_resolved` with the address the driver's resolver returned.
    Resolved(&'static str, &'static str),
    /// `check_url(from)` (under the development policy, so a loopback `from` is accepted),
    /// then `check_redirect(from, location, purpose)`.
    Redirect(&'static str, &'static str),
    /// `check_url(server)`, then `check_icon_url(icon, server)`.
    Icon(&'static str, &'static str),
}

/// A refusal that is not a blocked range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Control,
    Unparsable,
    Scheme,
    Http,
    Userinfo,
    Downgrade,
    NotLoopback,
    NotTheUrlsAddress,
    IconScheme,
    CrossOrigin,
    Malformed,
    MediaType,
    Svg,
    Base64,
    Mismatch,
}

fn kind(reason: &RejectReason) -> Option<Kind> {
    Some(match reason {
        RejectReason::ControlOrWhitespace => Kind::Control,
        RejectReason::Unparsable(_) => Kind::Unparsable,
        RejectReason::SchemeNotAllowed { .. } => Kind::Scheme,
        RejectReason::InsecureHttp => Kind::Http,
        RejectReason::Userinfo => Kind::Userinfo,
        RejectReason::Downgrade => Kind::Downgrade,
        RejectReason::ResolvedNotLoopback { .. } => Kind::NotLoopback,
        RejectReason::NotTheUrlsAddress { .. } => Kind::NotTheUrlsAddress,
        RejectReason::Icon(IconRejected::SchemeNotAllowed { .. }) => Kind::IconScheme,
        RejectReason::Icon(IconRejected::CrossOrigin { .. }) => Kind::CrossOrigin,
        RejectReason::Icon(IconRejected::MalformedDataUrl) => Kind::Malformed,
        RejectReason::Icon(IconRejected::MediaTypeNotAllowed { .. }) => Kind::MediaType,
        RejectReason::Icon(IconRejected::SvgNotAllowed) => Kind::Svg,
        RejectReason::Icon(IconRejected::BadBase64) => Kind::Base64,
        RejectReason::Icon(IconRejected::Mismatch { .. }) => Kind::Mismatch,
        _ => return None,
    })
}

/// The verdict a row expects.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Accepted.
    Ok,
    /// Accepted, and the host is this address (after WHATWG parsing).
    At(&'static str),
    /// Accepted, with this host name to resolve.
    Name(&'static str),
    /// Accepted as a `data:` icon of this kind.
    Data(ImageKind),
    /// Refused for this range.
    Range(BlockedRange),
    /// Refused for this reason.
    No(Kind),
}

use Input::{Addr, Icon, Redirect, Resolved, Url};
use Kind::*;
use Want::{At, Data, Name, No, Range};

const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==";
const GIF: &str = "data:image/gif;base64,R0lGODlhAQABAA==";
const GIF_AS_PNG: &str = "data:image/png;base64,R0lGODlhAQABAA==";
const SVG_ICON: &str =
    "data:image/svg+xml,%3Csvg%20xmlns%3D%22http%3A%2F%2Fwww.w3.org%2F2000%2Fsvg%22%2F%3E";
const SRV: &str = "https://server.example/mcp";

#[rustfmt::skip]
const TABLE: &[(Input, NetPolicy, UrlPurpose, Want)] = &[
    // Public destinations pass.
    (Url("https://example.com/.well-known/oauth-protected-resource"), S, RM, Name("example.com")),
    (Url("https://8.8.8.8/"), S, AS, At("8.8.8.8")),
    (Url("https://[2606:4700:4700::1111]/"), S, AS, At("2606:4700:4700::1111")),
    (Url("https://1.1.1.1:8443/token"), S, ME, At("1.1.1.1")),
    (Url("HTTPS://EXAMPLE.COM/Path"), S, RM, Name("example.com")),
    (Url("https://bücher.example/"), S, AS, Name("xn--bcher-kva.example")),
    (Url("https://172.32.0.1/"), S, RM, At("172.32.0.1")),
    (Url("https://[::ffff:8.8.8.8]/"), S, RM, At("::ffff:8.8.8.8")),
    (Url("https://[64:ff9b::8.8.8.8]/"), S, RM, At("64:ff9b::808:808")),
    (Url("https://[2002:808:808::1]/"), S, RM, At("2002:808:808::1")),
    (Url("https://localhost.example.com/"), S, RM, Name("localhost.example.com")),
    (Url("https://client.example/metadata.json"), S, CIMD, Name("client.example")),
    (Url("https://accounts.example/authorize?client_id=a&state=b"), S, AU, Name("accounts.example")),
    // Schemes: https only; every other scheme refused by name.
    (Url("http://example.com/"), S, RM, No(Http)),
    (Url("http://example.com/"), D, RM, No(Http)),
    (Url("http://8.8.8.8/"), ALL, ME, No(Http)),
    (Url("ftp://example.com/file"), S, RM, No(Scheme)),
    (Url("file:///etc/passwd"), ALL, RM, No(Scheme)),
    (Url("gopher://127.0.0.1:6379/_INFO"), ALL, ME, No(Scheme)),
    (Url("wss://example.com/"), S, ME, No(Scheme)),
    (Url("javascript:alert(1)"), ALL, AU, No(Scheme)),
    (Url("JavaScript:alert(document.cookie)"), ALL, AU, No(Scheme)),
    (Url("vbscript:msgbox(1)"), ALL, AU, No(Scheme)),
    (Url("data:text/html,hi"), ALL, AU, No(Scheme)),
    (Url("file:///C:/Windows/win.ini"), ALL, AU, No(Scheme)),
    // Loopback: blocked unless development mode; every spelling of 127.0.0.1.
    (Url("https://127.0.0.1/"), S, RM, Range(R::Loopback)),
    (Url("http://127.0.0.1/"), S, RM, Range(R::Loopback)),
    (Url("http://127.0.0.1:8080/"), D, RM, At("127.0.0.1")),
    (Url("https://127.255.255.254/"), S, AS, Range(R::Loopback)),
    (Url("http://[::1]:3000/"), D, AS, At("::1")),
    (Url("http://[::1]/"), S, AS, Range(R::Loopback)),
    (Url("https://[0:0:0:0:0:0:0:1]/"), S, AS, Range(R::Loopback)),
    (Url("http://2130706433/"), S, RM, Range(R::Loopback)),
    (Url("http://2130706433/"), D, RM, At("127.0.0.1")),
    (Url("https://0177.0.0.1/"), S, RM, Range(R::Loopback)),
    (Url("http://0177.0.0.1/"), D, RM, At("127.0.0.1")),
    (Url("https://0x7f.1/"), S, RM, Range(R::Loopback)),
    (Url("https://0x7f000001/"), S, RM, Range(R::Loopback)),
    (Url("https://127.1/"), S, RM, Range(R::Loopback)),
    (Url("http://127.1/"), D, RM, At("127.0.0.1")),
    (Url("https://127.0.0.1./"), S, RM, Range(R::Loopback)),
    (Url("https://%31%32%37.0.0.1/"), S, RM, Range(R::Loopback)),
    (Url("https://[::ffff:127.0.0.1]/"), S, RM, Range(R::Loopback)),
    (Url("https://[::ffff:7f00:1]/"), S, RM, Range(R::Loopback)),
    (Url("http://[::ffff:7f00:1]/"), D, RM, At("::ffff:127.0.0.1")),
    (Url("https://[::127.0.0.1]/"), S, RM, Range(R::Loopback)),
    (Url("http://[::127.0.0.1]/"), D, RM, No(Http)),
    (Url("https://[64:ff9b::7f00:1]/"), S, RM, Range(R::Loopback)),
    (Url("https://[2002:7f00:1::1]/"), S, RM, Range(R::Loopback)),
    (Url("http://127.0.0.1/"), D, AU, At("127.0.0.1")),
    (Url("https://127.0.0.1/"), S, AU, Range(R::Loopback)),
    // Loopback names (RFC 6761).
    (Url("http://localhost:6379/"), S, ME, Range(R::Loopback)),
    (Url("http://localhost:6379/"), D, ME, Name("localhost")),
    (Url("https://localhost./"), S, RM, Range(R::Loopback)),
    (Url("https://LOCALHOST/"), S, RM, Range(R::Loopback)),
    (Url("https://api.localhost/"), S, RM, Range(R::Loopback)),
    (Url("http://app.localhost:8080/"), D, RM, Name("app.localhost")),
    (Url("https://local%68ost/"), S, RM, Range(R::Loopback)),
    (Url("https://ｌｏｃａｌｈｏｓｔ/"), S, RM, Range(R::Loopback)),
    (Url("http://localhost/"), S, AU, Range(R::Loopback)),
    // Unspecified / "this network": refused even in development mode.
    (Url("https://0.0.0.0/"), ALL, RM, Range(R::Unspecified)),
    (Url("http://0/"), ALL, RM, Range(R::Unspecified)),
    (Url("https://0.1.2.3/"), S, RM, Range(R::Unspecified)),
    (Url("https://[::]/"), ALL, RM, Range(R::Unspecified)),
    (Url("https://[::ffff:0.0.0.0]/"), ALL, RM, Range(R::Unspecified)),
    // Private networks: refused unless allow_private, and then over https only.
    (Url("https://10.0.0.1/api"), S, RM, Range(R::Private)),
    (Url("https://10.0.0.1/api"), P, RM, At("10.0.0.1")),
    (Url("http://10.0.0.1/api"), P, RM, No(Http)),
    (Url("https://10.0.0.1/api"), D, RM, Range(R::Private)),
    (Url("https://172.16.0.1/"), S, AS, Range(R::Private)),
    (Url("https://172.31.255.255/"), S, AS, Range(R::Private)),
    (Url("http://192.168.1.1/admin"), S, ME, Range(R::Private)),
    (Url("https://0xc0a80101/"), S, ME, Range(R::Private)),
    (Url("https://3232235777/"), S, ME, Range(R::Private)),
    (Url("https://[::ffff:192.168.1.1]/"), S, ME, Range(R::Private)),
    (Url("https://[::ffff:c0a8:101]/"), P, ME, At("::ffff:192.168.1.1")),
    (Url("https://[64:ff9b::192.168.0.1]/"), S, ME, Range(R::Private)),
    (Url("https://[2002:a00:1::]/"), S, ME, Range(R::Private)),
    (Url("https://[fd12:3456:789a::1]/"), S, AS, Range(R::UniqueLocal)),
    (Url("https://[fd12:3456:789a::1]/"), P, AS, At("fd12:3456:789a::1")),
    (Url("https://[fc00::1]/"), S, AS, Range(R::UniqueLocal)),
    (Url("https://100.64.0.1/"), S, AS, Range(R::SharedAddressSpace)),
    (Url("https://100.127.255.255/"), S, AS, Range(R::SharedAddressSpace)),
    (Url("https://100.64.0.1/"), P, AS, At("100.64.0.1")),
    (Url("https://[64:ff9b:1::808:808]/"), S, AS, Range(R::Nat64LocalUse)),
    (Url("https://[64:ff9b:1::808:808]/"), P, AS, At("64:ff9b:1::808:808")),
    // ... which the user's browser, not the client, reaches for an authorization URL.
    (Url("https://10.0.0.1/authorize"), S, AU, At("10.0.0.1")),
    (Url("https://[fd00::1]/authorize"), S, AU, At("fd00::1")),
    (Url("http://10.0.0.1/authorize"), S, AU, No(Http)),
    (Url("https://169.254.1.1/authorize"), S, AU, Range(R::LinkLocal)),
    // Link-local, site-local; IPv6 zone identifiers are not URLs.
    (Url("https://169.254.1.1/"), S, RM, Range(R::LinkLocal)),
    (Url("https://169.254.1.1/"), ALL, RM, Range(R::LinkLocal)),
    (Url("https://[fe80::1]/"), ALL, RM, Range(R::LinkLocal)),
    (Url("https://[febf:ffff::1]/"), S, RM, Range(R::LinkLocal)),
    (Url("https://[fe80::1%25eth0]/"), ALL, RM, No(Unparsable)),
    (Url("https://[fe80::1%eth0]/"), ALL, RM, No(Unparsable)),
    (Url("https://[fec0::1]/"), ALL, RM, Range(R::SiteLocal)),
    // Cloud metadata: refused under every policy, named as such.
    (Url("http://169.254.169.254/latest/meta-data/"), S, RM, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Url("https://169.254.169.254/latest/meta-data/"), ALL, RM, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Url("https://2852039166/"), ALL, AS, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Url("https://[::ffff:169.254.169.254]/"), ALL, AS, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Url("https://[::ffff:a9fe:a9fe]/"), ALL, AS, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Url("https://[64:ff9b:1::a9fe:a9fe]/"), ALL, AS, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Url("https://169.254.169.254/"), ALL, AU, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Url("https://[fd00:ec2::254]/latest/meta-data/"), P, ME, Range(R::CloudMetadata(M::AwsInstanceMetadataIpv6))),
    (Url("https://169.254.170.2/v2/credentials"), ALL, ME, Range(R::CloudMetadata(M::AwsEcsTaskMetadata))),
    (Url("https://169.254.170.23/v1/credentials"), ALL, ME, Range(R::CloudMetadata(M::AwsEksPodIdentity))),
    (Url("https://100.100.100.200/latest/meta-data/"), P, ME, Range(R::CloudMetadata(M::AlibabaCloudMetadata))),
    (Url("https://168.63.129.16/machine?comp=goalstate"), ALL, ME, Range(R::CloudMetadata(M::AzureWireServer))),
    // The other special-purpose ranges.
    (Url("https://224.0.0.1/"), ALL, RM, Range(R::Multicast)),
    (Url("https://239.255.255.250/"), S, RM, Range(R::Multicast)),
    (Url("https://[ff02::1]/"), ALL, RM, Range(R::Multicast)),
    (Url("https://255.255.255.255/"), ALL, RM, Range(R::Broadcast)),
    (Url("https://198.18.0.1/"), S, RM, Range(R::Benchmarking)),
    (Url("https://198.19.255.255/"), S, RM, Range(R::Benchmarking)),
    (Url("https://[2001:2::1]/"), S, RM, Range(R::Benchmarking)),
    (Url("https://192.0.2.1/"), S, RM, Range(R::Documentation)),
    (Url("https://198.51.100.7/"), S, RM, Range(R::Documentation)),
    (Url("https://203.0.113.9/"), S, RM, Range(R::Documentation)),
    (Url("https://[2001:db8::1]/"), S, RM, Range(R::Documentation)),
    (Url("https://[3fff::1]/"), S, RM, Range(R::Documentation)),
    (Url("https://192.0.0.8/"), S, RM, Range(R::IetfProtocolAssignments)),
    (Url("https://240.0.0.1/"), ALL, RM, Range(R::Reserved)),
    (Url("https://254.1.1.1/"), S, RM, Range(R::Reserved)),
    (Url("https://192.88.99.1/"), S, RM, Range(R::SixToFourRelay)),
    (Url("https://[100::1]/"), S, RM, Range(R::DiscardOnly)),
    (Url("https://[2001::1]/"), ALL, RM, Range(R::Teredo)),
    (Url("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/"), S, RM, Range(R::Teredo)),
    (Url("https://[::8.8.8.8]/"), ALL, RM, Range(R::Ipv4Compatible)),
    (Url("https://[5f00::1]/"), S, RM, Range(R::Ipv6NotGlobalUnicast)),
    (Url("https://[4000::1]/"), S, RM, Range(R::Ipv6NotGlobalUnicast)),
    // Userinfo tricks, refused before anything looks at the host.
    (Url("https://user@example.com/"), S, RM, No(Userinfo)),
    (Url("https://user:pass@example.com/"), S, RM, No(Userinfo)),
    (Url("https://good.example@evil.example/"), S, AS, No(Userinfo)),
    (Url("https://example.com@169.254.169.254/"), S, AS, No(Userinfo)),
    (Url("https://accounts.example:443@evil.example/authorize"), S, AU, No(Userinfo)),
    (Url("https://good.example%40evil.example/"), S, AS, No(Unparsable)),
    // Text that is not a URL, or holds what no URL may.
    (Url(""), S, RM, No(Unparsable)),
    (Url("/relative/path"), S, RM, No(Unparsable)),
    (Url("https://"), S, RM, No(Unparsable)),
    (Url("http://:80/"), D, RM, No(Unparsable)),
    (Url("https://[::1"), S, RM, No(Unparsable)),
    (Url("https://256.0.0.1/"), S, RM, No(Unparsable)),
    (Url("https://1.2.3.4.5/"), S, RM, No(Unparsable)),
    (Url("https://exa mple.com/"), S, RM, No(Control)),
    (Url(" https://example.com/"), S, RM, No(Control)),
    (Url("https://example.com/\n"), S, RM, No(Control)),
    (Url("https://example.com\t.evil/"), S, RM, No(Control)),
    (Url("https://accounts.example/authorize?x=1\r\nSet-Cookie:a"), S, AU, No(Control)),
    (Url("https://example.com/\u{7f}"), S, RM, No(Control)),
    // Resolved addresses (the DNS rebinding defence), the driver's resolver result simulated.
    (Addr("169.254.169.254"), ALL, RM, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Addr("8.8.8.8"), S, RM, Want::Ok),
    (Addr("2606:4700:4700::1111"), S, RM, Want::Ok),
    (Addr("::ffff:10.0.0.1"), S, ME, Range(R::Private)),
    (Addr("127.0.0.1"), D, ME, Want::Ok),
    (Addr("::"), ALL, ME, Range(R::Unspecified)),
    (Addr("10.0.0.1"), S, AU, Want::Ok),
    (Resolved("https://metadata.attacker.example/", "169.254.169.254"), S, RM, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Resolved("https://rebind.example/", "192.168.1.1"), S, RM, Range(R::Private)),
    (Resolved("https://rebind.example/", "93.184.216.34"), S, RM, Want::Ok),
    (Resolved("https://127.0.0.1.nip.io/", "127.0.0.1"), S, AS, Range(R::Loopback)),
    (Resolved("http://localhost:8080/", "127.0.0.1"), D, AS, Want::Ok),
    (Resolved("http://localhost:8080/", "93.184.216.34"), D, AS, No(NotLoopback)),
    (Resolved("https://app.localhost/", "::1"), D, AS, Want::Ok),
    (Resolved("https://app.localhost/", "8.8.8.8"), D, AS, No(NotLoopback)),
    (Resolved("https://idp.corp.example/", "10.1.2.3"), P, AS, Want::Ok),
    (Resolved("https://idp.corp.example/", "10.1.2.3"), S, AS, Range(R::Private)),
    (Resolved("https://8.8.8.8/", "1.1.1.1"), S, AS, No(NotTheUrlsAddress)),
    (Resolved("https://8.8.8.8/", "8.8.8.8"), S, AS, Want::Ok),
    // Redirects: one hop each, resolved against the URL that answered.
    (Redirect("https://as.example/.well-known/oauth-authorization-server", "/metadata"), S, AS, Name("as.example")),
    (Redirect("https://as.example/a/b", "../c"), S, AS, Name("as.example")),
    (Redirect("https://as.example/", "https://10.0.0.1/"), S, AS, Range(R::Private)),
    (Redirect("https://as.example/", "http://as.example/"), S, AS, No(Downgrade)),
    (Redirect("https://as.example/", "//169.254.169.254/latest/meta-data/"), S, AS, Range(R::CloudMetadata(M::InstanceMetadata))),
    (Redirect("https://as.example/", "javascript:alert(1)"), S, AS, No(Scheme)),
    (Redirect("https://as.example/", "https://user@as.example/"), S, AS, No(Userinfo)),
    (Redirect("https://as.example/", "https://as.example/\r\nX: y"), S, AS, No(Control)),
    (Redirect("http://localhost:8080/", "http://127.0.0.1:9000/"), D, AS, At("127.0.0.1")),
    (Redirect("https://localhost/", "http://localhost/"), D, AS, No(Downgrade)),
    (Redirect("https://server.example/icon.png", "https://cdn.example/icon.png"), S, ICON, No(CrossOrigin)),
    (Redirect("https://server.example/icon.png", "/icons/2.png"), S, ICON, Name("server.example")),
    // Icons: https on the server's origin, or a data: image.
    (Icon(SRV, "https://server.example/icon.png"), S, ICON, Name("server.example")),
    (Icon(SRV, "https://server.example:443/i.png"), S, ICON, Name("server.example")),
    (Icon(SRV, "https://cdn.example/i.png"), S, ICON, No(CrossOrigin)),
    (Icon(SRV, "https://server.example:8443/i.png"), S, ICON, No(CrossOrigin)),
    (Icon(SRV, "http://server.example/i.png"), S, ICON, No(Http)),
    (Icon(SRV, "https://user@server.example/i.png"), S, ICON, No(Userinfo)),
    (Icon(SRV, "javascript:alert(1)"), S, ICON, No(IconScheme)),
    (Icon(SRV, "file:///etc/passwd"), S, ICON, No(IconScheme)),
    (Icon(SRV, "ftp://server.example/i.png"), S, ICON, No(IconScheme)),
    (Icon(SRV, "/icon.png"), S, ICON, No(Unparsable)),
    (Icon(PNG_SRV_LOOPBACK, "http://localhost:8080/icon.png"), D, ICON, Name("localhost")),
    (Icon(SRV, PNG), S, ICON, Data(ImageKind::Png)),
    (Icon(SRV, GIF), S, ICON, Data(ImageKind::Gif)),
    (Icon(SRV, GIF_AS_PNG), S, ICON, No(Mismatch)),
    (Icon(SRV, SVG_ICON), S, ICON, No(Svg)),
    (Icon(SRV, SVG_ICON), SVG, ICON, Data(ImageKind::Svg)),
    (Icon(SRV, "data:text/html;base64,PHNjcmlwdD4="), S, ICON, No(MediaType)),
    (Icon(SRV, "data:image/png;base64,!!!"), S, ICON, No(Base64)),
    (Icon(SRV, "data:image/png;base64"), S, ICON, No(Malformed)),
    (Icon(SRV, "DATA:IMAGE/PNG;BASE64,iVBORw0KGgoAAAANSUhEUg=="), S, ICON, Data(ImageKind::Png)),
];

const PNG_SRV_LOOPBACK: &str = "http://localhost:8080/mcp";

/// Runs one row: `Ok` with the checked URL if there is one, or the refusal.
fn run(input: Input, policy: NetPolicy, purpose: UrlPurpose) -> Result<Outcome, UrlRejected> {
    Ok(match input {
        Url(u) => Outcome::Url(policy.check_url(u, purpose)?),
        Addr(a) => {
            policy.check_addr(a.parse().unwrap(), purpose)?;
            Outcome::Addr
        }
        Resolved(u, a) => {
            let checked = policy.check_url(u, purpose).expect("the URL itself passes");
            assert!(checked.needs_resolution() || matches!(checked.host(), CheckedHost::Addr(_)));
            let sock = policy.check_resolved(&checked, a.parse().unwrap())?;
            assert_eq!(sock.port(), checked.port());
            Outcome::Addr
        }
        Redirect(from, location) => {
            let from = D.check_url(from, purpose).expect("the first URL passes");
            Outcome::Url(policy.check_redirect(&from, location, purpose)?)
        }
        Icon(server, icon) => {
            let server = D.check_url(server, RM).expect("the server URL passes");
            match policy.check_icon_url(icon, &server)? {
                IconSource::Fetch(u) => Outcome::Url(u),
                IconSource::Data(d) => {
                    assert!(d.bytes.len() <= MAX_ICON_BYTES);
                    Outcome::Data(d.kind)
                }
                other => panic!("unexpected icon source {other:?}"),
            }
        }
    })
}

#[derive(Debug)]
enum Outcome {
    Url(CheckedUrl),
    Addr,
    Data(ImageKind),
}

#[test]
fn every_row_of_the_table_gets_its_verdict() {
    assert!(TABLE.len() >= 80, "{} rows", TABLE.len());
    let mut failures = Vec::new();
    for (i, &(input, policy, purpose, want)) in TABLE.iter().enumerate() {
        let got = run(input, policy, purpose);
        let ok = match (&got, want) {
            (Ok(_), Want::Ok) => true,
            (Ok(Outcome::Url(u)), At(a)) => u.host() == &CheckedHost::Addr(a.parse().unwrap()),
            (Ok(Outcome::Url(u)), Name(n)) => u.host() == &CheckedHost::Name(n.to_owned()),
            (Ok(Outcome::Data(k)), Data(w)) => *k == w,
            (Err(e), Range(r)) => e.blocked_range() == Some(r),
            (Err(e), No(k)) => kind(&e.reason) == Some(k),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "row {i}: {input:?} {policy:?} {purpose:?}: want {want:?}, got {got:?}"
            ));
        }
        if let Err(e) = &got {
            let message = e.to_string();
            assert!(message.starts_with("refused "), "{message}");
            assert!(message.contains(&purpose.to_string()), "{message}");
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
}

#[test]
fn a_redirect_chain_is_checked_hop_by_hop_and_stops_at_the_private_address() {
    let p = NetPolicy::default();
    let mut at = p
        .check_url(
            "https://mcp.example/.well-known/oauth-protected-resource",
            RM,
        )
        .unwrap();
    let hops = [
        "https://cdn.example/prm",
        "/prm/v2",
        "https://8.8.8.8/prm",
        "https://192.168.0.10/prm",
        "https://never.example/",
    ];
    let mut followed = Vec::new();
    let mut refusal = None;
    for location in hops {
        match p.check_redirect(&at, location, RM) {
            Ok(next) => {
                followed.push(next.as_given().to_owned());
                at = next;
            }
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    assert_eq!(
        followed,
        [
            "https://cdn.example/prm",
            "https://cdn.example/prm/v2",
            "https://8.8.8.8/prm"
        ]
    );
    let e = refusal.unwrap();
    assert_eq!(e.blocked_range(), Some(R::Private));
    assert_eq!(
        e.to_string(),
        "refused the redirect from \"https://8.8.8.8/prm\" to \"https://192.168.0.10/prm\" as \
         the protected resource metadata URL: its address 192.168.0.10 is in 192.168.0.0/16, a \
         private network (RFC 1918); private networks are allowed only when \
         NetPolicy::allow_private is set, for an internal server you trust"
    );
}

#[test]
fn the_metadata_refusal_names_the_service_and_the_url() {
    let e = NetPolicy::default()
        .check_url("http://169.254.169.254/latest/meta-data/", RM)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "refused the URL \"http://169.254.169.254/latest/meta-data/\" as the protected resource \
         metadata URL: its address 169.254.169.254 is the cloud instance metadata service (AWS, \
         GCP, Azure, Oracle and others); a metadata service is never allowed: it would hand this \
         machine's cloud credentials to whoever chose the URL"
    );
    let e = NetPolicy::default()
        .check_url("https://[::ffff:7f00:1]/", AS)
        .unwrap_err();
    assert!(
        e.to_string().contains(
            "its address ::ffff:127.0.0.1 carries the IPv4 address 127.0.0.1 (IPv4-mapped), \
             which is in 127.0.0.0/8, loopback"
        ),
        "{e}"
    );
}

#[test]
fn a_refused_scheme_is_named() {
    let e = NetPolicy::default()
        .check_url("javascript:alert(1)", AU)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "refused the URL \"javascript:alert(1)\" as the authorization URL to open in the \
         browser: the scheme \"javascript\" is not allowed: only https, or http to a loopback \
         host in development mode"
    );
}

#[test]
fn a_password_is_masked_in_the_message() {
    let e = NetPolicy::default()
        .check_url("https://me:hunter2@example.com/", AS)
        .unwrap_err();
    assert!(!e.to_string().contains("hunter2"), "{e}");
    assert!(e.to_string().contains("me:***@example.com"), "{e}");
}

#[test]
fn the_given_string_is_kept_for_exact_issuer_comparison() {
    let c = NetPolicy::default()
        .check_url("https://AS.example:443", AS)
        .unwrap();
    assert_eq!(c.as_given(), "https://AS.example:443");
    assert_eq!(c.url().as_str(), "https://as.example/");
    assert_eq!(c.port(), 443);
    assert!(c.needs_resolution());
    assert_eq!(c.socket_addr(), None);
    let c = NetPolicy::default()
        .check_url("https://8.8.8.8:8443/x", AS)
        .unwrap();
    assert!(!c.needs_resolution());
    assert_eq!(c.socket_addr(), Some("8.8.8.8:8443".parse().unwrap()));
}

#[test]
fn the_authorization_url_is_never_resolved() {
    let c = NetPolicy::default()
        .check_url("https://accounts.example/authorize?x=1", AU)
        .unwrap();
    assert!(!c.needs_resolution());
}

#[test]
fn an_oversized_data_icon_is_refused_before_and_after_decoding() {
    let server = NetPolicy::default().check_url(SRV, RM).unwrap();
    let mut body = b"\x89PNG\r\n\x1a\n".to_vec();
    body.resize(MAX_ICON_BYTES + 1, 0);
    let encoded: String = body.iter().map(|b| format!("%{b:02X}")).collect();
    let icon = format!("data:image/png,{encoded}");
    let e = NetPolicy::default()
        .check_icon_url(&icon, &server)
        .unwrap_err();
    assert!(
        matches!(e.reason, RejectReason::Icon(IconRejected::TooLarge { .. })),
        "{e}"
    );
    let raw_over = "A".repeat(MAX_ICON_URL_LEN);
    let e = NetPolicy::default()
        .check_icon_url(&format!("data:image/png;base64,{raw_over}"), &server)
        .unwrap_err();
    assert!(
        matches!(e.reason, RejectReason::Icon(IconRejected::TooLarge { .. })),
        "{e}"
    );
    let just_right = body.get(..MAX_ICON_BYTES).unwrap();
    assert_eq!(
        NetPolicy::default().check_icon_bytes(just_right),
        Ok(ImageKind::Png)
    );
    assert!(matches!(
        NetPolicy::default().check_icon_bytes(&body),
        Err(IconRejected::TooLarge { .. })
    ));
}

#[test]
fn fetched_icon_bytes_are_judged_by_their_magic_numbers() {
    let p = NetPolicy::default();
    assert_eq!(p.check_icon_bytes(b"GIF87a...."), Ok(ImageKind::Gif));
    assert_eq!(p.check_icon_bytes(b"<html>"), Err(IconRejected::NotAnImage));
    assert_eq!(
        p.check_icon_bytes(b"<svg/>"),
        Err(IconRejected::SvgNotAllowed)
    );
    assert_eq!(SVG.check_icon_bytes(b"<svg/>"), Ok(ImageKind::Svg));
    assert_eq!(sniff_image(b"\xff\xd8\xff\xdb"), Some(ImageKind::Jpeg));
}

#[test]
fn same_origin_compares_scheme_host_and_port_with_defaults() {
    let u = |s: &str| url::Url::parse(s).unwrap();
    assert!(same_origin(
        &u("https://a.example/x"),
        &u("https://a.example:443/y?z")
    ));
    assert!(same_origin(
        &u("http://a.example/"),
        &u("http://a.example:80/")
    ));
    assert!(!same_origin(
        &u("https://a.example/"),
        &u("http://a.example/")
    ));
    assert!(!same_origin(
        &u("https://a.example/"),
        &u("https://a.example:8443/")
    ));
    assert!(!same_origin(
        &u("https://a.example/"),
        &u("https://b.a.example/")
    ));
    assert!(!same_origin(
        &u("https://a.example/"),
        &u("https://a.example./")
    ));
    assert!(same_origin(
        &u("https://A.EXAMPLE/"),
        &u("https://a.example/")
    ));
    assert!(!same_origin(&u("data:,x"), &u("data:,x")));
    assert!(!same_origin(&u("file:///a"), &u("file:///a")));
}

#[test]
fn only_same_document_refs_are_local() {
    for r in ["", "#", "#/$defs/x", "#anchor"] {
        assert!(!is_network_ref(r), "{r:?}");
    }
    for r in [
        "https://example.com/schema.json",
        "http://169.254.169.254/",
        "file:///etc/passwd",
        "urn:uuid:deadbeef-1234-0000-0000-4321fedcba98",
        "other.json#/x",
        "//evil.example/s",
        "/schema",
        " #/a",
    ] {
        assert!(is_network_ref(r), "{r:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// The IPv4 blocks of the table with the range each must be refused as. A block that holds a
/// narrower entry (a metadata address, the broadcast address) may name that instead.
const V4_BLOCKS: &[([u8; 4], u8, BlockedRange)] = &[
    ([0, 0, 0, 0], 8, R::Unspecified),
    ([10, 0, 0, 0], 8, R::Private),
    ([100, 64, 0, 0], 10, R::SharedAddressSpace),
    ([127, 0, 0, 0], 8, R::Loopback),
    ([169, 254, 0, 0], 16, R::LinkLocal),
    ([172, 16, 0, 0], 12, R::Private),
    ([192, 0, 0, 0], 24, R::IetfProtocolAssignments),
    ([192, 0, 2, 0], 24, R::Documentation),
    ([192, 88, 99, 0], 24, R::SixToFourRelay),
    ([192, 168, 0, 0], 16, R::Private),
    ([198, 18, 0, 0], 15, R::Benchmarking),
    ([198, 51, 100, 0], 24, R::Documentation),
    ([203, 0, 113, 0], 24, R::Documentation),
    ([224, 0, 0, 0], 4, R::Multicast),
    ([240, 0, 0, 0], 4, R::Reserved),
];

fn in_block(index: usize, offset: u32) -> (Ipv4Addr, BlockedRange) {
    let (base, len, range) = V4_BLOCKS[index % V4_BLOCKS.len()];
    let host_mask = u32::MAX.checked_shr(u32::from(len)).unwrap_or(0);
    (
        Ipv4Addr::from(u32::from(Ipv4Addr::from(base)) | (offset & host_mask)),
        range,
    )
}

/// Whether `got` is an acceptable name for an address of a block expected as `want`.
fn names_block(got: Option<BlockedRange>, want: BlockedRange) -> bool {
    got == Some(want) || matches!(got, Some(R::CloudMetadata(_) | R::Broadcast))
}

/// The ways to write an IPv4 address in a URL host that the WHATWG parser reads as it.
fn spellings(a: Ipv4Addr) -> Vec<String> {
    let [o1, o2, o3, o4] = a.octets();
    let n = u32::from(a);
    vec![
        a.to_string(),
        n.to_string(),
        format!("0x{n:x}"),
        format!("0{o1:o}.0{o2:o}.0{o3:o}.0{o4:o}"),
        format!("{o1}.{o2}.{}", u32::from(o3) << 8 | u32::from(o4)),
        format!("{o1}.{}", n & 0x00ff_ffff),
        format!("{a}."),
        format!("[::ffff:{a}]"),
        format!("[{}]", a.to_ipv6_mapped()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn check_url_never_panics_on_any_string(s in any::<String>(), bits in 0u8..8, p in 0usize..6) {
        let _ = policy(bits).check_url(&s, purpose(p));
    }

    #[test]
    fn check_url_never_panics_on_url_shaped_strings(
        s in "(?i)(https?|data|javascript|file)://?[a-z0-9.:%@\\[\\]_~-]{0,40}(/[ -~]{0,20})?",
        location in "[ -~]{0,30}",
        bits in 0u8..8,
        p in 0usize..6,
    ) {
        let pol = policy(bits);
        if let Ok(c) = pol.check_url(&s, purpose(p)) {
            accepted_url_is_sound(&pol, &c);
            if let Ok(next) = pol.check_redirect(&c, &location, purpose(p)) {
                accepted_url_is_sound(&pol, &next);
                prop_assert!(!(c.url().scheme() == "https" && next.url().scheme() == "http"));
            }
            let _ = pol.check_icon_url(&location, &c);
        }
        let _ = is_network_ref(&s);
    }

    #[test]
    fn an_accepted_ip_host_has_an_allowed_address(
        octets in any::<[u8; 4]>(),
        segments in any::<[u16; 8]>(),
        v6 in any::<bool>(),
        bits in 0u8..8,
        p in 0usize..6,
    ) {
        let pol = policy(bits);
        let url = if v6 {
            format!("https://[{}]/", Ipv6Addr::from(segments))
        } else {
            format!("https://{}/", Ipv4Addr::from(octets))
        };
        if let Ok(c) = pol.check_url(&url, purpose(p)) {
            accepted_url_is_sound(&pol, &c);
        }
    }

    #[test]
    fn an_ipv4_address_in_a_blocked_block_is_refused_in_every_spelling(
        index in 0usize..V4_BLOCKS.len(),
        offset in any::<u32>(),
        p in 0usize..6,
    ) {
        let (addr, want) = in_block(index, offset);
        let actual = blocked_range(IpAddr::V4(addr)).map(|b| b.range);
        prop_assert!(names_block(actual, want), "{addr}: {actual:?}");
        let actual = actual.unwrap();
        for host in spellings(addr) {
            let url = format!("https://{host}/");
            let got = S.check_url(&url, purpose(p));
            // The authorization URL lets the private networks through, nothing else.
            if purpose(p) == AU && actual.is_private_network() {
                prop_assert!(got.is_ok(), "{url}: {got:?}");
                continue;
            }
            let e = got.unwrap_err();
            prop_assert_eq!(e.blocked_range(), Some(actual), "{}: {}", url, e);
            // Only loopback and the private networks can be opened by a policy.
            if actual != R::Loopback && !actual.is_private_network() {
                prop_assert!(ALL.check_url(&url, purpose(p)).is_err(), "{url}");
            }
        }
    }

    #[test]
    fn the_ipv4_mapped_form_of_a_blocked_address_is_refused(
        index in 0usize..V4_BLOCKS.len(),
        offset in any::<u32>(),
    ) {
        let (addr, want) = in_block(index, offset);
        for mapped in [IpAddr::V6(addr.to_ipv6_mapped()), IpAddr::V6(addr.to_ipv6_compatible())] {
            if mapped == IpAddr::V6(Ipv6Addr::UNSPECIFIED) || mapped == IpAddr::V6(Ipv6Addr::LOCALHOST) {
                continue;
            }
            let e = S.check_addr(mapped, RM).unwrap_err();
            let got = e.blocked_range();
            prop_assert!(names_block(got, want), "{mapped}: {e}");
        }
    }

    #[test]
    fn check_redirect_never_panics_and_never_downgrades(location in any::<String>(), bits in 0u8..8) {
        let pol = policy(bits);
        let from = pol.check_url("https://as.example/a/b?c", AS).unwrap();
        if let Ok(next) = pol.check_redirect(&from, &location, AS) {
            prop_assert_eq!(next.url().scheme(), "https");
            accepted_url_is_sound(&pol, &next);
        }
    }
}

fn policy(bits: u8) -> NetPolicy {
    NetPolicy {
        allow_loopback_http: bits & 1 != 0,
        allow_private: bits & 2 != 0,
        allow_svg_icons: bits & 4 != 0,
    }
}

fn purpose(i: usize) -> UrlPurpose {
    [RM, AS, ME, ICON, AU, CIMD][i % 6]
}

/// What holds for every accepted URL: an allowed scheme, no userinfo, an IP host that passes
/// `check_addr`, http only to loopback in development mode.
fn accepted_url_is_sound(pol: &NetPolicy, c: &CheckedUrl) {
    let u = c.url();
    assert!(matches!(u.scheme(), "https" | "http"), "{u}");
    assert!(u.username().is_empty() && u.password().is_none(), "{u}");
    if let CheckedHost::Addr(a) = c.host() {
        assert!(pol.check_addr(*a, c.purpose()).is_ok(), "{u}");
        assert_eq!(pol.check_resolved(c, *a).map(|s| s.ip()), Ok(*a), "{u}");
    }
    if u.scheme() == "http" {
        assert!(pol.allow_loopback_http, "{u}");
        match c.host() {
            CheckedHost::Addr(a) => {
                assert_eq!(blocked_range(*a).map(|b| b.range), Some(R::Loopback), "{u}")
            }
            CheckedHost::Name(n) => assert!(
                n.trim_end_matches('.') == "localhost"
                    || n.trim_end_matches('.').ends_with(".localhost"),
                "{u}"
            ),
        }
    }
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

#[test]
fn a_fetch_guard_keeps_the_resolved_addresses_that_pass_in_order_without_duplicates() {
    let g = FetchGuard {
        policy: S,
        purpose: RM,
    };
    let url = g.check_url("https://rebind.example/prm").unwrap();
    assert!(url.needs_resolution());
    let kept = g
        .connect_addrs(
            &url,
            ips(&[
                "127.0.0.1",
                "93.184.216.34",
                "10.0.0.1",
                "93.184.216.34",
                "2606:4700::1",
            ]),
        )
        .unwrap();
    let kept: Vec<String> = kept.iter().map(ToString::to_string).collect();
    assert_eq!(kept, ["93.184.216.34:443", "[2606:4700::1]:443"]);
    assert_eq!(
        g.connect_addrs(&url, []),
        Ok(Vec::new()),
        "no address: the driver's error"
    );
}

#[test]
fn a_fetch_guard_refuses_a_name_that_resolves_only_to_refused_addresses_naming_the_first() {
    let g = FetchGuard {
        policy: S,
        purpose: AS,
    };
    let url = g.check_url("https://rebind.example:8443/").unwrap();
    let e = g
        .connect_addrs(&url, ips(&["127.0.0.1", "169.254.169.254"]))
        .unwrap_err();
    assert_eq!(e.purpose, AS);
    assert_eq!(e.blocked_range(), Some(R::Loopback));
    let text = e.to_string();
    assert!(text.contains("127.0.0.1"), "{text}");
    assert!(text.contains("https://rebind.example:8443/"), "{text}");
    // Private networks pass when the policy opens them; loopback still does not.
    let p = FetchGuard {
        policy: P,
        purpose: AS,
    };
    assert_eq!(
        p.connect_addrs(&url, ips(&["127.0.0.1", "10.1.2.3"]))
            .unwrap(),
        ["10.1.2.3:8443".parse().unwrap()]
    );
}

#[test]
fn a_fetch_guard_in_development_mode_lets_localhost_through_to_loopback_only() {
    let g = FetchGuard {
        policy: D,
        purpose: RM,
    };
    let url = g.check_url("http://localhost:4000/prm").unwrap();
    assert_eq!(
        g.connect_addrs(&url, ips(&["::1", "127.0.0.1"])).unwrap(),
        [
            "[::1]:4000".parse().unwrap(),
            "127.0.0.1:4000".parse().unwrap()
        ]
    );
    let e = g.connect_addrs(&url, ips(&["93.184.216.34"])).unwrap_err();
    assert!(
        matches!(e.reason, RejectReason::ResolvedNotLoopback { .. }),
        "{e}"
    );
    // The strict guard refuses the same URL before anything resolves.
    let strict = FetchGuard {
        policy: S,
        purpose: RM,
    };
    assert_eq!(
        strict
            .check_url("http://localhost:4000/prm")
            .unwrap_err()
            .purpose,
        RM
    );
}

#[test]
fn a_fetch_guard_connects_an_ip_literal_to_its_own_address_whatever_resolved() {
    let g = FetchGuard {
        policy: S,
        purpose: ME,
    };
    let url = g.check_url("https://93.184.216.34:8443/token").unwrap();
    assert!(!url.needs_resolution());
    assert_eq!(
        g.connect_addrs(&url, ips(&["127.0.0.1"])).unwrap(),
        ["93.184.216.34:8443".parse().unwrap()]
    );
}

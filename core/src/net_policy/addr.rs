//! The address ranges a client must not reach, and the IPv6 forms that embed an IPv4 address.
//!
//! [`blocked_range`] classifies one address against a fixed table of CIDR blocks ([`ipnet`]
//! networks built at compile time), with no policy applied: it answers "which special range is
//! this in?", and [`NetPolicy::check_addr`](super::NetPolicy::check_addr) then decides whether
//! the policy lets that range through. Every address that is not in the table is a public,
//! globally routed address and classifies as `None`.
//!
//! # Order
//!
//! The table is searched from the most specific entry to the least, so an address is named by
//! the narrowest range it is in: `169.254.169.254` is the cloud metadata service before it is
//! link-local, `255.255.255.255` is broadcast before it is reserved (`240.0.0.0/4`),
//! `fd00:ec2::254` is AWS's metadata service before it is unique-local.
//!
//! # IPv6 forms that carry an IPv4 address
//!
//! An IPv6 address can stand for an IPv4 one; the IPv4 address inside is then classified under
//! the IPv4 rules, and a blocked result says which form carried it ([`Embedded`]):
//!
//! | form | prefix | decision |
//! | --- | --- | --- |
//! | IPv4-mapped | `::ffff:0:0/96` | the IPv4 address decides: a dual-stack socket sends `::ffff:a.b.c.d` to `a.b.c.d` |
//! | IPv4-compatible (deprecated, RFC 4291) | `::/96` | blocked: the IPv4 address's own range if it has one, else [`BlockedRange::Ipv4Compatible`]; no current stack routes these, and nothing legitimate uses them (`::` and `::1` are in this prefix and are classified first, as unspecified and loopback) |
//! | NAT64 well-known prefix (RFC 6052) | `64:ff9b::/96` | the IPv4 address decides: a DNS64 resolver on an IPv6-only network hands these out for every public IPv4 name, so they must pass, and a NAT64 gateway would carry `64:ff9b::10.0.0.1` to `10.0.0.1` |
//! | NAT64 local-use prefix (RFC 8215) | `64:ff9b:1::/48` | the IPv4 address in the last 32 bits (the `/96` layout, the common one) decides if it is blocked; otherwise [`BlockedRange::Nat64LocalUse`], which is the operator's own translation prefix and so counts as a private network |
//! | 6to4 (RFC 3056, deprecated by RFC 7526 for relays) | `2002::/16` | the IPv4 address in bits 16..48 decides: `2002:7f00:1::` stands for `127.0.0.1` |
//! | Teredo (RFC 4380) | `2001::/32` | blocked outright, see below |
//!
//! **Teredo.** A Teredo address carries two IPv4 addresses (the Teredo server's, and the
//! client's, bit-inverted), and traffic to it leaves as UDP through whatever relay the host has.
//! Checking one embedded address would not tell where the packets go, and no MCP server or
//! authorization server is reachable only over Teredo (Windows disabled the client by
//! default in 2023; IANA lists the prefix as not globally reachable). So the whole `2001::/32`
//! is refused as [`BlockedRange::Teredo`].
//!
//! **Everything outside `2000::/3`.** IANA has allocated only `2000::/3` as global unicast; the
//! rest of the IPv6 space is reserved by the IETF or special-purpose (`::/8`, `100::/8` with the
//! discard-only `100::/64` and RFC 9780's dummy prefix, `5f00::/16` for SRv6 segment
//! identifiers, `fc00::/7`, `fe80::/10`, `fec0::/10`, `ff00::/8`). After the named ranges and the
//! embedding forms above, any address outside `2000::/3` is refused as
//! [`BlockedRange::Ipv6NotGlobalUnicast`]: an allowlist rather than a blocklist for IPv6.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::fmt;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// A special-purpose address range a client refuses to connect to, unless its
/// [`NetPolicy`](super::NetPolicy) says otherwise (only [`Loopback`](Self::Loopback) and the
/// ranges for which [`is_private_network`](Self::is_private_network) holds can be allowed).
///
/// Its `Display` names the range in words; the CIDR block that matched is in [`Blocked::net`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlockedRange {
    /// `127.0.0.0/8`, `::1`, and the names `localhost` and `*.localhost` (RFC 6761).
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (RFC 1918).
    Private,
    /// `fc00::/7`, unique local addresses (RFC 4193): IPv6's private networks.
    UniqueLocal,
    /// `100.64.0.0/10`, shared address space (RFC 6598): carrier-grade NAT, and the range
    /// overlay networks such as Tailscale number their nodes in.
    SharedAddressSpace,
    /// `169.254.0.0/16`, `fe80::/10` (RFC 3927, RFC 4291).
    LinkLocal,
    /// `fec0::/10`, site-local IPv6, deprecated by RFC 3879.
    SiteLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `0.0.0.0/8` ("this network", RFC 791; connecting to `0.0.0.0` reaches the local host on
    /// most systems) and `::`.
    Unspecified,
    /// `255.255.255.255`, limited broadcast (RFC 919).
    Broadcast,
    /// `198.18.0.0/15`, `2001:2::/48`, benchmarking (RFC 2544, RFC 5180).
    Benchmarking,
    /// `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24` (RFC 5737), `2001:db8::/32`
    /// (RFC 3849), `3fff::/20` (RFC 9637): documentation only.
    Documentation,
    /// `192.0.0.0/24`, IETF protocol assignments (RFC 6890).
    IetfProtocolAssignments,
    /// `240.0.0.0/4`, reserved for future use (RFC 1112).
    Reserved,
    /// `192.88.99.0/24`, the former 6to4 relay anycast prefix (RFC 7526).
    SixToFourRelay,
    /// `100::/64`, discard-only (RFC 6666).
    DiscardOnly,
    /// `2001::/32`, Teredo tunnelling (RFC 4380): refused as a whole (see the module docs).
    Teredo,
    /// `::/96`, IPv4-compatible IPv6 addresses (deprecated by RFC 4291), when the IPv4 address
    /// inside is not itself in a blocked range.
    Ipv4Compatible,
    /// `64:ff9b:1::/48`, the NAT64 local-use prefix (RFC 8215), when the IPv4 address inside is
    /// not itself in a blocked range: the operator's private translation prefix.
    Nat64LocalUse,
    /// IPv6 outside `2000::/3`, the only block IANA allocates as global unicast.
    Ipv6NotGlobalUnicast,
    /// A cloud provider's instance metadata or credentials service, which hands out the
    /// machine's credentials to any local HTTP client.
    CloudMetadata(MetadataService),
}

impl BlockedRange {
    /// Whether this is one of the private-network ranges that
    /// [`NetPolicy::allow_private`](super::NetPolicy::allow_private) lets through: RFC 1918,
    /// unique-local IPv6, shared
    /// address space and the NAT64 local-use prefix. Link-local, site-local and the cloud
    /// metadata services are not among them.
    pub fn is_private_network(self) -> bool {
        matches!(
            self,
            Self::Private | Self::UniqueLocal | Self::SharedAddressSpace | Self::Nat64LocalUse
        )
    }

    /// What a person can do about a destination in this range.
    pub fn remedy(self) -> &'static str {
        match self {
            Self::Loopback => {
                "loopback is allowed only in development mode (NetPolicy::allow_loopback_http)"
            }
            r if r.is_private_network() => {
                "private networks are allowed only when NetPolicy::allow_private is set, for an \
                 internal server you trust"
            }
            Self::CloudMetadata(_) => {
                "a metadata service is never allowed: it would hand this machine's cloud \
                 credentials to whoever chose the URL"
            }
            _ => "no MCP or OAuth endpoint can live there, so no policy allows it",
        }
    }
}

impl fmt::Display for BlockedRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::Loopback => "loopback",
            Self::Private => "a private network (RFC 1918)",
            Self::UniqueLocal => "a unique local IPv6 network (RFC 4193)",
            Self::SharedAddressSpace => "shared address space, carrier-grade NAT (RFC 6598)",
            Self::LinkLocal => "link-local",
            Self::SiteLocal => "deprecated site-local IPv6 (RFC 3879)",
            Self::Multicast => "multicast",
            Self::Unspecified => "the unspecified address / \"this network\"",
            Self::Broadcast => "the limited broadcast address",
            Self::Benchmarking => "the benchmarking range (RFC 2544, RFC 5180)",
            Self::Documentation => "a documentation-only range",
            Self::IetfProtocolAssignments => "IETF protocol assignments (RFC 6890)",
            Self::Reserved => "reserved address space (RFC 1112)",
            Self::SixToFourRelay => "the deprecated 6to4 relay anycast range (RFC 7526)",
            Self::DiscardOnly => "the discard-only prefix (RFC 6666)",
            Self::Teredo => "Teredo tunnelling (RFC 4380)",
            Self::Ipv4Compatible => "a deprecated IPv4-compatible IPv6 address (RFC 4291)",
            Self::Nat64LocalUse => "the NAT64 local-use prefix (RFC 8215)",
            Self::Ipv6NotGlobalUnicast => {
                "IPv6 space outside global unicast 2000::/3 (reserved or special-purpose)"
            }
            Self::CloudMetadata(service) => return write!(f, "{service}"),
        };
        f.write_str(text)
    }
}

/// A cloud provider's metadata or credentials endpoint, refused under every policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MetadataService {
    /// `169.254.169.254`: the instance metadata service of AWS, GCP, Azure, Oracle Cloud,
    /// DigitalOcean, OpenStack and others.
    InstanceMetadata,
    /// `fd00:ec2::254`: AWS's instance metadata service over IPv6.
    AwsInstanceMetadataIpv6,
    /// `169.254.170.2`: AWS ECS task metadata and credentials.
    AwsEcsTaskMetadata,
    /// `169.254.170.23`, `fd00:ec2::23`: the AWS EKS Pod Identity agent.
    AwsEksPodIdentity,
    /// `100.100.100.200`: Alibaba Cloud's metadata service.
    AlibabaCloudMetadata,
    /// `168.63.129.16`: Azure's WireServer (a public address, but the host's own channel to
    /// the VM: extension settings and certificates).
    AzureWireServer,
}

impl fmt::Display for MetadataService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InstanceMetadata => {
                "the cloud instance metadata service (AWS, GCP, Azure, Oracle and others)"
            }
            Self::AwsInstanceMetadataIpv6 => "AWS's cloud instance metadata service (IPv6)",
            Self::AwsEcsTaskMetadata => "AWS ECS's cloud task metadata and credentials service",
            Self::AwsEksPodIdentity => "the AWS EKS Pod Identity cloud credentials agent",
            Self::AlibabaCloudMetadata => "Alibaba Cloud's cloud metadata service",
            Self::AzureWireServer => "Azure's WireServer (cloud host channel)",
        })
    }
}

/// How an IPv6 address carried the IPv4 address that was classified in its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Embedding {
    /// `::ffff:a.b.c.d`.
    Ipv4Mapped,
    /// `::a.b.c.d` (deprecated).
    Ipv4Compatible,
    /// `64:ff9b::a.b.c.d`.
    Nat64,
    /// `64:ff9b:1:…:a.b.c.d`.
    Nat64LocalUse,
    /// `2002:aabb:ccdd::/48`.
    SixToFour,
}

impl fmt::Display for Embedding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ipv4Mapped => "IPv4-mapped",
            Self::Ipv4Compatible => "IPv4-compatible",
            Self::Nat64 => "NAT64",
            Self::Nat64LocalUse => "NAT64 local-use",
            Self::SixToFour => "6to4",
        })
    }
}

/// The IPv4 address an IPv6 address carried, when that IPv4 address is what was blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Embedded {
    /// Which IPv6 form carried it.
    pub form: Embedding,
    /// The IPv4 address inside.
    pub ipv4: Ipv4Addr,
}

/// Why an address classifies as special: the range, the CIDR block that matched, and the IPv4
/// address inside when an IPv6 form carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Blocked {
    /// The range.
    pub range: BlockedRange,
    /// The block that matched (for an embedded IPv4 address, the IPv4 block; for
    /// [`BlockedRange::Ipv6NotGlobalUnicast`], `2000::/3`, the block the address is *outside*).
    pub net: IpNet,
    /// Set when the matched address is the IPv4 address inside an IPv6 one.
    pub embedded: Option<Embedded>,
}

impl fmt::Display for Blocked {
    /// `"is in 10.0.0.0/8, a private network (RFC 1918)"`, or `"carries the IPv4 address
    /// 10.0.0.1 (IPv4-mapped), which is in 10.0.0.0/8, ..."` when an IPv6 form carried it; a
    /// metadata service is named instead of its one-address block.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(e) = self.embedded {
            write!(
                f,
                "carries the IPv4 address {} ({}), which ",
                e.ipv4, e.form
            )?;
        }
        match self.range {
            BlockedRange::CloudMetadata(service) => write!(f, "is {service}"),
            BlockedRange::Ipv6NotGlobalUnicast => write!(f, "is {}", self.range),
            range => write!(f, "is in {}, {range}", self.net),
        }
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

const fn v6(s: [u16; 8], len: u8) -> Ipv6Net {
    Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        len,
    )
}

use BlockedRange as R;
use MetadataService as M;

/// The IPv4 table, most specific first. Built at compile time: a bad prefix length is a
/// compile error, never a runtime panic.
const V4: &[(Ipv4Net, BlockedRange)] = &[
    (
        v4(169, 254, 169, 254, 32),
        R::CloudMetadata(M::InstanceMetadata),
    ),
    (
        v4(169, 254, 170, 2, 32),
        R::CloudMetadata(M::AwsEcsTaskMetadata),
    ),
    (
        v4(169, 254, 170, 23, 32),
        R::CloudMetadata(M::AwsEksPodIdentity),
    ),
    (
        v4(100, 100, 100, 200, 32),
        R::CloudMetadata(M::AlibabaCloudMetadata),
    ),
    (
        v4(168, 63, 129, 16, 32),
        R::CloudMetadata(M::AzureWireServer),
    ),
    (v4(255, 255, 255, 255, 32), R::Broadcast),
    (v4(0, 0, 0, 0, 8), R::Unspecified),
    (v4(127, 0, 0, 0, 8), R::Loopback),
    (v4(10, 0, 0, 0, 8), R::Private),
    (v4(172, 16, 0, 0, 12), R::Private),
    (v4(192, 168, 0, 0, 16), R::Private),
    (v4(100, 64, 0, 0, 10), R::SharedAddressSpace),
    (v4(169, 254, 0, 0, 16), R::LinkLocal),
    (v4(192, 0, 0, 0, 24), R::IetfProtocolAssignments),
    (v4(192, 0, 2, 0, 24), R::Documentation),
    (v4(198, 51, 100, 0, 24), R::Documentation),
    (v4(203, 0, 113, 0, 24), R::Documentation),
    (v4(192, 88, 99, 0, 24), R::SixToFourRelay),
    (v4(198, 18, 0, 0, 15), R::Benchmarking),
    (v4(224, 0, 0, 0, 4), R::Multicast),
    (v4(240, 0, 0, 0, 4), R::Reserved),
];

/// The IPv6 ranges searched before the embedding forms, most specific first.
const V6: &[(Ipv6Net, BlockedRange)] = &[
    (
        v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128),
        R::CloudMetadata(M::AwsInstanceMetadataIpv6),
    ),
    (
        v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23], 128),
        R::CloudMetadata(M::AwsEksPodIdentity),
    ),
    (v6([0, 0, 0, 0, 0, 0, 0, 0], 128), R::Unspecified),
    (v6([0, 0, 0, 0, 0, 0, 0, 1], 128), R::Loopback),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), R::DiscardOnly),
    (v6([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48), R::Benchmarking),
    (v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32), R::Teredo),
    (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), R::Documentation),
    (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), R::Documentation),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), R::LinkLocal),
    (v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), R::SiteLocal),
    (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), R::UniqueLocal),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), R::Multicast),
];

const MAPPED: Ipv6Net = v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96);
const COMPATIBLE: Ipv6Net = v6([0, 0, 0, 0, 0, 0, 0, 0], 96);
const NAT64: Ipv6Net = v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96);
const NAT64_LOCAL: Ipv6Net = v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48);
const SIX_TO_FOUR: Ipv6Net = v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16);
const GLOBAL_UNICAST: Ipv6Net = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);

/// The special range `addr` is in, or `None` for a public, globally routed address.
///
/// No policy is applied: loopback and private addresses classify as such here even when a
/// [`NetPolicy`](super::NetPolicy) would allow them. See the module docs for the table, its
/// order and the IPv6 forms that carry an IPv4 address.
pub fn blocked_range(addr: IpAddr) -> Option<Blocked> {
    match addr {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => classify_v6(a),
    }
}

fn classify_v4(a: Ipv4Addr) -> Option<Blocked> {
    V4.iter()
        .find(|(net, _)| net.contains(&a))
        .map(|(net, range)| Blocked {
            range: *range,
            net: IpNet::V4(*net),
            embedded: None,
        })
}

/// The IPv4 address in the last 32 bits.
fn low_v4(a: Ipv6Addr) -> Ipv4Addr {
    let o = a.octets();
    Ipv4Addr::new(o[12], o[13], o[14], o[15])
}

/// Classifies the IPv4 address an IPv6 form carries; `None` if that IPv4 address is public.
fn embedded(form: Embedding, ipv4: Ipv4Addr) -> Option<Blocked> {
    classify_v4(ipv4).map(|b| Blocked {
        embedded: Some(Embedded { form, ipv4 }),
        ..b
    })
}

fn classify_v6(a: Ipv6Addr) -> Option<Blocked> {
    if let Some((net, range)) = V6.iter().find(|(net, _)| net.contains(&a)) {
        return Some(Blocked {
            range: *range,
            net: IpNet::V6(*net),
            embedded: None,
        });
    }
    let whole = |range, net: Ipv6Net| {
        Some(Blocked {
            range,
            net: IpNet::V6(net),
            embedded: None,
        })
    };
    if MAPPED.contains(&a) {
        return embedded(Embedding::Ipv4Mapped, low_v4(a));
    }
    if COMPATIBLE.contains(&a) {
        return embedded(Embedding::Ipv4Compatible, low_v4(a))
            .or_else(|| whole(R::Ipv4Compatible, COMPATIBLE));
    }
    if NAT64.contains(&a) {
        return embedded(Embedding::Nat64, low_v4(a));
    }
    if NAT64_LOCAL.contains(&a) {
        return embedded(Embedding::Nat64LocalUse, low_v4(a))
            .or_else(|| whole(R::Nat64LocalUse, NAT64_LOCAL));
    }
    if SIX_TO_FOUR.contains(&a) {
        let o = a.octets();
        return embedded(Embedding::SixToFour, Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    if !GLOBAL_UNICAST.contains(&a) {
        return whole(R::Ipv6NotGlobalUnicast, GLOBAL_UNICAST);
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn range(s: &str) -> Option<BlockedRange> {
        blocked_range(s.parse().unwrap()).map(|b| b.range)
    }

    #[test]
    fn the_narrowest_range_names_an_address() {
        assert_eq!(
            range("169.254.169.254"),
            Some(R::CloudMetadata(M::InstanceMetadata))
        );
        assert_eq!(range("169.254.1.1"), Some(R::LinkLocal));
        assert_eq!(range("255.255.255.255"), Some(R::Broadcast));
        assert_eq!(range("255.255.255.254"), Some(R::Reserved));
        assert_eq!(
            range("fd00:ec2::254"),
            Some(R::CloudMetadata(M::AwsInstanceMetadataIpv6))
        );
        assert_eq!(range("fd00:ec2::255"), Some(R::UniqueLocal));
    }

    #[test]
    fn public_addresses_are_not_classified() {
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "64:ff9b::808:808",
        ] {
            assert_eq!(range(a), None, "{a}");
        }
    }

    #[test]
    fn embedded_ipv4_is_classified_under_the_ipv4_rules() {
        let b = blocked_range("::ffff:10.1.2.3".parse().unwrap());
        assert_eq!(
            b.map(|b| (b.range, b.embedded.map(|e| e.form))),
            Some((R::Private, Some(Embedding::Ipv4Mapped)))
        );
        assert_eq!(range("2002:7f00:1::"), Some(R::Loopback));
        assert_eq!(range("2002:808:808::"), None);
        assert_eq!(range("::8.8.8.8"), Some(R::Ipv4Compatible));
        assert_eq!(range("64:ff9b:1::808:808"), Some(R::Nat64LocalUse));
        assert_eq!(range("64:ff9b:1::a00:1"), Some(R::Private));
    }

    #[test]
    fn ipv6_outside_global_unicast_is_refused() {
        assert_eq!(range("5f00::1"), Some(R::Ipv6NotGlobalUnicast));
        assert_eq!(range("4000::1"), Some(R::Ipv6NotGlobalUnicast));
        assert_eq!(range("100:0:0:1::1"), Some(R::Ipv6NotGlobalUnicast));
    }

    #[test]
    fn display_names_the_block_and_the_carried_address() {
        let b = blocked_range("::ffff:127.0.0.1".parse().unwrap());
        assert_eq!(
            b.map(|b| b.to_string()).as_deref(),
            Some("carries the IPv4 address 127.0.0.1 (IPv4-mapped), which is in 127.0.0.0/8, loopback")
        );
    }
}

//! The egress allowlist (seed 003, "Egress Allowlist (v0.3)"): which hosts and addresses a
//! sandbox may connect to when its network policy is `allowlist`. Deny by default: an empty
//! list allows nothing, and nothing is implied (`example.com` does not allow `www.example.com`,
//! `*.example.com` does not allow `example.com`).
//!
//! [`EgressAllowlist`] is the wire shape (`{"hosts": [...], "cidrs": [...], "ips": [...]}`);
//! [`EgressPolicy`] is a checked one, which decides ([`EgressPolicy::check_host`],
//! [`EgressPolicy::check_addr`]) and narrows ([`EgressPolicy::intersect`]: the effective list of a
//! run is the server's policy intersected with the request's).
//!
//! Addresses of the host's own networks (loopback, private, link-local with the cloud metadata
//! service, carrier-grade NAT, unspecified, multicast, broadcast, documentation-free reserved
//! space) are refused even when a host rule matches, unless an `ips` entry or a `cidrs` block
//! inside that special range names them: `0.0.0.0/0` does not open `127.0.0.1`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// Most rules of each kind in one list.
pub const MAX_RULES: usize = 256;

/// The wire form of an allowlist, as requests, configuration and records carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressAllowlist {
    /// Exact host names (`pypi.org`) or wildcards of subdomains (`*.example.com`).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Address blocks (`203.0.113.0/24`, `2001:db8::/32`).
    #[serde(default)]
    pub cidrs: Vec<String>,
    /// Single addresses (IPv4 or IPv6).
    #[serde(default)]
    pub ips: Vec<String>,
}

impl EgressAllowlist {
    /// Whether it has no rule at all.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.cidrs.is_empty() && self.ips.is_empty()
    }
}

/// What is wrong with an allowlist, for a 400 or a configuration error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressError {
    /// The field: `hosts`, `cidrs` or `ips`.
    pub field: &'static str,
    /// The offending entry.
    pub entry: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for EgressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: '{}': {}", self.field, self.entry, self.message)
    }
}

impl std::error::Error for EgressError {}

/// A host rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostRule {
    /// This name only.
    Exact(String),
    /// Any name that ends with `.` + this domain (never the domain itself).
    Subdomains(String),
}

impl HostRule {
    fn matches(&self, host: &str) -> bool {
        match self {
            HostRule::Exact(h) => h == host,
            HostRule::Subdomains(d) => {
                host.len() > d.len() + 1 && host.ends_with(d.as_str()) && {
                    host.as_bytes()[host.len() - d.len() - 1] == b'.'
                }
            }
        }
    }

    /// Whether every name this rule allows, `outer` allows too.
    fn within(&self, outer: &HostRule) -> bool {
        match (self, outer) {
            (HostRule::Exact(h), o) => o.matches(h),
            (HostRule::Subdomains(d), HostRule::Subdomains(e)) => {
                d == e || HostRule::Subdomains(e.clone()).matches(d)
            }
            (HostRule::Subdomains(_), HostRule::Exact(_)) => false,
        }
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostRule::Exact(h) => f.write_str(h),
            HostRule::Subdomains(d) => write!(f, "*.{d}"),
        }
    }
}

/// An address block (a single address is a full-length block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    /// The block of `addr`/`prefix`, its host bits cleared; `None` for a prefix longer than
    /// the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Net> {
        let bits = max_prefix(addr);
        (prefix <= bits).then(|| Net {
            addr: mask(addr, prefix),
            prefix,
        })
    }

    /// One address.
    pub fn single(addr: IpAddr) -> Net {
        Net {
            addr,
            prefix: max_prefix(addr),
        }
    }

    /// Whether `ip` is in the block (never across address families).
    pub fn contains(&self, ip: IpAddr) -> bool {
        same_family(self.addr, ip) && mask(ip, self.prefix) == self.addr
    }

    /// Whether every address of `self` is in `outer`.
    pub fn within(&self, outer: &Net) -> bool {
        self.prefix >= outer.prefix && outer.contains(self.addr)
    }

    fn is_single(&self) -> bool {
        self.prefix == max_prefix(self.addr)
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_single() {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

fn max_prefix(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - prefix as u32)
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & m))
        }
        IpAddr::V6(v6) => {
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - prefix as u32)
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & m))
        }
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is its IPv4 address: a rule or a refusal
/// of one holds for the other.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// The ranges no host rule opens: the host's own and its neighbours' networks.
const SPECIAL: &[(&str, &str)] = &[
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "carrier-grade NAT"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b::/96", "NAT64"),
    ("fc00::/7", "unique local (private)"),
    ("fe80::/10", "link-local"),
    ("ff00::/8", "multicast"),
];

/// The special range `ip` is in, if any: `(block, what it is)`.
pub fn special_range(ip: IpAddr) -> Option<(Net, &'static str)> {
    let ip = canonical(ip);
    SPECIAL.iter().find_map(|(block, what)| {
        let net = parse_net(block).expect("the special ranges parse");
        net.contains(ip).then_some((net, *what))
    })
}

fn parse_net(s: &str) -> Option<Net> {
    let (addr, prefix) = s.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    if !prefix.bytes().all(|b| b.is_ascii_digit()) || prefix.is_empty() || prefix.len() > 3 {
        return None;
    }
    let net = Net::new(addr, prefix.parse().ok()?)?;
    // `10.0.0.1/8` is most likely a typo for one of two things: refuse it.
    (net.addr == addr).then_some(net)
}

/// A checked allowlist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    hosts: Vec<HostRule>,
    nets: Vec<Net>,
}

/// Why a connection is refused (the audit event's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyReason {
    /// No rule allows the host or address.
    NoMatch,
    /// The address is not one the host name was pinned to at the run's start.
    DnsMismatch,
    /// The run's policy changed since the name was pinned.
    PolicyChanged,
    /// A host rule matched, but the address is in a special range no ip/cidr rule names.
    ForbiddenAddress,
}

impl DenyReason {
    /// The wire name (`no_match`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            DenyReason::NoMatch => "no_match",
            DenyReason::DnsMismatch => "dns_mismatch",
            DenyReason::PolicyChanged => "policy_changed",
            DenyReason::ForbiddenAddress => "forbidden_address",
        }
    }
}

/// A decision on one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The rule that matched (as written in the list), if one did.
    pub matched_rule: Option<String>,
    /// `None`: allowed.
    pub denied: Option<DenyReason>,
    /// Why, in words an agent can act on.
    pub message: String,
}

impl Decision {
    /// Whether the connection may go ahead.
    pub fn allowed(&self) -> bool {
        self.denied.is_none()
    }
}

impl EgressPolicy {
    /// Checks a wire allowlist: host names (lower-cased, a trailing dot dropped; a wildcard
    /// only as a whole leftmost label over at least two labels), blocks and addresses.
    pub fn parse(list: &EgressAllowlist) -> Result<EgressPolicy, EgressError> {
        for (field, v) in [
            ("hosts", &list.hosts),
            ("cidrs", &list.cidrs),
            ("ips", &list.ips),
        ] {
            if v.len() > MAX_RULES {
                return Err(EgressError {
                    field,
                    entry: format!("{} entries", v.len()),
                    message: format!("at most {MAX_RULES} entries"),
                });
            }
        }
        let mut hosts = Vec::new();
        for h in &list.hosts {
            hosts.push(parse_host_rule(h)?);
        }
        let mut nets = Vec::new();
        for c in &list.cidrs {
            let net = parse_net(c.trim()).ok_or_else(|| EgressError {
                field: "cidrs",
                entry: c.clone(),
                message: "not a CIDR block with its host bits zero (e.g. 203.0.113.0/24)".into(),
            })?;
            nets.push(Net::new(canonical(net.addr), net.prefix).unwrap_or(net));
        }
        for i in &list.ips {
            let ip: IpAddr = i.trim().parse().map_err(|_| EgressError {
                field: "ips",
                entry: i.clone(),
                message: "not an IPv4 or IPv6 address".into(),
            })?;
            nets.push(Net::single(canonical(ip)));
        }
        hosts.sort();
        hosts.dedup();
        nets.sort();
        nets.dedup();
        Ok(EgressPolicy { hosts, nets })
    }

    /// The wire form, in a stable order (what `policy_hash` and records carry).
    pub fn to_allowlist(&self) -> EgressAllowlist {
        EgressAllowlist {
            hosts: self.hosts.iter().map(ToString::to_string).collect(),
            cidrs: self
                .nets
                .iter()
                .filter(|n| !n.is_single())
                .map(ToString::to_string)
                .collect(),
            ips: self
                .nets
                .iter()
                .filter(|n| n.is_single())
                .map(ToString::to_string)
                .collect(),
        }
    }

    /// Whether it allows nothing.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.nets.is_empty()
    }

    /// Its host rules (exact names first, then wildcards).
    pub fn host_rules(&self) -> &[HostRule] {
        &self.hosts
    }

    /// What both allow: each rule of `request` as far as `self` (the server's policy) allows
    /// it. A request wildcard under a server wildcard stays; under only exact server names it
    /// becomes those names; a block overlapping a server block becomes the smaller of the two.
    pub fn intersect(&self, request: &EgressPolicy) -> EgressPolicy {
        let mut hosts = Vec::new();
        for r in &request.hosts {
            if self.hosts.iter().any(|s| r.within(s)) {
                hosts.push(r.clone());
            } else if let HostRule::Subdomains(_) = r {
                hosts.extend(
                    self.hosts
                        .iter()
                        .filter(|s| matches!(s, HostRule::Exact(h) if r.matches(h)))
                        .cloned(),
                );
            }
        }
        let mut nets = Vec::new();
        for r in &request.nets {
            for s in &self.nets {
                if r.within(s) {
                    nets.push(*r);
                } else if s.within(r) {
                    nets.push(*s);
                }
            }
        }
        hosts.sort();
        hosts.dedup();
        nets.sort();
        nets.dedup();
        EgressPolicy { hosts, nets }
    }

    /// The rules of `self` that `narrower` lost (to name them when a request asked for more
    /// than the server allows).
    pub fn dropped_by(&self, narrower: &EgressPolicy) -> Vec<String> {
        let mut out: Vec<String> = self
            .hosts
            .iter()
            .filter(|h| !narrower.hosts.contains(h))
            .map(ToString::to_string)
            .collect();
        out.extend(
            self.nets
                .iter()
                .filter(|n| !narrower.nets.contains(n))
                .map(ToString::to_string),
        );
        out
    }

    /// The host rule that allows `host` (a name, not an address literal), if any.
    pub fn host_rule(&self, host: &str) -> Option<&HostRule> {
        let host = normalize_host(host);
        self.hosts.iter().find(|r| r.matches(&host))
    }

    /// Whether a connection to `ip` may go ahead, reached by the name `host` (`None`: the
    /// program asked for the address itself). A name is checked against the host rules, an
    /// address against the ip/cidr rules; an address in a special range needs an ip/cidr rule
    /// inside that range whatever the name.
    pub fn check_addr(&self, host: Option<&str>, ip: IpAddr) -> Decision {
        let ip = canonical(ip);
        let net_rule = self.nets.iter().find(|n| n.contains(ip));
        if let Some((range, what)) = special_range(ip) {
            return match self
                .nets
                .iter()
                .find(|n| n.contains(ip) && n.within(&range))
            {
                Some(rule) => allow(rule.to_string(), format!("{ip} is allowed by {rule}")),
                None => Decision {
                    matched_rule: host
                        .and_then(|h| self.host_rule(h))
                        .map(ToString::to_string)
                        .or_else(|| net_rule.map(ToString::to_string)),
                    denied: Some(DenyReason::ForbiddenAddress),
                    message: format!(
                        "{} is a {what} address ({range}); only an ips or cidrs rule inside \
                         {range} allows it",
                        describe(host, ip)
                    ),
                },
            };
        }
        if let Some(h) = host
            && let Some(rule) = self.host_rule(h)
        {
            return allow(rule.to_string(), format!("{h} is allowed by {rule}"));
        }
        if let Some(rule) = net_rule {
            return allow(rule.to_string(), format!("{ip} is allowed by {rule}"));
        }
        Decision {
            matched_rule: None,
            denied: Some(DenyReason::NoMatch),
            message: format!("{} not in allowlist", describe(host, ip)),
        }
    }
}

fn describe(host: Option<&str>, ip: IpAddr) -> String {
    match host {
        Some(h) => format!("host {h} ({ip})"),
        None => format!("address {ip}"),
    }
}

fn allow(rule: String, message: String) -> Decision {
    Decision {
        matched_rule: Some(rule),
        denied: None,
        message,
    }
}

/// A host name as rules compare it: lower case, no trailing dot.
pub fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn parse_host_rule(raw: &str) -> Result<HostRule, EgressError> {
    let err = |m: &str| EgressError {
        field: "hosts",
        entry: raw.to_string(),
        message: m.to_string(),
    };
    let h = normalize_host(raw.trim());
    let (wild, name) = match h.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, h.as_str()),
    };
    if name.is_empty() || name.len() > 253 {
        return Err(err("not a host name"));
    }
    if name.parse::<IpAddr>().is_ok() || name.starts_with('[') {
        return Err(err("an address belongs in ips or cidrs"));
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(err(if label.contains('*') {
                "a wildcard is only `*.` before a domain (e.g. *.example.com)"
            } else {
                "not a host name (letters, digits, '-' and '_' in dot-separated labels)"
            }));
        }
    }
    if wild {
        if !name.contains('.') {
            return Err(err(
                "a wildcard needs a domain of at least two labels (*.example.com, not *.com)",
            ));
        }
        Ok(HostRule::Subdomains(name.to_string()))
    } else {
        Ok(HostRule::Exact(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(hosts: &[&str], cidrs: &[&str], ips: &[&str]) -> EgressPolicy {
        EgressPolicy::parse(&EgressAllowlist {
            hosts: hosts.iter().map(|s| s.to_string()).collect(),
            cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
            ips: ips.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn host_rules_are_exact_or_subdomains_and_nothing_is_implied() {
        let p = policy(&["PyPI.org.", "*.example.com"], &[], &[]);
        let public = ip("203.0.113.7");
        assert!(p.check_addr(Some("pypi.org"), public).allowed());
        assert!(p.check_addr(Some("PYPI.ORG."), public).allowed());
        assert!(!p.check_addr(Some("files.pypi.org"), public).allowed());
        assert!(p.check_addr(Some("a.example.com"), public).allowed());
        assert!(p.check_addr(Some("a.b.example.com"), public).allowed());
        let d = p.check_addr(Some("example.com"), public);
        assert_eq!(d.denied, Some(DenyReason::NoMatch));
        assert_eq!(d.message, "host example.com (203.0.113.7) not in allowlist");
        assert!(!p.check_addr(Some("badexample.com"), public).allowed());
        assert_eq!(
            p.check_addr(Some("x.example.com"), public)
                .matched_rule
                .as_deref(),
            Some("*.example.com")
        );
        // A host rule says nothing about the address asked for directly.
        assert!(!p.check_addr(None, public).allowed());
    }

    #[test]
    fn bad_entries_are_named() {
        for (list, want) in [
            (
                EgressAllowlist {
                    hosts: vec!["*.com".into()],
                    ..Default::default()
                },
                "hosts: '*.com'",
            ),
            (
                EgressAllowlist {
                    hosts: vec!["a.*.com".into()],
                    ..Default::default()
                },
                "only `*.`",
            ),
            (
                EgressAllowlist {
                    hosts: vec!["10.0.0.1".into()],
                    ..Default::default()
                },
                "belongs in ips",
            ),
            (
                EgressAllowlist {
                    cidrs: vec!["10.0.0.1/8".into()],
                    ..Default::default()
                },
                "host bits zero",
            ),
            (
                EgressAllowlist {
                    cidrs: vec!["10.0.0.0/33".into()],
                    ..Default::default()
                },
                "cidrs: '10.0.0.0/33'",
            ),
            (
                EgressAllowlist {
                    ips: vec!["localhost".into()],
                    ..Default::default()
                },
                "not an IPv4 or IPv6 address",
            ),
            (
                EgressAllowlist {
                    hosts: vec!["a b".into()],
                    ..Default::default()
                },
                "not a host name",
            ),
        ] {
            let e = EgressPolicy::parse(&list).unwrap_err().to_string();
            assert!(e.contains(want), "{e} should say {want}");
        }
        let many = EgressAllowlist {
            ips: (0..=MAX_RULES)
                .map(|i| format!("203.0.113.{}", i % 250))
                .collect(),
            ..Default::default()
        };
        assert!(EgressPolicy::parse(&many).is_err());
    }

    #[test]
    fn blocks_and_addresses_match_by_family() {
        let p = policy(&[], &["203.0.113.0/24", "2001:db8::/32"], &["198.51.100.9"]);
        assert!(p.check_addr(None, ip("203.0.113.200")).allowed());
        assert!(!p.check_addr(None, ip("203.0.114.1")).allowed());
        assert!(p.check_addr(None, ip("2001:db8::1")).allowed());
        assert!(p.check_addr(None, ip("198.51.100.9")).allowed());
        assert!(!p.check_addr(None, ip("198.51.100.10")).allowed());
        // An IPv4-mapped IPv6 address is its IPv4 address.
        assert!(p.check_addr(None, ip("::ffff:203.0.113.5")).allowed());
        assert_eq!(
            p.to_allowlist(),
            EgressAllowlist {
                hosts: vec![],
                cidrs: vec!["203.0.113.0/24".into(), "2001:db8::/32".into()],
                ips: vec!["198.51.100.9".into()],
            }
        );
    }

    #[test]
    fn the_hosts_own_networks_need_a_rule_inside_them() {
        // A name allowed by a host rule that resolves to loopback or the metadata service, and
        // a block covering everything, open none of them.
        let p = policy(&["internal.example.com"], &["0.0.0.0/0", "::/0"], &[]);
        for addr in [
            "127.0.0.1",
            "169.254.169.254",
            "10.1.2.3",
            "192.168.0.1",
            "172.20.0.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
        ] {
            let d = p.check_addr(Some("internal.example.com"), ip(addr));
            assert_eq!(
                d.denied,
                Some(DenyReason::ForbiddenAddress),
                "{addr}: {d:?}"
            );
        }
        let d = p.check_addr(None, ip("169.254.169.254"));
        assert!(
            d.message.contains("link-local (cloud metadata)"),
            "{}",
            d.message
        );
        assert!(p.check_addr(None, ip("8.8.8.8")).allowed());
        // Named explicitly, they are allowed.
        let p = policy(&["pypi.test"], &["10.0.0.0/8"], &["127.0.0.1"]);
        assert!(p.check_addr(Some("pypi.test"), ip("127.0.0.1")).allowed());
        assert!(p.check_addr(None, ip("10.9.9.9")).allowed());
        assert!(!p.check_addr(None, ip("127.0.0.2")).allowed());
        // A block wider than the special range does not name it.
        let p = policy(&[], &["8.0.0.0/5"], &[]);
        assert!(!p.check_addr(None, ip("10.0.0.1")).allowed());
    }

    #[test]
    fn a_request_can_only_narrow_the_servers_policy() {
        let server = policy(
            &[
                "pypi.org",
                "*.pythonhosted.org",
                "github.com",
                "api.example.com",
            ],
            &["203.0.113.0/24"],
            &["198.51.100.1"],
        );
        let request = policy(
            &[
                "pypi.org",
                "files.pythonhosted.org",
                "*.cdn.pythonhosted.org",
                "evil.com",
                "*.example.com",
            ],
            &["203.0.113.128/25", "0.0.0.0/0"],
            &["198.51.100.2"],
        );
        let eff = server.intersect(&request);
        assert_eq!(
            eff.to_allowlist(),
            EgressAllowlist {
                hosts: vec![
                    "api.example.com".into(),
                    "files.pythonhosted.org".into(),
                    "pypi.org".into(),
                    "*.cdn.pythonhosted.org".into(),
                ],
                cidrs: vec!["203.0.113.0/24".into(), "203.0.113.128/25".into()],
                ips: vec!["198.51.100.1".into()],
            }
        );
        assert_eq!(
            request.dropped_by(&eff),
            vec!["evil.com", "*.example.com", "0.0.0.0/0", "198.51.100.2"]
        );
        // An empty server policy allows nothing, whatever the request asks.
        assert!(EgressPolicy::default().intersect(&request).is_empty());
    }
}

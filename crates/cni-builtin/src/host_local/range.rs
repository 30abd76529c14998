//! Ranges and range sets with the Go allocator's rules: defaults, validation and its messages,
//! overlap checks, and the round-robin walk over a set.

use std::net::IpAddr;

/// An address as a number and a family, for Go's `ip.NextIP` and `ip.Cmp`.
fn num(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address after `ip`, in the same family.
pub(crate) fn next_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(u32::from(v4).wrapping_add(1).into()),
        IpAddr::V6(v6) => IpAddr::V6(u128::from(v6).wrapping_add(1).into()),
    }
}

/// Go's `canonicalizeIP`: an IPv4-mapped IPv6 address is IPv4.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// A CIDR as `net.ParseCIDR` gives it: the address as written (host bits kept) and the prefix,
/// with whether it was written as IPv6 (then its mask has 128 bits even for a mapped address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    pub(crate) ip: IpAddr,
    pub(crate) prefix: u8,
    pub(crate) v6_mask: bool,
}

impl Cidr {
    /// `net.ParseCIDR`; `None` where Go says "invalid CIDR address".
    pub(crate) fn parse(s: &str) -> Option<Cidr> {
        let (addr, mask) = s.split_once('/')?;
        let ip: IpAddr = addr.parse().ok()?;
        if mask.is_empty() || !mask.bytes().all(|b| b.is_ascii_digit()) || mask.len() > 8 {
            return None;
        }
        let prefix: u32 = mask.parse().ok()?;
        let bits = if ip.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return None;
        }
        Some(Cidr {
            ip: canonical(ip),
            prefix: prefix as u8,
            v6_mask: ip.is_ipv6(),
        })
    }

    /// The mask's length in bits (`Mask.Size()`'s second value).
    fn mask_bits(self) -> u32 {
        if self.v6_mask { 128 } else { 32 }
    }

    /// `net.IPNet.String()`.
    pub(crate) fn to_go_string(self) -> String {
        let prefix = if self.ip.is_ipv4() && self.v6_mask {
            self.prefix.saturating_sub(96)
        } else {
            self.prefix
        };
        format!("{}/{prefix}", self.ip)
    }

    fn host_mask(self) -> u128 {
        let bits = if self.ip.is_ipv4() { 32 } else { 128 };
        let prefix = u32::from(self.prefix).min(bits);
        if prefix == bits {
            0
        } else {
            (u128::MAX >> (128 - bits)) >> prefix
        }
    }

    fn network(self) -> u128 {
        num(self.ip) & !self.host_mask()
    }

    /// `net.IPNet.Contains`.
    fn contains(self, ip: IpAddr) -> bool {
        self.ip.is_ipv4() == ip.is_ipv4() && num(ip) & !self.host_mask() == self.network()
    }
}

fn from_num(v4: bool, n: u128) -> IpAddr {
    if v4 {
        IpAddr::V4((n as u32).into())
    } else {
        IpAddr::V6(n.into())
    }
}

/// One range as written in the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RangeSpec {
    pub(crate) subnet: Option<Cidr>,
    pub(crate) range_start: Option<IpAddr>,
    pub(crate) range_end: Option<IpAddr>,
    pub(crate) gateway: Option<IpAddr>,
}

/// A range after `Canonicalize`: every bound set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) subnet: Cidr,
    pub(crate) start: IpAddr,
    pub(crate) end: IpAddr,
    pub(crate) gateway: IpAddr,
}

/// `Range.Contains` with possibly unset bounds, as during `Canonicalize`.
fn contains(subnet: Cidr, start: Option<IpAddr>, end: Option<IpAddr>, addr: IpAddr) -> bool {
    let addr = canonical(addr);
    subnet.contains(addr)
        && start.is_none_or(|s| num(addr) >= num(s))
        && end.is_none_or(|e| num(addr) <= num(e))
}

impl RangeSpec {
    /// `Range.Canonicalize`, with its messages.
    pub(crate) fn canonicalize(&self) -> Result<Range, String> {
        let Some(subnet) = self.subnet else {
            return Err("IP <nil> not v4 nor v6".to_owned());
        };
        let ones = u32::from(subnet.prefix);
        if ones + 2 > subnet.mask_bits() {
            return Err(format!(
                "Network {} too small to allocate from",
                subnet.to_go_string()
            ));
        }
        if subnet.ip.is_ipv4() == subnet.v6_mask {
            return Err("IPNet IP and Mask version mismatch".to_owned());
        }
        let network = from_num(subnet.ip.is_ipv4(), subnet.network());
        if network != subnet.ip {
            return Err(format!(
                "Network has host bits set. For a subnet mask of length {ones} the network address is {network}"
            ));
        }
        let gateway = self.gateway.map_or_else(|| next_ip(subnet.ip), canonical);
        let start = match self.range_start {
            Some(start) => {
                let start = canonical(start);
                if !contains(subnet, Some(start), self.range_end, start) {
                    return Err(format!(
                        "RangeStart {start} not in network {}",
                        subnet.to_go_string()
                    ));
                }
                start
            }
            None => next_ip(subnet.ip),
        };
        let end = if let Some(end) = self.range_end {
            let end = canonical(end);
            if !contains(subnet, Some(start), Some(end), end) {
                return Err(format!(
                    "RangeEnd {end} not in network {}",
                    subnet.to_go_string()
                ));
            }
            end
        } else {
            let last = subnet.network() | subnet.host_mask();
            // Go's lastIP leaves out the IPv4 broadcast address, not IPv6's last one.
            let last = if subnet.ip.is_ipv4() { last - 1 } else { last };
            from_num(subnet.ip.is_ipv4(), last)
        };
        Ok(Range {
            subnet,
            start,
            end,
            gateway,
        })
    }
}

impl Range {
    /// `Range.Contains`.
    pub(crate) fn contains(&self, addr: IpAddr) -> bool {
        contains(self.subnet, Some(self.start), Some(self.end), addr)
    }

    fn overlaps(&self, other: &Range) -> bool {
        if self.start.is_ipv4() != other.start.is_ipv4() {
            return false;
        }
        self.contains(other.start)
            || self.contains(other.end)
            || other.contains(self.start)
            || other.contains(self.end)
    }

    /// `Range.String()`: `start-end`.
    fn to_go_string(self) -> String {
        format!("{}-{}", self.start, self.end)
    }
}

/// A range set after `Canonicalize`: never empty, one family, no overlaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeSet(pub(crate) Vec<Range>);

/// `RangeSet.Canonicalize`.
pub(crate) fn canonicalize_set(specs: &[RangeSpec]) -> Result<RangeSet, String> {
    if specs.is_empty() {
        return Err("empty range set".to_owned());
    }
    let mut ranges: Vec<Range> = Vec::with_capacity(specs.len());
    for spec in specs {
        let range = spec.canonicalize()?;
        if let Some(first) = ranges.first()
            && first.start.is_ipv4() != range.start.is_ipv4()
        {
            return Err("mixed address families".to_owned());
        }
        ranges.push(range);
    }
    for (i, r1) in ranges.iter().enumerate() {
        for r2 in &ranges[i + 1..] {
            if r1.overlaps(r2) {
                return Err(format!(
                    "subnets {} and {} overlap",
                    r1.to_go_string(),
                    r2.to_go_string()
                ));
            }
        }
    }
    Ok(RangeSet(ranges))
}

impl RangeSet {
    /// `RangeSet.RangeFor`, with its message.
    pub(crate) fn range_for(&self, addr: IpAddr) -> Result<&Range, String> {
        self.0.iter().find(|r| r.contains(addr)).ok_or_else(|| {
            format!(
                "{} not in range set {}",
                canonical(addr),
                self.to_go_string()
            )
        })
    }

    /// `RangeSet.Contains`.
    pub(crate) fn contains(&self, addr: IpAddr) -> bool {
        self.0.iter().any(|r| r.contains(addr))
    }

    /// `RangeSet.Overlaps`.
    pub(crate) fn overlaps(&self, other: &RangeSet) -> bool {
        self.0
            .iter()
            .any(|r| other.0.iter().any(|r1| r.overlaps(r1)))
    }

    /// `RangeSet.String()`.
    pub(crate) fn to_go_string(&self) -> String {
        let parts: Vec<String> = self.0.iter().map(|r| r.to_go_string()).collect();
        parts.join(",")
    }

    /// The first family's IPv4-ness (all ranges share it).
    pub(crate) fn is_v4(&self) -> bool {
        self.0.first().is_some_and(|r| r.start.is_ipv4())
    }
}

/// The allocator's `RangeIter`: round robin from the address after the last reserved one, or
/// from the first range's start; gateways skipped; ends where it began.
#[derive(Debug)]
pub(crate) struct Walk<'a> {
    set: &'a RangeSet,
    index: usize,
    cur: Option<IpAddr>,
    start: Option<IpAddr>,
}

impl<'a> Walk<'a> {
    /// `GetIter`: `last` is the last reserved address when the set contains it.
    pub(crate) fn new(set: &'a RangeSet, last: Option<IpAddr>) -> Walk<'a> {
        let last = last.map(canonical).filter(|ip| set.contains(*ip));
        match last {
            Some(ip) => Walk {
                set,
                index: set.0.iter().position(|r| r.contains(ip)).unwrap_or(0),
                cur: Some(ip),
                start: None,
            },
            None => Walk {
                set,
                index: 0,
                cur: None,
                start: set.0.first().map(|r| r.start),
            },
        }
    }
}

impl Iterator for Walk<'_> {
    /// An address and its range.
    type Item = (IpAddr, Range);

    fn next(&mut self) -> Option<(IpAddr, Range)> {
        // Go recurses once per gateway met; a loop does the same.
        loop {
            let mut range = *self.set.0.get(self.index)?;
            match self.cur {
                None => {
                    self.cur = Some(range.start);
                    self.start = Some(range.start);
                    if range.start != range.gateway {
                        return Some((range.start, range));
                    }
                    continue;
                }
                Some(cur) if cur == range.end => {
                    self.index = (self.index + 1) % self.set.0.len();
                    range = self.set.0[self.index];
                    self.cur = Some(range.start);
                }
                Some(cur) => self.cur = Some(next_ip(cur)),
            }
            let cur = self.cur?;
            match self.start {
                None => self.start = Some(cur),
                Some(start) if start == cur => return None,
                Some(_) => {}
            }
            if cur != range.gateway {
                return Some((cur, range));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(subnet: &str) -> RangeSpec {
        RangeSpec {
            subnet: Cidr::parse(subnet),
            ..RangeSpec::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn defaults_like_go() {
        let r = spec("10.1.2.0/24").canonicalize().unwrap();
        assert_eq!(
            (r.start, r.end, r.gateway),
            (ip("10.1.2.1"), ip("10.1.2.254"), ip("10.1.2.1"))
        );
        let r = spec("fd00::/120").canonicalize().unwrap();
        assert_eq!(r.end, ip("fd00::ff"));
    }

    #[test]
    fn messages_like_go() {
        let err = |s: RangeSpec| s.canonicalize().unwrap_err();
        assert_eq!(
            err(spec("10.0.0.0/31")),
            "Network 10.0.0.0/31 too small to allocate from"
        );
        assert_eq!(
            err(spec("10.0.0.1/24")),
            "Network has host bits set. For a subnet mask of length 24 the network address is 10.0.0.0"
        );
        let mut s = spec("10.0.0.0/24");
        s.range_start = Some(ip("10.0.1.5"));
        assert_eq!(err(s), "RangeStart 10.0.1.5 not in network 10.0.0.0/24");
        assert_eq!(err(RangeSpec::default()), "IP <nil> not v4 nor v6");
    }

    #[test]
    fn walks_round_robin_skipping_the_gateway() {
        let set = canonicalize_set(&[spec("10.0.0.0/29")]).unwrap();
        let all: Vec<String> = Walk::new(&set, None)
            .map(|(ip, _)| ip.to_string())
            .collect();
        assert_eq!(
            all,
            ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
        );
        let from: Vec<String> = Walk::new(&set, Some(ip("10.0.0.4")))
            .map(|(ip, _)| ip.to_string())
            .collect();
        assert_eq!(
            from,
            ["10.0.0.5", "10.0.0.6", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
        );
    }
}

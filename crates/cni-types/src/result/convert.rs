//! Conversions between result versions, following libcni's converters.

use super::wire::{Shape, misfit};
use super::{CniResult, IpConfig};
use crate::error::{Error, Result};
use crate::version::Version;

pub(super) fn to_version(result: &CniResult, to: Version) -> Result<CniResult> {
    let from_shape = Shape::of(result.cni_version)?;
    let to_shape = Shape::of(to)?;
    let fail = |reason: String| Error::Convert {
        from: result.cni_version.to_string(),
        to: to.to_string(),
        reason,
    };

    let mut out = result.clone();
    out.cni_version = to;
    if to_shape == Shape::V02 && from_shape != Shape::V02 {
        if result.ips.is_empty() {
            return Err(fail(
                "no IP address; 0.1.0/0.2.0 results need at least one".to_owned(),
            ));
        }
        // The old shape has one address per family and no interfaces: keep the first of each
        // family (with its gateway) and forget which interface it was on, as libcni does.
        // 1.1.0-only fields are checked first, so dropped interfaces cannot hide them.
        if let Some(reason) = misfit(result, Shape::V04) {
            return Err(fail(reason));
        }
        let first = |ipv4: bool| {
            result
                .ips
                .iter()
                .find(|ip| ip.is_ipv4() == ipv4)
                .map(|ip| IpConfig {
                    interface: None,
                    ..ip.clone()
                })
        };
        out.ips = first(true).into_iter().chain(first(false)).collect();
        out.interfaces.clear();
    }
    match misfit(&out, to_shape) {
        Some(reason) => Err(fail(reason)),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Interface, Route};

    fn dual_stack(version: Version) -> CniResult {
        let mut r = CniResult::new(version).unwrap();
        r.interfaces.push(Interface {
            sandbox: "/var/run/netns/x".to_owned(),
            ..Interface::new("eth0")
        });
        for (addr, gw) in [
            ("fd00::5/64", "fd00::1"),
            ("10.0.0.5/24", "10.0.0.1"),
            ("10.0.1.5/24", "10.0.1.1"),
        ] {
            r.ips.push(IpConfig {
                gateway: Some(gw.parse().unwrap()),
                interface: Some(0),
                ..IpConfig::new(addr.parse().unwrap())
            });
        }
        r.routes.push(Route::new("0.0.0.0/0".parse().unwrap()));
        r.routes.push(Route::new("::/0".parse().unwrap()));
        r
    }

    #[test]
    fn down_to_0_2_0_keeps_the_first_address_of_each_family() {
        let old = to_version(&dual_stack(Version::V1_0_0), Version::V0_2_0).unwrap();
        let addrs: Vec<String> = old.ips.iter().map(|ip| ip.address.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.5/24", "fd00::5/64"]);
        assert!(old.interfaces.is_empty());
        assert!(old.ips.iter().all(|ip| ip.interface.is_none()));
        assert_eq!(old.routes.len(), 2);
    }

    #[test]
    fn same_shape_only_relabels() {
        let r = dual_stack(Version::V0_3_0);
        let up = to_version(&r, Version::V0_4_0).unwrap();
        assert_eq!(up.cni_version(), Version::V0_4_0);
        assert_eq!(
            (up.interfaces, up.ips, up.routes),
            (r.interfaces, r.ips, r.routes)
        );
    }

    #[test]
    fn from_0_2_0_shape_to_0_1_0_keeps_everything() {
        let mut r = CniResult::new(Version::V0_2_0).unwrap();
        r.ips.push(IpConfig::new("10.0.0.5/24".parse().unwrap()));
        let older = to_version(&r, Version::V0_1_0).unwrap();
        assert_eq!(older.ips, r.ips);
    }
}

//! Pure facts about MetaX GPUs: families, units, device-node numbers and which functions are
//! SR-IOV virtual functions. No IO; each function has a table test.

/// `mxSmlDeviceBrand_t` values.
const BRAND_N: u32 = 1;
const BRAND_C: u32 = 2;
const BRAND_G: u32 = 3;

/// The product family: `MXC` (the C series, training and inference: C500, C550), `MXN`
/// (N series, inference: N260) or `MXG` (G series, graphics), from the name MXSML reports
/// (`MXC500`; `MetaX C500` as `mx-smi` prints it is read the same way), else from the device
/// info's brand (1 N, 2 C, 3 G). `None` when neither says.
pub fn family(name: &str, brand: u32) -> Option<&'static str> {
    let upper = name.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix("METAX").unwrap_or(&upper).trim_start();
    let rest = rest.strip_prefix("MX").unwrap_or(rest);
    let by_name = match rest.chars().next() {
        Some('C') => Some("MXC"),
        Some('N') => Some("MXN"),
        Some('G') => Some("MXG"),
        _ => None,
    };
    // A bare letter must be followed by a model number (`C500`), so that an unrelated word
    // (`Graphics`) is not read as a series.
    let well_formed = rest.chars().nth(1).is_some_and(|c| c.is_ascii_digit());
    by_name.filter(|_| well_formed).or(match brand {
        BRAND_N => Some("MXN"),
        BRAND_C => Some("MXC"),
        BRAND_G => Some("MXG"),
        _ => None,
    })
}

/// MXSML memory (KB) in MiB; a negative figure is no figure.
pub fn kb_to_mib(kb: i64) -> Option<u64> {
    u64::try_from(kb).ok().map(|kb| kb / 1024)
}

/// The hotspot temperature (0.01 °C) in whole degrees.
pub fn celsius(centidegrees: i32) -> i32 {
    centidegrees / 100
}

/// The board's power: the sum of its inputs (mW) in whole watts; no input reported is no
/// reading.
pub fn watts(ways_mw: &[u32]) -> Option<u32> {
    (!ways_mw.is_empty()).then(|| {
        let total: u64 = ways_mw.iter().map(|&p| u64::from(p)).sum();
        (total / 1000) as u32
    })
}

/// A utilization reading as a percentage; a negative one (MXSML's "unknown") is none.
pub fn percent(value: i32) -> Option<u32> {
    u32::try_from(value).ok().map(|v| v.min(100))
}

/// `[cardN, renderDN]` from the entry names of a PCI function's `drm` directory; empty when
/// the function has no card node (the DRM driver is not bound).
pub fn drm_indexes(entries: &[String]) -> Vec<u32> {
    let number = |prefix: &str| {
        entries
            .iter()
            .filter_map(|n| n.strip_prefix(prefix)?.parse::<u32>().ok())
            .min()
    };
    match number("card") {
        Some(card) => std::iter::once(card).chain(number("renderD")).collect(),
        None => Vec::new(),
    }
}

/// An SR-IOV virtual function, by MXSML's virtualization mode or by sysfs (a VF has a
/// `physfn` link to its physical function). A VF shares its parent card's silicon, so it is
/// never an accelerator of its own on the host (the reference skips them too).
pub fn is_virtual_function(mode: u32, has_physfn: bool) -> bool {
    mode == super::mxsml::MODE_VF || has_physfn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families() {
        let table = [
            ("MXC500", 0, Some("MXC")),
            ("MXC550", 2, Some("MXC")),
            ("MetaX C500", 0, Some("MXC")),
            ("MXN260", 0, Some("MXN")),
            ("mxg100", 0, Some("MXG")),
            ("Graphics", 3, Some("MXG")),
            ("Unnamed", 2, Some("MXC")),
            ("", 1, Some("MXN")),
            ("", 0, None),
            ("XYZ", 9, None),
        ];
        for (name, brand, want) in table {
            assert_eq!(family(name, brand), want, "{name} / {brand}");
        }
    }

    #[test]
    fn units() {
        assert_eq!(kb_to_mib(67_108_864), Some(65_536));
        assert_eq!(kb_to_mib(-1), None);
        assert_eq!(celsius(4512), 45);
        assert_eq!(watts(&[180_400, 95_600, 0]), Some(276));
        assert_eq!(watts(&[]), None);
        assert_eq!(percent(35), Some(35));
        assert_eq!(percent(130), Some(100));
        assert_eq!(percent(-1), None);
    }

    #[test]
    fn drm_nodes() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(drm_indexes(&names(&["card3", "renderD131"])), [3, 131]);
        assert_eq!(drm_indexes(&names(&["renderD128", "card0"])), [0, 128]);
        assert_eq!(drm_indexes(&names(&["card1"])), [1]);
        assert!(drm_indexes(&names(&["renderD128"])).is_empty());
        assert!(drm_indexes(&[]).is_empty());
    }

    #[test]
    fn virtual_functions() {
        assert!(!is_virtual_function(0, false));
        assert!(!is_virtual_function(1, false), "a PF is the card itself");
        assert!(is_virtual_function(2, false));
        assert!(is_virtual_function(0, true));
    }
}

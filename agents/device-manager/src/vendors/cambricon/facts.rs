//! Pure facts about Cambricon MLUs: ids, names, versions and which CNDev figures count as
//! measured. No IO; each function has a table test.

/// The accelerator id of a card: CNDev's UUID (`cndevGetUUID`, 36 characters such as
/// `10001012-1916-0000-0000-000000000000`) with the `MLU-` prefix that Cambricon's device plugin
/// and the reference both put in front of it (`MLU-10001012-1916-…`). A UUID that already
/// carries the prefix is kept as is; an empty or all-zero one identifies nothing and gives
/// `None` (a card is never identified by its PCI address instead).
pub fn accelerator_id(uuid: &str) -> Option<String> {
    let uuid = uuid.trim();
    let bare = uuid.strip_prefix("MLU-").unwrap_or(uuid);
    if bare.chars().all(|c| c == '0' || c == '-') {
        return None;
    }
    Some(format!("MLU-{bare}"))
}

/// The product name from `cndevGetCardNameStringByDevId` (`MLU370-X8`); CNDev answers
/// `Unknown` for a product it has no name for, and then (or with no answer) the card is an
/// `MLU`. The group id later drops a leading `Cambricon` should a name carry it.
pub fn product_name(raw: Option<&str>) -> String {
    match raw.map(str::trim) {
        Some(name) if !name.is_empty() && !name.eq_ignore_ascii_case("unknown") => name.to_owned(),
        _ => "MLU".to_owned(),
    }
}

/// The sysfs bus id of `cndevPCIeInfo_t`'s domain/bus/device/function.
pub fn bus_id(domain: u32, bus: u32, device: u32, function: u32) -> String {
    format!("{domain:04x}:{bus:02x}:{device:02x}.{function:x}")
}

/// The driver version as `cnmon` prints it (`5.10.22`), from `cndevVersionInfo_t`'s
/// `driverMajorVersion`, `driverMinorVersion` and `driverBuildVersion`. All zero is no answer.
pub fn driver_version(major: u32, minor: u32, build: u32) -> Option<String> {
    (major, minor, build)
        .ne(&(0, 0, 0))
        .then(|| format!("{major}.{minor}.{build}"))
}

/// The toolkit (Neuware / CNToolkit) release from its `version.txt`: the first
/// `major.minor.patch` in the text, the way the reference reads the same file.
pub fn toolkit_version(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        if bytes[start].is_ascii_digit() && (start == 0 || !bytes[start - 1].is_ascii_digit()) {
            let end = bytes[start..]
                .iter()
                .position(|b| !(b.is_ascii_digit() || *b == b'.'))
                .map_or(bytes.len(), |n| start + n);
            let candidate = text[start..end].trim_end_matches('.');
            let parts: Vec<&str> = candidate.split('.').collect();
            if parts.len() >= 3 && parts[..3].iter().all(|p| !p.is_empty()) {
                return Some(parts[..3].join("."));
            }
            start = end;
        } else {
            start += 1;
        }
    }
    None
}

/// Memory in MiB from a `cndevMemoryInfo_t` figure (MB in CNDev's words, binary megabytes as
/// `cnmon` shows them); zero or negative is no answer.
pub fn memory_mib(mb: i64) -> Option<u64> {
    u64::try_from(mb).ok().filter(|m| *m > 0)
}

/// MLU cores from `cndevCardCoreCount_t`; zero or negative is no answer.
pub fn cores(count: i32) -> Option<u32> {
    u32::try_from(count).ok().filter(|c| *c > 0)
}

/// A card is unhealthy when `cndevGetCardHealthState` says sick (`health` 0; 1 is healthy) or
/// `cndevGetECCInfo` counts uncorrected errors. A query CNDev refuses holds nothing against the
/// card.
pub fn unhealthy(health: Option<i32>, ecc_uncorrected: Option<u64>) -> bool {
    health == Some(0) || ecc_uncorrected.is_some_and(|e| e > 0)
}

/// A percentage (`averageCoreUtilization`) bounded to 0–100; negative is no answer.
pub fn percent(value: i32) -> Option<u32> {
    u32::try_from(value).ok().map(|v| v.min(100))
}

/// The temperature to report: the chip's, else the board's. CNDev leaves a sensor the product
/// lacks at 0, and no powered MLU runs at or below 0 °C, so a non-positive reading is no reading.
pub fn temperature(chip: i32, board: i32) -> Option<i32> {
    [chip, board].into_iter().find(|t| *t > 0)
}

/// Power draw in W (`cndevPowerInfo_t.usage`); negative is no answer.
pub fn watts(usage: i32) -> Option<u32> {
    u32::try_from(usage).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_the_mlu_prefix_once() {
        let uuid = "10001012-1916-0000-0000-00000000a1b2";
        assert_eq!(accelerator_id(uuid).unwrap(), format!("MLU-{uuid}"));
        assert_eq!(
            accelerator_id(&format!("MLU-{uuid}")).unwrap(),
            format!("MLU-{uuid}")
        );
        assert_eq!(accelerator_id(""), None);
        assert_eq!(accelerator_id("00000000-0000-0000-0000-000000000000"), None);
    }

    #[test]
    fn names() {
        assert_eq!(product_name(Some(" MLU370-X8 ")), "MLU370-X8");
        assert_eq!(product_name(Some("Unknown")), "MLU");
        assert_eq!(product_name(Some("")), "MLU");
        assert_eq!(product_name(None), "MLU");
    }

    #[test]
    fn bus_ids() {
        assert_eq!(bus_id(0, 0x1a, 0, 0), "0000:1a:00.0");
        assert_eq!(bus_id(1, 0xb1, 0x1f, 7), "0001:b1:1f.7");
    }

    #[test]
    fn versions() {
        assert_eq!(driver_version(5, 10, 22).as_deref(), Some("5.10.22"));
        assert_eq!(driver_version(0, 0, 0), None);
        assert_eq!(
            toolkit_version("Neuware Version 3.8.4\n").as_deref(),
            Some("3.8.4")
        );
        assert_eq!(
            toolkit_version("cntoolkit: 3.15.6-1.ubuntu22.04\n").as_deref(),
            Some("3.15.6")
        );
        assert_eq!(
            toolkit_version("release 2024 build 3.7.2.1").as_deref(),
            Some("3.7.2")
        );
        assert_eq!(toolkit_version("v3.8"), None);
        assert_eq!(toolkit_version(""), None);
    }

    #[test]
    fn figures() {
        assert_eq!(memory_mib(49152), Some(49152));
        assert_eq!(memory_mib(0), None);
        assert_eq!(memory_mib(-1), None);
        assert_eq!(cores(32), Some(32));
        assert_eq!(cores(0), None);
        assert_eq!(percent(37), Some(37));
        assert_eq!(percent(130), Some(100));
        assert_eq!(percent(-1), None);
        assert_eq!(watts(75), Some(75));
        assert_eq!(watts(0), Some(0));
        assert_eq!(watts(-1), None);
    }

    #[test]
    fn temperatures() {
        assert_eq!(temperature(52, 38), Some(52));
        assert_eq!(temperature(0, 38), Some(38));
        assert_eq!(temperature(0, 0), None);
        assert_eq!(temperature(-5, 0), None);
    }

    #[test]
    fn health() {
        assert!(!unhealthy(Some(1), Some(0)));
        assert!(unhealthy(Some(0), None));
        assert!(unhealthy(Some(1), Some(3)));
        assert!(
            !unhealthy(None, None),
            "refused queries hold nothing against a card"
        );
    }
}

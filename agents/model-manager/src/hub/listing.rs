//! Interpreting the hub's API answers: the revision, the tree listing, pagination and error
//! statuses. Pure: the client hands in bodies, statuses and headers.

use reqwest::Url;
use serde::Deserialize;

use crate::{
    failure::{Failure, Reason},
    filter::FileFilter,
    manifest::{FileDigest, Manifest, ManifestEntry},
};

/// Pagination stops (as an error) beyond this many entries.
pub const MAX_ENTRIES: usize = 100_000;
/// A listing page larger than this is refused.
pub const MAX_PAGE_BYTES: usize = 16 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    #[error("revision not found")]
    RevisionNotFound,
    #[error("access denied: {0}")]
    AccessDenied(String),
    #[error("hub unavailable: {0}")]
    Unavailable(String),
    #[error("invalid listing: {0}")]
    Invalid(String),
}

impl ListingError {
    /// Listing errors other than access and availability mean the tree is not what the
    /// artifact resolved to.
    pub fn into_failure(self) -> Failure {
        let reason = match &self {
            ListingError::AccessDenied(_) => Reason::AccessDenied,
            ListingError::Unavailable(_) => Reason::SourceUnavailable,
            ListingError::RevisionNotFound | ListingError::Invalid(_) => Reason::IntegrityMismatch,
        };
        Failure::new(reason, format!("listing the files: {self}"))
    }
}

/// A non-success API status, by the hub's `X-Error-Code` where it has one.
pub fn classify_status(status: u16, error_code: Option<&str>) -> ListingError {
    match (status, error_code) {
        (404, Some("RevisionNotFound")) => ListingError::RevisionNotFound,
        (_, Some("GatedRepo")) => ListingError::AccessDenied("the repository is gated".into()),
        (401 | 403 | 404, _) => ListingError::AccessDenied(format!("HTTP {status}")),
        _ => ListingError::Unavailable(format!("HTTP {status}")),
    }
}

#[derive(Deserialize)]
struct RevisionBody {
    sha: String,
}

/// The commit id from `/api/models/{repo}/revision/{rev}`.
pub fn parse_revision(body: &[u8]) -> Result<String, ListingError> {
    let r: RevisionBody = serde_json::from_slice(body)
        .map_err(|e| ListingError::Invalid(format!("revision body: {e}")))?;
    crate::hex::check(&r.sha, 40).ok_or_else(|| {
        ListingError::Invalid(format!("revision sha {:?} is not 40 hex digits", r.sha))
    })
}

#[derive(Deserialize)]
struct TreeItem {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    oid: String,
    #[serde(default)]
    size: u64,
    path: String,
    #[serde(default)]
    lfs: Option<LfsInfo>,
}

#[derive(Deserialize)]
struct LfsInfo {
    oid: String,
    size: u64,
}

/// The files of one page of `/api/models/{repo}/tree/{sha}?recursive=true`, directories skipped.
pub fn parse_tree_page(body: &[u8]) -> Result<Vec<ManifestEntry>, ListingError> {
    if body.len() > MAX_PAGE_BYTES {
        return Err(ListingError::Invalid(
            "a listing page exceeds 16 MiB".into(),
        ));
    }
    let items: Vec<TreeItem> = serde_json::from_slice(body)
        .map_err(|e| ListingError::Invalid(format!("tree body: {e}")))?;
    let mut files = Vec::new();
    for item in items {
        if item.kind == "directory" {
            continue;
        }
        let digest = match &item.lfs {
            Some(lfs) => {
                if !lfs.oid.is_empty() && lfs.oid.bytes().all(|b| b == b'*') {
                    return Err(ListingError::AccessDenied("the repository is gated".into()));
                }
                if lfs.size != item.size {
                    return Err(ListingError::Invalid(format!(
                        "{}: lfs.size {} differs from size {}",
                        item.path, lfs.size, item.size
                    )));
                }
                FileDigest::sha256(&lfs.oid)
            }
            None => FileDigest::git_sha1(&item.oid),
        }
        .map_err(|e| ListingError::Invalid(format!("{}: {e}", item.path)))?;
        files.push(ManifestEntry {
            path: item.path,
            size: item.size,
            digest,
        });
    }
    Ok(files)
}

/// The `rel="next"` target of a `Link` header, refused when it leaves `current`'s host.
pub fn next_page(link: &str, current: &Url) -> Result<Option<Url>, ListingError> {
    for part in link.split(',') {
        let mut pieces = part.split(';');
        let Some(target) = pieces.next() else {
            continue;
        };
        let is_next = pieces.any(|p| {
            let p = p.trim().replace(' ', "");
            p == "rel=\"next\"" || p == "rel=next"
        });
        if !is_next {
            continue;
        }
        let target = target.trim().trim_start_matches('<').trim_end_matches('>');
        let url = current
            .join(target)
            .map_err(|e| ListingError::Invalid(format!("next page link: {e}")))?;
        if !same_origin(&url, current) {
            return Err(ListingError::Invalid(
                "the next page link leaves the hub's host".into(),
            ));
        }
        return Ok(Some(url));
    }
    Ok(None)
}

/// Same scheme, host and port.
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// The filtered manifest of a whole listing.
pub fn manifest_of(
    files: Vec<ManifestEntry>,
    filter: &FileFilter,
) -> Result<Manifest, ListingError> {
    let kept = files
        .into_iter()
        .filter(|f| filter.keeps(&f.path))
        .collect();
    Manifest::new(kept).map_err(|e| ListingError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_reasons() {
        let table: &[(u16, Option<&str>, Reason)] = &[
            (404, Some("RevisionNotFound"), Reason::IntegrityMismatch),
            (404, Some("EntryNotFound"), Reason::AccessDenied),
            (404, None, Reason::AccessDenied),
            (401, Some("RepoNotFound"), Reason::AccessDenied),
            (403, None, Reason::AccessDenied),
            (403, Some("GatedRepo"), Reason::AccessDenied),
            (429, None, Reason::SourceUnavailable),
            (500, None, Reason::SourceUnavailable),
            (502, Some("GatedRepo"), Reason::AccessDenied),
        ];
        for (status, code, want) in table {
            assert_eq!(
                classify_status(*status, *code).into_failure().reason,
                *want,
                "{status} {code:?}"
            );
        }
    }

    #[test]
    fn revision_must_be_40_hex() {
        let sha = "a".repeat(40);
        assert_eq!(
            parse_revision(format!(r#"{{"sha":"{sha}"}}"#).as_bytes()),
            Ok(sha)
        );
        assert!(parse_revision(br#"{"sha":"main"}"#).is_err());
        assert!(parse_revision(b"not json").is_err());
    }

    #[test]
    fn tree_page_skips_dirs_and_checks_lfs() {
        let oid = "b".repeat(64);
        let body = format!(
            r#"[{{"type":"directory","oid":"{d}","size":0,"path":"sub"}},
               {{"type":"file","oid":"{c}","size":6,"path":"sub/a.txt"}},
               {{"type":"file","oid":"{c}","size":9,"path":"m.bin","lfs":{{"oid":"{oid}","size":9,"pointerSize":130}}}}]"#,
            d = "d".repeat(40),
            c = "c".repeat(40)
        );
        let files = parse_tree_page(body.as_bytes()).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].digest, FileDigest::GitSha1("c".repeat(40)));
        assert_eq!(files[1].digest, FileDigest::Sha256(oid.clone()));

        let gated = format!(
            r#"[{{"type":"file","oid":"{c}","size":9,"path":"m","lfs":{{"oid":"{s}","size":9}}}}]"#,
            c = "c".repeat(40),
            s = "*".repeat(64)
        );
        assert!(matches!(
            parse_tree_page(gated.as_bytes()),
            Err(ListingError::AccessDenied(_))
        ));
        let wrong = format!(
            r#"[{{"type":"file","oid":"{c}","size":9,"path":"m","lfs":{{"oid":"{oid}","size":8}}}}]"#,
            c = "c".repeat(40)
        );
        assert!(matches!(
            parse_tree_page(wrong.as_bytes()),
            Err(ListingError::Invalid(_))
        ));
    }

    #[test]
    fn pagination_stays_on_the_host() {
        let cur = Url::parse("https://hub.example/api/models/o/n/tree/x?recursive=true").unwrap();
        let next = next_page(
            r#"<https://hub.example/api/models/o/n/tree/x?cursor=2>; rel="next""#,
            &cur,
        );
        assert_eq!(next.unwrap().unwrap().query(), Some("cursor=2"));
        assert_eq!(next_page(r#"</p2>; rel="prev""#, &cur), Ok(None));
        assert_eq!(
            next_page(r#"</p2>; rel="next""#, &cur)
                .unwrap()
                .unwrap()
                .as_str(),
            "https://hub.example/p2"
        );
        assert!(next_page(r#"<https://evil.example/p2>; rel="next""#, &cur).is_err());
        assert!(next_page(r#"<http://hub.example/p2>; rel="next""#, &cur).is_err());
    }

    #[test]
    fn manifest_applies_the_filter() {
        let f = |p: &str| ManifestEntry {
            path: p.into(),
            size: 1,
            digest: FileDigest::GitSha1("0".repeat(40)),
        };
        let filter = FileFilter::new(&["*.json".into()], &[]);
        let m = manifest_of(vec![f("a.json"), f("b.bin")], &filter).unwrap();
        assert_eq!(m.entries().len(), 1);
    }
}

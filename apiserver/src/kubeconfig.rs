//! The admin kubeconfig of an embedded cluster: server URL, CA, and a bearer token that the
//! store keeps only as a hash.

use std::{fs, io::Write, os::unix::fs::OpenOptionsExt, path::Path};

use base64::{Engine, engine::general_purpose::STANDARD, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::Rng;
use serde_json::{Value, json};

/// A new random admin token (256 bits).
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The kubeconfig document for `cluster`.
pub fn render(cluster: &str, server: &str, ca_pem: &str, token: &str) -> String {
    let user = format!("{cluster}-admin");
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": STANDARD.encode(ca_pem)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user, "namespace": "default"}}],
        "current-context": cluster,
        "preferences": {},
    });
    serde_yaml_ng::to_string(&doc).unwrap_or_default()
}

/// The admin token in an existing kubeconfig at `path`, if it has one.
pub fn read_token(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let doc: Value = serde_yaml_ng::from_str(&text).ok()?;
    doc.pointer("/users/0/user/token")
        .and_then(Value::as_str)
        .map(String::from)
}

/// Writes `text` to `path` atomically with mode 0600.
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("kubeconfig.tmp");
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo.kubeconfig");
        let token = new_token();
        assert!(token.len() >= 43);
        write(&path, &render("demo", "https://127.0.0.1:1", "PEM", &token)).unwrap();
        assert_eq!(read_token(&path).as_deref(), Some(token.as_str()));
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("server: https://127.0.0.1:1"));
        assert!(text.contains("current-context: demo"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

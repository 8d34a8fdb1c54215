//! `--store`: which database keeps the hub's bookkeeping. `sqlite` (the default) keeps it in
//! the embedded API server's database under `--data-dir`; a `postgres://` or `postgresql://`
//! URL names a PostgreSQL database, with libpq's parameter names (`sslmode` as libpq spells its
//! modes, `host=/dir` for a unix socket). What libpq takes from the environment (`PGUSER`,
//! `PGPASSWORD`, ...) and `~/.pgpass` fills in what the URL leaves out, as with libpq.
//!
//! The password is kept for connecting only: the setting shows (Display and Debug) as the URL
//! rebuilt from its parts without it, and errors never echo the value given.

use std::{fmt, str::FromStr};

use sqlx::postgres::{PgConnectOptions, PgSslMode};

/// The query parameters a `postgres://` URL may carry (libpq's names that sqlx reads). Others
/// are refused: sqlx would log an unknown one's value, which may be a misplaced secret.
const PARAMETERS: &[&str] = &[
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

/// libpq's `sslmode` values, in its order (weakest first).
pub const SSL_MODES: &[&str] = &[
    "disable",
    "allow",
    "prefer",
    "require",
    "verify-ca",
    "verify-full",
];

/// Where the hub's bookkeeping is kept.
#[derive(Clone, Default)]
pub enum StoreSetting {
    /// Beside the objects, in the embedded API server's SQLite database.
    #[default]
    Sqlite,
    /// A PostgreSQL database.
    Postgres(PostgresSetting),
}

/// A parsed `postgres://` URL: what to connect with, and how to show it.
#[derive(Clone)]
pub struct PostgresSetting {
    /// Boxed: several hundred bytes, carried in errors and options that are moved around.
    options: Box<PgConnectOptions>,
}

impl PostgresSetting {
    /// The options the pool connects with (the password inside, never printed).
    pub fn connect_options(&self) -> &PgConnectOptions {
        &self.options
    }
}

/// Why a `--store` value was refused. None of these carries the value given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingError {
    /// Neither `sqlite` nor a `postgres://` URL.
    #[error("want sqlite or a postgres:// (postgresql://) URL")]
    Scheme,
    /// A query parameter outside the ones supported.
    #[error("unknown parameter {0:?}; known are {known}", known = PARAMETERS.join(", "))]
    UnknownParameter(String),
    /// An `sslmode` libpq does not name.
    #[error("sslmode must be one of {modes}", modes = SSL_MODES.join(", "))]
    SslMode,
    /// The URL does not parse.
    #[error("not a valid URL: {0}")]
    Url(String),
    /// A user is named but no host or socket directory.
    #[error("a user but no host: name the server's host, or its socket directory as host=/DIR")]
    NoHost,
}

impl FromStr for StoreSetting {
    type Err = SettingError;

    fn from_str(value: &str) -> Result<Self, SettingError> {
        if value == "sqlite" {
            return Ok(StoreSetting::Sqlite);
        }
        let Some(rest) = value
            .strip_prefix("postgres://")
            .or_else(|| value.strip_prefix("postgresql://"))
        else {
            return Err(SettingError::Scheme);
        };
        let has_socket = check_parameters(rest)?;
        let value = with_host(value, rest, has_socket)?;
        let options = PgConnectOptions::from_str(&value).map_err(|e| match e {
            // sqlx's own wording of a bad URL names the part, never the value.
            sqlx::Error::Configuration(why) => SettingError::Url(why.to_string()),
            other => SettingError::Url(other.to_string()),
        })?;
        Ok(StoreSetting::Postgres(PostgresSetting {
            options: Box::new(options),
        }))
    }
}

/// `value` as a URL parser takes it: libpq's `postgres://user@/db?host=/dir` (a user and no
/// host, the socket given as a parameter) is not a valid URL, so a stand-in host is put where
/// the `host` parameter overrides it anyway.
fn with_host<'v>(
    value: &'v str,
    rest: &str,
    has_host_parameter: bool,
) -> Result<std::borrow::Cow<'v, str>, SettingError> {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if !authority.ends_with('@') {
        return Ok(value.into());
    }
    if !has_host_parameter {
        return Err(SettingError::NoHost);
    }
    let at = value.len() - rest.len() + end;
    Ok(format!("{}localhost{}", &value[..at], &value[at..]).into())
}

/// Refuses unknown query parameters and `sslmode` values that are not libpq's; whether a
/// `host` parameter is given.
fn check_parameters(rest: &str) -> Result<bool, SettingError> {
    let Some((_, query)) = rest.split_once('?') else {
        return Ok(false);
    };
    let mut has_host = false;
    let query = query.split('#').next().unwrap_or_default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !PARAMETERS.contains(&key) {
            // Keys are names, never secrets; a long one is cut.
            return Err(SettingError::UnknownParameter(
                key.chars().take(40).collect(),
            ));
        }
        if key == "sslmode" && !SSL_MODES.contains(&value) {
            return Err(SettingError::SslMode);
        }
        has_host |= key == "host";
    }
    Ok(has_host)
}

fn ssl_mode_name(mode: PgSslMode) -> &'static str {
    match mode {
        PgSslMode::Disable => "disable",
        PgSslMode::Allow => "allow",
        PgSslMode::Prefer => "prefer",
        PgSslMode::Require => "require",
        PgSslMode::VerifyCa => "verify-ca",
        PgSslMode::VerifyFull => "verify-full",
    }
}

impl fmt::Display for PostgresSetting {
    /// The URL rebuilt from its parts, without the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.options;
        let user = o.get_username();
        let database = o.get_database().unwrap_or_default();
        let ssl = ssl_mode_name(o.get_ssl_mode());
        match o.get_socket() {
            Some(dir) => write!(
                f,
                "postgres://{user}@/{database}?host={}&port={}&sslmode={ssl}",
                dir.display(),
                o.get_port()
            ),
            None => write!(
                f,
                "postgres://{user}@{}:{}/{database}?sslmode={ssl}",
                o.get_host(),
                o.get_port()
            ),
        }
    }
}

impl fmt::Debug for PostgresSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for StoreSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSetting::Sqlite => f.write_str("sqlite"),
            StoreSetting::Postgres(p) => fmt::Display::fmt(p, f),
        }
    }
}

impl fmt::Debug for StoreSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr%40t-pw";

    fn postgres(value: &str) -> PostgresSetting {
        match value.parse::<StoreSetting>() {
            Ok(StoreSetting::Postgres(p)) => p,
            other => panic!("{value}: {other:?}"),
        }
    }

    #[test]
    fn sqlite_and_both_url_schemes_are_accepted() {
        assert!(matches!("sqlite".parse(), Ok(StoreSetting::Sqlite)));
        assert!(matches!(StoreSetting::default(), StoreSetting::Sqlite));
        for scheme in ["postgres", "postgresql"] {
            let p = postgres(&format!("{scheme}://hub@db.example:6432/fleet"));
            assert_eq!(p.options.get_host(), "db.example");
            assert_eq!(p.options.get_port(), 6432);
            assert_eq!(p.options.get_database(), Some("fleet"));
        }
        for bad in ["", "SQLite", "mysql://x/y", "file:/tmp/x.db", "postgres:/x"] {
            assert_eq!(
                bad.parse::<StoreSetting>().err(),
                Some(SettingError::Scheme),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_libpq_ssl_mode_is_understood_and_nothing_else() {
        for mode in SSL_MODES {
            let p = postgres(&format!("postgres://hub@db.example/fleet?sslmode={mode}"));
            assert_eq!(ssl_mode_name(p.options.get_ssl_mode()), *mode);
            assert!(p.to_string().ends_with(&format!("sslmode={mode}")), "{p}");
        }
        assert_eq!(
            "postgres://hub@db.example/fleet?sslmode=on"
                .parse::<StoreSetting>()
                .err(),
            Some(SettingError::SslMode)
        );
    }

    #[test]
    fn a_unix_socket_directory_is_a_host_parameter() {
        assert_eq!(
            "postgres://hub:pw@/fleet".parse::<StoreSetting>().err(),
            Some(SettingError::NoHost)
        );
        let p = postgres("postgres://hub:pw@/fleet?host=/run/postgresql&sslmode=disable");
        assert_eq!(
            p.options
                .get_socket()
                .map(|s| s.to_string_lossy().into_owned()),
            Some("/run/postgresql".into())
        );
        assert_eq!(
            p.to_string(),
            "postgres://hub@/fleet?host=/run/postgresql&port=5432&sslmode=disable"
        );
    }

    #[test]
    fn the_password_shows_nowhere() {
        for value in [
            format!("postgres://hub:{SECRET}@db.example/fleet?sslmode=require"),
            format!("postgres://hub@db.example/fleet?password={SECRET}"),
        ] {
            let setting: StoreSetting = value.parse().unwrap();
            let StoreSetting::Postgres(p) = &setting else {
                panic!("{value}")
            };
            // Kept for connecting (percent-decoded, as libpq does)...
            assert!(
                format!("{:?}", p.options).contains("s3cr@t-pw"),
                "the password is used"
            );
            // ...and never shown.
            for shown in [
                setting.to_string(),
                format!("{setting:?}"),
                format!("{p:?}"),
            ] {
                assert!(!shown.contains("s3cr"), "{shown}");
                assert!(
                    shown.starts_with("postgres://hub@db.example:5432/fleet"),
                    "{shown}"
                );
            }
        }
    }

    #[test]
    fn refusals_never_echo_the_value() {
        for (value, want) in [
            (
                format!("postgres://hub:{SECRET}@db.example/fleet?passwd={SECRET}"),
                SettingError::UnknownParameter("passwd".into()),
            ),
            (
                format!("postgres://hub:{SECRET}@db.example:99999/fleet"),
                SettingError::Url(String::new()),
            ),
        ] {
            let err = value.parse::<StoreSetting>().unwrap_err();
            assert_eq!(
                std::mem::discriminant(&err),
                std::mem::discriminant(&want),
                "{value}: {err}"
            );
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("s3cr"), "{shown}");
        }
    }
}

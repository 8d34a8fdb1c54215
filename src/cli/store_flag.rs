//! `worker-gateway --store`: its value may carry a database password, so it is never echoed.
//! A refused value is reported without it (clap's own errors quote the value), and the command
//! line shown by `--print-cmdline` and in the debug log carries the setting as it displays:
//! the URL without its password.

use clap::{builder::TypedValueParser, error::ErrorKind};
use gpustack_gateway::hub_store::StoreSetting;

/// The flag's long name.
const FLAG: &str = "store";

/// Parses `--store` into a [`StoreSetting`], refusing with one line that names the flag and
/// the reason, never the value.
#[derive(Clone)]
pub struct StoreParser;

impl TypedValueParser for StoreParser {
    type Value = StoreSetting;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<StoreSetting, clap::Error> {
        let refused = |why: String| {
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!(
                    "invalid value for '--{FLAG}' (not shown: it may hold a password): {why}\n"
                ),
            )
        };
        let text = value
            .to_str()
            .ok_or_else(|| refused("not valid UTF-8".into()))?;
        text.parse().map_err(|e| refused(format!("{e}")))
    }
}

/// `args` with each `--store` value replaced by its display (no password).
pub fn redact(args: &[String]) -> Vec<String> {
    let shown = |value: &str| match value.parse::<StoreSetting>() {
        Ok(setting) => setting.to_string(),
        Err(_) => "REDACTED".to_owned(),
    };
    let long = format!("--{FLAG}");
    let with_value = format!("--{FLAG}=");
    let mut out = Vec::with_capacity(args.len());
    let mut value_next = false;
    for arg in args {
        if value_next {
            out.push(shown(arg));
            value_next = false;
        } else if let Some(value) = arg.strip_prefix(&with_value) {
            out.push(format!("{with_value}{}", shown(value)));
        } else {
            value_next = *arg == long;
            out.push(arg.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_values_are_shown_without_their_password() {
        let args: Vec<String> = [
            "gpustack-operator",
            "worker-gateway",
            "--store",
            "postgres://hub:pw-one@db.example/fleet",
            "--data-dir=/x",
            "--store=postgresql://hub:pw-two@db.example/fleet?sslmode=require",
            "--store=sqlite",
            "--store=nonsense://hub:pw-three@x",
        ]
        .map(str::to_owned)
        .to_vec();
        let shown = redact(&args).join(" ");
        assert!(!shown.contains("pw-"), "{shown}");
        assert_eq!(
            shown,
            "gpustack-operator worker-gateway --store postgres://hub@db.example:5432/fleet?sslmode=prefer \
             --data-dir=/x --store=postgres://hub@db.example:5432/fleet?sslmode=require \
             --store=sqlite --store=REDACTED"
        );
    }
}

//! How the command line is completed before parsing: the binary's own name can select the
//! command, and every flag can come from `GPUSTACK_<COMMAND>_<FLAG>` (the command line wins).

use std::path::Path;

/// Flags never taken from the environment.
const NOT_FROM_ENV: [&str; 3] = ["help", "version", "v"];

/// The complete command line: `args` as given, the command inserted when the binary is called by
/// a command's name, and flags taken from the environment appended. `env` looks up a variable.
pub fn effective_args(
    root: &clap::Command,
    args: Vec<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut args = insert_command_from_binary_name(root, args);
    let Some((top, leaf)) = command_path(root, &args) else {
        return args;
    };
    let prefix = format!("GPUSTACK_{}_", upper_snake(top.get_name()));
    let given = given_flags(&args);
    let flags = leaf.get_arguments().chain(root.get_arguments());
    let mut seen = Vec::new();
    for arg in flags {
        let Some(long) = arg.get_long() else { continue };
        if NOT_FROM_ENV.contains(&long) || seen.contains(&long) || given.iter().any(|g| g == long) {
            continue;
        }
        seen.push(long);
        if let Some(value) = env(&format!("{prefix}{}", upper_snake(long))) {
            args.push(format!("--{long}={}", expand_vars(&value, env)));
        }
    }
    args
}

/// `worker-gateway` -> `WORKER_GATEWAY`.
fn upper_snake(name: &str) -> String {
    name.replace('-', "_").to_ascii_uppercase()
}

fn insert_command_from_binary_name(root: &clap::Command, mut args: Vec<String>) -> Vec<String> {
    let Some(argv0) = args.first() else {
        return args;
    };
    let base = Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let names_command = root
        .get_subcommands()
        .any(|c| c.get_name() == base || c.get_all_aliases().any(|a| a == base));
    if names_command && args.get(1) != Some(&base) {
        args.insert(1, base);
    }
    args
}

/// The top-level command and the leaf command the arguments select.
fn command_path<'a>(
    root: &'a clap::Command,
    args: &[String],
) -> Option<(&'a clap::Command, &'a clap::Command)> {
    let mut positionals = positionals(root, args);
    let top = find_subcommand(root, positionals.next()?)?;
    let mut leaf = top;
    while leaf.has_subcommands() {
        leaf = find_subcommand(leaf, positionals.next()?)?;
    }
    Some((top, leaf))
}

fn find_subcommand<'a>(cmd: &'a clap::Command, name: &str) -> Option<&'a clap::Command> {
    cmd.get_subcommands()
        .find(|c| c.get_name() == name || c.get_all_aliases().any(|a| a == name))
}

/// Words that are not flags or flag values, in order.
fn positionals<'a>(root: &clap::Command, args: &'a [String]) -> impl Iterator<Item = &'a str> {
    let takes_separate_value = |flag: &str| {
        let name = flag.trim_start_matches('-');
        root.get_arguments()
            .find(|a| {
                a.get_long() == Some(name)
                    || a.get_short().map(String::from).as_deref() == Some(name)
            })
            .is_some_and(|a| {
                // Before clap builds the command, an unset `num_args` means "one value".
                a.get_action().takes_values()
                    && a.get_num_args().is_none_or(|n| n.min_values() > 0)
                    && !a.is_require_equals_set()
            })
    };
    let mut skip_next = false;
    args.iter().skip(1).filter_map(move |a| {
        if std::mem::take(&mut skip_next) {
            return None;
        }
        if a.starts_with('-') {
            skip_next = !a.contains('=') && takes_separate_value(a);
            return None;
        }
        Some(a.as_str())
    })
}

/// Long flag names present on the command line (`--name` and `--name=value`).
fn given_flags(args: &[String]) -> Vec<String> {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split_once('=').map_or(a, |(name, _)| name).to_owned())
        .collect()
}

/// Expands `$NAME` and `${NAME}` as Go's `os.ExpandEnv` does: unset names become empty.
pub fn expand_vars(value: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        rest = &rest[pos + 1..];
        let (name, consumed) = if let Some(braced) = rest.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => {
                    out.push('$');
                    continue;
                }
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (&rest[..end], end)
        };
        if name.is_empty() {
            out.push('$');
            continue;
        }
        out.push_str(&env(name).unwrap_or_default());
        rest = &rest[consumed..];
    }
    out.push_str(rest);
    out
}

/// One line a shell reads back as the same words.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=./:,@%+".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::Cli;
    use clap::CommandFactory;

    fn run(args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
        let lookup = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        effective_args(
            &Cli::command(),
            args.iter().map(|s| s.to_string()).collect(),
            &lookup,
        )
    }

    #[test]
    fn environment_fills_missing_flags() {
        let got = run(
            &["gpustack-operator", "worker", "--secure-port=1"],
            &[
                ("GPUSTACK_WORKER_SECURE_PORT", "2"),
                ("GPUSTACK_WORKER_KUBE_CONN_QPS", "50"),
                ("GPUSTACK_WORKER_V", "3"),
                ("GPUSTACK_WORKER_GATEWAY_SECURE_PORT", "9"),
            ],
        );
        assert_eq!(
            got,
            [
                "gpustack-operator",
                "worker",
                "--secure-port=1",
                "--kube-conn-qps=50"
            ]
        );
    }

    #[test]
    fn hyphenated_and_nested_commands() {
        let got = run(
            &["gpustack-operator", "wg"],
            &[("GPUSTACK_WORKER_GATEWAY_WORKER_CONN_MODE", "loopback")],
        );
        assert_eq!(got[2], "--worker-conn-mode=loopback");
        let got = run(
            &["gpustack-operator", "-v", "2", "dm", "serve"],
            &[
                ("GPUSTACK_DEVICE_MANAGER_NO_SHARED", "true"),
                ("GPUSTACK_DEVICE_MANAGER_LOGTOSTDERR", "false"),
            ],
        );
        assert!(got.contains(&"--no-shared=true".to_owned()), "{got:?}");
        assert!(got.contains(&"--logtostderr=false".to_owned()), "{got:?}");
    }

    #[test]
    fn binary_name_selects_command() {
        let got = run(&["/usr/bin/worker", "--secure-port=5"], &[]);
        assert_eq!(got, ["/usr/bin/worker", "worker", "--secure-port=5"]);
        let unchanged = run(&["/usr/bin/gpustack-operator", "worker"], &[]);
        assert_eq!(unchanged, ["/usr/bin/gpustack-operator", "worker"]);
    }

    #[test]
    fn values_expand_variables() {
        let env = |k: &str| (k == "NODE").then(|| "gpu-1".to_owned());
        assert_eq!(
            expand_vars("$NODE/${NODE}-x $MISSING.", &env),
            "gpu-1/gpu-1-x ."
        );
        assert_eq!(expand_vars("cost $ 5 ${open", &env), "cost $ 5 ${open");
    }

    #[test]
    fn shell_join_quotes_what_needs_it() {
        let args = ["a".to_owned(), "--x=it's".to_owned(), "".to_owned()];
        assert_eq!(shell_join(&args), r"a '--x=it'\''s' ''");
    }
}

//! The `gpustack-operator` command line: completing it from the binary name and the environment,
//! parsing and validating it, and handing the parsed command to its component.

pub mod args;
pub mod duration;
pub mod env_flags;
mod store_flag;
mod validate;

use clap::{CommandFactory, FromArgMatches};

pub use args::{Cli, Command};

/// Exit status for bad input, as clap and the reference use.
pub const EXIT_USAGE: i32 = 2;

/// What the command line asks for.
pub enum Parsed {
    /// Run this command; the command line as it may be shown (no secrets).
    Run(Box<Cli>, Vec<String>),
    /// Print this text on standard output and exit 0 (help, version, --print-cmdline).
    Print(String),
    /// Print this on standard error and exit with [`EXIT_USAGE`]: one line, or the help when no
    /// command was given.
    Usage(String),
}

/// Parses the process's command line as completed from `env`.
pub fn parse(args: Vec<String>, env: &dyn Fn(&str) -> Option<String>) -> Parsed {
    let root = command();
    let args = env_flags::effective_args(&root, args, env);
    let matches = match root.try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return from_clap_error(e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return from_clap_error(e),
    };
    // Shown without secrets, both here and in the debug log.
    let args = store_flag::redact(&args);
    if cli.global.print_cmdline {
        return Parsed::Print(format!("{}\n", env_flags::shell_join(&args)));
    }
    match validate::validate(&cli.command) {
        Ok(()) => Parsed::Run(Box::new(cli), args),
        Err(line) => Parsed::Usage(format!("error: {line}")),
    }
}

/// The clap definition, with help laid out for long flag names (description under the flag).
pub fn command() -> clap::Command {
    fn readable(c: clap::Command) -> clap::Command {
        c.next_line_help(true)
            .max_term_width(100)
            .mut_subcommands(readable)
    }
    readable(Cli::command())
}

fn from_clap_error(e: clap::Error) -> Parsed {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Parsed::Print(e.render().to_string()),
        // No command at all: the whole help is the useful answer.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            Parsed::Usage(e.render().to_string())
        }
        // clap lists missing flags on the lines after its first; name them on one.
        ErrorKind::MissingRequiredArgument => {
            let missing = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::Strings(flags)) => flags.join(", "),
                _ => "a required flag".to_owned(),
            };
            Parsed::Usage(format!("error: missing required flag {missing}"))
        }
        // clap lists the allowed values on a later line; keep them on the first.
        ErrorKind::InvalidValue => {
            let line = first_line(&e.render().to_string());
            match e.get(clap::error::ContextKind::ValidValue) {
                Some(clap::error::ContextValue::Strings(values)) => {
                    let shown: Vec<String> = values
                        .iter()
                        .map(|v| {
                            if v.is_empty() {
                                "\"\"".to_owned()
                            } else {
                                v.clone()
                            }
                        })
                        .collect();
                    Parsed::Usage(format!("{line}: allowed are {}", shown.join(", ")))
                }
                _ => Parsed::Usage(line),
            }
        }
        _ => Parsed::Usage(first_line(&e.render().to_string())),
    }
}

/// clap's first line names the flag, the value and what is allowed; the rest is usage advice.
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("error: invalid command line");
    if line.starts_with("error:") {
        line.to_owned()
    } else {
        format!("error: {}", line.trim())
    }
}

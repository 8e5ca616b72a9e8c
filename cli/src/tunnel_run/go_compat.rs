//! The Go tunnel-client's settings that `mcpwire tunnel run` recognises but does not implement
//! (yet): a flag among them stops start-up with one line naming it, a variable or config-file
//! key gets one warning line, instead of a parser error or silence. Also the Go client's checks
//! of the tunnel id's and the API key's formats.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use super::config::ConfigError;
use super::config_file::FileLayer;

/// `(flag, variable, what it does in the Go client)`.
pub const NOT_IMPLEMENTED: &[(&str, &str, &str)] = &[
    (
        "control-plane.poll-deadline-guardrail",
        "CONTROL_PLANE_POLL_DEADLINE_GUARDRAIL",
        "extra time after the long-poll wait (mcpwire derives it from the wait)",
    ),
    (
        "log.http-raw-unsafe",
        "LOG_HTTP_RAW_UNSAFE",
        "logging whole HTTP requests and answers (mcpwire never logs bodies or header values)",
    ),
    (
        "harpoon.http-proxy",
        "HARPOON_HTTP_PROXY",
        "an HTTP proxy for Harpoon",
    ),
    (
        "harpoon.additional-transport",
        "HARPOON_ADDITIONAL_TRANSPORTS",
        "Harpoon over further transports",
    ),
    (
        "harpoon.capture-payloads",
        "HARPOON_CAPTURE_PAYLOADS",
        "keeping Harpoon payloads for the admin UI",
    ),
    (
        "open-web-ui",
        "OPEN_WEB_UI",
        "opening the admin UI in a browser",
    ),
    (
        "proxy.check-interval",
        "PROXY_CHECK_INTERVAL",
        "the proxy's periodic check",
    ),
];

/// The Go client's dashed spellings of flags mcpwire does not implement (the implemented ones
/// are aliases of their flags).
const NOT_IMPLEMENTED_ALIASES: &[(&str, &str)] = &[];

/// Which of [`NOT_IMPLEMENTED`]'s flags were given (hidden from `--help`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoOnlyFlags {
    /// The flags given, by their canonical names.
    pub given: Vec<&'static str>,
}

fn all_names() -> impl Iterator<Item = (&'static str, &'static str)> {
    NOT_IMPLEMENTED
        .iter()
        .map(|(flag, ..)| (*flag, *flag))
        .chain(NOT_IMPLEMENTED_ALIASES.iter().copied())
}

impl FromArgMatches for GoOnlyFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for (name, canonical) in all_names() {
            if matches
                .try_get_raw_occurrences(name)
                .ok()
                .flatten()
                .is_some_and(|mut o| o.next().is_some())
                && !given.contains(&canonical)
            {
                given.push(canonical);
            }
        }
        Ok(Self { given })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for GoOnlyFlags {
    fn augment_args(mut cmd: Command) -> Command {
        for (name, _) in all_names() {
            cmd = cmd.arg(
                Arg::new(name)
                    .long(name)
                    .hide(true)
                    .num_args(0..=1)
                    .action(ArgAction::Append)
                    .value_name("VALUE"),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

fn describe(flag: &str) -> &'static str {
    NOT_IMPLEMENTED
        .iter()
        .find(|(f, ..)| *f == flag)
        .map_or("", |(.., what)| *what)
}

/// The error for the first Go-only flag given.
pub fn check_flags(flags: &GoOnlyFlags) -> Result<(), ConfigError> {
    match flags.given.first() {
        None => Ok(()),
        Some(flag) => Err(ConfigError(format!(
            "--{flag} is a Go tunnel-client flag that mcpwire does not implement yet ({}); \
             remove it to run without it",
            describe(flag)
        ))),
    }
}

/// One warning per Go-only variable set (not empty) and per Go-only config-file key with a
/// value that changes something (a `false` switch does not).
pub fn warnings(env: &dyn Fn(&str) -> Option<String>, file: &FileLayer) -> Vec<String> {
    let mut out = Vec::new();
    for (flag, var, what) in NOT_IMPLEMENTED {
        if env(var).is_some_and(|v| !v.trim().is_empty()) {
            out.push(format!(
                "{var} is set but mcpwire does not implement it yet ({what}); it is ignored \
                 (the Go client's --{flag})"
            ));
        } else if let Some(value) = file.get(var) {
            let inert = value.items.iter().all(|v| v == "false" || v.is_empty());
            if !inert {
                out.push(format!(
                    "{} is set but mcpwire does not implement it yet ({what}); it is ignored",
                    file.origin(value)
                ));
            }
        }
    }
    out
}

/// The Go client's tunnel id format, `tunnel_` and 32 lowercase letters or digits.
#[must_use]
pub fn is_go_tunnel_id(id: &str) -> bool {
    id.strip_prefix("tunnel_").is_some_and(|rest| {
        rest.len() == 32
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    })
}

/// A tunnel id must be usable as one URL path segment as it is (the Go client's first rule):
/// letters, digits, `-`, `.`, `_`, `~`.
pub fn check_tunnel_id(origin: &str, id: &str) -> Result<(), ConfigError> {
    if id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
        && id != "."
        && id != ".."
    {
        Ok(())
    } else {
        let shown: String = id.chars().take(80).collect();
        Err(ConfigError(format!(
            "invalid {origin} {shown:?}: a tunnel id has only letters, digits, '-', '.', '_' \
             or '~' (the Go client's form is tunnel_ and 32 lowercase letters or digits)"
        )))
    }
}

/// An API key must be a token the `Authorization: Bearer` header carries as it is: letters,
/// digits, `-` and `_` (the Go client's rule). The key is never repeated.
pub fn check_api_key(origin: &str, key: &str) -> Result<(), ConfigError> {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        Ok(())
    } else {
        Err(ConfigError(format!(
            "invalid {origin}: the API key is malformed (expected letters, digits, '-' and '_' \
             only; check for quotes, spaces or a line break copied with it)"
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        go: GoOnlyFlags,
        #[arg(long = "keep")]
        keep: Option<String>,
    }

    #[test]
    fn go_only_flags_are_accepted_by_the_parser_then_refused_by_name() {
        let cli = Cli::try_parse_from(["x", "--keep", "a"]).unwrap();
        assert!(cli.go.given.is_empty());
        assert!(check_flags(&cli.go).is_ok());
        let cli = Cli::try_parse_from([
            "x",
            "--harpoon.http-proxy",
            "http://p:1",
            "--log.http-raw-unsafe",
        ])
        .unwrap();
        assert_eq!(cli.go.given, ["log.http-raw-unsafe", "harpoon.http-proxy"]);
        let e = check_flags(&cli.go).unwrap_err().0;
        assert_eq!(
            e,
            "--log.http-raw-unsafe is a Go tunnel-client flag that mcpwire does not implement yet \
             (logging whole HTTP requests and answers (mcpwire never logs bodies or header \
             values)); remove it to run without it"
        );
        let cli = Cli::try_parse_from(["x", "--proxy.check-interval=5s"]).unwrap();
        assert_eq!(cli.go.given, ["proxy.check-interval"]);
        assert_eq!(cli.keep, None);
    }

    #[test]
    fn go_only_variables_and_keys_warn_unless_inert() {
        let env = |k: &str| (k == "HARPOON_HTTP_PROXY").then(|| "http://p:1".to_owned());
        let src = super::super::config_file::ConfigSource {
            path: "/p.yaml".to_owned(),
            profile: None,
            chosen_by: "--config".to_owned(),
        };
        let file = super::super::config_file::parse(
            &src,
            "admin_ui:\n  open_browser: false\ncontrol_plane:\n  poll_deadline_guardrail: 5s\n",
            &|_| None,
            &|_| Err(std::io::Error::other("no")),
        )
        .unwrap();
        let w = warnings(&env, &file);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[1].starts_with("HARPOON_HTTP_PROXY is set but mcpwire does not implement it yet"));
        assert!(
            w[0].starts_with(
                "control_plane.poll_deadline_guardrail (/p.yaml line 4) is set but mcpwire does not implement"
            ),
            "{}",
            w[0]
        );
    }

    #[test]
    fn ids_and_keys_follow_the_go_rules() {
        assert!(is_go_tunnel_id("tunnel_0123456789abcdef0123456789abcdef"));
        assert!(!is_go_tunnel_id("tunnel_123"));
        assert!(!is_go_tunnel_id("tunnel_0123456789ABCDEF0123456789abcdef"));
        assert!(check_tunnel_id("--x", "tunnel_123").is_ok());
        assert!(check_tunnel_id("--x", "a/b").is_err());
        assert!(check_tunnel_id("--x", "..").is_err());
        assert!(check_api_key("--k", "sk-proj_abc-123").is_ok());
        let e = check_api_key("--k", "sk-a\"b").unwrap_err().0;
        assert!(!e.contains("sk-a"), "{e}");
    }
}

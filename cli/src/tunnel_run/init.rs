//! `mcpwire tunnel init`: writes a starter profile, the Go tunnel-client's `init` samples in the
//! same YAML schema, so that `mcpwire tunnel run --profile NAME` starts with it.

use std::process::ExitCode;

use clap::Args;

use super::config::ConfigError;
use super::config_file::{self, ConfigSource};
use super::go_compat;

/// The built-in samples: name and what it is for.
pub const SAMPLES: &[(&str, &str)] = &[
    (
        "sample_mcp_with_dcr",
        "an HTTP or stdio MCP server; OAuth metadata (and so Harpoon's discovery) when it has it",
    ),
    (
        "sample_mcp_stdio_local",
        "a local MCP server started as a command over stdio",
    ),
    (
        "sample_mcp_remote_no_auth",
        "a remote Streamable HTTP MCP server without OAuth",
    ),
    (
        "sample_mcp_enterprise_proxy",
        "an HTTP or stdio MCP server behind an outbound proxy or a private CA",
    ),
];

/// The flags of `mcpwire tunnel init` (the Go client's names).
#[derive(Args, Debug, Clone)]
pub struct InitArgs {
    /// The profile's name (the file NAME.yaml in the profile directory)
    #[arg(long, default_value = "sample_mcp_with_dcr", value_name = "NAME")]
    pub profile: String,
    /// Which sample to write [default: sample_mcp_stdio_local with --mcp-command, else
    /// sample_mcp_with_dcr]
    #[arg(long, value_name = "SAMPLE", value_parser = clap::builder::PossibleValuesParser::new(
        SAMPLES.iter().map(|(n, _)| *n)))]
    pub sample: Option<String>,
    /// The profile directory [default: TUNNEL_CLIENT_PROFILE_DIR, else
    /// $XDG_CONFIG_HOME/tunnel-client, else ~/.config/tunnel-client]
    #[arg(long = "profile-dir", value_name = "DIR")]
    pub profile_dir: Option<String>,
    /// Replace an existing profile
    #[arg(long)]
    pub force: bool,
    /// The tunnel id to write
    #[arg(long = "tunnel-id", value_name = "ID")]
    pub tunnel_id: String,
    /// The control-plane base URL to write
    #[arg(
        long = "control-plane-base-url",
        default_value = "https://api.openai.com",
        value_name = "URL"
    )]
    pub base_url: String,
    /// A control-plane URL path to write
    #[arg(long = "control-plane-url-path", value_name = "PATH")]
    pub url_path: Option<String>,
    /// Where the API key comes from: env:VAR or file:PATH (the profile never holds the key)
    #[arg(
        long = "control-plane-api-key-ref",
        default_value = "env:CONTROL_PLANE_API_KEY",
        value_name = "REF"
    )]
    pub api_key_ref: String,
    /// The MCP server's Streamable HTTP URL (channel main)
    #[arg(
        long = "mcp-server-url",
        value_name = "URL",
        conflicts_with = "mcp_command"
    )]
    pub mcp_server_url: Option<String>,
    /// The MCP server's command (channel main, over stdio)
    #[arg(long = "mcp-command", value_name = "CMD")]
    pub mcp_command: Option<String>,
    /// The health listener's address to write (127.0.0.1:0 picks a free port at each start)
    #[arg(
        long = "health-listen-addr",
        default_value = "127.0.0.1:8080",
        value_name = "ADDR"
    )]
    pub health_listen_addr: String,
}

/// A YAML double-quoted string (a JSON string is one).
fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// The profile's text for `args` (checked, not yet written).
pub fn render(args: &InitArgs) -> Result<(String, &'static str), ConfigError> {
    let sample = match args.sample.as_deref() {
        Some(s) => SAMPLES
            .iter()
            .map(|(n, _)| *n)
            .find(|n| *n == s)
            .ok_or_else(|| ConfigError(format!("unknown --sample {s:?}")))?,
        None if args.mcp_command.is_some() => "sample_mcp_stdio_local",
        None => "sample_mcp_with_dcr",
    };
    go_compat::check_tunnel_id("--tunnel-id", args.tunnel_id.trim())?;
    let key_ref = args.api_key_ref.trim();
    if !(key_ref.starts_with("env:") || key_ref.starts_with("file:")) {
        return Err(ConfigError(
            "invalid --control-plane-api-key-ref: give env:VAR or file:PATH; a profile never \
             holds the key itself"
                .to_owned(),
        ));
    }
    let target = match (sample, &args.mcp_server_url, &args.mcp_command) {
        ("sample_mcp_stdio_local", _, Some(cmd))
        | ("sample_mcp_with_dcr" | "sample_mcp_enterprise_proxy", None, Some(cmd)) => {
            format!(
                "  commands:\n    - channel: main\n      command: {}\n",
                q(cmd)
            )
        }
        (
            "sample_mcp_remote_no_auth" | "sample_mcp_with_dcr" | "sample_mcp_enterprise_proxy",
            Some(url),
            None,
        ) => {
            format!(
                "  server_urls:\n    - channel: main\n      url: {}\n",
                q(url)
            )
        }
        ("sample_mcp_stdio_local", ..) => {
            return Err(ConfigError(
                "sample_mcp_stdio_local needs --mcp-command CMD".to_owned(),
            ))
        }
        ("sample_mcp_remote_no_auth", ..) => {
            return Err(ConfigError(
                "sample_mcp_remote_no_auth needs --mcp-server-url URL".to_owned(),
            ))
        }
        _ => {
            return Err(ConfigError(
                "give the MCP server: --mcp-server-url URL or --mcp-command CMD".to_owned(),
            ))
        }
    };
    let mut text = String::new();
    text.push_str(&format!(
        "# mcpwire tunnel profile ({sample}). Run it with:\n#   mcpwire tunnel run --profile {}\n\
         # Flags and environment variables override what is set here.\n",
        args.profile
    ));
    if sample == "sample_mcp_enterprise_proxy" {
        text.push_str(
            "# For an outbound proxy and a private CA, export before running:\n\
             #   HTTPS_PROXY=http://proxy.internal.example:8080\n\
             #   ENTERPRISE_CA_BUNDLE=/etc/ssl/certs/corp-root.pem\n",
        );
    }
    text.push_str("config_version: 1\n");
    if sample == "sample_mcp_enterprise_proxy" {
        text.push_str("ca_bundle: \"env:ENTERPRISE_CA_BUNDLE\"\nhttp_proxy: \"env:HTTPS_PROXY\"\n");
    }
    text.push_str(&format!(
        "control_plane:\n  base_url: {}\n",
        q(args.base_url.trim())
    ));
    if let Some(path) = args.url_path.as_deref().filter(|p| !p.trim().is_empty()) {
        text.push_str(&format!("  url_path: {}\n", q(path.trim())));
    }
    text.push_str(&format!(
        "  tunnel_id: {}\n  api_key: {}\nhealth:\n  listen_addr: {}\n  \
         # url_file: \"/tmp/mcpwire-health.url\"\nlog:\n  level: info\n  format: json\nmcp:\n{target}",
        q(args.tunnel_id.trim()),
        q(key_ref),
        q(args.health_listen_addr.trim()),
    ));
    Ok((text, sample))
}

/// Runs `mcpwire tunnel init`: 0 when written, 2 for a bad flag or an existing profile, 1 when
/// the file cannot be written.
pub fn run(args: &InitArgs) -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    let prepared = config_file::validate_profile_name(&args.profile)
        .and_then(|()| config_file::profile_dir(args.profile_dir.as_deref(), &env))
        .and_then(|dir| Ok((config_file::profile_path(&args.profile, &dir)?, dir)))
        .and_then(|(path, dir)| render(args).map(|(text, sample)| (path, dir, text, sample)));
    let (path, dir, text, sample) = match prepared {
        Ok(p) => p,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            return ExitCode::from(2);
        }
    };
    // The text must read back as a profile (references are not resolved here).
    let source = ConfigSource {
        path: path.clone(),
        profile: Some(args.profile.clone()),
        chosen_by: "mcpwire tunnel init".to_owned(),
    };
    if let Err(e) = config_file::parse(&source, &text, &|_| Some("x".to_owned()), &|_| {
        Ok("x".to_owned())
    }) {
        eprintln!("mcpwire: the profile would not load: {e}");
        return ExitCode::from(2);
    }
    if std::path::Path::new(&path).exists() && !args.force {
        eprintln!("mcpwire: profile {path} exists; give --force to replace it");
        return ExitCode::from(2);
    }
    if let Err(e) = write_private(&dir, &path, &text) {
        eprintln!("mcpwire: cannot write {path}: {e}");
        return ExitCode::FAILURE;
    }
    println!("Created profile {} at {path}", args.profile);
    println!("Sample: {sample}");
    println!("Next:");
    println!("  mcpwire tunnel run --profile {}", args.profile);
    ExitCode::SUCCESS
}

/// Creates `dir` (owner only) and writes `path` readable by its owner only.
fn write_private(dir: &str, path: &str, text: &str) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    use std::io::Write;
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args() -> InitArgs {
        InitArgs {
            profile: "dev".into(),
            sample: None,
            profile_dir: None,
            force: false,
            tunnel_id: "tunnel_0123456789abcdef0123456789abcdef".into(),
            base_url: "https://api.openai.com".into(),
            url_path: None,
            api_key_ref: "env:CONTROL_PLANE_API_KEY".into(),
            mcp_server_url: Some("http://127.0.0.1:3001/mcp".into()),
            mcp_command: None,
            health_listen_addr: "127.0.0.1:8080".into(),
        }
    }

    #[test]
    fn each_sample_renders_a_profile_that_loads() {
        let src = ConfigSource {
            path: "/p/dev.yaml".into(),
            profile: Some("dev".into()),
            chosen_by: "t".into(),
        };
        let env = |k: &str| (k == "CONTROL_PLANE_API_KEY").then(|| "sk-x".to_owned());
        for (sample, _) in SAMPLES {
            let mut a = args();
            a.sample = Some((*sample).to_owned());
            if *sample == "sample_mcp_stdio_local" {
                a.mcp_server_url = None;
                a.mcp_command = Some("python3 server.py --name \"x y\"".into());
            }
            let (text, chosen) = render(&a).unwrap();
            assert_eq!(chosen, *sample);
            let layer =
                config_file::parse(&src, &text, &env, &|_| Err(std::io::Error::other("no")))
                    .unwrap_or_else(|e| panic!("{sample}: {e}\n{text}"));
            assert_eq!(
                layer.get("CONTROL_PLANE_TUNNEL_ID").unwrap().items,
                ["tunnel_0123456789abcdef0123456789abcdef"]
            );
            assert_eq!(
                layer.get("CONTROL_PLANE_API_KEY").unwrap().items,
                ["env:CONTROL_PLANE_API_KEY"]
            );
            if *sample == "sample_mcp_stdio_local" {
                assert_eq!(
                    layer.get("MCP_COMMAND").unwrap().items,
                    ["channel=main,command=python3 server.py --name \"x y\""]
                );
            } else {
                assert_eq!(
                    layer.get("MCP_SERVER_URL").unwrap().items,
                    ["channel=main,url=http://127.0.0.1:3001/mcp"]
                );
            }
        }
    }

    #[test]
    fn a_literal_key_and_a_missing_server_are_refused() {
        let mut a = args();
        a.api_key_ref = "sk-literal".into();
        assert!(render(&a).unwrap_err().0.contains("never holds the key"));
        let mut a = args();
        a.mcp_server_url = None;
        assert!(render(&a)
            .unwrap_err()
            .0
            .contains("--mcp-server-url URL or --mcp-command"));
        let mut a = args();
        a.sample = Some("sample_mcp_stdio_local".into());
        assert!(render(&a).unwrap_err().0.contains("needs --mcp-command"));
    }
}

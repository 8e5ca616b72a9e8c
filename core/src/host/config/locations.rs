//! Where the hosts keep their MCP server files, as a pure function of the OS and the
//! directories a driver looked up. Core checks no file: the driver tries the candidates.
//!
//! Sources (each host's own documentation, checked in 2026):
//! - Claude Desktop: `claude_desktop_config.json` in `~/Library/Application Support/Claude/`
//!   on macOS and `%APPDATA%\Claude\` on Windows (the MCP quickstart for Claude Desktop; there
//!   is no official Linux build, so none is listed; the Microsoft Store build's virtualized
//!   folder under `%LOCALAPPDATA%\Packages\` is not listed either).
//! - Claude Code (code.claude.com/docs/en/mcp, "MCP installation scopes"): the project scope
//!   is `.mcp.json` at the project root; the user and local scopes are `~/.claude.json`
//!   (`mcpServers` at its top level, and under `projects.<path>.mcpServers`).
//! - Cursor (cursor.com/docs, "Model Context Protocol"): `.cursor/mcp.json` in the project,
//!   and `~/.cursor/mcp.json` for all projects (`%USERPROFILE%\.cursor\mcp.json` on Windows).
//! - VS Code (code.visualstudio.com/docs/copilot/reference/mcp-configuration): `.vscode/mcp.json`
//!   in the workspace, and `mcp.json` in the user profile's folder, which is where the user
//!   `settings.json` is (code.visualstudio.com/docs/configure/settings): `%APPDATA%\Code\User`,
//!   `~/Library/Application Support/Code/User`, and `$XDG_CONFIG_HOME/Code/User` on Linux
//!   (`~/.config/Code/User` by default; Electron's user-data folder follows `XDG_CONFIG_HOME`).
//!   Only the default profile's file is listed.
//!
//! Order: the working directory's project files first (the most specific; a server a
//! project needs is there), then the user's files. A host that takes one file takes the first
//! that exists and holds servers; one that merges can read them all.

use std::fmt;

/// An operating system, as far as file locations go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Os {
    /// Linux and the other Unix-likes that follow the XDG base directories.
    Linux,
    /// macOS.
    MacOs,
    /// Windows.
    Windows,
}

/// The directories the locations depend on, as the driver found them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirs<'a> {
    /// The user's home directory (`$HOME`, `%USERPROFILE%`).
    pub home: &'a str,
    /// The working directory: the project.
    pub working_dir: &'a str,
    /// `%APPDATA%` on Windows (else `home\AppData\Roaming` is assumed).
    pub appdata: Option<&'a str>,
    /// `$XDG_CONFIG_HOME` on Linux (else `home/.config`; a relative value is ignored, as the
    /// XDG specification says).
    pub xdg_config_home: Option<&'a str>,
}

/// The application a file belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum App {
    /// Claude Desktop.
    ClaudeDesktop,
    /// Claude Code.
    ClaudeCode,
    /// Cursor.
    Cursor,
    /// Visual Studio Code.
    VsCode,
}

impl fmt::Display for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            App::ClaudeDesktop => "Claude Desktop",
            App::ClaudeCode => "Claude Code",
            App::Cursor => "Cursor",
            App::VsCode => "VS Code",
        })
    }
}

/// Whose a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// The project's (in the working directory), often shared in version control.
    Project,
    /// The user's, for every project.
    User,
}

/// One place a config file may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// Whose file it is.
    pub app: App,
    /// Project or user.
    pub scope: Scope,
    /// The path, with the OS's separator.
    pub path: String,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = match self.scope {
            Scope::Project => "project",
            Scope::User => "user",
        };
        write!(f, "{} ({scope}): {}", self.app, self.path)
    }
}

/// The candidate files, most specific first (see the module's documentation).
pub fn known_locations(os: Os, dirs: &Dirs<'_>) -> Vec<Location> {
    let sep = match os {
        Os::Windows => '\\',
        Os::Linux | Os::MacOs => '/',
    };
    let join = |base: &str, parts: &[&str]| {
        let mut path = base.to_owned();
        while path.len() > 1 && (path.ends_with('/') || (os == Os::Windows && path.ends_with('\\')))
        {
            path.pop();
        }
        for part in parts {
            if !path.ends_with(sep) {
                path.push(sep);
            }
            path.push_str(part);
        }
        path
    };
    let at = |app, scope, path| Location { app, scope, path };
    let (home, cwd) = (dirs.home, dirs.working_dir);

    let mut list = vec![
        at(App::ClaudeCode, Scope::Project, join(cwd, &[".mcp.json"])),
        at(
            App::Cursor,
            Scope::Project,
            join(cwd, &[".cursor", "mcp.json"]),
        ),
        at(
            App::VsCode,
            Scope::Project,
            join(cwd, &[".vscode", "mcp.json"]),
        ),
        at(App::ClaudeCode, Scope::User, join(home, &[".claude.json"])),
    ];
    let appdata = || match dirs.appdata.filter(|d| !d.is_empty()) {
        Some(appdata) => appdata.to_owned(),
        None => join(home, &["AppData", "Roaming"]),
    };
    match os {
        Os::MacOs => list.push(at(
            App::ClaudeDesktop,
            Scope::User,
            join(
                home,
                &[
                    "Library",
                    "Application Support",
                    "Claude",
                    "claude_desktop_config.json",
                ],
            ),
        )),
        Os::Windows => list.push(at(
            App::ClaudeDesktop,
            Scope::User,
            join(&appdata(), &["Claude", "claude_desktop_config.json"]),
        )),
        Os::Linux => {}
    }
    list.push(at(
        App::Cursor,
        Scope::User,
        join(home, &[".cursor", "mcp.json"]),
    ));
    let vscode_user = match os {
        Os::MacOs => join(
            home,
            &["Library", "Application Support", "Code", "User", "mcp.json"],
        ),
        Os::Windows => join(&appdata(), &["Code", "User", "mcp.json"]),
        Os::Linux => {
            let config = match dirs.xdg_config_home.filter(|d| d.starts_with('/')) {
                Some(config) => config.to_owned(),
                None => join(home, &[".config"]),
            };
            join(&config, &["Code", "User", "mcp.json"])
        }
    };
    list.push(at(App::VsCode, Scope::User, vscode_user));
    list
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn paths(os: Os, dirs: &Dirs<'_>) -> Vec<String> {
        known_locations(os, dirs)
            .into_iter()
            .map(|l| l.to_string())
            .collect()
    }

    #[test]
    fn linux_with_and_without_xdg_config_home() {
        let mut dirs = Dirs {
            home: "/home/ada",
            working_dir: "/src/app/",
            appdata: None,
            xdg_config_home: None,
        };
        assert_eq!(
            paths(Os::Linux, &dirs),
            [
                "Claude Code (project): /src/app/.mcp.json",
                "Cursor (project): /src/app/.cursor/mcp.json",
                "VS Code (project): /src/app/.vscode/mcp.json",
                "Claude Code (user): /home/ada/.claude.json",
                "Cursor (user): /home/ada/.cursor/mcp.json",
                "VS Code (user): /home/ada/.config/Code/User/mcp.json",
            ]
        );
        dirs.xdg_config_home = Some("/xdg");
        assert_eq!(
            paths(Os::Linux, &dirs).last().map(String::as_str),
            Some("VS Code (user): /xdg/Code/User/mcp.json")
        );
        dirs.xdg_config_home = Some("relative/xdg");
        assert_eq!(
            paths(Os::Linux, &dirs).last().map(String::as_str),
            Some("VS Code (user): /home/ada/.config/Code/User/mcp.json")
        );
    }

    #[test]
    fn macos() {
        let dirs = Dirs {
            home: "/Users/ada",
            working_dir: "/Users/ada/app",
            appdata: None,
            xdg_config_home: Some("/ignored"),
        };
        let all = paths(Os::MacOs, &dirs);
        assert_eq!(all.len(), 7);
        assert_eq!(
            all[4],
            "Claude Desktop (user): /Users/ada/Library/Application Support/Claude/claude_desktop_config.json"
        );
        assert_eq!(
            all[6],
            "VS Code (user): /Users/ada/Library/Application Support/Code/User/mcp.json"
        );
    }

    #[test]
    fn windows_with_and_without_appdata() {
        let mut dirs = Dirs {
            home: r"C:\Users\ada",
            working_dir: r"C:\src\app\",
            appdata: Some(r"D:\Roaming"),
            xdg_config_home: None,
        };
        assert_eq!(
            paths(Os::Windows, &dirs),
            [
                r"Claude Code (project): C:\src\app\.mcp.json",
                r"Cursor (project): C:\src\app\.cursor\mcp.json",
                r"VS Code (project): C:\src\app\.vscode\mcp.json",
                r"Claude Code (user): C:\Users\ada\.claude.json",
                r"Claude Desktop (user): D:\Roaming\Claude\claude_desktop_config.json",
                r"Cursor (user): C:\Users\ada\.cursor\mcp.json",
                r"VS Code (user): D:\Roaming\Code\User\mcp.json",
            ]
        );
        dirs.appdata = None;
        assert_eq!(
            paths(Os::Windows, &dirs)[4],
            r"Claude Desktop (user): C:\Users\ada\AppData\Roaming\Claude\claude_desktop_config.json"
        );
    }
}

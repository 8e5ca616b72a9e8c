//! `mcpwire client`: an MCP client for people and scripts, on the blocking driver
//! ([`mcpwire::mcp::blocking::McpClient`]).
//!
//! The server is named with `--url URL` or `--stdio "CMD ARGS"` (or `-- CMD ARGS` at the end);
//! every option is accepted before or after the subcommand. Output is human-readable by default
//! (tables for lists, the text content of a call, the era on stderr); `--json` prints each
//! result object exactly as received, one per line. A tool call is confirmed on the terminal
//! first (`--yes` skips that); the server's input requests (elicitations) are asked on the
//! terminal ([`terminal`]) or answered with `--input KEY=JSON` / `--decline-input`.
//!
//! Failures end with one line on stderr a person can act on and a non-zero exit status.
//! `subscribe` runs until SIGINT or SIGTERM, then closes the subscription and exits 0; when
//! the server ends the subscription it exits 0 too, and 1 when the server refuses or breaks it.

mod auth;
mod output;
pub(crate) mod terminal;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use mcpwire_core::mcp::{
    CapabilityError, ClientCapabilities, Era, IncompatibleError, OpError, ProtocolChoice,
    SubscriptionChange, SubscriptionEndReason, SubscriptionEvent, SubscriptionFilter,
};
use serde_json::{Map, Value};
use signal_hook::consts::{SIGINT, SIGTERM};

use mcpwire::mcp::blocking::McpClient;
use mcpwire::mcp::{ClientOptions, Error, FromResult};
use mcpwire_dev::ApiKey;

use terminal::{CliHost, Shared};

/// The most pages of a list fetched by one command.
const MAX_PAGES: usize = 100;
/// How long `subscribe` waits for an event before it checks for an interruption again.
const INTERRUPT_CHECK: Duration = Duration::from_millis(100);

/// `mcpwire client [OPTIONS] <COMMAND>`.
#[derive(Args, Debug)]
pub struct ClientArgs {
    #[command(flatten)]
    opts: Options,
    #[command(subcommand)]
    command: ClientCommand,
    /// Set by [`split_stdio_command`] from `-- CMD ARGS`.
    #[arg(skip)]
    trailing: Vec<String>,
}

impl ClientArgs {
    /// Sets the stdio server command given after `--` (see [`split_stdio_command`]).
    pub fn set_trailing_command(&mut self, command: Vec<String>) {
        self.trailing = command;
    }
}

/// The era choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
enum ProtocolArg {
    /// Detect it: 2026-07-28 first, falling back to the legacy initialize era.
    #[default]
    Auto,
    /// 2026-07-28 only.
    #[value(name = "2026-07-28")]
    Modern,
    /// The legacy initialize era only (2025-11-25 and earlier).
    #[value(name = "2025-11-25")]
    Legacy,
}

#[derive(Args, Debug)]
struct Options {
    /// The Streamable HTTP server URL.
    #[arg(long, global = true, value_name = "URL")]
    url: Option<String>,
    /// The stdio server: a command line, split on spaces (quotes group words; no shell).
    #[arg(long, global = true, value_name = "\"CMD ARGS\"")]
    stdio: Option<String>,
    /// An extra HTTP header, `Name: value` (repeatable).
    #[arg(long = "header", global = true, value_name = "K:V")]
    headers: Vec<String>,
    /// A bearer token, read from `env:VAR` or `file:PATH` (never given on the command line).
    #[arg(long, global = true, value_name = "env:VAR|file:PATH")]
    bearer: Option<String>,
    /// The protocol era: auto (detect), 2026-07-28, or 2025-11-25 (legacy).
    #[arg(long, global = true, value_enum, default_value_t = ProtocolArg::Auto)]
    protocol: ProtocolArg,
    /// How long one request may take (e.g. 30s, 500ms, 2m; a bare number is seconds).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Print each result object as received, one JSON document per line.
    #[arg(long, global = true)]
    json: bool,
    /// Call tools without asking for confirmation.
    #[arg(long, global = true)]
    yes: bool,
    /// Accept the server's input request KEY with this JSON content (repeatable). For a URL
    /// request, `true` consents to the URL shown.
    #[arg(long = "input", global = true, value_name = "KEY=JSON")]
    inputs: Vec<String>,
    /// Decline every input request of the server.
    #[arg(long, global = true)]
    decline_input: bool,
    #[command(flatten)]
    auth: auth::AuthOptions,
}

#[derive(Subcommand, Debug)]
enum ClientCommand {
    /// The server's identity, versions and capabilities (server/discover, or initialize).
    Discover,
    /// Tools: list, call.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Resources: list, read, templates.
    Resources {
        #[command(subcommand)]
        command: ResourcesCommand,
    },
    /// Prompts: list, get.
    Prompts {
        #[command(subcommand)]
        command: PromptsCommand,
    },
    /// Print change notifications as they come, until interrupted (SIGINT or SIGTERM: the
    /// subscription is closed and the exit status is 0) or the server ends the subscription
    /// (status 0; 1 when it refuses or fails it).
    Subscribe(SubscribeArgs),
    /// ping (legacy servers only: the 2026-07-28 era has none).
    Ping,
    /// Log in to the --url server now (OAuth; any command logs in when the server asks) and
    /// keep the grant in the token store.
    Login,
    /// Forget the --url server's grants in the token store (nothing is sent).
    Logout,
    /// OAuth: the token store.
    Auth {
        #[command(subcommand)]
        command: auth::AuthCommand,
    },
}

#[derive(Subcommand, Debug)]
enum ToolsCommand {
    /// The server's tools (every page).
    List,
    /// Call a tool (its arguments are shown and confirmed first unless --yes).
    Call(NamedArgs),
}

#[derive(Subcommand, Debug)]
enum ResourcesCommand {
    /// The server's resources (every page).
    List,
    /// Read one resource.
    Read {
        /// The resource URI.
        uri: String,
    },
    /// The server's resource templates (every page).
    Templates,
}

#[derive(Subcommand, Debug)]
enum PromptsCommand {
    /// The server's prompts (every page).
    List,
    /// Get a prompt.
    Get(NamedArgs),
}

#[derive(Args, Debug)]
struct NamedArgs {
    /// The tool or prompt name.
    name: String,
    /// The arguments, a JSON object.
    #[arg(long, value_name = "JSON")]
    args: Option<String>,
    /// One argument, `key=value` (repeatable); the value is read as JSON when it parses as
    /// JSON, else as a string.
    #[arg(long = "arg", value_name = "K=V")]
    arg: Vec<String>,
}

#[derive(Args, Debug)]
struct SubscribeArgs {
    /// notifications/tools/list_changed.
    #[arg(long)]
    tools: bool,
    /// notifications/prompts/list_changed.
    #[arg(long)]
    prompts: bool,
    /// notifications/resources/list_changed.
    #[arg(long)]
    resources: bool,
    /// notifications/resources/updated for this URI (repeatable).
    #[arg(long = "resource", value_name = "URI")]
    resource: Vec<String>,
}

/// Takes `-- CMD ARGS` off the end of an `mcpwire client ...` command line: clap sees the
/// rest, and the words after `--` become the stdio server command. Other command lines are
/// returned unchanged.
pub fn split_stdio_command(args: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
    if args.get(1).and_then(|a| a.to_str()) != Some("client") {
        return (args, Vec::new());
    }
    match args.iter().position(|a| a.to_str() == Some("--")) {
        Some(i) => {
            let mut head = args;
            let tail = head.split_off(i);
            let command = tail
                .iter()
                .skip(1)
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            (head, command)
        }
        None => (args, Vec::new()),
    }
}

/// A failure of the command: one line for the person (exit status 1).
#[derive(Debug)]
struct Failure(String);

impl<T: Into<String>> From<T> for Failure {
    fn from(s: T) -> Self {
        Failure(s.into())
    }
}

/// Runs `mcpwire client ...`.
pub fn run(args: ClientArgs) -> ExitCode {
    match run_inner(args) {
        Ok(code) => code,
        Err(Failure(message)) => {
            eprintln!("mcpwire client: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: ClientArgs) -> Result<ExitCode, Failure> {
    let ClientArgs {
        opts,
        command,
        trailing,
    } = args;
    // The token store's commands need no server connection.
    match &command {
        ClientCommand::Logout => {
            let url = opts.url.as_deref().ok_or("logout needs --url URL")?;
            let store = opts.auth.store()?;
            let n = store.remove(url).map_err(|e| format!("token store: {e}"))?;
            eprintln!(
                "mcpwire client: {} grant(s) for {url} removed from {}",
                n,
                store.path().display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        ClientCommand::Auth {
            command: auth::AuthCommand::Status,
        } => {
            let store = opts.auth.store()?;
            let grants = store.list().map_err(|e| format!("token store: {e}"))?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            println!("token store: {}", store.path().display());
            if grants.is_empty() {
                println!("no grants");
            }
            for g in grants.iter().filter(|g| {
                opts.url
                    .as_deref()
                    .is_none_or(|u| mcpwire_core::auth::discovery::resource_matches(&g.resource, u))
            }) {
                println!("{}", auth::describe(g, now));
            }
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let inputs = parse_inputs(&opts.inputs)?;
    let terminal = Terminal {
        stdin: std::io::stdin().is_terminal(),
        stdout: std::io::stdout().is_terminal(),
        stderr: std::io::stderr().is_terminal(),
    };
    // Questions go to stderr and answers come from stdin: both must be the terminal.
    let interactive = terminal.stdin && terminal.stderr;
    let shared = Arc::new(Mutex::new(Shared::default()));
    // The progress line is drawn on stderr, and only when the output is watched on a
    // terminal too (piped or redirected output is for scripts: quiet).
    let host = CliHost::new(
        Arc::clone(&shared),
        inputs,
        opts.decline_input,
        interactive,
        terminal.stderr && terminal.stdout,
    );
    let mut options = ClientOptions::default().with_protocol(match opts.protocol {
        ProtocolArg::Auto => ProtocolChoice::Auto,
        ProtocolArg::Modern => ProtocolChoice::Modern,
        ProtocolArg::Legacy => ProtocolChoice::Legacy,
    });
    if let Some(t) = opts.timeout {
        options = options.with_request_timeout(t);
    }
    // Elicitation is declared only when someone can answer it: a person at the terminal, or
    // the answers given on the command line. Otherwise a server that needs it says so
    // (-32021), and that becomes an error naming the capability.
    if interactive || opts.decline_input || !opts.inputs.is_empty() {
        options = options.with_capabilities(
            ClientCapabilities::none()
                .with_elicitation_form()
                .with_elicitation_url(),
        );
    }
    for h in &opts.headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| format!("--header {h:?}: expected NAME:VALUE"))?;
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(format!("--header {h:?}: {name:?} is not a header name").into());
        }
        options = options.with_header(name, value.trim());
    }
    if let Some(source) = &opts.bearer {
        if !(source.starts_with("env:") || source.starts_with("file:")) {
            return Err(Failure::from(
                "--bearer takes env:VAR or file:PATH (a token on the command line would show in the process list)",
            ));
        }
        let key = ApiKey::from_source(source).map_err(|e| format!("--bearer: {e}"))?;
        options = options.with_bearer_token(key.expose());
    }

    if opts.url.is_some() && opts.bearer.is_none() && !opts.auth.no_auth {
        options = options.with_authorization(opts.auth.authorization()?);
    } else if matches!(command, ClientCommand::Login) {
        return Err(Failure::from(
            "login needs --url URL, and neither --bearer nor --no-auth",
        ));
    }
    let client = connect(&opts, trailing, options)?;
    client.set_host(Box::new(host));
    let mut ctx = Ctx {
        client,
        shared,
        json: opts.json,
        era_reported: false,
    };
    let outcome = ctx.command(&command, &opts, terminal);
    ctx.report_era();
    let code = outcome?;
    Ok(code)
}

fn connect(
    opts: &Options,
    trailing: Vec<String>,
    options: ClientOptions,
) -> Result<McpClient, Failure> {
    let stdio: Option<Vec<String>> = match (&opts.stdio, trailing.is_empty()) {
        (Some(_), false) => {
            return Err(Failure::from(
                "give the stdio server either with --stdio or after --, not both",
            ))
        }
        (Some(line), true) => Some(split_command_line(line)?),
        (None, false) => Some(trailing),
        (None, true) => None,
    };
    match (&opts.url, stdio) {
        (Some(_), Some(_)) => Err("give either --url or a stdio server, not both".into()),
        (None, None) => {
            Err("no server: give --url URL, --stdio \"CMD ARGS\" or -- CMD ARGS".into())
        }
        (Some(url), None) => {
            McpClient::connect_http(url, options).map_err(|e| Failure(error_line(&e)))
        }
        (None, Some(words)) => {
            let Some((program, rest)) = words.split_first() else {
                return Err("the stdio server command is empty".into());
            };
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            McpClient::connect_stdio(program, &rest, options).map_err(|e| Failure(error_line(&e)))
        }
    }
}

/// Which standard streams are terminals.
#[derive(Clone, Copy, Debug)]
struct Terminal {
    stdin: bool,
    stdout: bool,
    stderr: bool,
}

struct Ctx {
    client: McpClient,
    shared: Arc<Mutex<Shared>>,
    json: bool,
    era_reported: bool,
}

impl Ctx {
    fn command(
        &mut self,
        command: &ClientCommand,
        opts: &Options,
        terminal: Terminal,
    ) -> Result<ExitCode, Failure> {
        match command {
            ClientCommand::Discover => {
                let result = self.op(|c| c.discover().map(|d| d.to_value()))?;
                self.print(&result, output::discover);
            }
            ClientCommand::Login => {
                // Any request logs in when the server asks; a server that does not ask needs
                // no login.
                self.op(|c| c.discover().map(|d| d.to_value()))?;
                let url = opts.url.as_deref().unwrap_or_default();
                match opts.auth.store()?.list() {
                    Ok(grants) => match grants
                        .iter()
                        .find(|g| mcpwire_core::auth::discovery::resource_matches(&g.resource, url))
                    {
                        Some(g) => eprintln!(
                            "mcpwire client: logged in to {} (issuer {}, scope {})",
                            g.resource,
                            g.issuer,
                            g.tokens.scope.as_deref().unwrap_or("none named")
                        ),
                        None => eprintln!("mcpwire client: {url} did not ask for a login"),
                    },
                    Err(e) => return Err(Failure(format!("token store: {e}"))),
                }
            }
            ClientCommand::Logout | ClientCommand::Auth { .. } => {}
            ClientCommand::Tools {
                command: ToolsCommand::List,
            } => self.list(
                "tools",
                |c, cur| raw(c.list_tools(cur)),
                output::tools_table,
            )?,
            ClientCommand::Tools {
                command: ToolsCommand::Call(call),
            } => return self.call_tool(call, opts.yes, terminal),
            ClientCommand::Resources {
                command: ResourcesCommand::List,
            } => self.list(
                "resources",
                |c, cur| raw(c.list_resources(cur)),
                output::resources_table,
            )?,
            ClientCommand::Resources {
                command: ResourcesCommand::Templates,
            } => self.list(
                "resourceTemplates",
                |c, cur| raw(c.list_resource_templates(cur)),
                output::templates_table,
            )?,
            ClientCommand::Resources {
                command: ResourcesCommand::Read { uri },
            } => {
                let result = self.op(|c| raw(c.read_resource(uri)))?;
                self.print(&result, output::resource_contents);
            }
            ClientCommand::Prompts {
                command: PromptsCommand::List,
            } => self.list(
                "prompts",
                |c, cur| raw(c.list_prompts(cur)),
                output::prompts_table,
            )?,
            ClientCommand::Prompts {
                command: PromptsCommand::Get(get),
            } => {
                let arguments = arguments(get)?;
                let result = self.op(|c| raw(c.get_prompt(&get.name, Value::Object(arguments))))?;
                self.print(&result, output::prompt_messages);
            }
            ClientCommand::Subscribe(sub) => return self.subscribe(sub),
            ClientCommand::Ping => {
                // With the era unknown, the core learns it before pinging (ping is legacy-only).
                self.op(McpClient::ping)?;
                if self.json {
                    println!("{{}}");
                } else {
                    println!("pong");
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }

    /// Runs one operation, turning its error into the line a person reads.
    fn op<T>(&mut self, f: impl FnOnce(&McpClient) -> Result<T, Error>) -> Result<T, Failure> {
        let outcome = f(&self.client);
        terminal::clear_progress(&self.shared);
        self.report_era();
        let pending = std::mem::take(
            &mut self
                .shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .unanswered,
        );
        match outcome {
            Ok(v) if pending.is_empty() => Ok(v),
            Ok(_) => Err(unanswered_line(&pending).into()),
            Err(e) if !pending.is_empty() => {
                Err(format!("{} ({})", unanswered_line(&pending), error_line(&e)).into())
            }
            Err(e) => Err(self.explain(&e).into()),
        }
    }

    /// The era and version in use, once, on stderr.
    fn report_era(&mut self) {
        if self.era_reported {
            return;
        }
        let Some(era) = self.client.era() else {
            return;
        };
        self.era_reported = true;
        let version = era.protocol_version.unwrap_or_else(|| match era.era {
            Era::Modern => mcpwire_core::mcp::LATEST_PROTOCOL_VERSION.to_owned(),
            Era::Legacy => "a legacy version".to_owned(),
        });
        let fell_back = self
            .shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .fell_back;
        match era.era {
            Era::Legacy if fell_back => {
                eprintln!("mcpwire: server speaks only {version} (legacy era); fell back");
            }
            Era::Legacy => eprintln!("mcpwire: using {version} (legacy era)"),
            Era::Modern => eprintln!("mcpwire: using {version} (modern era)"),
        }
    }

    fn print(&self, result: &Value, human: fn(&Value) -> String) {
        if self.json {
            println!("{result}");
        } else {
            print!("{}", human(result));
        }
    }

    /// Every page of a list: `--json` prints each page's result; otherwise one table.
    fn list(
        &mut self,
        member: &str,
        page: fn(&McpClient, Option<&str>) -> Result<Value, Error>,
        table: fn(&[Value], usize) -> String,
    ) -> Result<(), Failure> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let result = self.op(|c| page(c, cursor.as_deref()))?;
            if self.json {
                println!("{result}");
            }
            if let Some(list) = result.get(member).and_then(Value::as_array) {
                items.extend(list.iter().cloned());
            }
            cursor = result
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        if !self.json {
            print!("{}", table(&items, output::width()));
        }
        Ok(())
    }

    fn call_tool(
        &mut self,
        call: &NamedArgs,
        yes: bool,
        terminal: Terminal,
    ) -> Result<ExitCode, Failure> {
        let arguments = arguments(call)?;
        let shown = serde_json::to_string_pretty(&Value::Object(arguments.clone()))
            .unwrap_or_else(|_| "{}".to_owned());
        if !yes {
            // The question is asked on stderr and answered on stdin: without both on a
            // terminal nobody could see it or answer, so refuse rather than wait.
            let missing = match (terminal.stdin, terminal.stderr) {
                (false, _) => Some("stdin"),
                (true, false) => Some("stderr"),
                (true, true) => None,
            };
            if let Some(stream) = missing {
                return Err(format!(
                    "not calling tool '{}': confirmation is needed and {stream} is not a terminal (pass --yes to call it without asking)",
                    call.name
                )
                .into());
            }
            eprintln!("Call tool '{}' with these arguments?\n{shown}", call.name);
            if !terminal::confirm("Call it? [y/N] ") {
                return Err(format!("tool '{}' not called", call.name).into());
            }
        }
        // The core lists the tools first when it does not know this one's x-mcp-header
        // annotations (ClientConfig::list_tools_before_call).
        let result = self.op(|c| raw(c.call_tool(&call.name, Value::Object(arguments))))?;
        let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        if self.json {
            println!("{result}");
        } else {
            print!("{}", output::tool_result(&result));
        }
        if is_error {
            eprintln!("mcpwire client: tool '{}' reported an error", call.name);
            return Ok(ExitCode::FAILURE);
        }
        Ok(ExitCode::SUCCESS)
    }

    fn subscribe(&mut self, args: &SubscribeArgs) -> Result<ExitCode, Failure> {
        let filter = SubscriptionFilter {
            tools_list_changed: args.tools,
            prompts_list_changed: args.prompts,
            resources_list_changed: args.resources,
            resource_subscriptions: args.resource.clone(),
        };
        if filter.is_empty() {
            return Err(Failure::from(
                "subscribe to something: --tools, --prompts, --resources or --resource URI",
            ));
        }
        // SIGINT or SIGTERM ends the command normally (a second one exits at once, status 1):
        // the subscription is closed and, on stdio, the server child stopped as the client is
        // dropped. Without this the signal's default action would leave both to chance.
        let interrupted = Arc::new(AtomicBool::new(false));
        for signal in [SIGINT, SIGTERM] {
            signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&interrupted))
                .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&interrupted)))
                .map_err(|e| format!("cannot install signal handlers: {e}"))?;
        }
        let mut events = self.op(|c| c.subscribe(filter))?;
        loop {
            if interrupted.load(Ordering::SeqCst) {
                drop(events);
                eprintln!("mcpwire: interrupted; subscription closed");
                return Ok(ExitCode::SUCCESS);
            }
            let event = match events.next_timeout(INTERRUPT_CHECK) {
                Ok(e) => e,
                // On a terminal, ^C reaches a stdio server too, which may end first.
                Err(_) if interrupted.load(Ordering::SeqCst) => continue,
                Err(e) => return Err(self.explain(&e).into()),
            };
            let Some(event) = event else {
                if events.is_over() {
                    return Ok(ExitCode::SUCCESS);
                }
                continue;
            };
            match event {
                SubscriptionEvent::Acknowledged {
                    accepted, dropped, ..
                } => {
                    if self.json {
                        println!(
                            "{}",
                            serde_json::json!({"event": "acknowledged", "accepted": accepted, "dropped": dropped})
                        );
                    } else if !accepted.is_empty() {
                        eprintln!("mcpwire: subscribed: {}", output::filter_words(&accepted));
                        if !dropped.is_empty() {
                            eprintln!(
                                "mcpwire: the server does not deliver: {}",
                                output::filter_words(&dropped)
                            );
                        }
                    }
                    if accepted.is_empty() {
                        // Nothing can ever be printed: waiting would only hang.
                        drop(events);
                        return Err(format!(
                            "the server delivers none of what was asked ({})",
                            output::filter_words(&dropped)
                        )
                        .into());
                    }
                }
                SubscriptionEvent::Changed { change, .. } => {
                    let (method, uri) = match &change {
                        SubscriptionChange::ToolsListChanged => {
                            ("notifications/tools/list_changed", None)
                        }
                        SubscriptionChange::PromptsListChanged => {
                            ("notifications/prompts/list_changed", None)
                        }
                        SubscriptionChange::ResourcesListChanged => {
                            ("notifications/resources/list_changed", None)
                        }
                        SubscriptionChange::ResourceUpdated { uri } => {
                            ("notifications/resources/updated", Some(uri.as_str()))
                        }
                    };
                    if self.json {
                        let mut o = Map::new();
                        o.insert("method".into(), method.into());
                        if let Some(uri) = uri {
                            o.insert("uri".into(), uri.into());
                        }
                        println!("{}", Value::Object(o));
                    } else {
                        println!(
                            "{method}{}",
                            uri.map(|u| format!(" {u}")).unwrap_or_default()
                        );
                    }
                }
                SubscriptionEvent::Refetch { targets, .. } => {
                    let names: Vec<&str> = targets.iter().map(|t| t.method()).collect();
                    eprintln!(
                        "mcpwire: reconnected; these may have changed meanwhile: {}",
                        names.join(", ")
                    );
                }
                SubscriptionEvent::Disconnected { cause, attempt, .. } => {
                    eprintln!("mcpwire: subscription stream lost ({cause:?}); reconnecting (attempt {attempt})");
                }
                SubscriptionEvent::Ended { reason, .. } => {
                    let line = reason.to_string();
                    return match reason {
                        // The server ended it on purpose: the command is over, not failed.
                        SubscriptionEndReason::ServerCompleted
                        | SubscriptionEndReason::ServerCancelled { .. } => {
                            eprintln!("mcpwire: {line}");
                            Ok(ExitCode::SUCCESS)
                        }
                        _ => Err(line.into()),
                    };
                }
                _ => {}
            }
        }
    }

    /// An error line, with what the era adds (ping exists only in the legacy era).
    fn explain(&self, e: &Error) -> String {
        if let Error::Op(op) = e {
            if let OpError::Incompatible(IncompatibleError::Unsupported {
                operation,
                era: Era::Modern,
            }) = op.as_ref()
            {
                return format!(
                    "{operation} exists only in the legacy era (2025-11-25 and earlier); this server speaks 2026-07-28"
                );
            }
        }
        error_line(e)
    }
}

/// Why a subscription ended, for a person.
fn unanswered_line(keys: &[String]) -> String {
    format!(
        "the server asked for input {} and nobody can answer on this terminal: pass --input KEY=JSON or --decline-input",
        keys.iter()
            .map(|k| format!("'{k}'"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The line a person reads for a driver error.
fn error_line(e: &Error) -> String {
    match e {
        Error::Op(op) => match op.as_ref() {
            OpError::Incompatible(IncompatibleError::ToolExcluded { tool, reason }) => {
                format!("tool '{tool}' excluded: {reason}")
            }
            OpError::Incompatible(IncompatibleError::Capability(CapabilityError::HostLacks {
                missing,
            })) => {
                let mut paths = Vec::new();
                capability_paths(missing, String::new(), &mut paths);
                let hint = if paths.iter().any(|p| p.starts_with("elicitation")) {
                    " (run it in a terminal, or pass --input KEY=JSON or --decline-input)"
                } else {
                    ""
                };
                format!("server requires capability {}{hint}", paths.join(", "))
            }
            other => other.to_string(),
        },
        Error::Transport { url, cause, .. } => format!("cannot reach {url}: {cause}"),
        other => other.to_string(),
    }
}

/// `{"elicitation": {"url": {}}}` → `elicitation.url`.
fn capability_paths(v: &Value, prefix: String, out: &mut Vec<String>) {
    match v.as_object() {
        Some(o) if !o.is_empty() => {
            for (k, child) in o {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                capability_paths(child, p, out);
            }
        }
        _ if !prefix.is_empty() => out.push(prefix),
        _ => out.push(v.to_string()),
    }
}

/// `--args JSON` merged with each `--arg k=v` (a value that parses as JSON is JSON, else a
/// string).
fn arguments(named: &NamedArgs) -> Result<Map<String, Value>, Failure> {
    let mut map = match &named.args {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err("--args must be a JSON object, e.g. '{\"text\":\"hi\"}'".into()),
            Err(e) => return Err(format!("--args is not valid JSON: {e}").into()),
        },
    };
    for a in &named.arg {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("--arg {a:?}: expected KEY=VALUE"))?;
        if k.is_empty() {
            return Err(format!("--arg {a:?}: the key is empty").into());
        }
        let value = serde_json::from_str::<Value>(v).unwrap_or_else(|_| Value::String(v.into()));
        map.insert(k.to_owned(), value);
    }
    Ok(map)
}

/// `--input KEY=JSON`, by key.
fn parse_inputs(raw: &[String]) -> Result<BTreeMap<String, Value>, Failure> {
    let mut out = BTreeMap::new();
    for r in raw {
        let (k, v) = r
            .split_once('=')
            .ok_or_else(|| format!("--input {r:?}: expected KEY=JSON"))?;
        let value: Value = serde_json::from_str(v)
            .map_err(|e| format!("--input {k}: the content is not valid JSON: {e}"))?;
        out.insert(k.to_owned(), value);
    }
    Ok(out)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `30s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 30s, 500ms, 2m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is out of range"))
}

/// Splits a command line into words: spaces separate, single or double quotes group, a
/// backslash escapes the next character outside single quotes. No shell is involved.
fn split_command_line(line: &str) -> Result<Vec<String>, Failure> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(Failure::from("--stdio: a quote is not closed"));
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// A typed result as the JSON the server sent (what the output prints).
fn raw<T: FromResult>(result: Result<T, Error>) -> Result<Value, Error> {
    result.map(|r| r.raw().clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn named(args: Option<&str>, arg: &[&str]) -> NamedArgs {
        NamedArgs {
            name: "t".into(),
            args: args.map(str::to_owned),
            arg: arg.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn arg_values_are_json_when_they_parse_else_strings() {
        let m = arguments(&named(
            Some(r#"{"a":1,"b":"x"}"#),
            &[
                "b=2",
                "c=true",
                "d=hello world",
                "e={\"k\":[1]}",
                "f=",
                "g=a=b",
            ],
        ))
        .unwrap();
        assert_eq!(
            Value::Object(m),
            serde_json::json!({"a":1,"b":2,"c":true,"d":"hello world","e":{"k":[1]},"f":"","g":"a=b"})
        );
    }

    #[test]
    fn args_must_be_a_json_object() {
        assert!(arguments(&named(Some("[1]"), &[])).is_err());
        assert!(arguments(&named(Some("{"), &[])).is_err());
        assert!(arguments(&named(None, &["novalue"])).is_err());
    }

    #[test]
    fn command_line_splits_on_spaces_and_keeps_quoted_words() {
        assert_eq!(
            split_command_line(r#"srv --name "a b" 'c "d"' e\ f"#).unwrap(),
            vec!["srv", "--name", "a b", "c \"d\"", "e f"]
        );
        assert!(split_command_line("srv 'open").is_err());
        assert!(split_command_line("   ").unwrap().is_empty());
    }

    #[test]
    fn durations_take_units_and_bare_seconds() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert!(parse_duration("5 weeks").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn missing_capabilities_are_named_by_dotted_path() {
        let e = Error::Op(Box::new(OpError::Incompatible(
            IncompatibleError::Capability(CapabilityError::HostLacks {
                missing: serde_json::json!({"elicitation": {"url": {}}}),
            }),
        )));
        assert!(
            error_line(&e).starts_with("server requires capability elicitation.url"),
            "{}",
            error_line(&e)
        );
    }

    #[test]
    fn excluded_tool_error_names_the_tool_and_the_reason() {
        let e = Error::Op(Box::new(OpError::Incompatible(
            IncompatibleError::ToolExcluded {
                tool: "x".into(),
                reason: "x-mcp-header \"A B\" at properties.a is not an HTTP token (1*tchar)"
                    .into(),
            },
        )));
        assert_eq!(
            error_line(&e),
            "tool 'x' excluded: x-mcp-header \"A B\" at properties.a is not an HTTP token (1*tchar)"
        );
    }

    #[test]
    fn trailing_command_is_split_off_only_for_client() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let (head, cmd) =
            split_stdio_command(os(&["mcpwire", "client", "ping", "--", "srv", "--x"]));
        assert_eq!(head, os(&["mcpwire", "client", "ping"]));
        assert_eq!(cmd, vec!["srv", "--x"]);
        let (head, cmd) = split_stdio_command(os(&["mcpwire", "tunnel", "--", "x"]));
        assert_eq!(head.len(), 4);
        assert!(cmd.is_empty());
    }
}

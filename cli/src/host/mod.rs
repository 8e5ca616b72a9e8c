//! `mcpwire host`: many MCP servers at once from the config files people already have, the
//! tool catalog under collision-free names, the tool search, and calls through the consent
//! policy. The decisions are the core's (`mcpwire_core::host`); the servers run on the
//! blocking driver's `mcpwire::host::blocking::Host`; this module reads files, asks the
//! person on the terminal and prints.
//!
//! Prompts go to stderr and answers are read from stdin, so stdout holds only results.
//! Exit status: 0 done, 1 failed (a line on stderr), 2 usage, 3 refused by the person (or
//! because nobody could be asked: not a terminal and no `--yes`).

mod load;
mod login;
mod serve;
mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use mcpwire::host::blocking::Host;
use mcpwire::host::{
    FileTokens, Hooks, HostAuthorization, HostOptions, HostUserAgent, RegistryEvent, ServerId,
    ServerSpec,
};
use mcpwire::mcp::{ClientOptions, Host as _, LoopbackBrowser};
use mcpwire_core::mcp::{ClientCapabilities, InputAnswer, InputRequest, InputRequestEvent, OpId};

use crate::client::terminal::{CliHost, Shared as TerminalShared};
use mcpwire_core::host::catalog::{
    Catalog, DiscoveryThreshold, MetaCall, Presentation, PresentationConfig,
};
use mcpwire_core::host::consent::{
    CommandCheck, CommandPrompt, ConsentPolicy, ElicitationPrompt, Rules, ToolCall, Verdict,
};
use mcpwire_core::host::TransportSpec;
use serde_json::{json, Value};

/// Exit status of a call the person refused (or nobody could be asked about).
const REFUSED: u8 = 3;

/// `mcpwire host`: connects every server of an MCP config file at once and serves their
/// tools under collision-free names (`<server>__<tool>`), with a tool search and calls
/// through a consent policy. Without --config it reads the first file it finds of Claude
/// Code, Cursor, VS Code (project, then user) or Claude Desktop, and says which.
#[derive(Args, Debug)]
pub(crate) struct HostArgs {
    /// An MCP config file (`mcpServers` of Claude Desktop, Claude Code or Cursor; VS Code's
    /// `servers`, JSONC). Repeatable; server ids must not repeat across files.
    #[arg(long = "config", value_name = "FILE", global = true)]
    configs: Vec<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Answer "once" to every call the policy asks about (never "always", never past a deny
    /// rule). It does not approve local commands: see --approve-commands.
    #[arg(long, global = true)]
    yes: bool,
    /// Start the config's local commands that are not approved yet, for this run only (each
    /// is shown in full on stderr first). Without it, only commands a person approved on a
    /// terminal run.
    #[arg(long, global = true)]
    approve_commands: bool,
    /// The model's context window, in tokens: the tool definitions' share of it decides
    /// between giving the model every tool and progressive discovery.
    #[arg(long, value_name = "TOKENS", default_value_t = 200_000, global = true)]
    context_window: u64,
    /// The share of the context window (1 to 5 percent) above which the model gets the
    /// `search_tools` and `call_tool` meta-tools instead of every definition.
    #[arg(long, value_name = "PERCENT", default_value_t = 3.0, global = true)]
    threshold: f64,
    /// How long each server may take to connect (start, discover, list its tools).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::client::parse_duration, global = true)]
    connect_timeout: Duration,
    /// Always give the model this tool's definition, even under progressive discovery (an
    /// exposed name, as `tools` lists it). Repeatable.
    #[arg(long = "pin", value_name = "NAME", global = true)]
    pins: Vec<String>,
    /// Where approvals are remembered (default `$XDG_STATE_HOME/mcpwire/host`, else
    /// `~/.local/state/mcpwire/host`).
    #[arg(long, value_name = "DIR", global = true)]
    state_dir: Option<PathBuf>,
    /// OAuth: allow http:// to loopback addresses for the servers' URLs and their
    /// authorization servers (development servers on this machine).
    #[arg(long, global = true)]
    allow_http_loopback: bool,
    #[command(subcommand)]
    command: HostCommand,
}

/// OAuth for the host's HTTP servers, as every host command sets it up: the grants in the
/// data directory's token store (a partition per server), `client_name` for registration.
fn host_authorization(
    args: &HostArgs,
    user_agent: Arc<dyn HostUserAgent>,
    client_name: &str,
) -> Result<HostAuthorization, Failure> {
    let tokens = FileTokens::in_data_dir()?;
    let mut authorization = HostAuthorization::new(user_agent, Arc::new(tokens));
    authorization.client_name = client_name.to_owned();
    authorization.allow_http_loopback = args.allow_http_loopback;
    Ok(authorization)
}

#[derive(Subcommand, Debug, Clone)]
enum HostCommand {
    /// Each server: id, state, era, transport, tool count, trust.
    Servers,
    /// Serve every server of the config as one MCP server (stdio, or --listen for HTTP), for
    /// a host you already use: tools, prompts and resources, calls through the consent policy.
    #[command(long_about = serve::SERVE_ABOUT)]
    Serve(serve::ServeArgs),
    /// The tool catalog, grouped by server, with the exposed names the model sees, the
    /// token estimate and how the tools would be presented.
    Tools {
        /// Only this server's tools.
        #[arg(long, value_name = "ID")]
        server: Option<String>,
        /// Print the tools array as a model provider takes it (`anthropic`, `openai`,
        /// `openai-responses`), as presented (all tools, or the meta-tools and pinned ones).
        #[arg(long = "for", value_name = "PROVIDER")]
        provider: Option<Provider>,
    },
    /// Search the catalog: words (BM25 over names, titles, descriptions and parameter
    /// names), `select:a,b` (exact exposed names) or `regex:PATTERN`.
    Search {
        /// The query.
        query: String,
        /// At most this many results (1 to 50).
        #[arg(long, default_value_t = 5)]
        limit: usize,
    },
    /// Call a tool by its exposed name (`<server>__<tool>`, as `tools` lists it), through
    /// the consent policy.
    Call {
        /// The exposed name.
        name: String,
        /// The arguments, a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
    },
    /// One session on stdin, a command a line (`servers`, `tools [ID]`, `search QUERY`,
    /// `call NAME [JSON]`, `quit`): approvals given once and the record of which server's
    /// text went where last for the session.
    Shell,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Provider {
    Anthropic,
    Openai,
    OpenaiResponses,
}

/// A failure of the command: one line for the person.
struct Failure(String);

impl<T: std::fmt::Display> From<T> for Failure {
    fn from(e: T) -> Self {
        Failure(e.to_string())
    }
}

/// How a command ended.
enum Outcome {
    Done,
    Failed,
    Refused,
}

/// Runs `mcpwire host`.
pub(crate) fn run(args: HostArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::FAILURE,
        Ok(Outcome::Refused) => ExitCode::from(REFUSED),
        Err(Failure(line)) => {
            eprintln!("mcpwire host: {line}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &HostArgs) -> Result<Outcome, Failure> {
    if let HostCommand::Serve(serve) = &args.command {
        return serve::run(args, serve);
    }
    let threshold = DiscoveryThreshold::from_percent(args.threshold)?;
    let loaded = load::load(&args.configs)?;
    for (path, location) in &loaded.read {
        match location {
            Some(l) => eprintln!("mcpwire host: reading {} ({})", path.display(), describe(l)),
            None => eprintln!("mcpwire host: reading {}", path.display()),
        }
    }
    if !loaded.also_found.is_empty() {
        let others: Vec<String> = loaded.also_found.iter().map(|l| l.path.clone()).collect();
        eprintln!(
            "mcpwire host: also found {} (pass --config to read them)",
            others.join(", ")
        );
    }
    for e in &loaded.errors {
        eprintln!("mcpwire host: {e}");
    }
    let rules = rules(&loaded.permissions)?;
    let mut state = state::State::load(state::state_dir(args.state_dir.as_deref()))?;
    let shell = matches!(args.command, HostCommand::Shell);
    let terminal = std::io::stdin().is_terminal();
    let mut io = Terminal {
        interactive: shell || terminal,
        terminal,
    };

    // Local commands run only once a person has approved their exact command line.
    let mut specs = Vec::new();
    let mut not_approved = Vec::new();
    for entry in &loaded.entries {
        let spec = entry.spec.clone();
        if spec.disabled {
            specs.push(spec);
            continue;
        }
        match approve_command(&spec, args.approve_commands, &mut io, &mut state)? {
            true => specs.push(spec),
            false => not_approved.push(spec.id.clone()),
        }
    }

    let user_agent: Arc<dyn HostUserAgent> = Arc::new(LoopbackBrowser::new().with_show(|url| {
        eprintln!("mcpwire host: a server asks for a login. Open this URL in a browser:");
        eprintln!("  {url}");
    }));
    let authorization = host_authorization(args, user_agent, "mcpwire host")?;
    let hooks = Arc::new(Elicitations(Mutex::new(CliHost::new(
        Arc::new(Mutex::new(TerminalShared::default())),
        BTreeMap::new(),
        false,
        io.interactive,
        false,
    ))));
    // Elicitation is declared only when a person can answer it.
    let mut client = ClientOptions::default();
    if io.interactive {
        client = client.with_capabilities(
            ClientCapabilities::none()
                .with_elicitation_form()
                .with_elicitation_url(),
        );
    }
    let host = Host::new(
        HostOptions::default()
            .with_client(client)
            .with_connect_timeout(args.connect_timeout)
            .with_authorization(authorization)
            .with_hooks(hooks),
    );
    // Each failure names its server.
    for (_, outcome) in host.connect_all(specs) {
        if let Err(e) = outcome {
            eprintln!("mcpwire host: {e}");
        }
    }
    let mut session = Session {
        host,
        catalog: Catalog::new(),
        policy: ConsentPolicy::new(rules).with_approvals(state.tools.clone()),
        state,
        not_approved,
        presentation: PresentationConfig::new(args.context_window).with_threshold(threshold),
        json: args.json,
        yes: args.yes,
        pins: args.pins.clone(),
        changed: BTreeSet::new(),
        fresh_until: BTreeMap::new(),
    };
    session.refresh_catalog();
    let outcome = match &args.command {
        HostCommand::Shell => session.shell(&mut io),
        command => session.command(command, &mut io),
    };
    session.host.close();
    outcome
}

fn describe(l: &mcpwire_core::host::config::Location) -> String {
    let scope = match l.scope {
        mcpwire_core::host::config::Scope::Project => "project",
        mcpwire_core::host::config::Scope::User => "user",
    };
    format!("{} {scope} config", l.app)
}

/// The files' `permissions` rules; one bad rule fails the command (a bad deny rule dropped
/// would allow what it meant to deny).
fn rules(p: &mcpwire_core::host::config::Permissions) -> Result<Rules, Failure> {
    let texts = |list: &[mcpwire_core::host::config::Rule]| {
        list.iter().map(|r| r.text.clone()).collect::<Vec<_>>()
    };
    Rules::from_lists(texts(&p.allow), texts(&p.ask), texts(&p.deny))
        .and_then(|r| r.with_billing(texts(&p.billing)))
        .map_err(|e| Failure(format!("the permissions rules: {e}")))
}

/// Stdin, for answers (and for the shell's commands). No lock is held between questions:
/// an elicitation is asked from a client's thread while a call waits.
struct Terminal {
    /// Answers can be asked for: stdin is a terminal, or `shell` reads its commands (and the
    /// answers to call prompts) from it.
    interactive: bool,
    /// stdin is a terminal: a person is there.
    terminal: bool,
}

impl Terminal {
    /// Asks on stderr; the answer's first line, trimmed (`None` at end of input).
    fn ask(&mut self, question: &str) -> Option<String> {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim().to_owned()),
        }
    }
}

/// SEP-1024: a local command runs only with a person's explicit approval of its exact
/// command line on a terminal, remembered in the state directory (`--approve-commands`: for
/// this run only, the command shown in full first).
fn approve_command(
    spec: &ServerSpec,
    approve_commands: bool,
    io: &mut Terminal,
    state: &mut state::State,
) -> Result<bool, Failure> {
    if !matches!(spec.transport, TransportSpec::Stdio { .. }) {
        return Ok(true);
    }
    if matches!(state.commands.check(spec), CommandCheck::Approved) {
        return Ok(true);
    }
    let prompt = CommandPrompt::new(spec)?;
    if approve_commands {
        eprintln!("{prompt}");
        eprintln!(
            "mcpwire host: server \"{}\": approved by --approve-commands for this run",
            spec.id
        );
        return Ok(true);
    }
    // Only a person at a terminal approves a command (a `shell` fed from a pipe does not).
    if !io.terminal {
        eprintln!(
            "mcpwire host: server \"{}\" runs a local command that is not approved yet ({}); run on a terminal to approve it, or pass --approve-commands for this run",
            spec.id,
            prompt.command.display()
        );
        return Ok(false);
    }
    eprintln!("{prompt}");
    let answer = io.ask("Run this command? [y/N] ");
    if matches!(answer.as_deref(), Some("y" | "Y" | "yes")) {
        state.commands.approve(&prompt);
        state.save_commands()?;
        Ok(true)
    } else {
        eprintln!(
            "mcpwire host: server \"{}\" skipped (not approved)",
            spec.id
        );
        Ok(false)
    }
}

struct Session {
    host: Host,
    catalog: Catalog,
    policy: ConsentPolicy,
    state: state::State,
    not_approved: Vec<ServerId>,
    presentation: PresentationConfig,
    json: bool,
    yes: bool,
    pins: Vec<String>,
    /// Servers that announced `list_changed` since their tools were last listed.
    changed: BTreeSet<ServerId>,
    /// When each listing with a positive `ttlMs` goes stale.
    fresh_until: BTreeMap<ServerId, Instant>,
}

impl Session {
    /// The catalog follows the servers: a server that became ready is listed (every page,
    /// through its client's cache), one that announced `list_changed` or whose listing's
    /// positive `ttlMs` ran out is listed again, one that is no longer ready leaves it.
    /// Otherwise the catalog is the host's memo of the definitions and nothing is asked
    /// (`tools/list` is not sent for every command; a server that gives no TTL is listed
    /// again only on `list_changed`).
    fn refresh_catalog(&mut self) {
        while let Some(event) = self.host.poll_event() {
            if let RegistryEvent::ToolsChanged { server } = event {
                self.changed.insert(server);
            }
        }
        let listed: BTreeSet<ServerId> = self.catalog.servers().cloned().collect();
        for s in self.host.servers() {
            let id = s.id();
            let known = listed.contains(id);
            if !s.is_ready() {
                if known {
                    self.catalog.remove_server(id);
                }
                continue;
            }
            let expired = self
                .fresh_until
                .get(id)
                .is_some_and(|t| Instant::now() >= *t);
            if known && !expired && !self.changed.contains(id) {
                continue;
            }
            match self.host.tools_listing(id) {
                Ok(list) => {
                    // A positive `ttlMs` bounds the memo too: a lost notification is caught
                    // when it runs out (the client's cache answers until then).
                    match list
                        .ttl_ms
                        .and_then(|ms| u64::try_from(ms).ok())
                        .filter(|ms| *ms > 0)
                    {
                        Some(ms) => {
                            self.fresh_until
                                .insert(id.clone(), Instant::now() + Duration::from_millis(ms));
                        }
                        None => {
                            self.fresh_until.remove(id);
                        }
                    }
                    self.catalog.set_server_tools(id.clone(), list.tools);
                    self.changed.remove(id);
                }
                Err(e) => eprintln!("mcpwire host: cannot list the tools: {e}"),
            }
        }
        for name in &self.pins {
            if let Some((server, tool)) = self.catalog.route(name) {
                let (server, tool) = (server.clone(), tool.name.clone());
                self.catalog.pin(&server, &tool);
            }
        }
    }

    fn command(&mut self, command: &HostCommand, io: &mut Terminal) -> Result<Outcome, Failure> {
        match command {
            HostCommand::Servers => self.servers(),
            HostCommand::Tools { server, provider } => self.tools(server.as_deref(), *provider),
            HostCommand::Search { query, limit } => self.search(query, *limit),
            HostCommand::Call { name, args } => {
                let arguments: Value = serde_json::from_str(args)
                    .map_err(|e| Failure(format!("--args is not JSON: {e}")))?;
                self.call(name, arguments, io)
            }
            HostCommand::Shell | HostCommand::Serve(_) => Ok(Outcome::Done),
        }
    }

    fn shell(&mut self, io: &mut Terminal) -> Result<Outcome, Failure> {
        loop {
            let Some(line) = io.ask("mcpwire host> ") else {
                eprintln!();
                return Ok(Outcome::Done);
            };
            let (word, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            let rest = rest.trim();
            self.refresh_catalog();
            let outcome = match word {
                "" => continue,
                "quit" | "exit" => return Ok(Outcome::Done),
                "servers" => self.servers(),
                "tools" => self.tools((!rest.is_empty()).then_some(rest), None),
                "search" => self.search(rest, 5),
                "call" => {
                    let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
                    match serde_json::from_str(args.trim()) {
                        Ok(arguments) => self.call(name, arguments, io),
                        Err(e) => Err(Failure(format!("the arguments are not JSON: {e}"))),
                    }
                }
                "help" => {
                    eprintln!("commands: servers | tools [ID] | search QUERY | call NAME [JSON] | quit");
                    Ok(Outcome::Done)
                }
                other => Err(Failure(format!(
                    "unknown command {other:?} (servers, tools [ID], search QUERY, call NAME [JSON], quit)"
                ))),
            };
            match outcome {
                Ok(Outcome::Refused) => eprintln!("call refused"),
                Ok(_) => {}
                Err(Failure(line)) => eprintln!("mcpwire host: {line}"),
            }
        }
    }

    fn servers(&self) -> Result<Outcome, Failure> {
        let mut rows = Vec::new();
        for s in self.host.servers() {
            let era = s.era().map(|e| {
                e.protocol_version
                    .clone()
                    .unwrap_or_else(|| format!("{:?}", e.era))
            });
            let error = match s.state() {
                mcpwire_core::host::registry::ConnectionState::Failed(f) => Some(f.to_string()),
                _ => None,
            };
            rows.push(json!({
                "id": s.id().as_str(),
                "state": s.state().kind().as_str(),
                "era": era,
                "transport": s.transport_name(),
                "tools": self.catalog.server_entries(s.id()).count(),
                "trust": trust_word(s.trust()),
                "error": error,
            }));
        }
        for id in &self.not_approved {
            rows.push(json!({
                "id": id.as_str(), "state": "not approved", "era": null, "transport": "stdio",
                "tools": 0, "trust": null, "error": "its local command was not approved",
            }));
        }
        rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        if self.json {
            println!("{}", json!({ "servers": rows }));
            return Ok(Outcome::Done);
        }
        println!(
            "{:<20} {:<13} {:<11} {:<9} {:>5}  TRUST",
            "ID", "STATE", "ERA", "TRANSPORT", "TOOLS"
        );
        for r in &rows {
            println!(
                "{:<20} {:<13} {:<11} {:<9} {:>5}  {}",
                r["id"].as_str().unwrap_or_default(),
                r["state"].as_str().unwrap_or_default(),
                r["era"].as_str().unwrap_or("-"),
                r["transport"].as_str().unwrap_or_default(),
                r["tools"].as_u64().unwrap_or(0),
                r["trust"].as_str().unwrap_or("-"),
            );
            if let Some(e) = r["error"].as_str() {
                println!("    {e}");
            }
        }
        Ok(Outcome::Done)
    }

    fn tools(&self, server: Option<&str>, provider: Option<Provider>) -> Result<Outcome, Failure> {
        let only = server.map(ServerId::new).transpose()?;
        if let Some(id) = &only {
            if self.host.server(id).is_none() {
                return Err(Failure(format!("no server \"{id}\" in the config")));
            }
        }
        let decision = self.catalog.presentation(&self.presentation);
        if let Some(provider) = provider {
            let tools = self.catalog.model_tools(&self.presentation);
            let out = match provider {
                Provider::Anthropic => tools.anthropic(),
                Provider::Openai => tools.openai_chat(),
                Provider::OpenaiResponses => tools.openai_responses(),
            };
            println!("{}", serde_json::to_string_pretty(&out)?);
            return Ok(Outcome::Done);
        }
        let estimate = self.catalog.token_estimate();
        let mode = match decision.presentation {
            Presentation::AllTools => "all tools",
            Presentation::ProgressiveDiscovery => "progressive discovery",
        };
        let ids: Vec<ServerId> = match &only {
            Some(id) => vec![id.clone()],
            None => self.catalog.servers().cloned().collect(),
        };
        if self.json {
            let servers: Vec<Value> = ids
                .iter()
                .map(|id| {
                    let tools: Vec<Value> = self
                        .catalog
                        .server_entries(id)
                        .map(|e| {
                            json!({
                                "name": e.exposed,
                                "tool": e.tool.name,
                                "description": e.tool.description,
                            })
                        })
                        .collect();
                    json!({ "id": id.as_str(), "tools": tools })
                })
                .collect();
            println!(
                "{}",
                json!({ "presentation": mode, "tokens": estimate.tokens, "servers": servers })
            );
            return Ok(Outcome::Done);
        }
        println!(
            "{} tools from {} servers, about {} tokens of definitions: {mode} (threshold {} tokens: {}% of {})",
            self.catalog.len(),
            self.catalog.servers().count(),
            estimate.tokens,
            decision.limit_tokens,
            self.presentation.threshold.percent(),
            self.presentation.context_window,
        );
        for id in ids {
            println!("{id}:");
            for e in self.catalog.server_entries(&id) {
                let about = one_line(e.tool.description.as_deref());
                println!("  {:<40} {about}", e.exposed);
            }
        }
        Ok(Outcome::Done)
    }

    fn search(&self, query: &str, limit: usize) -> Result<Outcome, Failure> {
        let results = self.catalog.search(query, limit)?;
        if self.json {
            let hits: Vec<Value> = results
                .hits
                .iter()
                .map(|h| {
                    json!({
                        "name": h.exposed,
                        "server": h.server.as_str(),
                        "tool": h.tool.name,
                        "score": h.score,
                    })
                })
                .collect();
            println!("{}", json!({ "results": hits, "unknown": results.unknown }));
            return Ok(Outcome::Done);
        }
        if results.hits.is_empty() {
            println!("no tool matches {query:?}");
        }
        for h in &results.hits {
            let about = one_line(h.tool.description.as_deref());
            println!(
                "{:<40} {:<16} {:>7.3}  {about}",
                h.exposed,
                h.server.as_str(),
                h.score
            );
        }
        for name in &results.unknown {
            println!("unknown name: {name}");
        }
        Ok(Outcome::Done)
    }

    fn call(
        &mut self,
        name: &str,
        arguments: Value,
        io: &mut Terminal,
    ) -> Result<Outcome, Failure> {
        // The meta-tools the model gets under progressive discovery work here too.
        match MetaCall::parse(name, &arguments)? {
            Some(MetaCall::SearchTools { query, limit }) => {
                let results = self.catalog.search(&query, limit)?;
                println!("{}", results.to_model_value());
                return Ok(Outcome::Done);
            }
            Some(MetaCall::CallTool { name, arguments }) => {
                return self.call(&name, Value::Object(arguments), io);
            }
            None => {}
        }
        let Some((server, tool)) = self.catalog.route(name) else {
            return Err(Failure(format!(
                "no tool is exposed as {name:?}; `tools` lists the exposed names (`<server>__<tool>`)"
            )));
        };
        let (server, tool) = (server.clone(), tool.clone());
        let trust = self
            .host
            .server(&server)
            .map(|s| s.trust())
            .unwrap_or_default();
        let call = ToolCall {
            server: &server,
            trust,
            tool: &tool,
            exposed_name: name,
            arguments: &arguments,
        };
        let decision = self.policy.decide(&call);
        match decision.verdict {
            Verdict::Deny => {
                eprintln!("denied: {decision}");
                return Ok(Outcome::Failed);
            }
            Verdict::Allow => {}
            Verdict::Ask if self.yes => {
                self.policy.approve_once(&call)?;
            }
            Verdict::Ask if !io.interactive => {
                eprintln!(
                    "mcpwire host: this call needs approval ({decision}); run it on a terminal, or pass --yes to approve it once"
                );
                return Ok(Outcome::Refused);
            }
            Verdict::Ask => {
                let prompt = self.policy.prompt(&call);
                eprintln!("{prompt}");
                let question = if decision.offer_always {
                    "Allow this call? [y]es once, [a]lways, [n]o: "
                } else {
                    "Allow this call? [y]es once, [n]o: "
                };
                match io.ask(question).as_deref() {
                    Some("y" | "Y" | "yes") => {
                        self.policy.approve_once(&call)?;
                    }
                    Some("a" | "A" | "always") if decision.offer_always => {
                        self.policy.approve_always(&call)?;
                        self.state.save_tools(self.policy.approvals())?;
                    }
                    _ => return Ok(Outcome::Refused),
                }
            }
        }
        let result = self.host.call_tool(&server, &tool.name, &arguments)?;
        self.policy.record_result(&server, &result);
        if self.json {
            println!("{}", result.raw());
        } else {
            println!("{}", result.text());
        }
        if result.is_error {
            eprintln!(
                "mcpwire host: {server}'s tool {:?} reported an error",
                tool.name
            );
            return Ok(Outcome::Failed);
        }
        Ok(Outcome::Done)
    }
}

/// A server's elicitation: which server asks and why (the core's [`ElicitationPrompt`]), then
/// the client command's terminal form, which checks each answer against the schema before
/// it is sent (and the core checks it again).
struct Elicitations(Mutex<CliHost>);

impl Hooks for Elicitations {
    fn on_input_request(
        &self,
        server: &ServerId,
        op: OpId,
        request: &InputRequestEvent,
    ) -> InputAnswer {
        if let InputRequest::Elicitation(e) = &request.request {
            eprintln!("{}", ElicitationPrompt::new(server.clone(), e.clone()));
        }
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_input_request(op, request)
    }
}

/// Server text on one line of a listing: the first line, with control characters (which
/// could move the cursor or recolour a prompt) shown as escapes.
fn one_line(text: Option<&str>) -> String {
    let first = text.and_then(|d| d.lines().next()).unwrap_or("");
    first
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn trust_word(t: mcpwire_core::host::Trust) -> &'static str {
    match t {
        mcpwire_core::host::Trust::Trusted => "trusted",
        mcpwire_core::host::Trust::Untrusted => "untrusted",
    }
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn listings_show_server_text_on_one_line_with_control_characters_escaped() {
        assert_eq!(one_line(Some("Echoes.\nSecond line")), "Echoes.");
        assert_eq!(one_line(None), "");
        let shown = one_line(Some("ok\u{1b}[2K\u{1b}[1Afake prompt \u{202e}txt.exe"));
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
            "{shown:?}"
        );
        assert!(
            shown.contains("\\u{1b}") && shown.contains("\\u{202e}"),
            "{shown:?}"
        );
    }
}

//! An MCP client of one server, on a driver: [`blocking::McpClient`](blocking) (plain
//! methods, feature `blocking`, the default) or `smol::McpClient` (feature `smol`: the same
//! methods as `async fn`s; `cargo doc --features smol` documents it).
//!
//! The protocol lives in [`mcpwire_core::mcp::Client`]: it builds every request whole
//! (the URL and the host's extra headers are part of its configuration), cuts a stdio server's
//! stdout into lines, and decides what a refused answer does. The driver loop around it is
//! written once, in `session` (the core, the outcomes, the running operation, the transport's
//! last cause, over a small `Runtime` trait); `blocking` and `smol` are runtimes of it (ureq on
//! worker threads and `poll(2)`, hyper and async-io on smol) with a thin face of methods.
//!
//! This module holds what the faces share: the options a host sets ([`ClientOptions`]), the
//! host's hooks ([`Host`]: elicitation answers, progress, notifications, informational
//! events), the error type ([`Error`]: the core's [`OpError`] plus what only a driver can see,
//! such as a refused connection or a crashed child process), the operation methods (one
//! `operations!` list for both faces), and the checks of a URL and of arguments.

// Without a driver feature only the shared types build; the helpers below serve the drivers.
#![cfg_attr(not(any(feature = "blocking", feature = "smol")), allow(dead_code))]

/// The operations both faces offer, written once over their `run`: plain methods
/// (`operations!()`) or `async fn`s (`operations!(async await)`). Each one parses its result
/// into the core's typed result (the raw JSON stays reachable through it).
#[cfg(any(feature = "blocking", feature = "smol"))]
macro_rules! operations {
    ($($async:ident $await:ident)?) => {
        /// `server/discover` (in the legacy era: what the `initialize` result says, in the same
        /// shape).
        pub $($async)? fn discover(&self) -> Result<DiscoverResult, Error> {
            let value = self.run(Operation::Discover, OpOptions::default())$(.$await)??;
            DiscoverResult::from_value(value).map_err(Error::InvalidDiscover)
        }

        /// One page of `tools/list` (`cursor: None` for the first); see
        /// [`list_all_tools`](Self::list_all_tools) for every page.
        pub $($async)? fn list_tools(&self, cursor: Option<&str>) -> Result<ListToolsResult, Error> {
            self.list(ListKind::Tools, cursor)$(.$await)?
        }

        /// One page of `prompts/list`.
        pub $($async)? fn list_prompts(&self, cursor: Option<&str>) -> Result<ListPromptsResult, Error> {
            self.list(ListKind::Prompts, cursor)$(.$await)?
        }

        /// One page of `resources/list`.
        pub $($async)? fn list_resources(
            &self,
            cursor: Option<&str>,
        ) -> Result<ListResourcesResult, Error> {
            self.list(ListKind::Resources, cursor)$(.$await)?
        }

        /// One page of `resources/templates/list`.
        pub $($async)? fn list_resource_templates(
            &self,
            cursor: Option<&str>,
        ) -> Result<ListResourceTemplatesResult, Error> {
            self.list(ListKind::ResourceTemplates, cursor)$(.$await)?
        }

        /// Every tool: `tools/list` page after page, following `nextCursor`, all within one
        /// [`ClientOptions::request_timeout`] (see [`MAX_PAGES`](super::MAX_PAGES)).
        pub $($async)? fn list_all_tools(&self) -> Result<ListToolsResult, Error> {
            self.list_all(ListKind::Tools)$(.$await)?
        }

        /// Every prompt (see [`list_all_tools`](Self::list_all_tools)).
        pub $($async)? fn list_all_prompts(&self) -> Result<ListPromptsResult, Error> {
            self.list_all(ListKind::Prompts)$(.$await)?
        }

        /// Every resource (see [`list_all_tools`](Self::list_all_tools)).
        pub $($async)? fn list_all_resources(&self) -> Result<ListResourcesResult, Error> {
            self.list_all(ListKind::Resources)$(.$await)?
        }

        /// Every resource template (see [`list_all_tools`](Self::list_all_tools)).
        pub $($async)? fn list_all_resource_templates(
            &self,
        ) -> Result<ListResourceTemplatesResult, Error> {
            self.list_all(ListKind::ResourceTemplates)$(.$await)?
        }

        /// One page of the list `kind`, typed as `T` (the result type of that list).
        pub $($async)? fn list<T: FromResult>(
            &self,
            kind: ListKind,
            cursor: Option<&str>,
        ) -> Result<T, Error> {
            self.list_with(kind, cursor, OpOptions::default())$(.$await)?
        }

        /// Every page of the list `kind` within one request timeout.
        pub $($async)? fn list_all<T: PaginatedResult>(&self, kind: ListKind) -> Result<T, Error> {
            let mut pages = Pages::new(self.call_options(), kind);
            let mut all: T = self.list_with(kind, None, pages.options()?)$(.$await)??;
            while let Some(cursor) = pages.next(all.next_cursor())? {
                let page: T = self.list_with(kind, Some(&cursor), pages.options()?)$(.$await)??;
                all.extend(page);
            }
            Ok(all)
        }

        #[doc(hidden)]
        pub $($async)? fn list_with<T: FromResult>(
            &self,
            kind: ListKind,
            cursor: Option<&str>,
            options: OpOptions,
        ) -> Result<T, Error> {
            let operation = Operation::List {
                kind,
                cursor: cursor.map(str::to_owned),
            };
            let value = self.run(operation, options)$(.$await)??;
            T::from_value(value).map_err(Error::InvalidResult)
        }

        /// `tools/call` with progress notifications requested (they reach [`Host::on_progress`]).
        /// `arguments` is anything that serializes to a JSON object (or `null`). A tool that
        /// failed answers a result with `is_error` set, not an error: see
        /// [`CallToolResult::into_result`] to treat it as one.
        pub $($async)? fn call_tool(
            &self,
            name: &str,
            arguments: impl Serialize,
        ) -> Result<CallToolResult, Error> {
            let options = OpOptions {
                progress: true,
                ..OpOptions::default()
            };
            self.call_tool_with(name, arguments, options)$(.$await)?
        }

        /// `tools/call` with the core's per-operation options (timeout, progress, cache policy).
        pub $($async)? fn call_tool_with(
            &self,
            name: &str,
            arguments: impl Serialize,
            options: OpOptions,
        ) -> Result<CallToolResult, Error> {
            let operation = Operation::CallTool {
                name: name.to_owned(),
                arguments: arguments_object(arguments)?,
            };
            let value = self.run(operation, options)$(.$await)??;
            CallToolResult::from_value(value).map_err(Error::InvalidResult)
        }

        /// `prompts/get`; `arguments` as for [`call_tool`](Self::call_tool).
        pub $($async)? fn get_prompt(
            &self,
            name: &str,
            arguments: impl Serialize,
        ) -> Result<GetPromptResult, Error> {
            let operation = Operation::GetPrompt {
                name: name.to_owned(),
                arguments: arguments_object(arguments)?,
            };
            let value = self.run(operation, OpOptions::default())$(.$await)??;
            GetPromptResult::from_value(value).map_err(Error::InvalidResult)
        }

        /// `resources/read`.
        pub $($async)? fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, Error> {
            let operation = Operation::ReadResource {
                uri: uri.to_owned(),
            };
            let value = self.run(operation, OpOptions::default())$(.$await)??;
            ReadResourceResult::from_value(value).map_err(Error::InvalidResult)
        }

        /// `ping` (the legacy era only; the modern era has none and answers
        /// [`IncompatibleError::Unsupported`](mcpwire_core::mcp::IncompatibleError::Unsupported)).
        pub $($async)? fn ping(&self) -> Result<(), Error> {
            self.run(Operation::Ping, OpOptions::default())$(.$await)?.map(drop)
        }
    };
}

mod authorization;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
#[cfg(all(test, any(feature = "blocking", feature = "smol")))]
mod guard_tests;
#[cfg(any(feature = "blocking", feature = "smol"))]
mod session;
#[cfg(feature = "smol")]
#[cfg_attr(docsrs, doc(cfg(feature = "smol")))]
pub mod smol;
mod token_store;

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use std::time::Instant;

use mcpwire_core::mcp::discover::DiscoverError;
use mcpwire_core::mcp::{ClientConfig, JsonObject, LocalError};
use serde::Serialize;
use serde_json::Value;

// What the API names, re-exported so that one dependency suffices.
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub use authorization::FollowRedirect;
pub use authorization::{Authorization, LoopbackBrowser, UserAgent, UserAgentError};
pub use mcpwire_core::auth::{ClientSetup, Grant, PreRegistered, Secret};
pub use mcpwire_core::jsonrpc::ErrorObject;
pub use mcpwire_core::mcp::discover::ServerCapabilities;
pub use mcpwire_core::mcp::{
    Annotations, AudioContent, BinaryContent, CacheConfig, CachePolicy, CachedEra, CallOptions,
    CallToolResult, ClientCapabilities, ContentBlock, DiscoverResult, ElicitAnswer,
    ElicitationRequest, EmbeddedResource, Era, Event, FromResult, GetPromptResult, ImageContent,
    Implementation, IncompatibleError, InputAnswer, InputRequest, InputRequestEvent, ListKind,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingLevel, OpError, OpId, OpOptions, Operation, PaginatedResult, Prompt, PromptArgument,
    PromptMessage, ProtocolChoice, ReadResourceResult, Resource, ResourceBody, ResourceContents,
    ResourceLink, ResourceTemplate, ResultError, ResultSource, RetryReason, Role,
    SubscriptionChange, SubscriptionEndReason, SubscriptionEvent, SubscriptionFilter,
    SubscriptionHandle, TextContent, Tool, ToolAnnotations, ToolError, Transport, TransportError,
    UsageError,
};
pub use token_store::{FileStore, MemoryStore, StoreError, StoreLock, TokenStore};

/// The most pages a `list_all_*` method reads before it gives up on a server whose cursors do
/// not end.
pub const MAX_PAGES: usize = 1000;

/// How many stderr lines of a stdio server are kept for error messages.
pub(crate) const STDERR_TAIL_LINES: usize = 20;
/// The longest stderr line kept (the rest of the line is dropped).
pub(crate) const STDERR_LINE_BYTES: usize = 512;

/// How a client is set up. [`ClientOptions::default`] is a sensible start.
///
/// `Debug` shows header names, never their values (an `Authorization` header holds a token).
#[derive(Clone)]
pub struct ClientOptions {
    /// `clientInfo`.
    pub client_info: Implementation,
    /// Extra HTTP headers sent with every request (e.g. `Authorization`); ignored on stdio.
    /// A header the core sets itself (the `Mcp-*` headers, `Content-Type`, `Accept`) wins.
    pub headers: Vec<(String, String)>,
    /// The era policy (detect, or pin modern or legacy).
    pub protocol: ProtocolChoice,
    /// The modern protocol versions the client speaks (empty: the core's default, the latest
    /// version it knows).
    pub versions: Vec<String>,
    /// How long one request may wait for its answer.
    pub request_timeout: Duration,
    /// How long opening an HTTP connection may take.
    pub connect_timeout: Duration,
    /// stdio: how long the `server/discover` probe waits before the server counts as legacy.
    pub probe_timeout: Duration,
    /// The capabilities declared on every request (e.g. elicitation form/url mode).
    pub capabilities: ClientCapabilities,
    /// What the host supports beyond what it declares: a server's `-32021` that requires one
    /// of these is answered by declaring it and sending the request again (`None`: only the
    /// declared ones; a `-32021` for anything else fails the operation).
    pub host_capabilities: Option<ClientCapabilities>,
    /// The result cache.
    pub cache: CacheConfig,
    /// HTTP: how many exchanges run at once (long-lived subscription streams hold one too;
    /// more wait for one to end), and how many idle connections are kept alive for reuse
    /// (default 16). Calls in flight over HTTP run at most this many at a time. The blocking
    /// driver runs one worker thread per exchange, the smol driver one task.
    pub max_exchanges: usize,
    /// How many operations run at once on the connection (more wait for one to end). The
    /// default, 64, is far more than a host usually needs; subscriptions do not count.
    pub max_in_flight: usize,
    /// The server's era and version, when known from an earlier connection
    /// ([`era`](blocking::McpClient::era) of that client): no detection is made again.
    pub known_era: Option<CachedEra>,
    /// HTTP: list the tools before calling one whose `x-mcp-header` annotations are not known
    /// yet (default `true`; see the core's `ClientConfig::list_tools_before_call`).
    pub list_tools_before_call: bool,
    /// HTTP, legacy era: keep the session's GET stream open after `initialize`, to receive
    /// the server's requests (elicitations) and notifications sent outside any call's stream
    /// (see [`ClientConfig::legacy_listen`]). Default `true`.
    pub legacy_listen: bool,
    /// HTTP: OAuth authorization when the server asks for it (a `401`, a `403
    /// insufficient_scope`): see [`Authorization`]. `None` (the default): such an answer fails
    /// the operation.
    pub authorization: Option<Authorization>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            client_info: Implementation::new("mcpwire", env!("CARGO_PKG_VERSION")),
            headers: Vec::new(),
            protocol: ProtocolChoice::Auto,
            versions: Vec::new(),
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            probe_timeout: mcpwire_core::mcp::DEFAULT_PROBE_TIMEOUT,
            capabilities: ClientCapabilities::none(),
            host_capabilities: None,
            cache: CacheConfig::default(),
            max_exchanges: 16,
            max_in_flight: 64,
            known_era: None,
            list_tools_before_call: true,
            legacy_listen: true,
            authorization: None,
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ClientOptions")
            .field("client_info", &self.client_info)
            .field("headers", &names)
            .field("protocol", &self.protocol)
            .field("versions", &self.versions)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("probe_timeout", &self.probe_timeout)
            .field("capabilities", &self.capabilities)
            .field("host_capabilities", &self.host_capabilities)
            .field("max_exchanges", &self.max_exchanges)
            .field("max_in_flight", &self.max_in_flight)
            .field("known_era", &self.known_era)
            .field("list_tools_before_call", &self.list_tools_before_call)
            .field("legacy_listen", &self.legacy_listen)
            .field("authorization", &self.authorization)
            .finish_non_exhaustive()
    }
}

impl ClientOptions {
    /// Sends `Authorization: Bearer TOKEN` with every HTTP request.
    pub fn with_bearer_token(self, token: &str) -> Self {
        self.with_header("Authorization", &format!("Bearer {token}"))
    }

    /// Sends `name: value` with every HTTP request.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Pins or frees the era.
    pub fn with_protocol(mut self, protocol: ProtocolChoice) -> Self {
        self.protocol = protocol;
        self
    }

    /// Speaks these modern protocol versions (any order; the core tries the latest first and
    /// moves to one the server supports on `-32022`).
    pub fn with_versions(mut self, versions: &[&str]) -> Self {
        self.versions = versions.iter().map(|v| (*v).to_owned()).collect();
        self
    }

    /// Authorizes with OAuth when the server asks (see [`ClientOptions::authorization`]).
    pub fn with_authorization(mut self, authorization: Authorization) -> Self {
        self.authorization = Some(authorization);
        self
    }

    /// Runs at most `n` operations at once (see [`ClientOptions::max_in_flight`]).
    pub fn with_max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// Starts in this era (see [`ClientOptions::known_era`]).
    pub fn with_known_era(mut self, era: CachedEra) -> Self {
        self.known_era = Some(era);
        self
    }

    /// Sets the per-request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Declares these capabilities (e.g. `ClientCapabilities::none().with_elicitation_form()`).
    pub fn with_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Supports `capabilities` without declaring them up front: they are declared (and the
    /// request sent again) only when a server's `-32021` requires them. The declared
    /// capabilities are always supported too.
    pub fn with_host_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.host_capabilities = Some(capabilities);
        self
    }

    /// Whether a call of a tool whose `x-mcp-header` annotations are not known waits for a
    /// `tools/list` first (HTTP; default `true`). Off, the call goes out at once and a
    /// server's `-32020` makes the client list the tools and retry.
    pub fn with_list_tools_before_call(mut self, on: bool) -> Self {
        self.list_tools_before_call = on;
        self
    }

    /// The core's configuration for the HTTP server at `url`, with authorization when it is
    /// configured (and what the driver does for it).
    pub(crate) fn http_config(
        &self,
        url: &str,
    ) -> Result<(ClientConfig, Option<std::sync::Arc<session::DriverAuth>>), Error> {
        let mut config = self.core_config(Transport::Http, url, crate::random_seed());
        let Some(a) = &self.authorization else {
            return Ok((config, None));
        };
        let (auth, redirect_uri) = a.core_config(url).map_err(|source| Error::Setup {
            what: "the authorization's loopback port and random seed",
            source,
        })?;
        config.authorization = Some(auth);
        let driver = session::DriverAuth {
            user_agent: std::sync::Arc::clone(&a.user_agent),
            store: std::sync::Arc::clone(&a.store),
            redirect_uri,
            server_url: url.to_owned(),
        };
        Ok((config, Some(std::sync::Arc::new(driver))))
    }

    /// The core's configuration for `transport` (and the server's `url`, on HTTP); `jitter_seed`
    /// comes from the driver. An extra header whose name or value HTTP does not allow is not
    /// sent.
    pub(crate) fn core_config(
        &self,
        transport: Transport,
        url: &str,
        jitter_seed: u64,
    ) -> ClientConfig {
        let mut config = ClientConfig::new(transport, self.client_info.clone())
            .with_capabilities(self.capabilities.clone())
            .with_url(url);
        for (name, value) in &self.headers {
            let _ = config.headers.append(name, value);
        }
        if let Some(host) = &self.host_capabilities {
            config.host_capabilities = host.clone();
        }
        config.protocol = self.protocol.clone();
        if !self.versions.is_empty() {
            config.versions = self.versions.clone();
        }
        config.call_options.timeout = self.request_timeout;
        config.probe_timeout = self.probe_timeout;
        config.cache = self.cache;
        config.jitter_seed = jitter_seed;
        config.list_tools_before_call = self.list_tools_before_call;
        config.legacy_listen = self.legacy_listen;
        config.known_era = self.known_era.clone();
        config
    }
}

/// The host's side of the conversation. Every method has a default: input requests are
/// declined, everything else is ignored.
pub trait Host {
    /// The server needs input to continue `op` (MRTR `input_required`, or a legacy
    /// `elicitation/create`). The answer is checked against the request; a refused answer
    /// ends the operation with [`Error::InputRefused`].
    fn on_input_request(&mut self, op: OpId, request: &InputRequestEvent) -> InputAnswer {
        let _ = (op, request);
        InputAnswer::Elicitation(ElicitAnswer::Decline)
    }

    /// A progress notification for `op`.
    fn on_progress(&mut self, op: OpId, progress: f64, total: Option<f64>, message: Option<&str>) {
        let _ = (op, progress, total, message);
    }

    /// A notification from the server (`op` is the operation whose stream carried it).
    fn on_notification(&mut self, op: Option<OpId>, method: &str, message: &str) {
        let _ = (op, method, message);
    }

    /// Every event of the core, before the driver acts on it: the era detected, a tool
    /// excluded, a retry, a fallback. Meant for logs (its `Debug` shows no private text).
    fn on_event(&mut self, event: &Event) {
        let _ = event;
    }
}

/// A host that declines every input request and ignores everything else.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHost;

impl Host for NoHost {}

/// Why an operation of the driver failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operation failed in the core (the server's error, a timeout, no common version, ...).
    #[error("{0}")]
    Op(Box<OpError>),
    /// The HTTP exchange failed and could not be retried; `cause` is what the transport said.
    #[error("{url}: {cause} ({error})")]
    Transport {
        /// The server URL, without its user info, query and fragment (where secrets ride).
        url: String,
        /// The transport's error (connection refused, reset, ...).
        cause: String,
        /// The core's verdict.
        error: Box<OpError>,
    },
    /// The operation was cancelled.
    #[error("the operation was cancelled")]
    Cancelled,
    /// The client was closed (by [`close`](blocking::McpClient::close) on any of its handles).
    #[error("the client is closed")]
    Closed,
    /// Something the client needs from the system could not be had.
    #[error("cannot set up {what}: {source}")]
    Setup {
        /// What.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A thread of the client could not be started.
    #[error("cannot start the client's thread: {source}")]
    Thread {
        /// The OS error.
        source: std::io::Error,
    },
    /// The server URL cannot be used.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: &'static str,
    },
    /// Tool or prompt arguments must be a JSON object (or null).
    #[error("arguments must be a JSON object, not {0}")]
    InvalidArguments(&'static str),
    /// The stdio server could not be started.
    #[error("cannot start the stdio server {program:?}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The stdio server exited (or closed its stdout).
    #[error("{}", exited_message(program, status, stderr_tail))]
    ServerExited {
        /// The program.
        program: String,
        /// How it ended (`exit status: 3`, `signal: 9`, ...).
        status: String,
        /// The last lines it wrote to stderr.
        stderr_tail: Vec<String>,
    },
    /// The host's answer to an input request was refused.
    #[error("the answer to input request {key:?} was refused: {error}")]
    InputRefused {
        /// The server's key.
        key: String,
        /// Why.
        error: Box<UsageError>,
    },
    /// The core refused a call (e.g. a subscription before the era is known).
    #[error("{0}")]
    Usage(Box<UsageError>),
    /// The result is not JSON (the core hands out the JSON text it received).
    #[error("the result is not valid JSON: {0}")]
    BadResult(String),
    /// The server's result does not have the shape of its method's result.
    #[error("{0}")]
    InvalidResult(ResultError),
    /// The server's `server/discover` result cannot be read.
    #[error("{0}")]
    InvalidDiscover(DiscoverError),
    /// A `list_all_*` method stopped following the server's cursors.
    #[error("{method}: stopped after {pages} pages: {reason}")]
    Pages {
        /// The list method.
        method: &'static str,
        /// The pages read.
        pages: usize,
        /// Why.
        reason: &'static str,
    },
    /// The tool reported an error (`isError: true`), as [`CallToolResult::into_result`] makes
    /// it: the result is kept.
    #[error("{0}")]
    Tool(ToolError),
}

impl From<ToolError> for Error {
    fn from(e: ToolError) -> Self {
        Error::Tool(e)
    }
}

impl Error {
    /// The core's error, when the core ended the operation (a server's error object, a
    /// timeout, a transport failure, an incompatibility).
    pub fn op_error(&self) -> Option<&OpError> {
        match self {
            Error::Op(e) | Error::Transport { error: e, .. } => Some(e),
            _ => None,
        }
    }

    /// The server's JSON-RPC error object, when the server answered with one (its `code`,
    /// `message` and `data` as sent).
    pub fn server_error(&self) -> Option<&ErrorObject> {
        match self.op_error()? {
            OpError::Server(e) => Some(e),
            _ => None,
        }
    }

    /// The HTTP status of the answer that ended the operation, when it was a status without a
    /// JSON-RPC body (`503`, `401`, a redirect, ...).
    pub fn http_status(&self) -> Option<u16> {
        match self.op_error()? {
            OpError::Transport(TransportError::Failed(reason)) => reason.http_status(),
            _ => None,
        }
    }

    /// Who is to blame, in a word a person or a log can use: `server` (its answer or its
    /// error), `transport` (no answer, or time ran out), `caller` (this program's input or use
    /// of the client) or `local` (this machine: a thread or process could not start).
    pub fn blame(&self) -> Blame {
        match self {
            Error::Op(e) | Error::Transport { error: e, .. } => match **e {
                OpError::Server(_) | OpError::Protocol(_) | OpError::Incompatible(_) => {
                    Blame::Server
                }
                OpError::Transport(_) => Blame::Transport,
                OpError::Local(LocalError::Request(_) | LocalError::Headers(_)) => Blame::Caller,
                OpError::Local(_) => Blame::Local,
                _ => Blame::Local,
            },
            Error::ServerExited { .. }
            | Error::BadResult(_)
            | Error::InvalidResult(_)
            | Error::InvalidDiscover(_)
            | Error::Pages { .. }
            | Error::Tool(_) => Blame::Server,
            Error::Cancelled
            | Error::Closed
            | Error::InvalidUrl { .. }
            | Error::InvalidArguments(_)
            | Error::InputRefused { .. }
            | Error::Usage(_) => Blame::Caller,
            Error::Spawn { .. } | Error::Thread { .. } | Error::Setup { .. } => Blame::Local,
        }
    }

    /// Whether the same operation may succeed if tried again later: time ran out, the
    /// transport failed (a refused or broken connection, or a `408`, `429`, `500`, `502`, `503`
    /// or `504` answer), or the server answered `-32603` (internal error). A retry of a call
    /// with side effects is the caller's decision: the tool may have run.
    pub fn is_retryable(&self) -> bool {
        if let Some(e) = self.server_error() {
            return e.code == -32603;
        }
        match self.op_error() {
            Some(OpError::Transport(TransportError::TimedOut { .. })) => true,
            Some(OpError::Transport(TransportError::Failed(reason))) => {
                match reason.http_status() {
                    None => !matches!(
                        reason,
                        mcpwire_core::mcp::request::FailReason::Protocol(_)
                            | mcpwire_core::mcp::request::FailReason::IdInUse
                    ),
                    Some(status) => matches!(status, 408 | 429 | 500 | 502 | 503 | 504),
                }
            }
            _ => false,
        }
    }
}

/// Who is to blame for an [`Error`] (see [`Error::blame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Blame {
    /// The server: its error answer, a broken protocol, an incompatibility, a result of the
    /// wrong shape, a crashed stdio server.
    Server,
    /// The transport: no answer (refused, reset, a gateway status) or time ran out.
    Transport,
    /// The caller: bad input, a cancelled or closed client, an answer the server refused.
    Caller,
    /// This machine: a thread or child process could not start.
    Local,
}

fn exited_message(program: &str, status: &str, tail: &[String]) -> String {
    let mut m = format!("the stdio server {program:?} exited ({status})");
    if tail.is_empty() {
        m.push_str(" and wrote nothing to stderr");
    } else {
        m.push_str("; the end of its stderr:");
        for line in tail {
            m.push_str("\n  ");
            m.push_str(line);
        }
    }
    m
}

/// The last lines a child wrote to stderr, bounded in count and length.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: VecDeque<String>,
}

impl StderrTail {
    /// Keeps `line` (cut to [`STDERR_LINE_BYTES`]), dropping the oldest beyond
    /// [`STDERR_TAIL_LINES`].
    pub(crate) fn push(&mut self, line: &str) {
        let line = line.trim_end();
        if line.is_empty() {
            return;
        }
        let mut end = line.len().min(STDERR_LINE_BYTES);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        if self.lines.len() == STDERR_TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines
            .push_back(line.get(..end).unwrap_or_default().to_owned());
    }

    /// The lines kept, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }
}

/// How a stdio server is started: the program (run without a shell), its arguments, the
/// variables added to the environment it inherits, and its working directory (by default the
/// caller's).
///
/// `Debug` shows the names of the variables, never their values (they often hold API keys).
///
/// ```
/// use mcpwire::mcp::StdioCommand;
/// let command = StdioCommand::new("npx")
///     .args(["-y", "@modelcontextprotocol/server-everything"])
///     .env("API_KEY", "sk-...")
///     .current_dir("/tmp");
/// assert!(!format!("{command:?}").contains("sk-"));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StdioCommand {
    /// The program: a path, or a name looked up in `PATH`.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set in its environment, on top of the inherited ones, in this order.
    pub env: Vec<(String, String)>,
    /// Its working directory (`None`: the caller's).
    pub cwd: Option<std::path::PathBuf>,
}

impl StdioCommand {
    /// `program` with no arguments, the inherited environment and the caller's directory.
    pub fn new(program: impl Into<String>) -> Self {
        StdioCommand {
            program: program.into(),
            ..StdioCommand::default()
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets `name` to `value` in its environment.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Starts it in `dir`.
    pub fn current_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
}

impl fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.env.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &names)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// The command that starts a stdio server without a shell, its three pipes piped, and the
/// error of a failed start (it names the program and, when one was set, the directory).
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) fn stdio_command(
    spec: &StdioCommand,
) -> (std::process::Command, impl Fn(std::io::Error) -> Error) {
    let mut command = std::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .envs(spec.env.iter().map(|(n, v)| (n, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(dir) = &spec.cwd {
        command.current_dir(dir);
    }
    let program = match &spec.cwd {
        None => spec.program.clone(),
        Some(dir) => format!("{} (in {})", spec.program, dir.display()),
    };
    let spawn_err = move |source| Error::Spawn {
        program: program.clone(),
        source,
    };
    (command, spawn_err)
}

/// Checks a server URL before any connection: `http://` or `https://`, no whitespace.
pub(crate) fn check_http_url(url: &str) -> Result<(), Error> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(Error::InvalidUrl {
            url: url.to_owned(),
            reason: "only http:// and https:// URLs are supported",
        });
    }
    if url.contains(char::is_whitespace) {
        return Err(Error::InvalidUrl {
            url: url.to_owned(),
            reason: "a URL cannot contain whitespace",
        });
    }
    Ok(())
}

/// Following a list's cursors: the pages read, the cursors seen, the one deadline.
#[cfg(any(feature = "blocking", feature = "smol"))]
pub(crate) struct Pages {
    kind: ListKind,
    call: CallOptions,
    until: Option<Instant>,
    read: usize,
    seen: std::collections::BTreeSet<String>,
}

#[cfg(any(feature = "blocking", feature = "smol"))]
impl Pages {
    /// `call` is the client's default call options: its timeout bounds all the pages.
    pub(crate) fn new(call: CallOptions, kind: ListKind) -> Self {
        let until = Instant::now().checked_add(call.timeout);
        Pages {
            kind,
            call,
            until,
            read: 0,
            seen: std::collections::BTreeSet::new(),
        }
    }

    /// The options of the next page: what is left of the deadline.
    pub(crate) fn options(&mut self) -> Result<OpOptions, Error> {
        self.read += 1;
        let mut call = self.call.clone();
        if let Some(until) = self.until {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.stop("they did not all arrive within the request timeout"));
            }
            call.timeout = left;
            call.max_total = call.max_total.min(left);
        }
        Ok(OpOptions {
            call: Some(call),
            ..OpOptions::default()
        })
    }

    /// The cursor of the next page, if any: an error when the server's cursors do not end.
    pub(crate) fn next(&mut self, cursor: Option<&str>) -> Result<Option<String>, Error> {
        let Some(cursor) = cursor else {
            return Ok(None);
        };
        if self.read >= MAX_PAGES {
            return Err(self.stop("the server sent more pages than a client reads"));
        }
        if !self.seen.insert(cursor.to_owned()) {
            return Err(self.stop("the server sent a cursor it had sent before"));
        }
        Ok(Some(cursor.to_owned()))
    }

    fn stop(&self, reason: &'static str) -> Error {
        Error::Pages {
            method: self.kind.method(),
            pages: self.read,
            reason,
        }
    }
}

/// An operation's outcome (the core's JSON text) as JSON.
pub(crate) fn parse_value(outcome: Result<(String, bool), Error>) -> Result<Value, Error> {
    let (text, _is_error) = outcome?;
    serde_json::from_str(&text).map_err(|e| Error::BadResult(e.to_string()))
}

/// Tool or prompt arguments as a JSON object (`null` is an empty one).
pub(crate) fn arguments_object(arguments: impl Serialize) -> Result<JsonObject, Error> {
    let value = serde_json::to_value(arguments)
        .map_err(|_| Error::InvalidArguments("a value that does not serialize to JSON"))?;
    match value {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(JsonObject::new()),
        Value::Bool(_) => Err(Error::InvalidArguments("a boolean")),
        Value::Number(_) => Err(Error::InvalidArguments("a number")),
        Value::String(_) => Err(Error::InvalidArguments("a string")),
        Value::Array(_) => Err(Error::InvalidArguments("an array")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_an_object_or_null() {
        assert!(arguments_object(Value::Null).unwrap().is_empty());
        assert!(matches!(
            arguments_object(serde_json::json!([1])),
            Err(Error::InvalidArguments("an array"))
        ));
    }

    #[test]
    fn options_debug_never_shows_header_values() {
        let o = ClientOptions::default().with_bearer_token("s3cr3t-token-value");
        let text = format!("{o:?}");
        assert!(text.contains("Authorization"));
        assert!(!text.contains("s3cr3t"));
    }

    #[test]
    fn stderr_tail_keeps_the_last_lines_and_cuts_long_ones() {
        let mut t = StderrTail::default();
        for i in 0..(STDERR_TAIL_LINES + 5) {
            t.push(&format!("line {i}"));
        }
        t.push(&"é".repeat(STDERR_LINE_BYTES));
        let lines = t.lines();
        assert_eq!(lines.len(), STDERR_TAIL_LINES);
        assert_eq!(lines[0], "line 6");
        assert!(lines[STDERR_TAIL_LINES - 1].len() <= STDERR_LINE_BYTES);
    }

    #[test]
    fn exited_error_names_the_status_and_the_stderr_tail() {
        let e = Error::ServerExited {
            program: "srv".into(),
            status: "exit status: 3".into(),
            stderr_tail: vec!["boom".into()],
        };
        let m = e.to_string();
        assert!(m.contains("exit status: 3") && m.contains("boom"), "{m}");
    }
}

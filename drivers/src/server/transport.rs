//! What both drivers' transports hand the engine glue and take back from it: one HTTP request
//! as it arrived, and the pieces of its answer in order. No protocol here: the transports parse
//! HTTP/1.1 framing and write bytes; the engine decides every status, header and body.

use std::time::Duration;

use mcpwire_core::http::Headers;

/// One HTTP request as the listener read it: the head as sent, the body de-chunked and bounded.
#[derive(Debug)]
pub(crate) struct Incoming {
    /// The method token, as sent (`GET`, `POST`, `DELETE`, `PUT`, ...).
    pub method: String,
    /// The request target, query included (`/mcp?x=1`).
    pub target: String,
    /// The headers, in order.
    pub headers: Headers,
    /// The body (cut one byte past the core's bound when longer).
    pub body: Vec<u8>,
}

/// One piece of an exchange's answer, in the order the engine produced them.
#[derive(Debug)]
pub(crate) enum Out {
    /// A whole response; the exchange is over.
    Response {
        status: u16,
        headers: Headers,
        body: Vec<u8>,
    },
    /// The head of a streamed (`text/event-stream`) response.
    StreamStart { status: u16, headers: Headers },
    /// One encoded SSE event of a started stream.
    Event(Vec<u8>),
    /// The stream's end; the exchange is over.
    End,
}

/// How many pieces of one exchange may wait for its connection to write them. A peer that
/// reads slower than the server produces falls behind by at most this much; past it the
/// exchange is treated as gone (the glue closes it), so memory stays bounded.
pub(crate) const EXCHANGE_BACKLOG: usize = 1024;

/// Where the glue delivers an exchange's pieces: a bounded channel into the connection that
/// carries it. `push` is false once the connection is gone (its receiver dropped) or has fallen
/// [`EXCHANGE_BACKLOG`] pieces behind: either way the exchange is over for the glue.
pub(crate) trait Sink: Send + 'static {
    fn push(&self, out: Out) -> bool;
}

/// What a transport asks of the glue: a request arrived (here is where its answer goes), or the
/// peer went away before the answer ended.
pub(crate) trait Exchanges<S: Sink>: Send + Sync + 'static {
    /// The glue's handle of one exchange.
    type Id: Copy + Send + 'static;
    /// A request arrived; its answer is to be pushed into `sink`.
    fn open(&self, req: Incoming, sink: S) -> Self::Id;
    /// The connection carrying `id` closed (or broke) before the exchange ended.
    fn closed(&self, id: Self::Id);
}

/// The listener's bounds on what a peer can make it hold, shared by both drivers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HttpLimits {
    /// The largest request head (request line and headers), in bytes (`431` past it).
    pub max_head: usize,
    /// The largest request body, in bytes (`413` past it).
    pub max_body: usize,
    /// Connections served at once; more are answered `503` and closed.
    pub max_connections: usize,
    /// How long an idle keep-alive connection is kept (and a request head may take).
    pub idle_timeout: Duration,
    /// How long one write may block (a peer that stops reading is dropped; blocking driver,
    /// the smol one bounds the backlog instead).
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub write_timeout: Duration,
}

/// The framing headers the transport writes itself; a response's own are dropped.
pub(crate) fn is_framing_header(name: &str) -> bool {
    name.eq_ignore_ascii_case("content-length")
        || name.eq_ignore_ascii_case("transfer-encoding")
        || name.eq_ignore_ascii_case("connection")
        || name.eq_ignore_ascii_case("keep-alive")
}

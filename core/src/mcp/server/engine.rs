//! The server's state machine (skeleton).

use crate::mcp::cache::ListKind;
use crate::mcp::meta::LoggingLevel;
use crate::mcp::results::Tool;
use crate::time::Instant;

use super::*;

pub(super) struct Engine {
    pub(super) config: ServerConfig,
}

impl Engine {
    pub(super) fn new(config: ServerConfig) -> Self {
        Engine { config }
    }
    pub(super) fn in_flight(&self) -> usize {
        0
    }
    pub(super) fn open_sessions(&self) -> usize {
        0
    }
    pub(super) fn open_exchanges(&self) -> usize {
        0
    }
    pub(super) fn stdio_bytes(&mut self, _now: Instant, _bytes: &[u8]) {}
    pub(super) fn stdio_eof(&mut self, _now: Instant) {}
    pub(super) fn http_request(&mut self, _now: Instant, _request: HttpRequest) -> ExchangeId {
        ExchangeId(0)
    }
    pub(super) fn exchange_closed(
        &mut self,
        _now: Instant,
        x: ExchangeId,
    ) -> Result<(), UsageError> {
        Err(UsageError::UnknownExchange(x))
    }
    pub(super) fn poll_event(&mut self) -> Option<ServerEvent> {
        None
    }
    pub(super) fn respond(
        &mut self,
        _now: Instant,
        r: RequestId,
        _reply: Reply,
        _notices: Vec<Notice>,
    ) -> Result<(), UsageError> {
        Err(UsageError::UnknownRequest(r))
    }
    pub(super) fn progress(
        &mut self,
        _now: Instant,
        r: RequestId,
        _p: f64,
        _t: Option<f64>,
        _m: Option<&str>,
    ) -> Result<(), UsageError> {
        Err(UsageError::UnknownRequest(r))
    }
    pub(super) fn log(
        &mut self,
        _now: Instant,
        _r: Option<RequestId>,
        _l: LoggingLevel,
        _logger: Option<&str>,
        _d: serde_json::Value,
    ) -> Result<(), UsageError> {
        Ok(())
    }
    pub(super) fn close_stream(&mut self, _now: Instant, r: RequestId) -> Result<(), UsageError> {
        Err(UsageError::UnknownRequest(r))
    }
    pub(super) fn list_changed(&mut self, _now: Instant, _kind: ListKind) {}
    pub(super) fn resource_updated(&mut self, _now: Instant, _uri: &str) {}
    pub(super) fn check_tool_headers(
        &mut self,
        _now: Instant,
        _r: RequestId,
        _tool: Option<&Tool>,
    ) -> Result<bool, UsageError> {
        Ok(true)
    }
    pub(super) fn poll_output(&mut self) -> Option<Output> {
        None
    }
    pub(super) fn poll_timeout(&self) -> Option<Timeout> {
        None
    }
    pub(super) fn handle_timeout(&mut self, _now: Instant) {}
    pub(super) fn shutdown(&mut self, _now: Instant) {}
}

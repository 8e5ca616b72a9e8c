//! The tool catalog: the `x-mcp-header` annotations of the latest `tools/list`
//! (`basic/transports/streamable-http.mdx`, "Custom Headers from Tool Parameters"), the tools
//! excluded from it for invalid annotations, the `tools/list` fetched before a call of a tool
//! not known yet, and the refresh after `-32020`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::operation::Internal;
use super::{Client, EraState, Event, OpId, Operation, RetryReason};
use crate::mcp::cache::ListKind;
use crate::mcp::headers::{self, ToolHeaders};
use crate::mcp::request::Transport;
use crate::time::Instant;

/// How many pages a `-32020` refresh of `tools/list` follows looking for the tool.
pub(super) const MAX_REFRESH_PAGES: u32 = 16;

/// What the latest `tools/list` said about the tools.
#[derive(Default)]
pub(super) struct ToolCatalog {
    /// Tool annotations from the latest `tools/list`.
    pub(super) headers: BTreeMap<String, ToolHeaders>,
    /// Tools excluded from the latest `tools/list`, with the reason.
    pub(super) excluded: BTreeMap<String, String>,
    /// A `tools/list` was seen (or tried before a call) since the era was learned or the
    /// tool list last changed: a call of a tool not in it is not preceded by another one.
    pub(super) listed: bool,
    /// Calls whose `tools/list` prefetch failed: they go out anyway at the next pump.
    pub(super) released: Vec<OpId>,
}

impl ToolCatalog {
    /// Whether the latest listing named `tool` (listed or excluded).
    fn knows(&self, tool: &str) -> bool {
        self.headers.contains_key(tool) || self.excluded.contains_key(tool)
    }

    /// Forgets everything (another era or version: what was learned does not carry over).
    pub(super) fn clear(&mut self) {
        self.headers.clear();
        self.excluded.clear();
        self.listed = false;
    }

    /// Takes in a `tools/list` page: returns the result without the excluded tools, and the
    /// excluded tools with the reason.
    fn apply_page(&mut self, result: &str, first_page: bool) -> (String, Vec<(String, String)>) {
        let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(result) else {
            return (result.to_owned(), Vec::new());
        };
        let Some(Value::Array(tools)) = obj.remove("tools") else {
            return (result.to_owned(), Vec::new());
        };
        if first_page {
            self.headers.clear();
            self.excluded.clear();
            self.listed = true;
        }
        let (valid, rejected) = headers::partition_tools(tools);
        let mut excluded = Vec::with_capacity(rejected.len());
        for e in rejected {
            let reason = e.to_string();
            self.headers.remove(&e.tool);
            self.excluded.insert(e.tool.clone(), reason.clone());
            excluded.push((e.tool, reason));
        }
        let mut kept = Vec::with_capacity(valid.len());
        for (tool, headers) in valid {
            self.excluded.remove(headers.tool_name());
            self.headers.insert(headers.tool_name().to_owned(), headers);
            kept.push(tool);
        }
        obj.insert("tools".to_owned(), Value::Array(kept));
        (Value::Object(obj).to_string(), excluded)
    }
}

impl Client {
    /// A call of a tool whose `x-mcp-header` annotations are not known, on Streamable HTTP
    /// outside the legacy era, waits for a `tools/list` (its pages followed until the tool is
    /// found): the call then carries its `Mcp-Param-*` headers on the first try, and a tool
    /// excluded for invalid annotations is refused without being called
    /// (`basic/transports/streamable-http.mdx`, "Custom Headers from Tool Parameters").
    /// Once a listing was seen, an unlisted tool is called without one.
    pub(super) fn list_tools_first(&mut self, now: Instant, op_id: OpId) -> bool {
        if !self.config.list_tools_before_call
            || self.config.transport != Transport::Http
            || self.tools.listed
            || matches!(self.era, EraState::Legacy)
        {
            return false;
        }
        let Some(op) = self.ops.get(&op_id) else {
            return false;
        };
        let Operation::CallTool { name, .. } = &op.operation else {
            return false;
        };
        if op.internal.is_some() || op.retry_params.is_some() || self.tools.knows(name) {
            return false;
        }
        self.list_tools_for(now, op_id, true);
        true
    }

    /// Fetches the first `tools/list` page for the call `waiter`: before it is sent
    /// (`prefetch`), or after its `-32020`.
    pub(super) fn list_tools_for(&mut self, now: Instant, waiter: OpId, prefetch: bool) {
        let operation = Operation::List {
            kind: ListKind::Tools,
            cursor: None,
        };
        let internal = if prefetch {
            Internal::ToolsPrefetch { waiter, pages: 1 }
        } else {
            Internal::ToolsRefresh { waiter, pages: 1 }
        };
        self.start_internal(now, operation, internal);
    }

    /// Updates the tool catalog from a `tools/list` page and returns the result without the
    /// excluded tools (each reported as [`Event::ToolExcluded`]).
    pub(super) fn apply_tools_page(&mut self, result: &str, first_page: bool) -> String {
        let (result, excluded) = self.tools.apply_page(result, first_page);
        for (tool, reason) in excluded {
            self.event(Event::ToolExcluded { tool, reason });
        }
        result
    }

    /// A `-32020` refresh page (or a page fetched before the call, `prefetch`) arrived:
    /// follow the next page while the tool is missing, then send the waiting call (again).
    pub(super) fn after_refresh(
        &mut self,
        now: Instant,
        waiter: OpId,
        pages: u32,
        result: &str,
        prefetch: bool,
    ) {
        let tool = match self.ops.get(&waiter).map(|o| &o.operation) {
            Some(Operation::CallTool { name, .. }) => name.clone(),
            _ => return,
        };
        let next_cursor = serde_json::from_str::<Value>(result).ok().and_then(|v| {
            v.get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        if !self.tools.knows(&tool) {
            if let Some(cursor) = next_cursor.filter(|_| pages < MAX_REFRESH_PAGES) {
                let operation = Operation::List {
                    kind: ListKind::Tools,
                    cursor: Some(cursor),
                };
                let pages = pages + 1;
                let internal = if prefetch {
                    Internal::ToolsPrefetch { waiter, pages }
                } else {
                    Internal::ToolsRefresh { waiter, pages }
                };
                self.start_internal(now, operation, internal);
                return;
            }
        }
        if prefetch {
            self.dispatch(now, waiter);
        } else {
            self.restart(now, waiter, RetryReason::HeadersRefreshed);
        }
    }
}

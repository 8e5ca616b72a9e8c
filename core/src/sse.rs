//! A push parser for `text/event-stream` (Server-Sent Events), free of any I/O.
//!
//! The rules are those of WHATWG HTML, "Parsing an event stream" and "Interpreting an event
//! stream"; MCP's Streamable HTTP transport carries JSON-RPC messages in such streams.
//!
//! # Use
//!
//! Feed the body as it arrives with [`SseParser::push`], split anywhere (inside a CRLF pair, a
//! UTF-8 sequence or the byte order mark), then call [`SseParser::next_event`] until it returns
//! `Ok(None)`. At the end of the body call [`SseParser::finish`] the same way.
//!
//! ```
//! use mcpwire_core::sse::SseParser;
//!
//! let mut parser = SseParser::new();
//! parser.push(b"id: 1\r\ndata: {\"jsonrpc\":");
//! assert_eq!(parser.next_event(), Ok(None));
//! parser.push(b"\"2.0\"}\r\n\r\n");
//! let event = parser.next_event().unwrap().unwrap();
//! assert_eq!(event.event, "message");
//! assert_eq!(event.data, "{\"jsonrpc\":\"2.0\"}");
//! assert_eq!(event.id.as_deref(), Some("1"));
//! assert_eq!(parser.next_event(), Ok(None));
//! ```
//!
//! # Rules
//!
//! - A line ends at CRLF, LF or a lone CR. A CR that ends a chunk ends the line at once; an LF
//!   that starts the next chunk is then swallowed, so a split CRLF is one line end.
//! - A UTF-8 byte order mark is skipped at the very start of the stream only.
//! - Bytes are decoded as UTF-8 *lossily*, as the WHATWG decoder does: each invalid sequence
//!   becomes U+FFFD. A stream is never rejected for its encoding.
//! - A line starting with `:` is a comment (MCP servers send `: ping` keep-alives): it carries
//!   nothing and is only counted ([`SseParser::comment_count`]).
//! - Otherwise the field name runs to the first `:`, and one space after that colon is dropped
//!   from the value. A line without a colon is a field with an empty value. Names are
//!   case-sensitive; unknown names are ignored.
//! - `data` appends its value and a line feed to the event's data; `event` sets the event type
//!   (`"message"` when empty or absent); `id` sets the last event id unless the value holds NUL
//!   (an empty value clears it, which is `None` here: WHATWG treats the empty string as "no id");
//!   `retry` sets the reconnection time in milliseconds if the value is one or more ASCII digits
//!   (a value too big for `u64` saturates), and is ignored otherwise.
//! - A blank line ends the event. The id in force becomes the committed
//!   [`SseParser::last_event_id`], even if nothing is dispatched. If no `data` line was seen the
//!   event is not dispatched; otherwise the final line feed is removed and the event is returned.
//!   So `data:` alone (MCP's "priming" event, sent with an id and no payload) *is* dispatched,
//!   with empty data.
//! - An event still open when the stream ends is discarded ([`SseParser::finish`]).
//!
//! # Size bound
//!
//! A peer controls how much it sends, so one event is bounded by [`SseParser::max_event_size`]
//! bytes ([`DEFAULT_MAX_EVENT_SIZE`] unless set with [`SseParser::with_max_event_size`]). The
//! bound applies to the data of the event (after joining, without the final line feed) and to
//! every single line (raw bytes, without its line end). When one is exceeded,
//! [`SseError::EventTooLarge`] is returned once, and the parser discards the rest of that event
//! up to and including the next blank line, then carries on with the next event. The discarded
//! event is dropped whole: it is not dispatched and an `id` it carried is not committed (a
//! `retry` it carried before the overflow has already taken effect, as `retry` does at once).
//! An unterminated line is dropped as soon as it passes the bound, so the parser never holds
//! more than about the bound plus the last chunk, however long the peer's line is.
//!
//! Which results come out does not depend on how the bytes were split into chunks.
//! Work is linear in the input: each byte is searched for a line end once, and consumed bytes
//! are compacted away only when they make up at least half the buffer.

use std::fmt;

/// The default bound on one event's data and on one line: 8 MiB.
pub const DEFAULT_MAX_EVENT_SIZE: usize = 8 * 1024 * 1024;

/// The UTF-8 encoding of U+FEFF.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched server-sent event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The event type: the last `event` field of the event, or `"message"` if none was given or
    /// it was empty.
    pub event: String,
    /// The `data` lines of the event joined with `"\n"`; may be empty (`data:` alone).
    pub data: String,
    /// The last event id in force when the event was dispatched. It persists from earlier events
    /// until an `id` field changes it; `None` if never set or cleared by an empty `id`.
    pub id: Option<String>,
    /// The reconnection time in milliseconds, if this event carried a valid `retry` field.
    pub retry: Option<u64>,
}

/// Why the parser refused part of a stream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// An event's data, or one of its lines, exceeded the size bound. The event is discarded up
    /// to the next blank line; parsing continues after it.
    #[error(
        "server-sent event larger than the {limit}-byte limit; it is discarded up to the next blank line"
    )]
    EventTooLarge {
        /// The bound in force, in bytes.
        limit: usize,
    },
}

/// What the parser is skipping after a size error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Discard {
    /// Nothing: lines are interpreted.
    Nothing,
    /// The rest of an overlong line, then the rest of its event.
    RestOfLine,
    /// The lines of an oversized event, up to and including the blank line ending it.
    RestOfEvent,
}

/// The per-event buffers and the state that outlives events.
#[derive(Clone, Default)]
struct Fields {
    /// The data buffer (each `data` value followed by a line feed).
    data: String,
    /// The event type buffer; empty means `"message"`.
    event_type: String,
    /// The last event id buffer, as changed by `id` fields of the open event.
    id_buffer: Option<String>,
    /// The id committed by the last blank line.
    last_event_id: Option<String>,
    /// A `retry` value seen in the open event.
    event_retry: Option<u64>,
    /// The latest `retry` value seen in the stream.
    retry: Option<u64>,
    /// Comment lines seen.
    comments: u64,
}

impl Fields {
    /// A blank line: commit the id, and dispatch the event if it has data.
    fn end_event(&mut self) -> Option<SseEvent> {
        self.last_event_id.clone_from(&self.id_buffer);
        let retry = self.event_retry.take();
        if self.data.is_empty() {
            self.event_type.clear();
            return None;
        }
        if self.data.ends_with('\n') {
            self.data.pop();
        }
        let event = if self.event_type.is_empty() {
            "message".to_owned()
        } else {
            std::mem::take(&mut self.event_type)
        };
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id: self.last_event_id.clone(),
            retry,
        })
    }

    /// Forgets the open event: its data, type, id change and `retry` mark.
    fn drop_event(&mut self) {
        self.data.clear();
        self.event_type.clear();
        self.id_buffer.clone_from(&self.last_event_id);
        self.event_retry = None;
    }

    /// Interprets one non-blank line.
    fn field(&mut self, line: &[u8], limit: usize) -> Result<(), SseError> {
        let mut parts = line.splitn(2, |&b| b == b':');
        let name = parts.next().unwrap_or_default();
        let value = match parts.next() {
            None => &[][..],
            Some(_) if name.is_empty() => {
                self.comments = self.comments.saturating_add(1);
                return Ok(());
            }
            Some(value) => value.strip_prefix(b" ").unwrap_or(value),
        };
        match name {
            b"event" => self.event_type = String::from_utf8_lossy(value).into_owned(),
            b"data" => {
                let value = String::from_utf8_lossy(value);
                // `self.data` already ends with the line feed joining the previous line to this
                // one; the line feed after this value is removed if the event ends here, so it
                // is not counted.
                if self.data.len().saturating_add(value.len()) > limit {
                    return Err(SseError::EventTooLarge { limit });
                }
                self.data.push_str(&value);
                self.data.push('\n');
            }
            b"id" if !value.contains(&0) => {
                self.id_buffer =
                    (!value.is_empty()).then(|| String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let ms = value.iter().fold(0u64, |acc, &d| {
                    acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                self.retry = Some(ms);
                self.event_retry = Some(ms);
            }
            _ => {}
        }
        Ok(())
    }
}

/// A push parser for one `text/event-stream` body at a time. See the [module docs](self).
#[derive(Clone)]
pub struct SseParser {
    /// The bound on one event's data and on one line, in bytes.
    limit: usize,
    /// Pushed bytes; `buf[pos..]` is not consumed yet.
    buf: Vec<u8>,
    /// Start of the unconsumed bytes.
    pos: usize,
    /// `buf[pos..scanned]` is known to hold no CR or LF.
    scanned: usize,
    /// No byte of this stream has been interpreted yet (a BOM may come).
    at_stream_start: bool,
    /// The last line ended with CR: an LF right after it belongs to that line end.
    after_cr: bool,
    /// What is being skipped after a size error.
    discard: Discard,
    /// Event buffers and lasting state.
    fields: Fields,
    /// Bytes examined by the line-end search plus bytes moved by compaction (tests only).
    #[cfg(test)]
    work: usize,
}

impl fmt::Debug for SseParser {
    /// Sizes and state only: event data can be large and may be sensitive.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseParser")
            .field("max_event_size", &self.limit)
            .field("buffered", &self.buf.len().saturating_sub(self.pos))
            .field("data_buffered", &self.fields.data.len())
            .field("discarding", &(self.discard != Discard::Nothing))
            .field("last_event_id", &self.fields.last_event_id)
            .field("retry", &self.fields.retry)
            .finish()
    }
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser with the default bound, [`DEFAULT_MAX_EVENT_SIZE`].
    #[must_use]
    pub fn new() -> Self {
        Self::with_max_event_size(DEFAULT_MAX_EVENT_SIZE)
    }

    /// A parser bounding each event's data, and each line, to `limit` bytes.
    ///
    /// With `limit == 0` every non-blank line is too large, so no event is ever dispatched.
    #[must_use]
    pub fn with_max_event_size(limit: usize) -> Self {
        SseParser {
            limit,
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            at_stream_start: true,
            after_cr: false,
            discard: Discard::Nothing,
            fields: Fields::default(),
            #[cfg(test)]
            work: 0,
        }
    }

    /// The bound on one event's data and on one line, in bytes.
    #[must_use]
    pub fn max_event_size(&self) -> usize {
        self.limit
    }

    /// Appends the next bytes of the stream; nothing is interpreted until
    /// [`next_event`](Self::next_event). Call `next_event` until `Ok(None)` after each push: the
    /// size bound is enforced there, so bytes pushed without draining stay buffered.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.pos > 0 && self.pos.saturating_mul(2) >= self.buf.len() {
            #[cfg(test)]
            {
                self.work += self.buf.len() - self.pos;
            }
            self.buf.drain(..self.pos);
            self.scanned = self.scanned.saturating_sub(self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event, `Ok(None)` when the buffered bytes hold no further one, or
    /// [`SseError::EventTooLarge`] when an event passes the bound (call again: parsing goes on
    /// after that event).
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        loop {
            if self.at_stream_start {
                let head = self.buf.get(self.pos..).unwrap_or_default();
                if head.len() < BOM.len() && BOM.starts_with(head) {
                    // Empty, or a prefix of the BOM: wait to know.
                    return Ok(None);
                }
                if head.starts_with(BOM) {
                    self.pos += BOM.len();
                }
                self.at_stream_start = false;
                self.scanned = self.scanned.max(self.pos);
            }
            if self.after_cr {
                match self.buf.get(self.pos) {
                    None => return Ok(None),
                    Some(b'\n') => {
                        self.pos += 1;
                        self.scanned = self.scanned.max(self.pos);
                    }
                    Some(_) => {}
                }
                self.after_cr = false;
            }

            let from = self.scanned.max(self.pos);
            let rest = self.buf.get(from..).unwrap_or_default();
            let Some(offset) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                #[cfg(test)]
                {
                    self.work += rest.len();
                }
                self.scanned = self.buf.len();
                return self.unterminated_line();
            };
            #[cfg(test)]
            {
                self.work += offset + 1;
            }
            let end = from + offset;
            let start = self.pos;
            self.after_cr = rest.get(offset) == Some(&b'\r');
            self.pos = end + 1;
            self.scanned = self.pos;
            let line = self.buf.get(start..end).unwrap_or_default();

            match self.discard {
                Discard::RestOfLine => {
                    self.discard = Discard::RestOfEvent;
                    continue;
                }
                Discard::RestOfEvent => {
                    if line.is_empty() {
                        self.fields.drop_event();
                        self.discard = Discard::Nothing;
                    }
                    continue;
                }
                Discard::Nothing => {}
            }
            if line.is_empty() {
                match self.fields.end_event() {
                    Some(event) => return Ok(Some(event)),
                    None => continue,
                }
            }
            let result = if line.len() > self.limit {
                Err(SseError::EventTooLarge { limit: self.limit })
            } else {
                self.fields.field(line, self.limit)
            };
            if let Err(error) = result {
                self.fields.drop_event();
                self.discard = Discard::RestOfEvent;
                return Err(error);
            }
        }
    }

    /// The buffered bytes end inside a line: drop it if it is past the bound.
    fn unterminated_line(&mut self) -> Result<Option<SseEvent>, SseError> {
        let pending = self.buf.len().saturating_sub(self.pos);
        if self.discard == Discard::RestOfLine {
            self.buf.truncate(self.pos);
        } else if pending > self.limit {
            self.buf.truncate(self.pos);
            let was = std::mem::replace(&mut self.discard, Discard::RestOfLine);
            if was == Discard::Nothing {
                self.fields.drop_event();
                self.scanned = self.buf.len();
                return Err(SseError::EventTooLarge { limit: self.limit });
            }
        }
        self.scanned = self.buf.len();
        Ok(None)
    }

    /// The stream has ended. Returns the complete events still buffered, one per call like
    /// [`next_event`](Self::next_event); once there are none it discards the incomplete rest
    /// (an event without its closing blank line is never dispatched), returns `Ok(None)` and
    /// leaves the parser ready for a new stream (a reconnection): the byte order mark is
    /// accepted again, while [`last_event_id`](Self::last_event_id), [`retry`](Self::retry) and
    /// [`comment_count`](Self::comment_count) carry over.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, SseError> {
        if let Some(event) = self.next_event()? {
            return Ok(Some(event));
        }
        self.buf.clear();
        self.pos = 0;
        self.scanned = 0;
        self.at_stream_start = true;
        self.after_cr = false;
        self.discard = Discard::Nothing;
        self.fields.drop_event();
        Ok(None)
    }

    /// The last event id committed by a blank line (the value for a `Last-Event-ID` header), or
    /// `None` if none was set or an empty `id` cleared it.
    #[must_use]
    pub fn last_event_id(&self) -> Option<&str> {
        self.fields.last_event_id.as_deref()
    }

    /// The latest reconnection time, in milliseconds, set by a valid `retry` field.
    #[must_use]
    pub fn retry(&self) -> Option<u64> {
        self.fields.retry
    }

    /// How many comment lines (starting with `:`) have been seen.
    #[must_use]
    pub fn comment_count(&self) -> u64 {
        self.fields.comments
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

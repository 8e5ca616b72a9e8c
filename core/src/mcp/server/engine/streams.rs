//! SSE streams (opening, writing with ids and backlog, replay bounds) and sending a request's
//! messages and its final answer on its channel.

use super::*;

impl Engine {
    // -----------------------------------------------------------------------------------------
    // Streams
    // -----------------------------------------------------------------------------------------

    pub(super) fn session_primes(&self, session: Option<&str>) -> bool {
        session
            .and_then(|s| self.sessions.get(s))
            .is_some_and(|s| s.version.as_str() >= "2025-11-25")
    }

    /// Starts an SSE response on `x` for `request` (or the session's GET stream).
    pub(super) fn open_stream(
        &mut self,
        x: ExchangeId,
        session: Option<String>,
        request: Option<RequestId>,
    ) -> u64 {
        let sid = self.next_stream;
        self.next_stream += 1;
        let resumable = session.is_some() && session.as_deref() != Some(STDIO_SESSION);
        let prime = resumable && self.session_primes(session.as_deref());
        self.push_http(
            x,
            HttpOutput::StreamStart {
                status: 200,
                headers: http::stream_headers(session.as_deref()),
            },
        );
        if let Some(e) = self.exchanges.get_mut(&x) {
            e.stream = Some(sid);
        }
        let mut stream = Stream {
            session,
            exchange: Some(x),
            request,
            next_seq: 1,
            delivered: 0,
            backlog: VecDeque::new(),
            resumable,
            finished: false,
        };
        if prime {
            let retry = self.config.timeouts.sse_retry.map(|d| d.as_millis());
            self.outputs.push_back(Output::Http(
                x,
                HttpOutput::StreamEvent(sse::priming(&sse::event_id(sid, 0), retry)),
            ));
        }
        stream.delivered = 0;
        self.streams.insert(sid, stream);
        self.bound_streams();
        sid
    }

    /// Drops the oldest detached finished streams beyond the bound.
    pub(super) fn bound_streams(&mut self) {
        let max = self.config.limits.max_streams;
        while self.streams.len() > max {
            let victim = self
                .streams
                .iter()
                .find(|(_, s)| s.exchange.is_none() && (s.finished || s.request.is_none()))
                .map(|(k, _)| *k);
            match victim {
                Some(k) => {
                    self.streams.remove(&k);
                    for s in self.sessions.values_mut() {
                        if s.get_stream == Some(k) {
                            s.get_stream = None;
                        }
                    }
                }
                None => break,
            }
        }
    }

    /// Writes one message on stream `sid` (kept for replay when resumable).
    pub(super) fn stream_send(&mut self, sid: u64, text: &str) {
        let max = self.config.limits.max_sse_backlog;
        let Some(s) = self.streams.get_mut(&sid) else {
            return;
        };
        let seq = s.next_seq;
        s.next_seq += 1;
        let id = s.resumable.then(|| sse::event_id(sid, seq));
        let bytes = sse::event(id.as_deref(), text);
        if s.resumable {
            s.backlog.push_back((seq, bytes.clone()));
            while s.backlog.len() > max {
                s.backlog.pop_front();
            }
        }
        if let Some(x) = s.exchange {
            s.delivered = seq;
            self.outputs
                .push_back(Output::Http(x, HttpOutput::StreamEvent(bytes)));
        }
    }

    /// Ends stream `sid`'s live connection (if any).
    pub(super) fn stream_end_connection(&mut self, sid: u64) {
        if let Some(x) = self.streams.get_mut(&sid).and_then(|s| s.exchange.take()) {
            self.push_http(x, HttpOutput::StreamEnd);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Sending for a request
    // -----------------------------------------------------------------------------------------

    /// Sends a message related to `rid` before its response; `false` when it cannot go (the
    /// client takes no SSE, or nothing is attached).
    pub(super) fn send_for(&mut self, rid: RequestId, text: String) -> bool {
        let Some(req) = self.requests.get(&rid) else {
            return false;
        };
        match req.channel.clone() {
            Channel::Stdio => {
                self.stdio_line(text);
                true
            }
            Channel::Http {
                stream: Some(sid), ..
            } => {
                self.stream_send(sid, &text);
                true
            }
            Channel::Http {
                exchange,
                stream: None,
                sse_ok,
                json_ok,
            } => {
                if !sse_ok || !self.exchanges.contains_key(&exchange) {
                    return false;
                }
                let session = req.session.clone().filter(|_| req.era == Era::Legacy);
                let sid = self.open_stream(exchange, session, Some(rid));
                if let Some(req) = self.requests.get_mut(&rid) {
                    req.channel = Channel::Http {
                        exchange,
                        stream: Some(sid),
                        sse_ok,
                        json_ok,
                    };
                }
                self.stream_send(sid, &text);
                true
            }
        }
    }

    /// Sends a message to a legacy session as a whole (its GET stream, or stdout).
    pub(super) fn session_send(&mut self, session: &str, text: String) {
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        if !s.http {
            self.stdio_line(text);
            return;
        }
        let sid = match s.get_stream {
            Some(sid) if self.streams.contains_key(&sid) => sid,
            _ => {
                let sid = self.next_stream;
                self.next_stream += 1;
                self.streams.insert(
                    sid,
                    Stream {
                        session: Some(session.to_owned()),
                        exchange: None,
                        request: None,
                        next_seq: 1,
                        delivered: 0,
                        backlog: VecDeque::new(),
                        resumable: true,
                        finished: false,
                    },
                );
                if let Some(s) = self.sessions.get_mut(session) {
                    s.get_stream = Some(sid);
                }
                self.bound_streams();
                sid
            }
        };
        self.stream_send(sid, &text);
    }

    /// Answers `rid` with `text` (its response) and forgets it.
    pub(super) fn finish(
        &mut self,
        rid: RequestId,
        status: u16,
        text: String,
        extra: &[(&str, &str)],
    ) {
        let Some(req) = self.requests.remove(&rid) else {
            return;
        };
        if let (Some(session), Some(w)) = (&req.session, &req.waiting) {
            if let Some(s) = self.sessions.get_mut(session) {
                for oid in w.pending.keys() {
                    s.outgoing.remove(oid);
                }
            }
        }
        match req.channel {
            Channel::Stdio => self.stdio_line(text),
            // A client that takes only `text/event-stream`: the answer as a stream of one.
            Channel::Http {
                exchange,
                stream: None,
                json_ok: false,
                sse_ok: true,
            } if self.exchanges.contains_key(&exchange) => {
                let session = req.session.clone().filter(|_| req.era == Era::Legacy);
                let sid = self.open_stream(exchange, session, None);
                self.stream_send(sid, &text);
                self.stream_end_connection(sid);
                self.streams.remove(&sid);
            }
            Channel::Http {
                exchange,
                stream: None,
                ..
            } => {
                if self.exchanges.contains_key(&exchange) {
                    let mut headers = http::header_list(&[("Content-Type", "application/json")]);
                    for (n, v) in extra {
                        let _ = headers.append(*n, *v);
                    }
                    self.push_http(
                        exchange,
                        HttpOutput::Response {
                            status,
                            headers,
                            body: text.into_bytes(),
                        },
                    );
                }
            }
            Channel::Http {
                stream: Some(sid), ..
            } => {
                self.stream_send(sid, &text);
                let attached = match self.streams.get_mut(&sid) {
                    Some(s) => {
                        s.finished = true;
                        s.request = None;
                        s.exchange.is_some() || !s.resumable
                    }
                    None => false,
                };
                if attached {
                    self.stream_end_connection(sid);
                    self.streams.remove(&sid);
                }
            }
        }
    }

    pub(super) fn finish_error(&mut self, rid: RequestId, status: u16, error: &ErrorObject) {
        let Some(req) = self.requests.get(&rid) else {
            return;
        };
        let text = jsonrpc::error_response(Some(&req.jsonrpc_id), error);
        self.finish(rid, status, text, &[]);
    }

    /// An answer sent before a request is admitted (no `RequestId`).
    pub(super) fn early(&mut self, channel: &Channel, id: Option<&Id>, era: Era, early: Early) {
        let (status, text) = match early {
            Early::Answer(status, result) => {
                let id = id.cloned().unwrap_or(Id::Number(0));
                (status, response_text(&id, &result))
            }
            Early::Refuse(r) => (r.status, jsonrpc::error_response(id, &r.error)),
        };
        let _ = era;
        match channel {
            Channel::Stdio => self.stdio_line(text),
            Channel::Http { exchange, .. } => {
                if self.exchanges.contains_key(exchange) {
                    self.push_http(
                        *exchange,
                        HttpOutput::Response {
                            status,
                            headers: http::header_list(&[("Content-Type", "application/json")]),
                            body: text.into_bytes(),
                        },
                    );
                }
            }
        }
    }
}

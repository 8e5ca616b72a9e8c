//! Writing answers: JSON-RPC error values, the HTTP answer (JSON, or SSE once a notification is
//! sent) and the stdio lines, with the per-request sinks each transport gives a tool.

use super::*;

pub(super) fn error_value(id: Option<&Id>, e: &ErrorObject) -> Value {
    serde_json::from_str(&jsonrpc::error_response(id, e)).unwrap_or(Value::Null)
}

pub(super) fn message_text(id: Option<&Id>, answer: &Answer) -> Option<String> {
    match answer {
        Answer::Result(r) => {
            #[derive(serde::Serialize)]
            struct Out<'a> {
                jsonrpc: &'static str,
                id: Option<&'a Id>,
                result: &'a Value,
            }
            serde_json::to_string(&Out {
                jsonrpc: jsonrpc::VERSION,
                id,
                result: r,
            })
            .ok()
        }
        Answer::Error(_, e) => Some(jsonrpc::error_response(id, e)),
        Answer::Raw(_, body) => Some(jsonrpc::error_response(
            id,
            &ErrorObject {
                code: code::INTERNAL_ERROR,
                message: format!("fail: raw_body has no stdio form ({} bytes)", body.len()),
                data: None,
            },
        )),
        Answer::Nothing => None,
    }
}

pub(super) fn send_status(res: &mut Responder<'_>, status: u16) {
    let _ = res.send(status, &Headers::new(), b"");
}

pub(super) fn send_answer(
    res: &mut Responder<'_>,
    id: Option<&Id>,
    answer: Answer,
    extra: &Headers,
) {
    let mut h = extra.clone();
    match &answer {
        Answer::Raw(status, body) => {
            let _ = h.append("Content-Type", "text/plain; charset=utf-8");
            let _ = res.send(*status, &h, body.as_bytes());
        }
        Answer::Nothing => res.abandon(),
        Answer::Result(_) | Answer::Error(..) => {
            let status = match &answer {
                Answer::Error(s, _) => *s,
                _ => 200,
            };
            let _ = h.append("Content-Type", "application/json");
            let body = message_text(id, &answer).unwrap_or_default();
            let _ = res.send(status, &h, body.as_bytes());
        }
    }
}

/// An HTTP response that becomes an SSE stream at the first notification.
pub(super) struct HttpSink<'r, 'a> {
    pub(super) res: &'r mut Responder<'a>,
    pub(super) request_headers: &'r Headers,
    pub(super) extra: Headers,
    pub(super) broken: bool,
}

impl<'r, 'a> HttpSink<'r, 'a> {
    pub(super) fn new(
        res: &'r mut Responder<'a>,
        request_headers: &'r Headers,
        extra: Headers,
    ) -> Self {
        HttpSink {
            res,
            request_headers,
            extra,
            broken: false,
        }
    }

    pub(super) fn event(&mut self, message: &str) -> bool {
        let text = format!("event: message\ndata: {message}\n\n");
        let ok = self.res.write_chunk(text.as_bytes()).is_ok();
        self.broken |= !ok;
        ok
    }

    pub(super) fn finish(mut self, id: Option<&Id>, answer: Answer) {
        if !self.res.is_streaming() {
            return send_answer(self.res, id, answer, &self.extra);
        }
        if let Some(text) = message_text(id, &answer) {
            self.event(&text);
        }
        if self.res.finish().is_err() || matches!(answer, Answer::Nothing) {
            self.res.close_after();
        }
    }
}

impl Sink for HttpSink<'_, '_> {
    fn notify(&mut self, message: &Value) -> bool {
        if self.broken {
            return false;
        }
        if !self.res.is_streaming() {
            let mut h = self.extra.clone();
            for (n, v) in [
                ("Content-Type", "text/event-stream"),
                ("Cache-Control", "no-cache"),
                ("X-Accel-Buffering", "no"),
            ] {
                let _ = h.append(n, v);
            }
            if self.res.start_stream(200, &h).is_err() {
                self.broken = true;
                return false;
            }
        }
        self.event(&message.to_string())
    }

    fn cancelled(&self) -> bool {
        self.broken || self.res.peer_gone()
    }

    fn request_headers(&self) -> Option<&Headers> {
        Some(self.request_headers)
    }

    fn add_response_header(&mut self, name: &str, value: &str) -> bool {
        !self.res.is_sent() && self.extra.append(name, value).is_ok()
    }
}

pub(super) struct StdioWork {
    pub(super) id: Id,
    pub(super) method: String,
    pub(super) params: Value,
    pub(super) cancel: Arc<AtomicBool>,
}

/// The stdio loop's state: the legacy session of the process, and the requests in flight.
#[derive(Default)]
pub(super) struct StdioState {
    pub(super) legacy: Mutex<Option<String>>,
    pub(super) in_flight: Mutex<HashMap<Id, Arc<AtomicBool>>>,
}

impl StdioState {
    pub(super) fn register(&self, id: &Id) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(false));
        lock(&self.in_flight).insert(id.clone(), flag.clone());
        flag
    }

    pub(super) fn unregister(&self, id: &Id) {
        lock(&self.in_flight).remove(id);
    }

    pub(super) fn cancel(&self, id: &Id) {
        if let Some(flag) = lock(&self.in_flight).get(id) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    pub(super) fn cancel_all(&self) {
        for flag in lock(&self.in_flight).values() {
            flag.store(true, Ordering::Relaxed);
        }
    }
}

pub(super) struct StdioSink {
    pub(super) out: Arc<Mutex<Box<dyn Write + Send>>>,
    pub(super) cancel: Arc<AtomicBool>,
}

impl Sink for StdioSink {
    fn notify(&mut self, message: &Value) -> bool {
        !self.cancel.load(Ordering::Relaxed) && write_line(&self.out, message)
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    fn request_headers(&self) -> Option<&Headers> {
        None
    }

    fn add_response_header(&mut self, name: &str, value: &str) -> bool {
        mcpwire_core::http::validate_name(name).is_ok()
            && mcpwire_core::http::validate_value(name, value).is_ok()
    }
}

/// Writes one compact JSON message and a newline; `false` when the output is gone.
pub(super) fn write_line(out: &Mutex<Box<dyn Write + Send>>, message: &Value) -> bool {
    write_text(out, &message.to_string())
}

/// Writes one JSON text (compact, so without line breaks) and a newline.
pub(super) fn write_text(out: &Mutex<Box<dyn Write + Send>>, text: &str) -> bool {
    let mut w = lock(out);
    w.write_all(text.as_bytes()).is_ok() && w.write_all(b"\n").is_ok() && w.flush().is_ok()
}

pub(super) fn write_answer(out: &Mutex<Box<dyn Write + Send>>, id: &Id, answer: Answer) {
    if let Some(text) = message_text(Some(id), &answer) {
        write_text(out, &text);
    }
}

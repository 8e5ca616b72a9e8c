//! The health listener's HTTP/1.1: one request per connection, its head parsed by `httparse`,
//! a small body by `Content-Length`, and whole responses with the admin UI's security headers.

use std::io::Read;

/// The longest request head read.
pub const MAX_HEAD: usize = 8192;
/// The largest request body read (the admin UI's changes are tiny JSON objects).
pub const MAX_BODY: usize = 4096;

/// One parsed request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path without the query.
    pub path: String,
    /// The query string (without `?`).
    pub query: String,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a request could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// Not HTTP/1.x, or a malformed head.
    Malformed,
    /// A head or body over the limits.
    TooLarge,
    /// The peer closed or stalled before a whole request arrived.
    Incomplete,
    /// The whole request did not arrive within [`REQUEST_TIME`] (a slow sender cannot hold a
    /// connection slot).
    TooSlow,
}

/// How long a whole request may take to arrive.
pub const REQUEST_TIME: std::time::Duration = std::time::Duration::from_secs(5);

impl Request {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Query parameter `name` as a number.
    pub fn query_u64(&self, name: &str) -> Option<u64> {
        self.query_str(name).and_then(|v| v.parse().ok())
    }

    /// Query parameter `name` as text (undecoded).
    pub fn query_str(&self, name: &str) -> Option<&str> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }

    /// Parses everything received so far: the request once it is whole, `None` while more
    /// is needed, or why it cannot be one.
    pub fn parse(buf: &[u8]) -> Result<Option<Request>, BadRequest> {
        let mut headers = [httparse::EMPTY_HEADER; 48];
        let mut parsed = httparse::Request::new(&mut headers);
        let head_len = match parsed.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
                return Err(BadRequest::TooLarge)
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(BadRequest::TooLarge),
            Err(_) => return Err(BadRequest::Malformed),
        };
        let target = parsed.path.unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut req = Request {
            method: parsed.method.unwrap_or("").to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        for h in parsed.headers.iter() {
            let value = std::str::from_utf8(h.value).map_err(|_| BadRequest::Malformed)?;
            req.headers
                .push((h.name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        if req.header("transfer-encoding").is_some() {
            return Err(BadRequest::Malformed);
        }
        let length = match req.header("content-length") {
            None => 0,
            Some(v) => v.parse::<usize>().map_err(|_| BadRequest::Malformed)?,
        };
        if length > MAX_BODY {
            return Err(BadRequest::TooLarge);
        }
        let body = buf.get(head_len..).unwrap_or_default();
        if body.len() < length {
            return Ok(None);
        }
        req.body = body.get(..length).unwrap_or_default().to_vec();
        Ok(Some(req))
    }

    /// Reads one request from a blocking `conn`, all of it within [`REQUEST_TIME`] (each read
    /// bounded by the connection's own timeout).
    pub fn read(conn: &mut dyn Read) -> Result<Request, BadRequest> {
        let until = std::time::Instant::now() + REQUEST_TIME;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            if let Some(req) = Self::parse(&buf)? {
                return Ok(req);
            }
            if std::time::Instant::now() > until {
                return Err(BadRequest::TooSlow);
            }
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return Err(BadRequest::Incomplete),
                Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            }
        }
    }
}

/// A whole response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Headers besides `Content-Length` and `Connection`.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// The admin UI's policy: only its own assets, no framing, no sniffing, no referrer, no cache.
const SECURITY_HEADERS: [(&str, &str); 5] = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
];

impl Response {
    /// A response with `body` of type `ctype` and the security headers.
    pub fn new(status: u16, ctype: &str, body: &str) -> Self {
        let mut headers: Vec<(&'static str, String)> = vec![("Content-Type", ctype.to_owned())];
        headers.extend(SECURITY_HEADERS.iter().map(|(k, v)| (*k, (*v).to_owned())));
        Response {
            status,
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    /// A plain-text response.
    pub fn text(status: u16, body: &str) -> Self {
        Self::new(status, "text/plain; charset=utf-8", body)
    }

    /// Its bytes on the wire (without the body for `HEAD`).
    pub fn bytes(&self, head_only: bool) -> Vec<u8> {
        let mut text = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (k, v) in &self.headers {
            text.push_str(&format!("{k}: {v}\r\n"));
        }
        text.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.body.len()
        ));
        let mut out = text.into_bytes();
        if !head_only {
            out.extend_from_slice(&self.body);
        }
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(bytes: &[u8]) -> Result<Request, BadRequest> {
        Request::read(&mut std::io::Cursor::new(bytes.to_vec()))
    }

    /// Hands out its bytes one at a time, each after a pause.
    struct Trickle(Vec<u8>, std::time::Duration);
    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            std::thread::sleep(self.1);
            if self.0.is_empty() || out.is_empty() {
                return Ok(0);
            }
            out[0] = self.0.remove(0);
            Ok(1)
        }
    }

    #[test]
    fn a_trickling_sender_is_cut_off() {
        let head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
        let started = std::time::Instant::now();
        let got = Request::read(&mut Trickle(
            head.to_vec(),
            std::time::Duration::from_millis(40),
        ));
        assert_eq!(got, Err(BadRequest::TooSlow));
        // Cut off once the budget is spent, not after the whole trickle (a bound, not a timing).
        assert!(
            started.elapsed() < REQUEST_TIME * 3,
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_request_is_read_whole() {
        let r = read(b"POST /admin/api/log-level?x=1&after=7 HTTP/1.1\r\nHost: localhost\r\nOrigin: http://localhost\r\nContent-Length: 17\r\n\r\n{\"level\":\"debug\"}").unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/admin/api/log-level")
        );
        assert_eq!(r.query_u64("after"), Some(7));
        assert_eq!(r.header("origin"), Some("http://localhost"));
        assert_eq!(r.body, br#"{"level":"debug"}"#);
        assert_eq!(
            read(b"GET / HTTP/1.1\r\nHost: x\r\n"),
            Err(BadRequest::Incomplete)
        );
        assert_eq!(
            read(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(BadRequest::Malformed)
        );
        assert_eq!(
            read(b"GET / HTTP/1.1\r\nContent-Length: nope\r\n\r\n"),
            Err(BadRequest::Malformed)
        );
    }

    proptest! {
        /// Whatever arrives, the reader answers with a request or a typed refusal, never a
        /// panic, and never more body than allowed.
        #[test]
        fn any_bytes_give_a_request_or_a_refusal(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            if let Ok(r) = read(&bytes) {
                prop_assert!(r.body.len() <= MAX_BODY);
                prop_assert!(r.headers.iter().all(|(k, _)| k.chars().all(|c| !c.is_ascii_uppercase())));
            }
        }

        /// A well-formed request is read back as sent, however the body is split from the head.
        #[test]
        fn a_well_formed_request_round_trips(
            path in "/[a-z0-9/]{0,40}",
            after in any::<u64>(),
            body in proptest::collection::vec(any::<u8>(), 0..MAX_BODY),
            name in "[A-Za-z][A-Za-z0-9-]{0,20}",
            value in "[ -~]{0,60}",
        ) {
            let mut bytes = format!(
                "POST {path}?after={after} HTTP/1.1\r\n{name}: {value}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            bytes.extend_from_slice(&body);
            let r = read(&bytes).unwrap();
            prop_assert_eq!(&r.path, &path);
            prop_assert_eq!(r.query_u64("after"), Some(after));
            prop_assert_eq!(&r.body, &body);
            let lower = name.to_ascii_lowercase();
            let found = r.headers.iter().find(|(k, _)| *k == lower).map(|(_, v)| v.as_str());
            prop_assert_eq!(found, Some(value.trim()));
        }

        /// A body over the limit is refused before it is read.
        #[test]
        fn a_large_body_is_refused(extra in 1usize..1_000_000) {
            let head = format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", MAX_BODY + extra);
            prop_assert_eq!(read(head.as_bytes()), Err(BadRequest::TooLarge));
        }
    }
}

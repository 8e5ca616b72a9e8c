//! A load generator for `bench/tunnel.sh`: sends `tools/call` requests with a fixed number in
//! flight to two Streamable HTTP MCP endpoints, the reference server directly and the local
//! control plane's MCP endpoint (which reaches the same server through `mcpwire tunnel run`),
//! and prints per-request latency percentiles, throughput, and the latency the tunnel path adds.
//!
//! ```text
//! tunnel_load --direct URL --tunnel URL [--requests N] [--concurrency C] [--rounds R]
//!             [--warmup W] [--time-limit-s S] [--slow-ms MS] [--metrics URL] [--label TEXT]
//!             [--floor]
//! ```
//!
//! The two targets take turns: `R` rounds of `N / R` requests to the direct target, then
//! `N / R` to the tunnel target, so a busy neighbour on a shared machine slows both alike.
//! Every answer is checked (HTTP 200, the JSON-RPC id sent, the tool's text); a wrong one counts
//! as an error and its latency is not kept. Loopback only (the URLs must be `http://127.x`
//! or `http://[::1]`); the run is bounded by `N` and by `--time-limit-s`.
//!
//! Each worker thread keeps one keep-alive connection per target and reads the answers with
//! `httparse` (`Content-Length`, chunked, or close-delimited bodies; an SSE body's last `data:`
//! event is the answer). With `--metrics URL` (the tunnel client's `/metrics`) a sampler reads
//! `mcpwire_tunnel_commands_in_flight` every 10 ms during the tunnel phases and reports the
//! largest value seen. With `--slow-ms MS` the `slow` tool is called instead of `echo` (each
//! command then stays in flight at least `MS` milliseconds).
//!
//! With `--floor` each round also times **the floor of the tunnel path**: the three loopback
//! HTTP exchanges the path adds to a direct call, made directly, one after another, against a
//! server that answers at once (started here on 127.0.0.1:0): the MCP request to the control
//! plane (answered with a body the size of the MCP answer), the tunnel client's poll (answered
//! with a command envelope built as the dev control plane builds it, around the same request),
//! and its response POST (the payload around the same answer, answered `{"status":"ok"}`). Each
//! hop has its own keep-alive connection, as on the real path. The latency the tunnel adds is
//! then also given as a ratio to that floor: what the tunnel client, the control plane and
//! their parsing cost beyond moving the same bytes over loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use mcpwire_core::mcp::headers::request_headers;
use mcpwire_core::mcp::meta::{build_request, RequestMeta};
use mcpwire_core::mcp::{ClientCapabilities, Implementation};
use serde_json::{json, Value};

/// The largest answer read (the echo answers are a few hundred bytes).
const MAX_ANSWER: usize = 1024 * 1024;
/// How long one request may take before it counts as an error.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let addr = authority
            .to_socket_addrs()
            .map_err(|e| format!("{url}: {e}"))?
            .next()
            .ok_or_else(|| format!("{url}: no address"))?;
        if !addr.ip().is_loopback() {
            return Err(format!("{url}: the load generator targets loopback only"));
        }
        Ok(Target {
            addr,
            host: authority.to_owned(),
            path: path.to_owned(),
        })
    }
}

struct Options {
    direct: Target,
    tunnel: Target,
    requests: usize,
    concurrency: usize,
    rounds: usize,
    warmup: usize,
    time_limit: Duration,
    slow_ms: Option<u64>,
    metrics: Option<Target>,
    label: String,
    floor: bool,
}

fn usage() -> &'static str {
    "usage: tunnel_load --direct URL --tunnel URL [--requests N] [--concurrency C] [--rounds R] \
     [--warmup W] [--time-limit-s S] [--slow-ms MS] [--metrics URL] [--label TEXT] [--floor]"
}

fn parse_args() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let (mut direct, mut tunnel, mut metrics) = (None, None, None);
    let (mut requests, mut concurrency, mut rounds, mut warmup) = (2000usize, 1usize, 4usize, 200);
    let mut time_limit = Duration::from_secs(120);
    let mut slow_ms = None;
    let mut label = String::from("run");
    let mut floor = false;
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag} {v:?}: expected a whole number"))
        };
        match flag.as_str() {
            "--direct" => direct = Some(Target::parse(&value()?)?),
            "--tunnel" => tunnel = Some(Target::parse(&value()?)?),
            "--metrics" => metrics = Some(Target::parse(&value()?)?),
            "--requests" => requests = number(value()?)?,
            "--concurrency" => concurrency = number(value()?)?,
            "--rounds" => rounds = number(value()?)?,
            "--warmup" => warmup = number(value()?)?,
            "--time-limit-s" => time_limit = Duration::from_secs(number(value()?)? as u64),
            "--slow-ms" => slow_ms = Some(number(value()?)? as u64),
            "--label" => label = value()?,
            "--floor" => floor = true,
            "--help" | "-h" => return Err(usage().to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    if !(1..=1000).contains(&concurrency) || !(1..=1000).contains(&rounds) {
        return Err("--concurrency and --rounds are 1 to 1000".into());
    }
    if requests == 0 || requests > 10_000_000 {
        return Err("--requests is 1 to 10000000".into());
    }
    Ok(Options {
        direct: direct.ok_or_else(|| format!("--direct is required\n{}", usage()))?,
        tunnel: tunnel.ok_or_else(|| format!("--tunnel is required\n{}", usage()))?,
        requests,
        concurrency,
        rounds,
        warmup,
        time_limit,
        slow_ms,
        metrics,
        label,
        floor,
    })
}

/// One keep-alive HTTP/1.1 connection, reopened when the server closes it.
struct Conn {
    target: Target,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    fn new(target: Target) -> Conn {
        Conn {
            target,
            stream: None,
            buf: Vec::with_capacity(4096),
        }
    }

    fn stream(&mut self) -> std::io::Result<&mut TcpStream> {
        if self.stream.is_none() {
            let s = TcpStream::connect_timeout(&self.target.addr, IO_TIMEOUT)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(IO_TIMEOUT))?;
            s.set_write_timeout(Some(IO_TIMEOUT))?;
            self.stream = Some(s);
            self.buf.clear();
        }
        self.stream
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no stream"))
    }

    /// Sends one request and reads the whole answer: (status, body).
    fn exchange(&mut self, head: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let first = self.stream.is_some();
        match self.try_exchange(head, body) {
            Ok(r) => Ok(r),
            // A kept-alive connection the server closed meanwhile: retry once on a fresh one.
            Err(_) if first => {
                self.stream = None;
                self.try_exchange(head, body)
            }
            Err(e) => {
                self.stream = None;
                Err(e)
            }
        }
    }

    fn try_exchange(&mut self, head: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let s = self.stream().map_err(|e| format!("connect: {e}"))?;
        let mut out = Vec::with_capacity(head.len() + body.len());
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(body);
        s.write_all(&out).map_err(|e| format!("write: {e}"))?;
        self.read_answer()
    }

    fn fill(&mut self) -> Result<usize, String> {
        let s = self
            .stream
            .as_mut()
            .ok_or_else(|| "no connection".to_owned())?;
        let mut chunk = [0u8; 8192];
        let n = s.read(&mut chunk).map_err(|e| format!("read: {e}"))?;
        if self.buf.len() + n > MAX_ANSWER {
            return Err("answer too large".into());
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    fn read_answer(&mut self) -> Result<(u16, Vec<u8>), String> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut res = httparse::Response::new(&mut headers);
            match res.parse(&self.buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let status = res.code.unwrap_or(0);
                    let mut length = None;
                    let mut chunked = false;
                    let mut close = false;
                    for h in res.headers.iter() {
                        let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                        if h.name.eq_ignore_ascii_case("content-length") {
                            length = v.trim().parse::<usize>().ok();
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = v.contains("chunked");
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            close = v.contains("close");
                        }
                    }
                    self.buf.drain(..len);
                    let body = if chunked {
                        self.read_chunked()?
                    } else if let Some(n) = length {
                        while self.buf.len() < n {
                            if self.fill()? == 0 {
                                return Err("closed inside a body".into());
                            }
                        }
                        self.buf.drain(..n).collect()
                    } else if status == 204 || status == 304 {
                        Vec::new()
                    } else {
                        while self.fill()? > 0 {}
                        close = true;
                        std::mem::take(&mut self.buf)
                    };
                    if close {
                        self.stream = None;
                    }
                    return Ok((status, body));
                }
                Ok(httparse::Status::Partial) => {
                    if self.fill()? == 0 {
                        return Err("closed before an answer".into());
                    }
                }
                Err(e) => return Err(format!("bad answer: {e}")),
            }
        }
    }

    fn read_chunked(&mut self) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                if self.fill()? == 0 {
                    return Err("closed inside a chunk size".into());
                }
            };
            let size_text = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            let size_text = size_text.split(';').next().unwrap_or("").trim().to_owned();
            let size = usize::from_str_radix(&size_text, 16)
                .map_err(|_| format!("bad chunk size {size_text:?}"))?;
            self.buf.drain(..line_end + 2);
            if size == 0 {
                // No trailers are expected: the final CRLF.
                while self.buf.len() < 2 {
                    if self.fill()? == 0 {
                        return Err("closed after the last chunk".into());
                    }
                }
                self.buf.drain(..2);
                return Ok(body);
            }
            if body.len() + size > MAX_ANSWER {
                return Err("answer too large".into());
            }
            while self.buf.len() < size + 2 {
                if self.fill()? == 0 {
                    return Err("closed inside a chunk".into());
                }
            }
            body.extend(self.buf.drain(..size));
            self.buf.drain(..2);
        }
    }
}

/// The JSON-RPC answer in a body: the body itself, or an SSE stream's last `data:` event.
fn answer_json(body: &[u8]) -> Option<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Some(v);
    }
    let text = std::str::from_utf8(body).ok()?;
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .next_back()
}

/// What one request sends and what a correct answer holds.
struct Call {
    id: i64,
    head: String,
    body: String,
    expect_text: String,
}

fn make_call(target: &Target, id: i64, slow_ms: Option<u64>) -> Result<Call, String> {
    let (params, expect_text) = match slow_ms {
        Some(ms) => (
            json!({"name": "slow", "arguments": {"ms": ms}}),
            format!("slept {ms} ms"),
        ),
        None => {
            let t = format!("bench {id}");
            (json!({"name": "echo", "arguments": {"text": t}}), t)
        }
    };
    let meta = RequestMeta::new("2026-07-28", ClientCapabilities::none())
        .with_client_info(Implementation::new("mcpwire-tunnel-load", "1"));
    let body = build_request(&id.into(), "tools/call", params, &meta).map_err(|e| e.to_string())?;
    let headers = request_headers(&body, None).map_err(|e| e.to_string())?;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
        target.path,
        target.host,
        body.len()
    );
    for (n, v) in headers.iter() {
        head.push_str(n);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    Ok(Call {
        id,
        head,
        body,
        expect_text,
    })
}

fn check(call: &Call, status: u16, body: &[u8]) -> Result<(), String> {
    if status != 200 {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ));
    }
    let v = answer_json(body).ok_or("the answer is not JSON")?;
    if v["id"] != json!(call.id) {
        return Err(format!("answer id {} for request {}", v["id"], call.id));
    }
    if v["result"]["content"][0]["text"] != json!(call.expect_text) {
        return Err(format!("unexpected answer {v}"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The floor: the three exchanges the tunnel path adds, made directly.

/// The header that tells the floor server how large an answer body to send.
const FLOOR_ANSWER_HEADER: &str = "X-Floor-Answer-Bytes";

/// A keep-alive HTTP/1.1 server on 127.0.0.1:0 that answers every request at once with
/// `200` and a body of the size its [`FLOOR_ANSWER_HEADER`] asks for (a thread per connection;
/// it lives as long as the process).
fn start_floor_server() -> Result<Target, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("floor server: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("floor server: {e}"))?;
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve_floor(conn));
        }
    });
    Target::parse(&format!("http://{addr}/"))
}

fn serve_floor(mut conn: TcpStream) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(IO_TIMEOUT));
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    loop {
        // One request head, then its body (Content-Length).
        let (head_len, body_len, answer_len) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let value = |name: &str| {
                        req.headers
                            .iter()
                            .find(|h| h.name.eq_ignore_ascii_case(name))
                            .and_then(|h| std::str::from_utf8(h.value).ok())
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0)
                    };
                    break (len, value("content-length"), value(FLOOR_ANSWER_HEADER));
                }
                Ok(httparse::Status::Partial) => match conn.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                },
                Err(_) => return,
            }
        };
        while buf.len() < head_len + body_len {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_len + body_len);
        let answer_len = answer_len.min(MAX_ANSWER);
        let mut out = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {answer_len}\r\n\r\n"
        )
        .into_bytes();
        out.resize(out.len() + answer_len, b' ');
        if conn.write_all(&out).is_err() {
            return;
        }
    }
}

/// The three requests of one floor sample, sized as the tunnel path's.
struct FloorCall {
    /// The MCP client's request to the control plane, answered with the MCP answer's size.
    mcp: (String, String),
    /// The tunnel client's poll, answered with the command envelope's size.
    poll: (String, String),
    /// The tunnel client's response POST, answered with the ack's size.
    post: (String, String),
}

/// The floor's requests for call `id` against `floor`, where `answer_len` is the size of the
/// MCP server's answer to that call (taken from a direct call).
fn make_floor_call(floor: &Target, id: i64, answer_len: usize) -> Result<FloorCall, String> {
    let call = make_call(floor, id, None)?;
    // The MCP request's Mcp-* headers travel in the envelope, as the dev control plane copies them.
    let mut forwarded = serde_json::Map::new();
    for line in call.head.lines() {
        if let Some((name, value)) = line.split_once(": ") {
            if name.to_ascii_lowercase().starts_with("mcp-") {
                forwarded.insert(name.to_owned(), json!([value]));
            }
        }
    }
    let body: Value = serde_json::from_str(&call.body).map_err(|e| e.to_string())?;
    let envelope = json!({"commands": [{
        "request_id": format!("req_{:032x}", id),
        "shard_token": format!("shard_{:032x}", id),
        "command_type": "jsonrpc",
        "channel": "main",
        "created_at": "2026-12-01T00:00:00Z",
        "headers": forwarded,
        "jsonrpc": body,
    }]})
    .to_string();
    // The answer as it comes back, inside the response payload (spaces stand in for its text).
    let answer = format!("\"{}\"", " ".repeat(answer_len.saturating_sub(2)));
    let payload = format!(
        r#"{{"request_id":"req_{id:032x}","resp_type":"jsonrpc_response","resp_code":200,"resp_headers":{{"Content-Type":["application/json"]}},"resp_json":{answer}}}"#
    );
    let host = &floor.host;
    let mcp_head = call.head.replacen(
        "\r\n\r\n",
        &format!("\r\n{FLOOR_ANSWER_HEADER}: {answer_len}\r\n\r\n"),
        1,
    );
    let poll_head = format!(
        "GET /v1/tunnels/tunnel_bench/poll?limit=25&timeout_ms=30000 HTTP/1.1\r\nHost: {host}\r\n\
         Authorization: Bearer sk-bench-floor-key-0000000000000000\r\n\
         X-Tunnel-Client-Name: mcpwire\r\nX-Tunnel-Client-Version: 0.1.0\r\n\
         X-Tunnel-Client-Instance-Id: 0000000000000000\r\n\
         {FLOOR_ANSWER_HEADER}: {}\r\n\r\n",
        envelope.len()
    );
    let post_head = format!(
        "POST /v1/tunnels/tunnel_bench/responses HTTP/1.1\r\nHost: {host}\r\n\
         Authorization: Bearer sk-bench-floor-key-0000000000000000\r\n\
         Content-Type: application/json\r\nX-Tunnel-Shard-Token: shard_{id:032x}\r\n\
         Content-Length: {}\r\n{FLOOR_ANSWER_HEADER}: {}\r\n\r\n",
        payload.len(),
        r#"{"status":"ok"}"#.len()
    );
    Ok(FloorCall {
        mcp: (mcp_head, call.body),
        poll: (poll_head, String::new()),
        post: (post_head, payload),
    })
}

/// One floor sample on the worker's three connections: the three exchanges, one after another.
fn floor_exchange(conns: &mut [Conn; 3], call: &FloorCall) -> Result<(), String> {
    for (conn, (head, body)) in conns.iter_mut().zip([&call.mcp, &call.poll, &call.post]) {
        let (status, _) = conn.exchange(head, body.as_bytes())?;
        if status != 200 {
            return Err(format!("floor server answered HTTP {status}"));
        }
    }
    Ok(())
}

/// The size of the direct target's answer to one call, for the floor's bodies.
fn direct_answer_len(direct: &Target) -> Result<usize, String> {
    let call = make_call(direct, 0, None)?;
    let (status, body) = Conn::new(direct.clone()).exchange(&call.head, call.body.as_bytes())?;
    check(&call, status, &body)?;
    Ok(body.len())
}

/// The outcome of one phase against one target.
#[derive(Default)]
struct Phase {
    latencies_ns: Vec<u64>,
    errors: usize,
    first_error: Option<String>,
    elapsed: Duration,
}

impl Phase {
    fn add(&mut self, other: Phase) {
        self.latencies_ns.extend(other.latencies_ns);
        self.errors += other.errors;
        self.elapsed += other.elapsed;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// One step of the schedule every worker follows: a phase against one target.
struct Step {
    /// 0 = direct, 1 = tunnel, 2 = the floor.
    target: usize,
    count: usize,
    first_id: i64,
    next: AtomicUsize,
    /// Kept in the results (warm-up steps are not).
    measured: bool,
}

/// Runs `schedule` with `concurrency` workers, each keeping one connection per target; all
/// workers start a step together and the step ends when the last one finishes. Returns the
/// measured results per target, each step's wall time added to its target's elapsed time.
fn run_schedule(
    o: &Options,
    schedule: Vec<Step>,
    deadline: Instant,
    sampler: &Sampler,
    floor: Option<(Target, usize)>,
) -> [Phase; 3] {
    let schedule = Arc::new(schedule);
    let barrier = Arc::new(Barrier::new(o.concurrency + 1));
    let targets = [o.direct.clone(), o.tunnel.clone()];
    let workers: Vec<_> = (0..o.concurrency)
        .map(|_| {
            let (schedule, barrier, targets) =
                (Arc::clone(&schedule), Arc::clone(&barrier), targets.clone());
            let floor = floor.clone();
            let slow_ms = o.slow_ms;
            std::thread::spawn(move || {
                let mut conns = [Conn::new(targets[0].clone()), Conn::new(targets[1].clone())];
                let mut floor_conns = floor.as_ref().map(|(t, _)| {
                    [
                        Conn::new(t.clone()),
                        Conn::new(t.clone()),
                        Conn::new(t.clone()),
                    ]
                });
                let mut results: Vec<Phase> = Vec::with_capacity(schedule.len());
                for step in schedule.iter() {
                    barrier.wait();
                    let mut phase = Phase::default();
                    loop {
                        let i = step.next.fetch_add(1, Ordering::Relaxed);
                        if i >= step.count || Instant::now() >= deadline {
                            break;
                        }
                        let id = step.first_id + i as i64;
                        if let (2, Some((floor_target, answer_len)), Some(fc)) =
                            (step.target, &floor, floor_conns.as_mut())
                        {
                            let result =
                                make_floor_call(floor_target, id, *answer_len).and_then(|call| {
                                    let t0 = Instant::now();
                                    floor_exchange(fc, &call).map(|()| t0.elapsed())
                                });
                            match result {
                                Ok(t) => phase.latencies_ns.push(t.as_nanos() as u64),
                                Err(e) => {
                                    phase.errors += 1;
                                    phase.first_error.get_or_insert(e);
                                }
                            }
                            continue;
                        }
                        let call = match make_call(
                            &targets[step.target],
                            step.first_id + i as i64,
                            slow_ms,
                        ) {
                            Ok(c) => c,
                            Err(e) => {
                                phase.errors += 1;
                                phase.first_error.get_or_insert(e);
                                continue;
                            }
                        };
                        let t0 = Instant::now();
                        let answer = conns[step.target].exchange(&call.head, call.body.as_bytes());
                        let ns = t0.elapsed().as_nanos() as u64;
                        match answer.and_then(|(status, body)| check(&call, status, &body)) {
                            Ok(()) => phase.latencies_ns.push(ns),
                            Err(e) => {
                                phase.errors += 1;
                                phase.first_error.get_or_insert(e);
                            }
                        }
                    }
                    results.push(phase);
                    barrier.wait();
                }
                results
            })
        })
        .collect();
    let mut elapsed = Vec::with_capacity(schedule.len());
    for step in schedule.iter() {
        sampler
            .active
            .store(step.measured && step.target == 1, Ordering::Relaxed);
        barrier.wait();
        let t0 = Instant::now();
        barrier.wait();
        elapsed.push(t0.elapsed());
        sampler.active.store(false, Ordering::Relaxed);
    }
    let mut totals = [Phase::default(), Phase::default(), Phase::default()];
    for w in workers {
        match w.join() {
            Ok(results) => {
                for (step, phase) in schedule.iter().zip(results) {
                    if step.measured || phase.errors > 0 {
                        let mut phase = phase;
                        if !step.measured {
                            phase.latencies_ns.clear();
                        }
                        totals[step.target].add(phase);
                    }
                }
            }
            Err(_) => {
                totals[0].errors += 1;
                totals[0]
                    .first_error
                    .get_or_insert("a worker panicked".into());
            }
        }
    }
    for (step, e) in schedule.iter().zip(elapsed) {
        if step.measured {
            totals[step.target].elapsed += e;
        }
    }
    totals
}

/// Reads `mcpwire_tunnel_commands_in_flight` from a `/metrics` URL.
fn in_flight(target: &Target) -> Option<u64> {
    let mut conn = Conn::new(target.clone());
    let head = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        target.path, target.host
    );
    let (status, body) = conn.exchange(&head, b"").ok()?;
    if status != 200 {
        return None;
    }
    String::from_utf8_lossy(&body).lines().find_map(|l| {
        l.strip_prefix("mcpwire_tunnel_commands_in_flight ")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as u64)
    })
}

struct Sampler {
    active: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    samples: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(target: Option<Target>) -> Sampler {
        let active = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicU64::new(0));
        let samples = Arc::new(AtomicU64::new(0));
        let thread = target.map(|t| {
            let (active, stop, max, samples) = (
                Arc::clone(&active),
                Arc::clone(&stop),
                Arc::clone(&max),
                Arc::clone(&samples),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if active.load(Ordering::Relaxed) {
                        if let Some(v) = in_flight(&t) {
                            max.fetch_max(v, Ordering::Relaxed);
                            samples.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        });
        Sampler {
            active,
            stop,
            max,
            samples,
            thread,
        }
    }

    fn finish(mut self) -> Option<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        let t = self.thread.take()?;
        let _ = t.join();
        Some((
            self.max.load(Ordering::Relaxed),
            self.samples.load(Ordering::Relaxed),
        ))
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

struct Summary {
    ok: usize,
    errors: usize,
    per_s: f64,
    p50: u64,
    p90: u64,
    p99: u64,
    max: u64,
    mean: u64,
}

fn summarize(mut lat: Vec<u64>, errors: usize, elapsed: Duration) -> Summary {
    lat.sort_unstable();
    let ok = lat.len();
    let secs = elapsed.as_secs_f64();
    Summary {
        ok,
        errors,
        per_s: if secs > 0.0 { ok as f64 / secs } else { 0.0 },
        p50: percentile(&lat, 50.0),
        p90: percentile(&lat, 90.0),
        p99: percentile(&lat, 99.0),
        max: lat.last().copied().unwrap_or(0),
        mean: if ok == 0 {
            0
        } else {
            lat.iter().sum::<u64>() / ok as u64
        },
    }
}

fn run(o: &Options) -> Result<bool, String> {
    let deadline = Instant::now() + o.time_limit;
    // Warm-up (connections opened, the tunnel client polling; not kept), then the rounds.
    let mut schedule = Vec::new();
    let mut next_id: i64 = 1;
    let mut step = |target, count, measured, next_id: &mut i64| {
        schedule.push(Step {
            target,
            count,
            first_id: *next_id,
            next: AtomicUsize::new(0),
            measured,
        });
        *next_id += count as i64;
    };
    let floor = match o.floor {
        true => Some((start_floor_server()?, direct_answer_len(&o.direct)?)),
        false => None,
    };
    step(0, o.warmup, false, &mut next_id);
    step(1, o.warmup, false, &mut next_id);
    if floor.is_some() {
        step(2, o.warmup, false, &mut next_id);
    }
    let per_round = o.requests.div_ceil(o.rounds);
    for _ in 0..o.rounds {
        step(0, per_round, true, &mut next_id);
        step(1, per_round, true, &mut next_id);
        if floor.is_some() {
            step(2, per_round, true, &mut next_id);
        }
    }
    let sampler = Sampler::start(o.metrics.clone());
    let [direct, tunnel, floor_phase] =
        run_schedule(o, schedule, deadline, &sampler, floor.clone());
    let in_flight = sampler.finish();
    let truncated = Instant::now() >= deadline;
    let d = summarize(direct.latencies_ns, direct.errors, direct.elapsed);
    let t = summarize(tunnel.latencies_ns, tunnel.errors, tunnel.elapsed);
    let f = floor.as_ref().map(|_| {
        summarize(
            floor_phase.latencies_ns.clone(),
            floor_phase.errors,
            floor_phase.elapsed,
        )
    });
    let tool = match o.slow_ms {
        Some(ms) => format!("slow {ms} ms"),
        None => "echo".into(),
    };
    println!(
        "[{}] tools/call {tool}, {} requests per target in {} rounds, {} in flight{}",
        o.label,
        o.requests.div_ceil(o.rounds) * o.rounds,
        o.rounds,
        o.concurrency,
        if truncated {
            " (STOPPED AT THE TIME LIMIT)"
        } else {
            ""
        }
    );
    println!(
        "  {:<7} {:>7} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "target", "ok", "errors", "cmds/s", "p50 us", "p90 us", "p99 us", "max us", "mean us"
    );
    for (name, s) in [
        ("direct", Some(&d)),
        ("tunnel", Some(&t)),
        ("floor", f.as_ref()),
    ] {
        let Some(s) = s else { continue };
        println!(
            "  {:<7} {:>7} {:>6} {:>10.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
            name,
            s.ok,
            s.errors,
            s.per_s,
            us(s.p50),
            us(s.p90),
            us(s.p99),
            us(s.max),
            us(s.mean)
        );
    }
    let added = |a: u64, b: u64| (a as f64 - b as f64) / 1000.0;
    println!(
        "  added by the tunnel path: p50 {:+.0} us, p90 {:+.0} us, p99 {:+.0} us, mean {:+.0} us",
        added(t.p50, d.p50),
        added(t.p90, d.p90),
        added(t.p99, d.p99),
        added(t.mean, d.mean)
    );
    let over_floor = |added_ns: f64, floor_ns: u64| {
        if floor_ns == 0 {
            "-".to_owned()
        } else {
            format!("{:.2}", added_ns / floor_ns as f64)
        }
    };
    if let (Some(f), Some((_, answer_len))) = (&f, &floor) {
        println!(
            "  floor (the path's 3 added loopback exchanges, made directly; MCP answer {answer_len} bytes): \
             p50 {:.0} us, p99 {:.0} us; added / floor: p50 {}x, p99 {}x",
            us(f.p50),
            us(f.p99),
            over_floor(t.p50 as f64 - d.p50 as f64, f.p50),
            over_floor(t.p99 as f64 - d.p99 as f64, f.p99)
        );
    }
    if let Some((max, samples)) = in_flight {
        println!(
            "  tunnel client commands in flight: at most {max} ({samples} samples of /metrics)"
        );
    }
    for (name, p) in [
        ("direct", &direct.first_error),
        ("tunnel", &tunnel.first_error),
        ("floor", &floor_phase.first_error),
    ] {
        if let Some(e) = p {
            println!("  first {name} error: {e}");
        }
    }
    // One line for scripts.
    println!(
        "RESULT label={} concurrency={} direct_ok={} direct_errors={} direct_per_s={:.0} direct_p50_us={:.0} direct_p99_us={:.0} tunnel_ok={} tunnel_errors={} tunnel_per_s={:.0} tunnel_p50_us={:.0} tunnel_p99_us={:.0} added_p50_us={:.0} added_p99_us={:.0} floor_p50_us={} floor_p99_us={} added_over_floor_p50={} in_flight_max={} truncated={}",
        o.label,
        o.concurrency,
        d.ok,
        d.errors,
        d.per_s,
        us(d.p50),
        us(d.p99),
        t.ok,
        t.errors,
        t.per_s,
        us(t.p50),
        us(t.p99),
        added(t.p50, d.p50),
        added(t.p99, d.p99),
        f.as_ref()
            .map_or_else(|| "-".to_owned(), |f| format!("{:.0}", us(f.p50))),
        f.as_ref()
            .map_or_else(|| "-".to_owned(), |f| format!("{:.0}", us(f.p99))),
        f.as_ref().map_or_else(
            || "-".to_owned(),
            |f| over_floor(t.p50 as f64 - d.p50 as f64, f.p50)
        ),
        in_flight.map_or_else(|| "-".to_owned(), |(m, _)| m.to_string()),
        truncated
    );
    Ok(d.errors == 0 && t.errors == 0 && floor_phase.errors == 0 && !truncated)
}

fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("tunnel_load: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("tunnel_load: {e}");
            ExitCode::FAILURE
        }
    }
}

//! One-line logs (text or JSON) with secrets redacted before anything is written.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use super::activity::{Feed, LogRecord};

/// A log level, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Details for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Something went wrong and was handled.
    Warn,
    /// Something went wrong and was not.
    Error,
}

impl Level {
    /// The level's name as written in logs and accepted by `--log.level`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }

    fn from_u8(n: u8) -> Level {
        match n {
            0 => Level::Debug,
            1 => Level::Info,
            2 => Level::Warn,
            _ => Level::Error,
        }
    }

    /// Parses `debug`, `info`, `warn` (or `warning`) and `error`, in any case.
    pub fn parse(s: &str) -> Option<Level> {
        match s.to_ascii_lowercase().as_str() {
            "debug" => Some(Level::Debug),
            "info" => Some(Level::Info),
            "warn" | "warning" => Some(Level::Warn),
            "error" => Some(Level::Error),
            _ => None,
        }
    }
}

/// Where and how log lines go.
pub struct Logger {
    /// The [`Level`] as a number, changeable while the logger is shared.
    level: AtomicU8,
    json: bool,
    secrets: RwLock<Vec<String>>,
    out: Mutex<Box<dyn Write + Send>>,
    /// The newest lines, for an operator's page (when asked for).
    recent: Option<Feed<LogRecord>>,
}

impl std::fmt::Debug for Logger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logger")
            .field("level", &self.level())
            .field("json", &self.json)
            .field("secrets", &self.secrets_read().len())
            .finish_non_exhaustive()
    }
}

/// The shortest secret that is redacted by value (shorter strings would redact ordinary words).
const MIN_SECRET_LEN: usize = 4;

impl Logger {
    /// A logger writing to `out`; every string in `secrets` is replaced by `[redacted]`.
    pub fn new(level: Level, json: bool, secrets: Vec<String>, out: Box<dyn Write + Send>) -> Self {
        let secrets = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        Logger {
            level: AtomicU8::new(level as u8),
            json,
            secrets: RwLock::new(secrets),
            out: Mutex::new(out),
            recent: None,
        }
    }

    /// Keeps the newest `capacity` lines (redacted, as written) in a [`Feed`] besides writing
    /// them.
    #[must_use]
    pub fn keeping_recent(mut self, capacity: usize) -> Self {
        self.recent = Some(Feed::new(capacity));
        self
    }

    /// The newest lines, when [`keeping_recent`](Self::keeping_recent) asked for them.
    pub fn recent(&self) -> Option<&Feed<LogRecord>> {
        self.recent.as_ref()
    }

    /// A logger writing to standard error.
    pub fn stderr(level: Level, json: bool, secrets: Vec<String>) -> Self {
        Self::new(level, json, secrets, Box::new(std::io::stderr()))
    }

    /// Adds a secret learnt after start-up (e.g. a fetched token): redacted from now on.
    pub fn add_secret(&self, secret: &str) {
        if secret.len() >= MIN_SECRET_LEN {
            self.secrets
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .push(secret.to_owned());
        }
    }

    fn secrets_read(&self) -> std::sync::RwLockReadGuard<'_, Vec<String>> {
        self.secrets.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lowest level written.
    pub fn level(&self) -> Level {
        Level::from_u8(self.level.load(Ordering::Relaxed))
    }

    /// Changes the lowest level written, from now on (a running tunnel's log level); returns
    /// the previous one.
    pub fn set_level(&self, level: Level) -> Level {
        Level::from_u8(self.level.swap(level as u8, Ordering::Relaxed))
    }

    /// Whether lines at `level` are written.
    pub fn enabled(&self, level: Level) -> bool {
        level >= self.level()
    }

    /// Writes one line: the message and its fields, redacted.
    pub fn log(&self, level: Level, msg: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
        if !self.enabled(level) {
            return;
        }
        let now = SystemTime::now();
        let ts = rfc3339(now);
        let msg = self.redact(msg);
        let fields: Vec<(&str, String)> = fields
            .iter()
            .map(|(k, v)| (*k, self.redact(&v.to_string())))
            .collect();
        let mut line = String::new();
        if self.json {
            let mut obj = serde_json::Map::new();
            obj.insert("ts".into(), ts.into());
            obj.insert("level".into(), level.as_str().into());
            obj.insert("msg".into(), msg.as_str().into());
            for (k, v) in &fields {
                obj.insert((*k).to_owned(), v.as_str().into());
            }
            line.push_str(&serde_json::Value::Object(obj).to_string());
        } else {
            let _ = write!(
                line,
                "{ts} {:<5} {msg}",
                level.as_str().to_ascii_uppercase(),
            );
            for (k, v) in &fields {
                if v.is_empty() || v.contains([' ', '"', '=', '\t']) {
                    let _ = write!(line, " {k}={v:?}");
                } else {
                    let _ = write!(line, " {k}={v}");
                }
            }
        }
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
        drop(out);
        if let Some(recent) = &self.recent {
            let at_unix_ms = now
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            recent.push(LogRecord {
                at_unix_ms,
                level,
                msg,
                fields: fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            });
        }
    }

    /// `text` with every configured secret and every bearer token replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        let mut s = text.replace(['\n', '\r'], " ");
        for secret in self.secrets_read().iter() {
            if s.contains(secret.as_str()) {
                s = s.replace(secret.as_str(), "[redacted]");
            }
        }
        redact_bearer(&s)
    }
}

/// Replaces the token after each `Bearer ` (any case) with `[redacted]`.
fn redact_bearer(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(pos) = lower.get(i..).and_then(|rest| rest.find("bearer ")) {
        let start = i + pos + "bearer ".len();
        out.push_str(s.get(i..start).unwrap_or_default());
        let end = s
            .get(start..)
            .and_then(|rest| rest.find(|c: char| c.is_whitespace() || c == '"' || c == ','))
            .map_or(s.len(), |e| start + e);
        if end > start {
            out.push_str("[redacted]");
        }
        i = end;
    }
    out.push_str(s.get(i..).unwrap_or_default());
    out
}

/// `t` as an RFC 3339 UTC timestamp with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Howard Hinnant's method).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// A log output the test can read back.
    #[derive(Clone, Default)]
    pub(crate) struct Sink(pub(crate) Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_level_changes_while_the_logger_is_shared() {
        let sink = Sink::default();
        let log = Arc::new(Logger::new(
            Level::Info,
            false,
            Vec::new(),
            Box::new(sink.clone()),
        ));
        log.log(Level::Debug, "hidden", &[]);
        let shared = Arc::clone(&log);
        assert_eq!(shared.set_level(Level::Debug), Level::Info);
        log.log(Level::Debug, "shown", &[]);
        assert_eq!(log.set_level(Level::Error), Level::Debug);
        log.log(Level::Warn, "hidden too", &[]);
        assert_eq!(log.level(), Level::Error);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("hidden") && text.contains("shown"), "{text}");
    }

    #[test]
    fn secrets_and_bearer_tokens_never_reach_the_output() {
        let sink = Sink::default();
        let log = Logger::new(
            Level::Info,
            false,
            vec!["sk-very-secret".into()],
            Box::new(sink.clone()),
        );
        log.log(
            Level::Warn,
            "child said: key sk-very-secret and Authorization: Bearer tok123, ok",
            &[("detail", &"bearer abc")],
        );
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("sk-very-secret"), "{text}");
        assert!(!text.contains("tok123") && !text.contains("abc"), "{text}");
        assert!(text.contains("[redacted]"));
    }

    #[test]
    fn the_recent_lines_are_the_written_ones_redacted_and_bounded() {
        let sink = Sink::default();
        let log = Logger::new(
            Level::Info,
            true,
            vec!["sk-live-1234".into()],
            Box::new(sink.clone()),
        )
        .keeping_recent(2);
        log.log(Level::Debug, "below the level", &[]);
        log.log(Level::Info, "one", &[("key", &"sk-live-1234")]);
        log.log(Level::Warn, "two", &[("auth", &"Bearer abc.def")]);
        log.log(Level::Error, "three", &[]);
        let recent = log.recent().unwrap().after(0);
        type Line<'a> = (Level, &'a str, Vec<(String, String)>);
        let view: Vec<Line<'_>> = recent
            .items
            .iter()
            .map(|(_, l)| (l.level, l.msg.as_str(), l.fields.clone()))
            .collect();
        assert_eq!(
            view,
            [
                (
                    Level::Warn,
                    "two",
                    vec![("auth".to_owned(), "Bearer [redacted]".to_owned())]
                ),
                (Level::Error, "three", vec![]),
            ]
        );
        assert_eq!(recent.missed, 1);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(!text.contains("sk-live-1234"), "{text}");
        assert!(Logger::stderr(Level::Info, false, vec![])
            .recent()
            .is_none());
    }

    #[test]
    fn a_secret_added_after_start_up_is_redacted_from_then_on() {
        let sink = Sink::default();
        let log = Logger::new(Level::Info, false, vec![], Box::new(sink.clone()));
        log.add_secret("cf-runtime-token-1");
        log.log(
            Level::Info,
            "child said cf-runtime-token-1",
            &[("t", &"cf-runtime-token-1")],
        );
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert!(
            !text.contains("cf-runtime-token-1") && text.contains("[redacted]"),
            "{text}"
        );
    }

    #[test]
    fn lines_below_the_level_are_dropped_and_json_is_one_object_per_line() {
        let sink = Sink::default();
        let log = Logger::new(Level::Info, true, vec![], Box::new(sink.clone()));
        log.log(Level::Debug, "hidden", &[]);
        log.log(Level::Info, "shown", &[("request_id", &"r1")]);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1);
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["msg"], "shown");
        assert_eq!(v["request_id"], "r1");
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_767_225_600_123);
        assert_eq!(rfc3339(t), "2026-01-01T00:00:00.123Z");
    }
}

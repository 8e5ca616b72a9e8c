//! The CLI's host: input requests asked on the terminal (or answered from `--input` /
//! `--decline-input`), progress on stderr when it is a terminal, and what the era detection
//! and `tools/list` reported.
//!
//! Prompts go to stderr and answers are read from stdin, so stdout holds only results. The
//! core checks every answer against the request (the form's schema, the URL consented to);
//! the form prompt uses the same check ([`RequestedSchema::validate`]) before sending.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex, PoisonError};

use mcpwire_core::mcp::elicitation::{
    FormElicitation, PropertyKind, PropertySchema, RequestedSchema, SensitiveCategory,
    StringFormat, UrlConsent, UrlElicitation, UrlWarning,
};
use mcpwire_core::mcp::{
    ElicitAnswer, ElicitationRequest, Era, EraEvidence, Event, InputAnswer, InputRequest,
    InputRequestEvent, OpId, RetryReason,
};
use serde_json::{Map, Value};

use mcpwire::mcp::Host;

/// How many times a form (or one field) is asked again after a bad answer.
const MAX_ATTEMPTS: usize = 3;

/// What the host tells the command.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// The era was detected by falling back from the modern one.
    pub fell_back: bool,
    /// Input requests nobody could answer (their keys).
    pub unanswered: Vec<String>,
    /// A progress line is on stderr.
    pub progress_shown: bool,
}

pub(crate) struct CliHost {
    shared: Arc<Mutex<Shared>>,
    inputs: BTreeMap<String, Value>,
    decline: bool,
    interactive: bool,
    progress_tty: bool,
}

impl CliHost {
    pub(crate) fn new(
        shared: Arc<Mutex<Shared>>,
        inputs: BTreeMap<String, Value>,
        decline: bool,
        interactive: bool,
        progress_tty: bool,
    ) -> Self {
        CliHost {
            shared,
            inputs,
            decline,
            interactive,
            progress_tty,
        }
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn unanswered(&self, key: &str) -> ElicitAnswer {
        self.shared().unanswered.push(key.to_owned());
        ElicitAnswer::Cancel
    }

    fn form(&self, key: &str, form: &FormElicitation) -> ElicitAnswer {
        eprintln!("The server asks for input '{key}': {}", form.message);
        if let Some(warning) = suspicion_warning(form) {
            eprintln!("{warning}");
        }
        if let Some(given) = self.inputs.get(key) {
            return match given {
                Value::Object(m) => ElicitAnswer::Accept(m.clone()),
                Value::String(s) if s == "decline" => ElicitAnswer::Decline,
                Value::String(s) if s == "cancel" => ElicitAnswer::Cancel,
                // Not an object: the core refuses it with the reason.
                other => ElicitAnswer::Accept(
                    [("value".to_owned(), other.clone())].into_iter().collect(),
                ),
            };
        }
        if self.decline {
            return ElicitAnswer::Decline;
        }
        if !self.interactive {
            return self.unanswered(key);
        }
        ask_form(&form.schema)
    }

    fn url(&self, key: &str, u: &UrlElicitation) -> ElicitAnswer {
        eprintln!(
            "The server asks you to open a URL yourself (input '{key}'): {}",
            u.message
        );
        eprintln!("  URL:  {}", u.url);
        eprintln!("  host: {}", u.host);
        for w in &u.warnings {
            eprintln!("  WARNING: {}", url_warning(*w));
        }
        eprintln!("  (mcpwire never opens or fetches it)");
        if let Some(given) = self.inputs.get(key) {
            return match given {
                Value::Bool(true) => ElicitAnswer::AcceptUrl(UrlConsent::granted_for(&u.url)),
                Value::String(s) if s == "accept" => {
                    ElicitAnswer::AcceptUrl(UrlConsent::granted_for(&u.url))
                }
                Value::String(s) if s == "cancel" => ElicitAnswer::Cancel,
                _ => ElicitAnswer::Decline,
            };
        }
        if self.decline {
            return ElicitAnswer::Decline;
        }
        if !self.interactive {
            return self.unanswered(key);
        }
        match prompt("Do you consent to open this URL? [y/N/c=cancel] ").as_deref() {
            Some("y" | "Y" | "yes") => ElicitAnswer::AcceptUrl(UrlConsent::granted_for(&u.url)),
            Some("c" | "cancel") | None => ElicitAnswer::Cancel,
            Some(_) => ElicitAnswer::Decline,
        }
    }
}

impl Host for CliHost {
    fn on_input_request(&mut self, _op: OpId, request: &InputRequestEvent) -> InputAnswer {
        clear_progress(&self.shared);
        let key = request.key.as_str();
        match &request.request {
            InputRequest::Elicitation(ElicitationRequest::Form(form)) => {
                InputAnswer::Elicitation(self.form(key, form))
            }
            InputRequest::Elicitation(ElicitationRequest::Url(u)) => {
                InputAnswer::Elicitation(self.url(key, u))
            }
            // Neither sampling nor roots is declared; the core refuses this answer.
            _ => InputAnswer::Elicitation(ElicitAnswer::Decline),
        }
    }

    fn on_progress(&mut self, _op: OpId, progress: f64, total: Option<f64>, message: Option<&str>) {
        if !self.progress_tty {
            return;
        }
        let amount = match total {
            Some(t) if t > 0.0 => format!("{progress}/{t} ({:.0}%)", progress / t * 100.0),
            _ => format!("{progress}"),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2Kprogress: {amount}{}",
            message.map(|m| format!(" {m}")).unwrap_or_default()
        );
        let _ = err.flush();
        self.shared().progress_shown = true;
    }

    fn on_event(&mut self, event: &Event) {
        match event {
            Event::Retrying {
                reason: RetryReason::LegacyFallback,
                ..
            } => self.shared().fell_back = true,
            Event::EraDetected {
                era: Era::Legacy,
                evidence:
                    EraEvidence::HttpStatus(_)
                    | EraEvidence::ProbeError(_)
                    | EraEvidence::ProbeTimedOut
                    | EraEvidence::NotADiscoverResult,
                ..
            } => self.shared().fell_back = true,
            Event::ToolExcluded { tool, reason } => {
                eprintln!("mcpwire: tool '{tool}' excluded: {reason}");
            }
            _ => {}
        }
    }
}

/// Ends the progress line, if one is shown.
pub(super) fn clear_progress(shared: &Mutex<Shared>) {
    let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
    if s.progress_shown {
        eprint!("\r\x1b[2K");
        s.progress_shown = false;
    }
}

/// Asks `question` on stderr and reads one line from stdin (`None` at its end).
fn prompt(question: &str) -> Option<String> {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
    }
}

/// A y/N question: only `y`/`yes` says yes.
pub(super) fn confirm(question: &str) -> bool {
    matches!(
        prompt(question).as_deref().map(str::trim),
        Some("y" | "Y" | "yes" | "YES" | "Yes")
    )
}

fn url_warning(w: UrlWarning) -> &'static str {
    match w {
        UrlWarning::NotHttps => "the URL is not https",
        UrlWarning::InternationalizedHost => {
            "the host has international characters: check it is the site you expect"
        }
        UrlWarning::UserInfo => "the URL has a user@ part before the host (a spoofing trick)",
        _ => "the URL looks unusual",
    }
}

/// The warning shown above a form that looks like it asks for secrets or payment data.
fn suspicion_warning(form: &FormElicitation) -> Option<String> {
    let first = form.suspicious.first()?;
    let what = match first.category {
        SensitiveCategory::Password => "a password",
        SensitiveCategory::ApiKey => "an API key",
        SensitiveCategory::Token => "a token",
        SensitiveCategory::Payment => "payment data",
        _ => "a secret",
    };
    let field = first
        .field
        .as_deref()
        .map(|f| format!(" (field '{f}')"))
        .unwrap_or_default();
    Some(format!(
        "WARNING: this form seems to ask for {what}{field}. Servers must not collect secrets or payment data through a form; decline unless you trust it."
    ))
}

/// The type and constraints of a field, in words: `integer from 0 to 150`.
fn kind_words(p: &PropertySchema) -> String {
    let range = |what: &str, min: Option<String>, max: Option<String>| match (min, max) {
        (Some(a), Some(b)) => format!("{what} from {a} to {b}"),
        (Some(a), None) => format!("{what}, at least {a}"),
        (None, Some(b)) => format!("{what}, at most {b}"),
        (None, None) => what.to_owned(),
    };
    match &p.kind {
        PropertyKind::String {
            format,
            min_length,
            max_length,
        } => {
            let what = match format {
                Some(StringFormat::Email) => "text, an email address".to_owned(),
                Some(StringFormat::Uri) => "text, a URI".to_owned(),
                Some(StringFormat::Date) => "text, a date YYYY-MM-DD".to_owned(),
                Some(StringFormat::DateTime) => "text, a date-time (RFC 3339)".to_owned(),
                Some(StringFormat::Other(f)) => format!("text, {f}"),
                _ => "text".to_owned(),
            };
            let chars = |n: &u64| format!("{n} characters");
            range(
                &what,
                min_length.as_ref().map(chars),
                max_length.as_ref().map(chars),
            )
        }
        PropertyKind::Number {
            integer,
            minimum,
            maximum,
        } => range(
            if *integer { "integer" } else { "number" },
            minimum.map(|m| m.to_string()),
            maximum.map(|m| m.to_string()),
        ),
        PropertyKind::Boolean => "yes/no".into(),
        PropertyKind::SingleSelect { .. } => "one of the options, by number or value".into(),
        PropertyKind::MultiSelect {
            min_items,
            max_items,
            ..
        } => range(
            "options, comma-separated",
            min_items.map(|m| m.to_string()),
            max_items.map(|m| m.to_string()),
        ),
        _ => "JSON".into(),
    }
}

/// What a field answer was: a value, nothing (skip), or the user's decision to stop.
enum Field {
    Value(Value),
    Skip,
    Stop(ElicitAnswer),
}

/// Asks the form field by field, then validates the whole content with the core's rules;
/// `:decline` or `:cancel` at any prompt ends it.
fn ask_form(schema: &RequestedSchema) -> ElicitAnswer {
    eprintln!("  (answer each field; an empty answer takes the default; type :decline or :cancel to stop)");
    for _ in 0..MAX_ATTEMPTS {
        let mut content = Map::new();
        for (name, prop) in &schema.properties {
            let required = schema.required.iter().any(|r| r == name);
            match ask_field(schema, name, prop, required) {
                Field::Value(v) => {
                    content.insert(name.clone(), v);
                }
                Field::Skip => {}
                Field::Stop(answer) => return answer,
            }
        }
        match schema.validate(&content) {
            Ok(()) => return ElicitAnswer::Accept(content),
            Err(e) => eprintln!("  {e}; please answer the form again"),
        }
    }
    eprintln!("  too many invalid answers: the request is cancelled");
    ElicitAnswer::Cancel
}

/// Asks one field until its answer fits the field's type and constraints (checked by the
/// core's rules, [`RequestedSchema::validate_field`]), at most [`MAX_ATTEMPTS`] times.
fn ask_field(schema: &RequestedSchema, name: &str, prop: &PropertySchema, required: bool) -> Field {
    let label = prop.title.as_deref().unwrap_or(name);
    let mut head = format!("{label} [{}", kind_words(prop));
    if required {
        head.push_str(", required");
    }
    if let Some(d) = &prop.default {
        head.push_str(&format!(", default {d}"));
    }
    head.push(']');
    if let Some(d) = &prop.description {
        head.push_str(&format!(": {d}"));
    }
    eprintln!("{head}");
    if let PropertyKind::SingleSelect { options } | PropertyKind::MultiSelect { options, .. } =
        &prop.kind
    {
        for (i, o) in options.iter().enumerate() {
            let title = o
                .title
                .as_deref()
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            eprintln!("  {}. {}{title}", i + 1, o.value);
        }
    }
    for _ in 0..MAX_ATTEMPTS {
        let Some(line) = prompt(&format!("{name}> ")) else {
            return Field::Stop(ElicitAnswer::Cancel);
        };
        let line = line.trim();
        match line {
            ":decline" => return Field::Stop(ElicitAnswer::Decline),
            ":cancel" => return Field::Stop(ElicitAnswer::Cancel),
            "" => match &prop.default {
                Some(d) => return Field::Value(d.clone()),
                None if required => {
                    eprintln!("  this field is required");
                    continue;
                }
                None => return Field::Skip,
            },
            _ => {}
        }
        match parse_field(&prop.kind, line) {
            Ok(v) => match schema.validate_field(name, &v) {
                Ok(()) => return Field::Value(v),
                Err(e) => eprintln!("  {e}"),
            },
            Err(why) => eprintln!("  {why}"),
        }
    }
    eprintln!("  too many invalid answers: the request is cancelled");
    Field::Stop(ElicitAnswer::Cancel)
}

/// Reads one typed answer by the property's kind (the constraints are checked afterwards,
/// on the whole form).
fn parse_field(kind: &PropertyKind, line: &str) -> Result<Value, &'static str> {
    let option = |options: &[mcpwire_core::mcp::elicitation::EnumOption], s: &str| {
        let s = s.trim();
        s.parse::<usize>()
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| options.get(i))
            .map_or_else(|| s.to_owned(), |o| o.value.clone())
    };
    match kind {
        PropertyKind::String { .. } => Ok(Value::String(line.to_owned())),
        PropertyKind::Number { integer: true, .. } => line
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "expected a whole number"),
        PropertyKind::Number { .. } => line
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or("expected a number"),
        PropertyKind::Boolean => match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("expected yes or no"),
        },
        PropertyKind::SingleSelect { options } => Ok(Value::String(option(options, line))),
        PropertyKind::MultiSelect { options, .. } => Ok(Value::Array(
            line.split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| Value::String(option(options, s)))
                .collect(),
        )),
        _ => Ok(serde_json::from_str(line).unwrap_or_else(|_| Value::String(line.to_owned()))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn field_answers_are_read_by_the_schema_type() {
        let schema = RequestedSchema::parse(
            r#"{"type":"object","properties":{
                "n":{"type":"integer"},"x":{"type":"number"},"b":{"type":"boolean"},
                "c":{"type":"string","enum":["red","green"]},
                "m":{"type":"array","items":{"type":"string","enum":["a","b","c"]}}}}"#,
        )
        .unwrap();
        let kind = |n: &str| &schema.property(n).unwrap().kind;
        assert_eq!(parse_field(kind("n"), "42").unwrap(), Value::from(42));
        assert!(parse_field(kind("n"), "4.2").is_err());
        assert_eq!(parse_field(kind("x"), "4.5").unwrap(), Value::from(4.5));
        assert_eq!(parse_field(kind("b"), "yes").unwrap(), Value::Bool(true));
        assert!(parse_field(kind("b"), "maybe").is_err());
        assert_eq!(parse_field(kind("c"), "2").unwrap(), Value::from("green"));
        assert_eq!(parse_field(kind("c"), "red").unwrap(), Value::from("red"));
        assert_eq!(
            parse_field(kind("m"), "1, c").unwrap(),
            serde_json::json!(["a", "c"])
        );
    }

    #[test]
    fn a_form_asking_for_a_password_carries_a_warning() {
        let req = ElicitationRequest::parse(
            r#"{"mode":"form","message":"Log in","requestedSchema":{"type":"object","properties":{"password":{"type":"string"}}}}"#,
        )
        .unwrap();
        let ElicitationRequest::Form(form) = req else {
            panic!("form expected")
        };
        let w = suspicion_warning(&form).unwrap();
        assert!(w.starts_with("WARNING") && w.contains("password"), "{w}");
    }
}

//! What to show for a server's elicitation (the guide's "Responding to elicitation"): which
//! server asks and why, the fields of a form, the warning when a form seems to ask for
//! passwords, keys, tokens or payment data (core's check, [`FormElicitation::suspicious`]),
//! and for URL mode the full URL, which needs the person's explicit consent and is never
//! opened by the client on its own.
//!
//! The answer is checked by the client's own validation ([`ElicitationRequest::answer`]:
//! [`RequestedSchema::validate`] for a form, the consent's URL for URL mode) before
//! [`ElicitationPrompt::check`] hands it back for the client: nothing is validated twice in
//! two ways.

use std::fmt;

use serde_json::{Map, Value};

use super::shown;
use crate::host::ServerId;
use crate::mcp::elicitation::{
    AnswerError, ElicitAnswer, ElicitationRequest, FormElicitation, PropertyKind, PropertySchema,
    RequestedSchema, SensitiveCategory, StringFormat, Suspicion, SuspicionLocation, UrlElicitation,
    UrlWarning,
};

/// An elicitation, as the person should see it.
#[derive(Clone, Debug, PartialEq)]
pub struct ElicitationPrompt {
    server: ServerId,
    request: ElicitationRequest,
}

/// One field of a form, as shown.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Field<'a> {
    /// The property name (the key of the answer).
    pub name: &'a str,
    /// Its schema: title, description, default, type and constraints.
    pub schema: &'a PropertySchema,
    /// Whether an answer must hold it.
    pub required: bool,
}

impl ElicitationPrompt {
    /// The prompt for `request`, which `server` sent.
    pub fn new(server: ServerId, request: ElicitationRequest) -> ElicitationPrompt {
        ElicitationPrompt { server, request }
    }

    /// The server that asks.
    pub fn server(&self) -> &ServerId {
        &self.server
    }

    /// Why it asks (the request's `message`).
    pub fn message(&self) -> &str {
        match &self.request {
            ElicitationRequest::Form(f) => &f.message,
            ElicitationRequest::Url(u) => &u.message,
        }
    }

    /// The request.
    pub fn request(&self) -> &ElicitationRequest {
        &self.request
    }

    /// The form's fields, in the server's order (empty in URL mode).
    pub fn fields(&self) -> Vec<Field<'_>> {
        let ElicitationRequest::Form(form) = &self.request else {
            return Vec::new();
        };
        form.schema
            .properties
            .iter()
            .map(|(name, schema)| Field {
                name,
                schema,
                required: form.schema.required.iter().any(|r| r == name),
            })
            .collect()
    }

    /// Why the form looks like it asks for sensitive data (empty when it does not, and in URL
    /// mode).
    pub fn sensitive(&self) -> &[Suspicion] {
        match &self.request {
            ElicitationRequest::Form(FormElicitation { suspicious, .. }) => suspicious,
            ElicitationRequest::Url(_) => &[],
        }
    }

    /// The warning to show when the form looks like it asks for sensitive data.
    pub fn sensitive_warning(&self) -> Option<String> {
        let found = self.sensitive();
        if found.is_empty() {
            return None;
        }
        // One entry per field (or the message) and kind of data, with every place it showed,
        // in the order core found them.
        let mut groups: Vec<(Option<&str>, SensitiveCategory, Vec<String>)> = Vec::new();
        for s in found {
            let field = match s.location {
                SuspicionLocation::Message => None,
                _ => s.field.as_deref(),
            };
            let place = match field {
                None => format!("\"{}\" in the message", s.keyword),
                Some(_) => format!("\"{}\" in {}", s.keyword, location(s.location)),
            };
            match groups
                .iter_mut()
                .find(|(f, c, _)| *f == field && *c == s.category)
            {
                Some((_, _, places)) => places.push(place),
                None => groups.push((field, s.category, vec![place])),
            }
        }
        let what: Vec<String> = groups
            .iter()
            .map(|(field, cat, places)| {
                let at = match field {
                    Some(f) => format!(" in field {:?}", shown::inline(f)),
                    None => String::new(),
                };
                format!("{}{at} ({})", category(*cat), places.join(", "))
            })
            .collect();
        Some(format!(
            "WARNING: this form seems to ask for sensitive data: {}. A server should ask for \
             passwords, keys, tokens or payment details through URL mode (a page of its own), \
             not in a form the client sees; {} may not be what it says. Do not type a secret \
             here unless you are sure.",
            what.join("; "),
            self.server
        ))
    }

    /// The URL of a URL mode elicitation (`None` for a form).
    pub fn url(&self) -> Option<&UrlElicitation> {
        match &self.request {
            ElicitationRequest::Url(u) => Some(u),
            ElicitationRequest::Form(_) => None,
        }
    }

    /// Whether accepting needs the person's explicit consent to open a URL.
    pub fn consent_needed(&self) -> bool {
        self.url().is_some_and(|u| u.requires_consent)
    }

    /// The form content with the schema's defaults filled in where the person left a field
    /// out ([`RequestedSchema::with_defaults`]).
    pub fn with_defaults(&self, content: Map<String, Value>) -> Map<String, Value> {
        match &self.request {
            ElicitationRequest::Form(f) => f.schema.with_defaults(content),
            ElicitationRequest::Url(_) => content,
        }
    }

    /// Checks one field's value as the person types it ([`RequestedSchema::validate_field`]),
    /// so a UI can ask again for that field alone.
    pub fn validate_field(&self, field: &str, value: &Value) -> Result<(), AnswerError> {
        match &self.request {
            ElicitationRequest::Form(f) => f.schema.validate_field(field, value),
            ElicitationRequest::Url(_) => Err(AnswerError::ContentForUrl),
        }
    }

    /// The person's answer, checked by the client's validation
    /// ([`ElicitationRequest::answer`]) and handed back for the client when it fits: form
    /// content against the schema, a URL consent against this very URL.
    pub fn check(&self, answer: ElicitAnswer) -> Result<ElicitAnswer, AnswerError> {
        self.request.answer(&answer)?;
        Ok(answer)
    }

    /// The schema of a form (`None` in URL mode).
    pub fn schema(&self) -> Option<&RequestedSchema> {
        match &self.request {
            ElicitationRequest::Form(f) => Some(&f.schema),
            ElicitationRequest::Url(_) => None,
        }
    }
}

fn category(c: SensitiveCategory) -> &'static str {
    match c {
        SensitiveCategory::Password => "a password",
        SensitiveCategory::ApiKey => "an API key",
        SensitiveCategory::Token => "an access token",
        SensitiveCategory::Payment => "payment details",
        _ => "a secret",
    }
}

fn location(l: SuspicionLocation) -> &'static str {
    match l {
        SuspicionLocation::Name => "its name",
        SuspicionLocation::Title => "its title",
        SuspicionLocation::Description => "its description",
        SuspicionLocation::Format => "its format",
        _ => "the message",
    }
}

fn kind(k: &PropertyKind) -> String {
    match k {
        PropertyKind::String {
            min_length,
            max_length,
            format,
        } => {
            let mut s = String::from("text");
            if let Some(f) = format {
                s.push_str(match f {
                    StringFormat::Email => ", an email address",
                    StringFormat::Uri => ", a URI",
                    StringFormat::Date => ", a date (YYYY-MM-DD)",
                    StringFormat::DateTime => ", a date and time (RFC 3339)",
                    _ => "",
                });
                if let StringFormat::Other(o) = f {
                    s.push_str(&format!(", format {}", shown::inline(o)));
                }
            }
            match (min_length, max_length) {
                (Some(a), Some(b)) => s.push_str(&format!(", {a} to {b} characters")),
                (Some(a), None) => s.push_str(&format!(", at least {a} characters")),
                (None, Some(b)) => s.push_str(&format!(", at most {b} characters")),
                (None, None) => {}
            }
            s
        }
        PropertyKind::Number {
            integer,
            minimum,
            maximum,
        } => {
            let mut s = String::from(if *integer {
                "a whole number"
            } else {
                "a number"
            });
            match (minimum, maximum) {
                (Some(a), Some(b)) => s.push_str(&format!(" from {a} to {b}")),
                (Some(a), None) => s.push_str(&format!(", at least {a}")),
                (None, Some(b)) => s.push_str(&format!(", at most {b}")),
                (None, None) => {}
            }
            s
        }
        PropertyKind::Boolean => "yes or no".to_owned(),
        PropertyKind::SingleSelect { options } => format!("one of {}", options_list(options)),
        PropertyKind::MultiSelect { options, .. } => {
            format!("any of {}", options_list(options))
        }
    }
}

fn options_list(options: &[crate::mcp::elicitation::EnumOption]) -> String {
    let shown: Vec<String> = options
        .iter()
        .map(|o| match &o.title {
            Some(t) => format!("{:?} ({})", o.value, shown::inline(t)),
            None => format!("{:?}", o.value),
        })
        .collect();
    shown.join(", ")
}

fn url_warning(w: &UrlWarning) -> &'static str {
    match w {
        UrlWarning::NotHttps => "it is not https",
        UrlWarning::InternationalizedHost => {
            "its host has international characters (it may imitate another)"
        }
        UrlWarning::UserInfo => "it has a user@ part before the host (a common spoofing trick)",
    }
}

/// The terminal rendering.
impl fmt::Display for ElicitationPrompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const IND: &str = "               ";
        match &self.request {
            ElicitationRequest::Form(form) => {
                writeln!(f, "The server {} asks you for information", self.server)?;
                writeln!(f, "  why:         {}", shown::block(&form.message, IND))?;
                writeln!(f, "  fields:")?;
                for field in self.fields() {
                    let s = field.schema;
                    let need = if field.required {
                        "required"
                    } else {
                        "optional"
                    };
                    write!(
                        f,
                        "    - {} ({need}; {})",
                        shown::inline(field.name),
                        kind(&s.kind)
                    )?;
                    if let Some(t) = &s.title {
                        write!(f, ": {}", shown::inline(t))?;
                    }
                    if let Some(d) = &s.description {
                        write!(f, " — {}", shown::inline(d))?;
                    }
                    if let Some(d) = &s.default {
                        write!(f, " [default {}]", shown::json(d))?;
                    }
                    writeln!(f)?;
                }
                if let Some(w) = self.sensitive_warning() {
                    writeln!(f, "  {w}")?;
                }
                write!(f, "  answer, decline, or cancel?")
            }
            ElicitationRequest::Url(u) => {
                writeln!(f, "The server {} asks you to open a web page", self.server)?;
                writeln!(f, "  why:         {}", shown::block(&u.message, IND))?;
                writeln!(f, "  URL:         {}", shown::inline(&u.url))?;
                writeln!(f, "  host:        {}", shown::inline(&u.host))?;
                for w in &u.warnings {
                    writeln!(f, "  WARNING:     {}", url_warning(w))?;
                }
                write!(
                    f,
                    "  Opening it needs your explicit consent; it is not opened unless you agree, \
                     and the server learns only whether you did. Open it, decline, or cancel?"
                )
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::mcp::elicitation::UrlConsent;
    use serde_json::json;

    fn prompt(params: &Value) -> ElicitationPrompt {
        let req = ElicitationRequest::parse(&params.to_string()).unwrap();
        ElicitationPrompt::new(ServerId::new("shop").unwrap(), req)
    }

    fn form() -> ElicitationPrompt {
        // Written as text: the server's order of the properties is what is shown.
        let params = r#"{"message": "Which size?", "requestedSchema": {"type": "object",
            "properties": {
                "size": {"type": "string", "enum": ["s", "m"], "title": "Size"},
                "count": {"type": "integer", "minimum": 1, "default": 1}
            }, "required": ["size"]}}"#;
        let req = ElicitationRequest::parse(params).unwrap();
        ElicitationPrompt::new(ServerId::new("shop").unwrap(), req)
    }

    #[test]
    fn the_prompt_names_the_server_its_reason_and_the_fields() {
        let p = form();
        assert_eq!(p.server().as_str(), "shop");
        assert_eq!(p.message(), "Which size?");
        let fields = p.fields();
        assert_eq!(fields.len(), 2);
        assert_eq!((fields[0].name, fields[0].required), ("size", true));
        assert_eq!((fields[1].name, fields[1].required), ("count", false));
        assert!(p.sensitive_warning().is_none());
        assert!(!p.consent_needed());
        let shown = p.to_string();
        assert!(
            shown.contains("The server shop asks you for information"),
            "{shown}"
        );
        assert!(shown.contains("Which size?"));
        assert!(
            shown.contains("size (required; one of \"s\", \"m\"): Size"),
            "{shown}"
        );
        assert!(
            shown.contains("count (optional; a whole number, at least 1) [default 1]"),
            "{shown}"
        );
    }

    #[test]
    fn answers_are_checked_by_the_clients_validation() {
        let p = form();
        let ok: Map<String, Value> = json!({"size": "m"}).as_object().unwrap().clone();
        let ok = p.with_defaults(ok);
        assert_eq!(ok.get("count"), Some(&json!(1)));
        assert_eq!(
            p.check(ElicitAnswer::Accept(ok.clone())),
            Ok(ElicitAnswer::Accept(ok))
        );
        let missing = json!({"count": 2}).as_object().unwrap().clone();
        assert_eq!(
            p.check(ElicitAnswer::Accept(missing)),
            Err(AnswerError::MissingRequired {
                field: "size".into()
            })
        );
        let bad = json!({"size": "xl"}).as_object().unwrap().clone();
        assert_eq!(
            p.check(ElicitAnswer::Accept(bad)),
            Err(AnswerError::NotAnOption {
                field: "size".into()
            })
        );
        assert!(p.validate_field("count", &json!(0)).is_err());
        assert!(p.validate_field("count", &json!(3)).is_ok());
        assert_eq!(p.check(ElicitAnswer::Decline), Ok(ElicitAnswer::Decline));
        assert_eq!(
            p.check(ElicitAnswer::AcceptUrl(UrlConsent::granted_for(
                "https://x"
            ))),
            Err(AnswerError::ConsentForForm)
        );
    }

    #[test]
    fn a_form_asking_for_secrets_carries_the_warning() {
        let p = prompt(&json!({
            "message": "Log in to continue",
            "requestedSchema": {"type": "object", "properties": {
                "user": {"type": "string"},
                "password": {"type": "string"}
            }}
        }));
        assert!(!p.sensitive().is_empty());
        let w = p.sensitive_warning().unwrap();
        assert!(w.contains("a password"), "{w}");
        assert!(w.contains("\"password\""), "{w}");
        assert!(w.contains("URL mode"), "{w}");
        assert!(p.to_string().contains(&w));
    }

    #[test]
    fn url_mode_shows_the_whole_url_and_needs_consent() {
        let url = format!(
            "https://pay.example.com/checkout?session={}",
            "a".repeat(3000)
        );
        let p = prompt(&json!({"mode": "url", "message": "Pay here", "url": url}));
        assert!(p.consent_needed());
        assert!(p.fields().is_empty());
        let shown = p.to_string();
        assert!(shown.contains(&url), "URL cut");
        assert!(shown.contains("host:        pay.example.com"));
        assert!(shown.contains("explicit consent"));
        assert_eq!(
            p.check(ElicitAnswer::AcceptUrl(UrlConsent::granted_for(
                "https://pay.example.com/"
            ))),
            Err(AnswerError::ConsentUrlMismatch)
        );
        let ok = ElicitAnswer::AcceptUrl(UrlConsent::granted_for(&url));
        assert_eq!(p.check(ok.clone()), Ok(ok));
        assert_eq!(
            p.validate_field("x", &json!(1)),
            Err(AnswerError::ContentForUrl)
        );
        let warned = prompt(&json!({"mode": "url", "message": "m", "url": "http://a@b.example/"}));
        let shown = warned.to_string();
        assert!(
            shown.contains("not https") && shown.contains("user@"),
            "{shown}"
        );
    }
}

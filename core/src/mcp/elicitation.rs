//! Elicitation (`client/elicitation.mdx`): the `elicitation/create` input request a server puts in
//! an `InputRequiredResult`, and the host's answer to it.
//!
//! - [`ElicitationRequest::parse`] reads the request params: form mode (`requestedSchema`, the
//!   restricted flat object of primitive properties) or URL mode (`url`, which the client never
//!   fetches and which needs the user's explicit consent);
//! - a form asking for passwords, API keys, tokens or payment data is flagged
//!   ([`FormElicitation::suspicious`]), since such data belongs in URL mode;
//! - [`ElicitationRequest::answer`] checks the host's [`ElicitAnswer`] (accept / decline /
//!   cancel) against the request before it is sent, and yields the `ElicitResult` JSON.
//!
//! Error messages name fields, never the values a user typed (they may be secrets).

use std::fmt;

use serde_json::{Map, Number, Value};

use crate::mcp::mrtr::raw_members;

/// The method name of an elicitation input request.
pub const METHOD: &str = "elicitation/create";

/// Why an `elicitation/create` request from the server is unusable (the server's fault).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElicitationError {
    /// `params` is missing or not an object.
    #[error("elicitation/create params must be an object")]
    ParamsNotObject,
    /// `message` is missing or not a string.
    #[error("elicitation/create params need a string \"message\"")]
    MissingMessage,
    /// `mode` is neither `"form"` nor `"url"`.
    #[error("elicitation mode {0:?} is neither \"form\" nor \"url\"")]
    UnknownMode(String),
    /// URL mode without a string `url`.
    #[error("URL mode elicitation needs a string \"url\"")]
    MissingUrl,
    /// The `url` is not an absolute `scheme://host...` URL.
    #[error("URL mode elicitation url is not a valid absolute URL: {0}")]
    InvalidUrl(&'static str),
    /// The `requestedSchema` breaks the restricted schema rules.
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

/// Why a `requestedSchema` is not the restricted flat object of primitives the spec allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// `requestedSchema` is missing or not an object.
    #[error("requestedSchema must be an object")]
    NotObject,
    /// `requestedSchema.type` is not `"object"`.
    #[error("requestedSchema.type must be \"object\"")]
    TypeNotObject,
    /// `requestedSchema.properties` is missing or not an object.
    #[error("requestedSchema.properties must be an object")]
    MissingProperties,
    /// `requestedSchema.required` is not an array of strings.
    #[error("requestedSchema.required must be an array of strings")]
    BadRequired,
    /// `required` names a field that `properties` does not define.
    #[error("requestedSchema.required names {0:?}, which is not among the properties")]
    RequiredNotDefined(String),
    /// A property is not one of the primitive schemas (string, number, integer, boolean, enum).
    #[error("requestedSchema property {field:?} is not a primitive schema: {reason}")]
    NotPrimitive {
        /// The property name.
        field: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Why a host's answer cannot be sent (the caller's fault): it does not fit the request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// Form content was given for a URL mode request.
    #[error("a URL mode elicitation is accepted with the user's consent, not with form content")]
    ContentForUrl,
    /// A URL consent was given for a form mode request.
    #[error("a form mode elicitation is accepted with content, not with a URL consent")]
    ConsentForForm,
    /// The consent was recorded for a different URL than the one the server sent.
    #[error("the recorded consent is for a different URL than the one shown")]
    ConsentUrlMismatch,
    /// A required field is missing from the content.
    #[error("required field {field:?} is missing")]
    MissingRequired {
        /// The field name.
        field: String,
    },
    /// The content has a field the schema does not define.
    #[error("field {field:?} is not in the requested schema")]
    UnknownField {
        /// The field name.
        field: String,
    },
    /// The value has the wrong JSON type.
    #[error("field {field:?} must be {expected}")]
    WrongType {
        /// The field name.
        field: String,
        /// What the schema asks for.
        expected: &'static str,
    },
    /// A string is shorter than `minLength` (counted in characters).
    #[error("field {field:?} is shorter than {min} characters")]
    TooShort {
        /// The field name.
        field: String,
        /// `minLength`.
        min: u64,
    },
    /// A string is longer than `maxLength` (counted in characters).
    #[error("field {field:?} is longer than {max} characters")]
    TooLong {
        /// The field name.
        field: String,
        /// `maxLength`.
        max: u64,
    },
    /// A string does not have the schema's `format`.
    #[error("field {field:?} is not a valid {format}")]
    BadFormat {
        /// The field name.
        field: String,
        /// The format name (`email`, `uri`, `date`, `date-time`).
        format: &'static str,
    },
    /// A number is below `minimum`.
    #[error("field {field:?} is below the minimum {minimum}")]
    BelowMinimum {
        /// The field name.
        field: String,
        /// `minimum`.
        minimum: f64,
    },
    /// A number is above `maximum`.
    #[error("field {field:?} is above the maximum {maximum}")]
    AboveMaximum {
        /// The field name.
        field: String,
        /// `maximum`.
        maximum: f64,
    },
    /// A value is not one of the enum's options.
    #[error("field {field:?} is not one of the offered options")]
    NotAnOption {
        /// The field name.
        field: String,
    },
    /// A multi-select has fewer than `minItems` choices.
    #[error("field {field:?} needs at least {min} choices")]
    TooFewItems {
        /// The field name.
        field: String,
        /// `minItems`.
        min: u64,
    },
    /// A multi-select has more than `maxItems` choices.
    #[error("field {field:?} allows at most {max} choices")]
    TooManyItems {
        /// The field name.
        field: String,
        /// `maxItems`.
        max: u64,
    },
    /// A multi-select names the same option twice.
    #[error("field {field:?} names an option twice")]
    DuplicateItem {
        /// The field name.
        field: String,
    },
}

/// An `elicitation/create` request, by mode.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationRequest {
    /// Form mode: structured data, validated against `requestedSchema`.
    Form(FormElicitation),
    /// URL mode: an out-of-band interaction the user must consent to open.
    Url(UrlElicitation),
}

/// A form mode elicitation, as surfaced to the host.
#[derive(Debug, Clone, PartialEq)]
pub struct FormElicitation {
    /// Why the server asks (show it to the user with the server's identity).
    pub message: String,
    /// The fields asked for.
    pub schema: RequestedSchema,
    /// Why this form looks like it asks for secrets or payment data (empty when it does not).
    /// Such data must go through URL mode; the host should warn the user.
    pub suspicious: Vec<Suspicion>,
}

/// A URL mode elicitation, as surfaced to the host. The client never fetches the URL.
#[derive(Debug, Clone, PartialEq)]
pub struct UrlElicitation {
    /// Why the server asks.
    pub message: String,
    /// The full URL, to be shown whole before consent.
    pub url: String,
    /// The URL's host (lower-cased), to be highlighted against subdomain spoofing.
    pub host: String,
    /// Always `true`: accepting needs the user's explicit consent ([`UrlConsent`]).
    pub requires_consent: bool,
    /// Reasons to warn the user about this URL (empty when there are none).
    pub warnings: Vec<UrlWarning>,
}

/// Something about a URL mode URL the host should warn about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UrlWarning {
    /// The scheme is not `https`.
    NotHttps,
    /// The host has a punycode (`xn--`) label or non-ASCII characters.
    InternationalizedHost,
    /// The URL carries a `user@` part before the host, a common spoofing trick.
    UserInfo,
}

/// The restricted `requestedSchema`: a flat object of primitive properties.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedSchema {
    /// The properties, in the order the server listed them.
    pub properties: Vec<(String, PropertySchema)>,
    /// The names of the required properties.
    pub required: Vec<String>,
}

/// One property of a [`RequestedSchema`].
#[derive(Debug, Clone, PartialEq)]
pub struct PropertySchema {
    /// `title`, if any.
    pub title: Option<String>,
    /// `description`, if any.
    pub description: Option<String>,
    /// `default`, if any, for pre-filling the form.
    pub default: Option<Value>,
    /// The type and its constraints.
    pub kind: PropertyKind,
}

/// The primitive type of a property and its constraints.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PropertyKind {
    /// `type: "string"` without `enum`/`oneOf`.
    String {
        /// `minLength`, in characters.
        min_length: Option<u64>,
        /// `maxLength`, in characters.
        max_length: Option<u64>,
        /// `format`, if any.
        format: Option<StringFormat>,
    },
    /// `type: "number"` or `"integer"`.
    Number {
        /// `true` for `"integer"`.
        integer: bool,
        /// `minimum`.
        minimum: Option<f64>,
        /// `maximum`.
        maximum: Option<f64>,
    },
    /// `type: "boolean"`.
    Boolean,
    /// A single choice: `enum` (with optional legacy `enumNames`) or titled `oneOf`.
    SingleSelect {
        /// The options.
        options: Vec<EnumOption>,
    },
    /// `type: "array"` of enum strings (`items.enum` or titled `items.anyOf`).
    MultiSelect {
        /// The options.
        options: Vec<EnumOption>,
        /// `minItems`.
        min_items: Option<u64>,
        /// `maxItems`.
        max_items: Option<u64>,
    },
}

/// One option of an enum property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumOption {
    /// The value sent back.
    pub value: String,
    /// The label to show, if the schema gives one.
    pub title: Option<String>,
}

/// A string `format`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StringFormat {
    /// `email`.
    Email,
    /// `uri`.
    Uri,
    /// `date` (`YYYY-MM-DD`).
    Date,
    /// `date-time` (RFC 3339).
    DateTime,
    /// Any other format: kept (and looked at for secrets), not validated.
    Other(String),
}

/// Why a form looks like it asks for sensitive data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspicion {
    /// The property concerned, or `None` when the request's `message` matched.
    pub field: Option<String>,
    /// Where the match was found.
    pub location: SuspicionLocation,
    /// What kind of sensitive data it looks like.
    pub category: SensitiveCategory,
    /// The keyword that matched.
    pub keyword: &'static str,
}

/// Where a [`Suspicion`] was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SuspicionLocation {
    /// The property name.
    Name,
    /// The property `title`.
    Title,
    /// The property `description`.
    Description,
    /// The property's string `format`.
    Format,
    /// The request's `message`.
    Message,
}

/// Kinds of data the spec says must not be asked for in form mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SensitiveCategory {
    /// Passwords and passphrases.
    Password,
    /// API keys and other secret keys.
    ApiKey,
    /// Access, refresh and bearer tokens.
    Token,
    /// Credit cards and bank details.
    Payment,
    /// Other secrets and credentials.
    Secret,
}

/// The user's explicit consent to open a URL mode elicitation's URL, recorded by the host
/// after showing the full URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlConsent {
    url: String,
}

impl UrlConsent {
    /// Records that the user saw `url` in full and agreed to open it.
    pub fn granted_for(url: &str) -> Self {
        Self {
            url: url.to_owned(),
        }
    }

    /// The URL consented to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The host's answer to an elicitation.
#[derive(Clone, PartialEq)]
pub enum ElicitAnswer {
    /// Form mode: the user submitted these values.
    Accept(Map<String, Value>),
    /// URL mode: the user consented to open the URL.
    AcceptUrl(UrlConsent),
    /// The user explicitly declined.
    Decline,
    /// The user dismissed the request without choosing.
    Cancel,
}

impl fmt::Debug for ElicitAnswer {
    /// Names the fields only: the values may be secrets a user typed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElicitAnswer::Accept(content) => f
                .debug_struct("Accept")
                .field("fields", &content.keys().collect::<Vec<_>>())
                .finish(),
            ElicitAnswer::AcceptUrl(c) => f.debug_tuple("AcceptUrl").field(c).finish(),
            ElicitAnswer::Decline => f.write_str("Decline"),
            ElicitAnswer::Cancel => f.write_str("Cancel"),
        }
    }
}

impl ElicitationRequest {
    /// Reads the JSON text of the `params` of an `elicitation/create` request (absent `mode`
    /// means form). Form properties keep the order the server listed them in.
    pub fn parse(params_json: &str) -> Result<Self, ElicitationError> {
        let members = raw_members(params_json).map_err(|_| ElicitationError::ParamsNotObject)?;
        let member = |name: &str| {
            members
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.get())
        };
        let string = |name: &str| -> Option<String> {
            member(name).and_then(|raw| serde_json::from_str::<String>(raw).ok())
        };
        let message = string("message").ok_or(ElicitationError::MissingMessage)?;
        let mode = match member("mode") {
            None => None,
            Some(_) => Some(
                string("mode")
                    .ok_or_else(|| ElicitationError::UnknownMode("(not a string)".to_owned()))?,
            ),
        };
        match mode.as_deref() {
            None | Some("form") => {
                let schema = RequestedSchema::parse(
                    member("requestedSchema").ok_or(SchemaError::NotObject)?,
                )?;
                let suspicious = find_suspicions(&message, &schema);
                Ok(ElicitationRequest::Form(FormElicitation {
                    message,
                    schema,
                    suspicious,
                }))
            }
            Some("url") => {
                let url = string("url").ok_or(ElicitationError::MissingUrl)?;
                let (host, warnings) = inspect_url(&url)?;
                Ok(ElicitationRequest::Url(UrlElicitation {
                    message,
                    url,
                    host,
                    requires_consent: true,
                    warnings,
                }))
            }
            Some(other) => Err(ElicitationError::UnknownMode(other.to_owned())),
        }
    }

    /// Checks the host's answer against this request and builds the `ElicitResult` JSON:
    /// form content must satisfy the schema; a URL accept must carry the consent for this
    /// very URL; decline and cancel carry no content.
    pub fn answer(&self, answer: &ElicitAnswer) -> Result<Value, AnswerError> {
        let mut out = Map::new();
        match (self, answer) {
            (_, ElicitAnswer::Decline) => {
                out.insert("action".into(), "decline".into());
            }
            (_, ElicitAnswer::Cancel) => {
                out.insert("action".into(), "cancel".into());
            }
            (ElicitationRequest::Form(form), ElicitAnswer::Accept(content)) => {
                form.schema.validate(content)?;
                out.insert("action".into(), "accept".into());
                out.insert("content".into(), Value::Object(content.clone()));
            }
            (ElicitationRequest::Url(url), ElicitAnswer::AcceptUrl(consent)) => {
                if consent.url != url.url {
                    return Err(AnswerError::ConsentUrlMismatch);
                }
                out.insert("action".into(), "accept".into());
            }
            (ElicitationRequest::Url(_), ElicitAnswer::Accept(_)) => {
                return Err(AnswerError::ContentForUrl)
            }
            (ElicitationRequest::Form(_), ElicitAnswer::AcceptUrl(_)) => {
                return Err(AnswerError::ConsentForForm)
            }
        }
        Ok(Value::Object(out))
    }
}

fn opt_string(o: &Map<String, Value>, key: &str) -> Option<String> {
    o.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn not_primitive(field: &str, reason: &'static str) -> SchemaError {
    SchemaError::NotPrimitive {
        field: field.to_owned(),
        reason,
    }
}

/// Reads an optional non-negative integer keyword.
fn opt_count(
    o: &Map<String, Value>,
    key: &str,
    field: &str,
    reason: &'static str,
) -> Result<Option<u64>, SchemaError> {
    match o.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| not_primitive(field, reason)),
    }
}

/// Reads an optional numeric keyword.
fn opt_number(
    o: &Map<String, Value>,
    key: &str,
    field: &str,
    reason: &'static str,
) -> Result<Option<f64>, SchemaError> {
    match o.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| not_primitive(field, reason)),
    }
}

/// Reads `[{"const": .., "title": ..}, ..]`.
fn titled_options(v: &Value, field: &str) -> Result<Vec<EnumOption>, SchemaError> {
    let list = v
        .as_array()
        .ok_or_else(|| not_primitive(field, "titled options must be an array"))?;
    list.iter()
        .map(|item| {
            let o = item
                .as_object()
                .ok_or_else(|| not_primitive(field, "a titled option must be an object"))?;
            let value = o
                .get("const")
                .and_then(Value::as_str)
                .ok_or_else(|| not_primitive(field, "a titled option needs a string \"const\""))?
                .to_owned();
            Ok(EnumOption {
                value,
                title: opt_string(o, "title"),
            })
        })
        .collect()
}

/// Reads `["a", "b"]` with optional parallel legacy `enumNames`.
fn plain_options(
    v: &Value,
    names: Option<&Value>,
    field: &str,
) -> Result<Vec<EnumOption>, SchemaError> {
    let list = v
        .as_array()
        .ok_or_else(|| not_primitive(field, "enum must be an array of strings"))?;
    let names = names.and_then(Value::as_array);
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let value = item
                .as_str()
                .ok_or_else(|| not_primitive(field, "enum must be an array of strings"))?
                .to_owned();
            let title = names
                .and_then(|n| n.get(i))
                .and_then(Value::as_str)
                .map(str::to_owned);
            Ok(EnumOption { value, title })
        })
        .collect()
}

impl PropertySchema {
    fn parse(field: &str, v: &Value) -> Result<Self, SchemaError> {
        let o = v
            .as_object()
            .ok_or_else(|| not_primitive(field, "a property schema must be an object"))?;
        let ty = o
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| not_primitive(field, "\"type\" must be a single type name"))?;
        let kind = match ty {
            "string" => {
                if let Some(one_of) = o.get("oneOf") {
                    PropertyKind::SingleSelect {
                        options: titled_options(one_of, field)?,
                    }
                } else if let Some(e) = o.get("enum") {
                    PropertyKind::SingleSelect {
                        options: plain_options(e, o.get("enumNames"), field)?,
                    }
                } else {
                    let format = match o.get("format") {
                        None => None,
                        Some(Value::String(f)) => Some(match f.as_str() {
                            "email" => StringFormat::Email,
                            "uri" => StringFormat::Uri,
                            "date" => StringFormat::Date,
                            "date-time" => StringFormat::DateTime,
                            other => StringFormat::Other(other.to_owned()),
                        }),
                        Some(_) => return Err(not_primitive(field, "\"format\" must be a string")),
                    };
                    PropertyKind::String {
                        min_length: opt_count(o, "minLength", field, "bad minLength")?,
                        max_length: opt_count(o, "maxLength", field, "bad maxLength")?,
                        format,
                    }
                }
            }
            "number" | "integer" => PropertyKind::Number {
                integer: ty == "integer",
                minimum: opt_number(o, "minimum", field, "bad minimum")?,
                maximum: opt_number(o, "maximum", field, "bad maximum")?,
            },
            "boolean" => PropertyKind::Boolean,
            "array" => {
                let items = o
                    .get("items")
                    .and_then(Value::as_object)
                    .ok_or_else(|| not_primitive(field, "an array needs an \"items\" object"))?;
                let options = if let Some(any_of) = items.get("anyOf") {
                    titled_options(any_of, field)?
                } else if let Some(e) = items.get("enum") {
                    if items.get("type").and_then(Value::as_str) != Some("string") {
                        return Err(not_primitive(field, "array items must be string enums"));
                    }
                    plain_options(e, None, field)?
                } else {
                    return Err(not_primitive(
                        field,
                        "arrays are allowed only of enum strings",
                    ));
                };
                PropertyKind::MultiSelect {
                    options,
                    min_items: opt_count(o, "minItems", field, "bad minItems")?,
                    max_items: opt_count(o, "maxItems", field, "bad maxItems")?,
                }
            }
            "object" => return Err(not_primitive(field, "nested objects are not allowed")),
            _ => return Err(not_primitive(field, "unknown type")),
        };
        Ok(PropertySchema {
            title: opt_string(o, "title"),
            description: opt_string(o, "description"),
            default: o.get("default").cloned(),
            kind,
        })
    }
}

impl RequestedSchema {
    /// Reads the JSON text of a `requestedSchema`, refusing anything but a flat object of
    /// primitive properties. Properties keep the order the server listed them in.
    pub fn parse(schema_json: &str) -> Result<Self, SchemaError> {
        let members = raw_members(schema_json).map_err(|_| SchemaError::NotObject)?;
        let member = |name: &str| {
            members
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.get())
        };
        if member("type") != Some("\"object\"") {
            return Err(SchemaError::TypeNotObject);
        }
        let props = member("properties")
            .and_then(|raw| raw_members(raw).ok())
            .ok_or(SchemaError::MissingProperties)?;
        let mut properties = Vec::with_capacity(props.len());
        for (name, raw) in props {
            let value: Value =
                serde_json::from_str(raw.get()).map_err(|_| not_primitive(&name, "not JSON"))?;
            let prop = PropertySchema::parse(&name, &value)?;
            properties.push((name, prop));
        }
        let required = match member("required") {
            None => Vec::new(),
            Some(raw) => {
                serde_json::from_str::<Vec<String>>(raw).map_err(|_| SchemaError::BadRequired)?
            }
        };
        if let Some(missing) = required
            .iter()
            .find(|r| !properties.iter().any(|(n, _)| n == *r))
        {
            return Err(SchemaError::RequiredNotDefined(missing.clone()));
        }
        Ok(RequestedSchema {
            properties,
            required,
        })
    }

    /// The schema of the property `name`, if defined.
    pub fn property(&self, name: &str) -> Option<&PropertySchema> {
        self.properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p)
    }

    /// Form content with every field the user left out set to its property's `default`
    /// (client/elicitation.mdx: defaults pre-populate the form, SEP-1034), the properties in
    /// the server's order. Fields given in `content` are kept as they are; a property without
    /// a default stays absent.
    pub fn with_defaults(&self, mut content: Map<String, Value>) -> Map<String, Value> {
        for (name, prop) in &self.properties {
            if let Some(default) = &prop.default {
                if !content.contains_key(name) {
                    content.insert(name.clone(), default.clone());
                }
            }
        }
        content
    }

    /// Checks form content: every required field present, no field the schema does not
    /// define, and each value of its property's type within its constraints.
    pub fn validate(&self, content: &Map<String, Value>) -> Result<(), AnswerError> {
        for r in &self.required {
            if !content.contains_key(r) {
                return Err(AnswerError::MissingRequired { field: r.clone() });
            }
        }
        for (field, value) in content {
            let prop = self
                .property(field)
                .ok_or_else(|| AnswerError::UnknownField {
                    field: field.clone(),
                })?;
            check_value(field, &prop.kind, value)?;
        }
        Ok(())
    }

    /// Checks one field's value against its property (type and constraints), by the same
    /// rules as [`RequestedSchema::validate`]: a host asking field by field can ask again for
    /// one bad answer at once, before the whole form is checked.
    pub fn validate_field(&self, field: &str, value: &Value) -> Result<(), AnswerError> {
        let prop = self
            .property(field)
            .ok_or_else(|| AnswerError::UnknownField {
                field: field.to_owned(),
            })?;
        check_value(field, &prop.kind, value)
    }
}

fn check_value(field: &str, kind: &PropertyKind, value: &Value) -> Result<(), AnswerError> {
    let f = || field.to_owned();
    match kind {
        PropertyKind::String {
            min_length,
            max_length,
            format,
        } => {
            let s = value.as_str().ok_or_else(|| AnswerError::WrongType {
                field: f(),
                expected: "a string",
            })?;
            let len = s.chars().count() as u64;
            if let Some(min) = *min_length {
                if len < min {
                    return Err(AnswerError::TooShort { field: f(), min });
                }
            }
            if let Some(max) = *max_length {
                if len > max {
                    return Err(AnswerError::TooLong { field: f(), max });
                }
            }
            let (ok, name) = match format {
                Some(StringFormat::Email) => (is_email(s), "email"),
                Some(StringFormat::Uri) => (is_uri(s), "uri"),
                Some(StringFormat::Date) => (is_date(s), "date"),
                Some(StringFormat::DateTime) => (is_date_time(s), "date-time"),
                Some(StringFormat::Other(_)) | None => (true, ""),
            };
            if !ok {
                return Err(AnswerError::BadFormat {
                    field: f(),
                    format: name,
                });
            }
        }
        PropertyKind::Number {
            integer,
            minimum,
            maximum,
        } => {
            let n = value.as_number().ok_or_else(|| AnswerError::WrongType {
                field: f(),
                expected: if *integer { "an integer" } else { "a number" },
            })?;
            let x = number_value(n);
            // `ElicitResult.content` values are `string | number | boolean | string[]` in the
            // TypeScript schema, which basic/index.mdx names the source of truth (the generated
            // schema.json narrows `number` to `integer`, an artifact of its generator). So a
            // `type: "number"` field takes a fraction; a `type: "integer"` one does not.
            if *integer && !(n.is_i64() || n.is_u64() || x.fract() == 0.0) {
                return Err(AnswerError::WrongType {
                    field: f(),
                    expected: "an integer",
                });
            }
            if let Some(min) = *minimum {
                if x < min {
                    return Err(AnswerError::BelowMinimum {
                        field: f(),
                        minimum: min,
                    });
                }
            }
            if let Some(max) = *maximum {
                if x > max {
                    return Err(AnswerError::AboveMaximum {
                        field: f(),
                        maximum: max,
                    });
                }
            }
        }
        PropertyKind::Boolean => {
            if !value.is_boolean() {
                return Err(AnswerError::WrongType {
                    field: f(),
                    expected: "a boolean",
                });
            }
        }
        PropertyKind::SingleSelect { options } => {
            let s = value.as_str().ok_or_else(|| AnswerError::WrongType {
                field: f(),
                expected: "a string",
            })?;
            if !options.iter().any(|o| o.value == s) {
                return Err(AnswerError::NotAnOption { field: f() });
            }
        }
        PropertyKind::MultiSelect {
            options,
            min_items,
            max_items,
        } => {
            let wrong = || AnswerError::WrongType {
                field: f(),
                expected: "an array of strings",
            };
            let items = value.as_array().ok_or_else(wrong)?;
            let mut seen: Vec<&str> = Vec::with_capacity(items.len());
            for item in items {
                let s = item.as_str().ok_or_else(wrong)?;
                if !options.iter().any(|o| o.value == s) {
                    return Err(AnswerError::NotAnOption { field: f() });
                }
                if seen.contains(&s) {
                    return Err(AnswerError::DuplicateItem { field: f() });
                }
                seen.push(s);
            }
            let count = items.len() as u64;
            if let Some(min) = *min_items {
                if count < min {
                    return Err(AnswerError::TooFewItems { field: f(), min });
                }
            }
            if let Some(max) = *max_items {
                if count > max {
                    return Err(AnswerError::TooManyItems { field: f(), max });
                }
            }
        }
    }
    Ok(())
}

fn number_value(n: &Number) -> f64 {
    // serde_json numbers always convert to f64 (large integers lose precision only).
    n.as_f64().unwrap_or(f64::NAN)
}

/// A pragmatic `email` check: one `@`, a non-empty local part, a dotted domain, no spaces.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.contains('@')
        // RFC 5321 Mailbox (JSON Schema `email`) allows single-label domains: `root@localhost`.
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// An absolute URI: `scheme:rest` with a valid scheme and no whitespace.
fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    is_scheme(scheme) && !rest.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn is_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `YYYY-MM-DD` with a real day of that month (RFC 3339 `full-date`).
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (
        s.get(0..4).and_then(digits),
        s.get(5..7).and_then(digits),
        s.get(8..10).and_then(digits),
    ) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// RFC 3339 `date-time`: `full-date T HH:MM:SS[.frac] (Z | ±HH:MM)`.
fn is_date_time(s: &str) -> bool {
    let Some(date) = s.get(0..10) else {
        return false;
    };
    if !is_date(date) || !matches!(s.as_bytes().get(10), Some(b'T' | b't')) {
        return false;
    }
    let Some(rest) = s.get(11..) else {
        return false;
    };
    let (time, offset) = if let Some(t) = rest.strip_suffix(['Z', 'z']) {
        (t, None)
    } else {
        match rest
            .len()
            .checked_sub(6)
            .and_then(|i| rest.get(i..).map(|o| (i, o)))
        {
            Some((i, o)) if o.starts_with(['+', '-']) => (rest.get(..i).unwrap_or(""), Some(o)),
            _ => return false,
        }
    };
    if let Some(o) = offset {
        let ok = o.as_bytes().get(3) == Some(&b':')
            && o.get(1..3).and_then(digits).is_some_and(|h| h <= 23)
            && o.get(4..6).and_then(digits).is_some_and(|m| m <= 59);
        if !ok {
            return false;
        }
    }
    let (hms, frac) = match time.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (time, None),
    };
    if frac.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let b = hms.as_bytes();
    b.len() == 8
        && b.get(2) == Some(&b':')
        && b.get(5) == Some(&b':')
        && hms.get(0..2).and_then(digits).is_some_and(|h| h <= 23)
        && hms.get(3..5).and_then(digits).is_some_and(|m| m <= 59)
        && hms.get(6..8).and_then(digits).is_some_and(|s| s <= 60)
}

/// Checks a URL mode URL is `scheme://host...` and lists what to warn about.
fn inspect_url(url: &str) -> Result<(String, Vec<UrlWarning>), ElicitationError> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ElicitationError::InvalidUrl(
            "it contains whitespace or control characters",
        ));
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or(ElicitationError::InvalidUrl("it has no scheme://"))?;
    if !is_scheme(scheme) {
        return Err(ElicitationError::InvalidUrl("the scheme is not valid"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let mut warnings = Vec::new();
    if !scheme.eq_ignore_ascii_case("https") {
        warnings.push(UrlWarning::NotHttps);
    }
    let host_port = match authority.rsplit_once('@') {
        Some((_, hp)) => {
            warnings.push(UrlWarning::UserInfo);
            hp
        }
        None => authority,
    };
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    if host.is_empty() {
        return Err(ElicitationError::InvalidUrl("it has no host"));
    }
    let host = host.to_lowercase();
    if !host.is_ascii() || host.split('.').any(|label| label.starts_with("xn--")) {
        warnings.push(UrlWarning::InternationalizedHost);
    }
    Ok((host, warnings))
}

/// Keyword phrases (as lower-case word sequences) and what they suggest.
const KEYWORDS: &[(&str, SensitiveCategory)] = &[
    ("password", SensitiveCategory::Password),
    ("passwd", SensitiveCategory::Password),
    ("passphrase", SensitiveCategory::Password),
    ("pwd", SensitiveCategory::Password),
    ("passcode", SensitiveCategory::Password),
    ("pin code", SensitiveCategory::Password),
    ("api key", SensitiveCategory::ApiKey),
    ("apikey", SensitiveCategory::ApiKey),
    ("secret key", SensitiveCategory::ApiKey),
    ("access key", SensitiveCategory::ApiKey),
    ("private key", SensitiveCategory::ApiKey),
    ("client secret", SensitiveCategory::ApiKey),
    ("token", SensitiveCategory::Token),
    ("accesstoken", SensitiveCategory::Token),
    ("bearer", SensitiveCategory::Token),
    ("jwt", SensitiveCategory::Token),
    ("credit card", SensitiveCategory::Payment),
    ("creditcard", SensitiveCategory::Payment),
    ("card number", SensitiveCategory::Payment),
    ("cardnumber", SensitiveCategory::Payment),
    ("cvv", SensitiveCategory::Payment),
    ("cvc", SensitiveCategory::Payment),
    ("security code", SensitiveCategory::Payment),
    ("iban", SensitiveCategory::Payment),
    ("bank account", SensitiveCategory::Payment),
    ("routing number", SensitiveCategory::Payment),
    ("secret", SensitiveCategory::Secret),
    ("credential", SensitiveCategory::Secret),
    ("credentials", SensitiveCategory::Secret),
    ("otp", SensitiveCategory::Secret),
    ("ssn", SensitiveCategory::Secret),
];

/// Splits text into lower-case words at non-alphanumerics and camelCase boundaries
/// (`apiKey`, `APIKey`, `api_key`, `API-Key` all give `api key`).
fn words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = chars.get(i.wrapping_sub(1)).copied().unwrap_or(' ');
            let next = chars.get(i + 1).copied().unwrap_or(' ');
            if prev.is_lowercase()
                || prev.is_numeric()
                || (prev.is_uppercase() && next.is_lowercase())
            {
                out.push(std::mem::take(&mut cur));
            }
        }
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The first keyword phrase found as a run of whole words in `text`.
fn match_keyword(text: &str) -> Option<(&'static str, SensitiveCategory)> {
    let ws = words(text);
    KEYWORDS.iter().copied().find(|(phrase, _)| {
        let p: Vec<&str> = phrase.split(' ').collect();
        ws.windows(p.len())
            .any(|win| win.iter().zip(&p).all(|(w, k)| w == k))
    })
}

pub(crate) fn find_suspicions(message: &str, schema: &RequestedSchema) -> Vec<Suspicion> {
    let mut out = Vec::new();
    let mut push = |field: Option<&str>, location, text: &str| {
        if let Some((keyword, category)) = match_keyword(text) {
            out.push(Suspicion {
                field: field.map(str::to_owned),
                location,
                category,
                keyword,
            });
        }
    };
    for (name, p) in &schema.properties {
        push(Some(name), SuspicionLocation::Name, name);
        if let Some(t) = &p.title {
            push(Some(name), SuspicionLocation::Title, t);
        }
        if let Some(d) = &p.description {
            push(Some(name), SuspicionLocation::Description, d);
        }
        if let PropertyKind::String {
            format: Some(StringFormat::Other(f)),
            ..
        } = &p.kind
        {
            push(Some(name), SuspicionLocation::Format, f);
        }
    }
    push(None, SuspicionLocation::Message, message);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(params: &str) -> FormElicitation {
        match ElicitationRequest::parse(params).unwrap() {
            ElicitationRequest::Form(f) => f,
            ElicitationRequest::Url(_) => panic!("expected form mode"),
        }
    }

    fn schema(props: Value, required: Value) -> RequestedSchema {
        RequestedSchema::parse(
            &json!({"type":"object","properties":props,"required":required}).to_string(),
        )
        .unwrap()
    }

    fn content(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// client/elicitation.mdx, "Elicitation Requests": requests without `mode` are form mode.
    #[test]
    fn absent_mode_means_form_mode() {
        let p = include_str!(
            "../../../fixtures/mcp/examples/ElicitRequestFormParams-multiple-fields.json"
        )
        .replace(r#""mode": "form","#, "");
        assert!(!p.contains("mode"));
        let f = form(&p);
        assert_eq!(f.message, "Please provide your contact information");
        let names: Vec<&str> = f
            .schema
            .properties
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(names, ["name", "email", "age"]);
        assert_eq!(f.schema.required, ["name", "email"]);
    }

    /// client/elicitation.mdx, "Elicitation Requests": mode is `form` or `url`, nothing else.
    #[test]
    fn unknown_mode_is_refused() {
        let e = ElicitationRequest::parse(r#"{"mode":"popup","message":"m"}"#).unwrap_err();
        assert_eq!(e, ElicitationError::UnknownMode("popup".into()));
    }

    /// client/elicitation.mdx, "Requested Schema": flat objects with primitive properties only.
    #[test]
    fn nested_object_property_is_refused_naming_the_field() {
        let e = RequestedSchema::parse(
            &json!({"type":"object","properties":{
            "addr":{"type":"object","properties":{}}}})
            .to_string(),
        )
        .unwrap_err();
        assert!(matches!(e, SchemaError::NotPrimitive { ref field, .. } if field == "addr"));
        let e = RequestedSchema::parse(
            &json!({"type":"object","properties":{
            "list":{"type":"array","items":{"type":"object"}}}})
            .to_string(),
        )
        .unwrap_err();
        assert!(matches!(e, SchemaError::NotPrimitive { ref field, .. } if field == "list"));
        assert_eq!(
            RequestedSchema::parse(&json!({"type":"array","properties":{}}).to_string())
                .unwrap_err(),
            SchemaError::TypeNotObject
        );
    }

    /// client/elicitation.mdx, "Requested Schema": `required` names defined properties.
    #[test]
    fn required_field_must_be_a_defined_property() {
        let e = RequestedSchema::parse(
            &json!({"type":"object","properties":{"a":{"type":"string"}},"required":["b"]})
                .to_string(),
        )
        .unwrap_err();
        assert_eq!(e, SchemaError::RequiredNotDefined("b".into()));
    }

    /// client/elicitation.mdx, "Form Mode Security": clients validate responses against the
    /// schema; the spec's own example answer passes.
    #[test]
    fn spec_example_answer_satisfies_spec_example_schema() {
        let p = include_str!(
            "../../../fixtures/mcp/examples/ElicitRequestFormParams-multiple-fields.json"
        );
        let r: Value = serde_json::from_str(include_str!(
            "../../../fixtures/mcp/examples/ElicitResult-multiple-fields.json"
        ))
        .unwrap();
        let req = ElicitationRequest::parse(p).unwrap();
        let answer = ElicitAnswer::Accept(content(r["content"].clone()));
        assert_eq!(req.answer(&answer).unwrap(), r);
    }

    /// client/elicitation.mdx, "Requested Schema" (`required`): a required field must be sent.
    #[test]
    fn missing_required_field_is_refused_naming_it() {
        let s = schema(
            json!({"name":{"type":"string"},"age":{"type":"number"}}),
            json!(["name"]),
        );
        assert_eq!(
            s.validate(&content(json!({"age": 3}))).unwrap_err(),
            AnswerError::MissingRequired {
                field: "name".into()
            }
        );
        assert!(s.validate(&content(json!({"name": "x"}))).is_ok());
    }

    /// client/elicitation.mdx, "Response Actions": content matches the requested schema, so a
    /// field the schema does not define is refused.
    #[test]
    fn field_not_in_schema_is_refused_naming_it() {
        let s = schema(json!({"name":{"type":"string"}}), json!([]));
        assert_eq!(
            s.validate(&content(json!({"name":"a","extra":1})))
                .unwrap_err(),
            AnswerError::UnknownField {
                field: "extra".into()
            }
        );
    }

    /// client/elicitation.mdx, "Requested Schema" 1: string minLength/maxLength, in characters.
    #[test]
    fn string_length_limits_count_characters() {
        let s = schema(
            json!({"n":{"type":"string","minLength":2,"maxLength":3}}),
            json!([]),
        );
        assert!(s.validate(&content(json!({"n":"éé"}))).is_ok());
        assert!(s.validate(&content(json!({"n":"ééé"}))).is_ok());
        assert_eq!(
            s.validate(&content(json!({"n":"é"}))).unwrap_err(),
            AnswerError::TooShort {
                field: "n".into(),
                min: 2
            }
        );
        assert_eq!(
            s.validate(&content(json!({"n":"éééé"}))).unwrap_err(),
            AnswerError::TooLong {
                field: "n".into(),
                max: 3
            }
        );
        assert!(matches!(
            s.validate(&content(json!({"n":12}))).unwrap_err(),
            AnswerError::WrongType { .. }
        ));
    }

    /// client/elicitation.mdx, "Requested Schema" 1: formats `email`, `uri`, `date`, `date-time`.
    #[test]
    fn string_formats_are_checked() {
        let s = schema(
            json!({"e":{"type":"string","format":"email"},"u":{"type":"string","format":"uri"},
                   "d":{"type":"string","format":"date"},"t":{"type":"string","format":"date-time"}}),
            json!([]),
        );
        let ok = json!({"e":"octocat@github.com","u":"https://x.example/a?b","d":"2024-02-29",
                        "t":"2026-07-28T12:30:00.5+02:00"});
        assert!(s.validate(&content(ok)).is_ok());
        for (field, bad) in [
            ("e", "octocat"),
            ("e", "a b@c.d"),
            ("u", "no scheme"),
            ("u", "1http://x"),
            ("d", "2023-02-29"),
            ("d", "2024-13-01"),
            ("t", "2026-07-28 12:30:00Z"),
            ("t", "2026-07-28T25:00:00Z"),
            ("t", "2026-07-28T12:30:00"),
        ] {
            let err = s.validate(&content(json!({ field: bad }))).unwrap_err();
            assert!(
                matches!(err, AnswerError::BadFormat { ref field, .. } if field == field),
                "{bad:?} passed as {field}"
            );
        }
        assert!(is_date_time("1990-12-31T23:59:60Z"));
        assert!(is_date_time("1990-12-31t15:59:60.123-08:00"));
    }

    /// client/elicitation.mdx, "Requested Schema": "All primitive types support optional
    /// default values"; SEP-1034: an accepted form carries the defaults of the fields left out,
    /// never overriding what the user gave.
    #[test]
    fn defaults_fill_only_the_fields_left_out() {
        let s = schema(
            json!({"name":{"type":"string","default":"John Doe"},
                   "score":{"type":"number","default":95.5},
                   "status":{"type":"string","enum":["active","inactive"],"default":"active"},
                   "verified":{"type":"boolean","default":true},
                   "nick":{"type":"string"}}),
            json!([]),
        );
        let filled = s.with_defaults(content(json!({"name":"Ada"})));
        assert_eq!(
            Value::Object(filled.clone()),
            json!({"name":"Ada","score":95.5,"status":"active","verified":true})
        );
        assert!(s.validate(&filled).is_ok());
        assert_eq!(s.with_defaults(Map::new()).len(), 4);
    }

    /// client/elicitation.mdx, "Requested Schema" 2: number/integer with minimum/maximum; and
    /// the TypeScript schema (the source of truth, basic/index.mdx): `ElicitResult.content`
    /// values may be any `number`, so only an `integer` field refuses a fraction.
    #[test]
    fn number_bounds_and_integer_type_are_checked() {
        let s = schema(
            json!({"n":{"type":"number","minimum":18,"maximum":99.5},"i":{"type":"integer"}}),
            json!([]),
        );
        assert!(s.validate(&content(json!({"n":99,"i":3}))).is_ok());
        assert!(s.validate(&content(json!({"i":3.0}))).is_ok());
        assert_eq!(
            s.validate(&content(json!({"n":17}))).unwrap_err(),
            AnswerError::BelowMinimum {
                field: "n".into(),
                minimum: 18.0
            }
        );
        assert_eq!(
            s.validate(&content(json!({"n":100}))).unwrap_err(),
            AnswerError::AboveMaximum {
                field: "n".into(),
                maximum: 99.5
            }
        );
        assert!(s.validate(&content(json!({"n":99.5}))).is_ok());
        assert!(s.validate(&content(json!({"n":18.25}))).is_ok());
        assert_eq!(
            s.validate(&content(json!({"i":1.5}))).unwrap_err(),
            AnswerError::WrongType {
                field: "i".into(),
                expected: "an integer",
            }
        );
        assert!(matches!(
            s.validate(&content(json!({"i":1.5}))).unwrap_err(),
            AnswerError::WrongType { ref field, .. } if field == "i"
        ));
    }

    /// JSON Schema `email` is an RFC 5321 Mailbox: a single-label domain is valid.
    #[test]
    fn single_label_email_domain_is_valid() {
        assert!(is_email("root@localhost"));
        assert!(!is_email("root@"));
        assert!(!is_email("@localhost"));
    }

    #[test]
    fn boolean_must_be_a_json_boolean() {
        let s = schema(json!({"b":{"type":"boolean"}}), json!(["b"]));
        assert!(s.validate(&content(json!({"b":true}))).is_ok());
        assert!(matches!(
            s.validate(&content(json!({"b":"true"}))).unwrap_err(),
            AnswerError::WrongType { .. }
        ));
        assert!(matches!(
            s.validate(&content(json!({"b":null}))).unwrap_err(),
            AnswerError::WrongType { .. }
        ));
    }

    /// client/elicitation.mdx, "Requested Schema" 4: single-select enums (plain, titled
    /// `oneOf`, legacy `enumNames`) accept only an offered value.
    #[test]
    fn single_select_accepts_only_offered_values() {
        let titled: Value = serde_json::from_str(include_str!(
            "../../../fixtures/mcp/examples/TitledSingleSelectEnumSchema.json"
        ))
        .unwrap();
        let s = schema(
            json!({"c":titled,"p":{"type":"string","enum":["Red","Green"]},
                   "l":{"type":"string","enum":["a"],"enumNames":["Alpha"]}}),
            json!([]),
        );
        let PropertyKind::SingleSelect { options } = &s.property("c").unwrap().kind else {
            panic!("titled oneOf is a single select");
        };
        assert_eq!(
            options[0],
            EnumOption {
                value: "#FF0000".into(),
                title: Some("Red".into())
            }
        );
        let PropertyKind::SingleSelect { options } = &s.property("l").unwrap().kind else {
            panic!("legacy enum is a single select");
        };
        assert_eq!(options[0].title.as_deref(), Some("Alpha"));
        assert!(s
            .validate(&content(json!({"c":"#00FF00","p":"Red","l":"a"})))
            .is_ok());
        assert_eq!(
            s.validate(&content(json!({"c":"Red"}))).unwrap_err(),
            AnswerError::NotAnOption { field: "c".into() }
        );
        assert_eq!(
            s.validate(&content(json!({"p":"Blue"}))).unwrap_err(),
            AnswerError::NotAnOption { field: "p".into() }
        );
    }

    /// client/elicitation.mdx, "Requested Schema" 4: multi-select enums take an array of
    /// offered values, within minItems/maxItems, each at most once.
    #[test]
    fn multi_select_checks_options_item_counts_and_duplicates() {
        let titled: Value = serde_json::from_str(include_str!(
            "../../../fixtures/mcp/examples/TitledMultiSelectEnumSchema.json"
        ))
        .unwrap();
        let s = schema(
            json!({"c":titled,"u":{"type":"array","items":{"type":"string","enum":["x","y"]}}}),
            json!([]),
        );
        assert!(s
            .validate(&content(json!({"c":["#FF0000"],"u":[]})))
            .is_ok());
        assert_eq!(
            s.validate(&content(json!({"c":[]}))).unwrap_err(),
            AnswerError::TooFewItems {
                field: "c".into(),
                min: 1
            }
        );
        assert_eq!(
            s.validate(&content(json!({"c":["#FF0000","#00FF00","#0000FF"]})))
                .unwrap_err(),
            AnswerError::TooManyItems {
                field: "c".into(),
                max: 2
            }
        );
        assert_eq!(
            s.validate(&content(json!({"u":["x","x"]}))).unwrap_err(),
            AnswerError::DuplicateItem { field: "u".into() }
        );
        assert_eq!(
            s.validate(&content(json!({"u":["z"]}))).unwrap_err(),
            AnswerError::NotAnOption { field: "u".into() }
        );
        assert!(matches!(
            s.validate(&content(json!({"u":"x"}))).unwrap_err(),
            AnswerError::WrongType { .. }
        ));
    }

    /// client/elicitation.mdx, "Response Actions": decline and cancel carry no content, and
    /// skip validation (a required field need not be filled to decline).
    #[test]
    fn decline_and_cancel_carry_no_content() {
        let req = ElicitationRequest::Form(form(
            r#"{"message":"m","requestedSchema":
                {"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}"#,
        ));
        assert_eq!(
            req.answer(&ElicitAnswer::Decline).unwrap(),
            json!({"action":"decline"})
        );
        assert_eq!(
            req.answer(&ElicitAnswer::Cancel).unwrap(),
            json!({"action":"cancel"})
        );
    }

    /// client/elicitation.mdx, "URL Mode Elicitation Requests": the event carries the full URL,
    /// its host, and `requires_consent`; accept needs the consent recorded for that URL and
    /// sends no content.
    #[test]
    fn url_mode_accept_requires_consent_for_that_exact_url() {
        let req = ElicitationRequest::parse(include_str!(
            "../../../fixtures/mcp/examples/ElicitRequestURLParams-sensitive-data.json"
        ))
        .unwrap();
        let ElicitationRequest::Url(u) = &req else {
            panic!("url mode");
        };
        assert_eq!(u.url, "https://mcp.example.com/ui/set_api_key");
        assert_eq!(u.host, "mcp.example.com");
        assert!(u.requires_consent);
        assert!(u.warnings.is_empty());
        let expected: Value = serde_json::from_str(include_str!(
            "../../../fixtures/mcp/examples/ElicitResult-url-accept.json"
        ))
        .unwrap();
        let ok = ElicitAnswer::AcceptUrl(UrlConsent::granted_for(&u.url));
        assert_eq!(req.answer(&ok).unwrap(), expected);
        let other = ElicitAnswer::AcceptUrl(UrlConsent::granted_for("https://mcp.example.com/"));
        assert_eq!(
            req.answer(&other).unwrap_err(),
            AnswerError::ConsentUrlMismatch
        );
        assert_eq!(
            req.answer(&ElicitAnswer::Accept(Map::new())).unwrap_err(),
            AnswerError::ContentForUrl
        );
    }

    /// client/elicitation.mdx, "Safe URL Handling" 5-6: highlight the host; warn about
    /// punycode, non-https and `user@` spoofing; refuse what is not a URL.
    #[test]
    fn url_mode_warnings_for_punycode_http_and_userinfo() {
        let parse = |url: &str| {
            ElicitationRequest::parse(&json!({"mode":"url","message":"m","url":url}).to_string())
        };
        let Ok(ElicitationRequest::Url(u)) =
            parse("http://paypal.com@xn--pypal-4ve.example:8080/x")
        else {
            panic!("valid url");
        };
        assert_eq!(u.host, "xn--pypal-4ve.example");
        assert_eq!(
            u.warnings,
            [
                UrlWarning::NotHttps,
                UrlWarning::UserInfo,
                UrlWarning::InternationalizedHost
            ]
        );
        assert!(matches!(
            parse("javascript:alert(1)"),
            Err(ElicitationError::InvalidUrl(_))
        ));
        assert!(matches!(
            parse("https:///path"),
            Err(ElicitationError::InvalidUrl(_))
        ));
        assert!(matches!(
            parse("https://a b.example"),
            Err(ElicitationError::InvalidUrl(_))
        ));
    }

    /// client/elicitation.mdx, "Form Mode Security" / client guide "Responding to elicitation":
    /// a form asking for passwords, API keys, tokens or payment data is flagged suspicious,
    /// with the field, where it matched, and the category.
    #[test]
    fn form_asking_for_secrets_is_flagged_suspicious() {
        let f = form(
            r#"{"message":"Connect your account","requestedSchema":{"type":"object",
            "properties":{
                "apiKey":{"type":"string"},
                "pw":{"type":"string","format":"password"},
                "x":{"type":"string","title":"Access Token"},
                "c":{"type":"string","description":"Your credit card number"},
                "user_name":{"type":"string","title":"GitHub Username"}}}}"#,
        );
        let found: Vec<(Option<&str>, SuspicionLocation, SensitiveCategory)> = f
            .suspicious
            .iter()
            .map(|s| (s.field.as_deref(), s.location, s.category))
            .collect();
        assert_eq!(
            found,
            [
                (
                    Some("apiKey"),
                    SuspicionLocation::Name,
                    SensitiveCategory::ApiKey
                ),
                (
                    Some("pw"),
                    SuspicionLocation::Format,
                    SensitiveCategory::Password
                ),
                (
                    Some("x"),
                    SuspicionLocation::Title,
                    SensitiveCategory::Token
                ),
                (
                    Some("c"),
                    SuspicionLocation::Description,
                    SensitiveCategory::Payment
                ),
            ]
        );
    }

    /// client/elicitation.mdx, "User Interaction Model": names, emails and usernames are not
    /// categorically sensitive, so the spec's own example is not flagged.
    #[test]
    fn ordinary_profile_form_is_not_suspicious() {
        let p = include_str!(
            "../../../fixtures/mcp/examples/ElicitRequestFormParams-multiple-fields.json"
        );
        assert!(form(p).suspicious.is_empty());
        let req: Value = serde_json::from_str(include_str!(
            "../../../fixtures/mcp/examples/ElicitRequest.json"
        ))
        .unwrap();
        assert!(form(&req["params"].to_string()).suspicious.is_empty());
    }

    /// Internal: camelCase, snake_case and acronyms split into the same words.
    #[test]
    fn keyword_words_split_case_and_separators() {
        assert_eq!(words("APIKey"), ["api", "key"]);
        assert_eq!(words("api_key"), ["api", "key"]);
        assert_eq!(words("clientSecret2"), ["client", "secret2"]);
        assert_eq!(words("cardNumber"), ["card", "number"]);
        assert_eq!(match_keyword("tokens used"), None);
    }

    /// Secrets never appear in Debug: an accepted form's values are not printed.
    #[test]
    fn answer_debug_hides_values() {
        let a = ElicitAnswer::Accept(content(json!({"password":"hunter2"})));
        let text = format!("{a:?}");
        assert!(text.contains("password"));
        assert!(!text.contains("hunter2"));
    }

    /// One field is checked by the rules of the whole form: range, enum, type; an unknown
    /// field is refused.
    #[test]
    fn one_field_is_checked_by_the_same_rules_as_the_form() {
        let s = schema(
            json!({
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "color": {"type": "string", "enum": ["red", "green"]}
            }),
            json!(["age"]),
        );
        assert!(s.validate_field("age", &json!(30)).is_ok());
        assert!(matches!(
            s.validate_field("age", &json!(200)),
            Err(AnswerError::AboveMaximum { .. })
        ));
        assert!(s.validate_field("age", &json!("30")).is_err());
        assert!(s.validate_field("color", &json!("green")).is_ok());
        assert!(matches!(
            s.validate_field("color", &json!("purple")),
            Err(AnswerError::NotAnOption { .. })
        ));
        assert!(matches!(
            s.validate_field("nope", &json!(1)),
            Err(AnswerError::UnknownField { .. })
        ));
        // The same verdicts as validating a form with only that field.
        for (f, v) in [("age", json!(200)), ("color", json!("purple"))] {
            let mut c = Map::new();
            c.insert(f.to_owned(), v.clone());
            if f == "color" {
                c.insert("age".to_owned(), json!(1));
            }
            assert_eq!(s.validate(&c).err(), s.validate_field(f, &v).err());
        }
    }
}

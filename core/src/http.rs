//! HTTP request and response values, free of any I/O.
//!
//! [`Headers`] is a multi-valued, case-insensitive map that keeps insertion order, the spelling of
//! each name as first given, and repeated values (never folded into one comma-separated string).
//! No header name may be empty or hold a non-token character, and no value may hold CR, LF or
//! NUL: such a header is refused with a [`HeaderError`] that names the header but never echoes
//! the value (it may be a credential).

use std::collections::BTreeMap;
use std::fmt;

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The name is empty or holds a character outside RFC 9110's `token`.
    #[error("invalid HTTP header name {0:?}: a header name must be a non-empty token")]
    InvalidName(String),
    /// The value holds CR, LF or NUL (header injection); the value itself is not repeated.
    #[error("invalid value for HTTP header {0:?}: a header value must not contain CR, LF or NUL")]
    InvalidValue(String),
}

/// Whether `b` is an RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Checks a header name: a non-empty RFC 9110 token.
pub fn validate_name(name: &str) -> Result<(), HeaderError> {
    if !name.is_empty() && name.bytes().all(is_tchar) {
        Ok(())
    } else {
        Err(HeaderError::InvalidName(name.chars().take(64).collect()))
    }
}

/// Checks a header value: no CR, LF or NUL.
pub fn validate_value(name: &str, value: &str) -> Result<(), HeaderError> {
    if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        Err(HeaderError::InvalidValue(name.to_owned()))
    } else {
        Ok(())
    }
}

/// Multi-valued, case-insensitive, order-keeping HTTP headers.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers {
    entries: Vec<(String, String)>,
}

impl fmt::Debug for Headers {
    /// Lists names only: values may be credentials (`Authorization`), and `Debug` output ends up
    /// in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(n, _)| n))
            .finish()
    }
}

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a value after any existing values of the same name.
    pub fn append(
        &mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), HeaderError> {
        let (name, value) = (name.into(), value.into());
        validate_name(&name)?;
        validate_value(&name, &value)?;
        self.entries.push((name, value));
        Ok(())
    }

    /// Replaces every value of `name` with one value.
    pub fn set(
        &mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), HeaderError> {
        let (name, value) = (name.into(), value.into());
        validate_name(&name)?;
        validate_value(&name, &value)?;
        self.remove(&name);
        self.entries.push((name, value));
        Ok(())
    }

    /// The first value of `name`, compared case-insensitively.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.entries
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether any value of `name` is present.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Removes every value of `name`; returns how many were removed.
    pub fn remove(&mut self, name: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        before - self.entries.len()
    }

    /// Keeps the entries for which `keep(name, value)` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        self.entries.retain(|(n, v)| keep(n, v));
    }

    /// Every `(name, value)` pair, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// The number of `(name, value)` pairs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no headers.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Builds headers from the wire's multi-valued map (`{"Name": ["v1", "v2"]}`).
    pub fn from_multimap<'a, I, V>(map: I) -> Result<Self, HeaderError>
    where
        I: IntoIterator<Item = (&'a String, V)>,
        V: IntoIterator<Item = &'a String>,
    {
        let mut h = Headers::new();
        for (name, values) in map {
            for v in values {
                h.append(name.clone(), v.clone())?;
            }
        }
        Ok(h)
    }

    /// The wire's multi-valued map: one key per name (spelled as first seen), values in order.
    /// Keys are sorted, so the output is deterministic.
    pub fn to_multimap(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (n, v) in &self.entries {
            let key = out
                .keys()
                .find(|k| k.eq_ignore_ascii_case(n))
                .cloned()
                .unwrap_or_else(|| n.clone());
            out.entry(key).or_default().push(v.clone());
        }
        out
    }
}

/// An HTTP method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `DELETE`
    Delete,
    /// `PUT` (Harpoon's `call_target`)
    Put,
}

impl Method {
    /// The method's token.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Delete => "DELETE",
            Method::Put => "PUT",
        }
    }
}

/// An HTTP request for a driver to send.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The absolute URL, query included.
    pub url: String,
    /// The headers.
    pub headers: Headers,
    /// The body bytes (empty for none).
    pub body: Vec<u8>,
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &self.headers)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// An HTTP response's head, as a driver received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: Headers,
}

/// The standard reason phrase of a status code (`"Bad Gateway"` for 502), or `""`.
pub fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_case_insensitively_and_keep_repeated_values_in_order() {
        let mut h = Headers::new();
        h.append("Set-Cookie", "a=1").unwrap();
        h.append("content-type", "application/json").unwrap();
        h.append("set-cookie", "b=2").unwrap();
        assert_eq!(h.get_all("SET-COOKIE").collect::<Vec<_>>(), ["a=1", "b=2"]);
        assert_eq!(h.get("Content-Type"), Some("application/json"));
        assert_eq!(h.len(), 3);
        let map = h.to_multimap();
        assert_eq!(
            map["Set-Cookie"],
            ["a=1", "b=2"],
            "first spelling wins, values not folded"
        );
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn values_with_cr_lf_or_nul_are_rejected_without_echoing_them() {
        for bad in ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\0b"] {
            let err = Headers::new().append("Authorization", bad).unwrap_err();
            assert_eq!(err, HeaderError::InvalidValue("Authorization".into()));
            assert!(!err.to_string().contains(bad));
        }
    }

    #[test]
    fn names_must_be_tokens() {
        for bad in ["", "Bad Name", "a:b", "é", "a\r\n"] {
            assert!(matches!(
                Headers::new().append(bad, "v"),
                Err(HeaderError::InvalidName(_))
            ));
        }
        assert!(Headers::new().append("X-Ok_~!", "v").is_ok());
    }

    #[test]
    fn set_replaces_and_remove_counts() {
        let mut h = Headers::new();
        h.append("A", "1").unwrap();
        h.append("a", "2").unwrap();
        h.set("A", "3").unwrap();
        assert_eq!(h.get_all("a").collect::<Vec<_>>(), ["3"]);
        assert_eq!(h.remove("A"), 1);
        assert!(h.is_empty());
    }

    #[test]
    fn debug_never_shows_values() {
        let mut h = Headers::new();
        h.append("Authorization", "Bearer secret-token").unwrap();
        let shown = format!("{h:?}");
        assert!(shown.contains("Authorization"));
        assert!(!shown.contains("secret-token"));
    }

    #[test]
    fn multimap_round_trips() {
        let mut m = BTreeMap::new();
        m.insert("X-A".to_string(), vec!["1".to_string(), "2".to_string()]);
        m.insert("X-B".to_string(), vec![]);
        let h = Headers::from_multimap(&m).unwrap();
        assert_eq!(h.get_all("x-a").collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(h.to_multimap().get("X-A"), m.get("X-A"));
    }
}

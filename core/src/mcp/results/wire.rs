//! Reading JSON members with the path of what is wrong ([`Obj`], [`At`]), and writing them back
//! ([`Out`]). Every reader borrows the value it reads and clones only what it keeps.

use serde_json::Value;

use super::ResultErrorKind;
use crate::mcp::meta::JsonObject;

/// One step of a path inside a result.
#[derive(Clone, Copy, Debug)]
enum Seg {
    /// The result itself.
    Root,
    /// A member, by its schema name.
    Key(&'static str),
    /// An array element.
    Index(usize),
}

/// Where a value sits inside the result: a linked list on the stack, rendered only for an
/// error (`content[2].annotations.priority`).
#[derive(Clone, Copy, Debug)]
pub(super) struct At<'p> {
    seg: Seg,
    parent: Option<&'p At<'p>>,
}

impl At<'static> {
    /// The result itself.
    pub(super) const ROOT: At<'static> = At {
        seg: Seg::Root,
        parent: None,
    };
}

impl At<'_> {
    /// The member `key` of the value here.
    pub(super) fn key(&self, key: &'static str) -> At<'_> {
        At {
            seg: Seg::Key(key),
            parent: Some(self),
        }
    }

    /// The element `index` of the array here.
    pub(super) fn index(&self, index: usize) -> At<'_> {
        At {
            seg: Seg::Index(index),
            parent: Some(self),
        }
    }

    /// The path as text: empty for the result itself.
    pub(super) fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut at = Some(self);
        while let Some(a) = at {
            segs.push(a.seg);
            at = a.parent;
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Root => {}
                Seg::Key(k) if out.is_empty() => out.push_str(k),
                Seg::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Seg::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        out
    }

    /// The value here has the wrong JSON type.
    pub(super) fn wrong(&self, expected: &'static str, found: &Value) -> Bad {
        self.bad(ResultErrorKind::WrongType {
            expected,
            found: kind_of(found),
        })
    }

    /// A required member is absent (the path names it).
    pub(super) fn missing(&self) -> Bad {
        self.bad(ResultErrorKind::Missing)
    }

    /// Any other error here.
    pub(super) fn bad(&self, kind: ResultErrorKind) -> Bad {
        Bad {
            path: self.render(),
            kind,
        }
    }
}

/// A reading error before it is told which method's result it is about.
#[derive(Debug)]
pub(super) struct Bad {
    pub(super) path: String,
    pub(super) kind: ResultErrorKind,
}

/// What a reader returns.
pub(super) type Read<T> = Result<T, Bad>;

/// The JSON type of a value, as an error message names it.
pub(super) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A JSON object being read: each member is taken by its schema name, and what is left
/// ([`Obj::rest`]) is what the schema does not name.
pub(super) struct Obj<'v, 'p> {
    map: &'v JsonObject,
    at: &'p At<'p>,
    used: Vec<&'static str>,
}

impl<'v, 'p> Obj<'v, 'p> {
    /// Starts reading `v`, which must be an object.
    pub(super) fn new(v: &'v Value, at: &'p At<'p>) -> Read<Self> {
        match v {
            Value::Object(map) => Ok(Obj {
                map,
                at,
                used: Vec::new(),
            }),
            other => Err(at.wrong("an object", other)),
        }
    }

    /// The member `key`, as sent (`null` included), marked as read.
    pub(super) fn take(&mut self, key: &'static str) -> Option<&'v Value> {
        self.used.push(key);
        self.map.get(key)
    }

    /// A required member, read by `f`; `null` is a wrong type, not an absence.
    pub(super) fn required<T>(
        &mut self,
        key: &'static str,
        f: impl FnOnce(&'v Value, &At<'_>) -> Read<T>,
    ) -> Read<T> {
        let at = self.at.key(key);
        match self.take(key) {
            None => Err(at.missing()),
            Some(v) => f(v, &at),
        }
    }

    /// An optional member, read by `f`; `null` counts as absent.
    pub(super) fn optional<T>(
        &mut self,
        key: &'static str,
        f: impl FnOnce(&'v Value, &At<'_>) -> Read<T>,
    ) -> Read<Option<T>> {
        let at = self.at.key(key);
        match self.take(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => f(v, &at).map(Some),
        }
    }

    /// A required string.
    pub(super) fn req_string(&mut self, key: &'static str) -> Read<String> {
        self.required(key, string)
    }

    /// An optional string.
    pub(super) fn opt_string(&mut self, key: &'static str) -> Read<Option<String>> {
        self.optional(key, string)
    }

    /// An optional boolean.
    pub(super) fn opt_bool(&mut self, key: &'static str) -> Read<Option<bool>> {
        self.optional(key, boolean)
    }

    /// An optional object, kept verbatim.
    pub(super) fn opt_object(&mut self, key: &'static str) -> Read<Option<JsonObject>> {
        self.optional(key, object)
    }

    /// `_meta`: an optional object.
    pub(super) fn meta(&mut self) -> Read<Option<JsonObject>> {
        self.opt_object("_meta")
    }

    /// A required array, each element read by `f`.
    pub(super) fn req_list<T>(
        &mut self,
        key: &'static str,
        f: impl Fn(&'v Value, &At<'_>) -> Read<T>,
    ) -> Read<Vec<T>> {
        self.required(key, |v, at| list(v, at, f))
    }

    /// An optional array, each element read by `f`; absent reads as empty.
    pub(super) fn opt_list<T>(
        &mut self,
        key: &'static str,
        f: impl Fn(&'v Value, &At<'_>) -> Read<T>,
    ) -> Read<Vec<T>> {
        Ok(self
            .optional(key, |v, at| list(v, at, f))?
            .unwrap_or_default())
    }

    /// The members not read so far, verbatim.
    pub(super) fn rest(&self) -> JsonObject {
        self.map
            .iter()
            .filter(|(k, _)| !self.used.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// A string.
pub(super) fn string(v: &Value, at: &At<'_>) -> Read<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => Err(at.wrong("a string", other)),
    }
}

/// A boolean.
pub(super) fn boolean(v: &Value, at: &At<'_>) -> Read<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(at.wrong("a boolean", other)),
    }
}

/// An object, kept verbatim.
pub(super) fn object(v: &Value, at: &At<'_>) -> Read<JsonObject> {
    match v {
        Value::Object(m) => Ok(m.clone()),
        other => Err(at.wrong("an object", other)),
    }
}

/// A number.
pub(super) fn number(v: &Value, at: &At<'_>) -> Read<f64> {
    match v.as_f64() {
        Some(f) => Ok(f),
        None => Err(at.wrong("a number", v)),
    }
}

/// An integer (a whole float such as `3600000.0` counts; beyond `i64` saturates).
pub(super) fn integer(v: &Value, at: &At<'_>) -> Read<i64> {
    if let Some(i) = v.as_i64() {
        return Ok(i);
    }
    if v.as_u64().is_some() {
        return Ok(i64::MAX);
    }
    match v.as_f64() {
        // Saturating conversion is intended.
        Some(f) if f.is_finite() && f.fract() == 0.0 => Ok(f as i64),
        _ => Err(at.wrong("an integer", v)),
    }
}

/// A non-negative integer.
pub(super) fn unsigned(v: &Value, at: &At<'_>) -> Read<u64> {
    match integer(v, at) {
        Ok(i) if i >= 0 => Ok(v.as_u64().unwrap_or(i as u64)),
        _ => Err(at.wrong("a non-negative integer", v)),
    }
}

/// An array, each element read by `f`.
pub(super) fn list<'v, T>(
    v: &'v Value,
    at: &At<'_>,
    f: impl Fn(&'v Value, &At<'_>) -> Read<T>,
) -> Read<Vec<T>> {
    match v {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| f(item, &at.index(i)))
            .collect(),
        other => Err(at.wrong("an array", other)),
    }
}

/// A JSON object being written: the members the schema does not name first, then the typed
/// ones (which win over a same-named leftover).
pub(super) struct Out(JsonObject);

impl Out {
    /// Starts from the members the schema does not name.
    pub(super) fn new(other: &JsonObject) -> Self {
        Out(other.clone())
    }

    /// Writes a member.
    pub(super) fn put(&mut self, key: &str, v: impl Into<Value>) {
        self.0.insert(key.to_owned(), v.into());
    }

    /// Writes a member when there is one.
    pub(super) fn opt(&mut self, key: &str, v: Option<impl Into<Value>>) {
        if let Some(v) = v {
            self.put(key, v);
        }
    }

    /// Writes a string member when there is one.
    pub(super) fn opt_str(&mut self, key: &str, v: &Option<String>) {
        self.opt(key, v.as_deref());
    }

    /// Writes an object member when there is one.
    pub(super) fn opt_object(&mut self, key: &str, v: &Option<JsonObject>) {
        self.opt(key, v.clone().map(Value::Object));
    }

    /// Writes `_meta` when there is one.
    pub(super) fn meta(&mut self, meta: &Option<JsonObject>) {
        self.opt_object("_meta", meta);
    }

    /// Writes an array member, each element by `f`.
    pub(super) fn list<T>(&mut self, key: &str, items: &[T], f: impl Fn(&T) -> Value) {
        self.put(key, Value::Array(items.iter().map(f).collect()));
    }

    /// Writes an array member unless it is empty.
    pub(super) fn nonempty_list<T>(&mut self, key: &str, items: &[T], f: impl Fn(&T) -> Value) {
        if !items.is_empty() {
            self.list(key, items, f);
        }
    }

    /// Writes `true` flags only.
    pub(super) fn flag(&mut self, key: &str, on: bool) {
        if on {
            self.put(key, true);
        }
    }

    /// The object.
    pub(super) fn done(self) -> Value {
        Value::Object(self.0)
    }
}

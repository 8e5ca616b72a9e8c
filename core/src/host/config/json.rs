//! The JSONC syntax tree with byte ranges, and positions for errors.
//!
//! Why `jsonc-parser` (dprint's, used by Deno): the errors must point at the offending value's
//! line and column, which `serde_json` cannot give for a value that parsed fine, and it has no
//! comments or trailing commas. `jsonc-parser` gives every value its byte range, keeps
//! duplicate keys (so they can be reported rather than silently merged), limits nesting depth,
//! and has no dependencies with its default features off; it builds for
//! `wasm32-unknown-unknown`. Only comments and trailing commas are allowed, as in VS Code's
//! JSONC; its other JSON5-style extensions (single quotes, hex numbers, bare keys) are off.

use std::collections::BTreeMap;

use jsonc_parser::ast::{Object, ObjectProp, ObjectPropName, Value};
use jsonc_parser::errors::ParseErrorKind;
use jsonc_parser::{CollectOptions, ParseOptions, ParseStringErrorKind};

use super::error::JsonKind;
use super::Position;

/// The parse options: JSONC as VS Code reads it.
pub(super) fn parse(text: &str) -> Result<Option<Value<'_>>, (usize, &'static str)> {
    let options = ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    match jsonc_parser::parse_to_ast(text, &CollectOptions::default(), &options) {
        Ok(result) => Ok(result.value),
        Err(e) => Err((e.range().start, reason(e.kind()))),
    }
}

/// Our own words for the parser's error (its own text for a bad `\u` escape quotes the
/// digits, a fragment of a string that may be a secret).
fn reason(kind: &ParseErrorKind) -> &'static str {
    use ParseErrorKind as K;
    match kind {
        K::ExpectedColonAfterObjectKey => "expected `:` after the key",
        K::ExpectedObjectValue => "expected a value after `:`",
        K::ExpectedStringObjectProperty => "expected a key in double quotes",
        K::ExpectedComma => "expected a comma",
        K::MultipleRootJsonValues => "more text after the end of the value",
        K::UnexpectedCloseBrace => "unexpected `}`",
        K::UnexpectedCloseBracket => "unexpected `]`",
        K::UnexpectedColon => "unexpected `:`",
        K::UnexpectedComma => "unexpected comma",
        K::UnterminatedArray => "an array is not closed by `]`",
        K::UnterminatedObject => "an object is not closed by `}`",
        K::UnterminatedCommentBlock => "a `/*` comment is not closed by `*/`",
        K::NestingDepthExceeded => "nested too deeply",
        K::String(ParseStringErrorKind::UnterminatedStringLiteral) => "a string is not closed",
        K::String(_) => "a string has an invalid escape",
        K::SingleQuotedStringsNotAllowed => "strings must be in double quotes",
        K::ExpectedDigit
        | K::ExpectedDigitFollowingNegativeSign
        | K::ExpectedPlusMinusOrDigitInNumberLiteral
        | K::HexadecimalNumbersNotAllowed
        | K::UnaryPlusNumbersNotAllowed
        | K::BareDecimalPointNumbersNotAllowed
        | K::NonFiniteNumbersNotAllowed => "an invalid number",
        _ => "unexpected text",
    }
}

/// Byte offsets to 1-based lines and columns (columns count characters, as editors do). A
/// line ends at `\n`, `\r\n` or a lone `\r`.
pub(super) struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
                starts.push(i + 1);
            }
        }
        Lines { text, starts }
    }

    pub(super) fn position(&self, offset: usize) -> Position {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let column = match self.text.get(start..offset) {
            Some(s) => s.chars().count(),
            // Not on a character boundary (never from the parser's ranges): count bytes.
            None => offset - start,
        };
        Position {
            line,
            column: column + 1,
        }
    }
}

/// The kind of a value, for messages.
pub(super) fn kind(value: &Value<'_>) -> JsonKind {
    match value {
        Value::StringLit(_) => JsonKind::String,
        Value::NumberLit(_) => JsonKind::Number,
        Value::BooleanLit(_) => JsonKind::Boolean,
        Value::Object(_) => JsonKind::Object,
        Value::Array(_) => JsonKind::Array,
        Value::NullKeyword(_) => JsonKind::Null,
    }
}

/// Where a value starts.
pub(super) fn start(value: &Value<'_>) -> usize {
    match value {
        Value::StringLit(v) => v.range.start,
        Value::NumberLit(v) => v.range.start,
        Value::BooleanLit(v) => v.range.start,
        Value::Object(v) => v.range.start,
        Value::Array(v) => v.range.start,
        Value::NullKeyword(v) => v.range.start,
    }
}

/// A property's key.
pub(super) fn key<'p>(prop: &'p ObjectProp<'_>) -> &'p str {
    match &prop.name {
        ObjectPropName::String(lit) => lit.value.as_ref(),
        ObjectPropName::Word(lit) => lit.value,
    }
}

/// An object's members by key, in the file's order, with every key that occurs more than
/// once split out (each occurrence with the offset of another one).
pub(super) struct Members<'o, 'a> {
    /// Keys that occur once.
    pub(super) unique: Vec<&'o ObjectProp<'a>>,
    /// Every occurrence of a key that occurs more than once, with another occurrence's start.
    pub(super) duplicates: Vec<(&'o ObjectProp<'a>, usize)>,
}

impl<'o, 'a> Members<'o, 'a> {
    pub(super) fn of(object: &'o Object<'a>) -> Self {
        let mut by_key: BTreeMap<&'o str, Vec<usize>> = BTreeMap::new();
        for (i, prop) in object.properties.iter().enumerate() {
            by_key.entry(key(prop)).or_default().push(i);
        }
        let mut unique = Vec::new();
        let mut duplicates = Vec::new();
        for (i, prop) in object.properties.iter().enumerate() {
            let other = by_key
                .get(key(prop))
                .and_then(|all| all.iter().copied().find(|&j| j != i))
                .and_then(|j| object.properties.get(j));
            match other {
                None => unique.push(prop),
                Some(other) => duplicates.push((prop, other.range.start)),
            }
        }
        Members { unique, duplicates }
    }

    /// Whether the key occurs at all (once or more).
    pub(super) fn has(&self, name: &str) -> bool {
        self.get(name).is_some() || self.duplicates.iter().any(|(p, _)| key(p) == name)
    }

    /// The value of the key, if it occurs exactly once.
    pub(super) fn get(&self, name: &str) -> Option<&'o ObjectProp<'a>> {
        self.unique.iter().copied().find(|p| key(p) == name)
    }
}

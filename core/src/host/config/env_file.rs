//! `envFile` (VS Code, Cursor): a dotenv file of more variables for a local server. Core does
//! not read files: [`Entry::env_file`] says which, the driver reads it, [`parse_env_file`]
//! parses it and [`Entry::apply_env_file`] adds it to the entry's environment.
//!
//! Written here rather than taken from `dotenvy`: its parser expands `$VAR` from the process
//! environment while parsing (core reads no environment), and offers no way to turn that off.
//!
//! The syntax, that of the common dotenv readers:
//! - `KEY=VALUE` (or `KEY: VALUE`, as VS Code's reader also takes), optionally after
//!   `export `; keys are letters, digits, `_`, `.` and `-`;
//! - blank lines and lines starting with `#` are skipped;
//! - an unquoted value runs to the end of the line, trimmed; a `#` at its start or after a
//!   space or tab starts a comment (so `URL=http://x/#part` keeps its `#part`);
//! - `"..."` may span lines and understands `\n`, `\r`, `\t`, `\"` and `\\` (other
//!   backslashes are kept); `'...'` and `` `...` `` are literal and may span lines; after the
//!   closing quote only a comment may follow;
//! - no `$VAR` expansion, as in VS Code, which passes the values on as written.
//!
//! A key given twice: the later value wins, as in a shell.

use std::collections::BTreeMap;

use super::Entry;
use crate::host::TransportSpec;

/// A line of an env file that is not `KEY=VALUE`. Displays as `line N: message`, without
/// any value; the caller adds the file's name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct EnvFileError {
    /// 1-based line where the problem is (for an unclosed quote: where it opens).
    pub line: usize,
    /// What is wrong.
    pub kind: EnvFileErrorKind,
}

/// What is wrong with a line of an env file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvFileErrorKind {
    /// The line does not start with a key (letters, digits, `_`, `.`, `-`).
    #[error("expected KEY=VALUE, and the line does not start with a key")]
    InvalidKey,
    /// A key without `=` (or `:`) after it.
    #[error("expected KEY=VALUE, and the key is not followed by `=`")]
    NoSeparator,
    /// A quoted value whose quote is not closed.
    #[error("the value's opening {quote} is not closed")]
    Unterminated {
        /// The quote character.
        quote: char,
    },
    /// Text after a quoted value's closing quote (other than a `#` comment).
    #[error("text after the value's closing quote")]
    TextAfterQuote,
}

/// The variables of a dotenv file, in the file's order (a repeated key appears each time;
/// [`Entry::apply_env_file`] keeps the last).
pub fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, EnvFileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut s = Scanner {
        chars: text.chars().collect(),
        at: 0,
        line: 1,
    };
    let mut pairs = Vec::new();
    loop {
        s.skip_blanks();
        match s.peek() {
            None => break,
            Some('\n' | '\r') => {
                s.newline();
                continue;
            }
            Some('#') => {
                s.skip_to_line_end();
                continue;
            }
            Some(_) => {}
        }
        if s.starts_with("export") && matches!(s.peek_at(6), Some(' ' | '\t')) {
            s.at += 6;
            s.skip_blanks();
        }
        let line = s.line;
        let error = |kind| EnvFileError { line, kind };
        let key = s.take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if key.is_empty() {
            return Err(error(EnvFileErrorKind::InvalidKey));
        }
        s.skip_blanks();
        if !matches!(s.peek(), Some('=' | ':')) {
            return Err(error(EnvFileErrorKind::NoSeparator));
        }
        s.at += 1;
        s.skip_blanks();
        let value = match s.peek() {
            Some(quote @ ('"' | '\'' | '`')) => {
                s.at += 1;
                let value = s
                    .quoted(quote)
                    .ok_or(error(EnvFileErrorKind::Unterminated { quote }))?;
                s.skip_blanks();
                match s.peek() {
                    None | Some('\n' | '\r') => {}
                    Some('#') => s.skip_to_line_end(),
                    Some(_) => return Err(error(EnvFileErrorKind::TextAfterQuote)),
                }
                value
            }
            _ => s.unquoted(),
        };
        pairs.push((key, value));
    }
    Ok(pairs)
}

struct Scanner {
    chars: Vec<char>,
    at: usize,
    line: usize,
}

impl Scanner {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn starts_with(&self, word: &str) -> bool {
        word.chars()
            .enumerate()
            .all(|(i, c)| self.peek_at(i) == Some(c))
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.at += 1;
        }
    }

    /// Past a `\n`, `\r\n` or lone `\r`, counting the line.
    fn newline(&mut self) {
        if self.peek() == Some('\r') {
            self.at += 1;
        }
        if self.peek() == Some('\n') {
            self.at += 1;
        }
        self.line += 1;
    }

    fn skip_to_line_end(&mut self) {
        while !matches!(self.peek(), None | Some('\n' | '\r')) {
            self.at += 1;
        }
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> String {
        let start = self.at;
        while self.peek().is_some_and(&keep) {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    /// The rest of the line, up to a comment, trimmed.
    fn unquoted(&mut self) -> String {
        let start = self.at;
        let mut end = start;
        while let Some(c) = self.peek() {
            if matches!(c, '\n' | '\r') {
                break;
            }
            let after_blank = self.at == start || matches!(self.chars[self.at - 1], ' ' | '\t');
            if c == '#' && after_blank {
                self.skip_to_line_end();
                break;
            }
            self.at += 1;
            end = self.at;
        }
        let value: String = self.chars[start..end].iter().collect();
        value.trim_end_matches([' ', '\t']).to_owned()
    }

    /// Up to the closing `quote` (consumed), or `None` at the end of the text.
    fn quoted(&mut self, quote: char) -> Option<String> {
        let mut value = String::new();
        loop {
            let c = self.peek()?;
            self.at += 1;
            match c {
                c if c == quote => return Some(value),
                '\\' if quote == '"' => {
                    let escaped = match self.peek()? {
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        '"' => '"',
                        '\\' => '\\',
                        // Not an escape: the backslash stays, the next character is read as usual.
                        _ => {
                            value.push('\\');
                            continue;
                        }
                    };
                    self.at += 1;
                    value.push(escaped);
                }
                '\n' => {
                    self.line += 1;
                    value.push('\n');
                }
                '\r' => {
                    if self.peek() == Some('\n') {
                        self.at += 1;
                    }
                    self.line += 1;
                    value.push('\n');
                }
                c => value.push(c),
            }
        }
    }
}

impl Entry {
    /// Adds an env file's variables (from [`parse_env_file`]) to a local server's
    /// environment. A variable the entry's `env` sets keeps the entry's value, as in VS Code
    /// (the file is read first, `env` applied over it); of a key repeated in the file, the
    /// last value counts. An HTTP entry has no environment: nothing changes.
    pub fn apply_env_file(&mut self, pairs: impl IntoIterator<Item = (String, String)>) {
        let TransportSpec::Stdio { env, .. } = &mut self.spec.transport else {
            return;
        };
        let from_file: BTreeMap<String, String> = pairs.into_iter().collect();
        for (key, value) in from_file {
            env.entry(key).or_insert(value);
        }
    }
}

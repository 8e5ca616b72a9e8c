//! The query language of `search_tools`.
//!
//! A query is one of three kinds, told apart by its start (after surrounding whitespace is
//! trimmed):
//!
//! - `select:NAME,NAME,…`: exact selection of exposed names, answered in the order given
//!   (repeats dropped, whitespace around each name ignored); names the catalog does not have
//!   are reported, not an error. At most [`MAX_LIMIT`] names.
//! - `regex:PATTERN`: a regular expression in the [`regex_lite`] crate's syntax (the `regex`
//!   crate's, RE2-like: no look-around, no backreferences; its classes and case folding are
//!   ASCII), case-insensitive unless the pattern says `(?-i)`, matched anywhere in each of a
//!   tool's exposed name, its original name, title, description and parameter names. The crate
//!   runs a PikeVM, so a search takes time linear in the text whatever the pattern; a pattern longer than [`MAX_PATTERN_LEN`] bytes, or one whose
//!   compiled program exceeds [`REGEX_SIZE_LIMIT`] bytes, is refused.
//! - anything else: words, ranked by BM25 ([`super::bm25`]).
//!
//! A query longer than [`MAX_QUERY_LEN`] bytes is refused whatever its kind.

use regex_lite::{Regex, RegexBuilder};

use super::tokenizer::tokenize;

/// The prefix of an exact selection.
pub const SELECT_PREFIX: &str = "select:";
/// The prefix of a regular expression.
pub const REGEX_PREFIX: &str = "regex:";
/// The longest query accepted, in bytes.
pub const MAX_QUERY_LEN: usize = 2048;
/// The longest regular expression accepted, in bytes.
pub const MAX_PATTERN_LEN: usize = 512;
/// The most a compiled regular expression may take ([`RegexBuilder::size_limit`]), in bytes.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;
/// How deeply groups and repetitions may nest ([`RegexBuilder::nest_limit`]).
pub const REGEX_NEST_LIMIT: u32 = 64;
/// The number of results when the caller names none.
pub const DEFAULT_LIMIT: usize = 5;
/// The most results (and `select:` names) one search gives.
pub const MAX_LIMIT: usize = 50;

/// A parsed query.
#[derive(Clone, Debug)]
pub enum Query {
    /// `select:…`: exposed names, in order, without repeats.
    Select(Vec<String>),
    /// `regex:…`: the compiled pattern.
    Regex(Regex),
    /// Words for BM25, in order (repeats kept; scoring counts each once).
    Words(Vec<String>),
}

/// What kind of query a search ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueryKind {
    /// `select:`.
    Select,
    /// `regex:`.
    Regex,
    /// BM25 over words.
    Words,
}

impl Query {
    /// Its kind.
    pub fn kind(&self) -> QueryKind {
        match self {
            Query::Select(_) => QueryKind::Select,
            Query::Regex(_) => QueryKind::Regex,
            Query::Words(_) => QueryKind::Words,
        }
    }
}

/// A search that cannot run. The messages are written for the model, which can correct its
/// query.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// The query holds no word to search for.
    #[error("the query has no words to search for: give words (`create issue`), `select:NAME,NAME` or `regex:PATTERN`")]
    EmptyQuery,
    /// `select:` without a name.
    #[error("`select:` names no tool: give exposed names separated by commas, e.g. `select:github__create_issue`")]
    EmptySelect,
    /// `select:` with more names than a search returns.
    #[error("`select:` names {given} tools; at most {max} at a time")]
    TooManyNames {
        /// How many were named.
        given: usize,
        /// The most accepted.
        max: usize,
    },
    /// The query is longer than accepted.
    #[error("the query is {len} bytes long; at most {max}")]
    QueryTooLong {
        /// Its length.
        len: usize,
        /// The most accepted.
        max: usize,
    },
    /// `regex:` without a pattern.
    #[error("`regex:` has no pattern after it")]
    EmptyPattern,
    /// The pattern is longer than accepted.
    #[error("the regular expression is {len} bytes long; at most {max}")]
    PatternTooLong {
        /// Its length.
        len: usize,
        /// The most accepted.
        max: usize,
    },
    /// The pattern does not compile, or compiles too big.
    #[error("bad regular expression {pattern:?}: {reason}")]
    BadPattern {
        /// The pattern as given.
        pattern: String,
        /// What the `regex` crate said.
        reason: String,
    },
    /// The limit is outside `1..=MAX_LIMIT`.
    #[error("`limit` must be from 1 to {max}, got {given}")]
    LimitOutOfRange {
        /// The limit asked for.
        given: u64,
        /// The most accepted.
        max: usize,
    },
}

/// Parses a `search_tools` query.
pub fn parse(query: &str) -> Result<Query, SearchError> {
    if query.len() > MAX_QUERY_LEN {
        return Err(SearchError::QueryTooLong {
            len: query.len(),
            max: MAX_QUERY_LEN,
        });
    }
    let query = query.trim();
    if let Some(names) = query.strip_prefix(SELECT_PREFIX) {
        let mut list: Vec<String> = Vec::new();
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !list.iter().any(|n| n == name) {
                list.push(name.to_owned());
            }
        }
        if list.is_empty() {
            return Err(SearchError::EmptySelect);
        }
        if list.len() > MAX_LIMIT {
            return Err(SearchError::TooManyNames {
                given: list.len(),
                max: MAX_LIMIT,
            });
        }
        return Ok(Query::Select(list));
    }
    if let Some(pattern) = query.strip_prefix(REGEX_PREFIX) {
        return compile(pattern).map(Query::Regex);
    }
    let words = tokenize(query);
    if words.is_empty() {
        return Err(SearchError::EmptyQuery);
    }
    Ok(Query::Words(words))
}

fn compile(pattern: &str) -> Result<Regex, SearchError> {
    if pattern.is_empty() {
        return Err(SearchError::EmptyPattern);
    }
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(SearchError::PatternTooLong {
            len: pattern.len(),
            max: MAX_PATTERN_LEN,
        });
    }
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .nest_limit(REGEX_NEST_LIMIT)
        .build()
        .map_err(|e| SearchError::BadPattern {
            pattern: pattern.to_owned(),
            reason: e.to_string(),
        })
}

/// Checks a result limit.
pub fn check_limit(limit: u64) -> Result<usize, SearchError> {
    match usize::try_from(limit) {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(SearchError::LimitOutOfRange {
            given: limit,
            max: MAX_LIMIT,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_by_their_prefix() {
        assert_eq!(
            parse("create issue").map(|q| q.kind()),
            Ok(QueryKind::Words)
        );
        assert_eq!(
            parse("  select:a ").map(|q| q.kind()),
            Ok(QueryKind::Select)
        );
        assert_eq!(parse("regex:^git").map(|q| q.kind()), Ok(QueryKind::Regex));
        // The prefixes are exact: anything else is words.
        assert_eq!(parse("Select:a").map(|q| q.kind()), Ok(QueryKind::Words));
        assert_eq!(parse("/git/").map(|q| q.kind()), Ok(QueryKind::Words));
    }

    #[test]
    fn select_keeps_order_and_drops_repeats_and_blanks() {
        let Ok(Query::Select(names)) = parse("select: b__x , a__y,,b__x, ") else {
            panic!("not a selection");
        };
        assert_eq!(names, ["b__x", "a__y"]);
        assert_eq!(
            parse("select:").map(|q| q.kind()),
            Err(SearchError::EmptySelect)
        );
        assert_eq!(
            parse("select: , ,").map(|q| q.kind()),
            Err(SearchError::EmptySelect)
        );
        let many = format!(
            "select:{}",
            (0..51)
                .map(|i| format!("n{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(
            parse(&many).map(|q| q.kind()),
            Err(SearchError::TooManyNames { given: 51, max: 50 })
        );
    }

    #[test]
    fn bad_regexes_are_typed_errors() {
        assert!(matches!(
            parse("regex:("),
            Err(SearchError::BadPattern { .. })
        ));
        assert!(matches!(
            parse("regex:(?<=a)b"),
            Err(SearchError::BadPattern { .. })
        ));
        assert_eq!(
            parse("regex:").map(|q| q.kind()),
            Err(SearchError::EmptyPattern)
        );
        let long = format!("regex:{}", "a".repeat(MAX_PATTERN_LEN + 1));
        assert!(matches!(
            parse(&long),
            Err(SearchError::PatternTooLong { .. })
        ));
        // Within the length limit but over the compiled size limit.
        assert!(matches!(
            parse("regex:(\\w{100}){100}"),
            Err(SearchError::BadPattern { .. })
        ));
    }

    #[test]
    fn regexes_are_case_insensitive_unless_told() {
        let Ok(Query::Regex(re)) = parse("regex:weather") else {
            panic!("not a regex");
        };
        assert!(re.is_match("Get the WEATHER"));
        let Ok(Query::Regex(re)) = parse("regex:(?-i)weather") else {
            panic!("not a regex");
        };
        assert!(!re.is_match("WEATHER"));
        // Case folding and classes are ASCII (regex-lite): the documented limit.
        let Ok(Query::Regex(re)) = parse("regex:café") else {
            panic!("not a regex");
        };
        assert!(re.is_match("CAFé"));
        assert!(!re.is_match("CAFÉ"));
        assert!(parse(r"regex:\p{Greek}").is_err());
    }

    #[test]
    fn empty_and_overlong_queries_are_refused() {
        assert_eq!(parse("").map(|q| q.kind()), Err(SearchError::EmptyQuery));
        assert_eq!(
            parse(" _-. ").map(|q| q.kind()),
            Err(SearchError::EmptyQuery)
        );
        let long = "a ".repeat(MAX_QUERY_LEN);
        assert!(matches!(
            parse(&long),
            Err(SearchError::QueryTooLong { .. })
        ));
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(check_limit(1), Ok(1));
        assert_eq!(check_limit(50), Ok(50));
        for bad in [0, 51, u64::MAX] {
            assert_eq!(
                check_limit(bad),
                Err(SearchError::LimitOutOfRange {
                    given: bad,
                    max: 50
                })
            );
        }
    }
}

//! The words of a text, as the tool search sees them.
//!
//! Written here rather than taken from a crate: the general-purpose tokenizers (`unicode-segmentation`'s
//! word bounds, the search engines' analyzers) keep `create_issue` and `createIssue` whole, and
//! identifiers are most of what a tool catalog holds. The rules:
//!
//! - a word is a run of alphanumeric characters (`char::is_alphanumeric`, so any script);
//!   everything else (`_`, `-`, `.`, `/`, whitespace, punctuation, symbols) separates words;
//! - inside a run, camelCase splits: before an uppercase letter that follows a lowercase letter
//!   or a digit (`createIssue` → `create`, `issue`; `s3Bucket` → `s3`, `bucket`), and before the
//!   last uppercase letter of an uppercase run that a lowercase letter follows (`HTTPServer` →
//!   `http`, `server`);
//! - digits stay with the letters around them (`base64`, `ec2`, `v2`);
//! - every word is lowercased (Unicode lowercasing).
//!
//! No stemming and no stop words: BM25's inverse document frequency already makes words that
//! every tool has (`the`, `a`) count for little.

/// The words of `text`, in order, lowercased (repeats kept).
pub fn tokenize(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for_each_word(text, |w| words.push(w));
    words
}

/// Calls `f` with each word of `text`, in order, lowercased.
pub(crate) fn for_each_word(text: &str, mut f: impl FnMut(String)) {
    let mut run_start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() {
            run_start.get_or_insert(i);
        } else if let Some(start) = run_start.take() {
            split_run(&text[start..i], &mut f);
        }
    }
    if let Some(start) = run_start {
        split_run(&text[start..], &mut f);
    }
}

/// Splits one alphanumeric run at its camelCase boundaries.
fn split_run(run: &str, f: &mut impl FnMut(String)) {
    let chars: Vec<(usize, char)> = run.char_indices().collect();
    let mut start = 0;
    for k in 1..chars.len() {
        let (at, c) = chars[k];
        let prev = chars[k - 1].1;
        let boundary = c.is_uppercase()
            && (prev.is_lowercase()
                || prev.is_numeric()
                || (prev.is_uppercase() && chars.get(k + 1).is_some_and(|n| n.1.is_lowercase())));
        if boundary {
            f(lower(&run[start..at]));
            start = at;
        }
    }
    f(lower(&run[start..]));
}

fn lower(word: &str) -> String {
    if word.is_ascii() {
        word.to_ascii_lowercase()
    } else {
        word.to_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::tokenize;

    fn words(text: &str) -> Vec<String> {
        tokenize(text)
    }

    #[test]
    fn separators_split_words() {
        assert_eq!(words("create_issue"), ["create", "issue"]);
        assert_eq!(words("list-pull-requests"), ["list", "pull", "requests"]);
        assert_eq!(words("fs.read_file"), ["fs", "read", "file"]);
        assert_eq!(
            words("  Search the web,  for (pages)!  "),
            ["search", "the", "web", "for", "pages"]
        );
        assert_eq!(words("a/b:c@d"), ["a", "b", "c", "d"]);
        assert!(words("").is_empty());
        assert!(words("__--..  ").is_empty());
    }

    #[test]
    fn camel_case_splits_and_lowercases() {
        assert_eq!(words("createIssue"), ["create", "issue"]);
        assert_eq!(words("CreateIssue"), ["create", "issue"]);
        assert_eq!(words("HTTPServer"), ["http", "server"]);
        assert_eq!(
            words("getHTTPResponseCode"),
            ["get", "http", "response", "code"]
        );
        assert_eq!(words("URL"), ["url"]);
        assert_eq!(words("parseURL"), ["parse", "url"]);
        assert_eq!(words("s3Bucket"), ["s3", "bucket"]);
    }

    #[test]
    fn digits_stay_with_their_word() {
        assert_eq!(words("base64_decode"), ["base64", "decode"]);
        assert_eq!(words("ec2 v2api"), ["ec2", "v2api"]);
        assert_eq!(words("2024 report"), ["2024", "report"]);
    }

    #[test]
    fn any_script_is_a_word_and_lowercased() {
        assert_eq!(words("Überprüfen_Datei"), ["überprüfen", "datei"]);
        assert_eq!(words("ファイル検索 tool"), ["ファイル検索", "tool"]);
        assert_eq!(words("ÉtéHiver"), ["été", "hiver"]);
    }
}

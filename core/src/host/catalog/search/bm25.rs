//! Okapi BM25 over the catalog's tools, one index per server.
//!
//! A tool's document is the words ([`super::tokenizer`]) of its fields, each word counted with
//! its field's weight (a simplified BM25F: the weighted counts are the term frequencies, and
//! their sum is the document length):
//!
//! | field | weight |
//! | --- | --- |
//! | the tool's name (as the server sent it) | [`NAME_WEIGHT`] |
//! | `title` and `annotations.title` | [`TITLE_WEIGHT`] |
//! | the parameter names (`inputSchema.properties` keys) | [`PARAMETER_WEIGHT`] |
//! | `description` | [`DESCRIPTION_WEIGHT`] |
//! | the server's id | [`SERVER_WEIGHT`] |
//!
//! A query's score for a document is the sum over its distinct words `t` of
//! `idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))` with [`K1`] = 1.2 and
//! [`B`] = 0.75 (the usual values), `idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))` (the
//! variant that never goes negative), `N` the number of tools in the catalog, `df` how many of
//! them have the word, `dl` the document's length and `avgdl` the mean length.
//!
//! Each server's postings belong to its own index, built when its tools are set and
//! dropped with it; the corpus-wide numbers (`N`, `df`, the total length) are one set of
//! counts, to which one server's index is added or from which it is subtracted at a time. Replacing one
//! server's tools (its `list_changed`) therefore costs that server's tools, never the
//! catalog's. All the numbers kept are integers, so the scores of a given catalog are the same
//! whatever order its servers came in.
//!
//! The word maps are `BTreeMap`s: a `HashMap`'s default hasher draws random keys, which the core
//! does not do, and no map here is iterated in a way its order could change a score.

use std::collections::BTreeMap;

use super::tokenizer::for_each_word;
use crate::mcp::results::Tool;

/// BM25's term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25's document-length normalization.
pub const B: f64 = 0.75;

/// Weight of a word of the tool's name.
pub const NAME_WEIGHT: u32 = 3;
/// Weight of a word of its title.
pub const TITLE_WEIGHT: u32 = 2;
/// Weight of a word of a parameter name.
pub const PARAMETER_WEIGHT: u32 = 2;
/// Weight of a word of its description.
pub const DESCRIPTION_WEIGHT: u32 = 1;
/// Weight of a word of its server's id.
pub const SERVER_WEIGHT: u32 = 1;

/// One word in one document: the document's position in its server's tool list, and the
/// word's weighted count there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Posting {
    doc: u32,
    tf: u32,
}

/// The postings of one server's tools.
#[derive(Clone, Debug, Default)]
pub(crate) struct ServerIndex {
    /// Word → the documents that have it, in document order.
    postings: BTreeMap<Box<str>, Vec<Posting>>,
    /// Each document's weighted length.
    lengths: Vec<u32>,
    /// Their sum.
    total_length: u64,
}

impl ServerIndex {
    /// The index of `tools` (documents numbered in the slice's order) on server `server`.
    pub(crate) fn build(server: &str, tools: &[Tool]) -> ServerIndex {
        let mut index = ServerIndex::default();
        let mut server_words: Vec<String> = Vec::new();
        for_each_word(server, |w| server_words.push(w));
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        for (doc, tool) in tools.iter().enumerate() {
            counts.clear();
            let mut length = 0u32;
            let mut add = |word: String, weight: u32| {
                length = length.saturating_add(weight);
                let c = counts.entry(word).or_insert(0);
                *c = c.saturating_add(weight);
            };
            for_each_word(&tool.name, |w| add(w, NAME_WEIGHT));
            if let Some(title) = &tool.title {
                for_each_word(title, |w| add(w, TITLE_WEIGHT));
            }
            if let Some(title) = tool.annotations.as_ref().and_then(|a| a.title.as_ref()) {
                if tool.title.as_ref() != Some(title) {
                    for_each_word(title, |w| add(w, TITLE_WEIGHT));
                }
            }
            if let Some(properties) = parameters(tool) {
                for key in properties.keys() {
                    for_each_word(key, |w| add(w, PARAMETER_WEIGHT));
                }
            }
            if let Some(description) = &tool.description {
                for_each_word(description, |w| add(w, DESCRIPTION_WEIGHT));
            }
            for w in &server_words {
                add(w.clone(), SERVER_WEIGHT);
            }
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            for (word, &tf) in &counts {
                let list = match index.postings.get_mut(word.as_str()) {
                    Some(list) => list,
                    None => index.postings.entry(word.as_str().into()).or_default(),
                };
                list.push(Posting { doc, tf });
            }
            index.lengths.push(length);
            index.total_length += u64::from(length);
        }
        index
    }

    /// How many documents.
    pub(crate) fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Adds the BM25 score of `terms` to `scores` (one slot per document of this server).
    pub(crate) fn score(&self, terms: &[ScoredTerm<'_>], avgdl: f64, scores: &mut [f64]) {
        for term in terms {
            let Some(list) = self.postings.get(term.word) else {
                continue;
            };
            for p in list {
                let (Some(slot), Some(&dl)) = (
                    scores.get_mut(p.doc as usize),
                    self.lengths.get(p.doc as usize),
                ) else {
                    continue;
                };
                let tf = f64::from(p.tf);
                let norm = K1 * (1.0 - B + B * f64::from(dl) / avgdl);
                *slot += term.idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
    }
}

/// The parameter names' object: `inputSchema.properties`, when it is an object.
pub(crate) fn parameters(tool: &Tool) -> Option<&serde_json::Map<String, serde_json::Value>> {
    tool.input_schema.get("properties")?.as_object()
}

/// A query word with its inverse document frequency.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScoredTerm<'q> {
    pub(crate) word: &'q str,
    pub(crate) idf: f64,
}

/// The corpus-wide numbers: how many documents, their total length, and each word's document
/// frequency.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CorpusStats {
    documents: u64,
    total_length: u64,
    df: BTreeMap<Box<str>, u64>,
}

impl CorpusStats {
    /// Counts one server's index in.
    pub(crate) fn add(&mut self, index: &ServerIndex) {
        self.documents += index.lengths.len() as u64;
        self.total_length += index.total_length;
        for (word, list) in &index.postings {
            match self.df.get_mut(word) {
                Some(n) => *n += list.len() as u64,
                None => {
                    self.df.insert(word.clone(), list.len() as u64);
                }
            }
        }
    }

    /// Counts one server's index out (the index that was added).
    pub(crate) fn remove(&mut self, index: &ServerIndex) {
        self.documents = self.documents.saturating_sub(index.lengths.len() as u64);
        self.total_length = self.total_length.saturating_sub(index.total_length);
        for (word, list) in &index.postings {
            if let Some(n) = self.df.get_mut(word) {
                *n = n.saturating_sub(list.len() as u64);
                if *n == 0 {
                    self.df.remove(word);
                }
            }
        }
    }

    /// The mean document length (1 for an empty corpus, to keep the formula finite).
    pub(crate) fn average_length(&self) -> f64 {
        if self.documents == 0 || self.total_length == 0 {
            1.0
        } else {
            self.total_length as f64 / self.documents as f64
        }
    }

    /// The query's distinct words that some document has, in query order, with their idf.
    pub(crate) fn terms<'q>(&self, words: &'q [String]) -> Vec<ScoredTerm<'q>> {
        let n = self.documents as f64;
        let mut terms: Vec<ScoredTerm<'q>> = Vec::new();
        for word in words {
            if terms.iter().any(|t| t.word == word) {
                continue;
            }
            let Some(&df) = self.df.get(word.as_str()) else {
                continue;
            };
            let df = df as f64;
            terms.push(ScoredTerm {
                word,
                idf: (1.0 + (n - df + 0.5) / (df + 0.5)).ln(),
            });
        }
        terms
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str, params: &[&str]) -> Tool {
        let properties: serde_json::Map<String, serde_json::Value> = params
            .iter()
            .map(|p| ((*p).to_owned(), json!({"type": "string"})))
            .collect();
        let schema = json!({"type": "object", "properties": properties});
        Tool {
            name: name.to_owned(),
            description: Some(description.to_owned()),
            input_schema: schema.as_object().unwrap().clone(),
            ..Tool::default()
        }
    }

    fn scores(stats: &CorpusStats, index: &ServerIndex, query: &[&str]) -> Vec<f64> {
        let words: Vec<String> = query.iter().map(|w| (*w).to_owned()).collect();
        let terms = stats.terms(&words);
        let mut s = vec![0.0; index.len()];
        index.score(&terms, stats.average_length(), &mut s);
        s
    }

    #[test]
    fn fields_are_weighted_and_parameters_indexed() {
        let tools = [
            tool("create_issue", "Open a ticket", &[]),
            tool("open_ticket", "Create an issue in a tracker", &[]),
            tool("comment", "Add a comment", &["issue_number"]),
        ];
        let index = ServerIndex::build("tracker", &tools);
        let mut stats = CorpusStats::default();
        stats.add(&index);
        let s = scores(&stats, &index, &["issue"]);
        // In the name (weight 3) beats in a parameter name (2) beats in the description (1).
        assert!(s[0] > s[2] && s[2] > s[1] && s[1] > 0.0, "{s:?}");
        // The server's id is a field too.
        assert!(scores(&stats, &index, &["tracker"])
            .iter()
            .all(|&x| x > 0.0));
        // A word no tool has scores nothing.
        assert!(scores(&stats, &index, &["weather"])
            .iter()
            .all(|&x| x == 0.0));
    }

    #[test]
    fn rare_words_count_more_than_common_ones() {
        let tools = [
            tool("a", "list files", &[]),
            tool("b", "list users", &[]),
            tool("c", "list repos", &[]),
        ];
        let index = ServerIndex::build("s", &tools);
        let mut stats = CorpusStats::default();
        stats.add(&index);
        let s = scores(&stats, &index, &["list", "users"]);
        assert!(s[1] > s[0] && s[0] == s[2] && s[0] > 0.0, "{s:?}");
    }

    #[test]
    fn repeated_query_words_count_once() {
        let index = ServerIndex::build("s", &[tool("a", "x y", &[]), tool("b", "y", &[])]);
        let mut stats = CorpusStats::default();
        stats.add(&index);
        assert_eq!(
            scores(&stats, &index, &["x"]),
            scores(&stats, &index, &["x", "x"])
        );
    }

    #[test]
    fn removing_an_index_undoes_adding_it() {
        let one = ServerIndex::build("one", &[tool("a", "alpha beta", &["p"])]);
        let two = ServerIndex::build("two", &[tool("b", "beta gamma", &[])]);
        let mut stats = CorpusStats::default();
        stats.add(&one);
        let before = stats.clone();
        stats.add(&two);
        assert_ne!(stats, before);
        stats.remove(&two);
        assert_eq!(stats, before);
        stats.remove(&one);
        assert_eq!(stats, CorpusStats::default());
    }
}

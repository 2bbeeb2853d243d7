//! Search over a catalogue of tools: BM25F over a tool's fields, and the providers' regex search.
//!
//! A document is one tool: its name, its namespace (the MCP server or local service it comes
//! from), its description, and its parameters' names and descriptions (enum values included).
//! Each field is tokenised the same way (names split on `_`, `-`, `.` and camelCase; lower case;
//! English stop words dropped; Snowball-stemmed) and weighted on its own (BM25F: a word in a
//! tool's name counts more than one deep in a parameter's description). The index is built once
//! per catalogue and read by many queries at once; a query may be limited to the documents a
//! request is allowed to see, so one index serves every tenant without showing one another's.

use regex::RegexBuilder;
use rust_stemmers::{Algorithm, Stemmer};
use rustc_hash::FxHashMap;

/// A tool as search sees it.
#[derive(Clone, Debug, Default)]
pub struct Document {
    /// The tool's name.
    pub name: String,
    /// Its MCP server or local service (empty for none).
    pub namespace: String,
    /// Its description.
    pub description: String,
    /// (parameter name, its description and enum values), nested parameters flattened.
    pub parameters: Vec<(String, String)>,
}

#[derive(Clone, Copy)]
enum Field {
    Name,
    Namespace,
    Description,
    ParameterName,
    ParameterText,
}

const FIELDS: [Field; 5] = [
    Field::Name,
    Field::Namespace,
    Field::Description,
    Field::ParameterName,
    Field::ParameterText,
];

impl Field {
    /// How much a word in this field counts, and how much the field's length tempers it (b).
    /// Tuned on a held-out half of BFCL's questions (docs/search.md, "Tool search").
    fn weight(self) -> (f32, f32) {
        match self {
            Field::Name => (2.0, 0.5),
            Field::Namespace => (1.0, 0.5),
            Field::Description => (1.0, 0.5),
            Field::ParameterName => (1.0, 0.5),
            Field::ParameterText => (0.5, 0.5),
        }
    }
}

const K1: f32 = 1.2;
/// Longest regex pattern accepted, as Anthropic's regex tool search allows.
pub const MAX_PATTERN_CHARS: usize = 200;
const REGEX_SIZE_LIMIT: usize = 1 << 20;

const STOP_WORDS: &[&str] = &[
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "but", "by", "can", "could", "do",
    "does", "for", "from", "get", "give", "have", "how", "i", "if", "in", "into", "is", "it",
    "like", "me", "my", "need", "no", "not", "of", "on", "or", "our", "please", "should", "such",
    "that", "the", "their", "then", "there", "these", "they", "this", "to", "use", "using", "want",
    "was", "we", "what", "which", "who", "will", "with", "would", "you", "your",
];

/// The words of `text`: camelCase and every non-alphanumeric character split, lower case,
/// stop words dropped, each stemmed.
pub fn tokens(stemmer: &Stemmer, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in split_words(text) {
        if !STOP_WORDS.contains(&word.as_str()) {
            out.push(stemmer.stem(&word).into_owned());
        }
    }
    out
}

/// Lower-cased alphanumeric runs, split where camelCase turns (`getWeatherNow` -> get, weather,
/// now; `HTTPServer` -> http, server).
fn split_words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut current, &mut words);
            continue;
        }
        if c.is_uppercase() && !current.is_empty() {
            let previous = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if previous.is_lowercase()
                || previous.is_numeric()
                || (previous.is_uppercase() && next_lower)
            {
                flush(&mut current, &mut words);
            }
        }
        current.extend(c.to_lowercase());
    }
    flush(&mut current, &mut words);
    words
}

fn flush(current: &mut String, words: &mut Vec<String>) {
    if !current.is_empty() {
        words.push(std::mem::take(current));
    }
}

/// A built catalogue: postings of weighted term frequencies per document.
pub struct Index {
    documents: Vec<Document>,
    /// term -> (document, field-weighted, length-normalised frequency)
    postings: FxHashMap<String, Vec<(u32, f32)>>,
    idf: FxHashMap<String, f32>,
    stemmer: Stemmer,
}

impl Index {
    /// Index `documents` (their order is their number in results).
    pub fn build(documents: Vec<Document>) -> Self {
        let stemmer = Stemmer::create(Algorithm::English);
        let fields: Vec<[Vec<String>; 5]> = documents
            .iter()
            .map(|d| field_tokens(&stemmer, d))
            .collect();
        let count = documents.len().max(1) as f32;
        let mut average = [0f32; 5];
        for doc in &fields {
            for (slot, words) in average.iter_mut().zip(doc) {
                *slot += words.len() as f32 / count;
            }
        }
        let mut postings: FxHashMap<String, Vec<(u32, f32)>> = FxHashMap::default();
        for (number, doc) in fields.iter().enumerate() {
            let mut weighted: FxHashMap<&str, f32> = FxHashMap::default();
            for ((field, words), avg) in FIELDS.iter().zip(doc).zip(average) {
                let (weight, b) = field.weight();
                let norm = if avg > 0.0 {
                    1.0 - b + b * words.len() as f32 / avg
                } else {
                    1.0
                };
                for word in words {
                    *weighted.entry(word.as_str()).or_default() += weight / norm;
                }
            }
            for (word, tf) in weighted {
                postings
                    .entry(word.to_owned())
                    .or_default()
                    .push((number as u32, tf));
            }
        }
        let n = documents.len() as f32;
        let idf = postings
            .iter()
            .map(|(word, list)| {
                let df = list.len() as f32;
                (word.clone(), (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
            })
            .collect();
        Self {
            documents,
            postings,
            idf,
            stemmer,
        }
    }

    /// How many documents the index holds.
    pub fn len(&self) -> usize {
        self.documents.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }

    /// The document numbered `number` (its place in the catalogue the index was built from).
    pub fn document(&self, number: usize) -> Option<&Document> {
        self.documents.get(number)
    }

    /// The best `limit` documents for `query` that `allowed` admits, best first, with scores;
    /// ties keep catalogue order. Documents sharing no word with the query are not returned.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        allowed: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        let mut words = tokens(&self.stemmer, query);
        words.sort_unstable();
        words.dedup();
        let mut scores: FxHashMap<u32, f32> = FxHashMap::default();
        for word in &words {
            let (Some(list), Some(&idf)) = (self.postings.get(word), self.idf.get(word)) else {
                continue;
            };
            for &(number, tf) in list {
                *scores.entry(number).or_default() += idf * tf * (K1 + 1.0) / (tf + K1);
            }
        }
        let mut ranked: Vec<(usize, f32)> = scores
            .into_iter()
            .map(|(n, s)| (n as usize, s))
            .filter(|&(n, _)| allowed(n))
            .collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(limit);
        ranked
    }

    /// Documents whose name, description or a parameter's name or description matches
    /// `pattern` (Python `re.search` semantics for the common syntax; case-insensitive with
    /// `(?i)`), in catalogue order.
    pub fn search_regex(
        &self,
        pattern: &str,
        limit: usize,
        allowed: &dyn Fn(usize) -> bool,
    ) -> Result<Vec<usize>, String> {
        if pattern.chars().count() > MAX_PATTERN_CHARS {
            return Err(format!(
                "the pattern is longer than {MAX_PATTERN_CHARS} characters"
            ));
        }
        let regex = RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| e.to_string())?;
        let found = self.documents.iter().enumerate().filter(|&(n, doc)| {
            allowed(n)
                && (regex.is_match(&doc.name)
                    || regex.is_match(&doc.description)
                    || doc
                        .parameters
                        .iter()
                        .any(|(p, text)| regex.is_match(p) || regex.is_match(text)))
        });
        Ok(found.map(|(n, _)| n).take(limit).collect())
    }
}

fn field_tokens(stemmer: &Stemmer, doc: &Document) -> [Vec<String>; 5] {
    let names: Vec<&str> = doc.parameters.iter().map(|(n, _)| n.as_str()).collect();
    let texts: Vec<&str> = doc.parameters.iter().map(|(_, t)| t.as_str()).collect();
    [
        tokens(stemmer, &doc.name),
        tokens(stemmer, &doc.namespace),
        tokens(stemmer, &doc.description),
        tokens(stemmer, &names.join(" ")),
        tokens(stemmer, &texts.join(" ")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, description: &str) -> Document {
        Document {
            name: name.into(),
            description: description.into(),
            ..Document::default()
        }
    }

    #[test]
    fn names_split_on_case_and_punctuation() {
        assert_eq!(split_words("getWeatherNow"), ["get", "weather", "now"]);
        assert_eq!(
            split_words("HTTPServer_v2-list.items"),
            ["http", "server", "v2", "list", "items"]
        );
        assert_eq!(
            split_words("Weather_1_GetWeather"),
            ["weather", "1", "get", "weather"]
        );
    }

    #[test]
    fn a_name_match_outranks_a_description_match() {
        let index = Index::build(vec![
            doc("send_email", "Deliver a message to an inbox."),
            doc("list_files", "Lists files; can email the list to someone."),
        ]);
        let hits = index.search("email", 5, &|_| true);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn stems_meet_and_stop_words_do_not_count() {
        let index = Index::build(vec![
            doc("calculator", "Calculates sums"),
            doc("other", "the the the"),
        ]);
        let hits = index.search("calculating the sum", 5, &|_| true);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 0);
    }

    #[test]
    fn only_allowed_documents_are_returned() {
        let index = Index::build(vec![
            doc("weather_a", "weather"),
            doc("weather_b", "weather"),
        ]);
        let hits = index.search("weather", 5, &|n| n == 1);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1]);
        assert_eq!(index.search_regex("weather", 5, &|n| n == 0).unwrap(), [0]);
    }

    #[test]
    fn regex_patterns_are_bounded() {
        let index = Index::build(vec![doc("a", "b")]);
        assert!(index.search_regex(&"a".repeat(201), 5, &|_| true).is_err());
        assert!(index.search_regex("(", 5, &|_| true).is_err());
        assert_eq!(index.search_regex("(?i)^A$", 5, &|_| true).unwrap(), [0]);
    }
}

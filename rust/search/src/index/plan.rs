//! Query planning: which trigrams a file must hold for the pattern to possibly match, read off
//! the pattern's `Hir` parsed with the flags grep compiles it with. Anything unsure widens the
//! plan (towards `All`), never narrows it: the real searcher still decides every match.

use regex_syntax::hir::{Class, Hir, HirKind};
use regex_syntax::ParserBuilder;

use super::trigram::{fold, of_folded};
use crate::grep::GrepOptions;

/// A boolean condition on a file's trigrams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Query {
    /// No constraint: every file is a candidate.
    All,
    /// All of these trigrams (sorted, distinct, non-empty).
    Grams(Vec<u32>),
    And(Vec<Query>),
    Or(Vec<Query>),
}

/// The plan for `pattern` as grep compiles it with `opts`.
pub(crate) fn plan(pattern: &str, opts: &GrepOptions) -> Query {
    let escaped;
    let pattern = if opts.fixed_strings {
        escaped = regex_syntax::escape(pattern);
        &escaped
    } else {
        pattern
    };
    let parsed = ParserBuilder::new()
        .case_insensitive(opts.case_insensitive)
        .multi_line(true)
        .dot_matches_new_line(opts.multiline)
        .build()
        .parse(pattern);
    match parsed {
        Ok(hir) => query(&hir),
        // grep accepted it but this parser did not: no constraint, the search stays exact.
        Err(_) => Query::All,
    }
}

fn query(h: &Hir) -> Query {
    if let Some(bytes) = literal(h) {
        return grams(&bytes);
    }
    match h.kind() {
        HirKind::Capture(c) => query(&c.sub),
        HirKind::Repetition(r) if r.min >= 1 => query(&r.sub),
        HirKind::Concat(items) => {
            let mut parts = Vec::new();
            let mut run = Vec::new();
            for item in items {
                match literal(item) {
                    Some(bytes) => run.extend_from_slice(&bytes),
                    None => {
                        parts.push(grams(&std::mem::take(&mut run)));
                        parts.push(query(item));
                    }
                }
            }
            parts.push(grams(&run));
            and(parts)
        }
        HirKind::Alternation(items) => {
            let mut branches = Vec::new();
            for item in items {
                match query(item) {
                    Query::All => return Query::All,
                    q => branches.push(q),
                }
            }
            Query::Or(branches)
        }
        _ => Query::All,
    }
}

/// The folded bytes `h` matches exactly, if it is a literal (or a sequence of literals and
/// classes that fold to one ASCII byte).
fn literal(h: &Hir) -> Option<Vec<u8>> {
    match h.kind() {
        HirKind::Literal(l) => Some(l.0.iter().map(|&b| fold(b)).collect()),
        HirKind::Class(c) => one_byte(c).map(|b| vec![b]),
        HirKind::Capture(c) => literal(&c.sub),
        HirKind::Concat(items) => {
            let mut out = Vec::new();
            for item in items {
                out.extend(literal(item)?);
            }
            Some(out)
        }
        _ => None,
    }
}

/// A class whose members all fold to the same ASCII byte (`[Aa]`); a non-ASCII member (the
/// Kelvin sign in `(?i)k`) makes it `None`.
fn one_byte(c: &Class) -> Option<u8> {
    let mut members: Vec<u32> = Vec::new();
    match c {
        Class::Unicode(u) => {
            for r in u.ranges() {
                members.extend((r.start() as u32)..=(r.end() as u32).min(r.start() as u32 + 4));
            }
        }
        Class::Bytes(b) => {
            for r in b.ranges() {
                members.extend(
                    u32::from(r.start())..=u32::from(r.end()).min(u32::from(r.start()) + 4),
                );
            }
        }
    }
    let first = *members.first()?;
    if members.len() > 4 || members.iter().any(|&m| m > 0x7F) {
        return None;
    }
    let byte = fold(first as u8);
    members
        .iter()
        .all(|&m| fold(m as u8) == byte)
        .then_some(byte)
}

fn grams(folded: &[u8]) -> Query {
    if folded.len() < 3 {
        Query::All
    } else {
        Query::Grams(of_folded(folded))
    }
}

/// Conjunction, flattened: `All` parts drop out, trigram sets merge.
fn and(parts: Vec<Query>) -> Query {
    let mut grams: Vec<u32> = Vec::new();
    let mut rest = Vec::new();
    for part in parts {
        match part {
            Query::All => {}
            Query::Grams(g) => grams.extend(g),
            Query::And(inner) => match and(inner) {
                Query::Grams(g) => grams.extend(g),
                Query::And(more) => rest.extend(more),
                other => rest.push(other),
            },
            other => rest.push(other),
        }
    }
    grams.sort_unstable();
    grams.dedup();
    if !grams.is_empty() {
        rest.insert(0, Query::Grams(grams));
    }
    match rest.len() {
        0 => Query::All,
        1 => rest.pop().unwrap_or(Query::All),
        _ => Query::And(rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pattern: &str) -> Query {
        plan(pattern, &GrepOptions::default())
    }

    fn g(s: &str) -> Query {
        Query::Grams(of_folded(s.as_bytes()))
    }

    #[test]
    fn literals_fold_to_lowercase() {
        assert_eq!(p("Hello"), g("hello"));
        assert_eq!(p("ab"), Query::All);
    }

    #[test]
    fn concatenation_with_a_gap_keeps_both_sides() {
        assert_eq!(p(r"class \w+Error"), and(vec![g("class "), g("error")]));
    }

    #[test]
    fn alternation_is_or_and_an_open_branch_is_all() {
        assert_eq!(p("foo|barbaz"), Query::Or(vec![g("foo"), g("barbaz")]));
        assert_eq!(p("foo|ba"), Query::All);
        assert_eq!(p("x(foo|bar)y"), Query::Or(vec![g("foo"), g("bar")]));
    }

    #[test]
    fn case_insensitive_classes_fold_but_kelvin_breaks_the_run() {
        let ci = GrepOptions {
            case_insensitive: true,
            ..GrepOptions::default()
        };
        assert_eq!(plan("HELLO", &ci), g("hello"));
        assert_eq!(p("(?i)hello"), g("hello"));
        // `k` and `s` have non-ASCII case variants (KELVIN SIGN, LONG S): the run breaks there.
        assert_eq!(p("(?i)parking"), and(vec![g("par"), g("ing")]));
        assert_eq!(p("[Tt]ool"), g("tool"));
        assert_eq!(p("(?i)ks"), Query::All);
    }

    #[test]
    fn repetition_and_classes() {
        assert_eq!(p("(abc)+"), g("abc"));
        assert_eq!(p("(abc)*def"), g("def"));
        assert_eq!(p("(abc)?"), Query::All);
        assert_eq!(p("[a-z]+"), Query::All);
        assert_eq!(p(r"\w+\s*=\s*\d+"), Query::All);
        assert_eq!(p("^$"), Query::All);
    }

    #[test]
    fn fixed_strings_are_escaped_and_bad_syntax_is_all() {
        let fixed = GrepOptions {
            fixed_strings: true,
            ..GrepOptions::default()
        };
        assert_eq!(plan("a.b(c", &fixed), g("a.b(c"));
        assert_eq!(p("a.b"), Query::All);
        assert_eq!(p("(unclosed"), Query::All);
    }
}

//! Paging and rendering of grep's collected rows: which rows a page holds (searching a file again
//! when its rows were not kept), and rg's text format within a character budget.

use super::grep::{Grep, GrepOutcome, Row, RowKind};
use toolroute_textsafety::CUT_NOTICE;

/// A page of rows in output order: `(file index, row)` for rows `offset..offset+limit`.
pub fn page(
    grep: &Grep,
    outcome: &GrepOutcome,
    follow: bool,
    offset: usize,
    limit: Option<usize>,
) -> Vec<(usize, Row)> {
    rows_from(grep, outcome, follow, offset, limit).collect()
}

/// The rows of a page as they are needed: a file whose rows were not kept is searched again
/// only when the page reaches it (a page cut at a character budget stops early).
pub fn rows_from<'a>(
    grep: &'a Grep,
    outcome: &'a GrepOutcome,
    follow: bool,
    offset: usize,
    limit: Option<usize>,
) -> impl Iterator<Item = (usize, Row)> + 'a {
    let end = limit.map_or(usize::MAX, |l| offset.saturating_add(l));
    let mut first = 0usize;
    outcome
        .files
        .iter()
        .enumerate()
        .map_while(move |(index, hits)| {
            let at = first;
            first += hits.row_count;
            (at < end).then_some((index, hits, at))
        })
        .filter(move |(_, hits, at)| at + hits.row_count > offset)
        .flat_map(move |(index, hits, at)| {
            let rows = grep.rows(outcome, hits, follow);
            let from = offset.saturating_sub(at);
            let to = (end - at).min(rows.len());
            rows.into_iter()
                .take(to)
                .skip(from)
                .map(move |r| (index, r))
        })
}

/// Render rows as rg does (`path:line:text`, `path-line-text` for context, `--`), stopping before
/// `max_chars`. Returns the text and the rows it holds.
pub fn render(
    outcome: &GrepOutcome,
    rows: impl IntoIterator<Item = (usize, Row)>,
    max_chars: usize,
    max_line_chars: usize,
) -> (String, Vec<(usize, Row)>) {
    let mut text = String::new();
    let mut chars = 0usize;
    let mut shown = Vec::new();
    for (index, row) in rows {
        let path = &outcome.files[index].display;
        let line = match row.kind {
            RowKind::Match | RowKind::Context => {
                let sep = if row.kind == RowKind::Match { ':' } else { '-' };
                let body = cut_line(&row.text, row.truncated, max_line_chars);
                format!("{path}{sep}{}{sep}{body}", row.line)
            }
            RowKind::Break => "--".to_string(),
            RowKind::File => path.clone(),
            RowKind::Count => format!("{path}:{}", row.count),
        };
        let cost = line.chars().count() + 1;
        if chars + cost > max_chars && !shown.is_empty() {
            break;
        }
        if chars + cost > max_chars {
            // Even the first row does not fit: show what fits of it rather than nothing.
            let keep = max_chars.saturating_sub(CUT_NOTICE.chars().count() + 1);
            let cut: String = line.chars().take(keep).collect();
            text.push_str(&cut);
            text.push_str(CUT_NOTICE);
            text.push('\n');
            shown.push((index, row));
            break;
        }
        chars += cost;
        text.push_str(&line);
        text.push('\n');
        shown.push((index, row));
    }
    (text, shown)
}

fn cut_line(text: &str, truncated: bool, max_chars: usize) -> String {
    let n = text.chars().count();
    if n <= max_chars && !truncated {
        return text.to_string();
    }
    let kept: String = text.chars().take(max_chars).collect();
    format!("{kept} … [line cut at {max_chars} chars]")
}

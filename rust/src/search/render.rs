//! Paging and rendering of grep's collected rows: which rows a page holds (searching a file again
//! when its rows were not kept), and rg's text format within a character budget.

use super::grep::{Grep, GrepOutcome, Row, RowKind};

/// A page of rows in output order: `(file index, row)` for rows `offset..offset+limit`.
pub fn page(
    grep: &Grep,
    outcome: &GrepOutcome,
    follow: bool,
    offset: usize,
    limit: Option<usize>,
) -> Vec<(usize, Row)> {
    let end = limit.map_or(usize::MAX, |l| offset.saturating_add(l));
    let mut out = Vec::new();
    let mut first = 0usize;
    for (index, hits) in outcome.files.iter().enumerate() {
        let last = first + hits.row_count;
        if last > offset && first < end {
            let rows = grep.rows(outcome, hits, follow);
            let from = offset.saturating_sub(first);
            let to = (end - first).min(rows.len());
            out.extend(rows.into_iter().take(to).skip(from).map(|r| (index, r)));
        }
        if last >= end {
            break;
        }
        first = last;
    }
    out
}

/// Render rows as rg does (`path:line:text`, `path-line-text` for context, `--`), stopping before
/// `max_chars`. Returns the text and how many rows it holds.
pub fn render(
    outcome: &GrepOutcome,
    rows: &[(usize, Row)],
    max_chars: usize,
    max_line_chars: usize,
) -> (String, usize) {
    let mut text = String::new();
    let mut chars = 0usize;
    for (shown, (index, row)) in rows.iter().enumerate() {
        let path = &outcome.files[*index].display;
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
        if chars + cost > max_chars && shown > 0 {
            return (text, shown);
        }
        if chars + cost > max_chars {
            // Even the first row does not fit: show what fits of it rather than nothing.
            let keep = max_chars.saturating_sub(CUT_NOTICE.chars().count() + 1);
            let cut: String = line.chars().take(keep).collect();
            text.push_str(&cut);
            text.push_str(CUT_NOTICE);
            text.push('\n');
            return (text, 1);
        }
        chars += cost;
        text.push_str(&line);
        text.push('\n');
    }
    (text, rows.len())
}

fn cut_line(text: &str, truncated: bool, max_chars: usize) -> String {
    let n = text.chars().count();
    if n <= max_chars && !truncated {
        return text.to_string();
    }
    let kept: String = text.chars().take(max_chars).collect();
    format!("{kept} … [line cut at {max_chars} chars]")
}

/// The one wording for output cut at the character cap: exported as `_core.CUT_NOTICE`, which
/// `toolroute.outputcap` applies to every built-in's text.
pub const CUT_NOTICE: &str = " … [output cut at the size limit]";

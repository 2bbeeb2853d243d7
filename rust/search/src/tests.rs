//! Tests of the walker, grep and glob on real files in temporary directories.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::glob::{self, GlobSort};
use super::grep::{Grep, GrepOptions, OutputMode, RowKind};
use super::render;
use super::walker::{WalkOptions, Walker};
use super::SearchError;
use toolroute_files::Roots;

fn write(root: &Path, rel: &str, content: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn tree() -> (tempfile::TempDir, PathBuf, Roots) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    write(&ws, "a.py", b"import os\nneedle = 1\nprint(needle)\n");
    write(&ws, "src/lib.rs", b"fn needle() {}\n");
    write(&ws, "build/out.py", b"needle\n");
    write(&ws, "notes.log", b"needle\n");
    write(&ws, ".hidden/h.py", b"needle\n");
    write(&ws, ".gitignore", b"build/\n*.log\n");
    let roots = Roots::new(&ws, &[]).unwrap();
    let canon = ws.canonicalize().unwrap();
    (dir, canon, roots)
}

fn opts() -> WalkOptions {
    WalkOptions::default()
}

fn grep_paths(roots: &Roots, pattern: &str, walk: WalkOptions, g: GrepOptions) -> Vec<String> {
    let grep = Grep::new(pattern, g).unwrap();
    let walker = Walker::new(roots, None, walk).unwrap();
    grep.run(&walker)
        .files
        .into_iter()
        .map(|f| f.display)
        .collect()
}

fn content() -> GrepOptions {
    GrepOptions::default()
}

#[test]
fn gitignore_applies_outside_git_unless_require_git() {
    let (_d, _ws, roots) = tree();
    let found = grep_paths(&roots, "needle", opts(), content());
    assert_eq!(found, vec!["a.py", "src/lib.rs"]);
    // ripgrep's default: outside a git repository .gitignore is not read.
    let rg_like = WalkOptions {
        require_git: true,
        ..opts()
    };
    let found = grep_paths(&roots, "needle", rg_like, content());
    assert_eq!(
        found,
        vec!["a.py", "build/out.py", "notes.log", "src/lib.rs"]
    );
}

#[test]
fn gitignore_applies_inside_git_with_require_git() {
    let (_d, ws, roots) = tree();
    fs::create_dir(ws.join(".git")).unwrap();
    let rg_like = WalkOptions {
        require_git: true,
        ..opts()
    };
    assert_eq!(
        grep_paths(&roots, "needle", rg_like, content()),
        vec!["a.py", "src/lib.rs"]
    );
}

#[test]
fn dot_ignore_and_no_ignore_and_hidden() {
    let (_d, ws, roots) = tree();
    write(&ws, "src/.ignore", b"lib.rs\n");
    assert_eq!(
        grep_paths(&roots, "needle", opts(), content()),
        vec!["a.py"]
    );
    let all = WalkOptions {
        no_ignore: true,
        ..opts()
    };
    assert_eq!(
        grep_paths(&roots, "needle", all, content()),
        vec!["a.py", "build/out.py", "notes.log", "src/lib.rs"]
    );
    let hidden = WalkOptions {
        hidden: true,
        ..opts()
    };
    assert_eq!(
        grep_paths(&roots, "needle", hidden, content()),
        vec![".hidden/h.py", "a.py"]
    );
}

#[test]
fn skip_statistics_count_ignored_and_hidden() {
    let (_d, _ws, roots) = tree();
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, None, opts()).unwrap());
    // build/ (one entry) and notes.log are ignored; .hidden and .gitignore are hidden.
    assert_eq!(out.stats.ignored, 2);
    assert_eq!(out.stats.hidden, 2);
    let all = WalkOptions {
        no_ignore: true,
        hidden: true,
        ..opts()
    };
    let out = grep.run(&Walker::new(&roots, None, all).unwrap());
    assert_eq!((out.stats.ignored, out.stats.hidden), (0, 0));
}

#[test]
fn git_dir_never_searched_even_with_hidden() {
    let (_d, ws, roots) = tree();
    write(&ws, ".git/config", b"needle\n");
    let hidden = WalkOptions {
        hidden: true,
        ..opts()
    };
    let found = grep_paths(&roots, "needle", hidden, content());
    assert!(!found.iter().any(|p| p.starts_with(".git/")), "{found:?}");
}

#[test]
fn globs_and_types_filter_after_ignore_rules() {
    let (_d, _ws, roots) = tree();
    let py = WalkOptions {
        globs: vec!["*.py".into()],
        ..opts()
    };
    assert_eq!(grep_paths(&roots, "needle", py, content()), vec!["a.py"]);
    let not_py = WalkOptions {
        globs: vec!["!*.py".into()],
        ..opts()
    };
    assert_eq!(
        grep_paths(&roots, "needle", not_py, content()),
        vec!["src/lib.rs"]
    );
    // A glob naming an ignored file does not bring it back (only no_ignore does).
    let log = WalkOptions {
        globs: vec!["*.log".into()],
        ..opts()
    };
    assert!(grep_paths(&roots, "needle", log, content()).is_empty());
    let rust = WalkOptions {
        types: vec!["rust".into()],
        ..opts()
    };
    assert_eq!(
        grep_paths(&roots, "needle", rust, content()),
        vec!["src/lib.rs"]
    );
    let not_rust = WalkOptions {
        types: vec!["!rust".into()],
        ..opts()
    };
    assert_eq!(
        grep_paths(&roots, "needle", not_rust, content()),
        vec!["a.py"]
    );
}

#[test]
fn bad_type_and_glob_are_argument_errors() {
    let (_d, _ws, roots) = tree();
    let bad = WalkOptions {
        types: vec!["pyy".into()],
        ..opts()
    };
    match Walker::new(&roots, None, bad) {
        Err(SearchError::Type(m)) => {
            assert!(m.contains("pyy") && m.contains("did you mean py"), "{m}")
        }
        other => panic!("{:?}", other.err()),
    }
    let bad = WalkOptions {
        globs: vec!["a[".into()],
        ..opts()
    };
    assert!(matches!(
        Walker::new(&roots, None, bad),
        Err(SearchError::Glob { .. })
    ));
}

#[test]
fn invalid_regex_names_position() {
    match Grep::new("ab(cd", content()) {
        Err(SearchError::Regex(m)) => assert!(m.contains("unclosed group at position 3"), "{m}"),
        other => panic!("{:?}", other.err()),
    }
    match Grep::new("x{2,1}", content()) {
        Err(SearchError::Regex(m)) => assert!(m.contains("position"), "{m}"),
        other => panic!("{:?}", other.err()),
    }
    assert!(Grep::new(
        "ab(cd",
        GrepOptions {
            fixed_strings: true,
            ..content()
        }
    )
    .is_ok());
}

#[test]
fn path_is_confined_and_must_exist() {
    let (_d, ws, roots) = tree();
    assert!(matches!(
        Walker::new(&roots, Some("../"), opts()),
        Err(SearchError::Confine(_))
    ));
    assert!(matches!(
        Walker::new(&roots, Some("/etc"), opts()),
        Err(SearchError::Confine(_))
    ));
    assert!(matches!(
        Walker::new(&roots, Some("missing"), opts()),
        Err(SearchError::Argument(_))
    ));
    let file = Walker::new(&roots, Some("build/out.py"), opts()).unwrap();
    assert_eq!(file.root_path(), ws);
    // An explicitly named file is searched even though it is ignored.
    let out = Grep::new("needle", content()).unwrap().run(&file);
    assert_eq!(out.files[0].display, "build/out.py");
}

#[test]
fn symlinks_out_of_roots_and_loops() {
    let (dir, ws, roots) = tree();
    write(dir.path(), "secret/s.txt", b"needle\n");
    symlink(dir.path().join("secret"), ws.join("outdir")).unwrap();
    symlink(dir.path().join("secret/s.txt"), ws.join("outfile.txt")).unwrap();
    symlink(&ws, ws.join("src/loop")).unwrap();
    symlink(ws.join("a.py"), ws.join("inside.py")).unwrap();
    // Not following: links are not searched at all.
    assert_eq!(
        grep_paths(&roots, "needle", opts(), content()),
        vec!["a.py", "src/lib.rs"]
    );
    // Following: the inside link is searched, the outside ones and the loop are not.
    let follow = WalkOptions {
        follow_symlinks: true,
        ..opts()
    };
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, None, follow).unwrap());
    let found: Vec<_> = out.files.iter().map(|f| f.display.as_str()).collect();
    assert_eq!(found, vec!["a.py", "inside.py", "src/lib.rs"]);
    assert_eq!(out.stats.outside_roots, 2);
    assert!(
        out.stats.errors >= 1,
        "the loop is reported: {:?}",
        out.stats
    );
}

#[test]
fn binary_non_utf8_and_empty_files() {
    let (_d, ws, roots) = tree();
    write(&ws, "bin.dat", b"needle\0\x01\x02");
    write(&ws, "latin1.txt", b"caf\xe9 needle\n\xff\xfe\n");
    write(&ws, "empty.txt", b"");
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, None, opts()).unwrap());
    let found: Vec<_> = out.files.iter().map(|f| f.display.as_str()).collect();
    assert_eq!(found, vec!["a.py", "latin1.txt", "src/lib.rs"]);
    assert_eq!(out.stats.binary, 1);
    let rows = out.files[1].rows.as_ref().unwrap();
    assert_eq!(rows[0].text, "caf\u{fffd} needle");
    assert_eq!(rows[0].submatches, vec![(5, 11)]);
    let text = Grep::new(
        "needle",
        GrepOptions {
            text: true,
            ..content()
        },
    )
    .unwrap();
    let out = text.run(&Walker::new(&roots, None, opts()).unwrap());
    assert!(out.files.iter().any(|f| f.display == "bin.dat"));
    assert_eq!(out.stats.binary, 0);
    let anything = Grep::new("^", content()).unwrap();
    let file = Walker::new(&roots, Some("empty.txt"), opts()).unwrap();
    assert!(anything.run(&file).files.is_empty());
}

#[test]
fn sparse_gigabyte_file_is_cheap() {
    let (_d, ws, roots) = tree();
    let f = fs::File::create(ws.join("huge.bin")).unwrap();
    f.set_len(1 << 30).unwrap();
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, None, opts()).unwrap());
    assert_eq!(out.stats.binary, 1);
    // As text, the all-zero "line" grows past the heap limit: an error, not an allocation of 1 GB.
    let text = Grep::new(
        "needle",
        GrepOptions {
            text: true,
            ..content()
        },
    )
    .unwrap();
    let out = text.run(&Walker::new(&roots, Some("huge.bin"), opts()).unwrap());
    assert!(out.files.is_empty());
    assert_eq!(out.stats.errors, 1, "{:?}", out.stats);
}

fn numbered(n: usize) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn context_rows_and_breaks() {
    let (_d, ws, roots) = tree();
    write(&ws, "n.txt", &numbered(20));
    let g = GrepOptions {
        before: 1,
        after: 1,
        ..content()
    };
    let grep = Grep::new(r"^line (3|4|10)$", g).unwrap();
    let out = grep.run(&Walker::new(&roots, Some("n.txt"), opts()).unwrap());
    let rows = out.files[0].rows.as_ref().unwrap();
    let shape: Vec<(RowKind, u64)> = rows.iter().map(|r| (r.kind, r.line)).collect();
    use RowKind::*;
    assert_eq!(
        shape,
        vec![
            (Context, 2),
            (Match, 3),
            (Match, 4),
            (Context, 5),
            (Break, 0),
            (Context, 9),
            (Match, 10),
            (Context, 11)
        ]
    );
    assert_eq!(out.files[0].row_count, rows.len());
    let (text, shown) =
        render::render(&out, render::page(&grep, &out, false, 0, None), 10_000, 100);
    assert_eq!(shown.len(), 8);
    assert!(
        text.starts_with("n.txt-2-line 2\nn.txt:3:line 3\n"),
        "{text}"
    );
    assert!(text.contains("\n--\n"));
}

#[test]
fn word_case_fixed_and_max_count() {
    let (_d, ws, roots) = tree();
    write(&ws, "w.txt", b"Foo foo fooxbar\nfoo.bar\nFOO\n");
    let run = |p: &str, g: GrepOptions| {
        let grep = Grep::new(p, g).unwrap();
        let out = grep.run(&Walker::new(&roots, Some("w.txt"), opts()).unwrap());
        out.files.first().map_or(0, |f| f.match_lines)
    };
    assert_eq!(run("foo", content()), 2);
    assert_eq!(
        run(
            "foo",
            GrepOptions {
                case_insensitive: true,
                ..content()
            }
        ),
        3
    );
    assert_eq!(
        run(
            "foox",
            GrepOptions {
                word: true,
                ..content()
            }
        ),
        0
    );
    assert_eq!(
        run(
            "foo.bar",
            GrepOptions {
                fixed_strings: true,
                ..content()
            }
        ),
        1
    );
    assert_eq!(run("foo.bar", content()), 2);
    assert_eq!(
        run(
            "(?i)foo",
            GrepOptions {
                max_count: Some(2),
                ..content()
            }
        ),
        2
    );
}

#[test]
fn multiline_spans_lines() {
    let (_d, ws, roots) = tree();
    write(&ws, "m.txt", b"start\nmiddle\nend\nother\n");
    assert!(Grep::new(r"start\nmiddle", content()).is_err());
    let grep = Grep::new(
        r"start.middle",
        GrepOptions {
            multiline: true,
            ..content()
        },
    )
    .unwrap();
    let out = grep.run(&Walker::new(&roots, Some("m.txt"), opts()).unwrap());
    let rows = out.files[0].rows.as_ref().unwrap();
    let lines: Vec<u64> = rows.iter().map(|r| r.line).collect();
    assert_eq!(lines, vec![1, 2]);
    assert_eq!(rows[0].submatches, vec![(0, 5)]);
    assert_eq!(rows[1].submatches, vec![(0, 6)]);
    assert_eq!(rows[1].byte_offset, 6);
}

#[test]
fn output_modes_and_paging() {
    let (_d, ws, roots) = tree();
    for i in 0..5 {
        write(&ws, &format!("many/f{i}.txt"), &numbered(3));
    }
    let walk = || Walker::new(&roots, Some("many"), opts()).unwrap();
    let files = Grep::new(
        "line",
        GrepOptions {
            mode: OutputMode::FilesWithMatches,
            ..content()
        },
    )
    .unwrap();
    let out = files.run(&walk());
    assert_eq!(out.total_rows(), 5);
    let (text, _) = render::render(
        &out,
        render::page(&files, &out, false, 1, Some(2)),
        1000,
        100,
    );
    assert_eq!(text, "many/f1.txt\nmany/f2.txt\n");
    let count = Grep::new(
        "line",
        GrepOptions {
            mode: OutputMode::Count,
            ..content()
        },
    )
    .unwrap();
    let out = count.run(&walk());
    let (text, _) = render::render(
        &out,
        render::page(&count, &out, false, 0, Some(1)),
        1000,
        100,
    );
    assert_eq!(text, "many/f0.txt:3\n");
    let lines = Grep::new("line", content()).unwrap();
    let out = lines.run(&walk());
    assert_eq!(out.total_rows(), 15);
    let page = render::page(&lines, &out, false, 4, Some(3));
    let got: Vec<(String, u64)> = page
        .iter()
        .map(|(i, r)| (out.files[*i].display.clone(), r.line))
        .collect();
    assert_eq!(
        got,
        vec![
            ("many/f1.txt".into(), 2),
            ("many/f1.txt".into(), 3),
            ("many/f2.txt".into(), 1)
        ]
    );
    // The character cap stops the page early and says how many rows it holds.
    let all = render::page(&lines, &out, false, 0, None);
    let (text, shown) = render::render(&out, all, 60, 100);
    assert_eq!(shown.len(), 2);
    assert!(text.chars().count() <= 60);
}

#[test]
fn rows_past_the_store_budget_are_searched_again() {
    let (_d, ws, roots) = tree();
    for i in 0..20 {
        write(&ws, &format!("many/f{i:02}.txt"), &numbered(50));
    }
    let walk = || Walker::new(&roots, Some("many"), opts()).unwrap();
    let stored = Grep::new("line", content()).unwrap();
    let tiny = Grep::new(
        "line",
        GrepOptions {
            store_budget: 1,
            ..content()
        },
    )
    .unwrap();
    let a = stored.run(&walk());
    let b = tiny.run(&walk());
    assert!(b.files.iter().any(|f| f.rows.is_none()));
    assert_eq!(a.total_rows(), b.total_rows());
    assert_eq!(
        render::page(&stored, &a, false, 0, None),
        render::page(&tiny, &b, false, 0, None)
    );
}

#[test]
fn long_lines_are_cut_but_spans_kept() {
    let (_d, ws, roots) = tree();
    let mut long = vec![b'x'; 10_000];
    long.extend_from_slice(b"needle\n");
    write(&ws, "long.txt", &long);
    let grep = Grep::new(
        "needle",
        GrepOptions {
            max_line_bytes: 100,
            ..content()
        },
    )
    .unwrap();
    let out = grep.run(&Walker::new(&roots, Some("long.txt"), opts()).unwrap());
    let row = &out.files[0].rows.as_ref().unwrap()[0];
    assert!(row.truncated && row.text.len() == 100);
    assert_eq!(row.submatches, vec![(10_000, 10_006)]);
    let (text, _) = render::render(&out, render::page(&grep, &out, false, 0, None), 1000, 50);
    assert!(text.contains("[line cut at 50 chars]"), "{text}");
}

#[test]
fn glob_matches_sorts_and_respects_ignores() {
    let (_d, ws, roots) = tree();
    write(&ws, "src/deep/x.py", b"");
    write(&ws, "src/y.ts", b"");
    write(&ws, "src/z.tsx", b"");
    let g = |pattern: &str, walk: WalkOptions, sort| {
        let walk = WalkOptions {
            globs: vec![pattern.into()],
            ..walk
        };
        let out = glob::run(&Walker::new(&roots, None, walk).unwrap(), sort);
        out.files.into_iter().map(|f| f.display).collect::<Vec<_>>()
    };
    assert_eq!(
        g("*.py", opts(), GlobSort::Path),
        vec!["a.py", "src/deep/x.py"]
    );
    assert_eq!(
        g("**/*.py", opts(), GlobSort::Path),
        vec!["a.py", "src/deep/x.py"]
    );
    assert_eq!(g("src/*.py", opts(), GlobSort::Path), Vec::<String>::new());
    assert_eq!(
        g("src/**/*.py", opts(), GlobSort::Path),
        vec!["src/deep/x.py"]
    );
    assert_eq!(
        g("*.{ts,tsx}", opts(), GlobSort::Path),
        vec!["src/y.ts", "src/z.tsx"]
    );
    let all = WalkOptions {
        no_ignore: true,
        hidden: true,
        ..opts()
    };
    assert_eq!(
        g("*.py", all, GlobSort::Path),
        vec![".hidden/h.py", "a.py", "build/out.py", "src/deep/x.py"]
    );
    // Newest first.
    let old = fs::File::options()
        .write(true)
        .open(ws.join("a.py"))
        .unwrap();
    old.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
    assert_eq!(
        g("*.py", opts(), GlobSort::Modified),
        vec!["src/deep/x.py", "a.py"]
    );
}

#[test]
fn path_order_matches_component_order() {
    let mut names: Vec<PathBuf> = [
        "a-b",
        "a/b",
        "a.b",
        "a/b/c",
        "a",
        "ab",
        "a/a",
        "b",
        "a/b-c",
        "a/b/",
        // Past the 8-byte steps of the common prefix.
        "package_one/a-b",
        "package_one/a/b",
        "package_one/a.b",
        "package_one/a",
        "package_one/mod.rs",
        "package_one/module/x",
        "package_one.rs",
        "package_one",
        "package_onf/a",
        "package_onE/a",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let mut by_components = names.clone();
    by_components.sort();
    names.sort_by(|a, b| {
        super::bytes_order(
            a.as_os_str().as_encoded_bytes(),
            b.as_os_str().as_encoded_bytes(),
        )
    });
    // "a/b/" and "a/b" are equal as components; compare the rest.
    by_components.retain(|p| p.as_os_str() != "a/b/");
    names.retain(|p| p.as_os_str() != "a/b/");
    assert_eq!(names, by_components);
}

fn glob_all(roots: &Roots, walk: WalkOptions) -> glob::GlobOutcome {
    let walk = WalkOptions {
        globs: vec!["*".into()],
        ..walk
    };
    glob::run(&Walker::new(roots, None, walk).unwrap(), GlobSort::Path)
}

fn shown(out: &glob::GlobOutcome) -> Vec<&str> {
    out.files.iter().map(|f| f.display.as_str()).collect()
}

/// A tree without any ignore file: `.hidden/` (a directory counts once), `.env`, and `.git`,
/// which is never counted.
fn rule_free_tree() -> (tempfile::TempDir, PathBuf, Roots) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    for i in 0..30 {
        write(&ws, &format!("pkg{}/m{i}.py", i % 4), b"needle\n");
    }
    write(&ws, "pkg1/.hidden/h.py", b"needle\n");
    write(&ws, "pkg2/.env", b"needle\n");
    fs::create_dir_all(ws.join("pkg3/.hg")).unwrap();
    let roots = Roots::new(&ws, &[]).unwrap();
    let canon = ws.canonicalize().unwrap();
    (dir, canon, roots)
}

#[test]
fn tree_without_rules_is_read_once_and_counts_hidden() {
    let (_d, _ws, roots) = rule_free_tree();
    let out = glob_all(&roots, opts());
    assert_eq!(out.files.len(), 30);
    assert_eq!((out.stats.ignored, out.stats.hidden), (0, 2));
    let hidden = glob_all(
        &roots,
        WalkOptions {
            hidden: true,
            ..opts()
        },
    );
    assert_eq!(hidden.files.len(), 32);
    assert_eq!((hidden.stats.ignored, hidden.stats.hidden), (0, 0));
    // A hidden entry the glob would drop anyway is not worth a notice.
    let py = WalkOptions {
        globs: vec!["*.py".into()],
        ..opts()
    };
    let out = glob::run(&Walker::new(&roots, None, py).unwrap(), GlobSort::Path);
    assert_eq!((out.files.len(), out.stats.hidden), (30, 1));
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, None, opts()).unwrap());
    assert_eq!(
        (out.files.len(), out.stats.files, out.stats.hidden),
        (30, 30, 2)
    );
}

#[test]
fn rule_found_mid_walk_starts_over_without_duplicates() {
    let (_d, ws, roots) = rule_free_tree();
    // Deep in the tree, found after other directories were already walked.
    write(&ws, "pkg3/sub/deeper/.gitignore", b"*.log\n");
    write(&ws, "pkg3/sub/deeper/x.log", b"needle\n");
    write(&ws, "pkg3/sub/deeper/x.py", b"needle\n");
    let out = glob_all(&roots, opts());
    let mut unique = shown(&out);
    unique.dedup();
    assert_eq!(unique.len(), out.files.len(), "no file listed twice");
    assert_eq!(out.files.len(), 31);
    // x.log ignored; .hidden, .env and the .gitignore hidden.
    assert_eq!((out.stats.ignored, out.stats.hidden), (1, 3));
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, None, opts()).unwrap());
    assert_eq!(
        (out.files.len(), out.stats.files, out.match_lines()),
        (31, 31, 31)
    );
}

#[test]
fn ignore_file_that_ignores_itself_is_still_counted() {
    // A `.gitignore` of `*` (as virtualenv and pytest write) hides itself from the walk too.
    let (_d, ws, roots) = rule_free_tree();
    write(&ws, "venv/.gitignore", b"*\n");
    write(&ws, "venv/lib/site.py", b"needle\n");
    write(&ws, "venv/bin/python", b"");
    let out = glob_all(
        &roots,
        WalkOptions {
            hidden: true,
            ..opts()
        },
    );
    assert_eq!(out.files.len(), 32);
    // venv/lib, venv/bin and venv/.gitignore itself.
    assert_eq!(out.stats.ignored, 3);
    let out = glob_all(&roots, opts());
    assert_eq!((out.files.len(), out.stats.ignored), (30, 2));
}

#[test]
fn rules_above_the_start_path_apply() {
    let (_d, ws, roots) = rule_free_tree();
    write(&ws, ".gitignore", b"m1*.py\n");
    let walk = WalkOptions {
        globs: vec!["*".into()],
        ..opts()
    };
    let out = glob::run(
        &Walker::new(&roots, Some("pkg1"), walk).unwrap(),
        GlobSort::Path,
    );
    // pkg1 holds m1, m5, ... m29 (8 files): m1, m13, m17 are ignored.
    assert_eq!((out.files.len(), out.stats.ignored), (5, 3));
    assert!(!shown(&out).iter().any(|p| p.contains("/m1")));
}

#[test]
fn whitelisted_hidden_file_is_kept_as_ripgrep_does() {
    let (_d, ws, roots) = rule_free_tree();
    write(&ws, ".gitignore", b"!.env\n");
    let out = glob_all(&roots, opts());
    assert!(shown(&out).contains(&"pkg2/.env"));
    assert_eq!(out.files.len(), 31);
}

#[test]
fn no_ignore_turns_every_rule_off() {
    let (_d, ws, roots) = rule_free_tree();
    write(&ws, ".gitignore", b"*.py\n");
    let out = glob_all(
        &roots,
        WalkOptions {
            no_ignore: true,
            ..opts()
        },
    );
    assert_eq!(
        (out.files.len(), out.stats.ignored, out.stats.hidden),
        (30, 0, 3)
    );
}

#[test]
fn empty_ignore_file_changes_nothing_but_itself() {
    let (_d, ws, roots) = rule_free_tree();
    write(&ws, "pkg0/deep/er/still/x.rs", b"needle\n");
    write(&ws, "pkg1/.hidden/more/y.py", b"needle\n");
    write(&ws, "weird name ünï.txt", b"needle\n");
    symlink(ws.join("pkg0/m0.py"), ws.join("link.py")).unwrap();
    symlink(ws.join("pkg0"), ws.join("linkdir")).unwrap();
    let run = |walk: &WalkOptions| {
        let g = WalkOptions {
            globs: vec!["*".into(), "!pkg2/**".into()],
            ..walk.clone()
        };
        let out = glob::run(&Walker::new(&roots, None, g).unwrap(), GlobSort::Path);
        let grep = Grep::new("needle", content()).unwrap();
        let hits = grep.run(&Walker::new(&roots, None, walk.clone()).unwrap());
        let files: Vec<String> = out.files.into_iter().map(|f| f.display).collect();
        let matched: Vec<String> = hits.files.iter().map(|f| f.display.clone()).collect();
        (files, matched, out.stats, hits.stats)
    };
    let variants = [
        opts(),
        WalkOptions {
            hidden: true,
            ..opts()
        },
        WalkOptions {
            threads: 1,
            ..opts()
        },
        WalkOptions {
            threads: 3,
            hidden: true,
            ..opts()
        },
    ];
    let quick: Vec<_> = variants.iter().map(run).collect();
    // An empty .ignore at the top: a rule source without rules.
    write(&ws, ".ignore", b"");
    for (walk, (files, matched, glob_stats, grep_stats)) in variants.iter().zip(quick) {
        let (mut c_files, c_matched, c_glob, c_grep) = run(walk);
        // With `hidden`, the .ignore file itself is listed too.
        c_files.retain(|f| f != ".ignore");
        assert_eq!(files, c_files);
        assert_eq!(matched, c_matched);
        assert!(
            !files.contains(&"link.py".to_string()) && files.contains(&"weird name ünï.txt".into())
        );
        // The .ignore file itself is one more hidden entry.
        let extra = u64::from(!walk.hidden);
        assert_eq!(glob_stats.hidden + extra, c_glob.hidden);
        assert_eq!(grep_stats.hidden + extra, c_grep.hidden);
        // ... or one more file with `hidden`.
        let listed = u64::from(walk.hidden);
        assert_eq!(
            (glob_stats.files + listed, grep_stats.files + listed),
            (c_glob.files, c_grep.files)
        );
        assert_eq!((glob_stats.ignored, c_glob.ignored), (0, 0));
    }
}

#[test]
fn single_file_and_by_mtime() {
    let (_d, ws, roots) = rule_free_tree();
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, Some("pkg1/m1.py"), opts()).unwrap());
    assert_eq!(out.files.len(), 1);
    let newest = fs::File::options()
        .write(true)
        .open(ws.join("pkg3/m3.py"))
        .unwrap();
    newest
        .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    let walk = WalkOptions {
        globs: vec!["*.py".into()],
        ..opts()
    };
    let out = glob::run(
        &Walker::new(&roots, None, walk).unwrap(),
        GlobSort::Modified,
    );
    assert_eq!(out.files[0].display, "pkg3/m3.py");
    assert!(out.files.iter().all(|f| f.modified.is_some()));
}

#[test]
fn parent_gitignore_stops_at_a_nested_repository() {
    // ripgrep's regression: `.gitignore` = `sherlock` must not reach into `foo/` with its own `.git`.
    for marker in ["dir", "file"] {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        write(&ws, ".gitignore", b"sherlock\n");
        write(&ws, "sherlock", b"Sherlock\n");
        write(&ws, "foo/bar/sherlock", b"Sherlock\n");
        if marker == "dir" {
            fs::create_dir_all(ws.join("foo/.git")).unwrap();
        } else {
            write(&ws, "foo/.git", b"gitdir: ../.git/modules/foo\n");
        }
        let roots = Roots::new(&ws, &[]).unwrap();
        let found = grep_paths(&roots, "Sherlock", opts(), content());
        assert_eq!(found, vec!["foo/bar/sherlock"], "{marker}");
        // `.ignore` files are not git's: they apply across the boundary.
        write(&ws, ".ignore", b"sherlock\n");
        assert!(grep_paths(&roots, "Sherlock", opts(), content()).is_empty());
    }
}

#[test]
fn symlinked_start_is_shown_as_given() {
    let (_d, ws, roots) = tree();
    symlink(ws.join("src"), ws.join("alias")).unwrap();
    symlink(ws.join("a.py"), ws.join("alias.py")).unwrap();
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, Some("alias"), opts()).unwrap());
    assert_eq!(out.files[0].display, "alias/lib.rs");
    let out = grep.run(&Walker::new(&roots, Some("./alias.py"), opts()).unwrap());
    assert_eq!(out.files[0].display, "alias.py");
}

#[test]
fn a_matching_glob_overrides_the_type() {
    let (_d, _ws, roots) = tree();
    let walk = WalkOptions {
        types: vec!["rust".into()],
        globs: vec!["*.py".into()],
        ..opts()
    };
    // Files of the type, and files the glob selects whatever their type (as ripgrep).
    let found = grep_paths(&roots, "needle", walk, content());
    assert_eq!(found, vec!["a.py"]);
    let only_type = WalkOptions {
        types: vec!["rust".into()],
        ..opts()
    };
    assert_eq!(
        grep_paths(&roots, "needle", only_type, content()),
        vec!["src/lib.rs"]
    );
}

#[test]
fn fifos_and_sockets_are_never_opened() {
    let (_d, ws, roots) = tree();
    let fifo = std::ffi::CString::new(ws.join("pipe.py").as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // Named as the path: refused without blocking.
    let grep = Grep::new("needle", content()).unwrap();
    let out = grep.run(&Walker::new(&roots, Some("pipe.py"), opts()).unwrap());
    assert!(out.files.is_empty());
    assert_eq!(out.stats.errors, 1);
    // Walked: not listed at all.
    assert_eq!(
        grep_paths(&roots, "needle", opts(), content()),
        vec!["a.py", "src/lib.rs"]
    );
}

#[test]
fn a_cancelled_search_stops_between_files_and_inside_a_long_one() {
    use super::Cancel;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    let (_d, ws, roots) = tree();
    // Cancelled before it starts: nothing is opened, nothing counted.
    let cancel = Cancel::new();
    cancel.cancel();
    let grep = Grep::new("needle", content())
        .unwrap()
        .cancelled_by(cancel.clone());
    let walker = Walker::new(&roots, None, opts())
        .unwrap()
        .cancelled_by(cancel);
    let out = grep.run(&walker);
    assert!(
        out.files.is_empty() && out.stats.files == 0,
        "{:?}",
        out.stats
    );

    // Cancelled while one long file is read: its search ends at the next read, with an error
    // (a search that had read the file to its end would have none).
    let line = b"no match on this line at all, just filler text to read\n";
    let long: Vec<u8> = line.iter().copied().cycle().take(64 << 20).collect();
    write(&ws, "long.txt", &long);
    let searched = Arc::new(AtomicU64::new(0));
    let cancel = Cancel::new();
    let grep = Grep::new("needle", content())
        .unwrap()
        .counting_into(Arc::clone(&searched))
        .cancelled_by(cancel.clone());
    let walker = Walker::new(&roots, Some("long.txt"), opts()).unwrap();
    let out = std::thread::scope(|scope| {
        scope.spawn(|| {
            while searched.load(Ordering::Acquire) == 0 {
                std::hint::spin_loop();
            }
            cancel.cancel();
        });
        grep.run(&walker)
    });
    assert_eq!(out.stats.errors, 1, "{:?}", out.stats);
    assert!(
        out.stats.first_errors[0].contains("cancelled"),
        "{:?}",
        out.stats
    );
}

#[test]
fn a_walk_never_asks_for_more_threads_than_the_machine_has() {
    // A count sent from elsewhere (an index daemon's client) spawns no more threads than the
    // default: the CPUs, at most 12.
    let (_d, _ws, roots) = tree();
    let asked = WalkOptions {
        threads: 1_000_000,
        ..opts()
    };
    let walker = Walker::new(&roots, None, asked).unwrap();
    let most = std::thread::available_parallelism().map_or(1, |n| n.get().min(12));
    assert_eq!(walker.threads(), most);
    let one = WalkOptions {
        threads: 1,
        ..opts()
    };
    assert_eq!(Walker::new(&roots, None, one).unwrap().threads(), 1);
}

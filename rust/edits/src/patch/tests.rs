//! Whole-patch tests on real temporary trees: every operation, and all-or-nothing.

use std::collections::BTreeMap;
use std::path::Path;

use super::commit::apply_patch_inner;
use super::*;
use toolroute_files::Roots;

const MAX: u64 = 1 << 20;

fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                out.insert(rel + "/", Vec::new());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn setup(files: &[(&str, &str)]) -> (tempfile::TempDir, Roots) {
    let dir = tempfile::tempdir().unwrap();
    for (path, body) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    let roots = Roots::new(dir.path(), &[]).unwrap();
    (dir, roots)
}

fn patch(body: &str) -> String {
    format!("*** Begin Patch\n{body}\n*** End Patch\n")
}

#[test]
fn add_update_move_delete_in_one_patch() {
    let (dir, roots) = setup(&[
        ("a.txt", "1\n2\n3\n"),
        ("old/m.txt", "m\n"),
        ("d.txt", "bye\n"),
    ]);
    let p = patch(
        "*** Add File: new/n.txt\n+hello\n\
         *** Update File: a.txt\n@@\n 1\n-2\n+two\n\
         *** Update File: old/m.txt\n*** Move to: moved/m.txt\n@@\n-m\n+M\n\
         *** Delete File: d.txt",
    );
    let out = apply_patch_inner(&roots, &p, MAX, None).unwrap();
    assert_eq!(out.added, vec!["new/n.txt"]);
    assert_eq!(out.modified, vec!["a.txt"]);
    assert_eq!(
        out.moved,
        vec![("old/m.txt".to_string(), "moved/m.txt".to_string())]
    );
    assert_eq!(out.deleted, vec!["d.txt"]);
    assert_eq!(
        out.files[1].chunks,
        vec![ChunkReport {
            line: 1,
            tier: Tier::Exact
        }]
    );
    let t = tree(dir.path());
    assert_eq!(t["new/n.txt"], b"hello\n");
    assert_eq!(t["a.txt"], b"1\ntwo\n3\n");
    assert_eq!(t["moved/m.txt"], b"M\n");
    assert!(!t.contains_key("old/m.txt") && !t.contains_key("d.txt"));
    assert!(out.summary().contains("A new/n.txt") && out.summary().contains("D d.txt"));
}

#[test]
fn later_hunks_see_earlier_ones() {
    let (dir, roots) = setup(&[("f", "a\n")]);
    let p = patch("*** Update File: f\n-a\n+b\n*** Update File: f\n-b\n+c");
    apply_patch_inner(&roots, &p, MAX, None).unwrap();
    assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"c\n");
}

#[test]
fn any_failing_hunk_changes_nothing() {
    let files = [("a.txt", "1\n2\n"), ("b.txt", "x\n"), ("gone.txt", "g\n")];
    let cases = [
        "*** Add File: n.txt\n+n\n*** Update File: a.txt\n-2\n+3\n*** Update File: b.txt\n-nope\n+y",
        "*** Delete File: gone.txt\n*** Update File: missing.txt\n-a\n+b",
        "*** Update File: a.txt\n-1\n+one\n*** Delete File: missing.txt",
        "*** Add File: x/y.txt\n+y\n*** Update File: a.txt\n@@ nowhere\n-1\n+z",
        "*** Add File: ok.txt\n+k\n*** Add File: ../escape.txt\n+e",
        "*** Add File: ok.txt\n+k\n*** Delete File: .",
    ];
    for body in cases {
        let (dir, roots) = setup(&files);
        let before = tree(dir.path());
        let err = apply_patch_inner(&roots, &patch(body), MAX, None).unwrap_err();
        assert_eq!(tree(dir.path()), before, "{body}: {err}");
    }
}

#[test]
fn failed_write_rolls_back_what_was_written() {
    let (dir, roots) = setup(&[("a.txt", "1\n"), ("b.txt", "2\n"), ("c.txt", "3\n")]);
    let before = tree(dir.path());
    let p = patch(
        "*** Add File: deep/new/n.txt\n+n\n*** Update File: a.txt\n-1\n+one\n\
         *** Delete File: b.txt\n*** Update File: c.txt\n-3\n+three",
    );
    for fail_at in 0..4 {
        let err = apply_patch_inner(&roots, &p, MAX, Some(fail_at)).unwrap_err();
        assert!(matches!(err, PatchError::Commit { .. }), "{err}");
        assert!(err.to_string().contains("restored"), "{err}");
        assert_eq!(tree(dir.path()), before, "failing write {fail_at}");
    }
    apply_patch_inner(&roots, &p, MAX, Some(4)).unwrap();
    assert_ne!(tree(dir.path()), before);
}

#[test]
fn error_messages_name_file_hunk_and_lines() {
    let (_dir, roots) = setup(&[("a.txt", "1\n2\n")]);
    let p = patch("*** Update File: a.txt\n@@\n-1\n+one\n@@\n 2\n-3\n+x");
    let msg = apply_patch_inner(&roots, &p, MAX, None)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("a.txt") && msg.contains("hunk 2") && msg.contains("    3"),
        "{msg}"
    );
    assert!(msg.contains("no file was changed"), "{msg}");
    let msg = apply_patch_inner(&roots, &patch(""), MAX, None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("No files were modified"), "{msg}");
    let msg = apply_patch_inner(&roots, "garbage", MAX, None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("Invalid patch"), "{msg}");
}

#[test]
fn non_utf8_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("l1.txt"), b"caf\xe9\n").unwrap();
    let roots = Roots::new(dir.path(), &[]).unwrap();
    let err = apply_patch_inner(
        &roots,
        &patch("*** Update File: l1.txt\n-caf\n+x"),
        MAX,
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("not valid UTF-8"), "{err}");
    assert_eq!(
        std::fs::read(dir.path().join("l1.txt")).unwrap(),
        b"caf\xe9\n"
    );
}

#[test]
fn size_cap_and_directories() {
    let (_dir, roots) = setup(&[("big.txt", "0123456789\n"), ("d/f", "x")]);
    let err = apply_patch_inner(&roots, &patch("*** Update File: big.txt\n-0\n+1"), 4, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("limit"), "{err}");
    let err = apply_patch_inner(&roots, &patch("*** Delete File: d"), MAX, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is a directory"), "{err}");
}

#[test]
fn permissions_kept_on_update_and_move() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, roots) = setup(&[("run.sh", "echo a\n")]);
    let p = dir.path().join("run.sh");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let body = "*** Update File: run.sh\n*** Move to: bin/run.sh\n-echo a\n+echo b";
    apply_patch_inner(&roots, &patch(body), MAX, None).unwrap();
    let mode = std::fs::metadata(dir.path().join("bin/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

// --- Parity with the reference Codex apply_patch (issue 14, items 1-5) ---

fn update(content: &str, body: &str) -> Result<String, String> {
    let (dir, roots) = setup(&[("m.txt", content)]);
    let p = patch(&format!("*** Update File: m.txt\n{body}"));
    apply_patch_inner(&roots, &p, MAX, None).map_err(|e| e.to_string())?;
    Ok(std::fs::read_to_string(dir.path().join("m.txt")).unwrap())
}

#[test]
fn blank_line_before_appended_lines_is_retried_without_it() {
    let f = "def f():\n    return 1\n";
    let body = "@@ def f():\n     return 1\n\n+def g():\n+    return 2";
    assert_eq!(
        update(f, body).unwrap(),
        "def f():\n    return 1\n\ndef g():\n    return 2\n"
    );
    // A `-` with nothing after it, last on the old side, is dropped the same way.
    assert_eq!(update("a\nb\n", "@@\n-b\n-\n+c").unwrap(), "a\nc\n");
    // An empty last line on the new side goes too.
    assert_eq!(update("a\nb\n", "@@\n b\n\n+c\n+").unwrap(), "a\nb\n\nc\n");
    // Only one empty line is dropped, and only at the end of the old side.
    assert!(update("a\nb\n", "@@\n-a\n+A\n\n\n").is_err());
    assert!(update("a\nb\n", "@@\n a\n\n+c\n b").is_err());
}

#[test]
fn end_of_file_hunks_match_only_at_the_end() {
    assert!(update("x\ny\nx\n", "@@\n-y\n+Y\n*** End of File").is_err());
    // Retried at the end without the trailing empty line, not searched elsewhere.
    assert!(update("a\n\n\nb\n", "@@\n a\n\n\n+c\n*** End of File").is_err());
    assert_eq!(
        update("a\nb\n", "@@\n b\n\n+c\n*** End of File").unwrap(),
        "a\nb\n\nc\n"
    );
    // A blank line and additions marked End of File go at the end (Codex: at the top).
    assert_eq!(
        update("a\nb\n", "@@\n\n+c\n*** End of File").unwrap(),
        "a\nb\n\nc\n"
    );
}

#[test]
fn pure_additions_at_one_spot_keep_patch_order() {
    assert_eq!(update("x\n", "+A\n@@\n x\n+B").unwrap(), "x\nA\nB\n");
    assert_eq!(update("x\n", "@@\n x\n+B\n@@\n+A").unwrap(), "x\nB\nA\n");
    // Codex's own case: a pure addition, then a later chunk that removes the file's tail.
    assert_eq!(
        update(
            "line1\nline2\nline3\n",
            "@@\n+after\n@@\n line1\n-line2\n-line3\n+line2-replacement"
        )
        .unwrap(),
        "line1\nline2-replacement\nafter\n"
    );
}

#[test]
fn whitespace_only_line_after_update_header_is_context() {
    assert_eq!(update("a\n\nb\n", "  \n-b\n+B").unwrap(), "a\n\nB\n");
    let err = update("a\nb\n", "  \n-b\n+B").unwrap_err();
    assert!(err.contains("Failed to find expected lines"), "{err}");
    // A bare empty line there is an empty context line as well: `a` must then follow it.
    assert!(update("a\n\nb\n", "\n@@\n-a\n+A").is_err());
    assert_eq!(update("\na\n", "\n@@\n-a\n+A").unwrap(), "\nA\n");
    // Blank and whitespace-only lines after `*** End of File` are skipped.
    for blank in ["", "  ", "\t"] {
        let body = format!("@@\n-a\n+A\n*** End of File\n{blank}\n@@\n-b\n+B");
        assert!(update("x\na\n", &body).unwrap_err().contains("hunk 2"));
        let body = format!("@@\n-a\n+A\n*** End of File\n{blank}");
        assert_eq!(update("x\na\n", &body).unwrap(), "x\nA\n");
    }
    // Elsewhere between chunks a tab-only line is not skipped: it cannot start a chunk.
    let err = update("a\nb\n", "@@\n-a\n+A\n\t\n@@\n-b\n+B").unwrap_err();
    assert!(
        err.contains("Expected update hunk to start with a @@"),
        "{err}"
    );
}

#[test]
fn added_lines_take_the_first_line_ending_and_anchors_drop_trailing_space() {
    assert_eq!(
        update("a\r\nb\nc\r\n", " a\n-b\n+B\n c").unwrap(),
        "a\r\nB\r\nc\r\n"
    );
    assert_eq!(
        update("a\nb\r\nc\n", " a\n-b\n+B\n c").unwrap(),
        "a\nB\nc\n"
    );
    let f = "def f():  \n    x = 1\ndef f():\n    x = 1\n";
    assert_eq!(
        update(f, "@@ def f():  \n-    x = 1\n+    x = 2").unwrap(),
        "def f():  \n    x = 1\ndef f():\n    x = 2\n"
    );
    // Leading whitespace of an anchor is kept.
    let f = "  def f():\n    x = 1\ndef f():\n    x = 1\n";
    assert_eq!(
        update(f, "@@   def f():\n-    x = 1\n+    x = 2").unwrap(),
        "  def f():\n    x = 2\ndef f():\n    x = 1\n"
    );
}

#[test]
fn empty_patch_message_is_codexs() {
    let (_dir, roots) = setup(&[]);
    let err = apply_patch_inner(&roots, "*** Begin Patch\n*** End Patch", MAX, None).unwrap_err();
    assert_eq!(err.to_string(), "No files were modified.");
}

// --- Ported from Codex apply-patch's unit tests (Apache-2.0, openai/codex; see
// tests/fixtures/codex-apply-patch-unit/NOTICE): seek_sequence.rs and parser.rs internals. ---

fn owned(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|s| s.to_string()).collect()
}

#[test]
fn codex_seek_sequence_cases() {
    let find = |lines: &[&str], pattern: &[&str]| seek(lines, pattern, 0, false).map(|f| f.0);
    assert_eq!(find(&["foo", "bar", "baz"], &["bar", "baz"]), Some(1));
    assert_eq!(find(&["foo   ", "bar\t\t"], &["foo", "bar"]), Some(0));
    assert_eq!(find(&["    foo   ", "   bar\t"], &["foo", "bar"]), Some(0));
    assert_eq!(find(&["just one line"], &["too", "many", "lines"]), None);
}

fn one_update(p: &str) -> Result<Vec<Chunk>, ParseError> {
    match parse_patch(p)?.remove(0) {
        Hunk::Update { chunks, .. } => Ok(chunks),
        other => panic!("expected an update, got {other:?}"),
    }
}

#[test]
fn codex_update_file_chunk_cases() {
    let err = |p: &str| parse_patch(p).unwrap_err().to_string();
    let u = "*** Begin Patch\n*** Update File: f\n";
    assert_eq!(
        err(&format!("{u}@@\n*** End Patch")),
        "Invalid patch hunk on line 4: Update hunk does not contain any lines"
    );
    assert_eq!(
        err(&format!("{u}@@\nbad\n*** End Patch")),
        "Invalid patch hunk on line 4: Unexpected line found in update hunk: 'bad'. Every line \
         should start with ' ' (context line), '+' (added line), or '-' (removed line)"
    );
    assert_eq!(
        err(&format!("{u}@@\n*** End of File\n*** End Patch")),
        "Invalid patch hunk on line 4: Update hunk does not contain any lines"
    );
    let chunks = one_update(&format!(
        "{u}@@ change_context\n\n context\n-remove\n+add\n context2\n*** End Patch"
    ))
    .unwrap();
    assert_eq!(chunks[0].anchors, owned(&["change_context"]));
    assert_eq!(
        chunks[0].old_lines(),
        vec!["", "context", "remove", "context2"]
    );
    let new: Vec<&str> = chunks[0]
        .lines
        .iter()
        .filter(|l| l.is_new())
        .map(ChunkLine::text)
        .collect();
    assert_eq!(new, vec!["", "context", "add", "context2"]);
    let chunks = one_update(&format!("{u}@@\n+line\n*** End of File\n*** End Patch")).unwrap();
    assert!(chunks[0].end_of_file && chunks[0].old_lines().is_empty());
    let chunks = one_update(&format!(
        "{u}@@ class BaseClass\n@@     def method()\n context\n-old\n+new\n*** End Patch"
    ))
    .unwrap();
    assert_eq!(
        chunks[0].anchors,
        owned(&["class BaseClass", "    def method()"])
    );
}

#[test]
fn codex_parse_patch_lenient_cases() {
    let body = "*** Begin Patch\n*** Update File: file2.py\n import foo\n+bar\n*** End Patch";
    for open in ["<<EOF", "<<'EOF'", "<<\"EOF\""] {
        let chunks = one_update(&format!("{open}\n{body}\nEOF\n")).unwrap();
        assert_eq!(chunks[0].old_lines(), vec!["import foo"]);
    }
    let err = |p: &str| parse_patch(p).unwrap_err().to_string();
    assert_eq!(
        err(&format!("<<\"EOF'\n{body}\nEOF\n")),
        "Invalid patch: The first line of the patch must be '*** Begin Patch'"
    );
    assert_eq!(
        err("<<EOF\n*** Begin Patch\n*** Update File: file2.py\nEOF\n"),
        "Invalid patch: The last line of the patch must be '*** End Patch'"
    );
    assert_eq!(
        err("*** Begin Patch\nbad\n*** End Patch"),
        "Invalid patch hunk on line 2: 'bad' is not a valid hunk header. Valid hunk headers: \
         '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'"
    );
}

fn op(kind: &str, path: &str, diff: Option<&str>, move_to: Option<&str>) -> V4aOperation {
    V4aOperation {
        kind: kind.into(),
        path: path.into(),
        diff: diff.map(Into::into),
        move_to: move_to.map(Into::into),
    }
}

#[test]
fn v4a_operations_create_update_move_delete_together() {
    let (dir, roots) = setup(&[("a.txt", "one\ntwo\n"), ("gone.txt", "x\n")]);
    let ops = vec![
        op("create_file", "new.txt", Some("+hello"), None),
        op(
            "update_file",
            "a.txt",
            Some("@@\n-two\n+TWO"),
            Some("b.txt"),
        ),
        op("delete_file", "gone.txt", None, None),
    ];
    let done = apply_v4a(&roots, ops, MAX, toolroute_files::WriteOptions::default()).unwrap();
    assert_eq!(done.moved, vec![("a.txt".to_string(), "b.txt".to_string())]);
    let files = tree(dir.path());
    // V4A's reference editor adds no final newline to a created file.
    assert_eq!(files["new.txt"], b"hello");
    assert_eq!(files["b.txt"], b"one\nTWO\n");
    assert!(!files.contains_key("a.txt") && !files.contains_key("gone.txt"));
}

#[test]
fn v4a_malformed_operations_are_refused_before_any_file_changes() {
    let cases = [
        (
            op("delete_file", "a.txt", None, Some("b.txt")),
            "delete_file of a.txt: only update_file can move a file",
        ),
        (
            op("create_file", "n.txt", None, None),
            "create_file of n.txt needs a diff",
        ),
        (
            op("rename_file", "a.txt", None, None),
            "unknown operation type \"rename_file\": expected create_file, update_file or delete_file",
        ),
    ];
    for (bad, message) in cases {
        let (dir, roots) = setup(&[("a.txt", "one\n")]);
        let before = tree(dir.path());
        // A valid operation first: it must not be applied either.
        let ops = vec![op("create_file", "first.txt", Some("+x"), None), bad];
        let err =
            apply_v4a(&roots, ops, MAX, toolroute_files::WriteOptions::default()).unwrap_err();
        assert!(
            matches!(&err, PatchError::Operation(m) if m == message),
            "{err}"
        );
        assert_eq!(tree(dir.path()), before);
    }
}

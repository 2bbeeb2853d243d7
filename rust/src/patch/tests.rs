//! Whole-patch tests on real temporary trees: every operation, and all-or-nothing.

use std::collections::BTreeMap;
use std::path::Path;

use super::commit::apply_patch_inner;
use super::*;
use crate::confine::Roots;

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

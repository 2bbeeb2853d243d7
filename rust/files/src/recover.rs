//! Recovery: finish or undo the transactions of processes that died (see [`crate::journal`]).
//!
//! A journal of a dead process is rolled forward when it is complete and each of its changes is
//! found: its temp holds the content the journal's digest names (then the temp is synced and
//! renamed into place), or its destination does (it was published before the crash). Anything
//! else (a journal cut short, a temp cut short by the crash or lost with the disk's cache) is
//! rolled back: the temps go and no destination is touched. Renames happen only after every
//! temp is synced, so a journal whose changes are partly published always rolls forward.
//!
//! Then the temps of dead processes that no journal accounts for are removed by name: in the
//! workspace root always (a single write killed between naming its temp and renaming it), and
//! anywhere in the workspace for a journal whose list of temps was cut short (a power loss can
//! keep a temp's name and lose the tail of its journal).

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use rustix::fs::{fstat, openat, renameat_with, statat, unlinkat, AtFlags, FileType, Mode};
use rustix::fs::{OFlags, RenameFlags};
use rustix::io::Errno;

use crate::beneath::{Missing, Parent, Root};
use crate::durable::{self, Sync};
use crate::hash::ContentDigest;
use crate::journal::{self, Entry, NewFile, Recorded};

/// What [`recover`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Interrupted transactions finished from their journal.
    pub rolled_forward: usize,
    /// Transactions undone: their temps were removed, no destination touched.
    pub rolled_back: usize,
}

/// Finish or undo transactions whose process died (see the module's comment); live ones (their
/// process still runs) are left alone. Journals live in the workspace root.
pub fn recover(ws: &Root) -> io::Result<Recovery> {
    let mut out = Recovery::default();
    let dir = durable::open_folder(ws.fd())?;
    let mut journals: Vec<(OsString, String)> = Vec::new();
    let mut temps: Vec<OsString> = Vec::new();
    for entry in rustix::fs::Dir::read_from(&dir)? {
        let name = entry?.file_name().to_bytes().to_vec();
        match journal::dead_owner(&name) {
            Some((txid, true)) => journals.push((OsString::from_vec(name), txid)),
            Some((_, false)) => temps.push(OsString::from_vec(name)),
            None => {}
        }
    }
    for (name, txid) in journals {
        let recorded = journal::read(&dir, &name)?;
        match found_all(ws, &recorded) {
            Some(found) => {
                roll_forward(ws, &recorded.entries, found);
                out.rolled_forward += 1;
            }
            None => {
                roll_back(ws, &recorded, &txid);
                out.rolled_back += 1;
            }
        }
        match unlinkat(&dir, name.as_os_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    for name in temps {
        // Those the journals above renamed or removed are gone already.
        let _ = unlinkat(&dir, name.as_os_str(), AtFlags::empty());
    }
    Ok(out)
}

/// Where one journaled change stands.
enum Found {
    /// Its new file is under the temp's name (open, when it was checked by its digest).
    Staged(Option<OwnedFd>),
    /// Its new file is at the destination; `leftover`: a file is still under the temp's name
    /// (the old file, after an exchange), to be removed.
    Published { leftover: bool },
    /// Neither: the temp was cut short or lost.
    Lost,
    /// A removal: nothing to find.
    Removal,
}

/// How each change of a complete journal stands, or `None` if the journal must be rolled back.
fn found_all(ws: &Root, recorded: &Recorded) -> Option<Vec<Found>> {
    if !recorded.complete {
        return None;
    }
    let found: Vec<Found> = recorded.entries.iter().map(|e| find(ws, e)).collect();
    (!found.iter().any(|f| matches!(f, Found::Lost))).then_some(found)
}

fn find(ws: &Root, entry: &Entry) -> Found {
    let Entry::Put { tmp, dest, new, .. } = entry else {
        return Found::Removal;
    };
    match *new {
        NewFile::Digest(digest) => {
            let staged = content(ws, tmp);
            match staged {
                Some((fd, d)) if d == digest => Found::Staged(Some(fd)),
                _ if content(ws, dest).is_some_and(|(_, d)| d == digest) => Found::Published {
                    leftover: staged.is_some(),
                },
                _ => Found::Lost,
            }
        }
        // Journals 1 and 2 were complete only once every temp was synced: trusted.
        NewFile::Trusted(swapped) => {
            let ino = |rel: &Path| {
                let p = ws.parent(rel, false, Missing::Fail).ok()?;
                let st = statat(&p.dir, p.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
                Some(crate::os::file_id(&st).1)
            };
            let at_temp = ino(tmp);
            let staged = match swapped {
                // After the exchange the temp holds the old file: only the new one (by its
                // inode) is still to be put in place.
                Some(new) => at_temp == Some(new) && ino(dest) != Some(new),
                None => at_temp.is_some(),
            };
            if staged {
                Found::Staged(None)
            } else {
                Found::Published {
                    leftover: at_temp.is_some(),
                }
            }
        }
    }
}

/// The regular file at `rel` (never through a link), open, and the digest of its content.
fn content(ws: &Root, rel: &Path) -> Option<(OwnedFd, ContentDigest)> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = ws.open_at(rel, flags).ok()?;
    let st = fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut h = blake3::Hasher::new();
    let mut file = std::fs::File::from(fd.try_clone().ok()?);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                h.update(&buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some((fd, h.finalize().into()))
}

/// Finish a journal's changes: its staged files are synced (the process that staged them may
/// have died before its own sync), then renamed into place; removals are redone; temps left
/// beside published files go; then every folder changed is synced, before the journal goes.
/// Each step is idempotent: recovery killed halfway is recovered again.
fn roll_forward(ws: &Root, entries: &[Entry], found: Vec<Found>) {
    let staged = found.iter().filter_map(|f| match f {
        Found::Staged(Some(fd)) => Some(durable::sync(fd.as_fd(), Sync::All)),
        _ => None,
    });
    let _ = durable::together(staged.collect());
    let mut changed: Vec<OwnedFd> = Vec::new();
    for (entry, found) in entries.iter().zip(&found) {
        match (entry, found) {
            (
                Entry::Put {
                    tmp,
                    dest,
                    no_clobber,
                    ..
                },
                Found::Staged(_),
            ) => {
                let walk = |rel: &Path, missing| ws.parent(rel, false, missing);
                let (Ok(src), Ok(mut dst)) = (walk(tmp, Missing::Fail), walk(dest, Missing::Stop))
                else {
                    continue;
                };
                let Ok(made) = dst.make_dirs() else {
                    continue; // nowhere to put it
                };
                changed.extend(
                    made.iter()
                        .filter_map(|c| c.parent().try_clone_to_owned().ok()),
                );
                let flags = if *no_clobber {
                    RenameFlags::NOREPLACE
                } else {
                    RenameFlags::empty()
                };
                let (from, to) = (src.name.as_os_str(), dst.name.as_os_str());
                if renameat_with(&src.dir, from, &dst.dir, to, flags).is_err() {
                    let _ = unlinkat(&src.dir, from, AtFlags::empty());
                }
                changed.extend([src.dir, dst.dir]);
            }
            (Entry::Put { tmp, .. }, Found::Published { leftover: true }) => {
                if let Some(dir) = remove(ws, tmp) {
                    changed.push(dir);
                }
            }
            (Entry::Put { .. }, _) => {}
            (Entry::Del { dest }, _) => {
                if let Some(dir) = remove(ws, dest) {
                    changed.push(dir);
                }
            }
        }
    }
    durable::sync_folders(&durable::distinct_folders(
        changed.iter().map(|d| d.as_fd()),
    ));
}

/// Remove the name `rel` (a link itself, never its target); the folder it was in, if it was.
fn remove(ws: &Root, rel: &Path) -> Option<OwnedFd> {
    let Parent { dir, name, .. } = ws.parent(rel, false, Missing::Fail).ok()?;
    unlinkat(&dir, name.as_os_str(), AtFlags::empty()).ok()?;
    Some(dir)
}

/// Undo a transaction: remove its temps (the destinations were never touched). A journal cut
/// short may not name them all: then every temp with its transaction's names goes.
fn roll_back(ws: &Root, recorded: &Recorded, txid: &str) {
    for e in &recorded.entries {
        if let Entry::Put { tmp, .. } = e {
            remove(ws, tmp);
        }
    }
    if !recorded.complete {
        if let Ok(root) = durable::open_folder(ws.fd()) {
            sweep(&root, &journal::temps_of(txid), 0);
        }
    }
}

/// Deepest folder a sweep looks into (each level holds one descriptor open).
const SWEEP_DEPTH: usize = 128;

/// Remove every name starting with `prefix` in `dir` and the folders beneath it (links are not
/// followed).
fn sweep(dir: &OwnedFd, prefix: &[u8], depth: usize) {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    let mut folders: Vec<Vec<u8>> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if name.starts_with(prefix) {
            let _ = unlinkat(dir, entry.file_name(), AtFlags::empty());
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            _ => false,
        };
        if is_dir && depth < SWEEP_DEPTH {
            folders.push(name.to_vec());
        }
    }
    for name in folders {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if let Ok(sub) = openat(dir, OsStr::from_bytes(&name), flags, Mode::empty()) {
            sweep(&sub, prefix, depth + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::Roots;
    use crate::hash::digest_parts;
    use crate::journal::{MAGIC, MAGIC_V1, MAGIC_V2};

    /// pid 1 with start time 1 is never a live toolroute process.
    const DEAD: &str = "1-1-0";
    const JOURNAL: &str = ".toolroute-1-1-0.journal";
    const TMP_A: &str = ".toolroute-1-1-0.0.tmp";
    const TMP_B: &str = "sub/.toolroute-1-1-0.1.tmp";

    /// A workspace with `a.txt` and `gone.txt`, and a folder `sub`.
    fn ws() -> (tempfile::TempDir, Roots) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "old a").unwrap();
        std::fs::write(d.path().join("gone.txt"), "bye").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let r = Roots::new(d.path(), &[]).unwrap();
        (d, r)
    }

    fn hex(s: &str) -> String {
        toolroute_digest::hex(s.as_bytes())
    }

    /// The journal of a dead process's transaction: `a.txt` to "new a", `sub/new/b.txt` made
    /// with "new b" (its folder missing), `gone.txt` removed; `end` when `complete`.
    fn journal_text(complete: bool) -> String {
        let put = |tmp: &str, dest: &str, content: &str| {
            let digest = toolroute_digest::hex(&digest_parts(&[content.as_bytes()]));
            format!("put {} {} 0 {digest}\n", hex(tmp), hex(dest))
        };
        format!(
            "{MAGIC}\n{}{}del {}\n{}",
            put(TMP_A, "a.txt", "new a"),
            put(TMP_B, "sub/new/b.txt", "new b"),
            hex("gone.txt"),
            if complete { "end\n" } else { "" }
        )
    }

    /// Stage the temps as the dead process left them (`None`: not there).
    fn temps(d: &Path, a: Option<&str>, b: Option<&str>) {
        for (rel, content) in [(TMP_A, a), (TMP_B, b)] {
            if let Some(content) = content {
                std::fs::write(d.join(rel), content).unwrap();
            }
        }
    }

    fn read(d: &Path, rel: &str) -> Option<String> {
        std::fs::read_to_string(d.join(rel)).ok()
    }

    /// Names toolroute staged, anywhere in the workspace.
    fn leftovers(d: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![d.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else if e.file_name().to_string_lossy().starts_with(".toolroute-1-") {
                    out.push(e.path().display().to_string());
                }
            }
        }
        out
    }

    fn recover_ws(r: &Roots) -> Recovery {
        recover(r.workspace_root()).unwrap()
    }

    const FORWARD: Recovery = Recovery {
        rolled_forward: 1,
        rolled_back: 0,
    };
    const BACK: Recovery = Recovery {
        rolled_forward: 0,
        rolled_back: 1,
    };

    fn assert_new(d: &Path) {
        assert_eq!(read(d, "a.txt").as_deref(), Some("new a"));
        assert_eq!(read(d, "sub/new/b.txt").as_deref(), Some("new b"));
        assert!(!d.join("gone.txt").exists());
        assert_eq!(leftovers(d), Vec::<String>::new());
    }

    fn assert_old(d: &Path) {
        assert_eq!(read(d, "a.txt").as_deref(), Some("old a"));
        assert_eq!(read(d, "gone.txt").as_deref(), Some("bye"));
        assert!(!d.join("sub/new").exists());
        assert_eq!(leftovers(d), Vec::<String>::new());
    }

    #[test]
    fn complete_journal_whose_temps_all_hold_their_digest_rolls_forward() {
        let (d, r) = ws();
        std::fs::write(d.path().join(JOURNAL), journal_text(true)).unwrap();
        temps(d.path(), Some("new a"), Some("new b"));
        assert_eq!(recover_ws(&r), FORWARD);
        assert_new(d.path());
    }

    #[test]
    fn journal_killed_among_its_renames_rolls_forward() {
        // `a.txt` was renamed into place (its temp is gone), `b.txt` was not yet.
        let (d, r) = ws();
        std::fs::write(d.path().join(JOURNAL), journal_text(true)).unwrap();
        temps(d.path(), None, Some("new b"));
        std::fs::write(d.path().join("a.txt"), "new a").unwrap();
        assert_eq!(recover_ws(&r), FORWARD);
        assert_new(d.path());
        // Recovery is idempotent: a second pass finds nothing to do.
        assert_eq!(recover_ws(&r), Recovery::default());
        assert_new(d.path());
    }

    #[test]
    fn a_temp_cut_short_rolls_back() {
        // A crash (or a power loss before the sync wave) left `b`'s temp incomplete.
        let (d, r) = ws();
        std::fs::write(d.path().join(JOURNAL), journal_text(true)).unwrap();
        temps(d.path(), Some("new a"), Some("new"));
        assert_eq!(recover_ws(&r), BACK);
        assert_old(d.path());
    }

    #[test]
    fn a_temp_missing_rolls_back() {
        // Staging had not reached `b` (or the disk lost it): neither temp nor destination holds it.
        let (d, r) = ws();
        std::fs::write(d.path().join(JOURNAL), journal_text(true)).unwrap();
        temps(d.path(), Some("new a"), None);
        assert_eq!(recover_ws(&r), BACK);
        assert_old(d.path());
    }

    #[test]
    fn a_temp_replaced_by_a_link_to_the_right_content_rolls_back() {
        // Recovery reads a temp by its name, never through a link someone planted there.
        let (d, r) = ws();
        std::fs::write(d.path().join(JOURNAL), journal_text(true)).unwrap();
        temps(d.path(), Some("new a"), None);
        std::fs::write(d.path().join("sub/bait"), "new b").unwrap();
        std::os::unix::fs::symlink("bait", d.path().join(TMP_B)).unwrap();
        assert_eq!(recover_ws(&r), BACK);
        assert_eq!(read(d.path(), "a.txt").as_deref(), Some("old a"));
        assert!(!d.path().join("sub/new").exists());
        assert_eq!(read(d.path(), "sub/bait").as_deref(), Some("new b"));
    }

    #[test]
    fn journal_without_its_end_rolls_back_and_sweeps_its_temps_by_name() {
        // A power loss kept the journal's first lines only, and temps it no longer lists.
        let (d, r) = ws();
        let text = journal_text(true);
        let cut = &text[..text.find("put").unwrap() + 20];
        std::fs::write(d.path().join(JOURNAL), cut).unwrap();
        temps(d.path(), Some("new a"), Some("new b"));
        std::fs::create_dir_all(d.path().join("sub/deep")).unwrap();
        std::fs::write(d.path().join("sub/deep/.toolroute-1-1-0.7.tmp"), "x").unwrap();
        // Another transaction's temp and the user's own files stay.
        std::fs::write(d.path().join("sub/deep/.toolroute-1-1-9.0.tmp"), "other").unwrap();
        std::fs::write(d.path().join("sub/deep/keep.txt"), "mine").unwrap();
        assert_eq!(recover_ws(&r), BACK);
        assert_eq!(read(d.path(), "a.txt").as_deref(), Some("old a"));
        assert_eq!(read(d.path(), "gone.txt").as_deref(), Some("bye"));
        assert_eq!(
            leftovers(d.path()),
            vec![d
                .path()
                .join("sub/deep/.toolroute-1-1-9.0.tmp")
                .display()
                .to_string()]
        );
        assert_eq!(read(d.path(), "sub/deep/keep.txt").as_deref(), Some("mine"));
    }

    #[test]
    fn empty_journal_of_a_dead_process_is_removed() {
        let (d, r) = ws();
        std::fs::write(d.path().join(JOURNAL), "").unwrap();
        assert_eq!(recover_ws(&r), BACK);
        assert_old(d.path());
    }

    #[test]
    fn exchanged_change_keeps_the_new_file_and_removes_the_old() {
        // At durability none a change is published by exchange: killed before the old file
        // (now under the temp's name) was removed. (In a folder: the root's temps are swept
        // anyway.)
        let (d, r) = ws();
        let digest = toolroute_digest::hex(&digest_parts(&[b"new x"]));
        let text = format!(
            "{MAGIC}\nput {} {} 0 {digest}\nend\n",
            hex(TMP_B),
            hex("sub/x.txt")
        );
        std::fs::write(d.path().join(JOURNAL), text).unwrap();
        std::fs::write(d.path().join(TMP_B), "old x").unwrap();
        std::fs::write(d.path().join("sub/x.txt"), "new x").unwrap();
        assert_eq!(recover_ws(&r), FORWARD);
        assert_eq!(read(d.path(), "sub/x.txt").as_deref(), Some("new x"));
        assert_eq!(leftovers(d.path()), Vec::<String>::new());
    }

    #[test]
    fn live_transactions_are_left_alone() {
        let (d, r) = ws();
        let live = crate::journal::next_txid();
        let journal = format!(".toolroute-{live}.journal");
        let temp = format!(".toolroute-{live}.0.tmp");
        std::fs::write(d.path().join(&journal), "").unwrap();
        std::fs::write(d.path().join(&temp), "staged").unwrap();
        assert_eq!(recover_ws(&r), Recovery::default());
        assert!(d.path().join(journal).exists() && d.path().join(temp).exists());
    }

    #[test]
    fn temps_of_dead_processes_without_a_journal_are_swept_from_the_root() {
        // A single write killed between naming its temp and renaming it.
        let (d, r) = ws();
        std::fs::write(d.path().join(format!(".toolroute-{DEAD}.0.tmp")), "x").unwrap();
        std::fs::write(d.path().join(".toolroute-notes.1.tmp"), "the user's").unwrap();
        assert_eq!(recover_ws(&r), Recovery::default());
        assert!(!d.path().join(format!(".toolroute-{DEAD}.0.tmp")).exists());
        assert!(d.path().join(".toolroute-notes.1.tmp").exists());
    }

    /// A journal of an earlier version (no digests): `end` was its commit point.
    fn old_journal(magic: &str, tail: &str) -> String {
        format!(
            "{magic}\nput {} {} 0\nput {} {} 0\ndel {}\n{tail}",
            hex(TMP_A),
            hex("a.txt"),
            hex(TMP_B),
            hex("sub/new/b.txt"),
            hex("gone.txt")
        )
    }

    /// The inode of a file, as a version 2 journal records it.
    fn ino(path: &Path) -> u64 {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap())
    }

    /// A committed version 2 journal whose first change is published by exchange, killed
    /// `exchanged` (the temp now holds the old file) or not yet: either way the new file ends up
    /// in place and the old one is gone, never renamed back.
    fn version_2_swapped_journal_rolls_forward(exchanged: bool) {
        let (d, r) = ws();
        temps(d.path(), Some("new a"), Some("new b"));
        let tmp = d.path().join(TMP_A);
        let new = ino(&tmp);
        if exchanged {
            renameat_with(
                rustix::fs::CWD,
                &tmp,
                rustix::fs::CWD,
                d.path().join("a.txt"),
                RenameFlags::EXCHANGE,
            )
            .unwrap();
            assert_eq!(std::fs::read_to_string(&tmp).unwrap(), "old a");
        }
        let text = old_journal(MAGIC_V2, &format!("swap 0 {new}\nend\n"));
        std::fs::write(d.path().join(JOURNAL), text).unwrap();
        assert_eq!(recover_ws(&r), FORWARD);
        assert_eq!(ino(&d.path().join("a.txt")), new);
        assert_new(d.path());
    }

    #[cfg(native_linux)]
    #[test]
    fn version_2_swapped_journal_killed_after_the_exchange_keeps_the_new_file() {
        version_2_swapped_journal_rolls_forward(true);
    }

    #[test]
    fn version_2_swapped_journal_killed_before_the_exchange_puts_the_new_file_in_place() {
        version_2_swapped_journal_rolls_forward(false);
    }

    #[test]
    fn version_1_journals_roll_forward_once_committed_and_back_before() {
        let (d, r) = ws();
        std::fs::write(d.path().join(JOURNAL), old_journal(MAGIC_V1, "end\n")).unwrap();
        temps(d.path(), Some("new a"), Some("new b"));
        assert_eq!(recover_ws(&r), FORWARD);
        assert_new(d.path());
        let (d, r) = ws();
        std::fs::write(d.path().join(JOURNAL), old_journal(MAGIC_V1, "")).unwrap();
        temps(d.path(), Some("new a"), Some("new b"));
        assert_eq!(recover_ws(&r), BACK);
        assert_old(d.path());
    }
}

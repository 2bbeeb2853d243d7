//! Atomic, crash-safe writes: one file, or many all-or-nothing.
//!
//! Every new content is first written to a temporary file made by descriptor (`O_TMPFILE` in
//! the destination's folder, then linked into the workspace's staging folder
//! `.toolroute-staging/`; a named temp there when `O_TMPFILE` is unsupported), with the old
//! file's owner, group and mode, and synced as the [`Durability`] asks. Only then does anything
//! visible change: one `renameat` per file (or `unlinkat` for a delete, on the name itself, so a
//! symlink is removed, never its target).
//!
//! With more than one change, a journal naming every staged temp and its destination is written
//! (and renamed into place) before the first rename: from then on the transaction is committed,
//! and if the process dies, the next use of the workspace ([`recover`], run when a context is
//! made and before each write) finishes the renames. Without a journal nothing outside the
//! staging folder changed, and recovery only removes the stale temps. Staged files are named
//! after their process (pid and start time), so a live transaction is never touched.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rustix::fs::{
    fchmod, fchown, fstat, linkat, mkdirat, openat, renameat, renameat_with, symlinkat, unlinkat,
    AtFlags, Mode, OFlags, RenameFlags,
};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

use crate::beneath::{fd_path, BeneathError, Created, Missing, Root};
use crate::confine::Roots;
use crate::fs::{FsError, Meta, Original, Target};

/// The folder, at the workspace root, that holds staged temps and journals while a write runs
/// (removed when empty).
pub const STAGING: &str = ".toolroute-staging";
const JOURNAL_MAGIC: &str = "toolroute-journal 1";

/// How hard a write works to survive a power loss (a process crash is always survived).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Durability {
    /// No fsync: atomic for readers and across a process crash; a power loss may lose the write.
    None,
    /// fsync each new file (and the journal) before it replaces the old: after a power loss a
    /// file is old or new, never empty, but a rename may be lost.
    File,
    /// `File`, plus one fsync per changed folder after all renames: the change is on disk when
    /// the call returns.
    #[default]
    Full,
}

impl FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Durability::None),
            "file" => Ok(Durability::File),
            "full" => Ok(Durability::Full),
            _ => Err(format!("unknown durability {s:?}; use none, file or full")),
        }
    }
}

/// One change of a transaction.
#[derive(Debug)]
pub enum Op<'a> {
    /// Replace (or create) with the concatenation of the parts. `no_clobber`: fail if a file
    /// appeared there meanwhile.
    Put {
        parts: Vec<&'a [u8]>,
        no_clobber: bool,
        /// Owner, group and mode for the new file; default: those of the file it replaces.
        meta: Option<Meta>,
    },
    /// Remove the name itself (a symlink is removed, not its target).
    Remove,
}

#[derive(Debug)]
pub struct Change<'a> {
    pub target: Target,
    pub op: Op<'a>,
}

/// Why a transaction failed.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// Failed while staging: no destination was touched.
    #[error(transparent)]
    Staging(FsError),
    /// Failed while renaming; what was already renamed was put back as far as possible.
    #[error("could not write {path}: {source}; {rollback}")]
    Publishing {
        path: String,
        source: FsError,
        rollback: String,
    },
}

impl From<FsError> for TxnError {
    fn from(e: FsError) -> Self {
        TxnError::Staging(e)
    }
}

fn proc_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// This process's tag in staged names: pid and start time (pids are reused, start times not).
fn owner_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let pid = std::process::id();
        format!("{pid}-{}", proc_start_time(pid).unwrap_or(0))
    })
}

fn next_txid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", owner_tag(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Whether the process that staged `name` (`<pid>-<start>-…`) is still running.
fn owner_alive(name: &str) -> bool {
    let mut parts = name.split(['-', '.']);
    let (Some(pid), Some(start)) = (parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    if !Path::new("/proc/self/stat").exists() {
        return true; // cannot tell: never remove what might be live
    }
    proc_start_time(pid) == Some(start)
}

fn sync_dir(dir: BorrowedFd<'_>) -> io::Result<()> {
    let d = openat(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::fs::fsync(&d)?;
    Ok(())
}

/// The staging folder, made if needed (by descriptor, beneath the workspace).
struct Staging {
    dir: OwnedFd,
    dev: u64,
}

impl Staging {
    fn open(ws: &Root) -> io::Result<(Self, bool)> {
        for _ in 0..8 {
            let fresh = match mkdirat(ws.fd(), STAGING, Mode::from_raw_mode(0o700)) {
                Ok(()) => true,
                Err(Errno::EXIST) => false,
                Err(e) => return Err(e.into()),
            };
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match openat(ws.fd(), STAGING, flags, Mode::empty()) {
                Ok(dir) => {
                    let dev = fstat(&dir)?.st_dev;
                    return Ok((Staging { dir, dev }, !fresh));
                }
                Err(Errno::NOENT) => continue, // removed by a transaction that just ended
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::other("the staging folder keeps disappearing"))
    }

    /// Remove the folder if empty (another live transaction keeps it).
    fn close(self, ws: &Root) {
        drop(self.dir);
        let _ = unlinkat(ws.fd(), STAGING, AtFlags::REMOVEDIR);
    }
}

/// A staged temp: its folder and name.
struct Staged {
    dir: OwnedFd,
    name: OsString,
}

fn write_parts(fd: &OwnedFd, parts: &[&[u8]]) -> io::Result<()> {
    let file = std::fs::File::from(fd.try_clone()?);
    let mut out = io::BufWriter::with_capacity(1 << 20, file);
    for p in parts {
        out.write_all(p)?;
    }
    out.flush()
}

/// Give the new file the old one's owner, group and mode (owner first: chown clears setuid).
fn keep_meta(fd: &OwnedFd, meta: Meta, shown: &str) -> Result<(), FsError> {
    let st = fstat(fd).map_err(|e| FsError::io("stat", shown, e.into()))?;
    if (st.st_uid, st.st_gid) != (meta.uid, meta.gid) {
        fchown(fd, Some(Uid::from_raw(meta.uid)), Some(Gid::from_raw(meta.gid))).map_err(|e| FsError::Refused {
            path: shown.to_string(),
            reason: format!(
                "cannot keep the file's owner and group {}:{} ({e}); toolroute replaces files \
                 with a new one and will not change who owns them, so nothing was changed",
                meta.uid, meta.gid
            ),
        })?;
    }
    fchmod(fd, Mode::from_raw_mode(meta.mode)).map_err(|e| FsError::io("set the mode of", shown, e.into()))
}

/// Stage the new content for `target` as temp number `i` of transaction `txid`.
fn stage(
    staging: &Staging,
    target: &Target,
    parts: &[&[u8]],
    meta: Option<Meta>,
    txid: &str,
    i: usize,
    durability: Durability,
) -> Result<Staged, FsError> {
    let shown = target.shown.as_str();
    let io = |action| move |e: Errno| FsError::io(action, shown, e.into());
    let dest = target.parent.dir.as_fd();
    let same_fs = fstat(dest).map_err(io("stat the folder of"))?.st_dev == staging.dev;
    let name = OsString::from(format!("{txid}.{i}.tmp"));
    let (tmp_dir, tmp_name) = if same_fs {
        (staging.dir.try_clone().map_err(|e| FsError::io("stage", shown, e))?, name)
    } else {
        // Another file system (a mount inside the workspace): the temp must live beside.
        let mut n = OsString::from(".toolroute-");
        n.push(&name);
        (target.parent.dir.try_clone().map_err(|e| FsError::io("stage", shown, e))?, n)
    };
    let new_mode = Mode::from_raw_mode(0o666);
    // O_TMPFILE in the destination's folder: inherits its group (setgid) and default ACLs, and
    // has no name until it is complete, so a crash before the link leaves nothing.
    let anon = openat(dest, ".", OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC, new_mode);
    let (fd, anonymous) = match anon {
        Ok(fd) => (fd, true),
        Err(_) => {
            let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            (openat(&tmp_dir, tmp_name.as_os_str(), flags, new_mode).map_err(io("create a temporary file for"))?, false)
        }
    };
    let staged = Staged { dir: tmp_dir, name: tmp_name };
    let result = (|| {
        write_parts(&fd, parts).map_err(|e| FsError::io("write", shown, e))?;
        if let Some(m) = meta.or(target.existing().map(|e| e.meta)) {
            keep_meta(&fd, m, shown)?;
        }
        if durability >= Durability::File {
            rustix::fs::fsync(&fd).map_err(io("fsync"))?;
        }
        if anonymous {
            let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            linkat(rustix::fs::CWD, proc_path.as_str(), &staged.dir, staged.name.as_os_str(), AtFlags::SYMLINK_FOLLOW)
                .map_err(io("link the temporary file for"))?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(staged),
        Err(e) => {
            if !anonymous {
                let _ = unlinkat(&staged.dir, staged.name.as_os_str(), AtFlags::empty());
            }
            Err(e)
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `dir`'s path relative to the workspace, plus `rest`.
fn ws_relative(ws: &Root, dir: BorrowedFd<'_>, rest: &[&OsStr]) -> io::Result<PathBuf> {
    let real = fd_path(dir)?;
    let rel = real
        .strip_prefix(ws.path())
        .map_err(|_| io::Error::other("a folder moved out of the workspace"))?;
    let mut out = rel.to_path_buf();
    out.extend(rest);
    Ok(out)
}

/// Write the journal (complete, then renamed into place) naming every rename and removal.
fn write_journal(
    ws: &Root,
    staging: &Staging,
    txid: &str,
    changes: &[Change<'_>],
    staged: &[Option<Staged>],
    durability: Durability,
) -> io::Result<OsString> {
    let mut text = format!("{JOURNAL_MAGIC}\n");
    for (c, s) in changes.iter().zip(staged) {
        let mut rest: Vec<&OsStr> = c.target.parent.missing.iter().map(|m| m.as_os_str()).collect();
        rest.push(c.target.parent.name.as_os_str());
        let dest = ws_relative(ws, c.target.parent.dir.as_fd(), &rest)?;
        match (&c.op, s) {
            (Op::Put { no_clobber, .. }, Some(s)) => {
                let tmp = ws_relative(ws, s.dir.as_fd(), &[s.name.as_os_str()])?;
                text.push_str(&format!(
                    "put {} {} {}\n",
                    hex(tmp.as_os_str().as_bytes()),
                    hex(dest.as_os_str().as_bytes()),
                    u8::from(*no_clobber)
                ));
            }
            _ => text.push_str(&format!("del {}\n", hex(dest.as_os_str().as_bytes()))),
        }
    }
    text.push_str("end\n");
    let part = format!("{txid}.journal.part");
    let name = OsString::from(format!("{txid}.journal"));
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
    let fd = openat(&staging.dir, part.as_str(), flags, Mode::from_raw_mode(0o600))?;
    let mut f = std::fs::File::from(fd);
    f.write_all(text.as_bytes())?;
    if durability >= Durability::File {
        f.sync_all()?;
    }
    renameat(&staging.dir, part.as_str(), &staging.dir, name.as_os_str())?;
    if durability == Durability::Full {
        rustix::fs::fsync(&staging.dir)?;
    }
    Ok(name)
}

/// Publish one change: make its folders, then rename the temp over it or remove it.
fn publish(change: &mut Change<'_>, staged: Option<&Staged>) -> Result<Vec<Created>, FsError> {
    let shown = change.target.shown.clone();
    let p = &mut change.target.parent;
    match (&change.op, staged) {
        (Op::Put { no_clobber, .. }, Some(s)) => {
            let created = p.make_dirs().map_err(|e| FsError::io("create folders for", &shown, e))?;
            let flags = if *no_clobber { RenameFlags::NOREPLACE } else { RenameFlags::empty() };
            match renameat_with(&s.dir, s.name.as_os_str(), &p.dir, p.name.as_os_str(), flags) {
                Ok(()) => Ok(created),
                Err(e) => {
                    for c in created.iter().rev() {
                        c.undo();
                    }
                    Err(match e {
                        Errno::EXIST => FsError::Exists { path: shown },
                        e => FsError::from_io("replace", &shown, e.into()),
                    })
                }
            }
        }
        _ => unlinkat(&p.dir, p.name.as_os_str(), AtFlags::empty())
            .map(|()| Vec::new())
            .map_err(|e| FsError::from_io("delete", &shown, e.into())),
    }
}

/// Put back what a published change replaced (after a failure of a later one).
fn restore(ws_staging: &Staging, change: &Change<'_>, created: &[Created], txid: &str, n: usize) -> Result<(), FsError> {
    let t = &change.target;
    let shown = t.shown.as_str();
    let at = |e: Errno| FsError::io("restore", shown, e.into());
    match &t.original {
        Some(Original::File(e)) => {
            let s = stage(ws_staging, t, &[e.bytes.as_slice()], None, txid, n, Durability::None)?;
            renameat(&s.dir, s.name.as_os_str(), &t.parent.dir, t.parent.name.as_os_str()).map_err(at)?;
        }
        Some(Original::Link(target)) => {
            let _ = unlinkat(&t.parent.dir, t.parent.name.as_os_str(), AtFlags::empty());
            symlinkat(OsStr::from_bytes(target), &t.parent.dir, t.parent.name.as_os_str()).map_err(at)?;
        }
        None => match unlinkat(&t.parent.dir, t.parent.name.as_os_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(at(e)),
        },
    }
    for c in created.iter().rev() {
        c.undo();
    }
    Ok(())
}

/// Apply `changes` all or nothing. `fail_at`: tests make the n-th publish fail.
pub fn commit(
    roots: &Roots,
    mut changes: Vec<Change<'_>>,
    durability: Durability,
    fail_at: Option<usize>,
) -> Result<(), TxnError> {
    if changes.is_empty() {
        return Ok(());
    }
    let ws = roots.workspace_root();
    let first = changes[0].target.shown.clone();
    let (staging, existed) =
        Staging::open(ws).map_err(|e| FsError::io("prepare the write of", &first, e))?;
    if existed {
        let _ = recover_in(ws, &staging.dir);
    }
    let txid = next_txid();
    let result = commit_staged(ws, &staging, &txid, &mut changes, durability, fail_at);
    staging.close(ws);
    result
}

fn commit_staged(
    ws: &Root,
    staging: &Staging,
    txid: &str,
    changes: &mut [Change<'_>],
    durability: Durability,
    fail_at: Option<usize>,
) -> Result<(), TxnError> {
    let mut staged: Vec<Option<Staged>> = Vec::with_capacity(changes.len());
    let unstage = |staged: &[Option<Staged>]| {
        for s in staged.iter().flatten() {
            let _ = unlinkat(&s.dir, s.name.as_os_str(), AtFlags::empty());
        }
    };
    for (i, c) in changes.iter().enumerate() {
        let s = match &c.op {
            Op::Put { parts, meta, .. } => {
                stage(staging, &c.target, parts, *meta, txid, i, durability).map(Some)
            }
            Op::Remove => Ok(None),
        };
        match s {
            Ok(s) => staged.push(s),
            Err(e) => {
                unstage(&staged);
                return Err(e.into());
            }
        }
    }
    let journal = if changes.len() > 1 {
        match write_journal(ws, staging, txid, changes, &staged, durability) {
            Ok(name) => Some(name),
            Err(e) => {
                unstage(&staged);
                let _ = unlinkat(&staging.dir, format!("{txid}.journal.part").as_str(), AtFlags::empty());
                return Err(FsError::io("write the journal for", &changes[0].target.shown, e).into());
            }
        }
    } else {
        None
    };
    let mut done: Vec<Vec<Created>> = Vec::new();
    for i in 0..changes.len() {
        let step = if fail_at == Some(i) {
            Err(FsError::io("write", &changes[i].target.shown, io::Error::other("injected failure")))
        } else {
            publish(&mut changes[i], staged[i].as_ref())
        };
        match step {
            Ok(created) => done.push(created),
            Err(source) => {
                let mut failures = Vec::new();
                for (j, created) in done.iter().enumerate().rev() {
                    if let Err(e) = restore(staging, &changes[j], created, txid, changes.len() + j) {
                        failures.push(format!("{}: {e}", changes[j].target.shown));
                    }
                }
                unstage(&staged[i..]);
                if let Some(j) = &journal {
                    let _ = unlinkat(&staging.dir, j.as_os_str(), AtFlags::empty());
                }
                let rollback = if failures.is_empty() {
                    "every file already written was restored; no file was changed".to_string()
                } else {
                    format!("restoring failed for: {}", failures.join("; "))
                };
                return Err(TxnError::Publishing {
                    path: changes[i].target.shown.clone(),
                    source,
                    rollback,
                });
            }
        }
    }
    if durability == Durability::Full {
        sync_folders(changes);
    }
    if let Some(j) = journal {
        let _ = unlinkat(&staging.dir, j.as_os_str(), AtFlags::empty());
    }
    Ok(())
}

/// One fsync per changed folder, after all renames (a failure here does not undo the write).
fn sync_folders(changes: &[Change<'_>]) {
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for c in changes {
        let dir = c.target.parent.dir.as_fd();
        if let Ok(st) = fstat(dir) {
            if !seen.contains(&(st.st_dev, st.st_ino)) {
                seen.push((st.st_dev, st.st_ino));
                let _ = sync_dir(dir);
            }
        }
    }
}

/// What [`recover`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Interrupted transactions finished from their journal.
    pub rolled_forward: usize,
    /// Stale temps and unfinished journals removed.
    pub removed: usize,
}

/// Finish or clean up after transactions whose process died (see the module's comment). Live
/// ones (their process still runs) are left alone.
pub fn recover(ws: &Root) -> io::Result<Recovery> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = match openat(ws.fd(), STAGING, flags, Mode::empty()) {
        Ok(d) => d,
        Err(Errno::NOENT) => return Ok(Recovery::default()),
        Err(e) => return Err(e.into()),
    };
    let out = recover_in(ws, &dir)?;
    drop(dir);
    let _ = unlinkat(ws.fd(), STAGING, AtFlags::REMOVEDIR);
    Ok(out)
}

fn recover_in(ws: &Root, dir: &OwnedFd) -> io::Result<Recovery> {
    let mut out = Recovery::default();
    let mut names: Vec<OsString> = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name));
        }
    }
    // Journals first (they consume their temps), then whatever is left and stale.
    names.sort_by_key(|n| !n.as_bytes().ends_with(b".journal"));
    for name in names {
        let text = name.to_string_lossy();
        if owner_alive(&text) {
            continue;
        }
        if text.ends_with(".journal") {
            if let Ok(journal) = read_journal(dir, &name) {
                roll_forward(ws, &journal);
                out.rolled_forward += 1;
            }
        }
        match unlinkat(dir, name.as_os_str(), AtFlags::empty()) {
            Ok(()) => out.removed += usize::from(!text.ends_with(".journal")),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

enum Entry {
    Put { tmp: PathBuf, dest: PathBuf, no_clobber: bool },
    Del { dest: PathBuf },
}

fn read_journal(dir: &OwnedFd, name: &OsStr) -> io::Result<Vec<Entry>> {
    let fd = openat(dir, name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
    let mut text = String::new();
    std::fs::File::from(fd).read_to_string(&mut text)?;
    let bad = || io::Error::other("damaged journal");
    let mut lines = text.lines();
    if lines.next() != Some(JOURNAL_MAGIC) || !text.ends_with("end\n") {
        return Err(bad());
    }
    let path = |s: Option<&str>| -> io::Result<PathBuf> {
        Ok(PathBuf::from(OsString::from_vec(unhex(s.ok_or_else(bad)?).ok_or_else(bad)?)))
    };
    let mut out = Vec::new();
    for line in lines {
        let mut f = line.split(' ');
        match f.next() {
            Some("put") => out.push(Entry::Put {
                tmp: path(f.next())?,
                dest: path(f.next())?,
                no_clobber: f.next() == Some("1"),
            }),
            Some("del") => out.push(Entry::Del { dest: path(f.next())? }),
            Some("end") => break,
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

/// Redo a committed journal's renames and removals (each is idempotent: a temp already renamed
/// is gone, a file already removed is missing).
fn roll_forward(ws: &Root, journal: &[Entry]) {
    let walk = |rel: &Path, missing| ws.parent(rel, false, missing);
    for e in journal {
        match e {
            Entry::Put { tmp, dest, no_clobber } => {
                let (Ok(src), Ok(mut dst)) = (walk(tmp, Missing::Fail), walk(dest, Missing::Stop)) else {
                    continue;
                };
                if rustix::fs::statat(&src.dir, src.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).is_err() {
                    continue; // already renamed
                }
                if dst.make_dirs().is_err() {
                    continue;
                }
                let flags = if *no_clobber { RenameFlags::NOREPLACE } else { RenameFlags::empty() };
                let _ = renameat_with(&src.dir, src.name.as_os_str(), &dst.dir, dst.name.as_os_str(), flags);
            }
            Entry::Del { dest } => {
                if let Ok(p) = walk(dest, Missing::Fail) {
                    let _ = unlinkat(&p.dir, p.name.as_os_str(), AtFlags::empty());
                }
            }
        }
    }
}

impl From<BeneathError> for io::Error {
    fn from(e: BeneathError) -> Self {
        match e {
            BeneathError::Io(e) => e,
            BeneathError::Escape { to } => io::Error::other(format!("leads outside, to {to:?}")),
        }
    }
}

//! Atomic, crash-safe writes: one file, or many all-or-nothing.
//!
//! Every new content is first written to a temporary file made by descriptor in the
//! destination's folder (`O_TMPFILE`, which has no name until it is complete; a named
//! `.toolroute-*.tmp` where the file system lacks it), with the old file's owner, group and mode,
//! and synced as the [`Durability`] asks. Only then does anything visible change: one `renameat`
//! per file (or `unlinkat` for a delete, on the name itself, so a symlink is removed, never its
//! target).
//!
//! With more than one change, a journal in the workspace root ([`crate::journal`]) names every
//! temp, its destination and the digest of its content, written whole before any temp exists.
//! At `file` and `full` durability a commit waits for the disk twice: once for one wave that
//! syncs every temp, the journal and the folders holding them together, then (`full`) once for
//! the folders the renames changed. If the process dies, the next use of the workspace
//! ([`crate::recover`], run when a context is made) finishes the transaction when every temp
//! holds its digest's content (or was already renamed), and removes its temps otherwise. Names
//! carry their process's pid and start time, so a live transaction of another process is never
//! touched.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::str::FromStr;

use rustix::fs::{
    fchmod, fchown, fstat, linkat, openat, renameat, renameat_with, symlinkat, unlinkat, AtFlags,
    Mode, OFlags, RenameFlags,
};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

use crate::beneath::Created;
use crate::confine::Roots;
use crate::durable::{self, Sync};
use crate::error::FsError;
use crate::fs::{Meta, Original, Permit, Target};
use crate::hash::{digest_parts, ContentDigest};
use crate::journal::{next_txid, temp_name, Intent, Journal};
use crate::session::Session;

/// How hard a write works to survive a power loss (a process crash is always survived).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Durability {
    /// No fsync: atomic for readers and across a process crash; after a power loss a replaced
    /// file may be old, new or empty (a replacement is an exchange, not a rename: see `swaps`).
    None,
    /// fsync each new file (and the journal) before it replaces the old: after a power loss a
    /// file is old or new, never empty, but a rename may be lost.
    File,
    /// `File`, plus one fsync per changed folder after all renames: the change is on disk when
    /// the call returns.
    #[default]
    Full,
}

/// How a write may go: durability, what it may overwrite, and the session it belongs to.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions<'a> {
    /// How much is synced to disk before the call returns.
    pub durability: Durability,
    /// Which files it may rewrite (read-only ones only when permitted).
    pub permit: Permit,
    /// The session whose stale-read guard the write passes (its writers check the file they
    /// rewrite; [`commit`] records what it wrote).
    pub session: Option<&'a Session>,
}

impl<'a> WriteOptions<'a> {
    /// For a writer, from reading its files to committing: the session's other writes wait.
    pub fn exclusive(&self) -> Option<std::sync::MutexGuard<'a, ()>> {
        self.session.map(Session::exclusive)
    }

    /// Refuse rewriting `target` if the session's view of the file it holds is stale; nothing
    /// to check without a session or an existing file.
    pub fn check_fresh(&self, target: &Target) -> Result<(), FsError> {
        match (self.session, target.existing()) {
            (Some(s), Some(e)) => s.check(target, &e.bytes),
            _ => Ok(()),
        }
    }
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
        /// The new content, in parts (written in one pass).
        parts: Vec<&'a [u8]>,
        /// Fail if a file appeared at the destination since it was read.
        no_clobber: bool,
        /// Owner, group and mode for the new file; default: those of the file it replaces.
        meta: Option<Meta>,
    },
    /// Remove the name itself (a symlink is removed, not its target).
    Remove,
}

/// One file a transaction changes: where, and how.
#[derive(Debug)]
pub struct Change<'a> {
    /// The destination.
    pub target: Target,
    /// What to do there.
    pub op: Op<'a>,
}

/// Why a transaction failed.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// Failed while staging: no destination was touched.
    #[error(transparent)]
    Staging(Box<FsError>),
    /// Failed while renaming; what was already renamed was put back as far as possible.
    #[error("could not write {path}: {source}; {rollback}")]
    Publishing {
        /// The path as given.
        path: String,
        /// The failure.
        source: Box<FsError>,
        /// What the rollback did, as a message says it.
        rollback: String,
    },
}

impl From<FsError> for TxnError {
    fn from(e: FsError) -> Self {
        TxnError::Staging(Box::new(e))
    }
}

/// The new content of one change, written (synced by the caller), not yet visible at its
/// destination.
struct Staged {
    /// The folder it will be renamed in (the destination's deepest existing folder).
    dir: OwnedFd,
    /// Its name there, once it has one.
    name: OsString,
    /// Whether it has that name yet (an `O_TMPFILE` file gets it when published, or at once in
    /// a journaled transaction, whose journal names it).
    linked: bool,
    /// The open file: synced through it, and named through it while it has no name.
    file: OwnedFd,
}

impl Staged {
    /// Give an anonymous temp its name (`linkat` through `/proc/self/fd`).
    fn link(&mut self, as_name: &OsStr) -> io::Result<()> {
        if !self.linked {
            let proc_path = format!("/proc/self/fd/{}", self.file.as_raw_fd());
            linkat(
                rustix::fs::CWD,
                proc_path.as_str(),
                &self.dir,
                as_name,
                AtFlags::SYMLINK_FOLLOW,
            )?;
        }
        self.linked = true;
        Ok(())
    }

    fn discard(&self) {
        if self.linked {
            let _ = unlinkat(&self.dir, self.name.as_os_str(), AtFlags::empty());
        }
    }
}

fn write_parts(fd: &OwnedFd, parts: &[&[u8]]) -> io::Result<()> {
    // Borrowed, not a duplicate descriptor: `&File` writes through the same one.
    let file = std::mem::ManuallyDrop::new(std::fs::File::from(
        // SAFETY: the File never closes `fd` (ManuallyDrop) and lives only in this call.
        unsafe { OwnedFd::from_raw_fd(fd.as_raw_fd()) },
    ));
    if let [one] = parts {
        return (&*file).write_all(one);
    }
    let mut out = io::BufWriter::with_capacity(1 << 16, &*file);
    for p in parts {
        out.write_all(p)?;
    }
    out.flush()
}

/// Give the new file the old one's owner, group and mode (owner first: chown clears setuid).
fn keep_meta(fd: &OwnedFd, meta: Meta, shown: &str) -> Result<(), FsError> {
    let st = fstat(fd).map_err(|e| FsError::io("stat", shown, e.into()))?;
    if (st.st_uid, st.st_gid) != (meta.uid, meta.gid) {
        fchown(
            fd,
            Some(Uid::from_raw(meta.uid)),
            Some(Gid::from_raw(meta.gid)),
        )
        .map_err(|e| FsError::Refused {
            path: shown.to_string(),
            reason: format!(
                "cannot keep the file's owner and group {}:{} ({e}); toolroute replaces files \
                 with a new one and will not change who owns them, so nothing was changed",
                meta.uid, meta.gid
            ),
        })?;
    }
    if crate::os::stat_mode(&st) & 0o7777 == meta.mode & 0o7777
        && (st.st_uid, st.st_gid) == (meta.uid, meta.gid)
    {
        return Ok(()); // already so (the usual umask gives the usual mode)
    }
    fchmod(fd, Mode::from_bits_truncate(meta.mode as _))
        .map_err(|e| FsError::io("set the mode of", shown, e.into()))
}

/// Stage the new content for `target` under `name`, in the destination's folder: `O_TMPFILE`
/// there (inherits the folder's group and default ACLs, and has no name until it is complete),
/// else a named temp made with `O_CREAT | O_EXCL`. `named`: link it now (a journaled
/// transaction lists the names), else at publish time. Not synced: the caller syncs every new
/// file of a transaction together.
fn stage(
    target: &Target,
    parts: &[&[u8]],
    meta: Option<Meta>,
    name: OsString,
    named: bool,
) -> Result<Staged, FsError> {
    let shown = target.shown.as_str();
    let io = |action| move |e: Errno| FsError::io(action, shown, e.into());
    let dir = target
        .parent
        .dir
        .try_clone()
        .map_err(|e| FsError::io("stage", shown, e))?;
    let new_mode = Mode::from_raw_mode(0o666);
    let (file, anonymous) = match crate::os::anonymous_file(dir.as_fd(), new_mode) {
        Some(fd) => (fd, true),
        None => {
            let flags =
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = openat(&dir, name.as_os_str(), flags, new_mode)
                .map_err(io("create a temporary file for"))?;
            (fd, false)
        }
    };
    let mut staged = Staged {
        dir,
        name,
        linked: !anonymous,
        file,
    };
    let result = (|| {
        write_parts(&staged.file, parts).map_err(|e| FsError::io("write", shown, e))?;
        if let Some(m) = meta.or(target.existing().map(|e| e.meta)) {
            keep_meta(&staged.file, m, shown)?;
        } else {
            let owner = crate::beneath::owner_for_new(staged.dir.as_fd());
            if let Some((uid, gid)) =
                owner.map_err(|e| FsError::io("stat the folder of", shown, e))?
            {
                fchown(&staged.file, Some(uid), Some(gid)).map_err(io("set the owner of"))?;
            }
        }
        if named {
            let name = staged.name.clone();
            staged
                .link(&name)
                .map_err(|e| FsError::io("link the temporary file for", shown, e))?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        staged.discard();
        return Err(e);
    }
    Ok(staged)
}

/// Publish one change: make its folders, then put the temp in place, or remove the name.
/// `swap`: exchange the temp with the file it replaces, then remove the old file under the
/// temp's name (see [`swaps`]).
fn publish(
    change: &mut Change<'_>,
    staged: Option<&mut Staged>,
    swap: bool,
) -> Result<Vec<Created>, FsError> {
    let shown = change.target.shown.clone();
    let p = &mut change.target.parent;
    let (Op::Put { no_clobber, .. }, Some(s)) = (&change.op, staged) else {
        return unlinkat(&p.dir, p.name.as_os_str(), AtFlags::empty())
            .map(|()| Vec::new())
            .map_err(|e| FsError::from_io("delete", &shown, e.into()));
    };
    let created = p
        .make_dirs()
        .map_err(|e| FsError::io("create folders for", &shown, e))?;
    let fail = |e: io::Error, created: &[Created]| {
        for c in created.iter().rev() {
            c.undo();
        }
        match e.raw_os_error() {
            Some(libc::EEXIST) => FsError::Exists {
                path: shown.clone(),
            },
            _ => FsError::from_io("replace", &shown, e),
        }
    };
    if *no_clobber && !s.linked {
        // A new file that must not replace anything: link it straight to its name.
        let dir = match p.dir.try_clone() {
            Ok(d) => d,
            Err(e) => return Err(fail(e, &created)),
        };
        s.dir = dir;
        let name = p.name.clone();
        return match s.link(&name) {
            Ok(()) => Ok(created),
            Err(e) => Err(fail(e, &created)),
        };
    }
    if !s.linked {
        let name = s.name.clone();
        s.link(&name).map_err(|e| fail(e, &created))?;
    }
    if swap {
        let exchanged = renameat_with(
            &s.dir,
            s.name.as_os_str(),
            &p.dir,
            p.name.as_os_str(),
            RenameFlags::EXCHANGE,
        );
        if exchanged.is_ok() {
            // The temp's name now holds the old file; the change is published either way.
            let _ = unlinkat(&s.dir, s.name.as_os_str(), AtFlags::empty());
            return Ok(created);
        }
        // Gone meanwhile, or a file system without exchange: replace as below.
    }
    let flags = if *no_clobber {
        RenameFlags::NOREPLACE
    } else {
        RenameFlags::empty()
    };
    match renameat_with(
        &s.dir,
        s.name.as_os_str(),
        &p.dir,
        p.name.as_os_str(),
        flags,
    ) {
        Ok(()) => Ok(created),
        Err(e) => {
            s.discard();
            Err(fail(e.into(), &created))
        }
    }
}

/// Whether a change replaces its file by exchange rather than by rename. Renaming a new file
/// over an existing one makes ext4 start writing the new file out at once (`auto_da_alloc`, its
/// guard for writers that do not fsync), which is most of a small write's time; exchanging the
/// two and removing the old one does not. Only at durability `none`, which makes no promise for
/// a power loss (with `file` and `full` the new file is synced before it is published, so
/// nothing is left to start), and only over a regular file. After an exchange the temp's name
/// holds the old file: recovery tells it from the new one by the journal's digest.
fn swaps(change: &Change<'_>, durability: Durability) -> bool {
    cfg!(native_linux)
        && durability == Durability::None
        && change.target.existing().is_some()
        && matches!(
            change.op,
            Op::Put {
                no_clobber: false,
                ..
            }
        )
}

/// Put back what a published change replaced (after a failure of a later one).
fn restore(change: &Change<'_>, created: &[Created], txid: &str, n: usize) -> Result<(), FsError> {
    let t = &change.target;
    let shown = t.shown.as_str();
    let at = |e: Errno| FsError::io("restore", shown, e.into());
    match &t.original {
        Some(Original::File(e)) => {
            let s = stage(t, &[e.bytes.as_slice()], None, temp_name(txid, n), true)?;
            renameat(
                &s.dir,
                s.name.as_os_str(),
                &t.parent.dir,
                t.parent.name.as_os_str(),
            )
            .map_err(at)?;
        }
        Some(Original::Link(target)) => {
            let _ = unlinkat(&t.parent.dir, t.parent.name.as_os_str(), AtFlags::empty());
            symlinkat(
                OsStr::from_bytes(target),
                &t.parent.dir,
                t.parent.name.as_os_str(),
            )
            .map_err(at)?;
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
    opts: WriteOptions<'_>,
    fail_at: Option<usize>,
) -> Result<(), TxnError> {
    let durability = opts.durability;
    let ws = roots.workspace_root();
    let txid = next_txid();
    let many = changes.len() > 1;
    let first = changes
        .first()
        .map(|c| c.target.shown.clone())
        .unwrap_or_default();
    let digests: Vec<Option<ContentDigest>> = if many || opts.session.is_some() {
        changes.iter().map(new_digest).collect()
    } else {
        Vec::new()
    };
    // The whole journal first, unsynced: a process killed from here on leaves a journal that
    // names every temp it can have made.
    let journal = if many {
        let j = Journal::write(ws, &txid, &intents(&changes, &digests))
            .map_err(|e| FsError::io("write the journal for", &first, e))?;
        Some(j)
    } else {
        None
    };
    let mut staged: Vec<Option<Staged>> = Vec::with_capacity(changes.len());
    let abandon = |staged: &[Option<Staged>], journal: Option<Journal>| {
        for s in staged.iter().flatten() {
            s.discard();
        }
        if let Some(j) = journal {
            j.remove(ws);
        }
    };
    for (i, c) in changes.iter().enumerate() {
        let s = match &c.op {
            Op::Put { parts, meta, .. } => {
                stage(&c.target, parts, *meta, temp_name(&txid, i), many).map(Some)
            }
            Op::Remove => Ok(None),
        };
        match s {
            Ok(s) => staged.push(s),
            Err(e) => {
                abandon(&staged, journal);
                return Err(e.into());
            }
        }
    }
    // The first wait: every new file and the journal, synced together.
    if durability >= Durability::File {
        if let Err(e) = sync_staged(&staged, &changes, journal.as_ref(), roots) {
            abandon(&staged, journal);
            return Err(e.into());
        }
    }
    let mut done: Vec<Vec<Created>> = Vec::new();
    let mut replaced: Vec<OwnedFd> = Vec::new();
    for i in 0..changes.len() {
        if durability >= Durability::File {
            replaced.extend(hold_replaced(&changes[i].target));
        }
        let step = if fail_at == Some(i) {
            let e = io::Error::other("injected failure");
            Err(FsError::io("write", &changes[i].target.shown, e))
        } else {
            let swap = swaps(&changes[i], durability);
            publish(&mut changes[i], staged[i].as_mut(), swap)
        };
        match step {
            Ok(created) => done.push(created),
            Err(source) => {
                let mut failures = Vec::new();
                for (j, created) in done.iter().enumerate().rev() {
                    if let Err(e) = restore(&changes[j], created, &txid, changes.len() + j) {
                        failures.push(format!("{}: {e}", changes[j].target.shown));
                    }
                }
                abandon(&staged[i..], journal);
                note_written(&changes);
                let rollback = if failures.is_empty() {
                    "every file already written was restored; no file was changed".to_string()
                } else {
                    format!("restoring failed for: {}", failures.join("; "))
                };
                return Err(TxnError::Publishing {
                    path: changes[i].target.shown.clone(),
                    source: Box::new(source),
                    rollback,
                });
            }
        }
    }
    note_written(&changes);
    if let Some(session) = opts.session {
        note_in_session(session, &changes, &digests);
    }
    // The second wait: at `full`, the folders the renames changed and those they were made
    // in, synced; with them, the files the changes replaced are let go.
    let folders = if durability == Durability::Full {
        let dirs = changes.iter().map(|c| c.target.parent.dir.as_fd());
        let made = done.iter().flatten().map(Created::parent);
        durable::distinct_folders(dirs.chain(made))
    } else {
        Vec::new()
    };
    let syncs = folders.iter().map(|f| durable::sync(f.as_fd(), Sync::All));
    let _ = durable::together(
        syncs
            .chain(replaced.into_iter().map(durable::release))
            .collect(),
    );
    if let Some(j) = journal {
        j.remove(ws);
    }
    Ok(())
}

/// The file a change replaces or removes, held open so that freeing it (its blocks, and on a disk
/// mounted with `discard` a discard of each, milliseconds apiece) happens in the second wave,
/// in parallel, rather than inside each rename, one after the other.
fn hold_replaced(target: &Target) -> Option<OwnedFd> {
    target.existing()?;
    let flags = crate::os::handle_flags() | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    openat(
        &target.parent.dir,
        target.parent.name.as_os_str(),
        flags,
        Mode::empty(),
    )
    .ok()
}

/// The changes as the journal records them (`digests`: of each new content, when taken).
fn intents<'a>(changes: &'a [Change<'_>], digests: &[Option<ContentDigest>]) -> Vec<Intent<'a>> {
    changes
        .iter()
        .enumerate()
        .map(|(i, c)| Intent {
            dest: &c.target.parent,
            new: match &c.op {
                Op::Put {
                    parts, no_clobber, ..
                } => {
                    let digest = digests.get(i).copied().flatten();
                    Some((*no_clobber, digest.unwrap_or_else(|| digest_parts(parts))))
                }
                Op::Remove => None,
            },
        })
        .collect()
}

/// The digest of a change's new content (`None` for a removal).
fn new_digest(change: &Change<'_>) -> Option<ContentDigest> {
    match &change.op {
        Op::Put { parts, .. } => Some(digest_parts(parts)),
        Op::Remove => None,
    }
}

/// The first wait of a transaction: every staged file, the journal, and the folders that hold
/// them (a temp's name, and the journal's, must be on disk before any rename: recovery finds
/// them by name), all synced at once.
fn sync_staged(
    staged: &[Option<Staged>],
    changes: &[Change<'_>],
    journal: Option<&Journal>,
    roots: &Roots,
) -> Result<(), FsError> {
    let folders = match journal {
        Some(_) => {
            let root = roots.workspace_root().fd();
            let temps = staged.iter().flatten().map(|s| s.dir.as_fd());
            durable::distinct_folders(std::iter::once(root).chain(temps))
        }
        None => Vec::new(),
    };
    // What failed is told by its place: the journal first, then each staged file in order.
    let mut owners: Vec<usize> = Vec::new();
    let mut jobs: Vec<durable::Job<'_>> = Vec::new();
    if let Some(j) = journal {
        jobs.push(durable::sync(j.fd(), Sync::Data));
        owners.push(0);
    }
    for (i, s) in staged.iter().enumerate() {
        if let Some(s) = s {
            jobs.push(durable::sync(s.file.as_fd(), Sync::All));
            owners.push(i);
        }
    }
    jobs.extend(folders.iter().map(|f| durable::sync(f.as_fd(), Sync::All)));
    durable::together(jobs).map_err(|(at, e)| {
        let i = owners.get(at).copied().unwrap_or(0);
        FsError::io("fsync", &changes[i].target.shown, e)
    })
}

/// Tell whoever listens (the search indexes) before the call returns (their watcher would, a
/// moment later).
fn note_written(changes: &[Change<'_>]) {
    if let Some(observer) = crate::observe::listening() {
        for c in changes {
            observer.written(&c.target.resolved());
        }
    }
}

/// The session now knows what it wrote (and that what it removed is gone). `digests`: those of
/// the new contents, when already taken.
fn note_in_session(session: &Session, changes: &[Change<'_>], digests: &[Option<ContentDigest>]) {
    for (i, c) in changes.iter().enumerate() {
        let path = c.target.resolved();
        match digests.get(i).copied().flatten().or_else(|| new_digest(c)) {
            Some(digest) => session.note(path, digest),
            None => session.forget(&path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{self, Entry, NewFile};
    use std::path::{Path, PathBuf};

    /// A workspace with `a.txt`, `gone.txt` and an empty folder `sub`.
    fn ws() -> (tempfile::TempDir, Roots) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "old a").unwrap();
        std::fs::write(d.path().join("gone.txt"), "bye").unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let r = Roots::new(d.path(), &[]).unwrap();
        (d, r)
    }

    /// `a.txt` rewritten, `sub/new/b.txt` made (with its folder), `gone.txt` removed.
    fn changes(r: &Roots) -> Vec<Change<'static>> {
        let put = |shown: &str, content: &'static [u8], no_clobber| Change {
            target: r.target(shown, true, true, 1 << 20).unwrap(),
            op: Op::Put {
                parts: vec![content],
                no_clobber,
                meta: None,
            },
        };
        vec![
            put("a.txt", b"new a", false),
            put("sub/new/b.txt", b"new b", true),
            Change {
                target: r.target("gone.txt", false, true, 1 << 20).unwrap(),
                op: Op::Remove,
            },
        ]
    }

    fn names(d: &Path) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn the_journal_names_each_temp_its_destination_and_digest_and_ends_complete() {
        let (d, r) = ws();
        let changes = changes(&r);
        let digests: Vec<_> = changes.iter().map(new_digest).collect();
        let txid = journal::next_txid();
        let j = Journal::write(r.workspace_root(), &txid, &intents(&changes, &digests)).unwrap();
        let name = format!(".toolroute-{txid}.journal");
        let root = crate::durable::open_folder(r.workspace_root().fd()).unwrap();
        let read = journal::read(&root, OsStr::new(&name)).unwrap();
        assert!(read.complete && read.by_digest);
        let temp = |dir: &str, i: usize| PathBuf::from(dir).join(temp_name(&txid, i));
        assert_eq!(
            read.entries,
            vec![
                Entry::Put {
                    tmp: temp("", 0),
                    dest: "a.txt".into(),
                    no_clobber: false,
                    new: NewFile::Digest(digest_parts(&[b"new a"])),
                },
                // Staged in the deepest folder that exists; its own folder is made at publish.
                Entry::Put {
                    tmp: temp("sub", 1),
                    dest: "sub/new/b.txt".into(),
                    no_clobber: true,
                    new: NewFile::Digest(digest_parts(&[b"new b"])),
                },
                Entry::Del {
                    dest: "gone.txt".into()
                },
            ]
        );
        j.remove(r.workspace_root());
        assert!(!d.path().join(name).exists());
    }

    #[test]
    fn a_commit_of_many_changes_applies_them_all_and_leaves_nothing_behind() {
        for durability in [Durability::None, Durability::File, Durability::Full] {
            let (d, r) = ws();
            let session = Session::new(true);
            let opts = WriteOptions {
                durability,
                session: Some(&session),
                ..WriteOptions::default()
            };
            commit(&r, changes(&r), opts, None).unwrap();
            assert_eq!(std::fs::read(d.path().join("a.txt")).unwrap(), b"new a");
            assert_eq!(
                std::fs::read(d.path().join("sub/new/b.txt")).unwrap(),
                b"new b"
            );
            assert_eq!(names(d.path()), ["a.txt", "sub"], "{durability:?}");
            assert_eq!(names(&d.path().join("sub")), ["new"]);
            // The session knows what it wrote, by the journal's digests.
            let a = d.path().canonicalize().unwrap().join("a.txt");
            assert_eq!(session.known(&a), Some(digest_parts(&[b"new a"])));
        }
    }

    #[test]
    fn a_failed_publish_puts_back_what_was_published_and_removes_the_journal() {
        let (d, r) = ws();
        let failed = commit(&r, changes(&r), WriteOptions::default(), Some(2));
        let Err(TxnError::Publishing { rollback, .. }) = failed else {
            panic!("{failed:?}");
        };
        assert!(rollback.contains("no file was changed"), "{rollback}");
        assert_eq!(std::fs::read(d.path().join("a.txt")).unwrap(), b"old a");
        assert_eq!(std::fs::read(d.path().join("gone.txt")).unwrap(), b"bye");
        assert_eq!(names(d.path()), ["a.txt", "gone.txt", "sub"]);
        assert!(names(&d.path().join("sub")).is_empty());
    }

    #[test]
    fn the_replaced_files_let_go_in_the_second_wave_leave_no_descriptor_open() {
        let (d, r) = ws();
        // Descriptors of this process open on something in this workspace (other tests, on
        // other threads, use other folders).
        let here = d.path().canonicalize().unwrap();
        let open = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                .filter(|target| target.starts_with(&here))
                .count()
        };
        let before = open();
        for round in 0..10 {
            let content: &'static [u8] = if round % 2 == 0 { b"even" } else { b"odd" };
            let puts = ["a.txt", "sub/c.txt"].map(|shown| Change {
                target: r.target(shown, true, true, 1 << 20).unwrap(),
                op: Op::Put {
                    parts: vec![content],
                    no_clobber: false,
                    meta: None,
                },
            });
            commit(&r, puts.into(), WriteOptions::default(), None).unwrap();
        }
        assert_eq!(std::fs::read(d.path().join("sub/c.txt")).unwrap(), b"odd");
        assert_eq!(open(), before);
    }
}

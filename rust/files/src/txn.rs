//! Atomic, crash-safe writes: one file, or many all-or-nothing.
//!
//! Every new content is first written to a temporary file made by descriptor in the
//! destination's folder (`O_TMPFILE`, which has no name until it is complete; a named
//! `.toolroute-*.tmp` where the file system lacks it), with the old file's owner, group and mode,
//! and synced as the [`Durability`] asks. Only then does anything visible change: one `renameat`
//! per file (or `unlinkat` for a delete, on the name itself, so a symlink is removed, never its
//! target).
//!
//! With more than one change, a journal in the workspace root (`.toolroute-<owner>-<n>.journal`)
//! lists every temp and its destination before any temp exists, and gets its `end` line (the
//! commit point) when all are staged. If the process dies, the next use of the workspace
//! ([`recover`], run when a context is made) finishes the renames of a committed journal and
//! removes the temps of an uncommitted one. Names carry their process's pid and start time, so
//! a live transaction of another process is never touched.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rustix::fs::{
    fchmod, fchown, fstat, linkat, openat, renameat, renameat_with, symlinkat, unlinkat, AtFlags,
    Mode, OFlags, RenameFlags,
};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

use crate::beneath::{fd_path, Created, Missing, Root};
use crate::confine::Roots;
use crate::error::FsError;
use crate::fs::{Meta, Original, Permit, Target};
use crate::hash::digest_parts;
use crate::session::Session;

/// How toolroute's temps and journals are named (then the owner's pid and start time).
pub const TEMP_PREFIX: &str = ".toolroute-";
/// Version 2 adds `swap` lines (a change published by exchange); version 1 journals read the same.
const JOURNAL_MAGIC: &str = "toolroute-journal 2";
const JOURNAL_MAGIC_V1: &str = "toolroute-journal 1";

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
    format!(
        "{}-{}",
        owner_tag(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
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
    let d = openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fsync(&d)?;
    Ok(())
}

/// The new content of one change, written and synced, not yet visible at its destination.
struct Staged {
    /// The folder it will be renamed in (the destination's deepest existing folder).
    dir: OwnedFd,
    /// Its name there, once it has one (`O_TMPFILE` files get one only when published).
    name: OsString,
    linked: bool,
    /// The open file while it has no name.
    file: Option<OwnedFd>,
    /// Its inode (0 when unknown): after an exchange, tells the new file from the old one.
    ino: u64,
    /// Its descriptor while its fsync is still to come ([`sync_staged`] does them together).
    unsynced: Option<OwnedFd>,
}

impl Staged {
    /// Give an anonymous temp its name (`linkat` through `/proc/self/fd`).
    fn link(&mut self, as_name: &OsStr) -> io::Result<()> {
        if let Some(fd) = &self.file {
            let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            linkat(
                rustix::fs::CWD,
                proc_path.as_str(),
                &self.dir,
                as_name,
                AtFlags::SYMLINK_FOLLOW,
            )?;
            self.file = None;
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

fn temp_name(txid: &str, i: usize) -> OsString {
    OsString::from(format!("{TEMP_PREFIX}{txid}.{i}.tmp"))
}

/// Stage the new content for `target` as temp `i` of `txid`, in the destination's folder:
/// `O_TMPFILE` there (inherits the folder's group and default ACLs, and has no name until it is
/// complete), else a named temp made with `O_CREAT | O_EXCL`. `named`: link it now (a
/// journaled transaction lists the names), else at publish time.
fn stage(
    target: &Target,
    parts: &[&[u8]],
    meta: Option<Meta>,
    name: OsString,
    named: bool,
    durability: Durability,
    defer_sync: bool,
) -> Result<Staged, FsError> {
    let shown = target.shown.as_str();
    let io = |action| move |e: Errno| FsError::io(action, shown, e.into());
    let dir = target
        .parent
        .dir
        .try_clone()
        .map_err(|e| FsError::io("stage", shown, e))?;
    let new_mode = Mode::from_raw_mode(0o666);
    let (fd, anonymous) = match crate::os::anonymous_file(dir.as_fd(), new_mode) {
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
        file: None,
        ino: fstat(&fd).map_or(0, |st| crate::os::file_id(&st).1),
        unsynced: None,
    };
    let result = (|| {
        write_parts(&fd, parts).map_err(|e| FsError::io("write", shown, e))?;
        if let Some(m) = meta.or(target.existing().map(|e| e.meta)) {
            keep_meta(&fd, m, shown)?;
        } else {
            let owner = crate::beneath::owner_for_new(staged.dir.as_fd());
            if let Some((uid, gid)) =
                owner.map_err(|e| FsError::io("stat the folder of", shown, e))?
            {
                fchown(&fd, Some(uid), Some(gid)).map_err(io("set the owner of"))?;
            }
        }
        if durability >= Durability::File {
            if defer_sync {
                staged.unsynced = Some(fd.try_clone().map_err(|e| FsError::io("fsync", shown, e))?);
            } else {
                rustix::fs::fsync(&fd).map_err(io("fsync"))?;
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        staged.discard();
        return Err(e);
    }
    if anonymous {
        staged.file = Some(fd);
        if named {
            let name = staged.name.clone();
            staged
                .link(&name)
                .map_err(|e| FsError::io("link the temporary file for", shown, e))?;
        }
    }
    Ok(staged)
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

/// A transaction's journal, in the workspace root: first the intent (every temp and its
/// destination, written before any temp exists), then `end` (the commit point).
struct Journal {
    file: std::fs::File,
    name: OsString,
}

impl Journal {
    fn begin(
        ws: &Root,
        txid: &str,
        changes: &[Change<'_>],
        durability: Durability,
    ) -> io::Result<Self> {
        let mut text = format!("{JOURNAL_MAGIC}\n");
        for (i, c) in changes.iter().enumerate() {
            let p = &c.target.parent;
            let mut rest: Vec<&OsStr> = p.missing.iter().map(|m| m.as_os_str()).collect();
            rest.push(p.name.as_os_str());
            let dest = toolroute_digest::hex(
                ws_relative(ws, p.dir.as_fd(), &rest)?
                    .as_os_str()
                    .as_bytes(),
            );
            match &c.op {
                Op::Put { no_clobber, .. } => {
                    let tmp = ws_relative(ws, p.dir.as_fd(), &[temp_name(txid, i).as_os_str()])?;
                    let tmp = toolroute_digest::hex(tmp.as_os_str().as_bytes());
                    text.push_str(&format!("put {tmp} {dest} {}\n", u8::from(*no_clobber)));
                }
                Op::Remove => text.push_str(&format!("del {dest}\n")),
            }
        }
        let name = OsString::from(format!("{TEMP_PREFIX}{txid}.journal"));
        let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
        let fd = openat(ws.fd(), name.as_os_str(), flags, Mode::from_raw_mode(0o600))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(text.as_bytes())?;
        if durability >= Durability::File {
            file.sync_data()?;
        }
        Ok(Journal { file, name })
    }

    /// The commit point: from here on recovery finishes the transaction. `swapped`: the changes
    /// to be published by exchange, with their new files' inodes.
    fn commit(&mut self, durability: Durability, swapped: &[(usize, u64)]) -> io::Result<()> {
        let mut text = String::new();
        for (i, ino) in swapped {
            text.push_str(&format!("swap {i} {ino}\n"));
        }
        text.push_str("end\n");
        self.file.write_all(text.as_bytes())?;
        if durability >= Durability::File {
            self.file.sync_data()?;
        }
        Ok(())
    }

    fn remove(self, ws: &Root) {
        let _ = unlinkat(ws.fd(), self.name.as_os_str(), AtFlags::empty());
    }
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
/// nothing is left to start), and only over a regular file. A journal names the changes it
/// publishes so, with the new files' inodes: after an exchange the temp holds the old file, and
/// recovery must not rename that into place.
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
            let s = stage(
                t,
                &[e.bytes.as_slice()],
                None,
                temp_name(txid, n),
                true,
                Durability::None,
                false,
            )?;
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
    let mut journal = if many {
        let j = Journal::begin(ws, &txid, &changes, durability)
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
            Op::Put { parts, meta, .. } => stage(
                &c.target,
                parts,
                *meta,
                temp_name(&txid, i),
                many,
                durability,
                many,
            )
            .map(Some),
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
    if let Err(e) = sync_staged(&mut staged, &changes) {
        abandon(&staged, journal);
        return Err(e.into());
    }
    let swap: Vec<bool> = changes
        .iter()
        .zip(&staged)
        .map(|(c, s)| swaps(c, durability) && s.as_ref().is_some_and(|s| s.ino != 0))
        .collect();
    if let Some(j) = journal.as_mut() {
        let swapped: Vec<(usize, u64)> = (0..changes.len())
            .filter(|&i| swap[i])
            .filter_map(|i| staged[i].as_ref().map(|s| (i, s.ino)))
            .collect();
        if let Err(e) = j.commit(durability, &swapped) {
            abandon(&staged, journal);
            return Err(FsError::io("write the journal for", &first, e).into());
        }
    }
    let mut done: Vec<Vec<Created>> = Vec::new();
    for i in 0..changes.len() {
        let step = if fail_at == Some(i) {
            let e = io::Error::other("injected failure");
            Err(FsError::io("write", &changes[i].target.shown, e))
        } else {
            publish(&mut changes[i], staged[i].as_mut(), swap[i])
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
        note_in_session(session, &changes);
    }
    if durability == Durability::Full {
        sync_folders(&changes);
    }
    if let Some(j) = journal {
        j.remove(ws);
    }
    Ok(())
}

/// Threads that fsync a transaction's staged files together.
const SYNC_THREADS: usize = 8;

/// fsync every staged file whose sync was deferred, concurrently: fsyncs issued together share
/// the file system's journal commits (ext4's jbd2 groups them), where one after another each
/// waits for a commit of its own. All are done before the commit point, as before.
fn sync_staged(staged: &mut [Option<Staged>], changes: &[Change<'_>]) -> Result<(), FsError> {
    let fds: Vec<(usize, OwnedFd)> = staged
        .iter_mut()
        .enumerate()
        .filter_map(|(i, s)| s.as_mut()?.unsynced.take().map(|fd| (i, fd)))
        .collect();
    let failed: Option<(usize, io::Error)> = match fds.len() {
        0 => None,
        1 => rustix::fs::fsync(&fds[0].1)
            .err()
            .map(|e| (fds[0].0, e.into())),
        n => {
            let per_thread = n.div_ceil(n.min(SYNC_THREADS));
            std::thread::scope(|scope| {
                let handles: Vec<_> = fds
                    .chunks(per_thread)
                    .map(|chunk| {
                        scope.spawn(move || {
                            chunk
                                .iter()
                                .find_map(|(i, fd)| rustix::fs::fsync(fd).err().map(|e| (*i, e)))
                        })
                    })
                    .collect();
                handles.into_iter().find_map(|h| match h.join() {
                    Ok(found) => found.map(|(i, e)| (i, io::Error::from(e))),
                    Err(_) => Some((fds[0].0, io::Error::other("an fsync thread panicked"))),
                })
            })
        }
    };
    match failed {
        Some((i, e)) => Err(FsError::io("fsync", &changes[i].target.shown, e)),
        None => Ok(()),
    }
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

/// The session now knows what it wrote (and that what it removed is gone).
fn note_in_session(session: &Session, changes: &[Change<'_>]) {
    for c in changes {
        let path = c.target.resolved();
        match &c.op {
            Op::Put { parts, .. } => session.note(path, digest_parts(parts)),
            Op::Remove => session.forget(&path),
        }
    }
}

/// One fsync per changed folder, after all renames (a failure here does not undo the write).
fn sync_folders(changes: &[Change<'_>]) {
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for c in changes {
        let dir = c.target.parent.dir.as_fd();
        if let Ok(st) = fstat(dir) {
            let id = crate::os::file_id(&st);
            if !seen.contains(&id) {
                seen.push(id);
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
    /// Transactions that died before their commit point: their temps were removed.
    pub rolled_back: usize,
}

/// Finish or undo transactions whose process died (see the module's comment); live ones (their
/// process still runs) are left alone. Looks only at the workspace root, where journals live.
pub fn recover(ws: &Root) -> io::Result<Recovery> {
    let mut out = Recovery::default();
    let dir = openat(
        ws.fd(),
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut journals: Vec<OsString> = Vec::new();
    for entry in rustix::fs::Dir::read_from(&dir)? {
        let name = entry?.file_name().to_bytes().to_vec();
        if name.starts_with(TEMP_PREFIX.as_bytes()) && name.ends_with(b".journal") {
            journals.push(OsString::from_vec(name));
        }
    }
    for name in journals {
        let tag = &name.as_bytes()[TEMP_PREFIX.len()..];
        if owner_alive(&String::from_utf8_lossy(tag)) {
            continue;
        }
        let (entries, committed) = read_journal(&dir, &name)?;
        if committed {
            roll_forward(ws, &entries);
            out.rolled_forward += 1;
        } else {
            roll_back(ws, &entries);
            out.rolled_back += 1;
        }
        match unlinkat(&dir, name.as_os_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

enum Entry {
    Put {
        tmp: PathBuf,
        dest: PathBuf,
        no_clobber: bool,
        /// Published by exchange: the new file's inode.
        swapped: Option<u64>,
    },
    Del {
        dest: PathBuf,
    },
}

/// The entries of a journal, and whether it reached its commit point. A journal cut short by
/// the crash (even empty) is simply uncommitted: the entries read so far are all that can have
/// temps, since staging starts only after the whole intent is written.
fn read_journal(dir: &OwnedFd, name: &OsStr) -> io::Result<(Vec<Entry>, bool)> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = openat(dir, name, flags, Mode::empty())?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.split_inclusive('\n');
    let mut out = Vec::new();
    let magic = lines.next().and_then(|l| l.strip_suffix('\n'));
    if magic != Some(JOURNAL_MAGIC) && magic != Some(JOURNAL_MAGIC_V1) {
        return Ok((out, false));
    }
    let path = |s: Option<&str>| -> Option<PathBuf> {
        Some(PathBuf::from(OsString::from_vec(unhex(s?)?)))
    };
    for line in lines {
        // A line cut by the crash is not part of the journal.
        let Some(line) = line.strip_suffix('\n') else {
            break;
        };
        let mut f = line.split(' ');
        let entry = match f.next() {
            Some("end") => return Ok((out, true)),
            Some("swap") => {
                let i = f.next().and_then(|n| n.parse::<usize>().ok());
                let ino = f.next().and_then(|n| n.parse::<u64>().ok());
                match (i.and_then(|i| out.get_mut(i)), ino) {
                    (Some(Entry::Put { swapped, .. }), Some(ino)) => *swapped = Some(ino),
                    _ => break,
                }
                continue;
            }
            Some("put") => path(f.next())
                .zip(path(f.next()))
                .map(|(tmp, dest)| Entry::Put {
                    tmp,
                    dest,
                    no_clobber: f.next() == Some("1"),
                    swapped: None,
                }),
            Some("del") => path(f.next()).map(|dest| Entry::Del { dest }),
            _ => None,
        };
        match entry {
            Some(e) => out.push(e),
            None => break,
        }
    }
    Ok((out, false))
}

/// Redo a committed journal's renames and removals (each is idempotent: a temp already renamed
/// is gone, a file already removed is missing).
fn roll_forward(ws: &Root, journal: &[Entry]) {
    let walk = |rel: &Path, missing| ws.parent(rel, false, missing);
    for e in journal {
        match e {
            Entry::Put {
                tmp,
                dest,
                no_clobber,
                swapped,
            } => {
                let (Ok(src), Ok(mut dst)) = (walk(tmp, Missing::Fail), walk(dest, Missing::Stop))
                else {
                    continue;
                };
                let present =
                    rustix::fs::statat(&src.dir, src.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW);
                if let Some(new) = *swapped {
                    // After the exchange the temp holds the old file: only the new one (by its
                    // inode) is put in place; an old one left under the temp's name goes.
                    let ino = |st: &rustix::fs::Stat| crate::os::file_id(st).1;
                    let at_dest = rustix::fs::statat(
                        &dst.dir,
                        dst.name.as_os_str(),
                        AtFlags::SYMLINK_NOFOLLOW,
                    );
                    let published = at_dest.as_ref().is_ok_and(|st| ino(st) == new);
                    let pending = present.as_ref().is_ok_and(|st| ino(st) == new);
                    if published || !pending {
                        if present.is_ok() {
                            let _ = unlinkat(&src.dir, src.name.as_os_str(), AtFlags::empty());
                        }
                        continue;
                    }
                }
                if present.is_err() || dst.make_dirs().is_err() {
                    continue; // already renamed, or nowhere to put it
                }
                let flags = if *no_clobber {
                    RenameFlags::NOREPLACE
                } else {
                    RenameFlags::empty()
                };
                let (from, to) = (src.name.as_os_str(), dst.name.as_os_str());
                if renameat_with(&src.dir, from, &dst.dir, to, flags).is_err() {
                    let _ = unlinkat(&src.dir, from, AtFlags::empty());
                }
            }
            Entry::Del { dest } => {
                if let Ok(p) = walk(dest, Missing::Fail) {
                    let _ = unlinkat(&p.dir, p.name.as_os_str(), AtFlags::empty());
                }
            }
        }
    }
}

/// Remove the temps of a journal that never reached its commit point.
fn roll_back(ws: &Root, journal: &[Entry]) {
    for e in journal {
        if let Entry::Put { tmp, .. } = e {
            if let Ok(p) = ws.parent(tmp, false, Missing::Fail) {
                let _ = unlinkat(&p.dir, p.name.as_os_str(), AtFlags::empty());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Roots) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "old a").unwrap();
        std::fs::write(d.path().join("gone.txt"), "bye").unwrap();
        let r = Roots::new(d.path(), &[]).unwrap();
        (d, r)
    }

    fn journal(d: &Path, body: &str) {
        let line = |tmp: &str, dest: &str| {
            format!(
                "put {} {} 0\n",
                toolroute_digest::hex(tmp.as_bytes()),
                toolroute_digest::hex(dest.as_bytes())
            )
        };
        let text = format!(
            "{JOURNAL_MAGIC}\n{}{}del {}\n{body}",
            line(".toolroute-1-1-0.0.tmp", "a.txt"),
            line(".toolroute-1-1-0.1.tmp", "new/b.txt"),
            toolroute_digest::hex(b"gone.txt")
        );
        std::fs::write(d.join(".toolroute-1-1-0.0.tmp"), "new a").unwrap();
        std::fs::write(d.join(".toolroute-1-1-0.1.tmp"), "new b").unwrap();
        // pid 1 with start time 1 is never a live toolroute process.
        std::fs::write(d.join(".toolroute-1-1-0.journal"), text).unwrap();
    }

    fn leftovers(d: &Path) -> usize {
        std::fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".toolroute-")
            })
            .count()
    }

    #[test]
    fn committed_journal_rolls_forward() {
        let (d, r) = ws();
        journal(d.path(), "end\n");
        let done = recover(r.workspace_root()).unwrap();
        assert_eq!(
            done,
            Recovery {
                rolled_forward: 1,
                rolled_back: 0
            }
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("a.txt")).unwrap(),
            "new a"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("new/b.txt")).unwrap(),
            "new b"
        );
        assert!(!d.path().join("gone.txt").exists());
        assert_eq!(leftovers(d.path()), 0);
    }

    /// The inode of a file, as the journal records it.
    fn ino(path: &Path) -> u64 {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap())
    }

    /// A committed journal whose first change is published by exchange, killed `exchanged` (the
    /// temp now holds the old file) or not yet: either way the new file ends up in place and the
    /// old one is gone, never renamed back.
    fn swapped_journal_rolls_forward(exchanged: bool) {
        let (d, r) = ws();
        let tmp = d.path().join(".toolroute-1-1-0.0.tmp");
        journal(d.path(), "");
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
        let text = std::fs::read_to_string(d.path().join(".toolroute-1-1-0.journal")).unwrap();
        std::fs::write(
            d.path().join(".toolroute-1-1-0.journal"),
            format!("{text}swap 0 {new}\nend\n"),
        )
        .unwrap();
        let done = recover(r.workspace_root()).unwrap();
        assert_eq!(done.rolled_forward, 1);
        let a = d.path().join("a.txt");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new a");
        assert_eq!(ino(&a), new);
        assert_eq!(
            std::fs::read_to_string(d.path().join("new/b.txt")).unwrap(),
            "new b"
        );
        assert_eq!(leftovers(d.path()), 0);
    }

    #[cfg(native_linux)]
    #[test]
    fn swapped_journal_killed_after_the_exchange_keeps_the_new_file() {
        swapped_journal_rolls_forward(true);
    }

    #[test]
    fn swapped_journal_killed_before_the_exchange_puts_the_new_file_in_place() {
        swapped_journal_rolls_forward(false);
    }

    #[test]
    fn version_1_journal_still_rolls_forward() {
        let (d, r) = ws();
        journal(d.path(), "end\n");
        let path = d.path().join(".toolroute-1-1-0.journal");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replacen(JOURNAL_MAGIC, JOURNAL_MAGIC_V1, 1)).unwrap();
        assert_eq!(recover(r.workspace_root()).unwrap().rolled_forward, 1);
        assert_eq!(
            std::fs::read_to_string(d.path().join("a.txt")).unwrap(),
            "new a"
        );
    }

    #[test]
    fn empty_journal_of_a_dead_process_is_removed() {
        let (d, r) = ws();
        std::fs::write(d.path().join(".toolroute-1-1-0.journal"), "").unwrap();
        let done = recover(r.workspace_root()).unwrap();
        assert_eq!(done.rolled_back, 1);
        assert_eq!(leftovers(d.path()), 0);
    }

    #[test]
    fn uncommitted_journal_rolls_back() {
        let (d, r) = ws();
        journal(d.path(), "put 6");
        let done = recover(r.workspace_root()).unwrap();
        assert_eq!(
            done,
            Recovery {
                rolled_forward: 0,
                rolled_back: 1
            }
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("a.txt")).unwrap(),
            "old a"
        );
        assert!(d.path().join("gone.txt").exists() && !d.path().join("new").exists());
        assert_eq!(leftovers(d.path()), 0);
    }
}

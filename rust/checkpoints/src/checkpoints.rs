//! Taking a checkpoint (scan the workspace, keep the bytes of what changed since the last one)
//! and rewinding to one (every change since undone in one transaction of the file layer).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{fstat, mkdirat, readlinkat, unlinkat, AtFlags, FlockOperation, Mode, OFlags};

use toolroute_files::{commit, open_beneath, read_flags, Change, Meta, Op, Roots, WriteOptions};

use crate::manifest::{Content, Entry, Manifest};
use crate::private;
use crate::scan::{displaced_ancestor, scan, Kind, ScanError, Stamp, Tree};
use crate::store::{cut, digest, ChunkId, Store, Writer};

/// How much a store may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Checkpoints kept (the oldest go first).
    pub max_checkpoints: usize,
    /// Bytes of chunks kept; past it the oldest checkpoints go, and what still does not fit is
    /// not kept (and named when a rewind would need it).
    pub max_store_bytes: u64,
    /// A larger file's bytes are not kept (its stamps are).
    pub max_file_bytes: u64,
    /// Most paths a workspace may hold to be checkpointed.
    pub max_paths: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_checkpoints: 100,
            max_store_bytes: 1 << 30,
            max_file_bytes: 16 << 20,
            max_paths: 200_000,
        }
    }
}

/// Why a checkpoint or a rewind failed (nothing in the workspace was changed).
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The workspace could not be scanned.
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// The store failed.
    #[error("checkpoint store {dir}: {source}")]
    Store {
        /// The store's folder.
        dir: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// No such checkpoint.
    #[error("no checkpoint {0} (it was never taken, or dropped by the store's limits)")]
    Unknown(u64),
    /// The store's folder is inside the workspace.
    #[error("the checkpoint store {0} must be outside the workspace")]
    Inside(PathBuf),
    /// Writing the restored files failed; the transaction put back what it had changed.
    #[error("rewind failed: {0}")]
    Write(String),
}

/// What a checkpoint is, as listed.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Its id.
    pub id: u64,
    /// Its label.
    pub label: String,
    /// When it was taken (ns since the epoch).
    pub taken_ns: i128,
    /// Files it covers.
    pub files: usize,
    /// Files whose bytes it does not hold, with why.
    pub uncovered: Vec<(String, String)>,
    /// Bytes the store grew by for it (0 when listed).
    pub added_bytes: u64,
}

/// What a rewind did.
#[derive(Debug, Clone, Default)]
pub struct Rewound {
    /// Files written back (changed or deleted since).
    pub restored: Vec<String>,
    /// Paths created since, removed.
    pub removed: Vec<String>,
    /// What could not be put back, with why.
    pub unrestorable: Vec<(String, String)>,
    /// The checkpoint taken just before, to undo the rewind.
    pub undo: u64,
}

/// The checkpoints of one workspace, kept in a folder outside it.
#[derive(Debug)]
pub struct Checkpoints {
    roots: Roots,
    dir: PathBuf,
    store: Store,
    limits: Limits,
    /// The newest checkpoint this process took (the next one starts from it).
    last: Mutex<Option<Arc<Manifest>>>,
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// A change whose `ctime` is this close to the scan that read it may be followed, within the
/// clock's granularity, by another with the same stamps: such a file is read again next time.
const RACY_NS: i128 = 1_000_000_000;

impl Checkpoints {
    /// The checkpoints of `roots`' workspace kept in `dir` (made if missing; refused inside the
    /// workspace).
    pub fn open(roots: Roots, dir: &Path, limits: Limits) -> Result<Self, CheckpointError> {
        let store_err = |source| CheckpointError::Store {
            dir: dir.to_path_buf(),
            source,
        };
        private::create_dir_all(&dir.join("checkpoints")).map_err(store_err)?;
        let dir = dir.canonicalize().map_err(store_err)?;
        if dir.starts_with(roots.workspace()) {
            return Err(CheckpointError::Inside(dir));
        }
        private::tighten(&dir).map_err(store_err)?;
        let lock = lock_in(&dir).map_err(store_err)?;
        let store = Store::open(&dir).map_err(store_err)?;
        drop(lock);
        Ok(Self {
            roots,
            dir,
            store,
            limits,
            last: Mutex::default(),
        })
    }

    fn err(&self, source: io::Error) -> CheckpointError {
        CheckpointError::Store {
            dir: self.dir.clone(),
            source,
        }
    }

    /// One process at a time changes a store; what another changed before is reread, and
    /// what a dead one left half-written (a manifest's temp) removed.
    fn lock(&self) -> Result<OwnedFd, CheckpointError> {
        let fd = lock_in(&self.dir).map_err(|e| self.err(e))?;
        self.store.refresh().map_err(|e| self.err(e))?;
        for e in fs::read_dir(self.dir.join("checkpoints")).map_err(|e| self.err(e))? {
            let path = e.map_err(|e| self.err(e))?.path();
            if path.extension().is_some_and(|x| x == "tmp") {
                let _ = fs::remove_file(path);
            }
        }
        Ok(fd)
    }

    fn manifest_path(&self, id: u64) -> PathBuf {
        self.dir.join("checkpoints").join(format!("{id:020}.ckpt"))
    }

    /// Ids of the checkpoints held, oldest first.
    fn ids(&self) -> Result<Vec<u64>, CheckpointError> {
        let mut ids = Vec::new();
        for e in fs::read_dir(self.dir.join("checkpoints")).map_err(|e| self.err(e))? {
            let name = e.map_err(|e| self.err(e))?.file_name();
            let name = name.to_string_lossy();
            if let Some(id) = name.strip_suffix(".ckpt").and_then(|n| n.parse().ok()) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    fn last(&self) -> MutexGuard<'_, Option<Arc<Manifest>>> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checkpoint `id`, the newest: from memory when this process took it (no other process
    /// can have replaced it: ids only grow, under the lock).
    fn latest(&self, id: u64) -> Result<Arc<Manifest>, CheckpointError> {
        if let Some(m) = self.last().as_ref().filter(|m| m.id == id) {
            return Ok(m.clone());
        }
        Ok(Arc::new(self.load(id)?))
    }

    fn load(&self, id: u64) -> Result<Manifest, CheckpointError> {
        match fs::read(self.manifest_path(id)) {
            Ok(bytes) => Manifest::decode(&bytes).map_err(|e| self.err(e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CheckpointError::Unknown(id)),
            Err(e) => Err(self.err(e)),
        }
    }

    /// The bytes the store holds.
    pub fn store_bytes(&self) -> u64 {
        self.store.bytes()
    }

    /// Every checkpoint held, oldest first.
    pub fn list(&self) -> Result<Vec<Summary>, CheckpointError> {
        self.ids()?
            .into_iter()
            .map(|id| self.load(id).map(|m| summary(&m, 0)))
            .collect()
    }

    /// Take a checkpoint of the workspace as it is now.
    pub fn take(&self, label: &str) -> Result<Summary, CheckpointError> {
        let _lock = self.lock()?;
        let (m, added, _) = self.take_locked(label, None)?;
        Ok(summary(&m, added))
    }

    /// Take a checkpoint (the store locked); `keep`: a checkpoint the pruning after it must not
    /// drop (the one a rewind is about to restore).
    fn take_locked(
        &self,
        label: &str,
        keep: Option<u64>,
    ) -> Result<(Arc<Manifest>, u64, Tree), CheckpointError> {
        let started = now_ns();
        let ids = self.ids()?;
        let last = match ids.last() {
            Some(&id) => Some(self.latest(id)?),
            None => None,
        };
        let previous: rustc_hash::FxHashMap<&Path, &Entry> = last
            .iter()
            .flat_map(|m| m.entries.iter())
            .map(|e| (e.path.as_path(), e))
            .collect();
        let root = self.roots.workspace_root();
        let tree = scan(root.fd(), self.limits.max_paths)?;
        let mut paths: Vec<(&PathBuf, &Stamp)> = tree.iter().collect();
        paths.sort_unstable_by(|a, b| a.0.as_os_str().as_bytes().cmp(b.0.as_os_str().as_bytes()));
        let mut entries = Vec::with_capacity(tree.len());
        let mut added = 0;
        let mut writer = self.store.writer();
        for (path, stamp) in paths {
            let content = match stamp.kind {
                Kind::Dir | Kind::Other => Content::Nothing,
                Kind::Link => match read_link(root.fd(), path) {
                    Ok(target) => Content::Link(target),
                    Err(e) => Content::Uncovered(format!("its link could not be read: {e}")),
                },
                Kind::File => {
                    let reuse = previous.get(path.as_path()).filter(|p| {
                        p.stamp == *stamp
                            && matches!(p.content, Content::Stored { .. })
                            && stamp.ctime_ns < started - RACY_NS
                    });
                    match reuse {
                        Some(p) => p.content.clone(),
                        None => {
                            let (content, grew) =
                                self.keep_file(&mut writer, root.fd(), path, stamp, added)?;
                            added += grew;
                            content
                        }
                    }
                }
            };
            entries.push(Entry {
                path: path.clone(),
                stamp: *stamp,
                content,
            });
        }
        writer.finish().map_err(|e| self.err(e))?;
        let id = ids.last().map_or(1, |l| l + 1);
        let m = Manifest {
            id,
            label: label.to_string(),
            taken_ns: started,
            entries,
        };
        let path = self.manifest_path(id);
        let temp = path.with_extension("tmp");
        private::write_new(&temp, &m.encode())
            .and_then(|_| fs::rename(&temp, &path))
            .map_err(|e| self.err(e))?;
        let m = Arc::new(m);
        *self.last() = Some(m.clone());
        self.prune(keep)?;
        Ok((m, added, tree))
    }

    /// Keep one file's bytes: its content as the manifest names it, and the bytes added.
    fn keep_file(
        &self,
        writer: &mut Writer<'_>,
        root: std::os::fd::BorrowedFd<'_>,
        path: &Path,
        stamp: &Stamp,
        added_so_far: u64,
    ) -> Result<(Content, u64), CheckpointError> {
        let limit = self.limits.max_file_bytes;
        if stamp.size > limit {
            return Ok((
                Content::Uncovered(format!(
                    "{} bytes, over the {limit}-byte checkpoint limit for one file",
                    stamp.size
                )),
                0,
            ));
        }
        if self.store.bytes() + added_so_far + stamp.size > self.limits.max_store_bytes {
            return Ok((
                Content::Uncovered(format!(
                    "the checkpoint store was full ({} bytes)",
                    self.limits.max_store_bytes
                )),
                0,
            ));
        }
        let bytes = match read_file(root, path, limit) {
            Ok(b) => b,
            Err(e) => return Ok((Content::Uncovered(format!("it could not be read: {e}")), 0)),
        };
        let mut chunks = Vec::new();
        let mut added = 0;
        for c in cut(&bytes) {
            let (id, grew) = writer.put(c).map_err(|e| self.err(e))?;
            chunks.push(id);
            added += grew;
        }
        Ok((
            Content::Stored {
                digest: digest(&bytes),
                chunks,
            },
            added,
        ))
    }

    /// Past the count, drop the oldest checkpoints down to nine tenths of it (finding the chunks
    /// still used reads every checkpoint kept, so it is done once per tenth, not per
    /// checkpoint); or one while the store is over three quarters full (room for the next).
    /// The newest and `keep` stay. Then remove chunks nothing names.
    fn prune(&self, keep: Option<u64>) -> Result<(), CheckpointError> {
        let mut ids = self.ids()?;
        let max = self.limits.max_checkpoints;
        let target = if ids.len() > max { max - max / 10 } else { max };
        let mut dropped = false;
        while ids.len() > 1
            && (ids.len() > target
                || self.store.bytes() > self.limits.max_store_bytes / 4 * 3 && !dropped)
        {
            let at = usize::from(Some(ids[0]) == keep);
            if at + 1 >= ids.len() {
                break; // only the newest and the kept one are left
            }
            let id = ids.remove(at);
            fs::remove_file(self.manifest_path(id)).map_err(|e| self.err(e))?;
            dropped = true;
        }
        if dropped {
            let mut live: HashSet<ChunkId> = HashSet::new();
            for id in &ids {
                for e in self.load(*id)?.entries {
                    if let Content::Stored { chunks, .. } = e.content {
                        live.extend(chunks);
                    }
                }
            }
            self.store.sweep(&live).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Put the workspace back as it was at checkpoint `id`: files changed or deleted since are
    /// written back, paths created since removed, all in one transaction (all or nothing, also
    /// across a crash: the file layer's journal). A checkpoint is taken first, so the rewind can
    /// itself be undone.
    pub fn rewind(&self, id: u64, opts: WriteOptions<'_>) -> Result<Rewound, CheckpointError> {
        let _lock = self.lock()?;
        let _in_order = opts.exclusive();
        let target = self.load(id)?;
        let (undo, _, now) = self.take_locked(&format!("before rewind to {id}"), Some(id))?;
        let mut out = Rewound {
            undo: undo.id,
            ..Rewound::default()
        };
        let root = self.roots.workspace_root();
        let wanted: HashMap<&Path, &Entry> = target
            .entries
            .iter()
            .map(|e| (e.path.as_path(), e))
            .collect();
        let mut puts: Vec<(String, Vec<u8>, Meta)> = Vec::new();
        let mut removes: Vec<String> = Vec::new();
        let mut dirs_to_remove: Vec<PathBuf> = Vec::new();
        // Created since: removed (folders after the transaction, when emptied).
        for (path, stamp) in &now {
            if wanted.contains_key(path.as_path()) {
                continue;
            }
            if displaced_ancestor(&now, path).is_some() {
                continue;
            }
            match (stamp.kind, path.to_str()) {
                (Kind::Dir, _) => dirs_to_remove.push(path.clone()),
                (_, Some(s)) => removes.push(s.to_string()),
                (_, None) => out
                    .unrestorable
                    .push((shown(path), "its name is not UTF-8".into())),
            }
        }
        for e in &target.entries {
            let current = now.get(&e.path);
            let why_not = |why: &str| (shown(&e.path), why.to_string());
            if let Some(a) = displaced_ancestor(&now, &e.path) {
                out.unrestorable.push(why_not(&format!(
                    "the folder {} is now a link or a file",
                    shown(a)
                )));
                continue;
            }
            match e.stamp.kind {
                Kind::Dir => {
                    if current.is_some_and(|c| c.kind != Kind::Dir) {
                        out.unrestorable
                            .push(why_not("a file or link now stands there"));
                    }
                    continue;
                }
                Kind::Other => continue,
                Kind::Link => {
                    if current.is_none_or(|c| c.kind != Kind::Link)
                        || read_link(root.fd(), &e.path).ok().as_ref()
                            != match &e.content {
                                Content::Link(t) => Some(t),
                                _ => None,
                            }
                    {
                        out.unrestorable.push(why_not(
                            "it was a symbolic link, which rewind does not remake",
                        ));
                    }
                    continue;
                }
                Kind::File => {}
            }
            if current.is_some_and(|c| c.kind == Kind::Dir) {
                out.unrestorable.push(why_not("a folder now stands there"));
                continue;
            }
            let (digest_then, chunks) = match &e.content {
                Content::Stored { digest, chunks } => (digest, chunks),
                Content::Uncovered(why) => {
                    if current != Some(&e.stamp) {
                        out.unrestorable
                            .push(why_not(&format!("changed, and {why}")));
                    }
                    continue;
                }
                _ => continue,
            };
            if let Some(c) = current {
                let unchanged = c == &e.stamp && e.stamp.ctime_ns < target.taken_ns - RACY_NS;
                if unchanged {
                    continue;
                }
                if c.kind == Kind::File && c.size == e.stamp.size && c.mode == e.stamp.mode {
                    let same = read_file(root.fd(), &e.path, u64::MAX)
                        .is_ok_and(|b| digest(&b) == *digest_then);
                    if same {
                        continue;
                    }
                }
            }
            let Some(s) = e.path.to_str() else {
                out.unrestorable.push(why_not("its name is not UTF-8"));
                continue;
            };
            let mut bytes = Vec::with_capacity(e.stamp.size as usize);
            for c in chunks {
                bytes.extend(self.store.get(c).map_err(|e| self.err(e))?);
            }
            if digest(&bytes) != *digest_then {
                return Err(self.err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the stored bytes of {s} are damaged"),
                )));
            }
            let meta = Meta {
                mode: e.stamp.mode,
                uid: e.stamp.uid,
                gid: e.stamp.gid,
                nlink: 1,
                size: e.stamp.size,
            };
            puts.push((s.to_string(), bytes, meta));
        }
        removes.sort_unstable();
        let mut changes = Vec::with_capacity(puts.len() + removes.len());
        let write_err = |e: toolroute_files::FsError| CheckpointError::Write(e.to_string());
        for (s, bytes, meta) in &puts {
            let t = self
                .roots
                .target(s, false, true, u64::MAX / 2)
                .map_err(write_err)?;
            changes.push(Change {
                target: t,
                op: Op::Put {
                    parts: vec![bytes.as_slice()],
                    no_clobber: false,
                    meta: Some(*meta),
                },
            });
        }
        for s in &removes {
            let t = self
                .roots
                .target(s, false, true, u64::MAX / 2)
                .map_err(write_err)?;
            changes.push(Change {
                target: t,
                op: Op::Remove,
            });
        }
        if !changes.is_empty() {
            commit(&self.roots, changes, opts, None)
                .map_err(|e| CheckpointError::Write(e.to_string()))?;
        }
        out.restored = puts.into_iter().map(|(s, _, _)| s).collect();
        out.removed = removes;
        // Folders: those created since go when empty (deepest first); those deleted since come
        // back, with their modes.
        dirs_to_remove.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for d in dirs_to_remove {
            match remove_dir(root.fd(), &d) {
                Ok(()) => out.removed.push(shown(&d)),
                Err(e) => out.unrestorable.push((
                    shown(&d),
                    format!("a folder made since was not removed: {e}"),
                )),
            }
        }
        for e in target.entries.iter().filter(|e| e.stamp.kind == Kind::Dir) {
            if let Err(err) = ensure_dir(root.fd(), &e.path, e.stamp.mode) {
                out.unrestorable.push((
                    shown(&e.path),
                    format!("the folder could not be made: {err}"),
                ));
            }
        }
        Ok(out)
    }
}

/// An exclusive `flock` on the store's lock file, released when the descriptor closes (also
/// when its process dies).
fn lock_in(dir: &Path) -> io::Result<OwnedFd> {
    let f = private::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("lock"))?;
    let fd = OwnedFd::from(f);
    rustix::fs::flock(&fd, FlockOperation::LockExclusive)?;
    Ok(fd)
}

fn summary(m: &Manifest, added_bytes: u64) -> Summary {
    Summary {
        id: m.id,
        label: m.label.clone(),
        taken_ns: m.taken_ns,
        files: m
            .entries
            .iter()
            .filter(|e| e.stamp.kind == Kind::File)
            .count(),
        uncovered: m
            .entries
            .iter()
            .filter_map(|e| match &e.content {
                Content::Uncovered(why) => Some((shown(&e.path), why.clone())),
                _ => None,
            })
            .collect(),
        added_bytes,
    }
}

fn shown(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The folder holding `path` (beneath `root`, never through a link) and the last name.
fn parent_of(root: std::os::fd::BorrowedFd<'_>, path: &Path) -> io::Result<(OwnedFd, PathBuf)> {
    let name = PathBuf::from(path.file_name().unwrap_or_default());
    let parent = path.parent().unwrap_or(Path::new(""));
    let dir = if parent.as_os_str().is_empty() {
        open_beneath(root, Path::new("."), OFlags::RDONLY | OFlags::DIRECTORY)?
    } else {
        open_beneath(
            root,
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
        )?
    };
    Ok((dir, name))
}

fn read_link(root: std::os::fd::BorrowedFd<'_>, path: &Path) -> io::Result<Vec<u8>> {
    let (dir, name) = parent_of(root, path)?;
    Ok(readlinkat(&dir, name.as_os_str(), Vec::new())?.into_bytes())
}

fn read_file(root: std::os::fd::BorrowedFd<'_>, path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let fd = open_beneath(root, path, read_flags() | OFlags::NOFOLLOW)?;
    let st = fstat(&fd)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::with_capacity(st.st_size as usize);
    std::fs::File::from(fd)
        .take(limit)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn remove_dir(root: std::os::fd::BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let (dir, name) = parent_of(root, path)?;
    match unlinkat(&dir, name.as_os_str(), AtFlags::REMOVEDIR) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Make `path` a folder with `mode` (its parents first), or give it `mode` if it is one.
fn ensure_dir(root: std::os::fd::BorrowedFd<'_>, path: &Path, mode: u32) -> io::Result<()> {
    let mut at = PathBuf::new();
    for part in path.components() {
        at.push(part);
        let (dir, name) = parent_of(root, &at)?;
        match mkdirat(&dir, name.as_os_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let (dir, name) = parent_of(root, path)?;
    let st = rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
    #[allow(clippy::unnecessary_cast)] // a 16-bit mode on macOS
    let current = (st.st_mode as u32) & 0o7777;
    if current != mode {
        let fd = rustix::fs::openat(
            &dir,
            name.as_os_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        rustix::fs::fchmod(fd.as_fd(), Mode::from_raw_mode(mode as _))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(ws: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![ws.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(ws).unwrap().to_string_lossy().into_owned();
                    out.push((rel, fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn rewind_restores_changed_and_deleted_files_and_removes_new_ones() {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("a"), b"one").unwrap();
        fs::write(ws.join("d/b"), vec![7u8; 200_000]).unwrap();
        let roots = Roots::new(&ws, &[]).unwrap();
        let cps = Checkpoints::open(roots, &base.path().join("state"), Limits::default()).unwrap();
        let first = cps.take("first").unwrap();
        assert_eq!((first.id, first.files), (1, 2));
        let before = files(&ws);
        fs::write(ws.join("a"), b"two").unwrap();
        fs::remove_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("c"), b"new").unwrap();
        let r = cps.rewind(1, WriteOptions::default()).unwrap();
        assert_eq!(files(&ws), before);
        assert_eq!(r.restored, vec!["a".to_string(), "d/b".to_string()]);
        assert_eq!(r.removed, vec!["c".to_string()]);
        assert!(r.unrestorable.is_empty());
        assert_eq!(r.undo, 2);
    }

    #[test]
    fn a_damaged_store_is_refused_and_nothing_changes() {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        fs::write(ws.join("a"), b"one").unwrap();
        let state = base.path().join("state");
        let cps =
            Checkpoints::open(Roots::new(&ws, &[]).unwrap(), &state, Limits::default()).unwrap();
        cps.take("").unwrap();
        for pack in fs::read_dir(state.join("packs")).unwrap() {
            let pack = pack.unwrap().path();
            if pack.extension().is_some_and(|x| x == "pack") {
                fs::write(pack, b"evil").unwrap();
            }
        }
        fs::write(ws.join("a"), b"two").unwrap();
        let err = cps.rewind(1, WriteOptions::default()).unwrap_err();
        assert!(err.to_string().contains("damaged"), "{err}");
        assert_eq!(fs::read(ws.join("a")).unwrap(), b"two");
    }

    #[test]
    fn the_store_refuses_to_live_in_the_workspace() {
        let base = tempfile::tempdir().unwrap();
        let roots = Roots::new(base.path(), &[]).unwrap();
        let err = Checkpoints::open(roots, &base.path().join("state"), Limits::default());
        assert!(matches!(err, Err(CheckpointError::Inside(_))));
    }

    #[test]
    fn rewinding_to_the_oldest_checkpoint_at_the_count_limit_keeps_it() {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        let limits = Limits {
            max_checkpoints: 2,
            ..Limits::default()
        };
        let cps = Checkpoints::open(
            Roots::new(&ws, &[]).unwrap(),
            &base.path().join("s"),
            limits,
        )
        .unwrap();
        for n in 0..3 {
            fs::write(ws.join("a"), format!("v{n}")).unwrap();
            cps.take("").unwrap();
        }
        let oldest = cps.list().unwrap()[0].id;
        fs::write(ws.join("a"), b"later").unwrap();
        // The checkpoint taken before the rewind must not push out the one rewound to.
        cps.rewind(oldest, WriteOptions::default()).unwrap();
        assert_eq!(fs::read(ws.join("a")).unwrap(), b"v1");
    }
}

//! The transaction: every hunk is checked and applied in memory first (later hunks see earlier
//! ones), then all changed files are committed together by the file layer's transaction: staged, journaled,
//! renamed. A patch changes all of its files or none, across a failure and across a crash.
//! Paths are found by descriptor beneath the workspace; a delete (and the source of a move)
//! acts on the name itself, so a symlink is removed, never its target.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::AsFd;

use super::apply::{apply_chunks_as, ChunkReport, Dialect};
use super::parse::{parse_patch, Hunk, ParseError};
use toolroute_files::FsError;
use toolroute_files::Roots;
use toolroute_files::{check_rewrite, check_writable, Meta, Original, Target};
use toolroute_files::{commit, Change, Op, TxnError, WriteOptions};

/// Why a patch was not applied (no file was changed, except as `Commit` says).
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch does not parse.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A patch with no file operations.
    #[error("{0}")]
    Empty(String),
    /// A V4A operation that is malformed (unknown type, a missing diff, a move that is not an
    /// update): the message says which.
    #[error("{0}")]
    Operation(String),
    /// The patch does not fit the files (missing file, context not found, not UTF-8, …).
    #[error(
        "apply_patch failed on {path} (file operation {hunk}): {message}; no file was changed"
    )]
    Mismatch {
        /// The file as the patch names it.
        path: String,
        /// The file operation's number in the patch (1-based).
        hunk: usize,
        /// What did not fit.
        message: String,
    },
    /// A file could not be read or is refused (the file layer's error).
    #[error("apply_patch failed on {path} (file operation {hunk}): {source}; no file was changed")]
    File {
        /// The file as the patch names it.
        path: String,
        /// The file operation's number in the patch (1-based).
        hunk: usize,
        /// The file layer's error.
        source: Box<FsError>,
    },
    /// Writing failed after staging; what was written was rolled back as far as possible.
    #[error("apply_patch could not write {path}: {source}; {rollback}")]
    Commit {
        /// The file as the patch names it.
        path: String,
        /// The file layer's error.
        source: Box<FsError>,
        /// What the rollback did, as a message says it.
        rollback: String,
    },
}

/// What the patch did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    /// The file as the patch names it.
    pub path: String,
    /// `"add"`, `"update"`, `"delete"` or `"move"`.
    pub action: &'static str,
    /// Where each chunk of an update matched.
    pub chunks: Vec<ChunkReport>,
}

/// What a successful patch did, paths as written in the patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Files created.
    pub added: Vec<String>,
    /// Files changed in place.
    pub modified: Vec<String>,
    /// Files moved: (from, to).
    pub moved: Vec<(String, String)>,
    /// Files deleted.
    pub deleted: Vec<String>,
    /// Each file operation, in patch order.
    pub files: Vec<FileReport>,
}

impl Outcome {
    /// Codex's success text: `A`/`M`/`D` per path (a move shows as `M` of its destination).
    pub fn summary(&self) -> String {
        let mut out = String::from("Success. Updated the following files:");
        for p in &self.added {
            out.push_str(&format!("\nA {p}"));
        }
        for p in &self.modified {
            out.push_str(&format!("\nM {p}"));
        }
        for (from, to) in &self.moved {
            out.push_str(&format!("\nM {to} (moved from {from})"));
        }
        for p in &self.deleted {
            out.push_str(&format!("\nD {p}"));
        }
        out
    }
}

/// What a path should hold when the patch is done.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Want {
    /// Whatever is there now (a file's bytes, or a link).
    Original,
    Bytes(Vec<u8>),
    Absent,
}

/// One place touched by the patch: how it is on disk, and how it should end up.
struct Slot {
    target: Target,
    want: Want,
    /// Metadata for new content (a moved file keeps its source's owner and mode).
    meta: Option<Meta>,
}

impl Slot {
    /// The file's content as the patch sees it now (`None`: no file there).
    fn current(&self) -> Option<&[u8]> {
        match &self.want {
            Want::Bytes(b) => Some(b),
            Want::Absent => None,
            Want::Original => match &self.target.original {
                Some(Original::File(e)) => Some(&e.bytes),
                // A link reached without following it is not a file to patch.
                Some(Original::Link(_)) | None => None,
            },
        }
    }

    fn exists(&self) -> bool {
        !matches!(self.want, Want::Absent)
            && (self.want != Want::Original || self.target.original.is_some())
    }
}

/// The stale-read guard on a file the patch rewrites, checked when the patch first reaches it
/// (later hunks on it see the patch's own content).
fn fresh(opts: WriteOptions<'_>, slot: &Slot) -> Result<(), FsError> {
    match slot.want {
        Want::Original => opts.check_fresh(&slot.target),
        _ => Ok(()),
    }
}

/// A place by descriptor: its folder's device and inode, missing folders and name.
type Key = (u64, u64, Vec<OsString>, OsString);

struct Staging<'r> {
    roots: &'r Roots,
    max_bytes: u64,
    opts: WriteOptions<'r>,
    slots: HashMap<Key, Slot>,
    order: Vec<Key>,
}

impl<'r> Staging<'r> {
    /// Find and load a place once; later hunks on it see the staged content. `follow`: through
    /// a symlink in the last place (updates), or the link itself (deletes, move sources).
    fn slot(&mut self, shown: &str, follow: bool) -> Result<&mut Slot, FsError> {
        let target = self.roots.target(shown, follow, true, self.max_bytes)?;
        let st = rustix::fs::fstat(target.parent.dir.as_fd())
            .map_err(|e| FsError::io("stat the folder of", shown, e.into()))?;
        let (dev, ino) = toolroute_files::file_id(&st);
        let key = (
            dev,
            ino,
            target.parent.missing.clone(),
            target.parent.name.clone(),
        );
        if !self.slots.contains_key(&key) {
            let want = if target.original.is_some() {
                Want::Original
            } else {
                Want::Absent
            };
            self.order.push(key.clone());
            self.slots.insert(
                key.clone(),
                Slot {
                    target,
                    want,
                    meta: None,
                },
            );
        }
        Ok(self.slots.get_mut(&key).expect("slot inserted above"))
    }
}

/// Apply a Codex-style patch beneath `roots`: every file or none (files over `max_bytes` refused).
pub fn apply_patch(roots: &Roots, patch: &str, max_bytes: u64) -> Result<Outcome, PatchError> {
    apply_patch_with(roots, patch, max_bytes, WriteOptions::default())
}

/// [`apply_patch`] with the write's options (durability, what it may rewrite).
pub fn apply_patch_with(
    roots: &Roots,
    patch: &str,
    max_bytes: u64,
    opts: WriteOptions,
) -> Result<Outcome, PatchError> {
    run(roots, patch, max_bytes, opts, None)
}

/// `fail_write`: tests make the n-th (0-based) write fail, to exercise the rollback.
#[cfg(test)]
pub(crate) fn apply_patch_inner(
    roots: &Roots,
    patch: &str,
    max_bytes: u64,
    fail_write: Option<usize>,
) -> Result<Outcome, PatchError> {
    run(roots, patch, max_bytes, WriteOptions::default(), fail_write)
}

fn run(
    roots: &Roots,
    patch: &str,
    max_bytes: u64,
    opts: WriteOptions,
    fail_write: Option<usize>,
) -> Result<Outcome, PatchError> {
    let hunks = parse_patch(patch)?;
    if hunks.is_empty() {
        return Err(PatchError::Empty("No files were modified.".into()));
    }
    stage_and_commit(roots, &hunks, Dialect::Codex, max_bytes, opts, fail_write)
}

/// Apply file operations already parsed (OpenAI's `apply_patch` tool type sends them one by
/// one, as V4A diffs), all of them or none, by `dialect`'s rules: under V4A a created file must
/// not exist yet.
pub fn apply_hunks(
    roots: &Roots,
    hunks: &[Hunk],
    dialect: Dialect,
    max_bytes: u64,
    opts: WriteOptions,
) -> Result<Outcome, PatchError> {
    if hunks.is_empty() {
        return Err(PatchError::Empty("No files were modified.".into()));
    }
    stage_and_commit(roots, hunks, dialect, max_bytes, opts, None)
}

fn stage_and_commit(
    roots: &Roots,
    hunks: &[Hunk],
    dialect: Dialect,
    max_bytes: u64,
    opts: WriteOptions,
    fail_write: Option<usize>,
) -> Result<Outcome, PatchError> {
    let _in_order = opts.exclusive();
    let mut staging = Staging {
        roots,
        max_bytes,
        opts,
        slots: HashMap::new(),
        order: Vec::new(),
    };
    let mut outcome = Outcome::default();
    for (i, hunk) in hunks.iter().enumerate() {
        let n = i + 1;
        let file_err = |source: FsError| PatchError::File {
            path: hunk.path().to_string(),
            hunk: n,
            source: Box::new(source),
        };
        let mismatch = |message: String| PatchError::Mismatch {
            path: hunk.path().to_string(),
            hunk: n,
            message,
        };
        match hunk {
            Hunk::Add { path, contents } => {
                let opts = staging.opts;
                let slot = staging.slot(path, true).map_err(file_err)?;
                fresh(opts, slot).map_err(file_err)?;
                if dialect == Dialect::V4a && slot.exists() {
                    return Err(mismatch(format!(
                        "cannot create {path} because it already exists; use an update_file \
                         operation to change an existing file"
                    )));
                }
                slot.want = Want::Bytes(contents.clone().into_bytes());
                outcome.added.push(path.clone());
                outcome.files.push(FileReport {
                    path: path.clone(),
                    action: "add",
                    chunks: Vec::new(),
                });
            }
            Hunk::Delete { path } => {
                let slot = staging.slot(path, false).map_err(file_err)?;
                if !slot.exists() {
                    return Err(mismatch("Failed to delete file: it does not exist".into()));
                }
                slot.want = Want::Absent;
                outcome.deleted.push(path.clone());
                outcome.files.push(FileReport {
                    path: path.clone(),
                    action: "delete",
                    chunks: Vec::new(),
                });
            }
            Hunk::Update {
                path,
                move_to,
                chunks,
            } => {
                let opts = staging.opts;
                let slot = staging.slot(path, true).map_err(file_err)?;
                fresh(opts, slot).map_err(file_err)?;
                let Some(current) = slot.current() else {
                    return Err(mismatch(
                        "Failed to read file to update: no such file (use *** Add File: to create it)"
                            .into(),
                    ));
                };
                let text = std::str::from_utf8(current).map_err(|e| {
                    mismatch(format!(
                        "the file is not valid UTF-8 (first bad byte at offset {}); apply_patch only \
                         edits UTF-8 text, use the edit tool, which keeps other bytes exactly",
                        e.valid_up_to()
                    ))
                })?;
                let (new_text, reports) = apply_chunks_as(path, text, chunks, dialect)
                    .map_err(|e| mismatch(e.message))?;
                let meta = slot.meta.or(slot.target.existing().map(|e| e.meta));
                let action = match move_to {
                    Some(dest) => {
                        // The source name goes away (a link itself, not what it points to).
                        let source = staging.slot(path, false).map_err(file_err)?;
                        source.want = Want::Absent;
                        let dest_slot = staging.slot(dest, true).map_err(file_err)?;
                        dest_slot.want = Want::Bytes(new_text.into_bytes());
                        dest_slot.meta = meta;
                        outcome.moved.push((path.clone(), dest.clone()));
                        "move"
                    }
                    None => {
                        slot.want = Want::Bytes(new_text.into_bytes());
                        outcome.modified.push(path.clone());
                        "update"
                    }
                };
                outcome.files.push(FileReport {
                    path: move_to.clone().unwrap_or_else(|| path.clone()),
                    action,
                    chunks: reports,
                });
            }
        }
    }
    commit_slots(staging, fail_write)?;
    Ok(outcome)
}

fn commit_slots(mut staging: Staging<'_>, fail_write: Option<usize>) -> Result<(), PatchError> {
    let permit = staging.opts.permit;
    let mut changes: Vec<(Slot, bool)> = Vec::new();
    for key in &staging.order {
        let slot = staging
            .slots
            .remove(key)
            .expect("every ordered key has a slot");
        let unchanged = match (&slot.want, &slot.target.original) {
            (Want::Original, _) | (Want::Absent, None) => true,
            (Want::Bytes(b), Some(Original::File(e))) => {
                *b == e.bytes && slot.meta.is_none_or(|m| m == e.meta)
            }
            _ => false,
        };
        if unchanged {
            continue;
        }
        let check = match &slot.want {
            Want::Bytes(_) => check_rewrite(&slot.target, permit, true),
            _ => match slot.target.existing() {
                Some(e) => check_writable(&slot.target.shown, e.meta, permit),
                None => Ok(()),
            },
        };
        if let Err(source) = check {
            return Err(PatchError::Commit {
                path: slot.target.shown.clone(),
                source: Box::new(source),
                rollback: "no file was changed".into(),
            });
        }
        let is_put = matches!(slot.want, Want::Bytes(_));
        changes.push((slot, is_put));
    }
    let contents: Vec<Vec<u8>> = changes
        .iter_mut()
        .map(
            |(s, _)| match std::mem::replace(&mut s.want, Want::Absent) {
                Want::Bytes(b) => b,
                _ => Vec::new(),
            },
        )
        .collect();
    let txn: Vec<Change<'_>> = changes
        .into_iter()
        .zip(&contents)
        .map(|((slot, is_put), bytes)| Change {
            op: if is_put {
                Op::Put {
                    parts: vec![bytes.as_slice()],
                    no_clobber: false,
                    meta: slot.meta,
                }
            } else {
                Op::Remove
            },
            target: slot.target,
        })
        .collect();
    commit(staging.roots, txn, staging.opts, fail_write).map_err(|e| match e {
        TxnError::Staging(source) => PatchError::Commit {
            path: source_path(&source),
            source,
            rollback: "no file was changed".into(),
        },
        TxnError::Publishing {
            path,
            source,
            rollback,
        } => PatchError::Commit {
            path,
            source,
            rollback,
        },
    })
}

fn source_path(e: &FsError) -> String {
    match e {
        FsError::NotFound { path }
        | FsError::IsDir { path }
        | FsError::TooLarge { path, .. }
        | FsError::Exists { path }
        | FsError::Refused { path, .. }
        | FsError::Stale { path, .. }
        | FsError::Io { path, .. } => path.clone(),
        FsError::Denied(_) => String::new(),
    }
}

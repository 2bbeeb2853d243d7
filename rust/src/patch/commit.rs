//! The transaction: every hunk is checked and applied in memory first (later hunks see earlier
//! ones), then the changed files are written atomically one by one; if a write fails, what was
//! already written is put back, so a patch changes all of its files or none.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::apply::{apply_chunks, ChunkReport};
use super::parse::{parse_patch, Hunk, ParseError};
use crate::confine::{remove_dirs, Access, Existing, FsError, Roots};

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("{0}")]
    Empty(String),
    /// The patch does not fit the files (missing file, context not found, not UTF-8, …).
    #[error(
        "apply_patch failed on {path} (file operation {hunk}): {message}; no file was changed"
    )]
    Mismatch {
        path: String,
        hunk: usize,
        message: String,
    },
    #[error("apply_patch failed on {path} (file operation {hunk}): {source}; no file was changed")]
    File {
        path: String,
        hunk: usize,
        source: Box<FsError>,
    },
    #[error("apply_patch could not write {path}: {source}; {rollback}")]
    Commit {
        path: String,
        source: Box<FsError>,
        rollback: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    pub path: String,
    pub action: &'static str,
    pub chunks: Vec<ChunkReport>,
}

/// What a successful patch did, paths as written in the patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub moved: Vec<(String, String)>,
    pub deleted: Vec<String>,
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

/// One path touched by the patch: how it was on disk, and how it should end up.
struct Slot {
    shown: String,
    original: Option<Existing>,
    target: Option<Vec<u8>>,
    mode: Option<u32>,
}

struct Staging<'r> {
    roots: &'r Roots,
    max_bytes: u64,
    slots: HashMap<PathBuf, Slot>,
    order: Vec<PathBuf>,
}

impl<'r> Staging<'r> {
    /// Resolve and load a path once; later hunks on the same file see the staged content.
    fn slot(&mut self, shown: &str) -> Result<&mut Slot, FsError> {
        let resolved = self.roots.resolve(shown, Access::Write)?;
        if !self.slots.contains_key(&resolved) {
            if resolved.is_dir() {
                return Err(FsError::IsDir {
                    path: shown.to_string(),
                });
            }
            let original =
                self.roots
                    .read_existing(shown, &resolved, Access::Write, self.max_bytes)?;
            let slot = Slot {
                shown: shown.to_string(),
                mode: original.as_ref().map(|o| o.mode),
                target: original.as_ref().map(|o| o.bytes.clone()),
                original,
            };
            self.order.push(resolved.clone());
            self.slots.insert(resolved.clone(), slot);
        }
        Ok(self.slots.get_mut(&resolved).expect("slot inserted above"))
    }
}

pub fn apply_patch(roots: &Roots, patch: &str, max_bytes: u64) -> Result<Outcome, PatchError> {
    apply_patch_inner(roots, patch, max_bytes, None)
}

/// `fail_write`: tests make the n-th (0-based) write fail, to exercise the rollback.
pub(crate) fn apply_patch_inner(
    roots: &Roots,
    patch: &str,
    max_bytes: u64,
    fail_write: Option<usize>,
) -> Result<Outcome, PatchError> {
    let hunks = parse_patch(patch)?;
    if hunks.is_empty() {
        return Err(PatchError::Empty("No files were modified.".into()));
    }
    let mut staging = Staging {
        roots,
        max_bytes,
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
                let slot = staging.slot(path).map_err(file_err)?;
                slot.target = Some(contents.clone().into_bytes());
                outcome.added.push(path.clone());
                outcome.files.push(FileReport {
                    path: path.clone(),
                    action: "add",
                    chunks: Vec::new(),
                });
            }
            Hunk::Delete { path } => {
                let slot = staging.slot(path).map_err(file_err)?;
                if slot.target.take().is_none() {
                    return Err(mismatch("Failed to delete file: it does not exist".into()));
                }
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
                let slot = staging.slot(path).map_err(file_err)?;
                let Some(current) = slot.target.as_deref() else {
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
                let (new_text, reports) =
                    apply_chunks(path, text, chunks).map_err(|e| mismatch(e.message))?;
                let mode = slot.mode;
                let action = match move_to {
                    Some(dest) => {
                        slot.target = None;
                        let dest_slot = staging.slot(dest).map_err(file_err)?;
                        dest_slot.target = Some(new_text.into_bytes());
                        // A moved file keeps its permissions.
                        dest_slot.mode = mode.or(dest_slot.mode);
                        outcome.moved.push((path.clone(), dest.clone()));
                        "move"
                    }
                    None => {
                        slot.target = Some(new_text.into_bytes());
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
    commit(&staging, fail_write)?;
    Ok(outcome)
}

/// What was done to one path, to undo it.
struct Done {
    path: PathBuf,
    created_dirs: Vec<PathBuf>,
}

fn commit(staging: &Staging<'_>, fail_write: Option<usize>) -> Result<(), PatchError> {
    let roots = staging.roots;
    let mut done: Vec<Done> = Vec::new();
    for path in &staging.order {
        let slot = &staging.slots[path];
        let unchanged = slot.original.as_ref().map(|o| &o.bytes) == slot.target.as_ref();
        if unchanged && slot.original.as_ref().map(|o| o.mode) == slot.mode {
            continue;
        }
        let step = match &slot.target {
            _ if fail_write == Some(done.len()) => Err(FsError::Io {
                action: "write",
                path: slot.shown.clone(),
                source: std::io::Error::other("injected failure"),
            }),
            Some(bytes) => roots.write_atomic(&slot.shown, path, bytes, slot.mode, false),
            None => roots.remove_file(&slot.shown, path).map(|()| Vec::new()),
        };
        match step {
            Ok(created_dirs) => done.push(Done {
                path: path.clone(),
                created_dirs,
            }),
            Err(source) => {
                let rollback = roll_back(staging, &done);
                return Err(PatchError::Commit {
                    path: slot.shown.clone(),
                    source: Box::new(source),
                    rollback,
                });
            }
        }
    }
    Ok(())
}

fn restore(roots: &Roots, slot: &Slot, path: &Path) -> Result<(), FsError> {
    match &slot.original {
        Some(o) => roots
            .write_atomic(&slot.shown, path, &o.bytes, Some(o.mode), false)
            .map(|_| ()),
        None => roots.remove_file(&slot.shown, path),
    }
}

fn roll_back(staging: &Staging<'_>, done: &[Done]) -> String {
    let mut failures = Vec::new();
    for d in done.iter().rev() {
        let slot = &staging.slots[&d.path];
        if let Err(e) = restore(staging.roots, slot, &d.path) {
            failures.push(format!("{}: {e}", slot.shown));
        }
        remove_dirs(&d.created_dirs);
    }
    if failures.is_empty() {
        "every file already written was restored; no file was changed".into()
    } else {
        format!("restoring failed for: {}", failures.join("; "))
    }
}

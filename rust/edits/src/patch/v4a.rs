//! OpenAI's `apply_patch` tool type: each file's change arrives apart, as an operation holding a
//! V4A diff (the Codex hunk grammar without the envelope). This module holds its rules: which
//! operations there are, what each needs, and that they are applied together with
//! [`Dialect::V4a`]'s placement of chunks, all of them or none.

use std::str::FromStr;

use super::apply::Dialect;
use super::commit::{apply_hunks, Outcome, PatchError};
use super::parse::{parse_create_diff, parse_update_diff, Hunk};
use toolroute_files::{Roots, WriteOptions};

/// What an operation does to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V4aKind {
    /// `create_file`: a new file, its diff all `+` lines.
    CreateFile,
    /// `update_file`: chunks of a V4A diff, optionally moving the file.
    UpdateFile,
    /// `delete_file`: no diff.
    DeleteFile,
}

impl FromStr for V4aKind {
    type Err = String;

    fn from_str(kind: &str) -> Result<Self, String> {
        match kind {
            "create_file" => Ok(Self::CreateFile),
            "update_file" => Ok(Self::UpdateFile),
            "delete_file" => Ok(Self::DeleteFile),
            other => Err(format!(
                "unknown operation type {other:?}: expected create_file, update_file or delete_file"
            )),
        }
    }
}

/// One operation as the tool type sends it: `kind` as written (checked by [`V4aOperation::hunk`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V4aOperation {
    /// `create_file`, `update_file` or `delete_file`.
    pub kind: String,
    /// The file, relative to the workspace.
    pub path: String,
    /// The V4A diff (None for a delete).
    pub diff: Option<String>,
    /// An update's new path.
    pub move_to: Option<String>,
}

impl V4aOperation {
    /// The operation as the patch engine's hunk; the message says what is wrong with it.
    pub fn hunk(self) -> Result<Hunk, String> {
        let Self {
            kind,
            path,
            diff,
            move_to,
        } = self;
        let diff_of =
            |diff: Option<String>| diff.ok_or_else(|| format!("{kind} of {path} needs a diff"));
        if move_to.is_some() && kind != "update_file" {
            return Err(format!(
                "{kind} of {path}: only update_file can move a file"
            ));
        }
        match kind.parse::<V4aKind>()? {
            V4aKind::CreateFile => {
                let contents =
                    parse_create_diff(&diff_of(diff)?).map_err(|e| format!("{path}: {e}"))?;
                Ok(Hunk::Add { path, contents })
            }
            V4aKind::UpdateFile => {
                let chunks =
                    parse_update_diff(&diff_of(diff)?).map_err(|e| format!("{path}: {e}"))?;
                Ok(Hunk::Update {
                    path,
                    move_to,
                    chunks,
                })
            }
            V4aKind::DeleteFile => Ok(Hunk::Delete { path }),
        }
    }
}

/// Apply `operations` inside `roots` by V4A's rules, all of them or none (a malformed operation
/// is [`PatchError::Operation`], before any file is read).
pub fn apply_v4a(
    roots: &Roots,
    operations: Vec<V4aOperation>,
    max_bytes: u64,
    opts: WriteOptions,
) -> Result<Outcome, PatchError> {
    let hunks = operations
        .into_iter()
        .map(V4aOperation::hunk)
        .collect::<Result<Vec<_>, _>>()
        .map_err(PatchError::Operation)?;
    apply_hunks(roots, &hunks, Dialect::V4a, max_bytes, opts)
}

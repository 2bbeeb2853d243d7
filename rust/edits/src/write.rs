//! write_file and edit on disk: find the destination by descriptor, keep the file's style and
//! metadata, and commit the new bytes atomically through the file layer's transaction.

use std::path::PathBuf;
use std::str::FromStr;

use crate::edit::{plan_edit_reporting, EditError, EditPlan, REPORTED_LINES};
use toolroute_files::encode_like;
use toolroute_files::FsError;
use toolroute_files::Roots;
use toolroute_files::{check_rewrite, Original};
use toolroute_files::{commit, Change, Op, TxnError, WriteOptions};

/// write_file's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Fail if the file exists (the rename itself is no-clobber, so a race cannot overwrite).
    Create,
    /// Replace the file (or create it).
    Overwrite,
    /// Add to its end (or create it).
    Append,
}

impl FromStr for WriteMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "create" => Ok(WriteMode::Create),
            "overwrite" => Ok(WriteMode::Overwrite),
            "append" => Ok(WriteMode::Append),
            _ => Err(format!(
                "unsupported write mode {s:?}; use create, overwrite or append"
            )),
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The path as the kernel resolved it.
    pub resolved: PathBuf,
    /// The file did not exist before.
    pub created: bool,
    /// Bytes written by this call.
    pub bytes_written: usize,
    /// The file's size afterwards.
    pub size: usize,
}

fn flatten(e: TxnError) -> FsError {
    match e {
        TxnError::Staging(e) | TxnError::Publishing { source: e, .. } => *e,
    }
}

/// write_file: `content` to `shown`. With `keep_style`, an existing file keeps its encoding
/// (UTF-8 BOM, UTF-16/32, Latin-1) and all-CRLF endings, or the write is refused.
pub fn write_text(
    roots: &Roots,
    shown: &str,
    content: &str,
    mode: WriteMode,
    max_bytes: u64,
    keep_style: bool,
    opts: WriteOptions,
) -> Result<Written, FsError> {
    put(
        roots,
        shown,
        mode,
        max_bytes,
        opts,
        |existing, appending| match existing {
            Some(e) if keep_style => {
                encode_like(e, content, appending).map_err(|s| FsError::from((shown, s)))
            }
            _ => Ok(content.as_bytes().to_vec()),
        },
    )
}

/// `content` to `shown` byte for byte (no encoding kept or changed): a file API's write.
pub fn write_bytes(
    roots: &Roots,
    shown: &str,
    content: &[u8],
    mode: WriteMode,
    max_bytes: u64,
    opts: WriteOptions,
) -> Result<Written, FsError> {
    put(roots, shown, mode, max_bytes, opts, |_, _| {
        Ok(content.to_vec())
    })
}

/// The one write path: find the target by descriptor, make the new part from the old bytes
/// (`encode(existing, appending)`), check the size, commit atomically.
fn put(
    roots: &Roots,
    shown: &str,
    mode: WriteMode,
    max_bytes: u64,
    opts: WriteOptions,
    encode: impl FnOnce(Option<&[u8]>, bool) -> Result<Vec<u8>, FsError>,
) -> Result<Written, FsError> {
    let _in_order = opts.exclusive();
    let mut target = roots.target(shown, true, mode != WriteMode::Create, max_bytes)?;
    if mode == WriteMode::Create && target.original.is_some() {
        return Err(FsError::Exists {
            path: shown.to_string(),
        });
    }
    check_rewrite(&target, opts.permit, true)?;
    opts.check_fresh(&target)?;
    // The old bytes move out of the target (its metadata stays for the rewrite).
    let old = match target.original.as_mut() {
        Some(Original::File(e)) => Some(std::mem::take(&mut e.bytes)),
        _ => None,
    };
    let existing = old.as_deref();
    let appending = mode == WriteMode::Append && existing.is_some_and(|e| !e.is_empty());
    let new_part = encode(existing, appending)?;
    let head: &[u8] = if appending {
        existing.unwrap_or_default()
    } else {
        b""
    };
    let size = head.len() + new_part.len();
    if size as u64 > max_bytes {
        return Err(FsError::TooLarge {
            path: shown.to_string(),
            size: size as u64,
            limit: max_bytes,
        });
    }
    let resolved = target.resolved();
    let created = target.original.is_none();
    let op = Op::Put {
        parts: vec![head, &new_part],
        no_clobber: mode == WriteMode::Create,
        meta: None,
    };
    commit(roots, vec![Change { target, op }], opts, None).map_err(flatten)?;
    Ok(Written {
        resolved,
        created,
        bytes_written: new_part.len(),
        size,
    })
}

/// Replacements above which edit writes the new file from one buffer.
const MANY_HITS: usize = 64;

/// Why an edit on disk failed: the file, or the edit.
#[derive(Debug)]
pub enum EditFailure {
    /// The file could not be read or written.
    Fs(FsError),
    /// The edit does not fit the file.
    Edit(EditError),
}

/// edit: replace `old` with `new` in `shown`, bytes elsewhere untouched.
pub fn edit_file(
    roots: &Roots,
    shown: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    max_bytes: u64,
    opts: WriteOptions,
) -> Result<(PathBuf, EditPlan), EditFailure> {
    let _in_order = opts.exclusive();
    let mut target = roots
        .target(shown, true, true, max_bytes)
        .map_err(EditFailure::Fs)?;
    opts.check_fresh(&target).map_err(EditFailure::Fs)?;
    let Some(Original::File(existing)) = target.original.as_mut() else {
        return Err(EditFailure::Fs(FsError::NotFound {
            path: shown.to_string(),
        }));
    };
    // The bytes move out of the target (its metadata stays for the rewrite): no 2nd copy.
    let bytes = std::mem::take(&mut existing.bytes);
    let plan = plan_edit_reporting(&bytes, old, new, replace_all, REPORTED_LINES)
        .map_err(EditFailure::Edit)?;
    check_rewrite(&target, opts.permit, true).map_err(EditFailure::Fs)?;
    let resolved = target.resolved();
    // A few replacements are written as slices of the old bytes; many as one new buffer (a
    // copy, but one write call instead of two per occurrence).
    let whole;
    let parts = if plan.hits.len() > MANY_HITS {
        whole = plan.output(&bytes);
        vec![whole.as_slice()]
    } else {
        plan.parts(&bytes)
    };
    let op = Op::Put {
        parts,
        no_clobber: false,
        meta: None,
    };
    commit(roots, vec![Change { target, op }], opts, None)
        .map_err(|e| EditFailure::Fs(flatten(e)))?;
    Ok((resolved, plan))
}

//! grep and glob on ripgrep's crates, sharing one walker configuration.

pub mod glob;
pub mod grep;
pub mod index;
pub mod render;
mod rules;
pub mod walker;

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use toolroute_files::ConfineError;

/// A caller's request to stop a search early (its tool call was cancelled, its client left).
/// Checked before each file and before each read of a file, so a cancelled search gives its
/// thread back within one read, not one tree: a served tenant's abandoned greps on a large file
/// held the server's worker threads until they ran out.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A request not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ask every search holding this (or a clone) to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether the search was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A reader that fails once its search is cancelled: the searcher stops at its next read.
pub(crate) struct Cancellable<R> {
    pub(crate) inner: R,
    pub(crate) cancel: Cancel,
}

impl<R: Read> Read for Cancellable<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(io::Error::other("the search was cancelled"));
        }
        self.inner.read(buf)
    }
}

/// Why a search could not run (the message is what the model reads).
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The roots refuse the path searched.
    #[error(transparent)]
    Confine(#[from] ConfineError),
    /// A glob that does not parse.
    #[error("invalid glob {glob:?}: {reason}")]
    Glob {
        /// The glob as given.
        glob: String,
        /// Why it does not parse.
        reason: String,
    },
    /// An unknown file type (`type="..."`).
    #[error("{0}")]
    Type(String),
    /// A pattern that does not compile.
    #[error("{0}")]
    Regex(String),
    /// Options that do not go together, or out of range.
    #[error("{0}")]
    Argument(String),
}

/// Order paths component by component (as `Path::cmp` does) but on the raw bytes, which is several
/// times faster: mapping the separator to the lowest byte makes `a/b` sort before `a-b` and `a.b`.
/// Only the first differing byte needs the mapping, so the common prefix is skipped 8 bytes at a time.
pub(crate) fn bytes_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n && a[i..i + 8] == b[i..i + 8] {
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    let key = |c: u8| if c == b'/' { 0 } else { c };
    match (a.get(i), b.get(i)) {
        (Some(&x), Some(&y)) => key(x).cmp(&key(y)),
        _ => a.len().cmp(&b.len()),
    }
}

/// What a walk (and grep's binary check) left out, so the output can say so.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SkipStats {
    /// Entries (a skipped directory counts once) left out by ignore files.
    pub ignored: u64,
    /// Hidden entries left out because `hidden` was off.
    pub hidden: u64,
    /// Files not searched (or not to the end) because they look binary.
    pub binary: u64,
    /// Followed symlinks that resolved outside the roots.
    pub outside_roots: u64,
    /// Unreadable entries, symlink loops, broken links.
    pub errors: u64,
    /// The first few of those errors, as messages (the count above is complete).
    pub first_errors: Vec<String>,
    /// Files searched (grep) or listed candidates (glob).
    pub files: u64,
}

impl SkipStats {
    pub(crate) fn merge(&mut self, other: &SkipStats) {
        self.ignored += other.ignored;
        self.hidden += other.hidden;
        self.binary += other.binary;
        self.outside_roots += other.outside_roots;
        self.errors += other.errors;
        self.files += other.files;
        for e in &other.first_errors {
            if self.first_errors.len() < 5 {
                self.first_errors.push(e.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! Checkpoints of a workspace, and rewind to them.
//!
//! A checkpoint is every path of the workspace with the stamps that tell a change (`scan`) and
//! the bytes of every file, kept in a store outside the workspace as content-defined chunks
//! named by their SHA-256 (`store`), so unchanged files and unchanged parts of changed files
//! cost nothing again; a file whose stamps did not change since the last checkpoint is not even
//! read. Because a checkpoint looks at the workspace itself, it covers every way a file
//! changes: the file tools, a command's `sed -i` or build step, the user's editor. A rewind
//! (`checkpoints`) writes back what changed and removes what was created, through the file
//! layer's transaction: all or nothing, also across a crash. What cannot be put back (a file
//! over the limits, a folder replaced by a link, a symbolic link) is named, never skipped.
//! `manifest` is a checkpoint's on-disk form; `private` keeps the store readable by its owner
//! only.

mod checkpoints;
mod manifest;
mod private;
mod scan;
mod store;

pub use checkpoints::{CheckpointError, Checkpoints, Limits, Rewound, Summary};

//! The confined file layer: every read and write the file tools make, by descriptor beneath the
//! workspace roots.
//!
//! Its modules are private; what the crates above use is the `pub use` list below. From the
//! bottom up: `os` is what differs between systems; `beneath` opens a path beneath one folder's descriptor (the one
//! confinement primitive, also used by the search walker and index); `confine` holds the
//! roots and their access; `error` is the layer's error; `fs` reads (pages, listings, the
//! current bytes of a write's destination); `observe` tells a layer above (the
//! search index) what was written, without knowing it; `hash` is a file content's digest; `session` is the stale-read
//! guard (what a session last read or wrote of each file, checked by the writers, recorded by
//! `txn`); `text_style` keeps a file's encoding and line
//! endings; `txn` commits changes atomically, `journal` is a multi-file commit's record,
//! `durable` issues its syncs together, and `recover` finishes or undoes a commit whose process
//! died. The tools' logic above it (edit, write_file)
//! lives in the `toolroute-edits` crate.

/// Whether this build uses the Linux-only interfaces (`O_PATH`, `openat2`, `O_TMPFILE`, inotify):
/// Linux without the `portable` feature. The crates above ask this instead of deciding again;
/// the search crate's own Linux-only module (the inotify watch) is left out by the same rule
/// (`any(not(target_os = "linux"), feature = "portable")`, its `portable` feature turning this
/// crate's on).
pub const NATIVE_LINUX: bool = cfg!(native_linux);

mod beneath;
mod confine;
mod durable;
mod error;
mod fs;
mod hash;
mod journal;
mod observe;
mod os;
mod recover;
mod session;
mod text_style;
mod txn;

pub use beneath::{fd_path, lexical_join, open_beneath, Root};
pub use confine::{Access, Roots};
pub use error::{ConfineError, FsError};
pub use fs::{
    check_rewrite, check_writable, read_flags, Meta, Original, Page, Permit, ReadOutcome, Target,
};
pub use hash::{digest_parts, ContentDigest};
pub use journal::TEMP_PREFIX;
pub use observe::{install as install_write_observer, WriteObserver};
pub use os::{file_id, handle_flags};
pub use recover::{recover, Recovery};
pub use session::Session;
pub use text_style::{encode_like, BOM_CHAR};
pub use txn::{commit, Change, Durability, Op, TxnError, WriteOptions};

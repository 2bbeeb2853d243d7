//! The confined file layer: every read and write the file tools make, by descriptor beneath the
//! workspace roots.
//!
//! From the bottom up: [`os`] is what differs between systems; [`beneath`] opens a path beneath one folder's descriptor (the one
//! confinement primitive, also used by the search walker and index); [`confine`] holds the
//! roots and their access; [`error`] is the layer's error; [`fs`] reads (pages, listings, the
//! current bytes of a write's destination); [`observe`] tells a layer above (the
//! search index) what was written, without knowing it; [`text_style`] keeps a file's encoding and line
//! endings; [`txn`] commits changes atomically. The tools' logic above it (edit, write_file)
//! lives in the `toolroute-edits` crate.

/// Whether this build uses the Linux-only interfaces (`O_PATH`, `openat2`, `O_TMPFILE`, inotify):
/// Linux without the `portable` feature. The crates above ask this instead of deciding again;
/// the search crate's own Linux-only module (the inotify watch) is left out by the same rule
/// (`any(not(target_os = "linux"), feature = "portable")`, its `portable` feature turning this
/// crate's on).
pub const NATIVE_LINUX: bool = cfg!(native_linux);

pub mod beneath;
pub mod confine;
pub mod error;
pub mod fs;
pub mod observe;
pub mod os;
pub mod text_style;
pub mod txn;

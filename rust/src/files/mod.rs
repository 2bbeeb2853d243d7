//! The confined file layer: every read and write the file tools make, by descriptor beneath the
//! workspace roots.
//!
//! From the bottom up: [`os`] is what differs between systems; [`beneath`] opens a path beneath one folder's descriptor (the one
//! confinement primitive, also used by the search walker and index); [`confine`] holds the
//! roots and their access; [`error`] is the layer's error; [`fs`] reads (pages, listings, the
//! current bytes of a write's destination); [`text_style`] keeps a file's encoding and line
//! endings; [`txn`] commits changes atomically; [`edit`] plans string edits; [`write`] is
//! write_file and edit on disk.

pub mod beneath;
pub mod confine;
pub mod edit;
pub mod error;
pub mod fs;
pub mod os;
pub mod text_style;
pub mod txn;
pub mod write;

//! The Codex-style structured patch: parser and transactional applier (`apply_patch`).
//!
//! `parse` reads the grammar, `seek` finds a chunk's lines with Codex's four matching tiers,
//! `text` keeps each line's own ending, `apply` updates one file's text in memory, and `commit`
//! stages every file before writing any, so a failed patch changes nothing. `v4a` is OpenAI's
//! `apply_patch` tool type: its operations, each a file's V4A diff, applied by the same engine.

mod apply;
mod commit;
mod parse;
mod seek;
mod text;
mod v4a;

pub use apply::{apply_chunks, apply_chunks_as, ChunkError, ChunkReport, Dialect};
pub use commit::{apply_hunks, apply_patch, apply_patch_with, FileReport, Outcome, PatchError};
pub use parse::{
    parse_create_diff, parse_patch, parse_update_diff, Chunk, ChunkLine, Hunk, ParseError,
};
pub use seek::{seek, Tier};
pub use v4a::{apply_v4a, V4aKind, V4aOperation};

#[cfg(test)]
mod tests;

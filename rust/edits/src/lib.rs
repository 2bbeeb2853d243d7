//! The tool logic above the file layer (which stores bytes): [`patch`] is the Codex-style
//! structured patch (`apply_patch`); `edit` plans a string edit in memory, using the patch's seek
//! for its near-miss report; `write` carries edits and writes to disk through the file layer's
//! transaction.

mod edit;
pub mod patch;
mod write;

pub use edit::{plan_edit, EditError, EditPlan, NearMatch};
pub use write::{edit_file, write_bytes, write_text, EditFailure, WriteMode, Written};

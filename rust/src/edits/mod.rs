//! The tool logic of `edit` and `write_file`, above the file layer (which stores bytes) and the
//! patch engine (whose seek the edit's near-miss report uses): [`edit`] plans a string edit in
//! memory, [`write`] carries edits and writes to disk through the file layer's transaction.

pub mod edit;
pub mod write;

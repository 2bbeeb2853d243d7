//! The Codex-style structured patch: parser and transactional applier (`apply_patch`).

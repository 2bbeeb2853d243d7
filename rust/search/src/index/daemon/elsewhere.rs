//! Off Linux there is no index daemon (`enabled` is false): every query is this process's.

use std::ffi::OsString;
use std::io;
use std::time::Duration;

use crate::glob::{GlobOutcome, GlobSort};
use crate::grep::{Grep, GrepOutcome};
use crate::index::IndexStats;
use crate::walker::Walker;

#[allow(dead_code)] // only `Unavailable` is ever given here
pub(crate) enum Answer<T> {
    Indexed(T),
    NotReady,
    Unavailable,
}

/// There is no daemon to start here.
pub fn set_command(_argv: Vec<OsString>) {}

/// No daemon ever answers here.
pub fn answered() -> u64 {
    0
}

/// A daemon cannot be served here (`Unsupported`).
pub fn serve(_name: &str) -> io::Result<bool> {
    Err(io::ErrorKind::Unsupported.into())
}

/// There is no daemon to stop here.
pub fn stop() -> bool {
    false
}

pub(crate) fn grep(_walker: &Walker, _g: &Grep, _pattern: &str) -> Answer<GrepOutcome> {
    Answer::Unavailable
}

pub(crate) fn glob(_walker: &Walker, _sort: GlobSort) -> Answer<GlobOutcome> {
    Answer::Unavailable
}

pub(crate) fn scanned(_walker: &Walker) {}

/// There is no daemon to start here.
pub(crate) fn start() {}

pub(crate) fn warm(_walker: &Walker, _timeout: Duration) -> Option<bool> {
    None
}

pub(crate) fn stats(_walker: &Walker) -> Option<IndexStats> {
    None
}

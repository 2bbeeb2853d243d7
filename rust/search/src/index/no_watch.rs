//! Where there is no inotify (other systems, the `portable` build) there is no watch: `start`
//! fails, and the index checks folders and files by their stamps before each answer
//! (`validate.rs`), as it does on Linux when watches run out. `Watch` has no values, so the
//! methods below are never reached.

use std::path::Path;

pub(crate) use super::mark::Mark;

pub(crate) enum Watch {}

impl Watch {
    pub(crate) fn start(_root: &Path, _sink: Box<dyn Fn(Mark) + Send>) -> std::io::Result<Self> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "no file-change watch on this system",
        ))
    }

    pub(crate) fn add(&self, _dir: &Path) -> std::io::Result<()> {
        match *self {}
    }

    pub(crate) fn barrier(&self) -> bool {
        match *self {}
    }

    pub(crate) fn watched(&self) -> usize {
        match *self {}
    }
}

//! The store is private to its owner: folders `0700`, files `0600`, whatever the umask.
//!
//! A checkpoint copies the bytes of every file of the workspace, including files only their
//! owner may read (a `0600` key, or a hard link a command planted to a private file elsewhere),
//! so the store must keep what it copies as private as the most private file it may hold. Stores
//! made before this (packs `0644`) are tightened when opened.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of the store's folders.
pub const FOLDER_MODE: u32 = 0o700;
/// The mode of the store's files.
pub const FILE_MODE: u32 = 0o600;

/// Make `path` and its missing parents, private.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(FOLDER_MODE)
        .create(path)
}

/// Options that create a private file (the mode applies when the file is made).
pub fn options() -> fs::OpenOptions {
    let mut options = fs::OpenOptions::new();
    options.mode(FILE_MODE);
    options
}

/// Write `bytes` to a new private file at `path` (one left there by a dead writer is replaced).
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    io::Write::write_all(
        &mut options().write(true).create_new(true).open(path)?,
        bytes,
    )
}

/// Deepest folder of a store (`<store>/packs/<file>`): the walk goes no further.
const DEPTH: usize = 2;

/// Take away from `dir` (a store) and everything in it any permission beyond its owner's.
/// Links are never followed (nor changed); a file is changed through its open descriptor.
pub fn tighten(dir: &Path) -> io::Result<()> {
    tighten_in(dir, 0)
}

fn tighten_in(dir: &Path, depth: usize) -> io::Result<()> {
    restrict(dir, FOLDER_MODE)?;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() && depth < DEPTH {
            tighten_in(&entry.path(), depth + 1)?;
        } else if kind.is_file() {
            restrict(&entry.path(), FILE_MODE)?;
        }
    }
    Ok(())
}

/// Give `path` (never through a link) at most `mode`.
fn restrict(path: &Path, mode: u32) -> io::Result<()> {
    let flags = (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32;
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
    {
        Ok(f) => f,
        // Gone meanwhile (a concurrent sweep), or a link put there: nothing to tighten.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => return Ok(()),
        Err(e) => return Err(e),
    };
    let current = file.metadata()?.permissions().mode() & 0o7777;
    if current & !mode != 0 {
        file.set_permissions(fs::Permissions::from_mode(current & mode))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn what_the_store_makes_is_private_whatever_the_umask() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join("a/b");
        create_dir_all(&store).unwrap();
        write_new(&store.join("f"), b"secret").unwrap();
        assert_eq!(mode(&d.path().join("a")), FOLDER_MODE);
        assert_eq!(mode(&store), FOLDER_MODE);
        assert_eq!(mode(&store.join("f")), FILE_MODE);
    }

    #[test]
    fn an_old_store_is_tightened_and_links_in_it_are_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join("store");
        fs::create_dir_all(store.join("packs")).unwrap();
        fs::write(store.join("packs/1.pack"), b"bytes").unwrap();
        fs::write(store.join("lock"), b"").unwrap();
        let outside = d.path().join("outside");
        fs::write(&outside, b"not the store's").unwrap();
        std::os::unix::fs::symlink(&outside, store.join("packs/link")).unwrap();
        for p in [&store, &store.join("packs")] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
        }
        for p in [&store.join("packs/1.pack"), &store.join("lock"), &outside] {
            fs::set_permissions(p, fs::Permissions::from_mode(0o644)).unwrap();
        }
        tighten(&store).unwrap();
        assert_eq!(mode(&store), 0o700);
        assert_eq!(mode(&store.join("packs")), 0o700);
        assert_eq!(mode(&store.join("packs/1.pack")), 0o600);
        assert_eq!(mode(&store.join("lock")), 0o600);
        assert_eq!(mode(&outside), 0o644);
    }
}

//! Files only we may read, beneath a private folder's descriptor: the index cache's files
//! (`cache.rs`) and the index daemon's key (`daemon::place`). One place says what "ours alone"
//! means, and how such a file is written whole: under a temporary name, then renamed.

use std::io::Write;
use std::os::fd::AsFd;

use rustix::fs::{openat, renameat, unlinkat, AtFlags, FileType, Mode, OFlags, Stat};

/// How a temporary file's name starts (`.tmp-<pid>-<name>`): the cache's sweep removes one
/// whose writer has ended.
pub(crate) const TEMP_PREFIX: &[u8] = b".tmp-";

/// Owned by our effective uid, and nobody else may read, write or enter it.
pub(crate) fn ours_alone(st: &Stat) -> bool {
    st.st_uid == rustix::process::geteuid().as_raw() && st.st_mode & 0o077 == 0
}

/// A plain file (not a link, FIFO or device) that is ours alone.
pub(crate) fn private_file(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && ours_alone(st)
}

/// How a file of ours is opened for reading beneath a folder: never through a link, never
/// blocking on a FIFO someone left under its name.
pub(crate) const READ: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC);

/// Write `parts` as the file `name` beneath `dir` (0600), whole or not at all: a reader sees
/// the old file or the new one, never part of one. On failure nothing new is left behind.
pub(crate) fn write_whole(dir: impl AsFd, name: &str, parts: &[&[u8]]) -> std::io::Result<()> {
    let dir = dir.as_fd();
    let prefix = std::str::from_utf8(TEMP_PREFIX).expect("ASCII");
    let temp = format!("{prefix}{}-{name}", std::process::id());
    // One a crash of an earlier process with our pid left would stop O_EXCL.
    let _ = unlinkat(dir, temp.as_str(), AtFlags::empty());
    let written = (|| -> std::io::Result<()> {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = openat(dir, temp.as_str(), flags, Mode::from_raw_mode(0o600))?;
        let mut file = std::io::BufWriter::new(std::fs::File::from(fd));
        for part in parts {
            file.write_all(part)?;
        }
        file.into_inner().map_err(|e| e.into_error())?;
        renameat(dir, temp.as_str(), dir, name)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = unlinkat(dir, temp.as_str(), AtFlags::empty());
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{fstat, statat};
    use std::os::fd::OwnedFd;
    use std::os::unix::fs::PermissionsExt;

    fn folder() -> (tempfile::TempDir, OwnedFd) {
        let dir = tempfile::tempdir().unwrap();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(dir.path(), flags, Mode::empty()).unwrap();
        (dir, fd)
    }

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_is_written_whole_and_private_and_replaces_the_old_one() {
        let (path, dir) = folder();
        write_whole(&dir, "a", &[b"old"]).unwrap();
        write_whole(&dir, "a", &[b"new ", b"parts"]).unwrap();
        assert_eq!(std::fs::read(path.path().join("a")).unwrap(), b"new parts");
        let fd = openat(&dir, "a", READ, Mode::empty()).unwrap();
        assert!(private_file(&fstat(&fd).unwrap()));
        assert_eq!(names(path.path()), ["a"]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary_one() {
        let (path, dir) = folder();
        write_whole(&dir, "a", &[b"old"]).unwrap();
        // The rename cannot replace a folder: the write fails at its last step.
        std::fs::create_dir(path.path().join("b")).unwrap();
        std::fs::write(path.path().join("b/inside"), b"x").unwrap();
        assert!(write_whole(&dir, "b", &[b"new"]).is_err());
        assert_eq!(names(path.path()), ["a", "b"]);
        assert_eq!(std::fs::read(path.path().join("a")).unwrap(), b"old");
    }

    #[test]
    fn a_temporary_file_a_crash_left_under_our_pid_does_not_stop_a_write() {
        let (path, dir) = folder();
        let temp = format!(".tmp-{}-a", std::process::id());
        std::fs::write(path.path().join(&temp), b"half").unwrap();
        write_whole(&dir, "a", &[b"whole"]).unwrap();
        assert_eq!(std::fs::read(path.path().join("a")).unwrap(), b"whole");
        assert_eq!(names(path.path()), ["a"]);
    }

    #[test]
    fn only_a_plain_file_nobody_else_may_read_is_private() {
        let (path, dir) = folder();
        std::fs::write(path.path().join("open"), b"x").unwrap();
        let mode = std::fs::Permissions::from_mode(0o640);
        std::fs::set_permissions(path.path().join("open"), mode).unwrap();
        let open = statat(&dir, "open", AtFlags::SYMLINK_NOFOLLOW).unwrap();
        std::os::unix::fs::symlink("open", path.path().join("link")).unwrap();
        let link = statat(&dir, "link", AtFlags::SYMLINK_NOFOLLOW).unwrap();
        write_whole(&dir, "closed", &[b"x"]).unwrap();
        let closed = statat(&dir, "closed", AtFlags::SYMLINK_NOFOLLOW).unwrap();
        assert!(!private_file(&open));
        assert!(!private_file(&link));
        assert!(private_file(&closed));
        assert!(openat(&dir, "link", READ, Mode::empty()).is_err());
        // Another user's file, however closed, is not ours (only root can make one here).
        if rustix::process::geteuid().is_root() {
            write_whole(&dir, "theirs", &[b"x"]).unwrap();
            let uid = Some(rustix::process::Uid::from_raw(1000));
            rustix::fs::chownat(&dir, "theirs", uid, None, AtFlags::empty()).unwrap();
            let theirs = statat(&dir, "theirs", AtFlags::SYMLINK_NOFOLLOW).unwrap();
            assert!(!private_file(&theirs));
        }
    }
}

//! Making writes durable: fsyncs issued together, and the syncs of folders.
//!
//! A transaction waits for the disk twice at most (see [`crate::txn`]): once for every new file
//! and its journal, once for the folders its renames changed. Each wait is one *wave*: every
//! sync of it is issued at once, on threads of their own, so the file system and the device
//! serve them together (ext4 joins concurrent fsyncs in one journal commit, the block layer
//! merges their cache flushes) instead of one after the other.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{fstat, openat, Mode, OFlags};

/// Most threads one wave starts: past it, each thread syncs several descriptors in turn.
const MAX_THREADS: usize = 64;

/// What a sync must make durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sync {
    /// Data and every piece of metadata (owner, mode: a new file's `fchown`/`fchmod`).
    All,
    /// Data, and the metadata needed to read it back (a journal: its size).
    Data,
}

fn sync_one(fd: BorrowedFd<'_>, how: Sync) -> io::Result<()> {
    match how {
        Sync::All => rustix::fs::fsync(fd),
        Sync::Data => crate::os::sync_data(fd),
    }
    .map_err(io::Error::from)
}

/// One piece of a wave: a system call that waits for the disk.
pub(crate) type Job<'a> = Box<dyn FnOnce() -> io::Result<()> + Send + 'a>;

/// A job that syncs `fd`.
pub(crate) fn sync(fd: BorrowedFd<'_>, how: Sync) -> Job<'_> {
    Box::new(move || sync_one(fd, how))
}

/// A job that closes `fd`: the last reference to a replaced file, whose blocks the file system
/// then frees (a discard on a disk mounted with `discard`, milliseconds each, done in parallel).
pub(crate) fn release<'a>(fd: OwnedFd) -> Job<'a> {
    Box::new(move || {
        drop(fd);
        Ok(())
    })
}

/// Run every job at once; returns when all are done. On failure, the position of one that
/// failed and why (the others still ran). The first ones run on the calling thread.
pub(crate) fn together(jobs: Vec<Job<'_>>) -> Result<(), (usize, io::Error)> {
    type Chunk<'a> = Vec<(usize, Job<'a>)>;
    let run = |chunk: Chunk<'_>| {
        let mut failed = None;
        for (i, job) in chunk {
            if let Err(e) = job() {
                failed = failed.or(Some((i, e)));
            }
        }
        failed
    };
    let per_thread = jobs.len().div_ceil(MAX_THREADS).max(1);
    let mut chunks: Vec<Chunk<'_>> = Vec::new();
    for (i, job) in jobs.into_iter().enumerate() {
        if i % per_thread == 0 {
            chunks.push(Vec::with_capacity(per_thread));
        }
        chunks.last_mut().expect("pushed above").push((i, job));
    }
    let mut chunks = chunks.into_iter();
    let Some(mine) = chunks.next() else {
        return Ok(());
    };
    let failed = std::thread::scope(|scope| {
        let mut waits = Vec::new();
        let mut here = Vec::new();
        for chunk in chunks {
            // A small stack: the thread only makes a system call or a few. Its chunk comes
            // back when no thread can be had (a process limit): this one runs it then.
            let (tx, rx) = std::sync::mpsc::sync_channel::<Chunk<'_>>(1);
            let spawned = std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn_scoped(scope, move || rx.recv().ok().and_then(run));
            match spawned {
                Ok(handle) => {
                    let _ = tx.send(chunk);
                    waits.push(handle);
                }
                Err(_) => here.push(chunk),
            }
        }
        let mut failed = run(mine);
        for chunk in here {
            failed = failed.or(run(chunk));
        }
        for handle in waits {
            let result = handle
                .join()
                .unwrap_or_else(|_| Some((0, io::Error::other("a sync thread panicked"))));
            failed = failed.or(result);
        }
        failed
    });
    failed.map_or(Ok(()), Err)
}

/// A folder opened so it can be synced (a handle made for lookups, `O_PATH`, cannot be).
pub(crate) fn open_folder(dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(openat(dir, ".", flags, Mode::empty())?)
}

/// The distinct folders among `dirs` (by device and inode), opened to be synced; one that
/// cannot be opened is left out (a sync that cannot be made does not undo a write).
pub(crate) fn distinct_folders<'a>(dirs: impl IntoIterator<Item = BorrowedFd<'a>>) -> Vec<OwnedFd> {
    let mut seen: Vec<(u64, u64)> = Vec::new();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(st) = fstat(dir) else { continue };
        let id = crate::os::file_id(&st);
        if !seen.contains(&id) {
            seen.push(id);
            if let Ok(fd) = open_folder(dir) {
                out.push(fd);
            }
        }
    }
    out
}

/// Sync the folders, together (a failure is not reported: the renames are done either way).
pub(crate) fn sync_folders(folders: &[OwnedFd]) {
    let _ = together(folders.iter().map(|f| sync(f.as_fd(), Sync::All)).collect());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wave_syncs_every_descriptor_and_names_the_one_that_failed() {
        let d = tempfile::tempdir().unwrap();
        let files: Vec<std::fs::File> = (0..100)
            .map(|i| std::fs::File::create(d.path().join(format!("f{i}"))).unwrap())
            .collect();
        let jobs = || {
            files
                .iter()
                .map(|f| sync(f.as_fd(), Sync::All))
                .collect::<Vec<_>>()
        };
        assert!(together(jobs()).is_ok());
        // A socket cannot be synced (EINVAL): its place in the wave is reported.
        let (socket, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut wave = jobs();
        wave[77] = sync(socket.as_fd(), Sync::Data);
        let (at, _) = together(wave).unwrap_err();
        assert_eq!(at, 77);
    }

    #[test]
    fn folders_are_synced_once_each() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let a = std::fs::File::open(d.path()).unwrap();
        let b = std::fs::File::open(d.path()).unwrap();
        let c = std::fs::File::open(d.path().join("sub")).unwrap();
        let folders = distinct_folders([a.as_fd(), b.as_fd(), c.as_fd()]);
        assert_eq!(folders.len(), 2);
        sync_folders(&folders);
    }
}

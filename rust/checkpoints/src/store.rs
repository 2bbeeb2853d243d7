//! The chunk store: file contents cut at content-defined boundaries (FastCDC), each chunk kept
//! once under the SHA-256 of its bytes. A file edited in one place shares all but a chunk or two
//! with its previous version, so many versions of a large file cost little more than one.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest as _, Sha256};

/// A chunk's name: the SHA-256 of its bytes.
pub type ChunkId = [u8; 32];

/// Content-defined chunk sizes: small enough that an edit costs a few KiB, large enough that a
/// chunk list stays short (64 ids for a 1 MiB file).
const MIN_CHUNK: u32 = 4 * 1024;
const AVG_CHUNK: u32 = 16 * 1024;
const MAX_CHUNK: u32 = 64 * 1024;

/// The chunks of `bytes`, in order.
pub fn cut(bytes: &[u8]) -> Vec<&[u8]> {
    if bytes.len() <= MIN_CHUNK as usize {
        return vec![bytes];
    }
    fastcdc::v2020::FastCDC::new(bytes, MIN_CHUNK, AVG_CHUNK, MAX_CHUNK)
        .map(|c| &bytes[c.offset..c.offset + c.length])
        .collect()
}

/// The SHA-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> ChunkId {
    Sha256::digest(bytes).into()
}

/// A folder of chunks (`objects/ab/cdef…`).
#[derive(Debug)]
pub struct Store {
    objects: PathBuf,
    /// Bytes held, as counted when opened and kept since.
    bytes: AtomicU64,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// Open (making it if needed) the store under `dir`.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let objects = dir.join("objects");
        fs::create_dir_all(&objects)?;
        let mut bytes = 0;
        for shard in fs::read_dir(&objects)? {
            let shard = shard?;
            if shard.file_type()?.is_dir() {
                for obj in fs::read_dir(shard.path())? {
                    bytes += obj?.metadata()?.len();
                }
            } else {
                // A temp a killed process left.
                let _ = fs::remove_file(shard.path());
            }
        }
        Ok(Self {
            objects,
            bytes: AtomicU64::new(bytes),
        })
    }

    /// Bytes the store holds.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn path_of(&self, id: &ChunkId) -> PathBuf {
        let hex = toolroute_digest::hex(id);
        self.objects.join(&hex[..2]).join(&hex[2..])
    }

    /// Keep `bytes` (once): its id, and how many bytes the store grew by.
    pub fn put(&self, bytes: &[u8]) -> io::Result<(ChunkId, u64)> {
        let id = digest(bytes);
        let path = self.path_of(&id);
        if path.exists() {
            return Ok((id, 0));
        }
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = self.objects.join(format!("tmp-{}-{n}", std::process::id()));
        let mut f = fs::File::create(&temp)?;
        let written = f.write_all(bytes).and_then(|_| {
            if let Some(shard) = path.parent() {
                fs::create_dir_all(shard)?;
            }
            fs::rename(&temp, &path)
        });
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok((id, bytes.len() as u64))
    }

    /// The chunk `id`, checked against its name (a store damaged on disk is refused, never
    /// restored from).
    pub fn get(&self, id: &ChunkId) -> io::Result<Vec<u8>> {
        let bytes = fs::read(self.path_of(id))?;
        if digest(&bytes) != *id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "chunk {} of the checkpoint store is damaged",
                    toolroute_digest::hex(id)
                ),
            ));
        }
        Ok(bytes)
    }

    /// Remove every chunk not in `live`; the bytes freed.
    pub fn sweep(&self, live: &HashSet<ChunkId>) -> io::Result<u64> {
        let live: HashSet<String> = live.iter().map(|id| toolroute_digest::hex(id)).collect();
        let mut freed = 0;
        for shard in fs::read_dir(&self.objects)? {
            let shard = shard?;
            if !shard.file_type()?.is_dir() {
                continue;
            }
            let prefix = shard.file_name();
            for obj in fs::read_dir(shard.path())? {
                let obj = obj?;
                let name = format!(
                    "{}{}",
                    prefix.to_string_lossy(),
                    obj.file_name().to_string_lossy()
                );
                if !live.contains(&name) {
                    let len = obj.metadata()?.len();
                    fs::remove_file(obj.path())?;
                    freed += len;
                }
            }
        }
        self.bytes
            .fetch_sub(freed.min(self.bytes()), Ordering::Relaxed);
        Ok(freed)
    }
}

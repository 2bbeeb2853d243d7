//! The chunk store: file contents cut at content-defined boundaries (FastCDC), each chunk kept
//! once under the SHA-256 of its bytes. A file edited in one place shares all but a chunk or two
//! with its previous version, so many versions of a large file cost little more than one.
//!
//! Chunks are appended to pack files, one per checkpoint that adds any (`packs/<n>.pack`), each
//! with an index written after it (`<n>.idx`: id, offset and length of every chunk): creating a
//! file costs far more than appending to one, so a first checkpoint of 2,000 files makes two
//! files, not 2,000. A pack without its index is the leftover of a checkpoint that died before
//! it was written, and is removed. When checkpoints go, packs whose chunks are all unused are
//! removed and packs mostly unused are rewritten with the rest (the newest pack excepted: pack
//! numbers are never reused, see [`Store::sweep`]).
//!
//! The store is changed only under its owner's lock (`Checkpoints`), and [`Store::refresh`]
//! rereads the indexes another process may have changed since.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use sha2::{Digest as _, Sha256};

/// A chunk's name: the SHA-256 of its bytes.
pub type ChunkId = [u8; 32];

/// Content-defined chunk sizes: small enough that an edit costs a few KiB, large enough that a
/// chunk list stays short (64 ids for a 1 MiB file).
const MIN_CHUNK: u32 = 4 * 1024;
const AVG_CHUNK: u32 = 16 * 1024;
const MAX_CHUNK: u32 = 64 * 1024;

const INDEX_MAGIC: &[u8] = b"toolroute-pack-index 1\n";
const ENTRY: usize = 32 + 8 + 4;

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

/// Where a chunk is.
#[derive(Debug, Clone, Copy)]
struct Loc {
    pack: u64,
    offset: u64,
    len: u32,
}

#[derive(Debug, Default)]
struct Index {
    chunks: HashMap<ChunkId, Loc>,
    /// Each pack's size on disk.
    packs: HashMap<u64, u64>,
}

/// A folder of packs.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    index: Mutex<Index>,
}

fn damaged(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

impl Store {
    /// Open (making it if needed) the store under `dir`. Call under the owner's lock: leftovers
    /// of a dead writer are removed.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let dir = dir.join("packs");
        crate::private::create_dir_all(&dir)?;
        let store = Self {
            dir,
            index: Mutex::default(),
        };
        store.refresh()?;
        Ok(store)
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pack_path(&self, pack: u64, ext: &str) -> PathBuf {
        self.dir.join(format!("{pack:020}.{ext}"))
    }

    /// Reread every pack index (another process may have added or removed packs), and remove
    /// packs without an index and temps (call under the owner's lock).
    pub fn refresh(&self) -> io::Result<()> {
        let mut indexed = HashSet::new();
        let mut others = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let path = e?.path();
            let number = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u64>().ok());
            match (number, path.extension().and_then(|x| x.to_str())) {
                (Some(n), Some("idx")) => {
                    indexed.insert(n);
                }
                _ => others.push((number, path)),
            }
        }
        for (number, path) in others {
            let is_indexed_pack = number.is_some_and(|n| indexed.contains(&n))
                && path.extension().is_some_and(|x| x == "pack");
            if !is_indexed_pack {
                let _ = fs::remove_file(&path);
            }
        }
        if self.index().packs.keys().copied().collect::<HashSet<u64>>() == indexed {
            return Ok(()); // no pack came or went since
        }
        let mut index = Index::default();
        for n in indexed {
            let size = fs::metadata(self.pack_path(n, "pack"))?.len();
            let bytes = fs::read(self.pack_path(n, "idx"))?;
            let body = bytes
                .strip_prefix(INDEX_MAGIC)
                .filter(|b| b.len() % ENTRY == 0)
                .ok_or_else(|| {
                    damaged(format!("pack index {n} of the checkpoint store is damaged"))
                })?;
            for e in body.chunks_exact(ENTRY) {
                let id: ChunkId = e[..32].try_into().expect("32 bytes");
                let offset = u64::from_le_bytes(e[32..40].try_into().expect("8 bytes"));
                let len = u32::from_le_bytes(e[40..44].try_into().expect("4 bytes"));
                index.chunks.entry(id).or_insert(Loc {
                    pack: n,
                    offset,
                    len,
                });
            }
            index.packs.insert(n, size);
        }
        *self.index() = index;
        Ok(())
    }

    /// Bytes the store holds.
    pub fn bytes(&self) -> u64 {
        self.index().packs.values().sum()
    }

    /// Start adding chunks (one pack, made on the first new chunk).
    pub fn writer(&self) -> Writer<'_> {
        // (Under the owner's lock: no other writer picks the same number.)
        let pack = self.index().packs.keys().max().map_or(1, |m| m + 1);
        Writer {
            store: self,
            pack,
            file: None,
            offset: 0,
            added: HashMap::new(),
        }
    }

    /// The chunk `id`, checked against its name (a store damaged on disk is refused, never
    /// restored from).
    pub fn get(&self, id: &ChunkId) -> io::Result<Vec<u8>> {
        let loc = self.index().chunks.get(id).copied().ok_or_else(|| {
            damaged(format!(
                "chunk {} is missing from the checkpoint store",
                toolroute_digest::hex(id)
            ))
        })?;
        let file = fs::File::open(self.pack_path(loc.pack, "pack"))?;
        let mut bytes = vec![0; loc.len as usize];
        file.read_exact_at(&mut bytes, loc.offset)?;
        if digest(&bytes) != *id {
            return Err(damaged(format!(
                "chunk {} of the checkpoint store is damaged",
                toolroute_digest::hex(id)
            )));
        }
        Ok(bytes)
    }

    /// Drop what nothing in `live` names: packs with no live chunk are removed, packs less than
    /// half live are rewritten with their live chunks. The bytes freed.
    pub fn sweep(&self, live: &HashSet<ChunkId>) -> io::Result<u64> {
        let before = self.bytes();
        let (chunks, packs) = {
            let index = self.index();
            (index.chunks.clone(), index.packs.clone())
        };
        // Live chunks counted, not only their bytes: the empty file's chunk is 0 bytes long.
        let mut live_in: HashMap<u64, (usize, u64)> = HashMap::new();
        for (id, loc) in &chunks {
            if live.contains(id) {
                let (count, bytes) = live_in.entry(loc.pack).or_default();
                *count += 1;
                *bytes += u64::from(loc.len);
            }
        }
        // The newest pack stays whatever it holds: the greatest number on disk never goes down,
        // so a number is never given to a second pack, and another process's index is current
        // when the numbers on disk are the ones it knows (`refresh`).
        let newest = packs.keys().max().copied();
        let mut rewrite: Vec<(ChunkId, Loc)> = Vec::new();
        let mut gone: Vec<u64> = Vec::new();
        for (&pack, &size) in packs.iter().filter(|(&p, _)| Some(p) != newest) {
            let (count, used) = live_in.get(&pack).copied().unwrap_or((0, 0));
            if count == 0 {
                gone.push(pack);
            } else if used * 2 < size {
                gone.push(pack);
                rewrite.extend(
                    chunks
                        .iter()
                        .filter(|(id, loc)| loc.pack == pack && live.contains(*id))
                        .map(|(id, loc)| (*id, *loc)),
                );
            }
        }
        if !rewrite.is_empty() {
            let mut w = self.writer();
            for (id, loc) in &rewrite {
                let file = fs::File::open(self.pack_path(loc.pack, "pack"))?;
                let mut bytes = vec![0; loc.len as usize];
                file.read_exact_at(&mut bytes, loc.offset)?;
                w.append(*id, &bytes)?;
            }
            w.finish()?; // the copies are indexed before their old packs go
        }
        for pack in &gone {
            // The index first: a pack without one is a leftover, removed at the next refresh.
            fs::remove_file(self.pack_path(*pack, "idx"))?;
            let _ = fs::remove_file(self.pack_path(*pack, "pack"));
        }
        self.refresh()?;
        Ok(before.saturating_sub(self.bytes()))
    }
}

/// Chunks being added by one checkpoint: visible to others only after [`Writer::finish`].
pub struct Writer<'s> {
    store: &'s Store,
    pack: u64,
    file: Option<fs::File>,
    offset: u64,
    added: HashMap<ChunkId, Loc>,
}

impl Writer<'_> {
    /// Keep `bytes` (once): its id, and how many bytes the store grew by.
    pub fn put(&mut self, bytes: &[u8]) -> io::Result<(ChunkId, u64)> {
        let id = digest(bytes);
        if self.added.contains_key(&id) || self.store.index().chunks.contains_key(&id) {
            return Ok((id, 0));
        }
        self.append(id, bytes)?;
        Ok((id, bytes.len() as u64))
    }

    fn append(&mut self, id: ChunkId, bytes: &[u8]) -> io::Result<()> {
        if self.file.is_none() {
            let path = self.store.pack_path(self.pack, "pack");
            self.file = Some(
                crate::private::options()
                    .write(true)
                    .create_new(true)
                    .open(path)?,
            );
        }
        let file = self.file.as_mut().expect("opened above");
        file.write_all(bytes)?;
        let len = u32::try_from(bytes.len()).map_err(|_| damaged("chunk too large".into()))?;
        self.added.insert(
            id,
            Loc {
                pack: self.pack,
                offset: self.offset,
                len,
            },
        );
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Write the pack's index (to a temp, then renamed: the pack counts only once it is
    /// complete) and make its chunks visible.
    pub fn finish(mut self) -> io::Result<()> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        // No fsync: a checkpoint is for undoing an agent's changes, and a pack damaged by a power
        // loss is refused by its digests, never restored from.
        drop(file);
        let mut out = INDEX_MAGIC.to_vec();
        for (id, loc) in &self.added {
            out.extend_from_slice(id);
            out.extend_from_slice(&loc.offset.to_le_bytes());
            out.extend_from_slice(&loc.len.to_le_bytes());
        }
        let path = self.store.pack_path(self.pack, "idx");
        let temp = path.with_extension("idx-tmp");
        crate::private::write_new(&temp, &out).and_then(|_| fs::rename(&temp, &path))?;
        let mut index = self.store.index();
        index.packs.insert(self.pack, self.offset);
        index.chunks.extend(self.added.drain());
        Ok(())
    }
}

impl Drop for Writer<'_> {
    /// A writer dropped without finishing (a failed checkpoint) leaves nothing behind.
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(self.store.pack_path(self.pack, "pack"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(store: &Store, chunks: &[&[u8]]) -> Vec<ChunkId> {
        let mut w = store.writer();
        let ids = chunks.iter().map(|c| w.put(c).unwrap().0).collect();
        w.finish().unwrap();
        ids
    }

    #[test]
    fn a_pack_whose_only_live_chunk_is_empty_is_kept() {
        let base = tempfile::tempdir().unwrap();
        let store = Store::open(base.path()).unwrap();
        let ids = keep(&store, &[b"", b"dead bytes"]);
        let later = keep(&store, &[b"later"]); // (the newest pack is kept whatever it holds)
        store.sweep(&HashSet::from([ids[0], later[0]])).unwrap();
        assert_eq!(store.get(&ids[0]).unwrap(), b"");
    }

    #[test]
    fn a_removed_packs_number_is_never_given_to_a_new_one() {
        // Two processes' views of one store: the second must see every chunk the first adds.
        let base = tempfile::tempdir().unwrap();
        let first = Store::open(base.path()).unwrap();
        let x = keep(&first, &[b"x"]);
        keep(&first, &[b"y"]);
        let second = Store::open(base.path()).unwrap();
        first.sweep(&x.iter().copied().collect()).unwrap(); // the newest pack (y's) is all dead
        let z = keep(&first, &[b"z"]);
        second.refresh().unwrap();
        assert_eq!(second.get(&z[0]).unwrap(), b"z");
        assert_eq!(second.get(&x[0]).unwrap(), b"x");
    }
}
